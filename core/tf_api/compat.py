"""``tv.compat``: TF's text helpers and ``tv.compat.v1`` (the module itself: a TF 2 program
that writes ``import tensorflow.compat.v1 as tf`` becomes ``tf = tensorvm.tf_api.compat.v1``).

>>> import tensorvm as tv
>>> tv.compat.v1 is tv, tv.compat.as_bytes("h\\u00e9"), tv.compat.as_str(b"h\\xc3\\xa9")
(True, b'h\\xc3\\xa9', 'hé')
"""
from __future__ import annotations

import importlib
import numbers

import numpy as np

__all__ = ["as_bytes", "as_str", "as_text", "as_str_any", "path_to_str", "integral_types",
           "real_types", "complex_types", "bytes_or_text_types",
           "disable_eager_execution", "disable_v2_behavior", "enable_eager_execution",
           "executing_eagerly"]

bytes_or_text_types = (bytes, str)
integral_types = (numbers.Integral, np.integer)
real_types = (numbers.Real, np.integer, np.floating)
complex_types = (numbers.Complex, np.number)


def as_bytes(bytes_or_text, encoding: str = "utf-8") -> bytes:
    """``bytes`` as is; ``str`` encoded (``bytearray`` copied). Anything else is a TypeError."""
    if isinstance(bytes_or_text, bytearray):
        return bytes(bytes_or_text)
    if isinstance(bytes_or_text, str):
        return bytes_or_text.encode(encoding)
    if isinstance(bytes_or_text, bytes):
        return bytes_or_text
    raise TypeError(f"Expected binary or unicode string, got {bytes_or_text!r}")


def as_text(bytes_or_text, encoding: str = "utf-8") -> str:
    """``str`` as is; ``bytes`` decoded. Anything else is a TypeError."""
    if isinstance(bytes_or_text, str):
        return bytes_or_text
    if isinstance(bytes_or_text, bytes):
        return bytes_or_text.decode(encoding)
    raise TypeError(f"Expected binary or unicode string, got {bytes_or_text!r}")


as_str = as_text


def as_str_any(value) -> str:
    """``as_str`` for bytes, ``str(value)`` for anything else."""
    return as_str(value) if isinstance(value, bytes) else str(value)


def path_to_str(path):
    """A ``os.PathLike`` as its ``str``; anything else as is."""
    import os
    return os.fspath(path) if isinstance(path, os.PathLike) else path


def disable_eager_execution() -> None:
    """Nothing to do: tensorvm always builds graphs (TF 1.x's mode)."""


def disable_v2_behavior() -> None:
    """Nothing to do: tensorvm is TF 1.x's behaviour."""


def enable_eager_execution(*args, **kwargs):
    """Refused, as TF refuses what a runtime does not support (``UnimplementedError``):
    tensorvm is TF 1.x's graph runtime."""
    from ..framework.errors import UnimplementedError
    raise UnimplementedError("tensorvm runs graphs only: eager execution is not available "
                             "(build a graph and run it in a tv.Session)")


def executing_eagerly() -> bool:
    """Always ``False``: tensorvm builds graphs and runs them in sessions (TF 1.x's mode)."""
    return False


def __getattr__(name):
    if name == "v1":  # the package itself (imported lazily: tensorvm imports this module)
        return importlib.import_module("tensorvm")
    raise AttributeError(f"module 'tensorvm.tf_api.compat' has no attribute {name!r}")
