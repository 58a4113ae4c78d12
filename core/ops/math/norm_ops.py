"""Vector and matrix norms: ``norm`` (TF's ``tf.norm``) and ``normalize``.
"""
from __future__ import annotations

import numpy as np

from ...framework.errors import InvalidArgumentError
from .math_ops import reduce_sum
from .decomposition_ops import svd

__all__ = ["norm"]


# ---- norm -----------------------------------------------------------------------------------------
def norm(tensor, ord="euclidean", axis=None, keepdims=None, name=None, keep_dims=None):
    """Vector norms (``axis`` None or an int: ``"euclidean"``/2, 1, ``np.inf``, any ``p >
    0``) and matrix norms (``axis`` two ints: ``"fro"``/``"euclidean"``, 1, ``np.inf``, 2 —
    the largest singular value), as TF's ``tf.norm``.

    >>> import tensorvm as tv
    >>> with tv.Session() as s:
    ...     float(s.run(tv.norm([3.0, 4.0])))
    5.0
    """
    from ...framework.graph import get_default_graph
    from ...framework.tensor_conversion import convert_to_tensor
    from ..array.manip_ops import squeeze, transpose
    from .math_ext import abs as _abs, reduce_max
    from .math_ops import pow as _pow, sqrt
    keepdims = bool(keep_dims if keepdims is None else keepdims)
    is_matrix = isinstance(axis, (tuple, list)) and len(axis) == 2
    if is_matrix:
        axis = tuple(axis)
        if not all(isinstance(a, (int, np.integer)) for a in axis) or axis[0] == axis[1]:
            raise ValueError(f"'axis' must be None, an integer, or a tuple of 2 unique "
                             f"integers, got {axis}")
        supported = ["euclidean", "fro", 1, 2, np.inf]
        if ord not in supported:
            raise ValueError(f"'ord' must be a supported matrix norm in {supported}, got {ord}")
    else:
        if not (axis is None or isinstance(axis, (int, np.integer))):
            raise ValueError(f"'axis' must be None, an integer, or a tuple of 2 unique "
                             f"integers, got {axis}")
        if (isinstance(ord, str) or not np.isreal(ord) or ord <= 0) and \
                ord not in ["euclidean", 1, 2, np.inf]:
            raise ValueError(f"'ord' must be a supported vector norm, got {ord}")
        if axis is not None:
            axis = (int(axis),)
    with get_default_graph().name_scope(name or "norm"):
        tensor = convert_to_tensor(tensor)
        rank = None if tensor._shape is None else len(tensor._shape)
        if ord in ("fro", "euclidean", 2, 2.0):
            if is_matrix and ord in (2, 2.0):
                if rank is None:
                    raise InvalidArgumentError("norm: a matrix 2-norm needs a known rank")
                pos = [a % rank for a in axis]
                perm = [k for k in range(rank) if k not in pos] + pos
                permed = transpose(tensor, perm)
                top = reduce_max(svd(permed, compute_uv=False), axis=-1, keepdims=True)
                from ..array.manip_ops import expand_dims
                result = transpose(expand_dims(top, -1), list(np.argsort(perm)))
            else:
                result = sqrt(reduce_sum(tensor * tensor, axis, keepdims=True))
        else:
            result = _abs(tensor)
            if ord == 1:
                result = reduce_sum(result, None if axis is None else axis[0], keepdims=True)
                if is_matrix:
                    result = reduce_max(result, axis[-1], keepdims=True)
            elif ord == np.inf:
                if is_matrix:
                    result = reduce_sum(result, axis[1], keepdims=True)
                result = reduce_max(result, None if axis is None else axis[0], keepdims=True)
            else:
                result = _pow(reduce_sum(_pow(result, float(ord)), axis, keepdims=True),
                              1.0 / ord)
        if not keepdims:
            result = squeeze(result, axis)
        return result


def normalize(tensor, ord="euclidean", axis=None, name=None):
    """``(tensor / norm, norm)`` with ``norm = tv.norm(tensor, ord, axis, keepdims=True)``
    (TF's ``tf.linalg.normalize``)."""
    from ...framework.graph import get_default_graph
    from ...framework.tensor_conversion import convert_to_tensor
    from .math_ops import cast
    with get_default_graph().name_scope(name or "normalize"):
        tensor = convert_to_tensor(tensor)
        n = cast(norm(tensor, ord=ord, axis=axis, keepdims=True), tensor.dtype)
        return tensor / n, n
