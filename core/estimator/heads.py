"""Heads of the canned estimators: from logits and labels to the loss, the predictions and
the evaluation metrics of one problem (TF 1.x's ``head`` functions, reduced to what
``tensorvm.estimator.canned`` needs). The training loss is the weighted *sum* over the batch
(TF 1.x's ``Reduction.SUM``); ``average_loss`` is the per-example mean over the evaluation
set."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..framework import dtypes as _dt
from ..tf_api import metrics as _metrics
from ..ops import (
    argmax,
    as_string,
    cast,
    concat,
    constant,
    expand_dims,
    gather,
    maximum,
    nn,
    ones_like,
    reduce_sum,
    reshape,
    sigmoid,
    square,
)
from ..framework.tensor_conversion import convert_to_tensor
from .model_fn import EstimatorSpec, ModeKeys

__all__ = ["BinaryClassHead", "MultiClassHead", "RegressionHead", "spec_of"]


def _weights(features, weight_column, like):
    if weight_column is None:
        return ones_like(like)
    key = weight_column if isinstance(weight_column, str) else weight_column.key
    return reshape(cast(features[key], _dt.float32), [-1, 1])


def _label_ids(labels, vocabulary, n_classes):
    """Labels as ``[batch, 1]`` int64 class ids (strings looked up in ``vocabulary``)."""
    labels = reshape(convert_to_tensor(labels), [-1, 1])
    if vocabulary is None:
        if labels.dtype == _dt.string:
            raise ValueError("Labels dtype should be integer. Instead got string. Use "
                             "label_vocabulary for string labels.")
        return cast(labels, _dt.int64)
    from .feature_column import categorical_column_with_vocabulary_list
    col = categorical_column_with_vocabulary_list("labels", vocabulary)
    return col.ids({"labels": labels})


def _class_strings(ids, vocabulary):
    if vocabulary is None:
        return as_string(ids)
    return gather(constant(np.array([str(v).encode() for v in vocabulary], object)),
                     ids)


@dataclass
class RegressionHead:
    """Squared error on ``label_dimension`` outputs."""
    label_dimension: int = 1
    weight_column: object = None

    @property
    def logits_dimension(self) -> int:
        """How many logits per example the model must output."""
        return self.label_dimension

    def predictions(self, logits):
        """The prediction dict of ``logits`` (TF's keys)."""
        return {"predictions": logits}

    def losses(self, features, labels, logits):
        """``(per-example loss [batch, d], weights [batch, 1], labels as used)``."""
        labels = reshape(cast(labels, _dt.float32), [-1, self.label_dimension])
        per_example = square(logits - labels)
        return per_example, _weights(features, self.weight_column, per_example[:, :1]), labels

    def metrics(self, per_example, weights, labels, logits, predictions):
        """The evaluation metrics: name -> ``(value, update_op)``."""
        return {"average_loss": _metrics.mean(per_example, weights * ones_like(per_example)),
                "label/mean": _metrics.mean(labels, weights * ones_like(labels)),
                "prediction/mean": _metrics.mean(logits, weights * ones_like(logits))}


@dataclass
class MultiClassHead:
    """Softmax cross entropy over ``n_classes`` classes."""
    n_classes: int
    weight_column: object = None
    label_vocabulary: object = None

    @property
    def logits_dimension(self) -> int:
        """How many logits per example the model must output."""
        return self.n_classes

    def predictions(self, logits):
        """The prediction dict of ``logits`` (TF's keys)."""
        ids = expand_dims(argmax(logits, axis=1, output_type=_dt.int64), 1)
        all_ids = ones_like(ids) * constant(np.arange(self.n_classes, dtype=np.int64))
        return {"logits": logits, "probabilities": nn.softmax(logits), "class_ids": ids,
                "classes": _class_strings(ids, self.label_vocabulary),
                "all_class_ids": all_ids,
                "all_classes": _class_strings(all_ids, self.label_vocabulary)}

    def losses(self, features, labels, logits):
        """``(per-example loss [batch, d], weights [batch, 1], labels as used)``."""
        ids = _label_ids(labels, self.label_vocabulary, self.n_classes)
        per_example = expand_dims(nn.sparse_softmax_cross_entropy_with_logits(
            labels=reshape(ids, [-1]), logits=logits), 1)
        return per_example, _weights(features, self.weight_column, per_example), ids

    def metrics(self, per_example, weights, ids, logits, predictions):
        """The evaluation metrics: name -> ``(value, update_op)``."""
        return {"accuracy": _metrics.accuracy(ids, predictions["class_ids"], weights),
                "average_loss": _metrics.mean(per_example, weights)}


@dataclass
class BinaryClassHead:
    """Sigmoid cross entropy on one logit (``n_classes=2``)."""
    weight_column: object = None
    label_vocabulary: object = None

    logits_dimension = 1

    def predictions(self, logits):
        """The prediction dict of ``logits`` (TF's keys)."""
        p = sigmoid(logits)
        ids = cast(logits > 0.0, _dt.int64)
        all_ids = ones_like(ids) * constant(np.arange(2, dtype=np.int64))
        return {"logits": logits, "logistic": p,
                "probabilities": concat([1.0 - p, p], axis=1), "class_ids": ids,
                "classes": _class_strings(ids, self.label_vocabulary),
                "all_class_ids": all_ids,
                "all_classes": _class_strings(all_ids, self.label_vocabulary)}

    def losses(self, features, labels, logits):
        """``(per-example loss [batch, d], weights [batch, 1], labels as used)``."""
        ids = _label_ids(labels, self.label_vocabulary, 2)
        per_example = nn.sigmoid_cross_entropy_with_logits(
            labels=cast(ids, _dt.float32), logits=logits)
        return per_example, _weights(features, self.weight_column, per_example), ids

    def metrics(self, per_example, weights, ids, logits, predictions):
        """The evaluation metrics: name -> ``(value, update_op)``."""
        y = cast(ids, _dt.float32)
        pred = cast(predictions["class_ids"], _dt.float32)
        label_mean = _metrics.mean(y, weights)
        baseline = tuple(maximum(v, 1.0 - v) for v in label_mean)
        return {"accuracy": _metrics.accuracy(ids, predictions["class_ids"], weights),
                "average_loss": _metrics.mean(per_example, weights),
                "label/mean": label_mean, "accuracy_baseline": baseline,
                "prediction/mean": _metrics.mean(predictions["logistic"], weights),
                "precision": _metrics.mean(y, weights * pred),
                "recall": _metrics.mean(pred, weights * y)}


def spec_of(head, features, labels, mode, logits, train_op_fn) -> EstimatorSpec:
    """The :class:`EstimatorSpec` of ``head`` for ``logits``; ``train_op_fn(loss)`` makes
    the training op."""
    predictions = head.predictions(logits)
    if mode == ModeKeys.PREDICT:
        return EstimatorSpec(mode, predictions=predictions)
    per_example, weights, labels_used = head.losses(features, labels, logits)
    loss = reduce_sum(per_example * weights)
    if mode == ModeKeys.EVAL:
        return EstimatorSpec(mode, predictions=predictions, loss=loss, eval_metric_ops=head.metrics(
            per_example, weights, labels_used, logits, predictions))
    return EstimatorSpec(mode, predictions=predictions, loss=loss, train_op=train_op_fn(loss))
