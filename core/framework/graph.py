"""The graph IR: :class:`Graph`, :class:`Operation`, :class:`Tensor`.

A graph is an append-only list of operations. An operation has a type (a key of the op registry),
input tensors, control inputs, attributes (plain data: numbers, strings, lists, dtypes and NumPy
arrays for constants), a requested device (possibly partial), an optional colocation group and the
user's ``file:line`` that created it. A tensor is ``(op, output index)`` with a dtype and a static
shape whose unknown dimensions are ``None`` (an unknown rank is ``None`` as a whole).

The session never runs this object directly: ``tensorvm.framework.graph_def.snapshot`` gives the plain
nodes that the step passes (``tensorvm.passes``) transform. This module also holds the per-thread
default stacks (graph and session), as TF's ``ops.py`` does, so it imports nothing above it.
"""
from __future__ import annotations

import contextlib
import itertools
import os
import sys
import threading
from typing import Any, Callable, Iterable

import numpy as np

from . import dtypes as _dt
from .device_spec import DeviceSpec
from .errors import GraphError, InvalidArgumentError
from .op_registry import get_op_def

# the tensorvm package's folder (core/): frames inside it are never the user's line
_PKG_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def _user_location() -> str:
    """``file:line`` of the first stack frame outside the tensorvm package."""
    f = sys._getframe(2)
    while f is not None:
        fn = f.f_code.co_filename
        if not fn.startswith(_PKG_DIR) and "contextlib" not in fn:
            return f"{fn}:{f.f_lineno}"
        f = f.f_back
    return "<unknown>"


class Dimension(int):
    """A known static dimension: an ``int`` that also answers TF 1.x's ``.value``
    (``x.get_shape()[1].value``). Unknown dimensions are ``None``."""

    __slots__ = ()

    @property
    def value(self) -> int:
        return int(self)

    def __repr__(self):
        return f"Dimension({int(self)})"


class TensorShape:
    """A static shape: a tuple of dims (``None`` = unknown) or an unknown rank."""

    __slots__ = ("dims",)

    def __init__(self, dims):
        self.dims = None if dims is None else tuple(None if d is None else int(d) for d in dims)

    @property
    def ndims(self):
        """The number of dimensions, or ``None`` for an unknown rank (also ``rank``)."""
        return None if self.dims is None else len(self.dims)

    rank = ndims

    def as_list(self):
        """The dims as a list (``None`` for an unknown one); ``ValueError`` for an unknown rank."""
        if self.dims is None:
            raise ValueError("as_list() is not defined on an unknown TensorShape")
        return list(self.dims)

    def is_fully_defined(self) -> bool:
        """Whether the rank and every dim are known."""
        return self.dims is not None and all(d is not None for d in self.dims)

    def num_elements(self):
        """The number of elements, or ``None`` unless fully defined."""
        return int(np.prod(self.dims)) if self.is_fully_defined() else None

    def __iter__(self):
        if self.dims is None:
            raise ValueError("cannot iterate over a shape with unknown rank")
        return iter(self.dims)

    def __len__(self):
        if self.dims is None:
            raise ValueError("cannot take the length of a shape with unknown rank")
        return len(self.dims)

    def __getitem__(self, i):
        if self.dims is None:
            return None if isinstance(i, int) else TensorShape(None)
        if isinstance(i, slice):
            return TensorShape(self.dims[i])
        d = self.dims[i]
        return None if d is None else Dimension(d)

    def __eq__(self, other):
        if isinstance(other, TensorShape):
            return self.dims == other.dims
        if isinstance(other, (tuple, list)):
            return self.dims == tuple(other)
        return NotImplemented

    def __hash__(self):
        return hash(self.dims)

    def __repr__(self):
        return "TensorShape(<unknown>)" if self.dims is None else f"TensorShape({list(self.dims)})"


class Tensor:
    """One output of an operation. Supports Python operators (``+ - * / // % ** @``, unary ``-``,
    comparisons, ``[]``) that build ops in the tensor's graph."""

    __slots__ = ("op", "value_index", "dtype", "_shape")
    __array_priority__ = 100

    def __init__(self, op: "Operation", value_index: int, dtype: _dt.DType, shape):
        self.op = op
        self.value_index = value_index
        self.dtype = dtype
        self._shape = None if shape is None else tuple(shape)

    @property
    def name(self) -> str:
        """``"<op name>:<output index>"``."""
        return f"{self.op.name}:{self.value_index}"

    @property
    def graph(self) -> "Graph":
        """The graph of the op that makes this tensor."""
        return self.op.graph

    @property
    def device(self) -> str:
        """The device its op asked for (``""``: placement decides)."""
        return self.op.device

    @property
    def shape(self) -> TensorShape:
        """The static shape, known when the graph is built (``tv.shape(t)`` is the shape at run
        time)."""
        return TensorShape(self._shape)

    def get_shape(self) -> TensorShape:
        """The static shape (as ``shape``)."""
        return self.shape

    def consumers(self) -> list["Operation"]:
        """The ops of the graph that take this tensor as an input."""
        return [op for op in self.graph.get_operations() if self in op.inputs]

    def eval(self, feed_dict=None, session=None):
        """Run this tensor in ``session`` or the default session and return its value."""
        return _session_for("evaluate tensor", session).run(self, feed_dict)

    def __repr__(self):
        shape = "<unknown>" if self._shape is None else list(self._shape)
        return f"<tv.Tensor '{self.name}' shape={shape} dtype={self.dtype.name}>"

    def __hash__(self):
        return id(self)

    def __bool__(self):
        raise TypeError("using a tv.Tensor as a Python bool is not allowed; use tv.cond/where")

    def __iter__(self):
        if self._shape is None or not self._shape or self._shape[0] is None:
            raise TypeError("tensor is not iterable: its first dimension is unknown")
        return (self[i] for i in range(self._shape[0]))

    def __len__(self):
        if self._shape is None or not self._shape or self._shape[0] is None:
            raise TypeError("len() of a tensor with an unknown first dimension")
        return self._shape[0]

    # Python operators are attached by tensorvm.ops.math.math_ops / array_ops (overload_operator).


def overload_operator(name: str, fn: Callable) -> None:
    setattr(Tensor, name, fn)


class Operation:
    """A node of the graph. Built through ``Graph.create_op`` by the op functions."""

    __slots__ = ("graph", "name", "type", "inputs", "_control_inputs", "attrs", "device",
                 "colocation", "outputs", "location", "_id", "__weakref__")

    def __init__(self, graph, name, op_type, inputs, control_inputs, attrs, device, colocation,
                 location):
        self.graph = graph
        self.name = name
        self.type = op_type
        self.inputs = tuple(inputs)
        self._control_inputs = tuple(control_inputs)
        self.attrs = attrs
        self.device = device
        self.colocation = colocation
        self.location = location
        self.outputs: tuple[Tensor, ...] = ()
        self._id = -1

    @property
    def control_inputs(self) -> tuple:
        """The ops this op waits for (no data flows from them)."""
        return self._control_inputs

    @control_inputs.setter
    def control_inputs(self, ops) -> None:
        # Set by hand after the op was built (TF's ``_add_control_input``): a new graph
        # version, so no plan of the old edges is reused. A cycle made so is refused when a
        # step is planned (tensorvm.passes.prune.topological).
        self._control_inputs = tuple(ops)
        self.graph.version += 1

    def _add_control_input(self, op) -> None:
        """Make this op wait for ``op`` too (TF's ``Operation._add_control_input``)."""
        self._add_control_inputs([op])

    def _add_control_inputs(self, ops) -> None:
        """Make this op wait for ``ops`` too (TF's ``Operation._add_control_inputs``)."""
        new = [o for o in ops if o not in self._control_inputs]
        for o in new:
            if not isinstance(o, Operation):
                raise TypeError(f"control input {o!r} of {self.name!r} must be an Operation")
        self.control_inputs = self._control_inputs + tuple(new)

    def get_attr(self, name: str):
        """The value of attribute ``name`` (as in the op's ``NodeDef``)."""
        return self.attrs[name]

    @property
    def op_def(self):
        """The registered definition of this op's type (shape rule, kernels, gradient,
        statefulness)."""
        return get_op_def(self.type)

    @property
    def stateful(self) -> bool:
        """Whether the op has state or side effects (never folded, merged or run twice)."""
        return self.op_def.stateful

    @property
    def node_def(self):
        """This op as TF's ``NodeDef`` (name, op, input, device, attr): :mod:`tensorvm.framework.node_def`."""
        from .node_def import NodeDef
        return NodeDef.of(self)

    def run(self, feed_dict=None, session=None):
        """Run this operation in ``session`` or the default session."""
        _session_for("run operation", session).run(self, feed_dict)

    def _set_device(self, device: str):
        self.device = DeviceSpec.parse(device).to_string()

    def __repr__(self):
        dev = f" device={self.device}" if self.device else ""
        return f"<tv.Operation '{self.name}' type={self.type}{dev}>"


class _BuilderState(threading.local):
    """One thread's builder stacks of one graph."""

    def __init__(self):
        super().__init__()
        self.name_stack = ""
        self.control_stack: list[list[Operation]] = []
        self.device_stack: list[Any] = []  # DeviceSpec or callable(op) -> str
        # (group, device-stack depth at entry): as in TF, an op built inside colocate_with
        # ignores the device scopes around the block and follows the op it is colocated with.
        self.colocation_stack: list[tuple[str | None, int]] = []
        self.gradient_colocation: list[tuple[str, int]] = []
        # The innermost tv.cond branch being built (tensorvm.ops.control.control_flow_ops): it routes
        # the branch's outside inputs through Switch and makes input-less ops wait on its pivot.
        self.control_flow_context = None


class Graph:
    """A TensorFlow-style dataflow graph. Use ``with g.as_default():`` to build into it (in the
    calling thread: the default graph, like the builder scopes, is per thread)."""

    _uid = itertools.count(1)

    def __init__(self):
        self._ops: list[Operation] = []
        self._by_name: dict[str, Operation] = {}
        self._names_in_use: dict[str, int] = {}
        self._lock = threading.RLock()
        self.version = 0
        self.seed: int | None = None
        self.uid = next(Graph._uid)
        self._collections: dict[str, list] = {}
        # Builder context stacks (name scope, control dependencies, devices, colocation) are
        # per thread, as in TF: a scope opened in one thread never reaches ops built in another.
        self._tls = _BuilderState()
        self._finalized = False

    # The builder stacks of the calling thread.
    @property
    def _name_stack(self) -> str:
        return self._tls.name_stack

    @_name_stack.setter
    def _name_stack(self, value: str) -> None:
        self._tls.name_stack = value

    @property
    def _control_stack(self) -> list[list[Operation]]:
        return self._tls.control_stack

    @_control_stack.setter
    def _control_stack(self, value) -> None:
        self._tls.control_stack = value

    @property
    def _device_stack(self) -> list[Any]:
        return self._tls.device_stack

    @property
    def _colocation_stack(self) -> list[tuple[str | None, int]]:
        return self._tls.colocation_stack

    @property
    def _gradient_colocation(self) -> list[tuple[str, int]]:
        return self._tls.gradient_colocation

    # ---- building -------------------------------------------------------------------------
    def unique_name(self, name: str, mark_as_used: bool = True) -> str:
        """``name`` under the current name scope, made unique in this graph (``"x"``, ``"x_1"``,
        ...); ``mark_as_used=False`` only asks."""
        if self._name_stack:
            name = f"{self._name_stack}/{name}"
        key = name.lower()
        i = self._names_in_use.get(key, 0)
        if mark_as_used:
            self._names_in_use[key] = i + 1
        if i > 0:
            base = name
            while True:
                name = f"{base}_{i}"
                if name.lower() not in self._names_in_use:
                    break
                i += 1
            if mark_as_used:
                self._names_in_use[name.lower()] = 1
        return name

    def create_op(self, op_type: str, inputs: list[Tensor], attrs: dict, output_specs,
                  name: str | None = None, location: str | None = None,
                  colocation: str | None = None) -> Operation:
        """Append an op. ``output_specs`` is a list of ``(DType, shape)`` from shape inference."""
        if self._finalized:
            raise RuntimeError("graph is finalized and cannot be modified")
        with self._lock:
            name = self.unique_name(name or op_type)
            for t in inputs:
                if t.graph is not self:
                    raise InvalidArgumentError(
                        f"op {name!r}: input {t.name!r} is from a different graph "
                        f"(created at {t.op.location}); all inputs of an op must share a graph")
            control = []
            for frame in self._control_stack:
                control.extend(c for c in frame if c not in control)
            ctx = self._tls.control_flow_context
            if ctx is not None:
                inputs, control = ctx.enter_op(self, inputs, control)
            coloc, depth = colocation, len(self._device_stack)
            if coloc is not None and self._colocation_stack and \
                    self._colocation_stack[-1][0] == coloc:
                depth = self._colocation_stack[-1][1]
            if coloc is None and self._colocation_stack:
                coloc, depth = self._colocation_stack[-1]
            if coloc is None and self._gradient_colocation:
                coloc, depth = self._gradient_colocation[-1]
            op = Operation(self, name, op_type, inputs, control, dict(attrs), "", coloc,
                           location or _user_location())
            op.device = self._device_for(op, depth if coloc is not None else 0)
            op.outputs = tuple(Tensor(op, i, dt, shp) for i, (dt, shp) in enumerate(output_specs))
            op._id = len(self._ops)
            overrides = getattr(self, "_override_stack", None)
            if overrides:  # gradient_override_map: this op's gradient by another name
                for mapping in reversed(overrides):
                    if op_type in mapping:
                        self.__dict__.setdefault("_gradient_overrides", {})[name] = \
                            mapping[op_type]
                        break
            self._ops.append(op)
            self._by_name[name] = op
            self.version += 1
            return op

    def _device_for(self, op: Operation, depth: int = 0) -> str:
        """The device of the device scopes from ``depth`` on (a colocated op only sees the
        scopes opened inside its colocate_with block)."""
        spec = DeviceSpec()
        for entry in self._device_stack[depth:]:
            if entry is None:
                spec = DeviceSpec()
            elif callable(entry):
                spec = DeviceSpec.parse(entry(op) or "").merged_over(spec)
            else:
                spec = entry.merged_over(spec)
        return spec.to_string()

    # ---- lookups ---------------------------------------------------------------------------
    def get_operations(self) -> list[Operation]:
        """The graph's ops, in the order they were made."""
        return list(self._ops)

    def get_operation_by_name(self, name: str) -> Operation:
        """The op named ``name``; ``NotFoundError`` if there is none."""
        from .errors import NotFoundError
        try:
            return self._by_name[name]
        except KeyError:
            raise NotFoundError(f"no operation named {name!r} in the graph") from None

    def get_tensor_by_name(self, name: str) -> Tensor:
        """The tensor ``"op_name:index"``; ``NotFoundError`` if there is none."""
        from .errors import NotFoundError
        op_name, _, idx = name.rpartition(":")
        if not op_name or not idx.isdigit():
            raise InvalidArgumentError(
                f"tensor name {name!r} must look like 'op_name:output_index'")
        op = self.get_operation_by_name(op_name)
        if int(idx) >= len(op.outputs):
            raise NotFoundError(f"op {op_name!r} has only {len(op.outputs)} outputs, "
                                f"asked for {name!r}")
        return op.outputs[int(idx)]

    def as_graph_element(self, obj):
        """``obj`` as a Tensor or Operation: either as is, a Variable's value, or the tensor
        (``"op:0"``) or op (``"op"``) of that name."""
        if isinstance(obj, (Tensor, Operation)):
            return obj
        if hasattr(obj, "_as_graph_element"):
            return obj._as_graph_element()
        if isinstance(obj, str):
            return self.get_tensor_by_name(obj) if ":" in obj else \
                self.get_operation_by_name(obj)
        raise TypeError(f"cannot interpret {obj!r} as a tensor or operation")

    def __len__(self):
        return len(self._ops)

    def finalize(self):
        """Make the graph read-only: adding an op afterwards raises (as ``MonitoredSession``
        does to catch ops built in a training loop)."""
        self._finalized = True

    @property
    def finalized(self):
        """Whether ``finalize()`` was called."""
        return self._finalized

    # ---- collections --------------------------------------------------------------------
    def add_to_collection(self, name: str, value) -> None:
        """Append ``value`` to collection ``name``."""
        self._collections.setdefault(name, []).append(value)

    def get_collection(self, name: str, scope: str | None = None) -> list:
        """The items of collection ``name`` (a copy); with ``scope``, only those whose
        ``name`` matches it from the start (TF's ``re.match``)."""
        items = list(self._collections.get(name, []))
        if scope is None:
            return items
        import re
        pat = re.compile(scope)
        return [x for x in items if hasattr(x, "name") and pat.match(x.name)]

    def get_collection_ref(self, name: str) -> list:
        """Collection ``name`` itself (appending to it adds to the collection)."""
        return self._collections.setdefault(name, [])

    def get_all_collection_keys(self) -> list:
        """The names of the collections holding something (TF's, as a list)."""
        return [k for k, v in self._collections.items() if v]

    def clear_collection(self, name: str) -> None:
        """Empty collection ``name``."""
        self._collections.pop(name, None)

    # ---- contexts -------------------------------------------------------------------------
    def as_default(self):
        """``with g.as_default():`` makes ``g`` the default graph of this thread."""
        return _default_graph_stack.get_controller(self)

    @contextlib.contextmanager
    def name_scope(self, name: str | None):
        """``with g.name_scope("layer1"):`` prefixes the names of ops made inside; ``None`` or
        ``""`` resets to the root, a name ending in ``/`` re-enters that scope."""
        old = self._name_stack
        if name is None or name == "":
            self._name_stack = ""
        elif name.endswith("/"):
            self._name_stack = name[:-1]
        else:
            self._name_stack = self.unique_name(name)
        try:
            yield self._name_stack + "/" if self._name_stack else ""
        finally:
            self._name_stack = old

    @contextlib.contextmanager
    def gradient_override_map(self, op_type_map: dict):
        """``with g.gradient_override_map({"Relu": "GuidedRelu"}):`` ops of those types made
        inside take their gradient from the function registered under the new name
        (``tv.RegisterGradient("GuidedRelu")``)."""
        if not isinstance(op_type_map, dict) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in op_type_map.items()):
            raise TypeError("op_type_map must be a dictionary mapping strings to strings")
        stack = self.__dict__.setdefault("_override_stack", [])
        stack.append(dict(op_type_map))
        try:
            yield
        finally:
            stack.pop()

    @contextlib.contextmanager
    def control_dependencies(self, control_inputs: Iterable | None):
        """``with g.control_dependencies([ops]):`` ops made inside run after those; ``None``
        clears the enclosing ones."""
        if control_inputs is None:
            saved, self._control_stack = self._control_stack, []
            try:
                yield
            finally:
                self._control_stack = saved
            return
        ops = []
        for c in control_inputs:
            c = self.as_graph_element(c)
            ops.append(c.op if isinstance(c, Tensor) else c)
        self._control_stack.append(ops)
        try:
            yield
        finally:
            self._control_stack.pop()

    @contextlib.contextmanager
    def device(self, spec):
        """``with g.device(spec):`` ops made inside ask for device ``spec`` (a string, a
        function of the op, or ``None`` to clear)."""
        if spec is not None and not callable(spec):
            spec = DeviceSpec.parse(spec)
        self._device_stack.append(spec)
        try:
            yield
        finally:
            self._device_stack.pop()

    @contextlib.contextmanager
    def colocate_with(self, target, ignore_existing: bool = False):
        """``with g.colocate_with(op):`` ops made inside are placed with ``op``, whatever the
        enclosing device scopes say."""
        depth = len(self._device_stack)
        if target is None:
            self._colocation_stack.append((None, 0))
        else:
            target = self.as_graph_element(target)
            op = target.op if isinstance(target, Tensor) else target
            self._colocation_stack.append((op.colocation or op.name, depth))
        try:
            yield
        finally:
            self._colocation_stack.pop()

    @contextlib.contextmanager
    def _colocate_gradients_with(self, op: Operation):
        self._gradient_colocation.append((op.colocation or op.name, len(self._device_stack)))
        try:
            yield
        finally:
            self._gradient_colocation.pop()

    # ``Graph.as_graph_def()`` (the JSON-able GraphDef-like dict) is installed by
    # ``tensorvm.framework.graph_def``, which owns serialisation (as operators are installed by the op
    # families): this module never imports it.

    def validate(self) -> None:
        """Check membership and topological order (like torch.fx's ``lint``)."""
        seen: set[int] = set()
        for op in self._ops:
            for t in list(op.inputs) + [c.outputs[0] if c.outputs else None
                                          for c in op.control_inputs]:
                if t is None:
                    continue
                if t.op.graph is not self:
                    raise GraphError(f"op {op.name!r} has an input from another graph", op)
                if t.op._id not in seen:
                    raise GraphError(f"op {op.name!r} uses {t.op.name!r} before it is defined",
                                     op)
            seen.add(op._id)

    def __repr__(self):
        return f"<tv.Graph #{self.uid} with {len(self._ops)} ops>"


class _DefaultStack(threading.local):
    """A stack of defaults, one per thread (TF's ``ops._DefaultStack``)."""

    def __init__(self):
        super().__init__()
        self.stack: list = []

    def get_default(self):
        return self.stack[-1] if self.stack else None

    @contextlib.contextmanager
    def get_controller(self, default):
        self.stack.append(default)
        try:
            yield default
        finally:
            # Remove this very entry (the innermost one that is ``default``), even if blocks
            # were exited out of order.
            for i in range(len(self.stack) - 1, -1, -1):
                if self.stack[i] is default:
                    del self.stack[i]
                    break


class _DefaultGraphStack(_DefaultStack):
    """Per-thread graph stacks over one process-wide global default graph (TF's rule: a thread
    with no ``as_default()`` block builds into the global default graph)."""

    _global: Graph | None = None
    _global_lock = threading.Lock()

    def get_default(self) -> Graph:
        if self.stack:
            return self.stack[-1]
        with _DefaultGraphStack._global_lock:
            if _DefaultGraphStack._global is None:
                _DefaultGraphStack._global = Graph()
            return _DefaultGraphStack._global

    def reset(self) -> None:
        if self.stack:
            raise AssertionError(
                "reset_default_graph() called inside a graph's as_default() block")
        with _DefaultGraphStack._global_lock:
            _DefaultGraphStack._global = Graph()


_default_graph_stack = _DefaultGraphStack()
# The default session stack lives beside the graph's (as in TF's ops.py), so that tensors can
# ``eval()`` without this module importing the session.
_default_session_stack = _DefaultStack()


def get_default_graph() -> Graph:
    """The innermost ``as_default()`` graph of this thread, else the global default graph."""
    return _default_graph_stack.get_default()


def reset_default_graph() -> None:
    """Replace the global default graph with a new, empty one."""
    _default_graph_stack.reset()


def get_default_session():
    """The innermost default session of this thread (``with sess:``/``sess.as_default()``/an
    ``InteractiveSession``), or None, as TF's ``tf.get_default_session()``."""
    return _default_session_stack.get_default()


def _session_for(what: str, session):
    sess = session if session is not None else get_default_session()
    if sess is None:
        raise ValueError(f"Cannot {what} using `eval()`/`run()`: No default session is "
                         "registered. Use `with sess.as_default()` or pass an explicit session "
                         "to eval(session=sess)")
    return sess


def name_scope(name: str | None, default_name: str | None = None, values=None):
    """``with tv.name_scope("layer1"):`` prefixes op names in the default graph."""
    return get_default_graph().name_scope(name if name is not None else default_name)


def control_dependencies(control_inputs):
    """``with tv.control_dependencies([op, ...]):`` — ops built inside run only after those ops
    (and tensors' ops) have run; ``None`` clears the enclosing ones.

    >>> import tensorvm as tv
    >>> with tv.Graph().as_default():
    ...     a = tv.constant(1.0, name="a")
    ...     with tv.control_dependencies([a]):
    ...         b = tv.constant(2.0, name="b")
    ...     [op.name for op in b.op.control_inputs]
    ['a']
    """
    return get_default_graph().control_dependencies(control_inputs)


def device(spec):
    """``with tv.device("/job:ps/task:0"):`` — a device string, a callable(op) -> str, or None
    to clear. A malformed string raises InvalidArgumentError here, at the ``with`` line."""
    return get_default_graph().device(spec)


def colocate_with(op, ignore_existing: bool = False):
    """``with tv.colocate_with(op_or_tensor):`` — ops built inside are placed on the same device
    as ``op`` (one colocation group); as in TF, the enclosing ``tv.device`` scopes are ignored
    inside, and a conflicting device is an error unless soft placement is on."""
    return get_default_graph().colocate_with(op, ignore_existing)


def set_random_seed(seed: int) -> None:
    """Set the default graph's random seed (TF's graph-level seed): random ops built afterwards
    without a seed of their own derive one from it, so a program draws the same values each
    time it runs (successive runs of one op still draw fresh values)."""
    get_default_graph().seed = int(seed)
