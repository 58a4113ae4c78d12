"""The plan format: what the passes produce and every plane runs.

A :class:`Plan` is a compiled step: one :class:`Task` per (device, stage), each holding a
:class:`StageProgram` (its ops as :class:`Instr` s over numbered value slots), one
:class:`Send` per Send/Recv pair, and where each fetch comes from. A task's arguments and a
plan's fetches are *references*, one small value each:

* :class:`Feed` — the i-th fed value of the step;
* :class:`Result` — a task's result (``index`` -1: the whole tuple it returns, for a task of
  the same device or an elided Send pick; else one export of it, for a fetch);
* :class:`Recv` — the value a :class:`Send` of the plan delivers.

Everything here is frozen plain data: a pass builds it, the in-process, Dask and direct
planes read it through its fields. Caches the planes keep about a plan or a program are
keyed by the object (``weakref``), never stored on it.

>>> p = StageProgram("/job:localhost/replica:0/task:0/device:CPU:0", "CPU", 3,
...                  ((0, -1), (1, -1)), (Instr("Add", "add", (0, 1), {}, (2,), False, ""),),
...                  (2,), "t", ("add",))
>>> t = Task("t", p.device, 0, p, (Feed(0), Feed(1)), False)
>>> Plan((t,), (), (Result("t", 0),), (("x", 0), ("y", 0)), ("t",), (p.device,))
<tv.Plan 1 devices, 1 tasks, 1 kernels, 0 sends>
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any, Union


@dataclass(frozen=True, slots=True)
class Instr:
    """One op to run: its kernel's op type, input slots, attrs, output slots. ``ctl``: the
    slots of its control inputs' tokens and ``tok`` its own token slot when it has one apart
    (a dead control input makes the op dead)."""
    type: str
    name: str
    args: tuple[int, ...]
    attrs: dict
    outs: tuple[int, ...]
    needs_ctx: bool
    location: str
    ctl: tuple[int, ...] = ()
    tok: int = -1
    out_bytes: int = -1  # static size of its first output, -1 where not known


@dataclass(frozen=True, slots=True, weakref_slot=True, eq=False)
class StageProgram:
    """The ops of one (device, stage) task in topological order.

    ``arg_picks[i] = (slot, index)``: the i-th task argument goes to ``slot`` (``index`` >= 0
    picks one value out of a result tuple: an earlier stage's on the same device, or a
    Send's). ``exports`` are the slots returned, in order.
    """
    device: str
    device_type: str
    nslots: int
    arg_picks: tuple[tuple[int, int], ...]
    instrs: tuple[Instr, ...]
    exports: tuple[int, ...]
    name: str = ""
    op_names: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Feed:
    """The ``index``-th fed value of the step."""
    index: int


@dataclass(frozen=True, slots=True)
class Result:
    """Task ``task``'s result: the whole tuple (``index`` -1) or its ``index``-th export."""
    task: str
    index: int = -1


@dataclass(frozen=True, slots=True)
class Recv:
    """The value the plan's Send named ``send`` delivers (a 1-tuple, read at index 0)."""
    send: str


Ref = Union[Feed, Result, Recv]


@dataclass(frozen=True, slots=True)
class Task:
    """One (device, stage) of the plan: its program and, per program argument, where the
    value comes from (:class:`Feed`, :class:`Result` of an earlier task, :class:`Recv`)."""
    name: str  # Dask key prefix: tvm_<graph or job>_<job>_<task>_<device>_s<stage>
    device: str
    stage: int
    program: StageProgram
    args: tuple  # Ref per program argument
    stateful: bool

    @property
    def ops(self) -> tuple[str, ...]:
        return self.program.op_names


@dataclass(frozen=True, slots=True)
class Send:
    """A Send/Recv pair: ``task``'s ``index``-th export goes from ``device`` to
    ``pair.dst``. ``elided``: the consumers read the stage's result tuple directly (same
    bytes moved, one Dask hop fewer)."""
    name: str
    device: str  # source device
    task: str  # the stage task holding the tensor
    index: int  # export index in that task's result
    pair: Any  # tensorvm.passes.partition.SendRecv
    elided: bool = False


def _uid() -> str:
    return uuid.uuid4().hex[:12]


@dataclass(frozen=True, slots=True, weakref_slot=True, eq=False)
class Plan:
    """A compiled step. ``print(plan)`` shows devices, stages, tasks and Send/Recv pairs."""
    tasks: tuple  # Task, in stage order
    sends: tuple  # Send, one per (tensor, destination device)
    fetches: tuple  # per fetch: Result(task, index) | Feed(i)
    feeds: tuple  # fed refs, in feed order
    outputs: tuple  # task names the client must ask for (sinks and fetch sources)
    devices: tuple
    graph_ops: int = 0  # ops in the pruned graph before optimisation
    fallbacks: tuple = ()  # place.Fallback: GPU ops soft placement put on a CPU, and why
    # A name for this compiled plan, unique across processes: the handle its partitions are
    # registered under on the workers (tensorvm.runtime.direct.registered_plans).
    uid: str = field(default_factory=_uid, init=False, repr=False)

    @property
    def kernels(self) -> int:
        return sum(len(t.program.instrs) for t in self.tasks)

    @property
    def pairs(self) -> tuple:
        return tuple(s.pair for s in self.sends)

    def task(self, name: str) -> Task:
        return next(t for t in self.tasks if t.name == name)

    def __repr__(self):
        return (f"<tv.Plan {len(self.devices)} devices, {len(self.tasks)} tasks, "
                f"{self.kernels} kernels, {len(self.sends)} sends>")

    def __str__(self):
        lines = [repr(self)]
        for dev in self.devices:
            lines.append(f"device {dev}")
            for t in self.tasks:
                if t.device == dev:
                    lines.append(f"  stage {t.stage}: {t.name}  [{', '.join(t.ops)}]")
        for s in self.sends:
            lines.append(f"  {s.pair!r}{'  (elided pick)' if s.elided else ''}")
        lines.extend(str(f) for f in self.fallbacks)
        return "\n".join(lines)

    def to_dot(self) -> str:
        """Graphviz source: one cluster per device, tasks as boxes, Send/Recv as edges."""
        out = ["digraph plan {", "  rankdir=LR;", "  node [shape=box];"]
        for i, dev in enumerate(self.devices):
            out.append(f'  subgraph cluster_{i} {{ label="{dev}";')
            for t in self.tasks:
                if t.device == dev:
                    label = "\\n".join((f"s{t.stage}",) + t.ops[:8] +
                                       (("…",) if len(t.ops) > 8 else ()))
                    out.append(f'    "{t.name}" [label="{label}"];')
            out.append("  }")
        sends = {s.name: s for s in self.sends}
        for t in self.tasks:
            for a in t.args:
                if a.__class__ is Result:
                    out.append(f'  "{a.task}" -> "{t.name}";')
                elif a.__class__ is Recv:
                    s = sends[a.send]
                    lbl = f"{s.pair.tensor[0]}:{s.pair.tensor[1]}" if s.pair.tensor[1] >= 0 \
                        else f"^{s.pair.tensor[0]}"
                    out.append(f'  "{s.task}" -> "{t.name}" [label="{lbl}", style=dashed];')
        out.append("}")
        return "\n".join(out)
