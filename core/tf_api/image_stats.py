"""``tv.image``'s image statistics: ``total_variation``, ``image_gradients``, ``psnr``,
``sobel_edges`` and ``ssim``.
"""
from __future__ import annotations

import math as _math

import numpy as np

from ..framework import dtypes as _dt
from ..framework.errors import InvalidArgumentError
from ..framework.graph import name_scope
from ..ops import (abs as _abs, cast, concat, log, pad, reduce_mean, reduce_sum, reshape, shape,
                   squared_difference, stack, zeros)
from ..framework.tensor_conversion import convert_to_tensor
from .image_geometry import _image
from .image_colour import convert_image_dtype

__all__ = ["total_variation", "image_gradients", "psnr", "sobel_edges", "ssim"]


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
