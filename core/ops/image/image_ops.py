"""Image resizing and colour-space kernels: ``ResizeBilinear``, ``ResizeNearestNeighbor``,
``ResizeBicubic``, ``ResizeArea`` (with their gradients), ``RGBToHSV`` and ``HSVToRGB``.

The resize ops follow TF 1.x's kernels (``core/kernels/resize_*_op.cc``): the scale of an axis
is ``in / out`` (``(in - 1) / (out - 1)`` with ``align_corners``); an output index ``i`` samples
the input at ``i * scale`` (legacy) or ``(i + 0.5) * scale - 0.5`` (``half_pixel_centers``).
Bilinear, bicubic and area outputs are float32 whatever the input dtype; nearest keeps it.

Every resize is separable: the sampling positions and weights of each axis are computed once
on the host (a few hundred numbers), then the kernel gathers and blends whole rows and columns
(no per-pixel Python). A gradient is the transposed map: the per-axis weights as a dense
``out x in`` matrix, applied with two matrix products. The kernels are written against the
array namespace of their input, so one source serves the CPU and a GPU.

The public functions are in :mod:`tensorvm.tf_api.image` (``tv.image.resize_images`` …).

>>> import numpy as np, tensorvm as tv
>>> x = tv.constant(np.arange(4, dtype=np.float32).reshape(1, 2, 2, 1))
>>> with tv.Session() as s: s.run(tv.image.resize_bilinear(x, [1, 4]))[0, 0, :, 0].tolist()
[0.0, 0.5, 1.0, 1.0]
"""
from __future__ import annotations

import numpy as np

from ...framework import dtypes as _dt
from ...framework.errors import InvalidArgumentError
from ...vm.kernels.array_api import array_namespace, to_host
from ...framework.op_def_library import apply_op
from ...framework.op_registry import register_kernel, register_op
from ..common import asarray, static_value

__all__: list[str] = []  # the public functions live in tensorvm.tf_api.image

_RESIZE_GRADS = {"ResizeBilinear": "ResizeBilinearGrad", "ResizeBicubic": "ResizeBicubicGrad",
                 "ResizeNearestNeighbor": "ResizeNearestNeighborGrad"}
_FLOAT_OUT = ("ResizeBilinear", "ResizeBicubic", "ResizeArea")
_RESIZE_DTYPES = (_dt.uint8, _dt.int8, _dt.uint16, _dt.int16, _dt.int32, _dt.int64,
                  _dt.float16, _dt.float32, _dt.float64)


# ---- the sampling of one axis (host NumPy, float32 as TF's kernels compute it) ----------------

def resize_scale(in_size: int, out_size: int, align_corners: bool) -> np.float32:
    """TF's ``CalculateResizeScale``: the input step per output step, in float32."""
    if align_corners and out_size > 1:
        return np.float32(in_size - 1) / np.float32(out_size - 1)
    return np.float32(in_size) / np.float32(out_size)


def _positions(out_size, scale, half_pixel, shift=np.float32(0.5)):
    i = np.arange(out_size, dtype=np.float32)
    return (i + np.float32(0.5)) * scale - shift if half_pixel else i * scale


def bilinear_axis(in_size, out_size, align_corners, half_pixel):
    """(lower, upper, lerp) per output index: TF's ``compute_interpolation_weights``."""
    pos = _positions(out_size, resize_scale(in_size, out_size, align_corners), half_pixel)
    floor = np.floor(pos)
    lower = np.maximum(floor.astype(np.int64), 0)
    upper = np.minimum(np.ceil(pos).astype(np.int64), in_size - 1)
    return lower, upper, (pos - floor).astype(np.float32)


def nearest_axis(in_size, out_size, align_corners, half_pixel):
    """The input index per output index (TF's nearest-neighbour rule; ``roundf`` rounds half
    away from zero, and positions here are non-negative)."""
    pos = _positions(out_size, resize_scale(in_size, out_size, align_corners), half_pixel,
                     shift=np.float32(0))
    idx = np.floor(pos + np.float32(0.5)) if align_corners else np.floor(pos)
    return np.clip(idx.astype(np.int64), 0, in_size - 1)


_TABLE_SIZE = 1024
_TABLES: dict[bool, np.ndarray] = {}


def _cubic_table(keys: bool) -> np.ndarray:
    """TF's bicubic coefficient table (``a = -0.5`` for Keys' kernel, ``-0.75`` legacy):
    float32 entries computed in double from float32 ``x``, as ``InitCoeffsTable`` does."""
    if keys not in _TABLES:
        a = -0.5 if keys else -0.75
        x = (np.arange(_TABLE_SIZE + 1) * (1.0 / _TABLE_SIZE)).astype(np.float32)
        xd = x.astype(np.float64)
        t = np.empty((_TABLE_SIZE + 1, 2), np.float32)
        t[:, 0] = ((a + 2) * xd - (a + 3)) * xd * xd + 1
        x1 = (x + np.float32(1.0)).astype(np.float64)
        t[:, 1] = ((a * x1 - 5 * a) * x1 + 8 * a) * x1 - 4 * a
        _TABLES[keys] = t.reshape(-1)
    return _TABLES[keys]


def bicubic_axis(in_size, out_size, align_corners, half_pixel):
    """(indices [out, 4], weights [out, 4]) per output index: TF's ``GetWeightsAndIndices``.
    With half-pixel centres (Keys' kernel) taps outside the image weigh 0 and the rest are
    renormalised; the legacy kernel repeats the edge pixel instead."""
    pos = _positions(out_size, resize_scale(in_size, out_size, align_corners), half_pixel)
    loc = np.floor(pos)
    offset = np.rint((pos - loc) * np.float32(_TABLE_SIZE)).astype(np.int64)
    loc = loc.astype(np.int64)
    t = _cubic_table(half_pixel)
    w = np.stack([t[offset * 2 + 1], t[offset * 2], t[(_TABLE_SIZE - offset) * 2],
                  t[(_TABLE_SIZE - offset) * 2 + 1]], axis=1)
    raw = loc[:, None] + np.arange(-1, 3)
    idx = np.clip(raw, 0, in_size - 1)
    if half_pixel:
        w = np.where(idx == raw, w, np.float32(0))
        total = w[:, 0] + w[:, 1] + w[:, 2] + w[:, 3]
        ok = np.abs(total) >= np.float32(1000) * np.finfo(np.float32).tiny
        w = np.where(ok[:, None], w * (np.float32(1) / np.where(ok, total, 1))[:, None], w)
    return idx, w.astype(np.float32)


def area_axis(in_size, out_size, align_corners):
    """The ``out x in`` matrix of input cell coverage per output cell (TF's ``ResizeArea``:
    cell ``i`` of the input counts the part of ``[i, i + 1)`` inside ``[o * s, (o + 1) * s)``;
    indices past the edge read the edge)."""
    scale = resize_scale(in_size, out_size, align_corners)
    m = np.zeros((out_size, in_size), np.float32)
    for o in range(out_size):  # one pass per output index; the image itself is never looped
        lo, hi = np.float32(o) * scale, np.float32(o + 1) * scale
        for i in range(int(np.floor(lo)), int(np.ceil(hi))):
            if i < lo:
                s = scale if i + 1 > hi else np.float32(i + 1) - lo
            else:
                s = hi - np.float32(i) if i + 1 > hi else np.float32(1)
            m[o, min(i, in_size - 1)] += s
    return m, scale


def axis_matrix(kind, in_size, out_size, align_corners, half_pixel) -> np.ndarray:
    """The dense ``out x in`` float32 matrix of one axis' resize (what the gradient applies
    transposed)."""
    m = np.zeros((out_size, in_size), np.float32)
    rows = np.arange(out_size)
    if kind == "ResizeBilinear":
        lo, hi, lerp = bilinear_axis(in_size, out_size, align_corners, half_pixel)
        np.add.at(m, (rows, lo), np.float32(1) - lerp)
        np.add.at(m, (rows, hi), lerp)
    elif kind == "ResizeNearestNeighbor":
        m[rows, nearest_axis(in_size, out_size, align_corners, half_pixel)] = 1
    elif kind == "ResizeBicubic":
        idx, w = bicubic_axis(in_size, out_size, align_corners, half_pixel)
        np.add.at(m, (np.repeat(rows, 4), idx.reshape(-1)), w.reshape(-1))
    else:
        m, scale = area_axis(in_size, out_size, align_corners)
    return m


# ---- kernels ---------------------------------------------------------------------------------

def _out_size(size, op):
    h, w = (int(v) for v in np.asarray(to_host(size)).reshape(-1))
    if h <= 0 or w <= 0:
        raise InvalidArgumentError(f"{op}: output dimensions must be positive, got [{h}, {w}]")
    return h, w


def _check_image(images, op):
    if images.ndim != 4:
        raise InvalidArgumentError(f"{op}: input must be 4-dimensional, got shape "
                                   f"{list(images.shape)}")
    if images.shape[1] <= 0 or images.shape[2] <= 0:
        raise InvalidArgumentError(f"{op}: input image must be of non-zero size, got shape "
                                   f"{list(images.shape)}")


def _bilinear_kernel(images, size, *, align_corners, half_pixel_centers):
    _check_image(images, "ResizeBilinear")
    h, w = _out_size(size, "ResizeBilinear")
    xp = array_namespace(images)
    x = images.astype(np.float32, copy=False)
    ylo, yhi, yl = (asarray(a, like=x) for a in bilinear_axis(
        images.shape[1], h, align_corners, half_pixel_centers))
    xlo, xhi, xl = (asarray(a, like=x) for a in bilinear_axis(
        images.shape[2], w, align_corners, half_pixel_centers))
    top, bottom = xp.take(x, ylo, axis=1), xp.take(x, yhi, axis=1)
    xl = xl[:, None]
    tl, tr = xp.take(top, xlo, axis=2), xp.take(top, xhi, axis=2)
    bl, br = xp.take(bottom, xlo, axis=2), xp.take(bottom, xhi, axis=2)
    t = tl + (tr - tl) * xl
    b = bl + (br - bl) * xl
    return t + (b - t) * yl[:, None, None]


def _nearest_kernel(images, size, *, align_corners, half_pixel_centers):
    _check_image(images, "ResizeNearestNeighbor")
    h, w = _out_size(size, "ResizeNearestNeighbor")
    xp = array_namespace(images)
    iy = asarray(nearest_axis(images.shape[1], h, align_corners, half_pixel_centers),
                 like=images)
    ix = asarray(nearest_axis(images.shape[2], w, align_corners, half_pixel_centers),
                 like=images)
    return xp.take(xp.take(images, iy, axis=1), ix, axis=2)


def _blend4(xp, x, idx, w, axis):
    """``sum_k w[:, k] * x.take(idx[:, k], axis)`` in TF's order (``v0*w0 + v1*w1 + …``)."""
    shape = [1] * x.ndim
    shape[axis] = -1
    out = None
    for k in range(4):
        term = xp.take(x, idx[:, k], axis=axis) * w[:, k].reshape(shape)
        out = term if out is None else out + term
    return out


def _bicubic_kernel(images, size, *, align_corners, half_pixel_centers):
    _check_image(images, "ResizeBicubic")
    h, w = _out_size(size, "ResizeBicubic")
    xp = array_namespace(images)
    x = images.astype(np.float32, copy=False)
    yi, yw = (asarray(a, like=x) for a in bicubic_axis(images.shape[1], h, align_corners,
                                                       half_pixel_centers))
    xi, xw = (asarray(a, like=x) for a in bicubic_axis(images.shape[2], w, align_corners,
                                                       half_pixel_centers))
    return _blend4(xp, _blend4(xp, x, xi, xw, 2), yi, yw, 1)  # along x, then y (TF's order)


def _apply_axes(xp, x, my, mx):
    """``my @ x @ mx.T`` over the two spatial axes of an NHWC batch."""
    t = xp.matmul(my, x.transpose(0, 3, 1, 2))          # N, C, h, W
    return xp.matmul(t, mx.T).transpose(0, 2, 3, 1)     # N, h, w, C


def _area_kernel(images, size, *, align_corners):
    _check_image(images, "ResizeArea")
    h, w = _out_size(size, "ResizeArea")
    xp = array_namespace(images)
    my, sy = area_axis(images.shape[1], h, align_corners)
    mx, sx = area_axis(images.shape[2], w, align_corners)
    x = images.astype(np.float32, copy=False)
    out = _apply_axes(xp, x, asarray(my, like=x), asarray(mx, like=x))
    return out * np.float32(1.0 / (sy * sx))


def _make_grad_kernel(kind):
    def kernel(grads, original_image, *, align_corners, half_pixel_centers):
        xp = array_namespace(grads)
        n, h, w, c = grads.shape
        in_h, in_w = original_image.shape[1], original_image.shape[2]
        g = grads.astype(np.float32, copy=False)
        my = asarray(axis_matrix(kind, in_h, h, align_corners, half_pixel_centers), like=g)
        mx = asarray(axis_matrix(kind, in_w, w, align_corners, half_pixel_centers), like=g)
        out = _apply_axes(xp, g, my.T, mx.T)
        return out.astype(original_image.dtype, copy=False)
    kernel.__name__ = f"_{kind}_grad_kernel"
    return kernel


def _area_grad_kernel(grads, original_image, *, align_corners):
    xp = array_namespace(grads)
    my, sy = area_axis(original_image.shape[1], grads.shape[1], align_corners)
    mx, sx = area_axis(original_image.shape[2], grads.shape[2], align_corners)
    g = grads.astype(np.float32, copy=False) * np.float32(1.0 / (sy * sx))
    out = _apply_axes(xp, g, asarray(my.T, like=g), asarray(mx.T, like=g))
    return out.astype(original_image.dtype, copy=False)


# ---- shapes and registration ------------------------------------------------------------------

def _resize_shape(op_type):
    def shape_fn(inputs, attrs):
        images, size = inputs
        if images.dtype not in _RESIZE_DTYPES:
            raise InvalidArgumentError(f"{op_type}: images must be a real number type, got "
                                       f"{images.dtype.name}")
        if images._shape is not None and len(images._shape) != 4:
            raise InvalidArgumentError(f"{op_type}: images must be 4-D [batch, height, width, "
                                       f"channels], got shape {list(images._shape)}")
        if size.dtype != _dt.int32:
            raise InvalidArgumentError(f"{op_type}: size must be int32, got {size.dtype.name}")
        if size._shape is not None and tuple(size._shape) not in ((2,), (None,)):
            raise InvalidArgumentError(f"{op_type}: size must be a 1-D tensor of 2 elements "
                                       f"(new_height, new_width), got shape {list(size._shape)}")
        if attrs.get("align_corners") and attrs.get("half_pixel_centers"):
            raise InvalidArgumentError(f"{op_type}: if half_pixel_centers is True, "
                                       "align_corners must be False")
        v = static_value(size)
        hw = (None, None) if v is None else tuple(int(d) for d in np.asarray(v).reshape(-1))
        if v is not None and min(hw) <= 0:
            raise InvalidArgumentError(f"{op_type}: output dimensions must be positive, got "
                                       f"{list(hw)}")
        n, c = (None, None) if images._shape is None else (images._shape[0], images._shape[3])
        dt = _dt.float32 if op_type in _FLOAT_OUT else images.dtype
        return [(dt, (n,) + hw + (c,))]
    return shape_fn


def _grad_shape(inputs, attrs):
    return [(inputs[1].dtype, inputs[1]._shape)]


def _resize_grad(op, grad):
    image = op.inputs[0]
    if not image.dtype.is_floating:
        return [None, None]  # TF: no gradient into integer images
    attrs = dict(op.attrs)
    if op.type == "ResizeArea":
        g = apply_op("ResizeAreaGrad", [grad, image], attrs).outputs[0]
    else:
        g = apply_op(_RESIZE_GRADS[op.type], [grad, image], attrs).outputs[0]
    return [g, None]


for _op, _k in (("ResizeBilinear", _bilinear_kernel), ("ResizeBicubic", _bicubic_kernel),
                ("ResizeNearestNeighbor", _nearest_kernel), ("ResizeArea", _area_kernel)):
    register_op(_op, _resize_shape(_op), _k, grad=_resize_grad)
    register_kernel(_op, "GPU", _k)  # one source: the namespace of the input decides
for _kind, _grad_op in _RESIZE_GRADS.items():
    _k = _make_grad_kernel(_kind)
    register_op(_grad_op, _grad_shape, _k, differentiable=False)
    register_kernel(_grad_op, "GPU", _k)
register_op("ResizeAreaGrad", _grad_shape, _area_grad_kernel, differentiable=False)
register_kernel("ResizeAreaGrad", "GPU", _area_grad_kernel)


# ---- colour spaces ----------------------------------------------------------------------------

def _rgb_to_hsv_kernel(images):
    xp = array_namespace(images)
    r, g, b = images[..., 0], images[..., 1], images[..., 2]
    v = xp.maximum(xp.maximum(r, g), b)
    rng = v - xp.minimum(xp.minimum(r, g), b)
    zero = images.dtype.type(0)
    with np.errstate(divide="ignore", invalid="ignore"):
        s = xp.where(v > 0, rng / xp.where(v > 0, v, 1), zero)
        norm = (1 / rng) * images.dtype.type(1 / 6)
        h = xp.where(r == v, norm * (g - b),
                     xp.where(g == v, norm * (b - r) + images.dtype.type(2 / 6),
                              norm * (r - g) + images.dtype.type(4 / 6)))
    h = xp.where(rng > 0, h, zero)
    h = xp.where(h < 0, h + 1, h)
    return xp.stack([h, s, v], axis=-1)


def _hsv_to_rgb_kernel(images):
    xp = array_namespace(images)
    h, s, v = images[..., 0], images[..., 1], images[..., 2]
    c = s * v
    m = v - c
    dh = h * 6
    cat = xp.floor(dh)
    x = c * (1 - xp.abs(xp.fmod(dh, 2) - 1))
    zero = xp.zeros_like(c)
    # TF's switch on floor(6h): 0 (c,x,0) 1 (x,c,0) 2 (0,c,x) 3 (0,x,c) 4 (x,0,c) 5 (c,0,x)
    table = [(c, x, zero), (x, c, zero), (zero, c, x), (zero, x, c), (x, zero, c), (c, zero, x)]
    out = []
    for ch in range(3):
        val = zero
        for k, row in enumerate(table):
            val = xp.where(cat == k, row[ch], val)
        out.append(val + m)
    return xp.stack(out, axis=-1)


def _colour_shape(op_type):
    def shape_fn(inputs, attrs):
        (x,) = inputs
        if not x.dtype.is_floating:
            raise InvalidArgumentError(f"{op_type}: images must be float (convert with "
                                       f"tv.image.convert_image_dtype), got {x.dtype.name}")
        if x._shape is not None and (not x._shape or x._shape[-1] not in (3, None)):
            raise InvalidArgumentError(f"{op_type}: the last dimension must be 3 channels, got "
                                       f"shape {list(x._shape)}")
        return [(x.dtype, x._shape)]
    return shape_fn


register_op("RGBToHSV", _colour_shape("RGBToHSV"), _rgb_to_hsv_kernel)
register_kernel("RGBToHSV", "GPU", _rgb_to_hsv_kernel)
register_op("HSVToRGB", _colour_shape("HSVToRGB"), _hsv_to_rgb_kernel)
register_kernel("HSVToRGB", "GPU", _hsv_to_rgb_kernel)
