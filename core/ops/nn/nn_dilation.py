"""Grayscale morphology for ``tv.nn``: TF 1.x's ``dilation2d`` (the ``Dilation2D`` op with
both backprop ops) and ``erosion2d`` (built from it as TF builds it).

Tap by tap, as the pools of :mod:`tensorvm.ops.nn.nn_pool_ext`: each of the ``KH * KW`` filter
taps is a strided view ``[N, OH, OW, C]`` of the input padded with the dtype's lowest value,
plus the tap's filter row; the output is their running maximum, and the gradients go to the
tap holding each window's first maximum (row-major, TF's strict ``>``), found with one
compare per tap against the output. Kernels work in the namespace of their inputs (GPU too).

>>> import numpy as np, tensorvm as tv
>>> x = tv.constant(np.array([[0., 1.], [2., 3.]]).reshape(1, 2, 2, 1))
>>> y = tv.nn.dilation2d(x, np.zeros((2, 2, 1)), [1, 1, 1, 1], [1, 1, 1, 1], "VALID")
>>> with tv.Session() as s: s.run(y).ravel().tolist()
[3.0]
"""
from __future__ import annotations

import numpy as np

from ...framework.errors import InvalidArgumentError
from ...framework.graph import Tensor, name_scope
from ...vm.kernels.array_api import array_namespace
from ...framework.op_def_library import apply_op
from ...framework.op_registry import register_kernel, register_op
from ...framework.tensor_conversion import convert_to_tensor
from .nn_conv import _out_and_pads
from .nn_pool_ext import _check4, _lowest, _pad, _spec4, _taps, _window_geometry

__all__: list[str] = []
NN_ALL = ["dilation2d", "erosion2d"]


def _dilation_setup(x, f, strides, rates, padding):
    kh, kw = f.shape[:2]
    sh, sw, rh, rw = strides[1], strides[2], rates[1], rates[2]
    oh, ph = _out_and_pads(x.shape[1], (kh - 1) * rh + 1, sh, padding)
    ow, pw = _out_and_pads(x.shape[2], (kw - 1) * rw + 1, sw, padding)
    xp = _pad(x, ph, pw, _lowest(x.dtype))
    return xp, list(_taps(kh, kw, sh, sw, rh, rw, max(oh, 0), max(ow, 0))), (ph, pw)


def _dilation_kernel(x, f, strides, rates, padding):
    xp, taps, _ = _dilation_setup(x, f, strides, rates, padding)
    i, j, t = taps[0]
    y = xp[t] + f[i, j]
    for i, j, t in taps[1:]:
        np.maximum(y, xp[t] + f[i, j], out=y)
    return y


def _dilation_hits(x, f, g, strides, rates, padding):
    """Each tap with where it holds its window's first maximum of ``x + f`` (TF's argmax)."""
    xp, taps, pads = _dilation_setup(x, f, strides, rates, padding)
    y = _dilation_kernel(x, f, strides, rates, padding)
    free = array_namespace(g).ones(y.shape, bool)
    for i, j, t in taps:
        hit = np.equal(xp[t] + f[i, j], y) & free
        free ^= hit
        yield i, j, t, hit, xp.shape, pads


def _dilation_bi_kernel(x, f, g, strides, rates, padding):
    dxp = None
    for _, _, t, hit, shape, (ph, pw) in _dilation_hits(x, f, g, strides, rates, padding):
        if dxp is None:
            dxp = array_namespace(g).zeros(shape, g.dtype)
        dxp[t] += np.where(hit, g, 0)
    return dxp[:, ph[0]:ph[0] + x.shape[1], pw[0]:pw[0] + x.shape[2], :]


def _dilation_bf_kernel(x, f, g, strides, rates, padding):
    df = array_namespace(g).zeros(f.shape, g.dtype)
    for i, j, _, hit, _, _ in _dilation_hits(x, f, g, strides, rates, padding):
        df[i, j] = np.where(hit, g, 0).sum(axis=(0, 1, 2))
    return df


def _dilation_shape(inputs, attrs):
    x, f = inputs[:2]
    op = "Dilation2D"
    _check4(op, attrs, ("strides", "rates"), "dilation")
    if x.dtype != f.dtype:
        raise InvalidArgumentError(f"{op}: input ({x.dtype.name}) and filter ({f.dtype.name}) "
                                   f"must have the same dtype")
    if not (x.dtype.is_floating or x.dtype.is_integer):
        raise InvalidArgumentError(f"{op} expects real tensors, got {x.dtype.name}")
    xs, fs = x._shape, f._shape
    for what, shape, rank in (("input", xs, 4), ("filter", fs, 3)):
        if shape is not None and len(shape) != rank:
            raise InvalidArgumentError(f"{op}: Shape must be rank {rank} but is rank "
                                       f"{len(shape)} for {what} with shape {list(shape)}")
    if xs is not None and fs is not None and None not in (xs[3], fs[2]) and xs[3] != fs[2]:
        raise InvalidArgumentError(f"{op}: Dimensions must be equal, but are {xs[3]} and "
                                   f"{fs[2]} (input depth and filter depth)")
    if xs is None:
        return [(x.dtype, None)]
    oh, ow = _window_geometry(op, xs, (None, None) if fs is None else fs[:2], attrs["strides"],
                              attrs["rates"], attrs["padding"])
    return [(x.dtype, (xs[0], oh, ow, xs[3] if fs is None else fs[2]))]


def _dil_attrs(op):
    return {k: op.attrs[k] for k in ("strides", "rates", "padding")}


register_op("Dilation2D", _dilation_shape, _dilation_kernel,
            grad=lambda op, g: [
                apply_op("Dilation2DBackpropInput", [*op.inputs, g], _dil_attrs(op)).outputs[0],
                apply_op("Dilation2DBackpropFilter", [*op.inputs, g], _dil_attrs(op)).outputs[0]])
register_op("Dilation2DBackpropInput", lambda inputs, attrs: [(inputs[2].dtype,
                                                               inputs[0]._shape)],
            _dilation_bi_kernel)
register_op("Dilation2DBackpropFilter", lambda inputs, attrs: [(inputs[2].dtype,
                                                                inputs[1]._shape)],
            _dilation_bf_kernel)


def _dilation_attrs(op_type, strides, rates, padding):
    if strides is None or rates is None or padding is None:
        raise InvalidArgumentError(f"{op_type} needs strides, rates and padding")
    if not isinstance(padding, str):
        raise InvalidArgumentError(f"Attr 'padding' of '{op_type}' Op passed {padding!r}")
    return {"strides": _spec4(strides, "strides", op_type),
            "rates": _spec4(rates, "rates", op_type), "padding": padding.upper()}


def dilation2d(input, filter=None, strides=None, rates=None, padding=None, name=None,
               filters=None, dilations=None) -> Tensor:
    """Grayscale morphological dilation of ``input`` [N, H, W, C] by ``filter`` [KH, KW, C]:
    ``out[b, y, x, c] = max over (i, j) of input[b, y*sh + i*rh - pt, x*sw + j*rw - pl, c]
    + filter[i, j, c]`` (padding never wins). The gradients go to each window's first
    maximum, as TF's."""
    filter = filters if filter is None else filter
    rates = dilations if rates is None else rates
    input = convert_to_tensor(input)
    filter = convert_to_tensor(filter, dtype=None if hasattr(filter, "dtype") else input.dtype)
    return apply_op("Dilation2D", [input, filter],
                    _dilation_attrs("Dilation2D", strides, rates, padding),
                    name=name or "Dilation2D").outputs[0]


def erosion2d(value, kernel, strides, rates, padding, name=None) -> Tensor:
    """Grayscale morphological erosion: ``-dilation2d(-value, reverse(kernel, [0, 1]))``, as
    TF 1.x builds it: ``out = min over (i, j) of value[...] - kernel[i, j, c]``."""
    from ..array.manip_ops import reverse_v2
    from ..math.math_ops import negative
    with name_scope(name or "erosion2d"):
        value = convert_to_tensor(value)
        kernel = convert_to_tensor(kernel, dtype=None if hasattr(kernel, "dtype")
                                   else value.dtype)
        return negative(dilation2d(negative(value), reverse_v2(kernel, [0, 1]), strides,
                                   rates, padding))


for _op, _k in (("Dilation2D", _dilation_kernel),
                ("Dilation2DBackpropInput", _dilation_bi_kernel),
                ("Dilation2DBackpropFilter", _dilation_bf_kernel)):
    register_kernel(_op, "GPU", _k)  # one source: the namespace of the inputs decides
