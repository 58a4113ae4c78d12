"""The gamma family: ``lgamma`` (Lanczos), ``digamma``, Hurwitz ``zeta``, ``polygamma``,
``lbeta``, and the regularized incomplete gamma and beta functions ``igamma``, ``igammac``,
``betainc`` (series and continued fractions checked for convergence in chunks).
"""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from ...vm.kernels.array_api import array_namespace, to_host
from ...framework.op_def_library import apply_op
from ...framework.op_registry import register_op
from ..common import _convert_pair, broadcast_shapes, check_same_dtype
from ..common import unbroadcast
from .math_ops import exp
from .special_common import _OPS, _back, _f64, _special_binary_shape, _unary

__all__ = ["lgamma", "digamma", "zeta", "polygamma", "lbeta", "igamma", "igammac", "betainc"]


_LANCZOS_G = 7.0
_LANCZOS = (0.99999999999980993, 676.5203681218851, -1259.1392167224028, 771.32342877765313,
            -176.61502916214059, 12.507343278686905, -0.13857109526572012,
            9.9843695780195716e-6, 1.5056327351493116e-7)
_HALF_LOG_2PI = 0.91893853320467274178


def _lgamma_pos(z):
    """``lgamma(z)`` for ``z >= 1/2`` (Lanczos, g = 7)."""
    z = z - 1.0
    a = _LANCZOS[0]
    for i in range(1, len(_LANCZOS)):
        a = a + _LANCZOS[i] / (z + i)
    t = z + (_LANCZOS_G + 0.5)
    with np.errstate(invalid="ignore", over="ignore"):
        return _HALF_LOG_2PI + (z + 0.5) * np.log(t) - t + np.log(a)


def _sin_pi_abs(x):
    """``|sin(pi x)|`` with the argument reduced first (exact zeros at integers)."""
    r = x - np.round(x)
    return np.abs(np.sin(np.pi * r))


def _lgamma_kernel(x):
    xf = _f64(x)
    refl = xf < 0.5
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        z = np.where(refl, 1.0 - xf, xf)
        lg = _lgamma_pos(np.where(np.isfinite(z), z, 1.0))
        s = _sin_pi_abs(np.where(np.isfinite(xf), xf, 0.5))
        out = np.where(refl, np.log(np.pi / s) - lg, lg)
        out = np.where(np.isinf(xf), np.inf, out)  # lgamma(+-inf) = inf
        out = np.where(np.isnan(xf), np.nan, out)
    return _back(out, x)


_DIGAMMA_SHIFT = 10


def _bernoulli(n: int) -> list[Fraction]:
    """B_0 .. B_n (B_1 = -1/2), exactly."""
    b = [Fraction(0)] * (n + 1)
    a = [Fraction(0)] * (n + 1)
    for m in range(n + 1):
        a[m] = Fraction(1, m + 1)
        for j in range(m, 0, -1):
            a[j - 1] = j * (a[j - 1] - a[j])
        b[m] = a[0]
    b[1] = -b[1]  # Akiyama-Tanigawa gives B_1 = +1/2
    return b


_B = _bernoulli(26)
# digamma's asymptotic series: psi(w) ~ log w - 1/(2w) - sum_k B_2k / (2k w^2k)
_PSI_COEF = tuple(float(_B[2 * k] / (2 * k)) for k in range(1, 8))
# zeta's Euler-Maclaurin corrections: B_2j / (2j)!
_ZETA_COEF = tuple(float(_B[2 * j] / math.factorial(2 * j)) for j in range(1, 13))


def _digamma_pos(z):
    """``digamma(z)`` for ``z >= 1/2``: ``psi(z) = psi(z + 10) - sum 1/(z + k)``."""
    acc = 0.0
    for k in range(_DIGAMMA_SHIFT):
        acc = acc + 1.0 / (z + k)
    w = z + _DIGAMMA_SHIFT
    inv2 = 1.0 / (w * w)
    series = 0.0
    p = inv2
    for c in _PSI_COEF:
        series = series + c * p
        p = p * inv2
    return np.log(w) - 0.5 / w - series - acc


def _digamma_kernel(x):
    xf = _f64(x)
    refl = xf < 0.5
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        z = np.where(refl, 1.0 - xf, xf)
        psi = _digamma_pos(np.where(np.isfinite(z), z, 1.0))
        r = xf - np.round(np.where(np.isfinite(xf), xf, 0.0))
        out = np.where(refl, psi - np.pi / np.tan(np.pi * r), psi)
        out = np.where(refl & (r == 0), np.nan, out)  # poles: 0, -1, -2 ...
        out = np.where(xf == np.inf, np.inf, out)
        out = np.where((xf == -np.inf) | np.isnan(xf), np.nan, out)
    return _back(out, x)


_ZETA_MIN_TERMS = 9
_ZETA_START = 9.0  # the summation goes on until q + k > 9 (Cephes)


def _zeta_f64(xf, qf):
    """Hurwitz ``zeta(x, q) = sum_k (q + k)^-x`` (Cephes' Euler-Maclaurin summation)."""
    xp = array_namespace(xf, qf)
    xf, qf = xp.broadcast_arrays(xf, qf)
    # terms summed directly, per element: at least 9, and until q + n > 9
    n = np.maximum(_ZETA_MIN_TERMS, np.floor(_ZETA_START - qf) + 2)
    n = np.where(np.isfinite(n), n, _ZETA_MIN_TERMS)
    kmax = int(np.asarray(to_host(n.max())).reshape(())) if n.size else _ZETA_MIN_TERMS
    with np.errstate(divide="ignore", invalid="ignore", over="ignore", under="ignore"):
        s = 0.0
        for k in range(kmax):
            s = s + np.where(k < n, (qf + k) ** -xf, 0.0)
        w = qf + n
        b = w ** -xf
        s = s + b * w / (xf - 1.0) + 0.5 * b
        a = 1.0
        fac = xf
        for j, c in enumerate(_ZETA_COEF):
            b = b / w
            a = a * fac if j == 0 else a * (xf + 2 * j - 1) * (xf + 2 * j)
            s = s + a * b * c
            b = b / w
        # TF's domain: x == 1 -> inf, x < 1 -> NaN; q <= 0 integer -> inf for even integer x,
        # else NaN; q < 0 non-integer needs an integer x
        q_int = qf == np.floor(qf)
        x_int = xf == np.floor(xf)
        even = x_int & (np.mod(xf, 2.0) == 0)
        s = np.where((qf <= 0) & q_int, np.where(even, np.inf, np.nan), s)
        s = np.where((qf < 0) & ~q_int & ~x_int, np.nan, s)
        s = np.where(xf == 1.0, np.inf, s)
        s = np.where(xf < 1.0, np.nan, s)
    return s


def _zeta_kernel(x, q):
    return _back(_zeta_f64(_f64(x), _f64(q)), x)


def _polygamma_kernel(a, x):
    af, xf = _f64(a), _f64(x)
    xp = array_namespace(af, xf)
    af, xf = xp.broadcast_arrays(af, xf)
    with np.errstate(invalid="ignore", over="ignore"):
        n1 = af + 1.0
        # (-1)^(n+1) n! zeta(n+1, x), with n! = Gamma(n + 1)
        fact = np.exp(_f64(_lgamma_kernel(np.where(n1 > 0, n1, 1.0))))
        sgn = np.where(np.mod(af, 2.0) == 0, -1.0, 1.0)
        out = sgn * fact * _zeta_f64(np.where(af >= 1, n1, 2.0), xf)
        out = np.where(af == 0, _f64(_digamma_kernel(xf)), out)
        out = np.where((af != np.floor(af)) | (af < 0), np.nan, out)
    return _back(out, x)


lgamma = _unary("Lgamma", _lgamma_kernel, lambda op, g: [g * digamma(op.inputs[0])])
lgamma.__doc__ = "``log(|Gamma(x)|)``, element-wise (``inf`` at non-positive integers)."
digamma = _unary("Digamma", _digamma_kernel, lambda op, g: [g * _polygamma(op.inputs[0], 1)])
digamma.__doc__ = "``psi(x) = d/dx lgamma(x)``, element-wise (NaN at non-positive integers)."


def _zeta_grad(op, g):  # TF: no gradient for x; d/dq zeta(x, q) = -x zeta(x + 1, q)
    x, q = op.inputs
    return [None, unbroadcast(g * -x * zeta(x + 1.0, q), q)]


def _polygamma_grad(op, g):  # TF: no gradient for the order
    a, x = op.inputs
    return [None, unbroadcast(g * polygamma(a + 1.0, x), x)]


register_op("Zeta", _special_binary_shape("Zeta"), _zeta_kernel, grad=_zeta_grad)
register_op("Polygamma", _special_binary_shape("Polygamma"), _polygamma_kernel,
            grad=_polygamma_grad)
_OPS += ["Zeta", "Polygamma"]


def zeta(x, q, name=None):
    """The Hurwitz zeta function ``sum_k (q + k)^-x``, element-wise with broadcasting."""
    x, q = _convert_pair(x, q)
    return apply_op("Zeta", [x, q], name=name).outputs[0]


def polygamma(a, x, name=None):
    """The ``a``-th derivative of ``digamma`` at ``x`` (``a`` a non-negative integer value of
    ``x``'s dtype; NaN otherwise), element-wise with broadcasting."""
    a, x = _convert_pair(a, x)
    return apply_op("Polygamma", [a, x], name=name).outputs[0]


def _polygamma(x, n: int):
    from ..array.array_ops import constant
    return polygamma(constant(float(n), dtype=x.dtype), x)


def lbeta(x, name=None):
    """``log(|Beta(x)|)`` along the last axis: ``sum(lgamma(x)) - lgamma(sum(x))`` (TF's
    ``tf.math.lbeta``; an empty last axis gives 0)."""
    from ...framework.graph import get_default_graph
    from ...framework.tensor_conversion import convert_to_tensor
    from .math_ops import reduce_sum
    with get_default_graph().name_scope(name or "lbeta"):
        x = convert_to_tensor(x, name="x")
        return reduce_sum(lgamma(x), axis=-1) - lgamma(reduce_sum(x, axis=-1))


# ---- incomplete gamma and beta functions ----------------------------------------------------
_CF_TINY = 1e-300
_CF_EPS = 1e-16
_CHUNK = 32  # iterations between convergence checks (a check reads one flag on a GPU)
_MAX_ITER = 4096


def _converged(err):
    """Whether every element has converged (one flag read by the host)."""
    return bool(np.asarray(to_host(np.all(err))))


def _lower_gamma_series(a, x):
    """``sum_n x^n / ((a+1)...(a+n))``, the series of ``P(a, x)`` (``x < a + 1``)."""
    total = term = np.ones_like(x)
    ap = a
    for i in range(_MAX_ITER):
        ap = ap + 1.0
        term = term * x / ap
        total = total + term
        if (i + 1) % _CHUNK == 0 and _converged(np.abs(term) <= np.abs(total) * _CF_EPS):
            break
    return total


def _upper_gamma_cf(a, x):
    """The continued fraction of ``Q(a, x)`` (``x >= a + 1``; modified Lentz)."""
    b = x + 1.0 - a
    c = np.full_like(x, 1.0 / _CF_TINY)
    d = 1.0 / b
    h = d
    for i in range(1, _MAX_ITER):
        an = -i * (i - a)
        b = b + 2.0
        d = an * d + b
        d = np.where(np.abs(d) < _CF_TINY, _CF_TINY, d)
        c = b + an / c
        c = np.where(np.abs(c) < _CF_TINY, _CF_TINY, c)
        d = 1.0 / d
        delta = d * c
        h = h * delta
        if i % _CHUNK == 0 and _converged(np.abs(delta - 1.0) <= _CF_EPS):
            break
    return h


def _igamma_pq(a, x):
    """``(P, Q)`` of the regularised incomplete gamma function, float64."""
    xp = array_namespace(a, x)
    a, x = xp.broadcast_arrays(a, x)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore", under="ignore"):
        use_series = x < a + 1.0
        ok = (a > 0) & (x > 0) & np.isfinite(x)
        sa = np.where(ok, a, 1.0)
        xs = np.where(ok & use_series, x, 0.5)
        xc = np.where(ok & ~use_series, x, 3.0)
        lg_a1 = _f64(_lgamma_kernel(sa + 1.0))
        p_series = np.exp(-xs + sa * np.log(xs) - lg_a1) * _lower_gamma_series(sa, xs)
        lg_a = _f64(_lgamma_kernel(sa))
        q_cf = np.exp(-xc + sa * np.log(xc) - lg_a) * _upper_gamma_cf(sa, xc)
        p = np.where(use_series, p_series, 1.0 - q_cf)
        q = np.where(use_series, 1.0 - p_series, q_cf)
        # TF's edges: x == 0 -> P = 0; x == inf -> P = 1; a <= 0, x < 0, NaN -> NaN
        p = np.where(x == 0, 0.0, np.where(x == np.inf, 1.0, p))
        q = np.where(x == 0, 1.0, np.where(x == np.inf, 0.0, q))
        bad = (a <= 0) | (x < 0) | np.isnan(a) | np.isnan(x)
        return np.where(bad, np.nan, p), np.where(bad, np.nan, q)


def _igamma_kernel(a, x):
    return _back(_igamma_pq(_f64(a), _f64(x))[0], x)


def _igammac_kernel(a, x):
    return _back(_igamma_pq(_f64(a), _f64(x))[1], x)


def _beta_cf(a, b, x):
    """The continued fraction of the incomplete beta function (modified Lentz)."""
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c = np.ones_like(x)
    d = 1.0 - qab * x / qap
    d = np.where(np.abs(d) < _CF_TINY, _CF_TINY, d)
    d = 1.0 / d
    h = d
    for m in range(1, _MAX_ITER):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = np.where(np.abs(d) < _CF_TINY, _CF_TINY, d)
        c = 1.0 + aa / c
        c = np.where(np.abs(c) < _CF_TINY, _CF_TINY, c)
        d = 1.0 / d
        h = h * d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = np.where(np.abs(d) < _CF_TINY, _CF_TINY, d)
        c = 1.0 + aa / c
        c = np.where(np.abs(c) < _CF_TINY, _CF_TINY, c)
        d = 1.0 / d
        delta = d * c
        h = h * delta
        if m % _CHUNK == 0 and _converged(np.abs(delta - 1.0) <= _CF_EPS):
            break
    return h


def _betainc_kernel(a, b, x):
    af, bf, xf = _f64(a), _f64(b), _f64(x)
    xp = array_namespace(af, bf, xf)
    af, bf, xf = xp.broadcast_arrays(af, bf, xf)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore", under="ignore"):
        ok = (af > 0) & (bf > 0) & (xf > 0) & (xf < 1)
        sa, sb = np.where(ok, af, 1.0), np.where(ok, bf, 1.0)
        sx = np.where(ok, xf, 0.5)
        flip = sx > (sa + 1.0) / (sa + sb + 2.0)
        ca, cb = np.where(flip, sb, sa), np.where(flip, sa, sb)
        cx = np.where(flip, 1.0 - sx, sx)
        lbt = (_f64(_lgamma_kernel(ca + cb)) - _f64(_lgamma_kernel(ca))
               - _f64(_lgamma_kernel(cb)) + ca * np.log(cx) + cb * np.log1p(-cx))
        front = np.exp(lbt) / ca
        val = front * _beta_cf(ca, cb, cx)
        out = np.where(flip, 1.0 - val, val)
        out = np.where(xf == 0, 0.0, np.where(xf == 1, 1.0, out))
        bad = (af <= 0) | (bf <= 0) | (xf < 0) | (xf > 1) | np.isnan(af + bf + xf)
        return _back(np.where(bad, np.nan, out), x)


def _igamma_dx(a, x):
    """``d/dx P(a, x) = exp(-x + (a - 1) log x - lgamma(a))``."""
    from .math_ops import log
    return exp(-x + (a - 1.0) * log(x) - lgamma(a))


def _igamma_grad(op, g):  # no gradient for a (TF's IgammaGradA is not built here)
    a, x = op.inputs
    return [None, unbroadcast(g * _igamma_dx(a, x), x)]


def _igammac_grad(op, g):
    a, x = op.inputs
    return [None, unbroadcast(-g * _igamma_dx(a, x), x)]


def _betainc_grad(op, g):  # TF's _BetaincGrad: no gradient for a and b
    from .math_ops import log
    from .math_ext import log1p
    a, b, x = op.inputs
    log_beta = lgamma(a) + lgamma(b) - lgamma(a + b)
    dx = exp((a - 1.0) * log(x) + (b - 1.0) * log1p(-x) - log_beta)
    return [None, None, unbroadcast(g * dx, x)]


def _betainc_shape(inputs, attrs):
    dt = check_same_dtype(inputs, "Betainc")
    if not dt.is_floating:
        from ...framework.errors import InvalidArgumentError
        raise InvalidArgumentError(f"Betainc does not support dtype {dt.name}")
    s = broadcast_shapes(broadcast_shapes(inputs[0]._shape, inputs[1]._shape), inputs[2]._shape)
    return [(dt, s)]


register_op("Igamma", _special_binary_shape("Igamma"), _igamma_kernel, grad=_igamma_grad)
register_op("Igammac", _special_binary_shape("Igammac"), _igammac_kernel, grad=_igammac_grad)
register_op("Betainc", _betainc_shape, _betainc_kernel, grad=_betainc_grad)
_OPS += ["Igamma", "Igammac", "Betainc"]


def igamma(a, x, name=None):
    """The regularised lower incomplete gamma function ``P(a, x)`` (the Gamma(a) CDF at
    ``x``), element-wise with broadcasting; the gradient flows to ``x`` only."""
    a, x = _convert_pair(a, x)
    return apply_op("Igamma", [a, x], name=name).outputs[0]


def igammac(a, x, name=None):
    """The regularised upper incomplete gamma function ``Q(a, x) = 1 - P(a, x)``, computed
    directly (accurate where ``P`` is near 1)."""
    a, x = _convert_pair(a, x)
    return apply_op("Igammac", [a, x], name=name).outputs[0]


def betainc(a, b, x, name=None):
    """The regularised incomplete beta function ``I_x(a, b)`` (the Beta(a, b) CDF at ``x``),
    element-wise with broadcasting; the gradient flows to ``x`` only, as TF's."""
    from ...framework.tensor_conversion import convert_to_tensor
    x = convert_to_tensor(x)
    a = convert_to_tensor(a, dtype=x.dtype) if not hasattr(a, "op") else a
    b = convert_to_tensor(b, dtype=x.dtype) if not hasattr(b, "op") else b
    return apply_op("Betainc", [a, b, x], name=name).outputs[0]


