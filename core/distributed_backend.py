"""Running plans on dask.distributed: one Dask worker per logical task of the cluster.

Mapping: each logical task (``ps-0``, ``worker-1`` …) gets one worker — the one the
ClusterSpec names (by name or address), else the worker whose name is the task's name, else
the next free worker in a stable (sorted) order, which is printed. The session gives that
worker a per-device Dask resource ``tvm-dev-<job>-<task>`` (``Worker.set_resources``) and
every task of the device asks for it, so tasks are pinned without naming addresses (a
restarted worker gets a new address) and are never stolen.

Liveness: while a step runs, the backend checks every second that each mapped worker is still
the one it pinned; if one is gone the step fails with UnavailableError naming the device and
the worker, instead of waiting for tasks that can no longer be scheduled. Stateful tasks have
``retries=0``.
"""
from __future__ import annotations

import asyncio
import threading
import time

from distributed.diagnostics.plugin import WorkerPlugin

from .backends import _fetch_values, _fill_metadata, step_graph
from .device_spec import DeviceSpec
from .errors import DeadlineExceededError, InvalidArgumentError, UnavailableError
from .runtime import pop_traces, resources_of
from .train.cluster import ClusterSpec

POLL_S = 1.0


class ResourcePlugin(WorkerPlugin):
    """Holds the worker process's device resources (variables, queues) across sessions."""

    name = "tensorvm-resources"
    idempotent = True

    def setup(self, worker):
        resources_of(worker)


async def _gather_within(client, futures, timeout: float):
    """``(True, results)`` if the futures finish within ``timeout`` seconds, else
    ``(False, None)``: one trip through the client's event loop per step, where a wait followed
    by a gather would take two."""
    try:
        return True, await asyncio.wait_for(client._gather(futures), timeout)
    except asyncio.TimeoutError:
        return False, None


async def _set_resources(resources, dask_worker):
    await dask_worker.set_resources(**resources)


def _clear_resources(containers, dask_worker):
    res = getattr(dask_worker, "_tensorvm_resources", None)
    return res.clear(containers) if res is not None else 0


def _collect_traces(step_prefix, dask_worker):
    return pop_traces(step_prefix)


def resource_name(job: str, task: int) -> str:
    return f"tvm-dev-{job}-{task}"


def _start_local_cluster(spec: ClusterSpec | None):
    import dask
    from distributed import LocalCluster, Nanny, Scheduler, SpecCluster
    if spec is None:
        return LocalCluster(n_workers=2, threads_per_worker=2, processes=True,
                            dashboard_address=":0", silence_logs=40)
    # No per-device resource at start: the session gives it to the worker it maps
    # (``_ensure_mapped``). A worker that its Nanny restarts after a crash comes back without
    # it, so a stateful task of the lost device is never recomputed there; the step fails
    # with UnavailableError instead.
    workers = {}
    for job, task in spec.tasks():
        name = f"{job}-{task}"
        workers[name] = {"cls": Nanny, "options": {
            "name": name, "nthreads": 2, "silence_logs": 40}}
    with dask.config.set({"distributed.worker.daemon": False}):
        return SpecCluster(workers=workers, scheduler={
            "cls": Scheduler, "options": {"dashboard_address": ":0"}}, silence_logs=40)


class DistributedBackend:
    gpu_available = False

    def __init__(self, target=None, *, cluster=None, client=None, verbose=True):
        from distributed import Client
        self.spec = ClusterSpec(cluster) if cluster is not None else None
        self._cluster = None
        self._own_client = client is None
        if client is not None:
            self.client = client
        elif target in (None, "local"):
            self._cluster = _start_local_cluster(self.spec)
            self.client = Client(self._cluster, set_as_default=False)
        else:
            self.client = Client(target, set_as_default=False, timeout="20s")
        self._lock = threading.Lock()
        self._map: dict[tuple[str, int], tuple[str, str]] = {}  # task -> (address, name)
        self.verbose = verbose
        self.known_tasks = set(self.spec.tasks()) if self.spec else None
        self.default_device = self._default_device()
        try:
            self.client.register_plugin(ResourcePlugin())
            info = self.client.scheduler_info()
            self.gpu_available = any("GPU" in w.get("resources", {})
                                     for w in info["workers"].values())
            if self.spec is not None:
                for job, task in self.spec.tasks():
                    self._ensure_mapped(job, task, info)
        except BaseException:
            self.close()  # a task with no worker: leave no client or cluster behind
            raise
        if verbose and self.dashboard_link:
            print(f"tensorvm: dashboard at {self.dashboard_link}")

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

    # ---- device mapping ---------------------------------------------------------------------
    def _ensure_mapped(self, job: str, task: int, info=None):
        key = (job, task)
        if key in self._map:
            return self._map[key]
        with self._lock:
            if key in self._map:
                return self._map[key]
            info = info or self.client.scheduler_info()
            workers = info["workers"]  # address -> {name, resources, ...}
            addr = self._choose_worker(job, task, workers)
            self.client.run(_set_resources, {resource_name(job, task): 1e9}, workers=[addr])
            self._map[key] = (addr, str(workers[addr].get("name")))
            return self._map[key]

    def _choose_worker(self, job: str, task: int, workers: dict) -> str:
        """The worker for a logical task: the one that already holds the task's device (put
        there by another session: every client must see one home per device), else the one
        the ClusterSpec names, else the one named after the task, else the next free one."""
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
        if name in by_name:
            return by_name[name]
        ordered = sorted(workers, key=lambda a: str(workers[a].get("name")))
        if not ordered:
            raise UnavailableError(f"no Dask worker for task {where}; the cluster has none")
        reserved = {by_name.get(n) for n in (self.spec.task_names() if self.spec else ())}
        used = {a for a, _ in self._map.values()}
        free = [a for a in ordered if a not in used and a not in reserved]
        addr = free[0] if free else ordered[len(self._map) % len(ordered)]
        if self.verbose:
            print(f"tensorvm: task {name} -> worker {workers[addr].get('name')} ({addr})")
        return addr

    def describe_devices(self):
        return {f"{j}-{t}": a for (j, t), (a, _) in sorted(self._map.items())}

    def prepare(self, plan) -> None:
        self._pin(plan)

    def _pin(self, plan) -> dict:
        """Device -> (address, name) of its worker for this step, mapping a device anew
        when it lost its worker since the plan was compiled."""
        pinned = {}
        for dev in plan.devices:
            spec = DeviceSpec.parse(dev)
            pinned[dev] = self._ensure_mapped(spec.job, spec.task)
        return pinned

    # ---- execution --------------------------------------------------------------------------
    def _hlg(self, dsk, by_device, plan):
        from dask.highlevelgraph import HighLevelGraph, MaterializedLayer
        layer_of = {}
        layers, deps = {}, {}
        for dev, keys in by_device.items():
            spec = DeviceSpec.parse(dev)
            res = {resource_name(spec.job, spec.task): 1}
            for k in keys:
                lname = f"{k[0]}-{k[1]}" + (f"-{k[2]}" if len(k) > 2 else "")
                # Only the device resource: retries are 0 by default (stateful tasks must not
                # rerun), and every extra annotation costs scheduler time per task.
                layers[lname] = MaterializedLayer({k: dsk[k]}, annotations={"resources": res})
                layer_of[k] = lname
        for k, lname in layer_of.items():
            task = dsk[k]
            deps[lname] = {layer_of[a] for a in task[1:] if isinstance(a, tuple) and a in dsk}
        return HighLevelGraph(layers, deps)

    def execute(self, plan, feed_values, step_id, steps, options, run_metadata):
        trace = bool(options and options.trace)
        pinned = self._pin(plan)
        dsk, outputs, by_device = step_graph(plan, feed_values, step_id, steps, None, trace)
        hlg = self._hlg(dsk, by_device, plan)
        futures = self.client.get(hlg, outputs, sync=False)
        timeout = (options.timeout_in_ms / 1000.0) if options and options.timeout_in_ms else None
        deadline = time.monotonic() + timeout if timeout else None
        try:
            while True:
                left = POLL_S if deadline is None else min(POLL_S, deadline - time.monotonic())
                try:
                    done, results = self.client.sync(_gather_within, self.client, futures,
                                                     max(left, 0.001))
                except Exception as exc:
                    # A task that failed because its device's worker died (or that Dask
                    # re-ran elsewhere) reports the lost device, not the symptom.
                    try:
                        self._check_alive(pinned)
                    except UnavailableError as lost:
                        raise lost from exc
                    raise
                if done:
                    break
                self._check_alive(pinned)
                if deadline is not None and time.monotonic() >= deadline:
                    pending = self._pending_devices(dsk, by_device)
                    raise DeadlineExceededError(
                        f"step {step_id} did not finish within {timeout * 1000:.0f} ms; devices"
                        f" still pending: {', '.join(pending) or ', '.join(plan.devices)}")
        except BaseException:
            # Release rather than cancel: Client.cancel trips a scheduler assertion when a
            # fetched key is also a dependency of another task, dropping the client's
            # connection; releasing lets the scheduler forget the step, and waiting queue ops
            # see their task gone and give up.
            for f in futures:
                f.release()
            raise
        if trace:
            traces = self.client.run(_collect_traces, step_id)
            infos = [r for rs in traces.values() for r in rs]
            _fill_metadata(run_metadata, plan, infos)
        return _fetch_values(plan, outputs, results, feed_values)

    def _check_alive(self, pinned: dict) -> None:
        """Raise UnavailableError if a worker this step was pinned to has left (a restarted
        worker has a new address). The device is unmapped, so the next step maps it anew."""
        info = self.client.scheduler_info(n_workers=-1) if _accepts_n_workers() else \
            self.client.scheduler_info()
        workers = info["workers"]
        for dev, (addr, name) in pinned.items():
            if addr not in workers:
                spec = DeviceSpec.parse(dev)
                with self._lock:
                    if self._map.get((spec.job, spec.task)) == (addr, name):
                        del self._map[(spec.job, spec.task)]
                raise UnavailableError(
                    f"device {dev} is unavailable: its worker {name!r} ({addr}) left the "
                    "cluster; state on it (variables, queues) is lost — restore from the last "
                    "checkpoint")

    def _pending_devices(self, dsk, by_device) -> list[str]:
        keys = {k: dev for dev, ks in by_device.items() for k in ks}

        def states(keys, dask_scheduler):
            return {k: (dask_scheduler.tasks[k].state if k in dask_scheduler.tasks else None)
                    for k in keys}
        try:
            st = self.client.run_on_scheduler(states, list(keys))
        except Exception:  # noqa: BLE001 - best effort for the message
            return sorted(set(keys.values()))
        return sorted({keys[k] for k, s in st.items()
                       if s in ("waiting", "processing", "no-worker", "queued")})

    def close(self) -> None:
        if self._own_client:
            try:
                self.client.close()
            finally:
                if self._cluster is not None:
                    self._cluster.close()

    def __repr__(self):
        return f"dask.distributed at {self.client.scheduler.address}"


_N_WORKERS = None


def _accepts_n_workers() -> bool:
    global _N_WORKERS
    if _N_WORKERS is None:
        import inspect

        from distributed import Client
        _N_WORKERS = "n_workers" in inspect.signature(Client.scheduler_info).parameters
    return _N_WORKERS


def reset_workers(target, containers=None) -> int:
    """Clear tensorvm resources on every worker of the scheduler at ``target``."""
    from distributed import Client
    with Client(target, set_as_default=False) as c:
        return sum(c.run(_clear_resources, containers).values())
