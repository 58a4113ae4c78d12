"""TF 1.x's other candidate samplers for ``tv.nn``: ``all_candidate_sampler`` (every class
``0 .. num_sampled - 1``, expected counts 1), ``fixed_unigram_candidate_sampler`` (a fixed
unigram distribution, from a list or a ``word,count`` vocabulary file, raised to
``distortion``, with reserved ids of probability 0 and sharding) and
``learned_unigram_candidate_sampler`` (a distribution learned from the true classes seen so
far: every class starts with weight 1, each true class seen adds 1, after the draw).

As :mod:`tensorvm.ops.nn.nn_sampled`'s samplers they are stateful random ops drawing on the host
(CPU-only, as TF's). Expected counts follow TF's ``range_sampler.cc``: ``p * num_sampled``
when every draw was kept, else ``1 - (1 - p) ** tries`` (``unique``: the draws it took).

>>> import numpy as np, tensorvm as tv
>>> s, tc, sc = tv.nn.fixed_unigram_candidate_sampler([[0]], 1, 2, True, 3,
...                                                   unigrams=[0, 1, 1], seed=1)
>>> with tv.Session() as sess: sorted(sess.run(s).tolist())
[1, 2]
"""
from __future__ import annotations

import threading

import numpy as np

from ...framework import dtypes as _dt
from ...framework.errors import InvalidArgumentError
from ...framework.op_def_library import apply_op
from ...framework.op_registry import register_op
from ...framework.tensor_conversion import convert_to_tensor
from ..math.random_ops import _rng, get_seed

__all__: list[str] = []
NN_ALL = ["all_candidate_sampler", "fixed_unigram_candidate_sampler",
          "learned_unigram_candidate_sampler"]

_HOST = "samples with the host's random generator (TF's samplers are CPU-only too)"


def _draw(rng, probs, num_sampled, unique):
    """``(sampled, tries)``: ``num_sampled`` draws from ``probs`` (distinct ones when
    ``unique``, counting every draw it took, as TF's rejection loop)."""
    k = len(probs)
    if not unique:
        return rng.choice(k, size=num_sampled, p=probs).astype(np.int64), num_sampled
    picked: dict[int, None] = {}
    tries = 0
    while len(picked) < num_sampled:
        for c in rng.choice(k, size=num_sampled, p=probs).tolist():
            tries += 1
            picked.setdefault(c)
            if len(picked) == num_sampled:
                break
    return np.fromiter(picked, np.int64, num_sampled), tries


def _expected(p, num_sampled, tries):
    p = np.asarray(p, np.float64)
    if tries == num_sampled:
        return (p * num_sampled).astype(np.float32)
    return (-np.expm1(tries * np.log1p(-p))).astype(np.float32)


def _counts_out(true_classes, sampled, probs, num_sampled, tries):
    tc = np.asarray(true_classes, np.int64)
    return (sampled, _expected(probs[tc], num_sampled, tries),
            _expected(probs[sampled], num_sampled, tries))


def _all_kernel(ctx, true_classes, *, num_true, num_sampled, unique, seed, seed2):
    ones = np.ones(num_sampled, np.float32)
    return (np.arange(num_sampled, dtype=np.int64),
            np.ones(np.shape(true_classes), np.float32), ones)


def _vocab_counts(path):
    import fsspec
    with fsspec.open(path, "rt") as fh:
        return [float(line.rstrip("\n").split(",")[-1]) for line in fh if line.strip()]


def _fixed_probs(range_max, vocab_file, distortion, num_reserved_ids, num_shards, shard,
                 unigrams):
    weights = list(unigrams) if not vocab_file else _vocab_counts(vocab_file)
    w = np.concatenate([np.zeros(num_reserved_ids), np.asarray(weights, np.float64)])
    if len(w) != range_max:
        raise InvalidArgumentError(f"range is {range_max} must be equal to weights size  "
                                   f"{len(w)}")
    w = np.where(w > 0, w ** distortion, 0.0)
    if num_shards > 1:
        w[np.arange(range_max) % num_shards != shard] = 0.0
    if w.sum() <= 0:
        raise InvalidArgumentError("fixed_unigram_candidate_sampler: every weight is 0")
    return w / w.sum()


def _fixed_kernel(ctx, true_classes, *, num_true, num_sampled, unique, range_max, vocab_file,
                  distortion, num_reserved_ids, num_shards, shard, unigrams, seed, seed2):
    probs = _fixed_probs(range_max, vocab_file, distortion, num_reserved_ids, num_shards, shard,
                         unigrams)
    if unique and np.count_nonzero(probs) < num_sampled:
        raise InvalidArgumentError(f"fixed_unigram_candidate_sampler: cannot draw {num_sampled} "
                                   f"unique classes out of {np.count_nonzero(probs)} with a "
                                   f"non-zero weight")
    sampled, tries = _draw(_rng(ctx, seed, seed2), probs, num_sampled, unique)
    return _counts_out(true_classes, sampled, probs, num_sampled, tries)


class _Weights:
    """A learned sampler's class weights, one array per session (as TF's kernel holds them)."""

    def __init__(self):
        self._by_session: dict[str, np.ndarray] = {}
        self.lock = threading.Lock()

    def get(self, session, range_max):
        w = self._by_session.get(session)
        if w is None:
            w = self._by_session[session] = np.ones(range_max, np.float64)
        return w


def _learned_kernel(ctx, true_classes, *, num_true, num_sampled, unique, range_max, seed,
                    seed2):
    tc = np.asarray(true_classes, np.int64)
    if tc.size and (tc.min() < 0 or tc.max() >= range_max):
        raise InvalidArgumentError(f"learned_unigram_candidate_sampler: true classes must be in "
                                   f"[0, {range_max}), got {tc.min()}..{tc.max()}")
    session = "" if ctx.step_id is None else str(ctx.step_id).split(".", 1)[0]
    state = ctx.resources.lookup_or_create("", "unigram/" + ctx.op_name, _Weights)
    with state.lock:
        w = state.get(session, range_max)
        probs = w / w.sum()
        sampled, tries = _draw(_rng(ctx, seed, seed2), probs, num_sampled, unique)
        out = _counts_out(tc, sampled, probs, num_sampled, tries)
        np.add.at(w, tc.reshape(-1), 1.0)  # TF's Update, after the draw
    return out


def _shape(op_type):
    def shape_fn(inputs, attrs):
        tc = inputs[0]
        if tc.dtype != _dt.int64:
            raise InvalidArgumentError(f"{op_type}: true_classes must be int64, got "
                                       f"{tc.dtype.name}")
        if tc._shape is not None and (len(tc._shape) != 2 or
                                      tc._shape[1] not in (None, attrs["num_true"])):
            raise InvalidArgumentError(f"{op_type}: true_classes must be a matrix [batch_size, "
                                       f"num_true={attrs['num_true']}], got shape "
                                       f"{list(tc._shape)}")
        n = attrs["num_sampled"]
        return [(_dt.int64, (n,)), (_dt.float32, tc._shape), (_dt.float32, (n,))]
    return shape_fn


for _op, _k in (("AllCandidateSampler", _all_kernel),
                ("FixedUnigramCandidateSampler", _fixed_kernel),
                ("LearnedUnigramCandidateSampler", _learned_kernel)):
    register_op(_op, _shape(_op), _k, stateful=True, needs_ctx=True, differentiable=False,
                cpu_only=_HOST)


def _common(op_type, true_classes, num_true, num_sampled, unique, range_max, seed):
    if int(num_sampled) < 1 or (range_max is not None and int(range_max) < 1):
        raise InvalidArgumentError(f"{op_type}: num_sampled ({num_sampled}) and range_max "
                                   f"({range_max}) must be positive")
    if unique and range_max is not None and int(num_sampled) > int(range_max):
        raise InvalidArgumentError(f"{op_type}: cannot draw {num_sampled} unique classes out of "
                                   f"range_max={range_max}")
    s1, s2 = get_seed(seed)
    attrs = {"num_true": int(num_true), "num_sampled": int(num_sampled),
             "unique": bool(unique), "seed": s1, "seed2": s2}
    tc = convert_to_tensor(true_classes, dtype=None if hasattr(true_classes, "dtype")
                           else _dt.int64)
    return tc, attrs


def all_candidate_sampler(true_classes, num_true, num_sampled, unique, seed=None, name=None):
    """Every class ``0 .. num_sampled - 1`` as the sampled candidates (for testing), with
    expected counts 1: ``(sampled_candidates, true_expected_count,
    sampled_expected_count)``."""
    tc, attrs = _common("AllCandidateSampler", true_classes, num_true, num_sampled, unique,
                        None, seed)
    return tuple(apply_op("AllCandidateSampler", [tc], attrs,
                          name=name or "AllCandidateSampler").outputs)


def fixed_unigram_candidate_sampler(true_classes, num_true, num_sampled, unique, range_max,
                                    vocab_file="", distortion=1.0, num_reserved_ids=0,
                                    num_shards=1, shard=0, unigrams=(), seed=None, name=None):
    """Draw from a fixed unigram distribution over ``[0, range_max)``: the counts of
    ``unigrams`` (or the last column of ``vocab_file``'s ``word,count`` lines) after
    ``num_reserved_ids`` ids of weight 0, each raised to ``distortion``; with ``num_shards``
    only the ids ``id % num_shards == shard`` are drawn."""
    if not 0 <= int(shard) < int(num_shards):
        raise InvalidArgumentError(f"FixedUnigramCandidateSampler: shard ({shard}) must be in "
                                   f"[0, num_shards={num_shards})")
    if bool(vocab_file) == bool(len(unigrams)):
        raise InvalidArgumentError("FixedUnigramCandidateSampler: give exactly one of "
                                   "vocab_file and unigrams")
    tc, attrs = _common("FixedUnigramCandidateSampler", true_classes, num_true, num_sampled,
                        unique, range_max, seed)
    attrs.update(range_max=int(range_max), vocab_file=str(vocab_file or ""),
                 distortion=float(distortion), num_reserved_ids=int(num_reserved_ids),
                 num_shards=int(num_shards), shard=int(shard),
                 unigrams=tuple(float(u) for u in unigrams))
    return tuple(apply_op("FixedUnigramCandidateSampler", [tc], attrs,
                          name=name or "FixedUnigramCandidateSampler").outputs)


def learned_unigram_candidate_sampler(true_classes, num_true, num_sampled, unique, range_max,
                                      seed=None, name=None):
    """Draw from the unigram distribution of the true classes seen so far by this op in this
    session (every class starts at weight 1; each run's true classes are counted after its
    draw)."""
    tc, attrs = _common("LearnedUnigramCandidateSampler", true_classes, num_true, num_sampled,
                        unique, range_max, seed)
    attrs["range_max"] = int(range_max)
    return tuple(apply_op("LearnedUnigramCandidateSampler", [tc], attrs,
                          name=name or "LearnedUnigramCandidateSampler").outputs)
