"""SparseTensor components in ``tv.data`` pipelines (TF 1.x's ``SparseTensorSpec`` elements).

Design
------
On the graph side a sparse component is a leaf of the dataset's structure that is a
:class:`~tensorvm.SparseTensor` (or :data:`SPARSE`, the marker ``Iterator.from_structure``
uses); its dtype is the values' dtype and its static shape the dense shape, as TF 1.15's
``output_types``/``output_shapes``; ``output_classes`` gives ``tv.SparseTensor``.

Inside the pipeline (:mod:`tensorvm.ops.data.dataset_pipeline`) a sparse component is *one* column
of a block: a 1-D object array whose entries are :class:`~tensorvm.SparseTensorValue` s of
host arrays, one per element, whatever its rank. Stages that only move rows (``shuffle``,
``repeat``, ``take``, ``skip``, ``shard``, ``cache``, ``prefetch``, ``zip``, ``concatenate``)
need nothing more. ``batch`` stacks a group's values as TF does (a new leading index column,
``dense_shape`` = ``[n] + `` the elementwise largest), ``unbatch`` and ``from_tensor_slices``
split one by its first index (empty rows included); traced functions (``map``, ``filter``,
``flat_map``) get a SparseTensor of three placeholders and are called through
:class:`SparseArgs`, which expands sparse arguments and packs sparse results. ``get_next``
returns the three tensors of each sparse component, packed into a SparseTensor.

>>> import tensorvm as tv
>>> sp = tv.SparseTensor([[0, 1], [2, 0]], [1.0, 2.0], [3, 2])
>>> nxt = tv.data.Dataset.from_tensor_slices(sp).batch(2).make_one_shot_iterator().get_next()
>>> with tv.Session() as s: v = s.run(nxt)
>>> v.indices.tolist(), v.dense_shape.tolist()
([[0, 1]], [2, 2])
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ...framework.errors import InvalidArgumentError
from ...framework.sparse_tensor import SparseTensor, SparseTensorValue
from .dataset_pipeline import CHUNK, Ref, Stage, _host, as_component


class _SparseSpec:
    """The structure leaf of a sparse component whose tensors are not known (an iterator made
    by ``from_structure(..., output_classes=...)``)."""

    def __repr__(self):
        return "SPARSE"

    def __reduce__(self):
        return "SPARSE"


SPARSE = _SparseSpec()


def is_sparse_leaf(x) -> bool:
    """Whether a structure leaf stands for a sparse component."""
    return isinstance(x, SparseTensor) or x is SPARSE


def is_sparse_class(c) -> bool:
    """Whether an ``output_classes`` entry names a SparseTensor class (tensorvm's or TF's)."""
    return isinstance(c, type) and c.__name__ in ("SparseTensor", "SparseTensorValue")


def refuse_sparse(ds, what: str) -> None:
    """A ``TypeError`` where ``ds`` has a sparse component and ``what`` does not take one."""
    if any(getattr(ds, "_sparse", ())):
        raise TypeError(f"{what}: the elements of this dataset have SparseTensor components, "
                        f"which {what} does not support in tensorvm (map them to dense "
                        "tensors first, e.g. with tv.sparse.to_dense)")


# ---- values ----------------------------------------------------------------------------------

def value(indices, values, dense_shape, dtype=None) -> SparseTensorValue:
    """A SparseTensorValue of host arrays (int64 indices and shape)."""
    shape = np.asarray(_host(dense_shape), dtype=np.int64).reshape(-1)
    ind = np.asarray(_host(indices), dtype=np.int64)
    if ind.ndim != 2 or ind.shape[1] != shape.size:
        ind = ind.reshape(-1, shape.size)
    vals = _host(values)
    vals = as_component(vals, dtype) if dtype is not None else np.asarray(vals)
    return SparseTensorValue(ind, vals if vals.ndim == 1 else vals.reshape(-1), shape)


def cell(v: SparseTensorValue) -> np.ndarray:
    """A 0-d object array holding ``v`` (one element of a sparse component)."""
    out = np.empty((), dtype=object)
    out[()] = v
    return out


def column(values: list) -> np.ndarray:
    """A 1-D object array of SparseTensorValues (a block's sparse column)."""
    out = np.empty(len(values), dtype=object)
    for i, v in enumerate(values):
        out[i] = v
    return out


def split_rows(v: SparseTensorValue) -> list[SparseTensorValue]:
    """``v`` cut along its first dimension: ``dense_shape[0]`` values of rank one less (rows
    without entries included), as TF's ``from_tensor_slices``/``unbatch`` of a SparseTensor."""
    shape = np.asarray(v.dense_shape, np.int64)
    if shape.size == 0:
        raise InvalidArgumentError("Unbatching a tensor is only supported for rank >= 1")
    ind = np.asarray(v.indices, np.int64).reshape(-1, shape.size)
    vals = np.asarray(v.values)
    n = int(shape[0])
    first = ind[:, 0]
    if first.size and (first.min() < 0 or first.max() >= n):
        raise InvalidArgumentError(f"indices[0] out of range: a first index is not in "
                                   f"[0, {n})")
    order = np.argsort(first, kind="stable")
    ind, vals = ind[order], vals[order]
    ends = np.cumsum(np.bincount(first, minlength=n))
    rest, inner = ind[:, 1:], shape[1:]
    out, lo = [], 0
    for hi in ends.tolist():
        out.append(SparseTensorValue(rest[lo:hi], vals[lo:hi], inner))
        lo = hi
    return out


def stack(values) -> SparseTensorValue:
    """SparseTensorValues of one rank stacked along a new first dimension (TF's batching of
    a sparse component: the dense shape is the elementwise largest)."""
    values = list(values)
    ranks = {len(v.dense_shape) for v in values}
    if len(ranks) != 1:
        a = len(values[0].dense_shape)
        b = next(len(v.dense_shape) for v in values if len(v.dense_shape) != a)
        raise InvalidArgumentError(
            "Cannot add tensor to the batch: number of elements does not match. Shapes are: "
            f"[tensor]: [{b}], [batch]: [{a}]")
    rank = ranks.pop()
    counts = [len(v.values) for v in values]
    lead = np.repeat(np.arange(len(values), dtype=np.int64), counts)
    ind = np.concatenate([np.asarray(v.indices, np.int64).reshape(-1, rank) for v in values])
    ind = np.concatenate([lead[:, None], ind], axis=1)
    vals = np.concatenate([np.asarray(v.values) for v in values])
    shape = np.max(np.stack([np.asarray(v.dense_shape, np.int64) for v in values]), axis=0) \
        if rank else np.zeros(0, np.int64)
    return SparseTensorValue(ind, vals, np.concatenate([[len(values)], shape]).astype(np.int64))


def batch_column(col: np.ndarray) -> np.ndarray:
    """A ``(k, n)`` object array of element values as the ``(k,)`` column of their batches."""
    return column([stack(row) for row in col])


def fix_block(block: tuple, sparse: tuple) -> tuple:
    """A batched block whose sparse columns are ``(k, n)`` arrays of elements: those stacked."""
    if not any(sparse):
        return block
    return tuple(batch_column(c) if s else c for c, s in zip(block, sparse))


def unbatch_blocks(blocks, sparse: tuple):
    """``unbatch`` of blocks with sparse columns: each element's rows, as one block."""
    for block in blocks:
        for i in range(len(block[0])):
            parts, sizes = [], set()
            for c, s in zip(block, sparse):
                if s:
                    rows = split_rows(c[i])
                    parts.append(column(rows))
                    sizes.add(len(rows))
                else:
                    if c.ndim < 2:
                        raise InvalidArgumentError("Input element must have a non-scalar value "
                                                   "in each component.")
                    parts.append(c[i])
                    sizes.add(c.shape[1])
            if len(sizes) != 1:
                raise InvalidArgumentError("Input element must have the same batch size in "
                                           "each component.")
            if sizes.pop():
                yield tuple(parts)


# ---- traced functions ------------------------------------------------------------------------

def placeholders(dtype, shape):
    """The SparseTensor of three placeholders a traced function receives for a sparse
    component of ``dtype`` and static dense shape ``shape``; returns (it, [its tensors])."""
    from ..array.array_ops import constant, placeholder
    rank = None if shape is None else len(shape)
    parts = [placeholder("int64", [None, rank], name="indices"),
             placeholder(dtype, [None], name="values"),
             placeholder("int64", [rank], name="dense_shape")]
    # A fully known dense shape is a constant in the function (its value is fed all the
    # same), so SparseTensors the function builds from it know their shape, as TF's.
    known = shape is not None and all(d is not None for d in shape)
    sp = SparseTensor(parts[0], parts[1],
                      constant(np.asarray(shape, np.int64)) if known else parts[2])
    sp._shape_hint = None if shape is None else tuple(shape)
    return sp, parts


def dense_shape_of(sp: SparseTensor):
    """The static dense shape of a SparseTensor a function returns (dims known where its
    ``dense_shape`` is a constant; ``None`` when even its rank is unknown)."""
    s = sp.shape
    return None if s.dims is None else tuple(s.dims)


@dataclass
class SparseArgs:
    """A traced function called with sparse components: ``in_sparse[i]``: argument ``i`` is a
    SparseTensorValue, fed as its three arrays; ``out_sparse[j]``: result ``j`` is three
    tensors, returned as a 0-d object array holding their SparseTensorValue (``out_dtypes``:
    the values' NumPy dtypes)."""
    func: Any
    in_sparse: tuple
    out_sparse: tuple
    out_dtypes: tuple

    def call(self, ctx, args, local=False):
        flat = []
        for i, a in enumerate(args):
            if i < len(self.in_sparse) and self.in_sparse[i]:
                flat.extend((a.indices, a.values, a.dense_shape))
            else:
                flat.append(a)
        out = self.func.call(ctx, flat)
        if not any(self.out_sparse):
            return out
        res, j = [], 0
        for s, d in zip(self.out_sparse, self.out_dtypes):
            if s:
                res.append(cell(value(out[j], out[j + 1], out[j + 2], d)))
                j += 3
            else:
                res.append(out[j])
                j += 1
        return res


def expand_outputs(values: tuple, sparse: tuple) -> tuple:
    """An element's components as op outputs: each sparse one as its three arrays."""
    out = []
    for v, s in zip(values, sparse):
        if s:
            out.extend((np.array(v.indices, np.int64), np.array(v.values),
                        np.array(v.dense_shape, np.int64)))
        else:
            out.append(v)
    return tuple(out)


def expand_signature(dtypes, shapes, sparse) -> list:
    """The (dtype, shape) of each op output for components of these dtypes and shapes."""
    from ...framework import dtypes as _dt
    out = []
    for d, s, sp in zip(dtypes, shapes, sparse or (False,) * len(dtypes)):
        if sp:
            rank = None if s is None else len(s)
            out.extend([(_dt.int64, (None, rank)), (d, (None,)), (_dt.int64, (rank,))])
        else:
            out.append((d, s))
    return out


def pack_outputs(outputs: list, sparse, shapes) -> list:
    """Op outputs as the components' leaves: each sparse one's three tensors as a
    SparseTensor (of static dense shape ``shapes[i]``)."""
    out, it = [], iter(outputs)
    for s, shape in zip(sparse, shapes):
        if s:
            sp = SparseTensor(next(it), next(it), next(it))
            sp._shape_hint = None if shape is None else tuple(shape)
            out.append(sp)
        else:
            out.append(next(it))
    return out


# ---- sources ---------------------------------------------------------------------------------

@dataclass
class SparseSlices(Stage):
    """``from_tensor_slices`` / ``from_tensors`` with sparse components: ``comps`` holds one
    Ref per dense component and three per sparse one."""
    comps: tuple
    sparse: tuple
    dtypes: tuple  # numpy dtypes (a sparse one: its values')
    whole: bool = False  # from_tensors: one element, the values as they are

    def _values(self, env):
        it = iter(self.comps)
        out = []
        for s, d in zip(self.sparse, self.dtypes):
            if s:
                out.append(value(next(it).get(env), next(it).get(env), next(it).get(env), d))
            else:
                out.append(as_component(next(it).get(env), d))
        return out

    def blocks(self, env):
        vals = self._values(env)
        if self.whole:
            yield tuple(column([v]) if s else v[None] for v, s in zip(vals, self.sparse))
            return
        cols = []
        for v, s in zip(vals, self.sparse):
            if s:
                cols.append(column(split_rows(v)))
            elif v.ndim == 0:
                raise InvalidArgumentError("Unbatching a tensor is only supported for rank >= 1")
            else:
                cols.append(v)
        sizes = {len(c) for c in cols}
        if len(sizes) != 1:
            raise InvalidArgumentError("Dimensions of the components do not match: "
                                       f"{' vs '.join(str(len(c)) for c in cols)}")
        n = sizes.pop()
        for lo in range(0, n, CHUNK):
            yield tuple(c[lo:lo + CHUNK] for c in cols)


@dataclass
class SparseTriples(Stage):
    """``from_sparse_tensor_slices``: each element (one sparse component) as the tuple
    ``(indices, values, dense_shape)`` of dense tensors."""
    child: Stage

    def blocks(self, env):
        for (col,) in self.child.blocks(env):
            for v in col:
                yield (v.indices[None], v.values[None], v.dense_shape[None])


def _fmt_dims(dims) -> str:
    return "[" + ",".join(str(-1 if d is None else d) for d in dims) + "]"


@dataclass
class DenseToSparseBatch(Stage):
    """``dense_to_sparse_batch``: ``size`` elements (one dense component) as one
    SparseTensorValue of all their entries, dense shape ``[n] + row`` (None: the largest)."""
    child: Stage
    size: Ref
    row: tuple

    def check(self, env):
        from .dataset_pipeline import _batch_size
        _batch_size(self.size, env)
        super().check(env)

    def blocks(self, env):
        from .dataset_pipeline import _batch_size
        n = _batch_size(self.size, env)
        buf: list = []
        for (col,) in self.child.blocks(env):
            for i in range(len(col)):
                buf.append(np.asarray(col[i]))
                if len(buf) == n:
                    yield (column([self._batch(buf)]),)
                    buf = []
        if buf:
            yield (column([self._batch(buf)]),)

    def _batch(self, elems) -> SparseTensorValue:
        from ...framework.errors import DataLossError
        rank = len(self.row)
        for e in elems:
            if e.ndim != rank:
                raise InvalidArgumentError(f"Input element had shape ({_fmt_dims(e.shape)}) "
                                           "that is incompatible with the row shape "
                                           f"({_fmt_dims(self.row)}).")
            if any(r is not None and d > r for d, r in zip(e.shape, self.row)):
                raise DataLossError(f"Input element had shape ({_fmt_dims(e.shape)}) that is "
                                    f"larger than the row shape ({_fmt_dims(self.row)}).")
        ind = [np.concatenate([np.full((e.size, 1), k, np.int64),
                               np.indices(e.shape, dtype=np.int64).reshape(rank, -1).T], axis=1)
               for k, e in enumerate(elems)]
        shape = [len(elems)] + [r if r is not None else max(e.shape[j] for e in elems)
                                for j, r in enumerate(self.row)]
        return SparseTensorValue(np.concatenate(ind), np.concatenate([e.reshape(-1)
                                                                       for e in elems]),
                                 np.asarray(shape, np.int64))


def refs(b, leaves) -> tuple:
    """The Refs of a source's leaves: three per SparseTensor."""
    out: list[Ref] = []
    for t in leaves:
        out.extend(b.ref(x) for x in (t if isinstance(t, SparseTensor) else (t,)))
    return tuple(out)
