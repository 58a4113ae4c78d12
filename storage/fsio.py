"""Small fsspec helpers shared by the storage modules: URL joining, opening, atomic replace.

Every public function of ``tensorvm.storage`` takes URLs (``file://``, ``memory://``, ``s3://``,
plain local paths, ...) plus an optional keyword ``storage_options`` dict that is passed
unchanged to :func:`fsspec.core.url_to_fs` (e.g. ``{"client_kwargs": {"endpoint_url": ...}}``
for an S3-compatible server). Nothing else is configured globally.

>>> fs, path = to_fs("memory://tvm-doc/a")
>>> join("memory://tvm-doc/a/", "b", "c")
'memory://tvm-doc/a/b/c'
"""

from __future__ import annotations

import uuid

import fsspec
from fsspec.core import split_protocol, url_to_fs

from .errors import DataLossError

__all__ = ["to_fs", "join", "basename", "atomic_write_bytes", "exists", "read_bytes",
           "regular_file_size", "has_atomic_writes", "is_process_local"]

#: protocols whose files live in one process's memory (other processes never see them)
PROCESS_LOCAL_PROTOCOLS = frozenset({"memory"})


def is_process_local(url: str) -> bool:
    """True for URLs that only the writing process can read (``memory://``): a checkpoint or an
    output written there by tasks on worker processes is lost to every other process.

    >>> is_process_local("memory://ckpt"), is_process_local("s3://b/ckpt")
    (True, False)
    """
    protocol = fsspec.core.split_protocol(str(url))[0] or "file"
    return protocol in PROCESS_LOCAL_PROTOCOLS

#: protocols whose single-object writes are all-or-nothing (a PUT / an upload / a dict store)
ATOMIC_WRITE_PROTOCOLS = frozenset({"s3", "s3a", "gs", "gcs", "memory"})


def has_atomic_writes(fs: fsspec.AbstractFileSystem) -> bool:
    """True where one ``pipe`` publishes a whole object or nothing (S3, GCS, memory)."""
    protocols = fs.protocol if isinstance(fs.protocol, (tuple, list)) else (fs.protocol,)
    return bool(ATOMIC_WRITE_PROTOCOLS.intersection(protocols))


def to_fs(url: str, storage_options: dict | None = None) -> tuple[fsspec.AbstractFileSystem, str]:
    """Return ``(filesystem, path)`` for ``url``; ``storage_options`` go to fsspec."""
    return url_to_fs(url, **(storage_options or {}))


def join(url: str, *parts: str) -> str:
    """Join URL parts with ``/`` (fsspec paths use ``/`` on every filesystem)."""
    out = url.rstrip("/")
    for part in parts:
        out = out + "/" + part.strip("/")
    return out


def basename(url: str) -> str:
    """The last component of a URL or path."""
    return url.rstrip("/").rsplit("/", 1)[-1]


def match_files(patterns) -> list[str]:
    """The files matching the globs ``patterns`` (one or a list), sorted per pattern, in the
    patterns' own form: a URL pattern gives URLs, a path pattern paths; directories left out."""
    out = []
    for pattern in [patterns] if isinstance(patterns, str) else list(patterns):
        fs, path = url_to_fs(pattern)
        found = sorted(p for p in fs.glob(path) if not fs.isdir(p))
        keep_protocol = split_protocol(pattern)[0] is not None
        out += [fs.unstrip_protocol(p) if keep_protocol else p for p in found]
    return out


def exists(fs: fsspec.AbstractFileSystem, path: str) -> bool:
    """``fs.exists`` that treats permission/transport oddities of missing keys as absence."""
    try:
        return fs.exists(path)
    except FileNotFoundError:
        return False


def regular_file_size(fs: fsspec.AbstractFileSystem, path: str, url: str,
                      limit: int | None = None) -> int:
    """The length of the regular file at ``path``; :class:`DataLossError` naming ``url`` for
    anything else (a device, a FIFO, a folder; a symlink counts as what it points to) or, with
    ``limit``, a file longer than that (the message names the cap); ``FileNotFoundError`` when
    there is nothing. Checked *before* a file is opened: opening a FIFO blocks until a writer
    comes, and a device such as ``/dev/zero`` never ends."""
    fs.invalidate_cache(path)
    info = fs.info(path)
    size = info.get("size")
    if info.get("type") != "file" or not isinstance(size, int):
        cap = "" if limit is None else \
            f"; it is read only as a regular file of at most {limit} bytes"
        raise DataLossError(f"not a regular file ({info.get('type')}){cap}", url)
    if limit is not None and size > limit:
        raise DataLossError(f"file of {size} bytes is larger than the {limit} bytes allowed "
                            "for it", url)
    return size


_CHUNK = 1 << 20


def read_bytes(fs: fsspec.AbstractFileSystem, path: str, limit: int | None = None,
               url: str | None = None) -> bytes:
    """Read a whole file; with ``limit``, a small one (metadata: an index, a state file, a
    meta graph): it must be a regular file (:func:`regular_file_size`) of at most ``limit``
    bytes, else :class:`DataLossError` naming ``url`` (default ``path``) and the cap, raised
    before anything is read; and no more than ``limit`` bytes are ever held, should the file
    grow (or be swapped) after that check."""
    if limit is None:
        with fs.open(path, "rb") as f:
            return f.read()
    url = url or path
    regular_file_size(fs, path, url, limit)
    pieces, held = [], 0
    with fs.open(path, "rb") as f:
        while True:
            piece = f.read(min(_CHUNK, limit + 1 - held))
            if not piece:
                break
            pieces.append(piece)
            held += len(piece)
            if held > limit:
                raise DataLossError(f"file grew past the {limit} bytes allowed for it while "
                                    "it was read", url)
    return b"".join(pieces)


def atomic_write_bytes(fs: fsspec.AbstractFileSystem, path: str, data: bytes) -> None:
    """Replace ``path`` with ``data``, all or nothing, in as few requests as the store allows.

    Where single-object writes are atomic (S3, GCS, memory: :func:`has_atomic_writes`) this is
    one ``pipe`` (one PUT; a temporary object then a move would cost PUT + COPY + DELETE). Else
    (local/POSIX) a temporary sibling is written, then ``fs.mv`` renames it over ``path``.
    """
    if has_atomic_writes(fs):
        fs.pipe(path, data)
        return
    parent, _, name = path.rstrip("/").rpartition("/")
    tmp = f"{parent}/.{name}.tmp-{uuid.uuid4().hex}"
    try:
        with fs.open(tmp, "wb") as f:
            f.write(data)
        fs.mv(tmp, path)
    finally:
        if exists(fs, tmp):
            _quiet_rm(fs, tmp)


def _quiet_rm(fs: fsspec.AbstractFileSystem, path: str, recursive: bool = False) -> None:
    try:
        fs.rm(path, recursive=recursive)
    except FileNotFoundError:
        pass
