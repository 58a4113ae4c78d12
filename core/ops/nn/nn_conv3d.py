"""3-D convolution for ``tv.nn`` (TF 1.x's ``conv3d``, ``conv3d_transpose``,
``conv3d_backprop_filter``), and the NDHWC geometry that :mod:`tensorvm.ops.nn.nn_pool3d` shares.

The kernels follow :mod:`tensorvm.ops.nn.nn_conv`, one dimension up. Internally everything is
NDHWC ("NCDHW" is transposed in and out). ``Conv3D`` is an im2col per block of output rows
(whole volumes while one fits in about :data:`~tensorvm.ops.nn.nn_conv.BLOCK_BYTES`, else runs of
depth slices of one volume): each of the ``KD * KH * KW`` filter taps copies one strided view
of the padded input into its columns of a reused ``[rows, KD * KH * KW * C]`` buffer, and the
block is one matrix product with the ``[KD * KH * KW * C, O]`` filter. The filter gradient
is the same im2col, ``cols.T @ out_backprop`` per block, summed. The input gradient of a
stride-1 convolution is the transposed convolution (the same kernel on the padded gradient
with the flipped filter); a strided one's is one product per filter tap added into that
tap's strided view of the input gradient. Every kernel creates its arrays in the namespace
of its inputs, so it is also the op's GPU kernel. With the torch CPU backend
(:mod:`tensorvm.vm.kernels.cpu_accel`) float32 convolutions run on oneDNN instead
(:mod:`tensorvm.ops.nn.nn_conv3d_accel`).

Padding follows TF: "VALID" uses only full windows; "SAME" gives ``ceil(in / stride)``
outputs, padding ``max((out - 1) * stride + window - in, 0)`` split with the smaller half first.

>>> import numpy as np, tensorvm as tv
>>> y = tv.nn.conv3d(tv.ones([1, 2, 2, 2, 1]), tv.ones([2, 2, 2, 1, 1]), [1] * 5, "VALID")
>>> with tv.Session() as s: s.run(y).ravel().tolist()
[8.0]
"""
from __future__ import annotations

import itertools

import numpy as np

from ...framework import dtypes as _dt
from ...framework.errors import InvalidArgumentError, UnimplementedError
from ...framework.graph import Tensor
from ...vm.kernels.array_api import array_namespace
from ...framework.op_def_library import apply_op
from ...framework.op_registry import register_kernel, register_op
from ...framework.tensor_conversion import convert_to_tensor
from . import nn_conv3d_accel as _accel
from ..common import static_shape_of, static_value
from .nn_conv import _blocks, _out_and_pads, _share

__all__: list[str] = []
NN_ALL = ["conv3d", "conv3d_transpose", "conv3d_backprop_filter", "conv3d_backprop_filter_v2"]

_FORMATS = ("NDHWC", "NCDHW")


# ---- geometry --------------------------------------------------------------------------------
def _sp(v, df):
    """The (D, H, W) entries of a 5-vector given in ``df`` order."""
    v = tuple(v)
    return v[1:4] if df == "NDHWC" else v[2:5]


def _to_last(x, df):
    return x if df == "NDHWC" else x.transpose(0, 2, 3, 4, 1)


def _from_last(x, df):
    return x if df == "NDHWC" else x.transpose(0, 4, 1, 2, 3)


def _host_ints(v):
    """A small integer tensor's value as a tuple of Python ints (on the host on any device)."""
    return tuple(int(e) for e in np.asarray(v.get() if hasattr(v, "get") else v).reshape(-1))


def _geometry(in_sp, k, s, d, padding):
    """Output sizes and (before, after) pads of each spatial dim (``k`` undilated)."""
    outs, pads = [], []
    for n, kk, ss, dd in zip(in_sp, k, s, d):
        o, p = _out_and_pads(n, (kk - 1) * dd + 1, ss, padding)
        outs.append(max(o, 0))
        pads.append(p)
    return tuple(outs), tuple(pads)


def _pad(x, pads, value=0):
    if all(p == (0, 0) for p in pads):
        return x
    return np.pad(x, ((0, 0), *pads, (0, 0)), constant_values=value)


def _tap_slices(k, s, d, out):
    """For each window tap in row-major order, the index tuple of its strided view
    ``[N, OD, OH, OW, C]`` of the padded NDHWC input."""
    return [(slice(None),) + tuple(slice(t * dd, t * dd + (o - 1) * ss + 1, ss)
                                   for t, ss, dd, o in zip(tap, s, d, out))
            for tap in itertools.product(*(range(kk) for kk in k))]


def _check_attrs(op_type, attrs, keys):
    """Static checks of data_format, padding and the 5-vectors ``keys`` (TF's texts)."""
    df, padding = attrs["data_format"], attrs["padding"]
    if df not in _FORMATS:
        raise InvalidArgumentError(f"Attr 'data_format' of '{op_type}' Op passed string "
                                   f"{df!r} not in: \"NDHWC\", \"NCDHW\".")
    if padding not in ("SAME", "VALID"):
        raise InvalidArgumentError(f"Attr 'padding' of '{op_type}' Op passed string "
                                   f"{padding!r} not in: \"SAME\", \"VALID\".")
    for key in keys:
        v = attrs[key]
        if len(v) != 5:
            raise InvalidArgumentError(f"Attr '{key}' of '{op_type}' Op passed list of length "
                                       f"{len(v)} {'less' if len(v) < 5 else 'more'} than "
                                       f"{'minimum' if len(v) < 5 else 'maximum'} 5.")
        if any(int(e) < 1 for e in v):
            raise InvalidArgumentError(f"{op_type}: {key} must be positive, got {list(v)}")
        c_ax = 4 if df == "NDHWC" else 1
        if v[0] != 1 or v[c_ax] != 1:
            what = {"ksize": "Pooling is not yet supported on the batch dimension.",
                    "strides": "Current implementation does not yet support strides in the "
                               "batch and depth dimensions.",
                    "dilations": "Current implementation does not yet support dilations in "
                                 "the batch and depth dimensions."}[key]
            raise UnimplementedError(f"{op_type}: {what} Got {key} {list(v)}")


def _rank5(op_type, what, shape):
    if shape is not None and len(shape) != 5:
        raise InvalidArgumentError(f"{op_type}: Shape must be rank 5 but is rank {len(shape)} "
                                   f"for {what} with shape {list(shape)}")


def _static_out(op_type, x_shape, k, attrs, f_shape=None):
    """Static output (OD, OH, OW) of a window ``k`` (undilated, entries may be None)."""
    df = attrs["data_format"]
    s, d = _sp(attrs["strides"], df), _sp(attrs.get("dilations", (1,) * 5), df)
    out = []
    for n, kk, ss, dd in zip(_sp(x_shape, df), k, s, d):
        if n is None or kk is None:
            out.append(None)
            continue
        ek = (kk - 1) * dd + 1
        if attrs["padding"] == "VALID" and n < ek:
            detail = f"input shape {list(x_shape)}" + (
                f", filter shape {list(f_shape)}" if f_shape is not None else "")
            raise InvalidArgumentError(f"{op_type}: Negative dimension size caused by "
                                       f"subtracting {ek} from {n} ({detail})")
        out.append(_out_and_pads(n, ek, ss, attrs["padding"])[0])
    return tuple(out)


def _shape_from_last(n, sp, c, df):
    return (n, *sp, c) if df == "NDHWC" else (n, c, *sp)


def _check_out_backprop(op_type, in_sp, k, s, d, padding, g_sp):
    """TF's check that the output gradient has the convolution's output size."""
    for i, (n, kk, ss, dd, a) in enumerate(zip(in_sp, k, s, d, g_sp)):
        if n is None or kk is None or a is None:
            continue
        want = _out_and_pads(n, (kk - 1) * dd + 1, ss, padding)[0]
        if want != a:
            raise InvalidArgumentError(
                f"{op_type}: Size of out_backprop doesn't match computed: actual = {a}, "
                f"computed = {want} spatial_dim: {i + 1} input: {n} filter: {kk} output: {a} "
                f"stride: {ss} dilation: {dd}")


# ---- Conv3D and its gradients ----------------------------------------------------------------
def _over_blocks(x, k, s, d, out, pads, work):
    """Call ``work(n0, n1, z0, z1, cols, acc)`` for each im2col block of NDHWC ``x`` padded by
    ``pads``: ``cols`` holds the block's windows as ``[rows, KD * KH * KW * C]`` (columns in
    the filter's ``[KD, KH, KW, C]`` order), ``acc`` what the thread's previous call returned.
    Blocks are :func:`~tensorvm.ops.nn.nn_conv._blocks` of the output's ``[N, OD]`` rows, one
    reused buffer per thread, shared among the intra-op pool's threads. Returns each
    thread's last result."""
    new = array_namespace(x).empty
    xp = _pad(x, pads)
    n, c = x.shape[0], x.shape[4]
    od, oh, ow = out
    taps = _tap_slices(k, s, d, out)
    kk = len(taps) * c
    blocks = list(_blocks(n, od, oh * ow * kk * xp.dtype.itemsize))

    def fill(buf, n0, n1, z0, z1):
        cols = buf[:(n1 - n0) * (z1 - z0) * oh * ow * kk].reshape(
            n1 - n0, z1 - z0, oh, ow, len(taps), c)
        for t, sl in enumerate(taps):
            zs = sl[1]
            zsl = slice(zs.start + z0 * s[0], zs.start + (z1 - 1) * s[0] + 1, s[0])
            np.copyto(cols[:, :, :, :, t, :], xp[(slice(n0, n1), zsl, sl[2], sl[3])])
        return cols.reshape(-1, kk)

    def run(part):
        acc, buf = None, None
        for n0, n1, z0, z1 in part:
            if buf is None:
                buf = new((n1 - n0) * (z1 - z0) * oh * ow * kk, xp.dtype)
            acc = work(n0, n1, z0, z1, fill(buf, n0, n1, z0, z1), acc)
        return acc
    return _share(blocks, run)


def _conv_ndhwc(x, f, s, d, out, pads):
    """Conv3D of NDHWC ``x`` with ``f`` [KD, KH, KW, C, O] to ``[N, *out, O]``."""
    xpn = array_namespace(x, f)
    o = f.shape[4]
    dt = np.result_type(x.dtype, f.dtype)
    if 0 in (x.shape[0], *out, o) or x.shape[4] == 0:
        return xpn.zeros((x.shape[0], *out, o), dt)
    res = xpn.empty((x.shape[0], *out, o), dt)
    f2 = xpn.ascontiguousarray(f).reshape(-1, o)

    def work(n0, n1, z0, z1, cols, _):
        np.matmul(cols, f2, out=res[n0:n1, z0:z1].reshape(-1, o))
    _over_blocks(x, f.shape[:3], s, d, out, pads, work)
    return res


def _conv3d_kernel(x, f, strides, padding, data_format, dilations):
    x_df, x = x, _to_last(x, data_format)
    s, d = _sp(strides, data_format), _sp(dilations, data_format)
    if f.shape[3] != x.shape[4]:
        raise InvalidArgumentError(f"Conv3D: input depth {x.shape[4]} != filter in_depth "
                                   f"{f.shape[3]}")
    out, pads = _geometry(x.shape[1:4], f.shape[:3], s, d, padding)
    if 0 not in out and _accel.wants(x_df, f):  # oneDNN through PyTorch (nn_conv3d_accel)
        return _accel.conv3d(x_df, f, s, d, pads, data_format)
    return _from_last(_conv_ndhwc(x, f, s, d, out, pads).astype(x.dtype, copy=False),
                      data_format)


def _conv3d_backprop_input_kernel(input_sizes, f, g, strides, padding, data_format, dilations):
    sizes = _host_ints(input_sizes)
    if len(sizes) != 5:
        raise InvalidArgumentError(f"Conv3DBackpropInputV2: input_sizes must have 5 entries, "
                                   f"got {list(sizes)}")
    xs = sizes if data_format == "NDHWC" else (sizes[0], *sizes[2:], sizes[1])
    g_df, g = g, _to_last(g, data_format)
    s, d, k = _sp(strides, data_format), _sp(dilations, data_format), f.shape[:3]
    out, pads = _geometry(xs[1:4], k, s, d, padding)
    _check_out_backprop("Conv3DBackpropInputOp", xs[1:4], k, s, d, padding, g.shape[1:4])
    if 0 not in xs and f.shape[3] == xs[4] and _accel.wants(g_df, f):
        return _accel.conv3d_backprop_input(xs, f, g_df, s, d, pads, data_format)
    xpn = array_namespace(g, f)
    dt = np.result_type(g.dtype, f.dtype)
    if s == (1, 1, 1):  # the transposed convolution: flipped filter over the padded gradient
        ff = xpn.ascontiguousarray(f[::-1, ::-1, ::-1].transpose(0, 1, 2, 4, 3))
        tpads = tuple(((kk - 1) * dd - p0, (kk - 1) * dd - p1)
                      for kk, dd, (p0, p1) in zip(k, d, pads))
        dx = _conv_ndhwc(g, ff, (1, 1, 1), d, xs[1:4], tpads)
    else:
        n, c, o = xs[0], xs[4], f.shape[4]
        dxp = xpn.zeros((n, *(e + p0 + p1 for e, (p0, p1) in zip(xs[1:4], pads)), c), dt)
        g2 = g.reshape(-1, o)
        buf = xpn.empty((g2.shape[0], c), dt)
        for tap, sl in zip(itertools.product(*(range(kk) for kk in k)),
                           _tap_slices(k, s, d, out)):
            np.matmul(g2, f[tap].T, out=buf)
            dxp[sl] += buf.reshape(n, *out, c)
        dx = dxp[(slice(None),) + tuple(slice(p0, p0 + e) for e, (p0, _) in
                                         zip(xs[1:4], pads))]
    return _from_last(dx.astype(g.dtype, copy=False), data_format)


def _conv3d_backprop_filter_kernel(x, filter_sizes, g, strides, padding, data_format,
                                   dilations):
    fs = _host_ints(filter_sizes)
    if len(fs) != 5:
        raise InvalidArgumentError(f"Conv3DBackpropFilterV2: filter_sizes must have 5 entries, "
                                   f"got {list(fs)}")
    x_df, g_df = x, g
    x, g = _to_last(x, data_format), _to_last(g, data_format)
    s, d, k = _sp(strides, data_format), _sp(dilations, data_format), fs[:3]
    out, pads = _geometry(x.shape[1:4], k, s, d, padding)
    _check_out_backprop("Conv3DBackpropFilterOp", x.shape[1:4], k, s, d, padding,
                        g.shape[1:4])
    if 0 not in fs and fs[3] == x.shape[4] and _accel.wants(x_df, g_df):
        return _accel.conv3d_backprop_filter(x_df, fs, g_df, s, d, pads, data_format)
    o = fs[4]

    def work(n0, n1, z0, z1, cols, acc):
        part = cols.T @ g[n0:n1, z0:z1].reshape(-1, o)
        if acc is None:
            return part
        acc += part
        return acc
    parts = [] if 0 in (x.shape[0], *out) else [
        p for p in _over_blocks(x, k, s, d, out, pads, work) if p is not None]
    df = parts[0] if parts else array_namespace(x, g).zeros((int(np.prod(fs[:4])), o),
                                                            np.result_type(x.dtype, g.dtype))
    for p in parts[1:]:
        df += p
    return df.reshape(fs).astype(g.dtype, copy=False)


def _conv3d_shape(inputs, attrs):
    x, f = inputs
    op = "Conv3D"
    _check_attrs(op, attrs, ("strides", "dilations"))
    if x.dtype != f.dtype:
        raise InvalidArgumentError(f"{op}: input ({x.dtype.name}) and filter ({f.dtype.name}) "
                                   f"must have the same dtype")
    if not x.dtype.is_floating:
        raise InvalidArgumentError(f"{op} expects floating-point tensors, got {x.dtype.name}")
    xs, fs, df = x._shape, f._shape, attrs["data_format"]
    _rank5(op, "input", xs)
    _rank5(op, "filter", fs)
    if xs is None:
        return [(x.dtype, None)]
    c = xs[4] if df == "NDHWC" else xs[1]
    if fs is not None and c is not None and fs[3] is not None and c != fs[3]:
        raise InvalidArgumentError(
            f"{op}: Depth of input ({c}) is not a multiple of input depth of filter "
            f"({fs[3]})" if c % fs[3] else
            f"{op}: grouped convolutions are not supported: input depth {c}, filter in_depth "
            f"{fs[3]}")
    out = _static_out(op, xs, (None,) * 3 if fs is None else fs[:3], attrs, fs)
    return [(x.dtype, _shape_from_last(xs[0], out, None if fs is None else fs[4], df))]


def _sizes_shape(op, i_sizes, i_x, i_g, attrs_check=True):
    def shape_fn(inputs, attrs):
        _check_attrs(op, attrs, ("strides", "dilations"))
        sizes = inputs[i_sizes]
        if not sizes.dtype.is_integer:
            raise InvalidArgumentError(f"{op}: sizes must be int32 or int64, got "
                                       f"{sizes.dtype.name}")
        shape = static_shape_of(sizes)
        g = inputs[i_g]
        _rank5(op, "out_backprop", g._shape)
        if shape is not None and len(shape) != 5:
            raise InvalidArgumentError(f"{op}: sizes must have 5 entries, got {list(shape)}")
        # the input and filter shapes, to check out_backprop's size (TF's text)
        df = attrs["data_format"]
        xs = shape if i_sizes == 0 else inputs[0]._shape
        fs = shape if i_sizes == 1 else inputs[1]._shape
        if xs is not None and fs is not None and g._shape is not None:
            _check_out_backprop(f"{op[:-2]}Op", _sp(xs, df), fs[:3], _sp(attrs["strides"], df),
                                _sp(attrs["dilations"], df), attrs["padding"], _sp(g._shape, df))
        return [(g.dtype, shape)]
    return shape_fn


def _attrs(op):
    return {k: op.attrs[k] for k in ("strides", "padding", "data_format", "dilations")}


def _shape_t(t):
    from ..array.array_ops import shape
    return shape(t)


def _conv3d_grad(op, g):
    x, f = op.inputs
    a = _attrs(op)
    return [apply_op("Conv3DBackpropInputV2", [_shape_t(x), f, g], a).outputs[0],
            apply_op("Conv3DBackpropFilterV2", [x, _shape_t(f), g], a).outputs[0]]


def _bi_grad(op, gg):  # BackpropInput(sizes, f, g) is linear in f and in g
    _, f, g = op.inputs
    a = _attrs(op)
    return [None, apply_op("Conv3DBackpropFilterV2", [gg, _shape_t(f), g], a).outputs[0],
            apply_op("Conv3D", [gg, f], a).outputs[0]]


def _bf_grad(op, gg):  # BackpropFilter(x, sizes, g) is linear in x and in g
    x, _, g = op.inputs
    a = _attrs(op)
    return [apply_op("Conv3DBackpropInputV2", [_shape_t(x), gg, g], a).outputs[0], None,
            apply_op("Conv3D", [x, gg], a).outputs[0]]


register_op("Conv3D", _conv3d_shape, _conv3d_kernel, grad=_conv3d_grad)
register_op("Conv3DBackpropInputV2", _sizes_shape("Conv3DBackpropInputV2", 0, None, 2),
            _conv3d_backprop_input_kernel, grad=_bi_grad)
register_op("Conv3DBackpropFilterV2", _sizes_shape("Conv3DBackpropFilterV2", 1, 0, 2),
            _conv3d_backprop_filter_kernel, grad=_bf_grad)


for _op, _k in (("Conv3D", _conv3d_kernel),
                ("Conv3DBackpropInputV2", _conv3d_backprop_input_kernel),
                ("Conv3DBackpropFilterV2", _conv3d_backprop_filter_kernel)):
    register_kernel(_op, "GPU", _k)  # one source: the namespace of the inputs decides


# ---- the Python API ---------------------------------------------------------------------------
def _five(v, what, df, op_type):
    """A 1/3/5-entry spec as a 5-vector in ``df`` order (TF's ``_get_sequence``)."""
    t = [int(v)] if isinstance(v, (int, np.integer)) else [int(e) for e in v]
    if len(t) == 1:
        t = t * 3
    if len(t) == 3:
        return (1, *t, 1) if df == "NDHWC" else (1, 1, *t)
    if len(t) != 5:
        raise InvalidArgumentError(f"{what} should be of length 1, 3 or 5. Received: "
                                   f"{what}={list(v) if not isinstance(v, int) else v} of "
                                   f"length {len(t)}")
    return tuple(t)


def _attrs_of(op_type, strides, padding, data_format, dilations=None, ksize=None):
    df = data_format or "NDHWC"
    if not isinstance(padding, str):
        raise InvalidArgumentError(f"Attr 'padding' of '{op_type}' Op passed {padding!r}, "
                                   f"not a string")
    if ksize is not None:  # pools take 1, 3 or 5 entries (TF's _get_sequence)
        return {"ksize": _five(ksize, "ksize", df, op_type),
                "strides": _five(strides, "strides", df, op_type),
                "padding": padding.upper(), "data_format": df}

    def as_is(v):  # the conv ops take 5-vectors as they are (the op checks their length)
        return _five(v, "strides", df, op_type) if isinstance(v, (int, np.integer)) else \
            tuple(int(e) for e in v)
    return {"strides": as_is(strides), "padding": padding.upper(), "data_format": df,
            "dilations": as_is(1 if dilations is None else dilations)}


def conv3d(input, filter=None, strides=None, padding=None, data_format="NDHWC",
           dilations=(1, 1, 1, 1, 1), name=None, filters=None) -> Tensor:
    """3-D convolution (cross-correlation, as TF) of ``input`` [N, D, H, W, C] ("NDHWC") or
    [N, C, D, H, W] ("NCDHW") with ``filter`` [KD, KH, KW, C, O]; ``strides`` and
    ``dilations`` are 5-vectors in ``data_format`` order (batch and channel entries 1);
    ``padding`` is "SAME" or "VALID".

    >>> import numpy as np, tensorvm as tv
    >>> y = tv.nn.conv3d(tv.ones([1, 3, 3, 3, 1]), tv.ones([2, 2, 2, 1, 1]), [1] * 5, "VALID")
    >>> with tv.Session() as s: s.run(y).ravel().tolist()
    [8.0, 8.0, 8.0, 8.0, 8.0, 8.0, 8.0, 8.0]
    """
    filter = filters if filter is None else filter
    if filter is None or strides is None or padding is None:
        raise InvalidArgumentError("conv3d needs input, filter, strides and padding")
    input = convert_to_tensor(input)
    filter = convert_to_tensor(filter, dtype=None if hasattr(filter, "dtype") else input.dtype)
    attrs = _attrs_of("Conv3D", strides, padding, data_format, dilations)
    return apply_op("Conv3D", [input, filter], attrs, name=name or "Conv3D").outputs[0]


def conv3d_backprop_filter_v2(input, filter_sizes, out_backprop, strides, padding,
                              data_format="NDHWC", dilations=(1, 1, 1, 1, 1),
                              name=None) -> Tensor:
    """The gradient of :func:`conv3d` with respect to its filter, of shape ``filter_sizes``
    (TF's ``Conv3DBackpropFilterV2``)."""
    attrs = _attrs_of("Conv3DBackpropFilterV2", strides, padding, data_format, dilations)
    return apply_op("Conv3DBackpropFilterV2",
                    [convert_to_tensor(input), convert_to_tensor(filter_sizes, dtype=_dt.int32),
                     convert_to_tensor(out_backprop)], attrs, name=name).outputs[0]


conv3d_backprop_filter = conv3d_backprop_filter_v2


def conv3d_transpose(value, filter=None, output_shape=None, strides=None, padding="SAME",
                     data_format="NDHWC", name=None, input=None, filters=None,
                     dilations=None) -> Tensor:
    """The transpose of :func:`conv3d` (its input gradient): ``value`` [N, D, H, W, in] with
    ``filter`` [KD, KH, KW, out, in] to ``output_shape`` [N, OD, OH, OW, out] (a list or an
    int tensor)."""
    value = convert_to_tensor(value if value is not None else input)
    filter = convert_to_tensor(filter if filter is not None else filters, dtype=value.dtype)
    if output_shape is None or strides is None:
        raise InvalidArgumentError("conv3d_transpose needs value, filter, output_shape and "
                                   "strides")
    df = data_format or "NDHWC"
    c = 4 if df == "NDHWC" else 1
    out_t = convert_to_tensor(output_shape, dtype=_dt.int32 if not hasattr(output_shape, "dtype")
                              else None)
    if out_t._shape is not None and (len(out_t._shape) != 1 or out_t._shape[0] not in (5, None)):
        raise ValueError(f"output_shape must have shape (5,), got {list(out_t._shape)}")
    fs, vs, out_v = filter._shape, value._shape, static_value(out_t)
    if fs is not None and vs is not None and fs[4] is not None and vs[c] is not None \
            and fs[4] != vs[c]:
        raise ValueError(f"input channels does not match filter's input channels, "
                         f"{vs[c]} != {fs[4]}")
    if out_v is not None and fs is not None and fs[3] is not None and int(out_v[c]) != fs[3]:
        raise ValueError(f"output_shape does not match filter's output channels, "
                         f"{int(out_v[c])} != {fs[3]}")
    attrs = _attrs_of("Conv3DBackpropInputV2", strides, padding, df, dilations)
    return apply_op("Conv3DBackpropInputV2", [out_t, filter, value], attrs,
                    name=name or "conv3d_transpose").outputs[0]
