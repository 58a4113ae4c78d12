"""``wsum64``: the record checksum of tensorvm checkpoints — one vectorised NumPy pass.

The bytes of a record, zero-padded to whole rows of 8 KiB, are read as little-endian ``uint64``
words ``W[q, r]`` (row ``q``, column ``r`` of 1024); the checksum is ::

    sum over q, r of  K**q * (2*r + 1) * W[q, r]   mod 2**64,   K = 0x9E3779B97F4A7C15

Every weight is odd, hence invertible mod 2**64, so any change confined to one word (a flipped
byte or bit) always changes the value; moving or swapping words changes it too (weights of
different positions differ, as ``K`` is odd and ``K**d`` is far from any small ratio).
Verifying it needs only NumPy::

    W = np.frombuffer(record + bytes(-len(record) % 8192), "<u8").reshape(-1, 1024)
    T = W @ (2 * np.arange(1024, dtype=np.uint64) + 1)             # per-row sums
    P = np.cumprod(np.r_[1, [0x9E3779B97F4A7C15] * (len(T) - 1)].astype(np.uint64))
    check = int((T * P).sum(dtype=np.uint64))

Why not CRC-32: on the 2-core reference machine ``zlib.crc32`` costs 0.40 CPU-s/GiB, more than
writing the bytes to the page cache (~0.3), which halves a verified save or restore against
``np.save``/``np.load``; this sum costs ~0.1 CPU-s/GiB (``np.einsum``, GIL released) and runs
on a helper thread while the main thread copies.

>>> checksum(b"\\x01" + bytes(7) + b"\\x02") == 1 * 1 + 3 * 2
True
>>> s = WSum64(); s.update(b"\\x01" + bytes(7)); s.update(b"\\x02"); s.digest()
7
"""

from __future__ import annotations

import numpy as np

__all__ = ["ALGORITHM", "WSum64", "checksum"]

ALGORITHM = "wsum64"
K = 0x9E3779B97F4A7C15
_MASK = (1 << 64) - 1
_COLS = 1024
_ROW = _COLS * 8  # bytes per row
_ODD = 2 * np.arange(_COLS, dtype=np.uint64) + 1


def _powers(first: int, n: int) -> np.ndarray:
    """``first * K**j`` for ``j < n``, as wrapping ``uint64``."""
    steps = np.full(n, K, dtype=np.uint64)
    steps[0] = first
    return np.multiply.accumulate(steps)


class WSum64:
    """Streaming ``wsum64``: ``update`` with consecutive pieces, then ``digest``."""

    __slots__ = ("_value", "_kq", "_pending")

    def __init__(self) -> None:
        self._value = 0
        self._kq = 1  # K**q for the next row q
        self._pending = b""

    def _rows(self, raw: np.ndarray) -> None:
        rows = raw.view("<u8").reshape(-1, _COLS)
        sums = np.einsum("qr,r->q", rows, _ODD)  # one pass, GIL released
        self._value = (self._value + int((sums * _powers(self._kq, len(sums))).sum(
            dtype=np.uint64))) & _MASK
        self._kq = (self._kq * pow(K, len(sums), 1 << 64)) & _MASK

    def update(self, data) -> None:
        """Add the next bytes (any bytes-like object)."""
        raw = np.frombuffer(data, np.uint8)
        if self._pending:
            need = _ROW - len(self._pending)
            head = self._pending + raw[:need].tobytes()
            raw = raw[need:]
            if len(head) < _ROW:
                self._pending = head
                return
            self._pending = b""
            self._rows(np.frombuffer(head, np.uint8))
        cut = len(raw) - len(raw) % _ROW
        if cut:
            self._rows(raw[:cut])
        self._pending = raw[cut:].tobytes()

    def digest(self) -> int:
        """The checksum of everything added so far (the last row zero-padded)."""
        if not self._pending:
            return self._value
        last = WSum64()
        last._kq = self._kq
        last._rows(np.frombuffer(self._pending.ljust(_ROW, b"\0"), np.uint8))
        return (self._value + last._value) & _MASK


def checksum(*pieces) -> int:
    """``wsum64`` of the concatenation of ``pieces`` (bytes-like objects)."""
    state = WSum64()
    for piece in pieces:
        state.update(piece)
    return state.digest()
