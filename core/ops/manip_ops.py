"""Shape-manipulation ops: concat, slice and ``t[...]``, split, unstack, transpose, expand_dims,
squeeze, tile, broadcast_to, rank, size, fill/zeros/ones, eye, range, reverse, pad.

Indexing ops (gather, segment sums, partitions, sorting, unique …) live in
:mod:`tensorvm.ops.index_ops` and are re-exported from here.

Every op is one block: shape rule (raising ``InvalidArgumentError`` at construction), NumPy
kernel, gradient. Ops with a variable number of outputs (split, unstack) return one array from
their kernel when they have one output and a tuple otherwise (see :func:`outs`).

>>> import tensorvm as tv
>>> x = tv.constant([[1., 2., 3.], [4., 5., 6.]])
>>> a, b = tv.split(x, [1, 2], axis=1)
>>> with tv.Session() as s: s.run([x[:, ::-1], tv.concat([b, a], 1)])[1].tolist()
[[2.0, 3.0, 1.0], [5.0, 6.0, 4.0]]
"""
from __future__ import annotations

import builtins
import math

import numpy as np

from .. import dtypes as _dt
from ..errors import InvalidArgumentError
from ..graph import Tensor, TensorShape, overload_operator
from ..registry import apply_op, convert_to_tensor, register_op
from .array_ops import constant, identity, reshape, reshape_like, shape, stack, zeros_like
from .common import broadcast_shapes, check_same_dtype, unbroadcast

__all__ = ["concat", "slice", "strided_slice", "split", "unstack", "transpose", "expand_dims",
           "squeeze", "tile", "broadcast_to", "rank", "size", "fill", "zeros", "ones", "eye",
           "range", "reverse", "reverse_v2", "pad"]

_pyslice = builtins.slice
_pyrange = builtins.range


# ---- helpers ----------------------------------------------------------------------------------
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


def shape_tensor(shape_like, op: str) -> Tensor:
    """A 1-D integer tensor from a list of ints (or tensors), a TensorShape or a tensor."""
    if isinstance(shape_like, TensorShape):
        if not shape_like.is_fully_defined():
            raise InvalidArgumentError(f"{op}: shape {shape_like} is not fully defined")
        shape_like = shape_like.as_list()
    if isinstance(shape_like, (list, tuple)) and all(
            isinstance(d, (int, np.integer)) for d in shape_like):
        return constant(np.asarray(shape_like, dtype=np.int32).reshape(-1), name="shape")
    t = convert_to_tensor(shape_like)
    if not t.dtype.is_integer or (t._shape is not None and len(t._shape) != 1):
        raise InvalidArgumentError(f"{op}: shape must be a 1-D integer tensor, got {t!r}")
    return t


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


def dense_or_zeros(g, like: Tensor):
    """An output gradient as a dense tensor: densified if sparse, zeros if None."""
    if g is None:
        return zeros_like(like)
    from ..gradients import IndexedSlices, densify
    return densify(g, like) if isinstance(g, IndexedSlices) else g


def _convert_all(values, op: str) -> list[Tensor]:
    """Convert a list of values, Python ones to the dtype of the first tensor among them."""
    if not isinstance(values, (list, tuple)):
        raise InvalidArgumentError(f"{op}: expected a list of tensors, got {values!r}")
    dt = next((convert_to_tensor(v).dtype for v in values
               if isinstance(v, Tensor) or hasattr(v, "_as_graph_element")), None)
    return [convert_to_tensor(v, dtype=None if isinstance(v, (Tensor, np.ndarray))
                              or hasattr(v, "_as_graph_element") else dt) for v in values]


# ---- concat -----------------------------------------------------------------------------------
def _concat_shape(inputs, attrs):
    if not inputs:
        raise InvalidArgumentError("ConcatV2 needs at least one tensor")
    dt = check_same_dtype(inputs, "ConcatV2")
    shapes = [t._shape for t in inputs]
    known = [s for s in shapes if s is not None]
    if not known:
        return [(dt, None)]
    rank = len(known[0])
    if rank == 0:
        raise InvalidArgumentError("ConcatV2: can't concatenate scalars (use tv.stack instead)")
    if any(len(s) != rank for s in known):
        raise InvalidArgumentError(f"ConcatV2: all inputs must have the same rank, got shapes "
                                   f"{[list(s) for s in known]}")
    axis = norm_axis(attrs["axis"], rank, "ConcatV2")
    out = []
    for i in _pyrange(rank):
        dims = [s[i] for s in known]
        if i == axis:
            out.append(None if len(known) < len(shapes) or None in dims else sum(dims))
            continue
        fixed = {d for d in dims if d is not None}
        if len(fixed) > 1:
            raise InvalidArgumentError(
                f"ConcatV2: dimension {i} of the inputs must match (all but the concat axis "
                f"{axis}), got shapes {[list(s) for s in known]}")
        out.append(fixed.pop() if fixed else None)
    return [(dt, tuple(out))]


def _concat_grad(op, g):
    axis = op.attrs["axis"]
    sizes = [None if t._shape is None else t._shape[axis] for t in op.inputs]
    if None not in sizes:
        return split(g, sizes, axis)
    return list(apply_op("SplitLike", [g, *op.inputs], {"axis": axis}).outputs)


register_op("ConcatV2", _concat_shape, lambda *xs, axis: np.concatenate(xs, axis=axis),
            grad=_concat_grad)


def _split_like_kernel(g, *likes, axis):
    sizes = [np.shape(x)[axis] for x in likes]
    return outs(np.split(g, np.cumsum(sizes)[:-1], axis=axis))


register_op("SplitLike", lambda inputs, attrs: [(inputs[0].dtype, t._shape)
                                                for t in inputs[1:]],
            _split_like_kernel,
            grad=lambda op, *gs: [concat([dense_or_zeros(g, o) for g, o in
                                          zip(gs, op.outputs)], op.attrs["axis"])]
            + [None] * len(op.outputs))


def concat(values, axis, name: str = "concat") -> Tensor:
    """``tv.concat([a, b], axis=0)``: join tensors along an existing axis."""
    ts = _convert_all(values, "ConcatV2")
    ax = static_int(axis, "axis", "ConcatV2")
    if len(ts) == 1:
        return identity(ts[0], name=name)
    return apply_op("ConcatV2", ts, {"axis": ax}, name=name).outputs[0]


# ---- split, unstack ---------------------------------------------------------------------------
def _split_shape(inputs, attrs):
    x = inputs[0]
    n = attrs["num_split"]
    if n < 1:
        raise InvalidArgumentError(f"Split: num_split must be >= 1, got {n}")
    if x._shape is None:
        return [(x.dtype, None)] * n
    axis = norm_axis(attrs["axis"], len(x._shape), "Split")
    d = x._shape[axis]
    if d is not None and d % n:
        raise InvalidArgumentError(f"Split: dimension {axis} of size {d} is not evenly "
                                   f"divisible by num_split={n}")
    piece = None if d is None else d // n
    return [(x.dtype, x._shape[:axis] + (piece,) + x._shape[axis + 1:])] * n


def _resolve_sizes(sizes, d, op):
    sizes = list(sizes)
    if sizes.count(-1) > 1:
        raise InvalidArgumentError(f"{op}: at most one size can be -1, got {sizes}")
    if any(s < -1 for s in sizes):
        raise InvalidArgumentError(f"{op}: sizes must be >= 0 (or one -1), got {sizes}")
    if d is None:
        return [None if s == -1 else s for s in sizes]
    known = sum(s for s in sizes if s != -1)
    if -1 in sizes:
        if known > d:
            raise InvalidArgumentError(f"{op}: sizes {sizes} add up to more than the dimension "
                                       f"size {d}")
        return [d - known if s == -1 else s for s in sizes]
    if known != d:
        raise InvalidArgumentError(f"{op}: sizes {sizes} must add up to the dimension size {d}")
    return sizes


def _splitv_shape(inputs, attrs):
    x = inputs[0]
    sizes = attrs["size_splits"]
    if x._shape is None:
        _resolve_sizes(sizes, None, "SplitV")
        return [(x.dtype, None)] * len(sizes)
    axis = norm_axis(attrs["axis"], len(x._shape), "SplitV")
    res = _resolve_sizes(sizes, x._shape[axis], "SplitV")
    return [(x.dtype, x._shape[:axis] + (s,) + x._shape[axis + 1:]) for s in res]


def _splitv_kernel(x, size_splits, axis):
    sizes = _resolve_sizes(size_splits, x.shape[axis], "SplitV")
    return outs(np.split(x, np.cumsum(sizes)[:-1], axis=axis))


def _split_grad(op, *gs):
    return [concat([dense_or_zeros(g, o) for g, o in zip(gs, op.outputs)], op.attrs["axis"])]


register_op("Split", _split_shape,
            lambda x, num_split, axis: outs(np.split(x, num_split, axis=axis)), grad=_split_grad)
register_op("SplitV", _splitv_shape, _splitv_kernel, grad=_split_grad)


def split(value, num_or_size_splits, axis=0, num=None, name: str = "split") -> list[Tensor]:
    """``tv.split(x, 3, axis=1)`` (equal pieces) or ``tv.split(x, [2, -1], axis=1)`` (sizes)."""
    ax = static_int(axis, "axis", "Split")
    v = static_value(num_or_size_splits)
    if v is None:
        raise InvalidArgumentError(
            f"Split: num_or_size_splits must be known when the graph is built, got "
            f"{num_or_size_splits!r}")
    if np.ndim(v) == 0:
        op = apply_op("Split", [value], {"num_split": int(v), "axis": ax}, name=name)
    else:
        sizes = static_ints(v, "size_splits", "SplitV")
        op = apply_op("SplitV", [value], {"size_splits": sizes, "axis": ax}, name=name)
    return list(op.outputs)


def _unstack_shape(inputs, attrs):
    x = inputs[0]
    num = attrs["num"]
    if x._shape is None:
        return [(x.dtype, None)] * num
    if not x._shape:
        raise InvalidArgumentError("Unpack: cannot unstack a scalar")
    axis = norm_axis(attrs["axis"], len(x._shape), "Unpack")
    d = x._shape[axis]
    if d is not None and d != num:
        raise InvalidArgumentError(f"Unpack: num={num} does not match dimension {axis} of "
                                   f"size {d}")
    return [(x.dtype, x._shape[:axis] + x._shape[axis + 1:])] * num


def _unstack_kernel(x, num, axis):
    if x.shape[axis] != num:
        raise InvalidArgumentError(f"Unpack: input dimension {axis} has size {x.shape[axis]}, "
                                   f"expected num={num}")
    return outs(np.moveaxis(x, axis, 0))


register_op("Unpack", _unstack_shape, _unstack_kernel,
            grad=lambda op, *gs: [stack([dense_or_zeros(g, o) for g, o in zip(gs, op.outputs)],
                                        axis=op.attrs["axis"])])


def unstack(value, num=None, axis=0, name: str = "unstack") -> list[Tensor]:
    """``a, b = tv.unstack(x)``: the slices of ``x`` along ``axis`` (its size must be known
    statically, or given as ``num``)."""
    x = convert_to_tensor(value)
    if num is None:
        r = rank_of(x)
        if r is None or x._shape[norm_axis(axis, r, "Unpack")] is None:
            raise InvalidArgumentError(f"Unpack: cannot infer num from shape {x.shape} of "
                                       f"{x.name!r}; pass num=")
        num = x._shape[norm_axis(axis, r, "Unpack")]
    return list(apply_op("Unpack", [x], {"num": int(num), "axis": int(axis)},
                         name=name).outputs)


# ---- slice and t[...] -------------------------------------------------------------------------
def _slice_shape(inputs, attrs):
    x, b, s = inputs
    for t, what in ((b, "begin"), (s, "size")):
        if not t.dtype.is_integer:
            raise InvalidArgumentError(f"Slice: {what} must be integers, got {t.dtype.name}")
    begin, size = static_value(b), static_value(s)
    r = rank_of(x)
    n = b._shape[0] if b._shape else None
    if r is not None and n is not None and n != r:
        raise InvalidArgumentError(f"Slice: begin has {n} entries for a tensor of rank {r}")
    if begin is None or size is None:
        return [(x.dtype, None if n is None else (None,) * n)]
    if len(begin) != len(size):
        raise InvalidArgumentError(f"Slice: begin {begin.tolist()} and size {size.tolist()} "
                                   f"differ in length")
    out = []
    for i, (bi, si) in enumerate(zip(begin.tolist(), size.tolist())):
        d = None if x._shape is None else x._shape[i]
        if bi < 0 or si < -1 or (d is not None and bi + max(si, 0) > d) or \
                (d is not None and bi > d):
            raise InvalidArgumentError(
                f"Slice: begin {begin.tolist()} and size {size.tolist()} are out of bounds for "
                f"shape {list(x._shape)} in dimension {i}")
        out.append(si if si != -1 else (None if d is None else d - bi))
    return [(x.dtype, tuple(out))]


def _slice_index(shape_, begin, size, op="Slice"):
    idx = []
    for i, (d, b, s) in enumerate(zip(shape_, begin.tolist(), size.tolist())):
        e = d if s == -1 else b + s
        if b < 0 or s < -1 or e > d or b > d:
            raise InvalidArgumentError(f"{op}: begin {begin.tolist()} and size {size.tolist()} "
                                       f"are out of bounds for shape {list(shape_)}")
        idx.append(_pyslice(b, e))
    return tuple(idx)


def _slice_kernel(x, begin, size):
    if len(begin) != x.ndim or len(size) != x.ndim:
        raise InvalidArgumentError(f"Slice: begin and size need {x.ndim} entries, got "
                                   f"{begin.tolist()} and {size.tolist()}")
    return x[_slice_index(x.shape, begin, size)]


def _slice_grad_kernel(g, x, begin):
    out = np.zeros(np.shape(x), dtype=g.dtype)
    out[tuple(_pyslice(b, b + d) for b, d in zip(begin.tolist(), g.shape))] = g
    return out


register_op("Slice", _slice_shape, _slice_kernel,
            grad=lambda op, g: [apply_op("SliceGrad", [g, op.inputs[0], op.inputs[1]])
                                .outputs[0], None, None])
register_op("SliceGrad", lambda inputs, attrs: [(inputs[0].dtype, inputs[1]._shape)],
            _slice_grad_kernel,
            grad=lambda op, g: [slice(g, op.inputs[2], shape(op.inputs[0])), None, None])


def slice(input_, begin, size, name=None) -> Tensor:
    """``tv.slice(x, [1, 0], [2, -1])``: ``size[i] = -1`` takes the rest of dimension ``i``."""
    x = convert_to_tensor(input_)
    b = shape_tensor(begin, "Slice") if not isinstance(begin, Tensor) else begin
    s = shape_tensor(size, "Slice") if not isinstance(size, Tensor) else size
    return apply_op("Slice", [x, b, s], name=name or "Slice").outputs[0]


def _spec_bound(v, bounds):
    return int(bounds[v[1]]) if isinstance(v, tuple) else v


def spec_index(spec, bounds=()) -> tuple:
    """The NumPy index for a strided-slice ``spec``: items ``("i", k)``, ``("s", start, stop,
    step)``, ``("e",)`` (Ellipsis), ``("n",)`` (newaxis); a bound ``("t", j)`` is the j-th
    extra input of the op."""
    idx = []
    for it in spec:
        kind = it[0]
        if kind == "i":
            idx.append(_spec_bound(it[1], bounds))
        elif kind == "s":
            idx.append(_pyslice(*(_spec_bound(v, bounds) for v in it[1:])))
        else:
            idx.append(Ellipsis if kind == "e" else None)
    return tuple(idx)


def _strided_shape(x_shape, spec):
    if x_shape is None:
        return None
    if sum(it[0] == "e" for it in spec) > 1:
        raise InvalidArgumentError("StridedSlice: an index can only have a single ellipsis")
    consumed = sum(it[0] in "is" for it in spec)
    if consumed > len(x_shape):
        raise InvalidArgumentError(f"StridedSlice: too many indices ({consumed}) for a tensor "
                                   f"of rank {len(x_shape)}")
    if not any(it[0] == "e" for it in spec):
        spec = tuple(spec) + (("e",),)
    out, dim = [], 0
    for it in spec:
        if it[0] == "e":
            k = len(x_shape) - consumed
            out.extend(x_shape[dim:dim + k])
            dim += k
        elif it[0] == "n":
            out.append(1)
        elif it[0] == "i":
            d, i = x_shape[dim], it[1]
            if d is not None and not isinstance(i, tuple) and not -d <= i < d:
                raise InvalidArgumentError(f"StridedSlice: index {i} is out of bounds for "
                                           f"dimension {dim} with size {d}")
            dim += 1
        else:
            d, parts = x_shape[dim], it[1:]
            if parts[2] == 0:
                raise InvalidArgumentError("StridedSlice: slice step cannot be zero")
            dynamic = any(isinstance(p, tuple) for p in parts)
            if d is None or dynamic:
                out.append(d if parts == (None, None, None) or (
                    not dynamic and parts[0] is None and parts[1] is None and parts[2] == 1)
                    else None)
            else:
                out.append(len(_pyrange(*_pyslice(*parts).indices(d))))
            dim += 1
    return tuple(out)


def _strided_kernel(x, *bounds, spec):
    return np.asarray(x[spec_index(spec, bounds)])


def _strided_grad_kernel(g, x, *bounds, spec):
    out = np.zeros(np.shape(x), dtype=g.dtype)
    out[spec_index(spec, bounds)] = g
    return out


register_op("StridedSlice", lambda inputs, attrs: [
    (inputs[0].dtype, _strided_shape(inputs[0]._shape, attrs["spec"]))], _strided_kernel,
    grad=lambda op, g: [apply_op("StridedSliceGrad", [g, *op.inputs], op.attrs).outputs[0]]
    + [None] * (len(op.inputs) - 1))
register_op("StridedSliceGrad", lambda inputs, attrs: [(inputs[0].dtype, inputs[1]._shape)],
            _strided_grad_kernel,
            grad=lambda op, g: [apply_op("StridedSlice", [g, *op.inputs[2:]], op.attrs)
                                .outputs[0]] + [None] * (len(op.inputs) - 1))


def _bound(v, extra: list):
    """A slice bound or index: a Python int, None, or a scalar int tensor (an extra input)."""
    if v is None or isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_)):
        return None if v is None else int(v)
    sv = static_value(v)
    if sv is not None and np.ndim(sv) == 0 and np.asarray(sv).dtype.kind in "iu":
        return int(sv)
    t = convert_to_tensor(v)
    if not t.dtype.is_integer or (t._shape is not None and t._shape != ()):
        raise InvalidArgumentError(f"StridedSlice: slice bounds must be scalar integers, got "
                                   f"{v!r}")
    extra.append(t)
    return ("t", len(extra) - 1)


def _parse_key(key):
    """Split a ``t[...]`` key into a strided-slice spec, its extra inputs, and at most one
    integer/bool tensor index (applied after the slice with gather/boolean_mask)."""
    items, extra, tensor_items = [], [], []
    for k in (key if isinstance(key, tuple) else (key,)):
        if k is Ellipsis:
            items.append(("e",))
        elif k is None:
            items.append(("n",))
        elif isinstance(k, _pyslice):
            items.append(("s",) + tuple(_bound(v, extra) for v in (k.start, k.stop, k.step)))
        elif isinstance(k, (bool, np.bool_)):
            raise InvalidArgumentError(f"StridedSlice: a bool is not a valid index ({k!r})")
        elif isinstance(k, (int, np.integer)):
            items.append(("i", int(k)))
        elif isinstance(k, (Tensor, list, np.ndarray)) or hasattr(k, "_as_graph_element"):
            t = convert_to_tensor(k)
            if t.dtype.is_integer and t._shape == ():
                items.append(("i", _bound(t, extra)))
            elif t.dtype.is_integer or t.dtype.is_bool:
                items.append(("s", None, None, None))
                tensor_items.append((len(items) - 1, t))
            else:
                raise InvalidArgumentError(f"StridedSlice: index tensors must be integers or "
                                           f"bools, got {t.dtype.name} ({k!r})")
        else:
            raise InvalidArgumentError(
                f"StridedSlice: only integers, slices (`:`), ellipsis (`...`), tv.newaxis "
                f"(`None`) and integer or bool tensors are valid indices, got {k!r}")
    if len(tensor_items) > 1:
        raise InvalidArgumentError("StridedSlice: at most one tensor index is supported; "
                                   "use tv.gather / tv.gather_nd for more")
    return tuple(items), extra, tensor_items


def strided_slice(input_, key, name=None) -> Tensor:
    """``input_[key]`` as in NumPy's basic indexing (ints, slices with steps, ``...``,
    ``tv.newaxis``); a 1-D integer tensor index gathers, a bool tensor index masks."""
    x = convert_to_tensor(input_)
    spec, extra, tensor_items = _parse_key(key)
    trivial = spec == (("s", None, None, None),) and tensor_items
    out = x if trivial else apply_op("StridedSlice", [x, *extra], {"spec": spec},
                                     name=name or "strided_slice").outputs[0]
    if not tensor_items:
        return out
    pos, t = tensor_items[0]
    axis = 0
    for it in spec[:pos]:
        if it[0] == "e":
            if rank_of(x) is None:
                raise InvalidArgumentError("StridedSlice: a tensor index after `...` needs a "
                                           "tensor of known rank")
            axis += rank_of(x) - sum(i[0] in "is" for i in spec)
        elif it[0] != "i":
            axis += 1
    from .index_ops import boolean_mask, gather
    if t.dtype.is_bool:
        return boolean_mask(out, t, axis=axis)
    return gather(out, t, axis=axis)


overload_operator("__getitem__", lambda self, key: strided_slice(self, key))


# ---- transpose, expand_dims, squeeze, reverse ---------------------------------------------------
def _transpose_shape(inputs, attrs):
    x, perm = inputs[0], attrs["perm"]
    if x._shape is None:
        return [(x.dtype, None)]
    if perm is None:
        return [(x.dtype, x._shape[::-1])]
    if sorted(perm) != list(_pyrange(len(x._shape))):
        raise InvalidArgumentError(f"Transpose: perm {list(perm)} is not a permutation of "
                                   f"0..{len(x._shape) - 1} (input of rank {len(x._shape)})")
    return [(x.dtype, tuple(x._shape[p] for p in perm))]


def _transpose_kernel(x, perm, conjugate=False):
    out = np.transpose(x, perm)
    return np.conj(out) if conjugate else out


def _transpose_grad(op, g):
    perm = op.attrs["perm"]
    inv = None if perm is None else tuple(int(i) for i in np.argsort(perm))
    return [apply_op("Transpose", [g], {"perm": inv, "conjugate": op.attrs["conjugate"]})
            .outputs[0]]


register_op("Transpose", _transpose_shape, _transpose_kernel, grad=_transpose_grad)


def transpose(a, perm=None, name: str = "transpose", conjugate: bool = False) -> Tensor:
    """``tv.transpose(x, [0, 2, 1])``; no ``perm`` reverses the dimensions."""
    p = None if perm is None else static_ints(perm, "perm", "Transpose")
    return apply_op("Transpose", [a], {"perm": p, "conjugate": bool(conjugate)},
                    name=name).outputs[0]


def _expand_dims_shape(inputs, attrs):
    x = inputs[0]
    if x._shape is None:
        return [(x.dtype, None)]
    a = norm_axis(attrs["axis"], len(x._shape), "ExpandDims", extra=1)
    return [(x.dtype, x._shape[:a] + (1,) + x._shape[a:])]


register_op("ExpandDims", _expand_dims_shape, lambda x, axis: np.expand_dims(x, axis),
            grad=lambda op, g: [reshape_like(g, op.inputs[0])])


def expand_dims(input, axis=None, name=None, dim=None) -> Tensor:
    """Insert a dimension of size 1 at ``axis`` (``-1`` appends one)."""
    if axis is None:
        axis = dim
    if axis is None:
        raise InvalidArgumentError("ExpandDims: axis is required")
    return apply_op("ExpandDims", [input], {"axis": static_int(axis, "axis", "ExpandDims")},
                    name=name).outputs[0]


def _squeeze_shape(inputs, attrs):
    x, axis = inputs[0], attrs["axis"]
    if x._shape is None:
        return [(x.dtype, None)]
    if axis is None:
        if None in x._shape:
            return [(x.dtype, None)]
        return [(x.dtype, tuple(d for d in x._shape if d != 1))]
    axes = {norm_axis(a, len(x._shape), "Squeeze") for a in axis}
    for a in axes:
        if x._shape[a] not in (1, None):
            raise InvalidArgumentError(f"Squeeze: can not squeeze dim[{a}], expected a "
                                       f"dimension of 1, got {x._shape[a]}")
    return [(x.dtype, tuple(d for i, d in enumerate(x._shape) if i not in axes))]


register_op("Squeeze", _squeeze_shape, lambda x, axis: np.squeeze(x, axis=axis),
            grad=lambda op, g: [reshape_like(g, op.inputs[0])])


def squeeze(input, axis=None, name=None, squeeze_dims=None) -> Tensor:
    """Remove dimensions of size 1 (all of them, or those listed in ``axis``)."""
    if axis is None:
        axis = squeeze_dims
    if axis is not None:
        axis = (static_int(axis, "axis", "Squeeze"),) if np.ndim(static_value(axis)) == 0 \
            else static_ints(axis, "axis", "Squeeze")
    return apply_op("Squeeze", [input], {"axis": axis}, name=name).outputs[0]


def _reverse_shape(inputs, attrs):
    x = inputs[0]
    r = rank_of(x)
    axes = [norm_axis(a, r, "ReverseV2") for a in attrs["axis"]]
    if r is not None and len(set(axes)) != len(axes):
        raise InvalidArgumentError(f"ReverseV2: axis {list(attrs['axis'])} has duplicates")
    return [(x.dtype, x._shape)]


register_op("ReverseV2", _reverse_shape, lambda x, axis: np.flip(x, axis=axis) if axis else x,
            grad=lambda op, g: [reverse(g, op.attrs["axis"])])


def reverse(tensor, axis, name=None) -> Tensor:
    """Reverse ``tensor`` along the dimensions in ``axis`` (a list of ints)."""
    v = static_value(axis)
    axes = (static_int(axis, "axis", "ReverseV2"),) if v is not None and np.ndim(v) == 0 \
        else static_ints(axis, "axis", "ReverseV2")
    return apply_op("ReverseV2", [tensor], {"axis": axes}, name=name).outputs[0]


reverse_v2 = reverse


# ---- tile, broadcast_to, pad ------------------------------------------------------------------
def _tile_shape(inputs, attrs):
    x, m = inputs[0], attrs["multiples"]
    if any(k < 0 for k in m):
        raise InvalidArgumentError(f"Tile: multiples must be >= 0, got {list(m)}")
    if x._shape is None:
        return [(x.dtype, None)]
    if len(m) != len(x._shape):
        raise InvalidArgumentError(f"Tile: multiples {list(m)} must have one entry per "
                                   f"dimension of the input (rank {len(x._shape)})")
    return [(x.dtype, tuple(None if d is None else d * k for d, k in zip(x._shape, m)))]


def _tile_kernel(x, multiples):
    if len(multiples) != np.ndim(x):
        raise InvalidArgumentError(f"Tile: multiples {list(multiples)} do not match the input's "
                                   f"rank {np.ndim(x)}")
    return np.tile(x, multiples) if multiples else np.array(x)


def _tile_grad_kernel(g, x, multiples):
    inter = [n for k, d in zip(multiples, np.shape(x)) for n in (k, d)]
    return g.reshape(inter).sum(axis=tuple(_pyrange(0, len(inter), 2)))


register_op("Tile", _tile_shape, _tile_kernel,
            grad=lambda op, g: [apply_op("TileGrad", [g, op.inputs[0]], op.attrs).outputs[0]])
register_op("TileGrad", lambda inputs, attrs: [(inputs[0].dtype, inputs[1]._shape)],
            _tile_grad_kernel, grad=lambda op, g: [tile(g, op.attrs["multiples"]), None])


def tile(input, multiples, name=None) -> Tensor:
    """Repeat ``input`` ``multiples[i]`` times along dimension ``i``."""
    m = static_ints(multiples, "multiples", "Tile")
    return apply_op("Tile", [input], {"multiples": m}, name=name).outputs[0]


def _broadcast_to_shape(inputs, attrs):
    x, s = inputs
    target = static_shape_of(s)
    if target is None or x._shape is None:
        return [(x.dtype, target)]
    if len(x._shape) > len(target):
        raise InvalidArgumentError(f"BroadcastTo: cannot broadcast shape {list(x._shape)} to "
                                   f"the lower-rank shape {list(target)}")
    for d, t in zip(x._shape[::-1], target[::-1]):
        if d is not None and t is not None and d != 1 and d != t:
            raise InvalidArgumentError(f"BroadcastTo: cannot broadcast shape {list(x._shape)} "
                                       f"to {list(target)}")
    return [(x.dtype, target)]


register_op("BroadcastTo", _broadcast_to_shape,
            lambda x, shape: np.broadcast_to(x, tuple(int(d) for d in shape)),
            grad=lambda op, g: [unbroadcast(g, op.inputs[0]), None])


def broadcast_to(input, shape, name=None) -> Tensor:
    """Broadcast ``input`` to ``shape`` with NumPy rules: ``tv.broadcast_to(b, [4, 3])``."""
    return apply_op("BroadcastTo", [input, shape_tensor(shape, "BroadcastTo")],
                    name=name).outputs[0]


def _pad_shape(inputs, attrs):
    x, p = inputs[0], attrs["paddings"]
    if any(a < 0 or b < 0 for a, b in p):
        raise InvalidArgumentError(f"Pad: paddings must be >= 0, got {[list(q) for q in p]}")
    if x._shape is None:
        return [(x.dtype, None)]
    if len(p) != len(x._shape):
        raise InvalidArgumentError(f"Pad: paddings has {len(p)} rows for a tensor of rank "
                                   f"{len(x._shape)}; expected shape [{len(x._shape)}, 2]")
    return [(x.dtype, tuple(None if d is None else d + a + b
                            for d, (a, b) in zip(x._shape, p)))]


def _pad_kernel(x, paddings, constant_values):
    return np.pad(x, paddings, mode="constant",
                  constant_values=np.asarray(constant_values, dtype=x.dtype))


def _pad_grad(op, g):
    spec = tuple(("s", a, -b if b else None, None) for a, b in op.attrs["paddings"])
    return [apply_op("StridedSlice", [g], {"spec": spec}).outputs[0]]


register_op("Pad", _pad_shape, _pad_kernel, grad=_pad_grad)


def pad(tensor, paddings, mode: str = "CONSTANT", name=None, constant_values=0) -> Tensor:
    """``tv.pad(x, [[1, 1], [0, 2]])``: pad with ``constant_values`` (mode ``CONSTANT``)."""
    if str(mode).upper() != "CONSTANT":
        raise InvalidArgumentError(f"Pad: only mode='CONSTANT' is supported, got {mode!r}")
    v = static_value(paddings)
    if v is None or np.ndim(v) != 2 or np.shape(v)[1] != 2 or \
            (np.size(v) and np.asarray(v).dtype.kind not in "iu"):
        raise InvalidArgumentError(f"Pad: paddings must be a static [rank, 2] list of ints, got "
                                   f"{paddings!r}")
    cv = static_value(constant_values)
    if cv is None or np.ndim(cv) != 0:
        raise InvalidArgumentError(f"Pad: constant_values must be a static scalar, got "
                                   f"{constant_values!r}")
    p = tuple((int(a), int(b)) for a, b in np.asarray(v))
    return apply_op("Pad", [tensor], {"paddings": p, "constant_values": cv.item()},
                    name=name).outputs[0]


# ---- rank, size, fill, zeros, ones, eye, range -------------------------------------------------
register_op("Rank", lambda inputs, attrs: [(_dt.int32, ())],
            lambda x: np.asarray(np.ndim(x), dtype=np.int32), differentiable=False)
register_op("Size", lambda inputs, attrs: [(attrs["out_type"], ())],
            lambda x, out_type: np.asarray(np.size(x), dtype=out_type.np_dtype),
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
    return np.full(tuple(int(d) for d in dims), value, dtype=value.dtype)


def _fill_grad(op, g):
    from .math_ops import reduce_sum
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
    return np.arange(start, limit, delta, dtype=start.dtype)


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
            from .math_ops import cast
            t = cast(t, dt)
        ts.append(t)
    return apply_op("Range", ts, name=name).outputs[0]


from .index_ops import *  # noqa: E402,F401,F403
from .index_ops import __all__ as _index_all  # noqa: E402
from .index_ops import unsorted_segment_sum_like  # noqa: E402,F401

__all__ += _index_all
