"""GPU kernels that made the host wait (issue 15): each test counts the copies to the host
(``xp.cuda.syncs`` on ``tests/fake_device``: where a real GPU makes the host wait for its queued
kernels) of a step, and compares its values with the CPU's.

What is left is what TF's GPU kernels wait for too: a fetch, DynamicPartition's counts (its
output shapes), a loop's or a cond's predicate computed on the device (TF's ``LoopCond`` and
``Switch`` read ``pred`` in host memory).
"""
from __future__ import annotations

import fake_device
import numpy as np
import pytest
import tensorvm as tv
from tensorvm.vm.kernels import array_api as kernels_gpu


@pytest.fixture
def fake_gpu():
    prev = fake_device.install()
    yield fake_device.xp
    fake_device.restore(prev)


def _waits():
    b = kernels_gpu.device_backend()
    return None if b is None or not hasattr(b.cuda, "syncs") else b.cuda.syncs


def _reset():
    b = kernels_gpu.device_backend()
    if b is not None and hasattr(b.cuda, "syncs"):
        b.cuda.syncs = 0


def _run_twice(fetch, feed):
    """Run ``fetch`` once (plans, compiles), then again counting the waits of that step."""
    with tv.Session() as s:
        s.run(fetch, feed)
        _reset()
        got = s.run(fetch, feed)
        return got, _waits()


# ---- a cond inside a loop on int32 values ------------------------------------------------------
def _collatz(start):
    g = tv.Graph()
    with g.as_default(), tv.device("/gpu:0"):
        x = tv.placeholder(tv.int32, [])
        steps = tv.while_loop(
            lambda n, k: n > 1,
            lambda n, k: (tv.cond(tv.equal(n % 2, 0), lambda: n // 2, lambda: 3 * n + 1),
                          k + 1), [x, 0])
        return _run_twice(steps, {x: start})


def test_an_int32_cond_in_a_gpu_loop_stays_on_the_host(fake_gpu):
    """TF's int32 rule holds through a cond: Switch and Merge of int32 values are host memory
    on a GPU (TF registers their int32 GPU kernels with every input and output in host
    memory), and Switch reads ``pred`` in host memory. A loop whose cond picks ``n // 2`` or
    ``3n + 1`` waited 2 times per iteration (the uploaded predicate read back, the division's
    zero check on the uploaded values): 224 waits for 27's 111 steps; now its fetches only."""
    (n, k), waits = _collatz(27)
    assert (int(n), int(k)) == (1, 111)
    assert waits <= 2  # the two fetches, at most (int32 fetches are host values already)


def test_a_cond_on_a_host_predicate_does_not_upload_it(fake_gpu):
    """A GPU cond whose predicate is computed on the host (an int32 compare) reads it there:
    no upload and download of the predicate (TF: Switch's ``pred`` is HostMemory)."""
    g = tv.Graph()
    with g.as_default(), tv.device("/gpu:0"):
        i = tv.placeholder(tv.int32, [])
        x = tv.placeholder(tv.float32, [3])
        y = tv.reduce_sum(tv.cond(i > 2, lambda: x * 2.0, lambda: -x))
        got, waits = _run_twice(y, {i: 5, x: np.arange(3, dtype=np.float32)})
    assert float(got) == 6.0
    assert waits == 1  # the fetch


# ---- integer division by zero ------------------------------------------------------------------
def test_int64_division_by_zero_on_a_gpu_gives_0_without_waiting(fake_gpu):
    """TF's GPU kernels of integer FloorDiv/FloorMod/TruncateDiv/TruncateMod (int64, int16,
    uint8...) do not check the divisor (a CUDA integer division by zero: undefined). tensorvm's
    give CuPy's value, 0, as NumPy's ufuncs do, and no wait for a check (it copied a flag to
    the host each call to raise TF's CPU error)."""
    g = tv.Graph()
    with g.as_default(), tv.device("/gpu:0"):
        x = tv.placeholder(tv.int64, [4])
        y = tv.placeholder(tv.int64, [4])
        outs = [tv.floordiv(x, y), tv.mod(x, y), tv.truncatediv(x, y), tv.truncatemod(x, y)]
        feed = {x: np.array([7, -7, 5, 9]), y: np.array([2, 2, 0, -4])}
        got, waits = _run_twice(outs, feed)
    assert [v.tolist() for v in got] == [[3, -4, 0, -3], [1, 1, 0, -3], [3, -3, 0, -2],
                                         [1, -1, 0, 1]]
    assert waits == 4  # the four fetches
    with tv.Session(graph=g) as s:  # a nonzero divisor: the CPU's bits
        ok = {x: feed[x], y: np.array([2, 2, 3, -4])}
        gpu = [v.tolist() for v in s.run(outs, ok)]
    fake_device.restore(None)
    with tv.Session(graph=g) as s:
        assert gpu == [v.tolist() for v in s.run(outs, ok)]


def test_int32_division_by_zero_on_a_gpu_fails_as_tfs(fake_gpu):
    """TF's int32 FloorDiv/FloorMod on a GPU are its CPU kernels in host memory
    (``HostMemory("x").HostMemory("y").HostMemory("z")``): they check the divisor. tensorvm's
    run on the host too (a fed or computed int32 value is read there), so the check waits for
    nothing and fails by TF's message."""
    g = tv.Graph()
    with g.as_default(), tv.device("/gpu:0"):
        x = tv.placeholder(tv.int32, [3])
        y = tv.placeholder(tv.int32, [3])
        q, r = tv.floordiv(x, y), tv.mod(x, y)
        got, waits = _run_twice([q, r], {x: [7, -7, 8], y: [2, 2, -3]})
        assert [v.tolist() for v in got] == [[3, -4, -3], [1, 1, -1]]
        assert waits == 0  # int32 results are host values: nothing to copy back
        with tv.Session() as s, pytest.raises(tv.errors.InvalidArgumentError,
                                              match="Integer division by zero"):
            s.run(q, {x: [7, -7, 8], y: [2, 0, 1]})


# ---- DynamicStitch, DynamicPartition -----------------------------------------------------------
def _stitch(indices, data):
    g = tv.Graph()
    with g.as_default():
        idx = [tv.placeholder(tv.int32, [None]) for _ in indices]
        with tv.device("/gpu:0"):
            xs = [tv.constant(d) * 1.0 for d in data]
            out = tv.dynamic_stitch(idx, xs)
        return _run_twice(out, dict(zip(idx, indices)))


def test_dynamic_stitch_reads_its_indices_in_host_memory(fake_gpu):
    """TF's GPU DynamicStitch reads ``indices`` in host memory (it sizes its output by their
    max and resolves duplicates there, the last one winning): tensorvm's waited twice (the
    min and max of its device indices); now the fetch only, duplicates resolved as on the CPU
    (CuPy's scatter leaves which duplicate lands undefined)."""
    indices = [np.array([0, 3, 5]), np.array([1, 3, 2, 5])]
    data = [np.array([[1.0, 2], [3, 4], [5, 6]]), np.array([[7.0, 8], [9, 10], [11, 12],
                                                               [13, 14]])]
    got, waits = _stitch(indices, data)
    assert waits == 1  # the fetch
    fake_device.restore(None)
    cpu, _ = _stitch(indices, data)
    np.testing.assert_array_equal(got, cpu)
    assert got[3].tolist() == [9.0, 10.0] and got[5].tolist() == [13.0, 14.0]  # last wins


def _partition(data, parts, n):
    g = tv.Graph()
    with g.as_default(), tv.device("/gpu:0"):
        x = tv.placeholder(tv.float32, [None, 2])
        p = tv.placeholder(tv.float32, [None])
        outs = tv.dynamic_partition(x * 1.0, tv.cast(p, tv.int32), n)
        total = tv.add_n([tv.reduce_sum(o) * float(i + 1) for i, o in enumerate(outs)])
        return _run_twice([total] + outs, {x: data, p: parts})


def test_dynamic_partition_waits_once_for_its_counts(fake_gpu):
    """TF's GPU DynamicPartition copies its partitions' counts to the host to size its outputs
    (one copy: ``dynamic_partition_op_gpu.cu.cc``); tensorvm's copied twice (an 'any out of
    range?' flag, then the counts): now once, with the range check in the same copy."""
    data = np.arange(12, dtype=np.float32).reshape(6, 2)
    parts = np.array([2, 0, 2, 1, 0, 2], np.float32)
    got, waits = _partition(data, parts, 3)
    assert waits == 1 + 4  # the counts; the four fetches
    fake_device.restore(None)
    cpu, _ = _partition(data, parts, 3)
    for a, b in zip(got, cpu):
        np.testing.assert_array_equal(a, b)


def test_dynamic_partition_on_a_gpu_refuses_out_of_range_ids(fake_gpu):
    """TF's GPU kernel drops rows with an out-of-range id silently; tensorvm's fails as the
    CPU's does, naming the first bad entry (the check rides on the counts' copy)."""
    data = np.arange(8, dtype=np.float32).reshape(4, 2)
    with pytest.raises(tv.errors.InvalidArgumentError,
                       match=r"DynamicPartition: partitions\[2\] = 3 is not in \[0, 3\)"):
        _partition(data, np.array([0, 1, 3, -1], np.float32), 3)


# ---- slice bounds and shapes given as tensors --------------------------------------------------
def test_dynamic_slice_bounds_and_reshape_shapes_are_read_in_host_memory(fake_gpu):
    """A slice whose bounds are tensors (``x[i:i + 2]``) and its gradient, a reshape to a
    shape tensor and a pad by a paddings tensor read those in host memory (TF's StridedSlice
    ``HostMemory("begin")`` ``("end")`` ``("strides")``, Reshape ``HostMemory("shape")``, Pad
    ``HostMemory("paddings")``): a fed bound was uploaded, then read back by the kernel."""
    g = tv.Graph()
    with g.as_default():
        i = tv.placeholder(tv.int32, [])
        shape = tv.placeholder(tv.int32, [2])
        pads = tv.placeholder(tv.int32, [1, 2])
        x = tv.placeholder(tv.float32, [6])
        with tv.device("/gpu:0"):
            y = x * 1.0
            part = y[i:i + 2]
            grad = tv.gradients(tv.reduce_sum(part * part), y)[0]
            flat = tv.reshape(y, shape)
            padded = tv.pad(y, pads, constant_values=1.0)
            total = tv.reduce_sum(grad) + tv.reduce_sum(flat[1]) + tv.reduce_sum(padded)
        feed = {i: 3, shape: [3, 2], pads: [[2, 1]], x: np.arange(6, dtype=np.float32)}
        got, waits = _run_twice(total, feed)
    assert float(got) == 2 * (3 + 4) + (2 + 3) + (15 + 3)
    assert waits == 1  # the fetch


# ---- what stays: a predicate computed on the device --------------------------------------------
def test_a_loop_on_a_device_predicate_waits_once_per_iteration_as_tfs(fake_gpu):
    """A loop whose predicate reads device values (``sum(x) < 100``) copies the predicate to
    the host once per iteration, and nothing else: TF's GPU ``LoopCond`` (and ``Switch``'s
    ``pred``) is in host memory too, so TF copies it as well. Such a loop is the floor the
    runtime cannot go under; a counted loop (an int32 predicate) waits for nothing."""
    g = tv.Graph()
    with g.as_default(), tv.device("/gpu:0"):
        x = tv.placeholder(tv.float32, [3])
        k, y = tv.while_loop(lambda k, x: tv.reduce_sum(x) < 100.0,
                             lambda k, x: (k + 1, x * 2.0), [0, x])
        got, waits = _run_twice(tv.reduce_sum(y), {x: np.ones(3, np.float32)})
    assert float(got) == 3 * 64.0  # 3, 6, ..., 96 (< 100): six doublings
    assert waits == 7 + 1  # seven predicates (the last one false), the fetch


def test_a_depthwise_convolutions_gradient_reads_its_sizes_in_host_memory(fake_gpu):
    """DepthwiseConv2dNativeBackpropInput/Filter take the input's and filter's shapes as
    tensors (TF: HostMemory("input_sizes"), ("filter_sizes")): a Shape is a host value, and
    was uploaded then read back, a wait per gradient op."""
    g = tv.Graph()
    with g.as_default(), tv.device("/gpu:0"):
        x = tv.placeholder(tv.float32, [1, 4, 4, 2])
        f = tv.constant(np.linspace(-1, 1, 18, dtype=np.float32).reshape(3, 3, 2, 1))
        y = tv.nn.depthwise_conv2d(x * 1.0, f, [1, 1, 1, 1], "SAME")
        gx, gf = tv.gradients(tv.reduce_sum(y * y), [x, f])
        total = tv.reduce_sum(gx) + tv.reduce_sum(gf)
        feed = {x: np.arange(32, dtype=np.float32).reshape(1, 4, 4, 2) / 10}
        got, waits = _run_twice(total, feed)
    assert waits == 1  # the fetch
    fake_device.restore(None)
    with tv.Session(graph=g) as s:
        assert float(got) == pytest.approx(float(s.run(total, feed)), rel=1e-5)


def test_a_loops_maximum_iterations_is_read_in_host_memory(fake_gpu):
    """A loop's ``maximum_iterations`` (map_fn/scan/foldl pass their length) is read by the
    host that runs the loop: it was uploaded and read back, a wait per loop."""
    g = tv.Graph()
    with g.as_default(), tv.device("/gpu:0"):
        x = tv.placeholder(tv.float32, [5])
        doubled = tv.map_fn(lambda v: v * 2.0, x)
        _, y = tv.while_loop(lambda k, y: k < 100, lambda k, y: (k + 1, y * 2.0), [0, x],
                             maximum_iterations=tv.shape(x)[0])
        total = tv.reduce_sum(doubled) + tv.reduce_sum(y)
        got, waits = _run_twice(total, {x: np.arange(5, dtype=np.float32)})
    assert float(got) == 2 * 10 + 32 * 10
    assert waits == 1  # the fetch


def test_an_output_sized_by_the_data_is_a_wait(fake_gpu):
    """A boolean mask's (and ``where``'s, ``unique``'s) output size is the count of the data:
    CuPy copies it to the host, as TF's GPU Where does. The fake device counts that wait (it
    did not: a masked step looked free)."""
    g = tv.Graph()
    with g.as_default(), tv.device("/gpu:0"):
        x = tv.placeholder(tv.float32, [6])
        y = x * 1.0
        kept = tv.boolean_mask(y, y > 2.0)
        got, waits = _run_twice(tv.reduce_sum(kept), {x: np.arange(6, dtype=np.float32)})
    assert float(got) == 3 + 4 + 5
    assert waits == 1 + 1  # the mask's count, the fetch


def test_segment_reductions_repeat_and_tensor_scatters_read_their_ids_in_host_memory(fake_gpu):
    """Sorted and unsorted segment reductions, repeat and the tensor scatters check their ids,
    counts or indices (and the first two size their outputs by them): read in host memory
    (like the gathers' and segment sums' indices), a fed one waits for nothing (they waited 1
    to 6 times a call)."""
    g = tv.Graph()
    with g.as_default():
        ids = tv.placeholder(tv.int32, [None])
        reps = tv.placeholder(tv.int32, [None])
        with tv.device("/gpu:0"):
            data = tv.constant(np.arange(8.0).reshape(4, 2)) * 1.0
            parts = [tv.segment_sum(data, ids), tv.segment_mean(data, ids),
                     tv.segment_max(data, ids), tv.unsorted_segment_max(data, ids, 3),
                     tv.repeat(data, reps, axis=0),
                     tv.tensor_scatter_nd_update(data, tv.reshape(3 - tv.range(4), [4, 1]),
                                                 data * 2.0)]
            total = tv.add_n([tv.reduce_sum(p) for p in parts])
        feed = {ids: [0, 0, 1, 2], reps: [1, 0, 2, 1]}
        got, waits = _run_twice(total, feed)
    assert waits == 1  # the fetch
    fake_device.restore(None)
    with tv.Session(graph=g) as s:
        assert float(got) == float(s.run(total, feed))


def test_an_int32_variable_on_a_gpu_lives_on_the_host_as_tfs(fake_gpu):
    """TF registers no GPU kernel for int32 variables (variable_ops.cc: int64, uint32 and the
    float, complex and bool types): a ``/gpu:0`` int32 counter falls back to the CPU with its
    updates, saying why, and a loop that bumps it runs there with it. On the GPU its value
    went back to the host every iteration (3 waits a step of 2 iterations, now 2 a step)."""
    g = tv.Graph()
    with g.as_default(), tv.device("/gpu:0"):
        v = tv.Variable(0, name="counter")
        w = tv.Variable(np.float32(1.0), name="w")
        r = tv.while_loop(lambda k, x: k < 2,
                          lambda k, x: (k + 1 + v.assign_add(1) * 0, x * w), [0, 3.0])
        with tv.Session() as s:
            s.run([v.initializer, w.initializer])
            plan = s.plan(r)
            s.run(r)
            _reset()
            got = s.run(r)
            waits = _waits()
            assert s.run(v) == 4
    assert tuple(map(float, got)) == (2.0, 3.0)
    assert waits == 2  # w and the constant 3.0, made on the GPU, copied to the CPU loop
    reasons = " ".join(str(f) for f in plan.fallbacks)
    assert "no GPU kernel for VariableV2 of int32" in reasons
    with tv.Session(graph=g, config=tv.ConfigProto(allow_soft_placement=False)) as s, \
            pytest.raises(tv.errors.InvalidArgumentError, match="VariableV2 of int32"):
        s.run(v.initializer)
