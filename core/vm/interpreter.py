"""What runs inside a task: resources on their device and the tiny stage interpreter.

* :class:`ResourceMgr` — one per device, keyed by ``(container, name)`` (TF's ResourceMgr). In a
  dask.distributed worker the managers live in the worker process (set up by the worker plugin
  ``tensorvm.runtime.dask_plane.ResourcePlugin``), so they outlive sessions and clients; an
  in-process session owns its own managers.
* :class:`StageProgram` — the compiled ops of one (device, stage) task: a flat list of
  instructions over numbered value slots.
* :func:`run_stage` — the interpreter: about fifteen lines that run each instruction's kernel
  and return the exported slots. A kernel's failure comes back as a ``tv.errors`` class naming
  the op, its input shapes and the user's line, chained from the original. A value is
  dropped after its last reader (:func:`_free_after`), and an element-wise kernel may write
  its output into a dead input's buffer that nothing else can see (:func:`donatable`, TF's
  ``forward_input``).
"""
from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..framework import errors
from ..framework.op_registry import generation, registry
from .kernels.threads import begin_task


class ResourceMgr:
    """Resources of one device: variables, queues, readers, random generators.

    ``lost`` (set on a worker that took over the device of a worker that left the cluster)
    says how the device's state was lost: a resource whose class declares
    ``LOST_WITH_WORKER = True`` (a queue: its elements and its epoch) that existed on the lost
    worker (``lost_names``: its ``(container, name)`` pairs; None: every one) is then never
    silently re-created empty; using it fails with UnavailableError naming it until the program
    clears it on purpose (``tv.Session.reset``). A name the lost worker never held is created as
    usual. A variable is re-created by assigning it (an initializer, a restored checkpoint);
    until then reading it is FailedPreconditionError. ``on_created(device, container, name)``,
    if set, is told of every LOST_WITH_WORKER resource made here (a worker reports them to the
    scheduler, which remembers what a lost worker held).
    """

    def __init__(self, device: str, lost: str | None = None, lost_names=None,
                 on_created: Callable[[str, str, str], None] | None = None):
        self.device = device
        self._res: dict[tuple[str, str], Any] = {}
        self._lock = threading.Lock()
        self.lost = lost
        self.lost_names = _pairs(lost_names)
        self.on_created = on_created
        self._lost_lifted: set[str] = set()  # containers cleared on purpose since the loss

    def lookup_or_create(self, container: str, name: str, factory: Callable[[], Any]):
        key = (container, name)
        res = self._res.get(key)
        if res is None:
            with self._lock:
                res = self._res.get(key)
                if res is None:
                    res = factory()
                    if getattr(res, "LOST_WITH_WORKER", False) and self._was_lost(key):
                        kind = getattr(res, "kind", type(res).__name__)
                        raise errors.UnavailableError(
                            f"{kind} {name!r} on {self.device} was lost: "
                            f"{self.lost}. It is not re-created empty behind the program's "
                            "back; clear it on purpose with tv.Session.reset(target) (or "
                            "restore the program's state) before using it again")
                    self._res[key] = res
                    if self.on_created is not None and getattr(res, "LOST_WITH_WORKER", False):
                        self.on_created(self.device, container, name)
        return res

    def _was_lost(self, key: tuple[str, str]) -> bool:
        """Whether the resource ``(container, name)`` died with this device's lost worker and
        has not been cleared on purpose since."""
        return bool(self.lost) and key[0] not in self._lost_lifted and \
            (self.lost_names is None or key in self.lost_names)

    def lookup(self, container: str, name: str):
        try:
            return self._res[(container, name)]
        except KeyError:
            raise errors.NotFoundError(
                f"resource {container or ''}/{name} does not exist on {self.device}") from None

    def clear(self, containers=None) -> int:
        with self._lock:
            if containers is None:
                self.lost = None
            else:
                self._lost_lifted.update(containers)
            keys = [k for k in self._res if containers is None or k[0] in containers]
            for k in keys:
                res = self._res.pop(k)
                if hasattr(res, "close"):
                    try:
                        res.close(cancel_pending_enqueues=True)
                    except TypeError:
                        res.close()
            return len(keys)

    def names(self) -> list[tuple[str, str]]:
        return sorted(self._res)


class DeviceResources:
    """The resource managers of one process, by device (a worker may hold several devices),
    and the per-step cancellation marks (TF's CancellationManager): a step the client gave up
    (timeout, error, Ctrl-C) is marked here, and :func:`execute` checks the mark before every
    op, so a running stage stops at its next op and a stage that starts later runs nothing.
    ``watch_step`` records the stateful ops a step starts (only for watched steps: in-process
    steps with a deadline), so a timeout can say which of them may already have run."""

    MAX_CANCELLED = 4096  # marks kept (step ids are unique; old marks only cost memory)

    def __init__(self):
        self._mgrs: dict[str, ResourceMgr] = {}
        self._lock = threading.Lock()
        self._cancelled: dict[str, None] = {}  # step roots given up by the client, in order
        self._watched: dict[str, list[str]] = {}  # step root -> stateful ops started
        # "/job:J/replica:0/task:T/" -> (how its state was lost, the names lost or None: all)
        self._lost: dict[str, tuple[str, Any]] = {}
        self.on_created: Callable[[str, str, str], None] | None = None  # see ResourceMgr
        self.on_cleared: Callable[[Any], None] | None = None  # told clear()'s containers

    def mark_lost(self, task_prefix: str, how: str, names=None) -> None:
        """This process took over a logical task whose worker left: its resources that are
        not re-created silently (queues) and that the lost worker held (``names``:
        ``(container, name)`` pairs; None: every one) fail until cleared on purpose."""
        with self._lock:
            self._lost[task_prefix] = (how, names)
            for dev, mgr in self._mgrs.items():
                if dev.startswith(task_prefix):
                    mgr.lost, mgr.lost_names = how, _pairs(names)

    def cancel_step(self, step_id: str) -> list[str]:
        """Mark a step as given up: its ops not yet started never run, and blocking kernels
        of it (queue waits) stop waiting. Returns the stateful ops it started, if watched."""
        root = _step_root(step_id)
        with self._lock:
            self._cancelled[root] = None
            while len(self._cancelled) > self.MAX_CANCELLED:
                del self._cancelled[next(iter(self._cancelled))]
            return list(self._watched.get(root, ()))

    def is_cancelled(self, step_id) -> bool:
        return bool(self._cancelled) and _step_root(step_id) in self._cancelled

    def watch_step(self, step_id: str) -> None:
        self._watched[_step_root(step_id)] = []

    def unwatch_step(self, step_id: str) -> list[str]:
        return self._watched.pop(_step_root(step_id), [])

    def for_device(self, device: str) -> ResourceMgr:
        mgr = self._mgrs.get(device)
        if mgr is None:
            with self._lock:
                how, names = next((v for p, v in self._lost.items() if device.startswith(p)),
                                  (None, None))
                mgr = self._mgrs.setdefault(device, ResourceMgr(device, how, names,
                                                                self.on_created))
        return mgr

    def clear(self, containers=None) -> int:
        if containers is None:
            self._lost.clear()
        n = sum(m.clear(containers) for m in list(self._mgrs.values()))
        if self.on_cleared is not None:
            self.on_cleared(containers)
        return n


def _pairs(names) -> frozenset | None:
    """``(container, name)`` pairs as a set (they may come as lists from a message)."""
    return None if names is None else frozenset((str(c), str(n)) for c, n in names)


def resources_of(worker) -> DeviceResources:
    """The DeviceResources of a Dask worker process, created on first use."""
    res = getattr(worker, "_tensorvm_resources", None)
    if res is None:
        res = worker._tensorvm_resources = DeviceResources()
    return res


def _worker_resources() -> DeviceResources:
    from distributed import get_worker
    return resources_of(get_worker())


def _step_root(step_id) -> str:
    """The key of a step's cancellation and watch marks: its id, ``token.N`` (one step per
    submission; ``steps=K`` runs under the one id)."""
    return step_id if step_id.__class__ is str else str(step_id)


@dataclass
class KernelContext:
    """What a stateful kernel (``needs_ctx=True``) receives first."""
    resources: ResourceMgr
    op_name: str
    step_id: Any
    device: str
    rt: Any = None  # the process's DeviceResources

    def cancelled(self) -> bool:
        """Whether the client gave this step up (in-process; in a Dask worker the task's own
        state says so, see data_flow_ops.Waiter)."""
        return self.rt is not None and self.rt.is_cancelled(self.step_id)


class _Dead:
    """TF's *dead tensor* (a Switch's untaken output): one marker object, kept one across
    pickling, so a dead value sent to another device arrives dead."""

    __slots__ = ()
    _instance = None

    def __new__(cls):
        if cls._instance is None:
            cls._instance = object.__new__(cls)
        return cls._instance

    def __reduce__(self):
        return (_Dead, ())

    def __repr__(self):
        return "DEAD"


DEAD = _Dead()


@dataclass(frozen=True)
class Instr:
    """One op to run: its kernel's op type, input slots, attrs, output slots. ``ctl``: the
    slots of its control inputs' tokens and ``tok`` its own token slot when it has one apart
    (read only by the dead-aware loop: a dead control input makes the op dead)."""
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


@dataclass(frozen=True)
class StageProgram:
    """The ops of one (device, stage) task in topological order.

    ``arg_picks[i] = (slot, index)``: the i-th task argument goes to ``slot`` (``index`` >= 0
    picks one export out of an earlier stage's tuple on the same device). ``exports`` are the
    slots returned, in order.
    """
    device: str
    device_type: str
    nslots: int
    arg_picks: tuple[tuple[int, int], ...]
    instrs: tuple[Instr, ...]
    exports: tuple[int, ...]
    name: str = ""
    op_names: tuple[str, ...] = field(default=())

    def __getstate__(self):
        state = dict(self.__dict__)
        state.pop("_bound", None)  # kernels are re-resolved where the program runs
        return state


# Every value that crosses tasks is a tuple whose first element is this tiny array. Dask reads
# a message's first out-of-band buffer together with its header, at whatever offset the header
# ends, so a lone large array would arrive unaligned (NumPy then skips BLAS, slower and with
# other rounding than on one device); as the *second* buffer it gets an allocation of its own.
ALIGN_GUARD = np.zeros(1, np.uint64)


def _describe_inputs(vals, instr):
    shapes = []
    for s in instr.args:
        v = vals[s]
        shapes.append(f"{getattr(v, 'dtype', type(v).__name__)}{list(np.shape(v))}"
                      if v is not None else "None")
    return ", ".join(shapes)


def _fail(instr, vals, exc):
    if isinstance(exc, errors.OpError):
        if f"for op {instr.name!r}" in str(exc) or exc.op is not None:
            return exc
        cls = type(exc)
    elif isinstance(exc, (ValueError, TypeError, IndexError, np.linalg.LinAlgError)):
        cls = errors.InvalidArgumentError
    elif isinstance(exc, MemoryError):
        cls = errors.ResourceExhaustedError
    else:
        cls = errors.UnknownError
    msg = getattr(exc, "message", None) or f"{type(exc).__name__}: {exc}"
    new = cls(f"{msg}\n  for op {instr.name!r} ({instr.type}) with inputs "
              f"({_describe_inputs(vals, instr)}), created at {instr.location}")
    new.__cause__ = exc
    return new


def _bind(program: StageProgram) -> tuple:
    """Resolve each instruction's kernel once per program object (cached on it, with the
    registry generation it was bound at: a kernel registered later is picked up)."""
    cached = program.__dict__.get("_bound")
    if cached is None or cached[0] != generation():
        kernels = _kernel_table(program.device_type)
        bound = tuple((kernels[i.type], i.args, i.attrs,
                       i.outs[0] if len(i.outs) == 1 else i.outs, i.needs_ctx, i,
                       registry[i.type].stateful)
                      for i in program.instrs)
        cf = any(registry[i.type].control_flow for i in program.instrs)
        frees = _free_after(program)
        # the plain loop's table: each instruction with the slots it frees and the inputs it
        # may write its output into (donors)
        bound_free = tuple(b + (f, _donors(i, f)) for b, f, i in zip(bound, frees,
                                                                      program.instrs))
        # straight-line code is generated on the program's STRAIGHT_LINE_AFTER-th run
        # (_straighten): a program run once (a first step, a one-off plan) does not pay for
        # generating and compiling it (~40 us an instruction)
        eligible = STRAIGHT_LINE and not cf and not any(b[-1] for b in bound_free)
        cached = (generation(), bound, cf, bound_free, None, [0] if eligible else None)
        object.__setattr__(program, "_bound", cached)
    return cached[1], cached[2]


def _straighten(program: StageProgram, cached: tuple):
    """Count a run of an eligible program; on its STRAIGHT_LINE_AFTER-th, generate its
    straight-line function (kept in its ``_bound``). Returns the function or None."""
    runs = cached[5]
    runs[0] += 1
    if runs[0] < STRAIGHT_LINE_AFTER:
        return None
    straight = _straight_line(program, cached[3])
    object.__setattr__(program, "_bound", cached[:4] + (straight, None))
    return straight


# Programs with no control flow and no input a kernel could write into run as one generated
# Python function (the instructions as straight-line code over local variables): the same
# kernels in the same order, the same cancellation, watch and error rules as execute()'s
# loop, without its per-instruction dispatch (a while_loop runs its body's program once per
# iteration, so that dispatch is most of a small body's time after its kernels).
STRAIGHT_LINE = True
STRAIGHT_LINE_AFTER = 3  # runs of a program before its code is generated


def local_caller(program: StageProgram, arg_idx: tuple, picks: tuple):
    """``program`` as one generated function for a caller that holds its arguments in a list
    (a while_loop's cond, body and gradient, every iteration): ``call(feeds, rt, step_id)``
    runs it with argument ``j`` = ``feeds[arg_idx[j]]`` and returns, per ``(from_feed, i)``
    of ``picks``, ``feeds[i]`` or slot ``i``; or None where an argument is dead (the caller
    then runs :func:`execute`). Returns ``(generation, call)``, or None where the program
    does not run as straight-line code."""
    _bind(program)
    cached = program._bound
    if (cached[4] is None and cached[5] is None) or \
            any(index >= 0 for _, index in program.arg_picks):
        return None
    return cached[0], _straight_line(program, cached[3], (arg_idx, picks))


def _straight_line(program: StageProgram, bound_free, call_spec=None) -> Callable:
    """``execute``'s loop for ``program`` as generated code: ``run(vals, rt, step_id)``
    takes the slots list with the arguments in place and returns it with the exports set
    (with ``call_spec``: :func:`local_caller`'s function)."""
    instrs = tuple(b[5] for b in bound_free)
    const_kernel = registry["Const"].kernels.get("CPU") if "Const" in registry else None
    env: dict[str, Any] = {"_KC": KernelContext, "_root": _step_root, "_cancel": _cancel,
                           "_started": _started, "_DEAD": DEAD,
                           "_fail_at": lambda i, local, e: _fail_at(instrs, i, local, e)}
    arg_slots = sorted({slot for slot, _ in program.arg_picks})
    if call_spec is None:
        lines = ["def run(vals, rt, step_id):"]
        lines += [f"    s{a} = vals[{a}]; vals[{a}] = None" for a in arg_slots]
    else:
        lines = ["def run(feeds, rt, step_id):"]
        for (slot, _), pos in zip(program.arg_picks, call_spec[0]):
            lines.append(f"    s{slot} = feeds[{pos}]")
            lines.append(f"    if s{slot} is _DEAD: return None")
    lines += ["    c = rt._cancelled", "    w = rt._watched", "    rm = None", "    i = -1",
              "    try:"]
    written = set(arg_slots)
    for k, (fn, ins_args, attrs, outs, needs_ctx, ins, stateful, free, _) in \
            enumerate(bound_free):
        env[f"K{k}"], env[f"I{k}"] = fn, ins
        lines.append(f"        i = {k}")
        lines.append(f"        if c and _root(step_id) in c: raise _cancel(step_id, I{k})")
        if stateful:
            lines.append(f"        if w: _started(w, step_id, I{k}.name)")
        call_args = [f"s{a}" for a in ins_args]
        if needs_ctx:
            lines.append(f"        if rm is None: rm = rt.for_device({program.device!r})")
            call_args.insert(0, f"_KC(rm, I{k}.name, step_id, {program.device!r}, rt)")
        if attrs:
            env[f"A{k}"] = attrs
            call_args.append(f"**A{k}")
        call = f"K{k}({', '.join(call_args)})"
        if fn is const_kernel and not ins_args and not needs_ctx:
            env[f"V{k}"] = attrs["value"]  # what the kernel returns, as it is
            call = f"V{k}"
        if outs.__class__ is int:
            lines.append(f"        s{outs} = {call}")
            written.add(outs)
        else:
            lines.append(f"        _o = {call}")
            for j, o in enumerate(outs):
                lines.append(f"        s{o} = _o[{j}]")
            written.update(outs)
            lines.append("        _o = None")
        for f in free:
            if f in written:
                lines.append(f"        s{f} = None")
    lines.append("    except Exception as e:  # noqa: BLE001 - re-raised with the op named")
    lines.append("        err = _fail_at(i, locals(), e)")
    lines.append("        if err is e: raise")
    lines.append("        raise err from e")
    if call_spec is None:
        for e in program.exports:
            if e in written:
                lines.append(f"    vals[{e}] = s{e}")
        lines.append("    return vals")
    else:
        res = [f"feeds[{i}]" if from_feed else (f"s{i}" if i in written else "None")
               for from_feed, i in call_spec[1]]
        lines.append(f"    return [{', '.join(res)}]")
    code = compile("\n".join(lines), f"<tensorvm program {program.name or '?'}>", "exec")
    exec(code, env)  # noqa: S102 - our own generated source, no user text in it
    return env["run"]


def _fail_at(instrs, i: int, local: dict, exc: Exception):
    """The error of a generated program's instruction ``i``, as :func:`_fail` makes it (its
    inputs' shapes from the function's locals); a cancellation passes as it is."""
    if getattr(exc, "_tv_cancel", False):
        return exc
    vals = _SlotView(local)
    return _fail(instrs[i], vals, exc)


class _SlotView:
    """Slot ``s`` of a generated program is its local ``s<s>`` (None once freed)."""

    def __init__(self, local: dict):
        self.local = local

    def __getitem__(self, s: int):
        return self.local.get(f"s{s}")


def _cancel(step_id, ins) -> errors.CancelledError:
    err = _cancelled_error(step_id, ins)
    err._tv_cancel = True  # not re-wrapped by the generated program's handler
    return err


def _started(watched: dict, step_id, name: str) -> None:
    started = watched.get(_step_root(step_id))
    if started is not None:
        started.append(name)


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


def _cancelled_error(step_id, ins) -> errors.CancelledError:
    return errors.CancelledError(
        f"step {_step_root(step_id)} was cancelled before op {ins.name!r} ({ins.type}) ran; "
        f"created at {ins.location}")


def execute(program: StageProgram, resources: DeviceResources, step_id, args) -> list:
    """Run the program's instructions over its slots and return the slots array."""
    vals: list = [None] * program.nslots
    dead = False
    for (slot, index), a in zip(program.arg_picks, args):
        v = a if index < 0 else a[index + 1]  # [0] is the alignment guard
        if type(v) is np.ndarray and not v.flags.aligned:
            # Dask may deliver a small array at an odd offset inside its message; NumPy then
            # skips BLAS and sums in another order, so a result would differ in the last bit
            # from the same step on one device.
            v = v.copy()
        elif v is DEAD:
            dead = True
        vals[slot] = v
    bound, cf = _bind(program)
    if cf or dead:
        return _execute_dead(program, resources, step_id, vals, bound)
    cached = program._bound
    straight = cached[4]
    if straight is None and cached[5] is not None:
        straight = _straighten(program, cached)
    if straight is not None:
        return straight(vals, resources, step_id)
    rm = None
    cancelled = resources._cancelled  # checked before every op: one lookup once any is set
    watched = resources._watched
    root = _step_root(step_id) if cancelled or watched else None
    for fn, ins_args, attrs, outs, needs_ctx, ins, stateful, free, donors in program._bound[3]:
        if cancelled:
            if root is None:
                root = _step_root(step_id)
            if root in cancelled:
                raise _cancelled_error(step_id, ins)
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
            raise _fail(ins, vals, e) from e
        if outs.__class__ is int:
            vals[outs] = out
        else:
            for s, o in zip(outs, out):
                vals[s] = o
            o = None
        out = None  # the slot holds it: a reference here would keep it from being donated
        if free:
            for s in free:
                vals[s] = None
    return vals


def execute_local(program: StageProgram, resources: DeviceResources, step_id, args) -> list:
    """:func:`execute` for arguments this process's kernels made in this step (a while_loop's
    values between iterations, its captures): the same run, without the unaligned-buffer
    check that values delivered by Dask need."""
    cached = program.__dict__.get("_bound")
    if cached is None or cached[0] != generation() or cached[4] is None:
        return execute(program, resources, step_id, args)  # counts toward straight-line
    vals: list = [None] * program.nslots
    for (slot, index), a in zip(program.arg_picks, args):
        if a is DEAD or index >= 0:
            return execute(program, resources, step_id, args)
        vals[slot] = a
    return cached[4](vals, resources, step_id)


def _execute_dead(program: StageProgram, resources: DeviceResources, step_id, vals: list,
                  bound) -> list:
    """:func:`execute`'s loop for a stage that holds control flow or received a dead value
    (TF's executor with dead-tensor propagation): an op with a dead input or a dead control
    input is not run and its outputs are dead; an op that ``forwards_dead`` (Merge) runs and
    sees the markers."""
    rm = None
    for fn, ins_args, attrs, outs, needs_ctx, ins, stateful in bound:
        if resources._cancelled and _step_root(step_id) in resources._cancelled:
            raise _cancelled_error(step_id, ins)
        if not registry[ins.type].forwards_dead and (
                any(vals[s] is DEAD for s in ins_args) or any(vals[s] is DEAD for s in ins.ctl)):
            for s in ins.outs:
                vals[s] = DEAD
            if ins.tok >= 0:
                vals[ins.tok] = DEAD
            continue
        if stateful and resources._watched:
            started = resources._watched.get(_step_root(step_id))
            if started is not None:
                started.append(ins.name)
        try:
            if needs_ctx:
                if rm is None:
                    rm = resources.for_device(program.device)
                out = fn(KernelContext(rm, ins.name, step_id, program.device, resources),
                         *[vals[s] for s in ins_args], **attrs)
            else:
                out = fn(*[vals[s] for s in ins_args], **attrs)
        except Exception as e:  # noqa: BLE001 - re-raised with the op named
            raise _fail(ins, vals, e) from e
        if outs.__class__ is int:
            vals[outs] = out
        else:
            for s, o in zip(outs, out):
                vals[s] = o
    return vals


def run_stage(program: StageProgram, rt, step_id, steps: int, *args):
    """A Dask task: run ``program`` (``steps`` times, for ``run(..., steps=K)``) and return the
    tuple ``(ALIGN_GUARD, *exports)``. ``rt`` is the in-process session's DeviceResources, or
    None in a dask.distributed worker (then the worker plugin's resources are used)."""
    resources = rt if rt is not None else _worker_resources()
    begin_task()  # BLAS threads per executing thread, fresh kernel scratch (tensorvm.vm.kernels.threads)
    if program.device_type == "GPU":
        return _run_on_gpu(program, resources, step_id, steps, args)
    for _ in range(steps):
        vals = execute(program, resources, step_id, args)
    return (ALIGN_GUARD,) + tuple(vals[s] for s in program.exports)


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
    return (ALIGN_GUARD,) + tuple(vals[s] for s in program.exports)


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
            "export_bytes": [int(getattr(v, "nbytes", 0) or 0) for v in out[1:]]}
    with _TRACES_LOCK:
        TRACES.setdefault(str(step_id), []).append(info)
    return out


def pop_traces(step_id: str) -> list:
    """Remove and return the trace records of a step."""
    with _TRACES_LOCK:
        return TRACES.pop(str(step_id), [])


def pick(values, index: int):
    """A Send task: one exported tensor out of its stage's results, so only that moves."""
    return (ALIGN_GUARD, values[index + 1])


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
