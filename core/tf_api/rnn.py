"""Recurrent networks from cells (``tv.nn`` and ``tv.contrib.rnn``, TF 1.x's names):

* ``static_rnn(cell, inputs_list)`` unrolls the cell over a Python list of time steps;
* ``dynamic_rnn(cell, inputs)`` runs it in one ``tv.while_loop`` over a ``[batch, time,
  depth]`` tensor (the time length may be unknown until run time), as TF's does: the inputs
  unstacked into a ``tv.TensorArray`` read in the body, each step's output written to one
  carried through the loop and stacked after it (O(1) a step, forward and backward);
* ``static_bidirectional_rnn`` / ``bidirectional_dynamic_rnn``: a forward and a backward
  cell, the backward one over each sequence reversed within its length.

With ``sequence_length``, steps at or past a row's length output zeros and carry the state
through unchanged, so the final state is the state at each row's last step (TF's rule).
Variables are made under ``rnn/`` (``bidirectional_rnn/fw``, ``bidirectional_rnn/bw``) as TF
names them.

>>> import numpy as np, tensorvm as tv
>>> x = tv.placeholder(tv.float32, [2, 5, 3])
>>> cell = tv.nn.rnn_cell.BasicRNNCell(4)
>>> out, state = tv.nn.dynamic_rnn(cell, x, dtype=tv.float32)
>>> out.shape.as_list(), state.shape.as_list()
([2, 5, 4], [2, 4])
>>> sorted(v.name for v in tv.trainable_variables())
['rnn/basic_rnn_cell/bias:0', 'rnn/basic_rnn_cell/kernel:0']
"""
from __future__ import annotations

from ..framework import dtypes as _dt
from ..framework.errors import InvalidArgumentError
from ..framework.graph import Tensor
from ..ops import (cast, concat, greater_equal, reverse, reverse_sequence, shape, stack, transpose,
                   unstack, where, zeros_like)
from ..ops.control.while_loop import while_loop
from ..ops.control.tensor_array import TensorArray
from .rnn_cell import _flat, _pack
from ..framework.tensor_conversion import convert_to_tensor
from ..ops.state.variable_scope import variable_scope

__all__ = [
    "bidirectional_dynamic_rnn",
    "dynamic_rnn",
    "static_bidirectional_rnn",
    "static_rnn",
]
NN_ALL = ["static_rnn", "dynamic_rnn", "static_bidirectional_rnn", "bidirectional_dynamic_rnn"]


def _batch_size(x: Tensor, axis: int):
    b = x._shape[axis] if x._shape is not None else None
    return int(b) if b is not None else shape(x)[axis]


def _initial_state(cell, initial_state, batch, dtype, fn):
    if initial_state is not None:
        return initial_state
    if dtype is None:
        raise ValueError(f"{fn}: if there is no initial_state, you must give a dtype.")
    return cell.zero_state(batch, dtype)


def _seq_lengths(sequence_length, fn):
    if sequence_length is None:
        return None
    s = convert_to_tensor(sequence_length)
    if s._shape is not None and len(s._shape) != 1:
        raise ValueError(f"{fn}: sequence_length must be a vector of length batch_size, but "
                         f"saw shape: {list(s._shape)}")
    return cast(s, _dt.int32, name="sequence_length")


def _mask_step(t, seq, out, old_flat, new_flat):
    """Past its length a row outputs zeros and keeps its state (TF's ``_rnn_step``)."""
    done = greater_equal(t, seq)
    out = where(done, zeros_like(out), out)
    return out, [where(done, o, n) for o, n in zip(old_flat, new_flat)]


def static_rnn(cell, inputs, initial_state=None, dtype=None, sequence_length=None,
               scope=None):
    """Unroll ``cell`` over ``inputs``, a list of ``[batch, depth]`` tensors:
    ``(outputs_list, final_state)``."""
    if not isinstance(inputs, (list, tuple)):
        raise TypeError("inputs must be a sequence")
    if not inputs:
        raise ValueError("inputs must not be empty")
    inputs = [convert_to_tensor(x) for x in inputs]
    with variable_scope(scope or "rnn"):
        state = _initial_state(cell, initial_state, _batch_size(inputs[0], 0), dtype,
                               "static_rnn")
        seq = _seq_lengths(sequence_length, "static_rnn")
        outputs = []
        for t, x in enumerate(inputs):
            out, new = cell(x, state)
            if seq is not None:
                out, flat = _mask_step(t, seq, out, _flat(state), _flat(new))
                new = _pack(new, flat)
            outputs.append(out)
            state = new
        return outputs, state


def dynamic_rnn(cell, inputs, sequence_length=None, initial_state=None, dtype=None,
                parallel_iterations=None, swap_memory=False, time_major=False, scope=None):
    """Run ``cell`` over ``inputs`` (``[batch, time, depth]``, or ``[time, batch, depth]``
    with ``time_major``) in a while loop: ``(outputs, final_state)``, outputs shaped like
    the inputs with the cell's output depth."""
    if isinstance(inputs, (list, tuple)):
        raise InvalidArgumentError("dynamic_rnn: inputs must be one [batch, time, depth] "
                                   "tensor here (nested inputs are not supported)")
    x = convert_to_tensor(inputs)
    if x._shape is None or len(x._shape) != 3:
        raise ValueError(f"dynamic_rnn: inputs must be [batch, time, depth], got shape "
                         f"{None if x._shape is None else list(x._shape)}")
    if x._shape[2] is None:
        raise ValueError("Input size (depth of inputs) must be accessible via shape inference,"
                         " but saw value None.")
    with variable_scope(scope or "rnn"):
        if not time_major:
            x = transpose(x, [1, 0, 2])
        steps, batch = _batch_size(x, 0), _batch_size(x, 1)
        state = _initial_state(cell, initial_state, batch, dtype, "dynamic_rnn")
        cell.build_for(int(x._shape[2]), x.dtype)
        seq = _seq_lengths(sequence_length, "dynamic_rnn")
        flat0 = [convert_to_tensor(s) for s in _flat(state)]
        n_out = int(cell.output_size)
        out_dtype = flat0[0].dtype if flat0 else x.dtype
        # TF's _dynamic_rnn_loop: the inputs unstacked into a TensorArray read in the body
        # (captured), the outputs written to one carried through the loop: O(1) a step.
        n_steps = steps if isinstance(steps, int) else shape(x)[0]
        input_ta = TensorArray(x.dtype, n_steps, element_shape=x._shape[1:],
                               tensor_array_name="input").unstack(x)
        b = batch if isinstance(batch, int) else None
        output_ta = TensorArray(out_dtype, n_steps, element_shape=[b, n_out],
                                tensor_array_name="output")

        def body(t, out_ta, *flat):
            out, new = cell(input_ta.read(t), _pack(state, list(flat)))
            new_flat = _flat(new)
            if seq is not None:
                out, new_flat = _mask_step(t, seq, out, list(flat), new_flat)
            return [t + 1, out_ta.write(t, out)] + list(new_flat)

        res = while_loop(lambda t, *_: t < steps, body, [0, output_ta] + flat0,
                         parallel_iterations=parallel_iterations or 32,
                         name="while")
        res = [res[0], res[1].stack()] + list(res[2:])
        outputs, final = res[1], _pack(state, list(res[2:]))
        if not time_major:
            outputs = transpose(outputs, [1, 0, 2])
        return outputs, final


def _reverse_list(xs, seq):
    if seq is None:
        return list(reversed(xs))
    return unstack(reverse_sequence(stack(xs), seq, seq_axis=0, batch_axis=1))


def static_bidirectional_rnn(cell_fw, cell_bw, inputs, initial_state_fw=None,
                             initial_state_bw=None, dtype=None, sequence_length=None,
                             scope=None):
    """A forward and a backward ``static_rnn``: ``(outputs, state_fw, state_bw)``, each
    output the concatenation ``[fw, bw]`` along depth."""
    if not isinstance(inputs, (list, tuple)):
        raise TypeError("inputs must be a sequence")
    if not inputs:
        raise ValueError("inputs must not be empty")
    with variable_scope(scope or "bidirectional_rnn"):
        with variable_scope("fw") as fw_scope:
            out_fw, state_fw = static_rnn(cell_fw, inputs, initial_state_fw, dtype,
                                          sequence_length, scope=fw_scope)
        with variable_scope("bw") as bw_scope:
            seq = _seq_lengths(sequence_length, "static_bidirectional_rnn")
            tmp, state_bw = static_rnn(cell_bw, _reverse_list(list(inputs), seq),
                                       initial_state_bw, dtype, sequence_length,
                                       scope=bw_scope)
        out_bw = _reverse_list(tmp, seq)
        outputs = [concat([f, b], 1) for f, b in zip(out_fw, out_bw)]
        return outputs, state_fw, state_bw


def bidirectional_dynamic_rnn(cell_fw, cell_bw, inputs, sequence_length=None,
                              initial_state_fw=None, initial_state_bw=None, dtype=None,
                              parallel_iterations=None, swap_memory=False, time_major=False,
                              scope=None):
    """A forward and a backward ``dynamic_rnn``: ``((out_fw, out_bw), (state_fw,
    state_bw))``; ``out_bw`` is in the inputs' time order."""
    time_axis = 0 if time_major else 1

    def rev(t, seq):
        if seq is None:
            return reverse(t, [time_axis])
        return reverse_sequence(t, seq, seq_axis=time_axis, batch_axis=1 - time_axis)

    with variable_scope(scope or "bidirectional_rnn"):
        with variable_scope("fw") as fw_scope:
            out_fw, state_fw = dynamic_rnn(cell_fw, inputs, sequence_length, initial_state_fw,
                                           dtype, parallel_iterations, swap_memory,
                                           time_major, scope=fw_scope)
        with variable_scope("bw") as bw_scope:
            seq = _seq_lengths(sequence_length, "bidirectional_dynamic_rnn")
            tmp, state_bw = dynamic_rnn(cell_bw, rev(convert_to_tensor(inputs), seq),
                                        sequence_length, initial_state_bw, dtype,
                                        parallel_iterations, swap_memory, time_major,
                                        scope=bw_scope)
        return (out_fw, rev(tmp, seq)), (state_fw, state_bw)
