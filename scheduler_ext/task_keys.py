"""How a Dask key reads as a tensorvm task: its task name (:func:`task_name_of`), the
device, stage and Send flag in that name (:func:`parse_task_name`), its step id
(:func:`step_of`), its node in a job's graph (:func:`node_of`), and whether the error it
ended with is the normal end of a loop (:func:`expected_end`).

Its own module because the job registry (:mod:`tensorvm.scheduler_ext.registry`), the task
events (:mod:`tensorvm.scheduler_ext.events`), the scheduler plugin and the CLI's plan view
(:mod:`tensorvm.jobs.plans`) all read keys so, and none of them needs the registry for it.

>>> key = ("tvm_g1_ps_0_cpu0_s1", "a.0")
>>> name = task_name_of(key)
>>> node_of(parse_task_name(name)), step_of(key)
('ps-0-cpu0/s1', 'a.0')
"""
from __future__ import annotations

import re

END_ERRORS = ("OutOfRangeError",)
"""Error classes that end a task at the normal end of a loop, not because its work failed:
TF's ``OutOfRangeError`` ("iterated past the valid range": a closed queue, input read to its
end, the token gate and gradient accumulators that the chief of synchronous training closes
when training ends). Tasks that end so count as ``ended``, never as ``erred``."""


def parse_task_name(name: str) -> tuple[str, str, int, bool] | None:
    """``(graph, device, stage, is_send)`` of a tensorvm task name, else None. The device reads
    ``<job>-<task>-<type><n>``.

    Task names are ``tvm_<graph>_<job>_<task>_<type><n>_s<stage>`` (underscores keep Dask's
    ``key_split`` from cutting the prefix at the first word holding a digit); a Send's key adds
    ``-send``. The graph tag is letters and digits; a job name may hold underscores.

    A floating task (``/job:J/task:*<group>``, any worker of the job) is named
    ``…_<job>_float_<type><n>_s<stage>-<group>``, its Send ``…_s<stage>_send-<group>``; the
    tasks of a job's floating groups (a map-reduce job's ``map0``, ``map1`` …, ``reduce0`` …)
    count together, as the device ``<job>-*-<type><n>``.

    >>> parse_task_name("tvm_g3_ps_0_cpu0_s1")
    ('g3', 'ps-0-cpu0', 1, False)
    >>> parse_task_name("tvm_wordcount_my_job_12_gpu0_s0-send")
    ('wordcount', 'my_job-12-gpu0', 0, True)
    >>> parse_task_name("tvm_g2_worker_float_cpu0_s0-map3")
    ('g2', 'worker-*-cpu0', 0, False)
    >>> parse_task_name("tvm_g2_worker_float_cpu0_s1_send-reduce0")
    ('g2', 'worker-*-cpu0', 1, True)
    >>> parse_task_name("tvm-g3-ps-0-cpu0-s1")  # the format before underscores
    ('g3', 'ps-0-cpu0', 1, False)
    >>> parse_task_name("sum-aggregate") is None
    True
    """
    if not isinstance(name, str) or len(name) < 5 or not name.startswith("tvm"):
        return None
    sep = name[3]
    if sep not in "-_":
        return None
    rest = name[4:]
    send = rest.endswith("-send")
    if send:
        rest = rest[:-5]
    elif sep == "_" and "-" in rest:  # a floating group's task: "…_s<stage>[_send]-<group>"
        rest = rest.rsplit("-", 1)[0]
        send = rest.endswith("_send")
        rest = rest[:-5] if send else rest
    words = rest.split(sep)
    if len(words) < 5 or words[-1][:1] != "s" or not words[-1][1:].isdigit():
        return None
    graph, job, task, dev = words[0], sep.join(words[1:-3]), words[-3], words[-2]
    if task == "float":
        task = "*"
    elif not task.isdigit():
        return None
    if not (graph and job and dev):
        return None
    return graph, f"{job}-{task}-{dev}", int(words[-1][1:]), send


def task_name_of(key) -> str | None:
    """The task name of a Dask key if it is a tensorvm task key, else None."""
    name = key[0] if isinstance(key, tuple) and key else key
    return name if isinstance(name, str) and name.startswith("tvm") else None


def expected_end(error) -> bool:
    """Whether a task's error text (``Class: message`` or Dask's ``Class(...)``) is the
    normal end of a loop (:data:`END_ERRORS`), not a failure.

    >>> expected_end("OutOfRangeError: the token gate was closed (training ended)")
    True
    >>> expected_end("InvalidArgumentError('bad shape')"), expected_end(None)
    (False, False)
    """
    if not isinstance(error, str):
        return False
    m = re.match(r"\s*(?:[\w.]+\.)?(\w+)\s*[:(]", error)
    return m is not None and m.group(1) in END_ERRORS



def node_of(parsed) -> str:
    """A job's graph node of a parsed task name (:func:`parse_task_name`): ``device/s<stage>``."""
    return f"{parsed[1]}/s{parsed[2]}"


def step_of(key):
    """The step id of a tensorvm key (its second item), else None."""
    return key[1] if isinstance(key, tuple) and len(key) > 1 else None
