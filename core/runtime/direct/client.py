"""The direct data plane, client side: register a plan's partitions once, then run each step
with one message per device straight to its worker (TF's master calling ``RunGraph``).

:class:`DirectSteps` belongs to one :class:`~tensorvm.runtime.dask_plane.DistributedBackend`.
``register`` installs a plan's :class:`~tensorvm.runtime.direct.registered_plans.DevicePartition` s on their
workers (again whenever a device moved to another worker); ``run`` sends every device its
``tvm_run`` message at once and waits, on the client's event loop, for

* every device's reply — its fetches (the workers hand tensors to each other through their
  rendezvous, see :mod:`tensorvm.runtime.direct.rendezvous`);
* or the first failure: a device's connection closed (its worker died), a worker that could
  not reach a peer, a kernel error — the step's other devices are told to cancel it
  (``tvm_cancel``) and the error names the device;
* or a worker of the step leaving the cluster (the scheduler's event on :data:`TOPIC_WORKERS`,
  not a poll; received through :mod:`tensorvm.runtime.cluster.events`, so every session sharing the
  client gets it — ``Client.subscribe_topic`` alone keeps one handler per topic);
* or the deadline: the error names the devices still running.

If the client itself goes (its process dies, or a step is given up mid-message), the workers
see the step's ``tvm_run`` connections close and cancel the step on their own
(:mod:`tensorvm.runtime.direct.data_plane`): a sync replica's token wait left behind takes no token.

The scheduler sees none of this, so each finished step is reported to the job registry
(:mod:`tensorvm.scheduler_ext`) as plain data: :class:`StepReports` keeps one record per step
(its task names, their workers, the Send edges, how it ended) and sends them in batches on the
topic :data:`TOPIC_STEPS`, in the background (never on a step's critical path; at most one
message in flight per client, and one every :data:`REPORT_EVERY` seconds).
:func:`flush_step_reports` waits until every step run so far has reached the scheduler:
senders of job messages call it first, so a job that ends right after its last step is
counted exactly.
"""
from __future__ import annotations

import asyncio
import logging
import threading

import numpy as np

from .. import client_state
from ..cluster import events as cluster_events
from ..wire_names import TOPIC_STEPS, TOPIC_WORKERS, handler
from ...vm import _dask_private
from ...framework.errors import CancelledError, DeadlineExceededError, OpError, UnavailableError
from ..unavailable import device_unavailable, scheduler_unavailable
from .registered_plans import partitions
from .packing import SMALL_BYTES, pack, unpack
from ...vm.program import Feed, Recv, Result

logger = logging.getLogger("tensorvm")
REPORT_EVERY = 0.1  # seconds between two step-report messages of a client (flush: at once)
ERROR_CHARS = 2000  # of a failed step's error in its report (the page shows it)
WHY_CLOSED_S = 1.0  # how long a step whose worker's connection closed waits to learn why
LIVE_CLIENT = ("running", "newly-created")  # a Client's statuses while it has its scheduler
REGISTER, DROP, RUN, CANCEL = (handler(v) for v in ("register", "drop", "run", "cancel"))


def scheduler_gone(client, address: str | None = None,
                   cause: BaseException | None = None) -> UnavailableError | None:
    """The UnavailableError naming the scheduler if ``client`` has lost it, else None; no round
    trip: the client's status, or its scheduler connection already closed (the client notices
    a moment later and spends its connect timeout, 20 s, trying to reconnect, while its calls
    block and then fail with Dask's raw ``KeyError``/``AttributeError``).

    Every worker closes itself when its scheduler goes, so on the direct plane a killed
    scheduler first shows as workers closing their step connections: the step names the
    scheduler, not a worker (issue 24)."""
    status = str(getattr(client, "status", "running"))
    if status in LIVE_CLIENT:
        comm = getattr(getattr(client, "scheduler_comm", None), "comm", None)
        if comm is None or not comm.closed():
            return None
        status = "connecting"  # its connection closed: it is about to say so itself
    if address is None:
        try:
            address = client.scheduler.address
        except Exception:  # noqa: BLE001 - the client dropped its scheduler (closed)
            address = client_state.get(client, "scheduler_address") or "?"
    err = scheduler_unavailable(address, status)
    err.__cause__ = cause
    return err


class DirectSteps:
    def __init__(self, client, prefix: str):
        self.client = client
        self.prefix = prefix  # plan ids of this backend start with it
        self._registered: dict[str, dict] = {}  # plan id -> {device: address}
        self._feeds: dict[str, dict] = {}  # plan id -> {device: feed indices}
        self._active: dict[str, tuple] = {}  # step id -> (pinned devices, future of a loss)
        self._subscribed = False
        self._subscription = None  # of the lost-worker events (tensorvm.runtime.cluster.events)
        self.message_bytes = 0  # of the last traced step's tvm_run messages
        self._gone: dict[str, str] = {}  # address -> name of workers that left the cluster
        self._shapes: dict[str, tuple] = {}  # plan id -> (task names, edges) for reports
        self.reports = step_reports(client)
        self._idle: dict[str, list] = {}  # address -> connections for tvm_run not in use
        self._order: dict[str, list] = {}  # plan id -> its devices in the order to message
        self.closed_reason: str | None = None  # set by cancel_all: every step ends at once
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
            self._shapes[pid] = _shape(plan)
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

    def check_gone(self, pinned: dict) -> None:
        """UnavailableError (its ``device`` set) if a worker of ``pinned`` (device ->
        (address, name)) is known to have left the cluster: no step, and no registration,
        tries to reach it (a connection to a dead address waits Dask's connect timeout)."""
        for dev, (addr, name) in pinned.items():
            if addr in self._gone:
                raise device_unavailable(dev, f"its worker {name!r} ({addr}) left the cluster")

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
        return self._sync(self._run, plan, pid, pinned, feed_values, step_id, steps, timeout,
                          trace)

    def _sync(self, fn, *args):
        """``fn(*args)`` on the client's event loop, waited for here: the step's one trip to
        that thread and back (``Client.sync`` costs an extra loop iteration and a tornado
        coroutine around it; ``run_coroutine_threadsafe`` a concurrent future chained to the
        task, each a condition and callbacks on both threads: a lock released by the task's
        end is all the wait needs)."""
        loop = self.client.loop.asyncio_loop
        if self.client.asynchronous or asyncio._get_running_loop() is loop or loop.is_closed():
            return self.client.sync(fn, *args)  # its errors for these cases
        handoff = _Handoff()
        loop.call_soon_threadsafe(handoff.start, fn(*args))
        try:
            handoff.lock.acquire()
        except BaseException:  # a KeyboardInterrupt: the step is given up on the loop too
            loop.call_soon_threadsafe(handoff.cancel)
            raise
        return handoff.result()

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
            calls[loop.create_task(self._call(pinned[dev][0], msg))] = dev
        waiting = _Replies(ended, len(calls))
        for f in calls:
            f.add_done_callback(waiting.reply)
        self._watch(step_id, pinned, ended)
        timer = loop.call_later(timeout, _expire, ended) if timeout and calls else None
        bad = None  # the device whose reply failed the step
        try:
            got = await ended if calls else None
            if got is _EXPIRED:
                pending = sorted(d for f, d in calls.items() if not f.done())
                raise DeadlineExceededError(
                    f"step {step_id} did not finish within {timeout * 1000:.0f} ms and was "
                    f"cancelled (its ops not yet started will not run); devices still "
                    f"pending: {', '.join(pending)}; stateful ops that may already have "
                    f"run: {_stateful(plan, pending) or 'none'}")
            if isinstance(got, BaseException):  # a worker of the step left; the session closed
                raise got
            if got is not None:  # a failed reply
                exc = got.exception()
                if exc is None:
                    exc = got.result()["error"]
                bad = calls[got]
                if _connection_lost(exc):  # a worker died, or all did with the scheduler
                    why = await self._why_closed(self.watch(step_id, pinned))
                    if why is not None:
                        bad = getattr(why, "device", None)
                        raise why
                raise self._failure(bad, exc, pinned)
        except BaseException as exc:
            self._report(pid, pinned, step_id, steps, bad or getattr(exc, "device", None),
                         error=f"{type(exc).__name__}: {exc}"[:ERROR_CHARS])
            for f in calls:
                if not f.done():
                    f.cancel()
                else:
                    _retrieve(f)
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

    async def _why_closed(self, lost) -> BaseException | None:
        """A worker of the step closed its connection (or could not reach a peer): wait up to
        :data:`WHY_CLOSED_S` to learn why — the scheduler's event that the worker left (the
        step's ``lost`` future: that error), or the client losing its scheduler (every worker
        closes itself then: UnavailableError naming the scheduler); None if neither came."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + WHY_CLOSED_S
        while True:
            if lost.done():
                return None if lost.cancelled() else lost.result()
            gone = scheduler_gone(self.client, self.scheduler_address)
            if gone is not None or loop.time() >= deadline:
                return gone
            await asyncio.wait([lost], timeout=0.02)

    async def _call(self, addr: str, msg: dict):
        """``msg`` to the worker at ``addr`` and its reply, on one of the connections this
        object keeps for its steps (taken from the client's pool once; the pool closes them
        with the client). Unlike the pool's calls, no size walk of every message to decide on
        offloading its serialisation: large arrays come serialised already (``pack``)."""
        idle = self._idle.setdefault(addr, [])
        comm = None
        while idle and comm is None:
            comm = idle.pop()
            if comm.closed():
                comm = None
        if comm is None:
            comm = await _dask_private.open_comm(self.client.rpc, addr)
        try:
            await comm.write(msg)
            reply = await comm.read()
        except BaseException:  # a cancelled or failed call leaves the connection mid-message
            comm.abort()
            raise
        idle.append(comm)
        _dask_private.raise_error_reply(reply)
        return reply

    def _failure(self, device: str, exc: BaseException, pinned: dict) -> BaseException:
        from distributed.comm.core import CommClosedError
        if isinstance(exc, (OSError, CommClosedError)):
            addr, name = pinned[device]
            err = device_unavailable(device, f"its worker {name!r} ({addr}) closed the "
                                             f"connection mid-step ({type(exc).__name__})")
            err.__cause__ = exc
            return err
        if isinstance(exc, UnavailableError) and getattr(exc, "device", None) in pinned:
            addr, name = pinned[exc.device]
            exc.device_worker = (addr, name)
        if isinstance(exc, OpError):
            return exc.with_traceback(None)
        return exc

    def _report(self, pid, pinned, step_id, steps, failed: str | None | bool = False,
                error: str | None = None) -> None:
        """Queue the step's record for the job registry; ``failed``: the device that failed
        it (its tasks count as erred, the others not at all, as on Dask), or None; ``error``:
        what failed it, for the dashboard (the Dask plane's erred tasks carry theirs)."""
        names, edges = self._shapes.get(pid, ((), ()))
        rec = {"step": step_id, "n": steps, "ok": failed is False,
               "tasks": [[n, pinned[d][0]] for n, d in names if d in pinned], "edges": edges}
        if failed is not False:
            rec["erred"] = [n for n, d in names if d == failed]
            if error:
                rec["error"] = error
        self.reports.add(rec)

    async def _cancel(self, addrs, step_id) -> None:
        await asyncio.gather(*(getattr(self.client.rpc(a), CANCEL)(step=step_id) for a in addrs),
                             return_exceptions=True)

    # ---- the scheduler's events -----------------------------------------------------------
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
            lost.set_result(_cancelled(step_id, self.closed_reason))
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
                fut.set_result(_cancelled(step_id, reason))
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
        while len(self._gone) > 1024:
            del self._gone[next(iter(self._gone))]
        for step_id, (pinned, fut) in list(self._active.items()):
            self._fail_on(addr, msg.get("name"), step_id, pinned, fut)

    @staticmethod
    def _fail_on(addr, name, step_id, pinned, fut) -> None:
        devices = sorted(d for d, (a, _) in pinned.items() if a == addr)
        if devices and not fut.done():
            fut.set_result(device_unavailable(
                devices, f"its worker {name!r} ({addr}) left the cluster during step {step_id}"))


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


def pack_feed(value):
    """A feed's value for a ``tvm_run`` message: :func:`~tensorvm.runtime.direct.packing.pack`'s
    form (a step's token, a small string array, travels as its strings: no pickle either
    way), except a small object array ``pack`` leaves to Dask's serialisation, which goes as a
    pickled sub-header that Dask's protocol unpickles on the worker into the array itself (what
    ``unpack`` returns for the ``"o"`` tag): Dask's serialisation cost the client ~30 us a
    message (``serialize``, its header, a frame of its own) and the worker ~20 us to read it.
    A large one (pickled, over ``SMALL_BYTES``) goes through Dask's serialisation (frames of
    its own, no copy into a header)."""
    packed = pack(value)
    if packed[0] != "o" or type(value) is not np.ndarray or not value.dtype.hasobject:
        return packed
    import pickle
    from distributed.protocol.serialize import Pickled
    frames: list = []
    obj = pickle.dumps(value, protocol=5, buffer_callback=frames.append)
    if len(obj) <= SMALL_BYTES and not frames:
        return ("o", Pickled({"pickled-obj": obj}, []))
    return packed


def _receives(part) -> bool:
    """Whether a device's partition reads a tensor another device makes."""
    names = {t.name for t in part.tasks}
    return any(a.__class__ is Recv or (a.__class__ is Result and a.task not in names)
               for t in part.tasks for a in t.args)


def _shape(plan) -> tuple:
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


def _stateful(plan, devices) -> str:
    from ...framework.op_registry import registry
    ops = [i.name for t in plan.tasks if t.device in devices for i in t.program.instrs
           if registry[i.type].stateful and not registry[i.type].reads_only]
    return ", ".join(ops)


def _cancelled(step_id: str, reason: str) -> CancelledError:
    return CancelledError(f"step {step_id} was cancelled: {reason} while it ran (its ops not "
                          "yet started will not run)")


def _connection_lost(exc: BaseException) -> bool:
    """A step's failure that a closing worker or scheduler may explain: the connection to its
    worker closed, or a worker could not reach a peer (UnavailableError from the worker)."""
    from distributed.comm.core import CommClosedError
    return isinstance(exc, (OSError, CommClosedError)) or (
        isinstance(exc, UnavailableError) and getattr(exc, "device", None) is not None)


class _Handoff:
    """A coroutine run on the event loop for a thread that waits for it (:meth:`DirectSteps._sync`):
    ``lock`` is held until the coroutine's task has ended."""

    __slots__ = ("lock", "task")

    def __init__(self):
        self.lock = threading.Lock()
        self.lock.acquire()
        self.task = None

    def start(self, coro) -> None:  # on the loop
        self.task = asyncio.ensure_future(coro)
        self.task.add_done_callback(self._ended)

    def _ended(self, task) -> None:
        if not task.cancelled():
            task.exception()  # retrieved: a waiter that gave up (Ctrl-C) never reads it
        self.lock.release()

    def cancel(self) -> None:  # on the loop
        if self.task is not None:
            self.task.cancel()

    def result(self):
        """The task's value; its error raised (``asyncio.CancelledError`` if cancelled)."""
        return self.task.result()


_EXPIRED = object()  # a step's end: its deadline passed


def _expire(ended) -> None:
    if not ended.done():
        ended.set_result(_EXPIRED)


class _Replies:
    """Counts a step's replies into the future that ends its wait: its result is None once
    every device replied, or the first call that failed (raised, or replied an error)."""

    __slots__ = ("ended", "left")

    def __init__(self, ended, n: int):
        self.ended, self.left = ended, n

    def reply(self, call) -> None:
        if self.ended.done() or call.cancelled():
            return
        if call.exception() is not None or "error" in call.result():
            self.ended.set_result(call)
            return
        self.left -= 1
        if not self.left:
            self.ended.set_result(None)


def _retrieve(fut) -> None:
    if not fut.cancelled():
        fut.exception()
