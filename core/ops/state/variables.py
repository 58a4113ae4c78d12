"""``tv.Variable``: a named, mutable tensor that lives as a resource on its device.

>>> import tensorvm as tv
>>> v = tv.Variable(1.0, name="v")
>>> inc = v.assign_add(2.0)
>>> with tv.Session() as s:
...     _ = s.run(tv.global_variables_initializer()); float(s.run(inc))
3.0
"""
from __future__ import annotations

from ...framework import dtypes as _dt
from ...framework.errors import InvalidArgumentError
from ...framework.graph import Graph, Operation, Tensor, get_default_graph
from ...framework.op_def_library import apply_op
from ...framework.tensor_conversion import convert_to_tensor

GLOBAL_VARIABLES = "variables"
TRAINABLE_VARIABLES = "trainable_variables"


class Variable:
    """``tv.Variable(initial_value, name=, trainable=, dtype=)``.

    Reading the variable (using it in an expression) gives its current value; ``initializer``
    assigns the initial value. Updates: ``assign``, ``assign_add``, ``assign_sub``,
    ``scatter_add``, ``scatter_sub``, ``scatter_update``.
    """

    def __init__(self, initial_value=None, trainable: bool = True, name: str | None = None,
                 dtype=None, validate_shape: bool = True, collections=None,
                 container: str = "", shape=None):
        if initial_value is None:
            raise InvalidArgumentError("tv.Variable needs an initial_value")
        if callable(initial_value):
            initial_value = initial_value()
        init = convert_to_tensor(initial_value, dtype=None)
        if dtype is not None and _dt.as_dtype(dtype) != init.dtype:
            from ..math.math_ops import cast
            init = cast(init, dtype)
        g = init.graph
        self.graph: Graph = g
        shp = init._shape if shape is None else tuple(shape)
        if validate_shape and (shp is None or None in shp):
            raise InvalidArgumentError(
                f"variable {name!r}: initial value must have a fully defined shape "
                f"(got {shp}); pass validate_shape=False")
        with g.as_default():
            self._attrs = {"var_name": None, "container": container, "dtype": init.dtype,
                           "shape": shp if validate_shape else None}
            op = apply_op("VariableV2", [], dict(self._attrs), name=name or "Variable",
                          graph=g, colocation=None)
            if op.colocation is None:  # else: built inside colocate_with, it joins that group
                op.colocation = op.name
            self._attrs["var_name"] = op.name
            op.attrs["var_name"] = op.name
            self._op = op
            self._value = op.outputs[0]
            with g.name_scope(op.name + "/"):
                self._initializer = self._update("Assign", init, "Assign",
                                                 validate_shape=validate_shape).op
        self.initial_value = init
        self.trainable = trainable
        # collections=[] keeps the variable out of every collection but TRAINABLE_VARIABLES
        # (TF's rule); only None means "not given".
        for c in (list(collections) if collections is not None else [GLOBAL_VARIABLES]) + \
                ([TRAINABLE_VARIABLES] if trainable else []):
            if c not in g.get_collection(c) and self not in g.get_collection(c):
                g.add_to_collection(c, self)

    # ---- identity -----------------------------------------------------------------------
    @property
    def name(self) -> str:
        """``"<op name>:0"``, as TF names a variable."""
        return self._value.name

    @property
    def op(self) -> Operation:
        """The ``VariableV2`` op that holds the variable."""
        return self._op

    @property
    def dtype(self):
        """The variable's dtype."""
        return self._value.dtype

    @property
    def shape(self):
        """The variable's static shape."""
        return self._value.shape

    def get_shape(self):
        """The variable's static shape (as ``shape``)."""
        return self.shape

    @property
    def device(self) -> str:
        """The device the variable's op asked for (its PS task, typically)."""
        return self._op.device

    @property
    def initializer(self) -> Operation:
        """The op that assigns the initial value."""
        return self._initializer

    def value(self) -> Tensor:
        """The tensor of the variable's value in a step."""
        return self._value

    def read_value(self) -> Tensor:
        """The variable's value, read by a new op (TF 1.x's ``identity(v)``): a snapshot, not
        the variable itself (fetched in a step that updates the variable, in process, the
        variable gives the value as the step left it; its read gives what it read). Under
        ``control_dependencies`` it reads after those ops (TF 1.x: "can be different from
        value()"), in a while_loop body too."""
        g = get_default_graph()
        from ..array.array_ops import identity
        if self.graph._finalized and not (g is self.graph and any(g._control_stack)):
            return self._value  # on a finalized graph no op can be added: the variable's tensor
        if g is not self.graph and _root_graph(g) is self.graph:  # a while_loop body
            return identity(self._value, name=f"{self._op.name}/read_value")
        with self.graph.as_default():
            return identity(self._value, name=f"{self._op.name}/read_value")

    def _as_graph_element(self) -> Tensor:
        return self._value

    def eval(self, session=None):
        """The variable's current value, run in ``session`` or the default session."""
        return self._value.eval(session=session)

    def __repr__(self):
        return f"<tv.Variable '{self.name}' shape={self.shape.dims} dtype={self.dtype.name}>"

    # ---- updates ------------------------------------------------------------------------
    def _build_graph(self):
        """The variable's graph, or the while_loop body being traced in it (whose updates
        must run every iteration, not once outside the loop)."""
        cur = get_default_graph()
        return cur if getattr(cur, "outer", None) is not None else self.graph

    def _update(self, op_type, value, name, validate_shape=True, extra=()):
        g = self._build_graph()
        with g.as_default(), g.colocate_with(self._op):
            value = convert_to_tensor(value, dtype=self.dtype) if not extra else value
            attrs = dict(self._attrs)
            if op_type == "Assign":
                attrs["validate_shape"] = validate_shape
            return apply_op(op_type, list(extra) + [value], attrs, name=name,
                            colocation=self._op.colocation).outputs[0]

    def assign(self, value, use_locking=False, name=None, read_value=True):
        """An op that sets the variable to ``value``; its output is the new value."""
        return self._update("Assign", value, name or "Assign")

    def assign_add(self, delta, use_locking=False, name=None, read_value=True):
        """An op that adds ``delta`` to the variable; its output is the new value."""
        return self._update("AssignAdd", delta, name or "AssignAdd")

    def assign_sub(self, delta, use_locking=False, name=None, read_value=True):
        """An op that subtracts ``delta`` from the variable; its output is the new value."""
        return self._update("AssignSub", delta, name or "AssignSub")

    def count_up_to(self, limit):
        """An op that adds 1 to this integer variable and outputs its value before the
        increment; once the value has reached ``limit`` it raises ``OutOfRangeError``
        (``Reached limit of <limit>``) without changing it."""
        if not self.dtype.is_integer:
            raise InvalidArgumentError(f"count_up_to: {self.name} must be int32 or int64, got "
                                       f"{self.dtype.name}")
        g = self._build_graph()
        with g.as_default(), g.colocate_with(self._op):
            return apply_op("CountUpTo", [], {**self._attrs, "limit": int(limit)},
                            name="CountUpTo", colocation=self._op.colocation).outputs[0]

    def _scatter(self, op_type, indices, updates, name):
        g = self._build_graph()
        with g.as_default():
            idx = convert_to_tensor(indices)
            upd = convert_to_tensor(updates, dtype=self.dtype)
        return self._update(op_type, upd, name or op_type, extra=(idx,))

    def scatter_add(self, sparse_delta, use_locking=False, name=None):
        """Add ``sparse_delta`` (an ``IndexedSlices``) to the rows it names."""
        return self._scatter("ScatterAdd", sparse_delta.indices, sparse_delta.values, name)

    def scatter_sub(self, sparse_delta, use_locking=False, name=None):
        """Subtract ``sparse_delta`` (an ``IndexedSlices``) from the rows it names."""
        return self._scatter("ScatterSub", sparse_delta.indices, sparse_delta.values, name)

    def scatter_update(self, sparse_delta, use_locking=False, name=None):
        """Set the rows ``sparse_delta`` (an ``IndexedSlices``) names to its values."""
        return self._scatter("ScatterUpdate", sparse_delta.indices, sparse_delta.values, name)

    def scatter_mul(self, sparse_delta, use_locking=False, name=None):
        """Multiply the rows ``sparse_delta`` (an ``IndexedSlices``) names by its values."""
        return self._scatter("ScatterMul", sparse_delta.indices, sparse_delta.values, name)

    def scatter_div(self, sparse_delta, use_locking=False, name=None):
        """Divide the rows ``sparse_delta`` names by its values."""
        return self._scatter("ScatterDiv", sparse_delta.indices, sparse_delta.values, name)

    def scatter_min(self, sparse_delta, use_locking=False, name=None):
        """The element-wise minimum of the rows ``sparse_delta`` names and its values."""
        return self._scatter("ScatterMin", sparse_delta.indices, sparse_delta.values, name)

    def scatter_max(self, sparse_delta, use_locking=False, name=None):
        """The element-wise maximum of the rows ``sparse_delta`` names and its values."""
        return self._scatter("ScatterMax", sparse_delta.indices, sparse_delta.values, name)

    def scatter_nd_update(self, indices, updates, name=None):
        """Set the slices at ``indices`` (``[..., k]`` index tuples) to ``updates``."""
        return self._scatter("ScatterNdUpdate", indices, updates, name)

    def scatter_nd_add(self, indices, updates, name=None):
        """Add ``updates`` at ``indices`` (``[..., k]`` index tuples; repeats add up)."""
        return self._scatter("ScatterNdAdd", indices, updates, name)

    def scatter_nd_sub(self, indices, updates, name=None):
        """Subtract ``updates`` at ``indices`` (``[..., k]`` index tuples)."""
        return self._scatter("ScatterNdSub", indices, updates, name)

    def is_initialized(self):
        """A boolean tensor: whether the variable holds a value on its device."""
        with self.graph.as_default():
            return apply_op("IsVariableInitialized", [], dict(self._attrs),
                            colocation=self._op.colocation).outputs[0]


def _root_graph(g):
    """The outermost graph of a while_loop body's graph (a graph itself otherwise)."""
    while getattr(g, "outer", None) is not None:
        g = g.outer
    return g


def _tensor_operators():
    from ...framework.graph import Tensor as _T
    for name in ("__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__",
                 "__truediv__", "__rtruediv__", "__floordiv__", "__rfloordiv__", "__mod__",
                 "__rmod__", "__pow__", "__rpow__", "__matmul__", "__rmatmul__", "__neg__",
                 "__abs__", "__lt__", "__le__", "__gt__", "__ge__", "__getitem__",
                 "__and__", "__or__", "__xor__", "__invert__"):
        if hasattr(_T, name):
            def make(n):
                return lambda self, *a: getattr(self._value, n)(*a)
            setattr(Variable, name, make(name))


_tensor_operators()


def _var_of(ref) -> Variable:
    if not isinstance(ref, Variable):
        raise InvalidArgumentError(f"expected a tv.Variable, got {ref!r}")
    return ref


def assign(ref, value, validate_shape=True, use_locking=None, name=None):
    """An op that sets variable ``ref`` to ``value``; its output is the new value
    (``validate_shape=False`` lets the shape change)."""
    return _var_of(ref)._update("Assign", value, name or "Assign", validate_shape)


def assign_add(ref, value, use_locking=None, name=None):
    """An op that adds ``value`` to variable ``ref``; its output is the new value."""
    return _var_of(ref).assign_add(value, name=name)


def assign_sub(ref, value, use_locking=None, name=None):
    """An op that subtracts ``value`` from variable ``ref``; its output is the new value."""
    return _var_of(ref).assign_sub(value, name=name)


def scatter_add(ref, indices, updates, use_locking=False, name=None):
    """Add ``updates`` to rows ``indices`` of variable ``ref`` (repeated indices add up).

    >>> import tensorvm as tv
    >>> with tv.Graph().as_default(), tv.Session() as s:
    ...     v = tv.Variable([0.0, 0.0, 0.0])
    ...     _ = s.run(v.initializer)
    ...     s.run(tv.scatter_add(v, [0, 2, 0], [1.0, 2.0, 3.0])).tolist()
    [4.0, 0.0, 2.0]
    """
    return _var_of(ref)._scatter("ScatterAdd", indices, updates, name)


def scatter_sub(ref, indices, updates, use_locking=False, name=None):
    """Subtract ``updates`` from rows ``indices`` of variable ``ref``."""
    return _var_of(ref)._scatter("ScatterSub", indices, updates, name)


def scatter_update(ref, indices, updates, use_locking=False, name=None):
    """Set rows ``indices`` of variable ``ref`` to ``updates``."""
    return _var_of(ref)._scatter("ScatterUpdate", indices, updates, name)


def _collection(key, graph, scope) -> list:
    if isinstance(graph, str):  # TF 1.x's signature: global_variables(scope=None)
        graph, scope = None, graph
    items = (graph or get_default_graph()).get_collection(key)
    if scope is None:
        return items
    import re
    return [v for v in items if re.match(scope, v.name)]


def global_variables(graph=None, scope: str | None = None) -> list[Variable]:
    """The graph's GLOBAL_VARIABLES (those whose name matches ``scope`` at the start)."""
    return _collection(GLOBAL_VARIABLES, graph, scope)


def trainable_variables(graph=None, scope: str | None = None) -> list[Variable]:
    """The graph's TRAINABLE_VARIABLES (those whose name matches ``scope`` at the start)."""
    return _collection(TRAINABLE_VARIABLES, graph, scope)


def variables_initializer(var_list, name="init"):
    """One op that runs the initializers of ``var_list`` (a ``no_op`` if it is empty);
    ``initialize_variables`` is its deprecated name."""
    from ..array.array_ops import group, no_op
    if not var_list:
        return no_op(name=name)
    return group(*[v.initializer for v in var_list], name=name)


def global_variables_initializer():
    """One op that runs every variable's initializer in the default graph."""
    return variables_initializer(global_variables(), name="init")


initialize_variables = variables_initializer


def local_variables_initializer():
    """One op that runs the initializer of every local variable
    (``GraphKeys.LOCAL_VARIABLES``); ``initialize_local_variables`` is its deprecated name."""
    from ...framework.graph_keys import local_variables
    return variables_initializer(local_variables(), name="init_1")


initialize_local_variables = local_variables_initializer


def initialize_all_variables():
    """Deprecated name of ``global_variables_initializer``."""
    return global_variables_initializer()


def all_variables():
    """Deprecated name of ``global_variables``."""
    return global_variables()


def count_up_to(ref, limit, name=None):
    """``ref.count_up_to(limit)`` (TF 1.x's ``tf.count_up_to``)."""
    return ref.count_up_to(limit)


def report_uninitialized_variables(var_list=None, name="report_uninitialized_variables"):
    """A 1-D string tensor of the names of the variables in ``var_list`` (default: global and
    local) that hold no value yet."""
    from .. import boolean_mask, constant, logical_not, stack
    if var_list is None:  # global and local ("local_variables", TF's GraphKeys.LOCAL_VARIABLES)
        var_list = global_variables() + _collection("local_variables", None, None)
    var_list = list(var_list)
    if not var_list:
        return constant([], dtype=_dt.string, name=name)
    inited = stack([v.is_initialized() for v in var_list])
    names = constant([v.op.name for v in var_list], dtype=_dt.string)
    return boolean_mask(names, logical_not(inited), name=name)


def assert_variables_initialized(var_list=None):
    """An op that fails (``FailedPreconditionError``-like assertion) unless every variable of
    ``var_list`` (default: global) is initialised."""
    from .. import Assert, reduce_all, stack
    from ..array.array_ops import no_op
    var_list = list(global_variables() if var_list is None else var_list)
    if not var_list:
        return no_op()
    return Assert(reduce_all(stack([v.is_initialized() for v in var_list])),
                  [report_uninitialized_variables(var_list)], name="assert_variables_initialized")


def _scatter_fn(op_type, doc):
    def fn(ref, indices, updates, use_locking=False, name=None):
        return _var_of(ref)._scatter(op_type, indices, updates, name)
    fn.__name__ = op_type
    fn.__doc__ = doc
    return fn


scatter_mul = _scatter_fn("ScatterMul", "Multiply rows ``indices`` of ``ref`` by ``updates``.")
scatter_div = _scatter_fn("ScatterDiv", "Divide rows ``indices`` of ``ref`` by ``updates``.")
scatter_min = _scatter_fn("ScatterMin", "Rows ``indices`` of ``ref``: the minimum with "
                                        "``updates``.")
scatter_max = _scatter_fn("ScatterMax", "Rows ``indices`` of ``ref``: the maximum with "
                                        "``updates``.")
scatter_nd_update = _scatter_fn("ScatterNdUpdate", "Set the slices of ``ref`` at ``indices`` "
                                                   "(``[..., k]``) to ``updates``.")
scatter_nd_add = _scatter_fn("ScatterNdAdd", "Add ``updates`` to ``ref`` at ``indices`` "
                                             "(``[..., k]``).")
scatter_nd_sub = _scatter_fn("ScatterNdSub", "Subtract ``updates`` from ``ref`` at "
                                             "``indices`` (``[..., k]``).")
