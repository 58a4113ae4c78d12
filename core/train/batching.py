"""TF 1.x's batching: ``batch``/``shuffle_batch`` (one list or dict of tensors, enqueued by
``num_threads`` runs of one enqueue op) and ``batch_join``/``shuffle_batch_join`` (several,
each enqueued by its own op), all through one queue on the current device — a FIFOQueue
(a PaddingFIFOQueue with ``dynamic_pad``) or a seeded RandomShuffleQueue — filled by a
:class:`~tensorvm.train.QueueRunner` (start them with ``start_queue_runners``) and read with
``dequeue_many`` (``dequeue_up_to`` with ``allow_smaller_final_batch``). When the input is
exhausted the runner closes the queue.

>>> import tensorvm as tv
>>> x = tv.train.range_input_producer(4, num_epochs=1, shuffle=False).dequeue()
>>> b = tv.train.batch([x], batch_size=2)
>>> with tv.Session() as s:
...     coord = tv.train.Coordinator()
...     threads = tv.train.start_queue_runners(s, coord=coord)
...     first = s.run(b)[0].tolist()
...     coord.request_stop(); coord.join(threads)
>>> first
[0, 1]
"""
from __future__ import annotations

from ..framework import errors
from ..framework.tensor_conversion import convert_to_tensor
from ..ops.state.data_flow_ops import FIFOQueue, PaddingFIFOQueue, RandomShuffleQueue
from .queue_runner import QueueRunner, add_queue_runner

__all__ = ["batch", "shuffle_batch", "batch_join", "shuffle_batch_join"]


def batch(tensors, batch_size, num_threads=1, capacity=32, enqueue_many=False, shapes=None,
          dynamic_pad=False, allow_smaller_final_batch=False, shared_name=None, name=None):
    """Batches of ``tensors`` (a tensor, list or dict) through a FIFOQueue on the current
    device, filled by a QueueRunner (:func:`start_queue_runners`)."""
    make = _fifo(capacity, dynamic_pad, shared_name, (name or "batch") + "/fifo_queue")
    return _batch(make, tensors, batch_size, num_threads, enqueue_many, shapes, dynamic_pad,
                  allow_smaller_final_batch, name)


def shuffle_batch(tensors, batch_size, capacity, min_after_dequeue, num_threads=1, seed=None,
                  enqueue_many=False, shapes=None, allow_smaller_final_batch=False,
                  shared_name=None, name=None):
    """Like :func:`batch` through a RandomShuffleQueue (seeded) that keeps at least
    ``min_after_dequeue`` elements until its input is exhausted."""
    make = _shuffled(capacity, min_after_dequeue, seed, shared_name,
                     (name or "shuffle_batch") + "/random_shuffle_queue")
    return _batch(make, tensors, batch_size, num_threads, enqueue_many, shapes, False,
                  allow_smaller_final_batch, name)


def batch_join(tensors_list, batch_size, capacity=32, enqueue_many=False, shapes=None,
               dynamic_pad=False, allow_smaller_final_batch=False, shared_name=None,
               name=None):
    """Batches from several lists (or dicts) of tensors, each enqueued by its own thread into
    one FIFOQueue (``start_queue_runners`` starts them)."""
    make = _fifo(capacity, dynamic_pad, shared_name, (name or "batch_join") + "/fifo_queue")
    return _join(make, tensors_list, batch_size, enqueue_many, shapes, dynamic_pad,
                 allow_smaller_final_batch, name)


def shuffle_batch_join(tensors_list, batch_size, capacity, min_after_dequeue, seed=None,
                       enqueue_many=False, shapes=None, allow_smaller_final_batch=False,
                       shared_name=None, name=None):
    """Like :func:`batch_join` through one seeded RandomShuffleQueue."""
    make = _shuffled(capacity, min_after_dequeue, seed, shared_name,
                     (name or "shuffle_batch_join") + "/random_shuffle_queue")
    return _join(make, tensors_list, batch_size, enqueue_many, shapes, False,
                 allow_smaller_final_batch, name)


# ---- the queues --------------------------------------------------------------------------------

def _fifo(capacity, dynamic_pad, shared_name, queue_name):
    def make(dtypes, shapes, names):
        cls = PaddingFIFOQueue if dynamic_pad else FIFOQueue
        return cls(capacity, dtypes, shapes=shapes, names=names, shared_name=shared_name,
                   name=queue_name)
    return make


def _shuffled(capacity, min_after_dequeue, seed, shared_name, queue_name):
    def make(dtypes, shapes, names):
        return RandomShuffleQueue(capacity, min_after_dequeue, dtypes, shapes=shapes,
                                  names=names, seed=seed, shared_name=shared_name,
                                  name=queue_name)
    return make


# ---- the steps both kinds share ------------------------------------------------------------------

def _element_shapes(flat, enqueue_many, dynamic_pad, what: str) -> list:
    """The static shape of one queue element per tensor of ``flat`` (a row of each with
    ``enqueue_many``); unknown dimensions only with ``dynamic_pad``."""
    shapes = []
    for t in flat:
        s = t._shape
        s = None if s is None else (s[1:] if enqueue_many else s)
        if s is None or (None in s and not dynamic_pad):
            raise errors.InvalidArgumentError(
                f"{what}: all shapes must be fully defined (got {t.name} with shape "
                f"{None if s is None else list(s)}); pass shapes= or dynamic_pad=True")
        shapes.append(s)
    return shapes


def _run_and_dequeue(q, enqueues, batch_size, allow_smaller_final_batch, name):
    """Register the QueueRunner of ``enqueues`` and return the batch dequeued from ``q``."""
    add_queue_runner(QueueRunner(q, enqueues))
    return q.dequeue_up_to(batch_size, name=name) if allow_smaller_final_batch else \
        q.dequeue_many(batch_size, name=name)


def _enqueue(q, values, keys, enqueue_many):
    vals = dict(zip(keys, values)) if keys else values
    return q.enqueue_many(vals) if enqueue_many else q.enqueue(vals)


# ---- batch: one member, num_threads runs of its enqueue ------------------------------------------

def _batch(queue_fn, tensors, batch_size, num_threads, enqueue_many, shapes, dynamic_pad,
           allow_smaller_final_batch, name):
    single = not isinstance(tensors, (list, tuple, dict))
    keys = list(tensors) if isinstance(tensors, dict) else None
    flat = [tensors] if single else (list(tensors.values()) if keys else list(tensors))
    flat = [convert_to_tensor(t) for t in flat]
    if shapes is None:
        shapes = _element_shapes(flat, enqueue_many, dynamic_pad, "batch")
    q = queue_fn([t.dtype for t in flat], shapes, keys)
    enq = _enqueue(q, flat, keys, enqueue_many)
    out = _run_and_dequeue(q, [enq] * num_threads, batch_size, allow_smaller_final_batch, name)
    if not single and keys is None and not isinstance(out, list):
        out = [out]
    return out


# ---- batch_join: one enqueue per member ----------------------------------------------------------

def _flatten(tensors, keys):
    if keys is not None:
        if not isinstance(tensors, dict) or set(tensors) != set(keys):
            raise errors.InvalidArgumentError(f"batch_join: every member of tensors_list must "
                                              f"be a dict with keys {sorted(keys)}")
        tensors = [tensors[k] for k in keys]
    elif not isinstance(tensors, (list, tuple)):
        tensors = [tensors]
    return [convert_to_tensor(t) for t in tensors]


def _join(make_queue, tensors_list, batch_size, enqueue_many, shapes, dynamic_pad,
          allow_smaller_final_batch, name):
    tensors_list = list(tensors_list)
    if not tensors_list:
        raise errors.InvalidArgumentError("batch_join: tensors_list is empty")
    first = tensors_list[0]
    keys = sorted(first) if isinstance(first, dict) else None
    flats = [_flatten(t, keys) for t in tensors_list]
    if len({len(f) for f in flats}) != 1:
        raise errors.InvalidArgumentError("batch_join: every member of tensors_list must have "
                                          "the same number of tensors")
    for f in flats[1:]:
        for a, b in zip(flats[0], f):
            if a.dtype != b.dtype:
                raise errors.InvalidArgumentError(
                    f"batch_join: dtypes differ between members: {a.dtype.name} ({a.name}) vs "
                    f"{b.dtype.name} ({b.name})")
    if shapes is None:
        shapes = _element_shapes(flats[0], enqueue_many, dynamic_pad, "batch_join")
    q = make_queue([t.dtype for t in flats[0]], shapes, keys)
    enqueues = [_enqueue(q, f, keys, enqueue_many) for f in flats]
    out = _run_and_dequeue(q, enqueues, batch_size, allow_smaller_final_batch, name)
    if keys is None and isinstance(first, (list, tuple)) and not isinstance(out, list):
        out = [out]
    return out
