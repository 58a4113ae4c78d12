"""tv.SparseTensor and tv.sparse (TF 1.x's sparse tensors): feeding and fetching, densifying
with TF's index validation, and every sparse function against a dense NumPy reference; gradients
into values and dense operands against central differences."""
from __future__ import annotations

import numpy as np
import pytest

import tensorvm as tv
from tests.opcheck import check_gradients

IAE = tv.errors.InvalidArgumentError
RS = np.random.RandomState(5)


def random_sparse(shape, density=0.4, seed=0):
    rs = np.random.RandomState(seed)
    dense = np.where(rs.rand(*shape) < density, rs.randn(*shape), 0.0)
    idx = np.argwhere(dense != 0)
    return dense, tv.SparseTensorValue(idx, dense[tuple(idx.T)], np.array(shape))


def run(t, feed=None):
    with tv.Session() as s:
        return s.run(t, feed)


def dense_of(v):
    out = np.zeros(tuple(v.dense_shape), np.asarray(v.values).dtype)
    out[tuple(np.asarray(v.indices).T)] = v.values
    return out


def test_placeholder_feed_fetch_and_unpacking():
    ph = tv.sparse_placeholder(tv.float64, shape=[None, 4])
    assert ph.shape.as_list() == [None, None] and ph.dtype == tv.float64
    dense, val = random_sparse((3, 4))
    got = run(ph, {ph: val})
    assert isinstance(got, tv.SparseTensorValue)
    idx, vals, shape = got
    np.testing.assert_array_equal(idx, val.indices)
    np.testing.assert_array_equal(vals, val.values)
    assert shape.tolist() == [3, 4]
    np.testing.assert_array_equal(run(tv.sparse_tensor_to_dense(ph), {ph: tuple(val)}), dense)
    const = tv.SparseTensor([[0, 1]], [2.0], [2, 2])
    assert const.shape.as_list() == [2, 2] and const.get_shape().as_list() == [2, 2]
    with tv.Session():
        assert const.eval().values.tolist() == [2.0]
    with pytest.raises(TypeError, match="must be a tv.SparseTensorValue or an .indices, "
                                        "values, dense_shape. triple"):
        run(tv.sparse.to_dense(ph), {ph: np.zeros(3)})
    with pytest.raises(ValueError, match="SparseTensor: indices must be 2-D"):
        tv.SparseTensor([0, 1], [1.0, 2.0], [2])


def test_to_dense_validates_indices_as_tf():
    sp = tv.sparse_placeholder(tv.float32)
    d = tv.sparse.to_dense(sp, default_value=-1.0)
    unchecked = tv.sparse.to_dense(sp, validate_indices=False)
    with tv.Session() as s:
        got = s.run(d, {sp: ([[1, 0], [1, 2]], [3.0, 4.0], [2, 3])})
        assert got.tolist() == [[-1, -1, -1], [3, -1, 4]]
        with pytest.raises(IAE, match=r"indices\[1\] = \[0, 0\] is out of order"):
            s.run(d, {sp: ([[1, 0], [0, 0]], [3.0, 4.0], [2, 3])})
        with pytest.raises(IAE, match=r"indices\[1\] = \[1, 0\] is repeated"):
            s.run(d, {sp: ([[1, 0], [1, 0]], [3.0, 4.0], [2, 3])})
        with pytest.raises(IAE, match=r"indices\[0\] = \[2, 0\] is out of bounds: need 0 <= "
                                      r"index < \[2, 3\]"):
            s.run(d, {sp: ([[2, 0]], [3.0], [2, 3])})
        assert s.run(unchecked, {sp: ([[1, 0], [0, 0]], [3.0, 4.0], [2, 3])}).tolist() == \
            [[4, 0, 0], [3, 0, 0]]
    got = run([tv.sparse_to_dense(2, [4], 7), tv.sparse_to_dense([0, 3], [4], [1, 2]),
               tv.sparse_to_dense([[0, 1]], [2, 2], 5.0, default_value=1.0)])
    assert got[0].tolist() == [0, 0, 7, 0] and got[1].tolist() == [1, 0, 0, 2]
    assert got[2].tolist() == [[1, 5], [1, 1]]
    with pytest.raises(IAE, match="default_value .* must have the dtype of the values"):
        tv.sparse_to_dense([0], [2], [1.0], default_value=tv.constant(0, tv.int32))


def test_from_dense_reorder_reshape_transpose_retain():
    dense, val = random_sparse((3, 4, 2))
    sp = tv.sparse.from_dense(dense)
    shuffled = tv.SparseTensor(val.indices[::-1].copy(), val.values[::-1].copy(),
                               val.dense_shape)
    got = run([sp, tv.sparse.reorder(shuffled), tv.sparse.reshape(sp, [4, -1]),
               tv.sparse.transpose(sp, [2, 0, 1]), tv.sparse.transpose(sp),
               tv.sparse.retain(sp, np.arange(len(val.values)) % 2 == 0)])
    np.testing.assert_array_equal(got[0].indices, val.indices)
    np.testing.assert_array_equal(got[1].indices, val.indices)
    np.testing.assert_array_equal(got[1].values, val.values)
    np.testing.assert_array_equal(dense_of(got[2]), dense.reshape(4, -1))
    np.testing.assert_array_equal(dense_of(got[3]), dense.transpose(2, 0, 1))
    assert (np.diff(np.ravel_multi_index(got[3].indices.T, (2, 3, 4))) > 0).all()
    np.testing.assert_array_equal(dense_of(got[4]), dense.transpose())
    kept = np.zeros_like(dense)
    kept[tuple(val.indices[::2].T)] = val.values[::2]
    np.testing.assert_array_equal(dense_of(got[5]), kept)
    with pytest.raises(IAE, match=r"cannot be reshaped to \[5, -1\]|cannot be reshaped"):
        run(tv.sparse.reshape(sp, [5, -1]))
    with pytest.raises(ValueError, match="is not a permutation"):
        tv.sparse.transpose(sp, [0, 0, 1])


def test_add_concat_slice_split():
    da, va = random_sparse((3, 4), seed=1)
    db, vb = random_sparse((3, 4), seed=2)
    a, b = tv.SparseTensor(*va), tv.SparseTensor(*vb)
    dense_b = RS.randn(3, 4)
    got = run([tv.sparse.add(a, b), tv.sparse.add(a, dense_b), tv.sparse_add(dense_b, b),
               tv.sparse.add(a, b, threshold=0.5), tv.sparse.concat(1, [a, b]),
               tv.sparse.concat(0, [a, b]), tv.sparse.slice(a, [1, 1], [5, 2])])
    np.testing.assert_allclose(dense_of(got[0]), da + db)
    np.testing.assert_allclose(got[1], da + dense_b)
    np.testing.assert_allclose(got[2], db + dense_b)
    assert (np.abs(got[3].values) >= 0.5).all()
    full = da + db
    np.testing.assert_allclose(dense_of(got[3]), np.where(np.abs(full) >= 0.5, full, 0))
    np.testing.assert_array_equal(dense_of(got[4]), np.concatenate([da, db], 1))
    np.testing.assert_array_equal(dense_of(got[5]), np.concatenate([da, db], 0))
    assert got[6].dense_shape.tolist() == [2, 2]
    np.testing.assert_array_equal(dense_of(got[6]), da[1:3, 1:3])
    pieces = run(tv.sparse.split(sp_input=a, num_split=3, axis=1))
    assert [p.dense_shape.tolist() for p in pieces] == [[3, 2], [3, 1], [3, 1]]
    np.testing.assert_array_equal(np.concatenate([dense_of(p) for p in pieces], 1), da)
    wide = run(tv.sparse.concat(1, [tv.SparseTensor([[0, 0]], [1.0], [2, 2]),
                                    tv.SparseTensor([[2, 0]], [2.0], [3, 1])],
                                expand_nonconcat_dim=True))
    assert wide.dense_shape.tolist() == [3, 3] and wide.indices.tolist() == [[0, 0], [2, 2]]
    with pytest.raises(TypeError, match="at least one of a and b must be a SparseTensor"):
        tv.sparse.add(np.ones(2), np.ones(2))


def test_reductions_softmax_fill_empty_rows():
    dense, val = random_sparse((4, 5))
    sp = tv.SparseTensor(*val)
    got = run([tv.sparse.reduce_sum(sp), tv.sparse.reduce_sum(sp, 1),
               tv.sparse_reduce_sum(sp, axis=0, keepdims=True), tv.sparse.softmax(sp),
               tv.sparse.fill_empty_rows(tv.SparseTensor([[1, 1], [3, 0]], [1.0, 2.0], [5, 2]),
                                         9.0)])
    np.testing.assert_allclose(got[0], dense.sum())
    np.testing.assert_allclose(got[1], dense.sum(1))
    np.testing.assert_allclose(got[2], dense.sum(0, keepdims=True))
    soft = got[3]
    for r in range(4):
        cols = val.indices[:, 0] == r
        if cols.any():
            e = np.exp(val.values[cols] - val.values[cols].max())
            np.testing.assert_allclose(soft.values[cols], e / e.sum())
    filled, empty = got[4]
    assert filled.indices.tolist() == [[0, 0], [1, 1], [2, 0], [3, 0], [4, 0]]
    assert filled.values.tolist() == [9, 1, 9, 2, 9]
    assert empty.tolist() == [True, False, True, False, True]
    big = tv.SparseTensor([[0, 0], [0, 1]], [1000.0, 1001.0], [1, 2])
    assert np.isfinite(run(tv.sparse.softmax(big)).values).all()


def test_sparse_dense_matmul_and_its_gradients():
    dense, val = random_sparse((4, 3))
    b = RS.randn(3, 2)
    for adj_a, adj_b in [(False, False), (True, False), (False, True), (True, True)]:
        sp = tv.SparseTensor(*val)
        bb = b.T if adj_b else b
        mat = tv.sparse_tensor_dense_matmul(sp, bb, adjoint_a=adj_a, adjoint_b=adj_b) \
            if not adj_a else tv.sparse.matmul(
                tv.SparseTensor(val.indices[:, ::-1].copy(), val.values, [3, 4]), bb,
                adjoint_a=True, adjoint_b=adj_b)
        want = dense @ b
        np.testing.assert_allclose(run(mat), want, rtol=1e-12)
    idx, shape = val.indices, val.dense_shape
    check_gradients(lambda v, m: tv.sparse.matmul(tv.SparseTensor(idx, v, shape), m),
                    val.values, b)
    check_gradients(lambda v: tv.sparse.to_dense(tv.SparseTensor(idx, v, shape)), val.values)
    check_gradients(lambda v, d: tv.sparse.add(tv.SparseTensor(idx, v, shape), d),
                    val.values, RS.randn(4, 3))
    check_gradients(lambda v: tv.sparse.softmax(tv.SparseTensor(idx, v, shape)).values,
                    val.values)
    check_gradients(lambda v: tv.sparse.reduce_sum(tv.SparseTensor(idx, v, shape), 1),
                    val.values)


def np_lookup(params, rows, ids, weights, n_rows, combiner):
    out = np.zeros((n_rows, params.shape[1]))
    for r in range(n_rows):
        sel = rows == r
        if not sel.any():
            continue
        w = weights[sel] if weights is not None else np.ones(sel.sum())
        tot = (params[ids[sel]] * w[:, None]).sum(0)
        out[r] = {"sum": tot, "mean": tot / w.sum(),
                  "sqrtn": tot / np.sqrt((w ** 2).sum())}[combiner]
    return out


@pytest.mark.parametrize("combiner", ["sum", "mean", "sqrtn"])
def test_embedding_lookup_sparse_equals_numpy_and_has_gradients(combiner):
    params = RS.randn(6, 3)
    rows = np.array([0, 0, 2, 3, 3, 3])
    idx = np.stack([rows, [0, 1, 0, 0, 1, 2]], 1)
    ids = np.array([1, 5, 0, 2, 2, 4])
    w = RS.rand(6) + 0.5
    sp_ids = tv.SparseTensor(idx, tv.constant(ids, tv.int64), [5, 3])
    sp_w = tv.SparseTensor(idx, w, [5, 3])
    got = run([tv.nn.embedding_lookup_sparse(params, sp_ids, sp_w, combiner=combiner),
               tv.nn.embedding_lookup_sparse(params, sp_ids, None, combiner=combiner),
               tv.nn.safe_embedding_lookup_sparse(params, sp_ids, sp_w, combiner=combiner)])
    np.testing.assert_allclose(got[0], np_lookup(params, rows, ids, w, 4, combiner))
    np.testing.assert_allclose(got[1], np_lookup(params, rows, ids, None, 4, combiner))
    np.testing.assert_allclose(got[2], np_lookup(params, rows, ids, w, 5, combiner))
    check_gradients(lambda p, ww: tv.nn.embedding_lookup_sparse(
        p, tv.SparseTensor(idx, tv.constant(ids, tv.int64), [5, 3]),
        tv.SparseTensor(idx, ww, [5, 3]), combiner=combiner), params, w)
    with pytest.raises(ValueError, match="combiner must be one of 'mean', 'sqrtn' or 'sum'"):
        tv.nn.embedding_lookup_sparse(params, sp_ids, None, combiner="max")


def test_a_sparse_linear_model_trains():
    """A bag-of-words logistic regression fed through a sparse placeholder (TF 1.x's wide
    model): the loss falls and the learned weights separate the two classes' words."""
    rs = np.random.RandomState(0)
    n, vocab = 64, 20
    labels = rs.randint(0, 2, n)
    rows, cols = [], []
    for i, y in enumerate(labels):
        words = rs.choice(10, 3, replace=False) + (10 if y else 0)
        rows += [i] * 3
        cols += sorted(words.tolist())
    feed_val = tv.SparseTensorValue(np.stack([rows, cols], 1), np.ones(len(rows)), [n, vocab])
    x = tv.sparse_placeholder(tv.float64)
    y = tv.placeholder(tv.float64, [None])
    w = tv.Variable(np.zeros((vocab, 1)))
    logits = tv.reshape(tv.sparse_tensor_dense_matmul(x, w), [-1])
    loss = tv.reduce_mean(tv.nn.sigmoid_cross_entropy_with_logits(labels=y, logits=logits))
    train = tv.train.GradientDescentOptimizer(2.0).minimize(loss)
    with tv.Session() as s:
        s.run(tv.global_variables_initializer())
        first = s.run(loss, {x: feed_val, y: labels})
        for _ in range(60):
            s.run(train, {x: feed_val, y: labels})
        last, weights = s.run([loss, w], {x: feed_val, y: labels})
    assert first == pytest.approx(np.log(2)) and last < 0.1
    assert (weights[10:] > 0).all() and (weights[:10] < 0).all()


def test_sparse_eval_and_session_graph_def():
    with tv.Graph().as_default():
        _sparse_eval_and_graph_def()


def _sparse_eval_and_graph_def():
    sp = tv.SparseTensor([[0, 0]], [1.0], [1, 2])
    with tv.Session() as s:
        assert sp.eval().values.tolist() == [1.0]
        assert sp.values.op.name in [n["name"] for n in s.graph_def["node"]]
    with pytest.raises(ValueError, match="Cannot evaluate a SparseTensor"):
        sp.eval()
