"""A stage program as generated straight-line Python: :func:`~tensorvm.vm.interpreter.execute`'s
loop unrolled over one program's instructions, locals for slots.

The same kernels in the same order, the same cancellation, watch and error rules as the loop,
without its per-instruction dispatch: a while_loop runs its body's program once per
iteration, so that dispatch is most of a small body's time after its kernels. Measured
(2 cores, same process, on and off interleaved): a 50-step ``dynamic_rnn`` LSTM forward and
gradient 5.4 -> 4.1 ms a run, 7 steps 0.94 -> 0.70 ms, ``bench_step``'s in-process training
step 0.096 -> 0.088 ms. The interpreter generates a program's code on its
``STRAIGHT_LINE_AFTER``-th run (a program run once does not pay ~40 us an instruction).
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..framework.op_registry import registry
from .op_errors import cancelled_before, op_failed
from .program import StageProgram
from .resources import KernelContext, _step_root
from .results import DEAD


def generate(program: StageProgram, table: tuple, call_spec=None) -> Callable:
    """``program`` as one function. ``table`` is the interpreter's per-instruction table
    (kernel, input slots, attrs, outputs, needs_ctx, instr, stateful, frees, ...).

    Without ``call_spec``: ``run(vals, rt, step_id)`` takes the slots list with the
    arguments in place and returns it with the exports set. With ``call_spec = (arg_idx,
    picks)``: ``run(feeds, rt, step_id)`` reads argument ``j`` from ``feeds[arg_idx[j]]``
    and returns, per ``(from_feed, i)`` of ``picks``, ``feeds[i]`` or slot ``i`` (None where
    an argument is dead)."""
    instrs = tuple(b[5] for b in table)
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
    committed = False  # after an op that commits, the stage is not cancelled (OpDef.commits)
    for k, (fn, ins_args, attrs, outs, needs_ctx, ins, stateful, free, *_) in \
            enumerate(table):
        env[f"K{k}"], env[f"I{k}"] = fn, ins
        lines.append(f"        i = {k}")
        if not committed:
            lines.append(f"        if c and _root(step_id) in c: raise _cancel(step_id, I{k})")
        committed = committed or bool(stateful and registry[ins.type].commits)
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
    """The error of a generated program's instruction ``i``, as the interpreter makes it
    (its inputs' shapes from the function's locals); a cancellation passes as it is."""
    if getattr(exc, "_tv_cancel", False):
        return exc
    return op_failed(instrs[i], _SlotView(local), exc)


class _SlotView:
    """Slot ``s`` of a generated program is its local ``s<s>`` (None once freed)."""

    def __init__(self, local: dict):
        self.local = local

    def __getitem__(self, s: int):
        return self.local.get(f"s{s}")


def _cancel(step_id, ins):
    err = cancelled_before(step_id, ins)
    err._tv_cancel = True  # not re-wrapped by the generated program's handler
    return err


def _started(watched: dict, step_id, name: str) -> None:
    started = watched.get(_step_root(step_id))
    if started is not None:
        started.append(name)
