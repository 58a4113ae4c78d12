"""Faults around a session's step (issue 24, items 2 and 3):

* the Dask scheduler killed (SIGKILL) while a *direct-plane* step runs, on a cluster of the
  ``dask`` CLI (scheduler, ``ps-0`` and ``worker-0`` without Nannies): the step, and the next
  step, say the scheduler is gone (UnavailableError), as the Dask plane does — the step blamed
  ps-0 ("closed the connection mid-step"; its worker closes itself when its scheduler goes)
  and the next ``run`` waited the client's 20 s reconnect, then raised a raw ``KeyError:
  'workers'`` or ``AttributeError`` from mapping ps-0 again;
* ``Session.close()`` from another thread while an in-process step runs: the step ends with
  CancelledError and its update does not happen (it raised ``FailedPreconditionError:
  uninitialized value`` once the py_func returned: close had cleared the variables under it).
"""
import os
import signal
import threading
import time

import pytest
import tensorvm as tv
from test_external_cluster import _read_address, _spawn, _stop

# ---- the scheduler killed during a direct-plane step ----------------------------------------


def _touch_then_sleep(path, seconds):
    """A py_func body: says it started (a file), then sleeps (the step is mid-flight)."""
    def f(x):
        with open(path, "w") as fh:
            fh.write("started")
        time.sleep(seconds)
        return x
    return f


@pytest.mark.cluster
@pytest.mark.parametrize("plane", ["direct", "dask"])
def test_scheduler_killed_during_a_step_is_named_by_the_step_and_the_next(tmp_path, plane):
    sched_file = tmp_path / "scheduler.json"
    procs = [_spawn(["scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
                     "--scheduler-file", str(sched_file)], tmp_path / "scheduler.log")]
    try:
        address = _read_address(sched_file, procs[0])
        for name in ("ps-0", "worker-0"):
            procs.append(_spawn(["worker", "--scheduler-file", str(sched_file), "--name", name,
                                 "--nthreads", "2", "--no-dashboard", "--no-nanny",
                                 "--host", "127.0.0.1"], tmp_path / f"{name}.log"))
        started = tmp_path / "started"
        g = tv.Graph()
        with g.as_default():
            with tv.device("/job:ps/task:0"):
                v = tv.Variable(1.0, name="v")
            with tv.device("/job:worker/task:0"):
                # 60 s: the step can only end early through the kill
                slow = tv.py_func(_touch_then_sleep(str(started), 60), [v.value()], tv.float32)
            with tv.device("/job:ps/task:0"):
                upd = tv.assign_add(v, slow)
        from distributed import Client
        with Client(address, set_as_default=False, timeout="30s") as c:
            c.wait_for_workers(2, timeout=60)
        s = tv.Session(address, graph=g, cluster={"ps": 1, "worker": 1}, verbose=False,
                       config=tv.ConfigProto(data_plane=plane))
        try:
            s.run(v.initializer)
            assert s.run(v) == 1.0
            box = {}

            def step():
                try:
                    box["value"] = s.run(upd)
                except Exception as e:  # noqa: BLE001 - checked below
                    box["error"] = e
            th = threading.Thread(target=step)
            th.start()
            deadline = time.monotonic() + 60
            while not started.exists():  # the py_func runs on worker-0: the step is mid-flight
                assert th.is_alive() and time.monotonic() < deadline, box
                time.sleep(0.05)
            os.killpg(procs[0].pid, signal.SIGKILL)
            procs[0].wait(10)
            t0 = time.monotonic()
            th.join(30)
            assert not th.is_alive(), "the step still runs after its scheduler was killed"
            took = time.monotonic() - t0
            err = box.get("error")
            assert isinstance(err, tv.errors.UnavailableError), repr(box)
            msg = str(err)
            assert f"the Dask scheduler at {address} is gone" in msg, msg
            assert "ps-0" not in msg and "worker-0" not in msg, msg
            assert took < 30, took  # not the py_func's 60 s
            # The next step: the same error, at once — not the client's reconnect (20 s) and
            # then a raw KeyError/AttributeError from mapping a device again.
            for fetch in (v, upd):
                t0 = time.monotonic()
                with pytest.raises(tv.errors.UnavailableError) as info:
                    s.run(fetch)
                took = time.monotonic() - t0
                msg = str(info.value)
                assert f"the Dask scheduler at {address} is gone" in msg, msg
                # raised while the client still tries to reconnect, not after it gave up
                assert "'connecting'" in msg, msg
                assert took < 15, took
        finally:
            s.close()
    finally:
        for p in procs:  # the workers close themselves once their scheduler is gone; one
            if p.poll() is None:  # still in its 60 s py_func would hold _stop's SIGTERM 10 s
                os.killpg(p.pid, signal.SIGKILL)
        for p in reversed(procs):
            _stop(p)


# ---- Session.close() from another thread during an in-process step --------------------------

def test_closing_an_in_process_session_cancels_its_running_step():
    """TF's ``Session.close`` cancels the session's pending runs: the step that was in its
    py_func when the session closed ends with CancelledError (saying the session closed and
    naming the update that did not run), not FailedPreconditionError from variables cleared
    under it; its update never happens."""
    in_step = threading.Event()
    release = threading.Event()
    seen = []

    def slow(x):
        in_step.set()
        release.wait(60)  # until the session is closed (the 3 s sleep of the issue)
        return x

    def record(x):
        seen.append(float(x))
        return x

    g = tv.Graph()
    with g.as_default():
        v = tv.Variable(1.0, name="v")
        gate = tv.py_func(slow, [v.value()], tv.float32, name="slow")
        upd = tv.assign_add(v, gate, name="upd")
        after = tv.py_func(record, [upd], tv.float32, name="after")
    s = tv.Session(graph=g)
    s.run(v.initializer)
    assert s.run(v) == 1.0
    box = {}

    def step():
        try:
            box["value"] = s.run(after)
        except Exception as e:  # noqa: BLE001 - checked below
            box["error"] = e
    th = threading.Thread(target=step)
    th.start()
    assert in_step.wait(60), box
    t0 = time.monotonic()
    s.close()
    assert time.monotonic() - t0 < 5, "close waits for the py_func"
    release.set()  # the py_func returns: the step goes on to its update
    th.join(30)
    assert not th.is_alive()
    err = box.get("error")
    assert isinstance(err, tv.errors.CancelledError), repr(box)
    msg = str(err)
    assert "session was closed" in msg, msg
    assert "'upd'" in msg, msg  # the update is the op that did not run
    assert seen == [], seen  # nothing after the update ran either
    with pytest.raises(RuntimeError, match="closed Session"):
        s.run(v)


def test_every_running_step_is_cancelled_by_close_and_a_new_session_starts_afresh():
    """Two steps running when the session closes both end with CancelledError; a new session
    on the same graph starts from scratch (its variables its own)."""
    in_step = threading.Barrier(3)
    release = threading.Event()

    def slow(x):
        in_step.wait(60)
        release.wait(60)
        return x

    g = tv.Graph()
    with g.as_default():
        v = tv.Variable(1.0, name="v")
        gate = tv.py_func(slow, [v.value()], tv.float32, name="slow")
        upd = tv.assign_add(v, gate, name="upd")
    s = tv.Session(graph=g)
    s.run(v.initializer)
    errors = []

    def step():
        try:
            s.run(upd)
        except Exception as e:  # noqa: BLE001 - checked below
            errors.append(e)
    threads = [threading.Thread(target=step) for _ in range(2)]
    for th in threads:
        th.start()
    in_step.wait(60)
    s.close()
    release.set()
    for th in threads:
        th.join(30)
    assert len(errors) == 2 and all(isinstance(e, tv.errors.CancelledError) for e in errors), \
        errors
    with tv.Session(graph=g) as s2:
        s2.run(v.initializer)
        assert s2.run(v) == 1.0
