"""Numeric checks and assertions (``tv.debugging``): stop a step when a tensor holds NaN or Inf,
as TF's ``tf.debugging.check_numerics`` and ``tf.add_check_numerics_ops`` do, instead of letting
NaNs in training data spread silently into the variables; TF 1.x's ``tf.assert_*`` checks
(``assert_equal`` … ``assert_shapes``), static where the graph knows the answer, else ``Assert``
ops; and static facts (``is_tensor``, ``get_static_value``, ``ensure_shape``).

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

from ...framework.errors import InvalidArgumentError
from ...framework.graph import get_default_graph
from ...framework.op_def_library import apply_op
from ...framework.op_registry import register_op, registry
from ..common import asarray

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
    from ..array.array_ops import group
    g = get_default_graph()
    checks = []
    for op in list(g.get_operations()):
        # Running a check runs what it checks: never an update, a dequeue or an initializer.
        if op.type == "CheckNumerics" or (registry[op.type].stateful
                                               and op.type not in ("VariableV2", "VariableRead")):
            continue
        for t in op.outputs:
            if t.dtype.is_floating:
                with g.colocate_with(op):
                    checks.append(check_numerics(
                        t, f"{op.type} op {op.name!r} output {t.value_index} (created at "
                           f"{op.location})").op)
    return group(*checks, name="CheckNumerics_all")


# ---- assertions (TF 1.x's check_ops: tv.assert_equal, tv.debugging.assert_equal ...) -------
# As in TF: what is known while the graph is built is checked then (a static failure raises
# InvalidArgumentError, ValueError or TypeError at the line that builds the check); what is not
# becomes an ``Assert`` op, returned, that fails the step with InvalidArgumentError
# ("assertion failed: [...] ...", the data summarised: ``summarize`` entries, default 3) when it
# runs. Run it as a target or a control dependency, as in TF 1.x.
def _message_prefix(message) -> str:
    return f"{message}.  " if message else ""


def _tf_shape_str(shape) -> str:
    """A static shape as TF 1.x prints it: ``(2, ?)``, ``<unknown>``."""
    if shape is None:
        return "<unknown>"
    return "(" + ", ".join("?" if d is None else str(d) for d in shape) + \
        ("," if len(shape) == 1 else "") + ")"


def _tf_dtype_str(dt) -> str:
    return f"<dtype: '{dt.name}'>"


def _static_str(d) -> str:
    """One data item of a failure found while the graph is built (TF's
    ``_maybe_constant_value_string``): a constant's value, a string as is."""
    from ...framework.graph import Tensor
    from ..common import static_value
    if isinstance(d, Tensor):
        v = static_value(d)
        return str(v) if v is not None else str(d)
    return str(d)


def _assert_static(condition, data) -> None:
    if not condition:
        raise InvalidArgumentError("\n".join(_static_str(d) for d in data))


def _binary_assert(sym, default_name, op_func, static_func, x, y, data, summarize, message,
                   name):
    from ...framework.graph import get_default_graph
    from ...framework.tensor_conversion import convert_to_tensor
    from ..common import static_value
    from ..math.math_ext import reduce_all
    with get_default_graph().name_scope(name or default_name):
        x, y = _named_pair(x, y)
        if data is None:
            data = [f"Condition x {sym} y did not hold element-wise:", f"x ({x.name}) = ", x,
                    f"y ({y.name}) = ", y]
        if message is not None:
            data = [message] + list(data)
        condition = reduce_all(op_func(x, y))
        xs, ys = static_value(x), static_value(y)
        if xs is not None and ys is not None:
            _assert_static(bool(np.all(static_func(xs, ys))), data)
        return Assert(condition, [convert_to_tensor(d) for d in data], summarize=summarize)


def _named_pair(x, y):
    """``x`` and ``y`` as tensors named ``x``/``y`` where they are made here, a Python value
    taking the other's dtype (TF's ``convert_to_tensor(x, name='x')``)."""
    from ...framework.graph import Tensor
    from ...framework.tensor_conversion import convert_to_tensor

    def is_t(v):
        return isinstance(v, Tensor) or hasattr(v, "_as_graph_element")
    if is_t(x) and not is_t(y):
        x = convert_to_tensor(x)
        return x, convert_to_tensor(y, dtype=None if isinstance(y, np.ndarray) else x.dtype,
                                    name="y")
    if is_t(y) and not is_t(x):
        y = convert_to_tensor(y)
        return convert_to_tensor(x, dtype=None if isinstance(x, np.ndarray) else y.dtype,
                                 name="x"), y
    return convert_to_tensor(x, name="x"), convert_to_tensor(y, name="y")


def _binary(sym, default_name, op_name, static_func):
    def fn(x, y, data=None, summarize=None, message=None, name=None):
        from ..math import math_ext
        return _binary_assert(sym, default_name, getattr(math_ext, op_name), static_func, x, y,
                              data, summarize, message, name)
    fn.__name__ = default_name
    fn.__doc__ = (f"An op that fails the step (``InvalidArgumentError``) unless ``x {sym} y`` "
                  "holds element-wise (with broadcasting); checked when the graph is built if "
                  "both are constants. ``data`` (default: the condition and the values of "
                  "``x`` and ``y``) is shown, ``summarize`` entries of each (default 3), after "
                  "``message``. Run it as a control dependency:\n\n"
                  f"    with tv.control_dependencies([tv.{default_name}(x, y)]): ...")
    return fn


assert_equal = _binary("==", "assert_equal", "equal", np.equal)
assert_none_equal = _binary("!=", "assert_none_equal", "not_equal", np.not_equal)
assert_less = _binary("<", "assert_less", "less", np.less)
assert_less_equal = _binary("<=", "assert_less_equal", "less_equal", np.less_equal)
assert_greater = _binary(">", "assert_greater", "greater", np.greater)
assert_greater_equal = _binary(">=", "assert_greater_equal", "greater_equal", np.greater_equal)


def _unary(sym, default_name, check, zero_first, joined=False):
    def fn(x, data=None, summarize=None, message=None, name=None):
        from ...framework.graph import get_default_graph
        from ...framework.tensor_conversion import convert_to_tensor
        message = _message_prefix(message)
        with get_default_graph().name_scope(name or default_name):
            x = convert_to_tensor(x, name="x")
            if data is None:
                cond = f"Condition x {sym} did not hold element-wise:"
                data = ([message, cond + f"x ({x.name}) = ", x] if joined else
                        [message, cond, f"x ({x.name}) = ", x])
            zero = convert_to_tensor(0, dtype=x.dtype)
            a, b = (zero, x) if zero_first else (x, zero)
            return check(a, b, data=data, summarize=summarize)
    fn.__name__ = default_name
    fn.__doc__ = (f"An op that fails the step (``InvalidArgumentError``) unless ``x {sym}`` "
                  "holds for every element of ``x`` (trivially true if ``x`` is empty); "
                  "checked when the graph is built if ``x`` is a constant.")
    return fn


assert_positive = _unary("> 0", "assert_positive", assert_less, True)
assert_negative = _unary("< 0", "assert_negative", assert_less, False)
assert_non_negative = _unary(">= 0", "assert_non_negative", assert_less_equal, True)
# (TF's message for this one has no space between the condition and "x (...) =")
assert_non_positive = _unary("<= 0", "assert_non_positive", assert_less_equal, False,
                             joined=True)


def assert_near(x, y, rtol=None, atol=None, data=None, summarize=None, message=None,
                name=None):
    """An op that fails the step unless ``|x - y| < atol + rtol * |y|`` element-wise
    (default tolerances ``10 * eps`` of the dtype), as TF 1.x's ``tf.assert_near``."""
    from ...framework.graph import get_default_graph
    from ...framework.tensor_conversion import convert_to_tensor
    from ..math.math_ext import abs as _abs, less, reduce_all
    message = _message_prefix(message)
    with get_default_graph().name_scope(name or "assert_near"):
        x = convert_to_tensor(x, name="x")
        y = convert_to_tensor(y, dtype=x.dtype, name="y")
        eps = np.finfo(x.dtype.np_dtype).eps
        rtol = convert_to_tensor(10 * eps if rtol is None else rtol, dtype=x.dtype, name="rtol")
        atol = convert_to_tensor(10 * eps if atol is None else atol, dtype=x.dtype, name="atol")
        if data is None:
            tol_text = (f"x and y not equal to tolerance rtol = {_tensor_str(rtol)}, "
                        f"atol = {_tensor_str(atol)}")
            data = [message, tol_text, f"x ({x.name}) = ", x, f"y ({y.name}) = ", y]
        tol = atol + rtol * _abs(y)
        condition = reduce_all(less(_abs(x - y), tol))
        return Assert(condition, [convert_to_tensor(d) for d in data], summarize=summarize)


def _tensor_str(t) -> str:
    """A tensor as TF 1.x's ``str(tensor)`` writes it."""
    return f'Tensor("{t.name}", shape={_tf_shape_str(t._shape)}, dtype={t.dtype.name})'


def _rank_assert(kind, x, ranks, data, summarize, message, name, static_ok, dynamic_cond):
    from ...framework import dtypes as _dt
    from ...framework.graph import get_default_graph
    from ...framework.tensor_conversion import convert_to_tensor
    from ..array.array_ops import no_op, shape
    from ..common import static_value
    from ..array.fill_ops import rank as _rank
    words = {"rank": "rank", "at_least": "rank at least", "in": "rank in"}[kind]
    with get_default_graph().name_scope(name or ("assert_" + (
            "rank" if kind == "rank" else "rank_" + kind))):
        x = convert_to_tensor(x, name="x")
        ranks = [convert_to_tensor(r, name="rank") for r in ranks]
        for r in ranks:
            assert_type(r, _dt.int32)
        message = _message_prefix(message)
        if data is None:
            data = [message, f"Tensor {x.name} must have {words}"] + ranks + \
                ["Received shape: ", shape(x)]
        statics = [static_value(r) for r in ranks]
        if all(s is not None for s in statics):
            if any(np.ndim(s) != 0 for s in statics):
                raise ValueError("Rank must be a scalar.")
            if x._shape is not None:
                given = [int(s) for s in statics]
                if not static_ok(len(x._shape), given):
                    want = given[0] if kind != "in" else tuple(given)
                    raise ValueError(f"{message}Tensor {x.name} must have {words} "
                                     f"{want}.  Received rank "
                                     f"{len(x._shape)}, shape {_tf_shape_str(x._shape)}")
                return no_op(name="static_checks_determined_all_ok")
        condition = dynamic_cond(_rank(x), ranks)
        deps = []
        for r, s in zip(ranks, statics):
            if s is None:
                deps.append(assert_rank(r, 0, data=["Rank must be a scalar. Received rank: ",
                                                    r]))
        if deps:
            from .control_flow_ops import with_dependencies
            condition = with_dependencies(deps, condition)
        return Assert(condition, [convert_to_tensor(d) for d in data], summarize=summarize)


def assert_rank(x, rank, data=None, summarize=None, message=None, name=None):
    """Check that ``x`` has rank ``rank``: a ``ValueError`` now if the ranks are known while
    the graph is built (with TF's message), else an op that fails the step."""
    from ..math.math_ext import equal
    return _rank_assert("rank", x, [rank], data, summarize, message, name,
                        lambda r, given: r == given[0], lambda r, ranks: equal(r, ranks[0]))


def assert_rank_at_least(x, rank, data=None, summarize=None, message=None, name=None):
    """Check that ``x`` has rank ``rank`` or more (statically when known, as
    :func:`assert_rank`)."""
    from ..math.math_ext import greater_equal
    return _rank_assert("at_least", x, [rank], data, summarize, message, name,
                        lambda r, given: r >= given[0],
                        lambda r, ranks: greater_equal(r, ranks[0]))


def assert_rank_in(x, ranks, data=None, summarize=None, message=None, name=None):
    """Check that the rank of ``x`` is one of ``ranks`` (statically when known, as
    :func:`assert_rank`)."""
    from ..math.math_ext import equal, logical_or

    def dynamic(r, given):
        from ...framework.tensor_conversion import convert_to_tensor
        if not given:
            return convert_to_tensor(False)
        out = equal(given[0], r)
        for g in given[1:]:
            out = logical_or(out, equal(g, r))
        return out
    return _rank_assert("in", x, list(ranks), data, summarize, message, name,
                        lambda r, given: r in given, dynamic)


def assert_integer(x, message=None, name=None):
    """A no-op if ``x`` has an integer dtype, else ``TypeError`` (a static check)."""
    from ...framework.graph import get_default_graph
    from ...framework.tensor_conversion import convert_to_tensor
    from ..array.array_ops import no_op
    with get_default_graph().name_scope(name or "assert_integer"):
        x = convert_to_tensor(x, name="x")
        if not x.dtype.is_integer:
            raise TypeError(f'{_message_prefix(message)}Expected "x" to be integer type.  '
                            f"Found: {x.name} of dtype {_tf_dtype_str(x.dtype)}")
        return no_op(name="statically_determined_was_integer")


def assert_type(tensor, tf_type, message=None, name=None):
    """A no-op if ``tensor`` has dtype ``tf_type``, else ``TypeError`` (a static check)."""
    from ...framework import dtypes as _dt
    from ...framework.graph import get_default_graph
    from ...framework.tensor_conversion import convert_to_tensor
    from ..array.array_ops import no_op
    tf_type = _dt.as_dtype(tf_type)
    with get_default_graph().name_scope(name or "assert_type"):
        tensor = convert_to_tensor(tensor, name="tensor")
        if tensor.dtype != tf_type:
            raise TypeError(f"{_message_prefix(message)}{tensor.name} must be of type "
                            f"{tf_type!r}; got {tensor.dtype!r}")
        return no_op(name="statically_determined_correct_type")


def assert_scalar(tensor, name=None, message=None):
    """``tensor`` itself if its static shape is a scalar's, else ``ValueError``."""
    from ...framework.tensor_conversion import convert_to_tensor
    tensor = convert_to_tensor(tensor)
    if tensor._shape is None or len(tensor._shape) != 0:
        raise ValueError(f"{_message_prefix(message)}Expected scalar shape for {tensor.name}, "
                         f"saw shape: {_tf_shape_str(tensor._shape)}.")
    return tensor


def assert_all_finite(t=None, msg=None, name=None, x=None, message=None):
    """``t`` unchanged; the step fails with ``InvalidArgumentError`` (naming ``msg``) if it
    holds NaN or Inf (TF 1.x's ``tf.debugging.assert_all_finite``/``verify_tensor_all_finite``,
    a :func:`check_numerics`)."""
    t = x if t is None else t
    msg = message if msg is None else msg
    from ...framework.tensor_conversion import convert_to_tensor
    return check_numerics(convert_to_tensor(t), msg or "", name=name)


verify_tensor_all_finite = assert_all_finite


def assert_proper_iterable(values):
    """``TypeError`` unless ``values`` is an iterable other than a tensor, an array or a
    string (TF's check before iterating over a list of checks)."""
    from ...framework.graph import Tensor
    if isinstance(values, (Tensor, np.ndarray, str, bytes)):
        raise TypeError('Expected argument "values" to be a "proper" iterable.  Found: '
                        f"{type(values)}")
    if not hasattr(values, "__iter__"):
        raise TypeError(f'Expected argument "values" to be iterable.  Found: {type(values)}')


def assert_same_float_dtype(tensors=None, dtype=None):
    """The one floating-point dtype of ``tensors`` (and ``dtype``); ``ValueError`` if they
    differ or are not floating point (default float32 when there are none)."""
    from ...framework import dtypes as _dt
    dtype = None if dtype is None else _dt.as_dtype(dtype)
    for t in tensors or []:
        if t is None:
            continue
        if dtype is None:
            dtype = t.dtype
        elif t.dtype != dtype:
            raise ValueError(f"Tensor conversion requested dtype {dtype.name} for Tensor with "
                             f"dtype {t.dtype.name}: {t!r}")
    if dtype is None:
        return _dt.float32
    if not dtype.is_floating:
        raise ValueError(f"Expected floating point type, got {dtype!r}.")
    return dtype


def is_numeric_tensor(tensor) -> bool:
    """Whether ``tensor`` is a tensor of a numeric dtype (integer, floating or complex)."""
    from ...framework.graph import Tensor
    dt = getattr(tensor, "dtype", None)
    return isinstance(tensor, Tensor) and dt is not None and (
        dt.is_integer or dt.is_floating or dt.is_complex)


def _monotonic(x, name, strict):
    from ...framework.graph import get_default_graph
    from ...framework.tensor_conversion import convert_to_tensor
    from ..array.array_ops import reshape
    from ..math.math_ext import greater, greater_equal, reduce_all
    what = "is_strictly_increasing" if strict else "is_non_decreasing"
    with get_default_graph().name_scope(name or what):
        x = convert_to_tensor(x, name="x_as_tensor")
        if not is_numeric_tensor(x):
            raise TypeError(f"Expected x to be numeric, instead found: {x!r}")
        flat = reshape(x, [-1])
        diff = flat[1:] - flat[:-1]
        zero = convert_to_tensor(0, dtype=x.dtype)
        return reduce_all((greater if strict else greater_equal)(diff, zero))


def is_non_decreasing(x, name=None):
    """A bool scalar: whether ``x`` (flattened) never decreases (true for fewer than two
    elements)."""
    return _monotonic(x, name, strict=False)


def is_strictly_increasing(x, name=None):
    """A bool scalar: whether ``x`` (flattened) strictly increases (true for fewer than two
    elements)."""
    return _monotonic(x, name, strict=True)


__all__ += ["assert_equal", "assert_none_equal", "assert_less", "assert_less_equal",
            "assert_greater", "assert_greater_equal", "assert_positive", "assert_negative",
            "assert_non_negative", "assert_non_positive", "assert_near", "assert_rank",
            "assert_rank_at_least", "assert_rank_in", "assert_integer", "assert_type",
            "assert_scalar", "verify_tensor_all_finite", "assert_proper_iterable",
            "assert_same_float_dtype", "is_numeric_tensor", "is_non_decreasing",
            "is_strictly_increasing"]

# tf.debugging's other names (tv.debugging.is_nan, tv.debugging.Assert ...)
from .control_flow_ops import Assert  # (used above; also tv.debugging.Assert)
from ..math.math_ext import is_finite, is_inf, is_nan  # noqa: F401


# ---- static facts and shape checks: is_tensor, get_static_value, ensure_shape, identity_n, ...
def is_tensor(x) -> bool:
    """Whether ``x`` is a graph tensor (a Tensor, a Variable or an IndexedSlices), not a
    Python or NumPy value (TF's ``tf.is_tensor``)."""
    from ...framework.graph import Tensor
    from ...framework.indexed_slices import IndexedSlices
    return isinstance(x, (Tensor, IndexedSlices)) or hasattr(x, "_as_graph_element")


def get_static_value(tensor, partial=False):
    """``tensor``'s value as a NumPy array when it is known while the graph is built (a
    constant, or the shape/rank/size of a tensor whose static shape is fully known), else
    None (TF's ``tf.get_static_value``)."""
    from ...framework.graph import Tensor
    from ..common import static_value
    if not isinstance(tensor, Tensor):
        return np.asarray(tensor) if not is_tensor(tensor) else None
    v = static_value(tensor)
    if v is not None:
        return np.asarray(v)
    op = tensor.op
    src = op.inputs[0]._shape if op.inputs else None
    if op.type in ("Shape", "Size", "Rank") and src is not None and (
            op.type == "Rank" or None not in src):
        dt = tensor.dtype.np_dtype
        if op.type == "Shape":
            return np.asarray(src, dtype=dt)
        return np.asarray(len(src) if op.type == "Rank" else int(np.prod(src)), dtype=dt)
    return None


def _shape_list(s) -> str:
    return "[" + ",".join("?" if d is None else str(d) for d in s) + "]"


def _ensure_shape_shape(inputs, attrs):
    (x,) = inputs
    want = attrs["shape"]
    have = x._shape
    if want is None:
        return [(x.dtype, have)]
    if have is None:
        return [(x.dtype, want)]
    if len(have) != len(want):
        raise InvalidArgumentError(f"Shape must be rank {len(want)} but is rank {len(have)}; "
                                   f"shapes are {_shape_list(want)} and {_shape_list(have)}")
    for i, (a, b) in enumerate(zip(want, have)):
        if a is not None and b is not None and a != b:
            raise InvalidArgumentError(
                f"Dimension {i} in both shapes must be equal, but are {a} and {b}. Shapes are "
                f"{_shape_list(want)} and {_shape_list(have)}.")
    return [(x.dtype, tuple(a if a is not None else b for a, b in zip(want, have)))]


def _ensure_shape_kernel(x, shape, name=""):
    have = tuple(np.shape(x))
    if shape is not None and (len(have) != len(shape) or any(
            d is not None and d != h for d, h in zip(shape, have))):
        raise InvalidArgumentError(f"Shape of tensor {name} {_shape_list(have)} is not "
                                   f"compatible with expected shape {_shape_list(shape)}.")
    return x


register_op("EnsureShape", _ensure_shape_shape, _ensure_shape_kernel,
            grad=lambda op, g: [g], foldable=False)


def ensure_shape(x, shape, name=None):
    """``x``, its static shape refined by ``shape`` (None dims are unknown); a shape known to
    differ fails now (InvalidArgumentError, a ValueError), one that differs when the step runs
    fails it with TF's "Shape of tensor ... is not compatible with expected shape ..."."""
    from ...framework.graph import TensorShape
    from ...framework.tensor_conversion import convert_to_tensor
    x = convert_to_tensor(x)
    if isinstance(shape, TensorShape):
        dims = None if shape.dims is None else tuple(shape.dims)
    elif shape is None:
        dims = None
    else:
        dims = tuple(None if d is None or (not hasattr(d, "op") and int(d) < 0) else int(d)
                     for d in shape)
    return apply_op("EnsureShape", [x], {"shape": dims, "name": x.name},
                    name=name or "EnsureShape").outputs[0]


def identity_n(input, name=None):
    """Each tensor of the list ``input`` through an identity (TF's ``tf.identity_n``)."""
    from ...framework.graph import get_default_graph
    from ..array.array_ops import identity
    with get_default_graph().name_scope(name or "IdentityN"):
        return [identity(t) for t in input]


def shape_n(input, out_type=None, name=None):
    """The shapes of the tensors of ``input`` (a list of 1-D ``out_type`` tensors)."""
    from ...framework import dtypes as _dt
    from ...framework.graph import get_default_graph
    from ..array.array_ops import shape
    with get_default_graph().name_scope(name or "ShapeN"):
        return [shape(t, out_type=out_type or _dt.int32) for t in input]


__all__ += ["is_tensor", "get_static_value", "ensure_shape", "identity_n", "shape_n"]


def assert_shapes(shapes, data=None, summarize=None, message=None, name=None):
    """Check the shapes of several tensors against symbolic shapes (TF's
    ``tf.debugging.assert_shapes``): ``shapes`` is a dict or a list of ``(tensor, shape)``
    pairs; a shape lists ints (exact sizes), strings (one size shared by every use of the
    name), ``None`` or ``"."`` (any size), and may start with ``...`` or ``"*"`` (any number
    of leading dimensions). Known sizes are checked now (``ValueError`` with TF's message),
    the rest by the returned op when it runs.

    >>> import tensorvm as tv
    >>> x, y = tv.zeros([2, 3]), tv.zeros([3])
    >>> _ = tv.debugging.assert_shapes([(x, ("N", "D")), (y, ("D",))])
    """
    from ...framework.graph import get_default_graph
    from ...framework.tensor_conversion import convert_to_tensor
    from ..array.array_ops import group, shape as _shape
    from ..math.math_ext import equal
    if isinstance(shapes, dict):
        shapes = shapes.items()
    prefix = _message_prefix(message)
    g = get_default_graph()
    with g.name_scope(name or "assert_shapes"):
        constraints = [(convert_to_tensor(x), s) for x, s in shapes if s is not None]
        specs = []
        for x, sym in constraints:
            if not (hasattr(sym, "__iter__") or hasattr(sym, "__getitem__")):
                raise ValueError(f"{prefix}Tensor {x.name}.  Specified shape must be an "
                                 "iterable.  An iterable has the attribute `__iter__` or "
                                 f"`__getitem__`.  Received specified shape: {sym}")
            sym = tuple(sym)
            inner = False
            for i, s in enumerate(sym):
                if s is Ellipsis or (isinstance(s, str) and s == "*"):
                    if i != 0:
                        raise ValueError(f"{prefix}Tensor {x.name} specified shape index {i}.  "
                                         "Symbol `...` or `*` for a variable number of "
                                         "unspecified dimensions is only allowed as the first "
                                         "entry")
                    inner = True
            sym = sym[1:] if inner else sym
            specs.append((x, inner, _dimension_sizes(x), sym if sym else (1,)))
        rank_checks = []
        for x, inner, _, sym in specs:
            r = len(sym)
            if inner:
                if r in (0, 1):
                    continue
                rank_checks.append(assert_rank_at_least(x, r, data=data, summarize=summarize,
                                                        message=message))
            elif r in (0, 1):
                rank_checks.append(assert_rank_in(x, [0, 1], data=data, summarize=summarize,
                                                  message=message))
            else:
                rank_checks.append(assert_rank(x, r, data=data, summarize=summarize,
                                               message=message))
        size_checks, named = [], {}
        for x, inner, actual, sym in specs:
            for i, s in enumerate(sym):
                if s is None or (isinstance(s, str) and s == "."):
                    continue
                dim = i - len(sym) if inner else i
                known = _known_int(s)
                if known is None and s not in named:
                    named[s] = (actual[dim], x, dim)
                    continue
                if known is not None:
                    want, how = known, "Specified explicitly"
                else:
                    want, by, at = named[s]
                    how = f"Specified by tensor {by.name} dimension {at}"
                have = actual[dim]
                if _known_int(have) is not None and _known_int(want) is not None:
                    if int(have) != int(want):
                        raise ValueError(f"{prefix}{how}.  Tensor {x.name} dimension {dim} must "
                                         f"have size {int(want)}.  Received size {int(have)}, "
                                         f"shape {_tf_shape_str(x._shape)}")
                    continue
                with g.control_dependencies(rank_checks):
                    cond = equal(convert_to_tensor(have), convert_to_tensor(want))
                d = data if data is not None else [
                    prefix, how, f"Tensor {x.name} dimension", dim, "must have size", want,
                    "Received shape: ", _shape(x)]
                size_checks.append(Assert(cond, [convert_to_tensor(v) for v in d],
                                          summarize=summarize))
        with g.control_dependencies(rank_checks):
            return group(*size_checks)


def _known_int(v):
    from ...framework.graph import Tensor
    if v is None or isinstance(v, (Tensor, str)):
        return None
    try:
        return int(v)
    except (TypeError, ValueError):
        return None


def _dimension_sizes(x):
    """Each dimension's size: an int where the static shape knows it, else a scalar tensor
    (a scalar counts as shape ``(1,)``, as in TF)."""
    from ..array.array_ops import shape as _shape
    s = x._shape
    if s is not None and len(s) == 0:
        return (1,)
    dyn = _shape(x)
    if s is None:
        return dyn
    return [int(d) if d is not None else dyn[i] for i, d in enumerate(s)]


__all__ += ["assert_shapes"]
