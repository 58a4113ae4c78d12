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

import dataclasses

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
    built = [c.build(k) for k in c.order]  # exports complete only after the last
    send_specs = _send_specs(part, send_src, fetch_src, built, c.exports)
    send_by_name = {s.name: s for s in send_specs}
    tasks = [c.task(b, send_by_name) for b in built]
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


def _send_specs(part: Partition, send_src: dict, fetch_src: list, built: list,
                exports: dict) -> list:
    """One Send per pair; its pick is elided where the source task's results go to one
    consumer only (that consumer then depends on the stage itself)."""
    consumers_of: dict[str, set] = {t: set() for t in exports}
    for p in part.sends:
        consumers_of[send_src[p.send][0]].add(("dev", p.dst))
    for f in fetch_src:
        if f.__class__ is Result:
            consumers_of[f.task].add(("client",))
    for b in built:
        for a in b.args:
            if a.__class__ is Result:
                consumers_of[a.task].add(("task", b.name))
    out = []
    for p in part.sends:
        t, i = send_src[p.send]
        out.append(Send(p.send, p.src, t, i, p, len(consumers_of[t]) == 1))
    return out


class _Built:
    """One task as built before every export is known: its arguments (in first-use order)
    with their slots, its instructions, and where its ops' outputs are."""
    __slots__ = ("key", "name", "args", "arg_slots", "instrs", "nslots", "stateful", "base")

    def __init__(self, key, name, args, arg_slots, instrs, nslots, stateful, base):
        self.key, self.name, self.args, self.arg_slots = key, name, args, arg_slots
        self.instrs, self.nslots, self.stateful = instrs, nslots, stateful
        self.base = base  # op -> the slot of its first output


class _Compiler:
    """The state of compiling one partition: its ops grouped by (device, stage) in
    topological order, each group's task name, and what each task exports (refs read by
    other tasks, by sends and by fetches, in the order first asked for).

    A task's value slots: its arguments first (a feed, a Recv, or each value read from an
    earlier task of its device), then each op's outputs in order (and a slot of its own for a
    control token another task waits on). A slot is ``base[op] + output``: no per-output
    table (this runs once per op of every step planned)."""

    def __init__(self, part: Partition, stages: dict[str, int], feeds: list, graph_tag: str):
        self.nodes = nodes = part.nodes
        self.feed_index = {ref: i for i, ref in enumerate(feeds)}
        self.fed_ops = {ref[0] for ref in feeds}
        self.pair_by_recv = {p.recv: p for p in part.sends}
        # (device, stage) -> [task name, nodes, op names, reads from outside the task]
        groups: dict[tuple[str, int], list] = {}
        task_of: dict[str, str] = {}  # op -> its task's name (one str object per task)
        task_get = task_of.get
        fed_ops, pair_by_recv = self.fed_ops, self.pair_by_recv
        # ops whose control token another task (or a control Send) waits on: their token
        # gets a slot of its own (None), so the op's output (a scatter's whole table) does
        # not move
        tokens = {p.tensor[0] for p in part.sends if p.tensor[1] < 0}
        # One walk (in topological order, so an op's producers are grouped before it): each
        # op's task, and the refs each task reads from outside itself (a feed, a Recv, an
        # earlier task), in order: its arguments.
        for name, n in nodes.items():
            typ = n.type
            if typ == "_Send" or typ == "_Recv":
                continue
            key = (n.device, stages[name])
            g = groups.get(key)
            if g is None:
                # Underscores, not dashes: Dask's key_split (the prefix its progress bars and
                # task stream show) stops at the first dash-word holding a digit, so
                # "tvm-g3-ps-0-cpu0-s1" read "tvm" (a floating group's "-<group>" suffix
                # relies on that: _task_name).
                g = groups[key] = [_task_name(graph_tag, key[0], key[1]), [], [], []]
            t = g[0]
            g[1].append(n)
            g[2].append(name)
            task_of[name] = t
            for ref in n.inputs:
                if task_get(ref[0]) is not t or ref[0] in fed_ops:
                    g[3].append(ref)
            if n.control_inputs:
                for c in n.control_inputs:
                    if task_get(c) is not t:
                        g[3].append((c, -1))
                        if c not in pair_by_recv:
                            tokens.add(c)
        self.groups = groups
        self.task_of = task_of
        self.order = sorted(groups, key=lambda k: (k[1], k[0]))
        self.exports: dict[str, list] = {groups[k][0]: [] for k in self.order}
        self._export_index: dict[str, dict] = {t: {} for t in self.exports}
        self.tokens = tokens
        self.tok: dict[str, int] = {}  # op -> its exported token's own slot
        self.needs_ctx: dict[str, bool] = {}  # op type -> its OpDef's needs_ctx
        # slot tuples alike shared between instructions (most are: (0,), (3, 1) ...): far
        # fewer objects for the garbage collector to walk while the plan lives
        self.shared: dict = {}  # slot tuple -> itself; slot -> its 1-tuple
        self.out_bytes: dict[tuple, int] = {}  # (shape, dtype) -> _out_bytes

    def export(self, ref) -> tuple[str, int]:
        """(task, index) of ``ref`` among its task's exports, adding it if new."""
        t = self.task_of[ref[0]]
        index = self._export_index[t]
        i = index.get(ref)
        if i is None:
            i = index[ref] = len(self.exports[t])
            self.exports[t].append(ref)
        return t, i

    def build(self, k: tuple) -> _Built:
        """Group ``k``'s task but for what depends on every task (its exports, elided
        picks): its arguments and their slots, then one instruction per op."""
        tname, group, _, reads = self.groups[k]
        feed_index, fed_ops, pair_by_recv = self.feed_index, self.fed_ops, self.pair_by_recv
        task_of, exports, export_index = self.task_of, self.exports, self._export_index
        # Its arguments, in first-use order; the refs read from each earlier task.
        args: list = []
        feed_arg, recv_arg, task_arg = {}, {}, {}  # feed index / send / task -> argument
        local: dict = {}  # task -> the refs read from it, in first-read order
        for ref in reads:
            p = ref[0]
            if p in fed_ops and ref in feed_index:
                i = feed_index[ref]
                if i not in feed_arg:
                    feed_arg[i] = a = Feed(i)
                    args.append(a)
                continue
            if p in pair_by_recv:
                send = pair_by_recv[p].send
                if send not in recv_arg:
                    recv_arg[send] = a = Recv(send)
                    args.append(a)
                continue
            t = task_of[p]
            if t is tname:  # (a fed op's other output, computed here)
                continue
            index = export_index[t]  # (export(ref), inline)
            if ref not in index:
                index[ref] = len(exports[t])
                exports[t].append(ref)
            if t not in task_arg:
                task_arg[t] = a = Result(t)
                args.append(a)
                local[t] = {}
            local[t][ref] = None
        # Argument slots: one per feed or Recv, one per value read from an earlier task.
        arg_slots: list = []  # per argument: its slot, or [(ref, slot)] for a Result
        feed_slot, recv_slot, local_slot = {}, {}, {}
        k_slot = 0
        for a in args:
            cls = a.__class__
            if cls is Result:
                refs = []
                for ref in local[a.task]:
                    local_slot[ref] = k_slot
                    refs.append((ref, k_slot))
                    k_slot += 1
                arg_slots.append(refs)
                continue
            if cls is Feed:
                feed_slot[a.index] = k_slot
            else:
                recv_slot[a.send] = k_slot
            arg_slots.append(k_slot)
            k_slot += 1
        # One instruction per op.
        base: dict[str, int] = {}  # op of this task -> the slot of its first output
        tok_of, tokens = self.tok, self.tokens
        needs_ctx, out_bytes = self.needs_ctx, self.out_bytes
        make_instr = _make_instr
        shared = self.shared
        instrs = []
        stateful = False
        for n in group:
            ins = n.inputs
            if ins:
                in_slots = []
                for ref in ins:
                    p = ref[0]
                    if p in fed_ops and ref in feed_index:
                        in_slots.append(feed_slot[feed_index[ref]])
                    elif p in base:  # an op of this task (before this one)
                        in_slots.append(base[p] + ref[1])
                    elif p in pair_by_recv:
                        in_slots.append(recv_slot[pair_by_recv[p].send])
                    else:
                        in_slots.append(local_slot[ref])
                in_slots = tuple(in_slots)
                in_slots = shared.setdefault(in_slots, in_slots)
            else:
                in_slots = ()
            ctl = ()
            if n.control_inputs:  # token slots: a dead control input makes n dead
                ctl = []
                for c in n.control_inputs:
                    if c in pair_by_recv:
                        ctl.append(recv_slot[pair_by_recv[c].send])
                    elif c in base:
                        ctl.append(tok_of.get(c, base[c]))
                    elif (c, -1) in local_slot:
                        ctl.append(local_slot[(c, -1)])
                ctl = tuple(ctl)
            name = n.name
            base[name] = k_slot
            n_outs = n.num_outputs
            if n_outs <= 1:
                outs = shared.get(k_slot) or shared.setdefault(k_slot, (k_slot,))
                k_slot += 1
            else:
                outs = tuple(range(k_slot, k_slot + n_outs))
                k_slot += n_outs
            tok = -1
            if name in tokens:
                # A control token that leaves the task gets a slot of its own (None): it must
                # not ship the op's output (a scatter's whole table) to another device.
                tok = tok_of[name] = k_slot
                k_slot += 1
            typ = n.type
            ctx = needs_ctx.get(typ)
            if ctx is None:
                ctx = needs_ctx[typ] = registry[typ].needs_ctx
            shapes, dts = n.out_shapes, n.out_dtypes
            if shapes and dts:
                ob_key = (shapes[0], id(dts[0]))  # (the node keeps its dtype alive)
                try:
                    ob = out_bytes.get(ob_key)
                    if ob is None:
                        ob = out_bytes[ob_key] = _out_bytes(n)
                except TypeError:  # a shape that is no tuple (a node made by hand)
                    ob = _out_bytes(n)
            else:
                ob = -1
            if n.stateful:
                stateful = True
            instrs.append(make_instr(typ, name, in_slots, dict(n.attrs), outs, ctx, n.location,
                                     ctl, tok, ob))
        return _Built(k, tname, args, arg_slots, tuple(instrs), k_slot, stateful, base)

    def task(self, b: _Built, send_by_name: dict) -> Task:
        """The task of a built group, now that its exports and every Send are known."""
        device, st = b.key
        arg_picks, args_out = [], []
        for a, slot in zip(b.args, b.arg_slots):
            cls = a.__class__
            if cls is Feed:
                arg_picks.append((slot, -1))
                args_out.append(a)
            elif cls is Recv:
                s = send_by_name[a.send]
                # elided: pick from the stage's result; else the Send task's 1-tuple
                arg_picks.append((slot, s.index if s.elided else 0))
                args_out.append(Result(s.task) if s.elided else a)
            else:  # earlier stage on this device: one arg, several picks
                src = self._export_index[a.task]
                for ref, ref_slot in slot:
                    arg_picks.append((ref_slot, src.get(ref, -1)))
                    args_out.append(a)
        base, tok = b.base, self.tok
        export_slots = tuple(base[r[0]] + r[1] if r[1] >= 0 else tok.get(r[0], base[r[0]])
                             for r in self.exports[b.name])
        program = StageProgram(device, _device_type(device), b.nslots, tuple(arg_picks),
                               b.instrs, export_slots, b.name, tuple(self.groups[b.key][2]))
        return Task(b.name, device, st, program, tuple(args_out), b.stateful)


_INSTR_FIELDS = ("type", "name", "args", "attrs", "outs", "needs_ctx", "location", "ctl",
                 "tok", "out_bytes")


def _instr_maker():
    """A function making an :class:`~tensorvm.vm.program.Instr` from its fields, as
    ``Instr(...)`` does, with each slot set through its descriptor: the frozen dataclass's
    ``__init__`` looks up ``object.__setattr__`` once per field, and compile makes one Instr
    per op planned. ``Instr`` itself where its fields are not the ten expected."""
    if tuple(f.name for f in dataclasses.fields(Instr)) != _INSTR_FIELDS:
        return Instr
    s0, s1, s2, s3, s4, s5, s6, s7, s8, s9 = (getattr(Instr, f).__set__
                                              for f in _INSTR_FIELDS)
    new = object.__new__

    def make(typ, name, args, attrs, outs, needs_ctx, location, ctl, tok, out_bytes):
        i = new(Instr)
        s0(i, typ)
        s1(i, name)
        s2(i, args)
        s3(i, attrs)
        s4(i, outs)
        s5(i, needs_ctx)
        s6(i, location)
        s7(i, ctl)
        s8(i, tok)
        s9(i, out_bytes)
        return i
    return make


_make_instr = _instr_maker()
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
