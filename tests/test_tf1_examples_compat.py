"""The patterns of the classic TF 1.x example programs (aymericdamien/TensorFlow-Examples:
recurrent_network, bidirectional_rnn, dynamic_rnn, dcgan, tensorboard_basic, multigpu_cnn …)
written small and checked against NumPy: each test failed before the API or fix it names.

The recurrent cells are checked in float64 against NumPy re-implementations of TF 1.x's cell
math, their gradients against central differences of those references."""
from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest
import tensorvm as tv

from tests.opcheck import check_forward, check_gradients, numeric_grad


def _sig(z):
    return 1 / (1 + np.exp(-z))


@pytest.fixture
def graph():
    with tv.Graph().as_default() as g:
        yield g


# ---- NumPy references of TF 1.x's cells ---------------------------------------------------------
def np_rnn(x, h, k):
    return np.tanh(np.concatenate([x, h], 1) @ k)  # the bias starts at zero


def np_basic_lstm(x, h, c, k, b, forget_bias=1.0):
    i, j, f, o = np.split(np.concatenate([x, h], 1) @ k + b, 4, axis=1)
    c = c * _sig(f + forget_bias) + _sig(i) * np.tanh(j)
    return np.tanh(c) * _sig(o), c


def np_lstm(x, m, c, k, b, wf, wi, wo, proj, cell_clip, proj_clip):
    i, j, f, o = np.split(np.concatenate([x, m], 1) @ k + b, 4, axis=1)
    c = _sig(f + 1.0 + wf * c) * c + _sig(i + wi * c) * np.tanh(j)
    c = np.clip(c, -cell_clip, cell_clip)
    m = np.clip((_sig(o + wo * c) * np.tanh(c)) @ proj, -proj_clip, proj_clip)
    return m, c


def np_gru(x, h, gk, gb, ck, cb):
    r, u = np.split(_sig(np.concatenate([x, h], 1) @ gk + gb), 2, axis=1)
    cand = np.tanh(np.concatenate([x, r * h], 1) @ ck + cb)
    return u * h + (1 - u) * cand


def np_unroll(step, xs, state, lengths=None):
    """Run ``step(x_t, state) -> new_state`` (a tuple whose first part is the output) over
    ``xs`` [B, T, D] with TF's sequence-length rule (zeros out, state carried past each
    row's length)."""
    outs = []
    for t in range(xs.shape[1]):
        new = step(xs[:, t], state)
        out = new[0]
        if lengths is not None:
            done = (t >= lengths)[:, None]
            out = np.where(done, 0.0, out)
            new = tuple(np.where(done, s, n) for s, n in zip(state, new))
        outs.append(out)
        state = new
    return np.stack(outs, 1), state


def _values(sess, names):
    by_name = {v.op.name: v for v in tv.global_variables()}
    return sess.run([by_name[n] for n in names])


# ---- tf.contrib.rnn / tf.nn.rnn_cell (recurrent_network.py, bidirectional_rnn.py) --------------
def test_contrib_rnn_static_basic_lstm_matches_numpy():
    """recurrent_network.py: ``from tensorflow.contrib import rnn``; BasicLSTMCell over an
    unstacked sequence with rnn.static_rnn (was: no tensorvm.tf_api.contrib)."""
    from tensorvm.tf_api.contrib import rnn
    rng = np.random.default_rng(1)
    xv = rng.normal(size=(3, 4, 2))
    g = tv.Graph()
    with g.as_default():
        x = tv.placeholder(tv.float64, [None, 4, 2])
        cell = rnn.BasicLSTMCell(5, forget_bias=0.5)
        outputs, state = rnn.static_rnn(cell, tv.unstack(x, 4, 1), dtype=tv.float64)
        assert len(outputs) == 4 and isinstance(state, rnn.LSTMStateTuple)
        assert sorted(v.op.name for v in tv.trainable_variables()) == [
            "rnn/basic_lstm_cell/bias", "rnn/basic_lstm_cell/kernel"]
        with tv.Session() as sess:
            sess.run(tv.global_variables_initializer())
            k, b = _values(sess, ["rnn/basic_lstm_cell/kernel", "rnn/basic_lstm_cell/bias"])
            got, (c, h) = sess.run([outputs, state], {x: xv})
    assert k.shape == (7, 20) and np.all(b == 0)
    want, (hw, cw) = np_unroll(lambda xt, s: np_basic_lstm(xt, s[0], s[1], k, b, 0.5), xv,
                               (np.zeros((3, 5)), np.zeros((3, 5))))
    np.testing.assert_allclose(np.stack(got, 1), want, rtol=1e-10)
    np.testing.assert_allclose(h, hw, rtol=1e-10)
    np.testing.assert_allclose(c, cw, rtol=1e-10)


def test_lstm_cell_peepholes_projection_clip_matches_numpy():
    rng = np.random.default_rng(2)
    xv = rng.normal(size=(2, 3, 4)) * 3
    g = tv.Graph()
    with g.as_default():
        x = tv.placeholder(tv.float64, [2, 3, 4])
        cell = tv.nn.rnn_cell.LSTMCell(6, use_peepholes=True, cell_clip=0.7, num_proj=3,
                                       proj_clip=0.4,
                                       initializer=tv.random_uniform_initializer(-1, 1, seed=3))
        assert cell.state_size == (6, 3) and cell.output_size == 3
        outputs, state = tv.nn.static_rnn(cell, tv.unstack(x, axis=1), dtype=tv.float64)
        names = ["rnn/lstm_cell/" + n for n in ("kernel", "bias", "w_f_diag", "w_i_diag",
                                                "w_o_diag", "projection/kernel")]
        with tv.Session() as sess:
            sess.run(tv.global_variables_initializer())
            k, b, wf, wi, wo, proj = _values(sess, names)
            got, (c, m) = sess.run([outputs, state], {x: xv})
    assert k.shape == (4 + 3, 24) and proj.shape == (6, 3)

    want, (mw, cw) = np_unroll(lambda xt, s: np_lstm(xt, s[0], s[1], k, b, wf, wi, wo, proj,
                                                     0.7, 0.4),
                               xv, (np.zeros((2, 3)), np.zeros((2, 6))))
    np.testing.assert_allclose(np.stack(got, 1), want, rtol=1e-10)
    np.testing.assert_allclose(m, mw, rtol=1e-10)
    np.testing.assert_allclose(c, cw, rtol=1e-10)
    assert np.abs(c).max() <= 0.7 + 1e-12 and np.abs(m).max() <= 0.4 + 1e-12


def test_dynamic_rnn_gru_with_sequence_length_matches_numpy():
    """dynamic_rnn in a while loop: zeros past each row's length, the state kept there."""
    rng = np.random.default_rng(3)
    xv, lengths = rng.normal(size=(3, 5, 2)), np.array([5, 2, 0])
    g = tv.Graph()
    with g.as_default():
        x = tv.placeholder(tv.float64, [None, None, 2])
        seq = tv.placeholder(tv.int32, [None])
        cell = tv.nn.rnn_cell.GRUCell(4)
        out, state = tv.nn.dynamic_rnn(cell, x, sequence_length=seq, dtype=tv.float64)
        assert out.shape.as_list() == [None, None, 4]
        names = ["rnn/gru_cell/gates/kernel", "rnn/gru_cell/gates/bias",
                 "rnn/gru_cell/candidate/kernel", "rnn/gru_cell/candidate/bias"]
        with tv.Session() as sess:
            sess.run(tv.global_variables_initializer())
            gk, gb, ck, cb = _values(sess, names)
            got, h = sess.run([out, state], {x: xv, seq: lengths})
    assert np.all(gb == 1.0) and np.all(cb == 0.0)  # TF's GRU gate bias starts at 1
    want, (hw,) = np_unroll(lambda xt, s: (np_gru(xt, s[0], gk, gb, ck, cb),), xv,
                            (np.zeros((3, 4)),), lengths)
    np.testing.assert_allclose(got, want, rtol=1e-10)
    np.testing.assert_allclose(h, hw, rtol=1e-10)
    assert np.all(got[1, 2:] == 0) and np.all(h[2] == 0)


def _rnn_loss_and_grads(use_dynamic, xv, lengths, kernel0):
    g = tv.Graph()
    with g.as_default():
        x = tv.placeholder(tv.float64, xv.shape)
        cell = tv.nn.rnn_cell.BasicRNNCell(3)
        if use_dynamic:
            out, state = tv.nn.dynamic_rnn(cell, x, sequence_length=lengths, dtype=tv.float64)
        else:
            outs, state = tv.nn.static_rnn(cell, tv.unstack(x, axis=1), dtype=tv.float64,
                                           sequence_length=lengths)
            out = tv.stack(outs, 1)
        w = np.linspace(0.5, 1.5, out.shape.num_elements()).reshape(out.shape.as_list())
        loss = tv.reduce_sum(out * w) + tv.reduce_sum(state ** 2)
        kernel = next(v for v in tv.trainable_variables() if v.op.name.endswith("kernel"))
        gk, gx = tv.gradients(loss, [kernel, x])
        with tv.Session() as sess:
            sess.run(tv.global_variables_initializer())
            sess.run(kernel.assign(kernel0))
            return sess.run([loss, gk, tv.convert_to_tensor(gx)], {x: xv}), w


def test_rnn_gradients_match_finite_differences_static_and_dynamic():
    rng = np.random.default_rng(4)
    xv, lengths = rng.normal(size=(2, 4, 2)), np.array([4, 3])
    k0 = rng.normal(size=(5, 3)) * 0.5
    (loss_s, gk_s, gx_s), w = _rnn_loss_and_grads(False, xv, lengths, k0)
    (loss_d, gk_d, gx_d), _ = _rnn_loss_and_grads(True, xv, lengths, k0)

    def np_loss(k, x):
        out, (h,) = np_unroll(lambda xt, s: (np_rnn(xt, s[0], k),), x, (np.zeros((2, 3)),),
                              lengths)
        return float((out * w).sum() + (h ** 2).sum())
    assert loss_s == pytest.approx(np_loss(k0, xv), rel=1e-12)
    assert loss_d == pytest.approx(np_loss(k0, xv), rel=1e-12)
    want_k = numeric_grad(lambda k: np_loss(k, xv), k0)
    want_x = numeric_grad(lambda x: np_loss(k0, x), xv)
    for gk, gx in ((gk_s, gx_s), (gk_d, gx_d)):
        np.testing.assert_allclose(gk, want_k, rtol=1e-6, atol=1e-8)
        np.testing.assert_allclose(gx, want_x, rtol=1e-6, atol=1e-8)


def test_multi_rnn_cell_names_and_dropout_wrapper():
    g = tv.Graph()
    with g.as_default():
        x = tv.placeholder(tv.float32, [2, 3, 4])
        keep = tv.placeholder_with_default(1.0, [])
        cells = [tv.nn.rnn_cell.DropoutWrapper(tv.nn.rnn_cell.BasicLSTMCell(5),
                                               output_keep_prob=keep) for _ in range(2)]
        stack = tv.nn.rnn_cell.MultiRNNCell(cells)
        out, state = tv.nn.dynamic_rnn(stack, x, dtype=tv.float32)
        assert sorted(v.op.name for v in tv.trainable_variables()) == [
            f"rnn/multi_rnn_cell/cell_{i}/basic_lstm_cell/{n}" for i in (0, 1)
            for n in ("bias", "kernel")]
        assert len(state) == 2 and all(isinstance(s, tv.nn.rnn_cell.LSTMStateTuple)
                                       for s in state)
        with tv.Session() as sess:
            sess.run(tv.global_variables_initializer())
            o, h1 = sess.run([out, state[1].h], {x: np.ones((2, 3, 4))})
            o_drop = sess.run(out, {x: np.ones((2, 3, 4)), keep: 0.5})
    np.testing.assert_allclose(o[:, -1], h1, rtol=1e-6)
    assert o.shape == (2, 3, 5) and not np.allclose(o, o_drop)
    with pytest.raises(ValueError, match="same cell object"):
        c = tv.nn.rnn_cell.BasicLSTMCell(2)
        tv.nn.rnn_cell.MultiRNNCell([c, c])


def test_static_bidirectional_rnn_reverses_within_lengths():
    """bidirectional_rnn.py: rnn.static_bidirectional_rnn; fw and bw cells under
    bidirectional_rnn/fw and /bw, each output [fw, bw] concatenated."""
    from tensorvm.tf_api.contrib import rnn
    rng = np.random.default_rng(5)
    xv, lengths = rng.normal(size=(2, 4, 3)), np.array([4, 2])
    g = tv.Graph()
    with g.as_default():
        x = tv.placeholder(tv.float64, [2, 4, 3])
        fw, bw = rnn.BasicRNNCell(2), rnn.BasicRNNCell(2)
        outs, s_fw, s_bw = rnn.static_bidirectional_rnn(fw, bw, tv.unstack(x, 4, 1),
                                                        dtype=tv.float64,
                                                        sequence_length=lengths)
        (d_fw, d_bw), (ds_fw, ds_bw) = tv.nn.bidirectional_dynamic_rnn(
            fw, bw, x, sequence_length=lengths, dtype=tv.float64)
        names = ["bidirectional_rnn/fw/basic_rnn_cell/kernel",
                 "bidirectional_rnn/bw/basic_rnn_cell/kernel"]
        with tv.Session() as sess:
            sess.run(tv.global_variables_initializer())
            kf, kb = _values(sess, names)
            got, sf, sb, dfw, dbw, dsf, dsb = sess.run(
                [outs, s_fw, s_bw, d_fw, d_bw, ds_fw, ds_bw], {x: xv})
    want_f, (hf,) = np_unroll(lambda xt, s: (np_rnn(xt, s[0], kf),), xv, (np.zeros((2, 2)),),
                              lengths)
    rev = np.stack([np.concatenate([xv[i, :n][::-1], xv[i, n:]]) for i, n in
                    enumerate(lengths)])
    want_b, (hb,) = np_unroll(lambda xt, s: (np_rnn(xt, s[0], kb),), rev, (np.zeros((2, 2)),),
                              lengths)
    want_b = np.stack([np.concatenate([want_b[i, :n][::-1], want_b[i, n:]]) for i, n in
                       enumerate(lengths)])
    np.testing.assert_allclose(np.stack(got, 1), np.concatenate([want_f, want_b], 2),
                               rtol=1e-10)
    np.testing.assert_allclose(sf, hf, rtol=1e-10)
    np.testing.assert_allclose(sb, hb, rtol=1e-10)
    np.testing.assert_allclose(dfw, want_f, rtol=1e-10)  # the dynamic pair shares the cells
    np.testing.assert_allclose(dbw, want_b, rtol=1e-10)
    np.testing.assert_allclose(dsf, hf, rtol=1e-10)
    np.testing.assert_allclose(dsb, hb, rtol=1e-10)


def test_rnn_errors_are_tf_errors():
    cell = tv.nn.rnn_cell.BasicRNNCell(2)
    with pytest.raises(TypeError, match="inputs must be a sequence"):
        tv.nn.static_rnn(cell, tv.zeros([2, 3]), dtype=tv.float32)
    with pytest.raises(ValueError, match="you must give a dtype"):
        tv.nn.dynamic_rnn(cell, tv.zeros([2, 3, 4]))
    with pytest.raises(ValueError, match=r"Input size \(depth of inputs\) must be accessible"):
        tv.nn.dynamic_rnn(cell, tv.placeholder(tv.float32, [2, 3, None]), dtype=tv.float32)
    with pytest.raises(AttributeError, match="has no attribute 'factorization': tensorvm provides "
                                             "tf.contrib.rnn, tf.contrib.layers"):
        tv.contrib.factorization  # noqa: B018


# ---- reverse_sequence and sequence_mask -------------------------------------------------------
def _np_reverse_sequence(x, lens, seq_axis, batch_axis):
    out = np.array(x, copy=True)
    for b, n in enumerate(lens):
        src = [slice(None)] * x.ndim
        src[batch_axis], src[seq_axis] = b, slice(0, n)
        dst_view = out[tuple(src)]
        red_axis = seq_axis - (batch_axis < seq_axis)
        out[tuple(src)] = np.flip(x[tuple(src)], red_axis) if n else dst_view
    return out


@pytest.mark.parametrize("seq_axis,batch_axis", [(1, 0), (0, 1), (2, 1)])
def test_reverse_sequence_forward_and_gradient(seq_axis, batch_axis):
    rng = np.random.default_rng(6)
    shape = [3, 4, 5]
    x = rng.normal(size=shape)
    lens = rng.integers(0, shape[seq_axis] + 1, size=shape[batch_axis])
    def build(t):
        return tv.reverse_sequence(t, lens, seq_axis=seq_axis, batch_axis=batch_axis)
    check_forward(build, lambda a: _np_reverse_sequence(a, lens, seq_axis, batch_axis), x)
    check_gradients(build, x)


def test_reverse_sequence_errors():
    with pytest.raises(tv.errors.InvalidArgumentError, match="seq_dim == batch_dim"):
        tv.reverse_sequence(tv.zeros([2, 3]), [1, 1], seq_axis=1, batch_axis=1)
    with pytest.raises(tv.errors.InvalidArgumentError, match="vector of length"):
        tv.reverse_sequence(tv.zeros([2, 3]), [1, 1, 1], seq_axis=1, batch_axis=0)
    lens = tv.placeholder(tv.int32, [2])
    y = tv.reverse_sequence(tv.zeros([2, 3]), lens, seq_axis=1)
    with tv.Session() as sess, pytest.raises(tv.errors.InvalidArgumentError,
                                             match=r"seq_lens\(1\) = 4"):
        sess.run(y, {lens: [1, 4]})


def test_sequence_mask():
    with tv.Session() as sess:
        got, f = sess.run([tv.sequence_mask([1, 3, 0]),
                           tv.sequence_mask([[1], [2]], maxlen=3, dtype=tv.float32)])
    assert got.tolist() == [[True, False, False], [True, True, True], [False, False, False]]
    assert f.dtype == np.float32 and f.tolist() == [[[1, 0, 0]], [[1, 1, 0]]]


# ---- tf.layers under a reused variable scope (gan.py / dcgan.py discriminators) ---------------
def test_layers_default_names_repeat_when_a_named_scope_is_reentered(graph):
    """dcgan.py: ``discriminator(x, reuse)`` opens variable_scope('Discriminator', reuse=…)
    and calls tf.layers.conv2d twice; the second call of the function must find
    Discriminator/conv2d and Discriminator/conv2d_1 again (TF closes a scope's sub-scope
    counts when it is re-entered; was: ValueError 'Discriminator/conv2d_2/kernel does not
    exist')."""
    def disc(x, reuse=False):
        with tv.variable_scope("Discriminator", reuse=reuse):
            h = tv.layers.dense(x, 3, activation=tv.nn.relu)
            return tv.layers.dense(h, 1)
    x = tv.placeholder(tv.float32, [None, 2])
    a, b = disc(x), disc(x * 2.0, reuse=True)
    assert sorted(v.op.name for v in tv.trainable_variables()) == [
        "Discriminator/dense/bias", "Discriminator/dense/kernel",
        "Discriminator/dense_1/bias", "Discriminator/dense_1/kernel"]
    with tv.Session() as sess:
        sess.run(tv.global_variables_initializer())
        va, vb = sess.run([a, b], {x: [[1.0, -1.0]]})
        vb2 = sess.run(a, {x: [[2.0, -2.0]]})
    np.testing.assert_allclose(vb, vb2)  # the same weights
    with pytest.raises(ValueError, match="Discriminator/dense/kernel already exists"):
        disc(x)  # re-entered without reuse: the same names, refused as in TF


# ---- tf.nn.conv2d_transpose / tf.layers.conv2d_transpose (dcgan.py) ---------------------------
def _np_conv2d_transpose(v, f, out_shape, s, padding):
    n, h, w, _ = v.shape
    kh, kw = f.shape[:2]
    oh, ow = out_shape[1:3]
    if padding == "SAME":
        pt = max((h - 1) * s + kh - oh, 0) // 2
        pl = max((w - 1) * s + kw - ow, 0) // 2
    else:
        pt = pl = 0
    full = np.zeros((n, oh + kh + (h - 1) * s, ow + kw + (w - 1) * s, f.shape[2]))
    for i in range(h):
        for j in range(w):
            full[:, i * s:i * s + kh, j * s:j * s + kw] += np.einsum("no,abco->nabc",
                                                                     v[:, i, j], f)
    return full[:, pt:pt + oh, pl:pl + ow]


@pytest.mark.parametrize("padding,hw,s,k,out_hw", [("SAME", 3, 2, 3, 6), ("VALID", 3, 2, 3, 7),
                                                   ("SAME", 4, 1, 3, 4), ("SAME", 2, 2, 4, 4)])
def test_conv2d_transpose_forward_and_gradients(padding, hw, s, k, out_hw):
    rng = np.random.default_rng(7)
    v, f = rng.normal(size=(2, hw, hw, 3)), rng.normal(size=(k, k, 2, 3))
    out_shape = [2, out_hw, out_hw, 2]

    def build(vt, ft):
        return tv.nn.conv2d_transpose(vt, ft, out_shape, [1, s, s, 1], padding)
    check_forward(build, lambda a, b: _np_conv2d_transpose(a, b, out_shape, s, padding), v, f,
                  rtol=1e-10)
    check_gradients(build, v, f)


def test_layers_conv2d_transpose_shapes_names_and_errors(graph):
    x = tv.placeholder(tv.float32, [None, 7, 7, 8])
    y = tv.layers.conv2d_transpose(x, 4, 5, strides=2, padding="same")
    z = tv.layers.conv2d_transpose(y, 1, 2, strides=2)  # "valid": 14 * 2 + max(2 - 2, 0)
    assert y.shape.as_list() == [None, 14, 14, 4] and z.shape.as_list() == [None, 28, 28, 1]
    assert sorted(v.op.name for v in tv.trainable_variables()) == [
        "conv2d_transpose/bias", "conv2d_transpose/kernel", "conv2d_transpose_1/bias",
        "conv2d_transpose_1/kernel"]
    with tv.Session() as sess:
        sess.run(tv.global_variables_initializer())
        out = sess.run(z, {x: np.ones((3, 7, 7, 8), np.float32)})
    assert out.shape == (3, 28, 28, 1) and out.dtype == np.float32
    with pytest.raises(ValueError, match="input channels does not match"):
        tv.nn.conv2d_transpose(x, tv.zeros([3, 3, 2, 5]), [1, 14, 14, 2], [1, 2, 2, 1])
    with pytest.raises(tv.errors.InvalidArgumentError, match="Size of out_backprop"):
        tv.nn.conv2d_transpose(x, tv.zeros([3, 3, 2, 8]), [1, 9, 9, 2], [1, 2, 2, 1])


# ---- feeds (dcgan.py feeds np.ones([batch]) to an int32 label placeholder) --------------------
def test_integral_float_feed_to_int_placeholder_is_accepted():
    """TF 1.x converts any float feed to an int placeholder (truncating); tensorvm accepts the
    lossless case, floats holding whole numbers (was: 'the conversion would lose data'), and
    still refuses 1.5."""
    labels = tv.placeholder(tv.int32, [None])
    with tv.Session() as sess:
        got = sess.run(labels * 2, {labels: np.concatenate([np.ones(2), np.zeros(2)])})
        assert got.dtype == np.int32 and got.tolist() == [2, 2, 0, 0]
        with pytest.raises(tv.errors.InvalidArgumentError, match="would lose data"):
            sess.run(labels, {labels: np.array([1.5, 0.0])})
        with pytest.raises(tv.errors.InvalidArgumentError, match="would lose data"):
            sess.run(labels, {labels: np.array([np.nan])})


# ---- device functions reading op.node_def (multigpu_cnn.py's assign_to_device) ----------------
def test_device_function_reading_node_def_pins_variables(graph):
    """multigpu_cnn.py: ``node_def = op if isinstance(op, tf.NodeDef) else op.node_def``;
    variables to the PS device, the rest to the tower's (was: no tf.NodeDef, no
    Operation.node_def)."""
    def assign_to_device(device, ps_device="/cpu:0"):
        def _assign(op):
            node_def = op if isinstance(op, tv.NodeDef) else op.node_def
            return "/" + ps_device if node_def.op in ("Variable", "VariableV2") else device
        return _assign
    with tv.device(assign_to_device("/gpu:0", ps_device="cpu:0")):
        w = tv.Variable(tv.ones([2]), name="w")
        y = tv.reduce_sum(w * 3.0)
    assert w.op.device.endswith("CPU:0") and y.op.device.endswith("GPU:0")
    nd = y.op.node_def
    assert nd.op == "Sum" and nd.name == y.op.name and nd.input[0] == y.op.inputs[0].op.name
    with tv.Session() as sess:  # soft placement: the GPU op runs where it can
        sess.run(tv.global_variables_initializer())
        assert sess.run(y) == 6.0


# ---- a FileWriter the program never closes (tensorboard_basic.py) -----------------------------
def test_unclosed_file_writer_flushes_at_exit_without_traceback(tmp_path):
    """tensorboard_basic.py never closes its FileWriter: TF 1.x flushes it at exit; here the
    writer thread died with a traceback at interpreter shutdown and pending events could be
    lost."""
    ea_mod = pytest.importorskip("tensorboard.backend.event_processing.event_accumulator")
    prog = textwrap.dedent(f"""
        import tensorvm as tf
        x = tf.constant(2.5)
        s = tf.summary.scalar("loss", x)
        w = tf.summary.FileWriter({str(tmp_path)!r}, graph=tf.get_default_graph())
        with tf.Session() as sess:
            for step in range(3):
                w.add_summary(sess.run(s), step)
        print("done")
    """)
    proc = subprocess.run([sys.executable, "-c", prog], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0 and proc.stdout.strip() == "done", proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr and "Exception in thread" not in proc.stderr, \
        proc.stderr[-2000:]
    ea = ea_mod.EventAccumulator(str(tmp_path))
    ea.Reload()
    assert [(e.step, e.value) for e in ea.Scalars("loss")] == [(0, 2.5), (1, 2.5), (2, 2.5)]


# ---- tf.metrics and tf.logging (neural_network.py / convolutional_network.py) -----------------
def test_metrics_accuracy_and_mean_stream_over_batches(graph):
    """``acc, acc_op = tf.metrics.accuracy(labels, predictions)``: local variables
    accuracy/total and accuracy/count, the update op returns the running value (was: no
    tf.metrics)."""
    labels = tv.placeholder(tv.int64, [None])
    preds = tv.placeholder(tv.int64, [None])
    w = tv.placeholder(tv.float32, [None])
    acc, acc_op = tv.metrics.accuracy(labels=labels, predictions=preds)
    m, m_op = tv.metrics.mean(tv.cast(labels, tv.float32), weights=w)
    assert sorted(v.op.name for v in tv.local_variables()) == [
        "accuracy/count", "accuracy/total", "mean/count", "mean/total"]
    assert tv.trainable_variables() == [] and len(tv.get_collection("metric_variables")) == 4
    with tv.Session() as sess:
        sess.run(tv.local_variables_initializer())
        assert sess.run(acc) == 0.0  # no data yet: 0, not NaN
        r1 = sess.run(acc_op, {labels: [1, 2, 3, 4], preds: [1, 2, 0, 0]})
        r2 = sess.run(acc_op, {labels: [5, 6], preds: [5, 6]})
        sess.run(m_op, {labels: [1, 3], w: [1.0, 3.0]})
        assert (r1, r2, sess.run(acc)) == (0.5, pytest.approx(4 / 6), pytest.approx(4 / 6))
        assert sess.run(m) == pytest.approx((1 + 9) / 4)
    with pytest.raises(tv.errors.InvalidArgumentError, match="labels and predictions"):
        tv.metrics.accuracy(tv.zeros([3]), tv.zeros([4]))


def test_logging_module(caplog):
    """``tf.logging.set_verbosity(tf.logging.INFO)`` and ``tf.logging.info`` (was: no
    tf.logging)."""
    import logging
    old = tv.logging.get_verbosity()
    try:
        tv.logging.set_verbosity(tv.logging.INFO)
        assert tv.logging.get_verbosity() == tv.logging.INFO == logging.INFO
        with caplog.at_level(logging.INFO, logger="tensorflow"):
            tv.logging.info("step %d", 3)
            tv.logging.debug("hidden")
        assert [r.getMessage() for r in caplog.records] == ["step 3"]
    finally:
        tv.logging.set_verbosity(old)


# ---- optimizer slot names (save_restore_model.py restoring a TF-written checkpoint) -----------
def test_optimizer_slot_variables_are_named_as_tf_names_them(graph):
    """TF names slots ``<var>/<optimizer name>`` made unique (``Variable/Adam``,
    ``Variable/Adam_1``, ``w/RMSProp_1``), so a checkpoint TF wrote with its optimizer state
    restores (was: ``Variable/Adam/Adam``, NotFoundError on restore)."""
    w = tv.Variable(tv.zeros([2]))
    k = tv.get_variable("dense/kernel", [2])
    loss = tv.reduce_sum(w * w) + tv.reduce_sum(k)
    tv.train.AdamOptimizer(0.1).minimize(loss)
    tv.train.MomentumOptimizer(0.1, 0.9).minimize(loss)
    tv.train.RMSPropOptimizer(0.1, momentum=0.5).minimize(loss, var_list=[w])
    assert [v.op.name for v in tv.global_variables()] == [
        "Variable", "dense/kernel", "beta1_power", "beta2_power", "Variable/Adam",
        "Variable/Adam_1", "dense/kernel/Adam", "dense/kernel/Adam_1", "Variable/Momentum",
        "dense/kernel/Momentum", "Variable/RMSProp", "Variable/RMSProp_1"]
