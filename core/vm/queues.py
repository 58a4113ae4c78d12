"""Queue state: the resource behind ``tv.FIFOQueue`` and friends, and how queue ops wait.

The ops and the Python classes are in :mod:`tensorvm.ops.state.data_flow_ops` (its docstring states
the semantics); this module holds what runs inside a task: :class:`QueueState` and its kinds,
kept in the device's ResourceMgr, and :class:`Waiter`, which releases the Dask worker slot while
an op waits and notices when the client has given the step up.
"""
from __future__ import annotations

import heapq
import itertools
import sys
import threading
from collections import deque

import numpy as np

from ..framework import dtypes as _dt
from ..framework.errors import CancelledError, InvalidArgumentError, OutOfRangeError
from . import _dask_private

UNBOUNDED = 2 ** 62


# ---- blocking inside a Dask worker -----------------------------------------------------------

def _try_secede() -> bool:
    """Leave the Dask worker's thread pool if this thread runs a dask.distributed task."""
    if "distributed" not in sys.modules:
        # No dask.distributed in this process, so no worker: an in-process session's wait
        # must not pay for importing it (0.4 s, measured inside a queue pipeline's loop).
        return False
    return _dask_private.secede_from_task()


CANCEL_POLL_S = 0.2


def _current_task():
    """``(worker, task key)`` of the dask.distributed task this thread runs."""
    from distributed import get_worker
    return get_worker(), _dask_private.current_task_key()


def _task_cancelled(task) -> bool:
    worker, key = task
    return not _dask_private.task_still_wanted(worker, key)


class Waiter:
    """Waits on a queue's condition; the first wait releases the Dask worker slot, and
    :meth:`done` (called with the queue's lock released) takes one back.

    In a Dask worker the wait wakes every 0.2 s to check that the step still wants the task;
    when the client gave it up (a timed-out or failed step), the op fails with
    ``CancelledError`` instead of waiting on and taking elements that nobody will receive.
    """

    __slots__ = ("ctx", "seceded", "task")

    def __init__(self, ctx=None):
        self.seceded = False
        self.task = None
        self.ctx = ctx

    def wait(self, cond: threading.Condition, timeout: float | None = None) -> None:
        if not self.seceded:
            self.seceded = _try_secede()
            if self.seceded:
                self.task = _current_task()
        if self.task is None:
            if self.ctx is None:
                cond.wait(timeout)
                return
            # In process: wake now and then to see whether the session gave the step up.
            cond.wait(CANCEL_POLL_S if timeout is None else min(timeout, CANCEL_POLL_S))
            if self.ctx.cancelled():
                raise CancelledError("the step was cancelled while this queue op waited")
            return
        cond.wait(CANCEL_POLL_S if timeout is None else min(timeout, CANCEL_POLL_S))
        if _task_cancelled(self.task) or (self.ctx is not None and self.ctx.cancelled()):
            raise CancelledError("the step was cancelled while this queue op waited")

    def done(self) -> None:
        if self.seceded:
            from distributed import rejoin
            self.seceded = False
            rejoin()


# ---- queue states (the resources) ------------------------------------------------------------

def _fill_value(dtype: np.dtype):
    return "" if dtype.kind == "O" else np.zeros((), dtype)


class QueueState:
    """A FIFO queue of elements (tuples of arrays). Subclasses override the storage hooks
    (``_put``, ``_take``, ``_restore``, ``__len__``, ``_available``) and ``batch``."""

    kind = "FIFOQueue"
    LOST_WITH_WORKER = True  # see runtime.ResourceMgr: never re-created empty silently

    def __init__(self, spec: dict):
        self.spec = spec
        self.name = spec["name"]
        cap = spec.get("capacity")
        self.capacity = UNBOUNDED if cap is None or cap < 0 else int(cap)
        self.dtypes = tuple(_dt.as_dtype(d) for d in spec["dtypes"])
        self.shapes = spec.get("shapes")
        self.cond = threading.Condition()
        self.closed = False
        self.cancelled = False
        self.pending_enqueues = 0
        self._enqueue_line: deque = deque()  # enqueue calls in arrival order; the first inserts
        self.waiting = 0  # ops blocked on this queue right now (introspection, tests)
        self._items: deque = deque()

    # storage hooks
    def __len__(self) -> int:
        return len(self._items)

    def _put(self, elem: tuple) -> None:
        self._items.append(elem)

    def _take(self, n: int) -> list:
        return [self._items.popleft() for _ in range(n)]

    def _restore(self, elems: list) -> None:
        self._items.extendleft(reversed(elems))

    def _available(self) -> int:
        return len(self)

    def _may_grow(self) -> bool:
        """Whether a closed queue can still receive elements (pending enqueues)."""
        return not self.cancelled and self.pending_enqueues > 0

    poll_s: float | None = None  # how often a waiting dequeue calls _on_wait

    def _wait(self, waiter: Waiter, timeout: float | None = None) -> None:
        self.waiting += 1
        try:
            waiter.wait(self.cond, timeout)
        finally:
            self.waiting -= 1

    def _on_wait(self) -> None:
        """Called (with the lock held) before a dequeue waits; subclasses may add elements."""

    def batch(self, elems: list) -> tuple:
        out = []
        for i, dt in enumerate(self.dtypes):
            comps = [e[i] for e in elems]
            if comps:
                out.append(np.stack(comps))
            else:
                shp = self.shapes[i] if self.shapes else ()
                shp = tuple(0 if d is None else d for d in shp)
                out.append(np.empty((0,) + shp, dtype=dt.np_dtype))
        return tuple(out)

    # operations
    def _closed_error(self, requested: int, size: int) -> OutOfRangeError:
        return OutOfRangeError(f"{self.kind} '{self.name}' is closed and has insufficient "
                               f"elements (requested {requested}, current size {size})")

    def enqueue(self, elems: list, waiter: Waiter) -> None:
        with self.cond:
            if self.closed:
                raise CancelledError(f"{self.kind} '{self.name}' is closed.")
            done = 0
            self.pending_enqueues += 1
            turn = object()  # concurrent enqueue(_many) calls go whole, in arrival order (TF)
            self._enqueue_line.append(turn)
            try:
                while self._enqueue_line[0] is not turn:
                    if self.cancelled:
                        raise CancelledError(
                            f"Enqueue operation was cancelled: {self.kind} '{self.name}' was "
                            "closed with cancel_pending_enqueues=True")
                    self._wait(waiter)
                while done < len(elems):
                    if self.cancelled:
                        raise CancelledError(
                            f"Enqueue operation was cancelled: {self.kind} '{self.name}' was "
                            "closed with cancel_pending_enqueues=True")
                    room = self.capacity - len(self)
                    if room > 0:
                        for e in elems[done:done + room]:
                            self._put(e)
                        done += min(room, len(elems) - done)
                        self.cond.notify_all()
                    else:
                        self._wait(waiter)
            finally:
                self._enqueue_line.remove(turn)
                self.pending_enqueues -= 1
                self.cond.notify_all()

    def dequeue(self, n: int, up_to: bool, waiter: Waiter) -> list:
        """Take ``n`` elements (``up_to``: fewer once closed), waiting as TF does."""
        with self.cond:
            taken: list = []
            try:
                while len(taken) < n:
                    need = n - len(taken)
                    avail = self._available()
                    # Take a partial batch only when the queue is full (else producers block).
                    if avail >= need or (avail > 0 and len(self) >= self.capacity):
                        taken += self._take(min(avail, need))
                        self.cond.notify_all()
                        continue
                    if self.closed and not self._may_grow():
                        size = len(self) + len(taken)
                        if up_to and size > 0:
                            taken += self._take(len(self))
                            self.cond.notify_all()
                            break
                        raise self._closed_error(n, size)
                    self._on_wait()
                    self._wait(waiter, self.poll_s)
            except BaseException:
                self._restore(taken)  # a failed dequeue takes nothing
                self.cond.notify_all()
                raise
            return taken

    def close(self, cancel_pending_enqueues: bool = False) -> None:
        with self.cond:
            self.closed = True
            if cancel_pending_enqueues:
                self.cancelled = True
            self.cond.notify_all()

    def size(self) -> int:
        with self.cond:
            return len(self)

    def __repr__(self):
        return (f"<{self.kind} '{self.name}' size={len(self)} closed={self.closed} "
                f"waiting={self.waiting}>")


class RandomShuffleQueueState(QueueState):
    """Dequeues a uniformly random element; keeps ``min_after_dequeue`` back while open."""

    kind = "RandomShuffleQueue"

    def __init__(self, spec):
        super().__init__(spec)
        self.min_after_dequeue = int(spec.get("min_after_dequeue") or 0)
        seed, seed2 = spec.get("seed"), spec.get("seed2")
        self.rng = np.random.default_rng(
            None if seed is None else [seed & 0xFFFFFFFF, seed2 & 0xFFFFFFFF])
        self._items = []

    def _take(self, n):
        out = []
        for _ in range(n):
            j = int(self.rng.integers(len(self._items)))
            self._items[j], self._items[-1] = self._items[-1], self._items[j]
            out.append(self._items.pop())
        return out

    def _restore(self, elems):
        self._items.extend(elems)

    def _available(self):
        return len(self) if self.closed else max(0, len(self) - self.min_after_dequeue)


class PriorityQueueState(QueueState):
    """Dequeues the element with the smallest int64 priority (component 0) first."""

    kind = "PriorityQueue"

    def __init__(self, spec):
        super().__init__(spec)
        self._items = []
        self._seq = itertools.count()

    def _put(self, elem):
        heapq.heappush(self._items, (int(elem[0]), next(self._seq), elem))

    def _take(self, n):
        return [heapq.heappop(self._items)[2] for _ in range(n)]

    def _restore(self, elems):
        for e in elems:
            self._put(e)


class PaddingFIFOQueueState(QueueState):
    """FIFO whose ``dequeue_many`` pads every component to the batch's largest shape."""

    kind = "PaddingFIFOQueue"

    def batch(self, elems):
        if not elems:
            return super().batch(elems)
        out = []
        for i, dt in enumerate(self.dtypes):
            comps = [e[i] for e in elems]
            shape = tuple(max(c.shape[d] for c in comps) for d in range(comps[0].ndim))
            arr = np.full((len(comps),) + shape, _fill_value(dt.np_dtype),
                          dtype=dt.np_dtype if not dt.is_string else object)
            for k, c in enumerate(comps):
                arr[(k,) + tuple(slice(0, s) for s in c.shape)] = c
            out.append(arr)
        return tuple(out)


QUEUE_KINDS: dict[str, type] = {}


def register_queue_kind(cls: type, clobber: bool = False) -> type:
    """Register a :class:`QueueState` subclass under its ``kind`` (queue ops find it there)."""
    if cls.kind in QUEUE_KINDS and not clobber:
        raise ValueError(f"queue kind {cls.kind!r} is already registered")
    QUEUE_KINDS[cls.kind] = cls
    return cls


for _cls in (QueueState, RandomShuffleQueueState, PriorityQueueState, PaddingFIFOQueueState):
    register_queue_kind(_cls)

_SPEC_KEYS = ("kind", "capacity", "dtypes", "shapes", "min_after_dequeue")


def lookup_queue(ctx, spec: dict) -> QueueState:
    """The queue of ``spec`` on this kernel's device, created on first use; a shared queue
    with another spec is an error (TF: "Shared queue ... has ...")."""
    q = ctx.resources.lookup_or_create(spec.get("container", ""), "queue:" + spec["name"],
                                       lambda: QUEUE_KINDS[spec["kind"]](spec))
    if q.spec is not spec:
        for k in _SPEC_KEYS:
            if q.spec.get(k) != spec.get(k):
                raise InvalidArgumentError(
                    f"Shared queue '{spec['name']}' has {k} {q.spec.get(k)!r} but requested "
                    f"{k} {spec.get(k)!r}")
    return q
