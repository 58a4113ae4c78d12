"""``tv.image``'s bounding boxes: ``non_max_suppression``, ``sample_distorted_bounding_box`` and
``draw_bounding_boxes``.
"""
from __future__ import annotations

import numpy as np

from ..framework import dtypes as _dt
from ..framework.op_def_library import apply_op
from ..framework.tensor_conversion import convert_to_tensor

__all__ = ["non_max_suppression", "sample_distorted_bounding_box", "draw_bounding_boxes"]


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
