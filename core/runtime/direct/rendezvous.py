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
    read and dispatch); other pushes, those over the cap (:data:`LANE_MAX_FRAME_BYTES`), and
    every push on a TLS cluster, go as ``tvm_send`` on Dask's comm. A lane, like Dask's own
    tcp:// comm, takes any process that can reach the worker: a frame over the cap or not
    ``[step, items]`` closes its connection, and values for steps no ``tvm_run`` here claims
    are bounded in count, bytes and time (:class:`Rendezvous`); and the port of its *loop
    lane* (:mod:`tensorvm.runtime.direct.loop_lane`): the shards of a loop across devices
    write their values there from their kernel threads, and a reader thread hands each to
    the shard waiting for it, without the event loop;
``tvm_cancel(step)``
    the client gave the step up: its ops not yet started never run, its Recvs stop waiting.

Values travel as :func:`pack` makes them: a small NumPy array (or scalar) as its raw bytes
inside the message's msgpack header (Dask's general serialisation costs ~10x more per small
value), anything else through Dask's serialisation, a large array as its own out-of-band frame
(a :class:`~tensorvm.vm.results.StageResult` of one value, whose wire form gives it a buffer of
its own). Feeds and fetches of ``tvm_run`` travel the same way.

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

import msgpack
import numpy as np

from ...framework import errors
from .registered_plans import edge_key
from ..unavailable import device_unavailable
from .config import (LANE_MAX_FRAME_BYTES, UNCLAIMED_MAX_BYTES, UNCLAIMED_MAX_VALUES,  # noqa: F401
                     UNCLAIMED_TTL_S, lane_max_frame_bytes, over_bounds, resolve_bounds,
                     unclaimed_bounds)
from .lanes import LaneReceiver, LaneSender
from .loop_box import LoopBox
from .loop_lane import LoopLanes, local_listener, local_socket
from ..wire_names import handler
from ...vm import _dask_private
from ...vm.interpreter import run_stage
from ...vm.program import Feed, Result
from ...vm.results import StageResult
from ...vm.on_worker import extension_of

logger = logging.getLogger("tensorvm")
SEND, LANE = handler("send"), handler("lane")  # the handlers a worker calls on its peers
STEP_THREADS = 32  # threads running kernels of steps that never wait for other steps
WAITING_STEPS = 1024
"""At most this many stages that may wait (:func:`~tensorvm.runtime.direct.registered_plans.task_may_wait`:
a sync replica's token wait, ...) run at once on one worker, each in a thread of its own
outside the :data:`STEP_THREADS` pool (so waiting steps never hold the threads the steps they
wait for need — a chief's release with more replicas waiting than the pool has threads); one
more fails its step with ``ResourceExhaustedError``."""
CLIENT_CHECK_S = 0.25  # while steps run, how often their requesting connections are checked
INLINE_BYTES = 1 << 18  # a quick stage with inputs up to this size runs on the event loop
SMALL_BYTES = 1 << 16  # arrays up to this size travel inside a message's header
_PLAIN = frozenset("biufc")  # dtype kinds sent as raw bytes
SMALL_STRINGS = 1 << 10  # string arrays of up to this many bytes objects travel as their bytes

def pack(value):
    """``value`` (an array, a scalar, a tuple of them, anything Dask serialises) as data for a
    data-plane message: small numeric arrays and NumPy scalars as ``(tag, dtype, shape,
    bytes)``, small string arrays (a step token) and strings as themselves, a tuple item by
    item, a large array behind an alignment guard as one out-of-band
    frame (received into a buffer of its own, without a copy), anything else through Dask's
    serialisation. :func:`unpack` gives back an equal value, bit for bit, with the same dtype,
    shape and memory order (arrays writeable)."""
    t = type(value)
    if t is np.ndarray:
        dt = value.dtype
        if dt.kind == "O" and value.size <= SMALL_STRINGS and value.flags.c_contiguous:
            # a string tensor (a step token: a 0-d array of bytes) as its bytes, where Dask's
            # serialisation would pickle it, a pickle each way every step
            items = value.ravel().tolist()
            if all(map(_text, items)) and sum(map(len, items)) <= SMALL_BYTES:
                return ("O", value.shape, items)
        if value.nbytes <= SMALL_BYTES and dt.kind in _PLAIN:
            if value.flags.c_contiguous:
                return ("a", dt.str, value.shape, value.tobytes())
            if value.flags.f_contiguous:
                return ("f", dt.str, value.shape, value.tobytes(order="F"))
        elif value.nbytes > SMALL_BYTES:
            # Serialised here, not by the comm: its frames go as they are, where the comm would
            # cut a large one into 64 MiB shards that the receiver then copies back together.
            from distributed.protocol.serialize import Serialized, serialize
            return ("b", Serialized(*serialize(StageResult((value,)))))
    elif t is tuple:
        return ("t", [pack(v) for v in value])
    elif t is StageResult:
        return ("r", [pack(v) for v in value])
    elif isinstance(value, np.generic) and value.dtype.kind in _PLAIN:
        return ("s", value.dtype.str, value.tobytes())
    elif (t is bytes or t is str) and len(value) <= SMALL_BYTES and _text(value):
        return ("y", value)
    from distributed.protocol import to_serialize
    return ("o", to_serialize(value))


def _text(v) -> bool:
    """Whether ``v`` travels as itself in a msgpack message: bytes, or a str UTF-8 can encode
    (msgpack keeps the two apart; a lone surrogate would fail the message)."""
    t = type(v)
    if t is bytes:
        return True
    if t is not str:
        return False
    if v.isascii():
        return True
    try:
        v.encode()
    except UnicodeEncodeError:
        return False
    return True


def unpack(data):
    """The value :func:`pack` made ``data`` of (after the message's trip)."""
    tag = data[0]
    if tag == "a":
        return np.frombuffer(data[3], data[1]).reshape(data[2]).copy()
    if tag == "r":
        return StageResult([unpack(v) for v in data[1]])
    if tag == "s":
        return np.frombuffer(data[2], data[1])[0]
    if tag == "t":
        return tuple(unpack(v) for v in data[1])
    if tag == "O":
        out = np.empty(len(data[2]), object)
        out[:] = data[2]
        return out.reshape(data[1])
    if tag == "y":
        return data[1]
    if tag == "f":
        return np.frombuffer(data[3], data[1]).reshape(data[2], order="F").copy(order="K")
    if tag == "b":
        return data[1][0]
    return data[1]


class Rendezvous:
    """Values in transit between devices, by step and key (``"<iteration>|<edge>"``), on one
    worker's event loop. A Recv that comes first waits; a value that comes first waits for
    its Recv; an aborted step's Recvs raise its error and its late values are dropped.

    A value that comes first is *held*. While a ``tvm_run`` of its step runs on this worker
    (:meth:`open_step` .. :meth:`close_step`) it is kept, whatever its count or age: the
    program bounds what its running steps send. The values of steps that no ``tvm_run`` here
    runs (yet) are *unclaimed*: a Send that came before its step's ``tvm_run`` (a few
    milliseconds usually, seconds behind a large feed), or values for a step nobody will ever
    run (a peer's bug, or a process writing to the lane). Those are bounded: at most
    ``max_values`` values and ``max_bytes`` bytes (the oldest steps' values go first), each
    for at most ``ttl`` seconds. A step whose values were dropped is given up here as if
    aborted: its later values are dropped too, and a Recv that comes for it after all fails
    with ``ResourceExhaustedError`` naming the bound (never waits forever). See
    :func:`unclaimed_bounds` for the defaults and their Dask config keys."""

    MAX_ABORTED = 4096

    def __init__(self, ttl: float | None = None, max_values: int | None = None,
                 max_bytes: int | None = None, clock=time.monotonic):
        self.ttl, self.max_values, self.max_bytes = resolve_bounds(ttl, max_values, max_bytes)
        self.clock = clock
        self._steps: dict[str, dict[str, asyncio.Future]] = {}
        self._aborted: dict[str, BaseException] = {}
        self._open: dict[str, int] = {}  # step -> tvm_runs of it running on this worker
        self._held: dict[str, list] = {}  # step -> [values, bytes] held for it (no Recv yet)
        self._loose: dict[str, float] = {}  # unclaimed steps -> since when, oldest first
        self._loose_values = 0
        self._loose_bytes = 0
        self.steps_dropped = 0
        self._timer = None
        self._warned = False
        # the values of loops across devices, waited for by kernel threads (loop_lane)
        self.loops = LoopBox(self.ttl, self.max_values, self.max_bytes, clock)

    def _slot(self, step: str, key: str) -> asyncio.Future:
        slots = self._steps.setdefault(step, {})
        fut = slots.get(key)
        if fut is None:
            fut = slots[key] = asyncio.get_running_loop().create_future()
        return fut

    def put(self, step: str, key: str, value) -> None:
        if step in self._aborted:
            return
        slots = self._steps.get(step)
        fut = slots.get(key) if slots is not None else None
        if fut is None:  # no Recv waits for it: held until one comes
            fut = self._slot(step, key)
            fut.set_result(value)
            self._hold(step, 1, _footprint(value))
        elif not fut.done():
            fut.set_result(value)

    async def get(self, step: str, key: str):
        if step in self._aborted:
            raise self._aborted[step]
        slots = self._steps.get(step)
        fut = slots.get(key) if slots is not None else None
        if fut is None:
            fut = self._slot(step, key)
        elif fut.done() and not fut.cancelled() and fut.exception() is None:
            self._hold(step, -1, -_footprint(fut.result()))  # a held value, claimed
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
        fresh = errors.CancelledError(
            f"step {step} was given up ({type(exc).__name__}: {str(exc)[:200]})")
        self._give_up(step, fresh)
        self.loops.abort(step, fresh)

    def _give_up(self, step: str, exc: BaseException) -> None:
        self._aborted[step] = exc
        while len(self._aborted) > self.MAX_ABORTED:
            del self._aborted[next(iter(self._aborted))]
        held = self._held.pop(step, None)
        if held is not None and self._loose.pop(step, None) is not None:
            self._loose_values -= held[0]
            self._loose_bytes -= held[1]
        for fut in self._steps.pop(step, {}).values():
            if not fut.done():
                fut.set_exception(exc)
            elif not fut.cancelled():
                fut.exception()  # a value nobody will read

    # ---- bounds on unclaimed values --------------------------------------------------------
    def open_step(self, step: str) -> None:
        """A ``tvm_run`` of ``step`` starts on this worker: its values are claimed."""
        self._open[step] = self._open.get(step, 0) + 1
        held = self._held.get(step)
        if held is not None and self._loose.pop(step, None) is not None:
            self._loose_values -= held[0]
            self._loose_bytes -= held[1]

    def close_step(self, step: str) -> None:
        """A ``tvm_run`` of ``step`` ended: when it was the last, values still held for the
        step (for a device whose ``tvm_run`` has not come yet) are unclaimed from now."""
        n = self._open.get(step, 0) - 1
        if n > 0:
            self._open[step] = n
            return
        self._open.pop(step, None)
        held = self._held.get(step)
        if held is not None:
            self._loosen(step, held)
            self._enforce()

    def _hold(self, step: str, values: int, nbytes: int) -> None:
        held = self._held.get(step)
        if held is None:
            held = self._held[step] = [0, 0]
        held[0] += values
        held[1] += nbytes
        if held[0] <= 0:
            del self._held[step]
        if step in self._open:
            return
        if step in self._loose:
            self._loose_values += values
            self._loose_bytes += nbytes
            if held[0] <= 0:
                del self._loose[step]
        elif held[0] > 0:
            self._loosen(step, held)
        if values > 0:
            self._enforce()

    def _loosen(self, step: str, held: list) -> None:
        self._loose[step] = self.clock()
        self._loose_values += held[0]
        self._loose_bytes += held[1]

    def _enforce(self) -> None:
        """Drop the unclaimed values past their time to live, then the oldest steps' ones
        while over the bounds (on the event loop: after each held value, and on a timer)."""
        now = self.clock()
        while self._loose:
            step, since = next(iter(self._loose.items()))
            why = over_bounds(now - since, self._loose_values, self._loose_bytes,
                              (self.ttl, self.max_values, self.max_bytes))
            if why is None:
                break
            self._drop(step, why)
        self._arm()

    def _drop(self, step: str, why: str) -> None:
        held = self._held.get(step, (0, 0))
        self.steps_dropped += 1
        log = logger.debug if self._warned else logger.warning
        self._warned = True
        log("tensorvm data plane: dropped %d value(s) (%d bytes) sent for step %s, which no "
            "step on this worker claimed: %s (logged once; see data_plane_stats()"
            "['steps_dropped'])", held[0], held[1], step, why)
        self._give_up(step, errors.ResourceExhaustedError(
            f"values sent for step {step} were dropped on this worker before its Recv came: "
            f"{why}"))

    def _arm(self) -> None:
        """A timer for the oldest unclaimed step's time to live (none while there is none)."""
        if not self._loose or self._timer is not None:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        since = next(iter(self._loose.values()))
        delay = max(0.0, since + self.ttl - self.clock()) + 0.01
        self._timer = loop.call_later(delay, self._expire)

    def _expire(self) -> None:
        self._timer = None
        self._enforce()

    def close(self) -> None:
        """Stop the expiry timer (the worker closes)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def stats(self) -> dict:
        """``values`` held or awaited now, ``unclaimed_values``/``unclaimed_bytes`` of steps
        no ``tvm_run`` here runs, ``steps_dropped`` since the worker started."""
        return {"values": len(self), "unclaimed_values": self._loose_values,
                "unclaimed_bytes": self._loose_bytes, "steps_dropped": self.steps_dropped}

    def __len__(self):
        return sum(len(s) for s in self._steps.values())


def _footprint(value, depth: int = 0) -> int:
    """About the bytes ``value`` holds (arrays exactly; containers item by item)."""
    nbytes = getattr(value, "nbytes", None)
    if isinstance(nbytes, int):
        return nbytes
    if isinstance(value, (bytes, bytearray, str)):
        return len(value)
    if isinstance(value, (tuple, list)) and depth < 8:
        return 64 + sum(_footprint(v, depth + 1) for v in value)
    if isinstance(value, dict) and depth < 8:
        return 64 + sum(_footprint(k, depth + 1) + _footprint(v, depth + 1)
                        for k, v in value.items())
    return 64


_NO_LANE = object()
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
        self.bytes_pushed = 0  # to other workers, since the worker started
        self._peers: dict = {}  # address -> the comm pushes to that worker go on
        self._locks: dict = {}  # address -> lock while connecting
        self._lanes: dict = {}  # address -> _LaneSender to that worker, or None (no lane)
        self._lane_server = None
        self._lane_local = None  # (the lane's Unix socket server, its name) for peers here
        self._lane_lock = None
        self._incoming: set = set()  # transports of the lanes from peers
        self.max_frame = lane_max_frame_bytes()
        self.lane_frames = 0  # frames read from lanes
        self.lane_frames_refused = 0  # frames that closed their lane (over the cap, garbled)
        self._lane_warned = False
        self._tables: dict = {}  # (plan id, device) -> (partition, its table: _table)
        # loops across devices: their shards' values, kernel thread to kernel thread
        self.loop_lanes = LoopLanes(worker, self.rendezvous.loops, pack, unpack,
                                    self.max_frame, self._loop_refused)

    def stats(self) -> dict:
        """This worker's rendezvous (:meth:`Rendezvous.stats`) and lanes: frames read,
        frames refused (each closed its connection), lanes from peers open now (and of
        those, the rendezvous lanes on a Unix socket: from peers on this host)."""
        loop_in = self.loop_lanes.stats()
        return {**self.rendezvous.stats(), **self.rendezvous.loops.stats(),
                "lane_frames": self.lane_frames + loop_in["frames"],
                "lane_frames_refused": self.lane_frames_refused,
                "lanes_in": len(self._incoming) + loop_in["connections"],
                "lanes_in_local": sum(1 for t in self._incoming if _is_unix(t))}

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
        put = self.rendezvous.loops.put if loop else self.rendezvous.put
        for key, data in items:
            put(step, key, unpack(data))

    async def lane(self, comm=None):
        """This worker's lanes, ``{"port", "local", "loop_port", "loop_local",
        "max_frame_bytes"}`` (started on first use; ``local``: the name of the lane's Unix
        socket for peers on this host, or None; ``loop_*``: the loop shards' lane, TCP and the
        Unix socket for peers on this host,
        :meth:`LoopLanes.start <tensorvm.runtime.direct.loop_lane.LoopLanes.start>`),
        or None where the worker's comms are not plain TCP (TLS: pushes keep to Dask's
        encrypted comms). A peer sends longer frames on Dask's comm instead."""
        from distributed.comm.addressing import get_address_host, parse_address
        if parse_address(self.worker.address)[0] != "tcp":
            return None
        if self._lane_lock is None:
            self._lane_lock = asyncio.Lock()
        async with self._lane_lock:
            loop = asyncio.get_running_loop()
            if self._lane_server is None:
                self._lane_server = await loop.create_server(
                    lambda: LaneReceiver(self), get_address_host(self.worker.address), 0)
                port = self._lane_server.sockets[0].getsockname()[1]
                sock, name = local_listener("lane", port)
                if sock is not None:
                    self._lane_local = (await loop.create_unix_server(
                        lambda: LaneReceiver(self), sock=sock), name)
            loops = self.loop_lanes.start()
        return {"port": self._lane_server.sockets[0].getsockname()[1],
                "local": self._lane_local[1] if self._lane_local else None, **loops,
                "max_frame_bytes": self.max_frame}

    def _loop_refused(self, why: str, peer) -> None:
        self.lane_frames_refused += 1
        log = logger.debug if self._lane_warned else logger.warning
        self._lane_warned = True
        log("tensorvm data plane: loop lane connection from %s closed: %s (logged once; see "
            "data_plane_stats()['lane_frames_refused'])", peer, why)

    def close(self) -> None:
        """The worker closes: its lane and its connections to peers go."""
        if self._check is not None:
            self._check.cancel()
            self._check = None
        if self._lane_server is not None:
            self._lane_server.close()
            self._lane_server = None
        if self._lane_local is not None:
            self._lane_local[0].close()
            self._lane_local = None
        self.loop_lanes.close()
        for lane in self._lanes.values():
            if lane is not None and lane.transport is not None:
                lane.transport.close()
        self._lanes.clear()
        for transport in list(self._incoming):
            transport.close()
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
                                got = received.get(v, _NO_LANE)
                                if got is _NO_LANE:
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
                                    sent.append([edge, dst, _nbytes(value)])
                                items.append((f"{k}|{edge}", value))
                            await self._push(part, dst, step, items)
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
        if self.waiting >= WAITING_STEPS:
            raise errors.ResourceExhaustedError(
                f"{part.device}: {self.waiting} stages that wait for other steps (token waits, "
                f"accumulators) run on this worker already, the most allowed "
                f"(tensorvm.runtime.direct.rendezvous.WAITING_STEPS = {WAITING_STEPS}); "
                f"step {step} was not started")
        self.waiting += 1
        try:
            return await loop.run_in_executor(self.wait_pool, run_all)
        finally:
            self.waiting -= 1

    # ---- helpers --------------------------------------------------------------------------
    async def _run_waiting(self, loop, part, t, step, args, infos):
        """A stage that may wait for other steps, in a thread outside the bounded pool."""
        if self.waiting >= WAITING_STEPS:
            raise errors.ResourceExhaustedError(
                f"{part.device}: {self.waiting} stages that wait for other steps (token waits, "
                f"accumulators) run on this worker already, the most allowed "
                f"(tensorvm.runtime.direct.rendezvous.WAITING_STEPS = {WAITING_STEPS}); stage {t.name} of "
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
                      "export_bytes": [_nbytes(v) for v in out]})
        return out

    async def _push(self, part, dst: str, step: str, items: list, loop: bool = False) -> None:
        """Hand ``items`` (``[(key, value)]``) to ``dst``'s rendezvous (its loop box where
        ``loop``: values a loop lane could not carry, :meth:`LoopLanes.push`): one one-way
        ``tvm_send`` message on this worker's connection to the peer (the Recv side sends no
        acknowledgement; a lost peer still fails the write, and its own step fails with it)."""
        addr = part.peers[dst]
        if addr == self.worker.address:
            put = self.rendezvous.loops.put if loop else self.rendezvous.put
            for key, value in items:
                put(step, key, value)
            return
        packed, nbytes = [], 0
        for key, value in items:
            packed.append([key, pack(value)])
            nbytes += _nbytes(value)
        try:
            lane = None if loop else self._lanes.get(addr, _NO_LANE)
            if lane is _NO_LANE or (lane is not None and not lane.usable):
                lane = await self._open_lane(addr)
            try:
                frame = _PACKER.pack([step, packed]) if lane is not None else None
            except TypeError:  # a value that travels as frames of its own: Dask's comm
                _PACKER.reset()
                frame = None
            if frame is not None and len(frame) > lane.max_frame:
                frame = None  # longer than the receiver takes on its lane: Dask's comm
            if frame is not None:
                lane.transport.write(len(frame).to_bytes(4, "little") + frame)
            else:
                comm = self._peers.get(addr)
                if comm is None or comm.closed():
                    comm = await self._connect(addr)
                msg = {"op": SEND, "reply": False, "step": step, "items": packed}
                if loop:
                    msg["loop"] = True
                await comm.write(msg)
        except (OSError, _comm_closed()) as exc:
            bad = self._peers.pop(addr, None)
            if bad is not None:
                bad.abort()
            self._lanes.pop(addr, None)
            self.loop_lanes.forget(addr)
            raise device_unavailable(
                dst, f"its worker ({addr}) cannot be reached from {part.device} "
                     f"({type(exc).__name__}: {exc})", certain=False) from None
        self.bytes_pushed += nbytes

    async def _open_lane(self, addr: str):
        """A lane to the worker at ``addr`` (its port asked over Dask's comm), or None where it
        has none."""
        lock = self._locks.get(addr)
        if lock is None:
            lock = self._locks[addr] = asyncio.Lock()
        async with lock:
            lane = self._lanes.get(addr, _NO_LANE)
            if lane is _NO_LANE or (lane is not None and not lane.usable):
                info = await getattr(self.worker.rpc(addr), LANE)()
                lane = None if info is None else await self._connect_lane(addr, info)
                self._lanes[addr] = lane
            return lane

    async def _connect_lane(self, addr: str, info: dict):
        """The sending end of the lane ``info`` (``tvm_lane``'s answer) describes: its Unix
        socket where the worker at ``addr`` is on this host and this process reaches it,
        else TCP."""
        from distributed.comm.addressing import get_address_host
        loop = asyncio.get_running_loop()
        sender = LaneSender(int(info["max_frame_bytes"]))
        host = get_address_host(addr)
        if info.get("local") and host == get_address_host(self.worker.address):
            sock, where = local_socket(str(info["local"]))
            try:
                await loop.sock_connect(sock, where)
            except OSError:  # another network namespace (a container): TCP
                sock.close()
            else:
                await loop.create_connection(lambda: sender, sock=sock)
                return sender
        await loop.create_connection(lambda: sender, host, info["port"])
        return sender

    async def _connect(self, addr: str):
        """This worker's connection to the peer at ``addr`` for pushes: taken once from the
        worker's connection pool and kept (the pool still closes it with the worker)."""
        lock = self._locks.get(addr)
        if lock is None:
            lock = self._locks[addr] = asyncio.Lock()
        async with lock:
            comm = self._peers.get(addr)
            if comm is None or comm.closed():
                # no size walk of every message to decide on offloading its serialisation
                # (large arrays come serialised already, see pack)
                comm = await _dask_private.open_comm(self.worker.rpc, addr)
                self._peers[addr] = comm
            return comm


# One msgpack packer for the event loop's pushes (packb makes one per call).
_PACKER = msgpack.Packer(autoreset=True)


def _comm_closed() -> type:
    """Dask's CommClosedError (imported on first use: this module is imported on clients
    that never push)."""
    from distributed.comm.core import CommClosedError
    return CommClosedError


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


def _is_unix(transport) -> bool:
    sock = transport.get_extra_info("socket")
    return sock is not None and sock.family == socket.AF_UNIX


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
        n += a.nbytes if type(a) is np.ndarray else _nbytes(a)
    return n


def _nbytes(value) -> int:
    """The bytes of ``value``'s arrays (a tuple's, item by item); 0 for what has none.
    Counted a value each push and stage: arrays, the common case, first."""
    t = type(value)
    if t is np.ndarray:
        return value.nbytes
    if t is StageResult or isinstance(value, tuple):
        n = 0
        for v in value:
            n += v.nbytes if type(v) is np.ndarray else _nbytes(v)
        return n
    return int(getattr(value, "nbytes", 0) or 0)


# Dask's TCP comm cuts a frame over ``distributed.comm.shard`` (64 MiB) into shards, and the
# receiver copies a sharded array back together — unless it was the message's first buffer,
# which lands unaligned with the header instead. A tensorvm worker sends every tensor behind
# ALIGN_GUARD (the Dask plane's results, the direct plane's large values): unsplit, it arrives
# in an aligned buffer of its own, with no copy (256 MiB Send/Recv on the Dask plane: ~0.4x ->
# ~1x of plain Dask). TLS comms keep their own limit (2 GiB at most, OpenSSL's).
UNSPLIT_BYTES = 1 << 30


def data_plane_stats(dask_worker=None) -> dict:
    """The data plane's counters on a worker (:meth:`DataPlane.stats`), e.g.
    ``client.run(data_plane_stats)``: values in its rendezvous, unclaimed ones, steps whose
    values were dropped, lane frames read and refused."""
    if dask_worker is None:
        from distributed import get_worker
        dask_worker = get_worker()
    return extension_of(dask_worker).data_plane.stats()
