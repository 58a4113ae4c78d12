"""The pieces a job is made of: inputs, ``emit``, partitioners, outputs and user counters.

All of them are plain frozen values; :class:`tensorvm.mapreduce.Job` turns them into a graph.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

import tensorvm as tv
from tensorvm.framework import dtypes as _dt
from tensorvm.framework import errors
from tensorvm import storage

__all__ = ["Input", "text", "csv", "jsonl", "parquet", "npy", "records", "Emit", "emit",
           "HashPartition", "RangePartition", "hash_partition", "range_partition", "Output",
           "text_output", "jsonl_output", "parquet_output", "npy_output", "records_output",
           "filter", "counter", "py_map"]


# ---- inputs ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Input:
    """Input files and how the map function sees their records.

    ``format``: a :mod:`tensorvm.storage` input format; ``columns``: ``{name: dtype}`` for
    tabular formats (the map gets a dict of 1-D tensors); ``dtype``/``shape``: the records'
    tensor otherwise (text: ``string [None]``; fixed records: ``uint8 [None, record_bytes]``).
    ``options``: how the files are read (:class:`tensorvm.storage.ReadOptions`).
    """
    urls: tuple
    format: str
    split_size: int = storage.DEFAULT_SPLIT_SIZE
    options: storage.ReadOptions = storage.ReadOptions()
    columns: tuple = ()
    dtype: Any = _dt.string
    shape: tuple | None = (None,)

    def splits(self) -> list:
        """The input cut into splits (``tensorvm.storage.Split``), as a job reads them."""
        return storage.splits(list(self.urls), format=self.format, split_size=self.split_size,
                              **self.options.to_dict())


def _urls(urls) -> tuple:
    return (urls,) if isinstance(urls, str) else tuple(urls)


def text(urls, split_size: int = storage.DEFAULT_SPLIT_SIZE) -> Input:
    """Lines of text files (UTF-8): the map gets a 1-D string tensor of lines."""
    return Input(_urls(urls), "text", int(split_size))


def records(urls, record_bytes: int, split_size: int = storage.DEFAULT_SPLIT_SIZE) -> Input:
    """Fixed-length binary records: the map gets ``uint8 [n, record_bytes]``."""
    opts = _options("records", record_bytes=int(record_bytes))
    return Input(_urls(urls), "fixed", int(split_size), opts, dtype=_dt.uint8,
                 shape=(None, opts.record_bytes))


def _options(fn: str, **options) -> storage.ReadOptions:
    """``options`` checked when the input is made (a misspelt or bad one is named here)."""
    try:
        return storage.ReadOptions.of(**options)
    except ValueError as e:
        raise errors.InvalidArgumentError(f"mr.{fn}: {e}") from None


def _tabular(fmt, urls, columns, split_size, **options) -> Input:
    if not columns:
        raise errors.InvalidArgumentError(f"mr.{fmt}: give columns={{name: dtype}}")
    cols = tuple((k, _dt.as_dtype(v)) for k, v in dict(columns).items())
    return Input(_urls(urls), fmt, int(split_size), _options(fmt, **options), cols, None, None)


def csv(urls, columns: dict, split_size: int = storage.DEFAULT_SPLIT_SIZE, **options) -> Input:
    """CSV rows (``header``, ``delimiter`` … as :func:`tensorvm.storage.splits`)."""
    return _tabular("csv", urls, columns, split_size, **options)


def jsonl(urls, columns: dict, split_size: int = storage.DEFAULT_SPLIT_SIZE) -> Input:
    """JSON lines: the map gets a dict of ``columns`` (``{name: dtype}``), one 1-D tensor each;
    a line that does not parse, or lacks a field or has one of the wrong type, is a bad record.

    >>> import fsspec, tensorvm.mapreduce as mr
    >>> lines = b'{"w": "a", "n": 2}\\n{"w": "b", "n": 5}\\n{"w": "a", "n": 1}\\n'
    >>> fsspec.filesystem("memory").pipe("/tvm-doc-jsonl/a.jsonl", lines)
    >>> job = mr.Job(input=mr.jsonl("memory://tvm-doc-jsonl/a.jsonl",
    ...                             {"w": "string", "n": "int64"}),
    ...              map=lambda cols: mr.emit(cols["w"], cols["n"]), reduce="sum", num_reducers=1)
    >>> sorted(job.run().to_dict().items())
    [('a', 3), ('b', 5)]
    """
    return _tabular("jsonl", urls, columns, split_size)


def parquet(urls, columns: dict, split_size: int = storage.DEFAULT_SPLIT_SIZE) -> Input:
    """Parquet files, split by row group: the map gets a dict of ``columns``
    (``{name: dtype}``), one 1-D tensor each."""
    return _tabular("parquet", urls, columns, split_size)


def npy(urls, dtype, split_size: int = storage.DEFAULT_SPLIT_SIZE, shape=None) -> Input:
    """Rows of ``.npy`` files."""
    return Input(_urls(urls), "npy", int(split_size), dtype=_dt.as_dtype(dtype),
                 shape=tuple(shape) if shape is not None else None)


# ---- emit ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Emit:
    """What a map (or combine/reduce function) produces: keys and their values."""
    keys: Any
    values: Any


def emit(keys, values=1) -> Emit:
    """Emit ``values[i]`` under ``keys[i]`` (a scalar value goes with every key).

    ``keys`` may be the ``(tokens, row_ids)`` pair of ``tv.strings.split``: the tokens are
    the keys. ``mr.emit(tv.strings.split(lines), 1)`` is word count's map.
    """
    if isinstance(keys, (tuple, list)):
        keys = keys[0]
    return Emit(tv.convert_to_tensor(keys), tv.convert_to_tensor(values))


def as_emit(out, what: str) -> Emit:
    if isinstance(out, Emit):
        return out
    if isinstance(out, (tuple, list)) and len(out) == 2:
        return emit(out[0], out[1])
    raise errors.InvalidArgumentError(f"the {what} function must return mr.emit(keys, values) "
                                      f"or a (keys, values) pair, got {type(out).__name__}")


def py_map(fn, key_dtype, value_dtype):
    """A map function written in Python/NumPy: ``fn(records) -> (keys, values)`` over a whole
    batch of records as NumPy (strings as an object array), run through ``tv.py_func``.

    >>> to_pairs = py_map(lambda lines: (lines, [len(x) for x in lines]), tv.string, tv.int64)
    """
    import numpy as np
    kd, vd = _dt.as_dtype(key_dtype), _dt.as_dtype(value_dtype)

    def as_array(x, dt, what):
        if dt.is_string:
            out = np.asarray(x, dtype=object)
            for i, item in enumerate(out.ravel()):  # name the first non-string, here
                if not isinstance(item, (str, bytes)):
                    raise TypeError(f"py_map: {what} {i} is {type(item).__name__} "
                                    f"{item!r}, but the {what}s' dtype is string (convert "
                                    f"them, or declare another {what}_dtype)")
            return out
        return np.asarray(x).astype(dt.np_dtype, copy=False)

    def run(records):
        from tensorvm.ops.mapreduce import mapreduce_ops as mro
        k, v = fn(mro.to_numpy(records))
        return as_array(k, kd, "key"), as_array(v, vd, "value")

    def map_fn(records):
        k, v = tv.py_func(run, [records], [kd, vd], stateful=False)
        return Emit(k, v)
    return map_fn


# ---- partitioners ----------------------------------------------------------------------------
@dataclass(frozen=True)
class HashPartition:
    """Bucket ``hash(key) % R`` (strings: ``tv.strings.to_hash_bucket_fast``'s hash).
    ``mr.hash_partition`` and ``mr.hash_partition()`` are the same value, as
    ``partition=mr.range_partition`` and ``mr.range_partition()`` are."""
    how: str = "hash"

    def __call__(self) -> "HashPartition":
        return self


@dataclass(frozen=True)
class RangePartition:
    """Total order: bucket ``r`` holds keys in ``[boundaries[r-1], boundaries[r])``.
    Without ``boundaries``, ``sample`` map-output keys (from the first bytes of up to ten
    splits, TeraSort's sampler) give the ``R - 1`` quantiles."""
    sample: int = 10000
    boundaries: tuple | None = None
    how: str = "range"


hash_partition = HashPartition()


def range_partition(sample: int = 10000, boundaries=None) -> RangePartition:
    """A :class:`RangePartition` (a total order over the reducers' outputs, as TeraSort's):
    the given ``boundaries``, else quantiles of ``sample`` sampled keys."""
    return RangePartition(int(sample), None if boundaries is None else tuple(boundaries))


# ---- outputs ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class Output:
    """Committed output: ``<url>/part-r-00000…`` then ``_SUCCESS`` (Hadoop's committer)."""
    url: str
    format: str = "text"
    sep: str = "\t"
    overwrite: bool = False


def text_output(url: str, sep: str = "\t", overwrite: bool = False) -> Output:
    """``key<sep>value`` lines (values: lists joined by ``,``, rows by spaces)."""
    return Output(url, "text", sep, overwrite)


def jsonl_output(url: str, overwrite: bool = False) -> Output:
    """One JSON object per output record, ``{"key": ..., "value": ...}``."""
    return Output(url, "jsonl", overwrite=overwrite)


def parquet_output(url: str, overwrite: bool = False) -> Output:
    """Parquet files with ``key`` and ``value`` columns, one per reducer."""
    return Output(url, "parquet", overwrite=overwrite)


def records_output(url: str, overwrite: bool = False) -> Output:
    """The values only, as raw fixed-width records (``uint8 [n, w]``), one file per reducer:
    TeraSort's output."""
    return Output(url, "records", overwrite=overwrite)


def filter(x, mask):
    """``x[mask]`` (1-D bool ``mask``), keeping Arrow strings Arrow (``tv.boolean_mask``
    would copy them to Python objects)."""
    from tensorvm.framework.op_def_library import apply_op
    return apply_op("MRFilter", [x, mask], {}, name="filter").outputs[0]


def npy_output(url: str, overwrite: bool = False) -> Output:
    """The values only, one ``.npy`` per reducer (e.g. sorted fixed-width records)."""
    return Output(url, "npy", overwrite=overwrite)


# ---- user counters ---------------------------------------------------------------------------
_BUILDING = threading.local()


@dataclass
class CounterSink:
    """Where ``mr.counter(name).add(n)`` puts its tensors while a job's graph is built."""
    items: list = field(default_factory=list)

    def __enter__(self):
        stack = getattr(_BUILDING, "stack", None)
        if stack is None:
            stack = _BUILDING.stack = []
        stack.append(self)
        return self

    def __exit__(self, *exc):
        _BUILDING.stack.pop()


@dataclass(frozen=True)
class Counter:
    name: str

    def add(self, n) -> None:
        """Add ``n`` (a tensor or number; summed if it has elements) to this counter."""
        stack = getattr(_BUILDING, "stack", None)
        if not stack:
            raise errors.FailedPreconditionError(
                f"mr.counter({self.name!r}).add(...) must be called inside a map, combine or "
                f"reduce function while the job is built")
        t = tv.convert_to_tensor(n)
        if t.dtype != _dt.int64:
            t = tv.cast(t, tv.int64)
        stack[-1].items.append((self.name, tv.reduce_sum(t)))


def counter(name: str) -> Counter:
    """A user counter, summed over all tasks and returned in ``Result.counters``."""
    return Counter(str(name))
