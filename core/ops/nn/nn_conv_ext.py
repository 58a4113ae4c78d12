"""More of ``tv.nn``'s convolutions and activations, as TF 1.x has them: depthwise convolution
(``DepthwiseConv2dNative`` with its two gradients), and, built from it and ``Conv2D`` as TF
builds them in Python, ``separable_conv2d``, ``conv1d``, ``atrous_conv2d`` and ``convolution``;
``selu``, ``swish``, ``crelu``, ``log_poisson_loss``, the moments helpers
(``sufficient_statistics``, ``normalize_moments``, ``weighted_moments``) and the pooling aliases
(``max_pool2d``, ``avg_pool1d`` …).

A depthwise convolution works tap by tap, like pooling (:mod:`tensorvm.ops.nn.nn_conv`): each of
the ``KH * KW`` taps is a strided view ``[N, OH, OW, C]`` of the padded input, multiplied by its
``[C, M]`` filter slice and summed, so the forward pass and both gradients are ``KH * KW``
whole-array operations (no loop over pixels or channels), in the namespace of the input.

>>> import numpy as np, tensorvm as tv
>>> x = tv.constant(np.ones((1, 3, 3, 2), np.float32))
>>> f = tv.constant(np.ones((2, 2, 2, 1), np.float32))
>>> with tv.Session() as s: s.run(tv.nn.depthwise_conv2d(x, f, [1, 1, 1, 1], "VALID"))[0, :, :, 0]
array([[4., 4.],
       [4., 4.]], dtype=float32)
"""
from __future__ import annotations

import math

import numpy as np

from ...framework import dtypes as _dt
from ...framework.errors import InvalidArgumentError
from ...framework.graph import name_scope
from ...vm.kernels.array_api import array_namespace
from ...framework.op_def_library import apply_op
from ...framework.op_registry import register_kernel, register_op
from ...framework.tensor_conversion import convert_to_tensor
from .nn_conv import (
    _check_geometry,
    _from_nhwc,
    _geometry,
    _hw,
    _nhwc,
    _shape_from_nhwc,
    _spec,
    avg_pool,
    check_filter,
    conv2d,
    max_pool,
)

__all__: list[str] = []
NN_ALL = ["depthwise_conv2d", "depthwise_conv2d_native", "depthwise_conv2d_native_backprop_input",
          "depthwise_conv2d_native_backprop_filter", "separable_conv2d", "conv1d",
          "atrous_conv2d", "convolution", "selu", "swish", "silu", "crelu", "log_poisson_loss",
          "sufficient_statistics", "normalize_moments", "weighted_moments", "max_pool2d",
          "avg_pool2d", "max_pool1d", "avg_pool1d", "max_pool_v2", "avg_pool_v2"]


# ---- DepthwiseConv2dNative --------------------------------------------------------------------

def _taps(kh, kw, sh, sw, dh, dw, oh, ow):
    """The (i, j, rows, cols) of each filter tap's strided view of the padded input."""
    for i in range(kh):
        for j in range(kw):
            yield (i, j, slice(i * dh, i * dh + (oh - 1) * sh + 1, sh),
                   slice(j * dw, j * dw + (ow - 1) * sw + 1, sw))


def _setup(x_shape, f, strides, padding, df, dilations):
    kh, kw = f.shape[:2]
    probe = np.empty(x_shape, bool)
    return (kh, kw) + _geometry(probe, kh, kw, strides, padding, df, dilations)


def _padded(xp, x, ph, pw):
    if ph == (0, 0) and pw == (0, 0):
        return x
    return xp.pad(x, ((0, 0), ph, pw, (0, 0)))


def _depthwise_kernel(x, f, *, strides, padding, data_format, dilations):
    xp = array_namespace(x, f)
    x = _nhwc(x, data_format)
    if f.shape[2] != x.shape[3]:
        raise InvalidArgumentError(f"DepthwiseConv2dNative: input depth {x.shape[3]} != filter "
                                   f"in_channels {f.shape[2]}")
    kh, kw, sh, sw, dh, dw, oh, ow, ph, pw = _setup(x.shape, f, _nhwc4(strides, data_format),
                                                    padding, "NHWC",
                                                    _nhwc4(dilations, data_format))
    n, c, m = x.shape[0], x.shape[3], f.shape[3]
    xpad = _padded(xp, x, ph, pw)
    out = xp.zeros((n, oh, ow, c, m), np.result_type(x.dtype, f.dtype))
    for i, j, rows, cols in _taps(kh, kw, sh, sw, dh, dw, oh, ow):
        out += xpad[:, rows, cols, :, None] * f[i, j]
    return _from_nhwc(out.reshape(n, oh, ow, c * m).astype(x.dtype, copy=False), data_format)


def _nhwc4(v, df):
    """A 4-vector given in ``df`` order, in NHWC order."""
    return tuple(v) if df == "NHWC" else (v[0], v[2], v[3], v[1])


def _backprop_input_kernel(input_sizes, f, g, *, strides, padding, data_format, dilations):
    xp = array_namespace(g, f)
    sizes = tuple(int(v) for v in np.asarray(input_sizes.get() if hasattr(input_sizes, "get")
                                             else input_sizes).reshape(-1))
    xs = sizes if data_format == "NHWC" else (sizes[0], sizes[2], sizes[3], sizes[1])
    g = _nhwc(g, data_format)
    st, dl = _nhwc4(strides, data_format), _nhwc4(dilations, data_format)
    kh, kw, sh, sw, dh, dw, oh, ow, ph, pw = _setup(xs, f, st, padding, "NHWC", dl)
    n, c, m = xs[0], xs[3], f.shape[3]
    g5 = g.reshape(n, oh, ow, c, m)
    dxp = xp.zeros((n, xs[1] + ph[0] + ph[1], xs[2] + pw[0] + pw[1], c),
                   np.result_type(g.dtype, f.dtype))
    for i, j, rows, cols in _taps(kh, kw, sh, sw, dh, dw, oh, ow):
        dxp[:, rows, cols, :] += (g5 * f[i, j]).sum(axis=-1)
    dx = dxp[:, ph[0]:ph[0] + xs[1], pw[0]:pw[0] + xs[2], :]
    return _from_nhwc(dx.astype(g.dtype, copy=False), data_format)


def _backprop_filter_kernel(x, filter_sizes, g, *, strides, padding, data_format, dilations):
    xp = array_namespace(x, g)
    fs = tuple(int(v) for v in np.asarray(filter_sizes.get() if hasattr(filter_sizes, "get")
                                          else filter_sizes).reshape(-1))
    x, g = _nhwc(x, data_format), _nhwc(g, data_format)
    probe = np.empty(fs, bool)
    st, dl = _nhwc4(strides, data_format), _nhwc4(dilations, data_format)
    kh, kw, sh, sw, dh, dw, oh, ow, ph, pw = _setup(x.shape, probe, st, padding, "NHWC", dl)
    n, c, m = x.shape[0], x.shape[3], fs[3]
    g5 = g.reshape(n, oh, ow, c, m)
    xpad = _padded(xp, x, ph, pw)
    df = xp.zeros(fs, np.result_type(x.dtype, g.dtype))
    for i, j, rows, cols in _taps(kh, kw, sh, sw, dh, dw, oh, ow):
        df[i, j] = xp.einsum("nhwc,nhwcm->cm", xpad[:, rows, cols, :], g5)
    return df.astype(x.dtype, copy=False)


def _depthwise_shape(inputs, attrs):
    x, f = inputs
    op = "DepthwiseConv2dNative"
    fs = check_filter(op, x, f, "channel_multiplier")
    df = attrs["data_format"]
    k_hw = (None, None) if fs is None else tuple(
        None if k is None else (k - 1) * d + 1 for k, d in zip(fs[:2], _hw(attrs["dilations"],
                                                                            df)))
    oh, ow = _check_geometry(op, x._shape, attrs, k_hw)
    xs = x._shape
    if xs is None:
        return [(x.dtype, None)]
    c = xs[3] if df == "NHWC" else xs[1]
    if c is not None and fs is not None and fs[2] is not None and c != fs[2]:
        raise InvalidArgumentError(f"{op}: input depth must equal filter in_channels: input "
                                   f"{list(xs)} has depth {c} but filter {list(fs)} has "
                                   f"in_channels {fs[2]}")
    out_c = None if c is None or fs is None or fs[3] is None else c * fs[3]
    return [(x.dtype, _shape_from_nhwc(xs[0], oh, ow, out_c, df))]


def _attrs(op):
    return {k: op.attrs[k] for k in ("strides", "padding", "data_format", "dilations")}


def _shape_of(t):
    from ..array.array_ops import shape
    return shape(t)


def _depthwise_grad(op, g):
    x, f = op.inputs
    a = _attrs(op)
    return [apply_op("DepthwiseConv2dNativeBackpropInput", [_shape_of(x), f, g], a).outputs[0],
            apply_op("DepthwiseConv2dNativeBackpropFilter", [x, _shape_of(f), g], a).outputs[0]]


def _bi_grad(op, gg):
    # out = BackpropInput(sizes, f, g) is linear in f and in g
    _, f, g = op.inputs
    a = _attrs(op)
    return [None,
            apply_op("DepthwiseConv2dNativeBackpropFilter", [gg, _shape_of(f), g], a).outputs[0],
            apply_op("DepthwiseConv2dNative", [gg, f], a).outputs[0]]


def _bf_grad(op, gg):
    x, _, g = op.inputs
    a = _attrs(op)
    return [apply_op("DepthwiseConv2dNativeBackpropInput", [_shape_of(x), gg, g], a).outputs[0],
            None, apply_op("DepthwiseConv2dNative", [x, gg], a).outputs[0]]


def _sizes_shape(i_sizes, i_dtype):
    def shape_fn(inputs, attrs):
        from ..common import static_shape_of
        return [(inputs[i_dtype].dtype, static_shape_of(inputs[i_sizes]))]
    return shape_fn


register_op("DepthwiseConv2dNative", _depthwise_shape, _depthwise_kernel, grad=_depthwise_grad)
register_op("DepthwiseConv2dNativeBackpropInput", _sizes_shape(0, 2), _backprop_input_kernel,
            grad=_bi_grad)
register_op("DepthwiseConv2dNativeBackpropFilter", _sizes_shape(1, 2), _backprop_filter_kernel,
            grad=_bf_grad)
for _op, _k in (("DepthwiseConv2dNative", _depthwise_kernel),
                ("DepthwiseConv2dNativeBackpropInput", _backprop_input_kernel),
                ("DepthwiseConv2dNativeBackpropFilter", _backprop_filter_kernel)):
    register_kernel(_op, "GPU", _k)  # one source: the namespace of the inputs decides


def _conv_attrs(op_type, strides, padding, data_format, dilations):
    df = data_format or "NHWC"
    if not isinstance(padding, str) or padding.upper() not in ("SAME", "VALID"):
        raise InvalidArgumentError(f"{op_type}: padding must be 'SAME' or 'VALID', got "
                                   f"{padding!r}")
    return {"strides": _spec(strides, "strides", op_type, df), "padding": padding.upper(),
            "data_format": df, "dilations": _spec(dilations or 1, "dilations", op_type, df)}


def depthwise_conv2d_native(input, filter, strides, padding, data_format="NHWC",
                            dilations=(1, 1, 1, 1), name=None):
    """Depthwise convolution: each input channel ``c`` convolved with its own
    ``filter[:, :, c, :]`` (``channel_multiplier`` outputs each), giving ``C * M`` channels in
    the order ``c * M + m``."""
    input = convert_to_tensor(input)
    filter = convert_to_tensor(filter, dtype=input.dtype if not hasattr(filter, "dtype")
                               else None)
    attrs = _conv_attrs("DepthwiseConv2dNative", strides, padding, data_format, dilations)
    return apply_op("DepthwiseConv2dNative", [input, filter], attrs,
                    name=name or "DepthwiseConv2dNative").outputs[0]


def depthwise_conv2d(input, filter, strides, padding, rate=None, name=None, data_format=None,
                     dilations=None):
    """TF 1.x's ``tf.nn.depthwise_conv2d``: ``rate`` (or ``dilations``) are the [h, w]
    dilation rates (strides must then be 1)."""
    rate = dilations if rate is None else rate
    rate = (1, 1) if rate is None else tuple(int(r) for r in rate)
    if rate != (1, 1) and tuple(_spec(strides, "strides", "DepthwiseConv2dNative",
                                      data_format or "NHWC")) != (1, 1, 1, 1):
        raise InvalidArgumentError("depthwise_conv2d: strides > 1 not supported in conjunction "
                                   "with rate > 1")
    return depthwise_conv2d_native(input, filter, strides, padding, data_format or "NHWC",
                                   dilations=[1, rate[0], rate[1], 1] if (data_format or "NHWC")
                                   == "NHWC" else [1, 1, rate[0], rate[1]], name=name)


def depthwise_conv2d_native_backprop_input(input_sizes, filter, out_backprop, strides, padding,
                                           data_format="NHWC", dilations=(1, 1, 1, 1),
                                           name=None):
    """The gradient of a depthwise convolution with respect to its input of ``input_sizes``."""
    attrs = _conv_attrs("DepthwiseConv2dNative", strides, padding, data_format, dilations)
    return apply_op("DepthwiseConv2dNativeBackpropInput",
                    [convert_to_tensor(input_sizes, dtype=_dt.int32), convert_to_tensor(filter),
                     convert_to_tensor(out_backprop)], attrs, name=name).outputs[0]


def depthwise_conv2d_native_backprop_filter(input, filter_sizes, out_backprop, strides, padding,
                                            data_format="NHWC", dilations=(1, 1, 1, 1),
                                            name=None):
    """The gradient of a depthwise convolution with respect to its filter of ``filter_sizes``."""
    attrs = _conv_attrs("DepthwiseConv2dNative", strides, padding, data_format, dilations)
    return apply_op("DepthwiseConv2dNativeBackpropFilter",
                    [convert_to_tensor(input), convert_to_tensor(filter_sizes, dtype=_dt.int32),
                     convert_to_tensor(out_backprop)], attrs, name=name).outputs[0]


def separable_conv2d(input, depthwise_filter, pointwise_filter, strides, padding, rate=None,
                     name=None, data_format=None, dilations=None):
    """A depthwise convolution followed by a 1x1 ``pointwise_filter``
    ``[1, 1, C * M, out_channels]``."""
    with name_scope(name or "separable_conv2d"):
        pointwise_filter = convert_to_tensor(pointwise_filter)
        ps = pointwise_filter._shape
        if ps is not None and (len(ps) != 4 or ps[0] != 1 or ps[1] != 1):
            raise ValueError(f"separable_conv2d: pointwise_filter must be [1, 1, in, out], got "
                             f"shape {list(ps)}")
        depthwise = depthwise_conv2d(input, depthwise_filter, strides, padding, rate=rate,
                                     data_format=data_format, dilations=dilations)
        return conv2d(depthwise, pointwise_filter, [1, 1, 1, 1], "VALID",
                      data_format=data_format or "NHWC")


def conv1d(value=None, filters=None, stride=None, padding=None, use_cudnn_on_gpu=None,
           data_format=None, name=None, input=None, dilations=None):
    """1-D convolution of ``[batch, width, in]`` ("NWC") with ``filters`` ``[k, in, out]``:
    a 2-D convolution of height 1, as TF computes it."""
    from ..array.manip_ops import expand_dims, squeeze
    value = input if value is None else value
    df = data_format or "NWC"
    if df not in ("NWC", "NCW"):
        raise ValueError(f"conv1d: data_format must be 'NWC' or 'NCW', got {data_format!r}")
    with name_scope(name or "conv1d"):
        axis = 1 if df == "NWC" else 2
        x = expand_dims(convert_to_tensor(value), axis)
        f = expand_dims(convert_to_tensor(filters), 0)
        s = stride if isinstance(stride, int) else int(list(stride)[-2 if df == "NWC" else -1])
        d = 1 if dilations is None else (dilations if isinstance(dilations, int)
                                         else int(list(dilations)[-1]))
        fmt = "NHWC" if df == "NWC" else "NCHW"
        strides = [1, 1, s, 1] if fmt == "NHWC" else [1, 1, 1, s]
        dil = [1, 1, d, 1] if fmt == "NHWC" else [1, 1, 1, d]
        return squeeze(conv2d(x, f, strides, padding, data_format=fmt, dilations=dil), [axis])


def atrous_conv2d(value, filters, rate, padding, name=None):
    """A 2-D convolution with holes: the filter's taps ``rate`` apart."""
    if int(rate) < 1:
        raise ValueError(f"rate {rate} cannot be less than one")
    return conv2d(value, filters, [1, 1, 1, 1], padding, dilations=[1, int(rate), int(rate), 1],
                  name=name)


def convolution(input, filter, padding, strides=None, dilation_rate=None, name=None,
                data_format=None, filters=None, dilations=None):
    """TF's generic ``tf.nn.convolution`` for 1-D and 2-D inputs."""
    filter = filters if filter is None else filter
    dilation_rate = dilations if dilation_rate is None else dilation_rate
    x = convert_to_tensor(input)
    rank = None if x._shape is None else len(x._shape) - 2
    if rank == 1:
        return conv1d(x, filter, strides[0] if strides else 1, padding,
                      data_format="NCW" if (data_format or "").startswith("NC") else "NWC",
                      dilations=dilation_rate[0] if dilation_rate else 1, name=name)
    if rank != 2:
        raise ValueError(f"convolution: tensorvm supports 1-D and 2-D inputs here, got rank "
                         f"{None if rank is None else rank + 2}")
    s = list(strides or (1, 1))
    d = list(dilation_rate or (1, 1))
    df = data_format or "NHWC"
    return conv2d(x, filter, [1] + s + [1] if df == "NHWC" else [1, 1] + s, padding,
                  data_format=df, dilations=[1] + d + [1] if df == "NHWC" else [1, 1] + d,
                  name=name)


# ---- activations and losses ---------------------------------------------------------------------

def selu(features, name=None):
    """``scale * (x if x > 0 else alpha * (exp(x) - 1))`` with TF's self-normalising
    constants."""
    from ..math.math_ext import where
    from .nn_ops import elu
    with name_scope(name or "Selu"):
        x = convert_to_tensor(features)
        alpha, scale = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946
        return scale * where(x > 0, x, alpha * elu(x))


def swish(features, beta=1.0, name=None):
    """``x * sigmoid(beta * x)`` (also ``tv.nn.silu``)."""
    from ..math.math_ext import sigmoid
    with name_scope(name or "swish"):
        x = convert_to_tensor(features)
        return x * sigmoid(x * beta if beta != 1.0 else x)


silu = swish


def crelu(features, name=None, axis=-1):
    """``concat([relu(x), relu(-x)], axis)``."""
    from ..array.manip_ops import concat
    from .nn_ops import relu
    with name_scope(name or "CRelu"):
        x = convert_to_tensor(features)
        return concat([relu(x), relu(-x)], axis)


def log_poisson_loss(targets, log_input, compute_full_loss=False, name=None):
    """``exp(log_input) - log_input * targets``, plus Stirling's approximation of
    ``log(targets!)`` where targets > 1 with ``compute_full_loss``."""
    from ..math.math_ext import where
    from ..math.math_ops import exp, log
    with name_scope(name or "log_poisson_loss"):
        log_input = convert_to_tensor(log_input)
        targets = convert_to_tensor(targets, dtype=log_input.dtype)
        if (targets._shape is not None and log_input._shape is not None
                and list(targets._shape) != list(log_input._shape)
                and None not in targets._shape and None not in log_input._shape):
            raise ValueError(f"log_input and targets must have the same shape "
                             f"({list(log_input._shape)} vs {list(targets._shape)})")
        result = exp(log_input) - log_input * targets
        if compute_full_loss:
            safe = where(targets > 1, targets, targets * 0 + 1)
            stirling = safe * log(safe) - safe + 0.5 * log(2 * math.pi * safe)
            result = result + where(targets > 1, stirling, targets * 0)
        return result


# ---- moments ------------------------------------------------------------------------------------

def sufficient_statistics(x, axes, shift=None, keep_dims=None, name=None, keepdims=None):
    """``(count, sum of (x - shift), sum of (x - shift)^2, shift)`` over ``axes``."""
    from ..math.math_ops import cast, reduce_sum, square
    keep = bool(keepdims if keepdims is not None else keep_dims)
    with name_scope(name or "sufficient_statistics"):
        x = convert_to_tensor(x)
        shape = x._shape
        if shape is None or any(shape[a] is None for a in axes):
            from ..array.array_ops import shape as dyn_shape
            from ..array.index_ops import gather
            from ..math.math_ext import reduce_prod
            count = cast(reduce_prod(gather(dyn_shape(x), list(axes))), x.dtype)
        else:
            count = convert_to_tensor(float(np.prod([shape[a] for a in axes])), dtype=x.dtype)
        if shift is not None:
            shift = convert_to_tensor(shift, dtype=x.dtype)
            m_ss, v_ss = x - shift, square(x - shift)
        else:
            m_ss, v_ss = x, square(x)
        return (count, reduce_sum(m_ss, axes, keepdims=keep), reduce_sum(v_ss, axes,
                                                                         keepdims=keep), shift)


def normalize_moments(counts, mean_ss, variance_ss, shift, name=None):
    """``(mean, variance)`` from :func:`sufficient_statistics`."""
    from ..math.math_ops import square
    with name_scope(name or "normalize"):
        divisor = 1.0 / convert_to_tensor(counts)
        shifted_mean = mean_ss * divisor
        mean = shifted_mean + shift if shift is not None else shifted_mean
        return mean, variance_ss * divisor - square(shifted_mean)


def weighted_moments(x, axes, frequency_weights, name=None, keep_dims=None, keepdims=None):
    """``(mean, variance)`` of ``x`` over ``axes`` with ``frequency_weights``
    (broadcastable to ``x``)."""
    from ..math.math_ops import reduce_sum, square
    keep = bool(keepdims if keepdims is not None else keep_dims)
    with name_scope(name or "weighted_moments"):
        x = convert_to_tensor(x)
        w = convert_to_tensor(frequency_weights, dtype=x.dtype)
        sum_w = reduce_sum(w * (x * 0 + 1), axes, keepdims=True)
        divisor = 1.0 / sum_w
        mean = reduce_sum(w * x, axes, keepdims=True) * divisor
        var = reduce_sum(w * square(x - mean), axes, keepdims=True) * divisor
        if not keep:
            from ..array.manip_ops import squeeze
            mean, var = squeeze(mean, list(axes)), squeeze(var, list(axes))
        return mean, var


# ---- pooling aliases ------------------------------------------------------------------------------

def max_pool2d(input, ksize, strides, padding, data_format="NHWC", name=None):
    """``tf.nn.max_pool2d``: :func:`max_pool` with int or 2-entry ``ksize``/``strides``."""
    return max_pool(input, _four(ksize), _four(strides), padding, data_format, name)


def avg_pool2d(input, ksize, strides, padding, data_format="NHWC", name=None):
    """``tf.nn.avg_pool2d``: :func:`avg_pool` with int or 2-entry ``ksize``/``strides``."""
    return avg_pool(input, _four(ksize), _four(strides), padding, data_format, name)


max_pool_v2, avg_pool_v2 = max_pool2d, avg_pool2d


def _four(v):
    if isinstance(v, int):
        return [1, v, v, 1]
    v = list(v)
    return [1] + v + [1] if len(v) == 2 else v


def _pool1d(pool, input, ksize, strides, padding, data_format, name):
    from ..array.manip_ops import expand_dims, squeeze
    df = data_format or "NWC"
    axis = 1 if df == "NWC" else 2
    def pick(v):  # an int, [k], or TF's 3-entry form in data_format order ([1, k, 1] / [1, 1, k])
        if isinstance(v, int):
            return v
        v = list(v)
        return v[1 if df == "NWC" else 2] if len(v) == 3 else v[-1]
    k, s = pick(ksize), pick(strides)
    x = expand_dims(convert_to_tensor(input), axis)
    fmt = "NHWC" if df == "NWC" else "NCHW"
    kk = [1, 1, int(k), 1] if fmt == "NHWC" else [1, 1, 1, int(k)]
    ss = [1, 1, int(s), 1] if fmt == "NHWC" else [1, 1, 1, int(s)]
    return squeeze(pool(x, kk, ss, padding, fmt, name), [axis])


def max_pool1d(input, ksize, strides, padding, data_format="NWC", name=None):
    """1-D max pooling of ``[batch, width, channels]``."""
    return _pool1d(max_pool, input, ksize, strides, padding, data_format, name)


def avg_pool1d(input, ksize, strides, padding, data_format="NWC", name=None):
    """1-D average pooling of ``[batch, width, channels]``."""
    return _pool1d(avg_pool, input, ksize, strides, padding, data_format, name)
