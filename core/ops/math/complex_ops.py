"""Complex numbers: ``complex``, ``real``, ``imag``, ``angle``, ``conj`` and the casts
``to_complex64``/``to_complex128``, with TF's gradients.
"""
from __future__ import annotations

import numpy as np

from ...framework.op_def_library import apply_op
from ...framework.op_registry import register_op
from ..common import _convert_pair, broadcast_shapes
from ..common import unbroadcast
from .special_common import _OPS

__all__ = ["complex", "real", "imag", "angle", "conj", "to_complex64", "to_complex128"]


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


