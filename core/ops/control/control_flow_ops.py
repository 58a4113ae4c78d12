"""Control flow, the op table's eighth category: ``tv.cond``, ``tv.case``, ``tv.while_loop``,
``tv.Assert``, ``tv.Print``, ``tv.tuple`` (TF 1.x's ``control_flow_ops``).

``cond`` is TF's Switch/Merge construction with *dead tensors* (the TF paper, section 3.4):
``Switch(x, pred)`` passes ``x`` to its output 1 when ``pred`` is true and to output 0 when
false; the other output is *dead* (:data:`tensorvm.vm.interpreter.DEAD`). An op with a dead input (or
a dead control input) is not run and its outputs are dead, so the untaken branch runs nothing;
``Merge`` forwards its one live input. While a branch function runs, a
:class:`CondContext` is the graph's control-flow context: every outside tensor a branch op
reads goes through a Switch on the predicate (one per tensor and branch), and an op with no
data input (a constant, a variable read, a ``py_func`` of nothing) waits on the branch's
*pivot* (an Identity of ``Switch(pred, pred)``) by a control edge. A dead value leaves a stage
only as dead: through Send/Recv it arrives dead, so a branch spread over devices stays lazy;
fetching one is TF's error ``Retval[0] does not have value``.

A ``TensorArray`` a branch returns is carried through the Merge as its flow and comes back a
``TensorArray`` (TF 1.x's ``_convert_tensorarray_to_flow``): its dtype must match the other
branch's, its element shape and size are what both agree on. One read or written inside a
branch comes in through a Switch like any tensor; gradients flow through both.

Gradients: a Switch's gradient is the Merge of its outputs' gradients (a branch that does not
use the input contributes zeros gated by the same predicate); a Merge's gradient is a Switch of
its gradient on the cond's predicate.

``while_loop`` lives in :mod:`tensorvm.ops.control.while_loop` (a functional ``While`` op whose kernel
runs the cond and body programs in the op's stage).

A while_loop whose cond and body span devices runs each device's part of every iteration on
that device (issue 27, :class:`tensorvm.ops.control.while_loop.Frame`). Not done: a graph holding a
while_loop has no JSON GraphDef (its traced functions are Python objects, as a py_func's).

>>> import tensorvm as tv
>>> x = tv.placeholder(tv.float32, [])
>>> y = tv.cond(x > 0, lambda: x * 2.0, lambda: -x)
>>> with tv.Session() as s: [float(s.run(y, {x: v})) for v in (3.0, -4.0)]
[6.0, 4.0]
"""
from __future__ import annotations

import sys

import numpy as np

from ...framework import dtypes as _dt
from ...framework.errors import InvalidArgumentError, NotFoundError
from ...framework.graph import Operation, Tensor, _user_location, get_default_graph
from ...framework.indexed_slices import IndexedSlices
from ...framework.op_def_library import apply_op
from ...framework.op_registry import register_op
from ...vm.interpreter import DEAD
from ...framework.tensor_conversion import convert_to_tensor
from ..array.array_ops import group, identity, zeros_like
from .while_loop import while_loop

# switch, merge and with_dependencies stay in this module (TF 1.x's control_flow_ops), as in TF.
__all__ = ["cond", "case", "while_loop", "Assert", "Print", "tuple"]  # noqa: RUF022


def __getattr__(name):  # ``tv.tuple`` without shadowing the builtin inside this module
    if name == "tuple":
        return tuple_
    raise AttributeError(name)


# ---- Switch and Merge --------------------------------------------------------------------------
def _switch_shape(inputs, attrs):
    data, pred = inputs
    if pred.dtype != _dt.bool_:
        raise InvalidArgumentError(f"Switch: the predicate must be a bool tensor, got "
                                   f"{pred.name} ({pred.dtype.name})")
    if pred._shape not in (None, ()):
        raise InvalidArgumentError(f"Switch: the predicate must be a scalar, got shape "
                                   f"{list(pred._shape)} ({pred.name})")
    return [(data.dtype, data._shape)] * 2


def _switch_kernel(data, pred):
    # ``bool`` of the 0-d predicate, not ``np.asarray``: on a GPU it is a device array, and
    # CuPy's ``bool()`` of a one-element array copies it to the host (a sync) where
    # ``np.asarray`` is refused (TF keeps Switch's ``pred`` in host memory for the same read).
    return (DEAD, data) if bool(pred) else (data, DEAD)


def _merge_shape(inputs, attrs):
    dts = {t.dtype for t in inputs}
    if len(dts) > 1:
        raise InvalidArgumentError("Merge: inputs must have one dtype, got " + ", ".join(
            f"{t.name} ({t.dtype.name})" for t in inputs))
    shape = inputs[0]._shape
    for t in inputs[1:]:
        shape = _common_shape(shape, t._shape)
    return [(inputs[0].dtype, shape), (_dt.int32, ())]


def _common_shape(a, b):
    if a is None or b is None or len(a) != len(b):
        return None
    return tuple(x if x == y else None for x, y in zip(a, b))


def _merge_kernel(*values, pred=None):
    for i, v in enumerate(values):
        if v is not DEAD:
            return v, np.int32(i)
    return DEAD, DEAD


def _switch_grad(op, g_false, g_true):
    if g_false is None and g_true is None:
        return [None, None]
    data, pred = op.inputs
    grads = []
    for b, gb in ((0, g_false), (1, g_true)):
        if isinstance(gb, IndexedSlices):
            from ..gradients import densify
            gb = densify(gb, data)
        if gb is None:  # that branch does not use the input: zeros, live only when it runs
            gb = switch(zeros_like(data), pred)[b]
        grads.append(gb)
    return [merge(grads)[0], None]


def _merge_grad(op, grad, _g_index=None):
    pred_name = op.attrs.get("pred")
    if not pred_name:
        raise NotFoundError(f"no gradient for Merge {op.name!r} built outside tv.cond (created "
                            f"at {op.location})")
    pred = op.graph.get_tensor_by_name(pred_name)
    if isinstance(grad, IndexedSlices):
        from ..gradients import densify
        grad = densify(grad, op.outputs[0])
    if grad is None:
        return [None] * len(op.inputs)
    return list(switch(grad, pred))


register_op("Switch", _switch_shape, _switch_kernel, grad=_switch_grad, control_flow=True,
            gpu_fallback=True)
register_op("Merge", _merge_shape, _merge_kernel, grad=_merge_grad, control_flow=True,
            forwards_dead=True, gpu_fallback=True)


def switch(data, pred, name=None):
    """``(output_false, output_true)``: ``data`` on the side ``pred`` selects, dead on the
    other (TF's ``control_flow_ops.switch``)."""
    return apply_op("Switch", [data, pred], name=name or "Switch").outputs


def merge(inputs, name=None, pred=None):
    """``(output, value_index)``: the one live input (TF's ``control_flow_ops.merge``)."""
    attrs = {"pred": pred.name} if pred is not None else {}
    return apply_op("Merge", list(inputs), attrs, name=name or "Merge").outputs


# ---- the branch context ------------------------------------------------------------------------
class CondContext:
    """The branch being built: ops created from ``start`` on belong to it. Installed as the
    graph's ``control_flow_context`` (per thread) while the branch function runs."""

    def __init__(self, graph, pred: Tensor, branch: int, outer):
        self.graph = graph
        self.pred = pred
        self.branch = branch
        self.outer = outer
        self._switched: dict[Tensor, Tensor] = {}
        with _context(graph, outer):
            sw = switch(pred, pred, name="switch_t" if branch else "switch_f")
            self.pivot = identity(sw[branch], name="pivot_t" if branch else "pivot_f").op
        self.start = self.pivot._id  # the pivot and every op after it belong to the branch

    def inside(self, op: Operation) -> bool:
        """Whether ``op`` was built in this branch (a loop body's captured input was not,
        whenever it was first used)."""
        return op.graph is self.graph and op._id >= self.start and \
            op._id not in getattr(self.graph, "capture_ops", ())

    def gate(self, t: Tensor) -> Tensor:
        """``t`` as seen inside the branch: an outside tensor goes through a Switch."""
        if self.inside(t.op):
            return t
        out = self._switched.get(t)
        if out is None:
            with _context(self.graph, self.outer):
                out = switch(t, self.pred)[self.branch]
            self._switched[t] = out
        return out

    def enter_op(self, graph, inputs, control):
        """The hook ``Graph.create_op`` calls for every op built inside the branch."""
        inputs = [self.gate(t) for t in inputs]
        if not inputs and not any(self.inside(c) for c in control):
            control = list(control) + [self.pivot]
        return inputs, control


class _context:
    def __init__(self, graph, ctx):
        self.graph, self.ctx = graph, ctx

    def __enter__(self):
        self.saved = self.graph._tls.control_flow_context
        self.graph._tls.control_flow_context = self.ctx

    def __exit__(self, *exc):
        self.graph._tls.control_flow_context = self.saved


# ---- nested structures (TF's nest, for lists, tuples, namedtuples and dicts) -------------------
def flatten(s) -> list:
    if isinstance(s, dict):
        return [x for k in sorted(s) for x in flatten(s[k])]
    if isinstance(s, (list, tuple)):
        return [x for v in s for x in flatten(v)]
    return [s]


def structure(s):
    """A hashable description of ``s``'s nesting (leaves are ``.``)."""
    if isinstance(s, dict):
        return ("dict", tuple((k, structure(s[k])) for k in sorted(s)))
    if isinstance(s, (list, tuple)):
        return (type(s).__name__, tuple(structure(v) for v in s))
    return "."


def pack_as(s, flat: list):
    it = iter(flat)

    def build(x):
        if isinstance(x, dict):
            return {k: build(x[k]) for k in sorted(x)}
        if isinstance(x, list):
            return [build(v) for v in x]
        if isinstance(x, tuple):
            vals = [build(v) for v in x]
            return type(x)(*vals) if hasattr(x, "_fields") else tuple(vals)
        return next(it)
    return build(s)



# ---- cond and case -----------------------------------------------------------------------------
def _as_pred(pred, what: str) -> Tensor:
    if isinstance(pred, (bool, np.bool_)):
        raise TypeError(f"{what}: pred must not be a Python bool (at {_user_location()})")
    pred = convert_to_tensor(pred)
    if pred.dtype != _dt.bool_:
        raise InvalidArgumentError(f"{what}: pred must be a bool tensor, got {pred.name} "
                                   f"({pred.dtype.name}), at {_user_location()}")
    return pred


def _build_branch(g, pred, branch: int, fn, outer):
    ctx = CondContext(g, pred, branch, outer)
    with _context(g, ctx):
        res = fn()
        if res is None:
            raise InvalidArgumentError(f"cond: {'true_fn' if branch else 'false_fn'} must "
                                       f"return a value (at {_user_location()})")
        flat = []
        for x in flatten(res):
            if isinstance(x, Operation):
                with g.control_dependencies([x]):
                    x = identity(ctx.pivot.outputs[0])
                flat.append(("op", x))
            elif hasattr(x, "_with_flow"):  # a TensorArray: carried as its flow (TF's rule)
                flat.append(("ta", ctx.gate(x.flow)))
            else:
                if isinstance(x, IndexedSlices):
                    from ..gradients import densify
                    x = densify(x)
                flat.append(("t", ctx.gate(convert_to_tensor(x))))
    return res, flat


def _merged_array(ta_t, ta_f, flow, i, where):
    """The TensorArray a cond gives back for output ``i``: ``flow`` (the Merge of the two
    branches' flows) with what both branches' arrays agree on (dtype; the element shape and
    size where they match, else unknown)."""
    from .tensor_array import _Meta
    from .tensor_array_ops import _tf_dtype_name
    if ta_t.dtype != ta_f.dtype:
        raise InvalidArgumentError(
            f"cond: output {i} is a TensorArray of {_tf_dtype_name(ta_t.dtype)} in true_fn but "
            f"of {_tf_dtype_name(ta_f.dtype)} in false_fn (cond at {where})")
    mt, mf = ta_t._meta, ta_f._meta
    et, ef = mt.element_shape, mf.element_shape
    shape = _common_shape(et, ef) if et is not None and ef is not None else None
    meta = mt if mt is mf else _Meta(shape, mt.size if mt.size == mf.size else None,
                                     mt.dynamic_size or mf.dynamic_size,
                                     mt.infer_shape and mf.infer_shape, mt.name)
    out = ta_t._with_flow(flow)
    out._meta = meta
    return out


def cond(pred, true_fn=None, false_fn=None, strict: bool = False, name=None, fn1=None,
         fn2=None):
    """``true_fn()`` if ``pred`` else ``false_fn()``, as one value per output (TF 1.x's
    ``tf.cond``): only the taken branch's ops run. Both functions must return the same
    structure of tensors, TensorArrays (or operations) with the same dtypes. A
    single-element list is unpacked unless ``strict=True``.

    >>> import tensorvm as tv
    >>> p = tv.placeholder(tv.bool, [])
    >>> a, b = tv.cond(p, lambda: (tv.constant(1), tv.constant("x")),
    ...                lambda: (tv.constant(2), tv.constant("y")))
    >>> with tv.Session() as s: r = s.run([a, b], {p: False})
    >>> int(r[0]), r[1]
    (2, 'y')
    """
    true_fn = true_fn if true_fn is not None else fn1
    false_fn = false_fn if false_fn is not None else fn2
    if not callable(true_fn):
        raise TypeError("true_fn must be callable.")
    if not callable(false_fn):
        raise TypeError("false_fn must be callable.")
    pred = _as_pred(pred, "cond")
    g = pred.graph
    outer = g._tls.control_flow_context
    if outer is not None:
        pred = outer.gate(pred)
    with g.as_default(), g.name_scope(name or "cond"):
        res_t, flat_t = _build_branch(g, pred, 1, true_fn, outer)
        res_f, flat_f = _build_branch(g, pred, 0, false_fn, outer)
        where = _user_location()
        if structure(res_t) != structure(res_f) or \
                [k for k, _ in flat_t] != [k for k, _ in flat_f]:
            raise InvalidArgumentError(
                "cond: true_fn and false_fn must return the same number, type and overall "
                f"structure of values; true_fn returned {_describe(res_t)}, false_fn "
                f"{_describe(res_f)} (cond at {where})")
        merged = []
        for i, ((kind, t), (_, f)) in enumerate(zip(flat_t, flat_f)):
            if t.dtype != f.dtype:
                raise InvalidArgumentError(
                    f"cond: output {i} of true_fn has dtype {t.dtype.name} but the one of "
                    f"false_fn has dtype {f.dtype.name} (cond at {where})")
            m = merge([f, t], name="Merge", pred=pred)[0]
            merged.append(m.op if kind == "op" else m)
        arrays_t, arrays_f = flatten(res_t), flatten(res_f)
        merged = [_merged_array(arrays_t[i], arrays_f[i], m, i, where) if kind == "ta" else m
                  for i, ((kind, _), m) in enumerate(zip(flat_t, merged))]
    out = pack_as(res_t, merged)
    if not strict and isinstance(out, (list, tuple)) and len(out) == 1 \
            and not hasattr(out, "_fields"):
        return out[0]
    return out


def _describe(res) -> str:
    def one(x):
        if isinstance(x, (list, tuple)):
            return "(" + ", ".join(one(v) for v in x) + ")"
        if isinstance(x, dict):
            return "{" + ", ".join(f"{k}: {one(v)}" for k, v in sorted(x.items())) + "}"
        if isinstance(x, Operation):
            return f"op {x.name}"
        if hasattr(x, "_with_flow"):
            return f"TensorArray of {x.dtype.name}"
        t = x if isinstance(x, Tensor) else None
        return f"{t.dtype.name} tensor" if t is not None else type(x).__name__
    return one(res)


def case(pred_fn_pairs, default=None, exclusive: bool = False, strict: bool = False,
         name: str = "case"):
    """The function of the first pair whose predicate is true, else ``default`` (TF 1.x's
    ``tf.case``; without ``default`` the last pair's function is the default). With
    ``exclusive=True`` a step where more than one predicate is true fails.

    >>> import tensorvm as tv
    >>> x = tv.placeholder(tv.int32, [])
    >>> y = tv.case([(x < 0, lambda: tv.constant(-1)), (x > 0, lambda: tv.constant(1))],
    ...             default=lambda: tv.constant(0))
    >>> with tv.Session() as s: [int(s.run(y, {x: v})) for v in (-5, 0, 7)]
    [-1, 0, 1]
    """
    if isinstance(pred_fn_pairs, dict):
        pairs = list(pred_fn_pairs.items())
    else:
        pairs = list(pred_fn_pairs)
    for p in pairs:
        if not isinstance(p, tuple) or len(p) != 2 or not callable(p[1]):
            raise TypeError(f"case: each pair must be (predicate, callable), got {p!r}")
    if default is None:
        if not pairs:
            raise ValueError("case: pred_fn_pairs is empty and no default is given")
        default, pairs = pairs[-1][1], pairs[:-1]
    preds = [_as_pred(p, "case") for p, _ in pairs]
    g = get_default_graph() if not preds else preds[0].graph
    with g.as_default(), g.name_scope(name):
        if exclusive and len(preds) > 1:
            from ..array.array_ops import stack
            from ..math.math_ops import cast, reduce_sum
            count = reduce_sum(cast(stack(preds), _dt.int32))
            msg = (f"Input error: exclusive=True: more than 1 conditions "
                   f"({', '.join(p.name for p in preds)}) evaluated as True:")
            check = Assert(count <= 1, [msg, stack(preds)], name="exclusive_check")
            preds = [with_dependencies([check], p) for p in preds]
        if not preds:
            return default()

        def build(i):
            if i == len(pairs):
                return default()
            return cond(preds[i], pairs[i][1], lambda: build(i + 1), strict=strict,
                        name=f"If_{i}")
        return build(0)


# ---- Assert, Print, tuple ----------------------------------------------------------------------
def _format(v, summarize):
    if isinstance(v, np.ndarray) and v.dtype == object and v.ndim == 0:
        return str(v[()])
    if isinstance(v, (str, bytes)):
        return v if isinstance(v, str) else v.decode()
    a = np.asarray(v)
    if a.ndim == 0:
        return _num(a[()])
    flat = a.reshape(-1)
    n = 3 if summarize is None else summarize
    body = " ".join(_num(x) for x in flat[:n]) + ("..." if flat.size > n else "")
    return f"[{body}]"


def _num(x) -> str:
    """A number as TF's summaries write it (``1 -2 0.5``, not ``1.0 -2.0 0.5``)."""
    if isinstance(x, (float, np.floating)):
        return np.format_float_positional(x, trim="-")
    return str(x)


def _assert_kernel(condition, *data, summarize=None):
    if not np.all(condition):
        raise InvalidArgumentError("assertion failed: " + " ".join(
            f"[{_format(d, summarize)}]" if not str(_format(d, summarize)).startswith("[")
            else _format(d, summarize) for d in data))
    return ()


def _assert_shape(inputs, attrs):
    if inputs[0].dtype != _dt.bool_:
        raise InvalidArgumentError(f"Assert: the condition must be a bool tensor, got "
                                   f"{inputs[0].name} ({inputs[0].dtype.name})")
    return []


register_op("Assert", _assert_shape, _assert_kernel, stateful=True, differentiable=False)


def Assert(condition, data, summarize=None, name=None):
    """An op that fails the step with ``InvalidArgumentError("assertion failed: ...")``,
    showing ``data``, when ``condition`` is not all true. Run it as a target or a control
    dependency (TF 1.x: ``with tf.control_dependencies([tf.Assert(...)])``)."""
    data = [convert_to_tensor(d) for d in (data if isinstance(data, (list, tuple))
                                           else [data])]
    return apply_op("Assert", [condition] + data, {"summarize": summarize},
                    name=name or "Assert")


class _PrintCounter:
    def __init__(self):
        self.n = 0


def _print_kernel(ctx, x, *data, message="", first_n=-1, summarize=None):
    counter = ctx.resources.lookup_or_create("_print", ctx.op_name, _PrintCounter)
    counter.n += 1
    if first_n < 0 or counter.n <= first_n:
        # TF's Print writes to the process's standard error, not to a logger.
        sys.stderr.write(message + "".join(_format(d, summarize) for d in data) + "\n")
    return x


register_op("Print", lambda inputs, attrs: [(inputs[0].dtype, inputs[0]._shape)],
            _print_kernel, stateful=True, needs_ctx=True,
            grad=lambda op, g: [g] + [None] * (len(op.inputs) - 1))


def Print(input_, data, message=None, first_n=None, summarize=None, name=None):
    """``input_`` unchanged; when it is computed, ``message`` and ``data`` are written to
    standard error (the first ``first_n`` times only, if given), as TF 1.x's ``tf.Print``."""
    data = [convert_to_tensor(d) for d in (data if isinstance(data, (list, tuple))
                                           else [data])]
    return apply_op("Print", [input_] + data,
                    {"message": message or "", "first_n": -1 if first_n is None else
                     int(first_n), "summarize": summarize}, name=name or "Print").outputs[0]


def with_dependencies(dependencies, output_tensor, name=None):
    """``output_tensor`` (an identity of it) computed only after ``dependencies``."""
    t = output_tensor
    g = t.graph if isinstance(t, Tensor) else get_default_graph()
    with g.as_default(), g.control_dependencies(dependencies):
        if isinstance(t, IndexedSlices):
            return IndexedSlices(identity(t.values, name=name), t.indices, t.dense_shape)
        return identity(t, name=name)


def tuple_(tensors, name=None, control_inputs=None):
    """Tensors with the same values as ``tensors``, each available only once all of them
    (and ``control_inputs``) are computed (TF 1.x's ``tf.tuple``: a gate of all)."""
    tensors = list(tensors)
    ops = [t.op if isinstance(t, Tensor) else t.values.op if isinstance(t, IndexedSlices)
           else t for t in tensors if t is not None]
    if control_inputs:
        for c in control_inputs:
            ops.append(c.op if isinstance(c, Tensor) else c)
    if not ops:
        raise ValueError("tuple: must have at least one tensor")
    g = ops[0].graph
    with g.as_default(), g.name_scope(name or "tuple"):
        gate = group(*ops)
        return [with_dependencies([gate], t) if t is not None else None for t in tensors]
