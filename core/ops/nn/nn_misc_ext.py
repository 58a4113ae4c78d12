"""The last small names of TF 1.x's ``tf.nn``, built from existing ops as TF builds them in
Python: ``atrous_conv2d_transpose``, ``batch_norm_with_global_normalization``,
``compute_average_loss`` / ``scale_regularization_loss`` (one replica), ``collapse_repeated``
and ``ctc_unique_labels`` (CTC label helpers), ``approx_max_k`` / ``approx_min_k`` (exact:
recall 1), and the aliases ``depthwise_conv2d_backprop_input`` / ``_filter``,
``space_to_depth``, ``depth_to_space``, ``space_to_batch``.

>>> import numpy as np, tensorvm as tv
>>> labels, lengths = tv.nn.collapse_repeated([[1, 1, 2, 2, 3], [4, 4, 4, 0, 0]], [5, 3])
>>> with tv.Session() as s: s.run([labels, lengths])
[array([[1, 2, 3],
       [4, 0, 0]], dtype=int32), array([3, 1], dtype=int32)]
"""
from __future__ import annotations

from ...framework import dtypes as _dt
from ...framework.errors import InvalidArgumentError
from ...framework.graph import Tensor, name_scope
from ...framework.tensor_conversion import convert_to_tensor
from ..array.index_ops import depth_to_space, space_to_batch, space_to_depth  # noqa: F401 (tv.nn's)
from .nn_conv_ext import (
    depthwise_conv2d_native_backprop_filter,
    depthwise_conv2d_native_backprop_input,
)

__all__: list[str] = []
NN_ALL = ["atrous_conv2d_transpose", "batch_norm_with_global_normalization",
          "compute_average_loss", "scale_regularization_loss", "collapse_repeated",
          "ctc_unique_labels", "approx_max_k", "approx_min_k", "depthwise_conv2d_backprop_input",
          "depthwise_conv2d_backprop_filter", "space_to_depth", "depth_to_space",
          "space_to_batch"]

depthwise_conv2d_backprop_input = depthwise_conv2d_native_backprop_input
depthwise_conv2d_backprop_filter = depthwise_conv2d_native_backprop_filter


def atrous_conv2d_transpose(value, filters, output_shape, rate, padding, name=None) -> Tensor:
    """The transpose of ``atrous_conv2d``: ``conv2d_transpose`` with stride 1 and the filter
    dilated by ``rate`` (``value`` [N, H, W, in], ``filters`` [KH, KW, out, in])."""
    from .nn_deconv import conv2d_transpose
    rate = int(rate)
    if rate < 1:
        raise ValueError(f"rate {rate} cannot be less than one")
    if str(padding).upper() not in ("SAME", "VALID"):
        raise ValueError(f"padding must be either VALID or SAME: {padding}")
    return conv2d_transpose(value, filters, output_shape, [1, 1, 1, 1], str(padding).upper(),
                            dilations=[1, rate, rate, 1], name=name or "atrous_conv2d_transpose")


def batch_norm_with_global_normalization(t=None, m=None, v=None, beta=None, gamma=None,
                                         variance_epsilon=None, scale_after_normalization=None,
                                         name=None, input=None, mean=None, variance=None):
    """TF 1.x's deprecated batch normalisation: ``(t - m) / sqrt(v + eps) * gamma + beta``,
    ``gamma`` used only with ``scale_after_normalization``."""
    from .nn_norm import batch_normalization
    t = input if t is None else t
    m = mean if m is None else m
    v = variance if v is None else v
    return batch_normalization(t, m, v, beta, gamma if scale_after_normalization else None,
                               variance_epsilon, name=name or "batchnorm")


def compute_average_loss(per_example_loss, sample_weight=None, global_batch_size=None):
    """The sum of ``per_example_loss`` (times ``sample_weight``, broadcast) over the global
    batch size (default: its first dimension, one replica)."""
    from ..array.array_ops import shape
    from ..control.debug_ops import assert_positive
    from ..math.math_ops import cast, reduce_sum
    loss = convert_to_tensor(per_example_loss)
    if loss._shape is not None and len(loss._shape) == 0:
        raise ValueError("Invalid value passed for `per_example_loss`. Expected a tensor with "
                         "at least rank 1.")
    dtype = loss.dtype
    if sample_weight is not None:
        loss = cast(loss * convert_to_tensor(sample_weight, dtype=dtype), dtype)
    if global_batch_size is None:
        global_batch_size = shape(loss)[0]
    gbs = convert_to_tensor(global_batch_size)
    if gbs._shape is not None and len(gbs._shape) != 0:
        raise ValueError("global_batch_size must be scalar.")
    if not gbs.dtype.is_integer:
        raise TypeError("global_batch_size must be an integer.")
    from ...framework.graph import control_dependencies
    with control_dependencies([assert_positive(gbs, message="global_batch_size must be "
                                                            "positive.")]):
        return reduce_sum(loss) / cast(gbs, dtype)


def scale_regularization_loss(regularization_loss):
    """The regularization loss summed and divided by the number of replicas (one here)."""
    from ..math.math_ops import reduce_sum
    return reduce_sum(convert_to_tensor(regularization_loss))


def collapse_repeated(labels, seq_length, name=None):
    """Merge each row's repeated consecutive labels within its ``seq_length``: ``(labels
    [batch, new_max_len] padded with 0, new lengths)``, as TF's (built from its ops)."""
    from ..array.array_ops import ones_like, reshape, shape, stack
    from ..array.fill_ops import range as _range
    from ..array.index_ops import scatter_nd
    from ..array.manip_ops import concat, expand_dims
    from ..math.math_ext import logical_and, not_equal, reduce_max
    from ..math.math_ops import cast, reduce_sum
    from ..array.partition_ops import boolean_mask
    from .rnn_ops import sequence_mask
    with name_scope(name or "collapse_repeated_labels"):
        labels = convert_to_tensor(labels, name="labels")
        seq_length = convert_to_tensor(seq_length, name="seq_length")
        head = ones_like(labels[:, :1], dtype=_dt.bool_)
        mask = concat([head, not_equal(labels[:, 1:], labels[:, :-1])], 1)
        maxlen = shape(labels)[1]
        mask = logical_and(mask, sequence_mask(seq_length, maxlen=maxlen))
        new_len = reduce_sum(cast(mask, _dt.int32), axis=1)
        new_max = reduce_max(new_len)
        idx_mask = sequence_mask(new_len, maxlen=new_max)
        flat_idx_mask = reshape(idx_mask, [-1])
        idx = _range(shape(flat_idx_mask)[0])
        flat = scatter_nd(expand_dims(boolean_mask(idx, flat_idx_mask), 1),
                          boolean_mask(reshape(labels, [-1]), reshape(mask, [-1])),
                          shape(flat_idx_mask))
        return (reshape(flat, stack([shape(labels)[0], new_max])),
                cast(new_len, seq_length.dtype))


def ctc_unique_labels(labels, name=None):
    """Each row's unique labels in order of first appearance, padded with 0 (int64), and
    each label's index into them (int32): TF's ``ctc_unique_labels``."""
    from ..array.array_ops import shape
    from ..control.functional_ops import map_fn
    from ..array.manip_ops import pad
    from ..math.math_ops import cast
    from ..array.sort_ops import unique

    def one(x):
        u, i = unique(x)
        y = pad(u, [[0, shape(i)[0] - shape(u)[0]]])
        return [cast(y, _dt.int64), i]
    with name_scope(name or "ctc_unique_labels"):
        return tuple(map_fn(one, convert_to_tensor(labels), dtype=[_dt.int64, _dt.int32]))


def _approx_k(operand, k, reduction_dimension, largest, name):
    from ..array.manip_ops import transpose
    from ..math.math_ops import negative
    from ..array.sort_ops import top_k
    x = convert_to_tensor(operand)
    rank = None if x._shape is None else len(x._shape)
    if rank is None:
        raise InvalidArgumentError("approx_max_k/approx_min_k need the operand's rank")
    dim = int(reduction_dimension) % rank
    perm = [d for d in range(rank) if d != dim] + [dim]
    moved = x if dim == rank - 1 else transpose(x, perm)
    with name_scope(name or ("approx_max_k" if largest else "approx_min_k")):
        vals, idx = top_k(moved if largest else negative(moved), int(k))
        if not largest:
            vals = negative(vals)
        if dim != rank - 1:
            inv = [perm.index(d) for d in range(rank)]
            vals, idx = transpose(vals, inv), transpose(idx, inv)
        return vals, idx


def approx_max_k(operand, k, reduction_dimension=-1, recall_target=0.95,
                 reduction_input_size_override=-1, aggregate_to_topk=True, name=None):
    """The ``k`` largest values along ``reduction_dimension`` and their indices. TF's TPU
    approximation is allowed to miss some; these are exact (recall 1.0)."""
    return _approx_k(operand, k, reduction_dimension, True, name)


def approx_min_k(operand, k, reduction_dimension=-1, recall_target=0.95,
                 reduction_input_size_override=-1, aggregate_to_topk=True, name=None):
    """The ``k`` smallest values along ``reduction_dimension`` and their indices (exact)."""
    return _approx_k(operand, k, reduction_dimension, False, name)
