"""Prune: keep only the nodes the fetches and targets need; a fed tensor cuts the graph there.

>>> from tensorvm.framework.graph_def import Node
>>> nodes = {"a": Node("a", "Const"), "b": Node("b", "Neg", (("a", 0),)),
...          "c": Node("c", "Neg", (("a", 0),))}
>>> sorted(prune(nodes, [("b", 0)], [], set()))
['a', 'b']
>>> sorted(prune(nodes, [("b", 0)], [], {("a", 0)}))
['b']

:func:`topological` puts the kept nodes in an order every later pass can run them in (each
after its inputs and control inputs), and refuses a cycle, naming its ops:

>>> loop = {"x": Node("x", "NoOp", control_inputs=("y",)), "y": Node("y", "NoOp", (("x", 0),))}
>>> topological(loop)
Traceback (most recent call last):
...
tensorvm.errors.InvalidArgumentError: the graph has a cycle of 2 ops, so no step can run
it: 'x' waits for 'y', which waits for 'x' (...)
"""
from __future__ import annotations

from ..framework.errors import InvalidArgumentError
from ..framework.graph_def import Node


def prune(nodes: dict[str, Node], fetches: list[tuple[str, int]], targets: list[str],
          feeds: set[tuple[str, int]]) -> dict[str, Node]:
    """Return the sub-dict of ``nodes`` reachable backwards from fetches and targets.

    An input edge whose tensor is fed is not followed (the feed replaces its producer); a
    producer whose every needed output is fed is dropped unless it is itself a target.
    """
    return prune_ordered(nodes, fetches, targets, feeds)[0]


def prune_ordered(nodes: dict[str, Node], fetches, targets, feeds) -> tuple[dict, bool]:
    """:func:`prune`, and whether its result is known to have every node after those it
    waits for (then :func:`topological` would return it as it is; False: not known)."""
    fed_ops = {n for n, _ in feeds}
    roots = [n for n, _ in fetches if (n, _) not in feeds] + list(targets)
    if getattr(nodes, "in_order", False):  # a snapshot known in order: so is any part
        found = _needed_sweep(nodes, roots, fed_ops, feeds)
    else:
        found = _needed_in_order(nodes, roots, fed_ops, feeds)
    if found is None:  # not every node after its inputs: a walk from the roots
        need, ordered = _needed(nodes, roots, fed_ops, feeds), False
    else:
        need, ordered = found
    if len(need) == len(nodes):
        # every node is needed (a fetch of the whole graph): so is every control input
        return dict(nodes), ordered
    out = {}
    for k, v in nodes.items():
        if k in need:
            ctl = v.control_inputs
            if ctl and not need.issuperset(ctl):
                v = v.replace(control_inputs=tuple([c for c in ctl if c in need]))
            out[k] = v
    return out, ordered


def _needed_sweep(nodes, roots, fed_ops, feeds) -> tuple[set, bool] | None:
    """:func:`_needed_in_order` of nodes known to be in order: the sweep without the order
    check (None where a needed node is not in ``nodes``)."""
    need = set(roots)
    add = need.add
    swept = 0
    for name, node in reversed(nodes.items()):
        if name in need:
            swept += 1
            for ref in node.inputs:
                p = ref[0]
                if p not in fed_ops or ref not in feeds:
                    add(p)
            for c in node.control_inputs:
                if c not in fed_ops:
                    add(c)
    return (need, True) if swept == len(need) else None


def _needed_in_order(nodes, roots, fed_ops, feeds) -> tuple[set, bool] | None:
    """The needed names by one sweep from the last node back (the common case: creation
    order puts every node after its inputs, so a node's readers come before it in the sweep
    and it is known needed when reached), or None when some needed node was reached before
    a reader asked for it (an edge set by hand to a later op) or is not in ``nodes``; and
    whether every needed node comes after the needed nodes it waits for (as
    :func:`_in_order` finds)."""
    need = set(roots)
    add = need.add
    done: set[str] = set()  # needed nodes the sweep has passed: later in the order
    mark = done.add
    ordered = True
    for name, node in reversed(nodes.items()):
        if name in need:
            mark(name)
            for ref in node.inputs:
                # (a ref is fed only if its op is in fed_ops: the cheaper test first)
                p = ref[0]
                if p not in fed_ops or ref not in feeds:
                    if p in done:  # it waits for a later node
                        ordered = False
                    add(p)
            for c in node.control_inputs:
                if c in done:
                    ordered = False
                # A fed op is replaced by its feed (as TF does): a control edge on it is
                # satisfied.
                if c not in fed_ops:
                    add(c)
    return (need, ordered) if len(done) == len(need) else None


def _needed(nodes, roots, fed_ops, feeds) -> set:
    """The needed names by a walk back from ``roots`` (any order of ``nodes``)."""
    need: set[str] = set()
    stack = list(roots)
    push, pop, add = stack.append, stack.pop, need.add
    while stack:
        name = pop()
        if name in need:
            continue
        add(name)
        node = nodes[name]
        for ref in node.inputs:
            p = ref[0]
            if p not in need and (p not in fed_ops or ref not in feeds):
                push(p)
        for c in node.control_inputs:
            if c not in need and c not in fed_ops:
                push(c)
    return need


def _deps(node: Node, nodes, feeds) -> list[str]:
    """The nodes of ``nodes`` that ``node`` waits for: its inputs' producers (a fed input
    has none) and its control inputs."""
    out = [r[0] for r in node.inputs if r not in feeds and r[0] in nodes]
    out += [c for c in node.control_inputs if c in nodes]
    return out


def _in_order(nodes: dict[str, Node], feeds) -> bool:
    """Whether every node comes after those it waits for (the common case: creation order)."""
    seen: set[str] = set()
    add = seen.add
    for name, node in nodes.items():
        for r in node.inputs:
            if r[0] not in seen and r[0] in nodes and r not in feeds:
                return False
        for c in node.control_inputs:
            if c not in seen and c in nodes:
                return False
        add(name)
    return True


def topological(nodes: dict[str, Node], feeds=frozenset()) -> dict[str, Node]:
    """``nodes`` in an order where every node comes after those it waits for (the passes
    after pruning rely on it): the same dict when the graph's creation order already is one,
    else re-ordered (a control input set by hand on an op made earlier, as TF sorts its
    graph). A cycle raises ``InvalidArgumentError`` naming its ops, before anything runs
    (TF: "Graph is invalid, contains a cycle")."""
    if _in_order(nodes, feeds):
        return nodes
    state: dict[str, int] = {}  # 1: on the walk's path, 2: placed
    order: list[str] = []
    for root in nodes:
        if root in state:
            continue
        state[root] = 1
        path = [(root, iter(_deps(nodes[root], nodes, feeds)))]
        while path:
            name, pending = path[-1]
            for d in pending:
                s = state.get(d)
                if s is None:
                    state[d] = 1
                    path.append((d, iter(_deps(nodes[d], nodes, feeds))))
                    break
                if s == 1:
                    names = [n for n, _ in path]
                    raise _cycle_error(nodes, names[names.index(d):])
            else:
                path.pop()
                state[name] = 2
                order.append(name)
    return {k: nodes[k] for k in order}


def _cycle_error(nodes, cycle: list[str]) -> InvalidArgumentError:
    chain = f"{cycle[0]!r} waits for " + ", which waits for ".join(
        repr(n) for n in cycle[1:] + cycle[:1])
    where = "; ".join(f"{n!r} created at {nodes[n].location}" for n in cycle[:3]
                      if nodes[n].location)
    return InvalidArgumentError(
        f"the graph has a cycle of {len(cycle)} ops, so no step can run it: {chain} (an op "
        "waits for its inputs and control inputs; a cycle is made by an edge set by hand, "
        f"e.g. op.control_inputs = ...){'; ' + where if where else ''}")
