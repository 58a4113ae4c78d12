"""``tv.train.ClusterCoordinator``: steps scheduled to whichever worker is free (TF 2's
``tf.distribute.experimental.coordinator.ClusterCoordinator``, for TF 1.x graphs).

Design
------
The variables live on the ``/job:ps`` tasks, as in :func:`~tensorvm.train.run_replicas`. For
each task ``k`` of the job ``worker`` whose Dask worker is alive, the coordinator builds (once,
cached) a replica graph with ``model_fn(ctx)`` under ``replica_device_setter`` — variables on
the PS, the rest on ``/job:worker/task:k``, so a step runs on the direct data plane between
that worker and the PS — gives it its own :class:`~tensorvm.Session` on the caller's Dask
client, and runs one thread that takes closures from one shared queue
(:class:`~tensorvm.train.remote_value.ClosureQueue`). ``schedule(fn, args, kwargs)`` queues
``fn(worker, *args, **kwargs)`` and returns a :class:`RemoteValue` at once; any free worker
takes the next closure, and ``worker.run(fetches, feed_dict)`` runs the worker's replica graph.
TF 2 traces a function per worker the same way.

Workers come and go (the scheduler's worker events, :data:`TOPIC_WORKERS`, checked again
every second):

* a worker lost mid-step (``UnavailableError`` naming its own device, or its connection
  closed): the closure goes back to the front of the queue and runs on another worker (TF 2's
  migration); the lost worker's thread ends, and when a Dask worker of the same name is back
  (its Nanny, or an operator, restarting it) a new thread starts on the cached graph, its
  local state (input positions) initialised again;
* a worker that joins (a Dask worker named ``worker-<k>`` for a task ``k`` of the job)
  gets a thread and takes closures at once;
* a PS lost: the closure fails with ``UnavailableError`` (``join`` raises it), unless
  ``checkpoint_dir`` is given: then the coordinator waits until the PS task has a worker
  again, initialises the variables, restores the latest checkpoint (what a
  ``MonitoredTrainingSession``'s recovery does) and runs the closure again.

Exactly once: every closure carries a step token, fed to the replica graph's
:func:`~tensorvm.train.exactly_once.exactly_once` guard (the variable updates ``model_fn``
builds apply at most once per token on each PS), and a closure run again after its worker was
lost keeps its token. TF 2 says "a function may be executed more than once"; here its update
is applied once: the late twin's update is dropped on the PS and counted
(:meth:`ClusterCoordinator.counters`). A closure's ``i``-th ``worker.run`` feeds
``token/i``, so a closure of several runs is guarded run by run, and each of the K steps of a
``run(..., steps=K)`` claims its own token (``token/i#k``,
:func:`~tensorvm.ops.state.ledger.per_step_token`): a twin re-run of K steps applies exactly those
of them whose first run did not reach the PS.
"""
from __future__ import annotations

import collections
import contextvars
import itertools
import logging
import re
import threading
import time
import uuid

from ..framework.device_spec import DeviceSpec
from ..framework.errors import (FailedPreconditionError, InvalidArgumentError,
                                UnavailableError)
from ..runtime.cluster import events as cluster_events
from ..runtime.cluster.device_map import resource_name
from ..runtime.cluster.spec import ClusterSpec, scheduler_identity
from ..runtime.session import Session
from ..runtime.wire_names import TOPIC_WORKERS
from .coordinator_worker import Worker
from .remote_value import Closure, ClosureQueue, PerWorkerValues, RemoteValue
from .replica_context import ReplicaContext

__all__ = ["ClusterCoordinator", "Worker", "RemoteValue", "PerWorkerValues"]

_log = logging.getLogger("tensorvm")
MAX_ATTEMPTS = 5  # runs of a closure that met a transient error (not a lost worker)
LOST_RETRY_S = 5.0  # a worker listed again at the address it was lost at: retried after this


class ClusterCoordinator:
    """Schedule functions to any available worker of a distributed session (see the module
    docstring).

    ``session`` — a :class:`tensorvm.Session` on a Dask cluster whose ClusterSpec has a
    ``worker`` job and the ``ps`` job that holds the variables (a session joined by address
    with no ClusterSpec: the jobs are read from the workers' names, ``ps-0``,
    ``worker-1`` …). ``model_fn(ctx)`` builds the model in each worker's replica graph
    (``ctx`` a :class:`~tensorvm.train.ReplicaContext`); what it returns is ``worker.model``.
    The coordinator initialises the variables (restoring the latest checkpoint of
    ``checkpoint_dir`` when there is one) before any closure runs; with
    ``save_checkpoint_steps`` it saves one every that many finished closures.
    ``exactly_once=False`` builds no step-token guard. ``cluster`` (a ClusterSpec or dict)
    replaces the session's. ``after_state_init(coordinator, session)`` is called with the
    coordinator's own session each time it has initialised or restored the PS variables (at the start and
    after each recovery from a lost PS), ``after_worker_init(worker)`` each time a worker's
    local state was initialised (a new life of its worker, or after a restore): a
    synchronous ``run_replicas`` sets its accumulators and local steps there.

    >>> # coord = tv.train.ClusterCoordinator(session, model_fn)
    >>> # rv = coord.schedule(lambda worker: worker.run(["train_op", "loss"])[1])
    >>> # coord.join(); rv.fetch()
    """

    def __init__(self, session, model_fn=None, *, job: str = "worker", cluster=None,
                 checkpoint_dir: str | None = None, save_checkpoint_steps: int | None = None,
                 exactly_once: bool = True, max_wait_secs: float = 600.0,
                 max_recoveries: int = 10, after_state_init=None, after_worker_init=None):
        client = getattr(session, "client", None)
        if client is None:
            raise InvalidArgumentError(
                "ClusterCoordinator needs a distributed session (a tv.Session on a Dask "
                "cluster: tv.Session(cluster=...) or tv.Session('tcp://...')); this session "
                "runs in process, with no workers to schedule to")
        if checkpoint_dir and checkpoint_dir.startswith("memory://"):
            raise InvalidArgumentError(
                f"checkpoint_dir {checkpoint_dir!r}: memory:// checkpoints would live in one "
                "worker's process and be lost with it; use a shared file:// folder or object "
                "storage")
        backend = getattr(session, "_backend", None)
        self.client, self.job = client, job
        self.spec = ClusterSpec(cluster) if cluster is not None else \
            getattr(backend, "spec", None) or self._spec_from_names()
        if job not in self.spec.jobs:
            raise InvalidArgumentError(
                f"ClusterCoordinator needs a cluster with a {job!r} job to schedule to; the "
                f"session's cluster has the jobs {sorted(self.spec.jobs)}")
        self._plane = getattr(backend, "data_plane", "auto")
        self._model_fn = model_fn
        self._exactly_once = bool(exactly_once and model_fn is not None)
        self._dir = checkpoint_dir.rstrip("/") if checkpoint_dir else None
        self._save_every = save_checkpoint_steps
        self._after_state_init, self._after_worker_init = after_state_init, after_worker_init
        self._max_wait, self._max_recoveries = max_wait_secs, max_recoveries
        self._id = uuid.uuid4().hex[:10].encode()
        self._seq = itertools.count()
        self._queue = ClosureQueue()
        self._lock = threading.RLock()  # the workers, threads and state below
        self._workers: dict[int, Worker] = {}
        self._threads: dict[int, threading.Thread] = {}
        self._lost: dict[int, tuple[str, float]] = {}  # task -> (address lost, when)
        self._values: dict[str, PerWorkerValues] = {}
        self._gone: set = set()  # addresses of workers the scheduler removed
        self._broken: dict = {}  # task -> the error that stopped its start (not retried)
        self._closed: str | None = None
        self._finished = 0
        self.recoveries = 0  # PS losses recovered from the checkpoint
        self.worker_losses = 0  # closures put back because their worker was lost
        self.generation = 0  # bumped when the PS state is created again
        self._state_lock = threading.Lock()
        self._recovering = threading.Lock()  # one recovery from a PS loss at a time
        self._chief = self._worker(min(t for j, t in self.spec.tasks() if j == job))
        ps = "ps" if "ps" in self.spec.jobs else job
        self._chief_sess = self._session(self._chief.graph, f"/job:{ps}/task:0")
        try:
            self._create_state(restore=True)
            self._map_unnamed()
            self._changed = threading.Event()
            self._sub = cluster_events.subscribe(client, TOPIC_WORKERS, self._on_event)
            self._reconcile()
            self._watcher = threading.Thread(target=self._watch, daemon=True,
                                             name="tv-coordinator-watch")
            self._watcher.start()
        except BaseException:
            self._chief_sess.close()
            raise

    # ---- TF 2's surface -------------------------------------------------------------------------
    def schedule(self, fn, args=(), kwargs=None) -> RemoteValue:
        """Queue ``fn(worker, *args, **kwargs)`` to run on the next free worker and return its
        :class:`RemoteValue` at once. :class:`PerWorkerValues` among the arguments become the
        running worker's value. Raises the error of an earlier closure (once)."""
        if not callable(fn):
            raise TypeError(f"ClusterCoordinator.schedule needs a callable "
                            f"fn(worker, *args, **kwargs); got {type(fn).__name__} {fn!r}")
        if kwargs is not None and not isinstance(kwargs, dict):
            raise TypeError(f"schedule's kwargs must be a dict, got {type(kwargs).__name__}")
        token = b"%s-%d" % (self._id, next(self._seq))
        return self._queue.put(Closure(fn, args or (), kwargs or {}, token))

    def join(self, timeout: float | None = None) -> None:
        """Wait until every scheduled function has finished; raise the first error of one
        (and clear it: the closures queued after it were cancelled)."""
        self._queue.join(timeout)

    def done(self) -> bool:
        """Whether every scheduled function has finished; raises the first error (once)."""
        return self._queue.done()

    def wait_any(self, values, timeout: float | None = None, at_least: int = 1) -> list:
        """Wait until one of ``values`` (RemoteValues of this coordinator) has ended
        (``at_least`` of them, at most all), or a closure has failed, at most ``timeout``;
        returns those that have ended (in their order). A caller that keeps N closures in
        flight tops them up from here, whichever ends first (waiting for the oldest, it
        would wait while the others end); ``at_least`` > 1 tops them up in batches (one wake
        of the caller a batch, not one a closure)."""
        return self._queue.wait_any(values, timeout, at_least)

    def fetch(self, values):
        """The values of ``values`` (a :class:`RemoteValue` or a list/tuple/dict of them, or
        of anything else, returned as is), waiting for each."""
        if isinstance(values, RemoteValue):
            return values.fetch()
        if isinstance(values, dict):
            return {k: self.fetch(v) for k, v in values.items()}
        if isinstance(values, (list, tuple)):
            return type(values)(self.fetch(v) for v in values)
        return values

    def create_per_worker_dataset(self, dataset_fn) -> PerWorkerValues:
        """Per-worker input: ``dataset_fn(ctx)`` is built in each worker's replica graph under
        its device (e.g. :func:`~tensorvm.train.split_batches` on a split queue, or
        :func:`~tensorvm.train.cycling_batch`) when a closure there first needs it; pass the
        result among ``schedule``'s arguments and the closure gets its worker's value."""
        if not callable(dataset_fn):
            raise TypeError(f"create_per_worker_dataset needs a callable dataset_fn(ctx); got "
                            f"{type(dataset_fn).__name__}")
        pw = PerWorkerValues(dataset_fn, f"per_worker_{len(self._values)}")
        self._values[pw.name] = pw
        return pw

    create_per_worker_values = create_per_worker_dataset

    # ---- what it has done -----------------------------------------------------------------------
    def workers(self) -> dict:
        """``{task: Worker}`` of the tasks that have run (or are running) a thread."""
        with self._lock:
            return {k: w for k, w in self._workers.items() if w.name is not None}

    def num_workers(self) -> int:
        """Worker threads running now (one per live worker of the job)."""
        with self._lock:
            return sum(1 for t in self._threads.values() if t.is_alive())

    def steps_by_worker(self) -> dict:
        """``{Dask worker name: closures finished there}``."""
        out: collections.Counter = collections.Counter()
        with self._lock:
            for w in self._workers.values():
                if w.finished:
                    out[w.name] += w.finished
        return dict(out)

    def counters(self) -> dict:
        """The exactly-once guard's counts over the PS ledgers: ``{"applied", "dropped"}``
        (updates applied, late twins dropped), also sent to the running job's page
        (``tv.job.report``); ``{}`` without the guard or with no update to guard."""
        once = self._chief.once
        if once is None or not once.ledgers:
            return {}
        with self._state_lock:
            return once.report(self._chief_sess)

    def run_on_chief(self, fetches, feed_dict=None):
        """Run ``fetches`` of the chief's replica graph (e.g. read the variables) in the
        coordinator's own session, on the direct data plane unless an op may block (as
        ``Worker.run``: a monitor's evaluation every N steps must not go through Dask)."""
        fetches = self._chief._named(fetches)
        with self._state_lock:
            return self._chief_sess.run(fetches, feed_dict, self._chief._options(fetches))

    def session_of(self, worker: Worker) -> Session:
        """``worker``'s session (made on first use)."""
        with self._lock:
            if worker.session is None:
                worker.session = self._session(worker.graph, worker.device)
            return worker.session

    @property
    def chief(self) -> Worker:
        """The worker whose replica graph the coordinator's own session runs (init,
        checkpoints, :meth:`run_on_chief`)."""
        return self._chief

    def close(self) -> None:
        """Cancel the queued closures, stop the worker threads and close their sessions."""
        if self._closed is not None:
            return
        self._closed = "closed"
        self._queue.close("close() was called")
        self._changed.set()
        self._sub.close()
        with self._lock:
            threads = list(self._threads.values())
        for t in threads:
            t.join(30)
        self._watcher.join(5)
        for w in self._workers.values():
            if w.session is not None:
                w.session.close()
        self._chief_sess.close()

    def __enter__(self) -> ClusterCoordinator:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ---- workers --------------------------------------------------------------------------------
    def _spec_from_names(self) -> ClusterSpec:
        """A session without a ClusterSpec: the jobs of the workers named ``<job>-<k>``."""
        tasks: dict = {}
        for w in scheduler_identity(self.client)["workers"].values():
            m = re.match(r"^([A-Za-z_][\w]*)-(\d+)$", str(w.get("name")))
            if m:
                tasks.setdefault(m.group(1), set()).add(int(m.group(2)))
        return ClusterSpec({job: max(ts) + 1 for job, ts in tasks.items()})

    def _session(self, graph, default_device: str) -> Session:
        """A session of one replica graph on the caller's client. A spec of task counts is
        not given to it (a session maps every task of its spec when made, and fails for a
        worker that is not there yet): tasks map to the workers named after them, as the
        spec would; a spec naming workers is given."""
        named = any(self.spec.worker_for(j, t) is not None for j, t in self.spec.tasks())
        return Session(graph=graph, client=self.client, cluster=self.spec if named else None,
                       default_device=default_device, verbose=False)

    def _task_of(self, name: str, addr: str, resources=()) -> int | None:
        """The task of the job a Dask worker is: the one the spec names it for, else the one
        whose device it holds (mapped by a session), else the one it is named after."""
        tasks = [t for j, t in self.spec.tasks() if j == self.job]
        for task in tasks:
            want = self.spec.worker_for(self.job, task)
            if str(want if want is not None else f"{self.job}-{task}") in (name, addr):
                return task
        if any(str(n) == name for n in self.spec.task_names()):
            return None  # named after another task (ps-0): not a worker of the job
        for task in tasks:
            if self.spec.worker_for(self.job, task) is None and \
                    resource_name(self.job, task) in resources:
                return task
        return None

    def _map_unnamed(self) -> None:
        """A cluster whose workers are not named after tasks (a plain LocalCluster, workers
        started with no ``--name``): each task of the job is mapped now, by the runtime's
        rule (a worker that holds no task), through the coordinator's own session, so the
        scheduler's worker resources say which worker is which task."""
        workers = scheduler_identity(self.client)["workers"].values()
        if {str(w.get("name")) for w in workers} & set(self.spec.task_names()):
            return  # named workers: each task is the worker named after it
        devices = getattr(getattr(self._chief_sess, "_backend", None), "_devices", None)
        for job, task in self.spec.tasks():
            if job == self.job and devices is not None:
                try:
                    devices.ensure_mapped(job, task)
                except Exception:  # noqa: BLE001 - more tasks than workers: those wait
                    _log.debug("could not map %s-%d", job, task, exc_info=True)

    def _worker(self, task: int) -> Worker:
        """The task's :class:`Worker`, its replica graph built on first use."""
        with self._lock:
            w = self._workers.get(task)
            if w is None:
                ctx = ReplicaContext(task, self.spec.num_tasks(self.job),
                                     f"/job:{self.job}/task:{task}", not self._workers,
                                     self.spec)
                w = Worker(self, ctx)
                w._build(self._model_fn)
                self._workers[task] = w
            return w

    def _on_event(self, event) -> None:
        # on the client's event loop: note a removed worker's address (a closure never
        # starts there), the watcher does the rest
        msg = event[1] if isinstance(event, (tuple, list)) and len(event) > 1 else event
        if isinstance(msg, dict) and msg.get("action") == "removed":
            self._gone.add(msg.get("worker"))
        self._changed.set()

    def _watch(self) -> None:
        while self._closed is None:
            self._changed.wait(1.0)
            self._changed.clear()
            if self._closed is not None:
                return
            try:
                self._reconcile()
            except Exception:  # noqa: BLE001 - the scheduler may be restarting: next time
                _log.debug("could not list the workers", exc_info=True)

    def _reconcile(self) -> None:
        """Start a thread for every live worker of the job that has none."""
        live = {}
        for addr, info in scheduler_identity(self.client)["workers"].items():
            task = self._task_of(str(info.get("name")), addr, info.get("resources") or {})
            if task is not None:
                live[task] = (addr, str(info.get("name")))
        with self._lock:
            if self._closed is not None:
                return
            for task, (addr, name) in sorted(live.items()):
                t = self._threads.get(task)
                if (t is not None and t.is_alive()) or task in self._broken:
                    continue
                lost = self._lost.get(task)
                if lost is not None and lost[0] == addr and time.monotonic() - lost[1] < \
                        LOST_RETRY_S:
                    continue  # the scheduler still lists the worker it just lost
                self._threads[task] = t = threading.Thread(
                    target=contextvars.copy_context().run, args=(self._serve, task, addr, name),
                    daemon=True, name=f"tv-coordinator-{self.job}-{task}")
                t.start()

    def _serve(self, task: int, addr: str, name: str) -> None:
        """One life of a worker's thread: prepare, then take closures until the coordinator
        closes or the worker is lost."""
        w = self._worker(task)
        w.name = name
        w.lives += 1
        self.session_of(w)
        for attempt in range(MAX_ATTEMPTS):
            try:
                w._init_local()
                w.generation = self.generation
                break
            except Exception as exc:  # noqa: BLE001
                kind = self._kind(exc, w, addr)
                if kind in ("retry", "state") and attempt + 1 < MAX_ATTEMPTS:
                    time.sleep(0.2)
                    continue
                if kind != "worker":  # a bug, not a loss: join raises it
                    _log.warning("worker %s (%s) could not start: %r", name, w.device, exc)
                    with self._lock:
                        self._broken[task] = exc
                    self._queue.fail_all(exc)
                self._mark_lost(task, addr, exc)
                return
        while True:
            closure = self._queue.get()
            if closure is None:
                return
            if not self._run(w, closure, addr):
                return

    def _run(self, w: Worker, c: Closure, addr: str) -> bool:
        """Run closure ``c`` on ``w``; False when ``w``'s worker was lost (``c`` put back)."""
        if addr in self._gone:  # lost since its last closure: the closure stays queued
            self.worker_losses += 1
            self._queue.put_back(c)
            self._mark_lost(w.task, addr, UnavailableError(f"worker {w.name!r} left"))
            return False
        c.attempts += 1
        c.workers.append(w.name)
        generation = self.generation  # the PS state this run starts from
        try:
            if w.generation != self.generation:  # the PS state was restored since
                w._init_local()
                w.generation = self.generation
            w._token, w._runs = c.token, 0
            args = [self._resolve(a, w) for a in c.args]
            kwargs = {k: self._resolve(v, w) for k, v in c.kwargs.items()}
            value = c.fn(w, *args, **kwargs)
        except BaseException as exc:  # noqa: BLE001 - reported through the RemoteValue
            kind = self._kind(exc, w, addr)
            if kind == "worker":
                self.worker_losses += 1
                self._queue.put_back(c)
                self._mark_lost(w.task, addr, exc)
                return False
            if kind == "state" and self._dir is not None:
                try:
                    self._recover(exc, generation)
                except BaseException as again:  # noqa: BLE001
                    self._queue.failed(c, again)
                    return True
                self._queue.put_back(c)
                return True
            if kind == "retry" and c.attempts < MAX_ATTEMPTS:
                _log.info("coordinator: closure run again after %r", exc)
                self._queue.put_back(c)
                return True
            self._queue.failed(c, exc)
            return True
        finally:
            w._token = None
        w.finished += 1
        self._queue.finished(c, value, w.name)
        self._after_closure()
        return True

    def _resolve(self, value, w: Worker):
        if isinstance(value, PerWorkerValues):
            return w.value_of(value)
        if isinstance(value, (list, tuple)) and not hasattr(value, "_fields"):
            return type(value)(self._resolve(v, w) for v in value)
        if isinstance(value, dict):
            return {k: self._resolve(v, w) for k, v in value.items()}
        return value

    def _kind(self, exc: BaseException, w: Worker, addr: str) -> str:
        """``"worker"``: ``w``'s own worker was lost (the closure moves); ``"state"``:
        another device's worker (a PS) was lost; ``"retry"``: unavailable with no device
        named while ``w``'s worker is alive (a connection or registration that failed: run
        again, up to :data:`MAX_ATTEMPTS` times); ``"error"``: anything else. Any error
        once ``w``'s worker has left (a step that met its restarted, uninitialised successor)
        is ``"worker"``."""
        if addr in self._gone:
            return "worker"
        if not isinstance(exc, (UnavailableError, OSError)):
            return "error"
        dev = getattr(exc, "device", None)
        if dev:
            spec = DeviceSpec.parse(dev)
            return "worker" if (spec.job, spec.task) == (self.job, w.task) else "state"
        try:
            alive = addr in scheduler_identity(self.client)["workers"]
        except Exception:  # noqa: BLE001 - the scheduler itself is gone
            return "state"
        return "retry" if alive else "worker"

    def _mark_lost(self, task: int, addr: str, exc: BaseException) -> None:
        _log.warning("coordinator: worker task %d (%s) lost (%s); its closures go to the "
                     "other workers until it is back", task, addr,
                     (str(exc).splitlines() or [repr(exc)])[0])
        with self._lock:
            self._lost[task] = (addr, time.monotonic())
        self._changed.set()

    # ---- the PS state ---------------------------------------------------------------------------
    def _create_state(self, restore: bool) -> None:
        """Initialise the global variables on the PS; restore the latest checkpoint."""
        from .monitored_session import Scaffold
        from .saver import latest_checkpoint
        with self._state_lock:
            if not hasattr(self, "_scaffold"):
                with self._chief.graph.as_default():
                    sc = Scaffold(local_init_op=None).finalize(self._chief.graph)
                self._scaffold = sc
            sc = self._scaffold
            latest = latest_checkpoint(self._dir) if (self._dir and restore) else None
            self._chief_sess.run(sc.init_op)
            if latest is not None and sc.saver is not None:
                sc.saver.restore(self._chief_sess, latest)
                _log.info("coordinator: restored %s", latest)
            if self._after_state_init is not None:
                self._after_state_init(self, self._chief_sess)

    def _recover(self, exc: BaseException, seen: int) -> None:
        """A PS was lost (its state with it): once per loss, wait until its task has a
        worker again, then initialise and restore the latest checkpoint."""
        with self._recovering:
            if self.generation != seen:
                return  # another thread recovered from this loss already
            self.recoveries += 1
            if self.recoveries > self._max_recoveries:
                raise exc
            _log.warning("coordinator: a PS was lost (%s); restoring the latest checkpoint",
                         (str(exc).splitlines() or [repr(exc)])[0])
            deadline = time.monotonic() + self._max_wait
            while True:
                try:
                    self._create_state(restore=True)
                    break
                except (UnavailableError, OSError) as again:
                    if time.monotonic() > deadline or self._closed is not None:
                        raise again from exc
                    time.sleep(0.2)
            self.generation += 1

    def _after_closure(self) -> None:
        with self._lock:
            self._finished += 1
            due = self._dir and self._save_every and self._finished % self._save_every == 0
        if due:
            try:
                self.save()
            except Exception:  # noqa: BLE001 - a PS lost meanwhile: the next closure says so
                _log.warning("coordinator: the checkpoint could not be saved", exc_info=True)

    def save(self, path: str | None = None) -> str | None:
        """Save a checkpoint of the PS variables (to ``checkpoint_dir`` by default, at the
        global step); returns its path."""
        from .optimizers import get_global_step
        target = path or (f"{self._dir}/model.ckpt" if self._dir else None)
        if target is None:
            raise FailedPreconditionError("ClusterCoordinator.save: no path and no "
                                          "checkpoint_dir")
        with self._state_lock:
            saver = self._scaffold.saver
            if saver is None:
                return None
            gs = get_global_step(self._chief.graph)
            return saver.save(self._chief_sess, target, global_step=gs)
