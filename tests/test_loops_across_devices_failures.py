"""A worker process killed in the middle of a loop across devices (issue 27): the step fails
with UnavailableError naming the lost device, without hanging, and the next step after the
worker is back runs the loop (both data planes; real worker processes)."""
from __future__ import annotations

import threading
import time

import pytest

import tensorvm as tv

PS, WORKER = "/job:ps/task:0", "/job:worker/task:0"
PS_NAME = "/job:ps/replica:0/task:0/device:CPU:0"  # as errors name it
TV_CLUSTER = {"ps": 1, "worker": 1}
DEADLINE_S = 120  # generous: a hang is what this catches, not a slow failure


@pytest.fixture(scope="module", autouse=True)
def _connects_never_give_up():
    """Dask retries a refused connection for its whole connect timeout: set it past the
    test's timeout, so a push that keeps the dead worker's address (instead of asking the
    scheduler where the restarted one is) hangs the next step, and the test fails."""
    import dask
    with dask.config.set({"distributed.comm.timeouts.connect": "1000s"}):
        yield


def _marked(marker: str):
    def tick(k):
        open(marker, "a").close()  # the PS part runs: the loop is under way
        time.sleep(0.01)
        return k
    return tick


def _loop(marker: str, iters):
    def body(k, acc):
        with tv.device(PS):
            k = tv.reshape(tv.py_func(_marked(marker), [k], tv.int32), [])
        with tv.device(WORKER):
            return k + 1, acc * 0.5 + 1.0
    with tv.device(WORKER):
        return tv.while_loop(lambda k, acc: k < iters, body, [0, 1.0])


def _run_in_thread(fn):
    result = {}

    def go():
        try:
            result["value"] = fn()
        except BaseException as e:  # noqa: BLE001 - the test reads it
            result["error"] = e
    th = threading.Thread(target=go, daemon=True)
    th.start()
    return th, result


@pytest.mark.cluster
@pytest.mark.parametrize("plane", ["dask", "direct"])
def test_a_worker_killed_mid_loop_fails_the_step_naming_it_and_the_next_step_runs(
        tv_cluster, g, tmp_path, plane):
    marker = tmp_path / "started"
    iters = tv.placeholder(tv.int32, [])
    k, acc = _loop(str(marker), iters)
    s = tv_cluster.session(config=tv.ConfigProto(data_plane=plane))
    assert s.run([k, acc], {iters: 3}) == [3, 1.875]
    marker.unlink()
    th, result = _run_in_thread(lambda: s.run([k, acc], {iters: 100_000}))
    deadline = time.monotonic() + DEADLINE_S
    while not marker.exists():
        assert time.monotonic() < deadline and th.is_alive(), result
        time.sleep(0.01)
    old = tv_cluster.kill("ps-0")
    th.join(DEADLINE_S)
    assert not th.is_alive(), "the step hung after a worker of its loop died"
    err = result.get("error")
    assert isinstance(err, tv.errors.UnavailableError), repr(result)
    assert PS_NAME in str(err) and old in str(err), str(err)
    tv_cluster.wait_full()
    assert s.run([k, acc], {iters: 4}) == [4, 1.9375]
