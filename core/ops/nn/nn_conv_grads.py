"""TF 1.x's public gradient functions of the 2-D and 1-D convolutions for ``tv.nn``:
``conv2d_backprop_input(input_sizes, filter, out_backprop, ...)``,
``conv2d_backprop_filter(input, filter_sizes, out_backprop, ...)``, ``conv1d_transpose`` and
``conv_transpose``. They build :mod:`tensorvm.ops.nn.nn_conv`'s ``Conv2DBackpropInput`` and
``Conv2DBackpropFilter`` (whose shape-only input stands for the sizes) and
:mod:`tensorvm.ops.nn.nn_deconv`'s ``conv2d_transpose``, with TF's size checks and texts.

>>> import numpy as np, tensorvm as tv
>>> dx = tv.nn.conv2d_backprop_input([1, 3, 3, 1], tv.ones([2, 2, 1, 1]), tv.ones([1, 2, 2, 1]),
...                                  [1, 1, 1, 1], "VALID")
>>> with tv.Session() as s: s.run(dx)[0, :, :, 0].tolist()
[[1.0, 2.0, 1.0], [2.0, 4.0, 2.0], [1.0, 2.0, 1.0]]
"""
from __future__ import annotations

import numpy as np

from ...framework import dtypes as _dt
from ...framework.errors import InvalidArgumentError
from ...framework.graph import Tensor
from ...framework.op_def_library import apply_op
from ...framework.tensor_conversion import convert_to_tensor
from ..common import static_shape_of, static_value
from .nn_conv3d import _check_out_backprop, conv3d_transpose

__all__: list[str] = []
NN_ALL = ["conv2d_backprop_input", "conv2d_backprop_filter", "conv1d_transpose",
          "conv_transpose"]


def _check_2d_sizes(op_type, xs, fs, g_shape, strides, dilations, padding, df):
    c = 3 if df == "NHWC" else 1
    for what, shape, ax, want in (("input", xs, c, 2), ("out_backprop", g_shape, c, 3)):
        if shape is not None and fs is not None and len(shape) == 4 and len(fs) == 4 and \
                None not in (shape[ax], fs[want]) and shape[ax] != fs[want]:
            raise InvalidArgumentError(f"{op_type}: {what} and filter must have the same depth: "
                                       f"{shape[ax]} vs {fs[want]}")
    if xs is None or fs is None or g_shape is None or len(xs) != 4 or len(g_shape) != 4:
        return
    ax = (1, 2) if df == "NHWC" else (2, 3)
    _check_out_backprop(op_type, [xs[a] for a in ax], fs[:2], [strides[a] for a in ax],
                        [dilations[a] for a in ax], padding, [g_shape[a] for a in ax])


def _conv2d_attrs(op_type, strides, padding, data_format, dilations):
    from .nn_conv import _spec
    df = data_format or "NHWC"
    if strides is None or padding is None:
        raise InvalidArgumentError(f"{op_type} needs strides and padding")
    if not isinstance(padding, str) or padding.upper() not in ("SAME", "VALID"):
        raise InvalidArgumentError(f"Attr 'padding' of '{op_type}' Op passed {padding!r} not "
                                   f"in: \"SAME\", \"VALID\".")
    return {"strides": _spec(strides, "strides", op_type, df), "padding": padding.upper(),
            "data_format": df, "dilations": _spec(dilations or 1, "dilations", op_type, df)}


def _zeros_of(sizes, dtype):
    from ..array.fill_ops import zeros
    sizes = convert_to_tensor(sizes, dtype=None if hasattr(sizes, "dtype") else _dt.int32)
    v = static_value(sizes)
    return zeros([int(e) for e in np.asarray(v).reshape(-1)] if v is not None else sizes, dtype)


def conv2d_backprop_input(input_sizes, filter=None, out_backprop=None, strides=None,
                          padding=None, use_cudnn_on_gpu=True, data_format="NHWC",
                          dilations=(1, 1, 1, 1), name=None, filters=None) -> Tensor:
    """The gradient of ``conv2d`` with respect to its input, of shape ``input_sizes`` (a
    4-vector, list or int tensor), from ``filter`` and the output gradient ``out_backprop``."""
    filter = convert_to_tensor(filters if filter is None else filter)
    g = convert_to_tensor(out_backprop, dtype=filter.dtype)
    attrs = _conv2d_attrs("Conv2DBackpropInput", strides, padding, data_format, dilations)
    like = _zeros_of(input_sizes, g.dtype)
    _check_2d_sizes("Conv2DCustomBackpropInput", like._shape, filter._shape, g._shape,
                    attrs["strides"], attrs["dilations"], attrs["padding"], attrs["data_format"])
    return apply_op("Conv2DBackpropInput", [like, filter, g], attrs,
                    name=name or "Conv2DBackpropInput").outputs[0]


def conv2d_backprop_filter(input, filter_sizes, out_backprop, strides, padding,
                           use_cudnn_on_gpu=True, data_format="NHWC", dilations=(1, 1, 1, 1),
                           name=None) -> Tensor:
    """The gradient of ``conv2d`` with respect to its filter, of shape ``filter_sizes``."""
    x = convert_to_tensor(input)
    g = convert_to_tensor(out_backprop, dtype=x.dtype)
    attrs = _conv2d_attrs("Conv2DBackpropFilter", strides, padding, data_format, dilations)
    like = _zeros_of(filter_sizes, g.dtype)
    _check_2d_sizes("Conv2DCustomBackpropFilter", x._shape, like._shape, g._shape,
                    attrs["strides"], attrs["dilations"], attrs["padding"], attrs["data_format"])
    return apply_op("Conv2DBackpropFilter", [x, like, g], attrs,
                    name=name or "Conv2DBackpropFilter").outputs[0]


def conv1d_transpose(input, filters, output_shape, strides, padding="SAME", data_format="NWC",
                     dilations=None, name=None) -> Tensor:
    """The transpose of ``conv1d``: ``input`` [N, W, in] ("NWC") or [N, in, W] ("NCW") with
    ``filters`` [KW, out, in] to ``output_shape`` [N, OW, out], through ``conv2d_transpose``
    on a height of 1 (as TF)."""
    from ..array.manip_ops import concat, expand_dims, squeeze
    from .nn_deconv import conv2d_transpose
    if data_format not in ("NWC", "NCW", None):
        raise ValueError(f"data_format must be \"NWC\" or \"NCW\". Received: "
                         f"data_format={data_format}")
    nwc = data_format in ("NWC", None)
    sp = 1 if nwc else 2  # the axis of W, before the height axis is put in front of it

    def one(v, what):
        t = [int(v)] if isinstance(v, (int, np.integer)) else [int(e) for e in v]
        if len(t) == 1:
            return [1, 1, t[0], 1] if nwc else [1, 1, 1, t[0]]
        if len(t) == 3:
            return [1, 1, t[1], 1] if nwc else [1, 1, 1, t[2]]
        raise ValueError(f"{what} should be of length 1 or 3. Received: {what}={v}")
    x = expand_dims(convert_to_tensor(input), sp)
    f = expand_dims(convert_to_tensor(filters), 0)
    out_t = convert_to_tensor(output_shape, dtype=None if hasattr(output_shape, "dtype")
                              else _dt.int32)
    out_v = static_value(out_t)
    if out_v is not None:
        ov = [int(e) for e in np.asarray(out_v).reshape(-1)]
        out4 = ov[:sp] + [1] + ov[sp:]
    else:
        from ..array.slice_ops import slice as _slice
        one_t = convert_to_tensor([1], dtype=out_t.dtype)
        out4 = concat([_slice(out_t, [0], [sp]), one_t, _slice(out_t, [sp], [3 - sp])], 0)
    y = conv2d_transpose(x, f, out4, one(strides, "strides"), padding,
                         data_format="NHWC" if nwc else "NCHW",
                         dilations=None if dilations is None else one(dilations, "dilations"),
                         name=name or "conv1d_transpose")
    return squeeze(y, [sp])


def conv_transpose(input, filters, output_shape, strides, padding="SAME", data_format=None,
                   dilations=None, name=None) -> Tensor:
    """TF's ``tf.nn.conv_transpose``: the 1-, 2- or 3-D transposed convolution chosen by the
    length of ``output_shape`` (3, 4 or 5)."""
    from .nn_deconv import conv2d_transpose
    n = static_shape_of(convert_to_tensor(output_shape, dtype=None if hasattr(
        output_shape, "dtype") else _dt.int32))
    rank = None if n is None else len(n)
    if rank == 3:
        return conv1d_transpose(input, filters, output_shape, strides, padding,
                                data_format or "NWC", dilations, name)
    if rank == 4:
        return conv2d_transpose(input, filters, output_shape, strides, padding,
                                data_format or "NHWC", name, dilations=dilations)
    if rank == 5:
        return conv3d_transpose(input, filters, output_shape, strides, padding,
                                data_format or "NDHWC", name, dilations=dilations)
    raise ValueError(f"output_shape must be of length 3, 4 or 5 but was {rank}.")
