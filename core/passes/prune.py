"""Prune: keep only the nodes the fetches and targets need; a fed tensor cuts the graph there.

>>> from tensorvm.graph_def import Node
>>> nodes = {"a": Node("a", "Const"), "b": Node("b", "Neg", (("a", 0),)),
...          "c": Node("c", "Neg", (("a", 0),))}
>>> sorted(prune(nodes, [("b", 0)], [], set()))
['a', 'b']
>>> sorted(prune(nodes, [("b", 0)], [], {("a", 0)}))
['b']
"""
from __future__ import annotations

import dataclasses

from ..graph_def import Node


def prune(nodes: dict[str, Node], fetches: list[tuple[str, int]], targets: list[str],
          feeds: set[tuple[str, int]]) -> dict[str, Node]:
    """Return the sub-dict of ``nodes`` reachable backwards from fetches and targets.

    An input edge whose tensor is fed is not followed (the feed replaces its producer); a
    producer whose every needed output is fed is dropped unless it is itself a target.
    """
    fed_ops = {n for n, _ in feeds}
    need: set[str] = set()
    stack = [n for n, _ in fetches if (n, _) not in feeds] + list(targets)
    while stack:
        name = stack.pop()
        if name in need:
            continue
        need.add(name)
        node = nodes[name]
        for ref in node.inputs:
            if ref not in feeds and ref[0] not in need:
                stack.append(ref[0])
        for c in node.control_inputs:
            # A fed op is replaced by its feed (as TF does): a control edge on it is satisfied.
            if c not in need and c not in fed_ops:
                stack.append(c)
    out = {}
    for k, v in nodes.items():
        if k in need:
            if any(c not in need for c in v.control_inputs):
                v = dataclasses.replace(v, control_inputs=tuple(
                    c for c in v.control_inputs if c in need))
            out[k] = v
    return out
