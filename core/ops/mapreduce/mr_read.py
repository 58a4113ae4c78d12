"""Reading a group of input splits into one map task's records, with the job's bad-record
policy (skip up to ``skip`` bad records, counted; else fail naming the URL and byte offset).
Used by the ``MRReadSplits`` op of :mod:`tensorvm.ops.mapreduce.mapreduce_ops`.

Tabular splits are read and typed vectorised (Arrow); only a split that fails — a line that
is not JSON, a missing field, a value its column cannot hold without loss — is read again
record by record, to skip or name exactly its bad records (one bad line is one bad record;
a missing number is never a made-up one). CSV columns are parsed as the job declares them."""
from __future__ import annotations

import csv as _csv
import json
from dataclasses import replace

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ... import storage
from ...storage.lines import first_line_start
from ...framework import errors
from .mr_values import as_arrow, concat, is_arrow, length

__all__: list[str] = []


def _bad_record(split, offset, what, skip_left):
    where = f"{split.url} at byte offset {offset} (split {split.id})"
    if skip_left <= 0:
        raise errors.DataLossError(f"bad record in {where}: {what}")


def _first_line_start(split) -> int:
    """Where ``split``'s first owned line starts in its file (storage's line rule)."""
    if split.start == 0:
        return 0
    fs, path = storage.fsio.to_fs(split.url)
    with fs.open(path, "rb") as f:
        return first_line_start(f, split.start)


def _raw_lines(split):
    """The owned lines of ``split`` as bytes (a binary Arrow array) and each one's byte offset
    in its file (the failure paths: finding which records are bad)."""
    raw_split = replace(split, format="text").with_options(encoding=None)
    raw = pa.concat_arrays([pa.array(b) if not is_arrow(b) else b
                            for b in storage.read(raw_split)] or [pa.array([], pa.binary())])
    lens = pc.binary_length(raw).to_numpy()
    offsets = _first_line_start(split) + np.r_[0, np.cumsum(lens + 1)[:-1]]
    return raw, offsets.astype(np.int64)


def _read_text_checked(split, skip: int) -> tuple:
    """Lines of a text split; undecodable lines are skipped (up to ``skip``) and counted, or
    fail naming the URL and byte offset. The check runs only on a block that failed."""
    raw, offsets = _raw_lines(split)
    try:
        return raw.cast(pa.large_string()), 0
    except (pa.ArrowInvalid, UnicodeDecodeError):
        pass
    ok = np.ones(len(raw), bool)
    for i, line in enumerate(raw.to_pylist()):  # the bad block only: find which lines
        try:
            line.decode("utf-8")
        except UnicodeDecodeError as e:
            ok[i] = False
            _bad_record(split, int(offsets[i]) + e.start, f"invalid UTF-8 ({e.reason})",
                        skip - int((~ok).sum()) + 1)
    return pc.filter(raw, pa.array(ok)).cast(pa.large_string()), int((~ok).sum())


# ---- tabular records: typed columns, bad records one by one -----------------------------------
class _BadColumns(Exception):
    """A split's batches hold a value its declared columns cannot take (a missing field, a
    null, a lossy cast): the split is read again record by record."""


def _typed_columns(batches, columns) -> list:
    """Each declared column of ``batches`` in its dtype (Arrow strings, NumPy numbers), or
    :class:`_BadColumns` when a value does not fit (checked vectorised, per batch)."""
    out = []
    for c, dt in columns:
        parts = []
        for b in batches:
            i = b.schema.get_field_index(c)
            if i < 0:
                raise _BadColumns(c)
            col = b.column(i)
            if col.null_count:
                raise _BadColumns(c)
            if dt.is_string:
                if not (pa.types.is_string(col.type) or pa.types.is_large_string(col.type)):
                    raise _BadColumns(c)
                parts.append(col)
                continue
            try:  # safe: a fraction or an overflow into an integer is a bad value; floats
                # round as NumPy's astype does
                col = pc.cast(col, pa.from_numpy_dtype(dt.np_dtype),
                              safe=dt.np_dtype.kind in "biu")
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
                raise _BadColumns(c) from e
            parts.append(col.to_numpy(zero_copy_only=False))
        if dt.is_string:
            out.append(concat([as_arrow(x) for x in parts]) if parts else
                       pa.array([], pa.large_string()))
        else:
            out.append(parts[0] if len(parts) == 1 else
                       np.concatenate(parts) if parts else np.zeros((0,), dt.np_dtype))
    return out


def _with_declared_types(split, columns):
    """A CSV split read with the job's declared column types (unless its options give some):
    a string column of digits stays text, and an empty number field is a null, not a guess."""
    if split.format != "csv" or split.options.column_types:
        return split
    return split.with_options(column_types={c: dt.name for c, dt in columns})


def _an(name: str) -> str:
    return ("an " if name[0] in "aeiou" else "a ") + name


def _field(record: dict, name: str, dt, from_text: bool):
    """``record[name]`` as a value of ``dt``, or a ValueError saying why it is not one. JSON
    values must have the column's kind (a number for numbers, a string for strings); CSV
    fields are parsed from their text."""
    v = record.get(name)
    if v is None or (from_text and v == "" and not dt.is_string):
        raise ValueError(f"no field {name!r}")
    bad = ValueError(f"field {name!r} is {v!r}, not {_an(dt.name)}")
    kind = dt.np_dtype.kind
    if dt.is_string:
        if not isinstance(v, str):
            raise bad
        return v
    if from_text:
        try:
            v = (v.strip().lower() in ("1", "true")) if kind == "b" else \
                (int(v) if kind in "iu" else float(v))
        except ValueError:
            raise bad from None
    if kind == "b":
        if not isinstance(v, bool):
            raise bad
        return v
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise bad
    if kind in "iu":
        if isinstance(v, float):
            if not v.is_integer():
                raise bad
            v = int(v)
        info = np.iinfo(dt.np_dtype)
        if not info.min <= v <= info.max:
            raise bad
    return v


def _line_record(split, line: bytes, names):
    """One line of a JSON-lines or CSV split as a dict (ValueError when it is not one)."""
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ValueError(f"invalid UTF-8 ({e.reason})") from None
    if split.format == "jsonl":
        try:
            rec = json.loads(text)
        except ValueError:
            rec = None
        if not isinstance(rec, dict):
            raise ValueError("not a JSON object")
        return rec
    row = next(_csv.reader([text], delimiter=split.options.delimiter), [])
    if names and len(row) != len(names):
        raise ValueError(f"{len(row)} fields, the header names {len(names)}")
    return dict(zip(names, row))


def _read_lines_checked(split, columns, skip: int) -> tuple:
    """The declared columns of a JSON-lines or CSV split read record by record (the failure
    path): a bad record is skipped and counted (up to ``skip``) or fails naming the URL, the
    byte offset and what is wrong with it."""
    raw, offsets = _raw_lines(split)
    lines, offsets = raw.to_pylist(), offsets.tolist()
    names = split.options.column_names or ()
    if split.format == "csv" and split.options.header and split.start == 0:
        lines, offsets = lines[1:], offsets[1:]
    values = [[] for _ in columns]
    nbad = 0
    for line, off in zip(lines, offsets):
        if not line.strip():
            continue
        try:
            rec = _line_record(split, line, names)
            row = [_field(rec, c, dt, split.format == "csv") for c, dt in columns]
        except ValueError as e:
            _bad_record(split, off, str(e), skip - nbad)
            nbad += 1
            continue
        for vs, v in zip(values, row):
            vs.append(v)
    out = [pa.array(vs, pa.large_string()) if dt.is_string else np.array(vs, dt.np_dtype)
           for vs, (_, dt) in zip(values, columns)]
    return out, nbad


def _drop_null_rows(split, batches, columns, skip: int) -> tuple:
    """A split of a format without lines (Parquet): rows with a missing value in a declared
    column are bad records, skipped and counted (up to ``skip``) or named by row."""
    table = pa.Table.from_batches(batches) if batches else None
    if table is None:
        return _typed_columns([], columns), 0
    for c, _ in columns:
        if c not in table.column_names:
            raise errors.DataLossError(f"bad record in {split.url} (split {split.id}): no "
                                       f"column {c!r} (it has {table.column_names})")
    ok = np.ones(table.num_rows, bool)
    for c, _ in columns:
        ok &= pc.is_valid(table.column(c)).to_numpy(zero_copy_only=False)
    nbad = int((~ok).sum())
    if nbad > skip:
        row = int(np.flatnonzero(~ok)[skip])
        missing = [c for c, _ in columns if not table.column(c)[row].is_valid]
        raise errors.DataLossError(f"bad record in {split.url} at row {row} (split "
                                   f"{split.id}): no field {missing[0]!r}")
    table = table.filter(pa.array(ok))
    try:
        return _typed_columns(table.to_batches(), columns), nbad
    except _BadColumns as e:
        c = str(e)
        dt = dict(columns)[c]
        raise errors.DataLossError(
            f"bad records in {split.url} (split {split.id}): column {c!r} of type "
            f"{table.column(c).type} does not fit {dt.name}") from None


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


def _check_cast(split, batch, dtype) -> None:
    """Rows of a NumPy file are read as the job declares them only when no value can change
    (int32 as int64, float32 as float64); anything else is the job's mistake, named."""
    if isinstance(batch, np.ndarray) and not dtype.is_string and \
            not np.can_cast(batch.dtype, dtype.np_dtype, casting="safe"):
        raise errors.InvalidArgumentError(
            f"{split.url} holds {batch.dtype} rows, the job reads {dtype.name}: declare "
            f"mr.npy(..., tv.{batch.dtype}) or convert the file")


def read_split_group(splits: tuple, columns: tuple, dtype, skip: int):
    """The records of several splits (:class:`tensorvm.storage.Split` values) and
    ``counters = [records, bytes, bad records]``."""
    if not columns:
        recs = _read_fixed_group(list(splits), dtype)
        if recs is not None:
            return recs, np.array([len(recs), recs.nbytes, 0], np.int64)
    parts, cols, nbad, nbytes_in = [], [[] for _ in columns], 0, 0
    for s in splits:
        if columns:
            s = _with_declared_types(s, columns)
        nbytes_in += (s.end - s.start) if s.end is not None else 0
        try:
            if s.format == "text" and not columns:
                lines, bad = _read_text_checked(s, skip - nbad)
                parts.append(lines)
                nbad += bad
                continue
            batches = list(storage.read(s))
            if columns:
                typed, bad = _typed_columns(batches, columns), 0
        except (storage.DataLossError, _BadColumns) as e:
            if columns and s.format in ("jsonl", "csv"):  # find the bad records, one by one
                typed, bad = _read_lines_checked(s, columns, skip - nbad)
            elif isinstance(e, _BadColumns):
                typed, bad = _drop_null_rows(s, batches, columns, skip - nbad)
            elif skip - nbad <= 0:
                raise errors.DataLossError(f"bad record in split {s.id}: {e}") from e
            else:
                nbad += 1  # a corrupt block without records to tell apart: skipped, as one
                continue
        except FileNotFoundError as e:
            raise errors.NotFoundError(f"reading split {s.id}: {e}") from e
        if columns:
            for acc, col in zip(cols, typed):
                acc.append(col)
            nbad += bad
        else:
            for b in batches:
                _check_cast(s, b, dtype)
            parts.extend(batches)
    if columns:
        out = []
        for acc, (c, dt) in zip(cols, columns):
            if dt.is_string:
                out.append(concat([as_arrow(x) for x in acc]) if acc else
                           pa.array([], pa.large_string()))
            else:
                out.append(np.concatenate(acc).astype(dt.np_dtype, copy=False) if acc else
                           np.zeros((0,), dt.np_dtype))
        n = len(out[0]) if out else 0
        return (*out, np.array([n, nbytes_in, nbad], np.int64))
    if dtype.is_string:
        recs = concat(parts) if parts else pa.array([], pa.large_string())
    elif parts:
        recs = (np.concatenate([np.asarray(p) for p in parts]) if len(parts) > 1 else
                np.asarray(parts[0])).astype(dtype.np_dtype, copy=False)
    else:
        recs = np.zeros((0,), dtype.np_dtype)
    return recs, np.array([length(recs), nbytes_in, nbad], np.int64)
