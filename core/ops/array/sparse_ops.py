"""Kernels for sparse tensors (:class:`tensorvm.SparseTensor`): ``SparseToDense`` (with TF's
index validation), and the integer bookkeeping the sparse functions need — a row-major
ordering of indices (``SparseReorderPerm``), reshaping indices (``SparseReshapeIndices``),
merging duplicate coordinates (``SparseCoalesceIds``) and the map of
``sparse_fill_empty_rows`` (``SparseFillEmptyRowsMap``).

Values flow through differentiable ops (gather, segment sums, scatter), so every sparse
function of :mod:`tensorvm.tf_api.sparse` has gradients with respect to its values (and dense
operands) without a gradient of its own; these kernels only compute integers. All are
vectorised (``lexsort``, ``unique``, ``ravel_multi_index``), never a loop over entries.
"""
from __future__ import annotations

import numpy as np

from ...framework import dtypes as _dt
from ...framework.errors import InvalidArgumentError
from ...vm.kernels.array_api import to_host
from ...framework.op_def_library import apply_op
from ...framework.op_registry import register_op
from ..common import static_shape_of

__all__: list[str] = []

_HOST = "sparse index bookkeeping runs on the host (small int64 tensors)"


def _ints(x) -> np.ndarray:
    return np.asarray(to_host(x)).astype(np.int64, copy=False)


# ---- SparseToDense --------------------------------------------------------------------------------

def _index_matrix(indices, rank) -> np.ndarray:
    idx = _ints(indices)
    if idx.ndim == 0:
        idx = idx.reshape(1, 1)
    elif idx.ndim == 1:
        idx = idx.reshape(-1, 1) if rank == 1 else idx.reshape(1, -1)
    return idx


def validate_indices(idx: np.ndarray, shape: np.ndarray, op: str) -> None:
    """TF's checks: every index in bounds, and the indices in row-major order without
    repeats, naming the first bad one."""
    if idx.size == 0:
        return
    bad = np.nonzero(((idx < 0) | (idx >= shape)).any(axis=1))[0]
    if bad.size:
        i = int(bad[0])
        raise InvalidArgumentError(f"{op}: indices[{i}] = {idx[i].tolist()} is out of bounds: "
                                   f"need 0 <= index < {shape.tolist()}")
    flat = np.ravel_multi_index(idx.T, tuple(int(d) for d in shape))
    step = np.diff(flat)
    if (step <= 0).any():
        i = int(np.nonzero(step <= 0)[0][0]) + 1
        what = "is repeated" if step[i - 1] == 0 else "is out of order"
        raise InvalidArgumentError(f"{op}: indices[{i}] = {idx[i].tolist()} {what}. Many sparse "
                                   "ops require sorted indices; use tv.sparse.reorder to "
                                   "sort them")


def _sparse_to_dense_kernel(indices, output_shape, values, default_value, *, validate):
    shape = _ints(output_shape).reshape(-1)
    idx = _index_matrix(indices, shape.size)
    if idx.shape[1] != shape.size:
        raise InvalidArgumentError(f"SparseToDense: indices have {idx.shape[1]} columns but the "
                                   f"output shape {shape.tolist()} has rank {shape.size}")
    vals = np.asarray(values)
    if vals.ndim and vals.shape[0] != idx.shape[0]:
        raise InvalidArgumentError(f"SparseToDense: {idx.shape[0]} indices but "
                                   f"{vals.shape[0]} values")
    if validate:
        validate_indices(idx, shape, "SparseToDense")
    else:
        bad = ((idx < 0) | (idx >= shape)).any(axis=1)
        if bad.any():
            i = int(np.nonzero(bad)[0][0])
            raise InvalidArgumentError(f"SparseToDense: indices[{i}] = {idx[i].tolist()} is "
                                       f"out of bounds: need 0 <= index < {shape.tolist()}")
    out = np.full(tuple(shape), np.asarray(default_value).item(), dtype=vals.dtype)
    out[tuple(idx.T)] = vals
    return out


def _sparse_to_dense_shape(inputs, attrs):
    indices, shape, values, default = inputs
    if not indices.dtype.is_integer or not shape.dtype.is_integer:
        raise InvalidArgumentError("SparseToDense: indices and output_shape must be integers")
    if values.dtype != default.dtype:
        raise InvalidArgumentError(f"SparseToDense: default_value ({default.dtype.name}) must "
                                   f"have the dtype of the values ({values.dtype.name})")
    if default._shape is not None and len(default._shape) != 0:
        raise InvalidArgumentError(f"SparseToDense: default_value must be a scalar, got shape "
                                   f"{list(default._shape)}")
    return [(values.dtype, static_shape_of(shape))]


def _sparse_to_dense_grad(op, g):
    from .index_ops import gather_nd
    from ..math.math_ops import reduce_sum
    indices, _, values, _ = op.inputs
    idx = indices
    if indices._shape is not None and len(indices._shape) < 2:
        from .array_ops import reshape
        idx = reshape(indices, [-1, 1] if len(indices._shape) == 1 else [1, 1])
    gv = gather_nd(g, idx)
    if values._shape is not None and len(values._shape) == 0:
        gv = reduce_sum(gv)
    # the default fills every position not written: its gradient is the rest of g's sum
    return [None, None, gv, reduce_sum(g) - reduce_sum(gv)]


register_op("SparseToDense", _sparse_to_dense_shape, _sparse_to_dense_kernel,
            grad=_sparse_to_dense_grad, cpu_only="scatters by host index checks "
            "(TF's SparseToDense validates its indices on the host)")


# ---- integer bookkeeping ------------------------------------------------------------------------

def _reorder_perm_kernel(indices):
    idx = _ints(indices)
    if idx.size == 0:
        return np.zeros(0, np.int64)
    return np.lexsort(idx.T[::-1]).astype(np.int64)  # row-major: the first column sorts last


def _reshape_indices_kernel(indices, shape, new_shape):
    idx, old, new = _ints(indices), _ints(shape).reshape(-1), _ints(new_shape).reshape(-1)
    total = int(np.prod(old))
    if (new < -1).any() or (new == -1).sum() > 1:
        raise InvalidArgumentError(f"SparseReshape: only one output dimension may be -1, and "
                                   f"none below it, got {new.tolist()}")
    if (new == -1).any():
        known = int(np.prod(new[new != -1]))
        if known == 0 or total % known:
            raise InvalidArgumentError(f"SparseReshape: input of shape {old.tolist()} "
                                       f"({total} values) cannot be reshaped to {new.tolist()}")
        new = np.where(new == -1, total // known, new)
    if int(np.prod(new)) != total:
        raise InvalidArgumentError(f"SparseReshape: input of shape {old.tolist()} ({total} "
                                   f"values) cannot be reshaped to {new.tolist()}")
    if idx.size == 0:
        return np.zeros((0, new.size), np.int64), new
    flat = np.ravel_multi_index(idx.T, tuple(int(d) for d in old))
    return np.stack(np.unravel_index(flat, tuple(int(d) for d in new)), 1).astype(np.int64), new


def _coalesce_kernel(indices, shape):
    """(unique indices in row-major order, the segment id of each input index)."""
    idx, shp = _ints(indices), _ints(shape).reshape(-1)
    if idx.size == 0:
        return np.zeros((0, shp.size), np.int64), np.zeros(0, np.int64)
    flat = np.ravel_multi_index(idx.T, tuple(int(d) for d in shp))
    uniq, seg = np.unique(flat, return_inverse=True)
    out = np.stack(np.unravel_index(uniq, tuple(int(d) for d in shp)), 1).astype(np.int64)
    return out, seg.astype(np.int64)


def _fill_empty_rows_kernel(indices, shape):
    """(output indices, for each output entry the input entry it copies or -1 for a new
    default, the empty-row indicator, the reverse index map)."""
    idx, shp = _ints(indices), _ints(shape).reshape(-1)
    rows = int(shp[0])
    n = idx.shape[0]
    if n and ((idx[:, 0] < 0) | (idx[:, 0] >= rows)).any():
        i = int(np.nonzero((idx[:, 0] < 0) | (idx[:, 0] >= rows))[0][0])
        raise InvalidArgumentError(f"SparseFillEmptyRows: indices({i}, 0) is invalid: "
                                   f"{int(idx[i, 0])} >= {rows}")
    empty = np.ones(rows, bool)
    empty[idx[:, 0]] = False
    new_rows = np.nonzero(empty)[0]
    new_idx = np.zeros((new_rows.size, shp.size), np.int64)
    new_idx[:, 0] = new_rows
    all_idx = np.concatenate([idx, new_idx]) if n or new_rows.size else idx.reshape(0, shp.size)
    source = np.concatenate([np.arange(n), np.full(new_rows.size, -1)]).astype(np.int64)
    order = np.lexsort(all_idx.T[::-1]) if all_idx.size else np.zeros(0, np.int64)
    reverse = np.empty(n, np.int64)
    pos = np.empty(order.size, np.int64)
    pos[order] = np.arange(order.size)
    reverse[:] = pos[:n]
    return all_idx[order], source[order], empty, reverse


def _shapes(*specs):
    return lambda inputs, attrs: [(_dt.as_dtype(d), s) for d, s in specs]


register_op("SparseReorderPerm", _shapes(("int64", (None,))), _reorder_perm_kernel,
            differentiable=False, cpu_only=_HOST)
register_op("SparseReshapeIndices", lambda inputs, attrs: [
    (_dt.int64, (None, None if inputs[2]._shape is None else inputs[2]._shape[0])),
    (_dt.int64, inputs[2]._shape)], _reshape_indices_kernel, differentiable=False,
    cpu_only=_HOST)
register_op("SparseCoalesceIds", lambda inputs, attrs: [
    (_dt.int64, (None, None if inputs[0]._shape is None else inputs[0]._shape[1])),
    (_dt.int64, (None,))], _coalesce_kernel, differentiable=False, cpu_only=_HOST)
register_op("SparseFillEmptyRowsMap", lambda inputs, attrs: [
    (_dt.int64, (None, None if inputs[0]._shape is None else inputs[0]._shape[1])),
    (_dt.int64, (None,)), (_dt.bool_, (None,)), (_dt.int64, (None,))],
    _fill_empty_rows_kernel, differentiable=False, cpu_only=_HOST)


def reorder_perm(indices):
    """The permutation that puts ``indices`` in row-major order."""
    return apply_op("SparseReorderPerm", [indices]).outputs[0]


def reshape_indices(indices, shape, new_shape):
    """(indices of the same values in ``new_shape``, the resolved new shape)."""
    return apply_op("SparseReshapeIndices", [indices, shape, new_shape]).outputs


def coalesce_ids(indices, shape):
    """(unique indices, segment id of each index)."""
    return apply_op("SparseCoalesceIds", [indices, shape]).outputs


def fill_empty_rows_map(indices, shape):
    """(indices, source entry or -1, empty-row indicator, reverse map)."""
    return apply_op("SparseFillEmptyRowsMap", [indices, shape]).outputs


def _segment_max_per_entry_kernel(values, seg):
    """Each entry's segment maximum (a constant shift for a softmax: no gradient)."""
    v, s = np.asarray(values), _ints(seg)
    if v.size == 0:
        return v.copy()
    m = np.full(int(s.max()) + 1, -np.inf, dtype=np.float64)
    np.maximum.at(m, s, v.astype(np.float64))
    return m[s].astype(v.dtype)


def _mask_keep_kernel(indices, mask_indices):
    return np.nonzero(~np.isin(_ints(indices), _ints(mask_indices)))[0].astype(np.int64)


register_op("SparseSegmentMaxPerEntry", lambda inputs, attrs: [(inputs[0].dtype,
                                                                 inputs[0]._shape)],
            _segment_max_per_entry_kernel, differentiable=False, cpu_only=_HOST)
register_op("SparseMaskKeep", _shapes(("int64", (None,))), _mask_keep_kernel,
            differentiable=False, cpu_only=_HOST)


def segment_max_per_entry(values, seg):
    """For each entry, the maximum of the values of its segment."""
    return apply_op("SparseSegmentMaxPerEntry", [values, seg]).outputs[0]


def mask_keep(indices, mask_indices):
    """The positions of ``indices`` not in ``mask_indices``."""
    return apply_op("SparseMaskKeep", [indices, mask_indices]).outputs[0]
