"""``tv.layers.conv2d_transpose`` and ``tv.layers.Conv2DTranspose`` (TF 1.x's transposed
convolution layer, as DCGAN generators use it): a ``[kh, kw, filters, in_channels]`` kernel
under ``conv2d_transpose/kernel``, the output ``in * stride`` wide with "same" padding and
``in * stride + max(k - stride, 0)`` with "valid", plus a bias.

>>> import tensorvm as tv
>>> x = tv.placeholder(tv.float32, [None, 7, 7, 8])
>>> tv.layers.conv2d_transpose(x, 4, 5, strides=2, padding="same").shape.as_list()
[None, 14, 14, 4]
"""
from __future__ import annotations

from .errors import InvalidArgumentError
from .init_ops import Zeros
from .layers import _activate, _known, _layer_class, _nhwc, _padding, _pair, _regularize
from .tensor_conversion import convert_to_tensor
from .variable_scope import get_variable, variable_scope

__all__ = ["Conv2DTranspose", "conv2d_transpose"]


def _out_size(n, k, s, padding):
    if n is None:
        return None
    return n * s if padding == "SAME" else n * s + max(k - s, 0)


def conv2d_transpose(inputs, filters, kernel_size, strides=(1, 1), padding="valid",
                     data_format="channels_last", activation=None, use_bias=True,
                     kernel_initializer=None, bias_initializer=Zeros(),
                     kernel_regularizer=None, bias_regularizer=None, activity_regularizer=None,
                     kernel_constraint=None, bias_constraint=None, trainable=True, name=None,
                     reuse=None):
    """Transposed 2-D convolution of ``inputs`` to ``filters`` channels, plus bias."""
    from .ops import shape, stack
    from .ops.nn_deconv import conv2d_transpose as nn_conv2d_transpose
    from .ops.nn_ops import bias_add
    x = convert_to_tensor(inputs)
    df = _nhwc(data_format)
    if x._shape is None or len(x._shape) != 4:
        raise InvalidArgumentError(f"conv2d_transpose: inputs must be 4-D, got shape "
                                   f"{x._shape}")
    c, (hs, ws) = (3, (1, 2)) if df == "NHWC" else (1, (2, 3))
    c_in = _known(x._shape[c], "channel", "conv2d_transpose")
    (kh, kw), (sh, sw) = _pair(kernel_size, "kernel_size"), _pair(strides, "strides")
    pad = _padding(padding)
    oh, ow = _out_size(x._shape[hs], kh, sh, pad), _out_size(x._shape[ws], kw, sw, pad)
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


Conv2DTranspose = _layer_class("Conv2DTranspose", conv2d_transpose, "conv2d_transpose")
