"""The :class:`Worker` of a :class:`~tensorvm.train.ClusterCoordinator`: one task of the job
``worker`` with its replica graph (built once, under ``replica_device_setter``, with the
exactly-once guard around ``model_fn``), its session, its per-worker values and the step token
of the closure it runs; the first argument of every scheduled function."""
from __future__ import annotations

from typing import TYPE_CHECKING

from ..framework.graph import Graph, device
from .device_setter import replica_device_setter
from .remote_value import PerWorkerValues
from .replica_context import ReplicaContext, _run_options

if TYPE_CHECKING:
    from ..runtime.session import Session

__all__ = ["Worker"]


class Worker:
    """One task of the job ``worker`` as the coordinator runs closures on it; the first
    argument of every scheduled function. ``task``, ``device``, ``name`` (its Dask worker's
    name), ``graph`` (its replica graph), ``model`` (what ``model_fn`` returned there),
    ``session`` (its :class:`~tensorvm.Session`), ``ctx`` (the ``ReplicaContext``)."""

    def __init__(self, coord, ctx: ReplicaContext):
        self.ctx, self.task, self.device = ctx, ctx.task, ctx.device
        self.name: str | None = None
        self.graph = Graph()
        self.model = None
        self.once = None  # the exactly-once guard of the graph's updates
        self._coord = coord
        self._setter = replica_device_setter(cluster=ctx.cluster, worker_device=ctx.device)
        self._values: dict = {}  # PerWorkerValues name -> the value built here
        self._local_init = (None, -1)  # (op, local variables it covers)
        self._opts: dict = {}  # fetch names -> RunOptions (the data plane)
        self._token: bytes | None = None
        self._runs = 0
        self.session: Session | None = None
        self.finished = 0  # closures that finished here
        self.lives = 0  # threads started for it (a worker lost and back: 2)
        self.generation = -1  # the coordinator's state generation its local state is of

    def __repr__(self):
        return f"<Worker {self.device} on {self.name!r}>"

    def _build(self, model_fn) -> None:
        with self.graph.as_default(), device(self._setter):
            from .optimizers import get_or_create_global_step
            get_or_create_global_step()
            if model_fn is None:
                return
            if self._coord._exactly_once:
                from .exactly_once import exactly_once
                with exactly_once() as once:
                    self.model = model_fn(self.ctx)
                self.once = once
            else:
                self.model = model_fn(self.ctx)

    def value_of(self, per_worker: PerWorkerValues):
        """This worker's value of ``per_worker`` (built in its graph on first use, its new
        local variables initialised)."""
        if per_worker.name not in self._values:
            from ..ops.state.variables import variables_initializer
            with self.graph.as_default():
                before = set(map(id, _locals(self.graph)))
                with device(self._setter):
                    value = per_worker.fn(self.ctx)
                new = [v for v in _locals(self.graph) if id(v) not in before]
                if new:
                    self.session.run(variables_initializer(new))
            self._values[per_worker.name] = value
        return self._values[per_worker.name]

    def _init_local(self) -> None:
        """Run the graph's local initialisers (its input positions, buffers): on every new
        life of the worker, and after the PS state was restored."""
        from .monitored_session import Scaffold
        n = len(_locals(self.graph))
        op, covered = self._local_init
        if covered != n:
            op = Scaffold.default_local_init_op(self.graph)
            self._local_init = (op, n)
        if op is not None:
            self.session.run(op)
        if self._coord._after_worker_init is not None:
            self._coord._after_worker_init(self)

    def run(self, fetches, feed_dict=None, steps: int = 1, options=None):
        """``Session.run`` of this worker's replica graph, on the direct data plane unless an
        op may block, with the closure's step token fed to the exactly-once guard (each of
        the K steps of ``steps=K`` claims its own, ``token#k``). A string
        fetch names an entry of ``model`` (a dict) or a graph element."""
        fetches = self._named(fetches)
        feeds = dict(feed_dict or {})
        if self.once is not None and self._token is not None:
            feeds[self.once.token] = b"%s/%d" % (self._token, self._runs)
        self._runs += 1
        if options is None:
            options = self._options(fetches)
        return self.session.run(fetches, feeds or None, options, steps=steps)

    def _options(self, fetches):
        """The RunOptions of ``fetches``: the direct data plane unless an op may block (or
        the session's forced plane), worked out once per set of fetches."""
        flat = _flatten(fetches)
        key = tuple(getattr(f, "name", id(f)) for f in flat)
        if key not in self._opts:
            self._opts[key] = _run_options(self._coord._plane, *flat)
        return self._opts[key]

    def _named(self, fetches):
        if isinstance(fetches, str):
            if isinstance(self.model, dict) and fetches in self.model:
                return self.model[fetches]
            return self.graph.as_graph_element(fetches)
        if isinstance(fetches, (list, tuple)) and not hasattr(fetches, "_fields"):
            return type(fetches)(self._named(f) for f in fetches)
        if isinstance(fetches, dict):
            return {k: self._named(v) for k, v in fetches.items()}
        return fetches


def _locals(graph) -> list:
    return list(graph.get_collection("local_variables"))


def _flatten(x) -> list:
    if isinstance(x, dict):
        return [y for v in x.values() for y in _flatten(v)]
    if isinstance(x, (list, tuple)):
        return [y for v in x for y in _flatten(v)]
    return [x]
