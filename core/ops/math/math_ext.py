"""More element-wise math, comparisons, logic, select, and more reductions (max, min, prod, any,
all, logsumexp, argmax/argmin, cumsum, count_nonzero), with their gradients; TF's other
arithmetic names (floormod, floor_div, realdiv, div_no_nan, scalar_mul, saturate_cast),
cumprod, linspace, meshgrid, where_v2, the histograms and the modulus of complex tensors.

Each op's definition, shape rule, kernel and gradient sit together, as in math_ops. Comparison,
logical, rounding and index ops are not differentiable (TensorFlow returns ``None`` for them).

>>> import tensorvm as tv
>>> x = tv.constant([[1.0, 5.0], [7.0, 3.0]])
>>> with tv.Session() as s:
...     s.run([tv.reduce_max(x, axis=1), tv.argmax(x, axis=1), x > 2.0])[1].tolist()
[1, 0]
"""
from __future__ import annotations

import numpy as np

from ...framework import dtypes as _dt
from ...framework.errors import InvalidArgumentError
from ...framework.graph import overload_operator
from ...framework.op_def_library import apply_op
from ...vm.kernels.array_api import array_namespace
from ...framework.op_registry import register_op
from ...framework.tensor_conversion import convert_to_tensor
from ..array.array_ops import constant, zeros_like
from ..common import _convert_pair, broadcast_shapes, check_same_dtype, def_binary, def_unary
from ..common import asarray, unbroadcast
from .math_ops import _axis_kw, _expand_reduced, cast, exp, norm_axes, reduce_sum
from .math_ops import reduction_shape

__all__ = ["abs", "sign", "reciprocal", "maximum", "minimum", "squared_difference", "expm1",
           "log1p", "rsqrt", "sin", "cos", "tan", "tanh", "sigmoid", "floor", "ceil", "round",
           "is_nan", "is_inf", "is_finite",
           "greater", "greater_equal", "less", "less_equal", "equal", "not_equal",
           "logical_and", "logical_or", "logical_not", "logical_xor", "where", "clip_by_value",
           "reduce_max", "reduce_min", "reduce_prod", "reduce_any", "reduce_all",
           "reduce_logsumexp", "argmax", "argmin", "cumsum", "count_nonzero"]


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


# ---- where / select ---------------------------------------------------------------------------
def _select_shape(inputs, attrs):
    c, x, y = inputs
    if not c.dtype.is_bool:
        raise InvalidArgumentError(f"where: condition must be bool, got {c.dtype.name}")
    dt = check_same_dtype([x, y], "Select")
    s = broadcast_shapes(x._shape, y._shape)
    if c._shape is not None and s is not None and len(c._shape) == 1 and len(s) > 1:
        rows = (c._shape[0],) + (1,) * (len(s) - 1)  # TF1: a vector condition picks rows
        try:
            return [(dt, broadcast_shapes(rows, s))]
        except InvalidArgumentError:
            raise InvalidArgumentError(
                f"where: a rank-1 condition selects rows, so its length ({c._shape[0]}) must "
                f"match the first dimension of x and y (shape {list(s)})") from None
    return [(dt, broadcast_shapes(c._shape, s))]


def _select_kernel(c, x, y):
    nd = max(np.ndim(x), np.ndim(y))
    if np.ndim(c) == 1 and nd > 1:  # TF1: a vector condition picks whole rows
        c = np.reshape(c, (-1,) + (1,) * (nd - 1))
    return np.where(c, x, y)


def _select_grad(op, g):
    c, x, y = op.inputs
    z = zeros_like(g)
    return [None, unbroadcast(where_(c, g, z), x), unbroadcast(where_(c, z, g), y)]


register_op("Select", _select_shape, _select_kernel, grad=_select_grad)


def _where_indices_shape(inputs, attrs):
    (c,) = inputs
    if c.dtype.is_string:
        raise InvalidArgumentError("where: condition must be bool or numeric, got string")
    return [(_dt.int64, None if c._shape is None else (None, len(c._shape)))]


def _where_indices_kernel(c):
    return np.argwhere(c).astype(np.int64, copy=False)


register_op("Where", _where_indices_shape, _where_indices_kernel, differentiable=False)


def where_(condition, x, y, name=None):
    """The three-argument select: ``x`` where ``condition`` holds, else ``y``."""
    condition = convert_to_tensor(condition)
    x, y = _convert_pair(x, y)
    return apply_op("Select", [condition, x, y], name=name).outputs[0]


def where(condition, x=None, y=None, name=None):
    """``tv.where(c)``: int64 coordinates ``[num_true, rank]`` of the true elements of ``c``;
    ``tv.where(c, x, y)``: elements of ``x`` where ``c`` holds, else of ``y``.

    ``x``, ``y`` and ``c`` broadcast (NumPy rules), except that a rank-1 ``c`` with higher-rank
    ``x``/``y`` selects whole rows, as in TF1's ``tf.where``.

    >>> import tensorvm as tv
    >>> with tv.Session() as s:
    ...     s.run(tv.where([True, False], [1, 2], [10, 20])).tolist()
    [1, 20]
    """
    if x is None and y is None:
        return apply_op("Where", [condition], name=name).outputs[0]
    if x is None or y is None:
        raise InvalidArgumentError("where: x and y must both be given, or neither")
    return where_(condition, x, y, name=name)


def clip_by_value(t, clip_value_min, clip_value_max, name=None):
    """``min(max(t, clip_value_min), clip_value_max)``; the clip values may broadcast against
    ``t`` but must not enlarge it. Gradients flow where ``t`` is inside the range."""
    t = convert_to_tensor(t)
    out = maximum(minimum(t, clip_value_max), clip_value_min, name=name or "clip_by_value")
    a, b = t._shape, out._shape
    if a is not None and b is not None and (len(a) != len(b) or any(
            x is not None and y is not None and x != y for x, y in zip(a, b))):
        raise InvalidArgumentError(
            f"clip_by_value: the clip values broadcast t from shape {list(a)} to {list(b)}; "
            f"they must not change t's shape")
    return out


# ---- reductions ---------------------------------------------------------------------------------
def _checked_reduction_shape(op_type, allowed, what):
    def shape_fn(inputs, attrs):
        if not allowed(inputs[0].dtype):
            raise InvalidArgumentError(
                f"{op_type} needs a {what} tensor, got {inputs[0].dtype.name}")
        return reduction_shape(inputs, attrs)
    return shape_fn


def _extreme(dtype, lowest: bool):
    if dtype.kind == "f":
        return -np.inf if lowest else np.inf
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return info.min if lowest else info.max
    return not lowest  # bool


def _extreme_reduce(x, axis, keepdims, lowest: bool):
    """``max`` (``lowest``: the reduction starts at the dtype's lowest value) or ``min`` of
    ``x``, TF's result on empty reductions included (-inf, or the lowest integer). NumPy takes
    that start as ``initial=``; CuPy's ``max``/``min`` do not, so on a device an empty reduced
    axis fills the result with it."""
    reduce, start = (np.max if lowest else np.min), _extreme(x.dtype, lowest)
    if type(x) is np.ndarray:
        return reduce(x, axis=axis, keepdims=keepdims, initial=start)
    axes = range(x.ndim) if axis is None else [a % x.ndim for a in np.atleast_1d(axis)]
    if all(x.shape[a] for a in axes):
        return reduce(x, axis=axis, keepdims=keepdims)
    shape = [1 if i in axes else d for i, d in enumerate(x.shape) if keepdims or i not in axes]
    return array_namespace(x).full(shape, start, x.dtype)


def _max_kernel(x, axis, keepdims):
    return _extreme_reduce(x, _axis_kw(axis), keepdims, lowest=True)


def _min_kernel(x, axis, keepdims):
    return _extreme_reduce(x, _axis_kw(axis), keepdims, lowest=False)


def _minmax_reduce_grad(op, g):
    """The gradient goes to the positions equal to the result, split equally among ties."""
    x = op.inputs[0]
    y = _expand_reduced(op.outputs[0], op)
    ind = cast(equal(y, x), g.dtype)
    num = reduce_sum(ind, axis=op.attrs["axis"], keepdims=True)
    return [_expand_reduced(g, op) * ind / num]


def _prod_kernel(x, axis, keepdims):
    return np.prod(x, axis=_axis_kw(axis), keepdims=keepdims, dtype=x.dtype)


def _prod_others_kernel(x, axis):
    """For each element, the product of the other elements along ``axis`` (zero-safe: built
    from exclusive cumulative products from both ends, no division)."""
    rank = x.ndim
    axes = tuple(range(rank)) if axis is None else tuple(a % rank for a in axis)
    rest = [i for i in range(rank) if i not in axes]
    perm = rest + list(axes)
    xt = np.transpose(x, perm)
    lead = xt.shape[:len(rest)]
    flat = xt.reshape(lead + (-1,))
    if flat.shape[-1] == 0:
        return np.zeros_like(x)
    ones = array_namespace(x).ones(lead + (1,), x.dtype)
    left = np.cumprod(np.concatenate([ones, flat[..., :-1]], -1), axis=-1, dtype=x.dtype)
    right = np.cumprod(np.concatenate([ones, flat[..., :0:-1]], -1), axis=-1,
                       dtype=x.dtype)[..., ::-1]
    return np.transpose((left * right).reshape(xt.shape), np.argsort(perm).tolist())


register_op("ProdOthers", lambda inputs, attrs: [(inputs[0].dtype, inputs[0]._shape)],
            _prod_others_kernel)  # no gradient: a second derivative of reduce_prod fails loudly


def _prod_grad(op, g):
    x = op.inputs[0]
    others = apply_op("ProdOthers", [x], {"axis": op.attrs["axis"]}).outputs[0]
    return [_expand_reduced(g, op) * others]


def _any_kernel(x, axis, keepdims):
    return np.any(x, axis=_axis_kw(axis), keepdims=keepdims)


def _all_kernel(x, axis, keepdims):
    return np.all(x, axis=_axis_kw(axis), keepdims=keepdims)


def _logsumexp_kernel(x, axis, keepdims):
    ax = _axis_kw(axis)
    m = _extreme_reduce(x, ax, True, lowest=True)
    m = np.where(np.isfinite(m), m, x.dtype.type(0))
    with np.errstate(divide="ignore"):
        out = np.log(np.sum(np.exp(x - m), axis=ax, keepdims=True)) + m
    if not keepdims:
        out = np.reshape(out, ()) if ax is None else np.squeeze(out, axis=ax)
    return asarray(out, x.dtype, like=x)


def _logsumexp_grad(op, g):
    x = op.inputs[0]
    return [_expand_reduced(g, op) * exp(x - _expand_reduced(op.outputs[0], op))]


register_op("Max", _checked_reduction_shape("Max", _is_real, "real numeric"), _max_kernel,
            grad=_minmax_reduce_grad)
register_op("Min", _checked_reduction_shape("Min", _is_real, "real numeric"), _min_kernel,
            grad=_minmax_reduce_grad)
register_op("Prod", _checked_reduction_shape("Prod", _is_real, "real numeric"), _prod_kernel,
            grad=_prod_grad)
register_op("Any", _checked_reduction_shape("Any", _is_bool, "bool"), _any_kernel,
            differentiable=False)
register_op("All", _checked_reduction_shape("All", _is_bool, "bool"), _all_kernel,
            differentiable=False)
register_op("ReduceLogSumExp", _checked_reduction_shape("ReduceLogSumExp", _is_float,
                                                        "floating-point"),
            _logsumexp_kernel, grad=_logsumexp_grad)


def _reduce(op_type, x, axis, keepdims, name):
    x = convert_to_tensor(x)
    rank = None if x._shape is None else len(x._shape)
    try:
        axes = None if axis is None else norm_axes(axis, rank)
    except InvalidArgumentError:
        axes = tuple(np.ravel(axis).tolist())  # the shape function raises it, naming the op
    return apply_op(op_type, [x], {"axis": axes, "keepdims": bool(keepdims)},
                    name=name).outputs[0]


def _keep(keepdims, keep_dims):
    return bool(keep_dims if keepdims is None else keepdims)


def _axes(axis, reduction_indices):
    return reduction_indices if axis is None else axis


def reduce_max(input_tensor, axis=None, keepdims=None, name=None, reduction_indices=None,
               keep_dims=None):
    """Maximum over ``axis`` (all axes by default); ``-inf`` over an empty set."""
    return _reduce("Max", input_tensor, _axes(axis, reduction_indices),
                   _keep(keepdims, keep_dims), name)


def reduce_min(input_tensor, axis=None, keepdims=None, name=None, reduction_indices=None,
               keep_dims=None):
    """Minimum over ``axis`` (all axes by default); ``+inf`` over an empty set."""
    return _reduce("Min", input_tensor, _axes(axis, reduction_indices),
                   _keep(keepdims, keep_dims), name)


def reduce_prod(input_tensor, axis=None, keepdims=None, name=None, reduction_indices=None,
                keep_dims=None):
    """Product over ``axis``; its gradient is exact where elements are zero."""
    return _reduce("Prod", input_tensor, _axes(axis, reduction_indices),
                   _keep(keepdims, keep_dims), name)


def reduce_any(input_tensor, axis=None, keepdims=None, name=None, reduction_indices=None,
               keep_dims=None):
    """Logical or over ``axis`` of a bool tensor."""
    return _reduce("Any", input_tensor, _axes(axis, reduction_indices),
                   _keep(keepdims, keep_dims), name)


def reduce_all(input_tensor, axis=None, keepdims=None, name=None, reduction_indices=None,
               keep_dims=None):
    """Logical and over ``axis`` of a bool tensor."""
    return _reduce("All", input_tensor, _axes(axis, reduction_indices),
                   _keep(keepdims, keep_dims), name)


def reduce_logsumexp(input_tensor, axis=None, keepdims=None, name=None, reduction_indices=None,
                     keep_dims=None):
    """``log(sum(exp(x)))`` over ``axis``, computed stably (the maximum is taken out first)."""
    return _reduce("ReduceLogSumExp", input_tensor, _axes(axis, reduction_indices),
                   _keep(keepdims, keep_dims), name)


def count_nonzero(input_tensor, axis=None, keepdims=None, dtype=_dt.int64, name=None,
                  reduction_indices=None, keep_dims=None):
    """Number of non-zero (non-empty, for strings) elements over ``axis``, as ``dtype``."""
    x = convert_to_tensor(input_tensor)
    zero = constant("" if x.dtype.is_string else 0, dtype=x.dtype, graph=x.graph)
    nz = reduce_sum(cast(not_equal(x, zero), _dt.int64), axis=_axes(axis, reduction_indices),
                    keepdims=_keep(keepdims, keep_dims))
    return cast(nz, dtype, name=name)


# ---- argmax / argmin --------------------------------------------------------------------------
def _arg_shape(op_type):
    def shape_fn(inputs, attrs):
        x = inputs[0]
        if not _is_real(x.dtype):
            raise InvalidArgumentError(f"{op_type} needs a real numeric tensor, got "
                                       f"{x.dtype.name}")
        if attrs["output_type"] not in (_dt.int32, _dt.int64):
            raise InvalidArgumentError(f"{op_type}: output_type must be int32 or int64, got "
                                       f"{attrs['output_type'].name}")
        if x._shape is None:
            return [(attrs["output_type"], None)]
        rank = len(x._shape)
        if rank == 0:
            raise InvalidArgumentError(f"{op_type} needs a tensor of rank >= 1, got a scalar")
        (axis,) = norm_axes(attrs["axis"], rank)
        if x._shape[axis] == 0:
            raise InvalidArgumentError(
                f"{op_type}: reduction axis {axis} is empty in shape {list(x._shape)}")
        return [(attrs["output_type"], x._shape[:axis] + x._shape[axis + 1:])]
    return shape_fn


def _argmax_kernel(x, axis, output_type):
    return np.argmax(x, axis=axis).astype(output_type.np_dtype, copy=False)


def _argmin_kernel(x, axis, output_type):
    return np.argmin(x, axis=axis).astype(output_type.np_dtype, copy=False)


register_op("ArgMax", _arg_shape("ArgMax"), _argmax_kernel, differentiable=False)
register_op("ArgMin", _arg_shape("ArgMin"), _argmin_kernel, differentiable=False)


def _arg(op_type, input, axis, dimension, output_type, name):
    if axis is not None and dimension is not None:
        raise InvalidArgumentError(f"{op_type}: give axis or dimension, not both")
    axis = dimension if axis is None else axis
    return apply_op(op_type, [input], {"axis": int(0 if axis is None else axis),
                                       "output_type": _dt.as_dtype(output_type)},
                    name=name).outputs[0]


def argmax(input, axis=None, name=None, dimension=None, output_type=_dt.int64):
    """Index of the largest value along ``axis`` (default 0, as in TF1); first one on ties."""
    return _arg("ArgMax", input, axis, dimension, output_type, name)


def argmin(input, axis=None, name=None, dimension=None, output_type=_dt.int64):
    """Index of the smallest value along ``axis`` (default 0, as in TF1); first one on ties."""
    return _arg("ArgMin", input, axis, dimension, output_type, name)


# ---- cumsum -----------------------------------------------------------------------------------
def _cumsum_shape(inputs, attrs):
    x = inputs[0]
    if not (_is_real(x.dtype) or x.dtype.is_complex):
        raise InvalidArgumentError(f"Cumsum needs a numeric tensor, got {x.dtype.name}")
    if x._shape is not None:
        if not x._shape:
            raise InvalidArgumentError("Cumsum needs a tensor of rank >= 1, got a scalar")
        norm_axes(attrs["axis"], len(x._shape))
    return [(x.dtype, x._shape)]


def _cumsum_kernel(x, axis, exclusive, reverse):
    if reverse:
        x = np.flip(x, axis)
    out = np.cumsum(x, axis=axis, dtype=x.dtype)
    if exclusive:
        shifted = np.zeros_like(out)
        dst = [slice(None)] * out.ndim
        src = [slice(None)] * out.ndim
        dst[axis], src[axis] = slice(1, None), slice(None, -1)
        shifted[tuple(dst)] = out[tuple(src)]
        out = shifted
    return np.flip(out, axis) if reverse else out


def _cumsum_grad(op, g):
    a = op.attrs
    return [cumsum(g, a["axis"], exclusive=a["exclusive"], reverse=not a["reverse"])]


register_op("Cumsum", _cumsum_shape, _cumsum_kernel, grad=_cumsum_grad)


def cumsum(x, axis=0, exclusive=False, reverse=False, name=None):
    """Cumulative sum along ``axis``; ``exclusive`` leaves each element out of its own sum,
    ``reverse`` sums from the end."""
    return apply_op("Cumsum", [x], {"axis": int(axis), "exclusive": bool(exclusive),
                                    "reverse": bool(reverse)}, name=name).outputs[0]


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


# ---- cumprod -------------------------------------------------------------------------------------
def _cumprod_kernel(x, axis, exclusive, reverse):
    if reverse:
        x = np.flip(x, axis)
    if exclusive:
        ones_shape = list(x.shape)
        ones_shape[axis] = 1
        head = array_namespace(x).ones(ones_shape, x.dtype)
        idx = [slice(None)] * x.ndim
        idx[axis] = slice(None, -1)
        x = np.concatenate([head, x[tuple(idx)]], axis=axis)
    out = np.cumprod(x, axis=axis, dtype=x.dtype)
    return np.flip(out, axis) if reverse else out


def _cumprod_grad(op, g):  # TF's _CumprodGrad
    a = op.attrs
    x = op.inputs[0]
    prod = cumprod(x, a["axis"], exclusive=a["exclusive"], reverse=a["reverse"])
    out = cumsum(prod * g, a["axis"], exclusive=a["exclusive"], reverse=not a["reverse"])
    return [div_no_nan(out, x)]


def _cumprod_shape(inputs, attrs):
    x = inputs[0]
    if not (_is_real(x.dtype) or x.dtype.is_complex):
        raise InvalidArgumentError(f"Cumprod needs a numeric tensor, got {x.dtype.name}")
    if x._shape is not None:
        if not x._shape:
            raise InvalidArgumentError("Cumprod needs a tensor of rank >= 1, got a scalar")
        norm_axes(attrs["axis"], len(x._shape))
    return [(x.dtype, x._shape)]


register_op("Cumprod", _cumprod_shape, _cumprod_kernel, grad=_cumprod_grad)


def cumprod(x, axis=0, exclusive=False, reverse=False, name=None):
    """Cumulative product along ``axis``; ``exclusive`` leaves each element out of its own
    product (the first is 1), ``reverse`` multiplies from the end.

    >>> import tensorvm as tv
    >>> with tv.Session() as s:
    ...     s.run(tv.cumprod([1, 2, 3], exclusive=True)).tolist()
    [1, 1, 2]
    """
    x = convert_to_tensor(x)
    rank = None if x._shape is None else len(x._shape)
    axis = int(axis)
    if rank:
        (axis,) = norm_axes(axis, rank)
    return apply_op("Cumprod", [x], {"axis": axis, "exclusive": bool(exclusive),
                                     "reverse": bool(reverse)}, name=name).outputs[0]


# ---- linspace, meshgrid ------------------------------------------------------------------------
def linspace(start, stop, num, name=None, axis=0):
    """``num`` evenly spaced values from ``start`` to ``stop`` inclusive (the last is exactly
    ``stop``); ``start``/``stop`` may be tensors of one shape, the values then go along
    ``axis``. ``num`` may be a tensor. Gradients flow to ``start`` and ``stop``.

    >>> import tensorvm as tv
    >>> with tv.Session() as s:
    ...     s.run(tv.linspace(0.0, 1.0, 5)).tolist()
    [0.0, 0.25, 0.5, 0.75, 1.0]
    """
    from ...framework.graph import get_default_graph
    from ..array.array_ops import reshape
    from ..array.fill_ops import range as _range
    from ..array.manip_ops import expand_dims
    with get_default_graph().name_scope(name or "linspace"):
        start = convert_to_tensor(start, name="start")
        stop = convert_to_tensor(stop, name="stop", dtype=start.dtype
                                 if not isinstance(stop, np.ndarray) else None)
        if start.dtype.is_integer:  # TF 2's rule: integer bounds give float64 values
            start, stop = cast(start, _dt.float64), cast(stop, _dt.float64)
        elif not start.dtype.is_floating:
            raise InvalidArgumentError(f"LinSpace: start and stop must be numbers, got "
                                       f"{start.dtype.name}")
        num = convert_to_tensor(num, name="num") if not isinstance(num, int) else num
        rank = None if start._shape is None else len(start._shape)
        ax = axis if rank is None else norm_axes(axis, rank + 1)[0] if rank else 0
        n_int = cast(num, _dt.int32) if not isinstance(num, int) else num
        steps = cast(n_int - 1, start.dtype) if not isinstance(num, int) else \
            constant(float(max(num - 1, 1)), dtype=start.dtype)
        if not isinstance(num, int):
            steps = maximum(steps, constant(1.0, dtype=start.dtype))
        idx = cast(_range(n_int), start.dtype)
        s, e = expand_dims(start, ax), expand_dims(stop, ax)
        shape_of_idx = [1] * ((rank or 0) + 1)
        shape_of_idx[ax] = -1
        idx = reshape(idx, shape_of_idx)
        out = s + idx * ((e - s) / steps)
        # the last value is exactly ``stop`` (TF's linspace_nd)
        if isinstance(num, int) and num <= 1:
            return out
        is_last = equal(reshape(_range(n_int), shape_of_idx), n_int - 1)
        if not isinstance(num, int):
            is_last = logical_and(is_last, greater(n_int, 1))
        return where_(is_last, e + zeros_like(out), out)


lin_space = linspace


def meshgrid(*args, **kwargs):
    """N-D coordinate arrays from N 1-D tensors (TF's ``tf.meshgrid``): ``indexing="xy"``
    (default, Cartesian: the first two output dimensions swapped) or ``"ij"`` (matrix).

    >>> import tensorvm as tv
    >>> X, Y = tv.meshgrid([1, 2, 3], [4, 5])
    >>> with tv.Session() as s:
    ...     s.run(X).tolist(), s.run(Y).tolist()
    ([[1, 2, 3], [1, 2, 3]], [[4, 4, 4], [5, 5, 5]])
    """
    from ...framework.graph import get_default_graph
    from ..array.array_ops import reshape, stack
    from ..array.fill_ops import ones, size
    indexing = kwargs.pop("indexing", "xy")
    name = kwargs.pop("name", "meshgrid")
    if kwargs:
        key = next(iter(kwargs))
        raise TypeError(f"'{key}' is an invalid keyword argument for this function")
    if indexing not in ("xy", "ij"):
        raise ValueError(f"Argument `indexing` parameter must be either 'xy' or 'ij', got "
                         f"'{indexing}'")
    with get_default_graph().name_scope(name):
        ndim = len(args)
        s0 = (1,) * ndim
        if not ndim:
            return []
        output = []
        for i, x in enumerate(args):
            x = convert_to_tensor(x) if not isinstance(x, (list, tuple)) else stack(
                [convert_to_tensor(v) for v in x]) if any(
                    hasattr(v, "op") for v in x) else convert_to_tensor(x)
            output.append(reshape(x, s0[:i] + (-1,) + s0[i + 1:]))
        shapes = [size(x) for x in output]
        dtype = output[0].dtype
        if indexing == "xy" and ndim > 1:
            output[0] = reshape(output[0], (1, -1) + (1,) * (ndim - 2))
            output[1] = reshape(output[1], (-1, 1) + (1,) * (ndim - 2))
            shapes[0], shapes[1] = shapes[1], shapes[0]
        mult_fact = ones(shapes, dtype)
        return [x * mult_fact for x in output]


__all__ += ["floormod", "floor_div", "realdiv", "div_no_nan", "scalar_mul", "saturate_cast",
            "cumprod", "linspace", "lin_space", "meshgrid"]


# ---- where_v2 (NumPy broadcasting of all three) -------------------------------------------------
def _select_v2_shape(inputs, attrs):
    c, x, y = inputs
    if not c.dtype.is_bool:
        raise InvalidArgumentError(f"where_v2: condition must be bool, got {c.dtype.name}")
    dt = check_same_dtype([x, y], "SelectV2")
    return [(dt, broadcast_shapes(c._shape, broadcast_shapes(x._shape, y._shape)))]


def _select_v2_grad(op, g):  # TF's _SelectGradV2
    c, x, y = op.inputs
    z = zeros_like(g)
    return [None, unbroadcast(apply_op("SelectV2", [c, g, z]).outputs[0], x),
            unbroadcast(apply_op("SelectV2", [c, z, g]).outputs[0], y)]


def _select_v2_kernel(c, x, y):
    return np.where(c, x, y)


register_op("SelectV2", _select_v2_shape, _select_v2_kernel, grad=_select_v2_grad)


def where_v2(condition, x=None, y=None, name=None):
    """``tv.where_v2(c)``: the coordinates of the true elements of ``c`` (as ``tv.where``);
    ``tv.where_v2(c, x, y)``: ``x`` where ``c`` holds, else ``y``, all three broadcast by
    NumPy's rules (TF 2's ``tf.where``: a rank-1 ``c`` broadcasts as NumPy's, it does not
    select rows).

    >>> import tensorvm as tv
    >>> with tv.Session() as s:
    ...     s.run(tv.where_v2([True, False], [[1, 2], [3, 4]], 0)).tolist()
    [[1, 0], [3, 0]]
    """
    if x is None and y is None:
        return where(condition, name=name)
    if x is None or y is None:
        raise ValueError("x and y must both be non-None or both be None.")
    condition = convert_to_tensor(condition)
    x, y = _convert_pair(x, y)
    return apply_op("SelectV2", [condition, x, y], name=name).outputs[0]


# ---- histograms ---------------------------------------------------------------------------------
def _histogram_bins(values, value_range, n):
    """The bin of each value: ``floor((v - lo) / (hi - lo) * nbins)`` clipped to
    ``[0, nbins - 1]`` (TF's rule: values outside the range go to the end bins). The range
    stays where it is (a device range is not read by the host)."""
    xp = array_namespace(values)
    vr = value_range.astype(np.float64)
    scaled = (values.astype(np.float64) - vr[0]) / (vr[1] - vr[0]) * n
    return xp.clip(xp.floor(scaled), 0, n - 1).astype(np.int32)


def _histogram_nbins(nbins, value_range):
    """``nbins`` (read on the host, as TF's HostMemory input), and a host range checked."""
    from ...vm.kernels.array_api import to_host
    nb = int(np.asarray(to_host(nbins)))
    if nb <= 0:
        raise InvalidArgumentError(f"nbins should be a positive number, but got '{nb}'")
    if type(value_range) is np.ndarray and not value_range[0] < value_range[1]:
        raise InvalidArgumentError(f"value_range should satisfy value_range[0] < "
                                   f"value_range[1], but got [{value_range[0]}, "
                                   f"{value_range[1]}]")
    return nb


def _histogram_kernel(values, value_range, nbins, dtype):
    n = _histogram_nbins(nbins, value_range)
    bins = _histogram_bins(values.reshape(-1), value_range, n)
    xp = array_namespace(values)
    return xp.bincount(bins, minlength=n).astype(dtype.np_dtype, copy=False)


def _histogram_bins_kernel(values, value_range, nbins, dtype):
    n = _histogram_nbins(nbins, value_range)
    return _histogram_bins(values, value_range, n).astype(dtype.np_dtype, copy=False)


def _histogram_shape(inputs, attrs):
    from ..common import static_value
    v = static_value(inputs[2])
    return [(attrs["dtype"], (None if v is None else int(v),))]


register_op("HistogramFixedWidth", _histogram_shape, _histogram_kernel, differentiable=False)
register_op("HistogramFixedWidthBins",
            lambda inputs, attrs: [(attrs["dtype"], inputs[0]._shape)],
            _histogram_bins_kernel, differentiable=False)


def histogram_fixed_width(values, value_range, nbins=100, dtype=_dt.int32, name=None):
    """How many of ``values`` fall in each of ``nbins`` equal bins over ``value_range``
    (``[lo, hi]``); values below ``lo`` count in the first bin, above ``hi`` in the last.

    >>> import tensorvm as tv
    >>> with tv.Session() as s:
    ...     s.run(tv.histogram_fixed_width([-1.0, 0.0, 1.5, 2.0, 5.0, 15], [0.0, 5.0], 5)).tolist()
    [2, 1, 1, 0, 2]
    """
    values = convert_to_tensor(values)
    vr = convert_to_tensor(value_range, dtype=values.dtype)
    nb = convert_to_tensor(nbins, dtype=_dt.int32)
    return apply_op("HistogramFixedWidth", [values, vr, nb], {"dtype": _dt.as_dtype(dtype)},
                    name=name).outputs[0]


def histogram_fixed_width_bins(values, value_range, nbins=100, dtype=_dt.int32, name=None):
    """The bin index of each of ``values`` (as :func:`histogram_fixed_width` bins them)."""
    values = convert_to_tensor(values)
    vr = convert_to_tensor(value_range, dtype=values.dtype)
    nb = convert_to_tensor(nbins, dtype=_dt.int32)
    return apply_op("HistogramFixedWidthBins", [values, vr, nb],
                    {"dtype": _dt.as_dtype(dtype)}, name=name).outputs[0]


__all__ += ["where_v2", "histogram_fixed_width", "histogram_fixed_width_bins"]
