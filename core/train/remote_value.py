"""What :class:`tensorvm.train.ClusterCoordinator` hands back and queues: the
:class:`RemoteValue` of a scheduled function, the :class:`PerWorkerValues` of
``create_per_worker_dataset``, and the closure queue its worker threads share.

The queue (:class:`ClosureQueue`) keeps TF 2's rules (``tf.distribute.experimental.coordinator``):
any free worker takes the next closure; a closure whose worker was lost goes back to the
*front* of the queue (it keeps its step token, so its update applies at most once on the PS);
the first error of a closure cancels the closures still queued and is raised once by the
next ``schedule``, ``join`` or ``done``, which then clear it.

>>> q = ClosureQueue()
>>> rv = q.put(Closure(lambda worker: 41 + 1, (), {}, b"t-0"))
>>> c = q.get(timeout=0)
>>> q.finished(c, c.fn(None))
>>> q.done(), rv.fetch()
(True, 42)
"""
from __future__ import annotations

import collections
import threading

from ..framework.errors import CancelledError, FailedPreconditionError

__all__ = ["RemoteValue", "PerWorkerValues", "Closure", "ClosureQueue"]


class RemoteValue:
    """The value of a function scheduled with :meth:`ClusterCoordinator.schedule`, available
    once a worker has run it (TF 2's ``RemoteValue``). ``fetch()`` waits for it and returns
    it (what the function returned: NumPy values of a ``worker.run``); the function's error
    is raised instead. ``get()`` is the same (there is no device-resident value to hand out
    in a TF 1.x graph)."""

    def __init__(self):
        self._event = threading.Event()
        self._value = None
        self._error: BaseException | None = None
        self.worker: str | None = None  # the Dask worker name of the run that counted

    def _set(self, value, worker: str | None) -> None:
        self._value, self.worker = value, worker
        self._event.set()

    def _fail(self, error: BaseException) -> None:
        self._error = error
        self._event.set()

    def done(self) -> bool:
        """Whether the function has finished (or failed, or was cancelled)."""
        return self._event.is_set()

    def fetch(self, timeout: float | None = None):
        """Wait for the value and return it; the function's error is raised instead (a
        closure cancelled by another's error raises ``CancelledError``)."""
        if not self._event.wait(timeout):
            raise TimeoutError(f"the scheduled function did not finish within {timeout} s")
        if self._error is not None:
            raise self._error
        return self._value

    get = fetch

    def __repr__(self):
        state = "failed" if self._error is not None else "done" if self.done() else "pending"
        return f"<RemoteValue {state}>"


class PerWorkerValues:
    """One value per worker of the coordinator, each built by ``fn(ctx)`` in that worker's
    replica graph under its device the first time a closure on that worker needs it (TF 2's
    ``PerWorkerValues``, as ``create_per_worker_dataset`` returns). Passed among a closure's
    ``args``/``kwargs`` it becomes the value of the worker that runs the closure.
    ``iter()`` of it is itself (TF 2's programs call ``iter(per_worker_dataset)``)."""

    def __init__(self, fn, name: str):
        self.fn = fn
        self.name = name

    def __iter__(self):
        return self

    def __next__(self):
        raise TypeError(f"{self!r} has one value per worker: pass it among the arguments of "
                        "ClusterCoordinator.schedule, and the closure gets its worker's value")

    def __repr__(self):
        return f"<PerWorkerValues {self.name}>"


class Closure:
    """A scheduled function with its arguments, its step token (``bytes``, kept when it is
    queued again after its worker was lost) and its :class:`RemoteValue`."""

    def __init__(self, fn, args, kwargs, token: bytes):
        self.fn, self.args, self.kwargs, self.token = fn, tuple(args), dict(kwargs), token
        self.value = RemoteValue()
        self.attempts = 0  # runs started, on any worker
        self.workers: list = []  # the Dask worker names that started it, in order


class ClosureQueue:
    """The closures of one coordinator: queued, taken by a worker thread, finished, failed or
    put back. Thread-safe; see the module docstring for the rules."""

    def __init__(self):
        lock = threading.RLock()
        self._cv = threading.Condition(lock)
        # closures ending (finished, failed, cancelled): a driver waiting for any of its
        # closures waits here, not on ``_cv``, so a ``put``'s single wake-up always goes
        # to a worker thread
        self._ended = threading.Condition(lock)
        self._queue: collections.deque = collections.deque()
        self._inflight = 0
        self._ends = 0  # closures finished so far
        self._marks: list = []  # the counts of ends the waiters in wait_any wait for
        self._error: BaseException | None = None
        self._closed: str | None = None

    # ---- the user's side ----------------------------------------------------------------------
    def put(self, closure: Closure) -> RemoteValue:
        """Queue ``closure``; raises a pending error first (and clears it), as TF 2's
        ``schedule`` does."""
        with self._cv:
            self._check_closed()
            self._raise_error()
            self._queue.append(closure)
            self._cv.notify()
        return closure.value

    def join(self, timeout: float | None = None) -> None:
        """Wait until every closure finished; raise the first error (and clear it)."""
        with self._cv:
            self._check_closed()
            ok = self._cv.wait_for(lambda: self._error is not None or self._closed is not None
                                   or (not self._queue and not self._inflight), timeout)
            self._check_closed()
            self._raise_error()
            if not ok:
                raise TimeoutError(f"closures still running after {timeout} s: "
                                   f"{len(self._queue)} queued, {self._inflight} running")

    def done(self) -> bool:
        """Whether every closure finished; raises the first error (and clears it)."""
        with self._cv:
            self._check_closed()
            self._raise_error()
            return not self._queue and not self._inflight

    def wait_any(self, values, timeout: float | None = None, at_least: int = 1) -> list:
        """Wait until one of ``values`` (:class:`RemoteValue` s) has ended (finished, failed,
        cancelled) — ``at_least`` of them (at most all) —, an error is kept or the queue is
        closed, at most ``timeout``; returns the ended ones (in their order; none after a
        timeout). A closure that finishes wakes the waiter only once enough have: a loop
        that keeps N closures in flight and tops them up in batches is not woken for each."""
        values = list(values)
        want = max(min(at_least, len(values)), 1)

        def ready():
            return sum(1 for v in values if v.done()) >= want or self._error is not None \
                or self._closed is not None
        with self._cv:
            if ready():
                return [v for v in values if v.done()]
            mark = self._ends + want - sum(1 for v in values if v.done())
            self._marks.append(mark)
            try:
                self._ended.wait_for(ready, timeout)
            finally:
                self._marks.remove(mark)
        return [v for v in values if v.done()]

    def pending(self) -> tuple[int, int]:
        """``(queued, running)`` closures now."""
        with self._cv:
            return len(self._queue), self._inflight

    # ---- the worker threads' side -------------------------------------------------------------
    def get(self, timeout: float | None = None, stop=None) -> Closure | None:
        """The next closure (None: closed, ``stop()`` true, or nothing within ``timeout``)."""
        with self._cv:
            self._cv.wait_for(lambda: self._queue or self._closed is not None
                              or (stop is not None and stop()), timeout)
            if self._closed is not None or not self._queue or (stop is not None and stop()):
                return None
            self._inflight += 1
            return self._queue.popleft()

    def finished(self, closure: Closure, value, worker: str | None = None) -> None:
        closure.value._set(value, worker)
        with self._cv:
            self._inflight -= 1
            self._ends += 1
            if not self._queue and not self._inflight:  # what join waits for
                self._cv.notify_all()  # (not every closure: worker threads wait here too)
            if self._marks and self._ends >= min(self._marks):
                self._ended.notify_all()

    def put_back(self, closure: Closure) -> None:
        """A closure whose worker was lost: first in line again (same token)."""
        with self._cv:
            self._inflight -= 1
            if self._closed is not None:
                closure.value._fail(CancelledError(
                    f"the coordinator was closed ({self._closed}) before the closure ran"))
            else:
                self._queue.appendleft(closure)
            self._cv.notify_all()
            self._ended.notify_all()

    def failed(self, closure: Closure, error: BaseException) -> None:
        """A closure failed: its value raises ``error``; the queued closures are cancelled
        and ``error`` is kept for the next ``schedule``/``join``/``done``."""
        closure.value._fail(error)
        with self._cv:
            self._inflight -= 1
            if self._error is None:
                self._error = error
            self._cancel_queued(f"an earlier closure failed: {type(error).__name__}: {error}")
            self._cv.notify_all()
            self._ended.notify_all()

    def fail_all(self, error: BaseException) -> None:
        """An error outside any closure (a worker that could not start): the queued closures
        are cancelled and ``error`` is kept for the next ``schedule``/``join``/``done``."""
        with self._cv:
            if self._error is None:
                self._error = error
            self._cancel_queued(f"{type(error).__name__}: {error}")
            self._cv.notify_all()
            self._ended.notify_all()

    def wake(self) -> None:
        """Wake the threads waiting in :meth:`get` (their ``stop()`` may have changed)."""
        with self._cv:
            self._cv.notify_all()

    def close(self, why: str) -> None:
        """No more closures: the queued ones are cancelled, waiting threads wake up."""
        with self._cv:
            if self._closed is None:
                self._closed = why
            self._cancel_queued(f"the coordinator was closed ({why})")
            self._cv.notify_all()
            self._ended.notify_all()

    # ---- inside the lock ----------------------------------------------------------------------
    def _cancel_queued(self, why: str) -> None:
        while self._queue:
            self._queue.popleft().value._fail(CancelledError(f"closure cancelled: {why}"))

    def _raise_error(self) -> None:
        err, self._error = self._error, None
        if err is not None:
            raise err

    def _check_closed(self) -> None:
        if self._closed is not None:
            raise FailedPreconditionError(
                f"the ClusterCoordinator is closed ({self._closed}): schedule, join and done "
                "need an open coordinator; make a new one")
