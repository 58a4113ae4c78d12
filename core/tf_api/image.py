"""``tv.image``: TF 1.x's ``tf.image`` — resizing, cropping and padding, flips and rotations,
colour adjustments, dtype conversion, codecs, and image statistics.

Kernels of their own: the resizes and colour spaces (:mod:`tensorvm.ops.image.image_ops`) and the
codecs (:mod:`tensorvm.ops.image.image_codec_ops`). Everything else is built from tensorvm's ops, as
TF builds it in Python, so gradients come from theirs. Functions take a 3-D image
``[height, width, channels]`` or a 4-D batch ``[batch, height, width, channels]``. Random
functions draw from the graph's seeded random ops; their values are not TF's numbers.

>>> import numpy as np, tensorvm as tv
>>> img = tv.constant(np.arange(6, dtype=np.uint8).reshape(1, 3, 2))
>>> with tv.Session() as s: s.run(tv.image.flip_left_right(img))[..., 0].tolist()
[[4, 2, 0]]
"""
from __future__ import annotations

import math as _math

import numpy as np

from ..framework import dtypes as _dt
from ..framework.errors import InvalidArgumentError
from ..framework.graph import Tensor, control_dependencies, name_scope
from ..framework.op_def_library import apply_op
from ..ops.image import image_box_ops, image_codec_ops, image_ops  # noqa: F401  (register the ops)
from ..ops import (Assert, abs as _abs, cast, concat, cond, expand_dims, floor, greater_equal,
                  less, log, maximum, minimum, pad, pow as _pow, random_uniform, reduce_all,
                  reduce_mean, reduce_prod, reduce_sum, reshape, reverse, round as round_,
                  rsqrt, shape, slice, sqrt, squared_difference, squeeze, stack, tile,
                  transpose as _transpose, zeros)
from ..ops.common import static_value
from ..framework.tensor_conversion import convert_to_tensor

__all__ = [
    "ResizeMethod", "resize_images", "resize", "resize_bilinear", "resize_nearest_neighbor",
    "resize_bicubic", "resize_area", "resize_image_with_crop_or_pad", "resize_with_crop_or_pad",
    "resize_image_with_pad", "crop_to_bounding_box", "pad_to_bounding_box", "central_crop",
    "random_crop", "flip_left_right", "flip_up_down", "random_flip_left_right",
    "random_flip_up_down", "transpose_image", "transpose", "rot90", "per_image_standardization",
    "convert_image_dtype", "adjust_brightness", "random_brightness", "adjust_contrast",
    "random_contrast", "adjust_gamma", "adjust_saturation", "random_saturation", "adjust_hue",
    "random_hue", "rgb_to_grayscale", "grayscale_to_rgb", "rgb_to_hsv", "hsv_to_rgb",
    "decode_png", "decode_jpeg", "decode_bmp", "decode_gif", "decode_image", "encode_png",
    "encode_jpeg", "extract_jpeg_shape", "total_variation", "image_gradients",
    "psnr", "rgb_to_yiq", "yiq_to_rgb", "rgb_to_yuv", "yuv_to_rgb", "sobel_edges", "ssim",
    "is_jpeg", "non_max_suppression", "sample_distorted_bounding_box",
    "draw_bounding_boxes"]


class ResizeMethod:
    """TF 1.x's resize methods (``tf.image.ResizeMethod``)."""
    BILINEAR = 0
    NEAREST_NEIGHBOR = 1
    BICUBIC = 2
    AREA = 3


_RESIZE_OPS = {ResizeMethod.BILINEAR: "ResizeBilinear",
               ResizeMethod.NEAREST_NEIGHBOR: "ResizeNearestNeighbor",
               ResizeMethod.BICUBIC: "ResizeBicubic", ResizeMethod.AREA: "ResizeArea"}
_METHOD_NAMES = {"bilinear": 0, "nearest": 1, "bicubic": 2, "area": 3}


# ---- shapes -----------------------------------------------------------------------------------

def _image(image, what="image", ranks=(3, 4)) -> Tensor:
    image = convert_to_tensor(image, name=what)
    if image._shape is None:
        raise ValueError(f"'{what}' contains no shape.")
    if len(image._shape) not in ranks:
        want = " or ".join(str(r) for r in ranks)
        raise ValueError(f"'{what}' must have {want} dimensions, got shape "
                         f"{list(image._shape)}")
    return image


def _dims(image):
    """(height, width) of an image or batch: ints where static, else scalar int32 tensors."""
    s = image._shape
    h, w = s[-3], s[-2]
    if h is None or w is None:
        dyn = shape(image)
        n = len(s)
        h = dyn[n - 3] if h is None else h
        w = dyn[n - 2] if w is None else w
    return h, w


def _int(x):
    """A Python int when ``x`` is static, else None."""
    if isinstance(x, (int, np.integer)):
        return int(x)
    v = static_value(x)
    return None if v is None or np.ndim(v) else int(v)


def _check(ok, msg):
    if ok is False:
        raise ValueError(msg)


def _batched(image):
    """(4-D image, was_batch)."""
    if len(image._shape) == 3:
        return expand_dims(image, 0), False
    return image, True


def _unbatched(out, was_batch):
    return out if was_batch else squeeze(out, [0])


# ---- resizing ---------------------------------------------------------------------------------

def _resize(op_type, images, size, align_corners, half_pixel_centers, name):
    images = _image(images, "images")
    batch, was_batch = _batched(images)
    size = convert_to_tensor(size, dtype=_dt.int32, name="size")
    out = apply_op(op_type, [batch, size], {"align_corners": bool(align_corners),
                                            "half_pixel_centers": bool(half_pixel_centers)}
                   if op_type != "ResizeArea" else {"align_corners": bool(align_corners)},
                   name=name or op_type).outputs[0]
    return _unbatched(out, was_batch)


def resize_bilinear(images, size, align_corners=False, name=None, half_pixel_centers=False):
    """Bilinear resize to ``size = [new_height, new_width]``; float32 out."""
    return _resize("ResizeBilinear", images, size, align_corners, half_pixel_centers, name)


def resize_nearest_neighbor(images, size, align_corners=False, name=None,
                            half_pixel_centers=False):
    """Nearest-neighbour resize to ``size``; keeps the dtype."""
    return _resize("ResizeNearestNeighbor", images, size, align_corners, half_pixel_centers,
                   name)


def resize_bicubic(images, size, align_corners=False, name=None, half_pixel_centers=False):
    """Bicubic resize to ``size`` (Keys' kernel with ``half_pixel_centers``); float32 out."""
    return _resize("ResizeBicubic", images, size, align_corners, half_pixel_centers, name)


def resize_area(images, size, align_corners=False, name=None):
    """Area (box-average) resize to ``size``; float32 out."""
    return _resize("ResizeArea", images, size, align_corners, False, name)


def resize_images(images, size, method=ResizeMethod.BILINEAR, align_corners=False,
                  preserve_aspect_ratio=False, name=None):
    """TF 1.x's ``tf.image.resize_images``: resize ``images`` (3-D or 4-D) to ``size`` by
    ``method``; an image already of that size comes back unchanged (its dtype too)."""
    method = _METHOD_NAMES.get(method, method)
    if method not in _RESIZE_OPS:
        raise ValueError(f"Resize method is not implemented: {method!r}")
    with name_scope(name or "resize"):
        images = _image(images, "images")
        batch, was_batch = _batched(images)
        h, w = _dims(batch)
        sv = static_value(size)
        if sv is not None and np.shape(sv) != (2,):
            raise ValueError("'size' must be a 1-D Tensor of 2 elements: new_height, new_width")
        if preserve_aspect_ratio:
            if not (isinstance(h, int) and isinstance(w, int) and sv is not None):
                raise ValueError("resize_images(preserve_aspect_ratio=True) needs the image's "
                                 "height and width and the size known when the graph is built")
            f = min(np.float32(sv[0]) / np.float32(h), np.float32(sv[1]) / np.float32(w))
            sv = np.asarray([round(float(f * np.float32(h))), round(float(f * np.float32(w)))])
            size = sv
        if sv is not None and isinstance(h, int) and isinstance(w, int) \
                and (int(sv[0]), int(sv[1])) == (h, w):
            return images
        op = _RESIZE_OPS[method]
        size = convert_to_tensor(size, dtype=_dt.int32, name="size")
        attrs = {"align_corners": bool(align_corners)}
        if op != "ResizeArea":
            attrs["half_pixel_centers"] = False
        out = apply_op(op, [batch, size], attrs, name=op).outputs[0]
        return _unbatched(out, was_batch)


resize = resize_images


def _crop_or_pad_offsets(size, target):
    diff = target - size
    if isinstance(diff, int):
        return max(-diff // 2, 0), max(diff // 2, 0), min(target, size)
    return (maximum(-diff // 2, 0), maximum(diff // 2, 0), minimum(target, size))


def resize_image_with_crop_or_pad(image, target_height, target_width):
    """Centre-crop and/or zero-pad ``image`` to ``[target_height, target_width]``."""
    with name_scope("resize_image_with_crop_or_pad"):
        image = _image(image)
        _check(_int(target_height) is None or _int(target_height) > 0,
               "target_height must be > 0.")
        _check(_int(target_width) is None or _int(target_width) > 0,
               "target_width must be > 0.")
        h, w = _dims(image)
        th = _int(target_height) if _int(target_height) is not None else target_height
        tw = _int(target_width) if _int(target_width) is not None else target_width
        crop_h, pad_h, keep_h = _crop_or_pad_offsets(h, th)
        crop_w, pad_w, keep_w = _crop_or_pad_offsets(w, tw)
        cropped = crop_to_bounding_box(image, crop_h, crop_w, keep_h, keep_w)
        return pad_to_bounding_box(cropped, pad_h, pad_w, th, tw)


resize_with_crop_or_pad = resize_image_with_crop_or_pad


def resize_image_with_pad(image, target_height, target_width, method=ResizeMethod.BILINEAR,
                          align_corners=False):
    """Resize ``image`` to fit ``[target_height, target_width]`` keeping its aspect ratio, then
    zero-pad it to that size (TF 1.x's ``resize_image_with_pad``)."""
    with name_scope("resize_image_with_pad"):
        image = _image(image)
        h, w = _dims(image)
        th, tw = _int(target_height), _int(target_width)
        if not all(isinstance(v, int) for v in (h, w, th, tw)):
            raise ValueError("resize_image_with_pad needs the image's height and width and the "
                             "target size known when the graph is built")
        _check(th > 0, "target_height must be > 0.")
        _check(tw > 0, "target_width must be > 0.")
        ratio = max(w / tw, h / th)
        rh, rw = h / ratio, w / ratio
        ph = max(0, int(_math.floor((th - rh) / 2)))
        pw = max(0, int(_math.floor((tw - rw) / 2)))
        resized = resize_images(image, [int(_math.floor(rh)), int(_math.floor(rw))], method,
                                align_corners)
        return pad_to_bounding_box(resized, ph, pw, th, tw)


# ---- cropping and padding -----------------------------------------------------------------------

def crop_to_bounding_box(image, offset_height, offset_width, target_height, target_width):
    """The ``[target_height, target_width]`` window of ``image`` at
    ``(offset_height, offset_width)``."""
    with name_scope("crop_to_bounding_box"):
        image = _image(image)
        oh, ow, th, tw = (_int(v) for v in (offset_height, offset_width, target_height,
                                            target_width))
        _check(ow is None or ow >= 0, "offset_width must be >= 0.")
        _check(oh is None or oh >= 0, "offset_height must be >= 0.")
        _check(tw is None or tw > 0, "target_width must be > 0.")
        _check(th is None or th > 0, "target_height must be > 0.")
        h, w = _dims(image)
        if isinstance(w, int) and ow is not None and tw is not None:
            _check(w >= tw + ow, "width must be >= target + offset.")
        if isinstance(h, int) and oh is not None and th is not None:
            _check(h >= th + oh, "height must be >= target + offset.")
        batch = len(image._shape) == 4
        lead = [0] if batch else []
        lead_size = [-1] if batch else []
        begin = stack(lead + [offset_height, offset_width, 0]) if None in (oh, ow) \
            else lead + [oh, ow, 0]
        size = stack(lead_size + [target_height, target_width, -1]) if None in (th, tw) \
            else lead_size + [th, tw, -1]
        return slice(image, begin, size)


def pad_to_bounding_box(image, offset_height, offset_width, target_height, target_width):
    """``image`` placed at ``(offset_height, offset_width)`` in a zero image of
    ``[target_height, target_width]``."""
    with name_scope("pad_to_bounding_box"):
        image = _image(image)
        h, w = _dims(image)
        oh, ow, th, tw = (_int(v) for v in (offset_height, offset_width, target_height,
                                            target_width))
        _check(oh is None or oh >= 0, "offset_height must be >= 0")
        _check(ow is None or ow >= 0, "offset_width must be >= 0")
        if isinstance(w, int) and None not in (ow, tw):
            _check(w <= tw - ow, "width must be <= target - offset")
        if isinstance(h, int) and None not in (oh, th):
            _check(h <= th - oh, "height must be <= target - offset")
        after_h = target_height - offset_height - h
        after_w = target_width - offset_width - w
        rows = [[offset_height, after_h], [offset_width, after_w], [0, 0]]
        if len(image._shape) == 4:
            rows = [[0, 0]] + rows
        static = all(_int(v) is not None for row in rows for v in row)
        paddings = [[_int(v) for v in row] for row in rows] if static else stack(
            [stack([convert_to_tensor(v, dtype=_dt.int32) for v in row]) for row in rows])
        return pad(image, paddings)


def central_crop(image, central_fraction):
    """The central ``central_fraction`` of ``image`` along height and width."""
    if not 0.0 < central_fraction <= 1.0:
        raise ValueError("central_fraction must be within (0, 1]")
    with name_scope("central_crop"):
        image = _image(image)
        if central_fraction == 1.0:
            return image
        h, w = _dims(image)

        def start(n):
            if isinstance(n, int):
                return int((n - n * central_fraction) / 2)
            nd = cast(n, _dt.float64)
            return cast((nd - nd * central_fraction) / 2, _dt.int32)
        sh, sw = start(h), start(w)
        return crop_to_bounding_box(image, sh, sw, h - sh * 2, w - sw * 2)


def random_crop(value, size, seed=None, name=None):
    """A random ``size`` window of ``value`` (any rank; TF's ``tf.random_crop``). Fails when
    ``size`` exceeds the value's shape."""
    with name_scope(name or "random_crop"):
        value = convert_to_tensor(value, name="value")
        size = convert_to_tensor(size, dtype=_dt.int32, name="size")
        sv, vs = static_value(size), value._shape
        if sv is not None and vs is not None:
            if len(sv) != len(vs):
                raise ValueError(f"random_crop: size {list(sv)} must have one entry per "
                                 f"dimension of value {list(vs)}")
            for d, s in zip(vs, sv):
                if d is not None and s > d:
                    raise ValueError(f"random_crop: need value.shape >= size, got "
                                     f"{list(vs)} and {[int(v) for v in sv]}")
        full = shape(value)
        check = Assert(reduce_all(greater_equal(full, size)),
                       ["Need value.shape >= size, got ", full, size], summarize=1000)
        with control_dependencies([check]):
            limit = full - size + 1
        offset = random_uniform(shape(full), dtype=_dt.int32, maxval=2**31 - 1,
                                seed=seed) % limit
        return slice(value, offset, size)


# ---- flips and rotations ------------------------------------------------------------------------

def _axis(image, axis3):
    return axis3 + (len(image._shape) - 3)


def flip_left_right(image):
    """``image`` mirrored along its width."""
    image = _image(image)
    return reverse(image, [_axis(image, 1)])


def flip_up_down(image):
    """``image`` mirrored along its height."""
    image = _image(image)
    return reverse(image, [_axis(image, 0)])


def _random_flip(image, axis3, seed, scope):
    with name_scope(scope):
        image = _image(image)
        axis = _axis(image, axis3)
        if len(image._shape) == 3:
            flip = less(random_uniform([], 0, 1.0, seed=seed), 0.5)
            return cond(flip, lambda: reverse(image, [axis]), lambda: image)
        # a batch: each image flipped or not, as TF 1.x does it (a 0/1 factor per image)
        n = shape(image)[0]
        u = random_uniform(expand_dims(n, 0), 0, 1.0, seed=seed)
        flips = cast(reshape(round_(u), stack([n, 1, 1, 1])), image.dtype)
        return flips * reverse(image, [axis]) + (1 - flips) * image


def random_flip_left_right(image, seed=None):
    """``image`` (each image of a batch) mirrored left-right with probability 1/2."""
    return _random_flip(image, 1, seed, "random_flip_left_right")


def random_flip_up_down(image, seed=None):
    """``image`` (each image of a batch) mirrored up-down with probability 1/2."""
    return _random_flip(image, 0, seed, "random_flip_up_down")


def transpose_image(image, name=None):
    """``image`` with height and width swapped."""
    with name_scope(name or "transpose"):
        image = _image(image)
        perm = [1, 0, 2] if len(image._shape) == 3 else [0, 2, 1, 3]
        return _transpose(image, perm)


transpose = transpose_image


def rot90(image, k=1, name=None):
    """``image`` rotated counter-clockwise by ``k`` quarter turns."""
    with name_scope(name or "rot90"):
        image = _image(image)
        kk = _int(k)

        def turn(n):
            n %= 4
            if n == 0:
                return image
            if n == 2:
                return flip_up_down(flip_left_right(image))
            if n == 1:
                return flip_up_down(transpose_image(image))
            return transpose_image(flip_up_down(image))
        if kk is not None:
            return turn(kk)
        k = convert_to_tensor(k, dtype=_dt.int32) % 4
        return cond(k < 2,
                    lambda: cond(k < 1, lambda: turn(0), lambda: turn(1)),
                    lambda: cond(k < 3, lambda: turn(2), lambda: turn(3)))


# ---- dtype and colour ---------------------------------------------------------------------------

def convert_image_dtype(image, dtype, saturate=False, name=None):
    """TF's image dtype conversion: integers scale to their range, floats live in [0, 1]
    (``saturate`` clips before casting to an integer type)."""
    dtype = _dt.as_dtype(dtype)
    with name_scope(name or "convert_image"):
        image = convert_to_tensor(image, name="image")
        src = image.dtype
        if not (src.is_floating or src.is_integer) or not (dtype.is_floating
                                                           or dtype.is_integer):
            raise InvalidArgumentError(f"convert_image_dtype: images must be integer or float, "
                                       f"got {src.name} -> {dtype.name}")
        if src == dtype:
            return image
        if src.is_integer and dtype.is_integer:
            smax, dmax = int(np.iinfo(src.np_dtype).max), int(np.iinfo(dtype.np_dtype).max)
            if smax > dmax:
                return cast(image // ((smax + 1) // (dmax + 1)), dtype)
            return cast(image, dtype) * ((dmax + 1) // (smax + 1))
        if src.is_floating and dtype.is_floating:
            return cast(image, dtype)
        if src.is_integer:
            return cast(image, dtype) * (1.0 / int(np.iinfo(src.np_dtype).max))
        info = np.iinfo(dtype.np_dtype)
        scaled = image * (float(info.max) + 0.5)
        if saturate:
            scaled = minimum(maximum(scaled, float(info.min)), float(info.max))
        return cast(scaled, dtype)


def _to_float(image):
    image = convert_to_tensor(image, name="image")
    return image, (image if image.dtype.is_floating
                   else convert_image_dtype(image, _dt.float32))


def _back(orig, flt):
    return convert_image_dtype(flt, orig.dtype, saturate=True)


def rgb_to_hsv(images, name=None):
    """RGB floats in [0, 1] to HSV (hue in [0, 1))."""
    return apply_op("RGBToHSV", [convert_to_tensor(images)], {},
                    name=name or "RGBToHSV").outputs[0]


def hsv_to_rgb(images, name=None):
    """HSV floats to RGB."""
    return apply_op("HSVToRGB", [convert_to_tensor(images)], {},
                    name=name or "HSVToRGB").outputs[0]


def rgb_to_grayscale(images, name=None):
    """One luma channel (``0.2989 R + 0.5870 G + 0.1140 B``), in the input's dtype."""
    with name_scope(name or "rgb_to_grayscale"):
        orig, flt = _to_float(images)
        w = convert_to_tensor(np.asarray([0.2989, 0.5870, 0.1140]), dtype=flt.dtype)
        grey = expand_dims(reduce_sum(flt * w, -1), -1)
        return convert_image_dtype(grey, orig.dtype)


def grayscale_to_rgb(images, name=None):
    """The one channel repeated three times."""
    with name_scope(name or "grayscale_to_rgb"):
        images = convert_to_tensor(images, name="images")
        if images._shape is not None and images._shape[-1] not in (1, None):
            raise ValueError(f"grayscale_to_rgb: the last dimension must be 1, got shape "
                             f"{list(images._shape)}")
        rank = len(images._shape)
        return tile(images, [1] * (rank - 1) + [3])


def per_image_standardization(image):
    """``(x - mean) / max(stddev, 1 / sqrt(num_pixels))`` per image; integer images become
    float32."""
    with name_scope("per_image_standardization"):
        image = _image(image)
        if not image.dtype.is_floating:
            image = cast(image, _dt.float32)
        num = reduce_prod(shape(image)[-3:])
        mean = reduce_mean(image, axis=[-1, -2, -3], keepdims=True)
        var = reduce_mean(squared_difference(image, mean), axis=[-1, -2, -3], keepdims=True)
        floor_std = rsqrt(cast(num, image.dtype))
        return (image - mean) / maximum(sqrt(var), floor_std)


def adjust_brightness(image, delta):
    """``image + delta`` (in [0, 1] float terms), back in the image's dtype."""
    with name_scope("adjust_brightness"):
        orig, flt = _to_float(image)
        return _back(orig, flt + cast(delta, flt.dtype))


def adjust_contrast(images, contrast_factor):
    """``(x - mean) * contrast_factor + mean`` per channel of each image."""
    with name_scope("adjust_contrast"):
        orig, flt = _to_float(images)
        mean = reduce_mean(flt, axis=[-3, -2], keepdims=True)
        return _back(orig, (flt - mean) * cast(contrast_factor, flt.dtype) + mean)


def adjust_gamma(image, gamma=1, gain=1):
    """``gain * image ** gamma`` (in [0, 1] float terms); gamma must be non-negative."""
    g = _int(gamma) if isinstance(gamma, (int, np.integer)) else static_value(gamma)
    if g is not None and np.ndim(g) == 0 and float(g) < 0:
        raise ValueError("Gamma should be a non-negative real number.")
    with name_scope("adjust_gamma"):
        orig, flt = _to_float(image)
        return _back(orig, cast(gain, flt.dtype) * _pow(flt, cast(gamma, flt.dtype)))


def _via_hsv(image, fn, scope):
    with name_scope(scope):
        orig, flt = _to_float(image)
        hsv = rgb_to_hsv(flt)
        n = len(hsv._shape) - 1
        h, s, v = (slice(hsv, [0] * n + [i], [-1] * n + [1]) for i in range(3))
        h, s, v = fn(h, s, v)
        return _back(orig, hsv_to_rgb(concat([h, s, v], -1)))


def adjust_saturation(image, saturation_factor, name=None):
    """Saturation scaled by ``saturation_factor`` (clipped to [0, 1]) in HSV."""
    return _via_hsv(image, lambda h, s, v: (h, minimum(maximum(
        s * cast(saturation_factor, s.dtype), 0.0), 1.0), v), name or "adjust_saturation")


def adjust_hue(image, delta, name=None):
    """Hue rotated by ``delta`` (in [-1, 1], a full turn being 1) in HSV."""
    def fn(h, s, v):
        shifted = h + cast(delta, h.dtype)
        return shifted - floor(shifted), s, v
    return _via_hsv(image, fn, name or "adjust_hue")


def random_brightness(image, max_delta, seed=None):
    """:func:`adjust_brightness` by a delta uniform in ``[-max_delta, max_delta)``."""
    if max_delta < 0:
        raise ValueError("max_delta must be non-negative.")
    return adjust_brightness(image, random_uniform([], -max_delta, max_delta, seed=seed))


def _check_range(lower, upper):
    if upper <= lower:
        raise ValueError("upper must be > lower.")
    if lower < 0:
        raise ValueError("lower must be non-negative.")


def random_contrast(image, lower, upper, seed=None):
    """:func:`adjust_contrast` by a factor uniform in ``[lower, upper)``."""
    _check_range(lower, upper)
    return adjust_contrast(image, random_uniform([], lower, upper, seed=seed))


def random_saturation(image, lower, upper, seed=None):
    """:func:`adjust_saturation` by a factor uniform in ``[lower, upper)``."""
    _check_range(lower, upper)
    return adjust_saturation(image, random_uniform([], lower, upper, seed=seed))


def random_hue(image, max_delta, seed=None):
    """:func:`adjust_hue` by a delta uniform in ``[-max_delta, max_delta)``, at most 0.5."""
    if max_delta > 0.5:
        raise ValueError("max_delta must be <= 0.5.")
    if max_delta < 0:
        raise ValueError("max_delta must be non-negative.")
    return adjust_hue(image, random_uniform([], -max_delta, max_delta, seed=seed))


# ---- codecs -------------------------------------------------------------------------------------

def _codec(op_type, contents, attrs, name):
    return apply_op(op_type, [convert_to_tensor(contents, dtype=_dt.string)], attrs,
                    name=name or op_type).outputs[0]


def decode_png(contents, channels=0, dtype=_dt.uint8, name=None):
    """A PNG string to ``[height, width, channels]`` uint8 (or uint16)."""
    dt = _dt.as_dtype(dtype)
    if dt not in (_dt.uint8, _dt.uint16):
        raise InvalidArgumentError(f"decode_png: dtype must be uint8 or uint16, got {dt.name}")
    return _codec("DecodePng", contents, {"channels": int(channels), "dtype": dt.name}, name)


def decode_jpeg(contents, channels=0, ratio=1, fancy_upscaling=True,
                try_recover_truncated=False, acceptable_fraction=1, dct_method="", name=None):
    """A JPEG string to ``[height, width, channels]`` uint8 (``ratio`` downscales by 1/2/4/8
    while decoding)."""
    return _codec("DecodeJpeg", contents, {
        "channels": int(channels), "ratio": int(ratio), "fancy_upscaling": bool(fancy_upscaling),
        "try_recover_truncated": bool(try_recover_truncated),
        "acceptable_fraction": float(acceptable_fraction), "dct_method": str(dct_method)}, name)


def decode_bmp(contents, channels=0, name=None):
    """A BMP string to ``[height, width, channels]`` uint8."""
    return _codec("DecodeBmp", contents, {"channels": int(channels)}, name)


def decode_gif(contents, name=None):
    """A GIF string to ``[frames, height, width, 3]`` uint8."""
    return _codec("DecodeGif", contents, {}, name)


def decode_image(contents, channels=None, dtype=_dt.uint8, name=None, expand_animations=True):
    """Any of PNG, JPEG, GIF or BMP, by its first bytes; a float ``dtype`` gives values in
    [0, 1] (as :func:`convert_image_dtype`)."""
    dt = _dt.as_dtype(dtype)
    raw = _dt.uint16 if dt == _dt.uint16 else _dt.uint8
    out = _codec("DecodeImage", contents, {"channels": int(channels or 0), "dtype": raw.name,
                                           "expand_animations": bool(expand_animations)}, name)
    return out if dt == raw else convert_image_dtype(out, dt)


def encode_png(image, compression=-1, name=None):
    """A uint8/uint16 ``[height, width, channels]`` image to a PNG string."""
    return apply_op("EncodePng", [convert_to_tensor(image)], {"compression": int(compression)},
                    name=name or "EncodePng").outputs[0]


def encode_jpeg(image, format="", quality=95, progressive=False, optimize_size=False,
                chroma_downsampling=True, density_unit="in", x_density=300, y_density=300,
                xmp_metadata="", name=None):
    """A uint8 ``[height, width, 1 or 3]`` image to a JPEG string."""
    return apply_op("EncodeJpeg", [convert_to_tensor(image)], {
        "format": format, "quality": int(quality), "progressive": bool(progressive),
        "optimize_size": bool(optimize_size), "chroma_downsampling": bool(chroma_downsampling)},
        name=name or "EncodeJpeg").outputs[0]


def extract_jpeg_shape(contents, output_type=_dt.int32, name=None):
    """``[height, width, channels]`` of a JPEG, read from its header."""
    return _codec("ExtractJpegShape", contents,
                  {"output_type": _dt.as_dtype(output_type).name}, name)


# ---- statistics ---------------------------------------------------------------------------------

def total_variation(images, name=None):
    """The sum of absolute differences of neighbouring pixels (per image for a batch)."""
    with name_scope(name or "total_variation"):
        images = _image(images, "images")
        if len(images._shape) == 3:
            d1 = images[1:, :, :] - images[:-1, :, :]
            d2 = images[:, 1:, :] - images[:, :-1, :]
            return reduce_sum(_abs(d1)) + reduce_sum(_abs(d2))
        d1 = images[:, 1:, :, :] - images[:, :-1, :, :]
        d2 = images[:, :, 1:, :] - images[:, :, :-1, :]
        return reduce_sum(_abs(d1), [1, 2, 3]) + reduce_sum(_abs(d2), [1, 2, 3])


def image_gradients(image):
    """``(dy, dx)``: forward differences of a 4-D batch, zero in the last row / column."""
    image = _image(image, ranks=(4,))
    dy = image[:, 1:, :, :] - image[:, :-1, :, :]
    dx = image[:, :, 1:, :] - image[:, :, :-1, :]
    n, h, w, c = (shape(image)[i] for i in range(4))
    dy = concat([dy, zeros(stack([n, 1, w, c]), image.dtype)], 1)
    dx = concat([dx, zeros(stack([n, h, 1, c]), image.dtype)], 2)
    return dy, dx


def psnr(a, b, max_val, name=None):
    """Peak signal-to-noise ratio of ``a`` against ``b`` per image, in dB."""
    with name_scope(name or "PSNR"):
        a, b = convert_to_tensor(a), convert_to_tensor(b)
        if a.dtype != b.dtype:
            raise InvalidArgumentError(f"psnr: a ({a.dtype.name}) and b ({b.dtype.name}) must "
                                       "have one dtype")
        # max_val is in a's terms (255 for uint8 images), converted as the images are
        mv = convert_image_dtype(cast(max_val, a.dtype), _dt.float32)
        a = convert_image_dtype(a, _dt.float32)
        b = convert_image_dtype(b, _dt.float32)
        mse = reduce_mean(squared_difference(a, b), [-3, -2, -1])
        return 20.0 * log(mv) / _math.log(10.0) - (10.0 / _math.log(10.0)) * log(mse)


# ---- linear colour spaces, edges, SSIM ---------------------------------------------------------

_RGB_TO_YIQ = [[0.299, 0.59590059, 0.2115], [0.587, -0.27455667, -0.52273617],
               [0.114, -0.32134392, 0.31119955]]
_YIQ_TO_RGB = [[1, 1, 1], [0.95598634, -0.27201283, -1.10674021],
               [0.6208248, -0.64720424, 1.70423049]]
_RGB_TO_YUV = [[0.299, -0.14714119, 0.61497538], [0.587, -0.28886916, -0.51496512],
               [0.114, 0.43601035, -0.10001026]]
_YUV_TO_RGB = [[1, 1, 1], [0, -0.394642334, 2.03206185], [1.13988303, -0.58062185, 0]]


def _colour_matrix(images, kernel, name):
    from ..ops import matmul
    with name_scope(name):
        images = convert_to_tensor(images, name="images")
        if images._shape is not None and images._shape and images._shape[-1] not in (3, None):
            raise ValueError(f"{name}: the last dimension must be 3 channels, got shape "
                             f"{list(images._shape)}")
        k = convert_to_tensor(np.asarray(kernel), dtype=images.dtype, name="kernel")
        flat = matmul(reshape(images, [-1, 3]), k)
        return reshape(flat, shape(images))


def rgb_to_yiq(images):
    """RGB (in [0, 1]) to YIQ, by TF's matrix."""
    return _colour_matrix(images, _RGB_TO_YIQ, "rgb_to_yiq")


def yiq_to_rgb(images):
    """YIQ to RGB, by TF's matrix."""
    return _colour_matrix(images, _YIQ_TO_RGB, "yiq_to_rgb")


def rgb_to_yuv(images):
    """RGB (in [0, 1]) to YUV, by TF's matrix."""
    return _colour_matrix(images, _RGB_TO_YUV, "rgb_to_yuv")


def yuv_to_rgb(images):
    """YUV to RGB, by TF's matrix."""
    return _colour_matrix(images, _YUV_TO_RGB, "yuv_to_rgb")


def sobel_edges(image):
    """Sobel derivatives of a 4-D batch: ``[batch, h, w, channels, 2]`` (dy, dx), the image
    padded by reflection as TF does."""
    from ..ops.nn.nn_conv_ext import depthwise_conv2d
    image = _image(image, ranks=(4,))
    c = _known(image._shape[-1], "sobel_edges")
    ky = np.asarray([[-1, -2, -1], [0, 0, 0], [1, 2, 1]], np.float64)
    kernel = np.stack([ky, ky.T], axis=-1)[:, :, None, :]        # [3, 3, 1, 2]
    kernel = np.tile(kernel, (1, 1, c, 1))                        # [3, 3, c, 2]
    padded = pad(image, [[0, 0], [1, 1], [1, 1], [0, 0]], mode="REFLECT")
    out = depthwise_conv2d(padded, convert_to_tensor(kernel, dtype=image.dtype),
                           [1, 1, 1, 1], "VALID")
    n, h, w = (shape(image)[i] for i in range(3))
    return reshape(out, stack([n, h, w, c, 2]))


def _known(d, what):
    if d is None:
        raise ValueError(f"{what}: the channel dimension must be known")
    return int(d)


def _gauss(size, sigma):
    coords = np.arange(size, dtype=np.float64) - (size - 1) / 2.0
    g = -0.5 * coords ** 2 / sigma ** 2
    g = g[None, :] + g[:, None]
    g = np.exp(g - g.max())
    return (g / g.sum())[:, :, None, None]


def ssim(img1, img2, max_val, filter_size=11, filter_sigma=1.5, k1=0.01, k2=0.03):
    """TF's structural similarity per image (Gaussian window ``filter_size``/``filter_sigma``,
    no padding), averaged over height, width and channels; integer images are converted as
    :func:`convert_image_dtype` does, ``max_val`` with them."""
    from ..ops.nn.nn_conv_ext import depthwise_conv2d
    with name_scope("SSIM"):
        a, b = convert_to_tensor(img1), convert_to_tensor(img2)
        if a.dtype != b.dtype:
            raise InvalidArgumentError(f"ssim: img1 ({a.dtype.name}) and img2 ({b.dtype.name}) "
                                       "must have one dtype")
        if a._shape is None or len(a._shape) < 3:
            raise ValueError("ssim: images must have rank >= 3 [..., height, width, channels]")
        for d in a._shape[-3:-1]:
            if d is not None and d < filter_size:
                raise ValueError(f"ssim: images ({list(a._shape)}) must be at least "
                                 f"filter_size ({filter_size}) high and wide")
        mv = convert_image_dtype(cast(max_val, a.dtype), _dt.float32)
        a, b = convert_image_dtype(a, _dt.float32), convert_image_dtype(b, _dt.float32)
        c = _known(a._shape[-1], "ssim")
        kernel = convert_to_tensor(np.tile(_gauss(filter_size, filter_sigma), (1, 1, c, 1)),
                                   dtype=_dt.float32)
        lead = a._shape[:-3]

        def reducer(x):
            x4 = reshape(x, concat([[-1], shape(x)[-3:]], 0))
            y = depthwise_conv2d(x4, kernel, [1, 1, 1, 1], "VALID")
            return reshape(y, concat([shape(x)[:-3], shape(y)[1:]], 0)) if lead else \
                reshape(y, shape(y)[1:])
        c1, c2 = (k1 * mv) ** 2, (k2 * mv) ** 2
        m0, m1 = reducer(a), reducer(b)
        num0 = m0 * m1 * 2.0
        den0 = m0 * m0 + m1 * m1
        luminance = (num0 + c1) / (den0 + c1)
        num1 = reducer(a * b) * 2.0
        den1 = reducer(a * a + b * b)
        cs = (num1 - num0 + c2) / (den1 - den0 + c2)
        per_channel = reduce_mean(luminance * cs, [-3, -2])
        return reduce_mean(per_channel, [-1])


def is_jpeg(contents, name=None):
    """Whether a string starts with JPEG's magic bytes."""
    from ..ops import equal, substr
    with name_scope(name or "is_jpeg"):
        return equal(substr(convert_to_tensor(contents, dtype=_dt.string), 0, 3),
                     convert_to_tensor(b"\xff\xd8\xff", dtype=_dt.string))


# ---- boxes --------------------------------------------------------------------------------------

def non_max_suppression(boxes, scores, max_output_size, iou_threshold=0.5,
                        score_threshold=float("-inf"), name=None):
    """Indices (int32) of up to ``max_output_size`` boxes ``[y1, x1, y2, x2]`` kept by greedy
    non-max suppression: best score first, dropping boxes whose IoU with a kept one exceeds
    ``iou_threshold`` (and boxes scoring at most ``score_threshold``)."""
    boxes = convert_to_tensor(boxes)
    scores = convert_to_tensor(scores, dtype=boxes.dtype)
    return apply_op("NonMaxSuppressionV3", [
        boxes, scores, convert_to_tensor(max_output_size, dtype=_dt.int32),
        convert_to_tensor(iou_threshold, dtype=_dt.float32),
        convert_to_tensor(score_threshold, dtype=_dt.float32)],
        name=name or "NonMaxSuppressionV3").outputs[0]


def sample_distorted_bounding_box(image_size, bounding_boxes, seed=None, seed2=None,
                                  min_object_covered=0.1, aspect_ratio_range=None,
                                  area_range=None, max_attempts=None,
                                  use_image_if_no_bounding_boxes=None, name=None):
    """TF's random crop for data augmentation: ``(begin, size, bboxes)`` of a crop with an
    aspect ratio in ``aspect_ratio_range`` and an area fraction in ``area_range`` that covers
    at least ``min_object_covered`` of one of ``bounding_boxes`` (``[batch, N, 4]`` in [0, 1]);
    after ``max_attempts`` failures, the whole image. Feed ``begin``/``size`` to ``tv.slice``."""
    from ..ops.math.random_ops import get_seed
    s1, s2 = get_seed(seed)
    attrs = {"seed": s1, "seed2": s2 if seed2 is None else int(seed2),
             "aspect_ratio_range": tuple(float(v) for v in (aspect_ratio_range or (0.75, 1.33))),
             "area_range": tuple(float(v) for v in (area_range or (0.05, 1.0))),
             "max_attempts": int(max_attempts or 100),
             "use_image_if_no_bounding_boxes": bool(use_image_if_no_bounding_boxes)}
    size = convert_to_tensor(image_size)
    return tuple(apply_op("SampleDistortedBoundingBoxV2", [
        size, convert_to_tensor(bounding_boxes, dtype=_dt.float32),
        convert_to_tensor(min_object_covered, dtype=_dt.float32)], attrs,
        name=name or "SampleDistortedBoundingBoxV2").outputs)


def draw_bounding_boxes(images, boxes, name=None, colors=None):
    """Float ``images`` ``[batch, h, w, c]`` with the outlines of ``boxes``
    ``[batch, N, 4]`` (``[y1, x1, y2, x2]`` in [0, 1]) drawn in ``colors`` (TF's cycle of
    ten by default)."""
    images = convert_to_tensor(images)
    cols = convert_to_tensor(np.zeros((0, 4), np.float32) if colors is None else colors,
                             dtype=_dt.float32)
    return apply_op("DrawBoundingBoxesV2", [images, convert_to_tensor(boxes, dtype=_dt.float32),
                                            cols], name=name or "DrawBoundingBoxesV2").outputs[0]
