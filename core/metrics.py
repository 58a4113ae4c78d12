"""``tv.metrics``: TF 1.x's streaming metrics. Each returns ``(value, update_op)``: the
update op adds a batch to local variables (``<name>/total``, ``<name>/count``, in
``LOCAL_VARIABLES`` and ``metric_variables``) and returns the running value; ``value`` reads
it without changing it (0 before any data). ``tv.local_variables_initializer()`` resets them.

>>> import tensorvm as tv
>>> acc, acc_op = tv.metrics.accuracy(labels=[1, 2, 3, 4], predictions=[1, 2, 0, 4])
>>> with tv.Session() as s:
...     _ = s.run(tv.local_variables_initializer()); float(s.run(acc_op))
0.75
"""
from __future__ import annotations

from . import dtypes as _dt
from .errors import InvalidArgumentError
from .graph import control_dependencies
from .graph_keys import GraphKeys
from .ops import cast, equal, greater, ones_like, reduce_sum, size, where, zeros
from .tensor_conversion import convert_to_tensor
from .variable_scope import variable_scope
from .variables import Variable

__all__ = ["accuracy", "mean"]
METRIC_VARIABLES = "metric_variables"  # TF 1.x's GraphKeys.METRIC_VARIABLES


def _metric_variable(name):
    return Variable(zeros([], _dt.float32), trainable=False, name=name,
                    collections=[GraphKeys.LOCAL_VARIABLES, METRIC_VARIABLES])


def _safe_div(num, den, name):
    pos = greater(den, 0.0)
    return where(pos, num / where(pos, den, ones_like(den)), zeros([], _dt.float32), name=name)


def _streaming_mean(values, weights):
    v = cast(convert_to_tensor(values), _dt.float32)
    total, count = _metric_variable("total"), _metric_variable("count")
    if weights is None:
        batch_sum, batch_n = reduce_sum(v), cast(size(v), _dt.float32)
    else:
        w = cast(convert_to_tensor(weights), _dt.float32) * ones_like(v)
        batch_sum, batch_n = reduce_sum(v * w), reduce_sum(w)
    update_total = total.assign_add(batch_sum)
    with control_dependencies([v]):
        update_count = count.assign_add(batch_n)
    return _safe_div(total, count, "value"), _safe_div(update_total, update_count, "update_op")


def _collected(pair, metrics_collections, updates_collections):
    from .graph_keys import add_to_collections
    if metrics_collections:
        add_to_collections(metrics_collections, pair[0])
    if updates_collections:
        add_to_collections(updates_collections, pair[1])
    return pair


def mean(values, weights=None, metrics_collections=None, updates_collections=None,
         name=None):
    """The (weighted) mean of ``values`` over every batch the update op has seen."""
    with variable_scope(name, default_name="mean"):
        pair = _streaming_mean(values, weights)
    return _collected(pair, metrics_collections, updates_collections)


def accuracy(labels, predictions, weights=None, metrics_collections=None,
             updates_collections=None, name=None):
    """How often ``predictions`` equals ``labels`` (cast to the labels' dtype)."""
    labels, predictions = convert_to_tensor(labels), convert_to_tensor(predictions)
    a, b = labels._shape, predictions._shape
    if a is not None and b is not None and (len(a) != len(b) or any(
            x is not None and y is not None and x != y for x, y in zip(a, b))):
        raise InvalidArgumentError(f"accuracy: labels and predictions must have the same "
                                   f"shape, got {list(a)} and {list(b)}")
    if predictions.dtype != labels.dtype:
        predictions = cast(predictions, labels.dtype)
    with variable_scope(name, default_name="accuracy"):
        pair = _streaming_mean(cast(equal(predictions, labels), _dt.float32), weights)
    return _collected(pair, metrics_collections, updates_collections)
