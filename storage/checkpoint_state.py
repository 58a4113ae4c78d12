"""The ``<dir>/checkpoint`` state file, ``max_to_keep`` pruning and finding the latest checkpoint.

The state file is JSON naming checkpoint folders *relative to* ``<dir>`` (so a directory can be
moved or copied between filesystems)::

    {"model_checkpoint_path": "model.ckpt-300",
     "all_model_checkpoint_paths": ["model.ckpt-100", "model.ckpt-200", "model.ckpt-300"],
     "all_model_checkpoint_timestamps": [1700000000.0, 1700000060.0, 1700000120.0],
     "last_preserved_timestamp": 1700000000.0,
     "preserved_checkpoint_paths": []}

It is replaced atomically (one PUT on object stores; temporary file then rename on POSIX). It is
a pointer, not the commit: readers skip a named checkpoint whose ``index.json`` is missing, and
fall back to scanning the folder for the newest committed checkpoint when the state file is
missing or names none.

The committed folders are the truth. Each commit derives the list from them (every folder with
a valid index and the committing saver's prefix, oldest commit first, minus those that
``keep_checkpoint_every_n_hours`` preserved), not from the previous state file, so two savers
sharing a directory lose no update: a checkpoint that one saver's state file never named is
still pruned by the next commit.
Deriving the list, writing the state file and deleting what pruning dropped happen under one
lock per directory (:func:`state_lock`: a thread lock, and on a local filesystem an ``flock``
of the directory, so savers in other processes wait too), so a saver never writes a list
that another saver has just pruned from. Where no cross-process lock exists (object stores),
:func:`read_state` still drops names whose folder holds no index any more.

The state file is small metadata: a ``checkpoint`` that is not a regular file (a FIFO, a
device, a folder) or is larger than :data:`MAX_STATE_BYTES` is ignored with a warning naming it
(as TF ignores a state file it cannot read), and the committed folders are scanned instead.

>>> from tensorvm.storage.checkpoint_state import plan_pruning
>>> plan_pruning(["a", "b", "c"], [0.0, 1.0, 2.0], max_to_keep=2, keep_hours=None,
...              last_preserved=0.0)
(['b', 'c'], [1.0, 2.0], ['a'], 0.0)
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import threading
import time
from typing import Callable, Iterator

from .errors import DataLossError
from .fsio import atomic_write_bytes, exists, join, to_fs
from .index import INDEX_NAME, is_plain_name, read_index
from .state_file import MAX_STATE_BYTES, STATE_NAME, read_state_bytes

__all__ = ["STATE_NAME", "MAX_STATE_BYTES", "read_state", "read_state_bytes", "update_state",
           "plan_pruning", "latest_checkpoint", "committed_checkpoints", "committed_names",
           "remove_checkpoint", "state_lock"]

_STEPPED = re.compile(r"^(.+)-([0-9]+)$")
_now = time.time  # tests patch this to travel in time
_log = logging.getLogger("tensorvm")


def committed_names(dir_url: str, *, storage_options: dict | None = None) -> set[str]:
    """The names of the folders of ``dir_url`` that hold an ``index.json`` (one listing; the
    indexes are not read)."""
    fs, path = to_fs(dir_url, storage_options)
    fs.invalidate_cache(path)
    try:
        found = fs.glob(f"{path.rstrip('/')}/*/{INDEX_NAME}")
    except FileNotFoundError:
        return set()
    return {p.rstrip("/").rsplit("/", 2)[-2] for p in found}


def read_state(dir_url: str, *, storage_options: dict | None = None) -> dict | None:
    """The parsed state file of ``dir_url``, or ``None`` when missing or unreadable.

    ``all_model_checkpoint_paths`` lists only checkpoints still committed (a name whose folder
    has no index any more, pruned by a saver in another process, is dropped)."""
    raw = read_state_bytes(dir_url, storage_options=storage_options)
    if raw is None:
        return None
    try:
        doc = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(doc, dict):
        return None
    paths = doc.get("all_model_checkpoint_paths") or []
    stamps = doc.get("all_model_checkpoint_timestamps") or []
    if not isinstance(paths, list) or not all(is_plain_name(p) for p in paths):
        return None
    if not isinstance(stamps, list) or len(stamps) != len(paths) or not all(
            isinstance(t, (int, float)) and not isinstance(t, bool) for t in stamps):
        stamps = [0.0] * len(paths)
    if paths:
        live = committed_names(dir_url, storage_options=storage_options)
        kept = [(p, t) for p, t in zip(paths, stamps) if p in live]
        paths, stamps = [p for p, _ in kept], [t for _, t in kept]
    latest = doc.get("model_checkpoint_path")
    preserved = doc.get("preserved_checkpoint_paths") or []
    if not isinstance(preserved, list):
        preserved = []
    return {"model_checkpoint_path": latest if is_plain_name(latest) else None,
            "all_model_checkpoint_paths": paths,
            "all_model_checkpoint_timestamps": [float(t) for t in stamps],
            "last_preserved_timestamp": doc.get("last_preserved_timestamp"),
            "preserved_checkpoint_paths": [p for p in preserved if is_plain_name(p)]}


def plan_pruning(paths: list[str], stamps: list[float], max_to_keep: int | None,
                 keep_hours: float | None, last_preserved: float
                 ) -> tuple[list[str], list[float], list[str], float]:
    """TF Saver's rule: keep the newest ``max_to_keep``; of the older ones keep one every
    ``keep_hours`` (they leave the list but stay on disk). Returns
    ``(kept paths, kept timestamps, paths to delete, new last_preserved)``.
    ``max_to_keep`` of ``None`` or ``0`` keeps everything.
    """
    paths, stamps, delete = list(paths), list(stamps), []
    if not max_to_keep:
        return paths, stamps, delete, last_preserved
    while len(paths) > max_to_keep:
        path, stamp = paths.pop(0), stamps.pop(0)
        if keep_hours is not None and stamp - last_preserved >= keep_hours * 3600.0:
            last_preserved = stamp
        else:
            delete.append(path)
    return paths, stamps, delete, last_preserved


def _commit_order(item: tuple[str, dict | DataLossError]) -> tuple:
    doc = item[1]
    if isinstance(doc, Exception):
        return (0, 0.0, -1)
    step = doc.get("step")
    stamp = doc.get("time")
    return (1, float(stamp) if isinstance(stamp, (int, float)) else 0.0,
            step if isinstance(step, int) else -1)


def _family(name: str) -> Callable[[str], bool]:
    """Which checkpoint names belong to the saver that saves ``name``: ``<prefix>-<step>``
    for any step when ``name`` has one, else only ``name`` itself."""
    m = _STEPPED.match(name)
    if m is None:
        return lambda other: other == name
    prefix = m.group(1)
    return lambda other: other == name or (
        (o := _STEPPED.match(other)) is not None and o.group(1) == prefix)


def update_state(dir_url: str, name: str, max_to_keep: int | None,
                 keep_hours: float | None, *, storage_options: dict | None = None) -> list[str]:
    """Record checkpoint ``name`` as the latest, replace the state file atomically, and return
    the names of checkpoints that pruning says to delete (the caller deletes them *after*).

    The list is the committed folders of ``dir_url`` of the same family as ``name``
    (``<prefix>-<step>``: every step of that prefix; a name without a step: itself), oldest
    commit first, ``name`` last, less those preserved by ``keep_hours`` earlier. So it is safe
    against another process saving into the same directory at the same time (each prunes what
    it finds; deleting twice is harmless), and a checkpoint of another prefix is never pruned.
    Call it under :func:`state_lock` and delete what it returns before releasing the lock
    (:func:`tensorvm.storage.commit` does): then no state file names a pruned checkpoint. A
    ``name`` that is no longer committed (another saver pruned it first) is not listed.
    """
    state = read_state(dir_url, storage_options=storage_options) or {}
    mine = _family(name)
    committed = [(n, doc) for n, doc in (
        (url.rstrip("/").rsplit("/", 1)[-1], doc) for url, doc in sorted(
            committed_checkpoints(dir_url, storage_options=storage_options),
            key=_commit_order)) if not isinstance(doc, Exception) and mine(n)]
    preserved = [p for p in state.get("preserved_checkpoint_paths") or []
                 if any(p == n for n, _ in committed) and p != name]
    now = _now()
    pairs = [(n, float(doc.get("time") or 0.0)) for n, doc in committed
             if n != name and n not in preserved]
    here = [float(doc.get("time") or now) for n, doc in committed if n == name]
    if here:
        pairs.append((name, here[0]))
    last_preserved = state.get("last_preserved_timestamp")
    if not isinstance(last_preserved, (int, float)):
        last_preserved = pairs[0][1] if pairs else now
    paths, stamps, delete, new_last = plan_pruning(
        [p for p, _ in pairs], [t for _, t in pairs], max_to_keep, keep_hours, last_preserved)
    kept_on_disk = [p for p, _ in pairs if p not in paths and p not in delete]
    doc = {"model_checkpoint_path": name if here else (paths[-1] if paths else None),
           "all_model_checkpoint_paths": paths,
           "all_model_checkpoint_timestamps": stamps, "last_preserved_timestamp": new_last,
           "preserved_checkpoint_paths": preserved + kept_on_disk}
    fs, path = to_fs(join(dir_url, STATE_NAME), storage_options)
    atomic_write_bytes(fs, path, json.dumps(doc, indent=1).encode())
    return delete


_LOCKS: dict[tuple, threading.Lock] = {}
_LOCKS_GUARD = threading.Lock()


@contextlib.contextmanager
def state_lock(dir_url: str, *, storage_options: dict | None = None) -> Iterator[None]:
    """Hold the lock of checkpoint directory ``dir_url``: one thread lock per directory in
    this process, and where the directory is local, an exclusive ``flock`` of the directory
    itself (no lock file is left behind), so savers in other processes on this machine wait
    too. Object stores have no such lock; there :func:`read_state` filters instead."""
    fs, path = to_fs(dir_url, storage_options)
    path = path.rstrip("/")
    protocol = fs.protocol if isinstance(fs.protocol, str) else tuple(fs.protocol)
    key = (protocol, path)
    with _LOCKS_GUARD:
        lock = _LOCKS.setdefault(key, threading.Lock())
    with lock:
        fd = None
        if "file" in ((protocol,) if isinstance(protocol, str) else protocol):
            try:
                import fcntl
                fd = os.open(path, os.O_RDONLY)
                fcntl.flock(fd, fcntl.LOCK_EX)
            except (ImportError, OSError) as e:  # no flock here (e.g. some NFS): thread lock
                _log.debug("checkpoint directory %s: no cross-process lock (%s)", path, e)
                if fd is not None:
                    os.close(fd)
                    fd = None
        try:
            yield
        finally:
            if fd is not None:
                os.close(fd)  # releases the flock


def remove_checkpoint(ckpt_url: str, *, storage_options: dict | None = None) -> None:
    """Delete a checkpoint folder, its index first so it is never seen half deleted."""
    fs, path = to_fs(ckpt_url, storage_options)
    for target, recursive in ((f"{path}/{INDEX_NAME}", False), (path, True)):
        try:
            fs.rm(target, recursive=recursive)
        except FileNotFoundError:
            pass


def committed_checkpoints(dir_url: str, *, storage_options: dict | None = None
                          ) -> list[tuple[str, dict | DataLossError]]:
    """Scan ``dir_url`` for folders with an index: ``[(checkpoint url, index or error)]``,
    oldest first (by step, then commit time)."""
    fs, path = to_fs(dir_url, storage_options)
    fs.invalidate_cache(path)
    found = []
    for index_path in fs.glob(f"{path.rstrip('/')}/*/{INDEX_NAME}"):
        name = index_path.rstrip("/").rsplit("/", 2)[-2]
        url = join(dir_url, name)
        try:
            found.append((url, read_index(url, storage_options=storage_options)))
        except DataLossError as e:
            found.append((url, e))
        except FileNotFoundError:  # deleted since the listing
            continue

    def order(item):
        doc = item[1]
        if isinstance(doc, Exception):
            return (0, -1, 0.0)
        step = doc.get("step")
        return (1, step if isinstance(step, int) else -1, float(doc.get("time") or 0.0))

    return sorted(found, key=order)


def latest_checkpoint(dir_url: str, *, storage_options: dict | None = None) -> str | None:
    """URL of the newest committed checkpoint in ``dir_url``, or ``None``.

    Follows the state file, skipping named checkpoints whose index is missing (an uncommitted
    or half-pruned folder); if none qualifies, the newest folder with a valid index wins; in a
    folder of TensorFlow 1.x checkpoints, the prefix TF's text state file names.

    >>> latest_checkpoint("memory://tvm-doc-empty") is None
    True
    """
    fs, path = to_fs(dir_url, storage_options)
    fs.invalidate_cache(path)
    state = read_state(dir_url, storage_options=storage_options)
    if state is not None:
        names = list(reversed(state["all_model_checkpoint_paths"]))
        if state["model_checkpoint_path"]:
            names.insert(0, state["model_checkpoint_path"])
        for name in names:
            if exists(fs, f"{path.rstrip('/')}/{name}/{INDEX_NAME}"):
                return join(dir_url, name)
    good = [url for url, doc in committed_checkpoints(dir_url, storage_options=storage_options)
            if not isinstance(doc, Exception)]
    if good:
        return good[-1]
    from .tensor_bundle import tf_latest_checkpoint  # a TensorFlow 1.x checkpoint folder
    return tf_latest_checkpoint(dir_url, storage_options=storage_options)
