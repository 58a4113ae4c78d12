"""CSV input for ``tv.data``: ``tf.data.experimental.CsvDataset`` and ``make_csv_dataset`` (TF
1.15's construction, step by step).

Design
------
``CsvDataset`` is the lines of each file (its header skipped) cut into blocks of
:data:`LINES_PER_BATCH`, each block parsed by one ``decode_csv`` op and unbatched: the parse
is vectorised over the block, never a traced call per line. (A quoted field that spans lines
is not supported: each line is a record.)

``make_csv_dataset`` reads the header row (the column names) and, without
``column_defaults``, the first ``num_rows_for_inference`` rows (each column's type: the least
permissive of int32, int64, float32, float64, string that holds every value, as TF's
``_infer_type``) when the graph is built, then builds TF's pipeline: the files (shuffled
unless ``shuffle=False``) interleaved ``num_parallel_reads`` at a time, ``shuffle_and_repeat``
(or ``repeat``), ``batch`` (remainder dropped when ``num_epochs`` is None, as TF), and a map
to ``(features, label)`` dicts.

>>> import fsspec, tensorvm as tv
>>> fsspec.filesystem("memory").pipe("/doc/a.csv", b"x,y\\n1,2.5\\n3,4.5\\n")
>>> ds = tv.data.experimental.make_csv_dataset("memory://doc/a.csv", 2, label_name="y",
...                                            shuffle=False, num_epochs=1)
>>> feats, label = ds.make_one_shot_iterator().get_next()
>>> with tv.Session() as s:
...     f, l = s.run([feats, label])
>>> f["x"].tolist(), l.tolist()
([1, 3], [2.5, 4.5])
"""
from __future__ import annotations

import csv
import io

import numpy as np

from ...framework import dtypes as _dt
from ...framework.graph import Tensor
from ...framework.tensor_conversion import convert_to_tensor

__all__: list[str] = []  # reached through tv.data.experimental

LINES_PER_BATCH = 4096  # lines parsed by one decode_csv


def _required(d):
    """A record default: a dtype (a required column) becomes an empty tensor of it."""
    if not isinstance(d, (_dt.DType, np.dtype)):
        return d
    t = _dt.as_dtype(d)
    return convert_to_tensor(np.zeros([0], object if t == _dt.string else t.np_dtype),
                             dtype=t)


def csv_dataset(filenames, record_defaults, compression_type=None, buffer_size=None,
                header=False, field_delim=",", use_quote_delim=True, na_value="",
                select_cols=None):
    """``tf.data.experimental.CsvDataset``: a tuple of one scalar per (selected) column for
    every record of the files; ``record_defaults`` give each column's dtype and its default
    (a dtype, or an empty tensor: the column is required)."""
    from .dataset_files import TextLineDataset
    from .dataset_ops import Dataset
    from ..readers.parsing_ops import decode_csv
    defaults = [_required(d) for d in record_defaults]
    files = filenames if isinstance(filenames, Tensor) else \
        convert_to_tensor(np.asarray(filenames, dtype=object))

    def lines_of(f):
        lines = TextLineDataset(f, compression_type, buffer_size)
        return lines.skip(1) if header else lines
    lines = Dataset.from_tensor_slices(_vector(files)).flat_map(lines_of)

    def parse(block):
        return tuple(decode_csv(block, defaults, field_delim, use_quote_delim,
                                na_value=na_value, select_cols=select_cols))
    return lines.batch(LINES_PER_BATCH).map(parse).unbatch()


def _vector(t):
    from ..array.array_ops import reshape
    return reshape(t, [-1])


# ---- make_csv_dataset --------------------------------------------------------------------------

def _open_text(url: str, compression_type):
    from fsspec.core import url_to_fs
    fs, path = url_to_fs(url)
    kind = (compression_type or "").upper()
    with fs.open(path, "rb", compression="gzip" if kind == "GZIP" else None) as f:
        data = f.read()
    if kind == "ZLIB":
        import zlib
        data = zlib.decompress(data)
    return io.StringIO(data.decode("utf-8"))


def _rows(url, field_delim, use_quote_delim, compression_type):
    reader = csv.reader(_open_text(url, compression_type), delimiter=field_delim,
                        quoting=csv.QUOTE_MINIMAL if use_quote_delim else csv.QUOTE_NONE)
    return reader


def _infer_column_names(files, field_delim, use_quote_delim, compression_type):
    names = None
    for url in files:
        first = next(_rows(url, field_delim, use_quote_delim, compression_type), None)
        if first is None:
            raise ValueError(f"Cannot infer column names: {url} is empty.")
        if names is not None and first != names:
            raise ValueError("Files have different column names in the header row.")
        names = first
    return names


def _is_int(s, bits):
    try:
        v = int(s)
    except ValueError:
        return False
    return -(1 << (bits - 1)) <= v < (1 << (bits - 1))


def _is_float(s, dtype):
    try:
        v = float(s)
    except ValueError:
        return False
    return not np.isfinite(v) or abs(v) <= float(np.finfo(dtype).max)


_TYPES = [(_dt.int32, lambda s: _is_int(s, 32)), (_dt.int64, lambda s: _is_int(s, 64)),
          (_dt.float32, lambda s: _is_float(s, np.float32)),
          (_dt.float64, lambda s: _is_float(s, np.float64)), (_dt.string, lambda s: True)]


def infer_type(value: str, na_value: str, prev):
    """TF's ``_infer_type``: the least permissive type holding ``value`` and all before."""
    if value in ("", na_value):
        return prev
    order = [t for t, _ in _TYPES]
    for i, (t, ok) in enumerate(_TYPES):
        if ok(value) and (prev is None or prev in order[:i + 1]):
            return t
    return _dt.string  # pragma: no cover - string accepts everything


def _infer_defaults(files, cols, field_delim, use_quote_delim, na_value, header, rows_max,
                    compression_type):
    types = [None] * len(cols)
    seen = 0
    for url in files:
        rows = _rows(url, field_delim, use_quote_delim, compression_type)
        if header:
            next(rows, None)
        for row in rows:
            if rows_max is not None and seen >= rows_max:
                break
            seen += 1
            for j, c in enumerate(cols):
                types[j] = infer_type(row[c] if c < len(row) else "", na_value, types[j])
    types = [t or _dt.string for t in types]
    return [convert_to_tensor(np.asarray(["" if t == _dt.string else 0],
                                         dtype=object if t == _dt.string else t.np_dtype),
                              dtype=t) for t in types]


def _select(select_columns, names):
    if select_columns is None:
        return list(range(len(names)))
    if all(isinstance(c, (int, np.integer)) for c in select_columns):
        idx = [int(c) for c in select_columns]
    elif all(isinstance(c, str) for c in select_columns):
        missing = [c for c in select_columns if c not in names]
        if missing:
            raise ValueError(f"Column(s) {missing} in select_columns are not in the column "
                             f"names {names}.")
        idx = [names.index(c) for c in select_columns]
    else:
        raise ValueError("`select_columns` must be a list of column names or of column "
                         "indices, not a mix.")
    if any(not 0 <= i < len(names) for i in idx):
        raise ValueError(f"Column index out of range in select_columns: {idx} for "
                         f"{len(names)} columns.")
    return sorted(set(idx))


def make_csv_dataset(file_pattern, batch_size, column_names=None, column_defaults=None,
                     label_name=None, select_columns=None, field_delim=",",
                     use_quote_delim=True, na_value="", header=True, num_epochs=None,
                     shuffle=True, shuffle_buffer_size=10000, shuffle_seed=None,
                     prefetch_buffer_size=None, num_parallel_reads=1, sloppy=False,
                     num_rows_for_inference=100, compression_type=None,
                     ignore_errors=False):
    """Batches of ``(features, label)`` (``features`` a dict by column name; no label
    without ``label_name``) read from CSV files (see the module docstring)."""
    from ...storage.fsio import match_files
    from .dataset_ops import Dataset
    files = match_files([file_pattern] if isinstance(file_pattern, str) else
                        list(file_pattern))
    if not files:
        raise ValueError(f"No files match {file_pattern}.")
    if column_names is None:
        if not header:
            raise ValueError("Cannot infer column names without a header line.")
        column_names = _infer_column_names(files, field_delim, use_quote_delim,
                                           compression_type)
    column_names = list(column_names)
    if len(set(column_names)) != len(column_names):
        raise ValueError("Cannot have duplicate column names.")
    cols = _select(select_columns, column_names)
    names = [column_names[c] for c in cols]
    if label_name is not None and label_name not in names:
        raise ValueError("`label_name` provided must be one of the columns.")
    if column_defaults is None:
        column_defaults = _infer_defaults(files, cols, field_delim, use_quote_delim,
                                          na_value, header, num_rows_for_inference,
                                          compression_type)
    elif len(column_defaults) != len(cols):
        raise ValueError("The number of column defaults must equal the number of selected "
                         f"columns ({len(cols)}), got {len(column_defaults)}.")

    def one_file(f):
        ds = csv_dataset(f, column_defaults, compression_type, None, header, field_delim,
                         use_quote_delim, na_value,
                         None if select_columns is None else cols)
        return ds.ignore_errors() if ignore_errors else ds
    ds = Dataset.from_tensor_slices(np.asarray(files, dtype=object))
    if shuffle:
        ds = ds.shuffle(len(files), seed=shuffle_seed)
    ds = ds.interleave(one_file, cycle_length=num_parallel_reads, block_length=1)
    if shuffle:
        ds = ds.shuffle(shuffle_buffer_size, seed=shuffle_seed).repeat(num_epochs)
    elif num_epochs != 1:
        ds = ds.repeat(num_epochs)
    ds = ds.batch(batch_size, drop_remainder=num_epochs is None)

    def to_features(*columns):
        feats = dict(zip(names, columns))
        if label_name is None:
            return feats
        label = feats.pop(label_name)
        return feats, label
    return ds.map(to_features)
