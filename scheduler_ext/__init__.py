"""``tensorvm.scheduler_ext``: the Dask scheduler plugin that keeps the registry of tensorvm
jobs (progress per device and stage, counters, training metrics) and serves the tensorvm page
of the Dask dashboard (``/tensorvm``, JSON at ``/tensorvm/api/jobs``).

On an existing cluster: ``dask scheduler --preload tensorvm.scheduler_ext``; from a client:
``tensorvm.scheduler_ext.install(client)``. Worker arrivals and departures are published on
the event topic :data:`TOPIC_WORKERS` (``client.subscribe_topic(TOPIC_WORKERS, handler)``).
"""
from .plugin import TensorvmPlugin, dask_setup, install
from .registry import (
    TOPIC_JOBS,
    TOPIC_STEPS,
    TOPIC_WORKERS,
    JobRegistry,
    job_message,
)
from .task_keys import parse_task_name

__all__ = [
           "TOPIC_JOBS",
           "TOPIC_STEPS",
           "TOPIC_WORKERS",
           "JobRegistry",
           "TensorvmPlugin",
           "dask_setup",
           "install",
           "job_message",
           "parse_task_name",
]
