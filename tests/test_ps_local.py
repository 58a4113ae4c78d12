"""Parameter-server training without a cluster: the sync protocol's state machines, placement
strategies, partitioners, hooks and MonitoredTrainingSession in process, and the sparse
traffic proof (bytes to the PS per step scale with the rows touched, not the vocabulary)."""
import logging

import numpy as np
import pytest
import tensorvm as tv
from tensorvm.train import sync_state as ss

# ---- the sync protocol (pure) -----------------------------------------------------------------

def test_accumulator_first_n_win_stale_and_surplus_dropped():
    acc = ss.GradientAccumulator(num_required=2, kinds=("dense", "sparse"))
    assert acc.apply(0, [np.zeros(2), (np.array([0]), np.zeros((1, 2)))]) is None  # wait
    acc.set_step(5)
    g = lambda d, i, v: [np.full(2, d), (np.array(i), np.array(v, dtype=np.float64))]
    assert acc.apply(4, g(100.0, [0], [[9.0, 9.0]])) == ss.STALE
    assert acc.take(5) is None
    assert acc.apply(5, g(1.0, [3, 1], [[1.0, 1.0], [2.0, 2.0]])) == ss.ACCEPTED
    assert acc.apply(5, g(3.0, [3], [[5.0, 5.0]])) == ss.ACCEPTED
    assert acc.apply(5, g(50.0, [0], [[7.0, 7.0]])) == ss.SURPLUS
    assert acc.apply(6, g(50.0, [0], [[7.0, 7.0]])) == ss.AHEAD
    dense, (idx, vals) = acc.take(5)
    np.testing.assert_allclose(dense, [2.0, 2.0])
    assert idx.tolist() == [1, 3]  # deduplicated, averaged over the 2 accepted
    np.testing.assert_allclose(vals, [[1.0, 1.0], [3.0, 3.0]])
    assert acc.step == 6 and acc.dropped == {"stale": 1, "surplus": 1, "ahead": 1,
                                             "duplicate": 0}
    assert acc.apply(5, g(1.0, [0], [[0.0, 0.0]])) == ss.STALE
    acc.close()
    with pytest.raises(tv.errors.OutOfRangeError):
        acc.take(6)


def test_token_gate_releases_each_worker_once_per_step():
    gate = ss.TokenGate()
    assert gate.try_take(0) is None  # nothing released yet
    gate.release(1, tokens=3)
    assert [gate.try_take(0) for _ in range(4)] == [1, 1, 1, None]
    assert gate.try_take(1) is None  # a worker at the current step waits for the next
    gate.release(2, tokens=3)
    assert gate.try_take(0) == 2  # a straggler goes on at the newest step, never an old one
    gate.set_step(2)
    gate.release(2, tokens=1)
    assert gate.try_take(7) == 2  # ahead of a restored step: goes on at the restored step
    gate.close()
    with pytest.raises(tv.errors.OutOfRangeError):
        gate.try_take(2)


# ---- placement and partitioning ----------------------------------------------------------------

def test_round_robin_and_greedy_by_bytes(g):
    rr = tv.train.replica_device_setter(ps_tasks=2, ps_strategy=tv.train.RoundRobinStrategy(2))
    greedy = tv.train.replica_device_setter(
        ps_tasks=2, ps_strategy=tv.train.GreedyLoadBalancingStrategy(2))
    sizes = [1000, 10, 10, 10]
    with tv.device(rr):
        a = [tv.Variable(np.zeros(n, np.float32)) for n in sizes]
    with tv.device(greedy):
        b = [tv.Variable(np.zeros(n, np.float32)) for n in sizes]
    assert [v.device[-1] for v in a] == ["0", "1", "0", "1"]
    assert [v.device[-1] for v in b] == ["0", "1", "1", "1"]
    bad = tv.train.replica_device_setter(ps_tasks=2, ps_strategy=lambda op: 5)
    with tv.device(bad), pytest.raises(tv.errors.InvalidArgumentError, match="5"):
        tv.Variable(1.0)


@pytest.mark.parametrize("strategy", ["mod", "div"])
def test_partitioned_embedding_over_two_ps(g, strategy):
    vocab, dim = 11, 3
    table = np.arange(vocab * dim, dtype=np.float32).reshape(vocab, dim)
    setter = tv.train.replica_device_setter(ps_tasks=2, worker_device="/job:worker/task:0")
    if strategy == "div":
        with tv.device(setter):
            emb = tv.train.partitioned_variable("emb", (vocab, dim), initializer=table,
                                                partitioner=tv.train.fixed_size_partitioner(2))
        assert [tuple(p.shape.dims) for p in emb] == [(6, 3), (5, 3)]
    else:  # "mod": row i is row i // 2 of part i % 2
        with tv.device(setter):
            emb = [tv.Variable(table[i::2], name=f"emb{i}") for i in range(2)]
    assert {p.device for p in emb} == {"/job:ps/task:0", "/job:ps/task:1"}
    ids = tv.placeholder(tv.int64, [None])
    with tv.device(setter):
        rows = tv.nn.embedding_lookup(emb, ids, partition_strategy=strategy)
        loss = tv.reduce_sum(rows)
        train = tv.train.GradientDescentOptimizer(1.0).minimize(loss)
    feed = {ids: [10, 0, 3, 3, 7]}
    with tv.Session() as s:
        s.run(tv.global_variables_initializer())
        np.testing.assert_array_equal(s.run(rows, feed), table[[10, 0, 3, 3, 7]])
        s.run(train, feed)
        parts = s.run(list(emb))
    if strategy == "div":
        new = np.concatenate(parts)
    else:
        new = np.empty_like(table)
        new[0::2], new[1::2] = parts
    want = table.copy()
    np.subtract.at(want, [10, 0, 3, 3, 7], 1.0)
    np.testing.assert_allclose(new, want)


def test_min_max_partitioner():
    p = tv.train.min_max_variable_partitioner(max_partitions=4, min_slice_size=400)
    assert p((1000, 1), tv.float32) == [4, 1]  # 4000 bytes: 10 slices of 400, at most 4
    assert p((150, 1), tv.float32) == [1, 1]  # 600 bytes: one slice of >= 400
    assert tv.train.fixed_size_partitioner(5)((3, 2), tv.float32) == [3, 1]


# ---- sparse traffic ---------------------------------------------------------------------------

def _bytes_to_ps_per_step(vocab: int) -> int:
    g = tv.Graph()
    with g.as_default():
        setter = tv.train.replica_device_setter(ps_tasks=2, worker_device="/job:worker/task:0")
        with tv.device(setter):
            emb = tv.train.partitioned_variable("emb", (vocab, 16),
                                                partitioner=tv.train.fixed_size_partitioner(2))
            ids = tv.placeholder(tv.int64, [64])
            loss = tv.reduce_sum(tv.nn.embedding_lookup(emb, ids, partition_strategy="div")
                                 ** 2)
            gs = tv.train.get_or_create_global_step()
            opt = tv.train.GradientDescentOptimizer(0.1)
            train = opt.apply_gradients(
                tv.train.sync_replicas.dedupe_gradients(opt.compute_gradients(loss)),
                global_step=gs)
        with tv.Session() as s:
            s.run(tv.global_variables_initializer())
            md = tv.RunMetadata()
            batch = np.random.default_rng(0).integers(0, 1000, 64) * (vocab // 1000)
            s.run(train, {ids: batch}, options=tv.RunOptions(trace=True), run_metadata=md)
    to_ps = [x for x in md.sends if "/job:ps/" in x["dst"]]
    assert to_ps and all(x["bytes"] is not None for x in to_ps)
    return sum(x["bytes"] for x in to_ps)


def test_sparse_bytes_to_ps_scale_with_rows_touched_not_vocabulary():
    small, large = _bytes_to_ps_per_step(10_000), _bytes_to_ps_per_step(200_000)
    assert small == large
    assert small < 64 * 16 * 4 + 64 * 8 + 2000  # about the touched rows and their ids


# ---- hooks and the monitored session in process -------------------------------------------------

def _linreg():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(256, 4)).astype(np.float32)
    wt = np.array([1.0, -2.0, 0.5, 3.0], np.float32)
    y = X @ wt
    from tensorvm.train.replicas import cycling_batch
    xb, yb = cycling_batch([X, y], 32, local=False)
    w = tv.Variable(np.zeros(4, np.float32), name="w")
    loss = tv.reduce_mean((tv.reduce_sum(xb * w, axis=1) - yb) ** 2)
    gs = tv.train.get_or_create_global_step()
    train = tv.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=gs)
    return w, loss, gs, train, wt


def test_monitored_session_hooks_checkpoints_and_restore(g, tmp_path, caplog):
    w, loss, gs, train, _wt = _linreg()
    ckpt = f"file://{tmp_path}/ck"
    log_hook = tv.train.LoggingTensorHook({"loss": loss}, every_n_iter=5)
    counter = tv.train.StepCounterHook(every_n_steps=10, batch_size=32, loss=loss)
    summ = tv.train.SummarySaverHook(save_steps=10, output_dir=str(tmp_path / "tb"),
                                     scalars={"loss": loss})
    with caplog.at_level(logging.INFO, logger="tensorvm"), tv.train.MonitoredTrainingSession(
            checkpoint_dir=ckpt, save_checkpoint_steps=10,
            hooks=[tv.train.StopAtStepHook(last_step=25), log_hook, counter, summ,
                   tv.train.NanTensorHook(loss)]) as sess:
        while not sess.should_stop():
            sess.run(train)
        w1, s1 = sess.run([w, gs])
    assert s1 == 25
    assert [c["step"] for c in tv.train.list_checkpoints(ckpt)][-3:] == [10, 20, 25]
    assert len(log_hook.logged) == 6 and "loss = " in caplog.text  # runs 0, 5, .., 25
    assert counter.metrics and counter.metrics[-1]["examples_per_s"] > 0
    assert list((tmp_path / "tb").iterdir())  # an event file
    # a new session restores the latest checkpoint and goes on from there
    with tv.train.MonitoredTrainingSession(
            checkpoint_dir=ckpt, save_checkpoint_steps=1000,
            hooks=[tv.train.StopAtStepHook(num_steps=5)]) as sess:
        np.testing.assert_array_equal(sess.run(w), w1)
        assert sess.run(gs) == 25
        while not sess.should_stop():
            sess.run(train, steps=5)
        assert sess.run(gs) == 30


@pytest.mark.filterwarnings("ignore:invalid value")
def test_nan_hook_and_stop_hook_errors(g):
    x = tv.Variable(np.float32(1.0))
    gs = tv.train.get_or_create_global_step()
    train = tv.train.GradientDescentOptimizer(1.0).minimize(tv.sqrt(x - 5.0) + x * 0,
                                                            global_step=gs)
    with pytest.raises(tv.train.NanLossDuringTrainingError), tv.train.MonitoredTrainingSession(
            hooks=[tv.train.NanTensorHook(tv.sqrt(x - 5.0))]) as sess:
        sess.run(train)
    with pytest.raises(tv.errors.InvalidArgumentError):
        tv.train.StopAtStepHook()


def test_sync_replicas_in_process_averages_and_counts_steps(g):
    w = tv.Variable(np.zeros(2, np.float32), name="w")
    gs = tv.train.get_or_create_global_step()
    opt = tv.train.SyncReplicasOptimizer(tv.train.GradientDescentOptimizer(0.5),
                                         replicas_to_aggregate=1, total_num_replicas=1)
    train = opt.minimize(tv.reduce_sum((w - [1.0, 3.0]) ** 2), global_step=gs)
    with tv.train.MonitoredTrainingSession(
            hooks=[opt.make_session_run_hook(True),
                   tv.train.StopAtStepHook(last_step=3)]) as sess:
        while not sess.should_stop():
            sess.run(train)
        # w <- w - 0.5 * 2 (w - t): reaches the target in one step
        np.testing.assert_allclose(sess.run(w), [1.0, 3.0])
        assert sess.run(gs) == 3
    with pytest.raises(tv.errors.InvalidArgumentError):
        tv.train.SyncReplicasOptimizer(tv.train.GradientDescentOptimizer(0.1), 3, 2)


def test_step_counter_sends_metrics_to_the_job_registry_and_tv_job(g):
    from tensorvm.scheduler_ext import TOPIC_JOBS, JobRegistry
    sent = []

    class FakeClient:  # what the hook uses of a Dask client: log_event
        id = "C1"

        def log_event(self, topic, msg):
            sent.append((topic, msg))

    class FakeSession:
        client = FakeClient()

        def __init__(self, s):
            self.s = s

        def run(self, *a, **kw):
            return self.s.run(*a, **kw)
    _w, loss, gs, train, _ = _linreg()
    hook = tv.train.StepCounterHook(every_n_steps=4, batch_size=32, loss=loss, job="lin",
                                    total_steps=8)
    reported = []
    with tv.Session() as s, tv.job.reporting(reported.append):
        s.run(tv.global_variables_initializer())
        s.run(tv.variables_initializer(tv.get_default_graph().get_collection("local_variables")))
        hook.begin()
        hook.after_create_session(FakeSession(s), None)
        for _ in range(8):
            # what the hook asks for (the global step as its op read it: TF's
            # global_step_read), fetched with the training step
            values = s.run([hook.before_run(None).fetches, train])[0]
            ctx = tv.train.SessionRunContext(tv.train.SessionRunArgs(None), s)
            hook.after_run(ctx, tv.train.SessionRunValues(values))
        hook.end(s)
    reg = JobRegistry(clock=lambda: 0.0)
    for topic, msg in sent:
        assert topic == TOPIC_JOBS
        reg.job_event(msg)
    job = reg.job("lin")
    assert job["state"] == "done" and job["metrics"]["step"] == 4
    assert {"loss", "steps_per_s", "examples_per_s"} <= set(job["metrics"]["last"])
    assert [r["step"] for r in reported] == [4] and reported[0]["total_steps"] == 8


def test_embedding_job_bytes_to_ps_do_not_grow_with_the_vocabulary():
    from tensorvm.jobs.embedding import bytes_to_ps_per_step
    small = bytes_to_ps_per_step(100_000, batch_size=64, users=100)
    assert small == bytes_to_ps_per_step(400_000, batch_size=64, users=100)
    # two lookups of 64 rows x 16 float32 come back as gradients (with their ids), once each
    assert small <= 2 * 64 * (16 * 4 + 8) + 1024


class _LoseTheDeviceAfterStep(tv.train.SessionRunHook):
    """A hook whose ``after_run`` meets a lost device once, as a ``CheckpointSaverHook`` saving
    right after its parameter server died does."""

    def __init__(self, gs, at: int):
        self.gs, self.at, self.fired = gs, at, False

    def before_run(self, run_context):
        return tv.train.SessionRunArgs(self.gs)

    def after_run(self, run_context, run_values):
        if run_values.results >= self.at and not self.fired:
            self.fired = True
            raise tv.errors.UnavailableError("device /job:ps/replica:0/task:0 is unavailable")


def test_a_device_lost_in_a_hooks_after_run_recovers_from_the_checkpoint(g, tmp_path):
    """The step is done again from the latest checkpoint, as when the step itself fails:
    the result equals an uninterrupted run (nothing applied twice)."""
    w, _loss, gs, train, _wt = _linreg()
    runs = {}
    for name, hooks in (("plain", []), ("lost", [_LoseTheDeviceAfterStep(gs, at=13)])):
        with tv.train.MonitoredTrainingSession(
                checkpoint_dir=f"file://{tmp_path}/{name}", save_checkpoint_steps=5,
                hooks=[tv.train.StopAtStepHook(last_step=20), *hooks]) as sess:
            while not sess.should_stop():
                sess.run(train)
            runs[name] = (sess.run(w), sess.run(gs), sess.recoveries)
    np.testing.assert_array_equal(runs["lost"][0], runs["plain"][0])
    assert runs["lost"][1:] == (20, 1) and runs["plain"][1:] == (20, 0)


def test_a_waiting_non_chief_stops_when_its_stop_event_is_set(g):
    """A non-chief waits for the chief to initialise the variables; when the chief has failed
    (run_replicas sets the replicas' stop event) it stops at once instead of waiting out
    max_wait_secs."""
    import threading
    import time
    tv.Variable(np.zeros(3, np.float32), name="never_initialised")
    stop = threading.Event()
    threading.Timer(0.3, stop.set).start()
    t = time.monotonic()
    with pytest.raises(tv.errors.CancelledError, match="stop.*waiting for the chief"):
        tv.train.MonitoredTrainingSession(is_chief=False, max_wait_secs=60, stop_event=stop)
    assert time.monotonic() - t < 5
