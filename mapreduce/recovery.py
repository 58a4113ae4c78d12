"""Driver recovery (Hadoop's job recovery, FileOutputCommitter v1): a job re-run with
``resume=True`` (``tensorvm run ... --resume``) after its driver died adopts the reducers whose
output was already written whole and runs only the rest.

What the first run leaves under the output's ``_temporary`` (besides the committer's own
layout, :mod:`tensorvm.storage.output`)::

    _temporary/_mr/plan.json              the job's plan: reducer count, range boundaries and
                                          the input's fingerprint (written before any task runs)
    _temporary/_mr/done-r00003-<attempt>  reducer 3's attempt wrote its file whole: its
                                          counters (written by the reducer, after the file)

A resumed job takes the output over (:meth:`OutputCommitter.recover_job`: a dead owner's
claim, keeping the attempts), checks that the plan is this job's (same inputs, same reducer
count if one is given), commits each done reducer's attempt (``commit_task``) and builds only
the other reducers, with the plan's boundaries. Anything else — no plan, another input — runs
the job from the start (the leftovers are cleared as ``setup_job`` always does). The map
tasks run again (their outputs lived in the dead driver's step); a reduce function must be
deterministic, as Hadoop's recovery assumes.

>>> decode_boundaries(encode_boundaries((b"\\x00a", 3, "x")))
(b'\\x00a', 3, 'x')
"""
from __future__ import annotations

import contextlib
import contextvars
import hashlib
import json
import logging

import numpy as np

logger = logging.getLogger("tensorvm")

PLAN_DIR = "_mr"
_RESUME: contextvars.ContextVar = contextvars.ContextVar("tensorvm_mr_resume", default=False)

__all__ = ["resuming", "resume_requested", "fingerprint", "write_plan", "read_plan", "Keeper",
           "TaskDone", "done_reducers", "encode_boundaries", "decode_boundaries"]


@contextlib.contextmanager
def resuming(flag: bool = True):
    """Within this block, jobs run with ``resume=flag`` unless told otherwise (the CLI's
    ``--resume``: a job file's ``job.run()`` calls resume too)."""
    token = _RESUME.set(bool(flag))
    try:
        yield
    finally:
        _RESUME.reset(token)


def resume_requested() -> bool:
    return bool(_RESUME.get())


def fingerprint(job, splits: list) -> str:
    """The job's inputs as a hash: every split's URL and byte range, the job's name and
    output format (a resumed run must read exactly what the first run read)."""
    h = hashlib.sha256()
    h.update(json.dumps([job.name, job.output.format if job.output else None]).encode())
    for i, s in splits:
        h.update(json.dumps([i, s.to_dict()], sort_keys=True, default=str).encode())
    return h.hexdigest()


def encode_boundaries(bounds) -> list:
    out = []
    for b in bounds:
        if isinstance(b, (bytes, np.bytes_)):
            out.append({"b": bytes(b).hex()})
        elif isinstance(b, np.generic):
            out.append(b.item())
        else:
            out.append(b)
    return out


def decode_boundaries(items) -> tuple:
    return tuple(bytes.fromhex(b["b"]) if isinstance(b, dict) else b for b in items)


def _dir(committer) -> str:
    return f"{committer.temp_path}/{PLAN_DIR}"


def write_plan(committer, fp: str, num_reducers: int, boundaries) -> None:
    """Record the job's plan under its (claimed) output's ``_temporary``."""
    from tensorvm.storage.fsio import atomic_write_bytes
    fs = committer.fs
    fs.makedirs(_dir(committer), exist_ok=True)
    atomic_write_bytes(fs, f"{_dir(committer)}/plan.json", json.dumps({
        "inputs": fp, "num_reducers": int(num_reducers),
        "boundaries": encode_boundaries(boundaries)}).encode())


def read_plan(committer) -> dict | None:
    fs = committer.fs
    try:
        with fs.open(f"{_dir(committer)}/plan.json", "rb") as f:
            doc = json.loads(f.read(1 << 24))
    except (FileNotFoundError, ValueError, UnicodeDecodeError):
        return None
    if not isinstance(doc, dict) or not isinstance(doc.get("num_reducers"), int):
        return None
    doc["boundaries"] = decode_boundaries(doc.get("boundaries") or ())
    return doc


class TaskDone:
    """Run on the reducer's worker after its file is written (a ``py_func``): records that
    ``attempt`` of reducer ``task`` wrote its output whole, with its counters, so a resumed
    job can adopt it. Returns the counters unchanged."""

    def __init__(self, out_url: str, task: int, attempt: str):
        self.out_url, self.task, self.attempt = out_url, int(task), str(attempt)
        self.__name__ = f"mr_done_r{self.task}"

    def __call__(self, counts):
        from tensorvm import storage
        c = storage.OutputCommitter(self.out_url)
        fs = c.fs
        if fs.exists(f"{c.temp_path}/_job"):  # (an aborted job's writer removed its file)
            try:
                fs.pipe(f"{_dir(c)}/done-r{self.task:05d}-{self.attempt}", json.dumps(
                    [int(x) for x in np.asarray(counts).ravel()]).encode())
            except FileNotFoundError:  # _temporary went meanwhile (aborted, committed)
                pass
        return np.asarray(counts, np.int64)


def done_reducers(committer, num_reducers: int) -> dict:
    """``{reducer: (attempt, counters)}`` of the reducers whose attempt wrote its output whole
    (its done marker and its attempt folder with files are there)."""
    fs = committer.fs
    fs.invalidate_cache(committer.temp_path)
    out: dict = {}
    for path in sorted(fs.glob(f"{_dir(committer)}/done-r*-*")):
        name = path.rstrip("/").rsplit("/", 1)[-1]
        _, r, attempt = name.split("-", 2)
        task = int(r[1:])
        if task >= num_reducers or task in out:
            continue
        try:
            counts = json.loads(fs.cat(path))
        except (ValueError, UnicodeDecodeError, FileNotFoundError):
            continue  # a marker cut short by the kill: run the reducer again
        folder = f"{committer.temp_path}/{committer._attempt_name(task, attempt)}"
        if fs.exists(folder) and fs.find(folder):
            out[task] = (attempt, counts)
    return out


class Keeper:
    """After a Ctrl-C: the output's reducers that wrote their file whole stay, with the plan,
    for ``--resume``; everything else under ``_temporary`` goes (now, and again — as
    :func:`tensorvm.mapreduce.job.sweep_interrupted` calls :meth:`remove_debris` — once the
    job's workers are gone). The claim is released: a later run without ``resume`` clears
    what was kept, as it clears any debris."""

    def __init__(self, committer):
        self.committer = committer
        self.out_url = committer.out_url

    def done(self) -> dict:
        plan = read_plan(self.committer)
        return {} if plan is None else done_reducers(self.committer, plan["num_reducers"])

    def prune(self) -> int:
        """Remove all but the plan, the done markers and the done attempts (and a claim);
        returns how many reducers' outputs were kept."""
        c = self.committer
        done = self.done()
        keep = {PLAN_DIR, "_job"} | {c._attempt_name(r, a) for r, (a, _) in done.items()}
        c.fs.invalidate_cache(c.temp_path)
        try:
            children = c.fs.ls(c.temp_path, detail=False)
        except FileNotFoundError:
            return 0
        for p in children:
            if p.rstrip("/").rsplit("/", 1)[-1] not in keep:
                c._remove(p, recursive=True)
        return len(done)

    def release(self) -> int:
        """Prune, then release the output's claim (the attempts kept); returns the count
        kept."""
        kept = self.prune()
        self.committer._release(clear=False)
        return kept

    def remove_debris(self) -> None:
        """Prune again unless a job claims the output now."""
        c = self.committer
        claim = f"{c.temp_path}/_job"
        if c.fs.exists(claim):
            owner = c._read_json(claim)
            if owner is None or c._alive(owner):
                return
        self.prune()


def add_recovered(counters: dict, recovered: dict) -> None:
    """Count the recovered reducers' output records (their done markers' counters) and how
    many there were (``reducers_recovered``)."""
    if not recovered:
        return
    counters["reduce_output_records"] = counters.get("reduce_output_records", 0) + sum(
        int(c[0]) for c in recovered.values() if c)
    counters["reducers_recovered"] = len(recovered)


_INTERRUPTED: list = []  # committers of jobs interrupted (Ctrl-C) while their tasks ran


def interrupted(committer, name: str) -> None:
    """A job's driver is interrupted (Ctrl-C): the output's reducers that wrote their file
    whole stay for ``--resume`` (:class:`Keeper`), everything else under
    ``_temporary`` goes; with none finished, the job is aborted as any other. Either way its
    claim is released and ``sweep_interrupted`` looks again once the workers are gone."""
    keeper = Keeper(committer)
    kept = keeper.release() if committer._held and keeper.done() else 0
    if kept:
        logger.warning("mr job %s: interrupted; the output of its %d finished reducer(s) is "
                       "kept at %s: run it again with --resume (resume=True) to keep them",
                       name, kept, committer.out_url)
        sweeper = keeper
    else:
        committer.abort_job()  # (a no-op once released)
        sweeper = committer
    if not any(getattr(x, "out_url", None) == committer.out_url for x in _INTERRUPTED):
        _INTERRUPTED.append(sweeper)


def sweep_interrupted() -> None:
    """Remove the ``_temporary`` debris of outputs whose job was interrupted (Ctrl-C, SIGTERM)
    in this process. Call it once the job's workers are gone (its cluster closed): a reducer
    killed mid-write, or one that wrote after the abort, left files nothing else removes (a
    writer that finishes after the abort removes its own file). An output that another job
    claims meanwhile is left alone."""
    while _INTERRUPTED:
        committer = _INTERRUPTED.pop()
        try:
            committer.remove_debris()
        except Exception as exc:  # noqa: BLE001 - best effort, on the way out
            logger.warning("mr: could not remove %s/_temporary: %s", committer.out_url, exc)
