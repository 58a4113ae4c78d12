"""Which Dask worker runs each logical task's device, for :mod:`tensorvm.runtime.dask_plane`.

Mapping: each logical task (``ps-0``, ``worker-1`` …) gets one worker — the one the
ClusterSpec names (by name or address), else the worker that already holds the task's device
(mapped by another session: every client sees one home per device), else the worker whose
name is the task's name, else the next free worker in a stable (sorted) order, which is logged.
:class:`DeviceMap` gives that worker a per-device Dask resource ``tvm-dev-<job>-<task>``
(:func:`resource_name`, set with ``Worker.set_resources``) and every task of the device asks
for it, so tasks are pinned without naming addresses (a restarted worker gets a new address)
and are never stolen.

Homes across sessions: :class:`DeviceHomes`, a scheduler plugin (registered by reference to
this module, so the scheduler must be able to import tensorvm), remembers every device's
worker for as long as the scheduler lives. When a device's worker leaves the cluster it logs
the event that fails the steps on it (:data:`~tensorvm.runtime.wire_names.TOPIC_WORKERS`,
the one event of a worker's arrival or departure on the scheduler, received through
:mod:`tensorvm.runtime.direct.step_watch`) and remembers how the device's state was lost and
which of its queues, readers and iterators died with it (each worker reports those it makes,
:data:`TOPIC_MADE`), so whichever worker takes the device over is told: those fail until
reset, while a name the lost worker never held is created as usual. Mapping a device whose
worker left waits up to :data:`REPLACEMENT_WAIT_S` after the loss for a worker of the same name
to come back (its Nanny restarting it), so the device returns there rather than onto another
task's worker that happens to be free; a step with a timeout (``RunOptions.timeout_in_ms``)
waits no longer than its deadline (DeadlineExceededError naming the worker awaited). Past that
wait a *free* worker (one that holds no device and is not named after another task: a
replacement with a new name, as a Kubernetes pod gets) may take the device over; another task's
worker never does, unless the lost worker itself held several tasks' devices (a session that
maps more tasks than the cluster has workers). Until one of them is there, mapping the device
fails with UnavailableError naming the worker awaited — TF's behaviour for a parameter server
that is down (measured with TF 2.21's ``tf.compat.v1`` over gRPC: every step fails with
UnavailableError until the task is back at its address) — and a MonitoredTrainingSession waits
and restores the latest checkpoint once it is back. Moving a PS device onto a worker task
instead (what tensorvm did) put two tasks' load on one process for good (the returning ``ps-0``
stayed idle) and turned the loss into ``FailedPreconditionError: uninitialized value`` for a
plain session. A scheduler without :class:`DeviceHomes` still maps
devices; it just has no loss tracking and no lost-worker events (:attr:`DeviceMap.events`).

GPUs: :attr:`DeviceMap.gpus` (:class:`TaskGpus`) is the per-task inventory placement reads,
the Dask resource ``GPU`` of each task's worker, mapping a task when it is first asked about.
"""
from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping

from distributed.diagnostics.plugin import SchedulerPlugin

from .spec import ClusterSpec, scheduler_identity
from ...framework.device_spec import DeviceSpec
from ..direct.step_errors import scheduler_gone
from ...framework.errors import DeadlineExceededError, InvalidArgumentError, UnavailableError
from ...vm import _dask_private
from ...vm.interpreter import resources_of
from .stragglers import StragglerMoves
from ..wire_names import DEVICE_HOMES, STRAGGLER_MOVES, TOPIC_WORKERS

REPLACEMENT_WAIT_S = 10.0  # how long remapping a lost device waits for its worker's restart
TOPIC_MADE = "tensorvm-resources-made"  # worker event: a queue/reader/iterator made, or cleared
logger = logging.getLogger("tensorvm")


def resource_name(job: str, task: int) -> str:
    """The Dask resource that pins a logical task's device to its worker.

    >>> resource_name("ps", 0)
    'tvm-dev-ps-0'
    """
    return f"tvm-dev-{job}-{task}"


class DeviceHomes(SchedulerPlugin):
    """On the scheduler: the worker of every logical task's device, and the devices whose
    worker left the cluster (how), so the worker that takes a device over learns that its
    state was lost, whichever session maps it."""

    name = DEVICE_HOMES  # carries the tensorvm version (tensorvm.runtime.wire_names)
    idempotent = True  # one registry per scheduler, kept across sessions

    def __init__(self):
        self.homes: dict[str, tuple[str, str]] = {}  # device resource -> (address, name)
        # device resource -> [how its state was lost, the (container, name) pairs of the
        # resources that died with it and are never re-created silently (queues, readers)]
        self.lost: dict[str, list] = {}
        # device resource -> (name of its worker that left, when, whether that worker held
        # other devices too), until it has a worker again
        self.left: dict[str, tuple[str, float, bool]] = {}
        # worker address -> device resource -> those pairs, as the worker reported making
        # them (TOPIC_MADE; its batched stream, so a Dask-plane step's result never
        # overtakes its report) or inherited them lost
        self.made: dict[str, dict[str, set]] = {}
        self.workers: dict[str, str] = {}  # address -> name of the workers in the cluster

    async def start(self, scheduler) -> None:
        for addr, name in _dask_private.scheduler_worker_names(scheduler).items():
            self.workers[addr] = name
        import dask
        if dask.config.get("tensorvm.move-stragglers", True) and \
                _dask_private.scheduler_plugin(scheduler, STRAGGLER_MOVES) is None:
            moves = StragglerMoves()  # floating tasks off a straggler at a step's tail
            scheduler.add_plugin(moves, idempotent=True)
            await moves.start(scheduler)

    def add_worker(self, scheduler, worker: str) -> None:
        name = _dask_private.scheduler_worker_names(scheduler).get(worker, worker)
        self.workers[worker] = name
        scheduler.log_event(TOPIC_WORKERS, {"action": "added", "worker": worker, "name": name})

    def log_event(self, topic, msg):
        if topic != TOPIC_MADE or not isinstance(msg, dict) or "worker" not in msg:
            return
        held = self.made.setdefault(msg["worker"], {})
        if "res" in msg:
            held.setdefault(msg["res"], set()).add((msg["container"], msg["name"]))
        elif "cleared" in msg:  # tv.Session.reset on that worker: gone on purpose
            for res, pairs in held.items():
                cleared = msg["cleared"]
                held[res] = {p for p in pairs if cleared is not None and p[0] not in cleared}

    def remove_worker(self, scheduler, worker, **kwargs):
        names = set()
        made = self.made.pop(worker, {})
        held = [res for res, (addr, _) in self.homes.items() if addr == worker]
        for res, (addr, name) in list(self.homes.items()):
            if addr == worker:
                del self.homes[res]
                names.add(name)
                self.lost[res] = [f"its worker {name!r} ({addr}) left the cluster at "
                                  f"{time.strftime('%H:%M:%S')}",
                                  sorted(made.get(res, ()))]
                self.left[res] = (name, time.monotonic(), len(held) > 1)
        # sessions with a step on it fail it now (tensorvm.runtime.direct.step_watch); the job
        # registry (tensorvm.scheduler_ext) forgets the worker
        name = self.workers.pop(worker, None) or (min(names) if names else worker)
        scheduler.log_event(TOPIC_WORKERS, {"action": "removed", "worker": worker,
                                            "name": name, "devices": sorted(held)})


def _claim_home(res, addr, name, dask_scheduler):
    """On the scheduler: make ``addr`` the home of the device ``res``; ``{"how": how its
    state was lost or None}``, ``{"gone": True}`` if that worker already left (its removal
    event is past: the session must not wait on it), None without :class:`DeviceHomes`."""
    plugin = _dask_private.scheduler_plugin(dask_scheduler, DeviceHomes.name)
    if plugin is None:
        return None
    if not _dask_private.scheduler_has_worker(dask_scheduler, addr):
        return {"gone": True}
    prev = plugin.homes.get(res)
    how = plugin.lost.pop(res, None) if prev is None or prev[0] != addr else None
    if how is not None and how[1]:  # still lost if this worker goes too before a reset
        plugin.made.setdefault(addr, {}).setdefault(res, set()).update(map(tuple, how[1]))
    plugin.homes[res] = (addr, name)
    plugin.left.pop(res, None)
    return {"how": how}


def _departed(res, dask_scheduler):
    """On the scheduler: ``(name, seconds ago, shared)`` of the worker the device ``res``
    lived on if it left the cluster and the device has no worker since (``shared``: that
    worker held other devices too), else None."""
    plugin = _dask_private.scheduler_plugin(dask_scheduler, DeviceHomes.name)
    left = plugin.left.get(res) if plugin is not None else None
    if left is None:
        return None
    return left[0], time.monotonic() - left[1], bool(left[2]) if len(left) > 2 else True


async def _adopt_device(resources, task_prefix, lost_how, dask_worker):
    """On a worker: take a logical task's device (its Dask resource); ``lost_how`` says how
    the device's previous worker lost its state and which of its queues (readers, iterators)
    died with it, ``[how, [[container, name], ...]]``: those fail until reset; other names
    are created as usual."""
    if lost_how:
        how, names = (lost_how, None) if isinstance(lost_how, str) else lost_how
        resources_of(dask_worker).mark_lost(task_prefix, how, names)
    await dask_worker.set_resources(**resources)


def _gpu_resource(worker_info: dict) -> int:
    """How many GPUs a worker declares (its Dask resource ``GPU``)."""
    return int((worker_info.get("resources") or {}).get("GPU", 0) or 0)


class TaskGpus(Mapping):
    """``{(job, task): GPUs of the task's worker}`` for placement: asking for a task maps it to
    its worker first (as its first step would), so the answer is the GPU resource of the
    worker that will run it. Tasks outside the cluster's spec have none."""

    def __init__(self, devices: DeviceMap):
        self._devices = devices

    def __getitem__(self, key) -> int:
        d = self._devices
        job, task = key
        if d.known_tasks is not None and (job, task) not in d.known_tasks:
            raise KeyError(key)
        d.ensure_mapped(job, task)
        return d._gpus_of[(job, task)]

    def __iter__(self):
        return iter(dict(self._devices._gpus_of))

    def __len__(self) -> int:
        return len(self._devices._gpus_of)

    def __repr__(self):
        return f"TaskGpus({dict(self._devices._gpus_of)!r})"


class DeviceMap:
    """The worker of each logical task for one session's client (see the module docstring):
    ``ensure_mapped`` maps a task once, ``pin`` maps a plan's devices for a step,
    ``forget_lost``/``unmap`` drop a device whose worker left so the next step maps it anew.

    ``events`` is False once the scheduler is known to have no :class:`DeviceHomes` (it
    cannot load tensorvm): then no lost-worker events come and the backend polls."""

    def __init__(self, client, spec: ClusterSpec | None, verbose: bool = True):
        self.client = client
        self.spec = spec
        self.verbose = verbose
        self.events = True
        self.known_tasks = set(spec.tasks()) if spec else None
        self._lock = threading.Lock()
        self._map: dict[tuple[str, int], tuple[str, str]] = {}  # task -> (address, name)
        self._gpus_of: dict[tuple[str, int], int] = {}  # task -> its worker's GPU resource
        self.gpus = TaskGpus(self)
        self.version = 0  # bumped when a task is remapped to a worker of another GPU count
        self._step = threading.local()  # .deadline: the running step's (time.monotonic())

    def set_step_deadline(self, deadline: float | None) -> None:
        """The deadline (``time.monotonic()``) of the step this thread runs, or None: waiting
        for a lost worker's return does not outlast it."""
        self._step.deadline = deadline

    def __repr__(self):
        return f"DeviceMap({self.describe()!r})"

    def register(self) -> None:
        """Register :class:`DeviceHomes` on the scheduler (once per scheduler); a scheduler
        that cannot import tensorvm gets none, and ``events`` goes False."""
        try:
            self.client.register_plugin(DeviceHomes())
        except Exception:  # noqa: BLE001 - a scheduler that cannot import tensorvm
            self.events = False
            logger.warning("tensorvm: the scheduler cannot load tensorvm's plugin; a "
                           "device whose worker is lost will not be reported on reuse")

    def map_spec(self, info: dict) -> None:
        """Map every task of the ClusterSpec now (a task with no worker fails here)."""
        if self.spec is not None:
            for job, task in self.spec.tasks():
                self.ensure_mapped(job, task, info)

    def ensure_mapped(self, job: str, task: int, info=None):
        """``(address, name)`` of the task's worker, mapping the task first if it has none."""
        key = (job, task)
        if key in self._map:
            return self._map[key]
        with self._lock:
            if key in self._map:
                return self._map[key]
            self.check_scheduler()  # not Dask's raw errors after its reconnect timeout
            res = resource_name(job, task)
            for attempt in range(3):  # a worker that leaves while chosen: choose again
                info = info or self.scheduler_info()
                if not info["workers"]:  # none at this instant (restarting): wait a little
                    info = self._await_any_worker()
                prefer, lost = None, None
                if not any(w.get("resources", {}).get(res) for w in info["workers"].values()):
                    prefer, info, lost = self._await_replacement(res, info)
                workers = info["workers"]  # address -> {name, resources, ...}
                addr = self._choose_worker(job, task, workers, prefer, lost)
                name = str(workers[addr].get("name"))
                try:
                    how = self._claim_home(res, addr, name)
                    break
                except UnavailableError:
                    if attempt == 2:
                        raise
                    info = None
            self.check_scheduler()
            self.client.run(_adopt_device, {res: 1e9}, f"/job:{job}/replica:0/task:{task}/",
                            how, workers=[addr])
            gpus, before = _gpu_resource(workers[addr]), self._gpus_of.get(key)
            if before is not None and before != gpus:
                self.version += 1  # plans placed by the old inventory are stale
            self._gpus_of[key] = gpus
            self._map[key] = (addr, name)
            return self._map[key]

    def placement_version(self) -> int:
        """:attr:`version`, after mapping again every task that lost its worker (unmapped by
        :meth:`forget_lost`): a replacement with another GPU count changes it, so the session
        places its plans anew before a step rather than running one placed for GPUs the task
        no longer has. A task with no worker now stays unmapped (its step reports it)."""
        for job, task in [k for k in self._gpus_of if k not in self._map]:
            try:
                self.ensure_mapped(job, task)
            except UnavailableError:
                pass
        return self.version

    def _await_replacement(self, res: str, info: dict
                           ) -> tuple[str | None, dict, tuple | None]:
        """A device with no worker: if its last worker left the cluster (``DeviceHomes``),
        wait until a worker of the same name is back — its Nanny restarting it — up to
        ``REPLACEMENT_WAIT_S`` after the loss, so the device goes there rather than onto
        another task's worker that happens to be free at that instant. Returns that name (or
        None), the scheduler info to choose from and ``(seconds since the loss, whether the
        lost worker held other devices too)`` (None if the device never lost a worker)."""
        try:
            left = self.client.run_on_scheduler(_departed, res)
        except Exception:  # noqa: BLE001 - a scheduler without tensorvm: choose as before
            return None, info, None
        if left is None:
            return None, info, None
        name, age, shared = left
        deadline = time.monotonic() + REPLACEMENT_WAIT_S - age
        step_deadline = getattr(self._step, "deadline", None)
        while not any(str(w.get("name")) == name for w in info["workers"].values()):
            if step_deadline is not None and time.monotonic() > step_deadline \
                    and time.monotonic() <= deadline:
                raise DeadlineExceededError(
                    f"the step's timeout passed while the device of {res} waited for its "
                    f"worker {name!r}, which left the cluster {age:.1f} s before, to come back "
                    f"(it is waited for up to {REPLACEMENT_WAIT_S:.0f} s after the loss, then "
                    "the device goes to another worker); restart that worker, or run again")
            if time.monotonic() > deadline:
                break
            time.sleep(0.1)
            info = self.scheduler_info()
        return name, info, (age, shared)

    def _await_any_worker(self) -> dict:
        """The scheduler's info once it lists a worker, polled for up to
        :data:`REPLACEMENT_WAIT_S` (a cluster whose workers are restarting, their Nannies
        bringing them back); still none then: the caller says the cluster has none."""
        deadline = time.monotonic() + REPLACEMENT_WAIT_S
        step_deadline = getattr(self._step, "deadline", None)
        if step_deadline is not None:
            deadline = min(deadline, step_deadline)
        info = self.scheduler_info()
        while not info["workers"] and time.monotonic() < deadline:
            time.sleep(0.1)
            info = self.scheduler_info()
        return info

    def scheduler_info(self) -> dict:
        """The scheduler's info with every worker listed; UnavailableError naming the
        scheduler once the client has lost it (Dask then blocks for its reconnect and answers
        stale or empty info; issue 24)."""
        self.check_scheduler()
        info = scheduler_identity(self.client)  # never the client's racing shared copy
        self.check_scheduler()  # lost during the call: the answer is the cached one
        return info

    def check_scheduler(self) -> None:
        """UnavailableError naming the scheduler if the client has lost it (no round trip)."""
        err = scheduler_gone(self.client)
        if err is not None:
            raise err

    def _claim_home(self, res: str, addr: str, name: str) -> str | None:
        """Record the device's worker on the scheduler; how its state was lost, if its
        previous worker left the cluster (then the new worker is told). A worker that left
        before the claim is UnavailableError: its removal event is past, no step may wait on
        it."""
        try:
            got = self.client.run_on_scheduler(_claim_home, res, addr, name)
        except Exception:  # a scheduler without tensorvm: no loss tracking
            logger.debug("device homes unavailable on the scheduler", exc_info=True)
            got = None
        if got is None:  # no DeviceHomes: no lost-worker events either
            self.events = False
            return None
        if got.get("gone"):
            raise UnavailableError(
                f"the worker {name!r} ({addr}) chosen for the device resource {res} left the "
                "cluster while the device was being mapped")
        return got.get("how")

    def _choose_worker(self, job: str, task: int, workers: dict, prefer: str | None = None,
                       lost: tuple | None = None) -> str:
        """The worker for a logical task: the one the ClusterSpec names, else the one that
        already holds the task's device (put there by another session: every client must see
        one home per device), else the worker named ``prefer`` (the device's previous worker,
        restarted), else the one named after the task, else the next free one. A device whose
        worker left (``lost``: seconds since, whether that worker held other devices too)
        goes only to a free worker — one holding no device and not named after another task —
        unless its lost worker was shared: else UnavailableError until one is there."""
        res = resource_name(job, task)
        by_name = {str(w.get("name")): a for a, w in workers.items()}
        holders = sorted(a for a, w in workers.items() if w.get("resources", {}).get(res))
        want = self.spec.worker_for(job, task) if self.spec else None
        name = f"{job}-{task}"
        where = f"/job:{job}/task:{task}"
        if want is not None:
            addr = want if want in workers else by_name.get(str(want))
            if addr is None:
                raise UnavailableError(
                    f"no Dask worker for task {where} (asked for {want!r}); workers: "
                    f"{sorted(by_name) or 'none'}")
            others = [a for a in holders if a != addr]
            if others:
                raise InvalidArgumentError(
                    f"task {where} already lives on worker "
                    f"{workers[others[0]].get('name')!r} ({others[0]}), mapped by another "
                    f"session; this ClusterSpec asks for {want!r}")
            return addr
        if holders:
            return holders[0]
        if prefer is not None and prefer in by_name:
            return by_name[prefer]
        if name in by_name:
            return by_name[name]
        ordered = sorted(workers, key=lambda a: str(workers[a].get("name")))
        if not ordered:
            raise UnavailableError(f"no Dask worker for task {where}; the cluster has none")
        reserved = {by_name.get(n) for n in (self.spec.task_names() if self.spec else ())}
        used = {a for a, _ in self._map.values()}
        free = [a for a in ordered if a not in used and a not in reserved]
        if lost is not None and not lost[1]:  # never onto another task's worker
            free = [a for a in free if not any(
                r.startswith("tvm-dev-") for r in workers[a].get("resources", {}))]
            if not free:
                raise UnavailableError(
                    f"task {where} is unavailable: its worker {prefer!r} left the cluster "
                    f"{lost[0]:.0f} s ago and has not come back; tensorvm waits for a worker "
                    f"named {prefer!r} (its Nanny's restart) or a new worker that holds no "
                    "task, and does not move the task onto another task's worker. The state "
                    "on it (variables, queues) is lost: a MonitoredTrainingSession waits and "
                    "restores the latest checkpoint once the task has a worker again")
            logger.warning("tensorvm: task %s lost its worker %r %.0f s ago; worker %s (%s) "
                           "takes it over", where, prefer, lost[0],
                           workers[free[0]].get("name"), free[0])
            return free[0]
        addr = free[0] if free else ordered[len(self._map) % len(ordered)]
        if self.verbose:
            logger.info("tensorvm: task %s -> worker %s (%s)", name, workers[addr].get("name"),
                        addr)
        return addr

    def describe_devices(self):
        return {f"{j}-{t}": a for (j, t), (a, _) in sorted(self._map.items())}

    def describe(self) -> dict:
        """``{"job-task": worker address}`` of the tasks mapped so far."""
        return {f"{j}-{t}": a for (j, t), (a, _) in sorted(self._map.items())}

    def pin(self, plan) -> dict:
        """Device -> (address, name) of its worker for this step, mapping a device anew
        when it lost its worker since the plan was compiled. Floating devices
        (``/job:J/task:*``) have no worker: Dask places their tasks, so they are left out."""
        pinned = {}
        for dev in plan.devices:
            spec = DeviceSpec.parse(dev)
            if not spec.floating:
                pinned[dev] = self.ensure_mapped(spec.job, spec.task)
        return pinned

    def forget_lost(self, pinned: dict, device, gone: Callable[[str], object]) -> None:
        """Unmap ``device`` and every device of ``pinned`` whose worker left the cluster (as
        the scheduler reported: ``gone(address)`` is not None), so the next step maps them
        anew."""
        for dev, (addr, name) in pinned.items():
            if dev != device and gone(addr) is None:
                continue
            self.unmap(dev, addr, name)

    def unmap(self, device: str, addr: str, name: str) -> None:
        """Unmap ``device`` if it is still mapped to the worker ``(addr, name)``."""
        spec = DeviceSpec.parse(device)
        with self._lock:
            if self._map.get((spec.job, spec.task)) == (addr, name):
                del self._map[(spec.job, spec.task)]
