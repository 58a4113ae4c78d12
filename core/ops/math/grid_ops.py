"""Evenly spaced values and coordinate grids: ``linspace`` (``lin_space``) and ``meshgrid``.
"""
from __future__ import annotations

import numpy as np

from ...framework import dtypes as _dt
from ...framework.errors import InvalidArgumentError
from ...framework.tensor_conversion import convert_to_tensor
from ..array.array_ops import constant, zeros_like
from .math_ops import cast, norm_axes
from .elementwise_ops import equal, greater, logical_and, maximum
from .select_ops import where_

__all__ = ["linspace", "lin_space", "meshgrid"]


# ---- linspace, meshgrid ------------------------------------------------------------------------
def linspace(start, stop, num, name=None, axis=0):
    """``num`` evenly spaced values from ``start`` to ``stop`` inclusive (the last is exactly
    ``stop``); ``start``/``stop`` may be tensors of one shape, the values then go along
    ``axis``. ``num`` may be a tensor. Gradients flow to ``start`` and ``stop``.

    >>> import tensorvm as tv
    >>> with tv.Session() as s:
    ...     s.run(tv.linspace(0.0, 1.0, 5)).tolist()
    [0.0, 0.25, 0.5, 0.75, 1.0]
    """
    from ...framework.graph import get_default_graph
    from ..array.array_ops import reshape
    from ..array.fill_ops import range as _range
    from ..array.manip_ops import expand_dims
    with get_default_graph().name_scope(name or "linspace"):
        start = convert_to_tensor(start, name="start")
        stop = convert_to_tensor(stop, name="stop", dtype=start.dtype
                                 if not isinstance(stop, np.ndarray) else None)
        if start.dtype.is_integer:  # TF 2's rule: integer bounds give float64 values
            start, stop = cast(start, _dt.float64), cast(stop, _dt.float64)
        elif not start.dtype.is_floating:
            raise InvalidArgumentError(f"LinSpace: start and stop must be numbers, got "
                                       f"{start.dtype.name}")
        num = convert_to_tensor(num, name="num") if not isinstance(num, int) else num
        rank = None if start._shape is None else len(start._shape)
        ax = axis if rank is None else norm_axes(axis, rank + 1)[0] if rank else 0
        n_int = cast(num, _dt.int32) if not isinstance(num, int) else num
        steps = cast(n_int - 1, start.dtype) if not isinstance(num, int) else \
            constant(float(max(num - 1, 1)), dtype=start.dtype)
        if not isinstance(num, int):
            steps = maximum(steps, constant(1.0, dtype=start.dtype))
        idx = cast(_range(n_int), start.dtype)
        s, e = expand_dims(start, ax), expand_dims(stop, ax)
        shape_of_idx = [1] * ((rank or 0) + 1)
        shape_of_idx[ax] = -1
        idx = reshape(idx, shape_of_idx)
        out = s + idx * ((e - s) / steps)
        # the last value is exactly ``stop`` (TF's linspace_nd)
        if isinstance(num, int) and num <= 1:
            return out
        is_last = equal(reshape(_range(n_int), shape_of_idx), n_int - 1)
        if not isinstance(num, int):
            is_last = logical_and(is_last, greater(n_int, 1))
        return where_(is_last, e + zeros_like(out), out)


lin_space = linspace


def meshgrid(*args, **kwargs):
    """N-D coordinate arrays from N 1-D tensors (TF's ``tf.meshgrid``): ``indexing="xy"``
    (default, Cartesian: the first two output dimensions swapped) or ``"ij"`` (matrix).

    >>> import tensorvm as tv
    >>> X, Y = tv.meshgrid([1, 2, 3], [4, 5])
    >>> with tv.Session() as s:
    ...     s.run(X).tolist(), s.run(Y).tolist()
    ([[1, 2, 3], [1, 2, 3]], [[4, 4, 4], [5, 5, 5]])
    """
    from ...framework.graph import get_default_graph
    from ..array.array_ops import reshape, stack
    from ..array.fill_ops import ones, size
    indexing = kwargs.pop("indexing", "xy")
    name = kwargs.pop("name", "meshgrid")
    if kwargs:
        key = next(iter(kwargs))
        raise TypeError(f"'{key}' is an invalid keyword argument for this function")
    if indexing not in ("xy", "ij"):
        raise ValueError(f"Argument `indexing` parameter must be either 'xy' or 'ij', got "
                         f"'{indexing}'")
    with get_default_graph().name_scope(name):
        ndim = len(args)
        s0 = (1,) * ndim
        if not ndim:
            return []
        output = []
        for i, x in enumerate(args):
            x = convert_to_tensor(x) if not isinstance(x, (list, tuple)) else stack(
                [convert_to_tensor(v) for v in x]) if any(
                    hasattr(v, "op") for v in x) else convert_to_tensor(x)
            output.append(reshape(x, s0[:i] + (-1,) + s0[i + 1:]))
        shapes = [size(x) for x in output]
        dtype = output[0].dtype
        if indexing == "xy" and ndim > 1:
            output[0] = reshape(output[0], (1, -1) + (1,) * (ndim - 2))
            output[1] = reshape(output[1], (-1, 1) + (1,) * (ndim - 2))
            shapes[0], shapes[1] = shapes[1], shapes[0]
        mult_fact = ones(shapes, dtype)
        return [x * mult_fact for x in output]
