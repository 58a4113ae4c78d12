"""The names that cross the wire between a tensorvm client and a Dask cluster, each carrying
the tensorvm version (:data:`VERSION`): the worker plugin, the scheduler plugin, and the comm
handlers of the direct plane. A client and workers of different versions never mistake each
other's plugins or messages; :func:`tensorvm.runtime.worker_extension.check_versions` says so
at connect, naming both versions.

>>> handler("run") == f"tvm_run-{VERSION}"
True
"""
from __future__ import annotations

from ..framework.versions import __version__ as VERSION

WORKER_PLUGIN = f"tensorvm-{VERSION}"  # installs worker.extensions["tensorvm"]
DEVICE_HOMES = f"tensorvm-device-homes-{VERSION}"  # the scheduler plugin of device homes
STRAGGLER_MOVES = f"tensorvm-straggler-moves-{VERSION}"  # moves floating tasks off stragglers


# Event topics (``Client.log_event``, ``Client.subscribe_topic``): plain names without the
# version, as users subscribe to them too; their messages are plain dicts.
TOPIC_JOBS = "tensorvm-jobs"
"""Jobs announced by clients: start, metrics, counters, end (``Client.log_event``; the message
forms are :func:`tensorvm.scheduler_ext.job_message`'s), read by the job registry."""
TOPIC_WORKERS = "tensorvm-workers"
"""Worker arrivals and departures, logged by the scheduler's
:class:`~tensorvm.runtime.cluster.device_map.DeviceHomes` (the one plugin that handles them):
``{"action": "added" | "removed", "worker": address, "name": name}``, a removal also with
``"devices"``, the device resources that lived on the worker. Sessions fail the steps on a
removed worker's devices (:mod:`tensorvm.runtime.direct.step_watch`); the job registry
(:mod:`tensorvm.scheduler_ext`) keeps its list of workers from them."""
TOPIC_STEPS = "tensorvm-direct-steps"
"""The steps a client ran on the direct data plane, which the scheduler's task hooks never see:
``{"client": id, "steps": [record, ...]}``, each record ``{"step": id, "n": iterations, "ok":
bool, "tasks": [[task name, worker address], ...], "edges": [[src task, dst task], ...],
"erred": [task names], "error": "Class: message"}`` (``erred`` and ``error`` only when not ok);
read by the job registry (:mod:`tensorvm.scheduler_ext`)."""
TOPIC_MOVES = "tensorvm-moves"
"""Each floating task the scheduler moved off a straggler
(:mod:`tensorvm.runtime.cluster.stragglers`): ``{"key": str(key), "from": address, "to":
address, "time": seconds since the epoch}``; read by the job registry
(:mod:`tensorvm.scheduler_ext`: the job page's "moved off stragglers")."""
TOPIC_RERUNS = "tensorvm-reruns"
"""Each worker that left with floating work (:mod:`tensorvm.runtime.cluster.stragglers`):
``{"worker": address, "time": seconds since the epoch, "tasks": [[task name, step id], ...]}``,
the stage tasks that run again because of it (started there, or their outputs held only
there; not those that only waited in its queue); read by a map-reduce driver
(``stragglers.rerun_tasks``, ``mr.Result.rerun``) and by the job registry."""


def handler(verb: str) -> str:
    """The worker comm handler of a direct-plane verb (``register``, ``drop``, ``run``,
    ``send``, ``cancel``, ``lane``) under this version's name."""
    return f"tvm_{verb}-{VERSION}"
