"""Tensors made from a shape: rank, size, fill, zeros, ones, eye, range (re-exported by
manip_ops). A shape argument may be a list of ints, a list with scalar tensors, a TensorShape or
a 1-D int tensor; its static value, where known, gives the output's static shape.

>>> import tensorvm as tv
>>> with tv.Session() as s: s.run([tv.fill([2], 7), tv.range(1, 7, 2)])
[array([7, 7], dtype=int32), array([1, 3, 5], dtype=int32)]
"""
from __future__ import annotations

import math

import numpy as np

from ...framework import dtypes as _dt
from ...framework.errors import InvalidArgumentError
from ...framework.graph import Tensor
from ...framework.op_def_library import apply_op
from ...vm.kernels.array_api import array_namespace
from ...framework.op_registry import register_op
from ...framework.tensor_conversion import convert_to_tensor
from .array_ops import constant, shape_tensor
from ..common import asarray, static_int, static_ints, static_shape_of, static_value

__all__ = ["rank", "size", "fill", "zeros", "ones", "eye", "range"]


# ---- rank, size, fill, zeros, ones, eye, range -------------------------------------------------
register_op("Rank", lambda inputs, attrs: [(_dt.int32, ())],
            lambda x: asarray(np.ndim(x), np.int32, like=x), differentiable=False)
register_op("Size", lambda inputs, attrs: [(attrs["out_type"], ())],
            lambda x, out_type: asarray(np.size(x), out_type.np_dtype, like=x),
            differentiable=False)


def rank(input, name=None) -> Tensor:
    """The number of dimensions of ``input`` as an int32 scalar."""
    return apply_op("Rank", [input], name=name).outputs[0]


def size(input, name=None, out_type=_dt.int32) -> Tensor:
    """The number of elements of ``input`` as a scalar of ``out_type``."""
    return apply_op("Size", [input], {"out_type": _dt.as_dtype(out_type)}, name=name).outputs[0]


def _fill_shape(inputs, attrs):
    dims, value = inputs
    if not dims.dtype.is_integer:
        raise InvalidArgumentError(f"Fill: dims must be integers, got {dims.dtype.name}")
    if value._shape is not None and value._shape != ():
        raise InvalidArgumentError(f"Fill: value must be a scalar, got shape "
                                   f"{list(value._shape)}")
    target = static_shape_of(dims)
    if target is not None and any(d is not None and d < 0 for d in target):
        raise InvalidArgumentError(f"Fill: dims must be >= 0, got {list(target)}")
    return [(value.dtype, target)]


def _fill_kernel(dims, value):
    return array_namespace(value).full(tuple(int(d) for d in dims), value, dtype=value.dtype)


def _fill_grad(op, g):
    from ..math.math_ops import reduce_sum
    return [None, reduce_sum(g)]


register_op("Fill", _fill_shape, _fill_kernel, grad=_fill_grad)


def fill(dims, value, name=None) -> Tensor:
    """A tensor of shape ``dims`` filled with the scalar ``value``."""
    return apply_op("Fill", [shape_tensor(dims, "Fill"), value], name=name).outputs[0]


def zeros(shape, dtype=_dt.float32, name=None) -> Tensor:
    """``tv.zeros([2, 3])``; ``shape`` may be a list (with tensors) or a 1-D int tensor."""
    dt = _dt.as_dtype(dtype)
    return fill(shape, constant(0 if not dt.is_string else "", dtype=dt), name=name or "zeros")


def ones(shape, dtype=_dt.float32, name=None) -> Tensor:
    """``tv.ones([2, 3], dtype=tv.int32)``."""
    return fill(shape, constant(1, dtype=_dt.as_dtype(dtype)), name=name or "ones")


def _eye_kernel(num_rows, num_columns, batch_shape, dtype):
    e = np.eye(num_rows, num_columns, dtype=dtype.np_dtype)
    return np.broadcast_to(e, tuple(batch_shape) + e.shape) if batch_shape else e


register_op("Eye", lambda inputs, attrs: [(attrs["dtype"], tuple(attrs["batch_shape"]) +
                                           (attrs["num_rows"], attrs["num_columns"]))],
            _eye_kernel, differentiable=False)


def eye(num_rows, num_columns=None, batch_shape=None, dtype=_dt.float32, name=None) -> Tensor:
    """An identity matrix (or a batch of them): ``tv.eye(3)``, ``tv.eye(2, 3, [4])``."""
    n = static_int(num_rows, "num_rows", "Eye")
    m = n if num_columns is None else static_int(num_columns, "num_columns", "Eye")
    b = () if batch_shape is None else static_ints(batch_shape, "batch_shape", "Eye")
    if n < 0 or m < 0 or any(d < 0 for d in b):
        raise InvalidArgumentError(f"Eye: sizes must be >= 0, got num_rows={n}, "
                                   f"num_columns={m}, batch_shape={list(b)}")
    return apply_op("Eye", [], {"num_rows": n, "num_columns": m, "batch_shape": b,
                                "dtype": _dt.as_dtype(dtype)}, name=name or "eye").outputs[0]


def _range_len(start, limit, delta):
    if delta == 0:
        raise InvalidArgumentError("Range: delta must not be zero")
    if (delta > 0 and start > limit) or (delta < 0 and start < limit):
        raise InvalidArgumentError(f"Range: requires start <= limit when delta > 0 (and "
                                   f"start >= limit when delta < 0), got start={start}, "
                                   f"limit={limit}, delta={delta}")
    return int(math.ceil((limit - start) / delta))


def _range_shape(inputs, attrs):
    for t in inputs:
        if t._shape not in ((), None):
            raise InvalidArgumentError(f"Range: start, limit and delta must be scalars, got "
                                       f"{t.name} of shape {list(t._shape)}")
    vals = [static_value(t) for t in inputs]
    if any(v is None for v in vals):
        return [(inputs[0].dtype, (None,))]
    return [(inputs[0].dtype, (_range_len(*(v.item() for v in vals)),))]


def _range_kernel(start, limit, delta):
    _range_len(start.item(), limit.item(), delta.item())
    return array_namespace(start).arange(start.item(), limit.item(), delta.item(),
                                         dtype=start.dtype)


register_op("Range", _range_shape, _range_kernel, differentiable=False)


def range(start, limit=None, delta=1, dtype=None, name: str = "range") -> Tensor:  # noqa: A001
    """``tv.range(5)``, ``tv.range(1, 10, 2)``, ``tv.range(0., 1., 0.25)``."""
    if limit is None:
        start, limit = 0, start
    args = [start, limit, delta]
    if dtype is None:
        dts = [convert_to_tensor(a).dtype if isinstance(a, Tensor) else _dt.dtype_of_value(a)
               for a in args]
        order = [_dt.int32, _dt.int64, _dt.float32, _dt.float64]
        dtype = max(dts, key=lambda d: order.index(d) if d in order else -1)
    dt = _dt.as_dtype(dtype)
    ts = []
    for a in args:
        t = a if isinstance(a, Tensor) else constant(a, dtype=dt)
        if t.dtype != dt:
            from ..math.math_ops import cast
            t = cast(t, dt)
        ts.append(t)
    return apply_op("Range", ts, name=name).outputs[0]
