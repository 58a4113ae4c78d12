"""``tv.train.ClusterCoordinator`` on a cluster started by hand (``dask scheduler``, workers
``ps-0``, ``worker-0``, ``worker-1`` of one thread each), disturbed as an operator's cluster is:
a worker that dies after its step's update reached the PS, a worker killed (``kill -9``, Nanny
included) mid-run and restarted 1 s later, a worker that joins a run begun without it.

Each step adds one to a PS counter: the counter equals the number of scheduled steps exactly
when every step was applied once. Failures first: before the coordinator nothing scheduled
steps to whichever worker was free (``run_replicas`` bound a replica to a task for the whole
run, and a worker absent at the start stopped the run:
``test_run_replicas_gives_a_joining_worker_steps`` fails on the old ``run_replicas``); without
the step token (``exactly_once=False``, TF 2's at-least-once) the update of a step whose worker died after it reached the PS counts twice.
"""
from __future__ import annotations

import os
import threading
import time

import numpy as np
import pytest
from hand_cluster import HandCluster

import tensorvm as tv
from tensorvm.train.coordinator import ClusterCoordinator

pytestmark = [pytest.mark.cluster, pytest.mark.filterwarnings("ignore::ResourceWarning")]
SPEC = {"ps": 1, "worker": 2}


@pytest.fixture(scope="module")
def hc(tmp_path_factory):
    with HandCluster(tmp_path_factory.mktemp("coord-cluster")) as cluster:
        for name in ("ps-0", "worker-0", "worker-1"):
            cluster.start_worker(name)
        cluster.wait_for(("ps-0", "worker-0", "worker-1"))
        yield cluster


@pytest.fixture
def session(hc):
    for name in ("ps-0", "worker-0", "worker-1"):  # a test may leave one stopped or dead
        p = hc.procs.get(name)
        if p is None or p.poll() is not None:
            hc.start_worker(name)
    hc.wait_for(("ps-0", "worker-0", "worker-1"))
    tv.Session.reset(hc.address)
    s = tv.Session(hc.address, cluster=SPEC, graph=tv.Graph(), verbose=False)
    yield s
    s.close()


def _counter(kill_flag: str | None = None):
    """A step adds one to ``count`` on the PS, reading a local variable of the worker; with
    ``kill_flag``, a py_func on the worker that runs *after* the update reached the PS kills
    its own process if the file names its pid (once: the file is removed first)."""
    def die_if_named(x):
        import os
        import signal
        try:
            with open(kill_flag) as f:
                pid = int(f.read())
        except (OSError, ValueError):
            return x
        if pid == os.getpid():
            os.remove(kill_flag)
            os.kill(pid, signal.SIGKILL)
        return x

    def model_fn(ctx):
        count = tv.Variable(np.int64(0), name="count")
        one = tv.Variable(np.int64(1), name="one", trainable=False,
                          collections=["local_variables"])
        gs = tv.train.get_global_step()  # made by the coordinator: checkpoints are named by it
        step = tv.group(count.assign_add(one.read_value()), gs.assign_add(1))
        out = {"count": count, "step": step}
        if kill_flag is not None:
            with tv.control_dependencies([step]):
                out["after"] = tv.py_func(die_if_named, [one.read_value()], tv.int64,
                                          stateful=True)
        return out
    return model_fn


def _step(worker, key="step"):
    worker.run(worker.model[key])
    return worker.name


@pytest.mark.parametrize("guarded", [True, False], ids=["exactly_once", "at_least_once"])
def test_a_step_whose_worker_dies_after_its_update_reached_the_ps_counts_once(
        hc, session, tmp_path, guarded):
    """worker-1 dies inside a step, after the step's update was applied on the PS and before
    its result came back: the closure runs again on a live worker with its token, and the PS
    drops the twin's update. Without the guard the update counts twice (TF 2's semantics)."""
    flag = str(tmp_path / "kill-pid")
    n = 40
    with ClusterCoordinator(session, _counter(flag), exactly_once=guarded) as coord:
        # warm both workers, then arm the kill for worker-1's process
        warm = threading.Barrier(2, timeout=120)
        for _ in range(2):
            coord.schedule(lambda w: (warm.wait(), _step(w, "after")))
        coord.join()
        addr = hc.workers()["worker-1"]
        pid = hc.client.run(os.getpid, workers=[addr])[addr]
        with open(flag, "w") as f:
            f.write(str(pid))
        rvs = [coord.schedule(_step, args=("after",)) for _ in range(n)]
        coord.join()
        names = [rv.fetch() for rv in rvs]  # no error
        count = int(coord.run_on_chief("count"))
        counters = coord.counters()
        losses = coord.worker_losses
    assert not os.path.exists(flag), "worker-1 never ran a step after the kill was armed"
    assert losses >= 1 and set(names) <= {"worker-0", "worker-1"}
    if guarded:
        assert count == n + 2, count  # the warm-up's 2 and the n scheduled, each once
        assert counters == {"applied": n + 2, "dropped": 1}, counters
    else:
        assert count == n + 3, count  # the killed step's update counted twice


def test_a_worker_killed_and_restarted_1s_later_loses_no_step(hc, session):
    """``kill -9`` of worker-1 (its Nanny too) while closures run, restarted by name 1 s
    later: every scheduled step is applied exactly once, no closure fails, and the restarted
    worker takes closures again."""
    n = 400
    started = threading.Event()

    def step(w):
        if w.name == "worker-1" and w.finished >= 10:
            started.set()
        return _step(w)

    with ClusterCoordinator(session, _counter()) as coord:
        rvs = [coord.schedule(step) for _ in range(n)]
        assert started.wait(120)
        hc.kill("worker-1")
        time.sleep(1.0)
        hc.start_worker("worker-1")
        coord.join()
        assert all(rv.fetch() in ("worker-0", "worker-1") for rv in rvs)
        count = int(coord.run_on_chief("count"))
        counters = coord.counters()
        # the restarted worker-1 takes closures: two that wait for each other need both
        hc.wait_for(("worker-1",))
        both = threading.Barrier(2, timeout=120)
        pair = [coord.schedule(lambda w: (both.wait(), _step(w))[1]) for _ in range(2)]
        assert sorted(coord.fetch(pair)) == ["worker-0", "worker-1"]
        lives = coord.workers()[1].lives
    assert count == n, count
    assert counters["applied"] == n and counters["dropped"] <= 1, counters
    assert lives == 2


def test_a_worker_that_joins_takes_steps_at_once(hc, session):
    """The run begins with worker-0 alone (worker-1 stopped); worker-1 started mid-run gets
    a thread and takes closures while the run goes on."""
    hc.stop_worker("worker-1")
    with ClusterCoordinator(session, _counter()) as coord:
        assert coord.num_workers() == 1
        rvs = [coord.schedule(_step) for _ in range(50)]
        coord.join()
        assert coord.steps_by_worker() == {"worker-0": 50}
        hc.start_worker("worker-1")
        # keep scheduling until worker-1 has taken some (its start takes seconds)
        deadline = time.monotonic() + 120
        while coord.steps_by_worker().get("worker-1", 0) < 10:
            assert time.monotonic() < deadline, coord.steps_by_worker()
            rvs += [coord.schedule(_step) for _ in range(20)]
            coord.join()
        count = int(coord.run_on_chief("count"))
        by_worker = coord.steps_by_worker()
    assert count == len(rvs) == sum(by_worker.values())
    assert by_worker["worker-1"] >= 10


def test_run_replicas_gives_a_joining_worker_steps(hc, session):
    """``run_replicas(sync=False)`` begun with worker-1 stopped: worker-1, started after 50
    global steps, takes steps. The old ``run_replicas`` bound replica 1 to task 1 for the
    whole run and could not even start without worker-1: replica 1's session failed to map
    its task (UnavailableError), and the run ended in a KeyError; worker-1 got no step."""
    hc.stop_worker("worker-1")
    X = np.random.default_rng(1).normal(size=(64, 2)).astype(np.float32)
    counts: dict = {0: 0, 1: 0}
    started: list = []
    t0 = time.monotonic()

    class Count(tv.train.SessionRunHook):
        def __init__(self, task):
            self.task = task

        def after_run(self, run_context, run_values):
            counts[self.task] += 1

    def model_fn(ctx):
        xb = tv.train.cycling_batch([X], 8, device=ctx.device)[0]
        w = tv.Variable(np.zeros(2, np.float32), name="w_join")
        loss = tv.reduce_mean((tv.reduce_sum(xb * w, axis=1) - 1.0) ** 2)
        return {"loss": loss, "optimizer": tv.train.GradientDescentOptimizer(0.01)}

    def monitor(step, values):
        if not started and step >= 50:
            hc.start_worker("worker-1")
            started.append(step)
        return counts[1] >= 20 or time.monotonic() - t0 > 300

    r = tv.train.run_replicas(model_fn, SPEC, session=session, sync=False, last_step=10 ** 7,
                              final=lambda ctx, g: {"w": g.get_tensor_by_name("w_join:0")},
                              monitor=monitor, monitor_every=10,
                              hooks_fn=lambda ctx: [Count(ctx.task)])
    info = hc.client.scheduler_info(n_workers=-1)["workers"]
    holder = [str(w["name"]) for w in info.values() if "tvm-dev-worker-1" in w["resources"]]
    assert holder == ["worker-1"], holder
    assert r.steps_by_worker.get("worker-1", 0) >= 20, r.steps_by_worker
    # steps_per_run=1: one global step a run, each applied once
    assert r.global_step == sum(r.steps_by_worker.values()) == sum(r.worker_runs)


def test_a_lost_ps_fails_the_closure_without_a_checkpoint_dir(hc, session):
    """ps-0 killed: the next closure fails with UnavailableError naming the PS device (its
    variables are gone), and ``join`` raises it, as TF 2's coordinator does."""
    with ClusterCoordinator(session, _counter()) as coord:
        coord.schedule(_step).fetch()
        hc.kill("ps-0")
        hc.wait_for((), gone=("ps-0",))
        rv = coord.schedule(_step)
        pattern = r"device /job:ps/replica:0/task:0/device:CPU:0 is unavailable: its worker"
        with pytest.raises(tv.errors.UnavailableError, match=pattern):
            coord.join()
        with pytest.raises(tv.errors.UnavailableError, match=pattern):
            rv.fetch()
        assert coord.recoveries == 0


def test_a_lost_ps_is_restored_from_the_checkpoint(hc, session, tmp_path):
    """With ``checkpoint_dir``: ps-0 killed mid-run and restarted 1 s later; the coordinator
    waits for it, restores the latest checkpoint (saved every 20 closures, named by the global
    step) and runs the failed closures again: no error, and the counter lost only the steps
    since that checkpoint."""
    n, every = 200, 20
    go = threading.Event()

    def step(w):
        if w.finished >= 30:
            go.set()
        return _step(w)

    with ClusterCoordinator(session, _counter(), checkpoint_dir=f"file://{tmp_path}/ck",
                            save_checkpoint_steps=every) as coord:
        rvs = [coord.schedule(step) for _ in range(n)]
        assert go.wait(120)
        hc.kill("ps-0")
        time.sleep(1.0)
        hc.start_worker("ps-0")
        coord.join()
        assert all(rv.fetch() in ("worker-0", "worker-1") for rv in rvs)
        count = int(coord.run_on_chief("count"))
        recoveries = coord.recoveries
    assert recoveries == 1
    # lost: the closures that finished after the last checkpoint's read (fewer than 2 saves'
    # worth: the next save would have come first)
    assert n - 2 * every < count <= n, count


def test_a_session_joined_by_address_reads_the_jobs_from_the_worker_names(hc, session):
    """No ClusterSpec (``tv.Session(address)``): the jobs and tasks are those of the workers
    named ``<job>-<k>`` (ps-0, worker-0, worker-1 here)."""
    with tv.Session(hc.address, graph=tv.Graph(), verbose=False) as bare:
        with ClusterCoordinator(bare, _counter()) as coord:
            assert (coord.spec.num_tasks("ps"), coord.spec.num_tasks("worker")) == (1, 2)
            rvs = [coord.schedule(_step) for _ in range(20)]
            coord.join()
            assert int(coord.run_on_chief("count")) == 20
            assert set(coord.fetch(rvs)) <= {"worker-0", "worker-1"}
