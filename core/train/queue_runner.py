"""Queue runners and the Coordinator (TF's ``tf.train.QueueRunner``, ``tf.train.Coordinator``,
``tf.train.start_queue_runners``): threads that keep input queues full and stop together.

>>> import tensorvm as tv
>>> q = tv.FIFOQueue(10, tv.int32, shapes=[[]])
>>> counter = tv.Variable(0, name="runner_counter")
>>> enq = q.enqueue(tv.assign_add(counter, 1))
>>> tv.train.add_queue_runner(tv.train.QueueRunner(q, [enq]))
>>> with tv.Session() as s:
...     s.run(counter.initializer)
...     coord = tv.train.Coordinator()
...     threads = tv.train.start_queue_runners(s, coord=coord)
...     got = [int(s.run(q.dequeue())) for _ in range(3)]
...     coord.request_stop(); coord.join(threads)
>>> got
[1, 2, 3]
"""
from __future__ import annotations

import threading
import time

from ..framework import errors
from ..framework.graph import get_default_graph, get_default_session
from ..ops.state.data_flow_ops import QueueBase

__all__ = ["QUEUE_RUNNERS", "Coordinator", "QueueRunner", "add_queue_runner",
           "start_queue_runners"]

QUEUE_RUNNERS = "queue_runners"


class Coordinator:
    """Stops a set of threads together and reports the first error (TF's Coordinator)."""

    def __init__(self, clean_stop_exception_types=(errors.OutOfRangeError,)):
        self._clean = tuple(clean_stop_exception_types)
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._exc: BaseException | None = None
        self._threads: list[threading.Thread] = []

    def request_stop(self, ex: BaseException | None = None) -> None:
        """Ask every thread to stop; ``ex`` (unless a clean-stop type such as
        ``OutOfRangeError``) is kept and raised by ``join``."""
        with self._lock:
            if ex is not None and self._exc is None and not isinstance(ex, self._clean):
                self._exc = ex
            self._stop.set()

    def should_stop(self) -> bool:
        """Whether a stop was requested (threads poll this in their loops)."""
        return self._stop.is_set()

    def wait_for_stop(self, timeout: float | None = None) -> bool:
        """Wait up to ``timeout`` seconds (``None``: forever) for a stop request; whether there
        was one."""
        return self._stop.wait(timeout)

    def clear_stop(self) -> None:
        """Forget the stop request and its error, so the coordinator can be used again."""
        with self._lock:
            self._stop.clear()
            self._exc = None

    def register_thread(self, thread: threading.Thread) -> None:
        """Add ``thread`` to those ``join`` waits for."""
        with self._lock:
            self._threads.append(thread)

    def join(self, threads=None, stop_grace_period_secs: float = 120,
             ignore_live_threads: bool = False) -> None:
        """Wait for the threads to end or a stop request, then up to the grace period; raise
        the first error a thread reported."""
        threads = list(self._threads) + list(threads or [])
        while any(t.is_alive() for t in threads) and not self.wait_for_stop(0.1):
            pass
        deadline = time.monotonic() + stop_grace_period_secs
        for t in threads:
            t.join(max(0.0, deadline - time.monotonic()))
        alive = [t.name for t in threads if t.is_alive()]
        if self._exc is not None:
            raise self._exc
        if alive and not ignore_live_threads:
            raise RuntimeError(f"Coordinator stopped with threads still running: {alive}")

    class _StopOnException:
        def __init__(self, coord):
            self.coord = coord

        def __enter__(self):
            return self

        def __exit__(self, typ, value, tb):
            if typ is not None:
                self.coord.request_stop(value)
            return typ is not None and issubclass(typ, self.coord._clean)

    def stop_on_exception(self):
        """``with coord.stop_on_exception():`` — an exception inside requests a stop with it (a
        clean-stop type is swallowed)."""
        return Coordinator._StopOnException(self)


class QueueRunner:
    """Runs ``enqueue_ops`` (one thread each) in a loop; when the input is exhausted
    (``OutOfRangeError``/``CancelledError``) in every thread, closes the queue."""

    def __init__(self, queue: QueueBase, enqueue_ops, close_op=None, cancel_op=None,
                 queue_closed_exception_types=(errors.OutOfRangeError,
                                               errors.CancelledError)):
        self.queue = queue
        self.enqueue_ops = list(enqueue_ops)
        self.close_op = close_op if close_op is not None else queue.close()
        self.cancel_op = cancel_op if cancel_op is not None else \
            queue.close(cancel_pending_enqueues=True)
        self._closed_types = tuple(queue_closed_exception_types)
        self._lock = threading.Lock()
        self._runs = 0
        self.exceptions: list[BaseException] = []

    def _run(self, sess, op, coord):
        try:
            while not (coord and coord.should_stop()):
                try:
                    sess.run(op)
                except self._closed_types:
                    break
        except RuntimeError:  # the session was closed under us
            return
        except BaseException as e:  # noqa: BLE001 - handed to the coordinator
            self.exceptions.append(e)
            if coord:
                coord.request_stop(e)
            return
        finally:
            with self._lock:
                self._runs -= 1
                last = self._runs == 0
        if last:
            try:
                sess.run(self.close_op)
            except (errors.OpError, RuntimeError):
                pass

    def _close_on_stop(self, sess, coord):
        coord.wait_for_stop()
        try:
            sess.run(self.cancel_op)
        except (errors.OpError, RuntimeError):
            pass

    def create_threads(self, sess, coord=None, daemon=False, start=False) -> list:
        """One thread per enqueue op running it in a loop with ``sess`` (plus one that closes
        the queue when ``coord`` stops), registered with ``coord``; started if ``start``."""
        with self._lock:
            self._runs = len(self.enqueue_ops)
        threads = [threading.Thread(target=self._run, args=(sess, op, coord), daemon=daemon,
                                    name=f"QueueRunner-{self.queue.name}-{i}")
                   for i, op in enumerate(self.enqueue_ops)]
        if coord is not None:
            threads.append(threading.Thread(target=self._close_on_stop, args=(sess, coord),
                                            daemon=True,
                                            name=f"QueueRunner-{self.queue.name}-close"))
        for t in threads:
            if coord is not None:
                coord.register_thread(t)
            if start:
                t.start()
        return threads


def add_queue_runner(qr: QueueRunner, collection: str = QUEUE_RUNNERS) -> None:
    """Add ``qr`` to the default graph's queue runners, which ``start_queue_runners`` (and a
    ``MonitoredSession``) start."""
    get_default_graph().add_to_collection(collection, qr)


def start_queue_runners(sess=None, coord=None, daemon=True, start=True,
                        collection=QUEUE_RUNNERS) -> list:
    """Start the threads of every QueueRunner of the session's graph; returns them."""
    sess = sess if sess is not None else get_default_session()
    if sess is None:
        raise ValueError("start_queue_runners: no session given and no default session is "
                         "registered (use `with sess.as_default():` or pass sess=)")
    threads = []
    for qr in sess.graph.get_collection(collection):
        threads.extend(qr.create_threads(sess, coord=coord, daemon=daemon, start=start))
    return threads
