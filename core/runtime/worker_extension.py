"""tensorvm's state in a Dask worker process: one extension, installed by one worker plugin.

As Dask's P2P shuffle keeps all of its worker state in one object at
``worker.extensions["shuffle"]``, installed by one plugin (``distributed/shuffle/``), tensorvm
keeps its own in a :class:`TensorvmExtension` at ``worker.extensions["tensorvm"]``
(:data:`tensorvm.vm.on_worker.EXTENSION`; kernels find it with
:func:`tensorvm.vm.on_worker.extension_of`):

* ``resources`` — the device resources (variables, queues, readers) of every device this worker
  holds (:class:`tensorvm.vm.interpreter.DeviceResources`): they outlive sessions and clients;
* ``plans`` — the plan partitions registered on this worker
  (:class:`tensorvm.runtime.direct.registered_plans.PlanStore`);
* ``data_plane`` — the direct plane's handlers, rendezvous and lanes
  (:class:`tensorvm.runtime.direct.data_plane.DataPlane`), whose comm handlers the extension
  adds to the worker under versioned names (:mod:`tensorvm.runtime.wire_names`).

Dask closes the extension with its worker. A session registers :class:`TensorvmWorkerPlugin`
when it connects (the scheduler gives it to workers that join later), after
:func:`check_versions` has made sure that every worker runs the client's tensorvm version.
"""
from __future__ import annotations

import functools
import importlib
import logging
import threading

from distributed.diagnostics.plugin import WorkerPlugin

from ..framework.device_spec import DeviceSpec
from ..framework.errors import FailedPreconditionError, InternalError, OpError, UnknownError
from ..vm import _dask_private
from ..vm.interpreter import DeviceResources
from ..vm.kernels.malloc import keep_freed_heap
from ..vm.kernels.threads import ensure_blas_limit
from ..vm.on_worker import EXTENSION
from .cluster.device_map import TOPIC_MADE, resource_name
from .direct.data_plane import DataPlane
from .direct.packing import UNSPLIT_BYTES
from .direct.registered_plans import PlanStore
from .wire_names import VERSION, WORKER_PLUGIN


class TensorvmExtension:
    """All of tensorvm's state in one Dask worker (see the module docstring)."""

    def __init__(self, worker):
        self.worker = worker
        self.version = VERSION
        self.resources = DeviceResources()
        # what would die with this worker, for the scheduler's DeviceHomes (issue 24: a queue
        # new on a restarted PS was refused as lost, since every name counted as lost)
        self.resources.on_created = functools.partial(_report_made, worker)
        self.resources.on_cleared = functools.partial(_report_cleared, worker)
        self.plans = PlanStore()
        self.data_plane = DataPlane(worker, self.plans, self.resources)

    def __repr__(self):
        return (f"TensorvmExtension(tensorvm {self.version}, {len(self.plans)} plan "
                f"partitions, worker={getattr(self.worker, 'address', None)!r})")

    def close(self) -> None:
        """The worker closes: the data plane's lanes and peer connections go."""
        self.data_plane.close()


def install(worker) -> TensorvmExtension:
    """tensorvm's extension of ``worker``, installed on first call: its comm handlers added,
    its TCP comms allowed to send tensors up to
    :data:`~tensorvm.runtime.direct.packing.UNSPLIT_BYTES` as one frame, and tensorvm's
    expected errors kept out of the worker's error log."""
    ext = worker.extensions.get(EXTENSION)
    if ext is None:
        _dask_private.unsplit_tcp_frames(UNSPLIT_BYTES)
        # kernels' temporaries reuse the heap (Dask's env maps each afresh), within the limit
        keep_freed_heap(getattr(getattr(worker, "memory_manager", None), "memory_limit", None))
        ext = worker.extensions[EXTENSION] = TensorvmExtension(worker)
        worker.handlers.update(ext.data_plane.handlers())
        wlog = logging.getLogger("distributed.worker")
        if _FILTER not in wlog.filters:
            wlog.addFilter(_FILTER)
        threading.Thread(target=_warm, name="tensorvm-warm", daemon=True).start()
    return ext


def _warm() -> None:
    """What a worker's first task would otherwise do cold, done beside its start: the BLAS
    thread limit (threadpoolctl scans the loaded libraries once, ~10 ms)."""
    try:
        ensure_blas_limit()
    except Exception:  # noqa: BLE001 - the first task sets it (and reports) as it always did
        logging.getLogger("tensorvm").debug("tensorvm: warming the worker failed",
                                            exc_info=True)


class TensorvmWorkerPlugin(WorkerPlugin):
    """Installs tensorvm's extension on every worker (:func:`install`). Its name carries the
    tensorvm version (:data:`~tensorvm.runtime.wire_names.WORKER_PLUGIN`), and it carries the
    version of the client that made it: a worker of another version refuses it, naming both
    (a worker that joins later, after :func:`check_versions`, says so in its log)."""

    name = WORKER_PLUGIN
    idempotent = True

    def __init__(self):
        self.client_version = VERSION

    def setup(self, worker):
        if self.client_version != VERSION:
            raise FailedPreconditionError(_mismatch(self.client_version, [
                f"worker {worker.name!r} ({worker.address}) runs tensorvm {VERSION}"]))
        install(worker)


# scheduler address -> (address, id) of the worker processes that answered VERSION
_SAME_VERSION: dict[str, set] = {}


def check_versions(client) -> None:
    """Raise FailedPreconditionError naming both versions when a worker of ``client``'s
    cluster runs another tensorvm version than this process (one round trip). Workers that
    cannot answer (no tensorvm at all) are left to fail as they do without the check.

    The question is one that every tensorvm version answers the same way — the package's
    ``__version__`` — so it never depends on a module or class of this version existing on the
    worker.

    Each worker is asked once per process (:data:`_SAME_VERSION`): a session on a cluster
    whose workers all answered before costs no round trip to them, so a stopped or busy
    worker does not delay it (a restarted worker is a new worker id, asked again)."""
    facade = importlib.import_module("tensorvm")  # pickled by name: the worker's own package
    checked = _SAME_VERSION.setdefault(str(client.scheduler.address), set())
    workers = client.scheduler_info(n_workers=-1)["workers"]
    ids = {a: (a, w.get("id")) for a, w in workers.items()}
    todo = [a for a, ident in ids.items() if ident not in checked]
    if not todo:
        return
    answers = client.run(getattr, facade, "__version__", workers=todo, on_error="return")
    checked.update(ids[a] for a, v in answers.items() if v == VERSION and a in ids)
    other = {a: v for a, v in answers.items() if isinstance(v, str) and v != VERSION}
    if other:
        raise FailedPreconditionError(_mismatch(VERSION, [
            f"worker {workers.get(a, {}).get('name', a)!r} ({a}) runs tensorvm {v}"
            for a, v in sorted(other.items())]))


def _mismatch(client_version: str, others: list) -> str:
    return (f"this client runs tensorvm {client_version}, but {'; '.join(others)}: a client "
            "and its cluster's workers must run the same tensorvm version (the plans, "
            "plugins and messages between them change with it); install tensorvm "
            f"{client_version} on every worker, or this client's version to match them")


class ExpectedErrorFilter(logging.Filter):
    """Drops the Dask worker's "Compute Failed" record for a tensorvm error: the error goes
    back to the session that ran the step, which raises it; an expected outcome (the end of an
    input, an uninitialised variable, a cancelled step) is not a worker error. Unknown and
    internal errors are still logged."""

    _QUIET = None

    def filter(self, record: logging.LogRecord) -> bool:
        if not str(record.msg).startswith("Compute Failed") or len(record.args or ()) < 4:
            return True
        if ExpectedErrorFilter._QUIET is None:
            from ..framework import errors
            ExpectedErrorFilter._QUIET = tuple(
                f"{c.__name__}(" for c in vars(errors).values()
                if isinstance(c, type) and issubclass(c, OpError)
                and c not in (OpError, UnknownError, InternalError))
        return not str(record.args[3]).startswith(ExpectedErrorFilter._QUIET)


_FILTER = ExpectedErrorFilter()


def _report_made(worker, device: str, container: str, name: str) -> None:
    """On a worker: tell the scheduler (:data:`~tensorvm.runtime.cluster.device_map.TOPIC_MADE`,
    the worker's batched stream) that a resource that dies with this worker was made on
    ``device``."""
    spec = DeviceSpec.parse(device)
    worker.log_event(TOPIC_MADE, {"res": resource_name(spec.job, spec.task),
                                  "container": container, "name": name})


def _report_cleared(worker, containers) -> None:
    """On a worker: its resources were cleared on purpose (``tv.Session.reset``)."""
    worker.log_event(TOPIC_MADE, {"cleared": None if containers is None else list(containers)})
