"""3-D pooling for ``tv.nn`` (TF 1.x's ``max_pool3d`` and ``avg_pool3d``) with their
gradients, on the NDHWC geometry of :mod:`tensorvm.ops.nn.nn_conv3d`.

Pooling works tap by tap, as :mod:`tensorvm.ops.nn.nn_conv`'s: each tap is a strided view
``[N, OD, OH, OW, C]`` of the padded input, so max/avg pooling and their gradients are
``KD * KH * KW`` whole-array operations. Max-pool's gradient goes to each window's first
maximum in row-major window order, as TF's; where the windows tile the input (2x2x2/2) it is a
few whole-array passes over an ``[N, OD, KD, OH, KH, OW, KW, C]`` view, and with the torch CPU
backend PyTorch's kernel (:mod:`tensorvm.ops.nn.nn_conv3d_accel`). Average pooling divides by the
number of unpadded elements of each window, as TF's. Every kernel creates its arrays in the
namespace of its inputs, so it is also the op's GPU kernel.

>>> import numpy as np, tensorvm as tv
>>> x = tv.constant(np.arange(8, dtype=np.float32).reshape(1, 2, 2, 2, 1))
>>> with tv.Session() as s:
...     s.run(tv.nn.max_pool3d(x, [1, 2, 2, 2, 1], [1, 2, 2, 2, 1], "VALID")).ravel()
array([7.], dtype=float32)
"""
from __future__ import annotations

import itertools

import numpy as np

from ...framework.errors import InvalidArgumentError
from ...framework.graph import Tensor
from ...vm.kernels.array_api import array_namespace
from ...framework.op_def_library import apply_op
from ...framework.op_registry import register_kernel, register_op
from ...framework.tensor_conversion import convert_to_tensor
from . import nn_conv3d_accel as _accel
from ..common import static_shape_of
from .nn_conv3d import (
    _attrs_of,
    _check_attrs,
    _from_last,
    _geometry,
    _host_ints,
    _pad,
    _rank5,
    _shape_from_last,
    _shape_t,
    _sp,
    _static_out,
    _tap_slices,
    _to_last,
)

__all__: list[str] = []
NN_ALL = ["max_pool3d", "avg_pool3d"]


def _pool_setup(x, ksize, strides, padding, df):
    x = _to_last(x, df)
    k, s = _sp(ksize, df), _sp(strides, df)
    out, pads = _geometry(x.shape[1:4], k, s, (1, 1, 1), padding)
    return x, k, s, out, pads


def _window_max(xp, taps):
    m = xp[taps[0]].copy()
    for t in taps[1:]:
        np.maximum(m, xp[t], out=m)
    return m


def _max_pool3d_kernel(x, ksize, strides, padding, data_format):
    x, k, s, out, pads = _pool_setup(x, ksize, strides, padding, data_format)
    if 0 in (x.size, *out):
        return _from_last(array_namespace(x).zeros((x.shape[0], *out, x.shape[4]), x.dtype),
                          data_format)
    xp = _pad(x, pads, -np.inf)
    return _from_last(_window_max(xp, _tap_slices(k, s, (1, 1, 1), out)), data_format)


def _first_max_taps(xp, y, taps):
    """Each tap's slice and where it holds its window's first maximum (row-major order)."""
    free = array_namespace(y).ones(y.shape, bool)
    for i, t in enumerate(taps):
        hit = np.equal(xp[t], y)
        if i:
            hit &= free
        free ^= hit
        yield t, hit


def _tiles(x, k, s, out, pads):
    """NDHWC ``x`` as a view ``[N, OD, KD, OH, KH, OW, KW, C]`` when the windows tile it
    exactly (stride == window, no padding, each size == output * window), else None."""
    if tuple(s) != tuple(k) or any(p != (0, 0) for p in pads) or \
            any(e != o * kk for e, o, kk in zip(x.shape[1:4], out, k)):
        return None
    n, c = x.shape[0], x.shape[4]
    return x.reshape(n, out[0], k[0], out[1], k[1], out[2], k[2], c)


def _tiled_max_pool3d_grad(tiles, y, g, k):
    """MaxPool3DGrad when the windows tile the input (:func:`_tiles`) and ``g`` is finite:
    one compare of every element with its window's max (broadcast), each later tap's hits
    dropped where an earlier tap hit (TF's first maximum), and the mask times the broadcast
    ``g`` written into dx: a few whole-array passes instead of about five per tap."""
    e = np.equal(tiles, y[:, :, None, :, None, :, None, :])
    first, seen = e[:, :, 0, :, 0, :, 0, :], None
    taps = list(itertools.product(*(range(kk) for kk in k)))[1:]
    for i, (a, b, c) in enumerate(taps):
        hit = e[:, :, a, :, b, :, c, :]
        np.greater(hit, first if seen is None else seen, out=hit)  # hit and not seen
        if i + 1 < len(taps):
            seen = np.logical_or(first, hit) if seen is None else \
                np.logical_or(seen, hit, out=seen)
    d = array_namespace(g).empty(tiles.shape, g.dtype)
    np.copyto(d, e)
    np.multiply(d, g[:, :, None, :, None, :, None, :], out=d)
    n, od, kd, oh, kh, ow, kw, c = tiles.shape
    return d.reshape(n, od * kd, oh * kh, ow * kw, c)


def _max_pool3d_grad_kernel(x, y, g, ksize, strides, padding, data_format):
    x_df, y_df, g_df = x, y, g
    x, k, s, out, pads = _pool_setup(x, ksize, strides, padding, data_format)
    y, g = _to_last(y, data_format), _to_last(g, data_format)
    xpn = array_namespace(g)
    if 0 in (x.size, *out):
        return _from_last(xpn.zeros(x.shape, g.dtype), data_format)
    # g * hit is faster than where(hit, g, 0) but carries a NaN/inf of g to the window's other
    # elements (0 * inf): only a finite g on the host takes it (asking a device would wait)
    finite = xpn is np and bool(np.isfinite(g).all())
    if finite and all(ss >= kk for ss, kk in zip(s, k)) and all(p == (0, 0) for p in pads) \
            and _accel.wants(x_df, y_df, g_df) and not np.isnan(y).any():
        # PyTorch's kernel (nn_conv3d_accel): the same first maximum; NaN windows, padding
        # and overlapping windows (their sums' order) stay here
        return _accel.max_pool3d_grad(x_df, g_df, k, s, data_format)
    tiles = _tiles(x, k, s, out, pads) if finite else None
    if tiles is not None:
        return _from_last(_tiled_max_pool3d_grad(tiles, y, g, k), data_format)
    xp = _pad(x, pads, -np.inf)
    dxp = xpn.zeros(xp.shape, g.dtype)
    disjoint = finite and all(ss >= kk for ss, kk in zip(s, k))  # one window per element
    for t, hit in _first_max_taps(xp, y, _tap_slices(k, s, (1, 1, 1), out)):
        if disjoint:
            np.multiply(g, hit, out=dxp[t])
        else:
            dxp[t] += np.where(hit, g, 0)
    dx = dxp[(slice(None),) + tuple(slice(p0, p0 + e) for e, (p0, _) in
                                     zip(x.shape[1:4], pads))]
    return _from_last(dx.astype(g.dtype, copy=False), data_format)


def _max_pool3d_grad_grad_kernel(x, y, gg, ksize, strides, padding, data_format):
    """The gradient of MaxPool3DGrad wrt its ``grad``: ``gg`` picked at each window's argmax."""
    x, k, s, out, pads = _pool_setup(x, ksize, strides, padding, data_format)
    y, gg = _to_last(y, data_format), _to_last(gg, data_format)
    res = array_namespace(gg).zeros((x.shape[0], *out, x.shape[4]), gg.dtype)
    if 0 not in (x.size, *out):
        ggp = _pad(gg, pads)
        for t, hit in _first_max_taps(_pad(x, pads, -np.inf), y,
                                      _tap_slices(k, s, (1, 1, 1), out)):
            res += np.where(hit, ggp[t], 0)
    return _from_last(res, data_format)


def _valid_counts(in_sp, k, s, pads, out, like, dtype):
    """How many unpadded elements each window holds, ``[1, OD, OH, OW, 1]`` (a box: the
    product of each dim's count)."""
    cnt = np.ones((1, 1, 1), np.float64)
    for ax, (n, kk, ss, (p0, _), o) in enumerate(zip(in_sp, k, s, pads, out)):
        start = np.arange(o) * ss - p0
        c = np.minimum(start + kk, n) - np.maximum(start, 0)
        shape = [1, 1, 1]
        shape[ax] = o
        cnt = cnt * c.reshape(shape)
    cnt = np.maximum(cnt, 1).astype(dtype)[None, ..., None]
    xpn = array_namespace(like)
    return cnt if xpn is np else xpn.asarray(cnt)


def _avg_pool3d_kernel(x, ksize, strides, padding, data_format):
    x, k, s, out, pads = _pool_setup(x, ksize, strides, padding, data_format)
    xp = _pad(x, pads)
    acc = array_namespace(x).zeros((x.shape[0], *out, x.shape[4]), x.dtype)
    for t in _tap_slices(k, s, (1, 1, 1), out) if 0 not in out else ():
        acc += xp[t]
    acc /= _valid_counts(x.shape[1:4], k, s, pads, out, x, x.dtype)
    return _from_last(acc, data_format)


def _avg_pool3d_grad_kernel(orig_input_shape, g, ksize, strides, padding, data_format):
    sizes = _host_ints(orig_input_shape)
    xs = sizes if data_format == "NDHWC" else (sizes[0], *sizes[2:], sizes[1])
    g = _to_last(g, data_format)
    k, s = _sp(ksize, data_format), _sp(strides, data_format)
    out, pads = _geometry(xs[1:4], k, s, (1, 1, 1), padding)
    gs = g / _valid_counts(xs[1:4], k, s, pads, out, g, g.dtype)
    dxp = array_namespace(g).zeros(
        (xs[0], *(e + p0 + p1 for e, (p0, p1) in zip(xs[1:4], pads)), xs[4]), g.dtype)
    for t in _tap_slices(k, s, (1, 1, 1), out) if 0 not in out else ():
        dxp[t] += gs
    dx = dxp[(slice(None),) + tuple(slice(p0, p0 + e) for e, (p0, _) in zip(xs[1:4], pads))]
    return _from_last(dx.astype(g.dtype, copy=False), data_format)


def _pool3d_shape(op_type):
    def shape_fn(inputs, attrs):
        x = inputs[0]
        _check_attrs(op_type, attrs, ("ksize", "strides"))
        if not x.dtype.is_floating:
            raise InvalidArgumentError(f"{op_type} expects a floating-point tensor, got "
                                       f"{x.dtype.name}")
        xs, df = x._shape, attrs["data_format"]
        _rank5(op_type, "input", xs)
        if xs is None:
            return [(x.dtype, None)]
        out = _static_out(op_type, xs, _sp(attrs["ksize"], df), attrs)
        c = xs[4] if df == "NDHWC" else xs[1]
        return [(x.dtype, _shape_from_last(xs[0], out, c, df))]
    return shape_fn


def _pool_attrs(op):
    return {k: op.attrs[k] for k in ("ksize", "strides", "padding", "data_format")}


def _avg_pool3d_grad_shape(inputs, attrs):
    return [(inputs[1].dtype, static_shape_of(inputs[0]))]


register_op("MaxPool3D", _pool3d_shape("MaxPool3D"), _max_pool3d_kernel,
            grad=lambda op, g: [apply_op("MaxPool3DGrad", [op.inputs[0], op.outputs[0], g],
                                         _pool_attrs(op)).outputs[0]])
register_op("MaxPool3DGrad", lambda inputs, attrs: [(inputs[2].dtype, inputs[0]._shape)],
            _max_pool3d_grad_kernel,
            grad=lambda op, gg: [None, None, apply_op(
                "MaxPool3DGradGrad", [op.inputs[0], op.inputs[1], gg],
                _pool_attrs(op)).outputs[0]])
register_op("MaxPool3DGradGrad", lambda inputs, attrs: [(inputs[2].dtype, inputs[1]._shape)],
            _max_pool3d_grad_grad_kernel,
            grad=lambda op, ggg: [None, None, apply_op(
                "MaxPool3DGrad", [op.inputs[0], op.inputs[1], ggg],
                _pool_attrs(op)).outputs[0]])
register_op("AvgPool3D", _pool3d_shape("AvgPool3D"), _avg_pool3d_kernel,
            grad=lambda op, g: [apply_op("AvgPool3DGrad", [_shape_t(op.inputs[0]), g],
                                         _pool_attrs(op)).outputs[0]])
register_op("AvgPool3DGrad", _avg_pool3d_grad_shape, _avg_pool3d_grad_kernel,
            grad=lambda op, gg: [None, apply_op("AvgPool3D", [gg], _pool_attrs(op)).outputs[0]])


for _op, _k in (("MaxPool3D", _max_pool3d_kernel), ("MaxPool3DGrad", _max_pool3d_grad_kernel),
                ("MaxPool3DGradGrad", _max_pool3d_grad_grad_kernel),
                ("AvgPool3D", _avg_pool3d_kernel), ("AvgPool3DGrad", _avg_pool3d_grad_kernel)):
    register_kernel(_op, "GPU", _k)  # one source: the namespace of the inputs decides


# ---- the Python API ---------------------------------------------------------------------------
def _pool3d(op_type, input, ksize, strides, padding, data_format, name):
    attrs = _attrs_of(op_type, strides, padding, data_format, ksize=ksize)
    return apply_op(op_type, [convert_to_tensor(input)], attrs, name=name).outputs[0]


def max_pool3d(input, ksize, strides, padding, data_format="NDHWC", name=None) -> Tensor:
    """Max over each ``ksize`` window of a 5-D ``input``; the gradient goes to each window's
    first maximum."""
    return _pool3d("MaxPool3D", input, ksize, strides, padding, data_format, name)


def avg_pool3d(input, ksize, strides, padding, data_format="NDHWC", name=None) -> Tensor:
    """Mean over each ``ksize`` window of a 5-D ``input`` (unpadded elements only)."""
    return _pool3d("AvgPool3D", input, ksize, strides, padding, data_format, name)
