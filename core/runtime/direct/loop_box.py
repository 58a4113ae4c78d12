"""The loop box: the values sent to one worker's shards of loops across devices, handed
straight to the kernel thread that waits for each (thread-safe; see
:mod:`tensorvm.runtime.direct.loop_lane` for how values reach it)."""
from __future__ import annotations

import logging
import threading
import time

from ...framework import errors
from .config import over_bounds, resolve_bounds

logger = logging.getLogger("tensorvm")
MISSING = object()
_LOCAL = threading.local()  # .waiter: this thread's _Waiter


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
        self.ttl, self.max_values, self.max_bytes = resolve_bounds(ttl, max_values, max_bytes)
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
            why = over_bounds(now - since, self._loose_values, self._loose_bytes,
                              (self.ttl, self.max_values, self.max_bytes), "loop shard",
                              "loop values")
            if why is None:
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


def _footprint(value) -> int:
    nbytes = getattr(value, "nbytes", None)
    if isinstance(nbytes, int):
        return nbytes
    if isinstance(value, tuple):
        return 64 + sum(_footprint(v) for v in value)
    return 64
