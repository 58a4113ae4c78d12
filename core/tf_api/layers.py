"""``tv.layers``: TF 1.x's functional layers (``dense``, ``conv1d``, ``conv2d``,
``separable_conv1d``/``2d``, ``conv2d_transpose``, ``max_pooling1d``/``2d``,
``average_pooling1d``/``2d``, ``dropout``, ``batch_normalization``, ``flatten``) and their
classes.

Each layer with weights opens ``variable_scope(name, default_name=<layer>)`` and makes its
variables with ``get_variable`` ("dense/kernel", "dense_1/kernel" …), so ``reuse=True`` or a
``variable_scope`` with reuse shares them, as in TF. ``training`` may be a Python bool or a bool
tensor (a placeholder fed True while training).

>>> import numpy as np, tensorvm as tv
>>> x = tv.placeholder(tv.float32, [None, 3])
>>> y = tv.layers.dense(x, 2, kernel_initializer=tv.ones_initializer())
>>> with tv.Session() as s:
...     _ = s.run(tv.global_variables_initializer()); s.run(y, {x: [[1, 2, 3]]})
array([[6., 6.]], dtype=float32)
"""
from __future__ import annotations

import numpy as np

from ..framework.errors import InvalidArgumentError
from ..framework.graph import get_default_graph
from ..framework.graph_keys import GraphKeys
from ..ops.state.init_ops import Ones, Zeros
from ..framework.tensor_conversion import convert_to_tensor
from ..ops.state.variable_scope import get_variable, variable_scope

__all__ = ["dense", "conv2d", "max_pooling2d", "average_pooling2d", "dropout",
           "batch_normalization", "flatten", "Dense", "Conv2D", "MaxPooling2D",
           "AveragePooling2D", "Dropout", "BatchNormalization", "Flatten",
           "conv2d_transpose", "Conv2DTranspose", "conv1d", "Conv1D", "separable_conv2d",
           "SeparableConv2D", "separable_conv1d", "SeparableConv1D", "max_pooling1d",
           "MaxPooling1D", "average_pooling1d", "AveragePooling1D"]


def _pair(v, what):
    t = (v, v) if isinstance(v, (int, np.integer)) else tuple(v)
    if len(t) != 2 or any(int(d) < 1 for d in t):
        raise InvalidArgumentError(f"{what} must be an int or a pair of positive ints, got {v!r}")
    return tuple(int(d) for d in t)


def _nhwc(data_format):
    if data_format not in ("channels_last", "channels_first"):
        raise InvalidArgumentError(f"data_format must be 'channels_last' or 'channels_first', "
                                   f"got {data_format!r}")
    return "NHWC" if data_format == "channels_last" else "NCHW"


def _padding(padding):
    p = str(padding).upper()
    if p not in ("SAME", "VALID"):
        raise InvalidArgumentError(f"padding must be 'valid' or 'same', got {padding!r}")
    return p


def _known(dim, what, layer):
    if dim is None:
        raise InvalidArgumentError(f"{layer}: the {what} dimension of the inputs should be "
                                   "defined. Found `None`.")
    return int(dim)


def _activate(y, activation):
    return activation(y) if activation is not None else y


def dense(inputs, units, activation=None, use_bias=True, kernel_initializer=None,
          bias_initializer=Zeros(), kernel_regularizer=None, bias_regularizer=None,
          activity_regularizer=None, kernel_constraint=None, bias_constraint=None,
          trainable=True, name=None, reuse=None):
    """``activation(inputs @ kernel + bias)`` over the last dimension of ``inputs``."""
    from ..ops.array.array_ops import reshape
    from ..ops.math.math_ops import matmul
    from ..ops.nn.nn_ops import bias_add
    x = convert_to_tensor(inputs)
    if x._shape is None or not x._shape:
        raise InvalidArgumentError(f"dense: inputs must have rank >= 2, got shape {x._shape}")
    n_in = _known(x._shape[-1], "last", "dense")
    with variable_scope(name, default_name="dense", values=[x], reuse=reuse):
        kernel = get_variable("kernel", [n_in, int(units)], x.dtype, kernel_initializer,
                              kernel_regularizer, trainable)
        if len(x._shape) == 2:
            y = matmul(x, kernel)
        else:
            lead = list(x._shape[:-1])
            if sum(d is None for d in lead) > 1:
                raise InvalidArgumentError(f"dense: inputs of shape {lead + [n_in]} need all "
                                           "but one leading dimension known")
            flat = matmul(reshape(x, [-1, n_in]), kernel)
            y = reshape(flat, [-1 if d is None else int(d) for d in lead] + [int(units)])
        if use_bias:
            bias = get_variable("bias", [int(units)], x.dtype, bias_initializer,
                                bias_regularizer, trainable)
            y = bias_add(y, bias)
        return _regularize(_activate(y, activation), activity_regularizer)


def _regularize(y, activity_regularizer):
    if activity_regularizer is not None:
        loss = activity_regularizer(y)
        if loss is not None:
            get_default_graph().add_to_collection(GraphKeys.REGULARIZATION_LOSSES, loss)
    return y


def conv2d(inputs, filters, kernel_size, strides=(1, 1), padding="valid",
           data_format="channels_last", dilation_rate=(1, 1), activation=None, use_bias=True,
           kernel_initializer=None, bias_initializer=Zeros(), kernel_regularizer=None,
           bias_regularizer=None, activity_regularizer=None, kernel_constraint=None,
           bias_constraint=None, trainable=True, name=None, reuse=None):
    """2-D convolution with a ``[kh, kw, in_channels, filters]`` kernel, plus bias."""
    from ..ops.nn.nn_conv import conv2d as nn_conv2d
    from ..ops.nn.nn_ops import bias_add
    x = convert_to_tensor(inputs)
    df = _nhwc(data_format)
    if x._shape is None or len(x._shape) != 4:
        raise InvalidArgumentError(f"conv2d: inputs must be 4-D, got shape {x._shape}")
    c_in = _known(x._shape[3 if df == "NHWC" else 1], "channel", "conv2d")
    (kh, kw), (sh, sw) = _pair(kernel_size, "kernel_size"), _pair(strides, "strides")
    dh, dw = _pair(dilation_rate, "dilation_rate")
    with variable_scope(name, default_name="conv2d", values=[x], reuse=reuse):
        kernel = get_variable("kernel", [kh, kw, c_in, int(filters)], x.dtype,
                              kernel_initializer, kernel_regularizer, trainable)
        spec = (lambda a, b: [1, a, b, 1]) if df == "NHWC" else (lambda a, b: [1, 1, a, b])
        y = nn_conv2d(x, kernel, spec(sh, sw), _padding(padding), data_format=df,
                      dilations=spec(dh, dw))
        if use_bias:
            bias = get_variable("bias", [int(filters)], x.dtype, bias_initializer,
                                bias_regularizer, trainable)
            y = bias_add(y, bias, data_format=df)
        return _regularize(_activate(y, activation), activity_regularizer)


def _transposed_size(n, k, s, padding):
    if n is None:
        return None
    return n * s if padding == "SAME" else n * s + max(k - s, 0)


def conv2d_transpose(inputs, filters, kernel_size, strides=(1, 1), padding="valid",
                     data_format="channels_last", activation=None, use_bias=True,
                     kernel_initializer=None, bias_initializer=Zeros(),
                     kernel_regularizer=None, bias_regularizer=None, activity_regularizer=None,
                     kernel_constraint=None, bias_constraint=None, trainable=True, name=None,
                     reuse=None):
    """Transposed 2-D convolution of ``inputs`` to ``filters`` channels, plus bias: a
    ``[kh, kw, filters, in_channels]`` kernel; the output is ``in * stride`` wide with "same"
    padding, ``in * stride + max(k - stride, 0)`` with "valid".

    >>> import tensorvm as tv
    >>> x = tv.placeholder(tv.float32, [None, 7, 7, 8])
    >>> tv.layers.conv2d_transpose(x, 4, 5, strides=2, padding="same").shape.as_list()
    [None, 14, 14, 4]
    """
    from ..ops import shape, stack
    from ..ops.nn.nn_deconv import conv2d_transpose as nn_conv2d_transpose
    from ..ops.nn.nn_ops import bias_add
    x = convert_to_tensor(inputs)
    df = _nhwc(data_format)
    if x._shape is None or len(x._shape) != 4:
        raise InvalidArgumentError(f"conv2d_transpose: inputs must be 4-D, got shape "
                                   f"{x._shape}")
    c, (hs, ws) = (3, (1, 2)) if df == "NHWC" else (1, (2, 3))
    c_in = _known(x._shape[c], "channel", "conv2d_transpose")
    (kh, kw), (sh, sw) = _pair(kernel_size, "kernel_size"), _pair(strides, "strides")
    pad = _padding(padding)
    oh = _transposed_size(x._shape[hs], kh, sh, pad)
    ow = _transposed_size(x._shape[ws], kw, sw, pad)
    dyn = shape(x)
    dims = [None] * 4
    dims[0] = x._shape[0] if x._shape[0] is not None else dyn[0]
    dims[c] = int(filters)
    dims[hs] = oh if oh is not None else dyn[hs] * sh + (0 if pad == "SAME" else max(kh - sh, 0))
    dims[ws] = ow if ow is not None else dyn[ws] * sw + (0 if pad == "SAME" else max(kw - sw, 0))
    out_shape = dims if all(isinstance(d, int) for d in dims) else stack(dims)
    with variable_scope(name, default_name="conv2d_transpose", values=[x], reuse=reuse):
        kernel = get_variable("kernel", [kh, kw, int(filters), c_in], x.dtype,
                              kernel_initializer, kernel_regularizer, trainable)
        y = nn_conv2d_transpose(x, kernel, out_shape, [sh, sw], pad, data_format=df)
        if use_bias:
            bias = get_variable("bias", [int(filters)], x.dtype, bias_initializer,
                                bias_regularizer, trainable)
            y = bias_add(y, bias, data_format=df)
        return _regularize(_activate(y, activation), activity_regularizer)


def _pool(kind, inputs, pool_size, strides, padding, data_format, name):
    from ..ops.nn.nn_conv import avg_pool, max_pool
    df = _nhwc(data_format)
    (ph, pw), (sh, sw) = _pair(pool_size, "pool_size"), _pair(strides, "strides")
    spec = (lambda a, b: [1, a, b, 1]) if df == "NHWC" else (lambda a, b: [1, 1, a, b])
    fn = max_pool if kind == "max" else avg_pool
    return fn(inputs, spec(ph, pw), spec(sh, sw), _padding(padding), data_format=df,
              name=name)


def max_pooling2d(inputs, pool_size, strides, padding="valid", data_format="channels_last",
                  name=None):
    """The maximum of each ``pool_size`` window, ``strides`` apart."""
    return _pool("max", inputs, pool_size, strides, padding, data_format, name)


def average_pooling2d(inputs, pool_size, strides, padding="valid",
                      data_format="channels_last", name=None):
    """The mean of each ``pool_size`` window (valid elements only), ``strides`` apart."""
    return _pool("avg", inputs, pool_size, strides, padding, data_format, name)


def dropout(inputs, rate=0.5, noise_shape=None, seed=None, training=False, name=None):
    """Zero a ``rate`` fraction of the inputs (scaling the rest by ``1 / (1 - rate)``) when
    ``training`` — a Python bool or a bool tensor; the inputs pass unchanged otherwise."""
    from ..ops.math.math_ops import cast
    from ..ops.nn.nn_ops import dropout as nn_dropout
    x = convert_to_tensor(inputs)
    if not 0.0 <= float(rate) < 1.0:
        raise InvalidArgumentError(f"dropout: rate must be in [0, 1), got {rate}")
    if isinstance(training, (bool, np.bool_)) or training is None:
        if not training or float(rate) == 0.0:
            return x
        return nn_dropout(x, rate=float(rate), noise_shape=noise_shape, seed=seed, name=name)
    t = cast(convert_to_tensor(training), x.dtype)
    return nn_dropout(x, keep_prob=1.0 - float(rate) * t, noise_shape=noise_shape, seed=seed,
                      name=name)


def flatten(inputs, name=None, data_format="channels_last"):
    """``[batch, everything else]``."""
    from ..ops.array.array_ops import reshape
    from ..ops.array.manip_ops import transpose
    x = convert_to_tensor(inputs)
    if x._shape is None:
        raise InvalidArgumentError("flatten: inputs must have a known rank")
    if data_format == "channels_first" and len(x._shape) > 2:
        x = transpose(x, [0] + list(range(2, len(x._shape))) + [1])
    rest = x._shape[1:]
    if None not in rest:
        return reshape(x, [-1, int(np.prod(rest))], name=name)
    if x._shape[0] is None:
        raise InvalidArgumentError(f"flatten: inputs of shape {list(x._shape)} need known "
                                   "dimensions after the first")
    return reshape(x, [int(x._shape[0]), -1], name=name)


def batch_normalization(inputs, axis=-1, momentum=0.99, epsilon=1e-3, center=True, scale=True,
                        beta_initializer=Zeros(), gamma_initializer=Ones(),
                        moving_mean_initializer=Zeros(), moving_variance_initializer=Ones(),
                        beta_regularizer=None, gamma_regularizer=None, training=False,
                        trainable=True, name=None, reuse=None, fused=None, **_):
    """Normalise over every axis but ``axis`` with the batch's moments when ``training``, else
    with the moving averages; in training, ops that update the moving averages
    (``moving = moving - (moving - batch) * (1 - momentum)``) go to ``GraphKeys.UPDATE_OPS``:
    run them with the train op (``tf.control_dependencies``), as in TF. As TF's fused path does,
    4-D inputs update the moving variance with the unbiased batch variance."""
    from ..ops.array.array_ops import reshape
    from ..ops.array.fill_ops import size
    from ..ops.math.math_ops import cast
    from ..ops.nn.nn_norm import batch_normalization as nn_bn
    from ..ops.nn.nn_ops import moments
    x = convert_to_tensor(inputs)
    if x._shape is None:
        raise InvalidArgumentError("batch_normalization: inputs must have a known rank")
    rank = len(x._shape)
    ax = axis % rank if -rank <= axis < rank else None
    if ax is None:
        raise InvalidArgumentError(f"batch_normalization: axis {axis} out of range for rank "
                                   f"{rank}")
    c = _known(x._shape[ax], "channel", "batch_normalization")
    red = [i for i in range(rank) if i != ax]
    bshape = [1] * rank
    bshape[ax] = c
    with variable_scope(name, default_name="batch_normalization", values=[x], reuse=reuse):
        gamma = get_variable("gamma", [c], x.dtype, gamma_initializer, gamma_regularizer,
                             trainable) if scale else None
        beta = get_variable("beta", [c], x.dtype, beta_initializer, beta_regularizer,
                            trainable) if center else None
        mm = get_variable("moving_mean", [c], x.dtype, moving_mean_initializer,
                          trainable=False)
        mv = get_variable("moving_variance", [c], x.dtype, moving_variance_initializer,
                          trainable=False)
        if isinstance(training, (bool, np.bool_)) and not training:
            mean, var = mm.value(), mv.value()
        else:
            bmean, bvar = moments(x, red)
            unbiased = bvar
            if (fused is None and rank == 4) or fused:
                n = cast(size(x), x.dtype) / float(c)
                unbiased = bvar * n / (n - 1.0)
            if isinstance(training, (bool, np.bool_)):
                mean, var, decay = bmean, bvar, convert_to_tensor(1.0 - momentum, dtype=x.dtype)
            else:
                t = cast(convert_to_tensor(training), x.dtype)
                mean, var = t * bmean + (1.0 - t) * mm.value(), t * bvar + (1.0 - t) * mv.value()
                decay = (1.0 - momentum) * t
            g = get_default_graph()
            g.add_to_collection(GraphKeys.UPDATE_OPS,
                                mm.assign_sub((mm.value() - bmean) * decay))
            g.add_to_collection(GraphKeys.UPDATE_OPS,
                                mv.assign_sub((mv.value() - unbiased) * decay))
        return nn_bn(x, reshape(mean, bshape), reshape(var, bshape),
                     None if beta is None else reshape(beta, bshape),
                     None if gamma is None else reshape(gamma, bshape), epsilon)


# ---- 1-D and separable convolutions, 1-D pooling ---------------------------------------------
def _nwc(data_format):
    return "NWC" if _nhwc(data_format) == "NHWC" else "NCW"


def _one(v, what):
    t = (v,) if isinstance(v, (int, np.integer)) else tuple(v)
    if len(t) != 1 or int(t[0]) < 1:
        raise InvalidArgumentError(f"{what} must be an int or a 1-tuple of a positive int, got "
                                   f"{v!r}")
    return int(t[0])


def conv1d(inputs, filters, kernel_size, strides=1, padding="valid",
           data_format="channels_last", dilation_rate=1, activation=None, use_bias=True,
           kernel_initializer=None, bias_initializer=Zeros(), kernel_regularizer=None,
           bias_regularizer=None, activity_regularizer=None, kernel_constraint=None,
           bias_constraint=None, trainable=True, name=None, reuse=None):
    """1-D convolution of ``[batch, width, channels]`` with a ``[k, in_channels, filters]``
    kernel, plus bias."""
    from ..ops.nn.nn_conv_ext import conv1d as nn_conv1d
    from ..ops.nn.nn_ops import bias_add
    x = convert_to_tensor(inputs)
    df = _nwc(data_format)
    if x._shape is None or len(x._shape) != 3:
        raise InvalidArgumentError(f"conv1d: inputs must be 3-D, got shape {x._shape}")
    c_in = _known(x._shape[2 if df == "NWC" else 1], "channel", "conv1d")
    k, s, d = (_one(kernel_size, "kernel_size"), _one(strides, "strides"),
               _one(dilation_rate, "dilation_rate"))
    with variable_scope(name, default_name="conv1d", values=[x], reuse=reuse):
        kernel = get_variable("kernel", [k, c_in, int(filters)], x.dtype, kernel_initializer,
                              kernel_regularizer, trainable)
        y = nn_conv1d(x, kernel, s, _padding(padding), data_format=df, dilations=d)
        if use_bias:
            bias = get_variable("bias", [int(filters)], x.dtype, bias_initializer,
                                bias_regularizer, trainable)
            y = bias_add(y, bias, data_format="NHWC" if df == "NWC" else "NCHW")
        return _regularize(_activate(y, activation), activity_regularizer)


def separable_conv2d(inputs, filters, kernel_size, strides=(1, 1), padding="valid",
                     data_format="channels_last", dilation_rate=(1, 1), depth_multiplier=1,
                     activation=None, use_bias=True, depthwise_initializer=None,
                     pointwise_initializer=None, bias_initializer=Zeros(),
                     depthwise_regularizer=None, pointwise_regularizer=None,
                     bias_regularizer=None, activity_regularizer=None,
                     depthwise_constraint=None, pointwise_constraint=None,
                     bias_constraint=None, trainable=True, name=None, reuse=None):
    """A depthwise convolution (``depthwise_kernel`` ``[kh, kw, in, depth_multiplier]``), then
    a 1x1 convolution (``pointwise_kernel`` ``[1, 1, in * depth_multiplier, filters]``), plus
    bias."""
    from ..ops.nn.nn_conv_ext import separable_conv2d as nn_separable
    from ..ops.nn.nn_ops import bias_add
    x = convert_to_tensor(inputs)
    df = _nhwc(data_format)
    if x._shape is None or len(x._shape) != 4:
        raise InvalidArgumentError(f"separable_conv2d: inputs must be 4-D, got shape "
                                   f"{x._shape}")
    c_in = _known(x._shape[3 if df == "NHWC" else 1], "channel", "separable_conv2d")
    (kh, kw), (sh, sw) = _pair(kernel_size, "kernel_size"), _pair(strides, "strides")
    rate = _pair(dilation_rate, "dilation_rate")
    m = int(depth_multiplier)
    with variable_scope(name, default_name="separable_conv2d", values=[x], reuse=reuse):
        dk = get_variable("depthwise_kernel", [kh, kw, c_in, m], x.dtype,
                          depthwise_initializer, depthwise_regularizer, trainable)
        pk = get_variable("pointwise_kernel", [1, 1, c_in * m, int(filters)], x.dtype,
                          pointwise_initializer, pointwise_regularizer, trainable)
        spec = [1, sh, sw, 1] if df == "NHWC" else [1, 1, sh, sw]
        y = nn_separable(x, dk, pk, spec, _padding(padding), rate=rate, data_format=df)
        if use_bias:
            bias = get_variable("bias", [int(filters)], x.dtype, bias_initializer,
                                bias_regularizer, trainable)
            y = bias_add(y, bias, data_format=df)
        return _regularize(_activate(y, activation), activity_regularizer)


def separable_conv1d(inputs, filters, kernel_size, strides=1, padding="valid",
                     data_format="channels_last", dilation_rate=1, depth_multiplier=1,
                     activation=None, use_bias=True, depthwise_initializer=None,
                     pointwise_initializer=None, bias_initializer=Zeros(),
                     depthwise_regularizer=None, pointwise_regularizer=None,
                     bias_regularizer=None, activity_regularizer=None,
                     depthwise_constraint=None, pointwise_constraint=None,
                     bias_constraint=None, trainable=True, name=None, reuse=None):
    """:func:`separable_conv2d` over ``[batch, width, channels]`` (a height of 1, as TF
    computes it); its kernels are ``[1, k, in, depth_multiplier]`` and ``[1, 1, in * m,
    filters]``."""
    from ..ops.array.manip_ops import expand_dims, squeeze
    x = convert_to_tensor(inputs)
    if x._shape is None or len(x._shape) != 3:
        raise InvalidArgumentError(f"separable_conv1d: inputs must be 3-D, got shape "
                                   f"{x._shape}")
    axis = 1 if _nwc(data_format) == "NWC" else 2
    with variable_scope(name, default_name="separable_conv1d", values=[x],
                        reuse=reuse) as scope:
        y = separable_conv2d(
            expand_dims(x, axis), filters, (1, _one(kernel_size, "kernel_size")),
            (1, _one(strides, "strides")), padding, data_format,
            (1, _one(dilation_rate, "dilation_rate")), depth_multiplier, activation, use_bias,
            depthwise_initializer, pointwise_initializer, bias_initializer,
            depthwise_regularizer, pointwise_regularizer, bias_regularizer,
            activity_regularizer, trainable=trainable, name=scope, reuse=reuse)
    return squeeze(y, [axis])


def _pool1d(kind, inputs, pool_size, strides, padding, data_format, name):
    from ..ops.nn.nn_conv_ext import avg_pool1d, max_pool1d
    fn = max_pool1d if kind == "max" else avg_pool1d
    return fn(inputs, _one(pool_size, "pool_size"), _one(strides, "strides"),
              _padding(padding), data_format=_nwc(data_format), name=name)


def max_pooling1d(inputs, pool_size, strides, padding="valid", data_format="channels_last",
                  name=None):
    """The maximum of each ``pool_size`` window of ``[batch, width, channels]``."""
    return _pool1d("max", inputs, pool_size, strides, padding, data_format, name)


def average_pooling1d(inputs, pool_size, strides, padding="valid",
                      data_format="channels_last", name=None):
    """The mean of each ``pool_size`` window of ``[batch, width, channels]``."""
    return _pool1d("avg", inputs, pool_size, strides, padding, data_format, name)


# ---- classes ----------------------------------------------------------------------------------
class _Layer:
    """A layer object: the first call makes its variables in a new variable scope (the layer's
    name, else a unique default), later calls reuse them. ``variables`` lists them."""

    _fn: staticmethod  # the functional layer (dense, conv2d, ...), set by _layer_class
    _default = "layer"
    _has_vars = True

    def __init__(self, *args, name=None, **kwargs):
        self._args, self._kwargs, self.name = args, kwargs, name
        self._scope = None
        self.variables: list = []

    def __call__(self, inputs, **call_kwargs):
        from ..ops.state.variables import global_variables
        kw = {**self._kwargs, **call_kwargs}
        if not self._has_vars:
            return type(self)._fn(inputs, *self._args, name=self.name, **kw)
        if self._scope is not None:
            return type(self)._fn(inputs, *self._args, name=self._scope, reuse=True, **kw)
        before = set(map(id, global_variables()))
        with variable_scope(self.name, default_name=self._default) as scope:
            self._scope = scope
            out = type(self)._fn(inputs, *self._args, name=scope, **kw)
        self.variables = [v for v in global_variables() if id(v) not in before]
        for v in self.variables:  # layer.kernel, layer.bias, layer.gamma … as in TF
            setattr(self, v.op.name.rsplit("/", 1)[-1], v)
        return out

    apply = __call__

    @property
    def trainable_variables(self):
        from ..ops.state.variables import trainable_variables
        ids = set(map(id, trainable_variables()))
        return [v for v in self.variables if id(v) in ids]

    trainable_weights = trainable_variables

    @property
    def weights(self):
        return list(self.variables)

    def __repr__(self):
        return f"<tv.layers.{type(self).__name__} {self.name or self._default!r}>"


def _layer_class(cls_name, fn, default, has_vars=True):
    return type(cls_name, (_Layer,), {"_fn": staticmethod(fn), "_default": default,
                                      "_has_vars": has_vars,
                                      "__doc__": f"Object form of :func:`{fn.__name__}`."})


Dense = _layer_class("Dense", dense, "dense")
Conv2D = _layer_class("Conv2D", conv2d, "conv2d")
Conv2DTranspose = _layer_class("Conv2DTranspose", conv2d_transpose, "conv2d_transpose")
BatchNormalization = _layer_class("BatchNormalization", batch_normalization,
                                  "batch_normalization")
MaxPooling2D = _layer_class("MaxPooling2D", max_pooling2d, "max_pooling2d", False)
AveragePooling2D = _layer_class("AveragePooling2D", average_pooling2d, "average_pooling2d",
                                False)
Dropout = _layer_class("Dropout", dropout, "dropout", False)
Flatten = _layer_class("Flatten", flatten, "flatten", False)

Conv1D = _layer_class("Conv1D", conv1d, "conv1d")
SeparableConv2D = _layer_class("SeparableConv2D", separable_conv2d, "separable_conv2d")
SeparableConv1D = _layer_class("SeparableConv1D", separable_conv1d, "separable_conv1d")
MaxPooling1D = _layer_class("MaxPooling1D", max_pooling1d, "max_pooling1d", False)
AveragePooling1D = _layer_class("AveragePooling1D", average_pooling1d, "average_pooling1d",
                                False)
