"""Event files of an Estimator's ``model_dir``: the training summaries and the
``eval[_name]`` folders' metrics, on any fsspec URL. A local folder gets
``tv.summary.FileWriter`` (TensorBoard sees events while training runs); other URLs
(``memory://``, ``s3://``) get :class:`EventFileWriter`, which publishes the file whole
when closed.

>>> import tensorvm as tv
>>> from tensorvm.estimator.summary_io import read_scalars, write_dict_to_summary
>>> write_dict_to_summary("memory://tvm-doc-est/eval", {"loss": 0.5, "global_step": 7}, 7)
>>> read_scalars("memory://tvm-doc-est/eval")
[(7, 'loss', 0.5)]
"""
from __future__ import annotations

import itertools
import logging
import os
import socket
import time

import numpy as np

_log = logging.getLogger("tensorvm")
_SERIAL = itertools.count()

__all__ = ["EventFileWriter", "read_scalars", "summary_writer", "write_dict_to_summary"]


def _local_path(url: str) -> str | None:
    """The local path of ``url``, or ``None`` when it is not on the local filesystem."""
    if "://" not in url:
        return url
    protocol, _, rest = url.partition("://")
    return rest if protocol in ("file", "local") else None


class EventFileWriter:
    """A TensorBoard event file on an fsspec URL (``add_summary``, ``add_event``,
    ``flush``, ``close``): the records are kept and written as one file by ``close``."""

    def __init__(self, logdir: str):
        from ..storage.tfrecord import TFRecordWriter
        from ..tf_api.summary import Event
        self._logdir = logdir.rstrip("/")
        name = (f"events.out.tfevents.{int(time.time()):010d}.{socket.gethostname()}."
                f"{os.getpid()}.{next(_SERIAL):06d}")  # two writers in one second: 2 files
        self._out = TFRecordWriter(f"{self._logdir}/{name}")
        self.add_event(Event(wall_time=time.time(), file_version="brain.Event:2"))

    def get_logdir(self) -> str:
        """The folder the events go to."""
        return self._logdir

    def add_event(self, event) -> None:
        """Append one ``Event``."""
        self._out.write(event.SerializeToString())

    def add_summary(self, summary, global_step=None) -> None:
        """Append a ``Summary`` (or its serialized bytes) at ``global_step``."""
        from ..tf_api.summary import Event, Summary
        if isinstance(summary, np.ndarray):  # a string scalar fetched as an object array
            summary = summary.item()
        if isinstance(summary, bytes):  # never through a NumPy 'S' array: it drops \0 bytes
            summary = Summary.FromString(summary)
        ev = Event(wall_time=time.time(), summary=summary)
        if global_step is not None:
            ev.step = int(global_step)
        self.add_event(ev)

    def flush(self) -> None:
        """Records are published by :meth:`close`."""

    def close(self) -> None:
        """Write the file (once)."""
        self._out.close()


def summary_writer(logdir: str):
    """A writer for event files in ``logdir``: ``tv.summary.FileWriter`` for a local folder,
    :class:`EventFileWriter` for any other URL."""
    local = _local_path(logdir)
    if local is not None:
        from ..tf_api.summary import FileWriter
        return FileWriter(local)
    return EventFileWriter(logdir)


def write_dict_to_summary(output_dir: str, dictionary: dict, current_global_step: int) -> None:
    """Write the numbers of ``dictionary`` (not ``global_step``) as scalar summaries at
    ``current_global_step`` (TF's ``_write_dict_to_summary``); other values are skipped with
    a log line."""
    from ..tf_api.summary import Summary
    _log.info("Saving dict for global step %d: %s", current_global_step,
              ", ".join(f"{k} = {v}" for k, v in sorted(dictionary.items())
                        if not isinstance(v, bytes)))
    proto = Summary()
    for key, value in dictionary.items():
        if value is None or key == "global_step":
            continue
        if isinstance(value, (float, int, np.floating, np.integer)) and \
                not isinstance(value, bool):
            proto.value.add(tag=key, simple_value=float(value))
        elif isinstance(value, bytes):
            try:
                inner = Summary.FromString(value)
            except Exception:  # noqa: BLE001 - protobuf's DecodeError
                _log.warning("Skipping summary for %s, cannot parse string to Summary.", key)
                continue
            for i, v in enumerate(inner.value):
                v.tag = f"{key}/{i}"
            proto.value.extend(inner.value)
        else:
            _log.warning("Skipping summary for %s, must be a float, np.float32, np.int64, "
                         "np.int32 or int or a serialized string of Summary.", key)
    writer = summary_writer(output_dir)
    try:
        writer.add_summary(proto, current_global_step)
    finally:
        writer.close()


def read_scalars(logdir: str) -> list[tuple[int, str, float]]:
    """``[(step, tag, value)]`` of the scalar summaries in every event file of ``logdir``,
    in file and record order (for tests and tools)."""
    from ..storage.fsio import to_fs
    from ..storage.tfrecord import iter_records
    from ..tf_api.summary import Event
    fs, path = to_fs(logdir)
    out = []
    for f in sorted(fs.glob(f"{path.rstrip('/')}/events.out.tfevents.*")):
        with fs.open(f, "rb") as stream:
            for _, rec in iter_records(stream, f):
                ev = Event.FromString(rec)
                out.extend((int(ev.step), v.tag, float(v.simple_value))
                           for v in ev.summary.value if v.HasField("simple_value"))
    return out
