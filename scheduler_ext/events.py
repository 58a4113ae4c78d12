"""Per-task events of tensorvm jobs, as the scheduler sees them, and the Chrome trace of them
(pure functions and one bounded store: plain data in, plain data out, no I/O).

What a task event is
--------------------
Dask calls a scheduler plugin's ``transition(key, start, finish, **kwargs)`` when a task
leaves ``processing``; for ``memory`` and ``erred`` the keyword arguments carry what the
worker reported: ``worker``, ``thread``, ``nbytes`` and ``startstops`` (``[{"action":
"transfer"|"compute", "start", "stop"}, ...]``, already on the scheduler's clock: the worker
adds its measured offset). :func:`task_record` keeps, for a tensorvm key (whose name says the
device and stage, :func:`~tensorvm.scheduler_ext.task_keys.parse_task_name`)::

    {"key": [name, step, ...], "task": name, "step": step, "device": "worker-0-cpu0",
     "stage": 0, "send": False, "worker": "tcp://...", "thread": 1400..., "state": "done",
     # or "erred", or "ended" (the normal end of a loop: task_keys.expected_end)
     "start": t0, "stop": t1, "compute_start": tc, "transfer_s": 0.01, "nbytes": 565}

``start`` is the first start in ``startstops`` (the fetch of its inputs, if any) and ``stop``
the last stop; ``compute_start`` is when it began to run.

Bounds
------
:class:`TaskLog` keeps at most :data:`MAX_TASKS` task events per job (the first ones, in
the order they ended: a timeline's beginning is what a reader compares against, and the
count of those not kept is shown as ``dropped``). Steps run on the direct data plane never
pass through the scheduler's transitions; they have no task events (their progress still
counts in the registry).

>>> rec = task_record(("tvm_g1_worker_0_cpu0_s1", "a.0"), "memory", {
...     "worker": "tcp://w:1", "thread": 7, "nbytes": 100, "startstops": (
...         {"action": "transfer", "start": 10.0, "stop": 10.5},
...         {"action": "compute", "start": 10.5, "stop": 12.0})})
>>> rec["device"], rec["stage"], rec["start"], rec["stop"], rec["transfer_s"]
('worker-0-cpu0', 1, 10.0, 12.0, 0.5)
>>> trace = chrome_trace([rec], {"tcp://w:1": "worker-0"}, t0=9.0)
>>> [(e["ph"], e.get("ts"), e.get("dur")) for e in trace["traceEvents"] if e["ph"] == "X"]
[('X', 1000000, 2000000)]
"""
from __future__ import annotations

from typing import Any

from .task_keys import expected_end, parse_task_name, task_name_of

MAX_TASKS = 10_000
"""Task events kept per job, in memory and in its event log (the first ones)."""


def task_record(key, finish: str, kwargs: dict) -> dict | None:
    """The event of a tensorvm task that ended as ``finish`` (``memory`` or ``erred``), from
    the transition's keyword arguments; None for another key or one with no timing."""
    name = task_name_of(key)
    parsed = parse_task_name(name) if name else None
    spans = [s for s in kwargs.get("startstops") or () if isinstance(s, dict)
             and isinstance(s.get("start"), (int, float))
             and isinstance(s.get("stop"), (int, float))]
    if parsed is None or not spans:
        return None
    compute = [s for s in spans if s.get("action") == "compute"]
    transfer = sum(s["stop"] - s["start"] for s in spans if s.get("action") == "transfer")
    nbytes = kwargs.get("nbytes")
    return {"key": _plain_key(key), "task": name,
            "step": str(key[1]) if isinstance(key, tuple) and len(key) > 1 else None,
            "device": parsed[1], "stage": parsed[2], "send": parsed[3],
            "worker": str(kwargs.get("worker") or ""),
            **({"worker_name": str(kwargs["worker_name"])} if kwargs.get("worker_name")
               else {}),
            "thread": kwargs.get("thread") if isinstance(kwargs.get("thread"), int) else None,
            "state": "done" if finish == "memory" else
            "ended" if expected_end(kwargs.get("exception_text")) else "erred",
            "start": float(min(s["start"] for s in spans)),
            "stop": float(max(s["stop"] for s in spans)),
            "compute_start": float(compute[0]["start"]) if compute else None,
            "transfer_s": round(float(transfer), 6),
            "nbytes": int(nbytes) if isinstance(nbytes, (int, float)) else None}


def _plain_key(key) -> Any:
    if isinstance(key, tuple):
        return [k if isinstance(k, (str, int, float)) else str(k) for k in key]
    return key if isinstance(key, (str, int, float)) else str(key)


class TaskLog:
    """One job's task events, the first ``max_tasks`` of them (``dropped`` counts the rest).

    >>> log = TaskLog(max_tasks=1)
    >>> log.add({"task": "a"}), log.add({"task": "b"})
    (True, False)
    >>> len(log.tasks), log.dropped
    (1, 1)
    """

    def __init__(self, max_tasks: int = MAX_TASKS):
        self.max_tasks = max_tasks
        self.tasks: list[dict] = []
        self.dropped = 0

    def add(self, rec: dict) -> bool:
        """Keep ``rec`` if there is room; whether it was kept."""
        if len(self.tasks) >= self.max_tasks:
            self.dropped += 1
            return False
        self.tasks.append(rec)
        return True


def chrome_trace(tasks: list[dict], worker_names: dict | None = None,
                 t0: float | None = None, job: dict | None = None) -> dict:
    """The ``traceEvents`` document ``chrome://tracing`` and Perfetto open: one process per
    worker (``pid``, named by ``process_name`` metadata), one thread row per worker thread
    (``tid``), one complete event (``"ph": "X"``) per task from its start to its stop, in
    microseconds since ``t0`` (the job's start; else the first task's start).

    TF's ``tensorvm.runtime.timeline.Timeline`` (a traced run's records, one process per *device*,
    one row) draws a single run; a job's tasks overlap on a worker's threads, so this one
    keys processes by worker and rows by thread.
    """
    names = worker_names or {}
    if t0 is None:
        t0 = min((t["start"] for t in tasks), default=0.0)
    events: list[dict] = []
    pids: dict[str, int] = {}
    tids: dict[tuple[str, Any], int] = {}
    for t in sorted(tasks, key=lambda t: t["start"]):
        worker = t.get("worker") or "?"
        if worker not in pids:
            pids[worker] = pid = len(pids) + 1
            label = names.get(worker) or t.get("worker_name")
            events.append({"name": "process_name", "ph": "M", "pid": pid, "tid": 0,
                           "args": {"name": f"{label} ({worker})" if label else worker}})
            events.append({"name": "process_sort_index", "ph": "M", "pid": pid, "tid": 0,
                           "args": {"sort_index": pid}})
        lane = (worker, t.get("thread"))
        if lane not in tids:
            tids[lane] = tid = sum(1 for w, _ in tids if w == worker) + 1
            events.append({"name": "thread_name", "ph": "M", "pid": pids[worker], "tid": tid,
                           "args": {"name": f"thread {tid}"}})
        start, stop = float(t["start"]), float(t["stop"])
        events.append({
            "name": f"{t['device']}/s{t['stage']}" + (" send" if t.get("send") else ""),
            "cat": "send" if t.get("send") else f"stage {t['stage']}", "ph": "X",
            "pid": pids[worker], "tid": tids[lane],
            "ts": int(round((start - t0) * 1e6)), "dur": max(0, int(round((stop - start) * 1e6))),
            "args": {"task": t["task"], "step": t.get("step"), "device": t["device"],
                     "state": t.get("state"), "nbytes": t.get("nbytes"),
                     "transfer_ms": round(1000 * float(t.get("transfer_s") or 0), 3)}})
    out: dict = {"traceEvents": events, "displayTimeUnit": "ms"}
    if job is not None:
        out["metadata"] = {"job": job.get("id"), "name": job.get("name"),
                           "state": job.get("state"), "started": job.get("started")}
    return out
