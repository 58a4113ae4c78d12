"""TF 1.x's session creators and the helpers around a training loop:
``ChiefSessionCreator``/``WorkerSessionCreator`` (for ``MonitoredSession(session_creator=...)``),
``SingularMonitoredSession``, ``SessionManager``, ``global_step``, ``assert_global_step``,
``basic_train_loop``, ``limit_epochs`` and ``LooperThread``.

>>> import tensorvm as tv
>>> v = tv.Variable(1.0)
>>> with tv.train.SingularMonitoredSession() as s:
...     float(s.run(v)), type(s.raw_session()).__name__
(1.0, 'Session')
"""
from __future__ import annotations

import threading

from ..framework.errors import InvalidArgumentError, OutOfRangeError
from .monitored_session import (ChiefSessionCreator, MonitoredSession, SessionCreator,
                                WorkerSessionCreator)

__all__ = ["SessionCreator", "ChiefSessionCreator", "WorkerSessionCreator",
           "SingularMonitoredSession", "SessionManager", "global_step", "assert_global_step",
           "basic_train_loop", "limit_epochs", "LooperThread"]


def SingularMonitoredSession(hooks=None, scaffold=None, master="", config=None,  # noqa: N802
                             checkpoint_dir=None, stop_grace_period_secs=120,
                             checkpoint_filename_with_path=None):
    """A chief's :class:`~tensorvm.train.MonitoredSession` made directly (TF's
    ``SingularMonitoredSession``); ``raw_session()`` is the wrapped session."""
    creator = ChiefSessionCreator(scaffold, master, config, checkpoint_dir,
                                  checkpoint_filename_with_path)
    return MonitoredSession(hooks=hooks, session_creator=creator,
                            stop_grace_period_secs=stop_grace_period_secs)


class SessionManager:
    """TF 1.x's ``SessionManager``: sessions that come up initialised or restored
    (``prepare_session``), or that wait for another process to do it (``wait_for_session``)."""

    def __init__(self, local_init_op=None, ready_op=None, ready_for_local_init_op=None,
                 graph=None, recovery_wait_secs=30, local_init_run_options=None,
                 local_init_feed_dict=None):
        from ..framework.graph import get_default_graph
        self._graph = graph or get_default_graph()
        self._local_init_op = local_init_op
        self._local_init_feed_dict = local_init_feed_dict
        self._recovery_wait_secs = recovery_wait_secs

    def _session(self, master, config):
        from ..runtime.session import Session
        return Session(master or None, graph=self._graph, config=config, verbose=False)

    def _local_init(self, sess):
        if self._local_init_op is not None:
            sess.run(self._local_init_op, self._local_init_feed_dict)

    def prepare_session(self, master, init_op=None, saver=None, checkpoint_dir=None,
                        checkpoint_filename_with_path=None, wait_for_checkpoint=False,
                        max_wait_secs=7200, config=None, init_feed_dict=None, init_fn=None):
        """A session restored from the latest checkpoint of ``checkpoint_dir`` (or
        ``checkpoint_filename_with_path``) when there is one, else initialised by ``init_op``
        / ``init_fn``; then the local init op runs."""
        import time

        from .saver import latest_checkpoint
        sess = self._session(master, config)
        path = checkpoint_filename_with_path
        deadline = time.monotonic() + max_wait_secs
        while path is None and checkpoint_dir:
            path = latest_checkpoint(checkpoint_dir)
            if path is not None or not wait_for_checkpoint or time.monotonic() > deadline:
                break
            time.sleep(min(self._recovery_wait_secs, 1.0))
        if path is not None and saver is not None:
            saver.restore(sess, path)
        else:
            if init_op is None and init_fn is None:
                raise RuntimeError("Model is not initialized and no init_op or init_fn was "
                                   "given.")
            if init_op is not None:
                sess.run(init_op, init_feed_dict)
            if init_fn is not None:
                init_fn(sess)
        self._local_init(sess)
        return sess

    def recover_session(self, master, saver=None, checkpoint_dir=None,
                        checkpoint_filename_with_path=None, wait_for_checkpoint=False,
                        max_wait_secs=7200, config=None):
        """``(session, restored)``: restored from a checkpoint when there is one."""
        from .saver import latest_checkpoint
        sess = self._session(master, config)
        path = checkpoint_filename_with_path or (latest_checkpoint(checkpoint_dir)
                                                 if checkpoint_dir else None)
        if path is None or saver is None:
            return sess, False
        saver.restore(sess, path)
        self._local_init(sess)
        return sess, True

    def wait_for_session(self, master, config=None, max_wait_secs=float("inf")):
        """A session once every global variable is initialised (by another process)."""
        import time

        from ..ops.state.variables import global_variables, report_uninitialized_variables
        sess = self._session(master, config)
        deadline = time.monotonic() + max_wait_secs
        check = report_uninitialized_variables(global_variables()) \
            if global_variables() else None
        while check is not None and len(sess.run(check)):
            if time.monotonic() > deadline:
                from ..framework.errors import DeadlineExceededError
                raise DeadlineExceededError(f"Session was not ready after waiting "
                                            f"{max_wait_secs} secs.")
            time.sleep(min(self._recovery_wait_secs, 0.5))
        self._local_init(sess)
        return sess


def global_step(sess, global_step_tensor) -> int:
    """The value of ``global_step_tensor`` (a variable or tensor) in ``sess``."""
    return int(sess.run(global_step_tensor))


def assert_global_step(global_step_tensor) -> None:
    """Raise TypeError unless ``global_step_tensor`` is an integer scalar variable/tensor."""
    t = global_step_tensor
    if not (hasattr(t, "dtype") and hasattr(t, "shape")):
        raise TypeError(f"Existing \"global_step\" must be a Variable or Tensor: {t}.")
    if not t.dtype.is_integer:
        raise TypeError(f"Existing \"global_step\" does not have integer type: {t.dtype.name}")
    if t.shape.ndims not in (0, None):
        raise TypeError(f"Existing \"global_step\" is not scalar: {t.shape}")


def basic_train_loop(supervisor, train_step_fn, args=None, kwargs=None, master=""):
    """Run ``train_step_fn(session, *args, **kwargs)`` until the supervisor says stop."""
    with supervisor.managed_session(master) as sess:
        while not supervisor.should_stop():
            train_step_fn(sess, *(args or ()), **(kwargs or {}))


def limit_epochs(tensor, num_epochs=None, name=None):
    """``tensor`` that raises ``OutOfRangeError`` after it has been evaluated ``num_epochs``
    times (a local counter variable: initialise local variables first)."""
    from ..framework.graph import control_dependencies, name_scope
    from ..ops.array.array_ops import identity
    from ..framework.tensor_conversion import convert_to_tensor
    if num_epochs is None:
        return tensor
    if num_epochs <= 0:
        raise ValueError(f"num_epochs must be > 0 not {num_epochs}.")
    with name_scope(name or "limit_epochs"):
        from ..ops.state.variables import Variable
        import numpy as np
        counter = Variable(np.int64(0), trainable=False, name="epochs",
                           collections=["local_variables"])
        with control_dependencies([counter.count_up_to(num_epochs)]):
            return identity(convert_to_tensor(tensor))


class LooperThread(threading.Thread):
    """A thread that calls ``target(*args, **kwargs)`` every ``timer_interval_secs`` (or in a
    loop when None) until ``coord`` asks to stop; an exception is reported to ``coord``."""

    def __init__(self, coord, timer_interval_secs, target=None, args=None, kwargs=None):
        super().__init__(daemon=True)
        self._coord, self._interval = coord, timer_interval_secs
        self._target_fn, self._args, self._kwargs = target, args or (), kwargs or {}

    def run(self):
        with self._coord.stop_on_exception():
            self.start_loop()
            while not self._coord.should_stop():
                self.run_loop()
                if self._interval is not None and self._coord.wait_for_stop(self._interval):
                    break
            self.stop_loop()

    def start_loop(self):
        """Called once before the loop."""

    def stop_loop(self):
        """Called once after it."""

    def run_loop(self):
        """One iteration: the target."""
        if self._target_fn is not None:
            self._target_fn(*self._args, **self._kwargs)

    @staticmethod
    def loop(coord, timer_interval_secs, target, args=None, kwargs=None):
        """Start and return a LooperThread."""
        t = LooperThread(coord, timer_interval_secs, target, args, kwargs)
        t.start()
        return t


_ = (InvalidArgumentError, OutOfRangeError)  # raised by the ops these helpers build
