"""``tv.data.Dataset`` — TF 1.x's graph-mode ``tf.data`` input pipelines.

Design
------
A :class:`Dataset` is a graph-side description: its element structure (a tensor, or tuples
and dicts of them, nested), each component's dtype and static shape, and how to make its
elements — a source (``from_tensor_slices``, ``from_tensors``, ``range``, ``zip``,
``TextLineDataset``, ``TFRecordDataset``) and transformations (``map``, ``filter``, ``batch``,
``padded_batch``, ``shuffle``, ``repeat``, ``take``, ``skip``, ``shard``, ``cache``,
``prefetch``, ``unbatch``, ``concatenate``). A dataset computes nothing by itself: an
iterator (:mod:`tensorvm.ops.iterator_ops`) compiles it into the stages of
:mod:`tensorvm.ops.dataset_pipeline`, which run inside the iterator's ops on its device.

The functions given to ``map`` and ``filter`` are traced once, as ``tv.while_loop`` traces a
body: into a graph of their own (:class:`~tensorvm.ops.while_loop.FuncGraph`) fed by
placeholders of the element's components, compiled to one stage program on the iterator's
device. Tensors of the outer graph that they read are captured: they become inputs of the op
that initialises the iterator, like the tensors a source slices. Parameters (batch sizes,
counts, file names …) may be Python values or tensors; a tensor known while the graph is
built (a constant) is embedded in the pipeline, any other (a placeholder fed to an
initializable iterator's ``initializer``) is an input of that op.

>>> import tensorvm as tv
>>> ds = tv.data.Dataset.range(10).filter(lambda x: x % 3 > 0).map(lambda x: x * 2).batch(4)
>>> nxt = ds.make_one_shot_iterator().get_next()
>>> with tv.Session() as s:
...     [s.run(nxt).tolist() for _ in range(2)]
[[2, 4, 8, 10], [14, 16]]
"""
from __future__ import annotations

import itertools

import numpy as np

from .. import dtypes as _dt
from ..errors import InvalidArgumentError, OpError
from ..graph import Operation, Tensor, TensorShape, _user_location, get_default_graph
from ..tensor_conversion import convert_to_tensor
from . import dataset_pipeline as P
from .common import static_value
from .control_flow_ops import flatten, pack_as

__all__: list[str] = []  # exported as tv.data (tensorvm.data)


# ---- structures ------------------------------------------------------------------------------

def _normalize(value, convert):
    """``value`` with tuples, namedtuples and dicts kept as structure and every other leaf
    (a list included: TF makes a tensor of it) passed through ``convert``."""
    if isinstance(value, dict):
        return {k: _normalize(value[k], convert) for k in sorted(value)}
    if isinstance(value, tuple):
        vals = [_normalize(v, convert) for v in value]
        return type(value)(*vals) if hasattr(value, "_fields") else tuple(vals)
    return convert(value)


def _shape_of(t: Tensor):
    return None if t._shape is None else tuple(t._shape)


def _as_shape(s) -> TensorShape:
    return s if isinstance(s, TensorShape) else TensorShape(s)


def _merge_dim(a, b):
    if a is not None and b is not None and a != b:
        raise ValueError(f"Dimensions {a} and {b} are not compatible")
    return a if a is not None else b


class _Builder:
    """Collects what a pipeline reads: constants are embedded, other tensors become inputs of
    the iterator's op (by first appearance)."""

    def __init__(self, one_shot: bool):
        self.one_shot = one_shot
        self.inputs: list[Tensor] = []
        self._index: dict = {}
        self._keys = itertools.count(1)

    def key(self) -> int:
        return next(self._keys)

    def ref(self, x) -> P.Ref:
        if not isinstance(x, Tensor):
            return P.Ref(const=x)
        v = static_value(x)
        if v is not None:
            return P.Ref(const=v)
        if self.one_shot and x.op.type == "Placeholder":
            raise ValueError(f"Cannot capture a placeholder (name:{x.op.name}, "
                             f"type:Placeholder) by value.")
        if x not in self._index:
            self._index[x] = len(self.inputs)
            self.inputs.append(x)
        return P.Ref(index=self._index[x])


def _scalar(x, dtype, what: str):
    """A scalar parameter: a Python value or a tensor of ``dtype``."""
    if x is None or not isinstance(x, (Tensor,)) and not hasattr(x, "_as_graph_element"):
        return x
    t = convert_to_tensor(x, dtype=dtype)
    if t._shape not in (None, ()):
        raise InvalidArgumentError(f"{what} must be a scalar, got shape {list(t._shape)}")
    return t


def _static_int(x):
    v = x if not isinstance(x, Tensor) else static_value(x)
    return None if v is None else int(np.asarray(v))


# ---- the base class --------------------------------------------------------------------------

class Dataset:
    """A sequence of elements, each a (nested) structure of tensors (TF 1.x ``tf.data``).

    Build one with a source (``Dataset.from_tensor_slices``, ``from_tensors``, ``range``,
    ``zip``, ``TextLineDataset``, ``TFRecordDataset``), chain transformations, and read it
    with ``make_one_shot_iterator()`` or ``make_initializable_iterator()``.
    """

    def __init__(self, structure, dtypes, shapes):
        self._structure = structure
        self._dtypes = tuple(dtypes)
        self._shapes = tuple(shapes)
        self._graph = get_default_graph()

    # ---- the element's description -------------------------------------------------------
    @property
    def output_types(self):
        return pack_as(self._structure, list(self._dtypes))

    @property
    def output_shapes(self):
        return pack_as(self._structure, [TensorShape(s) for s in self._shapes])

    @property
    def output_classes(self):
        return pack_as(self._structure, [Tensor] * len(self._dtypes))

    def __repr__(self):
        return (f"<{type(self).__name__} shapes: {self.output_shapes}, types: "
                f"{self.output_types}>")

    def _compile(self, b: _Builder) -> P.Stage:
        raise TypeError(f"{type(self).__name__} cannot be iterated")  # pragma: no cover

    # ---- sources ---------------------------------------------------------------------------
    @staticmethod
    def from_tensor_slices(tensors) -> Dataset:
        """The slices of ``tensors`` along their first dimension (all components share it)."""
        return _TensorSlices(tensors)

    @staticmethod
    def from_tensors(tensors) -> Dataset:
        """One element: ``tensors`` itself."""
        return _Tensors(tensors)

    @staticmethod
    def range(*args) -> Dataset:
        """``range(stop)``, ``range(start, stop[, step])``: int64 scalars, as Python's."""
        return _Range(*args)

    @staticmethod
    def zip(datasets) -> Dataset:
        """Elements of ``datasets`` (a tuple or dict of datasets, nested) side by side, until
        the shortest ends."""
        return _Zip(datasets)

    @staticmethod
    def list_files(file_pattern, shuffle=None, seed=None) -> Dataset:
        """The files matching ``file_pattern`` (a glob, fsspec URL, or a list of them),
        listed now, shuffled unless ``shuffle=False``."""
        from ..train.tf_input import match_files
        pats = static_value(file_pattern)
        if pats is None:
            raise InvalidArgumentError("list_files: the pattern must be known when the graph "
                                       "is built")
        files = match_files([str(p) for p in np.asarray(pats, dtype=object).reshape(-1)])
        if not files:
            raise InvalidArgumentError(f"No files matched pattern: {file_pattern}")
        ds = Dataset.from_tensor_slices(np.asarray(files, dtype=object))
        return ds if shuffle is False else ds.shuffle(len(files), seed=seed)

    # ---- transformations -----------------------------------------------------------------
    def map(self, map_func, num_parallel_calls=None) -> Dataset:
        """``map_func`` applied to each element (a tuple element is passed as arguments);
        traced once into tensor ops. ``num_parallel_calls`` is accepted (elements are mapped
        in order, one after another)."""
        return _Map(self, map_func)

    def filter(self, predicate) -> Dataset:
        """The elements for which ``predicate`` (traced like ``map``'s function) is true."""
        return _Filter(self, predicate)

    def batch(self, batch_size, drop_remainder=False) -> Dataset:
        """Consecutive elements stacked ``batch_size`` at a time; the last batch is smaller
        unless ``drop_remainder``."""
        return _Batch(self, batch_size, drop_remainder)

    def padded_batch(self, batch_size, padded_shapes=None, padding_values=None,
                     drop_remainder=False) -> Dataset:
        """Like :meth:`batch`, padding each component to ``padded_shapes`` (``None``/-1 dims:
        the batch's largest) with ``padding_values`` (0 or ``""`` by default)."""
        return _PaddedBatch(self, batch_size, padded_shapes, padding_values, drop_remainder)

    def unbatch(self) -> Dataset:
        """The rows of every element (the inverse of :meth:`batch`)."""
        return _Unary(self, P.Unbatch, self._dtypes, [None if s is None else s[1:]
                                                      for s in self._shapes])

    def shuffle(self, buffer_size, seed=None, reshuffle_each_iteration=None) -> Dataset:
        """Elements drawn at random from a buffer of ``buffer_size`` (TF's algorithm); a
        ``seed`` (or the graph's seed) makes the order deterministic. Each epoch of a
        ``repeat`` is reshuffled unless ``reshuffle_each_iteration=False``."""
        return _Shuffle(self, buffer_size, seed, reshuffle_each_iteration)

    def repeat(self, count=None) -> Dataset:
        """The elements ``count`` times (``None`` or -1: forever)."""
        return _Counted(self, P.Repeat, count)

    def take(self, count) -> Dataset:
        """The first ``count`` elements (-1: all)."""
        return _Counted(self, P.Take, count)

    def skip(self, count) -> Dataset:
        """All but the first ``count`` elements (-1: none)."""
        return _Counted(self, P.Skip, count)

    def shard(self, num_shards, index) -> Dataset:
        """Every ``num_shards``-th element, starting at ``index``."""
        return _Shard(self, num_shards, index)

    def cache(self, filename="") -> Dataset:
        """Keep the elements in memory after the first complete pass; later passes (the
        epochs of a ``repeat``) replay them. A ``filename`` is accepted and ignored (the
        cache is in memory, per iterator initialisation)."""
        return _Unary(self, P.Cache, self._dtypes, self._shapes, keyed=True)

    def prefetch(self, buffer_size) -> Dataset:
        """Accepted for TF programs; elements are made when ``get_next`` asks for them."""
        return _Unary(self, P.Identity, self._dtypes, self._shapes)

    def concatenate(self, dataset) -> Dataset:
        """This dataset's elements, then ``dataset``'s (same types and structure)."""
        return _Concatenate(self, dataset)

    def apply(self, transformation_func) -> Dataset:
        """``transformation_func(self)``."""
        return transformation_func(self)

    # ---- iterators -------------------------------------------------------------------------
    def make_one_shot_iterator(self):
        """An iterator that initialises itself on first use (no feeds)."""
        from .iterator_ops import Iterator
        return Iterator._one_shot(self)

    def make_initializable_iterator(self, shared_name=None):
        """An iterator started (and restarted) by running its ``initializer``, with any
        placeholders the dataset reads fed then."""
        from .iterator_ops import Iterator
        return Iterator._initializable(self, shared_name)


# ---- sources ---------------------------------------------------------------------------------

def _tensors_of(value, what):
    def conv(x):
        if isinstance(x, Dataset) or x is None:
            raise TypeError(f"{what}: unsupported component {x!r}")
        return convert_to_tensor(x)
    return _normalize(value, conv)


class _TensorSlices(Dataset):
    def __init__(self, tensors):
        s = _tensors_of(tensors, "from_tensor_slices")
        flat = flatten(s)
        n = None
        for t in flat:
            if t._shape is not None and len(t._shape) == 0:
                raise ValueError("Unbatching a tensor is only supported for rank >= 1")
            n = _merge_dim(n, None if t._shape is None else t._shape[0])
        self._flat = flat
        super().__init__(s, [t.dtype for t in flat],
                         [None if t._shape is None else tuple(t._shape[1:]) for t in flat])

    def _compile(self, b):
        return P.TensorSlices(tuple(b.ref(t) for t in self._flat),
                              tuple(d.np_dtype for d in self._dtypes))


class _Tensors(Dataset):
    def __init__(self, tensors):
        s = _tensors_of(tensors, "from_tensors")
        self._flat = flatten(s)
        super().__init__(s, [t.dtype for t in self._flat], [_shape_of(t) for t in self._flat])

    def _compile(self, b):
        return P.Tensors(tuple(b.ref(t) for t in self._flat),
                         tuple(d.np_dtype for d in self._dtypes))


class _Range(Dataset):
    def __init__(self, *args):
        if not 1 <= len(args) <= 3:
            raise TypeError(f"range() takes 1 to 3 arguments, got {len(args)}")
        start, stop, step = (0, args[0], 1) if len(args) == 1 else \
            (args[0], args[1], args[2] if len(args) == 3 else 1)
        self._args = [_scalar(a, _dt.int64, "range") for a in (start, stop, step)]
        if _static_int(self._args[2]) == 0:
            raise InvalidArgumentError("step must be a non-zero integer.")
        super().__init__(0, [_dt.int64], [()])

    def _compile(self, b):
        return P.Range(*(b.ref(a) for a in self._args))


class _Zip(Dataset):
    def __init__(self, datasets):
        def check(d):
            if not isinstance(d, Dataset):
                raise TypeError(f"The argument to `Dataset.zip()` must be a (nested) "
                                f"structure of `Dataset` objects, got {d!r}")
            return d
        s = _normalize(datasets, check)
        self._children = flatten(s)
        structure = _normalize(s, lambda d: d._structure)
        super().__init__(structure, [t for d in self._children for t in d._dtypes],
                         [x for d in self._children for x in d._shapes])

    def _compile(self, b):
        return P.Zip(tuple(d._compile(b) for d in self._children),
                     tuple(len(d._dtypes) for d in self._children))


class _Concatenate(Dataset):
    def __init__(self, a, c):
        if a._dtypes != c._dtypes or flatten_structure(a) != flatten_structure(c):
            raise TypeError(f"Two datasets to concatenate have different types "
                            f"{a.output_types} and {c.output_types}")
        self._a, self._c = a, c
        shapes = [None if x is None or y is None or len(x) != len(y) else
                  tuple(p if p == q else None for p, q in zip(x, y))
                  for x, y in zip(a._shapes, c._shapes)]
        super().__init__(a._structure, a._dtypes, shapes)

    def _compile(self, b):
        return P.Concatenate(self._a._compile(b), self._c._compile(b))


def flatten_structure(ds):
    from .control_flow_ops import structure
    return structure(ds._structure)


class _FileSource(Dataset):
    _stage = None

    def __init__(self, filenames, compression_type=None, buffer_size=None):
        if isinstance(filenames, (list, tuple)) and not filenames:
            raise InvalidArgumentError(f"{type(self).__name__}: filenames is empty")
        self._files = filenames if isinstance(filenames, Tensor) else \
            convert_to_tensor(np.asarray(filenames, dtype=object))
        if self._files.dtype != _dt.string:
            raise TypeError(f"`filenames` must be a `tf.Tensor` of `tf.string`, got "
                            f"{self._files.dtype.name}")
        comp = static_value(compression_type) if compression_type is not None else ""
        self._compression = "" if comp is None else str(np.asarray(comp, dtype=object)[()])
        super().__init__(0, [_dt.string], [()])

    def _compile(self, b):
        return self._stage(b.ref(self._files), self._compression)


class TextLineDataset(_FileSource):
    """The lines of text files (``filenames``: a URL, a list of them, or a string tensor;
    any fsspec URL), terminators removed, one file after another. ``compression_type``:
    ``""`` or ``"GZIP"``. Lines are ``str`` (tensorvm's text strings)."""
    _stage = P.TextLines


class TFRecordDataset(_FileSource):
    """The records (``bytes``) of TFRecord files, verified by their CRCs; ``compression_type``
    ``""``, ``"GZIP"`` or ``"ZLIB"``."""
    _stage = P.TFRecords


# ---- transformations -------------------------------------------------------------------------

class _Unary(Dataset):
    def __init__(self, child, stage, dtypes, shapes, keyed=False):
        self._child, self._stage, self._keyed = child, stage, keyed
        super().__init__(child._structure, dtypes, shapes)

    def _compile(self, b):
        child = self._child._compile(b)
        return self._stage(child, key=b.key()) if self._keyed else self._stage(child)


class _Counted(Dataset):
    def __init__(self, child, stage, count):
        self._child, self._stage = child, stage
        self._count = _scalar(count, _dt.int64, stage.__name__.lower() + " count")
        super().__init__(child._structure, child._dtypes, child._shapes)

    def _compile(self, b):
        return self._stage(self._child._compile(b), b.ref(self._count))


class _Shard(Dataset):
    def __init__(self, child, num_shards, index):
        self._child = child
        self._n = _scalar(num_shards, _dt.int64, "num_shards")
        self._i = _scalar(index, _dt.int64, "index")
        n, i = _static_int(self._n), _static_int(self._i)
        if n is not None and n <= 0:
            raise InvalidArgumentError(f"num_shards must be > 0, got {n}")
        if n is not None and i is not None and not 0 <= i < n:
            raise InvalidArgumentError(f"index must be in [0, num_shards), got {i}")
        super().__init__(child._structure, child._dtypes, child._shapes)

    def _compile(self, b):
        return P.Shard(self._child._compile(b), b.ref(self._n), b.ref(self._i))


class _Shuffle(Dataset):
    def __init__(self, child, buffer_size, seed, reshuffle):
        from .random_ops import get_seed
        self._child = child
        self._size = _scalar(buffer_size, _dt.int64, "buffer_size")
        n = _static_int(self._size)
        if n is not None and n <= 0:
            raise InvalidArgumentError("buffer_size must be greater than zero.")
        self._seeds = get_seed(None if seed is None else _static_int(seed))
        self._reshuffle = True if reshuffle is None else bool(reshuffle)
        super().__init__(child._structure, child._dtypes, child._shapes)

    def _compile(self, b):
        s1, s2 = self._seeds
        return P.Shuffle(self._child._compile(b), b.ref(self._size), s1, s2, self._reshuffle,
                         key=b.key())


def _batch_size(batch_size):
    t = _scalar(batch_size, _dt.int64, "batch_size")
    n = _static_int(t)
    if n is not None and n <= 0:
        raise InvalidArgumentError("Batch size must be greater than zero.")
    return t, n


class _Batch(Dataset):
    def __init__(self, child, batch_size, drop_remainder):
        self._child = child
        self._size, n = _batch_size(batch_size)
        self._drop = bool(drop_remainder)
        lead = n if self._drop else None
        super().__init__(child._structure, child._dtypes,
                         [None if s is None else (lead,) + s for s in child._shapes])

    def _compile(self, b):
        return P.Batch(self._child._compile(b), b.ref(self._size), self._drop)


class _PaddedBatch(Dataset):
    def __init__(self, child, batch_size, padded_shapes, padding_values, drop_remainder):
        self._child = child
        self._size, n = _batch_size(batch_size)
        self._drop = bool(drop_remainder)
        if padded_shapes is None:
            shapes = list(child._shapes)
            if any(s is None for s in shapes):
                raise ValueError("padded_batch: padded_shapes is required for components of "
                                 "unknown rank")
        else:
            shapes = [None if s is None else tuple(None if d is None or d == -1 else int(d)
                                                   for d in _as_shape(s))
                      for s in _flatten_like(child._structure, padded_shapes)]
        for got, want in zip(child._shapes, shapes):
            if got is not None and (want is None or len(got) != len(want) or
                                    any(w is not None and g is not None and g > w
                                        for g, w in zip(got, want))):
                raise ValueError(f"The padded shape {want} is not compatible with the "
                                 f"corresponding input component shape {got}.")
        self._padded = tuple(shapes)
        if padding_values is None:
            pads = [b"" if d.is_string else 0 for d in child._dtypes]
        else:
            pads = _flatten_like(child._structure, padding_values)
        self._pads = [_scalar(p, d, "padding_values") for p, d in zip(pads, child._dtypes)]
        lead = n if self._drop else None
        super().__init__(child._structure, child._dtypes, [(lead,) + s for s in shapes])

    def _compile(self, b):
        return P.PaddedBatch(self._child._compile(b), b.ref(self._size), self._padded,
                             tuple(b.ref(p) for p in self._pads), self._drop,
                             tuple(d.np_dtype if not d.is_string else np.dtype(object)
                                   for d in self._dtypes))


def _flatten_like(structure, value):
    """``value`` (shapes or padding values, nested like ``structure``) as a flat list."""
    if isinstance(structure, dict):
        return [x for k in sorted(structure) for x in _flatten_like(structure[k], value[k])]
    if isinstance(structure, tuple):
        return [x for s, v in zip(structure, value) for x in _flatten_like(s, v)]
    return [value]


# ---- traced functions ------------------------------------------------------------------------

def _trace(ds: Dataset, fn, what: str):
    """Trace ``fn`` on placeholders of ``ds``'s element; returns the Func's pieces."""
    from .array_ops import placeholder
    from .while_loop import FuncGraph
    if not callable(fn):
        raise TypeError(f"{what}: the function must be callable, got {fn!r}")
    g = ds._graph
    fg = FuncGraph(g, f"Dataset.{what}")
    with fg.as_default():
        phs = [placeholder(d, s, name="arg") for d, s in zip(ds._dtypes, ds._shapes)]
        elem = pack_as(ds._structure, phs)
        res = fn(*elem) if type(elem) is tuple else fn(elem)
    return fg, phs, res


def _result(value, what: str):
    def conv(x):
        if x is None or isinstance(x, (Operation, Dataset)) or callable(x) and \
                not isinstance(x, Tensor):
            raise TypeError(f"Unsupported return value from function passed to "
                            f"Dataset.{what}(): {x}.")
        try:
            return convert_to_tensor(x)
        except (TypeError, ValueError, OpError) as e:
            raise TypeError(f"Unsupported return value from function passed to "
                            f"Dataset.{what}(): {x}.") from e
    if isinstance(value, list):  # TF: a list returned by map_func is a tuple
        value = tuple(value)
    return _normalize(value, conv)


class _Map(Dataset):
    def __init__(self, child, fn):
        from .while_loop import Func
        fg, phs, res = _trace(child, fn, "map")
        with fg.as_default():
            out = _result(res, "map")
        flat = flatten(out)
        if not flat:
            raise TypeError("Unsupported return value from function passed to Dataset.map(): "
                            "an empty structure.")
        self._child = child
        self._captures = list(fg.captures)
        self._func = Func(fg, phs + list(fg.captures.values()), flat, "Dataset.map",
                          _user_location())
        super().__init__(out, [t.dtype for t in flat], [_shape_of(t) for t in flat])

    def _compile(self, b):
        return P.Map(self._child._compile(b), self._func,
                     tuple(b.ref(t) for t in self._captures),
                     tuple(d.np_dtype if not d.is_string else np.dtype(object)
                           for d in self._dtypes))


class _Filter(Dataset):
    def __init__(self, child, predicate):
        from .while_loop import Func
        fg, phs, res = _trace(child, predicate, "filter")
        with fg.as_default():
            out = convert_to_tensor(res) if isinstance(res, (Tensor, bool, np.bool_)) else res
        if not isinstance(out, Tensor) or out.dtype != _dt.bool_ or \
                out._shape not in (None, ()):
            kind = (f"TensorSpec(shape={_shape_of(out)}, dtype=tf.{out.dtype.name}, name=None)"
                    if isinstance(out, Tensor) else repr(out))
            raise ValueError("Invalid `predicate`. `predicate` must return a `tf.bool` scalar "
                             f"tensor, but its return type is {kind}.")
        self._child = child
        self._captures = list(fg.captures)
        self._func = Func(fg, phs + list(fg.captures.values()), [out], "Dataset.filter",
                          _user_location())
        super().__init__(child._structure, child._dtypes, child._shapes)

    def _compile(self, b):
        return P.Filter(self._child._compile(b), self._func,
                        tuple(b.ref(t) for t in self._captures))
