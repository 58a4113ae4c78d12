"""Clipping by norms (TF 1.x's ``clip_ops``): ``clip_by_norm``, ``global_norm``,
``clip_by_global_norm`` and ``clip_by_average_norm``, built from existing ops (so their
gradients are the ops' gradients) with TF's formulas, step by step, so that they give TF's
bits: a zero tensor is left as is, a ``None`` entry passes through ``clip_by_global_norm``, an
:class:`~tensorvm.IndexedSlices` keeps its indices (only its values are scaled), and an
infinite or NaN global norm makes every clipped value NaN (TF's rule, so a diverged step shows).

>>> import tensorvm as tv
>>> (a, b), n = tv.clip_by_global_norm([tv.constant([3.0, 0.0]), tv.constant([4.0])], 1.0)
>>> with tv.Session() as s:
...     [v.tolist() for v in s.run([a, b])], float(s.run(n))
([[0.6000000238418579, 0.0], [0.800000011920929]], 5.0)
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ...framework import dtypes as _dt
from ...framework.graph import get_default_graph
from ...framework.indexed_slices import IndexedSlices
from ...framework.tensor_conversion import convert_to_tensor
from ..array.array_ops import constant, identity, ones_like, stack
from ..array.fill_ops import size
from .math_ext import greater, maximum, minimum, rsqrt, where
from .math_ops import cast, reduce_sum, sqrt

__all__ = ["clip_by_norm", "global_norm", "clip_by_global_norm", "clip_by_average_norm"]


def _values(t, name):
    return convert_to_tensor(t.values if isinstance(t, IndexedSlices) else t, name=name)


def _check_sequence(t_list):
    if not isinstance(t_list, Sequence) or isinstance(t_list, str):
        raise TypeError("`t_list` should be a sequence of tensors. Received "
                        f"{type(t_list)}.")
    return list(t_list)


def clip_by_norm(t, clip_norm, axes=None, name=None):
    """``t * clip_norm / max(l2norm(t), clip_norm)``: ``t`` scaled so that its L2 norm (over
    ``axes``, default all) is at most ``clip_norm``; a tensor already inside is unchanged, a
    zero one too. An :class:`~tensorvm.IndexedSlices` comes back as one, its values clipped.

    >>> import tensorvm as tv
    >>> with tv.Session() as s:
    ...     s.run(tv.clip_by_norm([[3.0, 4.0]], 1.0)).tolist()
    [[0.6000000238418579, 0.800000011920929]]
    """
    g = get_default_graph()
    with g.name_scope(name or "clip_by_norm"):
        values = _values(t, "t")
        if np.isscalar(clip_norm):
            clip_norm = max(clip_norm, 0)
        else:
            clip_norm = cast(maximum(clip_norm, 0), values.dtype)
        l2sum = reduce_sum(values * values, axes, keepdims=True)
        pred = greater(l2sum, 0)
        l2sum_safe = where(pred, l2sum, ones_like(l2sum))
        l2norm = where(pred, sqrt(l2sum_safe), l2sum)
        intermediate = values * clip_norm
        if values._shape is not None and intermediate._shape is not None and (
                len(values._shape) != len(intermediate._shape)
                or any(a is not None and b is not None and a != b
                       for a, b in zip(values._shape, intermediate._shape))):
            raise ValueError(f"Shapes {_shape(values._shape)} and "
                             f"{_shape(intermediate._shape)} are incompatible")
        values_clip = identity(intermediate / maximum(l2norm, clip_norm), name="clipped")
    if isinstance(t, IndexedSlices):
        return IndexedSlices(values_clip, t.indices, t.dense_shape)
    return values_clip


def _shape(s):
    return "(" + ", ".join("None" if d is None else str(d) for d in s) + \
        ("," if len(s) == 1 else "") + ")"


def global_norm(t_list, name=None):
    """``sqrt(sum(l2norm(t) ** 2 for t in t_list))``; ``None`` entries are ignored and an
    :class:`~tensorvm.IndexedSlices` counts its values.

    >>> import tensorvm as tv
    >>> with tv.Session() as s:
    ...     float(s.run(tv.global_norm([tv.constant([3.0]), None, tv.constant([4.0])])))
    5.0
    """
    from ..nn.nn_ops import l2_loss
    t_list = _check_sequence(t_list)
    g = get_default_graph()
    with g.name_scope(name or "global_norm"):
        values = [_values(t, f"t_{i}") if t is not None else None
                  for i, t in enumerate(t_list)]
        half_squared_norms = []
        for v in values:
            if v is not None:
                with g.colocate_with(v):
                    half_squared_norms.append(l2_loss(v))
        half_squared_norm = reduce_sum(stack(half_squared_norms))
        return sqrt(half_squared_norm * constant(2.0, dtype=half_squared_norm.dtype),
                    name="global_norm")


def clip_by_global_norm(t_list, clip_norm, use_norm=None, name=None):
    """``(clipped, global_norm)``: every tensor of ``t_list`` times
    ``clip_norm / max(global_norm, clip_norm)`` (TF 1.x's ``tf.clip_by_global_norm``, the
    usual gradient clipping). ``use_norm`` gives the global norm instead of computing it.
    ``None`` entries stay ``None``; :class:`~tensorvm.IndexedSlices` keep their indices. If
    the global norm is infinite or NaN, every clipped value is NaN (TF's rule).

    >>> import tensorvm as tv
    >>> grads, norm = tv.clip_by_global_norm([tv.constant([6.0, 8.0]), None], 5.0)
    >>> with tv.Session() as s:
    ...     s.run(grads[0]).tolist(), grads[1], float(s.run(norm))
    ([3.0, 4.0], None, 10.0)
    """
    t_list = _check_sequence(t_list)
    if use_norm is None:
        use_norm = global_norm(t_list, name)
    use_norm = convert_to_tensor(use_norm)
    g = get_default_graph()
    with g.name_scope(name or "clip_by_global_norm"):
        scale_for_finite = clip_norm * minimum(
            1.0 / use_norm, constant(1.0, dtype=use_norm.dtype) / clip_norm)
        scale = scale_for_finite + (use_norm - use_norm)  # NaN for an inf or NaN norm
        values = [_values(t, f"t_{i}") if t is not None else None
                  for i, t in enumerate(t_list)]
        clipped = []
        for i, v in enumerate(values):
            if v is None:
                clipped.append(None)
                continue
            with g.colocate_with(v):
                clipped.append(identity(v * cast(scale, v.dtype), name=f"clipped_{i}"))
    out = [IndexedSlices(c, t.indices, t.dense_shape) if isinstance(t, IndexedSlices) else c
           for c, t in zip(clipped, t_list)]
    return out, use_norm


def clip_by_average_norm(t, clip_norm, name=None):
    """``t * clip_norm / max(l2norm(t) / size(t), clip_norm)`` (TF 1.x's deprecated
    ``tf.clip_by_average_norm``: the L2 norm per element is at most ``clip_norm``).

    >>> import tensorvm as tv
    >>> with tv.Session() as s:
    ...     s.run(tv.clip_by_average_norm([3.0, 4.0], 1.0)).tolist()
    [1.2000000476837158, 1.600000023841858]
    """
    g = get_default_graph()
    with g.name_scope(name or "clip_by_average_norm"):
        t = convert_to_tensor(t, name="t")
        n_element = cast(size(t), _dt.float32)
        l2norm_inv = rsqrt(reduce_sum(t * t))  # over every axis
        return identity(t * clip_norm * minimum(l2norm_inv * n_element,
                                                constant(1.0) / clip_norm), name="clipped")
