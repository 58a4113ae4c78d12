"""tv.TensorArray (TF 1.x, graph mode): forward against NumPy, TF's errors by class and message,
as a while_loop variable, and gradients against finite differences and the unrolled graph."""
from __future__ import annotations

import pickle

import numpy as np
import pytest
import tensorvm as tv
from tensorvm.ops.control.tensor_array_value import TensorArrayValue

from tests.opcheck import check_gradients, numeric_grad


def run(fetches, feed=None):
    with tv.Session() as s:
        return s.run(fetches, feed)


@pytest.fixture
def graph():
    with tv.Graph().as_default() as g:
        yield g


# ---- forward ------------------------------------------------------------------------------------
def test_write_read_stack_size(graph):
    ta = tv.TensorArray(tv.float32, size=3)
    ta2 = ta.write(0, [1.0, 2.0]).write(2, [5.0, 6.0]).write(1, [3.0, 4.0])
    stacked, r1, n = run([ta2.stack(), ta2.read(1), ta2.size()])
    np.testing.assert_array_equal(stacked, [[1, 2], [3, 4], [5, 6]])
    assert stacked.dtype == np.float32 and r1.tolist() == [3.0, 4.0] and int(n) == 3
    assert ta2.stack().shape.as_list() == [3, 2] and ta2.read(0).shape.as_list() == [2]
    assert ta.element_shape.as_list() == [2]  # one lineage shares its element shape (TF)
    assert isinstance(ta2.flow, tv.Tensor) and ta2.dtype == tv.float32


def test_unstack_gather_scatter_concat_split_identity_close(graph):
    x = np.arange(12, dtype=np.float64).reshape(4, 3)
    ta = tv.TensorArray(tv.float64, size=4).unstack(x)
    got = run([ta.stack(), ta.gather([3, 0, 3]), ta.read(2), ta.concat(), ta.identity().stack()])
    np.testing.assert_array_equal(got[0], x)
    np.testing.assert_array_equal(got[1], x[[3, 0, 3]])
    np.testing.assert_array_equal(got[2], x[2])
    np.testing.assert_array_equal(got[3], x.reshape(-1))
    np.testing.assert_array_equal(got[4], x)
    sc = tv.TensorArray(tv.float64, size=4).scatter([2, 0, 1, 3], x)
    np.testing.assert_array_equal(run(sc.stack()), x[[1, 2, 0, 3]])
    sp = tv.TensorArray(tv.float64, size=3, infer_shape=False).split(x, [1, 0, 3])
    parts, total = run([[sp.read(0), sp.read(1), sp.read(2)], sp.concat()])
    assert [p.shape for p in parts] == [(1, 3), (0, 3), (3, 3)]
    np.testing.assert_array_equal(total, x)
    assert isinstance(ta.close(), tv.Operation)


def test_dynamic_size_grows_and_unwritten_known_shape_reads_zeros(graph):
    ta = tv.TensorArray(tv.float32, size=0, dynamic_size=True).write(4, 1.0)
    stacked, n = run([ta.stack(), ta.size()])
    assert stacked.tolist() == [0, 0, 0, 0, 1] and int(n) == 5  # TF's result
    assert ta.stack().shape.as_list() == [None]
    z = tv.TensorArray(tv.float32, 3, element_shape=[2]).read(1)
    assert run(z).tolist() == [0.0, 0.0]


def test_size_from_a_tensor_and_stack_of_empty_with_known_shape(graph):
    n = tv.placeholder(tv.int32, [])
    ta = tv.TensorArray(tv.float32, n)
    ta = ta.unstack(tv.zeros([n, 2]))
    assert run(ta.stack(), {n: 3}).shape == (3, 2)
    empty = tv.TensorArray(tv.float32, 0, element_shape=[2]).stack()
    assert run(empty).shape == (0, 2)


def test_versions_a_reader_holds_never_change(graph):
    ta = tv.TensorArray(tv.float32, size=2).write(0, 1.0)
    a = ta.write(1, 2.0)
    b = ta.write(1, 3.0)  # a second write from the same flow: another lineage, no error
    assert [v.tolist() for v in run([a.stack(), b.stack()])] == [[1.0, 2.0], [1.0, 3.0]]


def test_writes_append_in_place_and_branches_copy_references_only():
    v0 = TensorArrayValue.new(3)
    x = np.ones(2)
    v1 = v0.updated([(0, x)])
    v2 = v1.updated([(1, x)])
    assert v1._store is v0._store is v2._store  # linear writes: one store, no copy
    assert v2.get(0) is x and v1.get(1) is not x
    v1b = v1.updated([(1, 2 * x)])  # from an older version: a fresh store
    assert v1b._store is not v2._store and v2.get(1) is x and v1b.get(0) is x
    back = pickle.loads(pickle.dumps(v2))
    assert back.indices() == [0, 1] and back.get(1).tolist() == [1.0, 1.0]
    g = TensorArrayValue.empty_grad().updated([(0, x)]) + \
        TensorArrayValue.empty_grad().updated([(0, x), (2, x)])
    assert g.get(0).tolist() == [2.0, 2.0] and g.indices() == [0, 2]
    assert isinstance(np.zeros_like(v2), TensorArrayValue)


# ---- TF's errors --------------------------------------------------------------------------------
def test_runtime_errors_have_tfs_messages(graph):
    def fails(t, cls, msg):
        with pytest.raises(cls, match=msg):
            run(t)
    fails(tv.TensorArray(tv.float32, 3).read(1), tv.errors.InvalidArgumentError,
          r"TensorArray TensorArray(_\d+)?: Could not read from TensorArray index 1\.  "
          r"Furthermore, the element shape is not fully defined: <unknown>\.")
    fails(tv.TensorArray(tv.float32, 3).write(1, 1.0).write(1, 2.0).stack(),
          tv.errors.InvalidArgumentError,
          r"Could not write to TensorArray index 1 because it has already been written to\.")
    fails(tv.TensorArray(tv.float32, 3).write(5, 1.0).stack(), tv.errors.InvalidArgumentError,
          r"Tried to write to index 5 but array is not resizeable and size is: 3")
    fails(tv.TensorArray(tv.float32, 3).write(0, 1.0).read(5), tv.errors.InvalidArgumentError,
          r"Tried to read from index 5 but array size is: 3")
    fails(tv.TensorArray(tv.float32, 3).scatter([2, 5], [1.0, 2.0]).stack(),
          tv.errors.InvalidArgumentError, r"Max scatter index must be < array size \(5 vs\. 3\)")
    fails(tv.TensorArray(tv.float32, 0).stack(), tv.errors.UnimplementedError,
          r"TensorArray has size zero, but element shape <unknown> is not fully defined\. "
          r"Currently only static shapes are supported when packing zero-size TensorArrays\.")
    p = tv.placeholder(tv.float32, [None])
    ta = tv.TensorArray(tv.float32, 2, element_shape=[3]).write(0, p)
    with pytest.raises(tv.errors.InvalidArgumentError,
                       match=r"Could not write to TensorArray index 0 because the value shape "
                             r"is \[2\] which is incompatible with the TensorArray's inferred "
                             r"element shape: \[3\] \(consider setting infer_shape=False\)\."):
        run(ta.stack(), {p: [1.0, 2.0]})
    q = tv.placeholder(tv.float32, None)
    ta = tv.TensorArray(tv.float32, 2, infer_shape=False).write(0, q).write(1, [1.0, 2.0, 3.0])
    with pytest.raises(tv.errors.InvalidArgumentError,
                       match=r"TensorArray has inconsistent shapes\.  Index 0 has shape: \[2\] "
                             r"but index 1 has shape: \[3\]"):
        run(ta.stack(), {q: [1.0, 2.0]})


def test_construction_errors(graph):
    ta = tv.TensorArray(tv.float32, 3)
    with pytest.raises(tv.errors.InvalidArgumentError,
                       match=r"TensorArray dtype is float but Op is trying to write dtype "
                             r"int32\."):
        ta.write(0, tv.constant(1, tv.int32))
    w = ta.write(0, [1.0, 2.0])
    with pytest.raises(ValueError, match=r"Inconsistent shapes: saw \(3,\) but expected "
                                         r"\(2,\) "):
        w.write(1, [1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match="Size must be provided if handle is not provided"):
        tv.TensorArray(tv.float32)


# ---- in a while loop ----------------------------------------------------------------------------
def test_while_loop_carries_a_tensor_array_and_gives_one_back(graph):
    x = np.random.default_rng(1).normal(size=(5, 2, 3))
    xs = tv.TensorArray(tv.float64, size=5).unstack(x)
    out0 = tv.TensorArray(tv.float64, size=5)

    def body(t, out, acc):
        v = xs.read(t)  # captured, not a loop variable
        return t + 1, out.write(t, v * 2.0 + acc), acc + v

    _, out, acc = tv.while_loop(lambda t, *_: t < 5, body,
                                [0, out0, tv.zeros([2, 3], tv.float64)])
    assert isinstance(out, tv.TensorArray) and out.element_shape.as_list() == [2, 3]
    got, a = run([out.stack(), acc])
    want = 2 * x + np.concatenate([np.zeros((1, 2, 3)), np.cumsum(x, 0)[:-1]])
    np.testing.assert_allclose(got, want)
    np.testing.assert_allclose(a, x.sum(0))


def test_while_loop_dynamic_size_and_nested_structure(graph):
    def body(i, d):
        return i + 1, {"ta": d["ta"].write(i, tv.cast(i, tv.float32) ** 2)}
    n = tv.placeholder(tv.int32, [])
    _, d = tv.while_loop(lambda i, d: i < n, body,
                         [0, {"ta": tv.TensorArray(tv.float32, 0, dynamic_size=True)}],
                         shape_invariants=[tv.TensorShape([]), {"ta": tv.TensorShape(None)}])
    assert run(d["ta"].stack(), {n: 4}).tolist() == [0.0, 1.0, 4.0, 9.0]


# ---- gradients ----------------------------------------------------------------------------------
def test_gradients_of_write_read_stack_against_finite_differences():
    def build(a, b):
        ta = tv.TensorArray(tv.float64, 3).write(0, a).write(1, b * a).write(2, b)
        return ta.stack() * ta.read(1)
    rng = np.random.default_rng(2)
    check_gradients(build, rng.normal(size=(2,)), rng.normal(size=(2,)))


def test_gradients_of_unstack_gather_scatter_against_finite_differences():
    rng = np.random.default_rng(3)

    def build(x, y):
        ta = tv.TensorArray(tv.float64, 4).unstack(x)
        g = ta.gather([3, 1, 1])  # a repeated index: its gradients add up
        sc = tv.TensorArray(tv.float64, 3).scatter([2, 0, 1], y * g)
        return sc.stack() + ta.read(0)
    check_gradients(build, rng.normal(size=(4, 2)), rng.normal(size=(3, 2)))


def test_gradients_of_split_and_concat_against_finite_differences():
    rng = np.random.default_rng(11)

    def build(x, y):
        ta = tv.TensorArray(tv.float64, 3, infer_shape=False).split(x, [2, 0, 3])
        out = tv.TensorArray(tv.float64, 2, infer_shape=False)
        out = out.write(0, ta.read(2) * y).write(1, ta.read(0))
        return out.concat()
    check_gradients(build, rng.normal(size=(5, 2)), rng.normal(size=(3, 2)))


def test_gradient_of_unread_elements_is_zero(graph):
    x = tv.constant(np.arange(6.0).reshape(3, 2))
    ta = tv.TensorArray(tv.float64, 3).unstack(x)
    (g,) = tv.gradients(tv.reduce_sum(ta.read(1)), [x])
    np.testing.assert_array_equal(run(g), [[0, 0], [1, 1], [0, 0]])


def _rnn_graph(use_loop, xv, w0):
    """The dynamic_rnn pattern: unstack x, read x_t in the body, write h_t, stack; or the
    same computation unrolled in Python."""
    g = tv.Graph()
    with g.as_default():
        x = tv.constant(xv)
        w = tv.constant(w0)
        T, B, D = xv.shape
        h0 = tv.zeros([B, D], tv.float64)
        if use_loop:
            xs = tv.TensorArray(tv.float64, T).unstack(x)

            def body(t, out, h):
                h = tv.tanh(tv.matmul(xs.read(t) + h, w))
                return t + 1, out.write(t, h), h
            _, out, h = tv.while_loop(lambda t, *_: t < T, body,
                                      [0, tv.TensorArray(tv.float64, T), h0])
            outs = out.stack()
        else:
            hs, h = [], h0
            for t in range(T):
                h = tv.tanh(tv.matmul(x[t] + h, w))
                hs.append(h)
            outs = tv.stack(hs)
        wl = np.random.default_rng(4).uniform(0.5, 1.5, size=xv.shape)
        loss = tv.reduce_sum(outs * wl) + tv.reduce_sum(h * h)
        gx, gw = tv.gradients(loss, [x, w])
        with tv.Session(graph=g) as s:
            return s.run([loss, gx, gw])


def test_rnn_in_a_while_loop_matches_unrolled_and_finite_differences():
    rng = np.random.default_rng(5)
    xv, w0 = rng.normal(size=(6, 2, 3)) * 0.5, rng.normal(size=(3, 3)) * 0.5
    loss_l, gx_l, gw_l = _rnn_graph(True, xv, w0)
    loss_u, gx_u, gw_u = _rnn_graph(False, xv, w0)
    np.testing.assert_allclose(loss_l, loss_u, rtol=1e-12)
    np.testing.assert_allclose(gx_l, gx_u, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(gw_l, gw_u, rtol=1e-10, atol=1e-12)
    num = numeric_grad(lambda w: _rnn_graph(True, xv, w)[0], w0)
    np.testing.assert_allclose(gw_l, num, rtol=1e-6, atol=1e-8)


def test_gradient_through_a_loop_variable_input_array():
    """The input array as a loop variable (not captured): its gradient sums the reads'."""
    rng = np.random.default_rng(6)

    def build(x):
        xs = tv.TensorArray(tv.float64, 4).unstack(x)

        def body(t, xs, acc):
            return t + 1, xs, acc + xs.read(t) * xs.read(3 - t)
        _, _, acc = tv.while_loop(lambda t, *_: t < 4, body, [0, xs, tv.zeros([2], tv.float64)])
        return acc
    check_gradients(build, rng.normal(size=(4, 2)))


def test_gradient_of_an_array_read_in_a_nested_loop(graph):
    xv = np.arange(12.0).reshape(4, 3)
    x = tv.constant(xv)
    xs = tv.TensorArray(tv.float64, 4).unstack(x)

    def outer(i, acc):
        def inner(j, a):
            return j + 1, a + xs.read(i) * tv.cast(j + 1, tv.float64)
        _, a = tv.while_loop(lambda j, a: j < 2, inner, [0, tv.zeros([3], tv.float64)])
        return i + 1, acc.write(i, a)
    _, acc = tv.while_loop(lambda i, a: i < 4, outer, [0, tv.TensorArray(tv.float64, 4)])
    s = acc.stack()
    (g,) = tv.gradients(tv.reduce_sum(s * s), [x])
    sv, gv = run([s, g])
    np.testing.assert_allclose(sv, 3 * xv)
    np.testing.assert_allclose(gv, 18 * xv)


# ---- dynamic_rnn on TensorArrays ----------------------------------------------------------------
def _lstm_run(use_dynamic, xv, lengths, unknown_time):
    g = tv.Graph()
    with g.as_default():
        shape = [xv.shape[0], None if unknown_time else xv.shape[1], xv.shape[2]]
        x = tv.placeholder(tv.float64, shape)
        cell = tv.nn.rnn_cell.BasicLSTMCell(4)
        if use_dynamic:
            out, state = tv.nn.dynamic_rnn(cell, x, sequence_length=lengths, dtype=tv.float64)
        else:
            outs, state = tv.nn.static_rnn(cell, tv.unstack(x, xv.shape[1], 1),
                                           sequence_length=lengths, dtype=tv.float64)
            out = tv.stack(outs, 1)
        wl = np.random.default_rng(8).uniform(0.5, 1.5, size=(xv.shape[0], xv.shape[1], 4))
        loss = tv.reduce_sum(out * wl) + tv.reduce_sum(state.h * state.c)
        grads = tv.gradients(loss, [x] + tv.trainable_variables())
        rng = np.random.default_rng(10)
        inits = [tv.assign(v, rng.normal(size=v.shape.as_list()) * 0.5)
                 for v in tv.trainable_variables()]
        with tv.Session(graph=g) as s:
            s.run(inits)
            return out.shape.as_list(), s.run([out, loss] + grads, {x: xv})


@pytest.mark.parametrize("unknown_time", [False, True])
def test_dynamic_rnn_matches_static_rnn_values_and_gradients(unknown_time):
    xv = np.random.default_rng(9).normal(size=(3, 5, 2))
    shape_d, got = _lstm_run(True, xv, [5, 2, 0], unknown_time)
    shape_s, want = _lstm_run(False, xv, [5, 2, 0], False)
    assert shape_d == ([3, None, 4] if unknown_time else [3, 5, 4]) and shape_s == [3, 5, 4]
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)


def test_dynamic_rnn_step_never_copies_an_array(monkeypatch):
    """Forward and backward, every write appends to its array's store (O(1)): no version is
    ever copied (a copy would make the loop O(T^2) again)."""
    copies = []
    snapshot = TensorArrayValue._snapshot
    monkeypatch.setattr(TensorArrayValue, "_snapshot",
                        lambda self: copies.append(1) or snapshot(self))
    g = tv.Graph()
    with g.as_default():
        x = tv.placeholder(tv.float32, [4, 30, 3])
        out, _ = tv.nn.dynamic_rnn(tv.nn.rnn_cell.BasicLSTMCell(5), x, dtype=tv.float32)
        grads = tv.gradients(tv.reduce_sum(out), [x] + tv.trainable_variables())
        with tv.Session(graph=g) as s:
            s.run(tv.global_variables_initializer())
            gx = s.run(grads, {x: np.ones((4, 30, 3), np.float32)})[0]
    assert gx.shape == (4, 30, 3) and np.all(gx[:, 0] != 0) and copies == []


# ---- TensorArrays through tv.cond -----------------------------------------------------------------
def test_cond_returns_tensor_arrays_from_both_branches(graph):
    p = tv.placeholder(tv.bool, [])
    x = tv.placeholder(tv.float32, [3, 2])
    base = tv.TensorArray(tv.float32, size=3).unstack(x)
    out = tv.cond(p, lambda: {"ta": tv.TensorArray(tv.float32, 3).unstack(x * 2.0), "n": 1},
                  lambda: {"ta": base, "n": 2})
    assert isinstance(out["ta"], tv.TensorArray) and out["ta"].dtype == tv.float32
    assert out["ta"].element_shape.as_list() == [2]  # both branches' (2,)
    xv = np.arange(6, dtype=np.float32).reshape(3, 2)
    for pv, want, n in ((True, xv * 2, 1), (False, xv, 2)):
        got, r2, k = run([out["ta"].stack(), out["ta"].read(2), out["n"]], {p: pv, x: xv})
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(r2, want[2])
        assert int(k) == n
    # the returned array is written on like any other (TF's build_ta_with_new_flow)
    empty = tv.cond(p, lambda: tv.TensorArray(tv.float32, 2),
                    lambda: tv.TensorArray(tv.float32, 2, dynamic_size=True))
    assert empty.dynamic_size and empty.element_shape == tv.TensorShape(None)
    more = empty.write(0, [9.0, 8.0]).write(1, x[0])
    assert more.element_shape.as_list() == [2]
    for pv in (True, False):
        assert run(more.stack(), {p: pv, x: xv}).tolist() == [[9, 8], [0, 1]]


def test_cond_arrays_of_different_element_shapes_give_the_common_shape(graph):
    p = tv.placeholder(tv.bool, [])
    a = tv.TensorArray(tv.float32, 2).write(0, [1.0, 2.0]).write(1, [3.0, 4.0])
    b = tv.TensorArray(tv.float32, 2).write(0, [1.0, 2.0, 3.0]).write(1, [4.0, 5.0, 6.0])
    out = tv.cond(p, lambda: a, lambda: b)
    assert out.element_shape.as_list() == [None] and out.stack().shape.as_list() == [2, None]
    assert run(out.stack(), {p: False}).tolist() == [[1, 2, 3], [4, 5, 6]]
    assert run(out.stack(), {p: True}).tolist() == [[1, 2], [3, 4]]


def test_cond_of_tensor_arrays_gradients_against_finite_differences():
    def build(x, y):
        ta = tv.TensorArray(tv.float64, 3).unstack(x)
        out = tv.cond(tv.reduce_sum(y) > 0,
                      lambda: tv.TensorArray(tv.float64, 3).unstack(ta.stack() * y),
                      lambda: tv.TensorArray(tv.float64, 3).unstack(ta.stack() + y * y))
        return out.stack() * out.read(1)
    rng = np.random.default_rng(5)
    x = rng.normal(size=(3, 2))
    check_gradients(build, x, np.abs(rng.normal(size=(3, 2))))  # the true branch
    check_gradients(build, x, -np.abs(rng.normal(size=(3, 2))))  # the false branch


def test_cond_writing_a_loop_array_in_each_branch_value_and_gradient(graph):
    # the TF 1.x pattern: ta = tf.cond(c, lambda: ta.write(i, f(x)), lambda: ta.write(i, g(x)))
    x = tv.placeholder(tv.float32, [4])

    def body(i, ta):
        return i + 1, tv.cond(tv.equal(i % 2, 0), lambda: ta.write(i, x[i] * x[i]),
                              lambda: ta.write(i, 3.0 * x[i]))
    _, ta = tv.while_loop(lambda i, ta: i < 4, body, [0, tv.TensorArray(tv.float32, size=4)])
    assert isinstance(ta, tv.TensorArray)
    w = np.array([1.0, 2.0, 3.0, 4.0], np.float32)
    (g,) = tv.gradients(tv.reduce_sum(ta.stack() * w), [x])
    xv = np.array([1.0, 2.0, 3.0, 4.0], np.float32)
    y, gv = run([ta.stack(), g], {x: xv})
    even = np.arange(4) % 2 == 0
    np.testing.assert_allclose(y, np.where(even, xv * xv, 3 * xv))
    np.testing.assert_allclose(gv, w * np.where(even, 2 * xv, 3.0))


def test_cond_reads_an_outer_tensor_array_and_its_gradient(graph):
    p = tv.placeholder(tv.bool, [])
    x = tv.placeholder(tv.float32, [4])
    ta = tv.TensorArray(tv.float32, size=4).unstack(x)
    r = tv.cond(p, lambda: ta.read(1) * 5.0, lambda: ta.read(2))
    (g,) = tv.gradients(r, [x])
    xv = np.array([1.0, 2.0, 3.0, 4.0], np.float32)
    rv, gv = run([r, g], {p: True, x: xv})
    assert float(rv) == 10.0 and gv.tolist() == [0, 5, 0, 0]
    rv, gv = run([r, g], {p: False, x: xv})
    assert float(rv) == 3.0 and gv.tolist() == [0, 0, 1, 0]


def test_case_returns_a_tensor_array(graph):
    k = tv.placeholder(tv.int32, [])
    arrs = [tv.TensorArray(tv.int32, 2).unstack(tv.constant([j, 10 * j])) for j in range(3)]
    out = tv.case([(tv.equal(k, 0), lambda: arrs[0]), (tv.equal(k, 1), lambda: arrs[1])],
                  default=lambda: arrs[2])
    assert [run(out.stack(), {k: v}).tolist() for v in (0, 1, 2)] == \
        [[0, 0], [1, 10], [2, 20]]


def test_cond_tensor_array_mismatches_fail_when_built(graph):
    p = tv.placeholder(tv.bool, [])
    fa = tv.TensorArray(tv.float32, 1).write(0, 1.0)
    ia = tv.TensorArray(tv.int32, 1).write(0, 1)
    with pytest.raises(tv.errors.InvalidArgumentError,
                       match="cond: output 0 is a TensorArray of float in true_fn but of int32 "
                             "in false_fn"):
        tv.cond(p, lambda: fa, lambda: ia)
    with pytest.raises(tv.errors.InvalidArgumentError,
                       match=r"true_fn returned TensorArray of float32, false_fn float32 tensor"):
        tv.cond(p, lambda: fa, lambda: tv.constant(1.0))



def test_cond_writes_an_outer_array_in_one_branch_and_passes_it_in_the_other(graph):
    p = tv.placeholder(tv.bool, [])
    x = tv.placeholder(tv.float32, [3])
    ta = tv.TensorArray(tv.float32, size=4).write(0, x[0]).write(1, x[1]).write(2, x[2])
    out = tv.cond(p, lambda: ta.write(3, x[0] * x[1]), lambda: ta)
    y = out.stack()
    (g,) = tv.gradients(tv.reduce_sum(y * tv.constant([1.0, 2.0, 3.0, 4.0])), [x])
    xv = np.array([2.0, 5.0, 7.0], np.float32)
    yv, gv = run([y, g], {p: True, x: xv})
    assert yv.tolist() == [2, 5, 7, 10] and gv.tolist() == [1 + 4 * 5, 2 + 4 * 2, 3]
    yv, gv = run([y, g], {p: False, x: xv})
    assert yv.tolist() == [2, 5, 7, 0] and gv.tolist() == [1, 2, 3]  # index 3 reads zeros


def test_nested_conds_return_tensor_arrays_with_gradients(graph):
    p, q = tv.placeholder(tv.bool, []), tv.placeholder(tv.bool, [])
    x = tv.placeholder(tv.float32, [2])
    ta = tv.TensorArray(tv.float32, size=2)
    out = tv.cond(p, lambda: tv.cond(q, lambda: ta.write(0, x[0] * 2.0).write(1, x[1]),
                                     lambda: ta.unstack(x * x)),
                  lambda: ta.unstack(-x))
    y = out.stack()
    (g,) = tv.gradients(tv.reduce_sum(y * [1.0, 10.0]), [x])
    xv = np.array([3.0, 4.0], np.float32)
    cases = {(True, True): ([6, 4], [2, 10]), (True, False): ([9, 16], [6, 80]),
             (False, True): ([-3, -4], [-1, -10])}
    for (pv, qv), (want_y, want_g) in cases.items():
        yv, gv = run([y, g], {p: pv, q: qv, x: xv})
        assert yv.tolist() == want_y and gv.tolist() == want_g
