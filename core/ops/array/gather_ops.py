"""Gathers and scatters: ``gather`` (its gradient along axis 0 an
:class:`~tensorvm.framework.indexed_slices.IndexedSlices`), ``gather_nd``/``scatter_nd``,
``unsorted_segment_sum`` and ``densify`` (the dense form of sparse gradients, also the
implicit conversion of an IndexedSlices to a tensor).
"""
from __future__ import annotations

import warnings

import numpy as np

from ...framework.errors import InvalidArgumentError
from ...framework.graph import Tensor
from ...framework.indexed_slices import IndexedSlices
from ...framework.op_def_library import apply_op
from ...vm.kernels.array_api import array_namespace
from ...framework.op_registry import register_op
from ...framework.tensor_conversion import convert_to_tensor, register_tensor_conversion_function
from .array_ops import reshape, reshape_like, shape
from ..common import (add_at, check_index_range, check_int_dtype, norm_axis, rank_of,
                      shape_is_prefix, static_int, static_shape_of, static_value)

__all__ = ["gather", "unsorted_segment_sum", "densify", "gather_nd", "scatter_nd"]


# ---- gather -----------------------------------------------------------------------------------
def _gather_shape(inputs, attrs):
    p, i = inputs
    check_int_dtype(i, "indices", "GatherV2")
    if p._shape is not None and not p._shape:
        raise InvalidArgumentError("GatherV2: params must be at least 1-D, got a scalar")
    if p._shape is None or i._shape is None:
        return [(p.dtype, None)]
    a = norm_axis(attrs["axis"], len(p._shape), "GatherV2")
    return [(p.dtype, p._shape[:a] + i._shape + p._shape[a + 1:])]


def _gather_kernel(params, indices, axis):
    # on a GPU the indices are read in host memory (kernels_gpu.HOST_MEMORY_INPUTS): checked
    # there without waiting for the device, then uploaded
    check_index_range(indices, params.shape[axis], "GatherV2")
    xp = array_namespace(params)
    if xp is not np:
        indices = xp.asarray(indices)
    return np.take(params, indices, axis=axis)


def _gather_grad_kernel(g, params, indices, axis):
    axis %= params.ndim
    out = array_namespace(g).zeros(params.shape, dtype=g.dtype)
    moved = np.moveaxis(out, axis, 0)
    k = indices.ndim
    gm = np.moveaxis(g, tuple(range(axis, axis + k)), tuple(range(k)))
    add_at(moved, indices.reshape(-1), gm.reshape((indices.size,) + moved.shape[1:]))
    return out


def _flatten_leading_kernel(g, indices):
    return g.reshape((indices.size,) + g.shape[indices.ndim:])


def _flatten_leading_shape(inputs, attrs):
    g, i = inputs
    if g._shape is None or i._shape is None:
        return [(g.dtype, None)]
    n = None if None in i._shape else int(np.prod(i._shape))
    return [(g.dtype, (n,) + g._shape[len(i._shape):])]


def _gather_grad(op, g):
    params, indices = op.inputs
    axis = op.attrs["axis"]
    r = rank_of(params)
    if axis == 0 or (r is not None and axis % r == 0):
        if indices._shape is not None and len(indices._shape) == 1:
            return [IndexedSlices(g, indices, shape(params)), None]
        values = apply_op("FlattenLeading", [g, indices]).outputs[0]
        return [IndexedSlices(values, reshape(indices, [-1]), shape(params)), None]
    return [apply_op("GatherGrad", [g, params, indices], {"axis": axis}).outputs[0], None]


register_op("GatherV2", _gather_shape, _gather_kernel, grad=_gather_grad)
register_op("GatherGrad", lambda inputs, attrs: [(inputs[0].dtype, inputs[1]._shape)],
            _gather_grad_kernel,
            grad=lambda op, g: [gather(g, op.inputs[2], axis=op.attrs["axis"]), None, None])
register_op("FlattenLeading", _flatten_leading_shape, _flatten_leading_kernel,
            grad=lambda op, g: [reshape_like(g, op.inputs[0]), None])


def gather(params, indices, validate_indices=None, name=None, axis=0) -> Tensor:
    """Rows (slices along ``axis``) of ``params`` at ``indices``: ``tv.gather(emb, ids)``.
    Out-of-range indices fail; the gradient along axis 0 is an IndexedSlices."""
    ax = static_int(axis, "axis", "GatherV2")
    return apply_op("GatherV2", [params, indices], {"axis": ax}, name=name).outputs[0]


# ---- segment sums: the dense form of sparse gradients ------------------------------------------
def _segment_sum(values, ids, out_shape, op):
    k = ids.ndim
    if values.shape[:k] != ids.shape:
        raise InvalidArgumentError(f"{op}: segment_ids shape {list(ids.shape)} is not a prefix "
                                   f"of the data shape {list(values.shape)}")
    tail = values.shape[k:]
    if tuple(out_shape[1:]) != tail:
        raise InvalidArgumentError(f"{op}: rows of shape {list(tail)} do not fit an output of "
                                   f"shape {list(out_shape)}")
    n = int(out_shape[0])
    flat = ids.reshape(-1)
    vals = values.reshape((flat.size,) + tail)
    xp = array_namespace(values)
    if xp is not np:
        # ids in host memory (kernels_gpu.HOST_MEMORY_INPUTS) are checked there; ids a GPU
        # op made cost one flag to the host. Negative ids are dropped into a spare row
        # instead of asked about.
        host = array_namespace(flat) is np
        if flat.size and (flat.max() >= n if host else bool((flat >= n).any())):
            top = int(flat.max())
            raise InvalidArgumentError(f"{op}: segment id {top} is out of range [0, {n})")
        out = xp.zeros((n + 1,) + tuple(out_shape[1:]), dtype=values.dtype)
        add_at(out, xp.asarray(np.where(flat < 0, n, flat)), vals)
        return out[:n]
    keep = flat >= 0
    if not keep.all():
        flat, vals = flat[keep], vals[keep]
    if flat.size:
        top = flat.max()
        if top >= n:
            raise InvalidArgumentError(f"{op}: segment id {int(top)} is out of range [0, {n})")
    out = xp.zeros(tuple(out_shape), dtype=values.dtype)
    add_at(out, flat, vals)
    return out


def _gather_drop_negatives_kernel(params, ids):
    # on a GPU the ids are read in host memory (kernels_gpu.HOST_MEMORY_INPUTS): "any
    # negative?" is asked there, and the ids and mask uploaded
    xp = array_namespace(params)
    neg = ids < 0
    out = np.take(params, xp.asarray(np.maximum(ids, 0)), axis=0)
    if neg.any():
        mask = xp.asarray(neg).reshape(neg.shape + (1,) * (out.ndim - neg.ndim))
        out = np.where(mask, out.dtype.type(0), out)
    return out


def _gather_drop_negatives_shape(inputs, attrs):
    p, ids = inputs
    if p._shape is None or ids._shape is None:
        return [(p.dtype, None)]
    return [(p.dtype, ids._shape + p._shape[1:])]


register_op("GatherDropNegatives", _gather_drop_negatives_shape, _gather_drop_negatives_kernel,
            grad=lambda op, g: [unsorted_segment_sum_like(g, op.inputs[1], op.inputs[0]), None])


def _segment_tail(data, ids, op):
    check_int_dtype(ids, "segment_ids", op)
    if not shape_is_prefix(ids._shape, data._shape):
        raise InvalidArgumentError(f"{op}: segment_ids shape {list(ids._shape)} is not a prefix "
                                   f"of the data shape {list(data._shape)}")
    if data._shape is None or ids._shape is None:
        return None
    return data._shape[len(ids._shape):]


def _uss_shape(inputs, attrs):
    data, ids, num = inputs
    check_int_dtype(num, "num_segments", "UnsortedSegmentSum")
    if num._shape not in ((), None):
        raise InvalidArgumentError("UnsortedSegmentSum: num_segments must be a scalar")
    tail = _segment_tail(data, ids, "UnsortedSegmentSum")
    n = static_value(num)
    return [(data.dtype, None if tail is None else (None if n is None else int(n),) + tail)]


def _uss_kernel(data, ids, num_segments):
    n = int(num_segments)
    return _segment_sum(data, ids, (n,) + data.shape[ids.ndim:], "UnsortedSegmentSum")


register_op("UnsortedSegmentSum", _uss_shape, _uss_kernel,
            grad=lambda op, g: [apply_op("GatherDropNegatives", [g, op.inputs[1]]).outputs[0],
                                None, None])


def unsorted_segment_sum(data, segment_ids, num_segments, name=None) -> Tensor:
    """``out[segment_ids[i]] += data[i]`` over ``num_segments`` rows (negative ids dropped)."""
    return apply_op("UnsortedSegmentSum", [data, segment_ids, num_segments],
                    name=name).outputs[0]


def _scatter_like_shape(inputs, attrs):
    values, ids, like = inputs
    tail = _segment_tail(values, ids, "ScatterRowsInto")
    target = static_shape_of(like) if attrs["like_is_shape"] else like._shape
    if tail is not None and target is not None and len(target) != len(tail) + 1:
        raise InvalidArgumentError(f"ScatterRowsInto: rows of shape {list(tail)} do not fit a "
                                   f"tensor of shape {list(target)}")
    return [(values.dtype, target)]


def _scatter_like_kernel(values, ids, like, like_is_shape):
    target = tuple(int(d) for d in like) if like_is_shape else np.shape(like)
    return _segment_sum(values, ids, target, "ScatterRowsInto")


register_op("ScatterRowsInto", _scatter_like_shape, _scatter_like_kernel,
            grad=lambda op, g: [apply_op("GatherDropNegatives", [g, op.inputs[1]]).outputs[0],
                                None, None])


def unsorted_segment_sum_like(values, indices, like, name=None) -> Tensor:
    """Sum the rows of ``values`` into zeros at ``indices`` (``dense[indices[i]] += values[i]``).

    ``like`` is either a tensor to mimic (its shape; normally of ``values``' dtype) or a 1-D
    integer shape tensor (an IndexedSlices' ``dense_shape``): an integer 1-D ``like`` whose dtype
    differs from ``values``' is taken as a shape.
    """
    values, like = convert_to_tensor(values), convert_to_tensor(like)
    is_shape = (like.dtype.is_integer and like.dtype != values.dtype
                and like._shape is not None and len(like._shape) == 1)
    return apply_op("ScatterRowsInto", [values, indices, like], {"like_is_shape": is_shape},
                    name=name).outputs[0]


def densify(g, like: Tensor | None = None):
    """An IndexedSlices as a dense tensor (shaped like ``like``, else its ``dense_shape``); a
    dense tensor as is."""
    if not isinstance(g, IndexedSlices):
        return g
    return unsorted_segment_sum_like(g.values, g.indices, like if like is not None
                                     else g.dense_shape)


_LARGE_DENSE = 100_000_000  # elements; TF warns above this too


def _indexed_slices_to_tensor(value: IndexedSlices, dtype, name, graph):
    """The implicit conversion (TF's ``_IndexedSlicesToTensor``): densify, warning when the
    dense shape is unknown or large, as a sparse gradient becoming dense may use much memory."""
    if value.dense_shape is None:
        raise ValueError(f"Tensor conversion requested for IndexedSlices {value.name!r} without "
                         "dense_shape")
    static = static_value(value.dense_shape)
    if static is None:
        warnings.warn("Converting sparse IndexedSlices to a dense Tensor of unknown shape. "
                      "This may consume a large amount of memory.", stacklevel=4)
    elif int(np.prod(static)) > _LARGE_DENSE:
        warnings.warn(f"Converting sparse IndexedSlices to a dense Tensor with "
                      f"{int(np.prod(static))} elements. This may consume a large amount of "
                      "memory.", stacklevel=4)
    return densify(value)


register_tensor_conversion_function(IndexedSlices, _indexed_slices_to_tensor, priority=50)


# ---- gather_nd, scatter_nd -------------------------------------------------------------------
def _nd_index(indices, shape_, op, xp=np):
    """The index tuple of ``indices`` (``[..., k]``) into an array of ``shape_`` living in
    ``xp``, range-checked. On a GPU the indices are read in host memory
    (kernels_gpu.HOST_MEMORY_INPUTS): checked there, then uploaded."""
    k = indices.shape[-1]
    if k > len(shape_):
        raise InvalidArgumentError(f"{op}: index depth {k} exceeds the rank {len(shape_)}")
    for j in range(k):
        check_index_range(indices[..., j], shape_[j], op, what=f"indices[..., {j}]")
    if xp is not np:
        indices = xp.asarray(indices)
    return tuple(np.moveaxis(indices, -1, 0))


def _gather_nd_shape(inputs, attrs):
    p, i = inputs
    check_int_dtype(i, "indices", "GatherNd")
    if p._shape is None or i._shape is None or i._shape[-1:] == (None,):
        return [(p.dtype, None)]
    if not i._shape:
        raise InvalidArgumentError("GatherNd: indices must be at least 1-D")
    k = i._shape[-1]
    if k > len(p._shape):
        raise InvalidArgumentError(f"GatherNd: index depth {k} exceeds the rank of params "
                                   f"{list(p._shape)}")
    return [(p.dtype, i._shape[:-1] + p._shape[k:])]


def _gather_nd_kernel(params, indices):
    idx = _nd_index(indices, params.shape, "GatherNd", array_namespace(params))
    return params[idx] if idx else np.broadcast_to(params, indices.shape[:-1] + params.shape)


def _scatter_nd_kernel(indices, updates, shape):
    xp = array_namespace(updates)
    out = xp.zeros(tuple(int(d) for d in shape), dtype=updates.dtype)
    add_at(out, _nd_index(indices, out.shape, "ScatterNd", xp), updates)
    return out


def _scatter_nd_shape(inputs, attrs):
    i, u, s = inputs
    check_int_dtype(i, "indices", "ScatterNd")
    target = static_shape_of(s)
    if target is not None and i._shape is not None and u._shape is not None and \
            i._shape[-1] is not None:
        want = i._shape[:-1] + tuple(target[i._shape[-1]:])
        if len(want) != len(u._shape) or any(
                a is not None and b is not None and a != b for a, b in zip(want, u._shape)):
            raise InvalidArgumentError(f"ScatterNd: updates of shape {list(u._shape)} do not "
                                       f"match indices {list(i._shape)} and shape "
                                       f"{list(target)} (expected {list(want)})")
    return [(u.dtype, target)]


register_op("GatherNd", _gather_nd_shape, _gather_nd_kernel,
            grad=lambda op, g: [scatter_nd(op.inputs[1], g, shape(op.inputs[0])), None])
register_op("ScatterNd", _scatter_nd_shape, _scatter_nd_kernel,
            grad=lambda op, g: [None, gather_nd(g, op.inputs[0]), None])


def gather_nd(params, indices, name=None) -> Tensor:
    """``out[i] = params[indices[i]]`` where each ``indices[i]`` is a (partial) index tuple."""
    return apply_op("GatherNd", [params, indices], name=name).outputs[0]


def scatter_nd(indices, updates, shape, name=None) -> Tensor:
    """Zeros of ``shape`` with ``updates`` added at ``indices`` (duplicates are summed)."""
    from .array_ops import shape_tensor
    return apply_op("ScatterNd", [indices, updates, shape_tensor(shape, "ScatterNd")],
                    name=name).outputs[0]
