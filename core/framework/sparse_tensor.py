"""``tv.SparseTensor`` and ``tv.SparseTensorValue``: TF 1.x's sparse tensors.

A :class:`SparseTensor` is three tensors of one graph: ``indices`` (int64 ``[N, rank]``, the
coordinates of the present values, row-major), ``values`` (``[N]``) and ``dense_shape``
(int64 ``[rank]``). ``sess.run`` of one gives a :class:`SparseTensorValue` (a named triple of
arrays); a SparseTensor — a :func:`tv.sparse.placeholder` most often — is fed with a
SparseTensorValue or an ``(indices, values, dense_shape)`` triple. Unpacking works on both
(``indices, values, shape = sp``). The ops are in :mod:`tensorvm.tf_api.sparse`.

>>> import tensorvm as tv
>>> sp = tv.SparseTensor(indices=[[0, 1], [2, 0]], values=[1.0, 2.0], dense_shape=[3, 2])
>>> with tv.Session() as s: s.run(sp).values.tolist(), s.run(tv.sparse.to_dense(sp)).tolist()
([1.0, 2.0], [[0.0, 1.0], [0.0, 0.0], [2.0, 0.0]])
"""
from __future__ import annotations

import collections

import numpy as np

from . import dtypes as _dt
from .graph import Tensor, TensorShape
from .tensor_conversion import convert_to_tensor

__all__ = ["SparseTensor", "SparseTensorValue"]

SparseTensorValue = collections.namedtuple("SparseTensorValue",
                                           ["indices", "values", "dense_shape"])
SparseTensorValue.__doc__ = ("The value of a :class:`SparseTensor`: ``indices`` ``[N, rank]``, "
                             "``values`` ``[N]`` and ``dense_shape`` ``[rank]`` arrays.")


def _static(t: Tensor):
    """The value of ``t`` where it is a constant, else None."""
    return t.op.attrs["value"] if t.op.type == "Const" else None


class SparseTensor:
    """A sparse tensor as three tensors: ``indices`` (int64 ``[N, rank]``), ``values``
    (``[N]``) and ``dense_shape`` (int64 ``[rank]``)."""

    # The static dense shape where it is known otherwise than from ``dense_shape`` (the
    # element spec of a tv.data dataset: get_next and traced functions' arguments).
    _shape_hint: tuple | None = None

    def __init__(self, indices, values, dense_shape):
        self._indices = convert_to_tensor(indices, dtype=_dt.int64, name="indices")
        self._values = convert_to_tensor(values, name="values")
        self._dense_shape = convert_to_tensor(dense_shape, dtype=_dt.int64, name="dense_shape")
        for what, t, rank in (("indices", self._indices, 2), ("values", self._values, 1),
                              ("dense_shape", self._dense_shape, 1)):
            if t._shape is not None and len(t._shape) != rank:
                raise ValueError(f"SparseTensor: {what} must be {rank}-D, got shape "
                                 f"{list(t._shape)}")

    @classmethod
    def from_value(cls, value) -> "SparseTensor":
        """A SparseTensor of constants from a :class:`SparseTensorValue` (or a SparseTensor,
        returned as it is)."""
        if isinstance(value, SparseTensor):
            return value
        return cls(*value)

    indices = property(lambda self: self._indices, doc="int64 ``[N, rank]`` coordinates.")
    values = property(lambda self: self._values, doc="``[N]`` values.")
    dense_shape = property(lambda self: self._dense_shape, doc="int64 ``[rank]`` shape.")
    dtype = property(lambda self: self._values.dtype, doc="The dtype of the values.")
    op = property(lambda self: self._values.op, doc="The op that makes the values.")
    graph = property(lambda self: self._values.graph, doc="The graph of the three tensors.")

    @property
    def shape(self) -> TensorShape:
        """The static dense shape: known dims where ``dense_shape`` is a constant, else the
        rank when the shapes give it."""
        v = _static(self._dense_shape)
        if v is not None:
            return TensorShape([int(d) for d in np.asarray(v).reshape(-1)])
        if self._shape_hint is not None:
            return TensorShape(list(self._shape_hint))
        for rank in (self._dense_shape._shape and self._dense_shape._shape[0],
                     self._indices._shape and self._indices._shape[1]):
            if rank is not None:
                return TensorShape([None] * int(rank))
        return TensorShape(None)

    def get_shape(self) -> TensorShape:
        """Same as :attr:`shape`."""
        return self.shape

    def eval(self, feed_dict=None, session=None):
        """``session.run(self, feed_dict)`` in ``session`` or the default session: a
        :class:`SparseTensorValue`."""
        from .graph import _session_for
        return _session_for("evaluate a SparseTensor", session).run(self, feed_dict)

    def __iter__(self):
        return iter((self._indices, self._values, self._dense_shape))

    def __repr__(self):
        return (f"SparseTensor(indices={self._indices!r}, values={self._values!r}, "
                f"dense_shape={self._dense_shape!r})")


def sparse_feeds(key: SparseTensor, value) -> list[tuple[Tensor, object]]:
    """The (component tensor, value) feeds of feeding ``value`` (a SparseTensorValue or an
    ``(indices, values, dense_shape)`` triple) to the SparseTensor ``key``."""
    if not isinstance(value, (tuple, list)) or len(value) != 3:
        raise TypeError(f"feed_dict value for SparseTensor {key.values.name!r} must be a "
                        "tv.SparseTensorValue or an (indices, values, dense_shape) triple, got "
                        f"{type(value).__name__}")
    return list(zip(key, value))
