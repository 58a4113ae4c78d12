"""Partitions registered once on the workers and run by handle (TF's ``RegisterGraph``).

When a plan is first used on a cluster, the session installs each device's part of it —
a :class:`DevicePartition` — in the worker that owns the device (:class:`PlanStore`, kept by
the worker plugin, keyed by ``(plan id, device)``; kernels are bound there once). A step then
names the partition instead of shipping its programs:

* on the Dask data plane each task is ``(run_registered, plan id, device, task, step id, …)``
  and its inputs;
* on the direct data plane (:mod:`tensorvm.runtime.direct.data_plane`) one message per device carries the
  plan id, the step id and that device's feeds.

:func:`partitions` is the pure function from a plan to its per-device parts: which of a
device's tasks read from another device (through the rendezvous), which results each task
pushes to which device, and which fetches it returns. Plans are dropped from the workers when
their session closes or its graph changes.
"""
from __future__ import annotations

import threading
import weakref
from dataclasses import dataclass, field

from ...framework import errors
from ...framework.op_registry import registry
from ...vm.interpreter import run_stage, run_stage_traced
from ...vm.program import Feed, Recv, Result
from ...vm.on_worker import extension_of


def edge_key(arg) -> str:
    """The rendezvous name of a task argument read from another device:
    ``Recv(name)`` -> ``"s:name"``, ``Result(task)`` (an elided pick) -> ``"t:task"``."""
    return f"s:{arg.send}" if arg.__class__ is Recv else f"t:{arg.task}"


@dataclass(frozen=True)
class DevicePartition:
    """One device's part of a registered plan.

    ``tasks`` — the device's :class:`~tensorvm.vm.program.Task` s in stage order; ``pushes[task]`` — after that task
    runs, ``(edge, destination device, index)`` for each value to hand over (index -1: the
    task's whole result tuple, for an elided pick); ``fetches`` — ``(fetch position, task,
    export index)`` this device returns; ``peers`` — device -> worker address of the
    destinations; ``stateful_ops`` — for a timeout's message.
    """
    plan_id: str
    device: str
    tasks: tuple
    pushes: dict = field(default_factory=dict)
    fetches: tuple = ()
    peers: dict = field(default_factory=dict)
    feeds: tuple = ()  # feed indices this device reads
    stateful_ops: tuple = ()
    inline: frozenset = frozenset()  # tasks quick enough for the worker's event loop
    waiting: frozenset = frozenset()  # tasks holding an op that may wait (task_may_wait)
    drops: dict = field(default_factory=dict)  # task -> results dead once it ran (_drops)

    def program(self, task: str):
        for t in self.tasks:
            if t.name == task:
                return t.program
        raise errors.InternalError(f"task {task} is not part of {self.device} in plan "
                                   f"{self.plan_id}")

    def __repr__(self):
        return (f"<DevicePartition {self.plan_id} {self.device}: {len(self.tasks)} tasks, "
                f"{sum(len(p) for p in self.pushes.values())} pushes>")


def partitions(plan, plan_id: str, addresses: dict) -> dict:
    """Device -> :class:`DevicePartition` of ``plan``; ``addresses`` maps each device to its
    worker's address (the pushes' destinations)."""
    device_of = {t.name: t.device for t in plan.tasks}
    pushes: dict = {t.name: [] for t in plan.tasks}
    for s in plan.sends:
        if not s.elided:
            pushes[s.task].append((edge_key(Recv(s.name)), s.pair.dst, s.index))
    for t in plan.tasks:
        for a in t.args:
            if a.__class__ is Result and device_of[a.task] != t.device:
                item = (edge_key(a), t.device, -1)
                if item not in pushes[a.task]:
                    pushes[a.task].append(item)
    fetched = [(i, f) for i, f in enumerate(plan.fetches) if f.__class__ is Result]
    out = {}
    for dev in plan.devices:
        tasks = tuple(sorted((t for t in plan.tasks if t.device == dev), key=lambda t: t.stage))
        names = {t.name for t in tasks}
        out[dev] = DevicePartition(
            plan_id, dev, tasks,
            {n: tuple(pushes[n]) for n in names if pushes[n]},
            tuple((i, f.task, f.index) for i, f in fetched if f.task in names),
            {d: addresses[d] for n in names for _, d, _ in pushes[n]},
            tuple(sorted({a.index for t in tasks for a in t.args if a.__class__ is Feed})),
            tuple(i.name for t in tasks for i in t.program.instrs
                  if registry[i.type].stateful and not registry[i.type].reads_only),
            frozenset(t.name for t in tasks if _never_blocks(t.program)),
            frozenset(t.name for t in tasks if task_may_wait(t.program)),
            _drops(tasks, {f.task for _, f in fetched}))
    return out


def _drops(tasks: tuple, fetched: set) -> dict:
    """Task -> the tasks' results the step can let go of once it has run (and pushed its
    own): those no later task of the device reads and no fetch returns. A step used to keep
    every result to its end, so a variable's value read early in a step (to send it to a
    worker) was still held when the same step's update ran, and the update copied the whole
    variable instead of writing in place (``sole_holder``)."""
    last = {t.name: t.name for t in tasks}  # a result nobody here reads: dead after its push
    for t in tasks:
        for a in t.args:
            if a.__class__ is Result and a.task in last:
                last[a.task] = t.name
    out: dict = {}
    for name, at in last.items():
        if name not in fetched:
            out.setdefault(at, []).append(name)
    return {k: tuple(v) for k, v in out.items()}


# Ops with a context that never wait and never take long: variable state and random draws.
_QUICK_STATEFUL = frozenset((
    "VariableV2", "VariableRead", "IsVariableInitialized", "CountUpTo", "Assign", "AssignAdd", "AssignSub", "ScatterAdd",
    "ScatterSub", "ScatterUpdate", "ScatterMul", "ScatterDiv", "ScatterMin", "ScatterMax",
    "ScatterNdUpdate", "ScatterNdAdd", "ScatterNdSub", "RandomUniform", "RandomUniformInt",
    "RandomStandardNormal", "TruncatedNormal", "Multinomial", "Dropout",
    "LedgerClaim"))  # exactly_once's claim: a dict lookup and a ring write (~12 us)
# The optimizers' dense updates (``var -= f(grad, slots)``): their work is in proportion to the
# gradient, an input of the stage, which the inline bound (the stage's input bytes) covers.
_QUICK_APPLY = frozenset(("ApplyGradientDescent", "ApplyMomentum", "ApplyAdagrad", "ApplyAdam"))
_SLOW = frozenset(("PyFunc", "PyFuncStateless", "While", "StatelessWhile", "WhileGrad"))
MAX_INLINE_OPS = 64


def waits(plan) -> bool:
    """Whether any op of ``plan`` may block on another step or process (queues, readers,
    barriers: :func:`op_waits`; cached per plan object): such plans stay on the Dask data plane under ``"auto"``,
    where a blocked op leaves its worker slot and sees its task given up. Ops that wait only
    for other steps of their protocol (the op table's ``waits="steps"``: sync replicas'
    accumulators and token gate) run on the direct plane, where a wait gives up when the
    client cancels its step (a timeout, a lost device: ``tvm_cancel``)."""
    w = _WAITS.get(plan)
    if w is None:
        w = _WAITS[plan] = any(i.needs_ctx and op_waits(i.type)
                               for t in plan.tasks for i in t.program.instrs)
    return w


_WAITS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # plan -> waits(plan)


def op_waits(op_type: str) -> bool:
    """Whether an op with a context may block outside its step (see :func:`waits`): not a
    known-quick state op, and not declared ``"never"``/``"steps"`` in the op table."""
    return op_type not in _QUICK_STATEFUL and registry[op_type].waits not in ("never", "steps")


def task_may_wait(program) -> bool:
    """Whether a stage holds an op that may wait for another step or process: a ``"steps"``
    op of the op table (sync replicas' accumulators and token gate) or one that
    :func:`op_waits`. The direct data plane runs such stages outside its bounded pool of step
    threads, so waiting steps never hold the threads the steps they wait for need."""
    return any(i.needs_ctx and (registry[i.type].waits == "steps" or op_waits(i.type))
               for i in program.instrs)


def _never_blocks(program) -> bool:
    """Whether a stage may run on the worker's event loop (given small inputs): no op that
    waits (queues, readers, barriers), calls user code, loops, or does I/O."""
    if len(program.instrs) > MAX_INLINE_OPS:
        return False
    return all(i.type not in _SLOW and (not i.needs_ctx or i.type in _QUICK_STATEFUL
                                        or i.type in _QUICK_APPLY)
               for i in program.instrs)




class PlanStore:
    """The registered partitions of one worker process, by ``(plan id, device)``."""

    def __init__(self):
        self._parts: dict = {}
        self._lock = threading.Lock()

    def add(self, parts) -> None:
        with self._lock:
            for p in parts:
                self._parts[(p.plan_id, p.device)] = p

    def get(self, plan_id: str, device: str) -> DevicePartition:
        part = self._parts.get((plan_id, device))
        if part is None:
            raise errors.UnavailableError(
                f"plan {plan_id} is not registered for {device} on this worker (the worker "
                "restarted since, or the session that registered it closed)")
        return part

    def drop(self, plan_ids=None, prefix: str | None = None) -> int:
        """Forget the given plans, or those whose id starts with ``prefix``."""
        with self._lock:
            keys = [k for k in self._parts if (plan_ids is not None and k[0] in plan_ids)
                    or (prefix is not None and k[0].startswith(prefix))]
            for k in keys:
                del self._parts[k]
            return len(keys)

    def __len__(self):
        return len(self._parts)


def plans_of(worker) -> PlanStore:
    """The PlanStore of a Dask worker process (held by its tensorvm extension,
    :mod:`tensorvm.runtime.worker_extension`)."""
    return extension_of(worker).plans


def run_registered(plan_id: str, device: str, task: str, step_id, steps: int, trace: bool,
                   *args):
    """A Dask task of a registered plan: run the named stage of the worker's partition."""
    from distributed import get_worker
    program = plans_of(get_worker()).get(plan_id, device).program(task)
    return (run_stage_traced if trace else run_stage)(program, None, step_id, steps, *args)
