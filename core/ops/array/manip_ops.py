"""Shape-manipulation ops: concat, split, unstack, transpose, expand_dims, squeeze, reverse,
tile, broadcast_to, pad.

Sibling families: :mod:`~tensorvm.ops.array.slice_ops` (slice, ``t[...]``),
:mod:`~tensorvm.ops.array.fill_ops` (rank, size, fill, zeros, ones, eye, range),
:mod:`~tensorvm.ops.array.index_ops` (gather, scatter, segment sums),
:mod:`~tensorvm.ops.array.partition_ops` (dynamic_partition/stitch, boolean_mask, one_hot) and
:mod:`~tensorvm.ops.array.sort_ops` (sort, argsort, top_k, unique); the static-shape helpers they
share are in :mod:`~tensorvm.ops.common`.

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

import numpy as np

from ...framework.errors import InvalidArgumentError
from ...framework.graph import Tensor
from ...framework.op_def_library import apply_op
from ...framework import dtypes as _dt
from ...vm.kernels.array_api import array_namespace, to_host
from ...framework.op_registry import register_op
from ...framework.tensor_conversion import convert_to_tensor
from .array_ops import dense_or_zeros, identity, reshape_like, shape_tensor, stack
from ..common import (
    asarray,
    check_same_dtype,
    norm_axis,
    outs,
    rank_of,
    static_int,
    static_ints,
    static_shape_of,
    static_value,
    unbroadcast,
)

__all__ = ["concat", "split", "unstack", "transpose", "expand_dims", "squeeze", "tile",
           "broadcast_to", "reverse", "reverse_v2", "pad"]

_pyrange = builtins.range


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
    return outs(np.split(g, np.cumsum(sizes)[:-1].tolist(), axis=axis))


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


def _split_views(x, sizes, axis):
    """``np.split(x, ...)``'s pieces of ``sizes`` along ``axis``, as the same views made by
    slicing (np.array_split's swapaxes cost ~10 us a call on small arrays); None where
    ``axis`` is out of range (np.split then raises its error)."""
    nd = getattr(x, "ndim", 0)
    if not -nd <= axis < nd:
        return None
    lead = (slice(None),) * (axis % nd)
    pieces, start = [], 0
    for n in sizes:
        pieces.append(x[lead + (slice(start, start + n),)])
        start += n
    return pieces


def _split_kernel(x, num_split, axis):
    d = np.shape(x)[axis] if -np.ndim(x) <= axis < np.ndim(x) else None
    if d is not None and num_split > 0 and d % num_split == 0:
        pieces = _split_views(x, [d // num_split] * num_split, axis)
        if pieces is not None:
            return outs(pieces)
    return outs(np.split(x, num_split, axis=axis))


def _splitv_kernel(x, size_splits, axis):
    sizes = _resolve_sizes(size_splits, x.shape[axis], "SplitV")
    pieces = _split_views(x, sizes, axis)
    if pieces is not None:
        return outs(pieces)
    return outs(np.split(x, np.cumsum(sizes)[:-1].tolist(), axis=axis))


def _split_grad(op, *gs):
    return [concat([dense_or_zeros(g, o) for g, o in zip(gs, op.outputs)], op.attrs["axis"])]


register_op("Split", _split_shape, _split_kernel, grad=_split_grad)
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
    return np.tile(x, multiples) if multiples else asarray(x).copy()


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
    # paddings are a few ints (read on the host); the fill value a scalar of x's dtype
    pads = np.asarray(to_host(paddings)).tolist()
    return np.pad(x, pads, mode="constant",
                  constant_values=x.dtype.type(to_host(constant_values)))


def _pad_grad(op, g):
    spec = tuple(("s", a, -b if b else None, None) for a, b in op.attrs["paddings"])
    return [apply_op("StridedSlice", [g], {"spec": spec}).outputs[0]]


register_op("Pad", _pad_shape, _pad_kernel, grad=_pad_grad)


def _mirror_pad_shape(inputs, attrs):
    x, p, mode = inputs[0], attrs["paddings"], attrs["mode"]
    out = _pad_shape(inputs, attrs)
    if x._shape is not None:
        extra = 0 if mode == "SYMMETRIC" else 1
        for d, (a, b) in zip(x._shape, p):
            if d is not None and max(a, b) > d - extra:
                raise InvalidArgumentError(
                    f"MirrorPad: paddings must be {'at most' if extra == 0 else 'less than'} "
                    f"the dimension size in {mode} mode: {a}, {b} "
                    f"{'exceeds' if extra == 0 else 'not less than'} {d}")
    return out


def _mirror_pad_kernel(x, *, paddings, mode):
    # REFLECT mirrors without the edge element (NumPy's 'reflect'), SYMMETRIC with it
    return array_namespace(x).pad(x, [list(q) for q in paddings], mode=mode.lower())


def _mirror_pad_grad_kernel(g, *, paddings, mode):
    """Fold each mirrored border back onto the elements it copies, one axis at a time."""
    xp = array_namespace(g)
    off = 0 if mode == "SYMMETRIC" else 1
    for ax, (a, b) in enumerate(paddings):
        n = g.shape[ax] - a - b
        core = xp.take(g, xp.arange(a, a + n), axis=ax).copy()
        idx = [builtins.slice(None)] * g.ndim
        if a:
            left = xp.flip(xp.take(g, xp.arange(0, a), axis=ax), axis=ax)
            idx[ax] = builtins.slice(off, off + a)
            core[tuple(idx)] += left
        if b:
            right = xp.flip(xp.take(g, xp.arange(a + n, a + n + b), axis=ax), axis=ax)
            idx[ax] = builtins.slice(n - off - b, n - off)
            core[tuple(idx)] += right
        g = core
    return g


register_op("MirrorPad", _mirror_pad_shape, _mirror_pad_kernel,
            grad=lambda op, g: [apply_op("MirrorPadGrad", [g], dict(op.attrs)).outputs[0]])
register_op("MirrorPadGrad", lambda inputs, attrs: [(inputs[0].dtype, None if inputs[0]._shape
                                                     is None else tuple(
    None if d is None else d - a - b for d, (a, b) in zip(inputs[0]._shape,
                                                          attrs["paddings"])))],
            _mirror_pad_grad_kernel,
            grad=lambda op, g: [apply_op("MirrorPad", [g], dict(op.attrs)).outputs[0]])


def _pad_to_shape(inputs, attrs):
    x, p = inputs
    if not p.dtype.is_integer:
        raise InvalidArgumentError(f"Pad: paddings must be int32 or int64, got {p.dtype.name}")
    if p._shape is not None and (len(p._shape) != 2 or p._shape[1] not in (2, None)):
        raise InvalidArgumentError(f"Pad: paddings must be a [rank, 2] matrix, got shape "
                                   f"{list(p._shape)}")
    if x._shape is not None and p._shape is not None and p._shape[0] not in (None,
                                                                              len(x._shape)):
        raise InvalidArgumentError(f"Pad: paddings has {p._shape[0]} rows for a tensor of rank "
                                   f"{len(x._shape)}; expected shape [{len(x._shape)}, 2]")
    return [(x.dtype, None if x._shape is None else (None,) * len(x._shape))]


def _pad_to_kernel(x, paddings, *, constant_values):
    pads = np.asarray(to_host(paddings)).astype(np.int64)
    if pads.shape != (x.ndim, 2):
        raise InvalidArgumentError(f"Pad: paddings must be [{x.ndim}, 2] for a tensor of rank "
                                   f"{x.ndim}, got shape {list(pads.shape)}")
    if (pads < 0).any():
        raise InvalidArgumentError(f"Pad: paddings must be >= 0, got {pads.tolist()}")
    return array_namespace(x).pad(x, pads.tolist(), mode="constant",
                                  constant_values=x.dtype.type(constant_values))


def _pad_to_grad(op, g):
    from .array_ops import shape as _shape
    from .slice_ops import slice as _slice
    return [_slice(g, op.inputs[1][:, 0], _shape(op.inputs[0], out_type=op.inputs[1].dtype)),
            None]


# Pad with paddings computed in the graph; they are read on the host (HostMemory on a GPU)
register_op("PadDynamic", _pad_to_shape, _pad_to_kernel, grad=_pad_to_grad, shape_only=())


def pad(tensor, paddings, mode: str = "CONSTANT", name=None, constant_values=0) -> Tensor:
    """``tv.pad(x, [[1, 1], [0, 2]])``: pad with ``constant_values`` (mode ``CONSTANT``), or
    mirror the borders (``REFLECT`` without the edge element, ``SYMMETRIC`` with it).
    ``paddings`` may be a tensor computed in the graph (CONSTANT mode)."""
    mode = str(mode).upper()
    if mode not in ("CONSTANT", "REFLECT", "SYMMETRIC"):
        raise InvalidArgumentError(f"Pad: mode must be CONSTANT, REFLECT or SYMMETRIC, got "
                                   f"{mode!r}")
    cv = static_value(constant_values)
    if cv is None or np.ndim(cv) != 0:
        raise InvalidArgumentError(f"Pad: constant_values must be a static scalar, got "
                                   f"{constant_values!r}")
    v = static_value(paddings)
    if v is None and mode == "CONSTANT":
        p = paddings
        if isinstance(p, (list, tuple)):
            p = stack([stack([convert_to_tensor(e, dtype=_dt.int32)
                              if not isinstance(e, Tensor) else e for e in row]) for row in p])
        return apply_op("PadDynamic", [tensor, convert_to_tensor(p)],
                        {"constant_values": cv.item()}, name=name).outputs[0]
    if v is None or np.ndim(v) != 2 or np.shape(v)[1] != 2 or \
            (np.size(v) and np.asarray(v).dtype.kind not in "iu"):
        raise InvalidArgumentError(f"Pad: paddings must be a [rank, 2] list of ints (or, in "
                                   f"CONSTANT mode, an int tensor), got {paddings!r}")
    p = tuple((int(a), int(b)) for a, b in np.asarray(v))
    if mode != "CONSTANT":
        return apply_op("MirrorPad", [tensor], {"paddings": p, "mode": mode},
                        name=name).outputs[0]
    return apply_op("Pad", [tensor], {"paddings": p, "constant_values": cv.item()},
                    name=name).outputs[0]