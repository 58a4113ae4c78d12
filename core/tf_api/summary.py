"""``tv.summary``: TF 1.x's summary ops and ``FileWriter``, writing TensorBoard event files
with tensorboardX's event writer.

A summary op outputs a serialized ``Summary`` protocol buffer (a string scalar), as in TF, so
``merge`` is byte concatenation (a concatenation of serialized messages is their merge).
``FileWriter.add_summary`` takes such bytes (what ``sess.run`` returns) or a ``Summary``;
``add_graph`` writes a GraphDef of the op names, types, inputs and devices;
``add_run_metadata`` writes a traced run's per-task timings (``tv.RunOptions(trace_level=...)``)
as a RunMetadata's step stats (that needs the ``tensorboard`` package).

>>> import tensorvm as tv
>>> s = tv.summary.scalar("loss", tv.constant(0.5))
>>> with tv.Session() as sess: tv.Summary.FromString(sess.run(s)).value[0].simple_value
0.5
"""
from __future__ import annotations

import atexit
import logging
import time

import numpy as np

from ..framework import dtypes as _dt
from ..framework.errors import InvalidArgumentError
from ..framework.graph import get_default_graph
from ..framework.graph_keys import GraphKeys, get_collection
from ..framework.op_def_library import apply_op
from ..framework.op_registry import register_op
from ..framework.tensor_conversion import convert_to_tensor

logger = logging.getLogger("tensorvm")

__all__ = ["scalar", "histogram", "image", "text", "audio", "tensor_summary", "merge",
           "merge_all", "FileWriter", "FileWriterCache", "Summary", "Event", "SessionLog"]

class _LazyProto:
    """A protobuf class of tensorboardX, imported on first use (tensorboardX takes ~0.1 s to
    import): ``tv.Summary(value=[tv.Summary.Value(tag="x", simple_value=1.0)])`` works as in
    TF."""

    def __init__(self, module: str, name: str):
        self._module, self._name, self._cls = module, name, None

    def _get(self):
        if self._cls is None:
            import importlib
            try:
                self._cls = getattr(importlib.import_module(self._module), self._name)
            except ImportError:  # pragma: no cover - a declared dependency
                raise ImportError("tv.summary needs tensorboardX: pip install tensorboardX") \
                    from None
        return self._cls

    def __call__(self, *args, **kwargs):
        return self._get()(*args, **kwargs)

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self._get(), name)

    def __instancecheck__(self, obj):
        return isinstance(obj, self._get())

    def __repr__(self):
        return f"<tensorboardX proto {self._name}>"


Summary = _LazyProto("tensorboardX.proto.summary_pb2", "Summary")
Event = _LazyProto("tensorboardX.proto.event_pb2", "Event")
SessionLog = _LazyProto("tensorboardX.proto.event_pb2", "SessionLog")


def _tbx():
    import tensorboardX.summary as tbx_summary
    return tbx_summary


def _out(summary) -> np.ndarray:
    return np.array(summary.SerializeToString(), dtype=object)


# ---- kernels -------------------------------------------------------------------------------
def _scalar_kernel(x, tag):
    if np.ndim(x) != 0:
        raise InvalidArgumentError(f"tags and values not the same shape: [] != "
                                   f"{list(np.shape(x))} (tag '{tag}')")
    return _out(Summary(value=[Summary.Value(tag=tag, simple_value=float(x))]))


def _histogram_kernel(x, tag):
    vals = np.asarray(x, dtype=np.float64).reshape(-1)
    if not np.all(np.isfinite(vals)):
        raise InvalidArgumentError(f"Nan in summary histogram for: {tag}")
    if vals.size == 0:
        raise InvalidArgumentError(f"histogram summary '{tag}': the input has no element")
    return _out(_tbx().histogram(tag, vals, bins=_tf_bins()))


def _tf_bins() -> np.ndarray:
    """TensorFlow's histogram bucket limits: +-1e-12 growing by 10% to +-1e20, and 0."""
    pos, v = [], 1e-12
    while v < 1e20:
        pos.append(v)
        v *= 1.1
    return np.array([-x for x in pos[::-1]] + [0.0] + pos)


def _to_uint8(img: np.ndarray) -> np.ndarray:
    """TF's documented rule for float images: all >= 0 scales the largest to 255; otherwise 0
    goes to 127 and the values are scaled so that the smallest is 0 or the largest 255."""
    if img.dtype == np.uint8:
        return img
    f = img.astype(np.float64)
    lo, hi = float(f.min(initial=0.0)), float(f.max(initial=0.0))
    if lo >= 0:
        scale = 255.0 / hi if hi > 0 else 0.0
        out = f * scale
    else:
        scale = min(127.0 / -lo, 128.0 / hi if hi > 0 else np.inf)
        out = f * scale + 127.0
    return np.clip(np.floor(out + 0.5), 0, 255).astype(np.uint8)


def _png(img: np.ndarray):
    """A ``Summary.Image`` of an ``[h, w, c]`` uint8 array, PNG-encoded by Pillow."""
    import io

    from PIL import Image
    h, w, c = img.shape
    buf = io.BytesIO()
    Image.fromarray(img[..., 0] if c == 1 else img).save(buf, format="PNG")
    return Summary.Image(height=h, width=w, colorspace=c, encoded_image_string=buf.getvalue())


def _image_kernel(x, tag, max_outputs):
    if x.ndim != 4 or x.shape[-1] not in (1, 3, 4):
        raise InvalidArgumentError(f"image summary '{tag}': tensor must be 4-D with last "
                                   f"dim 1, 3, or 4, not {list(x.shape)}")
    n = min(int(max_outputs), x.shape[0])
    values = []
    for i in range(n):
        img = _to_uint8(np.asarray(x[i]))
        t = f"{tag}/image" if max_outputs == 1 else f"{tag}/image/{i}"
        values.append(Summary.Value(tag=t, image=_png(img)))
    return _out(Summary(value=values))


def _text_kernel(x, tag):
    from tensorboardX.proto.plugin_text_pb2 import TextPluginData
    from tensorboardX.proto.summary_pb2 import SummaryMetadata
    from tensorboardX.proto.tensor_pb2 import TensorProto
    from tensorboardX.proto.tensor_shape_pb2 import TensorShapeProto
    arr = np.asarray(x, dtype=object)
    meta = SummaryMetadata(plugin_data=SummaryMetadata.PluginData(
        plugin_name="text", content=TextPluginData(version=0).SerializeToString()))
    strings = [s if isinstance(s, bytes) else str(s).encode("utf-8") for s in arr.reshape(-1)]
    tensor = TensorProto(dtype="DT_STRING", string_val=strings, tensor_shape=TensorShapeProto(
        dim=[TensorShapeProto.Dim(size=int(d)) for d in arr.shape]))
    return _out(Summary(value=[Summary.Value(tag=tag, metadata=meta, tensor=tensor)]))


def _wav(clip: np.ndarray, sample_rate: int) -> bytes:
    """16-bit PCM WAV of a ``[frames, channels]`` float clip in [-1, 1] (clipped)."""
    import io
    import wave
    pcm = (np.clip(clip, -1.0, 1.0) * 32767.0).astype("<i2")
    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(pcm.shape[1])
        w.setsampwidth(2)
        w.setframerate(int(sample_rate))
        w.writeframes(pcm.tobytes())
    return buf.getvalue()


def _audio_kernel(x, rate, tag, max_outputs):
    a = np.asarray(x, dtype=np.float64)
    if a.ndim == 2:
        a = a[:, :, None]
    if a.ndim != 3:
        raise InvalidArgumentError(f"audio summary '{tag}': tensor must be 3-D [batch, frames, "
                                   f"channels] or 2-D [batch, frames], not {list(a.shape)}")
    sr = float(np.asarray(rate))
    if sr <= 0:
        raise InvalidArgumentError(f"audio summary '{tag}': sample_rate must be positive, got "
                                   f"{sr}")
    values = []
    for i in range(min(int(max_outputs), a.shape[0])):  # a few clips, each encoded whole
        t = f"{tag}/audio" if max_outputs == 1 else f"{tag}/audio/{i}"
        clip = Summary.Audio(sample_rate=sr, num_channels=a.shape[2], length_frames=a.shape[1],
                             encoded_audio_string=_wav(a[i], int(sr)),
                             content_type="audio/wav")
        values.append(Summary.Value(tag=t, audio=clip))
    return _out(Summary(value=values))


_TENSOR_DTYPES = {"float32": "DT_FLOAT", "float64": "DT_DOUBLE", "int32": "DT_INT32",
                  "int64": "DT_INT64", "uint8": "DT_UINT8", "int16": "DT_INT16",
                  "int8": "DT_INT8", "bool": "DT_BOOL", "float16": "DT_HALF",
                  "uint16": "DT_UINT16"}


def _tensor_kernel(x, tag, description):
    from tensorboardX.proto.summary_pb2 import SummaryMetadata
    from tensorboardX.proto.tensor_pb2 import TensorProto
    from tensorboardX.proto.tensor_shape_pb2 import TensorShapeProto
    a = np.asarray(x)
    shape = TensorShapeProto(dim=[TensorShapeProto.Dim(size=int(d)) for d in a.shape])
    if a.dtype == object:
        tensor = TensorProto(dtype="DT_STRING", tensor_shape=shape, string_val=[
            v if isinstance(v, bytes) else str(v).encode("utf-8") for v in a.reshape(-1)])
    else:  # TF's little-endian tensor_content
        tensor = TensorProto(dtype=_TENSOR_DTYPES[a.dtype.name], tensor_shape=shape,
                             tensor_content=np.ascontiguousarray(a).astype(
                                 a.dtype.newbyteorder("<"), copy=False).tobytes())
    meta = SummaryMetadata(summary_description=description) if description else None
    return _out(Summary(value=[Summary.Value(tag=tag, tensor=tensor, metadata=meta)]))


def _merge_kernel(*parts):
    return np.array(b"".join(bytes(np.asarray(p, dtype=object)[()]) for p in parts),
                    dtype=object)


def _summary_shape(check):
    def fn(inputs, attrs):
        check(inputs)
        return [(_dt.string, ())]
    return fn


def _numeric(what):
    def check(inputs):
        dt = inputs[0].dtype
        if not (dt.is_floating or dt.is_integer or dt.is_bool):
            raise InvalidArgumentError(f"{what} needs a real numeric tensor, got {dt.name}")
    return check


def _scalar_only(inputs):
    _numeric("ScalarSummary")(inputs)
    s = inputs[0]._shape
    if s is not None and len(s) != 0:
        raise InvalidArgumentError(f"ScalarSummary: tags and values not the same shape: [] != "
                                   f"{list(s)}")


def _image_check(inputs):
    _numeric("ImageSummary")(inputs)
    s = inputs[0]._shape
    if s is not None and (len(s) != 4 or s[-1] not in (None, 1, 3, 4)):
        raise InvalidArgumentError(f"ImageSummary: tensor must be 4-D [batch, height, width, "
                                   f"channels] with 1, 3 or 4 channels, got {list(s)}")


def _strings(inputs):
    if not all(t.dtype.is_string for t in inputs):
        raise InvalidArgumentError(f"expects string tensors, got "
                                   f"{[t.dtype.name for t in inputs]}")


def _audio_check(inputs):
    _numeric("AudioSummaryV2")(inputs[:1])
    if not inputs[1].dtype.is_floating or (inputs[1]._shape not in (None, ())):
        raise InvalidArgumentError("AudioSummaryV2: sample_rate must be a float scalar")


def _tensor_check(inputs):
    dt = inputs[0].dtype
    if not (dt.is_string or dt.np_dtype.name in _TENSOR_DTYPES):
        raise InvalidArgumentError(f"TensorSummaryV2: unsupported dtype {dt.name}")


register_op("AudioSummaryV2", _summary_shape(_audio_check), _audio_kernel, differentiable=False)
register_op("TensorSummaryV2", _summary_shape(_tensor_check), _tensor_kernel,
            differentiable=False)
for _op, _check, _k in (("ScalarSummary", _scalar_only, _scalar_kernel),
                        ("HistogramSummary", _numeric("HistogramSummary"), _histogram_kernel),
                        ("ImageSummary", _image_check, _image_kernel),
                        ("TextSummary", _strings, _text_kernel),
                        ("MergeSummary", _strings, _merge_kernel)):
    register_op(_op, _summary_shape(_check), _k, differentiable=False)


# ---- summary ops -------------------------------------------------------------------------------
def _summary_op(op_type, name, tensor, collections, family, attrs=None):
    _tbx()
    t = convert_to_tensor(tensor)
    a = {"tag": "", **(attrs or {})}
    g = t.graph
    with g.as_default():
        op = apply_op(op_type, [t], a, name=name)
    op.attrs["tag"] = f"{family}/{op.name}" if family else op.name
    for c in (collections if collections is not None else [GraphKeys.SUMMARIES]):
        g.add_to_collection(c, op.outputs[0])
    return op.outputs[0]


def scalar(name, tensor, collections=None, family=None):
    """A scalar summary (tag: the op's scoped name)."""
    return _summary_op("ScalarSummary", name, tensor, collections, family)


def histogram(name, values, collections=None, family=None):
    """A histogram of ``values`` (TensorFlow's bucket layout)."""
    return _summary_op("HistogramSummary", name, values, collections, family)


def image(name, tensor, max_outputs=3, collections=None, family=None):
    """Up to ``max_outputs`` PNG images from a ``[batch, height, width, 1|3|4]`` tensor (uint8
    as is; floats normalised per image as TF does)."""
    return _summary_op("ImageSummary", name, tensor, collections, family,
                       {"max_outputs": int(max_outputs)})


def text(name, tensor, collections=None):
    """A text summary of a string tensor (TensorBoard's text plugin)."""
    return _summary_op("TextSummary", name, tensor, collections, None)


def audio(name, tensor, sample_rate, max_outputs=3, collections=None, family=None):
    """Up to ``max_outputs`` WAV clips from a ``[batch, frames, channels]`` (or ``[batch,
    frames]``) float tensor in [-1, 1] at ``sample_rate`` Hz."""
    _tbx()
    t = convert_to_tensor(tensor)
    rate = convert_to_tensor(sample_rate, dtype=_dt_float32())
    g = t.graph
    with g.as_default():
        op = apply_op("AudioSummaryV2", [t, rate], {"tag": "", "max_outputs": int(max_outputs)},
                      name=name)
    op.attrs["tag"] = f"{family}/{op.name}" if family else op.name
    for c in (collections if collections is not None else [GraphKeys.SUMMARIES]):
        g.add_to_collection(c, op.outputs[0])
    return op.outputs[0]


def _dt_float32():
    from ..framework import dtypes
    return dtypes.float32


def tensor_summary(name, tensor, summary_description=None, collections=None,
                   summary_metadata=None, family=None, display_name=None):
    """The whole tensor as a summary value (TensorBoard's ``tensor`` field)."""
    desc = summary_description or (getattr(summary_metadata, "summary_description", None)
                                   if summary_metadata is not None else None)
    return _summary_op("TensorSummaryV2", name, tensor, collections, family,
                       {"description": desc or ""})


def merge(inputs, collections=None, name=None):
    """One summary holding the values of all ``inputs`` (serialized Summary strings)."""
    inputs = [convert_to_tensor(t) for t in inputs]
    if not inputs:
        raise InvalidArgumentError("merge: no summaries given")
    out = apply_op("MergeSummary", inputs, {}, name=name or "Merge/MergeSummary").outputs[0]
    for c in collections or []:
        out.graph.add_to_collection(c, out)
    return out


def merge_all(key=GraphKeys.SUMMARIES, scope=None, name=None):
    """``merge`` of every summary in collection ``key`` (None when there is none)."""
    summaries = get_collection(key, scope)
    return merge(summaries, name=name) if summaries else None


# ---- FileWriter ----------------------------------------------------------------------------
def _as_summary(summary):
    if isinstance(summary, np.ndarray):
        summary = summary[()]
    if isinstance(summary, (bytes, bytearray)):
        return Summary.FromString(bytes(summary))
    if hasattr(summary, "SerializeToString"):
        return Summary.FromString(summary.SerializeToString())
    raise InvalidArgumentError(f"add_summary expects a serialized Summary (what sess.run of a "
                               f"summary op returns) or a Summary, got {type(summary).__name__}")


def graph_def_bytes(graph) -> bytes:
    """A serialized GraphDef (names, op types, inputs, devices) that TensorBoard's graph
    dashboard draws."""
    from tensorboardX.proto.graph_pb2 import GraphDef
    from tensorboardX.proto.node_def_pb2 import NodeDef
    from tensorboardX.proto.versions_pb2 import VersionDef
    nodes = []
    for op in graph.get_operations():
        ins = [t.op.name if t.value_index == 0 else f"{t.op.name}:{t.value_index}"
               for t in op.inputs] + [f"^{c.name}" for c in op.control_inputs]
        nodes.append(NodeDef(name=op.name, op=op.type, input=ins, device=op.device or ""))
    return GraphDef(node=nodes, versions=VersionDef(producer=22)).SerializeToString()


def _run_metadata_bytes(run_metadata) -> bytes:
    if hasattr(run_metadata, "SerializeToString"):
        return run_metadata.SerializeToString()
    try:
        from tensorboard.compat.proto.config_pb2 import RunMetadata
        from tensorboard.compat.proto.step_stats_pb2 import (
            DeviceStepStats,
            NodeExecStats,
            StepStats,
        )
    except ImportError:
        raise ImportError("FileWriter.add_run_metadata needs the tensorboard package "
                          "(pip install tensorboard)") from None
    by_dev: dict[str, list] = {}
    for rec in getattr(run_metadata, "step_stats", []):
        start, end = float(rec["start"]), float(rec["end"])
        by_dev.setdefault(rec["device"], []).extend(
            NodeExecStats(node_name=name, all_start_micros=int(start * 1e6),
                          op_start_rel_micros=0, op_end_rel_micros=int((end - start) * 1e6),
                          all_end_rel_micros=int((end - start) * 1e6))
            for name in rec.get("ops", [rec.get("task", "")]))
    stats = StepStats(dev_stats=[DeviceStepStats(device=d, node_stats=n)
                                 for d, n in by_dev.items()])
    return RunMetadata(step_stats=stats).SerializeToString()


# Held strongly until closed: a writer the program dropped unclosed (a local of its training
# function, as in TF's fully_connected_feed.py) still has queued events and a live event
# thread, and must be closed at exit like the rest (TF's writers are flushed at exit too).
_OPEN_WRITERS: set[FileWriter] = set()
_AT_EXIT: list = []


def _watch_at_exit(writer) -> None:
    """Close ``writer`` at exit if the program has not. The hook is registered after the
    first writer made its multiprocessing queue, so that it runs before multiprocessing's
    own exit hook closes that queue under the writer's thread (atexit runs last-in first)."""
    _OPEN_WRITERS.add(writer)
    if not _AT_EXIT:
        _AT_EXIT.append(atexit.register(_close_open_writers))


def _close_open_writers() -> None:
    """Flush and close the writers a program left open (TF 1.x's writers flush at exit; the
    event thread would otherwise die at interpreter shutdown with pending events)."""
    for w in list(_OPEN_WRITERS):
        try:
            w.close()
        except Exception:  # noqa: BLE001  (one broken writer must not keep the others open)
            logger.warning("FileWriter %s: closing at exit failed", w.get_logdir(),
                           exc_info=True)


class FileWriter:
    """Writes events (summaries, the graph, run metadata) to an event file in ``logdir`` that
    TensorBoard reads; ``graph`` (or ``graph_def``) is written at once. A writer left open is
    flushed and closed when the program exits."""

    def __init__(self, logdir, graph=None, max_queue=10, flush_secs=120, graph_def=None,
                 filename_suffix=None, session=None):
        _tbx()
        from tensorboardX.event_file_writer import EventFileWriter
        self._logdir = str(logdir)
        self._writer = EventFileWriter(self._logdir, max_queue, flush_secs,
                                       filename_suffix or "")
        self._closed = False
        _watch_at_exit(self)
        if graph is not None or graph_def is not None:
            self.add_graph(graph, graph_def=graph_def)

    def get_logdir(self) -> str:
        return self._logdir

    def add_event(self, event) -> None:
        if self._closed:
            raise InvalidArgumentError("FileWriter: the writer is closed (call reopen())")
        self._writer.add_event(event)

    def add_summary(self, summary, global_step=None) -> None:
        """Write a summary (bytes from ``sess.run`` or a ``Summary``) at ``global_step``."""
        ev = Event(wall_time=time.time(), summary=_as_summary(summary))
        if global_step is not None:
            ev.step = int(global_step)
        self.add_event(ev)

    def add_graph(self, graph, global_step=None, graph_def=None) -> None:
        if graph_def is not None:
            data = graph_def if isinstance(graph_def, bytes) else graph_def.SerializeToString()
        else:
            data = graph_def_bytes(graph if graph is not None else get_default_graph())
        ev = Event(wall_time=time.time(), graph_def=data)
        if global_step is not None:
            ev.step = int(global_step)
        self.add_event(ev)

    def add_run_metadata(self, run_metadata, tag, global_step=None) -> None:
        """Write a traced run's timings under ``tag`` (TensorBoard shows them per step)."""
        from tensorboardX.proto.event_pb2 import TaggedRunMetadata
        ev = Event(wall_time=time.time(), tagged_run_metadata=TaggedRunMetadata(
            tag=str(tag), run_metadata=_run_metadata_bytes(run_metadata)))
        if global_step is not None:
            ev.step = int(global_step)
        self.add_event(ev)

    def add_session_log(self, session_log, global_step=None) -> None:
        ev = Event(wall_time=time.time(), session_log=session_log)
        if global_step is not None:
            ev.step = int(global_step)
        self.add_event(ev)

    def flush(self) -> None:
        self._writer.flush()

    def close(self) -> None:
        if not self._closed:
            self._writer.close()
            self._closed = True
            _OPEN_WRITERS.discard(self)

    def reopen(self) -> None:
        if self._closed:
            self._writer.reopen()
            self._closed = False
            _watch_at_exit(self)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        return f"<tv.summary.FileWriter {self._logdir!r}>"


class FileWriterCache:
    """One :class:`FileWriter` per log directory, shared by whoever asks (TF 1.x's
    ``tf.summary.FileWriterCache``, which Estimators and hooks use)."""

    _writers: dict = {}
    _lock = None

    @classmethod
    def get(cls, logdir) -> "FileWriter":
        """The writer of ``logdir``, made on first use."""
        import threading
        if cls._lock is None:
            cls._lock = threading.Lock()
        with cls._lock:
            w = cls._writers.get(str(logdir))
            if w is None:
                w = cls._writers[str(logdir)] = FileWriter(str(logdir))
            return w

    @classmethod
    def clear(cls) -> None:
        """Close every cached writer and forget them."""
        for w in list(cls._writers.values()):
            w.close()
        cls._writers.clear()
