"""``tv.train.replica_device_setter``: variables to parameter-server tasks, the rest to the
worker — a device function for ``with tv.device(...)``.

Strategies (TF's names): :class:`RoundRobinStrategy` (variable ``i`` to task ``i % n``) and
:class:`GreedyLoadBalancingStrategy` (each variable to the task with the fewest bytes so far,
the default here: TF defaults to round robin, which puts a large embedding and a bias on the
same task as readily as two biases). A strategy is any callable ``op -> task index``.

>>> f = replica_device_setter(ps_tasks=2, worker_device="/job:worker/task:0")
>>> class Op: type = "VariableV2"; attrs = {"shape": (10,), "dtype": None}
>>> f(Op()), f(Op())
('/job:ps/task:0', '/job:ps/task:1')
"""
from __future__ import annotations

import numpy as np

from ..runtime.cluster.spec import ClusterSpec
from ..framework.errors import InvalidArgumentError

STANDARD_PS_OPS = ("VariableV2", "Variable", "VarHandleOp", "MutableHashTable",
                   "MutableHashTableV2", "MutableDenseHashTable")


def byte_size_load_fn(op) -> int:
    """Bytes of a variable op's value (unknown dimensions count as 1, TF's rule)."""
    shape = op.attrs.get("shape") or ()
    dt = op.attrs.get("dtype")
    itemsize = dt.np_dtype.itemsize if dt is not None and hasattr(dt, "np_dtype") else 4
    return max(int(np.prod([d or 1 for d in shape])) * itemsize, 1)


class RoundRobinStrategy:
    """Variable ``i`` goes to task ``i % num_tasks``."""

    def __init__(self, num_tasks: int):
        self._n = int(num_tasks)
        self._next = 0

    def __call__(self, op) -> int:
        task = self._next
        self._next = (self._next + 1) % self._n
        return task


class GreedyLoadBalancingStrategy:
    """Each variable to the task with the least load so far (``load_fn(op)``, bytes by
    default); ties go to the lowest task.

    >>> s = GreedyLoadBalancingStrategy(2)
    >>> class Big: attrs = {"shape": (100,), "dtype": None}
    >>> class Small: attrs = {"shape": (1,), "dtype": None}
    >>> [s(Big()), s(Small()), s(Small()), s(Small())], s.loads
    ([0, 1, 1, 1], [400, 12])
    """

    def __init__(self, num_tasks: int, load_fn=byte_size_load_fn):
        self.loads = [0] * int(num_tasks)
        self._load_fn = load_fn

    def __call__(self, op) -> int:
        i = int(np.argmin(self.loads))
        self.loads[i] += self._load_fn(op)
        return i


def replica_device_setter(ps_tasks: int = 0, ps_device: str = "/job:ps",
                          worker_device: str = "/job:worker", merge_devices: bool = True,
                          cluster=None, ps_ops=None, ps_strategy=None):
    """A device function: variable ops (``ps_ops``) go to ``{ps_device}/task:i`` with ``i``
    from ``ps_strategy(op)`` (default :class:`GreedyLoadBalancingStrategy` by bytes), every
    other op to ``worker_device``.

    ``cluster`` (a ClusterSpec or dict) gives the number of PS tasks. With no PS tasks every op
    goes to ``worker_device``. Partitioned variables (``tv.train.partitioners``) place each
    part as its own variable, so the parts spread over the tasks.
    """
    if cluster is not None:
        spec = ClusterSpec(cluster)
        ps_tasks = spec.num_tasks("ps") if "ps" in spec.jobs else 0
    if ps_tasks < 0:
        raise InvalidArgumentError(f"ps_tasks must be >= 0, got {ps_tasks}")
    ps_ops = tuple(ps_ops or STANDARD_PS_OPS)
    if ps_tasks == 0:
        return lambda op: worker_device
    strategy = ps_strategy or GreedyLoadBalancingStrategy(ps_tasks)

    def device_fn(op) -> str:
        if op.type in ps_ops:
            task = int(strategy(op))
            if not 0 <= task < ps_tasks:
                raise InvalidArgumentError(
                    f"ps_strategy returned task {task} for {getattr(op, 'name', op)!r}; the "
                    f"cluster has {ps_tasks} PS tasks")
            return f"{ps_device}/task:{task}"
        return worker_device
    return device_fn
