"""Every place where tensorvm's core reaches into dask.distributed beyond its public API,
kept in one module so they are easy to find when Dask changes (CONVENTIONS: "public Dask APIs
only; if a private one is unavoidable, one wrapper module says why"). The scheduler plugins'
own touches are in ``tensorvm.scheduler_ext._dask_internals`` (the core does not import it).

Each function says why it is needed and which public alternative it waits for. The module
sits in the lowest layer that needs one of them (the VM: a queue op leaves the worker's
thread pool while it waits), so every layer above uses it without importing upwards.
Nothing here imports ``distributed`` at import time: an in-process session never pays for it.
"""
from __future__ import annotations

import contextlib


# ---- inside a worker's task thread (vm.queues, ops.control.while_frames) ----------------------

def secede_from_task() -> bool:
    """Leave the Dask worker's thread pool if this thread runs a dask.distributed task (a
    queue op about to wait); False elsewhere (in process, a data-plane thread, a thread of
    the worker that is not one of its task threads).

    Private: ``distributed.utils.thread_state.key`` and the executor's
    ``threadpoolexecutor.thread_state`` tell a task thread that may secede; the public
    ``secede()`` assumes one and fails or misbehaves elsewhere. Waits for a public
    "am I in a task that may secede" query."""
    from distributed import get_worker, secede
    from distributed.threadpoolexecutor import thread_state as tpe_state
    from distributed.utils import thread_state
    try:
        get_worker()
    except ValueError:
        return False
    if getattr(thread_state, "key", None) is None or \
            getattr(tpe_state, "executor", None) is None or not getattr(tpe_state, "proceed", 0):
        return False
    secede()
    return True


def current_task_key():
    """The key of the dask.distributed task this thread runs (None outside one).

    Private: ``distributed.utils.thread_state.key``; waits for a public
    ``get_task_key()`` on worker threads (``distributed.worker.get_worker`` has no key)."""
    from distributed.utils import thread_state
    return getattr(thread_state, "key", None)


def task_still_wanted(worker, key) -> bool:
    """Whether ``worker`` still runs the task ``key`` (False once the client released it:
    a waiting op then gives up instead of taking elements nobody will receive).

    Private: ``Worker.state.tasks`` (the worker state machine's table); waits for a public
    cancellation signal to running tasks."""
    ts = worker.state.tasks.get(key)
    return ts is not None and ts.state in ("executing", "long-running")


def running_keys(worker) -> list:
    """The keys of the tasks that occupy a thread of ``worker`` now, including those the
    scheduler released while they ran (their function still runs until it returns).

    Private: ``WorkerState.all_running_tasks``; waits for a public view of a worker's
    threads."""
    return [ts.key for ts in worker.state.all_running_tasks]


@contextlib.contextmanager
def as_worker_thread(worker):
    """Make ``distributed.get_worker()`` answer ``worker`` in a thread of tensorvm's own pool
    (the direct plane's kernels), as it does in a Dask task: kernels that name their worker
    (readers, savers) call it.

    Private: ``get_worker`` reads the context variable ``distributed.worker._worker_cvar``,
    which Dask sets only around its own tasks; waits for a public way to run code "as" a
    worker outside its task threads."""
    from distributed.worker import _worker_cvar
    token = _worker_cvar.set(worker)
    try:
        yield
    finally:
        _worker_cvar.reset(token)


# ---- comms (the direct plane) -------------------------------------------------------------------

def unsplit_tcp_frames(nbytes: int) -> None:
    """Let every TCP comm of this process send frames up to ``nbytes`` unsplit.

    Dask's TCP comm cuts a frame over ``distributed.comm.shard`` into shards, and the receiver
    copies a sharded array back together — unless it was the message's first buffer. A frame
    kept whole arrives in an aligned buffer of its own, with no copy. Private and process-wide:
    the class attribute ``distributed.comm.tcp.TCP.max_shard_size`` (the config is read once,
    at import); waits for a per-comm shard size in Dask's public comm API."""
    from distributed.comm.tcp import TCP
    TCP.max_shard_size = max(TCP.max_shard_size, nbytes)


async def open_comm(rpc, addr: str):
    """A connection to ``addr`` taken from ``rpc`` (a worker's or client's connection pool)
    for tensorvm to keep, with no offloading of its messages' serialisation (large arrays come
    serialised already: the size walk that decides on offloading is pure cost).

    Private: ``ConnectionPool.connect`` (the public calls, ``rpc(addr).op(...)``, take a
    connection per call and cannot keep one) and the comm's ``allow_offload`` flag; waits for
    a public "keep this connection" API."""
    comm = await rpc.connect(addr)
    comm.allow_offload = False
    return comm


def no_offload(comm) -> None:
    """No offloading of the serialisation of replies written on ``comm``, a connection a
    handler was called on (the direct plane's ``tvm_run``: its replies are small, or carry
    arrays serialised already, and the size walk of each reply that decides on offloading
    is pure cost). Private: the comm's ``allow_offload`` flag, as :func:`open_comm`."""
    if comm is not None:
        comm.allow_offload = False


def raise_error_reply(reply) -> None:
    """Raise the exception of a handler's ``{"status": "uncaught-error", ...}`` reply read
    from a comm tensorvm keeps (:func:`open_comm`), as Dask's own calls do.

    Private: ``distributed.core.clean_exception`` rebuilds the remote exception and its
    traceback; waits for the same public API as :func:`open_comm`."""
    if isinstance(reply, dict) and reply.get("status") == "uncaught-error":
        from distributed.core import clean_exception
        _, exc, tb = clean_exception(**reply)
        raise exc.with_traceback(tb)


# ---- graphs a client submits ---------------------------------------------------------------------

def queued_task(key, func, *args):
    """A Dask task (``dask.task_spec.Task``; ``TaskRef`` arguments are its dependencies) that
    the scheduler treats as root-ish, whatever its task group: with queuing on (Dask's
    default ``worker-saturation``) it waits in the scheduler's queue and goes to a worker
    with a free thread, so a stopped or slow worker holds only its few queue slots.

    Private: the ``_data_producer`` flag (dask.array's ``from_array`` sets it;
    ``Scheduler.is_rootish`` reads it); waits for a public way to mark a task queueable."""
    from dask.task_spec import Task
    return Task(key, func, *args, _data_producer=True)


# ---- on the scheduler (run there by Client.run_on_scheduler) -------------------------------------

def scheduler_task_states(scheduler, keys) -> dict:
    """``{key: state or None}`` of tasks on ``scheduler`` (a step's deadline message names the
    devices still pending).

    Private: ``Scheduler.tasks``; waits for a public task-state query from the client
    (``Client.futures`` knows only its own futures' status)."""
    tasks = scheduler.tasks
    return {k: (tasks[k].state if k in tasks else None) for k in keys}


def scheduler_plugin(scheduler, name: str):
    """The scheduler plugin registered as ``name`` on ``scheduler``, or None.

    Private: ``Scheduler.plugins``; waits for a public plugin lookup on the scheduler."""
    return scheduler.plugins.get(name)


def scheduler_has_worker(scheduler, address: str) -> bool:
    """Whether the worker at ``address`` is registered with ``scheduler`` now.

    Private: ``Scheduler.workers`` (the scheduler state's table); waits for a public
    membership query run on the scheduler."""
    return address in scheduler.workers


def scheduler_worker_names(scheduler) -> dict[str, str]:
    """``{address: name}`` of the workers registered with ``scheduler`` now.

    Private: ``Scheduler.workers`` (the scheduler state's table); waits for a public
    membership query run on the scheduler (a plugin's ``add_worker`` hook gets no name)."""
    return {addr: str(ws.name) for addr, ws in scheduler.workers.items()}


def subscribe_on_scheduler(scheduler, topic: str, client_id: str) -> None:
    """Subscribe the client ``client_id`` to the event ``topic`` on ``scheduler`` itself, so
    that the subscription is in place when the caller's round trip returns (the client's
    ``subscribe_topic`` travels on its batched stream, unordered with its other requests).

    Private: ``Scheduler.subscribe_topic``, the stream handler; waits for a public
    acknowledged subscription (``Client.subscribe_topic`` returning once it holds)."""
    scheduler.subscribe_topic(topic, client_id)


def floating_tail(scheduler, kind_of, moved: dict) -> tuple[list, list]:
    """``(idle workers, running)`` when the scheduler has nothing queued, else ``([], [])``.

    ``moved``: ``{worker address: keys taken from it}`` — a task the scheduler released
    from a worker while it ran there (a *zombie*) keeps that worker's thread until it ends.
    Idle: a running worker with no task processing and no zombie running. Running: ``(key,
    kind, worker, elapsed, movable, presumed, reads)`` of each task whose ``kind_of(key)`` is
    not None, processing on a worker (``movable``) or a zombie there (not movable); ``reads``:
    whether it depends on other tasks and may have started (not: every thread of its worker
    runs another of these). ``elapsed``:
    seconds since it started, from the worker's last heartbeat; None if not reported
    running. ``presumed``: on a worker that reported none of its tasks running, the first by
    Dask's priority (the order a worker runs its ready tasks in) is presumed running. For
    :mod:`tensorvm.runtime.cluster.stragglers`.

    Private: ``Scheduler.queued``/``unrunnable``, ``WorkerState.processing``/``executing``
    (durations as of ``last_seen``, the worker's last heartbeat) and ``status``; waits for a
    public view of the tasks each worker is running, and since when."""
    from distributed.core import Status
    if scheduler.queued or scheduler.unrunnable:
        return [], []
    workers = scheduler.workers

    def zombies(addr, ws):
        gone = moved.get(addr)
        return [ts for ts in ws.executing if ts.key in gone] if gone else []

    idle = [a for a, ws in workers.items()
            if not ws.processing and ws.status == Status.running and not zombies(a, ws)]
    if not idle:
        return [], []
    from time import time
    now = time()
    running = []
    for addr, ws in workers.items():
        since = now - ws.last_seen
        tasks = [(ts, True) for ts in ws.processing] + [(ts, False) for ts in zombies(addr, ws)]
        first = None if any(ts in ws.executing for ts, _ in tasks) else \
            min((ts for ts, _ in tasks), key=lambda ts: ts.priority or (), default=None)
        # every thread runs one of these: the others surely wait
        full = sum(ts in ws.executing for ts, _ in tasks) >= ws.nthreads
        for ts, movable in tasks:
            kind = kind_of(ts.key)
            if kind is not None:
                e = ws.executing.get(ts)
                running.append((ts.key, kind, addr, None if e is None else e + since, movable,
                                ts is first, bool(ts.dependencies) and (e is not None or not full)))
    return idle, running


def started_keys(scheduler, keys) -> set:
    """Those of the processing tasks ``keys`` (of a worker being removed) that had started
    there: reported running at its last heartbeat or, if it reported none of them, the first
    by priority; the others waited in its queue and never ran.

    Private: ``TaskState.processing_on`` and ``WorkerState.executing``; waits for the same
    public view as :func:`floating_tail`."""
    tasks = [scheduler.tasks[k] for k in keys if k in scheduler.tasks]
    by_worker: dict = {}
    for ts in tasks:
        if ts.processing_on is not None:
            by_worker.setdefault(ts.processing_on, []).append(ts)
    started = set()
    for ws, mine in by_worker.items():
        running = [ts for ts in mine if ts in ws.executing]
        if not running and mine:
            running = [min(mine, key=lambda ts: ts.priority or ())]
        started.update(ts.key for ts in running)
    return started


def executing_keys(scheduler, address: str) -> set:
    """The keys worker ``address`` reported running at its last heartbeat (empty if it left).

    Private: ``WorkerState.executing``; waits for the same public view as
    :func:`floating_tail`."""
    ws = scheduler.workers.get(address)
    return {ts.key for ts in ws.executing} if ws is not None else set()


def move_task(scheduler, key, worker: str, stimulus_id: str) -> bool:
    """Run the processing task ``key`` again on ``worker``: released where it runs (that
    worker drops its result, as for any cancelled task) and sent to ``worker`` (a loose
    restriction: elsewhere if ``worker`` is gone by then). False if it is no longer
    processing or ``worker`` left.

    Private: ``TaskState.worker_restrictions``/``loose_restrictions`` and
    ``Scheduler.transitions`` (processing -> released -> waiting -> processing, the path
    Dask's own ``reschedule`` takes); waits for a public "move this task" on the scheduler."""
    ts = scheduler.tasks.get(key)
    if ts is None or ts.state != "processing" or worker not in scheduler.workers \
            or ts.processing_on is None or ts.processing_on.address == worker:
        return False
    ts.worker_restrictions = {worker}
    ts.loose_restrictions = True
    scheduler.transitions({key: "released"}, stimulus_id)
    return True


# ---- the session's own LocalCluster (runtime.cluster.local) -------------------------------------

def spec_clusters() -> set:
    """The SpecClusters alive in this process now (to find those a start cut short left).

    Private: ``SpecCluster._instances``, the weak set Dask's exit hook closes; waits for a
    public handle on a cluster whose constructor raised."""
    from distributed.deploy.spec import SpecCluster
    return set(SpecCluster._instances)


def forget_cluster(cluster) -> None:
    """Take a cluster whose start was cut short (and that is closed as far as it started) off
    Dask's exit hook, and stop its event-loop thread.

    Private: ``SpecCluster._instances`` and the cluster's ``_loop_runner``; waits for the same
    public handle as :func:`spec_clusters`."""
    from distributed.deploy.spec import SpecCluster
    SpecCluster._instances.discard(cluster)
    runner = getattr(cluster, "_loop_runner", None)
    if runner is not None:
        runner.stop()


def update_worker_status(cluster, op, msg) -> None:
    """A cluster's bookkeeping of a worker's arrival or departure, without SpecCluster's timer
    that closes for good the Nanny of a worker not back within ``lost-worker-timeout``.

    Private: ``Cluster._update_worker_status`` (a SpecCluster subclass overrides the hook of
    the same name and calls this); waits for a public switch for that timer."""
    from distributed.deploy.cluster import Cluster
    Cluster._update_worker_status(cluster, op, msg)
