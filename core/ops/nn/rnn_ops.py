"""Sequence ops the recurrent networks need: ``reverse_sequence`` (TF's ``ReverseSequence``:
reverse the first ``seq_lengths[b]`` entries of each batch row, leave the padding in place)
and ``sequence_mask``.

>>> import tensorvm as tv
>>> x = tv.constant([[1, 2, 3, 4], [5, 6, 7, 8]])
>>> with tv.Session() as s:
...     s.run(tv.reverse_sequence(x, [3, 1], seq_axis=1, batch_axis=0)).tolist()
[[3, 2, 1, 4], [5, 6, 7, 8]]
"""
from __future__ import annotations

import numpy as np

from ...framework import dtypes as _dt
from ...framework.errors import InvalidArgumentError
from ...framework.graph import Tensor
from ...vm.kernels.array_api import array_namespace, to_host
from ...framework.op_def_library import apply_op
from ...framework.op_registry import register_op
from ...framework.tensor_conversion import convert_to_tensor
from ..common import check_int_dtype, norm_axis, rank_of

__all__ = ["reverse_sequence", "sequence_mask"]


def _rev_seq_shape(inputs, attrs):
    x, lens = inputs
    check_int_dtype(lens, "seq_lengths", "ReverseSequence")
    r = rank_of(x)
    if r is not None:
        sa = norm_axis(attrs["seq_axis"], r, "ReverseSequence")
        ba = norm_axis(attrs["batch_axis"], r, "ReverseSequence")
        if sa == ba:
            raise InvalidArgumentError(f"ReverseSequence: seq_dim == batch_dim == {sa}")
        if lens._shape is not None and (len(lens._shape) != 1 or (
                lens._shape[0] is not None and x._shape[ba] is not None
                and lens._shape[0] != x._shape[ba])):
            raise InvalidArgumentError(
                f"ReverseSequence: seq_lengths must be a vector of length input.dims(batch_dim)"
                f" = {x._shape[ba]}, got shape {list(lens._shape)}")
    return [(x.dtype, x._shape)]


def _rev_seq_kernel(x, lens, seq_axis, batch_axis):
    xp = array_namespace(x)
    x = xp.asarray(x)
    r = x.ndim
    sa, ba = seq_axis % r, batch_axis % r
    n, b = x.shape[sa], x.shape[ba]
    host = np.asarray(to_host(lens)).astype(np.int64).reshape(-1)
    if host.shape[0] != b:
        raise InvalidArgumentError(f"ReverseSequence: len(seq_lens) != input.dims({ba}), "
                                   f"({host.shape[0]} vs. {b})")
    bad = np.flatnonzero((host < 0) | (host > n))
    if bad.size:
        i = int(bad[0])
        raise InvalidArgumentError(f"ReverseSequence: seq_lens({i}) = {host[i]} is outside "
                                   f"[0, input.dims({sa}) = {n}]")
    t = xp.arange(n)[None, :]
    lengths = xp.asarray(host)[:, None]
    idx = xp.where(t < lengths, lengths - 1 - t, t)  # [batch, time]
    if sa < ba:
        idx = idx.T
    shape = [1] * r
    shape[ba], shape[sa] = b, n
    idx = xp.broadcast_to(idx.reshape(shape), x.shape)
    return xp.take_along_axis(x, idx, axis=sa)


register_op("ReverseSequence", _rev_seq_shape, _rev_seq_kernel,
            grad=lambda op, g: [apply_op("ReverseSequence", [g, op.inputs[1]], op.attrs)
                                .outputs[0], None])


def reverse_sequence(input, seq_lengths, seq_axis=None, batch_axis=None, name=None,
                     seq_dim=None, batch_dim=None) -> Tensor:
    """Reverse ``input[b, :seq_lengths[b]]`` along ``seq_axis`` for each ``b`` of
    ``batch_axis`` (default 0); entries past a row's length stay where they are."""
    seq_axis = seq_axis if seq_axis is not None else seq_dim
    batch_axis = batch_axis if batch_axis is not None else batch_dim
    if seq_axis is None:
        raise InvalidArgumentError("reverse_sequence: seq_axis is required")
    return apply_op("ReverseSequence", [input, seq_lengths],
                    {"seq_axis": int(seq_axis), "batch_axis": int(batch_axis or 0)},
                    name=name or "ReverseSequence").outputs[0]


def sequence_mask(lengths, maxlen=None, dtype=_dt.bool_, name=None) -> Tensor:
    """``mask[i..., j] = j < lengths[i...]``, ``maxlen`` columns (default: the largest
    length), as ``dtype``."""
    from ..array.fill_ops import range as _range
    from ..array.manip_ops import expand_dims
    from ..math.math_ext import less, reduce_max
    from ..math.math_ops import cast
    lengths = convert_to_tensor(lengths)
    check_int_dtype(lengths, "lengths", "sequence_mask")
    if maxlen is None:
        maxlen = reduce_max(lengths)
    maxlen = cast(convert_to_tensor(maxlen), lengths.dtype)
    mask = less(_range(0, maxlen, 1, dtype=lengths.dtype), expand_dims(lengths, -1),
                name=name or "SequenceMask")
    dtype = _dt.as_dtype(dtype)
    return mask if dtype == _dt.bool_ else cast(mask, dtype)
