"""Job history: each tensorvm job's event log (JSON lines on fsspec storage), written by the
scheduler plugin while the job runs and read back by the dashboard, ``tensorvm history`` and
``tensorvm ui`` after its cluster is gone (Spark's event log and History Server).

Where logs go
-------------
The URL is, first found: the plugin's ``history=`` argument, the ``history`` field of a job's
``start`` message, the Dask config key ``tensorvm.history.url`` (``--conf
tensorvm.history.url=...``, ``DASK_TENSORVM__HISTORY__URL``), the environment variable
``TENSORVM_HISTORY``, else ``$XDG_DATA_HOME/tensorvm/history`` (``~/.local/share/tensorvm/
history``), made on first use. ``off`` (or ``none``, ``false``, empty) writes nothing.

The **scheduler** writes them: only it sees every task of every client (start, end, worker,
bytes) and every job message, and it outlives a client that dies. The URL is read where the
plugin runs: for the CLI's LocalCluster (the scheduler is in the CLI's process) that is the
user's machine and config; for a scheduler on another machine a ``file://`` URL is a path on
*that* machine: give a URL both sides reach (``s3://...``, a shared mount) to read logs
elsewhere. Writes happen on one background thread, never in the scheduler's event loop.

Format and atomicity
--------------------
``<url>/<job id>.jsonl`` (the id made file-safe), one JSON object a line::

    {"type": "header", "format": "tensorvm-event-log", "version": 1, "job": id, "time": t}
    {"type": "job", "time": t, "msg": {"op": "start"|"metrics"|"counters"|"finish", ...}}
    {"type": "task", "time": t, ...}      # tensorvm.scheduler_ext.events.task_record
    {"type": "move" | "rerun", "time": t, "msg": {...}}  # tasks run again (TOPIC_MOVES,
                                                         # the job's share of TOPIC_RERUNS)
    {"type": "snapshot", "time": t, "job": {...}}   # the registry's view of the job at its end
    {"type": "end", "time": t, "summary": {...}, "tasks": n, "tasks_dropped": k}

While the job runs the lines go, about once a second, to ``<id>.jsonl.inprogress``; when it
ends the last lines are added and the file is renamed to ``<id>.jsonl`` (a rename on a local
disk; a copy, which appears whole, on object stores), so a finished log is never torn. A log
still ``.inprogress`` (a running job, or a scheduler that died) reads as ``incomplete``: its
last line may be cut, and is skipped. Logs are JSON only, never unpickled; job arguments are
the registry's redacted form.

Bounds: per job, :data:`~tensorvm.scheduler_ext.events.MAX_TASKS` task events and
:data:`MAX_MESSAGES` job messages (the snapshot at the end holds the metric curves anyway); a
reader reads at most :data:`MAX_LOG_BYTES` of a log; :data:`MAX_LOGS` logs are kept (the
oldest finished ones are deleted when a job ends).
"""
from __future__ import annotations

import json
import logging
import os
import re
import threading
import time

from .events import MAX_TASKS, TaskLog, task_record
from .redaction import redact_args
from .registry import DETAIL_KEYS, JobRegistry

logger = logging.getLogger("tensorvm")

FORMAT, VERSION = "tensorvm-event-log", 1
SUFFIX, INPROGRESS = ".jsonl", ".jsonl.inprogress"
CONFIG_KEY, ENV_VAR = "tensorvm.history.url", "TENSORVM_HISTORY"
MAX_MESSAGES = 10_000  # job messages written per job (metrics every step add up)
MAX_LOG_BYTES = 64 << 20  # read of one log
MAX_LOGS = 1000  # logs kept under one URL
KEEP_FINISHED = 20  # finished jobs whose task events stay in memory (for their pages)
FLUSH_S = 1.0
_OFF = ("", "off", "none", "false", "no", "0")


def default_url() -> str:
    """``file://`` of ``$XDG_DATA_HOME/tensorvm/history`` (``~/.local/share/...``)."""
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"),
                                                           ".local", "share")
    return "file://" + os.path.join(os.path.abspath(base), "tensorvm", "history")


def history_url(explicit: str | None = None) -> str | None:
    """The history URL (see the module's docstring for the order); None when it is off."""
    import dask
    for value in (explicit, dask.config.get(CONFIG_KEY, None), os.environ.get(ENV_VAR)):
        if value is not None:
            return None if str(value).strip().lower() in _OFF else str(value)
    return default_url()


def log_name(job_id: str) -> str:
    """A job id as a file name: letters, digits, ``_.-`` only, no leading dot (an id comes
    from a client or a URL and is never a path).

    >>> log_name("../../etc/passwd"), log_name("wordcount-1a2b")
    ('etc_passwd', 'wordcount-1a2b')
    """
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", str(job_id))[:200]
    return name.lstrip("._") or "job"


def _fs(url: str):
    import fsspec
    return fsspec.core.url_to_fs(url)


# ---- writing -------------------------------------------------------------------------------
class LogWriter:
    """Appends lines to job logs on one background thread; :meth:`finish` commits one.
    Nothing here raises into the caller: a log that cannot be written is logged once and
    dropped."""

    def __init__(self, flush_s: float = FLUSH_S, max_logs: int = MAX_LOGS):
        self.flush_s, self.max_logs = flush_s, max_logs
        self._cond = threading.Condition()
        self._pending: dict[str, list[dict]] = {}  # job -> records not written yet
        self._where: dict[str, tuple] = {}  # job -> (fs, folder, name)
        self._ending: set[str] = set()
        self._whole: dict[str, list[str]] = {}  # job -> all lines (stores without append)
        self._stop = False
        self._thread = threading.Thread(target=self._loop, name="tensorvm-history",
                                        daemon=True)
        self._thread.start()

    def open(self, job_id: str, url: str) -> None:
        try:
            fs, folder = _fs(url)
        except Exception as exc:  # noqa: BLE001 - a bad URL costs the log, not the job
            logger.warning("tensorvm: no event log for job %s: %s", job_id, exc)
            return
        with self._cond:
            self._where[job_id] = (fs, folder.rstrip("/"), log_name(job_id))
            self._pending.setdefault(job_id, [])

    def write(self, job_id: str, record: dict) -> None:
        """Queue ``record`` (a fresh dict, not changed afterwards: it is serialised on the
        writer's thread, off the scheduler's event loop)."""
        with self._cond:
            if job_id in self._where:
                self._pending[job_id].append(record)

    def finish(self, job_id: str) -> None:
        with self._cond:
            if job_id in self._where:
                self._ending.add(job_id)
                self._cond.notify()

    def close(self, timeout: float = 30.0) -> None:
        """Write and commit what is pending, then stop the thread."""
        with self._cond:
            self._stop = True
            self._cond.notify()
        self._thread.join(timeout)

    def _loop(self) -> None:
        while True:
            with self._cond:
                if not self._stop and not self._ending:
                    self._cond.wait(self.flush_s)
                work = {j: lines for j, lines in self._pending.items() if lines}
                for j in work:
                    self._pending[j] = []
                ending, self._ending = self._ending, set()
                where = dict(self._where)
                stop = self._stop
            for job_id in set(work) | ending:
                if job_id in where:
                    self._flush(job_id, where[job_id], work.get(job_id, []),
                                job_id in ending)
            if stop:
                with self._cond:
                    if not any(self._pending.values()):
                        return

    def _flush(self, job_id: str, where: tuple, records: list[dict], end: bool) -> None:
        fs, folder, name = where
        lines = [json.dumps(r, default=str) for r in records]
        tmp = f"{folder}/{name}{INPROGRESS}"
        data = "".join(line + "\n" for line in lines).encode()
        try:
            if data and job_id not in self._whole:
                fs.makedirs(folder, exist_ok=True)
                try:
                    with fs.open(tmp, "ab") as f:
                        f.write(data)
                except (NotImplementedError, ValueError):
                    self._whole[job_id] = []  # a store with no append: rewrite the whole log
            if job_id in self._whole:
                self._whole[job_id] += lines
                fs.pipe_file(tmp, "".join(x + "\n" for x in self._whole[job_id]).encode())
            if end:
                self._commit(fs, folder, name, tmp)
        except Exception as exc:  # noqa: BLE001 - never fail the scheduler over a log
            logger.warning("tensorvm: the event log of job %s could not be written to %s: "
                           "%s", job_id, folder, exc)
            end = True
        if end:
            with self._cond:
                self._where.pop(job_id, None)
                self._pending.pop(job_id, None)
            self._whole.pop(job_id, None)

    def _commit(self, fs, folder: str, name: str, tmp: str) -> None:
        final, n = f"{folder}/{name}{SUFFIX}", 1
        while fs.exists(final):  # an id seen before: never overwrite a committed log
            n += 1
            final = f"{folder}/{name}~{n}{SUFFIX}"
        fs.mv(tmp, final)
        self._prune(fs, folder)

    def _prune(self, fs, folder: str) -> None:
        logs = [e for e in fs.ls(folder, detail=True) if e["name"].endswith(SUFFIX)]
        if len(logs) <= self.max_logs:
            return
        logs.sort(key=lambda e: (_mtime(e), e["name"]))
        for e in logs[: len(logs) - self.max_logs]:
            fs.rm_file(e["name"])


def _mtime(entry: dict) -> float:
    for k in ("mtime", "created", "LastModified", "last_modified"):
        v = entry.get(k)
        if isinstance(v, (int, float)):
            return float(v)
        if hasattr(v, "timestamp"):
            return v.timestamp()
    return 0.0


# ---- the plugin's side ---------------------------------------------------------------------
class JobHistory:
    """What the scheduler plugin calls from its hooks: task events kept in memory (bounded,
    for live pages) and written, with the job's messages, to its event log.

    ``registry`` is the plugin's :class:`~tensorvm.scheduler_ext.registry.JobRegistry` (read
    only: :meth:`~JobRegistry.job_of`, :meth:`~JobRegistry.job_states`, :meth:`~JobRegistry.job`);
    ``url`` overrides the configured history URL (``"off"`` writes nothing)."""

    def __init__(self, registry: JobRegistry, url: str | None = None, clock=time.time,
                 max_tasks: int = MAX_TASKS):
        self.registry, self.explicit, self.clock = registry, url, clock
        self.max_tasks = max_tasks
        self.tasks: dict[str, TaskLog] = {}  # job -> its task events (live + KEEP_FINISHED)
        self.urls: dict[str, str | None] = {}  # job -> where its log goes (None: nowhere)
        self.open_jobs: set[str] = set()
        self.messages: dict[str, int] = {}
        self._writer: LogWriter | None = None
        self._reader: HistoryReader | None = None

    @property
    def writer(self) -> LogWriter:
        if self._writer is None:
            self._writer = LogWriter()
        return self._writer

    def url(self) -> str | None:
        """The history URL this scheduler lists past jobs from."""
        return history_url(self.explicit)

    # ---- events ---------------------------------------------------------------------------
    def transition(self, key, start: str, finish: str, kwargs: dict) -> None:
        """Before the registry's own transition (it forgets the key)."""
        if start != "processing" or finish not in ("memory", "erred"):
            return
        job_id = self.registry.job_of(key)
        if job_id is None:
            return
        rec = task_record(key, finish, kwargs)
        if rec is None:
            return
        self._ensure_open(job_id)
        log = self.tasks.get(job_id)
        if log is not None and log.add(rec) and self.urls.get(job_id):
            self.writer.write(job_id, {"type": "task", "time": rec["stop"], **rec})

    def job_message(self, msg: dict) -> None:
        """After the registry applied ``msg`` (a TOPIC_JOBS message)."""
        if msg.get("op") == "name":  # names a client's sessions: no job of its own
            return
        job_id = str(msg.get("job"))
        if msg.get("op") == "start":
            self._open(job_id, msg.get("history"))
        self._ensure_open(job_id)
        n = self.messages.get(job_id, 0)
        if self.urls.get(job_id) and (n < MAX_MESSAGES or msg.get("op") != "metrics"):
            self.messages[job_id] = n + 1
            safe = dict(msg, args=redact_args(msg["args"])) if msg.get("args") else dict(msg)
            safe.pop("history", None)
            self.writer.write(job_id, {"type": "job", "time": self.clock(), "msg": safe})
        self.sync()

    def ran_again(self, job_id: str, kind: str, msg: dict) -> None:
        """After the registry kept a task of ``job_id`` that runs again (``kind``: ``move``,
        a :data:`~tensorvm.scheduler_ext.registry.TOPIC_MOVES` event; ``rerun``, the job's
        share of a :data:`~tensorvm.scheduler_ext.registry.TOPIC_RERUNS` one): into its log,
        so that a log cut short (no snapshot) still shows them."""
        if job_id in self.open_jobs and self.urls.get(job_id):
            self.writer.write(job_id, {"type": kind, "time": self.clock(), "msg": dict(msg)})

    def sync(self) -> None:
        """Open logs of jobs the registry has started (sessions start with their first
        task); commit those of jobs that ended."""
        states = self.registry.job_states()
        for job_id, state in states.items():
            if state == "running" and job_id not in self.open_jobs and job_id not in self.urls:
                self._ensure_open(job_id)
        for job_id in [j for j in self.open_jobs if states.get(j, "gone") != "running"]:
            self._end(job_id)

    def close(self) -> None:
        """The scheduler closes: every open log is committed as it stands."""
        for job_id in list(self.open_jobs):
            self._end(job_id, unfinished=True)
        if self._writer is not None:
            self._writer.close()

    def _ensure_open(self, job_id: str) -> None:
        if job_id not in self.urls:
            self._open(job_id, None)

    def _open(self, job_id: str, url: str | None) -> None:
        if job_id in self.open_jobs:
            return
        try:
            url = history_url(url or self.explicit)
        except Exception:  # noqa: BLE001 - a broken config: no log
            url = None
        self.urls[job_id] = url
        self.tasks[job_id] = TaskLog(self.max_tasks)
        self.open_jobs.add(job_id)
        if url:
            self.writer.open(job_id, url)
            self.writer.write(job_id, {"type": "header", "format": FORMAT,
                                       "version": VERSION, "job": job_id,
                                       "time": self.clock()})
            job = self.registry.job(job_id)
            if job is not None and job.get("kind") == "session":  # no start message
                self.writer.write(job_id, {"type": "job", "time": job["started"], "msg": {
                    "op": "start", "job": job_id, "name": job["name"],
                    "client": job.get("client"), "kind": "session"}})

    def _end(self, job_id: str, unfinished: bool = False) -> None:
        self.open_jobs.discard(job_id)
        job = self.registry.job(job_id)
        log = self.tasks.get(job_id)
        if self.urls.get(job_id):
            now = self.clock()
            if job is not None:
                if unfinished and job["state"] == "running":
                    job = dict(job, state="incomplete",
                               reason="the scheduler closed before the job ended")
                self.writer.write(job_id, {"type": "snapshot", "time": now, "job": job})
            summary = {k: v for k, v in (job or {}).items() if k not in DETAIL_KEYS}
            if summary.get("metrics"):
                summary["metrics"] = {k: v for k, v in summary["metrics"].items()
                                      if k != "history"}
            self.writer.write(job_id, {"type": "end", "time": now, "summary": summary,
                                       "tasks": len(log.tasks) if log else 0,
                                       "tasks_dropped": log.dropped if log else 0})
            self.writer.finish(job_id)
        done = [j for j in self.tasks if j not in self.open_jobs]
        for j in done[: max(0, len(done) - KEEP_FINISHED)]:
            del self.tasks[j]
            self.urls.pop(j, None)
            self.messages.pop(j, None)

    # ---- reading --------------------------------------------------------------------------
    def task_events(self, job_id: str) -> tuple[list[dict], int] | None:
        """A job's task events and the count not kept: from memory, else its log."""
        log = self.tasks.get(job_id)
        if log is not None:
            return list(log.tasks), log.dropped
        past = self.past_job(job_id)
        return (past["tasks"], past["tasks_dropped"]) if past else None

    @property
    def reader(self) -> HistoryReader | None:
        url = self.url()
        if url is None:
            return None
        if self._reader is None or self._reader.url != url:
            self._reader = HistoryReader(url)
        return self._reader

    def past_jobs(self) -> list[dict]:
        reader = self.reader
        return reader.jobs() if reader is not None else []

    def past_job(self, job_id: str) -> dict | None:
        reader = self.reader
        return reader.job(job_id) if reader is not None else None


# ---- reading -------------------------------------------------------------------------------
def parse_lines(data: bytes) -> list[dict]:
    """The records of a log's bytes: JSON objects only; a line that does not parse (the cut
    tail of a log being written) is skipped.

    >>> parse_lines(b'{"type": "header"}\\n[1]\\n{"type": "ta')
    [{'type': 'header'}]
    """
    out = []
    for line in data.split(b"\n"):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if isinstance(rec, dict):
            out.append(rec)
    return out


def replay(records: list[dict], complete: bool) -> dict:
    """``{"job": job dict, "tasks": [...], "tasks_dropped": n}`` of a log's records: the
    snapshot written at the end, else (an incomplete log) the job messages and task events
    replayed through a :class:`JobRegistry`, its state ``incomplete``."""
    tasks = [r for r in records if r.get("type") == "task" and _is_task(r)]
    end = next((r for r in reversed(records) if r.get("type") == "end"), {})
    snap = next((r for r in reversed(records) if r.get("type") == "snapshot"
                 and isinstance(r.get("job"), dict)), None)
    if snap is not None:
        job = snap["job"]
    else:
        job = _replayed(records, tasks)
    if not complete and job.get("state") == "running":
        job = dict(job, state="incomplete")
    return {"job": job, "tasks": tasks, "tasks_dropped": int(end.get("tasks_dropped") or 0)}


def _is_task(r: dict) -> bool:
    return all(isinstance(r.get(k), (int, float)) for k in ("start", "stop")) and \
        isinstance(r.get("task"), str) and isinstance(r.get("device"), str)


def _replayed(records: list[dict], tasks: list[dict]) -> dict:
    now = [0.0]
    reg = JobRegistry(clock=lambda: now[0])
    header = next((r for r in records if r.get("type") == "header"), {})
    job_id = str(header.get("job") or "job")
    client = "history"
    for r in records:
        if isinstance(r.get("time"), (int, float)):
            now[0] = float(r["time"])
        try:
            if r.get("type") == "job" and isinstance(r.get("msg"), dict):
                msg = dict(r["msg"])
                if msg.get("op") == "start":
                    client = str(msg.get("client") or client)
                    msg["client"] = client
                reg.job_event(msg)
            elif r.get("type") == "task" and _is_task(r) and isinstance(r.get("key"), list):
                key = tuple(r["key"])
                reg.graph_submitted(client, {key: []})
                if r.get("state") == "erred":
                    reg.task_erred(key, r.get("worker"))
                else:
                    reg.task_done(key, r.get("worker"))
            elif r.get("type") == "move" and isinstance(r.get("msg"), dict):
                reg.task_moved(r["msg"], job=job_id)
            elif r.get("type") == "rerun" and isinstance(r.get("msg"), dict):
                reg.tasks_rerun(r["msg"], job=job_id)
        except (ValueError, TypeError, KeyError):
            continue
    return reg.job(job_id) or {"id": job_id, "name": job_id, "state": "incomplete"}


class HistoryReader:
    """The jobs of one history URL, read on demand; a committed log is read once (cached by
    its name and size), an in-progress one again when its size changes."""

    def __init__(self, url: str):
        self.url = url
        self.fs, self.folder = _fs(url)
        self.folder = self.folder.rstrip("/")
        self._cache: dict[tuple[str, int], dict] = {}

    def _entries(self) -> list[dict]:
        try:
            found = self.fs.ls(self.folder, detail=True)
        except (FileNotFoundError, NotADirectoryError):
            return []
        return [e for e in found if e.get("type") != "directory"
                and e["name"].endswith((SUFFIX, INPROGRESS))]

    def _load(self, entry: dict) -> dict:
        ck = (entry["name"], int(entry.get("size") or 0))
        if ck not in self._cache:
            with self.fs.open(entry["name"], "rb") as f:
                data = f.read(MAX_LOG_BYTES)
            out = replay(parse_lines(data), entry["name"].endswith(SUFFIX))
            out["log"] = entry["name"]
            self._cache = {k: v for k, v in self._cache.items() if k[0] != ck[0]}
            self._cache[ck] = out
        return self._cache[ck]

    def jobs(self) -> list[dict]:
        """One summary per log (the registry's summary form), newest first; a log that
        cannot be read is left out with a warning."""
        rows = []
        for e in self._entries():
            try:
                job = self._load(e)["job"]
            except Exception as exc:  # noqa: BLE001 - one bad log does not hide the others
                logger.warning("tensorvm: skipped the event log %s: %s", e["name"], exc)
                continue
            if isinstance(job.get("id"), str):
                rows.append(_summary(job, e["name"]))
        rows.sort(key=lambda j: -(j.get("started") or 0))
        return rows

    def job(self, job_id: str) -> dict | None:
        """``{"job", "tasks", "tasks_dropped", "log"}`` of one job, or None."""
        name = log_name(job_id)
        entries = {e["name"].rsplit("/", 1)[-1]: e for e in self._entries()}
        for fname in (name + SUFFIX, name + INPROGRESS):
            if fname in entries:
                out = self._load(entries[fname])
                if out["job"].get("id") == job_id:
                    return out
        return None


def _summary(job: dict, log: str) -> dict:
    out = {k: v for k, v in job.items() if k not in DETAIL_KEYS}
    out.setdefault("name", out["id"])
    out.setdefault("state", "incomplete")
    out.setdefault("elapsed", 0.0)
    out.setdefault("progress", {"done": 0, "total": 0, "erred": 0, "fraction": 0.0})
    out.setdefault("metrics", {"step": None, "last": {}})
    out["log"] = log
    return out
