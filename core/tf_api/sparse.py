"""``tv.sparse`` (TF 1.x's ``tf.sparse``) and the top-level ``tv.sparse_*`` functions: building,
densifying, reordering, reshaping, adding, concatenating, slicing, reducing and multiplying
:class:`~tensorvm.SparseTensor` s, plus ``tv.nn.embedding_lookup_sparse``.

Values flow through differentiable ops (gather, segment sums, scatters), so gradients reach a
sparse tensor's values and any dense operand; the integer bookkeeping (orderings, merged
coordinates) is in :mod:`tensorvm.ops.array.sparse_ops`. Results follow TF: functions that produce a
SparseTensor keep its indices in row-major order where TF does (``add``, ``concat``,
``reorder``, ``transpose``, ``fill_empty_rows``).

>>> import numpy as np, tensorvm as tv
>>> sp = tv.sparse.from_dense(np.array([[0, 3], [4, 0]]))
>>> with tv.Session() as s: s.run(tv.sparse.reduce_sum(sp, axis=1)).tolist()
[3, 4]
"""
from __future__ import annotations

import numpy as np

from ..framework import dtypes as _dt
from ..framework.graph import name_scope
from ..framework.op_def_library import apply_op
from .. import ops as _tv
from ..ops.array import sparse_ops as _ops
from ..ops.common import static_value
from ..framework.sparse_tensor import SparseTensor, SparseTensorValue
from ..framework.tensor_conversion import convert_to_tensor

# the top-level TF 1.x names (tv.sparse_tensor_to_dense …); tv.sparse has these and TF's short
# names (tv.sparse.to_dense, tv.sparse.reorder …)
TOP_LEVEL = ["SparseTensor", "SparseTensorValue", "sparse_placeholder", "sparse_tensor_to_dense",
             "sparse_to_dense", "sparse_reorder", "sparse_reshape", "sparse_add",
             "sparse_concat", "sparse_retain", "sparse_reduce_sum", "sparse_tensor_dense_matmul",
             "sparse_softmax", "sparse_transpose", "sparse_fill_empty_rows", "sparse_slice",
             "sparse_split", "sparse_mask"]


def _sp(x, what="sp_input") -> SparseTensor:
    if isinstance(x, SparseTensorValue):
        return SparseTensor.from_value(x)
    if not isinstance(x, SparseTensor):
        raise TypeError(f"{what} must be a SparseTensor, got {type(x).__name__}")
    return x


def sparse_placeholder(dtype, shape=None, name=None) -> SparseTensor:
    """A SparseTensor of three placeholders, fed with a :class:`SparseTensorValue` (or an
    ``(indices, values, dense_shape)`` triple). ``shape`` fixes the rank (and dims) when
    given."""
    with name_scope(name or "SparseTensor"):
        rank = None if shape is None else len(shape)
        dense_shape = (_tv.placeholder(_dt.int64, [rank], name="shape") if shape is None
                       or any(d is None for d in shape)
                       else convert_to_tensor(np.asarray(shape, np.int64), name="shape"))
        return SparseTensor(_tv.placeholder(_dt.int64, [None, rank], name="indices"),
                            _tv.placeholder(dtype, [None], name="values"), dense_shape)


def to_dense(sp_input, default_value=0, validate_indices=True, name=None):
    """The dense tensor of ``sp_input``: its values at their indices, ``default_value``
    elsewhere. With ``validate_indices`` the indices must be in bounds, sorted and unique."""
    sp = _sp(sp_input)
    out = sparse_to_dense(sp.indices, sp.dense_shape, sp.values, default_value,
                          validate_indices, name=name or "SparseToDense")
    if sp._shape_hint is not None and (out._shape is None or len(out._shape) ==
                                       len(sp._shape_hint)):  # a tv.data element's shape
        out._shape = tuple(h if h is not None else (None if out._shape is None else o)
                           for h, o in zip(sp._shape_hint, out._shape or sp._shape_hint))
    return out


def sparse_to_dense(sparse_indices, output_shape, sparse_values, default_value=0,
                    validate_indices=True, name=None):
    """TF's ``tf.sparse_to_dense``: ``sparse_indices`` a scalar, a vector (rank 1) or an
    ``[N, rank]`` matrix; ``sparse_values`` a vector or one scalar for all."""
    values = convert_to_tensor(sparse_values)
    default = (default_value if hasattr(default_value, "dtype") and hasattr(default_value, "op")
               else convert_to_tensor(default_value, dtype=values.dtype))
    return apply_op("SparseToDense", [convert_to_tensor(sparse_indices),
                                      convert_to_tensor(output_shape), values, default],
                    {"validate": bool(validate_indices)}, name=name).outputs[0]


def from_dense(tensor, name=None) -> SparseTensor:
    """The non-zero elements of ``tensor`` as a SparseTensor."""
    with name_scope(name or "dense_to_sparse"):
        t = convert_to_tensor(tensor)
        zero = "" if t.dtype == _dt.string else 0
        idx = _tv.where(_tv.not_equal(t, convert_to_tensor(zero, dtype=t.dtype)))
        return SparseTensor(idx, _tv.gather_nd(t, idx), _tv.shape(t, out_type=_dt.int64))


def reorder(sp_input, name=None) -> SparseTensor:
    """The same SparseTensor with its indices in row-major order."""
    sp = _sp(sp_input)
    with name_scope(name or "SparseReorder"):
        perm = _ops.reorder_perm(sp.indices)
        return SparseTensor(_tv.gather(sp.indices, perm), _tv.gather(sp.values, perm), sp.dense_shape)


def sparse_reshape(sp_input, shape, name=None) -> SparseTensor:
    """The same values in a dense shape of as many elements (one dim may be -1)."""
    sp = _sp(sp_input)
    with name_scope(name or "SparseReshape"):
        idx, new = _ops.reshape_indices(sp.indices, sp.dense_shape,
                                        convert_to_tensor(shape, dtype=_dt.int64))
        return SparseTensor(idx, sp.values, new)


def _coalesced(indices, values, dense_shape):
    uniq, seg = _ops.coalesce_ids(indices, dense_shape)
    n = _tv.shape(uniq, out_type=_dt.int64)[0]
    return uniq, _tv.unsorted_segment_sum(values, seg, n)


def add(a, b, threshold=0, thresh=None):
    """``a + b``: two SparseTensors give a SparseTensor (sums of coinciding entries whose
    magnitude is below ``threshold`` are dropped); a SparseTensor and a dense tensor give a
    dense tensor."""
    threshold = thresh if thresh is not None else threshold
    a_sp = isinstance(a, (SparseTensor, SparseTensorValue))
    b_sp = isinstance(b, (SparseTensor, SparseTensorValue))
    if not a_sp and not b_sp:
        raise TypeError("sparse.add: at least one of a and b must be a SparseTensor")
    if a_sp != b_sp:
        sp, dense = (_sp(a), convert_to_tensor(b)) if a_sp else (_sp(b), convert_to_tensor(a))
        with name_scope("SparseTensorDenseAdd"):
            return dense + apply_op("ScatterNd", [sp.indices, sp.values,
                                                  _tv.cast(sp.dense_shape, _dt.int64)]).outputs[0]
    a, b = _sp(a, "a"), _sp(b, "b")
    with name_scope("SparseAdd"):
        idx, vals = _coalesced(_tv.concat([a.indices, b.indices], 0),
                               _tv.concat([a.values, b.values], 0), a.dense_shape)
        if not (isinstance(threshold, (int, float)) and threshold == 0):
            keep = _tv.abs(vals) >= _tv.cast(threshold, vals.dtype)
            idx, vals = _tv.boolean_mask(idx, keep), _tv.boolean_mask(vals, keep)
        return SparseTensor(idx, vals, a.dense_shape)


def sparse_concat(axis, sp_inputs, name=None, expand_nonconcat_dim=False, concat_dim=None):
    """SparseTensors joined along ``axis`` (their other dims equal, or the largest with
    ``expand_nonconcat_dim``)."""
    axis = concat_dim if concat_dim is not None else axis
    sps = [_sp(s, "sp_inputs") for s in sp_inputs]
    if not sps:
        raise ValueError("sparse_concat: sp_inputs is empty")
    with name_scope(name or "SparseConcat"):
        rank = sps[0].shape.ndims
        if rank is None:
            raise ValueError("sparse_concat: the inputs' rank must be known")
        ax = axis % rank
        shapes = [s.dense_shape for s in sps]
        offset = convert_to_tensor(np.int64(0))
        idxs = []
        onehot = convert_to_tensor(np.eye(rank, dtype=np.int64)[ax])
        for s, shp in zip(sps, shapes):
            idxs.append(s.indices + offset * onehot)
            offset = offset + shp[ax]
        out_shape = _tv.reduce_max(_tv.stack(shapes), 0) if expand_nonconcat_dim else shapes[0]
        total = out_shape * (1 - onehot) + offset * onehot
        merged = SparseTensor(_tv.concat(idxs, 0), _tv.concat([s.values for s in sps], 0), total)
        return reorder(merged)


def sparse_retain(sp_input, to_retain) -> SparseTensor:
    """The entries of ``sp_input`` where the bool vector ``to_retain`` holds."""
    sp = _sp(sp_input)
    keep = convert_to_tensor(to_retain, dtype=_dt.bool_)
    return SparseTensor(_tv.boolean_mask(sp.indices, keep), _tv.boolean_mask(sp.values, keep),
                        sp.dense_shape)


def sparse_reduce_sum(sp_input, axis=None, keepdims=None, reduction_axes=None, keep_dims=None):
    """The dense sum of ``sp_input`` over ``axis`` (all by default)."""
    sp = _sp(sp_input)
    axis = reduction_axes if axis is None else axis
    keep = bool(keepdims if keepdims is not None else keep_dims)
    if axis is None and not keep:
        return _tv.reduce_sum(sp.values)
    return _tv.reduce_sum(to_dense(sp, validate_indices=False), axis, keepdims=keep)


def sparse_tensor_dense_matmul(sp_a, b, adjoint_a=False, adjoint_b=False, name=None):
    """``sp_a @ b`` for a rank-2 SparseTensor ``sp_a`` and a dense matrix ``b`` (either
    transposed by its ``adjoint_*`` flag); gradients reach ``sp_a.values`` and ``b``."""
    sp = _sp(sp_a, "sp_a")
    with name_scope(name or "SparseTensorDenseMatMul"):
        b = convert_to_tensor(b, dtype=sp.dtype)
        if adjoint_b:
            b = _tv.transpose(b)
        rows, cols = sp.indices[:, 0], sp.indices[:, 1]
        n_out = sp.dense_shape[0]
        if adjoint_a:
            rows, cols, n_out = cols, rows, sp.dense_shape[1]
        contrib = _tv.expand_dims(sp.values, 1) * _tv.gather(b, cols)
        return _tv.unsorted_segment_sum(contrib, rows, n_out)


def sparse_softmax(sp_input, name=None) -> SparseTensor:
    """Softmax of the values over the last dimension, per row of the others (implicit zeros
    take no part)."""
    sp = _sp(sp_input)
    with name_scope(name or "SparseSoftmax"):
        rank = sp.shape.ndims
        if rank is not None and rank < 2:
            raise ValueError(f"sparse_softmax: sp_input must be at least 2-D, got rank {rank}")
        outer = SparseTensor(sp.indices[:, :-1], sp.values, sp.dense_shape[:-1])
        _, seg = _ops.coalesce_ids(outer.indices, outer.dense_shape)
        n = _tv.reduce_max(seg) + 1
        # softmax is unchanged by a per-row shift: the rows' maxima (no gradient) keep exp
        # from overflowing
        e = _tv.exp(sp.values - _ops.segment_max_per_entry(sp.values, seg))
        return SparseTensor(sp.indices, e / _tv.gather(_tv.unsorted_segment_sum(e, seg, n), seg),
                            sp.dense_shape)


def sparse_transpose(sp_input, perm=None, name=None) -> SparseTensor:
    """The SparseTensor with its dimensions permuted by ``perm`` (reversed by default)."""
    sp = _sp(sp_input)
    with name_scope(name or "SparseTranspose"):
        rank = sp.shape.ndims
        if perm is None:
            if rank is None:
                raise ValueError("sparse_transpose: perm is needed when the rank is unknown")
            perm = list(range(rank))[::-1]
        perm = [int(p) for p in perm]
        if rank is not None and sorted(perm) != list(range(rank)):
            raise ValueError(f"sparse_transpose: perm {perm} is not a permutation of "
                             f"range({rank})")
        idx = _tv.gather(sp.indices, perm, axis=1)
        return reorder(SparseTensor(idx, sp.values, _tv.gather(sp.dense_shape, perm)))


def sparse_fill_empty_rows(sp_input, default_value, name=None):
    """(``sp_input`` with ``default_value`` at column 0 of every empty row, a bool vector of
    the rows that were empty)."""
    sp = _sp(sp_input)
    with name_scope(name or "SparseFillEmptyRows"):
        idx, source, empty, _ = _ops.fill_empty_rows_map(sp.indices, sp.dense_shape)
        default = convert_to_tensor(default_value, dtype=sp.dtype)
        copied = _tv.gather(sp.values, _tv.maximum(source, 0))
        vals = _tv.where(source >= 0, copied, _tv.zeros(_tv.shape(source), sp.dtype) + default)
        return SparseTensor(idx, vals, sp.dense_shape), empty


def sparse_slice(sp_input, start, size, name=None) -> SparseTensor:
    """The entries of ``sp_input`` inside the box ``[start, start + size)``, re-based at 0; the
    dense shape is the box clipped to the input."""
    sp = _sp(sp_input)
    with name_scope(name or "SparseSlice"):
        start = convert_to_tensor(start, dtype=_dt.int64)
        size = convert_to_tensor(size, dtype=_dt.int64)
        end = _tv.minimum(start + size, sp.dense_shape)
        inside = _tv.reduce_all(_tv.logical_and(sp.indices >= start, sp.indices < end), 1)
        return SparseTensor(_tv.boolean_mask(sp.indices, inside) - start,
                            _tv.boolean_mask(sp.values, inside), _tv.maximum(end - start, 0))


def sparse_split(keyword_required=None, sp_input=None, num_split=None, axis=None, name=None,
                 split_dim=None):
    """``num_split`` SparseTensors cut from ``sp_input`` along ``axis``; the first
    ``size % num_split`` pieces are one longer, as TF cuts them."""
    if keyword_required is not None:
        raise ValueError("sparse_split: pass sp_input=, num_split= and axis= by keyword")
    axis = split_dim if axis is None else axis
    sp = _sp(sp_input)
    dims = static_value(sp.dense_shape)
    if dims is None:
        raise ValueError("sparse_split: the dense shape must be known when the graph is built")
    dims = [int(d) for d in np.asarray(dims)]
    n, k = dims[axis], int(num_split)
    sizes = [n // k + (1 if i < n % k else 0) for i in range(k)]
    out, begin = [], 0
    with name_scope(name or "SparseSplit"):
        for size in sizes:
            start = [0] * len(dims)
            box = list(dims)
            start[axis], box[axis] = begin, size
            out.append(sparse_slice(sp, start, box))
            begin += size
    return out


def sparse_mask(a, mask_indices, name=None):
    """The rows of the IndexedSlices ``a`` whose index is not in ``mask_indices``."""
    from ..framework.indexed_slices import IndexedSlices
    with name_scope(name or "sparse_mask"):
        keep = _ops.mask_keep(a.indices, convert_to_tensor(mask_indices,
                                                           dtype=a.indices.dtype))
        return IndexedSlices(_tv.gather(a.values, keep), _tv.gather(a.indices, keep), a.dense_shape)


def embedding_lookup_sparse(params, sp_ids, sp_weights, partition_strategy="mod", name=None,
                            combiner=None, max_norm=None):
    """For each row of ``sp_ids`` (a rank-2 SparseTensor of ids), the ``combiner``
    ("sum", "mean" — the default — or "sqrtn") of its ids' embeddings, weighted by
    ``sp_weights``' values when given. Rows are those of ``segment_sum``: up to the last row
    with an id."""
    from ..ops.nn.nn_ops import embedding_lookup
    combiner = combiner or "mean"
    if combiner not in ("sum", "mean", "sqrtn"):
        raise ValueError(f"combiner must be one of 'mean', 'sqrtn' or 'sum', got {combiner!r}")
    ids_sp = _sp(sp_ids, "sp_ids")
    with name_scope(name or "embedding_lookup_sparse"):
        segments = ids_sp.indices[:, 0]
        n = _tv.reduce_max(segments) + 1
        emb = embedding_lookup(params, ids_sp.values, partition_strategy=partition_strategy,
                               max_norm=max_norm)
        if sp_weights is None:
            w = None
            total = _tv.unsorted_segment_sum(emb, segments, n)
        else:
            w = _sp(sp_weights, "sp_weights").values
            w = _tv.cast(w, emb.dtype)
            total = _tv.unsorted_segment_sum(emb * _tv.expand_dims(w, 1), segments, n)
        if combiner == "sum":
            return total
        ones = w if w is not None else _tv.cast(_tv.logical_not(_tv.equal(segments, -1)), emb.dtype)
        if combiner == "mean":
            denom = _tv.unsorted_segment_sum(ones, segments, n)
        else:
            sq = _tv.unsorted_segment_sum(ones * ones, segments, n)
            denom = _tv.sqrt(_tv.where(sq > 0, sq, sq * 0 + 1))  # no 0/0 in an empty row
        safe = _tv.where(_tv.not_equal(denom, 0), denom, denom * 0 + 1)  # an empty row: 0
        return total / _tv.expand_dims(safe, 1)


def safe_embedding_lookup_sparse(embedding_weights, sparse_ids, sparse_weights=None,
                                 combiner="mean", default_id=None, name=None,
                                 partition_strategy="div", max_norm=None):
    """:func:`embedding_lookup_sparse` that gives every row of ``sparse_ids`` a result: ids
    below 0 (and, unless ``combiner="sum"``, weights <= 0) are dropped, and an empty row gets zeros (or ``default_id``'s
    embedding)."""
    ids = _sp(sparse_ids, "sparse_ids")
    with name_scope(name or "embedding_lookup"):
        rows = ids.dense_shape[0]
        keep = ids.values >= 0
        if sparse_weights is not None and combiner != "sum":  # TF prunes weights <= 0 then
            keep = keep & (_sp(sparse_weights).values > 0)
        ids = sparse_retain(ids, keep)
        weights = None if sparse_weights is None else sparse_retain(_sp(sparse_weights), keep)
        ids, empty = sparse_fill_empty_rows(ids, 0 if default_id is None else default_id)
        if weights is not None:
            weights, _ = sparse_fill_empty_rows(weights, 1.0)
        out = embedding_lookup_sparse(embedding_weights, ids, weights, partition_strategy,
                                      combiner=combiner, max_norm=max_norm)
        if default_id is None:
            out = _tv.where(empty[:rows], _tv.zeros(_tv.shape(out), out.dtype), out)
        return out


# ---- tf.sparse's names ------------------------------------------------------------------------
placeholder = sparse_placeholder
reshape = sparse_reshape
concat = sparse_concat
reduce_sum = sparse_reduce_sum
sparse_dense_matmul = matmul = sparse_tensor_dense_matmul
softmax = sparse_softmax
transpose = sparse_transpose
fill_empty_rows = sparse_fill_empty_rows
slice = sparse_slice  # noqa: A001  (tf.sparse.slice)
split = sparse_split
mask = sparse_mask
retain = sparse_retain
sparse_add = add
sparse_tensor_to_dense = to_dense
sparse_reorder = reorder
