"""The transformations of ``tv.data.Dataset`` (graph side): each is a :class:`Dataset`
whose ``_compile`` makes its stage of :mod:`tensorvm.ops.data.dataset_pipeline`. ``map`` and
``filter`` trace their function once, as ``tv.while_loop`` traces a body (see
:mod:`tensorvm.ops.data.dataset_ops`).
"""
from __future__ import annotations

import numpy as np

from ...framework import dtypes as _dt
from ...framework.errors import InvalidArgumentError, OpError
from ...framework.graph import Operation, Tensor, _user_location
from ...framework.sparse_tensor import SparseTensor, SparseTensorValue
from ...framework.tensor_conversion import convert_to_tensor
from . import dataset_pipeline as P
from ..common import static_value
from ..control.control_flow_ops import flatten, pack_as
from .dataset_ops import (
    Dataset,
    _as_shape,
    _Builder,
    _flatten_like,
    _normalize,
    _np_dtypes,
    _scalar,
    _shape_of,
    _static_int,
)


class _Unary(Dataset):
    def __init__(self, child, stage, dtypes, shapes, keyed=False, sparse=None, structure=None):
        self._child, self._stage, self._keyed = child, stage, keyed
        self._stage_sparse = sparse  # given: the stage takes the sparse flags
        super().__init__(child._structure if structure is None else structure, dtypes, shapes)
        self._nested = child._nested

    def _compile(self, b):
        child = self._child._compile(b)
        if self._keyed:
            return self._stage(child, key=b.key())
        if self._stage_sparse is not None:
            return self._stage(child, sparse=self._stage_sparse)
        return self._stage(child)


class _Counted(Dataset):
    def __init__(self, child, stage, count):
        self._child, self._stage = child, stage
        self._count = _scalar(count, _dt.int64, stage.__name__.lower() + " count")
        super().__init__(child._structure, child._dtypes, child._shapes)
        self._nested = child._nested

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
        self._nested = child._nested

    def _compile(self, b):
        return P.Shard(self._child._compile(b), b.ref(self._n), b.ref(self._i))


class _Shuffle(Dataset):
    def __init__(self, child, buffer_size, seed, reshuffle):
        from ..math.random_ops import get_seed
        self._child = child
        self._size = _scalar(buffer_size, _dt.int64, "buffer_size")
        n = _static_int(self._size)
        if n is not None and n <= 0:
            raise InvalidArgumentError("buffer_size must be greater than zero.")
        self._seeds = get_seed(None if seed is None else _static_int(seed))
        self._reshuffle = True if reshuffle is None else bool(reshuffle)
        super().__init__(child._structure, child._dtypes, child._shapes)
        self._nested = child._nested

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
        _refuse_nested(child, "batch")
        self._child = child
        self._size, n = _batch_size(batch_size)
        self._drop = bool(drop_remainder)
        lead = n if self._drop else None
        super().__init__(child._structure, child._dtypes,
                         [None if s is None else (lead,) + s for s in child._shapes])

    def _compile(self, b):
        return P.Batch(self._child._compile(b), b.ref(self._size), self._drop, self._sparse)


class _PaddedBatch(Dataset):
    def __init__(self, child, batch_size, padded_shapes, padding_values, drop_remainder):
        _refuse_nested(child, "padded_batch")
        for leaf, sp in zip(flatten(child._structure), child._sparse):
            if sp:
                raise TypeError(
                    "`padded_batch` is only supported for datasets that produce tensor "
                    "elements but type spec of elements in the input dataset is not a subclass "
                    "of TensorSpec: `SparseTensorSpec(TensorShape("
                    f"{_fmt_shape(child._shapes[child._sparse.index(True)])}), "
                    f"tf.{child._dtypes[child._sparse.index(True)].name})`.")
        self._child = child
        self._size, n = _batch_size(batch_size)
        self._drop = bool(drop_remainder)
        if padded_shapes is None:
            shapes = list(child._shapes)
            if any(s is None for s in shapes):
                raise ValueError("padded_batch: padded_shapes is required for components of "
                                 "unknown rank")
        else:
            shapes = [_pad_dims(s) for s in _flatten_like(child._structure, padded_shapes)]
        self._dims = tuple(shapes)  # a dim may be a scalar tensor (known when run)
        shapes = [None if s is None else tuple(None if isinstance(d, Tensor) else d for d in s)
                  for s in shapes]
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
        dims = tuple(None if s is None else tuple(b.ref(d) if isinstance(d, Tensor) else d
                                                  for d in s) for s in self._dims)
        return P.PaddedBatch(self._child._compile(b), b.ref(self._size), dims,
                             tuple(b.ref(p) for p in self._pads), self._drop,
                             tuple(d.np_dtype if not d.is_string else np.dtype(object)
                                   for d in self._dtypes))


def _fmt_shape(s):
    return "None" if s is None else str([d for d in s])


def dense_to_sparse_batch(child, batch_size, row_shape) -> Dataset:
    """``tf.data.experimental.dense_to_sparse_batch``: see ``tv.data.experimental``."""
    return _DenseToSparseBatch(child, batch_size, row_shape)


class _DenseToSparseBatch(Dataset):
    def __init__(self, child, batch_size, row_shape):
        from .dataset_sparse import SPARSE
        _refuse_nested(child, "dense_to_sparse_batch")
        if len(child._dtypes) != 1 or child._sparse[0]:
            kinds = ", ".join(f"tf.{d.name}" for d in child._dtypes)
            raise TypeError("`dense_to_sparse_batch` requires an input dataset whose elements "
                            "have a single component, but the given dataset has the following "
                            f"component types: ({kinds}).")
        row = _pad_dims(row_shape)
        if row is None or any(isinstance(d, Tensor) for d in row):
            raise ValueError("dense_to_sparse_batch: row_shape must be known when the graph is "
                             f"built, got {row_shape!r}")
        self._child, self._row = child, row
        self._size, _ = _batch_size(batch_size)
        super().__init__(SPARSE, child._dtypes, [(None,) + row])

    def _compile(self, b):
        from .dataset_sparse import DenseToSparseBatch
        return DenseToSparseBatch(self._child._compile(b), b.ref(self._size), self._row)


def _pad_dims(s):
    """A padded shape as dims: ints, None (the batch's largest) or scalar tensors (a dim
    computed when the pipeline runs; static ones are read now)."""
    if s is None:
        return None
    if isinstance(s, (list, tuple)) and any(isinstance(d, Tensor) for d in s):
        out = []
        for d in s:
            v = _static_int(d) if isinstance(d, Tensor) else d
            if isinstance(d, Tensor) and v is None:
                out.append(convert_to_tensor(d, dtype=_dt.int64) if d.dtype != _dt.int64
                           else d)
            else:
                out.append(None if v is None or v == -1 else int(v))
        return tuple(out)
    return tuple(None if d is None or d == -1 else int(d) for d in _as_shape(s))


def _refuse_nested(ds, what):
    from .dataset_windows import refuse_nested
    refuse_nested(ds, what)


# ---- traced functions ------------------------------------------------------------------------

def _trace(ds: Dataset, fn, what: str, sparse_ok: bool = False):
    """Trace ``fn`` on placeholders of ``ds``'s element; returns the Func's pieces (a sparse
    component is a SparseTensor of three placeholders, all three in the list; only where
    ``sparse_ok``: the caller wraps its Func in ``dataset_sparse.SparseArgs``)."""
    from ..array.array_ops import placeholder
    from .dataset_sparse import placeholders, refuse_sparse
    from ..control.while_loop import FuncGraph
    if not callable(fn):
        raise TypeError(f"{what}: the function must be callable, got {fn!r}")
    if not sparse_ok:
        refuse_sparse(ds, what)
    g = ds._graph
    fg = FuncGraph(g, f"Dataset.{what}")
    with fg.as_default():
        if ds._nested:  # a window: each component is the dataset of the window's rows
            phs = [placeholder(d, None if s is None else (None,) + tuple(s), name="window")
                   for d, s in zip(ds._dtypes, ds._shapes)]
            elem = pack_as(ds._structure, [Dataset.from_tensor_slices(p) for p in phs])
        else:
            phs, leaves = [], []
            for d, s, sp in zip(ds._dtypes, ds._shapes, ds._sparse):
                if sp:
                    t, parts = placeholders(d, s)
                    phs.extend(parts)
                else:
                    t = placeholder(d, s, name="arg")
                    phs.append(t)
                leaves.append(t)
            elem = pack_as(ds._structure, leaves)
        res = fn(*elem) if type(elem) is tuple else fn(elem)
    return fg, phs, res


def own(t: Tensor) -> Tensor:
    """``t`` as a tensor of the function being traced (the default graph): a tensor of an
    outer graph it returns as is becomes a capture (an input of the function)."""
    from ...framework.graph import get_default_graph
    g = get_default_graph()
    return g.capture(t) if t.graph is not g and hasattr(g, "capture") else t


def _result(value, what: str):
    def conv(x):
        if x is None or isinstance(x, (Operation, Dataset)) or callable(x) and \
                not isinstance(x, Tensor):
            raise TypeError(f"Unsupported return value from function passed to "
                            f"Dataset.{what}(): {x}.")
        if isinstance(x, (SparseTensor, SparseTensorValue)):
            x = SparseTensor.from_value(x)
            sp = SparseTensor(own(x.indices), own(x.values), own(x.dense_shape))
            sp._shape_hint = x._shape_hint
            return sp
        try:
            return own(convert_to_tensor(x))
        except (TypeError, ValueError, OpError) as e:
            raise TypeError(f"Unsupported return value from function passed to "
                            f"Dataset.{what}(): {x}.") from e
    if isinstance(value, list):  # TF: a list returned by map_func is a tuple
        value = tuple(value)
    return _normalize(value, conv)


def _sparse_func(func, child, out_sparse=(), out_dtypes=()):
    """``func`` as the pipeline calls it: wrapped where its element or results are sparse."""
    from .dataset_sparse import SparseArgs
    if not any(child._sparse) and not any(out_sparse):
        return func
    return SparseArgs(func, tuple(child._sparse), tuple(out_sparse), tuple(out_dtypes))


def _expand(flat) -> list:
    """Tensors and SparseTensors as tensors (three for each SparseTensor)."""
    return [x for t in flat for x in (t if isinstance(t, SparseTensor) else (t,))]


class _Map(Dataset):
    def __init__(self, child, fn):
        from ..control.while_loop import Func
        fg, phs, res = _trace(child, fn, "map", sparse_ok=True)
        with fg.as_default():
            out = _result(res, "map")
        flat = flatten(out)
        if not flat:
            raise TypeError("Unsupported return value from function passed to Dataset.map(): "
                            "an empty structure.")
        self._child = child
        self._captures = list(fg.captures)
        func = Func(fg, phs + list(fg.captures.values()), _expand(flat), "Dataset.map",
                    _user_location())
        super().__init__(out, [t.dtype for t in flat], [_shape_of(t) for t in flat])
        self._func = _sparse_func(func, child, self._sparse, _np_dtypes(self._dtypes))

    def _compile(self, b):
        return P.Map(self._child._compile(b), self._func,
                     tuple(b.ref(t) for t in self._captures),
                     tuple(np.dtype(object) if s else d
                           for d, s in zip(_np_dtypes(self._dtypes), self._sparse)))


class _Filter(Dataset):
    def __init__(self, child, predicate, what="filter"):
        from ..control.while_loop import Func
        fg, phs, res = _trace(child, predicate, what, sparse_ok=what in ("filter", "take_while"))
        with fg.as_default():
            out = own(convert_to_tensor(res)) if isinstance(res, (Tensor, bool, np.bool_)) \
                else res
        if not isinstance(out, Tensor) or out.dtype != _dt.bool_ or \
                out._shape not in (None, ()):
            kind = (f"TensorSpec(shape={_shape_of(out)}, dtype=tf.{out.dtype.name}, name=None)"
                    if isinstance(out, Tensor) else repr(out))
            raise ValueError("Invalid `predicate`. `predicate` must return a `tf.bool` scalar "
                             f"tensor, but its return type is {kind}.")
        self._child = child
        self._captures = list(fg.captures)
        self._func = _sparse_func(Func(fg, phs + list(fg.captures.values()), [out],
                                       f"Dataset.{what}", _user_location()), child)
        super().__init__(child._structure, child._dtypes, child._shapes)
        self._nested = child._nested

    def _compile(self, b):
        return P.Filter(self._child._compile(b), self._func,
                        tuple(b.ref(t) for t in self._captures))


class _InnerBuilder(_Builder):
    """Compiles a dataset built inside a traced function (``flat_map``/``interleave``): the
    tensors it reads are computed per element by that function; outer ones are captured."""

    def __init__(self, fg):
        super().__init__(one_shot=False)
        self._fg = fg

    def ref(self, x):
        if isinstance(x, Tensor) and static_value(x) is None and x.graph is not self._fg:
            x = self._fg.capture(x)
        return super().ref(x)


class _FlatMap(Dataset):
    def __init__(self, child, fn, what, cycle_length=None, block_length=1):
        from ..control.while_loop import Func
        fg, phs, inner = _trace(child, fn, what, sparse_ok=True)
        if not isinstance(inner, Dataset):
            raise TypeError(f"`map_func` must return a `Dataset` object. Got {type(inner)}")
        b = _InnerBuilder(fg)
        self._inner = inner._compile(b)
        self._child = child
        self._captures = list(fg.captures)
        self._func = _sparse_func(Func(fg, phs + list(fg.captures.values()), list(b.inputs),
                                       f"Dataset.{what}", _user_location()), child)
        self._cycle = None if what == "flat_map" else \
            _scalar(-1 if cycle_length is None else cycle_length, _dt.int64, "cycle_length")
        self._block = _scalar(block_length, _dt.int64, "block_length")
        if _static_int(self._block) is not None and _static_int(self._block) <= 0:
            raise InvalidArgumentError("block_length must be greater than zero.")
        super().__init__(inner._structure, inner._dtypes, inner._shapes)

    def _compile(self, b):
        return P.FlatMap(self._child._compile(b), self._func,
                         tuple(b.ref(t) for t in self._captures), self._inner,
                         None if self._cycle is None else b.ref(self._cycle),
                         b.ref(self._block))
