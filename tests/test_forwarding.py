"""Buffer forwarding (TF's ``forward_input``): an element-wise kernel writes its output into a
dead input's buffer (``OpDef.forwards``, :func:`tensorvm.vm.interpreter.donatable`), and never into
an array anything else can see: a feed, a fetched value, a variable, a constant, a value
another op still reads, an alias, a view."""
import numpy as np
import pytest
import tensorvm as tv
from tensorvm.vm import interpreter as runtime
from tensorvm.framework.op_def_library import apply_op
from tensorvm.framework.op_registry import register_op

SEEN: list = []


def _probe_kernel(x, out=None):
    """Negate, recording whether a buffer was offered (and which)."""
    SEEN.append(out)
    return np.negative(x, out=out)


register_op("ForwardProbe", lambda inputs, attrs: [(inputs[0].dtype, inputs[0]._shape)],
            _probe_kernel, forwards=(0,))


def probe(t):
    return apply_op("ForwardProbe", [t]).outputs[0]


@pytest.fixture(autouse=True)
def _clear(monkeypatch):
    """Every array offered, whatever its size (the tests' arrays are tiny)."""
    monkeypatch.setattr(runtime, "FORWARD_MIN_BYTES", 0)
    SEEN.clear()
    yield
    SEEN.clear()


def test_small_arrays_are_not_offered(g, monkeypatch):
    monkeypatch.setattr(runtime, "FORWARD_MIN_BYTES", 64)
    x = tv.placeholder(tv.float32, [None])
    r = probe(x * 2.0)
    with tv.Session() as s:
        s.run(r, {x: np.ones(15, np.float32)})  # 60 bytes
        s.run(r, {x: np.ones(16, np.float32)})  # 64 bytes
    assert [o is not None for o in SEEN] == [False, True]


def test_a_dead_fresh_intermediate_is_written_in_place(g):
    x = tv.placeholder(tv.float32, [4])
    r = probe(x * 2.0)  # x * 2.0: a fresh array that only the probe reads
    with tv.Session() as s:
        out = s.run(r, {x: np.arange(4, dtype=np.float32)})
    np.testing.assert_array_equal(out, [0, -2, -4, -6])
    assert len(SEEN) == 1 and SEEN[0] is not None


def test_a_feed_is_never_written(g):
    x = tv.placeholder(tv.float32, [4])
    r, q = probe(x), tv.nn.relu(x)
    feed = np.array([1, -2, 3, -4], np.float32)
    with tv.Session() as s:
        got = s.run([r, q], {x: feed})
    np.testing.assert_array_equal(feed, [1, -2, 3, -4])
    np.testing.assert_array_equal(got[0], [-1, 2, -3, 4])
    np.testing.assert_array_equal(got[1], [1, 0, 3, 0])
    assert SEEN == [None]


def test_a_fetched_value_keeps_its_values(g):
    x = tv.placeholder(tv.float32, [4])
    a = x - 1.0
    r = tv.nn.relu(a)
    with tv.Session() as s:
        av, rv = s.run([a, r], {x: np.array([0, 1, 2, 3], np.float32)})
    np.testing.assert_array_equal(av, [-1, 0, 1, 2])
    np.testing.assert_array_equal(rv, [0, 0, 1, 2])


def test_variables_and_constants_are_never_written(g):
    v = tv.Variable(np.array([1, -2, 3], np.float32))
    c = tv.constant(np.array([-1, 5, -7], np.float32))
    r1, r2 = probe(v.value()), probe(c)
    with tv.Session() as s:
        s.run(v.initializer)
        for _ in range(3):  # a second run sees the same variable and constant
            got = s.run([r1, r2])
            np.testing.assert_array_equal(got[0], [-1, 2, -3])
            np.testing.assert_array_equal(got[1], [1, -5, 7])
        np.testing.assert_array_equal(s.run(v), [1, -2, 3])
    # (the constant's probe may be folded once at planning)
    assert len(SEEN) >= 3 and all(o is None for o in SEEN)


def test_a_value_read_later_or_through_an_alias_is_not_written(g):
    x = tv.placeholder(tv.float32, [3])
    a = x * 1.0
    alias = tv.identity(a)
    r = probe(a)
    later = alias + 0.0  # reads a's array (Identity returns the same object)
    with tv.Session() as s:
        got_r, got_later = s.run([r, later], {x: np.array([1, 2, 3], np.float32)})
    np.testing.assert_array_equal(got_r, [-1, -2, -3])
    np.testing.assert_array_equal(got_later, [1, 2, 3])


def test_a_view_is_not_written(g):
    x = tv.placeholder(tv.float32, [2, 3])
    a = x * 1.0
    flat = tv.reshape(a, [6])  # a view of a's buffer
    r = probe(flat)
    keep = a + 0.0
    with tv.Session() as s:
        got, k = s.run([r, keep], {x: np.arange(6, dtype=np.float32).reshape(2, 3)})
    np.testing.assert_array_equal(got, -np.arange(6))
    np.testing.assert_array_equal(k, np.arange(6).reshape(2, 3))


def test_binary_ops_forward_only_the_operand_of_the_output_shape(g):
    """Add(bias, h): h's buffer (the output's shape) may be taken, never the bias's."""
    rng = np.random.default_rng(0)
    xs, ws, bs = (rng.standard_normal(s).astype(np.float32) for s in
                  ((8, 5), (5, 6), (6,)))
    x = tv.placeholder(tv.float32, [8, 5])
    b = tv.placeholder(tv.float32, [6])
    h = tv.nn.relu(b + tv.matmul(x, tv.constant(ws)))
    d = tv.nn.relu(tv.matmul(x, tv.constant(ws)) - b) * 3.0
    with tv.Session() as s:
        got = s.run([h, d], {x: xs, b: bs})
    np.testing.assert_array_equal(got[0], np.maximum(bs + xs @ ws, 0))
    np.testing.assert_array_equal(got[1], np.maximum(xs @ ws - bs, 0) * np.float32(3))
    np.testing.assert_array_equal(bs, bs.copy())


def test_a_training_step_gives_the_same_bits_with_forwarding(g, monkeypatch):
    """An MLP step (Add, Relu, ReluGrad, Mul, Sub forwarded) against the same step with
    forwarding off."""
    rng = np.random.default_rng(1)
    x = tv.placeholder(tv.float32, [16, 7])
    y = tv.placeholder(tv.int64, [16])
    w1 = tv.Variable(rng.standard_normal((7, 9)).astype(np.float32))
    b1 = tv.Variable(np.zeros(9, np.float32))
    w2 = tv.Variable(rng.standard_normal((9, 3)).astype(np.float32))
    h = tv.nn.relu(tv.matmul(x, w1) + b1)
    loss = tv.reduce_mean(tv.nn.sparse_softmax_cross_entropy_with_logits(
        labels=y, logits=tv.matmul(h, w2)))
    train = tv.train.GradientDescentOptimizer(0.1).minimize(loss)
    feeds = {x: rng.standard_normal((16, 7)).astype(np.float32),
             y: rng.integers(0, 3, 16).astype(np.int64)}

    def run():
        with tv.Session() as s:
            s.run(tv.global_variables_initializer())
            for _ in range(5):
                s.run(train, feeds)
            return s.run([w1, b1, w2])
    offered = []
    real = runtime.donatable

    def spy(*a):
        d = real(*a)
        offered.append(d is not None)
        return d
    monkeypatch.setattr(runtime, "donatable", spy)
    with_fwd = run()
    assert any(offered)
    monkeypatch.setattr(runtime, "donatable", lambda *a: None)
    without = run()
    for a, b in zip(with_fwd, without):
        assert a.tobytes() == b.tobytes()


def test_fits_and_donors_are_pure():
    assert runtime._fits((), (3, 4)) and runtime._fits((4,), (3, 4))
    assert runtime._fits((1, 4), (3, 4)) and runtime._fits((3, 1), (3, 4))
    assert not runtime._fits((3, 4), (4,)) and not runtime._fits((2,), (3, 4))
    assert not runtime._fits((2, 3, 4), (3, 4))

    class Ins:
        type = "Add"
        args = (5, 7)
    assert runtime._donors(Ins, (5, 7)) == ((0, 5), (1, 7))
    assert runtime._donors(Ins, (7,)) == ((1, 7),)
    Ins.args = (5, 5)  # x + x: one array read twice is never offered
    assert runtime._donors(Ins, (5,)) == ()
    Ins.type = "MatMul"  # not element-wise: nothing offered
    Ins.args = (5, 7)
    assert runtime._donors(Ins, (5, 7)) == ()
