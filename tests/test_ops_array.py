"""Shape-manipulation and indexing ops (manip_ops, index_ops): forward results against NumPy,
finite-difference gradients, static shapes and the errors raised at construction."""
import json

import numpy as np
import pytest

import tensorvm as tv
from opcheck import check_forward, check_gradients, run

rng = np.random.default_rng(42)
IAE = tv.errors.InvalidArgumentError


def r(*shape):
    return rng.standard_normal(shape)


def run_unknown(build, *arrays):
    """Run ``build`` on placeholders whose dims are all unknown (the dynamic code paths)."""
    g = tv.Graph()
    with g.as_default():
        phs = [tv.placeholder(tv.as_dtype(a.dtype), [None] * a.ndim) for a in arrays]
        out = build(*phs)
        with tv.Session(graph=g) as s:
            return s.run(out, dict(zip(phs, arrays)))


def grad_unknown(build, x):
    """d sum(build(x) * 1.5) / dx with every dim of x unknown statically."""
    return run_unknown(lambda p: tv.gradients(tv.reduce_sum(build(p) * 1.5), p)[0], x)


def check_forward_list(build, np_fn, *arrays):
    """check_forward for ops with several outputs of different shapes."""
    g = tv.Graph()
    with g.as_default():
        phs = [tv.placeholder(tv.as_dtype(a.dtype), a.shape) for a in arrays]
        with tv.Session(graph=g) as sess:
            got = sess.run(list(build(*phs)), dict(zip(phs, arrays)))
    want = np_fn(*arrays)
    assert len(got) == len(want)
    for gv, wv in zip(got, want):
        assert gv.shape == np.shape(wv)
        np.testing.assert_allclose(gv, wv, rtol=1e-6, atol=1e-8)


def in_graph(fn):
    with tv.Graph().as_default():
        return fn()


# ---- concat -----------------------------------------------------------------------------------
@pytest.mark.parametrize("axis", [0, 1, -1, -2])
def test_concat_forward_and_gradient(axis):
    a, b, c = r(2, 3), r(2, 3), r(2, 3)
    check_forward(lambda x, y, z: tv.concat([x, y, z], axis),
                  lambda x, y, z: np.concatenate([x, y, z], axis), a, b, c)
    check_gradients(lambda x, y: tv.concat([x, y * y], axis), a, b)


def test_concat_edge_cases():
    e, a = np.zeros((0, 3)), r(2, 3)
    check_forward(lambda x, y: tv.concat([x, y], 0), lambda x, y: np.concatenate([x, y]), e, a)
    check_gradients(lambda x, y: tv.concat([x, y], 0), e, a)
    check_forward(lambda x: tv.concat([x], 1), lambda x: x, a)
    got = run(tv.concat([tv.constant([1, 2]), [3]], 0))  # Python values take the tensor dtype
    assert got.tolist() == [1, 2, 3] and got.dtype == np.int32
    assert in_graph(lambda: tv.concat([tv.placeholder(tv.float32, [2, None]),
                                       tv.placeholder(tv.float32, [None, 3])], 1).shape) \
        == [2, None]
    assert in_graph(lambda: tv.concat([tv.zeros([2, 1]), tv.zeros([2, 4])], -1).shape) == [2, 5]


def test_concat_gradient_unknown_shapes():
    a = r(2, 3)
    got = run_unknown(lambda x: tv.gradients(tv.reduce_sum(tv.concat([x, x * 3.0], 1)), x)[0],
                      a)
    np.testing.assert_allclose(got, np.full_like(a, 4.0))


def test_concat_errors():
    with tv.Graph().as_default():
        with pytest.raises(IAE, match="ConcatV2.*same rank"):
            tv.concat([tv.zeros([2, 3]), tv.zeros([2])], 0)
        with pytest.raises(IAE, match="dimension 1 .* must match"):
            tv.concat([tv.zeros([2, 3]), tv.zeros([2, 4])], 0)
        with pytest.raises(IAE, match="scalars"):
            tv.concat([tv.constant(1.0), tv.constant(2.0)], 0)
        with pytest.raises(IAE, match="ConcatV2 expects inputs of one dtype"):
            tv.concat([tv.zeros([2]), tv.zeros([2], tv.int32)], 0)
        with pytest.raises(IAE, match="ConcatV2: axis 2 is out of range"):
            tv.concat([tv.zeros([2, 3]), tv.zeros([2, 3])], 2)


# ---- slice and indexing -----------------------------------------------------------------------
def test_slice_forward_gradient_and_errors():
    x = r(4, 5, 3)
    check_forward(lambda t: tv.slice(t, [1, 0, 1], [2, -1, 2]), lambda t: t[1:3, :, 1:3], x)
    check_forward(lambda t: tv.slice(t, [4, 0, 0], [0, 5, 3]), lambda t: t[4:4], x)
    check_gradients(lambda t: tv.slice(t, [1, 2, 0], [3, 2, -1]), x)
    got = run_unknown(lambda t: tv.slice(t, tv.constant([1, 1, 0]), [2, 2, 3]), x)
    np.testing.assert_allclose(got, x[1:3, 1:3])
    np.testing.assert_allclose(grad_unknown(lambda t: tv.slice(t, [1, 0, 0], [-1, 2, 1]), x),
                               np.pad(np.full((3, 2, 1), 1.5), [(1, 0), (0, 3), (0, 2)]))
    with tv.Graph().as_default():
        t = tv.zeros([4, 5])
        with pytest.raises(IAE, match="Slice.*out of bounds"):
            tv.slice(t, [3, 0], [2, 5])
        with pytest.raises(IAE, match="Slice: begin has 1 entries for a tensor of rank 2"):
            tv.slice(t, [0], [1])
        b = tv.placeholder(tv.int32, [2])
        s = tv.slice(t, b, [1, 1])
        with tv.Session() as sess, pytest.raises(IAE, match="Slice"):
            sess.run(s, {b: [4, 5]})


KEYS = [
    1, -1, (1, 2), (slice(None), 0), (slice(1, None),), (slice(None, None, -1),),
    (slice(None, None, 2), slice(None, None, -2)), (slice(3, 0, -1), Ellipsis),
    (Ellipsis, 1), (Ellipsis, None), (None, 1, Ellipsis, None), (slice(-2, None), -1, None),
    (slice(5, 10),), (Ellipsis,), (0, 1, 2), (slice(-100, 100), slice(None, -1)),
    (Ellipsis, slice(None, None, -1), slice(None), 0),
]


@pytest.mark.parametrize("key", KEYS, ids=[repr(k) for k in KEYS])
def test_getitem_matches_numpy(key):
    x = r(4, 3, 5)
    check_forward(lambda t: t[key], lambda t: t[key], x)
    assert in_graph(lambda: tv.placeholder(tv.float64, x.shape)[key].shape) == x[key].shape
    check_gradients(lambda t: t[key] * 1.0, x)


def test_getitem_tensor_indices():
    x = r(4, 3, 5)
    check_forward(lambda t: t[tv.constant([3, 0, 3])], lambda t: t[[3, 0, 3]], x)
    check_forward(lambda t: t[[2, 1]], lambda t: t[[2, 1]], x)
    check_forward(lambda t: t[:, [2, 0]], lambda t: t[:, [2, 0]], x)
    check_forward(lambda t: t[1:, ..., [4, 0]], lambda t: t[1:, ..., [4, 0]], x)
    check_forward(lambda t: t[::-1, tv.constant([[0, 1], [2, 2]])],
                  lambda t: t[::-1, [[0, 1], [2, 2]]], x)
    mask = np.array([True, False, True, True])
    check_forward(lambda t: t[tv.constant(mask)], lambda t: t[mask], x)
    check_forward(lambda t: t[:, mask[:3]], lambda t: t[:, mask[:3]], x)
    check_gradients(lambda t: t[:, [2, 0, 2]], x)
    check_gradients(lambda t: t[[1, 1, 3]], x)
    check_gradients(lambda t: t[tv.constant(mask)], x)


def test_getitem_dynamic_bounds_and_errors():
    x = r(6, 4)
    with tv.Graph().as_default():
        p = tv.placeholder(tv.float64, [6, 4])
        i = tv.placeholder(tv.int32, [])
        with tv.Session() as s:
            got = s.run([p[i], p[i:], p[:, i], p[::i]], {p: x, i: 2})
            np.testing.assert_allclose(got[0], x[2])
            np.testing.assert_allclose(got[1], x[2:])
            np.testing.assert_allclose(got[2], x[:, 2])
            np.testing.assert_allclose(got[3], x[::2])
            gx = tv.gradients(tv.reduce_sum(p[i:] * 2.0), p)[0]
            np.testing.assert_allclose(s.run(gx, {p: x, i: 4}),
                                       np.repeat([0., 0, 0, 0, 2, 2], 4).reshape(6, 4))
            with pytest.raises(IAE, match="StridedSlice"):
                s.run(p[i], {p: x, i: 9})
        with pytest.raises(IAE, match="too many indices"):
            p[0, 1, 2]
        with pytest.raises(IAE, match="index 6 is out of bounds"):
            p[6]
        with pytest.raises(IAE, match="step cannot be zero"):
            p[::0]
        with pytest.raises(IAE, match="single ellipsis"):
            p[..., ...]
        with pytest.raises(IAE, match="integers or bools"):
            p[tv.constant([0.5])]
        with pytest.raises(IAE, match="valid indices"):
            p["a"]
        with pytest.raises(IAE, match="at most one tensor index"):
            p[[0], [1]]
    assert tv.newaxis is None


# ---- split, unstack, stack --------------------------------------------------------------------
def test_split_forward_gradient_and_errors():
    x = r(4, 6)
    check_forward_list(lambda t: tv.split(t, 3, axis=1), lambda t: np.split(t, 3, axis=1), x)
    check_forward_list(lambda t: tv.split(t, [1, -1, 2], axis=-1),
                  lambda t: np.split(t, [1, 4], axis=1), x)
    check_forward_list(lambda t: tv.split(t, [0, 4], 0), lambda t: [t[:0], t], x)
    assert [p.shape for p in in_graph(lambda: tv.split(tv.zeros([4, 6]), [1, -1], 1))] == \
        [[4, 1], [4, 5]]
    check_gradients(lambda t: tv.concat(tv.split(t, [2, 4], 1)[::-1], 1), x)
    check_gradients(lambda t: tv.split(t, 2, 0)[1] * 3.0, x)  # one piece unused
    check_gradients(lambda t: tv.split(t, 1, 0)[0] * 3.0, x)
    got = run_unknown(lambda t: tv.split(t, 2, 0), x)
    np.testing.assert_allclose(got[1], x[2:])
    with tv.Graph().as_default():
        with pytest.raises(IAE, match="Split.*not evenly divisible"):
            tv.split(tv.zeros([4, 6]), 4, axis=1)
        with pytest.raises(IAE, match="SplitV.*must add up"):
            tv.split(tv.zeros([4, 6]), [2, 2], axis=1)
        with pytest.raises(IAE, match="at most one size can be -1"):
            tv.split(tv.zeros([4, 6]), [-1, -1], axis=1)


def test_unstack_and_stack():
    x = r(3, 2, 4)
    for axis in (0, 1, -1):
        check_forward_list(lambda t: tv.unstack(t, axis=axis),
                      lambda t: [np.take(t, i, axis) for i in range(t.shape[axis])], x)
        check_forward(lambda t: tv.stack(tv.unstack(t, axis=axis), axis=axis), lambda t: t, x)
        check_gradients(lambda t: tv.unstack(t, axis=axis)[1] * 2.0, x)
    check_gradients(lambda t: tv.stack([t, t * t], axis=1), r(2, 3))
    got = run_unknown(lambda t: tv.unstack(t, num=3), x)
    np.testing.assert_allclose(got[2], x[2])
    with tv.Graph().as_default():
        with pytest.raises(IAE, match="Unpack.*cannot infer num"):
            tv.unstack(tv.placeholder(tv.float32, [None, 2]))
        with pytest.raises(IAE, match="Unpack.*num=2 does not match"):
            tv.unstack(tv.zeros([3, 2]), num=2)


# ---- transpose, expand_dims, squeeze, reverse --------------------------------------------------
def test_transpose():
    x = r(2, 3, 4)
    check_forward(lambda t: tv.transpose(t), lambda t: t.T, x)
    check_forward(lambda t: tv.transpose(t, [1, 2, 0]), lambda t: t.transpose(1, 2, 0), x)
    check_forward(lambda t: tv.transpose(t, [1, 0, 2]), lambda t: t.transpose(1, 0, 2),
                  np.zeros((0, 2, 1)))
    check_gradients(lambda t: tv.transpose(t, [2, 0, 1]), x)
    check_gradients(lambda t: tv.transpose(t), x)
    c = (r(2, 3) + 1j * r(2, 3)).astype(np.complex128)
    check_forward(lambda t: tv.transpose(t, conjugate=True), lambda t: t.conj().T, c)
    with tv.Graph().as_default(), pytest.raises(IAE, match="Transpose.*not a permutation"):
        tv.transpose(tv.zeros([2, 3]), [0, 0])


def test_expand_dims_and_squeeze():
    x = r(3, 1, 2)
    for axis in (0, 1, 3, -1, -4):
        check_forward(lambda t: tv.expand_dims(t, axis), lambda t: np.expand_dims(t, axis), x)
    check_gradients(lambda t: tv.expand_dims(t, -1), x)
    check_forward(lambda t: tv.squeeze(t), np.squeeze, x)
    check_forward(lambda t: tv.squeeze(t, [1]), lambda t: np.squeeze(t, 1), x)
    check_forward(lambda t: tv.squeeze(t, -2), lambda t: np.squeeze(t, -2), x)
    check_forward(lambda t: tv.squeeze(t), np.squeeze, np.zeros((1, 0, 1)))
    check_gradients(lambda t: tv.squeeze(t, axis=[1]), x)
    np.testing.assert_allclose(run_unknown(lambda t: tv.squeeze(t), x), np.squeeze(x))
    with tv.Graph().as_default():
        with pytest.raises(IAE, match="Squeeze.*can not squeeze dim\\[0\\]"):
            tv.squeeze(tv.zeros([3, 1]), [0])
        with pytest.raises(IAE, match="ExpandDims.*axis 3 is out of range"):
            tv.expand_dims(tv.zeros([3, 1]), 3)


def test_reverse():
    x = r(3, 4, 2)
    for axis in ([0], [1, -1], [], 2):
        check_forward(lambda t: tv.reverse(t, axis), lambda t: np.flip(t, axis), x)
    check_gradients(lambda t: tv.reverse(t, [0, 2]), x)
    with tv.Graph().as_default(), pytest.raises(IAE, match="ReverseV2.*out of range"):
        tv.reverse(tv.zeros([2]), [1])


# ---- tile, broadcast_to, pad ------------------------------------------------------------------
def test_tile():
    x = r(2, 3)
    for m in ([1, 1], [2, 3], [0, 2]):
        check_forward(lambda t: tv.tile(t, m), lambda t: np.tile(t, m), x)
    check_forward(lambda t: tv.tile(t, []), lambda t: np.tile(t, []), np.float32(2.5))  # a copy
    check_gradients(lambda t: tv.tile(t, [3, 2]), x)
    np.testing.assert_allclose(grad_unknown(lambda t: tv.tile(t, [2, 2]), x),
                               np.full_like(x, 6.0))
    with tv.Graph().as_default(), pytest.raises(IAE, match="Tile.*one entry per dimension"):
        tv.tile(tv.zeros([2, 3]), [2])


def test_broadcast_to():
    x = r(3, 1)
    check_forward(lambda t: tv.broadcast_to(t, [2, 3, 4]),
                  lambda t: np.broadcast_to(t, (2, 3, 4)), x)
    check_forward(lambda t: tv.broadcast_to(t, [3, 0]), lambda t: np.zeros((3, 0)), x)
    check_gradients(lambda t: tv.broadcast_to(t, [2, 3, 4]), x)
    check_gradients(lambda t, u: tv.broadcast_to(t, tv.shape(u)) * u, x, r(3, 5))
    with tv.Graph().as_default(), pytest.raises(IAE, match="BroadcastTo.*cannot broadcast"):
        tv.broadcast_to(tv.zeros([3, 2]), [3, 4])


def test_pad():
    x = r(2, 3)
    p = [[1, 2], [0, 1]]
    check_forward(lambda t: tv.pad(t, p), lambda t: np.pad(t, p), x)
    check_forward(lambda t: tv.pad(t, p, constant_values=-1.5),
                  lambda t: np.pad(t, p, constant_values=-1.5), x)
    check_forward(lambda t: tv.pad(t, [[1, 1], [0, 0]]), lambda t: np.pad(t, [[1, 1], [0, 0]]),
                  np.zeros((0, 2)))
    check_gradients(lambda t: tv.pad(t, p), x)
    np.testing.assert_allclose(grad_unknown(lambda t: tv.pad(t, p), x), np.full_like(x, 1.5))
    with tv.Graph().as_default():
        with pytest.raises(IAE, match="Pad: mode must be CONSTANT, REFLECT or SYMMETRIC"):
            tv.pad(tv.zeros([2]), [[1, 1]], mode="EDGE")
        with pytest.raises(IAE, match="Pad.*rank 2"):
            tv.pad(tv.zeros([2, 2]), [[1, 1]])


# ---- rank, size, fill, zeros, ones, eye, range -------------------------------------------------
def test_rank_size_shape():
    x = np.zeros((2, 0, 3))
    assert run_unknown(lambda t: [tv.rank(t), tv.size(t), tv.shape(t)], x)[:2] == [3, 0]
    assert run(tv.size(tv.zeros([4, 5]), out_type=tv.int64)).dtype == np.int64


def test_fill_zeros_ones():
    assert run(tv.fill([2, 3], 7)).tolist() == [[7] * 3] * 2
    z = run(tv.zeros([2, 0, 1], dtype=tv.int64))
    assert z.shape == (2, 0, 1) and z.dtype == np.int64
    o = run(tv.ones((3,), tv.bool))
    assert o.dtype == np.bool_ and o.all()
    assert run(tv.zeros([])).shape == ()
    x = r(3, 2)
    got = run_unknown(lambda t: tv.ones(tv.shape(t)) + tv.zeros([tv.shape(t)[0], 1]), x)
    np.testing.assert_allclose(got, np.ones((3, 2)))
    assert in_graph(lambda: tv.zeros(tv.shape(tv.placeholder(tv.float32, [None, 4]))).shape) \
        == [None, 4]
    check_gradients(lambda v: tv.fill([2, 3], v), np.array(1.5))
    with tv.Graph().as_default():
        with pytest.raises(IAE, match="Fill: value must be a scalar"):
            tv.fill([2], [1, 2])
        with pytest.raises(IAE, match="Fill: dims must be >= 0"):
            tv.fill([2, -1], 1.0)


def test_eye():
    np.testing.assert_array_equal(run(tv.eye(3)), np.eye(3))
    np.testing.assert_array_equal(run(tv.eye(2, 4, dtype=tv.int32)), np.eye(2, 4))
    e = run(tv.eye(2, batch_shape=[3, 1]))
    assert e.shape == (3, 1, 2, 2) and (e == np.eye(2)).all()
    assert run(tv.eye(0)).shape == (0, 0)
    with tv.Graph().as_default(), pytest.raises(IAE, match="Eye: sizes must be >= 0"):
        tv.eye(-1)


def test_range():
    assert run(tv.range(5)).tolist() == list(range(5))
    assert run(tv.range(2, 11, 3)).tolist() == [2, 5, 8]
    assert run(tv.range(5, 0, -2)).tolist() == [5, 3, 1]
    assert run(tv.range(3, 3)).shape == (0,)
    f = run(tv.range(0.0, 1.0, 0.25))
    assert f.dtype == np.float32 and f.tolist() == [0, 0.25, 0.5, 0.75]
    assert run(tv.range(4, dtype=tv.float64)).dtype == np.float64
    assert in_graph(lambda: tv.range(1, 10, 4).shape) == [3]
    with tv.Graph().as_default():
        n = tv.placeholder(tv.int32, [])
        t = tv.range(n)
        assert t.shape == [None]
        with tv.Session() as s:
            assert s.run(t, {n: 3}).tolist() == [0, 1, 2]
            with pytest.raises(IAE, match="Range: requires start <= limit"):
                s.run(t, {n: -2})
        with pytest.raises(IAE, match="Range: delta must not be zero"):
            tv.range(0, 5, 0)


# ---- gather and segment sums ------------------------------------------------------------------
def test_gather_forward():
    p = r(5, 3, 2)
    for idx, axis in (([4, 0, 4], 0), ([[1, 2], [0, 0]], 1), ([1], -1), (3, 0), ([], 0)):
        ia = np.asarray(idx, dtype=np.int32)
        check_forward(lambda t, i: tv.gather(t, i, axis=axis),
                      lambda t, i: np.take(t, i, axis=axis), p, ia)
    assert in_graph(lambda: tv.gather(tv.zeros([5, 3]), tv.zeros([2, 4], tv.int32),
                                      axis=1).shape) == [5, 2, 4]


def test_gather_gradient_is_sparse():
    p = r(5, 3)
    with tv.Graph().as_default():
        x = tv.placeholder(tv.float64, [5, 3])
        y = tv.gather(x, [4, 0, 4]) * 2.0
        gr = tv.gradients(tv.reduce_sum(y), x)[0]
        assert isinstance(gr, tv.IndexedSlices)
        two = tv.gradients(tv.reduce_sum(tv.gather(x, [[1, 1], [2, 0]])), x)[0]
        assert isinstance(two, tv.IndexedSlices) and two.indices.shape == [4]
        with tv.Session() as s:
            vals, idx, shp, dense = s.run([gr.values, gr.indices, gr.dense_shape,
                                           tv.densify(gr)], {x: p})
            assert idx.tolist() == [4, 0, 4] and shp.tolist() == [5, 3]
            np.testing.assert_allclose(vals, np.full((3, 3), 2.0))
            np.testing.assert_allclose(dense[:, 0], [2, 0, 0, 0, 4])
            d2 = s.run(tv.densify(two, x), {x: p})
            np.testing.assert_allclose(d2[:, 0], [1, 2, 1, 0, 0])
    check_gradients(lambda t: tv.gather(t, [4, 0, 4]), p)
    check_gradients(lambda t: tv.gather(t, [[1, 3], [3, 3]]), p)
    check_gradients(lambda t: tv.gather(t, 2), p)
    check_gradients(lambda t: tv.gather(t, [2, 0, 2], axis=1), p)
    check_gradients(lambda t: tv.gather(t, [[1], [0]], axis=-1), r(2, 3, 2))
    # two sparse paths stay sparse; a sparse plus a dense path is summed dense
    with tv.Graph().as_default():
        x = tv.placeholder(tv.float64, [5, 3])
        g2 = tv.gradients(tv.reduce_sum(tv.gather(x, [1]) + tv.gather(x, [2])), x)[0]
        assert isinstance(g2, tv.IndexedSlices)
    check_gradients(lambda t: tv.gather(t, [1, 1]) + t[:2] * t[1:3], p)


def test_gather_errors():
    with tv.Graph().as_default():
        p = tv.placeholder(tv.float32, [3, 2])
        with pytest.raises(IAE, match="GatherV2: indices must be int32 or int64"):
            tv.gather(p, tv.constant([0.0]))
        with pytest.raises(IAE, match="GatherV2: axis 2 is out of range"):
            tv.gather(p, [0], axis=2)
        y = tv.gather(p, [0, 3])
        with tv.Session() as s, pytest.raises(IAE, match=r"indices\[1\] = 3 is not in \[0, 3\)"
                                                          r"[\s\S]*GatherV2"):
            s.run(y, {p: np.zeros((3, 2))})


def test_unsorted_segment_sum():
    data = r(6, 2)
    ids = np.array([0, 2, 0, -1, 3, 2], dtype=np.int32)

    def want(d, i, n=4):
        out = np.zeros((n,) + d.shape[i.ndim:])
        for k, s in enumerate(i.reshape(-1)):
            if s >= 0:
                out[s] += d.reshape((i.size,) + d.shape[i.ndim:])[k]
        return out
    check_forward(lambda d, i: tv.unsorted_segment_sum(d, i, 4), want, data, ids)
    check_forward(lambda d, i: tv.unsorted_segment_sum(d, i, 4), want, data.reshape(3, 2, 2),
                  ids.reshape(3, 2))
    check_forward(lambda d, i: tv.unsorted_segment_sum(d, i, 4), want, np.zeros((0, 2)),
                  np.zeros(0, np.int32))
    check_gradients(lambda d, i: tv.unsorted_segment_sum(d, i, 4), data, ids)
    assert in_graph(lambda: tv.unsorted_segment_sum(tv.zeros([6, 2]), tv.zeros([6], tv.int32),
                                                    5).shape) == [5, 2]
    with tv.Graph().as_default():
        with pytest.raises(IAE, match="UnsortedSegmentSum: segment_ids shape .* not a prefix"):
            tv.unsorted_segment_sum(tv.zeros([6, 2]), tv.zeros([5], tv.int32), 3)
        y = tv.unsorted_segment_sum(tv.zeros([2]), tv.constant([0, 3]), 3)
        with tv.Session() as s, pytest.raises(IAE, match="segment id 3 is out of range"):
            s.run(y)


def test_unsorted_segment_sum_like_takes_tensor_or_shape():
    from tensorvm.ops.array.index_ops import unsorted_segment_sum_like
    v = r(3, 2)
    with tv.Graph().as_default():
        like = tv.placeholder(tv.float64, [4, 2])
        a = unsorted_segment_sum_like(v, [1, 3, 1], like)
        b = unsorted_segment_sum_like(v, [1, 3, 1], tv.shape(like))
        c = unsorted_segment_sum_like(v, [1, 3, 1], [4, 2])
        assert a.shape == [4, 2] and b.shape == [4, 2] and c.shape == [4, 2]
        with tv.Session() as s:
            got = s.run([a, b, c], {like: np.zeros((4, 2))})
    want = np.zeros((4, 2))
    np.add.at(want, [1, 3, 1], v)
    for gv in got:
        np.testing.assert_allclose(gv, want)
    check_gradients(lambda t: unsorted_segment_sum_like(t, [1, 0, 1], tv.constant([2, 2])), v)


def test_gather_nd_and_scatter_nd():
    p = r(3, 4, 2)
    idx = np.array([[0, 1], [2, 3], [0, 1]], dtype=np.int32)
    check_forward(tv.gather_nd, lambda t, i: t[i[:, 0], i[:, 1]], p, idx)
    idx3 = np.array([[[2, 0, 1]], [[1, 3, 0]]], dtype=np.int32)
    check_forward(tv.gather_nd, lambda t, i: t[i[..., 0], i[..., 1], i[..., 2]], p, idx3)
    check_gradients(tv.gather_nd, p, idx)
    u = r(3, 2)
    want = np.zeros((3, 4, 2))
    np.add.at(want, (idx[:, 0], idx[:, 1]), u)
    check_forward(lambda i, v: tv.scatter_nd(i, v, [3, 4, 2]), lambda i, v: want, idx, u)
    check_gradients(lambda i, v: tv.scatter_nd(i, v, [3, 4, 2]), idx, u, wrt=[1])
    with tv.Graph().as_default():
        with pytest.raises(IAE, match="GatherNd: index depth 4 exceeds"):
            tv.gather_nd(tv.zeros([3, 4, 2]), tv.zeros([2, 4], tv.int32))
        with pytest.raises(IAE, match="ScatterNd: updates of shape"):
            tv.scatter_nd(tv.zeros([3, 2], tv.int32), tv.zeros([3, 5]), [3, 4, 2])


# ---- partitions, masks ------------------------------------------------------------------------
def test_dynamic_partition_and_stitch():
    data = r(6, 2)
    parts = np.array([1, 0, 2, 1, 1, 0], dtype=np.int32)
    check_forward_list(lambda d, p: tv.dynamic_partition(d, p, 3),
                  lambda d, p: [d[p == k] for k in range(3)], data, parts)
    check_forward_list(lambda d, p: tv.dynamic_partition(d, p, 4),
                  lambda d, p: [d[p == k] for k in range(4)], data, parts)  # an empty one
    check_forward_list(lambda d, p: tv.dynamic_partition(d, p, 2),
                  lambda d, p: [d[p == k] for k in range(2)], r(2, 3),
                  np.array([[0, 1, 1], [1, 0, 1]], dtype=np.int32))
    check_gradients(lambda d, p: tv.dynamic_partition(d, p, 3)[1] * 2.0, data, parts)
    check_gradients(lambda d, p: tv.concat(tv.dynamic_partition(d, p, 3), 0), data, parts)
    assert [t.shape for t in in_graph(lambda: tv.dynamic_partition(
        tv.zeros([6, 2]), tv.zeros([6], tv.int32), 2))] == [[None, 2]] * 2
    # stitch undoes partition
    i0, i1 = np.array([0, 2, 5], np.int32), np.array([[1, 3], [4, 6]], np.int32)
    d0, d1 = r(3, 2), r(2, 2, 2)

    def want(a, b, x, y):
        out = np.zeros((7, 2))
        out[a] = x
        out[b.reshape(-1)] = y.reshape(4, 2)
        return out
    check_forward(lambda a, b, x, y: tv.dynamic_stitch([a, b], [x, y]), want, i0, i1, d0, d1)
    check_gradients(lambda a, b, x, y: tv.dynamic_stitch([a, b], [x, y]), i0, i1, d0, d1)
    with tv.Graph().as_default():
        with pytest.raises(IAE, match="DynamicPartition: partitions shape .* not a prefix"):
            tv.dynamic_partition(tv.zeros([6, 2]), tv.zeros([5], tv.int32), 2)
        y = tv.dynamic_partition(tv.zeros([2]), tv.constant([0, 2]), 2)
        with tv.Session() as s, pytest.raises(IAE, match=r"partitions\[1\] = 2 is not in"):
            s.run(y)


def test_boolean_mask():
    x = r(4, 3, 2)
    m1 = np.array([True, False, True, True])
    m2 = rng.random((4, 3)) > 0.5
    check_forward(lambda t, m: tv.boolean_mask(t, m), lambda t, m: t[m], x, m1)
    check_forward(lambda t, m: tv.boolean_mask(t, m), lambda t, m: t[m], x, m2)
    check_forward(lambda t, m: tv.boolean_mask(t, m, axis=1), lambda t, m: t[:, m], x,
                  np.array([False, True, True]))
    check_forward(lambda t, m: tv.boolean_mask(t, m), lambda t, m: t[m], x, np.zeros(4, bool))
    check_gradients(lambda t, m: tv.boolean_mask(t, m), x, m2)
    check_gradients(lambda t, m: tv.boolean_mask(t, m, axis=-2), x,
                    np.array([True, False, True]))
    with tv.Graph().as_default():
        with pytest.raises(IAE, match="BooleanMask: mask must be bool"):
            tv.boolean_mask(tv.zeros([3]), tv.zeros([3]))
        with pytest.raises(IAE, match="BooleanMask: mask shape \\[3\\] does not match"):
            tv.boolean_mask(tv.zeros([4, 2]), tv.zeros([3], tv.bool))


def test_one_hot():
    idx = np.array([[0, 2], [3, -1]], dtype=np.int32)
    eye = np.eye(3)
    want = np.stack([np.stack([eye[i] if 0 <= i < 3 else np.zeros(3) for i in row])
                     for row in idx])
    got = check_forward(lambda i: tv.one_hot(i, 3), lambda i: want, idx)
    assert got.dtype == np.float32
    check_forward(lambda i: tv.one_hot(i, 3, axis=0), lambda i: np.moveaxis(want, -1, 0), idx)
    check_forward(lambda i: tv.one_hot(i, 3, axis=1), lambda i: np.moveaxis(want, -1, 1), idx)
    got = check_forward(lambda i: tv.one_hot(i, 3, on_value=5, off_value=-1),
                        lambda i: np.where(want == 1, 5, -1), idx)
    assert got.dtype == np.int32
    assert run(tv.one_hot([1], 2, dtype=tv.float64)).dtype == np.float64
    with tv.Graph().as_default(), pytest.raises(IAE, match="OneHot: indices must be int"):
        tv.one_hot(tv.constant([1.0]), 3)


# ---- sort, argsort, top_k, unique -------------------------------------------------------------
def test_sort_and_argsort():
    x = r(3, 5)
    ties = np.array([[3, 1, 3, 2, 1]], dtype=np.int32)
    for axis in (-1, 0):
        check_forward(lambda t: tv.sort(t, axis), lambda t: np.sort(t, axis), x)
        check_forward(lambda t: tv.sort(t, axis, "DESCENDING"),
                      lambda t: -np.sort(-t, axis), x)
        check_forward(lambda t: tv.argsort(t, axis), lambda t: np.argsort(t, axis), x)
        check_gradients(lambda t: tv.sort(t, axis, direction="DESCENDING"), x)
    check_forward(lambda t: tv.argsort(t), lambda t: np.argsort(t, kind="stable"), ties)
    check_forward(lambda t: tv.argsort(t, direction="DESCENDING"),
                  lambda t: np.array([[0, 2, 3, 1, 4]]), ties)
    check_forward(lambda t: tv.sort(t), np.sort, np.zeros((2, 0)))
    with tv.Graph().as_default():
        with pytest.raises(IAE, match="direction must be"):
            tv.sort(tv.zeros([3]), direction="UP")
        with pytest.raises(IAE, match="(?s)at least 1-D.*Argsort"):
            tv.argsort(tv.constant(1.0))


def test_top_k():
    x = r(3, 6)
    v, i = run(list(tv.top_k(tv.constant(x), 3)))
    order = np.argsort(-x, axis=-1, kind="stable")[:, :3]
    np.testing.assert_array_equal(i, order)
    np.testing.assert_allclose(v, np.take_along_axis(x, order, -1))
    assert i.dtype == np.int32
    tv_, ti = run(list(tv.top_k(tv.constant([1, 3, 3, 2, 3]), 2)))
    assert tv_.tolist() == [3, 3] and ti.tolist() == [1, 2]  # ties: lower index first
    check_gradients(lambda t: tv.top_k(t, 2)[0], x)
    check_gradients(lambda t: tv.top_k(t, 6)[0], r(2, 2, 6))
    v0, _ = run(list(tv.top_k(tv.zeros([2, 3]), 0)))
    assert v0.shape == (2, 0)
    with tv.Graph().as_default():
        with pytest.raises(IAE, match="TopKV2: input must have at least k=4 columns"):
            tv.top_k(tv.zeros([2, 3]), 4)
        p = tv.placeholder(tv.float32, [2, None])
        vals, _ = tv.top_k(p, 4)
        with tv.Session() as s, pytest.raises(IAE, match="at least k=4"):
            s.run(vals, {p: np.zeros((2, 3))})


def test_unique():
    x = np.array([4, 1, 4, 2, 1, 7], dtype=np.int64)
    with tv.Graph().as_default():
        p = tv.placeholder(tv.int64, [6])
        y, idx = tv.unique(p)
        y2, idx2, cnt = tv.unique_with_counts(p, out_idx=tv.int64)
        assert y.shape == [None] and idx.shape == [6] and cnt.shape == [None]
        with tv.Session() as s:
            got = s.run([y, idx, y2, idx2, cnt], {p: x})
    assert got[0].tolist() == [4, 1, 2, 7] and got[1].tolist() == [0, 1, 0, 2, 1, 3]
    assert got[1].dtype == np.int32 and got[3].dtype == np.int64
    assert got[4].tolist() == [2, 2, 1, 1]
    np.testing.assert_array_equal(got[0][got[1]], x)
    s = run(list(tv.unique(tv.constant(["b", "a", "b"]))))
    assert list(s[0]) == ["b", "a"] and s[1].tolist() == [0, 1, 0]
    e = run(list(tv.unique(tv.zeros([0]))))
    assert e[0].shape == (0,) and e[1].shape == (0,)
    with tv.Graph().as_default(), pytest.raises(IAE, match="Unique: x must be 1-D"):
        tv.unique(tv.zeros([2, 2]))


# ---- second-order: the gradient ops' own gradients ---------------------------------------------
@pytest.mark.parametrize("name,fn", [
    ("strided_slice", lambda t: t[1:, ::-2]),
    ("slice", lambda t: tv.slice(t, [1, 0], [2, 3])),
    ("tile", lambda t: tv.tile(t, [2, 1])),
    ("gather", lambda t: tv.gather(t, [2, 0, 2])),
    ("gather_axis1", lambda t: tv.gather(t, [2, 0], axis=1)),
    ("sort", lambda t: tv.sort(t, 0)),
    ("boolean_mask", lambda t: tv.boolean_mask(t, tv.constant([True, False, True]))),
    ("segment_sum", lambda t: tv.unsorted_segment_sum(t, [1, -1, 1], 2)),
    ("pad", lambda t: tv.pad(t, [[1, 0], [2, 1]])),
    ("concat_split", lambda t: tv.concat(tv.split(t, [1, 2], 0)[::-1], 0)),
    ("partition", lambda t: tv.dynamic_partition(t, [1, 0, 1], 2)[1]),
    ("gather_nd", lambda t: tv.gather_nd(t, [[0, 1], [2, 2], [0, 1]])),
])
def test_second_order_gradients(name, fn):
    """d/dx of (d/dx sum(f(x)^3)) exercises the gradients of the gradient ops."""
    def first(t):
        return tv.gradients(tv.reduce_sum(fn(t) ** 3.0), t)[0]
    x = r(3, 4)
    check_gradients(lambda t: tv.densify(first(t), t), x, rtol=1e-4)


# ---- the ops' attrs are plain data: a GraphDef round trip rebuilds the same shapes --------------
def test_graph_def_round_trip():
    from tensorvm.framework.graph_def import graph_from_dict
    g = tv.Graph()
    with g.as_default():
        x = tv.placeholder(tv.float32, [4, 6])
        i = tv.placeholder(tv.int32, [])
        outs = [x[1:, ..., None, ::-2], x[i], x[:, [1, 2]], tv.split(x, [2, -1], 1)[1],
                tv.transpose(x), tv.tile(x, [1, 2]), tv.pad(x, [[1, 0], [0, 0]]),
                tv.eye(2, batch_shape=[3]), tv.one_hot([1, 2], 4), tv.top_k(x, 2)[1],
                tv.unique(tv.reshape(x, [-1]))[0], tv.squeeze(tv.expand_dims(x, 0), [0])]
    d = json.loads(json.dumps(g.as_graph_def()))
    g2 = graph_from_dict(d)
    for t in outs:
        assert g2.get_tensor_by_name(t.name).shape == t.shape


# ---- shapes and paddings computed in the graph; mirrored padding --------------------------------
def test_reshape_to_a_shape_computed_in_the_graph():
    x = tv.placeholder(tv.float64, [None, 2, 3])
    flat = tv.reshape(x, [tv.shape(x)[0], -1])
    twice = tv.reshape(x, tv.stack([tv.shape(x)[0] * 2, 3]))
    a = r(4, 2, 3)
    got = run([flat, twice], {x: a})
    np.testing.assert_array_equal(got[0], a.reshape(4, -1))
    np.testing.assert_array_equal(got[1], a.reshape(8, 3))
    assert flat.shape.as_list() == [None, None] and twice.shape.as_list() == [None, 3]
    check_gradients(lambda t: tv.reshape(t, [tv.shape(t)[0], -1]) * 2.0, a)
    # a list of ints only stays the static op
    assert tv.reshape(x, tv.constant([-1, 6])).op.type == "Reshape"


def test_reshape_to_a_bad_computed_shape_names_the_sizes():
    x = tv.placeholder(tv.float32, [None, 2, 3])
    bad = tv.reshape(x, tv.stack([tv.shape(x)[0], 5]))
    with pytest.raises(tv.errors.InvalidArgumentError,
                       match=r"Input to reshape is a tensor with 12 values, but the requested "
                             r"shape \[2, 5\] does not fit them"):
        run(bad, {x: np.zeros((2, 2, 3), np.float32)})
    with pytest.raises(tv.errors.InvalidArgumentError, match="shape must be int32 or int64"):
        tv.reshape(x, tv.cast(tv.stack([tv.shape(x)[0], 6]), tv.float32))


@pytest.mark.parametrize("mode", ["REFLECT", "SYMMETRIC", "reflect"])
@pytest.mark.parametrize("paddings", [[[1, 2], [3, 0]], [[0, 0], [2, 2]], [[2, 1], [1, 1]]])
def test_mirror_pad_equals_numpy_and_its_gradient(mode, paddings):
    x = r(3, 4)
    check_forward(lambda t: tv.pad(t, paddings, mode=mode),
                  lambda a: np.pad(a, paddings, mode=mode.lower()), x)
    check_gradients(lambda t: tv.pad(t, paddings, mode=mode), x)


def test_mirror_pad_limits_and_modes():
    x = tv.constant(r(3, 4))
    assert run(tv.pad(x, [[3, 3], [0, 0]], mode="SYMMETRIC")).shape == (9, 4)
    with pytest.raises(tv.errors.InvalidArgumentError,
                       match="less than the dimension size in REFLECT mode: 3, 0 not less than 3"):
        tv.pad(x, [[3, 0], [0, 0]], mode="REFLECT")
    with pytest.raises(tv.errors.InvalidArgumentError,
                       match="at most the dimension size in SYMMETRIC mode: 0, 4 exceeds 3"):
        tv.pad(x, [[0, 4], [0, 0]], mode="SYMMETRIC")
    with pytest.raises(tv.errors.InvalidArgumentError,
                       match="mode must be CONSTANT, REFLECT or SYMMETRIC, got 'WRAP'"):
        tv.pad(x, [[0, 0], [0, 0]], mode="wrap")


def test_pad_with_paddings_computed_in_the_graph():
    n = tv.placeholder(tv.int32, [])
    x = tv.placeholder(tv.float64, [3, 4])
    y = tv.pad(x, [[n, 1], [0, n]], constant_values=2.0)
    whole = tv.pad(x, tv.reshape(tv.stack([n, 0, 1, n]), [2, 2]))
    a = r(3, 4)
    got = run([y, whole], {x: a, n: 2})
    np.testing.assert_array_equal(got[0], np.pad(a, [[2, 1], [0, 2]], constant_values=2.0))
    np.testing.assert_array_equal(got[1], np.pad(a, [[2, 0], [1, 2]]))
    g = tv.gradients(tv.reduce_sum(y * y), x)[0]
    np.testing.assert_allclose(run(g, {x: a, n: 1}), 2 * a)
    with pytest.raises(tv.errors.InvalidArgumentError, match=r"paddings must be >= 0, got "
                                                             r"\[\[-1, 1\], \[0, -1\]\]"):
        run(y, {x: a, n: -1})
