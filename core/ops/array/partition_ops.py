"""Partitioning and masking ops: dynamic_partition/dynamic_stitch, boolean_mask, one_hot.

>>> import tensorvm as tv
>>> x = tv.constant([10, 20, 30, 40])
>>> parts = tv.dynamic_partition(x, [0, 1, 0, 1], 2)
>>> with tv.Session() as s: [p.tolist() for p in s.run(parts)]
[[10, 30], [20, 40]]
"""
from __future__ import annotations

import numpy as np

from ...framework import dtypes as _dt
from ...framework.errors import InvalidArgumentError
from ...framework.graph import Tensor
from ...framework.op_def_library import apply_op
from ...vm.kernels.array_api import array_namespace, to_host
from ...framework.op_registry import register_op
from ...framework.tensor_conversion import convert_to_tensor
from .array_ops import dense_or_zeros
from ..common import check_index_range, check_int_dtype, outs, rank_of, shape_is_prefix, static_int
from .index_ops import gather

__all__ = ["dynamic_partition", "dynamic_stitch", "boolean_mask", "one_hot"]


# ---- dynamic_partition, dynamic_stitch --------------------------------------------------------
def _partition_shape(inputs, attrs):
    data, parts = inputs
    n = attrs["num_partitions"]
    if n < 1:
        raise InvalidArgumentError(f"DynamicPartition: num_partitions must be >= 1, got {n}")
    check_int_dtype(parts, "partitions", "DynamicPartition")
    if not shape_is_prefix(parts._shape, data._shape):
        raise InvalidArgumentError(f"DynamicPartition: partitions shape {list(parts._shape)} "
                                   f"is not a prefix of the data shape {list(data._shape)}")
    if data._shape is None or parts._shape is None:
        return [(data.dtype, None)] * n
    return [(data.dtype, (None,) + data._shape[len(parts._shape):])] * n


def _partition_kernel(data, partitions, num_partitions):
    if data.shape[:partitions.ndim] != partitions.shape:
        raise InvalidArgumentError(f"DynamicPartition: partitions shape "
                                   f"{list(partitions.shape)} is not a prefix of the data shape "
                                   f"{list(data.shape)}")
    p = partitions.reshape(-1)
    flat = data.reshape((p.size,) + data.shape[partitions.ndim:])
    xp = array_namespace(p)
    if xp is np:  # host ids (a CPU's, or fed to a GPU op): checked and counted on the host
        check_index_range(p, num_partitions, "DynamicPartition", "partitions")
        counts = np.bincount(p, minlength=num_partitions)
    else:
        # Device ids: the outputs' sizes are their counts, which the host must read; TF's GPU
        # kernel copies them too (one copy, dynamic_partition_op_gpu.cu.cc). Ids out of range
        # are counted in a spare last bin, so the range check rides on that one copy (TF's GPU
        # kernel drops such rows silently: this fails as the CPU's does).
        bad = (p < 0) | (p >= num_partitions)
        counts = to_host(xp.bincount(xp.where(bad, num_partitions, p),
                                     minlength=num_partitions + 1))
        if counts[num_partitions]:
            check_index_range(to_host(p), num_partitions, "DynamicPartition", "partitions")
        counts = counts[:num_partitions]
    order = np.argsort(p, kind="stable")  # (CuPy's argsort is always stable)
    if array_namespace(flat) is not np and xp is np:
        order = array_namespace(flat).asarray(order)
    return outs(np.split(flat[order], np.cumsum(counts)[:-1].tolist()))


def _partition_grad_kernel(partitions, *gs):
    p = partitions.reshape(-1)
    tail = gs[0].shape[1:]
    out = array_namespace(gs[0]).empty((p.size,) + tail, dtype=gs[0].dtype)
    out[np.argsort(p, kind="stable")] = np.concatenate(gs)
    return out.reshape(partitions.shape + tail)


def _partition_grad_shape(inputs, attrs):
    parts, g0 = inputs[0], inputs[1]
    if parts._shape is None or g0._shape is None:
        return [(g0.dtype, None)]
    return [(g0.dtype, parts._shape + g0._shape[1:])]


register_op("DynamicPartition", _partition_shape, _partition_kernel,
            grad=lambda op, *gs: [apply_op("DynamicPartitionGrad", [op.inputs[1]] + [
                dense_or_zeros(g, o) for g, o in zip(gs, op.outputs)]).outputs[0], None])
register_op("DynamicPartitionGrad", _partition_grad_shape, _partition_grad_kernel,
            grad=lambda op, g: [None] + dynamic_partition(g, op.inputs[0],
                                                          len(op.inputs) - 1))


def dynamic_partition(data, partitions, num_partitions, name=None) -> list[Tensor]:
    """Split ``data`` into ``num_partitions`` tensors by the partition id of each row."""
    n = static_int(num_partitions, "num_partitions", "DynamicPartition")
    return list(apply_op("DynamicPartition", [data, partitions], {"num_partitions": n},
                         name=name).outputs)


def _stitch_shape(inputs, attrs):
    n = attrs["n"]
    idx, data = inputs[:n], inputs[n:]
    if n < 1 or len(data) != n:
        raise InvalidArgumentError(f"DynamicStitch: needs as many data tensors as index tensors "
                                   f"(at least one), got {n} and {len(data)}")
    from ..common import check_same_dtype
    dt = check_same_dtype(data, "DynamicStitch")
    for i, d in zip(idx, data):
        check_int_dtype(i, "indices", "DynamicStitch")
        if not shape_is_prefix(i._shape, d._shape):
            raise InvalidArgumentError(f"DynamicStitch: indices shape {list(i._shape)} is not a "
                                       f"prefix of the data shape {list(d._shape)}")
    if idx[0]._shape is None or data[0]._shape is None:
        return [(dt, None)]
    return [(dt, (None,) + data[0]._shape[len(idx[0]._shape):])]


def _stitch_kernel(*args, n):
    # the indices are host values (on a GPU too: kernels_gpu.HALF_HOST_INPUTS, TF's
    # HostMemory("indices")): the output's size and the range check wait for nothing
    idx, data = [to_host(i) for i in args[:n]], args[n:]
    tail = data[0].shape[idx[0].ndim:]
    flat_i = np.concatenate([i.reshape(-1) for i in idx])
    flat_d = np.concatenate([d.reshape((i.size,) + tail) for i, d in zip(idx, data)])
    if flat_i.size and flat_i.min() < 0:
        raise InvalidArgumentError(f"DynamicStitch: negative index {flat_i.min()}")
    size = int(flat_i.max()) + 1 if flat_i.size else 0
    xp = array_namespace(flat_d)
    out = xp.zeros((size,) + tail, dtype=data[0].dtype)
    if xp is np:
        out[flat_i] = flat_d  # NumPy: of duplicate indices, the last one lands
        return out
    # CuPy's scatter leaves which of duplicate indices lands undefined: pick the last of each
    # on the host (as TF's GPU kernel does) and gather those rows
    src = np.full(size, -1, np.int64)
    src[flat_i] = np.arange(flat_i.size)
    rows = np.flatnonzero(src >= 0)
    out[xp.asarray(rows)] = flat_d[xp.asarray(src[rows])]
    return out


register_op("DynamicStitch", _stitch_shape, _stitch_kernel,
            grad=lambda op, g: [None] * op.attrs["n"]
            + [gather(g, i) for i in op.inputs[:op.attrs["n"]]])


def dynamic_stitch(indices, data, name=None) -> Tensor:
    """Interleave ``data`` tensors into one: ``merged[indices[m][i]] = data[m][i]``."""
    if len(indices) != len(data):
        raise InvalidArgumentError(f"DynamicStitch: {len(indices)} index tensors for "
                                   f"{len(data)} data tensors")
    return apply_op("DynamicStitch", list(indices) + list(data), {"n": len(indices)},
                    name=name).outputs[0]


# ---- boolean_mask -----------------------------------------------------------------------------
def _bmask_shape(inputs, attrs):
    x, m = inputs[0], inputs[1]
    if not m.dtype.is_bool:
        raise InvalidArgumentError(f"BooleanMask: mask must be bool, got {m.dtype.name}")
    if m._shape is None or x._shape is None:
        return [(x.dtype, None)]
    k, a = len(m._shape), attrs["axis"]
    if k == 0:
        raise InvalidArgumentError("BooleanMask: mask cannot be a scalar")
    if a < 0 or a + k > len(x._shape):
        raise InvalidArgumentError(f"BooleanMask: a mask of rank {k} at axis {a} does not fit "
                                   f"a tensor of rank {len(x._shape)}")
    if not shape_is_prefix(m._shape, x._shape[a:]):
        raise InvalidArgumentError(f"BooleanMask: mask shape {list(m._shape)} does not match "
                                   f"the tensor's dimensions {list(x._shape[a:a + k])}")
    return [(x.dtype, x._shape[:a] + (None,) + x._shape[a + k:])]


def _bmask_index(x_shape, mask, axis):
    if tuple(x_shape[axis:axis + mask.ndim]) != mask.shape:
        raise InvalidArgumentError(f"BooleanMask: mask shape {list(mask.shape)} does not match "
                                   f"the tensor's dimensions {list(x_shape[axis:])}")
    return (slice(None),) * axis + (mask,)


def _bmask_grad_kernel(g, x, mask, axis):
    out = array_namespace(g).zeros(np.shape(x), dtype=g.dtype)
    out[_bmask_index(out.shape, mask, axis)] = g
    return out


def _bmask_kernel(x, mask, axis):
    xp = array_namespace(x, mask)  # one namespace: a host tensor masked by a device mask too
    x, mask = xp.asarray(x), xp.asarray(mask)
    return x[_bmask_index(x.shape, mask, axis)]


register_op("BooleanMask", _bmask_shape, _bmask_kernel,
            grad=lambda op, g: [apply_op("BooleanMaskGrad", [g, *op.inputs], op.attrs)
                                .outputs[0], None])
register_op("BooleanMaskGrad", lambda inputs, attrs: [(inputs[0].dtype, inputs[1]._shape)],
            _bmask_grad_kernel,
            grad=lambda op, g: [boolean_mask(g, op.inputs[2], axis=op.attrs["axis"]), None,
                                None])


def boolean_mask(tensor, mask, name: str = "boolean_mask", axis=None) -> Tensor:
    """The entries of ``tensor`` where ``mask`` (matching dims ``axis:axis+rank(mask)``) is
    True, flattened into one dimension."""
    x, m = convert_to_tensor(tensor), convert_to_tensor(mask)
    a = 0 if axis is None else static_int(axis, "axis", "BooleanMask")
    if a < 0 and rank_of(x) is not None:
        a += rank_of(x)
    return apply_op("BooleanMask", [x, m], {"axis": a}, name=name).outputs[0]


# ---- one_hot ----------------------------------------------------------------------------------
def _one_hot_shape(inputs, attrs):
    i, on, off = inputs
    check_int_dtype(i, "indices", "OneHot")
    if on.dtype != off.dtype or on._shape not in ((), None) or off._shape not in ((), None):
        raise InvalidArgumentError(f"OneHot: on_value and off_value must be scalars of one "
                                   f"dtype, got {on!r} and {off!r}")
    if attrs["depth"] < 0:
        raise InvalidArgumentError(f"OneHot: depth must be >= 0, got {attrs['depth']}")
    if i._shape is None:
        return [(on.dtype, None)]
    a = attrs["axis"]
    if not -1 <= a <= len(i._shape):
        raise InvalidArgumentError(f"OneHot: axis {a} must be in [-1, {len(i._shape)}]")
    a = len(i._shape) if a == -1 else a
    return [(on.dtype, i._shape[:a] + (attrs["depth"],) + i._shape[a:])]


def _one_hot_kernel(indices, on, off, depth, axis):
    hot = indices[..., None] == array_namespace(indices).arange(depth)
    out = np.where(hot, on, off).astype(on.dtype, copy=False)
    return out if axis == -1 else np.moveaxis(out, -1, axis)


register_op("OneHot", _one_hot_shape, _one_hot_kernel, differentiable=False)


def one_hot(indices, depth, on_value=None, off_value=None, axis=None, dtype=None,
            name=None) -> Tensor:
    """``tv.one_hot([0, 2], 3)`` → ``[[1, 0, 0], [0, 0, 1]]`` (float32); indices out of
    ``[0, depth)`` give a row of ``off_value``."""
    d = static_int(depth, "depth", "OneHot")
    if dtype is None:
        given = on_value if on_value is not None else off_value
        dtype = _dt.float32 if given is None else given.dtype if isinstance(given, Tensor) \
            else _dt.dtype_of_value(given)
    dt = _dt.as_dtype(dtype)
    on = convert_to_tensor(1 if on_value is None else on_value, dtype=dt)
    off = convert_to_tensor(0 if off_value is None else off_value, dtype=dt)
    return apply_op("OneHot", [indices, on, off], {"depth": d, "axis": -1 if axis is None
                                                   else int(axis)}, name=name).outputs[0]
