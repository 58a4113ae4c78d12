"""Arithmetic on indices and sets: ``searchsorted``, ``bincount``, ``setdiff1d``,
``invert_permutation`` and ``unravel_index`` (no gradients).
"""
from __future__ import annotations

import numpy as np

from ...framework.errors import InvalidArgumentError
from ...framework.graph import Tensor
from ...framework.op_def_library import apply_op
from ...vm.kernels.array_api import array_namespace
from ...framework.op_registry import register_op
from ...framework.tensor_conversion import convert_to_tensor
from ..common import check_int_dtype

__all__ = ["searchsorted", "bincount", "setdiff1d", "invert_permutation", "unravel_index"]


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
