"""The direct data plane, worker side: registered partitions run by one message, tensors
handed worker to worker through a per-worker rendezvous (TF's ``RunGraph`` and
``Rendezvous``).

:class:`DataPlane` is part of tensorvm's worker extension
(:mod:`tensorvm.runtime.worker_extension`, installed on every worker by its one plugin), whose
comm handlers it provides, as Dask's own P2P shuffle extension does
(``distributed/shuffle/_worker_plugin.py``); each handler's name carries the tensorvm version
(:func:`tensorvm.runtime.wire_names.handler`: ``tvm_run-0.1.0``):

``tvm_register(parts)``
    install :class:`~tensorvm.runtime.direct.registered_plans.DevicePartition` s (one per device of a plan
    that this worker owns);
``tvm_drop(plan_ids | prefix)``
    forget them (the session closed, or its graph changed);
``tvm_run(plan, device, step, steps, feeds, trace)``
    run one device's partition ``steps`` times: each task's inputs from the feeds, from the
    device's earlier tasks, or — when another device produced them — from this worker's
    :class:`Rendezvous`; after each task, push the values other devices need straight to
    their workers (``tvm_send``); return the device's fetches;
``tvm_send(step, items, loop=False)``
    values for local Recvs, ``[[key, packed value], ...]``: the rendezvous slots
    ``(step, key)`` (one message per task and destination, on one connection per peer that
    the pushing worker keeps open); with ``loop``, values for the loop shards here (their
    :class:`~tensorvm.runtime.direct.loop_box.LoopBox`) that a loop lane could not carry;
``tvm_lane()``
    the port of this worker's *lane* (tcp:// clusters), the name of its Unix socket for peers
    on this host (about half the kernel's cost of TCP loopback a frame; the loop lanes' rule),
    and its frame cap: a plain socket for
    pushes whose values all travel inside the message (small arrays, scalars, strings), each a
    length-prefixed msgpack frame ``[step, items]`` handled as it arrives — a hop then costs a
    few tens of microseconds of Python on each side, not the ~100 of a Dask comm message (its
    read and dispatch); other pushes, those over the cap
    (:data:`~tensorvm.runtime.direct.config.LANE_MAX_FRAME_BYTES`), and every push on a TLS
    cluster, go as ``tvm_send`` on Dask's comm. A lane, like Dask's own
    tcp:// comm, takes any process that can reach the worker: a frame over the cap or not
    ``[step, items]`` closes its connection, and values for steps no ``tvm_run`` here claims
    are bounded in count, bytes and time (:class:`Rendezvous`); and the port of its *loop
    lane* (:mod:`tensorvm.runtime.direct.loop_lane`): the shards of a loop across devices
    write their values there from their kernel threads, and a reader thread hands each to
    the shard waiting for it, without the event loop;
``tvm_cancel(step)``
    the client gave the step up: its ops not yet started never run, its Recvs stop waiting.

This module holds :class:`DataPlane`: those handlers, and how ``tvm_run`` walks a partition's
tasks. What it uses has a module each: the values in transit on this worker
(:class:`~tensorvm.runtime.direct.rendezvous.Rendezvous`), the connections and lanes to its
peers (:class:`~tensorvm.runtime.direct.peer_links.PeerLinks`) and the loops' lanes
(:mod:`tensorvm.runtime.direct.loop_lane`), and how values travel
(:mod:`tensorvm.runtime.direct.packing`): as :func:`~tensorvm.runtime.direct.packing.pack`
makes them, a small NumPy array (or scalar) as its raw bytes inside the message's msgpack
header, anything else through Dask's serialisation, a large array as its own out-of-band
frame. Feeds and fetches of ``tvm_run`` travel the same way.

Kernels run in a thread pool of the worker process (never on its event loop, which must go
on serving heartbeats and rendezvous messages while a kernel blocks) unless the stage is quick
(no op that waits, small inputs: the partition's ``inline`` tasks); Recvs wait on the event
loop. Stages that may wait for other steps (the partition's ``waiting`` tasks: a sync
replica's token wait) each get a thread of their own outside that bounded pool
(:data:`WAITING_STEPS` at most), so any number of waiting replicas leaves the pool to the
steps they wait for (the chief's release).

A step whose client is lost is cancelled: while a ``tvm_run`` runs, the worker checks every
:data:`CLIENT_CHECK_S` whether the connection it came on was closed (the client process died,
or it gave the step up), and cancels the step as ``tvm_cancel`` would — a waiting op gives up
without taking a token, a running stage stops before its next op. On the Dask plane the
scheduler does this by releasing a lost client's tasks. A push to a worker that is gone fails
the step with ``UnavailableError`` naming the destination device. Nothing is ever retried: a
stateful step runs at most once.
"""
from __future__ import annotations

import asyncio
import logging
import select
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from ...framework import errors
from ...vm import _dask_private
from ...vm.interpreter import run_stage
from ...vm.on_worker import extension_of
from ...vm.program import Feed, Result
from ...vm.results import StageResult
from ..wire_names import handler
from .packing import pack, unpack, value_nbytes
from .peer_links import PeerLinks
from .registered_plans import edge_key
from .rendezvous import Rendezvous

logger = logging.getLogger("tensorvm")
STEP_THREADS = 32  # threads running kernels of steps that never wait for other steps
WAITING_STEPS = 1024
"""At most this many stages that may wait (:func:`~tensorvm.runtime.direct.registered_plans.task_may_wait`:
a sync replica's token wait, ...) run at once on one worker, each in a thread of its own
outside the :data:`STEP_THREADS` pool (so waiting steps never hold the threads the steps they
wait for need — a chief's release with more replicas waiting than the pool has threads); one
more fails its step with ``ResourceExhaustedError``."""
CLIENT_CHECK_S = 0.25  # while steps run, how often their requesting connections are checked
INLINE_BYTES = 1 << 18  # a quick stage with inputs up to this size runs on the event loop
_NOT_YET = object()  # an argument from another device not received yet (DataPlane.run)
_FEED, _LOCAL, _REMOTE = 0, 1, 2  # where a task's argument comes from (DataPlane._table)
_INLINE, _WAITING, _POOL = 0, 1, 2  # where a task runs: the event loop (small inputs), ...


class DataPlane:
    """The handlers of one worker (see the module docstring); a worker extension (closed
    with the worker)."""

    def __init__(self, worker, plans, resources):
        self.worker = worker
        self.rendezvous = Rendezvous()
        self.plans = plans  # the worker's PlanStore
        self.resources = resources  # the worker's DeviceResources
        self.pool = ThreadPoolExecutor(STEP_THREADS, thread_name_prefix="tensorvm-step")
        # stages that may wait: threads made on demand (idle ones reused), WAITING_STEPS at most
        self.wait_pool = ThreadPoolExecutor(1 << 16, thread_name_prefix="tensorvm-wait")
        self.waiting = 0  # stages in wait_pool now
        self.running: dict = {}  # (step, device) -> the comm its tvm_run came on
        self._check = None  # the timer checking the running steps' comms
        self._tables: dict = {}  # (plan id, device) -> (partition, its table: _table)
        # pushes to peers, lanes from them (and the loop shards' lanes: loop_lanes)
        self.links = PeerLinks(worker, self.rendezvous)
        self.loop_lanes = self.links.loop_lanes

    def stats(self) -> dict:
        """This worker's rendezvous (:meth:`Rendezvous.stats`) and lanes
        (:meth:`PeerLinks.stats <tensorvm.runtime.direct.peer_links.PeerLinks.stats>`: frames
        read, frames refused, lanes from peers open now)."""
        return {**self.rendezvous.stats(), **self.rendezvous.loops.stats(),
                **self.links.stats()}

    def handlers(self) -> dict:
        """The worker's comm handlers, by versioned name (:mod:`tensorvm.runtime.wire_names`)."""
        return {handler("register"): self.register, handler("drop"): self.drop,
                handler("run"): self.run, handler("send"): self.send,
                handler("cancel"): self.cancel, handler("lane"): self.lane}

    # ---- handlers -------------------------------------------------------------------------
    def register(self, comm=None, parts=()) -> int:
        self.plans.add(parts)
        _freeze_heap()
        return len(self.plans)

    def drop(self, comm=None, plan_ids=None, prefix=None) -> int:
        for key in [k for k in self._tables if (plan_ids is not None and k[0] in plan_ids)
                    or (prefix is not None and k[0].startswith(prefix))]:
            del self._tables[key]
        return self.plans.drop(plan_ids, prefix)

    def send(self, comm=None, step=None, items=(), loop=False) -> None:
        """Values pushed here on Dask's comm (:meth:`PeerLinks.deliver
        <tensorvm.runtime.direct.peer_links.PeerLinks.deliver>`)."""
        self.links.deliver(step, items, loop)

    async def lane(self, comm=None):
        """This worker's lanes, or None where it has none (:meth:`PeerLinks.lane
        <tensorvm.runtime.direct.peer_links.PeerLinks.lane>`)."""
        return await self.links.lane()

    def close(self) -> None:
        """The worker closes: its lane and its connections to peers go."""
        if self._check is not None:
            self._check.cancel()
            self._check = None
        self.links.close()
        self.rendezvous.close()

    def cancel(self, comm=None, step=None) -> None:
        self.resources.cancel_step(step)
        self.rendezvous.abort(step, errors.CancelledError(f"step {step} was cancelled"))

    async def run(self, comm=None, plan=None, device=None, step=None, steps=1, feeds=(),
                  trace=False) -> dict:
        from distributed.protocol import to_serialize
        part = self.plans.get(plan, device)
        feeds = {i: unpack(v) for i, v in feeds}
        loop = asyncio.get_running_loop()
        infos: list = [] if trace else None
        sent: list = [] if trace else None
        running = self.running
        key = (step, device)
        running[key] = comm
        _dask_private.no_offload(comm)  # the reply: small values, or serialised already
        self.rendezvous.open_step(step)
        if self._check is None:
            self._check = loop.call_later(CLIENT_CHECK_S, self._check_clients)
        try:
            # stages on the event loop (inline) run as this worker (get_worker() in their
            # kernels): set once for the whole run, not around each stage
            with _dask_private.as_worker_thread(self.worker):
                table = self._table(part)
                if table is None:  # no tensor from or to another device: K steps in one thread
                    results = await self._run_local(loop, part, step, steps, feeds, infos)
                for k in range(steps if table is not None else 0):
                    results: dict = {}
                    received: dict = {}
                    for t, program, argspec, mode, pushes, drops in table:
                        args = []
                        for kind, v in argspec:
                            if kind == _FEED:
                                args.append(feeds[v])
                            elif kind == _LOCAL:
                                args.append(results[v])
                            else:  # from another device (an argument may be read twice)
                                got = received.get(v, _NOT_YET)
                                if got is _NOT_YET:
                                    got = received[v] = await self.rendezvous.get(
                                        step, f"{k}|{v}")
                                args.append(got)
                        if mode == _INLINE and _nbytes_args(args) <= INLINE_BYTES:
                            # a quick stage: a thread hop would cost more than the kernels
                            out = self._run_stage(program, step, args, infos)
                        elif mode == _WAITING:
                            out = await self._run_waiting(loop, part, t, step, args, infos)
                        else:
                            out = await loop.run_in_executor(self.pool, self._run_task, program,
                                                             step, args, infos)
                        results[t.name] = out
                        # one message per destination; written at once (the write does not wait
                        # for the peer), so the next task runs right after
                        for dst, edges in pushes:
                            items = []
                            for edge, index in edges:
                                value = out if index < 0 else StageResult((out[index],))
                                if sent is not None:
                                    sent.append([edge, dst, value_nbytes(value)])
                                items.append((f"{k}|{edge}", value))
                            await self.links.push(part, dst, step, items)
                        # results no later task reads: let go of them now (a variable's value read
                        # for another device must not be alive when this step's update runs)
                        for name in drops:
                            del results[name]
                        out = value = items = None
        except Exception as exc:  # noqa: BLE001 - handed to the session, which raises it
            self.rendezvous.abort(step, exc)
            # As a value, not a raise: Dask's server would log an expected error (a cancelled
            # step, the end of an input) as its own failure.
            return {"error": to_serialize(exc)}
        finally:
            del running[key]
            self.rendezvous.close_step(step)
        fetched = [[pos, pack(results[task][index])] for pos, task, index in part.fetches]
        return {"fetches": fetched, "trace": infos, "sent": sent}

    def _table(self, part) -> tuple | None:
        """How ``tvm_run`` walks ``part``'s tasks each iteration (made once per partition):
        per task ``(task, program, argument sources, mode, pushes by destination, results
        dropped after it)``; None for a partition that neither receives from nor sends to
        another device and holds a stage that runs in a thread (a sync chief's
        take-apply-release, a step on one device): its K iterations then run in one thread
        (:meth:`_run_local`), not one thread hop each."""
        key = (part.plan_id, part.device)
        hit = self._tables.get(key)
        if hit is not None and hit[0] is part:
            return hit[1]
        names = {t.name for t in part.tasks}
        table = []
        for t in part.tasks:
            argspec = tuple((_FEED, a.index) if a.__class__ is Feed else
                            (_LOCAL, a.task) if a.__class__ is Result and a.task in names else
                            (_REMOTE, edge_key(a)) for a in t.args)
            mode = _WAITING if t.name in part.waiting else \
                _INLINE if t.name in part.inline else _POOL
            by_dst: dict = {}
            for edge, dst, index in part.pushes.get(t.name, ()):
                by_dst.setdefault(dst, []).append((edge, index))
            table.append((t, t.program, argspec, mode,
                          tuple((d, tuple(e)) for d, e in by_dst.items()),
                          tuple(part.drops.get(t.name, ()))))
        local = not part.pushes and all(kind != _REMOTE for entry in table
                                        for kind, _ in entry[2])
        if local and any(entry[3] != _INLINE for entry in table):
            table = None
        if len(self._tables) > 4096:  # partitions of plans dropped long ago
            self._tables.clear()
        self._tables[key] = (part, table)
        return table

    async def _run_local(self, loop, part, step, steps, feeds, infos) -> dict:
        """All ``steps`` iterations of a partition that exchanges nothing with other devices,
        in one call on a thread (the waiting pool's when a stage may wait); returns the last
        iteration's results."""
        def run_all():
            results: dict = {}
            for _ in range(steps):
                results = {}
                for t in part.tasks:
                    args = [feeds[a.index] if a.__class__ is Feed else results[a.task]
                            for a in t.args]
                    results[t.name] = self._run_task(t.program, step, args, infos)
                    for name in part.drops.get(t.name, ()):
                        del results[name]
            return results
        if not part.waiting:
            return await loop.run_in_executor(self.pool, run_all)
        return await self._in_wait_pool(loop, part, step, None, run_all)

    # ---- helpers --------------------------------------------------------------------------
    async def _run_waiting(self, loop, part, t, step, args, infos):
        """A stage that may wait for other steps, in a thread outside the bounded pool."""
        return await self._in_wait_pool(loop, part, step, t.name, self._run_task, t.program,
                                        step, args, infos)

    async def _in_wait_pool(self, loop, part, step, stage, fn, *args):
        """``fn(*args)`` in a thread of the waiting pool, at most :data:`WAITING_STEPS` at once
        on this worker: past that, ResourceExhaustedError and ``stage`` (a task's name, or
        None: the whole ``step``) is not started."""
        if self.waiting >= WAITING_STEPS:
            what = f"step {step}" if stage is None else f"stage {stage} of step {step}"
            raise errors.ResourceExhaustedError(
                f"{part.device}: {self.waiting} stages that wait for other steps (token waits, "
                f"accumulators) run on this worker already, the most allowed "
                f"(tensorvm.runtime.direct.data_plane.WAITING_STEPS = {WAITING_STEPS}); "
                f"{what} was not started")
        self.waiting += 1
        try:
            return await loop.run_in_executor(self.wait_pool, fn, *args)
        finally:
            self.waiting -= 1

    def _check_clients(self) -> None:
        """On the event loop, every :data:`CLIENT_CHECK_S` while steps run: a step whose
        client's connection closed (the client died or gave the step up) is cancelled — its
        waiting ops give up without taking anything, its running stages stop before their
        next op, its Recvs stop waiting — as Dask's scheduler releases a lost client's tasks."""
        self._check = None
        gone = {step for (step, _), comm in list(self.running.items()) if _comm_gone(comm)}
        for step in gone:
            logger.info("tensorvm: the client of step %s is gone (its connection closed); "
                        "cancelling the step", step)
            self.cancel(step=step)
        if self.running:
            self._check = asyncio.get_running_loop().call_later(CLIENT_CHECK_S,
                                                                self._check_clients)

    def _run_task(self, program, step, args, infos):
        """A stage in a thread of a pool, run as this worker (``get_worker()``)."""
        with _dask_private.as_worker_thread(self.worker):
            return self._run_stage(program, step, args, infos)

    def _run_stage(self, program, step, args, infos):
        if infos is None:
            return run_stage(program, self.resources, step, 1, *args)
        start = time.time()
        out = run_stage(program, self.resources, step, 1, *args)
        infos.append({"task": program.name, "device": program.device,
                      "worker": self.worker.address, "start": start, "end": time.time(),
                      "ops": list(program.op_names),
                      "export_bytes": [value_nbytes(v) for v in out]})
        return out


_FROZEN = False


def _freeze_heap() -> None:
    """Move this worker process's objects into the garbage collector's permanent generation
    (``gc.freeze``), once, when its data plane receives its first plan: the tens of thousands
    of long-lived objects of a Dask worker and tensorvm (modules, classes, the worker's
    state) are then never traversed again, so a full collection that a training loop's
    allocations trigger costs a few ms instead of ~50 ms of stalled steps. Objects made later
    are collected as before; only cyclic garbage already present at this point is kept."""
    global _FROZEN
    if not _FROZEN:
        _FROZEN = True
        import gc
        gc.freeze()


_HANGUP = getattr(select, "POLLRDHUP", 0x2000) | select.POLLHUP | select.POLLERR


def _comm_gone(comm) -> bool:
    """Whether the peer of a comm that is not being read (a ``tvm_run`` in progress: the client
    sends nothing until its reply) closed it: the comm knows, or its socket reports the hang-up
    (a poll, no read: the stream's bytes stay where Dask's comm will read them)."""
    if comm is None:
        return False
    if comm.closed():
        return True
    sock = getattr(getattr(comm, "stream", None), "socket", None)
    if sock is None:
        return False
    try:
        poller = select.poll()
        poller.register(sock.fileno(), _HANGUP)
        return bool(poller.poll(0))
    except (OSError, ValueError):  # closed under us
        return True


def _nbytes_args(args) -> int:
    n = 0
    for a in args:
        n += a.nbytes if type(a) is np.ndarray else value_nbytes(a)
    return n


def data_plane_stats(dask_worker=None) -> dict:
    """The data plane's counters on a worker (:meth:`DataPlane.stats`), e.g.
    ``client.run(data_plane_stats)``: values in its rendezvous, unclaimed ones, steps whose
    values were dropped, lane frames read and refused."""
    if dask_worker is None:
        from distributed import get_worker
        dask_worker = get_worker()
    return extension_of(dask_worker).data_plane.stats()
