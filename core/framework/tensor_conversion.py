"""``convert_to_tensor`` and the registry of conversion functions behind it.

As in TensorFlow (``tensor_conversion_registry.py``), op families register how values of their
types become tensors: ``array_ops`` registers Python and NumPy values (a constant, or a
``stack`` of a list that holds tensors), ``index_ops`` registers :class:`IndexedSlices` (densified,
with TF's warning). Anything else is refused with the value named: ``None`` is a
``ValueError``, an unsupported type a ``TypeError``.

>>> import tensorvm as tv
>>> convert_to_tensor([1.0, 2.0]).dtype
tv.float32
>>> convert_to_tensor(None)
Traceback (most recent call last):
...
ValueError: None values not supported (convert_to_tensor(None))
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from . import dtypes as _dt
from .errors import InvalidArgumentError
from .graph import Tensor

# (base type or tuple of types, priority, fn(value, dtype, name, graph) -> Tensor)
_CONVERSIONS: list[tuple[type | tuple, int, Callable]] = []


def register_tensor_conversion_function(base_type, conversion_func: Callable,
                                        priority: int = 100) -> None:
    """Make values of ``base_type`` convertible: ``conversion_func(value, dtype, name, graph)``
    returns a Tensor. Lower ``priority`` is tried first (TF's rule)."""
    _CONVERSIONS.append((base_type, priority, conversion_func))
    _CONVERSIONS.sort(key=lambda e: e[1])


def _describe(value) -> str:
    r = repr(value)
    return r if len(r) <= 80 else r[:77] + "..."


def convert_to_tensor(value, dtype=None, name: str | None = None, graph=None) -> Tensor:
    """A Tensor as is (checked against ``dtype``), a Variable's value, or the tensor a registered
    conversion makes (a constant from Python and NumPy values).

    Raises ``ValueError`` for ``None`` and ragged lists, ``TypeError`` for values of types with
    no conversion (dicts, arbitrary objects) and for lists mixing strings with numbers.
    """
    if isinstance(value, Tensor):
        if dtype is not None and _dt.as_dtype(dtype) != value.dtype:
            from .graph import _user_location
            raise InvalidArgumentError(
                f"tensor {value.name!r} has dtype {value.dtype.name}, expected "
                f"{_dt.as_dtype(dtype).name} (converting an op input at {_user_location()})")
        return value
    if hasattr(value, "_as_graph_element"):
        return convert_to_tensor(value._as_graph_element(), dtype, name, graph)
    if value is None:
        raise ValueError("None values not supported (convert_to_tensor(None))")
    for base, _, fn in _CONVERSIONS:
        if isinstance(value, base):
            return convert_to_tensor(fn(value, dtype, name, graph), dtype)
    raise TypeError(f"Failed to convert object of type {type(value).__name__} to Tensor. "
                    f"Contents: {_describe(value)}. Consider casting elements to a supported "
                    "type.")


_SCALARS = (bool, int, float, complex, np.bool_, np.number)
_STRINGS = (str, bytes, np.str_, np.bytes_)


def check_plain_value(value):
    """``value`` as a NumPy array if it is a plain tensor value (numbers, strings, NumPy arrays
    and nested lists of them, all strings or all numbers); else ``TypeError``/``ValueError``
    naming it. Used by the constant conversion; numeric arrays pass without a per-element
    look."""
    try:
        arr = np.asarray(value)
    except ValueError:
        raise ValueError(f"Failed to convert {_describe(value)} to Tensor: the nested lists are "
                         "ragged (every row must have the same length)") from None
    if arr.dtype.kind not in "OUS":
        return arr
    kinds = set()
    for leaf in (arr.ravel() if arr.dtype.kind == "O" else ()):
        if leaf is None:
            raise ValueError(f"None values not supported (in {_describe(value)})")
        if isinstance(leaf, _STRINGS):
            kinds.add("string")
        elif isinstance(leaf, _SCALARS):
            kinds.add("number")
        elif isinstance(leaf, (list, tuple, np.ndarray)):
            raise ValueError(f"Failed to convert {_describe(value)} to Tensor: the nested "
                             "lists are ragged (every row must have the same length)")
        else:
            raise TypeError(f"Failed to convert object of type {type(leaf).__name__} to Tensor. "
                            f"Contents: {_describe(value)}. Consider casting elements to a "
                            "supported type.")
    if arr.dtype.kind in "US" and isinstance(value, (list, tuple)):
        kinds = {"string" if isinstance(x, _STRINGS) else "number" for x in _leaves(value)}
    if len(kinds) > 1:
        raise TypeError(f"Failed to convert {_describe(value)} to Tensor: it mixes strings "
                        "with numbers")
    return arr


def _leaves(value):
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, (list, tuple)):
            stack.extend(v)
        else:
            yield v
