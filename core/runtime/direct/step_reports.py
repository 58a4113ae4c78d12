"""The direct plane's steps, reported to the scheduler's job registry.

The scheduler sees none of a direct step (:mod:`tensorvm.runtime.direct.client`), so each
finished step is reported to the job registry (:mod:`tensorvm.scheduler_ext`) as plain data:
:func:`step_record` makes one record per step (its task names, their workers, the Send edges,
how it ended) and :class:`StepReports` sends them in batches on the topic
:data:`TOPIC_STEPS`, in the background (never on a step's critical path; at most one message
in flight per client, and one every :data:`REPORT_EVERY` seconds).
:func:`flush_step_reports` waits until every step run so far has reached the scheduler:
senders of job messages call it first, so a job that ends right after its last step is
counted exactly.
"""
from __future__ import annotations

import asyncio
import logging

from .. import client_state
from ..wire_names import TOPIC_STEPS
from ...vm.program import Recv, Result

logger = logging.getLogger("tensorvm")
REPORT_EVERY = 0.1  # seconds between two step-report messages of a client (flush: at once)
ERROR_CHARS = 2000  # of a failed step's error in its report (the page shows it)


def plan_shape(plan) -> tuple:
    """``([(task name, device)], [[src task, dst task]])`` of a plan, for its step reports."""
    senders = {s.name: s.task for s in plan.sends}
    edges = set()
    for t in plan.tasks:
        for a in t.args:
            src = a.task if a.__class__ is Result else \
                senders.get(a.send) if a.__class__ is Recv else None
            if src is not None and src != t.name:
                edges.add((src, t.name))
    return [(t.name, t.device) for t in plan.tasks], [list(e) for e in sorted(edges)]


def step_record(shape: tuple, pinned: dict, step_id: str, steps: int,
                failed: str | None | bool = False, error: str | None = None) -> dict:
    """The record of one step for the job registry: ``shape`` is its plan's
    :func:`plan_shape`, ``pinned`` maps device -> (address, name); ``failed``: the device that
    failed it (its tasks count as erred, the others not at all, as on Dask), or None;
    ``error``: what failed it, for the dashboard (the Dask plane's erred tasks carry theirs).

    >>> shape = ([("w-s0", "/job:w/task:0"), ("ps-s1", "/job:ps/task:0")], [["w-s0", "ps-s1"]])
    >>> pinned = {"/job:w/task:0": ("tcp://w", "w0"), "/job:ps/task:0": ("tcp://ps", "ps0")}
    >>> rec = step_record(shape, pinned, "a.1", 1)
    >>> rec["ok"], rec["tasks"], rec["edges"]
    (True, [['w-s0', 'tcp://w'], ['ps-s1', 'tcp://ps']], [['w-s0', 'ps-s1']])
    >>> rec = step_record(shape, pinned, "a.2", 1, "/job:ps/task:0", "UnavailableError: ...")
    >>> rec["ok"], rec["erred"], rec["error"]
    (False, ['ps-s1'], 'UnavailableError: ...')
    """
    names, edges = shape
    rec = {"step": step_id, "n": steps, "ok": failed is False,
           "tasks": [[n, pinned[d][0]] for n, d in names if d in pinned], "edges": edges}
    if failed is not False:
        rec["erred"] = [n for n, d in names if d == failed]
        if error:
            rec["error"] = error
    return rec


class StepReports:
    """The direct steps a client ran, on their way to the scheduler's job registry (see the
    module docstring); one per client, shared by its sessions. ``add`` runs on the client's
    event loop. At most one report message every :data:`REPORT_EVERY` seconds (one per step
    cost the client, and the scheduler beside it, ~0.4 ms of CPU a step); :meth:`flush` sends
    what is pending at once."""

    def __init__(self, client):
        self.client = client
        self._pending: list[dict] = []
        self._sending = None  # the task sending a batch
        self._timer = None  # the call that starts the next batch
        self._last = float("-inf")  # loop time the last batch started

    def add(self, record: dict) -> None:
        self._pending.append(record)
        if self._timer is None and not self._in_flight():
            self._schedule()

    def _in_flight(self) -> bool:
        return self._sending is not None and not self._sending.done()

    def _schedule(self) -> None:
        loop = asyncio.get_running_loop()
        delay = self._last + REPORT_EVERY - loop.time()
        if delay <= 0:
            self._start()
        else:
            self._timer = loop.call_later(delay, self._start)

    def _start(self) -> None:
        self._timer = None
        if self._pending and not self._in_flight():
            self._last = asyncio.get_running_loop().time()
            self._sending = asyncio.ensure_future(self._send())

    async def _send(self) -> None:
        batch, self._pending = self._pending, []
        try:
            await self.client.scheduler.log_event(
                topic=TOPIC_STEPS, msg={"client": self.client.id, "steps": batch})
        except Exception:  # noqa: BLE001 - progress reports never fail a step
            logger.debug("could not report %d direct steps", len(batch), exc_info=True)
        finally:
            if self._pending and self._timer is None:
                self._schedule()

    @property
    def busy(self) -> bool:
        """Reports not yet at the scheduler."""
        return bool(self._pending) or self._in_flight()

    async def _flush(self) -> None:
        while True:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            if self._in_flight():
                await self._sending
            elif self._pending:
                self._last = asyncio.get_running_loop().time()
                self._sending = asyncio.ensure_future(self._send())
            else:
                return

    def flush(self, timeout: float = 10) -> None:
        if self.client.status != "running":
            return
        try:
            self.client.sync(self._flush, callback_timeout=timeout)
        except Exception:  # noqa: BLE001 - best effort, like the reports themselves
            logger.debug("could not flush direct-step reports", exc_info=True)


def step_reports(client) -> StepReports:
    """The :class:`StepReports` of ``client`` (made on first use, kept for the client in
    :mod:`tensorvm.runtime.client_state`)."""
    return client_state.of(client, "step_reports", StepReports)


def flush_step_reports(client) -> None:
    """Wait until every direct step ``client`` ran has reached the scheduler (call before a
    job message, so the registry sees the steps before the job's end)."""
    reports = client_state.get(client, "step_reports")
    if reports is not None and reports.busy:
        reports.flush()
