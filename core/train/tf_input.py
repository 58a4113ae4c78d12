"""The rest of TF 1.x's input producers, on tensorvm's split queue: ``range_input_producer``,
``input_producer``, ``slice_input_producer``, ``match_filenames_once``; and ``batch_join``,
``shuffle_batch_join``.

Design
------
An :class:`EpochQueue` is a split queue (:class:`tensorvm.train.SplitQueue`'s state, see
:mod:`tensorvm.train.input`) whose elements are not splits but the values of a static list —
the integers ``0..limit-1``, the rows of a constant, or the files that a glob matches (listed on
the queue's device on first use). Like every split queue it needs no queue-runner thread: it
loads the next epoch, reshuffled with its seed, whenever it runs empty, and closes after
``num_epochs`` epochs, so consumers end with ``OutOfRangeError``. A string ``EpochQueue`` hands
its elements to readers (``TextLineReader().read(q)`` …) with leases, so each file is read
exactly once per epoch however many readers share it.

``slice_input_producer(tensors)`` dequeues an index from a ``range_input_producer`` and
gathers that row of every tensor (TF builds it the same way). ``match_filenames_once(pattern)``
is TF's local variable holding the matching files (initialise it with
``tv.local_variables_initializer()``); ``string_input_producer`` given it makes an
``EpochQueue`` over the same glob. ``batch_join``/``shuffle_batch_join`` enqueue each member of
``tensors_list`` from its own QueueRunner thread into one queue, as TF does
(:mod:`tensorvm.train.batching`).

>>> import tensorvm as tv
>>> i = tv.train.range_input_producer(3, num_epochs=2, shuffle=False).dequeue()
>>> with tv.Session() as s:
...     [int(s.run(i)) for _ in range(6)]
[0, 1, 2, 0, 1, 2]
"""
from __future__ import annotations

import numpy as np

from ..framework import dtypes as _dt
from ..framework import errors
from ..framework.graph import Tensor, get_default_graph
from ..framework.graph_keys import GraphKeys
from ..framework.op_def_library import apply_op
from ..ops.common import static_value
from ..ops.state.data_flow_ops import QueueBase, _handle_kernel, register_queue_kind
from ..framework.op_registry import register_op
from ..storage.fsio import match_files
from .input import SplitQueue, SplitQueueState
from .batching import batch_join, shuffle_batch_join

__all__ = [
    "EpochQueue",
    "batch_join",
    "input_producer",
    "match_filenames_once",
    "range_input_producer",
    "shuffle_batch_join",
    "slice_input_producer",
]


# ---- the queue -------------------------------------------------------------------------------

class EpochQueueState(SplitQueueState):
    """A split queue over a static list of values (or a glob's files) instead of splits."""

    kind = "EpochQueue"

    def _items_of_source(self) -> list:
        if self._source is None:
            src = self.spec["source"]
            self._source = match_files(src["glob"]) if "glob" in src else list(src["values"])
        return self._source

    def _put(self, elem: tuple) -> None:
        super()._put(tuple(np.asarray(e, dtype=object if d.is_string else d.np_dtype)
                           for e, d in zip(elem, self.dtypes)))


register_queue_kind(EpochQueueState)
register_op("EpochQueueV2", lambda i, a: [(_dt.string, ())], _handle_kernel, stateful=True,
            needs_ctx=True, differentiable=False)


class EpochQueue(QueueBase):
    """A queue that holds the values of ``source`` (``{"values": [...]}`` or
    ``{"glob": [patterns]}``) epoch after epoch; see the module docstring."""

    _op_type, _kind, _default_name = "EpochQueueV2", "EpochQueue", "input_producer"

    def __init__(self, dtype, element_shape, source: dict, num_epochs=None, shuffle=True,
                 seed=None, shared_name=None, name=None):
        from ..ops.math.random_ops import get_seed
        if num_epochs is not None and num_epochs < 1:
            raise errors.InvalidArgumentError(f"num_epochs must be >= 1 or None, got "
                                              f"{num_epochs}")
        s1, s2 = get_seed(seed) if shuffle else (None, None)
        if shuffle and s1 is None:
            s1, s2 = int(np.random.SeedSequence().entropy & 0x7FFFFFFF), 0
        super().__init__(dtype, [list(element_shape)], None, shared_name,
                         name or "input_producer", None, extra={
                             "source": source, "num_epochs": num_epochs,
                             "shuffle": bool(shuffle), "seed": s1, "seed2": s2})

    # a string EpochQueue leases its elements to readers like a SplitQueue
    lease = SplitQueue.lease
    ack = SplitQueue.ack


# ---- producers -------------------------------------------------------------------------------

def range_input_producer(limit, num_epochs=None, shuffle=True, seed=None, capacity=32,
                         shared_name=None, name=None) -> EpochQueue:
    """A queue of the int32s ``0 .. limit-1``, each epoch (shuffled unless ``shuffle=False``)."""
    lim = static_value(limit)
    if lim is None or np.ndim(lim) or np.asarray(lim).dtype.kind not in "iu" or int(lim) < 0:
        raise errors.InvalidArgumentError(f"range_input_producer: limit must be a "
                                          f"non-negative int known when the graph is built, "
                                          f"got {limit!r}")
    return EpochQueue(_dt.int32, (), {"values": tuple(range(int(lim)))}, num_epochs, shuffle,
                      seed, shared_name, name or "input_producer")


def input_producer(input_tensor, element_shape=None, num_epochs=None, shuffle=True, seed=None,
                   capacity=32, shared_name=None, summary_name=None, name=None,
                   cancel_op=None) -> EpochQueue:
    """A queue of the rows of ``input_tensor`` (known when the graph is built), each epoch."""
    value = static_value(input_tensor)
    if value is None:
        raise errors.InvalidArgumentError("input_producer needs an input_tensor known when the "
                                          "graph is built (a constant or a Python/NumPy value)")
    dt = input_tensor.dtype if isinstance(input_tensor, Tensor) else \
        (_dt.string if np.asarray(value).dtype.kind in "OUS" else _dt.as_dtype(value.dtype))
    arr = np.asarray(value, dtype=object if dt.is_string else dt.np_dtype)
    if arr.ndim < 1:
        raise errors.InvalidArgumentError("input_producer: input_tensor must have rank >= 1, "
                                          "got a scalar")
    shape = arr.shape[1:]
    if element_shape is not None and tuple(element_shape) != shape:
        raise errors.InvalidArgumentError(f"input_producer: element_shape {list(element_shape)}"
                                          f" does not match the rows' shape {list(shape)}")
    rows = tuple(arr[i] for i in range(arr.shape[0]))
    return EpochQueue(dt, shape, {"values": rows}, num_epochs, shuffle, seed, shared_name,
                      name or "input_producer")


def slice_input_producer(tensor_list, num_epochs=None, shuffle=True, seed=None, capacity=32,
                         shared_name=None, name=None) -> list:
    """One row of every tensor of ``tensor_list`` (all with the same first dimension) at a
    time: ``[t[i] for t in tensor_list]`` with ``i`` from a :func:`range_input_producer`."""
    from ..ops.array.index_ops import gather
    from ..framework.tensor_conversion import convert_to_tensor
    g = get_default_graph()
    with g.name_scope(name or "input_producer"):
        tensors = [convert_to_tensor(t) for t in tensor_list]
        if not tensors:
            raise errors.InvalidArgumentError("slice_input_producer: tensor_list is empty")
        firsts = {None if t._shape is None or not t._shape else t._shape[0] for t in tensors}
        if None in firsts or len(firsts) != 1:
            raise errors.InvalidArgumentError(
                f"slice_input_producer: every tensor needs the same static first dimension, "
                f"got shapes {[None if t._shape is None else list(t._shape) for t in tensors]}")
        q = range_input_producer(firsts.pop(), num_epochs, shuffle, seed, capacity,
                                 shared_name, name="range_input_producer")
        index = q.dequeue()
        return [gather(t, index) for t in tensors]


def _matching_files_kernel(*, patterns):
    return np.asarray(match_files(list(patterns)) or [], dtype=object).reshape(-1)


register_op("MatchingFilesV1", lambda i, a: [(_dt.string, (None,))], _matching_files_kernel,
            stateful=True, differentiable=False)


def match_filenames_once(pattern, name=None):
    """TF's local variable holding the files that ``pattern`` (a glob or a list of globs)
    matches, listed when the variable is initialised (``tv.local_variables_initializer()``).
    Passed to ``string_input_producer``, it makes an :class:`EpochQueue` over the same glob."""
    from ..ops.state.variables import Variable
    patterns = static_value(pattern)
    if patterns is None:
        raise errors.InvalidArgumentError("match_filenames_once: the pattern must be known "
                                          "when the graph is built")
    patterns = tuple(str(p) for p in np.asarray(patterns, dtype=object).reshape(-1))
    g = get_default_graph()
    with g.name_scope(name or "matching_filenames"):
        files = apply_op("MatchingFilesV1", [], {"patterns": patterns},
                         name="MatchingFiles").outputs[0]
        var = Variable(files, trainable=False, name="matching_filenames",
                       validate_shape=False, collections=[GraphKeys.LOCAL_VARIABLES])

    def producer(num_epochs, shuffle, seed, shared_name, name):
        return EpochQueue(_dt.string, (), {"glob": patterns}, num_epochs, shuffle, seed,
                          shared_name, name or "input_producer")

    var._input_producer = producer
    return var
