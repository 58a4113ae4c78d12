"""``tv.train.Supervisor``: TF 1.x's training supervisor, for scripts written against it.

The chief initialises the model (or restores the latest checkpoint of ``logdir``), then — as
TF's standard services — saves a checkpoint every ``save_model_secs``, writes ``summary_op``
every ``save_summaries_secs`` and runs the graph's queue runners; a non-chief waits until the
chief has initialised every global variable (``ready_op``), polling at most every
``recovery_wait_secs``. ``managed_session`` wraps all of it in a ``with`` block that stops the
services and closes the session, treating ``OutOfRangeError`` (the end of the input) as a clean
stop, as TF does; other errors are re-raised after the services stopped.

>>> import numpy as np, tensorvm as tv
>>> g = tv.Graph()
>>> with g.as_default():
...     w = tv.Variable(np.float32(4.0), name="w")
...     gs = tv.train.get_or_create_global_step()
...     train = tv.train.GradientDescentOptimizer(0.25).minimize(w * w, global_step=gs)
...     sv = tv.train.Supervisor(logdir=None)
...     with sv.managed_session() as sess:
...         while not sv.should_stop() and sess.run(gs) < 3:
...             _ = sess.run(train)
...         print(float(sess.run(w)))
0.5
"""
from __future__ import annotations

import contextlib
import logging
import threading
import time

from ..framework.errors import UnavailableError

_log = logging.getLogger("tensorvm")

__all__ = ["Supervisor"]


class Supervisor:
    """TF 1.x's ``tf.train.Supervisor`` (the same arguments; ``USE_DEFAULT`` picks TF's
    default for an op, ``None`` turns it off). The graph is finalized, as TF does."""

    USE_DEFAULT = 0

    def __init__(self, graph=None, ready_op=USE_DEFAULT, ready_for_local_init_op=USE_DEFAULT,
                 is_chief: bool = True, init_op=USE_DEFAULT, init_feed_dict=None,
                 local_init_op=USE_DEFAULT, logdir: str | None = None,
                 summary_op=USE_DEFAULT, saver=USE_DEFAULT, global_step=USE_DEFAULT,
                 save_summaries_secs: float = 120, save_model_secs: float = 600,
                 recovery_wait_secs: float = 30, stop_grace_secs: float = 120,
                 checkpoint_basename: str = "model.ckpt", session_manager=None,
                 summary_writer=USE_DEFAULT, init_fn=None, local_init_run_options=None):
        from ..framework.graph import get_default_graph
        from .queue_runner import Coordinator
        self._graph = graph if graph is not None else get_default_graph()
        self._is_chief = bool(is_chief)
        self._logdir = logdir
        self._init_feed_dict = init_feed_dict
        self._init_fn = init_fn
        self._save_summaries_secs = save_summaries_secs
        self._save_model_secs = save_model_secs
        self._recovery_wait_secs = recovery_wait_secs
        self._stop_grace_secs = stop_grace_secs
        self._save_path = None if not logdir else f"{str(logdir).rstrip('/')}/" \
            f"{checkpoint_basename}"
        self._coord = Coordinator()
        self._threads: list[threading.Thread] = []
        self._session = None
        with self._graph.as_default():
            self._init_defaults(ready_op, init_op, local_init_op, summary_op, saver,
                                global_step, summary_writer)
        self._graph.finalize()

    def _init_defaults(self, ready_op, init_op, local_init_op, summary_op, saver, global_step,
                       summary_writer) -> None:
        from ..tf_api import summary as _summary
        from ..ops.array.array_ops import stack
        from ..ops.state.variables import (global_variables, global_variables_initializer,
                                           local_variables_initializer)
        from .optimizers import get_global_step
        from .saver import Saver
        use = Supervisor.USE_DEFAULT
        vs = global_variables()
        self._init_op = global_variables_initializer() if init_op is use else init_op
        self._local_init_op = local_variables_initializer() if local_init_op is use \
            else local_init_op
        self._ready_op = (stack([v.is_initialized() for v in vs]) if vs else None) \
            if ready_op is use else ready_op
        self._global_step = get_global_step() if global_step is use else global_step
        self._saver = (Saver() if vs else None) if saver is use else saver
        self._summary_op = _summary.merge_all() if summary_op is use else summary_op
        if summary_writer is use:
            summary_writer = _summary.FileWriter(self._logdir, graph=self._graph) \
                if self._is_chief and self._logdir else None
        self._summary_writer = summary_writer

    # ---- TF's properties ------------------------------------------------------------------
    is_chief = property(lambda self: self._is_chief)
    coord = property(lambda self: self._coord)
    saver = property(lambda self: self._saver)
    save_path = property(lambda self: self._save_path)
    global_step = property(lambda self: self._global_step)
    summary_writer = property(lambda self: self._summary_writer)
    summary_op = property(lambda self: self._summary_op)
    init_op = property(lambda self: self._init_op)
    ready_op = property(lambda self: self._ready_op)
    init_feed_dict = property(lambda self: self._init_feed_dict)
    session_manager = property(lambda self: None)
    save_summaries_secs = property(lambda self: self._save_summaries_secs)
    save_model_secs = property(lambda self: self._save_model_secs)

    # ---- making the session ready ---------------------------------------------------------
    def prepare_or_wait_for_session(self, master: str = "", config=None,
                                    wait_for_checkpoint: bool = False,
                                    max_wait_secs: float = 7200,
                                    start_standard_services: bool = True):
        """A session on ``master`` ("" or None: in process) whose model is ready: initialised
        or restored by the chief, waited for by the others; standard services started."""
        from ..runtime.session import Session
        self._coord.clear_stop()
        sess = Session(master or None, graph=self._graph, config=config, verbose=False)
        try:
            if self._is_chief:
                self._prepare_chief(sess, wait_for_checkpoint, max_wait_secs)
            else:
                self._wait_until_ready(sess, max_wait_secs)
            if self._local_init_op is not None:
                sess.run(self._local_init_op)
            if start_standard_services:
                self.start_standard_services(sess)
        except BaseException:
            sess.close()
            raise
        self._session = sess
        return sess

    def _prepare_chief(self, sess, wait_for_checkpoint, max_wait_secs) -> None:
        from .saver import latest_checkpoint
        ckpt = None
        if self._logdir and self._saver is not None:
            deadline = time.monotonic() + max_wait_secs
            ckpt = latest_checkpoint(self._logdir)
            while ckpt is None and wait_for_checkpoint and time.monotonic() < deadline:
                time.sleep(min(self._recovery_wait_secs, 1.0))  # another process writes it
                ckpt = latest_checkpoint(self._logdir)
        if self._init_op is not None:
            sess.run(self._init_op, self._init_feed_dict)
        if ckpt is not None:
            self._saver.restore(sess, ckpt)
            _log.info("Supervisor: restored %s", ckpt)
        elif self._init_fn is not None:
            self._init_fn(sess)

    def _wait_until_ready(self, sess, max_wait_secs) -> None:
        """Poll ``ready_op`` until every variable is initialised (by the chief, in another
        process: nothing here to wait on but the chief's progress)."""
        if self._ready_op is None:
            return
        deadline = time.monotonic() + max_wait_secs
        delay = 0.05
        while not bool(sess.run(self._ready_op).all()):
            if time.monotonic() > deadline:
                raise UnavailableError(
                    f"Supervisor: the chief did not initialise the model in {max_wait_secs} s")
            _log.info("Supervisor: waiting for the chief to initialise the model")
            time.sleep(delay)
            delay = min(delay * 2, self._recovery_wait_secs)

    # ---- services -------------------------------------------------------------------------
    def start_standard_services(self, sess) -> list:
        """The chief's checkpoint and summary threads, and everyone's queue runners."""
        threads = []
        if self._is_chief:
            if self._save_path and self._saver is not None and self._save_model_secs:
                threads.append(self.loop(self._save_model_secs, self._save_checkpoint,
                                         args=(sess,), first_wait=True))
            if self._summary_writer is not None and self._summary_op is not None and \
                    self._save_summaries_secs:
                threads.append(self.loop(self._save_summaries_secs, self._write_summary,
                                         args=(sess,)))
        threads += self.start_queue_runners(sess)
        return threads

    def _save_checkpoint(self, sess) -> None:
        self._saver.save(sess, self._save_path, global_step=self._global_step)

    def _write_summary(self, sess) -> None:
        fetches = [self._summary_op] + ([self._global_step] if self._global_step is not None
                                        else [])
        out = sess.run(fetches)
        self.summary_computed(sess, out[0], out[1] if len(out) > 1 else None)

    def start_queue_runners(self, sess, queue_runners=None) -> list:
        from .queue_runner import QUEUE_RUNNERS
        qrs = queue_runners if queue_runners is not None else \
            self._graph.get_collection(QUEUE_RUNNERS)
        threads = []
        for qr in qrs:
            threads.extend(qr.create_threads(sess, coord=self._coord, daemon=True, start=True))
        self._threads.extend(threads)
        return threads

    def loop(self, timer_interval_secs: float, target, args=None, kwargs=None,
             first_wait: bool = False) -> threading.Thread:
        """Call ``target(*args, **kwargs)`` every ``timer_interval_secs`` until stop."""
        def run():
            try:
                if first_wait and self._coord.wait_for_stop(timer_interval_secs):
                    return
                while not self._coord.should_stop():
                    target(*(args or ()), **(kwargs or {}))
                    if self._coord.wait_for_stop(timer_interval_secs):
                        return
            except Exception as e:  # noqa: BLE001 - reported to the coordinator, as TF's
                self._coord.request_stop(e)
        t = threading.Thread(target=run, daemon=True, name="tensorvm-supervisor-loop")
        t.start()
        self._coord.register_thread(t)
        self._threads.append(t)
        return t

    def summary_computed(self, sess, summary, global_step=None) -> None:
        if self._summary_writer is None:
            raise RuntimeError("Supervisor: summary_computed needs a summary writer (logdir)")
        if global_step is None and self._global_step is not None:
            global_step = sess.run(self._global_step)
        self._summary_writer.add_summary(summary, global_step)

    # ---- stopping -------------------------------------------------------------------------
    def should_stop(self) -> bool:
        return self._coord.should_stop()

    def request_stop(self, ex=None) -> None:
        self._coord.request_stop(ex)

    def stop(self, threads=None, close_summary_writer: bool = True,
             ignore_live_threads: bool = False) -> None:
        """Stop the services and wait for their threads; re-raises an error one of them (or
        the ``managed_session`` block) reported, unless it was a clean stop."""
        self._coord.request_stop()
        try:
            self._coord.join(list(self._threads) + list(threads or []),
                             stop_grace_period_secs=self._stop_grace_secs)
        finally:
            self._threads = []
            if close_summary_writer and self._summary_writer is not None:
                self._summary_writer.close()

    def wait_for_stop(self) -> None:
        self._coord.wait_for_stop()

    @contextlib.contextmanager
    def managed_session(self, master: str = "", config=None,
                        start_standard_services: bool = True,
                        close_summary_writer: bool = True):
        """``with sv.managed_session(server.target) as sess:`` — a ready session whose
        services stop, and which closes, when the block ends."""
        sess = self.prepare_or_wait_for_session(
            master, config, start_standard_services=start_standard_services)
        try:
            yield sess
        except Exception as e:  # noqa: BLE001 - handed to the coordinator, re-raised by stop
            self._coord.request_stop(e)
        finally:
            try:
                self.stop(close_summary_writer=close_summary_writer)
            finally:
                sess.close()
                self._session = None
