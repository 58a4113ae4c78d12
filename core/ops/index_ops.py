"""Indexing ops: gather (with a sparse gradient), gather_nd/scatter_nd, segment sums,
dynamic_partition/dynamic_stitch, boolean_mask, one_hot, sort/argsort/top_k, unique.

Re-exported by :mod:`tensorvm.ops.manip_ops` (so they are ``tv.gather`` …). The gradient of
``gather`` along axis 0 is an :class:`~tensorvm.gradients.IndexedSlices`; ``densify`` turns one
into a dense tensor with :func:`unsorted_segment_sum_like`.

>>> import tensorvm as tv
>>> p = tv.constant([[1., 2.], [3., 4.], [5., 6.]])
>>> with tv.Session() as s: s.run(tv.gather(p, [2, 0])).tolist()
[[5.0, 6.0], [1.0, 2.0]]
"""
from __future__ import annotations

import numpy as np

from .. import dtypes as _dt
from ..errors import InvalidArgumentError
from ..graph import Tensor
from ..registry import apply_op, convert_to_tensor, register_op
from .array_ops import reshape, reshape_like, shape
from .manip_ops import (dense_or_zeros, norm_axis, outs, rank_of, static_int, static_shape_of,
                        static_value)

__all__ = ["gather", "gather_nd", "scatter_nd", "unsorted_segment_sum", "dynamic_partition",
           "dynamic_stitch", "boolean_mask", "one_hot", "sort", "argsort", "top_k", "unique",
           "unique_with_counts"]


def _check_int(t: Tensor, what: str, op: str):
    if not t.dtype.is_integer:
        raise InvalidArgumentError(f"{op}: {what} must be int32 or int64, got {t.dtype.name}")


def _check_range(indices, n, op, what="indices"):
    """Raise InvalidArgumentError (naming the first bad entry) unless 0 <= indices < n."""
    if indices.size == 0:
        return
    bad = (indices < 0) | (indices >= n)
    if bad.any():
        pos = tuple(int(i) for i in np.argwhere(bad)[0])
        raise InvalidArgumentError(f"{op}: {what}{list(pos)} = {indices[pos]} is not in "
                                   f"[0, {n})")


def _is_prefix(prefix, full):
    if prefix is None or full is None:
        return True
    if len(prefix) > len(full):
        return False
    return all(a is None or b is None or a == b for a, b in zip(prefix, full))


# ---- gather -----------------------------------------------------------------------------------
def _gather_shape(inputs, attrs):
    p, i = inputs
    _check_int(i, "indices", "GatherV2")
    if p._shape is not None and not p._shape:
        raise InvalidArgumentError("GatherV2: params must be at least 1-D, got a scalar")
    if p._shape is None or i._shape is None:
        return [(p.dtype, None)]
    a = norm_axis(attrs["axis"], len(p._shape), "GatherV2")
    return [(p.dtype, p._shape[:a] + i._shape + p._shape[a + 1:])]


def _gather_kernel(params, indices, axis):
    _check_range(indices, params.shape[axis], "GatherV2")
    return np.take(params, indices, axis=axis)


def _gather_grad_kernel(g, params, indices, axis):
    axis %= params.ndim
    out = np.zeros(params.shape, dtype=g.dtype)
    moved = np.moveaxis(out, axis, 0)
    k = indices.ndim
    gm = np.moveaxis(g, tuple(range(axis, axis + k)), tuple(range(k)))
    np.add.at(moved, indices.reshape(-1), gm.reshape((indices.size,) + moved.shape[1:]))
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
    from ..gradients import IndexedSlices
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
    keep = flat >= 0
    if not keep.all():
        flat, vals = flat[keep], vals[keep]
    if flat.size and flat.max() >= n:
        raise InvalidArgumentError(f"{op}: segment id {flat.max()} is out of range [0, {n})")
    out = np.zeros(tuple(out_shape), dtype=values.dtype)
    np.add.at(out, flat, vals)
    return out


def _gather_drop_negatives_kernel(params, ids):
    out = np.take(params, np.maximum(ids, 0), axis=0)
    neg = ids < 0
    if neg.any():
        out = np.where(neg.reshape(neg.shape + (1,) * (out.ndim - neg.ndim)),
                       np.zeros((), out.dtype), out)
    return out


def _gather_drop_negatives_shape(inputs, attrs):
    p, ids = inputs
    if p._shape is None or ids._shape is None:
        return [(p.dtype, None)]
    return [(p.dtype, ids._shape + p._shape[1:])]


register_op("GatherDropNegatives", _gather_drop_negatives_shape, _gather_drop_negatives_kernel,
            grad=lambda op, g: [unsorted_segment_sum_like(g, op.inputs[1], op.inputs[0]), None])


def _segment_tail(data, ids, op):
    _check_int(ids, "segment_ids", op)
    if not _is_prefix(ids._shape, data._shape):
        raise InvalidArgumentError(f"{op}: segment_ids shape {list(ids._shape)} is not a prefix "
                                   f"of the data shape {list(data._shape)}")
    if data._shape is None or ids._shape is None:
        return None
    return data._shape[len(ids._shape):]


def _uss_shape(inputs, attrs):
    data, ids, num = inputs
    _check_int(num, "num_segments", "UnsortedSegmentSum")
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


# ---- gather_nd, scatter_nd -------------------------------------------------------------------
def _nd_index(indices, shape_, op):
    k = indices.shape[-1]
    if k > len(shape_):
        raise InvalidArgumentError(f"{op}: index depth {k} exceeds the rank {len(shape_)}")
    for j in range(k):
        _check_range(indices[..., j], shape_[j], op, what=f"indices[..., {j}]")
    return tuple(np.moveaxis(indices, -1, 0))


def _gather_nd_shape(inputs, attrs):
    p, i = inputs
    _check_int(i, "indices", "GatherNd")
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
    idx = _nd_index(indices, params.shape, "GatherNd")
    return params[idx] if idx else np.broadcast_to(params, indices.shape[:-1] + params.shape)


def _scatter_nd_kernel(indices, updates, shape):
    out = np.zeros(tuple(int(d) for d in shape), dtype=updates.dtype)
    np.add.at(out, _nd_index(indices, out.shape, "ScatterNd"), updates)
    return out


def _scatter_nd_shape(inputs, attrs):
    i, u, s = inputs
    _check_int(i, "indices", "ScatterNd")
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
    from .manip_ops import shape_tensor
    return apply_op("ScatterNd", [indices, updates, shape_tensor(shape, "ScatterNd")],
                    name=name).outputs[0]


# ---- dynamic_partition, dynamic_stitch --------------------------------------------------------
def _partition_shape(inputs, attrs):
    data, parts = inputs
    n = attrs["num_partitions"]
    if n < 1:
        raise InvalidArgumentError(f"DynamicPartition: num_partitions must be >= 1, got {n}")
    _check_int(parts, "partitions", "DynamicPartition")
    if not _is_prefix(parts._shape, data._shape):
        raise InvalidArgumentError(f"DynamicPartition: partitions shape {list(parts._shape)} "
                                   f"is not a prefix of the data shape {list(data._shape)}")
    if data._shape is None or parts._shape is None:
        return [(data.dtype, None)] * n
    return [(data.dtype, (None,) + data._shape[len(parts._shape):])] * n


def _partition_kernel(data, partitions, num_partitions):
    if data.shape[:partitions.ndim] != partitions.shape:
        raise InvalidArgumentError(f"DynamicPartition: partitions shape "
                                   f"{list(partitions.shape)} is not a prefix of the data shape "
                                   f"{list(data.shape)}")
    p = partitions.reshape(-1)
    _check_range(p, num_partitions, "DynamicPartition", "partitions")
    flat = data.reshape((p.size,) + data.shape[partitions.ndim:])
    order = np.argsort(p, kind="stable")
    counts = np.bincount(p, minlength=num_partitions)
    return outs(np.split(flat[order], np.cumsum(counts)[:-1]))


def _partition_grad_kernel(partitions, *gs):
    p = partitions.reshape(-1)
    tail = gs[0].shape[1:]
    out = np.empty((p.size,) + tail, dtype=gs[0].dtype)
    out[np.argsort(p, kind="stable")] = np.concatenate(gs)
    return out.reshape(partitions.shape + tail)


def _partition_grad_shape(inputs, attrs):
    parts, g0 = inputs[0], inputs[1]
    if parts._shape is None or g0._shape is None:
        return [(g0.dtype, None)]
    return [(g0.dtype, parts._shape + g0._shape[1:])]


register_op("DynamicPartition", _partition_shape, _partition_kernel,
            grad=lambda op, *gs: [apply_op("DynamicPartitionGrad", [op.inputs[1]] + [
                dense_or_zeros(g, o) for g, o in zip(gs, op.outputs)]).outputs[0], None])
register_op("DynamicPartitionGrad", _partition_grad_shape, _partition_grad_kernel,
            grad=lambda op, g: [None] + dynamic_partition(g, op.inputs[0],
                                                          len(op.inputs) - 1))


def dynamic_partition(data, partitions, num_partitions, name=None) -> list[Tensor]:
    """Split ``data`` into ``num_partitions`` tensors by the partition id of each row."""
    n = static_int(num_partitions, "num_partitions", "DynamicPartition")
    return list(apply_op("DynamicPartition", [data, partitions], {"num_partitions": n},
                         name=name).outputs)


def _stitch_shape(inputs, attrs):
    n = attrs["n"]
    idx, data = inputs[:n], inputs[n:]
    if n < 1 or len(data) != n:
        raise InvalidArgumentError(f"DynamicStitch: needs as many data tensors as index tensors "
                                   f"(at least one), got {n} and {len(data)}")
    from .common import check_same_dtype
    dt = check_same_dtype(data, "DynamicStitch")
    for i, d in zip(idx, data):
        _check_int(i, "indices", "DynamicStitch")
        if not _is_prefix(i._shape, d._shape):
            raise InvalidArgumentError(f"DynamicStitch: indices shape {list(i._shape)} is not a "
                                       f"prefix of the data shape {list(d._shape)}")
    if idx[0]._shape is None or data[0]._shape is None:
        return [(dt, None)]
    return [(dt, (None,) + data[0]._shape[len(idx[0]._shape):])]


def _stitch_kernel(*args, n):
    idx, data = args[:n], args[n:]
    tail = data[0].shape[idx[0].ndim:]
    flat_i = np.concatenate([i.reshape(-1) for i in idx])
    flat_d = np.concatenate([d.reshape((i.size,) + tail) for i, d in zip(idx, data)])
    if flat_i.size and flat_i.min() < 0:
        raise InvalidArgumentError(f"DynamicStitch: negative index {flat_i.min()}")
    out = np.zeros((int(flat_i.max()) + 1 if flat_i.size else 0,) + tail, dtype=data[0].dtype)
    out[flat_i] = flat_d
    return out


register_op("DynamicStitch", _stitch_shape, _stitch_kernel,
            grad=lambda op, g: [None] * op.attrs["n"]
            + [gather(g, i) for i in op.inputs[:op.attrs["n"]]])


def dynamic_stitch(indices, data, name=None) -> Tensor:
    """Interleave ``data`` tensors into one: ``merged[indices[m][i]] = data[m][i]``."""
    if len(indices) != len(data):
        raise InvalidArgumentError(f"DynamicStitch: {len(indices)} index tensors for "
                                   f"{len(data)} data tensors")
    return apply_op("DynamicStitch", list(indices) + list(data), {"n": len(indices)},
                    name=name).outputs[0]


# ---- boolean_mask -----------------------------------------------------------------------------
def _bmask_shape(inputs, attrs):
    x, m = inputs[0], inputs[1]
    if not m.dtype.is_bool:
        raise InvalidArgumentError(f"BooleanMask: mask must be bool, got {m.dtype.name}")
    if m._shape is None or x._shape is None:
        return [(x.dtype, None)]
    k, a = len(m._shape), attrs["axis"]
    if k == 0:
        raise InvalidArgumentError("BooleanMask: mask cannot be a scalar")
    if a < 0 or a + k > len(x._shape):
        raise InvalidArgumentError(f"BooleanMask: a mask of rank {k} at axis {a} does not fit "
                                   f"a tensor of rank {len(x._shape)}")
    if not _is_prefix(m._shape, x._shape[a:]):
        raise InvalidArgumentError(f"BooleanMask: mask shape {list(m._shape)} does not match "
                                   f"the tensor's dimensions {list(x._shape[a:a + k])}")
    return [(x.dtype, x._shape[:a] + (None,) + x._shape[a + k:])]


def _bmask_index(x_shape, mask, axis):
    if tuple(x_shape[axis:axis + mask.ndim]) != mask.shape:
        raise InvalidArgumentError(f"BooleanMask: mask shape {list(mask.shape)} does not match "
                                   f"the tensor's dimensions {list(x_shape[axis:])}")
    return (slice(None),) * axis + (mask,)


def _bmask_grad_kernel(g, x, mask, axis):
    out = np.zeros(np.shape(x), dtype=g.dtype)
    out[_bmask_index(out.shape, mask, axis)] = g
    return out


register_op("BooleanMask", _bmask_shape,
            lambda x, mask, axis: x[_bmask_index(x.shape, mask, axis)],
            grad=lambda op, g: [apply_op("BooleanMaskGrad", [g, *op.inputs], op.attrs)
                                .outputs[0], None])
register_op("BooleanMaskGrad", lambda inputs, attrs: [(inputs[0].dtype, inputs[1]._shape)],
            _bmask_grad_kernel,
            grad=lambda op, g: [boolean_mask(g, op.inputs[2], axis=op.attrs["axis"]), None,
                                None])


def boolean_mask(tensor, mask, name: str = "boolean_mask", axis=None) -> Tensor:
    """The entries of ``tensor`` where ``mask`` (matching dims ``axis:axis+rank(mask)``) is
    True, flattened into one dimension."""
    x, m = convert_to_tensor(tensor), convert_to_tensor(mask)
    a = 0 if axis is None else static_int(axis, "axis", "BooleanMask")
    if a < 0 and rank_of(x) is not None:
        a += rank_of(x)
    return apply_op("BooleanMask", [x, m], {"axis": a}, name=name).outputs[0]


# ---- one_hot ----------------------------------------------------------------------------------
def _one_hot_shape(inputs, attrs):
    i, on, off = inputs
    _check_int(i, "indices", "OneHot")
    if on.dtype != off.dtype or on._shape not in ((), None) or off._shape not in ((), None):
        raise InvalidArgumentError(f"OneHot: on_value and off_value must be scalars of one "
                                   f"dtype, got {on!r} and {off!r}")
    if attrs["depth"] < 0:
        raise InvalidArgumentError(f"OneHot: depth must be >= 0, got {attrs['depth']}")
    if i._shape is None:
        return [(on.dtype, None)]
    a = attrs["axis"]
    if not -1 <= a <= len(i._shape):
        raise InvalidArgumentError(f"OneHot: axis {a} must be in [-1, {len(i._shape)}]")
    a = len(i._shape) if a == -1 else a
    return [(on.dtype, i._shape[:a] + (attrs["depth"],) + i._shape[a:])]


def _one_hot_kernel(indices, on, off, depth, axis):
    out = np.where(indices[..., None] == np.arange(depth), on, off).astype(on.dtype, copy=False)
    return out if axis == -1 else np.moveaxis(out, -1, axis)


register_op("OneHot", _one_hot_shape, _one_hot_kernel, differentiable=False)


def one_hot(indices, depth, on_value=None, off_value=None, axis=None, dtype=None,
            name=None) -> Tensor:
    """``tv.one_hot([0, 2], 3)`` → ``[[1, 0, 0], [0, 0, 1]]`` (float32); indices out of
    ``[0, depth)`` give a row of ``off_value``."""
    d = static_int(depth, "depth", "OneHot")
    if dtype is None:
        given = on_value if on_value is not None else off_value
        dtype = _dt.float32 if given is None else given.dtype if isinstance(given, Tensor) \
            else _dt.dtype_of_value(given)
    dt = _dt.as_dtype(dtype)
    on = convert_to_tensor(1 if on_value is None else on_value, dtype=dt)
    off = convert_to_tensor(0 if off_value is None else off_value, dtype=dt)
    return apply_op("OneHot", [indices, on, off], {"depth": d, "axis": -1 if axis is None
                                                   else int(axis)}, name=name).outputs[0]


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
    out = np.zeros(np.shape(like), dtype=g.dtype)
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
    rank[order] = np.arange(order.size)
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
