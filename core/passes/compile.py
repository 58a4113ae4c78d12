"""Compile: turn a staged partition into a :class:`~tensorvm.vm.program.Plan` — one
:class:`~tensorvm.vm.program.Task` per (device, stage) holding a
:class:`~tensorvm.vm.program.StageProgram`, one :class:`~tensorvm.vm.program.Send` per
Send/Recv pair, and where each fetch comes from (the plan format is :mod:`tensorvm.vm.program`;
``Plan`` is re-exported here).

A Send is a small task on the source device that picks one tensor out of its stage's results,
so only that tensor moves. Where a stage's results all go to one other device and nowhere
else, the pick is *elided*: the receiving task depends on the stage itself (same bytes moved,
one Dask hop fewer). The plan is a template: the session gives its keys a step id per run.

A floating device (``/job:J/task:*<group>``, see :mod:`tensorvm.passes.place`) compiles like
any other: its (device, stage) tasks are named ``…_<job>_float_<type><n>_s<stage>-<group>``
(:func:`_task_name`), and the runtime
schedules them on any worker (:mod:`tensorvm.runtime.dask_plane`).
"""
from __future__ import annotations

import numpy as np

from ..framework.graph_def import Node
from ..framework.op_registry import registry
from ..vm.program import Feed, Instr, Plan, Recv, Result, Send, StageProgram, Task
from .partition import Partition

__all__ = ["Plan", "Task", "Send", "compile_plan"]


def _dev_tag(device: str) -> str:
    # "/job:ps/replica:0/task:0/device:CPU:0" -> "ps_0_cpu0"
    parts = dict(p.split(":", 1) for p in device.strip("/").split("/") if ":" in p)
    dev = parts.get("device", "CPU:0").replace(":", "").lower()
    task = parts.get("task", "0")
    if task.startswith("*"):  # floating: its group goes after the stage (see _task_name)
        task = "float"
    return f"{parts.get('job', 'x')}_{task}_{dev}"


def _task_name(graph_tag: str, device: str, stage: int) -> str:
    """``tvm_<graph>_<job>_<task>_<type><n>_s<stage>``; a floating group's task adds
    ``-<group>``: Dask's ``key_split`` stops at a dash-word holding a digit, so the map tasks
    ``…_float_cpu0_s0-map0``, ``-map1`` … share one task prefix (one bar in Dask's progress
    and task stream). Dask's task *group* of a tuple key is its whole name, so how they are
    scheduled (queued) is the runtime's choice (:mod:`tensorvm.runtime.dask_plane`)."""
    name = f"tvm_{graph_tag}_{_dev_tag(device)}_s{stage}"
    task = device.split("/task:", 1)[1].split("/", 1)[0] if "/task:*" in device else ""
    return f"{name}-{task[1:]}" if len(task) > 1 else name


def compile_plan(part: Partition, stages: dict[str, int], fetches: list, feeds: list,
                 graph_tag: str = "g", graph_ops: int = 0, fallbacks: tuple = ()) -> Plan:
    """The plan of a staged partition: group the ops into tasks, find what each task exports
    and reads, elide the Send picks that can be, and build each task's program."""
    c = _Compiler(part, stages, feeds, graph_tag)
    send_src = {p.send: c.export(_sent_ref(part.nodes[p.send])) for p in part.sends}
    fetch_src = [Feed(c.feed_index[ref]) if ref in c.feed_index else Result(*c.export(ref))
                 for ref in fetches]
    task_args, local_reads = c.task_args()
    send_specs = _send_specs(part, send_src, fetch_src, task_args, c.exports)
    send_by_name = {s.name: s for s in send_specs}
    tasks = [c.task(k, task_args[c.names[k]], local_reads[c.names[k]], send_by_name)
             for k in c.order]
    consumed = {a.task for t in tasks for a in t.args if a.__class__ is Result}
    consumed |= {s.task for s in send_specs}
    fetch_tasks = [f.task for f in fetch_src if f.__class__ is Result]
    outputs = tuple(dict.fromkeys(fetch_tasks + [t.name for t in tasks
                                                 if t.name not in consumed]))
    return Plan(tuple(tasks), tuple(send_specs), tuple(fetch_src), tuple(feeds), outputs,
                part.devices, graph_ops, tuple(fallbacks))


def _sent_ref(src: Node) -> tuple:
    """The tensor a _Send node sends: its input, or the token of its control input."""
    return src.inputs[0] if src.inputs else (src.control_inputs[0], -1)


def _send_specs(part: Partition, send_src: dict, fetch_src: list, task_args: dict,
                exports: dict) -> list:
    """One Send per pair; its pick is elided where the source task's results go to one
    consumer only (that consumer then depends on the stage itself)."""
    consumers_of: dict[str, set] = {t: set() for t in exports}
    for p in part.sends:
        consumers_of[send_src[p.send][0]].add(("dev", p.dst))
    for f in fetch_src:
        if f.__class__ is Result:
            consumers_of[f.task].add(("client",))
    for tname, args in task_args.items():
        for a in args:
            if a.__class__ is Result:
                consumers_of[a.task].add(("task", tname))
    out = []
    for p in part.sends:
        t, i = send_src[p.send]
        out.append(Send(p.send, p.src, t, i, p, len(consumers_of[t]) == 1))
    return out


class _Compiler:
    """The state of compiling one partition: its ops grouped by (device, stage) in
    topological order, each group's task name, and what each task exports (refs read by
    other tasks, by sends and by fetches, in the order first asked for)."""

    def __init__(self, part: Partition, stages: dict[str, int], feeds: list, graph_tag: str):
        self.nodes = part.nodes
        self.feed_index = {ref: i for i, ref in enumerate(feeds)}
        self.pair_by_recv = {p.recv: p for p in part.sends}
        groups: dict[tuple[str, int], list[Node]] = {}
        for name, n in self.nodes.items():
            if n.type in ("_Send", "_Recv"):
                continue
            groups.setdefault((n.device, stages[name]), []).append(n)
        self.groups = groups
        self.order = sorted(groups, key=lambda k: (k[1], k[0]))
        # Underscores, not dashes: Dask's key_split (the prefix its progress bars and task
        # stream show) stops at the first dash-word holding a digit, so "tvm-g3-ps-0-cpu0-s1"
        # read "tvm" (a floating group's "-<group>" suffix relies on that: _task_name).
        self.names = {k: _task_name(graph_tag, k[0], k[1]) for k in self.order}
        self.task_of = {n.name: self.names[k] for k in self.order for n in groups[k]}
        self.exports: dict[str, list] = {self.names[k]: [] for k in self.order}
        self._export_index: dict[str, dict] = {t: {} for t in self.exports}

    def export(self, ref) -> tuple[str, int]:
        """(task, index) of ``ref`` among its task's exports, adding it if new."""
        t = self.task_of[ref[0]]
        index = self._export_index[t]
        i = index.get(ref)
        if i is None:
            i = index[ref] = len(self.exports[t])
            self.exports[t].append(ref)
        return t, i

    def _arg_of(self, ref, tname: str):
        """What task ``tname`` receives for ``ref``: a feed, a Recv, an earlier task's result
        (exported there), or None for a value computed in the task itself."""
        if ref in self.feed_index:
            return Feed(self.feed_index[ref])
        if ref[0] in self.pair_by_recv:
            return Recv(self.pair_by_recv[ref[0]].send)
        if self.task_of.get(ref[0]) != tname:
            self.export(ref)
            return Result(self.task_of[ref[0]])
        return None

    def task_args(self) -> tuple[dict, dict]:
        """Per task: its distinct arguments in first-use order, and every (ref, argument)
        read (cross-stage, same-device reads are exported by their task too)."""
        task_args: dict[str, list] = {}
        local_reads: dict[str, list] = {}
        for k in self.order:
            tname = self.names[k]
            args: list = []
            reads: list = []
            seen: set = set()
            for n in self.groups[k]:
                refs = n.inputs + tuple([(c, -1) for c in n.control_inputs]) \
                    if n.control_inputs else n.inputs
                for ref in refs:
                    key = self._arg_of(ref, tname)
                    if key is None:
                        continue
                    if key not in seen:
                        seen.add(key)
                        args.append(key)
                    reads.append((ref, key))
            task_args[tname] = args
            local_reads[tname] = reads
        return task_args, local_reads

    def task(self, k: tuple, args: list, reads: list, send_by_name: dict) -> Task:
        """The task of group ``k``: its argument slots, then one instruction per op."""
        tname = self.names[k]
        device, st = k
        slots = _Slots()
        arg_picks, args_out = [], []
        for a in args:
            if a.__class__ is Feed:
                arg_picks.append((slots.arg(a), -1))
                args_out.append(a)
            elif a.__class__ is Recv:
                s = send_by_name[a.send]
                # elided: pick from the stage's result; else the Send task's 1-tuple
                arg_picks.append((slots.arg(a), s.index if s.elided else 0))
                args_out.append(Result(s.task) if s.elided else a)
            else:  # earlier stage on this device: one arg, several picks
                src = self._export_index[a.task]
                for ref, key in reads:
                    if key == a and ("local", ref) not in slots.of:
                        arg_picks.append((slots.local(ref), src.get(ref, -1)))
                        args_out.append(a)
        tokens = {ref[0] for ref in self.exports[tname] if ref[1] == -1}  # tokens it exports
        instrs = tuple(self._instr(n, tname, slots, tokens) for n in self.groups[k])
        export_slots = tuple(slots.out[ref] for ref in self.exports[tname])
        program = StageProgram(device, _device_type(device), slots.n, tuple(arg_picks),
                               instrs, export_slots, tname,
                               tuple(n.name for n in self.groups[k]))
        stateful = any(n.stateful for n in self.groups[k])
        return Task(tname, device, st, program, tuple(args_out), stateful)

    def _instr(self, n: Node, tname: str, slots: "_Slots", tokens: set) -> Instr:
        feed_index, pair_by_recv, task_of = self.feed_index, self.pair_by_recv, self.task_of
        in_slots = []
        for ref in n.inputs:
            if ref in feed_index:
                in_slots.append(slots.of[("arg", Feed(feed_index[ref]))])
            elif ref[0] in pair_by_recv:
                in_slots.append(slots.of[("arg", Recv(pair_by_recv[ref[0]].send))])
            elif task_of.get(ref[0]) == tname:
                in_slots.append(slots.out[ref])
            else:
                in_slots.append(slots.of[("local", ref)])
        ctl = []
        for c in n.control_inputs:  # token slots: a dead control input makes n dead
            if c in pair_by_recv:
                ctl.append(slots.of[("arg", Recv(pair_by_recv[c].send))])
            elif task_of.get(c) == tname:
                ctl.append(slots.out[(c, -1)])
            elif ("local", (c, -1)) in slots.of:
                ctl.append(slots.of[("local", (c, -1))])
        outs, tok = slots.outputs(n, n.name in tokens)
        d = registry[n.type]
        return Instr(n.type, n.name, tuple(in_slots), dict(n.attrs),
                     outs if n.num_outputs != 1 else outs[:1],
                     d.needs_ctx, n.location, tuple(ctl), tok, _out_bytes(n))


class _Slots:
    """A task's value slots: its arguments first, then each op's outputs in order."""

    def __init__(self):
        self.n = 0
        self.of: dict[tuple, int] = {}  # ("arg", arg) / ("local", ref) -> slot
        self.out: dict[tuple, int] = {}  # (op, output) of this task -> its slot (-1: token)

    def arg(self, a) -> int:
        self.of[("arg", a)] = slot = self.n
        self.n += 1
        return slot

    def local(self, ref) -> int:
        self.of[("local", ref)] = slot = self.n
        self.n += 1
        return slot

    def outputs(self, n: Node, exported_token: bool) -> tuple[tuple, int]:
        """Slots for ``n``'s outputs, and its token's own slot (-1 where the token is its
        first output)."""
        n_outs = max(n.num_outputs, 1)
        outs = tuple(range(self.n, self.n + n_outs))
        for i in range(n_outs):
            self.out[(n.name, i)] = self.n + i
        self.n += n_outs
        tok = -1
        if exported_token:
            # A control token that leaves the task gets a slot of its own (None): it must
            # not ship the op's output (a scatter's whole table) to another device.
            self.out[(n.name, -1)] = tok = self.n
            self.n += 1
        else:
            self.out[(n.name, -1)] = outs[0]  # control token
        return outs, tok


_OBJECT = np.dtype(object)


def _out_bytes(n: Node) -> int:
    """The static size in bytes of ``n``'s first output, or -1 where its shape or dtype is
    not fully known (the runtime then never offers a statically small output a buffer)."""
    if not n.out_shapes or not n.out_dtypes:
        return -1
    shape, dt = n.out_shapes[0], n.out_dtypes[0]
    if shape is None or None in shape:
        return -1
    np_dtype = getattr(dt, "np_dtype", None)
    itemsize = getattr(np_dtype, "itemsize", 0)
    if not itemsize or np_dtype == _OBJECT:
        return -1
    size = itemsize
    for d in shape:
        size *= int(d)
    return size


def _device_type(device: str) -> str:
    return "GPU" if "/device:GPU" in device else "CPU"
