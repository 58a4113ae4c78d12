"""Segment reductions: ``segment_*`` (sorted, non-negative ids) and ``unsorted_segment_*``
(max, min, prod, mean, sqrt_n; negative ids drop their row), with TF's empty-segment values
and gradients. ``unsorted_segment_sum`` is :mod:`gather_ops`' (the dense form of sparse
gradients).
"""
from __future__ import annotations

import numpy as np

from ...framework.errors import InvalidArgumentError
from ...framework.graph import Tensor
from ...framework.op_def_library import apply_op
from ...vm.kernels.array_api import array_namespace
from ...framework.op_registry import register_op
from ...framework.tensor_conversion import convert_to_tensor
from .array_ops import shape
from ..common import add_at
from .gather_ops import _segment_tail, _uss_shape, gather, unsorted_segment_sum

__all__ = ["segment_sum", "segment_mean", "segment_max", "segment_min", "segment_prod",
           "unsorted_segment_max", "unsorted_segment_min", "unsorted_segment_prod",
           "unsorted_segment_mean", "unsorted_segment_sqrt_n"]


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

