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
    nodes = part.nodes
    feed_index = {ref: i for i, ref in enumerate(feeds)}
    pair_by_recv = {p.recv: p for p in part.sends}

    # Group real ops by (device, stage), in topological order.
    groups: dict[tuple[str, int], list[Node]] = {}
    for name, n in nodes.items():
        if n.type in ("_Send", "_Recv"):
            continue
        groups.setdefault((n.device, stages[name]), []).append(n)
    task_of: dict[str, str] = {}
    order = sorted(groups, key=lambda k: (k[1], k[0]))
    # Underscores, not dashes: Dask's key_split (the prefix its progress bars and task stream
    # show) stops at the first dash-word holding a digit, so "tvm-g3-ps-0-cpu0-s1" read "tvm".
    names = {k: _task_name(graph_tag, k[0], k[1]) for k in order}
    for k in order:
        for n in groups[k]:
            task_of[n.name] = names[k]

    # What each task must export: refs read by other tasks, by sends, and by fetches.
    exports: dict[str, list] = {names[k]: [] for k in order}

    def export(ref) -> tuple[str, int]:
        t = task_of[ref[0]]
        lst = exports[t]
        if ref not in lst:
            lst.append(ref)
        return t, lst.index(ref)

    # Where each Send's tensor lives: (producer task, export index).
    send_src = {}
    for p in part.sends:
        src = nodes[p.send]
        ref = src.inputs[0] if src.inputs else (src.control_inputs[0], -1)
        send_src[p.send] = export(ref)

    fetch_src = []
    for ref in fetches:
        if ref in feed_index:
            fetch_src.append(Feed(feed_index[ref]))
        else:
            fetch_src.append(Result(*export(ref)))

    # Cross-stage, same-device reads need exports too; collect per task its args.
    task_args: dict[str, list] = {}
    local_reads: dict[str, list] = {}
    for k in order:
        tname = names[k]
        args: list = []
        reads: list = []
        seen_task_args: dict = {}
        for n in groups[k]:
            refs = n.inputs + tuple([(c, -1) for c in n.control_inputs]) \
                if n.control_inputs else n.inputs
            for ref in refs:
                src_name = ref[0]
                if ref in feed_index:
                    key = Feed(feed_index[ref])
                elif src_name in pair_by_recv:
                    key = Recv(pair_by_recv[src_name].send)
                elif task_of.get(src_name) != tname:
                    key = Result(task_of[src_name])
                    export(ref)
                else:
                    continue
                if key not in seen_task_args:
                    seen_task_args[key] = len(args)
                    args.append(key)
                reads.append((ref, key))
        task_args[tname] = args
        local_reads[tname] = reads

    # Elide Send picks whose source task exports only to that one destination.
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
    send_specs = []
    for p in part.sends:
        t, i = send_src[p.send]
        elided = len(consumers_of[t]) == 1
        send_specs.append(Send(p.send, p.src, t, i, p, elided))
    send_by_name = {s.name: s for s in send_specs}

    # Build the programs.
    tasks = []
    for k in order:
        tname = names[k]
        device, st = k
        slot_of: dict[tuple, int] = {}
        out_slot: dict[tuple, int] = {}  # (op, output) of this task -> its slot (-1: token)
        nslots = 0
        arg_picks = []
        args_out = []
        for a in task_args[tname]:
            if a.__class__ is Feed:
                slot_of[("arg", a)] = nslots
                arg_picks.append((nslots, -1))
                nslots += 1
                args_out.append(a)
            elif a.__class__ is Recv:
                s = send_by_name[a.send]
                slot_of[("arg", a)] = nslots
                # elided: pick from the stage's result; else the Send task's 1-tuple
                arg_picks.append((nslots, s.index if s.elided else 0))
                args_out.append(Result(s.task) if s.elided else a)
                nslots += 1
            else:  # earlier stage on this device: one arg, several picks
                src = a.task
                for ref, key in local_reads[tname]:
                    if key == a and ("local", ref) not in slot_of:
                        slot_of[("local", ref)] = nslots
                        arg_picks.append((nslots, exports[src].index(ref)
                                          if ref in exports[src] else -1))
                        args_out.append(a)
                        nslots += 1
        instrs = []
        tokens = {ref[0] for ref in exports[tname] if ref[1] == -1}  # tokens it exports
        for n in groups[k]:
            in_slots = []
            for ref in n.inputs:
                if ref in feed_index:
                    in_slots.append(slot_of[("arg", Feed(feed_index[ref]))])
                elif ref[0] in pair_by_recv:
                    in_slots.append(slot_of[("arg", Recv(pair_by_recv[ref[0]].send))])
                elif task_of.get(ref[0]) == tname:
                    in_slots.append(out_slot[ref])
                else:
                    in_slots.append(slot_of[("local", ref)])
            ctl = []
            for c in n.control_inputs:  # token slots: a dead control input makes n dead
                if c in pair_by_recv:
                    ctl.append(slot_of[("arg", Recv(pair_by_recv[c].send))])
                elif task_of.get(c) == tname:
                    ctl.append(out_slot[(c, -1)])
                elif ("local", (c, -1)) in slot_of:
                    ctl.append(slot_of[("local", (c, -1))])
            n_outs = max(n.num_outputs, 1)
            outs = tuple(range(nslots, nslots + n_outs))
            for i in range(n_outs):
                out_slot[(n.name, i)] = nslots + i
            nslots += n_outs
            tok = -1
            if n.name in tokens:
                # A control token that leaves the task gets a slot of its own (None): it
                # must not ship the op's output (a scatter's whole table) to another device.
                out_slot[(n.name, -1)] = tok = nslots
                nslots += 1
            else:
                out_slot[(n.name, -1)] = outs[0]  # control token
            d = registry[n.type]
            instrs.append(Instr(n.type, n.name, tuple(in_slots), dict(n.attrs),
                                outs if n.num_outputs != 1 else outs[:1],
                                d.needs_ctx, n.location, tuple(ctl), tok, _out_bytes(n)))
        export_slots = tuple(out_slot[ref] for ref in exports[tname])
        program = StageProgram(device, _device_type(device), nslots, tuple(arg_picks),
                               tuple(instrs), export_slots, tname,
                               tuple(n.name for n in groups[k]))
        stateful = any(n.stateful for n in groups[k])
        tasks.append(Task(tname, device, st, program, tuple(args_out), stateful))

    consumed = {a.task for t in tasks for a in t.args if a.__class__ is Result}
    consumed |= {s.task for s in send_specs}
    fetch_tasks = [f.task for f in fetch_src if f.__class__ is Result]
    outputs = tuple(dict.fromkeys(fetch_tasks + [t.name for t in tasks
                                                 if t.name not in consumed]))
    return Plan(tuple(tasks), tuple(send_specs), tuple(fetch_src), tuple(feeds), outputs,
                part.devices, graph_ops, tuple(fallbacks))


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
