"""``group_reduce`` over string keys (a word count's combiner and reducers): each built-in
reduction against a plain-Python reference, exact integer sums, and no Acero ``group_by``
on the sum/count/mean path (issue 23: under load, a reducer's merge waited on Arrow's thread
pool up to ~10x its CPU time)."""
from __future__ import annotations

import collections

import numpy as np
import pyarrow as pa
import pytest

from tensorvm.ops.mapreduce import mapreduce_ops as mro
from tensorvm.ops.mapreduce.mr_values import group_reduce

HOWS = ("sum", "count", "mean", "min", "max", "first")
DTYPES = (np.int64, np.int32, np.uint64, np.float64, np.float32, np.bool_)


def _reference(words, values, how):
    groups = collections.defaultdict(list)
    for w, v in zip(words, values.tolist()):
        groups[w].append(v)
    fn = {"sum": sum, "count": len, "mean": lambda xs: sum(xs) / len(xs), "min": min,
          "max": max, "first": lambda xs: xs[0]}[how]
    return {w: fn(xs) for w, xs in groups.items()}


def _values(rng, dtype, n):
    if dtype is np.float64:
        return rng.normal(size=n)
    if dtype is np.float32:
        return rng.normal(size=n).astype(np.float32)
    if dtype in (np.uint64, np.bool_):
        return rng.integers(0, 2, n).astype(dtype)
    return rng.integers(-5, 6, n).astype(dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("how", HOWS)
def test_string_keys_each_reduction_matches_python(how, dtype):
    rng = np.random.default_rng(7)
    for n in (0, 1, 40, 500):
        words = [None if rng.random() < 0.05 else f"w{rng.integers(0, 9)}" for _ in range(n)]
        values = _values(rng, dtype, n)
        for typ in (pa.string(), pa.large_string()):
            keys, out = group_reduce(pa.array(words, typ), values, how)
            got = dict(zip(keys.to_pylist(), out.tolist()))
            want = _reference(words, values, how)
            assert got.keys() == want.keys()
            want_dtype = {"count": np.int64, "mean": np.float64}.get(how, dtype)
            assert out.dtype == want_dtype
            for w, v in want.items():
                if how == "sum" and dtype is np.bool_:
                    v = bool(v)  # (a sum keeps the values' dtype: a bool sum is "any")
                if isinstance(got[w], float):  # (float32 rounding of a float64 sum)
                    assert got[w] == pytest.approx(v, rel=1e-6, abs=1e-6), w
                else:
                    assert got[w] == v, w


def test_integer_sums_stay_exact_where_float64_would_round():
    # 2**53 + 1 has no float64: a float accumulation would give 2**53
    keys = pa.array(["a", "b", "a", "a", "b"])
    vals = np.array([2**53, -(2**60), 1, 1, -3], np.int64)
    k, v = group_reduce(keys, vals, "sum")
    assert dict(zip(k.to_pylist(), v.tolist())) == {"a": 2**53 + 2, "b": -(2**60) - 3}
    u = np.array([2**63, 1], np.uint64)
    k, v = group_reduce(pa.array(["x", "x"]), u, "sum")
    assert v.dtype == np.uint64 and v.tolist() == [2**63 + 1]


def test_sum_count_mean_over_string_keys_use_no_acero_group_by(monkeypatch):
    import pyarrow.acero

    def refuse(*a, **k):
        raise AssertionError("Acero's group_by was used")
    monkeypatch.setattr(pyarrow.acero, "_group_by", refuse)
    words = pa.array(["b", "a", "b", "c", "a", "b"], pa.large_string())
    counts = np.array([1, 2, 3, 4, 5, 6], np.int64)
    for how, want in (("sum", {"a": 7, "b": 10, "c": 4}), ("count", {"a": 2, "b": 3, "c": 1}),
                      ("mean", {"a": 3.5, "b": 10 / 3, "c": 4.0})):
        k, v = group_reduce(words, counts, how)
        assert dict(zip(k.to_pylist(), v.tolist())) == pytest.approx(want)
    # a word count reducer's merge: buckets of (word, count), summed and sorted
    keys, values = mro.merge([(words.slice(0, 3), counts[:3]), (words.slice(3), counts[3:])],
                             "sum", True)
    assert keys.to_pylist() == ["a", "b", "c"] and values.tolist() == [7, 10, 4]
