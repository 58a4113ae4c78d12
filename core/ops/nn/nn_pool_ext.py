"""More of TF 1.x's pooling for ``tv.nn``: ``max_pool_with_argmax`` (TF's flattened argmax),
``fractional_max_pool``/``fractional_avg_pool`` (TF's pooling sequences, random or
pseudo-random, overlapping or not), the generic ``pool`` and ``with_space_to_batch``; the
window helpers here serve :mod:`tensorvm.ops.nn.nn_dilation` too.

As in :mod:`tensorvm.ops.nn.nn_conv`, window ops work tap by tap: each of the ``KH * KW`` taps is
a strided view ``[N, OH, OW, C]`` of the padded input, so a window's max (and which tap holds
its first maximum, row-major, as TF's CPU kernels pick) is ``KH * KW`` whole-array operations.
Fractional pooling gathers each output's box (``[N, OH, OW, bh * bw, C]``, its box sizes
differ by at most one, shorter boxes masked) for the max and its argmax; its average is two
matrix products with the 0/1 row and column membership matrices. Gradients scatter-add into
flattened positions. Every kernel creates its arrays in the namespace of its inputs, so it is
also the op's GPU kernel; a fractional pool draws its sequences on the host (a seed gives the
same regions on both device types) and keeps them in host memory.

>>> import numpy as np, tensorvm as tv
>>> x = tv.constant(np.array([[1., 5.], [7., 2.]]).reshape(1, 2, 2, 1))
>>> y, arg = tv.nn.max_pool_with_argmax(x, [1, 2, 2, 1], [1, 2, 2, 1], "VALID")
>>> with tv.Session() as s: s.run([y, arg])[1].ravel().tolist()
[2]
"""
from __future__ import annotations

import numpy as np

from ...framework import dtypes as _dt
from ...framework.errors import InvalidArgumentError, UnimplementedError
from ...framework.graph import Tensor, name_scope
from ...vm.kernels.array_api import array_namespace
from ...framework.op_def_library import apply_op
from ...framework.op_registry import register_kernel, register_op
from ...framework.tensor_conversion import convert_to_tensor
from ..common import add_at
from .nn_conv import _out_and_pads

__all__: list[str] = []
NN_ALL = ["max_pool_with_argmax", "fractional_max_pool", "fractional_avg_pool", "pool",
          "with_space_to_batch"]


def _taps(kh, kw, sh, sw, rh, rw, oh, ow):
    """(i, j, index) of each window tap, row-major: its strided view of the padded input."""
    for i in range(kh):
        for j in range(kw):
            yield i, j, (slice(None), slice(i * rh, i * rh + (oh - 1) * sh + 1, sh),
                         slice(j * rw, j * rw + (ow - 1) * sw + 1, sw))


def _pad(x, ph, pw, value):
    if ph == (0, 0) and pw == (0, 0):
        return x
    return np.pad(x, ((0, 0), ph, pw, (0, 0)), constant_values=value)


def _lowest(dtype):
    return -np.inf if np.dtype(dtype).kind == "f" else np.iinfo(dtype).min


def _window_geometry(op_type, xs, k, strides, rates, padding):
    """Static NHWC (OH, OW) of a ``k`` window with ``rates``; TF's negative-size text."""
    out = []
    for n, kk, s, r in zip(xs[1:3], k, strides[1:3], rates[1:3]):
        if n is None or kk is None:
            out.append(None)
            continue
        ek = (kk - 1) * r + 1
        o = _out_and_pads(n, ek, s, padding)[0]
        if o < 0 or (padding == "VALID" and n < ek):
            raise InvalidArgumentError(
                f"{op_type}: Computed output size would be negative: {(n - ek) // s + 1} "
                f"[input_size: {n}, effective_filter_size: {ek}, stride: {s}]")
        out.append(o)
    return tuple(out)


def _check4(op_type, attrs, keys, what):
    if attrs["padding"] not in ("SAME", "VALID"):
        raise InvalidArgumentError(f"Attr 'padding' of '{op_type}' Op passed string "
                                   f"{attrs['padding']!r} not in: \"SAME\", \"VALID\".")
    for key in keys:
        v = attrs[key]
        if len(v) != 4:
            raise InvalidArgumentError(f"Attr '{key}' of '{op_type}' Op passed list of length "
                                       f"{len(v)} {'less' if len(v) < 4 else 'more'} than "
                                       f"{'minimum' if len(v) < 4 else 'maximum'} 4.")
        if any(int(e) < 1 for e in v):
            raise InvalidArgumentError(f"{op_type}: {key} must be positive, got {list(v)}")
        if v[0] != 1 or v[3] != 1:
            raise UnimplementedError(f"{op_type}: {what} {key} in the batch and depth "
                                     f"dimensions must be 1, got {list(v)}")


def _spec4(v, what, op_type):
    t = [int(v)] if isinstance(v, (int, np.integer)) else [int(e) for e in v]
    if len(t) == 1:
        t = [1, t[0], t[0], 1]
    elif len(t) == 2:
        t = [1, *t, 1]
    return tuple(t)


# ---- MaxPoolWithArgmax -----------------------------------------------------------------------
def _argmax_pool(x, ksize, strides, padding):
    """(max, first-max tap's (row, col) in the input) of each window of NHWC ``x``."""
    kh, kw, sh, sw = ksize[1], ksize[2], strides[1], strides[2]
    oh, ph = _out_and_pads(x.shape[1], kh, sh, padding)
    ow, pw = _out_and_pads(x.shape[2], kw, sw, padding)
    xpn = array_namespace(x)
    xp = _pad(x, ph, pw, _lowest(x.dtype))
    taps = list(_taps(kh, kw, sh, sw, 1, 1, oh, ow))
    y = xp[taps[0][2]].copy()
    for _, _, t in taps[1:]:
        np.maximum(y, xp[t], out=y)
    tap = xpn.zeros(y.shape, np.int64)  # which tap, in row-major order
    free = xpn.ones(y.shape, bool)
    for k, (_, _, t) in enumerate(taps):
        hit = np.equal(xp[t], y) & free
        free ^= hit
        tap[hit] = k
    rows = xpn.arange(oh).reshape(1, oh, 1, 1) * sh - ph[0] + tap // kw
    cols = xpn.arange(ow).reshape(1, 1, ow, 1) * sw - pw[0] + tap % kw
    return y, rows, cols


def _max_pool_with_argmax_kernel(x, ksize, strides, padding, Targmax, include_batch_in_index):
    y, rows, cols = _argmax_pool(x, ksize, strides, padding)
    n, h, w, c = x.shape
    xpn = array_namespace(x)
    flat = (rows * w + cols) * c + xpn.arange(c).reshape(1, 1, 1, c)
    if include_batch_in_index:
        flat = flat + xpn.arange(n).reshape(n, 1, 1, 1) * (h * w * c)
    return y, flat.astype(Targmax.np_dtype, copy=False)


def _flat_positions(x_shape, argmax, include_batch_in_index, xpn):
    n, h, w, c = x_shape
    a = argmax.astype(np.int64, copy=False)
    if not include_batch_in_index:
        a = a + xpn.arange(n).reshape(n, 1, 1, 1) * (h * w * c)
    return a.reshape(-1)


def _max_pool_grad_with_argmax_kernel(x, g, argmax, ksize, strides, padding,
                                      include_batch_in_index):
    xpn = array_namespace(g)
    dx = xpn.zeros(x.size, g.dtype)
    add_at(dx, _flat_positions(x.shape, argmax, include_batch_in_index, xpn), g.reshape(-1))
    return dx.reshape(x.shape)


def _max_pool_grad_grad_with_argmax_kernel(x, gg, argmax, ksize, strides, padding,
                                           include_batch_in_index):
    xpn = array_namespace(gg)
    pos = _flat_positions(x.shape, argmax, include_batch_in_index, xpn)
    return gg.reshape(-1)[pos].reshape(argmax.shape)


def _argmax_shape(inputs, attrs):
    (x,) = inputs
    op = "MaxPoolWithArgmax"
    _check4(op, attrs, ("ksize", "strides"), "pooling")
    if not (x.dtype.is_floating or x.dtype.is_integer):
        raise InvalidArgumentError(f"{op} expects a real tensor, got {x.dtype.name}")
    if attrs["Targmax"] not in (_dt.int32, _dt.int64):
        raise InvalidArgumentError(f"{op}: Targmax must be int32 or int64, got "
                                   f"{attrs['Targmax']}")
    xs = x._shape
    if xs is None:
        return [(x.dtype, None), (attrs["Targmax"], None)]
    if len(xs) != 4:
        raise InvalidArgumentError(f"{op}: Shape must be rank 4 but is rank {len(xs)} for input "
                                   f"with shape {list(xs)}")
    oh, ow = _window_geometry(op, xs, attrs["ksize"][1:3], attrs["strides"], (1, 1, 1, 1),
                              attrs["padding"])
    shape = (xs[0], oh, ow, xs[3])
    return [(x.dtype, shape), (attrs["Targmax"], shape)]


def _argmax_attrs(op):
    return {k: op.attrs[k] for k in ("ksize", "strides", "padding", "include_batch_in_index")}


register_op("MaxPoolWithArgmax", _argmax_shape, _max_pool_with_argmax_kernel,
            grad=lambda op, g, _g_arg=None: [apply_op(
                "MaxPoolGradWithArgmax", [op.inputs[0], g, op.outputs[1]],
                _argmax_attrs(op)).outputs[0]])
register_op("MaxPoolGradWithArgmax", lambda inputs, attrs: [(inputs[1].dtype, inputs[0]._shape)],
            _max_pool_grad_with_argmax_kernel, shape_only=(0,),
            grad=lambda op, gg: [None, apply_op(
                "MaxPoolGradGradWithArgmax", [op.inputs[0], gg, op.inputs[2]],
                _argmax_attrs(op)).outputs[0], None])
register_op("MaxPoolGradGradWithArgmax",
            lambda inputs, attrs: [(inputs[1].dtype, inputs[2]._shape)],
            _max_pool_grad_grad_with_argmax_kernel, shape_only=(0,),
            grad=lambda op, ggg: [None, apply_op(
                "MaxPoolGradWithArgmax", [op.inputs[0], ggg, op.inputs[2]],
                _argmax_attrs(op)).outputs[0], None])


def max_pool_with_argmax(input, ksize, strides, padding, data_format="NHWC", Targmax=None,
                         name=None, output_dtype=None, include_batch_in_index=False):
    """Max pooling that also returns where each maximum is: the flattened index
    ``(y * W + x) * C + c`` of the (first, row-major) maximum of each window, or
    ``((b * H + y) * W + x) * C + c`` with ``include_batch_in_index``; padding never wins.
    Returns ``(output, argmax)``; ``argmax`` is int64 unless ``Targmax``/``output_dtype``
    says int32. Only "NHWC", as TF."""
    if data_format != "NHWC":
        raise InvalidArgumentError(f"`data_format` values other  than 'NHWC' are not "
                                   f"supported. Received: data_format={data_format}")
    if Targmax is not None and output_dtype is not None and \
            _dt.as_dtype(Targmax) != _dt.as_dtype(output_dtype):
        raise InvalidArgumentError("Targmax and output_dtype must be the same if both given")
    targ = _dt.as_dtype(Targmax or output_dtype or _dt.int64)
    if not isinstance(padding, str):
        raise InvalidArgumentError(f"MaxPoolWithArgmax: padding must be 'SAME' or 'VALID', got "
                                   f"{padding!r}")
    attrs = {"ksize": tuple(int(e) for e in ksize), "strides": tuple(int(e) for e in strides),
             "padding": padding.upper(), "Targmax": targ,
             "include_batch_in_index": bool(include_batch_in_index)}
    op = apply_op("MaxPoolWithArgmax", [convert_to_tensor(input)], attrs, name=name)
    return tuple(op.outputs)


# ---- FractionalMaxPool / FractionalAvgPool ---------------------------------------------------
def pooling_sequence(input_length: int, output_length: int, rng, pseudo_random: bool):
    """TF's cumulative pooling sequence (``fractional_pool_common.cc``): ``output_length + 1``
    boundaries from 0 to ``input_length`` whose steps are ``k`` or ``k + 1``
    (``k = input_length // output_length``): a random shuffle of those steps, or, pseudo-random,
    ``ceil(alpha * (i + u)) - ceil(alpha * u)`` for one uniform ``u`` (``alpha`` the ratio).

    >>> pooling_sequence(10, 5, np.random.default_rng(0), False).tolist()
    [0, 2, 4, 6, 8, 10]
    """
    k = input_length // output_length
    if pseudo_random:
        alpha = input_length / output_length
        max_u = min((k + 2) / alpha - 1, (input_length + 1 - k) / alpha - (output_length - 1))
        u = rng.random() * max_u
        cum = np.ceil(alpha * (np.arange(output_length + 1) + u)).astype(np.int64)
        cum[0], cum[-1] = 1, input_length + 1
        diff = np.diff(cum)
    else:
        diff = np.full(output_length, k, np.int64)
        diff[:input_length % output_length] += 1
        rng.shuffle(diff)
    return np.concatenate([[0], np.cumsum(diff)]).astype(np.int64)


def _boxes(seq, n, overlapping, xpn):
    """Each output's input positions ``[O, L]`` (a box's last element repeated where it is
    shorter than the longest) and where they are real ``[O, L]``."""
    start = seq[:-1]
    end = np.minimum(seq[1:] + (1 if overlapping else 0), n)  # exclusive
    length = int((end - start).max()) if len(start) else 1
    idx = start[:, None] + np.arange(length)[None, :]
    real = idx < end[:, None]
    idx = np.minimum(idx, end[:, None] - 1)
    return xpn.asarray(idx), xpn.asarray(real)


def _membership(seq, n, overlapping, dtype, xpn):
    """The 0/1 matrix ``[O, n]`` of which inputs each output's box holds, and its counts."""
    start = seq[:-1, None]
    end = np.minimum(seq[1:] + (1 if overlapping else 0), n)[:, None]
    pos = np.arange(n)[None, :]
    m = ((pos >= start) & (pos < end)).astype(dtype)
    return xpn.asarray(m), xpn.asarray(m.sum(axis=1))


def _seqs(rows, cols):
    return (np.asarray(rows.get() if hasattr(rows, "get") else rows, np.int64),
            np.asarray(cols.get() if hasattr(cols, "get") else cols, np.int64))


def _fractional_sequences(ctx, x, pooling_ratio, pseudo_random, deterministic, seed, seed2):
    from ..math.random_ops import _rng
    h, w = x.shape[1:3]
    oh, ow = int(h / pooling_ratio[1]), int(w / pooling_ratio[2])
    for dim, (size, r) in enumerate(((h, pooling_ratio[1]), (w, pooling_ratio[2]))):
        if size < r or (oh, ow)[dim] <= 0:
            raise InvalidArgumentError(
                f"Pooling ratio is higher than input dimension size for dimension {dim + 1}. "
                f"Input dim size: {size} pooling ratio: {r:g}")
    rng = np.random.default_rng([seed & 0xFFFFFFFF, seed2 & 0xFFFFFFFF]) if deterministic \
        else _rng(ctx, seed, seed2)
    return (pooling_sequence(h, oh, rng, pseudo_random),
            pooling_sequence(w, ow, rng, pseudo_random))


def _fractional_max(x, rows, cols, overlapping):
    """The max of each box and its first maximum's flat position in ``x`` (row-major)."""
    xpn = array_namespace(x)
    n, h, w, c = x.shape
    ri, rr = _boxes(rows, h, overlapping, xpn)
    ci, cr = _boxes(cols, w, overlapping, xpn)
    box = x[:, ri][:, :, :, ci]  # [N, OH, bh, OW, bw, C]
    real = rr[:, :, None, None] & cr[None, None, :, :]  # [OH, bh, OW, bw]
    box = xpn.where(real[None, ..., None], box, _lowest(x.dtype))
    oh, bh, ow, bw = real.shape
    box = box.transpose(0, 1, 3, 2, 4, 5).reshape(n, oh, ow, bh * bw, c)
    arg = box.argmax(axis=3)  # the first maximum, rows then columns (TF's strict >)
    y = xpn.take_along_axis(box, arg[:, :, :, None, :], axis=3)[:, :, :, 0, :]
    hh = ri[xpn.arange(oh)[None, :, None, None], arg // bw]
    ww = ci[xpn.arange(ow)[None, None, :, None], arg % bw]
    flat = ((xpn.arange(n).reshape(n, 1, 1, 1) * h + hh) * w + ww) * c + \
        xpn.arange(c).reshape(1, 1, 1, c)
    return y, flat


def _fractional_max_pool_kernel(ctx, x, *, pooling_ratio, pseudo_random, overlapping,
                                deterministic, seed, seed2):
    rows, cols = _fractional_sequences(ctx, x, pooling_ratio, pseudo_random, deterministic,
                                       seed, seed2)
    y, _ = _fractional_max(x, rows, cols, overlapping)
    return y, rows, cols


def _fractional_max_pool_grad_kernel(x, y, g, rows, cols, overlapping):
    rows, cols = _seqs(rows, cols)
    _, flat = _fractional_max(x, rows, cols, overlapping)
    dx = array_namespace(g).zeros(x.size, g.dtype)
    add_at(dx, flat.reshape(-1), g.reshape(-1))
    return dx.reshape(x.shape)


def _fractional_avg(x, rows, cols, overlapping):
    xpn = array_namespace(x)
    n, h, w, c = x.shape
    mr, nr = _membership(rows, h, overlapping, x.dtype, xpn)
    mc, nc = _membership(cols, w, overlapping, x.dtype, xpn)
    t = np.matmul(mr, x.reshape(n, h, w * c)).reshape(n, -1, w, c)  # rows summed
    return np.matmul(mc, t) / (nr[:, None] * nc[None, :])[None, :, :, None]


def _fractional_avg_pool_kernel(ctx, x, *, pooling_ratio, pseudo_random, overlapping,
                                deterministic, seed, seed2):
    rows, cols = _fractional_sequences(ctx, x, pooling_ratio, pseudo_random, deterministic,
                                       seed, seed2)
    return _fractional_avg(x, rows, cols, overlapping).astype(x.dtype, copy=False), rows, cols


def _fractional_avg_pool_grad_kernel(orig_input_tensor_shape, g, rows, cols, overlapping):
    n, h, w, c = (int(e) for e in np.asarray(
        orig_input_tensor_shape.get() if hasattr(orig_input_tensor_shape, "get")
        else orig_input_tensor_shape).reshape(-1))
    rows, cols = _seqs(rows, cols)
    xpn = array_namespace(g)
    mr, nr = _membership(rows, h, overlapping, g.dtype, xpn)
    mc, nc = _membership(cols, w, overlapping, g.dtype, xpn)
    gs = g / (nr[:, None] * nc[None, :])[None, :, :, None]
    u = np.matmul(mc.T, gs)  # [N, OH, W, C]
    oh = g.shape[1]
    return np.matmul(mr.T, u.reshape(n, oh, w * c)).reshape(n, h, w, c).astype(g.dtype,
                                                                               copy=False)


def _fractional_shape(op_type, kind):
    def shape_fn(inputs, attrs):
        (x,) = inputs
        r = attrs["pooling_ratio"]
        if len(r) != 4:
            raise InvalidArgumentError(f"Attr 'pooling_ratio' of '{op_type}' Op passed list of "
                                       f"length {len(r)} {'less' if len(r) < 4 else 'more'} "
                                       f"than {'minimum' if len(r) < 4 else 'maximum'} 4.")
        for e in r:
            if e < 1:
                raise InvalidArgumentError(f"{op_type}: pooling_ratio cannot be smaller than 1, "
                                           f"got: {e:g}")
        if r[0] != 1 or r[3] != 1:
            raise UnimplementedError(f"{op_type}: Fractional {kind} pooling is not yet "
                                     f"supported on the batch nor channel dimension.")
        if not (x.dtype.is_floating or x.dtype in (_dt.int32, _dt.int64)):
            raise InvalidArgumentError(f"{op_type} expects float32, float64, int32 or int64, "
                                       f"got {x.dtype.name}")
        xs = x._shape
        if xs is not None and len(xs) != 4:
            raise InvalidArgumentError(f"{op_type}: Shape must be rank 4 but is rank {len(xs)} "
                                       f"for value with shape {list(xs)}")
        if xs is None:
            return [(x.dtype, None), (_dt.int64, (None,)), (_dt.int64, (None,))]
        oh, ow = (None if d is None else int(d / q) for d, q in zip(xs[1:3], r[1:3]))
        return [(x.dtype, (xs[0], oh, ow, xs[3])),
                (_dt.int64, (None if oh is None else oh + 1,)),
                (_dt.int64, (None if ow is None else ow + 1,))]
    return shape_fn


register_op("FractionalMaxPool", _fractional_shape("FractionalMaxPool", "max"),
            _fractional_max_pool_kernel, stateful=True, needs_ctx=True,
            grad=lambda op, g, _r=None, _c=None: [apply_op(
                "FractionalMaxPoolGrad", [op.inputs[0], op.outputs[0], g, op.outputs[1],
                                          op.outputs[2]],
                {"overlapping": op.attrs["overlapping"]}).outputs[0]])
register_op("FractionalMaxPoolGrad", lambda inputs, attrs: [(inputs[2].dtype, inputs[0]._shape)],
            _fractional_max_pool_grad_kernel)
register_op("FractionalAvgPool", _fractional_shape("FractionalAvgPool", "average"),
            _fractional_avg_pool_kernel, stateful=True, needs_ctx=True,
            grad=lambda op, g, _r=None, _c=None: [apply_op(
                "FractionalAvgPoolGrad", [_shape_t(op.inputs[0]), g, op.outputs[1],
                                          op.outputs[2]],
                {"overlapping": op.attrs["overlapping"]}).outputs[0]])


def _fractional_avg_grad_shape(inputs, attrs):
    from ..common import static_shape_of
    return [(inputs[1].dtype, static_shape_of(inputs[0]))]


register_op("FractionalAvgPoolGrad", _fractional_avg_grad_shape, _fractional_avg_pool_grad_kernel)


def _shape_t(t):
    from ..array.array_ops import shape
    return shape(t)


def _fractional(op_type, value, pooling_ratio, pseudo_random, overlapping, deterministic, seed,
                seed2, name):
    from ..math.random_ops import get_seed
    value = convert_to_tensor(value)
    seed, seed2 = int(seed or 0), int(seed2 or 0)
    if not deterministic and (seed or seed2):
        raise InvalidArgumentError(f"{op_type}: Both seed and seed2 should be 0 if "
                                   f"deterministic is false.")
    if deterministic and seed == 0 and seed2 == 0:  # TF draws fixed seeds for the op
        s1, s2 = get_seed(None)
        seed, seed2 = (s1, s2) if s1 is not None else \
            tuple(int(v) for v in np.random.SeedSequence().generate_state(2))
    elif not deterministic:  # a new draw each run; the graph-level seed makes runs repeat
        seed, seed2 = get_seed(None)
    attrs = {"pooling_ratio": tuple(float(e) for e in pooling_ratio),
             "pseudo_random": bool(pseudo_random), "overlapping": bool(overlapping),
             "deterministic": bool(deterministic), "seed": seed, "seed2": seed2}
    op = apply_op(op_type, [value], attrs, name=name)
    return tuple(op.outputs)


def fractional_max_pool(value, pooling_ratio, pseudo_random=False, overlapping=False,
                        deterministic=False, seed=0, seed2=0, name=None):
    """Fractional max pooling (Graham, 2015) of ``value`` [N, H, W, C] by
    ``pooling_ratio`` [1, rh, rw, 1] (each >= 1): an output of ``floor(H / rh) x
    floor(W / rw)`` whose row and column boxes have random sizes ``k`` or ``k + 1``
    (``pseudo_random``: TF's pseudo-random sequence), each box ending one element later when
    ``overlapping``. Returns ``(output, row_pooling_sequence, col_pooling_sequence)``.
    ``deterministic``: the same boxes on every run (from ``seed``/``seed2``, or seeds the op
    draws once); otherwise a new draw each run, repeatable under ``tv.set_random_seed`` (and
    ``seed``/``seed2`` must be 0, as TF)."""
    return _fractional("FractionalMaxPool", value, pooling_ratio, pseudo_random, overlapping,
                       deterministic, seed, seed2, name)


def fractional_avg_pool(value, pooling_ratio, pseudo_random=False, overlapping=False,
                        deterministic=False, seed=0, seed2=0, name=None):
    """Fractional average pooling: :func:`fractional_max_pool`'s boxes, averaged."""
    return _fractional("FractionalAvgPool", value, pooling_ratio, pseudo_random, overlapping,
                       deterministic, seed, seed2, name)


# ---- pool, with_space_to_batch --------------------------------------------------------------
def _ints(v, n, what):
    t = [int(v)] * n if isinstance(v, (int, np.integer)) else [int(e) for e in v]
    if len(t) != n:
        raise InvalidArgumentError(f"{what} must have {n} entries, got {t}")
    return t


def with_space_to_batch(input, dilation_rate, padding, op, filter_shape=None, spatial_dims=None,
                        data_format=None) -> Tensor:
    """TF's ``with_space_to_batch``: ``op(converted, num_spatial_dims, "VALID")`` on ``input``
    moved by ``space_to_batch_nd`` with block ``dilation_rate`` (padded so that "SAME" needs
    ``filter_shape``), then moved back by ``batch_to_space_nd``: a dilated ``op`` from an
    undilated one. With every rate 1 it is ``op(input, num_spatial_dims, padding)``. The input's
    spatial sizes must be known when the graph is built."""
    from ..array.index_ops import batch_to_space_nd, space_to_batch_nd
    input = convert_to_tensor(input)
    rate = [int(e) for e in np.asarray(dilation_rate).reshape(-1)]
    n = len(rate)
    if any(r < 1 for r in rate):
        raise ValueError(f"`dilation_rate` must be positive. Received: dilation_rate={rate}")
    if spatial_dims is None:
        first = 2 if data_format is not None and data_format.startswith("NC") else 1
        spatial_dims = list(range(first, first + n))
    spatial_dims = [int(d) for d in spatial_dims]
    if len(spatial_dims) != n or sorted(set(spatial_dims)) != spatial_dims or \
            spatial_dims[0] < 1:
        raise ValueError(f"spatial_dims must be {n} ascending dimensions after the batch "
                         f"dimension, got {spatial_dims}")
    padding = str(padding).upper()
    if padding not in ("SAME", "VALID"):
        raise ValueError(f"`padding` must be 'SAME' or 'VALID'. Received: padding={padding}")
    if all(r == 1 for r in rate):
        return op(input, n, padding)
    xs = input._shape
    if xs is None or any(xs[d] is None for d in spatial_dims):
        raise InvalidArgumentError("with_space_to_batch: the input's spatial sizes must be "
                                   "known when the graph is built")
    if padding == "SAME":
        if filter_shape is None:
            raise ValueError("`filter_shape` must be specified for `padding='SAME'`")
        eff = [(int(k) - 1) * r + 1 for k, r in zip(filter_shape, rate)]
        base = [((e - 1) // 2, e - 1 - (e - 1) // 2) for e in eff]
    else:
        base = [(0, 0)] * n
    # the block covers dims 1 .. last spatial dim; the others get block 1 and no padding
    block, pads, crops = [], [], []
    spatial = dict(zip(spatial_dims, range(n)))
    for d in range(1, spatial_dims[-1] + 1):
        if d not in spatial:
            block.append(1)
            pads.append((0, 0))
            crops.append((0, 0))
            continue
        i = spatial[d]
        full = xs[d] + base[i][0] + base[i][1]
        extra = (rate[i] - full % rate[i]) % rate[i]
        block.append(rate[i])
        pads.append((base[i][0], base[i][1] + extra))
        crops.append((0, extra))
    converted = space_to_batch_nd(input, block, pads)
    result = op(converted, n, "VALID")
    return batch_to_space_nd(result, block, crops)


def pool(input, window_shape, pooling_type, padding, dilation_rate=None, strides=None,
         name=None, data_format=None, dilations=None) -> Tensor:
    """TF's generic N-D pooling (N = 1, 2 or 3 spatial dimensions): "MAX" or "AVG" over
    ``window_shape`` windows with ``strides``, or with ``dilation_rate`` (then strides 1 and
    "VALID" padding, as TF 2.21) through :func:`with_space_to_batch`."""
    from .nn_conv import avg_pool, max_pool
    from .nn_pool3d import avg_pool3d, max_pool3d
    from .nn_conv_ext import avg_pool1d, max_pool1d
    input = convert_to_tensor(input)
    n = len(list(window_shape))
    if not 1 <= n <= 3:
        raise ValueError(f"`len(window_shape)` must be 1, 2, or 3. Received: "
                         f"window_shape={list(window_shape)} of length {n}")
    if input._shape is not None and len(input._shape) != n + 2:
        raise ValueError(f"Shape {tuple(input._shape)} must have rank {n + 2}")
    dilation_rate = dilations if dilation_rate is None else dilation_rate
    rate = _ints(1 if dilation_rate is None else dilation_rate, n, "dilation_rate")
    stride = _ints(1 if strides is None else strides, n, "strides")
    window = _ints(window_shape, n, "window_shape")
    kind = str(pooling_type).upper()
    if kind not in ("MAX", "AVG"):
        raise ValueError(f"{n}-D {pooling_type} pooling is not supported.")
    if any(s > 1 for s in stride) and any(r > 1 for r in rate):
        raise ValueError(f"`strides > 1` not supported in conjunction with `dilation_rate > 1`. "
                         f"Received: strides={stride} and dilation_rate={rate}")
    padding = str(padding).upper()
    if padding == "SAME" and any(r > 1 for r in rate):
        raise ValueError(f"pooling with 'SAME' padding is not implemented for `dilation_rate` "
                         f"> 1. Received: padding={padding} and dilation_rate={rate}")
    first = data_format is not None and data_format.startswith("NC")
    fmt = {1: ("NWC", "NCW"), 2: ("NHWC", "NCHW"), 3: ("NDHWC", "NCDHW")}[n][int(first)]
    fn = {(1, "MAX"): max_pool1d, (1, "AVG"): avg_pool1d, (2, "MAX"): max_pool,
          (2, "AVG"): avg_pool, (3, "MAX"): max_pool3d, (3, "AVG"): avg_pool3d}[(n, kind)]

    def op(x, _num_spatial, pad):
        if n == 1:  # scalars: max_pool1d reads a 3-entry spec in NWC order only
            return fn(x, window[0], stride[0], pad, data_format=fmt)
        full = [1, *window, 1] if not first else [1, 1, *window]
        st = [1, *stride, 1] if not first else [1, 1, *stride]
        return fn(x, full, st, pad, data_format=fmt)
    with name_scope(name or f"{kind.lower()}_pool"):
        return with_space_to_batch(input, rate, padding, op, filter_shape=window,
                                   data_format=fmt)


for _op, _k in (("MaxPoolWithArgmax", _max_pool_with_argmax_kernel),
                ("MaxPoolGradWithArgmax", _max_pool_grad_with_argmax_kernel),
                ("MaxPoolGradGradWithArgmax", _max_pool_grad_grad_with_argmax_kernel),
                ("FractionalMaxPool", _fractional_max_pool_kernel),
                ("FractionalMaxPoolGrad", _fractional_max_pool_grad_kernel),
                ("FractionalAvgPool", _fractional_avg_pool_kernel),
                ("FractionalAvgPoolGrad", _fractional_avg_pool_grad_kernel)):
    register_kernel(_op, "GPU", _k)  # one source: the namespace of the inputs decides
