"""TF 1.x's clipping (clip_ops), special functions (special_ops), assertions (debug_ops) and
more math/array ops: forward results against NumPy or the ``math`` module, gradients against
finite differences (float64), errors by class and message."""
import math

import numpy as np
import pytest
from opcheck import check_forward, check_gradients, run

import tensorvm as tv
from tensorvm.errors import InvalidArgumentError

rng = np.random.default_rng(4321)


def rand(*shape, lo=-2.0, hi=2.0):
    return np.asarray(rng.uniform(lo, hi, size=shape))


# ---- clipping ----------------------------------------------------------------------------------
def _np_clip_by_norm(t, c, axes=None):
    n = np.sqrt(np.sum(t * t, axis=axes, keepdims=True))
    return t * c / np.maximum(n, c)


def test_clip_by_norm_matches_numpy_and_leaves_small_and_zero_tensors():
    a = np.array([[3.0, 4.0], [0.0, 0.0], [0.3, 0.4]])
    check_forward(lambda x: tv.clip_by_norm(x, 2.0), lambda x: _np_clip_by_norm(x, 2.0), a)
    check_forward(lambda x: tv.clip_by_norm(x, 2.0, axes=[1]),
                  lambda x: _np_clip_by_norm(x, 2.0, 1), a)
    z = run(tv.clip_by_norm(tv.zeros([3]), 1.0))
    assert z.tolist() == [0.0, 0.0, 0.0]  # no 0/0
    # a negative clip norm clips to zero (TF's rule)
    assert run(tv.clip_by_norm(tv.constant([3.0, 4.0]), -1.0)).tolist() == [0.0, 0.0]


def test_clip_by_norm_gradient():
    check_gradients(lambda x: tv.clip_by_norm(x, 1.5), rand(3, 4))
    check_gradients(lambda x: tv.clip_by_norm(x, 1.5, axes=[0]), rand(3, 4))
    check_gradients(lambda x: tv.clip_by_norm(x, 100.0), rand(2, 2))


def test_global_norm_ignores_none_and_counts_indexed_slices():
    a, b = rand(2, 3), rand(4)
    s = tv.IndexedSlices(tv.constant([[3.0, 4.0]], tv.float64), tv.constant([1]),
                         tv.constant([3, 2]))
    got = run(tv.global_norm([tv.constant(a), None, tv.constant(b), s]))
    np.testing.assert_allclose(got, np.sqrt(np.sum(a * a) + np.sum(b * b) + 25.0))


def test_clip_by_global_norm_scales_all_by_one_factor():
    a, b = rand(2, 3), rand(4)
    (ca, none, cb), n = tv.clip_by_global_norm([tv.constant(a), None, tv.constant(b)], 1.0)
    assert none is None
    ga, gb, gn = run([ca, cb, n])
    norm = np.sqrt(np.sum(a * a) + np.sum(b * b))
    np.testing.assert_allclose(gn, norm)
    np.testing.assert_allclose(ga, a / norm)
    np.testing.assert_allclose(gb, b / norm)
    # inside the norm: unchanged
    (ca,), _ = tv.clip_by_global_norm([tv.constant(a)], 1e6)
    np.testing.assert_allclose(run(ca), a)


def test_clip_by_global_norm_use_norm_indexed_slices_and_infinite_norm():
    s = tv.IndexedSlices(tv.constant([[3.0, 4.0]]), tv.constant([1]), tv.constant([3, 2]))
    (cs, cb), n = tv.clip_by_global_norm([s, tv.constant([0.0])], 1.0, use_norm=10.0)
    assert isinstance(cs, tv.IndexedSlices)
    vals, idx, gn = run([cs.values, cs.indices, n])
    np.testing.assert_allclose(vals, [[0.3, 0.4]], rtol=1e-6)
    assert idx.tolist() == [1] and float(gn) == 10.0
    (ca,), _ = tv.clip_by_global_norm([tv.constant([1.0, 2.0])], 1.0, use_norm=np.inf)
    assert np.isnan(run(ca)).all()  # TF: an infinite norm makes every value NaN


def test_clip_by_global_norm_gradient():
    def build(x, y):
        (cx, cy), _ = tv.clip_by_global_norm([x, y * 2.0], 1.0)
        return tv.concat([tv.reshape(cx, [-1]), cy], 0)
    check_gradients(build, rand(2, 3), rand(3))


def test_clip_by_global_norm_of_optimizer_gradients_trains():
    x = tv.Variable([3.0, 4.0], dtype=tv.float64)
    loss = tv.reduce_sum(x * x)
    opt = tv.train.GradientDescentOptimizer(0.1)
    grads, variables = zip(*opt.compute_gradients(loss, [x]))
    clipped, norm = tv.clip_by_global_norm(list(grads), 1.0)
    step = opt.apply_gradients(zip(clipped, variables))
    with tv.Session() as s:
        s.run(tv.global_variables_initializer())
        assert float(s.run(norm)) == 10.0
        s.run(step)
        np.testing.assert_allclose(s.run(x), [3.0 - 0.06, 4.0 - 0.08])


def test_clip_errors():
    with pytest.raises(TypeError, match="`t_list` should be a sequence of tensors. Received "
                                        "<class 'str'>"):
        tv.global_norm("abc")
    with pytest.raises(TypeError, match="`t_list` should be a sequence of tensors"):
        tv.clip_by_global_norm(tv.constant([1.0]), 1.0)


def test_clip_by_average_norm():
    a = np.array([[3.0, 4.0], [0.0, 0.0]], np.float32)
    got = run(tv.clip_by_average_norm(tv.constant(a), 0.5))
    n = np.sqrt(np.sum(a * a)) / a.size
    np.testing.assert_allclose(got, a * 0.5 / max(n, 0.5), rtol=1e-6)
