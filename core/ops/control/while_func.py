"""The loop's functions: a cond or body traced from Python into a graph of its own
(:class:`FuncGraph`, with the tensors it captures from outside), and the traced function as
plain data (:class:`Func`) that compiles once per device to one stage program (or to a
:class:`~tensorvm.ops.control.while_frames.Frame` where it spans devices) and runs it each
iteration. Also here: ``LoopVariableRead``, a Variable read inside a loop (read each time it
runs, as TF 1.x reads a ref variable), and the plain-data form of a :class:`Func` for
:mod:`tensorvm.framework.graph_def`'s JSON. The ``While`` op itself is
:mod:`tensorvm.ops.control.while_op`; ``tv.while_loop`` is :mod:`tensorvm.ops.control.while_loop`.
"""
from __future__ import annotations

from ...framework import dtypes as _dt
from ...vm import interpreter as _runtime
from ...framework.errors import InvalidArgumentError, NotFoundError
from ...framework.graph import Graph, Operation, Tensor
from ...framework.op_registry import generation, register_op, registry
from ...vm.interpreter import execute, execute_local, local_caller
from ...vm.program import Feed
from ...vm.services import service
from .while_frames import Frame, frame_devices

__all__: list[str] = []


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


def _root(g):
    while hasattr(g, "outer"):
        g = g.outer
    return g


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
