"""TFRecord files, read and written without TensorFlow.

A TFRecord file is a sequence of records, each framed as TF's ``record_writer.cc`` writes it::

    uint64 length            (little endian)
    uint32 masked_crc32c(length's 8 bytes)
    byte   data[length]
    uint32 masked_crc32c(data)

``masked_crc32c(x) = ((c >> 15) | (c << 17)) + 0xa282ead8 (mod 2**32)`` with ``c`` the
CRC-32C of ``x`` (:func:`masked_crc32c`). Files may be GZIP or ZLIB compressed as a whole
(``compression_type``). Every length is checked against the bytes really there before a record
is read, and every CRC is verified: a torn or corrupt file is :class:`DataLossError` naming the
URL and the byte offset (``truncated record at byte 12``, ``corrupted record at byte 0``).

The ``tfrecord`` input format cuts one split per file (a record boundary is not found from the
middle of a file) and yields ``pa.BinaryArray`` batches of record payloads.

>>> import fsspec
>>> write_tfrecords("memory://tvm-doc-tfr/a.tfrecord", [b"one", b"two"])
>>> [r for _, r in iter_tfrecords("memory://tvm-doc-tfr/a.tfrecord")]
[b'one', b'two']
>>> hex(masked_crc32c(b""))
'0xa282ead8'
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterable, Iterator
from typing import BinaryIO

import pyarrow as pa

from .checksums import crc32c
from .errors import DataLossError
from .fsio import to_fs
from .splits import InputFormat, Split, register_format

__all__ = [
    "COMPRESSION_TYPES",
    "TFRecordFormat",
    "TFRecordWriter",
    "encode_record",
    "iter_tfrecords",
    "masked_crc32c",
    "read_tfrecords",
    "unmask_crc32c",
    "write_tfrecords",
]

_MASK_DELTA = 0xA282EAD8
_M32 = 0xFFFFFFFF
#: TF's ``TFRecordCompressionType`` names -> the fsspec/our codec name
COMPRESSION_TYPES = {"": None, "NONE": None, "GZIP": "gzip", "ZLIB": "zlib"}


def masked_crc32c(data) -> int:
    """TF's masked CRC-32C (``crc32c::Mask(crc32c::Value(data))``)."""
    c = crc32c(data)
    return ((((c >> 15) | (c << 17)) & _M32) + _MASK_DELTA) & _M32


def unmask_crc32c(masked: int) -> int:
    """Inverse of the mask: the plain CRC-32C."""
    rot = (masked - _MASK_DELTA) & _M32
    return ((rot >> 17) | (rot << 15)) & _M32


def encode_record(data: bytes) -> bytes:
    """One record with its TFRecord framing."""
    data = bytes(data)
    head = struct.pack("<Q", len(data))
    return b"".join([head, struct.pack("<I", masked_crc32c(head)), data,
                     struct.pack("<I", masked_crc32c(data))])


def _codec(compression_type: str | None) -> str | None:
    key = (compression_type or "").upper()
    if key not in COMPRESSION_TYPES:
        raise ValueError(f"unknown TFRecord compression_type {compression_type!r}; "
                         f"one of {sorted(k for k in COMPRESSION_TYPES if k)} or ''")
    return COMPRESSION_TYPES[key]


class TFRecordWriter:
    """``tf.python_io.TFRecordWriter``: ``write(bytes)`` records, then ``close`` (or use
    ``with``). The file appears whole at ``close`` (written to memory first, then one write)."""

    def __init__(self, url: str, compression_type: str | None = None, *,
                 storage_options: dict | None = None):
        self.url = url
        self._codec = _codec(compression_type)
        self._fs, self._path = to_fs(url, storage_options)
        self._parts: list[bytes] = []
        self._closed = False

    def write(self, record: bytes) -> None:
        if self._closed:
            raise ValueError(f"TFRecordWriter for {self.url} is closed")
        if isinstance(record, str):
            record = record.encode()
        self._parts.append(encode_record(record))

    def flush(self) -> None:
        """Records are published by :meth:`close` (kept for TF's API)."""

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        data = b"".join(self._parts)
        if self._codec == "gzip":
            import gzip
            data = gzip.compress(data, mtime=0)
        elif self._codec == "zlib":
            data = zlib.compress(data)
        parent = self._path.rsplit("/", 1)[0]
        if parent and parent != self._path:
            self._fs.makedirs(parent, exist_ok=True)
        self._fs.pipe_file(self._path, data)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def write_tfrecords(url: str, records: Iterable[bytes], compression_type: str | None = None,
                    *, storage_options: dict | None = None) -> None:
    """Write ``records`` to one TFRecord file."""
    with TFRecordWriter(url, compression_type, storage_options=storage_options) as w:
        for r in records:
            w.write(r)


def _read_exact(f: BinaryIO, n: int) -> bytes:
    out = f.read(n)
    while len(out) < n:
        more = f.read(n - len(out))
        if not more:
            break
        out += more
    return out


def iter_records(f: BinaryIO, url: str, size: int | None = None) -> Iterator[tuple[int, bytes]]:
    """``(offset, payload)`` of every record of the open (decompressed) stream ``f``.

    ``size``: the stream's length when known (an uncompressed file): a declared length past
    it is refused before anything is read."""
    pos = 0
    while True:
        head = _read_exact(f, 12)
        if not head:
            return
        if len(head) < 12:
            raise DataLossError(f"truncated record at byte {pos} (a header needs 12 bytes, "
                                f"{len(head)} left)", url)
        (length,), (lcrc,) = struct.unpack("<Q", head[:8]), struct.unpack("<I", head[8:])
        if masked_crc32c(head[:8]) != lcrc:
            raise DataLossError(f"corrupted record at byte {pos} (length crc32c mismatch)",
                                url)
        if size is not None and pos + 12 + length + 4 > size:
            raise DataLossError(f"truncated record at byte {pos} (declares {length} bytes, "
                                f"the file has {size - pos - 12} after the header)", url)
        body = _read_exact(f, length + 4)
        if len(body) < length + 4:
            raise DataLossError(f"truncated record at byte {pos} (declares {length} bytes, "
                                f"{max(0, len(body) - 4)} left)", url)
        data = body[:length]
        if masked_crc32c(data) != struct.unpack("<I", body[length:])[0]:
            raise DataLossError(f"corrupted record at byte {pos} (data crc32c mismatch)", url)
        yield pos, data
        pos += 16 + length


def iter_tfrecords(url: str, compression_type: str | None = None, *,
                   storage_options: dict | None = None) -> Iterator[tuple[int, bytes]]:
    """``(offset, payload)`` of every record of the TFRecord file at ``url``, verified."""
    codec = _codec(compression_type)
    fs, path = to_fs(url, storage_options)
    size = None if codec else fs.size(path)
    with fs.open(path, "rb", compression=None if codec == "zlib" else codec) as f:
        if codec == "zlib":  # fsspec has no zlib codec: inflate the (small) file whole
            import io
            f = io.BytesIO(_inflate(f.read(), url))
        try:
            yield from iter_records(f, url, size)
        except (EOFError, zlib.error, OSError) as e:
            if isinstance(e, DataLossError) or (isinstance(e, OSError) and e.errno):
                raise
            raise DataLossError(f"corrupt or truncated {codec} TFRecord stream "
                                f"({type(e).__name__}: {e})", url) from e


def read_tfrecords(url: str, compression_type: str | None = None, **kw) -> list[bytes]:
    """Every record payload of one file (:func:`iter_tfrecords`)."""
    return [r for _, r in iter_tfrecords(url, compression_type, **kw)]


class TFRecordFormat(InputFormat):
    """TFRecord files, one split per file; option ``compression_type`` (``""``, ``"GZIP"``,
    ``"ZLIB"``). Batches are ``pa.BinaryArray`` s of record payloads."""

    name, extensions = "tfrecord", (".tfrecord", ".tfrecords", ".tfr")

    def make_splits(self, url, fs, path, size, split_size, compression, options):
        _codec(options.compression_type)
        return [Split(url, self.name, 0, None, compression=compression, options=options)]

    def read(self, split, f, batch_size, url):
        # a ``.gz`` name is already decompressed by fsspec (split.compression)
        codec = None if split.compression else _codec(split.options.compression_type)
        if codec == "zlib":
            import io
            f = io.BytesIO(_inflate(f.read(), url))
        elif codec == "gzip":
            import gzip
            f = gzip.GzipFile(fileobj=f)
        size = None if (codec or split.compression) else _size_of(f)
        batch: list[bytes] = []
        try:
            for _, rec in iter_records(f, url, size):
                batch.append(rec)
                if batch_size and len(batch) >= batch_size:
                    yield pa.array(batch, pa.binary())
                    batch = []
        except (EOFError, zlib.error, OSError) as e:
            if isinstance(e, DataLossError) or (isinstance(e, OSError) and e.errno):
                raise
            raise DataLossError(f"corrupt or truncated {codec} TFRecord stream "
                                f"({type(e).__name__}: {e})", url) from e
        if batch:
            yield pa.array(batch, pa.binary())


def _inflate(data: bytes, url: str) -> bytes:
    try:
        return zlib.decompress(data)
    except zlib.error as e:
        raise DataLossError(f"corrupt ZLIB TFRecord stream ({e})", url) from e


def _size_of(f) -> int | None:
    try:
        here = f.tell()
        end = f.seek(0, 2)
        f.seek(here)
        return end
    except (OSError, AttributeError, ValueError):
        return None


register_format(TFRecordFormat(), clobber=True)
