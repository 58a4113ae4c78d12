"""Floating tasks taken off a straggler at the tail of a step (issue 23: a slow worker).

Dask balances floating tasks (stateless: :mod:`tensorvm.passes.place`) while its queue holds
some: a slow worker simply takes fewer. At the tail it cannot: the last tasks started on a
slow worker run at its pace while the others sit idle (a worker stopped 0.2 s of every 0.3 s
ran a 1 GiB word count's last map task for 1.8 s, ~1.4 s after the other worker ran dry).
Dask never steals a task that has started, and never runs one twice.

So, as MapReduce's backup tasks do (Dean and Ghemawat 2004, section 3.6) within what Dask
allows: when a worker is idle and the scheduler has nothing queued, a floating task running
on another worker whose expected remaining time there is well over its expected time on the
idle worker is **moved** there: the scheduler releases it (the slow worker drops its result
when it finishes, as for any cancelled task) and runs it again on the idle worker. That is
safe because a floating task is stateless (Dask's retries and lineage recomputation rely on
the same); a pinned task is never moved. Only tasks that read no other task's output (map
tasks: their inputs are splits and feeds, and a kept map output is written all or nothing)
and picks move, and tasks that surely have not started (every thread of their worker runs
another): a reducer that has started would fetch its inputs again, and its first attempt,
still running, would write the same output attempt file as the second. Unlike a backup, the
straggler's attempt is given up, so a move needs the idle worker to be clearly faster
(:data:`MOVE_FACTOR`).

Expected times come from finished tasks of the same *kind* (a task's name without its
trailing index, in one submission: the map tasks of one step are one kind, its reducers
another; an earlier step's durations say nothing of a worker slowed since), per worker: a
worker's median for the kind, else the kind's median over all workers. A task is moved at
most once. The decision is :func:`choose_moves` (pure: running tasks, idle workers and
durations in, moves out); :class:`StragglerMoves` is the scheduler plugin that feeds it and
applies its moves, installed with :class:`~tensorvm.runtime.cluster.device_map.DeviceHomes`
(config ``tensorvm.move-stragglers``, default True). Every move is logged on the scheduler
(``logging`` and the event topic :data:`TOPIC_MOVES`).

The same plugin names what a lost worker costs: from Dask's remove-worker event, the floating
stage tasks that had started there or whose outputs only it held (:data:`TOPIC_RERUNS`), which
a map-reduce driver logs and returns (:func:`rerun_tasks`, ``mr.Result.rerun``).
"""
from __future__ import annotations

import asyncio
import logging
import re
import statistics
import time
import uuid
from collections import OrderedDict, defaultdict, deque
from dataclasses import dataclass

from distributed.diagnostics.plugin import SchedulerPlugin

from ...vm import _dask_private
# the event topics (TOPIC_MOVES: each move; TOPIC_RERUNS: what a departed worker costs),
# exported here too: defined with the other names that cross the wire
from ..wire_names import STRAGGLER_MOVES, TOPIC_MOVES, TOPIC_RERUNS  # noqa: F401

MOVE_FACTOR = 1.5  # moved when the remaining time on its worker > this x its time elsewhere
MIN_REMAINING_S = 0.1  # never worth a move: less than this left (scheduling costs ~ms)
CHECK_S = 0.1  # how often the plugin looks (besides when a floating task ends)
RECHECK_S = 0.02  # a task's end makes it look again at most this often
SAMPLES = 16  # durations kept per (kind, worker)
OWN_SAMPLES = 2  # a worker's own median counts once it has finished this many of a kind
KINDS = 64  # kinds whose durations are kept (the latest steps')
ZOMBIE_GRACE_S = 2.0  # a moved task's old worker is watched this long for it (heartbeats)
logger = logging.getLogger("tensorvm")

_INDEX = re.compile(r"\d+$")


def lost_tasks(keys) -> list[tuple[str, str]]:
    """``[(task name, step id)]`` of the floating stage tasks behind ``keys`` (Dask keys a
    lost worker was running or alone held): a pick stands for the task it picks from.

    >>> lost_tasks([("tvm_g2_worker_float_cpu0_s0_send-map3_1", "ab.0", 1),
    ...             ("tvm_g2_worker_float_cpu0_s0-map3", "ab.0"), ("tvm_g2_ps_0_cpu0_s0", "ab.0")])
    [('tvm_g2_worker_float_cpu0_s0-map3', 'ab.0')]
    """
    out = set()
    for key in keys:
        if not isinstance(key, tuple) or len(key) < 2 or not isinstance(key[0], str) or \
                "_float_" not in key[0]:
            continue
        base, send, rest = key[0].partition("_send-")
        out.add((f"{base}-{rest.rsplit('_', 1)[0]}" if send else key[0], str(key[1])))
    return sorted(out)


def rerun_events(client, since: float) -> list[tuple[str, str]]:
    """``(task name, step id)`` of each floating task that ran again because a worker left
    after ``since`` (``time.time()``), from the scheduler's :data:`TOPIC_RERUNS` events."""
    return [(name, step) for ev_time, msg in client.get_events(TOPIC_RERUNS)
            if isinstance(msg, dict) and msg.get("time", ev_time) >= since
            for name, step in msg.get("tasks", ())]


def group_order(label: str) -> tuple:
    """Sort key of task groups and labels: by kind, then index as a number (``map9`` before
    ``map10``; a label ``map13 send 2`` after ``map13``), the order a driver's
    ``Result.rerun`` and the job page list them in.

    >>> sorted(["reduce0", "map10", "map13 send 2", "map9", "map13"], key=group_order)
    ['map9', 'map10', 'map13', 'map13 send 2', 'reduce0']
    """
    head = label.split(" ", 1)[0]
    m = _INDEX.search(head)
    return (head[: m.start()] if m else head, int(m.group(0)) if m else -1, label)


def rerun_tasks(client, names, since: float) -> list[str]:
    """The floating tasks among ``names`` (a step's task names) that ran again because a
    worker left after ``since`` (``time.time()``), from the scheduler's
    :data:`TOPIC_RERUNS` events: each task's group (``map3``, ``reduce1``), in order."""
    names = set(names)
    return sorted({name.rpartition("-")[2] for name, _ in rerun_events(client, since)
                   if name in names}, key=group_order)


def task_kind(key) -> tuple | None:
    """The kind of a floating task from its Dask key ``(name, step id, ...)`` (None: not
    floating, never moved): its name without the trailing index, and its step id, so all map
    tasks of one step are one kind.

    >>> task_kind(("tvm_g2_worker_float_cpu0_s0-map13", "66bcaf45.0"))
    ('tvm_g2_worker_float_cpu0_s0-map', '66bcaf45.0')
    >>> task_kind(("tvm_g2_worker_0_cpu0_s0", "66bcaf45.0")) is None  # pinned
    True
    >>> task_kind(("tvm_g2_worker_float_cpu0_s0_send-map13_2", "66bcaf45.0", 2))
    ('tvm_g2_worker_float_cpu0_s0_send', '66bcaf45.0')

    A floating task's picks (``_send-``: one export handed on) are a kind of their own: they
    take no time, but one waiting behind a straggler's thread holds every reducer back.
    """
    if not isinstance(key, tuple) or len(key) < 2:
        return None
    name = key[0]
    if not isinstance(name, str) or "_float_" not in name:
        return None
    base, send, _ = name.partition("_send-")
    return (base + "_send" if send else _INDEX.sub("", name)), key[1]


@dataclass(frozen=True)
class Running:
    """A floating task processing on ``worker``: ``elapsed`` seconds into its run, or None
    if it waits there behind another task (not started). Not ``movable``: a task the
    scheduler has already taken from that worker (moved) whose thread still runs there."""
    key: object
    kind: tuple
    worker: str
    elapsed: float | None
    movable: bool = True


def choose_moves(running: list[Running], idle: list[str], durations: dict,
                 factor: float = MOVE_FACTOR, moved=frozenset()) -> list[tuple[object, str, str]]:
    """``[(key, from worker, to worker)]``: at most one task for each idle worker, and every
    task that takes it no time (a pick waiting behind a busy thread).

    ``durations``: ``{(kind, worker): [seconds, ...]}`` of finished tasks. A task moves to an
    idle worker when its expected remaining time on its own worker exceeds ``factor`` times
    its expected time on the idle one (and :data:`MIN_REMAINING_S`); the longest such task
    goes first. A task's expected time ``m`` on a worker is the worker's median for the kind
    (once it has finished :data:`OWN_SAMPLES`: a restarted worker's first, cold task says
    little), else the kind's median. Remaining time of a started task: ``m - elapsed``, or, past
    ``m``, ``elapsed - m`` (a task that overran its worker's usual time by ``t`` is expected
    to run about ``t`` more: a hung one ends up moved). A task waiting on its worker
    behind others (``movable`` or not: a moved task's first attempt keeps its thread): their
    longest remaining time plus its own expected time. A key in ``moved`` never moves
    again.

    >>> d = {("k", "slow"): [1.8, 1.5], ("k", "fast"): [0.45, 0.5]}
    >>> choose_moves([Running("m13", "k", "slow", 0.4)], ["fast"], d)
    [('m13', 'slow', 'fast')]
    >>> choose_moves([Running("m13", "k", "slow", 1.4)], ["fast"], d)  # nearly done
    []
    >>> choose_moves([Running("m13", "k", "slow", 3.0)], ["fast"], d)  # overran: hung?
    [('m13', 'slow', 'fast')]
    >>> choose_moves([Running("m0", "k", "fast", 0.1)], ["slow"], d)  # slower elsewhere
    []
    """
    if factor == float("inf"):  # moves off
        return []
    by_kind: dict = defaultdict(list)
    medians = {}
    for (kind, worker), secs in durations.items():
        by_kind[kind].extend(secs)
        if len(secs) >= OWN_SAMPLES:
            medians[kind, worker] = statistics.median(secs)
    overall = {kind: statistics.median(secs) for kind, secs in by_kind.items()}
    remaining: dict = {}
    busy: dict = defaultdict(float)  # worker -> longest remaining of the tasks it runs
    for r in running:
        if r.elapsed is not None and r.kind in overall:
            own = medians.get((r.kind, r.worker), overall[r.kind])
            remaining[r.key] = abs(own - r.elapsed)
            busy[r.worker] = max(busy[r.worker], remaining[r.key])
    for r in running:
        if r.elapsed is None and r.kind in overall:
            remaining[r.key] = busy[r.worker] + medians.get((r.kind, r.worker), overall[r.kind])
    taken = set(moved)
    moves = []
    for to in sorted(idle):
        best = None
        for r in running:
            if not r.movable or r.key in taken or r.worker == to or r.key not in remaining:
                continue
            left = remaining[r.key]
            elsewhere = medians.get((r.kind, to), overall[r.kind])
            if left <= max(factor * elsewhere, MIN_REMAINING_S):
                continue
            if factor * elsewhere < MIN_REMAINING_S:  # no work (a pick): all go at once
                taken.add(r.key)
                moves.append((r.key, r.worker, to))
            elif best is None or left > best[0]:
                best = (left, r, elsewhere)
        if best is not None:
            left, r, elsewhere = best
            taken.add(r.key)
            moves.append((r.key, r.worker, to))
            logger.info("tensorvm: moving %s off %s (~%.2f s left there) to idle %s (~%.2f s)",
                        r.key, r.worker, left, to, elsewhere)
    return moves


class StragglerMoves(SchedulerPlugin):
    """On the scheduler: moves floating tasks off stragglers at a step's tail
    (:func:`choose_moves`). Looks when a task finishes and every :data:`CHECK_S` while
    floating tasks are processing."""

    name = STRAGGLER_MOVES
    idempotent = True

    def __init__(self, factor: float = MOVE_FACTOR):
        self.factor = factor
        self.durations: OrderedDict = OrderedDict()  # kind -> {worker: deque of seconds}
        self.moved: deque = deque(maxlen=4096)  # keys moved once (recent ones)
        # worker -> {key moved off it: when}: its first attempt may still hold a thread there
        self.zombies: dict = defaultdict(dict)
        self.moves = 0
        self.scheduler = None
        self._pending = False
        self._last = 0.0  # time.monotonic() of the last look
        self._presumed: dict = {}  # key -> time.monotonic() since it is presumed running
        self._ticker = None

    async def start(self, scheduler) -> None:
        self.scheduler = scheduler
        self._ticker = asyncio.get_running_loop().create_task(self._tick())

    async def close(self) -> None:
        if self._ticker is not None:
            self._ticker.cancel()

    async def _tick(self):
        while True:
            await asyncio.sleep(CHECK_S)
            self._look()

    def _look(self) -> None:
        try:
            self.check()
        except Exception:  # noqa: BLE001 - a look that fails must not stop the next
            logger.exception("tensorvm: straggler check failed")

    def transition(self, key, start, finish, *args, stimulus_id=None, **kwargs) -> None:
        if start != "processing" or finish not in ("memory", "erred"):
            return
        kind = task_kind(key)
        if kind is None:
            return
        if finish == "memory":
            for ss in kwargs.get("startstops") or ():
                if ss.get("action") == "compute":
                    self._record(kind, kwargs.get("worker"), ss["stop"] - ss["start"])
        # look once the scheduler is done with this transition, at most every RECHECK_S: an
        # end too soon after the last look is looked at when RECHECK_S is up, not dropped (the
        # job's last map ending 10 ms after a look left its idle worker to the 0.1 s tick)
        if not self._pending:
            self._pending = True
            wait = RECHECK_S - (time.monotonic() - self._last)
            loop = asyncio.get_running_loop()
            if wait > 0:
                loop.call_later(wait, self._check_soon)
            else:
                loop.call_soon(self._check_soon)

    def log_event(self, topic, msg) -> None:
        """A worker that left: name the floating tasks that run again (:data:`TOPIC_RERUNS`)."""
        if topic != "all" or not isinstance(msg, dict) or msg.get("action") != "remove-worker":
            return
        if self.scheduler is None:
            return
        started = _dask_private.started_keys(self.scheduler, msg.get("processing-tasks", ()))
        tasks = lost_tasks([*started, *msg.get("lost-computed-tasks", ())])
        if tasks:
            self.scheduler.log_event(TOPIC_RERUNS, {"worker": msg.get("worker"),
                                                    "time": time.time(),
                                                    "tasks": [list(t) for t in tasks]})

    def _record(self, kind, worker, seconds: float) -> None:
        per_worker = self.durations.get(kind)
        if per_worker is None:
            per_worker = self.durations[kind] = {}
            while len(self.durations) > KINDS:
                self.durations.popitem(last=False)
        per_worker.setdefault(worker, deque(maxlen=SAMPLES)).append(seconds)

    def _forget_zombies(self) -> None:
        """Drop the moved tasks their old worker no longer runs (after a heartbeat or two:
        one moved before it started never runs there)."""
        now = time.monotonic()
        for addr in list(self.zombies):
            gone = self.zombies[addr]
            running = _dask_private.executing_keys(self.scheduler, addr)
            for key, when in list(gone.items()):
                if key not in running and now - when > ZOMBIE_GRACE_S:
                    del gone[key]
            if not gone:
                del self.zombies[addr]

    def _check_soon(self):
        self._pending = False
        self._look()

    def check(self) -> list:
        """Look for moves now and apply them; the moves made."""
        s = self.scheduler
        self._last = time.monotonic()
        if s is None or not self.durations:
            return []
        self._forget_zombies()
        idle, found = _dask_private.floating_tail(s, task_kind, self.zombies)
        if not idle or not found:
            return []
        now = time.monotonic()
        presumed = {r[0]: self._presumed.get(r[0], now) for r in found if r[5]}
        self._presumed = presumed  # since when each is presumed running (none reported yet)
        running = [Running(key, kind, worker,
                           now - presumed[key] if key in presumed else elapsed,
                           movable and (not reads or kind[0].endswith("_send")))
                   for key, kind, worker, elapsed, movable, _, reads in found]
        durations = {(kind, w): list(d) for kind in {r.kind for r in running}
                     for w, d in self.durations.get(kind, {}).items()}
        moves = choose_moves(running, idle, durations, self.factor, frozenset(self.moved))
        if not moves and logger.isEnabledFor(logging.DEBUG):
            logger.debug("tensorvm: no move to idle %s; running %s", idle, running)
        for key, src, dst in moves:
            if _dask_private.move_task(s, key, dst, f"tensorvm-move-{uuid.uuid4().hex[:8]}"):
                self.moved.append(key)
                self.zombies[src][key] = time.monotonic()
                self.moves += 1
                s.log_event(TOPIC_MOVES, {"key": list(key) if isinstance(key, tuple) else key,
                                          "from": src, "to": dst,
                                          "time": time.time()})
        return moves
