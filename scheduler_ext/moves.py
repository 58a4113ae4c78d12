"""Tasks a job ran again: those the scheduler moved off a straggler and those that ran again
because a worker left mid-job (issue 23), as the job registry keeps them and the job page
shows them (pure functions: plain data in, plain data out).

Where they come from: core's :class:`~tensorvm.runtime.cluster.stragglers.StragglerMoves`
logs one scheduler event per move on :data:`TOPIC_MOVES` (``{"key": str(key), "from":
address, "to": address, "time": t}``) and one per departed worker that had floating work on
:data:`TOPIC_RERUNS` (``{"worker": address, "time": t, "tasks": [[name, step id], ...]}``).
The registry (:meth:`~tensorvm.scheduler_ext.registry.JobRegistry.task_moved`,
:meth:`~tensorvm.scheduler_ext.registry.JobRegistry.tasks_rerun`) gives each to the job whose
keys they are and keeps the latest :data:`MAX_MOVES` moves and :data:`MAX_RERUNS` departures
per job (the counts cover all of them).

A task is named as a map-reduce driver names it (``mr.Result.rerun``): a floating task by its
group (``map13``, ``reduce1``; a Send of one by ``map13 send 2``), a pinned one by its device
and stage (``worker-0-cpu0/s1``).

>>> key = key_of("('tvm_g2_worker_float_cpu0_s0-map13', 'ab.0')")
>>> key, task_label(key[0])
(('tvm_g2_worker_float_cpu0_s0-map13', 'ab.0'), 'map13')
>>> sorted(["reduce0", "map10", "map9"], key=label_order)
['map9', 'map10', 'reduce0']
"""
from __future__ import annotations

import ast
import re

# the two scheduler events (defined once, with the other names that cross the wire, in core)
from tensorvm.runtime.wire_names import TOPIC_MOVES, TOPIC_RERUNS  # noqa: F401

MAX_MOVES = 50  # moves kept per job (the latest)
MAX_RERUNS = 20  # departed workers' re-runs kept per job (the latest)
MAX_KEY_CHARS = 1000  # of a moved key's text: a tensorvm key is a short tuple
_INDEX = re.compile(r"(\d+)$")


def key_of(text):
    """The Dask key a :data:`TOPIC_MOVES` event names (``str(key)``): a tuple of strings and
    numbers read back from its text, a plain string key as it is; None for anything else
    (literals only: the text is never run).

    >>> key_of("('tvm_g1_worker_float_cpu0_s0_send-map3_1', 'ab.0', 1)")
    ('tvm_g1_worker_float_cpu0_s0_send-map3_1', 'ab.0', 1)
    >>> key_of("tvm_g1_ps_0_cpu0_s1"), key_of("__import__('os')"), key_of(None)
    ('tvm_g1_ps_0_cpu0_s1', None, None)
    """
    if not isinstance(text, str) or len(text) > MAX_KEY_CHARS:
        return None
    if not text.startswith("("):
        return text if text.startswith("tvm") else None
    try:
        key = ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None
    if isinstance(key, tuple) and key and isinstance(key[0], str) and \
            all(isinstance(k, (str, int, float)) for k in key):
        return key
    return None


def task_label(name: str, parsed=None) -> str:
    """A task's name on the page: a floating task's group (``map13``; its Send's ``map13
    send 2``), else ``device/s<stage>`` (``parsed``: the name's
    :func:`~tensorvm.scheduler_ext.task_keys.parse_task_name`), else the name itself.

    >>> task_label("tvm_g2_worker_float_cpu0_s1-reduce0")
    'reduce0'
    >>> task_label("tvm_g2_worker_float_cpu0_s0_send-map13_2")
    'map13 send 2'
    >>> task_label("tvm_g2_worker_0_cpu0_s1", ("g2", "worker-0-cpu0", 1, False))
    'worker-0-cpu0/s1'
    """
    name = str(name)
    if "_float_" in name and "-" in name:
        base, _, group = name.rpartition("-")
        if base.endswith("_send"):
            task, _, n = group.rpartition("_")
            return f"{task} send {n}" if task and n.isdigit() else f"{group} send"
        return group
    if parsed is not None:
        return f"{parsed[1]}/s{parsed[2]}" + (" send" if parsed[3] else "")
    return name


def label_order(label: str) -> tuple:
    """Sort key of task labels: by kind, then index as a number (``map9`` before ``map10``),
    the order a driver's ``Result.rerun`` lists them in."""
    head = label.split(" ", 1)[0]
    m = _INDEX.search(head)
    return (head[: m.start()] if m else head, int(m.group(1)) if m else -1, label)


def event_time(msg: dict, default: float) -> float:
    """The event's own ``time`` (the scheduler's clock when it happened), else ``default``."""
    t = msg.get("time")
    return float(t) if isinstance(t, (int, float)) and not isinstance(t, bool) else default


def keep_latest(items: list, item, limit: int) -> list:
    """``items`` with ``item`` appended, the latest ``limit`` only.

    >>> keep_latest([1, 2], 3, 2)
    [2, 3]
    """
    return (items + [item])[-limit:]
