"""``tv.substr`` and ``tv.reduce_join`` (also ``tv.strings.substr``/``reduce_join``), vectorised
with pyarrow like the other string ops (:mod:`tensorvm.ops.strings.string_ops`).

``substr(input, pos, len, unit="BYTE")`` takes ``len`` bytes (or UTF-8 characters with
``unit="UTF8_CHAR"``) from ``pos`` (negative counts from the end); ``pos`` and ``len`` (of one
shape) broadcast against ``input``; a ``pos`` outside ``[-length, length]`` of its string is TF's
``InvalidArgumentError``. ``reduce_join`` concatenates along ``axis`` (all axes by default) with
``separator``.

>>> import tensorvm as tv
>>> with tv.Session() as s:
...     s.run([tv.substr(["hello", "world"], 1, 3), tv.reduce_join([["a", "b"], ["c", "d"]], 1)])
[array(['ell', 'orl'], dtype=object), array(['ab', 'cd'], dtype=object)]
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ...framework import dtypes as _dt
from ...framework.errors import InvalidArgumentError
from ...framework.graph import Tensor
from ...framework.op_def_library import apply_op
from ...framework.op_registry import register_op
from ...framework.tensor_conversion import convert_to_tensor
from ..common import broadcast_shapes, static_value
from .string_ops import _arrow, _numpy

__all__ = ["substr", "reduce_join"]

_HOST = "string tensors live in host memory (pyarrow compute)"


def _lengths(a: pa.Array, unit: str) -> np.ndarray:
    n = pc.utf8_length(a) if unit == "UTF8_CHAR" else pc.binary_length(a)
    return np.asarray(n.to_numpy(zero_copy_only=False), dtype=np.int64)


def _slice(a: pa.Array, start: int, length: int, unit: str) -> pa.Array:
    stop = start + length
    stop = None if start < 0 <= stop else stop  # s[-2:0] would be empty: to the end instead
    if unit == "UTF8_CHAR":
        return pc.utf8_slice_codeunits(a, start=start, stop=stop)
    if pa.types.is_large_binary(a.type):  # raw bytes (an encoded image …)
        out = pc.binary_slice(a, start=start, stop=stop)
        try:
            return out.cast(pa.large_string())
        except pa.ArrowInvalid:
            return out
    buf = a.buffers()[2]
    if buf is None or buf.size == 0 or int(np.frombuffer(buf, np.uint8).max()) < 128:
        return pc.utf8_slice_codeunits(a, start=start, stop=stop)  # ASCII: bytes == chars
    out = pc.binary_slice(a.cast(pa.large_binary()), start=start, stop=stop)
    try:  # strings stay str where the cut leaves valid UTF-8 (tensorvm's string values)
        return out.cast(pa.large_string())
    except pa.ArrowInvalid:
        return out


def _substr_kernel(x, pos, length, *, unit):
    xs = np.asarray(x, dtype=object)
    p, n = np.asarray(pos, dtype=np.int64), np.asarray(length, dtype=np.int64)
    shape = np.broadcast_shapes(xs.shape, p.shape, n.shape)
    xs, p, n = (np.broadcast_to(v, shape).reshape(-1) for v in (xs, p, n))
    try:
        a = _arrow(xs)
    except pa.ArrowInvalid:  # bytes that are not UTF-8: sliced as bytes
        if unit == "UTF8_CHAR":
            raise InvalidArgumentError("Substr: unit UTF8_CHAR needs valid UTF-8 strings") \
                from None
        a = pa.array(xs, type=pa.large_binary())
    lens = _lengths(a, unit)
    bad = (p > lens) | (p < -lens)
    if bad.any():
        i = int(np.nonzero(bad)[0][0])
        raise InvalidArgumentError(f"Substr: pos {int(p[i])} out of range for string "
                                   f"{xs[i]!r} at index {i}")
    if (n < 0).any():
        raise InvalidArgumentError(f"Substr: len must be non-negative, got {int(n[n < 0][0])}")
    pairs = np.stack([p, n], 1)
    uniq, group = np.unique(pairs, axis=0, return_inverse=True)
    group = group.reshape(-1)
    out = np.empty(xs.size, dtype=object)
    for g, (start, ln) in enumerate(uniq):  # one vectorised slice per distinct (pos, len)
        take = np.nonzero(group == g)[0]
        part = a if uniq.shape[0] == 1 else a.take(pa.array(take))
        out[take] = _slice(part, int(start), int(ln), unit).to_numpy(zero_copy_only=False)
    return out.reshape(shape)


def _substr_shape(inputs, attrs):
    x, pos, n = inputs
    if not x.dtype.is_string:
        raise InvalidArgumentError(f"Substr expects a string tensor, got {x.dtype.name}")
    for what, t in (("pos", pos), ("len", n)):
        if not t.dtype.is_integer:
            raise InvalidArgumentError(f"Substr: {what} must be int32 or int64, got "
                                       f"{t.dtype.name}")
    if pos._shape is not None and n._shape is not None and len(pos._shape) != len(n._shape):
        raise InvalidArgumentError(f"Substr: pos and len must have the same shape, got "
                                   f"{list(pos._shape)} and {list(n._shape)}")
    if attrs["unit"] not in ("BYTE", "UTF8_CHAR"):
        raise InvalidArgumentError(f"Substr: unit must be 'BYTE' or 'UTF8_CHAR', got "
                                   f"{attrs['unit']!r}")
    shape = broadcast_shapes(broadcast_shapes(x._shape, pos._shape), n._shape)
    return [(_dt.string, shape)]


def _reduce_join_kernel(x, *, axes, keep_dims, separator):
    xs = np.asarray(x, dtype=object)
    nd = xs.ndim
    axes = tuple(range(nd)) if axes is None else tuple(a % nd for a in axes) if nd else ()
    rest = [i for i in range(nd) if i not in axes]
    moved = np.transpose(xs, rest + list(axes)) if nd else xs
    out_shape = tuple(xs.shape[i] for i in rest)
    k = int(np.prod([xs.shape[i] for i in axes], dtype=np.int64))
    m = int(np.prod(out_shape, dtype=np.int64))
    lists = pa.LargeListArray.from_arrays(pa.array(np.arange(0, m * k + 1, max(k, 1))
                                                   if k else np.zeros(m + 1, np.int64),
                                                   type=pa.int64()),
                                          _arrow(moved.reshape(-1)))
    joined = _numpy(pc.binary_join(lists, pa.scalar(separator, pa.large_string())), out_shape)
    if keep_dims:
        joined = joined.reshape(tuple(1 if i in axes else xs.shape[i] for i in range(nd)))
    return joined


def _reduce_join_shape(inputs, attrs):
    (x,) = inputs
    if not x.dtype.is_string:
        raise InvalidArgumentError(f"ReduceJoin expects a string tensor, got {x.dtype.name}")
    axes, keep = attrs["axes"], attrs["keep_dims"]
    if x._shape is None:
        return [(_dt.string, None)]
    nd = len(x._shape)
    for a in axes or ():
        if not -nd <= a < max(nd, 1):
            raise InvalidArgumentError(f"ReduceJoin: axis {a} is out of range for a tensor of "
                                       f"rank {nd}")
    red = set(range(nd)) if axes is None else {a % nd for a in axes} if nd else set()
    if keep:
        return [(_dt.string, tuple(1 if i in red else d for i, d in enumerate(x._shape)))]
    return [(_dt.string, tuple(d for i, d in enumerate(x._shape) if i not in red))]


register_op("Substr", _substr_shape, _substr_kernel, differentiable=False, cpu_only=_HOST)
register_op("ReduceJoin", _reduce_join_shape, _reduce_join_kernel, differentiable=False,
            cpu_only=_HOST)


def _string_tensor(x):
    """A tensor stays as it is (a wrong dtype is the op's error); Python/NumPy values are
    converted to strings."""
    if isinstance(x, Tensor) or hasattr(x, "_as_graph_element"):
        return convert_to_tensor(x)
    return convert_to_tensor(x, dtype=_dt.string)


def substr(input, pos, len, name=None, unit="BYTE"):  # noqa: A002  (TF's argument names)
    """``len`` bytes (or UTF-8 characters) of each string from ``pos`` (negative: from the
    end); ``pos``/``len`` broadcast against ``input``."""
    return apply_op("Substr", [_string_tensor(input),
                               convert_to_tensor(pos), convert_to_tensor(len)],
                    {"unit": str(unit)}, name=name or "Substr").outputs[0]


def reduce_join(inputs, axis=None, keep_dims=False, separator="", name=None,
                reduction_indices=None, keepdims=None):
    """The strings of ``inputs`` concatenated along ``axis`` (all axes when None) with
    ``separator``."""
    axis = reduction_indices if axis is None else axis
    if axis is not None:
        v = static_value(axis)
        if v is None:
            raise InvalidArgumentError("reduce_join: axis must be known when the graph is built")
        axis = tuple(int(a) for a in np.asarray(v).reshape(-1))
    keep = bool(keepdims if keepdims is not None else keep_dims)
    return apply_op("ReduceJoin", [_string_tensor(inputs)],
                    {"axes": axis, "keep_dims": keep, "separator": str(separator)},
                    name=name or "ReduceJoin").outputs[0]
