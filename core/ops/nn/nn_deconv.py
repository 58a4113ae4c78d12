"""``tv.nn.conv2d_transpose``: the transpose (gradient) of ``conv2d`` with respect to its
input, as TF 1.x's ``tf.nn.conv2d_transpose`` (the "deconvolution" of DCGAN generators). It
is the ``Conv2DBackpropInput`` op of :mod:`tensorvm.ops.nn.nn_conv` with ``value`` as the
output gradient, so its kernels (NumPy, PyTorch's when cpu-accel is on, CuPy) and its
gradients are those of ``conv2d``.

>>> import numpy as np, tensorvm as tv
>>> x = tv.ones([1, 2, 2, 1])
>>> y = tv.nn.conv2d_transpose(x, tv.ones([2, 2, 1, 1]), [1, 4, 4, 1], [1, 2, 2, 1], "VALID")
>>> with tv.Session() as s: s.run(y)[0, :, :, 0].tolist()
[[1.0, 1.0, 1.0, 1.0], [1.0, 1.0, 1.0, 1.0], [1.0, 1.0, 1.0, 1.0], [1.0, 1.0, 1.0, 1.0]]
"""
from __future__ import annotations

import math

from ...framework.errors import InvalidArgumentError
from ...framework.graph import Tensor
from ...framework.op_def_library import apply_op
from ...framework.tensor_conversion import convert_to_tensor
from ..common import static_value

__all__: list[str] = []
NN_ALL = ["conv2d_transpose"]


def _four(v, what, df):
    t = [int(v)] * 2 if isinstance(v, int) else [int(d) for d in v]
    if len(t) == 2:
        t = [1, *t, 1] if df == "NHWC" else [1, 1, *t]
    if len(t) != 4:
        raise InvalidArgumentError(f"conv2d_transpose: {what} must have 1, 2 or 4 entries, "
                                   f"got {v!r}")
    return tuple(t)


def _expected(n, k, s, d, padding):
    eff = (k - 1) * d + 1
    return math.ceil(n / s) if padding == "SAME" else math.ceil((n - eff + 1) / s)


def conv2d_transpose(value=None, filter=None, output_shape=None, strides=None, padding="SAME",
                     data_format="NHWC", name=None, input=None, filters=None,
                     dilations=None) -> Tensor:
    """``value`` [N, H, W, in] with ``filter`` [KH, KW, out, in] to a tensor of
    ``output_shape`` [N, OH, OW, out] (a list or an int tensor): the input-gradient of
    ``conv2d(output, filter, strides, padding)``."""
    from ..array.fill_ops import zeros
    value = convert_to_tensor(value if value is not None else input)
    filter = convert_to_tensor(filter if filter is not None else filters, dtype=value.dtype)
    if output_shape is None or strides is None:
        raise InvalidArgumentError("conv2d_transpose needs value, filter, output_shape and "
                                   "strides")
    padding = str(padding).upper()
    if padding not in ("SAME", "VALID"):
        raise InvalidArgumentError(f"conv2d_transpose: padding must be 'SAME' or 'VALID', "
                                   f"got {padding!r}")
    df = data_format or "NHWC"
    c = 3 if df == "NHWC" else 1
    sp = (1, 2) if df == "NHWC" else (2, 3)
    strides4 = _four(strides, "strides", df)
    dil4 = _four(dilations or 1, "dilations", df)
    out_t = convert_to_tensor(output_shape)
    out_v = static_value(out_t)
    if out_t._shape is not None and (len(out_t._shape) != 1 or out_t._shape[0] not in (4, None)):
        raise ValueError(f"output_shape must have shape (4,), got {list(out_t._shape)}")
    fs, vs = filter._shape, value._shape
    if fs is not None and vs is not None and fs[3] is not None and vs[c] is not None \
            and fs[3] != vs[c]:
        raise ValueError(f"input channels does not match filter's input channels, "
                         f"{vs[c]} != {fs[3]}")
    if out_v is not None:
        out_v = [int(d) for d in out_v]
        if fs is not None and fs[2] is not None and out_v[c] != fs[2]:
            raise ValueError(f"output_shape does not match filter's output channels, "
                             f"{out_v[c]} != {fs[2]}")
        if fs is not None and vs is not None:
            for ax, k in zip(sp, fs[:2]):
                if k is None or vs[ax] is None:
                    continue
                want = _expected(out_v[ax], k, strides4[ax], dil4[ax], padding)
                if want != vs[ax]:
                    raise InvalidArgumentError(
                        f"Conv2DCustomBackpropInput: Size of out_backprop doesn't match "
                        f"computed: actual = {vs[ax]}, computed = {want} (spatial dimension "
                        f"{ax} of output_shape {out_v}, filter size {k}, stride "
                        f"{strides4[ax]}, padding {padding})")
    like = zeros(out_v if out_v is not None else out_t, value.dtype)  # only its shape is read
    attrs = {"strides": strides4, "padding": padding, "data_format": df, "dilations": dil4}
    return apply_op("Conv2DBackpropInput", [like, filter, value], attrs,
                    name=name or "conv2d_transpose").outputs[0]
