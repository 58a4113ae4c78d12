"""Convolution and pooling for ``tv.nn`` (re-exported by :mod:`tensorvm.ops.nn.nn_ops`).

Kernels are BLAS-shaped (issue 14): ``sliding_window_view`` over the padded input gives every
window as a strided view ``[N, OH, OW, C, KH, KW]`` (no copy), copied block by block (about
1 MB of output rows at a time, into one reused buffer that stays in cache) into a contiguous
``[rows, KH * KW * C]`` matrix (im2col), so that a convolution and its filter gradient are one
matrix product per block. The input gradient of a stride-1 convolution is the transposed
convolution: a width-only im2col of the padded output gradient in height-major order, and
one product per filter row; a strided convolution's is one product per filter tap added into
its strided view of the input gradient. Pooling works tap by tap: each of the
``KH * KW`` taps is a strided view ``[N, OH, OW, C]`` of the padded input, so max/avg pooling
and their gradients are ``KH * KW`` whole-array NumPy operations (max-pool's gradient goes to
each window's first maximum, in row-major window order, as TF's), never a loop over pixels.
Internally everything is NHWC; "NCHW" is transposed in and out.

Padding follows TF: "VALID" uses only full windows; "SAME" gives ``ceil(in / stride)`` outputs,
padding ``total = max((out - 1) * stride + k - in, 0)`` split with the smaller half first.
Average pooling divides by the number of *valid* (unpadded) elements of each window.

>>> import numpy as np, tensorvm as tv
>>> x = tv.constant(np.arange(16, dtype=np.float32).reshape(1, 4, 4, 1))
>>> with tv.Session() as s:
...     s.run(tv.nn.max_pool(x, [1, 2, 2, 1], [1, 2, 2, 1], "VALID"))[0, :, :, 0]
array([[ 5.,  7.],
       [13., 15.]], dtype=float32)
"""
from __future__ import annotations

import itertools

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from ...vm.kernels import threads
from ...framework.errors import InvalidArgumentError
from ...vm.kernels.array_api import array_namespace
from ...framework.op_def_library import apply_op
from ...framework.op_registry import register_op
from ...framework.tensor_conversion import convert_to_tensor
from . import nn_conv_accel as _accel

__all__: list[str] = []

_FORMATS = ("NHWC", "NCHW")


# ---- geometry --------------------------------------------------------------------------------
def _hw(v, data_format):
    """The (H, W) entries of a 4-vector given in ``data_format`` order."""
    return (v[1], v[2]) if data_format == "NHWC" else (v[2], v[3])


def _out_and_pads(n, k, s, padding):
    """Output size and (before, after) padding of one spatial dim (``k`` is the effective,
    dilated window size)."""
    if padding == "VALID":
        return (n - k) // s + 1, (0, 0)
    out = -(-n // s)
    total = max((out - 1) * s + k - n, 0)
    return out, (total // 2, total - total // 2)


def _check_geometry(op_type, x_shape, attrs, k_hw):
    """Validate strides/padding/format statically and return the NHWC output (H, W) or Nones."""
    df, padding = attrs["data_format"], attrs["padding"]
    if df not in _FORMATS:
        raise InvalidArgumentError(f"{op_type}: data_format must be 'NHWC' or 'NCHW', got {df!r}")
    if padding not in ("SAME", "VALID"):
        raise InvalidArgumentError(
            f"{op_type}: padding must be 'SAME' or 'VALID', got {padding!r}")
    for key in ("strides", "ksize", "dilations"):
        v = attrs.get(key)
        if v is None:
            continue
        if len(v) != 4 or any(int(e) < 1 for e in v):
            raise InvalidArgumentError(
                f"{op_type}: {key} must be 4 positive ints, got {list(v)}")
        n_ax, c_ax = (0, 3) if df == "NHWC" else (0, 1)
        if v[n_ax] != 1 or v[c_ax] != 1:
            raise InvalidArgumentError(
                f"{op_type}: {key} in the batch and depth dimensions must be 1, got {list(v)}")
    if x_shape is None:
        return None, None
    if len(x_shape) != 4:
        raise InvalidArgumentError(f"{op_type}: input must be 4-D, got shape {list(x_shape)}")
    h, w = _hw(x_shape, df)
    sh, sw = _hw(attrs["strides"], df)
    out = []
    for n, k, s, dim in ((h, k_hw[0], sh, "height"), (w, k_hw[1], sw, "width")):
        if n is None or k is None:
            out.append(None)
            continue
        o, _ = _out_and_pads(n, k, s, padding)
        if o < 0 or (padding == "VALID" and n < k):
            raise InvalidArgumentError(
                f"{op_type}: the window ({k}) is larger than the input {dim} ({n}) with "
                f"padding VALID: the output would be empty or negative")
        out.append(o)
    return tuple(out)


def _nhwc(x, df):
    return x if df == "NHWC" else np.transpose(x, (0, 2, 3, 1))


def _from_nhwc(x, df):
    return x if df == "NHWC" else np.transpose(x, (0, 3, 1, 2))


def _shape_from_nhwc(n, oh, ow, c, df):
    return (n, oh, ow, c) if df == "NHWC" else (n, c, oh, ow)


def _geometry(x, kh, kw, strides, padding, df, dilations=(1, 1, 1, 1)):
    """NHWC geometry of one call: (sh, sw, dh, dw, oh, ow, (pt, pb), (pl, pr))."""
    sh, sw = _hw(strides, df)
    dh, dw = _hw(dilations, df)
    oh, ph = _out_and_pads(x.shape[1], (kh - 1) * dh + 1, sh, padding)
    ow, pw = _out_and_pads(x.shape[2], (kw - 1) * dw + 1, sw, padding)
    if oh < 0 or ow < 0:
        raise InvalidArgumentError(
            f"window {kh}x{kw} larger than input {x.shape[1]}x{x.shape[2]} with VALID padding")
    return sh, sw, dh, dw, oh, ow, ph, pw


def _windows(xp, kh, kw, sh, sw, dh, dw, oh, ow):
    """All windows of the padded NHWC ``xp`` as a view ``[N, OH, OW, C, KH, KW]``."""
    ekh, ekw = (kh - 1) * dh + 1, (kw - 1) * dw + 1
    v = sliding_window_view(xp, (ekh, ekw), axis=(1, 2))
    return v[:, :oh * sh:sh, :ow * sw:sw, :, ::dh, ::dw]


BLOCK_BYTES = 1 << 20  # im2col block size: ~1 MB, in L2 for its product (1.5% faster than 2 MB)


def _blocks(n, oh, row_bytes):
    """Split the output rows ``[N, OH]`` of a convolution into blocks of about
    :data:`BLOCK_BYTES` of im2col (``row_bytes`` per output row): whole images while one
    fits, else runs of rows of one image, so each block's output is contiguous in
    ``[N, OH, OW, O]``. Yields ``(n0, n1, h0, h1)``.

    >>> list(_blocks(5, 4, BLOCK_BYTES // 8))  # 2 images of 4 rows per block
    [(0, 2, 0, 4), (2, 4, 0, 4), (4, 5, 0, 4)]
    >>> list(_blocks(1, 5, BLOCK_BYTES // 2))
    [(0, 1, 0, 2), (0, 1, 2, 4), (0, 1, 4, 5)]
    """
    rows = max(1, BLOCK_BYTES // max(row_bytes, 1))
    if n == 0 or oh == 0:
        return
    if rows >= oh:
        per = rows // oh
        for n0 in range(0, n, per):
            yield n0, min(n, n0 + per), 0, oh
    else:
        for i in range(n):
            for h0 in range(0, oh, rows):
                yield i, i + 1, h0, min(oh, h0 + rows)


def _over_im2col_blocks(x, kh, kw, sh, sw, dh, dw, oh, ow, ph, pw, work):
    """Call ``work(n0, n1, h0, h1, cols, acc)`` for each im2col block of the padded NHWC
    ``x`` (:func:`_blocks`): ``cols`` is the block's windows as a ``[rows, KH * KW * C]``
    matrix (columns in the filter's ``[KH, KW, C]`` order), ``acc`` what the thread's previous
    call returned. One buffer per thread is reused for its blocks, so a block is still in
    cache when its matrix product reads it (measured 30% faster under load than one im2col
    of the whole batch, and 31 MB less memory on mnist_deep's second layer). With an
    intra-op pool (:mod:`tensorvm.vm.kernels.threads`) the blocks are shared out among its threads.
    Returns the list of what each thread's last ``work`` call returned.

    With few channels (C <= :data:`TAP_MAJOR_C`, e.g. an image's first layer) the block is
    built tap-major, ``[KH * KW * C, rows]`` (``cols`` is its transposed view: BLAS reads it
    as is): each tap is then one copy of whole image rows, where the row-major layout copies
    runs of C elements (for C = 1: 0.3 ms instead of 1.05 ms on mnist_deep's first layer)."""
    new = array_namespace(x).empty  # buffers on x's device
    xp = _pad(x, ph, pw)
    n, c = xp.shape[0], xp.shape[3]
    k = kh * kw * c
    blocks = list(_blocks(n, oh, ow * k * xp.dtype.itemsize))
    if c <= TAP_MAJOR_C:
        def fill(buf, n0, n1, h0, h1):
            m = (n1 - n0) * (h1 - h0) * ow
            cols_t = buf[:k * m].reshape(kh, kw, c, n1 - n0, h1 - h0, ow)
            for i in range(kh):
                r0 = i * dh + h0 * sh
                for j in range(kw):
                    tap = xp[n0:n1, r0:r0 + (h1 - h0 - 1) * sh + 1:sh,
                             j * dw:j * dw + (ow - 1) * sw + 1:sw, :]
                    np.copyto(cols_t[i, j], tap.transpose(3, 0, 1, 2))
            return cols_t.reshape(k, m).T
    else:
        win = _windows(xp, kh, kw, sh, sw, dh, dw, oh, ow).transpose(0, 1, 2, 4, 5, 3)

        def fill(buf, n0, n1, h0, h1):
            blk = win[n0:n1, h0:h1]
            cols = buf[:blk.size].reshape(blk.shape)
            np.copyto(cols, blk)
            return cols.reshape(-1, k)

    def run(part):
        acc = None
        buf = None
        for n0, n1, h0, h1 in part:
            if buf is None:
                buf = new((n1 - n0) * (h1 - h0) * ow * k, xp.dtype)
            acc = work(n0, n1, h0, h1, fill(buf, n0, n1, h0, h1), acc)
        return acc
    return _share(blocks, run)


TAP_MAJOR_C = 4  # input channels up to which the im2col is built tap-major


def _share(blocks, run):
    """``run(part)`` over ``blocks``: all of them in this thread, or, with an intra-op pool
    (:mod:`tensorvm.vm.kernels.threads`), one contiguous part per pool thread (this thread runs the
    first). Returns each part's result."""
    width = min(threads.intra_op_threads(), len(blocks))
    if width < 2:
        return [run(blocks)]
    parts = [blocks[len(blocks) * i // width:len(blocks) * (i + 1) // width]
             for i in range(width)]
    pool = threads._get_pool(width)
    futs = [pool.submit(run, part) for part in parts[1:]]
    first = run(parts[0])
    return [first] + [f.result() for f in futs]


def _pad(x, ph, pw, value=0):
    if ph == (0, 0) and pw == (0, 0):
        return x
    return np.pad(x, ((0, 0), ph, pw, (0, 0)), constant_values=value)


# ---- conv2d ---------------------------------------------------------------------------------
def check_filter(op, x, f, last_dim="out_channels"):
    """The checks every 2-D convolution makes of its input and 4-D filter (one float dtype);
    returns the filter's static shape."""
    if x.dtype != f.dtype:
        raise InvalidArgumentError(f"{op}: input ({x.dtype.name}) and filter ({f.dtype.name}) "
                                   f"must have the same dtype")
    if not x.dtype.is_floating:
        raise InvalidArgumentError(f"{op} expects floating-point tensors, got {x.dtype.name}")
    fs = f._shape
    if fs is not None and len(fs) != 4:
        raise InvalidArgumentError(
            f"{op}: filter must be 4-D [height, width, in_channels, {last_dim}], got shape "
            f"{list(fs)}")
    return fs


def _conv_shape(inputs, attrs):
    x, f = inputs[0], inputs[1]
    op = "Conv2D"
    fs = check_filter(op, x, f)
    df = attrs["data_format"]
    k_hw = (None, None) if fs is None else tuple(
        None if k is None else (k - 1) * d + 1 for k, d in zip(fs[:2], _hw(attrs["dilations"],
                                                                            df)))
    oh, ow = _check_geometry(op, x._shape, attrs, k_hw)
    xs = x._shape
    if xs is not None and fs is not None:
        c = xs[3] if df == "NHWC" else xs[1]
        if c is not None and fs[2] is not None and c != fs[2]:
            raise InvalidArgumentError(
                f"{op}: input depth must equal filter in_channels: input {list(xs)} has depth "
                f"{c} but filter {list(fs)} has in_channels {fs[2]}")
    if xs is None:
        return [(x.dtype, None)]
    return [(x.dtype, _shape_from_nhwc(xs[0], oh, ow, None if fs is None else fs[3], df))]


def _conv_kernel(x, f, strides, padding, data_format, dilations):
    if _accel.wants(x, f):  # oneDNN through PyTorch, when installed (nn_conv_accel)
        return _accel.conv2d(x, f, strides, padding, data_format, dilations)
    x = _nhwc(x, data_format)
    kh, kw = f.shape[:2]
    sh, sw, dh, dw, oh, ow, ph, pw = _geometry(x, kh, kw, strides, padding, data_format,
                                               dilations)
    if f.shape[2] != x.shape[3]:
        raise InvalidArgumentError(f"input depth {x.shape[3]} != filter in_channels "
                                   f"{f.shape[2]}")
    o = f.shape[3]
    out = array_namespace(x).empty((x.shape[0], oh, ow, o), np.result_type(x.dtype, f.dtype))
    f2 = f.reshape(-1, o)

    def work(n0, n1, h0, h1, cols, _):
        np.matmul(cols, f2, out=out[n0:n1, h0:h1].reshape(-1, o))  # its rows of the output
    _over_im2col_blocks(x, kh, kw, sh, sw, dh, dw, oh, ow, ph, pw, work)
    return _from_nhwc(out.astype(x.dtype, copy=False), data_format)


def _conv_backprop_input_kernel(x, f, g, strides, padding, data_format, dilations):
    """d(conv2d)/d(input) for input ``x`` (only its shape is used)."""
    if _accel.wants(x, f, g):
        return _accel.conv2d_backprop_input(x, f, g, strides, padding, data_format, dilations)
    xs = _nhwc(x, data_format).shape
    g = _nhwc(g, data_format)
    kh, kw = f.shape[:2]
    sh, sw, dh, dw, oh, ow, ph, pw = _geometry(np.empty(xs, bool), kh, kw, strides, padding,
                                               data_format, dilations)
    if (sh, sw) == (1, 1) and g.size and f.size:
        dx = _conv_transpose_rows(g, f, xs, dh, dw, ph, pw)
    else:
        dx = _conv_backprop_input_taps(g, f, xs, sh, sw, dh, dw, oh, ow, ph, pw)
    return _from_nhwc(dx.astype(g.dtype, copy=False), data_format)


def _conv_transpose_rows(g, f, xs, dh, dw, ph, pw):
    """The input gradient of a stride-1 convolution as the transposed convolution: ``g``
    padded by (window - 1 - pad) and correlated with the flipped filter (its in/out channels
    swapped). Its im2col is along the width only, in height-major order ``[H + ekh - 1, n, W,
    KW * O]`` for a block of ``n`` images (about :data:`BLOCK_BYTES`, one reused buffer), so
    each filter row is one matrix product over a contiguous run of it: KH products of depth
    KW * O per block, summed into ``[H, n, W, C]`` and written transposed into ``dx``.
    Measured 20% faster than one product per filter tap added into strided views, and than
    a full im2col of ``g`` (KH times the copy)."""
    n, h, w, c = xs
    kh, kw, _, o = f.shape
    ekh, ekw = (kh - 1) * dh + 1, (kw - 1) * dw + 1
    dt = np.result_type(g.dtype, f.dtype)
    new = array_namespace(g).empty  # dx and the buffers on g's device
    gt = np.pad(g.transpose(1, 0, 2, 3),  # [OH, N, OW, O], padded in H and W
                ((ekh - 1 - ph[0], ekh - 1 - ph[1]), (0, 0),
                 (ekw - 1 - pw[0], ekw - 1 - pw[1]), (0, 0)))
    hg = gt.shape[0]
    win = sliding_window_view(gt, ekw, axis=2)[:, :, :w, :, ::dw].transpose(0, 1, 2, 4, 3)
    # flipped filter, [KH, KW * O, C]: row i of the transposed conv is filter row KH - 1 - i
    fr = f[::-1, ::-1].transpose(0, 1, 3, 2).reshape(kh, kw * o, c)
    dx = new(xs, dt)
    per = max(1, BLOCK_BYTES // max(hg * w * kw * o * dt.itemsize, 1))
    blocks = [(n0, min(n, n0 + per)) for n0 in range(0, n, per)]

    def run(part):
        buf = None
        for n0, n1 in part:
            m = n1 - n0
            if buf is None:
                buf = new(hg * m * w * kw * o, dt)
            rows = buf[:hg * m * w * kw * o].reshape(hg, m, w, kw, o)
            np.copyto(rows, win[:, n0:n1])
            rows = rows.reshape(hg, m * w, kw * o)
            out = np.matmul(rows[:h].reshape(-1, kw * o), fr[0])
            for i in range(1, kh):
                out += rows[i * dh:i * dh + h].reshape(-1, kw * o) @ fr[i]
            dx[n0:n1] = out.reshape(h, m, w, c).transpose(1, 0, 2, 3)
    _share(blocks, run)
    return dx


def _conv_backprop_input_taps(g, f, xs, sh, sw, dh, dw, oh, ow, ph, pw):
    """The input gradient of a strided convolution: one product per filter tap, each a
    contiguous [N * OH * OW, C] block added into its strided view of the padded input
    gradient (17% faster than one product whose [N, OH, OW, KH, KW, C] result is scattered
    tap by tap from strided reads)."""
    kh, kw = f.shape[:2]
    n, h, w, c = xs
    g2 = g.reshape(-1, g.shape[3])
    xpn = array_namespace(g)
    dxp = xpn.zeros((n, h + ph[0] + ph[1], w + pw[0] + pw[1], c), np.result_type(g.dtype, f.dtype))
    buf = xpn.empty((g2.shape[0], c), dxp.dtype)
    for i in range(kh):
        for j in range(kw):
            np.matmul(g2, f[i, j].T, out=buf)
            dxp[:, i * dh:i * dh + (oh - 1) * sh + 1:sh,
                j * dw:j * dw + (ow - 1) * sw + 1:sw, :] += buf.reshape(n, oh, ow, c)
    return dxp[:, ph[0]:ph[0] + h, pw[0]:pw[0] + w, :]


def _conv_backprop_filter_kernel(x, f, g, strides, padding, data_format, dilations):
    """d(conv2d)/d(filter) for filter ``f`` (only its shape is used)."""
    if _accel.wants(x, f, g):
        return _accel.conv2d_backprop_filter(x, f, g, strides, padding, data_format, dilations)
    x = _nhwc(x, data_format)
    g = _nhwc(g, data_format)
    kh, kw = f.shape[:2]
    sh, sw, dh, dw, oh, ow, ph, pw = _geometry(x, kh, kw, strides, padding, data_format,
                                               dilations)
    o = g.shape[3]

    def work(n0, n1, h0, h1, cols, acc):
        part = cols.T @ g[n0:n1, h0:h1].reshape(-1, o)  # [KH * KW * C, O]
        if acc is None:
            return part
        acc += part
        return acc
    parts = [p for p in _over_im2col_blocks(x, kh, kw, sh, sw, dh, dw, oh, ow, ph, pw, work)
             if p is not None]
    df = parts[0] if parts else array_namespace(x).zeros((kh * kw * x.shape[3], o),
                                                         np.result_type(x.dtype, g.dtype))
    for p in parts[1:]:
        df += p
    return df.reshape(f.shape).astype(g.dtype, copy=False)


def _conv_attrs(op):
    return {k: op.attrs[k] for k in ("strides", "padding", "data_format", "dilations")}


def _conv_grad(op, g):
    x, f = op.inputs
    a = _conv_attrs(op)
    return [apply_op("Conv2DBackpropInput", [x, f, g], a).outputs[0],
            apply_op("Conv2DBackpropFilter", [x, f, g], a).outputs[0]]


def _conv_bi_grad(op, gg):
    # out = BackpropInput(x, f, g) is linear in f and in g.
    _, f, g = op.inputs
    a = _conv_attrs(op)
    return [None, apply_op("Conv2DBackpropFilter", [gg, f, g], a).outputs[0],
            apply_op("Conv2D", [gg, f], a).outputs[0]]


def _conv_bf_grad(op, gg):
    # out = BackpropFilter(x, f, g) is linear in x and in g.
    x, _, g = op.inputs
    a = _conv_attrs(op)
    return [apply_op("Conv2DBackpropInput", [x, gg, g], a).outputs[0], None,
            apply_op("Conv2D", [x, gg], a).outputs[0]]


register_op("Conv2D", _conv_shape, _conv_kernel, grad=_conv_grad)
register_op("Conv2DBackpropInput", lambda inputs, attrs: [(inputs[2].dtype, inputs[0]._shape)],
            _conv_backprop_input_kernel, grad=_conv_bi_grad, shape_only=(0,))
register_op("Conv2DBackpropFilter", lambda inputs, attrs: [(inputs[2].dtype, inputs[1]._shape)],
            _conv_backprop_filter_kernel, grad=_conv_bf_grad, shape_only=(1,))


def _int4(v, what, op_type):
    if isinstance(v, int):
        v = [v]
    v = [int(e) for e in v]
    if len(v) == 1:
        v = [1, v[0], v[0], 1]
    elif len(v) == 2:
        v = [1, v[0], v[1], 1]
    if len(v) != 4:
        raise InvalidArgumentError(f"{op_type}: {what} must have 1, 2 or 4 entries, got {v}")
    return tuple(v)


def _nchw4(v, df):
    """A 1/2-entry spec expanded in NHWC order, moved to NCHW when needed."""
    return v if df == "NHWC" else (v[0], v[3], v[1], v[2])


def _spec(v, what, op_type, df):
    full = not isinstance(v, int) and len(list(v)) == 4
    t = _int4(v, what, op_type)
    return t if full else _nchw4(t, df)


def conv2d(input, filter=None, strides=None, padding=None, use_cudnn_on_gpu=True,
           data_format="NHWC", dilations=(1, 1, 1, 1), name=None, filters=None):
    """2-D convolution (cross-correlation, as in TF) of ``input`` [N, H, W, C] ("NHWC") or
    [N, C, H, W] ("NCHW") with ``filter`` [KH, KW, C, O]; ``strides``/``dilations`` are
    4-vectors in ``data_format`` order; ``padding`` is "SAME" or "VALID"."""
    filter = filters if filter is None else filter
    if filter is None or strides is None or padding is None:
        raise InvalidArgumentError("conv2d needs input, filter, strides and padding")
    input = convert_to_tensor(input)
    filter = convert_to_tensor(filter, dtype=input.dtype if not hasattr(filter, "dtype")
                               else None)
    df = data_format or "NHWC"
    attrs = {"strides": _spec(strides, "strides", "Conv2D", df),
             "padding": padding if not isinstance(padding, str) else padding.upper(),
             "data_format": df, "dilations": _spec(dilations, "dilations", "Conv2D", df)}
    if attrs["dilations"] != (1, 1, 1, 1) and attrs["strides"] != (1, 1, 1, 1):
        raise InvalidArgumentError("Conv2D: dilations > 1 need strides of 1 (as in TF)")
    if not isinstance(padding, str):
        raise InvalidArgumentError(f"Conv2D: padding must be 'SAME' or 'VALID', got {padding!r}")
    return apply_op("Conv2D", [input, filter], attrs, name=name).outputs[0]


# ---- pooling --------------------------------------------------------------------------------
def _pool_shape(op_type):
    def shape_fn(inputs, attrs):
        x = inputs[0]
        if not x.dtype.is_floating:
            raise InvalidArgumentError(
                f"{op_type} expects a floating-point tensor, got {x.dtype.name}")
        oh, ow = _check_geometry(op_type, x._shape, attrs, _hw(attrs["ksize"],
                                                               attrs["data_format"]))
        if x._shape is None:
            return [(x.dtype, None)]
        xs, df = x._shape, attrs["data_format"]
        c = xs[3] if df == "NHWC" else xs[1]
        return [(x.dtype, _shape_from_nhwc(xs[0], oh, ow, c, df))]
    return shape_fn


def _pool_setup(x, ksize, strides, padding, data_format):
    x = _nhwc(x, data_format)
    kh, kw = _hw(ksize, data_format)
    geo = _geometry(x, kh, kw, strides, padding, data_format)
    return x, kh, kw, geo


def _tap_slices(kh, kw, sh, sw, oh, ow):
    """Index tuples picking, for each window tap (i, j) in row-major order, the padded
    NHWC input element that tap sees in every window: a strided view ``[N, OH, OW, C]``."""
    return [(slice(None), slice(i, i + (oh - 1) * sh + 1, sh),
             slice(j, j + (ow - 1) * sw + 1, sw)) for i in range(kh) for j in range(kw)]


def _window_max(xp, taps, out=None):
    """The max over the taps' views of ``xp``, in tap order (``max(max(t0, t1), t2) ...``,
    so a tie between -0.0 and 0.0 or a NaN resolves the same way on every path), written
    into ``out`` when given."""
    if len(taps) == 1:
        if out is None:
            return xp[taps[0]].copy()
        np.copyto(out, xp[taps[0]])
        return out
    m = np.maximum(xp[taps[0]], xp[taps[1]], out=out)
    for t in taps[2:]:
        np.maximum(m, xp[t], out=m)
    return m


POOL_BLOCK_BYTES = 1 << 20  # input bytes per block of the tiled max pool (about L2's half)


def _tiled_max_pool(tiles):
    """MaxPool when the windows tile the input exactly (:func:`_tiles`): the taps' maxima
    over blocks of whole images of about :data:`POOL_BLOCK_BYTES` of input, so a block's
    taps are read from cache after the first (mnist_deep's 28x28x32 pool: 0.62 -> 0.54 ms
    alone). The bits of :func:`_window_max` over the whole input."""
    n, oh, kh, ow, kw, c = tiles.shape
    out = array_namespace(tiles).empty((n, oh, ow, c), tiles.dtype)
    per = max(1, POOL_BLOCK_BYTES // max(tiles[:1].nbytes, 1))
    taps = [(slice(None), slice(None), i, slice(None), j) for i in range(kh) for j in range(kw)]
    for n0 in range(0, n, per):
        _window_max(tiles[n0:n0 + per], taps, out[n0:n0 + per])
    return out


def _tiles(x, kh, kw, sh, sw, oh, ow, ph, pw):
    """``x`` [N, H, W, C] as a view [N, OH, KH, OW, KW, C] when the windows tile it exactly
    (stride == window, no padding, H == OH * KH, W == OW * KW: the usual 2x2/2 pooling),
    else None. Tap (i, j) of every window is then ``v[:, :, i, :, j, :]``."""
    if (sh, sw) != (kh, kw) or ph != (0, 0) or pw != (0, 0) or \
            x.shape[1] != oh * kh or x.shape[2] != ow * kw:
        return None
    n, _, _, c = x.shape
    try:
        return x.reshape(n, oh, kh, ow, kw, c)  # a view for a C-contiguous x
    except ValueError:
        return None


def _apart_unpadded(kh, kw, sh, sw, ph, pw) -> bool:
    """Windows that neither overlap nor pad: the pools PyTorch's kernels take
    (:mod:`tensorvm.ops.nn.nn_conv_accel`)."""
    return sh >= kh and sw >= kw and ph == (0, 0) and pw == (0, 0)


def _max_pool_kernel(x, ksize, strides, padding, data_format):
    x, kh, kw, (sh, sw, _, _, oh, ow, ph, pw) = _pool_setup(x, ksize, strides, padding,
                                                              data_format)
    if oh == 0 or ow == 0 or x.size == 0:
        return _from_nhwc(array_namespace(x).zeros((x.shape[0], oh, ow, x.shape[3]), x.dtype),
                          data_format)
    if _apart_unpadded(kh, kw, sh, sw, ph, pw) and _accel.wants(x):
        # PyTorch's pooling (nn_conv_accel): the same values; it keeps the argmax for the
        # gradient
        return _from_nhwc(_accel.max_pool(x, kh, kw, sh, sw), data_format)
    tiles = _tiles(x, kh, kw, sh, sw, oh, ow, ph, pw)
    if tiles is not None:
        return _from_nhwc(_tiled_max_pool(tiles), data_format)
    xp = _pad(x, ph, pw, -np.inf)
    return _from_nhwc(_window_max(xp, _tap_slices(kh, kw, sh, sw, oh, ow)), data_format)


def _first_max_taps(xp, y, kh, kw, sh, sw, oh, ow):
    """For each tap, in row-major window order: its slice and a boolean ``[N, OH, OW, C]``
    that is true where that tap holds its window's first maximum (the element TF's
    gradient goes to); ``y`` is the windows' max (MaxPool's output, not recomputed). Three
    whole-array operations per tap (two on booleans), no loop over elements. A window whose
    max is NaN has no hit."""
    taps = _tap_slices(kh, kw, sh, sw, oh, ow)
    free = array_namespace(y).ones(y.shape, bool)
    last = len(taps) - 1
    for k, t in enumerate(taps):
        hit = np.equal(xp[t], y)
        if k:
            hit &= free
        if k < last:
            free ^= hit
        yield t, hit


def _tiled_max_pool_grad(tiles, y, g, kh, kw):
    """MaxPoolGrad when the windows tile the input exactly (:func:`_tiles`, the usual 2x2/2)
    and ``g`` is finite, as whole-array operations on the ``[N, OH, KH, OW, KW, C]`` view:
    one compare of every element with its window's max (broadcast), then, tap by tap in
    row-major window order, a tap's hit is dropped where an earlier tap already hit (a
    boolean ``greater`` against the running "hit before" mask: TF's first-maximum rule), and
    the mask is cast into dx (contiguous) and multiplied in place by the broadcast ``g``
    (NumPy's float-by-boolean product casts in small buffers: 25% slower). The same bits as
    the tap-by-tap form (``g * hit`` per tap), in KH * KW + 3 passes instead of about 4 per
    tap (mnist_deep's two pools: 2.4 + 1.08 -> 2.0 + 0.77 -> 1.8 + 0.68 ms alone)."""
    xpn = array_namespace(g)
    e = xpn.empty(tiles.shape, bool)
    np.equal(tiles, y[:, :, None, :, None, :], out=e)
    first = e[:, :, 0, :, 0, :]
    seen = None  # where an earlier tap hit
    taps = list(itertools.product(range(kh), range(kw)))[1:]
    for k, (i, j) in enumerate(taps):
        hit = e[:, :, i, :, j, :]
        np.greater(hit, first if seen is None else seen, out=hit)  # hit and not seen
        if k + 1 < len(taps):
            seen = np.logical_or(first, hit) if seen is None else \
                np.logical_or(seen, hit, out=seen)
    dx = xpn.empty((tiles.shape[0], tiles.shape[1] * kh, tiles.shape[3] * kw, tiles.shape[5]),
                   g.dtype)
    d = dx.reshape(tiles.shape)
    np.copyto(d, e)  # the mask as 1.0 / 0.0: one contiguous cast
    np.multiply(d, g[:, :, None, :, None, :], out=d)  # = g * hit: a product commutes
    return dx


def _max_pool_grad_kernel(x, y, g, ksize, strides, padding, data_format):
    """d(max_pool)/d(x) given MaxPool's input ``x``, output ``y`` and output gradient ``g``
    (TF's MaxPoolGrad(orig_input, orig_output, grad))."""
    x, kh, kw, (sh, sw, _, _, oh, ow, ph, pw) = _pool_setup(x, ksize, strides, padding,
                                                            data_format)
    g = _nhwc(g, data_format)
    y = _nhwc(y, data_format)
    xpn = array_namespace(g)
    if not (oh and ow and x.size):
        return _from_nhwc(xpn.zeros(x.shape, g.dtype), data_format)
    # g * hit is 6x faster than np.where(hit, g, 0), but would carry a NaN/inf of g to
    # the window's other elements (0 * inf): only a finite g takes that way. On a device both
    # cost alike, and asking "finite?" would make the host wait for the step's kernels.
    finite = xpn is np and bool(np.isfinite(g).all())
    if finite and _apart_unpadded(kh, kw, sh, sw, ph, pw) and _accel.wants(x, y, g) and \
            not np.isnan(y).any():
        # PyTorch's kernel (nn_conv_accel): the same first-max choice. Here stay a NaN window
        # (another gradient rule), padding, and overlapping windows (their sums' order)
        return _from_nhwc(_accel.max_pool_grad(x, y, g, kh, kw, sh, sw), data_format)
    tiles = _tiles(x, kh, kw, sh, sw, oh, ow, ph, pw)
    if tiles is not None and finite:
        return _from_nhwc(_tiled_max_pool_grad(tiles, y, g, kh, kw), data_format)
    xp = _pad(x, ph, pw, -np.inf)
    dxp = xpn.zeros(xp.shape, g.dtype)
    disjoint = sh >= kh and sw >= kw  # each input element is in at most one window
    for t, hit in _first_max_taps(xp, y, kh, kw, sh, sw, oh, ow):
        if disjoint and finite:
            np.multiply(g, hit, out=dxp[t])  # written in place: no temporary, no add
        else:
            dxp[t] += g * hit if finite else np.where(hit, g, 0)
    dx = dxp[:, ph[0]:ph[0] + x.shape[1], pw[0]:pw[0] + x.shape[2], :]
    return _from_nhwc(dx.astype(g.dtype, copy=False), data_format)


def _max_pool_grad_grad_kernel(x, y, gg, ksize, strides, padding, data_format):
    """The gradient of MaxPoolGrad wrt its ``g``: ``gg`` picked at each window's argmax."""
    x, kh, kw, (sh, sw, _, _, oh, ow, ph, pw) = _pool_setup(x, ksize, strides, padding,
                                                            data_format)
    gg = _nhwc(gg, data_format)
    y = _nhwc(y, data_format)
    out = array_namespace(gg).zeros((x.shape[0], oh, ow, x.shape[3]), gg.dtype)
    if oh and ow and x.size:
        ggp = _pad(gg, ph, pw)
        finite = bool(np.isfinite(gg).all())
        for t, hit in _first_max_taps(_pad(x, ph, pw, -np.inf), y, kh, kw, sh, sw, oh, ow):
            out += ggp[t] * hit if finite else np.where(hit, ggp[t], 0)
    return _from_nhwc(out, data_format)


def _pool_attrs(op):
    return {k: op.attrs[k] for k in ("ksize", "strides", "padding", "data_format")}


register_op("MaxPool", _pool_shape("MaxPool"), _max_pool_kernel,
            grad=lambda op, g: [apply_op("MaxPoolGrad", [op.inputs[0], op.outputs[0], g],
                                         _pool_attrs(op)).outputs[0]])
register_op("MaxPoolGrad", lambda inputs, attrs: [(inputs[2].dtype, inputs[0]._shape)],
            _max_pool_grad_kernel,
            grad=lambda op, gg: [None, None,
                                 apply_op("MaxPoolGradGrad", [op.inputs[0], op.inputs[1], gg],
                                          _pool_attrs(op)).outputs[0]])
register_op("MaxPoolGradGrad", lambda inputs, attrs: [(inputs[2].dtype, None)],
            _max_pool_grad_grad_kernel, differentiable=False)


def _valid_counts(h, w, kh, kw, geo, dtype, like):
    """How many unpadded elements each window holds, ``[1, OH, OW, 1]``, on ``like``'s
    device."""
    sh, sw, _, _, oh, ow, ph, pw = geo
    ones = _pad(array_namespace(like).ones((1, h, w, 1), dtype), ph, pw)
    cnt = _windows(ones, kh, kw, sh, sw, 1, 1, oh, ow).sum(axis=(4, 5))
    return np.maximum(cnt, 1)  # [1, OH, OW, 1]


def _avg_pool_kernel(value, ksize, strides, padding, data_format):
    x, kh, kw, geo = _pool_setup(value, ksize, strides, padding, data_format)
    sh, sw, _, _, oh, ow, ph, pw = geo
    xp = _pad(x, ph, pw)
    s = array_namespace(x).zeros((x.shape[0], oh, ow, x.shape[3]), x.dtype)
    for t in _tap_slices(kh, kw, sh, sw, oh, ow) if oh and ow else ():
        s += xp[t]
    out = s / _valid_counts(x.shape[1], x.shape[2], kh, kw, geo, x.dtype, x)
    return _from_nhwc(out.astype(x.dtype, copy=False), data_format)


def _avg_pool_grad_kernel(x, g, ksize, strides, padding, data_format):
    x, kh, kw, geo = _pool_setup(x, ksize, strides, padding, data_format)
    sh, sw, _, _, oh, ow, ph, pw = geo
    g = _nhwc(g, data_format)
    gs = g / _valid_counts(x.shape[1], x.shape[2], kh, kw, geo, g.dtype, g)
    n, h, w, c = x.shape
    dxp = array_namespace(gs).zeros((n, h + ph[0] + ph[1], w + pw[0] + pw[1], c), gs.dtype)
    for t in _tap_slices(kh, kw, sh, sw, oh, ow) if oh and ow else ():
        dxp[t] += gs
    dx = dxp[:, ph[0]:ph[0] + h, pw[0]:pw[0] + w, :]
    return _from_nhwc(dx.astype(g.dtype, copy=False), data_format)


register_op("AvgPool", _pool_shape("AvgPool"), _avg_pool_kernel,
            grad=lambda op, g: [apply_op("AvgPoolGrad", [op.inputs[0], g],
                                         _pool_attrs(op)).outputs[0]])
register_op("AvgPoolGrad", lambda inputs, attrs: [(inputs[1].dtype, inputs[0]._shape)],
            _avg_pool_grad_kernel, shape_only=(0,),
            grad=lambda op, gg: [None, apply_op("AvgPool", [gg], _pool_attrs(op)).outputs[0]])


def _pool(op_type, value, ksize, strides, padding, data_format, name):
    df = data_format or "NHWC"
    if not isinstance(padding, str):
        raise InvalidArgumentError(f"{op_type}: padding must be 'SAME' or 'VALID', got "
                                   f"{padding!r}")
    attrs = {"ksize": _spec(ksize, "ksize", op_type, df),
             "strides": _spec(strides, "strides", op_type, df),
             "padding": padding.upper(), "data_format": df}
    return apply_op(op_type, [value], attrs, name=name).outputs[0]


def max_pool(value, ksize, strides, padding, data_format="NHWC", name=None, input=None):
    """Max over each ``ksize`` window (4-vectors in ``data_format`` order); the gradient goes
    to each window's (first) argmax."""
    return _pool("MaxPool", value if input is None else input, ksize, strides, padding,
                 data_format, name)


def avg_pool(value, ksize, strides, padding, data_format="NHWC", name=None, input=None):
    """Mean over each ``ksize`` window; with "SAME" padding only unpadded elements count."""
    return _pool("AvgPool", value if input is None else input, ksize, strides, padding,
                 data_format, name)
