"""Running plans on dask.distributed: TF's placement for state, Dask's scheduling for
everything else.

Mapping: each logical task (``ps-0``, ``worker-1`` …) runs on one Dask worker, pinned by a
per-device Dask resource ``tvm-dev-<job>-<task>``; :mod:`tensorvm.runtime.cluster.device_map` chooses the
worker and keeps the mapping (:class:`~tensorvm.runtime.cluster.device_map.DeviceMap`, which the backend owns).
A *floating* device (``/job:J/task:*<group>``: stateless ops, see :mod:`tensorvm.passes.place`)
is mapped to no worker: its tasks carry their programs, have no resource restriction and
``retries`` (:data:`FLOATING_RETRIES`), so Dask places them, steals them from a slow worker,
gives them to a worker that joins and recomputes the lost ones from lineage after a worker
loss; map and reduce tasks wait in the scheduler's queue until a worker has a free thread
(:func:`_queued`); a plan holding one always runs on the Dask plane. Only a pinned device's lost worker
fails a step.

Liveness: while a step runs, the backend waits on the client's event loop for its results
with one gather that is never cancelled (cancelling would restart a large transfer), raced
against the scheduler's event that a worker holding one of the step's devices left
(:class:`~tensorvm.runtime.cluster.device_map.DeviceHomes` logs it on ``tensorvm-workers``; every
session of a client receives it through :mod:`tensorvm.runtime.cluster.events`, subscribed and
confirmed before any device is mapped). The step then fails at once with UnavailableError
naming the device and the worker, instead of waiting for tasks that can no longer be
scheduled, and the device is mapped anew on the next step. A scheduler that goes away needs no
poll either: the client's connection closes, Dask cancels the step's futures, and the error
says the scheduler is gone. Only a scheduler without ``DeviceHomes`` (it cannot import
tensorvm, or refuses ``run_on_scheduler``) is polled, every ``POLL_S`` seconds, for the step's
workers. Stateful tasks have ``retries=0``.

Stopping: a step given up (deadline, error, Ctrl-C) is marked cancelled on its workers
(:meth:`tensorvm.vm.interpreter.DeviceResources.cancel_step`: a running stage stops before its next op,
a stage that starts later runs nothing) and its futures are released (Dask drops the tasks not
yet started). With ``RunOptions.wait_on_error``, a step that failed on a task's error returns
only once no task of it runs on any worker (:func:`tensorvm.runtime.step_cancel.stop_step`). A
timeout names the stateful ops that may already have run.

Data planes (issue 13): on first use a plan's per-device partitions are registered on their
workers (:mod:`tensorvm.runtime.direct.registered_plans`; dropped when the session closes or its graph
changes), so no step ships a program again. A step then runs either as a Dask graph of
``run_registered`` tasks, Send/Recv as task dependencies (``data_plane="dask"``: a plan's first
run, plans whose ops wait on queues or readers, batch and map-reduce jobs), or as one
``tvm_run`` message per device straight to its worker with tensors pushed worker to worker
through the workers' rendezvous (``"direct"``: repeated steps; :mod:`tensorvm.runtime.direct.client`,
:mod:`tensorvm.runtime.direct.rendezvous`). ``ConfigProto``/``RunOptions(data_plane=...)`` force either. On the
direct plane a lost worker also fails the step at once (its connection closes, or the same
event).

GPUs (issue 15): a task has as many GPUs as the Dask resource ``GPU`` of the worker it is mapped
to (``dask worker --resources GPU=1``; the session's own LocalCluster gives one per GPU, see
:mod:`tensorvm.runtime.cluster.local`). Placement reads that per-task inventory (:attr:`gpus`, mapping a
task's worker when it first asks), so a ``/device:GPU:N`` op goes only to a task whose worker
has more than N GPUs; elsewhere soft placement moves it to the task's CPU with the reason in
``sess.plan``, or the error names the op and "no GPU device".

Security: everything a session starts listens on 127.0.0.1 unless ``host=`` says otherwise;
``security=`` (a ``distributed.Security``) goes to the client and to any cluster it starts,
whose addresses are then ``tls://``.
"""
from __future__ import annotations

import asyncio
import logging
import threading
import time
import uuid

from .backends import Backend
from .cluster.spec import ClusterSpec
from .cluster.device_map import DeviceMap, resource_name
from ..framework.device_spec import DeviceSpec
from .direct.client import DirectSteps
from ..framework.errors import (
    CancelledError,
    DeadlineExceededError,
    InvalidArgumentError,
    OpError,
    UnavailableError,
)
from .job_api import announce_program
from .unavailable import device_unavailable, scheduler_unavailable
from .cluster.local import start_local_cluster
from ..passes.py_func_check import check_serialisable
from .direct.registered_plans import waits
from ..framework.op_registry import registry
from ..vm import _dask_private
from ..vm.interpreter import pick, pop_traces, resources_of
from ..vm.on_worker import EXTENSION
from .worker_extension import TensorvmWorkerPlugin, check_versions
from .dask_graph import fetch_values, fill_metadata, step_graph
from .step_cancel import mark_cancelled, stop_step

CLOSE_WAIT_S = 5.0  # how long close waits for the steps it cancelled to give up
CONNECT_TIMEOUT_S = 20.0  # how long a session or reset tries to reach a scheduler
CLUSTER_CLOSE_S = 60.0  # the most a session waits for the LocalCluster it started to close
POLL_S = 1.0  # the liveness poll, only on a scheduler without DeviceHomes (no events)
LOST_GRACE_S = 1.0  # how long a failed step waits for a lost-worker event to name the cause
logger = logging.getLogger("tensorvm")


class _StepResults:
    """Waits for a step's results on the client's event loop: one gather, started once and
    never cancelled (a cancelled gather would restart a large transfer), raced against the
    step's lost-worker future (:meth:`~tensorvm.runtime.direct.client.DirectSteps.watch`: the
    scheduler's event that a worker holding one of the step's devices left). When the client
    loses its scheduler, Dask cancels every future, which ends the gather too. One trip through
    the client's event loop for a step with no deadline."""

    def __init__(self, client, futures, watcher, step_id, pinned):
        self.client = client
        self.futures = futures
        self.watcher = watcher  # the backend's DirectSteps: it receives the events
        self.step_id = step_id
        self.pinned = pinned
        self.task = None
        self.lost = None

    async def _wait(self, timeout):
        if self.task is None:
            self.task = asyncio.ensure_future(
                self.client.gather(self.futures, asynchronous=True))
            self.lost = self.watcher.watch(self.step_id, self.pinned)
        await asyncio.wait([self.task, self.lost], timeout=timeout,
                           return_when=asyncio.FIRST_COMPLETED)
        task, lost = self.task, self._lost()
        if task.done() and (task.cancelled() or task.exception() is None):
            self.watcher.unwatch(self.step_id)
            return "done", task.result()  # a gather cancelled with the scheduler raises
        if lost is not None:
            self.watcher.unwatch(self.step_id)
            if task.done():
                _retrieve(task)
            return "lost", lost
        if task.done():
            return "done", task.result()  # a failed task raises its error (still watched)
        return "waiting", None

    def _lost(self):
        f = self.lost
        return f.result() if f is not None and f.done() and not f.cancelled() else None

    def wait(self, timeout: float | None):
        """``("done", results)`` if the step finished within ``timeout`` seconds (None: no
        limit), ``("lost", UnavailableError)`` if a worker of the step left the cluster first,
        else ``("waiting", None)``; a failed task raises its error."""
        return self.client.sync(self._wait, timeout)

    async def _grace(self, seconds: float):
        if self.lost is not None and not self.lost.done():
            await asyncio.wait([self.lost], timeout=seconds)
        return self._lost()

    def lost_error(self, grace: float = 0.0):
        """The UnavailableError of a worker of the step that left the cluster, waiting up to
        ``grace`` seconds for the scheduler's event; None if none did."""
        lost = self._lost()
        if lost is None and grace > 0 and self.client.status == "running":
            try:
                lost = self.client.sync(self._grace, grace)
            except Exception:  # noqa: BLE001 - only a better message was at stake
                lost = None
        return lost

    def give_up(self) -> None:
        """Stop caring about the gather. It is not cancelled (that would orphan Dask's inner
        waits, each logging "Task exception was never retrieved"): releasing the futures
        ends it with an error, which is retrieved here."""
        t = self.task
        if t is not None:
            self.client.loop.add_callback(self._give_up)

    def _give_up(self) -> None:
        self.watcher.unwatch(self.step_id)
        self.task.add_done_callback(_retrieve)


def _retrieve(task) -> None:
    if not task.cancelled():
        task.exception()


def _clear_resources(containers, dask_worker):
    ext = dask_worker.extensions.get(EXTENSION)  # none: no session ever used this worker
    return ext.resources.clear(containers) if ext is not None else 0


def _scheduler_task_states(keys, dask_scheduler):
    return _dask_private.scheduler_task_states(dask_scheduler, keys)


def _collect_traces(step_id, dask_worker):
    return pop_traces(step_id)


DATA_PLANES = ("auto", "dask", "direct")
FLOATING_RETRIES = 1  # a floating task that fails runs again once (it is stateless)


def floating(plan) -> bool:
    """Whether ``plan`` has a floating device (``/job:J/task:*``): its tasks carry their
    programs and run on the Dask plane only."""
    return any(DeviceSpec.parse(d).floating for d in plan.devices)


def _queued(key, dsk):
    """A floating task as Dask should schedule it: a stage whose inputs are not all in one
    upstream task (a map task reads its split, a reducer the sends of every map) is queued on
    the scheduler and handed to a worker with a free thread (:func:`_dask_private.queued_task`)
    — Dask queues only root-ish tasks, and a tensorvm key's task group is its whole name, one
    task. A pick (a Send), or a stage fed by one task, stays where its input is."""
    task = dsk[key]
    if task[0] is pick:
        return task
    ups = {dsk[a][1] if dsk[a][0] is pick else a for a in task[1:]
           if isinstance(a, tuple) and a in dsk}
    if len(ups) == 1:
        return task
    from dask.task_spec import TaskRef
    return _dask_private.queued_task(key, task[0], *(
        TaskRef(a) if isinstance(a, tuple) and a in dsk else a for a in task[1:]))


class DistributedBackend(Backend):
    """Steps on dask.distributed (see the module docstring). ``data_plane``: ``"dask"`` —
    every step a Dask graph, Send/Recv as task dependencies; ``"direct"`` — one message per
    device to its worker, tensors through the workers' rendezvous (:mod:`tensorvm.runtime.direct.rendezvous`);
    ``"auto"`` — Dask for a plan's first run, direct after. Both run the partitions
    registered on the workers (:mod:`tensorvm.runtime.direct.registered_plans`)."""

    def __init__(self, target=None, *, cluster=None, client=None, verbose=True,
                 security=None, host: str = "127.0.0.1", data_plane: str = "auto",
                 gpus: int | None = None):
        """``gpus``: GPUs for the LocalCluster this backend starts (None: as many as CuPy
        sees, 0: none; see :func:`tensorvm.runtime.cluster.local.worker_layout`); a cluster started
        elsewhere declares its workers' GPUs with ``dask worker --resources GPU=n``."""
        from distributed import Client
        self.data_plane = _check_plane(data_plane)
        self._runs: dict[str, int] = {}  # plan uid -> successful runs
        self.spec = ClusterSpec(cluster) if cluster is not None else None
        self._cluster = None
        self._own_client = client is None
        if client is not None:
            self.client = client
        elif target in (None, "local"):
            self._cluster = start_local_cluster(self.spec, host=host, security=security,
                                                gpus=gpus)
            try:
                self.client = Client(self._cluster, set_as_default=False, security=security)
            except BaseException:
                self._cluster.close()
                raise
        else:
            if str(target).startswith("tls://") and security is None:
                raise InvalidArgumentError(
                    f"{target} is a TLS address: pass security=distributed.Security(...) with "
                    "the cluster's CA and a client certificate")
            self.client = connect(target, security)
        try:  # for messages once the client has lost its scheduler
            self._address = str(self.client.scheduler.address)
        except Exception:  # noqa: BLE001
            self._address = str(target or "?")
        self._inflight = 0  # steps running now, in any thread (close cancels them)
        self._inflight_cv = threading.Condition()
        self._devices = DeviceMap(self.client, self.spec, verbose)
        self.gpus = self._devices.gpus
        self._direct = DirectSteps(self.client, uuid.uuid4().hex[:8])
        self.verbose = verbose
        self.known_tasks = self._devices.known_tasks
        self.default_device = self._default_device()
        try:
            # Subscribed (and confirmed on the scheduler) before any device is mapped: a
            # mapped device's worker that leaves later is reported to this session.
            self._direct.subscribe()
            check_versions(self.client)  # before any plugin: one clear error on a mismatch
            self.client.register_plugin(TensorvmWorkerPlugin())
            self._devices.register()
            announce_program(self.client)  # the page names its sessions after the program
            info = self._devices.scheduler_info()
            self.gpu_available = any("GPU" in w.get("resources", {})
                                     for w in info["workers"].values())
            self._devices.map_spec(info)
        except BaseException:
            self.close()  # a task with no worker: leave no client or cluster behind
            raise
        if verbose and self.dashboard_link:
            logger.info("tensorvm: dashboard at %s", self.dashboard_link)

    def _default_device(self) -> str:
        if self.spec is None:
            return "/job:localhost/replica:0/task:0/device:CPU:0"
        job = "worker" if "worker" in self.spec.jobs else self.spec.jobs[0]
        return f"/job:{job}/replica:0/task:0/device:CPU:0"

    @property
    def dashboard_link(self):
        try:
            return self.client.dashboard_link
        except Exception:  # noqa: BLE001 - no dashboard on this scheduler
            return None

    @property
    def _events(self) -> bool:
        """Lost-worker events from the scheduler (DeviceHomes) end a step whose worker left;
        without them (a scheduler that cannot load tensorvm) steps poll, every POLL_S."""
        return self._devices.events

    @_events.setter
    def _events(self, value: bool) -> None:
        self._devices.events = value

    def describe_devices(self):
        return self._devices.describe()

    def prepare(self, plan) -> None:
        check_serialisable(plan)
        self._devices.pin(plan)

    # ---- execution --------------------------------------------------------------------------
    def _hlg(self, dsk, by_device, plan):
        from dask.highlevelgraph import HighLevelGraph, MaterializedLayer
        layer_of = {}
        layers, deps = {}, {}
        for dev, keys in by_device.items():
            spec = DeviceSpec.parse(dev)
            # Pinned: only the device resource (retries are 0 by default: stateful tasks must
            # not rerun; every extra annotation costs scheduler time per task). Floating: no
            # restriction, so Dask places, steals and recomputes them, and retries.
            ann = {"retries": FLOATING_RETRIES} if spec.floating else \
                {"resources": {resource_name(spec.job, spec.task): 1}}
            for k in keys:
                lname = f"{k[0]}-{k[1]}" + (f"-{k[2]}" if len(k) > 2 else "")
                task = _queued(k, dsk) if spec.floating else dsk[k]
                layers[lname] = MaterializedLayer({k: task}, annotations=ann)
                layer_of[k] = lname
        for k, lname in layer_of.items():
            task = dsk[k]
            deps[lname] = {layer_of[a] for a in task[1:] if isinstance(a, tuple) and a in dsk}
        return HighLevelGraph(layers, deps)

    def _plane(self, plan, options, steps: int = 1) -> str:
        if floating(plan):
            return "dask"  # its floating tasks run wherever Dask puts them, programs and all
        want = _check_plane(getattr(options, "data_plane", "") or self.data_plane)
        if want == "auto":
            # Plans with ops that wait (queues, readers) on Dask; so is a plan's first single
            # step (Dask's transfer, memory management and lineage for one-off runs). Repeated
            # steps, and K > 1 steps from the first run (unrolled K times on Dask the first
            # run of a training loop costs seconds), go direct.
            return "direct" if (self._runs.get(plan.uid) or steps > 1) and \
                not waits(plan) else "dask"
        return want

    def runs_steps(self, plan, options) -> bool:
        if len(plan.tasks) == 1:
            return True
        if self._plane(plan, options, steps=2) == "direct":
            return True  # one message per device loops the partition K times
        # The unrolled plan of these K steps runs on Dask.
        self._runs.setdefault(plan.uid, 1)
        return False

    def release(self, plans) -> None:
        ids = [self._direct.plan_id(p) for p in plans]
        for p in plans:
            self._runs.pop(p.uid, None)
        self._direct.drop(ids, wait=False)  # the session's step is not held up

    def execute(self, plan, feed_values, step_id, steps, options, run_metadata):
        with self._inflight_cv:  # steps running now, for close (one frame: short tracebacks)
            self._inflight += 1
        try:
            trace = bool(options and options.tracing)
            self._check_scheduler()
            pinned = self._devices.pin(plan)
            timeout = (options.timeout_in_ms / 1000.0) if options and options.timeout_in_ms \
                else None
            try:
                # a worker of the plan that left while this session was idle: named at once, not
                # a connection to its dead address (Dask's connect timeout, then a raw OSError)
                self._direct.check_gone(pinned)
                # registered partitions live on a device's worker: a floating task has none,
                # so a plan with any carries every task's program (the Dask plane)
                pid = self._direct.register(plan, pinned) \
                    if plan.tasks and not floating(plan) else None
            except UnavailableError as exc:
                self._forget_lost(pinned, getattr(exc, "device", None))
                raise exc.with_traceback(None) from exc.__cause__
            if pid is not None and self._plane(plan, options, steps) == "direct":
                return self._execute_direct(plan, pid, pinned, feed_values, step_id, steps,
                                            timeout, trace, run_metadata)
            # The Dask data plane, inline here: an error's traceback stays short.
            dsk, outputs, by_device = step_graph(plan, feed_values, step_id, steps, None, trace,
                                                 plan_id=pid,
                                                 durable=getattr(options, "durable_url", ""))
            hlg = self._hlg(dsk, by_device, plan)
            futures = self.client.get(hlg, outputs, sync=False)
            deadline = time.monotonic() + timeout if timeout else None
            waiting = _StepResults(self.client, futures, self._direct, step_id, pinned)
            try:
                while True:
                    left = None if deadline is None else max(deadline - time.monotonic(), 0.001)
                    if not self._events:  # no lost-worker events from this scheduler: poll
                        left = POLL_S if left is None else min(POLL_S, left)
                    try:
                        state, results = waiting.wait(left)
                    except (Exception, asyncio.CancelledError) as exc:
                        # The client lost its scheduler (Dask cancelled the futures), or a task
                        # failed because its device's worker left: name that, not the symptom.
                        self._check_scheduler(exc)
                        lost = waiting.lost_error(0.0 if isinstance(exc, OpError)
                                                  else LOST_GRACE_S)
                        if lost is None and not self._events:
                            self._check_alive(pinned, exc)
                        if lost is not None:
                            self._forget_lost(pinned, lost.device)
                            raise lost.with_traceback(None) from exc
                        if isinstance(exc, OpError):
                            # the op and the user's line are in the message: no worker frames
                            raise exc.with_traceback(None) from exc.__cause__
                        raise
                    if state == "done":
                        break
                    if state == "lost":
                        if not isinstance(results, CancelledError):  # else: the session closed
                            self._forget_lost(pinned, results.device)
                        raise results
                    if not self._events:
                        self._check_alive(pinned)
                    if deadline is not None and time.monotonic() >= deadline:
                        raise self._deadline_error(plan, step_id, timeout, dsk, by_device)
            except BaseException as exc:
                # Release rather than cancel: Client.cancel trips a scheduler assertion when a
                # fetched key is also a dependency of another task, dropping the client's
                # connection; releasing lets the scheduler forget the tasks not yet started, and
                # waiting queue ops see their task gone and give up. Then mark the step
                # cancelled on its workers (running stages stop before their next op); after a
                # task's error, if the caller asked, wait until no task of the step runs.
                waiting.give_up()
                for f in futures:
                    f.release()
                if getattr(options, "wait_on_error", False) and isinstance(exc, OpError) and \
                        not isinstance(exc, (UnavailableError, DeadlineExceededError,
                                             CancelledError)):
                    stop_step(self.client, step_id)
                else:
                    self._cancel_on_workers(step_id, pinned)
                raise
            if trace:
                traces = self.client.run(_collect_traces, step_id)
                infos = [r for rs in traces.values() for r in rs]
                fill_metadata(run_metadata, plan, infos)
            self._runs[plan.uid] = self._runs.get(plan.uid, 0) + 1
            return fetch_values(plan, outputs, results, feed_values)
        finally:
            with self._inflight_cv:
                self._inflight -= 1
                self._inflight_cv.notify_all()

    def _execute_direct(self, plan, pid, pinned, feed_values, step_id, steps, timeout, trace,
                        run_metadata):
        try:
            values, replies = self._direct.run(plan, pid, pinned, feed_values, step_id, steps,
                                               timeout, trace)
        except UnavailableError as exc:
            self._forget_lost(pinned, getattr(exc, "device", None))
            raise
        if trace:
            infos = [r for rep in replies.values() for r in rep["trace"]]
            fill_metadata(run_metadata, plan, infos)
            _count_bytes(run_metadata, plan, feed_values, values, replies,
                         self._direct.message_bytes)
        self._runs[plan.uid] = self._runs.get(plan.uid, 0) + 1
        return values

    def set_step_deadline(self, deadline: float | None) -> None:
        """The running step's deadline in this thread (None: none): mapping a device whose
        worker left waits for its return no longer than that."""
        self._devices.set_step_deadline(deadline)

    @property
    def placement_version(self) -> int:
        """Changes when a task's worker was replaced by one with another GPU count
        (:meth:`DeviceMap.placement_version`)."""
        return self._devices.placement_version()

    def _forget_lost(self, pinned, device) -> None:
        """Unmap ``device`` and every device of ``pinned`` whose worker left the cluster (as
        the scheduler reported), so the next step maps them anew."""
        self._devices.forget_lost(pinned, device, self._direct.gone)

    def _cancel_on_workers(self, step_id, pinned) -> None:
        """Mark the step cancelled on its workers, in the background: the caller never waits
        (a worker that just died would hold it for the connect timeout). A worker the scheduler
        reported gone is skipped: the scheduler would try its dead address for its whole
        connect timeout (30 s: its "broadcast ... failed: Timed out" errors)."""
        addrs = sorted({a for a, _ in pinned.values() if self._direct.gone(a) is None})
        if not addrs:
            return
        self.client.loop.add_callback(mark_cancelled, self.client, step_id, addrs)

    def _deadline_error(self, plan, step_id, timeout, dsk, by_device):
        states = self._task_states(by_device)
        pending = sorted({dev for dev, ks in by_device.items()
                          if any(states.get(k) in _NOT_DONE for k in ks)}) \
            if states else list(plan.devices)
        ran = []
        for t in plan.tasks:
            st = states.get((t.name, step_id), "unknown") if states else "unknown"
            if st in ("memory", "processing", "erred", "unknown"):
                ran += [i.name for i in t.program.instrs if registry[i.type].stateful
                        and not registry[i.type].reads_only]
        return DeadlineExceededError(
            f"step {step_id} did not finish within {timeout * 1000:.0f} ms and was cancelled "
            f"(its ops not yet started will not run); devices still pending: "
            f"{', '.join(pending) or ', '.join(plan.devices)}; "
            + (f"stateful ops that may already have run: {', '.join(ran)}" if ran else
               "no stateful op of it had started"))

    def _task_states(self, by_device) -> dict:
        keys = [k for ks in by_device.values() for k in ks]

        try:
            return self.client.run_on_scheduler(_scheduler_task_states, keys)
        except Exception:  # noqa: BLE001 - best effort for the message
            return {}

    def _check_scheduler(self, cause: BaseException | None = None) -> None:
        """Raise UnavailableError at once if the client has lost its scheduler (no round trip:
        the client's status, which Dask changes when the connection closes)."""
        status = getattr(self.client, "status", "running")
        lost = "scheduler-connection-lost" in str(cause) if cause is not None else False
        if status not in ("running", "newly-created") or lost:
            raise scheduler_unavailable(self._scheduler_address(), status) from cause

    def _scheduler_address(self) -> str:
        try:
            return self.client.scheduler.address or self._address
        except Exception:  # noqa: BLE001 - only for the message
            return self._address

    def _check_alive(self, pinned: dict, cause: BaseException | None = None) -> None:
        """The fallback poll, on a scheduler without
        :class:`~tensorvm.runtime.cluster.device_map.DeviceHomes` (no lost-worker events): raise
        UnavailableError if the scheduler is gone, or a worker this step was pinned to has left
        (a restarted worker has a new address). The device is unmapped, so the next step maps
        it anew."""
        self._check_scheduler(cause)
        try:
            info = self._devices.scheduler_info()
        except Exception as exc:  # the scheduler did not answer
            raise UnavailableError(
                f"the Dask scheduler at {self._scheduler_address()} is gone ({exc!r}): every "
                "device's state (variables, queues) may be lost") from exc
        workers = info["workers"]
        for dev, (addr, name) in pinned.items():
            if addr not in workers:
                self._devices.unmap(dev, addr, name)
                raise device_unavailable(
                    dev, f"its worker {name!r} ({addr}) left the cluster") from cause

    def close(self) -> None:
        self._cancel_running()
        self._direct.unsubscribe()
        try:
            self._direct.reports.flush()  # the last steps reach the job registry
            self._direct.drop(everything=True)
        finally:
            self._close_client()

    def _cancel_running(self, wait_s: float = CLOSE_WAIT_S) -> None:
        """As TF's ``Session.close``: the steps this backend runs in other threads end with
        CancelledError (a step blocked on an empty queue would wait forever), each
        cancelling itself on its workers; waits up to ``wait_s`` for them to have done so
        before the client goes. Later steps are cancelled at once."""
        with self._inflight_cv:
            running = self._inflight
        try:
            if self.client.status == "running":
                self.client.sync(self._direct.cancel_all, "its session was closed")
        except Exception:  # noqa: BLE001 - a client without a loop: no step can run either
            logger.debug("could not cancel the running steps", exc_info=True)
            return
        if running:
            deadline = time.monotonic() + wait_s
            with self._inflight_cv:
                while self._inflight and time.monotonic() < deadline:
                    self._inflight_cv.wait(max(deadline - time.monotonic(), 0.01))

    def _close_client(self) -> None:
        if self._own_client:
            try:
                self.client.close()
            finally:
                if self._cluster is not None:
                    self._close_cluster()

    def _close_cluster(self) -> None:
        """Close the LocalCluster this session started, waiting at most
        :data:`CLUSTER_CLOSE_S`: once its workers were killed and restarted many times, Dask's
        close was seen to wait for ever with every worker process already gone (a session's
        close must not hang, as TF's does not)."""
        try:
            self._cluster.close(timeout=CLUSTER_CLOSE_S)
        except Exception as exc:  # noqa: BLE001 - a timeout: say so, and let the session go
            logger.warning("the local cluster did not close within %gs (%r); leaving it",
                           CLUSTER_CLOSE_S, exc)

    def __repr__(self):
        return f"dask.distributed at {self.client.scheduler.address}"


def _check_plane(plane: str) -> str:
    if plane not in DATA_PLANES:
        raise InvalidArgumentError(f"data_plane must be one of {DATA_PLANES}, got {plane!r}")
    return plane


def _count_bytes(md, plan, feed_values, values, replies, message_bytes) -> None:
    """Bytes the step moved, by kind, into ``md.transfers``: the feeds sent to the workers,
    the tensors pushed from device to device, the fetches returned, and the step's messages
    to the workers as they went on the wire (feeds included)."""
    if md is None:
        return
    pushed = sum(n for rep in replies.values() for _, _, n in (rep.get("sent") or ()))
    md.transfers = {
        "feeds": sum(int(getattr(v, "nbytes", 0) or 0) for v in feed_values),
        "sends": pushed,
        "fetches": sum(int(getattr(v, "nbytes", 0) or 0) for v in values),
        "messages": message_bytes}


_NOT_DONE = ("waiting", "processing", "no-worker", "queued", "released", None)


def connect(target: str, security=None):
    """A Dask client of the scheduler at ``target``; a malformed address is
    InvalidArgumentError, a scheduler not reached within :data:`CONNECT_TIMEOUT_S` is
    UnavailableError naming the address (not Dask's bare OSError)."""
    import gc

    from distributed import Client
    try:
        return Client(target, set_as_default=False, timeout=f"{CONNECT_TIMEOUT_S}s",
                      security=security)
    except ValueError as exc:  # distributed's address parsing
        err = InvalidArgumentError(
            f"{target!r} is not a Dask scheduler address ({exc}): give 'tcp://host:port' "
            "(or tls://…), 'local' for a LocalCluster, or a tv.train.Server's target")
    except (OSError, TimeoutError) as exc:
        err = UnavailableError(
            f"could not reach the Dask scheduler at {target} within {CONNECT_TIMEOUT_S:g} s "
            f"({type(exc).__name__}: {exc}); is `dask scheduler` running there, and is the "
            "address (host, port, tcp:// or tls://) right?")
    # The Client that failed to start is garbage in a reference cycle, its loop runner
    # started. Collected at an arbitrary later point, its __del__ may close it inside another
    # Client's start (a thread's creation can trigger the collection), where it deadlocks on
    # distributed's loop-runner lock: a later Session hung. Collected here, it closes safely.
    gc.collect()
    raise err


def reset_workers(target, containers=None, security=None) -> int:
    """Clear tensorvm resources on every worker of the scheduler at ``target``."""
    with connect(target, security) as c:
        return sum(c.run(_clear_resources, containers).values())
