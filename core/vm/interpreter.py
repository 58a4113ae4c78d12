"""The stage interpreter: what runs inside a task, on every plane.

The in-process plane (Dask's local scheduler), the Dask plane (a task per stage) and the
direct plane (registered partitions, :mod:`tensorvm.runtime.direct.data_plane`) all run a
stage through :func:`run_stage`, and so through the one :func:`execute`:

* :func:`execute` places the task's arguments in their slots and runs each instruction's
  kernel in order (:func:`_run`). A kernel's failure comes back as a ``tv.errors`` class
  naming the op, its input shapes and the user's line, chained from the original. A value is
  dropped after its last reader (:func:`_free_after`), and an element-wise kernel may write
  its output into a dead input's buffer that nothing else can see (:func:`donatable`, TF's
  ``forward_input``). A stage holding control flow, or one that received a dead value, runs
  the same loop dead-aware (TF's executor with dead-tensor propagation): an op with a dead
  input or control input is skipped and its outputs are dead; an op that ``forwards_dead``
  (Merge) runs and sees the markers.
* A program run often, with no control flow and no input a kernel could write into, runs as
  generated straight-line code instead of the loop (:mod:`tensorvm.vm.straight_line`, with
  the figures that keep it).
* Kernels are bound once per program, in a cache keyed by the program object (weakly) and
  the op registry's generation (a kernel registered later is picked up).

The plan format is :mod:`tensorvm.vm.program`; what a stage returns, :mod:`tensorvm.vm.results`;
the resources kernels touch, :mod:`tensorvm.vm.resources`.
"""
from __future__ import annotations

import sys
import threading
import time
import weakref
from collections.abc import Callable

import numpy as np

from ..framework.op_registry import generation, load_all_ops, registry
from . import straight_line
from .kernels.threads import begin_task
from .op_errors import cancelled_before, op_failed
from .program import Instr, StageProgram  # noqa: F401 - the plan format, re-exported
from .resources import (  # noqa: F401 - re-exported: kernels and planes import them here
    DeviceResources, KernelContext, ResourceMgr, _step_root, _worker_resources, resources_of)
from .results import DEAD, StageResult

# Straight-line code (tensorvm.vm.straight_line) for programs run this often; off: the loop.
STRAIGHT_LINE = True
STRAIGHT_LINE_AFTER = 3  # runs of a program before its code is generated


class _Bound:
    """A program's kernels, bound for one registry generation: ``table`` (each instruction
    as ``(kernel, input slots, attrs, output slot(s), needs_ctx, instr, stateful, frees,
    donors, forwards_dead)``), ``dead_table`` (the same without frees and donors, for the
    dead-aware run), ``cf`` (the program holds control flow), ``straight`` (its generated
    function, once made) and ``runs`` (runs counted toward generating it; None: never)."""

    __slots__ = ("gen", "table", "dead_table", "cf", "straight", "runs")

    def __init__(self, program: StageProgram):
        self.gen = generation()
        kernels = _kernel_table(program.device_type)
        if any(i.type not in kernels for i in program.instrs):
            load_all_ops()  # a plan from another process: ops of modules not imported here yet
            kernels = _kernel_table(program.device_type)
        frees = _free_after(program)
        self.table = tuple(
            (kernels[i.type], i.args, i.attrs, i.outs[0] if len(i.outs) == 1 else i.outs,
             i.needs_ctx, i, registry[i.type].stateful, f, _donors(i, f),
             registry[i.type].forwards_dead)
            for i, f in zip(program.instrs, frees))
        self.dead_table = tuple(b[:7] + ((), (), b[9]) for b in self.table)
        self.cf = any(registry[i.type].control_flow for i in program.instrs)
        self.straight = None
        eligible = STRAIGHT_LINE and not self.cf and not any(b[8] for b in self.table)
        self.runs = 0 if eligible else None


_BOUND: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _bind(program: StageProgram) -> _Bound:
    """The program's bound kernels (made once per program and registry generation)."""
    b = _BOUND.get(program)
    if b is None or b.gen != generation():
        b = _BOUND[program] = _Bound(program)
    return b


def straight_code(program: StageProgram):
    """The program's generated straight-line function, or None where it has none (yet)."""
    b = _BOUND.get(program)
    return None if b is None else b.straight


def _straighten(program: StageProgram, b: _Bound):
    """Count a run of an eligible program; on its STRAIGHT_LINE_AFTER-th, generate its
    straight-line function. Returns the function or None."""
    b.runs += 1
    if b.runs < STRAIGHT_LINE_AFTER:
        return None
    b.straight = straight_line.generate(program, b.table)
    b.runs = None
    return b.straight


def local_caller(program: StageProgram, arg_idx: tuple, picks: tuple):
    """``program`` as one generated function for a caller that holds its arguments in a list
    (a while_loop's cond, body and gradient, every iteration): ``call(feeds, rt, step_id)``
    runs it with argument ``j`` = ``feeds[arg_idx[j]]`` and returns, per ``(from_feed, i)``
    of ``picks``, ``feeds[i]`` or slot ``i``; or None where an argument is dead (the caller
    then runs :func:`execute`). Returns ``(generation, call)``, or None where the program
    does not run as straight-line code."""
    b = _bind(program)
    if (b.straight is None and b.runs is None) or \
            any(index >= 0 for _, index in program.arg_picks):
        return None
    return b.gen, straight_line.generate(program, b.table, (arg_idx, picks))


def _free_after(program: StageProgram) -> tuple[tuple[int, ...], ...]:
    """For each instruction, the slots to drop once it has run: those it is the last reader
    of (or, for an output nobody reads, the one that wrote it), never an exported slot.
    Dropping a step's intermediate values as soon as they are dead lets NumPy reuse their
    memory, still hot in cache, for the next kernels' outputs (a step used to keep every
    value alive until it ended). Computed once per program (cached with its kernels)."""
    keep = set(program.exports)
    last: dict[int, int] = {}
    for k, ins in enumerate(program.instrs):
        for s in ins.outs:
            last[s] = k
        if ins.tok >= 0:
            last[ins.tok] = k
        for s in ins.args:
            last[s] = k
        for s in ins.ctl:
            last[s] = k
    frees: list[list[int]] = [[] for _ in program.instrs]
    for s, k in last.items():
        if s not in keep:
            frees[k].append(s)
    return tuple(tuple(sorted(f)) for f in frees)


def _donors(ins, free: tuple) -> tuple:
    """``(input position, slot)`` of the inputs whose buffer ``ins``'s kernel may write its
    output into (``OpDef.forwards``): those whose slot dies with it and that it reads once."""
    forwards = registry[ins.type].forwards
    if not forwards or 0 <= getattr(ins, "out_bytes", -1) < FORWARD_MIN_BYTES:
        return ()  # statically too small to be offered (donatable would refuse it anyway)
    return tuple((pos, ins.args[pos]) for pos in forwards
                 if pos < len(ins.args) and ins.args[pos] in free
                 and ins.args.count(ins.args[pos]) == 1)


def _refs_of_slot(vals: list, slot: int) -> int:  # donatable's frame shape: a list, a local
    v = vals[slot]
    return sys.getrefcount(v)


_FREE_REFS = _refs_of_slot([np.empty(1)], 0)  # measured, not assumed (interpreters differ)
# Smaller arrays come from malloc's free lists at once: the checks would cost more (a few us
# a step) than the allocation they save.
FORWARD_MIN_BYTES = 1 << 16


def _fits(o: tuple, v: tuple) -> bool:
    """Whether shape ``o`` broadcasts to exactly ``v``."""
    if o == v or not o:
        return True
    off = len(v) - len(o)
    if off < 0:
        return False
    for i, d in enumerate(o):
        if d != 1 and d != v[off + i]:
            return False
    return True


def donatable(vals: list, ins_args: tuple, donors: tuple):
    """The input array an op may write its output into (TF's ``forward_input``), or None.

    An input qualifies when its slot dies with the op (``donors``, from :func:`_donors`), and
    the array owns its memory, is writeable (a variable's value is sealed read-only) and is
    referenced by nothing but the interpreter's slot: no other slot (an Identity's output is
    the same object), no view (a view references its base), no feed dict, no Dask result, no
    variable, no constant. The op's other inputs must broadcast to its shape with its dtype,
    so the output is exactly that array's shape and dtype. Arrays under
    :data:`FORWARD_MIN_BYTES` are not offered."""
    for _, slot in donors:
        v = vals[slot]
        if type(v) is not np.ndarray or v.nbytes < FORWARD_MIN_BYTES or \
                not v.flags.owndata or not v.flags.writeable or sys.getrefcount(v) > _FREE_REFS:
            continue
        for s in ins_args:
            if s != slot:
                o = vals[s]
                if type(o) is not np.ndarray or o.dtype != v.dtype or \
                        not _fits(o.shape, v.shape):
                    break
        else:
            return v
    return None



def execute(program: StageProgram, resources: DeviceResources, step_id, args,
            delivered: bool = True) -> list:
    """Run the program's instructions over its slots and return the slots array.

    ``args`` are the task's arguments (``index`` >= 0 in ``program.arg_picks``: one value of
    a :class:`~tensorvm.vm.results.StageResult`). ``delivered``: they may come from Dask's
    comms, so an array at an odd offset inside its message is copied first (NumPy skips BLAS
    on it and sums in another order: a result would differ in the last bit from the same step
    on one device); False for values this process's kernels made (a while_loop's)."""
    vals: list = [None] * program.nslots
    dead = False
    for (slot, index), a in zip(program.arg_picks, args):
        v = a if index < 0 else a[index]
        if delivered and type(v) is np.ndarray and not v.flags.aligned:
            v = v.copy()
        elif v is DEAD:
            dead = True
        vals[slot] = v
    b = _bind(program)
    if b.cf or dead:
        return _run(program, b.dead_table, True, resources, step_id, vals)
    straight = b.straight
    if straight is None and b.runs is not None:
        straight = _straighten(program, b)
    if straight is not None:
        return straight(vals, resources, step_id)
    return _run(program, b.table, False, resources, step_id, vals)


def execute_local(program: StageProgram, resources: DeviceResources, step_id, args) -> list:
    """:func:`execute` for arguments this process's kernels made in this step (a while_loop's
    values between iterations, its captures)."""
    return execute(program, resources, step_id, args, False)


def _run(program: StageProgram, table: tuple, dead_aware: bool, resources: DeviceResources,
         step_id, vals: list) -> list:
    """Run ``table``'s instructions over ``vals`` (see the module docstring)."""
    rm = None
    cancelled = resources._cancelled  # checked before every op: one lookup once any is set
    watched = resources._watched
    root = _step_root(step_id) if cancelled or watched else None
    # dead-aware: the slots holding a dead value, kept as they are written (a set lookup an
    # op, not a scan of its inputs; nothing to look at until a Switch made one)
    dead = {i for i, v in enumerate(vals) if v is DEAD} if dead_aware else None
    for fn, ins_args, attrs, outs, needs_ctx, ins, stateful, free, donors, fwd_dead in table:
        if cancelled:
            if root is None:
                root = _step_root(step_id)
            if root in cancelled:
                raise cancelled_before(step_id, ins)
        if dead and not fwd_dead and not (dead.isdisjoint(ins_args) and
                                          dead.isdisjoint(ins.ctl)):
            for s in ins.outs:
                vals[s] = DEAD
                dead.add(s)
            if ins.tok >= 0:
                vals[ins.tok] = DEAD
                dead.add(ins.tok)
            continue
        if stateful and watched:
            started = watched.get(root or _step_root(step_id))
            if started is not None:
                started.append(ins.name)
        try:
            if needs_ctx:
                if rm is None:
                    rm = resources.for_device(program.device)
                out = fn(KernelContext(rm, ins.name, step_id, program.device, resources),
                         *[vals[s] for s in ins_args], **attrs)
            elif donors and (d := donatable(vals, ins_args, donors)) is not None:
                # written into a dead input's buffer (OpDef.forwards)
                out = fn(*[vals[s] for s in ins_args], out=d, **attrs)
                d = None
            elif len(ins_args) == 1:
                out = fn(vals[ins_args[0]], **attrs)
            elif len(ins_args) == 2:
                out = fn(vals[ins_args[0]], vals[ins_args[1]], **attrs)
            else:
                out = fn(*[vals[s] for s in ins_args], **attrs)
        except Exception as e:  # noqa: BLE001 - re-raised with the op named
            # KeyboardInterrupt and SystemExit pass through untouched: Ctrl-C stops the step.
            raise op_failed(ins, vals, e) from e
        if stateful and registry[ins.type].commits:
            cancelled = None  # what it began runs whole: no cancellation from here (OpDef)
        if outs.__class__ is int:
            vals[outs] = out
            if dead_aware:
                _track(dead, outs, out)
        else:
            for s, o in zip(outs, out):
                vals[s] = o
                if dead_aware:
                    _track(dead, s, o)
            o = None
        out = None  # the slot holds it: a reference here would keep it from being donated
        if free:
            for s in free:
                vals[s] = None
    return vals


def _track(dead: set, slot: int, value) -> None:
    """Keep ``dead`` (the dead-aware run's dead slots) right after ``value`` went into ``slot``."""
    if value is DEAD:
        dead.add(slot)
    elif dead:
        dead.discard(slot)


def run_stage(program: StageProgram, rt, step_id, steps: int, *args):
    """A Dask task: run ``program`` (``steps`` times, for ``run(..., steps=K)``) and return
    its exports as a :class:`~tensorvm.vm.results.StageResult`. ``rt`` is the in-process
    session's DeviceResources, or None in a dask.distributed worker (then the worker
    plugin's resources are used)."""
    resources = rt if rt is not None else _worker_resources()
    begin_task()  # BLAS threads per executing thread, fresh kernel scratch (tensorvm.vm.kernels.threads)
    if program.device_type == "GPU":
        return _run_on_gpu(program, resources, step_id, steps, args)
    for _ in range(steps):
        vals = execute(program, resources, step_id, args)
    return StageResult([vals[s] for s in program.exports])


def _run_on_gpu(program: StageProgram, resources, step_id, steps: int, args):
    """``run_stage`` of a ``GPU:N`` program: inside ``cupy.cuda.Device(N)`` (the device
    backend's), so its kernels, uploads and allocations land on GPU N of this process; a
    backend without ``cuda.Device`` (the tests' fake) runs it as is."""
    from .kernels.array_api import device_backend
    device = getattr(getattr(device_backend(), "cuda", None), "Device", None)
    if device is None:
        for _ in range(steps):
            vals = execute(program, resources, step_id, args)
    else:
        with device(int(program.device.rsplit(":", 1)[1])):
            for _ in range(steps):
                vals = execute(program, resources, step_id, args)
    return StageResult([vals[s] for s in program.exports])


TRACES: dict[str, list] = {}
_TRACES_LOCK = threading.Lock()


def run_stage_traced(program: StageProgram, rt, step_id, steps: int, *args):
    """``run_stage`` that also records the task's device, worker, start/end time, ops and the
    bytes of each export into this process's ``TRACES[step_id]`` (collected after the step)."""
    start = time.time()
    out = run_stage(program, rt, step_id, steps, *args)
    try:
        from distributed import get_worker
        addr = get_worker().address
    except (ImportError, ValueError):
        addr = "in-process"
    info = {"task": program.name, "device": program.device, "worker": addr, "start": start,
            "end": time.time(), "ops": list(program.op_names),
            "export_bytes": [int(getattr(v, "nbytes", 0) or 0) for v in out]}
    with _TRACES_LOCK:
        TRACES.setdefault(str(step_id), []).append(info)
    return out


def pop_traces(step_id: str) -> list:
    """Remove and return the trace records of a step."""
    with _TRACES_LOCK:
        return TRACES.pop(str(step_id), [])


def pick(values, index: int) -> StageResult:
    """A Send task: one exported tensor out of its stage's results, so only that moves."""
    return StageResult((values[index],))


_TABLES: dict[str, dict[str, Callable]] = {}
_TABLE_GENERATION: dict[str, int] = {}


def _kernel_table(device_type: str) -> dict[str, Callable]:
    """Op type -> kernel for a device type, rebuilt when anything was registered since (the
    registry's generation counter: a replaced kernel counts, not only a new op)."""
    t = _TABLES.get(device_type)
    gen = generation()
    if t is None or _TABLE_GENERATION.get(device_type) != gen:
        t = {}
        for name, d in registry.items():
            k = d.kernels.get(device_type) or (d.kernels.get("CPU") if device_type != "CPU"
                                               else None)
            if k is not None:
                t[name] = k
        _TABLES[device_type] = t
        _TABLE_GENERATION[device_type] = gen
    return t

