"""Durable root tasks: a floating task's exports kept on storage, so a lost worker's finished
work is read back rather than computed again.

A floating task that reads no other task's output — a *root*: a map task reads its own split
— is stateless, so Dask recomputes it from lineage when the worker holding its result dies
before every reader has fetched it. For a map task that is most of the loss a killed worker
costs: its finished map outputs wait in its memory until the last map of the job is done.
Hadoop and Spark keep map outputs on disk for the same reason. With
``RunOptions(durable_url=...)`` (the map-reduce API sets it when the job has storage every
worker shares), each floating root task of the step writes its exports under that URL when it
finishes (one Arrow IPC file, written whole or not at all), and the same task run again — the
same key of the same submission — reads them back instead of running. Only outputs that are
cheap to write compared with the work that made them are kept (:func:`worth_keeping`).

The file is plain Arrow (nothing is unpickled from storage). Exports it cannot hold exactly
(a Python object, a dead tensor, a spilled bucket's handle) make the task not durable: it
runs again as before. A file that cannot be read back (torn by a crash, removed) is ignored
and the task runs. The folder is the caller's to remove (the map-reduce job does on every exit
path).

>>> import numpy as np, tempfile, time, pyarrow as pa
>>> url = f"file://{tempfile.mkdtemp()}/t-1.arrow"
>>> calls = []
>>> def task(x):
...     calls.append(x)
...     time.sleep(0.01)  # (work worth keeping 96 bytes for)
...     return StageResult((np.arange(6.0).reshape(2, 3) * x, pa.array([b"a", b"bc"]), None))
>>> first = run_durable(url, task, 2)
>>> again = run_durable(url, task, 2)
>>> len(calls), again[0].tolist(), again[1].to_pylist(), again[2]
(1, [[0.0, 2.0, 4.0], [6.0, 8.0, 10.0]], [b'a', b'bc'], None)
"""
from __future__ import annotations

import json
import logging
import time

import numpy as np
import pyarrow as pa

from .. import storage
from ..vm.results import StageResult

_log = logging.getLogger("tensorvm")
_META = b"tvm-durable"
KEEP_COST = 0.1  # the share of a task's run time that keeping its outputs may add
WRITE_BYTES_PER_S = 400e6  # a conservative rate of writing to local disk or shared storage


def run_durable(url: str, fn, *args) -> StageResult:
    """A Dask task: ``fn(*args)``'s exports, read from ``url`` when an earlier run of this task
    left them there, else computed and written to ``url`` (when they can be held exactly)."""
    kept = load(url)
    if kept is not None:
        _log.info("task outputs read back from %s (its first run's worker was lost)", url)
        return kept
    t0 = time.perf_counter()
    out = fn(*args)
    if worth_keeping(_nbytes(out), time.perf_counter() - t0):
        save(url, out)
    return out


def worth_keeping(nbytes: int, run_s: float) -> bool:
    """Whether a task's exports of ``nbytes`` are worth writing after a run of ``run_s``
    seconds: writing them (at :data:`WRITE_BYTES_PER_S`) must cost at most
    :data:`KEEP_COST` of the run. A word count's map task (seconds of work, megabytes of
    combined counts) keeps its outputs; TeraSort's (a split read and cut into ranges, outputs
    as large as its input) does not — reading them back would save little, and writing them
    would slow every run.

    >>> worth_keeping(4 << 20, 0.5), worth_keeping(64 << 20, 0.3)
    (True, False)
    """
    return nbytes <= KEEP_COST * run_s * WRITE_BYTES_PER_S


def _nbytes(values) -> int:
    return int(sum(getattr(v, "nbytes", 0) or 0 for v in values))


def save(url: str, values) -> bool:
    """Write ``values`` (a stage's exports) to ``url``, all or nothing; False (nothing
    written) when one of them is not a NumPy or Arrow value, or the write failed."""
    columns, metas = [], []
    for v in values:
        col, meta = _column(v)
        if meta is None:
            return False
        columns.append(col)
        metas.append(meta)
    table = pa.table({f"e{i}": c for i, c in enumerate(columns)}) if columns else pa.table({})
    table = table.replace_schema_metadata({_META: json.dumps(metas)})
    sink = pa.BufferOutputStream()
    with pa.ipc.new_file(sink, table.schema) as w:
        w.write_table(table)
    try:
        fs, path = storage.fsio.to_fs(url)
        fs.makedirs(path.rsplit("/", 1)[0], exist_ok=True)
        storage.fsio.atomic_write_bytes(fs, path, sink.getvalue().to_pybytes())
    except OSError:  # storage full or gone: the task's result still stands
        _log.warning("could not keep a task's outputs at %s", url, exc_info=True)
        return False
    return True


def load(url: str) -> StageResult | None:
    """The exports an earlier run wrote to ``url``, or None (none there, or unreadable)."""
    fs, path = storage.fsio.to_fs(url)
    try:
        with fs.open(path, "rb") as f:
            table = pa.ipc.open_file(f).read_all()
        metas = json.loads(table.schema.metadata[_META])
        return StageResult(_value(table.column(f"e{i}"), m) for i, m in enumerate(metas))
    except FileNotFoundError:
        return None
    except (OSError, KeyError, ValueError, pa.ArrowException):
        _log.warning("ignoring an unreadable task output file %s", url, exc_info=True)
        return None


def _one_row(values: pa.Array) -> pa.Array:
    """``values`` as the one row of a large-list column."""
    return pa.LargeListArray.from_arrays(pa.array([0, len(values)], pa.int64()), values)


def _column(v) -> tuple:
    """``(one-row column, meta)`` for export ``v``; meta None: not held exactly."""
    if v is None:
        return _one_row(pa.array([], pa.int8())), {"kind": "none"}
    if isinstance(v, pa.ChunkedArray):
        v = v.combine_chunks()
    if isinstance(v, pa.Array):
        return _one_row(v), {"kind": "arrow"}
    if isinstance(v, (np.ndarray, np.generic, int, float, bool, bytes, str)):
        a = np.asarray(v)
        meta = {"kind": "numpy", "dtype": a.dtype.str, "shape": list(a.shape)}
        flat = a.reshape(-1)
        if a.dtype.kind in "biuf":
            return _one_row(pa.array(flat)), meta
        if a.dtype.kind in "SU":
            return _one_row(pa.array(flat.tolist(), pa.binary() if a.dtype.kind == "S"
                                     else pa.string())), meta
        if a.dtype.kind == "O":
            items = flat.tolist()
            for kind, typ in ((bytes, pa.binary()), (str, pa.string())):
                if all(type(x) is kind for x in items):
                    meta["items"] = kind.__name__
                    return _one_row(pa.array(items, typ)), meta
    return None, None


def _value(col: pa.ChunkedArray, meta: dict):
    values = col.combine_chunks().values
    kind = meta["kind"]
    if kind == "none":
        return None
    if kind == "arrow":
        return values
    dt, shape = np.dtype(meta["dtype"]), tuple(meta["shape"])
    if dt.kind in "biuf":
        return np.array(values.to_numpy(zero_copy_only=False), dt).reshape(shape)
    items = values.to_pylist()
    if dt.kind == "O":
        out = np.empty(len(items), object)
        out[:] = items
        return out.reshape(shape)
    return np.array(items, dt).reshape(shape)
