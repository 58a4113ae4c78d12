"""The key distributed tests against an external cluster started with the real CLI:
``dask scheduler`` and ``dask worker --name ps-0 …`` subprocesses on 127.0.0.1, joined with
``tv.Session("tcp://…", cluster=spec)``. Workers named after tasks are mapped by name."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import tensorvm as tv
from test_distributed import PS, W0, W1, _shared_graph, _sleep, _wait_until_processing, build_model

pytestmark = pytest.mark.cluster

DASK = str(Path(sys.executable).with_name("dask"))
# Jobs listed worker-first: round robin over the sorted worker names would give worker-0 the
# worker named ps-0, so a correct mapping shows that names win.
SPEC = {"worker": 2, "ps": 1}
NAMES = ["worker-1", "ps-0", "worker-0"]


def _spawn(args, log: Path) -> subprocess.Popen:
    # Each command leads its own process group, so teardown can stop a worker's Nanny and
    # the worker process it spawned together.
    with open(log, "wb") as out:
        return subprocess.Popen([DASK, *args], stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)


def _read_address(path: Path, proc: subprocess.Popen, timeout=60.0) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"dask scheduler exited with {proc.returncode}")
        try:
            return json.loads(path.read_text())["address"]
        except (FileNotFoundError, json.JSONDecodeError, KeyError):
            time.sleep(0.1)
    raise TimeoutError("dask scheduler wrote no scheduler file")


@pytest.fixture(scope="module")
def external(tmp_path_factory, cluster_handle):
    d = tmp_path_factory.mktemp("dask-cli")
    sched_file = d / "scheduler.json"
    procs = [_spawn(["scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
                     "--scheduler-file", str(sched_file)], d / "scheduler.log")]
    handle = None
    try:
        address = _read_address(sched_file, procs[0])
        for name in NAMES:
            procs.append(_spawn(["worker", "--scheduler-file", str(sched_file), "--name", name,
                                 "--nthreads", "2", "--no-dashboard", "--host", "127.0.0.1",
                                 "--death-timeout", "60"], d / f"{name}.log"))
        from distributed import Client
        with Client(address, set_as_default=False, timeout="30s") as c:
            c.wait_for_workers(len(NAMES), timeout=60)
        handle = cluster_handle(SPEC, address)
        yield handle
    finally:
        if handle is not None:
            handle.close()
        for p in reversed(procs):
            _stop(p)


@pytest.fixture
def cluster(external):
    yield external
    external.close_sessions()


def test_cli_workers_are_mapped_by_name(cluster):
    assert cluster.address.startswith("tcp://127.0.0.1:")
    s = cluster.session(tv.Graph())
    workers = cluster.workers()
    assert s.devices == {n: workers[n] for n in ("ps-0", "worker-0", "worker-1")}


def test_spread_graph_matches_one_device(cluster):
    xs = np.random.default_rng(1).normal(size=(4, 3)).astype(np.float32)
    g1, init1, x1, f1 = build_model(spread=False)
    s1 = cluster.session(g1)
    s1.run(init1)
    want = s1.run(f1, {x1: xs})
    g2, init2, x2, f2 = build_model(spread=True)
    s2 = cluster.session(g2)
    s2.run(init2)
    md = tv.RunMetadata()
    got = s2.run(f2, {x2: xs}, options=tv.RunOptions(trace=True), run_metadata=md)
    for w, v in zip(want, got):
        np.testing.assert_array_equal(w, v)
    workers = cluster.workers()
    worker_of = {PS: workers["ps-0"], W0: workers["worker-0"], W1: workers["worker-1"]}
    assert md.devices() == {PS, W0, W1}
    assert all(r["worker"] == worker_of[r["device"]] for r in md.step_stats)


def test_two_clients_share_a_ps_variable(cluster):
    g1, v1, inc1, up1, _ = _shared_graph("ext_shared")
    g2, _, inc2, up2, d2 = _shared_graph("ext_shared")
    a = cluster.session(g1, own_client=True)
    b = cluster.session(g2, own_client=True)
    a.run(v1.initializer)
    a.run(up1, {inc1: [1, 1]})
    b.run(up2, {inc2: [2, 3]})
    np.testing.assert_array_equal(a.run(v1), [3, 4])
    np.testing.assert_array_equal(b.run(d2), [6, 8])


def test_killed_ps_worker_is_unavailable(cluster):
    g = tv.Graph()
    with g.as_default():
        with tv.device("/job:ps/task:0"):
            v = tv.Variable(1.0, name="ext_doomed")
            blocked = tv.py_func(_sleep(60.0), [v.value()], tv.float32)
        with tv.device("/job:worker/task:1"):
            out = blocked + 1.0
    s = cluster.session(g)
    s.run(v.initializer)
    old = cluster.worker("ps-0")
    fut = _run_in_thread(lambda: s.run(out))
    _wait_until_processing(cluster, "ps-0")
    t0 = time.monotonic()
    cluster.kill("ps-0")
    err = fut.exception(timeout=30)
    assert time.monotonic() - t0 < 30
    assert isinstance(err, tv.errors.UnavailableError), err
    assert PS in str(err) and "ps-0" in str(err) and old in str(err)
    cluster.wait_full()  # the CLI worker's Nanny restarts it at a new address
    assert cluster.worker("ps-0") != old
    s2 = cluster.session(g)
    assert s2.devices["ps-0"] == cluster.worker("ps-0")
    with pytest.raises(tv.errors.FailedPreconditionError):
        s2.run(v)


def _run_in_thread(fn):
    import concurrent.futures as cf
    ex = cf.ThreadPoolExecutor(1)
    fut = ex.submit(fn)
    ex.shutdown(wait=False)
    return fut
