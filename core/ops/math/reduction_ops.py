"""More reductions: max, min, prod, any, all, logsumexp, count_nonzero, argmax/argmin and the
scans cumsum and cumprod, with their gradients.
"""
from __future__ import annotations

import numpy as np

from ...framework import dtypes as _dt
from ...framework.errors import InvalidArgumentError
from ...framework.op_def_library import apply_op
from ...vm.kernels.array_api import array_namespace
from ...framework.op_registry import register_op
from ...framework.tensor_conversion import convert_to_tensor
from ..array.array_ops import constant
from ..common import asarray
from .math_ops import _axis_kw, _expand_reduced, cast, exp, norm_axes, reduce_sum
from .math_ops import reduction_shape
from .elementwise_ops import _is_bool, _is_float, _is_real, div_no_nan, equal, not_equal

__all__ = ["reduce_max", "reduce_min", "reduce_prod", "reduce_any", "reduce_all",
           "reduce_logsumexp", "count_nonzero", "argmax", "argmin", "cumsum", "cumprod"]


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
