"""Optimise: constant folding and common-subexpression elimination over *stateless* ops, then
dead nodes dropped. A Variable read, a queue op, a random op (anything ``stateful``) is never
folded or merged, nor is anything with control inputs or a fed input.

>>> import numpy as np
>>> from tensorvm.framework.graph_def import Node
>>> import tensorvm as tv
>>> c = {"value": np.float32(2), "dtype": tv.float32}
>>> nodes = {"a": Node("a", "Const", attrs=c), "b": Node("b", "Neg", (("a", 0),)),
...          "c": Node("c", "Neg", (("a", 0),)), "d": Node("d", "Add", (("b", 0), ("c", 0)))}
>>> out, fetches, _ = optimize(nodes, [("d", 0)], [], set())
>>> [(n.type, float(n.attrs["value"])) for n in out.values()]
[('Const', -4.0)]
"""
from __future__ import annotations

import math

import numpy as np

from ..framework.dtypes import DType
from ..framework.graph_def import Node
from ..framework.op_registry import registry

FOLD_LIMIT_BYTES = 10 * 2 ** 20


def _attr_key(v):
    if isinstance(v, np.ndarray):
        if v.nbytes > 4096 or v.dtype.kind == "O":  # (kind "O": the object dtype)
            return ("id", id(v))
        return ("nd", v.dtype.str, v.shape, v.tobytes())
    if isinstance(v, dict):
        return tuple(sorted([(k, _attr_key(x)) for k, x in v.items()]))
    if isinstance(v, (list, tuple)):
        return tuple(_attr_key(x) for x in v)
    if callable(v):
        return ("id", id(v))
    try:
        hash(v)
        return v
    except TypeError:
        return ("id", id(v))


def _attrs_key(attrs: dict) -> tuple:
    """``_attr_key`` of an op's attrs (a dict of str keys; the common small values inline)."""
    if len(attrs) == 2:  # a Const's (value, dtype): one per constant, so many
        v, dt = attrs.get("value"), attrs.get("dtype")
        if v.__class__ is np.ndarray and dt.__class__ is DType and v.nbytes <= 4096 \
                and (vdt := v.dtype).kind != "O":
            return (("dtype", dt), ("value", ("nd", vdt.str, v.shape, v.tobytes())))
    items = []
    for k, v in attrs.items():
        cls = v.__class__
        if cls is np.ndarray and v.nbytes <= 4096 and (dt := v.dtype).kind != "O":
            items.append((k, ("nd", dt.str, v.shape, v.tobytes())))
        elif cls is str or cls is int or cls is float or cls is bool or v is None or \
                cls is DType:  # (a DType is hashable and never callable)
            items.append((k, v))
        else:
            items.append((k, _attr_key(v)))
    items.sort()
    return tuple(items)


def _nbytes(v):
    if isinstance(v, tuple):
        return sum(_nbytes(x) for x in v)
    return getattr(v, "nbytes", 0)


def _known(shape) -> bool:
    return shape is not None and None not in shape


def _fold_inputs(node: Node, nodes, feeds, d):
    """The input values for folding ``node``, or None if it cannot be folded.

    An input is known when its producer is a Const, or — for an input the op reads only the
    shape of (``shape_only``: OnesLike, Shape, BroadcastLike's target …) — when its static
    shape is fully defined (a zero-stride dummy of that shape stands in for it). ``d`` is
    the node's OpDef.
    """
    if node.stateful or not d.foldable or d.needs_ctx or node.type == "Const":
        return None
    if node.control_inputs or "CPU" not in d.kernels or not node.inputs:
        return None
    vals = []
    for i, ref in enumerate(node.inputs):
        if i in d.shape_only and i < len(node.in_shapes) and _known(node.in_shapes[i]):
            dt = node.in_dtypes[i].np_dtype
            vals.append(np.broadcast_to(np.zeros((), dt), node.in_shapes[i]))
        elif ref not in feeds and ref[0] in nodes and nodes[ref[0]].type == "Const" \
                and not nodes[ref[0]].control_inputs:  # a branch's constant waits on its pivot
            vals.append(_const_value(nodes[ref[0]], ref[1]))
        else:
            return None
    if not _small(node):  # a constant that big is cheaper to compute than to ship
        return None
    return vals


def _small(node: Node) -> bool:
    """Whether the node's outputs are statically known to fit FOLD_LIMIT_BYTES."""
    if not node.out_shapes:
        return True
    total = 0
    for shape, dt in zip(node.out_shapes, node.out_dtypes):
        if not _known(shape):
            return False
        total += math.prod(shape) * (dt.np_dtype.itemsize if dt else 8)
    return total <= FOLD_LIMIT_BYTES


def _const_value(node: Node, index: int):
    v = node.attrs["value"]
    return v[index] if node.num_outputs > 1 else v


def optimize(nodes: dict[str, Node], fetches: list, targets: list, feeds: set,
             fold: bool = True, cse: bool = True, pruned: bool = False):
    """Return ``(nodes, fetches, targets)`` after folding, CSE, identity removal and
    dead-node removal.

    ``pruned``: ``nodes`` is already :func:`~tensorvm.passes.prune`'s output for these roots
    (as in the session's pipeline). Then only folding can leave a node dead (a merged node's
    inputs are its survivor's, an identity's input is read by its readers), so the graph is
    pruned again only when something was folded — a walk of the whole graph saved.
    """
    out: dict[str, Node] = {}
    folded = False
    alias: dict[tuple, tuple] = {}  # ref -> the ref that replaces it
    alias_op: dict[str, str] = {}  # node name -> node that replaces it (control edges)
    seen: dict[tuple, str] = {}
    fed_ops = {r[0] for r in feeds}
    alias_get = alias.get
    defs: dict[str, tuple] = {}  # op type -> (OpDef, whether its ops may fold)

    def ref(r):
        return r if r in feeds else alias.get(r, r)

    # One walk, in order (each node after its inputs); the per-node tests are inline: this
    # loop runs once per op of every step planned (issue 22: 100k ops in <= 2 CPU-s).
    for name, node in nodes.items():
        if alias:
            ins, ctl = node.inputs, node.control_inputs
            for r in ins:
                if r in alias:
                    break
            else:
                for c in ctl:
                    if c in alias_op:
                        break
                else:
                    ins = None  # nothing to rewrite
            if ins is not None:
                new_ins = []
                for r in ins:
                    new_ins.append(r if r[0] in fed_ops and r in feeds else alias_get(r, r))
                node = node.rewired(
                    tuple(new_ins),
                    tuple(dict.fromkeys([alias_op.get(c, c) for c in ctl])) if ctl else (),
                    node.device)
        typ = node.type
        facts = defs.get(typ)
        if facts is None:
            d = registry[typ]
            facts = defs[typ] = (d, fold and d.foldable and not d.needs_ctx
                                 and "CPU" in d.kernels and typ != "Const")
        d, may_fold = facts
        if d.pass_through and not node.control_inputs and node.colocation is None:
            src = node.inputs[0]
            producer = out.get(src[0])
            # An identity of a Switch output is a branch's pivot: ops of the branch wait on it
            # (a control edge reads its token, and a dead token is what keeps them from
            # running), so it stays.
            if src in feeds or producer is not None and node.device in ("", producer.device) \
                    and not registry[producer.type].control_flow:
                alias[(name, 0)] = src
                alias_op[name] = src[0]
                continue
        vals = None
        if may_fold and node.inputs and not node.stateful and not node.control_inputs:
            # (a first input neither a constant nor read for its shape only: no fold, and no
            # call to find that out)
            p = out.get(node.inputs[0][0])
            if d.shape_only or p is not None and p.type == "Const":
                vals = _fold_inputs(node, out, feeds, d)
        if vals is not None:
            try:
                value = d.kernels["CPU"](*vals, **node.attrs)
            except Exception:  # noqa: BLE001 - leave it to fail at run time, with context
                value = None
            if value is not None and _nbytes(value) <= FOLD_LIMIT_BYTES:
                if node.num_outputs > 1:
                    value = tuple(np.array(v) for v in value)
                else:
                    value = np.array(value)
                folded = True
                node = node.replace(
                    type="Const", inputs=(), in_shapes=(), in_dtypes=(),
                    attrs={"value": value, "dtype": node.out_dtypes[0] if node.out_dtypes
                           else None}, stateful=False)
                d = registry["Const"]
        if cse and not node.stateful and d.foldable:
            attrs = node.attrs
            key = (node.type, node.inputs, node.control_inputs, node.device, node.colocation,
                   node.num_outputs, _attrs_key(attrs) if attrs else ())
            first = seen.setdefault(key, name)  # (the key hashed once)
            if first is not name:
                if node.num_outputs <= 1:
                    alias[(name, 0)] = (first, 0)
                else:
                    for i in range(node.num_outputs):
                        alias[(name, i)] = (first, i)
                alias_op[name] = first
                continue
        out[name] = node

    fetches = [ref(r) for r in fetches]
    targets = [alias_op.get(t, t) for t in targets]
    from .prune import prune
    if folded or not pruned:
        out = prune(out, fetches, targets, feeds)
    expanded = _expand_group_targets(out, fetches, targets)
    if expanded != targets:  # pruning again with the same roots would change nothing
        out = prune(out, fetches, expanded, feeds)
    return out, fetches, expanded


def _expand_group_targets(nodes: dict[str, Node], fetches, targets) -> list[str]:
    """A target that is a NoOp nothing else reads (``train = tv.group(...)``,
    ``minimize``'s final op) only waits for its control inputs: make those the targets, so
    the step does not end with a hop to the NoOp's device just to run nothing."""
    consumed = controllers = None  # built on the first NoOp target
    out: list[str] = []
    stack = list(targets)
    while stack:
        t = stack.pop()
        n = nodes.get(t)
        if n is not None and n.type == "NoOp" and not n.inputs:
            if consumed is None:
                consumed, controllers = _readers(nodes, fetches)
            if t not in consumed and not controllers.get(t):
                for c in n.control_inputs:
                    controllers[c] -= 1
                stack.extend(n.control_inputs)
                continue
        if t not in out:
            out.append(t)
    return out


def _readers(nodes: dict[str, Node], fetches) -> tuple[set, dict]:
    """The names whose outputs are read (by an input or a fetch), and how many control
    edges wait on each name."""
    consumed = {r[0] for r in fetches}
    controllers: dict[str, int] = {}
    for n in nodes.values():
        for r in n.inputs:
            consumed.add(r[0])
        for c in n.control_inputs:
            controllers[c] = controllers.get(c, 0) + 1
    return consumed, controllers
