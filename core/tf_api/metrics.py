"""``tv.metrics``: TF 1.x's streaming metrics. Each returns ``(value, update_op)``: the
update op adds a batch to local variables (``<name>/total``, ``<name>/count``,
``<name>/true_positives`` …, in ``LOCAL_VARIABLES`` and ``metric_variables``) and returns the
running value; ``value`` reads it without changing it. ``tv.local_variables_initializer()``
resets them. So running the update op over several batches and then reading ``value`` gives
the metric over all the data seen.

Formulas, names, edge values (0 or NaN with no data) and errors follow TF 1.x's
``metrics_impl.py``: ``weights`` broadcast to the values (a rank lower by one is expanded, a
trailing dimension of 1 squeezed), ``metrics_collections`` receive the value and
``updates_collections`` the update op. Counts are float32 (float64 for ``precision_at_k``
and ``recall_at_k``, as TF).

>>> import tensorvm as tv
>>> acc, acc_op = tv.metrics.accuracy(labels=[1, 2, 3, 4], predictions=[1, 2, 0, 4])
>>> with tv.Session() as s:
...     _ = s.run(tv.local_variables_initializer()); float(s.run(acc_op))
0.75
"""
from __future__ import annotations

import logging

from ..framework import dtypes as _dt
from .. import ops as O
from ..framework.graph import Tensor, control_dependencies
from ..framework.graph_keys import GraphKeys, add_to_collections
from ..framework.tensor_conversion import convert_to_tensor
from ..ops.state.variable_scope import variable_scope
from ..ops.state.variables import Variable

__all__ = [
    "accuracy",
    "auc",
    "average_precision_at_k",
    "false_negatives",
    "false_negatives_at_thresholds",
    "false_positives",
    "false_positives_at_thresholds",
    "mean",
    "mean_absolute_error",
    "mean_cosine_distance",
    "mean_iou",
    "mean_per_class_accuracy",
    "mean_relative_error",
    "mean_squared_error",
    "mean_tensor",
    "percentage_below",
    "precision",
    "precision_at_k",
    "precision_at_thresholds",
    "precision_at_top_k",
    "recall",
    "recall_at_k",
    "recall_at_thresholds",
    "recall_at_top_k",
    "root_mean_squared_error",
    "sensitivity_at_specificity",
    "sparse_average_precision_at_k",
    "sparse_precision_at_k",
    "specificity_at_sensitivity",
    "true_negatives",
    "true_negatives_at_thresholds",
    "true_positives",
    "true_positives_at_thresholds",
]
METRIC_VARIABLES = GraphKeys.METRIC_VARIABLES  # "metric_variables", as TF 1.x
_log = logging.getLogger("tensorvm")


# ---- helpers ----------------------------------------------------------------------------------

def _metric_variable(shape, dtype, name):
    """A zero-initialised local variable in ``LOCAL_VARIABLES`` and ``metric_variables``."""
    with control_dependencies(None):
        return Variable(O.zeros(list(shape), dtype), trainable=False, name=name,
                        collections=[GraphKeys.LOCAL_VARIABLES, METRIC_VARIABLES])


def _t(x, dtype=None) -> Tensor:
    if isinstance(x, Variable):
        x = x.value()
    t = convert_to_tensor(x)
    return t if dtype is None or t.dtype == dtype else O.cast(t, dtype)


def _dims(t):
    return None if t._shape is None else list(t._shape)


def _tf_shape(dims) -> str:
    """A static shape as TF prints a TensorShape: ``(4, None)``, ``<unknown>``."""
    if dims is None:
        return "<unknown>"
    return "(" + ", ".join("None" if d is None else str(d) for d in dims) + \
        ("," if len(dims) == 1 else "") + ")"


def _np_shape(dims) -> str:
    """A shape as TF's broadcast check prints it: ``[4 3]``."""
    return "[" + " ".join("None" if d is None else str(d) for d in dims) + "]"


def _check_compatible(a, b, what=""):
    da, db = _dims(a), _dims(b)
    if da is not None and db is not None and (len(da) != len(db) or any(
            x is not None and y is not None and x != y for x, y in zip(da, db))):
        from ..framework.errors import InvalidArgumentError
        raise InvalidArgumentError(f"Shapes {_tf_shape(da)} and {_tf_shape(db)} are "
                                   f"incompatible{what}")


def _squeeze_pair(labels, predictions):
    """TF's ``remove_squeezable_dimensions``: drop a trailing 1 of the one whose rank is
    higher by one."""
    dl, dp = _dims(labels), _dims(predictions)
    if dl is not None and dp is not None:
        if len(dp) == len(dl) + 1 and dp[-1] == 1:
            predictions = O.squeeze(predictions, [-1])
        elif len(dl) == len(dp) + 1 and dl[-1] == 1:
            labels = O.squeeze(labels, [-1])
    return labels, predictions


def _prep(predictions, labels=None, weights=None, what=""):
    """TF's ``_remove_squeezable_dimensions``: ``(predictions, labels, weights)`` with
    squeezable dimensions removed, labels checked against predictions, weights of rank one
    lower expanded and of rank one higher squeezed."""
    predictions = _t(predictions)
    if labels is not None:
        labels, predictions = _squeeze_pair(_t(labels), predictions)
        _check_compatible(predictions, labels, what)
    if weights is None:
        return predictions, labels, None
    weights = _t(weights)
    dw, dp = _dims(weights), _dims(predictions)
    if dw is not None and dp is not None and dw:
        if len(dw) == len(dp) + 1:
            weights = O.squeeze(weights, [-1])
        elif len(dp) == len(dw) + 1:
            weights = O.expand_dims(weights, -1)
    return predictions, labels, weights


def _broadcast_weights(weights, values):
    """``weights`` (float32) broadcast to ``values``' shape, with TF's static checks."""
    from ..framework.errors import InvalidArgumentError
    weights = _t(weights, _dt.float32)
    dw, dv = _dims(weights), _dims(values)
    if dw is not None and dv is not None and dw:
        if len(dw) != len(dv):
            raise InvalidArgumentError(
                f"weights can not be broadcast to values. values.rank={len(dv)}. "
                f"weights.rank={len(dw)}. values.shape={_np_shape(dv)}. "
                f"weights.shape={_np_shape(dw)}.")
        for i, (a, b) in enumerate(zip(dw, dv)):
            if a is not None and b is not None and a != 1 and a != b:
                raise InvalidArgumentError(
                    f"weights can not be broadcast to values. Mismatch at dim {i}. "
                    f"values.shape={_np_shape(dv)}, weights.shape={_np_shape(dw)}.")
    return weights * O.ones_like(values)


def _div_no_nan(num, den, name=None):
    """``num / den``, 0 where ``den`` is 0 (TF's ``div_no_nan``)."""
    zero = O.equal(den, O.zeros_like(den))
    return O.where(zero, O.zeros_like(num), num / O.where(zero, O.ones_like(den), den),
                   name=name)


def _collected(pair, metrics_collections, updates_collections):
    if metrics_collections:
        add_to_collections(metrics_collections, pair[0])
    if updates_collections:
        add_to_collections(updates_collections, pair[1])
    return pair


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


# ---- class metrics ------------------------------------------------------------------------------

def _class_ids(labels, predictions, num_classes, weights, what):
    """Flattened int64 labels and predictions (checked in [0, num_classes) when the step
    runs) and flattened float weights (or None)."""
    labels, predictions = O.reshape(_t(labels, _dt.int64), [-1]), \
        O.reshape(_t(predictions, _dt.int64), [-1])
    _check_compatible(predictions, labels)
    n = _t(int(num_classes), _dt.int64)
    ok = O.logical_and(
        O.logical_and(O.reduce_all(O.greater_equal(labels, _t(0, _dt.int64))),
                      O.reduce_all(O.less(labels, n))),
        O.logical_and(O.reduce_all(O.greater_equal(predictions, _t(0, _dt.int64))),
                      O.reduce_all(O.less(predictions, n))))
    check = O.Assert(ok, [f"{what}: labels and predictions must be in [0, num_classes)"])
    with control_dependencies([check]):
        labels, predictions = O.identity(labels), O.identity(predictions)
    if weights is not None:
        weights = O.reshape(_t(weights, _dt.float32), [-1]) * O.ones_like(
            O.cast(labels, _dt.float32))
    return labels, predictions, weights


def mean_iou(labels, predictions, num_classes, weights=None, metrics_collections=None,
             updates_collections=None, name=None):
    """The mean over classes of ``tp / (tp + fp + fn)`` from a streaming confusion matrix
    (classes that never occur are left out). As TF, the update op returns the confusion
    matrix (``total_confusion_matrix``, float64, rows = labels)."""
    with variable_scope(name, default_name="mean_iou"):
        labels, predictions, weights = _class_ids(labels, predictions, num_classes, weights,
                                                  "mean_iou")
        total_cm = _metric_variable([num_classes, num_classes], _dt.float64,
                                    "total_confusion_matrix")
        w = O.ones_like(O.cast(labels, _dt.float64)) if weights is None else \
            O.cast(weights, _dt.float64)
        cells = O.unsorted_segment_sum(w, labels * num_classes + predictions,
                                       num_classes * num_classes)
        update = total_cm.assign_add(O.reshape(cells, [num_classes, num_classes]))
        cm = total_cm.value()
        rows = O.cast(O.reduce_sum(cm, 0), _dt.float32)
        cols = O.cast(O.reduce_sum(cm, 1), _dt.float32)
        diag = O.cast(O.diag_part(cm), _dt.float32)
        den = rows + cols - diag
        valid = O.reduce_sum(O.cast(O.not_equal(den, 0.0), _dt.float32))
        iou = diag / O.where(O.greater(den, 0.0), den, O.ones_like(den))
        value = O.where(O.greater(valid, 0.0),
                        O.reduce_sum(iou) / O.maximum(valid, 1.0), _t(0.0))
    return _collected((value, update), metrics_collections, updates_collections)


def mean_per_class_accuracy(labels, predictions, num_classes, weights=None,
                            metrics_collections=None, updates_collections=None, name=None):
    """The mean over classes of each class's accuracy (classes never seen count as 0, as in
    TF). The update op returns the per-class accuracies."""
    with variable_scope(name, default_name="mean_accuracy"):
        labels, predictions, weights = _class_ids(labels, predictions, num_classes, weights,
                                                  "mean_per_class_accuracy")
        total = _metric_variable([num_classes], _dt.float32, "total")
        count = _metric_variable([num_classes], _dt.float32, "count")
        ones = O.ones_like(O.cast(labels, _dt.float32))
        correct = O.cast(O.equal(predictions, labels), _dt.float32)
        if weights is not None:
            correct, ones = correct * weights, ones * weights
        up_total = total.assign_add(O.unsorted_segment_sum(ones, labels, num_classes))
        up_count = count.assign_add(O.unsorted_segment_sum(correct, labels, num_classes))
        value = O.reduce_mean(_div_no_nan(count.value(), total.value()),
                              name="mean_accuracy")
        update = _div_no_nan(up_count, up_total, "update_op")
    return _collected((value, update), metrics_collections, updates_collections)


# ---- top-k metrics (labels as sets of class ids per row) ------------------------------------------

def _at_k_name(name, k=None, class_id=None) -> str:
    name = f"{name}_at_{k}" if k is not None else f"{name}_at_k"
    return name if class_id is None else f"{name}_class{class_id}"


def _label_sets(labels, idx):
    """Labels as ``(ids [..., L] int64, valid [..., L] bool)``: a SparseTensor's present
    values, or every entry of a dense tensor (of the predictions' rank, or one lower: one id
    per row)."""
    rank = None if idx._shape is None else len(idx._shape)
    if hasattr(labels, "indices") and hasattr(labels, "dense_shape"):
        indices = _t(labels.indices, _dt.int64)
        values = _t(labels.values, _dt.int64)
        shape = _t(labels.dense_shape, _dt.int64)
        ids = O.scatter_nd(indices, values, shape)
        valid = O.cast(O.scatter_nd(indices, O.ones_like(values), shape), _dt.bool_)
        srank = None if indices._shape is None else indices._shape[-1]
        if rank is not None and srank is not None and rank == srank + 1:
            ids, valid = O.expand_dims(ids, -1), O.expand_dims(valid, -1)
        return ids, valid
    ids = _t(labels, _dt.int64)
    lrank = None if ids._shape is None else len(ids._shape)
    if rank is not None and lrank is not None and rank != lrank:
        if rank != lrank + 1:
            raise ValueError(f"Unexpected labels shape {_tf_shape(_dims(ids))} for predictions "
                             f"shape {_tf_shape(_dims(idx))}. Predictions rank should be the "
                             "same rank as labels rank or labels rank plus one .")
        ids = O.expand_dims(ids, -1)
    return ids, O.ones_like(O.cast(ids, _dt.bool_))


def _first_occurrences(ids, valid):
    """``[..., n]`` bool: entry ``i`` is valid and no earlier valid entry equals it (the
    distinct members of each row, as TF's set ops count them)."""
    same = O.logical_and(O.equal(O.expand_dims(ids, -1), O.expand_dims(ids, -2)),
                         O.expand_dims(valid, -2))                       # [..., i, j]
    n = ids._shape[-1] if ids._shape is not None and ids._shape[-1] is not None else None
    ones = O.ones([n, n], _dt.float32) if n is not None else \
        O.ones_like(O.cast(same, _dt.float32))
    earlier = O.cast(O.matrix_band_part(ones, -1, 0) - O.matrix_band_part(ones, 0, 0),
                     _dt.bool_)                                          # j < i
    dup = O.reduce_any(O.logical_and(same, earlier), axis=-1)
    return O.logical_and(valid, O.logical_not(dup))


def _top_k_counts(labels, idx, class_id):
    """Per row: ``(tp, fp, fn)`` of the predicted ids ``idx`` against the label sets."""
    idx = _t(idx, _dt.int64)
    ids, valid = _label_sets(labels, idx)
    if class_id is not None:
        c = _t(int(class_id), _dt.int64)
        in_pred = O.reduce_any(O.equal(idx, c), axis=-1)
        in_label = O.reduce_any(O.logical_and(valid, O.equal(ids, c)), axis=-1)
        tp = O.logical_and(in_pred, in_label)
        fp = O.logical_and(in_pred, O.logical_not(in_label))
        fn = O.logical_and(in_label, O.logical_not(in_pred))
        return tuple(O.cast(x, _dt.float64) for x in (tp, fp, fn))
    pred_first = _first_occurrences(idx, O.ones_like(O.cast(idx, _dt.bool_)))
    label_first = _first_occurrences(ids, valid)
    hit = O.reduce_any(O.logical_and(O.equal(O.expand_dims(idx, -1), O.expand_dims(ids, -2)),
                                     O.expand_dims(label_first, -2)), axis=-1)
    f64 = _dt.float64
    tp = O.reduce_sum(O.cast(O.logical_and(pred_first, hit), f64), axis=-1)
    n_pred = O.reduce_sum(O.cast(pred_first, f64), axis=-1)
    n_label = O.reduce_sum(O.cast(label_first, f64), axis=-1)
    return tp, n_pred - tp, n_label - tp


def _top_k_metric(kind, labels, predictions_idx, k, class_id, weights, metrics_collections,
                  updates_collections, name):
    with variable_scope(name, default_name=_at_k_name(kind, k, class_id)):
        tp, fp, fn = _top_k_counts(labels, predictions_idx, class_id)
        other, other_name = (fp, "false_positive") if kind == "precision" else \
            (fn, "false_negative")
        if weights is not None:
            w = _t(weights, _dt.float64)
            tp, other = tp * w, other * w
        tp_var = _metric_variable([], _dt.float64, _at_k_name("true_positive", k, class_id))
        o_var = _metric_variable([], _dt.float64, _at_k_name(other_name, k, class_id))
        tp_up = tp_var.assign_add(O.reduce_sum(tp), name=_at_k_name("true_positive", k, class_id)
                                  + "_update")
        o_up = o_var.assign_add(O.reduce_sum(other), name=_at_k_name(other_name, k, class_id)
                                + "_update")
        value = O.identity(tp_var.value() / (tp_var.value() + o_var.value()), name="value")
        update = O.identity(tp_up / (tp_up + o_up), name="update")
    return _collected((value, update), metrics_collections, updates_collections)


def precision_at_top_k(labels, predictions_idx, k=None, class_id=None, weights=None,
                       metrics_collections=None, updates_collections=None, name=None):
    """Precision of the predicted class ids ``predictions_idx`` (``[..., k]``) against the
    label sets (a SparseTensor or dense ids; ``class_id``: only that class). NaN while
    nothing was predicted."""
    return _top_k_metric("precision", labels, predictions_idx, k, class_id, weights,
                         metrics_collections, updates_collections, name)


def recall_at_top_k(labels, predictions_idx, k=None, class_id=None, weights=None,
                    metrics_collections=None, updates_collections=None, name=None):
    """Recall of the predicted class ids ``predictions_idx`` against the label sets; labels
    outside the classes always count as false negatives. NaN while there is no label."""
    return _top_k_metric("recall", labels, predictions_idx, k, class_id, weights,
                         metrics_collections, updates_collections, name)


def _top_k_idx(predictions, k):
    from ..ops.nn.nn_norm import top_k
    if not isinstance(k, int) or k < 1:
        raise ValueError(f"k must be a positive integer, got {k!r}")
    return top_k(_t(predictions), k)[1]


def precision_at_k(labels, predictions, k, class_id=None, weights=None,
                   metrics_collections=None, updates_collections=None, name=None):
    """Precision of the ``k`` highest-scoring classes of ``predictions`` (``[..., classes]``
    logits or probabilities) against ``labels`` (int64 class ids, dense ``[..., n]`` or
    ``[...]``, or a SparseTensor), over all batches (TF's ``sparse_precision_at_k``)."""
    return precision_at_top_k(labels, _top_k_idx(predictions, k), k, class_id, weights,
                              metrics_collections, updates_collections, name)


def recall_at_k(labels, predictions, k, class_id=None, weights=None, metrics_collections=None,
                updates_collections=None, name=None):
    """Recall of the ``k`` highest-scoring classes of ``predictions`` against ``labels``
    (as :func:`precision_at_k`)."""
    return recall_at_top_k(labels, _top_k_idx(predictions, k), k, class_id, weights,
                           metrics_collections, updates_collections, name)


sparse_precision_at_k = precision_at_k


def _average_precision_per_row(labels, idx, num_classes):
    """TF's ``_sparse_average_precision_at_top_k``: per row, the sum over ranks ``i <= k``
    whose prediction is a label of the precision at ``i``, divided by ``min(#labels, k)``
    (dense labels: the entries >= 0; a SparseTensor: its distinct values)."""
    f64 = _dt.float64
    idx = _t(idx, _dt.int64)
    k = idx._shape[-1] if idx._shape is not None else None
    if k is None:
        raise ValueError("The last dimension of predictions_idx must be set.")
    ids, valid = _label_sets(labels, idx)
    ids = O.where(O.greater_equal(ids, num_classes), -O.ones_like(ids), ids)  # TF's cleaning
    relevant = O.cast(O.reduce_any(O.logical_and(
        O.equal(O.expand_dims(idx, -1), O.expand_dims(ids, -2)), O.expand_dims(valid, -2)),
        axis=-1), f64)                                                    # [..., k]
    precision = O.cumsum(relevant, axis=-1) / O.cumsum(O.ones_like(relevant), axis=-1)
    precision_sum = O.reduce_sum(precision * relevant, axis=-1)
    if hasattr(labels, "indices") and hasattr(labels, "dense_shape"):
        n = O.reduce_sum(O.cast(_first_occurrences(ids, valid), f64), axis=-1)
    else:
        n = O.reduce_sum(O.cast(O.greater_equal(ids, O.zeros_like(ids)), f64), axis=-1)
    return precision_sum / O.minimum(n, float(k))


def average_precision_at_k(labels, predictions, k, weights=None, metrics_collections=None,
                           updates_collections=None, name=None):
    """The mean over rows (weighted) of the average precision of the ``k`` highest-scoring
    classes of ``predictions`` against the label sets (TF's ``sparse_average_precision_at_k``:
    ids outside the classes are relevant labels never retrieved)."""
    if not isinstance(k, int) or k < 1:
        raise ValueError(f"Invalid k={k}. `k` should be >= 1.")
    predictions = _t(predictions)
    with variable_scope(name, default_name=_at_k_name("average_precision", k)):
        num_classes = O.cast(O.shape(predictions)[-1], _dt.int64)
        ap = _average_precision_per_row(labels, _top_k_idx(predictions, k), num_classes)
        if weights is None:
            batch_max = O.cast(O.size(ap), _dt.float64)
        else:
            w = _t(weights, _dt.float64) * O.ones_like(ap)
            ap = ap * w
            batch_max = O.reduce_sum(w)
        max_var = _metric_variable([], _dt.float64, "max")
        total_var = _metric_variable([], _dt.float64, "total")
        max_up = max_var.assign_add(batch_max, name="max_update")
        total_up = total_var.assign_add(O.reduce_sum(ap), name="total_update")
        value = _div_no_nan(total_var.value(), max_var.value(), "mean")
        update = _div_no_nan(total_up, max_up, "update")
    return _collected((value, update), metrics_collections, updates_collections)


sparse_average_precision_at_k = average_precision_at_k
