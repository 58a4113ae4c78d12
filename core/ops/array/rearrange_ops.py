"""Ops that move elements without changing them: ``roll``, ``repeat``,
``space_to_depth``/``depth_to_space`` and ``space_to_batch_nd``/``batch_to_space_nd``
(and TF 1.x's ``space_to_batch``/``batch_to_space``), with their gradients.
"""
from __future__ import annotations

import numpy as np

from ...framework.errors import InvalidArgumentError
from ...framework.graph import Tensor
from ...framework.op_def_library import apply_op
from ...vm.kernels.array_api import array_namespace
from ...framework.op_registry import register_op
from ...framework.tensor_conversion import convert_to_tensor
from .array_ops import reshape, shape
from ..common import add_at, check_int_dtype, norm_axis, static_value
from .index_math_ops import _host
from .gather_ops import gather

__all__ = ["roll", "repeat", "space_to_depth", "depth_to_space", "space_to_batch_nd",
           "batch_to_space_nd", "space_to_batch", "batch_to_space"]


# ---- roll, repeat ------------------------------------------------------------------------------
def _roll_shape(inputs, attrs):
    x = inputs[0]
    if x._shape is not None:
        for a in attrs["axis"]:
            norm_axis(a, len(x._shape), "Roll")
    return [(x.dtype, x._shape)]


def _roll_kernel(x, shift, axis):
    return np.roll(x, shift, axis)


register_op("Roll", _roll_shape, _roll_kernel,
            grad=lambda op, g: [apply_op("Roll", [g], {
                "shift": tuple(-s for s in op.attrs["shift"]),
                "axis": op.attrs["axis"]}).outputs[0]])


def roll(input, shift, axis, name=None) -> Tensor:
    """Elements shifted by ``shift`` along ``axis`` (ints or lists of them, one shift per
    axis), those pushed past the end coming back at the start (TF's ``tf.roll``). A shift
    computed in the graph is a gather of the rotated indices.

    >>> import tensorvm as tv
    >>> with tv.Session() as s:
    ...     s.run(tv.roll([[1, 2, 3], [4, 5, 6]], shift=[1, -1], axis=[0, 1])).tolist()
    [[5, 6, 4], [2, 3, 1]]
    """
    from ..common import static_value
    x = convert_to_tensor(input)
    sv, av = static_value(shift), static_value(axis)
    if av is None:
        raise InvalidArgumentError("roll: axis must be known when the graph is built (ints)")
    axes = tuple(int(a) for a in np.atleast_1d(av))
    if sv is not None:
        shifts = tuple(int(s) for s in np.atleast_1d(sv))
        if len(shifts) != len(axes):
            raise InvalidArgumentError(f"shift and axis must have the same size, got "
                                       f"{len(shifts)} and {len(axes)}")
        return apply_op("Roll", [x], {"shift": shifts, "axis": axes}, name=name).outputs[0]
    # a shift computed in the graph: out[i] = x[(i - shift) mod n] along each axis
    from ...framework import dtypes as _dt
    from .fill_ops import range as _range
    from ..math.math_ops import cast, mod
    shift_t = cast(convert_to_tensor(shift), _dt.int32)
    out = x
    for k, a in enumerate(axes):
        n = shape(out)[a]
        s = shift_t if not shift_t._shape else shift_t[k]
        idx = mod(_range(n) - s, n)
        out = gather(out, idx, axis=a)
    return out


def _repeat_counts(repeats):
    return _host(repeats).astype(np.int64)


def _repeat_kernel(x, repeats, axis):
    reps = _repeat_counts(repeats)
    n = x.shape[axis]
    if reps.ndim == 1 and reps.size not in (1, n):
        raise InvalidArgumentError(f"Dimensions {n} and {reps.size} are not compatible")
    if (reps < 0).any():
        raise InvalidArgumentError(f"repeats must be >= 0, got {reps.tolist()}")
    return np.repeat(x, reps.tolist() if reps.ndim else int(reps), axis=axis) \
        if array_namespace(x) is not np else np.repeat(x, reps, axis=axis)


def _repeat_grad_kernel(g, x, repeats, axis):
    reps = _repeat_counts(repeats)
    n = x.shape[axis]
    ids = np.repeat(np.arange(n), np.broadcast_to(reps, (n,)))
    xp = array_namespace(g)
    gt = np.moveaxis(g, axis, 0)
    out = xp.zeros((n,) + gt.shape[1:], dtype=g.dtype)
    add_at(out, xp.asarray(ids) if xp is not np else ids, gt)
    return np.moveaxis(out, 0, axis)


def _repeat_shape(inputs, attrs):
    x, reps = inputs
    check_int_dtype(reps, "repeats", "Repeat")
    if reps._shape is not None and len(reps._shape) > 1:
        raise InvalidArgumentError("Repeat: repeats must be a scalar or a vector")
    if x._shape is None:
        return [(x.dtype, None)]
    a = norm_axis(attrs["axis"], len(x._shape), "Repeat")
    rv = static_value(reps)
    n = x._shape[a]
    if rv is None or n is None:
        d = None
    elif np.ndim(rv) == 0 or np.size(rv) == 1:
        d = n * int(np.reshape(rv, -1)[0])
    else:
        if np.size(rv) != n:
            raise InvalidArgumentError(f"Dimensions {n} and {np.size(rv)} are not compatible")
        d = int(np.sum(rv))
    return [(x.dtype, x._shape[:a] + (d,) + x._shape[a + 1:])]


register_op("Repeat", _repeat_shape, _repeat_kernel,
            grad=lambda op, g: [apply_op("RepeatGrad", [g, op.inputs[0], op.inputs[1]],
                                         {"axis": op.attrs["axis"]}).outputs[0], None])
register_op("RepeatGrad", lambda inputs, attrs: [(inputs[0].dtype, inputs[1]._shape)],
            _repeat_grad_kernel, shape_only=(1,))


def repeat(input, repeats, axis=None, name=None) -> Tensor:
    """Each element (``axis=None``: of the flattened input) or each slice along ``axis``
    repeated ``repeats`` times (a scalar, or one count per slice) — NumPy's ``np.repeat``,
    TF's ``tf.repeat``.

    >>> import tensorvm as tv
    >>> with tv.Session() as s:
    ...     s.run(tv.repeat([[1, 2], [3, 4]], [1, 2], axis=0)).tolist()
    [[1, 2], [3, 4], [3, 4]]
    """
    from ...framework import dtypes as _dt
    x = convert_to_tensor(input)
    if axis is None:
        x, axis = reshape(x, [-1]), 0
    reps = convert_to_tensor(repeats, dtype=None if hasattr(repeats, "op") else _dt.int32)
    return apply_op("Repeat", [x, reps], {"axis": int(axis)}, name=name).outputs[0]


# ---- space_to_depth, depth_to_space ------------------------------------------------------------
def _block(attrs, op):
    b = attrs["block_size"]
    if b < 2:
        raise InvalidArgumentError(f"Value for attr 'block_size' of {b} must be at least "
                                   "minimum 2")
    if attrs["data_format"] not in ("NHWC", "NCHW"):
        raise InvalidArgumentError(f"{op}: data_format must be NHWC or NCHW, got "
                                   f"{attrs['data_format']!r}")
    return b


def _to_nhwc(x, data_format):
    return np.transpose(x, (0, 2, 3, 1)) if data_format == "NCHW" else x


def _from_nhwc(x, data_format):
    return np.transpose(x, (0, 3, 1, 2)) if data_format == "NCHW" else x


def _s2d_kernel(x, block_size, data_format):
    b = block_size
    y = _to_nhwc(x, data_format)
    n, h, w, c = y.shape
    if h % b or w % b:
        raise InvalidArgumentError(f"Image height {h} and width {w} should be divisible by "
                                   f"block_size: {b}")
    y = y.reshape(n, h // b, b, w // b, b, c).transpose(0, 1, 3, 2, 4, 5)
    return _from_nhwc(y.reshape(n, h // b, w // b, b * b * c), data_format)


def _d2s_kernel(x, block_size, data_format):
    b = block_size
    y = _to_nhwc(x, data_format)
    n, h, w, c = y.shape
    if c % (b * b):
        raise InvalidArgumentError(f"Input depth dimension {c} should be divisible by: "
                                   f"{b * b}")
    y = y.reshape(n, h, w, b, b, c // (b * b)).transpose(0, 1, 3, 2, 4, 5)
    return _from_nhwc(y.reshape(n, h * b, w * b, c // (b * b)), data_format)


def _space_depth_shape(to_depth):
    op = "SpaceToDepth" if to_depth else "DepthToSpace"

    def shape_fn(inputs, attrs):
        b = _block(attrs, op)
        s = inputs[0]._shape
        if s is None:
            return [(inputs[0].dtype, None)]
        if len(s) != 4:
            raise InvalidArgumentError(f"{op}: input must be 4-dimensional, got shape "
                                       f"{list(s)}")
        nchw = attrs["data_format"] == "NCHW"
        n, h, w, c = (s[0], s[2], s[3], s[1]) if nchw else s
        if to_depth:
            for d in (h, w):
                if d is not None and d % b:
                    raise InvalidArgumentError(f"Dimension size must be evenly divisible by "
                                               f"{b} but is {d}")
            h, w, c = [None if d is None else d // b for d in (h, w)] + \
                [None if c is None else c * b * b]
        else:
            if c is not None and c % (b * b):
                raise InvalidArgumentError(f"Dimension size must be evenly divisible by "
                                           f"{b * b} but is {c}")
            h, w, c = [None if d is None else d * b for d in (h, w)] + \
                [None if c is None else c // (b * b)]
        return [(inputs[0].dtype, (n, c, h, w) if nchw else (n, h, w, c))]
    return shape_fn


register_op("SpaceToDepth", _space_depth_shape(True), _s2d_kernel,
            grad=lambda op, g: [depth_to_space(g, op.attrs["block_size"],
                                               data_format=op.attrs["data_format"])])
register_op("DepthToSpace", _space_depth_shape(False), _d2s_kernel,
            grad=lambda op, g: [space_to_depth(g, op.attrs["block_size"],
                                               data_format=op.attrs["data_format"])])


def space_to_depth(input, block_size, name=None, data_format="NHWC") -> Tensor:
    """Each ``block_size x block_size`` block of pixels moved into the channels:
    ``[N, H, W, C]`` to ``[N, H/b, W/b, b*b*C]`` (TF's ``tf.space_to_depth``)."""
    return apply_op("SpaceToDepth", [input], {"block_size": int(block_size),
                                              "data_format": data_format},
                    name=name).outputs[0]


def depth_to_space(input, block_size, name=None, data_format="NHWC") -> Tensor:
    """The inverse of :func:`space_to_depth`: ``[N, H, W, b*b*C]`` to ``[N, H*b, W*b, C]``."""
    return apply_op("DepthToSpace", [input], {"block_size": int(block_size),
                                              "data_format": data_format},
                    name=name).outputs[0]


# ---- space_to_batch_nd, batch_to_space_nd -------------------------------------------------------
def _s2b_kernel(x, block_shape, paddings):
    m = len(block_shape)
    xp = array_namespace(x)
    pad = [(0, 0)] + [tuple(p) for p in paddings] + [(0, 0)] * (x.ndim - 1 - m)
    y = xp.pad(x, pad)
    batch, spatial, rest = y.shape[0], y.shape[1:1 + m], y.shape[1 + m:]
    split = [batch]
    for d, b in zip(spatial, block_shape):
        split += [d // b, b]
    y = y.reshape(split + list(rest))
    perm = [2 + 2 * i for i in range(m)] + [0] + [1 + 2 * i for i in range(m)] + \
        list(range(1 + 2 * m, y.ndim))
    y = y.transpose(perm)
    return y.reshape([batch * int(np.prod(block_shape))] +
                     [d // b for d, b in zip(spatial, block_shape)] + list(rest))


def _b2s_kernel(x, block_shape, crops):
    m = len(block_shape)
    nb = int(np.prod(block_shape))
    batch = x.shape[0] // nb
    spatial, rest = x.shape[1:1 + m], x.shape[1 + m:]
    y = x.reshape(list(block_shape) + [batch] + list(spatial) + list(rest))
    perm = [m]
    for i in range(m):
        perm += [m + 1 + i, i]
    perm += list(range(2 * m + 1, y.ndim))
    y = y.transpose(perm).reshape([batch] + [d * b for d, b in zip(spatial, block_shape)] +
                                  list(rest))
    idx = [slice(None)] + [slice(c[0], y.shape[1 + i] - c[1]) for i, c in enumerate(crops)]
    return y[tuple(idx)]


def _s2b_shape(to_batch):
    op = "SpaceToBatchND" if to_batch else "BatchToSpaceND"

    def shape_fn(inputs, attrs):
        bs, pc = attrs["block_shape"], attrs["paddings" if to_batch else "crops"]
        x = inputs[0]
        if any(b < 1 for b in bs):
            raise InvalidArgumentError(f"{op}: block_shape must be positive, got {list(bs)}")
        if any(p < 0 for row in pc for p in row):
            raise InvalidArgumentError(f"{op}: {'paddings' if to_batch else 'crops'} must be "
                                       f"non-negative, got {[list(r) for r in pc]}")
        s = x._shape
        if s is None:
            return [(x.dtype, None)]
        m = len(bs)
        if len(s) < m + 1:
            raise InvalidArgumentError(f"{op}: input rank should be >= {m + 1} instead of "
                                       f"{len(s)}")
        nb = int(np.prod(bs))
        out = list(s)
        if to_batch:
            out[0] = None if s[0] is None else s[0] * nb
            for i, (b, (p0, p1)) in enumerate(zip(bs, pc)):
                d = s[1 + i]
                if d is not None:
                    if (d + p0 + p1) % b:
                        raise InvalidArgumentError(
                            f"padded_shape[{i}]={d + p0 + p1} is not divisible by "
                            f"block_shape[{i}]={b}")
                    out[1 + i] = (d + p0 + p1) // b
        else:
            if s[0] is not None and s[0] % nb:
                raise InvalidArgumentError(
                    f"Input batch dimension ({s[0]}) is not divisible by product of "
                    f"block sizes ({nb})")
            out[0] = None if s[0] is None else s[0] // nb
            for i, (b, (c0, c1)) in enumerate(zip(bs, pc)):
                d = s[1 + i]
                if d is not None:
                    if c0 + c1 > d * b:
                        raise InvalidArgumentError(
                            f"crops must be less than or equal to the input size: "
                            f"{c0}+{c1} > {d * b}")
                    out[1 + i] = d * b - c0 - c1
        return [(x.dtype, tuple(out))]
    return shape_fn


register_op("SpaceToBatchND", _s2b_shape(True), _s2b_kernel,
            grad=lambda op, g: [batch_to_space_nd(g, op.attrs["block_shape"],
                                                  op.attrs["paddings"])])
register_op("BatchToSpaceND", _s2b_shape(False), _b2s_kernel,
            grad=lambda op, g: [space_to_batch_nd(g, op.attrs["block_shape"],
                                                  op.attrs["crops"])])


def _static_pairs(v, what, op):
    from ..common import static_value
    a = static_value(v)
    if a is None:
        raise InvalidArgumentError(f"{op}: {what} must be known when the graph is built")
    a = np.asarray(a, dtype=np.int64)
    if a.ndim != 2 or a.shape[1] != 2:
        raise InvalidArgumentError(f"{op}: {what} must have shape [M, 2], got {list(a.shape)}")
    return tuple(tuple(int(p) for p in row) for row in a)


def space_to_batch_nd(input, block_shape, paddings, name=None) -> Tensor:
    """Blocks of the spatial dimensions moved into the batch: ``input`` (``[B, S_1..S_M,
    rest]``) zero-padded by ``paddings`` (``[M, 2]``), each spatial size divided by
    ``block_shape``, the batch multiplied by its product (TF's ``tf.space_to_batch_nd``)."""
    from ..common import static_ints
    bs = static_ints(block_shape, "block_shape", "SpaceToBatchND")
    pads = _static_pairs(paddings, "paddings", "SpaceToBatchND")
    if len(pads) != len(bs):
        raise InvalidArgumentError(f"SpaceToBatchND: paddings has {len(pads)} rows for "
                                   f"{len(bs)} block dimensions")
    return apply_op("SpaceToBatchND", [input], {"block_shape": bs, "paddings": pads},
                    name=name).outputs[0]


def batch_to_space_nd(input, block_shape, crops, name=None) -> Tensor:
    """The inverse of :func:`space_to_batch_nd`, cropping ``crops`` (``[M, 2]``)."""
    from ..common import static_ints
    bs = static_ints(block_shape, "block_shape", "BatchToSpaceND")
    cr = _static_pairs(crops, "crops", "BatchToSpaceND")
    if len(cr) != len(bs):
        raise InvalidArgumentError(f"BatchToSpaceND: crops has {len(cr)} rows for "
                                   f"{len(bs)} block dimensions")
    return apply_op("BatchToSpaceND", [input], {"block_shape": bs, "crops": cr},
                    name=name).outputs[0]


def space_to_batch(input, paddings, block_size=None, name=None, block_shape=None) -> Tensor:
    """TF 1.x's 4-D ``tf.space_to_batch``: :func:`space_to_batch_nd` with a square block."""
    b = block_shape if block_size is None else block_size
    return space_to_batch_nd(input, [int(b), int(b)], paddings, name=name)


def batch_to_space(input, crops, block_size, name=None, block_shape=None) -> Tensor:
    """TF 1.x's 4-D ``tf.batch_to_space``: :func:`batch_to_space_nd` with a square block."""
    b = block_shape if block_size is None else block_size
    return batch_to_space_nd(input, [int(b), int(b)], crops, name=name)


