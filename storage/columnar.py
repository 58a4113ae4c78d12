"""Columnar and array input formats: ``parquet`` (by row groups), ``arrow`` (Arrow IPC file
format, by record batches) and ``npy`` (by row ranges, read with a seek — never the whole file,
never with pickle).

>>> import fsspec, numpy as np, io
>>> buf = io.BytesIO(); np.save(buf, np.arange(12).reshape(6, 2))
>>> fsspec.filesystem("memory").pipe("/tvm-doc-col/a.npy", buf.getvalue())
>>> from tensorvm.storage import splits, read
>>> s = splits("memory://tvm-doc-col/a.npy", format="npy", split_size=40)
>>> [(x.row_start, x.row_end) for x in s]
[(0, 2), (2, 4), (4, 6)]
>>> next(read(s[1])).tolist()
[[4, 5], [6, 7]]
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from .errors import DataLossError
from .readers import _fill, _slices
from .splits import InputFormat, Split, register_format

__all__ = ["ParquetFormat", "ArrowFormat", "NpyFormat", "npy_layout"]

_NPY_BATCH_BYTES = 8 * 1024 * 1024


def _groups(sizes: list[int], split_size: int) -> list[tuple[int, ...]]:
    """Consecutive indices whose sizes add up to about ``split_size`` (at least one each)."""
    out, current, acc = [], [], 0
    for i, size in enumerate(sizes):
        if current and acc + size > split_size:
            out.append(tuple(current))
            current, acc = [], 0
        current.append(i)
        acc += size
    if current:
        out.append(tuple(current))
    return out


def _listed(names):
    return list(names) if names is not None else None


class ParquetFormat(InputFormat):
    """Parquet, split by row groups (grouped to about ``split_size`` compressed bytes);
    batches are ``pa.RecordBatch``. Option ``columns``: read only these."""

    name, extensions = "parquet", (".parquet", ".parq", ".pq")

    def make_splits(self, url, fs, path, size, split_size, compression, options):
        with fs.open(path, "rb") as f:
            try:
                meta = pq.ParquetFile(f).metadata
            except (pa.ArrowInvalid, OSError) as e:
                raise DataLossError(f"not a readable Parquet file ({e})", url) from e
        sizes = [sum(meta.row_group(i).column(c).total_compressed_size
                     for c in range(meta.num_columns)) for i in range(meta.num_row_groups)]
        return [Split(url, self.name, row_groups=g, options=options)
                for g in _groups(sizes, split_size)]

    def read(self, split, f, batch_size, url):
        try:
            pf = pq.ParquetFile(f)
            yield from pf.iter_batches(batch_size=batch_size or 65536,
                                       row_groups=list(split.row_groups or ()),
                                       columns=_listed(split.options.columns),
                                       use_threads=False)
        except (pa.ArrowInvalid, OSError) as e:
            raise DataLossError(f"corrupt Parquet data in split {split.id} ({e})", url) from e


class ArrowFormat(InputFormat):
    """Arrow IPC *file* format (Feather v2), split by record batches."""

    name, extensions = "arrow", (".arrow", ".feather", ".ipc")

    def make_splits(self, url, fs, path, size, split_size, compression, options):
        with fs.open(path, "rb") as f:
            try:
                n = pa.ipc.open_file(f).num_record_batches
            except (pa.ArrowInvalid, OSError) as e:
                raise DataLossError(f"not an Arrow IPC file ({e})", url) from e
        per_split = max(1, int(split_size * n // max(size, 1)))
        return [Split(url, self.name, row_groups=tuple(range(lo, min(lo + per_split, n))),
                      options=options) for lo in range(0, n, per_split)]

    def read(self, split, f, batch_size, url):
        try:
            reader = pa.ipc.open_file(f)
            for i in split.row_groups or ():
                yield from _slices(reader.get_batch(i), batch_size)
        except (pa.ArrowInvalid, OSError) as e:
            raise DataLossError(f"corrupt Arrow IPC data in split {split.id} ({e})", url) from e


def npy_layout(f, url: str) -> tuple[np.dtype, tuple[int, ...], bool, int]:
    """``(dtype, shape, fortran_order, data_offset)`` from a ``.npy`` header at ``f``'s start.

    Object dtypes are refused (reading them would need pickle).
    """
    fmt = np.lib.format
    try:
        version = fmt.read_magic(f)
        read_header = fmt.read_array_header_1_0 if version == (1, 0) else \
            fmt.read_array_header_2_0
        shape, fortran, dtype = read_header(f)
    except (ValueError, SyntaxError, EOFError) as e:
        raise DataLossError(f"bad .npy header ({e})", url) from e
    if dtype.hasobject:
        raise ValueError(f"refusing .npy with object dtype (would need pickle): {url}")
    return dtype, tuple(shape), fortran, f.tell()


class NpyFormat(InputFormat):
    """``.npy`` arrays, split by rows (the first axis); batches are ``np.ndarray`` rows.

    A Fortran-ordered, 0-d or compressed file is one split.
    """

    name, extensions = "npy", (".npy",)

    def make_splits(self, url, fs, path, size, split_size, compression, options):
        with fs.open(path, "rb", compression=compression) as f:
            dtype, shape, fortran, _ = npy_layout(f, url)
        if not shape or fortran or compression:
            rows = shape[0] if shape else None
            return [Split(url, self.name, row_start=0, row_end=rows, compression=compression,
                          options=options)]
        row_bytes = int(np.prod(shape[1:], dtype=np.int64)) * dtype.itemsize
        per = max(1, split_size // row_bytes) if row_bytes else max(shape[0], 1)
        return [Split(url, self.name, row_start=lo, row_end=min(lo + per, shape[0]),
                      options=options) for lo in range(0, shape[0], per)]

    def read(self, split, f, batch_size, url):
        dtype, shape, fortran, offset = npy_layout(f, url)
        if not shape or fortran:
            f.seek(0)
            yield np.lib.format.read_array(f, allow_pickle=False)
            return
        row_shape = shape[1:]
        row_bytes = int(np.prod(row_shape, dtype=np.int64)) * dtype.itemsize
        lo, hi = split.row_start or 0, split.row_end if split.row_end is not None else shape[0]
        if hi > shape[0]:
            raise DataLossError(f"split rows [{lo}, {hi}) beyond the {shape[0]} rows", url)
        per = batch_size or max(1, _NPY_BATCH_BYTES // max(row_bytes, 1))
        if lo and not split.compression:
            f.seek(offset + lo * row_bytes)
        elif lo:
            f.read(lo * row_bytes)
        for start in range(lo, hi, per):
            rows = min(per, hi - start)
            buf = np.empty(rows * row_bytes, np.uint8)
            if _fill(f, buf) < buf.size:
                raise DataLossError(f"truncated .npy: rows [{start}, {start + rows}) missing",
                                    url)
            yield buf.view(dtype).reshape((rows, *row_shape))


for _fmt in (ParquetFormat(), ArrowFormat(), NpyFormat()):
    register_format(_fmt, clobber=True)
