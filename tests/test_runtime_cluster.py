"""Reliability of the distributed runtime (issue 9, issue 7 bug 7) on one LocalCluster of
worker processes (ps-0, worker-0, worker-1): what it listens on, steps that stop, fetches that
are never restarted, bad py_funcs, dropped sessions, quiet logs, state left by an earlier
program."""
import gc
import logging
import os
import threading
import time
import traceback

import numpy as np
import psutil
import pytest
import tensorvm as tv

pytestmark = pytest.mark.cluster

TV_CLUSTER = {"ps": 1, "worker": 2}
PS = "/job:ps/replica:0/task:0/device:CPU:0"


def _sleep(seconds):
    def f(x):
        time.sleep(seconds)
        return x
    return f


def _wait_idle(cluster, task_name, timeout=30.0):
    """Until no thread of ``task_name``'s worker executes a task (given-up ones included)."""
    addr = cluster.worker(task_name)
    deadline = time.monotonic() + timeout
    while cluster.client.run(lambda dask_worker: dask_worker.state.executing_count,
                             workers=[addr])[addr]:
        assert time.monotonic() < deadline, f"{task_name} never became idle"
        time.sleep(0.05)


# ---- item 1: a closed cluster by default ----------------------------------------------------

def _listening(pids) -> list:
    out = []
    for pid in pids:
        for c in psutil.Process(pid).net_connections(kind="inet"):
            if c.status == psutil.CONN_LISTEN:
                out.append((pid, c.laddr.ip, c.laddr.port))
    return out


def test_everything_the_session_started_listens_on_loopback(cluster):
    # the scheduler, its dashboard and the nannies live in this process, each worker in its own
    workers = cluster.client.run(os.getpid)
    pids = {os.getpid(), *workers.values()}
    assert len(pids) == 4
    socks = _listening(pids)
    assert {p for p, _, _ in socks} == pids
    assert all(ip == "127.0.0.1" for _, ip, _ in socks), socks
    dash = cluster.client.dashboard_link
    assert dash and "127.0.0.1" in dash


# ---- item 3: steps that stop ---------------------------------------------------------------

def test_timed_out_step_never_applies_its_update_and_frees_the_device(cluster, caplog):
    g = tv.Graph()
    with g.as_default(), tv.device("/job:ps/task:0"):
        v = tv.Variable(0.0, name="late_counter")
        slow = tv.py_func(_sleep(2.0), [tv.constant(1.0)], tv.float32, name="slow")
        up = v.assign_add(slow, name="late_update")
        quick = v * 1.0
    s = cluster.session(g)
    s.run(v.initializer)
    with caplog.at_level(logging.ERROR):
        for attempt in range(2):  # a retrying client
            t0 = time.monotonic()
            with pytest.raises(tv.errors.DeadlineExceededError) as e:
                s.run(up, options=tv.RunOptions(timeout_in_ms=300))
            assert time.monotonic() - t0 < 5
            assert PS in str(e.value) and "slow" in str(e.value)
            assert "late_update" in str(e.value)  # named: its stage had started
            if attempt == 0:
                # one of the device's two threads is free: a trivial step does not queue
                t0 = time.monotonic()
                assert s.run(quick) == 0.0
                assert time.monotonic() - t0 < 1.0
        _wait_idle(cluster, "ps-0")
        assert s.run(v) == 0.0  # neither given-up step's update landed
        gc.collect()
    assert not [r for r in caplog.records if "never retrieved" in r.getMessage()]
    assert s.run(up) == 1.0


def _fail_now(x):
    raise ValueError("bad batch")


def test_failed_step_cancels_its_other_parts(cluster):
    g = tv.Graph()
    with g.as_default():
        with tv.device("/job:ps/task:0"):
            v = tv.Variable(0.0, name="after_error")
            slow = tv.py_func(_sleep(2.0), [tv.constant(1.0)], tv.float32)
            up = v.assign_add(slow)
        with tv.device("/job:worker/task:0"):
            bad = tv.py_func(_fail_now, [tv.constant(1.0)], tv.float32, name="bad")
    s = cluster.session(g)
    s.run(v.initializer)
    t0 = time.monotonic()
    with pytest.raises(tv.errors.InvalidArgumentError, match="bad batch"):
        s.run([up, bad])
    assert time.monotonic() - t0 < 1.5  # the error comes back at once
    _wait_idle(cluster, "ps-0")
    assert s.run(v) == 0.0  # the PS part stopped before its update


# ---- item 4: a fetch is never restarted --------------------------------------------------------

def test_fetch_slower_than_the_poll_interval_completes(cluster, monkeypatch):
    import tensorvm.runtime.dask_plane as db
    monkeypatch.setattr(db, "POLL_S", 0.005)  # every transfer outlasts the poll interval
    g = tv.Graph()
    with g.as_default(), tv.device("/job:worker/task:0"):
        n = tv.placeholder(tv.int32, [1])
        big = tv.fill(n, 1.0)
    s = cluster.session(g)
    t0 = time.monotonic()
    out = s.run(big, {n: [32 * 2 ** 20]})  # 128 MB
    took = time.monotonic() - t0
    assert out.shape == (32 * 2 ** 20,) and out[-1] == 1.0
    assert took < 30


# ---- item 7: a py_func that cannot travel -----------------------------------------------------

def test_unserialisable_py_func_names_op_line_and_object(cluster):
    lock = threading.Lock()

    def locked(x):
        with lock:
            return x
    g = tv.Graph()
    with g.as_default(), tv.device("/job:worker/task:1"):
        y = tv.py_func(locked, [tv.constant(1.0)], tv.float32, name="needs_lock")
    s = cluster.session(g)
    with pytest.raises(tv.errors.InvalidArgumentError) as e:
        s.run(y)
    msg = str(e.value)
    assert "needs_lock" in msg and "test_runtime_cluster.py" in msg and "lock" in msg


# ---- item 8: a dropped session closes its client ---------------------------------------------

def _clients(cluster) -> int:
    return len(cluster.client.run_on_scheduler(
        lambda dask_scheduler: list(dask_scheduler.clients)))


def test_dropped_sessions_close_their_clients(cluster):
    cluster.wait_full()
    before = _clients(cluster)
    threads = threading.active_count()
    for _ in range(3):
        s = tv.Session(cluster.address, graph=tv.Graph(), cluster=cluster.spec, verbose=False)
        assert _clients(cluster) == before + 1
        del s
        gc.collect()
    deadline = time.monotonic() + 20
    while _clients(cluster) != before:
        assert time.monotonic() < deadline, "dropped sessions kept their clients"
        time.sleep(0.05)
    assert threading.active_count() <= threads + 1


# ---- item 9: expected outcomes are not logged as errors ----------------------------------------

def test_expected_errors_leave_no_compute_failed_in_worker_logs(cluster):
    g = tv.Graph()
    with g.as_default():
        with tv.device("/job:ps/task:0"):
            v = tv.Variable(1.0, name="never_initialised")
            q = tv.FIFOQueue(2, tv.float32, shapes=[[]], name="ended_input")
        with tv.device("/job:worker/task:0"):
            y = v * 2.0
    s = cluster.session(g)
    with pytest.raises(tv.errors.FailedPreconditionError):
        s.run(y)
    s.run(q.close())
    with pytest.raises(tv.errors.OutOfRangeError):
        s.run(q.dequeue())
    logs = cluster.client.get_worker_logs()
    failed = [msg for recs in logs.values() for _, msg in recs
              if "Compute Failed" in msg and ("FailedPrecondition" in msg or "OutOfRange" in msg)]
    assert not failed, failed[0]


# ---- issue 7 bug 7: state left by an earlier program ---------------------------------------------

def test_variable_left_by_an_earlier_program_says_reset(cluster):
    def program(shape):
        g = tv.Graph()
        with g.as_default(), tv.device("/job:ps/task:0"):
            w = tv.Variable(np.zeros(shape, np.float32), name="W_left_over")
        return g, w
    g1, w1 = program([100, 10])
    cluster.session(g1).run(w1.initializer)
    g2, w2 = program([4, 4])
    s2 = cluster.session(g2)
    with pytest.raises(tv.errors.InvalidArgumentError) as e:
        s2.run(w2.initializer)
    msg = str(e.value)
    assert "[100, 10]" in msg and "[4, 4]" in msg
    assert "outlive" in msg and "tv.Session.reset(target)" in msg
    lines = "".join(traceback.format_exception(e.value)).splitlines()
    assert len(lines) < 25, "\n".join(lines)
    assert tv.Session.reset(cluster.address) >= 1
    s2.run(w2.initializer)
    assert s2.run(w2).shape == (4, 4)


# ---- item 5: a resource lost with its worker stays lost ------------------------------------------

def test_queue_lost_with_its_worker_stays_lost_until_reset(cluster):
    g = tv.Graph()
    with g.as_default(), tv.device("/job:ps/task:0"):
        q = tv.FIFOQueue(10, tv.float32, shapes=[[]], name="lost_q")
        enq = q.enqueue_many([[1.0, 2.0, 3.0]])
        deq = q.dequeue()
        v = tv.Variable(5.0, name="lost_v")
    s = cluster.session(g)
    s.run([enq, v.initializer])
    assert s.run(deq) == 1.0
    old = cluster.kill("ps-0")
    deadline = time.monotonic() + 60
    while cluster.workers().get("ps-0") in (None, old):  # until its Nanny restarted it
        assert time.monotonic() < deadline
        time.sleep(0.05)
    s2 = cluster.session(g)  # maps the device anew, onto the restarted worker
    t0 = time.monotonic()
    with pytest.raises(tv.errors.UnavailableError, match="lost_q.*left the cluster"):
        s2.run(deq)  # no timeout: it must not block on a silently re-created empty queue
    with pytest.raises(tv.errors.UnavailableError, match="lost_q"):
        s2.run(q.size())
    assert time.monotonic() - t0 < 10
    with pytest.raises(tv.errors.FailedPreconditionError, match="lost_v"):
        s2.run(v)
    tv.Session.reset(cluster.address)  # re-created on purpose
    s2.run(enq)
    assert s2.run(deq) == 1.0


# ---- issue 11 item 2: a lost worker is an event, and its device goes back to its restart -------

def test_lost_ps_fails_the_step_at_once_and_its_device_waits_for_the_restart(cluster, tmp_path):
    """The step fails on the scheduler's event (no poll), naming device and worker; the next
    step, run at once, maps the device onto the restarted ``ps-0`` rather than onto another
    task's worker that was free at that instant (the device would then live on the wrong
    worker for every later session, and killing ``ps-0`` would kill nothing of it)."""
    started = tmp_path / "started"

    def mark_and_sleep(x):
        started.touch()
        time.sleep(60.0)
        return x
    g = tv.Graph()
    with g.as_default():
        with tv.device("/job:ps/task:0"):
            v = tv.Variable(3.0, name="lost_home")
            blocked = tv.py_func(mark_and_sleep, [v.value()], tv.float32)
        with tv.device("/job:worker/task:0"):
            out = blocked * 2.0
    s = cluster.session(g)
    s.run(v.initializer)
    box = {}

    def step():
        try:
            s.run(out)
        except BaseException as e:  # noqa: BLE001 - checked below
            box["error"] = e
    th = threading.Thread(target=step)
    th.start()
    deadline = time.monotonic() + 30
    while not started.exists():
        assert time.monotonic() < deadline
        time.sleep(0.02)
    old = cluster.kill("ps-0")
    t0 = time.monotonic()
    th.join(30)
    took = time.monotonic() - t0
    err = box.get("error")
    assert isinstance(err, tv.errors.UnavailableError), err
    assert PS in str(err) and "'ps-0'" in str(err) and old in str(err), str(err)
    assert took < 5, took
    with pytest.raises(tv.errors.FailedPreconditionError, match="lost_home"):
        s.run(v)  # at once: mapped anew, onto the restarted ps-0 (its state is gone)
    cluster.wait_full()
    new = cluster.worker("ps-0")
    assert new != old and s.devices["ps-0"] == new
    s.run(v.initializer)
    assert s.run(v) == 3.0


# ---- audit: a device whose worker left between two steps of a session ---------------------------

def test_new_plan_after_its_ps_left_between_steps_fails_at_once_naming_the_worker(cluster):
    """The session mapped ps-0, then ps-0 was killed (and restarted) while the session was
    idle. The next step of a plan never run before must not try to register that plan on the
    dead address (a raw OSError after Dask's 20 s connect timeout): it fails at once with
    UnavailableError naming the device and the worker, and the step after maps the device onto
    the restarted ps-0."""
    g = tv.Graph()
    with g.as_default(), tv.device("/job:ps/task:0"):
        v = tv.Variable(3.0, name="idle_lost")
        doubled = v * 2.0
    s = cluster.session(g)
    s.run(v.initializer)
    assert s.run(v) == 3.0
    old = cluster.kill("ps-0")
    deadline = time.monotonic() + 30
    while cluster.workers().get("ps-0") in (None, old):
        assert time.monotonic() < deadline
        time.sleep(0.05)
    t0 = time.monotonic()
    with pytest.raises(tv.errors.UnavailableError) as ei:
        s.run(doubled)  # a plan not registered yet
    assert time.monotonic() - t0 < 5
    assert PS in str(ei.value) and "'ps-0'" in str(ei.value) and old in str(ei.value)
    # mapped anew, onto the restarted ps-0 (its state is gone). On a loaded machine the
    # scheduler's news of the old worker's departure can come after that first step: a step
    # in that window is UnavailableError too (the product's rule while a task is away), so
    # retry for a bounded time
    deadline = time.monotonic() + 20
    while True:
        try:
            s.run(doubled)
        except tv.errors.FailedPreconditionError as e:
            assert "idle_lost" in str(e)
            break
        except tv.errors.UnavailableError:
            assert time.monotonic() < deadline, "ps-0 was never mapped anew"
            time.sleep(0.2)
        else:
            raise AssertionError("the restarted ps-0 kept the lost variable's value")
    assert s.devices["ps-0"] == cluster.worker("ps-0")
    s.run(v.initializer)
    assert s.run(doubled) == 6.0


def test_a_cluster_start_interrupted_by_ctrl_c_leaves_nothing_for_exit(monkeypatch):
    """Ctrl-C while the session's LocalCluster starts: the half-started cluster is closed at
    once; it was left to distributed's exit hook, which printed 'Exception ignored in atexit
    callback ... AssertionError: Status.init' after tensorvm's own one line."""
    import distributed
    from distributed.deploy import spec as dspec
    from tensorvm.runtime.cluster.local import start_local_cluster

    import asyncio
    import os
    import signal
    start = distributed.Nanny.start_unsafe

    async def interrupted(self):  # Ctrl-C reaches the main thread while a worker starts
        os.kill(os.getpid(), signal.SIGINT)
        await asyncio.sleep(1)
        return await start(self)

    monkeypatch.setattr(distributed.Nanny, "start_unsafe", interrupted)
    before = set(dspec.SpecCluster._instances)
    with pytest.raises(KeyboardInterrupt):
        start_local_cluster(tv.train.ClusterSpec({"worker": 1}))
    left = [c for c in set(dspec.SpecCluster._instances) - before
            if getattr(c, "status", None) != distributed.core.Status.closed]
    assert left == []
    # what runs at exit, on this test's clusters only (a cluster shared by the run stays up):
    # nothing left to fail
    import weakref
    monkeypatch.setattr(dspec.SpecCluster, "_instances",
                        weakref.WeakSet(set(dspec.SpecCluster._instances) - before))
    dspec.close_clusters()
