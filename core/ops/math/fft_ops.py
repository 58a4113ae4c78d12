"""FFTs over the innermost 1, 2 or 3 dimensions (TF's ``tf.fft`` … ``tf.spectral.irfft3d``),
complex and real-input, with their gradients.
"""
from __future__ import annotations

import numpy as np

from ...vm.kernels.array_api import array_namespace
from ...framework.op_def_library import apply_op
from ...framework.op_registry import register_op
from .special_common import _OPS
from .complex_ops import complex, real

__all__ = ["fft", "ifft", "fft2d", "ifft2d", "fft3d", "ifft3d"]


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


