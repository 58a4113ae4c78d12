"""``tv.image``'s geometry: the shape checks the image modules share, resizing (``ResizeMethod``,
``resize_images`` …), cropping and padding, flips and rotations.
"""
from __future__ import annotations

import math as _math

import numpy as np

from ..framework import dtypes as _dt
from ..framework.graph import Tensor, control_dependencies, name_scope
from ..framework.op_def_library import apply_op
from ..ops import (Assert, cast, cond, expand_dims, greater_equal, less, maximum, minimum, pad,
                   random_uniform, reduce_all, reshape, reverse, round as round_, shape, slice,
                   squeeze, stack, transpose as _transpose)
from ..ops.common import static_value
from ..framework.tensor_conversion import convert_to_tensor

__all__ = ["ResizeMethod", "resize_bilinear", "resize_nearest_neighbor", "resize_bicubic",
           "resize_area", "resize_images", "resize", "resize_image_with_crop_or_pad",
           "resize_with_crop_or_pad", "resize_image_with_pad", "crop_to_bounding_box",
           "pad_to_bounding_box", "central_crop", "random_crop", "flip_left_right", "flip_up_down",
           "random_flip_left_right", "random_flip_up_down", "transpose_image", "transpose",
           "rot90"]


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
