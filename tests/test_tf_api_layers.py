"""Issue 14, item 6: tf.layers, tf.losses and the nn additions (lrn, nce_loss,
sampled_softmax_loss, candidate samplers, in_top_k, xw_plus_b, batch_normalization) against
NumPy, gradients by central differences (tests/opcheck.py), bad inputs."""
from __future__ import annotations

import numpy as np
import pytest

import tensorvm as tf
import tensorvm as tv
from tests.opcheck import check_forward, check_gradients

RNG = np.random.default_rng(14)


@pytest.fixture(autouse=True)
def fresh_graph():
    with tf.Graph().as_default() as g:
        yield g


def init_and_run(fetches, feed=None):
    with tf.Session() as s:
        s.run(tf.global_variables_initializer())
        return s.run(fetches, feed)


# ---- nn ops -------------------------------------------------------------------------------------
def np_lrn(x, r=2, bias=1.0, alpha=0.5, beta=0.75):
    out = np.zeros_like(x)
    c = x.shape[-1]
    for d in range(c):
        s = np.sum(x[..., max(0, d - r):min(c, d + r + 1)] ** 2, axis=-1)
        out[..., d] = x[..., d] / (bias + alpha * s) ** beta
    return out


def test_lrn_forward_gradient_and_bad_input():
    x = RNG.normal(size=(2, 2, 3, 6))
    check_forward(lambda t: tf.nn.lrn(t, 2, 1.0, 0.5, 0.75), np_lrn, x)
    check_forward(lambda t: tf.nn.local_response_normalization(t, 0, 2.0, 1.0, 1.0),
                  lambda a: np_lrn(a, 0, 2.0, 1.0, 1.0), x)
    check_gradients(lambda t: tf.nn.lrn(t, 2, 1.0, 0.5, 0.75), x)
    with pytest.raises(tf.errors.InvalidArgumentError, match="LRN: input must be 4-dimensional"):
        tf.nn.lrn(tf.zeros([2, 3]))


W = RNG.normal(size=(7, 3))
B = RNG.normal(size=7)
X = RNG.normal(size=(4, 3))
LABELS = np.array([[1], [3], [0], [6]], np.int64)
SAMPLED = np.array([2, 5, 3], np.int64)
TRUE_EC = RNG.uniform(0.1, 0.9, size=(4, 1)).astype(np.float32)
SAMPLED_EC = RNG.uniform(0.1, 0.9, size=3).astype(np.float32)
SV = (SAMPLED, TRUE_EC, SAMPLED_EC)


def np_sampled_logits(w, b, x, hits):
    tl = np.sum(x * w[LABELS[:, 0]], 1, keepdims=True) + b[LABELS[:, 0]][:, None] \
        - np.log(TRUE_EC.astype(np.float64))
    sl = x @ w[SAMPLED].T + b[SAMPLED] - np.log(SAMPLED_EC.astype(np.float64))
    if hits:  # a sampled class equal to the row's label is removed
        sl = sl + np.where(LABELS == SAMPLED[None, :], np.finfo(np.float64).min, 0)
    return np.concatenate([tl, sl], 1), np.concatenate([np.ones((4, 1)), np.zeros((4, 3))], 1)


def np_nce(w, b, x):
    lg, lab = np_sampled_logits(w, b, x, False)
    return np.sum(np.maximum(lg, 0) - lg * lab + np.log1p(np.exp(-np.abs(lg))), 1)


def np_sampled_softmax(w, b, x):
    lg, lab = np_sampled_logits(w, b, x, True)
    m = lg.max(1, keepdims=True)
    return -np.sum(lab * (lg - m - np.log(np.exp(lg - m).sum(1, keepdims=True))), 1)


def test_nce_and_sampled_softmax_against_numpy_and_gradients():
    def nce(w, b, x):
        return tf.nn.nce_loss(w, b, LABELS, x, 3, 7, sampled_values=SV)

    def ssm(w, b, x):
        return tf.nn.sampled_softmax_loss(w, b, LABELS, x, 3, 7, sampled_values=SV)
    check_forward(nce, np_nce, W, B, X)
    check_forward(ssm, np_sampled_softmax, W, B, X)
    check_gradients(nce, W, B, X)
    check_gradients(ssm, W, B, X)
    # sharded weights (a list, "mod") give the same loss
    shards = [W[i::2] for i in range(2)]
    got = init_and_run(tf.nn.nce_loss([tf.constant(s) for s in shards],
                                      tf.constant(B), LABELS, X, 3, 7, sampled_values=SV))
    np.testing.assert_allclose(got, np_nce(W, B, X), rtol=1e-10)


def test_candidate_samplers():
    tc = np.array([[0], [5]], np.int64)
    s, t_ec, s_ec = tf.nn.log_uniform_candidate_sampler(tc, 1, 20, True, 50, seed=3)
    s2, _, s2_ec = tf.nn.uniform_candidate_sampler(tc, 1, 8, False, 10, seed=4)
    got = init_and_run([s, t_ec, s_ec, s2, s2_ec])
    assert len(set(got[0].tolist())) == 20 and got[0].min() >= 0 and got[0].max() < 50
    p = (np.log(tc + 2.0) - np.log(tc + 1.0)) / np.log(51.0)
    # with unique sampling the expected count is 1 - (1 - p)^tries, tries >= num_sampled
    tries = np.log1p(-got[1].astype(np.float64)) / np.log1p(-p)
    assert np.allclose(tries, tries[0, 0], rtol=1e-4) and tries[0, 0] >= 20 - 1e-3
    np.testing.assert_allclose(got[4], np.full(8, 8 / 10), rtol=1e-6)  # p * num_sampled
    assert got[3].max() < 10
    # Zipf: low ids are drawn more often (a statistical check over many draws)
    s_many = tf.nn.log_uniform_candidate_sampler(tc, 1, 2000, False, 100, seed=5)[0]
    draws = init_and_run(s_many)
    assert np.mean(draws < 10) > 0.4  # P(k < 10) = log(11) / log(101) = 0.52
    with pytest.raises(tf.errors.InvalidArgumentError, match="cannot draw 30 unique"):
        tf.nn.uniform_candidate_sampler(tc, 1, 30, True, 10)


def test_in_top_k_xw_plus_b_and_batch_normalization():
    pred = np.array([[0.1, 0.8, 0.1], [0.5, 0.2, 0.3]], np.float32)
    got = init_and_run([tf.nn.in_top_k(pred, [1, 2], 1), tf.nn.in_top_k(pred, [1, 2], 2)])
    np.testing.assert_array_equal(got, [[True, False], [True, True]])
    x, w, b = RNG.normal(size=(3, 4)), RNG.normal(size=(4, 2)), RNG.normal(size=2)
    check_forward(tf.nn.xw_plus_b, lambda x, w, b: x @ w + b, x, w, b)
    check_gradients(tf.nn.xw_plus_b, x, w, b)
    m, v, o, s = RNG.normal(size=4), RNG.uniform(0.5, 2, size=4), RNG.normal(size=4), \
        RNG.normal(size=4)
    xb = RNG.normal(size=(5, 4))
    check_forward(lambda x, m, v, o, s: tf.nn.batch_normalization(x, m, v, o, s, 1e-3),
                  lambda x, m, v, o, s: (x - m) / np.sqrt(v + 1e-3) * s + o, xb, m, v, o, s)
    check_gradients(lambda x, m, v, o, s: tf.nn.batch_normalization(x, m, v, o, s, 1e-3),
                    xb, m, v, o, s)


# ---- layers -----------------------------------------------------------------------------------
def test_dense_conv_pool_flatten_against_numpy():
    x = RNG.normal(size=(2, 5, 5, 2)).astype(np.float32)
    ph = tf.placeholder(tf.float32, [None, 5, 5, 2])
    c = tf.layers.conv2d(ph, 3, (3, 3), strides=1, padding="valid", activation=tf.nn.relu)
    p = tf.layers.max_pooling2d(c, 2, 2, padding="same")
    a = tf.layers.average_pooling2d(c, 3, 3)
    f = tf.layers.flatten(p)
    d = tf.layers.dense(f, 4, activation=tf.nn.sigmoid)
    d3 = tf.layers.dense(tf.ones([2, 3, 4]), 2, name="on_3d")
    names = sorted(v.name for v in tf.trainable_variables())
    assert names == ["conv2d/bias:0", "conv2d/kernel:0", "dense/bias:0", "dense/kernel:0",
                     "on_3d/bias:0", "on_3d/kernel:0"]
    with tf.Session() as s:
        s.run(tf.global_variables_initializer())
        kc, bc, kd, bd = s.run(["conv2d/kernel:0", "conv2d/bias:0", "dense/kernel:0",
                                "dense/bias:0"])
        got = s.run([c, p, a, f, d, d3], {ph: x})
    want_c = np.zeros((2, 3, 3, 3))
    for i in range(3):
        for j in range(3):
            want_c[:, i, j] = np.einsum("nhwc,hwco->no", x[:, i:i + 3, j:j + 3], kc)
    want_c = np.maximum(want_c + bc, 0)
    np.testing.assert_allclose(got[0], want_c, rtol=1e-5, atol=1e-6)
    pad = np.pad(want_c, [(0, 0), (0, 1), (0, 1), (0, 0)], constant_values=-np.inf)
    want_p = pad.reshape(2, 2, 2, 2, 2, 3).max(axis=(2, 4))
    np.testing.assert_allclose(got[1], want_p, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got[2][:, 0, 0], want_c.mean(axis=(1, 2)), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got[3], want_p.reshape(2, -1), rtol=1e-5, atol=1e-6)
    want_d = 1 / (1 + np.exp(-(want_p.reshape(2, -1) @ kd + bd)))
    np.testing.assert_allclose(got[4], want_d, rtol=1e-5, atol=1e-6)
    assert got[5].shape == (2, 3, 2)
    assert bc.tolist() == [0, 0, 0]  # bias starts at zeros


def test_layer_reuse_and_objects():
    x = tf.ones([1, 3])
    y1 = tf.layers.dense(x, 2, name="fc")
    y2 = tf.layers.dense(x, 2, name="fc", reuse=True)
    layer = tf.layers.Dense(2, kernel_initializer=tf.ones_initializer())
    z1, z2 = layer(x), layer(x * 2)
    assert len(tf.trainable_variables()) == 4 and len(layer.variables) == 2
    assert layer.kernel.name == "dense/kernel:0" and layer.bias in layer.trainable_variables
    got = init_and_run([y1, y2, z1, z2])
    np.testing.assert_array_equal(got[0], got[1])
    np.testing.assert_array_equal(got[2], [[3, 3]])
    np.testing.assert_array_equal(got[3], [[6, 6]])
    with pytest.raises(ValueError, match="already exists"):
        tf.layers.dense(x, 2, name="fc")
    with pytest.raises(tf.errors.InvalidArgumentError, match="last dimension of the inputs"):
        tf.layers.dense(tf.placeholder(tf.float32, [None, None]), 2)
    with pytest.raises(tf.errors.InvalidArgumentError, match="padding must be"):
        tf.layers.conv2d(tf.ones([1, 4, 4, 1]), 1, 2, padding="full")


def test_dropout_training_flag():
    x = tf.ones([1000])
    training = tf.placeholder(tf.bool, [])
    d = tf.layers.dropout(x, rate=0.25, training=training, seed=1)
    assert tf.layers.dropout(x, 0.5) is x  # training=False: the inputs unchanged
    with tf.Session() as s:
        on, off = s.run(d, {training: True}), s.run(d, {training: False})
    assert set(np.unique(on).tolist()) <= {0.0, float(np.float32(1) / np.float32(0.75))}
    assert 0.18 < np.mean(on == 0) < 0.32
    np.testing.assert_array_equal(off, np.ones(1000))


def test_batch_normalization_layer_training_and_inference():
    x = RNG.normal(2.0, 3.0, size=(8, 3)).astype(np.float32)
    ph = tf.placeholder(tf.float32, [None, 3])
    training = tf.placeholder(tf.bool, [])
    y = tf.layers.batch_normalization(ph, momentum=0.9, training=training)
    updates = tf.get_collection(tf.GraphKeys.UPDATE_OPS)
    assert len(updates) == 2
    with tf.Session() as s:
        s.run(tf.global_variables_initializer())
        y_train, _ = s.run([y, updates], {ph: x, training: True})
        mm, mv = s.run(["batch_normalization/moving_mean:0",
                        "batch_normalization/moving_variance:0"])
        y_eval = s.run(y, {ph: x, training: False})
    mean, var = x.mean(0), x.var(0)
    np.testing.assert_allclose(y_train, (x - mean) / np.sqrt(var + 1e-3), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(mm, 0.1 * mean, rtol=1e-5)  # 0.9 * 0 + 0.1 * mean
    np.testing.assert_allclose(mv, 0.9 + 0.1 * var, rtol=1e-5)
    np.testing.assert_allclose(y_eval, (x - mm) / np.sqrt(mv + 1e-3), rtol=1e-4, atol=1e-5)


# ---- losses -----------------------------------------------------------------------------------
def test_losses_with_weights_and_reductions():
    R = tf.losses.Reduction
    labels = np.array([[1.0, 0.0], [0.5, 2.0], [3.0, 1.0]], np.float32)
    pred = np.array([[0.5, 0.5], [1.5, 2.0], [0.0, 1.0]], np.float32)
    w = np.array([[1.0], [0.0], [2.0]], np.float32)
    sq = (pred - labels) ** 2 * w
    cases = {
        R.NONE: sq, R.SUM: sq.sum(), R.MEAN: sq.sum() / (w * np.ones((3, 2))).sum(),
        R.SUM_OVER_BATCH_SIZE: sq.sum() / 6, R.SUM_BY_NONZERO_WEIGHTS: sq.sum() / 4,
    }
    got = init_and_run({k: tf.losses.mean_squared_error(labels, pred, w, reduction=k)
                        for k in cases})
    for k, want in cases.items():
        np.testing.assert_allclose(got[k], want, rtol=1e-6, err_msg=k)
    assert len(tf.losses.get_losses()) == 5
    zero = init_and_run(tf.losses.mean_squared_error(labels, pred, weights=0.0))
    assert zero == 0.0  # a zero divisor gives 0
    with pytest.raises(tf.errors.InvalidArgumentError, match="Invalid Reduction Key"):
        tf.losses.mean_squared_error(labels, pred, reduction="avg")
    with pytest.raises(tf.errors.InvalidArgumentError, match="incompatible"):
        tf.losses.mean_squared_error(np.zeros(3), np.zeros(2))


def test_cross_entropy_losses_and_total_loss():
    logits = RNG.normal(size=(4, 3))
    onehot = np.eye(3)[[0, 2, 1, 2]]
    w = np.array([1.0, 2.0, 0.0, 1.0])

    def log_softmax(z):
        return z - z.max(1, keepdims=True) - np.log(np.exp(z - z.max(1, keepdims=True))
                                                    .sum(1, keepdims=True))
    smooth = onehot * 0.9 + 0.1 / 3
    want_soft = np.sum(-np.sum(smooth * log_softmax(logits), 1) * w) / 3
    want_sparse = np.mean(-log_softmax(logits)[np.arange(4), [0, 2, 1, 2]])
    z = (onehot > 0).astype(np.float64)
    zs = z * 0.8 + 0.1
    sig = np.maximum(logits, 0) - logits * zs + np.log1p(np.exp(-np.abs(logits)))
    check_forward(lambda lg: tf.losses.softmax_cross_entropy(onehot, lg, w, 0.1),
                  lambda lg: want_soft, logits)
    check_forward(lambda lg: tf.losses.sparse_softmax_cross_entropy([0, 2, 1, 2], lg),
                  lambda lg: want_sparse, logits)
    check_forward(lambda lg: tf.losses.sigmoid_cross_entropy(z, lg, label_smoothing=0.2),
                  lambda lg: sig.mean(), logits)
    check_gradients(lambda lg: tf.losses.softmax_cross_entropy(onehot, lg, w, 0.1), logits)
    check_forward(lambda p: tf.losses.huber_loss(z, p, delta=0.5),
                  lambda p: np.mean(np.where(np.abs(p - z) <= 0.5, 0.5 * (p - z) ** 2,
                                             0.5 * (np.abs(p - z) - 0.25))), logits)
    check_forward(lambda p: tf.losses.absolute_difference(z, p), lambda p: np.abs(p - z).mean(),
                  logits)
    check_forward(lambda p: tf.losses.hinge_loss(z, p),
                  lambda p: np.maximum(0, 1 - (2 * z - 1) * p).mean(), logits)
    probs = 1 / (1 + np.exp(-logits))
    check_forward(lambda p: tf.losses.log_loss(z, p),
                  lambda p: np.mean(-z * np.log(p + 1e-7) - (1 - z) * np.log(1 - p + 1e-7)),
                  probs)
    with tf.Graph().as_default():
        v = tf.get_variable("v", initializer=np.float32(2.0),
                            regularizer=lambda t: 0.1 * t * t)
        tf.losses.add_loss(tf.constant(1.0))
        total = tf.losses.get_total_loss()
        assert init_and_run([total, tf.losses.get_regularization_loss()]) == \
            pytest.approx([1.4, 0.4])


def test_nn_helpers_against_numpy():
    x = RNG.normal(size=(2, 3, 3, 4))
    scale, offset = RNG.uniform(0.5, 2, size=4), RNG.normal(size=4)

    def np_fused(x, s, o):
        m, v = x.mean((0, 1, 2)), x.var((0, 1, 2))
        return (x - m) / np.sqrt(v + 1e-3) * s + o
    check_forward(lambda x, s, o: tf.nn.fused_batch_norm(x, s, o)[0], np_fused, x, scale, offset)
    check_gradients(lambda x, s, o: tf.nn.fused_batch_norm(x, s, o)[0], x, scale, offset)
    check_forward(lambda x, s, o: tf.nn.fused_batch_norm(x, s, o)[2],  # unbiased variance
                  lambda x, s, o: x.var((0, 1, 2), ddof=1), x, scale, offset)
    z = (RNG.uniform(size=(3, 4)) > 0.5).astype(np.float64)
    lg = RNG.normal(size=(3, 4)) * 3
    check_forward(lambda z, lg: tf.nn.weighted_cross_entropy_with_logits(z, lg, 2.5),
                  lambda z, lg: -(2.5 * z * np.log(1 / (1 + np.exp(-lg)))
                                  + (1 - z) * np.log(1 - 1 / (1 + np.exp(-lg)))), z, lg)
    check_gradients(lambda lg: tf.nn.weighted_cross_entropy_with_logits(z, lg, 2.5), lg)
    w, b = RNG.normal(size=(4, 2)), RNG.normal(size=2)
    check_forward(lambda a: tf.nn.relu_layer(a, w, b), lambda a: np.maximum(a @ w + b, 0), lg)
    v = np.array([[0.0, 1.0, 0.0, 2.0]])
    vals, idx = init_and_run(list(tf.nn.top_k(v, 2)))
    np.testing.assert_array_equal(vals, [[2.0, 1.0]])
    np.testing.assert_array_equal(idx, [[3, 1]])
    assert init_and_run(tf.nn.zero_fraction(v)) == pytest.approx(0.5)
    with pytest.raises(tf.errors.InvalidArgumentError, match="pos_weight are required"):
        tf.nn.weighted_cross_entropy_with_logits(z, lg)


# ---- conv1d, separable convolutions, 1-D pooling -------------------------------------------------
def test_conv1d_and_separable_layers_equal_numpy_with_their_variables():
    from tests.test_ops_nn_ext import ref_depthwise
    rs = np.random.RandomState(0)
    x1, x2 = rs.rand(2, 9, 3), rs.rand(2, 6, 5, 3)
    p1 = tv.placeholder(tv.float64, [None, 9, 3])
    p2 = tv.placeholder(tv.float64, [None, 6, 5, 3])
    binit = tv.constant_initializer(0.25)
    c1 = tv.layers.conv1d(p1, 4, 3, padding="same", bias_initializer=binit)
    s2 = tv.layers.separable_conv2d(p2, 5, 3, padding="same", depth_multiplier=2,
                                    bias_initializer=binit)
    s1 = tv.layers.separable_conv1d(p1, 2, 2, bias_initializer=binit)
    mp, ap = tv.layers.max_pooling1d(p1, 2, 2), tv.layers.average_pooling1d(p1, 3, 3)
    names = [v.op.name for v in tv.global_variables()]
    assert names == ["conv1d/kernel", "conv1d/bias", "separable_conv2d/depthwise_kernel",
                     "separable_conv2d/pointwise_kernel", "separable_conv2d/bias",
                     "separable_conv1d/depthwise_kernel", "separable_conv1d/pointwise_kernel",
                     "separable_conv1d/bias"]
    with tv.Session() as s:
        s.run(tv.global_variables_initializer())
        k1, dk, pk, dk1, pk1 = s.run([tv.global_variables()[i] for i in (0, 2, 3, 5, 6)])
        g1, g2, g3, g4, g5 = s.run([c1, s2, s1, mp, ap], {p1: x1, p2: x2})
    xp = np.pad(x1, ((0, 0), (1, 1), (0, 0)))
    want = np.stack([sum(xp[:, i + k] @ k1[k] for k in range(3)) for i in range(9)], 1) + 0.25
    np.testing.assert_allclose(g1, want, rtol=1e-10)
    assert dk.shape == (3, 3, 3, 2) and pk.shape == (1, 1, 6, 5)
    np.testing.assert_allclose(g2, ref_depthwise(x2, dk) @ pk[0, 0] + 0.25, rtol=1e-10)
    assert dk1.shape == (1, 2, 3, 1) and pk1.shape == (1, 1, 3, 2)
    want = ref_depthwise(x1[:, None], dk1, padding="VALID")[:, 0] @ pk1[0, 0] + 0.25
    np.testing.assert_allclose(g3, want, rtol=1e-10)
    np.testing.assert_array_equal(g4, x1[:, :8].reshape(2, 4, 2, 3).max(2))
    np.testing.assert_allclose(g5, x1.reshape(2, 3, 3, 3).mean(2))


def test_layer_objects_reuse_their_variables_and_check_ranks():
    x = tv.placeholder(tv.float32, [None, 8, 3])
    layer = tv.layers.Conv1D(4, 3, name="c")
    layer(x)
    layer(x)
    assert [v.op.name for v in tv.global_variables()] == ["c/kernel", "c/bias"]
    assert layer.kernel.shape.as_list() == [3, 3, 4]
    assert tv.layers.MaxPooling1D(2, 2)(x).shape.as_list() == [None, 4, 3]
    with pytest.raises(tv.errors.InvalidArgumentError, match="conv1d: inputs must be 3-D"):
        tv.layers.conv1d(tv.placeholder(tv.float32, [None, 3]), 2, 2)
    with pytest.raises(tv.errors.InvalidArgumentError,
                       match="separable_conv2d: the channel dimension of the inputs should be "
                             "defined"):
        tv.layers.separable_conv2d(tv.placeholder(tv.float32, [None, 4, 4, None]), 2, 2)
    with pytest.raises(tv.errors.InvalidArgumentError, match="kernel_size must be an int or a "
                                                             "1-tuple"):
        tv.layers.conv1d(x, 2, (2, 2))
