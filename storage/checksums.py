"""Record checksums: CRC-32C (Castagnoli), as TF's tensor_bundle, computed by ``google-crc32c``.

Version-2 checkpoints store ``crc32c`` (the plain, unmasked CRC-32C of the record's bytes, as
RFC 3720 and ``google_crc32c.value`` define it) for every record; any reader can verify one with
``google_crc32c.value(record_bytes)``. Version-1 checkpoints stored ``wsum64``, a weighted word
sum that misses real corruption (an even number of sign flips in float64 data: two flips of bit
63 add ``2**64 = 0 mod 2**64``); it is kept here only so that those checkpoints stay readable.

:class:`Crc32c` is streaming (``update`` with consecutive pieces, then ``digest``), so a record
is checked chunk by chunk while it is read or written. ``google_crc32c.extend`` accepts only
``bytes`` (a copy of a NumPy buffer) and releases the GIL only for those; where the package's own
bundled C library (``libcrc32c``, the same code the extension calls) can be loaded with
:mod:`ctypes`, any buffer is checksummed in place with the GIL released, which is what lets a
helper thread checksum while the main thread writes. Both paths give identical values (the
tests check both against the published vectors).

>>> hex(crc32c(b"123456789"))
'0xe3069283'
>>> s = Crc32c(); s.update(b"1234"); s.update(memoryview(b"56789")); hex(s.digest())
'0xe3069283'
"""

from __future__ import annotations

import ctypes
import ctypes.util
import glob
import itertools
import os

import google_crc32c
import numpy as np

__all__ = ["ALGORITHM", "LEGACY_ALGORITHM", "Crc32c", "crc32c", "WSum64", "new_checksum"]

ALGORITHM = "crc32c"
LEGACY_ALGORITHM = "wsum64"


def _load_clib():
    """``crc32c_extend`` of the C library google-crc32c is built on, or ``None``."""
    here = os.path.dirname(google_crc32c.__file__)
    bundled = sorted(glob.glob(os.path.join(here, "..", "google_crc32c.libs", "libcrc32c*")))
    # find_library runs ldconfig (~10 ms of every import): asked only when no bundled one loads
    for path in itertools.chain(bundled, _system_crc32c()):
        try:
            fn = ctypes.CDLL(path).crc32c_extend
        except (OSError, AttributeError):
            continue
        fn.restype = ctypes.c_uint32
        fn.argtypes = [ctypes.c_uint32, ctypes.c_void_p, ctypes.c_size_t]
        if fn(0, b"123456789", 9) == 0xE3069283:  # refuse anything but CRC-32C itself
            return fn
    return None


def _system_crc32c():
    found = ctypes.util.find_library("crc32c")
    if found:
        yield found


_CLIB = _load_clib()


def _extend(crc: int, data) -> int:
    if isinstance(data, bytes):
        return google_crc32c.extend(crc, data)
    arr = np.frombuffer(data, np.uint8)
    if not arr.size:
        return crc
    if _CLIB is not None:  # in place, GIL released by ctypes
        return _CLIB(crc, arr.ctypes.data, arr.size)
    return google_crc32c.extend(crc, arr.tobytes())


class Crc32c:
    """Streaming CRC-32C: ``update`` with consecutive pieces (any bytes-like), then ``digest``."""

    __slots__ = ("_crc",)

    def __init__(self) -> None:
        self._crc = 0

    def update(self, data) -> None:
        """Add the next bytes."""
        self._crc = _extend(self._crc, data)

    def digest(self) -> int:
        """The CRC-32C of everything added so far, as an unsigned 32-bit int."""
        return self._crc


def crc32c(*pieces) -> int:
    """CRC-32C of the concatenation of ``pieces`` (bytes-like objects)."""
    state = Crc32c()
    for piece in pieces:
        state.update(piece)
    return state.digest()


# -- version 1 (read only) ----------------------------------------------------------------------
_K = 0x9E3779B97F4A7C15
_MASK = (1 << 64) - 1
_COLS = 1024
_ROW = _COLS * 8
_ODD = 2 * np.arange(_COLS, dtype=np.uint64) + 1


class WSum64:
    """The version-1 checksum (read only): little-endian ``uint64`` words ``W[q, r]`` of the
    record zero-padded to rows of 1024, summed as ``K**q * (2r + 1) * W[q, r] mod 2**64``."""

    __slots__ = ("_value", "_kq", "_pending")

    def __init__(self) -> None:
        self._value, self._kq, self._pending = 0, 1, b""

    def _rows(self, raw: np.ndarray) -> None:
        sums = np.einsum("qr,r->q", raw.view("<u8").reshape(-1, _COLS), _ODD)
        steps = np.full(len(sums), _K, dtype=np.uint64)
        steps[0] = self._kq
        weights = np.multiply.accumulate(steps)
        self._value = (self._value + int((sums * weights).sum(dtype=np.uint64))) & _MASK
        self._kq = (self._kq * pow(_K, len(sums), 1 << 64)) & _MASK

    def update(self, data) -> None:
        """Add the next bytes."""
        raw = np.frombuffer(data, np.uint8)
        if self._pending:
            head = self._pending + raw[: _ROW - len(self._pending)].tobytes()
            raw = raw[_ROW - len(self._pending):]
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


def new_checksum(algorithm: str):
    """A fresh streaming checksum for an index's ``checksum_algorithm``."""
    if algorithm == ALGORITHM:
        return Crc32c()
    if algorithm == LEGACY_ALGORITHM:
        return WSum64()
    raise ValueError(f"unknown checksum algorithm {algorithm!r}")
