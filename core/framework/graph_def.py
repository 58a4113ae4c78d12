"""The plain-data form of a graph that the step passes transform, and its JSON round trip.

A :class:`Node` is a frozen record (like JAX's ``JaxprEqn``): op type, inputs as
``(producer name, output index)``, control inputs by name, attrs, device, colocation group,
stateful flag, number of outputs and the user's ``file:line``. ``nodes`` maps are ordered dicts
in topological order.

``graph_to_dict`` / ``graph_from_dict`` give a JSON-able GraphDef-like dict (no pickle:
NumPy values become ``{"__ndarray__": dtype, "shape": [...], "b64": ...}``; a while_loop's
cond/body and a dataset's map/filter functions become nested graph definitions, a tv.data
pipeline a tree of stages by class name). ``tv.train.export_meta_graph`` wraps it with the
collections and the Saver's ops.
"""
from __future__ import annotations

import base64
import importlib
from collections import namedtuple
from dataclasses import FrozenInstanceError
from typing import Mapping

import numpy as np

from . import dtypes as _dt
from .errors import InvalidArgumentError, NotFoundError
from .graph import Graph
from .op_registry import get_op_def, load_all_ops, registry
from ..storage.splits import Split

Ref = tuple  # (node name, output index)
_NO_ATTRS = object()  # Node's attrs default: a new empty dict per node

_FIELDS = ("name", "type", "inputs", "control_inputs", "attrs", "device", "colocation",
           "stateful", "num_outputs", "location", "out_dtypes", "in_shapes", "in_dtypes",
           "out_shapes")
_INDEX = {f: i for i, f in enumerate(_FIELDS)}
_tuple_new = tuple.__new__


class Node(namedtuple("_NodeRecord", _FIELDS)):
    """One op of a snapshot (see the module docstring): ``name``, ``type``, ``inputs`` as
    ``(producer name, output index)``, ``control_inputs`` by name, ``attrs``, ``device``,
    ``colocation`` group, ``stateful`` flag, ``num_outputs``, the user's ``location``
    (``file:line``), ``out_dtypes``, ``in_shapes`` / ``out_shapes`` (static shapes, None where
    unknown) and ``in_dtypes``.

    A frozen record read by field (a tuple underneath: a graph's snapshot is one record per
    op, and each pass that changes a node makes a new one with :meth:`replace`, so making one
    is cheap — planning 100k ops makes some 300k)."""

    __slots__ = ()

    def __new__(cls, name: str, type: str, inputs: tuple = (), control_inputs: tuple = (),
                attrs: Mapping | None = _NO_ATTRS, device: str = "",
                colocation: str | None = None, stateful: bool = False, num_outputs: int = 1,
                location: str = "", out_dtypes: tuple = (), in_shapes: tuple = (),
                in_dtypes: tuple = (), out_shapes: tuple = ()):
        return _tuple_new(cls, (name, type, inputs, control_inputs,
                                {} if attrs is _NO_ATTRS else attrs, device, colocation,
                                stateful, num_outputs, location, out_dtypes, in_shapes,
                                in_dtypes, out_shapes))

    def replace(self, **changes) -> "Node":
        """A copy with ``changes`` (as ``dataclasses.replace`` does for a dataclass)."""
        vals = list(self)
        try:
            for k, v in changes.items():
                vals[_INDEX[k]] = v
        except KeyError as e:
            raise TypeError(f"Node has no field {e.args[0]!r}") from None
        return _tuple_new(Node, vals)

    def rewired(self, inputs: tuple, control_inputs: tuple, device: str) -> "Node":
        """A copy with these ``inputs``, ``control_inputs`` and ``device`` (as
        :meth:`replace`, positionally: partition copies every node so)."""
        (name, typ, _, _, attrs, _, colocation, stateful, num_outputs, location, out_dtypes,
         in_shapes, in_dtypes, out_shapes) = self
        return _tuple_new(Node, (name, typ, inputs, control_inputs, attrs, device, colocation,
                                 stateful, num_outputs, location, out_dtypes, in_shapes,
                                 in_dtypes, out_shapes))

    def __setattr__(self, name, value):
        raise FrozenInstanceError(f"cannot assign to field {name!r}")

    def __delattr__(self, name):
        raise FrozenInstanceError(f"cannot delete field {name!r}")

    def __repr__(self):
        ins = ", ".join(f"{n}:{i}" for n, i in self.inputs)
        ctl = "".join(f", ^{c}" for c in self.control_inputs)
        dev = f" @{self.device}" if self.device else ""
        return f"%{self.name} = {self.type}({ins}{ctl}){dev}"


class Snapshot(dict):
    """A graph version's ops as Nodes (a dict that can be weakly referenced, so facts derived
    from it — the step pipeline's placement constraints — are cached as long as it lives).

    ``in_order``: every op comes after the ops it waits for. An op's inputs are made before
    it (a tensor exists before an op reads it, and inputs never change), so only a control
    input set by hand after both ops were made (``op._add_control_input``) can break it."""

    __slots__ = ("__weakref__", "in_order")


def snapshot(graph) -> dict[str, Node]:
    """The graph's ops as Nodes, in creation (topological) order."""
    cache = getattr(graph, "_snapshot_cache", None)
    if cache is not None and cache[0] == graph.version:
        return cache[1]
    out: dict[str, Node] = Snapshot()
    stateful = {}  # op type -> its OpDef's stateful flag
    new = tuple.__new__
    # Per op: no comprehension (each is a function call before Python 3.12) for the common
    # one-output, one- or two-input ops. The small tuples of shapes and dtypes are shared
    # between ops alike (most are): far fewer objects for the garbage collector to walk
    # once the snapshot is made (it keeps them as long as the graph version lives).
    one: dict = {}  # shape, or id(dtype) -> the 1-tuple of it
    two: dict = {}  # (shape, shape), or (id(dtype), id(dtype)) -> the 2-tuple
    in_order = True
    for op in graph._ops:
        ins, outs, typ = op.inputs, op.outputs, op.type
        st = stateful.get(typ)
        if st is None:
            st = stateful[typ] = registry[typ].stateful
        ctl = op._control_inputs
        if ctl and in_order:
            for c in ctl:
                if c.name not in out:
                    in_order = False
        n_in = len(ins)
        try:
            if n_in == 1:
                a = ins[0]
                inputs = ((a.op.name, a.value_index),)
                sa, da = a._shape, a.dtype
                in_shapes = one.get(sa) or one.setdefault(sa, (sa,))
                in_dtypes = one.get(id(da)) or one.setdefault(id(da), (da,))
            elif n_in == 2:
                a, b = ins
                inputs = ((a.op.name, a.value_index), (b.op.name, b.value_index))
                k = (a._shape, b._shape)
                in_shapes = two.setdefault(k, k)
                k = (id(a.dtype), id(b.dtype))
                in_dtypes = two.get(k) or two.setdefault(k, (a.dtype, b.dtype))
            elif n_in:
                inputs = tuple([(t.op.name, t.value_index) for t in ins])
                in_shapes = tuple([t._shape for t in ins])
                in_dtypes = tuple([t.dtype for t in ins])
            else:
                inputs = in_shapes = in_dtypes = ()
            if len(outs) == 1:
                o = outs[0]
                so, do = o._shape, o.dtype
                out_shapes = one.get(so) or one.setdefault(so, (so,))
                out_dtypes = one.get(id(do)) or one.setdefault(id(do), (do,))
            elif outs:
                out_dtypes = tuple([t.dtype for t in outs])
                out_shapes = tuple([t._shape for t in outs])
            else:
                out_dtypes = out_shapes = ()
        except TypeError:  # a shape that cannot be a key (not a tuple of ints): not shared
            inputs = tuple([(t.op.name, t.value_index) for t in ins])
            in_shapes = tuple([t._shape for t in ins])
            in_dtypes = tuple([t.dtype for t in ins])
            out_dtypes = tuple([t.dtype for t in outs])
            out_shapes = tuple([t._shape for t in outs])
        name = op.name
        out[name] = new(Node, (name, typ, inputs, tuple([c.name for c in ctl]) if ctl else (),
                               op.attrs, op.device, op.colocation, st, len(outs), op.location,
                               out_dtypes, in_shapes, in_dtypes, out_shapes))
    out.in_order = in_order
    graph._snapshot_cache = (graph.version, out)
    return out


# ---- JSON round trip ------------------------------------------------------------------------
#
# Every attr becomes plain JSON data. Functions (a while_loop's cond/body, a dataset's
# map/filter functions, a loop's gradient) are nested graph definitions (TF's
# FunctionDefLibrary idea): ``{"__func__": {"name", "frame", "feeds", "fetches",
# "graph": {"node": [...]}}}``; a tv.data pipeline is a tree of ``{"__stage__": class name,
# "fields": {...}}`` whose class is looked up among tv.data's stages only. Nothing is code:
# a Python callable (py_func, Dataset.from_generator) is refused at export, naming the op.


class _Unexportable(Exception):
    """An attr holds something that is not data (a Python callable): the reason, in words."""


# The op-family modules a snapshot's JSON names by their short name (short in the format).
_FAMILY_MODULES = {"dataset_sources": "data.dataset_sources",
                   "dataset_pipeline": "data.dataset_pipeline",
                   "while_loop": "control.while_loop",
                   "tensor_array_ops": "control.tensor_array_ops"}


def _module(name: str):
    """The op-family module a snapshot names by its short ``name``."""
    return importlib.import_module(f"tensorvm.ops.{_FAMILY_MODULES[name]}")


_VARIANTS = ("tensor_array_ops", "while_loop")


def _stage_classes() -> dict:
    """tv.data's pipeline stages by class name (those that hold no Python code)."""
    _module("dataset_sources")  # registers the sources
    out, todo = {}, list(_module("dataset_pipeline").Stage.__subclasses__())
    while todo:
        c = todo.pop()
        todo.extend(c.__subclasses__())
        if c.__module__.startswith("tensorvm.ops.") and \
                not getattr(c, "export_refusal", None):
            out[c.__name__] = c
    return out


def _enc(v):
    if isinstance(v, np.ndarray):
        if v.dtype == object:
            return {"__ndarray__": "string", "shape": list(v.shape),
                    "data": [x.decode("utf-8", "surrogateescape") if isinstance(x, bytes)
                             else str(x) for x in v.ravel()],
                    "bytes": any(isinstance(x, bytes) for x in v.ravel())}
        return {"__ndarray__": v.dtype.str, "shape": list(v.shape),
                "b64": base64.b64encode(np.ascontiguousarray(v).tobytes()).decode()}
    if isinstance(v, _dt.DType):
        for where in _VARIANTS:  # the two "variant" dtypes: a TensorArray, a loop's tape
            if v is _module(where).variant:
                return {"__dtype__": v.name, "of": where}
        return {"__dtype__": v.name}
    if isinstance(v, np.dtype):
        return {"__npdtype__": v.str}
    if isinstance(v, tuple):
        return {"__tuple__": [_enc(x) for x in v]}
    if isinstance(v, list):
        return [_enc(x) for x in v]
    if isinstance(v, dict):
        return {"__dict__": {k: _enc(x) for k, x in v.items()}}
    if isinstance(v, (np.integer, np.floating, np.bool_)):
        return v.item()
    if isinstance(v, bytes):
        return {"__bytes__": base64.b64encode(v).decode()}
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    if isinstance(v, Split):  # a map-reduce input split
        return {"__split__": v.to_dict()}
    _dp, _wl = _module("dataset_pipeline"), _module("while_loop")
    if isinstance(v, _wl.Func):
        return {"__func__": _wl.func_to_plain(v, _node_dict)}
    if isinstance(v, _dp.Ref):
        return {"__ref__": v.index, "const": _enc(v.const)}
    if isinstance(v, _dp.Stage):
        refusal = getattr(type(v), "export_refusal", None)
        if refusal:
            raise _Unexportable(refusal)
        import dataclasses
        return {"__stage__": type(v).__name__,
                "fields": {f.name: _enc(getattr(v, f.name)) for f in dataclasses.fields(v)}}
    if callable(v):
        raise _Unexportable(f"it calls a Python function ({getattr(v, '__name__', v)!r}), "
                            "which cannot be exported: a meta graph holds no Python code "
                            "(TF refuses py_func the same way)")
    raise _Unexportable(f"attr value {v!r} of type {type(v).__name__} cannot be exported")


class _Dec:
    """Decodes attrs for the graph being built (``graph``: the outer graph of any function)."""

    def __init__(self, graph, where: str):
        self.graph, self.where = graph, where

    def __call__(self, v):
        if isinstance(v, list):
            return [self(x) for x in v]
        if not isinstance(v, dict):
            if v is None or isinstance(v, (bool, int, float, str)):
                return v
            raise InvalidArgumentError(f"{self.where}: bad attr value {v!r}")
        if "__ndarray__" in v:
            if v["__ndarray__"] == "string":
                data = [x.encode("utf-8", "surrogateescape") for x in v["data"]] \
                    if v.get("bytes") else v["data"]
                arr = np.empty(len(data), dtype=object)
                arr[:] = data
                return arr.reshape(v["shape"])
            dt = np.dtype(v["__ndarray__"])
            if dt.kind == "O":
                raise InvalidArgumentError(f"{self.where}: object arrays are stored as "
                                           "strings, never as raw bytes")
            arr = np.frombuffer(base64.b64decode(v["b64"]), dtype=dt)
            return arr.reshape(v["shape"])
        if "__dtype__" in v:
            if v.get("of") in _VARIANTS:
                return _module(v["of"]).variant
            try:
                return _dt.as_dtype(v["__dtype__"])
            except TypeError as e:
                raise InvalidArgumentError(f"{self.where}: {e}") from None
        if "__npdtype__" in v:
            return np.dtype(v["__npdtype__"])
        if "__tuple__" in v:
            return tuple(self(x) for x in v["__tuple__"])
        if "__dict__" in v:
            return {k: self(x) for k, x in v["__dict__"].items()}
        if "__bytes__" in v:
            return base64.b64decode(v["__bytes__"])
        if "__split__" in v:
            try:
                return Split.from_dict(v["__split__"])
            except (TypeError, ValueError) as e:
                raise InvalidArgumentError(f"{self.where}: bad split: {e}") from None
        if "__func__" in v:
            return _module("while_loop").func_from_plain(v["__func__"], self.graph, _build_nodes)
        if "__ref__" in v:
            return _module("dataset_pipeline").Ref(int(v["__ref__"]), self(v.get("const")))
        if "__stage__" in v:
            cls = _stage_classes().get(v["__stage__"])
            if cls is None:
                raise InvalidArgumentError(
                    f"{self.where}: {v['__stage__']!r} is not a tv.data dataset stage that "
                    "can be imported")
            try:
                return cls(**{k: self(x) for k, x in v["fields"].items()})
            except TypeError as e:
                raise InvalidArgumentError(
                    f"{self.where}: bad fields for dataset stage {v['__stage__']!r}: {e}") \
                    from None
        raise InvalidArgumentError(f"{self.where}: unknown attr encoding "
                                   f"{sorted(v)[:3]!r}")


def _node_dict(name, op_type, inputs, attrs, device, colocation, location) -> dict:
    """One node as JSON-able data; ``inputs`` are tensor names and ``^op`` control inputs."""
    enc = {}
    for k, v in attrs.items():
        try:
            enc[k] = _enc(v)
        except _Unexportable as e:
            raise InvalidArgumentError(f"op {name!r} ({op_type}), attr {k!r}: {e} (op created"
                                       f" at {location})") from None
        except InvalidArgumentError as e:  # from a function's own ops: name this op too
            raise InvalidArgumentError(f"op {name!r} ({op_type}): {e}") from None
    return {"name": name, "op": op_type, "input": list(inputs), "attr": enc,
            "device": device, "colocation": colocation, "location": location}


def graph_to_dict(graph) -> dict:
    """``{"versions": ..., "node": [{name, op, input, attr, device, ...}]}`` — JSON-able.

    Raises ``InvalidArgumentError`` naming the op for an attr that is code, not data
    (``py_func``, ``Dataset.from_generator``)."""
    nodes = []
    for op in graph._ops:
        nodes.append(_node_dict(
            op.name, op.type,
            [t.name for t in op.inputs] + ["^" + c.name for c in op.control_inputs],
            op.attrs, op.device, op.colocation, op.location))
    return {"format": "tensorvm.GraphDef", "version": 1, "seed": graph.seed, "node": nodes}


def _build_nodes(g, nodes, where: str = "GraphDef", clear_devices: bool = False) -> None:
    """Append ``nodes`` (``graph_to_dict``'s form) to ``g``, re-inferring shapes."""
    if not isinstance(nodes, list):
        raise InvalidArgumentError(f"{where}: 'node' must be a list")
    dec = _Dec(g, where)
    with g.as_default():
        for n in nodes:
            if not isinstance(n, dict) or not isinstance(n.get("name"), str) or \
                    not isinstance(n.get("op"), str):
                raise InvalidArgumentError(f"{where}: malformed node {str(n)[:80]!r}")
            name = n["name"]
            if n["op"] not in registry:
                load_all_ops()  # an op of a module tensorvm loads on first use (tv.train …)
            if n["op"] not in registry:
                raise InvalidArgumentError(
                    f"{where}: node {name!r} has op type {n['op']!r}, which is not registered"
                    " in tensorvm")
            ins, attr = n.get("input", []), n.get("attr", {})
            if not isinstance(ins, list) or not all(isinstance(x, str) for x in ins) or \
                    not isinstance(attr, dict):
                raise InvalidArgumentError(f"{where}: node {name!r}: 'input' must be a list of "
                                           "tensor names and 'attr' a dict")
            for k in ("device", "colocation", "location"):
                if n.get(k) is not None and not isinstance(n[k], str):
                    raise InvalidArgumentError(f"{where}: node {name!r}: {k!r} must be a "
                                               "string")
            inputs, controls = [], []
            try:
                for s in ins:
                    if s.startswith("^"):
                        controls.append(g.get_operation_by_name(s[1:]))
                    else:
                        inputs.append(g.get_tensor_by_name(s))
            except (NotFoundError, ValueError, KeyError, IndexError) as e:
                raise InvalidArgumentError(f"{where}: node {name!r} reads a missing node: "
                                           f"{e}") from None
            attrs = {}
            for k, v in attr.items():
                try:
                    attrs[k] = dec(v)
                except InvalidArgumentError:
                    raise
                except (TypeError, ValueError, KeyError, IndexError, AttributeError) as e:
                    raise InvalidArgumentError(f"{where}: node {name!r}: bad attr {k!r} "
                                               f"({type(e).__name__}: {e})") from None
            try:
                specs = get_op_def(n["op"]).shape_fn(inputs, attrs)
            except InvalidArgumentError:
                raise
            except Exception as e:  # a node whose attrs do not fit its op
                raise InvalidArgumentError(f"{where}: node {name!r} ({n['op']}): "
                                           f"{type(e).__name__}: {e}") from None
            try:
                with g.control_dependencies(controls):
                    op = g.create_op(n["op"], inputs, attrs, specs, name=name,
                                     location=n.get("location"),
                                     colocation=n.get("colocation"))
            except (TypeError, ValueError) as e:  # output specs that attrs made nonsense
                if isinstance(e, InvalidArgumentError):
                    raise
                raise InvalidArgumentError(f"{where}: node {name!r} ({n['op']}): "
                                           f"{type(e).__name__}: {e}") from None
            if op.name != name:
                raise InvalidArgumentError(f"{where}: duplicate node name {name!r}")
            op.device = "" if clear_devices else (n.get("device") or "")


def graph_from_dict(d: dict, graph=None, clear_devices: bool = False):
    """Rebuild a :class:`tensorvm.Graph` from ``graph_to_dict``'s output (shapes re-inferred),
    or add its nodes to ``graph``. Bad input raises ``InvalidArgumentError``; nothing in ``d``
    is executed or unpickled."""
    if not isinstance(d, dict) or d.get("format") != "tensorvm.GraphDef":
        raise InvalidArgumentError("not a tensorvm GraphDef dict")
    g = Graph() if graph is None else graph
    if graph is None:
        g.seed = d.get("seed")
    _build_nodes(g, d.get("node"), clear_devices=clear_devices)
    return g


def _as_graph_def(self: Graph) -> dict:
    """A plain, JSON-able dict (GraphDef-like). NumPy attrs become {dtype, shape, data}."""
    return graph_to_dict(self)


# Serialisation lives here; the graph module does not import it (see tensorvm.framework.graph).
Graph.as_graph_def = _as_graph_def
