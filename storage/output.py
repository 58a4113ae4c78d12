"""Committed outputs in the Hadoop style: nothing is visible until the job commits.

Layout under the output URL ``<out>``::

    <out>/_temporary/_job                                 the owner's claim (setup_job)
    <out>/_temporary/attempt_<task>_<attempt>/part-...   what one task attempt writes
    <out>/_temporary/_claims/task_<task>                  the attempt that won its task
    <out>/_temporary/_manifest                            commit_job's plan, before any move
    <out>/part-...                                        published by commit_job
    <out>/_SUCCESS                                        written last: {"files": [...]}

Hadoop's promises: exactly one job owns an output at a time. :meth:`OutputCommitter.setup_job`
claims it with an exclusive create of ``_temporary/_job`` (``open(..., "xb")``: ``O_EXCL`` on
local files, a conditional put on object stores; claims made in one process are also serialised
by a lock, since ``memory://``'s exclusive create is check-then-set). A second job finds the
claim and fails at once with :class:`tensorvm.errors.AlreadyExistsError` naming the URL and
the owner, touching nothing; a claim whose owner is gone (its process exited, or in this
process its job ended or its thread set the output up again) is debris and is taken over.
The claim is released on every exit path (``commit_job``, ``abort_job``, a failed
``setup_job``; a ``commit_job`` that dies keeps only its plan for a re-run). Owners on another
host cannot be checked: delete the claim file by hand if that job is known dead. Then
``setup_job`` refuses an output folder that holds
anything but ``_temporary`` debris (``FileExistsError``, Hadoop's
``FileAlreadyExistsException``) unless ``overwrite=True``, which clears it first. A task attempt
writes under its attempt folder; :meth:`~OutputCommitter.commit_task` lets exactly one attempt
per task win (an exclusive create of its claim file where the filesystem supports it; otherwise
the caller — the job driver — must serialise commits, as Hadoop's AM does) and deletes the
other attempts of that task; a loser, or a late attempt of a job already committed, gets
``False`` and its files are deleted. :meth:`~OutputCommitter.commit_job` records its plan,
moves the winners' files into place, writes ``_SUCCESS`` listing them and removes
``_temporary``; re-run after a crash, it finishes the recorded plan. Readers
(:func:`tensorvm.storage.splits` on the folder) read exactly the files ``_SUCCESS`` lists and
refuse a folder with ``_temporary`` but no ``_SUCCESS`` (:func:`committed_files`); a folder with
neither is plain input files.

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

import errno
import json
import os
import socket
import threading
import time
import types
import uuid
from typing import Any, Callable, Iterable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from .errors import AlreadyExistsError, DataLossError
from .fsio import atomic_write_bytes, exists, join, to_fs
from .index import is_plain_name

__all__ = ["OutputCommitter", "write_output", "register_writer", "output_writers",
           "committed_files"]

TEMPORARY, SUCCESS, CLAIMS = "_temporary", "_SUCCESS", "_claims"
JOB, MANIFEST = "_job", "_manifest"

# The claims this process holds: job id -> the thread that set the output up. An explicit
# registry: a claim of this process is live while its id is here and its thread runs.
_HELD: dict[str, threading.Thread] = {}
_CLAIM_LOCK = threading.Lock()  # one claim at a time in this process (memory:// needs it)
_HOST = socket.gethostname()


def _relative_names(doc: object) -> list[str] | None:
    """The ``files`` of a ``_SUCCESS`` document, each a relative path of plain names."""
    files = doc.get("files") if isinstance(doc, dict) else None
    if not isinstance(files, list) or not all(
            isinstance(f, str) and f and all(is_plain_name(p) for p in f.split("/"))
            for f in files):
        return None
    return files


def committed_files(fs, path: str, url: str) -> list[str] | None:
    """The files a reader of output folder ``path`` must read, or ``None`` if it is no output.

    With a ``_SUCCESS`` listing files (ours): exactly those (:class:`DataLossError` naming a
    missing one). With an empty or foreign ``_SUCCESS`` (Hadoop, Spark): ``None`` — list the
    folder. Without ``_SUCCESS`` but with ``_temporary``: an output whose job is running or
    never committed — :class:`DataLossError` naming the folder. Without either: ``None``, a
    folder of plain input files (``part-*.bin`` files copied there are input, not an output).
    """
    root = path.rstrip("/")
    fs.invalidate_cache(root)
    success = f"{root}/{SUCCESS}"
    if exists(fs, success):
        with fs.open(success, "rb") as f:
            raw = f.read(1 << 26)
        try:
            files = _relative_names(json.loads(raw)) if raw.strip() else None
        except (UnicodeDecodeError, ValueError):
            files = None
        if files is None:
            return None
        for rel in files:
            if not exists(fs, f"{root}/{rel}"):
                raise DataLossError(f"{SUCCESS} lists {rel!r}, which is missing", url)
        return [f"{root}/{rel}" for rel in files]
    names = [p.rstrip("/").rsplit("/", 1)[-1] for p in fs.ls(root, detail=False)]
    if TEMPORARY in names:  # (part files alone, no _temporary: a folder of input files)
        raise DataLossError(f"output folder has {TEMPORARY} but no {SUCCESS}: its job never "
                            "committed (still running, or killed before or during "
                            "commit_job?)", url)
    return None


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
        self.job_id: str | None = None  # set by setup_job's claim
        self._held = False

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
        """Claim ``<out>`` for this job and prepare it.

        Another live job's claim: :class:`~tensorvm.errors.AlreadyExistsError`, nothing
        touched. An existing output — anything there but ``_temporary`` — is refused
        (``FileExistsError``) unless ``overwrite``, which deletes it first. Called again on the
        same committer (a retried step), it keeps the claim and clears the attempts."""
        if not overwrite:
            self._refuse_existing()  # the common refusal touches nothing, not even a claim
        with _CLAIM_LOCK:
            self._take_claim()
        try:
            found = self._refuse_existing(overwrite)
            for p in found:
                self._remove(p, recursive=True)
            self._clear_temporary()
            self.fs.makedirs(f"{self.temp_path}/{CLAIMS}", exist_ok=True)
        except BaseException:
            self._release(clear=True)  # (a Ctrl-C mid-set-up left _claims behind)
            raise

    def recover_job(self) -> None:
        """Claim ``<out>`` for a job that resumes a dead one (Hadoop's job recovery): a live
        job's claim is :class:`~tensorvm.errors.AlreadyExistsError`, a dead owner's claim is
        taken over — and, unlike :meth:`setup_job`, the task attempts and claims under
        ``_temporary`` are kept, for the resumed job to adopt (``commit_task``) or discard.
        An output already published (``_SUCCESS``) is refused (``FileExistsError``)."""
        self.fs.invalidate_cache(self.path)
        if exists(self.fs, f"{self.path}/{SUCCESS}"):
            raise FileExistsError(f"output folder already exists: {self.out_url} (its job "
                                  "committed: nothing to resume)")
        with _CLAIM_LOCK:
            self._take_claim()
        try:
            self.fs.makedirs(f"{self.temp_path}/{CLAIMS}", exist_ok=True)
        except BaseException:
            self._release()
            raise

    def abort_job(self) -> None:
        """Discard every attempt (``_temporary``) and release the output; published files are
        left alone. A committer whose claim another job took over deletes nothing."""
        if self.job_id is not None and not self._held:
            return  # released already (a second abort, or after commit_job)
        self._release(clear=True)

    def remove_debris(self) -> None:
        """Remove ``_temporary`` unless a job claims the output now. For after an aborted
        job's workers are gone (its cluster closed): a task killed mid-write, or one that
        wrote after :meth:`abort_job`, left files that no committer owns. A claim file being
        written (unreadable) counts as a claim."""
        claim = f"{self.temp_path}/{JOB}"
        self.fs.invalidate_cache(self.temp_path)
        if exists(self.fs, claim):
            owner = self._read_json(claim)
            if owner is None or owner["job"] in _HELD or self._alive(owner):
                return
        self._remove(self.temp_path, recursive=True)
        self.fs.invalidate_cache(self.path)

    def _refuse_existing(self, overwrite: bool = False) -> list[str]:
        """The entries of ``<out>`` other than ``_temporary``; ``FileExistsError`` if there
        are any and not ``overwrite``."""
        self.fs.invalidate_cache(self.path)
        try:
            found = [p for p in self.fs.ls(self.path, detail=False)
                     if p.rstrip("/").rsplit("/", 1)[-1] != TEMPORARY]
        except FileNotFoundError:
            found = []
        if found and not overwrite:
            raise FileExistsError(f"output folder already exists: {self.out_url} (pass "
                                  "overwrite=True to replace it)")
        return found

    # -- the owner's claim -------------------------------------------------------------------
    def _take_claim(self) -> None:
        """Create ``_temporary/_job`` exclusively (under ``_CLAIM_LOCK``)."""
        fs, claim = self.fs, f"{self.temp_path}/{JOB}"
        if self.job_id is not None and self._held:
            if self._owner() == self.job_id:
                return  # a retry of this job's own set-up
            _HELD.pop(self.job_id, None)  # taken over: this committer claims anew
        job_id = uuid.uuid4().hex
        body = json.dumps({"job": job_id, "host": _HOST, "pid": os.getpid(),
                           "started": time.time()}).encode()
        for _ in range(5):
            try:
                fs.makedirs(self.temp_path, exist_ok=True)
                with fs.open(claim, "xb") as f:
                    f.write(body)
            except FileExistsError:
                owner = self._read_json(claim)
                if self._alive(owner):
                    raise AlreadyExistsError(self._owned_message(owner)) from None
                self._remove(claim)  # a dead job's claim: debris
                continue
            except FileNotFoundError:  # the previous owner removed _temporary meanwhile
                continue
            except (NotImplementedError, ValueError, TypeError):  # no exclusive create here:
                if self._alive(self._read_json(claim)):  # best effort (one process at a time)
                    raise AlreadyExistsError(self._owned_message(self._read_json(claim)))
                fs.pipe(claim, body)
            self.job_id, self._held = job_id, True
            _HELD[job_id] = threading.current_thread()
            return
        raise AlreadyExistsError(self._owned_message(self._read_json(claim)))

    def _owned_message(self, owner: dict | None) -> str:
        claim = join(self.out_url, TEMPORARY, JOB)
        if not owner:
            return (f"output {self.out_url} is owned by another job (its claim {claim} is "
                    "being written or unreadable): two jobs cannot write one output; choose "
                    "another output, or delete the claim if no job is writing there")
        since = time.strftime("%H:%M:%S", time.localtime(owner.get("started") or 0))
        where = f"pid {owner.get('pid')} on {owner.get('host')}, since {since}"
        text = (f"output {self.out_url} is owned by another job ({where}): two jobs cannot "
                "write one output; wait for it to finish or choose another output")
        if owner.get("host") != _HOST:
            text += f" (if that job is dead, delete {claim})"
        return text

    def _read_json(self, path: str) -> dict | None:
        try:
            with self.fs.open(path, "rb") as f:
                doc = json.loads(f.read(1 << 16))
        except (FileNotFoundError, UnicodeDecodeError, ValueError):
            return None
        return doc if isinstance(doc, dict) and isinstance(doc.get("job"), str) else None

    def _owner(self) -> str | None:
        """The job id in the claim file now (None: no claim, or an unreadable one)."""
        doc = self._read_json(f"{self.temp_path}/{JOB}")
        return doc["job"] if doc else None

    @staticmethod
    def _alive(owner: dict | None) -> bool:
        """Whether the claim ``owner`` belongs to a job that may still run. Unknown (no or a
        partial claim, another host): yes. This process: its job has not ended and its thread
        runs — a thread that sets the output up again has abandoned its earlier job there.
        Another process here: it runs and is older than the claim (not a reused pid)."""
        if owner is None or owner.get("host") != _HOST:
            return True
        pid, started = owner.get("pid"), owner.get("started")
        if not isinstance(pid, int) or not isinstance(started, (int, float)):
            return True
        if pid == os.getpid():
            thread = _HELD.get(owner["job"])
            return thread is not None and thread.is_alive() and \
                thread is not threading.current_thread()
        try:
            import psutil
            return psutil.Process(pid).create_time() <= started + 1.0
        except ImportError:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return False
            except PermissionError:
                pass
            return True
        except psutil.Error:  # NoSuchProcess, ZombieProcess, AccessDenied
            return False

    def _release(self, clear: bool = False) -> None:
        """End this committer's ownership: with ``clear``, delete ``_temporary`` (the attempts
        first, the claim last, then the empty folder — a job that claims the output meanwhile
        keeps its claim); else only the claim (a dead ``commit_job`` keeps its plan). A claim
        another job took over is left alone."""
        if self.job_id is None:  # never claimed (a task-side or recovering committer):
            owner = self._read_json(f"{self.temp_path}/{JOB}")
            if clear and not (owner is not None and self._alive(owner)):  # not a live job's
                self._remove(self.temp_path, recursive=True)
            return
        try:
            if self._owner() == self.job_id:
                if clear:
                    self._clear_temporary()
                self._remove(f"{self.temp_path}/{JOB}")
                self._rmdir(self.temp_path)
        finally:
            self._held = False
            _HELD.pop(self.job_id, None)

    def _clear_temporary(self) -> None:
        """Delete everything under ``_temporary`` but the claim."""
        self.fs.invalidate_cache(self.temp_path)
        try:
            children = self.fs.ls(self.temp_path, detail=False)
        except FileNotFoundError:
            return
        for p in children:
            if p.rstrip("/").rsplit("/", 1)[-1] != JOB:
                self._remove(p, recursive=True)

    def _rmdir(self, path: str) -> None:
        """Remove the folder ``path`` if it is empty (a store with no folders has none)."""
        try:
            self.fs.rmdir(path)
        except FileNotFoundError:
            pass
        except OSError as e:  # not empty: someone else's now (a new owner's claim)
            if e.errno not in (errno.ENOTEMPTY, errno.EEXIST, None):
                raise
        self.fs.invalidate_cache(self.path)

    def _plan(self) -> dict[str, str]:
        """``{attempt file: published file}`` — recorded in ``_manifest`` before any move."""
        fs = self.fs
        manifest = f"{self.temp_path}/{MANIFEST}"
        if exists(fs, manifest):
            with fs.open(manifest, "rb") as f:
                return json.loads(f.read())
        moves: dict[str, str] = {}
        for claim in sorted(fs.glob(f"{self.temp_path}/{CLAIMS}/task_*")):
            attempt_dir = f"{self.temp_path}/{self._read_claim(claim)}"
            for src in sorted(fs.find(attempt_dir)):
                rel = src[len(attempt_dir) + 1 :]
                dest = f"{self.path}/{rel}"
                if dest in moves.values():
                    raise FileExistsError(f"two tasks wrote {rel!r}: {join(self.out_url, rel)}")
                moves[src] = dest
        fs.pipe(manifest, json.dumps(moves).encode())
        return moves

    def commit_job(self) -> list[str]:
        """Publish the committed attempts' files, write ``_SUCCESS``, remove ``_temporary``.

        Returns the URLs of the published files. Two tasks writing the same file name is a
        ``FileExistsError`` raised before anything moves. Re-run after a crash, it finishes the
        plan the first run recorded.
        """
        fs = self.fs
        fs.invalidate_cache(self.temp_path)
        if self.job_id is not None:  # the owner commits: is the output still its own?
            owner = self._read_json(f"{self.temp_path}/{JOB}")
            if not self._held or owner is None or owner["job"] != self.job_id:
                self._held = False
                _HELD.pop(self.job_id, None)
                raise AlreadyExistsError(self._owned_message(owner) if owner else
                                         f"output {self.out_url} is no longer owned by this "
                                         "job (released, or its claim was removed)")
        done = False
        try:
            moves = self._plan()
            for src, dest in moves.items():
                if exists(fs, src):
                    fs.mv(src, dest)
                elif not exists(fs, dest):
                    raise DataLossError("committed task output vanished before commit_job",
                                        fs.unstrip_protocol(src))
            rels = sorted(d[len(self.path) + 1 :] for d in moves.values())
            atomic_write_bytes(fs, f"{self.path}/{SUCCESS}",
                               json.dumps({"files": rels}).encode())
            done = True
        finally:  # committed: _temporary goes; a commit that died keeps its plan
            if self.job_id is not None:
                self._release(clear=done)
            elif done:
                self._clear_unowned()
        return [join(self.out_url, d[len(self.path) + 1 :]) for d in moves.values()]

    def _clear_unowned(self) -> None:
        """A recovering committer (no claim of its own) finished a commit: ``_temporary`` is
        debris unless a job claimed the output meanwhile (then only the old plan goes)."""
        owner = self._read_json(f"{self.temp_path}/{JOB}")
        if owner is not None and self._alive(owner):
            self._remove(f"{self.temp_path}/{MANIFEST}")
            return
        self._remove(self.temp_path, recursive=True)

    # -- tasks -------------------------------------------------------------------------------
    def setup_task(self, task_id: int | str, attempt: int | str) -> str:
        """Create (emptied) the attempt folder and return its URL."""
        path = f"{self.temp_path}/{self._attempt_name(task_id, attempt)}"
        self._remove(path, recursive=True)
        self.fs.makedirs(path, exist_ok=True)
        return self.attempt_url(task_id, attempt)

    def _job_open(self) -> bool:
        """``setup_job`` ran and ``commit_job`` has not finished (for the committer that set
        the job up: and the output is still its own)."""
        self.fs.invalidate_cache(self.path)  # a listing cached earlier must not answer this
        if self.job_id is not None:
            if not self._held or self._owner() != self.job_id:
                return False
        elif not exists(self.fs, f"{self.temp_path}/{JOB}"):
            return False
        return not exists(self.fs, f"{self.path}/{SUCCESS}")

    def _late(self, mine: str, claim: str | None = None, name: str = "") -> bool:
        """A late attempt: delete its files (and its task claim); with no owner left, the
        emptied ``_temporary`` folders go too — never a new owner's claim."""
        self._remove(mine, recursive=True)
        if claim is not None:
            try:
                with self.fs.open(claim, "rb") as f:
                    if f.read() == name.encode():
                        self._remove(claim)
            except FileNotFoundError:
                pass
        if not exists(self.fs, f"{self.temp_path}/{JOB}"):
            self._rmdir(f"{self.temp_path}/{CLAIMS}")
            self._rmdir(self.temp_path)
        return False

    def _claim(self, claim: str, name: str) -> bool:
        fs = self.fs
        try:
            with fs.open(claim, "xb") as f:
                f.write(name.encode())
            return True
        except FileExistsError:
            # The winner creates the file, then writes its name: an empty or partial claim is
            # another attempt's (this attempt's own commit wrote it whole before returning).
            try:
                with fs.open(claim, "rb") as f:
                    return f.read() == name.encode()
            except FileNotFoundError:
                return False
        except FileNotFoundError:  # _temporary is gone: the job was committed or aborted
            return False
        except (NotImplementedError, ValueError, TypeError):  # no exclusive create here
            if exists(fs, claim):
                with fs.open(claim, "rb") as f:
                    return f.read() == name.encode()
            with fs.open(claim, "wb") as f:
                f.write(name.encode())
            return True

    def commit_task(self, task_id: int | str, attempt: int | str) -> bool:
        """Make ``attempt`` the one committed attempt of ``task_id``.

        Returns ``True`` if it won (also when it had already won), ``False`` if another attempt
        of the task committed first or the job is no longer open (committed, aborted) — this
        attempt's files are then deleted. The other attempts of the task (dead or duplicate)
        are deleted when it wins.
        """
        name = self._attempt_name(task_id, attempt)
        mine = f"{self.temp_path}/{name}"
        if not self._job_open():
            return self._late(mine)
        claim = self._claim_path(task_id)
        if not self._claim(claim, name):
            self._remove(mine, recursive=True)
            return False
        if not self._job_open():  # commit_job finished meanwhile: the claim is debris too
            return self._late(mine, claim, name)
        for other in self.fs.glob(f"{self.temp_path}/attempt_{_label(task_id, 'task_id')}_*"):
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
        empty = b"" if pa.types.is_binary(arr.type) or pa.types.is_large_binary(arr.type) \
            else ""
        joined = pc.binary_join_element_wise(arr, pa.scalar("\n", arr.type),
                                             pa.scalar(empty, arr.type))
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
    fs = committer.fs
    fs.invalidate_cache(committer.temp_path)
    if not exists(fs, f"{committer.temp_path}/{JOB}"):
        # No owner: the job was aborted (Ctrl-C) or committed while this task still ran on
        # its worker. Its file would be ``_temporary`` debris that nothing removes: it goes
        # now, with the folders it emptied (an owner that claims meanwhile keeps its own).
        committer._remove(folder, recursive=True)
        committer._rmdir(committer.temp_path)
    return join(committer.attempt_url(task_id, attempt), name)
