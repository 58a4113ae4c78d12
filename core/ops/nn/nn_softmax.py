"""Softmax, log_softmax and the cross-entropies with logits for ``tv.nn`` (re-exported by
:mod:`tensorvm.ops.nn.nn_ops`).

Every kernel is numerically stable: softmax and the cross-entropies go through a log-sum-exp
with the row maximum subtracted, and the sigmoid cross-entropy uses
``max(x, 0) - x * z + log(1 + exp(-|x|))``. Each cross-entropy op also outputs its gradient
wrt the logits (TF's ``backprop`` output), which the gradient function reuses.

>>> import numpy as np, tensorvm as tv
>>> loss = tv.nn.sparse_softmax_cross_entropy_with_logits(labels=[0], logits=[[2.0, 2.0]])
>>> with tv.Session() as s: np.round(s.run(loss), 4)
array([0.6931], dtype=float32)
"""
from __future__ import annotations

import numpy as np

from ...framework.errors import InvalidArgumentError
from ...framework.graph import Tensor
from ...vm.kernels.array_api import array_namespace
from ...framework.op_def_library import apply_op
from ...framework.op_registry import register_op
from ...framework.tensor_conversion import convert_to_tensor
from ..array.array_ops import stop_gradient
from ..math.math_ext import sigmoid
from ..math.math_ops import cast, norm_axes, reduce_sum

__all__: list[str] = []


def _float_only(op_type):
    def check(dt):
        if not dt.is_floating:
            raise InvalidArgumentError(
                f"{op_type} expects a floating-point tensor (float16/32/64), got {dt.name}")
    return check


def _same_shape(a, b, what: str, op_type: str):
    """Static shapes must agree where both are known; returns the more specific one."""
    if a is None:
        return b
    if b is None:
        return a
    if len(a) != len(b) or any(x is not None and y is not None and x != y
                               for x, y in zip(a, b)):
        raise InvalidArgumentError(
            f"{op_type}: {what} must have the same shape, got {list(a)} and {list(b)}")
    return tuple(x if x is not None else y for x, y in zip(a, b))


def _is_graph_value(x) -> bool:
    """A tensor or something that reads as one (a Variable): its dtype is its own."""
    return isinstance(x, Tensor) or hasattr(x, "_as_graph_element")


def _zero(x):
    """0 of ``x``'s dtype, a NumPy scalar: it mixes with host and device arrays alike."""
    return x.dtype.type(0)


# ---- softmax / log_softmax --------------------------------------------------------------------
def _axis_shape(op_type):
    def shape_fn(inputs, attrs):
        x = inputs[0]
        _float_only(op_type)(x.dtype)
        if x._shape is not None:
            if not x._shape:
                raise InvalidArgumentError(f"{op_type}: logits must have rank >= 1, got a scalar")
            norm_axes(attrs["axis"], len(x._shape))
        return [(x.dtype, x._shape)]
    return shape_fn


def _empty_max(x, axis):
    """The keepdims max along ``x``'s empty ``axis``: -inf (NumPy's ``max(initial=-inf)``,
    which CuPy's ``max`` does not take, so the empty case is made apart)."""
    shape = list(x.shape)
    shape[axis] = 1
    return array_namespace(x).full(shape, -np.inf, x.dtype)


def _lse_parts(x, axis):
    """``(x - max, log(sum(exp(x - max))))`` along ``axis`` (keepdims)."""
    m = np.max(x, axis=axis, keepdims=True) if x.shape[axis] else _empty_max(x, axis)
    m = np.where(np.isfinite(m), m, _zero(x)).astype(x.dtype, copy=False)
    shifted = x - m
    return shifted, np.log(np.sum(np.exp(shifted), axis=axis, keepdims=True))


def _softmax_kernel(x, axis):
    m = np.max(x, axis=axis, keepdims=True) if x.shape[axis] else _empty_max(x, axis)
    e = np.exp(x - m)
    return e / np.sum(e, axis=axis, keepdims=True)


def _log_softmax_kernel(x, axis):
    shifted, lse = _lse_parts(x, axis)
    return shifted - lse


def _softmax_grad(op, g):
    y, axis = op.outputs[0], op.attrs["axis"]
    return [y * (g - reduce_sum(g * y, axis=axis, keepdims=True))]


def _log_softmax_grad(op, g):
    from ..math.math_ops import exp
    y, axis = op.outputs[0], op.attrs["axis"]
    return [g - exp(y) * reduce_sum(g, axis=axis, keepdims=True)]


register_op("Softmax", _axis_shape("Softmax"), _softmax_kernel, grad=_softmax_grad)
register_op("LogSoftmax", _axis_shape("LogSoftmax"), _log_softmax_kernel,
            grad=_log_softmax_grad)


def _axis_arg(axis, dim):
    if dim is not None:
        if axis is not None:
            raise InvalidArgumentError("give only one of axis and dim (its deprecated name)")
        axis = dim
    return -1 if axis is None else int(axis)


def softmax(logits, axis=None, name=None, dim=None):
    """``exp(logits) / reduce_sum(exp(logits), axis)``, stable; ``axis`` defaults to -1."""
    return apply_op("Softmax", [logits], {"axis": _axis_arg(axis, dim)}, name=name).outputs[0]


def log_softmax(logits, axis=None, name=None, dim=None):
    """``logits - log(reduce_sum(exp(logits), axis))``, stable; ``axis`` defaults to -1."""
    return apply_op("LogSoftmax", [logits], {"axis": _axis_arg(axis, dim)},
                    name=name).outputs[0]


# ---- cross-entropies ------------------------------------------------------------------------
def _expand_like(g, like, axis):
    """``g`` (``like`` reduced over ``axis``) reshaped to broadcast against ``like``."""
    return apply_op("ExpandReduced", [g, like], {"axis": (axis,)}).outputs[0]


def _same_dtype(op: str, labels, logits) -> None:
    if labels.dtype != logits.dtype:
        raise InvalidArgumentError(f"{op}: labels ({labels.dtype.name}) and logits "
                                   f"({logits.dtype.name}) must have the same dtype")


def _xent_shape(inputs, attrs):
    labels, logits = inputs
    op = "SoftmaxCrossEntropyWithLogits"
    _float_only(op)(logits.dtype)
    _same_dtype(op, labels, logits)
    shp = _same_shape(labels._shape, logits._shape, "labels and logits", op)
    if shp is None:
        return [(logits.dtype, None), (logits.dtype, None)]
    if not shp:
        raise InvalidArgumentError(f"{op}: logits and labels must have rank >= 1")
    (axis,) = norm_axes(attrs["axis"], len(shp))
    return [(logits.dtype, shp[:axis] + shp[axis + 1:]), (logits.dtype, shp)]


def _xent_kernel(labels, logits, axis):
    shifted, lse = _lse_parts(logits, axis)
    log_p = shifted - lse
    loss = -np.sum(labels * log_p, axis=axis)
    # The exact gradient wrt logits, also for labels that do not sum to 1 (TF's kernel
    # assumes they do and returns softmax - labels).
    backprop = np.exp(log_p) * np.sum(labels, axis=axis, keepdims=True) - labels
    return loss.astype(logits.dtype, copy=False), backprop


def _softmax_jvp_t(s, v, axis):
    """``J_softmax^T v`` for ``s = softmax(x)``: ``s * (v - sum(v * s))``."""
    return s * (v - reduce_sum(v * s, axis=axis, keepdims=True))


def _xent_grad(op, g_loss, g_backprop=None):
    labels, logits = op.inputs
    axis = op.attrs["axis"]
    d_labels = d_logits = None
    if g_loss is not None:
        ge = _expand_like(g_loss, logits, axis)
        d_labels, d_logits = -ge * log_softmax(logits, axis=axis), ge * op.outputs[1]
    if g_backprop is not None:  # second order: backprop = softmax(x) * sum(labels) - labels
        s = softmax(logits, axis=axis)
        total = reduce_sum(labels, axis=axis, keepdims=True)
        d2_logits = _softmax_jvp_t(s, g_backprop * total, axis)
        d2_labels = reduce_sum(g_backprop * s, axis=axis, keepdims=True) - g_backprop
        d_logits = d2_logits if d_logits is None else d_logits + d2_logits
        d_labels = d2_labels if d_labels is None else d_labels + d2_labels
    return [d_labels, d_logits]


register_op("SoftmaxCrossEntropyWithLogits", _xent_shape, _xent_kernel, grad=_xent_grad)


def softmax_cross_entropy_with_logits_v2(_sentinel=None, labels=None, logits=None, axis=-1,
                                         name=None, dim=None):
    """Per-example ``-sum(labels * log_softmax(logits), axis)``; gradients flow into both
    ``logits`` and ``labels`` (TF's ``_v2``)."""
    if _sentinel is not None or labels is None or logits is None:
        raise InvalidArgumentError(
            "softmax_cross_entropy_with_logits: call it with named arguments "
            "(labels=..., logits=...)")
    logits = convert_to_tensor(logits)
    labels = convert_to_tensor(labels, dtype=logits.dtype if not _is_graph_value(labels)
                               else None)
    if labels.dtype != logits.dtype:  # TF casts the labels to the logits' dtype
        labels = cast(labels, logits.dtype)
    axis = _axis_arg(None if dim is not None and axis == -1 else axis, dim)
    return apply_op("SoftmaxCrossEntropyWithLogits", [labels, logits], {"axis": axis},
                    name=name or "softmax_cross_entropy_with_logits").outputs[0]


def softmax_cross_entropy_with_logits(_sentinel=None, labels=None, logits=None, dim=-1,
                                      name=None, axis=None):
    """TF 1.x's (deprecated) version: like ``_v2`` but backpropagates into ``logits`` only
    (``labels`` pass through ``stop_gradient``)."""
    if _sentinel is not None or labels is None or logits is None:
        raise InvalidArgumentError(
            "softmax_cross_entropy_with_logits: call it with named arguments "
            "(labels=..., logits=...)")
    logits = convert_to_tensor(logits)
    if _is_graph_value(labels):
        labels = stop_gradient(labels)
    return softmax_cross_entropy_with_logits_v2(
        labels=labels, logits=logits, axis=dim if axis is None else axis, name=name)


def _sparse_xent_shape(inputs, attrs):
    labels, logits = inputs
    op = "SparseSoftmaxCrossEntropyWithLogits"
    _float_only(op)(logits.dtype)
    if not labels.dtype.is_integer:
        raise InvalidArgumentError(f"{op}: labels must be int32 or int64, got "
                                   f"{labels.dtype.name}")
    lg = logits._shape
    if lg is not None and not lg:
        raise InvalidArgumentError(f"{op}: logits must have rank >= 1, got a scalar")
    if lg is not None and labels._shape is not None:
        _same_shape(labels._shape, lg[:-1], "labels and logits[:-1] (all but the class dim)",
                    op)
    return [(logits.dtype, None if lg is None else lg[:-1]), (logits.dtype, lg)]


def _sparse_xent_kernel(labels, logits):
    n = logits.shape[-1]
    xp = array_namespace(logits)
    # On a GPU the labels are read in host memory (kernels_gpu.HOST_MEMORY_INPUTS): checked
    # there without waiting for the device, then uploaded for the indexing below.
    if array_namespace(labels) is np:
        labels = np.asarray(labels)  # (a 0-d one for a NumPy scalar)
        out_of_range = labels.size and (labels.min() < 0 or labels.max() >= n)
    else:  # labels a GPU op made: one flag to the host
        out_of_range = bool(((labels < 0) | (labels >= n)).any())
    labels = xp.asarray(labels)
    if out_of_range:
        bad = int(labels[(labels < 0) | (labels >= n)].ravel()[0])  # to the host: error only
        raise InvalidArgumentError(
            f"Received a label value of {bad} which is outside the valid range of [0, {n})")
    # TF's kernel: shifted = logits - max, e = exp(shifted), s = sum(e);
    # loss = log(s) - shifted[label], backprop = e / s - one_hot(label)
    m = np.max(logits, axis=-1, keepdims=True) if n else _empty_max(logits, -1)
    m = np.where(np.isfinite(m), m, _zero(logits)).astype(logits.dtype, copy=False)
    shifted = logits - m
    e = np.exp(shifted)
    s = np.sum(e, axis=-1, keepdims=True)
    # each row's label column, by flat (row, label) indexing: 4x faster than
    # take_along_axis/put_along_axis on a [128, 10] batch, the same values
    rows = xp.arange(labels.size)
    lab = labels.reshape(-1)
    with np.errstate(divide="ignore"):
        loss = (np.log(s).reshape(-1) - shifted.reshape(-1, n)[rows, lab]).reshape(labels.shape)
    e /= s  # e is a fresh contiguous array: the backprop, in place
    b2 = e.reshape(-1, n)  # a view
    b2[rows, lab] -= 1
    return loss.astype(logits.dtype, copy=False), e


def _sparse_xent_grad(op, g_loss, g_backprop=None):
    logits = op.inputs[1]
    d_logits = None
    if g_loss is not None:
        d_logits = _expand_like(g_loss, logits, -1) * op.outputs[1]
    if g_backprop is not None:  # second order: backprop = softmax(x) - one_hot(labels)
        d2 = _softmax_jvp_t(softmax(logits), g_backprop, -1)
        d_logits = d2 if d_logits is None else d_logits + d2
    return [None, d_logits]


register_op("SparseSoftmaxCrossEntropyWithLogits", _sparse_xent_shape, _sparse_xent_kernel,
            grad=_sparse_xent_grad)


def sparse_softmax_cross_entropy_with_logits(_sentinel=None, labels=None, logits=None,
                                             name=None):
    """Per-example ``-log_softmax(logits)[label]``; ``labels`` are class indices (int32/64) of
    shape ``logits.shape[:-1]``. A label outside ``[0, num_classes)`` fails at run time."""
    if _sentinel is not None or labels is None or logits is None:
        raise InvalidArgumentError(
            "sparse_softmax_cross_entropy_with_logits: call it with named arguments "
            "(labels=..., logits=...)")
    return apply_op("SparseSoftmaxCrossEntropyWithLogits", [labels, logits],
                    name=name or "SparseSoftmaxCrossEntropyWithLogits").outputs[0]


def _sigmoid_xent_shape(inputs, attrs):
    labels, logits = inputs
    op = "SigmoidCrossEntropyWithLogits"
    _float_only(op)(logits.dtype)
    _same_dtype(op, labels, logits)
    return [(logits.dtype, _same_shape(labels._shape, logits._shape, "logits and labels", op))]


def _sigmoid_xent_kernel(z, x):
    return np.maximum(x, _zero(x)) - x * z + np.log1p(np.exp(-np.abs(x)))


def _sigmoid_xent_grad(op, g):
    z, x = op.inputs
    return [-g * x, g * (sigmoid(x) - z)]


register_op("SigmoidCrossEntropyWithLogits", _sigmoid_xent_shape, _sigmoid_xent_kernel,
            grad=_sigmoid_xent_grad)


def sigmoid_cross_entropy_with_logits(_sentinel=None, labels=None, logits=None, name=None):
    """Element-wise ``max(x, 0) - x * z + log(1 + exp(-|x|))`` for logits ``x``, labels ``z``."""
    if _sentinel is not None or labels is None or logits is None:
        raise InvalidArgumentError(
            "sigmoid_cross_entropy_with_logits: call it with named arguments "
            "(labels=..., logits=...)")
    logits = convert_to_tensor(logits)
    labels = convert_to_tensor(labels, dtype=logits.dtype if not _is_graph_value(labels)
                               else None)
    return apply_op("SigmoidCrossEntropyWithLogits", [labels, logits],
                    name=name or "logistic_loss").outputs[0]
