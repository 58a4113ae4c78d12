"""``ModeKeys`` and ``EstimatorSpec``: what a ``model_fn`` returns to an
:class:`~tensorvm.estimator.Estimator`, validated as TF 1.x validates it (the same error
classes and messages).

>>> import tensorvm as tv
>>> with tv.Graph().as_default():
...     loss = tv.constant(1.0)
...     spec = tv.estimator.EstimatorSpec(tv.estimator.ModeKeys.EVAL, loss=loss)
>>> spec.mode, spec.predictions, spec.train_op
('eval', {}, None)
"""
from __future__ import annotations

import collections

from ..framework.graph import Operation, Tensor, get_default_graph
from ..train.hooks import SessionRunHook
from ..train.monitored_session import Scaffold

__all__ = ["LOSS_METRIC_KEY", "EstimatorSpec", "ModeKeys"]

LOSS_METRIC_KEY = "loss"

_NOT_DEFAULT_GRAPH = (
    '{0} with "{1}" must be from the default graph. Possible causes of this error include: '
    "\n\n1) {0} was created outside the context of the default graph.\n\n"
    "2) The object passed through to EstimatorSpec was not created in the most recent call "
    'to "model_fn".')


class ModeKeys:
    """The three modes a ``model_fn`` is called in: ``TRAIN``, ``EVAL``, ``PREDICT``."""

    TRAIN = "train"
    EVAL = "eval"
    PREDICT = "infer"


def _is_tensor(x) -> bool:
    from ..ops.state.variables import Variable
    return isinstance(x, (Tensor, Variable))


def _as_tensor(x):
    from ..ops.state.variables import Variable
    return x.value() if isinstance(x, Variable) else x


def _check_tensor(x, what):
    if not _is_tensor(x):
        raise TypeError(f"{what} must be Tensor, given: {x}")
    return _as_tensor(x)


def _check_tensor_or_op(x, what):
    if not (isinstance(x, Operation) or _is_tensor(x)):
        raise TypeError(f"{what} must be Operation or Tensor, given: {x}")


def _check_graph(x, what, name):
    if x.graph is not get_default_graph():
        raise ValueError(_NOT_DEFAULT_GRAPH.format(what, name))


def _train_op(train_op, mode):
    if train_op is None:
        if mode == ModeKeys.TRAIN:
            raise ValueError("Missing train_op.")
        return None
    _check_tensor_or_op(train_op, "train_op")
    _check_graph(train_op, "train_op", train_op.name)
    return train_op


def _loss(loss, mode):
    if loss is None:
        if mode in (ModeKeys.TRAIN, ModeKeys.EVAL):
            raise ValueError("Missing loss.")
        return None
    loss = _check_tensor(loss, "loss")
    shape = loss.get_shape()
    if shape.num_elements() not in (None, 1):
        raise ValueError(f"Loss must be scalar, given: {loss}")
    _check_graph(loss, "loss", loss.name)
    if shape.dims is None or len(shape.dims) != 0:
        from ..ops.array.array_ops import reshape
        loss = reshape(loss, [])
    return loss


def _predictions(predictions, mode):
    if predictions is None:
        if mode == ModeKeys.PREDICT:
            raise ValueError("Missing predictions.")
        return {}
    if isinstance(predictions, dict):
        predictions = {k: _check_tensor(v, f"predictions[{k}]") for k, v in predictions.items()}
        for k, v in predictions.items():
            _check_graph(v, "prediction values", f"{k}: {v.name}")
        return predictions
    predictions = _check_tensor(predictions, "predictions")
    _check_graph(predictions, "prediction values", predictions.name)
    return predictions


def _hooks(hooks):
    hooks = tuple(hooks or ())
    for h in hooks:
        if not isinstance(h, SessionRunHook):
            raise TypeError(f"All hooks must be SessionRunHook instances, given: {h}")
    return hooks


def _flatten(value):
    if isinstance(value, (tuple, list)):
        return [y for x in value for y in _flatten(x)]
    if isinstance(value, dict):
        return [y for k in sorted(value) for y in _flatten(value[k])]
    return [value]


def _eval_metric_ops(ops):
    if ops is None:
        return {}
    if not isinstance(ops, dict):
        raise TypeError(f"eval_metric_ops must be a dict, given: {ops}")
    out = {}
    for key, value in ops.items():
        if not isinstance(value, tuple) or len(value) != 2:
            raise TypeError("Values of eval_metric_ops must be (metric_value, update_op) "
                            f"tuples, given: {value} for key: {key}")
        for member in _flatten(value[0]):
            _check_tensor_or_op(member, f"eval_metric_ops[{key}]")
        _check_tensor_or_op(value[1], f"eval_metric_ops[{key}]")
        for member in _flatten(value):
            _check_graph(member, "eval_metric_ops", f"{key}: {member.name}")
        out[key] = (_as_tensor(value[0]) if _is_tensor(value[0]) else value[0],
                    _as_tensor(value[1]) if _is_tensor(value[1]) else value[1])
    return out


def _scaffold(scaffold):
    scaffold = scaffold or Scaffold()
    if not isinstance(scaffold, Scaffold):
        raise TypeError(f"scaffold must be tf.train.Scaffold. Given: {scaffold}")
    return scaffold


def _export_outputs(export_outputs, mode):
    if export_outputs is None or mode != ModeKeys.PREDICT:
        return export_outputs
    if not isinstance(export_outputs, dict):
        raise TypeError(f"export_outputs must be dict, given: {export_outputs}")
    from .export import ExportOutput
    for v in export_outputs.values():
        if not isinstance(v, ExportOutput):
            raise TypeError(f"Values in export_outputs must be ExportOutput objects. Given: "
                            f"{export_outputs}")
    return export_outputs


_FIELDS = ("mode", "predictions", "loss", "train_op", "eval_metric_ops", "export_outputs",
           "training_chief_hooks", "training_hooks", "scaffold", "evaluation_hooks",
           "prediction_hooks")


class EstimatorSpec(collections.namedtuple("EstimatorSpec", _FIELDS)):
    """The ops and objects a ``model_fn`` returns for one mode (TF 1.x's
    ``tf.estimator.EstimatorSpec``). ``TRAIN`` needs ``loss`` and ``train_op``, ``EVAL``
    needs ``loss``, ``PREDICT`` needs ``predictions`` (a tensor or a dict of tensors).
    ``eval_metric_ops`` maps names to ``(value, update_op)`` pairs (``tv.metrics``).
    A missing field is ``ValueError``; a field of the wrong kind is ``TypeError``; a tensor
    from another graph than the default is ``ValueError``. A loss of shape ``[1]`` is
    reshaped to a scalar."""

    def __new__(cls, mode, predictions=None, loss=None, train_op=None, eval_metric_ops=None,
                export_outputs=None, training_chief_hooks=None, training_hooks=None,
                scaffold=None, evaluation_hooks=None, prediction_hooks=None):
        if mode not in (ModeKeys.TRAIN, ModeKeys.EVAL, ModeKeys.PREDICT):
            raise ValueError(f"mode={mode!r} unrecognized: use tf.estimator.ModeKeys "
                             "(TRAIN, EVAL or PREDICT).")
        train_op = _train_op(train_op, mode)
        loss = _loss(loss, mode)
        predictions = _predictions(predictions, mode)
        export_outputs = _export_outputs(export_outputs, mode)
        return super().__new__(
            cls, mode=mode, predictions=predictions, loss=loss, train_op=train_op,
            eval_metric_ops=_eval_metric_ops(eval_metric_ops), export_outputs=export_outputs,
            training_chief_hooks=_hooks(training_chief_hooks),
            training_hooks=_hooks(training_hooks), scaffold=_scaffold(scaffold),
            evaluation_hooks=_hooks(evaluation_hooks),
            prediction_hooks=_hooks(prediction_hooks))

    def _replace(self, **kwds):
        """A new, validated spec with some fields replaced (the mode cannot change)."""
        if "mode" in kwds and kwds["mode"] != self.mode:
            raise ValueError("mode of EstimatorSpec cannot be changed.")
        fields = dict(zip(self._fields, self))
        fields.update(kwds)
        return EstimatorSpec(**fields)
