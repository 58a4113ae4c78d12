"""The session's backends: what ``tv.Session`` may ask of the thing that runs its steps.

:class:`Backend` is the contract; it has two implementations:

* :class:`LocalBackend` (``Session()``) — every device in this process, on Dask's threaded
  scheduler; resources owned by the session (TF's DirectSession);
* :class:`~tensorvm.runtime.dask_plane.DistributedBackend` (``Session("local")``,
  ``Session(cluster=spec)``, ``Session("tcp://…")``) — a dask.distributed client, one worker
  per logical task, resources in the workers; two data planes (Dask task dependencies, or
  registered partitions and a rendezvous, see :mod:`tensorvm.runtime.direct.data_plane`).

Both build a step's Dask graph with :func:`tensorvm.runtime.dask_graph.step_graph` and read its fetches
with :func:`tensorvm.runtime.dask_graph.fetch_values`.
"""
from __future__ import annotations

import abc
import threading

import numpy as np

from ..framework.errors import CancelledError, DeadlineExceededError
from ..vm.interpreter import DeviceResources, pop_traces
from .dask_graph import fetch_values, fill_metadata, step_graph

LOCAL_DEVICE = "/job:localhost/replica:0/task:0/device:CPU:0"


class Backend(abc.ABC):
    """What a session runs its steps on.

    Attributes the session reads:

    * ``default_device`` — the full device string of ops placed nowhere else;
    * ``gpu_available`` — whether a ``/gpu`` op can run on a GPU (else soft placement);
    * ``gpus`` — how many GPUs each task has (``{(job, task): n}``, an int for every task
      alike, or None: ``gpu_available`` alone decides);
    * ``known_tasks`` — the ``{(job, task)}`` the cluster has, or None when any is accepted;
    * ``placement_version`` — changes when that inventory changes (a task remapped to a
      worker with another GPU count): part of the session's plan-cache key;
    * ``dashboard_link`` — the Dask dashboard's URL, or None;
    * ``client`` — the ``distributed.Client``, or None in process;
    * ``live_ref_fetches`` — whether a variable fetched in a step that updates it reads as
      the step left it (TF's local session, in process), not as its op read it (a PS in
      another process): :mod:`tensorvm.passes.ref_fetch`.

    Methods (the session calls nothing else):

    * :meth:`prepare` once per compiled plan, before its first step;
    * :meth:`runs_steps` whether :meth:`execute` loops ``steps=K`` of this plan itself (else
      the session runs an unrolled plan of K steps once);
    * :meth:`execute` for every step; returns the fetched values, one per ``plan.fetches``;
    * :meth:`release` when the session drops plans from its cache (its graph changed);
    * :meth:`describe_devices` — ``{logical task: worker}`` for ``Session.devices``;
    * :meth:`close` — once, when the session closes.

    >>> b = LocalBackend()
    >>> isinstance(b, Backend), b.client, b.dashboard_link
    (True, None, None)
    """

    default_device: str = LOCAL_DEVICE
    gpu_available: bool = False
    gpus = None
    placement_version: int = 0
    known_tasks: set | None = None
    dashboard_link: str | None = None
    client = None
    live_ref_fetches: bool = False

    def set_step_deadline(self, deadline: float | None) -> None:
        """The deadline (``time.monotonic()``) of the step the calling thread starts, None
        when it ends: a distributed backend waits for a lost worker's return no longer than
        that (nothing by default)."""

    def prepare(self, plan) -> None:
        """Check and install a newly compiled plan (nothing by default)."""

    def runs_steps(self, plan, options) -> bool:
        """Whether :meth:`execute` runs ``steps`` > 1 of this plan itself: by default only a
        single-task plan (one task looping K times)."""
        return len(plan.tasks) == 1

    @abc.abstractmethod
    def execute(self, plan, feed_values: list, step_id: str, steps: int, options,
                run_metadata) -> list:
        """Run one step (``steps`` steps when :meth:`runs_steps` said so) of ``plan`` with
        ``feed_values`` (in ``plan.feeds`` order) under ``step_id`` (``token.N``, new each
        call); fill ``run_metadata`` when ``options`` trace; return the fetched values in
        ``plan.fetches`` order."""

    def release(self, plans) -> None:
        """The session will not run these plans again (nothing by default)."""

    def describe_devices(self) -> dict:
        """``{logical task: where it runs}``."""
        return {}

    def close(self) -> None:
        """Free what the backend holds (nothing by default)."""


def _run_one_task(dsk, outputs):
    """``dask.local.get_sync`` for a step graph of one task (its arguments are values: feeds
    travel inline), else Dask's."""
    task = dsk.get(outputs[0]) if len(dsk) == 1 and len(outputs) == 1 else None
    if type(task) is tuple and callable(task[0]):
        return [task[0](*task[1:])]
    import dask.local
    return dask.local.get_sync(dsk, outputs)


class LocalBackend(Backend):
    """Every device in this process, on Dask's threaded scheduler (TF's local session).

    Closing (TF's ``DirectSession::Close``): the steps running in other threads are cancelled
    — each stops before its next op (a kernel already running, a py_func's sleep, finishes)
    and raises CancelledError saying the session closed — and the session's resources are
    cleared once the last of them has ended, so no step sees its variables vanish under it
    (that was ``FailedPreconditionError: uninitialized value``). ``close`` does not wait."""

    live_ref_fetches = True  # a fetched variable reads as the step left it (TF's local session)

    def __init__(self):
        self.resources = DeviceResources()
        self._running: set[str] = set()  # ids of the steps running now, in any thread
        self._running_lock = threading.Lock()
        self._closed = False
        import dask.local
        import dask.threaded
        self._get = dask.threaded.get
        # One task needs no scheduler at all: it is called here, in the calling thread
        # (dask.local.get_sync cost ~0.25 ms a run: a queue pipeline's one-enqueue runs went
        # 5x faster without it; issue 14).
        self._get_sync = _run_one_task
        self._gpus = None

    @property
    def gpus(self) -> int:
        """The GPUs CuPy sees in this process (every in-process task shares them), counted
        when the session compiles its first plan."""
        if self._gpus is None:
            from ..vm.kernels.array_api import gpu_count
            self._gpus = gpu_count()
        return self._gpus

    @property
    def gpu_available(self) -> bool:
        return self.gpus > 0

    def describe_devices(self):
        return {"localhost-0": "in-process"}

    def execute(self, plan, feed_values, step_id, steps, options, run_metadata):
        with self._running_lock:
            if self._closed:
                raise _closed_error(step_id, None)
            self._running.add(step_id)
        try:
            return self._execute(plan, feed_values, step_id, steps, options, run_metadata)
        except CancelledError as exc:
            if self._closed:  # cancelled by close(): say so (the message names the op)
                raise _closed_error(step_id, exc) from exc
            raise
        finally:
            with self._running_lock:
                self._running.discard(step_id)
                last = self._closed and not self._running
            if last:  # close() left the resources to the last running step
                self.resources.clear()

    def _execute(self, plan, feed_values, step_id, steps, options, run_metadata):
        trace = bool(options and options.tracing)
        dsk, outputs, _ = step_graph(plan, feed_values, step_id, steps, self.resources, trace)
        timeout = (options.timeout_in_ms / 1000.0) if options and options.timeout_in_ms else None
        if timeout:
            results = self._get_with_timeout(dsk, outputs, timeout, plan, step_id)
        elif len(plan.tasks) == 1:
            results = self._get_sync(dsk, outputs)
        else:
            try:
                results = self._get(dsk, outputs)
            except BaseException:
                # tasks of the step still queued in the pool run nothing
                self.resources.cancel_step(step_id)
                raise
        if trace:
            fill_metadata(run_metadata, plan, pop_traces(step_id))
        # A read-only result is stored state (a variable's value): return a copy, as TF does,
        # so writing to it never changes the variable.
        return [v.copy() if type(v) is np.ndarray and not v.flags.writeable else v
                for v in fetch_values(plan, outputs, results, feed_values)]

    def _get_with_timeout(self, dsk, outputs, timeout, plan, step_id):
        """Run the step in a thread of its own and wait ``timeout`` seconds for it. Given up,
        the step is cancelled: its ops not yet started never run (the kernel runner checks the
        mark before every op), blocked queue ops give up, and the error names the stateful ops
        that had started. A kernel that cannot be interrupted keeps only its own thread."""
        get = self._get_sync if len(plan.tasks) == 1 else self._get
        box: dict = {}
        finished = threading.Event()

        def run():
            try:
                box["results"] = get(dsk, outputs)
            except BaseException as e:  # noqa: BLE001 - handed to the caller's thread
                box["error"] = e
            finally:
                finished.set()
        self.resources.watch_step(step_id)
        thread = threading.Thread(target=run, name=f"tensorvm-step-{step_id}", daemon=True)
        thread.start()
        try:
            if not finished.wait(timeout):
                started = self.resources.cancel_step(step_id)
                raise DeadlineExceededError(
                    f"step {step_id} did not finish within {timeout * 1000:.0f} ms and was "
                    f"cancelled (its ops not yet started will not run); pending devices: "
                    f"{', '.join(plan.devices)}; "
                    + (f"stateful ops that may already have run: {', '.join(started)}"
                       if started else "no stateful op of it had started"))
        except BaseException:
            self.resources.cancel_step(step_id)
            raise
        finally:
            self.resources.unwatch_step(step_id)
        if "error" in box:
            raise box["error"]
        return box["results"]

    def close(self) -> None:
        """Cancel the running steps; clear the resources now if none runs, else when the last
        one ends (see the class docstring)."""
        with self._running_lock:
            self._closed = True
            running = list(self._running)
            for step_id in running:
                self.resources.cancel_step(step_id)
        if not running:
            self.resources.clear()

    def __repr__(self):
        return "in-process (dask threaded scheduler)"


def _closed_error(step_id: str, cancelled: CancelledError | None) -> CancelledError:
    """The CancelledError of a step of a closed session (``cancelled``: the runtime's, naming
    the op that did not run)."""
    what = ""
    if cancelled is not None:
        detail = str(cancelled.message)
        same = f"step {step_id} was cancelled "  # the runtime's opening, said once here
        what = f" ({detail[len(same):] if detail.startswith(same) else detail})"
    return CancelledError(f"step {step_id} was cancelled: its session was closed while it "
                          f"ran (its ops not yet started will not run){what}")
