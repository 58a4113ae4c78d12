"""Place: give every node a full device ``/job:J/replica:R/task:T/device:TYPE:N``.

Order of precedence (TF's placer): colocation groups first — a node that reads or writes a
resource carries the resource's group, ``tv.colocate_with`` and gradient ops share their
forward op's group (union-find); the group takes the device of the op that names it (the
Variable), else the merge of its members' explicit devices; then the session default fills the
unset fields. A GPU group needs a GPU kernel for every member (or a CPU-only mark stops it)
and a GPU of that index on its task (``gpus``: how many each task's worker has, from its Dask
resource ``GPU``); failing either, soft placement puts the group on the task's CPU and
:func:`place_explained` says why (the plan prints it), else placement fails naming the op
and the reason. The result is deterministic: the same nodes give the same placement.

Floating devices (``/job:J/task:*``, or ``task:*<group>`` for a named group of ops that is
to be one task): a group asking for one keeps it when it touches no resource, runs on a CPU
and holds only stateless (or idempotent) ops; Dask then schedules it on any worker. Anything
else asking for one is pinned as a bare ``/job:J`` is (the default's task).

Whether a group can run on a GPU is a fact of the whole graph, not of one step's pruned part
(TF's placer runs once on the whole graph): :func:`colocation_constraints` finds, once per
graph version, each group's CPU-only member anywhere in the graph, and ``place`` takes it as
``constraints``, so a group is on the same device in every step whatever the step prunes. An op
whose function attributes (a ``While``'s cond and body) update or read a resource joins that
resource's group: the body runs on the loop op's device, so the loop goes where its state is.

>>> from tensorvm.framework.graph_def import Node
>>> nodes = {"v": Node("v", "VariableV2", device="/job:ps/task:0", colocation="v"),
...          "u": Node("u", "AssignAdd", (("g", 0),), device="/job:worker", colocation="v"),
...          "g": Node("g", "Neg", device="")}
>>> place(nodes, "/job:worker/task:0")["u"]
'/job:ps/replica:0/task:0/device:CPU:0'
"""
from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, replace

import numpy as np

from ..framework.device_spec import DeviceSpec
from ..framework.dtypes import DType
from ..framework.errors import InvalidArgumentError
from ..framework.graph_def import Node
from ..vm.kernels.array_api import string_tensor_reason
from ..framework.op_registry import registry
from .prune import prune


class _UnionFind:
    def __init__(self):
        self.parent: dict[str, str] = {}

    def find(self, x: str) -> str:
        p = self.parent.setdefault(x, x)
        while p != self.parent[p]:
            self.parent[p] = self.parent[self.parent[p]]
            p = self.parent[p]
        self.parent[x] = p
        return p

    def union(self, a: str, b: str) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[max(ra, rb)] = min(ra, rb)


@dataclass(frozen=True)
class Fallback:
    """A group of ops that asked for a GPU and was placed on the CPU (soft placement)."""
    ops: tuple  # the group's op names
    requested: str
    placed: str
    reason: str

    def __str__(self):
        more = f" (+{len(self.ops) - 1} colocated)" if len(self.ops) > 1 else ""
        return (f"soft placement: {self.ops[0]!r}{more} asked for {self.requested}, runs on "
                f"{self.placed}: {self.reason}")


@dataclass(frozen=True)
class Constraints:
    """Whole-graph facts about colocation groups, computed once per graph version by
    :func:`colocation_constraints` and handed to every step's :func:`place`.

    ``group``: node name or ``"@key"`` (a colocation key) -> the id of its group in the whole
    graph; ``cpu_only``: group id -> ``(op name, op type, reason)`` of the group's first member
    (in graph order) with no GPU kernel; ``touches``: node name -> the colocation keys of the
    resources its function attributes use (a ``While`` whose body updates a variable).
    """
    group: Mapping[str, str]
    cpu_only: Mapping[str, tuple]
    touches: Mapping[str, tuple]


def _funcs(node: Node):
    """The traced functions among ``node``'s attributes (a loop's cond and body)."""
    for v in (node.attrs or {}).values():
        if hasattr(v, "owners") and hasattr(v, "nodes") and hasattr(v, "fetches"):
            yield v


def _touched_keys(node: Node, _depth: int = 0) -> tuple:
    """Colocation keys of the outside resources the ops of ``node``'s functions use, nested
    functions included: only the ops a function's outputs reach (those its program runs)."""
    keys: list[str] = []
    for f in _funcs(node):
        try:
            used = prune(f.nodes, list(f.fetches), [], set(f.feeds))
        except KeyError:  # a malformed function: its nodes miss an input
            used = f.nodes
        for n in used.values():
            if n.colocation and n.colocation in f.owners and n.colocation not in keys:
                keys.append(n.colocation)
            if _depth < 16:
                for k in _touched_keys(n, _depth + 1):
                    if k not in keys:
                        keys.append(k)
    return tuple(keys)


def _no_gpu_kernel(node: Node, _depth: int = 0):
    """``(op name, op type, reason)`` when ``node`` cannot run on a GPU, else None: its type
    has no GPU kernel, it takes or makes a string tensor (host memory) and is no pass-through,
    or one of its functions (a loop's cond or body, which run on the loop's device) runs an op
    that cannot."""
    d = registry.get(node.type)
    if d is None:
        return None
    if "GPU" not in d.kernels:
        return node.name, d.type, f"no GPU kernel for {d.type}" + (f": {d.cpu_only}"
                                                                   if d.cpu_only else "")
    why = string_tensor_reason(d.type, node.in_dtypes, node.out_dtypes)
    if why is not None:
        return node.name, d.type, why
    if _depth < 16:
        for f in _funcs(node):
            for n in f.nodes.values():
                bad = _no_gpu_kernel(n, _depth + 1)
                if bad is not None:
                    return node.name, d.type, (f"its function {f.frame!r} runs op {bad[0]!r} "
                                               f"({bad[1]}): {bad[2]}")
    return None


# attr value types that are never a traced function (no ``owners``): skipped without a
# hasattr, which costs an AttributeError each (a graph's every Const holds two)
_PLAIN = frozenset({np.ndarray, DType, str, bytes, int, float, bool, type(None)})


def colocation_constraints(all_nodes: Mapping[str, Node]) -> Constraints:
    """The whole graph's colocation groups and each group's CPU-only member (see
    :class:`Constraints`); pure, one pass over the graph. An op in no group is left out (it is
    a group of its own in every step, checked there).

    >>> from tensorvm.framework.graph_def import Node
    >>> c = colocation_constraints({
    ...     "v": Node("v", "VariableV2", colocation="v"),
    ...     "s": Node("s", "AsString", (("v", 0),), colocation="v"),
    ...     "n": Node("n", "Neg", (("v", 0),))})
    >>> c.cpu_only[c.group["v"]][:2], "n" in c.group
    (('s', 'AsString'), False)
    """
    uf = _UnionFind()
    touches: dict[str, tuple] = {}
    grouped: list[Node] = []
    for name, n in all_nodes.items():
        keys = ()
        if n.attrs:
            for v in n.attrs.values():
                if type(v) not in _PLAIN and hasattr(v, "owners"):
                    keys = _touched_keys(n)
                    break
        if n.colocation or keys:
            grouped.append(n)
            if n.colocation:
                uf.union(name, "@" + n.colocation)
            if keys:
                touches[name] = keys
                for k in keys:
                    uf.union(name, "@" + k)
    for key in [x for x in uf.parent if x[0] == "@"]:  # the op a group is named after
        owner = all_nodes.get(key[1:])
        if owner is not None:
            if owner.name not in uf.parent:
                grouped.append(owner)
            uf.union(owner.name, key)
    cpu_only: dict[str, tuple] = {}
    for n in grouped:
        r = uf.find(n.name)
        if r not in cpu_only:
            bad = _no_gpu_kernel(n)
            if bad is not None:
                cpu_only[r] = bad
    group = {x: uf.find(x) for x in list(uf.parent)}
    return Constraints(group, cpu_only, touches)


def place(nodes: dict[str, Node], default_device: str = "", *, all_nodes=None,
          gpu_available: bool = False, allow_soft_placement: bool = True,
          known_tasks: set | None = None, gpus=None,
          constraints: Constraints | None = None) -> dict[str, str]:
    """Return ``{node name: full device string}`` for ``nodes``.

    ``all_nodes`` (the unpruned graph) resolves colocation roots that pruning removed;
    ``known_tasks`` (a set of ``(job, task)``) rejects devices naming tasks outside the cluster.
    ``gpus`` says how many GPUs each task has: an int (every task alike), a mapping
    ``{(job, task): n}`` (tasks not in it have none), or None (``gpu_available`` decides:
    any index on any task, or no GPU at all). ``constraints`` (from
    :func:`colocation_constraints` of ``all_nodes``; computed here when not given) says which
    groups hold a CPU-only op anywhere in the graph: such a group is never put on a GPU.
    """
    return place_explained(nodes, default_device, all_nodes=all_nodes,
                           gpu_available=gpu_available,
                           allow_soft_placement=allow_soft_placement, known_tasks=known_tasks,
                           gpus=gpus, constraints=constraints)[0]


def place_explained(nodes: dict[str, Node], default_device: str = "", *, all_nodes=None,
                    gpu_available: bool = False, allow_soft_placement: bool = True,
                    known_tasks: set | None = None, gpus=None,
                    constraints: Constraints | None = None
                    ) -> tuple[dict[str, str], tuple[Fallback, ...]]:
    """:func:`place`, and the :class:`Fallback` of every group soft placement moved to CPU.

    >>> from tensorvm.framework.graph_def import Node
    >>> nodes = {"a": Node("a", "Const", device="/gpu:0")}
    >>> devs, why = place_explained(nodes, "/job:w/task:0", gpus={("w", 0): 0})
    >>> devs["a"], why[0].reason
    ('/job:w/replica:0/task:0/device:CPU:0', 'no GPU device: /job:w/replica:0/task:0 has none')
    """
    notes: list[Fallback] = []
    all_nodes = all_nodes or nodes
    if constraints is None:
        constraints = colocation_constraints(all_nodes)
    default = DeviceSpec.parse(default_device)
    uf = _UnionFind()  # ops in a colocation group; every other op is a group of its own
    touches = constraints.touches
    for name, n in nodes.items():
        if n.colocation:
            uf.union(name, "@" + n.colocation)
        if touches:
            for k in touches.get(name, ()):
                uf.union(name, "@" + k)
    for key in [x for x in uf.parent if x[0] == "@"]:  # the op a group is named after
        if key[1:] in nodes:
            uf.union(key[1:], key)

    grouped = uf.parent
    groups: dict[str, list[str]] = {}  # a colocation group's root -> its members, in order
    if grouped:
        for name in nodes:
            if name in grouped:
                groups.setdefault(uf.find(name), []).append(name)
    # colocation key -> its members in the whole graph (built on demand: a walk of it)
    by_coloc = functools.cache(lambda: _members_by_colocation(all_nodes))
    out: dict[str, str] = {}
    lone_cpu: dict[str, str] = {}  # an op of its own's device string -> its CPU device
    # Groups in graph order (the order of soft placement's notes and of errors).
    for name, n in nodes.items():
        if name not in grouped:
            # an op of its own (not a key of the union-find, so never a group's root): one
            # placement per distinct device string where nothing about the op can change it
            dev = lone_cpu.get(n.device)
            if dev is None:
                dev, dtype = _place_group([name], nodes, all_nodes, touches, constraints,
                                          default, gpu_available, allow_soft_placement,
                                          known_tasks, gpus, notes, by_coloc)
                if dtype == "CPU" and "task:*" not in n.device:
                    # placed alike whatever the op (a floating ask depends on the op's state)
                    lone_cpu[n.device] = dev
            out[name] = dev
            continue
        if name in out:
            continue
        members = groups[uf.find(name)]
        dev, _ = _place_group(members, nodes, all_nodes, touches, constraints, default,
                              gpu_available, allow_soft_placement, known_tasks, gpus, notes,
                              by_coloc)
        for m in members:
            out[m] = dev
    if groups:
        out = {name: out[name] for name in nodes}
    return out, tuple(notes)


def _place_group(members, nodes, all_nodes, touches, constraints, default, gpu_available,
                 allow_soft_placement, known_tasks, gpus, notes, by_coloc) -> tuple[str, str]:
    """The device string of one group (``members``; an op of its own is a group of one),
    and the device type it asked for before any soft placement."""
    colocs = {nodes[m].colocation for m in members if nodes[m].colocation}
    colocs.update(k for m in members for k in touches.get(m, ()))
    spec = None
    for c in sorted(colocs):
        owner = all_nodes.get(c)
        if owner is not None and owner.device:
            spec = DeviceSpec.parse(owner.device)
            _check_members(spec, owner, members, nodes, allow_soft_placement)
            break
    if spec is None:
        # No owner device: merge the explicit devices of the group's members in the
        # whole graph, not only this step's, so every step places the group alike.
        group = [nodes[m] for m in members]
        if colocs:
            group = list({n.name: n for c in sorted(colocs)
                          for n in by_coloc().get(c, ())}.values()) + group
        spec = DeviceSpec()
        for n in group:
            s = DeviceSpec.parse(n.device)
            if s.conflicts_with(spec):
                if not allow_soft_placement:
                    raise InvalidArgumentError(
                        f"Cannot colocate nodes {group[0].name!r} and {n.name!r}: "
                        f"conflicting devices {spec.to_string()} and {s.to_string()} "
                        f"(created at {n.location})")
                continue
            spec = s.merged_over(spec)
    if spec.floating and not _floats(members, nodes, colocs, spec):
        spec = replace(spec, task=None)  # pinned as a bare /job:J is: the default task
    full = spec.merged_over(default).with_defaults()
    checked = _check_device(full, members, nodes, gpu_available, allow_soft_placement,
                            known_tasks, gpus, notes,
                            _whole_group_cpu_only(members, colocs, constraints))
    return checked.to_string(), full.device_type


def _floats(members, nodes, colocs, spec: DeviceSpec) -> bool:
    """Whether a group asking for a floating device (``/job:J/task:*``) floats: it touches no
    resource (no colocation), runs on a CPU, and every member is stateless or idempotent (the
    op table says; Dask may run a floating task twice). Else it is pinned as today."""
    if colocs or spec.device_type == "GPU":
        return False
    for m in members:
        n = nodes[m]
        if n.stateful and not registry[n.type].idempotent:
            return False
    return True


def _check_members(spec: DeviceSpec, owner: Node, members, nodes, soft: bool) -> None:
    """A member asking for a device other than its group owner's: soft placement lets the
    owner win, else it is an error (TF: "Cannot colocate nodes")."""
    if soft:
        return
    for m in members:
        s = DeviceSpec.parse(nodes[m].device)
        if s.conflicts_with(spec):
            raise InvalidArgumentError(
                f"Cannot colocate nodes {m!r} and {owner.name!r}: {m!r} asks for device "
                f"{s.to_string()} but {owner.name!r} is on {spec.to_string()} (created at "
                f"{nodes[m].location}); set allow_soft_placement=True to let the group win")


def _members_by_colocation(all_nodes) -> dict[str, list[Node]]:
    out: dict[str, list[Node]] = {}
    for n in all_nodes.values():
        if n.colocation:
            out.setdefault(n.colocation, []).append(n)
    for c, ms in out.items():
        owner = all_nodes.get(c)
        if owner is not None and owner.colocation != c:
            ms.insert(0, owner)
    return out


def gpus_on(gpus, gpu_available: bool, job: str, task: int) -> int | None:
    """How many GPUs task ``(job, task)`` has; None means "any number" (``gpus`` unknown and
    ``gpu_available``)."""
    if gpus is None:
        return None if gpu_available else 0
    if isinstance(gpus, int):
        return gpus
    if isinstance(gpus, Mapping):
        return int(gpus.get((job, task), 0))
    raise TypeError(f"gpus must be None, an int or a mapping {{(job, task): n}}, got {gpus!r}")


def _whole_group_cpu_only(members, colocs, constraints: Constraints):
    """The CPU-only op (name, type, reason) of the whole-graph groups the step's group is part
    of, or None."""
    if not constraints.cpu_only:
        return None
    group, cpu_only = constraints.group, constraints.cpu_only
    seen = set()
    for x in [*members, *("@" + c for c in sorted(colocs))]:
        r = group.get(x)
        if r is not None and r not in seen:
            seen.add(r)
            bad = cpu_only.get(r)
            if bad is not None:
                return bad
    return None


def _no_gpu_reason(spec: DeviceSpec, members, nodes, gpu_available, gpus, elsewhere=None):
    """Why the group cannot run on ``spec`` (a GPU device), as (op name, reason), or None.
    ``elsewhere``: the CPU-only member of its whole-graph group (maybe not in this step)."""
    for m in members:
        bad = _no_gpu_kernel(nodes[m])
        if bad is not None:
            return m, bad[2]
    if elsewhere is not None:
        name, op_type, why = elsewhere
        return members[0], (f"colocated with CPU-only op {name!r} ({op_type}) elsewhere in "
                            f"the graph: {why}")
    have = gpus_on(gpus, gpu_available, spec.job, spec.task)
    task = f"/job:{spec.job}/replica:{spec.replica}/task:{spec.task}"
    if have == 0:
        return members[0], f"no GPU device: {task} has none"
    if have is not None and (spec.device_index or 0) >= have:
        return members[0], (f"no GPU device: {task} has {have} GPU{'s' if have > 1 else ''} "
                            f"(GPU:0..{have - 1})")
    return None


def _check_device(spec: DeviceSpec, members, nodes, gpu_available, soft, known_tasks,
                  gpus=None, notes=None, elsewhere=None):
    if spec.floating:
        if known_tasks is not None and spec.job not in {j for j, _ in known_tasks}:
            n = nodes[members[0]]
            raise InvalidArgumentError(
                f"Cannot assign a device for operation {n.name!r}: device {spec.to_string()} "
                f"names a job that is not in the cluster ({sorted(known_tasks)}); created at "
                f"{n.location}")
        return spec  # a CPU of any task of the job (see _floats)
    if known_tasks is not None and (spec.job, spec.task) not in known_tasks:
        n = nodes[members[0]]
        raise InvalidArgumentError(
            f"Cannot assign a device for operation {n.name!r}: device {spec.to_string()} names "
            f"a task that is not in the cluster ({sorted(known_tasks)}); created at "
            f"{n.location}")
    if spec.device_type == "GPU":
        bad = _no_gpu_reason(spec, members, nodes, gpu_available, gpus, elsewhere)
        if bad is not None:
            name, why = bad
            if soft:
                cpu = DeviceSpec(spec.job, spec.replica, spec.task, "CPU", 0)
                if notes is not None:
                    notes.append(Fallback((name,) + tuple(m for m in members if m != name),
                                          spec.to_string(), cpu.to_string(), why))
                return cpu
            n = nodes[name]
            raise InvalidArgumentError(
                f"Cannot assign a device for operation {n.name!r} ({n.type}): {why}; it asks "
                f"for {spec.to_string()} (created at {n.location}); set "
                "allow_soft_placement=True to run it on the CPU")
    return spec
