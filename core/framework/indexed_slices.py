"""Sparse gradients: :class:`IndexedSlices` (graph tensors) and :class:`IndexedSlicesValue`
(what a session returns when one is fetched). A leaf module: it imports nothing of tensorvm,
so autodiff, the op families, optimizers and the session can all use it.

``dense[indices[i]] += values[i]`` over a tensor of ``dense_shape``; ``tv.densify`` (in
:mod:`tensorvm.ops.array.index_ops`, which also registers the implicit conversion) makes it dense.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class IndexedSlices:
    """A sparse gradient: ``dense[indices[i]] += values[i]`` over a tensor of ``dense_shape``."""
    values: object  # Tensor
    indices: object  # Tensor
    dense_shape: object | None = None  # Tensor

    @property
    def dtype(self):
        """The dtype of ``values``."""
        return self.values.dtype

    @property
    def graph(self):
        """The graph of ``values``."""
        return self.values.graph

    @property
    def name(self):
        """The name of ``values``."""
        return self.values.name

    @property
    def op(self):
        """The op that makes ``values``."""
        return self.values.op


@dataclass(frozen=True)
class IndexedSlicesValue:
    """The fetched value of an IndexedSlices: NumPy ``values`` and ``indices``."""
    values: object
    indices: object
