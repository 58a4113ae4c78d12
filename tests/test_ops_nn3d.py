"""The rest of TF 1.x's ``tf.nn``: 3-D convolution and pooling, the public 2-D/1-D gradient
functions, max_pool_with_argmax, dilation2d/erosion2d, fractional pooling and the generic
``pool``: forward against NumPy references written per window, every gradient against central
differences, bad inputs by error class and message."""
from __future__ import annotations

import itertools

import numpy as np
import pytest
import tensorvm as tv

from tests.opcheck import check_forward, check_gradients, run

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
    check_gradients(build, x[:1, :4, :3, :4])
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
