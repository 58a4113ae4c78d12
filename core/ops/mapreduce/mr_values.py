"""Map-reduce values and the vectorised verbs over them: Arrow or NumPy, grouped by key.

Keys are 1-D strings or numbers, or ``uint8 [n, w]`` fixed-width byte records (compared as
unsigned bytes). Values have any dtype and shape ``[n, ...]``, or are a scalar meaning "this
value for every key" (``emit(words, 1)``). String columns stay Arrow arrays; every verb is
vectorised (``pyarrow.compute`` hash kernels for string keys, NumPy sort/``reduceat`` for
numbers and byte keys), never a Python loop over records. The ops of
:mod:`tensorvm.ops.mapreduce.mapreduce_ops` are built from these functions.

Reductions (``how``): ``sum count min max mean first collect collect_set``. ``collect``
gathers each key's values into an Arrow list, ``collect_set`` its distinct values, sorted (the
inverted index). ``mean`` is not a combiner (not associative).

>>> import numpy as np
>>> k, v = group_reduce(np.array([3, 1, 3]), np.array([1.0, 2.0, 4.0]), "sum")
>>> k.tolist(), v.tolist()
([1, 3], [2.0, 5.0])
>>> [b[0].tolist() for b in partition(np.arange(6), np.int64(1), 2, "range", (3,))]
[[0, 1, 2], [3, 4, 5]]
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ...framework import errors
from ..strings.string_ops import _hash64

__all__: list[str] = []  # used through tensorvm.mapreduce, not exported as tv.*

REDUCTIONS = ("sum", "count", "min", "max", "mean", "first", "collect", "collect_set")


# ---- values: Arrow or NumPy, the same verbs --------------------------------------------------
def is_arrow(x) -> bool:
    return isinstance(x, (pa.Array, pa.ChunkedArray))


def as_arrow(x) -> pa.Array:
    if isinstance(x, pa.ChunkedArray):
        return x.combine_chunks() if x.num_chunks != 1 else x.chunk(0)
    if isinstance(x, pa.Array):
        return x
    arr = np.asarray(x)
    if arr.dtype.kind in "OUS":
        return pa.array(arr.astype(object, copy=False).ravel(), type=pa.large_string())
    return pa.array(arr)


def is_stringy(x) -> bool:
    if is_arrow(x):
        t = x.type
        return pa.types.is_string(t) or pa.types.is_large_string(t) or \
            pa.types.is_binary(t) or pa.types.is_large_binary(t)
    return isinstance(x, np.ndarray) and x.dtype.kind in "OUS"


def length(x) -> int:
    return len(x) if (is_arrow(x) or np.ndim(x)) else 0


def take(x, idx: np.ndarray):
    if is_arrow(x):
        return as_arrow(x).take(pa.array(idx, type=pa.int64()))
    if np.ndim(x) == 0:
        return x
    return np.take(x, idx, axis=0)  # (about twice as fast as x[idx] for rows)


def concat(parts: list):
    """Concatenate values of one kind; scalar values (``emit(k, 1)``) broadcast per part."""
    if any(is_arrow(p) or is_stringy(p) for p in parts):
        arrs = [as_arrow(p) for p in parts]
        if any(pa.types.is_large_string(a.type) for a in arrs):
            arrs = [a.cast(pa.large_string()) if pa.types.is_string(a.type) else a
                    for a in arrs]
        return pa.concat_arrays(arrs) if len(arrs) != 1 else arrs[0]
    return np.concatenate([np.asarray(p) for p in parts]) if len(parts) != 1 else parts[0]


def nbytes(x) -> int:
    if is_arrow(x):
        return int(x.nbytes)
    return int(getattr(x, "nbytes", 0))


def to_numpy(x):
    """A value as NumPy (strings as an object array) — for the driver and py_func maps."""
    if is_arrow(x):
        a = as_arrow(x)
        if pa.types.is_list(a.type) or pa.types.is_large_list(a.type):
            return np.asarray(a.to_pylist(), dtype=object)
        out = a.to_numpy(zero_copy_only=False)
        return out.astype(object) if out.dtype.kind in "US" else out
    return x


def broadcast(values, n: int):
    return np.full(n, values) if np.ndim(values) == 0 else values


# ---- hashing and grouping --------------------------------------------------------------------
_M1, _M2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)


def _mix64(h: np.ndarray) -> np.ndarray:
    """SplitMix64's finaliser over uint64 (wrapping)."""
    h = h.astype(np.uint64, copy=True)
    h ^= h >> np.uint64(30)
    h *= _M1
    h ^= h >> np.uint64(27)
    h *= _M2
    h ^= h >> np.uint64(31)
    return h


def key_hash(keys) -> np.ndarray:
    """A stable uint64 hash per key (strings: ``tv.strings.to_hash_bucket_fast``'s hash)."""
    if is_stringy(keys):
        return _hash64(keys)
    keys = np.asarray(keys)
    if keys.ndim == 2:  # fixed-width byte records: fold the columns
        h = np.zeros(len(keys), np.uint64)
        for j in range(keys.shape[1]):
            h = _mix64(h ^ keys[:, j].astype(np.uint64))
        return h
    if keys.dtype.kind == "f":
        keys = keys.astype(np.float64).view(np.uint64)
    return _mix64(keys.astype(np.int64).view(np.uint64))


def _byte_keys(keys: np.ndarray) -> np.ndarray:
    """``uint8 [n, w]`` as ``S<w>`` scalars: NumPy sorts and compares them as unsigned bytes."""
    keys = np.ascontiguousarray(keys)
    return keys.view(f"S{keys.shape[1]}").ravel()


def _byte_sort_order(keys: np.ndarray) -> np.ndarray:
    """Order of ``uint8 [n, w]`` keys as unsigned bytes: an unstable sort of the first 8 bytes
    as big-endian uint64 (5x faster than sorting ``S<w>`` scalars), kept when those prefixes
    are all distinct (ties in them are the only place stability or later bytes matter);
    otherwise the stable sort of the whole keys."""
    n, w = keys.shape
    if n == 0:
        return np.zeros(0, np.int64)
    head = np.zeros((n, 8), np.uint8)
    head[:, :min(w, 8)] = keys[:, :8]
    prefix = head.view(">u8").ravel()
    order = np.argsort(prefix)
    s = prefix[order]
    if not np.any(s[1:] == s[:-1]):
        return order
    return np.argsort(_byte_keys(keys), kind="stable")


def sort_order(keys) -> np.ndarray:
    """Indices that sort ``keys`` ascending (stable among equal keys)."""
    if is_stringy(keys):
        return pc.sort_indices(as_arrow(keys)).to_numpy()
    keys = np.asarray(keys)
    if keys.ndim == 2:
        return _byte_sort_order(keys)
    return np.argsort(keys, kind="stable")


def group_ids(keys) -> tuple:
    """``(unique_keys, ids)``: ``keys == unique_keys[ids]`` (unique keys in any order)."""
    if is_stringy(keys):
        enc = as_arrow(keys).dictionary_encode(null_encoding="encode")  # (a null: a key)
        return enc.dictionary, enc.indices.to_numpy().astype(np.int64)
    keys = np.asarray(keys)
    if keys.ndim == 2:
        u, ids = np.unique(_byte_keys(keys), return_inverse=True)
        return u.view(np.uint8).reshape(len(u), keys.shape[1]), ids.astype(np.int64)
    u, ids = np.unique(keys, return_inverse=True)
    return u, ids.astype(np.int64).ravel()


_EXACT = 2 ** 53  # every integer below this magnitude is a float64 exactly


def _string_group(keys, values, how):
    """String keys and 1-D numeric values: ``(unique keys, reduced values)`` of a sum,
    count or mean; None for the other reductions (the general path: sorted ids,
    ``reduceat``). The keys' ids come from Arrow's hash (``dictionary_encode``, first-seen
    order), the per-id counts and sums from ``np.bincount``: each one pass, in the calling
    thread. (Acero's ``group_by`` cost ~4x the CPU on a word count reducer's 300k rows, and
    hands its work to Arrow's thread pool: under load a reducer's merge waited for that pool
    up to ~10x its CPU time.) Integer sums stay exact: where a partial sum could pass 2**53,
    they are summed as integers instead."""
    if how not in ("sum", "count", "mean"):
        return None
    enc = pc.dictionary_encode(as_arrow(keys), null_encoding="encode")
    ids = enc.indices.to_numpy(zero_copy_only=False)
    m = len(enc.dictionary)
    if how == "count":
        return enc.dictionary, np.bincount(ids, minlength=m).astype(np.int64)
    v = np.asarray(values)
    if how == "sum" and v.dtype.kind in "iu" and len(v) and \
            max(-float(v.min()), float(v.max())) * len(v) >= _EXACT:
        # an integer sum that float64 might round: sorted ids and an integer reduceat
        order = np.argsort(ids, kind="stable")
        sids = ids[order]
        starts = np.flatnonzero(np.r_[True, sids[1:] != sids[:-1]])
        acc = np.uint64 if v.dtype.kind == "u" else np.int64
        return enc.dictionary, np.add.reduceat(v[order].astype(acc), starts).astype(v.dtype)
    s = np.bincount(ids, weights=v, minlength=m)
    if how == "mean":
        return enc.dictionary, s / np.bincount(ids, minlength=m)
    return enc.dictionary, s.astype(v.dtype)


def group_reduce(keys, values, how: str):
    """Group ``values`` by ``keys`` and reduce each group (see the module docstring)."""
    n = length(keys)
    if np.ndim(values) == 0 and not is_arrow(values) and how in ("sum", "count"):
        if is_stringy(keys):  # emit(words, 1): a count per key, times the value
            vc = pc.value_counts(as_arrow(keys))
            counts = vc.field("counts").to_numpy().astype(np.int64)
            return vc.field("values"), counts if how == "count" else counts * values
        u, ids = group_ids(keys)
        counts = np.bincount(ids, minlength=length(u)).astype(np.int64)
        return u, counts if how == "count" else counts * values
    values = broadcast(values, n)
    if is_stringy(keys) and not is_arrow(values) and values.ndim == 1 \
            and values.dtype.kind in "iufb":
        out = _string_group(keys, values, how)
        if out is not None:
            return out
    u, ids = group_ids(keys)
    m = length(u)
    order = np.argsort(ids, kind="stable")
    sids = ids[order]
    starts = np.flatnonzero(np.r_[True, sids[1:] != sids[:-1]]) if n else np.zeros(0, int)
    counts = np.diff(np.r_[starts, n])
    sorted_vals = take(values, order)
    if how == "count":
        return u, counts.astype(np.int64)
    if how == "collect":
        offsets = np.r_[0, np.cumsum(counts)].astype(np.int32)
        return u, pa.ListArray.from_arrays(pa.array(offsets), as_arrow(sorted_vals))
    if how == "collect_set":
        vals = np.asarray(to_numpy(values))
        order = np.lexsort((vals, ids))
        sv, si = vals[order], ids[order]
        keep = np.r_[True, (si[1:] != si[:-1]) | (sv[1:] != sv[:-1])] if n else np.zeros(0, bool)
        sv, si = sv[keep], si[keep]
        offsets = np.searchsorted(si, np.arange(m + 1)).astype(np.int32)
        return u, pa.ListArray.from_arrays(pa.array(offsets), as_arrow(sv))
    if how == "first":
        return u, take(sorted_vals, starts)
    v = np.asarray(sorted_vals)
    if m == 0:
        return u, v[:0]
    if how in ("sum", "mean"):
        acc = v.dtype if v.dtype.kind == "f" else np.int64 if v.dtype.kind in "iub" else v.dtype
        s = np.add.reduceat(v.astype(acc, copy=False), starts, axis=0)
        if how == "sum":
            return u, s
        return u, s / counts.reshape((-1,) + (1,) * (v.ndim - 1))
    if how in ("min", "max"):
        return u, (np.minimum if how == "min" else np.maximum).reduceat(v, starts, axis=0)
    raise errors.InvalidArgumentError(f"unknown reduction {how!r}; built-ins: {REDUCTIONS}")


def partition(keys, values, num: int, how: str = "hash", boundaries=()) -> list:
    """Cut ``(keys, values)`` into ``num`` buckets: by hash, or by ``boundaries`` (sorted,
    ``num - 1`` of them; bucket ``r`` gets ``boundaries[r-1] <= key < boundaries[r]``)."""
    n = length(keys)
    if how == "hash":
        b = (key_hash(keys) % np.uint64(num)).astype(np.int64)
    else:
        if is_stringy(keys):
            ks, bs = to_numpy(keys), np.asarray(list(boundaries), dtype=object)
        elif np.ndim(keys) == 2:
            ks = _byte_keys(np.asarray(keys))
            bs = np.array([bytes(x) for x in boundaries], dtype=ks.dtype)
        else:
            ks, bs = np.asarray(keys), np.asarray(list(boundaries), dtype=np.asarray(keys).dtype)
        b = np.searchsorted(bs, ks, side="right").astype(np.int64)
    if num <= 1 << 16:  # small bucket ids: NumPy's stable sort is a radix sort then
        b = b.astype(np.uint8 if num <= 256 else np.uint16)
    order = np.argsort(b, kind="stable")
    bounds = np.searchsorted(b[order], np.arange(num + 1))
    k_sorted, v_sorted = take(keys, order), take(broadcast(values, n) if np.ndim(values) else
                                                  values, order)
    out = []
    for r in range(num):
        lo, hi = int(bounds[r]), int(bounds[r + 1])
        k = k_sorted.slice(lo, hi - lo) if is_arrow(k_sorted) else k_sorted[lo:hi]
        if np.ndim(values) == 0 and not is_arrow(values):
            v = values
        else:
            v = v_sorted.slice(lo, hi - lo) if is_arrow(v_sorted) else v_sorted[lo:hi]
        out.append((k, v))
    return out
