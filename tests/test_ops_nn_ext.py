"""tv.nn's depthwise/separable/1-D/atrous convolutions, selu/swish/crelu, log_poisson_loss, the
moments helpers and the pooling aliases: forward against NumPy references written per window,
gradients against central differences, errors by class and message."""
from __future__ import annotations

import math

import numpy as np
import pytest

import tensorvm as tv
from tests.opcheck import check_forward, check_gradients, run

RS = np.random.RandomState(3)
IAE = tv.errors.InvalidArgumentError


def same_pads(n, k, s):
    out = -(-n // s)
    total = max((out - 1) * s + k - n, 0)
    return out, total // 2


def ref_depthwise(x, f, strides=(1, 1), padding="SAME", rate=(1, 1)):
    """out[n, i, j, c * M + m] = sum_{a, b} xpad[n, i*s + a*r, j*s + b*r, c] * f[a, b, c, m]."""
    n, h, w, c = x.shape
    kh, kw, _, m = f.shape
    ekh, ekw = (kh - 1) * rate[0] + 1, (kw - 1) * rate[1] + 1
    if padding == "SAME":
        oh, pt = same_pads(h, ekh, strides[0])
        ow, pl = same_pads(w, ekw, strides[1])
    else:
        oh, pt = (h - ekh) // strides[0] + 1, 0
        ow, pl = (w - ekw) // strides[1] + 1, 0
    xp = np.zeros((n, h + 2 * ekh, w + 2 * ekw, c))
    xp[:, pt:pt + h, pl:pl + w] = x
    out = np.zeros((n, oh, ow, c, m))
    for i in range(oh):
        for j in range(ow):
            for a in range(kh):
                for b in range(kw):
                    v = xp[:, i * strides[0] + a * rate[0], j * strides[1] + b * rate[1]]
                    out[:, i, j] += v[:, :, None] * f[a, b]
    return out.reshape(n, oh, ow, c * m)


@pytest.mark.parametrize("strides,padding,rate", [((1, 1), "SAME", (1, 1)),
                                                  ((2, 2), "VALID", (1, 1)),
                                                  ((2, 1), "SAME", (1, 1)),
                                                  ((1, 1), "SAME", (2, 2)),
                                                  ((1, 1), "VALID", (2, 1))])
def test_depthwise_conv2d_matches_a_per_window_reference(strides, padding, rate):
    x, f = RS.rand(2, 7, 6, 3), RS.rand(3, 2, 3, 2)
    build = (lambda a, b: tv.nn.depthwise_conv2d(a, b, [1, *strides, 1], padding, rate=rate))
    check_forward(build, lambda a, b: ref_depthwise(a, b, strides, padding, rate), x, f)
    check_gradients(build, x, f)


def test_depthwise_nchw_equals_nhwc_and_second_order_gradients():
    x, f = RS.rand(2, 5, 6, 3), RS.rand(2, 2, 3, 2)
    nchw = run(tv.nn.depthwise_conv2d_native(x.transpose(0, 3, 1, 2), f, [1, 1, 2, 1], "SAME",
                                             data_format="NCHW"))
    np.testing.assert_allclose(nchw.transpose(0, 2, 3, 1),
                               ref_depthwise(x, f, (2, 1), "SAME"), rtol=1e-10)

    def grad_of(a, b):
        y = tv.nn.depthwise_conv2d(a, b, [1, 1, 1, 1], "SAME")
        return tv.gradients(tv.reduce_sum(y * y), a)[0]
    check_gradients(grad_of, x, f, rtol=1e-4, atol=1e-5)


def test_separable_conv1d_atrous_equal_their_definitions():
    x, dw, pw = RS.rand(2, 6, 5, 3), RS.rand(3, 3, 3, 2), RS.rand(1, 1, 6, 4)
    got = run(tv.nn.separable_conv2d(x, dw, pw, [1, 1, 1, 1], "SAME"))
    np.testing.assert_allclose(got, ref_depthwise(x, dw) @ pw[0, 0], rtol=1e-10)
    check_gradients(lambda a, b, c: tv.nn.separable_conv2d(a, b, c, [1, 1, 1, 1], "VALID"),
                    x, dw, pw)
    x1, f1 = RS.rand(2, 9, 3), RS.rand(3, 3, 5)
    want = np.stack([sum(np.pad(x1, ((0, 0), (1, 1), (0, 0)))[:, i * 2 + k] @ f1[k]
                         for k in range(3)) for i in range(5)], 1)
    check_forward(lambda a, b: tv.nn.conv1d(a, b, 2, "SAME"), lambda a, b: want, x1, f1)
    check_gradients(lambda a, b: tv.nn.conv1d(a, b, 1, "VALID"), x1, f1)
    ncw = run(tv.nn.conv1d(x1.transpose(0, 2, 1), f1, 2, "SAME", data_format="NCW"))
    np.testing.assert_allclose(ncw.transpose(0, 2, 1), want, rtol=1e-10)
    f2 = RS.rand(2, 2, 3, 4)
    atr = run(tv.nn.atrous_conv2d(x, f2, 2, "VALID"))
    dense = np.zeros((3, 3, 3, 4))
    dense[::2, ::2] = f2
    np.testing.assert_allclose(atr, run(tv.nn.conv2d(x, dense, [1, 1, 1, 1], "VALID")),
                               rtol=1e-10)


def test_depthwise_errors():
    x = tv.placeholder(tv.float32, [1, 5, 5, 3])
    with pytest.raises(IAE, match="input depth must equal filter in_channels"):
        tv.nn.depthwise_conv2d(x, np.zeros((2, 2, 4, 1), np.float32), [1, 1, 1, 1], "SAME")
    with pytest.raises(IAE, match="padding must be 'SAME' or 'VALID', got 'FULL'"):
        tv.nn.depthwise_conv2d(x, np.zeros((2, 2, 3, 1), np.float32), [1, 1, 1, 1], "FULL")
    with pytest.raises(IAE, match="strides > 1 not supported in conjunction with rate > 1"):
        tv.nn.depthwise_conv2d(x, np.zeros((2, 2, 3, 1), np.float32), [1, 2, 2, 1], "SAME",
                               rate=[2, 2])
    with pytest.raises(IAE, match="filter must be 4-D"):
        tv.nn.depthwise_conv2d(x, np.zeros((2, 3, 1), np.float32), [1, 1, 1, 1], "SAME")
    with pytest.raises(ValueError, match=r"pointwise_filter must be \[1, 1, in, out\]"):
        tv.nn.separable_conv2d(x, np.zeros((2, 2, 3, 1), np.float32),
                               np.zeros((2, 1, 3, 4), np.float32), [1, 1, 1, 1], "SAME")
    with pytest.raises(ValueError, match="rate 0 cannot be less than one"):
        tv.nn.atrous_conv2d(x, np.zeros((2, 2, 3, 1), np.float32), 0, "SAME")


def test_activations_and_poisson_loss_equal_numpy():
    x = RS.randn(4, 5)
    alpha, scale = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946
    check_forward(tv.nn.selu, lambda a: scale * np.where(a > 0, a, alpha * np.expm1(a)), x)
    check_forward(tv.nn.swish, lambda a: a / (1 + np.exp(-a)), x)
    check_forward(tv.nn.silu, lambda a: a / (1 + np.exp(-a)), x)
    check_forward(tv.nn.crelu, lambda a: np.concatenate([np.maximum(a, 0), np.maximum(-a, 0)],
                                                        -1), x)
    for fn in (tv.nn.selu, tv.nn.swish, tv.nn.crelu):
        check_gradients(fn, x + 0.01)  # away from the kink at 0
    t = RS.rand(4, 5) * 4

    def full(tg, li):
        st = tg * np.log(np.where(tg > 1, tg, 1)) - tg + 0.5 * np.log(2 * math.pi * tg)
        return np.exp(li) - li * tg + np.where(tg > 1, st, 0)
    check_forward(lambda a, b: tv.nn.log_poisson_loss(a, b, compute_full_loss=True), full, t, x)
    check_forward(tv.nn.log_poisson_loss, lambda a, b: np.exp(b) - b * a, t, x)
    check_gradients(lambda b: tv.nn.log_poisson_loss(t, b, compute_full_loss=True), x)
    with pytest.raises(ValueError, match="log_input and targets must have the same shape"):
        tv.nn.log_poisson_loss(np.zeros((2, 3)), np.zeros((3, 2)))


def test_moment_helpers_equal_numpy():
    x, w = RS.rand(3, 4, 5), RS.rand(3, 4, 1)
    c, ms, vs, sh = tv.nn.sufficient_statistics(x, [0, 1], shift=0.5)
    mean, var = run(tv.nn.normalize_moments(c, ms, vs, sh))
    np.testing.assert_allclose(mean, x.mean((0, 1)), rtol=1e-10)
    np.testing.assert_allclose(var, x.var((0, 1)), rtol=1e-8)
    got = run(list(tv.nn.sufficient_statistics(x, [2], keepdims=True)[:3]))
    assert got[0] == 5 and got[1].shape == (3, 4, 1)
    np.testing.assert_allclose(got[2], (x ** 2).sum(2, keepdims=True))
    wm, wv = run(tv.nn.weighted_moments(x, [0, 1], w))
    ww = np.broadcast_to(w, x.shape)
    want_m = (ww * x).sum((0, 1)) / ww.sum((0, 1))
    np.testing.assert_allclose(wm, want_m, rtol=1e-10)
    np.testing.assert_allclose(wv, (ww * (x - want_m) ** 2).sum((0, 1)) / ww.sum((0, 1)),
                               rtol=1e-10)
    ph = tv.placeholder(tv.float64, [None, 5])
    dyn = tv.nn.sufficient_statistics(ph, [0])[0]
    assert run(dyn, {ph: x[0]}) == 4


def test_pooling_aliases_equal_numpy():
    x1 = RS.rand(2, 9, 3)
    mp = run(tv.nn.max_pool1d(x1, 2, 2, "VALID"))
    np.testing.assert_array_equal(mp, x1[:, :8].reshape(2, 4, 2, 3).max(2))
    ap = run(tv.nn.avg_pool1d(x1, 3, 3, "VALID"))
    np.testing.assert_allclose(ap, x1.reshape(2, 3, 3, 3).mean(2))
    x = RS.rand(1, 4, 6, 2)
    np.testing.assert_array_equal(run(tv.nn.max_pool2d(x, 2, 2, "VALID")),
                                  x.reshape(1, 2, 2, 3, 2, 2).max((2, 4)))
    np.testing.assert_allclose(run(tv.nn.avg_pool2d(x, [2, 3], [2, 3], "VALID")),
                               x.reshape(1, 2, 2, 2, 3, 2).mean((2, 4)))


def test_new_nn_ops_have_gpu_kernels():
    from tensorvm.framework.op_registry import get_op_def
    tv.nn.depthwise_conv2d  # noqa: B018  (tv.nn loads its families on first use)
    for op in ("DepthwiseConv2dNative", "DepthwiseConv2dNativeBackpropInput",
               "DepthwiseConv2dNativeBackpropFilter"):
        assert "GPU" in get_op_def(op).kernels


def test_pool1d_takes_tfs_three_entry_form_in_both_layouts():
    x = RS.rand(2, 3, 8)  # NCW
    ncw = run(tv.nn.max_pool1d(x, [1, 1, 2], [1, 1, 2], "VALID", data_format="NCW"))
    nwc = run(tv.nn.avg_pool1d(x.transpose(0, 2, 1), [1, 2, 1], [1, 2, 1], "VALID"))
    np.testing.assert_array_equal(ncw, x.reshape(2, 3, 4, 2).max(-1))
    np.testing.assert_allclose(nwc.transpose(0, 2, 1), x.reshape(2, 3, 4, 2).mean(-1))
