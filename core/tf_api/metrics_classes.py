"""Metrics over class ids: ``mean_iou``, ``mean_per_class_accuracy``, and the top-k metrics
(labels as sets of class ids per row): precision/recall at k and at top k, average precision
at k.
"""
from __future__ import annotations

from ..framework import dtypes as _dt
from .. import ops as O
from ..framework.graph import control_dependencies
from ..ops.state.variable_scope import variable_scope
from .metrics_common import (_check_compatible, _collected, _dims, _div_no_nan, _metric_variable,
                             _t, _tf_shape)

__all__ = ["mean_iou", "mean_per_class_accuracy", "precision_at_top_k", "recall_at_top_k",
           "precision_at_k", "recall_at_k", "sparse_precision_at_k", "average_precision_at_k",
           "sparse_average_precision_at_k"]


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
