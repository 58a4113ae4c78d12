"""``tv.contrib``: the parts of TF 1.x's ``tf.contrib`` that its example programs use.

* ``tv.contrib.rnn``: the cells of :mod:`tensorvm.tf_api.rnn_cell` and the functions of
  :mod:`tensorvm.tf_api.rnn` (``from tensorvm.tf_api.contrib import rnn; rnn.BasicLSTMCell(…)``,
  ``rnn.static_rnn``, ``rnn.static_bidirectional_rnn``);
* ``tv.contrib.layers``: ``flatten``, ``fully_connected``, ``xavier_initializer``;
* ``tv.contrib.data``: TF 1.4-1.12's spelling of ``tf.data`` (``Dataset``,
  ``batch_and_drop_remainder``, ``map_and_batch``, ``shuffle_and_repeat``...);
* ``tv.contrib.tensorboard.plugins.projector``: the embedding projector's config
  (:mod:`tensorvm.tf_api.projector`);
* ``tv.contrib.lookup``: the lookup tables of :mod:`tensorvm.tf_api.lookup`.

Everything else of ``tf.contrib`` (factorization, tensor_forest, boosted_trees, learn, eager)
is not part of tensorvm; asking for it says so.

>>> import tensorvm as tv
>>> from tensorvm.tf_api.contrib import rnn
>>> rnn.BasicLSTMCell is tv.nn.rnn_cell.BasicLSTMCell
True
"""
from __future__ import annotations

import sys as _sys
import types as _types

from . import rnn as _rnn
from . import rnn_cell as _rnn_cell

__all__ = ["data", "layers", "rnn"]


def _module(name: str, doc: str, members: dict) -> _types.ModuleType:
    mod = _types.ModuleType(f"{__name__}.{name}", doc)
    mod.__dict__.update(members)
    mod.__all__ = sorted(members)
    _sys.modules[mod.__name__] = mod  # ``import tensorvm.tf_api.contrib.rnn`` works too
    return mod


rnn = _module("rnn", "TF 1.x's ``tf.contrib.rnn``: recurrent cells and networks.",
              {**{n: getattr(_rnn_cell, n) for n in _rnn_cell.__all__},
               **{n: getattr(_rnn, n) for n in _rnn.__all__}})


def fully_connected(inputs, num_outputs, activation_fn="relu", normalizer_fn=None,
                    normalizer_params=None, weights_initializer=None,
                    weights_regularizer=None, biases_initializer="zeros",
                    biases_regularizer=None, reuse=None, variables_collections=None,
                    outputs_collections=None, trainable=True, scope=None):
    """``activation_fn(inputs @ weights + biases)`` (ReLU by default, as TF's), variables
    under ``fully_connected/weights`` and ``.../biases``."""
    from ..framework.errors import InvalidArgumentError
    from ..ops.state.init_ops import Zeros
    from ..ops import matmul
    from ..ops.nn.nn_ops import bias_add, relu
    from ..framework.tensor_conversion import convert_to_tensor
    from ..ops.state.variable_scope import get_variable, variable_scope
    if normalizer_fn is not None:
        raise InvalidArgumentError("fully_connected: normalizer_fn is not supported; apply "
                                   "tv.layers.batch_normalization to the output instead")
    x = convert_to_tensor(inputs)
    if x._shape is None or len(x._shape) != 2 or x._shape[1] is None:
        raise InvalidArgumentError(f"fully_connected: inputs must be [batch, depth] with a "
                                   f"known depth, got shape {x._shape}")
    with variable_scope(scope, default_name="fully_connected", values=[x], reuse=reuse):
        w = get_variable("weights", [int(x._shape[1]), int(num_outputs)], x.dtype,
                         weights_initializer, weights_regularizer, trainable)
        y = matmul(x, w)
        if biases_initializer is not None:
            init = Zeros() if biases_initializer == "zeros" else biases_initializer
            b = get_variable("biases", [int(num_outputs)], x.dtype, init, biases_regularizer,
                             trainable)
            y = bias_add(y, b)
        act = relu if activation_fn == "relu" else activation_fn
        return act(y) if act is not None else y


def _xavier_initializer(uniform=True, seed=None, dtype=None):
    """Glorot's initializer (``xavier_initializer``): uniform or normal."""
    from ..ops.state.init_ops import GlorotNormal, GlorotUniform
    return GlorotUniform(seed=seed) if uniform else GlorotNormal(seed=seed)


def _flatten(inputs, outputs_collections=None, scope=None):
    """``[batch, ...]`` to ``[batch, k]``."""
    from .layers import flatten as _f
    return _f(inputs, name=scope)


layers = _module("layers", "TF 1.x's ``tf.contrib.layers`` (the commonly used part).",
                 {"flatten": _flatten, "fully_connected": fully_connected,
                  "xavier_initializer": _xavier_initializer,
                  "xavier_initializer_conv2d": _xavier_initializer})


def _data_module():
    from . import data as _data
    members = {n: getattr(_data, n) for n in ("Dataset", "Iterator", "TextLineDataset",
                                             "TFRecordDataset")}
    members.update({n: getattr(_data.experimental, n) for n in dir(_data.experimental)
                    if not n.startswith("_")})
    return _module("data", "TF 1.4-1.12's ``tf.contrib.data``: the datasets of "
                           ":mod:`tensorvm.tf_api.data` and the helpers of ``tf.data.experimental``.",
                   members)


def _tensorboard_module():
    from . import projector
    _sys.modules[f"{__name__}.tensorboard.plugins.projector"] = projector
    plugins = _module("tensorboard.plugins", "TF 1.x's ``tf.contrib.tensorboard.plugins``: "
                      "the embedding projector's config.", {"projector": projector})
    return _module("tensorboard", "TF 1.x's ``tf.contrib.tensorboard``.", {"plugins": plugins})


def __getattr__(name):
    if name == "data":  # built on first use: tensorvm.tf_api.data imports much of tensorvm
        mod = globals()["data"] = _data_module()
        return mod
    if name == "tensorboard":  # tf.contrib.tensorboard.plugins.projector
        mod = globals()["tensorboard"] = _tensorboard_module()
        return mod
    if name == "lookup":  # tf.contrib.lookup: tensorvm.tf_api.lookup
        from . import lookup
        _sys.modules[f"{__name__}.lookup"] = lookup
        globals()["lookup"] = lookup
        return lookup
    raise AttributeError(f"module 'tensorvm.tf_api.contrib' has no attribute {name!r}: tensorvm "
                         f"provides tf.contrib.rnn, tf.contrib.layers, tf.contrib.data, "
                         f"tf.contrib.lookup and tf.contrib.tensorboard.plugins.projector only")
