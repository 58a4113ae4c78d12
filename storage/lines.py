"""Line ownership for byte-range splits (Hadoop's LineRecordReader rule), vectorised.

A split ``[start, end)`` owns exactly the lines that *start* inside it. A line starts at byte 0
and after every ``\\n``; a line across ``end`` is read whole by the split where it starts, and
skipped by the next one. :func:`first_line_start` is that rule, the one copy of it (the
map-reduce reader asks it where a split's lines begin). A line ends at ``\\n`` (one ``\\r`` just before it is dropped too, so
``\\r\\n`` files work) or at the end of the file; ``\\n`` is never inside a multi-byte UTF-8
character, so boundaries never cut one.

:func:`owned_blocks` yields the owned bytes in blocks of whole lines; :func:`lines_array` turns
one block into an Arrow string (or binary) array with NumPy/Arrow kernels — no Python loop over
lines.

>>> import io
>>> data = b"ab\\ncd\\r\\nef"
>>> [lines_array(b).to_pylist() for b in owned_blocks(io.BytesIO(data), 0, 4, 1 << 20)]
[['ab', 'cd']]
>>> [lines_array(b).to_pylist() for b in owned_blocks(io.BytesIO(data), 4, 10, 1 << 20)]
[['ef']]
"""

from __future__ import annotations

from typing import BinaryIO, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from fsspec.utils import seek_delimiter

from .errors import DataLossError

__all__ = ["first_line_start", "owned_blocks", "lines_array", "DEFAULT_BLOCK_SIZE"]

DEFAULT_BLOCK_SIZE = 8 * 1024 * 1024


def first_line_start(f: BinaryIO, start: int) -> int:
    """Where the first line owned by a split starting at byte ``start`` begins: ``start`` if a
    line starts there (byte 0, or just after a ``\n``), else just after the next ``\n`` (the
    line across ``start`` belongs to the split before), else the end of the file. This is the
    one place the rule is written; ``f`` must be seekable.

    >>> import io
    >>> [first_line_start(io.BytesIO(b"ab\\ncd\\n"), s) for s in (0, 1, 2, 3, 4, 7)]
    [0, 3, 3, 3, 6, 6]
    """
    if start <= 0:
        return 0
    f.seek(start - 1)
    if start == 1 and f.read(1) == b"\n":  # (seek_delimiter never searches from byte 0)
        return 1
    if not seek_delimiter(f, b"\n", 1 << 16):
        f.seek(0, 2)  # no line starts after ``start``: the end of the file
    return f.tell()


def _range_block(f: BinaryIO, lo: int, hi: int) -> tuple[bytes, int]:
    """The lines that start in ``[lo, hi)`` and the file position where they end: from the
    first line start at or after ``lo`` to the first at or after ``hi`` (the last line runs
    past ``hi``)."""
    first = first_line_start(f, lo)
    if first >= hi:
        return b"", first
    stop = first_line_start(f, hi)
    f.seek(first)
    return f.read(stop - first), stop


def _stream_blocks(f: BinaryIO, skip_first: bool, block_size: int) -> Iterator[bytes]:
    """Whole lines of a sequential stream (a compressed file), in blocks of about
    ``block_size`` bytes: linear time, memory bounded by a block plus the longest line."""
    pending: list[bytes] = []
    while True:
        chunk = f.read(block_size)
        if not chunk:
            break
        cut = chunk.rfind(b"\n") + 1
        if not cut:
            pending.append(chunk)
            continue
        pending.append(chunk[:cut])
        block = b"".join(pending) if len(pending) > 1 else pending[0]
        pending = [chunk[cut:]] if cut < len(chunk) else []
        if skip_first:  # the line across the split's start belongs to the previous split
            skip_first = False
            block = block[block.find(b"\n") + 1 :]
            if not block:
                continue
        yield block
    if pending and not skip_first:
        yield b"".join(pending)


def owned_blocks(f: BinaryIO, start: int, end: int | None,
                 block_size: int = DEFAULT_BLOCK_SIZE) -> Iterator[bytes]:
    """Yield the bytes of the lines owned by ``[start, end)`` (``end=None``: to EOF), in blocks
    of whole lines of about ``block_size`` bytes; each block ends with ``\n`` except a last
    line at EOF.

    With an ``end``, ``f`` must be seekable: each block runs from one line start
    (:func:`first_line_start`) to another, over consecutive sub-ranges of the split. Without
    one (a compressed file, read whole), ``f`` is read sequentially in chunks, never seeking back.
    """
    block_size = max(1, int(block_size))
    if end is None:
        if start > 0:
            f.seek(start - 1)
        yield from _stream_blocks(f, start > 0, block_size)
        return
    pos = start
    while pos < end:
        block, stop = _range_block(f, pos, min(pos + block_size, end))
        if block:
            yield block
        pos = max(stop, pos + 1)  # the next line starts at ``stop``


def _needs_exact_path(block: bytes | bytearray, arr: np.ndarray) -> bool:
    if block.find(b"\r") < 0:  # memchr: much cheaper than a NumPy pass
        return False
    cr = arr == 13
    if arr[-1] == 13:  # an unterminated last line ending in \r keeps it
        return True
    # "\r\r\n": rtrim would drop both \r, only one belongs to the terminator
    return bool((cr[:-2] & cr[1:-1] & (arr[2:] == 10)).any())


def _exact_strip(arr: np.ndarray, offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Drop each line's ``\n`` and the one ``\r`` before it; compact data, new offsets."""
    starts, ends = offsets[:-1], offsets[1:]
    term = arr[ends - 1] == 10
    content_end = ends - term
    cr = term & (content_end > starts) & (arr[np.maximum(content_end - 1, 0)] == 13)
    keep = np.ones(len(arr), bool)
    keep[(ends - 1)[term]] = False
    keep[(content_end - 1)[cr]] = False
    new_offsets = np.zeros(len(starts) + 1, offsets.dtype)
    np.cumsum(content_end - cr - starts, out=new_offsets[1:])
    return arr[keep], new_offsets


def lines_array(block: bytes | bytearray | memoryview, encoding: str | None = "utf-8",
                url: str = "") -> pa.Array:
    """Split a block of whole lines into an Arrow array, terminators removed.

    ``encoding="utf-8"`` gives ``pa.string()`` (invalid UTF-8 is :class:`DataLossError` naming
    ``url``); ``encoding=None`` gives ``pa.binary()``.
    """
    if encoding not in ("utf-8", "utf8", None):
        raise ValueError(f"text encoding must be 'utf-8' or None (bytes), got {encoding!r}")
    if isinstance(block, memoryview):
        whole = isinstance(block.obj, (bytes, bytearray)) and block.nbytes == len(block.obj)
        block = block.obj if whole else block.tobytes()
    arr = np.frombuffer(block, np.uint8)
    if arr.size == 0:
        return pa.array([], pa.string() if encoding else pa.binary())
    nl = np.flatnonzero(arr == 10)
    tail = arr[-1] != 10
    big = arr.size >= 2**31 - 1
    offsets = np.empty(len(nl) + 1 + tail, np.int64 if big else np.int32)
    offsets[0] = 0
    offsets[1 : len(nl) + 1] = nl + 1
    if tail:
        offsets[-1] = arr.size
    n = len(offsets) - 1
    typ = pa.large_string() if big else pa.string()
    if _needs_exact_path(block, arr):
        data, offsets = _exact_strip(arr, offsets)
        out = pa.Array.from_buffers(typ, n, [None, pa.py_buffer(offsets), pa.py_buffer(data)])
    else:
        raw = pa.Array.from_buffers(typ, n, [None, pa.py_buffer(offsets), pa.py_buffer(block)])
        # exact here: each line has one trailing \n at most, and no "\r\r\n" / final "\r"
        out = pc.ascii_rtrim(raw, characters="\r\n")
    if encoding is None:
        return out.view(pa.large_binary() if big else pa.binary())
    try:
        out.validate(full=True)
    except pa.ArrowInvalid as e:
        raise DataLossError(f"invalid UTF-8 text (read with encoding=None for bytes) ({e})",
                            url) from e
    return out
