"""Helpers that make most op definitions one line (like JAX's ``defjvp``/``deflinear``):

* :func:`def_unary` / :func:`def_binary` — element-wise ops with NumPy broadcasting,
* :func:`unbroadcast` — reduce a gradient back to an input's shape,
* static helpers that read what is known while the graph is built (:func:`broadcast_shapes`,
  :func:`check_same_dtype`, :func:`static_value`, :func:`static_ints`, :func:`norm_axis`,
  :func:`static_shape_of` …) — plain functions of tensors' static facts, building no op.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from ..framework import dtypes as _dt
from ..framework.errors import InvalidArgumentError
from ..framework.graph import Tensor
from ..framework.op_def_library import apply_op
from ..vm.kernels.array_api import array_namespace
from ..framework.op_registry import register_op
from ..framework.tensor_conversion import convert_to_tensor


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


def _convert_pair(x, y):
    """Convert Python/NumPy operands to the dtype of the tensor operand (TF's rule). Variables
    count as tensors, so a dtype mismatch is the op's error (naming it and the user's line)."""
    x = x._as_graph_element() if hasattr(x, "_as_graph_element") else x
    y = y._as_graph_element() if hasattr(y, "_as_graph_element") else y
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
               differentiable: bool = True, forwards: tuple = ()):
    """Register an element-wise binary op with NumPy broadcasting; returns ``fn(x, y, name)``.
    ``forwards``: see :class:`tensorvm.framework.op_registry.OpDef` (the kernel takes ``out=``)."""
    def shape_fn(inputs, attrs):
        dt = check_same_dtype(inputs, op_type)
        if allowed is not None and not allowed(dt):
            raise InvalidArgumentError(f"{op_type} does not support dtype {dt.name}")
        return [(out_dtype or dt, broadcast_shapes(inputs[0]._shape, inputs[1]._shape))]

    register_op(op_type, shape_fn, kernel, grad=grad, differentiable=differentiable,
                forwards=forwards)

    def fn(x, y, name=None):
        x, y = _convert_pair(x, y)
        return apply_op(op_type, [x, y], name=name).outputs[0]

    fn.__name__ = op_type.lower()
    fn.__doc__ = f"Element-wise ``{op_type}`` with NumPy broadcasting."
    return fn


# ---- one source for both device types ------------------------------------------------------------
def asarray(value, dtype=None, like=None):
    """``np.asarray(value, dtype)`` in the array namespace of ``like`` (default ``value``):
    a NumPy array for host values, a device (CuPy) array for device ones, so a kernel's
    result stays where its inputs are (``tensorvm.vm.kernels.array_api``).

    >>> asarray(3, np.float32, like=np.ones(2))
    array(3., dtype=float32)
    """
    ref = value if like is None else like
    if type(ref) is np.ndarray:  # the CPU path, without the namespace lookup
        return np.asarray(value, dtype=dtype)
    return array_namespace(ref).asarray(value, dtype=dtype)


def add_at(out, index, values) -> None:
    """``out[index] += values`` with repeated indices summed (``np.add.at``), on the
    device of ``out`` (CuPy before ``ufunc.at``: ``cupyx.scatter_add``)."""
    xp = array_namespace(out)
    if xp is np or hasattr(xp.add, "at"):
        xp.add.at(out, index, values)
    else:
        import cupyx
        cupyx.scatter_add(out, index, values)


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
    from .array.array_ops import broadcast_like
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


# ---- static facts: what is known while the graph is built ------------------------------------
def outs(values):
    """A kernel result for an op with a variable number of outputs: the array itself when there
    is one (the runtime stores a one-output op's result as is), else a tuple."""
    values = tuple(values)
    return values[0] if len(values) == 1 else values


def static_value(x):
    """``x``'s NumPy value when it is known while the graph is built (a Python/NumPy value or a
    ``Const`` tensor), else None."""
    if isinstance(x, Tensor):
        return x.op.attrs["value"] if x.op.type == "Const" else None
    if hasattr(x, "_as_graph_element"):
        return None
    if isinstance(x, (list, tuple)):
        vals = [static_value(v) for v in x]
        return None if any(v is None for v in vals) else np.asarray(vals)
    return np.asarray(x)


def static_ints(x, what: str, op: str) -> tuple[int, ...]:
    """A static list of ints (a Python list, a NumPy array or a Const tensor)."""
    v = static_value(x)
    if v is None:
        raise InvalidArgumentError(f"{op}: {what} must be known when the graph is built "
                                   f"(a list of ints or a constant), got {x!r}")
    v = np.asarray(v)
    if v.size and v.dtype.kind not in "iu":
        raise InvalidArgumentError(f"{op}: {what} must be integers, got {v.tolist()!r}")
    return tuple(int(d) for d in v.reshape(-1))


def static_int(x, what: str, op: str) -> int:
    v = static_value(x)
    if v is None or np.ndim(v) != 0 or np.asarray(v).dtype.kind not in "iu":
        raise InvalidArgumentError(f"{op}: {what} must be an int known when the graph is built, "
                                   f"got {x!r}")
    return int(v)


def norm_axis(axis: int, rank: int | None, op: str, extra: int = 0) -> int:
    """``axis`` in ``[-(rank+extra), rank+extra)`` made non-negative (as is if rank unknown)."""
    if rank is None:
        return axis
    n = rank + extra
    if not -n <= axis < n:
        raise InvalidArgumentError(f"{op}: axis {axis} is out of range for a tensor of rank "
                                   f"{rank} (expected [{-n}, {n}))")
    return axis % n


def rank_of(t: Tensor):
    return None if t._shape is None else len(t._shape)


def static_shape_of(shape_t: Tensor):
    """The static shape (dims may be None) that a 1-D shape tensor denotes, or None."""
    v = static_value(shape_t)
    if v is not None:
        return tuple(int(d) for d in np.asarray(v).reshape(-1))
    if shape_t.op.type == "Shape":
        return shape_t.op.inputs[0]._shape
    if shape_t.op.type == "Pack":
        dims = []
        for t in shape_t.op.inputs:
            d = static_value(t)
            dims.append(None if d is None else int(d))
        return tuple(dims)
    if shape_t._shape is not None and shape_t._shape[0] is not None:
        return (None,) * shape_t._shape[0]
    return None


def check_int_dtype(t: Tensor, what: str, op: str) -> None:
    """Raise InvalidArgumentError unless ``t`` holds integers (indices, segment ids)."""
    if not t.dtype.is_integer:
        raise InvalidArgumentError(f"{op}: {what} must be int32 or int64, got {t.dtype.name}")


def check_index_range(indices, n, op, what="indices"):
    """Raise InvalidArgumentError (naming the first bad entry) unless 0 <= indices < n."""
    if indices.size == 0:
        return
    bad = (indices < 0) | (indices >= n)
    if bad.any():
        pos = tuple(int(i) for i in np.argwhere(bad)[0])
        raise InvalidArgumentError(f"{op}: {what}{list(pos)} = {indices[pos].item()} is not in "
                                   f"[0, {n})")


def shape_is_prefix(prefix, full) -> bool:
    """Whether static shape ``prefix`` may be a leading part of ``full`` (None dims match)."""
    if prefix is None or full is None:
        return True
    if len(prefix) > len(full):
        return False
    return all(a is None or b is None or a == b for a, b in zip(prefix, full))
