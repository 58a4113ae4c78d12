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

# the metrics live in modules by kind; tv.metrics gathers them
from .metrics_classes import (
    average_precision_at_k, mean_iou, mean_per_class_accuracy, precision_at_k, precision_at_top_k,
    recall_at_k, recall_at_top_k, sparse_average_precision_at_k, sparse_precision_at_k)
from .metrics_common import METRIC_VARIABLES  # noqa: F401
from .metrics_counts import (
    false_negatives, false_positives, precision, recall, true_negatives, true_positives)
from .metrics_means import (
    accuracy, mean, mean_absolute_error, mean_cosine_distance, mean_relative_error,
    mean_squared_error, mean_tensor, percentage_below, root_mean_squared_error)
from .metrics_thresholds import (  # noqa: F401  (_confusion_at_thresholds: tests)
    auc, _confusion_at_thresholds, false_negatives_at_thresholds, false_positives_at_thresholds,
    precision_at_thresholds, recall_at_thresholds, sensitivity_at_specificity,
    specificity_at_sensitivity, true_negatives_at_thresholds, true_positives_at_thresholds)

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


