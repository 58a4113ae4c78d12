"""``run_replicas`` (async and sync) on a :class:`~tensorvm.train.ClusterCoordinator`: replicas
not pinned to a fixed set of tasks.

The training is a stream of closures, each ``steps_per_run`` steps of the replica graph of
whichever worker is free (its graph built by ``model_fn(ctx)`` under ``replica_device_setter``,
as before, once per worker task). This thread keeps closures queued or running: about two
per live worker in a sync run (topped up whenever any ends, whichever it is: a sync closure
waits for gradients that only the others bring), three in an async run (topped up once as many
as there are workers have ended: one wake of this thread per batch), until the global step
reaches ``last_step`` (a worker's ``StopAtStepHook``), the monitor says stop, or the input
ends; a closure's error is raised at once, and a sync run's chief loop is closed as soon as
one of these stops it. So a worker that dies mid-run loses nothing: its closure runs again on
another worker, with its step token (each of its K steps claims ``token#k``: the PS applies
each step once); a worker that joins (a Dask worker named after a task of the job) takes
closures at once; a worker that comes back takes them again.

Each worker's runs go through its own :class:`~tensorvm.train.MonitoredSession` (made once,
``max_recoveries=0``: a lost device is the coordinator's to handle) with the hooks of the old
per-task loop: ``StopAtStepHook``, the model's ``hooks`` and ``hooks_fn(ctx)``'s, and on the
chief (the coordinator's first task) the ``CheckpointSaverHook`` and ``StepCounterHook``. The
coordinator initialises the variables (restoring the latest checkpoint of ``checkpoint_dir``)
once, before any closure runs, and restores it again after a PS is lost.

Synchronous runs (``sync=True``, :func:`run_sync`) are the same stream of closures, each one
gradient computation (``steps_per_run`` of them on the direct data plane) of a
:class:`~tensorvm.train.SyncReplicasOptimizer`'s ``train_op`` on whichever worker is free:
apply the gradient to the PS accumulators, wait for the step to be applied, go on at the
released step. TF 1.x's protocol stays (the first ``replicas_to_aggregate`` gradients of the
current step win, stale ones are dropped, one apply per global step), with three changes for
replicas that are not tasks:

* the chief's loop (take the N gradients, apply, increment, release) runs in the
  coordinator's own session, on the PS only: no worker's loss stops it; it is started after
  the coordinator has initialised (or restored) the PS state, with the accumulators and the
  token gate set to the global step (``chief_init_op``), and again after each recovery;
* every run feeds its closure's step token (each of its K steps its own, ``token#k``): an
  accumulator accepts a token once, for good, so a closure run again on another worker after
  its first run's gradient arrived (a twin) adds nothing and does not wait for a token — its
  worker takes the next closure at once; a worker's ``local_step`` is set to the global step
  on each new life of its worker (``local_step_init_op``);
* a release lets go every worker whose gradient was for an older step (no count of tokens):
  a worker takes one closure at a time, so its local step already limits it to one gradient
  a step, and a lost worker's token wait, left on the PS, can take no live worker's token.

A worker killed mid-run costs at most its in-flight gradient (its closure runs again on
another worker; if the gradient had arrived the twin is dropped); a worker that joins takes
closures at once and its gradients count from the step it joins at; with
``backup_workers=0`` each step's N gradients are one from each live worker, as before.
"""
from __future__ import annotations

import collections
import threading
import time

from ..framework.errors import CancelledError, OutOfRangeError
from ..ops.array.array_ops import no_op
from .coordinator import ClusterCoordinator
from .hooks import CheckpointSaverHook, StepCounterHook, StopAtStepHook
from .monitored_session import MonitoredSession, Scaffold
from .optimizers import get_or_create_global_step


UNLIMITED_TOKENS = 1 << 62  # a sync release lets every waiting worker go (see the docstring)


class _Replicas:
    """What the closures of one run share (its settings, each worker's MonitoredSession and
    input state, the stop flag; with ``n_required``, a synchronous run's)."""

    def __init__(self, model_fn, settings, hooks_fn, n_required: int | None = None):
        self.model_fn, self.s, self.hooks_fn = model_fn, settings, hooks_fn
        self.n_required = n_required  # sync: gradients a step needs (None: async)
        self.seen = 0  # the largest global step a run returned
        self.stop = threading.Event()
        self.sessions: dict = {}  # task -> MonitoredSession
        self.left: dict = collections.defaultdict(int)  # task -> steps left in its split
        self.runs: dict = collections.defaultdict(int)  # task -> closures run
        self.by_name: dict = collections.defaultdict(int)  # Dask worker name -> runs
        self.recoveries = 0
        self.lock = threading.Lock()

    def build(self, ctx) -> dict:
        """The replica graph of ``ctx``'s task (inside the coordinator's exactly-once block)."""
        gs = get_or_create_global_step()
        model = dict(self.model_fn(ctx))
        if "loss" not in model or "optimizer" not in model:
            from ..framework.errors import InvalidArgumentError
            raise InvalidArgumentError("model_fn must return a dict with 'loss' and 'optimizer'")
        opt = model["optimizer"]
        if self.n_required is not None:
            from .replica_context import _run_options
            from .sync_replicas import SyncReplicasOptimizer
            opt = SyncReplicasOptimizer(opt, replicas_to_aggregate=self.n_required,
                                        total_num_replicas=ctx.num_workers)
            opt.step_tokens, opt.tokens_per_step = True, UNLIMITED_TOKENS
            model["_sync"] = opt
        model["train_op"] = opt.minimize(model["loss"], global_step=gs)
        if self.n_required is not None:  # the chief's loop: direct, K steps a run
            opt.chief_run_options = _run_options(self.s.plane, opt.chief_train_op)
            if getattr(opt.chief_run_options, "data_plane", "") == "direct":
                opt.chief_steps_per_run = self.s.steps_per_run
        model["global_step"] = gs
        model["hooks"] = [StopAtStepHook(last_step=self.s.last_step)] + \
            list(model.get("hooks") or []) + list(self.hooks_fn(ctx) if self.hooks_fn else [])
        return model

    def session(self, coord: ClusterCoordinator, w) -> MonitoredSession:
        """``w``'s MonitoredSession (hooks; no init, no restore: the coordinator's)."""
        ms = self.sessions.get(w.task)
        if ms is None:
            s, hooks = self.s, list(w.model["hooks"])
            with w.graph.as_default():
                # the coordinator ran the local initializers when it made the worker: running
                # them again would make cycling_batch's data a second time
                scaffold = Scaffold(local_init_op=no_op(name="local_init_done")).finalize(w.graph)
                if w is coord.chief:
                    if s.checkpoint_dir:
                        hooks.append(CheckpointSaverHook(
                            s.checkpoint_dir, save_steps=s.save_checkpoint_steps,
                            save_secs=None if s.save_checkpoint_steps else 600,
                            scaffold=scaffold))
                    if s.log_step_count_steps:
                        hooks.append(StepCounterHook(
                            s.log_step_count_steps, batch_size=w.model.get("batch_size"),
                            loss=w.model["loss"], job=s.job_name))
                ms = MonitoredSession(coord.session_of(w), is_chief=False, scaffold=scaffold,
                                      hooks=hooks, max_recoveries=0, stop_event=self.stop)
            self.sessions[w.task] = ms
        return ms

    def closure(self, coord: ClusterCoordinator):
        """The closure every scheduled run is: ``steps_per_run`` steps on the worker that
        takes it; the global step after them (None: training had stopped)."""
        from .replica_context import _run_options
        s = self

        def train(w):
            if s.stop.is_set():
                return None
            ms = s.session(coord, w)
            model = w.model
            reload = model.get("reload")
            delay = (s.s.slow_workers or {}).get(w.task, 0.0)
            try:
                if reload is not None and s.left[w.task] <= 0:  # the split is used up
                    per = max(int(model.get("batch_size") or 1), 1)
                    s.left[w.task] = int(ms.run(reload)) // per
                    if s.left[w.task] <= 0:
                        return None
                if delay:
                    time.sleep(delay)  # the straggler's slowness, by request
                k = s.s.steps_per_run if reload is None else min(s.s.steps_per_run,
                                                                  s.left[w.task])
                if "_opts" not in model:
                    model["_opts"] = _run_options(s.s.plane, model["train_op"])
                if s.n_required is not None:
                    # sync: K steps a run only on the direct plane (each waits for its token
                    # inside the message); none past last_step (the step read lags by <= 1)
                    if s.seen >= s.s.last_step:
                        return None
                    if getattr(model["_opts"], "data_plane", "") != "direct":
                        k = 1
                    k = max(min(k, s.s.last_step - s.seen - 1), 1)
                out = w_run(w, ms, [model["train_op"], model["global_step"]],
                            model["_opts"], k)
            except OutOfRangeError:  # the input is done: training ends
                s.stop.set()
                return None
            except CancelledError:
                if s.stop.is_set():
                    return None
                raise
            s.left[w.task] -= k
            s.seen = max(s.seen, int(out[1]))
            s.runs[w.task] += 1
            s.by_name[w.name] += 1
            if ms.should_stop():
                s.stop.set()
            return int(out[1])
        return train


def w_run(w, ms: MonitoredSession, fetches, options, steps: int):
    """Run ``fetches`` through ``w``'s MonitoredSession (its hooks) with the closure's token
    (one a run; each of its K steps claims ``token#k``): the exactly-once guard's, or a
    synchronous run's accumulators'."""
    feeds = None
    if w._token is not None:
        sync = w.model.get("_sync") if isinstance(w.model, dict) else None
        placeholder = w.once.token if w.once is not None else \
            sync.step_token if sync is not None else None
        if placeholder is not None:
            feeds = {placeholder: b"%s/%d" % (w._token, w._runs)}
    w._runs += 1
    return ms.run(fetches, feeds, options=options, steps=steps)


class _SyncChief:
    """A synchronous run's chief loop, in the coordinator's own session: (re)started each
    time the coordinator has initialised or restored the PS state."""

    def __init__(self):
        self.runner = None
        self.sess = None
        self.opt = None
        self.closed = False

    def state_init(self, coord, sess) -> None:
        opt = coord.chief.model["_sync"]
        if self.runner is not None:  # a PS was lost: its loop failed with it
            self.runner.stop(timeout=0.25)
        sess.run(opt.chief_init_op)  # the accumulators and the gate at the global step
        self.sess, self.opt = sess, opt
        self.runner = opt.get_chief_queue_runner().start(sess)

    @staticmethod
    def worker_init(w) -> None:
        w.session.run(w.model["_sync"].local_step_init_op)

    def error(self):
        """The chief loop's error, unless a lost PS (the coordinator recovers from it)."""
        from ..framework.errors import UnavailableError
        err = self.runner.error if self.runner is not None else None
        return None if err is None or isinstance(err, UnavailableError) else err

    def close(self) -> None:
        """End the loop; the workers still waiting for a step are let go
        (OutOfRangeError: the closure ends quietly)."""
        if self.runner is not None and not self.closed:
            self.closed = True
            try:
                self.runner.stop(self.sess)
            except Exception:  # noqa: BLE001 - the PS may be what failed
                self.runner.stop(timeout=0.25)


def run_async(model_fn, spec, session, settings, hooks_fn, final, monitor, announced):
    """``run_replicas(sync=False)``: see the module docstring. Returns
    ``(global step, wall seconds, runs per task, recoveries, final values, history,
    runs per Dask worker name, the exactly-once counters)``."""
    return _run(model_fn, spec, session, settings, hooks_fn, final, monitor, None)


def run_sync(model_fn, spec, session, settings, hooks_fn, final, monitor, n_required: int):
    """``run_replicas(sync=True)``: the closures of :func:`run_async`, each a gradient of a
    :class:`~tensorvm.train.SyncReplicasOptimizer` step (see the module docstring). Returns
    what :func:`run_async` returns, the counters the accumulators' (``accepted``,
    ``taken``, ``stale``, ``surplus``, ``ahead``, ``duplicate``, summed over the PS tasks)."""
    return _run(model_fn, spec, session, settings, hooks_fn, final, monitor, n_required)


def _run(model_fn, spec, session, settings, hooks_fn, final, monitor, n_required):
    r = _Replicas(model_fn, settings, hooks_fn, n_required)
    s = settings
    sync = n_required is not None
    chief_loop = _SyncChief() if sync else None
    coord = ClusterCoordinator(
        session, r.build, cluster=spec, checkpoint_dir=s.checkpoint_dir,
        exactly_once=not sync, max_recoveries=s.max_recoveries,
        after_state_init=chief_loop.state_init if sync else None,
        after_worker_init=_SyncChief.worker_init if sync else None)
    history: list = []
    try:
        chief = coord.chief
        # (the chief's MonitoredSession, with its hooks, is made by its worker's thread in
        # `prepare` below, or at its first closure: made here, in this thread, it ran steps
        # on the session the worker's thread was initialising, and a plan registered by one
        # was found missing by the other — an erred task on the job's page, then a retry)
        watched = None
        if final is not None:
            with chief.graph.as_default():
                final_fetch = final(chief.ctx, chief.graph)
            watched = (chief.model["global_step"], final_fetch)
        # Each live worker makes its session and plans before the clock starts (the old
        # per-task loop's start barrier): one closure each, held until all have one.
        ready = threading.Barrier(max(coord.num_workers(), 1), timeout=60)

        def prepare(w):
            r.session(coord, w)
            try:
                ready.wait()
            except threading.BrokenBarrierError:
                pass  # a worker lost or late: the others go on
        for _ in range(ready.parties):
            coord.schedule(prepare)
        coord.join()
        step_fn = r.closure(coord)
        t0 = time.monotonic()
        pending: list = []  # the closures scheduled that have not ended
        next_check, step = s.monitor_every, 0
        while True:
            # about two closures per live worker, topped up as soon as any ends (not when the
            # oldest does: a sync closure ends when its step is applied, which needs the
            # gradients of the others; waiting for it while they all ended, nothing was left
            # to bring them)
            # (async: three per live worker, topped up once a worker's worth have ended, so
            # this thread wakes once per batch, not per closure, while each worker still
            # finds its next closure queued)
            live = max(len(coord.workers()), 1)
            want, batch = (2 * live, 1) if sync else (3 * live, live)
            while not r.stop.is_set() and len(pending) < want:
                pending.append(coord.schedule(step_fn))
            if sync and r.stop.is_set():
                chief_loop.close()  # workers still waiting for a step are let go
            if not pending:
                break
            if r.stop.is_set():
                batch = 1
            for rv in _ended(coord, pending, chief_loop, batch):
                pending.remove(rv)
                got = _value(coord, rv)
                if got is not None:
                    step = max(step, got)
            # (a sync run's step read may lag its token's step by one: read it again)
            if monitor is not None and watched is not None and step + sync >= next_check:
                gs_now, values = coord.run_on_chief(watched)
                if int(gs_now) >= next_check:
                    next_check = (int(gs_now) // s.monitor_every + 1) * s.monitor_every
                    done = monitor(int(gs_now), values)
                    history.append((int(gs_now), time.monotonic() - t0, done))
                    if done:
                        r.stop.set()
        coord.join()
        wall = time.monotonic() - t0
        if sync:
            chief_loop.close()
        for ms in r.sessions.values():
            ms.close()
        gs = int(coord.run_on_chief(chief.model["global_step"]))
        values = coord.run_on_chief(watched[1]) if watched is not None else {}
        by_name = dict(r.by_name)
        recoveries = coord.recoveries + coord.worker_losses
        if sync:
            from .sync_replicas import COUNTS
            from ..runtime.job_api import report
            counters = {k: int(v) for k, v in
                        zip(COUNTS, coord.run_on_chief(chief.model["_sync"].counts))}
            # the job's page shows them (as exactly_once's counts for async runs)
            report(**{f"sync_gradients_{k}": v for k, v in counters.items()})
        else:
            counters = coord.counters()
    finally:
        if sync:
            chief_loop.close()
        coord.close()
    n = spec.num_tasks("worker")
    return (gs, wall, [r.runs.get(k, 0) for k in range(n)], recoveries, values, history,
            by_name, counters)


def _ended(coord, pending: list, chief_loop, batch: int = 1) -> list:
    """The closures of ``pending`` that have ended, waiting for at least ``batch``; in a sync
    run, the chief loop's error (other than a lost PS, which the coordinator recovers from)
    as soon as it has one: no step could end after it."""
    while True:
        timeout = None if chief_loop is None else 1.0
        ended = coord.wait_any(pending, timeout, at_least=batch)
        if ended:
            return ended
        coord.done()  # an error outside these closures (a worker that could not start)
        err = chief_loop.error() if chief_loop is not None else None
        if err is not None:
            raise err


def _value(coord, rv):
    """``rv``'s value; if its closure failed or was cancelled, the first error of the run's
    closures (the one that cancelled the others), else its own."""
    try:
        return rv.fetch()
    except BaseException:
        coord.done()  # raises the first closure error, kept by the coordinator's queue
        raise
