"""``tv.lookup`` (TF 1.x's ``tf.lookup`` and ``tf.contrib.lookup``): static key -> value tables
as resources of their device, filled by an initializer op in ``TABLE_INITIALIZERS`` (run it,
or ``tv.tables_initializer()``), then read by vectorised lookups.

* ``HashTable``/``StaticHashTable(initializer, default_value)``, with
  ``KeyValueTensorInitializer(keys, values)`` or ``TextFileInitializer`` (``TextFileIndex``:
  a column of a delimited file, the whole line, or the line number; any fsspec URL);
* ``index_table_from_tensor``/``index_table_from_file`` (strings or ints -> int64 ids, with
  ``num_oov_buckets`` for unknown keys, hashed by ``tv.string_to_hash_bucket_fast`` — stable,
  but not TF's FarmHash, so bucket ids differ from TF's), ``index_to_string_table_from_tensor``
  /``_from_file`` (ids -> strings, ``default_value`` for others).

A lookup before the table is initialised is TF's ``FailedPreconditionError("Table not
initialized.")``; initialising with other contents is refused. Lookups of strings use Arrow's
hash index (``pyarrow.compute.index_in``), of numbers a sorted search, never a loop per key.

>>> import tensorvm as tv
>>> t = tv.lookup.index_table_from_tensor(["a", "b", "c"], num_oov_buckets=0)
>>> with tv.Session() as s:
...     _ = s.run(tv.tables_initializer()); s.run(t.lookup(tv.constant(["c", "a", "zz"]))).tolist()
[2, 0, -1]
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..framework import dtypes as _dt
from ..framework.errors import FailedPreconditionError, InvalidArgumentError
from ..framework.graph import get_default_graph, name_scope
from ..framework.graph_keys import GraphKeys
from ..framework.op_def_library import apply_op
from ..framework.op_registry import register_op
from ..framework.tensor_conversion import convert_to_tensor

__all__ = ["HashTable", "StaticHashTable", "KeyValueTensorInitializer", "TextFileInitializer",
           "TextFileIndex", "TextFileStringTableInitializer", "TextFileIdTableInitializer",
           "index_table_from_tensor", "index_table_from_file", "index_to_string_table_from_tensor",
           "index_to_string_table_from_file", "tables_initializer"]

_HOST = "lookup tables are resources of the host (Arrow hash indexes)"


class _Table:
    """A table's contents on its device: keys and values as arrays, and a lookup index."""

    kind = "lookup table"

    def __init__(self):
        self.keys = None
        self.values = None
        self._index = None

    def fill(self, keys, values, name):
        keys, values = np.asarray(keys).reshape(-1), np.asarray(values).reshape(-1)
        if keys.shape != values.shape:
            raise InvalidArgumentError(f"{name}: {keys.size} keys but {values.size} values")
        if self.keys is not None and self.keys.shape == keys.shape and \
                (self.keys == keys).all() and (self.values == values).all():
            return  # initialised again with the same contents
        if keys.dtype == object:
            arr = pa.array(keys, type=pa.large_string())
            if pc.count_distinct(arr).as_py() != len(arr):
                raise InvalidArgumentError(f"{name}: duplicate keys in the table's keys")
            self._index = arr
        else:
            order = np.argsort(keys, kind="stable")
            if keys.size > 1 and (np.diff(keys[order]) == 0).any():
                raise InvalidArgumentError(f"{name}: duplicate keys in the table's keys")
            self._index = (keys[order], order)
        self.keys, self.values = keys, values

    def find(self, q: np.ndarray, default, name) -> np.ndarray:
        if self.keys is None:
            raise FailedPreconditionError(f"{name}: Table not initialized.")
        flat = q.reshape(-1)
        if self.keys.dtype == object:
            pos = pc.index_in(pa.array(flat, type=pa.large_string()), value_set=self._index)
            pos = pos.to_numpy(zero_copy_only=False)
            hit = ~np.isnan(pos.astype(np.float64)) if pos.dtype == object else pos >= 0
            idx = np.where(hit, np.nan_to_num(pos.astype(np.float64)), 0).astype(np.int64)
        else:
            sorted_keys, order = self._index
            at = np.searchsorted(sorted_keys, flat)
            at_c = np.minimum(at, max(sorted_keys.size - 1, 0))
            hit = (at < sorted_keys.size) & (sorted_keys[at_c] == flat) if sorted_keys.size \
                else np.zeros(flat.shape, bool)
            idx = order[at_c] if sorted_keys.size else np.zeros(flat.shape, np.int64)
        out = np.where(hit, self.values[idx] if self.values.size else default, default)
        return out.astype(self.values.dtype, copy=False).reshape(q.shape)


def _table(ctx, container, shared_name):
    return ctx.resources.lookup_or_create(container, "table/" + shared_name, _Table)


def _init_kernel(ctx, keys, values, *, container, shared_name):
    _table(ctx, container, shared_name).fill(keys, values, ctx.op_name)


def _find_kernel(ctx, keys, default, *, container, shared_name):
    return _table(ctx, container, shared_name).find(np.asarray(keys, dtype=object)
                                                    if keys.dtype == object else
                                                    np.asarray(keys), default, ctx.op_name)


def _size_kernel(ctx, *, container, shared_name):
    t = _table(ctx, container, shared_name)
    return np.int64(0 if t.keys is None else t.keys.size)


def _text_file_kernel(ctx, *, container, shared_name, filename, key_index, value_index,
                      delimiter, vocab_size, key_dtype, value_dtype):
    from ..storage import fsio
    fs, path = fsio.to_fs(filename)
    try:
        text = fsio.read_bytes(fs, path).decode("utf-8")
    except FileNotFoundError:
        from ..framework.errors import NotFoundError
        raise NotFoundError(f"{ctx.op_name}: {filename}: no such file") from None
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if vocab_size >= 0:
        if len(lines) < vocab_size:
            raise InvalidArgumentError(f"{ctx.op_name}: invalid vocab_size in {filename}: "
                                       f"expected {vocab_size} lines, the file has "
                                       f"{len(lines)}")
        lines = lines[:vocab_size]

    def column(index, dt):
        if index == -2:                                   # TextFileIndex.LINE_NUMBER
            return np.arange(len(lines), dtype=np.int64).astype(dt.np_dtype)
        if index == -1:                                   # TextFileIndex.WHOLE_LINE
            col = np.asarray(lines, dtype=object)
        else:
            arr = pc.split_pattern(pa.array(lines, type=pa.large_string()), delimiter)
            widths = pc.list_value_length(arr).to_numpy(zero_copy_only=False)
            if (widths <= index).any():
                bad = int(np.nonzero(widths <= index)[0][0])
                raise InvalidArgumentError(f"{ctx.op_name}: invalid number of columns in "
                                           f"{filename} line {bad} ({lines[bad]!r}): expected "
                                           f"more than {index}")
            col = pc.list_element(arr, index).to_numpy(zero_copy_only=False).astype(object)
        if dt.is_string:
            return col
        try:
            return col.astype(np.float64).astype(dt.np_dtype) if dt.is_floating else \
                col.astype(np.int64).astype(dt.np_dtype)
        except ValueError as e:
            raise InvalidArgumentError(f"{ctx.op_name}: {filename}: {e}") from None
    _table(ctx, container, shared_name).fill(column(key_index, key_dtype),
                                             column(value_index, value_dtype), ctx.op_name)


def _no_outputs(inputs, attrs):
    return []


register_op("LookupTableImport", _no_outputs, _init_kernel, stateful=True, needs_ctx=True,
            differentiable=False, cpu_only=_HOST)
register_op("InitializeTableFromTextFile", _no_outputs, _text_file_kernel, stateful=True,
            needs_ctx=True, differentiable=False, cpu_only=_HOST)
register_op("LookupTableFind", lambda inputs, attrs: [(inputs[1].dtype, inputs[0]._shape)],
            _find_kernel, stateful=True, needs_ctx=True, differentiable=False, cpu_only=_HOST)
register_op("LookupTableSize", lambda inputs, attrs: [(_dt.int64, ())], _size_kernel,
            stateful=True, needs_ctx=True, differentiable=False, cpu_only=_HOST)


# ---- initializers and tables -----------------------------------------------------------------

class TextFileIndex:
    """Special column indices of a text file initializer."""
    WHOLE_LINE = -1
    LINE_NUMBER = -2


class KeyValueTensorInitializer:
    """Table contents from two tensors of keys and values."""

    def __init__(self, keys, values, key_dtype=None, value_dtype=None, name=None):
        self._keys = convert_to_tensor(keys, dtype=key_dtype)
        self._values = convert_to_tensor(values, dtype=value_dtype)
        self.key_dtype, self.value_dtype = self._keys.dtype, self._values.dtype
        self._name = name or "key_value_init"

    def _initialize(self, attrs, name):
        return apply_op("LookupTableImport", [self._keys, self._values], attrs, name=name)


class TextFileInitializer:
    """Table contents from a text file (a path or fsspec URL): keys and values from columns
    ``key_index``/``value_index`` split by ``delimiter``, or the whole line
    (``TextFileIndex.WHOLE_LINE``) or the line number (``TextFileIndex.LINE_NUMBER``)."""

    def __init__(self, filename, key_dtype, key_index, value_dtype, value_index,
                 vocab_size=None, delimiter="\t", name=None):
        self.filename = str(filename)
        self.key_dtype, self.value_dtype = _dt.as_dtype(key_dtype), _dt.as_dtype(value_dtype)
        if key_index == TextFileIndex.LINE_NUMBER and not self.key_dtype.is_integer:
            raise ValueError("Signature mismatch. Keys must be dtype int64, got "
                             f"{self.key_dtype.name}.")
        if key_index == TextFileIndex.WHOLE_LINE and not (self.key_dtype.is_string or
                                                          self.key_dtype.is_integer):
            raise ValueError(f"Signature mismatch. Keys must be integer or string, got "
                             f"{self.key_dtype.name}.")
        if value_index < -2:
            raise ValueError(f"Invalid value index {value_index}.")
        self.key_index, self.value_index = int(key_index), int(value_index)
        self.vocab_size = -1 if vocab_size is None else int(vocab_size)
        self.delimiter = delimiter
        self._name = name or "text_file_init"

    def _initialize(self, attrs, name):
        return apply_op("InitializeTableFromTextFile", [], {
            **attrs, "filename": self.filename, "key_index": self.key_index,
            "value_index": self.value_index, "delimiter": self.delimiter,
            "vocab_size": self.vocab_size, "key_dtype": self.key_dtype,
            "value_dtype": self.value_dtype}, name=name)


def TextFileStringTableInitializer(filename, key_column_index=TextFileIndex.LINE_NUMBER,  # noqa: N802
                                   value_column_index=TextFileIndex.WHOLE_LINE,
                                   vocab_size=None, delimiter="\t", name=None):
    """int64 line numbers (by default) to the file's lines."""
    return TextFileInitializer(filename, _dt.int64, key_column_index, _dt.string,
                               value_column_index, vocab_size, delimiter, name)


def TextFileIdTableInitializer(filename, key_column_index=TextFileIndex.WHOLE_LINE,  # noqa: N802
                               value_column_index=TextFileIndex.LINE_NUMBER, vocab_size=None,
                               delimiter="\t", name=None, key_dtype=_dt.string):
    """The file's lines (by default) to their int64 line numbers."""
    return TextFileInitializer(filename, key_dtype, key_column_index, _dt.int64,
                               value_column_index, vocab_size, delimiter, name)


class StaticHashTable:
    """A table of ``initializer``'s keys and values; keys it lacks give ``default_value``."""

    def __init__(self, initializer, default_value, name=None):
        g = get_default_graph()
        with name_scope(name or "hash_table") as scope:
            self.name = scope.rstrip("/") if isinstance(scope, str) else name or "hash_table"
            # one table per graph and scope: another graph's table of the same name is another
            # resource (device resources outlive sessions)
            self._attrs = {"container": "", "shared_name": f"{self.name}@{id(g):x}"}
            self.key_dtype, self.value_dtype = initializer.key_dtype, initializer.value_dtype
            self.default_value = convert_to_tensor(default_value, dtype=self.value_dtype)
            with g.control_dependencies(None):
                self._init_op = initializer._initialize(dict(self._attrs), "table_init")
            g.add_to_collection(GraphKeys.TABLE_INITIALIZERS, self._init_op)

    @property
    def initializer(self):
        """The op that fills the table (also in ``TABLE_INITIALIZERS``)."""
        return self._init_op

    init = initializer

    def lookup(self, keys, name=None):
        """The values of ``keys`` (any shape), ``default_value`` for missing ones."""
        keys = convert_to_tensor(keys) if hasattr(keys, "dtype") and hasattr(keys, "op") \
            else convert_to_tensor(keys, dtype=self.key_dtype)
        if keys.dtype != self.key_dtype:
            raise TypeError(f"Signature mismatch. Keys must be dtype {self.key_dtype.name}, "
                            f"got {keys.dtype.name}.")
        return apply_op("LookupTableFind", [keys, self.default_value], dict(self._attrs),
                        name=name or "lookup").outputs[0]

    def size(self, name=None):
        """The number of entries (int64)."""
        return apply_op("LookupTableSize", [], dict(self._attrs), name=name or "size").outputs[0]


HashTable = StaticHashTable


class _IdTableWithOov:
    """An id table plus ``num_oov_buckets`` hash buckets after the vocabulary."""

    def __init__(self, table, num_oov_buckets, vocab_size):
        self._table, self._buckets, self._vocab_size = table, int(num_oov_buckets), vocab_size
        self.key_dtype, self.value_dtype = table.key_dtype, table.value_dtype
        self.initializer = self.init = table.initializer

    def lookup(self, keys, name=None):
        """Ids of ``keys``; unknown keys hash into the buckets after the vocabulary."""
        from ..ops import as_string, string_to_hash_bucket_fast, where
        ids = self._table.lookup(keys, name=name)
        if not self._buckets:
            return ids
        k = convert_to_tensor(keys, dtype=self.key_dtype)
        k = k if k.dtype.is_string else as_string(k)
        hashed = string_to_hash_bucket_fast(k, self._buckets) + self._vocab_size
        return where(ids < 0, hashed, ids)

    def size(self, name=None):
        """Vocabulary plus buckets."""
        return self._table.size(name) + self._buckets


def _check_oov(num_oov_buckets, vocab_size):
    if num_oov_buckets < 0:
        raise ValueError(f"num_oov_buckets must be greater or equal than 0, got "
                         f"{num_oov_buckets}.")
    if vocab_size is not None and vocab_size < 1:
        raise ValueError(f"vocab_size must be greater than 0, got {vocab_size}.")


def index_table_from_tensor(vocabulary_list, num_oov_buckets=0, default_value=-1,
                            hasher_spec=None, dtype=_dt.string, name=None):
    """Keys (strings or ints) to their int64 position in ``vocabulary_list``; unknown keys
    get ``default_value``, or a hash bucket when ``num_oov_buckets`` > 0."""
    _check_oov(num_oov_buckets, None)
    with name_scope(name or "string_to_index"):
        keys = convert_to_tensor(vocabulary_list, dtype=dtype)
        n = keys.shape[0] if keys.shape.ndims else None
        if n == 0:
            raise ValueError("vocabulary_list must be a non-empty list")
        from ..ops import range as range_
        from ..ops import size as size_
        ids = range_(size_(keys, out_type=_dt.int64), dtype=_dt.int64) if n is None else \
            convert_to_tensor(np.arange(n, dtype=np.int64))
        table = StaticHashTable(KeyValueTensorInitializer(keys, ids), default_value)
        if num_oov_buckets:
            return _IdTableWithOov(table, num_oov_buckets, n if n is not None else size_(
                keys, out_type=_dt.int64))
        return table


def index_table_from_file(vocabulary_file=None, num_oov_buckets=0, vocab_size=None,
                          default_value=-1, hasher_spec=None, key_dtype=_dt.string, name=None,
                          key_column_index=TextFileIndex.WHOLE_LINE,
                          value_column_index=TextFileIndex.LINE_NUMBER, delimiter="\t"):
    """Keys to int64 ids from a vocabulary file (one key a line, its id the line number)."""
    if not vocabulary_file:
        raise ValueError("vocabulary_file must be specified and must not be empty.")
    _check_oov(num_oov_buckets, vocab_size)
    with name_scope(name or "string_to_index"):
        init = TextFileInitializer(vocabulary_file, key_dtype, key_column_index, _dt.int64,
                                   value_column_index, vocab_size, delimiter)
        table = StaticHashTable(init, default_value)
        if num_oov_buckets:
            return _IdTableWithOov(table, num_oov_buckets, table.size())
        return table


def index_to_string_table_from_tensor(vocabulary_list, default_value="UNK", name=None):
    """int64 ids to the strings of ``vocabulary_list``; other ids give ``default_value``."""
    with name_scope(name or "index_to_string"):
        values = convert_to_tensor(vocabulary_list, dtype=_dt.string)
        n = values.shape[0]
        if n == 0:
            raise ValueError("vocabulary_list must be a non-empty list")
        return StaticHashTable(KeyValueTensorInitializer(
            convert_to_tensor(np.arange(n, dtype=np.int64)), values), default_value)


def index_to_string_table_from_file(vocabulary_file, vocab_size=None, default_value="UNK",
                                    name=None, key_column_index=TextFileIndex.LINE_NUMBER,
                                    value_column_index=TextFileIndex.WHOLE_LINE,
                                    delimiter="\t"):
    """int64 ids (line numbers) to the lines of a vocabulary file."""
    _check_oov(0, vocab_size)
    with name_scope(name or "index_to_string"):
        return StaticHashTable(TextFileInitializer(
            vocabulary_file, _dt.int64, key_column_index, _dt.string, value_column_index,
            vocab_size, delimiter), default_value)


def tables_initializer(name="init_all_tables"):
    """One op running every table initializer of the default graph (``TABLE_INITIALIZERS``)."""
    from ..ops.array.array_ops import group, no_op
    inits = get_default_graph().get_collection(GraphKeys.TABLE_INITIALIZERS)
    return group(*inits, name=name) if inits else no_op(name=name)
