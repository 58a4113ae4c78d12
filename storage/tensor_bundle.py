"""TensorFlow 1.x checkpoints (``tensor_bundle`` V2: ``<prefix>.index`` + ``<prefix>.data-*``),
read without TensorFlow.

Format (TF's ``tensorflow/core/util/tensor_bundle/tensor_bundle.cc`` and ``lib/io/table*``):

* ``<prefix>.index`` is a LevelDB-format SSTable. Its last 48 bytes are the footer: the
  BlockHandles (two varint64s each: offset, size) of the metaindex and index blocks, zero
  padding to 40 bytes, and the magic ``0xdb4775248b80fb57`` (fixed64). Every block is followed
  by a 5-byte trailer: a compression byte (0: none — TF writes bundles uncompressed) and the
  masked CRC-32C of the block and that byte. A block holds prefix-compressed entries
  (``shared``, ``non_shared``, ``value_len`` varint32s, the key's new bytes, the value), then
  ``num_restarts`` uint32 restart offsets and ``num_restarts``. The index block maps a key to
  the BlockHandle of a data block; the data blocks map tensor names to serialized
  ``BundleEntryProto`` s, and the empty key to the ``BundleHeaderProto`` (num_shards,
  endianness, version).
* ``<prefix>.data-SSSSS-of-NNNNN``: each tensor's bytes at ``[offset, offset + size)`` of
  shard ``shard_id``: raw C-order values (TF's dtype, the header's endianness), or for strings
  the varint64 lengths of every element, the masked CRC-32C of those lengths (each as a
  uint32), then the element bytes. ``crc32c`` in the entry is the masked CRC-32C of all of it.

The ``.index`` must be a regular file of at most :data:`MAX_TABLE_BYTES` (checked before it
is opened). Every declared offset and size is checked against the real file lengths before
anything is read, and every CRC is verified: a torn, truncated or tampered checkpoint is
:class:`DataLossError` naming the file. Tensors saved as slices (partitioned variables) are
refused with a clear ``ValueError``.

>>> is_tf_checkpoint("memory://tvm-doc-nobundle/model.ckpt")
False
"""

from __future__ import annotations

import re
import struct

import numpy as np

from .checksums import crc32c
from .errors import CheckpointNotFoundError, DataLossError
from .fsio import exists, join, read_bytes, to_fs
from .state_file import read_state_bytes
from .tf_protos import DATA_TYPES, BundleEntryProto, BundleHeaderProto
from .tfrecord import masked_crc32c, unmask_crc32c

__all__ = [
    "TABLE_MAGIC",
    "data_name",
    "index_name",
    "is_tf_checkpoint",
    "list_bundle",
    "read_bundle",
    "read_bundle_index",
    "tf_latest_checkpoint",
]

TABLE_MAGIC = 0xDB4775248B80FB57
#: bytes a ``<prefix>.index`` may have (TF's entries are ~40 bytes plus the name: millions of
#: tensors); a larger one, or one that is not a regular file, is refused before it is read
MAX_TABLE_BYTES = 128 << 20
_FOOTER = 48
_NAMES = {v: k for k, v in DATA_TYPES.items()}
_NP = {"DT_FLOAT": "f4", "DT_DOUBLE": "f8", "DT_INT32": "i4", "DT_UINT8": "u1",
       "DT_INT16": "i2", "DT_INT8": "i1", "DT_COMPLEX64": "c8", "DT_INT64": "i8",
       "DT_BOOL": "?", "DT_UINT16": "u2", "DT_COMPLEX128": "c16", "DT_HALF": "f2",
       "DT_UINT32": "u4", "DT_UINT64": "u8"}


def index_name(prefix: str) -> str:
    return f"{prefix}.index"


def data_name(prefix: str, shard: int, num_shards: int) -> str:
    return f"{prefix}.data-{shard:05d}-of-{num_shards:05d}"


def is_tf_checkpoint(prefix: str, *, storage_options: dict | None = None) -> bool:
    """Whether ``prefix`` names a TF V2 checkpoint (``<prefix>.index`` exists)."""
    fs, path = to_fs(index_name(prefix), storage_options)
    return exists(fs, path)


# ---- the SSTable ------------------------------------------------------------------------------

def _varint(buf: bytes, pos: int, url: str, what: str) -> tuple[int, int]:
    out = shift = 0
    while True:
        if pos >= len(buf) or shift > 63:
            raise DataLossError(f"bad varint in {what}", url)
        b = buf[pos]
        pos += 1
        out |= (b & 0x7F) << shift
        if b < 0x80:
            return out, pos
        shift += 7


def _handle(buf: bytes, pos: int, url: str, what: str) -> tuple[tuple[int, int], int]:
    off, pos = _varint(buf, pos, url, what)
    size, pos = _varint(buf, pos, url, what)
    return (off, size), pos


def _block(data: bytes, handle: tuple[int, int], url: str, what: str) -> bytes:
    off, size = handle
    if off + size + 5 > len(data) - _FOOTER:
        raise DataLossError(f"{what} at [{off}, {off + size + 5}) lies past the end of the "
                            f"table's blocks ({len(data) - _FOOTER} bytes)", url)
    contents, kind = data[off:off + size], data[off + size]
    (stored,) = struct.unpack("<I", data[off + size + 1:off + size + 5])
    if masked_crc32c(contents + bytes([kind])) != stored:
        raise DataLossError(f"{what} at byte {off}: block checksum mismatch", url)
    if kind != 0:
        raise DataLossError(f"{what} at byte {off} is compressed (type {kind}); TF writes "
                            "checkpoint indexes uncompressed and only those are read", url)
    return contents


def _entries(block: bytes, url: str, what: str):
    if len(block) < 4:
        raise DataLossError(f"{what}: block of {len(block)} bytes is too short", url)
    (n,) = struct.unpack("<I", block[-4:])
    limit = len(block) - 4 * (n + 1)
    if n < 1 or limit < 0:
        raise DataLossError(f"{what}: bad restart array ({n} restarts)", url)
    pos, key = 0, b""
    while pos < limit:
        shared, pos = _varint(block, pos, url, what)
        fresh, pos = _varint(block, pos, url, what)
        vlen, pos = _varint(block, pos, url, what)
        if shared > len(key) or pos + fresh + vlen > limit:
            raise DataLossError(f"{what}: corrupt entry at byte {pos}", url)
        key = key[:shared] + block[pos:pos + fresh]
        pos += fresh
        yield key, block[pos:pos + vlen]
        pos += vlen


def _table(data: bytes, url: str) -> list[tuple[bytes, bytes]]:
    if len(data) < _FOOTER:
        raise DataLossError(f"table of {len(data)} bytes is shorter than its 48-byte footer",
                            url)
    footer = data[-_FOOTER:]
    (magic,) = struct.unpack("<Q", footer[-8:])
    if magic != TABLE_MAGIC:
        raise DataLossError(f"not a TF checkpoint index (bad table magic {magic:#x})", url)
    _meta, pos = _handle(footer, 0, url, "footer")
    index, _ = _handle(footer, pos, url, "footer")
    out = []
    for _, value in _entries(_block(data, index, url, "index block"), url, "index block"):
        handle, _ = _handle(value, 0, url, "index entry")
        out.extend(_entries(_block(data, handle, url, "data block"), url, "data block"))
    return out


# ---- the bundle --------------------------------------------------------------------------------

def read_bundle_index(prefix: str, *, storage_options: dict | None = None
                      ) -> tuple[object, dict[str, object]]:
    """``(header, {tensor name: BundleEntryProto})`` of the checkpoint at ``prefix``."""
    url = index_name(prefix)
    fs, path = to_fs(url, storage_options)
    try:
        data = read_bytes(fs, path, MAX_TABLE_BYTES, url)
    except FileNotFoundError:
        raise CheckpointNotFoundError("no TF checkpoint index", url) from None
    header, entries = None, {}
    for key, value in _table(data, url):
        try:
            if key == b"":
                header = BundleHeaderProto.FromString(value)
            else:
                entries[key.decode("utf-8", "surrogateescape")] = \
                    BundleEntryProto.FromString(value)
        except Exception as e:
            raise DataLossError(f"entry {key!r} is not a parseable proto ({e})", url) from e
    if header is None:
        raise DataLossError("no BundleHeaderProto (the empty key) in the index", url)
    if header.num_shards < 1:
        raise DataLossError(f"header declares {header.num_shards} shards", url)
    return header, entries


def _shape(entry, name: str, url: str) -> tuple[int, ...]:
    if entry.shape.unknown_rank or any(d.size < 0 for d in entry.shape.dim):
        raise DataLossError(f"tensor {name!r} has an invalid shape", url)
    return tuple(int(d.size) for d in entry.shape.dim)


def list_bundle(prefix: str, *, storage_options: dict | None = None) -> dict[str, tuple]:
    """``{name: (dtype name, shape)}`` of the checkpoint's tensors (TF's
    ``list_variables``), from the index only."""
    _, entries = read_bundle_index(prefix, storage_options=storage_options)
    url = index_name(prefix)
    return {k: (_NAMES.get(e.dtype, str(e.dtype)), _shape(e, k, url))
            for k, e in sorted(entries.items()) if "\x00" not in k}


def _strings(raw: bytes, n: int, name: str, url: str, stored_crc: int) -> np.ndarray:
    """A string tensor's elements; its CRC covers the lengths as uint32 (uint64 past 4 GiB),
    not their varint bytes, then the masked length checksum and the element bytes."""
    pos, lengths, check = 0, [], []
    for _ in range(n):
        length, pos = _varint(raw, pos, url, f"string lengths of {name!r}")
        lengths.append(length)
        check.append(struct.pack("<I", length) if length <= 0xFFFFFFFF
                     else struct.pack("<Q", length))
    if pos + 4 > len(raw):
        raise DataLossError(f"string tensor {name!r}: lengths run past its {len(raw)} bytes",
                            url)
    (stored,) = struct.unpack("<I", raw[pos:pos + 4])
    if unmask_crc32c(stored) != crc32c(b"".join(check)):
        raise DataLossError(f"string tensor {name!r}: the length checksum does not match",
                            url)
    if crc32c(b"".join(check), raw[pos:]) != unmask_crc32c(stored_crc):
        raise DataLossError(f"tensor {name!r}: checksum mismatch (crc32c)", url)
    pos += 4
    if pos + sum(lengths) != len(raw):
        raise DataLossError(f"string tensor {name!r}: lengths sum to {sum(lengths)} bytes, "
                            f"the entry has {len(raw) - pos}", url)
    out = np.empty(n, dtype=object)
    for i, length in enumerate(lengths):
        out[i] = raw[pos:pos + length]
        pos += length
    return out


def read_bundle(prefix: str, names=None, *, storage_options: dict | None = None
                ) -> dict[str, np.ndarray]:
    """``{name: array}`` for ``names`` (default: every tensor) of the TF checkpoint at
    ``prefix``, each verified against its CRC-32C. Strings come back as ``bytes`` objects."""
    header, entries = read_bundle_index(prefix, storage_options=storage_options)
    url = index_name(prefix)
    wanted = sorted(k for k in entries if "\x00" not in k) if names is None else list(names)
    missing = [n for n in wanted if n not in entries]
    if missing:
        raise KeyError(f"tensor(s) {missing} not found in TF checkpoint {prefix} (it holds "
                       f"{sorted(k for k in entries if chr(0) not in k)})")
    order = ">" if header.endianness == 1 else "<"
    fs, _ = to_fs(url, storage_options)
    sizes: dict[int, int] = {}
    out = {}
    for name in wanted:
        e = entries[name]
        if len(e.slices):
            raise ValueError(f"tensor {name!r} of {prefix} was saved in slices (a partitioned "
                             "variable); reading TF slices is not supported")
        shard = data_name(prefix, e.shard_id, header.num_shards)
        if not 0 <= e.shard_id < header.num_shards:
            raise DataLossError(f"tensor {name!r} names shard {e.shard_id} of "
                                f"{header.num_shards}", url)
        _, spath = to_fs(shard, storage_options)
        if e.shard_id not in sizes:
            try:
                sizes[e.shard_id] = fs.size(spath)
            except FileNotFoundError:
                raise DataLossError(f"data file of tensor {name!r} is missing", shard) from None
        if e.offset < 0 or e.size < 0 or e.offset + e.size > sizes[e.shard_id]:
            raise DataLossError(f"tensor {name!r} declares bytes [{e.offset}, "
                                f"{e.offset + e.size}) but the file has "
                                f"{sizes[e.shard_id]}", shard)
        shape = _shape(e, name, url)
        dname = _NAMES.get(e.dtype, str(e.dtype))
        n = int(np.prod(shape, dtype=np.int64))
        if dname != "DT_STRING":
            if dname not in _NP:
                raise ValueError(f"tensor {name!r} of {prefix} has dtype {dname}, which "
                                 "tensorvm does not read")
            dt = np.dtype(order + _NP[dname])
            if e.size != n * dt.itemsize:
                raise DataLossError(f"tensor {name!r} declares {e.size} bytes, its shape "
                                    f"{list(shape)} of {dname} needs {n * dt.itemsize}", shard)
        with fs.open(spath, "rb") as f:
            f.seek(e.offset)
            raw = f.read(e.size)
        if len(raw) != e.size:
            raise DataLossError(f"tensor {name!r}: read {len(raw)} of {e.size} bytes", shard)
        if dname == "DT_STRING":
            out[name] = _strings(raw, n, name, shard, e.crc32c).reshape(shape)
            continue
        if crc32c(raw) != unmask_crc32c(e.crc32c):
            raise DataLossError(f"tensor {name!r}: checksum mismatch (crc32c)", shard)
        out[name] = np.frombuffer(raw, dt).astype(dt.newbyteorder("="), copy=True
                                                 ).reshape(shape)
    return out


_STATE_LINE = re.compile(r'^\s*(model_checkpoint_path|all_model_checkpoint_paths)\s*:\s*"(.*)"')


def tf_latest_checkpoint(dir_url: str, *, storage_options: dict | None = None) -> str | None:
    """The prefix that TF's text ``checkpoint`` state file of ``dir_url`` names (if its index
    exists), else ``None``."""
    raw = read_state_bytes(dir_url, storage_options=storage_options)
    try:
        text = raw.decode("utf-8") if raw is not None else None
    except UnicodeDecodeError:
        return None
    if text is None:
        return None
    names = [m.group(2) for m in map(_STATE_LINE.match, text.splitlines())
             if m and m.group(1) == "model_checkpoint_path"]
    for name in names:
        base = name.rstrip("/").rsplit("/", 1)[-1]  # TF may store an absolute local path
        prefix = join(dir_url, base)
        if is_tf_checkpoint(prefix, storage_options=storage_options):
            return prefix
    return None
