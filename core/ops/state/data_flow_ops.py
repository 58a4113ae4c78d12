"""Queues: ``tv.FIFOQueue``, ``tv.RandomShuffleQueue``, ``tv.PriorityQueue``,
``tv.PaddingFIFOQueue`` — resources on a device, with TensorFlow 1.x's exact semantics.

Design
------
A queue is a :class:`QueueState` in the ResourceMgr of its device, keyed by
``(container, shared_name or the queue op's name)``: every queue op carries the queue's spec
(kind, capacity, dtypes, shapes …) as an attr and looks the queue up — creating it on first use —
so it exists wherever its ops run, like a Variable. All queue ops are stateful (never folded,
merged or recomputed) and colocated with the queue op, so an ``enqueue`` built under
``tv.device("/job:worker/task:0")`` still runs on the queue's device (``/job:ps/task:0``), its
inputs arriving through Send/Recv.

State: a ``threading.Condition`` guards the elements (tuples of NumPy arrays, one per component),
``closed``, ``cancelled`` (closed with ``cancel_pending_enqueues``) and the count of enqueues that
wait for room. Semantics, as in TF:

* ``enqueue`` / ``enqueue_many`` wait while the queue is full (``enqueue_many`` inserts element
  by element as room appears); on a closed queue they fail with ``CancelledError``; pending ones
  are cancelled by ``close(cancel_pending_enqueues=True)``, otherwise they still complete;
* ``dequeue`` / ``dequeue_many(n)`` wait for elements; on a closed queue with fewer than
  requested (and no pending enqueue that could add more) they fail with ``OutOfRangeError``:
  ``FIFOQueue 'q' is closed and has insufficient elements (requested 2, current size 1)`` —
  and leave the elements in the queue; ``dequeue_up_to(n)`` then returns what is left instead;
* ``RandomShuffleQueue`` keeps ``min_after_dequeue`` elements back while open (the floor is
  ignored once closed) and draws from a seeded generator; ``PriorityQueue`` dequeues the smallest
  int64 priority (its first component) first; ``PaddingFIFOQueue`` accepts ``None`` dims and
  pads each ``dequeue_many`` batch to its largest element with zeros (``""`` for strings).

Blocking: an op that must wait first releases its Dask worker slot (``distributed.secede``) and
takes one back (``rejoin``) after the wait, so blocked queue ops never starve the worker that must
run the op that unblocks them. In-process (Dask's threaded scheduler) they simply block. Closing
a queue (or clearing the device's resources, e.g. at the end of an in-process session) wakes
every waiter. In a Dask worker a waiting op also gives up (``CancelledError``, taking nothing)
once the client has cancelled its step, e.g. after ``RunOptions(timeout_in_ms=…)`` expired; in
process, the session marks a timed-out step cancelled and its waiting ops give up the same way.
The queue state and the waiting live in :mod:`tensorvm.vm.queues`.

>>> import tensorvm as tv
>>> q = tv.FIFOQueue(3, tv.int32, shapes=[[]])
>>> fill = q.enqueue_many([[1, 2, 3]])
>>> with tv.Session() as s:
...     s.run(fill); s.run(q.close())
...     [int(s.run(q.dequeue())), s.run(q.dequeue_up_to(5)).tolist()]
[1, [2, 3]]
"""
from __future__ import annotations


import numpy as np

from ...framework import dtypes as _dt
from ...framework.errors import InvalidArgumentError
from ...framework.graph import Tensor, get_default_graph
from ...framework.op_def_library import apply_op
from ...framework.op_registry import register_op
from ...framework.tensor_conversion import convert_to_tensor
from ...vm.queues import (QUEUE_KINDS, UNBOUNDED, PaddingFIFOQueueState, PriorityQueueState,  # noqa
                      QueueState, RandomShuffleQueueState, Waiter, lookup_queue,
                      register_queue_kind)
from ..common import static_value

__all__ = ["QueueBase", "FIFOQueue", "RandomShuffleQueue", "PriorityQueue", "PaddingFIFOQueue"]

# ---- element checks --------------------------------------------------------------------------

def _compatible(shape, expected) -> bool:
    return len(shape) == len(expected) and all(e is None or e == s
                                               for s, e in zip(shape, expected))


def _check_component(q: QueueState, i: int, value: np.ndarray, batched: bool):
    if q.shapes is None:
        return
    want = q.shapes[i]
    got = value.shape[1:] if batched else value.shape
    if not _compatible(got, want):
        pretty = "[" + ",".join("?" if d is None else str(d) for d in want) + "]"
        raise InvalidArgumentError(
            f"Shape mismatch in tuple component {i}. Expected {pretty}, got {list(got)}"
            + (f" (batched: {list(value.shape)})" if batched else ""))


def _elements(q: QueueState, values, many: bool) -> list[tuple]:
    vals = [np.asarray(v, dtype=object) if dt.is_string else np.asarray(v)
            for v, dt in zip(values, q.dtypes)]
    for i, v in enumerate(vals):
        _check_component(q, i, v, many)
    if not many:
        return [tuple(vals)]
    sizes = {v.shape[0] if v.ndim else None for v in vals}
    if None in sizes or len(sizes) != 1:
        raise InvalidArgumentError(
            f"enqueue_many on {q.kind} '{q.name}': every component needs the same first "
            f"dimension, got shapes {[list(v.shape) for v in vals]}")
    return [tuple(v[k] for v in vals) for k in range(sizes.pop())]


# ---- kernels ---------------------------------------------------------------------------------

def _blocking(fn, ctx=None):
    """Run a queue operation with a Waiter; take the worker slot back after any wait."""
    w = Waiter(ctx)
    try:
        return fn(w)
    finally:
        w.done()


def _handle_kernel(ctx, *, queue):
    lookup_queue(ctx, queue)
    return np.asarray(queue["name"], dtype=object)


def _enqueue_kernel(ctx, *values, queue, many=False):
    q = lookup_queue(ctx, queue)
    elems = _elements(q, values, many)
    _blocking(lambda w: q.enqueue(elems, w), ctx)
    return ()


def _dequeue_kernel(ctx, *n, queue, mode):
    q = lookup_queue(ctx, queue)
    if mode == "one":
        (elem,) = _blocking(lambda w: q.dequeue(1, False, w), ctx)
        return elem[0] if len(elem) == 1 else tuple(elem)
    count = int(np.asarray(n[0]))
    if count < 0:
        raise InvalidArgumentError(f"dequeue: n must be >= 0, got {count}")
    elems = _blocking(lambda w: q.dequeue(count, mode == "up_to", w), ctx)
    out = q.batch(elems)
    return out[0] if len(out) == 1 else out


def _size_kernel(ctx, *, queue):
    return np.int32(lookup_queue(ctx, queue).size())


def _close_kernel(ctx, *, queue, cancel_pending_enqueues=False):
    lookup_queue(ctx, queue).close(cancel_pending_enqueues)
    return ()


def _is_closed_kernel(ctx, *, queue):
    return np.bool_(lookup_queue(ctx, queue).closed)


# ---- shape rules -----------------------------------------------------------------------------

def _check_dtypes(inputs, spec, op):
    dts = [_dt.as_dtype(d) for d in spec["dtypes"]]
    if len(inputs) != len(dts):
        raise InvalidArgumentError(f"{op}: the queue has {len(dts)} components, got "
                                   f"{len(inputs)} values")
    for i, (t, d) in enumerate(zip(inputs, dts)):
        if t.dtype != d:
            raise InvalidArgumentError(f"{op}: component {i} of the queue has dtype {d.name}, "
                                       f"got {t.dtype.name} ({t.name})")


def _enqueue_shape(inputs, attrs):
    spec = attrs["queue"]
    _check_dtypes(inputs, spec, "enqueue_many" if attrs.get("many") else "enqueue")
    shapes = spec.get("shapes")
    for i, t in enumerate(inputs):
        if t._shape is None or shapes is None:
            continue
        got = t._shape[1:] if attrs.get("many") else t._shape
        if attrs.get("many") and not t._shape:
            raise InvalidArgumentError(f"enqueue_many: component {i} must have a batch "
                                       f"dimension, got a scalar {t.name}")
        if len(got) != len(shapes[i]) or any(a is not None and b is not None and a != b
                                             for a, b in zip(got, shapes[i])):
            raise InvalidArgumentError(
                f"Shape mismatch in tuple component {i}: expected {list(shapes[i])}, got "
                f"{list(got)} ({t.name})")
    return []


def _dequeue_shape(inputs, attrs):
    spec, mode = attrs["queue"], attrs["mode"]
    dts = [_dt.as_dtype(d) for d in spec["dtypes"]]
    shapes = spec.get("shapes") or [None] * len(dts)
    if mode == "one":
        return [(d, s) for d, s in zip(dts, shapes)]
    (n,) = inputs
    if not n.dtype.is_integer or (n._shape is not None and n._shape != ()):
        raise InvalidArgumentError(f"dequeue_many: n must be an integer scalar, got {n!r}")
    nv = static_value(n) if mode == "many" else None
    lead = (None if nv is None else int(nv),)
    return [(d, None if s is None else lead + tuple(s)) for d, s in zip(dts, shapes)]


_QUEUE_OPS = {
    "QueueEnqueueV2": (_enqueue_shape, _enqueue_kernel),
    "QueueDequeueV2": (_dequeue_shape, _dequeue_kernel),
    "QueueSizeV2": (lambda i, a: [(_dt.int32, ())], _size_kernel),
    "QueueCloseV2": (lambda i, a: [], _close_kernel),
    "QueueIsClosedV2": (lambda i, a: [(_dt.bool_, ())], _is_closed_kernel),
}
for _kind in ("FIFOQueueV2", "RandomShuffleQueueV2", "PriorityQueueV2", "PaddingFIFOQueueV2"):
    _QUEUE_OPS[_kind] = (lambda i, a: [(_dt.string, ())], _handle_kernel)
for _type, (_shape_fn, _kernel) in _QUEUE_OPS.items():
    register_op(_type, _shape_fn, _kernel, stateful=True, needs_ctx=True, differentiable=False)


# ---- the Python classes ----------------------------------------------------------------------

def _norm_shapes(shapes, n: int, require: bool, what: str):
    if shapes is None:
        if require:
            raise InvalidArgumentError(f"{what} requires shapes for every component")
        return None
    shapes = list(shapes)
    if n == 1 and (not shapes or not isinstance(shapes[0], (list, tuple))) and \
            all(s is None or isinstance(s, int) for s in shapes):
        shapes = [shapes]  # a single component's shape given bare
    if len(shapes) != n:
        raise InvalidArgumentError(f"{what}: {n} dtypes but {len(shapes)} shapes")
    out = []
    for s in shapes:
        if s is None or (hasattr(s, "dims") and s.dims is None):
            raise InvalidArgumentError(f"{what}: every shape needs a known rank, got {s!r}")
        dims = s.dims if hasattr(s, "dims") else s
        out.append(tuple(None if d is None else int(d) for d in dims))
    return tuple(out)


class QueueBase:
    """The ops of a queue; construct one of the concrete classes below."""

    _op_type = "FIFOQueueV2"
    _kind = "FIFOQueue"
    _default_name = "fifo_queue"

    def __init__(self, dtypes, shapes=None, names=None, shared_name=None, name=None,
                 capacity=None, extra=None, container: str = ""):
        dts = dtypes if isinstance(dtypes, (list, tuple)) else [dtypes]
        self._dtypes = tuple(_dt.as_dtype(d) for d in dts)
        self._names = None if names is None else \
            list(names if isinstance(names, (list, tuple)) else [names])
        if self._names is not None and len(self._names) != len(self._dtypes):
            raise InvalidArgumentError(f"queue: {len(self._dtypes)} dtypes but "
                                       f"{len(self._names)} names")
        if capacity is not None and not isinstance(capacity, (int, np.integer)):
            raise InvalidArgumentError(f"queue capacity must be an int, got {capacity!r}")
        self._shapes = _norm_shapes(shapes, len(self._dtypes),
                                    self._kind == "PaddingFIFOQueue", self._kind)
        g = get_default_graph()
        spec = {"kind": self._kind, "name": None, "container": container,
                "capacity": None if capacity is None else int(capacity),
                "dtypes": self._dtypes, "shapes": self._shapes, **(extra or {})}
        op = apply_op(self._op_type, [], {"queue": spec}, name=name or self._default_name,
                      graph=g)
        op.colocation = op.name
        spec["name"] = shared_name or op.name
        self._spec = spec
        self._op = op
        self._name = op.name

    # ---- identity ----------------------------------------------------------------------------
    @property
    def name(self) -> str:
        """The queue's name (its resource is shared by this name on its device)."""
        return self._name

    @property
    def queue_ref(self) -> Tensor:
        """The tensor naming the queue resource (the output of its queue op)."""
        return self._op.outputs[0]

    @property
    def dtypes(self):
        """The dtypes of an element's components."""
        return list(self._dtypes)

    @property
    def shapes(self):
        """The shapes of an element's components, or ``None`` if not given."""
        return None if self._shapes is None else [list(s) for s in self._shapes]

    @property
    def names(self):
        """The names of an element's components (elements are dicts), or ``None``."""
        return self._names

    @property
    def device(self) -> str:
        """The device the queue's op asked for (the queue lives in that task's process)."""
        return self._op.device

    def __repr__(self):
        return f"<tv.{self._kind} '{self._name}' dtypes={[d.name for d in self._dtypes]}>"

    # ---- building ops --------------------------------------------------------------------------
    def _apply(self, op_type, inputs, attrs, name):
        g = self._op.graph
        # No device scope: the op runs where the queue lives, whatever device block builds it
        # (its inputs are computed under that block and arrive through Send/Recv).
        with g.as_default(), g.device(None):
            return apply_op(op_type, inputs, {"queue": self._spec, **attrs}, name=name,
                            colocation=self._op.name)

    def _values(self, vals):
        if self._names is not None:
            if not isinstance(vals, dict) or set(vals) != set(self._names):
                raise InvalidArgumentError(f"queue '{self._name}' has names {self._names}: "
                                           f"enqueue a dict with exactly those keys")
            vals = [vals[k] for k in self._names]
        elif isinstance(vals, dict):
            raise InvalidArgumentError(f"queue '{self._name}' has no names; enqueue a list")
        if not isinstance(vals, (list, tuple)):
            vals = [vals]
        if len(vals) != len(self._dtypes):
            raise InvalidArgumentError(f"queue '{self._name}' has {len(self._dtypes)} "
                                       f"components, got {len(vals)} values")
        g = self._op.graph
        with g.as_default():
            return [convert_to_tensor(v, dtype=d) for v, d in zip(vals, self._dtypes)]

    def _outputs(self, op):
        outs = list(op.outputs)
        if self._names is not None:
            return dict(zip(self._names, outs))
        return outs[0] if len(outs) == 1 else outs

    def enqueue(self, vals, name=None):
        """Enqueue one element (waits while the queue is full)."""
        return self._apply("QueueEnqueueV2", self._values(vals), {"many": False},
                           name or f"{self._name}_enqueue")

    def enqueue_many(self, vals, name=None):
        """Enqueue the slices of ``vals`` along their first dimension, one element each."""
        return self._apply("QueueEnqueueV2", self._values(vals), {"many": True},
                           name or f"{self._name}_EnqueueMany")

    def dequeue(self, name=None):
        """One element (a tensor, a list of tensors, or a dict when the queue has names)."""
        return self._outputs(self._apply("QueueDequeueV2", [], {"mode": "one"},
                                         name or f"{self._name}_Dequeue"))

    def _n(self, n):
        return n if isinstance(n, Tensor) else convert_to_tensor(np.int32(n))

    def dequeue_many(self, n, name=None):
        """``n`` elements stacked along a new first dimension."""
        return self._outputs(self._apply("QueueDequeueV2", [self._n(n)], {"mode": "many"},
                                         name or f"{self._name}_DequeueMany"))

    def dequeue_up_to(self, n, name=None):
        """Like :meth:`dequeue_many`, but once the queue is closed returns what is left
        (at least one element)."""
        return self._outputs(self._apply("QueueDequeueV2", [self._n(n)], {"mode": "up_to"},
                                         name or f"{self._name}_DequeueUpTo"))

    def size(self, name=None) -> Tensor:
        """An int32 tensor: the number of elements in the queue."""
        return self._apply("QueueSizeV2", [], {}, name or f"{self._name}_Size").outputs[0]

    def close(self, cancel_pending_enqueues: bool = False, name=None):
        """An op that closes the queue: enqueues then fail; dequeues drain what is left, then
        raise ``OutOfRangeError``; ``cancel_pending_enqueues`` also cancels blocked enqueues."""
        return self._apply("QueueCloseV2", [], {"cancel_pending_enqueues":
                                                bool(cancel_pending_enqueues)},
                           name or f"{self._name}_Close")

    def is_closed(self, name=None) -> Tensor:
        """A boolean tensor: whether the queue is closed."""
        return self._apply("QueueIsClosedV2", [], {}, name or f"{self._name}_IsClosed"
                           ).outputs[0]


class FIFOQueue(QueueBase):
    """``tv.FIFOQueue(capacity, dtypes, shapes=None, names=None, shared_name=None, name=)``."""

    def __init__(self, capacity, dtypes, shapes=None, names=None, shared_name=None,
                 name="fifo_queue"):
        super().__init__(dtypes, shapes, names, shared_name, name, capacity)


class PaddingFIFOQueue(QueueBase):
    """A FIFOQueue whose shapes may have ``None`` dims; ``dequeue_many`` pads to the largest
    element of the batch."""

    _op_type, _kind, _default_name = "PaddingFIFOQueueV2", "PaddingFIFOQueue", \
        "padding_fifo_queue"

    def __init__(self, capacity, dtypes, shapes, names=None, shared_name=None,
                 name="padding_fifo_queue"):
        super().__init__(dtypes, shapes, names, shared_name, name, capacity)


class RandomShuffleQueue(QueueBase):
    """Dequeues elements in a random order, seeded like the random ops (``seed`` and the
    graph seed); keeps ``min_after_dequeue`` elements back until the queue is closed."""

    _op_type, _kind, _default_name = "RandomShuffleQueueV2", "RandomShuffleQueue", \
        "random_shuffle_queue"

    def __init__(self, capacity, min_after_dequeue, dtypes, shapes=None, names=None,
                 seed=None, shared_name=None, name="random_shuffle_queue"):
        from ..math.random_ops import get_seed
        if min_after_dequeue < 0 or min_after_dequeue >= capacity:
            raise InvalidArgumentError(
                f"RandomShuffleQueue: min_after_dequeue ({min_after_dequeue}) must be in "
                f"[0, capacity) (capacity {capacity})")
        s1, s2 = get_seed(seed)
        super().__init__(dtypes, shapes, names, shared_name, name, capacity,
                         extra={"min_after_dequeue": int(min_after_dequeue), "seed": s1,
                                "seed2": s2})


class PriorityQueue(QueueBase):
    """``tv.PriorityQueue(capacity, types, shapes)``: elements are ``(priority, *values)``
    with an int64 scalar priority first; the smallest priority is dequeued first."""

    _op_type, _kind, _default_name = "PriorityQueueV2", "PriorityQueue", "priority_queue"

    def __init__(self, capacity, types, shapes=None, names=None, shared_name=None,
                 name="priority_queue"):
        types = list(types) if isinstance(types, (list, tuple)) else [types]
        if shapes is not None:
            shapes = [()] + _norm_shapes_list(shapes, len(types))
        if names is not None:
            names = ["priority"] + list(names)
        super().__init__([_dt.int64] + types, shapes, names, shared_name, name, capacity)


def _norm_shapes_list(shapes, n):
    s = _norm_shapes(shapes, n, False, "PriorityQueue")
    return list(s)
