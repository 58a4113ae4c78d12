"""Whole files as string tensors: ``tf.read_file``, ``tf.write_file`` and
``tf.matching_files`` (also under ``tv.io``), on any fsspec URL (local paths, ``file://``,
``memory://``, ``s3://`` …) through :mod:`tensorvm.storage`.

A write is all or nothing (:func:`tensorvm.storage.fsio.atomic_write_bytes`): a crash mid-write
never leaves a torn file. A missing file is ``NotFoundError`` naming it; an empty pattern match
is an empty vector, as in TF. Files are read and written by the host, so these ops are
CPU-only.

>>> import os, tempfile, tensorvm as tv
>>> path = os.path.join(tempfile.mkdtemp(), "hello.txt")
>>> with tv.Session() as s:
...     _ = s.run(tv.write_file(path, "hi there"))
...     s.run(tv.read_file(path))
b'hi there'
"""
from __future__ import annotations

import numpy as np

from ...framework import dtypes as _dt
from ...framework.errors import InvalidArgumentError, NotFoundError
from ...framework.op_def_library import apply_op
from ...framework.op_registry import register_op
from ...framework.tensor_conversion import convert_to_tensor

__all__ = ["read_file", "write_file", "matching_files"]

_HOST = "files are read and written by the host (fsspec)"


def _scalar_str(v, op, what) -> str:
    arr = np.asarray(v, dtype=object)
    if arr.ndim != 0:
        raise InvalidArgumentError(f"{op}: {what} must be a scalar string, got shape "
                                   f"{list(arr.shape)}")
    s = arr.item()
    return s.decode("utf-8", "surrogateescape") if isinstance(s, bytes) else str(s)


def _bytes(v) -> bytes:
    s = np.asarray(v, dtype=object).item()
    return s.encode("utf-8", "surrogateescape") if isinstance(s, str) else bytes(s)


def _read_file_kernel(filename):
    from ...storage import fsio
    url = _scalar_str(filename, "ReadFile", "filename")
    fs, path = fsio.to_fs(url)
    try:
        data = fsio.read_bytes(fs, path)
    except (FileNotFoundError, IsADirectoryError) as e:
        raise NotFoundError(f"ReadFile: {url}: {type(e).__name__}: no such file") from None
    return np.asarray(data, dtype=object)


def _write_file_kernel(filename, contents):
    from ...storage import fsio
    url = _scalar_str(filename, "WriteFile", "filename")
    fs, path = fsio.to_fs(url)
    parent = path.rstrip("/").rpartition("/")[0]
    if parent:
        fs.makedirs(parent, exist_ok=True)  # TF's WriteFile creates the directories too
    fsio.atomic_write_bytes(fs, path, _bytes(contents))
    return None


def _matching_files_kernel(pattern):
    from ...storage import fsio
    pats = np.asarray(pattern, dtype=object).reshape(-1)
    found: list[str] = []
    for p in pats:
        url = p.decode("utf-8", "surrogateescape") if isinstance(p, bytes) else str(p)
        fs, path = fsio.to_fs(url)
        # a URL pattern gives URLs back (fsspec's glob strips the protocol), a path paths
        found.extend(fs.unstrip_protocol(m) if "://" in url else m for m in sorted(fs.glob(path)))
    out = np.empty(len(found), dtype=object)
    out[:] = [f.encode() for f in found]
    return out


def _string_input(op, what, t, rank=0):
    if t.dtype != _dt.string:
        raise InvalidArgumentError(f"{op}: {what} must be a string tensor, got {t.dtype.name}")
    if rank == 0 and t._shape is not None and len(t._shape) != 0:
        raise InvalidArgumentError(f"{op}: {what} must be a scalar string, got shape "
                                   f"{list(t._shape)}")


def _read_shape(inputs, attrs):
    _string_input("ReadFile", "filename", inputs[0])
    return [(_dt.string, ())]


def _write_shape(inputs, attrs):
    _string_input("WriteFile", "filename", inputs[0])
    _string_input("WriteFile", "contents", inputs[1])
    return []


def _match_shape(inputs, attrs):
    _string_input("MatchingFiles", "pattern", inputs[0], rank=None)
    if inputs[0]._shape is not None and len(inputs[0]._shape) > 1:
        raise InvalidArgumentError(f"MatchingFiles: pattern must be a scalar or a vector, got "
                                   f"shape {list(inputs[0]._shape)}")
    return [(_dt.string, (None,))]


register_op("ReadFile", _read_shape, _read_file_kernel, differentiable=False, stateful=True,
            cpu_only=_HOST)
register_op("WriteFile", _write_shape, _write_file_kernel, differentiable=False, stateful=True,
            cpu_only=_HOST)
register_op("MatchingFiles", _match_shape, _matching_files_kernel, differentiable=False,
            stateful=True, cpu_only=_HOST)


def read_file(filename, name=None):
    """The whole contents of the file at ``filename`` (a path or fsspec URL) as a string."""
    return apply_op("ReadFile", [convert_to_tensor(filename, dtype=_dt.string)],
                    name=name or "ReadFile").outputs[0]


def write_file(filename, contents, name=None):
    """An op that writes ``contents`` to ``filename`` (all or nothing), creating its
    directories."""
    return apply_op("WriteFile", [convert_to_tensor(filename, dtype=_dt.string),
                                  convert_to_tensor(contents, dtype=_dt.string)],
                    name=name or "WriteFile")


def matching_files(pattern, name=None):
    """The files matching a glob ``pattern`` (or a vector of them), sorted per pattern."""
    return apply_op("MatchingFiles", [convert_to_tensor(pattern, dtype=_dt.string)],
                    name=name or "MatchingFiles").outputs[0]
