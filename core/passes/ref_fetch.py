"""Ref fetch: in process, a Variable fetched in the step that updates it reads as the step
left it.

TF 1.x's local session returns a fetched ref variable's buffer after the step: ``run([v,
v.assign_add(1)])`` gives the updated value for ``v`` (and ``run([train, loss,
global_step])`` the step number the step made), whatever the order of the fetches; a read
op (``v.read_value()``, ``tv.identity(v)``) gives the value it read. :func:`ref_fetches`
makes each fetch of a variable's own output, in a step that updates that variable, a
``VariableRefFetch`` that waits for those updates. On a parameter server in another process
TF sends the variable's value when its op runs: cluster sessions leave their fetches as they
are (``pipeline(live_ref_fetches=False)``, the default).

>>> import tensorvm as tv
>>> from tensorvm.framework.graph_def import Node
>>> var = {"var_name": "v", "container": "", "dtype": tv.float32, "shape": ()}
>>> nodes = {"v": Node("v", "VariableV2", attrs=var, stateful=True),
...          "one": Node("one", "Const"),
...          "inc": Node("inc", "AssignAdd", (("one", 0),), attrs=var, stateful=True)}
>>> out, fetches = ref_fetches(nodes, [("v", 0), ("inc", 0)], set())
>>> fetches
[('v/fetch_after_update', 0), ('inc', 0)]
>>> out["v/fetch_after_update"]
%v/fetch_after_update = VariableRefFetch(v:0, ^inc)
"""
from __future__ import annotations

from typing import Mapping

from ..framework.graph_def import Node

# Ops that name a variable but do not change it.
_READS = frozenset({"VariableV2", "VariableRead", "IsVariableInitialized", "VariableRefFetch",
                    "LoopVariableRead"})


def updates(node: Node, key: tuple[str, str]) -> bool:
    """Whether ``node`` may change the variable ``key`` = ``(container, var_name)``: a
    stateful op naming it in an attr (``var_name``, a slot's ``accum_name``/``m_name``…),
    or an op whose function (a while_loop's body) holds one."""
    if not node.stateful or node.type in _READS:
        return False
    attrs = node.attrs or {}
    mine = (attrs.get("container") or "") == key[0]
    for k, v in attrs.items():
        if mine and k.endswith("_name") and v == key[1]:
            return True
        inner = getattr(v, "nodes", None)
        if isinstance(inner, Mapping) and any(updates(n, key) for n in inner.values()
                                              if isinstance(n, Node)):
            return True
    return False


def ref_fetches(nodes: dict[str, Node], fetches: list, feeds,
                taken=frozenset()) -> tuple[dict, list]:
    """Return ``(nodes, fetches)`` with each fetch of a variable's output that the step also
    updates read after those updates (a new ``VariableRefFetch`` node, colocated with the
    variable, named apart from ``nodes`` and ``taken``)."""
    targets = {r[0] for r in fetches
               if r[1] == 0 and r not in feeds and r[0] in nodes
               and nodes[r[0]].type == "VariableV2"}
    if not targets:
        return nodes, fetches
    out = dict(nodes)
    repl: dict[str, str] = {}
    for name in targets:
        var = nodes[name]
        key = ((var.attrs.get("container") or ""), var.attrs.get("var_name", name))
        ups = tuple(n for n, node in nodes.items() if updates(node, key))
        if not ups:
            continue
        new = f"{name}/fetch_after_update"
        while new in out or new in taken:
            new += "_"
        out[new] = Node(new, "VariableRefFetch", ((name, 0),), ups, var.attrs, var.device,
                        var.colocation, True, 1, var.location, var.out_dtypes,
                        (var.out_shapes[0] if var.out_shapes else None,), var.out_dtypes,
                        var.out_shapes)
        repl[name] = new
    if not repl:
        return nodes, fetches
    return out, [(repl[r[0]], 0) if r[0] in repl and r[1] == 0 and r not in feeds else r
                 for r in fetches]
