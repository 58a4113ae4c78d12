"""Values in transit between devices on one worker (:class:`Rendezvous`, TF's
``Rendezvous``): a Recv that comes first waits for its value, a value that comes first waits
for its Recv, and values that no step here claims are bounded in count, bytes and time.

The worker's data plane (:class:`tensorvm.runtime.direct.data_plane.DataPlane`) owns one and
fills it from its handlers and lanes; this module holds the state alone (on the worker's event
loop, clock injected, no I/O), so tests drive it without a worker. The values of loops across
devices, waited for by kernel threads, are its :class:`~tensorvm.runtime.direct.loop_box.LoopBox`
(``Rendezvous.loops``).

>>> import asyncio
>>> async def main():
...     r = Rendezvous(ttl=10.0, max_values=4, max_bytes=1 << 20)
...     r.put("s1", "0|e", 7)  # the Send came first: held until its Recv comes
...     return await r.get("s1", "0|e"), len(r)
>>> asyncio.run(main())
(7, 0)
"""
from __future__ import annotations

import asyncio
import logging
import time

from ...framework import errors
from .config import over_bounds, resolve_bounds
from .loop_box import LoopBox

logger = logging.getLogger("tensorvm")


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
    :func:`~tensorvm.runtime.direct.config.unclaimed_bounds` for the defaults and their Dask
    config keys."""

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

