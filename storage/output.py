"""Committed outputs in the Hadoop style: nothing is visible until the job commits.

Layout under the output URL ``<out>``::

    <out>/_temporary/attempt_<task>_<attempt>/part-...   what one task attempt writes
    <out>/_temporary/_claims/task_<task>                  the attempt that won its task
    <out>/part-...                                        published by commit_job
    <out>/_SUCCESS                                        written last by commit_job

A task attempt writes under its attempt folder; :meth:`OutputCommitter.commit_task` lets exactly
one attempt per task win (an exclusive create of its claim file where the filesystem supports
it; otherwise the caller — the job driver — must serialise commits, as Hadoop's AM does), and
deletes the other attempts of that task. :meth:`~OutputCommitter.commit_job` moves the winners'
files into place, writes ``_SUCCESS`` and removes ``_temporary``. A failed, killed or duplicated
attempt therefore leaves only ``_temporary`` debris, which the next commit (or setup) removes.

>>> c = OutputCommitter("memory://tvm-doc-out/run")
>>> c.setup_job()
>>> _ = write_output(c, 0, 0, ["a", "b"], format="text")
>>> c.commit_task(0, 0)
True
>>> [u.rsplit("/", 1)[-1] for u in c.commit_job()]
['part-00000.txt']
>>> import fsspec; fsspec.filesystem("memory").cat("/tvm-doc-out/run/part-00000.txt")
b'a\\nb\\n'

Text, JSON lines, Parquet and ``.npy`` writers: :func:`write_output`.
"""

from __future__ import annotations

import json
import types
from typing import Any, Callable, Iterable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from .fsio import exists, join, to_fs
from .index import is_plain_name

__all__ = ["OutputCommitter", "write_output", "register_writer", "output_writers"]

TEMPORARY, SUCCESS, CLAIMS = "_temporary", "_SUCCESS", "_claims"


def _label(value: int | str, what: str) -> str:
    text = f"{value:05d}" if isinstance(value, int) else str(value)
    if not is_plain_name(text):
        raise ValueError(f"{what} {value!r} must be an int or a plain name")
    return text


class OutputCommitter:
    """Two-phase commit of task outputs under ``out_url`` (see the module docstring)."""

    def __init__(self, out_url: str, *, storage_options: dict | None = None):
        self.out_url = out_url.rstrip("/")
        self.storage_options = storage_options
        self.fs, self.path = to_fs(self.out_url, storage_options)
        self.path = self.path.rstrip("/")
        self.temp_path = f"{self.path}/{TEMPORARY}"

    def __repr__(self) -> str:
        return f"OutputCommitter({self.out_url!r})"

    # -- paths -------------------------------------------------------------------------------
    def attempt_url(self, task_id: int | str, attempt: int | str) -> str:
        """The folder an attempt writes into: ``<out>/_temporary/attempt_<task>_<attempt>``."""
        return join(self.out_url, TEMPORARY, self._attempt_name(task_id, attempt))

    def _attempt_name(self, task_id, attempt) -> str:
        return f"attempt_{_label(task_id, 'task_id')}_{_label(attempt, 'attempt')}"

    def _claim_path(self, task_id) -> str:
        return f"{self.temp_path}/{CLAIMS}/task_{_label(task_id, 'task_id')}"

    # -- job ---------------------------------------------------------------------------------
    def setup_job(self, overwrite: bool = False) -> None:
        """Prepare ``<out>``: refuse (``FileExistsError``) if a committed output is there,
        unless ``overwrite`` (then it is deleted); remove debris of earlier dead runs."""
        fs = self.fs
        if exists(fs, f"{self.path}/{SUCCESS}"):
            if not overwrite:
                raise FileExistsError(f"output already committed: {self.out_url}")
            fs.rm(self.path, recursive=True)
        self._remove(self.temp_path, recursive=True)
        fs.makedirs(f"{self.temp_path}/{CLAIMS}", exist_ok=True)

    def abort_job(self) -> None:
        """Discard every attempt (``_temporary``); published files are left alone."""
        self._remove(self.temp_path, recursive=True)

    def commit_job(self) -> list[str]:
        """Publish the committed attempts' files, write ``_SUCCESS``, remove ``_temporary``.

        Returns the URLs of the published files. Two tasks writing the same file name is a
        ``FileExistsError`` raised before anything moves. Safe to re-run after a crash.
        """
        fs = self.fs
        fs.invalidate_cache(self.temp_path)
        moves: dict[str, str] = {}
        claims = fs.glob(f"{self.temp_path}/{CLAIMS}/task_*")
        for claim in sorted(claims):
            attempt_dir = f"{self.temp_path}/{self._read_claim(claim)}"
            for src in sorted(fs.find(attempt_dir)):
                rel = src[len(attempt_dir) + 1 :]
                dest = f"{self.path}/{rel}"
                if dest in moves.values():
                    raise FileExistsError(f"two tasks wrote {rel!r}: {join(self.out_url, rel)}")
                moves[src] = dest
        for src, dest in moves.items():
            fs.mv(src, dest)
        with fs.open(f"{self.path}/{SUCCESS}", "wb") as f:
            f.write(json.dumps({"files": sorted(p.rsplit("/", 1)[-1] for p in moves.values())
                                }).encode())
        self._remove(self.temp_path, recursive=True)
        return [join(self.out_url, d[len(self.path) + 1 :]) for d in moves.values()]

    # -- tasks -------------------------------------------------------------------------------
    def setup_task(self, task_id: int | str, attempt: int | str) -> str:
        """Create (emptied) the attempt folder and return its URL."""
        path = f"{self.temp_path}/{self._attempt_name(task_id, attempt)}"
        self._remove(path, recursive=True)
        self.fs.makedirs(path, exist_ok=True)
        return self.attempt_url(task_id, attempt)

    def commit_task(self, task_id: int | str, attempt: int | str) -> bool:
        """Make ``attempt`` the one committed attempt of ``task_id``.

        Returns ``True`` if it won (also when it had already won), ``False`` if another attempt
        of the task committed first — this attempt's files are then deleted. The other
        attempts of the task (dead or duplicate) are deleted when it wins.
        """
        fs, name = self.fs, self._attempt_name(task_id, attempt)
        claim = self._claim_path(task_id)
        fs.makedirs(claim.rsplit("/", 1)[0], exist_ok=True)
        try:
            with fs.open(claim, "xb") as f:
                f.write(name.encode())
            won = True
        except FileExistsError:
            won = self._read_claim(claim) == name
        except (NotImplementedError, ValueError, TypeError):  # no exclusive create here
            won = not exists(fs, claim) or self._read_claim(claim) == name
            if won:
                with fs.open(claim, "wb") as f:
                    f.write(name.encode())
        mine = f"{self.temp_path}/{name}"
        if not won:
            self._remove(mine, recursive=True)
            return False
        for other in fs.glob(f"{self.temp_path}/attempt_{_label(task_id, 'task_id')}_*"):
            if other.rstrip("/") != mine:
                self._remove(other, recursive=True)
        return True

    def abort_task(self, task_id: int | str, attempt: int | str) -> None:
        """Delete one attempt's files (its claim, if it won, stays)."""
        self._remove(f"{self.temp_path}/{self._attempt_name(task_id, attempt)}", recursive=True)

    # -- helpers -----------------------------------------------------------------------------
    def _read_claim(self, claim: str) -> str:
        with self.fs.open(claim, "rb") as f:
            name = f.read().decode()
        if not is_plain_name(name) or not name.startswith("attempt_"):
            raise ValueError(f"bad claim file: {self.fs.unstrip_protocol(claim)}")
        return name

    def _remove(self, path: str, recursive: bool = False) -> None:
        try:
            if exists(self.fs, path):
                self.fs.rm(path, recursive=recursive)
        except FileNotFoundError:
            pass


# -- writers -----------------------------------------------------------------------------------
def _batches(data: Any, single: Callable[[Any], bool]) -> Iterable:
    """``data`` as an iterable of batches (a single batch is wrapped in a list)."""
    return [data] if single(data) else data


def _one_text_batch(d: Any) -> bool:
    return isinstance(d, (pa.Array, pa.ChunkedArray, np.ndarray)) or (
        isinstance(d, list) and (not d or isinstance(d[0], (str, bytes))))


def _one_table(d: Any) -> bool:
    return isinstance(d, (pa.Table, pa.RecordBatch, dict)) or (
        isinstance(d, list) and (not d or isinstance(d[0], dict)))


def _write_text(f, data) -> None:
    for batch in _batches(data, _one_text_batch):
        arr = batch if isinstance(batch, (pa.Array, pa.ChunkedArray)) else pa.array(batch)
        if arr.null_count:
            raise ValueError("text output cannot hold nulls")
        if isinstance(arr, pa.ChunkedArray):
            arr = arr.combine_chunks()
        joined = pc.binary_join_element_wise(arr, pa.scalar("\n", arr.type), "")
        offsets = np.frombuffer(joined.buffers()[1], np.int64 if pa.types.is_large_string(
            joined.type) or pa.types.is_large_binary(joined.type) else np.int32)
        lo, hi = offsets[joined.offset], offsets[joined.offset + len(joined)]
        f.write(memoryview(joined.buffers()[2])[lo:hi])


def _as_table(batch) -> pa.Table:
    if isinstance(batch, pa.Table):
        return batch
    if isinstance(batch, pa.RecordBatch):
        return pa.Table.from_batches([batch])
    if isinstance(batch, dict):
        return pa.table(batch)
    return pa.Table.from_pylist(list(batch))


def _write_jsonl(f, data) -> None:
    # pyarrow has no JSON writer: rows go through json.dumps (outputs are small next to inputs)
    for batch in _batches(data, _one_table):
        rows = batch if isinstance(batch, list) else _as_table(batch).to_pylist()
        f.write("".join(json.dumps(r, separators=(",", ":")) + "\n" for r in rows).encode())


def _write_parquet(f, data) -> None:
    writer = None
    try:
        for batch in _batches(data, _one_table):
            table = _as_table(batch)
            if writer is None:
                writer = pq.ParquetWriter(f, table.schema)
            writer.write_table(table)
    finally:
        if writer is not None:
            writer.close()


def _write_npy(f, data) -> None:
    arr = data if isinstance(data, np.ndarray) else np.concatenate(list(data))
    if arr.dtype.hasobject:
        raise TypeError("npy output refuses object arrays (they would need pickle)")
    np.lib.format.write_array(f, arr, allow_pickle=False)


_WRITERS: dict[str, tuple[str, Callable]] = {
    "text": ("txt", _write_text), "jsonl": ("jsonl", _write_jsonl),
    "parquet": ("parquet", _write_parquet), "npy": ("npy", _write_npy)}
output_writers = types.MappingProxyType(_WRITERS)


def register_writer(format: str, extension: str, write: Callable[[Any, Any], None],
                    clobber: bool = False) -> None:
    """Add an output format: ``write(binary_file, data)``; refuses to replace one silently."""
    if format in _WRITERS and not clobber:
        raise ValueError(f"output format {format!r} is already registered (clobber=True)")
    _WRITERS[format] = (extension, write)


def write_output(committer: OutputCommitter, task_id: int | str, attempt: int | str, data: Any,
                 format: str = "text", name: str | None = None) -> str:
    """Write ``data`` as one file of a task attempt; return the file's (attempt) URL.

    ``data`` is one batch or an iterable of batches: ``text`` — Arrow/NumPy arrays or lists of
    ``str``; ``jsonl`` — Arrow tables/record batches or lists of dicts; ``parquet`` — Arrow
    tables/record batches or dicts of columns; ``npy`` — NumPy arrays (concatenated on axis 0).
    ``name`` defaults to ``part-<task>.<ext>``. Nothing is visible until ``commit_job``.
    """
    try:
        ext, write = _WRITERS[format]
    except KeyError:
        raise ValueError(f"unknown output format {format!r}; known: {sorted(_WRITERS)}") from None
    name = name or f"part-{_label(task_id, 'task_id')}.{ext}"
    if not is_plain_name(name):
        raise ValueError(f"output file name {name!r} must be a plain name")
    folder = f"{committer.temp_path}/{committer._attempt_name(task_id, attempt)}"
    committer.fs.makedirs(folder, exist_ok=True)
    with committer.fs.open(f"{folder}/{name}", "wb") as f:
        write(f, data)
    return join(committer.attempt_url(task_id, attempt), name)
