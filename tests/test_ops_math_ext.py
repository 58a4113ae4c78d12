"""TF 1.x's clipping (clip_ops), special functions (special_ops), assertions (debug_ops) and
more math/array ops: forward results against NumPy or the ``math`` module, gradients against
finite differences (float64), errors by class and message."""
import math

import numpy as np
import pytest
from opcheck import check_forward, check_gradients, run

import tensorvm as tv
from tensorvm.framework.errors import InvalidArgumentError

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
    vals, idx, gn, zero = run([cs.values, cs.indices, n, cb])
    assert zero.tolist() == [0.0]
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


# ---- assertions (debug_ops) --------------------------------------------------------------------
def _run_fails(op, feed, match):
    with tv.Session() as s, pytest.raises(InvalidArgumentError, match=match):
        s.run(op, feed)


def test_binary_asserts_fail_the_step_with_tf_s_message():
    x, y = tv.placeholder(tv.float32, [None], name="x"), tv.placeholder(tv.float32, [None],
                                                                         name="y")
    xv = np.array([1, 2, 3, 4], np.float32)
    cases = [(tv.assert_equal, "==", xv, xv + [0, 0, 1, 0]),
             (tv.assert_none_equal, "!=", xv, xv + [1, 1, 0, 1]),
             (tv.assert_less, "<", xv, xv + [1, 1, 0, 1]),
             (tv.assert_less_equal, "<=", xv, xv - [0, 0, 1, 0]),
             (tv.assert_greater, ">", xv, xv - [1, 1, 0, 1]),
             (tv.assert_greater_equal, ">=", xv, xv + [0, 0, 1, 0])]
    for fn, sym, good_y, bad_y in [(f, s, b if f is not tv.assert_equal else xv, b)
                                   for f, s, _, b in cases]:
        op = fn(x, y)
        assert isinstance(op, tv.Operation) and op.type == "Assert"
        want = {tv.assert_equal: xv, tv.assert_none_equal: xv + 1,
                tv.assert_less: xv + 1, tv.assert_less_equal: xv,
                tv.assert_greater: xv - 1, tv.assert_greater_equal: xv}[fn]
        run(op, {x: xv, y: want})  # passes
        msg = (f"assertion failed: [Condition x {sym} y did not hold element-wise:] "
               "[x (x:0) = ] [1 2 3...] [y (y:0) = ]")
        _run_fails(op, {x: xv, y: bad_y}, msg.replace("[", "\\[").replace("]", "\\]")
                   .replace(".", "\\.").replace("(", "\\(").replace(")", "\\)"))


def test_assert_message_summarize_and_control_dependency():
    x = tv.placeholder(tv.int32, [None], name="v")
    check = tv.assert_equal(x, 7, message="custom", summarize=2, name="myeq")
    assert check.name == "myeq/Assert"
    with tv.control_dependencies([check]):
        out = tv.identity(x) * 2
    assert run(out, {x: [7, 7]}).tolist() == [14, 14]
    _run_fails(out, {x: [7, 1, 2]}, r"assertion failed: \[custom\] \[Condition x == y did not "
               r"hold element-wise:\] \[x \(v:0\) = \] \[7 1\.\.\.\] \[y \(myeq/y:0\) = \] \[7\]")


def test_unary_asserts():
    x = tv.placeholder(tv.float64, [None], name="u")
    pos, neg = np.array([1.0, 2.0]), np.array([-1.0, -2.0])
    zeros = np.zeros(2)
    table = [(tv.assert_positive, pos, zeros, "> 0"), (tv.assert_negative, neg, zeros, "< 0"),
             (tv.assert_non_negative, zeros, neg, ">= 0"),
             (tv.assert_non_positive, zeros, pos, "<= 0")]
    for fn, good, bad, sym in table:
        op = fn(x)
        run(op, {x: good})
        run(op, {x: np.zeros(0)})  # empty: trivially true
        sep = "" if fn is tv.assert_non_positive else r"\] \["
        _run_fails(op, {x: bad}, rf"assertion failed: \[\] \[Condition x {sym} did not hold "
                                 rf"element-wise:{sep}x \(u:0\) = \]")
    _run_fails(tv.assert_positive(x, message="need positive"), {x: neg},
               r"assertion failed: \[need positive\.  \] \[Condition x > 0")


def test_static_checks_raise_while_building():
    c = tv.constant([1.0, 2.0], name="c")
    with pytest.raises(InvalidArgumentError, match=r"^Condition x == y did not hold "
                       r"element-wise:\nx \(c:0\) = \n\[1\. 2\.\]\ny \(d:0\) = \n\[1\. 3\.\]$"):
        tv.assert_equal(c, tv.constant([1.0, 3.0], name="d"))
    with pytest.raises(InvalidArgumentError, match=r"^hi\nCondition x < y"):
        tv.assert_less(c, 1.5, message="hi")
    with pytest.raises(InvalidArgumentError, match=r"^\nCondition x > 0 did not hold"):
        tv.assert_positive(tv.constant([-1, 2]))
    assert tv.assert_equal(c, c).type == "Assert"  # passes: still an op, as in TF


def test_assert_near():
    x, y = tv.placeholder(tv.float32, [None], name="a"), tv.placeholder(tv.float32, [None],
                                                                         name="b")
    op = tv.assert_near(x, y, rtol=0.01, atol=0.01)
    run(op, {x: [1.0, 100.0], y: [1.005, 100.5]})
    _run_fails(op, {x: [1.0, 2.0], y: [1.0, 2.1]},
               r"assertion failed: \[\] \[x and y not equal to tolerance rtol = "
               r"Tensor\(\"assert_near(_\d+)?/rtol:0\", shape=\(\), dtype=float32\), atol = ")
    # default tolerances: 10 eps of the dtype
    z = tv.placeholder(tv.float64, [1])
    run(tv.assert_near(z, z + 1e-16), {z: [1.0]})
    _run_fails(tv.assert_near(z, z + 1e-12), {z: [1.0]}, "not equal to tolerance")


def test_rank_asserts_static_and_dynamic():
    c = tv.constant([1.0, 2.0], name="c2")
    with pytest.raises(ValueError, match=r"^Tensor c2:0 must have rank 2\.  Received rank 1, "
                                         r"shape \(2,\)$"):
        tv.assert_rank(c, 2)
    with pytest.raises(ValueError, match=r"^msg\.  Tensor c2:0 must have rank at least 2\.  "
                                         r"Received rank 1, shape \(2,\)$"):
        tv.assert_rank_at_least(c, 2, message="msg")
    with pytest.raises(ValueError, match=r"^Tensor c2:0 must have rank in \(0, 2\)\.  Received "
                                         r"rank 1, shape \(2,\)$"):
        tv.assert_rank_in(c, [0, 2])
    p = tv.placeholder(tv.float32, [None, None], name="pp")
    with pytest.raises(ValueError, match=r"shape \(\?, \?\)"):
        tv.assert_rank(p, 3)
    assert tv.assert_rank(c, 1).name.endswith("static_checks_determined_all_ok")
    with pytest.raises(TypeError, match="must be of type"):
        tv.assert_rank(c, tv.constant(1, tv.int64))
    r = tv.placeholder(tv.float32, name="r")
    ops = [tv.assert_rank(r, 2), tv.assert_rank_at_least(r, 2, message="mm"),
           tv.assert_rank_in(r, [2, 3])]
    for op in ops:
        run(op, {r: np.zeros((2, 2))})
    _run_fails(ops[0], {r: np.zeros(3)}, r"assertion failed: \[\] \[Tensor r:0 must have rank\]"
                                         r" \[2\] \[Received shape: \] \[3\]")
    _run_fails(ops[1], {r: np.zeros(3)}, r"\[mm\.  \] \[Tensor r:0 must have rank at least\] "
                                         r"\[2\]")
    _run_fails(ops[2], {r: np.zeros(3)}, r"\[Tensor r:0 must have rank in\] \[2\] \[3\] "
                                         r"\[Received shape: \] \[3\]")


def test_dtype_and_scalar_asserts():
    c = tv.constant([1.0, 2.0], name="f")
    with pytest.raises(TypeError, match=r'^Expected "x" to be integer type\.  Found: f:0 of '
                                        r"dtype <dtype: 'float32'>$"):
        tv.assert_integer(c)
    with pytest.raises(TypeError, match=r'^m\.  Expected "x"'):
        tv.assert_integer(c, message="m")
    assert tv.assert_integer(tv.constant([1])).type == "NoOp"
    with pytest.raises(TypeError, match=r"^f:0 must be of type tv\.int32; got tv\.float32$"):
        tv.assert_type(c, tv.int32)
    assert tv.assert_type(c, tv.float32).type == "NoOp"
    with pytest.raises(ValueError, match=r"^Expected scalar shape for f:0, saw shape: \(2,\)\.$"):
        tv.assert_scalar(c)
    s = tv.constant(3.0)
    assert tv.assert_scalar(s) is s
    assert tv.debugging.assert_same_float_dtype([c, s]) == tv.float32
    with pytest.raises(ValueError, match="Expected floating point type"):
        tv.debugging.assert_same_float_dtype([tv.constant([1])])
    with pytest.raises(TypeError, match='Expected argument "values" to be a "proper" iterable'):
        tv.assert_proper_iterable(c)


def test_assert_all_finite_and_monotonic_checks():
    x = tv.placeholder(tv.float32, [None])
    y = tv.debugging.assert_all_finite(x, "bad input")
    assert run(y, {x: [1.0]}).tolist() == [1.0]
    _run_fails(y, {x: [1.0, np.inf]}, "bad input : Tensor had Inf values")
    _run_fails(tv.verify_tensor_all_finite(x, "v"), {x: [np.nan]}, "v : Tensor had NaN values")
    assert run([tv.is_non_decreasing([1, 1, 2]), tv.is_strictly_increasing([1, 1, 2]),
                tv.is_strictly_increasing([[1, 2], [3, 4]]), tv.is_non_decreasing([])]) == \
        [True, False, True, True]
    assert tv.is_numeric_tensor(x) and not tv.is_numeric_tensor(tv.constant("s"))
    assert not tv.is_numeric_tensor(3.0)
    for name in ("assert_equal", "assert_rank", "is_nan", "is_finite", "Assert",
                 "assert_all_finite", "check_numerics"):
        assert hasattr(tv.debugging, name), name


# ---- special functions (special_ops) ----------------------------------------------------------
def _vec(f):
    return lambda a: np.vectorize(f, otypes=[np.float64])(a)


TRIG = [(tv.acos, np.arccos, (-0.9, 0.9)), (tv.asin, np.arcsin, (-0.9, 0.9)),
        (tv.atan, np.arctan, (-3, 3)), (tv.sinh, np.sinh, (-3, 3)), (tv.cosh, np.cosh, (-3, 3)),
        (tv.asinh, np.arcsinh, (-3, 3)), (tv.acosh, np.arccosh, (1.1, 4)),
        (tv.atanh, np.arctanh, (-0.9, 0.9)),
        (tv.erf, _vec(math.erf), (-4, 4)), (tv.erfc, _vec(math.erfc), (-4, 6)),
        (tv.lgamma, _vec(math.lgamma), (0.1, 30)), (tv.log_sigmoid,
                                                     lambda a: -np.logaddexp(0, -a), (-30, 30))]


@pytest.mark.parametrize("fn,ref,dom", TRIG, ids=lambda v: getattr(v, "__name__", ""))
def test_unary_special_forward_and_gradient(fn, ref, dom):
    x = rand(3, 4, lo=dom[0], hi=dom[1])
    check_forward(fn, ref, x, rtol=1e-12, atol=1e-14)
    check_forward(fn, ref, x.astype(np.float32), rtol=2e-6, atol=1e-6)
    check_gradients(fn, x, rtol=1e-5, atol=1e-6)


def test_erf_erfc_lgamma_across_their_ranges_against_the_math_module():
    x = np.linspace(-7, 7, 20001)
    got = run([tv.erf(x), tv.erfc(x)])
    np.testing.assert_allclose(got[0], [math.erf(v) for v in x], rtol=0, atol=2e-15)
    np.testing.assert_allclose(got[1], [math.erfc(v) for v in x], rtol=1e-11, atol=1e-300)
    x = np.linspace(-20.25, 80, 30001)
    x = x[np.abs(x - np.round(x)) > 1e-6]
    np.testing.assert_allclose(run(tv.lgamma(x)), [math.lgamma(v) for v in x], rtol=1e-13,
                               atol=1e-13)


def test_special_edge_values_as_tf():
    x = np.array([0.0, -1.0, -0.0, np.inf, -np.inf, np.nan, 1.0, 2.0])
    lg, dg, e, ec = run([tv.lgamma(x), tv.digamma(x), tv.erf(x), tv.erfc(x)])
    assert lg[:5].tolist() == [np.inf] * 5 and np.isnan(lg[5]) and lg[6:].tolist() == [0, 0]
    assert np.isnan(dg[[0, 1, 2, 4, 5]]).all() and dg[3] == np.inf
    assert e[3:5].tolist() == [1.0, -1.0] and ec[3:5].tolist() == [0.0, 2.0]
    z = run(tv.zeta(np.array([2.0, 2.0, 1.0, 0.5, 3.0]), np.array([0.0, -1.5, 1.0, 1.0, -2.0])))
    assert z[0] == np.inf and z[2] == np.inf and np.isnan(z[3]) and np.isnan(z[4])
    np.testing.assert_allclose(z[1], 9.379246644989124, rtol=1e-13)  # TF's value


def test_digamma_polygamma_zeta_closed_forms():
    euler = 0.57721566490153286
    n = np.arange(1, 8, dtype=np.float64)
    harmonic = np.array([sum(1.0 / k for k in range(1, int(m))) for m in n])
    np.testing.assert_allclose(run(tv.digamma(n)), -euler + harmonic, rtol=1e-14, atol=1e-15)
    half = np.array([0.5, 1.5, 2.5])
    want = -euler - 2 * math.log(2) + np.array([0, 2, 2 + 2 / 3])
    np.testing.assert_allclose(run(tv.digamma(half)), want, rtol=1e-13, atol=1e-15)
    # reflection: psi(1 - x) - psi(x) = pi / tan(pi x)
    x = rand(20, lo=0.05, hi=0.95)
    d = run(tv.digamma(np.concatenate([x, 1 - x])))
    np.testing.assert_allclose(d[20:] - d[:20], np.pi / np.tan(np.pi * x), rtol=1e-11)
    zeta_2_4 = run(tv.zeta(np.array([2.0, 4.0, 2.0]), np.array([1.0, 1.0, 0.5])))
    np.testing.assert_allclose(zeta_2_4, [np.pi ** 2 / 6, np.pi ** 4 / 90, np.pi ** 2 / 2],
                               rtol=1e-14)
    # polygamma(1, 1) = pi^2/6, polygamma(2, 1) = -2 zeta(3), polygamma(0, x) = digamma(x)
    p = run(tv.polygamma(np.array([1.0, 2.0, 0.0, 1.5]), np.array([1.0, 1.0, 3.0, 2.0])))
    np.testing.assert_allclose(p[:3], [np.pi ** 2 / 6, -2 * 1.2020569031595942,
                                       1.5 - euler], rtol=1e-13)
    assert np.isnan(p[3])  # a non-integer order


def test_special_gradients():
    x = rand(2, 3, lo=0.3, hi=6.0)
    check_gradients(tv.digamma, x, rtol=1e-5)
    check_gradients(lambda v: tv.polygamma(tv.constant(1.0, tv.float64), v), x, rtol=1e-5)
    check_gradients(lambda q: tv.zeta(tv.constant(3.0, tv.float64), q), x, rtol=1e-5)
    check_gradients(tv.lgamma, rand(5, lo=-3.9, hi=-3.1), rtol=1e-5)
    check_gradients(tv.atan2, rand(3, 2), rand(2, lo=0.5, hi=2), rtol=1e-5)
    check_gradients(tv.lbeta, rand(3, 4, lo=0.5, hi=3), rtol=1e-5)


def test_atan2_rint_lbeta_forward():
    y, x = rand(3, 4), rand(4)
    check_forward(tv.atan2, np.arctan2, y, x)
    r = run(tv.rint(np.array([0.5, 1.5, 2.5, -0.5, -1.7])))
    assert r.tolist() == [0.0, 2.0, 2.0, -0.0, -2.0]
    a = rand(2, 3, lo=0.5, hi=4)
    want = [sum(math.lgamma(v) for v in row) - math.lgamma(sum(row)) for row in a]
    np.testing.assert_allclose(run(tv.lbeta(a)), want, rtol=1e-12)
    with pytest.raises(InvalidArgumentError, match="Erf does not support dtype int32"):
        tv.erf(tv.constant([1, 2]))


# ---- arithmetic names, cumprod, linspace, meshgrid (math_ext) -----------------------------------
def test_floormod_floor_div_realdiv_div_no_nan():
    a, b = np.array([7, -7, 7, -7]), np.array([3, 3, -3, -3])
    got = run([tv.floormod(a, b), tv.floor_div(a, b)])
    assert got[0].tolist() == np.mod(a, b).tolist()
    assert got[1].tolist() == np.floor_divide(a, b).tolist()
    x, y = rand(3, 4), rand(4)
    y[1] = 0.0
    check_forward(tv.realdiv, np.divide, x, rand(4, lo=0.5))
    check_forward(tv.div_no_nan, lambda p, q: np.where(q == 0, 0.0, p / np.where(q == 0, 1, q)),
                  x, y)
    assert run(tv.div_no_nan(np.array([np.inf, np.nan, 0.0]), np.zeros(3))).tolist() == [0] * 3
    check_gradients(tv.div_no_nan, x, rand(4, lo=0.5, hi=2))


def test_scalar_mul_and_saturate_cast():
    x = rand(2, 3)
    np.testing.assert_allclose(run(tv.scalar_mul(2.5, x)), 2.5 * x)
    s = tv.scalar_mul(tv.constant(3.0), tv.IndexedSlices(tv.constant([[1.0, 2.0]]),
                                                         tv.constant([0])))
    assert isinstance(s, tv.IndexedSlices) and run(s.values).tolist() == [[3.0, 6.0]]
    with pytest.raises(ValueError, match=r"The input scalar must be a 0-D value. Received "
                                         r"shape \(2,\)\."):
        tv.scalar_mul(tv.constant([1.0, 2.0]), x)
    got = run([tv.saturate_cast(np.array([1e10, -1e10, 3.7], np.float32), tv.int32),
               tv.saturate_cast(np.array([300, -5]), tv.uint8),
               tv.saturate_cast(np.array([1e40, -1e40, 1.0]), tv.float32)])
    assert got[0].tolist() == [2147483520, -2147483648, 3]
    assert got[1].tolist() == [255, 0] and got[1].dtype == np.uint8
    assert got[2].tolist() == [np.finfo(np.float32).max, np.finfo(np.float32).min, 1.0]


def _np_cumprod(x, axis, exclusive, reverse):
    if reverse:
        x = np.flip(x, axis)
    out = np.cumprod(x, axis)
    if exclusive:
        out = np.concatenate([np.ones_like(np.take(out, [0], axis)),
                              np.take(out, range(x.shape[axis] - 1), axis)], axis)
    return np.flip(out, axis) if reverse else out


@pytest.mark.parametrize("exclusive", [False, True])
@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_cumprod(axis, exclusive, reverse):
    x = rand(3, 4, lo=0.5, hi=1.5)
    check_forward(lambda t: tv.cumprod(t, axis, exclusive, reverse),
                  lambda a: _np_cumprod(a, axis, exclusive, reverse), x)
    check_gradients(lambda t: tv.cumprod(t, axis, exclusive, reverse), x)
    assert run(tv.cumprod(np.array([2, 3, 4]), exclusive=True)).tolist() == [1, 2, 6]


def test_cumprod_errors():
    with pytest.raises(InvalidArgumentError, match="Cumprod needs a tensor of rank >= 1"):
        tv.cumprod(tv.constant(1.0))
    with pytest.raises(InvalidArgumentError, match="axis 2 is out of range"):
        tv.cumprod(tv.constant([[1.0]]), axis=2)


def test_linspace():
    got = run([tv.linspace(0.0, 1.0, 5), tv.lin_space(-1.0, 2.0, 4), tv.linspace(2.0, 3.0, 1),
               tv.linspace(0.1, 0.7, 7), tv.linspace(0, 1, 3)])
    assert got[0].tolist() == [0.0, 0.25, 0.5, 0.75, 1.0]
    assert got[1].tolist() == [-1.0, 0.0, 1.0, 2.0] and got[2].tolist() == [2.0]
    assert got[3][-1] == np.float32(0.7)  # the last value is exactly stop
    np.testing.assert_allclose(got[3], np.linspace(0.1, 0.7, 7), rtol=1e-6)
    assert got[4].dtype == np.float64 and got[4].tolist() == [0.0, 0.5, 1.0]
    n = tv.placeholder(tv.int32, [])
    t = tv.linspace(0.0, 1.0, n)
    with tv.Session() as s:
        for k in (1, 2, 6):
            np.testing.assert_allclose(s.run(t, {n: k}), np.linspace(0, 1, k), rtol=1e-6)
    nd = run([tv.linspace([0.0, 1.0], [1.0, 3.0], 3),
              tv.linspace([0.0, 1.0], [1.0, 3.0], 3, axis=1)])
    np.testing.assert_allclose(nd[0], np.linspace([0.0, 1.0], [1.0, 3.0], 3))
    np.testing.assert_allclose(nd[1], np.linspace([0.0, 1.0], [1.0, 3.0], 3, axis=1))
    check_gradients(lambda a, b: tv.linspace(a, b, 5), np.array(0.3), np.array(2.0))


def test_meshgrid():
    x, y, z = np.array([1, 2, 3]), np.array([4, 5]), np.array([6.0, 7.0, 8.0, 9.0])
    for indexing in ("xy", "ij"):
        got = run(tv.meshgrid(x, y, indexing=indexing))
        for g, w in zip(got, np.meshgrid(x, y, indexing=indexing)):
            assert g.tolist() == w.tolist()
    got = run(tv.meshgrid(z, z[:2], z[:3]))
    for g, w in zip(got, np.meshgrid(z, z[:2], z[:3])):
        assert g.tolist() == w.tolist()
    with pytest.raises(ValueError, match="indexing` parameter must be either 'xy' or 'ij'"):
        tv.meshgrid(x, y, indexing="zz")
    with pytest.raises(TypeError, match="'foo' is an invalid keyword argument"):
        tv.meshgrid(x, y, foo=1)
    check_gradients(lambda a, b: tv.meshgrid(a, b)[0] * tv.meshgrid(a, b)[1], rand(3), rand(2))


# ---- segment reductions, searchsorted, bincount, setdiff1d, permutations, roll, repeat ---------
D = np.array([[1.0, 2.0], [3.0, -4.0], [5.0, 6.0], [0.0, 8.0], [2.0, 2.0]])
IDS = np.array([0, 0, 2, 2, 3])
UIDS = np.array([3, -1, 0, 3, 0])


def _np_segment(data, ids, n, reduce, empty):
    out = np.full((n,) + data.shape[ids.ndim:], empty, dtype=data.dtype)
    flat, rows = ids.reshape(-1), data.reshape((-1,) + data.shape[ids.ndim:])
    for s in range(n):
        sel = rows[flat == s]
        if len(sel):
            out[s] = reduce(sel, axis=0)
    return out


SORTED = [(tv.segment_sum, np.sum, 0), (tv.segment_mean, np.mean, 0),
          (tv.segment_max, np.max, 0), (tv.segment_min, np.min, 0),
          (tv.segment_prod, np.prod, 1)]
LOWEST, HIGHEST = np.finfo(np.float64).min, np.finfo(np.float64).max
UNSORTED = [(tv.unsorted_segment_max, np.max, LOWEST), (tv.unsorted_segment_min, np.min, HIGHEST),
            (tv.unsorted_segment_prod, np.prod, 1),
            (tv.unsorted_segment_mean, np.mean, 0),
            (tv.unsorted_segment_sqrt_n, lambda a, axis: a.sum(axis) / np.sqrt(len(a)), 0)]


@pytest.mark.parametrize("fn,reduce,empty", SORTED, ids=lambda v: getattr(v, "__name__", ""))
def test_sorted_segment_ops(fn, reduce, empty):
    check_forward(lambda d: fn(d, IDS), lambda d: _np_segment(d, IDS, 4, reduce, empty), D)
    data = rng.uniform(0.5, 2.0, size=(5, 2))  # no ties: max/min gradients are exact
    check_gradients(lambda d: fn(d, IDS), data)


@pytest.mark.parametrize("fn,reduce,empty", UNSORTED, ids=lambda v: getattr(v, "__name__", ""))
def test_unsorted_segment_ops(fn, reduce, empty):
    check_forward(lambda d: fn(d, UIDS, 5), lambda d: _np_segment(d, UIDS, 5, reduce, empty), D)
    ids2 = np.array([[1, 0], [2, 1]])
    data2 = rng.uniform(0.5, 2.0, size=(2, 2, 3))
    check_forward(lambda d: fn(d, ids2, 3), lambda d: _np_segment(d, ids2, 3, reduce, empty),
                  data2)
    check_gradients(lambda d: fn(d, np.array([1, -1, 0, 1, 0]), 2),
                    rng.uniform(0.5, 2.0, size=(5, 2)))


def test_segment_gradients_with_ties_and_zeros_as_tf():
    data = np.array([[2.0, 0.0], [2.0, 3.0], [1.0, 0.0]])
    ids = np.array([0, 0, 1])
    x = tv.constant(data)
    g_max = run(tv.gradients(tv.reduce_sum(tv.segment_max(x, ids)), x)[0])
    assert g_max.tolist() == [[0.5, 0.0], [0.5, 1.0], [1.0, 1.0]]  # ties split the gradient
    g_prod = run(tv.gradients(tv.reduce_sum(tv.unsorted_segment_prod(x, ids, 2)), x)[0])
    assert g_prod.tolist() == [[2.0, 3.0], [2.0, 0.0], [1.0, 1.0]]  # zero-safe


def test_segment_op_errors_and_integer_empties():
    with pytest.raises(InvalidArgumentError, match="^segment ids are not increasing"):
        run(tv.segment_sum(D, [0, 2, 1, 3, 3]))
    with pytest.raises(InvalidArgumentError, match=r"^Segment id -1 out of range \[0, 2\), "
                                                    "possibly because 'segment_ids' input is "
                                                    "not sorted."):
        run(tv.segment_sum(D, [-1, 0, 1, 1, 1]))
    with pytest.raises(InvalidArgumentError, match=r"^segment_ids\[1\] = 9 is out of range "
                                                    r"\[0, 3\)"):
        run(tv.unsorted_segment_max(D, [0, 9, 1, 1, 1], 3))
    got = run([tv.unsorted_segment_max(np.array([4, 1, 7, 2]), [0, 0, 2, 2], 4),
               tv.segment_max(np.array([4, 1, 7, 2]), [1, 1, 3, 3])])
    lo = np.iinfo(np.int64).min
    assert got[0].tolist() == [4, lo, 7, lo] and got[1].tolist() == [0, 4, 0, 7]


def test_searchsorted():
    seq = np.sort(rng.normal(size=(2, 3, 7)), axis=-1)
    seq[0, 0, 2] = seq[0, 0, 3]  # a tie
    vals = np.concatenate([rng.normal(size=(2, 3, 4)), seq[..., :2]], -1)
    for side in ("left", "right"):
        want = np.array([[np.searchsorted(seq[i, j], vals[i, j], side=side) for j in range(3)]
                         for i in range(2)])
        assert run(tv.searchsorted(seq, vals, side=side)).tolist() == want.tolist()
    got = run(tv.searchsorted(np.array([1, 2, 2, 9]), np.array([2, 10, 0]), side="right",
                              out_type=tv.int64))
    assert got.tolist() == [3, 4, 0] and got.dtype == np.int64
    with pytest.raises(ValueError, match="Argument `side` must be either 'right' or 'left'"):
        tv.searchsorted([1, 2], [1], side="mid")
    with pytest.raises(InvalidArgumentError, match="same leading"):
        tv.searchsorted(np.zeros((2, 3)), np.zeros((3, 3)))


def test_bincount_setdiff1d_invert_permutation_unravel_index():
    arr = rng.integers(0, 6, size=(3, 4))
    w = rng.normal(size=(3, 4))
    got = run([tv.bincount(arr), tv.bincount(arr, minlength=9), tv.bincount(arr, maxlength=3),
               tv.bincount(arr, weights=w), tv.bincount(np.zeros(0, np.int32), minlength=3),
               tv.bincount([2, 2], dtype=tv.float32)])
    assert got[0].tolist() == np.bincount(arr.ravel()).tolist() and got[0].dtype == np.int32
    assert got[1].tolist() == np.bincount(arr.ravel(), minlength=9).tolist()
    assert got[2].tolist() == np.bincount(arr.ravel())[:3].tolist()
    np.testing.assert_allclose(got[3], np.bincount(arr.ravel(), w.ravel()))
    assert got[4].tolist() == [0, 0, 0] and got[5].tolist() == [0, 0, 2]
    with pytest.raises(InvalidArgumentError, match="Input arr must be non-negative!"):
        run(tv.bincount([-1, 2]))
    out, idx = tv.setdiff1d([1, 2, 3, 4, 5, 6], [1, 3, 5, 9])
    assert [v.tolist() for v in run([out, idx])] == [[2, 4, 6], [1, 3, 5]]
    s_out, _ = tv.setdiff1d(tv.constant(["a", "b", "c"]), tv.constant(["b"]))
    assert [str(v) for v in run(s_out)] == ["a", "c"]
    p = rng.permutation(7)
    assert run(tv.invert_permutation(p)).tolist() == np.argsort(p).tolist()
    with pytest.raises(InvalidArgumentError, match="^0 is duplicated in the input."):
        run(tv.invert_permutation([0, 0, 1]))
    with pytest.raises(InvalidArgumentError, match="^5 is not between 0 and 3"):
        run(tv.invert_permutation([0, 5, 1]))
    flat = np.array([0, 5, 11, 7])
    assert run(tv.unravel_index(flat, [3, 4])).tolist() == \
        np.array(np.unravel_index(flat, (3, 4))).tolist()
    assert run(tv.unravel_index(np.int64(23), np.array([2, 3, 4]))).tolist() == [1, 2, 3]
    with pytest.raises(InvalidArgumentError, match="index is out of bound as with dims"):
        run(tv.unravel_index([12], [3, 4]))


def test_roll_static_and_dynamic_with_gradients():
    x = rand(3, 4)
    for shift, axis in ((1, 0), (-2, 1), ([1, -1], [0, 1]), (5, -1)):
        check_forward(lambda t, s=shift, a_=axis: tv.roll(t, s, a_),
                      lambda a, s=shift, a_=axis: np.roll(a, s, a_), x)
        check_gradients(lambda t, s=shift, a_=axis: tv.roll(t, s, a_), x)
    sh = tv.placeholder(tv.int32, [])
    out = tv.roll(tv.constant(np.arange(5)), sh, 0)
    with tv.Session() as s:
        for k in (0, 2, -1, 7):
            assert s.run(out, {sh: k}).tolist() == np.roll(np.arange(5), k).tolist()
    with pytest.raises(InvalidArgumentError, match="shift and axis must have the same size"):
        tv.roll(x, [1, 2], [0])


def test_repeat_with_gradients():
    x = rand(2, 3)
    for reps, axis in ((2, None), (3, 1), ([1, 2], 0), ([0, 2, 1], 1)):
        check_forward(lambda t, r=reps, a_=axis: tv.repeat(t, r, a_),
                      lambda a, r=reps, a_=axis: np.repeat(a, r, a_), x)
        check_gradients(lambda t, r=reps, a_=axis: tv.repeat(t, r, a_), x)
    assert tv.repeat(tv.constant(x), [1, 2], 0).shape.as_list() == [3, 3]
    with pytest.raises(InvalidArgumentError, match="Dimensions 3 and 2 are not compatible"):
        tv.repeat([1, 2, 3], [1, 2])
    r = tv.placeholder(tv.int32, [None])
    with tv.Session() as s:
        assert s.run(tv.repeat([5, 6], r), {r: [2, 1]}).tolist() == [5, 5, 6]


def _np_s2d(x, b):
    n, h, w, c = x.shape
    return x.reshape(n, h // b, b, w // b, b, c).transpose(0, 1, 3, 2, 4, 5).reshape(
        n, h // b, w // b, b * b * c)


def test_space_to_depth_depth_to_space():
    x = rand(2, 4, 6, 3)
    check_forward(lambda t: tv.space_to_depth(t, 2), lambda a: _np_s2d(a, 2), x)
    y = run(tv.depth_to_space(tv.space_to_depth(x, 2), 2))
    np.testing.assert_array_equal(y, x)
    nchw = run(tv.space_to_depth(np.transpose(x, (0, 3, 1, 2)), 2, data_format="NCHW"))
    np.testing.assert_array_equal(np.transpose(nchw, (0, 2, 3, 1)), _np_s2d(x, 2))
    check_gradients(lambda t: tv.space_to_depth(t, 2), x)
    check_gradients(lambda t: tv.depth_to_space(t, 2), rand(1, 2, 3, 8))
    with pytest.raises(InvalidArgumentError, match="Dimension size must be evenly divisible by "
                                                   "2 but is 3"):
        tv.space_to_depth(tv.zeros([1, 3, 4, 1]), 2)
    with pytest.raises(InvalidArgumentError, match="Value for attr 'block_size' of 1 must be "
                                                   "at least minimum 2"):
        tv.space_to_depth(tv.zeros([1, 4, 4, 1]), 1)


# ---- is_tensor, get_static_value, ensure_shape, identity_n, shape_n (debug_ops) ----------------
def test_static_facts():
    x = tv.placeholder(tv.float32, [None, 3])
    assert tv.is_tensor(x) and tv.is_tensor(tv.Variable(1.0)) and not tv.is_tensor(np.ones(2))
    assert tv.get_static_value(tv.constant([1, 2])).tolist() == [1, 2]
    assert tv.get_static_value(x) is None and tv.get_static_value(tv.shape(x)) is None
    assert tv.get_static_value(tv.shape(tv.zeros([2, 3]))).tolist() == [2, 3]
    assert int(tv.get_static_value(tv.rank(x))) == 2
    a, b = tv.identity_n([x, tv.constant(1)])
    s1, s2 = tv.shape_n([x, tv.constant([1, 2])], out_type=tv.int64)
    with tv.Session() as s:
        got = s.run([a, b, s1, s2], {x: np.ones((2, 3))})
    assert got[0].shape == (2, 3) and int(got[1]) == 1
    assert got[2].tolist() == [2, 3] and got[3].tolist() == [2] and got[2].dtype == np.int64


def test_ensure_shape():
    x = tv.placeholder(tv.float32, [None, 3], name="e")
    y = tv.ensure_shape(x, [2, None])
    assert y.shape.as_list() == [2, 3]
    with pytest.raises(InvalidArgumentError, match=r"Dimension 1 in both shapes must be equal, "
                                                   r"but are 4 and 3\. Shapes are \[\?,4\] and "
                                                   r"\[\?,3\]\."):
        tv.ensure_shape(x, [None, 4])
    assert run(y, {x: np.zeros((2, 3))}).shape == (2, 3)
    with pytest.raises(InvalidArgumentError, match=r"Shape of tensor e:0 \[5,3\] is not "
                                                   r"compatible with expected shape \[2,\?\]\."):
        run(y, {x: np.zeros((5, 3))})
    check_gradients(lambda t: tv.ensure_shape(t, [2, None]) * 2.0, rand(2, 3))


# ---- tv.math --------------------------------------------------------------------------------------
def test_tv_math_names_are_the_ops():
    assert tv.math.log1p is tv.log1p and tv.math.segment_sum is tv.segment_sum
    assert tv.math.softplus is tv.nn.softplus and tv.math.divide_no_nan is tv.div_no_nan
    assert tv.confusion_matrix is tv.math.confusion_matrix
    for name in tv.math.__all__:
        assert callable(getattr(tv.math, name)), name


def test_tv_math_composites():
    x, y = np.array([0.0, 1.0, 2.0, 0.0]), np.array([0.0, 3.0, 0.5, np.inf])
    m = np.array([[1.0, 2.0], [3.0, 5.0]])
    got = run([tv.math.xlogy(x, y), tv.math.xdivy(x, y), tv.math.xlog1py(x, y),
               tv.math.multiply_no_nan(np.array([np.nan, 1.0, 2.0, 3.0]), x),
               tv.math.reciprocal_no_nan(x), tv.math.zero_fraction(x),
               tv.math.reduce_std(m), tv.math.reduce_variance(m, axis=0),
               tv.math.reduce_euclidean_norm(m, axis=1), tv.math.polyval([1.0, 2.0, 3.0], m),
               tv.math.cumulative_logsumexp(np.array([1.0, 2.0, 3.0])),
               tv.math.accumulate_n([m, m])])
    assert got[0].tolist() == [0.0, np.log(3.0), 2 * np.log(0.5), 0.0]
    assert got[1].tolist() == [0.0, 1 / 3, 4.0, 0.0]
    np.testing.assert_allclose(got[2], [0.0, np.log1p(3.0), 2 * np.log1p(0.5), 0.0])
    assert got[3].tolist() == [0.0, 1.0, 4.0, 0.0]
    assert got[4].tolist() == [0.0, 1.0, 0.5, 0.0] and float(got[5]) == 0.5
    np.testing.assert_allclose(got[6], np.std(m))
    np.testing.assert_allclose(got[7], np.var(m, axis=0))
    np.testing.assert_allclose(got[8], np.linalg.norm(m, axis=1))
    np.testing.assert_allclose(got[9], m * m + 2 * m + 3)
    np.testing.assert_allclose(got[10], np.log(np.cumsum(np.exp([1.0, 2.0, 3.0]))))
    np.testing.assert_allclose(got[11], 2 * m)
    check_gradients(lambda a, b: tv.math.xlogy(a, b), rand(3, lo=0.2), rand(3, lo=0.2))
    check_gradients(lambda a: tv.math.cumulative_logsumexp(a, axis=1), rand(2, 3))


def test_confusion_matrix():
    labels, preds = np.array([1, 2, 4, 2]), np.array([2, 2, 4, 1])
    want = np.zeros((5, 5), int)
    np.add.at(want, (labels, preds), 1)
    assert run(tv.confusion_matrix(labels, preds)).tolist() == want.tolist()
    w = run(tv.math.confusion_matrix([0, 1], [1, 1], num_classes=3, weights=[0.5, 2.0],
                                     dtype=tv.float32))
    assert w.tolist() == [[0, 0.5, 0], [0, 2.0, 0], [0, 0, 0]]
    with pytest.raises(InvalidArgumentError, match="`labels` out of bound"):
        run(tv.confusion_matrix(tv.constant([0, 5]), tv.placeholder_with_default(
            np.array([0, 1]), [2]), num_classes=3))


# ---- where_v2, histograms, tensor_scatter_nd_*, batch_gather ------------------------------------
def test_where_v2_broadcasts_all_three():
    c = np.array([[True], [False]])
    x, y = rand(2, 3), rand(3)
    check_forward(lambda a, b: tv.where_v2(c, a, b), lambda a, b: np.where(c, a, b), x, y)
    assert run(tv.where_v2([True, False], [[1, 2], [3, 4]], 0)).tolist() == [[1, 0], [3, 0]]
    assert run(tv.where_v2([True, False, True])).tolist() == [[0], [2]]
    check_gradients(lambda a, b: tv.where_v2(c, a, b), x, y)
    with pytest.raises(ValueError, match="x and y must both be non-None or both be None."):
        tv.where_v2([True], [1])


def test_histogram_fixed_width():
    v = np.array([-1.0, 0.0, 1.5, 2.0, 5.0, 15, 4.999, 1.0])
    got = run([tv.histogram_fixed_width(v, [0.0, 5.0], 5),
               tv.histogram_fixed_width(v, [0.0, 5.0], nbins=3, dtype=tv.int64),
               tv.histogram_fixed_width_bins(v, [0.0, 5.0], 5),
               tv.histogram_fixed_width(np.array([1, 2, 9]), [0, 10], 4)])
    assert got[0].tolist() == [2, 2, 1, 0, 3]
    assert got[1].tolist() == [4, 1, 3] and got[1].dtype == np.int64
    assert got[2].tolist() == [0, 0, 1, 2, 4, 4, 4, 1] and got[3].tolist() == [2, 0, 0, 1]
    big = rng.normal(size=1000)
    np.testing.assert_array_equal(run(tv.histogram_fixed_width(big, [-2.0, 2.0], 8)),
                                  np.histogram(np.clip(big, -2, 2 - 1e-9), 8, (-2, 2))[0])
    with pytest.raises(InvalidArgumentError, match="value_range should satisfy value_range"):
        with tv.device("/cpu:0"):  # checked on the host only (TF's GPU kernel does not)
            bad = tv.histogram_fixed_width(v, [5.0, 0.0], 5)
        run(bad)


def test_tensor_scatter_nd_ops_and_gradients():
    t = rand(3, 2)
    idx = np.array([[2], [0]])
    up = rand(2, 2)

    def ref(kind):
        out = t.copy()
        for i, u in zip(idx[:, 0], up):
            out[i] = {"update": u, "add": out[i] + u, "sub": out[i] - u,
                      "max": np.maximum(out[i], u), "min": np.minimum(out[i], u)}[kind]
        return out
    fns = {"update": tv.tensor_scatter_nd_update, "add": tv.tensor_scatter_nd_add,
           "sub": tv.tensor_scatter_nd_sub, "max": tv.tensor_scatter_nd_max,
           "min": tv.tensor_scatter_nd_min}
    for kind, fn in fns.items():
        np.testing.assert_allclose(run(fn(t, idx, up)), ref(kind))
        check_gradients(lambda a, b, fn=fn: fn(a, idx, b), t, up)
    assert tv.tensor_scatter_update is tv.tensor_scatter_nd_update
    assert run(tv.tensor_scatter_nd_add([1, 2], [[0], [0]], [5, 5])).tolist() == [11, 2]
    with pytest.raises(InvalidArgumentError, match="updates of shape \\[3\\] do not match"):
        tv.tensor_scatter_nd_update(tv.zeros([3, 2]), [[0]], tv.zeros([3]))


def test_batch_gather():
    p = rand(2, 3, 4)
    i = np.array([[[1], [0], [3]], [[2], [2], [0]]])
    want = np.take_along_axis(p, i, axis=-1)
    np.testing.assert_array_equal(run(tv.batch_gather(p, i)), want)
    assert run(tv.batch_gather([[1, 2, 3], [4, 5, 6]], [[2, 0], [1, 1]])).tolist() == \
        [[3, 1], [5, 5]]
    check_gradients(lambda a: tv.batch_gather(a, np.array([[2, 0, 2], [1, 1, 0]])), rand(2, 3))


def test_erfinv_ndtri_erfcinv_nextafter():
    x = np.linspace(-3.0, 3.0, 2001)  # (beyond, erf(x) rounds away most of 1 - erf(x))
    y = np.array([math.erf(v) for v in x])
    np.testing.assert_allclose(run(tv.math.erfinv(y)), x, rtol=1e-9, atol=1e-12)
    q = np.array([1e-300, 1e-100, 1e-12, 1e-5, 0.3, 1.0, 1.7, 2.0 - 1e-9])
    back = [math.erfc(v) for v in run(tv.math.erfcinv(q))]
    np.testing.assert_allclose(back, q, rtol=1e-10)
    p = np.array([1e-20, 0.025, 0.5, 0.975, 1 - 1e-10])
    want = [-9.262340089798409, -1.959963984540054, 0.0, 1.959963984540054, 6.361340889697422]
    np.testing.assert_allclose(run(tv.math.ndtri(p)), want, rtol=1e-12, atol=1e-15)
    edges = run([tv.math.erfinv(np.array([-1.0, 1.0, 1.5])), tv.math.ndtri(np.array([0.0, 1.0,
                                                                                      -0.1]))])
    assert edges[0][:2].tolist() == [-np.inf, np.inf] and np.isnan(edges[0][2])
    assert edges[1][:2].tolist() == [-np.inf, np.inf] and np.isnan(edges[1][2])
    check_gradients(tv.math.erfinv, rand(5, lo=-0.9, hi=0.9), rtol=1e-5)
    check_gradients(tv.math.ndtri, rand(5, lo=0.05, hi=0.95), rtol=1e-5)
    n = run(tv.math.nextafter(np.array([1.0, 0.0], np.float32), np.array([2.0, -1.0], np.float32)))
    assert n.tolist() == np.nextafter(np.float32([1, 0]), np.float32([2, -1])).tolist()


def test_assert_shapes():
    x, y = tv.zeros([2, 3], name="sx"), tv.zeros([3], name="sy")
    z = tv.zeros([4, 2, 3], name="sz")
    tv.debugging.assert_shapes([(x, ("N", "D")), (y, ("D",))])
    tv.debugging.assert_shapes([(z, ("*", "N", 3)), (x, ("N", "."))])
    with pytest.raises(ValueError, match=r"^Specified by tensor sx:0 dimension 0\.  Tensor sy:0 "
                                         r"dimension 0 must have size 2\.  Received size 3, "
                                         r"shape \(3,\)$"):
        tv.debugging.assert_shapes([(x, ("N", "D")), (y, ("N",))])
    with pytest.raises(ValueError, match=r"^mm\.  Specified explicitly\.  Tensor sx:0 dimension "
                                         "1 must have size 4"):
        tv.debugging.assert_shapes([(x, (2, 4))], message="mm")
    with pytest.raises(ValueError, match="only allowed as the first entry"):
        tv.debugging.assert_shapes([(z, (4, "*"))])
    with pytest.raises(ValueError, match="Specified shape must be an iterable"):
        tv.debugging.assert_shapes([(x, 3)])
    with pytest.raises(ValueError, match="must have rank 3"):
        tv.debugging.assert_shapes({x: ("a", "b", "c")})
    p = tv.placeholder(tv.float32, [None, 3], name="sp")
    q = tv.placeholder(tv.float32, [None], name="sq")
    check = tv.debugging.assert_shapes([(p, ("N", 3)), (q, ("N",))])
    run(check, {p: np.zeros((2, 3)), q: np.zeros(2)})
    _run_fails(check, {p: np.zeros((2, 3)), q: np.zeros(5)},
               r"assertion failed: \[\] \[Specified by tensor sp:0 dimension 0\] \[Tensor sq:0 "
               r"dimension\] \[0\] \[must have size\] \[2\] \[Received shape: \] \[5\]")


def _np_s2b(x, bs, pads):
    m = len(bs)
    y = np.pad(x, [(0, 0)] + list(pads) + [(0, 0)] * (x.ndim - 1 - m))
    out = []
    for offs in np.ndindex(*bs):  # batch index = offset index * B + b (TF's order)
        idx = (slice(None),) + tuple(slice(o, None, b) for o, b in zip(offs, bs))
        out.append(y[idx])
    return np.concatenate(out, 0)


def test_space_to_batch_and_back():
    x = rand(2, 4, 6, 3)
    for bs, pads in (([2, 3], [[0, 0], [0, 0]]), ([2, 2], [[1, 1], [2, 0]])):
        check_forward(lambda t, b=bs, p=pads: tv.space_to_batch_nd(t, b, p),
                      lambda a, b=bs, p=pads: _np_s2b(a, b, p), x)
        back = run(tv.batch_to_space_nd(tv.space_to_batch_nd(x, bs, pads), bs, pads))
        np.testing.assert_array_equal(back, x)
        check_gradients(lambda t, b=bs, p=pads: tv.space_to_batch_nd(t, b, p), x)
    y = rand(2, 5, 2)
    check_forward(lambda t: tv.space_to_batch_nd(t, [3], [[1, 0]]),
                  lambda a: _np_s2b(a, [3], [[1, 0]]), y)
    np.testing.assert_array_equal(
        run(tv.batch_to_space(tv.space_to_batch(x, [[0, 0], [0, 2]], 2), [[0, 0], [0, 2]], 2)), x)
    with pytest.raises(InvalidArgumentError, match=r"padded_shape\[1\]=7 is not divisible by "
                                                   r"block_shape\[1\]=2"):
        tv.space_to_batch_nd(x, [2, 2], [[0, 0], [1, 0]])


def test_complex_real_imag_conj_angle():
    a, b = rand(3), rand(3)
    c = tv.complex(a, b)
    assert c.dtype == tv.complex128
    got = run([c, tv.real(c), tv.imag(c), tv.conj(c), tv.math.angle(c), tv.math.angle(a),
               tv.real(a), tv.imag(a), tv.to_complex64(a)])
    z = a + 1j * b
    np.testing.assert_allclose(got[0], z)
    np.testing.assert_allclose(got[1], a) and np.testing.assert_allclose(got[2], b)
    np.testing.assert_allclose(got[3], np.conj(z))
    np.testing.assert_allclose(got[4], np.angle(z))
    np.testing.assert_allclose(got[5], np.where(a < 0, np.pi, 0.0))
    np.testing.assert_allclose(got[6], a) and np.testing.assert_allclose(got[7], 0 * a)
    assert got[8].dtype == np.complex64
    assert tv.complex(np.float32(1), np.float32(2)).dtype == tv.complex64

    def build(x, y):
        cc = tv.complex(x, y)
        return tv.real(cc) * 2.0 + tv.imag(tv.conj(cc)) * 3.0 + tv.math.angle(cc)
    check_gradients(build, rand(4, lo=0.5), rand(4, lo=0.5))
    with pytest.raises(InvalidArgumentError, match="real and imag must have one dtype"):
        tv.complex(tv.constant(1.0), tv.constant(1.0, tv.float64))


def test_igamma_igammac_betainc():
    # closed forms: P(1, x) = 1 - exp(-x); P(n, x) for integer n; I_x(a, 1) = x^a;
    # I_x(1, b) = 1 - (1 - x)^b; I_x(1/2, 1/2) = 2/pi asin(sqrt(x))
    x = rand(6, lo=0.05, hi=12.0)
    p1, q1 = run([tv.math.igamma(np.ones(6), x), tv.math.igammac(np.ones(6), x)])
    np.testing.assert_allclose(p1, 1 - np.exp(-x), rtol=1e-12)
    np.testing.assert_allclose(q1, np.exp(-x), rtol=1e-11)
    n = 4.0
    pn = run(tv.math.igamma(np.full(6, n), x))
    want = 1 - np.exp(-x) * sum(x ** k / math.factorial(k) for k in range(int(n)))
    np.testing.assert_allclose(pn, want, rtol=1e-11, atol=1e-15)
    big = run(tv.math.igammac(np.array([1e4]), np.array([1.01e4])))
    np.testing.assert_allclose(big, [0.15865124955], rtol=1e-9)  # TF's value
    u = rand(5, lo=0.01, hi=0.99)
    a = rand(5, lo=0.5, hi=5.0)
    got = run([tv.math.betainc(a, np.ones(5), u), tv.math.betainc(np.ones(5), a, u),
               tv.math.betainc(np.full(5, 0.5), np.full(5, 0.5), u)])
    np.testing.assert_allclose(got[0], u ** a, rtol=1e-12)
    np.testing.assert_allclose(got[1], 1 - (1 - u) ** a, rtol=1e-12)
    np.testing.assert_allclose(got[2], 2 / np.pi * np.arcsin(np.sqrt(u)), rtol=1e-12)
    edges = run(tv.math.igamma(np.array([3.0, 0.0, 2.0]), np.array([0.0, 1.0, np.inf])))
    assert edges[0] == 0.0 and np.isnan(edges[1]) and edges[2] == 1.0
    check_gradients(lambda t: tv.math.igamma(np.array([1.5, 2.0, 5.0]), t),
                    np.array([0.5, 2.0, 7.0]))
    check_gradients(lambda t: tv.math.betainc(np.array([1.5, 2.0]), np.array([2.0, 0.7]), t),
                    np.array([0.3, 0.8]))


def _np_bessel_i(nu, x):
    """A reference I_nu by the series with Python floats (exact enough for |x| <= 50)."""
    out = []
    for v in x:
        t = (abs(v) / 2) ** nu / math.factorial(nu)
        s, k = t, 0
        while t > 1e-18 * s or k < 5:
            k += 1
            t *= (v * v / 4) / (k * (k + nu))
            s += t
        out.append(s * (np.sign(v) if nu else 1.0))
    return np.array(out)


def test_bessel_functions():
    x = np.array([0.0, 1e-5, 0.5, -2.0, 10.0, 29.9, 30.1, -45.0])
    got = run([tv.math.bessel_i0(x), tv.math.bessel_i1(x), tv.math.bessel_i0e(x),
               tv.math.bessel_i1e(x)])
    i0, i1 = _np_bessel_i(0, x), _np_bessel_i(1, x)
    np.testing.assert_allclose(got[0], i0, rtol=1e-13)
    np.testing.assert_allclose(got[1], i1, rtol=1e-13, atol=1e-300)
    np.testing.assert_allclose(got[2], i0 * np.exp(-np.abs(x)), rtol=1e-13)
    np.testing.assert_allclose(got[3], i1 * np.exp(-np.abs(x)), rtol=1e-13, atol=1e-300)
    big = run(tv.math.bessel_i0e(np.array([1000.0])))
    np.testing.assert_allclose(big, [1 / np.sqrt(2 * np.pi * 1000) * (1 + 1 / 8000)], rtol=1e-7)
    for f in (tv.math.bessel_i0, tv.math.bessel_i1):
        check_gradients(f, np.array([0.5, -2.0, 10.0]), rtol=1e-5)
    for f in (tv.math.bessel_i0e, tv.math.bessel_i1e):
        check_gradients(f, np.array([0.5, -2.0, 10.0, 40.0]), rtol=1e-5)


# ---- FFTs, tv.spectral, tv.signal ---------------------------------------------------------------
def test_fft_family_against_numpy():
    x = rng.normal(size=(2, 6)) + 1j * rng.normal(size=(2, 6))
    y = rng.normal(size=(3, 4, 5)) + 1j * rng.normal(size=(3, 4, 5))
    z = rng.normal(size=(2, 3, 4, 5)) + 1j * rng.normal(size=(2, 3, 4, 5))
    got = run([tv.fft(x), tv.ifft(x), tv.fft2d(y), tv.ifft2d(y), tv.fft3d(z), tv.ifft3d(z)])
    for g, w in zip(got, [np.fft.fft(x), np.fft.ifft(x), np.fft.fft2(y), np.fft.ifft2(y),
                          np.fft.fftn(z, axes=(-3, -2, -1)), np.fft.ifftn(z, axes=(-3, -2, -1))]):
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-12)
    assert tv.fft(tv.constant(x.astype(np.complex64))).dtype == tv.complex64
    r = rng.normal(size=(2, 6))
    sp = tv.spectral
    got = run([sp.rfft(r), sp.rfft(r, [4]), sp.rfft(r, [9]), sp.irfft(np.fft.rfft(r)),
               sp.irfft(np.fft.rfft(r), [7]), sp.rfft2d(r), sp.irfft2d(np.fft.rfft2(r))])
    want = [np.fft.rfft(r), np.fft.rfft(r, 4), np.fft.rfft(r, 9), np.fft.irfft(np.fft.rfft(r)),
            np.fft.irfft(np.fft.rfft(r), 7), np.fft.rfft2(r), np.fft.irfft2(np.fft.rfft2(r))]
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-12)
    with pytest.raises(InvalidArgumentError, match="RFFT requires tv.float32 or tv.float64"):
        sp.rfft(tv.constant([1, 2]))


def test_fft_gradients():
    def through_fft(a, b):
        return tv.abs(tv.fft(tv.complex(a, b))) + tv.real(tv.ifft2d(tv.complex(a, a * b)))
    check_gradients(through_fft, rng.normal(size=(2, 5)), rng.normal(size=(2, 5)))
    check_gradients(lambda a: tv.abs(tv.spectral.rfft(a)), rng.normal(size=(2, 6)))
    check_gradients(lambda a: tv.abs(tv.spectral.rfft(a, [9])), rng.normal(size=(2, 6)))
    check_gradients(lambda a: tv.abs(tv.spectral.rfft2d(a)), rng.normal(size=(3, 4, 5)))
    for n in (7, 8):
        check_gradients(lambda a, b, n=n: tv.spectral.irfft(tv.complex(a, b), [n]),
                        rng.normal(size=(2, 4)), rng.normal(size=(2, 4)))
    check_gradients(lambda a, b: tv.spectral.irfft2d(tv.complex(a, b), [4, 6]),
                    rng.normal(size=(4, 4)), rng.normal(size=(4, 4)))


def test_signal_frame_windows_stft():
    x = rng.normal(size=(2, 20))
    f = run(tv.signal.frame(x, 5, 3))
    assert f.shape == (2, 6, 5) and f[1, 2].tolist() == x[1, 6:11].tolist()
    fp = run(tv.signal.frame(x, 6, 4, pad_end=True, pad_value=7.0))
    assert fp.shape == (2, 5, 6) and fp[0, -1].tolist() == x[0, 16:].tolist() + [7.0, 7.0]
    f0 = run(tv.signal.frame(np.arange(12.0).reshape(6, 2), 3, 2, axis=0))
    assert f0.shape == (2, 3, 2) and f0[1].tolist() == [[4, 5], [6, 7], [8, 9]]
    n = np.arange(8)
    np.testing.assert_allclose(run(tv.signal.hann_window(8)), 0.5 - 0.5 * np.cos(2 * np.pi * n / 8),
                               rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(run(tv.signal.hamming_window(5)), np.hamming(5), rtol=1e-6)
    np.testing.assert_allclose(run(tv.signal.hann_window(8, periodic=False)), np.hanning(8),
                               atol=1e-7)
    s = run(tv.signal.stft(x, 8, 4))
    win = 0.5 - 0.5 * np.cos(2 * np.pi * n / 8)
    frames = np.stack([x[:, i:i + 8] for i in range(0, 13, 4)], 1) * win
    np.testing.assert_allclose(s, np.fft.rfft(frames, 8), rtol=1e-10, atol=1e-12)
    check_gradients(lambda a: tv.abs(tv.signal.stft(a, 8, 4)), x)
    assert run(tv.signal.fftshift(np.arange(10))).tolist() == np.fft.fftshift(np.arange(10)).tolist()
    m = np.arange(9).reshape(3, 3)
    assert run(tv.signal.ifftshift(m)).tolist() == np.fft.ifftshift(m).tolist()


def test_approx_max_min_k_are_exact():
    x = np.array([[3.0, 1.0, 2.0], [0.0, 5.0, 4.0]])
    (v, i), (mv, mi) = run([list(tv.math.approx_max_k(x, 2)),
                            list(tv.math.approx_min_k(x, 1, reduction_dimension=0))])
    assert v.tolist() == [[3.0, 2.0], [5.0, 4.0]] and i.tolist() == [[0, 2], [1, 2]]
    assert mv.tolist() == [[0.0, 1.0, 2.0]] and mi.tolist() == [[1, 0, 0]]


def _np_dct2(x):
    n = x.shape[-1]
    k, j = np.arange(n)[:, None], np.arange(n)[None, :]
    return x @ (2 * np.cos(np.pi * k * (2 * j + 1) / (2 * n))).T


def test_dct_idct_mel_mfcc():
    x = rng.normal(size=(2, 8))
    d2 = run(tv.signal.dct(x))
    np.testing.assert_allclose(d2, _np_dct2(x), rtol=1e-12, atol=1e-12)
    for t in (2, 3, 4):  # ortho transforms are inverted by idct
        back = run(tv.signal.idct(tv.signal.dct(x, type=t, norm="ortho"), type=t, norm="ortho"))
        np.testing.assert_allclose(back, x, rtol=1e-12, atol=1e-12)
    back = run(tv.signal.idct(tv.signal.dct(x, type=2), type=2)) / 16.0  # TF: divide by 2N
    np.testing.assert_allclose(back, x, rtol=1e-12, atol=1e-12)
    back1 = run(tv.signal.idct(tv.signal.dct(x, type=1), type=1)) / 14.0
    np.testing.assert_allclose(back1, x, rtol=1e-12, atol=1e-12)
    check_gradients(lambda t: tv.signal.dct(t, type=2, norm="ortho"), x)
    with pytest.raises(ValueError, match="Normalization is not supported for the Type-I DCT."):
        tv.signal.dct(x, type=1, norm="ortho")
    m = run(tv.signal.linear_to_mel_weight_matrix(10, 33, 16000, 20.0, 7000.0, tv.float64))
    assert m.shape == (33, 10) and (m >= 0).all() and m[0].tolist() == [0.0] * 10
    assert (m.argmax(0)[1:] >= m.argmax(0)[:-1]).all()  # centres rise with the band
    mf = run(tv.signal.mfccs_from_log_mel_spectrograms(x))
    np.testing.assert_allclose(mf, _np_dct2(x) / np.sqrt(16.0), rtol=1e-12)


def test_overlap_and_add_and_inverse_stft():
    f = rng.normal(size=(2, 5, 4))
    want = np.zeros((2, 16))
    for i in range(5):
        want[:, i * 3:i * 3 + 4] += f[:, i]
    np.testing.assert_allclose(run(tv.signal.overlap_and_add(f, 3)), want, rtol=1e-12)
    check_gradients(lambda t: tv.signal.overlap_and_add(t, 3), f)
    sig = rng.normal(size=(2, 64))
    st = tv.signal.stft(sig, 16, 4)
    rec = run(tv.signal.inverse_stft(st, 16, 4,
                                     window_fn=tv.signal.inverse_stft_window_fn(4)))
    np.testing.assert_allclose(rec[:, 12:-12], sig[:, 12:52], rtol=1e-10, atol=1e-12)


def test_float32_erf_erfc_erfinv_fast_path_to_float32_rounding():
    x = np.linspace(-11.0, 11.0, 40001).astype(np.float32)
    e, c = run([tv.erf(x), tv.erfc(x)])
    want_e = np.array([math.erf(v) for v in x.astype(np.float64)])
    want_c = np.array([math.erfc(v) for v in x.astype(np.float64)])
    np.testing.assert_allclose(e, want_e, rtol=0, atol=6e-8)
    ok = want_c > 1e-37  # float32's normal range
    np.testing.assert_allclose(c[ok], want_c[ok], rtol=2e-7)
    y = np.linspace(-0.999, 0.999, 2001).astype(np.float32)
    back = [math.erf(v) for v in run(tv.math.erfinv(y)).astype(np.float64)]
    np.testing.assert_allclose(back, y, rtol=0, atol=1e-7)
