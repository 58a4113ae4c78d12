"""``tv.data.Dataset`` — TF 1.x's graph-mode ``tf.data`` input pipelines.

Design
------
A :class:`Dataset` is a graph-side description: its element structure (a tensor, or tuples
and dicts of them, nested), each component's dtype and static shape, and how to make its
elements — a source (``from_tensor_slices``, ``from_tensors``, ``range``, ``zip``,
``from_generator``, ``TextLineDataset``, ``TFRecordDataset``, ``CsvDataset``) and
transformations (``map``, ``filter``, ``flat_map``, ``interleave``, ``batch``,
``padded_batch``, ``shuffle``, ``repeat``, ``take``, ``skip``, ``shard``, ``cache`` (memory
or files: :mod:`~tensorvm.ops.data.dataset_cache`), ``prefetch``, ``unbatch``, ``concatenate``,
``window``, ``scan``, ``take_while``, ``ignore_errors``, ``unique``, ``enumerate``:
:mod:`~tensorvm.ops.data.dataset_windows`; ``group_by_window``, ``bucket_by_sequence_length``:
:mod:`~tensorvm.ops.data.dataset_groups`; ``choose_from_datasets``, ``sample_from_datasets``,
``cardinality``, ``Options``: :mod:`~tensorvm.ops.data.dataset_misc`). ``reduce``,
``get_single_element`` and ``TFRecordWriter.write`` are ops that read a whole dataset when
they run (:mod:`tensorvm.ops.data.iterator_ops`). A component may be a ``tv.SparseTensor`` (a
``map`` returning ``parse_single_example`` with a ``VarLenFeature``, ``from_tensor_slices``
of one, ``dense_to_sparse_batch``): :mod:`~tensorvm.ops.data.dataset_sparse`. A dataset computes nothing by itself: an
iterator (:mod:`tensorvm.ops.data.iterator_ops`) compiles it into the stages of
:mod:`tensorvm.ops.data.dataset_pipeline`, which run inside the iterator's ops on its device.

The functions given to ``map`` and ``filter`` are traced once, as ``tv.while_loop`` traces a
body: into a graph of their own (:class:`~tensorvm.ops.control.while_loop.FuncGraph`) fed by
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

from ...framework import dtypes as _dt
from ...framework.errors import InvalidArgumentError
from ...framework.graph import Tensor, TensorShape, get_default_graph
from ...framework.sparse_tensor import SparseTensor, SparseTensorValue
from ...framework.tensor_conversion import convert_to_tensor
from . import dataset_pipeline as P
from . import dataset_sources as S
from ..common import static_value
from ..control.control_flow_ops import flatten, pack_as
from .dataset_sparse import is_sparse_leaf

__all__: list[str] = []  # exported as tv.data (tensorvm.tf_api.data)


# ---- structures ------------------------------------------------------------------------------

def _normalize(value, convert):
    """``value`` with tuples, namedtuples and dicts kept as structure and every other leaf
    (a list included: TF makes a tensor of it) passed through ``convert``."""
    if isinstance(value, dict):
        return {k: _normalize(value[k], convert) for k in sorted(value)}
    if isinstance(value, SparseTensorValue):  # a leaf (a sparse component), not a structure
        return convert(value)
    if isinstance(value, tuple):
        vals = [_normalize(v, convert) for v in value]
        return type(value)(*vals) if hasattr(value, "_fields") else tuple(vals)
    return convert(value)


def _shape_of(t):
    """A tensor's static shape as a tuple (a SparseTensor's: its dense shape's)."""
    if isinstance(t, SparseTensor):
        from .dataset_sparse import dense_shape_of
        return dense_shape_of(t)
    return None if t._shape is None else tuple(t._shape)


def _np_dtypes(dtypes) -> tuple:
    """The pipeline's NumPy dtype of each component (object for strings)."""
    return tuple(np.dtype(object) if d.is_string else d.np_dtype for d in dtypes)


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


class _Transforms:
    """The transformations module, imported on first use (it subclasses :class:`Dataset`)."""

    def __getattr__(self, name):
        from . import dataset_transforms
        return getattr(dataset_transforms, name)


class _Windows:
    """The window/scan module, imported on first use (it subclasses :class:`Dataset`)."""

    def __getattr__(self, name):
        from . import dataset_windows
        return getattr(dataset_windows, name)


T = _Transforms()
W = _Windows()


# ---- the base class --------------------------------------------------------------------------

class Dataset:
    """A sequence of elements, each a (nested) structure of tensors (TF 1.x ``tf.data``).

    Build one with a source (``Dataset.from_tensor_slices``, ``from_tensors``, ``range``,
    ``zip``, ``TextLineDataset``, ``TFRecordDataset``), chain transformations, and read it
    with ``make_one_shot_iterator()`` or ``make_initializable_iterator()``.
    """

    _nested = False  # True where each element is a structure of datasets (window())

    def __init__(self, structure, dtypes, shapes):
        self._structure = structure
        self._dtypes = tuple(dtypes)
        self._shapes = tuple(shapes)
        self._graph = get_default_graph()
        # per component: a SparseTensor (a structure leaf that is one; see dataset_sparse)
        leaves = flatten(structure)
        self._sparse = tuple(is_sparse_leaf(x) for x in leaves) \
            if len(leaves) == len(self._dtypes) else (False,) * len(self._dtypes)

    # ---- the element's description -------------------------------------------------------
    @property
    def output_types(self):
        return pack_as(self._structure, list(self._dtypes))

    @property
    def output_shapes(self):
        return pack_as(self._structure, [TensorShape(s) for s in self._shapes])

    @property
    def output_classes(self):
        return pack_as(self._structure, [SparseTensor if s else Tensor for s in self._sparse])

    def __repr__(self):
        return (f"<{type(self).__name__} shapes: {self.output_shapes}, types: "
                f"{self.output_types}>")

    def __iter__(self):
        raise RuntimeError("__iter__() is only supported inside of tf.function or when eager "
                           "execution is enabled; in a graph, read a dataset with "
                           "make_one_shot_iterator() or make_initializable_iterator()")

    def _compile(self, b: _Builder) -> P.Stage:
        raise TypeError(f"{type(self).__name__} cannot be iterated")  # pragma: no cover

    # ---- sources ---------------------------------------------------------------------------
    @staticmethod
    def from_tensor_slices(tensors) -> Dataset:
        """The slices of ``tensors`` along their first dimension (all components share it);
        a SparseTensor component gives SparseTensors of one rank less (rows without entries
        included)."""
        return _TensorSlices(tensors)

    @staticmethod
    def from_sparse_tensor_slices(sparse_tensor) -> Dataset:
        """The rows of ``sparse_tensor``, each as a tuple ``(indices, values, dense_shape)``
        of tensors of one rank less (TF 1.x's deprecated spelling)."""
        from .dataset_sparse import SparseTriples
        ds = _TensorSlices(SparseTensor.from_value(sparse_tensor))
        s = ds._shapes[0]
        rank = None if s is None else len(s)
        return T._Unary(ds, SparseTriples, (_dt.int64, ds._dtypes[0], _dt.int64),
                        [(None, rank), (None,), (rank,)], structure=(0, 0, 0))

    @staticmethod
    def from_tensors(tensors) -> Dataset:
        """One element: ``tensors`` itself."""
        return _Tensors(tensors)

    @staticmethod
    def range(*args) -> Dataset:
        """``range(stop)``, ``range(start, stop[, step])``: int64 scalars, as Python's."""
        return _Range(*args)

    @staticmethod
    def from_generator(generator, output_types, output_shapes=None, args=None) -> Dataset:
        """The elements a Python generator yields: ``generator(*args)`` is called when the
        iterator is initialised (and each epoch of a ``repeat``), on the iterator's device;
        ``args`` (tensors) arrive as NumPy values. ``output_types`` (and ``output_shapes``,
        default unknown) describe each element, nested as it is."""
        return _Generator(generator, output_types, output_shapes, args)

    @staticmethod
    def zip(datasets) -> Dataset:
        """Elements of ``datasets`` (a tuple or dict of datasets, nested) side by side, until
        the shortest ends."""
        return _Zip(datasets)

    @staticmethod
    def list_files(file_pattern, shuffle=None, seed=None) -> Dataset:
        """The files matching ``file_pattern`` (a glob, fsspec URL, or a list of them),
        listed now, shuffled unless ``shuffle=False``."""
        from ...storage.fsio import match_files
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
        return T._Map(self, map_func)

    def flat_map(self, map_func) -> Dataset:
        """The elements of the datasets ``map_func`` returns for each element, one dataset
        after another (``map_func`` is traced once; the datasets it builds read its
        arguments)."""
        return T._FlatMap(self, map_func, "flat_map")

    def interleave(self, map_func, cycle_length=None, block_length=1,
                   num_parallel_calls=None) -> Dataset:
        """Like :meth:`flat_map`, but ``cycle_length`` of the returned datasets are read in
        turn, ``block_length`` elements at a time (TF's order; ``cycle_length`` None or
        ``AUTOTUNE``: the number of CPU cores)."""
        return T._FlatMap(self, map_func, "interleave", cycle_length, block_length)

    def filter(self, predicate) -> Dataset:
        """The elements for which ``predicate`` (traced like ``map``'s function) is true."""
        return T._Filter(self, predicate)

    def batch(self, batch_size, drop_remainder=False) -> Dataset:
        """Consecutive elements stacked ``batch_size`` at a time; the last batch is smaller
        unless ``drop_remainder``."""
        return T._Batch(self, batch_size, drop_remainder)

    def padded_batch(self, batch_size, padded_shapes=None, padding_values=None,
                     drop_remainder=False) -> Dataset:
        """Like :meth:`batch`, padding each component to ``padded_shapes`` (``None``/-1 dims:
        the batch's largest) with ``padding_values`` (0 or ``""`` by default)."""
        return T._PaddedBatch(self, batch_size, padded_shapes, padding_values, drop_remainder)

    def unbatch(self) -> Dataset:
        """The rows of every element (the inverse of :meth:`batch`)."""
        W.refuse_nested(self, "unbatch")
        return T._Unary(self, P.Unbatch, self._dtypes, [None if s is None else s[1:]
                                                      for s in self._shapes],
                        sparse=self._sparse)

    def shuffle(self, buffer_size, seed=None, reshuffle_each_iteration=None) -> Dataset:
        """Elements drawn at random from a buffer of ``buffer_size`` (TF's algorithm); a
        ``seed`` (or the graph's seed) makes the order deterministic. Each epoch of a
        ``repeat`` is reshuffled unless ``reshuffle_each_iteration=False``."""
        return T._Shuffle(self, buffer_size, seed, reshuffle_each_iteration)

    def repeat(self, count=None) -> Dataset:
        """The elements ``count`` times (``None`` or -1: forever)."""
        return T._Counted(self, P.Repeat, count)

    def take(self, count) -> Dataset:
        """The first ``count`` elements (-1: all)."""
        return T._Counted(self, P.Take, count)

    def skip(self, count) -> Dataset:
        """All but the first ``count`` elements (-1: none)."""
        return T._Counted(self, P.Skip, count)

    def shard(self, num_shards, index) -> Dataset:
        """Every ``num_shards``-th element, starting at ``index``."""
        return T._Shard(self, num_shards, index)

    def cache(self, filename="") -> Dataset:
        """Keep the elements after the first complete pass; later passes replay them.
        Without ``filename``: in memory, per iterator initialisation (the epochs of a
        ``repeat``). With one (a path or fsspec URL): in files, read back by every later
        iterator, session or program (see :mod:`tensorvm.ops.data.dataset_cache`)."""
        if isinstance(filename, str) and not filename:
            return T._Unary(self, P.Cache, self._dtypes, self._shapes, keyed=True)
        from .dataset_cache import cached
        return cached(self, filename)

    def prefetch(self, buffer_size) -> Dataset:
        """Accepted for TF programs; elements are made when ``get_next`` asks for them."""
        return T._Unary(self, P.Identity, self._dtypes, self._shapes)

    def concatenate(self, dataset) -> Dataset:
        """This dataset's elements, then ``dataset``'s (same types and structure)."""
        return _Concatenate(self, dataset)

    def apply(self, transformation_func) -> Dataset:
        """``transformation_func(self)``."""
        return transformation_func(self)

    def window(self, size, shift=None, stride=1, drop_remainder=False) -> Dataset:
        """Windows of ``size`` consecutive elements (every ``stride``-th), a new one starting
        every ``shift`` elements (default ``size``); the last windows are shorter unless
        ``drop_remainder``. Each element is a dataset (per component, in the element's
        structure): read it with ``flat_map``, e.g. ``.flat_map(lambda w: w.batch(size))``."""
        return W._Window(self, size, shift, stride, drop_remainder)

    def reduce(self, initial_state, reduce_func):
        """The state after ``reduce_func(state, element)`` over every element, from
        ``initial_state`` (a structure of tensors); tensors of that structure, computed
        when they are run. The state's dtypes and structure must not change; its static
        shape is relaxed where the function changes it."""
        from .iterator_ops import reduce_dataset
        return reduce_dataset(self, initial_state, reduce_func)

    def scan(self, initial_state, scan_func) -> Dataset:
        """``tf.data.experimental.scan``: ``scan_func(state, element)`` returns
        ``(new_state, output)``; the elements are the outputs, the state carried on."""
        return W._Scan(self, initial_state, scan_func)

    def take_while(self, predicate) -> Dataset:
        """The elements before the first one for which ``predicate`` is false."""
        return W._TakeWhile(self, predicate)

    def ignore_errors(self) -> Dataset:
        """The elements, less those whose computation (a ``map``/``filter`` function, a
        generator's element conversion) failed; an error that ends an input ends it."""
        return W._IgnoreErrors(self)

    def unique(self) -> Dataset:
        """Each element (int32, int64 or string scalars) once, at its first occurrence."""
        return W._Unique(self)

    def enumerate(self, start=0) -> Dataset:
        """``(index, element)`` pairs, the index an int64 counting from ``start``."""
        return Dataset.zip((Dataset.range(start, np.iinfo(np.int64).max), self))

    def options(self):
        """The ``tv.data.Options`` given by :meth:`with_options` here or to an input (kept;
        they change nothing in tensorvm's pipeline)."""
        from .dataset_misc import Options
        own = getattr(self, "_options", None)
        if own is not None:
            return own
        out = Options()  # TF: a dataset has the merged options of its inputs
        inputs = [getattr(self, k, None) for k in ("_child", "_a", "_c")] + \
            list(getattr(self, "_children", ()))
        for d in inputs:
            if isinstance(d, Dataset):
                out = out.merge(d.options())
        return out

    def with_options(self, options) -> Dataset:
        """This dataset with ``options`` (a ``tv.data.Options``) merged into its own."""
        from .dataset_misc import with_options
        return with_options(self, options)

    def map_with_legacy_function(self, map_func, num_parallel_calls=None) -> Dataset:
        """:meth:`map` (TF 1.x's spelling for functions traced the legacy way)."""
        return self.map(map_func, num_parallel_calls)

    def filter_with_legacy_function(self, predicate) -> Dataset:
        """:meth:`filter` (TF 1.x's spelling for functions traced the legacy way)."""
        return self.filter(predicate)

    def get_single_element(self):
        """The one element of this dataset, as tensors (``InvalidArgumentError`` when it has
        none or more than one)."""
        from .iterator_ops import get_single_element
        return get_single_element(self)

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
        if isinstance(x, (SparseTensor, SparseTensorValue)):
            return SparseTensor.from_value(x)
        return convert_to_tensor(x)
    return _normalize(value, conv)


class _TensorSlices(Dataset):
    def __init__(self, tensors):
        s = _tensors_of(tensors, "from_tensor_slices")
        flat = flatten(s)
        n = None
        shapes = [_shape_of(t) for t in flat]
        for sh in shapes:
            if sh is not None and len(sh) == 0:
                raise ValueError("Unbatching a tensor is only supported for rank >= 1")
            n = _merge_dim(n, None if sh is None else sh[0])
        self._flat = flat
        super().__init__(s, [t.dtype for t in flat],
                         [None if sh is None else tuple(sh[1:]) for sh in shapes])

    def _compile(self, b):
        if any(self._sparse):
            from .dataset_sparse import SparseSlices, refs
            return SparseSlices(refs(b, self._flat), self._sparse, _np_dtypes(self._dtypes))
        return S.TensorSlices(tuple(b.ref(t) for t in self._flat),
                              tuple(d.np_dtype for d in self._dtypes))


class _Tensors(Dataset):
    def __init__(self, tensors):
        s = _tensors_of(tensors, "from_tensors")
        self._flat = flatten(s)
        super().__init__(s, [t.dtype for t in self._flat], [_shape_of(t) for t in self._flat])

    def _compile(self, b):
        if any(self._sparse):
            from .dataset_sparse import SparseSlices, refs
            return SparseSlices(refs(b, self._flat), self._sparse, _np_dtypes(self._dtypes),
                                whole=True)
        return S.Tensors(tuple(b.ref(t) for t in self._flat),
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
        return S.Range(*(b.ref(a) for a in self._args))


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
        nested = {d._nested for d in self._children}
        if len(nested) > 1:
            raise TypeError("zip: the datasets must all be windows (datasets of datasets) or "
                            "none; zip the windows' components inside flat_map instead")
        self._nested = nested.pop() if nested else False

    def _compile(self, b):
        return S.Zip(tuple(d._compile(b) for d in self._children),
                     tuple(len(d._dtypes) for d in self._children))


class _Concatenate(Dataset):
    def __init__(self, a, c):
        if a._dtypes != c._dtypes or flatten_structure(a) != flatten_structure(c):
            raise TypeError(f"Two datasets to concatenate have different types "
                            f"{a.output_types} and {c.output_types}")
        if a._sparse != c._sparse:
            raise TypeError(f"Two datasets to concatenate have different classes "
                            f"{a.output_classes} and {c.output_classes}")
        if a._nested != c._nested:
            raise TypeError("concatenate: a window dataset (of datasets) and a dataset of "
                            "tensors cannot be concatenated")
        self._a, self._c = a, c
        shapes = [None if x is None or y is None or len(x) != len(y) else
                  tuple(p if p == q else None for p, q in zip(x, y))
                  for x, y in zip(a._shapes, c._shapes)]
        super().__init__(a._structure, a._dtypes, shapes)
        self._nested = a._nested

    def _compile(self, b):
        return S.Concatenate(self._a._compile(b), self._c._compile(b))


def flatten_structure(ds):
    from ..control.control_flow_ops import structure
    return structure(ds._structure)


def _types_structure(types):
    """The structure of ``output_types`` (tuples, dicts; a list is a tuple; leaves 0)."""
    if isinstance(types, dict):
        return {k: _types_structure(types[k]) for k in sorted(types)}
    if isinstance(types, (tuple, list)):
        vals = [_types_structure(v) for v in types]
        return type(types)(*vals) if hasattr(types, "_fields") else tuple(vals)
    return 0


class _Generator(Dataset):
    def __init__(self, generator, output_types, output_shapes, args):
        if not callable(generator):
            raise TypeError("`generator` must be callable.")
        structure_ = _types_structure(output_types)
        dtypes = [_dt.as_dtype(d) for d in _flatten_like(structure_, output_types)]
        if output_shapes is None:
            shapes = [None] * len(dtypes)
        else:
            shapes = [_as_shape(s).dims for s in _flatten_like(structure_, output_shapes)]
        self._fn = generator
        self._args = [convert_to_tensor(a) for a in (args or ())]
        super().__init__(structure_, dtypes, shapes)

    def _compile(self, b):
        return S.Generator(self._fn, tuple(b.ref(a) for a in self._args), self._structure,
                           tuple(np.dtype(object) if d.is_string else d.np_dtype
                                 for d in self._dtypes), self._shapes)


def _flatten_like(structure, value):
    """``value`` (shapes or padding values, nested like ``structure``) as a flat list."""
    if isinstance(structure, dict):
        return [x for k in sorted(structure) for x in _flatten_like(structure[k], value[k])]
    if isinstance(structure, tuple):
        return [x for s, v in zip(structure, value) for x in _flatten_like(s, v)]
    return [value]
