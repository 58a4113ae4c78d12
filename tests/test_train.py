"""tv.train optimizers: update rules against NumPy, sparse updates, the lecture demos."""
import numpy as np
import pytest

import tensorvm as tv



def _one_step(opt, w0, grad, steps=1, sparse_idx=None):
    """Apply ``grad`` (dense, or as IndexedSlices over rows ``sparse_idx``) ``steps`` times."""
    v = tv.Variable(w0.copy(), name="v")
    if sparse_idx is None:
        g = tv.constant(grad)
    else:
        g = tv.IndexedSlices(tv.constant(grad), tv.constant(np.array(sparse_idx)))
    train = opt.apply_gradients([(g, v)])
    with tv.Session() as s:
        s.run(tv.global_variables_initializer())
        for _ in range(steps):
            s.run(train)
        return s.run(v)


W0 = np.array([[1.0, -2.0], [0.5, 3.0], [2.0, 1.0]])
G = np.array([[0.1, -0.2], [0.3, 0.4], [-0.5, 0.6]])


def test_sgd_dense(g):
    np.testing.assert_allclose(_one_step(tv.train.GradientDescentOptimizer(0.1), W0, G, 3),
                               W0 - 3 * 0.1 * G)


def test_momentum_dense_and_nesterov(g):
    got = _one_step(tv.train.MomentumOptimizer(0.1, 0.9), W0, G, 3)
    w, acc = W0.copy(), np.zeros_like(W0)
    for _ in range(3):
        acc = 0.9 * acc + G
        w -= 0.1 * acc
    np.testing.assert_allclose(got, w)
    got = _one_step(tv.train.MomentumOptimizer(0.1, 0.9, use_nesterov=True), W0, G, 2)
    w, acc = W0.copy(), np.zeros_like(W0)
    for _ in range(2):
        acc = 0.9 * acc + G
        w -= 0.1 * (G + 0.9 * acc)
    np.testing.assert_allclose(got, w)


def test_adagrad_dense(g):
    got = _one_step(tv.train.AdagradOptimizer(0.1, initial_accumulator_value=0.1), W0, G, 3)
    w, acc = W0.copy(), np.full_like(W0, 0.1)
    for _ in range(3):
        acc += G * G
        w -= 0.1 * G / np.sqrt(acc)
    np.testing.assert_allclose(got, w)


def test_adam_dense(g):
    got = _one_step(tv.train.AdamOptimizer(0.01), W0, G, 4)
    w, m, v = W0.copy(), np.zeros_like(W0), np.zeros_like(W0)
    for t in range(1, 5):
        m = 0.9 * m + 0.1 * G
        v = 0.999 * v + 0.001 * G * G
        lr = 0.01 * np.sqrt(1 - 0.999 ** t) / (1 - 0.9 ** t)
        w -= lr * m / (np.sqrt(v) + 1e-8)
    np.testing.assert_allclose(got, w, rtol=1e-6)


@pytest.mark.parametrize("make", [
    lambda: tv.train.GradientDescentOptimizer(0.1),
    lambda: tv.train.AdagradOptimizer(0.1),
    lambda: tv.train.MomentumOptimizer(0.1, 0.9),
    lambda: tv.train.AdamOptimizer(0.1),
])
def test_sparse_update_equals_dense_update(g, make):
    rows = [2, 0, 2]  # a repeated index: its values are summed
    vals = np.array([[1.0, 1.0], [0.5, -0.5], [2.0, 0.0]])
    dense = np.zeros_like(W0)
    np.add.at(dense, rows, vals)
    sparse = _one_step(make(), W0, vals, 2, sparse_idx=rows)
    with tv.Graph().as_default():
        want = _one_step(make(), W0, dense, 2)
    if isinstance(make(), (tv.train.GradientDescentOptimizer, tv.train.AdagradOptimizer)):
        np.testing.assert_array_equal(sparse[1], W0[1])  # untouched row stays untouched
    np.testing.assert_allclose(sparse, want, rtol=1e-6)


def test_gather_gradient_reaches_the_optimizer_sparse(g):
    emb = tv.Variable(np.arange(12.0).reshape(6, 2), name="emb")
    ids = tv.placeholder(tv.int32, [None])
    loss = tv.reduce_sum(tv.gather(emb, ids) ** 2)
    opt = tv.train.GradientDescentOptimizer(0.5)
    (grad, var), = opt.compute_gradients(loss, [emb])
    assert isinstance(grad, tv.IndexedSlices)
    train = opt.apply_gradients([(grad, var)])
    with tv.Session() as s:
        s.run(emb.initializer)
        plan = s.plan(train, {ids: [1, 3]})
        assert any(op.startswith("GradientDescent/ScatterSub") for t in plan.tasks
                   for op in t.ops)
        s.run(train, {ids: [1, 3]})
        got = s.run(emb)
    want = np.arange(12.0).reshape(6, 2)
    want[[1, 3]] -= 0.5 * 2 * want[[1, 3]]
    np.testing.assert_allclose(got, want)


def test_global_step_and_minimize_errors(g):
    w = tv.Variable(1.0)
    gs = tv.train.get_or_create_global_step()
    train = tv.train.GradientDescentOptimizer(0.1).minimize(w * w, global_step=gs)
    with tv.Session() as s:
        s.run(tv.global_variables_initializer())
        s.run(train, steps=5)
        assert s.run(gs) == 5
    with pytest.raises(tv.errors.InvalidArgumentError, match="No gradients provided"):
        tv.train.GradientDescentOptimizer(0.1).minimize(tv.constant(1.0) * 2.0, var_list=[w])
    with pytest.raises(tv.errors.InvalidArgumentError, match="floating point"):
        tv.train.GradientDescentOptimizer(0.1).minimize(tv.constant(1) + 1)


def test_ridge_regression_closed_form_and_descent(g):
    """The lecture demo: beta = (X^T X + lambda I)^-1 X^T y in-graph equals NumPy's, and
    gradient descent on the penalised loss reaches it within 1e-4 relative error."""
    from tensorvm.jobs.demo import ridge_graph
    rng = np.random.default_rng(1)
    X = rng.normal(size=(150, 6))
    y = X @ rng.normal(size=6) + 0.05 * rng.normal(size=150)
    lam = 0.3
    want = np.linalg.solve(X.T @ X + lam * np.eye(6), X.T @ y)
    graph, init, train, beta, beta_closed, loss = ridge_graph(tv, X, y, lam)
    with tv.Session(graph=graph) as s:
        np.testing.assert_allclose(s.run(beta_closed).ravel(), want, rtol=1e-10)
        s.run(init)
        s.run(train, steps=300)
        got = s.run(beta).ravel()
    assert np.linalg.norm(got - want) / np.linalg.norm(want) < 1e-4


def test_logistic_regression_with_adam(g):
    rng = np.random.default_rng(7)
    n, d = 2000, 10
    true_w = rng.normal(size=d)
    X = rng.normal(size=(n, d)).astype(np.float32)
    labels = (X @ true_w + 0.1 * rng.normal(size=n) > 0).astype(np.float32)
    Xtr, ytr, Xte, yte = X[:1500], labels[:1500], X[1500:], labels[1500:]
    x = tv.placeholder(tv.float32, [None, d])
    y = tv.placeholder(tv.float32, [None])
    w = tv.Variable(np.zeros(d, np.float32))
    b = tv.Variable(np.float32(0.0))
    logits = tv.reduce_sum(x * w, axis=1) + b
    loss = tv.reduce_mean(tv.nn.sigmoid_cross_entropy_with_logits(labels=y, logits=logits))
    train = tv.train.AdamOptimizer(0.05).minimize(loss)
    acc = tv.reduce_mean(tv.cast(tv.equal(tv.cast(logits > 0, tv.float32), y), tv.float32))
    with tv.Session() as s:
        s.run(tv.global_variables_initializer())
        s.run(train, {x: Xtr, y: ytr}, steps=300)
        held_out = s.run(acc, {x: Xte, y: yte})
    assert held_out > 0.95
