"""More element-wise math: abs (complex modulus too), sign, reciprocal, expm1, log1p, rsqrt,
sin/cos/tan, tanh and sigmoid (with TF's fused SigmoidGrad/TanhGrad), rounding, is_nan/inf/finite,
maximum/minimum, squared_difference, the comparisons and logic ops (bool outputs) and the
Python operators on them, and TF 1.x's other arithmetic names (floormod, floor_div, realdiv,
div_no_nan, scalar_mul, saturate_cast).
"""
from __future__ import annotations

import numpy as np

from ...framework import dtypes as _dt
from ...framework.graph import overload_operator
from ...framework.op_def_library import apply_op
from ...framework.op_registry import register_op
from ...framework.tensor_conversion import convert_to_tensor
from ..array.array_ops import constant, zeros_like
from ..common import broadcast_shapes, check_same_dtype, def_binary, def_unary
from ..common import unbroadcast
from .math_ops import cast, exp

__all__ = ["abs", "sign", "reciprocal", "expm1", "log1p", "rsqrt", "sin", "cos", "tan", "tanh",
           "sigmoid", "floor", "ceil", "round", "is_nan", "is_inf", "is_finite", "maximum",
           "minimum", "squared_difference", "greater", "greater_equal", "less", "less_equal",
           "equal", "not_equal", "logical_and", "logical_or", "logical_xor", "logical_not",
           "floormod", "floor_div", "realdiv", "div_no_nan", "scalar_mul", "saturate_cast"]


def _is_float(dt):
    return dt.is_floating


def _is_real(dt):
    return dt.is_floating or dt.is_integer


def _is_bool(dt):
    return dt.is_bool


# ---- unary math -------------------------------------------------------------------------------
_abs_real = def_unary("Abs", np.abs, lambda op, g: [g * sign(op.inputs[0])], allowed=_is_real)


def _complex_abs_kernel(x):
    return np.abs(x)


def _complex_abs_shape(inputs, attrs):
    x = inputs[0]
    real = _dt.float32 if x.dtype == _dt.complex64 else _dt.float64
    return [(real, x._shape)]


def _complex_abs_grad(op, g):  # TF's _ComplexAbsGrad
    from .special_ops import complex as _complex
    z = zeros_like(g)
    y = op.outputs[0]
    return [div_no_nan(_complex(g, z) * op.inputs[0], _complex(y, zeros_like(y)))]


register_op("ComplexAbs", _complex_abs_shape, _complex_abs_kernel, grad=_complex_abs_grad)


def abs(x, name=None):
    """Element-wise absolute value; of a complex tensor, its modulus (a real tensor of the
    matching precision, TF's ``ComplexAbs``)."""
    x = convert_to_tensor(x)
    if x.dtype.is_complex:
        return apply_op("ComplexAbs", [x], name=name).outputs[0]
    return _abs_real(x, name=name)
sign = def_unary("Sign", np.sign, lambda op, g: [zeros_like(op.inputs[0])], allowed=_is_real)
reciprocal = def_unary("Reciprocal", np.reciprocal,
                       lambda op, g: [-g * op.outputs[0] * op.outputs[0]], allowed=_is_real)
expm1 = def_unary("Expm1", np.expm1, lambda op, g: [g * exp(op.inputs[0])], allowed=_is_float)
log1p = def_unary("Log1p", np.log1p, lambda op, g: [g / (1 + op.inputs[0])], allowed=_is_float)


def _rsqrt_kernel(x):
    return np.reciprocal(np.sqrt(x))


rsqrt = def_unary("Rsqrt", _rsqrt_kernel,
                  lambda op, g: [g * -0.5 * op.outputs[0] * op.outputs[0] * op.outputs[0]],
                  allowed=_is_float)
sin = def_unary("Sin", np.sin, lambda op, g: [g * cos(op.inputs[0])], allowed=_is_float)
cos = def_unary("Cos", np.cos, lambda op, g: [-g * sin(op.inputs[0])], allowed=_is_float)
tan = def_unary("Tan", np.tan, lambda op, g: [g * (1 + op.outputs[0] * op.outputs[0])],
                allowed=_is_float)
tanh = def_unary("Tanh", np.tanh, lambda op, g: [tanh_grad(op.outputs[0], g)],
                 allowed=_is_float)


def _sigmoid_kernel(x):
    # 1 / (1 + exp(-x)) in one buffer (TF's logistic): exp(-x) overflowing to inf for very
    # negative x gives 0, within a denormal of the value; 13x faster than exp(-logaddexp(0, -x))
    with np.errstate(over="ignore"):
        e = np.exp(-x)
    if e.ndim == 0:  # a NumPy scalar: no buffer to reuse
        return 1 / (1 + e)
    e += 1
    return np.reciprocal(e, out=e)


sigmoid = def_unary("Sigmoid", _sigmoid_kernel,
                    lambda op, g: [sigmoid_grad(op.outputs[0], g)], allowed=_is_float)


# ---- TF's SigmoidGrad / TanhGrad: one op each where the gradient took three ----------------
# Each kernel does the unfused graph's float operations in its order (the same bits): for
# sigmoid (dy * y) * (1 - y), for tanh dy * (1 - y * y).
def _sigmoid_grad_kernel(y, dy):
    out = dy * y
    out *= 1 - y
    return out


def _tanh_grad_kernel(y, dy):
    t = y * y
    t = 1 - t if t.ndim == 0 else np.subtract(1, t, out=t)
    t *= dy
    return t


def _grad_shape(op_type):
    def shape_fn(inputs, attrs):
        y, dy = inputs
        check_same_dtype(inputs, op_type)
        return [(y.dtype, broadcast_shapes(y._shape, dy._shape))]
    return shape_fn


def _sigmoid_grad_grad(op, g):  # TF's _SigmoidGradGrad
    y, dy = op.inputs
    gb = g * dy
    return [gb - 2.0 * gb * y, sigmoid_grad(y, g)]


def _tanh_grad_grad(op, g):  # TF's _TanhGradGrad
    y, dy = op.inputs
    return [g * -2.0 * dy * y, tanh_grad(y, g)]


register_op("SigmoidGrad", _grad_shape("SigmoidGrad"), _sigmoid_grad_kernel,
            grad=_sigmoid_grad_grad)
register_op("TanhGrad", _grad_shape("TanhGrad"), _tanh_grad_kernel, grad=_tanh_grad_grad)


def sigmoid_grad(y, dy, name=None):
    """``dy * y * (1 - y)``: the gradient of ``y = sigmoid(x)`` given ``dy``."""
    return apply_op("SigmoidGrad", [y, dy], name=name).outputs[0]


def tanh_grad(y, dy, name=None):
    """``dy * (1 - y * y)``: the gradient of ``y = tanh(x)`` given ``dy``."""
    return apply_op("TanhGrad", [y, dy], name=name).outputs[0]
floor = def_unary("Floor", np.floor, allowed=_is_float, differentiable=False)
ceil = def_unary("Ceil", np.ceil, allowed=_is_float, differentiable=False)
round = def_unary("Round", np.round, allowed=_is_real, differentiable=False)  # half to even
round.__doc__ = "Element-wise rounding, half to even (banker's rounding), as in TensorFlow."
is_nan = def_unary("IsNan", np.isnan, out_dtype=_dt.bool_, allowed=_is_float,
                   differentiable=False)
is_inf = def_unary("IsInf", np.isinf, out_dtype=_dt.bool_, allowed=_is_float,
                   differentiable=False)
is_finite = def_unary("IsFinite", np.isfinite, out_dtype=_dt.bool_, allowed=_is_float,
                      differentiable=False)


# ---- binary math ------------------------------------------------------------------------------
def _minmax_grad(op, g, mask_fn):
    from .select_ops import where_  # it imports this module
    x, y = op.inputs
    mask = mask_fn(x, y)  # where x wins (ties go to x, as in TensorFlow)
    z = zeros_like(g)
    return [unbroadcast(where_(mask, g, z), x), unbroadcast(where_(mask, z, g), y)]


maximum = def_binary("Maximum", np.maximum,
                     lambda op, g: _minmax_grad(op, g, greater_equal), allowed=_is_real)
minimum = def_binary("Minimum", np.minimum,
                     lambda op, g: _minmax_grad(op, g, less_equal), allowed=_is_real)


def _squared_difference_kernel(x, y):
    return np.square(np.subtract(x, y))


def _squared_difference_grad(op, g):
    x, y = op.inputs
    d = g * 2 * (x - y)
    return [unbroadcast(d, x), unbroadcast(-d, y)]


squared_difference = def_binary("SquaredDifference", _squared_difference_kernel,
                                _squared_difference_grad, allowed=_is_real)


# ---- comparisons and logic (bool outputs) -----------------------------------------------------
def _bool_result(fn):
    def kernel(x, y):
        r = fn(x, y)  # object (string) inputs give bool too
        return r.astype(np.bool_, copy=False) if hasattr(r, "astype") else np.bool_(r)
    kernel.__name__ = fn.__name__
    return kernel


def _compare(op_type, fn, allowed):
    return def_binary(op_type, _bool_result(fn), out_dtype=_dt.bool_, allowed=allowed,
                      differentiable=False)


greater = _compare("Greater", np.greater, _is_real)
greater_equal = _compare("GreaterEqual", np.greater_equal, _is_real)
less = _compare("Less", np.less, _is_real)
less_equal = _compare("LessEqual", np.less_equal, _is_real)
equal = _compare("Equal", np.equal, None)
not_equal = _compare("NotEqual", np.not_equal, None)
logical_and = _compare("LogicalAnd", np.logical_and, _is_bool)
logical_or = _compare("LogicalOr", np.logical_or, _is_bool)
logical_xor = _compare("LogicalXor", np.logical_xor, _is_bool)
logical_not = def_unary("LogicalNot", np.logical_not, allowed=_is_bool, differentiable=False)


# ---- Python operators -------------------------------------------------------------------------
def _r(fn):
    return lambda self, other: fn(other, self)


overload_operator("__abs__", lambda s: abs(s))
overload_operator("__lt__", lambda s, o: less(s, o))
overload_operator("__le__", lambda s, o: less_equal(s, o))
overload_operator("__gt__", lambda s, o: greater(s, o))
overload_operator("__ge__", lambda s, o: greater_equal(s, o))
overload_operator("__and__", lambda s, o: logical_and(s, o))
overload_operator("__rand__", _r(logical_and))
overload_operator("__or__", lambda s, o: logical_or(s, o))
overload_operator("__ror__", _r(logical_or))
overload_operator("__xor__", lambda s, o: logical_xor(s, o))
overload_operator("__rxor__", _r(logical_xor))
overload_operator("__invert__", lambda s: logical_not(s))


# ---- TF 1.x's other arithmetic names ------------------------------------------------------------
def floormod(x, y, name=None):
    """``x - floor(x / y) * y`` (TF's ``tf.floormod``, ``tf.mod``): the result has ``y``'s
    sign."""
    from .math_ops import mod
    return mod(x, y, name=name)


def floor_div(x, y, name=None):
    """``floor(x / y)`` element-wise (TF's ``tf.floor_div``, the op behind ``//``)."""
    from .math_ops import floordiv
    return floordiv(x, y, name=name)


def realdiv(x, y, name=None):
    """``x / y`` for real (floating-point) tensors (TF's ``tf.realdiv``)."""
    from .math_ops import div
    return div(x, y, name=name)


def _div_no_nan_kernel(x, y):
    with np.errstate(divide="ignore", invalid="ignore"):
        q = np.true_divide(x, y)
    return np.where(y == 0, np.zeros_like(q), q).astype(x.dtype, copy=False)


def _div_no_nan_grad(op, g):  # TF's _DivNoNanGrad
    x, y = op.inputs
    return [unbroadcast(div_no_nan(g, y), x),
            unbroadcast(g * div_no_nan(div_no_nan(-x, y), y), y)]


div_no_nan = def_binary("DivNoNan", _div_no_nan_kernel, _div_no_nan_grad,
                        allowed=lambda dt: dt.is_floating or dt.is_complex)
div_no_nan.__doc__ = ("``x / y``, or 0 where ``y`` is 0 (even where ``x`` is 0, inf or NaN): "
                      "TF's ``tf.div_no_nan``.")


def scalar_mul(scalar, x, name=None):
    """``scalar * x`` for a scalar ``scalar`` (an :class:`~tensorvm.IndexedSlices` ``x`` stays
    one, its values scaled); ``ValueError`` for a non-scalar ``scalar`` (TF's message)."""
    from ...framework.indexed_slices import IndexedSlices
    from .math_ops import multiply
    base = x.values if isinstance(x, IndexedSlices) else convert_to_tensor(x)
    scalar = convert_to_tensor(scalar, dtype=base.dtype, name="scalar") \
        if not hasattr(scalar, "dtype") or not hasattr(scalar, "op") else scalar
    shape = scalar._shape
    if shape is not None and len(shape) == 0:
        if isinstance(x, IndexedSlices):
            return IndexedSlices(multiply(scalar, x.values, name=name), x.indices,
                                 x.dense_shape)
        return multiply(scalar, base, name=name)
    shown = "<unknown>" if shape is None else "(" + ", ".join(
        "None" if d is None else str(d) for d in shape) + ("," if len(shape) == 1 else "") + ")"
    raise ValueError(f"The input scalar must be a 0-D value. Received shape {shown}.")


def saturate_cast(value, dtype, name=None):
    """``value`` cast to ``dtype``, first clamped to ``dtype``'s range so that no value wraps
    around (TF's ``tf.saturate_cast``)."""
    from ...framework.graph import get_default_graph
    with get_default_graph().name_scope(name or "saturate_cast"):
        value = convert_to_tensor(value, name="value")
        dtype = _dt.as_dtype(dtype)
        if value.dtype != dtype and not (value.dtype.is_bool or dtype.is_bool):
            lo_in, hi_in = _range_of(value.dtype)
            lo_out, hi_out = _range_of(dtype)
            if lo_in < lo_out:
                value = maximum(value, constant(_representable(lo_out, value.dtype, up=True),
                                                dtype=value.dtype))
            if hi_in > hi_out:
                value = minimum(value, constant(_representable(hi_out, value.dtype, up=False),
                                                dtype=value.dtype))
        return cast(value, dtype, name="saturate_cast")


def _range_of(dt):
    d = dt.np_dtype
    info = np.finfo(d) if d.kind in "fc" else np.iinfo(d)
    return float(info.min), float(info.max)


def _representable(bound, dt, up: bool):
    """``bound`` in ``dt``, rounded inwards where ``dt`` cannot hold it (a float32 cannot
    hold 2**31 - 1: the largest float32 below it is taken, so the cast cannot wrap)."""
    d = dt.np_dtype
    if d.kind in "iu":
        return int(bound)
    v = d.type(bound)
    if (up and float(v) < bound) or (not up and float(v) > bound):
        v = np.nextafter(v, d.type(np.inf) if up else d.type(-np.inf))
    return v
