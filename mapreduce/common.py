"""What the job driver, the sampler and the phased runner share: the result, the counters,
building a user function into the graph, and the options of a job's steps."""
from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import logging
import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np

import tensorvm as tv
from tensorvm.framework.device_spec import DeviceSpec
from tensorvm.framework.op_def_library import apply_op
from tensorvm.framework.op_registry import registry
from tensorvm.ops.mapreduce import mapreduce_ops as mro

from .api import CounterSink, Emit, as_emit

logger = logging.getLogger("tensorvm")

__all__ = ["Result", "call_user", "run_options", "progress_to", "written_bytes"]

MAP_COUNTERS = ("map_input_records", "map_input_bytes", "bad_records")
SHUFFLE_COUNTERS = ("shuffle_records", "shuffle_bytes")
OUTPUT_COUNTERS = ("reduce_output_records", "reduce_output_bytes")


@dataclass
class Result:
    """What a job returns: summed counters, the committed files, and — with no output — the
    reducers' keys and values (NumPy; reducer after reducer, each sorted by key)."""
    counters: dict
    output_urls: list
    keys: Any = None
    values: Any = None
    seconds: float = 0.0
    num_map_tasks: int = 0
    num_reducers: int = 0
    attempts: int = 1
    skipped: list = field(default_factory=list)  # "url@offset" of skipped failing records
    rerun: list = field(default_factory=list)  # tasks a lost worker made run again: "map3"

    def to_dict(self) -> dict:
        """``{key: value}`` of a job with no output (keys as Python scalars/str/bytes)."""
        if self.keys is None:
            where = _folder(self.output_urls) if self.output_urls else "its output"
            raise tv.errors.FailedPreconditionError(
                f"this job wrote its result to {where}, not to the driver: read the files "
                "(or run the job with output=None to get the pairs back)")
        ks = self.keys.tolist() if self.keys.ndim == 1 else [bytes(k) for k in self.keys]
        vs = [v.tolist() if isinstance(v, np.ndarray) else v for v in self.values] \
            if self.values.dtype == object else self.values.tolist()
        return dict(zip(ks, vs))

    def __repr__(self) -> str:
        return (f"<mr.Result {self.num_map_tasks} maps x {self.num_reducers} reducers, "
                f"{self.seconds:.2f}s, counters={self.counters}, files={len(self.output_urls)}>")


def _folder(urls: list) -> str:
    """The folder of the part files ``urls``."""
    return urls[0].rsplit("/", 1)[0]


@dataclass
class _Built:
    fetches: dict
    num_map_tasks: int
    user_counter_names: list = field(default_factory=list)
    groups: list = field(default_factory=list)
    reducers: list = field(default_factory=list)  # the reducers built (not recovered)


def _failed_map_task(exc, job_name: str) -> int | None:
    """The map task whose op failed, from the op name in the error (``<job>/map<m>/…``)."""
    found = re.search(rf"'{re.escape(job_name)}(?:_\d+)?/map(\d+)(?:_\d+)?/", str(exc))
    return int(found.group(1)) if found else None


def run_options(durable_url: str = "") -> tv.RunOptions:
    """Options of a job's steps: Send/Recv as Dask task dependencies (where the session has
    a choice of data plane), so Dask manages the shuffle's memory and re-runs lost work
    (DESIGN.md, "Two ways to move tensors between devices"); ``durable_url``: where the map
    tasks keep their outputs (:mod:`tensorvm.runtime.durable_tasks`). A failed step returns
    once none of its tasks runs (``wait_on_error``): the job then removes its scratch and
    temporary output, and no map task still running writes there after."""
    opts = tv.RunOptions()
    if hasattr(opts, "data_plane"):
        opts.data_plane = "dask"
    if hasattr(opts, "wait_on_error"):
        opts.wait_on_error = True
    if durable_url and hasattr(opts, "durable_url"):
        opts.durable_url = durable_url
    return opts


def call_user(fn, args: list, what: str, sink: CounterSink) -> Emit:
    """``fn(*args)`` as an Emit. String inputs carry Arrow values; if they reach an op that
    does not take Arrow (see ``OpDef.arrow``), the function is built again on
    NumPy copies (``MRToNumpy``), and the first build's ops stay unused (pruned)."""
    g = tv.get_default_graph()
    flat = [a for x in args for a in (x.values() if isinstance(x, dict) else [x])]
    n0 = len(g.get_operations())
    probe = CounterSink()
    with probe:
        out = as_emit(fn(*args), what)
    if mro.arrow_safe(g.get_operations()[n0:], flat):
        sink.items += probe.items
        return out

    def conv(t):
        if not t.dtype.is_string:
            return t
        return apply_op("MRToNumpy", [t], {}, name=f"{what}_numpy").outputs[0]
    args = [{k: conv(v) for k, v in x.items()} if isinstance(x, dict) else conv(x)
            for x in args]
    with sink:
        return as_emit(fn(*args), what)


def _flat(fetches: dict) -> list:
    out = list(fetches["map"]) + list(fetches["shuffle"]) + list(fetches["user"])
    for x in fetches["reduce"]:
        out.extend(x if isinstance(x, tuple) else [x])
    return out


def _sum_counters(vals: dict, built: _Built) -> dict:
    c: dict = {}
    m = np.sum(np.stack(vals["map"]), axis=0) if vals["map"] else np.zeros(3, np.int64)
    c.update(zip(MAP_COUNTERS, (int(x) for x in m)))
    s = np.sum(np.stack(vals["shuffle"]), axis=0) if vals["shuffle"] else np.zeros(2)
    c.update(zip(SHUFFLE_COUNTERS, (int(x) for x in s)))
    if vals["reduce"] and not isinstance(vals["reduce"][0], tuple):
        o = np.sum(np.stack(vals["reduce"]), axis=0)
        c.update(zip(OUTPUT_COUNTERS, (int(x) for x in o)))
    for name, v in zip(built.user_counter_names, vals["user"]):
        c[name] = c.get(name, 0) + int(v)
    return c


def written_bytes(urls: list) -> int:
    """The bytes of the committed files ``urls`` (what ``reduce_output_bytes`` reports for a
    job with an output: the files' sizes, not the in-memory size of the keys and values)."""
    if not urls:
        return 0
    from tensorvm import storage
    fs, _ = storage.fsio.to_fs(urls[0])
    return int(sum(fs.size(storage.fsio.to_fs(u)[1]) for u in urls))


_PROGRESS: contextvars.ContextVar = contextvars.ContextVar("tensorvm_mr_progress",
                                                           default=None)


@contextlib.contextmanager
def progress_to(callback):
    """Within this block, every map-reduce step of this context calls ``callback(event)``:
    ``{"event": "start", "job", "splits", "map_tasks", "reducers"}`` before it runs and
    ``{"event": "done", ..., "counters"}`` after (the CLI's display counts splits, map tasks
    and reducers with them, not Dask's stage tasks)."""
    token = _PROGRESS.set(callback)
    try:
        yield
    finally:
        _PROGRESS.reset(token)


def log_reruns(name: str, rerun: list, num_map_tasks: int, num_reducers: int) -> list:
    """Say which tasks of job ``name`` ran again because a worker left (``Result.rerun``);
    returns ``rerun``."""
    if rerun:
        logger.warning("mr job %s: a worker left mid-job; %s ran again (of %d map tasks and "
                       "%d reducers; the others kept their work)", name, ", ".join(rerun),
                       num_map_tasks, num_reducers)
    return rerun


def report_progress(event: str, job_name: str, splits: int, map_tasks: int, reducers: int,
                    counters: dict | None = None) -> None:
    callback = _PROGRESS.get()
    if callback is None:
        return
    msg = {"event": event, "job": job_name, "splits": int(splits),
           "map_tasks": int(map_tasks), "reducers": int(reducers)}
    if counters is not None:
        msg["counters"] = dict(counters)
    try:
        callback(msg)
    except Exception:  # noqa: BLE001 - a display never fails a job
        pass


def _device(floating: bool, group: str, task: int) -> str:
    """A map or reduce task's device: its own floating group, or pinned to ``task``."""
    return f"/job:worker/task:*{group}" if floating else f"/job:worker/task:{task}"


def holds_state(ops) -> bool:
    """Whether any of ``ops`` holds state (a stateful op that is not idempotent, or one
    colocated with a resource): a task that Dask may run twice must hold none."""
    for op in ops:
        d = registry.get(op.type)
        if op.colocation or (d is not None and d.stateful and not d.idempotent):
            return True
    return False


def _pin_stateful(graph, n0: int, device: str, task: int) -> None:
    """Pin the ops made since ``n0`` on floating ``device`` to ``/job:worker/task:<task>`` if
    any holds state (:func:`holds_state`; see :mod:`tensorvm.passes.place`)."""
    if "task:*" not in device:
        return
    ops = graph.get_operations()[n0:]
    if not holds_state(ops):
        return
    group = DeviceSpec.parse(device).task
    for op in ops:
        spec = DeviceSpec.parse(op.device)
        if spec.task == group:
            op._set_device(dataclasses.replace(spec, task=task).to_string())
