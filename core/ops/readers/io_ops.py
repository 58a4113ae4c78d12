"""TF 1.x readers: ``tv.TextLineReader``, ``tv.FixedLengthRecordReader``,
``tv.WholeFileReader``, ``tv.TFRecordReader`` — and ``tv.python_io`` (TFRecord files).

Design
------
A reader is a resource, like a queue: a :class:`ReaderState` in the ResourceMgr of the device
that runs its ops, keyed by the reader's (shared) name. ``reader.read(queue)`` builds a
``ReaderReadV2`` op *colocated with the queue* (TF colocates a reader's read with the queue it
takes work from, through their reference inputs), so the reader and its queue share a device.
The read takes the reader's lock; while the current work unit has records left it returns the
next one, else it takes the next work unit from the queue and loads it.

Work units are file names (``string_input_producer``, any string queue), or serialized
:class:`tensorvm.storage.Split` s (``split_input_producer``; ``TextLineReader`` reads a text
split's byte range, ``TFRecordReader`` a ``tfrecord`` split). From a split queue the reader
*leases* its work unit under its own identity (worker, device, reader name); the lease ends when
the same reader takes its next unit, i.e. after every record of the previous one has been
handed out. So many threads (or many ``read`` ops of one reader) read every record exactly once,
and the input ends (``OutOfRangeError``) only when every unit is done — see
:mod:`tensorvm.train.input`. A plain queue is simply dequeued.

Keys are TF's: ``file:line`` (1-based, header lines counted) for text, ``file:index`` for fixed
records, ``file`` for whole files, ``file:offset`` for TFRecords; for a split work unit the file
part is the split's id. Text lines are ``str`` (tensorvm's strings); the binary readers return
``bytes``. A corrupt TFRecord (bad CRC, truncated) or a file that is not a whole number of fixed
records is ``tv.errors.DataLossError`` naming the file; a missing file is ``NotFoundError``.

>>> import fsspec, tensorvm as tv
>>> fsspec.filesystem("memory").pipe("/tvm-doc-reader/a.csv", b"x,y\\n1,2\\n3,4\\n")
>>> q = tv.train.string_input_producer(["memory://tvm-doc-reader/a.csv"], num_epochs=1)
>>> key, line = tv.TextLineReader(skip_header_lines=1).read(q)
>>> with tv.Session() as s:
...     [s.run([key, line]) for _ in range(2)]
[['memory://tvm-doc-reader/a.csv:2', '1,2'], ['memory://tvm-doc-reader/a.csv:3', '3,4']]
"""
from __future__ import annotations

import json
import threading
import types

import numpy as np

from ...framework import dtypes as _dt
from ... import storage
from ...framework import errors
from ...framework.graph import get_default_graph
from ...vm.queues import Waiter
from ...framework.op_registry import register_op
from ...storage import tfrecord as _tfr
from ..state.data_flow_ops import QueueBase, _blocking, lookup_queue

__all__ = [
    "FixedLengthRecordReader",
    "IdentityReader",
    "ReaderBase",
    "TFRecordCompressionType",
    "TFRecordOptions",
    "TFRecordReader",
    "TextLineReader",
    "WholeFileReader",
    "python_io",
]

LEASE_POLL_S = 0.2


# ---- the resource ----------------------------------------------------------------------------

def _storage_errors(what, fn, *args):
    try:
        return fn(*args)
    except storage.DataLossError as e:
        raise errors.DataLossError(f"{what}: {e}") from e
    except FileNotFoundError as e:
        raise errors.NotFoundError(f"{what}: {e}") from e


def _read_file(url: str) -> bytes:
    from ...storage.fsio import read_bytes, to_fs
    fs, path = to_fs(url)
    return read_bytes(fs, path)


def _as_split(item: str):
    if not item.startswith("{"):
        return None
    try:
        return storage.Split.from_dict(json.loads(item))
    except (ValueError, TypeError):
        return None


def _text_records(attrs, item):
    split = _as_split(item)
    skip = int(attrs.get("skip_header_lines") or 0)
    if split is not None:
        if split.format != "text":
            raise errors.InvalidArgumentError(f"TextLineReader cannot read a {split.format!r} "
                                              f"split ({split.id})")
        lines = [x for b in storage.read(split) for x in b.to_pylist()]
        first = 0 if split.start == 0 else None
        base = split.id
    else:
        data = _read_file(item)
        text = data.decode("utf-8", "surrogateescape")
        lines = text.split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        lines = [x.removesuffix("\r") for x in lines]
        first, base = 0, item
    out = []
    for i, line in enumerate(lines):
        if first is not None and i < skip:
            continue
        out.append((f"{base}:{i + 1}", line))
    return out


def _fixed_records(attrs, item):
    if _as_split(item) is not None:
        raise errors.InvalidArgumentError("FixedLengthRecordReader reads files: give it a "
                                          "queue of file names (string_input_producer)")
    rb, head, foot = attrs["record_bytes"], attrs["header_bytes"], attrs["footer_bytes"]
    hop = attrs["hop_bytes"] or rb
    data = _read_file(item)
    body = data[head:len(data) - foot if foot else len(data)]
    if len(data) < head + foot or (hop == rb and len(body) % rb):
        raise storage.DataLossError(
            f"{len(data)} bytes are not header_bytes {head} + a whole number of "
            f"{rb}-byte records + footer_bytes {foot}", item)
    return [(f"{item}:{i}", body[lo:lo + rb])
            for i, lo in enumerate(range(0, len(body) - rb + 1, hop))]


def _whole_records(attrs, item):
    if _as_split(item) is not None:
        raise errors.InvalidArgumentError("WholeFileReader reads files: give it a queue of "
                                          "file names (string_input_producer)")
    return [(item, _read_file(item))]


def _tfrecord_records(attrs, item):
    split = _as_split(item)
    url = item if split is None else split.url
    comp = attrs.get("compression_type") or (split.options.compression_type
                                             if split is not None else None)
    return [(f"{url}:{off}", rec) for off, rec in _tfr.iter_tfrecords(url, comp)]


def _identity_records(attrs, item):
    return [(item, item)]


_LOADERS = {"TextLineReader": _text_records, "FixedLengthRecordReader": _fixed_records,
            "WholeFileReader": _whole_records, "TFRecordReader": _tfrecord_records,
            "IdentityReader": _identity_records}


class ReaderState:
    """The records of a reader's current work unit, its position and counters."""

    kind = "Reader"
    LOST_WITH_WORKER = True

    def __init__(self, spec: dict):
        self.spec = spec
        self.lock = threading.Lock()
        self.records: list = []
        self.pos = 0
        self.produced = 0
        self.completed = 0

    def reset(self) -> None:
        with self.lock:
            self.records, self.pos, self.produced, self.completed = [], 0, 0, 0

    def __repr__(self):
        return (f"<{self.spec['kind']} '{self.spec['name']}' produced={self.produced} "
                f"completed={self.completed}>")


def _reader(ctx, spec) -> ReaderState:
    return ctx.resources.lookup_or_create(spec.get("container", ""), "reader:" + spec["name"],
                                          lambda: ReaderState(spec))


def _holder(ctx, spec) -> str:
    try:
        from distributed import get_worker
        addr = get_worker().address
    except (ImportError, ValueError):
        addr = "in-process"
    return f"{addr}|{ctx.device}|reader:{spec['name']}"


def _wait_for_change(q, w: Waiter) -> None:
    with q.cond:
        w.wait(q.cond, LEASE_POLL_S)


def _next_work(ctx, q, holder: str) -> str:
    """The next work unit: leased from a split queue (exactly once), else dequeued."""
    if hasattr(q, "lease"):
        while True:
            item, _token = _blocking(lambda w: q.lease(holder, w), ctx)
            if item:
                return str(item)
            # the other readers hold the remaining units: wait for one of them to finish
            _blocking(lambda w: _wait_for_change(q, w), ctx)
    (elem,) = _blocking(lambda w: q.dequeue(1, False, w), ctx)
    value = np.asarray(elem[0]).item()
    return value.decode() if isinstance(value, bytes) else str(value)


def _read(ctx, spec, queue, count: int | None):
    r, q = _reader(ctx, spec), lookup_queue(ctx, queue)
    holder = _holder(ctx, spec)
    want = 1 if count is None else count
    keys, values = [], []
    with r.lock:
        while len(keys) < want:
            if r.pos < len(r.records):
                take = r.records[r.pos:r.pos + want - len(keys)]
                r.pos += len(take)
                r.produced += len(take)
                keys += [k for k, _ in take]
                values += [v for _, v in take]
                continue
            try:
                item = _next_work(ctx, q, holder)
            except errors.OutOfRangeError:
                if count is not None and keys:
                    break
                raise
            what = f"{spec['kind']} '{spec['name']}' reading {item[:200]}"
            r.records = _storage_errors(what, _LOADERS[spec["kind"]], spec, item)
            r.pos = 0
            r.completed += 1
    return keys, values


def _obj(xs) -> np.ndarray:
    out = np.empty(len(xs), dtype=object)
    out[:] = xs
    return out


def _read_kernel(ctx, *, reader, queue):
    keys, values = _read(ctx, reader, queue, None)
    return np.asarray(keys[0], dtype=object), _scalar(values[0])


def _scalar(v) -> np.ndarray:
    out = np.empty((), dtype=object)
    out[()] = v
    return out


def _read_up_to_kernel(ctx, n, *, reader, queue):
    count = int(np.asarray(n))
    if count < 1:
        raise errors.InvalidArgumentError(f"read_up_to: num_records must be >= 1, got {count}")
    keys, values = _read(ctx, reader, queue, count)
    return _obj(keys), _obj(values)


def _counter_kernel(ctx, *, reader, which, queue=None):
    r = _reader(ctx, reader)
    return np.int64(r.produced if which == "produced" else r.completed)


def _reset_kernel(ctx, *, reader, queue=None):
    _reader(ctx, reader).reset()
    return ()


register_op("ReaderReadV2", lambda i, a: [(_dt.string, ()), (_dt.string, ())], _read_kernel,
            stateful=True, needs_ctx=True, differentiable=False)
register_op("ReaderReadUpToV2", lambda i, a: [(_dt.string, (None,)), (_dt.string, (None,))],
            _read_up_to_kernel, stateful=True, needs_ctx=True, differentiable=False)
register_op("ReaderCounterV2", lambda i, a: [(_dt.int64, ())], _counter_kernel,
            stateful=True, needs_ctx=True, differentiable=False)
register_op("ReaderResetV2", lambda i, a: [], _reset_kernel, stateful=True, needs_ctx=True,
            differentiable=False)


# ---- the Python classes ----------------------------------------------------------------------

class ReaderBase:
    """A reader of records from the work units (file names or splits) of a queue."""

    _kind = "ReaderBase"

    def __init__(self, attrs: dict | None = None, name=None, shared_name=None,
                 container: str = ""):
        g = get_default_graph()
        self._graph = g
        self._name = g.unique_name(name or self._kind)
        self._spec = {"kind": self._kind, "name": shared_name or self._name,
                      "container": container, **(attrs or {})}
        self._queue = None

    @property
    def name(self) -> str:
        """The reader's name (its state is a resource shared by this name on its device)."""
        return self._name

    @property
    def supports_serialize(self) -> bool:
        """``False``: a reader's state cannot be saved and restored (TF's ``serialize_state``)."""
        return False

    def _queue_of(self, queue) -> QueueBase:
        if not isinstance(queue, QueueBase):
            raise errors.InvalidArgumentError(
                f"{self._kind}.read: queue must be a tv queue (string_input_producer, "
                f"split_input_producer, FIFOQueue of strings), got {queue!r}")
        if queue.dtypes[0] != _dt.string or len(queue.dtypes) != 1:
            raise errors.InvalidArgumentError(
                f"{self._kind}.read: the queue must hold strings (file names), it holds "
                f"{[d.name for d in queue.dtypes]}")
        return queue

    def _op(self, op_type, queue, inputs, name, **attrs):
        return queue._apply(op_type, inputs, {"reader": self._spec, **attrs},
                            name or f"{self._name}_{op_type[:-2]}")

    def read(self, queue, name=None):
        """``(key, value)``: the next record, taking a new work unit from ``queue`` when the
        current one is done; ``OutOfRangeError`` once the queue is closed and empty."""
        q = self._queue_of(queue)
        self._queue = q
        op = self._op("ReaderReadV2", q, [], name)
        return op.outputs[0], op.outputs[1]

    def read_up_to(self, queue, num_records, name=None):
        """Up to ``num_records`` ``(keys, values)``; fewer only at the end of the input."""
        from ...framework.tensor_conversion import convert_to_tensor
        q = self._queue_of(queue)
        self._queue = q
        n = convert_to_tensor(np.int64(num_records)) if isinstance(num_records, int) \
            else num_records
        op = self._op("ReaderReadUpToV2", q, [n], name)
        return op.outputs[0], op.outputs[1]

    def _local(self, op_type, name, **attrs):
        if self._queue is None:
            raise errors.FailedPreconditionError(
                f"{self._kind} '{self._name}': call read(queue) first (the reader lives on "
                "its queue's device)")
        return self._op(op_type, self._queue, [], name, **attrs)

    def num_records_produced(self, name=None):
        """An int64 tensor: the records this reader has produced."""
        return self._local("ReaderCounterV2", name, which="produced").outputs[0]

    def num_work_units_completed(self, name=None):
        """An int64 tensor: the work units (files or splits) this reader has finished."""
        return self._local("ReaderCounterV2", name, which="completed").outputs[0]

    def reset(self, name=None):
        """An op that resets the reader: no current work unit, counters at zero."""
        return self._local("ReaderResetV2", name)

    def __repr__(self):
        return f"<tv.{self._kind} '{self._name}'>"


class TextLineReader(ReaderBase):
    """Lines of text files (without the line terminator); ``skip_header_lines`` of every
    file are skipped. Key: ``file:line``."""

    _kind = "TextLineReader"

    def __init__(self, skip_header_lines=None, name=None):
        super().__init__({"skip_header_lines": int(skip_header_lines or 0)}, name)


class FixedLengthRecordReader(ReaderBase):
    """Records of ``record_bytes`` bytes after ``header_bytes`` and before ``footer_bytes``
    (``hop_bytes``: the stride, default ``record_bytes``). Key: ``file:index``."""

    _kind = "FixedLengthRecordReader"

    def __init__(self, record_bytes, header_bytes=None, footer_bytes=None, hop_bytes=None,
                 name=None, encoding=None):
        if not isinstance(record_bytes, (int, np.integer)) or record_bytes < 1:
            raise errors.InvalidArgumentError(f"FixedLengthRecordReader: record_bytes must be "
                                              f"a positive int, got {record_bytes!r}")
        if encoding:
            raise errors.InvalidArgumentError("FixedLengthRecordReader: compressed files "
                                              "(encoding=) are not supported")
        super().__init__({"record_bytes": int(record_bytes),
                          "header_bytes": int(header_bytes or 0),
                          "footer_bytes": int(footer_bytes or 0),
                          "hop_bytes": int(hop_bytes or 0)}, name)


class WholeFileReader(ReaderBase):
    """Each file as one record: key the file name, value its bytes."""

    _kind = "WholeFileReader"

    def __init__(self, name=None):
        super().__init__({}, name)


class IdentityReader(ReaderBase):
    """The work unit itself as key and value."""

    _kind = "IdentityReader"

    def __init__(self, name=None):
        super().__init__({}, name)


class TFRecordCompressionType:
    """TF's compression codes for TFRecord files: ``NONE``, ``ZLIB``, ``GZIP`` (for
    ``TFRecordOptions`` and the TFRecord readers)."""

    NONE, ZLIB, GZIP = 0, 1, 2


_COMPRESSION_NAMES = {0: "", 1: "ZLIB", 2: "GZIP", None: "", "": ""}


class TFRecordOptions:
    """``TFRecordOptions(compression_type)``: ``"GZIP"``, ``"ZLIB"``, ``""`` or a
    :class:`TFRecordCompressionType` value."""

    def __init__(self, compression_type=None):
        name = _COMPRESSION_NAMES.get(compression_type, compression_type)
        if str(name).upper() not in ("", "GZIP", "ZLIB", "NONE"):
            raise errors.InvalidArgumentError(f"unknown TFRecord compression type "
                                              f"{compression_type!r}")
        self.compression_type = "" if str(name).upper() == "NONE" else str(name).upper()

    @classmethod
    def get_compression_type_string(cls, options) -> str:
        """The compression name of ``options`` (``""``, ``"ZLIB"`` or ``"GZIP"``); ``""`` for
        ``None``."""
        return "" if options is None else options.compression_type


class TFRecordReader(ReaderBase):
    """Records of TFRecord files (CRCs verified). Key: ``file:offset``."""

    _kind = "TFRecordReader"

    def __init__(self, name=None, options: TFRecordOptions | None = None):
        super().__init__({"compression_type":
                          TFRecordOptions.get_compression_type_string(options)}, name)


# ---- tv.python_io ----------------------------------------------------------------------------

class TFRecordWriter(_tfr.TFRecordWriter):
    """``tf.python_io.TFRecordWriter(path, options=None)``."""

    def __init__(self, path, options: TFRecordOptions | str | None = None):
        comp = options if isinstance(options, str) or options is None else \
            options.compression_type
        try:
            super().__init__(str(path), comp)
        except ValueError as e:
            raise errors.InvalidArgumentError(str(e)) from None

    def write(self, record) -> None:
        super().write(record.SerializeToString() if hasattr(record, "SerializeToString")
                      else record)


def tf_record_iterator(path, options: TFRecordOptions | str | None = None):
    """The record payloads of a TFRecord file (``tv.errors.DataLossError`` on corruption)."""
    comp = options if isinstance(options, str) or options is None else \
        options.compression_type
    try:
        for _, rec in _tfr.iter_tfrecords(str(path), comp):
            yield rec
    except storage.DataLossError as e:
        raise errors.DataLossError(str(e)) from e
    except FileNotFoundError as e:
        raise errors.NotFoundError(str(e)) from e


python_io = types.SimpleNamespace(
    TFRecordWriter=TFRecordWriter, tf_record_iterator=tf_record_iterator,
    TFRecordOptions=TFRecordOptions, TFRecordCompressionType=TFRecordCompressionType)
python_io.__doc__ = "``tf.python_io``: TFRecordWriter, tf_record_iterator, TFRecordOptions."
