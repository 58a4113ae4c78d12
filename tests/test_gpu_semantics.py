"""Where CuPy's results differ from NumPy's (docs.cupy.dev, "Differences between CuPy and
NumPy"), and what tensorvm's GPU kernels give there (issue 15).

The fake device (``tests/fake_device.py``) models each difference it can, so the op sweep
catches a kernel that leans on NumPy's behaviour; each GPU kernel that meets one gives TF's GPU
behaviour, or the CPU's bits where TF is exact:

==============================  ===================  ======================================
difference                      CuPy                 tensorvm's GPU kernels
==============================  ===================  ======================================
integer-array index out of      wraps around         indices are read in host memory and
bounds (take, x[i], x[i] = v,   (NumPy raises)       range-checked there (Gather, GatherNd,
ufunc.at)                                            ScatterNd, segment sums, scatters,
                                                     DynamicStitch): TF's errors
duplicate indices in a scatter  undefined which      sums use ``add.at`` (defined); Dynamic-
(``x[i] = v``)                  lands                Stitch picks the last on the host (TF)
integer ``x // 0``, ``x % 0``   0, no warning        int32: checked on the host (TF's int32
                                                     kernels are host kernels); other ints:
                                                     0 (TF's GPU kernels do not check)
float -> int32/64 cast out of   saturates, NaN -> 0  as CuPy: TF's GPU Cast is the same
range                           (NumPy: INT_MIN)     CUDA conversion (not bit-equal to CPU)
float16 sum/mean                float32 accumulator  the same: NumPy's pairwise sum of half
                                                     accumulates in float32 too
sort/argsort stability          always stable        kernels ask for ``kind="stable"``
random numbers                  cuRAND streams       random ops draw on the host (gpu=host):
                                                     a seed gives the CPU's numbers
==============================  ===================  ======================================
"""
from __future__ import annotations

import fake_device
import numpy as np
import pytest
import tensorvm as tv
from tensorvm.vm.kernels import array_api as kernels_gpu


def _cupy_reason():
    try:
        import cupy
        n = cupy.cuda.runtime.getDeviceCount()
    except Exception as e:  # noqa: BLE001 - ImportError or a CUDA library error
        return f"CuPy finds no GPU ({type(e).__name__}: {e})"
    return None if n > 0 else "CuPy finds no GPU (0 devices)"


_NO_GPU = _cupy_reason()
BACKENDS = ["fake", pytest.param("cupy", marks=pytest.mark.skipif(
    _NO_GPU is not None, reason=f"the real device: {_NO_GPU}"))]


@pytest.fixture(params=BACKENDS)
def xp(request):
    """The device module: the fake (always), and CuPy on a machine with a GPU, so the fake's
    claims about CuPy are checked against CuPy itself where there is one."""
    if request.param == "fake":
        return fake_device.xp
    import cupy
    return cupy


@pytest.fixture(params=BACKENDS)
def gpu(request):
    """tensorvm's device backend for the test: the fake, or CuPy on a real GPU."""
    if request.param == "fake":
        prev = fake_device.install()
        yield "fake"
        fake_device.restore(prev)
    else:
        import cupy
        prev = kernels_gpu.device_backend()
        kernels_gpu.set_device_backend(cupy)
        yield "cupy"
        kernels_gpu.set_device_backend(prev)


# ---- the fake device models CuPy's differences (checked against CuPy where there is a GPU) -----
def test_integer_array_indices_wrap_around_on_the_device(xp):
    a = xp.asarray(np.arange(5) * 10)
    assert a[xp.asarray(np.array([1, 5, -6]))].get().tolist() == [10, 0, 40]
    assert np.take(a, xp.asarray(np.array([7]))).get().tolist() == [20]
    m = xp.asarray(np.arange(6).reshape(2, 3))
    assert m[:, xp.asarray(np.array([3]))].get().tolist() == [[0], [3]]
    assert np.take_along_axis(m, xp.asarray(np.array([[4], [5]])), 1).get().tolist() == [[1],
                                                                                      [5]]
    b = xp.asarray(np.zeros(3))
    b[xp.asarray(np.array([4]))] = 7.0
    np.add.at(b, xp.asarray(np.array([3, 5])), 1.0)
    assert b.get().tolist() == [1.0, 7.0, 1.0]
    with pytest.raises(IndexError):  # NumPy raises where CuPy wraps
        np.arange(5)[np.array([5])]


def test_fake_scatter_with_duplicate_indices_keeps_the_first_value():
    """(CuPy leaves it undefined: the fake picks the value NumPy would not.)"""
    xp = fake_device.xp
    a = xp.asarray(np.zeros(3))
    a[xp.asarray(np.array([1, 1, 2]))] = xp.asarray(np.array([5.0, 6.0, 7.0]))
    assert a.get().tolist() == [0.0, 5.0, 7.0]  # NumPy: 6.0 (the last) at 1


def test_float_to_int_casts_saturate_on_the_device(xp):
    x = xp.asarray(np.array([np.inf, -np.inf, np.nan, 3e9, -3e9, -1.7, 2.9], np.float32))
    assert x.astype(np.int32).get().tolist() == [2**31 - 1, -2**31, 0, 2**31 - 1, -2**31, -1, 2]
    assert x.astype(np.uint32).get().tolist() == [2**32 - 1, 0, 0, 3000000000, 0, 0, 2]
    assert x.astype(np.int64).get().tolist()[:3] == [2**63 - 1, -2**63, 0]
    assert x.astype(np.float64).get()[3] == 3e9  # float targets: NumPy's


def test_integer_division_by_zero_gives_0_on_the_device(xp):
    x, y = xp.asarray(np.array([7, -7, 0], np.int64)), xp.asarray(np.zeros(3, np.int64))
    assert np.floor_divide(x, y).get().tolist() == [0, 0, 0]
    assert np.mod(x, y).get().tolist() == [0, 0, 0]
    assert np.fmod(x, y).get().tolist() == [0, 0, 0]


def test_argsort_on_the_device_is_stable_and_takes_no_other_kind(xp):
    v = np.array([2, 1, 2, 1, 0, 2] * 50)
    np.testing.assert_array_equal(np.argsort(xp.asarray(v), kind="stable").get(),
                                  np.argsort(v, kind="stable"))
    np.testing.assert_array_equal(xp.asarray(v).argsort().get(), np.argsort(v, kind="stable"))
    with pytest.raises((TypeError, ValueError)):  # (NotInCuPyError is a TypeError)
        np.argsort(xp.asarray(v), kind="quicksort")


# ---- tensorvm's GPU kernels where they differ --------------------------------------------------
def _gpu_run(build, feed_fn):
    g = tv.Graph()
    with g.as_default():
        with tv.device("/gpu:0"):
            out, phs = build()
        with tv.Session() as s:
            return s.run(out, feed_fn(phs))


def test_gathers_and_scatters_still_refuse_out_of_bounds_indices_on_a_gpu(gpu):
    """Where CuPy would wrap, the GPU kernels check their indices on the host and fail by
    TF's messages (their indices are host memory)."""
    def build():
        i = tv.placeholder(tv.int32, [None])
        p = tv.constant(np.arange(8.0).reshape(4, 2))
        return [tv.gather(p, i), tv.unsorted_segment_sum(tv.ones([2, 2]), i, 4),
                tv.dynamic_stitch([i], [tv.ones([2, 2])])], i
    ok = _gpu_run(build, lambda i: {i: [3, 1]})
    assert ok[0].tolist() == [[6.0, 7.0], [2.0, 3.0]]
    for name, pattern in ((0, r"GatherV2: indices\[1\] = 4 is not in \[0, 4\)"),
                          (1, r"segment id 4 is out of range \[0, 4\)")):
        g = tv.Graph()
        with g.as_default():
            with tv.device("/gpu:0"):
                outs, i = build()
            with tv.Session() as s, pytest.raises(tv.errors.InvalidArgumentError,
                                                  match=pattern):
                s.run(outs[name], {i: [3, 4]})


def test_a_float_to_int_cast_on_a_gpu_saturates_as_tfs_gpu_kernel(gpu):
    """TF's GPU Cast converts with CUDA's float-to-integer instruction, which saturates and
    maps NaN to 0 (TF's CPU kernel on x86 gives INT_MIN: the C++ conversion is undefined out
    of range); tensorvm's GPU Cast is CuPy's, the same conversion. In range, both devices
    give the same bits."""
    vals = np.array([np.inf, -np.inf, np.nan, 3e9, -2.5, 7.9], np.float32)

    def build():
        x = tv.placeholder(tv.float32, [6])
        return tv.cast(x * 1.0, tv.int32), x
    got = _gpu_run(build, lambda x: {x: vals})
    assert got.tolist() == [2**31 - 1, -2**31, 0, 2**31 - 1, -2, 7]
