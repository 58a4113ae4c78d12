"""``tv.math``: TF 1.x's ``tf.math`` names — the element-wise math, reductions, segment ops and
special functions that tensorvm has under their top-level names (``tv.math.log1p is
tv.log1p``), ``tf.nn``'s that ``tf.math`` repeats (``softplus``, ``softmax`` …), TF's
``tf.math`` spellings (``divide_no_nan``, ``floormod`` …) and the few ``tf.math``-only
functions, built here from existing ops: ``reduce_std``, ``reduce_variance``,
``reduce_euclidean_norm``, ``xlogy``, ``xdivy``, ``xlog1py``, ``multiply_no_nan``,
``reciprocal_no_nan``, ``zero_fraction``, ``polyval``, ``cumulative_logsumexp``,
``accumulate_n`` and ``confusion_matrix``.

>>> import tensorvm as tv
>>> tv.math.log1p is tv.log1p, tv.math.softplus is tv.nn.softplus
(True, True)
>>> with tv.Session() as s:
...     float(s.run(tv.math.reduce_std([1.0, 3.0])))
1.0
"""
from __future__ import annotations

from ..framework import dtypes as _dt
from .. import ops as _ops
from ..framework.graph import get_default_graph
from ..ops import nn as _nn
from ..framework.tensor_conversion import convert_to_tensor

# tf.math names that are tensorvm's top-level ops under the same name
_SAME = [
    "abs", "acos", "acosh", "add", "add_n", "angle", "argmax", "argmin", "asin", "asinh", "atan",
    "atan2", "atanh", "bessel_i0", "bessel_i0e", "bessel_i1", "bessel_i1e", "bincount", "ceil", "conj", "cos", "cosh", "count_nonzero", "cumprod",
    "cumsum", "imag", "real", "igamma", "igammac", "betainc",
    "digamma", "divide", "equal", "erf", "erfc", "erfcinv", "erfinv", "exp", "expm1", "floor",
    "floordiv",
    "floormod", "greater", "greater_equal", "invert_permutation", "is_finite", "is_inf",
    "is_nan", "is_non_decreasing", "is_strictly_increasing", "lbeta", "less", "less_equal",
    "lgamma", "log", "log1p", "log_sigmoid", "logical_and", "logical_not", "logical_or",
    "logical_xor", "maximum", "minimum", "mod", "multiply", "ndtri", "negative", "nextafter",
    "not_equal",
    "polygamma", "pow", "reciprocal", "reduce_all", "reduce_any", "reduce_logsumexp",
    "reduce_max", "reduce_mean", "reduce_min", "reduce_prod", "reduce_sum", "rint", "round",
    "rsqrt", "scalar_mul", "segment_max", "segment_mean", "segment_min", "segment_prod",
    "segment_sum", "sigmoid", "sign", "sin", "sinh", "sqrt", "square", "squared_difference",
    "subtract", "tan", "tanh", "top_k", "truediv", "unsorted_segment_max",
    "unsorted_segment_mean", "unsorted_segment_min", "unsorted_segment_prod",
    "unsorted_segment_sqrt_n", "unsorted_segment_sum", "zeta",
]
# tf.math names that tensorvm has under tv.nn
_NN = ["softplus", "softsign", "softmax", "log_softmax", "l2_normalize", "in_top_k"]

for _n in _SAME:
    globals()[_n] = getattr(_ops, _n)
for _n in _NN:
    globals()[_n] = getattr(_nn, _n)
del _n

divide_no_nan = _ops.div_no_nan


def _zero_where(cond, value):
    return _ops.where(cond, _ops.zeros_like(value), value)


def xlogy(x, y, name=None):
    """``x * log(y)``, and 0 where ``x`` is 0 (even where ``y`` is 0); gradients as TF's."""
    with get_default_graph().name_scope(name or "xlogy"):
        x, y = convert_to_tensor(x), convert_to_tensor(y)
        zero = _ops.equal(x, _ops.zeros_like(x))
        safe_y = _ops.where(zero, _ops.ones_like(y) + _ops.zeros_like(x), y + _ops.zeros_like(x))
        return _zero_where(zero, x * _ops.log(safe_y))


def xdivy(x, y, name=None):
    """``x / y``, and 0 where ``x`` is 0 (even where ``y`` is 0)."""
    with get_default_graph().name_scope(name or "xdivy"):
        x, y = convert_to_tensor(x), convert_to_tensor(y)
        zero = _ops.equal(x, _ops.zeros_like(x))
        safe_y = _ops.where(zero, _ops.ones_like(y) + _ops.zeros_like(x), y + _ops.zeros_like(x))
        return _zero_where(zero, x / safe_y)


def xlog1py(x, y, name=None):
    """``x * log1p(y)``, and 0 where ``x`` is 0."""
    with get_default_graph().name_scope(name or "xlog1py"):
        x, y = convert_to_tensor(x), convert_to_tensor(y)
        zero = _ops.equal(x, _ops.zeros_like(x))
        safe_y = _ops.where(zero, _ops.zeros_like(x), y + _ops.zeros_like(x))
        return _zero_where(zero, x * _ops.log1p(safe_y))


def multiply_no_nan(x, y, name=None):
    """``x * y``, and 0 where ``y`` is 0 (even where ``x`` is NaN or infinite)."""
    with get_default_graph().name_scope(name or "multiply_no_nan"):
        x, y = convert_to_tensor(x), convert_to_tensor(y)
        zero = _ops.equal(y, _ops.zeros_like(y))
        safe_x = _ops.where(zero, _ops.zeros_like(x) + _ops.zeros_like(y),
                            x + _ops.zeros_like(y))
        return _zero_where(zero, safe_x * y)


def reciprocal_no_nan(x, name=None):
    """``1 / x``, and 0 where ``x`` is 0."""
    x = convert_to_tensor(x)
    return _ops.div_no_nan(_ops.ones_like(x), x, name=name or "reciprocal_no_nan")


def zero_fraction(value, name=None):
    """The fraction of ``value``'s elements that are zero, a float32 scalar."""
    value = convert_to_tensor(value)
    return _ops.reduce_mean(_ops.cast(_ops.equal(value, _ops.zeros_like(value)), _dt.float32),
                            name=name or "zero_fraction")


def reduce_variance(input_tensor, axis=None, keepdims=False, name=None):
    """The variance over ``axis`` (all axes by default): ``mean((x - mean(x)) ** 2)``."""
    with get_default_graph().name_scope(name or "reduce_variance"):
        x = convert_to_tensor(input_tensor)
        mean = _ops.reduce_mean(x, axis=axis, keepdims=True)
        return _ops.reduce_mean(_ops.square(x - mean), axis=axis, keepdims=keepdims)


def reduce_std(input_tensor, axis=None, keepdims=False, name=None):
    """The standard deviation over ``axis``: ``sqrt(reduce_variance(x))``."""
    with get_default_graph().name_scope(name or "reduce_std"):
        return _ops.sqrt(reduce_variance(input_tensor, axis=axis, keepdims=keepdims))


def reduce_euclidean_norm(input_tensor, axis=None, keepdims=False, name=None):
    """``sqrt(sum(x ** 2))`` over ``axis``."""
    x = convert_to_tensor(input_tensor)
    return _ops.sqrt(_ops.reduce_sum(_ops.square(x), axis=axis, keepdims=keepdims),
                     name=name or "reduce_euclidean_norm")


def polyval(coeffs, x, name=None):
    """``coeffs[0] * x**(n-1) + ... + coeffs[n-1]`` by Horner's rule (``coeffs`` a list)."""
    if not isinstance(coeffs, (list, tuple)):
        raise ValueError(  # noqa: TRY004  (TF's class and message)
            f"Argument coeffs must be list type. Received type: {type(coeffs)}.")
    with get_default_graph().name_scope(name or "polyval"):
        x = convert_to_tensor(x)
        if not coeffs:
            return _ops.zeros_like(x)
        p = convert_to_tensor(coeffs[0], dtype=x.dtype)
        for c in coeffs[1:]:
            p = p * x + convert_to_tensor(c, dtype=x.dtype)
        return p


def cumulative_logsumexp(x, axis=0, exclusive=False, reverse=False, name=None):
    """``log(cumsum(exp(x)))`` along ``axis``, computed stably (the maximum taken out)."""
    with get_default_graph().name_scope(name or "cumulative_logsumexp"):
        x = convert_to_tensor(x)
        m = _ops.stop_gradient(_ops.reduce_max(x, axis=axis, keepdims=True))
        m = _ops.where(_ops.is_finite(m), m, _ops.zeros_like(m))
        s = _ops.cumsum(_ops.exp(x - m), axis=axis, exclusive=exclusive, reverse=reverse)
        return _ops.log(s) + m


def accumulate_n(inputs, shape=None, tensor_dtype=None, name=None):
    """The sum of the tensors of ``inputs`` (TF's ``tf.accumulate_n``: ``add_n``)."""
    return _ops.add_n(list(inputs), name=name)


def confusion_matrix(labels, predictions, num_classes=None, weights=None, dtype=_dt.int32,
                     name=None):
    """``m[i, j]`` = how many (or the summed ``weights`` of the) examples with label ``i``
    were predicted ``j``; ``num_classes`` defaults to one more than the largest label or
    prediction. Negative or too large values fail the step (TF's checks).

    >>> import tensorvm as tv
    >>> with tv.Session() as s:
    ...     s.run(tv.math.confusion_matrix([1, 2, 4], [2, 2, 4])).tolist()[1:3]
    [[0, 0, 1, 0, 0], [0, 0, 1, 0, 0]]
    """
    with get_default_graph().name_scope(name or "confusion_matrix"):
        labels = _ops.cast(convert_to_tensor(labels), _dt.int64)
        predictions = _ops.cast(convert_to_tensor(predictions), _dt.int64)
        checks = [_ops.assert_non_negative(labels, message="`labels` contains negative values"),
                  _ops.assert_non_negative(predictions,
                                           message="`predictions` contains negative values")]
        if num_classes is None:
            n = _ops.maximum(_ops.reduce_max(predictions), _ops.reduce_max(labels)) + 1
        else:
            n = _ops.cast(convert_to_tensor(num_classes), _dt.int64)
            checks += [_ops.assert_less(labels, n, message="`labels` out of bound"),
                       _ops.assert_less(predictions, n,
                                        message="`predictions` out of bound")]
        with get_default_graph().control_dependencies(checks):
            idx = _ops.stack([labels, predictions], 1)
        values = _ops.ones_like(predictions, dtype=dtype) if weights is None else \
            _ops.cast(convert_to_tensor(weights), dtype)
        return _ops.scatter_nd(idx, values, _ops.stack([n, n]))


def approx_max_k(operand, k, reduction_dimension=-1, recall_target=0.95,
                 reduction_input_size_override=-1, aggregate_to_topk=True, name=None):
    """``(values, indices)`` of the ``k`` largest entries along ``reduction_dimension``: TF's
    approximate top-k, computed exactly here (recall 1)."""
    return _approx_k(operand, k, reduction_dimension, name, largest=True)


def approx_min_k(operand, k, reduction_dimension=-1, recall_target=0.95,
                 reduction_input_size_override=-1, aggregate_to_topk=True, name=None):
    """``(values, indices)`` of the ``k`` smallest entries along ``reduction_dimension``
    (exact)."""
    return _approx_k(operand, k, reduction_dimension, name, largest=False)


def _approx_k(operand, k, dim, name, largest):
    x = convert_to_tensor(operand)
    rank = None if x._shape is None else len(x._shape)
    if rank is None:
        raise ValueError("approx_max_k/approx_min_k need an operand of known rank")
    dim = dim % rank
    perm = [i for i in range(rank) if i != dim] + [dim]
    inv = [perm.index(i) for i in range(rank)]
    xt = _ops.transpose(x, perm) if dim != rank - 1 else x
    values, indices = _nn.top_k(xt if largest else -xt, k=k, name=name)
    if not largest:
        values = -values
    if dim != rank - 1:
        values, indices = _ops.transpose(values, inv), _ops.transpose(indices, inv)
    return values, indices


__all__ = _SAME + _NN + [
    "divide_no_nan", "xlogy", "xdivy", "xlog1py", "multiply_no_nan", "reciprocal_no_nan",
    "zero_fraction", "reduce_variance", "reduce_std", "reduce_euclidean_norm", "polyval",
    "cumulative_logsumexp", "accumulate_n", "confusion_matrix", "approx_max_k", "approx_min_k"]
