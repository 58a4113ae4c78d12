"""Running one job for the CLI: the cluster and session, the job's entry in the scheduler's
registry (:mod:`tensorvm.scheduler_ext`), metrics from ``tv.job.report`` and the outcome.

``JobRun`` is a context manager::

    with JobRun(spec, scheduler=None, cluster={"ps": 1, "worker": 2}) as run:
        result = run.call(kwargs)      # the job function on run.session
        run.finish("done", result)

Status for a display comes from :meth:`JobRun.status` (the registry's view of the job, with
the last metrics this process reported merged in).
"""
from __future__ import annotations

import getpass
import logging
import threading
import time
import uuid

import numpy as np

from .bundled import JobSpec

logger = logging.getLogger("tensorvm")


class ConnectError(RuntimeError):
    """The scheduler could not be reached."""


def parse_cluster(text: str) -> dict[str, int]:
    """``"ps=1,worker=2"`` -> ``{"ps": 1, "worker": 2}`` (ValueError on a bad spec).

    >>> parse_cluster("ps=1,worker=2")
    {'ps': 1, 'worker': 2}
    """
    from tensorvm.runtime.cluster.spec import MAX_TASKS_PER_JOB
    out = {}
    for part in text.split(","):
        job, sep, n = part.strip().partition("=")
        big = n.isdigit() and len(n.lstrip("0")) > len(str(MAX_TASKS_PER_JOB))
        if not sep or not job.isidentifier() or not n.isdigit() or not big and int(n) < 1:
            raise ValueError(f"--cluster {text[:80]!r}: write JOB=N,... (e.g. ps=1,worker=2)")
        if big or int(n) > MAX_TASKS_PER_JOB:
            raise ValueError(f"--cluster: job {job!r} asks for more than {MAX_TASKS_PER_JOB} "
                             "tasks, the most a job may have (tensorvm.runtime.cluster.spec."
                             "MAX_TASKS_PER_JOB)")
        out[job] = int(n)
    return out


def local_cluster_label(cluster: dict | None) -> str:
    """What ``--cluster`` (or its absence) starts, for the "starting LocalCluster (…)" line.

    >>> local_cluster_label({"ps": 1, "worker": 2})
    '3 workers: ps=1, worker=2'
    """
    if not cluster:
        from tensorvm.runtime.cluster.local import worker_layout
        try:
            n = len(worker_layout(None))
        except Exception:  # noqa: BLE001 - a label only
            n = 2
        return f"{n} workers"
    n = sum(cluster.values())
    return f"{n} worker{'s' if n != 1 else ''}: " + ", ".join(f"{k}={v}"
                                                            for k, v in cluster.items())


class JobRun:
    """One job on a session: in process (``in_process``), on a new LocalCluster (the
    default; ``cluster`` names its tasks) or on the scheduler at ``scheduler``."""

    def __init__(self, spec: JobSpec, *, scheduler: str | None = None,
                 cluster: dict | None = None, in_process: bool = False,
                 connect_timeout: float = 10.0, args: dict | None = None,
                 resume: bool = False):
        self.spec = spec
        self.scheduler, self.cluster, self.in_process = scheduler, cluster, in_process
        self.connect_timeout = connect_timeout
        self.args = args or {}
        self.resume = bool(resume)  # map-reduce jobs adopt a dead driver's output (--resume)
        self.id = f"{spec.name}-{uuid.uuid4().hex[:8]}"
        self.session = None
        self._client = None  # only when this process made it (--scheduler)
        self.registry_ok = False
        self.metrics: dict = {}
        self.mr: dict = {}  # the map-reduce steps' progress (tensorvm.mapreduce.progress_to)
        self.result = None  # the job function's return value, once it returned
        self._lock = threading.Lock()
        self.t0 = time.time()

    # ---- set-up and tear-down ---------------------------------------------------------------
    def __enter__(self):
        import tensorvm as tv
        spec = tv.train.ClusterSpec(self.cluster) if self.cluster else None
        if self.in_process:
            self.session = tv.Session(graph=tv.Graph(), verbose=False)
        elif self.scheduler:
            self._client = self._connect()
            self.session = tv.Session(graph=tv.Graph(), client=self._client, cluster=spec,
                                      verbose=False)
        else:
            self.session = tv.Session("local", graph=tv.Graph(), cluster=spec, verbose=False)
        self._register()
        return self

    def _connect(self):
        import gc

        from distributed import Client
        try:
            return Client(self.scheduler, timeout=f"{self.connect_timeout}s",
                          set_as_default=False)
        except (OSError, TimeoutError):
            pass
        # the Client that failed to start is collected now, not inside a later Client's start
        # (where its __del__ deadlocks: tensorvm.runtime.dask_plane.connect)
        gc.collect()
        raise ConnectError(f"cannot reach the Dask scheduler at {self.scheduler} "
                           f"within {self.connect_timeout:g} s")

    def __exit__(self, *exc):
        from tensorvm.mapreduce.recovery import sweep_interrupted
        try:
            if self.session is not None:
                self.session.close()
        finally:
            try:
                if self._client is not None:
                    self._client.close()
            finally:  # the workers are gone (or told to stop): an interrupted job's debris
                sweep_interrupted()
        return False

    @property
    def client(self):
        return self.session.client if self.session is not None else None

    @property
    def dashboard(self) -> str | None:
        link = self.session.dashboard_link if self.session is not None else None
        if not link:
            return None
        return link.rsplit("/status", 1)[0] + f"/tensorvm/job/{self.id}"

    def _register(self) -> None:
        """Install the scheduler plugin (if missing) and announce the job."""
        client = self.client
        if client is None:
            return
        import dask

        from tensorvm.scheduler_ext import TOPIC_JOBS, install, job_message
        try:
            install(client)
            client.log_event(TOPIC_JOBS, job_message(
                "start", self.id, name=self.spec.name, user=getpass.getuser(),
                client=client.id, args={k: _plain(v) for k, v in self.args.items()},
                dashboard=self.dashboard, submitted=self.t0,  # elapsed: the cluster start too
                # where the scheduler writes the job's event log (its own default if unset)
                history=dask.config.get("tensorvm.history.url", None)))
            self.registry_ok = True
        except Exception as exc:  # noqa: BLE001 - the job runs without the registry
            logger.warning("tensorvm: no job registry on the scheduler (%s); install it with "
                           "dask scheduler --preload tensorvm.scheduler_ext", exc)

    def _send(self, op: str, **fields) -> None:
        if not self.registry_ok:
            return
        from tensorvm.runtime.direct.step_reports import flush_step_reports
        from tensorvm.scheduler_ext import TOPIC_JOBS, job_message
        try:
            flush_step_reports(self.client)  # the job's steps reach the registry first
            self.client.log_event(TOPIC_JOBS, job_message(op, self.id, **fields))
        except Exception as exc:  # noqa: BLE001 - never fail a job over its progress report
            logger.debug("tensorvm: could not send %s: %s", op, exc)

    # ---- running --------------------------------------------------------------------------
    def report(self, metrics: dict) -> None:
        """``tv.job.report`` lands here: kept for the display and sent to the registry."""
        with self._lock:
            self.metrics.update(metrics)
            self.metrics["time"] = time.time()
        self._send("metrics", **metrics)

    def call(self, kwargs: dict):
        """The job function on this run's session (the default session and graph while it
        runs), with ``tv.job.report`` wired to :meth:`report`."""
        import tensorvm as tv
        from tensorvm.mapreduce.common import progress_to
        from tensorvm.mapreduce.recovery import resuming
        if self.spec.takes_session:
            kwargs = {**kwargs, "session": self.session}
        with self.session.graph.as_default(), self.session.as_default(), \
                tv.job.reporting(self.report, name=self.spec.name), \
                progress_to(self._mr_progress), resuming(self.resume):
            self.result = self.spec.fn(**kwargs)
        return self.result

    def _mr_progress(self, event: dict) -> None:
        """A map-reduce step started or ended: splits, map tasks and reducers (done/total),
        and the records and bytes read so far over all of the job's steps."""
        now = time.time()
        with self._lock:
            mr = self.mr
            mr.setdefault("t_first", now)
            mr.setdefault("steps", 0)
            mr.update({k: event[k] for k in ("job", "splits", "map_tasks", "reducers")})
            if event["event"] == "start":
                mr["running"] = True
            else:
                c = event.get("counters") or {}
                mr["running"] = False
                mr["steps"] += 1
                mr["records"] = mr.get("records", 0) + int(c.get("map_input_records", 0))
                mr["bytes"] = mr.get("bytes", 0) + int(c.get("map_input_bytes", 0))
                mr["t_last"] = now
        if event["event"] == "start":  # the page counts as the display does (Hadoop's
            self._send("counters", counters={  # launched-task counters)
                k: int(event[k]) for k in ("splits", "map_tasks", "reducers")})

    def finish(self, state: str, result=None, reason: str | None = None) -> dict:
        """Announce the end; return the summary (state, seconds, counters, output...)."""
        summary = summarize(result, self.spec, self.args)
        summary.update({"job": self.spec.name, "id": self.id, "state": state,
                        "seconds": round(time.time() - self.t0, 3)})
        if reason:
            summary["error"] = reason
        if self.metrics:
            summary["metrics"] = {k: v for k, v in self.metrics.items() if k != "time"}
        if self.dashboard:
            summary["dashboard"] = self.dashboard
        self._send("finish", state=state, reason=reason, output=summary.get("output"),
                   counters=summary.get("counters") or {})
        return summary

    def status(self) -> dict:
        """The registry's view of this job (``{}`` without one), with the local metrics."""
        out = {}
        if self.registry_ok:
            try:
                out = self.client.sync(self.client.scheduler.tensorvm_jobs, job=self.id) or {}
            except Exception:  # noqa: BLE001 - the display shows what it has
                out = {}
        with self._lock:
            out["local_metrics"] = dict(self.metrics)
            if self.mr:
                out["mr"] = dict(self.mr)
        out["elapsed"] = time.time() - self.t0
        return out


def _plain(v):
    if isinstance(v, (str, int, float, bool)) or v is None:
        return v
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    return str(v)


MAX_RESULT_KEYS = 1000
"""The most key/value pairs of a result a summary (``--json``) carries; ``result_total`` says
how many there were, and ``--output URL`` writes them all."""


def summarize(result, spec=None, args: dict | None = None) -> dict:
    """The JSON-ready part of a job's return value: an ``mr.Result``'s counters and output
    files (and, with no output, its first :data:`MAX_RESULT_KEYS` key/value pairs with
    ``result_total``), a dict as is, an array's values. A bundled job's ``summary_lines``
    (``fn.summary_lines(result, args)``: PageRank's top ranks, k-means' centroids) gives the
    ``lines`` the terminal shows instead of the raw result."""
    out: dict = {}
    if result is None:
        return out
    lines_of = getattr(spec.fn, "summary_lines", None) if spec is not None and \
        getattr(spec, "bundled", False) else None
    if lines_of is not None:
        try:
            out["lines"] = list(lines_of(result, args or {}))
        except Exception:  # noqa: BLE001 - the raw result still shows
            pass
    if hasattr(result, "counters") and hasattr(result, "output_urls"):
        out["counters"] = {k: _num(v) for k, v in result.counters.items()}
        if result.output_urls:
            urls = list(result.output_urls)
            out["output"] = _common_folder(urls)
            out["files"] = urls
        elif result.keys is not None:
            n = len(result.keys)
            part = type(result)(result.counters, [], result.keys[:MAX_RESULT_KEYS],
                                result.values[:MAX_RESULT_KEYS])
            out["result"] = {_key(k): _jsonable(v) for k, v in part.to_dict().items()}
            out["result_total"] = n
        return out
    if isinstance(result, dict):
        out["result"] = {str(k): _jsonable(v) for k, v in result.items()}
    else:
        out["result"] = _jsonable(result)
    return out


def _key(k) -> str:
    if isinstance(k, bytes):
        return k.decode("utf-8", "replace")
    return str(k)


def _common_folder(urls: list) -> str:
    first = urls[0].rsplit("/", 1)[0]
    return first if all(u.rsplit("/", 1)[0] == first for u in urls) else urls[0]


def _num(v):
    return v.item() if isinstance(v, np.generic) else v


def _jsonable(v):
    if isinstance(v, np.ndarray):
        return v.tolist() if v.size <= 100_000 else f"<array {v.shape} {v.dtype}>"
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if isinstance(v, (str, int, float, bool)) or v is None:
        return v
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace")
    return repr(v)
