"""``Dataset.cache(filename)``: the elements kept in files (any fsspec URL), read back by every
later pass, iterator, session or program, as TF 1.x's file cache.

Design
------
The first pass that reads its input to the end writes its blocks (gathered into files of up
to :data:`ROWS_PER_FILE` rows of one shape), component by component, next to ``filename``: a numeric component as a ``.npy`` file (``allow_pickle=False``), a
string component as an Arrow IPC stream of one ``large_string`` or ``large_binary`` column
plus its shape, a SparseTensor component as an Arrow IPC stream of three list columns (each
element's flattened indices, values and dense shape). ``{filename}.index`` (JSON: the components' dtypes and every block's files and
shapes) is written *last* and is the commit: a pass that stopped early (a ``take`` after the
cache, a failed step) leaves no index, so nothing partial is ever read back (TF discards a
partial cache the same way). While a pass writes, ``{filename}.lockfile`` exists; a second
writer at the same time fails with ``AlreadyExistsError`` (TF's message). Once the index
exists the input is not read at all, even if it changed (TF's rule). Nothing is unpickled.
"""
from __future__ import annotations

import io
import itertools
import json
from dataclasses import dataclass

import numpy as np

from ...framework.errors import AlreadyExistsError, DataLossError
from . import dataset_pipeline as P

__all__: list[str] = []  # reached through Dataset.cache(filename)

ROWS_PER_FILE = 4096  # small blocks (a generator's, one element each) are written together


def cached(child, filename):
    """The graph side of ``child.cache(filename)`` (``filename`` a string or string tensor)."""
    from ...framework import dtypes as _dt
    from .dataset_ops import Dataset, _scalar

    class _FileCached(Dataset):
        def __init__(self):
            self._child = child
            self._file = _scalar(filename, _dt.string, "filename")
            super().__init__(child._structure, child._dtypes, child._shapes)
            self._nested = child._nested

        def _compile(self, b):
            return FileCache(self._child._compile(b), b.ref(self._file))
    return _FileCached()


def _fs(url: str):
    from fsspec.core import url_to_fs
    return url_to_fs(url)


def _sparse_batch(c: np.ndarray):
    """A sparse column (SparseTensorValues) as an Arrow record batch of three list columns:
    each element's flattened indices, its values and its dense shape."""
    import pyarrow as pa

    def lists(parts, typ=None):
        offsets = np.concatenate([[0], np.cumsum([len(p) for p in parts])]).astype(np.int32)
        flat = np.concatenate(parts) if parts else np.zeros(0)
        if flat.dtype.kind == "O":
            typ = pa.large_binary() if any(isinstance(v, bytes) for v in flat) \
                else pa.large_string()
            flat = pa.array(flat.tolist(), type=typ)
        else:
            flat = pa.array(flat if typ is None else flat.astype(np.int64))
        return pa.ListArray.from_arrays(pa.array(offsets), flat)
    vals = list(c.reshape(-1))
    return pa.record_batch(
        [lists([np.asarray(v.indices, np.int64).reshape(-1) for v in vals], "int64"),
         lists([np.asarray(v.values) for v in vals]),
         lists([np.asarray(v.dense_shape, np.int64) for v in vals], "int64")],
        names=["indices", "values", "dense_shape"])


def _sparse_column(table) -> np.ndarray:
    """The inverse of :func:`_sparse_batch`."""
    from ...framework.sparse_tensor import SparseTensorValue

    def parts(name):
        col = table.column(name).combine_chunks()
        offsets = np.asarray(col.offsets)
        flat = col.values.to_numpy(zero_copy_only=False)
        return [flat[lo:hi] for lo, hi in itertools.pairwise(offsets.tolist())]
    out = np.empty(table.num_rows, dtype=object)
    for i, (ind, vals, shape) in enumerate(zip(parts("indices"), parts("values"),
                                               parts("dense_shape"))):
        shape = shape.astype(np.int64)
        vals = vals.astype(object) if vals.dtype.kind in "OUS" else vals
        out[i] = SparseTensorValue(ind.astype(np.int64).reshape(-1, len(shape)), vals, shape)
    return out


def _write_component(fs, path: str, c: np.ndarray) -> dict:
    buf = io.BytesIO()
    if c.dtype.kind == "O" and c.size and type(c.flat[0]).__name__ == "SparseTensorValue":
        import pyarrow as pa
        batch = _sparse_batch(c)
        with pa.ipc.new_stream(buf, batch.schema) as w:
            w.write_batch(batch)
        kind = "sparse"
    elif c.dtype.kind != "O":
        np.save(buf, np.ascontiguousarray(c), allow_pickle=False)
        kind = "npy"
    else:
        import pyarrow as pa
        flat = c.reshape(-1).tolist()
        binary = any(isinstance(v, bytes) for v in flat)
        arr = pa.array(flat, type=pa.large_binary() if binary else pa.large_string())
        batch = pa.record_batch([arr], names=["v"])
        with pa.ipc.new_stream(buf, batch.schema) as w:
            w.write_batch(batch)
        kind = "binary" if binary else "string"
    with fs.open(path, "wb") as f:
        f.write(buf.getvalue())
    return {"file": path.rsplit("/", 1)[-1], "kind": kind, "shape": list(c.shape)}


def _read_component(fs, folder: str, meta: dict, url: str) -> np.ndarray:
    path = f"{folder}/{meta['file']}" if folder else meta["file"]
    with fs.open(path, "rb") as f:
        data = f.read()
    try:
        if meta["kind"] == "npy":
            a = np.load(io.BytesIO(data), allow_pickle=False)
        elif meta["kind"] == "sparse":
            import pyarrow as pa
            a = _sparse_column(pa.ipc.open_stream(data).read_all()).reshape(meta["shape"])
        else:
            import pyarrow as pa
            col = pa.ipc.open_stream(data).read_all().column("v").to_pylist()
            a = np.empty(len(col), dtype=object)
            a[:] = col
            a = a.reshape(meta["shape"])
    except (ValueError, OSError) as e:
        raise DataLossError(f"cache file {path} of {url} is corrupt: {e}") from e
    if list(a.shape) != list(meta["shape"]):
        raise DataLossError(f"cache file {path} of {url} holds shape {list(a.shape)}, its "
                            f"index says {meta['shape']}")
    return a


@dataclass
class FileCache(P.Stage):
    """The elements of ``child``, written to ``filename`` by the first complete pass and read
    from it afterwards (see the module docstring)."""
    child: P.Stage
    filename: P.Ref

    def blocks(self, env):
        url = str(np.asarray(self.filename.get(env), dtype=object)[()])
        url = url.decode() if isinstance(url, bytes) else url
        fs, path = _fs(url)
        folder = path.rsplit("/", 1)[0] if "/" in path else ""
        index = path + ".index"
        if fs.exists(index):
            with fs.open(index, "rb") as f:
                meta = json.loads(f.read().decode())
            for block in meta["blocks"]:
                yield tuple(_read_component(fs, folder, m, url) for m in block)
            return
        lock = path + ".lockfile"
        if fs.exists(lock):
            raise AlreadyExistsError(
                f"There appears to be a concurrent caching iterator running - cache lockfile "
                f"already exists ('{url}.lockfile'). If you are sure no other running TF "
                f"computations are using this cache prefix, delete the lockfile and "
                f"re-initialize the iterator.")
        with fs.open(lock, "wb") as f:
            f.write(b"tensorvm cache writer\n")
        try:
            written, pending = [], []

            def flush():
                if pending:
                    rows, i = P._concat(pending), len(written)
                    written.append([_write_component(fs, f"{path}_{i:05d}-{j:02d}.data", c)
                                    for j, c in enumerate(rows)])
                    pending.clear()
            for block in self.child.blocks(env):
                if pending and any(a.shape[1:] != b.shape[1:] for a, b in zip(pending[0],
                                                                              block)):
                    flush()  # a file holds rows of one shape
                pending.append(block)
                if sum(len(b[0]) for b in pending) >= ROWS_PER_FILE:
                    flush()
                yield block
            flush()
            with fs.open(index, "wb") as f:  # the commit
                f.write(json.dumps({"format": "tensorvm-cache-1", "blocks": written}).encode())
        finally:
            fs.rm(lock)
