"""Normalisation for ``tv.nn``: local response normalisation (``lrn``), ``batch_normalization``
and ``fused_batch_norm``, plus small TF 1.x helpers (``top_k``, ``zero_fraction``,
``relu_layer``, ``weighted_cross_entropy_with_logits``).

``lrn`` is one op with a closed-form gradient op: with ``N = bias + alpha * sum_{|j-d|<=r}
x_j^2`` over the last (depth) dimension, ``y_d = x_d * N_d^-beta`` and
``dx_k = g_k N_k^-beta - 2 alpha beta x_k sum_{|d-k|<=r} g_d x_d N_d^(-beta-1)``.

>>> import numpy as np, tensorvm as tv
>>> x = tv.constant(np.ones((1, 1, 1, 3), np.float32))
>>> with tv.Session() as s: np.round(s.run(tv.nn.lrn(x, depth_radius=1, bias=1.0, alpha=1.0,
...                                                   beta=1.0)), 4)
array([[[[0.3333, 0.25  , 0.3333]]]], dtype=float32)
"""
from __future__ import annotations

import numpy as np

from ...framework.errors import InvalidArgumentError
from ...framework.op_def_library import apply_op
from ...framework.op_registry import register_op
from ...framework.tensor_conversion import convert_to_tensor
from .nn_softmax import _float_only

__all__: list[str] = []
NN_ALL = ["lrn", "local_response_normalization", "batch_normalization", "fused_batch_norm",
          "top_k", "zero_fraction", "relu_layer", "weighted_cross_entropy_with_logits"]


# ---- local response normalisation -------------------------------------------------------------
def _window_sum(v, r):
    """``sum_{|j-d|<=r} v_j`` along the last axis (zero outside)."""
    pad = [(0, 0)] * (v.ndim - 1) + [(r + 1, r)]
    cs = np.cumsum(np.pad(v, pad), axis=-1)
    c = v.shape[-1]
    return cs[..., 2 * r + 1:2 * r + 1 + c] - cs[..., :c]


def _lrn_norm(x, depth_radius, bias, alpha):
    return bias + alpha * _window_sum(x * x, depth_radius)


def _lrn_kernel(x, depth_radius, bias, alpha, beta):
    n = _lrn_norm(x.astype(np.float64), depth_radius, bias, alpha)
    return (x * n ** -beta).astype(x.dtype, copy=False)


def _lrn_grad_kernel(g, x, depth_radius, bias, alpha, beta):
    xd, gd = x.astype(np.float64), g.astype(np.float64)
    n = _lrn_norm(xd, depth_radius, bias, alpha)
    inner = _window_sum(gd * xd * n ** (-beta - 1), depth_radius)
    return (gd * n ** -beta - 2.0 * alpha * beta * xd * inner).astype(x.dtype, copy=False)


def _lrn_shape(inputs, attrs):
    x = inputs[0]
    _float_only("LRN")(x.dtype)
    if x._shape is not None and len(x._shape) != 4:
        raise InvalidArgumentError(f"LRN: input must be 4-dimensional, got shape "
                                   f"{list(x._shape)}")
    return [(x.dtype, x._shape)]


def _lrn_attrs(op):
    return {k: op.attrs[k] for k in ("depth_radius", "bias", "alpha", "beta")}


register_op("LRNGrad", lambda inputs, attrs: [(inputs[1].dtype, inputs[1]._shape)],
            _lrn_grad_kernel)
register_op("LRN", _lrn_shape, _lrn_kernel,
            grad=lambda op, g: [apply_op("LRNGrad", [g, op.inputs[0]],
                                         _lrn_attrs(op)).outputs[0]])


def local_response_normalization(input, depth_radius=5, bias=1.0, alpha=1.0, beta=0.5,
                                 name=None):
    """``input / (bias + alpha * sqr_sum) ** beta`` with ``sqr_sum`` the sum of squares over
    ``depth_radius`` neighbours on each side in the last dimension (4-D input, NHWC)."""
    if int(depth_radius) < 0:
        raise InvalidArgumentError(f"LRN: depth_radius must be >= 0, got {depth_radius}")
    attrs = {"depth_radius": int(depth_radius), "bias": float(bias), "alpha": float(alpha),
             "beta": float(beta)}
    return apply_op("LRN", [input], attrs, name=name).outputs[0]


lrn = local_response_normalization


# ---- batch normalisation --------------------------------------------------------------------
def batch_normalization(x, mean, variance, offset, scale, variance_epsilon, name=None):
    """``(x - mean) * scale / sqrt(variance + variance_epsilon) + offset`` (``offset`` and
    ``scale`` may be None)."""
    from ..math.math_ext import rsqrt
    x = convert_to_tensor(x)
    mean, variance = (convert_to_tensor(t, dtype=x.dtype) for t in (mean, variance))
    inv = rsqrt(variance + convert_to_tensor(variance_epsilon, dtype=x.dtype))
    if scale is not None:
        inv = inv * convert_to_tensor(scale, dtype=x.dtype)
    shift = -mean * inv
    if offset is not None:
        shift = shift + convert_to_tensor(offset, dtype=x.dtype)
    return x * inv + shift


def fused_batch_norm(x, scale, offset, mean=None, variance=None, epsilon=0.001,
                     data_format="NHWC", is_training=True, name=None):
    """``(y, batch_mean, batch_variance)`` of a 4-D ``x``: in training, normalised by the
    batch's moments over N, H, W (the variance returned is the unbiased one, as TF's); else
    by the given ``mean`` and ``variance``."""
    from ..array.fill_ops import size
    from ..math.math_ext import maximum
    from ..math.math_ops import cast
    from .nn_ops import moments
    if data_format not in ("NHWC", "NCHW"):
        raise InvalidArgumentError(f"fused_batch_norm: unknown data_format {data_format!r}")
    x = convert_to_tensor(x)
    axes = [0, 1, 2] if data_format == "NHWC" else [0, 2, 3]
    if is_training:
        m, v = moments(x, axes)
        n = cast(size(x), x.dtype) / cast(size(m), x.dtype)
        unbiased = v * n / maximum(n - 1.0, 1.0)
    else:
        if mean is None or variance is None:
            raise InvalidArgumentError("fused_batch_norm: mean and variance are required when "
                                       "is_training=False")
        m, v = convert_to_tensor(mean), convert_to_tensor(variance)
        unbiased = v
    shape = [1, -1, 1, 1] if data_format == "NCHW" else [-1]
    from ..array.array_ops import reshape
    y = batch_normalization(x, reshape(m, shape), reshape(v, shape), reshape(offset, shape),
                            reshape(scale, shape), epsilon)
    return y, m, unbiased


# ---- small helpers --------------------------------------------------------------------------
def top_k(input, k=1, sorted=True, name=None):
    """``tv.nn.top_k`` (the same op as ``tv.math.top_k``)."""
    from ..array.sort_ops import top_k as _top_k
    return _top_k(input, k=k, sorted=sorted, name=name)


def zero_fraction(value, name=None):
    """The fraction of zeros in ``value`` (float32)."""
    from ...framework import dtypes as _dt
    from ..math.math_ext import equal
    from ..math.math_ops import cast, reduce_mean
    value = convert_to_tensor(value)
    return reduce_mean(cast(equal(value, convert_to_tensor(0, dtype=value.dtype)), _dt.float32),
                       name=name)


def relu_layer(x, weights, biases, name=None):
    """``relu(matmul(x, weights) + biases)``."""
    from .nn_ops import relu, xw_plus_b
    return relu(xw_plus_b(x, weights, biases), name=name)


def weighted_cross_entropy_with_logits(targets=None, logits=None, pos_weight=None, name=None,
                                       labels=None):
    """``sigmoid_cross_entropy_with_logits`` with the positive term weighted by
    ``pos_weight``: ``(1 - z) * x + (1 + (q - 1) * z) * log(1 + exp(-x))`` (stable form)."""
    from ..math.math_ext import abs as abs_
    from ..math.math_ext import log1p, maximum
    from ..math.math_ops import exp
    z = labels if labels is not None else targets
    if z is None or logits is None or pos_weight is None:
        raise InvalidArgumentError("weighted_cross_entropy_with_logits: labels (targets), logits "
                                   "and pos_weight are required")
    x = convert_to_tensor(logits)
    z = convert_to_tensor(z, dtype=x.dtype)
    q = convert_to_tensor(pos_weight, dtype=x.dtype)
    lw = 1.0 + (q - 1.0) * z
    return (1.0 - z) * x + lw * (log1p(exp(-abs_(x))) + maximum(-x, 0.0))
