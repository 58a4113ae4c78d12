"""Element-wise math, matmul and reductions, with their gradients; Python operators on tensors."""
from __future__ import annotations

import numpy as np

from ...framework import dtypes as _dt
from ...vm.kernels import threads
from ...framework.errors import InvalidArgumentError
from ...framework.graph import overload_operator
from ...vm.kernels.array_api import is_device_array
from ...framework.op_def_library import apply_op
from ...framework.op_registry import register_op
from ...framework.tensor_conversion import convert_to_tensor
from ..common import _convert_pair, asarray, def_binary, def_unary, unbroadcast

__all__ = ["add", "subtract", "multiply", "divide", "div", "truediv", "floordiv", "mod", "pow",
           "truncatediv", "truncatemod",
           "negative", "matmul", "reduce_sum", "reduce_mean", "exp", "log", "square", "sqrt",
           "cast", "add_n"]


def _is_float(dt):
    return dt.is_floating or dt.is_complex


# ---- binary arithmetic --------------------------------------------------------------------
# (ufuncs: with ``out=`` a dead input's buffer, the same bits: OpDef.forwards)
add = def_binary("Add", np.add, lambda op, g: [unbroadcast(g, op.inputs[0]),
                                               unbroadcast(g, op.inputs[1])], forwards=(0, 1))
subtract = def_binary("Sub", np.subtract, lambda op, g: [unbroadcast(g, op.inputs[0]),
                                                         unbroadcast(-g, op.inputs[1])],
                      forwards=(0, 1))
def _conj(x):
    """``conj(x)`` for a complex tensor, ``x`` itself for a real one (no op added)."""
    if not x.dtype.is_complex:
        return x
    from .special_ops import conj
    return conj(x)


# TF's _MulGrad: d(x*y)/dx = grad * conj(y), d(x*y)/dy = conj(x) * grad (a complex input's
# gradient is dL/dRe + i dL/dIm of a real loss)
multiply = def_binary("Mul", np.multiply, lambda op, g: [
    unbroadcast(g * _conj(op.inputs[1]), op.inputs[0]),
    unbroadcast(_conj(op.inputs[0]) * g, op.inputs[1])], forwards=(0, 1))


def _check_int_divisor(y) -> None:
    """TF raises on an integer division by zero (NumPy would return 0 and warn).

    Not on a GPU: a divisor in device memory is not checked, as TF's GPU kernels of integer
    division do not check theirs (int64, int16, uint8...: a CUDA division by zero, undefined);
    CuPy gives 0 there (``x // 0 == x % 0 == 0``), as NumPy's ufuncs do. Checking would copy a
    flag to the host each call (the host waits for the GPU). TF's int32 division runs on the
    host on a GPU too, and checks: tensorvm's int32 division reads its inputs in host memory
    (``kernels_gpu.INT32_HOST_OPS``), so it still raises here.
    """
    if y.dtype.kind in "iu" and not is_device_array(y) and not np.all(y):
        raise InvalidArgumentError("Integer division by zero")


def _div_kernel(x, y):
    if x.dtype.kind in "iu":
        _check_int_divisor(y)
        return np.floor_divide(x, y)
    return np.true_divide(x, y)


def _floordiv_kernel(x, y):
    _check_int_divisor(y)
    return np.floor_divide(x, y)


def _mod_kernel(x, y):
    _check_int_divisor(y)
    return np.mod(x, y)


def _truncatediv_kernel(x, y):
    if y.dtype.kind in "iu":
        _check_int_divisor(y)
        q = np.floor_divide(x, y)
        # floor rounds down; truncation rounds toward zero: one more where the signs differ
        # and the division is inexact
        fix = (np.mod(x, y) != 0) & ((x < 0) != (y < 0))
        if not is_device_array(fix) and not np.any(fix):  # (on a GPU: no 'any?' to wait for)
            return q
        return q + fix.astype(q.dtype)
    return np.trunc(np.true_divide(x, y)).astype(x.dtype, copy=False)


def _truncatemod_kernel(x, y):
    _check_int_divisor(y)
    return np.fmod(x, y)


def _div_grad(op, g):
    x, y = op.inputs
    return [unbroadcast(g / y, x), unbroadcast(-g * x / (y * y), y)]


div = def_binary("RealDiv", _div_kernel, _div_grad)  # TF1 tf.div: floor division on ints


def divide(x, y, name=None):
    """True division, as TF1's ``tf.divide`` and ``/``: integer inputs become floating point
    (8/16-bit ints float32, wider ints float64) before dividing."""
    x, y = _convert_pair(x, y)
    if x.dtype.is_integer:
        ft = _dt.float32 if x.dtype.np_dtype.itemsize <= 2 else _dt.float64
        x, y = cast(x, ft), cast(y, ft)
    return div(x, y, name=name)


truediv = divide
floordiv = def_binary("FloorDiv", _floordiv_kernel, differentiable=False)
truncatediv = def_binary("TruncateDiv", _truncatediv_kernel, differentiable=False)
truncatemod = def_binary("TruncateMod", _truncatemod_kernel, differentiable=False)
mod = def_binary("FloorMod", _mod_kernel, lambda op, g: [
    unbroadcast(g, op.inputs[0]),
    unbroadcast(-g * floordiv(op.inputs[0], op.inputs[1]), op.inputs[1])])


def _pow_grad(op, g):
    x, y = op.inputs
    z = op.outputs[0]
    from .math_ext import greater, where_
    safe_log = log(where_(greater(x, 0), x, ones_like_(x)))
    return [unbroadcast(g * y * pow(x, y - 1), x), unbroadcast(g * z * safe_log, y)]


pow = def_binary("Pow", np.power, _pow_grad)


def ones_like_(x):
    from ..array.array_ops import ones_like
    return ones_like(x)


# ---- unary ----------------------------------------------------------------------------------
negative = def_unary("Neg", np.negative, lambda op, g: [-g])
exp = def_unary("Exp", np.exp, lambda op, g: [g * op.outputs[0]], allowed=_is_float)
log = def_unary("Log", np.log, lambda op, g: [g / op.inputs[0]], allowed=_is_float)
square = def_unary("Square", np.square, lambda op, g: [g * 2 * op.inputs[0]])
sqrt = def_unary("Sqrt", np.sqrt, lambda op, g: [g * 0.5 / op.outputs[0]], allowed=_is_float)


# ---- cast -----------------------------------------------------------------------------------
def _cast_kernel(x, DstT):
    return x.astype(DstT.np_dtype, copy=False)


def _cast_grad(op, g):
    src = op.inputs[0].dtype
    if not src.is_differentiable or not op.outputs[0].dtype.is_differentiable:
        return [None]
    return [cast(g, src)]


register_op("Cast", lambda inputs, attrs: [(attrs["DstT"], inputs[0]._shape)], _cast_kernel,
            grad=_cast_grad)


def cast(x, dtype, name=None):
    """``x`` converted to ``dtype`` (TF's rules: floats to integers truncate toward zero,
    complex to real keeps the real part); the same tensor when it already has that dtype."""
    dt = _dt.as_dtype(dtype)
    x = convert_to_tensor(x)
    if x.dtype == dt:
        return x
    return apply_op("Cast", [x], {"DstT": dt}, name=name).outputs[0]


# ---- add_n ----------------------------------------------------------------------------------
def _add_n_shape(inputs, attrs):
    from ..common import broadcast_shapes, check_same_dtype
    dt = check_same_dtype(inputs, "AddN")
    shp = inputs[0]._shape
    for t in inputs[1:]:
        shp = broadcast_shapes(shp, t._shape)
    return [(dt, shp)]


_SCALARS = (np.generic, bool, int, float, complex)


def _add_n_kernel(*xs):
    x0 = xs[0]
    if len(xs) == 1:
        # a copy (the output never aliases an input), on x0's device: arrays of both kinds
        # have .copy(); a scalar becomes a host 0-d array
        return np.array(x0) if isinstance(x0, _SCALARS) else x0.copy()
    out = x0 + xs[1]  # fresh: ((x0 + x1) + x2) ..., the rest added into it in place
    for x in xs[2:]:
        if getattr(out, "shape", None) == getattr(x, "shape", ()) and out.ndim:
            out += x
        else:  # a scalar or a broadcast: a new array
            out = out + x
    return out


register_op("AddN", _add_n_shape, _add_n_kernel,
            grad=lambda op, g: [unbroadcast(g, x) for x in op.inputs])


def add_n(inputs, name=None):
    """The element-wise sum of a list of tensors of one dtype and shape. One input comes back
    as it is, or as an identity called ``name`` when a name is given (TF's rule: a
    ``total_loss`` of one loss is still a ``total_loss`` op)."""
    if not isinstance(inputs, (list, tuple)) or not inputs:
        raise ValueError("inputs must be a list of at least one Tensor/IndexedSlices with the "
                         "same dtype and shape")
    inputs = [convert_to_tensor(x) for x in inputs]
    if len(inputs) == 1:
        if name:
            from ..array.array_ops import identity
            return identity(inputs[0], name=name)
        return inputs[0]
    return apply_op("AddN", inputs, name=name).outputs[0]


# ---- matmul ---------------------------------------------------------------------------------
def _matmul_shape(inputs, attrs):
    from ..common import broadcast_shapes, check_same_dtype
    a, b = inputs
    dt = check_same_dtype(inputs, "MatMul")
    if a._shape is None or b._shape is None:
        return [(dt, None)]
    if len(a._shape) < 2 or len(b._shape) < 2:
        raise InvalidArgumentError(
            f"matmul needs tensors of rank >= 2, got shapes {list(a._shape)} and "
            f"{list(b._shape)}")
    m, k1 = a._shape[-2:][::-1] if attrs["transpose_a"] else a._shape[-2:]
    k2, n = b._shape[-2:][::-1] if attrs["transpose_b"] else b._shape[-2:]
    if k1 is not None and k2 is not None and k1 != k2:
        raise InvalidArgumentError(
            f"Matrix size-incompatible: In[0]: {list(a._shape)}, In[1]: {list(b._shape)}"
            f" (transpose_a={attrs['transpose_a']}, transpose_b={attrs['transpose_b']})")
    batch = broadcast_shapes(a._shape[:-2], b._shape[:-2])
    return [(dt, tuple(batch) + (m, n))]


def _matmul_kernel(a, b, transpose_a=False, transpose_b=False):
    if transpose_a:
        a = np.swapaxes(a, -1, -2)
    if transpose_b:
        b = np.swapaxes(b, -1, -2)
    if type(a) is np.ndarray and type(b) is np.ndarray and a.ndim == 2 and b.ndim == 2 \
            and a.dtype == b.dtype and a.dtype.kind == "f":
        # a large product is cut by rows over the intra-op pool when there is one
        # (ConfigProto.intra_op_parallelism_threads); else one BLAS call, as before
        return threads.matmul(a, b)
    return np.matmul(a, b)


def _matmul_grad(op, g):
    # TF's _MatMulGrad: the products of the conjugated inputs (adjoint_a/adjoint_b are
    # conj + transpose by the time the op is built, see matmul)
    a, b = _conj(op.inputs[0]), _conj(op.inputs[1])
    ta, tb = op.attrs["transpose_a"], op.attrs["transpose_b"]
    if not ta and not tb:
        ga, gb = matmul(g, b, transpose_b=True), matmul(a, g, transpose_a=True)
    elif not ta and tb:
        ga, gb = matmul(g, b), matmul(g, a, transpose_a=True)
    elif ta and not tb:
        ga, gb = matmul(b, g, transpose_b=True), matmul(a, g)
    else:
        ga, gb = matmul(b, g, transpose_a=True, transpose_b=True), \
            matmul(g, a, transpose_a=True, transpose_b=True)
    return [unbroadcast(ga, op.inputs[0]), unbroadcast(gb, op.inputs[1])]


register_op("MatMul", _matmul_shape, _matmul_kernel, grad=_matmul_grad)


def matmul(a, b, transpose_a=False, transpose_b=False, adjoint_a=False, adjoint_b=False,
           a_is_sparse=False, b_is_sparse=False, output_type=None, name=None):
    """``tv.matmul(a, b)``; batched over leading dims (broadcast), with transpose flags;
    ``adjoint_a``/``adjoint_b`` conjugate and transpose (TF's; a real input is only
    transposed). ``a_is_sparse``/``b_is_sparse`` are hints, accepted and ignored.

    >>> import tensorvm as tv
    >>> with tv.Graph().as_default(), tv.Session() as s:
    ...     s.run(tv.matmul([[1j, 2.0]], [[1j, 2.0]], adjoint_b=True)).tolist()
    [[(5+0j)]]
    """
    if transpose_a and adjoint_a:
        raise ValueError("Only one of transpose_a and adjoint_a can be True.")
    if transpose_b and adjoint_b:
        raise ValueError("Only one of transpose_b and adjoint_b can be True.")
    if output_type is not None:
        raise InvalidArgumentError("matmul: output_type is not supported (tensorvm's matmul "
                                   "returns the inputs' dtype)")
    a, b = _convert_pair(a, b)
    if adjoint_a:
        a, transpose_a = _conj(a), True
    if adjoint_b:
        b, transpose_b = _conj(b), True
    return apply_op("MatMul", [a, b], {"transpose_a": bool(transpose_a),
                                       "transpose_b": bool(transpose_b)}, name=name).outputs[0]


# ---- reductions -----------------------------------------------------------------------------
def norm_axes(axis, rank):
    """Normalise ``axis`` (None, int or list) against ``rank``; returns a sorted tuple."""
    if axis is None:
        return None if rank is None else tuple(range(rank))
    axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    if rank is None:
        return tuple(int(a) for a in axes)
    out = []
    for a in axes:
        a = int(a)
        if not -rank <= a < max(rank, 1):
            raise InvalidArgumentError(f"axis {a} is out of range for a tensor of rank {rank}")
        out.append(a % rank if rank else 0)
    return tuple(sorted(set(out)))


def reduction_shape(inputs, attrs):
    x = inputs[0]
    rank = None if x._shape is None else len(x._shape)
    axes = norm_axes(attrs["axis"], rank)
    if x._shape is None:
        return [(attrs.get("out_dtype") or x.dtype, None)]
    if attrs["keepdims"]:
        shp = tuple(1 if i in axes else d for i, d in enumerate(x._shape))
    else:
        shp = tuple(d for i, d in enumerate(x._shape) if i not in axes)
    return [(attrs.get("out_dtype") or x.dtype, shp)]


def _axis_kw(axis):
    return None if axis is None else tuple(axis)


def _sum_kernel(x, axis, keepdims):
    return np.sum(x, axis=_axis_kw(axis), keepdims=keepdims, dtype=x.dtype)


def _mean_kernel(x, axis, keepdims):
    r = np.mean(x, axis=_axis_kw(axis), keepdims=keepdims)
    if x.dtype.kind in "iu":
        return r.astype(x.dtype, copy=False)
    return asarray(r, x.dtype, like=x)  # on x's device (a host scalar from NumPy)


def _expand_reduced(g, op):
    """Reshape a reduction's gradient so that it broadcasts against the input."""
    if op.attrs["keepdims"]:
        return g
    return apply_op("ExpandReduced", [g, op.inputs[0]], {"axis": op.attrs["axis"]}).outputs[0]


def _expand_reduced_kernel(g, x, axis):
    rank = np.ndim(x)
    axes = tuple(range(rank)) if axis is None else tuple(a % rank for a in axis)
    shp = tuple(1 if i in axes else d for i, d in enumerate(np.shape(x)))
    return np.reshape(g, shp)


def _expand_reduced_shape(inputs, attrs):
    g, x = inputs
    if x._shape is None:
        return [(g.dtype, None)]
    axes = norm_axes(attrs["axis"], len(x._shape))
    return [(g.dtype, tuple(1 if i in axes else d for i, d in enumerate(x._shape)))]


def _expand_reduced_grad(op, g):
    from ..array.array_ops import reshape_like
    return [reshape_like(g, op.inputs[0]), None]


register_op("ExpandReduced", _expand_reduced_shape, _expand_reduced_kernel,
            grad=_expand_reduced_grad, shape_only=(1,))


def _sum_grad(op, g):
    from ..array.array_ops import broadcast_like
    return [broadcast_like(_expand_reduced(g, op), op.inputs[0])]


def _mean_grad(op, g):
    from ..array.array_ops import broadcast_like
    x = op.inputs[0]
    n = apply_op("ReducedSize", [x], {"axis": op.attrs["axis"], "dtype": x.dtype}).outputs[0]
    return [broadcast_like(_expand_reduced(g, op), x) / n]


register_op("ReducedSize", lambda inputs, attrs: [(attrs["dtype"], ())],
            lambda x, axis, dtype: asarray(
                np.prod([np.shape(x)[a] for a in (range(np.ndim(x)) if axis is None else axis)]),
                dtype.np_dtype, like=x), differentiable=False, shape_only=(0,))

register_op("Sum", reduction_shape, _sum_kernel, grad=_sum_grad)
register_op("Mean", reduction_shape, _mean_kernel, grad=_mean_grad)


def _reduce(op_type, x, axis, keepdims, name):
    x = convert_to_tensor(x)
    if axis is not None:
        axis = (int(axis),) if isinstance(axis, (int, np.integer)) else tuple(int(a) for a in axis)
    return apply_op(op_type, [x], {"axis": axis, "keepdims": bool(keepdims)},
                    name=name).outputs[0]


def reduce_sum(input_tensor, axis=None, keepdims=None, name=None, reduction_indices=None,
               keep_dims=None):
    """TF 1.x's deprecated ``reduction_indices``/``keep_dims`` are accepted too."""
    return _reduce("Sum", input_tensor, reduction_indices if axis is None else axis,
                   bool(keep_dims if keepdims is None else keepdims), name)


def reduce_mean(input_tensor, axis=None, keepdims=None, name=None, reduction_indices=None,
                keep_dims=None):
    """TF 1.x's deprecated ``reduction_indices``/``keep_dims`` are accepted too."""
    return _reduce("Mean", input_tensor, reduction_indices if axis is None else axis,
                   bool(keep_dims if keepdims is None else keepdims), name)


# ---- Python operators ---------------------------------------------------------------------
def _r(fn):
    return lambda self, other: fn(other, self)


overload_operator("__add__", lambda s, o: add(s, o))
overload_operator("__radd__", _r(add))
overload_operator("__sub__", lambda s, o: subtract(s, o))
overload_operator("__rsub__", _r(subtract))
overload_operator("__mul__", lambda s, o: multiply(s, o))
overload_operator("__rmul__", _r(multiply))
overload_operator("__truediv__", lambda s, o: divide(s, o))
overload_operator("__rtruediv__", _r(divide))
overload_operator("__floordiv__", lambda s, o: floordiv(s, o))
overload_operator("__rfloordiv__", _r(floordiv))
overload_operator("__mod__", lambda s, o: mod(s, o))
overload_operator("__rmod__", _r(mod))
overload_operator("__pow__", lambda s, o: pow(s, o))
overload_operator("__rpow__", _r(pow))
overload_operator("__matmul__", lambda s, o: matmul(s, o))
overload_operator("__rmatmul__", _r(matmul))
overload_operator("__neg__", lambda s: negative(s))
