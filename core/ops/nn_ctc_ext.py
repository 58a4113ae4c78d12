"""TF 1.x's ``tf.nn.ctc_loss_v2``: the CTC loss of dense or sparse labels with any blank
index, on :mod:`tensorvm.ops.ctc_ops`'s ``CTCLoss`` as TF builds it: the blank moved to the
last class (labels above it shifted down by one), dense labels turned into a SparseTensor by
their lengths; ``unique`` (a speed hint in TF) is accepted and not needed.

>>> import numpy as np, tensorvm as tv
>>> logits = tv.zeros([4, 1, 3])  # [time, batch, classes]: 15 of the 81 paths give [1, 2]
>>> loss = tv.nn.ctc_loss_v2([[1, 2]], logits, [2], [4])
>>> with tv.Session() as s: round(float(s.run(loss)[0]), 4)
1.6864
"""
from __future__ import annotations

from .. import dtypes as _dt
from ..graph import Tensor, name_scope
from ..tensor_conversion import convert_to_tensor

__all__: list[str] = []
NN_ALL = ["ctc_loss_v2"]


def _classes(logits):
    from .array_ops import shape
    k = None if logits._shape is None else logits._shape[2]
    return (int(k), True) if k is not None else (shape(logits)[2], False)


def ctc_loss_v2(labels, logits, label_length, logit_length, logits_time_major=True,
                unique=None, blank_index=None, name=None) -> Tensor:
    """CTC loss per batch entry, ``-log p(labels | logits)``. ``labels``: dense int
    ``[batch, max_label_length]`` with ``label_length``, or a SparseTensor (then
    ``blank_index`` is required); ``logits``: ``[frames, batch, classes]`` (``[batch, frames,
    classes]`` unless ``logits_time_major``) with ``logit_length``; ``blank_index`` defaults to
    0 for dense labels (negative counts from the end)."""
    from ..sparse_tensor import SparseTensor, SparseTensorValue
    from .array_ops import shape
    from .ctc_ops import ctc_loss
    from .index_ops import gather_nd
    from .manip_ops import concat
    from .math_ext import where
    from .math_ops import cast
    from .rnn_ops import sequence_mask
    sparse = isinstance(labels, (SparseTensor, SparseTensorValue))
    if sparse and blank_index is None:
        raise ValueError("Argument `blank_index` must be provided when `labels` is a "
                         "`SparseTensor`.")
    with name_scope(name or "ctc_loss_dense"):
        logits = convert_to_tensor(logits)
        k, static = _classes(logits)
        blank = 0 if blank_index is None else int(blank_index)
        if blank < 0:
            blank += k if static else 0
        if sparse:
            labels = SparseTensor.from_value(labels)
            indices, values, dense_shape = labels.indices, labels.values, labels.dense_shape
        else:
            dense = convert_to_tensor(labels)
            lengths = convert_to_tensor(label_length)
            mask = sequence_mask(lengths, maxlen=shape(dense)[1])
            indices = where(mask)
            values = cast(gather_nd(dense, indices), _dt.int32)
            dense_shape = cast(shape(dense), _dt.int64)
        if not static or blank != k - 1:  # the blank to the end, as TF's ctc_loss_v2
            logits = concat([logits[:, :, :blank], logits[:, :, blank + 1:],
                             logits[:, :, blank:blank + 1]], 2)
            values = where(values < blank, values, values - 1)
        return ctc_loss(SparseTensor(indices, values, dense_shape), logits,
                        sequence_length=logit_length, time_major=logits_time_major)
