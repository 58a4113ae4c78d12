"""Small TF 1.x names (core/tf_misc.py, the extra scatter updates, gradients' TF keywords)."""
from __future__ import annotations

import numpy as np
import pytest

import tensorvm as tv


@pytest.fixture
def g():
    with tv.Graph().as_default() as graph:
        yield graph


def test_constants_dtypes_dimensions_and_static_broadcast():
    assert tv.VERSION == "1.15.0" and isinstance(tv.GRAPH_DEF_VERSION, int)
    assert tv.half is tv.float16 and tv.double is tv.float64
    assert tv.dimension_value(tv.Dimension(4)) == 4 and tv.dimension_value(None) is None
    assert tv.dimension_at_index(tv.TensorShape([2, None]), 1).value is None
    assert int(tv.Dimension(3)) == 3 and (tv.Dimension(3) == 3) is True
    assert tv.broadcast_static_shape(tv.TensorShape([None, 1, 3]),
                                     tv.TensorShape([4, 1])).as_list() == [None, 4, 3]
    with pytest.raises(ValueError, match="Incompatible shapes for broadcasting"):
        tv.broadcast_static_shape(tv.TensorShape([2]), tv.TensorShape([3]))


def test_dynamic_broadcast_segments_switch_case(g):
    a = tv.placeholder(tv.int32, [None])
    bshape = tv.broadcast_dynamic_shape(a, [4, 1])
    data = np.arange(12, dtype=np.float64).reshape(4, 3)
    idx, seg = [3, 0, 2, 2], [0, 0, 1, 3]
    sums = tv.sparse_segment_sum(data, idx, seg)
    means = tv.sparse_segment_mean(data, idx, seg)
    sqrtn = tv.sparse_segment_sqrt_n(data, idx, seg)
    k = tv.placeholder(tv.int32, [])
    sc = tv.switch_case(k, [lambda: tv.constant(10), lambda: tv.constant(20)])
    sd = tv.switch_case(k, {0: lambda: tv.constant(1), 5: lambda: tv.constant(6)},
                        default=lambda: tv.constant(-1))
    with tv.Session() as s:
        assert s.run(bshape, {a: [2, 1, 3]}).tolist() == [2, 4, 3]
        with pytest.raises(tv.errors.InvalidArgumentError, match="Incompatible shapes"):
            s.run(bshape, {a: [3, 2]})
        rows = data[idx]
        want = [rows[:2].sum(0), rows[2], np.zeros(3), rows[3]]
        np.testing.assert_allclose(s.run(sums), want)
        np.testing.assert_allclose(s.run(means), [rows[:2].mean(0), rows[2], np.zeros(3),
                                                  rows[3]])
        np.testing.assert_allclose(s.run(sqrtn), [rows[:2].sum(0) / np.sqrt(2), rows[2],
                                                  np.zeros(3), rows[3]])
        assert [s.run(sc, {k: i}) for i in (0, 1, 7)] == [10, 20, 20]
        assert [s.run(sd, {k: i}) for i in (0, 5, 2)] == [1, 6, -1]
    with pytest.raises(ValueError, match="branch_fns must not be empty"):
        tv.switch_case(0, [])


def test_scatter_variants_equal_numpy(g):
    base = np.arange(8, dtype=np.float32).reshape(4, 2) + 1
    v = tv.Variable(base)
    cases = [
        (tv.scatter_mul(v, [1, 1], [[2, 2], [3, 3]]), lambda a: a * [[1, 1], [6, 6], [1, 1],
                                                                     [1, 1]]),
        (tv.scatter_div(v, [0], [[2, 4]]), lambda a: a / [[2, 4], [1, 1], [1, 1], [1, 1]]),
        (tv.scatter_min(v, [3, 3], [[0, 100], [5, 0]]), None),
        (tv.scatter_max(v, [2], [[100, 0]]), None),
        (tv.scatter_nd_update(v, [[0, 1], [3, 0]], [-1, -2]), None),
        (tv.scatter_nd_add(v, [[1, 1], [1, 1]], [10, 5]), None),
        (v.scatter_nd_sub([[2]], [[1, 1]]), None),
    ]
    want_min = base.copy()
    want_min[3] = np.minimum(np.minimum(base[3], [0, 100]), [5, 0])
    want_max = base.copy()
    want_max[2] = np.maximum(base[2], [100, 0])
    upd = base.copy()
    upd[0, 1], upd[3, 0] = -1, -2
    added = base.copy()
    added[1, 1] += 15
    subbed = base.copy()
    subbed[2] -= 1
    wants = [cases[0][1](base), cases[1][1](base), want_min, want_max, upd, added, subbed]
    with tv.Session() as s:
        for (op, _), want in zip(cases, wants):
            s.run(v.initializer)
            np.testing.assert_allclose(s.run(op), want)
        s.run(v.initializer)
        with pytest.raises(tv.errors.InvalidArgumentError, match="does not index into shape"):
            s.run(tv.scatter_nd_update(v, [[4, 0]], [1.0]))


def test_gradients_accept_tfs_keywords(g):
    x, z = tv.constant(2.0), tv.constant(3.0)
    y = x * x
    gx, gz = tv.gradients(y, [x, z], colocate_gradients_with_ops=True, gate_gradients=True,
                          aggregation_method=tv.AggregationMethod.EXPERIMENTAL_TREE)
    assert gz is None
    _, gz0 = tv.gradients(y, [x, z], unconnected_gradients=tv.UnconnectedGradients.ZERO)
    with tv.Session() as s:
        assert s.run(gx) == 4.0 and s.run(gz0) == 0.0
    with pytest.raises(ValueError, match="Unknown value for unconnected_gradients"):
        tv.gradients(y, x, unconnected_gradients="some")


def test_random_gamma_poisson_moments_and_misc(g):
    tv.set_random_seed(7)
    gam = tv.random_gamma([20000], [2.0, 5.0], beta=[1.0, 2.0])
    poi = tv.random_poisson([3.0, 0.5], [20000])
    ts = tv.timestamp()
    v = tv.Variable(1.0)
    with tv.init_scope():
        pass
    with tv.Session() as s:
        a, p = s.run([gam, poi])
        assert a.shape == (20000, 2) and p.shape == (20000, 2)
        np.testing.assert_allclose(a.mean(0), [2.0, 2.5], rtol=0.05)   # alpha / beta
        np.testing.assert_allclose(p.mean(0), [3.0, 0.5], rtol=0.05)
        assert s.run(ts) > 1.7e9
        assert not s.run(tv.is_variable_initialized(v))
    assert tv.get_logger().name == "tensorvm"
    with pytest.raises(ValueError, match="must not be empty"):
        tv.switch_case(0, {})
    assert tv.parallel_stack([tv.constant(1), tv.constant(2)]).shape.as_list() == [2]
    with tv.Session() as s, pytest.raises(tv.errors.InvalidArgumentError,
                                          match="alpha and beta must be positive"):
        s.run(tv.random_gamma([2], [-1.0]))
