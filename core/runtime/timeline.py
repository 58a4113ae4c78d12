"""TF 1.x's ``tensorflow.python.client.timeline``: a traced run as a Chrome trace.

``Timeline(run_metadata.step_stats).generate_chrome_trace_format()`` is the JSON that
``chrome://tracing`` (and Perfetto) shows: one process row per device, one complete event
("ph": "X") per task the traced run ran there, from its start to its end, with the ops it ran
in ``args`` (tensorvm times tasks, not single ops).

>>> import json, tensorvm as tv
>>> with tv.Graph().as_default():
...     x = tv.placeholder(tv.float32, [2])
...     meta = tv.RunMetadata()
...     with tv.Session() as sess:
...         _ = sess.run(x * 2.0, {x: [1, 2]},
...                      options=tv.RunOptions(trace_level=tv.RunOptions.FULL_TRACE),
...                      run_metadata=meta)
>>> trace = json.loads(Timeline(meta.step_stats).generate_chrome_trace_format())
>>> sorted({e["ph"] for e in trace["traceEvents"]})
['M', 'X']
"""
from __future__ import annotations

import json

__all__ = ["Timeline"]


class Timeline:
    """A traced run's task records (``RunMetadata.step_stats``) as a Chrome trace."""

    def __init__(self, step_stats, graph=None):
        self._records = list(step_stats or [])
        self._graph = graph

    def generate_chrome_trace_format(self, show_dataflow: bool = True,
                                     show_memory: bool = False) -> str:
        """The trace as a JSON string (``{"traceEvents": [...]}``)."""
        events: list[dict] = []
        pids: dict[str, int] = {}
        for rec in self._records:
            device = str(rec.get("device", ""))
            if device not in pids:
                pids[device] = len(pids)
                events.append({"name": "process_name", "ph": "M", "pid": pids[device],
                               "args": {"name": device}})
            start, end = float(rec["start"]), float(rec["end"])
            ops = list(rec.get("ops") or [])
            events.append({"name": str(rec.get("task") or (ops[0] if ops else "task")),
                           "cat": "Op", "ph": "X", "pid": pids[device], "tid": 0,
                           "ts": int(start * 1e6), "dur": max(0, int((end - start) * 1e6)),
                           "args": {"ops": ops, "worker": str(rec.get("worker", ""))}})
        return json.dumps({"traceEvents": events}, indent=1)
