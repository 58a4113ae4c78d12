"""Optimizers: ``minimize`` = ``compute_gradients`` + ``apply_gradients``.

Update ops are colocated with their variable, so on a cluster they run on the parameter-server
device that holds it (only the gradient travels there). Sparse gradients (IndexedSlices, from
``gather``/embedding lookups) are applied with ``scatter_sub`` after summing duplicate indices
(SGD, Adagrad); Momentum and Adam decay every row each step, so they densify first, as TF's
non-lazy versions do. RMSProp, Adadelta, FTRL and the proximal optimizers live in
:mod:`tensorvm.train.optimizers_ext`; the learning-rate schedules in
:mod:`tensorvm.train.learning_rate`. A learning rate may be a number, a tensor or a callable.

>>> import tensorvm as tv
>>> w = tv.Variable(4.0); loss = w * w
>>> step = tv.train.GradientDescentOptimizer(0.25).minimize(loss)
>>> with tv.Session() as s:
...     _ = s.run(tv.global_variables_initializer()); _ = s.run(step); float(s.run(w))
2.0
"""
from __future__ import annotations

from ..framework import dtypes as _dt
from ..framework.errors import InvalidArgumentError
from ..ops.gradients import gradients
from ..framework.graph import get_default_graph
from ..framework.indexed_slices import IndexedSlices
from ..ops.state import training_ops as _training_ops  # the fused updates, registered at import
from ..ops.array.index_ops import densify
from ..framework.tensor_conversion import convert_to_tensor
from ..ops.state.variables import Variable, trainable_variables

GLOBAL_STEP = "global_step"


def get_global_step(graph=None):
    """The graph's global step variable (``GraphKeys.GLOBAL_STEP``), or ``None``."""
    coll = (graph or get_default_graph()).get_collection(GLOBAL_STEP)
    return coll[0] if coll else None


def create_global_step(graph=None):
    """Create the graph's int64 ``global_step`` variable (0, not trainable); ``ValueError`` if
    it exists. ``minimize(loss, global_step=...)`` increments it once per step."""
    g = graph or get_default_graph()
    if get_global_step(g) is not None:
        raise ValueError("global_step already exists")
    with g.as_default(), g.name_scope(None), g.control_dependencies(None):
        import numpy as np
        v = Variable(np.int64(0), trainable=False, name="global_step")
    g.add_to_collection(GLOBAL_STEP, v)
    return v


def get_or_create_global_step(graph=None):
    """The graph's global step, created if it has none.

    >>> import tensorvm as tv
    >>> with tv.Graph().as_default():
    ...     step = tv.train.get_or_create_global_step()
    ...     step is tv.train.get_or_create_global_step(), step.dtype.name
    (True, 'int64')
    """
    return get_global_step(graph) or create_global_step(graph)


class Optimizer:
    """Base class: subclasses define ``_apply_dense(grad, var)`` (and optionally
    ``_apply_sparse(grad, var)``), creating slots with ``_slot``."""

    def __init__(self, learning_rate, use_locking: bool = False, name: str = "Optimizer"):
        self._lr = learning_rate
        self._name = name
        self._slots: dict[tuple[str, str], Variable] = {}

    # ---- gradients -------------------------------------------------------------------------
    def compute_gradients(self, loss, var_list=None, stop_gradients=None, **_):
        """Add gradient ops for ``loss`` and return ``[(gradient, variable), ...]``.

        ``var_list`` defaults to the graph's trainable variables (a PartitionedVariable
        counts as its parts). A variable ``loss`` does not depend on gets ``None``. The
        gradient of a ``gather``/``embedding_lookup`` stays sparse: an
        :class:`~tensorvm.IndexedSlices` of the rows touched, never a dense tensor of the
        whole table. Gradient ops are colocated with their forward ops, so on a cluster they
        run on the worker that ran the forward pass.

        >>> import tensorvm as tv
        >>> w = tv.Variable(3.0)
        >>> (g, v), = tv.train.GradientDescentOptimizer(0.1).compute_gradients(w * w, [w])
        >>> with tv.Session() as s:
        ...     _ = s.run(w.initializer); float(s.run(g))
        6.0
        """
        loss = convert_to_tensor(loss)
        if not loss.dtype.is_differentiable:
            raise InvalidArgumentError(f"loss {loss.name!r} must be floating point, got "
                                       f"{loss.dtype.name}")
        var_list = list(var_list) if var_list is not None else trainable_variables(loss.graph)
        var_list = [p for v in var_list for p in (v if _is_partitioned(v) else [v])]
        if not var_list:
            raise InvalidArgumentError("No variables to optimize.")
        grads = gradients(loss, var_list, stop_gradients=stop_gradients)
        return list(zip(grads, var_list))

    def minimize(self, loss, global_step=None, var_list=None, name=None, **kw):
        """``compute_gradients`` then ``apply_gradients``: return one op that updates every
        variable of ``var_list`` (default: the trainable ones) and, if ``global_step`` is
        given, increments it after the updates. Raises InvalidArgumentError when ``loss``
        depends on none of the variables.

        >>> import tensorvm as tv
        >>> w = tv.Variable(3.0)
        >>> gs = tv.train.get_or_create_global_step()
        >>> train = tv.train.GradientDescentOptimizer(0.25).minimize(w * w, global_step=gs)
        >>> with tv.Session() as s:
        ...     _ = s.run(tv.global_variables_initializer()); _ = s.run(train)
        ...     float(s.run(w)), int(s.run(gs))
        (1.5, 1)
        """
        gv = self.compute_gradients(loss, var_list=var_list)
        if all(g is None for g, _ in gv):
            raise InvalidArgumentError(
                f"No gradients provided for any variable: {[v.name for _, v in gv]}")
        return self.apply_gradients(gv, global_step=global_step, name=name)

    # ---- updates ---------------------------------------------------------------------------
    def _lr_tensor(self, var):
        return self._hyper(self._lr, var)

    @staticmethod
    def _hyper(value, var):
        """A hyperparameter (a Python number or a tensor such as a decayed learning rate) in
        the variable's dtype."""
        if callable(value) and not hasattr(value, "op"):
            value = value()
        if hasattr(value, "_as_graph_element"):
            value = value._as_graph_element()
        if not hasattr(value, "op"):
            return convert_to_tensor(value, dtype=var.dtype)
        if value.dtype != var.dtype:
            from ..ops.math.math_ops import cast
            value = cast(value, var.dtype)
        return value

    def _slot(self, var: Variable, name: str, init=0.0) -> Variable:
        key = (var.op.name, name)
        if key not in self._slots:
            import numpy as np
            g = var.graph
            # control_dependencies(None): a slot made inside the caller's
            # control_dependencies block (TF's UPDATE_OPS idiom) must initialise on its own.
            with g.as_default(), g.device(None), g.device(var.device), \
                    g.control_dependencies(None), \
                    g.name_scope(None), g.name_scope(f"{var.op.name}/"):
                # TF's slot_creator names a slot <var>/<optimizer name>, made unique
                # (Variable/Adam, Variable/Adam_1), which TF-written checkpoints hold.
                self._slots[key] = Variable(
                    np.full(var.shape.dims, init, dtype=var.dtype.np_dtype), trainable=False,
                    name=self._name)
        return self._slots[key]

    def get_slot(self, var, name):
        """The slot variable ``name`` (``"Momentum"``, ``"Adam"``, ...) made for ``var``, or
        ``None``."""
        return self._slots.get((var.op.name, name))

    def get_slot_names(self):
        """The names of the slots this optimizer has made, sorted."""
        return sorted({n for _, n in self._slots})

    def variables(self):
        """The slot variables this optimizer has made."""
        return list(self._slots.values())

    def _prepare(self, var_list):
        """Create non-slot state (Adam's beta powers) before the updates."""

    def _finish(self, update_ops, global_step):
        return update_ops

    def apply_gradients(self, grads_and_vars, global_step=None, name=None):
        """Return one op applying ``grads_and_vars`` (pairs from ``compute_gradients``, maybe
        transformed, e.g. clipped); pairs whose gradient is None are skipped.

        Each update is colocated with its variable, so on a cluster it runs on the
        parameter server holding it and only the gradient travels there. A dense gradient
        updates the whole variable; an :class:`~tensorvm.IndexedSlices` gradient updates only
        its rows with a scatter op (optimizers whose rule touches every row, such as Momentum
        and Adam, densify it first, as TF's non-lazy versions do). With ``global_step`` the
        returned op increments it after every update has run.

        >>> import tensorvm as tv
        >>> w = tv.Variable([1.0, 2.0])
        >>> step = tv.train.GradientDescentOptimizer(0.5).apply_gradients(
        ...     [(tv.constant([2.0, 2.0]), w)])
        >>> with tv.Session() as s:
        ...     _ = s.run(w.initializer); _ = s.run(step); s.run(w).tolist()
        [0.0, 1.0]
        """
        gv = [(g, v) for g, v in grads_and_vars if g is not None]
        if not gv:
            raise InvalidArgumentError("apply_gradients: no gradients to apply")
        graph = gv[0][1].graph
        with graph.as_default(), graph.name_scope(name or self._name):
            self._prepare([v for _, v in gv])
            updates = []
            for grad, var in gv:
                with graph.colocate_with(var.op):
                    if isinstance(grad, IndexedSlices):
                        updates.append(self._apply_sparse(grad, var))
                    else:
                        updates.append(self._apply_dense(convert_to_tensor(grad), var))
            updates = self._finish(updates, global_step)
            from ..ops.array.array_ops import group
            if global_step is not None:
                # the increment and its constant on the global step's device: a constant
                # placed on the worker would add two cross-device hops to every step
                with graph.control_dependencies(updates), graph.colocate_with(global_step.op):
                    inc = global_step.assign_add(
                        convert_to_tensor(1, dtype=global_step.dtype)).op
                from .exactly_once import is_open
                if is_open(graph):
                    # A twin's increment is dropped (never runs): return an op that runs
                    # either way, so ops made later that wait on it still run.
                    with graph.colocate_with(global_step.op):
                        return group(inc)
                return inc
            return group(*updates)

    def _apply_sparse(self, grad: IndexedSlices, var):
        return self._apply_dense(densify(grad, var.value()), var)


def _is_partitioned(v) -> bool:
    from ..ops.state.partitioners import PartitionedVariable
    return isinstance(v, PartitionedVariable)


def _dedupe(grad: IndexedSlices):
    """Sum values of repeated indices: (unique indices, summed values)."""
    from ..ops.array.fill_ops import size as _size
    from ..ops.array.index_ops import unsorted_segment_sum
    from ..ops.array.sort_ops import unique
    uniq, idx = unique(grad.indices)[:2]
    summed = unsorted_segment_sum(grad.values, idx, _size(uniq))
    return uniq, summed


def _dedupe_where_computed(grad: IndexedSlices):
    """:func:`_dedupe` beside the op that computed the gradient's values (on a cluster, the
    worker): each touched row then crosses to the parameter server once, whatever the batch
    repeats, so the bytes sent scale with the rows touched."""
    with grad.values.graph.colocate_with(grad.values.op):
        return _dedupe(grad)


class GradientDescentOptimizer(Optimizer):
    """``var -= learning_rate * grad`` (sparse gradients update only their rows).

    >>> import tensorvm as tv
    >>> with tv.Graph().as_default(), tv.Session() as s:
    ...     w = tv.Variable(1.0)
    ...     train = tv.train.GradientDescentOptimizer(0.25).minimize(w * w)
    ...     _ = s.run(w.initializer); _ = s.run(train); float(s.run(w))
    0.5
    """

    def __init__(self, learning_rate, use_locking=False, name="GradientDescent"):
        super().__init__(learning_rate, use_locking, name)

    def _apply_dense(self, grad, var):
        # one fused op (TF's ApplyGradientDescent): the same lr * grad and var - that,
        # one allocation instead of two
        return _training_ops.apply_gradient_descent(var, self._lr_tensor(var), grad).op

    def _apply_sparse(self, grad, var):
        from ..ops.state.variables import scatter_sub
        idx, vals = _dedupe_where_computed(grad)
        return scatter_sub(var, idx, vals * self._lr_tensor(var)).op


class MomentumOptimizer(Optimizer):
    """TF's momentum: ``accum = momentum * accum + grad; var -= learning_rate * accum``
    (``use_nesterov=True``: Nesterov's variant), one ``accum`` slot per variable."""

    def __init__(self, learning_rate, momentum, use_locking=False, name="Momentum",
                 use_nesterov=False):
        super().__init__(learning_rate, use_locking, name)
        self._momentum = momentum
        self._nesterov = use_nesterov

    def _apply_dense(self, grad, var):
        # one fused op (TF's ApplyMomentum) for the accumulator and the variable
        acc = self._slot(var, "Momentum")
        return _training_ops.apply_momentum(var, acc, self._lr_tensor(var), grad, self._momentum,
                              use_nesterov=self._nesterov).op


class AdagradOptimizer(Optimizer):
    """Adagrad: ``accum += grad**2; var -= learning_rate * grad / sqrt(accum)``, the slot
    starting at ``initial_accumulator_value``; sparse gradients update only their rows."""

    def __init__(self, learning_rate, initial_accumulator_value=0.1, use_locking=False,
                 name="Adagrad"):
        super().__init__(learning_rate, use_locking, name)
        self._init_acc = initial_accumulator_value

    def _apply_dense(self, grad, var):
        # one fused op (TF's ApplyAdagrad): the unfused graph's arithmetic, in its order
        acc = self._slot(var, "Adagrad", self._init_acc)
        return _training_ops.apply_adagrad(var, acc, self._lr_tensor(var), grad).op

    def _apply_sparse(self, grad, var):
        from ..ops.array.index_ops import gather
        from ..ops.math.math_ops import sqrt
        from ..ops.state.variables import scatter_add, scatter_sub
        acc = self._slot(var, "Adagrad", self._init_acc)
        idx, vals = _dedupe_where_computed(grad)
        new_acc = scatter_add(acc, idx, vals * vals)
        return scatter_sub(var, idx, self._lr_tensor(var) * vals /
                           sqrt(gather(new_acc, idx))).op


class AdamOptimizer(Optimizer):
    """Adam (Kingma and Ba) with TF 1.x's update and defaults: ``m`` and ``v`` slots per
    variable, the bias correction folded into the step size as TF does."""

    def __init__(self, learning_rate=0.001, beta1=0.9, beta2=0.999, epsilon=1e-8,
                 use_locking=False, name="Adam"):
        super().__init__(learning_rate, use_locking, name)
        self._b1, self._b2, self._eps = beta1, beta2, epsilon
        self._powers: dict = {}

    def _prepare(self, var_list):
        first = min(var_list, key=lambda v: v.op.name)
        key = first.op.name
        if key not in self._powers:
            g = first.graph
            with g.device(None), g.device(first.device), g.name_scope(None), \
                    g.control_dependencies(None):
                self._powers[key] = (
                    Variable(_dt.to_numpy(self._b1, first.dtype), trainable=False,
                             name="beta1_power"),
                    Variable(_dt.to_numpy(self._b2, first.dtype), trainable=False,
                             name="beta2_power"))
        self._current = self._powers[key]

    def _apply_dense(self, grad, var):
        from ..ops.math.math_ops import cast, sqrt
        b1p, b2p = self._current
        dt = var.dtype
        b1 = convert_to_tensor(self._b1, dtype=dt)
        b2 = convert_to_tensor(self._b2, dtype=dt)
        eps = convert_to_tensor(self._eps, dtype=dt)
        one = convert_to_tensor(1.0, dtype=dt)
        p1, p2 = cast(b1p.value(), dt), cast(b2p.value(), dt)
        lr_t = self._lr_tensor(var) * sqrt(one - p2) / (one - p1)
        m = self._slot(var, "Adam")
        v = self._slot(var, "Adam_1")
        # one fused op (TF's ApplyAdam) for m, v and the variable: the unfused graph's
        # arithmetic, in its order
        return _training_ops.apply_adam(var, m, v, lr_t, b1, b2, eps, grad).op

    def _finish(self, update_ops, global_step):
        b1p, b2p = self._current
        g = b1p.graph
        with g.control_dependencies(update_ops), g.colocate_with(b1p.op):
            u1 = b1p.assign(b1p.value() * convert_to_tensor(self._b1, dtype=b1p.dtype)).op
            u2 = b2p.assign(b2p.value() * convert_to_tensor(self._b2, dtype=b2p.dtype)).op
        return list(update_ops) + [u1, u2]
