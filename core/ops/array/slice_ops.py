"""Slicing: ``tv.slice`` and ``t[...]`` (``Tensor.__getitem__``), re-exported by manip_ops.

``t[...]`` takes NumPy's basic indexing — ints, slices with any step, ``...``, ``tv.newaxis`` —
as one ``StridedSlice`` op whose attr ``spec`` is plain data (see :func:`spec_index`); slice
bounds and indices may be scalar int tensors (extra inputs). One integer tensor index gathers
(``tv.gather``) and one bool tensor index masks (``tv.boolean_mask``) after the slice.

>>> import tensorvm as tv
>>> x = tv.reshape(tv.range(12), [3, 4])
>>> with tv.Session() as s: s.run(x[1:, ::-2]).tolist()
[[7, 5], [11, 9]]
"""
from __future__ import annotations

import builtins

import numpy as np

from ...framework.errors import InvalidArgumentError
from ...framework.graph import Tensor, overload_operator
from ...framework.op_def_library import apply_op
from ...vm.kernels.array_api import array_namespace
from ...framework.op_registry import register_op
from ...framework.tensor_conversion import convert_to_tensor
from .array_ops import shape, shape_tensor
from ..common import asarray, rank_of, static_value

__all__ = ["slice", "strided_slice"]

_pyslice = builtins.slice
_pyrange = builtins.range


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
    out = array_namespace(g).zeros(np.shape(x), dtype=g.dtype)
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
    out = x[spec_index(spec, bounds)]
    return asarray(out, like=x)


def _strided_grad_kernel(g, x, *bounds, spec):
    out = array_namespace(g).zeros(np.shape(x), dtype=g.dtype)
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


def getitem(input_, key, name=None) -> Tensor:
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
    from .index_ops import gather
    from .partition_ops import boolean_mask
    if t.dtype.is_bool:
        return boolean_mask(out, t, axis=axis)
    return gather(out, t, axis=axis)


overload_operator("__getitem__", lambda self, key: getitem(self, key))


def _mask_bits(mask: int, n: int) -> list[bool]:
    return [bool(int(mask) >> i & 1) for i in range(n)]


def strided_slice(input_, begin, end, strides=None, begin_mask=0, end_mask=0, ellipsis_mask=0,
                  new_axis_mask=0, shrink_axis_mask=0, var=None, name=None) -> Tensor:
    """TF's ``tf.strided_slice(input_, begin, end, strides, *masks)``: bit ``i`` of a mask
    applies to entry ``i`` of ``begin``/``end``/``strides`` (begin/end masks ignore the bound,
    ellipsis/new-axis masks make the entry ``...``/``tv.newaxis``, shrink-axis takes an index).

    >>> import tensorvm as tv
    >>> x = tv.constant([[1, 2, 3], [4, 5, 6]])
    >>> with tv.Session() as s:
    ...     s.run(tv.strided_slice(x, [0, 1], [2, 3], [1, 1])).tolist()
    [[2, 3], [5, 6]]
    """
    b, e = static_value(begin), static_value(end)
    st = static_value(strides) if strides is not None else None
    if b is None or e is None or (strides is not None and st is None):
        raise InvalidArgumentError("StridedSlice: begin, end and strides must be known when the "
                                   "graph is built (lists of ints or constants)")
    b, e = [int(v) for v in np.ravel(b)], [int(v) for v in np.ravel(e)]
    st = [1] * len(b) if st is None else [int(v) for v in np.ravel(st)]
    if not len(b) == len(e) == len(st):
        raise InvalidArgumentError(f"StridedSlice: begin, end and strides must have one length, "
                                   f"got {len(b)}, {len(e)}, {len(st)}")
    n = len(b)
    bm, em = _mask_bits(begin_mask, n), _mask_bits(end_mask, n)
    ell, new, shrink = (_mask_bits(ellipsis_mask, n), _mask_bits(new_axis_mask, n),
                        _mask_bits(shrink_axis_mask, n))
    key = []
    for i in range(n):
        if ell[i]:
            key.append(Ellipsis)
        elif new[i]:
            key.append(None)
        elif shrink[i]:
            key.append(b[i])
        else:
            key.append(_pyslice(None if bm[i] else b[i], None if em[i] else e[i], st[i]))
    return getitem(input_, tuple(key), name=name or "StridedSlice")
