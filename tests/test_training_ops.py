"""The fused optimizer updates (ApplyGradientDescent, ApplyMomentum): bit-equal to the
unfused NumPy arithmetic, copy-on-write, and their errors."""
from __future__ import annotations

import numpy as np
import pytest
import tensorvm as tv
from tensorvm.ops.training_ops import apply_gradient_descent, apply_momentum

RNG = np.random.default_rng(3)


def _quad_problem(dtype):
    """loss = sum((x @ w - y) ** 2) / n: its gradient in NumPy is 2 x^T (x w - y) / n."""
    x = RNG.standard_normal((8, 5)).astype(dtype)
    y = RNG.standard_normal((8, 3)).astype(dtype)
    w0 = RNG.standard_normal((5, 3)).astype(dtype)
    return x, y, w0


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_sgd_matches_numpy_bit_for_bit(dtype):
    x, y, w0 = _quad_problem(dtype)
    w = tv.Variable(w0)
    g = tv.placeholder(dtype, [5, 3])
    step = apply_gradient_descent(w, 0.1, g)
    ref = w0.copy()
    lr = dtype(0.1)
    with tv.Session() as s:
        s.run(w.initializer)
        for _ in range(3):
            grad = (2 * x.T @ (x @ ref - y) / 8).astype(dtype)
            got = s.run(step, {g: grad})
            ref = ref - lr * grad
            assert got.dtype == dtype
            np.testing.assert_array_equal(got, ref)
        np.testing.assert_array_equal(s.run(w), ref)


def test_gradient_descent_optimizer_uses_one_fused_op_and_trains():
    x, y, w0 = _quad_problem(np.float32)
    w = tv.Variable(w0)
    loss = tv.reduce_mean(tv.reduce_sum(tv.square(tv.matmul(tv.constant(x), w) - y), 1))
    train = tv.train.GradientDescentOptimizer(0.05).minimize(loss)
    types = [op.type for op in tv.get_default_graph().get_operations()]
    assert "ApplyGradientDescent" in types and "AssignSub" not in types
    ref = w0.astype(np.float64)
    with tv.Session() as s:
        s.run(w.initializer)
        for _ in range(5):
            s.run(train)
            ref -= 0.05 * 2 * x.T @ (x @ ref - y) / 8
        np.testing.assert_allclose(s.run(w), ref, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("nesterov", [False, True])
def test_momentum_matches_numpy(nesterov):
    x, y, w0 = _quad_problem(np.float64)
    w = tv.Variable(w0)
    loss = tv.reduce_mean(tv.reduce_sum(tv.square(tv.matmul(tv.constant(x), w) - y), 1))
    opt = tv.train.MomentumOptimizer(0.05, 0.9, use_nesterov=nesterov)
    train = opt.minimize(loss)
    assert "ApplyMomentum" in [op.type for op in tv.get_default_graph().get_operations()]
    ref, acc = w0.copy(), np.zeros_like(w0)
    with tv.Session() as s:
        s.run(tv.global_variables_initializer())
        for _ in range(4):
            s.run(train)
            grad = 2 * x.T @ (x @ ref - y) / 8
            acc = acc * 0.9 + grad
            ref = ref - 0.05 * ((grad + 0.9 * acc) if nesterov else acc)
        np.testing.assert_allclose(s.run(w), ref, rtol=1e-12)
        np.testing.assert_allclose(s.run(opt.get_slot(w, "Momentum")), acc, rtol=1e-12)


def test_update_is_copy_on_write():
    """A value read before the update (here: fetched in the same run as an earlier read)
    keeps the old numbers."""
    w = tv.Variable(np.ones(4, np.float32))
    before = tv.identity(w.value())
    with tv.control_dependencies([before]):
        step = apply_gradient_descent(w, 1.0, tv.ones([4]))
    with tv.Session() as s:
        s.run(w.initializer)
        old, new = s.run([before, step])
    np.testing.assert_array_equal(old, np.ones(4))
    np.testing.assert_array_equal(new, np.zeros(4))


def test_errors_name_the_op_and_shapes():
    w = tv.Variable(np.zeros((2, 2), np.float32))
    with pytest.raises(tv.errors.InvalidArgumentError, match="cannot assign a value of shape"):
        apply_gradient_descent(w, 0.1, tv.zeros([3]))
    with pytest.raises(tv.errors.InvalidArgumentError, match="alpha must be a scalar"):
        apply_gradient_descent(w, [0.1, 0.2], tv.zeros([2, 2]))
    g = tv.placeholder(tv.float32)  # unknown shape: checked when it runs
    step = apply_gradient_descent(w, 0.1, g)
    acc = tv.Variable(np.zeros((2, 2), np.float32))
    mstep = apply_momentum(w, acc, 0.1, g, 0.9)
    with tv.Session() as s:
        s.run([w.initializer, acc.initializer])
        with pytest.raises(tv.errors.InvalidArgumentError,
                           match=r"ApplyGradientDescent: delta of shape \[3\] does not match"):
            s.run(step, {g: np.zeros(3, np.float32)})
        with pytest.raises(tv.errors.InvalidArgumentError,
                           match=r"ApplyMomentum: grad of shape \[2\] does not match"):
            s.run(mstep, {g: np.zeros(2, np.float32)})
        np.testing.assert_array_equal(s.run(w), np.zeros((2, 2)))  # nothing was written
