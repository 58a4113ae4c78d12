"""Streaming means: ``mean``, ``mean_tensor``, ``accuracy``, the mean errors (absolute, squared,
root-mean-squared, relative, cosine distance) and ``percentage_below``.
"""
from __future__ import annotations

from ..framework import dtypes as _dt
from .. import ops as O
from ..framework.graph import control_dependencies
from ..ops.state.variable_scope import variable_scope
from .metrics_common import (_broadcast_weights, _check_compatible, _collected, _dims, _div_no_nan,
                             _metric_variable, _prep, _squeeze_pair, _t, _tf_shape)

__all__ = ["mean", "mean_tensor", "accuracy", "mean_absolute_error", "mean_squared_error",
           "root_mean_squared_error", "mean_relative_error", "mean_cosine_distance",
           "percentage_below"]


# ---- means --------------------------------------------------------------------------------------

def _streaming_mean(values, weights, elementwise=False):
    v = _t(values, _dt.float32)
    shape = _dims(v) if elementwise else []
    if elementwise and (shape is None or None in shape):
        from ..framework.errors import InvalidArgumentError
        raise InvalidArgumentError(f"mean_tensor: values need a fully defined shape, got "
                                   f"{_tf_shape(shape)}")
    suffix = "_tensor" if elementwise else ""
    total = _metric_variable(shape, _dt.float32, "total" + suffix)
    count = _metric_variable(shape, _dt.float32, "count" + suffix)
    if weights is None:
        batch_n = O.ones_like(v) if elementwise else O.cast(O.size(v), _dt.float32)
    else:
        v, _, w = _prep(v, None, weights)
        w = _broadcast_weights(w, v)
        v = v * w
        batch_n = w if elementwise else O.reduce_sum(w)
    update_total = total.assign_add(v if elementwise else O.reduce_sum(v))
    with control_dependencies([v]):
        update_count = count.assign_add(batch_n)
    return (_div_no_nan(total.value(), count.value(), "value"),
            _div_no_nan(update_total, update_count, "update_op"))


def mean(values, weights=None, metrics_collections=None, updates_collections=None,
         name=None):
    """The (weighted) mean of ``values`` over every batch the update op has seen (0 before
    any data)."""
    with variable_scope(name, default_name="mean"):
        pair = _streaming_mean(values, weights)
    return _collected(pair, metrics_collections, updates_collections)


def mean_tensor(values, weights=None, metrics_collections=None, updates_collections=None,
                name=None):
    """The element-wise (weighted) mean of ``values`` (a fully defined shape) over batches."""
    with variable_scope(name, default_name="mean"):
        pair = _streaming_mean(values, weights, elementwise=True)
    return _collected(pair, metrics_collections, updates_collections)


def accuracy(labels, predictions, weights=None, metrics_collections=None,
             updates_collections=None, name=None):
    """How often ``predictions`` equals ``labels`` (cast to the labels' dtype)."""
    predictions, labels, weights = _prep(
        predictions, labels, weights,
        " (accuracy: labels and predictions must have the same shape)")
    if predictions.dtype != labels.dtype:
        predictions = O.cast(predictions, labels.dtype)
    is_correct = O.cast(O.equal(predictions, labels), _dt.float32)
    return mean(is_correct, weights, metrics_collections, updates_collections,
                name or "accuracy")


def _error_mean(fn, default, labels, predictions, weights, mc, uc, name):
    predictions, labels, weights = _prep(predictions, labels, weights)
    labels = _t(labels, predictions.dtype)
    return mean(fn(labels, predictions), weights, mc, uc, name or default)


def mean_absolute_error(labels, predictions, weights=None, metrics_collections=None,
                        updates_collections=None, name=None):
    """The mean of ``|predictions - labels|``."""
    return _error_mean(lambda l, p: O.abs(p - l), "mean_absolute_error", labels, predictions,
                       weights, metrics_collections, updates_collections, name)


def mean_squared_error(labels, predictions, weights=None, metrics_collections=None,
                       updates_collections=None, name=None):
    """The mean of ``(labels - predictions) ** 2``."""
    return _error_mean(O.squared_difference, "mean_squared_error", labels, predictions,
                       weights, metrics_collections, updates_collections, name)


def root_mean_squared_error(labels, predictions, weights=None, metrics_collections=None,
                            updates_collections=None, name=None):
    """The square root of :func:`mean_squared_error` over all batches."""
    mse, update = mean_squared_error(labels, predictions, weights, None, None,
                                     name or "root_mean_squared_error")
    return _collected((O.sqrt(mse), O.sqrt(update)), metrics_collections,
                      updates_collections)


def mean_relative_error(labels, predictions, normalizer, weights=None,
                        metrics_collections=None, updates_collections=None, name=None):
    """The mean of ``|labels - predictions| / normalizer`` (0 where ``normalizer`` is 0)."""
    predictions, labels, weights = _prep(predictions, labels, weights)
    labels = _t(labels, predictions.dtype)
    normalizer, predictions = _squeeze_pair(_t(normalizer, predictions.dtype), predictions)
    _check_compatible(predictions, normalizer)
    zero = O.equal(normalizer, O.zeros_like(normalizer))
    relative = O.where(zero, O.zeros_like(labels), O.abs(labels - predictions) / O.where(
        zero, O.ones_like(normalizer), normalizer))
    return mean(relative, weights, metrics_collections, updates_collections,
                name or "mean_relative_error")


def mean_cosine_distance(labels, predictions, dim, weights=None, metrics_collections=None,
                         updates_collections=None, name=None):
    """``1 - mean(sum(labels * predictions, axis=dim))`` (the inputs are unit vectors)."""
    predictions, labels, weights = _prep(predictions, labels, weights)
    labels = _t(labels, predictions.dtype)
    radial = O.reduce_sum(predictions * labels, axis=[dim], keepdims=True)
    value, update = mean(radial, weights, None, None, name or "mean_cosine_distance")
    return _collected((1.0 - value, 1.0 - update), metrics_collections, updates_collections)


def percentage_below(values, threshold, weights=None, metrics_collections=None,
                     updates_collections=None, name=None):
    """The fraction of ``values`` below ``threshold``."""
    values = _t(values)
    below = O.cast(O.less(values, _t(threshold, values.dtype)), _dt.float32)
    return mean(below, weights, metrics_collections, updates_collections,
                name or "percentage_below_threshold")
