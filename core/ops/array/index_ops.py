"""Indexing ops: gather (with a sparse gradient), gather_nd/scatter_nd, segment sums, and
``densify`` with the implicit conversion of an IndexedSlices to a dense tensor; the segment
reductions (``segment_*``, ``unsorted_segment_*``), ``tensor_scatter_nd_*``, ``batch_gather``,
``searchsorted``, ``bincount``, ``setdiff1d``, ``invert_permutation``, ``unravel_index``,
``roll``, ``repeat``, ``space_to_depth``/``depth_to_space`` and
``space_to_batch_nd``/``batch_to_space_nd``.

This module gathers the indexing families under one name (``tv.ops.index_ops``); each lives in
its own module: :mod:`.gather_ops` (gather, gather_nd/scatter_nd, unsorted_segment_sum,
densify), :mod:`.segment_ops` (the segment reductions), :mod:`.index_math_ops` (searchsorted,
bincount, setdiff1d, invert_permutation, unravel_index), :mod:`.rearrange_ops` (roll, repeat,
space/depth/batch moves) and :mod:`.tensor_scatter_ops` (tensor_scatter_nd_*, batch_gather).

Siblings: :mod:`~tensorvm.ops.array.partition_ops` (dynamic_partition/stitch, boolean_mask,
one_hot), :mod:`~tensorvm.ops.array.sort_ops` (sort, argsort, top_k, unique). The gradient of
``gather`` along axis 0 is an :class:`~tensorvm.framework.indexed_slices.IndexedSlices`;
``densify`` turns one into a dense tensor with :func:`unsorted_segment_sum_like`.

>>> import tensorvm as tv
>>> p = tv.constant([[1., 2.], [3., 4.], [5., 6.]])
>>> with tv.Session() as s: s.run(tv.gather(p, [2, 0])).tolist()
[[5.0, 6.0], [1.0, 2.0]]
"""
from __future__ import annotations

from . import gather_ops, index_math_ops, rearrange_ops, segment_ops, tensor_scatter_ops
from .gather_ops import (densify, gather, gather_nd, scatter_nd,  # noqa: F401
                         unsorted_segment_sum, unsorted_segment_sum_like)
from .index_math_ops import (_host, bincount, check_same_dtype_, invert_permutation,  # noqa: F401
                             searchsorted, setdiff1d, unravel_index)
from .rearrange_ops import (_from_nhwc, batch_to_space, batch_to_space_nd,  # noqa: F401
                            depth_to_space, repeat, roll, space_to_batch, space_to_batch_nd,
                            space_to_depth)
from .segment_ops import (segment_max, segment_mean, segment_min, segment_prod,  # noqa: F401
                          segment_sum, unsorted_segment_max, unsorted_segment_mean,
                          unsorted_segment_min, unsorted_segment_prod, unsorted_segment_sqrt_n)
from .tensor_scatter_ops import (batch_gather, tensor_scatter_add,  # noqa: F401
                                 tensor_scatter_nd_add, tensor_scatter_nd_max,
                                 tensor_scatter_nd_min, tensor_scatter_nd_sub,
                                 tensor_scatter_nd_update, tensor_scatter_sub,
                                 tensor_scatter_update)

__all__ = [*gather_ops.__all__, *segment_ops.__all__, *index_math_ops.__all__,
           *rearrange_ops.__all__, *tensor_scatter_ops.__all__]
