"""``wsum64``: the record checksum of tensorvm checkpoints — NumPy-vectorised, position-aware.

The bytes of a record, zero-padded to a multiple of 8, are read as little-endian ``uint64``
words ``w[0..k)``; the checksum is ::

    sum((2 * i + 1) * w[i] for i in range(k))  mod 2**64

Every weight is odd, hence invertible mod 2**64, so any change confined to one word (a flipped
byte or bit) always changes the sum, and moved words change it unless their distance times
their difference is a multiple of 2**63. Verifying it needs only NumPy::

    w = np.frombuffer(record + bytes(-len(record) % 8), "<u8")
    check = int((w * (2 * np.arange(len(w), dtype=np.uint64) + 1)).sum(dtype=np.uint64))

Why not CRC-32: on the 2-core reference machine ``zlib.crc32`` runs at 2.0–2.6 GB/s, about
the speed of ``np.save``'s own copy into the page cache, which caps a verified save or restore
near 0.5–0.6 of ``np.save``/``np.load``; this sum, computed blockwise with two axis reductions,
runs at about 5 GB/s and, on a helper thread, hides behind the copy.

>>> c = WSum64(); c.update(b"\\x01" + bytes(7)); c.update(b"\\x02"); c.digest()
7
>>> checksum(b"\\x01" + bytes(7) + b"\\x02") == 1 * 1 + 3 * 2
True
"""

from __future__ import annotations

import numpy as np

__all__ = ["ALGORITHM", "WSum64", "checksum"]

ALGORITHM = "wsum64"
_MASK = (1 << 64) - 1
_LANES = 1024  # words per row of the blockwise reduction (any value gives the same result)
_LANE_INDEX = np.arange(_LANES, dtype=np.uint64)
_PIECE_WORDS = 128 * _LANES  # 1 MiB


def _weighted(words: np.ndarray) -> tuple[int, int]:
    """``(sum(w), sum(j * w[j]))`` mod 2**64, in two vectorised passes."""
    k = len(words)
    full = k - k % _LANES
    total = jsum = 0
    if full:
        rows = words[:full].reshape(-1, _LANES)
        row_sums = rows.sum(axis=1, dtype=np.uint64)
        col_sums = rows.sum(axis=0, dtype=np.uint64)
        row_index = np.arange(len(row_sums), dtype=np.uint64)
        total = int(row_sums.sum(dtype=np.uint64))
        jsum = (_LANES * int((row_sums * row_index).sum(dtype=np.uint64))
                + int((col_sums * _LANE_INDEX).sum(dtype=np.uint64)))
    if full < k:
        tail = words[full:]
        total += int(tail.sum(dtype=np.uint64))
        jsum += int((tail * np.arange(full, k, dtype=np.uint64)).sum(dtype=np.uint64))
    return total & _MASK, jsum & _MASK


class WSum64:
    """Streaming ``wsum64``: ``update`` with consecutive pieces, then ``digest``."""

    __slots__ = ("_value", "_words", "_pending")

    def __init__(self) -> None:
        self._value = 0
        self._words = 0
        self._pending = b""

    def _add_words(self, words: np.ndarray) -> None:
        # pieces of 1 MiB: the second reduction pass then reads from cache, not memory
        for lo in range(0, len(words), _PIECE_WORDS):
            piece = words[lo : lo + _PIECE_WORDS]
            total, jsum = _weighted(piece)
            self._value = (self._value + (2 * self._words + 1) * total + 2 * jsum) & _MASK
            self._words += len(piece)

    def update(self, data) -> None:
        """Add the next bytes (any bytes-like object)."""
        raw = np.frombuffer(data, np.uint8)
        if self._pending:
            need = 8 - len(self._pending)
            head = self._pending + raw[:need].tobytes()
            raw = raw[need:]
            if len(head) < 8:
                self._pending = head
                return
            self._pending = b""
            self._add_words(np.frombuffer(head, "<u8"))
        cut = len(raw) - len(raw) % 8
        if cut:
            self._add_words(raw[:cut].view("<u8"))
        self._pending = raw[cut:].tobytes()

    def digest(self) -> int:
        """The checksum of everything added so far (the last word zero-padded)."""
        if not self._pending:
            return self._value
        last = int.from_bytes(self._pending.ljust(8, b"\0"), "little")
        return (self._value + (2 * self._words + 1) * last) & _MASK


def checksum(*pieces) -> int:
    """``wsum64`` of the concatenation of ``pieces``."""
    state = WSum64()
    for piece in pieces:
        state.update(piece)
    return state.digest()
