"""Sampled losses for ``tv.nn``: the candidate samplers (``log_uniform_candidate_sampler``,
``uniform_candidate_sampler``), ``compute_accidental_hits``, ``nce_loss`` and
``sampled_softmax_loss`` (TF 1.x's ``_compute_sampled_logits``).

A sampler is a stateful random op: ``num_sampled`` classes in ``[0, range_max)`` (distinct
when ``unique``), and the expected number of times each true and sampled class would be drawn:
``p * num_sampled`` without ``unique``, ``1 - (1 - p) ** tries`` with it (``tries`` the draws
it took), ``p`` the class's probability — ``(log(k + 2) - log(k + 1)) / log(range_max + 1)``
for the log-uniform (Zipfian) sampler. Weights and biases are looked up with
``embedding_lookup``, so their gradients stay sparse and they may be sharded
(a list or a :class:`tensorvm.PartitionedVariable`).

>>> import numpy as np, tensorvm as tv
>>> s, tc, sc = tv.nn.uniform_candidate_sampler([[0]], 1, 3, True, 5, seed=1)
>>> with tv.Session() as sess: got = sess.run([s, tc, sc])
>>> len(set(got[0].tolist())), bool(np.all(got[0] < 5))
(3, True)
"""
from __future__ import annotations

import numpy as np

from ...framework import dtypes as _dt
from ...framework.errors import InvalidArgumentError
from ...framework.op_def_library import apply_op
from ...framework.op_registry import register_op
from ...framework.tensor_conversion import convert_to_tensor
from ..math.random_ops import _rng, get_seed

__all__: list[str] = []
NN_ALL = ["log_uniform_candidate_sampler", "uniform_candidate_sampler",
          "compute_accidental_hits", "nce_loss", "sampled_softmax_loss"]


def _probs(k, dist, range_max):
    k = np.asarray(k, dtype=np.float64)
    if dist == "log_uniform":
        return (np.log(k + 2.0) - np.log(k + 1.0)) / np.log(range_max + 1.0)
    return np.full(k.shape, 1.0 / range_max)


def _draw(rng, n, dist, range_max):
    if dist == "log_uniform":
        v = np.floor(np.exp(rng.random(n) * np.log(range_max + 1.0))) - 1
        return np.clip(v, 0, range_max - 1).astype(np.int64)
    return rng.integers(0, range_max, n, dtype=np.int64)


def _sampler_kernel(ctx, true_classes, *, dist, num_true, num_sampled, unique, range_max,
                    seed, seed2):
    rng = _rng(ctx, seed, seed2)
    if unique:
        picked: dict[int, None] = {}
        tries = 0
        while len(picked) < num_sampled:
            for c in _draw(rng, num_sampled, dist, range_max).tolist():
                tries += 1
                picked.setdefault(c)
                if len(picked) == num_sampled:
                    break
        sampled = np.fromiter(picked, np.int64, num_sampled)

        def expected(k):
            return -np.expm1(tries * np.log1p(-_probs(k, dist, range_max)))
    else:
        sampled = _draw(rng, num_sampled, dist, range_max)

        def expected(k):
            return _probs(k, dist, range_max) * num_sampled
    tc = np.asarray(true_classes)
    return (sampled, expected(tc).astype(np.float32), expected(sampled).astype(np.float32))


def _sampler_shape(inputs, attrs):
    tc = inputs[0]
    if not tc.dtype.is_integer:
        raise InvalidArgumentError(f"CandidateSampler: true_classes must be int64, got "
                                   f"{tc.dtype.name}")
    if tc._shape is not None and (len(tc._shape) != 2 or
                                  tc._shape[1] not in (None, attrs["num_true"])):
        raise InvalidArgumentError(f"CandidateSampler: true_classes must be a matrix "
                                   f"[batch_size, num_true={attrs['num_true']}], got shape "
                                   f"{list(tc._shape)}")
    n = attrs["num_sampled"]
    return [(_dt.int64, (n,)), (_dt.float32, tc._shape), (_dt.float32, (n,))]


register_op("CandidateSampler", _sampler_shape, _sampler_kernel, stateful=True,
            needs_ctx=True, differentiable=False)


def _sampler(dist, true_classes, num_true, num_sampled, unique, range_max, seed, name):
    if int(range_max) < 1 or int(num_sampled) < 1:
        raise InvalidArgumentError(f"candidate sampler: range_max ({range_max}) and num_sampled "
                                   f"({num_sampled}) must be positive")
    if unique and num_sampled > range_max:
        raise InvalidArgumentError(f"candidate sampler: cannot draw {num_sampled} unique "
                                   f"classes out of range_max={range_max}")
    tc = convert_to_tensor(true_classes, dtype=None)
    s1, s2 = get_seed(seed)
    attrs = {"dist": dist, "num_true": int(num_true), "num_sampled": int(num_sampled),
             "unique": bool(unique), "range_max": int(range_max), "seed": s1, "seed2": s2}
    return tuple(apply_op("CandidateSampler", [tc], attrs, name=name).outputs)


def log_uniform_candidate_sampler(true_classes, num_true, num_sampled, unique, range_max,
                                  seed=None, name=None):
    """``(sampled_candidates, true_expected_count, sampled_expected_count)`` drawn from the
    log-uniform (Zipfian) distribution over ``[0, range_max)``."""
    return _sampler("log_uniform", true_classes, num_true, num_sampled, unique, range_max,
                    seed, name or "LogUniformCandidateSampler")


def uniform_candidate_sampler(true_classes, num_true, num_sampled, unique, range_max,
                              seed=None, name=None):
    """``(sampled_candidates, true_expected_count, sampled_expected_count)`` drawn uniformly
    from ``[0, range_max)``."""
    return _sampler("uniform", true_classes, num_true, num_sampled, unique, range_max, seed,
                    name or "UniformCandidateSampler")


def compute_accidental_hits(true_classes, sampled_candidates, num_true, seed=None, name=None):
    """A bool ``[batch, num_sampled]`` mask: where a sampled class equals one of the row's true
    classes (TF returns the same as sparse indices)."""
    from ..array.array_ops import reshape
    from ..array.manip_ops import expand_dims
    from ..math.math_ext import equal, reduce_any
    from ..math.math_ops import cast
    tc = cast(convert_to_tensor(true_classes), _dt.int64)
    sc = cast(convert_to_tensor(sampled_candidates), _dt.int64)
    return reduce_any(equal(expand_dims(tc, 2), reshape(sc, [1, 1, -1])), axis=1, name=name)


def _sampled_logits(weights, biases, labels, inputs, num_sampled, num_classes, num_true,
                    sampled_values, subtract_log_q, remove_accidental_hits, partition_strategy):
    """``(logits [batch, num_true + num_sampled], labels of the same shape)``."""
    from ..array.array_ops import ones_like, reshape, stop_gradient, zeros_like
    from ..array.manip_ops import concat, expand_dims
    from ..math.math_ext import where_
    from ..math.math_ops import cast, log, matmul, reduce_sum
    from .nn_ops import embedding_lookup
    inputs = convert_to_tensor(inputs)
    labels = cast(convert_to_tensor(labels), _dt.int64)
    if labels._shape is not None and len(labels._shape) == 1:
        labels = reshape(labels, [-1, num_true])
    if sampled_values is None:
        sampled_values = log_uniform_candidate_sampler(labels, num_true, num_sampled, True,
                                                       num_classes)
    sampled, true_exp, sampled_exp = (stop_gradient(convert_to_tensor(v))
                                      for v in sampled_values)
    sampled = cast(sampled, _dt.int64)
    flat = reshape(labels, [-1])
    true_w = embedding_lookup(weights, flat, partition_strategy=partition_strategy)
    sampled_w = embedding_lookup(weights, sampled, partition_strategy=partition_strategy)
    true_b = embedding_lookup(biases, flat, partition_strategy=partition_strategy)
    sampled_b = embedding_lookup(biases, sampled, partition_strategy=partition_strategy)
    dim = inputs._shape[-1] if inputs._shape is not None else -1
    true_w = reshape(true_w, [-1, num_true, dim if dim is not None else -1])
    true_logits = reduce_sum(expand_dims(inputs, 1) * true_w, axis=2) + \
        reshape(true_b, [-1, num_true])
    sampled_logits = matmul(inputs, sampled_w, transpose_b=True) + sampled_b
    if remove_accidental_hits:
        hits = compute_accidental_hits(labels, sampled, num_true)
        low = convert_to_tensor(np.finfo(inputs.dtype.np_dtype).min, dtype=inputs.dtype)
        sampled_logits = sampled_logits + where_(hits, low * ones_like(sampled_logits),
                                                 zeros_like(sampled_logits))
    if subtract_log_q:
        true_logits = true_logits - log(cast(true_exp, inputs.dtype))
        sampled_logits = sampled_logits - log(cast(sampled_exp, inputs.dtype))
    logits = concat([true_logits, sampled_logits], 1)
    out_labels = concat([ones_like(true_logits) / float(num_true), zeros_like(sampled_logits)],
                        1)
    return logits, out_labels


def nce_loss(weights, biases, labels, inputs, num_sampled, num_classes, num_true=1,
             sampled_values=None, remove_accidental_hits=False, partition_strategy="mod",
             name="nce_loss"):
    """Per-example noise-contrastive estimation loss (Gutmann & Hyvärinen): the summed sigmoid
    cross-entropy of the true classes (label ``1 / num_true``) and ``num_sampled`` sampled
    classes (label 0), each logit minus the log of its expected count."""
    from ..math.math_ops import reduce_sum
    from .nn_softmax import sigmoid_cross_entropy_with_logits
    logits, lab = _sampled_logits(weights, biases, labels, inputs, num_sampled, num_classes,
                                  num_true, sampled_values, True, remove_accidental_hits,
                                  partition_strategy)
    return reduce_sum(sigmoid_cross_entropy_with_logits(labels=lab, logits=logits), axis=1,
                      name=name)


def sampled_softmax_loss(weights, biases, labels, inputs, num_sampled, num_classes,
                         num_true=1, sampled_values=None, remove_accidental_hits=True,
                         partition_strategy="mod", name="sampled_softmax_loss", seed=None):
    """Per-example softmax cross-entropy over the true classes and ``num_sampled`` sampled
    ones (logits corrected by the log expected counts; sampled classes equal to a true one
    removed by default)."""
    from ..array.array_ops import stop_gradient
    from .nn_softmax import softmax_cross_entropy_with_logits_v2
    if sampled_values is None and seed is not None:
        sampled_values = log_uniform_candidate_sampler(labels, num_true, num_sampled, True,
                                                       num_classes, seed=seed)
    logits, lab = _sampled_logits(weights, biases, labels, inputs, num_sampled, num_classes,
                                  num_true, sampled_values, True, remove_accidental_hits,
                                  partition_strategy)
    return softmax_cross_entropy_with_logits_v2(labels=stop_gradient(lab), logits=logits,
                                                name=name)
