"""``tv.train.run_replicas``: between-graph replicated training started by one call.

Design
------
The training is a stream of steps scheduled on a :class:`~tensorvm.train.ClusterCoordinator`
(:mod:`tensorvm.train.elastic_replicas`): each worker task ``k`` of the cluster gets its own
graph, built by ``model_fn(ctx)`` under ``replica_device_setter`` (variables on the PS tasks,
the rest on ``/job:worker/task:k``), its own :class:`~tensorvm.Session` on the shared Dask
client and its own :class:`~tensorvm.train.MonitoredSession`; variables are shared by name on
the PS tasks, as in TF. A step (``steps_per_run`` of them on the direct data plane: one
message, the per-step scheduler cost paid once per K) is taken by whichever live worker of the
job is free, so the replicas are not bound to tasks: a worker that dies loses nothing (its
closure runs again elsewhere with its step token, each of its K steps applied once) and a
worker that joins — a Dask worker named after a task of the job, absent at the start or back
after a loss — takes steps at once (``TrainResult.steps_by_worker``). The coordinator (its
first task is the chief) initialises or restores the variables and saves checkpoints.

* ``sync=False`` — asynchronous (Hogwild): each step applies its own gradients to the PS
  without waiting for the others; every update applied once per step token (the
  exactly-once guard; ``TrainResult.counters``: ``applied``, ``dropped``).
* ``sync=True`` — :class:`SyncReplicasOptimizer` with ``replicas_to_aggregate`` (default: the
  number of workers less ``backup_workers``): a global step takes the first N gradients from
  whichever workers compute them (stale ones dropped, one apply per global step, the chief's
  loop in the coordinator's own session on the PS); each gradient carries its step's token, so
  a closure run again after its worker was lost never adds a gradient twice
  (``TrainResult.counters``: ``accepted`` = global steps x N, ``taken``, the dropped
  ``stale``/``surplus``/``ahead``/``duplicate``). With ``backup_workers=0`` each step's N
  gradients are one from each live worker: the result is synchronous SGD's.

Steps go on the direct data plane from the first (:func:`may_block` says when a step cannot:
an op that may block on a queue or reader keeps it on Dask, one step per submission in sync
mode), unless ``session`` was made with ``ConfigProto(data_plane="dask"|"direct")``: then
every step goes that way.

Failures (exercised with killed worker processes in ``tests/test_ps_cluster.py``,
``tests/test_coordinator_elastic.py`` and ``tests/test_sync_elastic.py``):

* a lost PS worker: the steps fail with ``UnavailableError``; with ``checkpoint_dir`` the
  coordinator restores the latest checkpoint once the PS task has a worker again (sync: the
  chief's loop restarts at the restored step) and the steps go on;
* a lost worker (the chief's task included: the chief's loop does not run on it): its
  in-flight step runs again on another worker; when it is back it takes steps again.

``model_fn(ctx)`` returns a dict: ``loss`` (a scalar tensor), ``optimizer`` (a plain
optimizer), optionally ``batch_size`` (examples per worker step) and ``hooks``.
"""
from __future__ import annotations

import logging
import time
import uuid
from dataclasses import dataclass, field

from .. import ops
from ..framework import dtypes
from ..runtime.cluster.spec import ClusterSpec
from ..framework.errors import InvalidArgumentError
from ..framework.graph import Graph, Tensor, control_dependencies, get_default_graph
from ..runtime.job_api import TOPIC_JOBS, program_name
from ..runtime.session import Session
from ..ops.state.variables import Variable, assign
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
        from ..runtime.direct.step_reports import flush_step_reports
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
    try:
        return _elastic(model_fn, spec, session, settings, hooks_fn, announced, n_required)
    finally:
        if own:
            session.close()


def _elastic(model_fn, spec, session, settings, hooks_fn, announced,
             n_required: int) -> TrainResult:
    """The steps on a ClusterCoordinator (:mod:`tensorvm.train.elastic_replicas`), each
    taken by whichever worker is free."""
    from .elastic_replicas import run_async, run_sync
    try:
        if settings.sync:
            out = run_sync(model_fn, spec, session, settings, hooks_fn, settings.final,
                           settings.monitor, n_required)
        else:
            out = run_async(model_fn, spec, session, settings, hooks_fn, settings.final,
                            settings.monitor, announced)
        gs, wall, runs, recoveries, values, history, by_name, counters = out
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
