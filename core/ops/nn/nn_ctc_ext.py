"""TF 1.x's ``tf.nn.ctc_loss_v2`` and ``ctc_beam_search_decoder`` (and ``_v2``).

``ctc_loss_v2``: the CTC loss of dense or sparse labels with any blank index, on
:mod:`tensorvm.ops.nn.ctc_ops`'s ``CTCLoss`` as TF builds it: the blank moved to the last class
(labels above it shifted down by one), dense labels turned into a SparseTensor by their
lengths; ``unique`` (a speed hint in TF) is accepted and not needed.

``ctc_beam_search_decoder``: TF's prefix beam search (``ctc_beam_search.h`` with the default
scorer), step for step: each beam keeps its blank/label log-probabilities, a beam's children
are tried in label order, only while they beat the beam's lowest entry (a heap), and an entry
pushed out of the beam is deactivated, so the paths and log-probabilities are TF's. The search
is sequential by nature (TF's is a C++ loop too): it runs on the host, one batch entry after
another, with the label loop cut to the labels that can enter the beam (a NumPy compare).

>>> import numpy as np, tensorvm as tv
>>> logits = tv.zeros([4, 1, 3])  # [time, batch, classes]: 15 of the 81 paths give [1, 2]
>>> loss = tv.nn.ctc_loss_v2([[1, 2]], logits, [2], [4])
>>> with tv.Session() as s: round(float(s.run(loss)[0]), 4)
1.6864
"""
from __future__ import annotations

import heapq
import itertools

import numpy as np

from ...framework import dtypes as _dt
from ...framework.errors import InvalidArgumentError
from ...framework.graph import Tensor, name_scope
from ...vm.kernels.array_api import to_host
from ...framework.op_def_library import apply_op
from ...framework.op_registry import register_op
from ...framework.tensor_conversion import convert_to_tensor

__all__: list[str] = []
NN_ALL = ["ctc_loss_v2", "ctc_beam_search_decoder", "ctc_beam_search_decoder_v2"]


def _classes(logits):
    from ..array.array_ops import shape
    k = None if logits._shape is None else logits._shape[2]
    return (int(k), True) if k is not None else (shape(logits)[2], False)


def ctc_loss_v2(labels, logits, label_length, logit_length, logits_time_major=True,
                unique=None, blank_index=None, name=None) -> Tensor:
    """CTC loss per batch entry, ``-log p(labels | logits)``. ``labels``: dense int
    ``[batch, max_label_length]`` with ``label_length``, or a SparseTensor (then
    ``blank_index`` is required); ``logits``: ``[frames, batch, classes]`` (``[batch, frames,
    classes]`` unless ``logits_time_major``) with ``logit_length``; ``blank_index`` defaults to
    0 for dense labels (negative counts from the end)."""
    from ...framework.sparse_tensor import SparseTensor, SparseTensorValue
    from ..array.array_ops import shape
    from .ctc_ops import ctc_loss
    from ..array.index_ops import gather_nd
    from ..array.manip_ops import concat
    from ..math.math_ext import where
    from ..math.math_ops import cast
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


# ---- CTCBeamSearchDecoder ----------------------------------------------------------------------
_NEG = -np.inf


def _lse(a, b):
    if a == _NEG:
        return b
    if b == _NEG:
        return a
    return max(a, b) + float(np.log1p(np.exp(-abs(a - b))))


class _Beam:
    """One prefix: its parent, last label, children, and old/new (blank, label, total)
    log-probabilities (TF's ``BeamEntry``)."""
    __slots__ = ("children", "label", "nb", "nl", "nt", "ob", "ot", "parent")

    def __init__(self, parent, label):
        self.parent, self.label, self.children = parent, label, {}
        self.ob = self.ot = self.nb = self.nl = self.nt = _NEG

    def labels(self, merge_repeated):
        out, e, prev = [], self, -1
        while e.parent is not None:
            if not merge_repeated or e.label != prev:
                out.append(e.label)
            prev, e = e.label, e.parent
        return out[::-1]


def _beam_search(lp, beam_width, top_paths, merge_repeated):
    """TF's ``CTCBeamSearchDecoder::Step`` over ``lp`` ([T, K] log-softmax, blank K - 1):
    the ``top_paths`` best label sequences and their log-probabilities."""
    k = lp.shape[1]
    blank = k - 1
    count = itertools.count()
    root = _Beam(None, -1)
    root.nb = root.nt = 0.0
    leaves = [root]
    for x in lp:
        branches = sorted(leaves, key=lambda e: -e.nt)
        for b in branches:
            b.ob, b.ot = b.nb, b.nt
        heap = []
        for b in branches:
            if b.parent is not None:
                if b.parent.nt != _NEG:  # the parent is still in the beam
                    prev = b.parent.ob if b.label == b.parent.label else b.parent.ot
                    b.nl = _lse(b.nl, prev)
                b.nl += x[b.label]
            b.nb = b.ot + x[blank]
            b.nt = _lse(b.nb, b.nl)
            heapq.heappush(heap, (b.nt, next(count), b))
        for b in branches:
            full = len(heap) >= beam_width
            if b.ot == _NEG or (full and b.ot <= heap[0][0]):
                continue  # not a candidate: grows no children
            cand = x[:blank] + b.ot
            if 0 <= b.label < blank:
                cand[b.label] = x[b.label] + b.ob
            # the labels whose child can enter the beam, and the existing children (one out
            # of the beam that cannot enter it is deactivated, its old probabilities too:
            # TF's Reset of both), in label order as TF visits them
            floor = heap[0][0] if len(heap) >= beam_width else _NEG
            for c in sorted(set(np.nonzero(cand > floor)[0].tolist()) | b.children.keys()):
                ch = b.children.get(c)
                if ch is not None and ch.nt != _NEG:  # already in the beam
                    continue
                total = float(cand[c])
                if not (total > _NEG and (len(heap) < beam_width or total > heap[0][0])):
                    if ch is not None:
                        ch.ob = ch.ot = _NEG
                    continue
                if ch is None:
                    ch = b.children[c] = _Beam(b, c)
                if len(heap) >= beam_width:
                    bottom = heapq.heappop(heap)[2]
                    bottom.nb = bottom.nl = bottom.nt = _NEG  # out of the beam
                ch.nb, ch.nl, ch.nt = _NEG, total, total
                heapq.heappush(heap, (total, next(count), ch))
        leaves = [e for _, _, e in heap]
    if top_paths > len(leaves):
        raise InvalidArgumentError("Less leaves in the beam search than requested.")
    best = sorted(leaves, key=lambda e: -e.nt)[:top_paths]
    return [e.labels(merge_repeated) for e in best], [e.nt for e in best]


def _beam_kernel(inputs, sequence_length, *, beam_width, top_paths, merge_repeated):
    x = np.asarray(to_host(inputs), np.float64)
    seq = np.asarray(to_host(sequence_length)).reshape(-1)
    t_max, batch, _ = x.shape
    if seq.shape[0] != batch:
        raise InvalidArgumentError(f"len(sequence_length) != batch_size.  len(sequence_length):"
                                   f"  {seq.shape[0]} batch_size: {batch}")
    if np.any(seq > t_max):
        raise InvalidArgumentError(f"sequence_length(b) <= time, got {seq.tolist()} for "
                                   f"max_time {t_max}")
    lp = x - x.max(axis=2, keepdims=True)
    lp -= np.log(np.exp(lp).sum(axis=2, keepdims=True))
    paths = [[] for _ in range(top_paths)]
    logp = np.zeros((batch, top_paths), inputs.dtype)
    for b in range(batch):
        found, probs = _beam_search(lp[:int(seq[b]), b], beam_width, top_paths, merge_repeated)
        for i in range(top_paths):
            paths[i].append(found[i])
        logp[b] = probs
    out = []
    for i in range(top_paths):
        rows = [np.full(len(p), b, np.int64) for b, p in enumerate(paths[i])]
        cols = [np.arange(len(p), dtype=np.int64) for p in paths[i]]
        idx = np.stack([np.concatenate(rows), np.concatenate(cols)], 1) if batch else \
            np.zeros((0, 2), np.int64)
        vals = np.asarray([v for p in paths[i] for v in p], np.int64)
        out += [idx, vals, np.asarray([batch, max((len(p) for p in paths[i]), default=0)],
                                      np.int64)]
    return (*out, logp)


def _beam_shape(inputs, attrs):
    x, seq = inputs
    if not x.dtype.is_floating:
        raise InvalidArgumentError(f"CTCBeamSearchDecoder: inputs must be float, got "
                                   f"{x.dtype.name}")
    if x._shape is not None and len(x._shape) != 3:
        raise InvalidArgumentError(f"CTCBeamSearchDecoder: inputs must be 3-D [max_time, "
                                   f"batch_size, num_classes], got shape {list(x._shape)}")
    if seq._shape is not None and len(seq._shape) != 1:
        raise InvalidArgumentError("CTCBeamSearchDecoder: sequence_length must be a vector")
    batch = None if x._shape is None else x._shape[1]
    n = attrs["top_paths"]
    per_path = [(_dt.int64, (None, 2)), (_dt.int64, (None,)), (_dt.int64, (2,))]
    return per_path * n + [(x.dtype, (batch, n))]


register_op("CTCBeamSearchDecoder", _beam_shape, _beam_kernel, differentiable=False,
            cpu_only="a sequential beam search over host values (TF's is CPU-only too)")


def ctc_beam_search_decoder(inputs, sequence_length, beam_width=100, top_paths=1,
                            merge_repeated=True):
    """TF's beam search decoding of ``inputs`` (logits ``[max_time, batch, num_classes]``,
    the blank last) within ``sequence_length``: ``(decoded, log_probabilities)``, ``decoded``
    a list of ``top_paths`` SparseTensors (int64 labels, best first) and
    ``log_probabilities`` ``[batch, top_paths]``. ``merge_repeated`` merges repeated labels
    of a decoded path (TF 1.x's default)."""
    from ...framework.sparse_tensor import SparseTensor
    beam_width, top_paths = int(beam_width), int(top_paths)
    if beam_width < 1:
        raise InvalidArgumentError(f"beam_width must be > 0, got {beam_width}")
    if top_paths < 1:
        raise InvalidArgumentError(f"top_paths must be > 0, got {top_paths}")
    if top_paths > beam_width:
        raise InvalidArgumentError(f"top_paths must be <= beam_width, got top_paths="
                                   f"{top_paths} and beam_width={beam_width}: requested more "
                                   f"paths than the beam width.")
    op = apply_op("CTCBeamSearchDecoder",
                  [convert_to_tensor(inputs),
                   convert_to_tensor(sequence_length, dtype=None if hasattr(
                       sequence_length, "dtype") else _dt.int32)],
                  {"beam_width": beam_width, "top_paths": top_paths,
                   "merge_repeated": bool(merge_repeated)}, name="CTCBeamSearchDecoder")
    outs = op.outputs
    decoded = [SparseTensor(outs[3 * i], outs[3 * i + 1], outs[3 * i + 2])
               for i in range(top_paths)]
    return decoded, outs[-1]


def ctc_beam_search_decoder_v2(inputs, sequence_length, beam_width=100, top_paths=1):
    """:func:`ctc_beam_search_decoder` without merging repeated labels (TF 2's default)."""
    return ctc_beam_search_decoder(inputs, sequence_length, beam_width, top_paths,
                                   merge_repeated=False)
