"""Loop frames that span devices (issue 27; TF's graph_partition.cc for control flow).

A ``while_loop`` whose cond or body holds ops of several devices compiles each of them to a
plan of several devices: a :class:`Frame`, one task per (device, stage), with the plan's
Send/Recv pairs between them. Two ways to run one:

* **in process** (``tv.Session()``: every device is this process): the loop's kernel runs
  every device's tasks of an iteration itself, each on its own device's resources
  (:meth:`Frame.run`);
* **on a cluster**: :func:`tensorvm.passes.partition.split_frames` gives each other device of
  the frame a ``WhileShard`` op of its own (TF's per-device copy of the frame), so the step
  holds one task per device per loop, pinned to that device's worker. Every shard runs the
  same control logic (:func:`run_sharded`); each runs only its own device's tasks of every
  iteration. The predicate, computed on one device, is pushed to every other device each
  iteration; the values that cross devices inside an iteration, and the loop variables a
  device reads but another made, go from the kernel thread of one shard to that of another
  over the workers' loop lanes (:mod:`tensorvm.runtime.direct.loop_lane`: a socket written
  by the sending thread, a reader thread that hands each value to the waiting one; no
  event loop on the way) under the step's id and the key ``"<loop>|<iteration>|<what>"``. At the exit the loop's own device (its *home*, where the
  predicate's loop op sits) gathers the final values, which it outputs.

Gradients: each forward shard keeps its own device's tape (the loop values it held and the
body's taped tensors its tasks made, per iteration: TF's per-device gradient stacks), and is
handed forward every loop value its device's part of the gradient reads. A ``WhileGrad``
whose gradient function spans devices is split the same way (``WhileGradShard``): the shards
walk their tapes backwards in lockstep, the loop values' gradients handed to the devices that
read them next, each capture's gradient summed on the device that makes it and sent home at
the end. A gradient function on one device runs on the home's tape (the taped tensors it
reads sent home each iteration).

Which device holds loop variable ``k`` is known to every shard alike: at entry every shard
holds every value (the step sends the loop's inputs to each); after an iteration, the device
of the task that made the body's output ``k`` (or the holders of the value a pass-through
output forwards); then the lowest-named holder pushes it to each device whose tasks read it.
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import types

import numpy as np

from ...framework.errors import CancelledError, InvalidArgumentError, UnavailableError
from ...vm.interpreter import pick, run_stage
from ...vm.program import Feed, Result
from ...vm.queues import _task_cancelled
from ...vm.services import service


SHARDED_TAPE = "tape of a loop run across worker processes"
_LOOP_OPS = frozenset(("While", "StatelessWhile", "WhileShard", "WhileGrad", "WhileGradShard"))
_MISSING = object()


class Frame:
    """A cond or body compiled to a plan of several devices, as run by a loop.

    ``tasks[q] = (device, program, args)``; an arg is ``("feed", i)`` or ``("task", p, -1)``
    (task ``p``'s whole result) or ``("task", p, index)`` (one export of it: a Send).
    ``pushes[p]``: the ``(key, destination device, index)`` its result goes to on other
    devices; ``fetches``: ``(True, feed, 0)`` or ``(False, task, index)``."""

    def __init__(self, plan, frame: str, location: str):
        self.frame, self.location = frame, location
        self.devices = tuple(plan.devices)
        sends = {s.name: s for s in plan.sends}
        pos = {t.name: k for k, t in enumerate(plan.tasks)}
        self.tasks = []
        self.pushes: dict[int, list] = {}
        for t in plan.tasks:
            args = []
            for a in t.args:
                if a.__class__ is Feed:
                    args.append(("feed", a.index, 0))
                    continue
                if a.__class__ is Result:
                    p, index = pos[a.task], -1
                else:  # a Recv
                    s = sends[a.send]
                    p, index = pos[s.task], s.index
                args.append(("task", p, index))
                if plan.tasks[p].device != t.device:
                    push = (f"{p}.{index}", t.device, index)
                    if push not in self.pushes.setdefault(p, []):
                        self.pushes[p].append(push)
            self.tasks.append((t.device, t.program, tuple(args)))
        # tasks that run a loop of their own (a nested loop's shard waits for its peers):
        # this loop's buffered pushes go before them
        self.nested = {q for q, t in enumerate(plan.tasks)
                       if any(i.type in _LOOP_OPS for i in t.program.instrs)}
        self.fetches = tuple((True, f.index, 0) if f.__class__ is Feed else
                             (False, pos[f.task], f.index) for f in plan.fetches)
        self.made_by: dict[int, list] = {}  # task -> the fetches it makes
        for k, (from_feed, q, _) in enumerate(self.fetches):
            if not from_feed:
                self.made_by.setdefault(q, []).append(k)

    def __repr__(self):
        return f"<Frame {self.frame} on {list(self.devices)}, {len(self.tasks)} tasks>"

    def fetch_device(self, k: int):
        """The device whose task makes fetch ``k`` (None: the fetch is a feed)."""
        from_feed, q, _ = self.fetches[k]
        return None if from_feed else self.tasks[q][0]

    def readers(self, feed: int) -> set:
        """The devices whose tasks read feed ``feed``."""
        return {dev for dev, _, args in self.tasks
                if any(a[0] == "feed" and a[1] == feed for a in args)}

    def run(self, ctx, feeds: list) -> list:
        """Every device's tasks, in this process (see the module docstring)."""
        if in_dask_worker():
            raise InvalidArgumentError(
                f"while_loop frame {self.frame!r} spans devices {list(self.devices)}: in a "
                f"worker process it runs as one WhileShard per device (the partition pass "
                f"splits it); this program was not split (created at {self.location})")
        results: list = []
        for _, program, args in self.tasks:
            vals = [feeds[a[1]] if a[0] == "feed" else results[a[1]] if a[2] < 0 else
                    pick(results[a[1]], a[2]) for a in args]
            results.append(run_stage(program, ctx.rt, ctx.step_id, 1, *vals))
        return [feeds[i] if from_feed else results[i][k] for from_feed, i, k in
                self.fetches]

    def run_part(self, ctx, device: str, feeds, ex, tag: str) -> dict:
        """``device``'s tasks of one run, values for other devices pushed and values from
        them received through ``ex`` under ``tag``; returns ``{fetch index: value}`` of the
        fetches its tasks make."""
        return drive(self.part_steps(ctx, device, feeds, ex, tag), ex)

    def part_steps(self, ctx, device: str, feeds, ex, tag: str, made=None):
        """:meth:`run_part` as a generator that yields each :class:`Slot` it waits for (a
        value from another device, or a feed not made yet) and returns the fetches; ``made(k,
        value)`` is told each fetch as soon as its task has run."""
        results: dict = {}
        received: dict = {}  # an argument may be read more than once
        for q, (dev, program, args) in enumerate(self.tasks):
            if dev != device:
                continue
            vals = []
            for kind, p, index in args:
                if kind == "feed":
                    v = feeds(p)
                    if v.__class__ is Slot:
                        v = yield from v.wait(ex)
                    vals.append(v)
                elif p in results:
                    vals.append(results[p] if index < 0 else pick(results[p], index))
                else:
                    key = f"{tag}|{p}.{index}"
                    if key not in received:
                        received[key] = yield from Slot(key).wait(ex)
                    vals.append(received[key])
            if q in self.nested:
                ex.flush()
            out = results[q] = run_stage(program, ctx.rt, ctx.step_id, 1, *vals)
            by_dst: dict = {}
            for key, dst, index in self.pushes.get(q, ()):
                by_dst.setdefault(dst, []).append(
                    (f"{tag}|{key}", out if index < 0 else pick(out, index)))
            for dst, items in by_dst.items():
                ex.send(dst, items)
            if made is not None:
                for k in self.made_by.get(q, ()):
                    made(k, out[self.fetches[k][2]])
        return {k: results[q][i] for k, (from_feed, q, i) in enumerate(self.fetches)
                if not from_feed and q in results}


class Slot:
    """A value a device's part of an iteration waits for: received from another device
    under ``key``, or made by a task of this device not run yet (``key`` None)."""

    __slots__ = ("value", "key")

    def __init__(self, key=None, value=_MISSING):
        self.key, self.value = key, value

    def wait(self, ex):
        """Generator: yields this slot until its value is here; returns the value."""
        while self.value is _MISSING:
            if self.key is not None:
                got = ex.ready.pop(self.key, _MISSING)
                if got is not _MISSING:
                    self.value = got
                    break
            yield self
        return self.value


def drive(steps, ex):
    """Run a generator of :meth:`Frame.part_steps` to its end, each wait a blocking receive."""
    try:
        slot = next(steps)
        while True:
            slot.value = ex.recv(slot.key)
            slot = steps.send(None)
    except StopIteration as stop:
        return stop.value


def in_dask_worker() -> bool:
    try:
        from distributed import get_worker
        get_worker()
    except (ImportError, ValueError):
        return False
    return True


def frame_devices(funcs, device: str) -> tuple:
    """The devices of a loop whose functions (cond and body, or a gradient) span devices
    (with its own ``device``), sorted; () for a loop on one device."""
    devs = set()
    for f in funcs:
        prog = f.program(device)[0]
        if isinstance(prog, Frame):
            devs.update(prog.devices)
    if not devs:
        return ()
    return tuple(sorted(devs | {device}))


# ---- the sharded run, in worker processes -----------------------------------------------------
class _Exchange:
    """Pushes to and receives from the other shards of a loop, through this worker's data
    plane (:class:`tensorvm.runtime.direct.data_plane.DataPlane`), from the kernel's thread:
    a push is written by this thread on the loop lane to the peer's worker, a value comes
    from the worker's loop box, handed straight to this thread by the lane's reader
    (:mod:`tensorvm.runtime.direct.loop_lane`); no event loop on the way. Values a lane cannot
    carry go on Dask's comm, written by the event loop."""

    POLL_S = 0.2  # a wait checks this often whether the step was cancelled
    CHECK_S = 1.0  # a push still under way this long asks the scheduler whether its peer moved

    def __init__(self, ctx, device: str, devices):
        from distributed import get_worker
        self.ctx, self.step = ctx, str(ctx.step_id)
        self.worker = get_worker()
        self.plane = service("data_plane")(self.worker)
        self.box = self.plane.rendezvous.loops
        self.loop = self.worker.loop.asyncio_loop
        self.devices = devices
        self.part = types.SimpleNamespace(device=device, peers=_peers(self.worker, devices))
        self.out: dict = {}  # destination -> [(key, value)] not written yet
        self.pending: list = []  # writes on Dask's comm under way
        self.task = None  # (worker, key) of the Dask task, once it left the thread pool
        self.ready = _Ready(self.box, self.step)  # values here already, taken without a wait

    def _call(self, coro):
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def send(self, dst: str, items: list) -> None:
        """Buffered: what goes to one device before this shard next waits travels as one
        message (an iteration's predicate and the loop values it hands over, together)."""
        self.out.setdefault(dst, []).extend(items)

    def flush(self) -> None:
        """Write the buffered values, one message per destination (a failed write on Dask's
        comm fails the shard at its next flush, wait or end)."""
        self._check_pushes()
        out, self.out = self.out, {}
        for dst, items in out.items():
            self._write(dst, items)

    def _write(self, dst: str, items: list) -> None:
        """``items`` to ``dst``: on the loop lane (opened on the first push there), else on
        Dask's comm; where the peer's worker is gone and the scheduler names another for
        ``dst`` (restarted), to that one."""
        plane, part, step, check = self.plane, self.part, self.step, self._check
        lanes = plane.loop_lanes
        for again in (False, True):
            try:
                if lanes.push(part, dst, step, items, check, self.POLL_S):
                    return
                if not lanes.known(part.peers[dst]):  # the first push there
                    self._wait(self._call(self._moved(dst, lambda: lanes.open(part, dst))))
                    if lanes.push(part, dst, step, items, check, self.POLL_S):
                        return
                break
            except UnavailableError:
                if again or not self._wait(self._call(self._moved_since(dst))):
                    raise
        # values the lane cannot carry (large, not plain data; a TLS cluster): Dask's comm
        self.pending.append(self._call(self._moved(
            dst, lambda: plane.links.push(part, dst, step, items, loop=True))))

    def _check_pushes(self) -> None:
        """Raise a finished push's error (a gone peer: UnavailableError); forget the rest."""
        if not self.pending:
            return
        for fut in self.pending:
            if fut.done():
                fut.result()
        self.pending = [f for f in self.pending if not f.done()]

    def _check(self, key: str | None = None) -> None:
        """While this shard waits: raise a failed push's error, or CancelledError where the
        step was cancelled."""
        self._check_pushes()  # a push that failed: its peer never answers
        if self.ctx.cancelled() or (self.task is not None and _task_cancelled(self.task)):
            what = f"loop {key.split('|')[0]!r} waited for {key!r}" if key else "a loop pushed"
            raise CancelledError(f"step {self.step} was cancelled while {what}") from None

    def _wait(self, fut):
        """The result of ``fut`` (an event-loop call), checking for cancellation meanwhile."""
        while True:
            try:
                return fut.result(self.POLL_S)
            except concurrent.futures.TimeoutError:
                try:
                    self._check()
                except BaseException:
                    fut.cancel()
                    raise

    async def _moved(self, dst: str, call) -> None:
        """``call()`` (on the event loop, to ``dst``'s worker as ``part.peers`` names it); where
        it fails, or is still connecting
        after :data:`CHECK_S` (Dask keeps retrying a refused connection for its whole connect
        timeout, 30 s by default), and the scheduler now names another worker for ``dst`` (the
        worker was restarted since this process last asked), once more to that one: the old
        worker is gone, so nothing of this step reached it."""
        first = asyncio.ensure_future(call())
        try:
            await asyncio.wait_for(asyncio.shield(first), self.CHECK_S)
            return
        except asyncio.TimeoutError:
            if not await self._moved_since(dst):
                await first  # a slow peer, not a gone one: wait as long as the call does
                return
            first.cancel()
        except UnavailableError:
            if not await self._moved_since(dst):
                raise
        await call()

    async def _moved_since(self, dst: str) -> bool:
        """Whether the scheduler now names another worker for ``dst`` than this shard knew
        (``part.peers`` updated then); False while the device has no worker yet."""
        old = self.part.peers[dst]
        try:
            fresh = await _ask_peers(self.worker, self.devices)
        except InvalidArgumentError:  # not back yet: the push fails or lands as it does
            return False
        if fresh.get(dst, old) == old:
            return False
        self.part.peers = fresh
        return True

    def recv(self, key: str):
        if self.out:  # what this shard buffered goes before it waits, unless no wait
            got = self.box.take(self.step, key, _MISSING)
            if got is not _MISSING:
                return got
            self.flush()
        return self.box.get(self.step, key, self.POLL_S, lambda: self._check(key))

    def open(self):
        """Claim the step's values here; on the Dask plane leave the worker's thread pool
        (shards of two devices on one worker must run at once, whatever its thread count)."""
        from ...vm.queues import _current_task, _try_secede
        if _try_secede():
            self.task = _current_task()
        self.box.open_step(self.step)

    def close(self, wait: bool = True):
        try:
            if wait:
                self.flush()
                for fut in self.pending:
                    fut.result()
        finally:  # (a failed push: the step's values here are unclaimed from now all the same)
            self.pending = []
            self.box.close_step(self.step)
            if self.task is not None:
                from distributed import rejoin
                self.task = None
                rejoin()


class _Ready:
    """The values of one step already in the loop box, as a pipelined shard peeks at them
    (``key in ready``, ``ready.pop(key, default)``) without waiting."""

    __slots__ = ("box", "step")

    def __init__(self, box, step: str):
        self.box, self.step = box, step

    def __contains__(self, key) -> bool:
        return self.box.has(self.step, key)

    def pop(self, key, default=_MISSING):
        return self.box.take(self.step, key, default)


_PEERS: dict = {}  # device resource -> worker address, as the scheduler said last
_PEERS_LOCK = threading.Lock()


def _resources(devices) -> dict:
    """device -> the Dask resource of its worker (``tvm-dev-<job>-<task>``)."""
    from ...framework.device_spec import DeviceSpec
    resource_name = service("device_resource")
    want = {}
    for d in devices:
        spec = DeviceSpec.parse(d)
        want[d] = resource_name(spec.job, int(spec.task or 0))
    return want


def _peers(worker, devices) -> dict:
    """device -> address of the worker that holds its Dask resource, asked of the scheduler
    when one is not known yet."""
    want = _resources(devices)
    with _PEERS_LOCK:
        if all(r in _PEERS for r in want.values()):
            return {d: _PEERS[r] for d, r in want.items()}
    return asyncio.run_coroutine_threadsafe(_ask_peers(worker, devices),
                                            worker.loop.asyncio_loop).result()


async def _ask_peers(worker, devices) -> dict:
    """:func:`_peers` as the scheduler says now (on the worker's event loop); the addresses
    known before are replaced (a restarted worker has a new one)."""
    want = _resources(devices)
    info = await worker.scheduler.identity()
    now = {}
    for addr, w in info.get("workers", {}).items():
        for r in (w.get("resources") or {}):
            if r.startswith("tvm-dev-"):
                now[r] = addr
    with _PEERS_LOCK:
        _PEERS.clear()
        _PEERS.update(now)
    missing = [d for d, r in want.items() if r not in now]
    if missing:
        raise InvalidArgumentError(f"while_loop across devices: no worker holds device(s) "
                                   f"{missing}")
    return {d: now[r] for d, r in want.items()}


def run_sharded(ctx, ins, *, cond, body, n, ncc, nbc, has_max, frame, home, devices, tag,
                window=1):
    """One device's shard of a loop frame (see the module docstring). Returns the loop's
    values on ``home``, () elsewhere. ``window`` (``parallel_iterations``): iterations that
    may be in flight at once where they are independent
    (:mod:`tensorvm.ops.control.while_pipeline`), else one at a time."""
    from .while_pipeline import pipelines, run_pipelined
    from ...vm.kernels.array_api import to_host
    me = ctx.device
    tag = _outer() + tag
    vals = list(ins[:n])
    ccaps = list(ins[n:n + ncc])
    bcaps = list(ins[n + ncc:n + ncc + nbc])
    limit = int(to_host(ins[-1])) if has_max else None
    cf, bf = cond.program(home)[0], body.program(home)[0]
    everyone = set(devices)

    def readers(f, k):
        return f.readers(k) if isinstance(f, Frame) else {home}

    def fetch_dev(f, k):
        return f.fetch_device(k) if isinstance(f, Frame) else home
    needs = [readers(cf, k) | readers(bf, k) for k in range(n)]
    grads = [g.program(home)[0] for g in getattr(body, "grads", ())]
    for gf in grads:  # each device holds the loop values its part of the gradient reads
        for k in range(n):
            needs[k] |= readers(gf, k)
    tape = [] if grads else None
    # A gradient on one device (home) reads every taped tensor there: sent home each time.
    taped_home = [k for k in range(n, len(bf.fetches)) if fetch_dev(bf, k) != home] \
        if isinstance(bf, Frame) and any(not isinstance(gf, Frame) for gf in grads) else []
    p_dev = fetch_dev(cf, 0)
    if p_dev is None:  # the predicate is a loop variable: every device holds it
        needs[cf.fetches[0][1]] = set(everyone)
    holders = [set(everyone) for _ in range(n)]
    ex = _Exchange(ctx, me, devices)
    ex.open()
    try:
        lp = types.SimpleNamespace(
            me=me, home=home, devices=devices, tag=tag, n=n, cf=cf, bf=bf, cond=cond,
            body=body, ccaps=ccaps, bcaps=bcaps, limit=limit, needs=needs, holders=holders,
            p_dev=p_dev, fetch_dev=fetch_dev)
        crossing = any(fetch_dev(bf, k) is not None and needs[k] - {fetch_dev(bf, k)}
                       for k in range(n))
        if pipelines(window, (cond, body), (cf, bf), tape is not None or bool(taped_home),
                     crossing):
            vals = run_pipelined(ctx, ex, lp, vals, window)
        else:
            vals = _lockstep(ctx, ex, lp, vals, tape, taped_home)
        _spread(vals, holders, [{home}] * n, me, ex, f"{tag}|x")
    except BaseException:
        ex.close(wait=False)
        raise
    ex.close()
    if tape is not None:
        _keep_tape((str(ctx.step_id), tag, me), tape)
    if me != home:
        return ()
    return tuple(vals) + (SHARDED_TAPE,)  # the tapes stay on their devices


def _lockstep(ctx, ex, lp, vals, tape, taped_home) -> list:
    """The shard's iterations one at a time (``lp`` as :func:`run_sharded` computed it);
    each iteration's values taped on ``tape`` (a list) where a gradient reads them. Returns
    the loop values after the last iteration."""
    from ...vm.kernels.array_api import to_host
    me, home, devices, tag, n = lp.me, lp.home, lp.devices, lp.tag, lp.n
    cf, bf, cond, body, fetch_dev = lp.cf, lp.bf, lp.cond, lp.body, lp.fetch_dev
    ccaps, bcaps, holders, needs, p_dev = lp.ccaps, lp.bcaps, lp.holders, lp.needs, lp.p_dev
    everyone, limit = set(devices), lp.limit
    i = 0
    while limit is None or i < limit:
        with _inside(f"{tag}|{i}/"):
            c_out = _run_part(cf, cond, ctx, me, home, vals + ccaps, ex, f"{tag}|{i}|c")
        if p_dev is None:
            p = vals[cf.fetches[0][1]]
        elif p_dev == me:
            p = c_out[0]
            for d in devices:
                if d != me:
                    ex.send(d, [(f"{tag}|{i}|p", p)])
        else:
            p = ex.recv(f"{tag}|{i}|p")
        if not bool(np.asarray(to_host(p))):
            break
        with _inside(f"{tag}|{i}/"):
            b_out = _run_part(bf, body, ctx, me, home, vals + bcaps, ex, f"{tag}|{i}|b")
        for k in taped_home:
            if fetch_dev(bf, k) == me:
                ex.send(home, [(f"{tag}|{i}|k{k}", b_out[k])])
            elif me == home:
                b_out[k] = ex.recv(f"{tag}|{i}|k{k}")
        if tape is not None:  # this device's gradient stack (TF's, per device)
            tape.append((list(vals), {k: v for k, v in b_out.items() if k >= n}))
        new = list(vals)
        for k in range(n):
            d = fetch_dev(bf, k)
            if d is not None:
                holders_k = {d}
                new[k] = b_out.get(k)
            else:
                j = bf.fetches[k][1]
                holders_k = set(holders[j]) if j < n else set(everyone)
                new[k] = (vals + bcaps)[j]
            holders[k] = holders_k
        vals = new
        _spread(vals, holders, needs, me, ex, f"{tag}|{i}|v")
        i += 1
    return vals


_NEST = threading.local()  # .prefix: the loops (and iterations) this thread runs inside


def _outer() -> str:
    """The keys' prefix of the sharded loop iteration this thread runs in ("" outside any):
    a loop nested in another's body is keyed apart in each outer iteration."""
    return getattr(_NEST, "prefix", "")


class _inside:
    def __init__(self, prefix: str):
        self.prefix = prefix

    def __enter__(self):
        self.saved, _NEST.prefix = _outer(), self.prefix

    def __exit__(self, *exc):
        _NEST.prefix = self.saved


_TAPES: dict = {}  # (step, loop, device) -> that device's tape of a sharded loop's last run
_TAPES_LOCK = threading.Lock()
MAX_TAPES = 64  # tapes no gradient read (a forward-only step) go, oldest first


def _keep_tape(key, tape) -> None:
    with _TAPES_LOCK:
        _TAPES.pop(key, None)
        _TAPES[key] = tape
        while len(_TAPES) > MAX_TAPES:
            del _TAPES[next(iter(_TAPES))]


def home_tape(ctx, frame: str) -> list:
    """The home device's tape of a sharded loop, in the form of an in-process loop's
    (``[(values, taped)]``, ``taped[t]``: the body's t-th taped tensor), for a gradient
    that runs on one device."""
    tape = _take_tape((str(ctx.step_id), _outer() + frame, ctx.device), frame)
    return [(vals, {k - len(vals): v for k, v in kept.items()}) for vals, kept in tape]


def _take_tape(key, frame: str) -> list:
    with _TAPES_LOCK:
        tape = _TAPES.pop(key, None)
    if tape is None:
        raise InvalidArgumentError(
            f"while_loop {frame!r}: no tape of its forward run on {key[2]} in this step (a "
            f"loop across worker processes tapes each device's values where they are)")
    return tape


def run_sharded_grad(ctx, ins, *, grad, nbc, nv, fc, frame, tape_idx, home, devices):
    """One device's shard of a loop gradient across worker processes: the forward loop's
    iterations backwards, each device running its part of the gradient function on its own
    tape (TF's per-device gradient stacks); the loop values' gradients handed to the devices
    that read them next, the captures' gradients summed where they are made and gathered on
    ``home`` at the end. Returns the gradients on ``home``, () elsewhere."""
    from ...vm.kernels.array_api import array_namespace
    me = ctx.device
    bcaps = list(ins[:nbc])
    gys = list(ins[nbc + 1:])
    fkey = _outer() + frame
    tape = _take_tape((str(ctx.step_id), fkey, me), frame)
    gf = grad.program(home)[0]
    if not isinstance(gf, Frame):
        raise InvalidArgumentError(f"while_loop {frame!r}: its gradient runs on one device")
    n = len(grad.feeds) - nbc - nv - len(tape_idx)  # the loop's values
    base = n + nbc  # feeds: loop values, captures, gys, taped tensors
    everyone = set(devices)
    needs = [gf.readers(base + k) for k in range(nv)]
    holders = [set(everyone) for _ in range(nv)]
    out_dev = []
    for k in range(nv + len(fc)):
        d = gf.fetch_device(k)
        if d is None and k >= nv:
            raise InvalidArgumentError(f"while_loop {frame!r}: a capture's gradient that is "
                                       "a feed of the gradient function is not supported "
                                       "across worker processes")
        out_dev.append(d)
    # the taped tensors: made by the body on one device, read by the gradient on others
    t_from = {base + nv + m: (n + t) for m, t in enumerate(tape_idx)}
    acc: list = [None] * len(fc)
    ex = _Exchange(ctx, me, devices)
    ex.open()
    try:
        for i in range(len(tape) - 1, -1, -1):
            vals, kept = tape[i]
            gtag = f"{fkey}/grad|{i}"
            for j, fetch in t_from.items():  # taped values to the devices that read them
                if fetch in kept:
                    for dst in sorted(gf.readers(j) - {me}):
                        ex.send(dst, [(f"{gtag}|t{j}", kept[fetch])])

            def feeds(j, vals=vals, kept=kept, gtag=gtag):
                if j < n:
                    return vals[j]
                if j < base:
                    return bcaps[j - n]
                if j < base + nv:
                    return gys[j - base]
                fetch = t_from[j]
                return kept[fetch] if fetch in kept else ex.recv(f"{gtag}|t{j}")
            with _inside(f"{fkey}|{i}/"):  # a nested loop's gradient: its forward's tape
                out = gf.run_part(ctx, me, feeds, ex, gtag)
            new = list(gys)
            for k in range(nv):
                if out_dev[k] is not None:
                    holders[k] = {out_dev[k]}
                    new[k] = out.get(k)
                else:  # a gradient passed through from a feed: a gy
                    j = gf.fetches[k][1] - base
                    holders[k] = set(holders[j])
                    new[k] = gys[j]
            gys = new
            for k in range(len(fc)):
                if out_dev[nv + k] == me:
                    d = out[nv + k]
                    acc[k] = d if acc[k] is None else acc[k] + d
            _spread(gys, holders, needs, me, ex, f"{gtag}|g")
        _spread(gys, holders, [{home}] * nv, me, ex, f"{fkey}/grad|x|g")
        for k in range(len(fc)):  # the captures' gradients, summed where made, to home
            src = out_dev[nv + k]
            if src == home or not tape:
                continue
            if src == me:
                ex.send(home, [(f"{fkey}/grad|x|a{k}", acc[k])])
            elif me == home:
                acc[k] = ex.recv(f"{fkey}/grad|x|a{k}")
    except BaseException:
        ex.close(wait=False)
        raise
    ex.close()
    if me != home:
        return ()
    acc = [array_namespace(bcaps[j]).zeros_like(bcaps[j]) if a is None else a
           for a, j in zip(acc, fc)]
    out = tuple(gys) + tuple(acc)
    return out[0] if len(out) == 1 else out  # one output: its value, not a 1-tuple


def _run_part(f, func, ctx, me, home, feeds, ex, tag) -> dict:
    """This device's part of one run of the cond or body (a function on one device runs
    on ``home`` only)."""
    if isinstance(f, Frame):
        return f.run_part(ctx, me, feeds.__getitem__, ex, tag)
    if me != home:
        return {}
    return dict(enumerate(func.call(ctx, feeds)))


def _spread(vals, holders, needs, me, ex, tag) -> None:
    """Each value to the devices that need it and do not hold it, from its lowest-named
    holder; ``holders`` updated."""
    for k in range(len(vals)):
        missing = sorted(needs[k] - holders[k])
        if not missing:
            continue
        src = min(holders[k])
        for dst in missing:
            if src == me:
                ex.send(dst, [(f"{tag}{k}", vals[k])])
            elif dst == me:
                vals[k] = ex.recv(f"{tag}{k}")
        holders[k] = holders[k] | set(missing)
