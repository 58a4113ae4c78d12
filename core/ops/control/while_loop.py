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

Where the parts are: this module traces ``cond`` and ``body`` and builds the op;
:mod:`~tensorvm.ops.control.while_func` holds the traced functions (``FuncGraph``, ``Func``,
``LoopVariableRead``), :mod:`~tensorvm.ops.control.while_op` the ``While`` op's kernel,
:mod:`~tensorvm.ops.control.while_grad` its gradient, and
:mod:`~tensorvm.ops.control.while_frames` / :mod:`~tensorvm.ops.control.while_pipeline` a
loop across devices.

>>> import tensorvm as tv
>>> i, s = tv.while_loop(lambda i, s: i < 5, lambda i, s: (i + 1, s + i), [0, 0])
>>> with tv.Session() as sess: [int(v) for v in sess.run([i, s])]
[5, 10]
"""
from __future__ import annotations

import numpy as np

from ...framework import dtypes as _dt
from ...framework.device_spec import DeviceSpec
from ...framework.errors import InvalidArgumentError, NotFoundError
from ...framework.graph import Graph, Operation, Tensor, _user_location, get_default_graph
from ...framework.op_def_library import apply_op
from ...framework.tensor_conversion import convert_to_tensor
# The loop's parts (this module is their public face: graph_def, tv.data and tests import
# Func, FuncGraph, variant and the plain-data form from here).
from .while_frames import Frame  # noqa: F401  (re-exported)
from .while_func import (Func, FuncGraph, _root, func_from_plain,  # noqa: F401
                         func_to_plain)
from .while_grad import _while_grad  # noqa: F401  (registers WhileGrad)
from .while_op import _shape_str, variant  # noqa: F401  (registers While)

__all__: list[str] = []  # while_loop is exported by control_flow_ops


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
