"""Modified Bessel functions of the first kind: ``bessel_i0``, ``bessel_i1`` and their
exponentially scaled forms (power series below 30, the asymptotic expansion beyond).
"""
from __future__ import annotations

import numpy as np
from .special_common import _back, _f64, _unary

__all__ = ["bessel_i0", "bessel_i0e", "bessel_i1", "bessel_i1e"]


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


