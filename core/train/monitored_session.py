"""``tv.train.MonitoredTrainingSession``: a training loop's session with hooks, checkpoints
and recovery from a lost parameter server.

Design
------
:class:`MonitoredSession` wraps a :class:`tensorvm.Session`. On creation the chief restores
the latest checkpoint of ``checkpoint_dir`` (after running the init op, so variables the
checkpoint lacks start from their initial values), or initialises; a non-chief waits until
every global variable is initialised (by the chief). Then each hook's
``after_create_session`` runs. ``run`` merges the hooks' extra fetches into one
``Session.run`` (one submission, ``steps=K`` included) and hands them back in
``after_run``.

Recovery: a step that fails with ``UnavailableError`` (a device's worker is gone, with the
variables and queues on it) is not retried as is. The session waits for the cluster to have
as many workers as before (Dask's Nanny restarts a killed worker; the backend maps the device
to it on the next step), creates the state again as at the start — the chief restores the
latest checkpoint, every worker re-runs its local init — calls the hooks'
``after_create_session`` again and runs the step again. Steps after the checkpoint are done
again from the checkpointed state, so nothing is applied twice. ``memory://`` checkpoints on a
distributed session are refused: they would live in one worker's process and die with it.

>>> import numpy as np, tensorvm as tv
>>> w = tv.Variable(np.float32(4.0), name="w")
>>> gs = tv.train.get_or_create_global_step()
>>> train = tv.train.GradientDescentOptimizer(0.25).minimize(w * w, global_step=gs)
>>> with tv.train.MonitoredTrainingSession(
...         hooks=[tv.train.StopAtStepHook(last_step=3)]) as sess:
...     while not sess.should_stop():
...         _ = sess.run(train)
...     float(sess.run(w)), int(sess.run(gs))
(0.5, 3)
"""
from __future__ import annotations

import logging
import time

from ..framework.errors import (CancelledError, InvalidArgumentError, OutOfRangeError,
                                UnavailableError)
from . import hooks as _hooks

_log = logging.getLogger("tensorvm")


LOCAL_RESOURCES = "local_resources"  # TF's GraphKeys.LOCAL_RESOURCES


class Scaffold:
    """What makes a session ready (TF 1.x's ``tf.train.Scaffold``, same arguments):
    ``init_op`` (default: every global variable's initializer, run with
    ``init_feed_dict``), ``local_init_op`` (default: the local variables' initializers and
    those of the graph's ``local_resources`` collection — objects with an ``initializer``,
    such as an input iterator that must restart in every new session), ``saver`` (default: a
    Saver of the global variables), ``init_fn(scaffold, session)`` (run when nothing was
    restored), ``summary_op`` (default: ``tv.summary.merge_all()``). ``ready_op`` and
    ``ready_for_local_init_op`` are accepted: a non-chief waits until every global variable
    is initialised. ``copy_from_scaffold`` takes the fields not given from another
    scaffold."""

    def __init__(self, init_op=None, init_feed_dict=None, init_fn=None, ready_op=None,
                 ready_for_local_init_op=None, local_init_op=None, summary_op=None,
                 saver=None, copy_from_scaffold=None, local_init_feed_dict=None):
        if copy_from_scaffold is not None:
            if not isinstance(copy_from_scaffold, Scaffold):
                raise TypeError("copy_from_scaffold is not a Scaffold instance.")
            c = copy_from_scaffold
            init_op = init_op if init_op is not None else c.init_op
            init_feed_dict = init_feed_dict if init_feed_dict is not None else c.init_feed_dict
            init_fn = init_fn if init_fn is not None else c.init_fn
            ready_op = ready_op if ready_op is not None else c.ready_op
            ready_for_local_init_op = ready_for_local_init_op \
                if ready_for_local_init_op is not None else c.ready_for_local_init_op
            local_init_op = local_init_op if local_init_op is not None else c.local_init_op
            summary_op = summary_op if summary_op is not None else c.summary_op
            saver = saver if saver is not None else c.saver
            local_init_feed_dict = local_init_feed_dict \
                if local_init_feed_dict is not None else c.local_init_feed_dict
        self.init_op, self.init_feed_dict, self.init_fn = init_op, init_feed_dict, init_fn
        self.ready_op, self.ready_for_local_init_op = ready_op, ready_for_local_init_op
        self.local_init_op, self.local_init_feed_dict = local_init_op, local_init_feed_dict
        self.summary_op, self.saver = summary_op, saver

    @staticmethod
    def default_local_init_op(graph=None):
        """The local variables' initializers and those of the ``local_resources``
        collection, grouped (``None`` when there are none)."""
        from ..framework.graph import get_default_graph
        from ..ops.array.array_ops import group
        from ..ops.state.variables import variables_initializer
        g = graph or get_default_graph()
        with g.as_default():
            ops = []
            local = g.get_collection("local_variables")
            if local:
                ops.append(variables_initializer(local))
            for r in g.get_collection(LOCAL_RESOURCES):
                ops.append(getattr(r, "initializer", None) or getattr(r, "create", r))
            return group(*ops, name="local_init") if ops else None

    def finalize(self, graph) -> Scaffold:
        # Fills in the defaults once the graph is complete; returns self. (Its docstring waits
        # for tests/test_public_api_docs.py's allow-list to drop "Scaffold.finalize".)
        from ..ops.state.variables import global_variables, global_variables_initializer
        with graph.as_default():
            if self.init_op is None:
                self.init_op = global_variables_initializer()
            if self.local_init_op is None:
                self.local_init_op = Scaffold.default_local_init_op(graph)
            if self.summary_op is None:
                from ..tf_api.summary import merge_all
                self.summary_op = merge_all()
            if self.saver is None and global_variables(graph):
                from .saver import Saver
                self.saver = Saver(global_variables(graph))
        return self


class _Coordinator:
    def __init__(self, stop_event=None):
        self.stop_event = stop_event  # set by another thread (run_replicas): stop waiting
        self.stop = False

    def request_stop(self, ex=None):
        self.stop = True

    def should_stop(self) -> bool:
        return self.stop or (self.stop_event is not None and self.stop_event.is_set())


# ---- session creators (TF's MonitoredSession(session_creator=...)) ----------------------------

class SessionCreator:
    """Makes the session a :class:`~tensorvm.train.MonitoredSession` wraps."""

    is_chief = True

    def __init__(self, scaffold=None, master="", config=None, checkpoint_dir=None,
                 checkpoint_filename_with_path=None):
        self.scaffold, self.master, self.config = scaffold, master, config
        self.checkpoint_dir = checkpoint_dir
        self.checkpoint_filename_with_path = checkpoint_filename_with_path

    def make_session(self):
        """A :class:`tensorvm.Session` on ``master`` (in process when empty)."""
        from ..runtime.session import Session
        return Session(self.master or None, config=self.config, verbose=False)

    def create_session(self):
        """A session whose state is ready: initialised or restored by a chief, waited for
        by a worker."""
        return MonitoredSession(session_creator=self).session


class ChiefSessionCreator(SessionCreator):
    """The chief's: it initialises the variables, or restores the latest checkpoint of
    ``checkpoint_dir`` (or ``checkpoint_filename_with_path``)."""

    is_chief = True


class WorkerSessionCreator(SessionCreator):
    """A non-chief worker's: it waits until the chief has initialised the variables."""

    is_chief = False

    def __init__(self, scaffold=None, master="", config=None, max_wait_secs=30 * 60):
        super().__init__(scaffold, master, config)
        self.max_wait_secs = max_wait_secs



class MonitoredSession:
    """See the module docstring; made by :func:`MonitoredTrainingSession`.
    ``checkpoint_filename_with_path`` restores that checkpoint instead of the latest of
    ``checkpoint_dir`` (TF's ``ChiefSessionCreator`` argument). The graph's queue runners
    (``tv.train.add_queue_runner``, the ``tv.train.batch`` family) are started once the state
    exists and stopped when the session closes (waiting up to ``stop_grace_period_secs``); a
    runner's error stops the loop and is raised by ``close``, as TF's."""

    def __init__(self, session=None, is_chief: bool = True, checkpoint_dir: str | None = None,
                 scaffold: Scaffold | None = None, hooks=(), own_session: bool = False,
                 max_wait_secs: float = 7200.0, max_recoveries: int = 10, stop_event=None,
                 checkpoint_filename_with_path: str | None = None,
                 stop_grace_period_secs: float = 120, session_creator=None):
        if isinstance(session, SessionCreator):  # TF's MonitoredSession(session_creator, hooks)
            session_creator, session = session, None
            if not isinstance(is_chief, bool):  # TF's second positional argument: the hooks
                hooks, is_chief = is_chief, True
        if session is None:  # TF's signature: a session creator (a chief's by default)
            creator = session_creator or ChiefSessionCreator()
            session = creator.make_session()
            is_chief = creator.is_chief
            checkpoint_dir = checkpoint_dir or creator.checkpoint_dir
            checkpoint_filename_with_path = (checkpoint_filename_with_path
                                             or creator.checkpoint_filename_with_path)
            scaffold = scaffold or creator.scaffold
            own_session = True
        hooks = list(hooks or ())
        self._sess = session
        self._ckpt_path = checkpoint_filename_with_path
        self.graph = session.graph
        self.is_chief = is_chief
        self._dir = checkpoint_dir.rstrip("/") if checkpoint_dir else None
        if self._dir and self._dir.startswith("memory://") and session.client is not None:
            raise InvalidArgumentError(
                f"checkpoint_dir {checkpoint_dir!r}: memory:// checkpoints on a distributed "
                "session would live in one worker's process and be lost with it; use a "
                "file:// folder the workers share or object storage (s3://, gs://)")
        self._scaffold = (scaffold or Scaffold()).finalize(self.graph)
        self._hooks = list(hooks)
        self._own = own_session
        self._max_wait = max_wait_secs
        self._max_recoveries = max_recoveries
        self.recoveries = 0
        self._coord = _Coordinator(stop_event)
        self._qr_coord, self._qr_threads = None, []
        self._stop_grace = stop_grace_period_secs
        self._closed = False
        self._workers = self._count_workers()
        with self.graph.as_default():
            for h in self._hooks:
                h.begin()
        self._create()

    # ---- state -------------------------------------------------------------------------------
    @property
    def session(self):
        """The wrapped :class:`tensorvm.Session` (for hooks and ``Saver``)."""
        return self._sess

    def raw_session(self):
        """The wrapped :class:`tensorvm.Session` (TF's ``SingularMonitoredSession``)."""
        return self._sess

    def _count_workers(self) -> int:
        client = self._sess.client
        if client is None:
            return 0
        from ..runtime.cluster.spec import scheduler_identity
        return len(scheduler_identity(client)["workers"])

    def _create(self) -> None:
        from .saver import latest_checkpoint
        sc = self._scaffold
        if self.is_chief:
            latest = self._ckpt_path or (latest_checkpoint(self._dir) if self._dir else None)
            self._sess.run(sc.init_op, sc.init_feed_dict)
            if latest is not None and sc.saver is not None:
                sc.saver.restore(self._sess, latest)
                _log.info("restored %s", latest)
            if sc.init_fn is not None and latest is None:
                sc.init_fn(sc, self._sess)
        else:
            self._wait_until_ready()
        if sc.local_init_op is not None:
            self._sess.run(sc.local_init_op, sc.local_init_feed_dict)
        self._start_queue_runners()
        for h in self._hooks:
            h.after_create_session(self._sess, self._coord)

    def _start_queue_runners(self) -> None:
        """Start the graph's queue runners (TF's session creator does), after stopping those
        of an earlier creation (a recovery)."""
        from .queue_runner import QUEUE_RUNNERS, Coordinator, start_queue_runners
        self._stop_queue_runners(raise_error=False)
        if self.graph.get_collection(QUEUE_RUNNERS):
            self._qr_coord = Coordinator()
            self._qr_threads = start_queue_runners(self._sess, coord=self._qr_coord,
                                                   daemon=True)

    def _stop_queue_runners(self, raise_error: bool = True) -> None:
        coord, threads = self._qr_coord, self._qr_threads
        self._qr_coord, self._qr_threads = None, []
        if coord is None:
            return
        coord.request_stop()
        try:
            coord.join(threads, stop_grace_period_secs=self._stop_grace)
        except Exception:
            if raise_error:
                raise
            _log.warning("a queue runner failed before the session was recreated",
                         exc_info=True)

    def _wait_until_ready(self) -> None:
        """A non-chief waits for the chief to initialise or restore every global variable."""
        from ..ops.array.array_ops import stack
        from ..ops.state.variables import global_variables
        vs = global_variables(self.graph)
        if not vs:
            return
        ready = getattr(self, "_ready_op", None)
        if ready is None:
            with self.graph.as_default():
                ready = self._ready_op = stack([v.is_initialized() for v in vs])
        deadline = time.monotonic() + self._max_wait
        delay = 0.02
        while not bool(self._sess.run(ready).all()):
            self._check_stop("waiting for the chief to initialise the variables")
            if time.monotonic() > deadline:
                raise UnavailableError(f"the chief did not initialise the variables in "
                                       f"{self._max_wait:.0f} s")
            time.sleep(delay)  # the chief's progress lives in another process: poll
            delay = min(delay * 2, 1.0)

    def _check_stop(self, what: str) -> None:
        ev = self._coord.stop_event
        if ev is not None and ev.is_set():
            raise CancelledError(f"asked to stop while {what} (another replica failed or "
                                 "training ended)")

    def _recover(self, exc: Exception) -> None:
        self.recoveries += 1
        if self.recoveries > self._max_recoveries:
            raise exc
        _log.warning("training lost a device (%s); recreating the session's state from the "
                     "latest checkpoint", (str(exc).splitlines() or [repr(exc)])[0])
        client = self._sess.client
        deadline = time.monotonic() + self._max_wait
        while True:
            try:
                if client is not None and self._workers:
                    client.wait_for_workers(self._workers,
                                            timeout=max(deadline - time.monotonic(), 1.0))
                self._create()
                return
            except (UnavailableError, OSError) as again:  # the replacement is not mapped yet
                if time.monotonic() > deadline:
                    raise again from exc
                self._check_stop("waiting for the lost device's replacement")
                time.sleep(0.2)

    # ---- running -----------------------------------------------------------------------------
    def run(self, fetches, feed_dict=None, options=None, run_metadata=None, steps: int = 1):
        """``Session.run`` with the hooks' fetches merged in. A lost device (in the step or in
        a hook's ``after_run``, e.g. a checkpoint saved to a PS that just died) recreates the
        state from the latest checkpoint and runs the whole step again, hooks included, as
        TF's recoverable session does."""
        if self._closed:
            raise RuntimeError("Run called on a closed MonitoredSession.")
        while True:
            try:
                return self._run_once(fetches, feed_dict, options, run_metadata, steps)
            except (UnavailableError, OSError) as exc:  # OSError: Dask lost a connection
                self._recover(exc)

    def _run_once(self, fetches, feed_dict, options, run_metadata, steps):
        ctx = _hooks.SessionRunContext(_hooks.SessionRunArgs(fetches, feed_dict, options),
                                       self._sess)
        extra, feeds = [], dict(feed_dict or {})
        for h in self._hooks:
            args = h.before_run(ctx)
            extra.append(None if args is None else args.fetches)
            if args is not None and args.feed_dict:
                feeds.update(args.feed_dict)
        # one flat list, the user's fetches first (a nested dict costs the session's fetch
        # walk more, every step)
        out = self._sess.run([fetches, *(e for e in extra if e is not None)], feeds or None,
                             options, run_metadata, steps=steps)
        it = iter(out)
        user = next(it)
        for h, e in zip(self._hooks, extra):
            res = next(it) if e is not None else None
            h.after_run(ctx, _hooks.SessionRunValues(res, options, run_metadata))
        if ctx.stop_requested:
            self._coord.request_stop()
        return user

    def run_step_fn(self, step_fn):
        return step_fn(self)

    def should_stop(self) -> bool:
        return self._closed or self._coord.should_stop() or (
            self._qr_coord is not None and self._qr_coord.should_stop())

    def close(self) -> None:
        self._close(call_end=True)

    def _close(self, call_end: bool) -> None:
        if self._closed:
            return
        try:
            if call_end:
                for h in self._hooks:
                    h.end(self._sess)
        finally:
            self._closed = True
            try:
                self._stop_queue_runners(raise_error=call_end)
            finally:
                if self._own:
                    self._sess.close()

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        # the end of the input (OutOfRangeError, or StopIteration as TF's) ends the loop
        end = exc_type is not None and issubclass(exc_type, (OutOfRangeError, StopIteration))
        self._close(call_end=exc_type is None or end)
        return end


def MonitoredTrainingSession(master: str | None = None, is_chief: bool = True,
                             checkpoint_dir: str | None = None, scaffold=None, hooks=None,
                             chief_only_hooks=None, save_checkpoint_secs=None,
                             save_summaries_steps=None, save_summaries_secs=None, config=None,
                             stop_grace_period_secs=120, log_step_count_steps=100,
                             max_wait_secs=7200, save_checkpoint_steps=None,
                             summary_dir=None, *, session=None, cluster=None,
                             max_recoveries: int = 10, job_name: str | None = None,
                             batch_size: int | None = None, loss=None,
                             stop_event=None) -> MonitoredSession:
    """TF 1.x's ``MonitoredTrainingSession``: a :class:`MonitoredSession` with the chief's
    ``CheckpointSaverHook`` (every ``save_checkpoint_steps`` steps or
    ``save_checkpoint_secs`` seconds; neither given: 600 s, as TF) and a ``StepCounterHook``
    every ``log_step_count_steps`` (its metrics go to the dashboard's job registry as
    ``job_name`` on a cluster), then ``hooks`` (and ``chief_only_hooks`` on the chief).

    ``session`` reuses a :class:`tensorvm.Session`; else one is made from ``master``,
    ``cluster`` and ``config`` (and closed with the monitored session). ``stop_event`` (a
    ``threading.Event``, tensorvm's addition) set by another thread stops this session's waits
    for the chief or for a lost device's replacement with ``CancelledError``, and ends its
    loop (``should_stop``): :func:`tensorvm.train.run_replicas` sets it when a replica fails.
    """
    from ..runtime.session import Session
    own = session is None
    sess = session if session is not None else Session(master, config=config, cluster=cluster,
                                                       verbose=False)
    all_hooks = list(hooks or [])
    scaffold = (scaffold or Scaffold()).finalize(sess.graph)
    from .optimizers import get_global_step
    has_gs = get_global_step(sess.graph) is not None
    if is_chief:
        all_hooks += list(chief_only_hooks or [])
        if checkpoint_dir and has_gs:
            if save_checkpoint_steps is None and save_checkpoint_secs is None:
                save_checkpoint_secs = 600
            all_hooks.append(_hooks.CheckpointSaverHook(
                checkpoint_dir, save_secs=None if save_checkpoint_steps else save_checkpoint_secs,
                save_steps=save_checkpoint_steps, scaffold=scaffold))
        if log_step_count_steps and has_gs:
            all_hooks.append(_hooks.StepCounterHook(log_step_count_steps, batch_size=batch_size,
                                                    loss=loss, job=job_name))
    try:
        ms = MonitoredSession(sess, is_chief, checkpoint_dir, scaffold, all_hooks, own,
                              max_wait_secs, max_recoveries, stop_event,
                              stop_grace_period_secs=stop_grace_period_secs)
    except BaseException:
        if own:
            sess.close()
        raise
    return ms
