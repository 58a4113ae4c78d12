"""Indexing ops: gather (with a sparse gradient), gather_nd/scatter_nd, segment sums, and
``densify`` with the implicit conversion of an IndexedSlices to a dense tensor; the segment
reductions (``segment_*``, ``unsorted_segment_*``), ``tensor_scatter_nd_*``, ``batch_gather``,
``searchsorted``, ``bincount``, ``setdiff1d``, ``invert_permutation``, ``unravel_index``,
``roll``, ``repeat``, ``space_to_depth``/``depth_to_space`` and
``space_to_batch_nd``/``batch_to_space_nd``.

Siblings: :mod:`~tensorvm.ops.array.partition_ops` (dynamic_partition/stitch, boolean_mask, one_hot),
:mod:`~tensorvm.ops.array.sort_ops` (sort, argsort, top_k, unique). The gradient of
``gather`` along axis 0 is an :class:`~tensorvm.framework.indexed_slices.IndexedSlices`; ``densify`` turns one
into a dense tensor with :func:`unsorted_segment_sum_like`.

>>> import tensorvm as tv
>>> p = tv.constant([[1., 2.], [3., 4.], [5., 6.]])
>>> with tv.Session() as s: s.run(tv.gather(p, [2, 0])).tolist()
[[5.0, 6.0], [1.0, 2.0]]
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
from ..common import (add_at,
    check_index_range,
    check_int_dtype,
    norm_axis,
    rank_of,
    shape_is_prefix,
    static_int,
    static_shape_of,
    static_value,
)

__all__ = ["gather", "gather_nd", "scatter_nd", "unsorted_segment_sum", "densify"]


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


# ---- segment reductions: max, min, prod (unsorted), and every sorted segment_* ------------------
# TF's rules: an empty segment of an unsorted max (min) is the dtype's lowest (highest) value, of
# a prod 1; of a sorted segment op 0 (prod: 1). Negative ids of the unsorted ops drop their row;
# the sorted ops need non-negative, non-decreasing ids and have ids[-1] + 1 rows.
_AT = {"max": "maximum", "min": "minimum", "prod": "multiply", "sum": "add"}


def _fill_for(kind, dtype):
    d = np.dtype(dtype)
    if kind == "prod":
        return 1
    if kind == "sum":
        return 0
    if d.kind == "f":
        info = np.finfo(d)
        return info.min if kind == "max" else info.max
    if d.kind in "iu":
        info = np.iinfo(d)
        return info.min if kind == "max" else info.max
    return kind != "max"  # bool


def _reduce_at(out, idx, vals, kind) -> None:
    """``out[idx] = op(out[idx], vals)`` with repeated indices reduced (``ufunc.at``), on the
    device of ``out`` (CuPy: its ``ufunc.at``, else ``cupyx.scatter_max/min``)."""
    if kind == "sum":
        add_at(out, idx, vals)
        return
    xp = array_namespace(out)
    uf = getattr(xp, _AT[kind])
    if xp is np or hasattr(uf, "at"):
        uf.at(out, idx, vals)
        return
    import cupyx
    if kind == "prod":
        raise InvalidArgumentError("segment products are not supported on this GPU backend")
    (cupyx.scatter_max if kind == "max" else cupyx.scatter_min)(out, idx, vals)


def _segment_reduce(data, ids, n, kind, op, empty):
    """The reduction of ``data``'s rows by ``ids`` into ``n`` rows (negative ids dropped);
    rows no id reaches hold ``empty``."""
    k = ids.ndim
    if data.shape[:k] != ids.shape:
        raise InvalidArgumentError(f"{op}: segment_ids shape {list(ids.shape)} is not a prefix "
                                   f"of the data shape {list(data.shape)}")
    tail = data.shape[k:]
    flat = ids.reshape(-1)
    vals = data.reshape((flat.size,) + tail)
    xp = array_namespace(data)
    keep = flat >= 0
    host_ids = array_namespace(flat) is np
    if host_ids:
        if flat.size and flat.max() >= n:
            _bad_id(ids, n)
        if not keep.all():
            pos = np.nonzero(keep)[0]  # positions, not a mask: no size to read back
            flat, vals = flat[pos], vals[xp.asarray(pos) if xp is not np else pos]
        flat = xp.asarray(flat) if xp is not np else flat
    else:
        # ids made on the device are not range-checked (TF's GPU segment kernels do not
        # check them either; asking would make the host wait): a negative or too large id
        # drops its row into a spare one
        flat = xp.where(keep & (flat < n), flat, n)
    rows = n + (0 if host_ids else 1)
    out = xp.full((rows,) + tail, _fill_for(kind, data.dtype), dtype=data.dtype)
    _reduce_at(out, flat, vals, kind)
    out = out[:n]
    if empty is not None:  # the sorted ops: empty segments are 0
        hit = xp.zeros((rows,), dtype=bool)
        hit[flat] = True
        out = xp.where(hit[:n].reshape((n,) + (1,) * len(tail)), out, data.dtype.type(empty))
    return out


def _bad_id(ids, n):
    pos = tuple(int(i) for i in np.argwhere(np.asarray(ids) >= n)[0])
    raise InvalidArgumentError(f"segment_ids[{','.join(map(str, pos))}] = "
                               f"{np.asarray(ids)[pos]} is out of range [0, {n})")


def _check_sorted_ids(ids, op):
    """The sorted ops' ids: non-negative and non-decreasing (checked in host memory)."""
    from ...vm.kernels.array_api import to_host
    h = np.asarray(to_host(ids)).reshape(-1)
    if h.size > 1 and (np.diff(h) < 0).any():
        raise InvalidArgumentError("segment ids are not increasing")
    if h.size and h[0] < 0:
        raise InvalidArgumentError(f"Segment id {h[0]} out of range [0, {max(h[-1] + 1, 0)}), "
                                   "possibly because 'segment_ids' input is not sorted.")
    return int(h[-1]) + 1 if h.size else 0


def _unsorted_kernel(kind):
    def kernel(data, ids, num_segments):
        from ...vm.kernels.array_api import to_host
        n = int(np.asarray(to_host(num_segments)))
        return _segment_reduce(data, ids, n, kind, f"UnsortedSegment{kind.capitalize()}", None)
    kernel.__name__ = f"_unsorted_segment_{kind}_kernel"
    return kernel


def _sorted_kernel(kind):
    def kernel(data, ids):
        op = f"Segment{kind.capitalize()}"
        if ids.ndim != 1:
            raise InvalidArgumentError(f"{op}: segment_ids should be a vector, got shape "
                                       f"{list(ids.shape)}")
        n = _check_sorted_ids(ids, op)
        empty = 1 if kind == "prod" else 0
        return _segment_reduce(data, ids, n, kind, op, empty)
    kernel.__name__ = f"_segment_{kind}_kernel"
    return kernel


def _sorted_shape(op_type):
    def shape_fn(inputs, attrs):
        data, ids = inputs
        tail = _segment_tail(data, ids, op_type)
        if ids._shape is not None and len(ids._shape) != 1:
            raise InvalidArgumentError(f"{op_type}: segment_ids should be a vector, got shape "
                                       f"{list(ids._shape)}")
        if op_type != "SegmentSum" and not (data.dtype.is_floating or data.dtype.is_integer):
            raise InvalidArgumentError(f"{op_type} needs a real numeric tensor, got "
                                       f"{data.dtype.name}")
        return [(data.dtype, None if tail is None else (None,) + tail)]
    return shape_fn


def _unsorted_shape(op_type):
    def shape_fn(inputs, attrs):
        data = inputs[0]
        if not (data.dtype.is_floating or data.dtype.is_integer):
            raise InvalidArgumentError(f"{op_type} needs a real numeric tensor, got "
                                       f"{data.dtype.name}")
        (dt, s), = _uss_shape(inputs, attrs)
        return [(dt, s)]
    return shape_fn


def _num_segments(op):
    if len(op.inputs) == 3:
        return op.inputs[2]
    return shape(op.outputs[0], out_type=op.inputs[1].dtype)[0]


def _drop_negatives(t, ids):
    return apply_op("GatherDropNegatives", [t, ids]).outputs[0]


def _segment_minmax_grad(op, g):  # TF's _UnsortedSegmentMinOrMaxGrad / _SegmentMinOrMaxGrad
    from .array_ops import zeros_like
    from ..math.math_ext import div_no_nan, equal, where_
    from ..math.math_ops import cast
    data, ids = op.inputs[0], op.inputs[1]
    is_selected = equal(data, _drop_negatives(op.outputs[0], ids))
    num_selected = unsorted_segment_sum(cast(is_selected, g.dtype), ids, _num_segments(op))
    # (TF divides: an empty segment's inf is never selected; div_no_nan spares the warning)
    weighted = div_no_nan(g, num_selected)
    gathered = _drop_negatives(weighted, ids)
    return [where_(is_selected, gathered, zeros_like(gathered))] + [None] * (len(op.inputs) - 1)


def _segment_prod_grad(op, g):  # TF's _UnsortedSegmentProdGrad
    from .array_ops import ones_like, zeros_like
    from ..math.math_ext import div_no_nan, equal, greater, maximum, where_
    from ..math.math_ops import cast
    data, ids = op.inputs[0], op.inputs[1]
    num = _num_segments(op)
    is_zero = equal(data, zeros_like(data))
    num_zeros = unsorted_segment_sum(cast(is_zero, g.dtype), ids, num)
    g = where_(greater(num_zeros, 1), zeros_like(g), g)
    non_zero_data = where_(is_zero, ones_like(data), data)
    non_zero_prod = apply_op("UnsortedSegmentProd", [non_zero_data, ids, num]).outputs[0]
    clipped = maximum(ids, zeros_like(ids))
    gathered_prod = gather(op.outputs[0], clipped)
    gathered_non_zero_prod = gather(non_zero_prod, clipped)
    partial = where_(is_zero, gathered_non_zero_prod, div_no_nan(gathered_prod, data))
    return [_drop_negatives(g, ids) * partial] + [None] * (len(op.inputs) - 1)


def _segment_sum_grad(op, g):
    return [gather(g, op.inputs[1]), None]


def _segment_mean_grad(op, g):  # TF's _SegmentMeanGrad
    from .array_ops import ones_like
    from ..math.math_ext import div_no_nan
    data, ids = op.inputs
    counts = apply_op("SegmentSum", [ones_like(data), ids]).outputs[0]
    return [gather(div_no_nan(g, counts), ids), None]  # (an empty segment is never gathered)


def _segment_mean_kernel(data, ids):
    s = _sorted_kernel("sum")(data, ids)
    ones = array_namespace(data).ones(data.shape, data.dtype)
    c = _sorted_kernel("sum")(ones, ids)
    c = np.where(c == 0, data.dtype.type(1), c)
    return (s / c).astype(data.dtype, copy=False) if data.dtype.kind == "f" else s // c


# CuPy has no multiply.at (no atomic product): segment products run on the host
_NO_GPU_PROD = "segment products need ufunc.at for multiply, which CuPy lacks"
for _kind, _grad in (("max", _segment_minmax_grad), ("min", _segment_minmax_grad),
                     ("prod", _segment_prod_grad)):
    _t = f"UnsortedSegment{_kind.capitalize()}"
    register_op(_t, _unsorted_shape(_t), _unsorted_kernel(_kind), grad=_grad,
                cpu_only=_NO_GPU_PROD if _kind == "prod" else "")
for _kind, _grad in (("sum", _segment_sum_grad), ("max", _segment_minmax_grad),
                     ("min", _segment_minmax_grad), ("prod", _segment_prod_grad)):
    _t = f"Segment{_kind.capitalize()}"
    register_op(_t, _sorted_shape(_t), _sorted_kernel(_kind), grad=_grad,
                cpu_only=_NO_GPU_PROD if _kind == "prod" else "")
register_op("SegmentMean", _sorted_shape("SegmentMean"), _segment_mean_kernel,
            grad=_segment_mean_grad)
del _kind, _grad, _t


def _segment_doc(what, sorted_, empty):
    ids = ("``segment_ids`` (1-D, non-negative, sorted) select the output row of each row of "
           "``data``; the output has ``segment_ids[-1] + 1`` rows") if sorted_ else (
        "``segment_ids`` (a prefix of ``data``'s shape; negative ids drop their row) select "
        "the output row, of ``num_segments``")
    return f"The {what} of the rows of ``data`` per segment: {ids}; an empty segment is {empty}."


def segment_sum(data, segment_ids, name=None) -> Tensor:
    return apply_op("SegmentSum", [data, segment_ids], name=name).outputs[0]


def segment_mean(data, segment_ids, name=None) -> Tensor:
    return apply_op("SegmentMean", [data, segment_ids], name=name).outputs[0]


def segment_max(data, segment_ids, name=None) -> Tensor:
    return apply_op("SegmentMax", [data, segment_ids], name=name).outputs[0]


def segment_min(data, segment_ids, name=None) -> Tensor:
    return apply_op("SegmentMin", [data, segment_ids], name=name).outputs[0]


def segment_prod(data, segment_ids, name=None) -> Tensor:
    return apply_op("SegmentProd", [data, segment_ids], name=name).outputs[0]


def unsorted_segment_max(data, segment_ids, num_segments, name=None) -> Tensor:
    return apply_op("UnsortedSegmentMax", [data, segment_ids, num_segments],
                    name=name).outputs[0]


def unsorted_segment_min(data, segment_ids, num_segments, name=None) -> Tensor:
    return apply_op("UnsortedSegmentMin", [data, segment_ids, num_segments],
                    name=name).outputs[0]


def unsorted_segment_prod(data, segment_ids, num_segments, name=None) -> Tensor:
    return apply_op("UnsortedSegmentProd", [data, segment_ids, num_segments],
                    name=name).outputs[0]


def _unsorted_count(data, segment_ids, num_segments):
    """Rows per segment, at least 1, broadcast over a row (TF's ``_unsorted_segment_N``)."""
    from .array_ops import ones_like
    from ..math.math_ext import maximum
    n = unsorted_segment_sum(ones_like(data), segment_ids, num_segments)
    return maximum(n, ones_like(n))


def unsorted_segment_mean(data, segment_ids, num_segments, name=None) -> Tensor:
    from ...framework.graph import get_default_graph
    from ..math.math_ops import divide
    with get_default_graph().name_scope(name or "UnsortedSegmentMean"):
        data = convert_to_tensor(data)
        return divide(unsorted_segment_sum(data, segment_ids, num_segments),
                      _unsorted_count(data, segment_ids, num_segments))


def unsorted_segment_sqrt_n(data, segment_ids, num_segments, name=None) -> Tensor:
    from ...framework.graph import get_default_graph
    from ..math.math_ops import divide, sqrt
    with get_default_graph().name_scope(name or "UnsortedSegmentSqrtN"):
        data = convert_to_tensor(data)
        return divide(unsorted_segment_sum(data, segment_ids, num_segments),
                      sqrt(_unsorted_count(data, segment_ids, num_segments)))


for _f, _what, _sorted, _empty in (
        (segment_sum, "sum", True, "0"), (segment_mean, "mean", True, "0"),
        (segment_max, "maximum", True, "0"), (segment_min, "minimum", True, "0"),
        (segment_prod, "product", True, "1"),
        (unsorted_segment_max, "maximum", False, "the dtype's lowest value"),
        (unsorted_segment_min, "minimum", False, "the dtype's highest value"),
        (unsorted_segment_prod, "product", False, "1"),
        (unsorted_segment_mean, "mean", False, "0"),
        (unsorted_segment_sqrt_n, "sum divided by the square root of the count", False, "0")):
    _f.__doc__ = _segment_doc(_what, _sorted, _empty)
del _f, _what, _sorted, _empty

__all__ += ["segment_sum", "segment_mean", "segment_max", "segment_min", "segment_prod",
            "unsorted_segment_max", "unsorted_segment_min", "unsorted_segment_prod",
            "unsorted_segment_mean", "unsorted_segment_sqrt_n"]


# ---- searchsorted, bincount, setdiff1d, invert_permutation, unravel_index ----------------------
def _host(x):
    from ...vm.kernels.array_api import to_host
    return np.asarray(to_host(x))


def _searchsorted_kernel(seq, values, side, out_type):
    xp = array_namespace(seq, values)
    dt = out_type.np_dtype
    if seq.ndim == 1:
        return xp.searchsorted(seq, values, side=side).astype(dt, copy=False)
    # batched over the leading dimensions: one lexicographic sort of (row, value, tag) over
    # the sequences' and the values' elements; each value's answer is the number of
    # sequence elements of its row before it (ties: after them for "right")
    b, n, m = int(np.prod(seq.shape[:-1])), seq.shape[-1], values.shape[-1]
    s2, v2 = seq.reshape(b, n), values.reshape(b, m)
    rows = xp.concatenate([xp.repeat(xp.arange(b), n), xp.repeat(xp.arange(b), m)])
    keys = xp.concatenate([s2.reshape(-1), v2.reshape(-1)])
    is_seq = xp.concatenate([xp.ones(b * n, dtype=np.int64), xp.zeros(b * m, dtype=np.int64)])
    tag = is_seq if side == "left" else 1 - is_seq
    order = xp.lexsort(xp.stack([tag, keys, rows]))
    flag = is_seq[order]
    before = xp.cumsum(flag) - flag
    qpos = order >= b * n
    qidx = order[qpos] - b * n
    out = xp.empty(b * m, dtype=np.int64)
    out[qidx] = before[qpos] - rows[order][qpos] * n
    return out.reshape(values.shape).astype(dt, copy=False)


def _searchsorted_shape(inputs, attrs):
    seq, vals = inputs
    check_same_dtype_(inputs, "SearchSorted")
    a, b = seq._shape, vals._shape
    if a is not None and not a:
        raise InvalidArgumentError("SearchSorted: sorted_sequence must have rank >= 1")
    if a is not None and b is not None and (len(a) != len(b) or any(
            x is not None and y is not None and x != y for x, y in zip(a[:-1], b[:-1]))):
        raise InvalidArgumentError(
            f"SearchSorted: sorted_sequence {list(a)} and values {list(b)} must have the same "
            "leading (batch) dimensions")
    return [(attrs["out_type"], b)]


def check_same_dtype_(inputs, op):
    from ..common import check_same_dtype
    return check_same_dtype(inputs, op)


register_op("SearchSorted", _searchsorted_shape, _searchsorted_kernel, differentiable=False)


def searchsorted(sorted_sequence, values, side="left", out_type=None, name=None) -> Tensor:
    """For each of ``values``, the index in ``sorted_sequence`` (sorted along its last axis;
    leading dimensions are batches that ``values`` shares) where it would be inserted to keep
    the order: before equal elements (``side="left"``) or after them (``"right"``).

    >>> import tensorvm as tv
    >>> with tv.Session() as s:
    ...     s.run(tv.searchsorted([[1, 3, 5], [2, 4, 6]], [[3, 6], [1, 4]], side="right")).tolist()
    [[2, 3], [0, 2]]
    """
    from ...framework import dtypes as _dt
    from ..common import _convert_pair
    if side not in ("left", "right"):
        raise ValueError(f"Argument `side` must be either 'right' or 'left'. Received: "
                         f"`side` = {side!r}.")
    seq, vals = _convert_pair(sorted_sequence, values)
    return apply_op("SearchSorted", [seq, vals],
                    {"side": side, "out_type": _dt.as_dtype(out_type or _dt.int32)},
                    name=name).outputs[0]


def _bincount_kernel(arr, weights, minlength, maxlength, dtype):
    xp = array_namespace(arr, weights)
    flat = arr.reshape(-1)
    h = _host(flat.min()) if flat.size else None
    if h is not None and h < 0:
        raise InvalidArgumentError("Input arr must be non-negative!")
    top = int(_host(flat.max())) + 1 if flat.size else 0
    length = max(top, int(minlength))
    if maxlength >= 0:
        length = min(length, int(maxlength))
    w = None if weights.size == 0 else weights.reshape(-1)
    keep = flat < length
    if top > length:
        flat = flat[keep]
        w = None if w is None else w[keep]
    out = xp.bincount(flat, weights=w, minlength=length) if flat.size else \
        xp.zeros(length, dtype=np.float64)
    return out[:length].astype(dtype.np_dtype if w is None else weights.dtype, copy=False)


def _bincount_shape(inputs, attrs):
    arr, w = inputs
    if arr.dtype.name not in ("int32", "int64"):
        raise InvalidArgumentError(f"Bincount: arr must be int32 or int64, got {arr.dtype.name}")
    dt = attrs["dtype"] if w._shape == (0,) else w.dtype
    return [(dt, (None,))]


register_op("Bincount", _bincount_shape, _bincount_kernel, differentiable=False)


def bincount(arr, weights=None, minlength=None, maxlength=None, dtype=None, name=None):
    """How many times each value ``0 .. max(arr)`` occurs in ``arr`` (any shape, non-negative
    ints), or the sum of ``weights`` at those positions; the length is at least ``minlength``
    and at most ``maxlength`` (larger values are dropped).

    >>> import tensorvm as tv
    >>> with tv.Session() as s:
    ...     s.run(tv.bincount([1, 1, 3], minlength=5)).tolist()
    [0, 2, 0, 1, 0]
    """
    from ...framework import dtypes as _dt
    arr = convert_to_tensor(arr, name="arr")
    if arr.dtype not in (_dt.int32, _dt.int64):
        from ..math.math_ops import cast
        arr = cast(arr, _dt.int32)
    w = convert_to_tensor(np.zeros(0, (_dt.as_dtype(dtype) if dtype else _dt.int32).np_dtype)
                          if weights is None else weights)
    return apply_op("Bincount", [arr, w], {
        "minlength": int(minlength or 0), "maxlength": -1 if maxlength is None else
        int(maxlength), "dtype": _dt.as_dtype(dtype or _dt.int32)}, name=name).outputs[0]


def _listdiff_kernel(x, y, out_idx):
    xp = array_namespace(x)
    mask = ~xp.isin(x, y) if x.dtype != object else ~np.isin(x, y)
    idx = xp.nonzero(mask)[0].astype(out_idx.np_dtype, copy=False)
    return x[mask], idx


def _listdiff_shape(inputs, attrs):
    x, y = inputs
    check_same_dtype_(inputs, "ListDiff")
    for t, what in ((x, "x"), (y, "y")):
        if t._shape is not None and len(t._shape) != 1:
            raise InvalidArgumentError(f"ListDiff: {what} should be a 1D vector, got shape "
                                       f"{list(t._shape)}")
    return [(x.dtype, (None,)), (attrs["out_idx"], (None,))]


register_op("ListDiff", _listdiff_shape, _listdiff_kernel, differentiable=False)


def setdiff1d(x, y, index_dtype=None, name=None):
    """``(out, idx)``: the elements of ``x`` (1-D) not in ``y``, in ``x``'s order, and their
    positions in ``x`` (TF's ``tf.setdiff1d``, ``ListDiff``).

    >>> import tensorvm as tv
    >>> out, idx = tv.setdiff1d([1, 2, 3, 4, 5, 6], [1, 3, 5])
    >>> with tv.Session() as s:
    ...     s.run(out).tolist(), s.run(idx).tolist()
    ([2, 4, 6], [1, 3, 5])
    """
    from ...framework import dtypes as _dt
    from ..common import _convert_pair
    x, y = _convert_pair(x, y)
    op = apply_op("ListDiff", [x, y], {"out_idx": _dt.as_dtype(index_dtype or _dt.int32)},
                  name=name)
    return op.outputs[0], op.outputs[1]


def _invert_permutation_kernel(x):
    n = x.shape[0]
    h = _host(x)
    bad = (h < 0) | (h >= n)
    if bad.any():
        raise InvalidArgumentError(f"{int(h[bad][0])} is not between 0 and {n}")
    seen = np.zeros(n, dtype=bool)
    seen[h] = True
    if not seen.all():
        vals, counts = np.unique(h, return_counts=True)
        raise InvalidArgumentError(f"{int(vals[counts > 1][0])} is duplicated in the input.")
    xp = array_namespace(x)
    out = xp.empty_like(x)
    out[x] = xp.arange(n, dtype=x.dtype)
    return out


def _invert_permutation_shape(inputs, attrs):
    (x,) = inputs
    if x.dtype.name not in ("int32", "int64"):
        raise InvalidArgumentError(f"InvertPermutation: x must be int32 or int64, got "
                                   f"{x.dtype.name}")
    if x._shape is not None and len(x._shape) != 1:
        raise InvalidArgumentError(f"InvertPermutation: x must be a vector, got shape "
                                   f"{list(x._shape)}")
    return [(x.dtype, x._shape)]


register_op("InvertPermutation", _invert_permutation_shape, _invert_permutation_kernel,
            differentiable=False)


def invert_permutation(x, name=None) -> Tensor:
    """The inverse permutation ``y[x[i]] = i`` of a permutation ``x`` of ``0 .. n-1``."""
    return apply_op("InvertPermutation", [x], name=name).outputs[0]


def _unravel_index_kernel(indices, dims):
    hd = _host(dims)
    size = int(np.prod(hd))
    hi = _host(indices)
    if hi.size and ((hi < 0) | (hi >= size)).any():
        raise InvalidArgumentError("index is out of bound as with dims")
    xp = array_namespace(indices)
    strides = np.concatenate([np.cumprod(hd[::-1])[::-1][1:], [1]]).astype(indices.dtype)
    st = xp.asarray(strides).reshape((-1,) + (1,) * indices.ndim)
    d = xp.asarray(hd.astype(indices.dtype)).reshape((-1,) + (1,) * indices.ndim)
    return (indices[None] // st) % d


def _unravel_index_shape(inputs, attrs):
    indices, dims = inputs
    check_int_dtype(indices, "indices", "UnravelIndex")
    if indices.dtype != dims.dtype:
        raise InvalidArgumentError("UnravelIndex: indices and dims must have one dtype")
    if indices._shape is not None and len(indices._shape) > 1:
        raise InvalidArgumentError("UnravelIndex: indices must be 0-D or 1-D")
    n = None if dims._shape is None else dims._shape[0]
    return [(indices.dtype, None if indices._shape is None else (n,) + indices._shape)]


register_op("UnravelIndex", _unravel_index_shape, _unravel_index_kernel, differentiable=False)


def unravel_index(indices, dims, name=None) -> Tensor:
    """The coordinates in an array of shape ``dims`` of flat ``indices`` (0-D or 1-D): shape
    ``[len(dims)]`` or ``[len(dims), N]`` (TF's ``tf.unravel_index``, NumPy's order).

    >>> import tensorvm as tv
    >>> with tv.Session() as s:
    ...     s.run(tv.unravel_index([5, 7], [3, 4])).tolist()
    [[1, 1], [1, 3]]
    """
    indices = convert_to_tensor(indices)
    if not hasattr(dims, "op"):
        dims = convert_to_tensor(np.asarray(dims).astype(indices.dtype.np_dtype))
    return apply_op("UnravelIndex", [indices, dims], name=name).outputs[0]


__all__ += ["searchsorted", "bincount", "setdiff1d", "invert_permutation", "unravel_index"]


# ---- roll, repeat ------------------------------------------------------------------------------
def _roll_shape(inputs, attrs):
    x = inputs[0]
    if x._shape is not None:
        for a in attrs["axis"]:
            norm_axis(a, len(x._shape), "Roll")
    return [(x.dtype, x._shape)]


def _roll_kernel(x, shift, axis):
    return np.roll(x, shift, axis)


register_op("Roll", _roll_shape, _roll_kernel,
            grad=lambda op, g: [apply_op("Roll", [g], {
                "shift": tuple(-s for s in op.attrs["shift"]),
                "axis": op.attrs["axis"]}).outputs[0]])


def roll(input, shift, axis, name=None) -> Tensor:
    """Elements shifted by ``shift`` along ``axis`` (ints or lists of them, one shift per
    axis), those pushed past the end coming back at the start (TF's ``tf.roll``). A shift
    computed in the graph is a gather of the rotated indices.

    >>> import tensorvm as tv
    >>> with tv.Session() as s:
    ...     s.run(tv.roll([[1, 2, 3], [4, 5, 6]], shift=[1, -1], axis=[0, 1])).tolist()
    [[5, 6, 4], [2, 3, 1]]
    """
    from ..common import static_value
    x = convert_to_tensor(input)
    sv, av = static_value(shift), static_value(axis)
    if av is None:
        raise InvalidArgumentError("roll: axis must be known when the graph is built (ints)")
    axes = tuple(int(a) for a in np.atleast_1d(av))
    if sv is not None:
        shifts = tuple(int(s) for s in np.atleast_1d(sv))
        if len(shifts) != len(axes):
            raise InvalidArgumentError(f"shift and axis must have the same size, got "
                                       f"{len(shifts)} and {len(axes)}")
        return apply_op("Roll", [x], {"shift": shifts, "axis": axes}, name=name).outputs[0]
    # a shift computed in the graph: out[i] = x[(i - shift) mod n] along each axis
    from ...framework import dtypes as _dt
    from .fill_ops import range as _range
    from ..math.math_ops import cast, mod
    shift_t = cast(convert_to_tensor(shift), _dt.int32)
    out = x
    for k, a in enumerate(axes):
        n = shape(out)[a]
        s = shift_t if not shift_t._shape else shift_t[k]
        idx = mod(_range(n) - s, n)
        out = gather(out, idx, axis=a)
    return out


def _repeat_counts(repeats):
    return _host(repeats).astype(np.int64)


def _repeat_kernel(x, repeats, axis):
    reps = _repeat_counts(repeats)
    n = x.shape[axis]
    if reps.ndim == 1 and reps.size not in (1, n):
        raise InvalidArgumentError(f"Dimensions {n} and {reps.size} are not compatible")
    if (reps < 0).any():
        raise InvalidArgumentError(f"repeats must be >= 0, got {reps.tolist()}")
    return np.repeat(x, reps.tolist() if reps.ndim else int(reps), axis=axis) \
        if array_namespace(x) is not np else np.repeat(x, reps, axis=axis)


def _repeat_grad_kernel(g, x, repeats, axis):
    reps = _repeat_counts(repeats)
    n = x.shape[axis]
    ids = np.repeat(np.arange(n), np.broadcast_to(reps, (n,)))
    xp = array_namespace(g)
    gt = np.moveaxis(g, axis, 0)
    out = xp.zeros((n,) + gt.shape[1:], dtype=g.dtype)
    add_at(out, xp.asarray(ids) if xp is not np else ids, gt)
    return np.moveaxis(out, 0, axis)


def _repeat_shape(inputs, attrs):
    x, reps = inputs
    check_int_dtype(reps, "repeats", "Repeat")
    if reps._shape is not None and len(reps._shape) > 1:
        raise InvalidArgumentError("Repeat: repeats must be a scalar or a vector")
    if x._shape is None:
        return [(x.dtype, None)]
    a = norm_axis(attrs["axis"], len(x._shape), "Repeat")
    rv = static_value(reps)
    n = x._shape[a]
    if rv is None or n is None:
        d = None
    elif np.ndim(rv) == 0 or np.size(rv) == 1:
        d = n * int(np.reshape(rv, -1)[0])
    else:
        if np.size(rv) != n:
            raise InvalidArgumentError(f"Dimensions {n} and {np.size(rv)} are not compatible")
        d = int(np.sum(rv))
    return [(x.dtype, x._shape[:a] + (d,) + x._shape[a + 1:])]


register_op("Repeat", _repeat_shape, _repeat_kernel,
            grad=lambda op, g: [apply_op("RepeatGrad", [g, op.inputs[0], op.inputs[1]],
                                         {"axis": op.attrs["axis"]}).outputs[0], None])
register_op("RepeatGrad", lambda inputs, attrs: [(inputs[0].dtype, inputs[1]._shape)],
            _repeat_grad_kernel, shape_only=(1,))


def repeat(input, repeats, axis=None, name=None) -> Tensor:
    """Each element (``axis=None``: of the flattened input) or each slice along ``axis``
    repeated ``repeats`` times (a scalar, or one count per slice) — NumPy's ``np.repeat``,
    TF's ``tf.repeat``.

    >>> import tensorvm as tv
    >>> with tv.Session() as s:
    ...     s.run(tv.repeat([[1, 2], [3, 4]], [1, 2], axis=0)).tolist()
    [[1, 2], [3, 4], [3, 4]]
    """
    from ...framework import dtypes as _dt
    x = convert_to_tensor(input)
    if axis is None:
        x, axis = reshape(x, [-1]), 0
    reps = convert_to_tensor(repeats, dtype=None if hasattr(repeats, "op") else _dt.int32)
    return apply_op("Repeat", [x, reps], {"axis": int(axis)}, name=name).outputs[0]


# ---- space_to_depth, depth_to_space ------------------------------------------------------------
def _block(attrs, op):
    b = attrs["block_size"]
    if b < 2:
        raise InvalidArgumentError(f"Value for attr 'block_size' of {b} must be at least "
                                   "minimum 2")
    if attrs["data_format"] not in ("NHWC", "NCHW"):
        raise InvalidArgumentError(f"{op}: data_format must be NHWC or NCHW, got "
                                   f"{attrs['data_format']!r}")
    return b


def _to_nhwc(x, data_format):
    return np.transpose(x, (0, 2, 3, 1)) if data_format == "NCHW" else x


def _from_nhwc(x, data_format):
    return np.transpose(x, (0, 3, 1, 2)) if data_format == "NCHW" else x


def _s2d_kernel(x, block_size, data_format):
    b = block_size
    y = _to_nhwc(x, data_format)
    n, h, w, c = y.shape
    if h % b or w % b:
        raise InvalidArgumentError(f"Image height {h} and width {w} should be divisible by "
                                   f"block_size: {b}")
    y = y.reshape(n, h // b, b, w // b, b, c).transpose(0, 1, 3, 2, 4, 5)
    return _from_nhwc(y.reshape(n, h // b, w // b, b * b * c), data_format)


def _d2s_kernel(x, block_size, data_format):
    b = block_size
    y = _to_nhwc(x, data_format)
    n, h, w, c = y.shape
    if c % (b * b):
        raise InvalidArgumentError(f"Input depth dimension {c} should be divisible by: "
                                   f"{b * b}")
    y = y.reshape(n, h, w, b, b, c // (b * b)).transpose(0, 1, 3, 2, 4, 5)
    return _from_nhwc(y.reshape(n, h * b, w * b, c // (b * b)), data_format)


def _space_depth_shape(to_depth):
    op = "SpaceToDepth" if to_depth else "DepthToSpace"

    def shape_fn(inputs, attrs):
        b = _block(attrs, op)
        s = inputs[0]._shape
        if s is None:
            return [(inputs[0].dtype, None)]
        if len(s) != 4:
            raise InvalidArgumentError(f"{op}: input must be 4-dimensional, got shape "
                                       f"{list(s)}")
        nchw = attrs["data_format"] == "NCHW"
        n, h, w, c = (s[0], s[2], s[3], s[1]) if nchw else s
        if to_depth:
            for d in (h, w):
                if d is not None and d % b:
                    raise InvalidArgumentError(f"Dimension size must be evenly divisible by "
                                               f"{b} but is {d}")
            h, w, c = [None if d is None else d // b for d in (h, w)] + \
                [None if c is None else c * b * b]
        else:
            if c is not None and c % (b * b):
                raise InvalidArgumentError(f"Dimension size must be evenly divisible by "
                                           f"{b * b} but is {c}")
            h, w, c = [None if d is None else d * b for d in (h, w)] + \
                [None if c is None else c // (b * b)]
        return [(inputs[0].dtype, (n, c, h, w) if nchw else (n, h, w, c))]
    return shape_fn


register_op("SpaceToDepth", _space_depth_shape(True), _s2d_kernel,
            grad=lambda op, g: [depth_to_space(g, op.attrs["block_size"],
                                               data_format=op.attrs["data_format"])])
register_op("DepthToSpace", _space_depth_shape(False), _d2s_kernel,
            grad=lambda op, g: [space_to_depth(g, op.attrs["block_size"],
                                               data_format=op.attrs["data_format"])])


def space_to_depth(input, block_size, name=None, data_format="NHWC") -> Tensor:
    """Each ``block_size x block_size`` block of pixels moved into the channels:
    ``[N, H, W, C]`` to ``[N, H/b, W/b, b*b*C]`` (TF's ``tf.space_to_depth``)."""
    return apply_op("SpaceToDepth", [input], {"block_size": int(block_size),
                                              "data_format": data_format},
                    name=name).outputs[0]


def depth_to_space(input, block_size, name=None, data_format="NHWC") -> Tensor:
    """The inverse of :func:`space_to_depth`: ``[N, H, W, b*b*C]`` to ``[N, H*b, W*b, C]``."""
    return apply_op("DepthToSpace", [input], {"block_size": int(block_size),
                                              "data_format": data_format},
                    name=name).outputs[0]


__all__ += ["roll", "repeat", "space_to_depth", "depth_to_space"]


# ---- tensor_scatter_nd_*: a tensor with slices replaced or combined (no Variable) -------------
def _tensor_scatter_shape(op_type):
    def shape_fn(inputs, attrs):
        t, i, u = inputs
        check_int_dtype(i, "indices", op_type)
        if t.dtype != u.dtype:
            raise InvalidArgumentError(f"{op_type}: updates ({u.dtype.name}) must have the "
                                       f"tensor's dtype ({t.dtype.name})")
        if t._shape is not None and i._shape is not None and u._shape is not None and \
                i._shape[-1] is not None:
            want = i._shape[:-1] + tuple(t._shape[i._shape[-1]:])
            if len(want) != len(u._shape) or any(
                    a is not None and b is not None and a != b for a, b in zip(want, u._shape)):
                raise InvalidArgumentError(
                    f"{op_type}: updates of shape {list(u._shape)} do not match indices "
                    f"{list(i._shape)} into a tensor of shape {list(t._shape)} (expected "
                    f"{list(want)})")
        return [(t.dtype, t._shape)]
    return shape_fn


def _tensor_scatter_kernel(kind):
    op = {"update": "TensorScatterUpdate", "max": "TensorScatterMax",
          "min": "TensorScatterMin"}[kind]

    def kernel(tensor, indices, updates):
        xp = array_namespace(tensor)
        out = tensor.copy()
        idx = _nd_index(indices, out.shape, op, xp)
        if kind == "update":
            out[idx] = updates
        else:
            _reduce_at(out, idx, updates, kind)
        return out
    kernel.__name__ = f"_tensor_scatter_{kind}_kernel"
    return kernel


def _tensor_scatter_update_grad(op, g):
    from .array_ops import zeros_like
    indices, updates = op.inputs[1], op.inputs[2]
    return [tensor_scatter_nd_update(g, indices, zeros_like(updates)), None,
            gather_nd(g, indices)]


def _tensor_scatter_minmax_grad(op, g):  # TF's _TensorScatterMinOrMaxGrad
    from ..math.math_ext import equal
    from ..math.math_ops import cast
    x, indices, y = op.inputs
    out = op.outputs[0]
    x_ind = cast(equal(x, out), g.dtype)
    y_ind = cast(equal(y, gather_nd(out, indices)), g.dtype)
    indicators = x_ind + scatter_nd(indices, y_ind, shape(x))
    return [g * x_ind / indicators, None, gather_nd(g / indicators, indices) * y_ind]


for _kind, _grad in (("update", _tensor_scatter_update_grad),
                     ("max", _tensor_scatter_minmax_grad),
                     ("min", _tensor_scatter_minmax_grad)):
    _t = f"TensorScatter{_kind.capitalize()}"
    register_op(_t, _tensor_scatter_shape(_t), _tensor_scatter_kernel(_kind), grad=_grad)
del _kind, _grad, _t


def tensor_scatter_nd_update(tensor, indices, updates, name=None) -> Tensor:
    """``tensor`` with the slices at ``indices`` replaced by ``updates`` (a new tensor; TF's
    ``tf.tensor_scatter_nd_update``).

    >>> import tensorvm as tv
    >>> with tv.Session() as s:
    ...     s.run(tv.tensor_scatter_nd_update([1, 2, 3, 4], [[1], [3]], [9, 8])).tolist()
    [1, 9, 3, 8]
    """
    from ..common import _convert_pair
    tensor, updates = _convert_pair(tensor, updates)
    return apply_op("TensorScatterUpdate", [tensor, convert_to_tensor(indices), updates],
                    name=name).outputs[0]


def tensor_scatter_nd_add(tensor, indices, updates, name=None) -> Tensor:
    """``tensor`` with ``updates`` added at ``indices`` (repeated indices add up)."""
    from ..common import _convert_pair
    tensor, updates = _convert_pair(tensor, updates)
    return tensor + scatter_nd(indices, updates, shape(tensor), name=name)


def tensor_scatter_nd_sub(tensor, indices, updates, name=None) -> Tensor:
    """``tensor`` with ``updates`` subtracted at ``indices``."""
    from ..common import _convert_pair
    tensor, updates = _convert_pair(tensor, updates)
    return tensor - scatter_nd(indices, updates, shape(tensor), name=name)


def tensor_scatter_nd_max(tensor, indices, updates, name=None) -> Tensor:
    """``tensor`` with the element-wise maximum of its slices at ``indices`` and ``updates``."""
    from ..common import _convert_pair
    tensor, updates = _convert_pair(tensor, updates)
    return apply_op("TensorScatterMax", [tensor, convert_to_tensor(indices), updates],
                    name=name).outputs[0]


def tensor_scatter_nd_min(tensor, indices, updates, name=None) -> Tensor:
    """``tensor`` with the element-wise minimum of its slices at ``indices`` and ``updates``."""
    from ..common import _convert_pair
    tensor, updates = _convert_pair(tensor, updates)
    return apply_op("TensorScatterMin", [tensor, convert_to_tensor(indices), updates],
                    name=name).outputs[0]


tensor_scatter_update = tensor_scatter_nd_update
tensor_scatter_add = tensor_scatter_nd_add
tensor_scatter_sub = tensor_scatter_nd_sub


def batch_gather(params, indices, name=None) -> Tensor:
    """``out[b..., i] = params[b..., indices[b..., i]]``: a gather per batch, the leading
    dimensions of ``indices`` being batch dimensions of ``params`` (TF 1.x's deprecated
    ``tf.batch_gather``); built from ``gather_nd``, so gradients flow to ``params``.

    >>> import tensorvm as tv
    >>> with tv.Session() as s:
    ...     s.run(tv.batch_gather([[1, 2, 3], [4, 5, 6]], [[2, 0], [1, 1]])).tolist()
    [[3, 1], [5, 5]]
    """
    from ...framework import dtypes as _dt
    from ...framework.graph import get_default_graph
    from .array_ops import stack
    from .fill_ops import range as _range
    from .manip_ops import broadcast_to, expand_dims
    from ..math.math_ops import cast
    with get_default_graph().name_scope(name or "batch_gather"):
        params, indices = convert_to_tensor(params), convert_to_tensor(indices)
        r = rank_of(indices)
        if r is None:
            raise InvalidArgumentError("batch_gather needs indices of known rank")
        if r == 1:
            return gather(params, indices)
        idx = cast(indices, _dt.int64)
        ishape = shape(idx, out_type=_dt.int64)
        coords = []
        for k in range(r - 1):  # the batch coordinates, broadcast to indices' shape
            ax = cast(_range(ishape[k]), _dt.int64)
            for _ in range(k):
                ax = expand_dims(ax, 0)
            for _ in range(r - 1 - k):
                ax = expand_dims(ax, -1)
            coords.append(broadcast_to(ax, ishape))
        return gather_nd(params, stack(coords + [idx], axis=-1))


__all__ += ["tensor_scatter_nd_update", "tensor_scatter_nd_add", "tensor_scatter_nd_sub",
            "tensor_scatter_nd_max", "tensor_scatter_nd_min", "tensor_scatter_update",
            "tensor_scatter_add", "tensor_scatter_sub", "batch_gather"]


# ---- space_to_batch_nd, batch_to_space_nd -------------------------------------------------------
def _s2b_kernel(x, block_shape, paddings):
    m = len(block_shape)
    xp = array_namespace(x)
    pad = [(0, 0)] + [tuple(p) for p in paddings] + [(0, 0)] * (x.ndim - 1 - m)
    y = xp.pad(x, pad)
    batch, spatial, rest = y.shape[0], y.shape[1:1 + m], y.shape[1 + m:]
    split = [batch]
    for d, b in zip(spatial, block_shape):
        split += [d // b, b]
    y = y.reshape(split + list(rest))
    perm = [2 + 2 * i for i in range(m)] + [0] + [1 + 2 * i for i in range(m)] + \
        list(range(1 + 2 * m, y.ndim))
    y = y.transpose(perm)
    return y.reshape([batch * int(np.prod(block_shape))] +
                     [d // b for d, b in zip(spatial, block_shape)] + list(rest))


def _b2s_kernel(x, block_shape, crops):
    m = len(block_shape)
    nb = int(np.prod(block_shape))
    batch = x.shape[0] // nb
    spatial, rest = x.shape[1:1 + m], x.shape[1 + m:]
    y = x.reshape(list(block_shape) + [batch] + list(spatial) + list(rest))
    perm = [m]
    for i in range(m):
        perm += [m + 1 + i, i]
    perm += list(range(2 * m + 1, y.ndim))
    y = y.transpose(perm).reshape([batch] + [d * b for d, b in zip(spatial, block_shape)] +
                                  list(rest))
    idx = [slice(None)] + [slice(c[0], y.shape[1 + i] - c[1]) for i, c in enumerate(crops)]
    return y[tuple(idx)]


def _s2b_shape(to_batch):
    op = "SpaceToBatchND" if to_batch else "BatchToSpaceND"

    def shape_fn(inputs, attrs):
        bs, pc = attrs["block_shape"], attrs["paddings" if to_batch else "crops"]
        x = inputs[0]
        if any(b < 1 for b in bs):
            raise InvalidArgumentError(f"{op}: block_shape must be positive, got {list(bs)}")
        if any(p < 0 for row in pc for p in row):
            raise InvalidArgumentError(f"{op}: {'paddings' if to_batch else 'crops'} must be "
                                       f"non-negative, got {[list(r) for r in pc]}")
        s = x._shape
        if s is None:
            return [(x.dtype, None)]
        m = len(bs)
        if len(s) < m + 1:
            raise InvalidArgumentError(f"{op}: input rank should be >= {m + 1} instead of "
                                       f"{len(s)}")
        nb = int(np.prod(bs))
        out = list(s)
        if to_batch:
            out[0] = None if s[0] is None else s[0] * nb
            for i, (b, (p0, p1)) in enumerate(zip(bs, pc)):
                d = s[1 + i]
                if d is not None:
                    if (d + p0 + p1) % b:
                        raise InvalidArgumentError(
                            f"padded_shape[{i}]={d + p0 + p1} is not divisible by "
                            f"block_shape[{i}]={b}")
                    out[1 + i] = (d + p0 + p1) // b
        else:
            if s[0] is not None and s[0] % nb:
                raise InvalidArgumentError(
                    f"Input batch dimension ({s[0]}) is not divisible by product of "
                    f"block sizes ({nb})")
            out[0] = None if s[0] is None else s[0] // nb
            for i, (b, (c0, c1)) in enumerate(zip(bs, pc)):
                d = s[1 + i]
                if d is not None:
                    if c0 + c1 > d * b:
                        raise InvalidArgumentError(
                            f"crops must be less than or equal to the input size: "
                            f"{c0}+{c1} > {d * b}")
                    out[1 + i] = d * b - c0 - c1
        return [(x.dtype, tuple(out))]
    return shape_fn


register_op("SpaceToBatchND", _s2b_shape(True), _s2b_kernel,
            grad=lambda op, g: [batch_to_space_nd(g, op.attrs["block_shape"],
                                                  op.attrs["paddings"])])
register_op("BatchToSpaceND", _s2b_shape(False), _b2s_kernel,
            grad=lambda op, g: [space_to_batch_nd(g, op.attrs["block_shape"],
                                                  op.attrs["crops"])])


def _static_pairs(v, what, op):
    from ..common import static_value
    a = static_value(v)
    if a is None:
        raise InvalidArgumentError(f"{op}: {what} must be known when the graph is built")
    a = np.asarray(a, dtype=np.int64)
    if a.ndim != 2 or a.shape[1] != 2:
        raise InvalidArgumentError(f"{op}: {what} must have shape [M, 2], got {list(a.shape)}")
    return tuple(tuple(int(p) for p in row) for row in a)


def space_to_batch_nd(input, block_shape, paddings, name=None) -> Tensor:
    """Blocks of the spatial dimensions moved into the batch: ``input`` (``[B, S_1..S_M,
    rest]``) zero-padded by ``paddings`` (``[M, 2]``), each spatial size divided by
    ``block_shape``, the batch multiplied by its product (TF's ``tf.space_to_batch_nd``)."""
    from ..common import static_ints
    bs = static_ints(block_shape, "block_shape", "SpaceToBatchND")
    pads = _static_pairs(paddings, "paddings", "SpaceToBatchND")
    if len(pads) != len(bs):
        raise InvalidArgumentError(f"SpaceToBatchND: paddings has {len(pads)} rows for "
                                   f"{len(bs)} block dimensions")
    return apply_op("SpaceToBatchND", [input], {"block_shape": bs, "paddings": pads},
                    name=name).outputs[0]


def batch_to_space_nd(input, block_shape, crops, name=None) -> Tensor:
    """The inverse of :func:`space_to_batch_nd`, cropping ``crops`` (``[M, 2]``)."""
    from ..common import static_ints
    bs = static_ints(block_shape, "block_shape", "BatchToSpaceND")
    cr = _static_pairs(crops, "crops", "BatchToSpaceND")
    if len(cr) != len(bs):
        raise InvalidArgumentError(f"BatchToSpaceND: crops has {len(cr)} rows for "
                                   f"{len(bs)} block dimensions")
    return apply_op("BatchToSpaceND", [input], {"block_shape": bs, "crops": cr},
                    name=name).outputs[0]


def space_to_batch(input, paddings, block_size=None, name=None, block_shape=None) -> Tensor:
    """TF 1.x's 4-D ``tf.space_to_batch``: :func:`space_to_batch_nd` with a square block."""
    b = block_shape if block_size is None else block_size
    return space_to_batch_nd(input, [int(b), int(b)], paddings, name=name)


def batch_to_space(input, crops, block_size, name=None, block_shape=None) -> Tensor:
    """TF 1.x's 4-D ``tf.batch_to_space``: :func:`batch_to_space_nd` with a square block."""
    b = block_shape if block_size is None else block_size
    return batch_to_space_nd(input, [int(b), int(b)], crops, name=name)


__all__ += ["space_to_batch_nd", "batch_to_space_nd", "space_to_batch", "batch_to_space"]
