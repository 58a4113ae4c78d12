"""``tv.losses``: TF 1.x's losses with ``weights`` and ``reduction``, each added to the
``GraphKeys.LOSSES`` collection, and the collection helpers (``get_losses``,
``get_regularization_loss``, ``get_total_loss``).

Reductions (``tv.losses.Reduction``): ``NONE`` (per element), ``SUM``, ``MEAN`` (sum divided by
the sum of the weights), ``SUM_OVER_BATCH_SIZE`` (by the number of elements),
``SUM_BY_NONZERO_WEIGHTS`` (the default: by the number of non-zero weights); a zero divisor
gives 0.

>>> import tensorvm as tv
>>> loss = tv.losses.mean_squared_error([1.0, 2.0, 3.0], [1.0, 0.0, 0.0], weights=[1, 1, 0])
>>> with tv.Session() as s: float(s.run(loss))
2.0
"""
from __future__ import annotations

from ..framework import dtypes as _dt
from ..framework.errors import InvalidArgumentError
from ..framework.graph import get_default_graph
from ..framework.graph_keys import GraphKeys, get_collection
from ..framework.tensor_conversion import convert_to_tensor

__all__ = [
    "Reduction",
    "absolute_difference",
    "add_loss",
    "compute_weighted_loss",
    "cosine_distance",
    "get_losses",
    "get_regularization_loss",
    "get_regularization_losses",
    "get_total_loss",
    "hinge_loss",
    "huber_loss",
    "log_loss",
    "mean_pairwise_squared_error",
    "mean_squared_error",
    "sigmoid_cross_entropy",
    "softmax_cross_entropy",
    "sparse_softmax_cross_entropy",
]


class Reduction:
    NONE = "none"
    SUM = "weighted_sum"
    MEAN = "weighted_mean"
    SUM_OVER_BATCH_SIZE = "weighted_sum_over_batch_size"
    SUM_BY_NONZERO_WEIGHTS = "weighted_sum_by_nonzero_weights"
    SUM_OVER_NONZERO_WEIGHTS = SUM_BY_NONZERO_WEIGHTS

    @classmethod
    def all(cls):
        return (cls.NONE, cls.SUM, cls.MEAN, cls.SUM_OVER_BATCH_SIZE,
                cls.SUM_BY_NONZERO_WEIGHTS)

    @classmethod
    def validate(cls, key):
        if key not in cls.all():
            raise InvalidArgumentError(f"Invalid Reduction Key {key!r}")


def _safe_div(num, den):
    from ..ops.array.array_ops import ones_like, zeros_like
    from ..ops.math.math_ext import greater, where_
    pos = greater(den, zeros_like(den))
    return where_(pos, num / where_(pos, den, ones_like(den)), zeros_like(num))


def compute_weighted_loss(losses, weights=1.0, scope=None, loss_collection=GraphKeys.LOSSES,
                          reduction=Reduction.SUM_BY_NONZERO_WEIGHTS):
    """``losses * weights`` reduced by ``reduction`` (``weights`` broadcast to ``losses``)."""
    from ..ops.array.array_ops import ones_like
    from ..ops.array.fill_ops import size
    from ..ops.math.math_ext import count_nonzero
    from ..ops.math.math_ops import cast, reduce_sum
    Reduction.validate(reduction)
    losses = convert_to_tensor(losses)
    if not losses.dtype.is_floating:
        losses = cast(losses, _dt.float32)
    w = cast(convert_to_tensor(weights), losses.dtype) if hasattr(weights, "op") or \
        hasattr(weights, "_as_graph_element") else convert_to_tensor(weights, dtype=losses.dtype)
    w_full = w * ones_like(losses)
    weighted = losses * w
    if reduction == Reduction.NONE:
        out = weighted * ones_like(losses) if w._shape != losses._shape else weighted
    else:
        total = reduce_sum(weighted)
        if reduction == Reduction.SUM:
            out = total
        elif reduction == Reduction.MEAN:
            out = _safe_div(total, reduce_sum(w_full))
        elif reduction == Reduction.SUM_OVER_BATCH_SIZE:
            out = _safe_div(total, cast(size(losses), losses.dtype))
        else:
            out = _safe_div(total, cast(count_nonzero(w_full), losses.dtype))
    if loss_collection is not None:
        get_default_graph().add_to_collection(loss_collection, out)
    return out


def _pair(labels, predictions):
    predictions = convert_to_tensor(predictions)
    if hasattr(labels, "op") or hasattr(labels, "_as_graph_element"):
        from ..ops.math.math_ops import cast
        labels = convert_to_tensor(labels)
        if labels.dtype != predictions.dtype:
            labels = cast(labels, predictions.dtype)
    else:
        labels = convert_to_tensor(labels, dtype=predictions.dtype)
    if labels._shape is not None and predictions._shape is not None:
        from ..ops.common import broadcast_shapes
        try:
            broadcast_shapes(labels._shape, predictions._shape)
        except InvalidArgumentError:
            raise InvalidArgumentError(f"Shapes {list(predictions._shape)} and "
                                       f"{list(labels._shape)} are incompatible") from None
    return labels, predictions


def mean_squared_error(labels, predictions, weights=1.0, scope=None,
                       loss_collection=GraphKeys.LOSSES,
                       reduction=Reduction.SUM_BY_NONZERO_WEIGHTS):
    """Weighted ``(predictions - labels) ** 2``."""
    from ..ops.math.math_ext import squared_difference
    labels, predictions = _pair(labels, predictions)
    return compute_weighted_loss(squared_difference(predictions, labels), weights, scope,
                                 loss_collection, reduction)


def absolute_difference(labels, predictions, weights=1.0, scope=None,
                        loss_collection=GraphKeys.LOSSES,
                        reduction=Reduction.SUM_BY_NONZERO_WEIGHTS):
    """Weighted ``|predictions - labels|``."""
    from ..ops.math.math_ext import abs as abs_
    labels, predictions = _pair(labels, predictions)
    return compute_weighted_loss(abs_(predictions - labels), weights, scope, loss_collection,
                                 reduction)


def log_loss(labels, predictions, weights=1.0, epsilon=1e-7, scope=None,
             loss_collection=GraphKeys.LOSSES, reduction=Reduction.SUM_BY_NONZERO_WEIGHTS):
    """Weighted ``-labels * log(p + eps) - (1 - labels) * log(1 - p + eps)``."""
    from ..ops.math.math_ops import log
    labels, p = _pair(labels, predictions)
    losses = -labels * log(p + epsilon) - (1.0 - labels) * log(1.0 - p + epsilon)
    return compute_weighted_loss(losses, weights, scope, loss_collection, reduction)


def hinge_loss(labels, logits, weights=1.0, scope=None, loss_collection=GraphKeys.LOSSES,
               reduction=Reduction.SUM_BY_NONZERO_WEIGHTS):
    """Weighted ``max(0, 1 - (2 * labels - 1) * logits)`` (labels in {0, 1})."""
    from ..ops.nn.nn_ops import relu
    labels, logits = _pair(labels, logits)
    return compute_weighted_loss(relu(1.0 - (2.0 * labels - 1.0) * logits), weights, scope,
                                 loss_collection, reduction)


def huber_loss(labels, predictions, weights=1.0, delta=1.0, scope=None,
               loss_collection=GraphKeys.LOSSES, reduction=Reduction.SUM_BY_NONZERO_WEIGHTS):
    """Weighted ``0.5 * e ** 2`` where ``|e| <= delta``, else ``delta * (|e| - 0.5 * delta)``."""
    from ..ops.math.math_ext import abs as abs_
    from ..ops.math.math_ext import minimum
    labels, predictions = _pair(labels, predictions)
    err = abs_(predictions - labels)
    quad = minimum(err, delta)
    return compute_weighted_loss(0.5 * quad * quad + delta * (err - quad), weights, scope,
                                 loss_collection, reduction)


def softmax_cross_entropy(onehot_labels, logits, weights=1.0, label_smoothing=0, scope=None,
                          loss_collection=GraphKeys.LOSSES,
                          reduction=Reduction.SUM_BY_NONZERO_WEIGHTS):
    """Weighted per-example softmax cross-entropy; ``label_smoothing`` mixes the one-hot
    labels with the uniform distribution: ``labels * (1 - s) + s / num_classes``."""
    from ..ops.array.array_ops import stop_gradient
    from ..ops.nn.nn_softmax import softmax_cross_entropy_with_logits_v2
    labels, logits = _pair(onehot_labels, logits)
    if label_smoothing:
        n = logits._shape[-1] if logits._shape is not None else None
        if n is None:
            raise InvalidArgumentError("softmax_cross_entropy: label_smoothing needs a known "
                                       "number of classes")
        labels = labels * (1.0 - label_smoothing) + label_smoothing / n
    losses = softmax_cross_entropy_with_logits_v2(labels=stop_gradient(labels), logits=logits)
    return compute_weighted_loss(losses, weights, scope, loss_collection, reduction)


def sparse_softmax_cross_entropy(labels, logits, weights=1.0, scope=None,
                                 loss_collection=GraphKeys.LOSSES,
                                 reduction=Reduction.SUM_BY_NONZERO_WEIGHTS):
    """Weighted per-example cross-entropy with class-index ``labels``."""
    from ..ops.nn.nn_softmax import sparse_softmax_cross_entropy_with_logits
    losses = sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)
    return compute_weighted_loss(losses, weights, scope, loss_collection, reduction)


def sigmoid_cross_entropy(multi_class_labels, logits, weights=1.0, label_smoothing=0,
                          scope=None, loss_collection=GraphKeys.LOSSES,
                          reduction=Reduction.SUM_BY_NONZERO_WEIGHTS):
    """Weighted element-wise sigmoid cross-entropy; ``label_smoothing`` moves the labels
    towards 1/2: ``labels * (1 - s) + s / 2``."""
    from ..ops.nn.nn_softmax import sigmoid_cross_entropy_with_logits
    labels, logits = _pair(multi_class_labels, logits)
    if label_smoothing:
        labels = labels * (1.0 - label_smoothing) + 0.5 * label_smoothing
    losses = sigmoid_cross_entropy_with_logits(labels=labels, logits=logits)
    return compute_weighted_loss(losses, weights, scope, loss_collection, reduction)


def _float_pair(labels, predictions, what):
    """Both cast to float32 (TF's), checked for compatible shapes."""
    from ..ops.math.math_ops import cast
    if labels is None:
        raise InvalidArgumentError("Argument `labels` must not be None.")
    if predictions is None:
        raise InvalidArgumentError("Argument `predictions` must not be None.")
    labels, predictions = convert_to_tensor(labels), convert_to_tensor(predictions)
    labels = labels if labels.dtype == _dt.float32 else cast(labels, _dt.float32)
    predictions = predictions if predictions.dtype == _dt.float32 else \
        cast(predictions, _dt.float32)
    a, b = predictions._shape, labels._shape
    if a is not None and b is not None and (len(a) != len(b) or any(
            x is not None and y is not None and x != y for x, y in zip(a, b))):
        def tf_shape(d):
            return "(" + ", ".join("None" if x is None else str(x) for x in d) + \
                ("," if len(d) == 1 else "") + ")"
        raise InvalidArgumentError(f"Shapes {tf_shape(a)} and {tf_shape(b)} are incompatible "
                                   f"({what})")
    return labels, predictions


def cosine_distance(labels, predictions, axis=None, weights=1.0, scope=None,
                    loss_collection=GraphKeys.LOSSES,
                    reduction=Reduction.SUM_BY_NONZERO_WEIGHTS, dim=None):
    """Weighted ``1 - sum(labels * predictions, axis)`` (both unit-normalised along
    ``axis``; ``dim`` is its old name)."""
    from ..ops.math.math_ops import reduce_sum
    if axis is None:
        axis = dim
    elif dim is not None and dim != axis:
        raise InvalidArgumentError("Cannot specify both 'axis' and 'dim'")
    if axis is None:
        raise InvalidArgumentError("You must specify argument `axis`.")
    labels, predictions = _float_pair(labels, predictions, "cosine_distance")
    losses = 1.0 - reduce_sum(predictions * labels, axis=[axis], keepdims=True)
    return compute_weighted_loss(losses, weights, scope, loss_collection, reduction)


def mean_pairwise_squared_error(labels, predictions, weights=1.0, scope=None,
                                loss_collection=GraphKeys.LOSSES):
    """For each example (the first dimension), the mean over pairs of its elements ``i, j``
    of ``((p_i - p_j) - (l_i - l_j)) ** 2``, times its weight, summed over the batch:
    ``2 * (sum(d**2) / (n - 1) - sum(d)**2 / (n * (n - 1)))`` with ``d = p - l`` and ``n`` the
    example's elements whose weight is not zero."""
    from ..ops.array.array_ops import ones_like, zeros_like
    from ..ops.math.math_ext import equal, greater, maximum, where_
    from ..ops.math.math_ops import cast, reduce_sum
    labels, predictions = _float_pair(labels, predictions, "mean_pairwise_squared_error")
    w = convert_to_tensor(weights)
    w = w if w.dtype == _dt.float32 else cast(w, _dt.float32)
    diffs = predictions - labels
    rank = len(diffs._shape) if diffs._shape is not None else None
    if rank is None:
        raise InvalidArgumentError("mean_pairwise_squared_error: the predictions need a known "
                                   "rank")
    axis = list(range(1, rank))
    present = where_(equal(w, 0.0), zeros_like(w), ones_like(w)) * ones_like(diffs)
    n = reduce_sum(present, axis=axis, keepdims=True)
    term1 = 2.0 * _safe_div(reduce_sum(diffs * diffs, axis=axis, keepdims=True),
                            maximum(n - 1.0, 0.0))
    total = reduce_sum(diffs, axis=axis, keepdims=True)
    term2 = 2.0 * _safe_div(total * total, maximum(n * (n - 1.0), 0.0))
    loss = reduce_sum((term1 - term2) * w)
    out = where_(greater(reduce_sum(n), 0.0), loss, zeros_like(loss))
    if loss_collection is not None:
        get_default_graph().add_to_collection(loss_collection, out)
    return out


def add_loss(loss, loss_collection=GraphKeys.LOSSES) -> None:
    if loss_collection is not None:
        get_default_graph().add_to_collection(loss_collection, loss)


def get_losses(scope=None, loss_collection=GraphKeys.LOSSES) -> list:
    return get_collection(loss_collection, scope)


def get_regularization_losses(scope=None) -> list:
    return get_collection(GraphKeys.REGULARIZATION_LOSSES, scope)


def get_regularization_loss(scope=None, name="total_regularization_loss"):
    """The sum of the regularization losses (0.0 when there are none)."""
    from ..ops.math.math_ops import add_n
    losses = get_regularization_losses(scope)
    if not losses:
        return convert_to_tensor(0.0)
    return add_n(losses, name=name)


def get_total_loss(add_regularization_losses=True, name="total_loss", scope=None):
    """The sum of ``get_losses()`` (and the regularization losses)."""
    from ..ops.math.math_ops import add_n
    losses = get_losses(scope) + (get_regularization_losses(scope)
                                  if add_regularization_losses else [])
    if not losses:
        raise InvalidArgumentError("No losses found in the LOSSES collection.")
    return add_n(losses, name=name)
