"""Counts of a condition and their ratios: ``true_positives`` … ``false_negatives``,
``precision`` and ``recall``.
"""
from __future__ import annotations

from ..framework import dtypes as _dt
from .. import ops as O
from ..ops.state.variable_scope import variable_scope
from .metrics_common import _collected, _dims, _metric_variable, _prep, _t, _tf_shape

__all__ = ["true_positives", "false_positives", "true_negatives", "false_negatives", "precision",
           "recall"]


# ---- counts of a condition ----------------------------------------------------------------------

def _count_condition(values, weights, metrics_collections, updates_collections):
    count = _metric_variable([], _dt.float32, "count")
    values = O.cast(values, _dt.float32)
    if weights is not None:
        w = _t(weights, _dt.float32)
        dw, dv = _dims(w), _dims(values)
        if dw is not None and dv is not None and len(dw) not in (0, len(dv)):
            from ..framework.errors import InvalidArgumentError
            raise InvalidArgumentError(f"weights must have rank 0 or {len(dv)} (the rank of "
                                       f"the values), got shape {_tf_shape(dw)}")
        values = values * w
    update = count.assign_add(O.reduce_sum(values))
    return _collected((count.value(), update), metrics_collections, updates_collections)


def _as_bool(x):
    x = _t(x)
    return x if x.dtype == _dt.bool_ else O.cast(x, _dt.bool_)


def _condition_metric(default, cond):
    def metric(labels, predictions, weights=None, metrics_collections=None,
               updates_collections=None, name=None):
        with variable_scope(name, default_name=default):
            predictions, labels, weights = _prep(_as_bool(predictions), _as_bool(labels),
                                                 weights)
            return _count_condition(cond(labels, predictions), weights,
                                    metrics_collections, updates_collections)
    metric.__name__ = default
    metric.__doc__ = (f"The (weighted) number of {default.replace('_', ' ')}: labels and "
                      "predictions are cast to bool.")
    return metric


true_positives = _condition_metric("true_positives", lambda l, p: O.logical_and(l, p))
false_positives = _condition_metric(
    "false_positives", lambda l, p: O.logical_and(O.logical_not(l), p))
true_negatives = _condition_metric(
    "true_negatives", lambda l, p: O.logical_and(O.logical_not(l), O.logical_not(p)))
false_negatives = _condition_metric(
    "false_negatives", lambda l, p: O.logical_and(l, O.logical_not(p)))


def _ratio_metric(default, other_fn, doc):
    def metric(labels, predictions, weights=None, metrics_collections=None,
               updates_collections=None, name=None):
        with variable_scope(name, default_name=default):
            predictions, labels, weights = _prep(_as_bool(predictions), _as_bool(labels),
                                                 weights)
            tp, tp_up = true_positives(labels, predictions, weights)
            other, other_up = other_fn(labels, predictions, weights)

            def ratio(a, b, nm):
                s = a + b
                return O.where(O.greater(s, 0.0), a / O.where(O.greater(s, 0.0), s,
                                                              O.ones_like(s)),
                               O.zeros_like(s), name=nm)
            pair = ratio(tp, other, "value"), ratio(tp_up, other_up, "update_op")
        return _collected(pair, metrics_collections, updates_collections)
    metric.__name__, metric.__doc__ = default, doc
    return metric


precision = _ratio_metric("precision", false_positives,
                          "``tp / (tp + fp)`` over all batches (0 when nothing is predicted "
                          "positive); labels and predictions are cast to bool.")
recall = _ratio_metric("recall", false_negatives,
                       "``tp / (tp + fn)`` over all batches (0 when no label is positive); "
                       "labels and predictions are cast to bool.")
