"""Reading a group of input splits into one map task's records, with the job's bad-record
policy (skip up to ``skip`` bad records, counted; else fail naming the URL and byte offset).
Used by the ``MRReadSplits`` op of :mod:`tensorvm.ops.mapreduce_ops`."""
from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .. import errors, storage
from .mr_values import as_arrow, concat, is_arrow, length

__all__: list[str] = []


def _bad_record(split, offset, what, skip_left):
    where = f"{split.url} at byte offset {offset} (split {split.id})"
    if skip_left <= 0:
        raise errors.DataLossError(f"bad record in {where}: {what}")


def _first_line_start(split) -> int:
    if split.start == 0:
        return 0
    fs, path = storage.fsio.to_fs(split.url)
    with fs.open(path, "rb") as f:
        f.seek(split.start - 1)
        pos = split.start - 1
        while True:
            chunk = f.read(1 << 16)
            if not chunk:
                return pos
            i = chunk.find(b"\n")
            if i >= 0:
                return pos + i + 1
            pos += len(chunk)


def _read_text_checked(split, skip: int) -> tuple:
    """Lines of a text split; undecodable lines are skipped (up to ``skip``) and counted, or
    fail naming the URL and byte offset. The check runs only on a block that failed."""
    raw_split = storage.Split.from_dict({**split.to_dict(), "options_json": json.dumps(
        {**split.options, "encoding": None}, sort_keys=True, separators=(",", ":"))})
    raw = pa.concat_arrays([pa.array(b) if not is_arrow(b) else b
                            for b in storage.read(raw_split)] or [pa.array([], pa.binary())])
    try:
        return raw.cast(pa.large_string()), 0
    except (pa.ArrowInvalid, UnicodeDecodeError):
        pass
    lens = pc.binary_length(raw).to_numpy()
    offsets = _first_line_start(split) + np.r_[0, np.cumsum(lens + 1)[:-1]]
    ok = np.ones(len(raw), bool)
    for i, line in enumerate(raw.to_pylist()):  # the bad block only: find which lines
        try:
            line.decode("utf-8")
        except UnicodeDecodeError as e:
            ok[i] = False
            _bad_record(split, int(offsets[i]) + e.start, f"invalid UTF-8 ({e.reason})",
                        skip - int((~ok).sum()) + 1)
    return pc.filter(raw, pa.array(ok)).cast(pa.large_string()), int((~ok).sum())


def _read_fixed_group(splits: list, dtype):
    """Uncompressed fixed-length records of uint8 (TeraSort's): read into one array (no
    concatenation of batches), or None for other splits or on an error (the general path then
    reads them, skipping or naming bad records)."""
    if not splits or dtype.np_dtype != np.uint8 or any(
            s.format != "fixed" or s.compression is not None or s.end is None for s in splits):
        return None
    try:
        return storage.readers.read_fixed_into(splits)
    except (storage.DataLossError, FileNotFoundError, ValueError):
        return None


def read_split_group(splits: tuple, columns: tuple, dtype, skip: int):
    """The records of several splits and ``counters = [records, bytes, bad records]``."""
    if not columns:
        recs = _read_fixed_group([storage.Split.from_dict(json.loads(t)) for t in splits], dtype)
        if recs is not None:
            return recs, np.array([len(recs), recs.nbytes, 0], np.int64)
    parts, cols, nbad, nbytes_in = [], {c: [] for c, _ in columns}, 0, 0
    for text in splits:
        s = storage.Split.from_dict(json.loads(text))
        nbytes_in += (s.end - s.start) if s.end is not None else 0
        try:
            if s.format == "text" and not columns:
                lines, bad = _read_text_checked(s, skip - nbad)
                parts.append(lines)
                nbad += bad
                continue
            batches = list(storage.read(s))
        except storage.DataLossError as e:
            if skip - nbad <= 0:
                raise errors.DataLossError(f"bad record in split {s.id}: {e}") from e
            nbad += 1  # a corrupt tabular block is skipped whole (counted as one)
            continue
        except FileNotFoundError as e:
            raise errors.NotFoundError(f"reading split {s.id}: {e}") from e
        if columns:
            for b in batches:
                for c, _ in columns:
                    cols[c].append(b.column(c))
        else:
            parts.extend(batches)
    counters_extra = np.array([nbad, nbytes_in], np.int64)
    if columns:
        out = []
        for c, dt in columns:
            col = concat([as_arrow(x) for x in cols[c]]) if cols[c] else \
                pa.array([], pa.large_string() if dt.is_string else pa.from_numpy_dtype(
                    dt.np_dtype))
            out.append(col if dt.is_string else col.to_numpy(zero_copy_only=False).astype(
                dt.np_dtype, copy=False))
        n = len(out[0]) if out else 0
        return (*out, np.r_[np.int64(n), counters_extra[1], counters_extra[0]])
    if dtype.is_string:
        recs = concat(parts) if parts else pa.array([], pa.large_string())
    elif parts:
        recs = (np.concatenate([np.asarray(p) for p in parts]) if len(parts) > 1 else
                np.asarray(parts[0])).astype(dtype.np_dtype, copy=False)
    else:
        recs = np.zeros((0,), dtype.np_dtype)
    return recs, np.array([length(recs), nbytes_in, nbad], np.int64)
