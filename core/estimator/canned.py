"""Canned estimators (TF 1.x's premade ``LinearRegressor``, ``LinearClassifier``,
``DNNRegressor``, ``DNNClassifier``): an :class:`~tensorvm.estimator.Estimator` whose
``model_fn`` is a linear model (:func:`tensorvm.feature_column.linear_model`) or a
feed-forward network (:func:`tensorvm.feature_column.input_layer`, then dense layers) under
a head (:mod:`tensorvm.estimator.heads`). Defaults are TF 1.x's: the linear ones train with
FTRL at ``min(0.2, 1/sqrt(number of columns))``, the DNN ones with Adagrad at 0.05.

>>> import numpy as np, tensorvm as tv
>>> x = np.linspace(-1, 1, 40).astype(np.float32)
>>> est = tv.estimator.LinearRegressor([tv.feature_column.numeric_column("x")],
...                                    model_dir="memory://tvm-doc-canned",
...                                    optimizer=tv.train.GradientDescentOptimizer(0.02))
>>> fn = tv.estimator.inputs.numpy_input_fn({"x": x}, 2 * x + 1, 40, None, False)
>>> _ = est.train(fn, steps=300)
>>> [round(est.get_variable_value(f"linear/linear_model/{v}").item(), 3)
...  for v in ("x/weights", "bias_weights")]
[2.0, 1.0]
"""
from __future__ import annotations

import math

from ..tf_api import layers
from .. import train as _train
from ..ops.state.init_ops import glorot_uniform_initializer
from ..ops import nn
from ..ops.state.variable_scope import variable_scope
from .estimator import Estimator
from .heads import BinaryClassHead, MultiClassHead, RegressionHead, spec_of
from .model_fn import ModeKeys

__all__ = ["DNNClassifier", "DNNRegressor", "LinearClassifier", "LinearRegressor"]

_OPTIMIZERS = {"Adagrad": "AdagradOptimizer", "Adam": "AdamOptimizer",
               "Ftrl": "FtrlOptimizer", "RMSProp": "RMSPropOptimizer",
               "SGD": "GradientDescentOptimizer"}


def _optimizer(opt, default_lr):
    """An optimizer from a name, an instance, or a function returning one."""
    if isinstance(opt, str):
        if opt not in _OPTIMIZERS:
            raise ValueError(f"Unsupported optimizer name: {opt}. Supported names are: "
                             f"{tuple(sorted(_OPTIMIZERS))}")
        return getattr(_train, _OPTIMIZERS[opt])(learning_rate=default_lr)
    if callable(opt) and not isinstance(opt, _train.Optimizer):
        opt = opt()
    if not isinstance(opt, _train.Optimizer):
        raise ValueError(f"The given object is not an Optimizer instance. Given: {opt}")  # noqa: TRY004
    return opt


def _train_op_fn(optimizer, default_lr):
    def train_op_fn(loss):
        opt = _optimizer(optimizer, default_lr)
        return opt.minimize(loss, global_step=_train.get_global_step())
    return train_op_fn


def _classification_head(n_classes, weight_column, label_vocabulary):
    if n_classes is None or n_classes < 2:
        raise ValueError(f"n_classes must be > 1: {n_classes}")
    if label_vocabulary is not None and len(label_vocabulary) != n_classes:
        raise ValueError(f"label_vocabulary does not have n_classes ({n_classes}) entries: "
                         f"{label_vocabulary}")
    if n_classes == 2:
        return BinaryClassHead(weight_column, label_vocabulary)
    return MultiClassHead(n_classes, weight_column, label_vocabulary)


def _check_columns(feature_columns):
    cols = list(feature_columns or [])
    if not cols:
        raise ValueError("feature_columns must be defined.")
    return cols


class _Linear(Estimator):
    def __init__(self, head, feature_columns, model_dir, optimizer, config, warm_start_from,
                 sparse_combiner):
        cols = _check_columns(feature_columns)
        lr = min(0.2, 1.0 / math.sqrt(len(cols)))

        def model_fn(features, labels, mode, config):

            from .feature_column import linear_model
            with variable_scope("linear"):
                logits = linear_model(features, cols, units=head.logits_dimension,
                                      sparse_combiner=sparse_combiner)
            return spec_of(head, features, labels, mode, logits, _train_op_fn(optimizer, lr))

        super().__init__(model_fn, model_dir=model_dir, config=config,
                         warm_start_from=warm_start_from)


class _DNN(Estimator):
    def __init__(self, head, hidden_units, feature_columns, model_dir, optimizer,
                 activation_fn, dropout, config, warm_start_from):
        cols = _check_columns(feature_columns)
        if not hidden_units:
            raise ValueError("hidden_units must be a non-empty list of layer sizes.")

        def model_fn(features, labels, mode, config):

            from .feature_column import input_layer
            with variable_scope("dnn"):
                net = input_layer(features, cols)
                for i, units in enumerate(hidden_units):
                    net = layers.dense(net, units, activation=activation_fn,
                                          kernel_initializer=glorot_uniform_initializer(),
                                          name=f"hiddenlayer_{i}")
                    if dropout is not None and mode == ModeKeys.TRAIN:
                        net = layers.dropout(net, rate=dropout, training=True)
                logits = layers.dense(net, head.logits_dimension, name="logits",
                                         kernel_initializer=glorot_uniform_initializer())
            return spec_of(head, features, labels, mode, logits, _train_op_fn(optimizer, 0.05))

        super().__init__(model_fn, model_dir=model_dir, config=config,
                         warm_start_from=warm_start_from)


class LinearRegressor(_Linear):
    """A linear regression over ``feature_columns`` (squared error; predictions
    ``{"predictions": [batch, label_dimension]}``)."""

    def __init__(self, feature_columns, model_dir=None, label_dimension=1, weight_column=None,
                 optimizer="Ftrl", config=None, partitioner=None, warm_start_from=None,
                 loss_reduction=None, sparse_combiner="sum"):
        super().__init__(RegressionHead(label_dimension, weight_column), feature_columns,
                         model_dir, optimizer, config, warm_start_from, sparse_combiner)


class LinearClassifier(_Linear):
    """A linear classifier (logistic for ``n_classes=2``, softmax above)."""

    def __init__(self, feature_columns, model_dir=None, n_classes=2, weight_column=None,
                 label_vocabulary=None, optimizer="Ftrl", config=None, partitioner=None,
                 warm_start_from=None, loss_reduction=None, sparse_combiner="sum"):
        super().__init__(_classification_head(n_classes, weight_column, label_vocabulary),
                         feature_columns, model_dir, optimizer, config, warm_start_from,
                         sparse_combiner)


class DNNRegressor(_DNN):
    """A feed-forward regression network (``hidden_units`` ReLU layers by default)."""

    def __init__(self, hidden_units, feature_columns, model_dir=None, label_dimension=1,
                 weight_column=None, optimizer="Adagrad", activation_fn=None, dropout=None,
                 input_layer_partitioner=None, config=None, warm_start_from=None,
                 loss_reduction=None, batch_norm=False):
        super().__init__(RegressionHead(label_dimension, weight_column), hidden_units,
                         feature_columns, model_dir, optimizer, activation_fn or nn.relu,
                         dropout, config, warm_start_from)


class DNNClassifier(_DNN):
    """A feed-forward classification network (``hidden_units`` ReLU layers by default;
    predictions ``logits``, ``probabilities``, ``class_ids``, ``classes``, ...)."""

    def __init__(self, hidden_units, feature_columns, model_dir=None, n_classes=2,
                 weight_column=None, label_vocabulary=None, optimizer="Adagrad",
                 activation_fn=None, dropout=None, input_layer_partitioner=None, config=None,
                 warm_start_from=None, loss_reduction=None, batch_norm=False):
        super().__init__(_classification_head(n_classes, weight_column, label_vocabulary),
                         hidden_units, feature_columns, model_dir, optimizer,
                         activation_fn or nn.relu, dropout, config, warm_start_from)
