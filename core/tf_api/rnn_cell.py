"""``tv.nn.rnn_cell`` (also ``tv.contrib.rnn``): TF 1.x's recurrent cells.

A cell maps ``(inputs, state)`` to ``(output, new_state)`` for one time step. Its variables are
made by ``get_variable`` on its first call, under the enclosing variable scope and a scope of
its own named as TF names it (``rnn/basic_lstm_cell/kernel``, ``.../bias``), so checkpoints
and ``tv.trainable_variables()`` read as in TF; later calls reuse them. The math and the
default initializers are TF's (Glorot-uniform kernels, zero biases; ``GRUCell``'s gate bias
is 1.0). Cells are built from existing differentiable ops, so their gradients are those ops'
gradients and they run on any device those ops run on.

>>> import tensorvm as tv
>>> cell = tv.nn.rnn_cell.BasicLSTMCell(3)
>>> cell.state_size, cell.output_size
(LSTMStateTuple(c=3, h=3), 3)
"""
from __future__ import annotations

import collections

from ..framework import dtypes as _dt
from ..framework.errors import InvalidArgumentError
from ..framework.graph import Tensor, get_default_graph
from ..ops.state.init_ops import Constant, Zeros
from ..ops import clip_by_value, concat, matmul, sigmoid, split, stack, tanh, zeros
from ..ops import shape as _shape
from ..ops.nn.nn_ops import bias_add, dropout
from ..framework.tensor_conversion import convert_to_tensor
from ..ops.state.variable_scope import get_variable, variable_scope

__all__ = [
    "BasicLSTMCell",
    "BasicRNNCell",
    "DropoutWrapper",
    "GRUCell",
    "LSTMCell",
    "LSTMStateTuple",
    "MultiRNNCell",
    "RNNCell",
    "ResidualWrapper",
]


class LSTMStateTuple(collections.namedtuple("LSTMStateTuple", ("c", "h"))):
    """An LSTM's state: the cell state ``c`` and the output ``h``."""

    __slots__ = ()

    @property
    def dtype(self):
        c, h = self
        if c.dtype != h.dtype:
            raise TypeError(f"Inconsistent internal state: {c.dtype} vs {h.dtype}")
        return c.dtype


def _flat(s) -> list:
    return [x for v in s for x in _flat(v)] if isinstance(s, (list, tuple)) else [s]


def _pack(structure, flat):
    it = iter(flat)

    def build(x):
        if isinstance(x, (list, tuple)):
            vals = [build(v) for v in x]
            return type(x)(*vals) if hasattr(x, "_fields") else type(x)(vals)
        return next(it)
    return build(structure)


def _last_dim(x: Tensor, cell) -> int:
    shape = x._shape
    if shape is None or len(shape) != 2 or shape[1] is None:
        raise InvalidArgumentError(
            f"{type(cell).__name__}: inputs must be a matrix [batch, depth] with a known depth, "
            f"got shape {None if shape is None else list(shape)}")
    return int(shape[1])


class RNNCell:
    """Base class: subclasses give ``state_size``, ``output_size``, ``_build(depth, dtype)``
    (make the variables) and ``call(inputs, state)``."""

    _base_name = "rnn_cell"

    def __init__(self, name=None, reuse=None, dtype=None):
        self._name, self._reuse = name, reuse
        self._dtype = None if dtype is None else _dt.as_dtype(dtype)
        self._built = False
        self._scope = None
        self._variables: list = []

    @property
    def state_size(self):
        """An int, or a nested tuple of ints: the state's depth(s)."""
        raise TypeError(f"{type(self).__name__} must define state_size")

    @property
    def output_size(self):
        """An int: the output's depth."""
        raise TypeError(f"{type(self).__name__} must define output_size")

    # ---- variables --------------------------------------------------------------------------
    def _var(self, name, shape, dtype, initializer=None):
        v = get_variable(name, shape, dtype, initializer)
        self._variables.append(v)
        return v

    def build_for(self, input_depth: int, dtype) -> None:
        """Make the cell's variables (once) under the current variable scope, for inputs of
        ``input_depth`` features: ``dynamic_rnn`` calls it before its loop."""
        if self._built:
            return
        dtype = self._dtype or _dt.as_dtype(dtype)
        with variable_scope(self._name, default_name=self._base_name,
                            reuse=self._reuse) as scope:
            self._scope = scope
            self._build(int(input_depth), dtype)
        self._built = True

    def _build(self, input_depth: int, dtype) -> None:
        """Make the variables; cells without any keep this no-op."""

    @property
    def variables(self) -> list:
        return list(self._variables)

    weights = variables
    trainable_variables = variables
    trainable_weights = variables

    # ---- running ----------------------------------------------------------------------------
    def __call__(self, inputs, state, scope=None):
        """One step: ``(output, new_state)``; the variables are made on the first call."""
        inputs = convert_to_tensor(inputs)
        if not self._built:
            if scope is not None:
                with variable_scope(scope):
                    self.build_for(_last_dim(inputs, self), inputs.dtype)
            else:
                self.build_for(_last_dim(inputs, self), inputs.dtype)
        with get_default_graph().name_scope(self._scope.name.rsplit("/", 1)[-1]):
            return self.call(inputs, state)

    def zero_state(self, batch_size, dtype):
        """Zeros shaped like ``state_size`` for ``batch_size`` (an int or a scalar tensor)."""
        dtype = _dt.as_dtype(dtype)

        def z(n):
            if isinstance(batch_size, Tensor):
                return zeros(stack([batch_size, n]), dtype)
            return zeros([int(batch_size), n], dtype)
        return _pack(self.state_size, [z(n) for n in _flat(self.state_size)])

    def get_initial_state(self, inputs=None, batch_size=None, dtype=None):
        """``zero_state`` with the batch size and dtype taken from ``inputs`` when given."""
        if inputs is not None:
            inputs = convert_to_tensor(inputs)
            b = inputs._shape[0] if inputs._shape else None
            batch_size = b if b is not None else _shape(inputs)[0]
            dtype = dtype or inputs.dtype
        return self.zero_state(batch_size, dtype)

    def __repr__(self):
        return f"<tv.nn.rnn_cell.{type(self).__name__} output_size={self.output_size}>"


def _linear(args, kernel, bias):
    x = args[0] if len(args) == 1 else concat(args, 1)
    y = matmul(x, kernel)
    return y if bias is None else bias_add(y, bias)


def _act(activation):
    if activation is None:
        return tanh
    return activation


class BasicRNNCell(RNNCell):
    """``output = new_state = activation(W [inputs, state] + b)``."""

    _base_name = "basic_rnn_cell"

    def __init__(self, num_units, activation=None, reuse=None, name=None, dtype=None):
        super().__init__(name, reuse, dtype)
        self._num_units, self._activation = int(num_units), _act(activation)

    @property
    def state_size(self):
        return self._num_units

    @property
    def output_size(self):
        return self._num_units

    def _build(self, depth, dtype):
        n = self._num_units
        self._kernel = self._var("kernel", [depth + n, n], dtype)
        self._bias = self._var("bias", [n], dtype, Zeros())

    def call(self, inputs, state):
        out = self._activation(_linear([inputs, state], self._kernel, self._bias))
        return out, out


class GRUCell(RNNCell):
    """Gated recurrent unit (Cho et al. 2014), as TF 1.x's ``GRUCell``."""

    _base_name = "gru_cell"

    def __init__(self, num_units, activation=None, reuse=None, kernel_initializer=None,
                 bias_initializer=None, name=None, dtype=None):
        super().__init__(name, reuse, dtype)
        self._num_units, self._activation = int(num_units), _act(activation)
        self._kinit, self._binit = kernel_initializer, bias_initializer

    @property
    def state_size(self):
        return self._num_units

    @property
    def output_size(self):
        return self._num_units

    def _build(self, depth, dtype):
        n = self._num_units
        with variable_scope("gates"):
            self._gate_kernel = self._var("kernel", [depth + n, 2 * n], dtype, self._kinit)
            self._gate_bias = self._var("bias", [2 * n], dtype, self._binit or Constant(1.0))
        with variable_scope("candidate"):
            self._cand_kernel = self._var("kernel", [depth + n, n], dtype, self._kinit)
            self._cand_bias = self._var("bias", [n], dtype, self._binit or Zeros())

    def call(self, inputs, state):
        value = sigmoid(_linear([inputs, state], self._gate_kernel, self._gate_bias))
        r, u = split(value, 2, axis=1)
        c = self._activation(_linear([inputs, r * state], self._cand_kernel, self._cand_bias))
        new_h = u * state + (1 - u) * c
        return new_h, new_h


def _state_parts(state, state_is_tuple, n, what):
    if state_is_tuple:
        if not isinstance(state, (list, tuple)) or len(state) != 2:
            raise InvalidArgumentError(f"{what}: the state must be an LSTMStateTuple (c, h) "
                                       f"when state_is_tuple=True, got {state!r}")
        return state
    return split(state, [n, convert_to_tensor(state)._shape[1] - n], axis=1)


class BasicLSTMCell(RNNCell):
    """The basic LSTM (no peepholes, no projection): ``i, j, f, o`` gates from one product,
    ``c' = c * sigmoid(f + forget_bias) + sigmoid(i) * tanh(j)``,
    ``h' = tanh(c') * sigmoid(o)``."""

    _base_name = "basic_lstm_cell"

    def __init__(self, num_units, forget_bias=1.0, state_is_tuple=True, activation=None,
                 reuse=None, name=None, dtype=None):
        super().__init__(name, reuse, dtype)
        self._num_units, self._forget_bias = int(num_units), float(forget_bias)
        self._state_is_tuple, self._activation = state_is_tuple, _act(activation)

    @property
    def state_size(self):
        n = self._num_units
        return LSTMStateTuple(n, n) if self._state_is_tuple else 2 * n

    @property
    def output_size(self):
        return self._num_units

    def _build(self, depth, dtype):
        n = self._num_units
        self._kernel = self._var("kernel", [depth + n, 4 * n], dtype)
        self._bias = self._var("bias", [4 * n], dtype, Zeros())

    def call(self, inputs, state):
        c, h = _state_parts(state, self._state_is_tuple, self._num_units, "BasicLSTMCell")
        i, j, f, o = split(_linear([inputs, h], self._kernel, self._bias), 4, axis=1)
        new_c = c * sigmoid(f + self._forget_bias) + sigmoid(i) * self._activation(j)
        new_h = self._activation(new_c) * sigmoid(o)
        new_state = LSTMStateTuple(new_c, new_h) if self._state_is_tuple \
            else concat([new_c, new_h], 1)
        return new_h, new_state


class LSTMCell(RNNCell):
    """The LSTM with TF's options: ``use_peepholes`` (diagonal peephole weights
    ``w_f_diag``/``w_i_diag``/``w_o_diag``), ``cell_clip``, a projection ``num_proj`` (with
    ``proj_clip``) of the output, and ``initializer`` for the kernels."""

    _base_name = "lstm_cell"

    def __init__(self, num_units, use_peepholes=False, cell_clip=None, initializer=None,
                 num_proj=None, proj_clip=None, num_unit_shards=None, num_proj_shards=None,
                 forget_bias=1.0, state_is_tuple=True, activation=None, reuse=None, name=None,
                 dtype=None):
        super().__init__(name, reuse, dtype)
        self._num_units, self._use_peepholes = int(num_units), bool(use_peepholes)
        self._cell_clip, self._initializer = cell_clip, initializer
        self._num_proj = None if num_proj is None else int(num_proj)
        self._proj_clip, self._forget_bias = proj_clip, float(forget_bias)
        self._state_is_tuple, self._activation = state_is_tuple, _act(activation)

    @property
    def state_size(self):
        n, m = self._num_units, self._num_proj or self._num_units
        return LSTMStateTuple(n, m) if self._state_is_tuple else n + m

    @property
    def output_size(self):
        return self._num_proj or self._num_units

    def _build(self, depth, dtype):
        n, m = self._num_units, self._num_proj or self._num_units
        self._kernel = self._var("kernel", [depth + m, 4 * n], dtype, self._initializer)
        self._bias = self._var("bias", [4 * n], dtype, Zeros())
        if self._use_peepholes:
            self._w_f = self._var("w_f_diag", [n], dtype, self._initializer)
            self._w_i = self._var("w_i_diag", [n], dtype, self._initializer)
            self._w_o = self._var("w_o_diag", [n], dtype, self._initializer)
        if self._num_proj is not None:
            with variable_scope("projection"):
                self._proj = self._var("kernel", [n, self._num_proj], dtype, self._initializer)

    def call(self, inputs, state):
        c, h = _state_parts(state, self._state_is_tuple, self._num_units, "LSTMCell")
        i, j, f, o = split(_linear([inputs, h], self._kernel, self._bias), 4, axis=1)
        if self._use_peepholes:
            c_new = (sigmoid(f + self._forget_bias + self._w_f * c) * c
                     + sigmoid(i + self._w_i * c) * self._activation(j))
        else:
            c_new = sigmoid(f + self._forget_bias) * c + sigmoid(i) * self._activation(j)
        if self._cell_clip is not None:
            c_new = clip_by_value(c_new, -self._cell_clip, self._cell_clip)
        if self._use_peepholes:
            m = sigmoid(o + self._w_o * c_new) * self._activation(c_new)
        else:
            m = sigmoid(o) * self._activation(c_new)
        if self._num_proj is not None:
            m = matmul(m, self._proj)
            if self._proj_clip is not None:
                m = clip_by_value(m, -self._proj_clip, self._proj_clip)
        new_state = LSTMStateTuple(c_new, m) if self._state_is_tuple else concat([c_new, m], 1)
        return m, new_state


class MultiRNNCell(RNNCell):
    """Cells stacked: cell ``k``'s output is cell ``k+1``'s input; the state is the tuple of
    the cells' states. Variables live under ``multi_rnn_cell/cell_k/``."""

    _base_name = "multi_rnn_cell"

    def __init__(self, cells, state_is_tuple=True):
        super().__init__()
        cells = list(cells)
        if not cells:
            raise ValueError("Must specify at least one cell for MultiRNNCell.")
        if len({id(c) for c in cells}) != len(cells):
            # TF 1.x refuses one cell object reused at several depths (shared variables)
            raise ValueError("MultiRNNCell: the same cell object appears more than once; "
                             "make one cell per layer ([BasicLSTMCell(n) for _ in range(k)])")
        if not state_is_tuple:
            raise InvalidArgumentError("MultiRNNCell: state_is_tuple=False is deprecated in "
                                       "TF 1.x and not supported; use tuples of states")
        self._cells = cells

    @property
    def state_size(self):
        return tuple(c.state_size for c in self._cells)

    @property
    def output_size(self):
        return self._cells[-1].output_size

    def _build(self, depth, dtype):
        for k, cell in enumerate(self._cells):
            with variable_scope(f"cell_{k}"):
                cell.build_for(depth, dtype)
            self._variables.extend(cell.variables)
            depth = cell.output_size

    def call(self, inputs, state):
        if not isinstance(state, (list, tuple)) or len(state) != len(self._cells):
            raise InvalidArgumentError(f"MultiRNNCell: expected a state tuple of "
                                       f"{len(self._cells)} cell states, got {state!r}")
        out, new_states = inputs, []
        for k, (cell, s) in enumerate(zip(self._cells, state)):
            with get_default_graph().name_scope(f"cell_{k}"):
                out, ns = cell.call(out, s)
            new_states.append(ns)
        return out, tuple(new_states)


class DropoutWrapper(RNNCell):
    """Dropout on a cell's inputs, outputs and (``state_keep_prob``) new state; the keep
    probabilities may be tensors (a placeholder fed 1.0 at test time)."""

    def __init__(self, cell, input_keep_prob=1.0, output_keep_prob=1.0, state_keep_prob=1.0,
                 variational_recurrent=False, input_size=None, dtype=None, seed=None):
        super().__init__()
        if variational_recurrent:
            raise InvalidArgumentError("DropoutWrapper: variational_recurrent=True is not "
                                       "supported; use the default per-step dropout")
        for what, p in (("input", input_keep_prob), ("output", output_keep_prob),
                        ("state", state_keep_prob)):
            if isinstance(p, (int, float)) and not 0 < p <= 1:
                raise ValueError(f"Parameter {what}_keep_prob must be between 0 and 1: {p}")
        self._cell, self._seed = cell, seed
        self._in, self._out, self._st = input_keep_prob, output_keep_prob, state_keep_prob

    @property
    def state_size(self):
        return self._cell.state_size

    @property
    def output_size(self):
        return self._cell.output_size

    def build_for(self, input_depth, dtype):
        self._cell.build_for(input_depth, dtype)
        self._built = True

    @property
    def variables(self):
        return self._cell.variables

    def zero_state(self, batch_size, dtype):
        return self._cell.zero_state(batch_size, dtype)

    def _drop(self, x, keep):
        if isinstance(keep, (int, float)) and keep == 1:
            return x
        return dropout(x, keep_prob=keep, seed=self._seed)

    def __call__(self, inputs, state, scope=None):
        inputs = convert_to_tensor(inputs)
        if not self._built:
            self.build_for(_last_dim(inputs, self), inputs.dtype)
            self._built = True
        return self.call(inputs, state)

    def call(self, inputs, state):
        out, new_state = self._cell(self._drop(inputs, self._in), state)
        if not (isinstance(self._st, (int, float)) and self._st == 1):
            new_state = _pack(new_state, [self._drop(s, self._st) for s in _flat(new_state)])
        return self._drop(out, self._out), new_state


class ResidualWrapper(DropoutWrapper):
    """``output = inputs + cell(inputs)``: the cell's output and input depths must agree."""

    def __init__(self, cell, residual_fn=None):
        super().__init__(cell)
        self._residual_fn = residual_fn

    def call(self, inputs, state):
        out, new_state = self._cell(inputs, state)
        if self._residual_fn is not None:
            return self._residual_fn(inputs, out), new_state
        return inputs + out, new_state
