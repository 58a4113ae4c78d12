"""A worker's links to its peers on the direct data plane (:class:`PeerLinks`): the
connections it pushes tensors to other workers on, and the lanes they push to it on.

A push (:meth:`PeerLinks.push`) goes on the destination worker's *lane* where it has one and
every value travels inside the message (a length-prefixed msgpack frame on a plain socket,
:mod:`tensorvm.runtime.direct.lanes`; a Unix socket to a worker on this host), else as one
``tvm_send`` message on this worker's Dask comm to that peer (kept open). The receiving side
(:meth:`PeerLinks.lane`, :meth:`PeerLinks.deliver`) puts what arrives into this worker's
:class:`~tensorvm.runtime.direct.rendezvous.Rendezvous`. The loop shards' lanes
(:class:`~tensorvm.runtime.direct.loop_lane.LoopLanes`) are started and closed with these.

Its own module, apart from the handlers that run steps
(:class:`~tensorvm.runtime.direct.data_plane.DataPlane`, which owns one), because it is the
plane's only network code: sockets, connection pools, and the failure of a peer that is gone
(``UnavailableError`` naming the destination device).
"""
from __future__ import annotations

import asyncio
import logging
import socket

import msgpack

from ..unavailable import device_unavailable
from ..wire_names import handler
from ...vm import _dask_private
from .config import lane_max_frame_bytes
from .lanes import LaneReceiver, LaneSender
from .loop_lane import LoopLanes, local_listener, local_socket
from .packing import pack, unpack, value_nbytes

logger = logging.getLogger("tensorvm")
SEND, LANE = handler("send"), handler("lane")  # the handlers a worker calls on its peers
_NO_LANE = object()


class PeerLinks:
    """One worker's connections to its peers for pushes, and the lanes its peers push to it
    on (see the module docstring); closed with the worker (:meth:`close`)."""

    def __init__(self, worker, rendezvous):
        self.worker = worker
        self.rendezvous = rendezvous  # where pushed values go (this worker's)
        self.bytes_pushed = 0  # to other workers, since the worker started
        self._peers: dict = {}  # address -> the comm pushes to that worker go on
        self._locks: dict = {}  # address -> lock while connecting
        self._lanes: dict = {}  # address -> LaneSender to that worker, or None (no lane)
        self._lane_server = None
        self._lane_local = None  # (the lane's Unix socket server, its name) for peers here
        self._lane_lock = None
        self._incoming: set = set()  # transports of the lanes from peers
        self.max_frame = lane_max_frame_bytes()
        self.lane_frames = 0  # frames read from lanes
        self.lane_frames_refused = 0  # frames that closed their lane (over the cap, garbled)
        self._lane_warned = False
        # loops across devices: their shards' values, kernel thread to kernel thread
        self.loop_lanes = LoopLanes(worker, rendezvous.loops, pack, unpack,
                                    self.max_frame, self._loop_refused)

    def stats(self) -> dict:
        """Lane frames read, frames refused (each closed its connection), lanes from peers
        open now (and of those, the rendezvous lanes on a Unix socket: from peers on this
        host)."""
        loop_in = self.loop_lanes.stats()
        return {"lane_frames": self.lane_frames + loop_in["frames"],
                "lane_frames_refused": self.lane_frames_refused,
                "lanes_in": len(self._incoming) + loop_in["connections"],
                "lanes_in_local": sum(1 for t in self._incoming if _is_unix(t))}

    def deliver(self, step, items, loop=False) -> None:
        """Pushed values (``[[key, packed value], ...]``, from a lane frame or a ``tvm_send``)
        into this worker's rendezvous (its loop box where ``loop``)."""
        put = self.rendezvous.loops.put if loop else self.rendezvous.put
        for key, data in items:
            put(step, key, unpack(data))

    async def lane(self):
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
        """The worker closes: its lanes and its connections to peers go."""
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

    async def push(self, part, dst: str, step: str, items: list, loop: bool = False) -> None:
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
            nbytes += value_nbytes(value)
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


def _is_unix(transport) -> bool:
    sock = transport.get_extra_info("socket")
    return sock is not None and sock.family == socket.AF_UNIX

