"""The rest of TF 1.x's ``tf.nn``: 3-D convolution and pooling, the public 2-D/1-D gradient
functions, max_pool_with_argmax, dilation2d/erosion2d, fractional pooling and the generic
``pool``: forward against NumPy references written per window, every gradient against central
differences, bad inputs by error class and message."""
from __future__ import annotations

import itertools

import numpy as np
import pytest
import tensorvm as tv

from tests.opcheck import check_forward, check_gradients, numeric_grad, run

RS = np.random.RandomState(7)
IAE = tv.errors.InvalidArgumentError


def geo(n, k, s, d, padding):
    """(output size, pad before) of one dim, as TF."""
    ek = (k - 1) * d + 1
    if padding == "VALID":
        return (n - ek) // s + 1, 0
    o = -(-n // s)
    return o, max((o - 1) * s + ek - n, 0) // 2


def ref_conv3d(x, f, s, d, padding):
    """out[n, a, b, c] = sum over taps in bounds of x[n, a*s + i*d - pad, ...] @ f[i, j, k]."""
    n, *sp, _ = x.shape
    g = [geo(e, k, ss, dd, padding) for e, k, ss, dd in zip(sp, f.shape[:3], s, d)]
    out = np.zeros((n, *(o for o, _ in g), f.shape[4]))
    for pos in itertools.product(*(range(o) for o, _ in g)):
        for tap in itertools.product(*(range(k) for k in f.shape[:3])):
            at = [p * ss + t * dd - p0 for p, t, ss, dd, (_, p0) in zip(pos, tap, s, d, g)]
            if all(0 <= a < e for a, e in zip(at, sp)):
                out[(slice(None), *pos)] += x[(slice(None), *at)] @ f[tap]
    return out


def ref_pool3d(x, k, s, padding, kind):
    n, *sp, c = x.shape
    g = [geo(e, kk, ss, 1, padding) for e, kk, ss in zip(sp, k, s)]
    out = np.zeros((n, *(o for o, _ in g), c))
    for pos in itertools.product(*(range(o) for o, _ in g)):
        sl = [slice(max(p * ss - p0, 0), min(p * ss - p0 + kk, e))
              for p, ss, kk, e, (_, p0) in zip(pos, s, k, sp, g)]
        win = x[(slice(None), *sl)].reshape(n, -1, c)
        out[(slice(None), *pos)] = win.max(1) if kind == "max" else win.mean(1)
    return out


CONV_CASES = [((1, 1, 1), (1, 1, 1), "SAME"), ((2, 1, 2), (1, 1, 1), "VALID"),
              ((1, 1, 1), (2, 1, 1), "SAME"), ((2, 2, 2), (1, 1, 1), "SAME"),
              ((1, 2, 1), (1, 1, 2), "VALID")]


@pytest.mark.parametrize("s,d,padding", CONV_CASES)
def test_conv3d_matches_a_per_window_reference_and_its_gradients(s, d, padding):
    def build(a, b):
        return tv.nn.conv3d(a, b, [1, *s, 1], padding, dilations=[1, *d, 1])
    check_forward(build, lambda a, b: ref_conv3d(a, b, s, d, padding), RS.rand(2, 5, 4, 6, 3),
                  RS.rand(2, 3, 2, 3, 2))
    check_gradients(build, RS.rand(1, 4, 3, 4, 2), RS.rand(2, 2, 2, 2, 2))


def test_conv3d_ncdhw_equals_ndhwc_and_second_order_gradients():
    x, f = RS.rand(2, 3, 5, 4, 6), RS.rand(2, 3, 2, 3, 2)
    check_forward(lambda a, b: tv.nn.conv3d(a, b, [1, 1, 2, 1, 1], "SAME", data_format="NCDHW"),
                  lambda a, b: ref_conv3d(a.transpose(0, 2, 3, 4, 1), b, (2, 1, 1), (1, 1, 1),
                                          "SAME").transpose(0, 4, 1, 2, 3), x, f)

    def second(a, b):  # the gradients' own gradients (Conv3DBackprop*V2's)
        y = tv.nn.conv3d(a, b, [1, 2, 1, 1, 1], "SAME")
        ga, gb = tv.gradients(tv.reduce_sum(y * y), [a, b])
        return tv.reduce_sum(ga * ga) + tv.reduce_sum(gb * gb)
    check_gradients(second, RS.rand(1, 3, 3, 2, 2), RS.rand(2, 2, 1, 2, 2), rtol=1e-4)


@pytest.mark.parametrize("s,padding,out_sp", [((1, 1, 1), "VALID", (4, 4, 4)),
                                              ((2, 2, 1), "SAME", (6, 4, 3)),
                                              ((2, 1, 2), "VALID", (6, 4, 7))])
def test_conv3d_transpose_is_the_input_gradient(s, padding, out_sp):
    v, f = RS.rand(2, 3, 2, 3, 2), RS.rand(2, 3, 2, 4, 2)  # filter [KD, KH, KW, out, in]

    def build(a, b):
        return tv.nn.conv3d_transpose(a, b, [2, *out_sp, 4], [1, *s, 1], padding)

    def want(a, b):  # the adjoint: element i is <conv3d(e_i, f), v>
        x0 = np.zeros((2, *out_sp, 4))
        out = np.zeros_like(x0)
        for idx in itertools.product(*(range(e) for e in x0.shape)):
            x0[idx] = 1
            out[idx] = (ref_conv3d(x0, b, s, (1, 1, 1), padding) * a).sum()
            x0[idx] = 0
        return out
    if s == (2, 2, 1):
        check_forward(build, want, v, f)
    check_gradients(build, v, f)


def test_conv3d_backprop_ops_match_tv_gradients():
    x, f = RS.rand(2, 4, 5, 3, 2), RS.rand(3, 2, 2, 2, 3)
    xt, ft = tv.constant(x), tv.constant(f)
    y = tv.nn.conv3d(xt, ft, [1, 2, 1, 2, 1], "SAME")
    g = tv.constant(RS.rand(*run(y).shape))
    dx, df = tv.gradients(y, [xt, ft], grad_ys=g)
    bf = tv.nn.conv3d_backprop_filter_v2(xt, [3, 2, 2, 2, 3], g, [1, 2, 1, 2, 1], "SAME")
    bi = tv.nn.conv3d_transpose(g, ft, [2, 4, 5, 3, 2], [1, 2, 1, 2, 1], "SAME")
    got = run([dx, df, bf, bi])
    np.testing.assert_allclose(got[2], got[1], rtol=1e-12)
    np.testing.assert_allclose(got[3], got[0], rtol=1e-12)


@pytest.mark.parametrize("kind", ["max", "avg"])
@pytest.mark.parametrize("k,s,padding", [((2, 2, 2), (2, 2, 2), "VALID"),
                                         ((3, 2, 2), (1, 2, 1), "SAME"),
                                         ((2, 3, 1), (2, 1, 3), "SAME")])
def test_pool3d_matches_a_per_window_reference_and_its_gradients(kind, k, s, padding):
    fn = tv.nn.max_pool3d if kind == "max" else tv.nn.avg_pool3d
    x = RS.permutation(2 * 5 * 4 * 6 * 2).reshape(2, 5, 4, 6, 2) / 7.0  # no ties

    def build(a):
        return fn(a, [1, *k, 1], [1, *s, 1], padding)
    check_forward(build, lambda a: ref_pool3d(a, k, s, padding, kind), x)
    check_gradients(build, x[:1, :4, :4, :4])
    nc = check_forward(lambda a: fn(a, k, s, padding, data_format="NCDHW"),
                       lambda a: ref_pool3d(a.transpose(0, 2, 3, 4, 1), k, s, padding,
                                            kind).transpose(0, 4, 1, 2, 3),
                       x.transpose(0, 4, 1, 2, 3))
    assert nc.shape[1] == 2


def test_max_pool3d_gradient_goes_to_the_first_maximum_and_has_second_order():
    x = np.ones((1, 2, 2, 2, 1))
    xt = tv.constant(x)
    y = tv.nn.max_pool3d(xt, [1, 2, 2, 2, 1], [1, 2, 2, 2, 1], "VALID")
    (dx,) = tv.gradients(y, [xt])
    assert run(dx).ravel().tolist() == [1, 0, 0, 0, 0, 0, 0, 0]  # as TF

    def second(a):  # MaxPool3DGrad's gradient wrt its grad: MaxPool3DGradGrad
        y = tv.nn.max_pool3d(a, 2, 1, "SAME")
        (ga,) = tv.gradients(tv.reduce_sum(y * y), [a])
        return ga * ga
    check_gradients(second, RS.permutation(2 * 3 * 2 * 3).reshape(1, 2, 3, 2, 3) / 5.0)


def ref_max_pool3d_grad(x, g, k, s, padding):
    """Each window's output gradient added at its first maximum (row-major), as TF."""
    n, *sp, c = x.shape
    geos = [geo(e, kk, ss, 1, padding) for e, kk, ss in zip(sp, k, s)]
    dx = np.zeros_like(x)
    for b, ch in itertools.product(range(n), range(c)):
        for pos in itertools.product(*(range(o) for o, _ in geos)):
            best, at = None, None
            for tap in itertools.product(*(range(kk) for kk in k)):
                q = tuple(p * ss + t - p0 for p, t, ss, (_, p0) in zip(pos, tap, s, geos))
                if all(0 <= a < e for a, e in zip(q, sp)) and (best is None or
                                                               x[(b, *q, ch)] > best):
                    best, at = x[(b, *q, ch)], q
            dx[(b, *at, ch)] += g[(b, *pos, ch)]
    return dx


@pytest.mark.parametrize("k,s,padding,shape", [((2, 2, 2), (2, 2, 2), "VALID", (2, 4, 6, 4, 3)),
                                               ((2, 2, 1), (1, 2, 1), "SAME", (1, 3, 4, 3, 2))])
def test_max_pool3d_gradient_with_ties_goes_to_each_first_maximum(k, s, padding, shape):
    x = np.round(RS.rand(*shape) * 2)  # many ties; the first window shape tiles the input
    xt = tv.constant(x)
    y = tv.nn.max_pool3d(xt, [1, *k, 1], [1, *s, 1], padding)
    g = RS.rand(*y.shape.as_list())
    (dx,) = tv.gradients(y, [xt], grad_ys=tv.constant(g))
    np.testing.assert_allclose(run(dx), ref_max_pool3d_grad(x, g, k, s, padding), rtol=1e-12)


def test_avg_pool3d_same_counts_only_unpadded_elements():
    x = np.arange(27, dtype=np.float32).reshape(1, 3, 3, 3, 1)
    got = run(tv.nn.avg_pool3d(x, [1, 2, 2, 2, 1], [1, 2, 2, 2, 1], "SAME")).ravel()
    assert got.tolist() == [6.5, 8.0, 11.0, 12.5, 20.0, 21.5, 24.5, 26.0]  # TF 2.21's values


def test_conv3d_and_pool3d_bad_inputs():
    x, f = np.ones((1, 3, 3, 3, 2), np.float32), np.ones((2, 2, 2, 3, 1), np.float32)
    with pytest.raises(IAE, match=r"Depth of input \(2\) is not a multiple of input depth of "
                                  r"filter \(3\)"):
        tv.nn.conv3d(x, f, [1, 1, 1, 1, 1], "VALID")
    f = np.ones((2, 2, 2, 2, 1), np.float32)
    with pytest.raises(IAE, match="Attr 'strides' of 'Conv3D' Op passed list of length 4 less "
                                  "than minimum 5"):
        tv.nn.conv3d(x, f, [1, 1, 1, 1], "VALID")
    with pytest.raises(tv.errors.UnimplementedError, match="does not yet support strides in the "
                                                           "batch and depth dimensions"):
        tv.nn.conv3d(x, f, [2, 1, 1, 1, 1], "VALID")
    with pytest.raises(IAE, match="Attr 'padding' of 'Conv3D' Op passed string 'FOO'"):
        tv.nn.conv3d(x, f, [1, 1, 1, 1, 1], "FOO")
    with pytest.raises(IAE, match="Shape must be rank 5 but is rank 4"):
        tv.nn.conv3d(x[0], f, [1, 1, 1, 1, 1], "VALID")
    with pytest.raises(IAE, match="Negative dimension size caused by subtracting 4 from 3"):
        tv.nn.conv3d(x, np.ones((4, 2, 2, 2, 1), np.float32), [1, 1, 1, 1, 1], "VALID")
    with pytest.raises(IAE, match="Conv3D expects floating-point tensors, got int32"):
        tv.nn.conv3d(x.astype(np.int32), f.astype(np.int32), [1] * 5, "VALID")
    with pytest.raises(IAE, match="Attr 'data_format' of 'MaxPool3D' Op passed string 'NCHW'"):
        tv.nn.max_pool3d(x, [1, 2, 2, 2, 1], [1] * 5, "VALID", data_format="NCHW")
    with pytest.raises(IAE, match="Negative dimension size caused by subtracting 4 from 3"):
        tv.nn.max_pool3d(x, [1, 4, 2, 2, 1], [1] * 5, "VALID")
    with pytest.raises(tv.errors.UnimplementedError, match="Pooling is not yet supported on the "
                                                           "batch dimension"):
        tv.nn.max_pool3d(x, [2, 2, 2, 2, 1], [1] * 5, "VALID")
    with pytest.raises(IAE, match=r"ksize should be of length 1, 3 or 5. Received: "
                                  r"ksize=\[1, 2, 2, 2\] of length 4"):
        tv.nn.avg_pool3d(x, [1, 2, 2, 2], [1] * 5, "VALID")
    with pytest.raises(IAE, match="Conv3DBackpropInputOp: Size of out_backprop doesn't match "
                                  "computed: actual = 2, computed = 4 spatial_dim: 1 input: 5 "
                                  "filter: 2 output: 2 stride: 1 dilation: 1"):
        tv.nn.conv3d_transpose(np.ones((1, 2, 2, 2, 1), np.float32),
                               np.ones((2, 2, 2, 1, 1), np.float32), [1, 5, 5, 5, 1], [1] * 5,
                               "VALID")
    with pytest.raises(ValueError, match="output_shape does not match filter's output channels, "
                                         "1 != 2"):
        tv.nn.conv3d_transpose(np.ones((1, 2, 2, 2, 1), np.float32),
                               np.ones((2, 2, 2, 2, 1), np.float32), [1, 3, 3, 3, 1], [1] * 5,
                               "VALID")


def test_conv3d_transpose_with_a_dynamic_output_shape_checks_at_run_time():
    shp = tv.placeholder(tv.int32, [5])
    y = tv.nn.conv3d_transpose(tv.ones([1, 2, 2, 2, 1]), tv.ones([2, 2, 2, 1, 1]), shp, [1] * 5,
                               "VALID")
    with tv.Session() as s:
        assert s.run(y, {shp: [1, 3, 3, 3, 1]}).shape == (1, 3, 3, 3, 1)
        with pytest.raises(IAE, match="Size of out_backprop doesn't match computed: actual = 2, "
                                      "computed = 4"):
            s.run(y, {shp: [1, 5, 5, 5, 1]})


@pytest.fixture
def cpu_backend(monkeypatch):
    """Choose the CPU kernel backend for one test (and leave the process's choice as it was)."""
    from tensorvm.vm.kernels import cpu_accel
    monkeypatch.delenv(cpu_accel.ENV, raising=False)
    yield cpu_accel.set_backend
    cpu_accel.set_backend(None)


@pytest.mark.parametrize("df,s,d,padding", [("NDHWC", (1, 1, 1), (1, 1, 1), "SAME"),
                                            ("NDHWC", (2, 1, 2), (1, 1, 1), "SAME"),
                                            ("NCDHW", (1, 2, 1), (1, 1, 1), "VALID"),
                                            ("NDHWC", (1, 1, 1), (2, 1, 1), "SAME")])
def test_conv3d_float32_on_torch_equals_the_im2col_kernels(cpu_backend, monkeypatch, df, s, d,
                                                           padding):
    from tensorvm.vm.kernels import cpu_accel
    from tensorvm.ops.nn import nn_conv3d_accel
    if not cpu_accel.available():
        pytest.skip("PyTorch is not installed: the accelerated CPU kernels are not used here")
    seen = []
    for name in ("conv3d", "conv3d_backprop_input", "conv3d_backprop_filter"):
        real = getattr(nn_conv3d_accel, name)
        monkeypatch.setattr(nn_conv3d_accel, name,
                            lambda *a, _r=real, _n=name: seen.append(_n) or _r(*a))
    x = RS.rand(2, 5, 6, 4, 3).astype(np.float32)  # even and uneven SAME paddings
    if df == "NCDHW":
        x = x.transpose(0, 4, 1, 2, 3).copy()
    f = RS.rand(2, 3, 2, 3, 4).astype(np.float32)
    xt, ft = tv.constant(x), tv.constant(f)
    y = tv.nn.conv3d(xt, ft, [1, *s, 1] if df == "NDHWC" else [1, 1, *s], padding,
                     data_format=df, dilations=[1, *d, 1] if df == "NDHWC" else [1, 1, *d])
    w = tv.constant(RS.rand(*y.shape.as_list()).astype(np.float32))
    fetches = [y, *tv.gradients(tv.reduce_sum(y * w), [xt, ft])]
    got = {}
    for b in ("torch", "numpy"):
        cpu_backend(b)
        got[b] = run(fetches)
    assert sorted(set(seen)) == ["conv3d", "conv3d_backprop_filter", "conv3d_backprop_input"]
    for a, b in zip(got["torch"], got["numpy"]):
        np.testing.assert_allclose(a, b, rtol=2e-5, atol=2e-5)


@pytest.mark.parametrize("df", ["NDHWC", "NCDHW"])
def test_max_pool3d_float32_gradient_on_torch_equals_the_numpy_kernel(cpu_backend, monkeypatch,
                                                                      df):
    from tensorvm.vm.kernels import cpu_accel
    from tensorvm.ops.nn import nn_conv3d_accel
    if not cpu_accel.available():
        pytest.skip("PyTorch is not installed: the accelerated CPU kernels are not used here")
    seen = []
    real = nn_conv3d_accel.max_pool3d_grad
    monkeypatch.setattr(nn_conv3d_accel, "max_pool3d_grad",
                        lambda *a: seen.append(1) or real(*a))
    x = np.round(RS.rand(2, 4, 6, 4, 3) * 3).astype(np.float32)  # ties: the first maximum
    if df == "NCDHW":
        x = x.transpose(0, 4, 1, 2, 3).copy()
    xt = tv.constant(x)
    k = [1, 2, 2, 2, 1] if df == "NDHWC" else [1, 1, 2, 2, 2]
    y = tv.nn.max_pool3d(xt, k, k, "VALID", data_format=df)
    g = tv.constant(RS.rand(*y.shape.as_list()).astype(np.float32))
    (dx,) = tv.gradients(y, [xt], grad_ys=g)
    got = {}
    for b in ("torch", "numpy"):
        cpu_backend(b)
        got[b] = run(dx)
    assert seen
    np.testing.assert_array_equal(got["torch"], got["numpy"])


# ---- the public 2-D and 1-D gradient functions -----------------------------------------------
def ref_conv2d(x, f, s, padding):
    return ref_conv3d(x[:, None], f[None], (1, *s), (1, 1, 1), padding)[:, 0]


@pytest.mark.parametrize("s,padding", [((1, 1), "SAME"), ((2, 1), "VALID"), ((2, 2), "SAME")])
def test_conv2d_backprop_input_and_filter_are_conv2d_gradients(s, padding):
    x, f = RS.rand(2, 5, 6, 3), RS.rand(3, 2, 3, 4)
    xt, ft = tv.constant(x), tv.constant(f)
    y = tv.nn.conv2d(xt, ft, [1, *s, 1], padding)
    g = RS.rand(*run(y).shape)
    dx, df = tv.gradients(y, [xt, ft], grad_ys=tv.constant(g))
    bi = tv.nn.conv2d_backprop_input([2, 5, 6, 3], ft, g, [1, *s, 1], padding)
    sizes = tv.placeholder(tv.int32, [4])  # sizes known only when it runs
    bf = tv.nn.conv2d_backprop_filter(xt, sizes, g, [1, *s, 1], padding)
    with tv.Session() as sess:
        got = sess.run([dx, df, bi, bf], {sizes: [3, 2, 3, 4]})
    np.testing.assert_allclose(got[2], got[0], rtol=1e-12)
    np.testing.assert_allclose(got[3], got[1], rtol=1e-12)
    # and the gradient of each, against central differences
    check_gradients(lambda a, b: tv.nn.conv2d_backprop_input([1, 5, 6, 3], a, b, [1, *s, 1],
                                                             padding),
                    RS.rand(3, 2, 3, 4), g[:1])
    check_gradients(lambda a, b: tv.nn.conv2d_backprop_filter(a, [3, 2, 3, 4], b, [1, *s, 1],
                                                              padding),
                    RS.rand(1, 5, 6, 3), g[:1])


def test_conv2d_backprop_bad_sizes_are_tf_errors():
    with pytest.raises(IAE, match="Conv2DCustomBackpropInput: Size of out_backprop doesn't "
                                  "match computed: actual = 2, computed = 3 spatial_dim: 1 "
                                  "input: 5 filter: 3 output: 2 stride: 1 dilation: 1"):
        tv.nn.conv2d_backprop_input([1, 5, 5, 1], np.ones((3, 3, 1, 1)), np.ones((1, 2, 2, 1)),
                                    [1, 1, 1, 1], "VALID")
    with pytest.raises(IAE, match="Conv2DCustomBackpropFilter: Size of out_backprop doesn't "
                                  "match computed: actual = 2, computed = 3"):
        tv.nn.conv2d_backprop_filter(np.ones((1, 5, 5, 1)), [3, 3, 1, 1], np.ones((1, 2, 2, 1)),
                                     [1, 1, 1, 1], "VALID")


@pytest.mark.parametrize("stride,padding,width", [(1, "VALID", 6), (2, "SAME", 8),
                                                  (2, "VALID", 9)])
def test_conv1d_transpose_is_conv1d_s_input_gradient(stride, padding, width):
    v, f = RS.rand(2, {6: 5, 8: 4, 9: 4}[width], 3), RS.rand(2, 4, 3)  # filter [KW, out, in]

    def build(a, b):
        return tv.nn.conv1d_transpose(a, b, [2, width, 4], stride, padding)

    def want(a, b):
        out = np.zeros((2, width, 4))
        x0 = np.zeros_like(out)
        for idx in itertools.product(*(range(e) for e in out.shape)):
            x0[idx] = 1
            out[idx] = (ref_conv2d(x0[:, None], b[None], (1, stride), padding)[:, 0] * a).sum()
            x0[idx] = 0
        return out
    check_forward(build, want, v, f)
    check_gradients(build, v, f)
    ncw = tv.nn.conv1d_transpose(v.transpose(0, 2, 1), f, [2, 4, width], stride, padding,
                                 data_format="NCW")
    np.testing.assert_allclose(run(ncw), want(v, f).transpose(0, 2, 1), rtol=1e-12)


def test_conv_transpose_dispatches_on_the_output_rank():
    v = np.ones((1, 2, 2, 1))
    got = run(tv.nn.conv_transpose(v, np.ones((2, 2, 1, 1)), [1, 4, 4, 1], 2, "VALID"))
    assert got.shape == (1, 4, 4, 1) and got.sum() == 16
    with pytest.raises(ValueError, match="output_shape must be of length 3, 4 or 5 but was 2"):
        tv.nn.conv_transpose(v, np.ones((2, 2, 1, 1)), [4, 4], 2, "VALID")


def test_conv2d_backprop_depth_mismatch_is_refused():
    with pytest.raises(IAE, match="Conv2DCustomBackpropInput: input and filter must have the "
                                  "same depth: 4 vs 3"):
        tv.nn.conv2d_backprop_input([2, 6, 4, 4], np.ones((2, 2, 3, 4)), np.ones((2, 3, 4, 4)),
                                    [1, 2, 1, 1], "SAME")


# ---- max_pool_with_argmax ----------------------------------------------------------------------
def ref_argmax_pool(x, k, s, padding, include_batch):
    n, h, w, c = x.shape
    (oh, pt), (ow, pl) = geo(h, k[0], s[0], 1, padding), geo(w, k[1], s[1], 1, padding)
    out, arg = np.zeros((n, oh, ow, c)), np.zeros((n, oh, ow, c), np.int64)
    for b, i, j, ch in itertools.product(range(n), range(oh), range(ow), range(c)):
        best = None
        for a, e in itertools.product(range(k[0]), range(k[1])):
            y, xx = i * s[0] + a - pt, j * s[1] + e - pl
            if 0 <= y < h and 0 <= xx < w and (best is None or x[b, y, xx, ch] > best):
                best = x[b, y, xx, ch]
                arg[b, i, j, ch] = ((b * h + y) * w + xx) * c + ch if include_batch else \
                    (y * w + xx) * c + ch
        out[b, i, j, ch] = best
    return out, arg


@pytest.mark.parametrize("k,s,padding,include_batch", [((2, 2), (2, 2), "VALID", False),
                                                       ((3, 2), (1, 2), "SAME", True),
                                                       ((2, 3), (2, 1), "SAME", False)])
def test_max_pool_with_argmax_matches_a_per_window_reference(k, s, padding, include_batch):
    x = np.round(RS.rand(2, 5, 6, 3) * 4)  # ties: the first maximum, row-major, wins
    y, arg = tv.nn.max_pool_with_argmax(x, [1, *k, 1], [1, *s, 1], padding,
                                        include_batch_in_index=include_batch)
    got_y, got_arg = run([y, arg])
    want_y, want_arg = ref_argmax_pool(x, k, s, padding, include_batch)
    np.testing.assert_array_equal(got_y, want_y)
    np.testing.assert_array_equal(got_arg, want_arg)
    assert got_arg.dtype == np.int64
    xu = RS.permutation(2 * 4 * 5 * 2).reshape(2, 4, 5, 2) / 3.0

    def build(a):
        return tv.nn.max_pool_with_argmax(a, [1, *k, 1], [1, *s, 1], padding,
                                          include_batch_in_index=include_batch)[0]
    check_gradients(build, xu)

    def second(a):  # MaxPoolGradWithArgmax's gradient (MaxPoolGradGradWithArgmax)
        (ga,) = tv.gradients(tv.reduce_sum(build(a) ** 2), [a])
        return ga * ga
    check_gradients(second, xu)


def test_max_pool_with_argmax_dtype_and_errors():
    x = np.ones((1, 4, 4, 1), np.float32)
    _, arg = tv.nn.max_pool_with_argmax(x, [1, 2, 2, 1], [1, 2, 2, 1], "VALID", Targmax=tv.int32)
    assert arg.dtype == tv.int32 and run(arg).dtype == np.int32
    with pytest.raises(IAE, match="`data_format` values other  than 'NHWC' are not supported"):
        tv.nn.max_pool_with_argmax(x, [1, 2, 2, 1], [1, 1, 1, 1], "SAME", data_format="NCHW")
    with pytest.raises(IAE, match="Attr 'ksize' of 'MaxPoolWithArgmax' Op passed list of length "
                                  "2 less than minimum 4"):
        tv.nn.max_pool_with_argmax(x, [2, 2], [1, 1, 1, 1], "SAME")
    with pytest.raises(IAE, match="Computed output size would be negative"):
        tv.nn.max_pool_with_argmax(x, [1, 5, 2, 1], [1, 1, 1, 1], "VALID")


# ---- dilation2d / erosion2d ---------------------------------------------------------------------
def ref_dilation(x, f, s, r, padding):
    n, h, w, c = x.shape
    kh, kw, _ = f.shape
    (oh, pt), (ow, pl) = geo(h, kh, s[0], r[0], padding), geo(w, kw, s[1], r[1], padding)
    out = np.full((n, oh, ow, c), -np.inf)
    for i, j, a, b in itertools.product(range(oh), range(ow), range(kh), range(kw)):
        y, xx = i * s[0] + a * r[0] - pt, j * s[1] + b * r[1] - pl
        if 0 <= y < h and 0 <= xx < w:
            out[:, i, j] = np.maximum(out[:, i, j], x[:, y, xx] + f[a, b])
    return out


@pytest.mark.parametrize("s,r,padding", [((1, 1), (1, 1), "SAME"), ((2, 1), (1, 2), "SAME"),
                                         ((1, 2), (2, 1), "VALID")])
def test_dilation2d_and_erosion2d_match_a_per_window_reference(s, r, padding):
    x, f = RS.rand(2, 6, 7, 2), RS.rand(2, 3, 2)

    def dil(a, b):
        return tv.nn.dilation2d(a, b, [1, *s, 1], [1, *r, 1], padding)

    def ero(a, b):
        return tv.nn.erosion2d(a, b, [1, *s, 1], [1, *r, 1], padding)
    check_forward(dil, lambda a, b: ref_dilation(a, b, s, r, padding), x, f)
    check_forward(ero, lambda a, b: -ref_dilation(-a, b[::-1, ::-1], s, r, padding), x, f)
    check_gradients(dil, x[:1], f)
    check_gradients(ero, x[:1], f)


def test_dilation2d_errors():
    x, f = np.ones((1, 10, 9, 1)), np.ones((2, 3, 1))
    with pytest.raises(IAE, match="Attr 'padding' of 'Dilation2D' Op passed string 'FOO'"):
        tv.nn.dilation2d(x, f, [1, 2, 1, 1], [1, 1, 2, 1], "FOO")
    with pytest.raises(IAE, match="Shape must be rank 3 but is rank 4 for filter"):
        tv.nn.dilation2d(x, f[..., None], [1, 1, 1, 1], [1, 1, 1, 1], "SAME")
    with pytest.raises(IAE, match="Dimensions must be equal, but are 1 and 2"):
        tv.nn.dilation2d(x, np.ones((2, 3, 2)), [1, 1, 1, 1], [1, 1, 1, 1], "SAME")
    with pytest.raises(IAE, match=r"Computed output size would be negative: -9 \[input_size: "
                                  r"10, effective_filter_size: 20, stride: 1\]"):
        tv.nn.dilation2d(x, np.ones((20, 3, 1)), [1, 1, 1, 1], [1, 1, 1, 1], "VALID")


# ---- fractional pooling -------------------------------------------------------------------------
def ref_fractional(x, rows, cols, overlapping, kind):
    n, h, w, c = x.shape
    out = np.zeros((n, len(rows) - 1, len(cols) - 1, c))
    for i, j in itertools.product(range(len(rows) - 1), range(len(cols) - 1)):
        r1 = min(rows[i + 1] + (1 if overlapping else 0), h)
        c1 = min(cols[j + 1] + (1 if overlapping else 0), w)
        box = x[:, rows[i]:r1, cols[j]:c1].reshape(n, -1, c)
        out[:, i, j] = box.max(1) if kind == "max" else box.mean(1)
    return out


def check_sequence(seq, n_in, n_out):
    steps = np.diff(seq)
    assert seq[0] == 0 and seq[-1] == n_in and len(seq) == n_out + 1
    assert set(steps.tolist()) <= {n_in // n_out, n_in // n_out + 1}


@pytest.mark.parametrize("kind", ["max", "avg"])
@pytest.mark.parametrize("pseudo_random,overlapping", [(False, False), (True, False),
                                                       (False, True), (True, True)])
def test_fractional_pool_matches_a_per_box_reference(kind, pseudo_random, overlapping):
    fn = tv.nn.fractional_max_pool if kind == "max" else tv.nn.fractional_avg_pool
    x = RS.permutation(2 * 10 * 9 * 2).reshape(2, 10, 9, 2) / 7.0
    y, rows, cols = fn(x, [1, 1.44, 1.73, 1], pseudo_random, overlapping, deterministic=True,
                       seed=1, seed2=2)
    got, r, c = run([y, rows, cols])
    assert got.shape == (2, 6, 5, 2)
    check_sequence(r, 10, 6)
    check_sequence(c, 9, 5)
    np.testing.assert_allclose(got, ref_fractional(x, r, c, overlapping, kind), rtol=1e-12)
    # deterministic: the same boxes every run, and the gradient through them
    check_gradients(lambda a: fn(a, [1, 1.44, 1.73, 1], pseudo_random, overlapping,
                                 deterministic=True, seed=1, seed2=2)[0], x[:1, :7, :6])


def test_fractional_pool_draws_per_run_repeatably_under_a_graph_seed():
    x = RS.rand(1, 17, 17, 1)

    def draws():
        with tv.Graph().as_default():
            tv.set_random_seed(5)
            _, rows, _ = tv.nn.fractional_max_pool(x, [1, 1.6, 1.6, 1])
            with tv.Session() as s:
                return [tuple(s.run(rows)) for _ in range(6)]
    first = draws()
    assert first == draws()  # the graph seed repeats the sequence of draws
    assert len(set(first)) > 1  # a new draw each run
    for r in first:
        check_sequence(np.array(r), 17, 10)


def test_fractional_pool_errors():
    x = np.ones((1, 10, 9, 1))
    with pytest.raises(IAE, match="Both seed and seed2 should be 0 if deterministic is false"):
        tv.nn.fractional_max_pool(x, [1, 1.5, 1.5, 1], seed=3)
    with pytest.raises(IAE, match="pooling_ratio cannot be smaller than 1, got: 0.5"):
        tv.nn.fractional_max_pool(x, [1, 0.5, 1.5, 1])
    with pytest.raises(tv.errors.UnimplementedError,
                       match="Fractional average pooling is not yet supported on the batch nor "
                             "channel dimension"):
        tv.nn.fractional_avg_pool(x, [1, 1.5, 1.5, 2])
    with pytest.raises(IAE, match="Attr 'pooling_ratio' of 'FractionalMaxPool' Op passed list "
                                  "of length 3 less than minimum 4"):
        tv.nn.fractional_max_pool(x, [1.5, 1.5, 1])
    with pytest.raises(IAE, match="Pooling ratio is higher than input dimension size for "
                                  "dimension 1. Input dim size: 10 pooling ratio: 20"):
        run(tv.nn.fractional_max_pool(x, [1, 20, 1.5, 1])[0])


# ---- pool, with_space_to_batch ------------------------------------------------------------------
def ref_pool_nd(x, window, kind, padding, rate, strides):
    """Channels-last N-D pooling with dilated windows (unpadded elements only)."""
    n, *sp, c = x.shape
    g = [geo(e, k, s, r, padding) for e, k, s, r in zip(sp, window, strides, rate)]
    out = np.zeros((n, *(o for o, _ in g), c))
    for pos in itertools.product(*(range(o) for o, _ in g)):
        vals = []
        for tap in itertools.product(*(range(k) for k in window)):
            at = [p * s + t * r - p0 for p, t, s, r, (_, p0) in zip(pos, tap, strides, rate, g)]
            if all(0 <= a < e for a, e in zip(at, sp)):
                vals.append(x[(slice(None), *at)])
        v = np.stack(vals, 1)
        out[(slice(None), *pos)] = v.max(1) if kind == "MAX" else v.mean(1)
    return out


@pytest.mark.parametrize("shape,window,kind,padding,rate,strides", [
    ((2, 9, 2), [2], "MAX", "SAME", [1], [2]),
    ((2, 9, 2), [3], "AVG", "VALID", [2], [1]),
    ((1, 7, 8, 2), [2, 3], "MAX", "VALID", [2, 2], [1, 1]),
    ((1, 7, 8, 2), [2, 2], "AVG", "SAME", [1, 1], [2, 1]),
    ((1, 5, 6, 4, 1), [2, 2, 2], "AVG", "VALID", [2, 1, 1], [1, 1, 1]),
])
def test_pool_matches_a_dilated_window_reference(shape, window, kind, padding, rate, strides):
    x = RS.permutation(int(np.prod(shape))).reshape(shape) / 5.0

    def build(a):
        return tv.nn.pool(a, window, kind, padding, dilation_rate=rate, strides=strides)
    check_forward(build, lambda a: ref_pool_nd(a, window, kind, padding, rate, strides), x)
    check_gradients(build, x)
    nc = tv.nn.pool(np.moveaxis(x, -1, 1), window, kind, padding, dilation_rate=rate,
                    strides=strides, data_format="NC" + "DHW"[3 - len(window):])
    np.testing.assert_allclose(np.moveaxis(run(nc), 1, -1),
                               ref_pool_nd(x, window, kind, padding, rate, strides), rtol=1e-12)


def test_pool_errors_are_tf_s():
    x = np.ones((1, 10, 9, 1))
    with pytest.raises(ValueError, match="pooling with 'SAME' padding is not implemented for "
                                         "`dilation_rate` > 1"):
        tv.nn.pool(x, [2, 2], "MAX", "SAME", dilation_rate=[2, 2])
    with pytest.raises(ValueError, match="`strides > 1` not supported in conjunction with "
                                         "`dilation_rate > 1`"):
        tv.nn.pool(x, [2, 2], "MAX", "VALID", dilation_rate=[2, 2], strides=[2, 2])
    with pytest.raises(ValueError, match="2-D FOO pooling is not supported"):
        tv.nn.pool(x, [2, 2], "FOO", "SAME")
    with pytest.raises(ValueError, match=r"Shape \(1, 10, 9, 1\) must have rank 5"):
        tv.nn.pool(x, [2, 2, 2], "MAX", "SAME")


def test_with_space_to_batch_same_padding_is_a_dilated_convolution():
    x, f = RS.rand(1, 7, 6, 2), RS.rand(3, 2, 2, 3)

    def op(inp, _n, pad):
        return tv.nn.conv2d(inp, f, [1, 1, 1, 1], pad)
    got = run(tv.nn.with_space_to_batch(x, [2, 3], "SAME", op, filter_shape=[3, 2]))
    want = run(tv.nn.conv2d(x, f, [1, 1, 1, 1], "SAME", dilations=[1, 2, 3, 1]))
    np.testing.assert_allclose(got, want, rtol=1e-12)
    with pytest.raises(ValueError, match="`filter_shape` must be specified for `padding='SAME'`"):
        tv.nn.with_space_to_batch(x, [2, 3], "SAME", op)


# ---- raw_rnn, static_state_saving_rnn -----------------------------------------------------------
def ref_rnn(x, seq, kernel, bias, h0):
    """BasicRNNCell over time-major ``x``: rows past their length emit zeros, keep state."""
    h, outs = h0.copy(), []
    for t in range(x.shape[0]):
        new = np.tanh(np.concatenate([x[t], h], 1) @ kernel + bias)
        done = (t >= seq)[:, None]
        outs.append(np.where(done, 0, new))
        h = np.where(done, h, new)
    return np.stack(outs), h


def test_raw_rnn_matches_a_reference_recurrence_with_loop_state_and_gradients():
    x = RS.rand(4, 2, 3)
    seq = np.array([4, 2], np.int32)

    def build(xt):
        cell = tv.nn.rnn_cell.BasicRNNCell(5, dtype=tv.float64)

        def loop_fn(time, cell_output, cell_state, loop_state):
            state = cell.zero_state(2, tv.float64) if cell_output is None else cell_state
            count = tv.constant(0) if loop_state is None else loop_state + 1  # steps taken
            finished = time >= seq
            inp = tv.cond(tv.reduce_all(finished), lambda: tv.zeros([2, 3], tv.float64),
                          lambda: xt[tv.minimum(time, 3)])
            return finished, inp, state, cell_output, count
        ta, state, count = tv.nn.raw_rnn(cell, loop_fn, scope="raw")
        return ta.stack(), state, count
    w = RS.rand(4, 2, 5)
    with tv.Graph().as_default():
        xt = tv.constant(x)
        out, state, count = build(xt)
        (dx,) = tv.gradients(tv.reduce_sum(out * w), [xt])
        with tv.Session() as s:
            s.run(tv.global_variables_initializer())
            got_out, got_state, got_count, got_dx, (kernel, bias) = s.run(
                [out, state, count, dx, tv.trainable_variables()])
    want_out, want_state = ref_rnn(x, seq, kernel, bias, np.zeros((2, 5)))
    np.testing.assert_allclose(got_out, want_out, rtol=1e-12)
    np.testing.assert_allclose(got_state, want_state, rtol=1e-12)
    assert got_count == 4
    # the gradient through the loop, against central differences of the reference
    want_dx = numeric_grad(lambda a: float((ref_rnn(a, seq, kernel, bias,
                                                    np.zeros((2, 5)))[0] * w).sum()), x)
    np.testing.assert_allclose(got_dx, want_dx, rtol=1e-5, atol=1e-7)


def test_raw_rnn_loop_fn_errors():
    cell = tv.nn.rnn_cell.BasicRNNCell(2)
    with pytest.raises(IAE, match="loop_fn's finished must be bool, got int32"):
        tv.nn.raw_rnn(cell, lambda t, o, s, ls: (tv.zeros([1], tv.int32), tv.zeros([1, 2]),
                                                 cell.zero_state(1, tv.float32), None, None))
    with pytest.raises(TypeError, match="loop_fn must be a callable"):
        tv.nn.raw_rnn(cell, None)


class _VariableSaver:
    """A state saver keeping each named state in a variable (contrib's saver's interface)."""

    def __init__(self, shapes):
        self.vars = {n: tv.Variable(np.full(s, 0.5), name=n) for n, s in shapes.items()}

    def state(self, name):
        return self.vars[name].read_value()

    def save_state(self, name, value):
        return tv.assign(self.vars[name], value)


def test_static_state_saving_rnn_reads_and_saves_the_state():
    x = [RS.rand(2, 3) for _ in range(3)]
    cell = tv.nn.rnn_cell.BasicLSTMCell(4, dtype=tv.float64)
    saver = _VariableSaver({"c": (2, 4), "h": (2, 4)})
    outs, state = tv.nn.static_state_saving_rnn(cell, [tv.constant(v) for v in x], saver,
                                                ("c", "h"))
    with tv.Session() as s:
        s.run(tv.global_variables_initializer())
        first = s.run([outs[-1], state])
        saved = s.run([saver.vars["c"], saver.vars["h"]])
        np.testing.assert_allclose(saved[0], first[1].c, rtol=1e-12)
        np.testing.assert_allclose(saved[1], first[1].h, rtol=1e-12)
        second = s.run(outs[-1])  # starts from the saved state: a different result
        assert not np.allclose(second, first[0])
    with pytest.raises(ValueError, match="state_name should be the same type as "
                                         "cell.state_size"):
        tv.nn.static_state_saving_rnn(cell, [tv.constant(v) for v in x], saver, "c")


# ---- the small rest (nn_misc_ext) ---------------------------------------------------------------
def test_atrous_conv2d_transpose_is_the_adjoint_of_a_dilated_conv2d():
    v, f = RS.rand(1, 6, 5, 2), RS.rand(3, 2, 3, 2)  # filters [KH, KW, out, in]

    def build(a, b):
        return tv.nn.atrous_conv2d_transpose(a, b, [1, 10, 7, 3], 2, "VALID")

    def want(a, b):  # element i is <atrous_conv2d(e_i, f), v>
        out, x0 = np.zeros((1, 10, 7, 3)), np.zeros((1, 10, 7, 3))
        for idx in itertools.product(*(range(e) for e in out.shape)):
            x0[idx] = 1
            dil = ref_conv3d(x0[:, None], b[None], (1, 1, 1), (1, 2, 2), "VALID")[:, 0]
            out[idx] = (dil * a).sum()
            x0[idx] = 0
        return out
    check_forward(build, want, v, f)
    check_gradients(build, v, f)
    with pytest.raises(ValueError, match="rate 0 cannot be less than one"):
        tv.nn.atrous_conv2d_transpose(v, f, [1, 10, 7, 3], 0, "VALID")


def test_batch_norm_with_global_normalization_and_average_losses():
    t = RS.rand(2, 3, 4)
    got = run([tv.nn.batch_norm_with_global_normalization(t, 0.3, 2.0, 0.1, 3.0, 1e-3, True),
               tv.nn.batch_norm_with_global_normalization(t, 0.3, 2.0, 0.1, 3.0, 1e-3, False),
               tv.nn.compute_average_loss(t[:, 0, 0], sample_weight=2.0),
               tv.nn.compute_average_loss(t[:, 0, 0], global_batch_size=8),
               tv.nn.scale_regularization_loss(t[0])])
    np.testing.assert_allclose(got[0], (t - 0.3) / np.sqrt(2.001) * 3.0 + 0.1, rtol=1e-12)
    np.testing.assert_allclose(got[1], (t - 0.3) / np.sqrt(2.001) + 0.1, rtol=1e-12)
    np.testing.assert_allclose(got[2], (t[:, 0, 0] * 2).sum() / 2, rtol=1e-12)
    np.testing.assert_allclose(got[3], t[:, 0, 0].sum() / 8, rtol=1e-12)
    np.testing.assert_allclose(got[4], t[0].sum(), rtol=1e-12)
    with pytest.raises(ValueError, match="Expected a tensor with at least rank 1"):
        tv.nn.compute_average_loss(3.0)
    with pytest.raises(tv.errors.InvalidArgumentError, match="global_batch_size must be positive"):
        run(tv.nn.compute_average_loss(t[:, 0, 0], global_batch_size=0))


def test_collapse_repeated_and_ctc_unique_labels():
    lab = np.array([[1, 1, 2, 2, 3, 3], [4, 4, 4, 0, 0, 5], [7, 8, 8, 8, 9, 9]], np.int32)
    collapsed, lengths = run(list(tv.nn.collapse_repeated(lab, [6, 4, 2])))
    assert collapsed.tolist() == [[1, 2, 3], [4, 0, 0], [7, 8, 0]]  # TF 2.21's values
    assert lengths.tolist() == [3, 2, 2]
    u, idx = run(list(tv.nn.ctc_unique_labels(lab)))
    assert u.dtype == np.int64 and idx.dtype == np.int32
    assert u.tolist() == [[1, 2, 3, 0, 0, 0], [4, 0, 5, 0, 0, 0], [7, 8, 9, 0, 0, 0]]
    assert idx.tolist() == [[0, 0, 1, 1, 2, 2], [0, 0, 0, 1, 1, 2], [0, 1, 1, 1, 2, 2]]


def test_approx_max_k_and_min_k_are_exact():
    x = RS.permutation(60).reshape(3, 4, 5).astype(np.float64)
    vmax, imax = run(list(tv.nn.approx_max_k(x, 2, reduction_dimension=1)))
    order = np.argsort(-x, axis=1, kind="stable")[:, :2]
    np.testing.assert_array_equal(imax, order)
    np.testing.assert_array_equal(vmax, np.take_along_axis(x, order, 1))
    vmin, imin = run(list(tv.nn.approx_min_k(x, 3)))
    order = np.argsort(x, axis=-1, kind="stable")[..., :3]
    np.testing.assert_array_equal(imin, order)
    np.testing.assert_array_equal(vmin, np.take_along_axis(x, order, -1))


def test_nn_aliases_are_the_ops():
    assert tv.nn.depthwise_conv2d_backprop_input is tv.nn.depthwise_conv2d_native_backprop_input
    assert tv.nn.depthwise_conv2d_backprop_filter is \
        tv.nn.depthwise_conv2d_native_backprop_filter
    assert tv.nn.space_to_depth is tv.space_to_depth
    assert tv.nn.depth_to_space is tv.depth_to_space
    assert tv.nn.space_to_batch is tv.space_to_batch


# ---- ctc_loss_v2 --------------------------------------------------------------------------------
def ref_ctc(logits, label, blank):
    """-log p(label | logits) by enumerating every path of one ``[T, K]`` sequence."""
    t, k = logits.shape
    p = np.exp(logits - logits.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    total = 0.0
    for path in itertools.product(range(k), repeat=t):
        merged = [c for i, c in enumerate(path) if i == 0 or c != path[i - 1]]
        if [c for c in merged if c != blank] == list(label):
            total += np.prod([p[i, c] for i, c in enumerate(path)])
    return -np.log(total)


@pytest.mark.parametrize("blank_index", [None, 1, -1])
def test_ctc_loss_v2_matches_path_enumeration_for_any_blank(blank_index):
    blank = {None: 0, 1: 1, -1: 3}[blank_index]
    logits = RS.randn(5, 2, 4)  # [time, batch, classes]
    labels = np.array([[c for c in range(4) if c != blank][:2],
                       [c for c in range(4) if c != blank][2:3] + [0]], np.int32)
    lengths, frames = np.array([2, 1], np.int32), np.array([5, 4], np.int32)

    def build(lg):
        return tv.nn.ctc_loss_v2(labels, lg, lengths, frames, blank_index=blank_index)
    want = [ref_ctc(logits[:frames[b], b], labels[b, :lengths[b]], blank) for b in range(2)]
    check_forward(build, lambda lg: np.array(want), logits, rtol=1e-9)
    check_gradients(build, logits)
    batch_major = tv.nn.ctc_loss_v2(labels, logits.transpose(1, 0, 2), lengths, frames,
                                    logits_time_major=False, blank_index=blank_index)
    np.testing.assert_allclose(run(batch_major), want, rtol=1e-9)


def test_ctc_loss_v2_sparse_labels_need_a_blank_index():
    st = tv.SparseTensor([[0, 0]], np.array([1], np.int32), [1, 1])
    with pytest.raises(ValueError, match="Argument `blank_index` must be provided when "
                                         "`labels` is a `SparseTensor`"):
        tv.nn.ctc_loss_v2(st, np.zeros((3, 1, 3)), None, [3])
    got = run(tv.nn.ctc_loss_v2(st, np.zeros((3, 1, 3)), None, [3], blank_index=0))
    np.testing.assert_allclose(got, [ref_ctc(np.zeros((3, 3)), [1], 0)], rtol=1e-9)


# ---- the other candidate samplers (nn_sampler_ext) ----------------------------------------------
def test_all_candidate_sampler_gives_every_class_with_expected_counts_one():
    s, tc, sc = run(list(tv.nn.all_candidate_sampler(np.array([[1, 2], [3, 0]]), 2, 4, True)))
    assert s.tolist() == [0, 1, 2, 3] and tc.tolist() == [[1, 1], [1, 1]]
    assert sc.tolist() == [1, 1, 1, 1]


def test_fixed_unigram_candidate_sampler_expected_counts_are_tf_s():
    tc = np.array([[1, 2], [3, 0]], np.int64)
    # reserved ids have probability 0; without unique every draw is kept: p * num_sampled
    s, t, e = run(list(tv.nn.fixed_unigram_candidate_sampler(
        tc, 2, 3, False, 6, unigrams=[2, 3, 4, 5], num_reserved_ids=2, seed=3)))
    p = np.array([0, 0, 2, 3, 4, 5]) / 14
    np.testing.assert_allclose(t, p[tc] * 3, rtol=1e-6)  # TF 2.21: [[0, .428571], [.642857, 0]]
    np.testing.assert_allclose(e, p[s] * 3, rtol=1e-6)
    assert set(s.tolist()) <= {2, 3, 4, 5}
    # distortion, unique, a vocabulary file; draws follow the distribution
    import fsspec
    with fsspec.open("memory://nn3d/vocab.csv", "wt") as fh:
        fh.write("".join(f"w{i},{c}\n" for i, c in enumerate([1, 4, 9, 16])))
    draws = []
    with tv.Session() as sess:
        op = tv.nn.fixed_unigram_candidate_sampler(tc[:, :1], 1, 2, True, 4,
                                                   vocab_file="memory://nn3d/vocab.csv",
                                                   distortion=0.5, seed=1)
        for _ in range(200):
            s, t, e = sess.run(list(op))
            assert len(set(s.tolist())) == 2
            draws.extend(s.tolist())
    p = np.sqrt([1, 4, 9, 16]) / 10
    freq = np.bincount(draws, minlength=4) / len(draws)
    assert freq[3] > freq[2] > freq[1] > freq[0] and abs(freq.sum() - 1) < 1e-12
    assert np.all(e <= 1) and np.all(e >= p[s] * 0.999)
    with pytest.raises(IAE, match="range is 6 must be equal to weights size  3"):
        run(tv.nn.fixed_unigram_candidate_sampler(tc, 2, 3, False, 6, unigrams=[1, 2, 3])[0])
    with pytest.raises(IAE, match="give exactly one of vocab_file and unigrams"):
        tv.nn.fixed_unigram_candidate_sampler(tc, 2, 3, False, 6)


def test_learned_unigram_candidate_sampler_learns_the_true_classes_seen():
    tc = np.array([[1, 2], [3, 1]], np.int64)
    got = []
    with tv.Session() as sess:
        op = tv.nn.learned_unigram_candidate_sampler(tc, 2, 3, False, 5, seed=3)
        for _ in range(3):
            got.append(sess.run(list(op)))
    # TF 2.21's counts: uniform first, then each run's true classes added after its draw
    np.testing.assert_allclose(got[0][1], np.full((2, 2), 0.6), rtol=1e-6)
    np.testing.assert_allclose(got[1][1], [[1, 2 / 3], [2 / 3, 1]], rtol=1e-6)
    np.testing.assert_allclose(got[2][1], [[15 / 13, 9 / 13], [9 / 13, 15 / 13]], rtol=1e-6)
    with tv.Session() as sess:  # a new session starts from the uniform weights again
        np.testing.assert_allclose(sess.run(op[1]), np.full((2, 2), 0.6), rtol=1e-6)


# ---- ctc_beam_search_decoder --------------------------------------------------------------------
def _dense_paths(decoded):
    """Each SparseTensor of decoded labels as a list of per-row lists."""
    out = []
    for idx, vals, shape in decoded:
        rows = [[] for _ in range(shape[0])]
        for (r, _), v in zip(idx.tolist(), vals.tolist()):
            rows[r].append(v)
        out.append(rows)
    return out


def test_ctc_beam_search_with_a_wide_beam_finds_the_most_likely_label_sequences():
    logits = RS.randn(4, 2, 3) * 2  # [time, batch, classes], the blank last
    d, logp = tv.nn.ctc_beam_search_decoder_v2(logits, [4, 3], beam_width=200, top_paths=3)
    got_paths, got_logp = run([[(v.indices, v.values, v.dense_shape) for v in d], logp])
    got_paths = _dense_paths(got_paths)
    for b, t in ((0, 4), (1, 3)):
        lp = logits[:t, b] - np.log(np.exp(logits[:t, b]).sum(1, keepdims=True))
        seqs = {}
        for path in itertools.product(range(3), repeat=t):  # every alignment, collapsed
            merged = [c for i, c in enumerate(path) if i == 0 or c != path[i - 1]]
            key = tuple(c for c in merged if c != 2)
            seqs[key] = np.logaddexp(seqs.get(key, -np.inf), lp[np.arange(t), path].sum())
        best = sorted(seqs.items(), key=lambda kv: -kv[1])[:3]
        assert [got_paths[i][b] for i in range(3)] == [list(k) for k, _ in best]
        np.testing.assert_allclose(got_logp[b], [v for _, v in best], rtol=1e-9)


def test_ctc_beam_search_with_a_narrow_beam_prunes_as_tf():
    x = (np.random.RandomState(5).randn(8, 3, 5) * 2).astype(np.float32)
    d, logp = tv.nn.ctc_beam_search_decoder(x, [8, 6, 3], beam_width=2, top_paths=2,
                                            merge_repeated=False)
    got_paths, got_logp = run([[(v.indices, v.values, v.dense_shape) for v in d], logp])
    # TF 2.21's paths and log-probabilities for this input (its pruning, step for step)
    assert _dense_paths(got_paths) == [[[2, 0, 1, 0, 2], [0, 0, 1, 0], [3, 0]],
                                       [[2, 0, 1, 2], [0, 0, 0], [3, 0, 3]]]
    np.testing.assert_allclose(got_logp, [[-1.2626814, -3.6767135], [-1.6530757, -2.4524641],
                                          [-1.7861745, -1.9891887]], rtol=2e-6)
    # merge_repeated only merges repeated labels of the paths found (TF's LabelSeq)
    merged, plain = run([[(v.indices, v.values, v.dense_shape) for v in
                          tv.nn.ctc_beam_search_decoder(x, [8, 6, 3], 4, 2, mr)[0]]
                         for mr in (True, False)])
    collapse = [[[c for i, c in enumerate(row) if i == 0 or c != row[i - 1]] for row in rows]
                for rows in _dense_paths(plain)]
    assert _dense_paths(merged) == collapse
    with pytest.raises(IAE, match="requested more paths than the beam width"):
        tv.nn.ctc_beam_search_decoder(x, [8, 6, 3], beam_width=2, top_paths=3)
    with pytest.raises(IAE, match=r"sequence_length\(b\) <= time"):
        run(tv.nn.ctc_beam_search_decoder(x, [9, 6, 3], beam_width=2)[1])
