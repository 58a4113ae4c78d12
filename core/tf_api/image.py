"""``tv.image``: TF 1.x's ``tf.image`` — resizing, cropping and padding, flips and rotations,
colour adjustments, dtype conversion, codecs, and image statistics.

The functions live in modules by concept (:mod:`.image_geometry`, :mod:`.image_colour`,
:mod:`.image_codecs`, :mod:`.image_stats`, :mod:`.image_boxes`), gathered here. Kernels of
their own: the resizes and colour spaces (:mod:`tensorvm.ops.image.image_ops`) and the
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

from ..ops.image import image_box_ops, image_codec_ops, image_ops  # noqa: F401  (register the ops)
from .image_boxes import draw_bounding_boxes, non_max_suppression, sample_distorted_bounding_box
from .image_codecs import (
    decode_bmp, decode_gif, decode_image, decode_jpeg, decode_png, encode_jpeg, encode_png,
    extract_jpeg_shape, is_jpeg)
from .image_colour import (
    adjust_brightness, adjust_contrast, adjust_gamma, adjust_hue, adjust_saturation,
    convert_image_dtype, grayscale_to_rgb, hsv_to_rgb, per_image_standardization,
    random_brightness, random_contrast, random_hue, random_saturation, rgb_to_grayscale,
    rgb_to_hsv, rgb_to_yiq, rgb_to_yuv, yiq_to_rgb, yuv_to_rgb)
from .image_geometry import (
    central_crop, crop_to_bounding_box, flip_left_right, flip_up_down, pad_to_bounding_box,
    random_crop, random_flip_left_right, random_flip_up_down, resize, resize_area, resize_bicubic,
    resize_bilinear, resize_image_with_crop_or_pad, resize_image_with_pad, resize_images,
    resize_nearest_neighbor, resize_with_crop_or_pad, ResizeMethod, rot90, transpose,
    transpose_image)
from .image_stats import image_gradients, psnr, sobel_edges, ssim, total_variation

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


