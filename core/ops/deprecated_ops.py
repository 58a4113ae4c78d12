"""TF 1.x's deprecated spellings that old programs still use, as thin aliases of the current
ops: ``tf.mul``/``tf.sub``/``tf.neg`` (TF 0.x names of multiply/subtract/negative),
``tf.arg_max``/``tf.arg_min``, ``tf.to_float``/``to_double``/``to_int32``/``to_int64``,
``tf.div`` is in math_ops. The deprecated keyword arguments (``reduction_indices=``,
``keep_dims=``, ``dim=``) are accepted by the ops themselves.

>>> import tensorvm as tv
>>> with tv.Session() as s: s.run(tv.to_float(tv.arg_max([[1, 3, 2]], 1)))
array([1.], dtype=float32)
"""
from __future__ import annotations

from ..framework import dtypes as _dt
from .math.math_ext import argmax, argmin
from .math.math_ops import cast, multiply, negative, subtract

__all__ = ["mul", "sub", "neg", "arg_max", "arg_min", "to_float", "to_double", "to_int32",
           "to_int64"]


def mul(x, y, name=None):
    """TF 0.x's name of :func:`multiply`."""
    return multiply(x, y, name=name)


def sub(x, y, name=None):
    """TF 0.x's name of :func:`subtract`."""
    return subtract(x, y, name=name)


def neg(x, name=None):
    """TF 0.x's name of :func:`negative`."""
    return negative(x, name=name)


def arg_max(input, dimension, name=None, output_type=_dt.int64):
    """Deprecated :func:`argmax` (``dimension`` is the axis)."""
    return argmax(input, axis=dimension, name=name, output_type=output_type)


def arg_min(input, dimension, name=None, output_type=_dt.int64):
    """Deprecated :func:`argmin` (``dimension`` is the axis)."""
    return argmin(input, axis=dimension, name=name, output_type=output_type)


def to_float(x, name="ToFloat"):
    """``cast(x, float32)``."""
    return cast(x, _dt.float32, name=name)


def to_double(x, name="ToDouble"):
    """``cast(x, float64)``."""
    return cast(x, _dt.float64, name=name)


def to_int32(x, name="ToInt32"):
    """``cast(x, int32)``."""
    return cast(x, _dt.int32, name=name)


def to_int64(x, name="ToInt64"):
    """``cast(x, int64)``."""
    return cast(x, _dt.int64, name=name)
