"""The tensorvm scheduler plugin: a thin shell that feeds Dask's hooks to the pure
:class:`~tensorvm.scheduler_ext.registry.JobRegistry` and serves its state.

* ``update_graph`` / ``transition`` -> per device and stage progress of tensorvm keys;
* ``log_event`` on :data:`TOPIC_JOBS` -> job start, metrics, counters, end (clients send them
  with ``Client.log_event``); on :data:`TOPIC_STEPS` -> the steps clients ran on the direct
  data plane (which the scheduler's task hooks never see); on :data:`TOPIC_MOVES` and
  :data:`TOPIC_RERUNS` (core's :mod:`~tensorvm.runtime.cluster.stragglers` logs them) -> the
  tasks each job ran again: moved off a straggler, or re-run because a worker left;
* worker arrivals and departures -> the registry, from the events on :data:`TOPIC_WORKERS`
  (``{"action": "added" | "removed", "worker": address, "name": name, ...}``) that core's
  :class:`~tensorvm.runtime.cluster.device_map.DeviceHomes` logs — the one plugin that
  handles Dask's ``add_worker``/``remove_worker`` (this one puts it on the scheduler if no
  session has yet); sessions receive the same events with ``Client.subscribe_topic``;
* the ``tensorvm_jobs`` scheduler handler (``await client.scheduler.tensorvm_jobs(job=...)``)
  and the dashboard pages (:mod:`tensorvm.scheduler_ext.http`).

Installed on a LocalCluster by ``client.register_plugin(TensorvmPlugin())`` (what
:func:`install` does) and on an existing scheduler by
``dask scheduler --preload tensorvm.scheduler_ext``.
"""
from __future__ import annotations

import ast
import logging
import re
import time

from distributed.diagnostics.plugin import SchedulerPlugin

from tensorvm.runtime.cluster.device_map import DeviceHomes

from . import _dask_internals
from .history import JobHistory
from .http import PLUGIN_NAME
from .registry import (TOPIC_JOBS, TOPIC_MOVES, TOPIC_RERUNS, TOPIC_STEPS, TOPIC_WORKERS,
                       JobRegistry)
from .task_keys import task_name_of

logger = logging.getLogger("tensorvm")


class TensorvmPlugin(SchedulerPlugin):
    """Keeps the registry of tensorvm jobs on the scheduler and serves ``/tensorvm``."""

    name = PLUGIN_NAME
    idempotent = True

    def __init__(self, clock=time.time, history: str | None = None):
        self.registry = JobRegistry(clock=clock)
        self.scheduler = None
        # task events and event logs (tensorvm.scheduler_ext.history); history: the URL
        self.history = JobHistory(self.registry, url=history, clock=clock)

    async def start(self, scheduler) -> None:
        self.scheduler = scheduler
        self.registry.cluster_started = getattr(scheduler, "time_started", None)
        scheduler.handlers["tensorvm_jobs"] = self.get_jobs
        for ws in scheduler.workers.values():
            self.registry.worker_added(ws.address, ws.name)
        if DeviceHomes.name not in scheduler.plugins:  # the worker events come from it
            homes = DeviceHomes()
            await homes.start(scheduler)
            scheduler.add_plugin(homes, idempotent=True)
        if _dask_internals.add_routes(scheduler):
            _dask_internals.add_nav_tab(scheduler)
        logger.info("tensorvm: job registry on the scheduler at %s", scheduler.address)

    def get_jobs(self, job: str | None = None) -> list | dict | None:
        """The handler ``tensorvm_jobs``: every job's summary, or one job in full."""
        return self.registry.jobs() if job is None else self.registry.job(job)

    # ---- Dask hooks ----------------------------------------------------------------------
    def update_graph(self, scheduler, *, client, tasks, **kwargs) -> None:
        tvm = {}
        for key in tasks:
            if task_name_of(key) is None:
                continue
            ts = scheduler.tasks.get(key)
            tvm[key] = [d.key for d in ts.dependencies] if ts is not None else []
        if tvm:
            self.registry.graph_submitted(client, tvm)

    def transition(self, key, start, finish, *args, stimulus_id=None, **kwargs) -> None:
        if task_name_of(key) is None:
            return
        worker = kwargs.get("worker")
        if worker:  # the log names the worker as the cluster did (a floating task's has no
            # device of its own to name it by)
            kwargs = {**kwargs, "worker_name": self.registry.workers.get(str(worker))}
        self.history.transition(key, start, finish, kwargs)  # before the registry forgets key
        if finish == "memory":
            self.registry.task_done(key, kwargs.get("worker") or self._holder(key))
        elif finish == "erred":  # the failing task carries its exception's text
            self.registry.task_erred(key, kwargs.get("worker"),
                                     readable_error(kwargs.get("exception_text")),
                                     cause=self._blamed_error(key))
        elif finish == "forgotten":
            self.registry.task_forgotten(key)

    def _blamed_error(self, key) -> str | None:
        """The text of the error that failed ``key``'s failing dependency (Dask's
        ``exception_blame``): a consequence of a loop's normal end is no failure either."""
        ts = self.scheduler.tasks.get(key) if self.scheduler is not None else None
        blame = getattr(ts, "exception_blame", None) if ts is not None else None
        return getattr(blame, "exception_text", None) if blame is not None else None

    def _holder(self, key):
        ts = self.scheduler.tasks.get(key) if self.scheduler is not None else None
        who = getattr(ts, "who_has", None) if ts is not None else None
        return next(iter(who)).address if who else None

    def log_event(self, topic, msg) -> None:
        if topic == TOPIC_JOBS:
            try:
                self.registry.job_event(msg)
                self.history.job_message(msg)
            except ValueError as exc:
                logger.warning("tensorvm: ignored a job message: %s", exc)
        elif topic == TOPIC_STEPS and isinstance(msg, dict):
            try:
                self.registry.steps_reported(str(msg.get("client")), msg.get("steps") or [])
            except (TypeError, ValueError, AttributeError) as exc:
                logger.warning("tensorvm: ignored a direct-step report: %s", exc)
        elif topic in (TOPIC_MOVES, TOPIC_RERUNS) and isinstance(msg, dict):
            try:
                shares = self.registry.task_moved(msg) if topic == TOPIC_MOVES else \
                    self.registry.tasks_rerun(msg)
                for job_id, share in shares.items():  # kept in the job's event log too
                    self.history.ran_again(job_id, "move" if topic == TOPIC_MOVES else "rerun",
                                           share)
            except (TypeError, ValueError, AttributeError) as exc:
                logger.warning("tensorvm: ignored a %s event: %s", topic, exc)
        elif topic == TOPIC_WORKERS and isinstance(msg, dict) and "worker" in msg:
            if msg.get("action") == "added":
                self.registry.worker_added(msg["worker"], msg.get("name"))
            elif msg.get("action") == "removed":
                self.registry.worker_removed(msg["worker"])

    def remove_client(self, scheduler, client: str) -> None:
        self.registry.client_removed(client)
        self.history.sync()

    async def close(self) -> None:
        self.history.close()  # open event logs committed as they stand


def readable_error(text: str | None) -> str | None:
    r"""Dask's ``exception_text`` is ``repr(exc)``: shown as ``Class: message`` with its line
    breaks and quotes as written.

    >>> print(readable_error("InvalidArgumentError('bad\\n  for op \\'w\\'')"))
    InvalidArgumentError: bad
      for op 'w'
    >>> readable_error("KilledWorker(('x', 1), <WorkerState>)")
    "KilledWorker(('x', 1), <WorkerState>)"
    """
    m = re.fullmatch(r"(\w+)\(((['\"]).*\3)\)", text or "", re.DOTALL)
    if m is None:
        return text
    try:
        message = ast.literal_eval(m.group(2))
    except (ValueError, SyntaxError):
        return text
    return f"{m.group(1)}: {message}" if isinstance(message, str) else text


def install(client) -> None:
    """Install the plugin on ``client``'s scheduler (nothing happens if it is there)."""
    client.register_plugin(TensorvmPlugin())


def dask_setup(server) -> None:
    """``dask scheduler --preload tensorvm.scheduler_ext``: add the plugin to the scheduler
    (a worker given this preload is left alone)."""
    from distributed import Scheduler
    if isinstance(server, Scheduler):
        server.add_plugin(TensorvmPlugin(), idempotent=True)
