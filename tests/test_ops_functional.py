"""map_fn, foldl, foldr and scan (core/ops/functional_ops.py): results against Python loops,
nested structures, dtype=, static shapes, gradients against finite differences, errors by class
and message (TF 1.x's)."""
import collections
import functools

import numpy as np
import pytest
from opcheck import check_gradients, run

import tensorvm as tv

rng = np.random.default_rng(99)
X = np.array([1.0, 2.0, 3.0, 4.0], np.float32)
Y = np.array([[1, 2], [3, 4], [5, 6], [7, 8]], np.int32)


def _scan_ref(fn, xs, init=None, reverse=False):
    xs = list(xs)[::-1] if reverse else list(xs)
    out, a = [], init
    for k, v in enumerate(xs):
        a = v if (init is None and k == 0) else fn(a, v)
        out.append(a)
    return np.array(out[::-1] if reverse else out)


def test_map_fn_single_nested_and_dtype():
    x, y = tv.constant(X), tv.constant(Y)
    sq = tv.map_fn(lambda v: v * v, x)
    pair = tv.map_fn(lambda t: (t[0] + 1.0, t[1] * 2), (x, y))
    mixed = tv.map_fn(lambda t: tv.cast(t[1][0], tv.float32) * t[0], (x, y), dtype=tv.float32)
    d = tv.map_fn(lambda e: {"a": e["a"] - 1.0, "b": e["b"][::-1]}, {"a": x, "b": y})
    sig = tv.map_fn(lambda v: (v > 2.0, tv.cast(v, tv.int64)), x,
                    fn_output_signature=(tv.bool, tv.int64))
    got = run([sq, pair, mixed, d, sig])
    np.testing.assert_array_equal(got[0], X * X)
    np.testing.assert_array_equal(got[1][0], X + 1)
    np.testing.assert_array_equal(got[1][1], Y * 2)
    np.testing.assert_array_equal(got[2], Y[:, 0] * X)
    np.testing.assert_array_equal(got[3]["a"], X - 1)
    np.testing.assert_array_equal(got[3]["b"], Y[:, ::-1])
    assert got[4][0].tolist() == [False, False, True, True]
    assert got[4][1].dtype == np.int64
    assert sq.shape.as_list() == [4] and pair[1].shape.as_list() == [4, 2]


def test_map_fn_on_a_fed_batch_of_unknown_size():
    ph = tv.placeholder(tv.float32, [None, 3])
    out = tv.map_fn(lambda r: tv.reduce_sum(r) * 2.0, ph, parallel_iterations=4)
    assert out.shape.as_list() == [None]
    with tv.Session() as s:
        for n in (1, 5):
            v = rng.normal(size=(n, 3)).astype(np.float32)
            np.testing.assert_allclose(s.run(out, {ph: v}), v.sum(1) * 2.0, rtol=1e-6)


def test_map_fn_and_scan_over_an_empty_batch_give_empty_results():
    ph = tv.placeholder(tv.float32, [None, 3])
    out = tv.map_fn(lambda r: tv.reduce_sum(r) * 2.0, ph)
    rows = tv.map_fn(lambda r: r * 2.0, ph)
    sc = tv.scan(lambda a, r: a + r, ph, initializer=tv.zeros([3]))
    with tv.Session() as s:
        got = s.run([out, rows, sc], {ph: np.zeros((0, 3), np.float32)})
        assert [g.shape for g in got] == [(0,), (0, 3), (0, 3)]
        got = s.run([out, rows, sc], {ph: np.ones((2, 3), np.float32)})
        assert got[0].tolist() == [6.0, 6.0] and got[2].tolist() == [[1.0] * 3, [2.0] * 3]
    # gradients through the stack's cond, for a batch and for no batch
    ph = tv.placeholder(tv.float64, [None, 2])
    y = tv.map_fn(lambda r: r * r, ph)
    sc2 = tv.scan(lambda a, r: a * r, ph, initializer=tv.ones([2], tv.float64))
    g = tv.gradients(tv.reduce_sum(y) + tv.reduce_sum(sc2), ph)[0]
    with tv.Session() as s:
        assert s.run(g, {ph: np.zeros((0, 2))}).shape == (0, 2)
        assert s.run(g, {ph: np.ones((3, 2))}).tolist() == [[5.0, 5.0], [4.0, 4.0], [3.0, 3.0]]


def test_foldl_foldr_with_and_without_initializer():
    x = tv.constant(X)
    got = run([tv.foldl(lambda a, v: a + v, x), tv.foldl(lambda a, v: a * 2.0 + v, x, 1.0),
               tv.foldr(lambda a, v: a * 2.0 + v, x),
               tv.foldr(lambda a, v: a - v, x, initializer=tv.constant(10.0)),
               tv.foldl(lambda a, v: a + v[0] * tv.cast(v[1][1], tv.float32), (x, tv.constant(Y)),
                        initializer=0.0)])
    py = functools.reduce
    assert float(got[0]) == 10.0
    assert float(got[1]) == py(lambda a, v: a * 2 + v, X, 1.0)
    assert float(got[2]) == py(lambda a, v: a * 2 + v, X[::-1][1:], X[-1])
    assert float(got[3]) == 0.0
    assert float(got[4]) == float(np.sum(X * Y[:, 1]))


def test_scan_forward_reverse_initializer_and_structures():
    x = tv.constant(X)
    P = collections.namedtuple("P", "a b")
    outs = [tv.scan(lambda a, v: a + v, x), tv.scan(lambda a, v: a + v, x, reverse=True),
            tv.scan(lambda a, v: a * 2.0 - v, x, initializer=tv.constant(1.0), reverse=True),
            tv.scan(lambda a, v: (a[0] + v, a[1] * v), x,
                    initializer=(tv.constant(0.0), tv.constant(1.0))),
            tv.scan(lambda a, v: P(a.a + v[0], a.b + v[1]), (x, tv.constant(Y)),
                    initializer=P(tv.constant(0.0), tv.constant([0, 0])))]
    got = run(outs)
    np.testing.assert_array_equal(got[0], np.cumsum(X))
    np.testing.assert_array_equal(got[1], np.cumsum(X[::-1])[::-1])
    np.testing.assert_array_equal(got[2], _scan_ref(lambda a, v: a * 2 - v, X, 1.0, True))
    np.testing.assert_array_equal(got[3][0], np.cumsum(X))
    np.testing.assert_array_equal(got[3][1], np.cumprod(X))
    assert isinstance(got[4], P)
    np.testing.assert_array_equal(got[4].b, np.cumsum(Y, 0))
    assert outs[0].shape.as_list() == [4] and outs[4].b.shape.as_list() == [4, 2]


def test_scan_of_an_rnn_like_step_over_a_fed_sequence():
    seq = tv.placeholder(tv.float64, [None, 2])
    w = np.array([[0.5, -0.2], [0.1, 0.3]])
    h = tv.scan(lambda h, x: tv.tanh(tv.matmul(h[None], w)[0] + x), seq,
                initializer=tv.zeros([2], tv.float64))
    xs = rng.normal(size=(6, 2))
    want = _scan_ref(lambda h, x: np.tanh(h @ w + x), xs, np.zeros(2))
    with tv.Session() as s:
        np.testing.assert_allclose(s.run(h, {seq: xs}), want)


@pytest.mark.parametrize("build", [
    lambda x: tv.map_fn(lambda v: tv.sin(v) * v, x),
    lambda x: tv.map_fn(lambda r: tv.reduce_sum(r * r), x),
    lambda x: tv.foldl(lambda a, v: a * v + 1.0, x),
    lambda x: tv.foldr(lambda a, v: a * tv.exp(v[0]) + v[1], x, initializer=tv.constant(
        np.array(0.5))),
    lambda x: tv.scan(lambda a, v: a * v + tv.sin(a), x),
    lambda x: tv.scan(lambda a, v: a * 0.5 + v, x, reverse=True),
], ids=["map", "map_rows", "foldl", "foldr_init", "scan", "scan_reverse"])
def test_functional_gradients(build):
    check_gradients(build, rng.uniform(0.3, 1.2, size=(4, 2)))


def test_gradient_to_a_captured_tensor_and_the_initializer():
    def build(x, w, init):
        return tv.scan(lambda a, v: a * w + v, x, initializer=init)
    check_gradients(build, rng.normal(size=(5, 3)), rng.normal(size=(3,)), rng.normal(size=3))


def test_back_prop_false_still_computes():
    x = tv.constant(X)
    out = tv.map_fn(lambda v: v + 1.0, x, back_prop=False)
    np.testing.assert_array_equal(run(out), X + 1)


def test_functional_errors():
    x = tv.constant(X)
    with pytest.raises(TypeError, match="The provided function int is not callable.fn must be "
                                        "callable."):
        tv.map_fn(3, x)
    for f in (tv.foldl, tv.foldr, tv.scan):
        with pytest.raises(TypeError, match="int is not callable. Please provide a callable "
                                            "function."):
            f(3, x)
    with pytest.raises(ValueError, match="Elements in elems must be 1\\+ dimensional Tensors, "
                                         "not scalars"):
        tv.map_fn(lambda v: v, tv.constant(1.0))
    with pytest.raises(ValueError, match="don't have the same nested structure"):
        tv.map_fn(lambda v: (v, v), x)
    with pytest.raises(ValueError, match="don't have the same nested structure"):
        tv.scan(lambda a, v: (a, a), x, initializer=tv.constant(0.0))
    with pytest.raises(ValueError, match="elems must be a Tensor or \\(possibly nested\\) "
                                         "sequence of Tensors. Got \\[\\], which does not"):
        tv.map_fn(lambda v: v, [])
    with pytest.raises(ValueError, match="Dimensions 4 and 2 are not compatible"):
        tv.map_fn(lambda t: t[0], (x, tv.constant([1, 2])))
    with pytest.raises(TypeError, match="map_fn: fn returned a int32 tensor .* where float32 "
                                        "is expected; pass dtype="):
        tv.map_fn(lambda v: tv.cast(v, tv.int32), x)


def test_vectorized_map_infers_output_dtypes_and_structure():
    x = tv.constant(np.arange(6.0).reshape(3, 2))
    a, b = tv.vectorized_map(lambda r: (r * 2, tv.cast(r[0], tv.int32)), x)
    d = tv.vectorized_map(lambda e: {"s": tv.reduce_sum(e["x"]) > 2.0}, {"x": x})
    got = run([a, b, d])
    np.testing.assert_array_equal(got[0], np.arange(6.0).reshape(3, 2) * 2)
    assert got[1].tolist() == [0, 2, 4] and got[1].dtype == np.int32
    assert got[2]["s"].tolist() == [False, True, True]
    check_gradients(lambda t: tv.vectorized_map(lambda r: tv.reduce_sum(r * r), t),
                    rng.normal(size=(3, 2)))


def test_structure_mismatch_classes_as_tf():
    x = tv.constant(X)
    with pytest.raises(TypeError, match="don't have the same nested structure"):
        tv.map_fn(lambda v: (v, v), x, dtype=[tv.float32, tv.float32])
    with pytest.raises(ValueError, match="don't have the same nested structure"):
        tv.map_fn(lambda t: t[0] + t[1], [x, x])
    assert run(tv.map_fn(lambda t: t[0] + t[1], [x, x], dtype=tv.float32)).tolist() == \
        (2 * X).tolist()
