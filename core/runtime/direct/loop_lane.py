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
  sleeps on, released).

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
import time

import msgpack

from ...framework import errors
from .config import unclaimed_bounds

logger = logging.getLogger("tensorvm")
MISSING = object()
_LOCAL = threading.local()  # .packer: this thread's msgpack packer; .waiter: its _Waiter
EXPIRE_S = 1.0  # how often a worker's box drops unclaimed values past their time to live


class _Waiter:
    """A kernel thread waiting for one value: it sleeps on ``lock`` (held from the start), which
    the value's arrival (or the step's abort) releases. Once its wait is over the thread
    holds the lock again, so each thread keeps one waiter for all its waits (:func:`_waiter`)."""

    __slots__ = ("lock", "value", "exc")

    def __init__(self):
        self.lock = threading.Lock()
        self.lock.acquire()
        self.value = self.exc = None


class LoopBox:
    """The values sent to this worker's loop shards, by step and key (thread-safe: put by lane
    reader threads, Dask comm handlers and local shards; taken by kernel threads).

    A value whose shard waits already is handed to it at once; one that comes first is kept
    until taken. While a shard of its step runs here (:meth:`open_step` .. :meth:`close_step`)
    a kept value stays whatever its count or age; values of steps no shard here runs are
    *unclaimed*, bounded as the rendezvous bounds its own (``ttl`` seconds, ``max_values``,
    ``max_bytes``: the oldest steps' go first; a step whose values were dropped is given up,
    its later waits fail with ``ResourceExhaustedError``)."""

    MAX_ABORTED = 4096

    def __init__(self, ttl: float | None = None, max_values: int | None = None,
                 max_bytes: int | None = None, clock=time.monotonic):
        d_ttl, d_values, d_bytes = unclaimed_bounds()
        self.ttl = d_ttl if ttl is None else float(ttl)
        self.max_values = d_values if max_values is None else int(max_values)
        self.max_bytes = d_bytes if max_bytes is None else int(max_bytes)
        self.clock = clock
        self._lock = threading.Lock()
        self._values: dict[str, dict] = {}  # step -> {key: value} not taken yet
        self._waiters: dict[tuple, _Waiter] = {}  # (step, key) -> the thread waiting for it
        self._open: dict[str, int] = {}  # step -> shards of it running here
        self._aborted: dict[str, BaseException] = {}
        self._loose: dict[str, list] = {}  # unclaimed step -> [since, values, bytes], oldest 1st
        self._loose_values = self._loose_bytes = 0
        self.steps_dropped = 0
        self._warned = False

    def put(self, step: str, key: str, value) -> None:
        """``value`` for ``(step, key)``: to its waiting thread, or kept until taken."""
        with self._lock:
            if step in self._aborted:
                return
            w = self._waiters.pop((step, key), None)
            if w is not None:
                w.value = value
                w.lock.release()
                return
            self._values.setdefault(step, {})[key] = value
            if step not in self._open:
                loose = self._loose.get(step)
                if loose is None:
                    loose = self._loose[step] = [self.clock(), 0, 0]
                nbytes = _footprint(value)
                loose[1] += 1
                loose[2] += nbytes
                self._loose_values += 1
                self._loose_bytes += nbytes
                self._enforce()

    def take(self, step: str, key: str, default=MISSING):
        """The value of ``(step, key)`` if it is here (taken), else ``default``; never waits."""
        with self._lock:
            vals = self._values.get(step)
            if vals is None:
                return default
            value = vals.pop(key, MISSING)
            if value is MISSING:
                return default
            if not vals:
                del self._values[step]
            self._unloose(step, 1, _footprint(value) if step in self._loose else 0)
            return value

    def has(self, step: str, key: str) -> bool:
        vals = self._values.get(step)
        return vals is not None and key in vals

    def get(self, step: str, key: str, poll_s: float, check):
        """The value of ``(step, key)``, waiting for it; ``check()`` is called every ``poll_s``
        seconds while it waits (it raises to stop waiting). An aborted step raises its error."""
        with self._lock:
            exc = self._aborted.get(step)
            if exc is not None:
                raise exc
            vals = self._values.get(step)
            value = vals.pop(key, MISSING) if vals is not None else MISSING
            if value is not MISSING:
                if not vals:
                    del self._values[step]
                self._unloose(step, 1, _footprint(value) if step in self._loose else 0)
                return value
            w = self._waiters[(step, key)] = _waiter()
        try:
            while not w.lock.acquire(timeout=poll_s):
                check()
        except BaseException:
            with self._lock:
                if self._waiters.get((step, key)) is w:
                    del self._waiters[(step, key)]
                else:  # handed its value (or the abort) meanwhile: the step fails anyway
                    w.lock.acquire()  # released already: held again for the next wait
                    w.value = w.exc = None
            raise
        value, exc = w.value, w.exc
        w.value = w.exc = None
        if exc is not None:
            raise exc
        return value

    def abort(self, step: str, exc: BaseException) -> None:
        """Give ``step`` up: its waiting threads raise ``exc``, its kept and later values go."""
        with self._lock:
            self._give_up(step, exc)

    def open_step(self, step: str) -> None:
        """A shard of ``step`` starts here: its values are claimed."""
        with self._lock:
            self._open[step] = self._open.get(step, 0) + 1
            loose = self._loose.pop(step, None)
            if loose is not None:
                self._loose_values -= loose[1]
                self._loose_bytes -= loose[2]

    def close_step(self, step: str) -> None:
        """A shard of ``step`` ended: when it was the last, the values still kept for the step
        (for a shard that has not started yet, or never reads them) are unclaimed from now."""
        with self._lock:
            n = self._open.get(step, 0) - 1
            if n > 0:
                self._open[step] = n
                return
            self._open.pop(step, None)
            vals = self._values.get(step)
            if vals:
                nbytes = sum(_footprint(v) for v in vals.values())
                self._loose[step] = [self.clock(), len(vals), nbytes]
                self._loose_values += len(vals)
                self._loose_bytes += nbytes
                self._enforce()

    def expire(self) -> None:
        """Drop the unclaimed values past their time to live (a lane thread calls it now and
        then)."""
        if self._loose:
            with self._lock:
                self._enforce()

    def stats(self) -> dict:
        """``loop_values`` kept or awaited now, ``loop_unclaimed_values``/``_bytes``,
        ``loop_steps_dropped`` since the worker started."""
        return {"loop_values": sum(len(v) for v in self._values.values()) + len(self._waiters),
                "loop_unclaimed_values": self._loose_values,
                "loop_unclaimed_bytes": self._loose_bytes,
                "loop_steps_dropped": self.steps_dropped}

    # ---- under the lock -------------------------------------------------------------------
    def _unloose(self, step: str, values: int, nbytes: int) -> None:
        loose = self._loose.get(step)
        if loose is None:
            return
        loose[1] -= values
        loose[2] -= nbytes
        self._loose_values -= values
        self._loose_bytes -= nbytes
        if loose[1] <= 0:
            del self._loose[step]

    def _give_up(self, step: str, exc: BaseException) -> None:
        self._aborted[step] = exc
        while len(self._aborted) > self.MAX_ABORTED:
            del self._aborted[next(iter(self._aborted))]
        self._values.pop(step, None)
        loose = self._loose.pop(step, None)
        if loose is not None:
            self._loose_values -= loose[1]
            self._loose_bytes -= loose[2]
        for sk in [sk for sk in self._waiters if sk[0] == step]:
            w = self._waiters.pop(sk)
            w.exc = exc
            w.lock.release()

    def _enforce(self) -> None:
        now = self.clock()
        while self._loose:
            step, (since, _, _) = next(iter(self._loose.items()))
            if now - since > self.ttl:
                why = (f"no loop shard claimed them within {self.ttl:g} s "
                       "(tensorvm.rendezvous.unclaimed-ttl)")
            elif self._loose_values > self.max_values:
                why = (f"more than {self.max_values} loop values waited unclaimed on the "
                       "worker (tensorvm.rendezvous.unclaimed-max-values)")
            elif self._loose_bytes > self.max_bytes:
                why = (f"more than {self.max_bytes} bytes of loop values waited unclaimed on "
                       "the worker (tensorvm.rendezvous.unclaimed-max-bytes)")
            else:
                break
            values, nbytes = self._loose[step][1:]
            self.steps_dropped += 1
            log = logger.debug if self._warned else logger.warning
            self._warned = True
            log("tensorvm data plane: dropped %d loop value(s) (%d bytes) sent for step %s, "
                "which no loop shard on this worker claimed: %s (logged once; see "
                "data_plane_stats()['loop_steps_dropped'])", values, nbytes, step, why)
            self._give_up(step, errors.ResourceExhaustedError(
                f"loop values sent for step {step} were dropped on this worker before its "
                f"shard took them: {why}"))


def _waiter() -> _Waiter:
    w = getattr(_LOCAL, "waiter", None)
    if w is None:
        w = _LOCAL.waiter = _Waiter()
    return w


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
        if local and sys.platform.startswith("linux"):
            name = f"tensorvm-loop-{os.getpid()}-{self.port}-{secrets.token_hex(8)}"
            try:
                self._local = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                self._local.bind("\0" + name)
                self._local.listen()
            except OSError:
                self._local = None
            else:
                self.local_name = name
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
                if not buf and len(data) >= 4 and \
                        len(data) == 4 + int.from_bytes(data[:4], "little") <= 4 + cap:
                    # the common case: exactly one whole frame
                    if not self._frame(conn, memoryview(data)[4:]):
                        return
                    continue
                buf += data
                while len(buf) >= 4:
                    n = int.from_bytes(buf[:4], "little")
                    if n > cap:
                        self._refuse(conn, f"a frame of {n} bytes announced, over the cap of "
                                           f"{cap} (tensorvm.lane.max-frame-bytes)")
                        return
                    if len(buf) < 4 + n:
                        break
                    frame = bytes(buf[4:4 + n])
                    del buf[:4 + n]
                    if not self._frame(conn, frame):
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


def local_socket(name: str) -> tuple:
    """An unconnected, non-blocking socket for the loop lane named ``name`` on this host (a
    :class:`LoopLaneServer`'s ``local_name``), and its address to connect to."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.setblocking(False)
    return sock, "\0" + name


def _footprint(value) -> int:
    nbytes = getattr(value, "nbytes", None)
    if isinstance(nbytes, int):
        return nbytes
    if isinstance(value, tuple):
        return 64 + sum(_footprint(v) for v in value)
    return 64
