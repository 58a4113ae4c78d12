"""Connectionist temporal classification: ``tv.nn.ctc_loss`` (TF's ``CTCLoss``, its gradient
with respect to the logits computed with the loss) and ``tv.nn.ctc_greedy_decoder``.

The loss is TF 1.x's: logits ``[max_time, batch, num_classes]`` (``time_major``), the blank is
the last class, labels a SparseTensor of ids in ``[0, num_classes - 1)``; ``-log p(labels |
logits)`` per batch entry by the forward-backward recursions in log space. The recursions run
over time, each step one vectorised update of every batch entry's extended label sequence
(``[batch, 2 * max_label + 1]``); the posteriors are scattered into the gradient in one
``add.at``. ``preprocess_collapse_repeated``, ``ctc_merge_repeated`` and
``ignore_longer_outputs_than_inputs`` act as in TF.
"""
from __future__ import annotations

import numpy as np

from ...framework import dtypes as _dt
from ...framework.errors import InvalidArgumentError
from ...framework.graph import name_scope
from ...vm.kernels.array_api import to_host
from ...framework.op_def_library import apply_op
from ...framework.op_registry import register_op
from ...framework.tensor_conversion import convert_to_tensor

__all__: list[str] = []
NN_ALL = ["ctc_loss", "ctc_greedy_decoder"]

_NEG = -np.inf


def _logsumexp(*xs):
    m = np.maximum.reduce(xs)
    safe = np.where(np.isfinite(m), m, 0.0)
    with np.errstate(divide="ignore"):
        return np.where(np.isfinite(m), safe + np.log(sum(np.exp(x - safe) for x in xs)), _NEG)


def _labels_per_entry(indices, values, batch, collapse):
    idx, vals = np.asarray(to_host(indices)).astype(np.int64), np.asarray(to_host(values))
    order = np.lexsort(idx.T[::-1]) if idx.size else np.zeros(0, np.int64)
    idx, vals = idx[order], vals[order].astype(np.int64)
    if idx.size and ((idx[:, 0] < 0) | (idx[:, 0] >= batch)).any():
        raise InvalidArgumentError(f"CTCLoss: labels' batch indices must be in [0, {batch})")
    lengths = np.bincount(idx[:, 0], minlength=batch) if idx.size else np.zeros(batch, int)
    labels = np.split(vals, np.cumsum(lengths)[:-1])
    if collapse:
        labels = [lab[np.r_[True, lab[1:] != lab[:-1]]] if lab.size else lab for lab in labels]
    return labels


def _ctc_kernel(logits, indices, values, seq_len, *, preprocess_collapse_repeated,
                ctc_merge_repeated, ignore_longer_outputs_than_inputs):
    x = np.asarray(to_host(logits), np.float64)
    t_max, batch, k = x.shape
    blank = k - 1
    lens = np.asarray(to_host(seq_len)).astype(np.int64).reshape(-1)
    if lens.shape != (batch,):
        raise InvalidArgumentError(f"CTCLoss: sequence_length must be [batch={batch}], got "
                                   f"{list(lens.shape)}")
    if ((lens < 0) | (lens > t_max)).any():
        raise InvalidArgumentError(f"CTCLoss: sequence_length must be in [0, max_time="
                                   f"{t_max}], got {lens.tolist()}")
    labels = _labels_per_entry(indices, values, batch, preprocess_collapse_repeated)
    for b, lab in enumerate(labels):
        if lab.size and ((lab < 0) | (lab >= blank)).any():
            raise InvalidArgumentError(f"CTCLoss: labels must be in [0, num_classes - 1 = "
                                       f"{blank}) (the last class is the blank), got "
                                       f"{lab.tolist()} in batch entry {b}")
    # log-softmax over the classes
    m = x.max(axis=2, keepdims=True)
    lp = x - m - np.log(np.exp(x - m).sum(axis=2, keepdims=True))
    n_lab = np.array([lab.size for lab in labels])
    s_max = 2 * int(n_lab.max(initial=0)) + 1
    ext = np.full((batch, s_max), blank, np.int64)   # l': blank, l1, blank, l2, ..., blank
    for b, lab in enumerate(labels):                  # per entry: its label row (not per step)
        ext[b, 1:2 * lab.size:2] = lab
    s_len = 2 * n_lab + 1
    valid = np.arange(s_max)[None, :] < s_len[:, None]
    prev2 = np.concatenate([np.full((batch, 2), -1), ext[:, :-2]], axis=1)
    skip = (ext != blank) & (np.arange(s_max) >= 2)
    if ctc_merge_repeated:
        skip &= ext != prev2
    # without merging, a label frame cannot repeat its state: each emits a label of its own
    stay = np.ones((batch, s_max), bool) if ctc_merge_repeated else ext == blank
    # a repeated label needs a blank between its two frames, unless repeats are not merged
    repeats = np.array([int((lab[1:] == lab[:-1]).sum()) for lab in labels])
    required = n_lab + (repeats if ctc_merge_repeated else 0)
    skipped = required > lens
    if skipped.any() and not ignore_longer_outputs_than_inputs:
        b = int(np.nonzero(skipped)[0][0])
        raise InvalidArgumentError(
            f"CTCLoss: Not enough time for target transition sequence (required: "
            f"{int(required[b])}, available: {int(lens[b])}) in batch entry {b}; you can turn "
            "this error into a warning by using the flag ignore_longer_outputs_than_inputs")
    emit = np.take_along_axis(lp, np.broadcast_to(ext[None], (t_max, batch, s_max)), axis=2)
    emit = np.where(valid[None], emit, _NEG)
    rows = np.arange(batch)
    # forward
    alpha = np.full((t_max, batch, s_max), _NEG)
    if t_max:
        alpha[0, :, 0] = emit[0, :, 0]
        alpha[0, :, 1] = np.where(s_len > 1, emit[0, :, 1], _NEG)
    for t in range(1, t_max):
        a = alpha[t - 1]
        a1 = np.concatenate([np.full((batch, 1), _NEG), a[:, :-1]], axis=1)
        a2 = np.where(skip, np.concatenate([np.full((batch, 2), _NEG), a[:, :-2]], axis=1), _NEG)
        alpha[t] = _logsumexp(np.where(stay, a, _NEG), a1, a2) + emit[t]
    # backward, each entry starting at its own last frame
    beta = np.full((t_max, batch, s_max), _NEG)
    last = np.where(lens > 0, lens - 1, -1)
    nxt_skip = np.concatenate([skip[:, 2:], np.zeros((batch, 2), bool)], axis=1)
    for t in range(t_max - 1, -1, -1):
        start = last == t
        init = np.full((batch, s_max), _NEG)
        init[rows, s_len - 1] = emit[t, rows, s_len - 1]
        init[rows, np.maximum(s_len - 2, 0)] = np.where(
            s_len > 1, emit[t, rows, np.maximum(s_len - 2, 0)], init[rows, 0])
        if t + 1 < t_max:
            bn = beta[t + 1]
            b1 = np.concatenate([bn[:, 1:], np.full((batch, 1), _NEG)], axis=1)
            b2 = np.where(nxt_skip, np.concatenate([bn[:, 2:], np.full((batch, 2), _NEG)],
                                                    axis=1), _NEG)
            rec = _logsumexp(np.where(stay, bn, _NEG), b1, b2) + emit[t]
        else:
            rec = np.full((batch, s_max), _NEG)
        beta[t] = np.where(start[:, None], init, np.where((t < last)[:, None], rec, _NEG))
    end_a = alpha[np.maximum(last, 0), rows]
    log_p = _logsumexp(end_a[rows, s_len - 1], np.where(
        s_len > 1, end_a[rows, np.maximum(s_len - 2, 0)], _NEG))
    log_p = np.where(lens > 0, log_p, np.where(n_lab == 0, 0.0, _NEG))
    loss = -log_p
    # gradient wrt the logits: softmax - posterior of each class, zero past the sequence
    with np.errstate(invalid="ignore"):
        post = np.exp(alpha + beta - emit - log_p[None, :, None])
    post = np.where(np.isfinite(post), post, 0.0)
    occ = np.zeros((t_max, batch, k))
    tt, bb, ss = np.indices((t_max, batch, s_max))
    np.add.at(occ, (tt.ravel(), bb.ravel(), np.broadcast_to(ext[None], post.shape).ravel()),
              post.ravel())
    in_seq = (np.arange(t_max)[:, None] < lens[None, :])[:, :, None]
    grad = np.where(in_seq, np.exp(lp) - occ, 0.0)
    if skipped.any():  # ignored entries: no loss, no gradient (TF's warning case)
        loss = np.where(skipped, 0.0, loss)
        grad[:, skipped] = 0.0
    dt = np.asarray(logits).dtype
    return loss.astype(dt), grad.astype(dt)


def _ctc_shape(inputs, attrs):
    logits, indices, values, seq_len = inputs
    if not logits.dtype.is_floating:
        raise InvalidArgumentError(f"CTCLoss: inputs must be float, got {logits.dtype.name}")
    if logits._shape is not None and len(logits._shape) != 3:
        raise InvalidArgumentError(f"CTCLoss: inputs must be 3-D [max_time, batch, "
                                   f"num_classes], got shape {list(logits._shape)}")
    if not values.dtype.is_integer or not seq_len.dtype.is_integer:
        raise InvalidArgumentError("CTCLoss: labels and sequence_length must be integers")
    b = None if logits._shape is None else logits._shape[1]
    return [(logits.dtype, (b,)), (logits.dtype, logits._shape)]


def _ctc_grad(op, g_loss, _g_grad):
    from ..array.manip_ops import expand_dims
    # TF's _CTCLossGrad: the loss' gradient broadcast over the frames and classes
    return [expand_dims(expand_dims(g_loss, 0), 2) * op.outputs[1], None, None, None]


register_op("CTCLoss", _ctc_shape, _ctc_kernel, grad=_ctc_grad,
            cpu_only="runs the forward-backward recursions on host arrays")


def ctc_loss(labels, inputs=None, sequence_length=None, preprocess_collapse_repeated=False,
             ctc_merge_repeated=True, ignore_longer_outputs_than_inputs=False, time_major=True,
             logits=None):
    """TF 1.x's CTC loss: ``-log p(labels | inputs)`` per batch entry. ``labels`` a
    SparseTensor of int ids (the blank is ``num_classes - 1``), ``inputs`` logits
    ``[max_time, batch, num_classes]`` (``[batch, max_time, ...]`` with
    ``time_major=False``), ``sequence_length`` ``[batch]``."""
    from ...framework.sparse_tensor import SparseTensor, SparseTensorValue
    from ..array.manip_ops import transpose
    inputs = logits if inputs is None else inputs
    if not isinstance(labels, (SparseTensor, SparseTensorValue)):
        raise TypeError(f"ctc_loss: labels must be a SparseTensor, got {type(labels).__name__}")
    if sequence_length is None:
        raise ValueError("ctc_loss: sequence_length is required")
    labels = SparseTensor.from_value(labels)
    with name_scope("CTCLoss"):
        x = convert_to_tensor(inputs)
        if not time_major:
            x = transpose(x, [1, 0, 2])
        op = apply_op("CTCLoss", [x, labels.indices, labels.values,
                                  convert_to_tensor(sequence_length)],
                      {"preprocess_collapse_repeated": bool(preprocess_collapse_repeated),
                       "ctc_merge_repeated": bool(ctc_merge_repeated),
                       "ignore_longer_outputs_than_inputs":
                           bool(ignore_longer_outputs_than_inputs)})
        return op.outputs[0]


def _greedy_kernel(logits, seq_len, *, merge_repeated, blank_index):
    x = np.asarray(to_host(logits))
    t_max, batch, k = x.shape
    blank = k - 1 if blank_index < 0 else blank_index
    lens = np.asarray(to_host(seq_len)).astype(np.int64).reshape(-1)
    best = x.argmax(axis=2)                                    # [T, B]
    score = -np.where(np.arange(t_max)[:, None] < lens[None, :], x.max(axis=2), 0).sum(0)
    in_seq = np.arange(t_max)[:, None] < lens[None, :]
    keep = in_seq & (best != blank)
    if merge_repeated:
        prev = np.concatenate([np.full((1, batch), -1), best[:-1]], axis=0)
        keep &= best != prev
    rows, frames = np.nonzero(keep.T)                         # batch-major order
    ids = best.T[rows, frames]
    pos = np.zeros_like(rows)
    if rows.size:  # each kept frame's position within its batch entry
        starts = np.r_[0, np.nonzero(np.diff(rows))[0] + 1]
        pos = np.arange(rows.size) - np.repeat(starts, np.diff(np.r_[starts, rows.size]))
    counts = np.bincount(rows, minlength=batch) if rows.size else np.zeros(batch, np.int64)
    indices = np.stack([rows, pos], 1).astype(np.int64)
    shape = np.asarray([batch, int(counts.max(initial=0))], np.int64)
    return indices, ids.astype(np.int64), shape, score.reshape(batch, 1).astype(x.dtype)


def _greedy_shape(inputs, attrs):
    logits = inputs[0]
    b = None if logits._shape is None else logits._shape[1]
    return [(_dt.int64, (None, 2)), (_dt.int64, (None,)), (_dt.int64, (2,)),
            (logits.dtype, (b, 1))]


register_op("CTCGreedyDecoder", _greedy_shape, _greedy_kernel, differentiable=False,
            cpu_only="decodes on the host (data-dependent output sizes)")


def ctc_greedy_decoder(inputs, sequence_length, merge_repeated=True, blank_index=None):
    """Best path decoding: the most likely class per frame, repeats merged (with
    ``merge_repeated``) and blanks removed. Returns ``([decoded SparseTensor],
    neg_sum_logits [batch, 1])``."""
    from ...framework.sparse_tensor import SparseTensor
    op = apply_op("CTCGreedyDecoder", [convert_to_tensor(inputs),
                                       convert_to_tensor(sequence_length)],
                  {"merge_repeated": bool(merge_repeated),
                   "blank_index": -1 if blank_index is None else int(blank_index)})
    idx, vals, shape, score = op.outputs
    return [SparseTensor(idx, vals, shape)], score
