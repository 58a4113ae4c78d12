"""The error function family: ``erf``, ``erfc`` (series below 2.5, continued fraction beyond,
polynomial fits for float32), and their inverses ``erfinv``, ``erfcinv``, ``ndtri``.

>>> import tensorvm as tv
>>> with tv.Session() as s:
...     round(float(s.run(tv.erfinv(tv.erf(0.5)))), 6)
0.5
"""
from __future__ import annotations

import numpy as np

from .math_ops import exp, negative, square
from .special_common import _back, _f64, _unary

__all__ = ["erf", "erfc", "erfinv", "ndtri", "erfcinv"]


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


# ---- the ops ------------------------------------------------------------------------------------
def _erf_grad(op, g):
    x = op.inputs[0]
    return [g * (2.0 / _SQRT_PI) * exp(-square(x))]


erf = _unary("Erf", _erf_kernel, _erf_grad)
erf.__doc__ = "The error function ``2/sqrt(pi) * integral_0^x exp(-t^2) dt``, element-wise."
erfc = _unary("Erfc", _erfc_kernel, lambda op, g: [-_erf_grad(op, g)[0]])
erfc.__doc__ = "The complementary error function ``1 - erf(x)`` (accurate for large x)."


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
