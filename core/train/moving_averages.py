"""``tv.train.ExponentialMovingAverage``: shadow variables that follow the model's variables
with exponential decay (TF 1.x's ``tf.train.ExponentialMovingAverage``).

``apply(var_list)`` makes, once per variable, a non-trainable shadow variable named
``<var>/<name>`` (``w/ExponentialMovingAverage``; ``_1`` … when taken), colocated with its
variable and initialised to the variable's value (its initial value while it is still
uninitialised), adds the variable to ``GraphKeys.MOVING_AVERAGE_VARIABLES`` and returns an op
that moves every shadow: ``shadow -= (1 - decay) * (shadow - var)``. With ``num_updates`` the
decay is ``min(decay, (1 + num_updates) / (10 + num_updates))``. A plain tensor (not a
variable) gets a shadow that starts at zero; with ``zero_debias=True`` that shadow is
debiased as Adam's moments are (two more variables ``<shadow>/biased`` and
``<shadow>/local_step``). ``variables_to_restore()`` maps each shadow's name to its model
variable, so ``tv.train.Saver(ema.variables_to_restore())`` loads the averages into the
model (the CIFAR-10 tutorial's evaluation).

>>> import tensorvm as tv
>>> with tv.Graph().as_default():
...     w = tv.Variable(0.0, name="w")
...     ema = tv.train.ExponentialMovingAverage(decay=0.5)
...     update = ema.apply([w])
...     with tv.Session() as s:
...         _ = s.run(tv.global_variables_initializer())
...         _ = s.run(w.assign(4.0)); _ = s.run(update)
...         float(s.run(ema.average(w)))
...     ema.average_name(w), sorted(ema.variables_to_restore())
2.0
('w/ExponentialMovingAverage', ['w/ExponentialMovingAverage'])
"""
from __future__ import annotations

import contextlib

from ..framework import dtypes as _dt
from ..framework.graph import Tensor, get_default_graph
from ..framework.graph_keys import GraphKeys
from ..framework.tensor_conversion import convert_to_tensor
from ..ops.state.variables import Variable, global_variables, trainable_variables

__all__ = ["ExponentialMovingAverage", "assign_moving_average"]

_FLOATS = (_dt.float16, _dt.float32, _dt.float64) + \
    ((_dt.bfloat16,) if hasattr(_dt, "bfloat16") else ())


def _op_name(v) -> str:
    return v.op.name


def _shadow_scope_name(g, base: str) -> str:
    """TF's ``variable_scope(None, default_name=base)`` inside the current variable scope:
    ``base``, else ``base_1``, ``base_2`` … (the first not taken by a scope or an op)."""
    from ..ops.state.variable_scope import _join, _store, get_variable_scope
    store = _store(g)
    parent = get_variable_scope(g).name
    rel, i = base, 0
    with g.name_scope(None):
        while _join(parent, rel) in store.scopes or \
                g.unique_name(_join(parent, rel), mark_as_used=False) != _join(parent, rel):
            i += 1
            rel = f"{base}_{i}"
    full = _join(parent, rel)
    store.scopes.add(full)
    return full


def _make_shadow(g, primary, initial_value, name: str, trainable=False) -> Variable:
    """A non-trainable global variable named ``name`` exactly, colocated with ``primary``."""
    device = primary.op.device
    with g.name_scope(None), g.control_dependencies(None), g.colocate_with(primary.op), \
            g.device(device) if device else contextlib.nullcontext():  # TF: var.device too
        return Variable(initial_value, trainable=trainable, name=name)


def _initial_value_of(var: Variable):
    """TF's rule: the variable's value once initialised, else its initial value."""
    from ..framework.op_def_library import apply_op
    from ..ops.array.array_ops import identity
    from ..ops.control.control_flow_ops import cond
    g = var.graph

    def read():  # a read of the variable inside the branch: it runs only when taken
        with g.colocate_with(var.op):
            return apply_op("VariableV2", [], dict(var._attrs), name="read",
                            colocation=var.op.colocation).outputs[0]

    with g.name_scope(None), g.control_dependencies(None), \
            g.name_scope(f"{var.op.name}/EMAInit"):
        return cond(var.is_initialized(), read, lambda: identity(var.initial_value))


def assign_moving_average(variable, value, decay, zero_debias=True, name=None):
    """``variable -= (1 - decay) * (variable - value)``; with ``zero_debias``, ``variable``
    is set to the debiased average of a zero-started biased one (two variables
    ``<variable>/biased`` and ``<variable>/local_step`` made here). Returns the new value."""
    from ..ops.math.math_ops import cast
    from ..ops.math.math_ops import pow as pow_
    g = variable.graph
    with g.as_default(), g.name_scope(name or "AssignMovingAvg") as scope:
        one_minus = convert_to_tensor(1.0, dtype=_dt.float32) - _as_decay(decay)
        if one_minus.dtype != variable.dtype:
            one_minus = cast(one_minus, variable.dtype)
        value = convert_to_tensor(value, dtype=variable.dtype) if not isinstance(
            value, (Tensor, Variable)) else value
        if not zero_debias:
            return variable.assign_sub((variable.value() - value) * one_minus,
                                       name=scope.rstrip("/").rsplit("/", 1)[-1])
        from ..ops.array.fill_ops import zeros
        base = variable.op.name
        biased = _make_shadow(g, variable, zeros(variable.shape.dims, variable.dtype),
                              _unique_var_name(g, f"{base}/biased"))
        local_step = _make_shadow(g, variable, zeros([], variable.dtype),
                                  _unique_var_name(g, f"{base}/local_step"))
        update_biased = biased.assign_sub((biased.value() - value) * one_minus)
        update_step = local_step.assign_add(convert_to_tensor(1.0, dtype=variable.dtype))
        bias_factor = 1.0 - pow_(1.0 - one_minus, update_step)
        return variable.assign(update_biased / bias_factor)


def _unique_var_name(g, full: str) -> str:
    """``full``, else ``full_1`` … (TF's ``_maybe_get_unique`` for the debias variables)."""
    names = {v.op.name for v in global_variables(g)}
    if full not in names:
        return full
    i = 1
    while f"{full}_{i}" in names:
        i += 1
    return f"{full}_{i}"


def _as_decay(decay):
    from ..ops.math.math_ops import cast
    if isinstance(decay, Variable):
        decay = decay.value()
    t = convert_to_tensor(decay) if isinstance(decay, Tensor) else \
        convert_to_tensor(float(decay), dtype=_dt.float32)
    return t if t.dtype == _dt.float32 else cast(t, _dt.float32)


class ExponentialMovingAverage:
    """Maintains exponential moving averages of variables (and tensors).

    ``decay``: a float, tensor or variable; ``num_updates``: an optional step count (a
    tensor or variable) that lowers the decay early on to
    ``min(decay, (1 + num_updates) / (10 + num_updates))``; ``zero_debias``: debias the
    zero-started averages of *tensors* (variables' averages start at their values); ``name``:
    the shadow variables' suffix and the update op's name scope.
    """

    def __init__(self, decay, num_updates=None, zero_debias=False,
                 name="ExponentialMovingAverage"):
        self._decay = decay
        self._num_updates = num_updates
        self._zero_debias = zero_debias
        self._name = name
        self._averages: dict = {}  # id(var or tensor) -> (var or tensor, shadow Variable)

    @property
    def name(self) -> str:
        """The name of this object: the shadow variables' suffix."""
        return self._name

    def apply(self, var_list=None):
        """Create the shadow variables of ``var_list`` (default: the trainable variables) that
        have none yet, and return an op that updates every shadow of ``var_list`` once.

        Raises ``TypeError`` (TF's message) for a variable or tensor that is not of a
        floating-point dtype."""
        from ..ops.array.array_ops import group
        from ..ops.array.fill_ops import zeros
        from ..ops.math.math_ext import minimum
        from ..ops.math.math_ops import cast
        if var_list is None:
            var_list = trainable_variables()
        var_list = list(var_list)
        for var in var_list:
            if var.dtype not in _FLOATS:
                raise TypeError(f"The variables must be half, float, or double: {var.name}")
        g = var_list[0].graph if var_list else get_default_graph()
        debiased = set()
        with g.as_default():
            for var in var_list:
                if id(var) in self._averages:
                    continue
                name = _shadow_scope_name(g, f"{_op_name(var)}/{self._name}")
                if isinstance(var, Variable):
                    with g.device(var.device) if var.device else contextlib.nullcontext():
                        init = _initial_value_of(var)
                    avg = _make_shadow(g, var, init, name)
                    if var not in g.get_collection(GraphKeys.MOVING_AVERAGE_VARIABLES):
                        g.add_to_collection(GraphKeys.MOVING_AVERAGE_VARIABLES, var)
                else:
                    shape = var.shape.dims
                    if shape is None or None in shape:
                        raise ValueError(f"Shape of a new variable ({name}) must be fully "
                                         f"defined, but instead was {shape}.")
                    with g.name_scope(None), g.control_dependencies(None):
                        avg = Variable(zeros(list(shape), var.dtype), trainable=False,
                                       name=name)
                    if self._zero_debias:
                        debiased.add(id(avg))
                self._averages[id(var)] = (var, avg)
            # TF's op names: the update op is named as its scope ("ExponentialMovingAverage")
            scope = g.unique_name(self._name, mark_as_used=False)
            with g.name_scope(scope + "/"):
                decay = _as_decay(self._decay)
                if self._num_updates is not None:
                    n = cast(convert_to_tensor(self._num_updates), _dt.float32,
                             name="num_updates")
                    decay = minimum(decay, (1.0 + n) / (10.0 + n))
                updates = []
                for var in var_list:
                    avg = self._averages[id(var)][1]
                    value = var.value() if isinstance(var, Variable) else var
                    updates.append(assign_moving_average(avg, value, decay,
                                                         zero_debias=id(avg) in debiased))
            with g.name_scope(None):
                return group(*updates, name=scope)

    def average(self, var):
        """The shadow ``Variable`` of ``var``, or ``None`` when it has none."""
        entry = self._averages.get(id(var))
        return entry[1] if entry is not None and entry[0] is var else None

    def average_name(self, var) -> str:
        """The name of ``var``'s shadow variable (what a Saver saves it as), whether or not
        ``apply`` has made it yet."""
        avg = self.average(var)
        if avg is not None:
            return avg.op.name
        g = getattr(var, "graph", None) or get_default_graph()
        return g.unique_name(f"{_op_name(var)}/{self._name}", mark_as_used=False)

    def variables_to_restore(self, moving_avg_variables=None) -> dict:
        """``{name in the checkpoint: variable}``: each of ``moving_avg_variables`` (default:
        the trainable variables and ``GraphKeys.MOVING_AVERAGE_VARIABLES``) under its
        shadow's name, every other global variable under its own name. Pass it to
        ``tv.train.Saver`` to restore the averages into the model."""
        if moving_avg_variables is None:
            moving_avg_variables = trainable_variables() + list(
                get_default_graph().get_collection(GraphKeys.MOVING_AVERAGE_VARIABLES))
        unique, seen = [], set()
        for v in moving_avg_variables:
            if id(v) not in seen:
                seen.add(id(v))
                unique.append(v)
        name_map = {self.average_name(v): v for v in unique}
        names = {v.name for v in unique}
        for v in global_variables():
            if v.name not in names and v.op.name not in name_map:
                name_map[v.op.name] = v
        return name_map

    def __repr__(self):
        return f"<tv.train.ExponentialMovingAverage {self._name!r} ({len(self._averages)} " \
               "shadows)>"
