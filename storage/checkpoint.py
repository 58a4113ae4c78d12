"""Checkpoints on any fsspec filesystem: sharded writes, an index written last, verified reads.

One folder per checkpoint, ``<dir>/<prefix>-<step>/`` (or ``<dir>/<prefix>/`` without a step)::

    attempt-<ms>-<rand>/data-00000-of-00002   tensors of shard 0, back to back, each a complete
    attempt-<ms>-<rand>/data-00001-of-00002   .npy record (or an Arrow IPC stream for strings)
    index.json                                written last: the commit (tensorvm.storage.index)

and ``<dir>/checkpoint``, the state file naming the latest checkpoints. A save is
``write_shard`` once per parameter-server device (in parallel, each its own data file), then one
``commit``. A restore is ``read_tensors``, which checks every record's size and CRC-32C.

A save never touches a committed checkpoint: every ``write_shard`` writes into a fresh attempt
folder, and ``commit`` replaces ``index.json`` in one atomic step (a rename on POSIX, one PUT on
object stores), so until then the previous index — and the data it names — stays restorable,
even when the same folder is saved again (a save without a step, or a repeated step). After the
commit the data the old index named is deleted, and so is debris of crashed attempts older than
:data:`STALE_ATTEMPT_SECONDS` (a younger one may belong to a save still running).

>>> import numpy as np
>>> d = "memory://tvm-doc-ckpt"
>>> ckpt = checkpoint_url(d, "model.ckpt", 7)
>>> entries = write_shard(ckpt, 0, 1, {"w": np.ones((2, 3), np.float32)})
>>> commit(d, ckpt, entries, step=7)
'memory://tvm-doc-ckpt/model.ckpt-7'
>>> read_tensors(latest_checkpoint(d))["w"].sum()
np.float32(6.0)

All functions take ``storage_options`` (a dict passed to fsspec) as a keyword.
"""

from __future__ import annotations

import json
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Mapping

import numpy as np

from . import checkpoint_state
from .checkpoint_state import latest_checkpoint, remove_checkpoint, state_lock, update_state
from .errors import DataLossError
from .fsio import atomic_write_bytes, join, regular_file_size, to_fs
from .index import (INDEX_NAME, encode_index, is_attempt_name, is_plain_name, read_index,
                    validate_entry, validate_index)
from .records import decode_record, read_record_bytes, write_record
from .slices import assemble, normalize_slice

__all__ = ["checkpoint_url", "data_file_name", "write_shard", "commit", "read_index",
           "read_tensors", "read_slices", "latest_checkpoint"]

TensorKey = str | tuple[str, str]
STALE_ATTEMPT_SECONDS = 24 * 3600.0  # uncommitted attempt folders older than this: debris


def new_attempt_name() -> str:
    """A fresh attempt folder name, ``attempt-<ms since epoch, hex>-<random hex>``."""
    return f"attempt-{time.time_ns() // 1_000_000:x}-{uuid.uuid4().hex[:12]}"


def checkpoint_url(dir_url: str, prefix: str = "model.ckpt", step: int | None = None) -> str:
    """``<dir>/<prefix>-<step>`` (or ``<dir>/<prefix>``): the folder of one checkpoint.

    >>> checkpoint_url("s3://bucket/run1", "model.ckpt", 100)
    's3://bucket/run1/model.ckpt-100'
    """
    name = prefix if step is None else f"{prefix}-{int(step)}"
    if not is_plain_name(name):
        raise ValueError(f"checkpoint prefix {prefix!r} must be a plain name "
                         "([A-Za-z0-9._-], no '/' or '..')")
    return join(dir_url, name)


def data_file_name(shard: int, num_shards: int) -> str:
    """``data-{shard:05d}-of-{num_shards:05d}``."""
    if not 0 <= shard < num_shards:
        raise ValueError(f"shard {shard} out of range for {num_shards} shards")
    return f"data-{shard:05d}-of-{num_shards:05d}"


def _split_key(key: TensorKey, slices: Mapping[str, str] | None) -> tuple[str, str | None]:
    if isinstance(key, tuple):
        name, spec = key
        return name, spec
    return key, (slices or {}).get(key)


def write_shard(ckpt_url: str, shard: int, num_shards: int,
                tensors: Mapping[TensorKey, np.ndarray], slices: Mapping[str, str] | None = None,
                *, storage_options: dict | None = None, attempt: str | None = None
                ) -> list[dict]:
    """Write one data file of a checkpoint and return its index entries.

    ``tensors`` maps a name to an array; ``slices`` optionally maps a name to the slice spec of a
    partitioned variable's piece (``"0:50,:"``, see :mod:`tensorvm.storage.slices`). To put two
    pieces of one variable in the same shard, key them as ``(name, spec)`` tuples. Safe to call
    concurrently for different shards of one checkpoint. The data file goes into a fresh attempt
    folder (``attempt``, default a new :func:`new_attempt_name`): a committed checkpoint at
    ``ckpt_url`` is left as it is until the next :func:`commit` replaces its index.

    >>> import numpy as np
    >>> e = write_shard("memory://tvm-doc-ws/m-1", 1, 2, {"b": np.zeros(3)}, {"b": "3:6"})
    >>> e[0]["file"].split("/")[1], e[0]["slice"], e[0]["format"]
    ('data-00001-of-00002', '3:6', 'npy')
    """
    attempt = attempt or new_attempt_name()
    if not is_attempt_name(attempt):
        raise ValueError(f"attempt {attempt!r} is not an attempt folder name")
    name = f"{attempt}/{data_file_name(shard, num_shards)}"
    file_url = join(ckpt_url, name)
    fs, folder = to_fs(ckpt_url, storage_options)
    fs.makedirs(f"{folder}/{attempt}", exist_ok=True)
    pending = []
    for key, value in tensors.items():
        tname, spec = _split_key(key, slices)
        if not isinstance(tname, str) or not (spec is None or isinstance(spec, str)):
            raise TypeError(f"tensor key {key!r}: expected a name or a (name, slice spec) pair")
        arr = np.asarray(value)
        full = None
        if spec is not None:
            spec, full = normalize_slice(spec, arr.shape, tname)
        pending.append((tname, spec, full, arr))
    entries, offset = [], 0
    with ThreadPoolExecutor(1, thread_name_prefix="tvm-checksum") as pool:
        with fs.open(f"{folder}/{name}", "wb") as f:
            for tname, spec, full, arr in pending:
                size, check, fmt = write_record(f, arr, tname, pool)
                entries.append({"name": tname, "dtype": arr.dtype.str, "shape": list(arr.shape),
                                "slice": spec, "full_shape": full, "file": name,
                                "offset": offset, "size": size, "checksum": check,
                                "format": fmt})
                offset += size
    for entry in entries:
        validate_entry(entry, file_url)
    return entries


def _data_files(entries: list[dict]) -> dict[str, int]:
    """``{file: bytes the entries need}``."""
    need: dict[str, int] = {}
    for e in entries:
        need[e["file"]] = max(need.get(e["file"], 0), e["offset"] + e["size"])
    return need


def _check_data_files(fs, folder: str, ckpt_url: str, entries: list[dict],
                      writers: dict[str, str]) -> None:
    """Every data file the index will name exists, is regular and long enough (a shard written
    to a ``file://`` folder that this process cannot see is named here, with its writer)."""
    for fname, end in _data_files(entries).items():
        url = join(ckpt_url, fname)
        where = writers.get(fname.rsplit("/", 1)[-1])
        try:
            size = regular_file_size(fs, f"{folder}/{fname}", url)
        except FileNotFoundError:
            hint = (f" (written by {where}; is this filesystem shared by every worker and the "
                    "committing process?)") if where else ""
            raise DataLossError(f"data file missing at commit{hint}", url) from None
        if size < end:
            raise DataLossError(f"data file has {size} bytes, the index needs {end}", url)


def _writers(meta: dict | None) -> dict[str, str]:
    """``{data file name: "worker W (device D)"}`` from ``meta["writers"]``, where given."""
    out = {}
    for w in (meta or {}).get("writers") or []:
        try:
            name = data_file_name(int(w["shard"]), int(w["num_shards"]))
        except (KeyError, TypeError, ValueError):
            continue
        out[name] = f"worker {w.get('worker')} (device {w.get('device')})"
    return out


def _remove_superseded(fs, folder: str, old: list[dict], new: list[dict]) -> None:
    """After a commit: delete what the replaced index named and the new one does not, and
    attempt folders named by neither that are older than :data:`STALE_ATTEMPT_SECONDS`."""
    keep = set(_data_files(new))
    doomed = {f.split("/", 1)[0] if "/" in f else f for f in _data_files(old)} - \
        {f.split("/", 1)[0] if "/" in f else f for f in keep}
    now_ms = time.time_ns() // 1_000_000
    try:
        listing = fs.ls(folder, detail=False)
    except FileNotFoundError:
        listing = []
    for path in listing:
        name = path.rstrip("/").rsplit("/", 1)[-1]
        if is_attempt_name(name) and not any(k.startswith(name + "/") for k in keep):
            age = (now_ms - int(name.split("-")[1], 16)) / 1000.0
            if age > STALE_ATTEMPT_SECONDS:
                doomed.add(name)
    for name in doomed:
        try:
            fs.rm(f"{folder}/{name}", recursive=True)
        except FileNotFoundError:
            pass


def commit(dir_url: str, ckpt_url: str, entries: list[dict], step: int | None,
           max_to_keep: int | None = 5, keep_checkpoint_every_n_hours: float | None = None,
           meta: dict | None = None, *, storage_options: dict | None = None) -> str:
    """Commit a checkpoint written by :func:`write_shard` calls; return ``ckpt_url``.

    Checks that every data file is present, regular and long enough (a missing one names the
    worker that wrote it when ``meta["writers"]`` says), replaces ``index.json`` atomically (the
    commit; a committed checkpoint already there stays readable until this instant), deletes
    the data the replaced index named, updates ``<dir_url>/checkpoint``, then deletes
    checkpoints pruned by ``max_to_keep`` (``None``/``0``: keep all) and
    ``keep_checkpoint_every_n_hours`` (of the pruned ones, one every N hours is kept on disk);
    those two steps hold the directory's :func:`~tensorvm.storage.checkpoint_state.state_lock`,
    so concurrent savers never leave a pruned checkpoint in the state file.
    ``ckpt_url`` must be a folder directly inside ``dir_url``; ``meta`` is any
    JSON-serialisable dict stored in the index.
    """
    fs, folder = to_fs(ckpt_url, storage_options)
    _, dir_path = to_fs(dir_url, storage_options)
    parent, _, name = folder.rstrip("/").rpartition("/")
    if parent != dir_path.rstrip("/") or not is_plain_name(name):
        raise ValueError(f"checkpoint {ckpt_url} is not a plain-named folder directly inside "
                         f"{dir_url}")
    index_url = join(ckpt_url, INDEX_NAME)
    body = encode_index(entries, step, checkpoint_state._now(), meta)
    validate_index(json.loads(body), index_url)
    _check_data_files(fs, folder, ckpt_url, entries, _writers(meta))
    try:
        old = read_index(ckpt_url, storage_options=storage_options)["entries"]
    except (FileNotFoundError, DataLossError):
        old = []
    atomic_write_bytes(fs, f"{folder}/{INDEX_NAME}", body)
    _remove_superseded(fs, folder, old, entries)
    with state_lock(dir_url, storage_options=storage_options):  # no saver lists what we prune
        doomed = update_state(dir_url, name, max_to_keep, keep_checkpoint_every_n_hours,
                              storage_options=storage_options)
        for old in doomed:
            remove_checkpoint(join(dir_url, old), storage_options=storage_options)
    return ckpt_url


def _read_file_records(fs, folder: str, ckpt_url: str, fname: str, entries: list[dict],
                       algorithm: str) -> list[tuple[dict, np.ndarray]]:
    """Read and verify ``entries`` of one data file (checked to be a regular file at least as
    long as the entries declare *before* anything is read or allocated)."""
    url = join(ckpt_url, fname)
    out = []
    path = f"{folder}/{fname}"
    try:
        size = regular_file_size(fs, path, url)
        need = max(e["offset"] + e["size"] for e in entries)
        if size < need:
            raise DataLossError(f"truncated data file: {size} bytes, the index declares records "
                                f"up to byte {need}", url)
        f = fs.open(path, "rb")
    except FileNotFoundError:
        raise DataLossError("data file missing", url) from None
    with f, ThreadPoolExecutor(1, thread_name_prefix="tvm-checksum") as pool:
        for entry in sorted(entries, key=lambda e: e["offset"]):
            buf, check = read_record_bytes(f, entry["offset"], entry["size"], url, pool,
                                           algorithm)
            if check != entry["checksum"]:
                raise DataLossError(
                    f"checksum mismatch for tensor {entry['name']!r} at offset "
                    f"{entry['offset']} ({algorithm} {check:#x}, "
                    f"index says {entry['checksum']:#x})", url)
            out.append((entry, decode_record(buf, entry, url)))
    return out


def _read_entries(ckpt_url: str, names: list[str] | None, index: dict | None,
                  storage_options: dict | None) -> tuple[dict, list[tuple[dict, np.ndarray]]]:
    if index is None:
        index = read_index(ckpt_url, storage_options=storage_options)
    entries = index["entries"]
    if names is not None:
        missing = set(names) - {e["name"] for e in entries}
        if missing:
            raise KeyError(f"tensors {sorted(missing)} not in checkpoint {ckpt_url}")
        wanted = set(names)
        entries = [e for e in entries if e["name"] in wanted]
    tasks = _read_tasks(entries)
    fs, folder = to_fs(ckpt_url, storage_options)
    with ThreadPoolExecutor(max(1, min(len(tasks), _READERS)), "tvm-read") as pool:
        futures = [pool.submit(_read_file_records, fs, folder, ckpt_url, fname, run,
                               index["checksum_algorithm"]) for fname, run in tasks]
        results = [pair for fut in futures for pair in fut.result()]
    return index, results


_READERS = 4  # threads reading records (each with a checksum helper)
_MIN_RUN = 32 * 1024 * 1024  # a file is read by several threads only in runs this large


def _read_tasks(entries: list[dict]) -> list[tuple[str, list[dict]]]:
    """Cut the wanted records into ``(file, run of records)`` tasks of similar byte counts, so
    that a single large data file is also read by several threads."""
    by_file: dict[str, list[dict]] = {}
    for e in entries:
        by_file.setdefault(e["file"], []).append(e)
    total = sum(e["size"] for e in entries)
    target = max(_MIN_RUN, total // _READERS)
    tasks = []
    for fname, group in by_file.items():
        run, run_bytes = [], 0
        for e in sorted(group, key=lambda e: e["offset"]):
            run.append(e)
            run_bytes += e["size"]
            if run_bytes >= target:
                tasks.append((fname, run))
                run, run_bytes = [], 0
        if run:
            tasks.append((fname, run))
    return tasks


def read_slices(ckpt_url: str, names: list[str] | None = None, index: dict | None = None, *,
                storage_options: dict | None = None
                ) -> dict[str, list[tuple[str | None, np.ndarray]]]:
    """Read tensors as stored: ``{name: [(slice spec or None, array), ...]}``, verified.

    Use this to restore a partitioned variable piece by piece.
    """
    _, results = _read_entries(ckpt_url, names, index, storage_options)
    out: dict[str, list] = {}
    for entry, arr in results:
        out.setdefault(entry["name"], []).append((entry.get("slice"), arr))
    return out


def read_tensors(ckpt_url: str, names: list[str] | None = None, index: dict | None = None, *,
                 storage_options: dict | None = None) -> dict[str, np.ndarray]:
    """Read and verify tensors (all, or ``names``) of the checkpoint at ``ckpt_url``.

    Every record's size and checksum are checked: a flipped byte, a truncated or missing file is
    :class:`DataLossError` naming the file's URL. Slices of a partitioned variable are
    reassembled into the full array (all slices must be present). ``index`` skips re-reading
    the index when the caller already has it.
    """
    index, results = _read_entries(ckpt_url, names, index, storage_options)
    index_url = join(ckpt_url, INDEX_NAME)
    whole: dict[str, np.ndarray] = {}
    pieces: dict[str, list] = {}
    for entry, arr in results:
        if entry.get("slice") is None:
            if entry["name"] in pieces:
                raise DataLossError(f"tensor {entry['name']!r} is both whole and sliced",
                                    index_url)
            whole[entry["name"]] = arr
        else:
            if entry["name"] in whole:
                raise DataLossError(f"tensor {entry['name']!r} is both whole and sliced",
                                    index_url)
            pieces.setdefault(entry["name"], []).append(
                (entry["slice"], entry.get("full_shape"), arr))
    for name, parts in pieces.items():
        whole[name] = assemble(name, parts, index_url)
    return whole
