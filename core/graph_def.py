"""The plain-data form of a graph that the step passes transform, and its JSON round trip.

A :class:`Node` is a frozen record (like JAX's ``JaxprEqn``): op type, inputs as
``(producer name, output index)``, control inputs by name, attrs, device, colocation group,
stateful flag, number of outputs and the user's ``file:line``. ``nodes`` maps are ordered dicts
in topological order.

``graph_to_dict`` / ``graph_from_dict`` give a JSON-able GraphDef-like dict (no pickle:
NumPy values become ``{"__ndarray__": dtype, "shape": [...], "data": [...]}``).
"""
from __future__ import annotations

import base64
from dataclasses import dataclass, field
from typing import Mapping

import numpy as np

from . import dtypes as _dt
from .errors import InvalidArgumentError
from .graph import Graph
from .registry import get_op_def, registry

Ref = tuple  # (node name, output index)


@dataclass(frozen=True)
class Node:
    name: str
    type: str
    inputs: tuple = ()
    control_inputs: tuple = ()
    attrs: Mapping = field(default_factory=dict)
    device: str = ""
    colocation: str | None = None
    stateful: bool = False
    num_outputs: int = 1
    location: str = ""
    out_dtypes: tuple = ()
    in_shapes: tuple = ()  # static shapes of the inputs (None where unknown)
    in_dtypes: tuple = ()
    out_shapes: tuple = ()  # static output shapes (None where unknown)

    def __repr__(self):
        ins = ", ".join(f"{n}:{i}" for n, i in self.inputs)
        ctl = "".join(f", ^{c}" for c in self.control_inputs)
        dev = f" @{self.device}" if self.device else ""
        return f"%{self.name} = {self.type}({ins}{ctl}){dev}"


class Snapshot(dict):
    """A graph version's ops as Nodes (a dict that can be weakly referenced, so facts derived
    from it — the step pipeline's placement constraints — are cached as long as it lives)."""

    __slots__ = ("__weakref__",)


def snapshot(graph) -> dict[str, Node]:
    """The graph's ops as Nodes, in creation (topological) order."""
    cache = getattr(graph, "_snapshot_cache", None)
    if cache is not None and cache[0] == graph.version:
        return cache[1]
    out: dict[str, Node] = Snapshot()
    for op in graph._ops:
        out[op.name] = Node(
            op.name, op.type, tuple((t.op.name, t.value_index) for t in op.inputs),
            tuple(c.name for c in op.control_inputs), op.attrs, op.device, op.colocation,
            registry[op.type].stateful, len(op.outputs), op.location,
            tuple(t.dtype for t in op.outputs), tuple(t._shape for t in op.inputs),
            tuple(t.dtype for t in op.inputs), tuple(t._shape for t in op.outputs))
    graph._snapshot_cache = (graph.version, out)
    return out


# ---- JSON round trip ------------------------------------------------------------------------

def _enc(v):
    if isinstance(v, np.ndarray):
        if v.dtype == object:
            return {"__ndarray__": "string", "shape": list(v.shape),
                    "data": [str(x) for x in v.ravel()]}
        return {"__ndarray__": v.dtype.str, "shape": list(v.shape),
                "b64": base64.b64encode(np.ascontiguousarray(v).tobytes()).decode()}
    if isinstance(v, _dt.DType):
        return {"__dtype__": v.name}
    if isinstance(v, tuple):
        return {"__tuple__": [_enc(x) for x in v]}
    if isinstance(v, list):
        return [_enc(x) for x in v]
    if isinstance(v, dict):
        return {"__dict__": {k: _enc(x) for k, x in v.items()}}
    if isinstance(v, (np.integer, np.floating, np.bool_)):
        return v.item()
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    raise TypeError(f"attr value {v!r} cannot be serialised")


def _dec(v):
    if isinstance(v, list):
        return [_dec(x) for x in v]
    if isinstance(v, dict):
        if "__ndarray__" in v:
            if v["__ndarray__"] == "string":
                return np.array(v["data"], dtype=object).reshape(v["shape"])
            arr = np.frombuffer(base64.b64decode(v["b64"]), dtype=np.dtype(v["__ndarray__"]))
            return arr.reshape(v["shape"])
        if "__dtype__" in v:
            return _dt.as_dtype(v["__dtype__"])
        if "__tuple__" in v:
            return tuple(_dec(x) for x in v["__tuple__"])
        if "__dict__" in v:
            return {k: _dec(x) for k, x in v["__dict__"].items()}
    return v


def graph_to_dict(graph) -> dict:
    """``{"versions": ..., "node": [{name, op, input, attr, device, ...}]}`` — JSON-able."""
    nodes = []
    for op in graph._ops:
        nodes.append({
            "name": op.name, "op": op.type,
            "input": [t.name for t in op.inputs] + ["^" + c.name for c in op.control_inputs],
            "attr": {k: _enc(v) for k, v in op.attrs.items()},
            "device": op.device, "colocation": op.colocation, "location": op.location,
        })
    return {"format": "tensorvm.GraphDef", "version": 1, "seed": graph.seed, "node": nodes}


def graph_from_dict(d: dict):
    """Rebuild a :class:`tensorvm.Graph` from ``graph_to_dict``'s output (shapes re-inferred)."""
    if d.get("format") != "tensorvm.GraphDef":
        raise InvalidArgumentError("not a tensorvm GraphDef dict")
    g = Graph()
    g.seed = d.get("seed")
    for n in d["node"]:
        inputs, controls = [], []
        for s in n["input"]:
            if s.startswith("^"):
                controls.append(g.get_operation_by_name(s[1:]))
            else:
                inputs.append(g.get_tensor_by_name(s))
        attrs = {k: _dec(v) for k, v in n["attr"].items()}
        specs = get_op_def(n["op"]).shape_fn(inputs, attrs)
        with g.control_dependencies(controls):
            op = g.create_op(n["op"], inputs, attrs, specs, name=n["name"],
                             location=n.get("location"), colocation=n.get("colocation"))
        if op.name != n["name"]:
            raise InvalidArgumentError(f"duplicate node name {n['name']!r} in GraphDef")
        op.device = n.get("device", "")
    return g


def _as_graph_def(self: Graph) -> dict:
    """A plain, JSON-able dict (GraphDef-like). NumPy attrs become {dtype, shape, data}."""
    return graph_to_dict(self)


# Serialisation lives here; the graph module does not import it (see tensorvm.graph).
Graph.as_graph_def = _as_graph_def
