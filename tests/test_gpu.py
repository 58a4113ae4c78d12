"""GPU devices (issue 15): kernels from one source, placement on GPU devices, host<->device
copies.

Split by the hardware they need (tinygrad's test/null vs test/backend): the CPU tests check the
op table, the namespace path (with NumPy, and with ``tests/fake_device``, a CuPy-like backend
that keeps data on the host but refuses implicit conversion as CuPy does), the pure placement
and partition decisions and the plan's soft-placement reasons; the GPU tests run the same
graphs on CuPy when it finds a device, and skip with the reason otherwise.
``tests/test_gpu_cluster.py`` covers GPUs on a Dask cluster (worker layout, per-task inventory).

On a machine with CuPy and a GPU, run::

    .venv/bin/python -m pytest -q -p no:cacheprovider tests/test_gpu.py tests/test_gpu_cluster.py
    TENSORVM_GPU_SWEEP=cupy .venv/bin/python -m pytest -q -p no:cacheprovider \
        -p tests.fakegpu_plugin tests/test_ops_*.py   # every op test with ops on GPU:0
    .venv/bin/python -m bench.bench_gpu                 # MLP step: GPU vs CPU vs hand CuPy

The op sweep (``tests/fakegpu_plugin.py``, opt-in) runs on CPU-only machines too, on the fake
device (leave out ``TENSORVM_GPU_SWEEP``); its summary counts the failing op types.
"""
from __future__ import annotations

import fake_device
import numpy as np
import pytest
import tensorvm as tv
from tensorvm.vm.kernels import array_api as kernels_gpu
from tensorvm.framework.graph_def import Node
from tensorvm.passes.partition import insert_copies, partition
from tensorvm.passes.place import place, place_explained
from tensorvm.runtime.session import local_resources
from tensorvm.framework.op_registry import get_op_def, registry

W0 = "/job:worker/replica:0/task:0/device:CPU:0"
G0 = "/job:worker/replica:0/task:0/device:GPU:0"


def _cupy_reason():
    try:
        import cupy
    except Exception as e:  # noqa: BLE001 - ImportError or a CUDA library error
        return f"CuPy is not installed ({type(e).__name__}: {e})"
    try:
        n = cupy.cuda.runtime.getDeviceCount()
    except Exception as e:  # noqa: BLE001
        return f"CuPy finds no GPU ({type(e).__name__}: {e})"
    return None if n > 0 else "CuPy finds no GPU (0 devices)"


_NO_GPU = _cupy_reason()
needs_gpu = pytest.mark.skipif(_NO_GPU is not None, reason=_NO_GPU or "")


@pytest.fixture
def fake_gpu():
    prev = fake_device.install()
    yield fake_device.xp
    fake_device.restore(prev)


# ---- the op table ----------------------------------------------------------------------------
def test_every_op_has_a_gpu_kernel_or_a_cpu_only_mark():
    # (ops other tests register, e.g. test_core_correctness's, are users' ops: left out)
    import tensorvm.jobs
    import tensorvm.mapreduce  # noqa: F401
    kernels_gpu.install()
    assert kernels_gpu.undecided() == []
    for t, d in registry.items():
        if (getattr(d.kernels.get("CPU"), "__module__", None) or "").startswith("tensorvm."):
            assert ("GPU" in d.kernels) != bool(d.cpu_only), t
    # one source: the GPU kernel of an array op is its CPU kernel
    for t in ("MatMul", "Add", "Sum", "Relu", "ConcatV2", "GatherV2", "AssignSub"):
        assert get_op_def(t).kernels["GPU"] is get_op_def(t).kernels["CPU"], t
    # the exceptions say why
    assert "string" in get_op_def("StringJoin").cpu_only
    assert "py_func" in get_op_def("PyFunc").cpu_only
    assert "queue" in get_op_def("QueueEnqueueV2").cpu_only
    assert "I/O" in get_op_def("SaveShard").cpu_only
    assert "I/O" in get_op_def("ReaderReadV2").cpu_only
    # random ops draw on the host (same numbers on both device types), then upload
    assert getattr(get_op_def("RandomUniform").kernels["GPU"], "on_host", False)


def test_set_cpu_only_needs_a_reason_and_no_gpu_kernel():
    with pytest.raises(ValueError, match="needs a reason"):
        tv.registry.set_cpu_only("StringJoin", "")
    with pytest.raises(ValueError, match="MatMul has a GPU kernel"):
        tv.registry.set_cpu_only("MatMul", "because")


# ---- the namespace path ----------------------------------------------------------------------
def test_namespace_of_host_values_is_numpy():
    assert kernels_gpu.array_namespace(np.ones(2), 1.0, None) is np
    x = np.arange(6.0).reshape(2, 3)
    # the GPU kernel table runs on NumPy values too (one source): same results as CPU
    for t, args in [("MatMul", (x, x.T)), ("Sum", (x,)), ("ConcatV2", (x, x))]:
        attrs = {"Sum": {"axis": (1,), "keepdims": False}, "ConcatV2": {"axis": 0},
                 "MatMul": {}}[t]
        gpu, cpu = get_op_def(t).kernels["GPU"], get_op_def(t).kernels["CPU"]
        np.testing.assert_array_equal(gpu(*args, **attrs), cpu(*args, **attrs))


def test_fake_device_refuses_implicit_host_conversion(fake_gpu):
    d = kernels_gpu.to_device(np.ones((2, 2), np.float32))
    assert kernels_gpu.array_namespace(d, np.ones(1)) is fake_gpu
    with pytest.raises(TypeError, match="Implicit conversion"):
        np.asarray(d)
    with pytest.raises(TypeError, match="host NumPy array"):
        np.add(d, np.ones((2, 2), np.float32))  # a kernel that created with np.* fails
    assert type(np.matmul(d, d)) is fake_device.FakeDeviceArray  # dispatch keeps it there
    back = kernels_gpu.to_host(d)
    assert type(back) is np.ndarray and back.dtype == np.float32
    s = np.array(["a"], object)  # strings stay on the host
    assert kernels_gpu.to_device(s) is s


def test_fake_device_refuses_what_cupy_lacks(fake_gpu):
    """The fake keeps to CuPy's recorded API (tests/cupy_api.py): a kernel that calls what
    CuPy does not have fails in the fake sweep, not first on a GPU."""
    d = kernels_gpu.to_device(np.arange(6.0).reshape(2, 3))
    np.testing.assert_array_equal(np.add.reduce(d, axis=0).get(), [3.0, 5.0, 7.0])
    np.testing.assert_array_equal(np.max(d, axis=1).get(), [2.0, 5.0])
    for call, match in [
        (lambda: np.maximum.reduce(d, axis=0), r"`cupy.maximum.reduce` is not supported"),
        (lambda: np.max(d, axis=1, initial=0.0), r"max\(\) got an unexpected keyword "
                                                 r"argument 'initial'"),
        (lambda: np.add(d, d, where=d > 1), r"cupy.add.__call__: wrong argument 'where'"),
        (lambda: np.add.reduce(d, initial=1.0), r"wrong argument 'initial'"),
        (lambda: np.strings.upper(d), r"no implementation found for 'numpy.strings.upper'"),
        (lambda: fake_gpu.char, r"module 'cupy' has no attribute 'char'"),
        (lambda: d.tostring, r"'cupy.ndarray' object has no attribute 'tostring'"),
    ]:
        with pytest.raises((TypeError, AttributeError), match=match):
            call()


def test_kernels_create_in_the_namespace_of_their_inputs(fake_gpu):
    """Kernels with creation calls (fixed for issue 15) keep device values on the device."""
    dev = kernels_gpu.to_device
    x = dev(np.arange(12.0).reshape(3, 4))
    idx = dev(np.array([2, 0, 2]))
    for t, attrs, want in [("Shape", {"out_type": tv.int32}, [3, 4]), ("Rank", {}, 2),
                           ("Size", {"out_type": tv.int64}, 12)]:
        got = get_op_def(t).kernels["GPU"](x, **attrs)  # host memory (TF's HostMemory)
        assert type(got) is np.ndarray and got.tolist() == want, t
    cases = [
        ("UnsortedSegmentSum", (dev(np.ones((3, 2))), idx, dev(np.array(3))), {},
         np.array([[1, 1], [0, 0], [2, 2]], float)),
        ("SliceGrad", (dev(np.ones((1, 2))), x, dev(np.array([1, 1]))), {},
         np.pad(np.ones((1, 2)), ((1, 1), (1, 1)))),
        ("MatrixBandPart", (x[:, :3], dev(np.array(0)), dev(np.array(0))), {},
         np.diag(np.diag(np.arange(12.0).reshape(3, 4)[:, :3]))),
        ("Fill", (dev(np.array([2, 2])), dev(np.array(7.0))), {}, np.full((2, 2), 7.0)),
    ]
    for t, args, attrs, want in cases:
        got = get_op_def(t).kernels["GPU"](*args, **attrs)
        assert type(got) is fake_device.FakeDeviceArray, t
        np.testing.assert_array_equal(got.get(), want, err_msg=t)


def _chain_model(seed=0):
    """A chain (no tensor read twice, so no AddN), ops of the fixed families only."""
    rng = np.random.default_rng(seed)
    g = tv.Graph()
    with g.as_default():
        x = tv.placeholder(tv.float32, [4, 3], name="x")
        with tv.device("/gpu:0"):
            w = tv.Variable(rng.standard_normal((3, 5)).astype(np.float32), name="w")
            h = tv.tanh(tv.matmul(x, w))
            y = tv.reduce_sum(tv.concat([tv.square(h), x[:, 1:]], 1), name="y")
            train = tv.train.GradientDescentOptimizer(0.1).minimize(y)
        init = tv.global_variables_initializer()
    return g, x, y, train, init, rng.standard_normal((4, 3)).astype(np.float32)


def _run_chain(g, x, y, train, init, X):
    with tv.Session(graph=g) as s:
        s.run(init)
        out = [s.run([y, train], {x: X})[0] for _ in range(3)]
        plan = s.plan([y, train], {x: X})
    return out, plan


def test_training_step_on_a_fake_gpu_matches_cpu(fake_gpu):
    g, x, y, train, init, X = _chain_model()
    gpu_vals, plan = _run_chain(g, x, y, train, init, X)
    assert plan.devices == ("/job:localhost/replica:0/task:0/device:GPU:0",)
    ops = plan.tasks[0].ops
    assert "x/_to_device/localhost/0/GPU:0" in ops and "y/_to_host" in ops
    assert all(type(v) is np.float32 or type(v) is np.ndarray for v in gpu_vals)
    fake_device.restore(None)  # no GPU now: the same graph falls back to the CPU
    cpu_vals, cpu_plan = _run_chain(g, x, y, train, init, X)
    assert "GPU" not in cpu_plan.devices[0]
    np.testing.assert_allclose(gpu_vals, cpu_vals, rtol=1e-6)
    assert cpu_vals[2] < cpu_vals[0]  # it trains


def _variable_on_gpu_1():
    """A variable on /gpu:1 of an in-process session, initialised and read: (its stored value,
    the fetched value)."""
    g = tv.Graph()
    with g.as_default():
        with tv.device("/gpu:1"):
            v = tv.Variable(np.arange(4, dtype=np.float32), name="v1")
            y = v * 2.0
        with tv.Session() as s:
            s.run(v.initializer)
            got = s.run(y)
            mgr = local_resources(s).for_device("/job:localhost/replica:0/task:0/device:GPU:1")
            (key,) = [k for k in mgr.names() if k[1] == "v1"]
            return mgr.lookup(*key).value, got


def test_a_variable_on_fake_gpu_1_is_a_device_array(fake_gpu):
    fake_device.install(count=2)
    stored, got = _variable_on_gpu_1()
    assert type(stored) is fake_device.FakeDeviceArray and fake_gpu.cuda.entered == [1, 1]
    np.testing.assert_array_equal(got, [0.0, 2.0, 4.0, 6.0])


def test_a_gpu_n_program_runs_inside_cuda_device_n():
    """runtime.run_stage enters the backend's ``cuda.Device(N)`` for a GPU:N program (CuPy's
    current device), and no device for a CPU program."""
    prev = fake_device.install(count=2)
    try:
        g = tv.Graph()
        with g.as_default():
            x = tv.placeholder(tv.float32, [2], name="x")
            with tv.device("/gpu:1"):
                y = tv.negative(x, name="y")
            z = tv.square(y, name="z")  # CPU: downloads y
            with tv.Session() as s:
                assert [d.device_type for d in s.list_devices()] == ["CPU", "GPU", "GPU"]
                plan = s.plan(z, {x: [1.0, 2.0]})
                fake_device.xp.cuda.entered.clear()
                got = s.run(z, {x: [1.0, 2.0]})
        assert "/job:localhost/replica:0/task:0/device:GPU:1" in plan.devices
        assert fake_device.xp.cuda.entered == [1]
        np.testing.assert_array_equal(got, [1.0, 4.0])
    finally:
        fake_device.restore(prev)


def _mlp_model(d=16, b=8, c=4, seed=0):
    """bench/bench_gpu.py's training step (matmul, ReLU, matmul, sparse softmax cross-entropy,
    mean, SGD) at a small size."""
    rng = np.random.default_rng(seed)
    g = tv.Graph()
    with g.as_default():
        x = tv.placeholder(tv.float32, [b, d], name="x")
        y = tv.placeholder(tv.int64, [b], name="y")
        with tv.device("/gpu:0"):
            w1 = tv.Variable((rng.standard_normal((d, d)) * 0.3).astype(np.float32))
            w2 = tv.Variable((rng.standard_normal((d, c)) * 0.3).astype(np.float32))
            logits = tv.matmul(tv.nn.relu(tv.matmul(x, w1)), w2)
            loss = tv.reduce_mean(
                tv.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))
            train = tv.train.GradientDescentOptimizer(0.1).minimize(loss)
        init = tv.global_variables_initializer()
    feed = {x: rng.standard_normal((b, d)).astype(np.float32), y: rng.integers(0, c, b)}
    return g, loss, train, init, feed


def _run_mlp(g, loss, train, init, feed, steps=3):
    with tv.Session(graph=g) as s:
        s.run(init)
        return [float(s.run([loss, train], feed)[0]) for _ in range(steps)]


def test_the_bench_mlp_step_on_a_fake_gpu_matches_cpu(fake_gpu):
    """bench_gpu's training step with every value a device array (no kernel creates or
    converts on the host) equals the same step on the CPU."""
    gpu = _run_mlp(*_mlp_model())
    fake_device.restore(None)
    cpu = _run_mlp(*_mlp_model())
    np.testing.assert_allclose(gpu, cpu, rtol=1e-5)
    assert cpu[2] < cpu[0]


def test_a_gpu_training_step_never_waits_for_the_device(fake_gpu):
    """A step's kernels queue on the GPU without waiting: the sparse cross-entropy's labels,
    a feed, are range-checked in host memory (it took two copies of device flags per step,
    the labels' min and max, then one). The train op's step fetches nothing."""
    g, loss, train, init, feed = _mlp_model()
    with tv.Session(graph=g) as s:
        s.run(init)
        s.run(train, feed)
        fake_gpu.cuda.syncs = 0
        for _ in range(4):
            s.run(train, feed)
        assert fake_gpu.cuda.syncs == 0
        bad = dict(feed)
        bad[[t for t in feed if t.dtype == tv.int64][0]] = np.full(8, 9)
        with pytest.raises(tv.errors.InvalidArgumentError,
                           match=r"label value of 9 which is outside the valid range of \[0, 4\)"):
            s.run(train, bad)


def _embedding_step(steps=3):
    g = tv.Graph()
    with g.as_default():
        ids = tv.placeholder(tv.int32, [None])
        y = tv.placeholder(tv.float32, [None])
        with tv.device("/gpu:0"):
            emb = tv.Variable(np.arange(20, dtype=np.float32).reshape(10, 2))
            v = tv.reduce_sum(tv.gather(emb, ids), axis=1)
            loss = tv.reduce_mean(tv.square(v - y))
            train = tv.train.GradientDescentOptimizer(0.01).minimize(loss)
        feed = {ids: [1, 2, 3, 2], y: [0.0, 1.0, 2.0, 3.0]}
        with tv.Session() as s:
            s.run(tv.global_variables_initializer())
            s.run(train, feed)
            syncs = getattr(kernels_gpu.device_backend(), "cuda", None)
            if syncs is not None:
                syncs.syncs = 0
            for _ in range(steps):
                s.run(train, feed)
            waits = None if syncs is None else syncs.syncs
            with pytest.raises(tv.errors.InvalidArgumentError, match=r"indices\[1\] = 10 is "
                                                                     r"not in \[0, 10\)"):
                s.run(train, {**feed, ids: [1, 10]})
            return s.run(emb), waits


def test_a_gpu_embedding_step_never_waits_for_the_device(fake_gpu):
    """An embedding lookup's ids (a feed) are range-checked in host memory, by the gather,
    its sparse gradient and the update: the step queues without waiting (it waited 4 times:
    the gather's check, the scatter's min and max, the segment sum's check)."""
    gpu, waits = _embedding_step()
    assert waits == 0
    fake_device.restore(None)
    cpu, _ = _embedding_step()
    np.testing.assert_allclose(gpu.get() if hasattr(gpu, "get") else gpu, cpu, rtol=1e-6)


def _dropout_step(seed=3):
    g = tv.Graph()
    with g.as_default():
        x = tv.placeholder(tv.float32, [8, 16])
        keep = tv.placeholder(tv.float32, [])  # fed, as TF 1.x programs feed keep_prob
        with tv.device("/gpu:0"):
            w = tv.Variable(np.linspace(-1, 1, 16 * 4, dtype=np.float32).reshape(16, 4))
            h = tv.nn.dropout(tv.nn.relu(x), keep_prob=keep, seed=seed)
            loss = tv.reduce_sum(tv.matmul(h, w) ** 2)
            train = tv.train.GradientDescentOptimizer(0.01).minimize(loss)
        feed = {x: np.arange(128, dtype=np.float32).reshape(8, 16) / 64 - 1, keep: 0.5}
        with tv.Session() as s:
            s.run(w.initializer)
            s.run(train, feed)
            b = kernels_gpu.device_backend()
            if b is not None:
                b.cuda.syncs = 0
            for _ in range(3):
                s.run(train, feed)
            waits = None if b is None else b.cuda.syncs
            return s.run(w), waits


def test_a_gpu_dropout_step_never_waits_for_the_device(fake_gpu):
    """Dropout's mask comes from the host's generator (a seed draws the same mask on both
    device types), and only the mask is uploaded: it downloaded the activations, applied the
    mask on the host and uploaded the result, waiting twice per step."""
    gpu, waits = _dropout_step()
    assert waits == 0
    fake_device.restore(None)
    cpu, _ = _dropout_step()
    np.testing.assert_array_equal(gpu, cpu)


def _random_step():
    g = tv.Graph()
    with g.as_default():
        x = tv.placeholder(tv.float32, [None, 4])
        with tv.device("/gpu:0"):
            n = tv.random_normal(tv.shape(x), seed=1)
            u = tv.random_uniform([3], 0, 10, dtype=tv.int32, seed=2)
            t = tv.truncated_normal([2, 2], seed=3)
            y = tv.reduce_sum(x * n) + tv.cast(tv.reduce_sum(u), tv.float32) + \
                tv.reduce_sum(t)
        with tv.Session() as s:
            first = s.run(y, {x: np.ones((2, 4), np.float32)})
            b = kernels_gpu.device_backend()
            if b is not None:
                b.cuda.syncs = 0
            second = s.run(y, {x: np.ones((2, 4), np.float32)})
            return [float(first), float(second)], None if b is None else b.cuda.syncs


def test_random_ops_on_a_gpu_read_their_shapes_on_the_host(fake_gpu):
    """The host's generators take their shape and bounds in host memory: a step copies back
    only its fetch (it waited for each random op's shape: 6 copies), and a seed draws the
    same numbers as on the CPU."""
    gpu, waits = _random_step()
    assert waits == 1
    fake_device.restore(None)
    cpu, _ = _random_step()
    assert gpu == cpu and gpu[0] != gpu[1]


def test_nd_gathers_and_scatters_check_their_indices_on_the_host(fake_gpu):
    """GatherNd and ScatterNd read fed indices in host memory (each checked its indices on
    the device: a copy per index column); bad indices still fail by name."""
    g = tv.Graph()
    with g.as_default():
        idx = tv.placeholder(tv.int32, [None, 2])
        with tv.device("/gpu:0"):
            p = tv.constant(np.arange(12.0).reshape(3, 4))
            got = tv.gather_nd(p, idx)
            back = tv.scatter_nd(idx, got, [3, 4])
            total = tv.reduce_sum(got) + tv.reduce_sum(back)
        with tv.Session() as s:
            feed = {idx: [[0, 1], [2, 3], [0, 1]]}
            s.run(total, feed)
            fake_gpu.cuda.syncs = 0
            assert float(s.run(total, feed)) == 2 * (1 + 11 + 1)
            assert fake_gpu.cuda.syncs == 1  # the fetch
            with pytest.raises(tv.errors.InvalidArgumentError, match=r"GatherNd"):
                s.run(total, {idx: [[0, 4]]})


def _counted_loop():
    g = tv.Graph()
    with g.as_default():
        x = tv.placeholder(tv.float32, [4])
        with tv.device("/gpu:0"):
            ta = tv.TensorArray(tv.float32, size=6)

            def body(i, h, ta):
                h = tv.tanh(h) * 2.0 + tv.cast(i, tv.float32)
                return i + 1, h, ta.write(i, h)
            _, h, ta = tv.while_loop(lambda i, h, ta: i < 6, body, [0, x, ta])
            total = tv.reduce_sum(ta.stack()) + tv.reduce_sum(h)
        with tv.Session() as s:
            s.run(total, {x: np.ones(4, np.float32)})
            b = kernels_gpu.device_backend()
            if b is not None:
                b.cuda.syncs = 0
            got = s.run(total, {x: np.linspace(-1, 1, 4, dtype=np.float32)})
            return float(got), None if b is None else b.cuda.syncs


def test_a_gpu_loop_keeps_its_counter_on_the_host(fake_gpu):
    """TF's int32 rule in loops: a loop's int32 values stay on the host, so its counter's
    arithmetic and compare and a TensorArray's index need no copy; the step copies back its
    fetch only (it waited 2 times per iteration: the predicate and the write's index)."""
    gpu, waits = _counted_loop()
    assert waits == 1
    fake_device.restore(None)
    cpu, _ = _counted_loop()
    assert gpu == pytest.approx(cpu, rel=1e-6)


def _loop_training(steps=2):
    g = tv.Graph()
    with g.as_default():
        x = tv.placeholder(tv.float32, [4])
        with tv.device("/gpu:0"):
            w = tv.Variable(np.linspace(0.5, 1.0, 4, dtype=np.float32))
            ta = tv.TensorArray(tv.float32, size=6)

            def body(i, h, ta):
                h = tv.tanh(h * w) * 2.0
                return i + 1, h, ta.write(i, h)
            _, _, ta = tv.while_loop(lambda i, h, ta: i < 6, body, [0, x, ta])
            loss = tv.reduce_sum(ta.stack())
            train = tv.train.GradientDescentOptimizer(0.1).minimize(loss)
        with tv.Session() as s:
            s.run(w.initializer)
            s.run(train, {x: np.ones(4, np.float32)})
            b = kernels_gpu.device_backend()
            if b is not None:
                b.cuda.syncs = 0
            for _ in range(steps):
                s.run(train, {x: np.ones(4, np.float32)})
            waits = None if b is None else b.cuda.syncs
            return s.run(w), waits


def test_a_gpu_loop_training_step_never_waits_for_the_device(fake_gpu):
    """The loop's gradient reads the TensorArray gradients' indices in host memory too (it
    waited once per iteration: 6 per step)."""
    gpu, waits = _loop_training()
    assert waits == 0
    fake_device.restore(None)
    cpu, _ = _loop_training()
    np.testing.assert_allclose(gpu, cpu, rtol=1e-6)


def test_a_gpu_cnn_step_never_waits_for_the_device(fake_gpu):
    """Convolution, pooling and their gradients queue without a copy to the host (MaxPoolGrad
    asked whether its gradient was finite, one wait per step)."""
    rng = np.random.default_rng(0)
    g = tv.Graph()
    with g.as_default():
        x = tv.placeholder(tv.float32, [4, 8, 8, 2])
        y = tv.placeholder(tv.float32, [4, 3])
        with tv.device("/gpu:0"):
            f = tv.Variable((rng.standard_normal((3, 3, 2, 4)) * 0.3).astype(np.float32))
            w = tv.Variable((rng.standard_normal((64, 3)) * 0.3).astype(np.float32))
            h = tv.nn.max_pool(tv.nn.relu(tv.nn.conv2d(x, f, [1, 1, 1, 1], "SAME")),
                               [1, 2, 2, 1], [1, 2, 2, 1], "VALID")
            logits = tv.matmul(tv.reshape(h, [4, 64]), w)
            loss = tv.reduce_mean(tv.nn.softmax_cross_entropy_with_logits(labels=y,
                                                                          logits=logits))
            train = tv.train.GradientDescentOptimizer(0.1).minimize(loss)
        init = tv.global_variables_initializer()
    feed = {x: rng.standard_normal((4, 8, 8, 2)).astype(np.float32),
            y: np.eye(3, dtype=np.float32)[[0, 1, 2, 0]]}
    with tv.Session(graph=g) as s:
        s.run(init)
        first = float(s.run(loss, feed))
        fake_gpu.cuda.syncs = 0
        for _ in range(3):
            s.run(train, feed)
        assert fake_gpu.cuda.syncs == 0
        assert float(s.run(loss, feed)) < first


def test_bench_gpus_hand_cupy_step_is_the_same_step(fake_gpu, monkeypatch):
    """bench_gpu's target compares tensorvm with a hand-written CuPy step: at a small size on
    the fake device both give the same losses (the benchmark times like with like), and
    tensorvm's timed steps copy back only each run's last loss."""
    import importlib.util
    import pathlib
    import sys
    path = pathlib.Path(__file__).parent.parent / "bench" / "bench_gpu.py"
    spec = importlib.util.spec_from_file_location("bench_gpu_under_test", path)
    bg = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bg)
    monkeypatch.setitem(sys.modules, "cupy", fake_gpu)
    monkeypatch.setattr(bg, "D", 32)
    monkeypatch.setattr(bg, "B", 16)
    monkeypatch.setattr(bg, "C", 8)
    _, tv_run = bg.tensorvm_step("/gpu:0")
    hand = bg.cupy_step()
    fake_gpu.cuda.syncs = 0
    ours = [tv_run(3) for _ in range(3)]
    assert fake_gpu.cuda.syncs == 3  # the loss at the end of each run
    np.testing.assert_allclose(ours, [hand(3) for _ in range(3)], rtol=1e-5)
    assert ours[2] < ours[0]


# ---- placement -------------------------------------------------------------------------------
def _nodes(*specs):
    return {n: Node(n, t, tuple((i, 0) for i in ins), device=dev) for n, t, ins, dev in specs}


def test_placement_needs_a_gpu_of_that_index_on_that_task():
    nodes = _nodes(("a", "Neg", (), "/job:worker/task:0/gpu:0"),
                   ("b", "Neg", (), "/job:worker/task:1/gpu:1"),
                   ("c", "Neg", (), "/job:worker/task:2/gpu:0"))
    gpus = {("worker", 0): 1, ("worker", 1): 1}  # task 2 has none
    devs, why = place_explained(nodes, W0, gpus=gpus)
    assert devs["a"] == G0
    assert devs["b"] == "/job:worker/replica:0/task:1/device:CPU:0"
    assert devs["c"] == "/job:worker/replica:0/task:2/device:CPU:0"
    reasons = {f.ops[0]: f.reason for f in why}
    assert reasons == {"b": "no GPU device: /job:worker/replica:0/task:1 has 1 GPU (GPU:0..0)",
                       "c": "no GPU device: /job:worker/replica:0/task:2 has none"}
    assert place(nodes, W0, gpus=2)["b"] == "/job:worker/replica:0/task:1/device:GPU:1"
    with pytest.raises(tv.errors.InvalidArgumentError,
                       match=r"operation 'b' \(Neg\): no GPU device: /job:worker/replica:0/"
                             r"task:1 has 1 GPU \(GPU:0..0\); it asks for .*"
                             r"allow_soft_placement=True"):
        place(nodes, W0, gpus=gpus, allow_soft_placement=False)


def test_a_cpu_only_op_falls_back_with_its_reason():
    nodes = _nodes(("s", "StringUpper", (), "/job:worker/task:0/gpu:0"),
                   ("n", "Neg", (), "/job:worker/task:0/gpu:0"))
    devs, why = place_explained(nodes, W0, gpus=1)
    assert devs == {"s": W0, "n": G0}
    assert len(why) == 1 and why[0].ops == ("s",)
    assert why[0].reason.startswith("no GPU kernel for StringUpper: string tensors")
    assert str(why[0]).startswith(f"soft placement: 's' asked for {G0}, runs on {W0}: ")
    with pytest.raises(tv.errors.InvalidArgumentError,
                       match=r"'s' \(StringUpper\): no GPU kernel for StringUpper"):
        place(nodes, W0, gpus=1, allow_soft_placement=False)


def test_a_colocation_group_with_a_cpu_only_member_falls_back_whole():
    nodes = {"v": Node("v", "VariableV2", device="/job:worker/task:0/gpu:0", colocation="v"),
             "p": Node("p", "PyFunc", (("v", 0),), device="", colocation="v")}
    devs, why = place_explained(nodes, W0, gpus=1)
    assert devs == {"v": W0, "p": W0}
    assert why[0].ops[0] == "p" and "py_func" in why[0].reason


def test_soft_placement_reason_is_in_the_plan():
    g = tv.Graph()
    with g.as_default():
        x = tv.placeholder(tv.float32, [2], name="x")
        with tv.device("/gpu:0"):
            y = tv.negative(x, name="y")
        with tv.Session() as s:  # no CuPy / no GPU in this process
            if any(d.device_type == "GPU" for d in s.list_devices()):  # pragma: no cover
                pytest.skip("this process has a GPU")
            text = str(s.plan(y, {x: [1.0, 2.0]}))
            np.testing.assert_array_equal(s.run(y, {x: [1.0, 2.0]}), [-1.0, -2.0])
    assert ("soft placement: 'y' asked for /job:localhost/replica:0/task:0/device:GPU:0, runs "
            "on /job:localhost/replica:0/task:0/device:CPU:0: no GPU device: "
            "/job:localhost/replica:0/task:0 has none") in text


# ---- host<->device copies --------------------------------------------------------------------
C1 = "/job:worker/replica:0/task:1/device:CPU:0"
G1 = "/job:worker/replica:0/task:1/device:GPU:0"


def _copies(part):
    return sorted((part.nodes[c].type, part.nodes[c].device) for c in part.copies)


def test_copies_one_per_tensor_and_device():
    nodes = _nodes(("a", "Const", (), ""), ("g1", "Neg", ("a",), ""), ("g2", "Exp", ("a",), ""),
                   ("h", "Tanh", ("g1",), ""), ("c1", "Neg", ("g2",), ""),
                   ("c2", "Exp", ("g2",), ""), ("k", "Neg", ("g2",), ""))
    devs = {"a": W0, "g1": G0, "g2": G0, "h": G1, "c1": W0, "c2": C1, "k": G0}
    part = partition(nodes, devs, set(), [("g2", 0), ("a", 0)])
    # a (CPU) read by two GPU ops: one upload; g2 (GPU) read by two CPU devices: one download,
    # which the fetch shares; g1 -> h is GPU to GPU (another worker): the device array moves
    assert _copies(part) == [("_CopyDeviceToHost", G0), ("_CopyHostToDevice", G0)]
    assert part.nodes["g1"].inputs == part.nodes["g2"].inputs == (("a/_to_device" +
                                                                   "/worker/0/GPU:0", 0),)
    assert part.fetches == (("g2/_to_host", 0), ("a", 0))
    assert part.nodes["c1"].inputs == (("g2/_to_host/_recvworker/0/CPU:0", 0),)
    assert part.nodes["c2"].inputs == (("g2/_to_host/_recvworker/1/CPU:0", 0),)
    assert part.nodes["h"].inputs == (("g1/_recvworker/1/GPU:0", 0),)
    assert part.nodes["k"].inputs == (("g2", 0),)
    # a goes from its CPU to the GPU's copy; g2's host copy to each CPU device once
    assert sorted((s.tensor, s.dst) for s in part.sends) == [
        (("a", 0), G0), (("g1", 0), G1), (("g2/_to_host", 0), W0), (("g2/_to_host", 0), C1)]


def test_feeds_are_uploaded_strings_stay_on_the_host_and_cpu_plans_have_no_copies():
    from tensorvm.framework import dtypes
    nodes = {"n": Node("n", "Neg", (("x", 0),)),
             "s": Node("s", "Identity", (("t", 0),), in_dtypes=(dtypes.string,))}
    devs = {"n": G0, "s": G0}
    _, _, _, copies = insert_copies(nodes, devs, {("x", 0), ("t", 0)})
    assert copies == ("x/_to_device/worker/0/GPU:0",)
    out = insert_copies(nodes, {"n": W0, "s": W0}, {("x", 0), ("t", 0)}, [("n", 0)])
    assert out[0] is nodes and out[3] == ()


def test_shapes_offsets_and_counts_stay_in_host_memory():
    """TF's HostMemory: Slice's begin and size are read on the host (a CPU value is not
    uploaded, a GPU value is downloaded); Shape on a GPU makes a host value, read as it is by
    Fill's dims and uploaded for an op that computes with it; small integer Consts too."""
    from tensorvm.framework import dtypes
    i32 = np.array([1], np.int32)
    nodes = {"x": Node("x", "Neg", (("f", 0),)), "b": Node("b", "Const", attrs={"value": i32}),
             "s": Node("s", "Slice", (("x", 0), ("b", 0), ("c", 0))),
             "sh": Node("sh", "Shape", (("x", 0),)),
             "fill": Node("fill", "Fill", (("sh", 0), ("x", 0))),
             "n": Node("n", "Neg", (("sh", 0),)), "g": Node("g", "Neg", (("b", 0),)),
             "s2": Node("s2", "Slice", (("x", 0), ("n", 0), ("c", 0)))}
    devs = {"x": G0, "b": G0, "s": G0, "sh": G0, "fill": G0, "n": G0, "g": G0, "s2": G0,
            "c": W0}
    nodes["c"] = Node("c", "Const", attrs={"value": i32}, out_dtypes=(dtypes.int32,))
    devs = {k: devs[k] for k in ["c", *[n for n in nodes if n != "c"]]}
    nodes = {k: nodes[k] for k in devs}
    out, _, _, copies = insert_copies(nodes, devs, {("f", 0)})
    assert out["s"].inputs == (("x", 0), ("b", 0), ("c", 0))  # host values, read as they are
    assert out["fill"].inputs == (("sh", 0), ("x", 0))
    assert out["n"].inputs == (("sh/_to_device/worker/0/GPU:0", 0),)  # computes: uploaded
    assert out["g"].inputs == (("b/_to_device/worker/0/GPU:0", 0),)
    assert out["s2"].inputs[1] == ("n/_to_host", 0)  # a device value read in host memory
    assert sorted(copies) == ["b/_to_device/worker/0/GPU:0", "f/_to_device/worker/0/GPU:0",
                              "n/_to_host", "sh/_to_device/worker/0/GPU:0"]


def test_a_gpu_step_reads_its_shapes_without_waiting_for_the_device(fake_gpu):
    """Slice offsets fed at run time, Fill of a tensor's shape, a segment sum's count, a
    range to a shape's element (int32 arithmetic on host values runs on the host, TF's int32
    rule), a segment sum's ids: all read on the host. A step copies back only the fetched
    total (two steps waited 8 times)."""
    g = tv.Graph()
    with g.as_default():
        x = tv.placeholder(tv.float32, [None, 4], name="x")
        begin = tv.placeholder(tv.int32, [2], name="begin")
        with tv.device("/gpu:0"):
            y = tv.slice(x * 2.0, begin, [2, 2])
            ones = tv.fill(tv.shape(x), 1.0)
            seg = tv.unsorted_segment_sum(x, tv.constant([0, 2, 0]), 3)
            r = tv.cast(tv.range(0, tv.shape(x)[0]), tv.float32)
            total = tv.reduce_sum(y) + tv.reduce_sum(ones) + tv.reduce_sum(seg) + \
                tv.reduce_sum(r)
        X = np.arange(12, dtype=np.float32).reshape(3, 4)
        with tv.Session() as s:
            s.run(total, {x: X, begin: [1, 1]})
            fake_gpu.cuda.syncs = 0
            got = [s.run(total, {x: X, begin: [b, 1]}) for b in (0, 1)]
            assert fake_gpu.cuda.syncs == 2
    for b, v in zip((0, 1), got):
        want = 2 * X[b:b + 2, 1:3].sum() + 12 + X.sum() + 3
        assert float(v) == want


# ---- on a real GPU ---------------------------------------------------------------------------
@needs_gpu
def test_gpu_training_step_matches_cpu():
    import cupy
    assert kernels_gpu.device_backend() is cupy and kernels_gpu.gpu_count() >= 1
    g, x, y, train, init, X = _chain_model()
    gpu_vals, plan = _run_chain(g, x, y, train, init, X)
    assert "GPU" in plan.devices[0] and not plan.fallbacks
    assert all(isinstance(v, (np.ndarray, np.generic)) for v in gpu_vals)
    prev = kernels_gpu.device_backend()
    kernels_gpu.set_device_backend(None)
    try:
        cpu_vals, _ = _run_chain(g, x, y, train, init, X)
    finally:
        kernels_gpu.set_device_backend(prev)
    np.testing.assert_allclose(gpu_vals, cpu_vals, rtol=1e-5)


def _two_gpus_reason():
    if _NO_GPU is not None:
        return _NO_GPU
    import cupy
    n = cupy.cuda.runtime.getDeviceCount()
    return None if n >= 2 else f"CuPy finds {n} GPU (this test needs 2)"


@pytest.mark.skipif(_two_gpus_reason() is not None, reason=_two_gpus_reason() or "")
def test_a_variable_on_gpu_1_lives_on_device_1():
    """runtime enters cupy.cuda.Device(1) for a GPU:1 program: the variable is allocated there."""
    stored, got = _variable_on_gpu_1()
    assert stored.device.id == 1
    np.testing.assert_array_equal(got, [0.0, 2.0, 4.0, 6.0])


@needs_gpu
def test_gpu_values_go_through_a_cpu_only_op_and_back():
    g = tv.Graph()
    with g.as_default():
        x = tv.placeholder(tv.float32, [3], name="x")
        with tv.device("/gpu:0"):
            y = tv.square(x)
            s = tv.as_string(y)  # CPU-only: y is downloaded, s stays on the host
            n = tv.strings.to_number(s)  # CPU-only
            z = tv.negative(n)  # back on the GPU: n is uploaded
        with tv.Session() as sess:
            plan = sess.plan(z, {x: np.ones(3, np.float32)})
            got = sess.run(z, {x: np.array([1, 2, 3], np.float32)})
    assert any("_CopyDeviceToHost" in op or "_to_host" in op for t in plan.tasks for op in t.ops)
    np.testing.assert_allclose(got, [-1, -4, -9])
    assert type(got) is np.ndarray


def test_ops_on_string_tensors_run_on_the_cpu_and_say_why(fake_gpu):
    """Strings live in host memory: an op that takes or makes one (``Unique`` of words, a
    ``GatherV2`` of string rows) has no GPU kernel for it, as in TF, whatever its family; only
    pass-through ops (Identity, Switch...) hold a string on a GPU device. Before, such ops
    were put on the GPU and mixed host strings with device indices (a map-reduce reducer's
    ``tv.unique(keys)`` fed a host index to a GPU ``UnsortedSegmentSum``)."""
    g = tv.Graph()
    with g.as_default(), tv.device("/gpu:0"):
        words = tv.placeholder(tv.string, [None], name="words")
        uniq, idx = tv.unique(words, name="u")
        counts = tv.unsorted_segment_sum(tv.ones_like(idx), idx, tv.size(uniq), name="c")
        picked = tv.gather(words, tv.constant([2, 0]), name="pick")
        same = tv.identity(words, name="same")
        feed = {words: np.array(["b", "a", "b"], object)}
        with tv.Session() as s:
            plan = s.plan([uniq, counts, picked, same], feed)
            got = s.run([uniq, counts, picked, same], feed)
    reasons = {f.ops[0]: f.reason for f in plan.fallbacks}
    assert reasons["u"] == "no GPU kernel for Unique on string tensors: strings live in host " \
                           "memory"
    assert reasons["pick"].startswith("no GPU kernel for GatherV2 on string tensors")
    assert "c" not in reasons and "same" not in reasons  # numbers on the GPU; a pass-through
    assert list(got[0]) == ["b", "a"] and list(got[2]) == ["b", "b"]
    np.testing.assert_array_equal(got[1], [2, 1])
    assert list(got[3]) == ["b", "a", "b"]


def _string_node(name, op_type, out_dtypes):
    from tensorvm.framework import dtypes
    return Node(name, op_type, (("w", 0),), device="/job:worker/task:0/gpu:0",
                in_dtypes=(dtypes.string,), out_dtypes=out_dtypes)


def test_placement_keeps_string_ops_off_gpus_but_lets_strings_pass_through():
    from tensorvm.framework import dtypes
    nodes = {"u": _string_node("u", "Unique", (dtypes.string, dtypes.int32)),
             "i": _string_node("i", "Identity", (dtypes.string,)),
             "n": Node("n", "Neg", (("x", 0),), device="/job:worker/task:0/gpu:0",
                       in_dtypes=(dtypes.float32,), out_dtypes=(dtypes.float32,))}
    devs, why = place_explained(nodes, W0, gpus=1)
    assert devs == {"u": W0, "i": G0, "n": G0}
    assert [(w.ops, w.reason) for w in why] == [
        (("u",), "no GPU kernel for Unique on string tensors: strings live in host memory")]
    with pytest.raises(tv.errors.InvalidArgumentError,
                       match=r"'u' \(Unique\): no GPU kernel for Unique on string tensors"):
        place(nodes, W0, gpus=1, allow_soft_placement=False)


def test_cond_on_a_fake_gpu_reads_its_device_predicate(fake_gpu):
    """Switch reads its 0-d device predicate with ``bool()`` (CuPy copies one element to the
    host), never ``np.asarray`` (refused for a device array)."""
    g = tv.Graph()
    with g.as_default(), tv.device("/gpu:0"):
        x = tv.placeholder(tv.float32, [])
        y = tv.cond(x > 0, lambda: x * 2.0, lambda: -x)
        with tv.Session() as s:
            got = [float(s.run(y, {x: v})) for v in (3.0, -4.0)]
            assert s.plan(y, {x: 1.0}).devices == (
                "/job:localhost/replica:0/task:0/device:GPU:0",)
    assert got == [6.0, 4.0]


def test_a_saver_round_trip_keeps_a_gpu_variable_on_its_gpu(fake_gpu, tmp_path):
    """Savers are host I/O: the shard is written on the CPU from a device-to-host copy of the
    variable, and restore assigns on the GPU, so the restored variable holds a device array
    (before, the CPU-only shard ops pulled the variable's colocation group onto the CPU in the
    save and restore steps only: 'Attempting to use uninitialized value w')."""
    g = tv.Graph()
    with g.as_default(), tv.device("/gpu:0"):
        w = tv.Variable(np.arange(6, dtype=np.float32).reshape(3, 2), name="w")
        saver = tv.train.Saver([w])
        with tv.Session() as s:
            s.run(w.initializer)
            path = saver.save(s, f"{tmp_path}/model.ckpt", global_step=1)
            s.run(w.assign(np.zeros((3, 2), np.float32)))
            saver.restore(s, path)
            got = s.run(w)
            mgr = local_resources(s).for_device("/job:localhost/replica:0/task:0/device:GPU:0")
            (key,) = [k for k in mgr.names() if k[1] == "w"]
            stored = mgr.lookup(*key).value
            save_plan = s.plan(saver._commit, {saver._ckpt: path, saver._dir: str(tmp_path),
                                               saver._step: 1})
    np.testing.assert_array_equal(got, np.arange(6, dtype=np.float32).reshape(3, 2))
    assert type(stored) is fake_device.FakeDeviceArray
    assert "/job:localhost/replica:0/task:0/device:GPU:0" in save_plan.devices
    assert "/job:localhost/replica:0/task:0/device:CPU:0" in save_plan.devices


def test_a_timed_out_cpu_to_gpu_step_never_applies_its_update(fake_gpu):
    """A step given up while its CPU stage blocks never runs its GPU stage (the two-task
    version of test_runtime_inprocess's one-task test, whose thread join does not apply)."""
    import threading
    import time
    release, returned = threading.Event(), threading.Event()

    def blocked(x):
        release.wait(30)
        returned.set()
        return x
    g = tv.Graph()
    with g.as_default():
        with tv.device("/gpu:0"):
            v = tv.Variable(0.0, name="counter")
        gate = tv.py_func(blocked, [tv.constant(1.0)], tv.float32, name="gate")
        with tv.device("/gpu:0"):
            up = v.assign_add(gate, name="late_update")
        with tv.Session() as s:
            s.run(v.initializer)
            assert len(s.plan(up).devices) == 2
            with pytest.raises(tv.errors.DeadlineExceededError, match="gate"):
                s.run(up, options=tv.RunOptions(timeout_in_ms=100))
            release.set()
            assert returned.wait(10)
            deadline = time.monotonic() + 0.3
            while time.monotonic() < deadline:  # the GPU stage must never run
                assert s.run(v) == 0.0
                time.sleep(0.02)
            assert s.run(up) == 1.0  # and the next step runs normally


# ---- placement decided on the whole graph, alike for every step ----------------------------
def test_a_group_is_placed_alike_in_every_step_whatever_the_step_prunes(fake_gpu):
    """A colocation group with a CPU-only member anywhere in the graph is on the CPU in every
    step, not only in the steps whose pruned graph holds that member (before: the variable
    was initialised on GPU:0, then read by a step whose graph held the CPU-only op, placed on
    CPU:0: 'Attempting to use uninitialized value v')."""
    g = tv.Graph()
    with g.as_default():
        with tv.device("/gpu:0"):
            v = tv.Variable(np.arange(3, dtype=np.float32), name="v")
        with tv.colocate_with(v):
            s_ = tv.strings.as_string(v, name="as_str")  # CPU-only, in v's group
        with tv.Session() as s:
            s.run(v.initializer)
            init_plan = s.plan(v.initializer)
            got = s.run(s_)
            assert s.run(v).tolist() == [0.0, 1.0, 2.0]
    assert [x.decode() if isinstance(x, bytes) else x for x in got.tolist()] == \
        ["0.000000", "1.000000", "2.000000"]
    cpu = "/job:localhost/replica:0/task:0/device:CPU:0"
    (fb,) = init_plan.fallbacks  # the initialiser's step holds no string op, yet v is on CPU
    assert fb.ops == ("v/Assign",) and fb.placed == cpu
    assert fb.reason.startswith("colocated with CPU-only op 'as_str' (AsString) elsewhere in "
                                "the graph: no GPU kernel for AsString: string tensors")
    assert [t.device for t in init_plan.tasks if "v/Assign" in t.ops] == [cpu]


def test_whole_graph_constraints_put_a_group_on_the_cpu_and_name_the_op():
    """place() takes the whole graph's CPU-only facts (colocation_constraints of all_nodes):
    a step without the CPU-only member still falls back, naming it; without soft placement,
    the error names the op and the CPU-only one."""
    from tensorvm.passes.place import colocation_constraints
    every = {"v": Node("v", "VariableV2", device="/job:worker/task:0/gpu:0", colocation="v"),
             "a": Node("a", "Assign", (("v", 0), ("c", 0)), colocation="v"),
             "c": Node("c", "Const", device="/job:worker/task:0/gpu:0"),
             "p": Node("p", "PyFunc", (("v", 0),), colocation="v")}
    step = {k: every[k] for k in ("v", "a", "c")}
    cons = colocation_constraints(every)
    devs, why = place_explained(step, W0, all_nodes=every, gpus=1, constraints=cons)
    assert devs == {"v": W0, "a": W0, "c": G0}
    assert why[0].ops == ("v", "a") and why[0].reason.startswith(
        "colocated with CPU-only op 'p' (PyFunc) elsewhere in the graph: no GPU kernel for "
        "PyFunc: py_func")
    assert place(step, W0, all_nodes=every, gpus=1) == devs  # computed when not given
    with pytest.raises(tv.errors.InvalidArgumentError,
                       match=r"operation 'v' \(VariableV2\): colocated with CPU-only op 'p' "
                             r"\(PyFunc\) elsewhere in the graph"):
        place(step, W0, all_nodes=every, gpus=1, constraints=cons, allow_soft_placement=False)
    # a graph without the CPU-only op: the group stays on its GPU
    del every["p"]
    assert place(step, W0, all_nodes=every, gpus=1, constraints=colocation_constraints(every)
                 ) == {"v": G0, "a": G0, "c": G0}


def test_a_loop_whose_body_updates_a_variable_joins_the_variable_s_group(fake_gpu):
    """A loop runs its body on its own device and is colocated with the state its body
    updates: the variable on GPU:0 pulls the loop there, in every step."""
    g = tv.Graph()
    with g.as_default():
        with tv.device("/gpu:0"):  # (a float: TF keeps int32 variables on the host)
            v = tv.Variable(0.0, name="counter")
        r = tv.while_loop(lambda k: k < 4,
                          lambda k: k + 1 + tv.cast(v.assign_add(2.0), tv.int32) * 0, [0])
        with tv.Session() as s:
            s.run(v.initializer)
            init_plan, loop_plan = s.plan(v.initializer), s.plan(r)
            assert s.run(r) == 4 and s.run(v) == 8.0
    assert init_plan.fallbacks == () and loop_plan.fallbacks == ()
    g0 = "/job:localhost/replica:0/task:0/device:GPU:0"
    assert init_plan.devices == (g0,)
    assert [t.device for t in loop_plan.tasks if "while/While" in t.ops] == [g0]


def _loop_model(body_extra=None):
    """A loop on /gpu:0 that squares-and-adds a vector 5 times, and its gradient."""
    g = tv.Graph()
    with g.as_default(), tv.device("/gpu:0"):
        x = tv.placeholder(tv.float32, [4])
        w = tv.Variable(np.array([0.5, -0.25, 0.125, 1.0], np.float32), name="w")

        def body(i, h):
            h = tv.tanh(h * w + x)
            if body_extra is not None:
                h = body_extra(h)
            return i + 1, h
        _, h = tv.while_loop(lambda i, h: i < 5, body, [0, tv.zeros([4])])
        loss = tv.reduce_sum(h * h)
        grads = tv.gradients(loss, [x, w])
    return g, x, w, h, grads


def _run_loop(g, x, w, h, grads, **cfg):
    feed = {x: np.array([0.1, -0.2, 0.3, 0.4], np.float32)}
    with g.as_default(), tv.Session(config=tv.ConfigProto(**cfg) if cfg else None) as s:
        s.run(w.initializer)
        return s.run([h] + grads, feed), s.plan([h] + grads, feed)


def test_a_while_loop_runs_on_a_fake_gpu_with_its_gradient(fake_gpu):
    """The loop's values stay device arrays (the fake device refuses any implicit host
    conversion): only the predicate comes to the host; forward and gradient equal the CPU's."""
    gpu, plan = _run_loop(*_loop_model())
    assert plan.devices == ("/job:localhost/replica:0/task:0/device:GPU:0",)
    assert plan.fallbacks == ()
    assert any("While" in op for t in plan.tasks for op in t.ops)
    fake_device.restore(None)
    cpu, cpu_plan = _run_loop(*_loop_model())
    assert "GPU" not in cpu_plan.devices[0]
    for a, b in zip(gpu, cpu):
        np.testing.assert_allclose(a, b, rtol=1e-6)
    assert np.abs(gpu[1]).sum() > 0 and np.abs(gpu[2]).sum() > 0


def test_a_loop_whose_body_has_a_cpu_only_op_stays_on_the_cpu_and_says_why(fake_gpu):
    def extra(h):
        copy = tv.reshape(tv.py_func(lambda a: a, [h], tv.float32, stateful=False), [4])
        return h + tv.stop_gradient(copy - h)  # h's value through the host, h's gradient
    got, plan = _run_loop(*_loop_model(extra))
    (fb,) = [f for f in plan.fallbacks if "While" in f.ops[0]]
    assert "its function" in fb.reason and "(PyFuncStateless)" in fb.reason \
        and "py_func runs a Python function on host values" in fb.reason
    fake_device.restore(None)
    cpu, _ = _run_loop(*_loop_model(extra))
    for a, b in zip(got, cpu):
        np.testing.assert_allclose(a, b, rtol=1e-6)
    fake_device.install()
    with pytest.raises(tv.errors.InvalidArgumentError, match=r"its function .* runs op"):
        _run_loop(*_loop_model(extra), allow_soft_placement=False)


@needs_gpu
def test_a_while_loop_on_the_gpu_matches_cpu():
    """The loop and its gradient on CuPy (values stay on the device; the predicate is read with
    one element copied to the host per iteration), against the same graph on the CPU."""
    gpu, plan = _run_loop(*_loop_model())
    assert [t.device for t in plan.tasks if "while/While" in t.ops][0].endswith("GPU:0")
    assert not plan.fallbacks
    prev = kernels_gpu.device_backend()
    kernels_gpu.set_device_backend(None)
    try:
        cpu, _ = _run_loop(*_loop_model())
    finally:
        kernels_gpu.set_device_backend(prev)
    for a, b in zip(gpu, cpu):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
