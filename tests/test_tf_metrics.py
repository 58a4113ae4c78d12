"""tv.metrics (TF 1.x's streaming metrics) against NumPy references: every metric is fed in
three batches, and both each update's running value and the final value must equal the
reference over all the data seen so far (with weights where the metric takes them). Bad
inputs fail by class and message, as TF's."""
from __future__ import annotations

import numpy as np
import pytest
import tensorvm as tv

RNG = np.random.default_rng(11)
NB = 3  # batches


def _batches(make):
    return [make() for _ in range(NB)]


LAB = _batches(lambda: RNG.integers(0, 2, 12).astype(np.float32))
PROB = _batches(lambda: RNG.random(12).astype(np.float32))
W = _batches(lambda: RNG.random(12).astype(np.float32))
REG_L = _batches(lambda: RNG.normal(size=(4, 3)).astype(np.float32))
REG_P = _batches(lambda: RNG.normal(size=(4, 3)).astype(np.float32))
REG_W = _batches(lambda: RNG.random((4, 1)).astype(np.float32))


def stream(metric, arrays, reference, rtol=1e-5, atol=1e-6):
    """Feed ``arrays`` (name -> list of per-batch arrays, None: not passed) batch by batch
    through ``metric(**placeholders)``; each update's result and the final value must equal
    ``reference(**concatenated arrays so far)``."""
    with tv.Graph().as_default():
        phs = {k: tv.placeholder(tv.as_dtype(v[0].dtype), v[0].shape) for k, v in
               arrays.items() if v is not None}
        value, update = metric(**phs)
        assert {v.op.name for v in tv.local_variables()} == \
            {v.op.name for v in tv.get_collection(tv.GraphKeys.METRIC_VARIABLES)}
        assert tv.trainable_variables() == [] and tv.global_variables() == []
        with tv.Session() as s:
            s.run(tv.local_variables_initializer())
            for b in range(NB):
                got = s.run(update, {phs[k]: v[b] for k, v in arrays.items() if v is not None})
                seen = {k: np.concatenate(v[:b + 1]) if v is not None else None
                        for k, v in arrays.items()}
                np.testing.assert_allclose(got, reference(**seen), rtol=rtol, atol=atol,
                                           err_msg=f"after batch {b}")
            final = s.run(value)
            np.testing.assert_allclose(final, reference(**seen), rtol=rtol, atol=atol)
            # reading the value changes nothing; re-initialising resets
            np.testing.assert_allclose(s.run(value), final)
            s.run(tv.local_variables_initializer())
            return final, s.run(value)


def _wmean(x, w=None):
    x = np.asarray(x, np.float64)
    w = np.ones_like(x) if w is None else np.broadcast_to(np.asarray(w, np.float64), x.shape)
    return (x * w).sum() / w.sum() if w.sum() else 0.0


# ---- means of errors --------------------------------------------------------------------------

@pytest.mark.parametrize("weighted", [False, True])
def test_mean_errors_stream_over_batches(weighted):
    w = REG_W if weighted else None
    cases = {
        "mean_squared_error": lambda l, p, w: _wmean((l - p) ** 2, w),
        "mean_absolute_error": lambda l, p, w: _wmean(np.abs(l - p), w),
        "root_mean_squared_error": lambda l, p, w: np.sqrt(_wmean((l - p) ** 2, w)),
    }
    for name, ref in cases.items():
        fn = getattr(tv.metrics, name)
        stream(lambda labels, predictions, weights=None, fn=fn: fn(labels, predictions,
                                                                   weights=weights),
               {"labels": REG_L, "predictions": REG_P, "weights": w},
               lambda labels, predictions, weights=None, ref=ref: ref(labels, predictions,
                                                                      weights))


def test_mean_relative_error_cosine_distance_percentage_below_and_mean_tensor():
    stream(lambda labels, predictions, weights:
           tv.metrics.mean_relative_error(labels, predictions, tv.abs(labels) * 0.0 + 2.0,
                                          weights=weights),
           {"labels": REG_L, "predictions": REG_P, "weights": REG_W},
           lambda labels, predictions, weights: _wmean(np.abs(labels - predictions) / 2.0,
                                                       weights))
    # a zero normalizer contributes a zero error (and still counts)
    with tv.Graph().as_default():
        v, up = tv.metrics.mean_relative_error([1.0, 2.0], [2.0, 2.0], normalizer=[1.0, 0.0])
        with tv.Session() as s:
            s.run(tv.local_variables_initializer())
            assert s.run(up) == pytest.approx(0.5)

    def unit(x):
        return x / np.linalg.norm(x, axis=1, keepdims=True)
    stream(lambda labels, predictions, weights: tv.metrics.mean_cosine_distance(
        tv.nn.l2_normalize(labels, 1), tv.nn.l2_normalize(predictions, 1), dim=1,
        weights=weights),
        {"labels": REG_L, "predictions": REG_P, "weights": REG_W},
        lambda labels, predictions, weights: 1.0 - _wmean(
            (unit(labels) * unit(predictions)).sum(1, keepdims=True), weights))
    stream(lambda values, weights: tv.metrics.percentage_below(values, 0.25, weights=weights),
           {"values": REG_P, "weights": REG_W},
           lambda values, weights: _wmean(values < 0.25, weights))

    def tensor_ref(values, weights):
        v = values.reshape(-1, 4, 3)
        w = np.broadcast_to(weights.reshape(-1, 4, 1), v.shape)
        return (v * w).sum(0) / w.sum(0)
    with tv.Graph().as_default():
        x = tv.placeholder(tv.float32, [4, 3])
        ww = tv.placeholder(tv.float32, [4, 1])
        v, up = tv.metrics.mean_tensor(x, weights=ww)
        assert sorted(v_.op.name for v_ in tv.local_variables()) == [
            "mean/count_tensor", "mean/total_tensor"]
        with tv.Session() as s:
            s.run(tv.local_variables_initializer())
            np.testing.assert_array_equal(s.run(v), np.zeros((4, 3)))  # 0, not NaN
            for b in range(NB):
                s.run(up, {x: REG_P[b], ww: REG_W[b]})
            np.testing.assert_allclose(s.run(v), tensor_ref(np.concatenate(REG_P),
                                                            np.concatenate(REG_W)), rtol=1e-5)


# ---- counts, precision and recall --------------------------------------------------------------

def _counts(labels, pred_pos, weights=None):
    w = np.ones_like(labels, np.float64) if weights is None else weights.astype(np.float64)
    lab = labels.astype(bool)
    return {"tp": (w * (lab & pred_pos)).sum(), "fp": (w * (~lab & pred_pos)).sum(),
            "tn": (w * (~lab & ~pred_pos)).sum(), "fn": (w * (lab & ~pred_pos)).sum()}


@pytest.mark.parametrize("weighted", [False, True])
def test_confusion_counts_precision_recall(weighted):
    w = W if weighted else None
    refs = {"true_positives": lambda c: c["tp"], "false_positives": lambda c: c["fp"],
            "true_negatives": lambda c: c["tn"], "false_negatives": lambda c: c["fn"],
            "precision": lambda c: c["tp"] / (c["tp"] + c["fp"]),
            "recall": lambda c: c["tp"] / (c["tp"] + c["fn"])}
    for name, ref in refs.items():
        fn = getattr(tv.metrics, name)
        _, reset = stream(
            lambda labels, predictions, weights=None, fn=fn: fn(
                labels, tv.greater(predictions, 0.5), weights=weights),
            {"labels": LAB, "predictions": PROB, "weights": w},
            lambda labels, predictions, weights=None, ref=ref: ref(
                _counts(labels, predictions > 0.5, weights)))
        assert reset == 0.0


def test_precision_and_recall_are_zero_without_positives():
    with tv.Graph().as_default():
        p, p_up = tv.metrics.precision([1, 1], [0, 0])
        r, r_up = tv.metrics.recall([0, 0], [1, 1])
        with tv.Session() as s:
            s.run(tv.local_variables_initializer())
            assert s.run([p_up, r_up, p, r]) == [0.0, 0.0, 0.0, 0.0]


THRESH = [0.1, 0.5, 0.77]


def _at_thresholds(labels, predictions, weights, thresholds):
    return [_counts(labels, predictions > t, weights) for t in thresholds]


@pytest.mark.parametrize("weighted", [False, True])
def test_metrics_at_thresholds(weighted):
    w = W if weighted else None
    refs = {"true_positives_at_thresholds": lambda c: c["tp"],
            "false_positives_at_thresholds": lambda c: c["fp"],
            "true_negatives_at_thresholds": lambda c: c["tn"],
            "false_negatives_at_thresholds": lambda c: c["fn"],
            "precision_at_thresholds": lambda c: c["tp"] / (c["tp"] + c["fp"] + 1e-7),
            "recall_at_thresholds": lambda c: c["tp"] / (c["tp"] + c["fn"] + 1e-7)}
    for name, ref in refs.items():
        fn = getattr(tv.metrics, name)
        stream(lambda labels, predictions, weights=None, fn=fn: fn(labels, predictions, THRESH,
                                                                   weights=weights),
               {"labels": LAB, "predictions": PROB, "weights": w},
               lambda labels, predictions, weights=None, ref=ref: [
                   ref(c) for c in _at_thresholds(labels, predictions, weights, THRESH)])


# ---- AUC and the operating points ----------------------------------------------------------------

def _thresholds(n, last=1.0 + 1e-7):
    return [-1e-7] + [(i + 1) / (n - 1) for i in range(n - 2)] + [last]


def _np_auc(labels, predictions, weights, n, curve, method):
    c = _at_thresholds(labels, predictions, weights, _thresholds(n))
    tp, fp, tn, fn = (np.array([x[k] for x in c]) for k in ("tp", "fp", "tn", "fn"))
    if curve == "PR" and method == "careful_interpolation":
        dtp = tp[:-1] - tp[1:]
        p = tp + fp
        dp = np.maximum(p[:-1] - p[1:], 0)
        slope = np.divide(dtp, dp, out=np.zeros_like(dtp), where=dp != 0)
        intercept = tp[1:] - slope * p[1:]
        ok = (p[:-1] > 0) & (p[1:] > 0)
        ratio = np.where(ok, p[:-1] / np.where(p[1:] > 0, p[1:], 1), 1.0)
        den = np.maximum(tp[1:] + fn[1:], 0)
        inc = slope * (dtp + intercept * np.log(ratio))
        return np.divide(inc, den, out=np.zeros_like(inc), where=den != 0).sum()
    eps = 1e-6
    rec = (tp + eps) / (tp + fn + eps)
    x, y = (fp / (fp + tn + eps), rec) if curve == "ROC" else (rec, (tp + eps) / (tp + fp + eps))
    h = {"trapezoidal": (y[:-1] + y[1:]) / 2, "careful_interpolation": (y[:-1] + y[1:]) / 2,
         "minoring": np.minimum(y[:-1], y[1:]), "majoring": np.maximum(y[:-1], y[1:])}[method]
    return ((x[:-1] - x[1:]) * h).sum()


@pytest.mark.parametrize("curve,method", [
    ("ROC", "trapezoidal"), ("ROC", "minoring"), ("ROC", "majoring"),
    ("PR", "careful_interpolation"), ("PR", "trapezoidal"), ("PR", "majoring")])
def test_auc(curve, method):
    stream(lambda labels, predictions, weights: tv.metrics.auc(
        labels, predictions, weights=weights, num_thresholds=50, curve=curve,
        summation_method=method),
        {"labels": LAB, "predictions": PROB, "weights": W},
        lambda labels, predictions, weights: _np_auc(labels, predictions, weights, 50, curve,
                                                     method), rtol=1e-4)


def test_auc_closed_forms():
    """A perfect ranking has ROC AUC 1, a reversed one 0; explicit thresholds are sorted."""
    with tv.Graph().as_default():
        _, good_up = tv.metrics.auc([0, 0, 1, 1], [0.1, 0.2, 0.8, 0.9], name="good")
        _, bad_up = tv.metrics.auc([1, 1, 0, 0], [0.1, 0.2, 0.8, 0.9], name="bad")
        _, th_up = tv.metrics.auc([0, 1], [0.3, 0.6], thresholds=[0.7, 0.5, 0.1])
        with tv.Session() as s:
            s.run(tv.local_variables_initializer())
            g, b, t = s.run([good_up, bad_up, th_up])
    assert g == pytest.approx(1.0, abs=1e-5) and b == pytest.approx(0.0, abs=1e-5)
    # thresholds [-eps, .1, .5, .7, 1+eps]: fpr 1,1,0,0,0 and tpr 1,1,1,0,0 -> area 1
    assert t == pytest.approx(1.0, abs=1e-5)


def test_sensitivity_at_specificity_and_specificity_at_sensitivity():
    # float32 as the metric's counts: the nearest threshold is chosen among near-ties
    f = np.float32

    def sens_ref(labels, predictions, weights):
        c = [{k: f(v) for k, v in x.items()}
             for x in _at_thresholds(labels, predictions, weights, _thresholds(200))]
        spec = np.array([x["tn"] / (x["tn"] + x["fp"] + f(1e-7)) for x in c])
        i = int(np.argmin(np.abs(spec - f(0.6))))
        return c[i]["tp"] / (c[i]["tp"] + c[i]["fn"] + 1e-7)

    def spec_ref(labels, predictions, weights, target=0.6, n=200):
        c = [{k: f(v) for k, v in x.items()} for x in
             _at_thresholds(labels, predictions, weights, _thresholds(n, 1.0 - 1e-7))]
        dist = np.abs(np.array([x["tp"] / (x["tp"] + x["fn"] + f(1e-7)) for x in c])
                      - f(target))
        i = int(np.nonzero(dist == dist.min())[0][-1])  # the last (highest) threshold
        return c[i]["tn"] / (c[i]["tn"] + c[i]["fp"] + 1e-7)
    data = {"labels": LAB, "predictions": PROB, "weights": W}
    stream(lambda labels, predictions, weights: tv.metrics.sensitivity_at_specificity(
        labels, predictions, 0.6, weights=weights), data, sens_ref)
    stream(lambda labels, predictions, weights: tv.metrics.specificity_at_sensitivity(
        labels, predictions, 0.6, weights=weights), data, spec_ref)
    stream(lambda labels, predictions, weights: tv.metrics.specificity_at_sensitivity(
        labels, predictions, 0.5, num_thresholds=20), data,
        lambda labels, predictions, weights: spec_ref(labels, predictions, None, 0.5, 20))


# ---- class metrics ---------------------------------------------------------------------------------

CL = _batches(lambda: RNG.integers(0, 4, 10))
CP = _batches(lambda: RNG.integers(0, 4, 10))
CW = _batches(lambda: RNG.random(10).astype(np.float32))


def _cm(labels, predictions, weights, n):
    cm = np.zeros((n, n))
    np.add.at(cm, (labels, predictions), 1.0 if weights is None else weights)
    return cm


def test_mean_iou_and_mean_per_class_accuracy():
    def iou_ref(labels, predictions, weights=None, n=5):
        cm = _cm(labels, predictions, weights, n)
        den = cm.sum(0) + cm.sum(1) - np.diag(cm)
        valid = den != 0
        return (np.diag(cm)[valid] / den[valid]).sum() / valid.sum()

    def pca_ref(labels, predictions, weights=None, n=5):
        cm = _cm(labels, predictions, weights, n)
        per = np.divide(np.diag(cm), cm.sum(1), out=np.zeros(n), where=cm.sum(1) != 0)
        return per.mean()
    for w in (None, CW):
        with tv.Graph().as_default():  # the update op of mean_iou is the confusion matrix
            lab, pre = tv.placeholder(tv.int64, [10]), tv.placeholder(tv.int64, [10])
            ww = tv.placeholder(tv.float32, [10]) if w is not None else None
            miou, cm_up = tv.metrics.mean_iou(lab, pre, num_classes=5, weights=ww)
            assert [v.op.name for v in tv.local_variables()] == [
                "mean_iou/total_confusion_matrix"]
            with tv.Session() as s:
                s.run(tv.local_variables_initializer())
                for b in range(NB):
                    feed = {lab: CL[b], pre: CP[b], **({ww: w[b]} if w is not None else {})}
                    cm = s.run(cm_up, feed)
                seen = [np.concatenate(x) if x is not None else None for x in (CL, CP, w)]
                np.testing.assert_allclose(cm, _cm(*seen, 5), rtol=1e-6)
                assert s.run(miou) == pytest.approx(iou_ref(*seen), rel=1e-5)
        with tv.Graph().as_default():
            lab, pre = tv.placeholder(tv.int64, [10]), tv.placeholder(tv.int64, [10])
            ww = tv.placeholder(tv.float32, [10]) if w is not None else None
            acc, per_class = tv.metrics.mean_per_class_accuracy(lab, pre, 5, weights=ww)
            with tv.Session() as s:
                s.run(tv.local_variables_initializer())
                for b in range(NB):
                    s.run(per_class, {lab: CL[b], pre: CP[b],
                                      **({ww: w[b]} if w is not None else {})})
                seen = [np.concatenate(x) if x is not None else None for x in (CL, CP, w)]
                assert s.run(acc) == pytest.approx(pca_ref(*seen), rel=1e-5)


def test_class_ids_out_of_range_fail_the_step():
    with tv.Graph().as_default():
        _, up = tv.metrics.mean_iou([0, 5], [0, 1], num_classes=3)
        with tv.Session() as s:
            s.run(tv.local_variables_initializer())
            with pytest.raises(tv.errors.InvalidArgumentError,
                               match=r"labels and predictions must be in \[0, num_classes\)"):
                s.run(up)


# ---- top-k ------------------------------------------------------------------------------------------

LOGITS = _batches(lambda: RNG.normal(size=(6, 5)).astype(np.float32))
KLAB = _batches(lambda: RNG.integers(-1, 7, (6, 2)))  # -1 and 5, 6: ids outside the classes
KW = _batches(lambda: RNG.random(6).astype(np.float32))


def _np_at_k(labels, logits, weights, k, class_id, kind):
    top = np.argsort(-logits, axis=1, kind="stable")[:, :k]
    labels = labels.reshape(len(labels), -1)
    w = np.ones(len(labels)) if weights is None else weights
    tp = other = 0.0
    for row, lab, wi in zip(top, labels, w):
        pred, lab = set(row.tolist()), set(lab.tolist())
        if class_id is not None:
            pred, lab = pred & {class_id}, lab & {class_id}
        tp += wi * len(pred & lab)
        other += wi * len(pred - lab if kind == "precision" else lab - pred)
    return tp / (tp + other) if tp + other else np.nan


@pytest.mark.filterwarnings("ignore:invalid value encountered in divide")
@pytest.mark.parametrize("kind", ["precision", "recall"])
@pytest.mark.parametrize("k,class_id,weighted,dense2", [
    (1, None, False, True), (2, None, True, True), (3, None, False, False),
    (2, 0, True, True), (3, 3, False, True)])
def test_precision_and_recall_at_k(kind, k, class_id, weighted, dense2):
    fn = getattr(tv.metrics, f"{kind}_at_k")
    labels = KLAB if dense2 else [x[:, 0] for x in KLAB]
    with tv.Graph().as_default():
        lab = tv.placeholder(tv.int64, labels[0].shape)
        lg = tv.placeholder(tv.float32, [6, 5])
        ww = tv.placeholder(tv.float32, [6]) if weighted else None
        value, update = fn(lab, lg, k=k, class_id=class_id, weights=ww)
        prefix = f"{kind}_at_{k}" + ("" if class_id is None else f"_class{class_id}")
        assert all(v.op.name.startswith(prefix + "/") for v in tv.local_variables())
        with tv.Session() as s:
            s.run(tv.local_variables_initializer())
            for b in range(NB):
                got = s.run(update, {lab: labels[b], lg: LOGITS[b],
                                     **({ww: KW[b]} if weighted else {})})
                ref = _np_at_k(np.concatenate(labels[:b + 1]), np.concatenate(LOGITS[:b + 1]),
                               np.concatenate(KW[:b + 1]) if weighted else None, k, class_id,
                               kind)
                np.testing.assert_allclose(got, ref, rtol=1e-6)
            np.testing.assert_allclose(s.run(value), ref, rtol=1e-6)


@pytest.mark.filterwarnings("ignore:invalid value encountered in divide")
def test_top_k_metrics_with_sparse_labels_and_duplicates():
    """SparseTensor labels are sets of the present values; a repeated label counts once;
    with nothing to count the value is NaN (TF's 0/0)."""
    with tv.Graph().as_default():
        logits = tv.constant([[0.1, 0.5, 0.4], [0.6, 0.3, 0.1]])
        sparse = tv.SparseTensor(tv.constant([[0, 0], [1, 0], [1, 1]], tv.int64),
                                 tv.constant([2, 0, 1], tv.int64),
                                 tv.constant([2, 2], tv.int64))
        _, p_up = tv.metrics.precision_at_k(sparse, logits, k=2)
        _, r_up = tv.metrics.recall_at_k(tv.constant([[2, 2], [0, 0]], tv.int64), logits, k=1)
        _, n_up = tv.metrics.precision_at_k(tv.constant([2, 0], tv.int64), logits, k=1,
                                            class_id=2)
        _, t_up = tv.metrics.precision_at_top_k(tv.constant([[1], [0]], tv.int64),
                                                tv.constant([[1, 1], [2, 0]], tv.int64))
        with tv.Session() as s:
            s.run(tv.local_variables_initializer())
            assert s.run(p_up) == pytest.approx(0.75)  # rows: {1,2}&{2}, {0,1}&{0,1}
            assert s.run(r_up) == pytest.approx(0.5)   # {1} vs {2}; {0} vs {0}
            assert np.isnan(s.run(n_up))               # class 2 never predicted at k=1
            assert s.run(t_up) == pytest.approx(2 / 3)  # {1} & {1}; {2, 0} & {0}


def _np_average_precision(labels, logits, weights, k):
    top = np.argsort(-logits, axis=1, kind="stable")[:, :k]
    labels = labels.reshape(len(labels), -1)
    labels = np.where(labels >= logits.shape[1], -1, labels)  # TF: out of range -> -1
    w = np.ones(len(labels)) if weights is None else weights
    total = 0.0
    for row, lab, wi in zip(top, labels, w):
        hits, s = 0, 0.0
        for i, c in enumerate(row, 1):
            if c in set(lab.tolist()):
                hits += 1
                s += hits / i
        total += wi * s / min((lab >= 0).sum(), k)
    return total / w.sum()


@pytest.mark.parametrize("k,weighted,dense2", [(1, False, True), (2, True, True),
                                               (4, False, False), (3, True, False)])
def test_average_precision_at_k(k, weighted, dense2):
    # every row has a label in range; the second column has ids past the classes (-> -1)
    labels = [np.stack([np.abs(x[:, 0]) % 5, np.where(x[:, 1] < 6, x[:, 1], 9)], 1)
              for x in KLAB] if dense2 else [np.abs(x[:, 0]) % 5 for x in KLAB]
    with tv.Graph().as_default():
        lab = tv.placeholder(tv.int64, labels[0].shape)
        lg = tv.placeholder(tv.float32, [6, 5])
        ww = tv.placeholder(tv.float32, [6]) if weighted else None
        value, update = tv.metrics.average_precision_at_k(lab, lg, k, weights=ww)
        assert sorted(v.op.name for v in tv.local_variables()) == [
            f"average_precision_at_{k}/max", f"average_precision_at_{k}/total"]
        with tv.Session() as s:
            s.run(tv.local_variables_initializer())
            for b in range(NB):
                got = s.run(update, {lab: labels[b], lg: LOGITS[b],
                                     **({ww: KW[b]} if weighted else {})})
                ref = _np_average_precision(
                    np.concatenate(labels[:b + 1]), np.concatenate(LOGITS[:b + 1]),
                    np.concatenate(KW[:b + 1]) if weighted else None, k)
                assert got == pytest.approx(ref, rel=1e-6)
            assert s.run(value) == pytest.approx(ref, rel=1e-6)
    with pytest.raises(ValueError, match=r"Invalid k=0\. `k` should be >= 1\."):
        tv.metrics.sparse_average_precision_at_k([1], [[0.1, 0.9]], 0)


# ---- collections, names and errors ---------------------------------------------------------------

def test_collections_and_names():
    with tv.Graph().as_default():
        v, up = tv.metrics.mean_squared_error([1.0, 2.0], [1.0, 4.0],
                                              metrics_collections=["m"],
                                              updates_collections=["u"])
        p, p_up = tv.metrics.auc([0, 1], [0.2, 0.9], metrics_collections=["m"],
                                 updates_collections=["u"], name="my_auc")
        assert tv.get_collection("m") == [v, p] and tv.get_collection("u") == [up, p_up]
        assert sorted(x.op.name for x in tv.local_variables()) == [
            "mean_squared_error/count", "mean_squared_error/total", "my_auc/false_negatives",
            "my_auc/false_positives", "my_auc/true_negatives", "my_auc/true_positives"]
        assert (p.op.name, p_up.op.name) == ("my_auc/value", "my_auc/update_op")
        with tv.Session() as s:
            s.run(tv.local_variables_initializer())
            assert s.run(v) == 0.0  # 0 before any data, not NaN
            assert s.run(up) == pytest.approx(2.0)


def test_bad_inputs():
    E = tv.errors.InvalidArgumentError
    with tv.Graph().as_default():
        with pytest.raises(E, match=r"Shapes \(4, 2\) and \(4, 3\) are incompatible"):
            tv.metrics.mean_squared_error(tv.ones([4, 3]), tv.ones([4, 2]))
        with pytest.raises(ValueError, match=r"weights can not be broadcast to values\. "
                                             r"Mismatch at dim 0\. values\.shape=\[4 3\], "
                                             r"weights\.shape=\[3 3\]"):
            tv.metrics.mean(tv.ones([4, 3]), weights=tv.ones([3, 3]))
        with pytest.raises(ValueError, match="Curve must be either ROC or PR. Curve XY is "
                                             "unknown."):
            tv.metrics.auc([0, 1], [0.1, 0.2], curve="XY")
        with pytest.raises(ValueError, match="Invalid summation_method: avg summation_method "
                                             "should be 'trapezoidal'"):
            tv.metrics.auc([0, 1], [0.1, 0.2], summation_method="avg")
        with pytest.raises(ValueError, match=r"`specificity` must be in the range \[0, 1\]\. "
                                             r"Currently, `specificity` got 1\.5\."):
            tv.metrics.sensitivity_at_specificity([0, 1], [0.1, 0.2], 1.5)
        with pytest.raises(ValueError, match=r"`sensitivity` must be in the range \[0, 1\]\. "
                                             r"Currently, `sensitivity` is -1\."):
            tv.metrics.specificity_at_sensitivity([0, 1], [0.1, 0.2], -1)
        with pytest.raises(ValueError, match=r"Unexpected labels shape \(1, 1, 1\) for "
                                             r"predictions shape \(2, 1\)"):
            tv.metrics.precision_at_k(tv.constant([[[1]]], tv.int64),
                                      tv.constant([[0.1, 0.9], [0.8, 0.2]]), 1)
        with pytest.raises(ValueError, match="k must be a positive integer, got 0"):
            tv.metrics.recall_at_k(tv.constant([1], tv.int64), tv.constant([[0.1, 0.9]]), 0)
        with pytest.raises(ValueError, match="Invalid key: xx"):
            from tensorvm.tf_api.metrics import _confusion_at_thresholds
            _confusion_at_thresholds([1], [0.5], [0.5], includes=("xx",))
        _, up = tv.metrics.auc([0, 1], [0.3, 1.6])
        with tv.Session() as s:
            s.run(tv.local_variables_initializer())
            with pytest.raises(E, match=r"predictions must be in \[0, 1\]"):
                s.run(up)


# ---- tv.losses.cosine_distance and mean_pairwise_squared_error -----------------------------------

L2 = RNG.normal(size=(4, 3)).astype(np.float32)
P2 = RNG.normal(size=(4, 3)).astype(np.float32)


def _np_pairwise(labels, predictions, weights):
    """The mean over ordered pairs (i, j), i != j, of present elements of each example of
    ((p_i - p_j) - (l_i - l_j))**2, times the example's weight, summed over the batch."""
    d = (predictions - labels).reshape(len(labels), -1).astype(np.float64)
    w = np.broadcast_to(np.asarray(weights, np.float64), labels.shape).reshape(len(labels), -1)
    total = 0.0
    for row, wrow in zip(d, w):
        present = row[wrow != 0]
        n = len(present)
        if n > 1:
            pairs = [(a - b) ** 2 for i, a in enumerate(present)
                     for j, b in enumerate(present) if i != j]
            total += np.mean(pairs) * wrow[wrow != 0][0]
    return total


@pytest.mark.parametrize("weights", [1.0, 2.5, np.array([[1.0], [0.0], [2.0], [0.5]])])
def test_mean_pairwise_squared_error(weights):
    with tv.Graph().as_default():
        loss = tv.losses.mean_pairwise_squared_error(L2, P2, weights=weights)
        assert tv.get_collection(tv.GraphKeys.LOSSES) == [loss]
        with tv.Session() as s:
            got = s.run(loss)
    assert got == pytest.approx(_np_pairwise(L2, P2, weights), rel=1e-5)


def test_mean_pairwise_squared_error_of_rank_3_and_zero_weight():
    l3, p3 = RNG.normal(size=(2, 3, 2)), RNG.normal(size=(2, 3, 2))
    with tv.Graph().as_default():
        a = tv.losses.mean_pairwise_squared_error(l3, p3)
        z = tv.losses.mean_pairwise_squared_error(l3, p3, weights=0.0)
        with tv.Session() as s:
            got, zero = s.run([a, z])
    assert got == pytest.approx(_np_pairwise(l3, p3, 1.0), rel=1e-5) and zero == 0.0


def test_cosine_distance():
    ln = L2 / np.linalg.norm(L2, axis=1, keepdims=True)
    pn = P2 / np.linalg.norm(P2, axis=1, keepdims=True)
    per_row = 1.0 - (ln * pn).sum(1, keepdims=True)
    w = np.array([[1.0], [0.0], [2.0], [0.5]])
    with tv.Graph().as_default():
        mean = tv.losses.cosine_distance(ln, pn, axis=1)
        weighted = tv.losses.cosine_distance(ln, pn, axis=1, weights=w)
        none = tv.losses.cosine_distance(ln, pn, dim=1, reduction=tv.losses.Reduction.NONE)
        with tv.Session() as s:
            m, wt, n = s.run([mean, weighted, none])
    assert m == pytest.approx(per_row.mean(), rel=1e-5)
    assert wt == pytest.approx((per_row * w).sum() / 3.0, rel=1e-5)  # 3 non-zero weights
    np.testing.assert_allclose(n, per_row, rtol=1e-5)
    with pytest.raises(ValueError, match="You must specify argument `axis`."):
        tv.losses.cosine_distance(ln, pn)
    with pytest.raises(ValueError, match="Argument `labels` must not be None."):
        tv.losses.cosine_distance(None, pn, axis=1)
    with pytest.raises(ValueError, match=r"Shapes \(4, 2\) and \(4, 3\) are incompatible"):
        tv.losses.mean_pairwise_squared_error(L2, P2[:, :2])
