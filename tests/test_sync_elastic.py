"""``run_replicas(sync=True)`` on the ClusterCoordinator, on a cluster started by hand (``dask
scheduler``, workers ``ps-0``, ``worker-0``, ``worker-1`` of one thread each): a worker killed
mid-run (``kill -9``, Nanny included) and restarted 1 s later, a worker that joins a run begun
without it, and K steps a run against synchronous SGD in NumPy.

The model counts its applies: ``count``'s gradient is -100 in every replica's loss and the
learning rate 0.01, so each apply of an averaged gradient adds exactly 1 (float32) — ``count``
equals the global step exactly when every global step was applied once — and the PS
accumulators count the gradients they accepted (``TrainResult.counters``): global steps x N
when no gradient was accepted twice.

Failures first: on the per-task ``run_replicas(sync=True)`` (one client thread bound to each
``/job:worker/task:k``) a run begun with worker-1 absent could not start, and the kill test
fails for want of the accumulators' counts (the old sync run reported none).
"""
from __future__ import annotations

import threading
import time

import numpy as np
import pytest
from hand_cluster import HandCluster

import tensorvm as tv

pytestmark = [pytest.mark.cluster, pytest.mark.filterwarnings("ignore::ResourceWarning")]
SPEC = {"ps": 1, "worker": 2}
NAMES = ("ps-0", "worker-0", "worker-1")


@pytest.fixture(scope="module")
def hc(tmp_path_factory):
    with HandCluster(tmp_path_factory.mktemp("sync-cluster")) as cluster:
        for name in NAMES:
            cluster.start_worker(name)
        cluster.wait_for(NAMES)
        yield cluster


@pytest.fixture
def session(hc):
    for name in NAMES:  # a test may leave one stopped or dead
        p = hc.procs.get(name)
        if p is None or p.poll() is not None:
            hc.start_worker(name)
    hc.wait_for(NAMES)
    tv.Session.reset(hc.address)
    s = tv.Session(hc.address, cluster=SPEC, graph=tv.Graph(), verbose=False)
    yield s
    s.close()


def _data(rows=64, dim=3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(rows, dim)).astype(np.float32)
    return X, (X @ rng.normal(size=dim) + 0.1 * rng.normal(size=rows)).astype(np.float32)


def _model(X, y, batch, name):
    def model_fn(ctx):
        xs, ys = X[ctx.task::ctx.num_workers], y[ctx.task::ctx.num_workers]
        xb, yb = tv.train.cycling_batch([xs, ys], batch)
        w = tv.Variable(np.zeros(X.shape[1], np.float32), name=name)
        count = tv.Variable(np.float32(0.0), name=name + "_count")
        loss = tv.reduce_mean((tv.reduce_sum(xb * w, axis=1) - yb) ** 2) - 100.0 * count
        return {"loss": loss, "optimizer": tv.train.GradientDescentOptimizer(0.01),
                "batch_size": batch}
    return model_fn


def _final(name):
    return lambda ctx, g: {"w": g.get_tensor_by_name(f"{name}:0"),
                           "count": g.get_tensor_by_name(f"{name}_count:0")}


class _Runs(tv.train.SessionRunHook):
    """Each run of the task's replica graph, with when it ended."""

    def __init__(self, task, log):
        self.task, self.log = task, log

    def after_run(self, run_context, run_values):
        self.log.append((self.task, time.monotonic()))


def _assert_each_step_applied_once(r, n_required, stopped_early=False):
    """One apply a global step, N gradients each; a run stopped by its monitor may leave
    each worker's last gradient accepted for a step the chief had not taken yet."""
    assert float(r.final["count"]) == r.global_step, (r.final, r.global_step)
    c = r.counters
    extra = c["accepted"] - r.global_step * n_required
    assert c["taken"] == r.global_step and 0 <= extra <= (2 if stopped_early else 0), c


def test_sync_k_steps_a_run_equal_numpy_sgd(hc, session):
    """backup_workers=0, 5 steps a run: every global step averages worker-0's batch t and
    worker-1's batch t, as synchronous SGD in NumPy does; each worker runs 4 runs of 5."""
    X, y = _data()
    steps, batch, lr = 20, 8, 0.01
    r = tv.train.run_replicas(_model(X, y, batch, "w_k"), SPEC, session=session, sync=True,
                              last_step=steps, steps_per_run=5, final=_final("w_k"))
    w = np.zeros(X.shape[1], np.float32)
    shards = [(X[k::2], y[k::2]) for k in range(2)]
    for t in range(steps):
        grads = []
        for xk, yk in shards:
            idx = (t * batch + np.arange(batch)) % len(xk)
            xb, yb = xk[idx], yk[idx]
            grads.append((2.0 / batch) * xb.T @ (xb @ w - yb))
        w = w - lr * np.mean(grads, axis=0)
    assert r.global_step == steps
    assert r.worker_runs == [4, 4], r.worker_runs
    np.testing.assert_allclose(r.final["w"], w, rtol=1e-5, atol=1e-6)
    _assert_each_step_applied_once(r, 2)


def test_sync_worker_killed_and_restarted_1s_later(hc, session):
    """Two gradients a step (no backup). worker-1 is killed (``kill -9``) at global step 30
    and started again by name 1 s later: the steps go on — worker-1's in-flight closure runs
    again, and the restarted worker-1 takes closures (a step needs its gradient) — every
    global step is applied once and no gradient is accepted twice."""
    X, y = _data(seed=1)
    runs: list = []
    done = threading.Event()
    restarted: list = []

    def kill_and_restart():
        hc.kill("worker-1")
        time.sleep(1.0)
        restarted.append(time.monotonic())
        hc.start_worker("worker-1")
        done.set()

    def monitor(step, values):
        if step >= 30 and not restarted and not done.is_set() and \
                not any(t.name == "kill-worker-1" for t in threading.enumerate()):
            threading.Thread(target=kill_and_restart, name="kill-worker-1",
                             daemon=True).start()
        return False

    r = tv.train.run_replicas(_model(X, y, 8, "w_kill"), SPEC, session=session, sync=True,
                              last_step=150, final=_final("w_kill"), monitor=monitor,
                              monitor_every=10, hooks_fn=lambda ctx: [_Runs(ctx.task, runs)])
    assert done.wait(60)
    assert r.global_step == 150
    _assert_each_step_applied_once(r, 2)
    after = [t for task, t in runs if task == 1 and t > restarted[0]]
    assert len(after) >= 1, runs[-10:]  # the restarted worker-1 took steps
    assert r.recoveries >= 1  # its closure put back (a worker loss)


def test_a_worker_joining_a_sync_run_takes_steps(hc, session):
    """One gradient a step of two workers (``backup_workers=1``), begun with worker-1
    stopped: worker-1, started at global step 20, takes steps while the run goes on."""
    hc.stop_worker("worker-1")
    X, y = _data(seed=2)
    runs: list = []
    started: list = []
    t0 = time.monotonic()

    def monitor(step, values):
        if not started and step >= 20:
            hc.start_worker("worker-1")
            started.append(step)
        return sum(1 for task, _ in runs if task == 1) >= 20 or time.monotonic() - t0 > 300

    r = tv.train.run_replicas(_model(X, y, 8, "w_join"), SPEC, session=session, sync=True,
                              backup_workers=1, last_step=10 ** 7, final=_final("w_join"),
                              monitor=monitor, monitor_every=10,
                              hooks_fn=lambda ctx: [_Runs(ctx.task, runs)])
    assert started and r.steps_by_worker.get("worker-1", 0) >= 20, r.steps_by_worker
    _assert_each_step_applied_once(r, 1, stopped_early=True)


def test_a_k_step_closure_whose_worker_dies_mid_run_applies_each_step_once(
        hc, session, tmp_path):
    """Async on the coordinator, 5 steps a run (``worker.run(..., steps=5)``): worker-1
    dies inside a run, after its first step's update reached the PS. The closure runs again on
    worker-0 with its token: the twin's first step is dropped and its other four applied, so
    every closure adds exactly 5. Before per-step tokens a K-step run was unguarded (the twin
    added 5 more: 5 x closures + 1)."""
    import os

    from test_coordinator_elastic import _counter

    from tensorvm.train.coordinator import ClusterCoordinator
    flag = str(tmp_path / "kill-pid")
    n, k = 20, 5

    def run_k(w):
        w.run(w.model["after"], steps=k)
        return w.name

    with ClusterCoordinator(session, _counter(flag)) as coord:
        warm = threading.Barrier(2, timeout=120)
        for _ in range(2):
            coord.schedule(lambda w: (warm.wait(), run_k(w)))
        coord.join()
        addr = hc.workers()["worker-1"]
        pid = hc.client.run(os.getpid, workers=[addr])[addr]
        with open(flag, "w") as f:
            f.write(str(pid))
        rvs = [coord.schedule(run_k) for _ in range(n)]
        coord.join()
        names = [rv.fetch() for rv in rvs]  # no error
        count = int(coord.run_on_chief("count"))
        counters = coord.counters()
        losses = coord.worker_losses
    assert not os.path.exists(flag), "worker-1 never ran a step after the kill was armed"
    assert losses >= 1 and set(names) <= {"worker-0", "worker-1"}
    assert count == k * (n + 2), count
    assert counters["applied"] == k * (n + 2) and counters["dropped"] >= 1, counters
