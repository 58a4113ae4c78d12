"""GPUs on a Dask cluster (issue 15), on a CPU-only machine.

* the local cluster's layout (one worker per GPU, Dask resource ``GPU=1``,
  ``CUDA_VISIBLE_DEVICES`` rotated as dask-cuda does) as a pure decision, and on a real
  LocalCluster of worker processes started with a GPU count (``ConfigProto.device_count``):
  each worker's environment and resources;
* placement by the per-task GPU inventory of a distributed session (the GPU resource of the
  worker each task is mapped to), on a cluster started elsewhere with ``resources={"GPU": 1}``
  on one worker and none on the other;
* steps whose GPU programs run in the worker processes on ``tests/fake_device`` (a CuPy-like
  namespace that keeps data on the host): device arrays cross workers, results equal NumPy.

The same tests run unchanged on a GPU machine (the fake is installed explicitly where used).
"""
from __future__ import annotations

import importlib.util
import os

import fake_device
import numpy as np
import pytest
import tensorvm as tv
from tensorvm.vm.kernels import array_api as kernels_gpu
from tensorvm.runtime.cluster.spec import ClusterSpec
from tensorvm.runtime.cluster.local import cuda_visible_devices, visible_gpus, worker_layout

GPU1 = {"resources": {"GPU": 1}}


# ---- the layout, as a pure decision -----------------------------------------------------------
def test_cuda_visible_devices_rotates_so_the_workers_gpu_is_device_0():
    assert [cuda_visible_devices(i, range(3)) for i in range(3)] == ["0,1,2", "1,2,0", "2,0,1"]
    assert cuda_visible_devices(1, ["GPU-a", "MIG-b"]) == "MIG-b,GPU-a"


def test_layout_without_a_spec_is_one_worker_per_gpu():
    assert worker_layout(None, visible=["4", "7"]) == {
        "0": {**GPU1, "env": {"CUDA_VISIBLE_DEVICES": "4,7"}},
        "1": {**GPU1, "env": {"CUDA_VISIBLE_DEVICES": "7,4"}}}
    assert worker_layout(None, visible=[]) == {"0": {}, "1": {}}  # CPU: two workers as before


def test_layout_with_a_spec_deals_gpus_in_task_order_ps_last():
    spec = ClusterSpec({"ps": 2, "worker": 2, "chief": 1})
    out = worker_layout(spec, visible=["0", "1", "2", "3"])
    env = {n: o.get("env", {}).get("CUDA_VISIBLE_DEVICES") for n, o in out.items()}
    order = [f"{j}-{t}" for j, t in spec.tasks() if j != "ps"]
    assert [env[n] for n in order] == ["0,1,2,3", "1,2,3,0", "2,3,0,1"]
    ps = [f"ps-{t}" for t in range(2)]
    assert [env[n] for n in ps] == ["3,0,1,2", None]  # a fourth GPU reaches ps-0 only
    assert out["ps-1"] == {} and all(out[n]["resources"] == {"GPU": 1} for n in order)
    assert all(o == {} for o in worker_layout(spec, gpus=0).values())


def test_visible_gpus_from_the_count_the_environment_and_cupy(monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert visible_gpus(3) == ["0", "1", "2"] and visible_gpus(0) == []
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "5, 2,GPU-x")
    assert visible_gpus(2) == ["5", "2"]
    with pytest.raises(ValueError, match=r"asked for 4 GPUs but CUDA_VISIBLE_DEVICES='5, "
                                         r"2,GPU-x' lists 3"):
        visible_gpus(4)
    with pytest.raises(ValueError, match="gpus must be >= 0"):
        visible_gpus(-1)
    # None: as many as the device backend (CuPy) sees, within CUDA_VISIBLE_DEVICES
    monkeypatch.setattr(kernels_gpu, "gpu_count", lambda: 2)
    assert visible_gpus(None) == ["5", "2"]
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert visible_gpus(None) == ["0", "1"]
    monkeypatch.setattr(kernels_gpu, "gpu_count", lambda: 0)  # no CuPy: CPU workers
    assert worker_layout(None) == {"0": {}, "1": {}}


# ---- placement by the GPU resource of each task's worker -------------------------------------
@pytest.fixture(scope="module")
def gpu_and_cpu_workers():
    """A cluster started outside tensorvm (in-process workers, as ``dask worker``): worker-0
    declares ``resources={"GPU": 1}``, worker-1 none. In-process workers share this process's
    device backend, so the fake GPU installed here is theirs too."""
    cluster = _gpu_and_cpu_cluster()
    yield cluster.scheduler_address
    cluster.close()


def _gpu_and_cpu_cluster():
    """In-process workers, as ``dask worker`` would start them: worker-0 with
    ``resources={"GPU": 1}``, worker-1 with none."""
    from distributed import Scheduler, SpecCluster, Worker
    workers = {n: {"cls": Worker, "options": {"name": n, "nthreads": 1, **extra}}
               for n, extra in (("worker-0", GPU1), ("worker-1", {}))}
    return SpecCluster(workers=workers, scheduler={"cls": Scheduler, "options": {
        "host": "127.0.0.1", "dashboard_address": ":0"}}, silence_logs=40)


def _gpus(sess) -> dict:
    """``{task: GPUs of its worker}`` of the tasks the session has mapped so far."""
    found = {}
    for d in sess.list_devices():
        task = d.name.rsplit("/device:", 1)[0]
        found[task] = found.get(task, 0) + (d.device_type == "GPU")
    return found


def _two_task_graph():
    g = tv.Graph()
    with g.as_default():
        x = tv.placeholder(tv.float32, [2], name="x")
        with tv.device("/job:worker/task:0/device:GPU:0"):
            on_gpu = tv.square(x, name="on_gpu")
        with tv.device("/job:worker/task:1/device:GPU:0"):
            no_gpu = tv.negative(x, name="no_gpu")
    return g, x, on_gpu, no_gpu


def test_placement_reads_each_tasks_worker(gpu_and_cpu_workers):
    g, x, on_gpu, no_gpu = _two_task_graph()
    feed = {x: [1.0, 2.0]}
    with tv.Session(gpu_and_cpu_workers, graph=g, cluster={"worker": 2}, verbose=False,
                    allow_soft_placement=False) as s:
        assert _gpus(s) == {"/job:worker/replica:0/task:0": 1, "/job:worker/replica:0/task:1": 0}
        plan = s.plan(on_gpu, feed)
        assert plan.devices == ("/job:worker/replica:0/task:0/device:GPU:0",)
        assert not plan.fallbacks
        # "a worker has a GPU" is not enough: task 1's worker has none
        with pytest.raises(tv.errors.InvalidArgumentError,
                           match=r"operation 'no_gpu' \(Neg\): no GPU device: /job:worker/"
                                 r"replica:0/task:1 has none; .*allow_soft_placement=True"):
            s.plan(no_gpu, feed)
    with tv.Session(gpu_and_cpu_workers, graph=g, cluster={"worker": 2}, verbose=False) as s:
        plan = s.plan([on_gpu, no_gpu], feed)
        assert set(plan.devices) == {"/job:worker/replica:0/task:0/device:GPU:0",
                                     "/job:worker/replica:0/task:1/device:CPU:0"}
        assert [(f.ops, f.reason) for f in plan.fallbacks] == [
            (("no_gpu",), "no GPU device: /job:worker/replica:0/task:1 has none")]
        assert ("soft placement: 'no_gpu' asked for /job:worker/replica:0/task:1/device:GPU:0,"
                " runs on /job:worker/replica:0/task:1/device:CPU:0") in str(plan)


def test_a_session_without_a_spec_maps_the_task_placement_asks_about(gpu_and_cpu_workers):
    g, x, on_gpu, _ = _two_task_graph()
    with tv.Session(gpu_and_cpu_workers, graph=g, verbose=False) as s:
        assert _gpus(s) == {}  # nothing mapped yet
        devs = s.plan(on_gpu, {x: [1.0, 2.0]}).devices
        # worker:0 went to the worker named after it, which has the GPU
        assert devs == ("/job:worker/replica:0/task:0/device:GPU:0",)
        assert list(s.devices) == ["worker-0"]
        assert _gpus(s) == {"/job:worker/replica:0/task:0": 1}


def test_steps_on_the_gpu_worker_with_the_fake_device(gpu_and_cpu_workers):
    g, x, on_gpu, no_gpu = _two_task_graph()
    prev = fake_device.install()
    try:
        with tv.Session(gpu_and_cpu_workers, graph=g, cluster={"worker": 2},
                        verbose=False) as s:
            outs = [s.run([on_gpu, no_gpu], {x: [1.0, 3.0]}) for _ in range(3)]
        assert fake_device.xp.cuda.entered == [0, 0, 0]  # worker-0's GPU:0, every step
    finally:
        fake_device.restore(prev)
    for sq, neg in outs:
        assert type(sq) is np.ndarray and type(neg) is np.ndarray
        np.testing.assert_array_equal(sq, [1.0, 9.0])
        np.testing.assert_array_equal(neg, [-1.0, -3.0])


def test_a_task_remapped_to_a_worker_without_its_gpu_is_placed_anew():
    """worker-0 (GPU=1) leaves; its replacement, named alike, has no GPU. The step that meets
    the loss fails (UnavailableError, as any lost device); the next one must not reuse the
    plan placed on GPU:0 of task 0: it is placed again, on the CPU, with the reason."""
    from distributed import Worker
    cluster = _gpu_and_cpu_cluster()
    g, x, on_gpu, _ = _two_task_graph()
    prev = fake_device.install()
    try:
        with tv.Session(cluster.scheduler_address, graph=g, cluster={"worker": 2},
                        verbose=False) as s:
            np.testing.assert_array_equal(s.run(on_gpu, {x: [1.0, 3.0]}), [1.0, 9.0])
            assert s.plan(on_gpu, {x: [1.0, 3.0]}).devices == (
                "/job:worker/replica:0/task:0/device:GPU:0",)
            del cluster.worker_spec["worker-0"]
            cluster.sync(cluster._correct_state)
            cluster.worker_spec["worker-0-again"] = {
                "cls": Worker, "options": {"name": "worker-0", "nthreads": 1}}
            cluster.sync(cluster._correct_state)
            got = None
            for _ in range(3):  # the step that meets the loss fails; a later one runs
                try:
                    got = s.run(on_gpu, {x: [1.0, 3.0]})
                    break
                except tv.errors.UnavailableError:
                    continue
            np.testing.assert_array_equal(got, [1.0, 9.0])
            plan = s.plan(on_gpu, {x: [1.0, 3.0]})
            assert plan.devices == ("/job:worker/replica:0/task:0/device:CPU:0",)
            assert [f.reason for f in plan.fallbacks] == [
                "no GPU device: /job:worker/replica:0/task:0 has none"]
            assert _gpus(s)["/job:worker/replica:0/task:0"] == 0
    finally:
        fake_device.restore(prev)
        cluster.close()


# ---- the session's own LocalCluster, with a GPU count ----------------------------------------
def _worker_env(dask_worker):
    return (dask_worker.name, os.environ.get("CUDA_VISIBLE_DEVICES"),
            dask_worker.state.total_resources.get("GPU", 0))


def _install_fake(dask_worker):
    fake_device.install()
    return kernels_gpu.gpu_count()


def _fake_entered(dask_worker):
    return list(fake_device.xp.cuda.entered)


def _restore(dask_worker):
    fake_device.restore(None)


@pytest.fixture(scope="module")
def gpu_cluster():
    """``tv.Session(cluster=..., config=ConfigProto(device_count={"GPU": 2}))``: the session's
    LocalCluster of worker processes, told there are two GPUs (there are none here)."""
    old = os.environ.pop("CUDA_VISIBLE_DEVICES", None)
    try:
        s = tv.Session(cluster={"ps": 1, "worker": 2}, graph=tv.Graph(), verbose=False,
                       config=tv.ConfigProto(device_count={"GPU": 2}))
    finally:
        if old is not None:
            os.environ["CUDA_VISIBLE_DEVICES"] = old
    yield s
    s.close()


def test_local_cluster_gives_one_gpu_per_worker_process(gpu_cluster):
    got = sorted(gpu_cluster.client.run(_worker_env).values())
    assert got == [("ps-0", None, 0), ("worker-0", "0,1", 1), ("worker-1", "1,0", 1)]
    assert _gpus(gpu_cluster) == {"/job:ps/replica:0/task:0": 0, "/job:worker/replica:0/task:0": 1,
                                  "/job:worker/replica:0/task:1": 1}


def test_gpu_programs_in_worker_processes(gpu_cluster):
    """Without CuPy a GPU program fails with the install hint; with the fake device in each
    worker process a step runs GPU programs on two workers (a device array moves between
    them), a soft-placed op on the ps's CPU, and equals NumPy on both data planes."""
    g = tv.Graph()
    with g.as_default():
        x = tv.placeholder(tv.float32, [3], name="x")
        with tv.device("/job:worker/task:0/gpu:0"):
            a = tv.square(x, name="a")
        with tv.device("/job:worker/task:1/gpu:0"):
            b = tv.exp(-a, name="b")  # reads worker-0's device array
        with tv.device("/job:ps/task:0/gpu:0"):
            c = tv.reduce_sum(b, name="c")  # ps-0 has no GPU: its CPU
    X = np.array([0.0, 1.0, 2.0], np.float32)
    s = tv.Session(graph=g, client=gpu_cluster.client, cluster={"ps": 1, "worker": 2},
                   verbose=False)
    plan = s.plan([b, c], {x: X})
    assert "/job:ps/replica:0/task:0/device:CPU:0" in plan.devices
    assert {d for d in plan.devices if "GPU" in d} == {
        "/job:worker/replica:0/task:0/device:GPU:0", "/job:worker/replica:0/task:1/device:GPU:0"}
    if importlib.util.find_spec("cupy") is None:  # (where CuPy is there, it runs or fails
        with pytest.raises(tv.errors.UnavailableError,  # by CUDA: two GPUs are made up)
                           match=r"GPU kernels need CuPy"):
            s.run([b, c], {x: X})
    assert set(s.client.run(_install_fake).values()) == {1}
    try:
        for _ in range(3):  # the first on the Dask plane, then direct
            got_b, got_c = s.run([b, c], {x: X})
            np.testing.assert_allclose(got_b, np.exp(-X * X), rtol=1e-6)
            np.testing.assert_allclose(got_c, np.exp(-X * X).sum(), rtol=1e-6)
            assert type(got_b) is np.ndarray
        by_worker = s.client.run(_fake_entered)
        names = {a: n for n, a in s.devices.items()}
        entered = {names[a]: e for a, e in by_worker.items()}
        assert entered == {"ps-0": [], "worker-0": [0, 0, 0], "worker-1": [0, 0, 0]}
    finally:
        s.client.run(_restore)
        s.close()
