"""The direct data plane, client side: register a plan's partitions once, then run each step
with one message per device straight to its worker (TF's master calling ``RunGraph``).

:class:`DirectSteps` belongs to one :class:`~tensorvm.runtime.dask_plane.DistributedBackend`.
``register`` installs a plan's :class:`~tensorvm.runtime.direct.registered_plans.DevicePartition` s on their
workers (again whenever a device moved to another worker); ``run`` sends every device its
``tvm_run`` message at once (:mod:`tensorvm.runtime.direct.step_calls`) and waits, on the
client's event loop, for

* every device's reply — its fetches (the workers hand tensors to each other through their
  rendezvous, see :mod:`tensorvm.runtime.direct.rendezvous`);
* or the first failure: a device's connection closed (its worker died), a worker that could
  not reach a peer, a kernel error — the step's other devices are told to cancel it
  (``tvm_cancel``) and the error names the device (:mod:`tensorvm.runtime.direct.step_errors`);
* or a worker of the step leaving the cluster (the scheduler's event on
  :data:`~tensorvm.runtime.wire_names.TOPIC_WORKERS`, not a poll: ``DirectSteps`` is a
  :class:`~tensorvm.runtime.direct.step_watch.StepWatch`);
* or the deadline: the error names the devices still running.

If the client itself goes (its process dies, or a step is given up mid-message), the workers
see the step's ``tvm_run`` connections close and cancel the step on their own
(:mod:`tensorvm.runtime.direct.data_plane`): a sync replica's token wait left behind takes no token.

The scheduler sees none of this, so each finished step is reported to the job registry as plain
data, in the background (:mod:`tensorvm.runtime.direct.step_reports`).
"""
from __future__ import annotations

import asyncio
import logging

from .. import client_state
from ..unavailable import device_unavailable
from ..wire_names import handler
from ...vm.program import Feed, Recv, Result
from .packing import unpack
from .registered_plans import partitions
from .step_calls import EXPIRED, Replies, StepConnections, expire, pack_feed, retrieve
from .step_errors import connection_lost, deadline_exceeded, failure, why_closed
from .step_reports import ERROR_CHARS, plan_shape, step_record, step_reports
from .step_watch import StepWatch
from .thread_handoff import run_on_loop

logger = logging.getLogger("tensorvm")
REGISTER, DROP, RUN, CANCEL = (handler(v) for v in ("register", "drop", "run", "cancel"))


class DirectSteps(StepWatch):
    """The direct plane's steps of one backend (see the module docstring): the plans it
    registered on their workers, and the steps it runs on them; as a :class:`StepWatch`, the
    watcher of the backend's steps on both data planes."""

    def __init__(self, client, prefix: str):
        super().__init__(client)
        self.prefix = prefix  # plan ids of this backend start with it
        self._registered: dict[str, dict] = {}  # plan id -> {device: address}
        self._feeds: dict[str, dict] = {}  # plan id -> {device: feed indices}
        self.message_bytes = 0  # of the last traced step's tvm_run messages
        self._shapes: dict[str, tuple] = {}  # plan id -> (task names, edges) for reports
        self.reports = step_reports(client)
        self._conns = StepConnections(client)  # for the steps' tvm_run messages
        self._order: dict[str, list] = {}  # plan id -> its devices in the order to message
        try:  # for messages once the client has lost its scheduler (kept for the client)
            self.scheduler_address = str(client.scheduler.address)
            client_state.put(client, "scheduler_address", self.scheduler_address)
        except Exception:  # noqa: BLE001
            self.scheduler_address = None

    def plan_id(self, plan) -> str:
        return f"{self.prefix}-{plan.uid}"

    # ---- registration ---------------------------------------------------------------------
    def register(self, plan, pinned: dict) -> str:
        """Install ``plan`` on the workers of ``pinned`` (device -> (address, name)) unless
        it is there already; return its id."""
        pid = self.plan_id(plan)
        addrs = {d: a for d, (a, _) in pinned.items()}
        if self._registered.get(pid) != addrs:
            parts = partitions(plan, pid, addrs)
            by_addr: dict = {}
            for dev, part in parts.items():
                by_addr.setdefault(addrs[dev], []).append(part)
            self.client.sync(self._register, by_addr)
            self._registered[pid] = addrs
            self._shapes[pid] = plan_shape(plan)
            self._feeds[pid] = {d: p.feeds for d, p in parts.items()}
            # The step's messages go to the devices that wait for another's tensors first and
            # to those that start at once last: a device that starts may take the CPU from
            # the client (this machine's cores are few), and the waiting ones must know the
            # step before their inputs arrive, or they hold up the chain.
            self._order[pid] = sorted(parts, key=lambda d: not _receives(parts[d]))
        return pid

    async def _register(self, by_addr: dict) -> None:
        from distributed.comm.core import CommClosedError
        from distributed.protocol import to_serialize
        addrs = list(by_addr)
        got = await asyncio.gather(*(getattr(self.client.rpc(a), REGISTER)(parts=to_serialize(ps))
                                     for a, ps in by_addr.items()), return_exceptions=True)
        for addr, r in zip(addrs, got):
            if isinstance(r, (OSError, CommClosedError)):
                # a worker that died since it was mapped (the scheduler has not said so yet)
                raise device_unavailable(
                    [p.device for p in by_addr[addr]],
                    f"its worker at {addr} could not be reached to register the step's "
                    f"partition ({type(r).__name__}: {r})", certain=False) from r
        for r in got:
            if isinstance(r, BaseException):
                raise r

    def drop(self, plan_ids=None, everything: bool = False, wait: bool = True) -> None:
        """Forget plans on their workers (best effort: a gone worker forgot them already);
        ``wait=False`` sends the message in the background."""
        ids = set(plan_ids or ()) if not everything else set(self._registered)
        # a worker known to have left forgot its plans: asking it would wait out the
        # connect timeout (5 s at every close of a session that lost a worker)
        addrs = {a for p in ids for a in self._registered.get(p, {}).values()
                 if a not in self._gone}
        for p in ids:
            self._registered.pop(p, None)
            self._feeds.pop(p, None)
            self._order.pop(p, None)
            self._shapes.pop(p, None)
        if addrs and self.client.status == "running":
            kw = {"prefix": self.prefix + "-"} if everything else {"plan_ids": sorted(ids)}
            if not wait:
                self.client.loop.add_callback(self._drop, sorted(addrs), kw)
                return
            try:
                self.client.sync(self._drop, sorted(addrs), kw, callback_timeout=5)
            except Exception:  # noqa: BLE001 - workers that are gone hold nothing
                logger.debug("dropping plans from %s failed", addrs, exc_info=True)

    async def _drop(self, addrs, kw) -> None:
        await asyncio.gather(*(getattr(self.client.rpc(a), DROP)(**kw) for a in addrs),
                             return_exceptions=True)

    # ---- a step ---------------------------------------------------------------------------
    def run(self, plan, pid: str, pinned: dict, feed_values: list, step_id: str, steps: int,
            timeout: float | None, trace: bool):
        """Run one step (``steps`` iterations); return ``(fetched values, replies)``."""
        if not self._subscribed:
            self.subscribe()
        self.check_gone(pinned)  # no connection attempt to a worker known to be gone
        return run_on_loop(self.client, self._run, plan, pid, pinned, feed_values, step_id, steps,
                           timeout, trace)

    async def _run(self, plan, pid, pinned, feed_values, step_id, steps, timeout, trace):
        loop = asyncio.get_running_loop()
        feeds_of = self._feeds[pid]
        # One future ends the wait (no asyncio.wait, which builds sets and callbacks each time
        # a reply comes): the last reply, the first failed one, a worker of the step leaving
        # (or the session closing: it is the step's lost-worker future too), or the deadline.
        ended = loop.create_future()
        calls = {}
        self.message_bytes = 0
        for dev in self._order.get(pid, plan.devices):
            msg = {"op": RUN, "plan": pid, "device": dev, "step": step_id, "steps": steps,
                   "trace": trace,
                   "feeds": [[i, pack_feed(feed_values[i])] for i in feeds_of[dev]]}
            if trace:  # what goes on the wire: the message's frames
                from distributed.protocol import dumps
                self.message_bytes += sum(len(f) for f in dumps(msg))
            calls[loop.create_task(self._conns.call(pinned[dev][0], msg))] = dev
        waiting = Replies(ended, len(calls))
        for f in calls:
            f.add_done_callback(waiting.reply)
        self._watch(step_id, pinned, ended)
        timer = loop.call_later(timeout, expire, ended) if timeout and calls else None
        bad = None  # the device whose reply failed the step
        try:
            got = await ended if calls else None
            if got is EXPIRED:
                pending = sorted(d for f, d in calls.items() if not f.done())
                raise deadline_exceeded(step_id, timeout, pending, plan)
            if isinstance(got, BaseException):  # a worker of the step left; the session closed
                raise got
            if got is not None:  # a failed reply
                exc = got.exception()
                if exc is None:
                    exc = got.result()["error"]
                bad = calls[got]
                if connection_lost(exc):  # a worker died, or all did with the scheduler
                    why = await why_closed(self.client, self.scheduler_address,
                                          self.watch(step_id, pinned))
                    if why is not None:
                        bad = getattr(why, "device", None)
                        raise why
                raise failure(bad, exc, pinned)
        except BaseException as exc:
            self._report(pid, pinned, step_id, steps, bad or getattr(exc, "device", None),
                         error=f"{type(exc).__name__}: {exc}"[:ERROR_CHARS])
            for f in calls:
                if not f.done():
                    f.cancel()
                else:
                    retrieve(f)
            addrs = sorted({pinned[d][0] for d in plan.devices})
            asyncio.ensure_future(self._cancel(addrs, step_id))
            raise
        finally:
            if timer is not None:
                timer.cancel()
            self.unwatch(step_id)
        self._report(pid, pinned, step_id, steps)
        values = [None] * len(plan.fetches)
        replies = {}
        for f, dev in calls.items():
            reply = replies[dev] = f.result()
            for pos, v in reply["fetches"]:
                values[pos] = unpack(v)
        for pos, f in enumerate(plan.fetches):
            if f.__class__ is Feed:
                values[pos] = feed_values[f.index]
        return values, replies

    def _report(self, pid, pinned, step_id, steps, failed: str | None | bool = False,
                error: str | None = None) -> None:
        """Queue the step's record (:func:`~tensorvm.runtime.direct.step_reports.step_record`)
        for the job registry."""
        self.reports.add(step_record(self._shapes.get(pid, ((), ())), pinned, step_id, steps,
                                     failed, error))

    async def _cancel(self, addrs, step_id) -> None:
        await asyncio.gather(*(getattr(self.client.rpc(a), CANCEL)(step=step_id) for a in addrs),
                             return_exceptions=True)


def _receives(part) -> bool:
    """Whether a device's partition reads a tensor another device makes."""
    names = {t.name for t in part.tasks}
    return any(a.__class__ is Recv or (a.__class__ is Result and a.task not in names)
               for t in part.tasks for a in t.args)

