"""Parsing ops (TF 1.x names): ``decode_csv``, ``decode_raw``, ``parse_single_example``,
``parse_example`` with ``FixedLenFeature``/``VarLenFeature``, and ``SparseTensor``.

* ``decode_csv(records, record_defaults, field_delim=",", use_quote_delim=True, na_value="",
  select_cols=None)`` — one output per column, each of ``records``' shape; a column's dtype is
  its default's (int32, int64, float32, float64, string); an empty field takes the default, and
  a column whose default is empty (``[]``) is required. Errors are TF's:
  ``Expect 3 fields but have 2 in record 0``, ``Field 1 in record 0 is not a valid int32: x``.
* ``decode_raw(bytes, out_type, little_endian=True)`` — every string's bytes as a vector of
  ``out_type``; all strings must have the same length.
* ``parse_single_example(serialized, features)`` / ``parse_example`` (a batch) — ``tf.train.
  Example`` protos (:mod:`tensorvm.storage.tf_protos`, parsed by protobuf, never by hand).
  ``FixedLenFeature(shape, dtype, default_value=None)`` gives a dense tensor (``[batch] +
  shape``), ``VarLenFeature(dtype)`` a :class:`SparseTensor` (``indices`` int64 ``[n, rank]``,
  ``values``, ``dense_shape``). dtypes: int64, float32, string (``bytes`` values).
  ``FixedLenSequenceFeature(shape, dtype, allow_missing=True, default_value=None)`` gives
  ``[batch, items] + shape`` padded to the batch's most items; ``SparseFeature(index_key,
  value_key, dtype, size, already_sorted=False)`` a SparseTensor of dense shape
  ``[batch] + size`` from the index and value features.

``decode_csv``'s kernel is vectorised with Arrow compute over the whole block (records split
by ``split_pattern``, well-formed quoted ones by Arrow's CSV reader, one cast per column);
anything irregular goes to a record-by-record kernel, which gives TF's errors by record.

>>> import tensorvm as tv
>>> a, b = tv.decode_csv(tv.constant(["1,x", "2,"]), [[0], ["d"]])
>>> with tv.Session() as s: s.run([a, b])
[array([1, 2], dtype=int32), array(['x', 'd'], dtype=object)]
"""
from __future__ import annotations

import collections
import csv
import types

import numpy as np

from ...framework import dtypes as _dt
from ...framework.errors import InvalidArgumentError
from ...framework.graph import Tensor
from ...framework.op_def_library import apply_op
from ...framework.op_registry import register_op
from ...framework.sparse_tensor import SparseTensor, SparseTensorValue
from ...storage import tf_protos
from ...framework.tensor_conversion import convert_to_tensor
from . import io_ops as _io_ops
from ..common import static_value

__all__ = [
    "FixedLenFeature",
    "FixedLenSequenceFeature",
    "SparseFeature",
    "SparseTensor",
    "SparseTensorValue",
    "VarLenFeature",
    "decode_csv",
    "decode_raw",
    "io",
    "parse_example",
    "parse_single_example",
]

FixedLenFeature = collections.namedtuple("FixedLenFeature", ["shape", "dtype", "default_value"])
FixedLenFeature.__new__.__defaults__ = (None,)
VarLenFeature = collections.namedtuple("VarLenFeature", ["dtype"])
SparseFeature = collections.namedtuple(
    "SparseFeature", ["index_key", "value_key", "dtype", "size", "already_sorted"])
SparseFeature.__new__.__defaults__ = (False,)
SparseFeature.__doc__ = (
    "A SparseTensor of dense shape ``size`` (an int, or a list with one ``index_key`` per "
    "dimension) from an example's ``index_key`` feature(s) (int64 coordinates) and its "
    "``value_key`` feature (the values), sorted by coordinate unless ``already_sorted``.")
FixedLenSequenceFeature = collections.namedtuple(
    "FixedLenSequenceFeature", ["shape", "dtype", "allow_missing", "default_value"])
FixedLenSequenceFeature.__new__.__defaults__ = (False, None)
FixedLenSequenceFeature.__doc__ = (
    "A feature of any number of items of ``shape`` (its values a multiple of their size): "
    "``[items] + shape`` per example, padded with ``default_value`` (0 or empty) to the "
    "batch's most items. ``allow_missing`` must be True (a missing feature has no items).")

_CSV_TYPES = ("int32", "int64", "float32", "float64", "string")


# ---- decode_csv ------------------------------------------------------------------------------

def _text(x) -> str:
    return x.decode("utf-8", "surrogateescape") if isinstance(x, bytes) else str(x)


def _convert(field: str, dt: str, col: int, rec: int):
    try:
        if dt in ("int32", "int64"):
            v = int(field)
            info = np.iinfo(dt)
            if not info.min <= v <= info.max:
                raise ValueError
            return v
        if dt in ("float32", "float64"):
            return float(field)
    except ValueError:
        raise InvalidArgumentError(f"Field {col} in record {rec} is not a valid {dt}: "
                                   f"{field}") from None
    return field


def _decode_csv_kernel(records, *, types, defaults, delim, quote, na_value, select):
    recs = np.asarray(records, dtype=object)
    out = _decode_csv_fast(recs, types, defaults, delim, quote, na_value, select)
    if out is None:  # an error to report (by record, as TF), or a field Arrow does not parse
        out = _decode_csv_slow(recs, types, defaults, delim, quote, na_value, select)
    return out[0] if len(out) == 1 else tuple(out)  # one output: the value itself


# The fast path is vectorised with Arrow compute functions over the whole block: records
# without quotes or line breaks are split by ``pc.split_pattern`` (the others by Python's csv,
# TF's quoting rules), each column taken with ``pc.list_element`` and converted by one cast.
# Any irregularity (a missing required field, a wrong field count, a field the cast refuses)
# returns None: the record-by-record kernel then gives TF's error for the first bad record, or
# converts the fields Arrow is stricter about (" 1", "+2") as Python's int/float do.
_INT_FIELD = r"^-?[0-9]+$"


def _csv_columns(arr, flat, delim, quote, exact, need, srcs):
    """The fields ``srcs`` of every record as string arrays, or None where a record has
    another number of fields (``exact``) or fewer than ``need``, or a quote Python's csv
    refuses. Records without quotes or line breaks are split by ``split_pattern``; quoted
    ones that are well formed (TF's rules: ``"..."`` whole fields, ``""`` inside) by Arrow's
    CSV reader; the others (a line break inside quotes) by Python's csv."""
    import pyarrow as pa
    import pyarrow.compute as pc

    def fields_ok(lengths) -> bool:
        lengths = np.asarray(lengths)
        return not ((lengths != exact).any() if exact is not None else (lengths < need).any())

    special = np.asarray(pc.match_substring_regex(arr, '["\r\n]' if quote else "[\r\n]"),
                         dtype=bool)
    if not special.any():
        lists = pc.split_pattern(arr, pattern=delim)
        if not fields_ok(pc.list_value_length(lists)):
            return None
        return [pc.list_element(lists, j) for j in srcs]
    groups: list[tuple[np.ndarray, list]] = []  # (record indices, their fields' arrays)
    fast = np.flatnonzero(~special)
    if fast.size:
        lists = pc.split_pattern(arr.take(fast), pattern=delim)
        if not fields_ok(pc.list_value_length(lists)):
            return None
        groups.append((fast, [pc.list_element(lists, j) for j in srcs]))
    where = np.flatnonzero(special)
    if quote:
        d = f"\\x{{{ord(delim):x}}}"  # RE2's escape of any character
        field = f'(?:"(?:[^"\r\n]|"")*"|[^"{d}\r\n]*)'
        formed = np.asarray(pc.match_substring_regex(arr.take(where),
                                                     f"^{field}(?:{d}{field})*$"), dtype=bool)
        if formed.any():
            got = _csv_by_arrow(arr.take(where[formed]), delim, exact, need, srcs)
            if got is None:
                return None
            groups.append((where[formed], got))
            where = where[~formed]
    if where.size:
        dialect = {"delimiter": delim, "quotechar": '"' if quote else None,
                   "quoting": csv.QUOTE_MINIMAL if quote else csv.QUOTE_NONE, "strict": True}
        try:  # one reader for all: a record whose quote is left open swallows the next
            rows = list(csv.reader([_text(x) for x in flat[where]], **dialect))
        except csv.Error:
            return None
        if len(rows) != len(where) or not fields_ok([len(r) for r in rows]):
            return None
        lists = pa.array(rows, type=pa.list_(pa.string()))
        groups.append((where, [pc.list_element(lists, j) for j in srcs]))
    order = np.concatenate([g[0] for g in groups])
    perm = np.empty(len(flat), np.int64)
    perm[order] = np.arange(len(order))
    return [pa.concat_arrays([g[1][k] for g in groups]).take(perm) for k in range(len(srcs))]


def _csv_by_arrow(arr, delim, exact, need, srcs):
    """Well-formed quoted records parsed by Arrow's CSV reader (every field a string), or
    None where they have different numbers of fields or the count is wrong."""
    import pyarrow as pa
    import pyarrow.compute as pc
    from pyarrow import csv as pacsv
    first = arr[0].as_py()
    if first.startswith("\ufeff"):
        return None  # Arrow would drop it as a byte-order mark
    width = len(next(csv.reader([first], delimiter=delim, quotechar='"')))
    if (exact is not None and width != exact) or width < need:
        return None
    lines = pc.binary_join_element_wise(arr, "", "\n")  # each record and a line break
    offsets = np.frombuffer(lines.buffers()[1], np.int32)[lines.offset:lines.offset + len(lines)
                                                          + 1]
    data = lines.buffers()[2][int(offsets[0]):int(offsets[-1])]
    try:
        table = pacsv.read_csv(
            pa.BufferReader(data),
            read_options=pacsv.ReadOptions(autogenerate_column_names=True, use_threads=False),
            parse_options=pacsv.ParseOptions(delimiter=delim, quote_char='"', double_quote=True,
                                              escape_char=False, newlines_in_values=False,
                                              ignore_empty_lines=False),
            convert_options=pacsv.ConvertOptions(
                column_types={f"f{i}": pa.string() for i in range(width)},
                strings_can_be_null=False, quoted_strings_can_be_null=False))
    except pa.ArrowInvalid:
        return None  # another number of fields in some record
    if table.num_rows != len(arr) or table.num_columns != width:
        return None
    return [table.column(j).combine_chunks() for j in srcs]


def _decode_csv_fast(recs, types, defaults, delim, quote, na_value, select):
    import pyarrow as pa
    import pyarrow.compute as pc
    flat = recs.reshape(-1)
    if flat.size == 0:
        return None
    try:
        arr = pa.array(flat, type=pa.string())
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError):
        return None  # not UTF-8 (surrogateescape in the other kernel) or not strings
    if arr.null_count or pc.any(pc.equal(arr, "")).as_py():
        return None
    ncols = len(types)
    srcs = list(range(ncols)) if select is None else list(select)
    cols = _csv_columns(arr, flat, delim, quote, ncols if select is None else None,
                        max(srcs) + 1, srcs)
    if cols is None:
        return None
    out = []
    for col, dt, d in zip(cols, types, defaults):
        missing = pc.equal(col, "")
        if na_value:
            missing = pc.or_(missing, pc.equal(col, na_value))
        any_missing = bool(pc.any(missing).as_py())
        if any_missing and d is None:
            return None
        if dt == "string":
            vals = pc.if_else(missing, d, col) if any_missing else col
            out.append(vals.to_numpy(zero_copy_only=False).reshape(recs.shape))
            continue
        present = pc.if_else(missing, pa.scalar(None, pa.string()), col) if any_missing \
            else col
        ok = pc.all(pc.match_substring_regex(present, _INT_FIELD)) if dt in ("int32", "int64") \
            else pc.invert(pc.any(pc.match_substring(present, "(")))
        if ok.as_py() is False:
            return None
        try:
            vals = pc.cast(present, getattr(pa, dt)())
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            return None
        if any_missing:
            vals = pc.fill_null(vals, pa.scalar(d, vals.type))
        out.append(np.asarray(vals.to_numpy(zero_copy_only=False), dtype=dt)
                   .reshape(recs.shape))
    return out


def _decode_csv_slow(recs, types, defaults, delim, quote, na_value, select):
    """decode_csv record by record (Python's csv): TF's errors, by record."""
    flat = [_text(r) for r in recs.reshape(-1)]
    ncols = len(types)
    dialect = {"delimiter": delim, "quotechar": '"' if quote else None,
               "quoting": csv.QUOTE_MINIMAL if quote else csv.QUOTE_NONE, "strict": True}
    cols = [[] for _ in range(ncols)]
    for i, line in enumerate(flat):
        try:
            rows = list(csv.reader([line], **dialect)) if line else [[]]
        except csv.Error as e:
            raise InvalidArgumentError(f"Quoted field error in record {i}: {e}") from None
        fields = rows[0] if rows else []
        if select is not None:
            if max(select) >= len(fields):
                raise InvalidArgumentError(f"Expect {max(select) + 1} fields but have "
                                           f"{len(fields)} in record {i}")
            fields = [fields[j] for j in select]
        if len(fields) != ncols:
            raise InvalidArgumentError(f"Expect {ncols} fields but have {len(fields)} in "
                                       f"record {i}")
        for j, (f, dt, d) in enumerate(zip(fields, types, defaults)):
            if f == "" or f == na_value:
                if d is None:
                    raise InvalidArgumentError(f"Field {j} is required but missing in record "
                                               f"{i}!")
                cols[j].append(d)
            else:
                cols[j].append(_convert(f, dt, j, i))
    out = []
    for dt, vals in zip(types, cols):
        arr = np.empty(len(vals), dtype=object) if dt == "string" else \
            np.asarray(vals, dtype=dt).reshape(-1)
        if dt == "string":
            arr[:] = vals
        out.append(arr.reshape(recs.shape))
    return out


def _decode_csv_shape(inputs, attrs):
    (rec,) = inputs
    if rec.dtype != _dt.string:
        raise InvalidArgumentError(f"decode_csv: records must be strings, got {rec.dtype.name}")
    return [(_dt.as_dtype(t), rec._shape) for t in attrs["types"]]


register_op("DecodeCSV", _decode_csv_shape, _decode_csv_kernel, differentiable=False)


def _csv_default(d, j):
    v = static_value(d)
    if v is None:
        raise InvalidArgumentError(f"decode_csv: record_defaults[{j}] must be known when the "
                                   "graph is built")
    v = np.asarray(v)
    if isinstance(d, Tensor):
        dt = d.dtype.name
    elif v.dtype.kind in "OUS":
        dt = "string"
    elif v.dtype.kind == "f":
        dt = "float32"
    elif v.dtype.kind in "iu":
        dt = "int32"
    else:
        dt = str(v.dtype)
    if dt not in _CSV_TYPES:
        raise InvalidArgumentError(f"decode_csv: record_defaults[{j}] has dtype {dt}; one of "
                                   f"{list(_CSV_TYPES)}")
    if v.size > 1:
        raise InvalidArgumentError(f"decode_csv: record_defaults[{j}] must have at most one "
                                   f"element, got {v.size}")
    if v.size == 0:
        return dt, None
    item = v.reshape(-1)[0]
    return dt, _text(item) if dt == "string" else item.item()


def decode_csv(records, record_defaults, field_delim=",", use_quote_delim=True, name=None,
               na_value="", select_cols=None):
    """Convert CSV records to tensors, one per column (see the module docstring)."""
    if not isinstance(field_delim, str) or len(field_delim) != 1:
        raise InvalidArgumentError(f"decode_csv: field_delim must be one character, got "
                                   f"{field_delim!r}")
    records = convert_to_tensor(records)
    specs = [_csv_default(d, j) for j, d in enumerate(record_defaults)]
    select = None if select_cols is None else tuple(int(c) for c in select_cols)
    if select is not None and (list(select) != sorted(set(select)) or len(select) != len(specs)):
        raise InvalidArgumentError("decode_csv: select_cols must be strictly increasing and "
                                   "match record_defaults in length")
    op = apply_op("DecodeCSV", [records],
                  {"types": tuple(t for t, _ in specs), "defaults": tuple(d for _, d in specs),
                   "delim": field_delim, "quote": bool(use_quote_delim),
                   "na_value": na_value, "select": select}, name=name or "DecodeCSV")
    return list(op.outputs)


# ---- decode_raw ------------------------------------------------------------------------------

def _decode_raw_kernel(data, *, out_type, little_endian):
    arr = np.asarray(data, dtype=object)
    dt = np.dtype(out_type).newbyteorder("<" if little_endian else ">")
    flat = [x.encode("utf-8", "surrogateescape") if isinstance(x, str) else bytes(x)
            for x in arr.reshape(-1)]
    size = len(flat[0]) if flat else 0
    if size % dt.itemsize:
        raise InvalidArgumentError(f"Input to DecodeRaw has length {size} that is not a "
                                   f"multiple of {dt.itemsize}, the size of {out_type}")
    for i, x in enumerate(flat):
        if len(x) != size:
            raise InvalidArgumentError(f"DecodeRaw requires input strings to all be the same "
                                       f"size, but element {i} has size {len(x)} != {size}")
    buf = np.frombuffer(b"".join(flat), dt).astype(np.dtype(out_type), copy=True)
    return buf.reshape(arr.shape + (size // dt.itemsize,))


def _decode_raw_shape(inputs, attrs):
    (x,) = inputs
    if x.dtype != _dt.string:
        raise InvalidArgumentError(f"decode_raw: bytes must be strings, got {x.dtype.name}")
    return [(_dt.as_dtype(attrs["out_type"]), None if x._shape is None
             else tuple(x._shape) + (None,))]


register_op("DecodeRaw", _decode_raw_shape, _decode_raw_kernel, differentiable=False)


def decode_raw(bytes, out_type, little_endian=True, name=None):
    """Reinterpret the bytes of each string as a vector of ``out_type``."""
    dt = _dt.as_dtype(out_type)
    if dt.is_string or dt == _dt.bool_:
        raise InvalidArgumentError(f"decode_raw: out_type must be numeric, got {dt.name}")
    return apply_op("DecodeRaw", [convert_to_tensor(bytes)],
                    {"out_type": dt.np_dtype.name, "little_endian": bool(little_endian)},
                    name=name or "DecodeRaw").outputs[0]


# ---- parse_example ---------------------------------------------------------------------------

_KINDS = {"int64": ("int64_list", "int64"), "float32": ("float_list", "float"),
          "string": ("bytes_list", "string")}
_TF_NAMES = {"int64_list": "int64", "float_list": "float", "bytes_list": "string"}


def _feature_values(ex, key, dt):
    feats = ex.features.feature
    if key not in feats:
        return None
    f = feats[key]
    kind = f.WhichOneof("kind")
    want, tfname = _KINDS[dt]
    if kind is None:
        return []
    if kind != want:
        raise InvalidArgumentError(f"Key: {key}.  Data types don't match. Data type: "
                                   f"{_TF_NAMES[kind]} but expected type: {tfname}")
    return list(getattr(f, want).value)


def _array(vals, dt, shape=None):
    if dt == "string":
        out = np.empty(len(vals), dtype=object)
        out[:] = vals
    else:
        out = np.asarray(vals, dtype=dt)
    return out if shape is None else out.reshape(shape)


def _parse(blob, i):
    try:
        return tf_protos.Example.FromString(bytes(blob) if not isinstance(blob, str)
                                            else blob.encode("utf-8", "surrogateescape"))
    except Exception as e:
        raise InvalidArgumentError(f"Could not parse example input, value: {blob!r:.80} "
                                   f"(serialized[{i}]: {e})") from None


def _parse_sequences(exs, seq, single) -> list:
    """The ``FixedLenSequenceFeature`` outputs: ``[batch, items] + shape``, padded."""
    out = []
    for key, dt, shape, default in seq:
        n = int(np.prod(shape, dtype=np.int64))
        rows = []
        for i, ex in enumerate(exs):
            vals = _feature_values(ex, key, dt) or []
            if n == 0 and vals or n and len(vals) % n:
                raise InvalidArgumentError(
                    f"Name: <unknown>, Key: {key}, Index: {i}.  Number of {_KINDS[dt][1]} "
                    "values is not a multiple of stride length. Saw "
                    f"{len(vals)} values but output shape is: "
                    f"[?,{','.join(str(d) for d in shape)}]")
            rows.append(_array(vals, dt, (len(vals) // n if n else 0,) + tuple(shape)))
        if single:
            out.append(rows[0])
            continue
        most = max((len(r) for r in rows), default=0)
        pad = (b"" if dt == "string" else 0) if default is None else default  # bytes_list
        batch = np.full((len(rows), most) + tuple(shape), pad,
                        dtype=object if dt == "string" else dt)
        for i, r in enumerate(rows):
            batch[i, :len(r)] = r
        out.append(batch)
    return out


def _parse_kernel(serialized, *, dense, sparse, single=None, seq=(), spf=()):
    arr = np.asarray(serialized, dtype=object)
    single = arr.ndim == 0 if single is None else single
    exs = [_parse(b, i) for i, b in enumerate(arr.reshape(-1))]
    out = _parse_sequences(exs, seq, single) if seq else []
    for key, dt, shape, default in dense:
        n = int(np.prod(shape, dtype=np.int64))
        rows = []
        for i, ex in enumerate(exs):
            vals = _feature_values(ex, key, dt)
            if vals is None:
                if default is None:
                    raise InvalidArgumentError(f"Feature: {key} (data type: {dt}) is required "
                                               "but could not be found.")
                vals = list(default)
            if len(vals) != n:
                raise InvalidArgumentError(
                    f"Key: {key}, Index: {i}.  Number of {_KINDS[dt][1]} values != expected.  "
                    f"Values size: {len(vals)} but output shape: {list(shape)}")
            rows.append(_array(vals, dt, shape))
        if single:
            out.append(rows[0])
            continue
        out.append(np.stack(rows) if rows else _array([], dt, (0,) + tuple(shape)))
    for key, dt in sparse:
        vals, lens = [], np.zeros(len(exs), np.int64)
        for i, ex in enumerate(exs):
            v = _feature_values(ex, key, dt) or []
            lens[i] = len(v)
            vals += v
        longest = int(lens.max()) if len(exs) else 0
        ind = np.zeros((len(vals), 2), np.int64)  # (record, position) of each value
        if len(exs) == 1:
            ind[:, 1] = np.arange(len(vals))
        elif vals:
            ind[:, 0] = np.repeat(np.arange(len(exs), dtype=np.int64), lens)
            ind[:, 1] = np.arange(len(vals)) - np.repeat(np.cumsum(lens) - lens, lens)
        if single:
            out += [ind[:, 1:], _array(vals, dt), np.asarray([longest], np.int64)]
        else:
            out += [ind, _array(vals, dt), np.asarray([len(exs), longest], np.int64)]
    for spec in spf:
        out += _parse_sparse_feature(exs, spec, single)
    return out[0] if len(out) == 1 else tuple(out)  # one output: the value itself


def _parse_sparse_feature(exs, spec, single) -> list:
    """A ``SparseFeature``'s indices, values and dense shape over the examples."""
    _, index_keys, value_key, dt, size, already_sorted = spec
    rows, vals = [], []
    for i, ex in enumerate(exs):
        v = _feature_values(ex, value_key, dt) or []
        idx = [_feature_values(ex, k, "int64") or [] for k in index_keys]
        for ix in idx:
            if len(ix) != len(v):
                raise InvalidArgumentError(f"Number of elements in indices ({len(ix)}) and "
                                           f"values ({len(v)}) do not match")
        coords = np.asarray(idx, np.int64).reshape(len(index_keys), -1).T
        order = np.arange(len(v)) if already_sorted or not len(v) else \
            np.lexsort(coords.T[::-1])
        lead = [] if single else [np.full((len(v), 1), i, np.int64)]
        rows.append(np.concatenate(lead + [coords[order]], axis=1))
        vals.append(_array(v, dt)[order])
    rank = len(size) + (0 if single else 1)
    ind = np.concatenate(rows) if rows else np.zeros((0, rank), np.int64)
    values = np.concatenate(vals) if vals else _array([], dt)
    shape = list(size) if single else [len(exs)] + list(size)
    return [ind.reshape(-1, rank), values, np.asarray(shape, np.int64)]


def _parse_shape(inputs, attrs):
    (s,) = inputs
    if s.dtype != _dt.string:
        raise InvalidArgumentError(f"parse_example: serialized must be strings, got "
                                   f"{s.dtype.name}")
    single = attrs["single"]
    if s._shape is not None and len(s._shape) != (0 if single else 1):
        raise InvalidArgumentError(f"parse_{'single_' if single else ''}example: serialized "
                                   f"must be a {'scalar' if single else 'vector'}, got shape "
                                   f"{list(s._shape)}")
    lead = () if single else (None if s._shape is None else s._shape[0],)
    out = [(_dt.as_dtype(dt), lead + (None,) + tuple(shape))
           for _, dt, shape, _ in attrs.get("seq", ())]
    out += [(_dt.as_dtype(dt), lead + tuple(shape)) for _, dt, shape, _ in attrs["dense"]]
    rank = 1 if single else 2
    for _, dt in attrs["sparse"]:
        out += [(_dt.int64, (None, rank)), (_dt.as_dtype(dt), (None,)), (_dt.int64, (rank,))]
    for _, _, _, dt, size, _ in attrs.get("spf", ()):
        r = len(size) + (0 if single else 1)
        out += [(_dt.int64, (None, r)), (_dt.as_dtype(dt), (None,)), (_dt.int64, (r,))]
    return out


register_op("ParseExampleV1", _parse_shape, _parse_kernel, differentiable=False)


def _feature_dtype(key, dtype) -> str:
    dt = _dt.as_dtype(dtype)
    name = "string" if dt.is_string else dt.name
    if name not in _KINDS:
        raise InvalidArgumentError(f"feature {key!r}: dtype must be int64, float32 or string, "
                                   f"got {dt.name}")
    return name


def _specs(features):
    if not isinstance(features, dict) or not features:
        raise InvalidArgumentError("parse_example: features must be a non-empty dict of "
                                   "FixedLenFeature/VarLenFeature")
    dense, sparse, seq, spf = [], [], [], []
    for key in sorted(features):
        f = features[key]
        if isinstance(f, SparseFeature):
            index_keys = (f.index_key,) if isinstance(f.index_key, str) else \
                tuple(f.index_key)
            size = (int(f.size),) if isinstance(f.size, (int, np.integer)) else \
                tuple(int(d) for d in f.size)
            if len(size) != len(index_keys):
                raise ValueError(f"SparseFeature {key!r}: size has {len(size)} dimensions, "
                                 f"index_key {len(index_keys)}")
            spf.append((key, index_keys, f.value_key, _feature_dtype(key, f.dtype), size,
                        bool(f.already_sorted)))
        elif isinstance(f, FixedLenSequenceFeature):
            if not f.allow_missing:
                raise ValueError("Unsupported: FixedLenSequenceFeature requires allow_missing "
                                 "to be True.")
            dt = _feature_dtype(key, f.dtype)
            shape = tuple(int(d) for d in (f.shape if isinstance(f.shape, (list, tuple))
                                           else [f.shape]))
            default = None if f.default_value is None else \
                np.asarray(f.default_value, dtype=object if dt == "string" else dt).item()
            seq.append((key, dt, shape, default))
        elif isinstance(f, FixedLenFeature):
            dt = _feature_dtype(key, f.dtype)
            shape = tuple(int(d) for d in (f.shape if isinstance(f.shape, (list, tuple))
                                           else [f.shape]))
            default = None
            if f.default_value is not None:
                d = np.asarray(f.default_value, dtype=object if dt == "string" else dt)
                n = int(np.prod(shape, dtype=np.int64))
                d = np.broadcast_to(d, shape) if d.size == 1 and n != 1 else d
                if d.size != n:
                    raise InvalidArgumentError(f"feature {key!r}: default_value has {d.size} "
                                               f"elements, shape {list(shape)} needs {n}")
                default = tuple(d.reshape(-1).tolist())
            dense.append((key, dt, shape, default))
        elif isinstance(f, VarLenFeature):
            sparse.append((key, _feature_dtype(key, f.dtype)))
        else:
            raise InvalidArgumentError(f"feature {key!r}: expected FixedLenFeature, "
                                       f"FixedLenSequenceFeature or VarLenFeature, got {f!r}")
    return tuple(dense), tuple(sparse), tuple(seq), tuple(spf)


def _parse_op(serialized, features, single, name):
    dense, sparse, seq, spf = _specs(features)
    attrs = {"dense": dense, "sparse": sparse, "single": single}
    if seq:
        attrs["seq"] = seq
    if spf:
        attrs["spf"] = spf
    op = apply_op("ParseExampleV1", [convert_to_tensor(serialized)], attrs,
                  name=name or ("ParseSingleExample" if single else "ParseExample"))
    outs, result = list(op.outputs), {}
    for (key, *_), t in zip(seq + dense, outs):
        result[key] = t
    rest = outs[len(seq) + len(dense):]
    lead = () if single else tuple(op.inputs[0].shape.dims or (None,))[:1]
    for k, (key, _) in enumerate(sparse):
        result[key] = SparseTensor(*rest[3 * k:3 * k + 3])
        result[key]._shape_hint = lead + (None,)  # TF's static shape: [batch, None]
    rest = rest[3 * len(sparse):]
    for k, (key, *_, size, _) in enumerate(spf):
        result[key] = SparseTensor(*rest[3 * k:3 * k + 3])
        result[key]._shape_hint = (() if single else (None,)) + size
    return result


def parse_single_example(serialized, features, name=None, example_names=None):
    """Parse one serialized ``tf.train.Example`` (a string scalar) into a dict of tensors
    (``FixedLenFeature``) and :class:`SparseTensor` s (``VarLenFeature``)."""
    return _parse_op(serialized, features, True, name)


def parse_example(serialized, features, name=None, example_names=None):
    """Parse a vector of serialized ``tf.train.Example`` s: dense features get a leading
    batch dimension; sparse ones 2-D indices ``(example, position)``."""
    return _parse_op(serialized, features, False, name)


# ``tf.io`` (TF >= 1.13 spells the parsing ops and the TFRecord writer there)

io = types.SimpleNamespace(
    decode_csv=decode_csv, decode_raw=decode_raw, parse_single_example=parse_single_example,
    parse_example=parse_example, FixedLenFeature=FixedLenFeature, VarLenFeature=VarLenFeature,
    FixedLenSequenceFeature=FixedLenSequenceFeature, SparseFeature=SparseFeature,
    TFRecordWriter=_io_ops.TFRecordWriter, tf_record_iterator=_io_ops.tf_record_iterator,
    TFRecordOptions=_io_ops.TFRecordOptions,
    TFRecordCompressionType=_io_ops.TFRecordCompressionType)
io.__doc__ = "``tf.io``: the parsing ops, FixedLen/VarLenFeature and the TFRecord writer."
