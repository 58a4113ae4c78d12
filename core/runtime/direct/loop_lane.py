"""Loop lanes: how the shards of a loop across worker processes hand each other values, from
kernel thread to kernel thread, with no event loop on the way (issue 27).

A shard of a loop frame (:func:`tensorvm.ops.control.while_frames.run_sharded`) runs in a
kernel thread and exchanges a few small values with its peers every iteration: the predicate,
a loop value, a value inside the body. Through the worker's event loop each such hop cost a
``run_coroutine_threadsafe`` on the sender (a wake-up of its loop, a task, the write), the
receiving loop's wake-up, a future's callback and a task step, then a wake-up of the waiting
thread — about three thread wake-ups and a few hundred microseconds of Python per hop. Here:

* the sending kernel thread writes the frame itself on a plain blocking socket
  (:class:`LoopLaneOut`, one per peer worker, TCP_NODELAY): ``<u32 length><msgpack [step,
  items]>``, the items packed as the rendezvous packs them (small arrays as raw bytes);
* on the receiving worker a reader thread per incoming connection (:class:`LoopLaneServer`),
  blocked in ``recv``, unpacks each frame and puts its values into the worker's
  :class:`LoopBox`, which hands a value straight to the kernel thread waiting for it (a lock it
  sleeps on, released; :mod:`tensorvm.runtime.direct.loop_box`).

Values a lane cannot carry (over the receiver's frame cap, or not plain data) and every value
on a TLS cluster go on Dask's comm (``tvm_send`` with ``loop=True``) into the same box. Like
the rendezvous' lane, a loop lane takes any process that can reach the worker: a frame over the
cap or not ``[step, items]`` closes its connection, nothing is unpickled, and values for steps
no shard here claims are bounded in count, bytes and time (:class:`LoopBox`, the rendezvous'
bounds and Dask config keys).
"""
from __future__ import annotations

import logging
import os
import secrets
import select
import socket
import sys
import threading

import msgpack

from ..unavailable import device_unavailable
from ..wire_names import handler
from .lanes import FrameTooLong, take_frames
from .loop_box import LoopBox  # noqa: F401 - the box, named here with its lanes

logger = logging.getLogger("tensorvm")
_LOCAL = threading.local()  # .packer: this thread's msgpack packer
EXPIRE_S = 1.0  # how often a worker's box drops unclaimed values past their time to live
LANE = handler("lane")  # the handler that tells a worker's lane ports


class LoopLaneServer:
    """The receiving end of this worker's loop lanes: a listening socket on ``host`` (an
    ephemeral port), an accept thread, and a reader thread per connection that hands each
    frame's ``(step, items)`` to ``deliver``. A frame announced longer than ``max_frame``, or
    one that is not ``[step, items]``, closes its connection at once; ``refused(why, peer)``
    is told. Threads are daemons; :meth:`close` ends them."""

    def __init__(self, host: str, deliver, max_frame: int, refused, expire=None,
                 local: bool = True):
        self.deliver, self.max_frame, self.refused, self.expire = \
            deliver, max_frame, refused, expire
        self.frames = 0
        self._sock = socket.create_server((host, 0))
        self._sock.settimeout(EXPIRE_S)
        self.port = self._sock.getsockname()[1]
        self._conns: set = set()
        self._closed = False
        threading.Thread(target=self._accept, args=(self._sock, expire),
                         name="tensorvm-loop-lane-accept", daemon=True).start()
        # Peers on this host may come over a Unix socket instead (Linux's abstract
        # namespace: no file, gone with the process), whose writes and reads cost the
        # kernel less than TCP's loopback (about 10-30 us per round trip of two hops).
        self.local_name = self._local = None
        if local:
            self._local, self.local_name = local_listener("loop", self.port)
            if self._local is not None:
                self._local.listen()
                threading.Thread(target=self._accept, args=(self._local, None),
                                 name="tensorvm-loop-lane-accept", daemon=True).start()

    @property
    def connections(self) -> int:
        return len(self._conns)

    def close(self) -> None:
        self._closed = True
        for sock in (self._sock, self._local):
            if sock is None:
                continue
            try:  # (a shutdown wakes an accept that waits on it)
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            try:
                sock.close()
            except OSError:
                pass
        for conn in list(self._conns):
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def _accept(self, listener, expire) -> None:
        while not self._closed:
            try:
                conn, _ = listener.accept()
            except socket.timeout:
                if expire is not None:
                    expire()
                continue
            except OSError:  # closed
                return
            conn.settimeout(None)
            nodelay(conn)
            self._conns.add(conn)
            threading.Thread(target=self._read, args=(conn,), name="tensorvm-loop-lane",
                             daemon=True).start()

    def _read(self, conn) -> None:
        buf = bytearray()
        cap = self.max_frame
        try:
            while True:
                data = conn.recv(1 << 18)
                if not data:
                    return
                try:
                    for frame in take_frames(buf, data, cap):
                        if not self._frame(conn, frame):
                            return
                except FrameTooLong as exc:
                    self._refuse(conn, str(exc))
                    return
        except OSError:
            return
        finally:
            self._conns.discard(conn)
            conn.close()

    def _frame(self, conn, frame) -> bool:
        self.frames += 1
        try:
            step, items = msgpack.unpackb(frame)
            self.deliver(step, items)
        except Exception as exc:  # noqa: BLE001 - a garbled stream: drop the connection
            self._refuse(conn, f"a frame that is not [step, items] ({type(exc).__name__}: "
                               f"{str(exc)[:200]})")
            return False
        return True

    def _refuse(self, conn, why: str) -> None:
        try:
            peer = conn.getpeername()
        except OSError:
            peer = None
        self.refused(why, peer)


class LoopLaneOut:
    """The sending end of a loop lane to one peer worker: a socket whose frames a kernel
    thread writes itself (one writer at a time). ``max_frame``: the receiver's cap."""

    def __init__(self, sock: socket.socket, max_frame: int):
        nodelay(sock)
        sock.setblocking(False)  # writes never block the kernel thread past a check
        self.sock, self.max_frame = sock, max_frame
        self.closed = False
        self._lock = threading.Lock()

    def frame(self, step: str, packed: list):
        """The bytes of one frame ``[step, packed]``, or None where it does not fit this lane
        (a value that is not plain data, or over the receiver's cap)."""
        packer = getattr(_LOCAL, "packer", None)
        if packer is None:  # one per thread (packb would make one per call)
            packer = _LOCAL.packer = msgpack.Packer(autoreset=True)
        try:
            body = packer.pack([step, packed])
        except TypeError:  # a value that travels as Dask serialises it
            packer.reset()
            return None
        if len(body) > self.max_frame:
            return None
        return len(body).to_bytes(4, "little") + body

    def write(self, data: bytes, check, poll_s: float) -> None:
        """Write ``data`` whole; while the socket takes no more (a peer that does not read),
        ``check()`` every ``poll_s`` seconds (it raises to give up: the lane is then closed, as
        a part of a frame may be gone). OSError where the peer is gone."""
        with self._lock:
            if self.closed:
                raise ConnectionResetError("the loop lane was closed")
            sock = self.sock
            try:
                # A peer that went away closed its end; a write would still go (into the
                # void: the reset comes back after it) and its answer never come. Nothing
                # is ever sent back on a lane, so a readable socket means the peer is gone.
                try:
                    if not sock.recv(1, socket.MSG_PEEK):
                        raise ConnectionResetError("the peer closed the loop lane")
                    raise ConnectionResetError("the peer wrote on a loop lane")
                except BlockingIOError:
                    pass
                try:
                    sent = sock.send(data)
                except BlockingIOError:
                    sent = 0
                if sent == len(data):  # the common case: a small frame, taken at once
                    return
                view = memoryview(data)[sent:]
                poller = select.poll()
                poller.register(sock.fileno(), select.POLLOUT)
                while view:
                    if not poller.poll(poll_s * 1000):
                        check()
                        continue
                    try:
                        view = view[sock.send(view):]
                    except BlockingIOError:
                        pass
            except BaseException:
                self.close()
                raise

    def close(self) -> None:
        self.closed = True
        try:
            self.sock.close()
        except OSError:
            pass


def nodelay(sock) -> None:
    """Small frames go at once (no Nagle delay) on a TCP socket."""
    if sock.family != socket.AF_UNIX:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


def local_listener(kind: str, port: int) -> tuple:
    """A Unix socket bound to a fresh name in Linux's abstract namespace (no file; gone with
    the process) for peers on this host, and that name: ``(socket, name)``, or ``(None,
    None)`` off Linux or where it cannot be made. ``kind`` and ``port`` (the TCP port it
    stands beside) make the name readable; a random part makes it unguessable."""
    if not sys.platform.startswith("linux"):
        return None, None
    name = f"tensorvm-{kind}-{os.getpid()}-{port}-{secrets.token_hex(8)}"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.bind("\0" + name)
    except OSError:
        sock.close()
        return None, None
    return sock, name


def local_socket(name: str) -> tuple:
    """An unconnected, non-blocking socket for the loop lane named ``name`` on this host (a
    :class:`LoopLaneServer`'s ``local_name``), and its address to connect to."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.setblocking(False)
    return sock, "\0" + name


class LoopLanes:
    """One worker's loop lanes, its data plane's part for loops across devices: the lane
    into this worker (:meth:`start`, told to peers by ``tvm_lane``), the lanes out to its
    peers (:meth:`push` from a shard's kernel thread, :meth:`open` on the event loop).
    ``pack``/``unpack``: the rendezvous' value format; ``refused(why, peer)``: a frame that
    closed its connection."""

    def __init__(self, worker, box, pack, unpack, max_frame: int, refused):
        self.worker, self.box, self.pack, self.unpack = worker, box, pack, unpack
        self.max_frame, self.refused = max_frame, refused
        self.server = None
        self.outs: dict = {}  # address -> LoopLaneOut to that worker, or None (no lane)
        self._locks: dict = {}  # address -> lock while connecting

    def start(self) -> dict:
        """This worker's lane (started on first use, on the event loop): ``{"loop_port",
        "loop_local"}`` (the Unix socket's name for peers on this host, or None)."""
        if self.server is None:
            from distributed.comm.addressing import get_address_host
            self.server = LoopLaneServer(get_address_host(self.worker.address), self.deliver,
                                         self.max_frame, self.refused, self.box.expire)
        return {"loop_port": self.server.port, "loop_local": self.server.local_name}

    def deliver(self, step, items) -> None:
        """A frame's values into the box (on a lane's reader thread)."""
        put, unpack = self.box.put, self.unpack
        for key, data in items:
            put(step, key, unpack(data))

    def push(self, part, dst: str, step: str, items: list, check, poll_s: float) -> bool:
        """From a loop shard's kernel thread: ``items`` (``[(key, value)]``) into ``dst``'s loop
        box — put here at once where ``dst`` is on this worker, else written by this thread on
        the lane to its worker (``check`` and ``poll_s``: :meth:`LoopLaneOut.write`). False
        where that lane is not open yet (:meth:`open`) or cannot carry them (then the data
        plane's Dask-comm push with ``loop=True``). UnavailableError where the worker cannot
        be reached."""
        addr = part.peers[dst]
        if addr == self.worker.address:
            put = self.box.put
            for key, value in items:
                put(step, key, value)
            return True
        out = self.outs.get(addr)
        if out is None or out.closed:
            return False
        pack = self.pack
        frame = out.frame(step, [[key, pack(value)] for key, value in items])
        if frame is None:
            return False
        try:
            out.write(frame, check, poll_s)
        except OSError as exc:
            if self.outs.get(addr) is out:
                self.outs.pop(addr, None)
            raise device_unavailable(
                dst, f"its worker ({addr}) cannot be reached from {part.device} "
                     f"({type(exc).__name__}: {exc})", certain=False) from None
        return True

    def known(self, addr: str) -> bool:
        """Whether :meth:`push` knows how to reach ``addr`` (an open lane, or none to be had:
        a TLS cluster)."""
        out = self.outs.get(addr, _UNKNOWN)
        return out is None or (out is not _UNKNOWN and not out.closed)

    def forget(self, addr: str) -> None:
        """The worker at ``addr`` is gone: its lane too."""
        out = self.outs.pop(addr, None)
        if out is not None:
            out.close()

    async def open(self, part, dst: str) -> None:
        """Connect the lane to ``dst``'s worker (its ports asked over Dask's comm: its Unix
        socket where it is on this host and this process reaches it, else TCP); where it has
        none, remember that (its loop values go on Dask's comm). UnavailableError where the
        worker cannot be reached."""
        from distributed.comm.core import CommClosedError
        addr = part.peers[dst]
        try:
            await self._open(addr)
        except (OSError, CommClosedError) as exc:
            raise device_unavailable(
                dst, f"its worker ({addr}) cannot be reached from {part.device} "
                     f"({type(exc).__name__}: {exc})", certain=False) from None

    async def _open(self, addr: str) -> None:
        import asyncio
        from distributed.comm.addressing import get_address_host
        lock = self._locks.get(addr)
        if lock is None:
            lock = self._locks[addr] = asyncio.Lock()
        async with lock:
            if self.known(addr):
                return
            info = await getattr(self.worker.rpc(addr), LANE)()
            out = None
            if info is not None and info.get("loop_port"):
                loop = asyncio.get_running_loop()
                host = get_address_host(addr)
                sock = None
                if info.get("loop_local") and host == get_address_host(self.worker.address):
                    sock, where = local_socket(str(info["loop_local"]))
                    try:
                        await loop.sock_connect(sock, where)
                    except OSError:  # another network namespace: TCP
                        sock.close()
                        sock = None
                if sock is None:
                    family, kind, proto, _, where = (await loop.getaddrinfo(
                        host, info["loop_port"], type=socket.SOCK_STREAM))[0]
                    sock = socket.socket(family, kind, proto)
                    sock.setblocking(False)
                    try:
                        await loop.sock_connect(sock, where)
                    except BaseException:
                        sock.close()
                        raise
                out = LoopLaneOut(sock, int(info["max_frame_bytes"]))
            self.outs[addr] = out

    def stats(self) -> dict:
        """Frames read and connections open on the lane into this worker."""
        server = self.server
        return {"frames": server.frames if server else 0,
                "connections": server.connections if server else 0}

    def close(self) -> None:
        """The worker closes: its lanes go."""
        if self.server is not None:
            self.server.close()
            self.server = None
        for out in list(self.outs.values()):
            if out is not None:
                out.close()
        self.outs.clear()


_UNKNOWN = object()
