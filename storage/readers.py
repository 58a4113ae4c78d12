"""Line-based and fixed-record input formats: ``text``, ``jsonl``, ``csv``, ``fixed``.

All four cut files by byte range. The three line formats own the lines that start in their
range (:mod:`tensorvm.storage.lines`); ``fixed`` splits at record boundaries. Batches:

* ``text`` — ``pa.StringArray`` of lines without terminators (``encoding=None``: binary);
* ``jsonl`` / ``csv`` — ``pa.RecordBatch`` (parsed by ``pyarrow.json`` / ``pyarrow.csv``);
* ``fixed`` — ``np.ndarray`` of shape ``(n, record_bytes)``, ``uint8`` (TeraSort's records).

>>> import fsspec
>>> fsspec.filesystem("memory").pipe("/tvm-doc-rd/r.bin", bytes(range(10)) * 3)
>>> from tensorvm.storage import splits, read
>>> s = splits("memory://tvm-doc-rd/r.bin", format="fixed", split_size=12, record_bytes=10)
>>> [(x.start, x.end) for x in s], next(read(s[0])).shape
([(0, 10), (10, 20), (20, 30)], (1, 10))

Quoted CSV fields spanning lines are not supported (as with Hadoop's text input).
"""

from __future__ import annotations

import io
from typing import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.json as pa_json

from .errors import DataLossError
from .fsio import to_fs
from .lines import DEFAULT_BLOCK_SIZE, lines_array, owned_blocks
from .splits import InputFormat, Split, register_format

__all__ = ["TextFormat", "JsonLinesFormat", "CsvFormat", "FixedRecordFormat", "read_fixed_into"]


def _slices(batch, batch_size: int | None) -> Iterator:
    if batch_size is None or len(batch) <= batch_size:
        if len(batch):
            yield batch
        return
    for lo in range(0, len(batch), batch_size):
        yield batch[lo : lo + batch_size]


def _blocks(split: Split, f):
    """The owned lines of ``split``, in blocks (option ``block_size``, default 8 MiB)."""
    return owned_blocks(f, split.start, split.end, split.options.block_size or DEFAULT_BLOCK_SIZE)


class TextFormat(InputFormat):
    """Lines of text; options: ``encoding`` (``"utf-8"``, or ``None`` for bytes),
    ``block_size`` (bytes read at a time)."""

    name, extensions = "text", (".txt", ".text", ".log")

    def read(self, split, f, batch_size, url):
        encoding = split.options.encoding
        for block in _blocks(split, f):
            yield from _slices(lines_array(block, encoding, url), batch_size)


class JsonLinesFormat(InputFormat):
    """One JSON object per line, parsed by ``pyarrow.json`` into record batches."""

    name, extensions = "jsonl", (".jsonl", ".ndjson", ".json")

    def read(self, split, f, batch_size, url):
        for block in _blocks(split, f):
            try:
                table = pa_json.read_json(
                    pa.BufferReader(pa.py_buffer(block)),
                    read_options=pa_json.ReadOptions(use_threads=False,
                                                     block_size=max(len(block), 1 << 16)))
            except pa.ArrowInvalid as e:
                raise DataLossError(f"invalid JSON lines in split {split.id} ({e})", url) from e
            for batch in table.to_batches(max_chunksize=batch_size):
                if batch.num_rows:
                    yield batch


class CsvFormat(InputFormat):
    """CSV by byte range; options: ``header`` (default ``True``: the file's first line names
    the columns, read once by :func:`splits`), ``column_names``, ``delimiter``,
    ``column_types`` (``{"col": "int64"}``; without it each block infers its own types)."""

    name, extensions = "csv", (".csv", ".tsv")

    def make_splits(self, url, fs, path, size, split_size, compression, options):
        if options.header is None:
            options = options.replace(header=True)
        if options.header and options.column_names is None:
            with fs.open(path, "rb", compression=compression) as f:
                first = next(owned_blocks(f, 0, 1, 1 << 16), b"")
            names = pa_csv.read_csv(
                io.BytesIO(bytes(first)),
                parse_options=pa_csv.ParseOptions(delimiter=options.delimiter),
            ).column_names
            options = options.replace(column_names=names)
        return super().make_splits(url, fs, path, size, split_size, compression, options)

    def read(self, split, f, batch_size, url):
        opts = split.options
        skip = 1 if (opts.header and split.start == 0) else 0
        types = {k: pa.type_for_alias(v) for k, v in opts.column_types or ()}
        parse = pa_csv.ParseOptions(delimiter=opts.delimiter)
        names = list(opts.column_names) if opts.column_names is not None else None
        for block in _blocks(split, f):
            read_opts = pa_csv.ReadOptions(column_names=names,
                                           skip_rows=skip, use_threads=False,
                                           block_size=max(len(block), 1 << 16))
            skip = 0
            try:
                table = pa_csv.read_csv(pa.BufferReader(pa.py_buffer(block)),
                                        read_options=read_opts, parse_options=parse,
                                        convert_options=pa_csv.ConvertOptions(column_types=types))
            except pa.ArrowInvalid as e:
                if "Empty CSV file" in str(e):
                    continue
                raise DataLossError(f"invalid CSV in split {split.id} ({e})", url) from e
            if not types:  # keep later blocks' types equal to the first block's
                types = dict(zip(table.column_names, table.schema.types))
            for batch in table.to_batches(max_chunksize=batch_size):
                if batch.num_rows:
                    yield batch


class FixedRecordFormat(InputFormat):
    """Fixed-length binary records (``record_bytes`` option, required), e.g. TeraSort's 100.

    Splits start and end on record boundaries; a file whose size is not a whole number of
    records is :class:`DataLossError`.
    """

    name, extensions = "fixed", (".bin", ".rec")

    def record_bytes(self, options):
        rb = options.record_bytes  # a positive int, or None (ReadOptions checked it)
        if rb is None:
            raise ValueError("format 'fixed' needs a positive int record_bytes, got None")
        return rb

    def make_splits(self, url, fs, path, size, split_size, compression, options):
        rb = self.record_bytes(options)
        if compression is None and size % rb:
            raise DataLossError(f"file size {size} is not a multiple of record_bytes {rb}", url)
        return super().make_splits(url, fs, path, size, split_size, compression, options)

    def read(self, split, f, batch_size, url):
        rb = self.record_bytes(split.options)
        per_batch = batch_size or max(1, DEFAULT_BLOCK_SIZE // rb)
        pos = split.start
        f.seek(pos) if pos else None
        while split.end is None or pos < split.end:
            want = per_batch * rb if split.end is None else min(per_batch * rb, split.end - pos)
            buf = np.empty(want, np.uint8)
            n = _fill(f, buf)
            if n % rb or (split.end is not None and n < want):
                raise DataLossError(f"truncated fixed-length record at byte {pos + n - n % rb} "
                                    f"(record_bytes={rb})", url)
            if n:
                yield buf[:n].reshape(-1, rb)
            if n < want:
                break
            pos += n


def read_fixed_into(splits: list, storage_options: dict | None = None) -> np.ndarray:
    """The records of uncompressed ``fixed`` splits (byte ranges known), in order, read
    straight into one ``uint8 [n, record_bytes]`` array: one allocation and no copy, where
    :func:`~tensorvm.storage.read` gives a few-MiB batch at a time to be concatenated.

    >>> import fsspec
    >>> fsspec.filesystem("memory").pipe("/tvm-doc-rd/into.bin", bytes(range(6)) * 2)
    >>> from tensorvm.storage import splits
    >>> s = splits("memory://tvm-doc-rd/into.bin", format="fixed", split_size=6, record_bytes=3)
    >>> read_fixed_into(s[::-1]).tolist()
    [[0, 1, 2], [3, 4, 5], [0, 1, 2], [3, 4, 5]]
    """
    rbs = {FixedRecordFormat().record_bytes(s.options) for s in splits}
    if len(rbs) != 1 or any(s.format != "fixed" or s.compression is not None or s.end is None
                            for s in splits):
        raise ValueError("read_fixed_into reads uncompressed fixed splits of one record size")
    rb = rbs.pop()
    sizes = [s.end - s.start for s in splits]
    out = np.empty((sum(sizes) // rb, rb), np.uint8)
    flat, pos = out.reshape(-1), 0
    for s, size in zip(splits, sizes):
        if size % rb:
            raise DataLossError(f"split {s.start}-{s.end} is not whole records "
                                f"(record_bytes={rb})", s.url)
        fs, path = to_fs(s.url, storage_options)
        with fs.open(path, "rb") as f:
            f.seek(s.start) if s.start else None
            n = _fill(f, flat[pos:pos + size])
        if n < size:
            raise DataLossError(f"truncated fixed-length record at byte {s.start + n - n % rb} "
                                f"(record_bytes={rb})", s.url)
        pos += size
    return out


def _fill(f, buf: np.ndarray) -> int:
    """Read into ``buf`` until full or EOF; return the byte count."""
    view, got = memoryview(buf), 0
    while got < len(buf):
        if hasattr(f, "readinto"):
            n = f.readinto(view[got:])
        else:
            data = f.read(len(buf) - got)
            n = len(data)
            view[got : got + n] = data
        if not n:
            break
        got += n
    return got


for _fmt in (TextFormat(), JsonLinesFormat(), CsvFormat(), FixedRecordFormat()):
    register_format(_fmt, clobber=True)
