"""What ``tv.metrics``' modules share: the metric variables (in ``LOCAL_VARIABLES`` and
``metric_variables``), TF's shape checks and weight broadcasting, and the collections a
metric's value and update op are added to.
"""
from __future__ import annotations

import logging

from ..framework import dtypes as _dt
from .. import ops as O
from ..framework.graph import Tensor, control_dependencies
from ..framework.graph_keys import GraphKeys, add_to_collections
from ..framework.tensor_conversion import convert_to_tensor
from ..ops.state.variables import Variable


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
