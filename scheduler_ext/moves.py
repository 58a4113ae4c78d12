"""Tasks a job ran again: those the scheduler moved off a straggler and those that ran again
because a worker left mid-job (issue 23), as the job registry keeps them and the job page
shows them (pure functions: plain data in, plain data out).

Where they come from: core's :class:`~tensorvm.runtime.cluster.stragglers.StragglerMoves`
logs one scheduler event per move on :data:`TOPIC_MOVES` (``{"key": [name, step id, ...],
"from": address, "to": address, "time": t}``; a plain string key as it is) and one per departed worker that had floating work on
:data:`TOPIC_RERUNS` (``{"worker": address, "time": t, "tasks": [[name, step id], ...]}``).
The registry (:meth:`~tensorvm.scheduler_ext.registry.JobRegistry.task_moved`,
:meth:`~tensorvm.scheduler_ext.registry.JobRegistry.tasks_rerun`) gives each to the job whose
keys they are and keeps the latest :data:`MAX_MOVES` moves and :data:`MAX_RERUNS` departures
per job (the counts cover all of them).

A task is named as a map-reduce driver names it (``mr.Result.rerun``): a floating task by its
group (``map13``, ``reduce1``; a Send of one by ``map13 send 2``), a pinned one by its device
and stage (``worker-0-cpu0/s1``).

>>> key = key_of(["tvm_g2_worker_float_cpu0_s0-map13", "ab.0"])
>>> key, task_label(key[0])
(('tvm_g2_worker_float_cpu0_s0-map13', 'ab.0'), 'map13')
>>> sorted(["reduce0", "map10", "map9"], key=label_order)
['map9', 'map10', 'reduce0']
"""
from __future__ import annotations

# the two scheduler events (defined once, with the other names that cross the wire, in core)
from tensorvm.runtime.wire_names import TOPIC_MOVES, TOPIC_RERUNS  # noqa: F401
# the order a driver's Result.rerun lists tasks in, for the page's lists too
from tensorvm.runtime.cluster.stragglers import group_order as label_order  # noqa: F401

MAX_MOVES = 50  # moves kept per job (the latest)
MAX_RERUNS = 20  # departed workers' re-runs kept per job (the latest)
MAX_KEY_PARTS = 8  # of a moved key: a tensorvm key is a short tuple


def key_of(key):
    """The Dask key a :data:`TOPIC_MOVES` event names: its parts (a list, as the event
    carries a tuple key) as a tuple of strings and numbers, a plain string key as it is; None
    for anything else.

    >>> key_of(["tvm_g1_worker_float_cpu0_s0_send-map3_1", "ab.0", 1])
    ('tvm_g1_worker_float_cpu0_s0_send-map3_1', 'ab.0', 1)
    >>> key_of("tvm_g1_ps_0_cpu0_s1"), key_of("os"), key_of([{}]), key_of(None)
    ('tvm_g1_ps_0_cpu0_s1', None, None, None)
    """
    if isinstance(key, str):
        return key if key.startswith("tvm") else None
    if isinstance(key, (list, tuple)) and 0 < len(key) <= MAX_KEY_PARTS and \
            isinstance(key[0], str) and \
            all(isinstance(k, (str, int, float)) and not isinstance(k, bool) for k in key):
        return tuple(key)
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
