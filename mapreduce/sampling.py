"""TeraSort's sampler: the ``R - 1`` boundaries of a range partition from a sample of map-output
keys, read from the first bytes of up to ten splits (in process, on the driver)."""
from __future__ import annotations

import dataclasses

import numpy as np

import tensorvm as tv

from .api import CounterSink
from .common import call_user

SAMPLE_SPLITS = 10


def _head(split, nbytes: int, record_bytes: int | None):
    """The first ``nbytes`` of a byte-range split (whole records), or the split itself."""
    if split.end is None or split.row_groups is not None or split.row_start is not None:
        return split
    if record_bytes:
        nbytes = max(1, nbytes // record_bytes) * record_bytes
    return dataclasses.replace(split, end=min(split.end, split.start + nbytes))


def sample_keys(job, splits: list, sample: int) -> np.ndarray:
    """Map-output keys of the sampled records (after the map, before any combiner)."""
    splits = [sp for i, sp in splits if i == 0]  # the first input's keys
    step = max(1, len(splits) // SAMPLE_SPLITS)
    chosen = splits[::step][:SAMPLE_SPLITS]
    rb = job.input.options.record_bytes
    per_split = max(1, sample // max(1, len(chosen))) * (rb or 100)
    heads = [_head(s, per_split, rb) for s in chosen]
    graph = tv.Graph()
    with graph.as_default():
        records, _ = job._read([(0, h) for h in heads], "sample_read")
        em = call_user(job.maps[0], [records], "map", CounterSink())
    with tv.Session(graph=graph) as s:
        return np.asarray(s.run(em.keys))


def boundaries_of(keys: np.ndarray, num_reducers: int) -> tuple:
    """``num_reducers - 1`` quantiles of ``keys`` (sorted as the partition op compares)."""
    if keys.ndim == 2:  # byte records: compare as unsigned bytes
        s = np.sort(np.ascontiguousarray(keys).view(f"S{keys.shape[1]}").ravel())
        picks = [s[int(len(s) * r / num_reducers)] for r in range(1, num_reducers)]
        return tuple(bytes(p).ljust(keys.shape[1], b"\0") for p in picks)
    s = np.sort(keys)
    if len(s) == 0:
        return tuple([s.dtype.type()] * (num_reducers - 1)) if s.dtype.kind != "O" else \
            ("",) * (num_reducers - 1)
    return tuple(s[int(len(s) * r / num_reducers)].item() if hasattr(s[0], "item") else
                 s[int(len(s) * r / num_reducers)] for r in range(1, num_reducers))


def sample_boundaries(job, splits: list, sample: int) -> tuple:
    return boundaries_of(sample_keys(job, splits, sample), job.num_reducers)
