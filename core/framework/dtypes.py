"""Tensor element types, named as in TensorFlow (``tv.float32``, ``tv.string`` …).

A :class:`DType` wraps a NumPy dtype; ``string`` tensors are NumPy object arrays of ``str``
on the CPU (pyarrow compute does the string kernels).

>>> import tensorvm as tv
>>> tv.as_dtype("float32") is tv.float32
True
>>> tv.as_dtype("float"), tv.as_dtype(float), tv.as_dtype("double")
(tv.float32, tv.float32, tv.float64)
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class DType:
    name: str
    np_dtype: np.dtype

    def __repr__(self) -> str:
        return f"tv.{self.name}"

    @property
    def is_floating(self) -> bool:
        """Whether this is a floating-point type (float16/32/64)."""
        return self.np_dtype.kind == "f"

    @property
    def is_complex(self) -> bool:
        """Whether this is a complex type."""
        return self.np_dtype.kind == "c"

    @property
    def is_integer(self) -> bool:
        """Whether this is a signed or unsigned integer type."""
        return self.np_dtype.kind in "iu"

    @property
    def is_bool(self) -> bool:
        """Whether this is ``bool``."""
        return self.np_dtype.kind == "b"

    @property
    def is_string(self) -> bool:
        """Whether this is ``string`` (held as NumPy object arrays of bytes)."""
        return self.np_dtype.kind == "O"

    @property
    def is_differentiable(self) -> bool:
        """Whether gradients flow through values of this type (floating or complex)."""
        return self.is_floating or self.is_complex


float16 = DType("float16", np.dtype(np.float16))
float32 = DType("float32", np.dtype(np.float32))
float64 = DType("float64", np.dtype(np.float64))
complex64 = DType("complex64", np.dtype(np.complex64))
complex128 = DType("complex128", np.dtype(np.complex128))
int8 = DType("int8", np.dtype(np.int8))
int16 = DType("int16", np.dtype(np.int16))
int32 = DType("int32", np.dtype(np.int32))
int64 = DType("int64", np.dtype(np.int64))
uint8 = DType("uint8", np.dtype(np.uint8))
uint16 = DType("uint16", np.dtype(np.uint16))
uint32 = DType("uint32", np.dtype(np.uint32))
uint64 = DType("uint64", np.dtype(np.uint64))
bool_ = DType("bool", np.dtype(np.bool_))
string = DType("string", np.dtype(object))

_ALL = [float16, float32, float64, complex64, complex128, int8, int16, int32, int64,
        uint8, uint16, uint32, uint64, bool_, string]
_BY_NAME = {d.name: d for d in _ALL}
_BY_NP = {d.np_dtype: d for d in _ALL}
# TensorFlow's own spellings: "float" is float32 (NumPy's "float" is float64), "double" is
# float64; Python's ``float`` type means float32 and ``bool`` bool, as in TF.
_BY_NAME.update({"float": float32, "double": float64, "half": float16, "bool_": bool_,
                 "str": string, "bytes": string})


def as_dtype(value) -> DType:
    """Turn a DType, a name, a NumPy dtype or a Python type into a :class:`DType`."""
    if isinstance(value, DType):
        return value
    if isinstance(value, str) and value in _BY_NAME:
        return _BY_NAME[value]
    if value is str or value is bytes:
        return string
    if value is float:
        return float32
    if value is bool:
        return bool_
    try:
        npd = np.dtype(value)
    except TypeError:
        raise TypeError(f"cannot interpret {value!r} as a tensorvm dtype") from None
    if npd.kind in "OSU":
        return string
    if npd in _BY_NP:
        return _BY_NP[npd]
    raise TypeError(f"unsupported dtype {value!r}")


def dtype_of_value(value) -> DType:
    """The DType a Python/NumPy value becomes as a constant (Python floats become float32, ints
    int32, as in TensorFlow)."""
    if isinstance(value, np.ndarray) or isinstance(value, np.generic):
        return as_dtype(value.dtype)
    arr = np.asarray(value)
    if arr.dtype.kind == "f":
        return float32
    if arr.dtype.kind in "iu":
        return int32
    return as_dtype(arr.dtype)


def to_numpy(value, dtype: DType) -> np.ndarray:
    """Convert ``value`` to an array of ``dtype`` (strings become an object array of str)."""
    if dtype.is_string:
        arr = np.asarray(value, dtype=object)
        return arr
    return np.asarray(value, dtype=dtype.np_dtype)
