"""Selection: ``where`` (TF 1.x's: ``condition`` the shape of ``x`` or its first dimension;
with one argument the indices of the true elements), ``where_v2`` (NumPy broadcasting of all
three) and ``clip_by_value``.
"""
from __future__ import annotations

import numpy as np

from ...framework import dtypes as _dt
from ...framework.errors import InvalidArgumentError
from ...framework.op_def_library import apply_op
from ...framework.op_registry import register_op
from ...framework.tensor_conversion import convert_to_tensor
from ..array.array_ops import zeros_like
from ..common import _convert_pair, broadcast_shapes, check_same_dtype
from ..common import unbroadcast
from .elementwise_ops import maximum, minimum

__all__ = ["where", "clip_by_value", "where_v2"]


# ---- where / select ---------------------------------------------------------------------------
def _select_shape(inputs, attrs):
    c, x, y = inputs
    if not c.dtype.is_bool:
        raise InvalidArgumentError(f"where: condition must be bool, got {c.dtype.name}")
    dt = check_same_dtype([x, y], "Select")
    s = broadcast_shapes(x._shape, y._shape)
    if c._shape is not None and s is not None and len(c._shape) == 1 and len(s) > 1:
        rows = (c._shape[0],) + (1,) * (len(s) - 1)  # TF1: a vector condition picks rows
        try:
            return [(dt, broadcast_shapes(rows, s))]
        except InvalidArgumentError:
            raise InvalidArgumentError(
                f"where: a rank-1 condition selects rows, so its length ({c._shape[0]}) must "
                f"match the first dimension of x and y (shape {list(s)})") from None
    return [(dt, broadcast_shapes(c._shape, s))]


def _select_kernel(c, x, y):
    nd = max(np.ndim(x), np.ndim(y))
    if np.ndim(c) == 1 and nd > 1:  # TF1: a vector condition picks whole rows
        c = np.reshape(c, (-1,) + (1,) * (nd - 1))
    return np.where(c, x, y)


def _select_grad(op, g):
    c, x, y = op.inputs
    z = zeros_like(g)
    return [None, unbroadcast(where_(c, g, z), x), unbroadcast(where_(c, z, g), y)]


register_op("Select", _select_shape, _select_kernel, grad=_select_grad)


def _where_indices_shape(inputs, attrs):
    (c,) = inputs
    if c.dtype.is_string:
        raise InvalidArgumentError("where: condition must be bool or numeric, got string")
    return [(_dt.int64, None if c._shape is None else (None, len(c._shape)))]


def _where_indices_kernel(c):
    return np.argwhere(c).astype(np.int64, copy=False)


register_op("Where", _where_indices_shape, _where_indices_kernel, differentiable=False)


def where_(condition, x, y, name=None):
    """The three-argument select: ``x`` where ``condition`` holds, else ``y``."""
    condition = convert_to_tensor(condition)
    x, y = _convert_pair(x, y)
    return apply_op("Select", [condition, x, y], name=name).outputs[0]


def where(condition, x=None, y=None, name=None):
    """``tv.where(c)``: int64 coordinates ``[num_true, rank]`` of the true elements of ``c``;
    ``tv.where(c, x, y)``: elements of ``x`` where ``c`` holds, else of ``y``.

    ``x``, ``y`` and ``c`` broadcast (NumPy rules), except that a rank-1 ``c`` with higher-rank
    ``x``/``y`` selects whole rows, as in TF1's ``tf.where``.

    >>> import tensorvm as tv
    >>> with tv.Session() as s:
    ...     s.run(tv.where([True, False], [1, 2], [10, 20])).tolist()
    [1, 20]
    """
    if x is None and y is None:
        return apply_op("Where", [condition], name=name).outputs[0]
    if x is None or y is None:
        raise InvalidArgumentError("where: x and y must both be given, or neither")
    return where_(condition, x, y, name=name)


def clip_by_value(t, clip_value_min, clip_value_max, name=None):
    """``min(max(t, clip_value_min), clip_value_max)``; the clip values may broadcast against
    ``t`` but must not enlarge it. Gradients flow where ``t`` is inside the range."""
    t = convert_to_tensor(t)
    out = maximum(minimum(t, clip_value_max), clip_value_min, name=name or "clip_by_value")
    a, b = t._shape, out._shape
    if a is not None and b is not None and (len(a) != len(b) or any(
            x is not None and y is not None and x != y for x, y in zip(a, b))):
        raise InvalidArgumentError(
            f"clip_by_value: the clip values broadcast t from shape {list(a)} to {list(b)}; "
            f"they must not change t's shape")
    return out


# ---- where_v2 (NumPy broadcasting of all three) -------------------------------------------------
def _select_v2_shape(inputs, attrs):
    c, x, y = inputs
    if not c.dtype.is_bool:
        raise InvalidArgumentError(f"where_v2: condition must be bool, got {c.dtype.name}")
    dt = check_same_dtype([x, y], "SelectV2")
    return [(dt, broadcast_shapes(c._shape, broadcast_shapes(x._shape, y._shape)))]


def _select_v2_grad(op, g):  # TF's _SelectGradV2
    c, x, y = op.inputs
    z = zeros_like(g)
    return [None, unbroadcast(apply_op("SelectV2", [c, g, z]).outputs[0], x),
            unbroadcast(apply_op("SelectV2", [c, z, g]).outputs[0], y)]


def _select_v2_kernel(c, x, y):
    return np.where(c, x, y)


register_op("SelectV2", _select_v2_shape, _select_v2_kernel, grad=_select_v2_grad)


def where_v2(condition, x=None, y=None, name=None):
    """``tv.where_v2(c)``: the coordinates of the true elements of ``c`` (as ``tv.where``);
    ``tv.where_v2(c, x, y)``: ``x`` where ``c`` holds, else ``y``, all three broadcast by
    NumPy's rules (TF 2's ``tf.where``: a rank-1 ``c`` broadcasts as NumPy's, it does not
    select rows).

    >>> import tensorvm as tv
    >>> with tv.Session() as s:
    ...     s.run(tv.where_v2([True, False], [[1, 2], [3, 4]], 0)).tolist()
    [[1, 0], [3, 0]]
    """
    if x is None and y is None:
        return where(condition, name=name)
    if x is None or y is None:
        raise ValueError("x and y must both be non-None or both be None.")
    condition = convert_to_tensor(condition)
    x, y = _convert_pair(x, y)
    return apply_op("SelectV2", [condition, x, y], name=name).outputs[0]
