"""Building ops: :func:`apply_op` converts the inputs, runs the op's shape rule (failing here,
at construction, with the op's name and the user's line) and adds the op to the graph.

>>> import tensorvm as tv
>>> op = apply_op("Add", [1.0, 2.0])
>>> op.type, op.outputs[0].dtype
('Add', tv.float32)
"""
from __future__ import annotations

from .errors import InvalidArgumentError
from .graph import Tensor, _user_location, get_default_graph
from .op_registry import get_op_def
from .tensor_conversion import convert_to_tensor


def _graph_of(inputs, graph=None):
    if graph is not None:
        return graph
    for t in inputs:
        if isinstance(t, Tensor):
            return t.graph
        if hasattr(t, "_as_graph_element"):
            return t._as_graph_element().graph
    return get_default_graph()


def _read_now(g, t):
    """A fresh read of the variable whose tensor is ``t``, made in the current control
    dependencies (TF 1.x reads a ref variable when the consuming op runs: an op made under
    ``control_dependencies([update])`` sees the update). Colocated with the variable."""
    op = t.op
    attrs = {k: op.attrs[k] for k in ("var_name", "container", "dtype", "shape")}
    return apply_op("VariableRead", [t], attrs, name=f"{op.name}/read",
                    colocation=op.colocation).outputs[0]


def apply_op(op_type: str, inputs: list, attrs: dict | None = None, name: str | None = None,
             graph=None, colocation: str | None = None):
    """Create an op of ``op_type`` and return the Operation; op functions return
    ``op.outputs[0]`` or the outputs tuple."""
    d = get_op_def(op_type)
    attrs = dict(attrs or {})
    g = _graph_of(inputs, graph)
    if graph is None:
        default = get_default_graph()
        if default is not g and hasattr(default, "capture"):
            g = default  # a while_loop body: outside tensors are captured
    tensors = []
    for x in inputs:
        t = convert_to_tensor(x, graph=g)
        if t.graph is not g and hasattr(g, "capture"):
            t = g.capture(t)
        if t.graph is not g:
            raise InvalidArgumentError(
                f"{op_type} {name or ''!s}: input {t.name!r} (created at {t.op.location}) is "
                f"from a different graph than the op's other inputs")
        tensors.append(t)
    if op_type != "VariableRead" and any(t.op.type == "VariableV2" for t in tensors) and \
            any(g._control_stack):
        tensors = [_read_now(g, t) if t.op.type == "VariableV2" else t for t in tensors]
    try:
        specs = d.shape_fn(tensors, attrs)
    except InvalidArgumentError as e:
        where = _user_location()
        raise type(e)(f"{e.message}\n  while building op {g.unique_name(name or op_type, False)!r}"
                      f" ({op_type}), created at {where}") from None
    except (ValueError, TypeError, IndexError) as e:
        where = _user_location()
        raise InvalidArgumentError(
            f"{e}\n  while building op {g.unique_name(name or op_type, False)!r} ({op_type}), "
            f"created at {where}") from None
    return g.create_op(op_type, tensors, attrs, specs, name=name, colocation=colocation)
