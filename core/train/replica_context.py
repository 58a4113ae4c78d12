"""What a replica of between-graph training is told (:class:`ReplicaContext`) and how its
steps pick their data plane (:func:`may_block`, ``_run_options``): shared by
:func:`~tensorvm.train.run_replicas`'s per-task loop and the
:class:`~tensorvm.train.ClusterCoordinator` (their own module, so neither imports the other)."""
from __future__ import annotations

from dataclasses import dataclass

from ..runtime.cluster.spec import ClusterSpec
from ..runtime.session import RunOptions

__all__ = ["ReplicaContext", "may_block"]


@dataclass(frozen=True)
class ReplicaContext:
    """What ``model_fn`` is told about the replica it builds."""
    task: int
    num_workers: int
    device: str
    is_chief: bool
    cluster: ClusterSpec


def may_block(*fetches) -> bool:
    """Whether an op that ``fetches`` need may block on a queue, reader or barrier (the op
    table's ``waits`` fact, read as :func:`tensorvm.runtime.direct.registered_plans.waits` reads it). Those
    that do not may run on the direct data plane from their first step.

    >>> import tensorvm as tv
    >>> q = tv.FIFOQueue(4, [tv.float32])
    >>> may_block(q.dequeue()), may_block(tv.constant(1.0) + 1.0)
    (True, False)
    """
    from ..runtime.direct.registered_plans import op_waits
    from ..framework.op_registry import registry
    seen: set = set()
    todo = [getattr(f, "op", f) for f in fetches]
    while todo:
        op = todo.pop()
        if op.name in seen:
            continue
        seen.add(op.name)
        if registry[op.type].needs_ctx and op_waits(op.type):
            return True
        todo.extend(t.op for t in op.inputs)
        todo.extend(op.control_inputs)
    return False


def _run_options(plane: str, *fetches):
    """How a loop runs ``fetches``: the session's forced data plane, else the direct plane
    unless an op may block (None: the session's ``"auto"``)."""
    if plane != "auto":
        return RunOptions(data_plane=plane)
    return None if may_block(*fetches) else RunOptions(data_plane="direct")
