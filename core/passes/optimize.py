"""Optimise: constant folding and common-subexpression elimination over *stateless* ops, then
dead nodes dropped. A Variable read, a queue op, a random op (anything ``stateful``) is never
folded or merged, nor is anything with control inputs or a fed input.

>>> import numpy as np
>>> from tensorvm.graph_def import Node
>>> import tensorvm as tv
>>> c = {"value": np.float32(2), "dtype": tv.float32}
>>> nodes = {"a": Node("a", "Const", attrs=c), "b": Node("b", "Neg", (("a", 0),)),
...          "c": Node("c", "Neg", (("a", 0),)), "d": Node("d", "Add", (("b", 0), ("c", 0)))}
>>> out, fetches, _ = optimize(nodes, [("d", 0)], [], set())
>>> [(n.type, float(n.attrs["value"])) for n in out.values()]
[('Const', -4.0)]
"""
from __future__ import annotations

import dataclasses

import numpy as np

from ..graph_def import Node
from ..registry import registry

FOLD_LIMIT_BYTES = 10 * 2 ** 20


def _attr_key(v):
    if isinstance(v, np.ndarray):
        if v.nbytes > 4096 or v.dtype == object:
            return ("id", id(v))
        return ("nd", v.dtype.str, v.shape, v.tobytes())
    if isinstance(v, dict):
        return tuple(sorted((k, _attr_key(x)) for k, x in v.items()))
    if isinstance(v, (list, tuple)):
        return tuple(_attr_key(x) for x in v)
    if callable(v):
        return ("id", id(v))
    try:
        hash(v)
        return v
    except TypeError:
        return ("id", id(v))


def _nbytes(v):
    if isinstance(v, tuple):
        return sum(_nbytes(x) for x in v)
    return getattr(v, "nbytes", 0)


def _foldable(node: Node, nodes, feeds) -> bool:
    d = registry.get(node.type)
    if d is None or node.stateful or not d.foldable or d.needs_ctx or node.type == "Const":
        return False
    if node.control_inputs or "CPU" not in d.kernels or not node.inputs:
        return False
    return all(ref not in feeds and nodes[ref[0]].type == "Const" for ref in node.inputs)


def _const_value(node: Node, index: int):
    v = node.attrs["value"]
    return v[index] if node.num_outputs > 1 else v


def optimize(nodes: dict[str, Node], fetches: list, targets: list, feeds: set,
             fold: bool = True, cse: bool = True):
    """Return ``(nodes, fetches, targets)`` after folding, CSE and dead-node removal."""
    out: dict[str, Node] = {}
    rename: dict[str, str] = {}
    seen: dict[tuple, str] = {}

    def ref(r):
        return r if r in feeds else (rename.get(r[0], r[0]), r[1])

    for name, node in nodes.items():
        node = dataclasses.replace(
            node, inputs=tuple(ref(r) for r in node.inputs),
            control_inputs=tuple(dict.fromkeys(rename.get(c, c) for c in node.control_inputs)))
        if fold and _foldable(node, out, feeds):
            kernel = registry[node.type].kernels["CPU"]
            try:
                value = kernel(*[_const_value(out[n], i) for n, i in node.inputs],
                               **node.attrs)
            except Exception:  # noqa: BLE001 - leave it to fail at run time, with context
                value = None
            if value is not None and _nbytes(value) <= FOLD_LIMIT_BYTES:
                if node.num_outputs > 1:
                    value = tuple(np.asarray(v) for v in value)
                else:
                    value = np.asarray(value)
                node = dataclasses.replace(
                    node, type="Const", inputs=(),
                    attrs={"value": value, "dtype": node.out_dtypes[0] if node.out_dtypes
                           else None}, stateful=False)
        if cse and not node.stateful and registry[node.type].foldable:
            key = (node.type, node.inputs, node.control_inputs, node.device, node.colocation,
                   node.num_outputs, _attr_key(dict(node.attrs)))
            if key in seen:
                rename[name] = seen[key]
                continue
            seen[key] = name
        out[name] = node

    fetches = [ref(r) for r in fetches]
    targets = [rename.get(t, t) for t in targets]
    from .prune import prune
    return prune(out, fetches, targets, feeds), fetches, targets
