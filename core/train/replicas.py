"""``tv.train.run_replicas``: between-graph replicated training started by one call.

Design
------
Each worker task ``k`` of the cluster gets its own graph, built by ``model_fn(ctx)`` under
``replica_device_setter`` (variables on the PS tasks, the rest on ``/job:worker/task:k``),
its own :class:`~tensorvm.Session` on the shared Dask client and its own
:class:`~tensorvm.train.MonitoredSession` (worker 0 is the chief: it initialises or restores,
saves checkpoints, and with ``sync=True`` runs the chief's loop of the
:class:`SyncReplicasOptimizer`). Variables are shared by name on the PS tasks, as in TF. The
workers' loops run in threads of this process; what they run executes on their Dask workers.

* ``sync=False`` — asynchronous (Hogwild): each worker applies its own gradients to the PS
  without waiting for the others, ``steps_per_run`` steps per submission (one Dask graph of K
  chained steps: the per-step scheduler cost is paid once per K steps). The replicas are not
  bound to tasks: the steps are closures of a :class:`~tensorvm.train.ClusterCoordinator`
  (:mod:`tensorvm.train.elastic_replicas`), each taken by whichever live worker of the job is
  free, so a worker that dies loses nothing (its closure runs again elsewhere, its update
  applied once with ``steps_per_run=1``: the step token) and a worker that joins — a Dask
  worker named after a task of the job, absent at the start or back after a loss — takes
  steps at once (``TrainResult.steps_by_worker``). The sections below describe the per-task
  replicas that ``sync=True`` keeps.
* ``sync=True`` — :class:`SyncReplicasOptimizer` with ``replicas_to_aggregate`` (default: the
  number of workers less ``backup_workers``) and every worker a replica; ``steps_per_run=K``
  runs K synchronous steps per message on the direct data plane (each waits for its token
  inside the message; the chief's loop also runs K per message), so no step waits for a
  round trip to this process; without the direct plane (a step that may block on a queue),
  one step per submission.

Both run their steps on the direct data plane from the first (:func:`may_block` says when a
step cannot: an op that may block on a queue or reader keeps it on Dask), unless ``session``
was made with ``ConfigProto(data_plane="dask"|"direct")``: then every step goes that way.

Failures (each exercised with killed worker processes in ``tests/test_ps_cluster.py``):

* a lost PS worker: every replica's step fails with ``UnavailableError``; the chief restores
  the latest checkpoint in ``checkpoint_dir`` once the PS task has a worker again — its own,
  restarted by its Nanny, or a new worker that holds no task; never another task's worker
  (:mod:`tensorvm.runtime.cluster.device_map`) — the others wait until it has, and all go on
  (:mod:`tensorvm.train.monitored_session`);
* a lost worker (not the chief): its replica recovers (its local state, e.g. its input
  position, starts again) while the others go on; in sync mode with backup workers the steps
  go on without it, and its gradient of a half-done step counts at most once;
* the chief's worker lost: the chief restores the latest checkpoint (TF's chief does the
  same when it restarts) and its loop restarts; the other replicas' progress since that
  checkpoint is undone, and in sync mode the old chief loop gives way to the new one.

``model_fn(ctx)`` returns a dict: ``loss`` (a scalar tensor), ``optimizer`` (a plain
optimizer), optionally ``batch_size`` (examples per worker step) and ``hooks``.
"""
from __future__ import annotations

import contextvars
import logging
import threading
import time
import uuid
from dataclasses import dataclass, field

from .. import ops
from ..framework import dtypes
from ..runtime.cluster.spec import ClusterSpec
from ..framework.errors import CancelledError, InvalidArgumentError, OutOfRangeError
from ..framework.graph import Graph, Tensor, control_dependencies, device, get_default_graph
from ..runtime.job_api import TOPIC_JOBS, program_name
from ..runtime.session import Session
from ..ops.state.variables import Variable, assign
from .device_setter import replica_device_setter
from .hooks import StopAtStepHook
from .monitored_session import MonitoredTrainingSession
from .optimizers import get_or_create_global_step
from .replica_context import ReplicaContext, _run_options, may_block  # noqa: F401 (re-exported)

_log = logging.getLogger("tensorvm")


@dataclass
class TrainResult:
    global_step: int
    wall_s: float
    worker_runs: list
    recoveries: int
    final: dict = field(default_factory=dict)
    history: list = field(default_factory=list)
    steps_by_worker: dict = field(default_factory=dict)  # runs per Dask worker name (async)
    counters: dict = field(default_factory=dict)  # exactly-once: {"applied", "dropped"} (async)

    @property
    def steps_per_s(self) -> float:
        return self.global_step / self.wall_s if self.wall_s > 0 else 0.0


def cycling_batch(arrays, batch_size: int, device: str | None = None, local: bool = True,
                  name: str = "batch"):
    """Minibatches read in the graph from arrays held on ``device`` (a worker): step ``t``
    takes rows ``t*B .. t*B+B-1`` (mod the row count) of every array. Returns the batch
    tensors; their reads advance a position counter (a variable on ``device``, in the local
    variables with ``local=True``, else saved in checkpoints), so ``run(..., steps=K)`` reads
    K successive batches in one submission.

    ``device=None`` (the default) is where the enclosing device scopes put the graph's
    ordinary ops: in a :func:`run_replicas` ``model_fn`` (built under
    ``replica_device_setter``) that is the replica's worker, ``ctx.device`` — not the PS,
    where the setter sends variables — so the data stays where the batches are used."""
    import numpy as np
    g = get_default_graph()
    first = arrays[0]
    rows = int(first.shape.dims[0] if isinstance(first, (Tensor, Variable))
               else np.shape(first)[0])
    with g.colocate_with(None), g.name_scope(name):
        offsets = None  # the rows a step reads, less its offset
        if device is None:
            # an ordinary op: its device is the one the enclosing scopes give the replica's
            # computation (a device function such as replica_device_setter sends variables
            # elsewhere: the PS)
            offsets = ops.range(batch_size, dtype=dtypes.int64)
            device = offsets.op.device or None
        with g.device(None), g.device(device):
            if offsets is None:
                offsets = ops.range(batch_size, dtype=dtypes.int64)
            # the arrays live in (local) variables: K unrolled steps read one copy
            data = [a.value() if isinstance(a, Variable) else a if isinstance(a, Tensor) else
                    Variable(np.asarray(a), trainable=False, name="data",
                             collections=["local_variables"] if local else None).value()
                    for a in arrays]
            pos = Variable(np.int64(0), trainable=False, name="position",
                           collections=["local_variables"] if local else None)
            p = pos.read_value()
            idx = (p * batch_size + offsets) % rows
            with control_dependencies([idx]):
                advance = pos.assign_add(np.int64(1))
            with control_dependencies([advance]):
                return [ops.gather(d, idx) for d in data]


def split_batches(queue, width: int, batch_size: int, device: str | None = None, dtype=None,
                  name: str = "split_batch"):
    """Minibatches from the splits a worker leases from ``queue`` (a
    :func:`~tensorvm.train.split_input_producer` queue of ``.npy`` files whose rows have
    ``width`` columns), read on ``device`` — the data goes from storage to the worker only.

    Returns ``(batch, reload)``: ``batch`` ([batch_size, width]) cycles through the rows of the
    current split as :func:`cycling_batch` does; running ``reload`` leases the next split
    into the worker's buffer and returns its row count (``OutOfRangeError`` when the queue is
    done). :func:`run_replicas` runs it whenever a split is used up (a model's ``reload``)."""
    import numpy as np

    from .input import read_split
    dtype = dtypes.as_dtype(dtype or dtypes.float32)
    g = get_default_graph()
    with g.device(None), g.device(device), g.colocate_with(None), g.name_scope(name):
        r = read_split(queue, dtype=dtype, shape=(None, width))
        buf = Variable(np.zeros((batch_size, width), dtype.np_dtype), trainable=False,
                          validate_shape=False, name="buffer", collections=["local_variables"])
        pos = Variable(np.int64(0), trainable=False, name="position",
                          collections=["local_variables"])
        load = assign(buf, r.records, validate_shape=False)
        with control_dependencies([load]):
            reset = pos.assign(np.int64(0))
        with control_dependencies([reset]):
            reload = ops.identity(ops.shape(load, out_type=dtypes.int64)[0], name="rows")
        rows = ops.maximum(ops.shape(buf.value(), out_type=dtypes.int64)[0], np.int64(1))
        p = pos.read_value()
        idx = (p * batch_size + ops.range(batch_size, dtype=dtypes.int64)) % rows
        with control_dependencies([idx]):
            advance = pos.assign_add(np.int64(1))
        with control_dependencies([advance]):
            batch = ops.reshape(ops.gather(buf.value(), idx), [batch_size, width])
    return batch, reload


class _Announced:
    """Outside a running ``tv.job`` (a plain program), the training is announced to the job
    registry (the dashboard's tensorvm page) as the client's session, named after the program
    (and ``job_name``), with its target step; its end is reported when it ends. Best effort:
    a cluster without the registry ignores the messages."""

    def __init__(self, session, last_step: int, job_name: str | None):
        from ..runtime.job_api import current_name
        self.client = getattr(session, "client", None)
        self.id = None
        if self.client is None or current_name() is not None:
            return  # in process, or a job that the CLI announced already
        name = program_name() + (f" ({job_name})" if job_name else "")
        self.id = f"session-{self.client.id}-{uuid.uuid4().hex[:6]}"
        self._send({"op": "start", "name": name, "client": self.client.id,
                    "kind": "session", "submitted": time.time()})
        self._send({"op": "metrics", "total_steps": int(last_step)})

    def _send(self, msg: dict) -> None:
        if self.id is None:
            return
        try:
            self.client.log_event(TOPIC_JOBS, {**msg, "job": self.id})
        except Exception:  # noqa: BLE001 - never fail training over the dashboard
            _log.debug("could not report to the job registry", exc_info=True)

    def end(self, step: int | None, error: BaseException | None) -> None:
        from ..runtime.direct.client import flush_step_reports
        if self.id is None:
            return
        try:
            flush_step_reports(self.client)  # the steps reach the registry before the end
        except Exception:  # noqa: BLE001
            _log.debug("could not flush the step reports", exc_info=True)
        if step is not None:
            self._send({"op": "metrics", "step": int(step)})
        self._send({"op": "finish", "state": "failed" if error is not None else "done",
                    "reason": None if error is None else f"{type(error).__name__}: {error}"})


def _build(model_fn, ctx: ReplicaContext, sync: bool, n_required: int, total: int,
           steps_per_run: int = 1, plane: str = "auto"):

    from .sync_replicas import SyncReplicasOptimizer
    g = Graph()
    with g.as_default(), device(replica_device_setter(cluster=ctx.cluster,
                                                         worker_device=ctx.device)):
        gs = get_or_create_global_step()
        model = dict(model_fn(ctx))
        if "loss" not in model or "optimizer" not in model:
            raise InvalidArgumentError("model_fn must return a dict with 'loss' and 'optimizer'")
        opt = model["optimizer"]
        hooks = list(model.get("hooks") or [])
        if sync:
            opt = SyncReplicasOptimizer(opt, replicas_to_aggregate=n_required,
                                        total_num_replicas=total)
            hooks.append(opt.make_session_run_hook(ctx.is_chief))
        train_op = opt.minimize(model["loss"], global_step=gs)
        if sync:  # the chief's loop: direct, K steps a run
            opt.chief_run_options = _run_options(plane, opt.chief_train_op)
            if getattr(opt.chief_run_options, "data_plane", "") == "direct":
                opt.chief_steps_per_run = steps_per_run
    model["_close_op"] = getattr(opt, "close_op", None)
    return g, gs, train_op, model, hooks


def run_replicas(model_fn, cluster=None, *, session=None, sync: bool = False,
                 last_step: int = 1000, steps_per_run: int = 1,
                 replicas_to_aggregate: int | None = None, backup_workers: int = 0,
                 checkpoint_dir: str | None = None, save_checkpoint_steps: int | None = None,
                 hooks_fn=None, final=None, job_name: str | None = None,
                 slow_workers: dict | None = None, log_step_count_steps: int = 0,
                 max_recoveries: int = 10, monitor=None, monitor_every: int = 100
                 ) -> TrainResult:
    """Train ``model_fn``'s model with every worker task of ``cluster`` until the global step
    reaches ``last_step`` and return a :class:`TrainResult`.

    ``session`` — a distributed :class:`tensorvm.Session` whose Dask client the replicas
    share (its ClusterSpec is used when ``cluster`` is None); without one a LocalCluster is
    started for ``cluster`` and closed at the end. ``final(ctx, graph) -> fetches`` is fetched
    on the chief at the end (``TrainResult.final``). ``slow_workers={k: seconds}`` delays
    worker ``k`` before each of its runs (to study stragglers). ``hooks_fn(ctx)`` adds hooks.
    ``monitor(step, values) -> bool`` is called on the chief about every ``monitor_every``
    global steps with the values of ``final``; True stops every replica (``TrainResult.history``
    keeps ``(step, seconds, monitor's return)``).
    """
    if cluster is None and session is not None:
        cluster = getattr(getattr(session, "_backend", None), "spec", None)
    spec, n, n_required = _check_args(cluster, sync, replicas_to_aggregate, backup_workers,
                                      steps_per_run)
    # checked before a LocalCluster is started for them
    own = session is None
    if own:
        session = Session(cluster=spec, verbose=False, graph=Graph())
    # the data plane the caller's session was made with ("auto" unless forced)
    plane = getattr(getattr(session, "_backend", None), "data_plane", "auto")
    announced = _Announced(session, last_step, job_name)
    settings = _Settings(
        sync, last_step, steps_per_run, checkpoint_dir, save_checkpoint_steps, final, job_name,
        slow_workers, log_step_count_steps, max_recoveries, monitor, monitor_every, plane)
    if not sync:  # on a ClusterCoordinator: steps go to whichever worker is free
        try:
            return _elastic(model_fn, spec, session, settings, hooks_fn, announced)
        finally:
            if own:
                session.close()
    replicas = [_replica(model_fn, ReplicaContext(k, n, f"/job:worker/task:{k}", k == 0, spec),
                         sync, n_required, n, steps_per_run, plane, last_step, hooks_fn)
                for k in range(n)]
    training = _Training(session, spec, n, settings)
    # each thread runs in a copy of this context: job_api.report reaches the caller's job
    threads = [threading.Thread(target=contextvars.copy_context().run,
                                args=(training.work, *r),
                                name=f"tv-replica-{r[0].task}", daemon=True)
               for r in replicas]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        announced.end(training.results.get("global_step"), next(
            (e for _, e in training.errors if not isinstance(e, threading.BrokenBarrierError)),
            training.errors[0][1] if training.errors else None))
    finally:
        if own:
            session.close()
    return training.result()


def _elastic(model_fn, spec, session, settings, hooks_fn, announced) -> TrainResult:
    """``sync=False``: the steps on a ClusterCoordinator
    (:mod:`tensorvm.train.elastic_replicas`)."""
    from .elastic_replicas import run_async
    try:
        gs, wall, runs, recoveries, values, history, by_name, counters = run_async(
            model_fn, spec, session, settings, hooks_fn, settings.final, settings.monitor,
            announced)
    except BaseException as exc:
        announced.end(None, exc)
        raise
    announced.end(gs, None)
    return TrainResult(gs, wall, runs, recoveries, values or {}, history=history,
                       steps_by_worker=by_name, counters=counters)


def _check_args(cluster, sync, replicas_to_aggregate, backup_workers, steps_per_run):
    """``(spec, number of workers, gradients a sync step needs)``; refuses a cluster without
    workers, an impossible ``replicas_to_aggregate`` and ``steps_per_run < 1``."""
    if cluster is None:
        raise InvalidArgumentError("run_replicas needs cluster= (a ClusterSpec or dict)")
    spec = ClusterSpec(cluster)
    if "worker" not in spec.jobs:
        raise InvalidArgumentError("run_replicas needs a cluster with a 'worker' job")
    n = spec.num_tasks("worker")
    n_required = replicas_to_aggregate or max(n - backup_workers, 1)
    if sync and not 1 <= n_required <= n:
        raise InvalidArgumentError(
            f"run_replicas: replicas_to_aggregate={n_required} but the cluster has {n} worker "
            f"task(s): a step needs between 1 and {n} gradients (TF 1.x would wait for ever "
            "for more than there are workers)")
    if steps_per_run < 1:
        raise InvalidArgumentError(f"steps_per_run must be >= 1, got {steps_per_run}")
    return spec, n, n_required


def _replica(model_fn, ctx, sync, n_required, total, steps_per_run, plane, last_step,
             hooks_fn) -> tuple:
    """One replica's ``(ctx, graph, global step, train op, model, hooks)``."""
    g, gs, train_op, model, hooks = _build(model_fn, ctx, sync, n_required, total,
                                           steps_per_run, plane)
    with g.as_default():  # hooks_fn builds in the replica's graph
        hooks = [StopAtStepHook(last_step=last_step)] + hooks + \
            list(hooks_fn(ctx) if hooks_fn else [])
    return ctx, g, gs, train_op, model, hooks


@dataclass(frozen=True)
class _Settings:
    """The arguments of :func:`run_replicas` that every replica's loop reads."""
    sync: bool
    last_step: int
    steps_per_run: int
    checkpoint_dir: str | None
    save_checkpoint_steps: int | None
    final: object
    job_name: str | None
    slow_workers: dict | None
    log_step_count_steps: int
    max_recoveries: int
    monitor: object
    monitor_every: int
    plane: str


class _Training:
    """What the replica threads of one :func:`run_replicas` share: the start barrier, the
    event that stops them all, and what each reports (its runs, the chief's global step and
    final values, the monitor's history, the errors)."""

    def __init__(self, session, spec, n: int, settings: _Settings):
        self.session, self.spec, self.n, self.s = session, spec, n, settings
        self.results: dict = {}
        self.errors: list = []
        self.history: list = []
        self.stop_all = threading.Event()
        self.start = threading.Barrier(n)
        self.t0 = 0.0  # when the replicas started (set by the chief)

    def work(self, ctx, g, gs, train_op, model, hooks) -> None:
        """One replica's thread: its session, its training loop, its report."""
        sess = Session(graph=g, client=self.session.client, cluster=self.spec, verbose=False)
        try:
            ms = self._monitored(ctx, g, sess, model, hooks)
            self.start.wait()
            if ctx.is_chief:
                self.t0 = time.monotonic()
            runs = self._train(ctx, g, sess, ms, gs, train_op, model)
            self._report(ctx, g, sess, ms, gs, runs)
            ms.close()
        except BaseException as exc:  # noqa: BLE001 - reported by the caller's thread
            self._failed(ctx, sess, model, exc)
        finally:
            sess.close()

    def _monitored(self, ctx, g, sess, model, hooks):
        s = self.s
        with g.as_default():
            return MonitoredTrainingSession(
                is_chief=ctx.is_chief, session=sess, hooks=hooks,
                checkpoint_dir=s.checkpoint_dir if ctx.is_chief else None,
                save_checkpoint_steps=s.save_checkpoint_steps,
                log_step_count_steps=s.log_step_count_steps if ctx.is_chief else 0,
                job_name=s.job_name, batch_size=model.get("batch_size"),
                loss=model["loss"], max_recoveries=s.max_recoveries,
                stop_event=self.stop_all)

    def _train(self, ctx, g, sess, ms, gs, train_op, model) -> int:
        """The replica's training loop until its session or another replica stops it;
        returns how many runs it made."""
        s = self.s
        delay = (s.slow_workers or {}).get(ctx.task, 0.0)
        watch = s.monitor is not None and ctx.is_chief and s.final is not None
        if watch:
            with g.as_default():
                watched = (gs, s.final(ctx, g))
        next_check = s.monitor_every
        reload, left = model.get("reload"), 0
        # A training loop's steps go on the direct data plane from the first (the
        # session's "auto" runs a plan's first step on Dask: unrolled K steps, seconds),
        # unless an op of the step may block on a queue or reader.
        opts = _run_options(s.plane, train_op)
        # Sync K steps a run: each of the K waits for its token inside the one message
        # (direct plane only: unrolled on Dask the waits would hold K tasks at once).
        direct = getattr(opts, "data_plane", "") == "direct"
        per_run = s.steps_per_run if not s.sync or direct else 1
        fetch, seen, runs = [train_op, gs], 0, 0
        per_split = max(int(model.get("batch_size") or 1), 1)
        try:
            while not ms.should_stop() and not self.stop_all.is_set():
                if reload is not None and left <= 0:  # the split is used up: lease one
                    left = int(ms.run(reload)) // per_split
                    continue
                if delay:
                    time.sleep(delay)  # the straggler's slowness, by request
                k = per_run if reload is None else min(per_run, left)
                if s.sync:  # not past last_step: the step read lags the gate by <= 1
                    k = max(min(k, s.last_step - seen - 1), 1)
                out = ms.run(fetch, options=opts, steps=k)
                seen = int(out[1])
                left -= k
                runs += 1
                if watch and seen + k >= next_check:  # the step read may lag by k
                    next_check = self._watch(sess, watched, opts, next_check)
        except OutOfRangeError:
            pass  # sync: the chief closed the token gate (training ended)
        except CancelledError:
            if not self.stop_all.is_set():
                raise  # (a replica stopped by the others' stop event ends quietly)
        return runs

    def _watch(self, sess, watched, opts, next_check: int) -> int:
        """Call the monitor once the global step has reached ``next_check`` (True from it
        stops every replica); returns the step of the next check."""
        step, values = sess.run(watched, options=opts)
        if step >= next_check:
            next_check = (int(step) // self.s.monitor_every + 1) * self.s.monitor_every
            done = self.s.monitor(int(step), values)
            self.history.append((int(step), time.monotonic() - self.t0, done))
            if done:
                self.stop_all.set()
        return next_check

    def _report(self, ctx, g, sess, ms, gs, runs: int) -> None:
        self.results[ctx.task] = {"runs": runs, "recoveries": ms.recoveries,
                                  "end": time.monotonic()}
        if ctx.is_chief:
            self.results["global_step"] = int(sess.run(gs))
            if self.s.final is not None:
                with g.as_default():
                    self.results["final"] = sess.run(self.s.final(ctx, g))

    def _failed(self, ctx, sess, model, exc: BaseException) -> None:
        """A replica failed: record why and stop the others."""
        # a replica told to stop while it waited (CancelledError) is not the cause: the
        # caller learns why from the replica that set the stop event
        if not (isinstance(exc, CancelledError) and self.stop_all.is_set()):
            self.errors.append((ctx.task, exc))
            if not isinstance(exc, threading.BrokenBarrierError):
                _log.warning("replica %d failed: %r", ctx.task, exc)
        self.start.abort()
        self.stop_all.set()
        if model.get("_close_op") is not None:  # sync: release replicas waiting on the PS
            try:
                sess.run(model["_close_op"])
            except Exception:  # noqa: BLE001 - the PS may be the thing that failed
                _log.debug("closing the sync state failed", exc_info=True)

    def result(self) -> TrainResult:
        """The :class:`TrainResult`; raises the first replica's error (a real one before a
        barrier broken by it)."""
        errors = self.errors
        real = [(k, e) for k, e in errors if not isinstance(e, threading.BrokenBarrierError)]
        if real or errors:
            k, exc = (real or errors)[0]
            raise exc
        n, results = self.n, self.results
        wall = results[0]["end"] - self.t0
        return TrainResult(results.get("global_step", 0), wall,
                           [results[k]["runs"] for k in range(n)],
                           sum(results[k]["recoveries"] for k in range(n)),
                           results.get("final") or {}, history=self.history)
