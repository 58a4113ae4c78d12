"""Resources on their device (TF's per-device ResourceMgr) and what a stateful kernel sees.

* :class:`ResourceMgr` — one per device, keyed by ``(container, name)``. In a dask.distributed
  worker the managers live in the worker process (set up by the worker plugin), so they
  outlive sessions and clients; an in-process session owns its own managers.
* :class:`DeviceResources` — the managers of one process, by device, and the per-step
  cancellation and watch marks the interpreter checks before every op.
* :class:`KernelContext` — what a kernel with ``needs_ctx=True`` receives first.
"""
from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..framework import errors


class ResourceMgr:
    """Resources of one device: variables, queues, readers, random generators.

    ``lost`` (set on a worker that took over the device of a worker that left the cluster)
    says how the device's state was lost: a resource whose class declares
    ``LOST_WITH_WORKER = True`` (a queue: its elements and its epoch) that existed on the lost
    worker (``lost_names``: its ``(container, name)`` pairs; None: every one) is then never
    silently re-created empty; using it fails with UnavailableError naming it until the program
    clears it on purpose (``tv.Session.reset``). A name the lost worker never held is created as
    usual. A variable is re-created by assigning it (an initializer, a restored checkpoint);
    until then reading it is FailedPreconditionError. ``on_created(device, container, name)``,
    if set, is told of every LOST_WITH_WORKER resource made here (a worker reports them to the
    scheduler, which remembers what a lost worker held).
    """

    def __init__(self, device: str, lost: str | None = None, lost_names=None,
                 on_created: Callable[[str, str, str], None] | None = None):
        self.device = device
        self._res: dict[tuple[str, str], Any] = {}
        self._lock = threading.Lock()
        self.lost = lost
        self.lost_names = _pairs(lost_names)
        self.on_created = on_created
        self._lost_lifted: set[str] = set()  # containers cleared on purpose since the loss

    def lookup_or_create(self, container: str, name: str, factory: Callable[[], Any]):
        key = (container, name)
        res = self._res.get(key)
        if res is None:
            with self._lock:
                res = self._res.get(key)
                if res is None:
                    res = factory()
                    if getattr(res, "LOST_WITH_WORKER", False) and self._was_lost(key):
                        kind = getattr(res, "kind", type(res).__name__)
                        raise errors.UnavailableError(
                            f"{kind} {name!r} on {self.device} was lost: "
                            f"{self.lost}. It is not re-created empty behind the program's "
                            "back; clear it on purpose with tv.Session.reset(target) (or "
                            "restore the program's state) before using it again")
                    self._res[key] = res
                    if self.on_created is not None and getattr(res, "LOST_WITH_WORKER", False):
                        self.on_created(self.device, container, name)
        return res

    def _was_lost(self, key: tuple[str, str]) -> bool:
        """Whether the resource ``(container, name)`` died with this device's lost worker and
        has not been cleared on purpose since."""
        return bool(self.lost) and key[0] not in self._lost_lifted and \
            (self.lost_names is None or key in self.lost_names)

    def lookup(self, container: str, name: str):
        try:
            return self._res[(container, name)]
        except KeyError:
            raise errors.NotFoundError(
                f"resource {container or ''}/{name} does not exist on {self.device}") from None

    def clear(self, containers=None) -> int:
        with self._lock:
            if containers is None:
                self.lost = None
            else:
                self._lost_lifted.update(containers)
            keys = [k for k in self._res if containers is None or k[0] in containers]
            for k in keys:
                res = self._res.pop(k)
                if hasattr(res, "close"):
                    try:
                        res.close(cancel_pending_enqueues=True)
                    except TypeError:
                        res.close()
            return len(keys)

    def names(self) -> list[tuple[str, str]]:
        return sorted(self._res)


class DeviceResources:
    """The resource managers of one process, by device (a worker may hold several devices),
    and the per-step cancellation marks (TF's CancellationManager): a step the client gave up
    (timeout, error, Ctrl-C) is marked here, and :func:`execute` checks the mark before every
    op, so a running stage stops at its next op and a stage that starts later runs nothing.
    ``watch_step`` records the stateful ops a step starts (only for watched steps: in-process
    steps with a deadline), so a timeout can say which of them may already have run."""

    MAX_CANCELLED = 4096  # marks kept (step ids are unique; old marks only cost memory)

    def __init__(self):
        self._mgrs: dict[str, ResourceMgr] = {}
        self._lock = threading.Lock()
        self._cancelled: dict[str, None] = {}  # step roots given up by the client, in order
        self._watched: dict[str, list[str]] = {}  # step root -> stateful ops started
        # "/job:J/replica:0/task:T/" -> (how its state was lost, the names lost or None: all)
        self._lost: dict[str, tuple[str, Any]] = {}
        self.on_created: Callable[[str, str, str], None] | None = None  # see ResourceMgr
        self.on_cleared: Callable[[Any], None] | None = None  # told clear()'s containers

    def mark_lost(self, task_prefix: str, how: str, names=None) -> None:
        """This process took over a logical task whose worker left: its resources that are
        not re-created silently (queues) and that the lost worker held (``names``:
        ``(container, name)`` pairs; None: every one) fail until cleared on purpose."""
        with self._lock:
            self._lost[task_prefix] = (how, names)
            for dev, mgr in self._mgrs.items():
                if dev.startswith(task_prefix):
                    mgr.lost, mgr.lost_names = how, _pairs(names)

    def cancel_step(self, step_id: str) -> list[str]:
        """Mark a step as given up: its ops not yet started never run, and blocking kernels
        of it (queue waits) stop waiting. Returns the stateful ops it started, if watched."""
        root = _step_root(step_id)
        with self._lock:
            self._cancelled[root] = None
            while len(self._cancelled) > self.MAX_CANCELLED:
                del self._cancelled[next(iter(self._cancelled))]
            return list(self._watched.get(root, ()))

    def is_cancelled(self, step_id) -> bool:
        return bool(self._cancelled) and _step_root(step_id) in self._cancelled

    def watch_step(self, step_id: str) -> None:
        self._watched[_step_root(step_id)] = []

    def unwatch_step(self, step_id: str) -> list[str]:
        return self._watched.pop(_step_root(step_id), [])

    def for_device(self, device: str) -> ResourceMgr:
        mgr = self._mgrs.get(device)
        if mgr is None:
            with self._lock:
                how, names = next((v for p, v in self._lost.items() if device.startswith(p)),
                                  (None, None))
                mgr = self._mgrs.setdefault(device, ResourceMgr(device, how, names,
                                                                self.on_created))
        return mgr

    def clear(self, containers=None) -> int:
        if containers is None:
            self._lost.clear()
        n = sum(m.clear(containers) for m in list(self._mgrs.values()))
        if self.on_cleared is not None:
            self.on_cleared(containers)
        return n


def _pairs(names) -> frozenset | None:
    """``(container, name)`` pairs as a set (they may come as lists from a message)."""
    return None if names is None else frozenset((str(c), str(n)) for c, n in names)


def resources_of(worker) -> DeviceResources:
    """The DeviceResources of a Dask worker process (held by its tensorvm extension,
    :mod:`tensorvm.vm.on_worker`)."""
    from .on_worker import extension_of
    return extension_of(worker).resources


def _worker_resources() -> DeviceResources:
    from distributed import get_worker
    return resources_of(get_worker())


def _step_root(step_id) -> str:
    """The key of a step's cancellation and watch marks: its id, ``token.N`` (one step per
    submission; ``steps=K`` runs under the one id)."""
    return step_id if step_id.__class__ is str else str(step_id)


@dataclass
class KernelContext:
    """What a stateful kernel (``needs_ctx=True``) receives first."""
    resources: ResourceMgr
    op_name: str
    step_id: Any
    device: str
    rt: Any = None  # the process's DeviceResources

    def cancelled(self) -> bool:
        """Whether the client gave this step up (in-process; in a Dask worker the task's own
        state says so, see data_flow_ops.Waiter)."""
        return self.rt is not None and self.rt.is_cancelled(self.step_id)

