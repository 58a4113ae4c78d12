"""Reverse-mode autodiff: ``tv.gradients(ys, xs, grad_ys=None)`` adds gradient ops to the graph.

For every op between ``xs`` and ``ys`` (in reverse topological order) the registered gradient
function maps the gradients of its outputs to gradients of its inputs; gradients reaching one
tensor along several paths are summed. Unconnected ``xs`` get ``None``. ``StopGradient`` and ops
registered as non-differentiable stop the flow. Gradient ops are colocated with their forward op.

The gradient of ``gather`` is an :class:`IndexedSlices` (indices + values): it stays sparse
through summation of sparse parts and reaches optimizers as is, which apply it with
``scatter_add``; anywhere a dense tensor is needed, it is densified with ``unsorted_segment_sum``.

>>> import tensorvm as tv
>>> x = tv.constant(3.0); y = x * x
>>> with tv.Session() as s: float(s.run(tv.gradients(y, x)[0]))
6.0
"""
from __future__ import annotations

from ..framework.errors import InvalidArgumentError, NotFoundError
from ..framework.graph import Operation, Tensor
from ..framework.indexed_slices import IndexedSlices, IndexedSlicesValue  # noqa: F401 (re-exported)
from ..framework.op_registry import get_op_def
from ..framework.tensor_conversion import convert_to_tensor


def densify(g, like: Tensor | None = None):
    """An IndexedSlices as a dense tensor (shaped like ``like``); a dense tensor as is."""
    from .array.index_ops import densify as _densify
    return _densify(g, like)


def _sum_grads(parts, like: Tensor):
    parts = [p for p in parts if p is not None]
    if not parts:
        return None
    if len(parts) == 1:
        return parts[0]
    if all(isinstance(p, IndexedSlices) for p in parts):
        from .array.manip_ops import concat
        from .math.math_ops import cast
        idx = [p.indices if p.indices.dtype == parts[0].indices.dtype else
               cast(p.indices, parts[0].indices.dtype) for p in parts]
        return IndexedSlices(concat([p.values for p in parts], 0), concat(idx, 0),
                             parts[0].dense_shape)
    from .math.math_ops import add_n
    return add_n([densify(p, like) for p in parts])


def _as_tensor(x) -> Tensor:
    if hasattr(x, "_as_graph_element"):
        x = x._as_graph_element()
    if isinstance(x, Operation):
        raise InvalidArgumentError(f"gradients: {x.name!r} is an operation, not a tensor")
    return convert_to_tensor(x)


class AggregationMethod:
    """TF's ways of summing a tensor's gradients; tensorvm always adds them with one
    ``AddN`` (each is accepted)."""
    ADD_N = 0
    DEFAULT = ADD_N
    EXPERIMENTAL_TREE = 1
    EXPERIMENTAL_ACCUMULATE_N = 2


class UnconnectedGradients:
    """What ``gradients`` gives for an ``x`` that ``ys`` do not depend on."""
    NONE = "none"
    ZERO = "zero"


def gradients(ys, xs, grad_ys=None, name: str = "gradients", stop_gradients=None,
              colocate_gradients_with_ops=False, gate_gradients=False,
              aggregation_method=None, unconnected_gradients=UnconnectedGradients.NONE):
    """Symbolic derivatives of ``sum(ys)`` with respect to each of ``xs``.

    Returns a list with one entry per ``x``: a Tensor, an :class:`IndexedSlices` (for
    embedding-style sparse gradients) or ``None`` where ``x`` does not influence ``ys``
    (zeros with ``unconnected_gradients="zero"``). ``colocate_gradients_with_ops``,
    ``gate_gradients`` and ``aggregation_method`` are TF's, accepted: gradient ops are always
    colocated with the ops they differentiate, the graph's data flow orders them, and sums are
    one ``AddN``.
    """
    if str(getattr(unconnected_gradients, "value", unconnected_gradients)) not in ("none",
                                                                                   "zero"):
        raise ValueError(f"Unknown value for unconnected_gradients: {unconnected_gradients!r}")
    ys = [_as_tensor(y) for y in (ys if isinstance(ys, (list, tuple)) else [ys])]
    xs = [_as_tensor(x) for x in (xs if isinstance(xs, (list, tuple)) else [xs])]
    if grad_ys is None:
        grad_ys = [None] * len(ys)
    elif not isinstance(grad_ys, (list, tuple)):
        grad_ys = [grad_ys]
    if len(grad_ys) != len(ys):
        raise InvalidArgumentError(f"gradients: {len(grad_ys)} grad_ys for {len(ys)} ys")
    g = ys[0].graph
    stops = {id(_as_tensor(s).op) for s in (stop_gradients or [])}

    # Ops on a path from xs to ys.
    x_ops = {id(x.op) for x in xs}
    reach_from_x: set[int] = set()
    for op in g._ops:  # graph order is topological
        if id(op) in x_ops or any(id(t.op) in reach_from_x for t in op.inputs):
            reach_from_x.add(id(op))
    between: set[int] = set()
    stack = [y.op for y in ys]
    while stack:
        op = stack.pop()
        if id(op) in between or id(op) not in reach_from_x:
            continue
        between.add(id(op))
        if id(op) in x_ops and not any(id(t.op) in reach_from_x for t in op.inputs):
            continue
        stack.extend(t.op for t in op.inputs)

    pending: dict[Tensor, list] = {}
    with g.as_default(), g.name_scope(name):
        for y, gy in zip(ys, grad_ys):
            if gy is None:
                from .array.array_ops import ones_like
                with g._colocate_gradients_with(y.op):
                    gy = ones_like(y)
            pending.setdefault(y, []).append(convert_to_tensor(gy))
        x_set = set(xs)
        for op in reversed(g._ops):
            if id(op) not in between or id(op) in stops:
                continue
            if not any(pending.get(t) for t in op.outputs):
                continue
            with g._colocate_gradients_with(op):  # sums of several paths live with the op
                out_grads = [_sum_grads(pending.get(t, []), t) for t in op.outputs]
            if all(t in x_set for t in op.outputs) and not any(
                    id(t.op) in between for t in op.inputs):
                continue
            d = get_op_def(op.type)
            override = getattr(g, "_gradient_overrides", {}).get(op.name)
            if override is not None:  # gradient_override_map
                from ..framework.op_registry import override_gradient
                d = override_gradient(override, op)
            if not d.differentiable:
                continue
            if d.grad_fn is None:
                raise NotFoundError(
                    f"no gradient is defined for op {op.name!r} ({op.type}), created at "
                    f"{op.location}; wrap it in tv.stop_gradient if none is needed")
            with g._colocate_gradients_with(op), g.name_scope(op.name + "_grad"):
                if len(op.outputs) == 1:
                    in_grads = d.grad_fn(op, densify_if_needed(out_grads[0], op))
                else:
                    in_grads = d.grad_fn(op, *out_grads)
            in_grads = list(in_grads)
            if len(in_grads) != len(op.inputs):
                raise AssertionError(f"gradient of {op.type} returned {len(in_grads)} grads "
                                     f"for {len(op.inputs)} inputs")
            for t, gi in zip(op.inputs, in_grads):
                if gi is not None and id(t.op) in reach_from_x and t.dtype.is_differentiable:
                    pending.setdefault(t, []).append(gi)
        out = []
        for x in xs:
            with g._colocate_gradients_with(x.op):
                got = _sum_grads(pending.get(x, []), x)
                if got is None and str(getattr(unconnected_gradients, "value",
                                               unconnected_gradients)) == "zero":
                    from .array.array_ops import zeros_like
                    got = zeros_like(x)
                out.append(got)
        return out


def densify_if_needed(grad, op: Operation):
    """Gradient functions of ordinary ops take dense gradients; ops that pass sparse gradients
    through (Identity) would keep them sparse, the rest densify."""
    if isinstance(grad, IndexedSlices) and not get_op_def(op.type).pass_through:
        return densify(grad, op.outputs[0])
    return grad
