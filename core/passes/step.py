"""One value through the step pipeline: a frozen :class:`Step` threaded through every pass.

Each ``*_step`` function wraps one pure pass (``prune``, ``optimize``, ``place``, ``unroll``,
``partition``, ``stage``, ``compile_plan``) as ``Step -> Step``, so the session's pipeline is a
list (:func:`pipeline`) and a test or a benchmark can stop after any pass
(``run_pipeline(step, passes, stop_after="place")``). No pass sees the live graph: the first
``Step`` holds a snapshot of it (``all_nodes``) and everything after is derived from that.

>>> from tensorvm.framework.graph_def import Node
>>> nodes = {"a": Node("a", "Const", attrs={}), "b": Node("b", "Neg", (("a", 0),)),
...          "dead": Node("dead", "Neg", (("a", 0),))}
>>> s = Step.start(nodes, fetches=[("b", 0)])
>>> s = run_pipeline(s, pipeline(default_device="/job:w/task:0", fold=False),
...                  stop_after="place")
>>> list(s.nodes), s.devices["b"]
(['a', 'b'], '/job:w/replica:0/task:0/device:CPU:0')
>>> s.done
'place'
"""
from __future__ import annotations

import dataclasses
import functools
import threading
import weakref
from dataclasses import dataclass
from typing import Callable, Mapping

from ..framework.errors import InvalidArgumentError
from ..framework.graph_def import Node
from .compile import Plan, compile_plan
from .optimize import optimize
from .partition import Partition, partition
from .place import Constraints, colocation_constraints, place_explained
from .prune import prune_ordered, topological
from .ref_fetch import ref_fetches
from .stage import stage
from .unroll import unroll

Ref = tuple  # (node name, output index)


@dataclass(frozen=True)
class Step:
    """The state of planning one step: what each pass reads and what it adds.

    ``all_nodes`` is the whole graph's snapshot (placement resolves colocation groups through
    ops that pruning removed); ``nodes`` the ops the step runs; ``devices``, ``partition``,
    ``stages`` and ``plan`` are filled by ``place``, ``partition``, ``stage`` and ``compile``.
    ``done`` names the last pass applied.
    """
    all_nodes: Mapping[str, Node]
    nodes: Mapping[str, Node]
    fetches: tuple[Ref, ...] = ()
    targets: tuple[str, ...] = ()
    feeds: tuple[Ref, ...] = ()  # in feed order (the plan's feed arguments follow it)
    devices: Mapping[str, str] | None = None
    partition: Partition | None = None
    stages: Mapping[str, int] | None = None
    plan: Plan | None = None
    graph_ops: int = 0  # ops the step needs before optimisation (shown by the plan)
    fallbacks: tuple = ()  # place.Fallback: GPU groups soft placement put on a CPU, and why
    done: str = "start"

    @classmethod
    def start(cls, nodes: Mapping[str, Node], fetches=(), targets=(), feeds=()) -> "Step":
        return cls(nodes, nodes, tuple(fetches), tuple(targets), tuple(feeds))

    @property
    def feed_set(self) -> frozenset:
        return frozenset(self.feeds)

    def replace(self, done: str, **changes) -> "Step":
        return dataclasses.replace(self, done=done, **changes)

    def __repr__(self):
        return (f"<Step after {self.done}: {len(self.nodes)} nodes, {len(self.fetches)} "
                f"fetches, {len(self.targets)} targets, {len(self.feeds)} feeds>")


def prune_step(step: Step) -> Step:
    """Keep what the fetches and targets need (feeds cut the graph), each node after those it
    waits for (a cycle is refused, naming its ops); every placeholder left must be fed."""
    nodes, ordered = prune_ordered(step.all_nodes, list(step.fetches), list(step.targets),
                                   step.feed_set)
    # every later pass runs the nodes in this order; a cycle is refused here, before any run
    if not ordered:
        nodes = topological(nodes, step.feed_set)
    for n in nodes.values():
        if n.type == "Placeholder":
            shp = n.attrs.get("shape")
            shape = "" if shp is None else \
                " and shape [" + ",".join("?" if d is None else str(d) for d in shp) + "]"
            raise InvalidArgumentError(
                f"You must feed a value for placeholder tensor {n.name!r} with dtype "
                f"{n.attrs['dtype'].name}{shape}\n  for op {n.name!r} (Placeholder), created "
                f"at {n.location}")
    return step.replace("prune", nodes=nodes, graph_ops=len(nodes))


def ref_fetch_step(step: Step) -> Step:
    """In process: a variable fetched in a step that updates it reads as the step left it
    (TF's local session; :mod:`tensorvm.passes.ref_fetch`)."""
    nodes, fetches = ref_fetches(step.nodes, list(step.fetches), step.feed_set,
                                 step.all_nodes)
    if nodes is step.nodes:
        return step  # nothing to do: the step stays as prune left it
    return step.replace("ref_fetch", nodes=nodes, fetches=tuple(fetches))


def optimize_step(step: Step, fold: bool = True, cse: bool = True) -> Step:
    nodes, fetches, targets = optimize(step.nodes, list(step.fetches), list(step.targets),
                                       step.feed_set, fold=fold, cse=cse,
                                       pruned=step.done == "prune")
    return step.replace("optimize", nodes=nodes, fetches=tuple(fetches),
                        targets=tuple(targets))


# snapshot id -> (weak reference to the snapshot, its Constraints): an entry lives as long
# as its snapshot (a graph's current version), so no graph is kept alive by this cache
_CONSTRAINTS: dict[int, tuple] = {}
_constraints_lock = threading.Lock()


def graph_constraints(all_nodes: Mapping[str, Node]) -> Constraints:
    """:func:`~tensorvm.passes.place.colocation_constraints` of a graph snapshot, computed
    once per snapshot (the session's snapshot is one object per graph version), so every
    step of a graph version places each colocation group alike and planning a new fetch set
    does not walk the whole graph again. A mapping that cannot be weakly referenced (a plain
    dict built by hand) is not cached."""
    key = id(all_nodes)
    with _constraints_lock:
        hit = _CONSTRAINTS.get(key)
    if hit is not None and hit[0]() is all_nodes:
        return hit[1]
    c = colocation_constraints(all_nodes)
    try:
        ref = weakref.ref(all_nodes, lambda r, k=key: _forget_constraints(k, r))
    except TypeError:
        return c
    with _constraints_lock:
        _CONSTRAINTS[key] = (ref, c)
    return c


def _forget_constraints(key: int, ref) -> None:
    with _constraints_lock:
        if _CONSTRAINTS.get(key, (None,))[0] is ref:
            del _CONSTRAINTS[key]


def place_step(step: Step, default_device: str = "", gpu_available: bool = False,
               allow_soft_placement: bool = True, known_tasks: set | None = None,
               gpus=None) -> Step:
    """Place the step's ops; whether a colocation group may run on a GPU is decided on the
    whole graph (:func:`graph_constraints`), alike for every step of a graph version."""
    devices, fallbacks = place_explained(
        step.nodes, default_device, all_nodes=step.all_nodes, gpu_available=gpu_available,
        allow_soft_placement=allow_soft_placement, known_tasks=known_tasks, gpus=gpus,
        constraints=graph_constraints(step.all_nodes))
    return step.replace("place", devices=devices, fallbacks=fallbacks)


def unroll_step(step: Step, steps: int) -> Step:
    """K chained copies of the placed step (``run(..., steps=K)`` across devices)."""
    if steps <= 1:
        return step.replace("unroll")
    nodes, devices, fetches, targets = unroll(step.nodes, step.devices, list(step.fetches),
                                              list(step.targets), step.feed_set, steps)
    return step.replace("unroll", nodes=nodes, devices=devices, fetches=tuple(fetches),
                        targets=tuple(targets))


def partition_step(step: Step, fetch_to_host: bool = True, host_feeds=frozenset()) -> Step:
    """Cut by device; a fetched GPU tensor is then fetched through its host copy (unless not
    ``fetch_to_host``: a loop body's outputs stay on its device; ``host_feeds``: its feeds
    that are host values all the same)."""
    part = partition(step.nodes, step.devices, step.feed_set, step.fetches, fetch_to_host,
                     host_feeds)
    return step.replace("partition", partition=part, fetches=part.fetches)


def stage_step(step: Step) -> Step:
    return step.replace("stage", stages=stage(step.partition))


def compile_step(step: Step, graph_tag: str = "g") -> Step:
    plan = compile_plan(step.partition, step.stages, list(step.fetches), list(step.feeds),
                        graph_tag=graph_tag, graph_ops=step.graph_ops,
                        fallbacks=step.fallbacks)
    return step.replace("compile", plan=plan)


def pipeline(default_device: str = "", *, gpu_available: bool = False, gpus=None,
             allow_soft_placement: bool = True, known_tasks: set | None = None,
             steps: int = 1, graph_tag: str = "g", fold: bool = True,
             cse: bool = True, fetch_to_host: bool = True,
             host_feeds=frozenset(),
             live_ref_fetches: bool = False) -> list[Callable[[Step], Step]]:
    """The session's passes, in order, with its options bound (``fetch_to_host=False``: a
    function's, whose outputs stay on its device; ``host_feeds``: its feeds that are host
    values; ``live_ref_fetches``: an in-process session's, where a fetched variable reads as
    the step left it)."""
    passes = [prune_step]
    if live_ref_fetches:
        passes.append(ref_fetch_step)
    passes += [functools.partial(optimize_step, fold=fold, cse=cse),
               functools.partial(place_step, default_device=default_device,
                                 gpu_available=gpu_available, gpus=gpus,
                                 allow_soft_placement=allow_soft_placement,
                                 known_tasks=known_tasks)]
    if steps > 1:
        passes.append(functools.partial(unroll_step, steps=steps))
    passes += [functools.partial(partition_step, fetch_to_host=fetch_to_host,
                                 host_feeds=frozenset(host_feeds)), stage_step,
               functools.partial(compile_step, graph_tag=graph_tag)]
    return passes


def _pass_name(p) -> str:
    fn = p.func if isinstance(p, functools.partial) else p
    return fn.__name__.removesuffix("_step")


def run_pipeline(step: Step, passes: list, stop_after: str | None = None) -> Step:
    """Apply ``passes`` in order; ``stop_after`` ("prune", "ref_fetch", "optimize", "place",
    "unroll", "partition", "stage", "compile") returns the Step right after that pass."""
    names = [_pass_name(p) for p in passes]
    if stop_after is not None and stop_after not in names:
        raise ValueError(f"stop_after={stop_after!r} is not one of {names}")
    for p, name in zip(passes, names):
        step = p(step)
        if name == stop_after:
            break
    return step
