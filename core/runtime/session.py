"""``tv.Session``: runs steps of a graph as Dask task graphs.

Design
------
``run(fetches, feed_dict)`` maps the fetch structure to a flat list of tensors and target ops,
checks the feeds, and looks the compiled :class:`~tensorvm.passes.Plan` up in a cache keyed by
``(graph version, fetches, feed names, targets)`` — an LRU of ``Session.PLAN_CACHE_SIZE`` (128)
plans, from which plans of an older graph version are dropped as the graph grows (they are
never asked for again). On a miss the pure passes run: snapshot →
prune → optimise → place → partition → stage → compile. The plan is a template; each step
gives its Dask keys a new step id (``(task name, session token + step)``), so Dask never hands
back an earlier step's result, and key prefixes name graph, device and stage so the dashboard
reads like the graph.

A backend executes the step:

* :class:`~tensorvm.runtime.backends.LocalBackend` (``Session()``) — Dask's threaded scheduler in this
  process, every device here, resources owned by the session (TF's DirectSession);
* :class:`~tensorvm.runtime.backends.DistributedBackend` (``Session("local")``,
  ``Session(cluster=spec)``, ``Session("tcp://host:8786")``) — a dask.distributed client; each
  logical task maps to one worker, pinned by a per-device Dask resource; resources live in the
  workers and outlive the session.

``run(..., steps=K)`` runs K steps in one submission (one looping task on one device; across
devices K chained copies on Dask, or one message per device that loops its partition on the
direct data plane) and returns the last step's fetches.

Distributed steps move tensors one of two ways (``ConfigProto``/``RunOptions(data_plane=…)``):
as a Dask graph whose Send/Recv pairs are task dependencies (a plan's first run, batch jobs),
or — once a plan's partitions are registered on the workers — one message per device straight
to its worker, tensors handed worker to worker through a rendezvous
(:mod:`tensorvm.runtime.direct.client`, :mod:`tensorvm.runtime.direct.data_plane`).

A step given up (``RunOptions(timeout_in_ms=…)``, an error, Ctrl-C) is cancelled: what has not
started never runs (the kernel runner checks a per-step mark before every op, on every device),
and a timeout names the stateful ops that may already have run. Fetched values never alias
stored state (variables are stored read-only; in process a read-only result is copied). A
session dropped without ``close()`` closes when garbage-collected, as TF's does.
"""
from __future__ import annotations

import gc
import itertools
import logging
import threading
import time
import uuid
import weakref
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from .. import passes
from ..framework.errors import InvalidArgumentError, NotFoundError
from ..framework.graph import (Graph, Operation, Tensor, _default_session_stack, get_default_graph,
                    get_default_session)  # noqa: F401 (get_default_session re-exported)
from ..framework.graph_def import snapshot
from .config_options import GPUOptions, GraphOptions
from .cluster.spec import check_device_filters, resolve_target
from ..vm.kernels.threads import set_intra_op_threads
from ..vm.interpreter import DEAD
from .job_api import current_name as current_job_name

_log = logging.getLogger("tensorvm")


@dataclass
class RunOptions:
    """``trace=True`` (or TF's ``trace_level=RunOptions.FULL_TRACE``, any level above
    ``NO_TRACE``) fills RunMetadata; ``timeout_in_ms`` bounds the step; ``data_plane``
    (``"dask"``, ``"direct"``, ``"auto"``; empty: the session's ``ConfigProto``) forces how
    a distributed step moves tensors between devices. ``durable_url`` (the Dask plane): a
    storage URL every worker shares, under which each floating task that reads no other
    task's output keeps its results, so a worker lost after running one costs a read, not a
    re-run (:mod:`tensorvm.runtime.durable_tasks`; the caller removes the folder).
    ``wait_on_error`` (the Dask plane): a step that fails on a task's error returns only once
    no task of it runs on any worker (TF's ``Session.run`` waits for every executor of the
    step), so whatever the caller cleans up after the error stays clean — a map-reduce job's
    scratch and temporary output. By default the error comes back at once and the step's
    other tasks stop before their next op, in the background."""
    trace: bool = False
    timeout_in_ms: int = 0
    trace_level: int = 0
    data_plane: str = ""
    durable_url: str = ""
    wait_on_error: bool = False

    NO_TRACE = 0
    SOFTWARE_TRACE = 1
    HARDWARE_TRACE = 2
    FULL_TRACE = 3

    @property
    def tracing(self) -> bool:
        """Whether this run records a trace into ``RunMetadata`` (``trace`` or a
        ``trace_level``)."""
        return bool(self.trace) or self.trace_level > RunOptions.NO_TRACE


@dataclass
class RunMetadata:
    """Filled by a traced run: one record per task (device, worker, start, end, ops) and the
    bytes each Send moved. ``step_id`` is set by every run it is passed to, traced or not, as
    the run starts: the id the step's Dask keys carry (``(task name, step id, ...)``), by which
    the scheduler's events name the step's tasks."""
    step_id: str = ""
    step_stats: list = field(default_factory=list)
    sends: list = field(default_factory=list)
    plan: object = None
    transfers: dict = field(default_factory=dict)  # direct data plane: bytes moved, by kind

    def devices(self) -> set:
        """The devices the traced run ran tasks on."""
        return {r["device"] for r in self.step_stats}


@dataclass
class ConfigProto:
    """Session options. ``log_device_placement=True`` logs every op's device (logger
    ``tensorvm``, INFO) each time a plan is compiled, as TF does. ``data_plane`` — how a
    distributed session's steps move tensors between devices: ``"auto"`` (a plan's first run
    as a Dask graph, Send/Recv as task dependencies; later runs one message per device and
    tensors worker to worker), ``"dask"`` or ``"direct"`` always."""
    allow_soft_placement: bool = True
    log_device_placement: bool = False
    # TF 1.x fields (issue 14): ``device_filters`` (["/job:ps", "/job:worker/task:1"]) are the
    # only tasks the session waits for and may place ops on; ``intra_op_parallelism_threads``
    # > 0 is the width of the pool that splits one large kernel (tensorvm.vm.kernels.threads); the rest
    # are accepted and have no effect here, but ``device_count={"GPU": n}``: the GPUs of a
    # LocalCluster the session starts (tensorvm.runtime.cluster.local; default: as many as CuPy sees).
    device_filters: list = field(default_factory=list)
    intra_op_parallelism_threads: int = 0
    inter_op_parallelism_threads: int = 0
    device_count: dict = field(default_factory=dict)
    gpu_options: GPUOptions = field(default_factory=GPUOptions)  # a fresh message each,
    graph_options: GraphOptions = field(default_factory=GraphOptions)  # as in protobuf
    operation_timeout_in_ms: int = 0
    use_per_session_threads: bool = False
    isolate_session_state: bool = False
    data_plane: str = "auto"


# ---- fetch structures ---------------------------------------------------------------------

class _Fetches:
    """Flatten a nested fetch structure into tensors/ops, and rebuild results in its shape."""

    def __init__(self, graph: Graph, fetches):
        self.graph = graph
        self.flat: list = []
        self.structure = self._flatten(fetches)

    def _element(self, x):
        from ..framework.indexed_slices import IndexedSlices
        if isinstance(x, IndexedSlices):
            return ("slices", [self._element(x.values), self._element(x.indices)])
        if hasattr(x, "_as_graph_element") and not isinstance(x, (Tensor, Operation)):
            x = x._as_graph_element()
        if isinstance(x, str):
            try:
                x = self.graph.as_graph_element(x)
            except NotFoundError as e:
                raise NotFoundError(f"fetch {x!r}: {e.message}") from None
        if isinstance(x, (Tensor, Operation)):
            if x.graph is not self.graph:
                where = (x if isinstance(x, Operation) else x.op).location
                raise InvalidArgumentError(f"fetch {x.name!r} (created at {where}) is not an "
                                           "element of this session's graph")
            self.flat.append(x)
            return ("leaf", len(self.flat) - 1)
        raise TypeError(f"fetch argument {x!r} has invalid type {type(x).__name__}; must be a "
                        "tensor, an operation, a name, or a list/tuple/dict of those")

    def _flatten(self, f):
        from ..framework.sparse_tensor import SparseTensor, SparseTensorValue
        if isinstance(f, SparseTensor):  # fetched as a SparseTensorValue of three arrays
            return ("namedtuple", SparseTensorValue, [self._flatten(x) for x in f])
        if isinstance(f, (list, tuple)) and not hasattr(f, "_fields"):
            return (type(f), [self._flatten(x) for x in f])
        if hasattr(f, "_fields") and isinstance(f, tuple):
            return ("namedtuple", type(f), [self._flatten(x) for x in f])
        if isinstance(f, Mapping):
            return ("dict", type(f), [(k, self._flatten(v)) for k, v in f.items()])
        return self._element(f)

    def build(self, values: list):
        def rec(s):
            if s[0] == "leaf":
                return values[s[1]]
            if s[0] == "slices":
                from ..framework.indexed_slices import IndexedSlicesValue
                return IndexedSlicesValue(rec(s[1][0]), rec(s[1][1]))
            if s[0] == "namedtuple":
                return s[1](*[rec(x) for x in s[2]])
            if s[0] == "dict":
                return s[1]((k, rec(v)) for k, v in s[2])
            return s[0](rec(x) for x in s[1])
        return rec(self.structure)


def _whole_numbers(a: np.ndarray) -> bool:
    """Floats that are all whole numbers (``np.ones(n)`` fed as int labels, as TF 1.x
    programs do) convert to an int dtype without loss; the range check follows."""
    with np.errstate(invalid="ignore"):
        return bool(np.all(np.isfinite(a)) and np.all(a == np.trunc(a)))


def _convert_feed(t: Tensor, value) -> np.ndarray:
    dt = t.dtype
    where = f"Tensor {t.name!r} (created at {t.op.location})"
    try:
        src = np.asarray(value, dtype=object) if dt.is_string else np.asarray(value)
    except (ValueError, TypeError, OverflowError) as e:
        raise InvalidArgumentError(
            f"Cannot feed this value to {where}: {e} (a ragged list? every row of a tensor "
            "must have the same length)") from None
    if dt.is_string:
        arr = src
    else:
        if src.dtype.kind in "OSU":
            raise InvalidArgumentError(f"Cannot feed a value of dtype {src.dtype} to {where}, "
                                       f"which has dtype {dt.name}")
        if (src.dtype.kind == "f" and dt.np_dtype.kind in "iub"
                and not _whole_numbers(src)) or \
                (src.dtype.kind == "c" and dt.np_dtype.kind != "c"):
            raise InvalidArgumentError(
                f"Cannot feed a value of dtype {src.dtype} to {where}, which has dtype "
                f"{dt.name} (the conversion would lose data)")
        if src.dtype.kind == "f" and src.dtype.itemsize > dt.np_dtype.itemsize:
            with np.errstate(over="ignore"):  # an overflow is refused just below
                arr = src.astype(dt.np_dtype, copy=False)
        else:
            arr = src.astype(dt.np_dtype, copy=False)
        _check_range(src, arr, dt, where)
    shp = t._shape
    if shp is not None:
        if arr.ndim != len(shp) or any(d is not None and d != a for d, a in zip(shp, arr.shape)):
            pretty = "(" + ", ".join("?" if d is None else str(d) for d in shp) + ")"
            raise InvalidArgumentError(
                f"Cannot feed value of shape {arr.shape} for {where}, which has shape {pretty}")
    return arr


def _check_range(src: np.ndarray, arr: np.ndarray, dt, where: str) -> None:
    """Refuse a feed whose values do not fit the target dtype (int64 300 into int8 would wrap;
    a finite float64 beyond float32's range would become inf)."""
    to = dt.np_dtype
    if src.size == 0 or src.dtype == to:
        return
    if to.kind in "iu" and src.dtype.kind in "iu":
        lo, hi = np.iinfo(to).min, np.iinfo(to).max
        if np.iinfo(src.dtype).min >= lo and np.iinfo(src.dtype).max <= hi:
            return
        mn, mx = src.min(), src.max()
        if mn < lo or mx > hi:
            bad = mn if mn < lo else mx
            raise InvalidArgumentError(
                f"Cannot feed value {bad} to {where}, which has dtype {dt.name}: it is outside "
                f"the range [{lo}, {hi}]")
    elif to.kind == "f" and src.dtype.kind == "f" and src.dtype.itemsize > to.itemsize:
        if not np.isinf(arr).any():
            return
        big = np.isinf(arr) & np.isfinite(src)
        if big.any():
            raise InvalidArgumentError(
                f"Cannot feed value {src[big].flat[0]} to {where}, which has dtype {dt.name}: "
                "it is outside the dtype's range")


def _ref(t: Tensor) -> tuple:
    return (t.op.name, t.value_index)


# ---- the session ----------------------------------------------------------------------------

class Session:
    """Runs graph steps on Dask.

    ``Session()`` — in process, Dask's threaded scheduler; ``Session("local")`` — a
    dask.distributed LocalCluster of worker processes (its dashboard link is logged and is
    ``sess.dashboard_link``);
    ``Session(cluster=tv.train.ClusterSpec({"ps": 1, "worker": 2}))`` — a LocalCluster whose
    workers are named after the tasks; ``Session("tcp://host:8786", cluster=spec)`` — an existing
    scheduler. ``Session(client=dask_client)`` reuses a client.

    A cluster the session starts listens on 127.0.0.1 only (``host="0.0.0.0"`` opens it on
    purpose); ``security=distributed.Security(...)`` goes to the client and to any cluster the
    session starts (then ``tls://``), and is needed to join a ``tls://`` scheduler.

    >>> import tensorvm as tv
    >>> a = tv.constant([1.0, 2.0])
    >>> with tv.Session() as sess:
    ...     sess.run({"double": a * 2, "sum": tv.reduce_sum(a)})
    {'double': array([2., 4.], dtype=float32), 'sum': np.float32(3.0)}
    """

    PLAN_CACHE_SIZE = 128  # compiled plans kept per session (least recently used go first)

    def __init__(self, target: str | None = None, graph: Graph | None = None, config=None, *,
                 cluster=None, client=None, default_device: str | None = None,
                 allow_soft_placement: bool | None = None, verbose: bool = True,
                 security=None, host: str = "127.0.0.1"):
        self.graph = graph or get_default_graph()
        self.target = target
        cfg = config or ConfigProto()
        self.allow_soft_placement = cfg.allow_soft_placement if allow_soft_placement is None \
            else allow_soft_placement
        self.log_device_placement = cfg.log_device_placement
        self.device_filters = list(getattr(cfg, "device_filters", None) or [])
        if getattr(cfg, "intra_op_parallelism_threads", 0):
            set_intra_op_threads(cfg.intra_op_parallelism_threads)
        # TF's targets (a tv.train.Server's, grpc://…) and host:port ClusterSpecs (cluster.py)
        target, cluster, server_device = resolve_target(target, cluster, self.device_filters)
        default_device = default_device or server_device
        self._token = uuid.uuid4().hex[:8]
        self._steps = itertools.count()
        self._cache: OrderedDict = OrderedDict()  # LRU of PLAN_CACHE_SIZE compiled plans
        self._cache_lock = threading.Lock()
        self.plans_compiled = 0  # how many times planning ran (the cache's misses)
        self._closed = False
        self._backend = _make_backend(target, cluster=cluster, client=client,
                                      verbose=verbose, security=security, host=host,
                                      data_plane=cfg.data_plane,
                                      gpus=(getattr(cfg, "device_count", None) or {}).get("GPU"))
        # A session dropped without close() closes on garbage collection (as TF's does): its
        # Dask client, and the cluster it started, do not outlive it.
        self._finalizer = weakref.finalize(self, _close_backend, self._backend)
        self.default_device = default_device or self._backend.default_device
        self._ctx = None

    # ---- context management -------------------------------------------------------------
    def __enter__(self):
        self._ctx = self.graph.as_default()
        self._ctx.__enter__()
        _default_session_stack.stack.append(self)
        return self

    def __exit__(self, *exc):
        if _default_session_stack.stack and _default_session_stack.stack[-1] is self:
            _default_session_stack.stack.pop()
        if self._ctx is not None:
            self._ctx.__exit__(*exc)
            self._ctx = None
        self.close()

    def as_default(self):
        """A context manager making this session the default (for ``Tensor.eval`` and
        ``Operation.run``); unlike ``with sess:``, it does not close the session."""
        sess = self

        class _Ctx:
            def __enter__(self_):
                _default_session_stack.stack.append(sess)
                return sess

            def __exit__(self_, *exc):
                _default_session_stack.stack.remove(sess)
        return _Ctx()

    def close(self) -> None:
        """Close the session: steps still running in other threads end with ``CancelledError``;
        a client and a cluster the session made are closed (state on a shared cluster stays: see
        ``reset``)."""
        if not self._closed:
            self._closed = True
            self._finalizer()

    @property
    def graph_def(self):
        """The session graph's GraphDef (``graph.as_graph_def()``), as TF's
        ``sess.graph_def`` (``tf.train.write_graph(sess.graph_def, ...)``)."""
        return self.graph.as_graph_def()

    @property
    def plans_cached(self) -> int:
        """How many compiled plans the session keeps (at most ``PLAN_CACHE_SIZE``)."""
        return len(self._cache)

    @property
    def dashboard_link(self) -> str | None:
        """The Dask dashboard's address for a distributed session (tensorvm's page is
        ``/tensorvm`` there); ``None`` in process."""
        return getattr(self._backend, "dashboard_link", None)

    @property
    def client(self):
        """The ``distributed.Client`` of a distributed session; ``None`` in process."""
        return getattr(self._backend, "client", None)

    @property
    def devices(self) -> dict:
        """Logical task -> worker (distributed), or the in-process device."""
        return self._backend.describe_devices()

    def list_devices(self) -> list[DeviceAttributes]:
        """The devices steps can run on, as TF's ``Session.list_devices()``: each task's CPU
        and GPUs — in process this process's, distributed those of each mapped task's worker
        (with a ClusterSpec every task is mapped when the session starts).

        >>> [d.name for d in Session().list_devices()][:1]
        ['/job:localhost/replica:0/task:0/device:CPU:0']
        """
        gpus = self._backend.gpus
        tasks = {("localhost", 0): gpus} if isinstance(gpus, int) else dict(gpus)
        found = []
        for (job, task), n in sorted(tasks.items()):
            prefix = f"/job:{job}/replica:0/task:{task}/device:"
            found.append(DeviceAttributes(prefix + "CPU:0", "CPU"))
            found += [DeviceAttributes(f"{prefix}GPU:{i}", "GPU") for i in range(n)]
        return found

    # ---- planning -------------------------------------------------------------------------
    def _resolve_feeds(self, feed_dict) -> dict:
        from ..framework.sparse_tensor import SparseTensor, sparse_feeds
        out: dict = {}
        items = []
        for k, v in (feed_dict or {}).items():  # a SparseTensor: its three tensors are fed
            items.extend(sparse_feeds(k, v) if isinstance(k, SparseTensor) else [(k, v)])
        for k, v in items:
            if hasattr(k, "_as_graph_element") and not isinstance(k, (Tensor, Operation)):
                k = k._as_graph_element()
            if isinstance(k, str):
                k = self.graph.get_tensor_by_name(k)
            if not isinstance(k, Tensor):
                raise TypeError(f"feed_dict key {k!r} must be a tensor or a tensor name")
            if k.graph is not self.graph:
                raise InvalidArgumentError(
                    f"feed_dict key {k.name!r} (created at {k.op.location}) is not an element "
                    "of this session's graph")
            out[k] = _convert_feed(k, v)
        return out

    def _plan_for(self, tensors: list, ops: list, feed_refs: tuple, steps: int = 1):
        """The cached plan; ``steps`` > 1 asks for K unrolled steps (only worth it, and only
        asked for, when one step is several tasks)."""
        version = self.graph.version
        # the backend's placement inventory too: a task remapped to a worker with another GPU
        # count gets its plans placed anew
        key = (version, tuple(_ref(t) for t in tensors),
               tuple(o.name for o in ops), feed_refs, steps, self._backend.placement_version)
        plan = self._cache.get(key)
        if plan is None:
            with self._cache_lock:
                plan = self._cache.get(key)
                if plan is None:
                    plan = self._compile(tensors, ops, feed_refs, steps)
                    # a plan of an older graph version is never asked for again
                    dropped = [self._cache.pop(k) for k in list(self._cache)
                               if k[0] != version]
                    self._cache[key] = plan
                    while len(self._cache) > self.PLAN_CACHE_SIZE:
                        dropped.append(self._cache.popitem(last=False)[1])
                    if dropped:
                        self._backend.release(dropped)
        elif len(self._cache) > 1:
            try:
                self._cache.move_to_end(key)
            except KeyError:  # evicted by another thread meanwhile
                pass
        return plan

    def _compile(self, tensors, ops, feed_refs, steps=1):
        # Planning allocates many small records and frees few: the cyclic garbage collector
        # would spend a third of the time scanning them (measured at 10k-40k ops).
        gc_was_on = gc.isenabled()
        gc.disable()
        try:
            return self._compile_passes(tensors, ops, feed_refs, steps)
        finally:
            if gc_was_on:
                gc.enable()

    def _compile_passes(self, tensors, ops, feed_refs, steps=1):
        self.plans_compiled += 1
        step = passes.Step.start(snapshot(self.graph), [_ref(t) for t in tensors],
                                 [o.name for o in ops], feed_refs)
        backend = self._backend
        plan = passes.run_pipeline(step, passes.pipeline(
            self.default_device, gpu_available=backend.gpu_available, gpus=backend.gpus,
            allow_soft_placement=self.allow_soft_placement, known_tasks=backend.known_tasks,
            steps=steps, graph_tag=_graph_tag(self.graph),
            live_ref_fetches=backend.live_ref_fetches)).plan
        check_device_filters(plan, self.device_filters)
        if self.log_device_placement:
            for task in plan.tasks:
                for op_name in task.ops:
                    _log.info("%s: %s (stage %d, task %s)", op_name, task.device, task.stage,
                              task.name)
        self._backend.prepare(plan)
        return plan

    def plan(self, fetches, feed_dict=None):
        """The compiled plan for these fetches and feed names (devices, tasks, sends)."""
        fm = _Fetches(self.graph, fetches)
        feeds = self._resolve_feeds(feed_dict)
        tensors = [x for x in fm.flat if isinstance(x, Tensor)]
        ops = [x for x in fm.flat if isinstance(x, Operation)]
        return self._plan_for(tensors, ops, tuple(sorted(_ref(t) for t in feeds)))

    # ---- running --------------------------------------------------------------------------
    def run(self, fetches, feed_dict=None, options: RunOptions | None = None,
            run_metadata: RunMetadata | None = None, steps: int = 1):
        """Run one step (or ``steps`` steps) and return the fetched values, shaped like
        ``fetches``: tensors become NumPy arrays, operations ``None``."""
        if self._closed:
            raise RuntimeError("Attempted to use a closed Session.")
        if steps < 1:
            raise InvalidArgumentError(f"steps must be >= 1, got {steps}")
        fm = _Fetches(self.graph, fetches)
        feeds = self._resolve_feeds(feed_dict)
        tensors, ops, slots = [], [], []
        for x in fm.flat:
            if isinstance(x, Tensor):
                slots.append(len(tensors))
                tensors.append(x)
            else:
                slots.append(None)
                ops.append(x)
        feed_refs = tuple(sorted(_ref(t) for t in feeds))
        timeout_ms = getattr(options, "timeout_in_ms", 0) if options is not None else 0
        if timeout_ms:  # mapping a device whose worker left (planning, step) keeps to it
            self._backend.set_step_deadline(time.monotonic() + timeout_ms / 1000.0)
        try:
            plan = self._plan_for(tensors, ops, feed_refs)
            if steps > 1 and not self._backend.runs_steps(plan, options):
                # Across devices, K steps are one unrolled graph (the state chained on each
                # device), so a step's last task on a device and the next step's first one fuse.
                plan = self._plan_for(tensors, ops, feed_refs, steps)
                steps = 1
            by_ref = {_ref(t): v for t, v in feeds.items()}
            feed_values = [by_ref[r] for r in plan.feeds]
            step_id = f"{self._token}.{next(self._steps)}"
            if run_metadata is not None:
                run_metadata.step_id = step_id
            values = self._backend.execute(plan, feed_values, step_id, steps, options,
                                           run_metadata)
            out = [None if s is None else _as_result(values[s]) for s in slots]
            if any(v is DEAD for v in out):  # TF: a fetch on an untaken cond branch
                i = next(i for i, v in enumerate(out) if v is DEAD)
                raise InvalidArgumentError(
                    f"Retval[{i}] does not have value: fetch {fm.flat[i].name!r} is on a branch of "
                    "a tv.cond that was not taken in this step")
            return fm.build(out)
        finally:
            if timeout_ms:
                self._backend.set_step_deadline(None)

    def make_callable(self, fetches, feed_list=None):
        """A function ``f(*feed_values)`` that runs ``fetches`` with ``feed_list`` fed those
        values, in order."""
        feed_list = list(feed_list or [])

        def call(*args):
            return self.run(fetches, dict(zip(feed_list, args)))
        return call

    @staticmethod
    def reset(target: str, containers=None, config=None, *, security=None) -> int:
        """Clear resources (variables, queues) held by the workers of ``target``: on a shared
        cluster they outlive the sessions and programs that made them."""
        from .dask_plane import reset_workers
        return reset_workers(target, containers, security)

    def __repr__(self):
        return f"<tv.Session {self._backend!r}>"


@dataclass(frozen=True)
class DeviceAttributes:
    """One device of :meth:`Session.list_devices` (TF's ``_DeviceAttributes``); memory is not
    tracked (0)."""
    name: str
    device_type: str
    memory_limit_bytes: int = 0
    incarnation: int = 0


def local_resources(sess: Session):
    """White box, for tests and debugging: the state the kernels of an in-process session keep
    (variables, queues, readers), by device — ``local_resources(s).for_device(device)`` is
    that device's resource manager (``names()``, ``lookup(container, name)``). A distributed
    session keeps them on its workers (:func:`tensorvm.vm.interpreter.resources_of` there)."""
    resources = getattr(sess._backend, "resources", None)
    if resources is None:
        raise ValueError(f"{sess!r} keeps its resources on its workers, not in this process")
    return resources


def _make_backend(target=None, *, cluster=None, client=None, verbose=True, security=None,
                  host="127.0.0.1", data_plane="auto", gpus=None):
    """In process with no target, cluster or client; else dask.distributed (imported only
    then). ``gpus`` (``ConfigProto.device_count["GPU"]``): GPUs for a LocalCluster the
    session starts (None: as many as CuPy sees)."""
    if target is None and cluster is None and client is None:
        from .backends import LocalBackend
        return LocalBackend()
    from .dask_plane import DistributedBackend
    return DistributedBackend(target, cluster=cluster, client=client, verbose=verbose,
                              security=security, host=host, data_plane=data_plane,
                              gpus=gpus)


def _graph_tag(graph: Graph) -> str:
    """The graph's part of its Dask keys: the running ``@tv.job``'s name (letters and digits),
    so the dashboard's task groups read the job, else ``g<graph uid>``."""
    name = current_job_name()
    tag = "".join(c for c in name if c.isalnum()) if name else ""
    return tag or f"g{graph.uid}"


def _close_backend(backend) -> None:
    try:
        backend.close()
    except Exception:  # noqa: BLE001 - closing at exit or on garbage collection
        _log.debug("closing a session's backend failed",
                                            exc_info=True)


def _as_result(v):
    if v is DEAD:
        return v
    if isinstance(v, np.ndarray):
        return v[()] if v.ndim == 0 else v  # a 0-d result is a NumPy scalar, as in TF
    if isinstance(v, np.generic):
        return v
    if isinstance(v, (tuple, list)):
        return v
    return np.asarray(v) if v is not None else None


class InteractiveSession(Session):
    """A session that installs itself as the default on construction."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        _default_session_stack.stack.append(self)

    def close(self):
        """Close the session and stop being the default session."""
        if self in _default_session_stack.stack:
            _default_session_stack.stack.remove(self)
        super().close()
