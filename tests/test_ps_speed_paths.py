"""The fast paths of parameter-server training and the guarantees they keep.

* Sync replicas' ops declare in the op table that they wait only for other steps of their
  protocol (``waits="steps"``), so sync steps run on the direct data plane; a token wait there
  still gives up when its step times out or a worker of the step is lost, and a given-up wait
  takes no token.
* A training loop of ``run_replicas`` runs on the direct plane from its first step unless an
  op of the step may block on a queue (``may_block``).
* SGD's and Adagrad's sparse updates sum repeated rows on the worker: the bytes sent to the PS
  per step scale with the distinct rows of the batch.
* Dense Momentum/Adam updates on a PS write the slots (accumulators, moments) into their own
  buffers step after step, and give the in-process run's bits.
"""
import numpy as np
import pytest
import tensorvm as tv
from tensorvm.framework.op_def_library import apply_op
from tensorvm.runtime.direct.registered_plans import op_waits
from tensorvm.framework.op_registry import get_op_def, register_op
from tensorvm.train.replicas import may_block

TV_CLUSTER = {"ps": 1, "worker": 2}
pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")

# ---- the op table's fact ----------------------------------------------------------------------


def test_sync_ops_declare_how_they_wait():
    assert [get_op_def(t).waits for t in ("SyncAccApply", "SyncAccTake", "SyncTokenWait")] == \
        ["steps"] * 3
    assert [get_op_def(t).waits for t in ("SyncAccSetStep", "SyncTokenRelease",
                                          "SyncClose")] == ["never"] * 3
    assert not any(op_waits(t) for t in ("SyncTokenWait", "SyncAccTake", "AssignAdd"))
    assert op_waits("QueueDequeueV2")  # undeclared: blocks like a queue
    with pytest.raises(ValueError, match="waits must be one of"):
        register_op("TvmTestBadWaits", lambda i, a: [], waits="sometimes")


def test_may_block_follows_inputs_and_control_inputs():
    g = tv.Graph()
    with g.as_default():
        q = tv.FIFOQueue(4, [tv.float32])
        w = tv.Variable(1.0)
        with tv.control_dependencies([q.dequeue()]):
            after_dequeue = w.assign_add(1.0)
        gs = tv.train.get_or_create_global_step()
        opt = tv.train.SyncReplicasOptimizer(tv.train.GradientDescentOptimizer(0.1), 1, 1)
        train = opt.minimize((w.value() - 3.0) ** 2, global_step=gs)
        assert may_block(after_dequeue)
        assert not may_block(train) and not may_block(opt.chief_train_op)
        assert not may_block(w.assign_add(1.0))


# ---- sparse bytes -----------------------------------------------------------------------------


def _bytes_to_ps(ids, opt):
    """Bytes one traced step of an embedding model (a table partitioned over 2 PS tasks)
    sends to the PS devices."""
    g = tv.Graph()
    with g.as_default(), tv.device(tv.train.replica_device_setter(
            ps_tasks=2, worker_device="/job:worker/task:0")):
        table = tv.train.partitioned_variable(
            "emb", (1000, 16), partitioner=tv.train.fixed_size_partitioner(2),
            initializer=np.ones((1000, 16), np.float32))
        e = tv.nn.embedding_lookup(table, tv.constant(np.asarray(ids, np.int64)),
                                   partition_strategy="div")
        train = opt.minimize(tv.reduce_sum(e * e))
        init = tv.global_variables_initializer()
    md = tv.RunMetadata()
    with tv.Session(graph=g) as s:
        s.run(init)
        s.run(train, options=tv.RunOptions(trace=True), run_metadata=md)
        values = s.run(table.as_tensor())
    return int(sum(x["bytes"] or 0 for x in md.sends if "/job:ps/" in x["dst"])), values


@pytest.mark.parametrize("make_opt", [lambda: tv.train.GradientDescentOptimizer(0.01),
                                      lambda: tv.train.AdagradOptimizer(0.01)],
                         ids=["sgd", "adagrad"])
def test_sparse_updates_send_each_touched_row_once(make_opt):
    repeated = [3] * 128 + [700] * 128  # 256 lookups of 2 rows, one on each PS task
    sent_repeated, after_repeated = _bytes_to_ps(repeated, make_opt())
    sent_two, _ = _bytes_to_ps([3, 700], make_opt())
    sent_distinct, _ = _bytes_to_ps(np.arange(256) * 3, make_opt())
    # the lookup sends each id to its PS task (8 bytes); the gradient one row per distinct id
    ids_bytes = 8
    grad_repeated = sent_repeated - 256 * ids_bytes
    assert grad_repeated == sent_two - 2 * ids_bytes == 2 * (16 * 4 + 8)
    assert sent_distinct - 256 * ids_bytes == 256 * (16 * 4 + 8)
    # and the update is the summed one: d/de sum(e^2) = 2e per lookup, 128 lookups per row
    table = np.ones((1000, 16), np.float32)
    if isinstance(make_opt(), tv.train.AdagradOptimizer):
        g = np.float32(256.0)
        expect = 1.0 - 0.01 * g / np.sqrt(0.1 + g * g)
    else:
        expect = 1.0 - 0.01 * 256.0
    table[[3, 700]] = expect
    np.testing.assert_allclose(after_repeated, table, rtol=1e-5)


# ---- dense updates on the PS: slots in place --------------------------------------------------


def _ps_slot_buffers(names, dask_worker=None):
    """``{name: address of its value's buffer}`` of the variables ``names`` on this worker."""
    from tensorvm.ops.state.state_ops import VariableState
    res = dask_worker.extensions["tensorvm"].resources
    return {r.name: r.value.ctypes.data for m in res._mgrs.values() for r in m._res.values()
            if isinstance(r, VariableState) and r.name in names and r.value is not None}


def _dense_model(g, kind, setter):
    with g.as_default(), tv.device(setter):
        w = tv.Variable(np.linspace(-1, 1, 300 * 70, dtype=np.float32).reshape(300, 70),
                        name=f"w_dense_{kind}")
        x = tv.constant(np.random.default_rng(5).standard_normal((8, 300)).astype(np.float32))
        loss = tv.reduce_sum(tv.square(tv.matmul(x, w)))
        opt = tv.train.MomentumOptimizer(1e-3, 0.9) if kind == "momentum" else \
            tv.train.AdamOptimizer(1e-3)
        train = opt.minimize(loss)
        slots = [opt.get_slot(w, n) for n in opt.get_slot_names()]
        return w, slots, train, tv.global_variables_initializer()


@pytest.mark.parametrize("kind", ["momentum", "adam"])
def test_dense_updates_on_the_ps_write_the_slots_in_place(cluster, kind):
    """The slots and the variable itself: the step reads the variable for the worker before
    it updates it, and that read must be let go of once sent (it was held to the step's end
    on the direct plane, so the update copied the variable every step)."""
    tv.Session.reset(cluster.address)
    g = tv.Graph()
    w, slots, train, init = _dense_model(g, kind, tv.train.replica_device_setter(
        ps_tasks=1, worker_device="/job:worker/task:0"))
    names = [v.op.name for v in slots] + [w.op.name]
    s = cluster.session(graph=g)
    s.run(init)
    s.run(train)
    ps = cluster.worker("ps-0")
    before = cluster.client.run(_ps_slot_buffers, names, workers=[ps])[ps]
    assert sorted(before) == sorted(names)
    for _ in range(3):
        s.run(train)
    assert cluster.client.run(_ps_slot_buffers, names, workers=[ps])[ps] == before
    got = s.run([w] + slots)
    # the same model in process: the same bits
    local = tv.Graph()
    lw, lslots, ltrain, linit = _dense_model(local, kind, "/cpu:0")
    with tv.Session(graph=local) as ls:
        ls.run(linit)
        for _ in range(4):
            ls.run(ltrain)
        want = ls.run([lw] + lslots)
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a, b)


# ---- sync steps on the direct data plane ------------------------------------------------------


def _sync_model(sess_graph, lr=0.1):
    with sess_graph.as_default(), tv.device(tv.train.replica_device_setter(
            ps_tasks=1, worker_device="/job:worker/task:0")):
        gs = tv.train.get_or_create_global_step()
        w = tv.Variable(np.zeros(2, np.float32), name="w_sync_direct")
        loss = tv.reduce_sum((w - 1.0) ** 2)
        opt = tv.train.SyncReplicasOptimizer(tv.train.GradientDescentOptimizer(lr), 1, 1)
        train = opt.minimize(loss, global_step=gs)
        init = tv.global_variables_initializer()
    return gs, w, opt, train, init


def test_sync_steps_run_on_the_direct_plane(cluster):
    g = tv.Graph()
    gs, w, opt, train, init = _sync_model(g)
    sess = cluster.session(graph=g)
    sess.run(init)
    sess.run(opt.chief_init_op)
    sess.run(opt.local_step_init_op)
    chief = opt.get_chief_queue_runner().start(sess)
    traced = []
    try:
        for _ in range(4):
            md = tv.RunMetadata()
            sess.run(train, options=tv.RunOptions(trace=True), run_metadata=md)
            traced.append(md)
    finally:
        chief.stop(sess)
    # a plan's first run is a Dask graph; the next ones are direct (they count transfers)
    assert [bool(md.transfers) for md in traced] == [False, True, True, True]
    assert int(sess.run(gs)) == 4
    np.testing.assert_allclose(sess.run(w), 1.0 - 0.8 ** 4, rtol=1e-6)


def _gate_graph():
    """A token wait and a release on the PS, by hand (the sync optimizer's gate ops)."""
    g = tv.Graph()
    with g.as_default(), tv.device("/job:ps/task:0"):
        local = tv.placeholder(tv.int64, [], name="local_step")
        step = tv.placeholder(tv.int64, [], name="release_step")
        wait = apply_op("SyncTokenWait", [local], {"gate": "test/gate"}).outputs[0]
        release = apply_op("SyncTokenRelease", [step], {"gate": "test/gate", "tokens": 1}
                           ).outputs[0]
    return g, local, step, wait, release


def test_a_waiting_token_op_on_the_direct_plane_gives_up_at_the_step_timeout(cluster):
    g, local, step, wait, release = _gate_graph()
    sess = cluster.session(graph=g)
    direct = tv.RunOptions(data_plane="direct")
    sess.run(release, {step: np.int64(0)}, options=direct)  # step 0 current, no token left
    sess.run(wait, {local: np.int64(-1)}, options=direct)  # takes the one token
    with pytest.raises(tv.errors.DeadlineExceededError, match="did not finish"):
        sess.run(wait, {local: np.int64(0)},
                 options=tv.RunOptions(data_plane="direct", timeout_in_ms=400))
    # The given-up wait took nothing: the next release's single token goes to a new wait.
    sess.run(release, {step: np.int64(1)}, options=direct)
    got = sess.run(wait, {local: np.int64(0)},
                   options=tv.RunOptions(data_plane="direct", timeout_in_ms=10_000))
    assert int(got) == 1


def _started_then_sleep(path):
    def fn():
        import pathlib
        import time
        pathlib.Path(path).write_text("started")
        time.sleep(60)
        return np.float32(0.0)
    return fn


def test_a_waiting_token_op_on_the_direct_plane_gives_up_when_a_worker_is_lost(cluster,
                                                                               tmp_path):
    import threading
    import time
    g, local, step, wait, release = _gate_graph()
    started = tmp_path / "started"
    with g.as_default(), tv.device("/job:worker/task:1"):
        slow = tv.py_func(_started_then_sleep(str(started)), [], tv.float32)
    sess = cluster.session(graph=g)
    direct = tv.RunOptions(data_plane="direct")
    sess.run(release, {step: np.int64(5)}, options=direct)
    sess.run(wait, {local: np.int64(4)}, options=direct)  # the token of step 5 is taken
    box = {}

    def run():
        try:
            sess.run([wait, slow], {local: np.int64(5)}, options=direct)
        except Exception as exc:  # noqa: BLE001 - checked below
            box["error"] = exc
    t = threading.Thread(target=run)
    t.start()
    deadline = time.monotonic() + 60
    while not started.exists() and time.monotonic() < deadline:  # the step is under way
        time.sleep(0.02)
    cluster.kill("worker-1")
    t.join(60)
    assert not t.is_alive()
    assert isinstance(box.get("error"), tv.errors.UnavailableError), box
    cluster.wait_full()
    sess.run(release, {step: np.int64(6)}, options=direct)
    got = sess.run(wait, {local: np.int64(5)},
                   options=tv.RunOptions(data_plane="direct", timeout_in_ms=10_000))
    assert int(got) == 6


@pytest.mark.parametrize("plane", ["auto", "dask"])
def test_sync_k_steps_per_run_equal_one_worker_with_twice_the_batch(cluster, plane):
    from tensorvm.train.replicas import cycling_batch, run_replicas
    rng = np.random.default_rng(0)
    X = rng.normal(size=(256, 4)).astype(np.float32)
    y = (X @ rng.normal(size=4) + 0.1 * rng.normal(size=256)).astype(np.float32)
    batch, lr, steps = 16, 0.1, 7

    def model_fn(ctx):
        xb, yb = cycling_batch([X[ctx.task::2], y[ctx.task::2]], batch, device=ctx.device)
        w = tv.Variable(np.zeros(4, np.float32), name="w_sync_k")
        loss = tv.reduce_mean((tv.reduce_sum(xb * w, axis=1) - yb) ** 2)
        return {"loss": loss, "optimizer": tv.train.GradientDescentOptimizer(lr)}

    tv.Session.reset(cluster.address)
    # a session made with data_plane="dask" keeps every step there: one sync step a run
    session = cluster._root if plane == "auto" else \
        cluster.session(config=tv.ConfigProto(data_plane=plane))
    r = run_replicas(model_fn, {"ps": 1, "worker": 2}, session=session, sync=True,
                     last_step=steps, steps_per_run=3,
                     final=lambda ctx, g: {"w": g.get_tensor_by_name("w_sync_k:0")})
    w = np.zeros(4, np.float32)
    shards = [(X[k::2], y[k::2]) for k in range(2)]
    for t in range(steps):
        rows = [(xk[(t * batch + np.arange(batch)) % len(xk)],
                 yk[(t * batch + np.arange(batch)) % len(yk)]) for xk, yk in shards]
        xs, ys = np.concatenate([a for a, _ in rows]), np.concatenate([b for _, b in rows])
        w = w - lr * (2.0 / len(ys)) * xs.T @ (xs @ w - ys)
    assert r.global_step == steps  # runs of 3, 3 and 1: not past last_step
    assert r.worker_runs == ([3, 3] if plane == "auto" else [steps, steps])
    np.testing.assert_allclose(r.final["w"], w, rtol=1e-5, atol=1e-6)


class _KillPsOnce(tv.train.SessionRunHook):
    """Kills ps-0 before the first run that starts at or past ``at_step`` (before, not after
    a run: another hook's after_run, a checkpoint save, would meet the dead PS outside the
    session's recovery)."""

    def __init__(self, cluster, at_step, gs):
        self.cluster, self.at, self.gs, self.killed, self.seen = cluster, at_step, gs, None, 0

    def before_run(self, run_context):
        if self.killed is None and self.seen + 1 >= self.at:
            self.killed = self.cluster.kill("ps-0")
        return tv.train.SessionRunArgs(self.gs)

    def after_run(self, run_context, run_values):
        self.seen = int(run_values.results)


def test_sync_k_steps_per_run_survive_a_lost_ps(cluster, tmp_path):
    from tensorvm.train.replicas import cycling_batch, run_replicas
    rng = np.random.default_rng(7)
    X = rng.normal(size=(256, 4)).astype(np.float32)
    y = (X @ rng.normal(size=4) + 0.1 * rng.normal(size=256)).astype(np.float32)
    best = np.linalg.lstsq(X, y, rcond=None)[0]
    killers = []

    def model_fn(ctx):
        xb, yb = cycling_batch([X[ctx.task::2], y[ctx.task::2]], 32, device=ctx.device)
        w = tv.Variable(np.zeros(4, np.float32), name="w_sync_k_lost")
        loss = tv.reduce_mean((tv.reduce_sum(xb * w, axis=1) - yb) ** 2)
        return {"loss": loss, "optimizer": tv.train.GradientDescentOptimizer(0.05)}

    def hooks_fn(ctx):
        if not ctx.is_chief:
            return []
        killers.append(_KillPsOnce(cluster, 9, tv.train.get_global_step()))
        return killers

    tv.Session.reset(cluster.address)
    r = run_replicas(model_fn, {"ps": 1, "worker": 2}, session=cluster._root, sync=True,
                     last_step=40, steps_per_run=4, hooks_fn=hooks_fn,
                     checkpoint_dir=f"file://{tmp_path}/ck", save_checkpoint_steps=4,
                     final=lambda ctx, g: {"w": g.get_tensor_by_name("w_sync_k_lost:0")})
    cluster.wait_full()
    assert killers[0].killed is not None and r.recoveries >= 1
    assert r.global_step == 40
    assert np.linalg.norm(r.final["w"] - best) < 0.1 * np.linalg.norm(best)


def test_partitions_let_go_of_results_after_their_last_reader(cluster):
    """``partitions`` (pure): each device's task results are dropped after the last task of
    that device that reads them, or right after their own push when none does; fetched
    results never."""
    from tensorvm.runtime.direct.registered_plans import partitions
    g = tv.Graph()
    w, slots, train, init = _dense_model(g, "momentum", tv.train.replica_device_setter(
        ps_tasks=1, worker_device="/job:worker/task:0"))
    s = cluster.session(graph=g)
    plan = s.plan([train, w.value()])
    parts = partitions(plan, "p", {d: f"tcp://{i}" for i, d in enumerate(plan.devices)})
    from tensorvm.vm.program import Result
    fetched = {f.task for f in plan.fetches if isinstance(f, Result)}
    dropped_somewhere = 0
    for part in parts.values():
        order = [t.name for t in part.tasks]
        dropped = [n for ns in part.drops.values() for n in ns]
        assert len(dropped) == len(set(dropped)), "a result dropped twice"
        assert not set(dropped) & fetched
        assert set(dropped) | (fetched & set(order)) == set(order)
        for at, names in part.drops.items():
            for n in names:
                readers = [t.name for t in part.tasks
                           if any(isinstance(a, Result) and a.task == n for a in t.args)]
                assert order.index(at) == max([order.index(n)] +
                                              [order.index(r) for r in readers])
        dropped_somewhere += len(dropped)
    assert dropped_somewhere > 0
