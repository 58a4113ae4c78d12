"""Line ownership for byte-range splits (Hadoop's LineRecordReader rule), vectorised.

A split ``[start, end)`` owns exactly the lines that *start* inside it. A line starts at byte 0
and after every ``\\n``; a line across ``end`` is read whole by the split where it starts, and
skipped by the next one. A line ends at ``\\n`` (one ``\\r`` just before it is dropped too, so
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

from .errors import DataLossError

__all__ = ["owned_blocks", "lines_array", "DEFAULT_BLOCK_SIZE"]

DEFAULT_BLOCK_SIZE = 8 * 1024 * 1024
_SCAN = 64 * 1024


def _read_into(f: BinaryIO, block: bytearray, at: int) -> int:
    with memoryview(block) as whole:  # released on return, so the block can be resized
        view = whole[at:]
        try:
            readinto = getattr(f, "readinto", None)
            if readinto is not None:
                return readinto(view) or 0
            data = f.read(len(view))
            view[: len(data)] = data
            return len(data)
        finally:
            view.release()


def _skip_first_line(f: BinaryIO, start: int, end: int | None) -> tuple[int, bytes] | None:
    """Position after the first ``\\n`` at or after ``start - 1``, and the bytes read past it
    (trimmed to ``end``); ``None`` when that position is at or past ``end`` or at EOF."""
    pos = start - 1
    f.seek(pos)
    scan = _SCAN
    while True:
        chunk = f.read(scan)
        if not chunk:
            return None
        i = chunk.find(b"\n")
        if i >= 0:
            pos += i + 1
            rest = chunk[i + 1 :]
            break
        pos += len(chunk)
        scan = min(scan * 2, DEFAULT_BLOCK_SIZE)
    if end is not None:
        if pos >= end:
            return None
        if pos + len(rest) > end:
            rest = rest[: end - pos]
            f.seek(end)
    return pos, rest


def _finish_line(f: BinaryIO, carry: bytes) -> bytes:
    """``carry`` plus what follows up to and including the next ``\\n`` (or EOF)."""
    parts = [carry]
    scan = _SCAN
    while True:
        chunk = f.read(scan)
        if not chunk:
            break
        i = chunk.find(b"\n")
        if i >= 0:
            parts.append(chunk[: i + 1])
            break
        parts.append(chunk)
        scan = min(scan * 2, DEFAULT_BLOCK_SIZE)
    return b"".join(parts)


def owned_blocks(f: BinaryIO, start: int, end: int | None,
                 block_size: int = DEFAULT_BLOCK_SIZE) -> Iterator[bytearray | bytes]:
    """Yield the bytes of the lines owned by ``[start, end)`` (``end=None``: to EOF), in blocks
    of whole lines of about ``block_size`` bytes; each block ends with ``\\n`` except a last
    line at EOF. ``f`` is an open binary file (seekable unless ``start == 0``)."""
    if start > 0:
        found = _skip_first_line(f, start, end)
        if found is None:
            return
        pos, carry = found
    else:
        pos, carry = 0, b""
    read_pos = pos + len(carry)
    while end is None or read_pos < end:
        want = block_size if end is None else min(block_size, end - read_pos)
        block = bytearray(len(carry) + want)
        block[: len(carry)] = carry
        n = _read_into(f, block, len(carry))
        if n == 0:
            break
        read_pos += n
        del block[len(carry) + n :]
        if end is not None and read_pos >= end and block[-1] != 10:
            block += _finish_line(f, b"")  # the line across ``end`` is ours: finish it
            yield block
            return
        cut = block.rfind(b"\n") + 1
        carry = bytes(block[cut:])
        del block[cut:]  # shrinks in place: the block is exactly whole lines
        if cut:
            yield block
    if carry:  # a last line at EOF, or lines read while skipping that reach ``end``
        yield carry if carry.endswith(b"\n") else _finish_line(f, carry)


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
