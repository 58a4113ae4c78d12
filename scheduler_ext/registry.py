"""The registry of tensorvm jobs: a pure state machine (events in, plain-data state out).

Design
------
The scheduler plugin (:mod:`tensorvm.scheduler_ext.plugin`) is a thin shell that turns Dask's
hooks into calls on one :class:`JobRegistry`; the registry does no I/O and reads the time only
through the ``clock`` it is given, so tests drive it without a cluster.

Where its facts come from:

* **jobs** — a client announces a job (``start``), its training metrics (``metrics``: ``step``,
  ``total_steps``, ``loss`` ...), map-reduce ``counters`` and its end (``finish``) as messages
  on the event topic :data:`TOPIC_JOBS` (``Client.log_event``; see :func:`job_message`);
* **progress** — the plugin sees every graph a client submits and every task transition. Keys
  are tensorvm's ``(name, step_id, ...)`` tuples whose name is
  ``tvm<sep><graph><sep><device><sep>s<stage>[-send]``
  (:func:`~tensorvm.scheduler_ext.task_keys.parse_task_name`), so each
  key counts towards its (device, stage) of the job that the submitting client runs. A client
  that never announced a job gets one named after its graph (a plain ``tv.Session``);
* **direct steps** — steps sent straight to the workers never reach the scheduler's task
  graph; the client reports them in batches on :data:`TOPIC_STEPS`
  (:meth:`JobRegistry.steps_reported`: each task counts as a Dask-plane key would);
* **workers** — which worker ran each device's tasks, and worker arrivals and departures.

State per job (:meth:`JobRegistry.job`): id, name, user, state (``running``, ``done``,
``failed``, ``closed``), per device and stage ``{done, total, erred}``, the partitioned graph
(``nodes``: one per (device, stage); ``edges``: dependencies, ``send`` where they cross
devices), counters, metrics with a bounded history per metric (the loss curve), the rate of
runs (``metrics.runs_per_s``: what a plain session's training loop shows, having no step
metric), the latest errors of failed tasks (``errors``; ``last_error`` in the summary), and
the tasks it ran again (:mod:`tensorvm.scheduler_ext.moves`): those moved off a straggler
(``moved``; ``moves`` counts them in the summary) and those re-run because a worker left
(``reran``, one entry per departed worker; ``reruns`` counts the tasks), from core's
scheduler events on :data:`TOPIC_MOVES` and :data:`TOPIC_RERUNS`.

This module holds the events (:class:`JobRegistry`: which job a message, key or step
report counts for, and what it changes); each job's state and its plain-data views are
:class:`~tensorvm.scheduler_ext.job_record.JobRecord`, reading a key as a task is
:mod:`tensorvm.scheduler_ext.task_keys`, and keeping secrets out is
:mod:`tensorvm.scheduler_ext.redaction`.

>>> t = iter(range(100))
>>> reg = JobRegistry(clock=lambda: float(next(t)))
>>> reg.job_event({"op": "start", "job": "j1", "name": "wordcount", "client": "C1"})
>>> reg.graph_submitted("C1", {("tvm-g1-worker-0-cpu0-s0", "a.0"): [],
...                            ("tvm-g1-ps-0-cpu0-s1", "a.0"): [("tvm-g1-worker-0-cpu0-s0", "a.0")]})
>>> reg.task_done(("tvm-g1-worker-0-cpu0-s0", "a.0"), "tcp://127.0.0.1:1")
>>> j = reg.job("j1")
>>> j["state"], j["progress"]["done"], j["progress"]["total"]
('running', 1, 2)
>>> j["graph"]["edges"]
[{'src': 'worker-0-cpu0/s0', 'dst': 'ps-0-cpu0/s1', 'send': True}]
"""
from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

# the event topics (jobs, worker arrivals and departures, the direct plane's step reports):
# defined once, with the other names that cross the wire, in core (which logs them)
from tensorvm.runtime.wire_names import TOPIC_JOBS, TOPIC_STEPS, TOPIC_WORKERS  # noqa: F401

from .job_record import JobRecord, new_group
from .moves import (MAX_MOVES, MAX_RERUNS, TOPIC_MOVES, TOPIC_RERUNS,  # noqa: F401
                    event_time, keep_latest, key_of, label_order, task_label)
from .task_keys import expected_end, node_of, parse_task_name, step_of, task_name_of

STATES = ("running", "done", "failed", "closed")
OPS = ("start", "metrics", "counters", "finish", "name")  # name: a client's program
MAX_STEPS = 10_000  # step id -> job kept for the latest steps (a re-run of a finished task)
MAX_DEPARTED = 256  # names kept of workers that left (their re-runs name them)
DETAIL_KEYS = ("devices", "graph", "errors", "moved", "reran")
"""The keys of :meth:`JobRegistry.job` that its summary (:meth:`JobRegistry.jobs`) has not."""


def job_message(op: str, job: str, **fields: Any) -> dict:
    """A message for :data:`TOPIC_JOBS` (what ``Client.log_event`` sends).

    >>> job_message("metrics", "j1", step=3, loss=0.5)
    {'op': 'metrics', 'job': 'j1', 'step': 3, 'loss': 0.5}
    """
    if op not in OPS:
        raise ValueError(f"unknown job message {op!r}; one of {', '.join(OPS)}")
    return {"op": op, "job": job, **fields}


class JobRegistry:
    """Jobs, their progress and metrics. Every method is an event; :meth:`jobs` and
    :meth:`job` read the state. ``clock`` is a ``() -> seconds`` function; ``max_jobs``
    finished jobs are kept; each metric keeps at most ``max_points`` points (when full every
    other point is dropped, so the whole curve keeps its shape)."""

    def __init__(self, clock: Callable[[], float] = time.time, max_jobs: int = 100,
                 max_points: int = 1000):
        self.clock = clock
        self.max_jobs, self.max_points = max_jobs, max_points
        self._jobs: OrderedDict[str, JobRecord] = OrderedDict()
        self._by_client: dict[str, str] = {}  # client id -> its running job
        self._keys: dict = {}  # live key -> (job id, task name)
        self._runs: dict[tuple[str, str], int] = {}  # (job, step id) -> keys not done yet
        # step id -> job, for the latest MAX_STEPS steps: a finished key (forgotten in _keys)
        # whose output a departed worker alone held runs again, and counts for its step's job
        self._step_jobs: OrderedDict[str, str] = OrderedDict()
        self.workers: dict[str, str] = {}  # address -> name
        self._departed: OrderedDict[str, str] = OrderedDict()  # address -> name, left
        self.session_names: dict[str, str] = {}  # client -> its program's name (announced)
        self.cluster_started: float | None = None  # the scheduler's start (the plugin sets it)

    # ---- events from clients (TOPIC_JOBS) ------------------------------------------------
    def job_event(self, msg: dict) -> None:
        """Apply one :data:`TOPIC_JOBS` message; a malformed one raises ValueError."""
        if not isinstance(msg, dict) or msg.get("op") not in OPS or not msg.get("job"):
            raise ValueError(f"not a tensorvm job message: {msg!r}")
        op, job_id = msg["op"], str(msg["job"])
        if op == "name":  # a plain program names its client's sessions (job: the client id)
            self.session_names[str(msg.get("client") or job_id)] = str(msg.get("name") or job_id)
            return
        if op == "start":
            self._start(job_id, msg)
            return
        job = self._jobs.get(job_id)
        if job is None:
            raise ValueError(f"unknown job {job_id!r} in {op!r} message")
        if op == "metrics":
            self._metrics(job, msg)
        elif op == "counters":
            job.counters.update(msg.get("counters") or {})
        else:
            self._finish(job, msg.get("state", "done"), msg.get("reason"))
            job.output = msg.get("output", job.output)
            job.counters.update(msg.get("counters") or {})

    def _start(self, job_id: str, msg: dict) -> None:
        info = {k: msg.get(k) for k in ("user", "client", "args", "dashboard", "kind",
                                        "submitted") if msg.get(k) is not None}
        job = JobRecord(job_id, str(msg.get("name") or job_id), self.clock(), **info)
        self._jobs[job_id] = job
        if job.client and job.kind == "session" and msg.get("name"):
            self.session_names[job.client] = job.name  # its later session jobs too
        if job.client:
            old = self._by_client.get(job.client)
            if old in self._jobs and self._jobs[old].kind == "session":
                self._finish(self._jobs[old], "closed", None)
            self._by_client[job.client] = job_id

    def _metrics(self, job: JobRecord, msg: dict) -> None:
        now = self.clock()
        step = msg.get("step")
        if msg.get("total_steps") is not None:
            job.total_steps = int(msg["total_steps"])
        if step is not None:
            job.step = int(step)
            job.rate_points = (job.rate_points + [(now, job.step)])[-20:]
        for k, v in msg.items():
            if k in ("op", "job", "step", "total_steps") or not isinstance(v, (int, float)):
                continue
            job.last[k] = float(v)
            series = job.metrics.setdefault(k, [])
            series.append([job.step if job.step is not None else len(series), float(v)])
            if len(series) > self.max_points:
                del series[1:-1:2]

    def _finish(self, job: JobRecord, state: str, reason) -> None:
        if state not in STATES[1:]:
            raise ValueError(f"a job ends as one of {STATES[1:]}, not {state!r}")
        if job.state == "running":
            job.state, job.reason, job.ended = state, reason, self.clock()
        if job.client and self._by_client.get(job.client) == job.id:
            del self._by_client[job.client]
        self._trim()

    def _trim(self) -> None:
        done = [j for j in self._jobs.values() if j.state != "running"]
        for j in done[: max(0, len(done) - self.max_jobs)]:
            del self._jobs[j.id]

    # ---- events from the scheduler --------------------------------------------------------
    def graph_submitted(self, client: str, tasks: dict) -> None:
        """A client submitted ``tasks``: ``{key: [dependency keys]}`` (tensorvm keys only
        count; others are ignored)."""
        job = None
        for key, deps in tasks.items():
            name = task_name_of(key)
            parsed = parse_task_name(name) if name else None
            if parsed is None or key in self._keys:
                continue
            if job is None:
                job = self._job_of_client(client, parsed[0])
            g = job.groups.get(name)
            if g is None:
                g = job.groups[name] = new_group(parsed)
            g["total"] += 1
            self._keys[key] = (job.id, name)
            step = step_of(key)
            if step is not None:
                if (job.id, step) not in self._runs:
                    job.runs["submitted"] += 1
                    self._step_jobs[str(step)] = job.id
                    self._step_jobs.move_to_end(str(step))
                    if len(self._step_jobs) > MAX_STEPS:
                        self._step_jobs.popitem(last=False)
                self._runs[(job.id, step)] = self._runs.get((job.id, step), 0) + 1
            for d in deps:
                dname = task_name_of(d)
                dp = parse_task_name(dname) if dname else None
                if dp is not None:
                    src, dst = node_of(dp), node_of(parsed)
                    if src != dst:
                        job.edges.add((src, dst))

    def steps_reported(self, client: str, steps: list) -> None:
        """A client ran ``steps`` on the direct data plane (records of :data:`TOPIC_STEPS`):
        each counts as the keys of one Dask-plane run would, for the client's running job.

        >>> reg = JobRegistry(clock=lambda: 0.0)
        >>> w, ps = "tvm_g1_worker_0_cpu0_s0", "tvm_g1_ps_0_cpu0_s1"
        >>> reg.steps_reported("C1", [{"step": "a.1", "n": 1, "ok": True,
        ...     "tasks": [[w, "tcp://w"], [ps, "tcp://p"]], "edges": [[w, ps]]}])
        >>> reg.job("session-C1")["progress"]["runs"]
        {'submitted': 1, 'done': 1}
        """
        for rec in steps:
            tasks = [(n, w, parse_task_name(n)) for n, w in rec.get("tasks") or ()]
            tasks = [t for t in tasks if t[2] is not None]
            if not tasks:
                continue
            job = self._job_of_client(client, tasks[0][2][0])
            n, ok = int(rec.get("n") or 1), bool(rec.get("ok"))
            erred = set(rec.get("erred") or ())
            end = not ok and expected_end(rec.get("error"))  # the loop's end, not a failure
            job.runs["submitted"] += 1
            if ok:
                job.run_done(self.clock())
            for name, worker, parsed in tasks:
                if not ok and name not in erred:
                    continue  # a failed step's other tasks do not count (released on Dask)
                g = job.groups.get(name)
                if g is None:
                    g = job.groups[name] = new_group(parsed)
                g["total"] += n
                g["done" if ok else "ended" if end else "erred"] += n
                if worker:
                    job.workers[g["device"]] = worker
                if not ok and not end and rec.get("error"):
                    job.error(self.clock(), g, name, rec["error"])
            for src, dst in rec.get("edges") or ():
                sp, dp = parse_task_name(src), parse_task_name(dst)
                if sp is not None and dp is not None and node_of(sp) != node_of(dp):
                    job.edges.add((node_of(sp), node_of(dp)))

    def _job_of_client(self, client: str, graph: str) -> JobRecord:
        job_id = self._by_client.get(client)
        if job_id in self._jobs:
            return self._jobs[job_id]
        job_id, n = f"session-{client}", 1
        while job_id in self._jobs:  # the client's earlier session job stays as it ended
            n += 1
            job_id = f"session-{client}-{n}"
        self._start(job_id, {"name": self.session_names.get(client) or f"session {graph}",
                             "client": client, "kind": "session"})
        return self._jobs[job_id]

    def task_done(self, key, worker: str | None = None) -> None:
        self._task_end(key, "done", worker)

    def task_erred(self, key, worker: str | None = None, error: str | None = None,
                   cause: str | None = None) -> None:
        """A task failed; ``error`` is its exception's text (None for a task that failed
        because a dependency did: the page shows the cause, not every consequence, and
        ``cause`` is the failing dependency's text). A task whose error, or whose cause's, is
        the normal end of a loop (:func:`expected_end`) counts as ``ended``, not erred."""
        if expected_end(error) or (error is None and expected_end(cause)):
            self._task_end(key, "ended", worker)
        else:
            self._task_end(key, "erred", worker, error)

    def task_forgotten(self, key) -> None:
        """A key released before it finished (a cancelled step): it no longer counts."""
        self._task_end(key, None, None)

    def _task_end(self, key, how: str | None, worker: str | None, error=None) -> None:
        entry = self._keys.pop(key, None)
        if entry is None:
            return
        job = self._jobs.get(entry[0])
        if job is None:
            return
        g = job.groups[entry[1]]
        if how is None:
            g["total"] -= 1
        else:
            g[how] += 1
        if worker:
            job.workers[g["device"]] = worker
        if error:
            job.error(self.clock(), g, entry[1], error)
        step = step_of(key)
        if step is not None and (job.id, step) in self._runs:
            self._runs[(job.id, step)] -= 1
            if self._runs[(job.id, step)] <= 0:
                del self._runs[(job.id, step)]
                if how == "done":
                    job.run_done(self.clock())

    def worker_added(self, address: str, name: str | None = None) -> None:
        self.workers[address] = str(name if name is not None else address)

    def worker_removed(self, address: str) -> None:
        name = self.workers.pop(address, None)
        if name is not None:  # a re-run event may name it after it left
            self._departed[address] = name
            while len(self._departed) > MAX_DEPARTED:
                self._departed.popitem(last=False)

    def _worker_name(self, address) -> str | None:
        return self.workers.get(address) or self._departed.get(address) if address else None

    def _job_of_task(self, key) -> JobRecord | None:
        """The job a tensorvm key counts for: its live key's, else its step's."""
        job_id = self.job_of(key)
        if job_id is None and step_of(key) is not None:
            job_id = self._step_jobs.get(str(step_of(key)))
        return self._jobs.get(job_id) if job_id is not None else None

    def task_moved(self, msg: dict, job: str | None = None) -> dict[str, dict]:
        """The scheduler moved a floating task off a straggler (a :data:`TOPIC_MOVES`
        event): kept for the job whose key it is (or ``job``, when replaying a job's log).
        ``{job id: msg with the workers' names}``, empty if no job kept here has the key.

        >>> reg = JobRegistry(clock=lambda: 5.0)
        >>> reg.workers.update({"tcp://a": "worker-0", "tcp://b": "worker-1"})
        >>> key = ("tvm_g1_worker_float_cpu0_s0-map13", "x.0")
        >>> reg.graph_submitted("C1", {key: []})
        >>> reg.task_moved({"key": list(key), "from": "tcp://b", "to": "tcp://a", "time": 7.0})
        ... # doctest: +NORMALIZE_WHITESPACE
        {'session-C1': {'key': ['tvm_g1_worker_float_cpu0_s0-map13', 'x.0'], 'from': 'tcp://b',
                        'to': 'tcp://a', 'time': 7.0, 'from_name': 'worker-1',
                        'to_name': 'worker-0'}}
        >>> m = reg.job("session-C1")["moved"][0]
        >>> m["task"], m["from_name"], m["to_name"], m["time"], reg.jobs()[0]["moves"]
        ('map13', 'worker-1', 'worker-0', 7.0, 1)
        """
        key = key_of(msg.get("key"))
        name = task_name_of(key) if key is not None else None
        if name is None:
            return {}
        j = self._jobs.get(job) if job is not None else self._job_of_task(key)
        if j is None:
            return {}
        src, dst = msg.get("from"), msg.get("to")
        names = {"from_name": msg.get("from_name") or self._worker_name(src),
                 "to_name": msg.get("to_name") or self._worker_name(dst)}
        step = step_of(key)
        j.moved = keep_latest(j.moved, {
            "task": task_label(name, parse_task_name(name)), "name": name,
            "step": str(step) if step is not None else None, "from": src, "to": dst,
            **names, "time": event_time(msg, self.clock())}, MAX_MOVES)
        j.moves += 1
        return {j.id: {**msg, **names}}

    def tasks_rerun(self, msg: dict, job: str | None = None) -> dict[str, dict]:
        """A worker left and the floating tasks ``msg["tasks"]`` (``[[name, step id], ...]``,
        a :data:`TOPIC_RERUNS` event) run again: each job's share kept for that job (all of
        them for ``job``, when replaying its log). ``{job id: its share of msg, with the
        worker's name}``.

        >>> reg = JobRegistry(clock=lambda: 5.0)
        >>> reg.worker_added("tcp://b", "worker-1")
        >>> reg.graph_submitted("C1", {("tvm_g1_worker_float_cpu0_s0-map7", "x.0"): []})
        >>> reg.worker_removed("tcp://b")
        >>> reg.tasks_rerun({"worker": "tcp://b", "time": 9.0, "tasks": [
        ...     ["tvm_g1_worker_float_cpu0_s0-map7", "x.0"], ["tvm_other_s0", "y.0"]]})
        ... # doctest: +NORMALIZE_WHITESPACE
        {'session-C1': {'worker': 'tcp://b', 'worker_name': 'worker-1', 'time': 9.0,
                        'tasks': [['tvm_g1_worker_float_cpu0_s0-map7', 'x.0']]}}
        >>> r = reg.job("session-C1")["reran"][0]
        >>> r["worker_name"], r["tasks"], reg.jobs()[0]["reruns"]
        ('worker-1', ['map7'], 1)
        """
        shares: dict[str, list] = {}
        for task in msg.get("tasks") or ():
            if not isinstance(task, (list, tuple)) or len(task) != 2 or \
                    task_name_of(task[0]) is None:
                continue
            j = self._jobs.get(job) if job is not None else \
                self._job_of_task((task[0], str(task[1])))
            if j is not None:
                shares.setdefault(j.id, []).append([task[0], str(task[1])])
        worker, when = msg.get("worker"), event_time(msg, self.clock())
        name = msg.get("worker_name") or self._worker_name(worker)
        for job_id, tasks in shares.items():
            j = self._jobs[job_id]
            labels = sorted({task_label(n, parse_task_name(n)) for n, _ in tasks},
                            key=label_order)
            j.reran = keep_latest(j.reran, {"worker": worker, "worker_name": name,
                                            "time": when, "tasks": labels}, MAX_RERUNS)
            j.reruns += len(tasks)
        return {job_id: {"worker": worker, "worker_name": name, "time": when, "tasks": tasks}
                for job_id, tasks in shares.items()}

    def client_removed(self, client: str) -> None:
        """A client left: its session job is closed; a job it was still running failed."""
        self.session_names.pop(client, None)
        job = self._jobs.get(self._by_client.get(client, ""))
        if job is not None:
            if job.kind == "session":
                self._finish(job, "closed", None)
            else:
                self._finish(job, "failed", "the client running the job disconnected")

    # ---- state ----------------------------------------------------------------------------
    def job_of(self, key) -> str | None:
        """The id of the job a live (not yet finished) tensorvm key counts for, else None."""
        entry = self._keys.get(key)
        return entry[0] if entry is not None else None

    def job_states(self) -> dict[str, str]:
        """``{job id: state}`` of every job kept (cheap: no summaries built)."""
        return {j.id: j.state for j in self._jobs.values()}

    def jobs(self) -> list[dict]:
        """One summary row per job, newest first."""
        return [self._summary(j) for j in reversed(self._jobs.values())]

    def job(self, job_id: str) -> dict | None:
        """Everything about one job (plain data, JSON-ready), or None."""
        j = self._jobs.get(job_id)
        if j is None:
            return None
        out = self._summary(j)
        out["devices"] = j.devices(self.workers)
        out["graph"] = j.graph()
        out["metrics"]["history"] = {k: [list(p) for p in v] for k, v in j.metrics.items()}
        out["errors"] = [dict(e) for e in j.errors]
        out["moved"] = [dict(m) for m in j.moved]
        out["reran"] = [dict(r, tasks=list(r["tasks"])) for r in j.reran]
        return out

    def _summary(self, j: JobRecord) -> dict:
        return j.summary(self.clock(), self.cluster_started)
