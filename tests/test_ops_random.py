"""Random ops: per-graph and per-op seeding (reproducible across sessions, new values on every
run), sample statistics, shapes, dtypes and the errors raised at construction."""
import numpy as np
import pytest

import tensorvm as tv

IAE = tv.errors.InvalidArgumentError


def build(seed=None, op_seed=None):
    """A graph with one op of each kind; returns (graph, fetches)."""
    g = tv.Graph()
    with g.as_default():
        if seed is not None:
            tv.set_random_seed(seed)
        fetches = [tv.random_normal([3, 2], seed=op_seed),
                   tv.random_uniform([4], -2.0, 3.0, seed=op_seed),
                   tv.random_uniform([5], 0, 100, dtype=tv.int64, seed=op_seed),
                   tv.truncated_normal([6], seed=op_seed),
                   tv.random_shuffle(tv.range(8), seed=op_seed),
                   tv.multinomial(tv.constant([[0.0, 1.0, 2.0]]), 6, seed=op_seed)]
    return g, fetches


def runs(g, fetches, n=2):
    with tv.Session(graph=g) as s:
        return [s.run(fetches) for _ in range(n)]


def same(a, b):
    return all(np.array_equal(x, y) for x, y in zip(a, b))


@pytest.mark.parametrize("seed,op_seed", [(7, None), (None, 3), (7, 3)])
def test_seeded_graph_repeats_its_sequence_in_a_fresh_session(seed, op_seed):
    g, f = build(seed, op_seed)
    first, second = runs(g, f), runs(g, f)
    assert same(first[0], second[0]) and same(first[1], second[1])
    assert not same(first[0], first[1])  # every run draws new values
    g2, f2 = build(seed, op_seed)  # the same construction in another graph
    assert same(runs(g2, f2, 1)[0], first[0])


def test_seeds_select_different_streams():
    a = runs(*build(7), 1)[0]
    assert not same(a, runs(*build(8), 1)[0])  # graph seed matters
    assert not same(runs(*build(7, 1), 1)[0], runs(*build(7, 2), 1)[0])  # op seed matters
    g = tv.Graph()
    with g.as_default():
        tv.set_random_seed(1)
        x, y = tv.random_normal([4]), tv.random_normal([4])  # op seeds from position differ
    vx, vy = runs(g, [x, y], 1)[0]
    assert not np.array_equal(vx, vy)
    assert g.get_operations()[-1].attrs["seed"] == 1


def test_unseeded_ops_are_nondeterministic_and_never_merged():
    g, f = build()
    assert not same(runs(g, f, 1)[0][:4], runs(g, f, 1)[0][:4])
    with tv.Graph().as_default():
        a, b = tv.random_normal([8]), tv.random_normal([8])  # identical ops, not CSE'd
        assert a.op.stateful and not a.op.op_def.foldable
        with tv.Session() as s:
            va, vb = s.run([a, b])
            assert not np.array_equal(va, vb)
            assert not np.array_equal(s.run(a), s.run(a))


def test_statistics():
    n = 20000
    with tv.Graph().as_default():
        tv.set_random_seed(0)
        normal = tv.random_normal([n], mean=2.0, stddev=3.0)
        uni = tv.random_uniform([n], -1.0, 3.0)
        ints = tv.random_uniform([n], -3, 4, dtype=tv.int32)
        trunc = tv.truncated_normal([n], mean=1.0, stddev=0.5, dtype=tv.float64)
        probs = tv.multinomial(tv.log(tv.constant([[0.2, 0.5, 0.3]])), n)
        shuf = tv.random_shuffle(tv.reshape(tv.range(30), [10, 3]))
        with tv.Session() as s:
            vn, vu, vi, vt, vm, vs = s.run([normal, uni, ints, trunc, probs, shuf])
    assert abs(vn.mean() - 2.0) < 0.1 and abs(vn.std() - 3.0) < 0.1
    assert vu.min() >= -1.0 and vu.max() < 3.0 and abs(vu.mean() - 1.0) < 0.05
    assert set(np.unique(vi)) == set(range(-3, 4)) and vi.dtype == np.int32
    assert np.abs(vt - 1.0).max() <= 1.0 and abs(vt.mean() - 1.0) < 0.02
    assert abs(vt.std() - 0.5 * 0.8796) < 0.02  # std of a normal truncated at 2 sigma
    np.testing.assert_allclose(np.bincount(vm[0], minlength=3) / n, [0.2, 0.5, 0.3], atol=0.02)
    assert vm.dtype == np.int64 and vm.shape == (1, n)
    assert sorted(vs[:, 0].tolist()) == list(range(0, 30, 3))
    assert ((vs[:, 1] - vs[:, 0]) == 1).all()  # whole rows move together


def test_shapes_and_dtypes():
    with tv.Graph().as_default():
        x = tv.placeholder(tv.float32, [None, 3])
        dyn = tv.random_normal(tv.shape(x))
        assert dyn.shape == [None, 3]
        shapes = {tv.random_normal([2, 3], dtype=tv.float64): ((2, 3), np.float64),
                  tv.random_uniform([], dtype=tv.float16): ((), np.float16),
                  tv.truncated_normal((0, 4)): ((0, 4), np.float32),
                  tv.random_uniform([3], maxval=10, dtype=tv.int64): ((3,), np.int64),
                  tv.random_shuffle(tv.constant(5.0)): ((), np.float32),
                  tv.random_normal(tv.TensorShape([2])): ((2,), np.float32)}
        for t, (shp, dt) in shapes.items():
            assert t.shape == list(shp) and t.dtype == tv.as_dtype(dt)
        with tv.Session() as s:
            got = s.run(list(shapes) + [dyn], {x: np.zeros((4, 3))})
        for v, (shp, dt) in zip(got, shapes.values()):
            assert v.shape == shp and v.dtype == dt
        assert got[-1].shape == (4, 3)


def test_gradient_flows_to_mean_and_stddev():
    with tv.Graph().as_default():
        mean, std = tv.placeholder(tv.float64, []), tv.placeholder(tv.float64, [])
        z = tv.random_normal([50], mean=mean, stddev=std, dtype=tv.float64, seed=1)
        gm, gs = tv.gradients(tv.reduce_sum(z), [mean, std])
        with tv.Session() as s:
            vz, vgm, vgs = s.run([z, gm, gs], {mean: 1.0, std: 2.0})
    assert vgm == 50.0
    np.testing.assert_allclose(vgs, ((vz - 1.0) / 2.0).sum())


def test_errors():
    with tv.Graph().as_default():
        with pytest.raises(IAE, match="random_uniform: maxval must be given for dtype int32"):
            tv.random_uniform([2], dtype=tv.int32)
        with pytest.raises(IAE, match="need minval < maxval"):
            tv.random_uniform([2], 5, 5, dtype=tv.int32)
        with pytest.raises(IAE, match="RandomStandardNormal: dtype must be a floating type"):
            tv.random_normal([2], dtype=tv.int32)
        with pytest.raises(IAE, match="RandomStandardNormal: shape must be non-negative"):
            tv.random_normal([2, -1])
        with pytest.raises(IAE, match="TruncatedNormal: shape must be a 1-D integer tensor"):
            tv.truncated_normal(tv.constant([2.0]))
        with pytest.raises(IAE, match="dtype must be a float or integer type"):
            tv.random_uniform([2], dtype=tv.bool)
        with pytest.raises(IAE, match="Multinomial: logits must be 2-D"):
            tv.multinomial(tv.zeros([3]), 2)
        shp = tv.placeholder(tv.int32, [2])
        t = tv.random_uniform(shp)
        with tv.Session() as s, pytest.raises(IAE, match="(?s)non-negative.*RandomUniform"):
            s.run(t, {shp: [2, -3]})


def test_generators_are_per_session_where_resources_outlive_sessions():
    """On a dask.distributed worker the ResourceMgr outlives sessions: each session (the prefix
    of the step id) still starts the op's stream from its seed."""
    from tensorvm.ops.math.random_ops import _rng
    from tensorvm.vm.interpreter import KernelContext, ResourceMgr
    mgr = ResourceMgr("/job:worker/task:0/device:CPU:0")

    def draw(step_id, seed=(5, 9)):
        return _rng(KernelContext(mgr, "random_normal", step_id, mgr.device), *seed).random(3)
    a1, a2 = draw("aaaa.0"), draw("aaaa.1")
    assert not np.array_equal(a1, a2)
    np.testing.assert_array_equal(draw("bbbb.0"), a1)  # a new session restarts the stream
    np.testing.assert_array_equal(draw("aaaa.2.1"), np.random.default_rng([5, 9]).random(9)[6:])
    assert mgr.names() == [("", "rng/random_normal")]
