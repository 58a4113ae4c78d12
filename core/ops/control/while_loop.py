"""``tv.while_loop`` as one functional op (TF's ``While``/``StatelessWhile``): the cond and body
functions are traced once into graphs of their own (:class:`FuncGraph`), and the op's kernel
runs them, compiled to one stage program each, inside the stage task that holds the loop. A
cond or body whose ops are pinned to several devices compiles to a plan of several devices
(a :class:`Frame`: TF's graph_partition.cc copy of the frame per device, values crossing
devices as the plan's Send/Recv pairs); the loop op sits where its cond computes the
predicate, and each iteration runs every device's part on that device's resources.

Tensors from outside that the cond or body read are *captured*: they become extra inputs of
the op (TF's Enter of a loop invariant). A loop variable whose dtype or static shape the body
changes is refused when the loop is built (``shape_invariants`` allows a shape to vary), and
a shape outside the invariant at run time fails the step naming the frame.

A Variable read in the body is read each time the body's read runs, as TF 1.x reads a ref
variable in a loop: the body's ``v`` is a ``LoopVariableRead`` of the variable, and an op
made under ``control_dependencies([update])`` in the body reads it anew after the update
(``v.read_value()``, ``tv.identity(v)``, ``v + 0``) — that read is colocated with the
variable, so a PS variable updated by a loop on a worker is read where it lives each
iteration. The variable is also captured like any
outside tensor (its value at loop entry: its gradient reaches the variable through that
input); where the variable lives on another device than the loop (a PS), the loop reads that
entry value, sent once. An update of a Variable built in the body (``v.assign_add(1)``) runs
in every iteration that needs it.

Gradients (``back_prop=True``): the op also outputs its *tape*, the loop variables entering
each iteration (TF's gradient stacks, one per frame); ``WhileGrad`` walks it backwards running
the body's gradient program (built by ``tv.gradients`` inside the body's graph, which
recomputes the body's intermediates from the taped loop variables). A loop across worker
processes keeps one tape per device (:mod:`tensorvm.ops.control.while_frames`).

>>> import tensorvm as tv
>>> i, s = tv.while_loop(lambda i, s: i < 5, lambda i, s: (i + 1, s + i), [0, 0])
>>> with tv.Session() as sess: [int(v) for v in sess.run([i, s])]
[5, 10]
"""
from __future__ import annotations

import numpy as np

from ...framework import dtypes as _dt
from ...vm import interpreter as _runtime
from ...framework.device_spec import DeviceSpec
from ...framework.errors import InvalidArgumentError, NotFoundError
from ...framework.graph import Graph, Operation, Tensor, _user_location, get_default_graph
from ...vm.kernels.array_api import array_namespace, is_device_array, to_device, to_host
from ...framework.op_def_library import apply_op
from ...framework.op_registry import generation, register_op, registry
from ...vm.interpreter import execute, execute_local, local_caller
from ...vm.program import Feed
from ...vm.services import service
from ...framework.tensor_conversion import convert_to_tensor
from .while_frames import (SHARDED_TAPE, Frame, frame_devices, home_tape, in_dask_worker,
                           run_sharded, run_sharded_grad)

__all__: list[str] = []  # while_loop is exported by control_flow_ops

variant = _dt.DType("variant", np.dtype(object))  # the tape: a Python list, never a tensor


class FuncGraph(Graph):
    """A graph traced from a Python function: inputs are placeholders, and tensors of the
    enclosing graph are captured as further placeholders (``captures``: outer -> inner)."""

    def __init__(self, outer: Graph, name: str):
        super().__init__()
        self.outer = outer
        self.name = name
        self.seed = outer.seed
        self.captures: dict[Tensor, Tensor] = {}
        self.capture_ops: set[int] = set()  # ids of the capture placeholders
        self.outer_controls: list[Operation] = []  # outside ops the function waits for
        self.var_reads: dict[Tensor, Tensor] = {}  # a captured variable -> its read in here

    def capture(self, t: Tensor) -> Tensor:
        if t.graph is self:
            return t
        if t.graph is not self.outer:
            if not hasattr(self.outer, "capture"):
                raise InvalidArgumentError(f"{self.name}: tensor {t.name!r} is from a graph "
                                           "outside the loop's graph")
            t = self.outer.capture(t)
        ph = self.captures.get(t)
        if ph is None:
            from ..array.array_ops import placeholder
            # An input of the whole function, outside any cond branch being built in it.
            saved, self._tls.control_flow_context = self._tls.control_flow_context, None
            try:
                with self.as_default(), self.name_scope(None), \
                        self.control_dependencies(None):
                    ph = placeholder(t.dtype, t._shape, name="capture")
                    if t.op.type in _VARIABLE_REFS:  # read each time it runs (TF's ref)
                        self.var_reads[t] = self._var_read(t.op, ph)
            finally:
                self._tls.control_flow_context = saved
            self.captures[t] = ph
            self.capture_ops.add(ph.op._id)
        return self.var_reads.get(t, ph)

    def _var_read(self, var_op: Operation, entry: Tensor, on_var_device: bool = False) -> Tensor:
        """A ``LoopVariableRead`` of ``var_op``'s variable, ``entry`` its value at loop
        entry, made in the current control dependencies. ``on_var_device``: colocated with
        the variable (a read after an update in the loop reads the variable where it lives,
        each iteration, however the loop spans devices)."""
        attrs = {k: var_op.attrs[k] for k in ("var_name", "container", "dtype", "shape")}
        coloc = None
        if on_var_device:
            coloc = var_op.name if var_op.type == "VariableV2" else var_op.colocation
        return super().create_op("LoopVariableRead", [entry], attrs,
                                 [(entry.dtype, entry._shape)],
                                 name=f"{attrs['var_name']}/read_in_loop",
                                 colocation=coloc).outputs[0]

    def _owner_of(self, read: Tensor) -> Operation:
        """The variable op (outside) whose capture-time read ``read`` is."""
        for outer, r in self.var_reads.items():
            if r is read:
                return outer.op
        return read.op

    def create_op(self, op_type, inputs, attrs, output_specs, name=None, location=None,
                  colocation=None):
        """An op made under ``control_dependencies`` in here reads a variable anew, after
        them (TF 1.x reads a ref variable when its consumer runs)."""
        if op_type != "LoopVariableRead" and any(self._control_stack) and \
                any(t.op.type == "LoopVariableRead" for t in inputs):
            inputs = [self._var_read(self._owner_of(t), t.op.inputs[0], True)
                      if t.op.type == "LoopVariableRead" else t for t in inputs]
        return super().create_op(op_type, inputs, attrs, output_specs, name=name,
                                 location=location, colocation=colocation)

    def control_dependencies(self, control_inputs):
        """Outside ops among ``control_inputs`` become control inputs of the loop op itself
        (they run before the loop starts); the function's own ops stay."""
        if control_inputs is None:
            return super().control_dependencies(None)
        inner = []
        for c in control_inputs:
            el = c._as_graph_element() if hasattr(c, "_as_graph_element") else c
            op = el.op if isinstance(el, Tensor) else el
            if isinstance(op, Operation) and op.graph is not self:
                if op not in self.outer_controls:
                    self.outer_controls.append(op)
            else:
                inner.append(c)
        return super().control_dependencies(inner)

    def stateful(self) -> bool:
        return any(registry[op.type].stateful for op in self._ops)


class Func:
    """A traced function as plain data: its graph's nodes, the placeholders it is fed and the
    tensors it returns. Compiled once per device to one stage program (the graph itself is not
    shipped: a pickled Func keeps the nodes only)."""

    def __init__(self, graph: FuncGraph, inputs: list[Tensor], outputs: list[Tensor],
                 frame: str, location: str, host_ints: bool = False):
        from ...framework.graph_def import Node, snapshot
        self.graph = graph
        # A loop's cond and body: their int32 feeds (counters, indices) are host values on a
        # GPU too (_while_kernel keeps them there), so their int32 arithmetic and compares
        # run on the host and the predicate needs no copy (TF's int32 rule).
        self.host_ints = host_ints
        self.nodes = snapshot(graph)
        # Outside ops the function's ops colocate with (a Variable its body updates), as
        # stubs with their devices: placement puts the colocated ops where their state is.
        root = _root(graph)
        self.owners = {}
        for n in self.nodes.values():
            if n.colocation and n.colocation not in self.nodes and \
                    n.colocation not in self.owners:
                try:
                    dev = root.get_operation_by_name(n.colocation).device
                except NotFoundError:  # a group of the function's own
                    continue
                self.owners[n.colocation] = Node(n.colocation, "NoOp", device=dev,
                                                 num_outputs=0)
        self.feeds = [(t.op.name, t.value_index) for t in inputs]
        self.fetches = [(t.op.name, t.value_index) for t in outputs]
        self.frame = frame
        self.location = location
        # Tensors of the function's own ops its gradient reads (TF's gradient stacks): the
        # program returns them after ``fetches``, and the loop tapes them per iteration, so the
        # gradient need not recompute them. Only grows (a later gradient appends).
        self.taped: list[tuple[str, int]] = []
        # A body's gradient functions (a loop across worker processes hands each device the
        # loop values its gradient's part reads, and tapes them there).
        self.grads: list = []
        self._programs: dict[tuple, tuple] = {}
        self._calls: dict[tuple, tuple] = {}  # (device, taped) -> (program, args, picks)

    def __getstate__(self):
        return {k: v for k, v in self.__dict__.items()
                if k not in ("graph", "_programs", "_calls")}

    def __setstate__(self, state):
        self.__dict__.update(state)
        self.__dict__.setdefault("taped", [])
        self.__dict__.setdefault("host_ints", False)
        self.__dict__.setdefault("grads", [])
        self.graph = None
        self._programs = {}
        self._calls = {}

    def __repr__(self):
        return f"<Func {self.frame} {len(self.nodes)} ops>"

    def frame_devices(self, device: str, cond: "Func | None" = None) -> tuple:
        """The devices of the loop frame this body and ``cond`` (or this gradient function)
        make on ``device`` (sorted; () where all run on one device)."""
        return frame_devices([f for f in (cond, self) if f is not None], device)

    def tape(self, refs) -> list[int]:
        """Ask the program to also return ``refs`` (tensors of its own ops) after its
        fetches; returns their indices among the taped values."""
        out = []
        for ref in refs:
            if ref not in self.taped:
                self.taped.append(ref)
            out.append(self.taped.index(ref))
        return out

    def int_feeds(self) -> tuple[int, ...]:
        """Positions of the int32 feeds (a loop keeps them on the host: ``host_ints``)."""
        return tuple(i for i, (nm, k) in enumerate(self.feeds)
                     if k < len(self.nodes[nm].out_dtypes)
                     and self.nodes[nm].out_dtypes[k] == _dt.int32)

    def program(self, device: str):
        key = (device, len(self.taped))
        got = self._programs.get(key)
        if got is None:
            host_feeds = [self.feeds[i] for i in self.int_feeds()] if self.host_ints else ()
            # on a GPU the outputs stay device arrays: the loop's next iteration reads them
            plan = service("plan_body")(self.nodes, self.owners,
                                        tuple(self.fetches) + tuple(self.taped),
                                        tuple(self.feeds), device, host_feeds)
            if len(plan.devices) > 1:  # a frame across devices: each device's part
                got = (Frame(plan, self.frame, self.location), plan.fetches)
            else:
                got = (plan.tasks[0] if plan.tasks else None, plan.fetches)
            self._programs[key] = got
        return got

    def call(self, ctx, feeds: list, local: bool = False) -> list:
        """Run the program on ``feeds`` (one value per feed); returns the fetches' values,
        then the taped tensors'. The program's argument and result positions are resolved
        once per compiled program (a loop calls this every iteration). ``local``: the feeds
        are values the step's own kernels made in this process (runtime.execute_local)."""
        got = self._calls.get((ctx.device, len(self.taped)))
        if got is None:
            got = self._call_plan(ctx.device)
        program, arg_idx, picks, fast = got
        if program.__class__ is Frame:
            return program.run(ctx, feeds)
        if local and program is not None:
            gen = fast[0]  # [(generation, function) or None, calls so far]
            if gen is not None and gen[0] == generation():
                out = gen[1](feeds, ctx.rt, ctx.step_id)
                if out is not None:
                    return out
            else:
                if gen is not None:  # a kernel was registered since: generated again
                    fast[0], fast[1] = None, 0
                fast[1] += 1
                if fast[1] == _runtime.STRAIGHT_LINE_AFTER:  # called often: generated
                    fast[0] = local_caller(program, arg_idx, picks)
        if program is None:
            return [feeds[i] for _, i in picks]
        vals = (execute_local if local else execute)(program, ctx.rt, ctx.step_id,
                                                     [feeds[i] for i in arg_idx])
        return [feeds[i] if from_feed else vals[i] for from_feed, i in picks]

    def feeds_read(self, device: str) -> frozenset:
        """Positions of the feeds the program on ``device`` (one device) reads."""
        got = self._calls.get((device, len(self.taped))) or self._call_plan(device)
        return frozenset(got[1]) | {i for from_feed, i in got[2] if from_feed}

    def _call_plan(self, device: str):
        task, fetches = self.program(device)
        if task.__class__ is Frame:
            got = (task, (), (), None)
        elif task is None:
            got = (None, (), tuple((True, f.index) for f in fetches), None)
        else:
            exports = task.program.exports
            arg_idx = tuple(a.index for a in task.args)  # a one-device plan: Feeds only
            picks = tuple((True, f.index) if f.__class__ is Feed else (False, exports[f.index])
                          for f in fetches)
            got = (task.program, arg_idx, picks, [None, 0])
        self._calls[(device, len(self.taped))] = got
        return got


# ---- tracing ---------------------------------------------------------------------------------
def _trace(outer, name, fn, loop_vars, structure_of, pack_as, flatten):
    from ..array.array_ops import placeholder
    fg = FuncGraph(outer, name)
    with fg.as_default():
        phs = [placeholder(t.dtype, t._shape, name="loop_var") for t in loop_vars]
        packed = _as_arrays(structure_of, pack_as(structure_of, phs))
        res = fn(*packed) if isinstance(packed, (list, tuple)) else fn(packed)
    return fg, phs, res


def _compatible(shape, invariant) -> bool:
    if invariant is None:
        return True
    if shape is None or len(shape) != len(invariant):
        return False
    return all(b is None or a == b for a, b in zip(shape, invariant))


def _loop_devices(graphs, root: Graph) -> set:
    """Explicit devices of the traced graphs' ops (and of the outside ops they colocate
    with)."""
    out = set()
    for fg in graphs:
        for op in fg._ops:
            dev = op.device
            if op.colocation and not dev:
                try:
                    dev = root.get_operation_by_name(op.colocation).device
                except NotFoundError:  # an inner group: no device of its own
                    dev = ""
            if dev:
                out.add(DeviceSpec.parse(dev).to_string())
    return out


def while_loop(cond, body, loop_vars, shape_invariants=None, parallel_iterations: int = 10,
               back_prop: bool = True, swap_memory: bool = False, name=None,
               maximum_iterations=None, return_same_structure: bool = False):
    """Repeat ``body`` while ``cond`` is true (TF 1.x's ``tf.while_loop``).

    ``loop_vars`` is a (nested) list/tuple/dict of tensors; ``body`` returns the same
    structure with the same dtypes and, unless ``shape_invariants`` says otherwise, the same
    static shapes. ``maximum_iterations`` bounds the trip count. ``parallel_iterations``: how
    many iterations of a loop across worker processes may overlap where they are independent
    (:mod:`tensorvm.ops.control.while_pipeline`); elsewhere iterations run one after another
    in the loop's task. ``swap_memory`` is accepted.
    A single loop variable comes back bare unless ``return_same_structure``.
    """
    from .control_flow_ops import flatten, pack_as, structure
    _check_loop_args(cond, body, loop_vars)
    where = _user_location()
    flat = [convert_to_tensor(_flow_of(v)) for v in flatten(loop_vars)]
    g = get_default_graph()
    if not hasattr(g, "capture"):  # not inside another loop's body: the loop vars' graph
        g = flat[0].graph
    with g.as_default(), g.name_scope(name or "while") as scope:
        frame = scope.rstrip("/")
        flat = [g.capture(t) if hasattr(g, "capture") else t for t in flat]
        invariants = _invariants(flat, shape_invariants, frame, where, flatten)
        # Trace with the invariant shapes, so the body sees what may vary as unknown.
        entry = [_with_shape(t, inv) for t, inv in zip(flat, invariants)]
        cfg, c_phs, c_out = _trace_cond(g, frame, cond, entry, loop_vars, where, pack_as,
                                        flatten)
        bfg, b_phs, b_out = _trace_body(g, frame, body, entry, loop_vars, where, pack_as,
                                        flatten, structure)
        _check_body_outputs(flat, b_out, invariants, frame, where)
        cfunc = Func(cfg, c_phs + list(cfg.captures.values()), [c_out], frame, where,
                     host_ints=True)
        bfunc = Func(bfg, b_phs + list(bfg.captures.values()), b_out, frame, where,
                     host_ints=True)
        op = _loop_op(g, flat, cfunc, bfunc, invariants, frame, maximum_iterations,
                      back_prop, parallel_iterations)
    outs = list(op.outputs[:len(flat)])
    result = _as_arrays(loop_vars, pack_as(loop_vars, outs))
    if not return_same_structure and isinstance(result, (list, tuple)) and len(flat) == 1 \
            and len(result) == 1:
        return result[0]
    return result


def _check_loop_args(cond, body, loop_vars) -> None:
    if not callable(cond):
        raise TypeError("cond must be callable.")
    if not callable(body):
        raise TypeError("body must be callable.")
    if isinstance(loop_vars, (list, tuple)) and not loop_vars:
        raise ValueError("No loop variables provided")


def _invariants(flat, shape_invariants, frame, where, flatten) -> list:
    """The static shape each loop variable keeps across iterations (its entry shape unless
    ``shape_invariants`` relaxes it); refuses an entry shape outside its invariant."""
    if shape_invariants is None:
        return [t._shape for t in flat]
    invariants = [None if s is None or getattr(s, "dims", ()) is None else  # unknown
                  tuple(s.dims if hasattr(s, "dims") else s)
                  for s in flatten(_shapes_as_leaves(shape_invariants))]
    if len(invariants) != len(flat):
        raise InvalidArgumentError(f"while_loop {frame!r}: {len(invariants)} shape "
                                   f"invariants for {len(flat)} loop variables")
    for t, inv in zip(flat, invariants):
        if not _compatible(t._shape, inv):
            raise InvalidArgumentError(
                f"while_loop {frame!r}: loop variable {t.name!r} enters the loop with "
                f"shape {_shape_str(t._shape)}, which is not compatible with its shape"
                f" invariant {_shape_str(inv)} (while_loop at {where})")
    return invariants


def _trace_cond(g, frame, cond, entry, loop_vars, where, pack_as, flatten):
    """``cond`` traced into a graph of its own: ``(graph, placeholders, predicate)``."""
    cfg, c_phs, c_out = _trace(g, frame + "/cond", cond, entry, loop_vars, pack_as, flatten)
    with cfg.as_default():
        c_out = convert_to_tensor(c_out)
    if c_out.dtype != _dt.bool_ or c_out._shape not in (None, ()):
        raise InvalidArgumentError(
            f"while_loop {frame!r}: cond must return a scalar bool tensor, got "
            f"{c_out.dtype.name} of shape {_shape_str(c_out._shape)} (while_loop at "
            f"{where})")
    return cfg, c_phs, c_out


def _trace_body(g, frame, body, entry, loop_vars, where, pack_as, flatten, structure):
    """``body`` traced into a graph of its own: ``(graph, placeholders, flat outputs)``."""
    bfg, b_phs, b_res = _trace(g, frame + "/body", body, entry, loop_vars, pack_as, flatten)
    if len(entry) == 1 and not isinstance(b_res, (list, tuple)) and \
            isinstance(loop_vars, (list, tuple)):
        b_res = [b_res]
    if structure(b_res) != structure(loop_vars) and \
            len(flatten(b_res)) != len(entry):
        raise InvalidArgumentError(
            f"while_loop {frame!r}: body must return the structure of loop_vars "
            f"({len(entry)} values), got {len(flatten(b_res))} (while_loop at {where})")
    with bfg.as_default():
        b_out = [_body_output(x) for x in flatten(b_res)]
    return bfg, b_phs, b_out


def _check_body_outputs(flat, b_out, invariants, frame, where) -> None:
    """Refuse a body that changes a loop variable's dtype, or its shape beyond the
    invariant."""
    for t, o, inv in zip(flat, b_out, invariants):
        if o.dtype != t.dtype:
            raise InvalidArgumentError(
                f"while_loop {frame!r}: loop variable {t.name!r} enters the loop as "
                f"{t.dtype.name} but the body returns {o.dtype.name} for it (while_loop "
                f"at {where})")
        if not _compatible(o._shape, inv):
            raise InvalidArgumentError(
                f"while_loop {frame!r}: input tensor {t.name!r} enters the loop with "
                f"shape {_shape_str(inv)}, but has shape {_shape_str(o._shape)} after one "
                "iteration. To allow the shape to vary across iterations, use the "
                f"`shape_invariants` argument of tv.while_loop (while_loop at {where})")


def _loop_op(g, flat, cfunc, bfunc, invariants, frame, maximum_iterations, back_prop,
             parallel_iterations) -> Operation:
    """The While (or StatelessWhile) op over the traced ``cfunc`` and ``bfunc``, its inputs
    the loop variables, then the captures of cond and body, then the iteration bound."""
    cfg, bfg = cfunc.graph, bfunc.graph
    devices = _loop_devices([cfg, bfg], _root(g))
    c_caps, b_caps = list(cfg.captures), list(bfg.captures)
    inputs = flat + c_caps + b_caps
    if maximum_iterations is not None:
        inputs.append(convert_to_tensor(maximum_iterations, dtype=_dt.int64)
                      if not isinstance(maximum_iterations, Tensor) else
                      maximum_iterations)
    op_type = "While" if cfg.stateful() or bfg.stateful() else "StatelessWhile"
    attrs = {"cond": cfunc, "body": bfunc, "n": len(flat), "ncc": len(c_caps),
             "nbc": len(b_caps), "has_max": maximum_iterations is not None,
             "back_prop": bool(back_prop), "parallel_iterations": int(parallel_iterations),
             "shapes": tuple(invariants), "frame": frame}
    # Outside ops the cond or body waited for: the loop op waits for them (in a nested
    # loop, ops from further out are passed on to the enclosing loop's op).
    with g.control_dependencies(cfg.outer_controls + bfg.outer_controls):
        op = apply_op(op_type, inputs, attrs, name="While")
    if devices and not op.device:
        # The loop op (its iteration driver, TF's pivot) goes where its cond computes the
        # predicate; else where its body's state is. A frame over several devices runs
        # each device's part of every iteration there (:class:`Frame`).
        pred_dev = _loop_devices([cfg], _root(g))
        op._set_device(sorted(pred_dev or devices)[0])
    return op


def _root(g):
    while hasattr(g, "outer"):
        g = g.outer
    return g


def _shapes_as_leaves(s):
    """Shape invariants with each shape as one leaf (a TensorShape or a list of dims)."""
    from ...framework.graph import TensorShape
    if isinstance(s, TensorShape) or s is None:
        return s
    if isinstance(s, (list, tuple)) and all(d is None or isinstance(d, (int, np.integer))
                                            for d in s):
        return TensorShape(s)
    if isinstance(s, dict):
        return {k: _shapes_as_leaves(v) for k, v in s.items()}
    return type(s)(_shapes_as_leaves(v) for v in s) if not hasattr(s, "_fields") else \
        type(s)(*[_shapes_as_leaves(v) for v in s])


def _with_shape(t: Tensor, shape):
    if shape == t._shape:
        return t
    return _Spec(t.dtype, shape)


class _Spec:
    """A loop variable's dtype and invariant shape, for tracing."""

    def __init__(self, dtype, shape):
        self.dtype, self._shape = dtype, shape


def _flow_of(x):
    """A TensorArray loop variable is carried as its flow tensor (TF's rule)."""
    return x.flow if hasattr(x, "_with_flow") else x


def _as_arrays(template, packed):
    """``packed`` with a TensorArray (of ``template``'s lineage) wherever ``template`` has
    one: the loop's TensorArrays come back TensorArrays, in the body and after the loop."""
    if hasattr(template, "_with_flow"):
        return template._with_flow(packed)
    if isinstance(template, dict):
        return {k: _as_arrays(template[k], packed[k]) for k in template}
    if isinstance(template, (list, tuple)) and isinstance(packed, (list, tuple)):
        vals = [_as_arrays(t, p) for t, p in zip(template, packed)]
        return type(packed)(*vals) if hasattr(packed, "_fields") else type(packed)(vals)
    return packed


def _body_output(x):
    x = _flow_of(x)
    if isinstance(x, Operation):
        raise InvalidArgumentError(f"while_loop: body returned an operation ({x.name}); "
                                   "return tensors")
    return convert_to_tensor(x)


def _shape_str(shape) -> str:
    if shape is None:
        return "<unknown>"
    return "(" + ", ".join("?" if d is None else str(d) for d in shape) + \
        ("," if len(shape) == 1 else "") + ")"


# ---- a variable read in a loop ---------------------------------------------------------------
_VARIABLE_REFS = ("VariableV2", "LoopVariableRead")  # tensors that are a variable (TF's refs)


def _loop_read_kernel(ctx, entry, *, var_name, container, dtype, shape):
    """The variable's value now, where it lives on the loop's device; else its value at loop
    entry (``entry``: a variable on another device is sent once, as a captured tensor)."""
    try:
        var = ctx.resources.lookup(container, var_name)
    except NotFoundError:
        return entry
    read = getattr(var, "read_locked", None)
    return entry if read is None else read()


# Not stateful (a loop that only reads stays a StatelessWhile) but never folded or merged:
# two reads of one variable in a body may see different values.
register_op("LoopVariableRead", lambda inputs, attrs: [(attrs["dtype"], inputs[0]._shape)],
            _loop_read_kernel, needs_ctx=True, foldable=False, grad=lambda op, g: [g],
            gpu_fallback=True)


# ---- the While op ----------------------------------------------------------------------------
def _while_shape(inputs, attrs):
    n = attrs["n"]
    specs = [(t.dtype, s) for t, s in zip(inputs[:n], attrs["shapes"])]
    return specs + [(variant, ())]


def _check_shape(v, inv, i, frame):
    if inv is None:
        return
    shp = np.shape(v)
    if len(shp) != len(inv) or any(b is not None and a != b for a, b in zip(shp, inv)):
        raise InvalidArgumentError(
            f"while_loop {frame!r}: loop variable {i} has shape {list(shp)} after an "
            f"iteration, outside its shape invariant {_shape_str(inv)}")


def _while_kernel(ctx, *ins, cond, body, n, ncc, nbc, has_max, back_prop, parallel_iterations,
                  shapes, frame, frame_devices=(), home=None):
    if frame_devices:  # split by the partition pass (a loop across devices)
        if in_dask_worker():
            return run_sharded(ctx, ins, cond=cond, body=body, n=n, ncc=ncc, nbc=nbc,
                               has_max=has_max, frame=frame, home=home or ctx.device,
                               devices=frame_devices, tag=frame, window=parallel_iterations)
        if home is not None:  # in process the home's kernel runs every device's part
            return ()
    vals = list(ins[:n])
    ccaps = list(ins[n:n + ncc])
    bcaps = list(ins[n + ncc:n + ncc + nbc])
    limit = int(to_host(ins[-1])) if has_max else None
    tape = [] if back_prop else None
    # On a GPU the loop's values stay on the device, except its int32 values (counters,
    # indices), kept on the host as TF keeps int32: the cond and body were compiled so
    # (Func.host_ints), and the predicate of a counter's compare is then a host value.
    on_device = "GPU" in ctx.device
    host_ints = [k for k in body.int_feeds() if k < n] if on_device else ()
    if on_device:  # (the inputs are in host memory already: partition)
        for k in host_ints:
            vals[k] = to_host(vals[k])
        c_ints, b_ints = cond.int_feeds(), body.int_feeds()
        ccaps = [to_host(v) if n + j in c_ints else v for j, v in enumerate(ccaps)]
        bcaps = [to_host(v) if n + j in b_ints else v for j, v in enumerate(bcaps)]
    checks = [(k, inv) for k, inv in enumerate(shapes) if inv is not None]
    i = 0
    while limit is None or i < limit:
        p = cond.call(ctx, vals + ccaps, True)[0]
        if not (bool(p) if p.__class__ in _HOST_PREDICATES else bool(np.asarray(to_host(p)))):
            break
        new = body.call(ctx, vals + bcaps, True)
        kept = ()
        if len(new) > n:  # the taped tensors the gradient reads
            kept = new[n:]
            del new[n:]
        if tape is not None:
            tape.append((vals, kept))
        for k in host_ints:  # a host scalar stays a host array; a body that made its
            if new[k].__class__ is not np.ndarray:  # counter on the device: back to the host
                new[k] = np.asarray(to_host(new[k]))
        vals = [v if v.__class__ is np.ndarray else _loop_value(v, on_device) for v in new]
        for k, inv in checks:
            v = vals[k]
            if v.__class__ is np.ndarray and v.shape == inv:
                continue  # exactly the invariant
            if not inv and getattr(v, "_tv_loop_value", False):
                continue  # a TensorArray's value: a scalar
            _check_shape(v, inv, k, frame)
        i += 1
    return tuple(vals) + (tape,)


_HOST_PREDICATES = (np.bool_, np.ndarray, bool)  # a predicate bool() reads as it is


def _loop_value(v, on_device: bool):
    """A body output as the next iteration's value: an array on the loop's device (a kernel
    may return a NumPy scalar)."""
    if type(v) is np.ndarray or is_device_array(v) or getattr(v, "_tv_loop_value", False):
        return v  # an array, or a TensorArray's value (carried as is)
    v = np.asarray(v)
    return to_device(v) if on_device else v


def _while_grad(op, *grads):
    from ..gradients import densify, gradients
    from ..array.array_ops import placeholder, zeros_like
    a = op.attrs
    n, ncc, nbc = a["n"], a["ncc"], a["nbc"]
    nones = [None] * len(op.inputs)
    if not a["back_prop"]:
        return nones
    body: Func = a["body"]
    fg = body.graph
    if fg is None:
        raise InvalidArgumentError(f"while_loop {a['frame']!r}: its body graph is gone (a "
                                   "loop read back from a GraphDef has no gradient)")
    phs = [fg.get_tensor_by_name(f"{nm}:{i}") for nm, i in body.feeds]
    outs = [fg.get_tensor_by_name(f"{nm}:{i}") for nm, i in body.fetches]
    fv = [i for i in range(n) if op.outputs[i].dtype.is_differentiable]
    fc = [j for j in range(nbc) if phs[n + j].dtype.is_differentiable]
    if not fv or all(grads[i] is None for i in fv):
        return nones
    with fg.as_default():
        first_new = len(fg._ops)
        gys = [placeholder(outs[i].dtype, outs[i]._shape, name="grad_y") for i in fv]
        xs = [phs[i] for i in fv] + [phs[n + j] for j in fc]
        dxs = gradients([outs[i] for i in fv], xs, grad_ys=gys)
        dxs = [zeros_like(x) if d is None else densify(d, x) for d, x in zip(dxs, xs)]
    # The body's own tensors the gradient ops read are taped by the forward loop (TF's
    # gradient stacks) and fed to the gradient program, which then does not recompute them.
    taped = _taped_reads(fg._ops[first_new:], body)
    tape_idx = body.tape([(t.op.name, t.value_index) for t in taped])
    gfunc = Func(fg, phs + gys + taped, dxs, a["frame"] + "/grad", op.location)
    body.grads.append(gfunc)
    g_in = [zeros_like(op.outputs[i]) if grads[i] is None else densify(grads[i], op.outputs[i])
            for i in fv]
    bcaps = list(op.inputs[n + ncc:n + ncc + nbc])
    gop = apply_op("WhileGrad", bcaps + [op.outputs[n]] + g_in,
                   {"grad": gfunc, "nbc": nbc, "nv": len(fv), "fc": tuple(fc),
                    "frame": a["frame"], "tape_idx": tuple(tape_idx)}, name="WhileGrad")
    out = list(nones)
    for k, i in enumerate(fv):
        out[i] = gop.outputs[k]
    for k, j in enumerate(fc):
        out[n + ncc + j] = gop.outputs[len(fv) + k]
    return out


def _taped_reads(grad_ops, body: Func) -> list[Tensor]:
    """Tensors of the body's forward ops (not its inputs, not constants) that ``grad_ops``
    read, in first-read order."""
    feeds = {nm for nm, _ in body.feeds}
    out: dict[Tensor, None] = {}
    for gop in grad_ops:
        for t in gop.inputs:
            name = t.op.name
            if name in body.nodes and name not in feeds and t.op.type != "Const":
                out[t] = None
    return list(out)


def _while_grad_shape(inputs, attrs):
    nbc = attrs["nbc"]
    g_in = inputs[nbc + 1:]
    return [(t.dtype, t._shape) for t in g_in] + \
        [(inputs[j].dtype, inputs[j]._shape) for j in attrs["fc"]]


def _while_grad_kernel(ctx, *ins, grad, nbc, nv, fc, frame, tape_idx=(), frame_devices=(),
                       home=None):
    if frame_devices:  # split by the partition pass (a loop across devices)
        if in_dask_worker():
            return run_sharded_grad(ctx, ins, grad=grad, nbc=nbc, nv=nv, fc=fc, frame=frame,
                                    tape_idx=tape_idx, home=home or ctx.device,
                                    devices=frame_devices)
        if home is not None:  # in process the home's kernel runs every device's part
            return ()
    bcaps = list(ins[:nbc])
    tape = ins[nbc]
    gys = list(ins[nbc + 1:])
    acc = [None] * len(fc)
    if tape is None:
        raise InvalidArgumentError(f"while_loop {frame!r} was built with back_prop=False")
    if tape is SHARDED_TAPE:  # the loop ran sharded; its gradient runs here only
        tape = home_tape(ctx, frame)
    owned = [False] * len(fc)  # acc[k] is an array this kernel made (summed into in place)
    for vals, kept in reversed(tape):
        out = grad.call(ctx, vals + bcaps + gys + [kept[i] for i in tape_idx], True)
        gys = out[:nv]
        for k in range(len(fc)):
            s, d = acc[k], out[nv + k]
            if s is None:
                acc[k] = d
            elif owned[k] and d.__class__ is np.ndarray and s.shape == d.shape and \
                    s.dtype == d.dtype:
                np.add(s, d, out=s)  # the same sums as s + d, without a new array each time
            else:
                acc[k] = s = s + d
                owned[k] = s.__class__ is np.ndarray
    acc = [array_namespace(bcaps[j]).zeros_like(bcaps[j]) if s is None else s
           for s, j in zip(acc, fc)]
    out = tuple(gys) + tuple(acc)
    return out[0] if len(out) == 1 else out  # one output: its value, not a 1-tuple


for _t, _stateful in (("While", True), ("StatelessWhile", False)):
    register_op(_t, _while_shape, _while_kernel, grad=_while_grad, stateful=_stateful,
                needs_ctx=True, foldable=False)
# One other device's copy of a loop frame that spans devices (made by the partition pass:
# tensorvm.passes.partition.split_frames); no outputs: the loop op on its home outputs.
register_op("WhileShard", lambda inputs, attrs: [], _while_kernel, stateful=True,
            needs_ctx=True, foldable=False)
register_op("WhileGrad", _while_grad_shape, _while_grad_kernel, needs_ctx=True,
            foldable=False)
register_op("WhileGradShard", lambda inputs, attrs: [], _while_grad_kernel, stateful=True,
            needs_ctx=True, foldable=False)


# ---- plain-data form (for tensorvm.framework.graph_def's JSON; nothing here is code) ------------------
def func_to_plain(func: Func, node_dict) -> dict:
    """``func`` as JSON-able data: its ops as nested node dicts (``node_dict(name, type,
    inputs, attrs, device, colocation, location)``), the tensors it is fed and returns."""
    nodes = [node_dict(n.name, n.type,
                       [f"{p}:{i}" for p, i in n.inputs] + ["^" + c for c in n.control_inputs],
                       n.attrs, n.device, n.colocation, n.location)
             for n in func.nodes.values()]
    return {"name": func.graph.name if func.graph is not None else func.frame,
            "frame": func.frame, "location": func.location,
            "feeds": [[p, i] for p, i in func.feeds],
            "fetches": [[p, i] for p, i in func.fetches], "graph": {"node": nodes},
            "taped": [[p, i] for p, i in getattr(func, "taped", ())],
            "host_ints": bool(getattr(func, "host_ints", False))}


def func_from_plain(d: dict, outer: Graph, build_nodes) -> Func:
    """The :class:`Func` that ``func_to_plain`` described, traced anew into a
    :class:`FuncGraph` of ``outer`` by ``build_nodes(graph, nodes, where)``."""
    if not isinstance(d, dict) or not isinstance(d.get("graph"), dict):
        raise InvalidArgumentError(f"malformed function {str(d)[:80]!r}")
    name = str(d.get("name") or d.get("frame"))
    where = f"function {name!r}"
    fg = FuncGraph(outer, name)
    build_nodes(fg, d["graph"].get("node"), where)

    def tensors(refs, what):
        out = []
        for r in refs or ():
            try:
                out.append(fg.get_tensor_by_name(f"{r[0]}:{int(r[1])}"))
            except (NotFoundError, ValueError, TypeError, IndexError, KeyError):
                raise InvalidArgumentError(f"{where}: {what} {r!r}, which is not a node of "
                                           "the function") from None
        return out
    feeds = tensors(d.get("feeds"), "is fed")
    fetches = tensors(d.get("fetches"), "returns")
    func = Func(fg, feeds, fetches, str(d.get("frame", name)), str(d.get("location", "")),
                host_ints=d.get("host_ints") is True)
    taped = tensors(d.get("taped"), "tapes")  # the body's tensors its gradient reads
    if taped:
        func.taped = [(t.op.name, t.value_index) for t in taped]
    return func
