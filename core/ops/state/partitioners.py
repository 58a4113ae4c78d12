"""Variable partitioners (TF's ``tf.fixed_size_partitioner``, ``min_max_variable_partitioner``)
and :func:`partitioned_variable`, which makes the parts.

A partitioner is ``fn(shape, dtype) -> [parts per axis]``; only one axis may be cut. Parts are
contiguous blocks along that axis, the first ``dim % n`` one row longer (TF's layout), so an
embedding table cut along axis 0 is looked up with ``embedding_lookup(parts,
partition_strategy="div")``. Each part is its own :class:`~tensorvm.Variable`, so
``replica_device_setter`` spreads the parts over the PS tasks, and ``Saver({"emb": parts})``
saves them as slices of one tensor.

>>> fixed_size_partitioner(3)((10, 4), None)
[3, 1]
>>> import tensorvm as tv
>>> min_max_variable_partitioner(max_partitions=8, min_slice_size=1 << 10)((1000, 4), tv.float32)
[8, 1]
>>> block_sizes(10, 3)
[4, 3, 3]
"""
from __future__ import annotations

import numpy as np

from ...framework import dtypes as _dt
from ...framework.errors import InvalidArgumentError


def fixed_size_partitioner(num_shards: int, axis: int = 0):
    """Cut ``axis`` into ``num_shards`` parts (fewer if the axis is shorter)."""
    if num_shards < 1:
        raise InvalidArgumentError(f"num_shards must be >= 1, got {num_shards}")

    def _partitioner(shape, dtype):
        parts = [1] * len(shape)
        parts[axis] = max(1, min(int(num_shards), int(shape[axis])))
        return parts
    return _partitioner


def min_max_variable_partitioner(max_partitions: int = 1, axis: int = 0,
                                 min_slice_size: int = 256 << 10,
                                 bytes_per_string_element: int = 16):
    """As many parts as keep each at least ``min_slice_size`` bytes, at most
    ``max_partitions`` (and at most the axis length)."""
    if max_partitions < 1:
        raise InvalidArgumentError(f"max_partitions must be >= 1, got {max_partitions}")

    def _partitioner(shape, dtype):
        dt = _dt.as_dtype(dtype) if dtype is not None else _dt.float32
        item = bytes_per_string_element if dt == _dt.string else dt.np_dtype.itemsize
        total = int(np.prod(shape)) * item
        n = max(1, min(int(max_partitions), int(shape[axis]), total // max(min_slice_size, 1)))
        parts = [1] * len(shape)
        parts[axis] = n
        return parts
    return _partitioner


def block_sizes(dim: int, n: int) -> list[int]:
    """Rows per part: contiguous blocks, the first ``dim % n`` one longer."""
    per, extra = divmod(int(dim), int(n))
    return [per + (1 if i < extra else 0) for i in range(n)]


class PartitionedVariable(list):
    """The parts of one logical variable (a list of Variables along ``axis``), accepted by
    ``embedding_lookup`` (with ``partition_strategy="div"``) and by ``Saver`` as
    ``{name: parts}``. ``as_tensor()`` concatenates the parts."""

    def __init__(self, name: str, shape, dtype, parts, axis: int = 0):
        super().__init__(parts)
        self.name, self.shape, self.dtype, self.axis = name, tuple(shape), dtype, axis

    def as_tensor(self):
        """The whole variable: its parts concatenated along the partitioned axis."""
        from ..array.manip_ops import concat
        return concat([p.value() for p in self], self.axis)

    def __repr__(self):
        return (f"<tv.PartitionedVariable {self.name!r} shape={list(self.shape)} "
                f"parts={len(self)} on {sorted({p.device for p in self})}>")


def partitioned_variable(name: str, shape, dtype=_dt.float32, initializer=None,
                         partitioner=None, trainable: bool = True) -> PartitionedVariable:
    """Make the parts of variable ``name`` of ``shape``: ``partitioner(shape, dtype)`` says
    how many along which axis; ``initializer`` is an array of the full shape (sliced per part),
    or ``fn(part_shape, dtype=..., partition_info=None)`` (``tv.zeros_initializer()`` and
    friends), or None (zeros)."""
    from .variables import Variable
    dt = _dt.as_dtype(dtype)
    shape = tuple(int(d) for d in shape)
    cuts = partitioner(shape, dt) if partitioner is not None else [1] * len(shape)
    axes = [i for i, c in enumerate(cuts) if c > 1]
    if len(axes) > 1:
        raise InvalidArgumentError(f"{name}: a partitioner may cut one axis, got {cuts}")
    axis = axes[0] if axes else 0
    sizes = block_sizes(shape[axis], cuts[axis] if axes else 1)
    parts, start = [], 0
    for i, rows in enumerate(sizes):
        pshape = shape[:axis] + (rows,) + shape[axis + 1:]
        if initializer is None:
            init = np.zeros(pshape, dt.np_dtype)
        elif callable(initializer):
            init = _call_init(initializer, pshape, dt)
        else:
            full = np.asarray(initializer, dt.np_dtype)
            init = np.take(full, np.arange(start, start + rows), axis=axis)
        parts.append(Variable(init, trainable=trainable, name=f"{name}/part_{i}", dtype=dt))
        start += rows
    return PartitionedVariable(name, shape, dt, parts, axis)


def _call_init(fn, shape, dt):
    try:
        return fn(list(shape), dtype=dt, partition_info=None)
    except TypeError:
        return fn(list(shape), dt)
