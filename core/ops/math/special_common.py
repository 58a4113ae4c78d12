"""What the special-function modules share: the list of their op types (each gets its CPU
kernel as its GPU kernel, :mod:`special_ops`), the float-only unary registrar, float64
evaluation helpers and the shape rule of the binary special functions.
"""
from __future__ import annotations

import numpy as np

from ..common import broadcast_shapes, check_same_dtype, def_unary


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


# ---- special functions: float64 evaluation ----------------------------------------------------
def _f64(x):
    return x.astype(np.float64, copy=False)


def _back(out, like):
    return out.astype(like.dtype, copy=False)


def _special_binary_shape(op_type):
    def shape_fn(inputs, attrs):
        dt = check_same_dtype(inputs, op_type)
        if not dt.is_floating:
            from ...framework.errors import InvalidArgumentError
            raise InvalidArgumentError(f"{op_type} does not support dtype {dt.name}")
        return [(dt, broadcast_shapes(inputs[0]._shape, inputs[1]._shape))]
    return shape_fn
