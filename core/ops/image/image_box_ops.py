"""Bounding-box kernels of ``tv.image``: ``NonMaxSuppressionV3`` (greedy, TF's rules),
``SampleDistortedBoundingBoxV2`` (TF's random crop search, drawn from the graph's seeded
generator) and ``DrawBoundingBoxes``.

Non-max suppression works one *selected* box at a time: each round takes the best remaining
candidate and drops, in one vectorised IoU test, every remaining box that overlaps it more than
``iou_threshold`` — at most ``max_output_size`` rounds, never a loop over all boxes.
"""
from __future__ import annotations

import numpy as np

from ...framework import dtypes as _dt
from ...framework.errors import InvalidArgumentError
from ...vm.kernels.array_api import to_host
from ...framework.op_registry import register_op
from ..math.random_ops import _rng

__all__: list[str] = []

_HOST = "box selection runs on the host (few boxes, data-dependent sizes)"


def _corners(boxes):
    """[y_min, x_min, y_max, x_max] with either corner order, as TF accepts."""
    y1, x1, y2, x2 = (boxes[:, i] for i in range(4))
    return np.minimum(y1, y2), np.minimum(x1, x2), np.maximum(y1, y2), np.maximum(x1, x2)


def _nms_kernel(boxes, scores, max_output_size, iou_threshold, score_threshold):
    b = np.asarray(to_host(boxes), np.float64)
    s = np.asarray(to_host(scores), np.float64)
    k = int(np.asarray(to_host(max_output_size)))
    iou_t = float(np.asarray(to_host(iou_threshold)))
    score_t = float(np.asarray(to_host(score_threshold)))
    if b.ndim != 2 or b.shape[1] != 4:
        raise InvalidArgumentError(f"NonMaxSuppression: boxes must be [num_boxes, 4], got "
                                   f"{list(b.shape)}")
    if s.shape != (b.shape[0],):
        raise InvalidArgumentError(f"NonMaxSuppression: scores must be [{b.shape[0]}] like the "
                                   f"boxes, got {list(s.shape)}")
    if not 0.0 <= iou_t <= 1.0:
        raise InvalidArgumentError(f"NonMaxSuppression: iou_threshold must be in [0, 1], got "
                                   f"{iou_t}")
    if k < 0:
        raise InvalidArgumentError(f"NonMaxSuppression: max_output_size must be >= 0, got {k}")
    y1, x1, y2, x2 = _corners(b)
    area = (y2 - y1) * (x2 - x1)
    cand = np.nonzero(s > score_t)[0]
    cand = cand[np.argsort(-s[cand], kind="stable")]  # best first, ties by index as TF
    chosen: list[int] = []
    while cand.size and len(chosen) < k:
        i, rest = cand[0], cand[1:]
        chosen.append(int(i))
        inter = (np.clip(np.minimum(y2[i], y2[rest]) - np.maximum(y1[i], y1[rest]), 0, None)
                 * np.clip(np.minimum(x2[i], x2[rest]) - np.maximum(x1[i], x1[rest]), 0, None))
        union = area[i] + area[rest] - inter
        with np.errstate(invalid="ignore", divide="ignore"):
            iou = np.where((area[i] > 0) & (area[rest] > 0), inter / union, 0.0)
        cand = rest[iou <= iou_t]
    return np.asarray(chosen, np.int32)


def _nms_shape(inputs, attrs):
    boxes, scores = inputs[:2]
    if not boxes.dtype.is_floating or not scores.dtype.is_floating:
        raise InvalidArgumentError("NonMaxSuppression: boxes and scores must be float")
    if boxes._shape is not None and (len(boxes._shape) != 2 or boxes._shape[1] not in (4, None)):
        raise InvalidArgumentError(f"NonMaxSuppression: boxes must be [num_boxes, 4], got "
                                   f"shape {list(boxes._shape)}")
    return [(_dt.int32, (None,))]


register_op("NonMaxSuppressionV3", _nms_shape, _nms_kernel, differentiable=False,
            cpu_only=_HOST)


# ---- sample_distorted_bounding_box ------------------------------------------------------------

def _random_crop(rng, w, h, min_area_frac, max_area_frac, aspect):
    """TF's ``GenerateRandomCrop``: a crop of the aspect ratio with an area in range, or
    None."""
    min_area, max_area = min_area_frac * w * h, max_area_frac * w * h
    height = int(np.rint(np.sqrt(min_area / aspect)))
    max_height = int(np.rint(np.sqrt(max_area / aspect)))
    if np.rint(max_height * aspect) > w:
        max_height = int((w + 0.5 - 1e-7) / aspect)
        if np.rint(max_height * aspect) > w:
            max_height -= 1
    max_height = min(max_height, h)
    height = min(height, max_height)
    if height < max_height:
        height += int(rng.integers(0, max_height - height + 1))
    width = int(np.rint(height * aspect))
    area = width * height
    if area < min_area:
        height += 1
        width = int(np.rint(height * aspect))
        area = width * height
    if area > max_area:
        height -= 1
        width = int(np.rint(height * aspect))
        area = width * height
    if area < min_area or area > max_area or width > w or height > h or width <= 0 \
            or height <= 0:
        return None
    y = int(rng.integers(0, h - height)) if height < h else 0
    x = int(rng.integers(0, w - width)) if width < w else 0
    return y, x, height, width


def _covers(crop, boxes, min_covered):
    y, x, hh, ww = crop
    if boxes.size == 0:
        return True
    y1, x1, y2, x2 = boxes.T
    area = (y2 - y1) * (x2 - x1)
    inter = (np.clip(np.minimum(y2, y + hh) - np.maximum(y1, y), 0, None)
             * np.clip(np.minimum(x2, x + ww) - np.maximum(x1, x), 0, None))
    ok = (area > 0) & (inter >= min_covered * np.where(area > 0, area, 1))
    return bool(ok.any())


def _sample_kernel(ctx, image_size, bounding_boxes, min_object_covered, *, seed, seed2,
                   aspect_ratio_range, area_range, max_attempts, use_image_if_no_bounding_boxes):
    size = np.asarray(to_host(image_size)).reshape(-1).astype(np.int64)
    if size.size != 3 or (size[:2] <= 0).any():
        raise InvalidArgumentError(f"SampleDistortedBoundingBox: image_size must be [height, "
                                   f"width, channels] with positive height and width, got "
                                   f"{size.tolist()}")
    h, w = int(size[0]), int(size[1])
    bb = np.asarray(to_host(bounding_boxes), np.float64).reshape(-1, 4)
    if bb.size and ((bb < 0) | (bb > 1)).any():
        raise InvalidArgumentError("SampleDistortedBoundingBox: bounding boxes must be in [0, 1]"
                                   f", got {bb.tolist()}")
    if not bb.size:
        if not use_image_if_no_bounding_boxes:
            raise InvalidArgumentError(
                "No bounding boxes provided as input. One must enable "
                "use_image_if_no_bounding_boxes if you wish to not provide any bounding boxes.")
        bb = np.asarray([[0.0, 0.0, 1.0, 1.0]])
    boxes = bb * [h, w, h, w]
    covered = float(np.asarray(to_host(min_object_covered)))
    rng = _rng(ctx, seed, seed2)
    crop = None
    for _ in range(max_attempts):  # TF's bounded search, one candidate crop per attempt
        aspect = rng.random() * (aspect_ratio_range[1] - aspect_ratio_range[0]) \
            + aspect_ratio_range[0]
        c = _random_crop(rng, w, h, area_range[0], area_range[1], aspect)
        if c is not None and _covers(c, boxes, covered):
            crop = c
            break
    y, x, hh, ww = crop if crop is not None else (0, 0, h, w)
    begin = np.asarray([y, x, 0], size.dtype)
    out_size = np.asarray([hh, ww, -1], size.dtype)
    box = np.asarray([[[y / h, x / w, (y + hh) / h, (x + ww) / w]]], np.float32)
    return begin, out_size, box


def _sample_shape(inputs, attrs):
    size, boxes, _ = inputs
    if not size.dtype.is_integer:
        raise InvalidArgumentError(f"SampleDistortedBoundingBox: image_size must be integers, "
                                   f"got {size.dtype.name}")
    if boxes._shape is not None and (len(boxes._shape) != 3 or boxes._shape[2] not in (4, None)):
        raise InvalidArgumentError(f"SampleDistortedBoundingBox: bounding_boxes must be "
                                   f"[batch, N, 4], got shape {list(boxes._shape)}")
    lo, hi = attrs["aspect_ratio_range"]
    if not 0 < lo <= hi:
        raise InvalidArgumentError(f"SampleDistortedBoundingBox: aspect_ratio_range must be "
                                   f"positive and ordered, got {[lo, hi]}")
    lo, hi = attrs["area_range"]
    if not 0 < lo <= hi <= 1:
        raise InvalidArgumentError(f"SampleDistortedBoundingBox: area_range must be within "
                                   f"(0, 1] and ordered, got {[lo, hi]}")
    if attrs["max_attempts"] <= 0:
        raise InvalidArgumentError(f"SampleDistortedBoundingBox: max_attempts must be "
                                   f"positive, got {attrs['max_attempts']}")
    return [(size.dtype, (3,)), (size.dtype, (3,)), (_dt.float32, (1, 1, 4))]


register_op("SampleDistortedBoundingBoxV2", _sample_shape, _sample_kernel, stateful=True,
            needs_ctx=True, differentiable=False,
            cpu_only="draws from the host's random generator")


# ---- draw_bounding_boxes --------------------------------------------------------------------------

_DEFAULT_COLORS = np.asarray([[1, 1, 0, 1], [0, 0, 1, 1], [1, 0, 0, 1], [0, 1, 0, 1],
                              [0.5, 0, 0.5, 1], [0.5, 0.5, 0, 1], [0.5, 0, 0, 1],
                              [0, 0, 0.5, 1], [0, 1, 1, 1], [1, 0, 1, 1]], np.float32)


def _draw_kernel(images, boxes, colors):
    img = np.array(to_host(images), copy=True)
    bx = np.asarray(to_host(boxes), np.float64)
    col = np.asarray(to_host(colors), np.float32)
    if col.size == 0:
        col = _DEFAULT_COLORS
    n, h, w, c = img.shape
    if bx.shape[0] != n:
        raise InvalidArgumentError(f"DrawBoundingBoxes: boxes must have a batch of {n}, got "
                                   f"{bx.shape[0]}")
    for bi in range(n):
        for j in range(bx.shape[1]):  # outlines: a few boxes an image, each four slices
            color = col[j % len(col)][:c].astype(img.dtype)
            y1, x1, y2, x2 = bx[bi, j]
            t, l_ = int(y1 * (h - 1)), int(x1 * (w - 1))
            b, r = int(y2 * (h - 1)), int(x2 * (w - 1))
            if t > b or l_ > r or b < 0 or r < 0 or t >= h or l_ >= w:
                continue
            tc, lc, bc, rc = max(t, 0), max(l_, 0), min(b, h - 1), min(r, w - 1)
            if 0 <= t < h:
                img[bi, t, lc:rc + 1] = color
            if 0 <= b < h:
                img[bi, b, lc:rc + 1] = color
            if 0 <= l_ < w:
                img[bi, tc:bc + 1, l_] = color
            if 0 <= r < w:
                img[bi, tc:bc + 1, r] = color
    return img


def _draw_shape(inputs, attrs):
    images, boxes, _ = inputs
    if not images.dtype.is_floating:
        raise InvalidArgumentError(f"DrawBoundingBoxes: images must be float (colours are in "
                                   f"[0, 1]), got {images.dtype.name}")
    if images._shape is not None and (len(images._shape) != 4 or
                                      images._shape[3] not in (1, 3, 4, None)):
        raise InvalidArgumentError(f"DrawBoundingBoxes: images must be [batch, height, width, "
                                   f"1, 3 or 4 channels], got shape {list(images._shape)}")
    return [(images.dtype, images._shape)]


register_op("DrawBoundingBoxesV2", _draw_shape, _draw_kernel, differentiable=False,
            cpu_only="draws outlines on host images (a few slices per box)")
