"""Input pipelines: queues of input splits, split readers, ``batch``/``shuffle_batch``. The
threads that fill queues (``QueueRunner``, ``Coordinator``, ``start_queue_runners``) are in
:mod:`tensorvm.train.queue_runner`; the lease state machine is :mod:`.split_leases`.

Design
------
``split_input_producer(urls, …)`` returns a :class:`SplitQueue` — a string queue whose elements
are input splits (``json.dumps(Split.to_dict())``). It needs no queue-runner thread: the queue
resource cuts the inputs into splits (:func:`tensorvm.storage.splits`) on first use, on its own
device, and loads the next epoch (reshuffled, seeded) whenever it runs empty; after
``num_epochs`` epochs it is closed, so readers end with ``OutOfRangeError``.

Leases. :func:`read_split` dequeues with a *lease*: the queue records which reader (worker
address, device, reader name — an identity op computed on the reader's device) holds the split.
A lease ends when it is acknowledged: explicitly with ``queue.ack(token)``, or implicitly by the
same reader's next ``read_split``. The decisions are a pure state machine,
:class:`tensorvm.train.split_leases.SplitLeases`: a lease goes back to the queue (at the front)
only when its holder's Dask worker has left the cluster — never on a timer, so a slow reader's
split is never read twice; a reader that finds the queue empty while others hold leases reads
an empty split (no records) instead of waiting for them — so any number of readers in one
``run`` reach the end; and the input ends (``OutOfRangeError``) only when nothing is queued or
leased, so the step that ends it hands out no records.

Exactly once: run ``ack`` after the step that read the split has returned its output, and keep
that output only if ``ack`` returns True (a lease that was requeued acks False). The commit point
is then the ack, on the queue's device, after the output is safe on the client::

    r = tv.train.read_split(q)                      # on the reader's device
    ack = q.ack(r.token)                            # on the queue's device
    lines, token = sess.run([r.records, r.token])
    if sess.run(ack, {r.token: token}): use(lines)

``batch``/``shuffle_batch`` (:mod:`tensorvm.train.batching`) follow TensorFlow: a queue on the
current device, an enqueue op run in a loop by a :class:`QueueRunner` thread (start them with
:func:`start_queue_runners`), and a ``dequeue_many`` (``dequeue_up_to`` with
``allow_smaller_final_batch``). When the input is exhausted the runner closes the batch queue.
Those readers ack implicitly.

>>> import fsspec, tensorvm as tv
>>> fsspec.filesystem("memory").pipe("/tvm-doc-input/a.txt", b"a b\\nc\\nd e f\\n")
>>> q = tv.train.split_input_producer("memory://tvm-doc-input/a.txt", num_epochs=1)
>>> r = tv.train.read_split(q)
>>> with tv.Session() as s:
...     s.run(r.records).tolist()
['a b', 'c', 'd e f']
"""
from __future__ import annotations

import collections
import json
import logging
import time

import numpy as np

from ..framework import dtypes as _dt
from .. import storage
from ..framework import errors
from ..framework.graph import Tensor
from ..framework.op_def_library import apply_op
from ..ops.state.data_flow_ops import (QueueBase, QueueState, _blocking, _handle_kernel,
                                       lookup_queue, register_queue_kind)
from ..framework.op_registry import register_op
from .batching import batch, shuffle_batch
from .split_leases import CHECK, EMPTY, END, TAKE, SplitLeases

logger = logging.getLogger("tensorvm")

__all__ = ["SplitQueue", "SplitRead", "split_input_producer", "string_input_producer",
           "read_split", "batch", "shuffle_batch"]

POLL_S = 0.5


# ---- the split queue -------------------------------------------------------------------------

def _live_workers() -> set | None:
    """Addresses of the cluster's workers, asked from inside a Dask worker; None elsewhere."""
    try:
        from distributed import get_worker
        from distributed.utils import sync
        w = get_worker()
    except (ImportError, ValueError):
        return None
    try:
        return set(sync(w.loop, w.scheduler.identity)["workers"])
    except Exception:  # noqa: BLE001 - scheduler unreachable: decide nothing this time
        return None


class SplitQueueState(QueueState):
    """A string queue that loads its epochs itself and leases what it hands to readers."""

    kind = "SplitQueue"

    def __init__(self, spec):
        super().__init__(spec)
        self.num_epochs = spec.get("num_epochs")
        self.epochs = 0
        self.book = SplitLeases(check_every=POLL_S)
        self.requeued = 0
        self._source: list[str] | None = None

    def _items_of_source(self) -> list[str]:
        if self._source is None:
            src = self.spec["source"]
            if "strings" in src:
                self._source = list(src["strings"])
            else:
                try:
                    parts = storage.splits(list(src["urls"]), format=src["format"],
                                           split_size=src["split_size"], **src["options"])
                except FileNotFoundError as e:
                    raise errors.NotFoundError(f"{self.kind} '{self.name}': {e}") from e
                except storage.DataLossError as e:
                    raise errors.DataLossError(f"{self.kind} '{self.name}': {e}") from e
                except ValueError as e:
                    raise errors.InvalidArgumentError(f"{self.kind} '{self.name}': {e}") from e
                self._source = [json.dumps(p.to_dict(), sort_keys=True) for p in parts]
        return self._source

    def _refill(self) -> None:
        if len(self) or self.closed:
            return
        items = list(self._items_of_source())
        if self.spec.get("shuffle") and items:
            s1, s2 = self.spec.get("seed"), self.spec.get("seed2")
            rng = np.random.default_rng(None if s1 is None else
                                        [s1 & 0xFFFFFFFF, s2 & 0xFFFFFFFF, self.epochs])
            items = [items[i] for i in rng.permutation(len(items))]
        for s in items:
            self._put((np.asarray(s, dtype=object),))
        self.epochs += 1
        if not items or (self.num_epochs is not None and self.epochs >= self.num_epochs):
            self.closed = True

    def _available(self) -> int:
        self._refill()
        return len(self)

    def lease(self, holder: str, waiter, now=time.monotonic) -> tuple[str, str]:
        """``(split, token)`` for ``holder``, or ``("", "")`` when the other readers hold the
        remaining splits (read nothing this time); ``OutOfRangeError`` at the end. The
        decisions are :class:`SplitLeases`'; this shell queues, asks and waits."""
        with self.cond:
            if self.book.end_holder(holder):  # the reader is back: done with its last split
                self.cond.notify_all()
            while True:
                decision = self.book.decide(self._available(),
                                            self.closed and not self._may_grow(), now())
                if decision == TAKE:
                    (elem,) = self._take(1)
                    return elem[0], self.book.grant(elem, holder, now())
                if decision == CHECK:
                    live = _live_workers()
                    if live is None:
                        self.book.check_failed(now())
                    else:
                        lost = self.book.workers_alive(live, now())
                        if lost:
                            self._restore(lost)
                            self.requeued = self.book.requeued
                            logger.info("%s '%s': %d split(s) of lost readers queued again",
                                        self.kind, self.name, len(lost))
                    continue
                if decision == EMPTY:
                    return "", ""
                if decision == END:
                    raise self._closed_error(1, 0)
                self._wait(waiter, POLL_S)

    def ack(self, token: str) -> bool:
        with self.cond:
            done = self.book.ack(token)
            if done:
                self.cond.notify_all()
            return done


register_queue_kind(SplitQueueState)


def _reader_identity_kernel(ctx, *, reader):
    try:
        from distributed import get_worker
        addr = get_worker().address
    except (ImportError, ValueError):
        addr = "in-process"
    return np.asarray(f"{addr}|{ctx.device}|{reader}", dtype=object)


def _lease_kernel(ctx, holder, *, queue):
    q = lookup_queue(ctx, queue)
    split, token = _blocking(lambda w: q.lease(str(np.asarray(holder).item()), w), ctx)
    return np.asarray(split, dtype=object), np.asarray(token, dtype=object)


def _ack_kernel(ctx, token, *, queue):
    return np.bool_(lookup_queue(ctx, queue).ack(str(np.asarray(token).item())))


def _string_scalars(n):
    return lambda inputs, attrs: [(_dt.string, ())] * n


register_op("SplitQueueV2", _string_scalars(1), _handle_kernel, stateful=True, needs_ctx=True,
            differentiable=False)
register_op("ReaderIdentity", _string_scalars(1), _reader_identity_kernel, stateful=True,
            needs_ctx=True, differentiable=False)
register_op("SplitQueueLease", _string_scalars(2), _lease_kernel, stateful=True,
            needs_ctx=True, differentiable=False)
register_op("SplitQueueAck", lambda i, a: [(_dt.bool_, ())], _ack_kernel, stateful=True,
            needs_ctx=True, differentiable=False)


class SplitQueue(QueueBase):
    """A queue of input splits (JSON strings) that fills itself epoch by epoch and leases what
    it hands out (see the module docstring). Build it with :func:`split_input_producer`."""

    _op_type, _kind, _default_name = "SplitQueueV2", "SplitQueue", "input_producer"

    def __init__(self, source: dict, num_epochs=None, shuffle=True, seed=None,
                 shared_name=None, name="input_producer"):
        from ..ops.math.random_ops import get_seed
        if num_epochs is not None and num_epochs < 1:
            raise errors.InvalidArgumentError(f"num_epochs must be >= 1 or None, got "
                                              f"{num_epochs}")
        s1, s2 = get_seed(seed) if shuffle else (None, None)
        if shuffle and s1 is None:
            s1, s2 = int(np.random.SeedSequence().entropy & 0x7FFFFFFF), 0
        self.format = source.get("format", "text")
        super().__init__(_dt.string, [[]], None, shared_name, name, None, extra={
            "source": source, "num_epochs": num_epochs, "shuffle": bool(shuffle),
            "seed": s1, "seed2": s2})

    def lease(self, reader_id=None, name=None):
        """``(split, token)``: dequeue a split leased to ``reader_id`` (default: an identity op
        on the current device), acking that reader's previous lease."""
        g = self._op.graph
        with g.as_default():
            if reader_id is None:
                ident = apply_op("ReaderIdentity", [], {"reader": ""}, name="reader_identity")
                ident.attrs["reader"] = ident.name  # one identity per lease op built here
                reader_id = ident.outputs[0]
            op = self._apply("SplitQueueLease", [reader_id], {}, name or f"{self._name}_Lease")
        return op.outputs[0], op.outputs[1]

    def ack(self, token, name=None) -> Tensor:
        """True if the lease ``token`` was live and is now done; False if it had been
        re-enqueued (its holder was presumed lost) or already acknowledged."""
        return self._apply("SplitQueueAck", [token], {}, name or f"{self._name}_Ack").outputs[0]


def split_input_producer(urls, format: str | None = "text",
                         split_size: int = storage.DEFAULT_SPLIT_SIZE, num_epochs=None,
                         shuffle: bool = True, seed=None, capacity: int = 32,
                         shared_name=None, name=None,
                         **format_options) -> SplitQueue:
    """A :class:`SplitQueue` of the splits of ``urls`` (a glob, folder, URL or list), like
    ``tf.train.string_input_producer`` for files. ``capacity`` is accepted for TF's signature;
    the queue holds one epoch of splits at a time. Place it (``tv.device``) on a device that
    outlives the readers — a parameter server."""
    source = {"urls": [urls] if isinstance(urls, str) else list(urls), "format": format,
              "split_size": int(split_size), "options": dict(format_options)}
    return SplitQueue(source, num_epochs, shuffle, seed, shared_name,
                      name or "input_producer")


def string_input_producer(string_tensor, num_epochs=None, shuffle=True, seed=None,
                          capacity=32, shared_name=None, name=None) -> SplitQueue:
    """TF's ``string_input_producer`` over a static list of strings (file names …)."""
    from ..ops.common import static_value
    producer = getattr(string_tensor, "_input_producer", None)
    if producer is not None:  # match_filenames_once: its glob is listed on the queue's device
        return producer(num_epochs, shuffle, seed, shared_name, name)
    values = static_value(string_tensor) if isinstance(string_tensor, Tensor) else \
        np.asarray(string_tensor, dtype=object)
    if values is None:
        raise errors.InvalidArgumentError("string_input_producer needs strings known when the "
                                          "graph is built")
    return SplitQueue({"strings": [str(v) for v in np.asarray(values).reshape(-1)]},
                      num_epochs, shuffle, seed, shared_name, name or "input_producer")


# ---- reading splits --------------------------------------------------------------------------

SplitRead = collections.namedtuple("SplitRead", ["records", "split", "token"])


def _to_numpy(col) -> np.ndarray:
    import pyarrow as pa
    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks()
    out = col.to_numpy(zero_copy_only=False)
    if out.dtype.kind in "OUS":
        out = np.asarray(out, dtype=object)
    return out


def _read_batches(s) -> list:
    try:
        return list(storage.read(s))
    except storage.DataLossError as e:
        raise errors.DataLossError(f"reading split {s.id}: {e}") from e
    except FileNotFoundError as e:
        raise errors.NotFoundError(f"reading split {s.id}: {e}") from e


def _read_split_kernel(split, *, out, columns):
    import pyarrow as pa
    text = str(np.asarray(split).item())
    batches = []  # an empty split: the other readers hold the rest, read nothing this time
    if text:
        try:
            s = storage.Split.from_dict(json.loads(text))
        except (ValueError, TypeError) as e:
            raise errors.InvalidArgumentError(f"not a serialized split: {e}") from e
        batches = _read_batches(s)
    if columns:
        table = pa.Table.from_batches(batches) if batches else None
        vals = []
        for (cname, dt) in columns:
            if table is None:
                vals.append(np.empty(0, dtype=object if dt.is_string else dt.np_dtype))
                continue
            col = _to_numpy(table.column(cname))
            vals.append(col if dt.is_string else col.astype(dt.np_dtype, copy=False))
        return tuple(vals) if len(vals) > 1 else vals[0]
    dt = out[0]
    if not batches:
        shape = (0,) + tuple(d or 0 for d in (out[1] or (None,))[1:])
        return np.empty(shape, dtype=object if dt.is_string else dt.np_dtype)
    if isinstance(batches[0], np.ndarray):
        return np.concatenate(batches).astype(dt.np_dtype, copy=False)
    return _to_numpy(pa.concat_arrays(batches))


def _read_split_shape(inputs, attrs):
    if attrs["columns"]:
        return [(dt, (None,)) for _, dt in attrs["columns"]]
    return [(attrs["out"][0], attrs["out"][1])]


register_op("ReadSplit", _read_split_shape, _read_split_kernel, stateful=True,
            differentiable=False)


def read_split(queue: SplitQueue, dtype=None, columns: dict | None = None, shape=None,
               name=None) -> SplitRead:
    """Lease one split from ``queue`` and read all its records on the current device.

    Returns ``SplitRead(records, split, token)``: ``records`` is a 1-D string tensor of lines
    (``text``), ``uint8 [n, record_bytes]`` (``fixed``), the rows of an ``.npy`` file (give
    ``dtype``), or, with ``columns={"col": tv.int64, …}``, a dict of 1-D column tensors
    (``jsonl``, ``csv``, ``parquet``, ``arrow``). ``split`` is the split's JSON and ``token`` the
    lease to pass to ``queue.ack``. One reader per thread: the reader's next read acks its
    previous lease.
    """
    g = queue._op.graph
    with g.as_default(), g.name_scope(name or "read_split") as scope:
        ident = apply_op("ReaderIdentity", [], {"reader": scope.rstrip("/")},
                         name="identity").outputs[0]
        split, token = queue.lease(ident, name="lease")
        cols = tuple((k, _dt.as_dtype(v)) for k, v in (columns or {}).items())
        if cols:
            op = apply_op("ReadSplit", [split], {"out": None, "columns": cols}, name="read")
            return SplitRead(dict(zip([c for c, _ in cols], op.outputs)), split, token)
        fmt = queue.format
        if dtype is None:
            if fmt in ("fixed",):
                dtype = _dt.uint8
            elif fmt in ("text", None):
                dtype = _dt.string
            else:
                raise errors.InvalidArgumentError(
                    f"read_split: give dtype= (or columns= for tabular formats) to read "
                    f"{fmt!r} splits")
        dtype = _dt.as_dtype(dtype)
        if shape is None:
            rb = queue._spec["source"].get("options", {}).get("record_bytes")
            shape = (None, rb) if fmt == "fixed" else (None,) if fmt in ("text", None) else None
        op = apply_op("ReadSplit", [split], {"out": (dtype, None if shape is None else
                                                     tuple(shape)), "columns": ()},
                      name="read")
        return SplitRead(op.outputs[0], split, token)
