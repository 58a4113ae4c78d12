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

import numpy as np

from ...framework.op_registry import get_op_def, register_kernel
from ..common import def_binary, unbroadcast
from .math_ops import negative, sqrt, square
from .special_common import _OPS, _is_float, _quiet, _unary
# the families split out of this module (their ops register on import; re-exported here)
from .bessel_ops import bessel_i0, bessel_i0e, bessel_i1, bessel_i1e
from .complex_ops import angle, complex, conj, imag, real, to_complex64, to_complex128
from .erf_ops import erf, erfc, erfcinv, erfinv, ndtri
from .fft_ops import (fft, fft2d, fft3d, ifft, ifft2d, ifft3d, irfft, irfft2d,  # noqa: F401
                      irfft3d, rfft, rfft2d, rfft3d)
from .gamma_ops import betainc, digamma, igamma, igammac, lbeta, lgamma, polygamma, zeta
from .signal_ops import (dct, frame, hamming_window, hann_window, idct,  # noqa: F401
                         ifftshift, fftshift, index_fit, inverse_stft, inverse_stft_window_fn,
                         linear_to_mel_weight_matrix, mfccs_from_log_mel_spectrograms,
                         overlap_and_add, signal, spectral, stft)

__all__ = ["acos", "asin", "atan", "atan2", "sinh", "cosh", "acosh", "asinh", "atanh", "erf",
           "erfc", "lgamma", "digamma", "polygamma", "zeta", "lbeta", "log_sigmoid", "rint"]


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


def log_sigmoid(x, name=None):
    """``log(sigmoid(x)) = -softplus(-x)``, computed stably (TF's ``tf.log_sigmoid``)."""
    from ...framework.tensor_conversion import convert_to_tensor
    from ..nn.nn_ops import softplus
    x = convert_to_tensor(x)
    return negative(softplus(negative(x)), name=name or "LogSigmoid")


def _nextafter_kernel(x1, x2):
    return np.nextafter(x1, x2)


_OPS.append("NextAfter")
nextafter = def_binary("NextAfter", _nextafter_kernel, allowed=_is_float, differentiable=False)
nextafter.__doc__ = "The next representable value after ``x1`` towards ``x2``, element-wise."

__all__ += ["erfinv", "ndtri", "erfcinv", "nextafter"]
__all__ += ["complex", "real", "imag", "angle", "conj", "to_complex64", "to_complex128"]
__all__ += ["igamma", "igammac", "betainc"]
__all__ += ["bessel_i0", "bessel_i0e", "bessel_i1", "bessel_i1e"]
__all__ += ["fft", "ifft", "fft2d", "ifft2d", "fft3d", "ifft3d"]
__all__ += ["spectral", "signal"]


# one source for both device types: the kernels of this module and of the ones split out of it
# use only ufuncs and the namespace of their inputs (``kernels_gpu``), and read only host
# counts (zeta's number of terms)
for _t in _OPS:
    if "GPU" not in get_op_def(_t).kernels:
        register_kernel(_t, "GPU", get_op_def(_t).kernels["CPU"])
del _t
