"""Parameter-server training on a real LocalCluster (1 PS + 3 worker processes): sync replicas
against NumPy, backup workers against a straggler, async Hogwild to a target loss, and a PS
worker killed mid-training (SIGKILL) with recovery from the checkpoint."""
import numpy as np
import pytest
import tensorvm as tv
from tensorvm.train.replicas import cycling_batch, run_replicas

TV_CLUSTER = {"ps": 1, "worker": 3}

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")


def _linear_data(rows=512, dim=4, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(rows, dim)).astype(np.float32)
    wt = rng.normal(size=dim).astype(np.float32)
    return X, (X @ wt + 0.1 * rng.normal(size=rows)).astype(np.float32), wt


def _linear_model(X, y, batch, lr, name):
    def model_fn(ctx):
        xs, ys = X[ctx.task::ctx.num_workers], y[ctx.task::ctx.num_workers]
        xb, yb = cycling_batch([xs, ys], batch, device=ctx.device)
        w = tv.Variable(np.zeros(X.shape[1], np.float32), name=name)
        loss = tv.reduce_mean((tv.reduce_sum(xb * w, axis=1) - yb) ** 2)
        return {"loss": loss, "optimizer": tv.train.GradientDescentOptimizer(lr),
                "batch_size": batch}
    return model_fn


def _final(name):
    return lambda ctx, g: {"w": g.get_tensor_by_name(f"{name}:0")}


@pytest.fixture
def clean(cluster):
    tv.Session.reset(cluster.address)
    cluster.wait_full()
    return cluster


def test_sync_two_workers_equal_one_worker_with_twice_the_batch(clean):
    X, y, _ = _linear_data()
    steps, batch, lr = 6, 16, 0.1
    r = run_replicas(_linear_model(X, y, batch, lr, "w_sync"), {"ps": 1, "worker": 2},
                     session=clean._root, sync=True, last_step=steps,
                     final=_final("w_sync"))
    # NumPy: one worker whose batch t is the union of both workers' batch t
    w = np.zeros(X.shape[1], np.float32)
    shards = [(X[k::2], y[k::2]) for k in range(2)]
    for t in range(steps):
        xs = np.concatenate([xk[(t * batch + np.arange(batch)) % len(xk)] for xk, _ in shards])
        ys = np.concatenate([yk[(t * batch + np.arange(batch)) % len(yk)] for _, yk in shards])
        w = w - lr * (2.0 / len(ys)) * xs.T @ (xs @ w - ys)
    assert r.global_step == steps
    assert r.worker_runs == [steps, steps]  # each worker exactly once per step
    np.testing.assert_allclose(r.final["w"], w, rtol=1e-5, atol=1e-6)


def test_backup_worker_keeps_the_step_rate_with_a_straggler(clean):
    X, y, _ = _linear_data()
    spec = {"ps": 1, "worker": 3}
    slow = {2: 0.6}
    runs = {}
    for name, n_required in (("w_nobackup", 3), ("w_backup", 2)):
        runs[name] = run_replicas(_linear_model(X, y, 16, 0.05, name), spec,
                                  session=clean._root, sync=True, last_step=6,
                                  replicas_to_aggregate=n_required, slow_workers=slow)
        tv.Session.reset(clean.address)
    ratio = runs["w_backup"].steps_per_s / runs["w_nobackup"].steps_per_s
    assert runs["w_backup"].global_step == runs["w_nobackup"].global_step == 6
    assert runs["w_backup"].worker_runs[2] < 6  # the straggler's late gradients were dropped
    assert ratio >= 1.8, (ratio, runs)


def _logloss(X, y, w, b):
    z = X @ w + b
    return float(np.mean(np.logaddexp(0.0, z) - y * z))


def test_async_two_workers_reach_the_target_loss(clean):
    rng = np.random.default_rng(3)
    n, d = 20_000, 20
    X = rng.normal(size=(n, d)).astype(np.float32)
    w_true = rng.normal(0, 0.3, size=d).astype(np.float32)
    y = (rng.random(n) < 1 / (1 + np.exp(-(X @ w_true + 0.25)))).astype(np.float32)
    Xt, yt = X[:4000], y[:4000]  # held out
    Xtr, ytr = X[4000:], y[4000:]
    target = _logloss(Xt, yt, w_true, 0.25) + 0.01

    def model_fn(ctx):
        xs, ys = Xtr[ctx.task::ctx.num_workers], ytr[ctx.task::ctx.num_workers]
        xb, yb = cycling_batch([xs, ys], 128, device=ctx.device)
        w = tv.Variable(np.zeros(d, np.float32), name="lr_w")
        b = tv.Variable(np.float32(0.0), name="lr_b")
        logits = tv.reduce_sum(xb * w, axis=1) + b
        loss = tv.reduce_mean(tv.nn.sigmoid_cross_entropy_with_logits(labels=yb, logits=logits))
        return {"loss": loss, "optimizer": tv.train.GradientDescentOptimizer(0.5),
                "batch_size": 128}
    r = run_replicas(model_fn, {"ps": 1, "worker": 2}, session=clean._root, sync=False,
                     last_step=200, steps_per_run=25,
                     final=lambda ctx, g: {"w": g.get_tensor_by_name("lr_w:0"),
                                           "b": g.get_tensor_by_name("lr_b:0")})
    assert r.global_step >= 200 and min(r.worker_runs) >= 1
    assert _logloss(Xt, yt, r.final["w"], r.final["b"]) <= target


class _KillOnce(tv.train.SessionRunHook):
    """Kills worker ``ps-0`` after global step ``at_step``; ``holders`` records which workers
    held the PS device then. It must be ``ps-0`` alone: once, an earlier test's recovery had
    mapped the device onto worker-0 (remapped before ps-0's restart), so the kill hit nothing
    of the training and all steps finished with no recovery."""

    def __init__(self, cluster, at_step, gs):
        self.cluster, self.at, self.gs, self.killed = cluster, at_step, gs, None
        self.holders = None

    def before_run(self, run_context):
        return tv.train.SessionRunArgs(self.gs)

    def after_run(self, run_context, run_values):
        if self.killed is None and int(run_values.results) + 1 >= self.at:
            info = self.cluster.client.scheduler_info(n_workers=-1)["workers"]
            self.holders = sorted(str(w["name"]) for w in info.values()
                                  if any(r.startswith("tvm-dev-ps-") for r in w["resources"]))
            self.killed = self.cluster.kill("ps-0")


def test_ps_killed_mid_training_resumes_from_the_checkpoint(clean, tmp_path):
    X, y, _ = _linear_data(rows=256, seed=5)
    steps, batch, lr = 30, 32, 0.05
    g = tv.Graph()
    with g.as_default():
        setter = tv.train.replica_device_setter(ps_tasks=1, worker_device="/job:worker/task:0")
        with tv.device(setter):
            xb, yb = cycling_batch([X, y], batch, device="/job:worker/task:0", local=False)
            w = tv.Variable(np.zeros(X.shape[1], np.float32), name="w_kill")
            loss = tv.reduce_mean((tv.reduce_sum(xb * w, axis=1) - yb) ** 2)
            gs = tv.train.get_or_create_global_step()
            train = tv.train.GradientDescentOptimizer(lr).minimize(loss, global_step=gs)
        killer = _KillOnce(clean, 13, gs)
        sess = clean.session(graph=g)
        with tv.train.MonitoredTrainingSession(
                session=sess, checkpoint_dir=f"file://{tmp_path}/ck", save_checkpoint_steps=5,
                hooks=[tv.train.StopAtStepHook(last_step=steps), killer]) as ms:
            while not ms.should_stop():
                ms.run(train)
            final_w, final_gs, final_loss = ms.run([w, gs, loss])
    assert killer.holders == ["ps-0"], killer.holders
    assert killer.killed is not None and ms.recoveries == 1
    assert final_gs == steps
    # NumPy: the same 30 steps without a failure; a step applied twice would differ
    ref = np.zeros(X.shape[1], np.float32)
    for t in range(steps):
        rows = (t * batch + np.arange(batch)) % len(X)
        ref = ref - lr * (2.0 / batch) * X[rows].T @ (X[rows] @ ref - y[rows])
    np.testing.assert_allclose(final_w, ref, rtol=1e-5, atol=1e-6)
    assert final_loss < 0.05


def test_memory_checkpoints_refused_on_a_cluster(clean):
    g = tv.Graph()
    with g.as_default():
        tv.Variable(1.0, name="w_mem")
        tv.train.get_or_create_global_step()
    with pytest.raises(tv.errors.InvalidArgumentError, match="memory://"):
        tv.train.MonitoredTrainingSession(session=clean.session(graph=g),
                                          checkpoint_dir="memory://ck")


def test_bundled_jobs_ridge_sync_and_logreg_async(clean):
    from tensorvm.jobs.logreg import logreg
    from tensorvm.jobs.ridge import ridge
    r = ridge(workers=2, sync=True, steps=40, n=400, d=5, session=clean._root)
    assert r["ok"] and r["rel_error"] < 1e-6, r
    tv.Session.reset(clean.address)
    seen = []
    with tv.job.reporting(seen.append):  # the CLI's progress display receives the metrics
        lg = logreg(workers=2, sync=False, steps=2000, rows=16_000, features=10, shards=4,
                    lr=0.5, holdout=4000, tolerance=0.01, eval_every=50, steps_per_run=25,
                    session=clean._root)
    assert lg["ok"] and lg["heldout_loss"] <= lg["target_loss"] + 0.01, lg
    assert lg["global_step"] < 2000  # stopped at the target, not at the step limit
    assert any("heldout_loss" in m for m in seen)


def test_sync_replicas_survive_a_lost_ps(clean, tmp_path):
    X, y, _ = _linear_data(rows=256, seed=7)
    best = np.linalg.lstsq(X, y, rcond=None)[0]
    killers = []

    def hooks_fn(ctx):
        if not ctx.is_chief:
            return []
        from tensorvm.train.optimizers import get_global_step
        killers.append(_KillOnce(clean, 8, get_global_step()))
        return killers

    r = run_replicas(_linear_model(X, y, 32, 0.05, "w_lost"), {"ps": 1, "worker": 2},
                     session=clean._root, sync=True, last_step=40,
                     checkpoint_dir=f"file://{tmp_path}/ck", save_checkpoint_steps=3,
                     hooks_fn=hooks_fn, final=_final("w_lost"))
    assert killers[0].holders == ["ps-0"], killers[0].holders  # the kill hits the PS device
    assert killers[0].killed is not None and r.recoveries >= 1
    assert r.global_step == 40
    # training went on from the restored step: close to the least-squares fit
    assert np.linalg.norm(r.final["w"] - best) < 0.1 * np.linalg.norm(best)


def test_async_workers_lease_their_splits_from_the_split_queue(clean, tmp_path):
    from tensorvm.jobs.logreg import logreg, write_shards
    url = f"file://{tmp_path}/data"
    write_shards(url, rows=16_000, features=10, shards=8, seed=0)
    lg = logreg(workers=2, sync=False, steps=2000, rows=16_000, features=10, lr=0.5,
                holdout=4000, tolerance=0.01, eval_every=50, steps_per_run=25, input=url,
                session=clean._root)
    assert lg["ok"] and lg["global_step"] < 2000, lg


# ---- failure modes (the "ps" audit) -------------------------------------------------------------

def _holders(cluster):
    info = cluster.client.scheduler_info(n_workers=-1)["workers"]
    return {str(w["name"]): sorted(r for r in w["resources"] if r.startswith("tvm-dev-"))
            for w in info.values()}


def test_a_ps_not_back_in_time_stays_unavailable_until_it_returns(clean, monkeypatch):
    """ps-0's worker dies and its Nanny does not bring it back within REPLACEMENT_WAIT_S.
    Its device must not move onto another task's worker (it did: worker-0 then held both,
    the returning ps-0 stayed idle, and steps failed with FailedPreconditionError); every
    step fails with UnavailableError naming the worker awaited — as TF's do while a PS is
    down. A new worker that holds no task (a replacement with another name, as a pod gets)
    takes the task over; when that one leaves too and ps-0 is back, the task returns to ps-0
    (its state lost each time, as in TF)."""
    import os
    import signal
    import time

    from distributed import Worker
    from distributed.core import Status
    from tensorvm.runtime.cluster import device_map
    monkeypatch.setattr(device_map, "REPLACEMENT_WAIT_S", 1.0)
    g = tv.Graph()
    with g.as_default():
        with tv.device("/job:ps/task:0"):
            v = tv.Variable(1.0, name="v_not_back")
        with tv.device("/job:worker/task:0"):
            y = v * 2.0
    sess = clean.session(graph=g)
    sess.run(v.initializer)
    assert sess.run(y) == 2.0
    lc = clean.client.cluster  # the LocalCluster the root session started
    addr = clean.worker("ps-0")
    pid = clean.client.run(os.getpid, workers=[addr])[addr]
    lc.workers["ps-0"].status = Status.closing_gracefully  # its Nanny will not restart it
    os.kill(pid, signal.SIGKILL)
    try:
        deadline = time.monotonic() + 30
        while "ps-0" in clean.workers():
            assert time.monotonic() < deadline
            time.sleep(0.05)
        with pytest.raises(tv.errors.UnavailableError, match="'ps-0'.*left the cluster"):
            sess.run(y)  # the step that meets the loss
        time.sleep(1.2)  # past REPLACEMENT_WAIT_S
        for _ in range(2):
            with pytest.raises(tv.errors.UnavailableError,
                               match=r"task /job:ps/task:0 is unavailable: its worker 'ps-0' "
                                     r"left the cluster \d+ s ago and has not come back"):
                sess.run(y)
        assert not any("tvm-dev-ps-0" in r for r in _holders(clean).values())
        lc.worker_spec["replacement-pod"] = {  # a free worker joins: it takes the task
            "cls": Worker, "options": {"name": "replacement-pod", "nthreads": 1}}
        lc.sync(lc._correct_state)
        with pytest.raises(tv.errors.FailedPreconditionError, match="uninitialized value v_n"):
            sess.run(y)
        assert _holders(clean)["replacement-pod"] == ["tvm-dev-ps-0"]
        sess.run(v.initializer)
        assert sess.run(y) == 2.0
    finally:  # the replacement leaves; ps-0 back (a new Nanny from the cluster's spec)
        lc.worker_spec.pop("replacement-pod", None)
        del lc.workers["ps-0"]
        lc.sync(lc._correct_state)
        clean.wait_full()
        while "replacement-pod" in clean.workers():
            time.sleep(0.05)
    with pytest.raises(tv.errors.UnavailableError, match="'replacement-pod'.*left the cluster"):
        sess.run(y)  # the step that meets the replacement's loss
    with pytest.raises(tv.errors.FailedPreconditionError, match="uninitialized value v_not"):
        sess.run(y)  # back on ps-0, whose state was lost (TF: the same)
    sess.run(v.initializer)
    assert sess.run(y) == 2.0
    held = _holders(clean)
    assert held["ps-0"] == ["tvm-dev-ps-0"] and held["worker-0"] == ["tvm-dev-worker-0"], held


class _KillAt(tv.train.SessionRunHook):
    """On the chief: kill the worker of each ``{global step: task name}`` once that step is
    passed, from another thread (so the kill lands mid-step of the other replicas)."""

    def __init__(self, cluster, plan, gs):
        self.cluster, self.plan, self.gs, self.killed = cluster, dict(plan), gs, []

    def before_run(self, run_context):
        return tv.train.SessionRunArgs(self.gs)

    def after_run(self, run_context, run_values):
        import threading
        for at, name in sorted(self.plan.items()):
            if int(run_values.results) >= at:
                del self.plan[at]
                self.killed.append(name)
                threading.Thread(target=self.cluster.kill, args=(name,), daemon=True).start()


def _kill_hooks(cluster, plan, out):
    def hooks_fn(ctx):
        if not ctx.is_chief:
            return []
        from tensorvm.train.optimizers import get_global_step
        out.append(_KillAt(cluster, plan, get_global_step()))
        return out[-1:]
    return hooks_fn


def test_sync_with_a_backup_goes_on_when_a_worker_and_then_the_chief_are_killed(clean, tmp_path):
    """3 replicas, 2 gradients a step. worker-2 is killed mid-training: the other two carry
    the steps while it recovers. Then the chief's worker (worker-0) is killed: the chief
    restores the latest checkpoint and its loop restarts (this stalled for ever: the old and
    new chief loops reset each other's step and every replica waited for a token)."""
    X, y, _ = _linear_data(rows=256, seed=11)
    best = np.linalg.lstsq(X, y, rcond=None)[0]
    killers: list = []
    r = run_replicas(_linear_model(X, y, 32, 0.05, "w_sync_kills"), TV_CLUSTER,
                     session=clean._root, sync=True, last_step=60, replicas_to_aggregate=2,
                     checkpoint_dir=f"file://{tmp_path}/ck", save_checkpoint_steps=10,
                     hooks_fn=_kill_hooks(clean, {8: "worker-2", 25: "worker-0"}, killers),
                     final=_final("w_sync_kills"))
    assert killers[-1].killed == ["worker-2", "worker-0"]
    assert r.global_step == 60 and r.recoveries >= 2, r
    assert np.linalg.norm(r.final["w"] - best) < 0.1 * np.linalg.norm(best), (r.final, best)


def test_async_goes_on_when_a_worker_is_killed(clean, tmp_path):
    """Hogwild with 3 workers; worker-1's process is killed: its replica recovers (its local
    input position restarts) and training reaches the step limit near the fit."""
    X, y, _ = _linear_data(rows=256, seed=12)
    best = np.linalg.lstsq(X, y, rcond=None)[0]
    killers: list = []
    r = run_replicas(_linear_model(X, y, 32, 0.05, "w_async_kill"), TV_CLUSTER,
                     session=clean._root, sync=False, last_step=300,
                     checkpoint_dir=f"file://{tmp_path}/ck", save_checkpoint_steps=50,
                     hooks_fn=_kill_hooks(clean, {40: "worker-1"}, killers),
                     final=_final("w_async_kill"))
    assert killers[-1].killed == ["worker-1"]
    assert r.global_step >= 300 and r.recoveries >= 1, r
    assert np.linalg.norm(r.final["w"] - best) < 0.1 * np.linalg.norm(best), (r.final, best)


def test_replicas_to_aggregate_beyond_the_clusters_workers_fails_at_the_start(clean):
    """TF 1.x waits for ever for gradients that cannot come; the chief's session refuses."""
    g = tv.Graph()
    setter = tv.train.replica_device_setter(cluster=TV_CLUSTER,
                                            worker_device="/job:worker/task:0")
    with g.as_default(), tv.device(setter):
        w = tv.Variable(np.zeros(2, np.float32), name="w_too_many")
        gs = tv.train.get_or_create_global_step()
        opt = tv.train.SyncReplicasOptimizer(tv.train.GradientDescentOptimizer(0.1),
                                             replicas_to_aggregate=4, total_num_replicas=4)
        train = opt.minimize(tv.reduce_sum(w * w), global_step=gs)
    assert train is not None
    with pytest.raises(tv.errors.InvalidArgumentError,
                       match=r"replicas_to_aggregate=4 but the cluster has 3 replica task\(s\) "
                             r"\(/job:worker\): no step could ever gather"):
        tv.train.MonitoredTrainingSession(session=clean.session(graph=g),
                                          hooks=[opt.make_session_run_hook(True)])


def test_two_trainers_with_one_variable_name_and_two_shapes(clean):
    """Variables on the cluster are shared by name (TF's PS containers): a second program
    declaring ``w`` with another shape fails clearly, naming both; the first is untouched."""
    sessions = []
    for n in (4, 5):
        g = tv.Graph()
        with g.as_default():
            with tv.device("/job:ps/task:0"):
                w = tv.Variable(np.ones(n, np.float32), name="w_two_shapes")
            with tv.device("/job:worker/task:0"):
                y = tv.reduce_sum(w * np.arange(n, dtype=np.float32))
        sessions.append((clean.session(graph=g), w, y))
    (s4, w4, y4), (s5, w5, y5) = sessions
    s4.run(w4.initializer)
    assert s4.run(y4) == 6.0
    for fetch in (w5.initializer, y5):
        with pytest.raises(tv.errors.InvalidArgumentError,
                           match=r"variable 'w_two_shapes' on /job:ps/replica:0/task:0/device:"
                                 r"CPU:0 already exists as float32\[4\], but this graph "
                                 r"declares it float32\[5\]"):
            s5.run(fetch)
    assert s4.run(y4) == 6.0
