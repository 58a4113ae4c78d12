"""Starting a cluster of worker processes on this machine, closed by default.

:func:`start_local_cluster` starts a scheduler (with its dashboard) and one Nanny-managed worker
process per logical task, all listening on ``host`` (127.0.0.1 unless the caller opens it), with
TLS when a ``distributed.Security`` asks for encryption. :func:`check_main_guard` stops a
program that would start worker processes from unguarded module-level code: Dask spawns its
workers, each imports the main script again, and without ``if __name__ == "__main__":`` the
program would spin printing multiprocessing bootstrap errors.

GPUs (issue 15), as dask-cuda's ``LocalCUDACluster`` lays them out: when CuPy sees N devices
(or ``gpus=N`` / ``ConfigProto(device_count={"GPU": N})`` says so) each of N workers gets one
GPU — the Dask resource ``GPU=1``, which placement reads as that task's ``/device:GPU:0``, and
``CUDA_VISIBLE_DEVICES`` rotated so that its own GPU is its device 0
(:func:`cuda_visible_devices`). Without a ClusterSpec that is one worker per GPU; with one, the
GPUs are dealt to the tasks in the spec's order, ``ps`` tasks last (parameter servers keep
their variables in host memory, as in TF's usual layouts); tasks past the GPU count get none.
:func:`worker_layout` is the pure decision (names, resources, environment).
"""
from __future__ import annotations

import ast
import functools
import logging
import os
import sys

from .spec import ClusterSpec
from ...vm import _dask_private

_log = logging.getLogger("tensorvm")
WORKER_PRELOAD = "tensorvm.runtime.cluster.worker_signals"  # run in every worker process it starts


def start_local_cluster(spec: ClusterSpec | None, host: str = "127.0.0.1", security=None,
                        gpus: int | None = None, threads: int | None = None):
    """A cluster of worker processes on this machine: the scheduler, its dashboard, the
    nannies and the workers all listen on ``host`` (loopback unless asked otherwise); with
    ``security`` every connection is TLS with those credentials. ``gpus``: how many GPUs to
    give workers (None: as many as CuPy sees; 0: none), laid out by :func:`worker_layout`.
    ``threads``: threads per worker (None: :func:`worker_threads`, which gives one thread
    each when the worker processes fill the cores)."""
    import dask
    from distributed import Nanny, Scheduler
    check_main_guard()
    _NannyCluster = _nanny_cluster()
    tls = security is not None and bool(getattr(security, "require_encryption", False))
    common = {"host": host, "security": security, "protocol": "tls://" if tls else "tcp://"}
    # No per-device resource at start: the session gives it to the worker it maps
    # (``DeviceMap.ensure_mapped``). A worker that its Nanny restarts after a crash comes back
    # without it, so a stateful task of the lost device is never recomputed there; the step fails
    # with UnavailableError instead. Its GPU resource and environment it keeps (Nanny options).
    layout = worker_layout(spec, gpus)
    nthreads = worker_threads(len(layout), threads)
    # the workers leave Ctrl-C to this process, which closes them (see worker_signals)
    preload = [*(dask.config.get("distributed.worker.preload") or ()), WORKER_PRELOAD]
    workers = {n: {"cls": Nanny, "options": {
        "name": n, "nthreads": nthreads, "silence_logs": 40, "dashboard": False,
        "preload": preload, **common, **extra}}
        for n, extra in layout.items()}
    scheduler = {"cls": Scheduler, "options": {
        "dashboard_address": f"{_bracket(host)}:0", "dashboard": True,
        "preload": ["tensorvm.scheduler_ext"], **common}}  # the job registry and /tensorvm
    before = _dask_private.spec_clusters()
    try:
        with dask.config.set({"distributed.worker.daemon": False}):
            return _NannyCluster(workers=workers, scheduler=scheduler, silence_logs=40,
                                 security=security)
    except BaseException:  # Ctrl-C or a failure mid-start: close what had started
        for cluster in _dask_private.spec_clusters() - before:
            _abandon(cluster)
        raise


@functools.cache
def _nanny_cluster() -> type:
    """The SpecCluster subclass a session starts (made once, on first use: distributed is
    imported only when a cluster is started)."""
    from distributed import SpecCluster

    class NannyCluster(SpecCluster):
        """A SpecCluster that leaves its Nannies to restart their workers.

        SpecCluster, on every worker removal, schedules a check for
        ``distributed.deploy.lost-worker-timeout`` (15 s) later that *closes the worker's
        Nanny for good* if no worker of that name is registered at that instant — meant for
        job-queue clusters, where a lost worker is a lost job. Here a Nanny in this process
        restarts its killed worker itself, but the check looks only at that one instant: a
        worker killed again while restarting 15 s after an earlier kill lost its Nanny, and
        its task never came back (issue 24: ps-0 missing for good after repeated kills). A
        Nanny that closed itself is closed anyway; one that is running always restarts its
        worker."""

        def _update_worker_status(self, op, msg):  # Dask's private hook (see _dask_private)
            _dask_private.update_worker_status(self, op, msg)  # the bookkeeping, not the timer

    return NannyCluster


def _abandon(cluster) -> None:
    """Close a cluster whose start was cut short, as far as it started; distributed's exit
    hook would otherwise close it again and fail on its workers that never started
    ('AssertionError: Status.init' printed at exit)."""
    from distributed.core import Status
    for w in list(getattr(cluster, "workers", {}).values()):
        if w.status == Status.init:  # never started: nothing to stop
            w.status = Status.closed
    try:
        cluster.close(timeout=10)
    except BaseException as e:  # noqa: BLE001 - best effort: the interruption is the error
        _log.debug("tensorvm: closing a cluster whose start was interrupted: %r", e)
    finally:
        _dask_private.forget_cluster(cluster)


THREADS_CONFIG = "tensorvm.worker-threads"  # Dask config key: threads per local worker


def worker_threads(n_workers: int, threads: int | None = None, cores: int | None = None) -> int:
    """Threads per worker process of a local cluster: ``threads`` when given, else the Dask
    config ``tensorvm.worker-threads`` (``tensorvm run --conf tensorvm.worker-threads=2``,
    ``DASK_TENSORVM__WORKER_THREADS=2``), else the cores shared out so that processes x
    threads never exceeds them: one thread each when the processes fill the cores (Dask's
    LocalCluster rule; before issue 25 every worker had 2 threads, 4 threads on 2 cores).
    ``cores`` defaults to the CPUs this process may use (``dask.system.CPU_COUNT``: affinity
    and cgroup quota).

    >>> worker_threads(2, cores=2), worker_threads(3, cores=2), worker_threads(2, cores=16)
    (1, 1, 8)
    >>> worker_threads(3, threads=4, cores=2)
    4
    """
    if threads is None:
        import dask
        threads = dask.config.get(THREADS_CONFIG, None)
    if threads is not None:
        threads = int(threads)
        if threads < 1:
            raise ValueError(f"threads per worker must be >= 1, got {threads}")
        return threads
    if cores is None:
        from dask.system import CPU_COUNT as cores
    return max(1, int(cores) // max(1, int(n_workers)))


def cuda_visible_devices(i: int, visible) -> str:
    """``CUDA_VISIBLE_DEVICES`` for the worker of GPU ``i``: the visible devices rotated so that
    its own comes first (CUDA numbers it 0; the others stay reachable for peer copies), as
    dask-cuda does.

    >>> cuda_visible_devices(0, range(4)), cuda_visible_devices(3, range(8))
    ('0,1,2,3', '3,4,5,6,7,0,1,2')
    >>> cuda_visible_devices(1, ["GPU-a1", "GPU-b2"])
    'GPU-b2,GPU-a1'
    """
    visible = [str(v) for v in visible]
    return ",".join(visible[i:] + visible[:i])


def visible_gpus(gpus: int | None = None) -> list[str]:
    """The GPUs a local cluster gives out, as ``CUDA_VISIBLE_DEVICES`` entries: the first
    ``gpus`` of this process's ``CUDA_VISIBLE_DEVICES`` (else ``0..gpus-1``); ``gpus=None``
    counts the devices CuPy sees (none without CuPy)."""
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    listed = [v.strip() for v in env.split(",") if v.strip()] if env is not None else None
    if gpus is None:
        from ...vm.kernels.array_api import gpu_count
        gpus = gpu_count()  # CuPy counts only the devices CUDA_VISIBLE_DEVICES shows
        if listed is not None:
            gpus = min(gpus, len(listed))
    gpus = int(gpus)
    if gpus < 0:
        raise ValueError(f"gpus must be >= 0, got {gpus}")
    if listed is None:
        return [str(i) for i in range(gpus)]
    if gpus > len(listed):
        raise ValueError(f"asked for {gpus} GPUs but CUDA_VISIBLE_DEVICES={env!r} lists "
                         f"{len(listed)}")
    return listed[:gpus]


def worker_layout(spec: ClusterSpec | None, gpus: int | None = None,
                  visible=None) -> dict[str, dict]:
    """Worker name -> its extra Nanny options: ``{}`` for a CPU worker, ``{"resources":
    {"GPU": 1}, "env": {"CUDA_VISIBLE_DEVICES": ...}}`` for a GPU worker. ``visible``: the
    GPUs to give out (default :func:`visible_gpus` of ``gpus``). Without a spec: one worker per
    GPU, or two CPU workers with no GPU; with one: a worker per task, GPUs dealt in the spec's
    task order with ``ps`` tasks last.

    >>> worker_layout(ClusterSpec({"ps": 1, "worker": 1}), visible=["0", "1", "2"])["ps-0"]
    {'resources': {'GPU': 1}, 'env': {'CUDA_VISIBLE_DEVICES': '1,2,0'}}
    >>> worker_layout(None, visible=[])
    {'0': {}, '1': {}}
    """
    visible = visible_gpus(gpus) if visible is None else [str(v) for v in visible]
    if spec is None:
        names = [str(i) for i in range(len(visible))] or ["0", "1"]
        order = names
    else:
        tasks = list(spec.tasks())
        names = [f"{job}-{task}" for job, task in tasks]
        order = [f"{j}-{t}" for j, t in tasks if j != "ps"] + \
                [f"{j}-{t}" for j, t in tasks if j == "ps"]
    out: dict[str, dict] = {n: {} for n in names}
    for i, n in enumerate(order[:len(visible)]):
        out[n] = {"resources": {"GPU": 1},
                  "env": {"CUDA_VISIBLE_DEVICES": cuda_visible_devices(i, visible)}}
    return out


def _bracket(host: str) -> str:
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


def check_main_guard() -> None:
    """Fail at once when a program starts worker processes from unguarded module-level code.

    Dask spawns worker processes, and a spawned process imports the main script again: without
    ``if __name__ == "__main__":`` it would start a cluster of its own, and the program spins
    printing multiprocessing bootstrap errors. The call site is found on the stack (the
    ``__main__`` module's own code) and the script's source says whether it is guarded.
    """
    main = sys.modules.get("__main__")
    if getattr(main, "__name__", None) == "__mp_main__" or _unguarded_main_call(main):
        raise RuntimeError(
            "tensorvm: this program starts Dask worker processes from module-level code; put "
            "it under `if __name__ == \"__main__\":` (worker processes re-import the script)")


def _unguarded_main_call(main) -> bool:
    path = getattr(main, "__file__", None)
    if not path or not os.path.exists(path):
        return False  # an interactive session, python -c, a notebook: nothing is re-imported
    frame = sys._getframe(1)
    line = None
    while frame is not None:
        if frame.f_globals is main.__dict__ and frame.f_code.co_name == "<module>":
            line = frame.f_lineno
        frame = frame.f_back
    if line is None:
        return False
    try:
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read())
    except (OSError, SyntaxError, ValueError):
        return False
    for node in tree.body:
        if isinstance(node, ast.If) and _is_main_test(node.test) and \
                node.lineno <= line <= (node.end_lineno or node.lineno):
            return False
    return True


def _is_main_test(test) -> bool:
    return (isinstance(test, ast.Compare) and len(test.comparators) == 1
            and {_name_of(test.left), _name_of(test.comparators[0])} == {"__name__", "__main__"})


def _name_of(node):
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return None
