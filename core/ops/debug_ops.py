"""Numeric checks (``tv.debugging``): stop a step when a tensor holds NaN or Inf, as TF's
``tf.debugging.check_numerics`` and ``tf.add_check_numerics_ops`` do, instead of letting NaNs in
training data spread silently into the variables.

``check_numerics(t, message)`` returns ``t`` unchanged, or fails the step with
``InvalidArgumentError`` naming the op, the message and what was found; its gradient is checked
the same way. ``add_check_numerics_ops()`` puts a check on every floating-point tensor of the
default graph and returns one op to run as a target with the train op (as in TF, it must be
called after the graph is built).

>>> import numpy as np, tensorvm as tv
>>> x = tv.placeholder(tv.float32, [2])
>>> y = tv.debugging.check_numerics(tv.sqrt(x), "sqrt of the input")
>>> with tv.Session() as s:
...     s.run(y, {x: [4.0, 9.0]})
...     try:
...         s.run(y, {x: [4.0, -1.0]})
...     except tv.errors.InvalidArgumentError as e:
...         print(str(e).splitlines()[0])
array([2., 3.], dtype=float32)
sqrt of the input : Tensor had NaN values
"""
from __future__ import annotations

import numpy as np

from ..errors import InvalidArgumentError
from ..graph import get_default_graph
from ..op_def_library import apply_op
from ..registry import register_op, registry
from .common import asarray

__all__ = ["check_numerics", "add_check_numerics_ops"]


def _check_numerics_shape(inputs, attrs):
    (x,) = inputs
    if not (x.dtype.is_floating or x.dtype.is_complex):
        raise InvalidArgumentError(
            f"check_numerics needs a floating-point tensor, got {x.name} ({x.dtype.name})")
    return [(x.dtype, x._shape)]


def _check_numerics_kernel(x, message=""):
    arr = asarray(x)  # on x's device; only the verdicts (bool) come to the host
    if arr.size and not np.isfinite(arr).all():
        nan = bool(np.isnan(arr).any())
        inf = bool(np.isinf(arr).any())
        what = " and ".join(w for w, f in (("NaN", nan), ("Inf", inf)) if f)
        raise InvalidArgumentError(f"{message} : Tensor had {what} values")
    return x


def _check_numerics_grad(op, g):
    return [check_numerics(g, "Not a number (NaN) or infinity (Inf) values detected in "
                              "gradient. " + op.attrs.get("message", ""))]


# Never constant-folded: a check of a constant reports when the step runs, not while planning.
register_op("CheckNumerics", _check_numerics_shape, _check_numerics_kernel,
            grad=_check_numerics_grad, foldable=False)


def check_numerics(tensor, message: str, name=None):
    """``tensor`` unchanged; the step fails with ``InvalidArgumentError`` if it has NaN or
    Inf values (the message says which, after ``message``)."""
    return apply_op("CheckNumerics", [tensor], {"message": str(message)},
                    name=name or "CheckNumerics").outputs[0]


def add_check_numerics_ops():
    """One op that checks every floating-point tensor of the default graph for NaN and Inf
    (run it as a target beside the train op). Like TF, call it once the graph is built; ops
    added later are not checked."""
    from .array_ops import group
    g = get_default_graph()
    checks = []
    for op in list(g.get_operations()):
        # Running a check runs what it checks: never an update, a dequeue or an initializer.
        if op.type == "CheckNumerics" or (registry[op.type].stateful and op.type != "VariableV2"):
            continue
        for t in op.outputs:
            if t.dtype.is_floating:
                with g.colocate_with(op):
                    checks.append(check_numerics(
                        t, f"{op.type} op {op.name!r} output {t.value_index} (created at "
                           f"{op.location})").op)
    return group(*checks, name="CheckNumerics_all")
