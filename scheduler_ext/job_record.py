"""One job's state in the registry (:class:`JobRecord`) and how it reads as plain data: its
summary row, its progress per device and stage, its graph, its rates
(:func:`map_reduce_progress` for a map-reduce job's own terms).

Separate from the registry's events (:mod:`tensorvm.scheduler_ext.registry`), which decide
*what* happened to which job; this module holds what one job keeps and shows, and reads no
clock of its own (the registry passes ``now``).

>>> j = JobRecord("j1", "wordcount", 10.0, client="C1")
>>> j.groups["t"] = new_group(("g1", "worker-0-cpu0", 0, False))
>>> j.groups["t"].update(done=1, total=2)
>>> s = j.summary(12.0, None)
>>> s["state"], s["elapsed"], s["progress"]["fraction"]
('running', 2.0, 0.5)
>>> [d["device"] for d in j.devices({})], j.graph()["nodes"][0]["id"]
(['worker-0-cpu0'], 'worker-0-cpu0/s0')
"""
from __future__ import annotations

from typing import Any

from .redaction import redact_args
from .task_keys import node_of

MAX_ERRORS = 10  # errors kept per job (the latest)
MAX_ERROR_CHARS = 2000  # of one error's text
IDLE_AFTER = 10.0  # seconds without a finished run after which a running job's rate is 0
RATE_WINDOW = 1.0  # seconds: a rate is shown only over at least this long (not 51 runs in 0.2 s)


class JobRecord:
    """One job's mutable state inside the registry (not part of the API), and how it reads
    as plain data (:meth:`summary`, :meth:`devices`, :meth:`graph`)."""

    def __init__(self, job_id: str, name: str, now: float, **info: Any):
        self.id, self.name = job_id, name
        self.user = info.get("user")
        self.client = info.get("client")
        self.args = redact_args(dict(info.get("args") or {}))
        self.dashboard = info.get("dashboard")
        self.kind = info.get("kind", "job")
        self.state, self.reason, self.output = "running", None, None
        self.started, self.ended = now, None
        # when the client submitted the job (before it started or reached a cluster)
        self.submitted = _float_or_none(info.get("submitted"))
        self.groups: dict[str, dict] = {}  # task name -> {device, stage, send, done, total,
        #                                                  erred, ended}
        self.edges: set[tuple[str, str]] = set()  # (src node, dst node)
        self.workers: dict[str, str] = {}  # device -> worker address
        self.counters: dict = {}
        self.metrics: dict[str, list] = {}  # name -> [[step, value], ...]
        self.last: dict = {}
        self.step, self.total_steps = None, None
        self.rate_points: list[tuple[float, int]] = []  # (time, step) for steps/s
        self.runs = {"submitted": 0, "done": 0}
        self.run_points: list[list] = []  # [time, runs done] for runs/s, one per time
        self.errors: list[dict] = []  # the latest MAX_ERRORS failed tasks' errors
        self.moved: list[dict] = []  # the latest MAX_MOVES tasks moved off a straggler
        self.reran: list[dict] = []  # the latest MAX_RERUNS departures' re-run tasks
        self.moves, self.reruns = 0, 0  # all of them

    def run_done(self, now: float, n: int = 1) -> None:
        """Count ``n`` finished runs at ``now`` (points at one time merge: direct steps
        arrive in batches)."""
        self.runs["done"] += n
        if self.run_points and self.run_points[-1][0] == now:
            self.run_points[-1][1] = self.runs["done"]
        else:
            self.run_points = (self.run_points + [[now, self.runs["done"]]])[-20:]

    def error(self, now: float, group: dict, task: str, text) -> None:
        """Keep a failed task's error text (the latest MAX_ERRORS)."""
        text = str(text)
        if len(text) > MAX_ERROR_CHARS:
            text = text[:MAX_ERROR_CHARS] + " ..."
        self.errors = (self.errors + [{"time": now, "device": group["device"],
                                       "stage": group["stage"], "task": task,
                                       "error": text}])[-MAX_ERRORS:]

    def summary(self, now: float, cluster_started: float | None) -> dict:
        """The job's summary row (:meth:`JobRegistry.jobs
        <tensorvm.scheduler_ext.registry.JobRegistry.jobs>`) at ``now``; ``cluster_started``:
        when the scheduler started, if known."""
        done = sum(g["done"] for g in self.groups.values())
        total = sum(g["total"] for g in self.groups.values())
        erred = sum(g["erred"] for g in self.groups.values())
        ended = sum(g["ended"] for g in self.groups.values())
        end = self.ended if self.ended is not None else now
        since = self.submitted \
            if self.submitted is not None and self.submitted <= self.started else self.started
        runs_rate = _rate(self.run_points)
        if runs_rate is not None and self.state == "running" and \
                now - self.run_points[-1][0] > IDLE_AFTER:
            runs_rate = 0.0  # the loop stopped (the session is still open)
        if self.total_steps and self.step is not None:
            fraction = min(1.0, self.step / self.total_steps)
        else:
            fraction = (done + ended) / total if total else \
                (1.0 if self.state == "done" else 0.0)
        return {"id": self.id, "name": self.name, "user": self.user, "state": self.state,
                "reason": self.reason, "kind": self.kind, "client": self.client,
                "args": self.args,
                "started": self.started, "ended": self.ended, "submitted": self.submitted,
                # from the job's submission; setup_s: before it started (a cluster's start,
                # or connecting to one), run_s: since
                "elapsed": round(end - since, 3), "setup_s": round(self.started - since, 3),
                "run_s": round(end - self.started, 3),
                "cluster_started_for_job": bool(
                    self.submitted is not None and cluster_started is not None
                    and self.submitted <= cluster_started <= self.started),
                "output": self.output, "dashboard": self.dashboard,
                "last_error": self.errors[-1]["error"] if self.errors else None,
                # tasks run again: moved off a straggler; re-run after a worker left
                "moves": self.moves, "reruns": self.reruns,
                "progress": {"done": done, "total": total, "erred": erred, "ended": ended,
                             "fraction": round(fraction, 4), "runs": dict(self.runs),
                             "map_reduce": map_reduce_progress(
                                 self.counters, self.groups.values(), self.state)},
                "counters": dict(self.counters),
                "metrics": {"step": self.step, "total_steps": self.total_steps,
                            "steps_per_s": _step_rate(self, end), "runs_per_s": runs_rate,
                            "last": dict(self.last)}}

    def devices(self, workers: dict) -> list[dict]:
        """Progress per device and stage, with the worker that ran each device's tasks
        (``workers``: the registry's live workers, address -> name)."""
        devs: dict[str, dict] = {}
        for g in self.groups.values():
            d = devs.setdefault(g["device"], {"device": g["device"], "done": 0, "total": 0,
                                              "erred": 0, "ended": 0, "stages": {}})
            s = d["stages"].setdefault(g["stage"], {"stage": g["stage"], "done": 0,
                                                    "total": 0, "erred": 0, "ended": 0})
            for k in ("done", "total", "erred", "ended"):
                d[k] += g[k]
                s[k] += g[k]
        out = []
        for name in sorted(devs):
            d = devs[name]
            addr = self.workers.get(name)
            d["worker"] = addr
            d["worker_name"] = workers.get(addr) if addr else None
            d["worker_alive"] = addr in workers if addr else None
            d["stages"] = [d["stages"][k] for k in sorted(d["stages"])]
            out.append(d)
        return out

    def graph(self) -> dict:
        """The partitioned graph: one node per (device, stage), the edges between them."""
        nodes = sorted({node_of((None, g["device"], g["stage"], False))
                        for g in self.groups.values()})
        return {"nodes": [{"id": n, "device": n.rsplit("/s", 1)[0],
                           "stage": int(n.rsplit("/s", 1)[1])} for n in nodes],
                "edges": [{"src": a, "dst": b, "send": a.rsplit("/s", 1)[0] !=
                           b.rsplit("/s", 1)[0]} for a, b in sorted(self.edges)]}


def map_reduce_progress(counters: dict, groups, state: str) -> dict | None:
    """A map-reduce job's progress in its own terms, as the CLI's display counts it: its
    step's ``splits``, ``map_tasks`` and ``reducers`` (the counters the CLI sends when the step
    starts, Hadoop's launched-task counters), done in proportion to the first stage's tasks
    (the maps) and the last stage's (the reducers); None for other jobs.

    >>> groups = [{"stage": 0, "done": 3, "total": 4}, {"stage": 1, "done": 1, "total": 2}]
    >>> map_reduce_progress({"splits": 8, "map_tasks": 4, "reducers": 2}, groups, "running")
    {'splits': [6, 8], 'map_tasks': [3, 4], 'reducers': [1, 2]}
    """
    shape = {k: counters.get(k) for k in ("splits", "map_tasks", "reducers")}
    if not all(isinstance(v, (int, float)) and v > 0 for v in shape.values()):
        return None
    stages: dict = {}
    for g in groups:
        acc = stages.setdefault(g["stage"], [0, 0])
        acc[0] += g["done"]
        acc[1] += g["total"]
    if state == "done":
        fm = fr = 1.0
    elif len(stages) < 2:
        fm = fr = 0.0
    else:
        first, last = stages[min(stages)], stages[max(stages)]
        fm, fr = first[0] / max(first[1], 1), last[0] / max(last[1], 1)
    return {k: [round(f * int(v)), int(v)] for (k, v), f in
            zip(shape.items(), (fm, fm, fr))}


def new_group(parsed) -> dict:
    """A job's counts for one task name (``parsed``: its :func:`parse_task_name
    <tensorvm.scheduler_ext.task_keys.parse_task_name>`), all zero."""
    return {"device": parsed[1], "stage": parsed[2], "send": parsed[3], "done": 0, "total": 0,
            "erred": 0, "ended": 0}


def _float_or_none(v) -> float | None:
    try:
        return float(v) if v is not None else None
    except (TypeError, ValueError):
        return None


def _rate(points: list, window: float = RATE_WINDOW) -> float | None:
    """Units per second between the first and last ``(time, count)`` point, or None when
    they span less than ``window`` seconds (a burst says nothing about a rate).

    >>> _rate([(0.0, 0), (0.2, 51)]) is None, _rate([(0.0, 0), (2.0, 51)])
    (True, 25.5)
    """
    if len(points) < 2 or points[-1][0] - points[0][0] < window:
        return None
    return round((points[-1][1] - points[0][1]) / (points[-1][0] - points[0][0]), 3)


def _step_rate(j: JobRecord, end: float) -> float | None:
    """Steps/s of the latest points; for an ended job, over its whole run (from its start)."""
    if j.ended is not None and j.step is not None and j.rate_points:
        return _rate([(j.started, 0), (end, j.step)])
    return _rate(j.rate_points)
