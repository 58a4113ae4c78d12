"""The optional PyTorch CPU kernels (:mod:`tensorvm.vm.kernels.cpu_accel`) against the NumPy kernels.

Convolutions (oneDNN, :mod:`tensorvm.ops.nn.nn_conv_accel`): strides, padding (uneven SAME
included), dilations, NHWC/NCHW, float32 (the accelerated dtype) and float64 (kept on NumPy),
numeric gradients through a session. Matrix products (MKL): float32/float64, transposed and
read-only operands, the size threshold, through the ``MatMul`` op and its gradient. And the
backend choice and torch's threads. Without torch the tests that need it skip (the choice logic
is tested either way)."""
from __future__ import annotations

import logging

import numpy as np
import pytest
import tensorvm as tv
from opcheck import check_gradients
from tolerance import assert_product_close
from tensorvm.vm.kernels import cpu_accel, threads
from tensorvm.ops.nn import nn_conv, nn_conv_accel

RNG = np.random.default_rng(11)

try:
    import torch
except ImportError:  # the tests that need it skip, with the reason
    torch = None
needs_torch = pytest.mark.skipif(
    torch is None, reason="PyTorch is not installed (pip install 'tensorvm[cpu-accel]'): the "
                          "accelerated CPU kernels are not used here")


@pytest.fixture
def backend(monkeypatch):
    """Choose a backend for one test (and leave the process's choice as it was)."""
    monkeypatch.delenv(cpu_accel.ENV, raising=False)
    yield cpu_accel.set_backend
    cpu_accel.set_backend(None)


@pytest.fixture
def calls(monkeypatch):
    """Count the calls that reach the torch kernels."""
    seen = {"conv2d": 0, "conv2d_backprop_input": 0, "conv2d_backprop_filter": 0}
    for name in seen:
        real = getattr(nn_conv_accel, name)

        def spy(*a, _real=real, _name=name, **kw):
            seen[_name] += 1
            return _real(*a, **kw)
        monkeypatch.setattr(nn_conv_accel, name, spy)
    return seen


CASES = [  # x NHWC shape, filter (kh, kw, out), strides, dilations, padding
    ((2, 7, 6, 3), (3, 3, 4), (1, 1), (1, 1), "SAME"),
    ((2, 7, 6, 3), (2, 4, 4), (1, 1), (1, 1), "SAME"),  # uneven SAME padding
    ((1, 8, 9, 2), (3, 2, 5), (1, 1), (1, 1), "VALID"),
    ((1, 9, 8, 2), (3, 3, 3), (1, 1), (2, 3), "SAME"),
    ((1, 9, 8, 2), (2, 3, 3), (1, 1), (2, 1), "VALID"),
    ((3, 12, 12, 1), (5, 5, 8), (1, 1), (1, 1), "SAME"),  # mnist_deep's first layer, small
    ((1, 7, 6, 2), (3, 3, 4), (2, 2), (1, 1), "SAME"),
    ((1, 8, 7, 2), (3, 2, 4), (2, 3), (1, 1), "VALID"),
    ((2, 8, 8, 3), (4, 4, 2), (2, 2), (1, 1), "SAME"),  # uneven SAME with strides
]


def _attrs(s, d, padding, df):
    if df == "NHWC":
        return {"strides": (1, *s, 1), "padding": padding, "data_format": df,
                "dilations": (1, *d, 1)}
    return {"strides": (1, 1, *s), "padding": padding, "data_format": df,
            "dilations": (1, 1, *d)}


def _three(x, f, g, attrs):
    return (nn_conv._conv_kernel(x, f, **attrs),
            nn_conv._conv_backprop_input_kernel(x, f, g, **attrs),
            nn_conv._conv_backprop_filter_kernel(x, f, g, **attrs))


@needs_torch
@pytest.mark.parametrize("xs,k,s,d,padding", CASES)
@pytest.mark.parametrize("df", ["NHWC", "NCHW"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_torch_kernels_match_numpy(backend, calls, xs, k, s, d, padding, df, dtype):
    x = RNG.standard_normal(xs).astype(dtype)
    if df == "NCHW":
        x = np.ascontiguousarray(x.transpose(0, 3, 1, 2))
    f = RNG.standard_normal((k[0], k[1], xs[3], k[2])).astype(dtype)
    attrs = _attrs(s, d, padding, df)
    backend("numpy")
    y0 = nn_conv._conv_kernel(x, f, **attrs)
    g = RNG.standard_normal(y0.shape).astype(dtype)
    want = _three(x, f, g, attrs)
    assert calls == dict.fromkeys(calls, 0)
    backend("torch")
    got = _three(x, f, g, attrs)
    # float32 runs on torch; float64 stays on NumPy (oneDNN has no float64 kernels)
    assert set(calls.values()) == ({1} if dtype == np.float32 else {0})
    for name, a, b in zip(("conv2d", "input grad", "filter grad"), got, want):
        assert a.dtype == dtype and a.shape == b.shape, name
        scale = max(1.0, float(np.abs(b).max()))
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5 * scale, err_msg=name)


@needs_torch
def test_read_only_inputs_and_shape_only_dummies(backend, calls):
    """Fed arrays may be read-only, and a gradient op's shape-only input a zero-strided
    dummy (constant folding): torch gets a copy, or only the shape."""
    x = RNG.standard_normal((2, 6, 5, 3)).astype(np.float32)
    f = RNG.standard_normal((3, 3, 3, 4)).astype(np.float32)
    attrs = _attrs((1, 1), (1, 1), "SAME", "NHWC")
    backend("numpy")
    g = RNG.standard_normal((2, 6, 5, 4)).astype(np.float32)
    want = _three(x, f, g, attrs)
    backend("torch")
    for a in (x, f, g):
        a.flags.writeable = False
    dummy_x = np.broadcast_to(np.float32(0), x.shape)
    dummy_f = np.broadcast_to(np.float32(0), f.shape)
    got = (nn_conv._conv_kernel(x, f, **attrs),
           nn_conv._conv_backprop_input_kernel(dummy_x, f, g, **attrs),
           nn_conv._conv_backprop_filter_kernel(x, dummy_f, g, **attrs))
    assert set(calls.values()) == {1}
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-4)


@needs_torch
@pytest.mark.parametrize("df", ["NHWC", "NCHW"])
def test_numeric_gradients_on_torch(backend, calls, df):
    """Gradients through a session, float32 on torch, against central differences (exact
    for the bilinear conv and the quadratic second-order build, so a large eps is fine)."""
    backend("torch")
    shape = (1, 6, 5, 2) if df == "NHWC" else (1, 2, 6, 5)
    x, f = RNG.standard_normal(shape).astype(np.float32), \
        RNG.standard_normal((3, 2, 2, 3)).astype(np.float32)
    st = [1, 2, 2, 1] if df == "NHWC" else [1, 1, 2, 2]
    check_gradients(lambda a, b: tv.nn.conv2d(a, b, st, "SAME", data_format=df), x, f,
                    eps=0.5, rtol=1e-3, atol=1e-3)
    assert calls["conv2d"] and calls["conv2d_backprop_input"] and \
        calls["conv2d_backprop_filter"]

    def second(a, b):  # d/da of sum(conv^2): its gradient runs all three kernels
        y = tv.nn.conv2d(a, b, [1, 1, 1, 1], "SAME", data_format=df)
        return tv.gradients(tv.reduce_sum(y * y), a)[0]
    check_gradients(second, x, f, eps=0.5, rtol=1e-3, atol=1e-3)


@needs_torch
def test_runtime_depth_mismatch_is_invalid_argument(backend):
    backend("torch")
    x = tv.placeholder(tv.float32, [None, None, None, None])
    y = tv.nn.conv2d(x, tv.constant(np.ones((3, 3, 2, 4), np.float32)), [1, 1, 1, 1], "SAME")
    with tv.Session() as sess, pytest.raises(tv.errors.InvalidArgumentError,
                                             match="in_channels"):
        sess.run(y, {x: np.ones((1, 5, 5, 3), np.float32)})


@needs_torch
def test_torch_threads_follow_the_intra_op_setting(backend):
    backend("torch")
    x = RNG.standard_normal((1, 5, 5, 2)).astype(np.float32)
    f = RNG.standard_normal((3, 3, 2, 2)).astype(np.float32)
    attrs = _attrs((1, 1), (1, 1), "SAME", "NHWC")
    try:
        threads.set_intra_op_threads(2)
        nn_conv._conv_kernel(x, f, **attrs)
        assert torch.get_num_threads() == 2
    finally:
        threads.set_intra_op_threads(None)
    nn_conv._conv_kernel(x, f, **attrs)
    assert torch.get_num_threads() == threads.intra_op_threads() == 1


# ---- the choice (no torch needed) --------------------------------------------------------------
def test_backend_choice(backend, monkeypatch, caplog):
    assert cpu_accel.backend() == ("torch" if torch is not None else "numpy")
    monkeypatch.setenv(cpu_accel.ENV, "numpy")
    assert cpu_accel.backend() == "numpy"
    backend("auto")  # set_backend wins over the environment
    assert cpu_accel.backend() == ("torch" if torch is not None else "numpy")
    backend(None)
    monkeypatch.setenv(cpu_accel.ENV, "mkl")
    with caplog.at_level(logging.WARNING, logger="tensorvm"):
        cpu_accel._warned.discard(("env", "mkl"))
        cpu_accel.backend()
    assert "ignoring TENSORVM_CPU_ACCEL='mkl'" in caplog.text
    with pytest.raises(ValueError, match="must be one of"):
        cpu_accel.set_backend("cudnn")


def test_without_torch_the_numpy_kernels_run(backend, monkeypatch, calls, caplog):
    """torch absent (or failing to import): every backend resolves to NumPy, asking for torch
    warns once with the install hint, and a convolution gives the NumPy result."""
    monkeypatch.setattr(cpu_accel, "_torch", False)
    monkeypatch.setattr(cpu_accel, "_warned", set())
    assert not cpu_accel.available()
    backend("torch")
    with caplog.at_level(logging.WARNING, logger="tensorvm"):
        assert cpu_accel.backend() == "numpy"
        assert cpu_accel.backend() == "numpy"
    assert caplog.text.count("tensorvm[cpu-accel]") == 1
    x = np.arange(16, dtype=np.float32).reshape(1, 4, 4, 1)
    f = np.ones((2, 2, 1, 1), np.float32)
    y = nn_conv._conv_kernel(x, f, **_attrs((1, 1), (1, 1), "VALID", "NHWC"))
    np.testing.assert_array_equal(y[0, :, :, 0], [[10, 14, 18], [26, 30, 34], [42, 46, 50]])
    assert calls["conv2d"] == 0


def test_only_float32_host_arrays_qualify(backend):
    backend("auto")
    a32 = np.ones((1, 2, 2, 1), np.float32)
    expect = torch is not None
    assert nn_conv_accel.wants(a32, a32) is expect
    assert not nn_conv_accel.wants(a32, a32.astype(np.float64))
    assert not nn_conv_accel.wants(a32.astype(np.float16), a32.astype(np.float16))
    assert not nn_conv_accel.wants(np.ones((0, 2, 2, 1), np.float32), a32)
    assert not nn_conv_accel.wants(a32.astype(">f4"), a32)  # non-native byte order
    assert not nn_conv_accel.wants(a32.tolist(), a32)  # not an ndarray (a device array)
    backend("numpy")
    assert not nn_conv_accel.wants(a32, a32)


# ---- matrix products (MKL through torch) -------------------------------------------------------
@pytest.fixture
def mm_calls(monkeypatch):
    seen = []
    real = cpu_accel.matmul

    def spy(a, b, *args):
        seen.append((a.shape, b.shape))
        return real(a, b, *args)
    monkeypatch.setattr(cpu_accel, "matmul", spy)
    return seen


@needs_torch
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("ta,tb", [(False, False), (True, False), (False, True), (True, True)])
def test_large_matmul_runs_on_torch_and_matches_numpy(backend, mm_calls, dtype, ta, tb):
    backend("auto")
    m, k, n = 160, 200, 150  # 4.8M multiply-adds: over MIN_MATMUL_MACS
    assert m * k * n >= cpu_accel.MIN_MATMUL_MACS
    a = RNG.standard_normal((k, m) if ta else (m, k)).astype(dtype)
    b = RNG.standard_normal((n, k) if tb else (k, n)).astype(dtype)
    a.flags.writeable = False  # a constant's or a fed value's array: shared, not copied
    x = tv.constant(a)
    y = tv.placeholder(tv.as_dtype(dtype), b.shape)
    with tv.Session() as sess:
        got = sess.run(tv.matmul(x, y, transpose_a=ta, transpose_b=tb), {y: b})
    assert len(mm_calls) == 1 and mm_calls[0] == ((m, k), (k, n))
    assert got.dtype == dtype and got.shape == (m, n)
    assert_product_close(got, a.T if ta else a, b.T if tb else b)
    assert np.shares_memory(a, a) and not a.flags.writeable  # the operand was not touched


@needs_torch
def test_small_products_and_other_dtypes_stay_on_numpy(backend, mm_calls):
    backend("torch")
    small = np.ones((64, 64), np.float32)  # 262k multiply-adds: under the threshold
    assert not cpu_accel.wants_matmul(small, small)
    big = np.ones((256, 256), np.float32)
    assert cpu_accel.wants_matmul(big, big)
    assert not cpu_accel.wants_matmul(big, big.astype(np.float64))  # mixed dtypes
    assert not cpu_accel.wants_matmul(big.astype(np.int64), big.astype(np.int64))
    assert not cpu_accel.wants_matmul(big.astype(np.float16), big.astype(np.float16))
    assert not cpu_accel.wants_matmul(big[None], big[None])  # batched: NumPy's matmul
    with tv.Session() as sess:
        out = sess.run(tv.matmul(tv.constant(small), tv.constant(small)))
    np.testing.assert_array_equal(out, np.full((64, 64), 64, np.float32))
    assert mm_calls == []
    backend("numpy")
    assert not cpu_accel.wants_matmul(big, big)


@needs_torch
def test_matmul_gradient_on_torch(backend, mm_calls, monkeypatch):
    """The product and both gradient products on torch (threshold lowered so float64 central
    differences stay cheap), against central differences."""
    backend("torch")
    monkeypatch.setattr(cpu_accel, "MIN_MATMUL_MACS", 0)
    a, b = RNG.standard_normal((5, 4)), RNG.standard_normal((4, 3))
    check_gradients(lambda x, y: tv.matmul(x, y), a, b)
    check_gradients(lambda x, y: tv.matmul(x, y, transpose_b=True), a, b.T.copy())
    assert len(mm_calls) >= 6  # forward and both gradients, twice


@needs_torch
def test_matmul_follows_intra_op_threads(backend):
    backend("torch")
    a = np.ones((256, 256), np.float32)
    try:
        threads.set_intra_op_threads(2)
        np.testing.assert_array_equal(threads.matmul(a, a), np.full((256, 256), 256, np.float32))
        assert torch.get_num_threads() == 2
    finally:
        threads.set_intra_op_threads(None)
    threads.matmul(a, a)
    assert torch.get_num_threads() == 1


def test_env_chooses_numpy_in_a_fresh_process(tmp_path):
    """``TENSORVM_CPU_ACCEL=numpy`` (inherited by worker processes) keeps everything on NumPy,
    and ``import tensorvm`` never imports torch by itself."""
    import subprocess
    import sys
    code = ("import sys, numpy as np, tensorvm as tv\n"
            "from tensorvm import cpu_accel, threads\n"
            "assert 'torch' not in sys.modules, 'import tensorvm imported torch'\n"
            "a = np.ones((256, 256), np.float32)\n"
            "threads.matmul(a, a)\n"
            "print(cpu_accel.backend(), 'torch' in sys.modules)\n")
    env = dict(__import__("os").environ, TENSORVM_CPU_ACCEL="numpy")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["numpy", "False"]


# ---- the max-pool gradient -----------------------------------------------------------------------
@pytest.fixture
def pool_calls(monkeypatch):
    seen = []
    real = nn_conv_accel.max_pool_grad

    def spy(*a):
        seen.append(a[0].shape)
        return real(*a)
    monkeypatch.setattr(nn_conv_accel, "max_pool_grad", spy)
    return seen


POOLS = [  # x NHWC shape, window, strides, padding, torch expected
    ((2, 8, 8, 5), (2, 2), (2, 2), "VALID", True),
    ((2, 8, 8, 5), (2, 2), (2, 2), "SAME", True),  # SAME on even sizes: no padding
    ((1, 9, 7, 3), (3, 2), (3, 3), "VALID", True),  # windows apart, some elements in none
    ((1, 9, 7, 3), (3, 3), (2, 2), "VALID", False),  # overlapping windows: NumPy
    ((1, 9, 7, 3), (3, 2), (1, 1), "VALID", False),
    ((2, 7, 7, 4), (2, 2), (2, 2), "SAME", False),  # uneven padding: NumPy
]


@needs_torch
@pytest.mark.parametrize("xs,k,s,padding,on_torch", POOLS)
@pytest.mark.parametrize("df", ["NHWC", "NCHW"])
def test_max_pool_grad_on_torch_equals_numpy(backend, pool_calls, xs, k, s, padding, on_torch,
                                             df):
    """Ties (ReLU zeros, rounded values) go to the first max in row-major order on both."""
    x = np.maximum(RNG.standard_normal(xs), 0).round(1).astype(np.float32)
    if df == "NCHW":
        x = np.ascontiguousarray(x.transpose(0, 3, 1, 2))
    hw = (1, *k, 1) if df == "NHWC" else (1, 1, *k)
    st = (1, *s, 1) if df == "NHWC" else (1, 1, *s)
    attrs = {"ksize": hw, "strides": st, "padding": padding, "data_format": df}
    y = nn_conv._max_pool_kernel(x, **attrs)
    g = RNG.standard_normal(y.shape).astype(np.float32)
    backend("numpy")
    want = nn_conv._max_pool_grad_kernel(x, y, g, **attrs)
    backend("torch")
    got = nn_conv._max_pool_grad_kernel(x, y, g, **attrs)
    assert len(pool_calls) == (1 if on_torch else 0)
    assert got.dtype == np.float32 and got.shape == x.shape
    np.testing.assert_array_equal(got, want)  # +0.0 and -0.0 compare equal


@needs_torch
def test_max_pool_grad_keeps_tf_rules_for_nan_and_inf(backend, pool_calls):
    """A window whose max is NaN gets no gradient, and an infinite g reaches only the max: such
    inputs stay on the NumPy kernel."""
    backend("torch")
    x = np.arange(32, dtype=np.float32).reshape(1, 4, 4, 2)
    attrs = {"ksize": (1, 2, 2, 1), "strides": (1, 2, 2, 1), "padding": "VALID",
             "data_format": "NHWC"}
    x[0, 0, 1, 0] = np.nan
    y = nn_conv._max_pool_kernel(x, **attrs)
    g = np.ones(y.shape, np.float32)
    dx = nn_conv._max_pool_grad_kernel(x, y, g, **attrs)
    assert pool_calls == []
    assert np.isnan(y[0, 0, 0, 0]) and (dx[0, :2, :2, 0] == 0).all()
    assert dx[0, 1, 1, 1] == 1 and dx.sum() == g.sum() - 1
    x[0, 0, 1, 0] = 0
    y = nn_conv._max_pool_kernel(x, **attrs)
    g[0, 0, 0, 1] = np.inf
    dx = nn_conv._max_pool_grad_kernel(x, y, g, **attrs)
    assert pool_calls == []
    assert dx[0, 1, 1, 1] == np.inf and not np.isnan(dx).any()
    g[0, 0, 0, 1] = 1
    np.testing.assert_array_equal(nn_conv._max_pool_grad_kernel(x, y, g, **attrs).sum(), g.sum())
    assert len(pool_calls) == 1


@needs_torch
def test_max_pool_gradient_through_a_session_on_torch(backend, pool_calls):
    backend("torch")
    x = RNG.standard_normal((2, 6, 6, 3))
    check_gradients(lambda a: tv.nn.max_pool(a, [1, 2, 2, 1], [1, 2, 2, 1], "VALID"),
                    x.astype(np.float32), eps=1e-2, rtol=1e-3, atol=1e-3)
    assert pool_calls


# ---- the max-pool forward, and its argmax kept for the gradient -----------------------------------
@needs_torch
@pytest.mark.parametrize("xs,k,s,padding,on_torch", POOLS)
@pytest.mark.parametrize("df", ["NHWC", "NCHW"])
def test_max_pool_on_torch_equals_numpy(backend, xs, k, s, padding, on_torch, df):
    """The maximum is exact: the same values, NaN windows and signed zeros included (a tie of
    -0.0 and 0.0 may keep either sign: they compare equal)."""
    x = np.maximum(RNG.standard_normal(xs), 0).round(1).astype(np.float32)
    x.reshape(-1)[::7] = -0.0
    x.reshape(-1)[5] = np.nan
    if df == "NCHW":
        x = np.ascontiguousarray(x.transpose(0, 3, 1, 2))
    hw = (1, *k, 1) if df == "NHWC" else (1, 1, *k)
    st = (1, *s, 1) if df == "NHWC" else (1, 1, *s)
    attrs = {"ksize": hw, "strides": st, "padding": padding, "data_format": df}
    backend("numpy")
    want = nn_conv._max_pool_kernel(x, **attrs)
    backend("torch")
    got = nn_conv._max_pool_kernel(x, **attrs)
    assert got.dtype == np.float32 and got.shape == want.shape
    np.testing.assert_array_equal(got, want)


@needs_torch
def test_the_gradient_uses_the_argmax_its_forward_kept(backend, monkeypatch):
    """In one task MaxPoolGrad of the same input and output reuses MaxPool's indices (one
    pooling, not two); another input of the same shape is pooled anew; a new task starts with
    none kept."""
    import torch as t
    from tensorvm.vm.kernels import threads as th
    backend("torch")
    calls = []
    real = t.nn.functional.max_pool2d

    def spy(*a, **kw):
        calls.append(1)
        return real(*a, **kw)
    monkeypatch.setattr(t.nn.functional, "max_pool2d", spy)
    attrs = {"ksize": (1, 2, 2, 1), "strides": (1, 2, 2, 1), "padding": "VALID",
             "data_format": "NHWC"}
    th.begin_task()
    x = RNG.standard_normal((2, 6, 6, 3)).astype(np.float32)
    y = nn_conv._max_pool_kernel(x, **attrs)
    g = RNG.standard_normal(y.shape).astype(np.float32)
    dx = nn_conv._max_pool_grad_kernel(x, y, g, **attrs)
    assert len(calls) == 1
    other = x.copy()  # equal values, another array: its own argmax
    np.testing.assert_array_equal(nn_conv._max_pool_grad_kernel(other, y, g, **attrs), dx)
    assert len(calls) == 2
    th.begin_task()
    np.testing.assert_array_equal(nn_conv._max_pool_grad_kernel(x, y, g, **attrs), dx)
    assert len(calls) == 3
    backend("numpy")
    np.testing.assert_array_equal(nn_conv._max_pool_grad_kernel(x, y, g, **attrs), dx)


@needs_torch
def test_a_cnn_step_on_torch_pools_once_per_layer(backend, monkeypatch):
    """Through a session: conv, relu, max-pool and its gradient in one stage; the gradient
    equals the NumPy kernels' and each pool runs PyTorch's pooling once."""
    import torch as t
    calls = []
    real = t.nn.functional.max_pool2d
    monkeypatch.setattr(t.nn.functional, "max_pool2d",
                        lambda *a, **kw: calls.append(1) or real(*a, **kw))
    xs = RNG.standard_normal((3, 8, 8, 2)).astype(np.float32)
    ks = RNG.standard_normal((3, 3, 2, 4)).astype(np.float32)

    def run():
        g = tv.Graph()
        with g.as_default():
            x = tv.placeholder(tv.float32, xs.shape)
            k = tv.Variable(ks)
            h = tv.nn.max_pool(tv.nn.relu(tv.nn.conv2d(x, k, [1, 1, 1, 1], "SAME")),
                               [1, 2, 2, 1], [1, 2, 2, 1], "VALID")
            grads = tv.gradients(tv.reduce_sum(h * h), [x, k])
            with tv.Session() as s:
                s.run(k.initializer)
                return s.run([h] + grads, {x: xs})
    backend("torch")
    got = run()
    assert len(calls) == 1
    backend("numpy")
    want = run()
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)
