"""Map-reduce ops: read split groups, group-by-key reduce, partition, merge, write.

They are the vocabulary :mod:`tensorvm.mapreduce` builds job graphs from. The kernels are the
vectorised verbs of :mod:`tensorvm.ops.mapreduce.mr_values` (values, hashing, grouping, partitioning) and
:mod:`tensorvm.ops.mapreduce.mr_read` (reading a group of splits); this module registers the ops and
holds the shuffle through storage (spill/unspill), the merge and the writers.

Values inside a map-reduce graph. String columns travel as Arrow arrays (the map's lines, the
words of a split, the keys of a bucket) so that no step turns millions of strings into Python
objects; the string ops of :mod:`tensorvm.ops.strings.string_ops` accept Arrow input and keep it Arrow,
and ``Session.run`` hands Arrow results back as NumPy object arrays. An op that takes Arrow
says so where it is registered (:attr:`~tensorvm.framework.op_registry.OpDef.arrow`).
"""
from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ...framework import dtypes as _dt
from ... import storage
from ...framework.op_registry import get_op_def, register_op
from .mr_read import read_split_group
from .mr_values import (
    REDUCTIONS,
    as_arrow,
    broadcast,
    concat,
    group_ids,
    group_reduce,
    is_arrow,
    is_stringy,
    key_hash,
    length,
    nbytes,
    partition,
    sort_order,
    take,
    to_numpy,
)

__all__: list[str] = []  # used through tensorvm.mapreduce, not exported as tv.*

# re-exported: tensorvm.mapreduce and the jobs use them as ``mapreduce_ops.<name>``
_REEXPORTS = (REDUCTIONS, as_arrow, broadcast, concat, group_ids, group_reduce, is_arrow,
              is_stringy, key_hash, length, nbytes, partition, read_split_group, sort_order,
              take, to_numpy)



_BATCHES = "map-reduce record batches live in host memory (pyarrow)"  # why no GPU kernel

register_op("MRToNumpy", lambda inputs, attrs: [(inputs[0].dtype, inputs[0]._shape)],
            to_numpy, differentiable=False, cpu_only=_BATCHES, arrow=True)


def arrow_safe(ops: list, sources: list) -> bool:
    """Whether the Arrow values of ``sources`` (string tensors) only reach ops that take
    Arrow (:attr:`~tensorvm.framework.op_registry.OpDef.arrow`) through ``ops`` (new ops, in
    creation order)."""
    arrow = {t.name for t in sources if t.dtype.is_string}
    for op in ops:
        if not any(t.name in arrow for t in op.inputs):
            continue
        if not get_op_def(op.type).arrow:
            return False
        arrow.update(t.name for t in op.outputs if t.dtype.is_string)
    return True


def filter_values(x, mask):
    """``x[mask]`` for Arrow or NumPy values."""
    m = np.asarray(to_numpy(mask), dtype=bool)
    if is_arrow(x):
        return pc.filter(as_arrow(x), pa.array(m))
    return x[m]


register_op("MRFilter", lambda inputs, attrs: [(inputs[0].dtype, (None,) + tuple(
    (inputs[0]._shape or (None,))[1:]))], filter_values, differentiable=False,
    cpu_only=_BATCHES, arrow=True)


def _write_records(f, data) -> None:
    for batch in ([data] if isinstance(data, np.ndarray) else data):
        f.write(np.ascontiguousarray(batch, dtype=np.uint8).data)


if "records" not in storage.output_writers:
    storage.register_writer("records", "bin", _write_records)




def _read_group_shape(inputs, attrs):
    if attrs["columns"]:
        return [(dt, (None,)) for _, dt in attrs["columns"]] + [(_dt.int64, (3,))]
    return [(attrs["dtype"], attrs["shape"]), (_dt.int64, (3,))]


def _read_group_kernel(*, splits, columns, dtype, shape, skip):
    recs = read_split_group(splits, columns, dtype, skip)
    if not columns and shape is not None and len(shape) == 2 and np.ndim(recs[0]) == 1:
        return (np.asarray(recs[0]).reshape(-1, shape[1]), recs[1])
    return recs


register_op("MRReadSplits", _read_group_shape, _read_group_kernel, differentiable=False,
            foldable=False, cpu_only=_BATCHES)


# ---- group, partition, merge, write ----------------------------------------------------------
def _pair_shape(inputs, attrs):
    k, v = inputs
    vshape = v._shape if attrs.get("how") not in ("count",) else (None,)
    if vshape is not None and len(vshape) == 0 and attrs.get("how") != "collect":
        vshape = (None,)
    vdt = _dt.int64 if attrs.get("how") == "count" else \
        _dt.float64 if attrs.get("how") == "mean" else v.dtype
    return [(k.dtype, k._shape), (vdt, vshape)]


register_op("MRGroupReduce", _pair_shape,
            lambda keys, values, how: group_reduce(keys, values, how), differentiable=False,
            cpu_only=_BATCHES, arrow=True)


def _partition_shape(inputs, attrs):
    k, v = inputs
    return [(t.dtype, t._shape) for _ in range(attrs["num"]) for t in (k, v)] + \
        [(_dt.int64, (2,))]


# ---- shuffle through storage -----------------------------------------------------------------
@dataclass(frozen=True)
class Spilled:
    """A bucket written to storage (Arrow IPC) instead of sent: what its Send carries."""
    url: str
    records: int


def _column(x) -> tuple:
    """A value as one Arrow column and the JSON that restores it."""
    if is_arrow(x):
        return as_arrow(x), {"kind": "arrow"}
    x = np.asarray(x)
    if x.ndim == 0:
        return None, {"kind": "scalar", "dtype": x.dtype.str, "value": x.item()}
    meta = {"kind": "numpy", "dtype": x.dtype.str, "shape": list(x.shape[1:])}
    if x.dtype.kind in "OUS":
        return pa.array(x.astype(object), pa.large_string()), {"kind": "arrow"}
    flat = np.ascontiguousarray(x).reshape(len(x), int(np.prod(x.shape[1:])))
    width = flat.shape[1] * flat.dtype.itemsize
    col = pa.FixedSizeBinaryArray.from_buffers(pa.binary(max(width, 1)), len(x), [
        None, pa.py_buffer(flat.view(np.uint8).reshape(-1) if width else
                           np.zeros(len(x), np.uint8))])
    meta["width"] = width
    return col, meta


def _uncolumn(col, meta):
    if meta["kind"] == "arrow":
        return col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    dt = np.dtype(meta["dtype"])
    if meta["kind"] == "scalar":
        return np.asarray(meta["value"], dt)
    col = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    n = len(col)
    raw = np.frombuffer(col.buffers()[1], np.uint8)[col.offset * max(meta["width"], 1):]
    if not meta["width"]:
        return np.zeros((n, *meta["shape"]), dt)
    return raw[:n * meta["width"]].view(dt).reshape((n, *meta["shape"]))  # read-only view


def spill(keys, values, url: str) -> Spilled:
    kc, km = _column(keys)
    vc, vm = _column(values)
    cols = {"k": kc} if vc is None else {"k": kc, "v": vc}
    table = pa.table(cols).replace_schema_metadata({"tvm": json.dumps({"k": km, "v": vm})})
    fs, path = storage.fsio.to_fs(url)
    fs.makedirs(path.rsplit("/", 1)[0], exist_ok=True)
    with fs.open(path, "wb") as f, pa.ipc.new_file(f, table.schema) as w:
        w.write_table(table)
    return Spilled(url, length(keys))


def unspill(b: Spilled) -> tuple:
    fs, path = storage.fsio.to_fs(b.url)
    with fs.open(path, "rb") as f:
        table = pa.ipc.open_file(f).read_all()
    meta = json.loads(table.schema.metadata[b"tvm"])
    keys = _uncolumn(table.column("k"), meta["k"])
    values = _uncolumn(table.column("v") if "v" in table.column_names else None, meta["v"])
    return keys, values


def _partition_kernel(keys, values, num, how, boundaries, spill_url=None, threshold=0,
                      task=0, closed_marker=None):
    size = nbytes(keys) + nbytes(values)
    if closed_marker and storage.fsio.exists(*storage.fsio.to_fs(closed_marker)):
        # a speculative attempt that lost and ran after its job finished: write nothing
        return (*[None] * (2 * num), np.array([0, 0], np.int64))
    pairs = partition(keys, values, num, how, boundaries)
    if spill_url and size > threshold:  # the shuffle goes through storage
        pairs = [(spill(k, v, f"{spill_url}/m{task:05d}-r{r:05d}.arrow"), None)
                 for r, (k, v) in enumerate(pairs)]
    flat = [x for pair in pairs for x in pair]
    return (*flat, np.array([length(keys), size], np.int64))


register_op("MRPartition", _partition_shape, _partition_kernel, differentiable=False,
            cpu_only=_BATCHES, arrow=True)


_PARTIAL = {"sum": "sum", "count": "sum", "min": "min", "max": "max", "first": "first"}


def merge(pairs: list, how: str | None, sort: bool):
    """Concatenate buckets ``[(keys, values), …]``; reduce per key (``how``) and/or sort.
    Spilled buckets are read one at a time; with an associative ``how`` each is reduced as it
    is read, so memory holds one bucket and the partial results."""
    if any(isinstance(k, Spilled) for k, _ in pairs):
        loaded = []
        for i, (k, v) in enumerate(pairs):
            pairs[i] = (None, None)  # (each bucket lives in `loaded` only)
            k, v = unspill(k) if isinstance(k, Spilled) else (k, v)
            if how in _PARTIAL and length(k):
                k, v = group_reduce(k, v, how)
            loaded.append((k, v))
        return merge(loaded, _PARTIAL.get(how, how), sort)
    nonempty = [(k, v) for k, v in pairs if length(k)] or pairs[:1]
    pairs.clear()  # the caller's list: let each bucket go once it is concatenated
    keys = concat([k for k, _ in nonempty])
    scalar = all(np.ndim(v) == 0 and not is_arrow(v) for _, v in nonempty) and \
        len({np.asarray(v).item() for _, v in nonempty}) == 1
    if how is None and sort and not scalar and _same_arrays([v for _, v in nonempty]):
        order = sort_order(keys)  # (TeraSort's reducer: its values are most of its memory)
        return take(keys, order), _take_concat([v for _, v in nonempty], order)
    values = nonempty[0][1] if scalar else concat([broadcast(v, length(k))
                                                   for k, v in nonempty])
    del nonempty
    if scalar and how not in ("sum", "count"):
        values = broadcast(values, length(keys))
    if how is not None:
        keys, values = group_reduce(keys, values, how)
    if sort:
        order = sort_order(keys)
        keys, values = take(keys, order), take(values, order)
    return keys, values


def _same_arrays(parts: list) -> bool:
    """NumPy arrays with rows, of one dtype and row shape."""
    return all(isinstance(p, np.ndarray) and p.ndim for p in parts) and \
        len({(p.dtype, p.shape[1:]) for p in parts}) == 1


def _take_concat(parts: list, order: np.ndarray) -> np.ndarray:
    """``take(concat(parts), order)`` with no concatenation: each part's rows are scattered
    to their places in the one output array (a reducer's whole data is copied once, not
    twice, and the output is the only new allocation).

    >>> _take_concat([np.array([5, 6]), np.array([7])], np.array([2, 0, 1])).tolist()
    [7, 5, 6]
    """
    n = len(order)
    where = np.empty(n, np.int64)
    where[order] = np.arange(n)
    out = np.empty((n,) + parts[0].shape[1:], parts[0].dtype)
    lo = 0
    for p in parts:
        out[where[lo:lo + len(p)]] = p
        lo += len(p)
    return out


class _Static:
    """A stand-in tensor (dtype, shape) for shape rules of ops whose inputs are files."""

    def __init__(self, dtype, shape):
        self.dtype, self._shape = dtype, shape


def _merge_shape(inputs, attrs):
    if not inputs:
        (kd, ks), (vd, vs) = attrs["types"]
        return _pair_shape([_Static(kd, ks), _Static(vd, vs)], attrs)
    return _pair_shape(inputs[:2], attrs)


def _merge_kernel(*flat, how, sort, urls=(), types=()):
    pairs = [(flat[i], flat[i + 1]) for i in range(0, len(flat), 2)]
    return merge(pairs + [(Spilled(u, -1), None) for u in urls], how, sort)


register_op("MRMerge", _merge_shape, _merge_kernel, differentiable=False,
            cpu_only=_BATCHES, arrow=True)


def _as_text(x) -> pa.Array:
    """One text column from keys or values (byte records as hex, rows space-separated)."""
    if is_arrow(x):
        a = as_arrow(x)
        if pa.types.is_list(a.type) or pa.types.is_large_list(a.type):
            return pc.binary_join(pc.cast(a, pa.list_(pa.large_string())),
                                  pa.scalar(",", pa.large_string()))
        return a if pa.types.is_large_string(a.type) else a.cast(pa.large_string())
    x = np.asarray(x)
    if x.dtype.kind in "OUS":
        return as_arrow(x)
    if x.ndim == 2 and x.dtype == np.uint8:
        return pa.array([bytes(r).hex() for r in x], pa.large_string()) if len(x) < 1 << 16 \
            else pa.array(np.char.mod("%s", x), pa.large_string())
    if x.ndim > 1:
        cols = [_as_text(x[:, j]) for j in range(x.shape[1])]
        return pc.binary_join_element_wise(*cols, pa.scalar(" ", pa.large_string()))
    return pc.cast(pa.array(x), pa.large_string())


def write_pairs(keys, values, url: str, task: int, attempt: str, fmt: str, sep: str):
    c = storage.OutputCommitter(url)
    name = {"text": f"part-r-{task:05d}", "jsonl": f"part-r-{task:05d}.jsonl",
            "parquet": f"part-r-{task:05d}.parquet", "npy": f"part-r-{task:05d}.npy",
            "records": f"part-r-{task:05d}"}[fmt]
    if fmt == "text":
        lines = pc.binary_join_element_wise(_as_text(keys), _as_text(values),
                                            pa.scalar(sep, pa.large_string())) \
            if length(keys) else pa.array([], pa.large_string())
        # (storage's text writer joins with a plain-string separator: hand it `string`)
        data = lines.cast(pa.string()) if lines.nbytes < 1 << 31 else lines
    elif fmt in ("npy", "records"):
        data = np.asarray(values)
    else:
        data = pa.table({"key": as_arrow(keys) if is_stringy(keys) or np.ndim(keys) == 1
                         else pa.array(list(np.asarray(keys))),
                         "value": as_arrow(values) if np.ndim(values) <= 1 else
                         pa.array(list(np.asarray(values)))})
    storage.write_output(c, task, attempt, data, format=fmt, name=name)
    return np.array([length(keys), nbytes(keys) + nbytes(values)], np.int64)


def _merge_write_kernel(*flat, how, sort, urls, types, url, task, attempt, fmt, sep):
    """Merge, reduce, sort and write in one kernel: the reducer's data lives only while this
    runs (a stage task keeps every op's output until it ends; several reducers on one device
    would otherwise hold all their data at once)."""
    keys, values = _merge_kernel(*flat, how=how, sort=sort, urls=urls, types=types)
    return write_pairs(keys, values, url, task, attempt, fmt, sep)


register_op("MRMergeWrite", lambda inputs, attrs: [(_dt.int64, (2,))], _merge_write_kernel,
            stateful=True, differentiable=False, cpu_only=_BATCHES, idempotent=True)

register_op("MRWrite", lambda inputs, attrs: [(_dt.int64, (2,))],
            lambda keys, values, url, task, attempt, fmt, sep:
            write_pairs(keys, values, url, task, attempt, fmt, sep),
            stateful=True, differentiable=False, cpu_only=_BATCHES, arrow=True,
            idempotent=True)
