"""Helpers that make most op definitions one line (like JAX's ``defjvp``/``deflinear``):

* :func:`def_unary` / :func:`def_binary` — element-wise ops with NumPy broadcasting,
* :func:`unbroadcast` — reduce a gradient back to an input's shape,
* static shape helpers (:func:`broadcast_shapes`, :func:`check_same_dtype`).
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from .. import dtypes as _dt
from ..errors import InvalidArgumentError
from ..registry import apply_op, convert_to_tensor, register_op


def broadcast_shapes(a, b):
    """Static NumPy broadcasting of two shapes (tuples with None, or None for unknown rank)."""
    if a is None or b is None:
        return None
    out = []
    for x, y in zip(((1,) * (len(b) - len(a)) + tuple(a))[::-1],
                    ((1,) * (len(a) - len(b)) + tuple(b))[::-1]):
        if x == 1:
            out.append(y)
        elif y == 1:
            out.append(x)
        elif x is None or y is None:
            out.append(x if y is None else y)
        elif x != y:
            raise InvalidArgumentError(f"Incompatible shapes: {list(a)} vs. {list(b)}")
        else:
            out.append(x)
    return tuple(out[::-1])


def check_same_dtype(tensors, op_type: str):
    dts = {t.dtype for t in tensors}
    if len(dts) > 1:
        raise InvalidArgumentError(
            f"{op_type} expects inputs of one dtype, got "
            + ", ".join(f"{t.name} ({t.dtype.name})" for t in tensors))
    return tensors[0].dtype


def same_as_input(i=0):
    return lambda inputs, attrs: [(inputs[i].dtype, inputs[i]._shape)]


def _convert_pair(x, y):
    """Convert Python/NumPy operands to the dtype of the tensor operand (TF's rule)."""
    from ..graph import Tensor
    if not isinstance(x, Tensor) and isinstance(y, Tensor):
        x = convert_to_tensor(x, dtype=y.dtype if not isinstance(x, np.ndarray) else None)
    elif isinstance(x, Tensor) and not isinstance(y, Tensor):
        y = convert_to_tensor(y, dtype=x.dtype if not isinstance(y, np.ndarray) else None)
    return convert_to_tensor(x), convert_to_tensor(y)


def def_unary(op_type: str, kernel: Callable, grad: Callable | None = None, *,
              out_dtype: _dt.DType | None = None, allowed: Callable | None = None,
              differentiable: bool = True):
    """Register an element-wise unary op and return its Python function ``fn(x, name=None)``."""
    def shape_fn(inputs, attrs):
        (x,) = inputs
        if allowed is not None and not allowed(x.dtype):
            raise InvalidArgumentError(f"{op_type} does not support dtype {x.dtype.name}")
        return [(out_dtype or x.dtype, x._shape)]

    register_op(op_type, shape_fn, kernel, grad=grad, differentiable=differentiable)

    def fn(x, name=None):
        return apply_op(op_type, [x], name=name).outputs[0]

    fn.__name__ = op_type.lower()
    fn.__doc__ = f"Element-wise ``{op_type}`` (NumPy: ``{getattr(kernel, '__name__', kernel)}``)."
    return fn


def def_binary(op_type: str, kernel: Callable, grad: Callable | None = None, *,
               out_dtype: _dt.DType | None = None, allowed: Callable | None = None,
               differentiable: bool = True):
    """Register an element-wise binary op with NumPy broadcasting; returns ``fn(x, y, name)``."""
    def shape_fn(inputs, attrs):
        dt = check_same_dtype(inputs, op_type)
        if allowed is not None and not allowed(dt):
            raise InvalidArgumentError(f"{op_type} does not support dtype {dt.name}")
        return [(out_dtype or dt, broadcast_shapes(inputs[0]._shape, inputs[1]._shape))]

    register_op(op_type, shape_fn, kernel, grad=grad, differentiable=differentiable)

    def fn(x, y, name=None):
        x, y = _convert_pair(x, y)
        return apply_op(op_type, [x, y], name=name).outputs[0]

    fn.__name__ = op_type.lower()
    fn.__doc__ = f"Element-wise ``{op_type}`` with NumPy broadcasting."
    return fn


# ---- reducing a broadcast gradient ------------------------------------------------------------

def _sum_to_shape_of(g, x):
    shape = np.shape(x)
    if g.shape == shape:
        return g
    nd = g.ndim - len(shape)
    axes = tuple(range(nd)) + tuple(i + nd for i, s in enumerate(shape)
                                    if s == 1 and g.shape[i + nd] != 1)
    out = g.sum(axis=axes, keepdims=True) if axes else g
    return out.reshape(shape) if nd or axes else out


def _sum_to_grad(op, grad):
    from .array_ops import broadcast_like
    return [broadcast_like(grad, op.inputs[0]), None]


register_op("SumToShapeOf", lambda inputs, attrs: [(inputs[0].dtype, inputs[1]._shape)],
            _sum_to_shape_of, grad=_sum_to_grad, shape_only=(1,))


def unbroadcast(grad, x):
    """Sum ``grad`` over the dimensions along which ``x`` was broadcast (skipped when the
    static shapes already match)."""
    if grad is None:
        return None
    if (grad._shape is not None and x._shape is not None and grad._shape == x._shape
            and None not in x._shape):
        return grad
    return apply_op("SumToShapeOf", [grad, x]).outputs[0]
