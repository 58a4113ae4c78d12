"""The rest of TF 1.x's recurrent networks for ``tv.nn``: ``raw_rnn`` (a cell driven by a
user's ``loop_fn`` in one ``tv.while_loop``) and ``static_state_saving_rnn`` (``static_rnn``
whose state comes from and goes back to a state saver), built from
:mod:`tensorvm.tf_api.rnn`'s pieces as TF builds them.

>>> import numpy as np, tensorvm as tv
>>> x = tv.constant(np.ones((3, 2, 4), np.float32))  # [time, batch, depth]
>>> cell = tv.nn.rnn_cell.BasicRNNCell(5)
>>> def loop_fn(time, cell_output, cell_state, loop_state):
...     state = cell.zero_state(2, tv.float32) if cell_output is None else cell_state
...     finished = time >= 3
...     inp = tv.cond(finished, lambda: tv.zeros([2, 4]), lambda: x[tv.minimum(time, 2)])
...     return tv.fill([2], finished), inp, state, cell_output, None
>>> outputs_ta, state, _ = tv.nn.raw_rnn(cell, loop_fn)
>>> outputs_ta.stack().shape.as_list()
[None, 2, 5]
"""
from __future__ import annotations

from ..framework import dtypes as _dt
from ..framework.errors import InvalidArgumentError
from ..framework.graph import control_dependencies
from .rnn import static_rnn
from .rnn_cell import _flat, _pack
from ..framework.tensor_conversion import convert_to_tensor
from ..ops.state.variable_scope import variable_scope

__all__: list[str] = []
NN_ALL = ["raw_rnn", "static_state_saving_rnn"]


def raw_rnn(cell, loop_fn, parallel_iterations=None, swap_memory=False, scope=None):
    """TF 1.x's ``raw_rnn``: ``loop_fn(time, cell_output, cell_state, loop_state)`` returns
    ``(finished, next_input, next_cell_state, emit_output, next_loop_state)``; it is first
    called with ``time = 0`` and the three others None (its ``next_cell_state`` is the initial
    state, its ``emit_output`` the emit structure or None for the cell's output), then after
    each cell step with ``time + 1``. The loop runs while any batch entry is unfinished; a
    finished entry emits zeros and keeps its state. Returns ``(emit_ta, final_state,
    final_loop_state)``, ``emit_ta`` a ``tv.TensorArray`` (or a structure of them) of the
    emits by time."""
    from ..ops.array.array_ops import zeros_like
    from ..ops.array.fill_ops import zeros
    from ..ops.math.math_ext import logical_not, logical_or, reduce_all, where
    from ..ops.control.tensor_array import TensorArray
    from ..ops.control.while_loop import while_loop
    if not callable(loop_fn):
        raise TypeError("loop_fn must be a callable")
    with variable_scope(scope or "rnn"):
        time = convert_to_tensor(0, dtype=_dt.int32)
        finished, next_input, state0, emit0, loop_state0 = loop_fn(time, None, None, None)
        finished = convert_to_tensor(finished)
        if finished.dtype != _dt.bool_:
            raise InvalidArgumentError(f"raw_rnn: loop_fn's finished must be bool, got "
                                       f"{finished.dtype.name}")
        in_flat = [convert_to_tensor(t) for t in _flat(next_input)]
        st_flat = [convert_to_tensor(t) for t in _flat(state0)]
        if emit0 is None:  # the cell's output: zeros of its size in the state's dtype
            batch = in_flat[0]._shape[0] if in_flat[0]._shape is not None else None
            size = int(cell.output_size)
            emit0 = zeros([batch if batch is not None else _shape0(in_flat[0]), size],
                          st_flat[0].dtype)
        em_flat = [convert_to_tensor(t) for t in _flat(emit0)]
        ls_flat = [] if loop_state0 is None else list(_flat(loop_state0))
        depth = in_flat[0]._shape[-1] if in_flat[0]._shape is not None else None
        if hasattr(cell, "build_for") and depth is not None:
            cell.build_for(int(depth), in_flat[0].dtype)  # variables made outside the loop
        tas = [TensorArray(e.dtype, size=0, dynamic_size=True, element_shape=e._shape,
                           tensor_array_name=f"rnn_output_{i}") for i, e in enumerate(em_flat)]
        ni, ns, ne = len(in_flat), len(st_flat), len(tas)

        def body(t, done, *rest):
            inp = _pack(next_input, list(rest[:ni]))
            state = list(rest[ni:ni + ns])
            out_tas = list(rest[ni + ns:ni + ns + ne])
            ls = list(rest[ni + ns + ne:])
            output, cell_state = cell(inp, _pack(state0, state))
            nf, n_in, n_state, emit, n_ls = loop_fn(
                t + 1, output, cell_state, None if loop_state0 is None else _pack(loop_state0,
                                                                                  ls))
            if emit is None:
                emit = output
            if (loop_state0 is None) != (n_ls is None):
                raise ValueError("raw_rnn: loop_fn's next_loop_state must be None exactly "
                                 "when its initial loop_state is None")
            keep = [where(done, s, n) for s, n in zip(state, _flat(n_state))]
            emits = [where(done, zeros_like(z), e) for z, e in zip(em_flat, _flat(emit))]
            out_tas = [ta.write(t, e) for ta, e in zip(out_tas, emits)]
            return [t + 1, logical_or(done, convert_to_tensor(nf))] + \
                [convert_to_tensor(v) for v in _flat(n_in)] + keep + out_tas + \
                ([] if n_ls is None else list(_flat(n_ls)))

        res = while_loop(lambda t, done, *_: logical_not(reduce_all(done)), body,
                         [time, finished] + in_flat + st_flat + tas + ls_flat,
                         parallel_iterations=parallel_iterations or 32, name="while")
        state = _pack(state0, list(res[2 + ni:2 + ni + ns]))
        emit_ta = _pack(emit0, list(res[2 + ni + ns:2 + ni + ns + ne])) if isinstance(
            emit0, (list, tuple)) else res[2 + ni + ns]
        final_ls = None if loop_state0 is None else _pack(loop_state0,
                                                          list(res[2 + ni + ns + ne:]))
        return emit_ta, state, final_ls


def _shape0(t):
    from ..ops.array.array_ops import shape
    return shape(t)[0]


def static_state_saving_rnn(cell, inputs, state_saver, state_name, sequence_length=None,
                            scope=None):
    """``static_rnn`` whose initial state is ``state_saver.state(state_name)`` (one name per
    element of a tuple state) and whose final state is saved back with
    ``state_saver.save_state(name, value)``; the last output and the state returned depend
    on the saves, as TF's."""
    from ..ops.array.array_ops import identity
    tuple_state = isinstance(cell.state_size, (list, tuple))
    if tuple_state != isinstance(state_name, (list, tuple)):
        raise ValueError(f"state_name should be the same type as cell.state_size.  "
                         f"state_name: {state_name!s}, cell.state_size: {cell.state_size!s}")
    if tuple_state:
        names, sizes = _flat(state_name), _flat(cell.state_size)
        if len(names) != len(sizes):
            raise ValueError(f"Number of elements in state_name and cell.state_size must be "
                             f"equal. state_name: {state_name}, cell.state_size: "
                             f"{cell.state_size}")
        initial = _pack(cell.state_size, [state_saver.state(n) for n in names])
    else:
        initial = state_saver.state(state_name)
    outputs, state = static_rnn(cell, inputs, initial_state=initial,
                                sequence_length=sequence_length, scope=scope)
    if tuple_state:
        saves = [state_saver.save_state(n, s) for n, s in zip(_flat(state_name), _flat(state))]
    else:
        saves = [state_saver.save_state(state_name, state)]
    with control_dependencies(saves):
        outputs[-1] = _pack(outputs[-1], [identity(o) for o in _flat(outputs[-1])])
        state = _pack(state, [identity(s) for s in _flat(state)])
    return outputs, state
