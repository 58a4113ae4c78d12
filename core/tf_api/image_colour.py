"""``tv.image``'s dtype conversion and colour: ``convert_image_dtype``, RGB/HSV/grayscale and the
linear colour spaces (YIQ, YUV), standardization, brightness, contrast, gamma, saturation and
hue (and their random forms).
"""
from __future__ import annotations

import numpy as np

from ..framework import dtypes as _dt
from ..framework.errors import InvalidArgumentError
from ..framework.graph import name_scope
from ..framework.op_def_library import apply_op
from ..ops import (cast, concat, expand_dims, floor, maximum, minimum, pow as _pow, random_uniform,
                   reduce_mean, reduce_prod, reduce_sum, reshape, rsqrt, shape, slice, sqrt,
                   squared_difference, tile)
from ..ops.common import static_value
from ..framework.tensor_conversion import convert_to_tensor
from .image_geometry import _image, _int

__all__ = ["convert_image_dtype", "rgb_to_hsv", "hsv_to_rgb", "rgb_to_grayscale",
           "grayscale_to_rgb", "per_image_standardization", "adjust_brightness", "adjust_contrast",
           "adjust_gamma", "adjust_saturation", "adjust_hue", "random_brightness",
           "random_contrast", "random_saturation", "random_hue", "rgb_to_yiq", "yiq_to_rgb",
           "rgb_to_yuv", "yuv_to_rgb"]


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
