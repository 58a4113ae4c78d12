"""tv.nn ops: forward results against NumPy references, finite-difference gradients (float64),
and the bad inputs each op rejects (at construction, naming the op)."""
from __future__ import annotations

import numpy as np
import pytest
import tensorvm as tv

from tests.opcheck import check_forward, check_gradients, run

RNG = np.random.default_rng(1234)


def randn(*shape, dtype=np.float64):
    return RNG.standard_normal(shape).astype(dtype)


def away_from(x, points, margin=0.05):
    """Move values within ``margin`` of a kink (0 for relu, 6 for relu6) off it."""
    x = x.copy()
    for p in points:
        near = np.abs(x - p) < margin
        x[near] = p + margin * np.where(x[near] >= p, 2, -2)
    return x


# ---- activations ------------------------------------------------------------------------------
def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


ACTS = [
    (tv.nn.relu, lambda x: np.maximum(x, 0), [0.0]),
    (tv.nn.relu6, lambda x: np.clip(x, 0, 6), [0.0, 6.0]),
    (lambda x: tv.nn.leaky_relu(x, alpha=0.1), lambda x: np.where(x > 0, x, 0.1 * x), [0.0]),
    (tv.nn.elu, lambda x: np.where(x > 0, x, np.expm1(x)), [0.0]),
    (tv.nn.softplus, lambda x: np.log1p(np.exp(x)), []),
    (tv.nn.softsign, lambda x: x / (1 + np.abs(x)), [0.0]),
    (tv.nn.sigmoid, _sigmoid, []),
    (tv.nn.tanh, np.tanh, []),
]


@pytest.mark.parametrize("fn,ref,kinks", ACTS, ids=lambda a: getattr(a, "__name__", ""))
@pytest.mark.parametrize("shape", [(3, 4), (0, 3), (1,), ()])
def test_activation_forward(fn, ref, kinks, shape):
    x = (randn(*shape) * 4).astype(np.float32)
    check_forward(fn, ref, x, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("fn,ref,kinks", ACTS, ids=lambda a: getattr(a, "__name__", ""))
def test_activation_gradient(fn, ref, kinks):
    x = away_from(randn(2, 5) * 4, kinks)
    check_gradients(fn, x)


def test_activation_edge_values():
    x = np.array([-1000.0, -7.0, 0.0, 3.0, 7.0, 1000.0], np.float32)
    got = run([tv.nn.relu6(x), tv.nn.softplus(x), tv.nn.elu(x)])
    np.testing.assert_allclose(got[0], [0, 0, 0, 3, 6, 6])
    np.testing.assert_allclose(got[1], [0, np.log1p(np.exp(-7.0)), np.log(2), np.log1p(np.exp(3)),
                                        7 + np.log1p(np.exp(-7.0)), 1000], rtol=1e-6)
    assert np.all(np.isfinite(got[2])) and got[2][0] == -1


def test_activation_rejects_ints():
    with pytest.raises(tv.errors.InvalidArgumentError, match="Relu"):
        tv.nn.relu(tv.constant([1, 2]))


# ---- softmax ----------------------------------------------------------------------------------
def _np_softmax(x, axis=-1):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


@pytest.mark.parametrize("axis", [-1, 0, 1])
def test_softmax_and_log_softmax_forward(axis):
    x = randn(3, 4, dtype=np.float32) * 3
    check_forward(lambda t: tv.nn.softmax(t, axis=axis), lambda a: _np_softmax(a, axis), x,
                  rtol=1e-5)
    check_forward(lambda t: tv.nn.log_softmax(t, axis=axis),
                  lambda a: np.log(_np_softmax(a.astype(np.float64), axis)), x, rtol=1e-5,
                  atol=1e-5)


def test_softmax_is_stable_and_handles_edges():
    x = np.array([[1000.0, 1001.0, 1002.0], [-1000.0, -1000.0, -1000.0]], np.float32)
    sm, lsm = run([tv.nn.softmax(x), tv.nn.log_softmax(x)])
    np.testing.assert_allclose(sm[0], _np_softmax(np.array([0.0, 1, 2])), rtol=1e-6)
    np.testing.assert_allclose(sm[1], [1 / 3] * 3, rtol=1e-6)
    assert np.all(np.isfinite(lsm))
    assert run(tv.nn.softmax(np.zeros((0, 3), np.float32))).shape == (0, 3)
    np.testing.assert_allclose(run(tv.nn.softmax(np.ones((2, 1), np.float32))), 1.0)


@pytest.mark.parametrize("axis", [-1, 0])
def test_softmax_gradients(axis):
    x = randn(3, 4)
    check_gradients(lambda t: tv.nn.softmax(t, axis=axis), x)
    check_gradients(lambda t: tv.nn.log_softmax(t, axis=axis), x)


def test_softmax_bad_axis():
    with pytest.raises(tv.errors.InvalidArgumentError, match="Softmax"):
        tv.nn.softmax(tv.constant([[1.0, 2.0]]), axis=2)


# ---- cross-entropies ----------------------------------------------------------------------------
def _np_xent(labels, logits, axis=-1):
    return -np.sum(labels * np.log(_np_softmax(logits, axis)), axis=axis)


@pytest.mark.parametrize("axis", [-1, 0])
def test_softmax_xent_forward(axis):
    logits = randn(4, 5) * 3
    labels = _np_softmax(randn(4, 5), axis)
    check_forward(lambda a, b: tv.nn.softmax_cross_entropy_with_logits_v2(
        labels=a, logits=b, axis=axis), lambda a, b: _np_xent(a, b, axis), labels, logits)
    check_forward(lambda a, b: tv.nn.softmax_cross_entropy_with_logits(
        labels=a, logits=b, dim=axis), lambda a, b: _np_xent(a, b, axis), labels, logits)


def test_softmax_xent_is_stable():
    logits = np.array([[1000.0, 0.0, -1000.0]], np.float32)
    labels = np.array([[0.0, 1.0, 0.0]], np.float32)
    got = run(tv.nn.softmax_cross_entropy_with_logits_v2(labels=labels, logits=logits))
    np.testing.assert_allclose(got, [1000.0])


def test_softmax_xent_gradients_v2_into_both():
    logits, labels = randn(3, 4), _np_softmax(randn(3, 4))
    check_gradients(lambda a, b: tv.nn.softmax_cross_entropy_with_logits_v2(labels=a, logits=b),
                    labels, logits)
    check_gradients(lambda a, b: tv.nn.softmax_cross_entropy_with_logits_v2(
        labels=a, logits=b, axis=0), labels, logits)


def test_softmax_xent_v1_stops_gradient_into_labels():
    logits, labels = randn(3, 4), _np_softmax(randn(3, 4))
    check_gradients(lambda a, b: tv.nn.softmax_cross_entropy_with_logits(labels=a, logits=b),
                    labels, logits, wrt=[1])
    g = tv.Graph()
    with g.as_default():
        a, b = tv.constant(labels), tv.constant(logits)
        loss = tv.nn.softmax_cross_entropy_with_logits(labels=a, logits=b)
        assert tv.gradients(loss, [a])[0] is None


def test_softmax_xent_rejects_bad_inputs():
    with pytest.raises(tv.errors.InvalidArgumentError, match="SoftmaxCrossEntropyWithLogits"):
        tv.nn.softmax_cross_entropy_with_logits_v2(labels=np.zeros((2, 3), np.float32),
                                                   logits=tv.constant(np.zeros((2, 4),
                                                                               np.float32)))
    with pytest.raises(tv.errors.InvalidArgumentError, match="named arguments"):
        tv.nn.softmax_cross_entropy_with_logits_v2(tv.constant([1.0]), tv.constant([1.0]))


def test_sparse_softmax_xent_forward_and_gradient():
    logits = randn(5, 4) * 3
    labels = np.array([0, 3, 1, 1, 2], np.int64)
    want = -np.log(_np_softmax(logits))[np.arange(5), labels]
    check_forward(lambda a, b: tv.nn.sparse_softmax_cross_entropy_with_logits(
        labels=a, logits=b), lambda a, b: want, labels, logits)
    check_gradients(lambda a, b: tv.nn.sparse_softmax_cross_entropy_with_logits(
        labels=a, logits=b), labels, logits, wrt=[1])
    # Labels of rank 2 against logits of rank 3.
    lg3, lb3 = randn(2, 3, 4), np.array([[0, 1, 2], [3, 3, 0]], np.int32)
    got = run(tv.nn.sparse_softmax_cross_entropy_with_logits(labels=lb3, logits=lg3))
    want3 = -np.take_along_axis(np.log(_np_softmax(lg3)), lb3[..., None], -1)[..., 0]
    np.testing.assert_allclose(got, want3, rtol=1e-6)
    check_gradients(lambda a, b: tv.nn.sparse_softmax_cross_entropy_with_logits(
        labels=a, logits=b), lb3, lg3, wrt=[1])
    # Empty batch.
    assert run(tv.nn.sparse_softmax_cross_entropy_with_logits(
        labels=np.zeros((0,), np.int32), logits=np.zeros((0, 4), np.float32))).shape == (0,)


def test_sparse_softmax_xent_errors():
    with pytest.raises(tv.errors.InvalidArgumentError, match="SparseSoftmaxCrossEntropy"):
        tv.nn.sparse_softmax_cross_entropy_with_logits(labels=tv.constant([0, 1, 2]),
                                                       logits=tv.constant(np.zeros((2, 4))))
    with pytest.raises(tv.errors.InvalidArgumentError, match="int32 or int64"):
        tv.nn.sparse_softmax_cross_entropy_with_logits(labels=tv.constant([0.0, 1.0]),
                                                       logits=tv.constant(np.zeros((2, 4))))
    loss = tv.nn.sparse_softmax_cross_entropy_with_logits(
        labels=tv.constant([0, 7]), logits=tv.constant(np.zeros((2, 4), np.float32)),
        name="xent")
    with pytest.raises(tv.errors.InvalidArgumentError, match=r"(?s)label value of 7.*'xent'"):
        run(loss)


def _np_sigmoid_xent(z, x):
    return np.maximum(x, 0) - x * z + np.log1p(np.exp(-np.abs(x)))


def test_sigmoid_xent_forward_gradient_and_stability():
    x, z = randn(3, 4) * 3, RNG.uniform(size=(3, 4))
    check_forward(lambda a, b: tv.nn.sigmoid_cross_entropy_with_logits(labels=a, logits=b),
                  lambda a, b: -(a * np.log(_sigmoid(b)) + (1 - a) * np.log(1 - _sigmoid(b))),
                  z, x, rtol=1e-6)
    check_gradients(lambda a, b: tv.nn.sigmoid_cross_entropy_with_logits(labels=a, logits=b),
                    z, x)
    big = np.array([-1000.0, 1000.0], np.float32)
    got = run(tv.nn.sigmoid_cross_entropy_with_logits(labels=np.array([1.0, 0.0], np.float32),
                                                      logits=big))
    np.testing.assert_allclose(got, [1000.0, 1000.0])
    with pytest.raises(tv.errors.InvalidArgumentError, match="SigmoidCrossEntropyWithLogits"):
        tv.nn.sigmoid_cross_entropy_with_logits(labels=tv.constant([1.0, 0.0]),
                                                logits=tv.constant([1.0, 2.0, 3.0]))


# ---- l2_loss, bias_add, xw_plus_b -------------------------------------------------------------
def test_l2_loss():
    x = randn(3, 4)
    check_forward(tv.nn.l2_loss, lambda a: np.sum(a * a) / 2, x)
    check_gradients(tv.nn.l2_loss, x)
    assert run(tv.nn.l2_loss(np.zeros((0,), np.float32))) == 0


@pytest.mark.parametrize("shape,fmt", [((2, 3), "NHWC"), ((2, 2, 2, 3), "NHWC"),
                                       ((2, 3, 2, 2), "NCHW"), ((1, 3), None)])
def test_bias_add(shape, fmt):
    x, b = randn(*shape), randn(3)
    ax = 1 if fmt == "NCHW" else len(shape) - 1
    bshape = [1] * len(shape)
    bshape[ax] = 3
    check_forward(lambda a, c: tv.nn.bias_add(a, c, data_format=fmt),
                  lambda a, c: a + c.reshape(bshape), x, b)
    check_gradients(lambda a, c: tv.nn.bias_add(a, c, data_format=fmt), x, b)


def test_bias_add_errors_and_xw_plus_b():
    with pytest.raises(tv.errors.InvalidArgumentError, match="BiasAdd.*channel dimension"):
        tv.nn.bias_add(tv.constant(np.zeros((2, 3))), tv.constant(np.zeros(4)))
    with pytest.raises(tv.errors.InvalidArgumentError, match="BiasAdd: bias must be 1-D"):
        tv.nn.bias_add(tv.constant(np.zeros((2, 3))), tv.constant(np.zeros((1, 3))))
    x, w, b = randn(2, 3), randn(3, 4), randn(4)
    check_forward(tv.nn.xw_plus_b, lambda a, c, d: a @ c + d, x, w, b)


# ---- conv2d -----------------------------------------------------------------------------------
def _pads(n, k, s, padding):
    if padding == "VALID":
        return (n - k) // s + 1, 0, 0
    out = -(-n // s)
    total = max((out - 1) * s + k - n, 0)
    return out, total // 2, total - total // 2


def ref_conv2d(x, f, strides, padding, dilations=(1, 1)):
    """A direct loop over output positions (the reference, not the kernel)."""
    kh, kw, _, o = f.shape
    dh, dw = dilations
    ekh, ekw = (kh - 1) * dh + 1, (kw - 1) * dw + 1
    oh, pt, pb = _pads(x.shape[1], ekh, strides[0], padding)
    ow, pl, pr = _pads(x.shape[2], ekw, strides[1], padding)
    xp = np.pad(x, ((0, 0), (pt, pb), (pl, pr), (0, 0)))
    out = np.zeros((x.shape[0], oh, ow, o))
    for i in range(oh):
        for j in range(ow):
            r, c = i * strides[0], j * strides[1]
            patch = xp[:, r:r + ekh:dh, c:c + ekw:dw, :]
            out[:, i, j, :] = np.einsum("nhwc,hwco->no", patch, f)
    return out


CONV_CASES = [((1, 5, 5, 2), (3, 3, 2, 3), (1, 1), "SAME", (1, 1)),
              ((2, 6, 5, 2), (3, 2, 2, 2), (2, 2), "SAME", (1, 1)),
              ((1, 7, 6, 1), (3, 3, 1, 2), (2, 1), "VALID", (1, 1)),
              ((1, 6, 6, 2), (2, 2, 2, 1), (1, 1), "SAME", (2, 2)),
              ((1, 4, 4, 1), (1, 1, 1, 2), (3, 3), "VALID", (1, 1))]


@pytest.mark.parametrize("xs,fs,strides,padding,dil", CONV_CASES)
def test_conv2d_forward(xs, fs, strides, padding, dil):
    x, f = randn(*xs, dtype=np.float32), randn(*fs, dtype=np.float32)
    check_forward(lambda a, b: tv.nn.conv2d(a, b, [1, *strides, 1], padding,
                                            dilations=[1, *dil, 1]),
                  lambda a, b: ref_conv2d(a, b, strides, padding, dil), x, f, rtol=1e-4,
                  atol=1e-5)


def test_conv2d_nchw_and_static_shape():
    x, f = randn(2, 2, 5, 4), randn(3, 3, 2, 3)
    want = ref_conv2d(x.transpose(0, 2, 3, 1), f, (2, 2), "SAME").transpose(0, 3, 1, 2)
    check_forward(lambda a, b: tv.nn.conv2d(a, b, [1, 1, 2, 2], "SAME", data_format="NCHW"),
                  lambda a, b: want, x, f)
    y = tv.nn.conv2d(tv.placeholder(tv.float32, [None, 7, 7, 3]),
                     tv.constant(np.zeros((3, 3, 3, 8), np.float32)), [1, 2, 2, 1], "VALID")
    assert y.shape.as_list() == [None, 3, 3, 8]


@pytest.mark.parametrize("xs,fs,strides,padding,dil", CONV_CASES[:4])
def test_conv2d_gradients(xs, fs, strides, padding, dil):
    x, f = randn(1, *xs[1:]), randn(*fs)
    check_gradients(lambda a, b: tv.nn.conv2d(a, b, [1, *strides, 1], padding,
                                              dilations=[1, *dil, 1]), x, f)


def test_conv2d_nchw_gradients():
    check_gradients(lambda a, b: tv.nn.conv2d(a, b, [1, 1, 2, 2], "SAME", data_format="NCHW"),
                    randn(1, 2, 4, 5), randn(2, 3, 2, 2))


def test_conv2d_errors():
    x = tv.constant(np.zeros((1, 5, 5, 3), np.float32))
    with pytest.raises(tv.errors.InvalidArgumentError, match=r"Conv2D.*in_channels"):
        tv.nn.conv2d(x, tv.constant(np.zeros((3, 3, 4, 2), np.float32)), [1, 1, 1, 1], "SAME")
    f = tv.constant(np.zeros((3, 3, 3, 2), np.float32))
    with pytest.raises(tv.errors.InvalidArgumentError, match="Conv2D: padding"):
        tv.nn.conv2d(x, f, [1, 1, 1, 1], "FULL")
    with pytest.raises(tv.errors.InvalidArgumentError, match="Conv2D: strides"):
        tv.nn.conv2d(x, f, [2, 1, 1, 1], "SAME")
    with pytest.raises(tv.errors.InvalidArgumentError, match="Conv2D: filter must be 4-D"):
        tv.nn.conv2d(x, tv.constant(np.zeros((3, 3, 3), np.float32)), [1, 1, 1, 1], "SAME")
    with pytest.raises(tv.errors.InvalidArgumentError, match="Conv2D.*larger than the input"):
        tv.nn.conv2d(x, tv.constant(np.zeros((7, 7, 3, 2), np.float32)), [1, 1, 1, 1], "VALID")


# ---- pooling ----------------------------------------------------------------------------------
def ref_pool(x, k, s, padding, kind):
    oh, pt, pb = _pads(x.shape[1], k[0], s[0], padding)
    ow, pl, pr = _pads(x.shape[2], k[1], s[1], padding)
    fill = -np.inf if kind == "max" else 0.0
    xp = np.pad(x, ((0, 0), (pt, pb), (pl, pr), (0, 0)), constant_values=fill)
    ones = np.pad(np.ones(x.shape[1:3]), ((pt, pb), (pl, pr)))
    out = np.zeros((x.shape[0], oh, ow, x.shape[3]))
    for i in range(oh):
        for j in range(ow):
            win = xp[:, i * s[0]:i * s[0] + k[0], j * s[1]:j * s[1] + k[1], :]
            if kind == "max":
                out[:, i, j] = win.max(axis=(1, 2))
            else:
                cnt = ones[i * s[0]:i * s[0] + k[0], j * s[1]:j * s[1] + k[1]].sum()
                out[:, i, j] = win.sum(axis=(1, 2)) / cnt
    return out


POOL_CASES = [((1, 4, 4, 2), (2, 2), (2, 2), "VALID"), ((2, 5, 5, 1), (3, 3), (2, 2), "SAME"),
              ((1, 5, 4, 2), (2, 3), (1, 1), "SAME"), ((1, 6, 5, 1), (3, 2), (2, 3), "VALID")]


@pytest.mark.parametrize("kind", ["max", "avg"])
@pytest.mark.parametrize("xs,k,s,padding", POOL_CASES)
def test_pool_forward(kind, xs, k, s, padding):
    fn = tv.nn.max_pool if kind == "max" else tv.nn.avg_pool
    x = randn(*xs, dtype=np.float32)
    check_forward(lambda a: fn(a, [1, *k, 1], [1, *s, 1], padding),
                  lambda a: ref_pool(a, k, s, padding, kind), x, rtol=1e-5)


@pytest.mark.parametrize("kind", ["max", "avg"])
@pytest.mark.parametrize("xs,k,s,padding", POOL_CASES[1:3])
def test_pool_gradients(kind, xs, k, s, padding):
    fn = tv.nn.max_pool if kind == "max" else tv.nn.avg_pool
    x = RNG.permutation(np.prod(xs)).reshape(xs) / 7.0  # distinct values: no argmax ties
    check_gradients(lambda a: fn(a, [1, *k, 1], [1, *s, 1], padding), x, rtol=1e-4)


def test_pool_nchw_and_max_grad_to_argmax():
    x = randn(1, 2, 4, 4)
    want = ref_pool(x.transpose(0, 2, 3, 1), (2, 2), (2, 2), "VALID", "max")
    check_forward(lambda a: tv.nn.max_pool(a, [1, 1, 2, 2], [1, 1, 2, 2], "VALID",
                                           data_format="NCHW"),
                  lambda a: want.transpose(0, 3, 1, 2), x)
    xv = np.array([[1.0, 5.0], [3.0, 2.0]]).reshape(1, 2, 2, 1)
    g = tv.Graph()
    with g.as_default():
        t = tv.constant(xv)
        grad = tv.gradients(tv.nn.max_pool(t, [1, 2, 2, 1], [1, 2, 2, 1], "VALID"), t)[0]
        with tv.Session(graph=g) as sess:
            np.testing.assert_array_equal(sess.run(grad).reshape(2, 2), [[0, 1], [0, 0]])


def test_pool_errors():
    x = tv.constant(np.zeros((1, 4, 4, 1), np.float32))
    with pytest.raises(tv.errors.InvalidArgumentError, match="MaxPool: padding"):
        tv.nn.max_pool(x, [1, 2, 2, 1], [1, 2, 2, 1], "same-ish")
    with pytest.raises(tv.errors.InvalidArgumentError, match="AvgPool: ksize"):
        tv.nn.avg_pool(x, [2, 2, 2, 1], [1, 2, 2, 1], "VALID")
    with pytest.raises(tv.errors.InvalidArgumentError, match="MaxPool: input must be 4-D"):
        tv.nn.max_pool(tv.constant(np.zeros((4, 4), np.float32)), [1, 2, 2, 1], [1, 1, 1, 1],
                       "VALID")


# ---- dropout ----------------------------------------------------------------------------------
def test_dropout_mask_scale_and_seeding():
    g = tv.Graph()
    with g.as_default():
        x = tv.constant(np.ones((50, 40), np.float32))
        d = tv.nn.dropout(x, keep_prob=0.5, seed=7)
        dr = tv.nn.dropout(x, rate=0.25, seed=7)
        with tv.Session(graph=g) as s:
            a, b, c = s.run(d), s.run(d), s.run(dr)
        with tv.Session(graph=g) as s:
            a2 = s.run(d)
    assert set(np.unique(a)) <= {0.0, 2.0} and 0.4 < (a > 0).mean() < 0.6
    assert set(np.unique(c)) <= {0.0, np.float32(1 / 0.75)} and 0.65 < (c > 0).mean() < 0.85
    assert not np.array_equal(a, b), "a new mask every run"
    np.testing.assert_array_equal(a, a2)  # same seed, fresh session: same sequence


def test_dropout_gradient_uses_the_same_mask_and_keep_prob_placeholder():
    g = tv.Graph()
    with g.as_default():
        x = tv.constant(np.arange(1.0, 13.0).reshape(3, 4))
        kp = tv.placeholder(tv.float64, [])
        d = tv.nn.dropout(x, kp, noise_shape=[3, 1])
        gx = tv.gradients(tv.reduce_sum(d), x)[0]
        with tv.Session(graph=g) as s:
            dv, gv = s.run([d, gx], {kp: 0.5})
            full = s.run(d, {kp: 1.0})
    xv = np.arange(1.0, 13.0).reshape(3, 4)
    np.testing.assert_allclose(dv, xv * gv)  # the gradient is the mask of the same run
    assert np.all((gv == 0) | (gv == 2)) and np.all(gv == gv[:, :1])  # noise_shape [3, 1]
    np.testing.assert_array_equal(full, xv)


def test_dropout_errors_and_identity():
    x = tv.constant([1.0, 2.0])
    assert tv.nn.dropout(x, keep_prob=1.0) is x
    with pytest.raises(tv.errors.InvalidArgumentError, match="keep_prob"):
        tv.nn.dropout(x, keep_prob=0.0)
    with pytest.raises(tv.errors.InvalidArgumentError, match="exactly one"):
        tv.nn.dropout(x, keep_prob=0.5, rate=0.5)
    with pytest.raises(tv.errors.InvalidArgumentError, match="noise_shape"):
        tv.nn.dropout(x, 0.5, noise_shape=[3])
    with pytest.raises(tv.errors.InvalidArgumentError, match="Dropout: keep_prob must be a scalar"):
        tv.nn.dropout(x, tv.constant([0.5, 0.5]))
    kp = tv.placeholder(tv.float32, [])
    d = tv.nn.dropout(x, kp, name="drop")
    with pytest.raises(tv.errors.InvalidArgumentError, match=r"(?s)range \(0, 1\].*'drop"):
        run(d, {kp: 1.5})


# ---- embedding_lookup -------------------------------------------------------------------------
def test_embedding_lookup_dense_and_sparse_gradient():
    params = randn(6, 3)
    ids = np.array([[0, 5], [2, 2]], np.int32)
    check_forward(lambda p, i: tv.nn.embedding_lookup(p, i), lambda p, i: p[i], params, ids)
    check_gradients(lambda p, i: tv.nn.embedding_lookup(p, i), params, ids, wrt=[0])
    g = tv.Graph()
    with g.as_default():
        p = tv.constant(params)
        grad = tv.gradients(tv.reduce_sum(tv.nn.embedding_lookup(p, ids)), p)[0]
        assert isinstance(grad, tv.IndexedSlices)


@pytest.mark.parametrize("strategy", ["mod", "div"])
def test_embedding_lookup_sharded(strategy):
    full = randn(10, 2)
    if strategy == "mod":
        shards = [full[i::3] for i in range(3)]
    else:
        shards = np.array_split(full, 3)
    ids = np.array([[0, 9, 4], [7, 7, 1]], np.int64)
    g = tv.Graph()
    with g.as_default():
        ps = [tv.constant(s) for s in shards]
        e = tv.nn.embedding_lookup(ps, ids, partition_strategy=strategy)
        grads = tv.gradients(tv.reduce_sum(e * 2.0), ps)
        assert all(isinstance(gr, tv.IndexedSlices) for gr in grads)
        with tv.Session(graph=g) as s:
            got, dense = s.run([e, [tv.densify(gr, p) for gr, p in zip(grads, ps)]])
    np.testing.assert_allclose(got, full[ids])
    want = np.zeros_like(full)
    np.add.at(want, ids.ravel(), 2.0)
    want_shards = [want[i::3] for i in range(3)] if strategy == "mod" else \
        np.array_split(want, 3)
    for d, w in zip(dense, want_shards):
        np.testing.assert_allclose(d, w)


# ---- moments, l2_normalize, in_top_k ------------------------------------------------------------
@pytest.mark.parametrize("axes,keep", [([0], False), ([0, 1], True), ([-1], False)])
def test_moments(axes, keep):
    x = randn(3, 4)
    got = run(list(tv.nn.moments(tv.constant(x), axes, keep_dims=keep)))
    np.testing.assert_allclose(got[0], x.mean(axis=tuple(axes), keepdims=keep))
    np.testing.assert_allclose(got[1], x.var(axis=tuple(axes), keepdims=keep))
    check_gradients(lambda t: tv.nn.moments(t, axes, keep_dims=keep)[1], x)
    check_gradients(lambda t: tv.nn.moments(t, axes, keep_dims=keep)[0], x)


@pytest.mark.parametrize("axis", [None, 0, -1])
def test_l2_normalize(axis):
    x = randn(3, 4)
    ref = lambda a: a / np.sqrt(np.maximum(np.sum(a * a, axis=axis, keepdims=True), 1e-12))
    check_forward(lambda t: tv.nn.l2_normalize(t, axis=axis), ref, x)
    check_gradients(lambda t: tv.nn.l2_normalize(t, axis=axis), x)
    np.testing.assert_array_equal(run(tv.nn.l2_normalize(np.zeros(3, np.float32), 0)), 0)


def test_in_top_k():
    pred = np.array([[0.1, 0.9, 0.3], [0.5, 0.5, 0.2], [np.nan, 1.0, 0.0]], np.float32)
    got = run([tv.nn.in_top_k(pred, np.array([1, 0, 0], np.int32), 1),
               tv.nn.in_top_k(pred, np.array([2, 2, 1], np.int32), 2)])
    np.testing.assert_array_equal(got[0], [True, True, False])
    np.testing.assert_array_equal(got[1], [True, False, True])
    with pytest.raises(tv.errors.InvalidArgumentError, match="InTopK"):
        tv.nn.in_top_k(tv.constant([0.1, 0.2]), tv.constant([0]), 1)


def test_nn_namespace_and_top_level():
    from tensorvm.ops.nn import nn_ops
    for name in nn_ops.NN_ALL:
        assert getattr(tv.nn, name) is getattr(nn_ops, name)
    assert tv.nn.sigmoid is tv.sigmoid and tv.nn.tanh is tv.tanh


# ---- second derivatives -------------------------------------------------------------------------
def _grad_of(f, idx, wshape):
    """``build(*xs) -> d(sum(f(*xs) * w))/d xs[idx]``, to differentiate once more."""
    w = RNG.uniform(0.5, 1.5, wshape)

    def build(*xs):
        return tv.gradients(tv.reduce_sum(f(*xs) * tv.constant(w)), xs[idx])[0]
    return build


def _xent2(a, b):
    return tv.nn.softmax_cross_entropy_with_logits_v2(labels=a, logits=b)


SECOND_ORDER = {
    "elu": (_grad_of(tv.nn.elu, 0, (2, 5)), [randn(2, 5) * 2], [0]),
    "softplus": (_grad_of(tv.nn.softplus, 0, (2, 5)), [randn(2, 5)], [0]),
    "log_softmax": (_grad_of(tv.nn.log_softmax, 0, (2, 5)), [randn(2, 5)], [0]),
    "xent": (_grad_of(_xent2, 1, (2,)), [RNG.dirichlet(np.ones(5), 2), randn(2, 5)], [0, 1]),
    "sparse_xent": (_grad_of(lambda b, a: tv.nn.sparse_softmax_cross_entropy_with_logits(
        labels=a, logits=b), 0, (2,)), [randn(2, 5), np.array([1, 3])], [0]),
    "conv2d": (_grad_of(lambda a, b: tv.nn.conv2d(a, b * b, [1, 2, 2, 1], "SAME") ** 2, 0,
                        (1, 2, 3, 2)), [randn(1, 4, 5, 2), randn(3, 3, 2, 2)], [0, 1]),
    "max_pool": (_grad_of(lambda a: tv.nn.max_pool(a ** 3, [1, 2, 2, 1], [1, 1, 1, 1], "SAME"),
                          0, (1, 3, 3, 1)), [RNG.permutation(9).reshape(1, 3, 3, 1) / 3 + 0.5],
                 [0]),
    "avg_pool": (_grad_of(lambda a: tv.nn.avg_pool(a * a, [1, 2, 2, 1], [1, 1, 1, 1], "SAME"),
                          0, (1, 3, 3, 1)), [randn(1, 3, 3, 1)], [0]),
    "moments": (_grad_of(lambda a: tv.nn.moments(a, [1])[1], 0, (2,)), [randn(2, 5)], [0]),
}


@pytest.mark.parametrize("name", list(SECOND_ORDER))
def test_second_derivatives(name):
    build, arrays, wrt = SECOND_ORDER[name]
    check_gradients(build, *arrays, wrt=wrt, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("k,s,padding", [(2, 2, "SAME"), (3, 2, "SAME"), (2, 1, "VALID")])
def test_relu_then_max_pool_gradient_masks_the_pooled_gradient(k, s, padding):
    """max_pool(relu(x))'s gradient applies the ReLU mask to the pooled gradient (a quarter
    of the elements): the same numbers as ReluGrad on the full map, with ties (zeros after
    the ReLU), negatives, and an infinite upstream gradient."""
    x = np.round(RNG.standard_normal((2, 6, 5, 3)), 1).astype(np.float32)

    def grads(fused):
        g = tv.Graph()
        with g.as_default():
            a = tv.placeholder(tv.float32, x.shape)
            r = tv.nn.relu(a)
            h = r if fused else tv.identity(r)  # identity: the unfused graph
            y = tv.nn.max_pool(h, [1, k, k, 1], [1, s, s, 1], padding)
            up = tv.placeholder(tv.float32, None)
            gx = tv.gradients(y, a, grad_ys=up)[0]
            assert (gx.op.type == "MaxPoolGrad") == fused
            with tv.Session(graph=g) as sess:
                shape = sess.run(y, {a: x}).shape
                gy = RNG.standard_normal(shape).astype(np.float32)
                gy_inf = gy.copy()
                gy_inf[0, 0, 0, :] = np.inf
                return [sess.run(gx, {a: x, up: v}) for v in (gy, gy_inf)]
    state = RNG.bit_generator.state
    fused = grads(True)
    RNG.bit_generator.state = state  # the same upstream gradients
    unfused = grads(False)
    for f, u in zip(fused, unfused):
        np.testing.assert_array_equal(f, u)
    untied = (RNG.permutation(x.size).reshape(x.shape) - x.size / 3) / 7.0  # no ties
    check_gradients(lambda a: tv.nn.max_pool(tv.nn.relu(a), [1, k, k, 1], [1, s, s, 1],
                                             padding), untied)
