"""Cutting inputs into splits, and the input-format extension point.

A :class:`Split` is a frozen, JSON-serialisable piece of one input file: a byte range for line
and fixed-record formats, a run of row groups (Parquet) or record batches (Arrow IPC), or a run
of rows (``.npy``), and how it is read (:class:`~tensorvm.storage.read_options.ReadOptions`).
:func:`splits` cuts a glob or list of URLs into them; :func:`read` yields a split's record
batches. A split is plain data, so it can travel through a queue to any worker.

>>> import fsspec
>>> fsspec.filesystem("memory").pipe("/tvm-doc-splits/a.txt", b"one\\ntwo\\nthree\\n")
>>> parts = splits("memory://tvm-doc-splits/*.txt", split_size=5)
>>> [(s.start, s.end) for s in parts]
[(0, 5), (5, 10), (10, 14)]
>>> [read(s).__next__().to_pylist() if list(read(s)) else [] for s in parts]
[['one', 'two'], ['three'], []]
>>> Split.from_dict(parts[0].to_dict()) == parts[0]
True

Formats are :class:`InputFormat` subclasses registered by name with :func:`register_format`;
the built-in ones (``text``, ``jsonl``, ``csv``, ``fixed``, ``parquet``, ``arrow``, ``npy``) live
in :mod:`tensorvm.storage.readers` and :mod:`tensorvm.storage.columnar`.
"""

from __future__ import annotations

import abc
import gzip
import json
import lzma
import zlib
import types
from dataclasses import dataclass, field, fields, replace
from collections.abc import Mapping
from typing import Any, Iterator

import fsspec
from fsspec.core import has_magic
from fsspec.utils import infer_compression

from .errors import DataLossError
from .fsio import to_fs
from .output import committed_files
from .read_options import NO_OPTIONS, ReadOptions, declare_format_options

__all__ = ["Split", "ReadOptions", "InputFormat", "register_format", "input_formats",
           "infer_format", "splits", "read", "DEFAULT_SPLIT_SIZE"]

DEFAULT_SPLIT_SIZE = 64 * 1024 * 1024
# what a damaged gzip/bz2/xz stream raises while it is read (bz2: a plain OSError, no errno)
_DECOMPRESSION_ERRORS = (EOFError, zlib.error, gzip.BadGzipFile, lzma.LZMAError)


def _is_damaged_stream(e: BaseException) -> bool:
    """A decompressor's complaint about its input, not an I/O failure (those keep their type)."""
    return isinstance(e, _DECOMPRESSION_ERRORS) or (type(e) is OSError and e.errno is None)


@dataclass(frozen=True)
class Split:
    """One piece of one input file; plain data (see :meth:`to_dict`).

    ``start``/``end``: byte range ``[start, end)`` (``end=None``: to the end of the file; used
    by line and fixed-record formats, and a compressed file is always one split ``[0, None)``).
    ``row_groups``: Parquet row groups or Arrow IPC record batches of this split.
    ``row_start``/``row_end``: ``.npy`` rows ``[row_start, row_end)``.
    ``options``: how the split is read (a :class:`ReadOptions`; a dict of options is made
    into one, checked).
    """

    url: str
    format: str
    start: int = 0
    end: int | None = None
    row_groups: tuple[int, ...] | None = None
    row_start: int | None = None
    row_end: int | None = None
    compression: str | None = None
    options: ReadOptions = field(default=NO_OPTIONS, repr=False)

    def __post_init__(self):
        if isinstance(self.options, Mapping):
            object.__setattr__(self, "options", ReadOptions.from_dict(self.options))
        elif not isinstance(self.options, ReadOptions):
            raise ValueError(f"a split's options are a ReadOptions, got {self.options!r}")

    def with_options(self, **changes: Any) -> "Split":
        """This split read with some format options changed (checked as :meth:`ReadOptions.of`).

        >>> Split("file:///d/a.csv", "csv").with_options(header=True).options.header
        True
        """
        return replace(self, options=self.options.replace(**changes))

    @property
    def id(self) -> str:
        """A stable, readable identifier, e.g. ``file:///d/a.txt@text[0:67108864]``."""
        if self.row_groups is not None:
            part = f"groups[{','.join(map(str, self.row_groups))}]"
        elif self.row_start is not None:
            part = f"rows[{self.row_start}:{self.row_end}]"
        else:
            part = f"[{self.start}:{'' if self.end is None else self.end}]"
        return f"{self.url}@{self.format}{part}"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict; ``Split.from_dict(s.to_dict()) == s``. ``options`` holds the
        options that differ from the defaults (:meth:`ReadOptions.to_dict`)."""
        d = {f.name: getattr(self, f.name) for f in fields(self)}
        d["row_groups"] = list(self.row_groups) if self.row_groups is not None else None
        d["options"] = self.options.to_dict()
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Split":
        """Inverse of :meth:`to_dict` (missing and unknown keys are named: ValueError). A dict
        written before the options were typed (``options_json``: the options as JSON text) is
        read too."""
        d = dict(d)
        known = [f.name for f in fields(cls)]
        if "options_json" in d:  # the older form
            if "options" in d:
                raise ValueError("a split has both options and options_json (the older "
                                 "form of options); give one")
            d["options"] = json.loads(d.pop("options_json") or "{}")
        for k in d:
            if k not in known:
                raise ValueError(f"unknown key {k!r} in a split (a dict from Split.to_dict() "
                                 f"has {', '.join(known)})")
        for k in ("url", "format"):
            if k not in d:
                raise ValueError(f"a split needs {k!r} (a dict from Split.to_dict() has "
                                 f"{', '.join(known)})")
        if d.get("row_groups") is not None:
            d["row_groups"] = tuple(int(i) for i in d["row_groups"])
        if d.get("options") is None:
            d.pop("options", None)
        return cls(**d)


class InputFormat(abc.ABC):
    """Base class of input formats: how a file is cut into splits and how a split is read.

    Subclasses set ``name`` and ``extensions`` and implement :meth:`read`; byte-range formats
    keep the default :meth:`make_splits`. A format with options of its own names them in
    ``option_names`` (read back with ``split.options.get(name)``). Example::

        class Lines(InputFormat):
            name, extensions = "mylines", (".mylines",)
            def read(self, split, f, batch_size, url):
                yield pa.array(f.read().decode().splitlines())

        register_format(Lines())
    """

    name: str = ""
    extensions: tuple[str, ...] = ()
    option_names: tuple[str, ...] = ()  # options of this format beyond ReadOptions' fields

    def record_bytes(self, options: ReadOptions) -> int | None:
        """Byte ranges must be multiples of this (fixed-length records), or ``None``."""
        return None

    def make_splits(self, url: str, fs: fsspec.AbstractFileSystem, path: str, size: int,
                    split_size: int, compression: str | None,
                    options: ReadOptions) -> list[Split]:
        """Default: byte ranges of ``split_size`` bytes; a compressed file is one split."""
        if compression is not None:
            return [Split(url, self.name, 0, None, compression=compression, options=options)]
        step = split_size
        rb = self.record_bytes(options)
        if rb:
            step = max(1, split_size // rb) * rb
        return [Split(url, self.name, lo, min(lo + step, size), options=options)
                for lo in range(0, size, step)]

    @abc.abstractmethod
    def read(self, split: Split, f, batch_size: int | None, url: str) -> Iterator[Any]:
        """Yield the record batches of ``split`` from the open file ``f`` (every format
        defines this)."""


_FORMATS: dict[str, InputFormat] = {}
#: read-only view of the registered input formats, by name
FORMATS = types.MappingProxyType(_FORMATS)


def register_format(fmt: InputFormat, clobber: bool = False) -> InputFormat:
    """Register an :class:`InputFormat` under ``fmt.name``; refuses to replace one silently."""
    if not fmt.name:
        raise ValueError("an InputFormat needs a name")
    if fmt.name in _FORMATS and not clobber:
        raise ValueError(f"input format {fmt.name!r} is already registered (clobber=True)")
    declare_format_options(fmt.name, tuple(fmt.option_names))
    _FORMATS[fmt.name] = fmt
    return fmt


def _unregister_format(name: str) -> None:
    """Forget the format ``name`` and its options (tests that register one of their own)."""
    _FORMATS.pop(name, None)
    declare_format_options(name, None)


def input_formats() -> types.MappingProxyType:
    """The registered formats, by name (read-only)."""
    return FORMATS


def _get(name: str) -> InputFormat:
    try:
        return _FORMATS[name]
    except KeyError:
        raise ValueError(f"unknown input format {name!r}; known: {sorted(_FORMATS)}") from None


def infer_format(path: str) -> str:
    """Format name from a file extension (compression extensions ignored); ``text`` if unknown.

    >>> infer_format("s3://b/part-0.parquet"), infer_format("/d/log.jsonl.gz")
    ('parquet', 'jsonl')
    """
    name = path.rsplit("/", 1)[-1].lower()
    if infer_compression(name):
        name = name.rsplit(".", 1)[0]
    for fmt in _FORMATS.values():
        if any(name.endswith(ext) for ext in fmt.extensions):
            return fmt.name
    return "text"


def _expand(url: str, storage_options: dict | None
            ) -> list[tuple[str, fsspec.AbstractFileSystem, str]]:
    fs, path = to_fs(url, storage_options)
    if has_magic(path):
        found = sorted(fs.glob(path))
        files = [p for p in found if not fs.isdir(p)]
        return [(fs.unstrip_protocol(p), fs, p) for p in files]
    if fs.isdir(path):
        root = path.rstrip("/")
        listed = committed_files(fs, root, url)
        if listed is not None:  # a committed output: exactly what its _SUCCESS lists
            return [(fs.unstrip_protocol(p), fs, p) for p in listed]
        files = sorted(p for p in fs.find(path)
                       if not any(part[:1] in "._" for part in p[len(root):].split("/") if part))
        return [(fs.unstrip_protocol(p), fs, p) for p in files]
    if not fs.exists(path):
        raise FileNotFoundError(f"input not found: {url}")
    return [(url, fs, path)]


def splits(urls: str | list[str], format: str | None = "text",
           split_size: int = DEFAULT_SPLIT_SIZE, *, storage_options: dict | None = None,
           **options: Any) -> list[Split]:
    """Cut a glob, folder or list of fsspec URLs into :class:`Split` s, in file order.

    ``format``: a registered format name, or ``None`` to infer each file's from its extension.
    ``options`` are format options stored in every split, checked here
    (:meth:`ReadOptions.of`: an unknown name or a bad value is ValueError): ``record_bytes``
    (``fixed``), ``encoding`` (``text``: ``"utf-8"`` or ``None`` for bytes), ``header``,
    ``delimiter``, ``column_names``, ``column_types`` (``csv``), ``columns`` (``parquet``),
    ``compression_type`` (``tfrecord``), ``block_size`` (line formats).
    A folder contributes its files except names starting with ``_`` or ``.`` (``_SUCCESS``);
    a committed output folder exactly the files its ``_SUCCESS`` lists, and one with part files
    but no ``_SUCCESS`` (its job never committed) is :class:`DataLossError` naming it.
    Empty files give no splits. ``storage_options`` go to fsspec and are *not* stored in the
    splits (pass them again to :func:`read`).
    """
    if split_size < 1:
        raise ValueError(f"split_size must be positive, got {split_size}")
    opts = ReadOptions.of(**options)  # fail early on a bad option
    out: list[Split] = []
    matched = False
    for url in [urls] if isinstance(urls, str) else list(urls):
        for file_url, fs, path in _expand(url, storage_options):
            matched = True
            fmt = _get(format or infer_format(path))
            size = fs.size(path)
            compression = infer_compression(path) if fmt.name not in ("parquet", "arrow") else None
            if not size:
                continue
            out.extend(fmt.make_splits(file_url, fs, path, size, split_size, compression,
                                       opts))
    if not matched:
        raise FileNotFoundError(f"no input files match {urls!r}")
    return out


def read(split: Split | dict, batch_size: int | None = None, *,
         storage_options: dict | None = None) -> Iterator[Any]:
    """Yield the record batches of one split (NumPy arrays or Arrow arrays/record batches).

    ``batch_size``: at most this many records per batch (``None``: the format's natural
    blocks, a few MiB each). Corrupt input is :class:`~tensorvm.storage.errors.DataLossError`
    naming the URL.
    """
    if isinstance(split, dict):
        split = Split.from_dict(split)
    if batch_size is not None and batch_size < 1:
        raise ValueError(f"batch_size must be positive, got {batch_size}")
    fmt = _get(split.format)
    fs, path = to_fs(split.url, storage_options)
    try:
        f = fs.open(path, "rb", compression=split.compression)
    except FileNotFoundError as e:  # gone since the splits were made: name the URL
        raise FileNotFoundError(f"input not found: {split.url} (split {split.id})") from e
    with f:
        if split.compression is None:
            yield from fmt.read(split, f, batch_size, split.url)
            return
        try:
            yield from fmt.read(split, f, batch_size, split.url)
        except (EOFError, zlib.error, lzma.LZMAError, OSError) as e:
            if not _is_damaged_stream(e):
                raise
            raise DataLossError(f"corrupt or truncated {split.compression} input "
                                f"({type(e).__name__}: {e})", split.url) from e
