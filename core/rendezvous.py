"""The direct data plane, worker side: registered partitions run by one message, tensors
handed worker to worker through a per-worker rendezvous (TF's ``RunGraph`` and
``Rendezvous``).

:func:`install` (called by the worker plugin ``ResourcePlugin`` on every worker) adds comm
handlers to the Dask worker, as Dask's own P2P shuffle extension does
(``distributed/shuffle/_worker_plugin.py``):

``tvm_register(parts)``
    install :class:`~tensorvm.registered_plans.DevicePartition` s (one per device of a plan
    that this worker owns);
``tvm_drop(plan_ids | prefix)``
    forget them (the session closed, or its graph changed);
``tvm_run(plan, device, step, steps, feeds, trace)``
    run one device's partition ``steps`` times: each task's inputs from the feeds, from the
    device's earlier tasks, or — when another device produced them — from this worker's
    :class:`Rendezvous`; after each task, push the values other devices need straight to
    their workers (``tvm_send``); return the device's fetches;
``tvm_send(step, items)``
    values for local Recvs, ``[[key, packed value], ...]``: the rendezvous slots
    ``(step, key)`` (one message per task and destination, on one connection per peer that
    the pushing worker keeps open);
``tvm_lane()``
    the port of this worker's *lane* (tcp:// clusters): a plain socket for pushes whose values
    all travel inside the message (small arrays and scalars), each a length-prefixed msgpack
    frame ``[step, items]`` handled as it arrives — a hop then costs a few tens of microseconds
    of Python on each side, not the ~100 of a Dask comm message (its read and dispatch); other
    pushes, and every push on a TLS cluster, go as ``tvm_send`` on Dask's comm;
``tvm_cancel(step)``
    the client gave the step up: its ops not yet started never run, its Recvs stop waiting.

Values travel as :func:`pack` makes them: a small NumPy array (or scalar) as its raw bytes
inside the message's msgpack header (Dask's general serialisation costs ~10x more per small
value), anything else through Dask's serialisation, a large array as its own out-of-band frame
behind :data:`~tensorvm.runtime.ALIGN_GUARD` (so it is received into a buffer of its own).
Feeds and fetches of ``tvm_run`` travel the same way.

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
import socket
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from . import errors
from .registered_plans import edge_key, plans_of
from .runtime import ALIGN_GUARD, resources_of, run_stage

logger = logging.getLogger("tensorvm")
STEP_THREADS = 32  # threads running kernels of steps that never wait for other steps
WAITING_STEPS = 1024
"""At most this many stages that may wait (:func:`~tensorvm.registered_plans.task_may_wait`:
a sync replica's token wait, ...) run at once on one worker, each in a thread of its own
outside the :data:`STEP_THREADS` pool (so waiting steps never hold the threads the steps they
wait for need — a chief's release with more replicas waiting than the pool has threads); one
more fails its step with ``ResourceExhaustedError``."""
CLIENT_CHECK_S = 0.25  # while steps run, how often their requesting connections are checked
INLINE_BYTES = 1 << 18  # a quick stage with inputs up to this size runs on the event loop
SMALL_BYTES = 1 << 16  # arrays up to this size travel inside a message's header
_PLAIN = frozenset("biufc")  # dtype kinds sent as raw bytes


def pack(value):
    """``value`` (an array, a scalar, a tuple of them, anything Dask serialises) as data for a
    data-plane message: small numeric arrays and NumPy scalars as ``(tag, dtype, shape,
    bytes)``, a tuple item by item, a large array behind an alignment guard as one out-of-band
    frame (received into a buffer of its own, without a copy), anything else through Dask's
    serialisation. :func:`unpack` gives back an equal value, bit for bit, with the same dtype,
    shape and memory order (arrays writeable)."""
    t = type(value)
    if t is np.ndarray:
        dt = value.dtype
        if value.nbytes <= SMALL_BYTES and dt.kind in _PLAIN:
            if value.flags.c_contiguous:
                return ("a", dt.str, value.shape, value.tobytes())
            if value.flags.f_contiguous:
                return ("f", dt.str, value.shape, value.tobytes(order="F"))
        elif value.nbytes > SMALL_BYTES:
            # Serialised here, not by the comm: its frames go as they are, where the comm would
            # cut a large one into 64 MiB shards that the receiver then copies back together.
            from distributed.protocol.serialize import Serialized, serialize
            return ("b", Serialized(*serialize((ALIGN_GUARD, value))))
    elif t is tuple:
        if value and value[0] is ALIGN_GUARD:
            return ("g", [pack(v) for v in value[1:]])
        return ("t", [pack(v) for v in value])
    elif isinstance(value, np.generic) and value.dtype.kind in _PLAIN:
        return ("s", value.dtype.str, value.tobytes())
    from distributed.protocol import to_serialize
    return ("o", to_serialize(value))


def unpack(data):
    """The value :func:`pack` made ``data`` of (after the message's trip)."""
    tag = data[0]
    if tag == "a":
        return np.frombuffer(data[3], data[1]).reshape(data[2]).copy()
    if tag == "g":
        return (ALIGN_GUARD,) + tuple(unpack(v) for v in data[1])
    if tag == "s":
        return np.frombuffer(data[2], data[1])[0]
    if tag == "t":
        return tuple(unpack(v) for v in data[1])
    if tag == "f":
        return np.frombuffer(data[3], data[1]).reshape(data[2], order="F").copy(order="K")
    if tag == "b":
        return data[1][1]
    return data[1]


class Rendezvous:
    """Values in transit between devices, by step and key (``"<iteration>|<edge>"``), on one
    worker's event loop. A Recv that comes first waits; a value that comes first waits for
    its Recv; an aborted step's Recvs raise its error and its late values are dropped."""

    MAX_ABORTED = 4096

    def __init__(self):
        self._steps: dict[str, dict[str, asyncio.Future]] = {}
        self._aborted: dict[str, BaseException] = {}

    def _slot(self, step: str, key: str) -> asyncio.Future:
        slots = self._steps.setdefault(step, {})
        fut = slots.get(key)
        if fut is None:
            fut = slots[key] = asyncio.get_running_loop().create_future()
        return fut

    def put(self, step: str, key: str, value) -> None:
        if step in self._aborted:
            return
        fut = self._slot(step, key)
        if not fut.done():
            fut.set_result(value)

    async def get(self, step: str, key: str):
        if step in self._aborted:
            raise self._aborted[step]
        fut = self._slot(step, key)
        try:
            return await fut
        finally:
            slots = self._steps.get(step)
            if slots is not None:
                slots.pop(key, None)
                if not slots:
                    del self._steps[step]

    def abort(self, step: str, exc: BaseException) -> None:
        # Kept for late Recvs: a fresh error without a traceback (frames would hold tensors).
        exc = errors.CancelledError(f"step {step} was given up ({type(exc).__name__}: "
                                    f"{str(exc)[:200]})")
        self._aborted[step] = exc
        while len(self._aborted) > self.MAX_ABORTED:
            del self._aborted[next(iter(self._aborted))]
        for fut in self._steps.pop(step, {}).values():
            if not fut.done():
                fut.set_exception(exc)
            elif not fut.cancelled():
                fut.exception()  # a value nobody will read

    def __len__(self):
        return sum(len(s) for s in self._steps.values())


class _LaneReceiver(asyncio.Protocol):
    """The receiving end of a lane: frames ``<u32 length><msgpack [step, items]>`` put into
    the rendezvous as they arrive (on the worker's event loop, no coroutine per message)."""

    def __init__(self, plane):
        self.plane = plane
        self.buf = bytearray()
        self.transport = None

    def connection_made(self, transport):
        self.transport = transport
        self.plane._incoming.add(transport)
        _nodelay(transport)

    def connection_lost(self, exc):
        self.plane._incoming.discard(self.transport)

    def data_received(self, data):
        import msgpack
        buf = self.buf
        buf += data
        while len(buf) >= 4:
            n = int.from_bytes(buf[:4], "little")
            if len(buf) < 4 + n:
                break
            frame = bytes(buf[4:4 + n])
            del buf[:4 + n]
            try:
                step, items = msgpack.unpackb(frame)
                self.plane.send(None, step, items)
            except Exception:  # a garbled stream: drop the connection
                logger.exception("tensorvm data plane: bad lane frame; closing the lane")
                self.transport.close()
                return


class _LaneSender(asyncio.Protocol):
    """The sending end of a lane (nothing comes back on it)."""

    def __init__(self):
        self.transport = None
        self.closed = False

    def connection_made(self, transport):
        self.transport = transport
        _nodelay(transport)

    def connection_lost(self, exc):
        self.closed = True

    @property
    def usable(self) -> bool:
        return not self.closed and not self.transport.is_closing()


def _nodelay(transport) -> None:
    sock = transport.get_extra_info("socket")
    if sock is not None:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


_NO_LANE = object()


class DataPlane:
    """The handlers of one worker (see the module docstring); a worker extension (closed
    with the worker)."""

    def __init__(self, worker):
        self.worker = worker
        self.rendezvous = Rendezvous()
        self.plans = plans_of(worker)
        self.resources = resources_of(worker)
        self.pool = ThreadPoolExecutor(STEP_THREADS, thread_name_prefix="tensorvm-step")
        # stages that may wait: threads made on demand (idle ones reused), WAITING_STEPS at most
        self.wait_pool = ThreadPoolExecutor(1 << 16, thread_name_prefix="tensorvm-wait")
        self.waiting = 0  # stages in wait_pool now
        self.running: dict = {}  # (step, device) -> the comm its tvm_run came on
        self._check = None  # the timer checking the running steps' comms
        self.bytes_pushed = 0  # to other workers, since the worker started
        self._peers: dict = {}  # address -> the comm pushes to that worker go on
        self._locks: dict = {}  # address -> lock while connecting
        self._lanes: dict = {}  # address -> _LaneSender to that worker, or None (no lane)
        self._lane_server = None
        self._lane_lock = None
        self._incoming: set = set()  # transports of the lanes from peers

    def handlers(self) -> dict:
        return {"tvm_register": self.register, "tvm_drop": self.drop, "tvm_run": self.run,
                "tvm_send": self.send, "tvm_cancel": self.cancel, "tvm_lane": self.lane}

    # ---- handlers -------------------------------------------------------------------------
    def register(self, comm=None, parts=()) -> int:
        self.plans.add(parts)
        return len(self.plans)

    def drop(self, comm=None, plan_ids=None, prefix=None) -> int:
        return self.plans.drop(plan_ids, prefix)

    def send(self, comm=None, step=None, items=()) -> None:
        for key, data in items:
            self.rendezvous.put(step, key, unpack(data))

    async def lane(self, comm=None):
        """The port of this worker's lane (started on first use), or None where the worker's
        comms are not plain TCP (TLS: pushes keep to Dask's encrypted comms)."""
        from distributed.comm.addressing import get_address_host, parse_address
        if parse_address(self.worker.address)[0] != "tcp":
            return None
        if self._lane_lock is None:
            self._lane_lock = asyncio.Lock()
        async with self._lane_lock:
            if self._lane_server is None:
                self._lane_server = await asyncio.get_running_loop().create_server(
                    lambda: _LaneReceiver(self), get_address_host(self.worker.address), 0)
        return self._lane_server.sockets[0].getsockname()[1]

    def close(self) -> None:
        """The worker closes: its lane and its connections to peers go."""
        if self._check is not None:
            self._check.cancel()
            self._check = None
        if self._lane_server is not None:
            self._lane_server.close()
            self._lane_server = None
        for lane in self._lanes.values():
            if lane is not None and lane.transport is not None:
                lane.transport.close()
        self._lanes.clear()
        for transport in list(self._incoming):
            transport.close()

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
        if self._check is None:
            self._check = loop.call_later(CLIENT_CHECK_S, self._check_clients)
        try:
            for k in range(steps):
                results: dict = {}
                received: dict = {}
                for t in part.tasks:
                    args = []
                    for a in t.args:
                        if a[0] == "feed":
                            args.append(feeds[a[1]])
                        elif a[0] == "task" and a[1] in results:
                            args.append(results[a[1]])
                        else:  # a Recv (an argument may be read more than once)
                            if a not in received:
                                received[a] = await self.rendezvous.get(
                                    step, f"{k}|{edge_key(a)}")
                            args.append(received[a])
                    if t.name in part.inline and _nbytes_args(args) <= INLINE_BYTES:
                        # a quick stage: a thread hop would cost more than the kernels
                        out = self._run_task(t.program, step, args, infos)
                    elif t.name in part.waiting:
                        out = await self._run_waiting(loop, part, t, step, args, infos)
                    else:
                        out = await loop.run_in_executor(self.pool, self._run_task, t.program,
                                                         step, args, infos)
                    results[t.name] = out
                    dests = part.pushes.get(t.name)
                    if dests:
                        # one message per destination; written at once (the write does not
                        # wait for the peer), so the next task runs right after
                        by_dst: dict = {}
                        for edge, dst, index in dests:
                            value = out if index < 0 else (ALIGN_GUARD, out[index + 1])
                            if sent is not None:
                                sent.append([edge, dst, _nbytes(value)])
                            by_dst.setdefault(dst, []).append((f"{k}|{edge}", value))
                        for dst, items in by_dst.items():
                            await self._push(part, dst, step, items)
                    # results no later task reads: let go of them now (a variable's value read
                    # for another device must not be alive when this step's update runs)
                    for name in part.drops.get(t.name, ()):
                        del results[name]
                    out = value = by_dst = items = None
        except Exception as exc:  # noqa: BLE001 - handed to the session, which raises it
            self.rendezvous.abort(step, exc)
            # As a value, not a raise: Dask's server would log an expected error (a cancelled
            # step, the end of an input) as its own failure.
            return {"error": to_serialize(exc)}
        finally:
            del running[key]
        fetched = [[pos, pack(results[task][index + 1])] for pos, task, index in part.fetches]
        return {"fetches": fetched, "trace": infos, "sent": sent}

    # ---- helpers --------------------------------------------------------------------------
    async def _run_waiting(self, loop, part, t, step, args, infos):
        """A stage that may wait for other steps, in a thread outside the bounded pool."""
        if self.waiting >= WAITING_STEPS:
            raise errors.ResourceExhaustedError(
                f"{part.device}: {self.waiting} stages that wait for other steps (token waits, "
                f"accumulators) run on this worker already, the most allowed "
                f"(tensorvm.rendezvous.WAITING_STEPS = {WAITING_STEPS}); stage {t.name} of "
                f"step {step} was not started")
        self.waiting += 1
        try:
            return await loop.run_in_executor(self.wait_pool, self._run_task, t.program, step,
                                              args, infos)
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
        with _as_worker_thread(self.worker):
            if infos is None:
                return run_stage(program, self.resources, step, 1, *args)
            start = time.time()
            out = run_stage(program, self.resources, step, 1, *args)
            infos.append({"task": program.name, "device": program.device,
                          "worker": self.worker.address, "start": start, "end": time.time(),
                          "ops": list(program.op_names),
                          "export_bytes": [_nbytes(v) for v in out[1:]]})
            return out

    async def _push(self, part, dst: str, step: str, items: list) -> None:
        """Hand ``items`` (``[(key, value)]``) to ``dst``'s rendezvous: one one-way
        ``tvm_send`` message on this worker's connection to the peer (the Recv side sends no
        acknowledgement; a lost peer still fails the write, and its own step fails with it)."""
        addr = part.peers[dst]
        if addr == self.worker.address:
            for key, value in items:
                self.rendezvous.put(step, key, value)
            return
        import msgpack
        from distributed.comm.core import CommClosedError
        packed = [[key, pack(value)] for key, value in items]
        try:
            lane = self._lanes.get(addr, _NO_LANE)
            if lane is _NO_LANE or (lane is not None and not lane.usable):
                lane = await self._open_lane(addr)
            try:
                frame = msgpack.packb([step, packed]) if lane is not None else None
            except TypeError:  # a value that travels as frames of its own: Dask's comm
                frame = None
            if frame is not None:
                lane.transport.write(len(frame).to_bytes(4, "little") + frame)
            else:
                comm = self._peers.get(addr)
                if comm is None or comm.closed():
                    comm = await self._connect(addr)
                await comm.write({"op": "tvm_send", "reply": False, "step": step,
                                  "items": packed})
        except (OSError, CommClosedError) as exc:
            bad = self._peers.pop(addr, None)
            if bad is not None:
                bad.abort()
            self._lanes.pop(addr, None)
            err = errors.UnavailableError(
                f"device {dst} is unavailable: its worker ({addr}) cannot be reached from "
                f"{part.device} ({type(exc).__name__}: {exc}); state on it (variables, "
                "queues) may be lost — restore from the last checkpoint")
            err.device = dst
            raise err from None
        self.bytes_pushed += sum(_nbytes(v) for _, v in items)

    async def _open_lane(self, addr: str):
        """A lane to the worker at ``addr`` (its port asked over Dask's comm), or None where it
        has none."""
        lock = self._locks.get(addr)
        if lock is None:
            lock = self._locks[addr] = asyncio.Lock()
        async with lock:
            lane = self._lanes.get(addr, _NO_LANE)
            if lane is _NO_LANE or (lane is not None and not lane.usable):
                from distributed.comm.addressing import get_address_host
                port = await self.worker.rpc(addr).tvm_lane()
                lane = None
                if port is not None:
                    _, lane = await asyncio.get_running_loop().create_connection(
                        _LaneSender, get_address_host(addr), port)
                self._lanes[addr] = lane
            return lane

    async def _connect(self, addr: str):
        """This worker's connection to the peer at ``addr`` for pushes: taken once from the
        worker's connection pool and kept (the pool still closes it with the worker)."""
        lock = self._locks.get(addr)
        if lock is None:
            lock = self._locks[addr] = asyncio.Lock()
        async with lock:
            comm = self._peers.get(addr)
            if comm is None or comm.closed():
                comm = await self.worker.rpc.connect(addr)
                # no size walk of every message to decide on offloading its serialisation
                # (large arrays come serialised already, see pack)
                comm.allow_offload = False
                self._peers[addr] = comm
            return comm


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
        n += _nbytes(a) if isinstance(a, tuple) else int(getattr(a, "nbytes", 0) or 0)
    return n


def _nbytes(value) -> int:
    if isinstance(value, tuple):
        return sum(_nbytes(v) for v in value[1:])  # [0] is the alignment guard
    return int(getattr(value, "nbytes", 0) or 0)


class _as_worker_thread:
    """Make ``distributed.get_worker()`` answer in a thread of the data plane's pool, as it
    does in a Dask task (kernels that name their worker — readers, savers — call it).

    Private Dask API, the one place it is used: ``get_worker`` reads the context variable
    ``distributed.worker._worker_cvar``, which Dask sets only around its own tasks."""

    def __init__(self, worker):
        self.worker = worker
        self.token = None

    def __enter__(self):
        from distributed.worker import _worker_cvar
        self.token = _worker_cvar.set(self.worker)

    def __exit__(self, *exc):
        from distributed.worker import _worker_cvar
        _worker_cvar.reset(self.token)


# Dask's TCP comm cuts a frame over ``distributed.comm.shard`` (64 MiB) into shards, and the
# receiver copies a sharded array back together — unless it was the message's first buffer,
# which lands unaligned with the header instead. A tensorvm worker sends every tensor behind
# ALIGN_GUARD (the Dask plane's results, the direct plane's large values): unsplit, it arrives
# in an aligned buffer of its own, with no copy (256 MiB Send/Recv on the Dask plane: ~0.4x ->
# ~1x of plain Dask). TLS comms keep their own limit (2 GiB at most, OpenSSL's).
UNSPLIT_BYTES = 1 << 30


def _unsplit_large_frames() -> None:
    from distributed.comm.tcp import TCP
    TCP.max_shard_size = max(TCP.max_shard_size, UNSPLIT_BYTES)


def install(worker) -> DataPlane:
    """Add the data plane's handlers to a Dask worker (once per worker process), and let its
    TCP comms send tensors up to :data:`UNSPLIT_BYTES` as one frame."""
    plane = getattr(worker, "_tensorvm_data_plane", None)
    if plane is None:
        _unsplit_large_frames()
        plane = worker._tensorvm_data_plane = DataPlane(worker)
        worker.handlers.update(plane.handlers())
        worker.extensions["tensorvm-data-plane"] = plane  # closed with the worker
    return plane
