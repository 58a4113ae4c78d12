"""The BLAS-shaped conv/pool kernels (issue 14, item 10) against loop references, on the cases
the speed rewrite touches: argmax ties (ReLU zeros), overlapping and padded windows, the
gradient of the max-pool gradient, NCHW; and the BLAS thread limit. No timings here: speed is
measured in ``bench/bench_tf_programs.py``."""
from __future__ import annotations

import numpy as np
import pytest
import tensorvm as tv
from opcheck import check_gradients
from tolerance import assert_product_close
from tensorvm.vm.kernels import threads
from tensorvm.ops.nn import nn_conv

RNG = np.random.default_rng(7)


def _pads(n, k, s, padding):
    if padding == "VALID":
        return (n - k) // s + 1, 0
    out = -(-n // s)
    return out, max((out - 1) * s + k - n, 0) // 2


def ref_max_pool_grad(x, g, k, s, padding):
    """Each window's output gradient goes to the first maximum of the window (row-major)."""
    oh, pt = _pads(x.shape[1], k[0], s[0], padding)
    ow, pl = _pads(x.shape[2], k[1], s[1], padding)
    dx = np.zeros_like(x, dtype=np.float64)
    for n in range(x.shape[0]):
        for c in range(x.shape[3]):
            for i in range(oh):
                for j in range(ow):
                    best = None
                    for a in range(k[0]):
                        for b in range(k[1]):
                            r, q = i * s[0] + a - pt, j * s[1] + b - pl
                            if 0 <= r < x.shape[1] and 0 <= q < x.shape[2] and \
                                    (best is None or x[n, r, q, c] > x[n, best[0], best[1], c]):
                                best = (r, q)
                    dx[n, best[0], best[1], c] += g[n, i, j, c]
    return dx


CASES = [((2, 6, 6, 3), (2, 2), (2, 2), "SAME"), ((1, 7, 5, 2), (3, 3), (2, 2), "SAME"),
         ((2, 5, 6, 2), (3, 2), (1, 1), "VALID"), ((1, 7, 7, 1), (2, 2), (2, 2), "SAME"),
         ((2, 6, 9, 8), (3, 3), (3, 3), "VALID"), ((2, 4, 6, 16), (2, 3), (2, 3), "SAME")]


@pytest.fixture
def numpy_kernels():
    """The NumPy kernels, not the optional PyTorch ones (tensorvm.vm.kernels.cpu_accel), for a test of
    their own bits."""
    from tensorvm.vm.kernels import cpu_accel
    cpu_accel.set_backend("numpy")
    yield
    cpu_accel.set_backend(None)


@pytest.mark.parametrize("xs,k", [((3, 8, 8, 32), (2, 2)), ((2, 6, 9, 5), (3, 3)),
                                  ((2, 4, 6, 3), (2, 3))])
def test_tiled_max_pool_grad_is_the_tap_by_tap_form_bit_for_bit(xs, k, numpy_kernels):
    """The exact-tiling path (one broadcast compare, first-hit masks, one product) gives the
    bits of ``g * hit`` tap by tap, signed zeros included (ReLU zeros tie in a window)."""
    x = np.maximum(RNG.standard_normal(xs), 0).round(1).astype(np.float32)
    attrs = {"ksize": (1, *k, 1), "strides": (1, *k, 1), "padding": "VALID",
             "data_format": "NHWC"}
    y = nn_conv._max_pool_kernel(x, **attrs)
    g = RNG.standard_normal(y.shape).astype(np.float32)
    g[0, 0, 0, 0] = -0.0
    want = np.empty_like(x)
    oh, ow = y.shape[1:3]
    for t, hit in nn_conv._first_max_taps(x, y, *k, *k, oh, ow):
        want[t] = g * hit
    got = nn_conv._max_pool_grad_kernel(x, y, g, **attrs)
    assert got.tobytes() == want.tobytes()


@pytest.mark.parametrize("xs,k,s,padding", CASES)
def test_max_pool_grad_ties_go_to_first_max(xs, k, s, padding):
    x = np.maximum(RNG.standard_normal(xs), 0).round(1).astype(np.float32)  # many ties
    attrs = {"ksize": (1, *k, 1), "strides": (1, *s, 1), "padding": padding,
             "data_format": "NHWC"}
    y = nn_conv._max_pool_kernel(x, **attrs)
    g = RNG.standard_normal(y.shape).astype(np.float32)
    got = nn_conv._max_pool_grad_kernel(x, y, g, **attrs)
    np.testing.assert_allclose(got, ref_max_pool_grad(x, g, k, s, padding), rtol=1e-6,
                               atol=1e-6)
    # the gradient of MaxPoolGrad wrt g is its adjoint: <dx(g), gg> == <g, ggrad(gg)>
    gg = RNG.standard_normal(x.shape).astype(np.float32)
    back = nn_conv._max_pool_grad_grad_kernel(x, y, gg, **attrs)
    np.testing.assert_allclose(float((got * gg).sum()), float((g * back).sum()), rtol=1e-4)
    # NCHW gives the same, transposed
    nchw = dict(attrs, data_format="NCHW", ksize=(1, 1, *k), strides=(1, 1, *s))
    got_t = nn_conv._max_pool_grad_kernel(x.transpose(0, 3, 1, 2), y.transpose(0, 3, 1, 2),
                                          g.transpose(0, 3, 1, 2), **nchw)
    np.testing.assert_allclose(got_t, got.transpose(0, 3, 1, 2))


@pytest.mark.parametrize("kind", ["max", "avg"])
def test_pool_second_order_gradient(kind):
    fn = tv.nn.max_pool if kind == "max" else tv.nn.avg_pool
    x = RNG.permutation(2 * 5 * 5).reshape(1, 5, 5, 2) / 7.0

    def build(a):
        y = fn(a, [1, 3, 3, 1], [1, 2, 2, 1], "SAME")
        return tv.gradients(tv.reduce_sum(y * y), a)[0]
    check_gradients(build, x, rtol=1e-4)


def test_conv2d_strided_and_dilated_gradients():
    x = RNG.standard_normal((1, 7, 6, 2))
    f = RNG.standard_normal((3, 2, 2, 3))
    check_gradients(lambda a, b: tv.nn.conv2d(a, b, [1, 2, 2, 1], "SAME"), x, f, rtol=1e-4)
    check_gradients(lambda a, b: tv.nn.conv2d(a, b, [1, 1, 1, 1], "VALID",
                                              dilations=[1, 2, 1, 1]), x, f, rtol=1e-4)


def test_blas_threads_limited_while_running(monkeypatch):
    threadpoolctl = pytest.importorskip("threadpoolctl")
    if not threadpoolctl.threadpool_info():
        pytest.skip("no BLAS library found by threadpoolctl")
    monkeypatch.delenv(threads.ENV, raising=False)
    x = tv.constant(np.ones((4, 4), np.float32))
    with tv.Session() as sess:
        sess.run(tv.matmul(x, x))
    assert {i["num_threads"] for i in threadpoolctl.threadpool_info()
            if i["user_api"] == "blas"} == {1}
    monkeypatch.setenv(threads.ENV, "2")
    assert threads.ensure_blas_limit() == 2
    monkeypatch.delenv(threads.ENV)
    assert threads.ensure_blas_limit() == 1


def test_intra_op_pool_matmul_is_the_product():
    a = RNG.standard_normal((1000, 300)).astype(np.float32)
    b = RNG.standard_normal((300, 40)).astype(np.float32)
    threads.set_intra_op_threads(3)
    try:
        got = threads.matmul(a, b)
        got_t = threads.matmul(np.asfortranarray(a.T).T, b)  # a transposed view's rows
    finally:
        threads.set_intra_op_threads(None)
    assert_product_close(got, a, b)
    assert_product_close(got_t, a, b, "a transposed view's rows @ b")
    assert threads.intra_op_threads() >= 1


def test_max_pool_grad_keeps_a_nan_in_its_window_argmax():
    x = np.arange(16, dtype=np.float32).reshape(1, 4, 4, 1)
    for s in (2, 1):  # disjoint and overlapping windows
        attrs = {"ksize": (1, 2, 2, 1), "strides": (1, s, s, 1), "padding": "VALID",
                 "data_format": "NHWC"}
        y = nn_conv._max_pool_kernel(x, **attrs)
        gs = np.ones(y.shape, np.float32)
        gs[0, 0, 0, 0] = np.nan
        dx = nn_conv._max_pool_grad_kernel(x, y, gs, **attrs)[0, :, :, 0]
        assert np.isnan(dx[1, 1]) and np.isnan(dx).sum() == 1  # only the argmax (5.0)


def ref_conv2d(x, f, s, d, padding):
    """Direct NHWC cross-correlation (TF's padding rule), in float64."""
    kh, kw = f.shape[:2]
    ekh, ekw = (kh - 1) * d[0] + 1, (kw - 1) * d[1] + 1
    oh, pt = _pads(x.shape[1], ekh, s[0], padding)
    ow, pl = _pads(x.shape[2], ekw, s[1], padding)
    out = np.zeros((x.shape[0], oh, ow, f.shape[3]))
    for i in range(oh):
        for j in range(ow):
            for a in range(kh):
                for b in range(kw):
                    r, q = i * s[0] + a * d[0] - pt, j * s[1] + b * d[1] - pl
                    if 0 <= r < x.shape[1] and 0 <= q < x.shape[2]:
                        out[:, i, j] += x[:, r, q] @ f[a, b]
    return out


CONV_CASES = [  # x shape, filter (kh, kw), strides, dilations, padding
    ((2, 7, 6, 3), (3, 3), (1, 1), (1, 1), "SAME"), ((2, 7, 6, 3), (2, 4), (1, 1), (1, 1), "SAME"),
    ((1, 8, 9, 2), (3, 2), (1, 1), (1, 1), "VALID"), ((1, 9, 8, 2), (3, 3), (1, 1), (2, 3), "SAME"),
    ((1, 9, 8, 2), (2, 3), (1, 1), (2, 1), "VALID"), ((2, 7, 7, 1), (5, 5), (1, 1), (1, 1), "SAME"),
    ((1, 7, 6, 2), (3, 3), (2, 2), (1, 1), "SAME"), ((1, 8, 7, 2), (3, 2), (2, 3), (1, 1), "VALID")]


@pytest.mark.parametrize("xs,k,s,d,padding", CONV_CASES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("tap_major_c", [0, 4])
def test_conv2d_and_both_gradients_match_direct_loops(monkeypatch, xs, k, s, d, padding,
                                                      dtype, tap_major_c):
    """Forward, input gradient (the transposed-conv rows for stride 1, per-tap products for
    strides) and filter gradient against the direct loop and its adjoint identities, with
    the im2col row-major (tap_major_c=0) and tap-major (these cases have C <= 3)."""
    monkeypatch.setattr(nn_conv, "TAP_MAJOR_C", tap_major_c)
    x = RNG.standard_normal(xs).astype(dtype)
    f = RNG.standard_normal((*k, xs[3], 4)).astype(dtype)
    attrs = {"strides": (1, *s, 1), "padding": padding, "data_format": "NHWC",
             "dilations": (1, *d, 1)}
    tol = 1e-4 if dtype == np.float32 else 1e-10
    threads.begin_task()
    y = nn_conv._conv_kernel(x, f, **attrs)
    ref = ref_conv2d(x.astype(np.float64), f.astype(np.float64), s, d, padding)
    np.testing.assert_allclose(y, ref, rtol=tol, atol=tol)
    g = RNG.standard_normal(y.shape).astype(dtype)
    dx = nn_conv._conv_backprop_input_kernel(x, f, g, **attrs)
    df = nn_conv._conv_backprop_filter_kernel(x, f, g, **attrs)
    assert dx.dtype == dtype and df.dtype == dtype and dx.shape == x.shape
    # conv is bilinear: <conv(x, f), g> == <x, dx(g)> == <f, df(g)>, for random x and f
    x2 = RNG.standard_normal(xs)
    f2 = RNG.standard_normal(f.shape)
    np.testing.assert_allclose((ref_conv2d(x2, f.astype(np.float64), s, d, padding) * g).sum(),
                               (x2 * dx).sum(), rtol=tol * 10)
    np.testing.assert_allclose((ref_conv2d(x.astype(np.float64), f2, s, d, padding) * g).sum(),
                               (f2 * df).sum(), rtol=tol * 10)
    # NCHW: the same, transposed
    nchw = dict(attrs, data_format="NCHW", strides=(1, 1, *s), dilations=(1, 1, *d))
    dx_t = nn_conv._conv_backprop_input_kernel(x.transpose(0, 3, 1, 2), f,
                                               g.transpose(0, 3, 1, 2), **nchw)
    np.testing.assert_allclose(dx_t, dx.transpose(0, 3, 1, 2), rtol=tol, atol=tol)


@pytest.mark.parametrize("block_bytes,width", [(1, 1), (200, 1), (3000, 1), (200, 3),
                                               (1 << 30, 2)])
@pytest.mark.parametrize("tap_major_c", [0, 4])
@pytest.mark.parametrize("stride", [1, 2])
def test_conv2d_blocks_and_pool_give_the_same_result(monkeypatch, block_bytes, width,
                                                     tap_major_c, stride):
    """The im2cols (row-major or tap-major, rows of one image or whole images; the input
    gradient's, whole images) are made block by block and shared out over the intra-op
    pool: every split gives the direct loop's result, and the gradients its adjoints."""
    x = RNG.standard_normal((3, 9, 8, 2)).astype(np.float32)
    f = RNG.standard_normal((3, 3, 2, 4)).astype(np.float32)
    s = (stride, stride)
    attrs = {"strides": (1, *s, 1), "padding": "SAME", "data_format": "NHWC",
             "dilations": (1, 1, 1, 1)}
    x64, f64 = x.astype(np.float64), f.astype(np.float64)
    y_ref = ref_conv2d(x64, f64, s, (1, 1), "SAME")
    g = RNG.standard_normal(y_ref.shape).astype(np.float32)
    monkeypatch.setattr(nn_conv, "BLOCK_BYTES", block_bytes)
    monkeypatch.setattr(nn_conv, "TAP_MAJOR_C", tap_major_c)
    threads.set_intra_op_threads(width)
    try:
        dx = nn_conv._conv_backprop_input_kernel(x, f, g, **attrs)
        y = nn_conv._conv_kernel(x, f, **attrs)
        df = nn_conv._conv_backprop_filter_kernel(x, f, g, **attrs)
        empty = nn_conv._conv_backprop_filter_kernel(x[:0], f, g[:0], **attrs)
        assert nn_conv._conv_kernel(x[:0], f, **attrs).shape == (0, *y_ref.shape[1:])
    finally:
        threads.set_intra_op_threads(None)
    np.testing.assert_allclose(y, y_ref, rtol=1e-5, atol=1e-5)
    x2, f2 = RNG.standard_normal(x.shape), RNG.standard_normal(f.shape)
    np.testing.assert_allclose((ref_conv2d(x64, f2, s, (1, 1), "SAME") * g).sum(),
                               (f2 * df).sum(), rtol=1e-4)
    np.testing.assert_allclose((ref_conv2d(x2, f64, s, (1, 1), "SAME") * g).sum(),
                               (x2 * dx).sum(), rtol=1e-4)
    np.testing.assert_array_equal(empty, np.zeros(f.shape))


@pytest.mark.parametrize("ta,tb", [(False, False), (True, False), (False, True)])
def test_matmul_over_the_intra_op_pool_is_the_product(ta, tb):
    """With ConfigProto(intra_op_parallelism_threads=2) a large 2-D MatMul is cut by rows
    over the pool (transposed operands as views): the same product."""
    a = RNG.standard_normal((300, 200)).astype(np.float32)
    b = RNG.standard_normal((200, 250)).astype(np.float32)
    at, bt = (a.T.copy() if ta else a), (b.T.copy() if tb else b)
    g = tv.Graph()
    with g.as_default():
        y = tv.matmul(tv.constant(at), tv.constant(bt), transpose_a=ta, transpose_b=tb)
        try:
            with tv.Session(graph=g, config=tv.ConfigProto(intra_op_parallelism_threads=2)) as s:
                assert threads.intra_op_threads() == 2
                got = s.run(y)
        finally:
            threads.set_intra_op_threads(None)
    assert_product_close(got, a, b)
