"""Metrics at thresholds: the confusion counts at thresholds, precision and recall at
thresholds, ``auc`` (ROC and PR, trapezoidal or Riemann sums, TF's careful PR interpolation),
``sensitivity_at_specificity`` and ``specificity_at_sensitivity``.
"""
from __future__ import annotations

from ..framework import dtypes as _dt
from .. import ops as O
from ..framework.graph import control_dependencies
from ..framework.tensor_conversion import convert_to_tensor
from ..ops.state.variable_scope import variable_scope
from .metrics_counts import _as_bool
from .metrics_common import (_broadcast_weights, _collected, _div_no_nan, _log, _metric_variable,
                             _prep, _t)

__all__ = ["true_positives_at_thresholds", "false_positives_at_thresholds",
           "true_negatives_at_thresholds", "false_negatives_at_thresholds",
           "precision_at_thresholds", "recall_at_thresholds", "auc", "sensitivity_at_specificity",
           "specificity_at_sensitivity"]


# ---- confusion counts at thresholds ---------------------------------------------------------------

def _confusion_at_thresholds(labels, predictions, thresholds, weights=None, includes=None):
    """TF's ``_confusion_matrix_at_thresholds``: ``({key: variable}, {key: update})`` for
    ``key`` in tp/fn/tn/fp, one count per threshold; a prediction is positive when it is
    greater than the threshold. Predictions outside [0, 1] fail the step."""
    all_includes = ("tp", "fn", "tn", "fp")
    includes = all_includes if includes is None else includes
    for inc in includes:
        if inc not in all_includes:
            raise ValueError(f"Invalid key: {inc}")
    predictions = _t(predictions)
    msg = "predictions must be in [0, 1]"
    in_range = O.logical_and(O.reduce_all(O.greater_equal(predictions, _t(0.0, predictions.dtype))),
                             O.reduce_all(O.less_equal(predictions, _t(1.0, predictions.dtype))))
    with control_dependencies([O.Assert(in_range, [msg], name="assert_in_range")]):
        predictions, labels, weights = _prep(O.cast(predictions, _dt.float32) + 0.0,
                                             _as_bool(labels), weights)
    thresholds = [float(x) for x in thresholds]
    n = len(thresholds)
    pred_row = O.reshape(predictions, [1, -1])
    thresh = O.reshape(convert_to_tensor(thresholds, dtype=_dt.float32), [n, 1])
    pred_pos = O.greater(pred_row, thresh)                       # [n, N] by broadcasting
    label_pos = O.logical_and(O.reshape(labels, [1, -1]), O.ones_like(pred_pos))
    w = None
    if weights is not None:
        w = O.reshape(_broadcast_weights(weights, predictions), [1, -1])
    cells = {"tp": (label_pos, pred_pos), "fn": (label_pos, O.logical_not(pred_pos)),
             "tn": (O.logical_not(label_pos), O.logical_not(pred_pos)),
             "fp": (O.logical_not(label_pos), pred_pos)}
    names = {"tp": "true_positives", "fn": "false_negatives", "tn": "true_negatives",
             "fp": "false_positives"}
    values, updates = {}, {}
    for key in all_includes:
        if key not in includes:
            continue
        var = _metric_variable([n], _dt.float32, names[key])
        hit = O.cast(O.logical_and(*cells[key]), _dt.float32)
        if w is not None:
            hit = hit * w
        values[key] = var.value()
        updates[key] = var.assign_add(O.reduce_sum(hit, axis=1))
    return values, updates


def _at_thresholds_metric(key, default):
    def metric(labels, predictions, thresholds, weights=None, metrics_collections=None,
               updates_collections=None, name=None):
        with variable_scope(name, default_name=default):
            values, updates = _confusion_at_thresholds(labels, predictions, thresholds,
                                                       weights, includes=(key,))
        return _collected((values[key], updates[key]), metrics_collections,
                          updates_collections)
    metric.__name__ = f"{default}_at_thresholds"
    metric.__doc__ = (f"The (weighted) number of {default.replace('_', ' ')} at each of "
                      "``thresholds`` (a prediction in [0, 1] is positive when greater than "
                      "the threshold).")
    return metric


true_positives_at_thresholds = _at_thresholds_metric("tp", "true_positives")
false_positives_at_thresholds = _at_thresholds_metric("fp", "false_positives")
true_negatives_at_thresholds = _at_thresholds_metric("tn", "true_negatives")
false_negatives_at_thresholds = _at_thresholds_metric("fn", "false_negatives")


def precision_at_thresholds(labels, predictions, thresholds, weights=None,
                            metrics_collections=None, updates_collections=None, name=None):
    """``tp / (tp + fp + 1e-7)`` at each of ``thresholds``."""
    with variable_scope(name, default_name="precision_at_thresholds"):
        v, u = _confusion_at_thresholds(labels, predictions, thresholds, weights, ("tp", "fp"))
        pair = (O.identity(v["tp"] / (1e-7 + v["tp"] + v["fp"]), name="precision_value"),
                O.identity(u["tp"] / (1e-7 + u["tp"] + u["fp"]), name="precision_update_op"))
    return _collected(pair, metrics_collections, updates_collections)


def recall_at_thresholds(labels, predictions, thresholds, weights=None,
                         metrics_collections=None, updates_collections=None, name=None):
    """``tp / (tp + fn + 1e-7)`` at each of ``thresholds``."""
    with variable_scope(name, default_name="recall_at_thresholds"):
        v, u = _confusion_at_thresholds(labels, predictions, thresholds, weights, ("tp", "fn"))
        pair = (O.identity(v["tp"] / (1e-7 + v["tp"] + v["fn"]), name="recall_value"),
                O.identity(u["tp"] / (1e-7 + u["tp"] + u["fn"]), name="recall_update_op"))
    return _collected(pair, metrics_collections, updates_collections)


def _default_thresholds(num_thresholds, last=1.0 + 1e-7):
    inner = [(i + 1) * 1.0 / (num_thresholds - 1) for i in range(num_thresholds - 2)]
    return [0.0 - 1e-7] + inner + [last]


def _interpolate_pr_auc(tp, fp, fn, n):
    """TF's careful interpolation of the PR curve (Davis & Goadrich, 2006)."""
    dtp = tp[:n - 1] - tp[1:]
    p = tp + fp
    slope = _div_no_nan(dtp, O.maximum(p[:n - 1] - p[1:], 0.0))
    intercept = tp[1:] - slope * p[1:]
    both = O.logical_and(O.greater(p[:n - 1], 0.0), O.greater(p[1:], 0.0))
    ratio = O.where(both, _div_no_nan(p[:n - 1], O.maximum(p[1:], 0.0)), O.ones_like(p[1:]))
    return O.reduce_sum(_div_no_nan(slope * (dtp + intercept * O.log(ratio)),
                                    O.maximum(tp[1:] + fn[1:], 0.0)))


def _compute_auc(c, n, curve, summation_method, name):
    tp, fn, tn, fp = c["tp"], c["fn"], c["tn"], c["fp"]
    if curve == "PR" and summation_method == "careful_interpolation":
        return O.identity(_interpolate_pr_auc(tp, fp, fn, n), name=name)
    eps = 1.0e-6
    rec = (tp + eps) / (tp + fn + eps)
    if curve == "ROC":
        x, y = fp / (fp + tn + eps), rec
    else:
        x, y = rec, (tp + eps) / (tp + fp + eps)
    dx = x[:n - 1] - x[1:]
    if summation_method in ("trapezoidal", "careful_interpolation"):
        h = (y[:n - 1] + y[1:]) / 2.0
    elif summation_method == "minoring":
        h = O.minimum(y[:n - 1], y[1:])
    else:
        h = O.maximum(y[:n - 1], y[1:])
    return O.reduce_sum(dx * h, name=name)


def auc(labels, predictions, weights=None, num_thresholds=200, metrics_collections=None,
        updates_collections=None, curve="ROC", name=None, summation_method="trapezoidal",
        thresholds=None):
    """The area under the ROC (``curve="ROC"``) or precision-recall (``"PR"``) curve,
    from confusion counts at ``num_thresholds`` thresholds spread over [0, 1] (or the
    given ``thresholds`` plus -1e-7 and 1 + 1e-7). ``summation_method``: ``trapezoidal``,
    ``careful_interpolation`` (exact area under TF's linear interpolation of the PR curve),
    ``minoring`` or ``majoring``."""
    with variable_scope(name, default_name="auc"):
        if curve not in ("ROC", "PR"):
            raise ValueError(f"Curve must be either ROC or PR. Curve {curve} is unknown.")
        if summation_method not in ("trapezoidal", "careful_interpolation", "minoring",
                                    "majoring"):
            raise ValueError(f"Invalid summation_method: {summation_method} summation_method "
                             "should be 'trapezoidal', 'careful_interpolation', 'minoring', "
                             "or 'majoring'.")
        if curve == "PR" and summation_method == "trapezoidal":
            _log.warning("Trapezoidal rule is known to produce incorrect PR-AUCs; please "
                         "switch to \"careful_interpolation\" instead.")
        if thresholds is not None:
            ts = sorted(float(x) for x in thresholds)
            ts = [0.0 - 1e-7] + ts + [1.0 + 1e-7]
        else:
            if num_thresholds < 2:
                raise ValueError(f"num_thresholds must be at least 2, got {num_thresholds}")
            ts = _default_thresholds(num_thresholds)
        n = len(ts)
        values, updates = _confusion_at_thresholds(labels, predictions, ts, weights)
        pair = (_compute_auc(values, n, curve, summation_method, "value"),
                _compute_auc(updates, n, curve, summation_method, "update_op"))
    return _collected(pair, metrics_collections, updates_collections)


def _check_unit(value, what, verb):
    if value < 0 or value > 1:
        raise ValueError(f"`{what}` must be in the range [0, 1]. Currently, `{what}` "
                         f"{verb} {value}.")


def sensitivity_at_specificity(labels, predictions, specificity, weights=None,
                               num_thresholds=200, metrics_collections=None,
                               updates_collections=None, name=None):
    """The sensitivity (recall) at the threshold whose specificity is closest to
    ``specificity``."""
    _check_unit(specificity, "specificity", "got")
    with variable_scope(name, default_name="sensitivity_at_specificity"):
        v, u = _confusion_at_thresholds(labels, predictions,
                                        _default_thresholds(num_thresholds), weights)

        def compute(c, nm):
            spec = c["tn"] / (c["tn"] + c["fp"] + 1e-7)
            i = O.cast(O.argmin(O.abs(spec - specificity), 0), _dt.int32)
            tp, fn = O.gather(c["tp"], i), O.gather(c["fn"], i)
            return O.identity(tp / (tp + fn + 1e-7), name=nm)
        pair = compute(v, "value"), compute(u, "update_op")
    return _collected(pair, metrics_collections, updates_collections)


def specificity_at_sensitivity(labels, predictions, sensitivity, weights=None,
                               num_thresholds=200, metrics_collections=None,
                               updates_collections=None, name=None):
    """The specificity at the threshold whose sensitivity is closest to ``sensitivity``
    (the highest such threshold on a tie)."""
    _check_unit(sensitivity, "sensitivity", "is")
    with variable_scope(name, default_name="specificity_at_sensitivity"):
        v, u = _confusion_at_thresholds(labels, predictions,
                                        _default_thresholds(num_thresholds, 1.0 - 1e-7),
                                        weights)

        def compute(c, nm):
            dist = O.abs(c["tp"] / (c["tp"] + c["fn"] + 1e-7) - sensitivity)
            at_min = O.cast(O.equal(dist, O.reduce_min(dist)), _dt.int64)
            i = O.cast(O.argmax(O.cumsum(at_min), 0), _dt.int32)
            tn, fp = O.gather(c["tn"], i), O.gather(c["fp"], i)
            return O.identity(tn / (tn + fp + 1e-7), name=nm)
        pair = compute(v, "value"), compute(u, "update_op")
    return _collected(pair, metrics_collections, updates_collections)
