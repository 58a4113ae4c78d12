"""``tv.feature_column``: TF 1.x's feature columns over dense feature tensors — how a
``features`` dict becomes a model's input. A column is plain data (a frozen dataclass);
:func:`input_layer` turns dense columns into one ``[batch, n]`` float tensor (columns in
name order, as TF's), :func:`linear_model` adds a weighted sum of every column.

Dense columns: :func:`numeric_column`, :func:`bucketized_column` (one-hot buckets),
:func:`indicator_column` and :func:`embedding_column` (of a categorical column).
Categorical columns: :func:`categorical_column_with_identity`,
:func:`categorical_column_with_vocabulary_list`. Categorical features are dense tensors of
ids or strings, ``[batch]`` or ``[batch, k]`` (TF also takes ``SparseTensor``; tensorvm
has none).

>>> import numpy as np, tensorvm as tv
>>> cols = [tv.feature_column.numeric_column("b", shape=(2,)),
...         tv.feature_column.indicator_column(
...             tv.feature_column.categorical_column_with_vocabulary_list("a", ["x", "y"]))]
>>> feats = {"a": np.array(["y", "x"], dtype=object),
...          "b": np.array([[1.0, 2.0], [3.0, 4.0]], np.float32)}
>>> with tv.Graph().as_default():
...     net = tv.feature_column.input_layer(feats, cols)
...     with tv.Session() as s:
...         print(s.run(net))
[[0. 1. 1. 2.]
 [1. 0. 3. 4.]]
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

import numpy as np

from ..framework import dtypes as _dt
from ..ops.state.init_ops import truncated_normal_initializer, zeros_initializer
from ..ops import (
    add_n,
    argmax,
    as_string,
    cast,
    concat,
    constant,
    equal,
    expand_dims,
    gather,
    logical_and,
    logical_or,
    matmul,
    maximum,
    one_hot,
    ones_like,
    reduce_any,
    reduce_sum,
    reshape,
    shape,
    sqrt,
    string_to_hash_bucket_fast,
    where,
    zeros_like,
)
from ..framework.tensor_conversion import convert_to_tensor
from ..ops.state.variable_scope import get_variable, variable_scope

__all__ = ["bucketized_column", "categorical_column_with_identity",
           "categorical_column_with_vocabulary_list", "embedding_column", "indicator_column",
           "input_layer", "linear_model", "numeric_column"]


def _rows(t, width=None):
    """``t`` as ``[batch, width]`` (``width`` None: whatever is left)."""
    if width is not None:
        return reshape(t, [-1, int(width)])
    rank = t.shape.ndims
    if rank == 1:
        return expand_dims(t, 1)
    if rank == 2:
        return t
    return reshape(t, concat([shape(t)[:1], [-1]], axis=0))


# ---- dense columns ---------------------------------------------------------------------------

@dataclass(frozen=True)
class NumericColumn:
    """A real-valued feature of ``shape`` per example."""
    key: str
    shape: tuple = (1,)
    default_value: Any = None
    dtype: Any = _dt.float32
    normalizer_fn: Callable | None = None

    @property
    def name(self) -> str:
        """The column's name (inputs are concatenated in name order)."""
        return self.key

    @property
    def width(self) -> int:
        """The number of values per example in the dense output."""
        return int(np.prod(self.shape))

    def dense(self, features, scope=None):
        """The ``[batch, width]`` float32 values of ``features``."""
        x = cast(convert_to_tensor(features[self.key]), _dt.float32)
        if self.normalizer_fn is not None:
            x = self.normalizer_fn(x)
        return _rows(x, self.width)


@dataclass(frozen=True)
class BucketizedColumn:
    """A numeric column cut at ``boundaries`` (bucket ``i``: ``boundaries[i-1] <= x <
    boundaries[i]``); dense as one-hot buckets, categorical as bucket ids."""
    source_column: NumericColumn
    boundaries: tuple

    @property
    def name(self) -> str:
        """The column's name (inputs are concatenated in name order)."""
        return f"{self.source_column.name}_bucketized"

    @property
    def num_buckets(self) -> int:
        """How many ids the column can produce."""
        return (len(self.boundaries) + 1) * self.source_column.width

    @property
    def width(self) -> int:
        """The number of values per example in the dense output."""
        return self.num_buckets

    def ids(self, features):
        """The ``[batch, k]`` int64 ids of ``features`` (-1: no bucket)."""
        x = self.source_column.dense(features)
        ids = zeros_like(x, dtype=_dt.int64)
        for b in self.boundaries:
            ids = ids + cast(x >= float(b), _dt.int64)
        n = len(self.boundaries) + 1  # element j's buckets come after element j-1's
        return ids + constant(np.arange(self.source_column.width, dtype=np.int64) * n)

    def dense(self, features, scope=None):
        """The ``[batch, width]`` float32 values of ``features``."""
        hot = one_hot(self.ids(features), len(self.boundaries) + 1, dtype=_dt.float32)
        return _rows(hot, self.width)


# ---- categorical columns ---------------------------------------------------------------------

@dataclass(frozen=True)
class IdentityCategoricalColumn:
    """Integer ids in ``[0, num_buckets)``; others become ``default_value`` (or -1,
    which no bucket takes)."""
    key: str
    num_buckets: int
    default_value: int | None = None

    @property
    def name(self) -> str:
        """The column's name (inputs are concatenated in name order)."""
        return self.key

    def ids(self, features):
        """The ``[batch, k]`` int64 ids of ``features`` (-1: no bucket)."""
        ids = cast(convert_to_tensor(features[self.key]), _dt.int64)
        ok = logical_and(ids >= 0, ids < self.num_buckets)
        other = -1 if self.default_value is None else int(self.default_value)
        return _rows(where(ok, ids, ones_like(ids) * other))


@dataclass(frozen=True)
class VocabularyListCategoricalColumn:
    """Strings (or ints) looked up in ``vocabulary_list``: id = position; others get
    ``default_value`` (-1: no bucket) or, with ``num_oov_buckets``, bucket
    ``len(vocabulary) + hash % num_oov_buckets``."""
    key: str
    vocabulary_list: tuple
    dtype: Any = None
    default_value: int = -1
    num_oov_buckets: int = 0

    @property
    def name(self) -> str:
        """The column's name (inputs are concatenated in name order)."""
        return self.key

    @property
    def num_buckets(self) -> int:
        """How many ids the column can produce."""
        return len(self.vocabulary_list) + self.num_oov_buckets

    def ids(self, features):
        """The ``[batch, k]`` int64 ids of ``features`` (-1: no bucket)."""
        x = _rows(convert_to_tensor(features[self.key]))
        strings = x.dtype == _dt.string
        if strings:  # features may hold str or bytes (both are string): match either
            as_bytes = [v.encode() if isinstance(v, str) else bytes(v)
                        for v in self.vocabulary_list]
            hit = logical_or(
                equal(expand_dims(x, -1), constant(np.array(as_bytes, object))),
                equal(expand_dims(x, -1), constant(np.array(
                    [v.decode() for v in as_bytes], object))))
        else:
            vocab = cast(constant(np.array(self.vocabulary_list)), x.dtype)
            hit = equal(expand_dims(x, -1), vocab)
        found = reduce_any(hit, axis=-1)
        pos = argmax(cast(hit, _dt.int32), axis=-1, output_type=_dt.int64)
        if self.num_oov_buckets:
            key = x if strings else as_string(x)
            other = string_to_hash_bucket_fast(key, self.num_oov_buckets) + \
                len(self.vocabulary_list)
        else:
            other = ones_like(pos) * int(self.default_value)
        return where(found, pos, other)


@dataclass(frozen=True)
class IndicatorColumn:
    """A categorical column as a multi-hot ``[batch, num_buckets]`` (counts of each id)."""
    categorical_column: Any

    @property
    def name(self) -> str:
        """The column's name (inputs are concatenated in name order)."""
        return f"{self.categorical_column.name}_indicator"

    @property
    def width(self) -> int:
        """The number of values per example in the dense output."""
        return self.categorical_column.num_buckets

    def dense(self, features, scope=None):
        """The ``[batch, width]`` float32 values of ``features``."""
        hot = one_hot(self.categorical_column.ids(features), self.width,
                         dtype=_dt.float32)
        return reduce_sum(hot, axis=1)


@dataclass(frozen=True)
class EmbeddingColumn:
    """A categorical column as the ``combiner`` (``mean``, ``sum``, ``sqrtn``) of learned
    ``dimension``-wide vectors of its ids (ids outside the buckets are left out)."""
    categorical_column: Any
    dimension: int
    combiner: str = "mean"
    initializer: Any = None
    trainable: bool = True

    @property
    def name(self) -> str:
        """The column's name (inputs are concatenated in name order)."""
        return f"{self.categorical_column.name}_embedding"

    @property
    def width(self) -> int:
        """The number of values per example in the dense output."""
        return int(self.dimension)

    def dense(self, features, scope=None):
        """The ``[batch, width]`` float32 values of ``features``."""
        init = self.initializer or truncated_normal_initializer(
            stddev=1.0 / math.sqrt(self.dimension))
        table = get_variable("embedding_weights",
                                [self.categorical_column.num_buckets, self.dimension],
                                initializer=init, trainable=self.trainable)
        return _combine(table, self.categorical_column.ids(features), self.combiner)


def _combine(table, ids, combiner):
    """The ``combiner`` of the rows of ``table`` at ``ids`` (``[batch, k]``; -1: none)."""
    valid = cast(ids >= 0, _dt.float32)
    vecs = gather(table, maximum(ids, 0)) * expand_dims(valid, -1)
    total, count = reduce_sum(vecs, axis=1), reduce_sum(valid, axis=1, keepdims=True)
    if combiner == "sum":
        return total
    den = count if combiner == "mean" else sqrt(count)
    return total / maximum(den, 1.0)


# ---- constructors (TF's names and checks) ----------------------------------------------------

def numeric_column(key, shape=(1,), default_value=None, dtype=_dt.float32,
                   normalizer_fn=None) -> NumericColumn:
    """A real-valued column (``shape`` per example)."""
    shape = (int(shape),) if isinstance(shape, int) else tuple(int(d) for d in shape)
    if not isinstance(key, str):
        raise ValueError(f"key must be a string. Given: {key}")  # noqa: TRY004 (TF's class)
    if normalizer_fn is not None and not callable(normalizer_fn):
        raise TypeError(f"normalizer_fn must be a callable. Given: {normalizer_fn}")
    return NumericColumn(key, shape, default_value, _dt.as_dtype(dtype), normalizer_fn)


def bucketized_column(source_column, boundaries) -> BucketizedColumn:
    """``source_column`` (a numeric column) cut into buckets at sorted ``boundaries``."""
    if not isinstance(source_column, NumericColumn):
        raise ValueError(  # noqa: TRY004 (TF's class)
            f"source_column must be a column generated with numeric_column(). Given: "
            f"{source_column}")
    boundaries = tuple(float(b) for b in boundaries)
    if any(a >= b for a, b in pairwise(boundaries)):
        raise ValueError(f"boundaries must be a sorted list. Given: {list(boundaries)}")
    return BucketizedColumn(source_column, boundaries)


def categorical_column_with_identity(key, num_buckets, default_value=None):
    """Integer ids used as they are."""
    if num_buckets < 1:
        raise ValueError(f"num_buckets {num_buckets} < 1, column_name {key}")
    if default_value is not None and not 0 <= default_value < num_buckets:
        raise ValueError(f"default_value {default_value} not in range [0, {num_buckets}), "
                         f"column_name {key}")
    return IdentityCategoricalColumn(key, int(num_buckets), default_value)


def categorical_column_with_vocabulary_list(key, vocabulary_list, dtype=None,
                                            default_value=-1, num_oov_buckets=0):
    """Values looked up in an in-memory vocabulary."""
    vocab = tuple(vocabulary_list)
    if not vocab:
        raise ValueError(f"vocabulary_list {vocabulary_list} must be non-empty, column_name: "
                         f"{key}")
    if len(set(vocab)) != len(vocab):
        raise ValueError(f"Duplicate keys in vocabulary_list {vocabulary_list}, column_name: "
                         f"{key}")
    if num_oov_buckets and default_value != -1:
        raise ValueError(f"Can't specify both num_oov_buckets and default_value in {key}.")
    return VocabularyListCategoricalColumn(key, vocab, dtype, int(default_value),
                                           int(num_oov_buckets))


def indicator_column(categorical_column) -> IndicatorColumn:
    """A categorical column as a multi-hot dense column."""
    return IndicatorColumn(categorical_column)


def embedding_column(categorical_column, dimension, combiner="mean", initializer=None,
                     ckpt_to_load_from=None, tensor_name_in_ckpt=None, max_norm=None,
                     trainable=True) -> EmbeddingColumn:
    """A categorical column as learned ``dimension``-wide embeddings."""
    if dimension is None or dimension < 1:
        raise ValueError(f"Invalid dimension {dimension}.")
    if combiner not in ("mean", "sqrtn", "sum"):
        raise ValueError(f"Invalid combiner {combiner}; must be one of 'mean', 'sqrtn', "
                         "'sum'.")
    if initializer is not None and not callable(initializer):
        raise ValueError(f"initializer must be callable if specified. Embedding of column_name:"
                         f" {categorical_column.name}")
    return EmbeddingColumn(categorical_column, int(dimension), combiner, initializer,
                           trainable)


# ---- applying columns ------------------------------------------------------------------------

def _sorted_columns(feature_columns, dense_only):
    cols = list(feature_columns) if isinstance(feature_columns, (list, tuple, set)) \
        else [feature_columns]
    if not cols:
        raise ValueError("feature_columns must not be empty.")
    for c in cols:
        if dense_only and not hasattr(c, "dense"):
            raise ValueError("Items of feature_columns must be a _DenseColumn. You can wrap a "
                             "categorical column with an embedding_column or "
                             f"indicator_column. Given: {c}")
    return sorted(cols, key=lambda c: c.name)


def input_layer(features, feature_columns, weight_collections=None, trainable=True,
                cols_to_vars=None):
    """The dense columns of ``features`` side by side: a ``[batch, sum of widths]`` float32
    tensor (variables under ``input_layer/<column name>/``)."""
    cols = _sorted_columns(feature_columns, dense_only=True)
    with variable_scope(None, default_name="input_layer"):
        parts = []
        for c in cols:
            with variable_scope(None, default_name=c.name):
                parts.append(c.dense(features))
        return parts[0] if len(parts) == 1 else concat(parts, axis=1)


def linear_model(features, feature_columns, units=1, sparse_combiner="sum",
                 weight_collections=None, trainable=True, cols_to_vars=None):
    """``sum over columns of (column . weights) + bias``, ``[batch, units]``: a dense column
    multiplies ``linear_model/<name>/weights``, a categorical one sums the rows of its ids
    (``sparse_combiner``: ``sum``, ``mean`` or ``sqrtn``)."""
    cols = _sorted_columns(feature_columns, dense_only=False)
    with variable_scope(None, default_name="linear_model"):
        terms = []
        for c in cols:
            with variable_scope(c.name):
                if hasattr(c, "dense"):
                    x = c.dense(features)
                    w = get_variable("weights", [c.width, units],
                                        initializer=zeros_initializer(),
                                        trainable=trainable)
                    terms.append(matmul(x, w))
                else:
                    w = get_variable("weights", [c.num_buckets, units],
                                        initializer=zeros_initializer(),
                                        trainable=trainable)
                    terms.append(_combine(w, c.ids(features), sparse_combiner))
        bias = get_variable("bias_weights", [units], initializer=zeros_initializer(),
                               trainable=trainable)
        return add_n(terms) + bias
