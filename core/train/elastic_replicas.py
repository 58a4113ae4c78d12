"""Asynchronous ``run_replicas`` on a :class:`~tensorvm.train.ClusterCoordinator`: replicas not
pinned to a fixed set of tasks.

The training is a stream of closures, each ``steps_per_run`` steps of the replica graph of
whichever worker is free (its graph built by ``model_fn(ctx)`` under ``replica_device_setter``,
as before, once per worker task). This thread keeps about two closures per live worker queued
until the global step reaches ``last_step`` (a worker's ``StopAtStepHook``), the monitor says
stop, or the input ends. So a worker that dies mid-run loses nothing: its closure runs again on
another worker, with its step token when ``steps_per_run`` is 1 (the PS applies it once); a
worker that joins (a Dask worker named after a task of the job) takes closures at once; a worker
that comes back takes them again.

Each worker's runs go through its own :class:`~tensorvm.train.MonitoredSession` (made once,
``max_recoveries=0``: a lost device is the coordinator's to handle) with the hooks of the old
per-task loop: ``StopAtStepHook``, the model's ``hooks`` and ``hooks_fn(ctx)``'s, and on the
chief (the coordinator's first task) the ``CheckpointSaverHook`` and ``StepCounterHook``. The
coordinator initialises the variables (restoring the latest checkpoint of ``checkpoint_dir``)
once, before any closure runs, and restores it again after a PS is lost.
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


class _Replicas:
    """What the closures of one asynchronous run share (its settings, each worker's
    MonitoredSession and input state, the stop flag)."""

    def __init__(self, model_fn, settings, hooks_fn):
        self.model_fn, self.s, self.hooks_fn = model_fn, settings, hooks_fn
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
        model["train_op"] = model["optimizer"].minimize(model["loss"], global_step=gs)
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
            s.runs[w.task] += 1
            s.by_name[w.name] += 1
            if ms.should_stop():
                s.stop.set()
            return int(out[1])
        return train


def w_run(w, ms: MonitoredSession, fetches, options, steps: int):
    """Run ``fetches`` through ``w``'s MonitoredSession (its hooks) with the closure's token
    (one a run, for ``steps=1``)."""
    feeds = None
    if w.once is not None and w._token is not None and steps == 1:
        feeds = {w.once.token: b"%s/%d" % (w._token, w._runs)}
    w._runs += 1
    return ms.run(fetches, feeds, options=options, steps=steps)


def run_async(model_fn, spec, session, settings, hooks_fn, final, monitor, announced):
    """``run_replicas(sync=False)``: see the module docstring. Returns
    ``(global step, wall seconds, runs per task, recoveries, final values, history,
    runs per Dask worker name, the exactly-once counters)``."""
    r = _Replicas(model_fn, settings, hooks_fn)
    s = settings
    coord = ClusterCoordinator(session, r.build, cluster=spec, checkpoint_dir=s.checkpoint_dir,
                               exactly_once=s.steps_per_run == 1,
                               max_recoveries=s.max_recoveries)
    history: list = []
    try:
        chief = coord.chief
        r.session(coord, chief)  # the chief's hooks are in place before the first step
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
        pending: collections.deque = collections.deque()
        next_check, step = s.monitor_every, 0
        while True:
            want = 2 * max(len(coord.workers()), 1)
            while not r.stop.is_set() and len(pending) < want:
                pending.append(coord.schedule(step_fn))
            if not pending:
                break
            got = pending.popleft().fetch()
            if got is not None:
                step = max(step, got)
            if monitor is not None and watched is not None and step >= next_check:
                gs_now, values = coord.run_on_chief(watched)
                next_check = (int(gs_now) // s.monitor_every + 1) * s.monitor_every
                done = monitor(int(gs_now), values)
                history.append((int(gs_now), time.monotonic() - t0, done))
                if done:
                    r.stop.set()
        coord.join()
        wall = time.monotonic() - t0
        for ms in r.sessions.values():
            ms.close()
        gs = int(coord.run_on_chief(chief.model["global_step"]))
        values = coord.run_on_chief(watched[1]) if watched is not None else {}
        by_name = dict(r.by_name)
        recoveries = coord.recoveries + coord.worker_losses
        counters = coord.counters()
    finally:
        coord.close()
    n = spec.num_tasks("worker")
    return (gs, wall, [r.runs.get(k, 0) for k in range(n)], recoveries, values, history,
            by_name, counters)
