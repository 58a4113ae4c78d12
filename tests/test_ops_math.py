"""Element-wise math, comparisons, logic, select, reductions, cumsum and the Python operators:
forward results against NumPy, gradients against finite differences (float64), bad inputs."""
import numpy as np
import pytest
from opcheck import check_forward, check_gradients, run

import tensorvm as tv
from tensorvm.framework.errors import InvalidArgumentError

rng = np.random.default_rng(1234)


def rand(*shape, lo=-2.0, hi=2.0):
    return np.asarray(rng.uniform(lo, hi, size=shape))


def away_from_zero(*shape):
    x = rand(*shape, lo=0.3, hi=2.0)
    return x * rng.choice([-1.0, 1.0], size=shape)


# ---- binary arithmetic (math_ops) ---------------------------------------------------------------
BINARY = [
    (tv.add, np.add), (tv.subtract, np.subtract), (tv.multiply, np.multiply),
    (tv.divide, np.divide), (tv.maximum, np.maximum), (tv.minimum, np.minimum),
    (tv.squared_difference, lambda a, b: (a - b) ** 2), (tv.pow, np.power),
]
SHAPES = [((3, 4), (3, 4)), ((3, 4), (4,)), ((2, 1, 3), (4, 1)), ((), (2, 3)), ((0, 3), (3,)),
          ((1,), (1, 1))]


@pytest.mark.parametrize("fn,np_fn", BINARY, ids=lambda f: getattr(f, "__name__", ""))
@pytest.mark.parametrize("sa,sb", SHAPES)
def test_binary_forward(fn, np_fn, sa, sb):
    a, b = rand(*sa, lo=0.5), rand(*sb, lo=0.5)
    check_forward(fn, np_fn, a, b)
    check_forward(fn, np_fn, a.astype(np.float32), b.astype(np.float32), rtol=1e-5)


@pytest.mark.parametrize("fn", [tv.add, tv.subtract, tv.multiply, tv.divide, tv.pow,
                                tv.maximum, tv.minimum, tv.squared_difference],
                         ids=lambda f: f.__name__)
@pytest.mark.parametrize("sa,sb", [((2, 3), (2, 3)), ((2, 3), (3,)), ((2, 1), (1, 3)),
                                   ((), (3,))])
def test_binary_gradients(fn, sa, sb):
    a, b = rand(*sa, lo=0.5, hi=2.0), rand(*sb, lo=0.5, hi=2.0)
    if fn in (tv.maximum, tv.minimum):  # keep clear of ties
        b = b + 0.05
    check_gradients(fn, a, b)


def test_maximum_minimum_tie_goes_to_x():
    x, y = tv.constant([1.0, 2.0, 3.0]), tv.constant([1.0, 1.0, 4.0])
    gx, gy = tv.gradients(tv.reduce_sum(tv.maximum(x, y)), [x, y])
    hx, hy = tv.gradients(tv.reduce_sum(tv.minimum(x, y)), [x, y])
    got = run([gx, gy, hx, hy])
    np.testing.assert_array_equal(got[0], [1, 1, 0])
    np.testing.assert_array_equal(got[1], [0, 0, 1])
    np.testing.assert_array_equal(got[2], [1, 0, 1])
    np.testing.assert_array_equal(got[3], [0, 1, 0])


def test_integer_arithmetic():
    a = np.array([7, -7, 6, -1, 0], np.int32)
    b = np.array([2, 2, -4, 3, 5], np.int32)
    check_forward(tv.add, np.add, a, b)
    check_forward(tv.multiply, np.multiply, a, b)
    # floor division and modulo follow Python (floor) semantics, as in TF's FloorDiv/FloorMod
    got = check_forward(tv.floordiv, np.floor_divide, a, b)
    assert got.dtype == np.int32
    check_forward(tv.mod, np.mod, a, b)
    check_forward(lambda x, y: x // y, np.floor_divide, a, b)
    check_forward(lambda x, y: x % y, np.mod, a, b)
    check_forward(tv.pow, np.power, a, np.abs(b))


def test_integer_true_division_is_float64_like_tf1():
    a = np.array([7, -7, 1], np.int32)
    b = np.array([2, 2, 3], np.int32)
    got = check_forward(tv.divide, lambda x, y: x / y, a, b)
    assert got.dtype == np.float64


def test_float_floordiv_mod_and_gradients():
    a = np.array([[5.5, -5.5, 3.2], [0.4, -2.7, 9.9]])
    b = np.array([2.0, 2.5, -1.5])
    check_forward(tv.floordiv, np.floor_divide, a, b)
    check_forward(tv.mod, np.mod, a, b)
    check_gradients(tv.mod, a, b)
    x = tv.constant(a)
    assert tv.gradients(tv.reduce_sum(tv.floordiv(x, b)), [x]) == [None]


def test_pow_gradient_at_nonpositive_base():
    # d/dy x**y uses log(x) only where x > 0; elsewhere it is 0 and not NaN
    x = tv.constant([0.0, -2.0, 3.0], tv.float64)
    y = tv.constant([2.0, 2.0, 2.0], tv.float64)
    gx, gy = run(tv.gradients(tv.reduce_sum(tv.pow(x, y)), [x, y]))
    np.testing.assert_allclose(gx, [0.0, -4.0, 6.0])
    np.testing.assert_allclose(gy, [0.0, 0.0, 9 * np.log(3.0)])


def test_binary_bad_inputs():
    with pytest.raises(InvalidArgumentError, match="(?s)Incompatible shapes.*Add"):
        tv.add(tv.zeros_like(tv.constant(np.ones((2, 3)))), tv.constant(np.ones((4,))))
    with pytest.raises(InvalidArgumentError, match="Mul"):
        tv.multiply(tv.constant(1.0), tv.constant(1, tv.int32))
    with pytest.raises(InvalidArgumentError, match="Maximum"):
        tv.maximum(tv.constant([True]), tv.constant([False]))
    with pytest.raises(InvalidArgumentError, match="SquaredDifference"):
        tv.squared_difference(tv.constant(["a"]), tv.constant(["b"]))


# ---- unary math -------------------------------------------------------------------------------
def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


UNARY = [  # (tv fn, numpy fn, input maker)
    (tv.negative, np.negative, rand), (tv.exp, np.exp, rand),
    (tv.log, np.log, lambda *s: rand(*s, lo=0.2)), (tv.square, np.square, rand),
    (tv.sqrt, np.sqrt, lambda *s: rand(*s, lo=0.2)), (tv.abs, np.abs, away_from_zero),
    (tv.sign, np.sign, away_from_zero), (tv.reciprocal, np.reciprocal, away_from_zero),
    (tv.expm1, np.expm1, rand), (tv.log1p, np.log1p, lambda *s: rand(*s, lo=-0.5)),
    (tv.rsqrt, lambda x: 1 / np.sqrt(x), lambda *s: rand(*s, lo=0.2)),
    (tv.sin, np.sin, rand), (tv.cos, np.cos, rand),
    (tv.tan, np.tan, lambda *s: rand(*s, lo=-1.0, hi=1.0)),
    (tv.tanh, np.tanh, rand), (tv.sigmoid, _sigmoid, rand),
]


@pytest.mark.parametrize("fn,np_fn,make", UNARY, ids=lambda f: getattr(f, "__name__", ""))
@pytest.mark.parametrize("shape", [(2, 3), (), (0, 2), (1, 1)])
def test_unary_forward(fn, np_fn, make, shape):
    x = make(*shape)
    check_forward(fn, np_fn, x, rtol=1e-12)
    check_forward(fn, np_fn, x.astype(np.float32), rtol=2e-6, atol=1e-6)


@pytest.mark.parametrize("fn,np_fn,make", UNARY, ids=lambda f: getattr(f, "__name__", ""))
def test_unary_gradients(fn, np_fn, make):
    check_gradients(fn, make(2, 3))


def test_sigmoid_tails_and_int_abs():
    x = np.array([-800.0, -40.0, 0.0, 40.0, 800.0])
    got = check_forward(tv.sigmoid, lambda v: np.array([0.0, np.exp(-40.0), 0.5, 1.0, 1.0]), x,
                        rtol=1e-12, atol=0)
    assert np.all(np.isfinite(got))
    i = np.array([-3, 0, 4], np.int64)
    check_forward(tv.abs, np.abs, i)
    check_forward(tv.sign, np.sign, i)
    check_forward(lambda t: abs(t), np.abs, i)


def test_rounding():
    x = np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 0.4, -0.6, 3.7])
    check_forward(tv.floor, np.floor, x)
    check_forward(tv.ceil, np.ceil, x)
    got = check_forward(tv.round, np.round, x)  # half to even, as TF
    np.testing.assert_array_equal(got[:6], [-2, -2, -0, 0, 2, 2])
    check_forward(tv.round, np.round, np.array([3, -4], np.int32))
    for fn in (tv.floor, tv.ceil, tv.round):
        p = tv.placeholder(tv.float64, [3])
        assert tv.gradients(tv.reduce_sum(fn(p)), p) == [None]


def test_is_nan_inf_finite():
    x = np.array([0.0, np.nan, np.inf, -np.inf, 1.0])
    for fn, np_fn in [(tv.is_nan, np.isnan), (tv.is_inf, np.isinf),
                      (tv.is_finite, np.isfinite)]:
        got = check_forward(fn, np_fn, x)
        assert got.dtype == np.bool_


def test_unary_bad_dtypes():
    i = tv.constant([1, 2])
    for fn, op in [(tv.exp, "Exp"), (tv.log, "Log"), (tv.sigmoid, "Sigmoid"),
                   (tv.tanh, "Tanh"), (tv.floor, "Floor"), (tv.sin, "Sin")]:
        with pytest.raises(InvalidArgumentError, match=f"{op} does not support dtype int32"):
            fn(i)
    with pytest.raises(InvalidArgumentError, match="Abs does not support dtype string"):
        tv.abs(tv.constant(["x"]))


# ---- cast, add_n --------------------------------------------------------------------------------
def test_cast():
    x = np.array([-1.7, -0.2, 0.0, 2.9])
    got = check_forward(lambda t: tv.cast(t, tv.int32), lambda v: v.astype(np.int32), x)
    assert got.dtype == np.int32
    check_forward(lambda t: tv.cast(t, tv.float32), lambda v: v.astype(np.float32), x)
    check_forward(lambda t: tv.cast(t, tv.bool), lambda v: v != 0, x)
    b = np.array([True, False])
    check_forward(lambda t: tv.cast(t, tv.float64), lambda v: v.astype(np.float64), b)
    check_gradients(lambda t: tv.cast(tv.cast(t, tv.float32), tv.float64), x,
                    eps=1e-3, rtol=1e-3, atol=1e-3)
    p = tv.placeholder(tv.int32, [2])
    assert tv.gradients(tv.reduce_sum(tv.cast(p, tv.float32)), p) == [None]


def test_add_n():
    a, b, c = rand(2, 3), rand(2, 3), rand(2, 3)
    check_forward(lambda x, y, z: tv.add_n([x, y, z]), lambda x, y, z: x + y + z, a, b, c)
    check_gradients(lambda x, y, z: tv.add_n([x, y, z]), a, b, c)
    check_forward(lambda x: tv.add_n([x]), lambda x: x, a)
    with pytest.raises(InvalidArgumentError, match="AddN"):
        tv.add_n([tv.constant([1.0]), tv.constant([1])])


# ---- matmul ---------------------------------------------------------------------------------
MATMUL = [  # (shape a, shape b, transpose_a, transpose_b)
    ((3, 4), (4, 2), False, False), ((4, 3), (4, 2), True, False),
    ((3, 4), (2, 4), False, True), ((4, 3), (2, 4), True, True),
    ((2, 3, 4), (2, 4, 2), False, False), ((2, 4, 3), (2, 2, 4), True, True),
    ((2, 1, 3, 4), (3, 4, 2), False, False), ((3, 4), (2, 4, 2), False, False),
    ((0, 3), (3, 2), False, False), ((1, 1), (1, 1), False, False),
]


def _np_matmul(ta, tb):
    def f(a, b):
        return np.matmul(np.swapaxes(a, -1, -2) if ta else a, np.swapaxes(b, -1, -2) if tb else b)
    return f


@pytest.mark.parametrize("sa,sb,ta,tb", MATMUL)
def test_matmul(sa, sb, ta, tb):
    a, b = rand(*sa), rand(*sb)
    fn = lambda x, y: tv.matmul(x, y, transpose_a=ta, transpose_b=tb)  # noqa: E731
    check_forward(fn, _np_matmul(ta, tb), a, b, rtol=1e-10)
    if a.size and b.size and a.size * b.size < 200:
        check_gradients(fn, a, b)


def test_matmul_operator_and_errors():
    a, b = rand(2, 3), rand(3, 2)
    check_forward(lambda x, y: x @ y, np.matmul, a, b)
    check_forward(lambda x: np.eye(2) @ x, lambda x: x, rand(2, 2))
    with pytest.raises(InvalidArgumentError, match="(?s)Matrix size-incompatible.*MatMul"):
        tv.matmul(tv.constant(a), tv.constant(a))
    with pytest.raises(InvalidArgumentError, match="rank >= 2"):
        tv.matmul(tv.constant([1.0, 2.0]), tv.constant([[1.0], [2.0]]))
    with pytest.raises(InvalidArgumentError, match="Incompatible shapes"):
        tv.matmul(tv.constant(rand(2, 2, 3)), tv.constant(rand(3, 3, 2)))


# ---- reductions -----------------------------------------------------------------------------
AXES = [None, 0, 1, -1, [0, 2], (-1, -3), []]


def _np_reduce(np_fn, axis, keepdims):
    ax = tuple(axis) if isinstance(axis, list) else axis
    return lambda x: np_fn(x, axis=ax, keepdims=keepdims)


REDUCE = [(tv.reduce_sum, np.sum), (tv.reduce_mean, np.mean), (tv.reduce_max, np.max),
          (tv.reduce_min, np.min), (tv.reduce_prod, np.prod),
          (tv.reduce_logsumexp, lambda x, axis, keepdims: np.log(
              np.sum(np.exp(x), axis=axis, keepdims=keepdims)))]


@pytest.mark.parametrize("fn,np_fn", REDUCE, ids=lambda f: getattr(f, "__name__", ""))
@pytest.mark.parametrize("axis", AXES, ids=str)
@pytest.mark.parametrize("keepdims", [False, True])
def test_reduce_forward(fn, np_fn, axis, keepdims):
    x = rand(2, 3, 4)
    got = check_forward(lambda t: fn(t, axis=axis, keepdims=keepdims),
                        _np_reduce(np_fn, axis, keepdims), x, rtol=1e-10)
    p = tv.placeholder(tv.float64, x.shape)
    assert list(fn(p, axis=axis, keepdims=keepdims).shape) == list(got.shape)


@pytest.mark.parametrize("fn,np_fn", REDUCE, ids=lambda f: getattr(f, "__name__", ""))
@pytest.mark.parametrize("axis,keepdims", [(None, False), (1, False), ([0, -1], True),
                                           (-2, True)], ids=str)
def test_reduce_gradients(fn, np_fn, axis, keepdims):
    x = rand(2, 3, 2)
    check_gradients(lambda t: fn(t, axis=axis, keepdims=keepdims), x)


def test_reduce_empty_and_integers():
    e = np.zeros((0, 3))
    check_forward(lambda t: tv.reduce_sum(t, 0), lambda v: v.sum(0), e)
    check_forward(lambda t: tv.reduce_prod(t, 0), lambda v: v.prod(0), e)
    check_forward(lambda t: tv.reduce_max(t, 0), lambda v: np.full(3, -np.inf), e)
    check_forward(lambda t: tv.reduce_min(t, 0), lambda v: np.full(3, np.inf), e)
    check_forward(lambda t: tv.reduce_logsumexp(t, 0), lambda v: np.full(3, -np.inf), e)
    check_forward(lambda t: tv.reduce_max(t, 1), lambda v: np.zeros(0), e)
    i = np.array([[3, -1, 7], [2, 9, -5]], np.int32)
    for fn, np_fn in [(tv.reduce_sum, np.sum), (tv.reduce_max, np.max),
                      (tv.reduce_min, np.min), (tv.reduce_prod, np.prod)]:
        got = check_forward(lambda t: fn(t, axis=1), lambda v: np_fn(v, axis=1), i)
        assert got.dtype == np.int32
    got = check_forward(lambda t: tv.reduce_mean(t, axis=0), lambda v: np.array([2, 4, 1]), i)
    assert got.dtype == np.int32  # integer mean truncates, as in TF
    check_forward(lambda t: tv.reduce_max(t, 0), lambda v: np.full(2, np.iinfo(np.int32).min),
                  np.zeros((0, 2), np.int32))


def test_reduce_max_ties_split_gradient():
    x = tv.constant([[1.0, 3.0, 3.0], [2.0, 2.0, 2.0]], tv.float64)
    gmax = tv.gradients(tv.reduce_sum(tv.reduce_max(x, axis=1)), x)[0]
    gmin = tv.gradients(tv.reduce_min(x), x)[0]
    a, b = run([gmax, gmin])
    np.testing.assert_allclose(a, [[0, 0.5, 0.5], [1 / 3, 1 / 3, 1 / 3]])
    np.testing.assert_allclose(b, [[1, 0, 0], [0, 0, 0]])


def test_reduce_prod_gradient_with_zeros():
    x = np.array([[0.0, 2.0, 3.0], [0.0, 0.0, 4.0], [1.5, -2.0, 0.5]])
    check_gradients(lambda t: tv.reduce_prod(t, axis=1), x)
    check_gradients(lambda t: tv.reduce_prod(t, axis=0, keepdims=True), x)
    check_gradients(lambda t: tv.reduce_prod(t), x[2:])


def test_reduce_logsumexp_large_values():
    x = np.array([[1000.0, 1000.0], [-1000.0, -1001.0]])
    want = np.array([1000 + np.log(2), -1000 + np.log1p(np.exp(-1.0))])
    check_forward(lambda t: tv.reduce_logsumexp(t, axis=1), lambda v: want, x, rtol=1e-12)
    check_gradients(lambda t: tv.reduce_logsumexp(t, axis=1), x)


def test_second_derivative_of_reduce_logsumexp():
    x = tv.constant(np.array([[1.0, 2.0, 0.5]]))
    g = tv.gradients(tv.reduce_logsumexp(x, axis=1), x)[0]
    h = tv.gradients(tv.reduce_sum(g * tv.constant(np.array([[1.0, 0.0, 0.0]]))), x)[0]
    p = np.exp([1.0, 2.0, 0.5]) / np.exp([1.0, 2.0, 0.5]).sum()
    np.testing.assert_allclose(run(h)[0], p[0] * (np.eye(3)[0] - p), rtol=1e-10)


def test_second_derivative_of_reduce_prod_fails_loudly():
    x = tv.constant(np.array([1.0, 2.0, 3.0]))
    g = tv.gradients(tv.reduce_prod(x), x)[0]
    with pytest.raises(tv.errors.NotFoundError, match="ProdOthers"):
        tv.gradients(tv.reduce_sum(g), x)


def test_reduce_any_all():
    b = rng.random((3, 4)) > 0.5
    b[0] = False
    b[1] = True
    for fn, np_fn in [(tv.reduce_any, np.any), (tv.reduce_all, np.all)]:
        for axis in [None, 0, -1, [0, 1]]:
            for kd in (False, True):
                check_forward(lambda t: fn(t, axis=axis, keepdims=kd),
                              _np_reduce(np_fn, axis, kd), b)
        check_forward(lambda t: fn(t, 0), lambda v: np_fn(v, 0), np.zeros((0, 2), bool))


def test_reduce_tf1_aliases():
    x = rand(2, 3)
    check_forward(lambda t: tv.reduce_max(t, reduction_indices=[1], keep_dims=True),
                  lambda v: v.max(1, keepdims=True), x)


def test_reduce_bad_inputs():
    x = tv.constant(np.ones((2, 3)))
    with pytest.raises(InvalidArgumentError, match="(?s)axis 2 is out of range.*Max"):
        tv.reduce_max(x, axis=2)
    with pytest.raises(InvalidArgumentError, match="(?s)axis -3 is out of range.*Min"):
        tv.reduce_min(x, axis=[0, -3])
    with pytest.raises(InvalidArgumentError, match="Any needs a bool tensor"):
        tv.reduce_any(x)
    with pytest.raises(InvalidArgumentError, match="ReduceLogSumExp needs a floating-point"):
        tv.reduce_logsumexp(tv.constant([1, 2]))
    with pytest.raises(InvalidArgumentError, match="Prod needs a real numeric"):
        tv.reduce_prod(tv.constant([True]))


def test_reduce_sum_mean_bad_axis_names_op():
    x = tv.constant(np.ones((2, 3)))
    with pytest.raises(InvalidArgumentError, match="(?s)axis -3 is out of range.*Sum"):
        tv.reduce_sum(x, axis=-3)
    with pytest.raises(InvalidArgumentError, match="(?s)axis 2 is out of range.*Mean"):
        tv.reduce_mean(x, axis=2)


# ---- argmax / argmin, count_nonzero, cumsum ---------------------------------------------------
def test_argmax_argmin():
    x = rand(3, 4, 2)
    x[0, 1, 0] = x[0, 2, 0] = 5.0  # a tie: the first index wins
    for fn, np_fn in [(tv.argmax, np.argmax), (tv.argmin, np.argmin)]:
        for axis in [0, 1, -1]:
            got = check_forward(lambda t: fn(t, axis=axis), lambda v: np_fn(v, axis=axis), x)
            assert got.dtype == np.int64
        check_forward(lambda t: fn(t), lambda v: np_fn(v, axis=0), x)  # TF1 default: axis 0
        got = check_forward(lambda t: fn(t, 1, output_type=tv.int32),
                            lambda v: np_fn(v, axis=1), x)
        assert got.dtype == np.int32
    check_forward(lambda t: tv.argmax(t, dimension=1), lambda v: v.argmax(1), x)
    check_forward(lambda t: tv.argmax(t, 1), lambda v: v.argmax(1), np.array([[1, 9, 3]]))
    check_forward(lambda t: tv.argmax(t, 0), lambda v: np.zeros((0,), int), np.zeros((2, 0)))
    p = tv.placeholder(tv.float64, [3])
    assert tv.gradients(tv.reduce_sum(tv.cast(tv.argmax(p), tv.float64) * p), p)[0] is not None


def test_argmax_bad_inputs():
    with pytest.raises(InvalidArgumentError, match="(?s)axis 0 is empty.*ArgMax"):
        tv.argmax(tv.constant(np.zeros((0, 2))), axis=0)
    with pytest.raises(InvalidArgumentError, match="(?s)out of range.*ArgMin"):
        tv.argmin(tv.constant(np.zeros((2, 2))), axis=2)
    with pytest.raises(InvalidArgumentError, match="output_type must be int32 or int64"):
        tv.argmax(tv.constant([1.0]), output_type=tv.float32)
    with pytest.raises(InvalidArgumentError, match="ArgMax needs a tensor of rank >= 1"):
        tv.argmax(tv.constant(1.0))


def test_count_nonzero():
    x = np.array([[0.0, 1.5, 0.0], [2.0, -1.0, 0.0]])
    got = check_forward(tv.count_nonzero, lambda v: np.count_nonzero(v), x)
    assert got.dtype == np.int64
    check_forward(lambda t: tv.count_nonzero(t, axis=1, keepdims=True, dtype=tv.int32),
                  lambda v: np.count_nonzero(v, axis=1, keepdims=True), x)
    check_forward(lambda t: tv.count_nonzero(t, axis=0), lambda v: np.zeros(2, int),
                  np.zeros((0, 2), np.int32))
    s = tv.constant(["a", "", "bc", ""])
    assert run(tv.count_nonzero(s)) == 2
    assert run(tv.count_nonzero(tv.constant([True, False, True]))) == 2


def _np_cumsum(axis, exclusive, reverse):
    def f(x):
        y = np.flip(x, axis) if reverse else x
        c = np.cumsum(y, axis=axis)
        if exclusive:
            c = c - y
        return np.flip(c, axis) if reverse else c
    return f


@pytest.mark.parametrize("exclusive", [False, True])
@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_cumsum(axis, exclusive, reverse):
    x = rand(3, 4)
    fn = lambda t: tv.cumsum(t, axis=axis, exclusive=exclusive, reverse=reverse)  # noqa: E731
    check_forward(fn, _np_cumsum(axis, exclusive, reverse), x, rtol=1e-12, atol=1e-12)
    check_gradients(fn, x)
    i = rng.integers(-5, 5, size=(2, 3)).astype(np.int32)
    got = check_forward(fn, _np_cumsum(axis, exclusive, reverse), i)
    assert got.dtype == np.int32


def test_cumsum_edge_cases():
    check_forward(lambda t: tv.cumsum(t, 1, exclusive=True), lambda v: v, np.zeros((2, 0)))
    check_forward(lambda t: tv.cumsum(t), lambda v: v, np.array([3.0]))
    with pytest.raises(InvalidArgumentError, match="Cumsum needs a tensor of rank >= 1"):
        tv.cumsum(tv.constant(1.0))
    with pytest.raises(InvalidArgumentError, match="(?s)out of range.*Cumsum"):
        tv.cumsum(tv.constant([1.0]), axis=1)
    with pytest.raises(InvalidArgumentError, match="Cumsum needs a numeric"):
        tv.cumsum(tv.constant([True]))


# ---- comparisons and logic ----------------------------------------------------------------------
COMPARE = [(tv.greater, np.greater), (tv.greater_equal, np.greater_equal), (tv.less, np.less),
           (tv.less_equal, np.less_equal), (tv.equal, np.equal), (tv.not_equal, np.not_equal)]


@pytest.mark.parametrize("fn,np_fn", COMPARE, ids=lambda f: getattr(f, "__name__", ""))
def test_comparisons(fn, np_fn):
    a = rng.integers(0, 3, size=(3, 4)).astype(np.float64)
    b = rng.integers(0, 3, size=(4,)).astype(np.float64)
    got = check_forward(fn, np_fn, a, b)
    assert got.dtype == np.bool_
    check_forward(fn, np_fn, a.astype(np.int32), b.astype(np.int32))
    check_forward(fn, np_fn, np.zeros((0, 4)), b)
    p = tv.placeholder(tv.float64, [4])
    assert tv.gradients(tv.reduce_sum(tv.cast(fn(p, 1.0), tv.float64) * p), p)[0] is not None


def test_equal_strings_and_bools():
    s = tv.constant(["a", "b", "c"])
    assert run(tv.equal(s, tv.constant(["a", "x", "c"]))).tolist() == [True, False, True]
    assert run(tv.not_equal(s, "b")).tolist() == [True, False, True]
    assert run(tv.equal(tv.constant([True, False]), True)).tolist() == [True, False]
    with pytest.raises(InvalidArgumentError, match="Greater does not support dtype string"):
        tv.greater(s, s)
    with pytest.raises(InvalidArgumentError, match="Equal expects inputs of one dtype"):
        tv.equal(tv.constant([1.0]), tv.constant([1]))


LOGIC = [(tv.logical_and, np.logical_and), (tv.logical_or, np.logical_or),
         (tv.logical_xor, np.logical_xor)]


@pytest.mark.parametrize("fn,np_fn", LOGIC, ids=lambda f: getattr(f, "__name__", ""))
def test_logical(fn, np_fn):
    a = rng.random((3, 4)) > 0.5
    b = rng.random((4,)) > 0.5
    check_forward(fn, np_fn, a, b)
    check_forward(fn, np_fn, np.zeros((0, 1), bool), b)
    with pytest.raises(InvalidArgumentError, match="does not support dtype float32"):
        fn(tv.constant([1.0]), tv.constant([0.0]))


def test_logical_not():
    a = rng.random((2, 3)) > 0.5
    check_forward(tv.logical_not, np.logical_not, a)
    check_forward(lambda t: ~t, np.logical_not, a)
    with pytest.raises(InvalidArgumentError, match="LogicalNot does not support dtype int32"):
        tv.logical_not(tv.constant([1]))


# ---- where / select, clip_by_value --------------------------------------------------------------
@pytest.mark.parametrize("sc,sx,sy", [((2, 3), (2, 3), (2, 3)), ((2, 3), (3,), ()),
                                      ((3,), (3,), ()), ((1, 3), (2, 1), (2, 3)),
                                      ((0, 3), (3,), (3,))])
def test_where_select(sc, sx, sy):
    c = rng.random(sc) > 0.5
    x, y = rand(*sx), rand(*sy)
    check_forward(tv.where, np.where, c, x, y)
    check_gradients(tv.where, c, x, y)


def test_where_rank1_condition_selects_rows():
    c = np.array([True, False])
    x, y = rand(2, 2), rand(2, 2)
    check_forward(tv.where, lambda cc, a, b: np.where(cc[:, None], a, b), c, x, y)
    check_gradients(tv.where, c, x, y)


def test_where_coordinates():
    c = rng.random((3, 4)) > 0.5
    got = check_forward(tv.where, np.argwhere, c)
    assert got.dtype == np.int64
    p = tv.placeholder(tv.bool, [3, 4])
    assert tv.where(p).shape.as_list() == [None, 2]
    check_forward(tv.where, lambda v: np.zeros((0, 1), np.int64), np.zeros(5, bool))
    check_forward(tv.where, np.argwhere, np.array([0, 3, 0, 1], np.int32))


def test_where_bad_inputs():
    with pytest.raises(InvalidArgumentError, match="both be given, or neither"):
        tv.where(tv.constant([True]), x=tv.constant([1.0]))
    with pytest.raises(InvalidArgumentError, match="(?s)condition must be bool.*Select"):
        tv.where(tv.constant([1.0]), tv.constant([1.0]), tv.constant([2.0]))
    with pytest.raises(InvalidArgumentError, match="(?s)rank-1 condition selects rows.*Select"):
        tv.where(tv.constant([True, False, True]), tv.constant(np.ones((2, 3))),
                 tv.constant(np.ones((2, 3))))
    with pytest.raises(InvalidArgumentError, match="Select expects inputs of one dtype"):
        tv.where(tv.constant([True]), tv.constant([1.0]), tv.constant([1]))
    c = tv.placeholder(tv.bool, [None])
    y = tv.where(c, tv.constant(np.ones((2, 3))), tv.constant(np.zeros((2, 3))))
    with pytest.raises(InvalidArgumentError, match="Select"):
        run(y, {c: np.array([True, False, True])})


def test_clip_by_value():
    x = rand(3, 4, lo=-3, hi=3)
    check_forward(lambda t: tv.clip_by_value(t, -1.0, 1.5), lambda v: np.clip(v, -1.0, 1.5), x)
    lo, hi = rand(4, lo=-2, hi=-0.5), rand(4, lo=0.5, hi=2)
    check_forward(tv.clip_by_value, np.clip, x, lo, hi)
    x = np.array([[-2.0, -0.5, 0.3], [0.9, 1.7, 4.0]])
    check_gradients(lambda t: tv.clip_by_value(t, -1.0, 1.0), x)
    check_gradients(tv.clip_by_value, x, np.array([-1.0, -1.0, 0.0]), np.array(1.0))
    with pytest.raises(InvalidArgumentError, match="must not change t's shape"):
        tv.clip_by_value(tv.constant([1.0, 2.0]), tv.constant(np.zeros((3, 1)), tv.float32), 5.0)


# ---- Python operators -----------------------------------------------------------------------
def test_python_arithmetic_operators():
    a, b = rand(2, 3, lo=0.5), rand(3, lo=0.5)
    cases = [(lambda x, y: x + y, np.add), (lambda x, y: x - y, np.subtract),
             (lambda x, y: x * y, np.multiply), (lambda x, y: x / y, np.divide),
             (lambda x, y: x // y, np.floor_divide), (lambda x, y: x % y, np.mod),
             (lambda x, y: x ** y, np.power), (lambda x, y: -x, lambda x, y: -x),
             (lambda x, y: 2.0 + x - y * 3.0, lambda x, y: 2.0 + x - y * 3.0),
             (lambda x, y: 1.0 / x + 2.0 // y - 4.0 % x, lambda x, y: 1 / x + 2 // y - 4 % x),
             (lambda x, y: 2.0 ** y * (x ** 2.0), lambda x, y: 2 ** y * x ** 2),
             (lambda x, y: abs(x - y), lambda x, y: np.abs(x - y))]
    for fn, np_fn in cases:
        check_forward(fn, np_fn, a, b)
    check_gradients(lambda x, y: x * y / (x + y) - x ** 2.0 + abs(y - 0.1), a, b)


def test_python_comparison_and_logic_operators():
    a, b = rand(2, 3), rand(3)
    for fn, np_fn in [(lambda x, y: x < y, np.less), (lambda x, y: x <= y, np.less_equal),
                      (lambda x, y: x > y, np.greater), (lambda x, y: x >= y, np.greater_equal),
                      (lambda x, y: x > 0.0, lambda x, y: x > 0),
                      (lambda x, y: 0.0 < y, lambda x, y: y > 0)]:
        got = check_forward(fn, np_fn, a, b)
        assert got.dtype == np.bool_
    p, q = rng.random((2, 3)) > 0.5, rng.random(3) > 0.5
    for fn, np_fn in [(lambda x, y: x & y, np.logical_and), (lambda x, y: x | y, np.logical_or),
                      (lambda x, y: x ^ y, np.logical_xor), (lambda x, y: ~x | True & y,
                                                              lambda x, y: ~x | y)]:
        check_forward(fn, np_fn, p, q)
    t = tv.constant([1.0])
    assert (t == t) is True and (t != t) is False  # identity semantics, tensors stay hashable
    assert len({t, tv.identity(t)}) == 2


@pytest.mark.parametrize("fn, grad_type, formula", [
    (tv.sigmoid, "SigmoidGrad", lambda y, g: (g * y) * (1 - y)),
    (tv.tanh, "TanhGrad", lambda y, g: g * (1 - y * y)),
])
def test_sigmoid_and_tanh_gradients_are_one_op_with_the_unfused_bits(fn, grad_type, formula):
    """TF's SigmoidGrad/TanhGrad: one op where the gradient took three (an LSTM runs ~20 of
    them a step), the same float operations in the same order: the same bits."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal((6, 7)).astype(np.float32) * 3
    gy = rng.standard_normal((6, 7)).astype(np.float32)
    with tv.Graph().as_default() as g:
        xt = tv.constant(x)
        y = fn(xt)
        (dx,) = tv.gradients(y, [xt], grad_ys=[tv.constant(gy)])
        assert [op.type for op in g.get_operations()].count(grad_type) == 1
        got_y, got = tv.Session().run([y, dx])
    np.testing.assert_array_equal(got, formula(got_y, gy))


@pytest.mark.parametrize("fn", [tv.sigmoid, tv.tanh])
def test_second_order_gradients_of_sigmoid_and_tanh(fn):
    x = np.random.default_rng(6).standard_normal((3, 4))
    w = np.random.default_rng(7).uniform(0.5, 1.5, (3, 4))
    check_gradients(lambda t: tv.gradients(fn(t) * w, [t])[0], x)
    check_gradients(lambda t: tv.gradients(fn(t) * t, [t])[0], x)
