"""tv.nn.ctc_loss against a brute-force sum over every alignment (small T and classes), its
gradient against central differences, TF's options and errors; ctc_greedy_decoder against a
direct reference."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

import tensorvm as tv
from tests.opcheck import check_gradients

RS = np.random.RandomState(11)


def collapse(path, blank, merge):
    out, prev = [], None
    for c in path:
        if c != blank and (c != prev or not merge):
            out.append(c)
        prev = c
    return out


def brute_nll(logits, label, blank, merge=True):
    """-log sum over every frame path whose collapse is the label (the definition of CTC)."""
    t, k = logits.shape
    lp = logits - np.log(np.exp(logits).sum(1, keepdims=True))
    total = -np.inf
    for path in itertools.product(range(k), repeat=t):
        if collapse(path, blank, merge) == list(label):
            total = np.logaddexp(total, sum(lp[i, c] for i, c in enumerate(path)))
    return -total


def sparse_labels(labels):
    idx = [[b, i] for b, lab in enumerate(labels) for i in range(len(lab))]
    vals = [v for lab in labels for v in lab]
    return tv.SparseTensor(np.array(idx, np.int64).reshape(-1, 2), np.array(vals, np.int32),
                           [len(labels), max(len(lab) for lab in labels)])


@pytest.mark.parametrize("merge", [True, False])
def test_ctc_loss_equals_the_sum_over_alignments(merge):
    t_max, k = 5, 4
    labels = [[1, 1], [0, 2, 1], [2], [0]]
    lens = [5, 5, 3, 4]
    x = RS.randn(t_max, len(labels), k)
    got = tv.Session().run(tv.nn.ctc_loss(sparse_labels(labels), x, lens,
                                          ctc_merge_repeated=merge))
    want = [brute_nll(x[:n, b], labels[b], k - 1, merge) for b, n in enumerate(lens)]
    np.testing.assert_allclose(got, want, rtol=1e-10)


def test_ctc_options_time_major_collapse_and_gradient():
    t_max, k = 6, 5
    labels = [[1, 1, 2], [3, 0]]
    lens = [6, 4]
    x = RS.randn(t_max, 2, k)
    sp = sparse_labels(labels)
    with tv.Session() as s:
        major = s.run(tv.nn.ctc_loss(sp, x, lens))
        batch_major = s.run(tv.nn.ctc_loss(sp, x.transpose(1, 0, 2), lens, time_major=False))
        collapsed = s.run(tv.nn.ctc_loss(sp, x, lens, preprocess_collapse_repeated=True))
    np.testing.assert_allclose(major, batch_major, rtol=1e-12)
    np.testing.assert_allclose(collapsed[0], brute_nll(x[:, 0], [1, 2], k - 1), rtol=1e-10)
    check_gradients(lambda v: tv.nn.ctc_loss(sparse_labels(labels), v, lens), x,
                    rtol=1e-5, atol=1e-7)


def test_ctc_errors_and_ignore_longer_outputs():
    x = np.zeros((2, 1, 4))
    lab = sparse_labels([[1, 1]])
    with tv.Session() as s:
        with pytest.raises(tv.errors.InvalidArgumentError,
                           match=r"Not enough time for target transition sequence \(required: "
                                 r"3, available: 2\)"):
            s.run(tv.nn.ctc_loss(lab, x, [2]))
        assert s.run(tv.nn.ctc_loss(lab, x, [2], ignore_longer_outputs_than_inputs=True)) == 0
        xt = tv.constant(x)
        ignored = tv.nn.ctc_loss(lab, xt, [2], ignore_longer_outputs_than_inputs=True)
        assert not s.run(tv.gradients(ignored, xt)[0]).any()  # no loss, no gradient
        with pytest.raises(tv.errors.InvalidArgumentError,
                           match=r"labels must be in \[0, num_classes - 1 = 3\)"):
            s.run(tv.nn.ctc_loss(sparse_labels([[3]]), x, [2]))
        with pytest.raises(tv.errors.InvalidArgumentError,
                           match=r"sequence_length must be in \[0, max_time=2\]"):
            s.run(tv.nn.ctc_loss(lab, x, [3]))
    with pytest.raises(TypeError, match="labels must be a SparseTensor"):
        tv.nn.ctc_loss([[1]], x, [2])
    with pytest.raises(tv.errors.InvalidArgumentError, match="inputs must be 3-D"):
        tv.nn.ctc_loss(lab, np.zeros((2, 4)), [2])


def test_greedy_decoder_merges_and_drops_blanks():
    k = 4  # the blank is class 3
    best = np.array([[1, 1, 3, 1, 2, 2, 3],      # -> 1 1 2 (repeats merged across a blank)
                     [3, 3, 0, 0, 0, 2, 1]]).T   # -> 0 (length 4 cuts the rest)
    x = np.full((7, 2, k), -1.0)
    for t in range(7):
        for b in range(2):
            x[t, b, best[t, b]] = 2.0 + t * 0.1
    lens = [7, 4]
    with tv.Session() as s:
        (dec,), score = tv.nn.ctc_greedy_decoder(x, lens)
        d, sc = s.run([dec, score])
        (raw,), _ = tv.nn.ctc_greedy_decoder(x, lens, merge_repeated=False)
        r = s.run(raw)
    assert d.indices.tolist() == [[0, 0], [0, 1], [0, 2], [1, 0]]
    assert d.values.tolist() == [1, 1, 2, 0] and d.dense_shape.tolist() == [2, 3]
    np.testing.assert_allclose(sc[:, 0], [-x[:7, 0].max(1).sum(), -x[:4, 1].max(1).sum()])
    assert r.values.tolist() == [1, 1, 1, 2, 2, 0, 0]
