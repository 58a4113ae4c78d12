"""Lanes: plain sockets between workers for pushes whose values all travel inside the message
(small arrays and scalars), each a length-prefixed msgpack frame ``[step, items]`` put into
the receiving worker's rendezvous as it arrives (see :mod:`tensorvm.runtime.direct.peer_links`;
``tvm_lane`` in :mod:`tensorvm.runtime.direct.data_plane`). A lane between workers on one host
is a Unix socket (Linux's abstract namespace), whose writes and reads cost the kernel about half
of TCP loopback's; else TCP."""
from __future__ import annotations

import asyncio
import logging
import socket

import msgpack

logger = logging.getLogger("tensorvm")


class FrameTooLong(ValueError):
    """A lane frame announced longer than the receiver's cap."""


def take_frames(buf: bytearray, data, cap: int):
    """The whole frames ``<u32 length><payload>`` in ``buf`` (what came before, kept between
    calls) followed by ``data``: yields each payload and keeps the rest in ``buf``. The common
    case, ``data`` exactly one frame with nothing pending, yields a view of it (no copy).
    Raises :class:`FrameTooLong` for a frame announced longer than ``cap``, before any of it
    is buffered.

    >>> buf = bytearray()
    >>> [bytes(f) for f in take_frames(buf, b"\\x02\\0\\0\\0ab\\x01\\0", 16)], bytes(buf)
    ([b'ab'], b'\\x01\\x00')
    """
    if not buf and len(data) >= 4 and \
            len(data) == 4 + int.from_bytes(data[:4], "little") <= 4 + cap:
        yield memoryview(data)[4:]
        return
    buf += data
    while len(buf) >= 4:
        n = int.from_bytes(buf[:4], "little")
        if n > cap:
            raise FrameTooLong(f"a frame of {n} bytes announced, over the cap of {cap} "
                               "(tensorvm.lane.max-frame-bytes)")
        if len(buf) < 4 + n:
            return
        frame = bytes(buf[4:4 + n])
        del buf[:4 + n]
        yield frame


class LaneReceiver(asyncio.Protocol):
    """The receiving end of a lane: frames ``<u32 length><msgpack [step, items]>`` put into
    the rendezvous as they arrive (on the worker's event loop, no coroutine per message), for
    the worker's :class:`~tensorvm.runtime.direct.peer_links.PeerLinks` (``links``). A
    frame announced longer than the links' ``max_frame``
    (:func:`~tensorvm.runtime.direct.config.lane_max_frame_bytes`), or one that is not
    ``[step, items]``, closes the connection at once (nothing more of it is read)."""

    def __init__(self, links):
        self.links = links
        self.buf = bytearray()
        self.transport = None

    def connection_made(self, transport):
        self.transport = transport
        self.links._incoming.add(transport)
        nodelay(transport)

    def connection_lost(self, exc):
        self.links._incoming.discard(self.transport)
        self.buf = bytearray()

    def data_received(self, data):
        if self.transport.is_closing():
            return
        try:
            for frame in take_frames(self.buf, data, self.links.max_frame):
                if not self._frame(frame):
                    return
        except FrameTooLong as exc:
            self._refuse(str(exc))

    def _frame(self, frame) -> bool:
        """One frame's ``[step, items]`` into the rendezvous; False (the lane refused and
        closed) if it is not that."""
        self.links.lane_frames += 1
        try:
            step, items = msgpack.unpackb(frame)
            self.links.deliver(step, items)
        except Exception as exc:  # noqa: BLE001 - a garbled stream: drop the connection
            self._refuse(f"a frame that is not [step, items] ({type(exc).__name__}: "
                         f"{str(exc)[:200]})")
            return False
        return True

    def _refuse(self, why: str) -> None:
        links = self.links
        links.lane_frames_refused += 1
        log = logger.debug if links._lane_warned else logger.warning
        links._lane_warned = True
        log("tensorvm data plane: lane connection from %s closed: %s (logged once; see "
            "data_plane_stats()['lane_frames_refused'])",
            self.transport.get_extra_info("peername"), why)
        self.buf = bytearray()
        self.transport.abort()  # at once: the rest of the stream is never read


class LaneSender(asyncio.Protocol):
    """The sending end of a lane (nothing comes back on it)."""

    def __init__(self, max_frame: int):
        self.transport = None
        self.closed = False
        self.max_frame = max_frame  # the receiver's cap: a longer frame goes on Dask's comm

    def connection_made(self, transport):
        self.transport = transport
        nodelay(transport)

    def connection_lost(self, exc):
        self.closed = True

    @property
    def usable(self) -> bool:
        return not self.closed and not self.transport.is_closing()


def nodelay(transport) -> None:
    """Small frames go at once (no Nagle delay) on a TCP lane; a Unix socket has no delay."""
    sock = transport.get_extra_info("socket")
    if sock is not None and sock.family != socket.AF_UNIX:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
