"""The steps a backend is running, and the workers that left the cluster under them.

:class:`StepWatch` (the base of :class:`~tensorvm.runtime.direct.client.DirectSteps`, the
watcher of both data planes' steps) receives the scheduler's event that a worker left (on
:data:`TOPIC_WORKERS`, not a poll; through :mod:`tensorvm.runtime.cluster.events`, so every
session sharing the client gets it — ``Client.subscribe_topic`` alone keeps one handler per
topic) and ends each step with a device on that worker: its future receives the device's
UnavailableError. A worker known to be gone is not reached again (:meth:`StepWatch.check_gone`:
a connection to a dead address waits Dask's connect timeout), and a closing session ends every
step at once (:meth:`StepWatch.cancel_all`).
"""
from __future__ import annotations

import asyncio
import logging

from ..cluster import events as cluster_events
from ..unavailable import device_unavailable
from ..wire_names import TOPIC_WORKERS
from .step_errors import cancelled

logger = logging.getLogger("tensorvm")
GONE_KEPT = 1024  # workers remembered as gone, the latest ones


class StepWatch:
    """The steps being run (step id -> (pinned devices, future of a loss)) and the workers
    known to have left the cluster; the future's result is the step's error. Its methods but
    :meth:`subscribe`, :meth:`unsubscribe`, :meth:`check_gone` and :meth:`gone` run on the
    client's event loop.

    >>> import asyncio
    >>> async def main():
    ...     watch = StepWatch(client=None)
    ...     lost = watch.watch("a.1", {"/job:ps/task:0": ("tcp://h:1", "ps0")})
    ...     watch._on_lost(("workers", {"action": "removed", "worker": "tcp://h:1", "name": "ps0"}))
    ...     return lost.result().device, watch.gone("tcp://h:1")
    >>> asyncio.run(main())
    ('/job:ps/task:0', 'ps0')
    """

    def __init__(self, client):
        self.client = client
        self._active: dict[str, tuple] = {}  # step id -> (pinned devices, future of a loss)
        self._subscribed = False
        self._subscription = None  # of the lost-worker events (tensorvm.runtime.cluster.events)
        self._gone: dict[str, str] = {}  # address -> name of workers that left the cluster
        self.closed_reason: str | None = None  # set by cancel_all: every step ends at once

    def subscribe(self) -> None:
        """Receive the scheduler's worker events (:data:`TOPIC_WORKERS`) through the
        client's shared dispatcher (:mod:`tensorvm.runtime.cluster.events`: other sessions of the
        client keep theirs); idempotent. The backend calls it before mapping any device."""
        if self._subscribed:
            return
        self._subscribed = True
        try:
            self._subscription = cluster_events.subscribe(self.client, TOPIC_WORKERS,
                                                          self._on_lost)
        except Exception:  # noqa: BLE001 - connection failures still fail the step
            logger.debug("could not subscribe to %s", TOPIC_WORKERS, exc_info=True)

    def unsubscribe(self) -> None:
        """Stop receiving the events (the session closes)."""
        sub, self._subscription = self._subscription, None
        if sub is not None:
            sub.close()

    def check_gone(self, pinned: dict) -> None:
        """UnavailableError (its ``device`` set) if a worker of ``pinned`` (device ->
        (address, name)) is known to have left the cluster: no step, and no registration,
        tries to reach it (a connection to a dead address waits Dask's connect timeout)."""
        for dev, (addr, name) in pinned.items():
            if addr in self._gone:
                raise device_unavailable(dev, f"its worker {name!r} ({addr}) left the cluster")

    def watch(self, step_id: str, pinned: dict):
        """On the client's event loop: a future that receives the UnavailableError of the first
        worker of ``pinned`` (device -> (address, name)) that left the cluster, or already
        had; :meth:`unwatch` when the step ends. Used by both data planes."""
        lost = asyncio.get_running_loop().create_future()
        self._watch(step_id, pinned, lost)
        return lost

    def _watch(self, step_id: str, pinned: dict, lost) -> None:
        """:meth:`watch` with the future given: the step's loss (or its session's close)
        becomes ``lost``'s result."""
        self._active[step_id] = (pinned, lost)
        if self.closed_reason is not None:  # a step that started as its session closed
            lost.set_result(cancelled(step_id, self.closed_reason))
        elif self._gone:
            for addr, _ in pinned.values():
                if addr in self._gone:
                    self._fail_on(addr, self._gone[addr], step_id, pinned, lost)
                    break

    async def cancel_all(self, reason: str) -> int:
        """On the client's event loop: end every step being watched now, and every later one
        at once, with CancelledError saying ``reason`` (the session closes, as TF's
        ``Session.close`` cancels its pending runs); each step then cancels itself on its
        workers as a timed-out one does. Returns how many steps were running."""
        self.closed_reason = reason
        n = 0
        for step_id, (_, fut) in list(self._active.items()):
            if not fut.done():
                fut.set_result(cancelled(step_id, reason))
                n += 1
        return n

    def unwatch(self, step_id: str) -> None:
        """On the client's event loop: the step ended; forget its future."""
        _, lost = self._active.pop(step_id, (None, None))
        if lost is not None and not lost.done():
            lost.cancel()

    def gone(self, address: str) -> str | None:
        """The name of the worker at ``address`` if it left the cluster (as reported)."""
        return self._gone.get(address)

    def _on_lost(self, event) -> None:
        _, msg = event
        if not isinstance(msg, dict) or msg.get("action") != "removed":
            return
        addr = msg.get("worker")
        self._gone[addr] = msg.get("name")
        while len(self._gone) > GONE_KEPT:
            del self._gone[next(iter(self._gone))]
        for step_id, (pinned, fut) in list(self._active.items()):
            self._fail_on(addr, msg.get("name"), step_id, pinned, fut)

    @staticmethod
    def _fail_on(addr, name, step_id, pinned, fut) -> None:
        devices = sorted(d for d, (a, _) in pinned.items() if a == addr)
        if devices and not fut.done():
            fut.set_result(device_unavailable(
                devices, f"its worker {name!r} ({addr}) left the cluster during step {step_id}"))
