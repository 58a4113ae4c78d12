"""Small TF 1.x names: version constants, ``tf.half``/``tf.double``, static and dynamic shape
broadcasting, ``Dimension``/``dimension_value``, ``is_variable_initialized``, the sparse
segment reductions, ``parallel_stack``, ``switch_case``, ``init_scope``,
``op_scope``/``variable_op_scope``, ``get_logger``, ``timestamp``, ``random_gamma`` and
``random_poisson``.

>>> import tensorvm as tv
>>> tv.broadcast_static_shape(tv.TensorShape([None, 1, 3]), tv.TensorShape([4, 1])).as_list()
[None, 4, 3]
"""
from __future__ import annotations

import contextlib
import logging
import time

import numpy as np

from ..framework import dtypes as _dt
from ..framework.errors import InvalidArgumentError
from ..framework.graph import TensorShape, get_default_graph, name_scope
from ..framework.op_def_library import apply_op
from ..framework.op_registry import register_op
from ..framework.tensor_conversion import convert_to_tensor

__all__ = ["VERSION", "GIT_VERSION", "COMPILER_VERSION", "CXX11_ABI_FLAG", "MONOLITHIC_BUILD",
           "GRAPH_DEF_VERSION", "GRAPH_DEF_VERSION_MIN_CONSUMER",
           "GRAPH_DEF_VERSION_MIN_PRODUCER", "half", "double", "Dimension", "dimension_value",
           "dimension_at_index", "broadcast_static_shape", "broadcast_dynamic_shape",
           "is_variable_initialized", "sparse_segment_sum", "sparse_segment_mean",
           "sparse_segment_sqrt_n", "parallel_stack", "switch_case", "init_scope", "op_scope",
           "variable_op_scope", "get_logger", "timestamp", "random_gamma", "random_poisson"]

# TF 1.x programs read these to choose code paths: the API level tensorvm implements
VERSION = "1.15.0"
GIT_VERSION = "tensorvm"
COMPILER_VERSION = "none (tensorvm is Python)"
CXX11_ABI_FLAG = 0
MONOLITHIC_BUILD = 0
GRAPH_DEF_VERSION = 27
GRAPH_DEF_VERSION_MIN_CONSUMER = 0
GRAPH_DEF_VERSION_MIN_PRODUCER = 0

half = _dt.float16
double = _dt.float64


class Dimension:
    """TF 1.x's ``Dimension``: one dim of a static shape (``value`` None when unknown)."""

    __slots__ = ("value",)

    def __init__(self, value):
        self.value = None if value is None else int(value)
        if self.value is not None and self.value < 0:
            raise ValueError(f"Dimension {value} must be >= 0")

    def __int__(self):
        if self.value is None:
            raise TypeError("Cannot convert an unknown Dimension to an int")
        return self.value

    __index__ = __int__

    def __eq__(self, other):
        o = dimension_value(other)
        return None if self.value is None or o is None else self.value == o

    def __hash__(self):
        return hash(self.value)

    def __repr__(self):
        return f"Dimension({self.value})"


def dimension_value(dimension):
    """The int (or None) of a dim given as an int, None or :class:`Dimension`."""
    return dimension.value if isinstance(dimension, Dimension) else dimension


def dimension_at_index(shape, index) -> Dimension:
    """Dim ``index`` of ``shape`` (a TensorShape or list) as a :class:`Dimension`; unknown
    when the rank is."""
    s = shape if isinstance(shape, TensorShape) else TensorShape(shape)
    return Dimension(None if s.dims is None else s.dims[index])


def broadcast_static_shape(shape_x, shape_y) -> TensorShape:
    """The broadcast of two static shapes (ValueError when they cannot broadcast)."""
    from ..ops.common import broadcast_shapes
    x = shape_x if isinstance(shape_x, TensorShape) else TensorShape(shape_x)
    y = shape_y if isinstance(shape_y, TensorShape) else TensorShape(shape_y)
    try:
        return TensorShape(broadcast_shapes(x.dims, y.dims))
    except InvalidArgumentError:
        raise ValueError(f"Incompatible shapes for broadcasting: {x} and {y}") from None


def _broadcast_args_kernel(a, b):
    a, b = np.asarray(a).reshape(-1), np.asarray(b).reshape(-1)
    try:
        return np.asarray(np.broadcast_shapes(tuple(a), tuple(b)), dtype=a.dtype)
    except ValueError:
        raise InvalidArgumentError(f"Incompatible shapes: {a.tolist()} vs. {b.tolist()}") \
            from None


register_op("BroadcastArgs", lambda inputs, attrs: [(inputs[0].dtype, (None,))],
            _broadcast_args_kernel, differentiable=False,
            cpu_only="shape arithmetic on the host (TF: HostMemory)")


def broadcast_dynamic_shape(shape_x, shape_y):
    """The broadcast of two 1-D shape tensors, computed when the step runs."""
    x = convert_to_tensor(shape_x, dtype=_dt.int32)
    y = convert_to_tensor(shape_y, dtype=x.dtype)
    return apply_op("BroadcastArgs", [x, y], name="BroadcastArgs").outputs[0]


def is_variable_initialized(variable):
    """A bool tensor: whether ``variable`` holds a value."""
    return variable.is_initialized()


def _gathered(data, indices):
    from ..ops import gather
    return gather(convert_to_tensor(data), indices)


def sparse_segment_sum(data, indices, segment_ids, name=None, num_segments=None):
    """``segment_sum(gather(data, indices), segment_ids)`` (rows picked by ``indices``)."""
    from ..ops import segment_sum, unsorted_segment_sum
    with name_scope(name or "SparseSegmentSum"):
        rows = _gathered(data, indices)
        if num_segments is not None:
            return unsorted_segment_sum(rows, segment_ids, num_segments)
        return segment_sum(rows, segment_ids)


def sparse_segment_mean(data, indices, segment_ids, name=None, num_segments=None):
    """The mean of the rows of ``data`` at ``indices`` per segment (0 for an empty one)."""
    from ..ops import segment_mean, unsorted_segment_mean
    with name_scope(name or "SparseSegmentMean"):
        rows = _gathered(data, indices)
        if num_segments is not None:
            return unsorted_segment_mean(rows, segment_ids, num_segments)
        return segment_mean(rows, segment_ids)


def sparse_segment_sqrt_n(data, indices, segment_ids, name=None, num_segments=None):
    """The sum of the rows of ``data`` at ``indices`` per segment divided by the square root
    of its count."""
    from ..ops import reduce_max, unsorted_segment_sqrt_n
    with name_scope(name or "SparseSegmentSqrtN"):
        rows = _gathered(data, indices)
        ids = convert_to_tensor(segment_ids)
        n = num_segments if num_segments is not None else reduce_max(ids) + 1
        return unsorted_segment_sqrt_n(rows, ids, n)


def parallel_stack(values, name="parallel_stack"):
    """``tv.stack(values)`` (TF's copies the inputs in parallel; the result is the same)."""
    from ..ops import stack
    return stack(values, name=name)


def switch_case(branch_index, branch_fns, default=None, name="switch_case"):
    """The result of ``branch_fns[branch_index]()`` (a list, or a dict of int keys);
    ``default`` (else the last branch) for an index out of range."""
    from ..ops import case, equal
    pairs = sorted(branch_fns.items()) if isinstance(branch_fns, dict) else \
        list(enumerate(branch_fns))
    if not pairs:
        raise ValueError("branch_fns must not be empty")
    for k, fn in pairs:
        if not isinstance(k, (int, np.integer)) or not callable(fn):
            raise TypeError("branch_fns must be callables, keyed by ints when a dict")
    with name_scope(name):
        idx = convert_to_tensor(branch_index, dtype=_dt.int32)
        if default is None:
            default = pairs[-1][1]
            pairs = pairs[:-1]
        if not pairs:
            return default()
        return case([(equal(idx, int(k)), fn) for k, fn in pairs], default=default,
                    exclusive=False)


@contextlib.contextmanager
def init_scope():
    """Ops made inside depend on no enclosing ``control_dependencies`` (TF's lifting out of
    the current context, e.g. for variables made inside a cond or a loop's body)."""
    g = get_default_graph()
    with g.control_dependencies(None):
        yield


def op_scope(values, name, default_name=None):
    """Deprecated TF 1.x spelling of ``name_scope(name, default_name, values)``."""
    return name_scope(name, default_name, values)


def variable_op_scope(values, name_or_scope, default_name=None, initializer=None,
                      regularizer=None, caching_device=None, partitioner=None,
                      custom_getter=None, reuse=None, dtype=None, use_resource=None):
    """Deprecated TF 1.x spelling of ``variable_scope(name_or_scope, default_name,
    values, ...)``."""
    from ..ops.state.variable_scope import variable_scope
    return variable_scope(name_or_scope, default_name=default_name, values=values,
                          initializer=initializer, regularizer=regularizer,
                          partitioner=partitioner, reuse=reuse, dtype=dtype)


def get_logger() -> logging.Logger:
    """The logger tensorvm writes to (``tensorvm``), as TF's ``tf.get_logger()``."""
    return logging.getLogger("tensorvm")


register_op("Timestamp", lambda inputs, attrs: [(_dt.float64, ())],
            lambda: np.float64(time.time()), stateful=True, differentiable=False,
            cpu_only="reads the host's clock")


def timestamp(name=None):
    """The host's time in seconds since the epoch when the op runs (float64)."""
    return apply_op("Timestamp", [], name=name or "Timestamp").outputs[0]


# ---- random_gamma / random_poisson ------------------------------------------------------------

def _gamma_kernel(ctx, shape, alpha, beta, *, dtype, seed, seed2):
    from ..ops.math.random_ops import _dims, _rng
    a, b = np.asarray(alpha, np.float64), np.asarray(beta, np.float64)
    if (a <= 0).any() or (b <= 0).any():
        raise InvalidArgumentError("RandomGamma: alpha and beta must be positive")
    out_shape = _dims(shape) + np.broadcast_shapes(a.shape, b.shape)
    draw = _rng(ctx, seed, seed2).gamma(np.broadcast_to(a, out_shape), 1.0, out_shape)
    return (draw / np.broadcast_to(b, out_shape)).astype(dtype.np_dtype)


def _poisson_kernel(ctx, shape, lam, *, dtype, seed, seed2):
    from ..ops.math.random_ops import _dims, _rng
    lam = np.asarray(lam, np.float64)
    if (lam < 0).any():
        raise InvalidArgumentError("RandomPoisson: lam must be non-negative")
    out_shape = _dims(shape) + lam.shape
    return _rng(ctx, seed, seed2).poisson(np.broadcast_to(lam, out_shape),
                                          out_shape).astype(dtype.np_dtype)


def _draw_shape(n_params):
    def shape_fn(inputs, attrs):
        from ..ops.common import broadcast_shapes, static_shape_of
        head = static_shape_of(inputs[0])
        tail = inputs[1]._shape
        if n_params == 2:
            tail = broadcast_shapes(tail, inputs[2]._shape)
        return [(attrs["dtype"], None if head is None or tail is None else
                 tuple(head) + tuple(tail))]
    return shape_fn


register_op("RandomGamma", _draw_shape(2), _gamma_kernel, stateful=True, needs_ctx=True,
            differentiable=False, cpu_only="draws from the host's random generator")
register_op("RandomPoisson", _draw_shape(1), _poisson_kernel, stateful=True, needs_ctx=True,
            differentiable=False, cpu_only="draws from the host's random generator")


def random_gamma(shape, alpha, beta=None, dtype=_dt.float32, seed=None, name=None):
    """Gamma draws of ``shape + broadcast(alpha, beta).shape`` (``beta`` the rate, 1 by
    default), from the graph's seeded generator."""
    from ..ops.array.array_ops import shape_tensor
    from ..ops.math.random_ops import get_seed
    dt = _dt.as_dtype(dtype)
    s1, s2 = get_seed(seed)
    a = convert_to_tensor(alpha, dtype=dt)
    b = convert_to_tensor(1.0 if beta is None else beta, dtype=dt)
    return apply_op("RandomGamma", [shape_tensor(shape, "RandomGamma"), a, b],
                    {"dtype": dt, "seed": s1, "seed2": s2},
                    name=name or "RandomGamma").outputs[0]


def random_poisson(lam, shape, dtype=_dt.float32, seed=None, name=None):
    """Poisson draws of ``shape + lam.shape`` (TF 1.x's argument order: ``lam`` first)."""
    from ..ops.array.array_ops import shape_tensor
    from ..ops.math.random_ops import get_seed
    dt = _dt.as_dtype(dtype)
    s1, s2 = get_seed(seed)
    return apply_op("RandomPoisson", [shape_tensor(shape, "RandomPoisson"),
                                        convert_to_tensor(lam, dtype=_dt.float64)],
                    {"dtype": dt, "seed": s1, "seed2": s2},
                    name=name or "RandomPoisson").outputs[0]
