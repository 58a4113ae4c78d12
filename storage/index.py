"""The checkpoint index, ``<checkpoint>/index.json``: its schema, validation and reading.

The index is written last and *is* the commit: a checkpoint folder without one is debris. ::

    {"format": "tensorvm.checkpoint", "version": 2, "checksum_algorithm": "crc32c",
     "step": 100, "time": 1700000000.0, "meta": {},
     "entries": [{"name": "w", "dtype": "<f4", "shape": [50, 4], "slice": "0:50,:",
                  "full_shape": null, "offset": 0,
                  "file": "attempt-18c2f3a1b2c-9f0e1d2c3b4a/data-00000-of-00002",
                  "size": 928, "checksum": 123456789, "format": "npy"}, ...]}

``file`` is a plain file name inside the checkpoint folder, or inside one of its attempt
folders (``attempt-<hex>-<hex>/<plain name>``: every save writes a fresh one, see
:mod:`tensorvm.storage.checkpoint`); anything else (``..``, another ``/``, an absolute path, a
URL) is rejected as tampering. Version 1 (``checksum_algorithm: "wsum64"``, data files directly
in the folder) is still read. Declared shapes and sizes are checked against each other here,
and against the data files' real lengths before anything is read.

>>> validate_entry({"name": "w", "dtype": "<f4", "shape": [2], "slice": None,
...                 "file": "../x", "offset": 0, "size": 8, "checksum": 0, "format": "npy"},
...                "memory://c/index.json")  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
tensorvm.errors.DataLossError: index entry 'w': file '../x' is not a plain file name ...
"""

from __future__ import annotations

import json
import math
import re

import numpy as np

from .errors import CheckpointNotFoundError, DataLossError
from .fsio import join, read_bytes, regular_file_size, to_fs
from .checksums import ALGORITHM, LEGACY_ALGORITHM
from .slices import parse_slice

__all__ = ["INDEX_NAME", "FORMAT", "VERSION", "MAX_INDEX_BYTES", "validate_entry",
           "validate_index", "encode_index", "read_index", "regular_file_size"]

INDEX_NAME = "index.json"
FORMAT = "tensorvm.checkpoint"
VERSION = 2
_ALGORITHMS = {1: LEGACY_ALGORITHM, 2: ALGORITHM}  # version -> its checksum
MAX_NPY_HEADER = 1 << 17  # bytes: a .npy header of a record is never longer
#: bytes an ``index.json`` may have (~350 bytes an entry: over 300,000 tensors); a larger
#: file, or one that is not a regular file, is refused before it is read
MAX_INDEX_BYTES = 128 << 20
_MAX_NDIM = 64
_DTYPE = re.compile(  # what write_shard writes: numeric, bool, str, bytes (and object: refused)
    r"^(?:[<>|=][biufc][1-9][0-9]?|\|b1|[<>|=]U[0-9]{1,9}|\|S[0-9]{1,9}|\|O)$")
_ATTEMPT = re.compile(r"^attempt-[0-9a-f]{1,16}-[0-9a-f]{1,32}$")
_PLAIN_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._-]{0,254}$")
_REQUIRED = {"name": str, "dtype": str, "shape": list, "file": str, "offset": int, "size": int,
             "checksum": int, "format": str}


def is_plain_name(name: object) -> bool:
    """True for a file name with no directory part, scheme or ``..``."""
    return isinstance(name, str) and bool(_PLAIN_NAME.match(name)) and ".." not in name


def is_attempt_name(name: object) -> bool:
    """True for an attempt folder name, ``attempt-<hex>-<hex>``."""
    return isinstance(name, str) and bool(_ATTEMPT.match(name))


def is_data_path(path: object) -> bool:
    """True for an entry's ``file``: a plain name, or ``<attempt folder>/<plain name>``."""
    if not isinstance(path, str):
        return False
    head, sep, tail = path.partition("/")
    return is_plain_name(path) or (bool(sep) and is_attempt_name(head) and is_plain_name(tail))


def _parse_dtype(text: str, label: str, url: str) -> np.dtype:
    if not _DTYPE.match(text):
        raise DataLossError(f"index entry {label}: bad dtype {text!r}", url)
    try:
        return np.dtype(text)
    except Exception as e:  # noqa: BLE001 - NumPy raises TypeError, ValueError, SyntaxError...
        raise DataLossError(f"index entry {label}: bad dtype {text!r}", url) from e


def _check_sizes(entry: dict, dtype: np.dtype, label: str, url: str) -> None:
    """The declared shape must fit the declared size (Python ints: no overflow)."""
    count = math.prod(entry["shape"])
    if entry["format"] == "npy":
        payload = count * dtype.itemsize
        if not payload < entry["size"] <= payload + MAX_NPY_HEADER:
            raise DataLossError(f"index entry {label}: shape {entry['shape']} of "
                                f"{dtype.str} does not fit a record of {entry['size']} bytes",
                                url)
    elif count > entry["size"]:  # Arrow: at least one offset byte per value
        raise DataLossError(f"index entry {label}: shape {entry['shape']} does not fit a "
                            f"record of {entry['size']} bytes", url)


def validate_entry(entry: object, url: str) -> dict:
    """Check one index entry; raise :class:`DataLossError` naming ``url`` and the entry."""
    if not isinstance(entry, dict):
        raise DataLossError("index entry is not an object", url)
    label = repr(entry.get("name", "?"))
    for key, typ in _REQUIRED.items():
        value = entry.get(key)
        if not isinstance(value, typ) or isinstance(value, bool):
            raise DataLossError(f"index entry {label}: field {key!r} missing or not {typ.__name__}",
                                url)
    if not is_data_path(entry["file"]):
        raise DataLossError(f"index entry {label}: file {entry['file']!r} is not a plain file "
                            "name inside the checkpoint folder", url)
    if entry["format"] not in ("npy", "arrow"):
        raise DataLossError(f"index entry {label}: unknown record format {entry['format']!r}", url)
    if entry["offset"] < 0 or entry["size"] < 0:
        raise DataLossError(f"index entry {label}: negative offset or size", url)
    if len(entry["shape"]) > _MAX_NDIM or not all(
            isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in entry["shape"]):
        raise DataLossError(f"index entry {label}: bad shape {entry['shape']!r}", url)
    dtype = _parse_dtype(entry["dtype"], label, url)
    is_string = dtype.kind in "USO"
    if (entry["format"] == "arrow") != is_string or (not is_string and dtype.hasobject):
        raise DataLossError(f"index entry {label}: dtype {entry['dtype']!r} does not match "
                            f"format {entry['format']!r}", url)
    _check_sizes(entry, dtype, label, url)
    spec = entry.get("slice")
    if spec is not None:
        try:
            _, ranges = parse_slice(spec) if isinstance(spec, str) else (None, None)
        except ValueError as e:
            raise DataLossError(f"index entry {label}: {e}", url) from e
        if ranges is None or len(ranges) != len(entry["shape"]):
            raise DataLossError(f"index entry {label}: bad slice {spec!r}", url)
    full = entry.get("full_shape")
    if full is not None and (not isinstance(full, list) or len(full) != len(entry["shape"]) or
                             not all(type(d) is int and d >= 0 for d in full)):
        raise DataLossError(f"index entry {label}: bad full_shape {full!r}", url)
    return entry


def validate_index(index: object, url: str) -> dict:
    """Check a parsed index document; raise :class:`DataLossError` naming ``url``."""
    if not isinstance(index, dict) or index.get("format") != FORMAT:
        raise DataLossError("not a tensorvm checkpoint index", url)
    version = index.get("version")
    if isinstance(version, bool) or version not in _ALGORITHMS:
        raise DataLossError(f"unsupported checkpoint index version {version!r}", url)
    if index.get("checksum_algorithm") != _ALGORITHMS[version]:
        raise DataLossError(f"checksum algorithm {index.get('checksum_algorithm')!r} is not "
                            f"the one of version {version}", url)
    entries = index.get("entries")
    if not isinstance(entries, list):
        raise DataLossError("index has no entry list", url)
    seen = set()
    for entry in entries:
        validate_entry(entry, url)
        key = (entry["name"], entry.get("slice"))
        if key in seen:
            raise DataLossError(f"index lists tensor {entry['name']!r} slice "
                                f"{entry.get('slice')!r} twice", url)
        seen.add(key)
    return index


def encode_index(entries: list[dict], step: int | None, time: float, meta: dict | None) -> bytes:
    """Serialise a new index document (entries are validated by :func:`validate_index`)."""
    doc = {"format": FORMAT, "version": VERSION, "checksum_algorithm": ALGORITHM,
           "step": step, "time": time, "meta": meta or {}, "entries": list(entries)}
    return json.dumps(doc, indent=1, sort_keys=True).encode()


def read_index(ckpt_url: str, *, storage_options: dict | None = None) -> dict:
    """Read and validate ``<ckpt_url>/index.json``.

    Raises :class:`CheckpointNotFoundError` when there is none (the folder is not a committed
    checkpoint) and :class:`DataLossError` naming the index when it is corrupt or tampered.
    """
    url = join(ckpt_url, INDEX_NAME)
    fs, path = to_fs(url, storage_options)
    try:
        raw = read_bytes(fs, path, MAX_INDEX_BYTES, url)
    except FileNotFoundError:
        raise CheckpointNotFoundError("no committed checkpoint (index.json missing)",
                                      ckpt_url) from None
    try:
        doc = json.loads(raw)
    except (UnicodeDecodeError, ValueError) as e:
        raise DataLossError(f"checkpoint index is not valid JSON ({e})", url) from e
    return validate_index(doc, url)
