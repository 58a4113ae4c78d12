"""TF 1.x's variable sharing: ``tv.get_variable``, ``tv.variable_scope`` (reuse, ``AUTO_REUSE``,
initializers, regularizers, partitioners, custom getters), ``tv.get_variable_scope``.

Each graph keeps a store of the variables ``get_variable`` made, by full name (the scope names
joined with "/"); the current scope is per thread and per graph, like the name scope that
``variable_scope`` also opens. A partitioner cuts a new variable along one axis into parts
(``name/part_0`` …), each an ordinary variable that a device function (``replica_device_setter``)
places on its own; the :class:`PartitionedVariable` that holds them is accepted by
``tv.nn.embedding_lookup`` (``partition_strategy`` "div" matches how the rows were cut) and
reads as the concatenation of its parts elsewhere.

>>> import tensorvm as tv
>>> g = tv.Graph()
>>> with g.as_default():
...     with tv.variable_scope("layer"):
...         w = tv.get_variable("w", [2, 3], initializer=tv.zeros_initializer())
...     with tv.variable_scope("layer", reuse=True):
...         w2 = tv.get_variable("w")
...     w2 is w, w.name
(True, 'layer/w:0')
"""
from __future__ import annotations

import contextlib
import math

import numpy as np

from ...framework import dtypes as _dt
from ...framework.graph import get_default_graph
from ...framework.graph_keys import GraphKeys
from .init_ops import Constant, GlorotUniform, Zeros
from .partitioners import PartitionedVariable as _TrainPartitioned
from .partitioners import fixed_size_partitioner, min_max_variable_partitioner
from .variables import Variable

__all__ = ["AUTO_REUSE", "VariableScope", "variable_scope", "get_variable_scope",
           "get_variable", "get_local_variable", "PartitionedVariable",
           "fixed_size_partitioner", "variable_axis_size_partitioner",
           "min_max_variable_partitioner", "no_regularizer"]


class _AutoReuse:
    def __repr__(self):
        return "tv.AUTO_REUSE"


AUTO_REUSE = _AutoReuse()
"""``reuse=tv.AUTO_REUSE``: ``get_variable`` creates the variable if it does not exist, else
returns it."""


def no_regularizer(_):
    """A regularizer that adds nothing (to turn off a scope's regularizer)."""
    return None


class VariableScope:
    """What ``get_variable`` inherits: the scope's name, reuse mode, default initializer,
    regularizer, partitioner, dtype and custom getter."""

    def __init__(self, reuse=False, name: str = "", initializer=None, regularizer=None,
                 partitioner=None, custom_getter=None, name_scope: str = "",
                 dtype=_dt.float32):
        self.name, self.original_name_scope = name, name_scope
        self._reuse, self.initializer, self.regularizer = reuse, initializer, regularizer
        self.partitioner, self.custom_getter = partitioner, custom_getter
        self.dtype = _dt.as_dtype(dtype)

    @property
    def reuse(self):
        """The reuse mode: ``False``, ``True`` or ``tv.AUTO_REUSE``."""
        return self._reuse

    def reuse_variables(self) -> None:
        """From now on, ``get_variable`` in this scope returns existing variables."""
        self._reuse = True

    def set_initializer(self, initializer):
        """Set the default initializer of ``get_variable`` in this scope."""
        self.initializer = initializer

    def set_regularizer(self, regularizer):
        """Set the default regularizer of ``get_variable`` in this scope."""
        self.regularizer = regularizer

    def set_partitioner(self, partitioner):
        """Set the default partitioner of ``get_variable`` in this scope."""
        self.partitioner = partitioner

    def set_dtype(self, dtype):
        """Set the default dtype of ``get_variable`` in this scope."""
        self.dtype = _dt.as_dtype(dtype)

    def set_custom_getter(self, custom_getter):
        """Set the custom getter that ``get_variable`` calls in this scope."""
        self.custom_getter = custom_getter

    def get_variable(self, name, shape=None, dtype=None, **kwargs):
        """``tv.get_variable(name, ...)`` inside this scope."""
        with variable_scope(self):
            return get_variable(name, shape, dtype, **kwargs)

    def _child(self, name, name_scope, reuse, **overrides):
        s = VariableScope(reuse, name, self.initializer, self.regularizer, self.partitioner,
                          self.custom_getter, name_scope, self.dtype)
        for k, v in overrides.items():
            if v is not None:
                setattr(s, k, _dt.as_dtype(v) if k == "dtype" else v)
        return s

    def __repr__(self):
        return f"<tv.VariableScope {self.name!r} reuse={self._reuse}>"


class _Store:
    """One graph's variables made by ``get_variable`` and the scope names in use."""

    def __init__(self):
        self.vars: dict[str, object] = {}
        self.scopes: set[str] = set()


def _store(g) -> _Store:
    ref = g.get_collection_ref("__variable_store")
    if not ref:
        ref.append(_Store())
    return ref[0]


def get_variable_scope(graph=None) -> VariableScope:
    """The current variable scope of this thread in ``graph`` (default graph)."""
    g = graph or get_default_graph()
    scope = getattr(g._tls, "tv_variable_scope", None)
    if scope is None:
        scope = g._tls.tv_variable_scope = VariableScope(False)
    return scope


def _join(parent: str, name: str) -> str:
    return f"{parent}/{name}" if parent else name


@contextlib.contextmanager
def variable_scope(name_or_scope=None, default_name=None, values=None, initializer=None,
                   regularizer=None, caching_device=None, partitioner=None, custom_getter=None,
                   reuse=None, dtype=None, use_resource=None, constraint=None,
                   auxiliary_name_scope=True):
    """``with tv.variable_scope("layer1", reuse=tv.AUTO_REUSE):`` — a scope for
    ``get_variable`` names (and a name scope for ops). ``reuse=True`` (or a parent's) makes
    ``get_variable`` return existing variables; ``None`` inherits; ``default_name`` is made
    unique ("dense", "dense_1" …) when ``name_or_scope`` is None."""
    g = _graph_of(values)
    if name_or_scope is None and default_name is None:
        raise TypeError("If default_name is None then name_or_scope is required")
    if reuse is False:
        reuse = None  # TF 1.x: False inherits, as None does
    parent = get_variable_scope(g)
    store = _store(g)
    if isinstance(name_or_scope, VariableScope):
        new_reuse = reuse if reuse is not None else (True if parent.reuse is True
                                                     else name_or_scope.reuse)
        name, ns = name_or_scope.name, name_or_scope.original_name_scope
        base = name_or_scope
    else:
        if name_or_scope is not None:
            rel = str(name_or_scope)
        else:
            rel, i = default_name, 0
            while _join(parent.name, rel) in store.scopes:
                i += 1
                rel = f"{default_name}_{i}"
        name = _join(parent.name, rel)
        new_reuse = reuse if reuse is not None else parent.reuse
        ns, base = None, parent
    if name_or_scope is not None:
        # TF's close_variable_subscopes: a scope entered again by name hands out its default
        # names ("dense", "dense_1" …) afresh, so a function of layers called twice in it
        # (the second time with reuse=True) finds the same variables.
        store.scopes = {s for s in store.scopes if not s.startswith(name + "/")}
    store.scopes.add(name)
    with contextlib.ExitStack() as stack:
        if auxiliary_name_scope:
            if ns:
                ns = stack.enter_context(g.name_scope(ns))
            elif ns is None:
                ns = stack.enter_context(g.name_scope(rel))
        scope = base._child(name, ns or "", new_reuse, initializer=initializer,
                            regularizer=regularizer, partitioner=partitioner,
                            custom_getter=custom_getter, dtype=dtype)
        old = getattr(g._tls, "tv_variable_scope", None)
        g._tls.tv_variable_scope = scope
        try:
            yield scope
        finally:
            g._tls.tv_variable_scope = old


def _graph_of(values):
    for v in values or ():
        if hasattr(v, "graph"):
            return v.graph
    return get_default_graph()


# ---- get_variable ------------------------------------------------------------------------
def get_variable(name, shape=None, dtype=None, initializer=None, regularizer=None,
                 trainable=True, collections=None, caching_device=None, partitioner=None,
                 validate_shape=True, use_resource=None, custom_getter=None, constraint=None,
                 **kwargs):
    """Get the variable ``<scope>/<name>`` or make it. ``initializer`` is an initializer
    (``tv.zeros_initializer()`` …), a tensor or a value (then it gives the shape); the
    default is the scope's, else Glorot-uniform for floats and zeros for integers."""
    scope = get_variable_scope()
    full = _join(scope.name, name)
    getter = custom_getter or scope.custom_getter
    kw = dict(shape=shape, dtype=dtype, initializer=initializer, regularizer=regularizer,
              trainable=trainable, collections=collections, partitioner=partitioner,
              validate_shape=validate_shape)
    if getter is not None:
        return getter(_true_getter, full, **kw, **kwargs)
    return _true_getter(full, **kw)


def get_local_variable(name, shape=None, dtype=None, initializer=None, collections=None,
                       **kwargs):
    """``get_variable`` of a non-trainable variable in ``LOCAL_VARIABLES``."""
    colls = [GraphKeys.LOCAL_VARIABLES] + list(collections or [])
    return get_variable(name, shape, dtype, initializer, trainable=False, collections=colls,
                        **kwargs)


def _true_getter(full, shape=None, dtype=None, initializer=None, regularizer=None,
                 trainable=True, collections=None, partitioner=None, validate_shape=True,
                 **_):
    g = get_default_graph()
    scope = get_variable_scope(g)
    store = _store(g)
    shape = None if shape is None else _dims(shape, full)
    found = store.vars.get(full)
    if found is not None:
        if scope.reuse is not True and scope.reuse is not AUTO_REUSE:
            raise ValueError(f"Variable {full} already exists, disallowed. Did you mean to set "
                             "reuse=True or reuse=tf.AUTO_REUSE in VarScope?")
        found_shape = list(found.get_shape().as_list())
        if shape is not None and list(shape) != found_shape:
            raise ValueError(f"Trying to share variable {full}, but specified shape "
                             f"{list(shape)} and found shape {found_shape}.")
        if dtype is not None and _dt.as_dtype(dtype) != found.dtype:
            raise ValueError(f"Trying to share variable {full}, but specified dtype "
                             f"{_dt.as_dtype(dtype).name} and found dtype {found.dtype.name}.")
        return found
    if scope.reuse is True:
        raise ValueError(f"Variable {full} does not exist, or was not created with "
                         "tf.get_variable(). Did you mean to set reuse=tf.AUTO_REUSE in "
                         "VarScope?")
    init = initializer if initializer is not None else scope.initializer
    if init is not None and not callable(init):  # a value or a tensor gives the shape
        value, init_shape = init, _value_shape(init)
        if shape is not None and init_shape is not None and list(shape) != init_shape:
            raise ValueError(f"variable {full}: the initializer's shape {init_shape} does not "
                             f"match the given shape {list(shape)}")
        if dtype is None:
            dtype = value.dtype if hasattr(value, "op") else _dt.dtype_of_value(value)
        shape = init_shape if init_shape is not None else shape
        init = _TensorInit(value) if hasattr(value, "op") else Constant(value)
    dtype = _dt.as_dtype(dtype) if dtype is not None else scope.dtype
    if init is None:
        if dtype.is_floating:
            init = GlorotUniform()
        elif dtype.is_integer or dtype.is_bool or dtype.is_string:
            init = Zeros()
        else:
            raise ValueError(f"An initializer for variable {full} of {dtype.name} is required")
    if shape is None:
        raise ValueError(f"Shape of a new variable ({full}) must be fully defined, but instead "
                         "was None.")
    partitioner = partitioner if partitioner is not None else scope.partitioner
    make = dict(dtype=dtype, trainable=trainable, collections=collections,
                validate_shape=validate_shape)
    if partitioner is not None:
        var = _make_partitioned(g, full, shape, init, partitioner, make)
    else:
        var = _make_variable(g, full, shape, init, None, make)
    store.vars[full] = var
    reg = regularizer if regularizer is not None else scope.regularizer
    if reg is not None:
        with g.name_scope(None), g.name_scope(full + "/Regularizer/"):
            for part in (var if isinstance(var, PartitionedVariable) else [var]):
                loss = reg(part)
                if loss is not None:
                    g.add_to_collection(GraphKeys.REGULARIZATION_LOSSES, loss)
    return var


class _TensorInit:
    """A tensor used as an initializer (sliced for a part of a partitioned variable)."""

    def __init__(self, t):
        self.t = t

    def __call__(self, shape, dtype=None, partition_info=None):
        from ..math.math_ops import cast
        t = self.t if dtype is None or self.t.dtype == dtype else cast(self.t, dtype)
        if partition_info is None:
            return t
        from ..array.slice_ops import slice as slice_
        return slice_(t, partition_info.var_offset, list(shape))


def _dims(shape, full):
    dims = shape.as_list() if hasattr(shape, "as_list") else list(shape)
    if dims is None or any(d is None for d in dims):
        raise ValueError(f"Shape of a new variable ({full}) must be fully defined, but instead "
                         f"was {dims}.")
    return [int(d) for d in dims]


def _value_shape(value):
    if hasattr(value, "get_shape"):
        dims = value.get_shape().as_list()
        return None if dims is None or None in dims else list(dims)
    return list(np.shape(value))


def _make_variable(g, full, shape, init, partition_info, make):
    with g.name_scope(None), g.control_dependencies(None):
        with g.name_scope(full + "/Initializer/"):
            value = init(list(shape), make["dtype"], partition_info=partition_info) \
                if partition_info is not None else init(list(shape), make["dtype"])
        return Variable(value, name=full, **make)


# ---- partitioned variables ------------------------------------------------------------------
class _PartitionInfo:
    def __init__(self, full_shape, var_offset):
        self.full_shape, self.var_offset = list(full_shape), list(var_offset)


class PartitionedVariable(_TrainPartitioned):
    """A variable cut along one axis into parts (``name/part_<i>``): the list of its parts
    (each an ordinary Variable; this is ``tv.train.PartitionedVariable`` with TF 1.x's
    methods), read as their concatenation where a tensor is expected."""

    def __init__(self, name, shape, dtype, variables, partitions):
        axis = next((i for i, p in enumerate(partitions) if p > 1), 0)
        super().__init__(name, shape, dtype, variables, axis)
        self._partitions = list(partitions)

    def _get_variable_list(self):
        return list(self)

    def _get_partitions(self):
        return list(self._partitions)

    @property
    def graph(self):
        """The graph of its parts."""
        return self[0].graph

    def get_shape(self):
        """The whole variable's shape."""
        from ...framework.graph import TensorShape
        return TensorShape(self.shape)

    def as_tensor(self):
        """The whole variable: its parts concatenated along the partitioned axis (the part
        itself if there is one)."""
        from ..array.manip_ops import concat
        if len(self) == 1:
            return self[0].value()
        return concat([v.value() for v in self], self.axis, name=self.name + "/concat")

    def _as_graph_element(self):
        return self.as_tensor()


def _make_partitioned(g, full, shape, init, partitioner, make):
    from ...framework.graph import TensorShape
    if not shape:
        raise ValueError(f"variable {full}: a scalar cannot be partitioned")
    parts = [int(p) for p in partitioner(shape=TensorShape(shape), dtype=make["dtype"])]
    if len(parts) != len(shape) or any(p < 1 for p in parts) or sum(p > 1 for p in parts) > 1:
        raise ValueError(f"variable {full}: partitioner returned {parts}; expected one entry "
                         f"per dimension of {list(shape)}, all >= 1, at most one above 1")
    axis = next((i for i, p in enumerate(parts) if p > 1), 0)
    n = parts[axis]
    if n > shape[axis]:
        raise ValueError(f"variable {full}: cannot cut dimension {axis} of size {shape[axis]} "
                         f"into {n} parts")
    per, extra = divmod(shape[axis], n)
    variables, offset = [], 0
    for i in range(n):
        rows = per + (1 if i < extra else 0)
        pshape = list(shape)
        pshape[axis] = rows
        off = [0] * len(shape)
        off[axis] = offset
        variables.append(_make_variable(g, f"{full}/part_{i}", pshape, init,
                                        _PartitionInfo(shape, off), make))
        offset += rows
    return PartitionedVariable(full, shape, make["dtype"], variables, parts)


def _elem_bytes(dtype, bytes_per_string_element):
    dt = _dt.as_dtype(dtype)
    return bytes_per_string_element if dt.is_string else dt.np_dtype.itemsize


def variable_axis_size_partitioner(max_shard_bytes, axis=0, bytes_per_string_element=16,
                                   max_shards=None):
    """Cut ``axis`` so that each part holds at most ``max_shard_bytes`` (whole slices)."""
    if max_shard_bytes < 1:
        raise ValueError(f"max_shard_bytes must be positive, got {max_shard_bytes}")

    def partitioner(shape, dtype):
        dims = shape.as_list() if hasattr(shape, "as_list") else list(shape)
        slice_bytes = int(np.prod([d for i, d in enumerate(dims) if i != axis])) * \
            _elem_bytes(dtype, bytes_per_string_element)
        per_shard = max(1, max_shard_bytes // max(slice_bytes, 1))
        n = int(math.ceil(dims[axis] / per_shard))
        if max_shards:
            n = min(n, int(max_shards))
        out = [1] * len(dims)
        out[axis] = max(1, n)
        return out
    return partitioner
