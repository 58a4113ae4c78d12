"""``parallel_iterations`` for a loop across worker processes (issue 27; TF: "the execution of
iterations can overlap").

A shard of a loop frame (:func:`tensorvm.ops.control.while_frames.run_sharded`) runs its
device's part of each iteration. In lockstep it finishes iteration ``i`` before it starts
``i + 1``, so a device whose part of ``i`` waits for another device's value idles meanwhile.
Here a shard keeps up to ``parallel_iterations`` iterations in flight, each a generator
(:meth:`Frame.part_steps`) that yields the :class:`Slot` it waits for: device A runs its part
of iteration ``i + 1`` while device B still computes its part of ``i``, their values meeting in
the rendezvous under keys that carry the iteration. An iteration starts once the one before
has said the predicate is true; a loop value it reads that the one before has not made yet is
a :class:`Slot` it waits on. Iterations run their tasks in dataflow order, which is an order
of iterations only for state, so only a loop whose cond and body hold no stateful op (and
no loop of their own, and no gradient tapes), and whose devices hand each other no loop value
(only the predicate and values inside an iteration), is pipelined: see :func:`pipelines`.
"""
from __future__ import annotations

import numpy as np

from ...framework.op_registry import registry
from .while_frames import _MISSING, _LOOP_OPS, Frame, Slot


def pipelines(window: int, funcs, frames, taped: bool, crossing: bool) -> bool:
    """Whether a shard may overlap iterations: ``window`` (``parallel_iterations``) > 1, no
    tapes, no loop value that one device makes and another reads next (``crossing``: such a
    value chains the devices' iterations one after another, and sending the predicate ahead
    of it only costs a message), and no stateful op or loop in the cond and body (``funcs``;
    ``frames`` their compiled programs)."""
    if window <= 1 or taped or crossing:
        return False
    if any(isinstance(f, Frame) and f.nested for f in frames):
        return False
    return not any(registry[node.type].stateful or node.type in _LOOP_OPS
                   for f in funcs for node in f.nodes.values())


class _Iteration:
    """One iteration in flight: its generator and the slot it waits on."""

    __slots__ = ("steps", "waits")

    def __init__(self, steps):
        self.steps, self.waits = steps, None


def run_pipelined(ctx, ex, lp, vals: list, window: int) -> list:
    """The shard's iterations, up to ``window`` at once (see the module docstring); ``lp``
    holds the loop's settings as :func:`run_sharded` computed them. Returns the loop values
    after the last iteration (None for those this device does not hold)."""
    state = {"next": (0, [Slot(value=v) for v in vals]), "final": None}
    flying: list[_Iteration] = []
    while True:
        if state["next"] is not None and len(flying) < window:
            i, slots = state["next"]
            state["next"] = None
            flying.append(_Iteration(_iteration(ctx, ex, lp, i, slots, state)))
        progressed = False
        for it in list(flying):
            if it.waits is not None and it.waits.value is _MISSING and not (
                    it.waits.key is not None and it.waits.key in ex.ready):
                continue
            try:
                it.waits = it.steps.send(None)
            except StopIteration:
                flying.remove(it)
            progressed = True
        if not flying and state["next"] is None:
            break
        if progressed:
            ex.flush()  # what this pass made goes out now: the peers' iterations go on
        elif state["next"] is None or len(flying) >= window:
            oldest = flying[0].waits  # the oldest waits on another device only
            oldest.value = ex.recv(oldest.key)
    out = []
    for slot in state["final"]:
        if slot.value is _MISSING:  # sent here after the last iteration that read it
            slot.value = ex.recv(slot.key)
        out.append(slot.value)
    return out


def _iteration(ctx, ex, lp, i, slots, state):
    """Iteration ``i`` on this device, as a generator of the slots it waits for; it hands
    the next iteration its slots (``state["next"]``) once the predicate is true, or the loop's
    last values (``state["final"]``)."""
    from ...vm.kernels.array_api import to_host
    me, tag = lp.me, f"{lp.tag}|{i}"
    if lp.limit is not None and i >= lp.limit:
        state["final"] = slots
        return
    c_out = yield from _part(ctx, ex, lp, lp.cf, lp.cond, slots + lp.ccaps, f"{tag}|c")
    if lp.p_dev is None:  # the predicate is a loop variable: every device holds it
        p = yield from slots[lp.cf.fetches[0][1]].wait(ex)
    elif lp.p_dev == me:
        p = c_out[0]
        for d in lp.devices:
            if d != me:
                ex.send(d, [(f"{tag}|p", p)])
    else:
        p = yield from Slot(f"{tag}|p").wait(ex)
    if not bool(np.asarray(to_host(p))):
        state["final"] = slots
        return
    nxt, sends = _next_slots(lp, i, slots)
    state["next"] = (i + 1, nxt)

    def made(k, value):
        if k < lp.n and nxt[k].key is None:
            nxt[k].value = value
    yield from _part(ctx, ex, lp, lp.bf, lp.body, slots + lp.bcaps, f"{tag}|b", made)
    for k, dsts in sends:  # the values other devices read next, from this one
        value = yield from nxt[k].wait(ex)
        for dst in dsts:
            ex.send(dst, [(f"{tag}|v{k}", value)])


def _next_slots(lp, i, slots):
    """The slots of iteration ``i + 1``'s loop values on this device, and the ``(value,
    devices)`` this device sends; ``lp.holders`` moves on one iteration, as in lockstep."""
    me, tag = lp.me, f"{lp.tag}|{i}"
    nxt = []
    for k in range(lp.n):
        d = lp.fetch_dev(lp.bf, k)
        if d is not None:
            lp.holders[k] = {d}
            nxt.append(Slot(value=None if d != me else _MISSING))
        else:  # passed through from a feed
            j = lp.bf.fetches[k][1]
            lp.holders[k] = set(lp.holders[j]) if j < lp.n else set(lp.devices)
            nxt.append(slots[j] if j < lp.n else Slot(value=lp.bcaps[j - lp.n]))
    sends = []
    for k in range(lp.n):  # each value to the devices that need it, from its lowest holder
        missing = sorted(lp.needs[k] - lp.holders[k])
        if not missing:
            continue
        if min(lp.holders[k]) == me:
            sends.append((k, missing))
        elif me in missing:
            nxt[k] = Slot(f"{tag}|v{k}")
        lp.holders[k] = lp.holders[k] | set(missing)
    return nxt, sends


def _part(ctx, ex, lp, f, func, feeds, tag, made=None):
    """Generator: this device's part of the cond or body (a function on one device runs on
    the home only, once its feeds are all here)."""
    if isinstance(f, Frame):
        return (yield from f.part_steps(ctx, lp.me, feeds.__getitem__, ex, tag, made))
    if lp.me != lp.home:
        return {}
    vals, read = [], func.feeds_read(lp.home)
    for j, v in enumerate(feeds):  # waits only for the feeds it reads
        if v.__class__ is Slot:
            v = (yield from v.wait(ex)) if j in read else None
        vals.append(v)
    out = dict(enumerate(func.call(ctx, vals)))
    if made is not None:
        for k, v in out.items():
            made(k, v)
    return out
