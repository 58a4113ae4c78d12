"""Inverse trigonometric and hyperbolic functions and special functions (TF 1.x's ``tf.acos`` …
``tf.atanh``, ``tf.atan2``, ``tf.erf``, ``tf.erfc``, ``tf.lgamma``, ``tf.digamma``,
``tf.math.polygamma``, ``tf.math.zeta``, ``tf.math.lbeta``, ``tf.log_sigmoid``, ``tf.rint``),
with their gradients.

The special functions are vectorised NumPy code (no SciPy, no per-element Python), evaluated in
float64 and rounded to the input's dtype, written against the array namespace of their inputs
so one source serves CPU and GPU devices:

* ``erf``/``erfc``: the series ``erf(x) = 2/sqrt(pi) exp(-x^2) sum 2^n x^(2n+1) / (2n+1)!!``
  (positive terms, no cancellation) for ``|x| < 2.5``, the continued fraction of ``erfc``
  (evaluated backwards, fixed depth) beyond;
* ``lgamma``: Lanczos' approximation (g = 7, 9 terms), reflected below 1/2;
* ``digamma``: the recurrence up to ``x + 10`` then the asymptotic series, reflected below 1/2;
* ``zeta`` (Hurwitz) and ``polygamma``: Euler-Maclaurin summation as Cephes' ``zeta``, with
  Bernoulli numbers computed exactly at import.

Edge values follow TF: ``lgamma`` is ``inf`` at non-positive integers, ``digamma`` NaN there,
``zeta(x, q)`` is ``inf`` at ``x == 1`` and NaN for ``x < 1``, ``polygamma`` of a non-integer
order NaN.

>>> import tensorvm as tv
>>> with tv.Session() as s:
...     [round(float(v), 6) for v in s.run([tv.erf(1.0), tv.lgamma(0.5), tv.digamma(1.0)])]
[0.842701, 0.572365, -0.577216]
"""
from __future__ import annotations

import math
from fractions import Fraction
from types import SimpleNamespace

import numpy as np

from ...vm.kernels.array_api import array_namespace, to_host
from ...framework.op_def_library import apply_op
from ...framework.op_registry import get_op_def, register_kernel, register_op
from ..common import _convert_pair, broadcast_shapes, check_same_dtype, def_binary, def_unary
from ..common import unbroadcast
from .math_ops import exp, negative, sqrt, square

__all__ = ["acos", "asin", "atan", "atan2", "sinh", "cosh", "acosh", "asinh", "atanh", "erf",
           "erfc", "lgamma", "digamma", "polygamma", "zeta", "lbeta", "log_sigmoid", "rint"]

_OPS: list[str] = []  # op types registered here: each gets its CPU kernel as its GPU kernel


def _is_float(dt):
    return dt.is_floating


def _quiet(ufunc):
    """``ufunc`` without NumPy's warnings on values outside its domain (NaN, as TF gives)."""
    def kernel(*xs):
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            return ufunc(*xs)
    kernel.__name__ = ufunc.__name__
    return kernel


def _unary(op_type, kernel, grad, differentiable=True):
    _OPS.append(op_type)
    if isinstance(kernel, np.ufunc):
        kernel = _quiet(kernel)
    return def_unary(op_type, kernel, grad, allowed=_is_float, differentiable=differentiable)


# ---- inverse trigonometric and hyperbolic functions (NumPy ufuncs) ---------------------------
acos = _unary("Acos", np.arccos, lambda op, g: [-g / sqrt(1 - square(op.inputs[0]))])
asin = _unary("Asin", np.arcsin, lambda op, g: [g / sqrt(1 - square(op.inputs[0]))])
atan = _unary("Atan", np.arctan, lambda op, g: [g / (1 + square(op.inputs[0]))])
sinh = _unary("Sinh", np.sinh, lambda op, g: [g * cosh(op.inputs[0])])
cosh = _unary("Cosh", np.cosh, lambda op, g: [g * sinh(op.inputs[0])])
asinh = _unary("Asinh", np.arcsinh, lambda op, g: [g / cosh(op.outputs[0])])
acosh = _unary("Acosh", np.arccosh, lambda op, g: [g / sinh(op.outputs[0])])
atanh = _unary("Atanh", np.arctanh, lambda op, g: [g / (1 - square(op.inputs[0]))])
rint = _unary("Rint", np.rint, None, differentiable=False)
rint.__doc__ = "Element-wise rounding to the nearest integer, half to even (``np.rint``)."


def _atan2_grad(op, g):
    y, x = op.inputs
    inv = g / (square(x) + square(y))
    return [unbroadcast(x * inv, y), unbroadcast(-y * inv, x)]


_OPS.append("Atan2")
atan2 = def_binary("Atan2", _quiet(np.arctan2), _atan2_grad, allowed=_is_float)
atan2.__doc__ = ("``atan(y / x)`` in the quadrant of ``(x, y)``, element-wise: "
                 "``tv.atan2(y, x)`` (TF's argument order).")


# ---- special functions: float64 evaluation ----------------------------------------------------
def _f64(x):
    return x.astype(np.float64, copy=False)


def _back(out, like):
    return out.astype(like.dtype, copy=False)


_SQRT_PI = 1.7724538509055160273
_ERF_SERIES_TERMS = 40  # enough for |x| < 2.5 (float64)
_ERFC_CF_DEPTH = 40  # enough for x >= 2.5
_ERF_SPLIT = 2.5


def _erf_series(x):
    """``erf(x)`` for ``|x| < 2.5``: positive terms, so no cancellation."""
    x2 = x * x
    term = total = x
    for n in range(1, _ERF_SERIES_TERMS):
        term = term * (2.0 * x2 / (2 * n + 1))
        total = total + term
    return (2.0 / _SQRT_PI) * np.exp(-x2) * total


def _erfc_cf(x):
    """``erfc(x)`` for ``x >= 2.5``: the continued fraction
    ``exp(-x^2)/sqrt(pi) / (x + (1/2)/(x + 1/(x + (3/2)/(x + ...))))``, evaluated backwards."""
    t = x
    for k in range(_ERFC_CF_DEPTH, 0, -1):
        t = x + (0.5 * k) / t
    with np.errstate(under="ignore"):
        return np.exp(-x * x) / (_SQRT_PI * t)


def _erf_parts(x):
    """``(small, erf of the small part, erfc(|x|) of the large part)`` for float64 ``x``.
    On the host each value goes through one of the two expansions only; on a device both
    run over the whole array (selecting a subset would make the host wait)."""
    ax = np.abs(x)
    small = ax < _ERF_SPLIT
    if type(x) is np.ndarray and x.ndim:
        e = np.zeros_like(x)
        c = np.zeros_like(x)
        e[small] = _erf_series(x[small])
        large = ~small & ~np.isnan(x)
        c[large] = _erfc_cf(ax[large])
        c[np.isnan(x)] = np.nan
        return small, e, c
    xs = np.where(small, x, 0.0)
    xl = np.where(small, _ERF_SPLIT, ax)
    return small, _erf_series(xs), _erfc_cf(xl)


# float32 (and float16) inputs: two polynomial fits of the float64 expansions above, made at
# import (Chebyshev interpolation, then Horner's rule in the mapped variable) —
# ``erf(x) = x h(x^2)`` for ``|x| < 2`` and ``erfc(x) = g(1/x) exp(-x^2) / x`` for
# ``2 <= x < 10`` (``erfc`` underflows float32 beyond) — about 25 operations a value instead of
# 160, accurate to ~1e-11 relative, far below float32's rounding.
_FAST_DEGREE = 11


def _poly_fit(fn, lo, hi, deg=_FAST_DEGREE):
    k = np.arange(400)
    u = np.cos(np.pi * (k + 0.5) / 400)  # Chebyshev nodes on [-1, 1]
    cheb = np.polynomial.chebyshev.chebfit(u, fn(lo + (u + 1) * (hi - lo) / 2), deg)
    return tuple(float(c) for c in np.polynomial.chebyshev.cheb2poly(cheb)), lo, hi


def _poly_eval(fit, x):
    """Horner's rule in ``u``, ``x`` mapped from ``[lo, hi]`` to ``[-1, 1]`` (ufuncs only)."""
    c, lo, hi = fit
    u = (2.0 * x - (lo + hi)) / (hi - lo)
    p = u * c[-1] + c[-2]
    for ck in c[-3::-1]:
        p *= u
        p += ck
    return p


def _erf_h(y):
    x = np.sqrt(y)
    return np.where(x > 0, _erf_series(np.where(x > 0, x, 1.0)) / np.where(x > 0, x, 1.0),
                    2.0 / _SQRT_PI)


def _erfc_g(t):
    x = 1.0 / t
    small, e, c = _erf_parts(x)
    ec = np.where(small, 1.0 - e, c)
    return ec * np.exp(x * x) * x


_ERF_FIT_H = _poly_fit(_erf_h, 0.0, 4.0)
_ERFC_FIT_G = _poly_fit(_erfc_g, 0.1, 0.5)
_ERF_FAST_SPLIT = 2.0


def _erfc_large_fast(ax):
    xl = np.minimum(ax, 10.0)
    with np.errstate(under="ignore"):
        c = _poly_eval(_ERFC_FIT_G, 1.0 / xl) * np.exp(-xl * xl) / xl
    return np.where(ax >= 10.0, 0.0, c)


def _erf_parts_fast(x):
    """:func:`_erf_parts` by the fits (for float32 precision): split at 2, ``erfc`` 0 past 10;
    on the host each value goes through one fit only."""
    ax = np.abs(x)
    small = ax < _ERF_FAST_SPLIT
    if type(x) is np.ndarray and x.ndim:
        e = np.zeros_like(x)
        c = np.zeros_like(x)
        xs = x[small]
        e[small] = xs * _poly_eval(_ERF_FIT_H, xs * xs)
        large = ~small & ~np.isnan(x)
        c[large] = _erfc_large_fast(ax[large])
        c[np.isnan(x)] = np.nan
        return small, e, c
    xs = np.where(small, x, 0.0)
    e = xs * _poly_eval(_ERF_FIT_H, xs * xs)
    c = _erfc_large_fast(np.where(small, _ERF_FAST_SPLIT, ax))
    return small, e, np.where(np.isnan(x), np.nan, c)


def _parts_for(x, like):
    return _erf_parts_fast(x) if like.dtype.itemsize <= 4 else _erf_parts(x)


def _erf_kernel(x):
    xf = _f64(x)
    small, e, c = _parts_for(xf, x)
    out = np.where(small, e, np.sign(xf) * (1.0 - c))
    return _back(out, x)


def _erfc_kernel(x):
    xf = _f64(x)
    small, e, c = _parts_for(xf, x)
    out = np.where(small, 1.0 - e, np.where(xf > 0, c, 2.0 - c))
    return _back(out, x)


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


# ---- the ops ------------------------------------------------------------------------------------
def _erf_grad(op, g):
    x = op.inputs[0]
    return [g * (2.0 / _SQRT_PI) * exp(-square(x))]


erf = _unary("Erf", _erf_kernel, _erf_grad)
erf.__doc__ = "The error function ``2/sqrt(pi) * integral_0^x exp(-t^2) dt``, element-wise."
erfc = _unary("Erfc", _erfc_kernel, lambda op, g: [-_erf_grad(op, g)[0]])
erfc.__doc__ = "The complementary error function ``1 - erf(x)`` (accurate for large x)."
lgamma = _unary("Lgamma", _lgamma_kernel, lambda op, g: [g * digamma(op.inputs[0])])
lgamma.__doc__ = "``log(|Gamma(x)|)``, element-wise (``inf`` at non-positive integers)."
digamma = _unary("Digamma", _digamma_kernel, lambda op, g: [g * _polygamma(op.inputs[0], 1)])
digamma.__doc__ = "``psi(x) = d/dx lgamma(x)``, element-wise (NaN at non-positive integers)."


def _special_binary_shape(op_type):
    def shape_fn(inputs, attrs):
        dt = check_same_dtype(inputs, op_type)
        if not dt.is_floating:
            from ...framework.errors import InvalidArgumentError
            raise InvalidArgumentError(f"{op_type} does not support dtype {dt.name}")
        return [(dt, broadcast_shapes(inputs[0]._shape, inputs[1]._shape))]
    return shape_fn


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


def log_sigmoid(x, name=None):
    """``log(sigmoid(x)) = -softplus(-x)``, computed stably (TF's ``tf.log_sigmoid``)."""
    from ...framework.tensor_conversion import convert_to_tensor
    from ..nn.nn_ops import softplus
    x = convert_to_tensor(x)
    return negative(softplus(negative(x)), name=name or "LogSigmoid")


# ---- inverse error functions, nextafter ------------------------------------------------------
_WINITZKI_A = 0.147


def _erfcinv_pos(q, fast=False):
    """``x >= 0`` with ``erfc(x) = q`` for ``q`` in ``(0, 1]``: Winitzki's approximation,
    with ``log(1 - y^2)`` taken as ``log(q) + log(2 - q)`` (no cancellation near ``q = 0``),
    then Newton's method on ``log(erfc(x)) = log(q)``."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore", under="ignore"):
        lq = np.log(q)
        big_l = lq + np.log(2.0 - q)
        t = 2.0 / (np.pi * _WINITZKI_A) + 0.5 * big_l
        x = np.sqrt(np.maximum(np.sqrt(t * t - big_l / _WINITZKI_A) - t, 0.0))
        parts = _erf_parts_fast if fast else _erf_parts
        for _ in range(4):
            small, e, c = parts(x)
            ec = np.where(small, 1.0 - e, c)
            # g(x) = log(erfc(x)) - log(q), g'(x) = -2/sqrt(pi) exp(-x^2) / erfc(x)
            g = np.log(ec) - lq
            dg = -(2.0 / _SQRT_PI) * np.exp(-x * x) / ec
            step = np.where(np.isfinite(g) & (dg != 0), g / dg, 0.0)
            x = np.maximum(x - step, 0.0)
    return x


def _erfinv_kernel(y):
    yf = _f64(y)
    with np.errstate(invalid="ignore"):
        q = 1.0 - np.abs(yf)
        x = np.sign(yf) * _erfcinv_pos(np.where((q > 0) & (q <= 1), q, 1.0),
                                       fast=y.dtype.itemsize <= 4)
        x = np.where(q == 0, np.sign(yf) * np.inf, x)
        x = np.where((q < 0) | np.isnan(yf), np.nan, x)
    return _back(x, y)


def _erfcinv_f64(z, fast=False):
    with np.errstate(invalid="ignore"):
        low = z <= 1.0
        q = np.where(low, z, 2.0 - z)
        x = _erfcinv_pos(np.where((q > 0) & (q <= 1), q, 1.0), fast=fast)
        x = np.where(low, x, -x)
        x = np.where(z == 0, np.inf, np.where(z == 2, -np.inf, x))
        return np.where((z < 0) | (z > 2) | np.isnan(z), np.nan, x)


def _ndtri_kernel(p):
    pf = _f64(p)
    return _back(-np.sqrt(2.0) * _erfcinv_f64(2.0 * pf, fast=p.dtype.itemsize <= 4), p)


def _erfinv_grad(op, g):
    return [g * (_SQRT_PI / 2.0) * exp(square(op.outputs[0]))]


def _ndtri_grad(op, g):
    return [g * np.sqrt(2.0 * np.pi) * exp(0.5 * square(op.outputs[0]))]


erfinv = _unary("Erfinv", _erfinv_kernel, _erfinv_grad)
erfinv.__doc__ = "The inverse of ``erf`` on ``[-1, 1]`` (``+-inf`` at ``+-1``, NaN outside)."
ndtri = _unary("Ndtri", _ndtri_kernel, _ndtri_grad)
ndtri.__doc__ = ("The inverse of the standard normal CDF on ``[0, 1]``: "
                 "``-sqrt(2) * erfcinv(2p)`` (accurate for tiny ``p``).")


def erfcinv(x, name=None):
    """The inverse of ``erfc`` on ``[0, 2]``: ``-ndtri(x / 2) / sqrt(2)``."""
    from ...framework.graph import get_default_graph
    from ...framework.tensor_conversion import convert_to_tensor
    with get_default_graph().name_scope(name or "erfcinv"):
        x = convert_to_tensor(x)
        return negative(ndtri(x * 0.5)) * (1.0 / np.sqrt(2.0))


def _nextafter_kernel(x1, x2):
    return np.nextafter(x1, x2)


_OPS.append("NextAfter")
nextafter = def_binary("NextAfter", _nextafter_kernel, allowed=_is_float, differentiable=False)
nextafter.__doc__ = "The next representable value after ``x1`` towards ``x2``, element-wise."

__all__ += ["erfinv", "ndtri", "erfcinv", "nextafter"]


# ---- complex numbers: complex, real, imag, conj, angle -----------------------------------------
_COMPLEX_OF = {"float32": "complex64", "float64": "complex128"}
_REAL_OF = {"complex64": "float32", "complex128": "float64"}


def _complex_shape(inputs, attrs):
    from ...framework import dtypes as _dtypes
    re, im = inputs
    if re.dtype != im.dtype:
        from ...framework.errors import InvalidArgumentError
        raise InvalidArgumentError(f"complex: real and imag must have one dtype, got "
                                   f"{re.dtype.name} and {im.dtype.name}")
    if re.dtype.name not in _COMPLEX_OF:
        from ...framework.errors import InvalidArgumentError
        raise InvalidArgumentError(f"complex: real and imag must be float32 or float64, got "
                                   f"{re.dtype.name}")
    return [(_dtypes.as_dtype(_COMPLEX_OF[re.dtype.name]),
             broadcast_shapes(re._shape, im._shape))]


def _complex_kernel(re, im):
    out = re + 1j * im
    return out.astype(np.complex64 if re.dtype == np.float32 else np.complex128, copy=False)


def _to_real_shape(op_type):
    def shape_fn(inputs, attrs):
        from ...framework import dtypes as _dtypes
        x = inputs[0]
        if not x.dtype.is_complex:
            from ...framework.errors import InvalidArgumentError
            raise InvalidArgumentError(f"{op_type} needs a complex tensor, got {x.dtype.name}")
        return [(_dtypes.as_dtype(_REAL_OF[x.dtype.name]), x._shape)]
    return shape_fn


def _real_kernel(x):
    return np.real(x).copy()


def _imag_kernel(x):
    return np.imag(x).copy()


def _angle_kernel(x):
    return np.angle(x).astype(np.real(x).dtype, copy=False)


def _conj_kernel(x):
    return np.conj(x)


def _zero_of(g):
    from ..array.array_ops import zeros_like
    return zeros_like(g)


def _angle_grad(op, g):  # TF's _AngleGrad
    x = op.inputs[0]
    z = 1.0 / complex(imag(x), real(x))
    return [-complex(g, _zero_of(g)) * z]


register_op("Complex", _complex_shape, _complex_kernel,
            grad=lambda op, g: [unbroadcast(real(g), op.inputs[0]),
                                unbroadcast(imag(g), op.inputs[1])])
register_op("Real", _to_real_shape("Real"), _real_kernel,
            grad=lambda op, g: [complex(g, _zero_of(g))])
register_op("Imag", _to_real_shape("Imag"), _imag_kernel,
            grad=lambda op, g: [complex(_zero_of(g), g)])
register_op("Angle", _to_real_shape("Angle"), _angle_kernel, grad=_angle_grad)
register_op("Conj", lambda inputs, attrs: [(inputs[0].dtype, inputs[0]._shape)], _conj_kernel,
            grad=lambda op, g: [conj(g)])
_OPS += ["Complex", "Real", "Imag", "Angle", "Conj"]


def complex(real, imag, name=None):
    """``real + 1j * imag`` element-wise with broadcasting: float32 parts give complex64,
    float64 parts complex128 (TF's ``tf.complex``)."""
    re, im = _convert_pair(real, imag)
    return apply_op("Complex", [re, im], name=name).outputs[0]


def real(input, name=None):
    """The real parts of a complex tensor; a real tensor as it is (TF's ``tf.real``)."""
    from ...framework.tensor_conversion import convert_to_tensor
    x = convert_to_tensor(input)
    if not x.dtype.is_complex:
        return x
    return apply_op("Real", [x], name=name).outputs[0]


def imag(input, name=None):
    """The imaginary parts of a complex tensor; zeros for a real tensor."""
    from ...framework.tensor_conversion import convert_to_tensor
    x = convert_to_tensor(input)
    if not x.dtype.is_complex:
        return _zero_of(x)
    return apply_op("Imag", [x], name=name).outputs[0]


def angle(input, name=None):
    """The argument of each complex number (``atan2(imag, real)``); for a real tensor ``pi``
    where it is negative, else 0 (TF's ``tf.math.angle``)."""
    from ...framework.tensor_conversion import convert_to_tensor
    from .math_ext import less, where
    x = convert_to_tensor(input)
    if not x.dtype.is_complex:
        z = _zero_of(x)
        return where(less(x, z), z + np.pi, z, name=name)
    return apply_op("Angle", [x], name=name).outputs[0]


def conj(x, name=None):
    """The complex conjugate; a real tensor as it is (TF's ``tf.conj``)."""
    from ...framework.tensor_conversion import convert_to_tensor
    x = convert_to_tensor(x)
    if not x.dtype.is_complex:
        return x
    return apply_op("Conj", [x], name=name).outputs[0]


def to_complex64(x, name="ToComplex64"):
    """``x`` cast to complex64 (TF 1.x's deprecated ``tf.to_complex64``)."""
    from ...framework import dtypes as _dtypes
    from .math_ops import cast
    return cast(x, _dtypes.complex64, name=name)


def to_complex128(x, name="ToComplex128"):
    """``x`` cast to complex128 (TF 1.x's deprecated ``tf.to_complex128``)."""
    from ...framework import dtypes as _dtypes
    from .math_ops import cast
    return cast(x, _dtypes.complex128, name=name)


__all__ += ["complex", "real", "imag", "angle", "conj", "to_complex64", "to_complex128"]


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


__all__ += ["igamma", "igammac", "betainc"]


# ---- modified Bessel functions of the first kind: i0, i1 and their scaled forms ----------------
_BESSEL_SPLIT = 30.0
_BESSEL_SERIES_TERMS = 100
_BESSEL_ASYMPTOTIC_TERMS = 20


def _bessel_scaled(x, nu: int):
    """``exp(-|x|) I_nu(|x|)`` for ``nu`` 0 or 1, float64: the power series (positive terms)
    up to ``|x| = 30``, the asymptotic series ``1/sqrt(2 pi x) sum (-1)^k a_k(nu) / x^k``
    beyond."""
    ax = np.abs(x)
    small = ax <= _BESSEL_SPLIT
    xs = np.where(small, ax, 0.0)
    q = xs * xs / 4.0
    term = (xs / 2.0) if nu else np.ones_like(xs)
    total = term
    for k in range(1, _BESSEL_SERIES_TERMS):
        term = term * q / (k * (k + nu))
        total = total + term
    with np.errstate(over="ignore", under="ignore"):
        series = total * np.exp(-xs)
    xl = np.where(small, _BESSEL_SPLIT + 1.0, ax)
    mu = 4.0 * nu * nu
    a = np.ones_like(xl)
    acc = a
    for k in range(1, _BESSEL_ASYMPTOTIC_TERMS):
        a = a * -(mu - (2 * k - 1) ** 2) / (k * 8.0 * xl)
        acc = acc + a
    asym = acc / np.sqrt(2.0 * np.pi * xl)
    return np.where(small, series, asym)


def _bessel_kernel(nu: int, scaled: bool):
    def kernel(x):
        xf = _f64(x)
        out = _bessel_scaled(xf, nu)
        if not scaled:
            with np.errstate(over="ignore", invalid="ignore"):
                out = out * np.exp(np.abs(xf))
        if nu:
            out = np.sign(xf) * out  # I_1 is odd
        out = np.where(np.isnan(xf), np.nan, out)
        return _back(out, x)
    kernel.__name__ = f"_bessel_i{nu}{'e' if scaled else ''}_kernel"
    return kernel


def _i1_over_x(x, i1, i0):
    """``I_1(x) / x`` with its limit 1/2 at 0 (``i1``/``i0`` scaled alike)."""
    from ..array.array_ops import ones_like
    from .math_ext import equal, where
    zero = equal(x, 0.0 * x)
    safe = where(zero, ones_like(x), x)
    return where(zero, 0.5 * i0, i1 / safe)


bessel_i0 = _unary("BesselI0", _bessel_kernel(0, False),
                   lambda op, g: [g * bessel_i1(op.inputs[0])])
bessel_i0e = _unary("BesselI0e", _bessel_kernel(0, True),
                    lambda op, g: [g * (bessel_i1e(op.inputs[0])
                                        - _sign(op.inputs[0]) * op.outputs[0])])
bessel_i1 = _unary("BesselI1", _bessel_kernel(1, False),
                   lambda op, g: [g * (bessel_i0(op.inputs[0]) - _i1_over_x(
                       op.inputs[0], op.outputs[0], bessel_i0(op.inputs[0])))])
bessel_i1e = _unary("BesselI1e", _bessel_kernel(1, True),
                    lambda op, g: [g * (bessel_i0e(op.inputs[0])
                                        - _sign(op.inputs[0]) * op.outputs[0]
                                        - _i1_over_x(op.inputs[0], op.outputs[0],
                                                     bessel_i0e(op.inputs[0])))])
bessel_i0.__doc__ = "The modified Bessel function of the first kind of order 0, ``I_0(x)``."
bessel_i0e.__doc__ = "``exp(-|x|) I_0(x)``, finite for large ``|x|``."
bessel_i1.__doc__ = "The modified Bessel function of the first kind of order 1, ``I_1(x)``."
bessel_i1e.__doc__ = "``exp(-|x|) I_1(x)``, finite for large ``|x|``."


def _sign(x):
    from .math_ext import sign
    return sign(x)


__all__ += ["bessel_i0", "bessel_i0e", "bessel_i1", "bessel_i1e"]


# ---- FFTs (TF's tf.fft / tf.spectral): over the innermost 1, 2 or 3 dimensions ----------------
def _fft_axes(rank: int):
    return tuple(range(-rank, 0))


def _fft_kernel(rank: int, inverse: bool):
    def kernel(x):
        xp = array_namespace(x)
        f = xp.fft.ifftn if inverse else xp.fft.fftn
        return f(x, axes=_fft_axes(rank)).astype(x.dtype, copy=False)
    kernel.__name__ = f"_{'i' if inverse else ''}fft{rank}d_kernel"
    return kernel


def _fft_shape(op_type, rank):
    def shape_fn(inputs, attrs):
        x = inputs[0]
        if not x.dtype.is_complex:
            from ...framework.errors import InvalidArgumentError
            raise InvalidArgumentError(f"{op_type} needs a complex64 or complex128 tensor, got "
                                       f"{x.dtype.name}")
        if x._shape is not None and len(x._shape) < rank:
            from ...framework.errors import InvalidArgumentError
            raise InvalidArgumentError(f"{op_type}: input must have rank at least {rank}, got "
                                       f"shape {list(x._shape)}")
        return [(x.dtype, x._shape)]
    return shape_fn


_FFT_NAMES = {1: ("FFT", "IFFT"), 2: ("FFT2D", "IFFT2D"), 3: ("FFT3D", "IFFT3D")}


def _points(x, rank):
    """The number of points an FFT over the last ``rank`` axes of ``x`` transforms, as a
    complex scalar of ``x``'s dtype."""
    from ...framework import dtypes as _dtypes
    from ..array.array_ops import shape as _shape
    from .math_ext import reduce_prod
    from .math_ops import cast
    n = reduce_prod(_shape(x)[-rank:])
    return complex(cast(n, _dtypes.float32 if x.dtype == _dtypes.complex64 else _dtypes.float64),
                   cast(n * 0, _dtypes.float32 if x.dtype == _dtypes.complex64
                        else _dtypes.float64))


for _rank, (_f, _i) in _FFT_NAMES.items():
    register_op(_f, _fft_shape(_f, _rank), _fft_kernel(_rank, False),
                grad=lambda op, g, r=_rank: [_ifft_n(g, r) * _points(g, r)])
    register_op(_i, _fft_shape(_i, _rank), _fft_kernel(_rank, True),
                grad=lambda op, g, r=_rank: [_fft_n(g, r) / _points(g, r)])
    _OPS += [_f, _i]
del _rank, _f, _i


def _fft_n(x, rank, name=None):
    from ...framework.tensor_conversion import convert_to_tensor
    return apply_op(_FFT_NAMES[rank][0], [convert_to_tensor(x)], name=name).outputs[0]


def _ifft_n(x, rank, name=None):
    from ...framework.tensor_conversion import convert_to_tensor
    return apply_op(_FFT_NAMES[rank][1], [convert_to_tensor(x)], name=name).outputs[0]


def fft(input, name=None):
    """The discrete Fourier transform over the innermost dimension of a complex tensor."""
    return _fft_n(input, 1, name)


def ifft(input, name=None):
    """The inverse DFT over the innermost dimension (``1/n`` scaled, as NumPy and TF)."""
    return _ifft_n(input, 1, name)


def fft2d(input, name=None):
    """The 2-D DFT over the innermost two dimensions of a complex tensor."""
    return _fft_n(input, 2, name)


def ifft2d(input, name=None):
    """The inverse 2-D DFT over the innermost two dimensions."""
    return _ifft_n(input, 2, name)


def fft3d(input, name=None):
    """The 3-D DFT over the innermost three dimensions of a complex tensor."""
    return _fft_n(input, 3, name)


def ifft3d(input, name=None):
    """The inverse 3-D DFT over the innermost three dimensions."""
    return _ifft_n(input, 3, name)


# real-input FFTs: rfft (the n//2 + 1 non-negative frequencies of the last axis) and irfft
_RFFT_NAMES = {1: ("RFFT", "IRFFT"), 2: ("RFFT2D", "IRFFT2D"), 3: ("RFFT3D", "IRFFT3D")}


def _fit(x, shape, xp):
    """``x`` cropped or zero-padded in its last ``len(shape)`` axes to ``shape``."""
    k = len(shape)
    x = x[(Ellipsis,) + tuple(slice(0, n) for n in shape)]
    pad = [(0, 0)] * (x.ndim - k) + [(0, n - d) for n, d in zip(shape, x.shape[-k:])]
    return xp.pad(x, pad) if any(p for _, p in pad) else x


def _rfft_kernel(rank):
    def kernel(x, fft_length):
        xp = array_namespace(x)
        cdt = np.complex64 if x.dtype == np.float32 else np.complex128
        x = _fit(x, fft_length, xp)
        return xp.fft.rfftn(x, s=fft_length, axes=_fft_axes(rank)).astype(cdt, copy=False)
    kernel.__name__ = f"_rfft{rank}d_kernel"
    return kernel


def _irfft_kernel(rank):
    def kernel(x, fft_length):
        xp = array_namespace(x)
        rdt = np.float32 if x.dtype == np.complex64 else np.float64
        half = tuple(fft_length[:-1]) + (fft_length[-1] // 2 + 1,)
        x = _fit(x, half, xp)
        return xp.fft.irfftn(x, s=fft_length, axes=_fft_axes(rank)).astype(rdt, copy=False)
    kernel.__name__ = f"_irfft{rank}d_kernel"
    return kernel


def _rfft_shape(op_type, rank, inverse):
    def shape_fn(inputs, attrs):
        from ...framework import dtypes as _dtypes
        from ...framework.errors import InvalidArgumentError
        x = inputs[0]
        n = tuple(attrs["fft_length"])
        if inverse and not x.dtype.is_complex:
            raise InvalidArgumentError(f"IRFFT requires tv.complex64 or tv.complex128 inputs, "
                                       f"got: {x.dtype.name}")
        if not inverse and x.dtype not in (_dtypes.float32, _dtypes.float64):
            raise InvalidArgumentError(f"RFFT requires tv.float32 or tv.float64 inputs, got: "
                                       f"{x.dtype.name}")
        if x._shape is not None and len(x._shape) < rank:
            raise InvalidArgumentError(f"{op_type}: input must have rank at least {rank}")
        if inverse:
            dt = _dtypes.float32 if x.dtype == _dtypes.complex64 else _dtypes.float64
            tail = n
        else:
            dt = _dtypes.complex64 if x.dtype == _dtypes.float32 else _dtypes.complex128
            tail = n[:-1] + (n[-1] // 2 + 1,)
        return [(dt, None if x._shape is None else tuple(x._shape[:-rank]) + tail)]
    return shape_fn


def _rfft_grad(op, g):
    """``d/dx`` of ``rfftn(x)``: the real part of ``N * ifftn`` of the half spectrum's
    gradient zero-padded to the full length, cropped or padded back to ``x``'s size."""
    rank = len(op.attrs["fft_length"])
    n = tuple(op.attrs["fft_length"])
    x = op.inputs[0]
    full = apply_op("_FitLast", [g], {"shape": n}).outputs[0]
    back = real(_ifft_n(full, rank) * _points(full, rank))
    return [apply_op("_FitLastLike", [back, x], {"rank": rank}).outputs[0]]


def _irfft_grad(op, g):
    """``d/dY`` of ``irfftn(Y)``: ``rfftn(g) * c / N`` with ``c`` 1 on the last axis' first
    (and, for an even length, last) frequency and 2 elsewhere; fitted back to ``Y``'s size."""
    rank = len(op.attrs["fft_length"])
    n = tuple(op.attrs["fft_length"])
    y = op.inputs[0]
    spec = apply_op(_RFFT_NAMES[rank][0], [g], {"fft_length": n}).outputs[0]
    half = n[-1] // 2 + 1
    c = np.full(half, 2.0)
    c[0] = 1.0
    if n[-1] % 2 == 0:
        c[-1] = 1.0
    c = c / float(np.prod(n))
    from ..array.array_ops import constant
    scale = constant(c.astype(np.complex64 if spec.dtype.name == "complex64"
                              else np.complex128))
    return [apply_op("_FitLastLike", [spec * scale, y], {"rank": rank}).outputs[0]]


def _fit_last_shape(inputs, attrs):
    x = inputs[0]
    n = tuple(attrs["shape"])
    return [(x.dtype, None if x._shape is None else tuple(x._shape[:-len(n)]) + n)]


def _fit_last_kernel(x, shape):
    return _fit(x, tuple(shape), array_namespace(x))


def _fit_like_kernel(x, like, rank):
    return _fit(x, tuple(like.shape[-rank:]), array_namespace(x))


register_op("_FitLast", _fit_last_shape, _fit_last_kernel, differentiable=False)
register_op("_FitLastLike", lambda inputs, attrs: [(inputs[0].dtype, inputs[1]._shape)],
            _fit_like_kernel, differentiable=False, shape_only=(1,))
_OPS += ["_FitLast", "_FitLastLike"]
for _rank, (_f, _i) in _RFFT_NAMES.items():
    register_op(_f, _rfft_shape(_f, _rank, False), _rfft_kernel(_rank), grad=_rfft_grad)
    register_op(_i, _rfft_shape(_i, _rank, True), _irfft_kernel(_rank), grad=_irfft_grad)
    _OPS += [_f, _i]
del _rank, _f, _i


def _fft_length(x, fft_length, rank, inverse):
    from ..common import static_ints
    if fft_length is not None:
        return static_ints(fft_length, "fft_length", "RFFT")
    s = x._shape
    if s is None or len(s) < rank or None in s[-rank:]:
        from ...framework.errors import InvalidArgumentError
        raise InvalidArgumentError("RFFT: fft_length must be given for inputs whose innermost "
                                   "dimensions are unknown when the graph is built")
    n = list(s[-rank:])
    if inverse:
        n[-1] = max(0, 2 * (n[-1] - 1))
    return tuple(int(d) for d in n)


def _rfft_n(x, fft_length, rank, name):
    from ...framework.tensor_conversion import convert_to_tensor
    x = convert_to_tensor(x)
    n = _fft_length(x, fft_length, rank, False)
    return apply_op(_RFFT_NAMES[rank][0], [x], {"fft_length": n}, name=name).outputs[0]


def _irfft_n(x, fft_length, rank, name):
    from ...framework.tensor_conversion import convert_to_tensor
    x = convert_to_tensor(x)
    n = _fft_length(x, fft_length, rank, True)
    return apply_op(_RFFT_NAMES[rank][1], [x], {"fft_length": n}, name=name).outputs[0]


def rfft(input_tensor, fft_length=None, name=None):
    """The DFT of a real signal over its innermost dimension, cropped or zero-padded to
    ``fft_length``: its ``fft_length // 2 + 1`` non-negative frequencies."""
    return _rfft_n(input_tensor, fft_length, 1, name)


def irfft(input_tensor, fft_length=None, name=None):
    """The real signal of length ``fft_length`` (default ``2 * (n - 1)``) whose
    :func:`rfft` is ``input_tensor``."""
    return _irfft_n(input_tensor, fft_length, 1, name)


def rfft2d(input_tensor, fft_length=None, name=None):
    """:func:`rfft` over the innermost two dimensions."""
    return _rfft_n(input_tensor, fft_length, 2, name)


def irfft2d(input_tensor, fft_length=None, name=None):
    """:func:`irfft` over the innermost two dimensions."""
    return _irfft_n(input_tensor, fft_length, 2, name)


def rfft3d(input_tensor, fft_length=None, name=None):
    """:func:`rfft` over the innermost three dimensions."""
    return _rfft_n(input_tensor, fft_length, 3, name)


def irfft3d(input_tensor, fft_length=None, name=None):
    """:func:`irfft` over the innermost three dimensions."""
    return _irfft_n(input_tensor, fft_length, 3, name)


__all__ += ["fft", "ifft", "fft2d", "ifft2d", "fft3d", "ifft3d"]


# ---- tv.signal's framing, windows and STFT ---------------------------------------------------
def frame(signal, frame_length, frame_step, pad_end=False, pad_value=0, axis=-1, name=None):
    """Overlapping frames of ``frame_length`` samples every ``frame_step`` along ``axis``
    (that axis becomes ``[frames, frame_length]``); ``pad_end`` pads the end with
    ``pad_value`` so that every frame step starts a frame (TF's ``tf.signal.frame``). A gather
    of constant indices, so gradients flow."""
    from ...framework.graph import get_default_graph
    from ...framework.tensor_conversion import convert_to_tensor
    from ..common import static_int
    from ..array.index_ops import gather
    from ..array.manip_ops import pad
    with get_default_graph().name_scope(name or "frame"):
        x = convert_to_tensor(signal, name="signal")
        fl = static_int(frame_length, "frame_length", "frame")
        fs = static_int(frame_step, "frame_step", "frame")
        rank = None if x._shape is None else len(x._shape)
        if rank is None:
            from ...framework.errors import InvalidArgumentError
            raise InvalidArgumentError("frame: the signal's rank must be known")
        ax = axis % rank
        n = x._shape[ax]
        if n is None:
            from ...framework.errors import InvalidArgumentError
            raise InvalidArgumentError("frame: the framed axis must have a known length")
        if pad_end:
            frames = -(-n // fs) if n else 0
            total = max(0, (frames - 1) * fs + fl) if frames else 0
            if total > n:
                pads = [[0, 0]] * rank
                pads[ax] = [0, total - n]
                x = pad(x, pads, constant_values=pad_value)
            n = max(n, total)
        frames = max(0, 1 + (n - fl) // fs) if n >= fl else 0
        idx = (np.arange(frames)[:, None] * fs + np.arange(fl)[None, :]).astype(np.int32)
        return gather(x, idx, axis=ax)


def _window(window_length, periodic, dtype, a, b, name):
    from ...framework import dtypes as _dtypes
    from ..array.array_ops import constant
    from ..common import static_int
    n = static_int(window_length, "window_length", name)
    dt = _dtypes.as_dtype(dtype)
    if n == 1:
        return constant(np.ones(1, dt.np_dtype), name=name)
    denom = n + (1 if periodic and n % 2 == 0 else 0) - 1  # TF: periodic affects even lengths
    w = a - b * np.cos(2.0 * np.pi * np.arange(n) / denom)
    return constant(w.astype(dt.np_dtype), name=name)


def hann_window(window_length, periodic=True, dtype=None, name=None):
    """The Hann window ``0.5 - 0.5 cos(2 pi n / N)``: ``N`` is the length if ``periodic``
    and the length is even, else the length - 1 (TF's rule)."""
    from ...framework import dtypes as _dtypes
    return _window(window_length, periodic, dtype or _dtypes.float32, 0.5, 0.5,
                   name or "hann_window")


def hamming_window(window_length, periodic=True, dtype=None, name=None):
    """The Hamming window ``0.54 - 0.46 cos(2 pi n / N)``."""
    from ...framework import dtypes as _dtypes
    return _window(window_length, periodic, dtype or _dtypes.float32, 0.54, 0.46,
                   name or "hamming_window")


def stft(signals, frame_length, frame_step, fft_length=None, window_fn=hann_window,
         pad_end=False, name=None):
    """The short-time Fourier transform of real ``signals[..., samples]``: frames of
    ``frame_length`` every ``frame_step``, windowed by ``window_fn``, each :func:`rfft` to
    ``fft_length`` (default: the next power of 2) — ``[..., frames, fft_length // 2 + 1]``."""
    from ...framework.graph import get_default_graph
    from ...framework.tensor_conversion import convert_to_tensor
    from ..common import static_int
    with get_default_graph().name_scope(name or "stft"):
        x = convert_to_tensor(signals, name="signals")
        fl = static_int(frame_length, "frame_length", "stft")
        n = int(2 ** int(np.ceil(np.log2(fl)))) if fft_length is None else \
            static_int(fft_length, "fft_length", "stft")
        frames = frame(x, fl, frame_step, pad_end=pad_end)
        if window_fn is not None:
            frames = frames * window_fn(fl, dtype=x.dtype)
        return rfft(frames, [n])


def fftshift(x, axes=None, name=None):
    """The zero frequency moved to the middle (``np.fft.fftshift``): a roll by half."""
    return _shift(x, axes, name, inverse=False)


def ifftshift(x, axes=None, name=None):
    """The inverse of :func:`fftshift`."""
    return _shift(x, axes, name, inverse=True)


def _shift(x, axes, name, inverse):
    from ...framework.tensor_conversion import convert_to_tensor
    from ..array.index_ops import roll
    x = convert_to_tensor(x)
    if x._shape is None or None in x._shape:
        from ...framework.errors import InvalidArgumentError
        raise InvalidArgumentError("fftshift needs a fully known static shape")
    axes = list(range(len(x._shape))) if axes is None else list(np.atleast_1d(axes))
    shifts = [(-(x._shape[a] // 2) if inverse else x._shape[a] // 2) for a in axes]
    return roll(x, shifts, axes, name=name)


def _dct_matrix(n, dct_type, norm):
    """The ``n x n`` matrix ``C`` of TF's (SciPy's) DCT of ``dct_type``: ``dct(x) = x @ C.T``."""
    k = np.arange(n)[:, None].astype(np.float64)
    j = np.arange(n)[None, :].astype(np.float64)
    if dct_type == 1:
        c = 2.0 * np.cos(np.pi * k * j / (n - 1))
        c[:, 0] = 1.0
        c[:, -1] = (-1.0) ** np.arange(n)
    elif dct_type == 2:
        c = 2.0 * np.cos(np.pi * k * (2 * j + 1) / (2 * n))
        if norm == "ortho":
            c[0] *= np.sqrt(1.0 / (4 * n))
            c[1:] *= np.sqrt(1.0 / (2 * n))
    elif dct_type == 3:
        c = 2.0 * np.cos(np.pi * j * (2 * k + 1) / (2 * n))
        if norm == "ortho":
            c[:, 0] *= np.sqrt(1.0 / (4 * n))
            c[:, 1:] *= np.sqrt(1.0 / (2 * n))
        else:
            c[:, 0] = 1.0
    else:
        c = 2.0 * np.cos(np.pi * (2 * j + 1) * (2 * k + 1) / (4 * n))
        if norm == "ortho":
            c *= np.sqrt(1.0 / (2 * n))
    return c


def _dct_args(input, dct_type, n, axis, norm, what):
    from ...framework.errors import InvalidArgumentError
    from ...framework.tensor_conversion import convert_to_tensor
    if dct_type not in (1, 2, 3, 4):
        raise ValueError(f"Types I, II, III and IV (I)DCT are supported, got type {dct_type}.")
    if axis != -1:  # (TF raises NotImplementedError here)
        raise ValueError(f"axis must be -1. Got: {axis}")
    if norm not in (None, "ortho"):
        raise ValueError(f"Unknown normalization. Expected None or 'ortho', got: {norm}")
    if dct_type == 1 and norm == "ortho":
        raise ValueError("Normalization is not supported for the Type-I DCT.")
    x = convert_to_tensor(input)
    if not x.dtype.is_floating:
        raise InvalidArgumentError(f"{what} needs a floating-point tensor, got {x.dtype.name}")
    length = None if x._shape is None else x._shape[-1]
    if n is not None:
        if n < 1:
            raise ValueError(f"Invalid value of `n`. Expected `n > 0`, got {n}")
        if length is not None and n != length:
            x = index_fit(x, n)
        length = n
    if length is None:
        raise InvalidArgumentError(f"{what} needs the last dimension known when the graph is "
                                   "built")
    if dct_type == 1 and length < 2:
        raise ValueError("Type-I DCT requires the dimension to be greater than one.")
    return x, length


def index_fit(x, n):
    """``x`` cropped or zero-padded in its last axis to ``n``."""
    return apply_op("_FitLast", [x], {"shape": (int(n),)}).outputs[0]


def _apply_matrix(x, c):
    from ..array.array_ops import constant
    from .math_ops import matmul
    return matmul(x, constant(c.T.astype(x.dtype.np_dtype)))


def dct(input, type=2, n=None, axis=-1, norm=None, name=None):
    """The discrete cosine transform of types I-IV over the last axis (TF's and SciPy's
    definitions, ``norm="ortho"`` for II-IV), as a product with the DCT matrix (so
    gradients flow); ``n`` crops or zero-pads the input first."""
    from ...framework.graph import get_default_graph
    with get_default_graph().name_scope(name or "dct"):
        x, length = _dct_args(input, type, n, axis, norm, "dct")
        return _apply_matrix(x, _dct_matrix(length, type, norm))


def idct(input, type=2, n=None, axis=-1, norm=None, name=None):
    """TF's inverse DCT: the :func:`dct` of the inverse type (III for II, II for III, I and IV
    their own). Without ``norm="ortho"`` it is not normalised: divide by ``2N`` (``2(N - 1)``
    for type I) to invert, as TF documents."""
    from ...framework.graph import get_default_graph
    with get_default_graph().name_scope(name or "idct"):
        x, length = _dct_args(input, type, n, axis, norm, "idct")
        inverse_type = {1: 1, 2: 3, 3: 2, 4: 4}[type]
        return _apply_matrix(x, _dct_matrix(length, inverse_type, norm))


def _hertz_to_mel(f):
    return 1127.0 * np.log1p(np.asarray(f, np.float64) / 700.0)


def linear_to_mel_weight_matrix(num_mel_bins=20, num_spectrogram_bins=129, sample_rate=8000,
                                lower_edge_hertz=125.0, upper_edge_hertz=3800.0, dtype=None,
                                name=None):
    """The ``[num_spectrogram_bins, num_mel_bins]`` matrix that maps a linear spectrogram to
    mel bands (triangular filters evenly spaced on the HTK mel scale; the DC bin maps to
    nothing), TF's ``tf.signal.linear_to_mel_weight_matrix``; a constant."""
    from ...framework import dtypes as _dtypes
    from ..array.array_ops import constant
    if num_mel_bins <= 0:
        raise ValueError(f"num_mel_bins must be positive. Got: {num_mel_bins}")
    if lower_edge_hertz < 0.0:
        raise ValueError(f"lower_edge_hertz must be non-negative. Got: {lower_edge_hertz}")
    if lower_edge_hertz >= upper_edge_hertz:
        raise ValueError(f"lower_edge_hertz {lower_edge_hertz} >= upper_edge_hertz "
                         f"{upper_edge_hertz}")
    if upper_edge_hertz > sample_rate / 2:
        raise ValueError(f"upper_edge_hertz must not be larger than the Nyquist frequency "
                         f"(sample_rate / 2). Got {upper_edge_hertz} for sample_rate: "
                         f"{sample_rate}")
    dt = _dtypes.as_dtype(dtype or _dtypes.float32)
    linear = np.linspace(0.0, sample_rate / 2.0, num_spectrogram_bins)[1:]
    bins_mel = _hertz_to_mel(linear)[:, None]
    edges = np.linspace(_hertz_to_mel(lower_edge_hertz), _hertz_to_mel(upper_edge_hertz),
                        num_mel_bins + 2)
    lower, center, upper = edges[:-2][None], edges[1:-1][None], edges[2:][None]
    lower_slopes = (bins_mel - lower) / (center - lower)
    upper_slopes = (upper - bins_mel) / (upper - center)
    weights = np.maximum(0.0, np.minimum(lower_slopes, upper_slopes))
    weights = np.pad(weights, [[1, 0], [0, 0]])
    return constant(weights.astype(dt.np_dtype), name=name or "linear_to_mel_weight_matrix")


def mfccs_from_log_mel_spectrograms(log_mel_spectrograms, name=None):
    """MFCCs: the type-II DCT of log-mel spectrograms over their last axis, scaled by
    ``1 / sqrt(2 * num_mel_bins)`` (TF's ``tf.signal.mfccs_from_log_mel_spectrograms``)."""
    from ...framework.graph import get_default_graph
    from ...framework.tensor_conversion import convert_to_tensor
    with get_default_graph().name_scope(name or "mfccs_from_log_mel_spectrograms"):
        x = convert_to_tensor(log_mel_spectrograms)
        n = x._shape[-1] if x._shape is not None else None
        if n is None:
            from ...framework.errors import InvalidArgumentError
            raise InvalidArgumentError("mfccs need the number of mel bins known")
        return dct(x, type=2) * (1.0 / np.sqrt(2.0 * n))


def overlap_and_add(signal, frame_step, name=None):
    """The inverse of :func:`frame`: ``signal[..., frames, frame_length]`` added at
    ``frame_step`` offsets into ``[..., (frames - 1) * frame_step + frame_length]``."""
    from ...framework.graph import get_default_graph
    from ...framework.tensor_conversion import convert_to_tensor
    from ..array.array_ops import reshape
    from ..common import static_int
    from ..array.index_ops import unsorted_segment_sum
    from ..array.manip_ops import transpose
    with get_default_graph().name_scope(name or "overlap_and_add"):
        x = convert_to_tensor(signal)
        step = static_int(frame_step, "frame_step", "overlap_and_add")
        s = x._shape
        if s is None or len(s) < 2 or s[-1] is None or s[-2] is None:
            raise ValueError("overlap_and_add needs the frame count and length known")
        frames, length = s[-2], s[-1]
        out_len = (frames - 1) * step + length if frames else 0
        rank = len(s)
        xt = transpose(x, [rank - 2, rank - 1] + list(range(rank - 2)))
        flat = reshape(xt, [frames * length] + [-1 if d is None else d for d in s[:-2]]) \
            if rank > 2 else reshape(xt, [frames * length])
        ids = (np.arange(frames)[:, None] * step + np.arange(length)[None, :]).reshape(-1)
        summed = unsorted_segment_sum(flat, ids.astype(np.int32), out_len)
        return transpose(summed, list(range(1, rank - 1)) + [0]) if rank > 2 else summed


def inverse_stft_window_fn(frame_step, forward_window_fn=hann_window, name=None):
    """The window that makes :func:`inverse_stft` invert a :func:`stft` windowed by
    ``forward_window_fn``: the forward window over the sum of its overlapping squares."""
    def window(frame_length, dtype=None):
        from ...framework import dtypes as _dtypes
        from ..array.array_ops import constant
        from ..common import static_value
        dt = _dtypes.as_dtype(dtype or _dtypes.float32)
        fwd = np.asarray(static_value(forward_window_fn(frame_length, dtype=_dtypes.float64)))
        step = int(frame_step)
        overlaps = -(-frame_length // step)
        denom = np.pad(np.square(fwd), (0, overlaps * step - frame_length))
        denom = np.tile(denom.reshape(overlaps, step).sum(0, keepdims=True), (overlaps, 1))
        return constant((fwd / denom.reshape(-1)[:frame_length]).astype(dt.np_dtype),
                        name=name or "inverse_stft_window_fn")
    return window


def inverse_stft(stfts, frame_length, frame_step, fft_length=None, window_fn=hann_window,
                 name=None):
    """Signals from their short-time Fourier transforms: each frame :func:`irfft`, cropped to
    ``frame_length``, windowed, then overlap-added (exactly :func:`stft`'s inverse with
    ``window_fn=inverse_stft_window_fn(frame_step)``)."""
    from ...framework.graph import get_default_graph
    from ...framework.tensor_conversion import convert_to_tensor
    from ..common import static_int
    with get_default_graph().name_scope(name or "inverse_stft"):
        x = convert_to_tensor(stfts)
        fl = static_int(frame_length, "frame_length", "inverse_stft")
        n = int(2 ** int(np.ceil(np.log2(fl)))) if fft_length is None else \
            static_int(fft_length, "fft_length", "inverse_stft")
        frames = irfft(x, [n])
        frames = index_fit(frames, fl)
        if window_fn is not None:
            frames = frames * window_fn(fl, dtype=frames.dtype)
        return overlap_and_add(frames, frame_step)


spectral = SimpleNamespace(fft=fft, ifft=ifft, fft2d=fft2d, ifft2d=ifft2d, fft3d=fft3d,
                           ifft3d=ifft3d, rfft=rfft, irfft=irfft, rfft2d=rfft2d,
                           irfft2d=irfft2d, rfft3d=rfft3d, irfft3d=irfft3d, dct=dct,
                           idct=idct)
spectral.__doc__ = "``tv.spectral``: TF 1.x's ``tf.spectral`` (the FFTs, dct and idct)."
signal = SimpleNamespace(**vars(spectral), frame=frame, stft=stft, hann_window=hann_window,
                         hamming_window=hamming_window, fftshift=fftshift, ifftshift=ifftshift,
                         linear_to_mel_weight_matrix=linear_to_mel_weight_matrix,
                         mfccs_from_log_mel_spectrograms=mfccs_from_log_mel_spectrograms,
                         overlap_and_add=overlap_and_add, inverse_stft=inverse_stft,
                         inverse_stft_window_fn=inverse_stft_window_fn)
signal.__doc__ = ("``tv.signal``: TF's ``tf.signal`` — the FFTs, ``frame``, ``stft`` and "
                  "``inverse_stft``, ``overlap_and_add``, the Hann and Hamming windows, "
                  "``fftshift``, ``dct``/``idct``, mel matrices and MFCCs.")
__all__ += ["spectral", "signal"]


# one source for both device types: the kernels above use only ufuncs and the namespace of
# their inputs (``kernels_gpu``), and read only host counts (zeta's number of terms)
for _t in _OPS:
    if "GPU" not in get_op_def(_t).kernels:
        register_kernel(_t, "GPU", get_op_def(_t).kernels["CPU"])
del _t
