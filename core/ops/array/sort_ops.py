"""Ordering ops: sort, argsort, top_k, unique, unique_with_counts.

>>> import tensorvm as tv
>>> v, i = tv.top_k(tv.constant([3.0, 1.0, 4.0, 1.5]), k=2)
>>> with tv.Session() as s: s.run([v, i])[1].tolist()
[2, 0]
"""
from __future__ import annotations

import numpy as np

from ...framework import dtypes as _dt
from ...framework.errors import InvalidArgumentError
from ...framework.graph import Tensor
from ...framework.op_def_library import apply_op
from ...vm.kernels.array_api import array_namespace
from ...framework.op_registry import register_op
from ...framework.tensor_conversion import convert_to_tensor
from .array_ops import dense_or_zeros
from ..common import norm_axis, rank_of, static_int

__all__ = ["sort", "argsort", "top_k", "unique", "unique_with_counts"]


# ---- sort, argsort, top_k ---------------------------------------------------------------------
def _argsort_np(x, axis, descending):
    """A stable argsort; descending keeps equal values in index order (as TF's top_k)."""
    if not descending:
        return np.argsort(x, axis=axis, kind="stable")
    n = x.shape[axis]
    r = np.argsort(np.flip(x, axis), axis=axis, kind="stable")
    return np.flip(n - 1 - r, axis)


def _sort_attrs_shape(inputs, attrs):
    x = inputs[0]
    if x.dtype.is_complex:
        raise InvalidArgumentError(f"sort: dtype {x.dtype.name} is not ordered")
    r = rank_of(x)
    if r == 0:
        raise InvalidArgumentError("sort: input must be at least 1-D, got a scalar")
    norm_axis(attrs["axis"], r, "Argsort")
    return [(_dt.int32, x._shape)]


register_op("Argsort", _sort_attrs_shape,
            lambda x, axis, descending: _argsort_np(x, axis, descending).astype(np.int32),
            differentiable=False)


def _put_along_kernel(g, idx, like, axis):
    out = array_namespace(g).zeros(np.shape(like), dtype=g.dtype)
    np.put_along_axis(out, idx.astype(np.intp), g, axis)
    return out


register_op("TakeAlongAxis", lambda inputs, attrs: [(inputs[0].dtype, inputs[1]._shape)],
            lambda x, idx, axis: np.take_along_axis(x, idx.astype(np.intp), axis),
            grad=lambda op, g: [apply_op("PutAlongAxis", [g, op.inputs[1], op.inputs[0]],
                                         op.attrs).outputs[0], None])
register_op("PutAlongAxis", lambda inputs, attrs: [(inputs[0].dtype, inputs[2]._shape)],
            _put_along_kernel,
            grad=lambda op, g: [apply_op("TakeAlongAxis", [g, op.inputs[1]], op.attrs)
                                .outputs[0], None, None])


def _direction(direction):
    if direction not in ("ASCENDING", "DESCENDING"):
        raise InvalidArgumentError(f"sort: direction must be 'ASCENDING' or 'DESCENDING', got "
                                   f"{direction!r}")
    return direction == "DESCENDING"


def argsort(values, axis=-1, direction: str = "ASCENDING", stable: bool = False,
            name=None) -> Tensor:
    """The int32 indices that sort ``values`` along ``axis`` (always stable here)."""
    return apply_op("Argsort", [values], {"axis": static_int(axis, "axis", "Argsort"),
                                          "descending": _direction(direction)},
                    name=name or "argsort").outputs[0]


def sort(values, axis=-1, direction: str = "ASCENDING", name=None) -> Tensor:
    """``values`` sorted along ``axis``; differentiable (the gradient is scattered back)."""
    x = convert_to_tensor(values)
    idx = argsort(x, axis, direction)
    return apply_op("TakeAlongAxis", [x, idx], {"axis": static_int(axis, "axis", "Sort")},
                    name=name or "sort").outputs[0]


def _top_k_shape(inputs, attrs):
    x, k = inputs[0], attrs["k"]
    if k < 0:
        raise InvalidArgumentError(f"TopKV2: k must be >= 0, got {k}")
    if x._shape is None:
        return [(x.dtype, None), (_dt.int32, None)]
    if not x._shape:
        raise InvalidArgumentError("TopKV2: input must be at least 1-D, got a scalar")
    if x._shape[-1] is not None and x._shape[-1] < k:
        raise InvalidArgumentError(f"TopKV2: input must have at least k={k} columns, had "
                                   f"{x._shape[-1]}")
    s = x._shape[:-1] + (k,)
    return [(x.dtype, s), (_dt.int32, s)]


def _top_k_kernel(x, k, sorted=True):
    if x.shape[-1] < k:
        raise InvalidArgumentError(f"TopKV2: input must have at least k={k} columns, had "
                                   f"{x.shape[-1]}")
    idx = _argsort_np(x, -1, True)[..., :k]
    return np.take_along_axis(x, idx, -1), idx.astype(np.int32)


def _top_k_grad(op, g_values, g_indices=None):
    if g_values is None:
        return [None]
    g = dense_or_zeros(g_values, op.outputs[0])
    return [apply_op("PutAlongAxis", [g, op.outputs[1], op.inputs[0]], {"axis": -1})
            .outputs[0]]


register_op("TopKV2", _top_k_shape, _top_k_kernel, grad=_top_k_grad)


def top_k(input, k=1, sorted=True, name=None):
    """The ``k`` largest entries of the last dimension and their int32 indices (ties: lower
    index first): ``values, indices = tv.nn.top_k(x, 2)``."""
    kk = static_int(k, "k", "TopKV2")
    op = apply_op("TopKV2", [input], {"k": kk, "sorted": bool(sorted)}, name=name)
    return op.outputs[0], op.outputs[1]


# ---- unique -----------------------------------------------------------------------------------
def _unique_np(x):
    """np.unique in order of first occurrence (as TF's Unique)."""
    u, first, inv, counts = np.unique(x, return_index=True, return_inverse=True,
                                      return_counts=True)
    order = np.argsort(first, kind="stable")
    rank = np.empty_like(order)
    rank[order] = array_namespace(order).arange(order.size)
    return u[order], rank[inv.reshape(-1)], counts[order]


def _unique_shape(op, n_out):
    def fn(inputs, attrs):
        x = inputs[0]
        if x._shape is not None and len(x._shape) != 1:
            raise InvalidArgumentError(f"{op}: x must be 1-D, got shape {list(x._shape)}")
        out = attrs["out_idx"]
        if not out.is_integer:
            raise InvalidArgumentError(f"{op}: out_idx must be int32 or int64, got {out.name}")
        return [(x.dtype, (None,)), (out, x._shape)] + [(out, (None,))] * (n_out - 2)
    return fn


def _unique_kernel(x, out_idx):
    if x.ndim != 1:
        raise InvalidArgumentError(f"Unique: x must be 1-D, got shape {list(x.shape)}")
    y, idx, _ = _unique_np(x)
    return y, idx.astype(out_idx.np_dtype)


def _unique_counts_kernel(x, out_idx):
    if x.ndim != 1:
        raise InvalidArgumentError(f"UniqueWithCounts: x must be 1-D, got shape "
                                   f"{list(x.shape)}")
    y, idx, c = _unique_np(x)
    return y, idx.astype(out_idx.np_dtype), c.astype(out_idx.np_dtype)


register_op("Unique", _unique_shape("Unique", 2), _unique_kernel, differentiable=False)
register_op("UniqueWithCounts", _unique_shape("UniqueWithCounts", 3), _unique_counts_kernel,
            differentiable=False)


def unique(x, out_idx=_dt.int32, name=None):
    """``y, idx = tv.unique(x)``: the distinct values of 1-D ``x`` in order of first occurrence
    and, for each entry of ``x``, the index of its value in ``y``."""
    op = apply_op("Unique", [x], {"out_idx": _dt.as_dtype(out_idx)}, name=name)
    return op.outputs[0], op.outputs[1]


def unique_with_counts(x, out_idx=_dt.int32, name=None):
    """``y, idx, count = tv.unique_with_counts(x)``."""
    op = apply_op("UniqueWithCounts", [x], {"out_idx": _dt.as_dtype(out_idx)}, name=name)
    return tuple(op.outputs)
