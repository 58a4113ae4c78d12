"""Phased jobs: the shuffle through storage, and speculative execution (MapReduce paper,
section 3.6): backup copies of slow map tasks.

With ``Job(speculative=True)`` or ``Job(shuffle="storage")`` a job runs in two phases instead
of one step. Each map task is its own step, and writes its buckets through storage, as an
attempt of an :class:`~tensorvm.storage.OutputCommitter` under the job's scratch folder. A map
step that holds no state floats: Dask runs it on any worker with a free thread, and the driver
keeps one in flight per thread of the cluster, counted again as workers join and leave (a
worker that joins takes map tasks at once; a lost worker's step runs again elsewhere). One
that holds state (a stateful ``py_func``) is pinned: each worker device runs one at a time and
takes the next pending task when it is free. When a slot has no task left while others still
run, the driver starts a backup copy of a remaining task in it if that task has run
``backup_after`` times longer than the median finished task (floating: Dask gives the copy to
a free thread, never the straggler's, which is busy with the first copy). The first attempt to
finish commits (``commit_task``: one winner per task); the loser's files are deleted, and a
loser that runs after the job has ended writes nothing (a ``_CLOSED`` marker). Then one step
runs the reducers over the winners' files — floating too (the scheduler's straggler moves keep
a queued one off a slow worker), or pinned on devices not busy with losers.

The map outputs go under the job's scratch root (``scratch=``, else the output's
``_temporary``, else — no output, every worker on this machine — the temporary folder) and
are removed on every exit path: after the commit, after a failure (once the map steps still
in flight have ended), on Ctrl-C at once (and again by ``sweep_interrupted`` once the
workers are gone); a speculative loser still running when the job ends removes them when it
ends.

The decisions are :class:`BackupPolicy` (pure: task states in, backups out, clock injected).
"""
from __future__ import annotations

import collections
import dataclasses
import logging
import statistics
import threading
import time
import uuid
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from dataclasses import dataclass, field

import numpy as np

import tensorvm as tv
from tensorvm import storage
from tensorvm.framework.op_def_library import apply_op
from tensorvm.runtime.cluster.stragglers import group_order, rerun_events

from .api import CounterSink
from .recovery import _INTERRUPTED, add_recovered, interrupted
from .common import (Result, _Built, _device, _pin_stateful, _sum_counters, call_user,
                     holds_state, log_reruns, report_progress, run_options, written_bytes)

logger = logging.getLogger("tensorvm")

POLL_S = 0.05
SLOTS_EVERY_S = 1.0  # how often a floating map phase counts the cluster's threads again
MAX_RETRIES = 3  # attempts of a map task that lost its worker, after the first


@dataclass
class BackupPolicy:
    """Which unfinished map tasks get a backup, on which idle device (pure).

    ``running``: ``{task: [(device, started), ...]}`` attempts in flight; ``durations``: of
    finished tasks; ``devices``: all map devices. A task gets at most one backup; a backup
    goes to a device with nothing in flight, once at least one task has finished and the task
    has run ``factor`` x the median finished duration.
    """
    factor: float = 1.5
    backed_up: set = field(default_factory=set)

    def decide(self, running: dict, durations: list, devices: list, now: float) -> list:
        if not durations:
            return []
        busy = {d for attempts in running.values() for d, _ in attempts}
        idle = [d for d in devices if d not in busy]
        limit = self.factor * statistics.median(durations)
        out = []
        for task, attempts in sorted(running.items(), key=lambda kv: min(t for _, t in kv[1])):
            if not idle:
                break
            if task in self.backed_up or len(attempts) > 1:
                continue
            if now - attempts[0][1] >= limit:
                out.append((task, idle.pop(0)))
                self.backed_up.add(task)
        return out


def _skippable(exc) -> bool:
    """A map failure that skipping mode may narrow down: the user's code or data, not a lost
    worker or a cancelled step."""
    return isinstance(exc, tv.errors.OpError) and not isinstance(
        exc, (tv.errors.UnavailableError, tv.errors.CancelledError, tv.errors.DataLossError))


def _bisect(group: list):
    """Hadoop's skipping mode: a failed split group as smaller groups — its splits one by one,
    or a split's byte range in halves (whole records; a text split owns the lines that start
    in it, so the halves hold the same lines). ``None``: the range holds one record only (skip
    it); ``False``: it cannot be cut (row groups, rows)."""
    if len(group) > 1:
        return [[x] for x in group]
    (i, sp), = group
    if sp.end is None or sp.row_groups is not None or sp.row_start is not None:
        return False
    rb = sp.options.record_bytes or 1
    records = (sp.end - sp.start) // rb
    if records <= 1:
        return None
    mid = sp.start + (records // 2) * rb
    return [[(i, dataclasses.replace(sp, end=mid))], [(i, dataclasses.replace(sp, start=mid))]]


def _map_step(job, session, m, group, device, maps, attempt, closed):
    """Build map task ``m``'s attempt on ``device``; return its fetches."""
    sink = job._sink = CounterSink()  # (a combine function's counters go there too)
    with session.graph.as_default(), tv.device(device), \
            tv.name_scope(f"{job.name}/map{m}_{attempt}"):
        records, counts = job._read(group, "read")
        em = call_user(job._map_of(group), [records], "map", sink)
        keys, values = job._apply_fn(job.combine, em.keys, em.values, "combine", False)
        outs = apply_op("MRPartition", [keys, values], {
            "num": job.num_reducers, "how": job.partition.how,
            "boundaries": tuple(job._bounds), "spill_url": maps.attempt_url(m, attempt),
            "threshold": -1, "task": m, "closed_marker": closed}, name="partition").outputs
    types = ((keys.dtype, keys._shape), (values.dtype, values._shape))
    return [counts, outs[-1]] + [t for _, t in sink.items], [n for n, _ in sink.items], types


class Scratch:
    """A job's map-output folder: removed by :meth:`remove_debris` (``sweep_interrupted``
    calls it after a Ctrl-C, once the workers are gone)."""

    def __init__(self, url: str):
        self.out_url = url
        self.fs, self.path = storage.fsio.to_fs(url)

    def remove_debris(self) -> None:
        fs = self.fs
        try:
            fs.invalidate_cache(self.path)
            if fs.exists(self.path):
                fs.rm(self.path, recursive=True)
        except FileNotFoundError:
            pass
        parent = self.path.rstrip("/").rsplit("/", 1)[0]
        if parent.rsplit("/", 1)[-1] == storage.output.TEMPORARY:  # an output's _temporary
            try:  # emptied, and no job claims it: it goes too
                fs.rmdir(parent)
            except OSError:
                pass
        fs.invalidate_cache(parent)

    def remove_when_done(self, futures) -> None:
        """Remove the folder now, or — while map steps still run (a speculative loser) —
        when the last of them ends."""
        pending = [f for f in futures if not f.done()]
        if not pending:
            self.remove_debris()
            return
        left, lock = [len(pending)], threading.Lock()

        def one(_):
            with lock:
                left[0] -= 1
                last = left[0] == 0
            if last:
                self.remove_debris()
        for f in pending:
            f.add_done_callback(one)


FLOATING_MAP = "/job:worker/task:*map"  # a phased map step's device: any worker


def live_threads(session, fallback: int) -> int:
    """The threads of the workers a floating task may run on now (Dask's, every worker's),
    or ``fallback`` in process or when the scheduler cannot say."""
    client = getattr(session, "client", None)
    if client is None:
        return fallback
    from tensorvm.runtime.cluster.spec import scheduler_identity
    try:
        workers = scheduler_identity(client)["workers"]
    except Exception:  # noqa: BLE001 - the scheduler went: the step that runs next says so
        return fallback
    return max(sum(int(w.get("nthreads") or 1) for w in workers.values()), 1)


class _MapPhase:
    """The map phase of a phased job: a map task is a step of its own, and a free slot takes
    the next pending one (Hadoop's free slots: no static assignment, so a slow worker just
    does fewer); a task that lost its worker runs again (up to ``MAX_RETRIES`` times), a
    failing one is narrowed down in skipping mode (:func:`_bisect`), and with
    ``job.speculative`` a slow one gets a backup (:class:`BackupPolicy`). The first attempt
    of a task to finish commits in ``maps``; :meth:`run` returns when every task has a winner
    or was skipped.

    A map step whose ops hold no state is **floating** (:data:`FLOATING_MAP`): Dask runs it on
    whichever worker has a free thread, and the phase keeps one step in flight per thread of
    the cluster, counted again every :data:`SLOTS_EVERY_S` (a worker that joins takes map
    tasks; a lost worker's step runs again elsewhere without the driver). A map step that
    holds state (a stateful ``py_func``) is pinned: a slot per device of ``devices``, as the
    reducers of such a job are (:func:`reduce_devices`)."""

    def __init__(self, job, session, groups: list, devices: list, maps, closed: str):
        self.job, self.session, self.groups, self.devices = job, session, groups, devices
        self.pinned = list(devices)  # /job:worker/task:<i>, for steps that hold state
        self.maps, self.closed = maps, closed
        self.policy = BackupPolicy(job.backup_after)
        self.running: dict = {}  # task -> [(device, started), ...] in flight
        self.futures: dict = {}  # future -> (task, device, attempt, started)
        self.winners: dict = {}  # task -> its committed attempt
        self.durations: list = []
        self.map_vals: list = []  # the winners' fetched values
        self.names: list = []  # user counter names
        self.types = None  # the (key, value) dtypes and shapes, for the reducers
        self.backups = self.backup_wins = 0
        self.stragglers: set = set()  # devices whose attempt got a backup (slow ones)
        self.pool = ThreadPoolExecutor(max_workers=2 * len(groups) + 16)
        self.abandoned: set = set()  # tasks bisected or skipped (skipping mode)
        self.skipped: list = []  # "url@offset" of the records skipped
        self.steps: dict = {}  # (task, device, attempt) -> (fetches, counter names, types)
        self.attempts = ("a0", "b1") if job.speculative else ("a0",)
        self.pending = collections.deque(range(len(groups)))
        self.retries: collections.Counter = collections.Counter()
        self.metas: list = []  # (map task, RunMetadata) of every attempt launched
        self.reduce_step = ""  # the reduce step's id
        self.floating = bool(groups) and self._floats()
        self._counted = 0.0  # time.monotonic() when the slots were last counted
        if self.floating:
            self._count_slots()
        self.prebuild(range(len(groups)))

    def _floats(self) -> bool:
        """Whether the map steps may float: task 0's first attempt, built on
        :data:`FLOATING_MAP`, holds no state (it is then kept as that task's step)."""
        graph = self.session.graph
        n0 = len(graph.get_operations())
        step = _map_step(self.job, self.session, 0, self.groups[0], FLOATING_MAP, self.maps,
                         self.attempts[0], self.closed)
        if holds_state(graph.get_operations()[n0:]):
            return False
        self.steps[0, None, self.attempts[0]] = step
        return True

    def _count_slots(self) -> None:
        """A floating phase's slots: one per thread of the cluster now."""
        self._counted = time.monotonic()
        n = live_threads(self.session, len(self.pinned))
        self.devices = [f"slot{i}" for i in range(n)]

    def _key(self, m: int, device: str, attempt: str) -> tuple:
        return (m, None, attempt) if self.floating else (m, device, attempt)

    def prebuild(self, tasks) -> None:
        """Build the steps of ``tasks`` (on every device, where they are pinned) at once,
        before they run: a session drops the plans of older graph versions, so adding ops
        while steps run can fail them (those are run again, up to ``MAX_RETRIES`` times)."""
        for m in tasks:
            for d in [FLOATING_MAP] if self.floating else self.devices:
                for a in self.attempts:
                    key = self._key(m, d, a)
                    if key not in self.steps:
                        self.steps[key] = _map_step(self.job, self.session, m,
                                                    self.groups[m], d, self.maps, a,
                                                    self.closed)

    def launch(self, m: int, device: str, attempt: str) -> None:
        """Start attempt ``attempt`` of map task ``m`` on ``device`` (a floating phase: in slot
        ``device``, on whichever worker Dask gives it)."""
        if self._key(m, device, attempt) not in self.steps:
            self.prebuild([m])
        fetches, self.names, self.types = self.steps[self._key(m, device, attempt)]
        started = time.perf_counter()
        self.running.setdefault(m, []).append((device, started))
        md = tv.RunMetadata()  # its step id: how the scheduler's events name its tasks
        self.metas.append((m, md))
        self.futures[self.pool.submit(self.session.run, fetches, options=run_options(),
                                      run_metadata=md)] = (m, device, attempt, started)

    def busy(self) -> set:
        """The devices with an attempt in flight."""
        return {d for attempts in self.running.values() for d, _ in attempts}

    def fill(self) -> None:
        """Give each free device (slot) the next pending task."""
        if self.floating and time.monotonic() - self._counted >= SLOTS_EVERY_S:
            self._count_slots()
        busy = self.busy()
        for d in self.devices:
            if d not in busy and self.pending:
                self.launch(self.pending.popleft(), d, "a0")

    def run(self) -> None:
        """Run the map tasks until each has a winner or was skipped."""
        job = self.job
        while len(self.winners) + len(self.abandoned) < len(self.groups):
            self.fill()
            done, _ = wait(list(self.futures), timeout=POLL_S, return_when=FIRST_COMPLETED)
            for fut in done:
                self._finished(fut)
            if not job.speculative or self.pending:
                continue
            for m, device in self.policy.decide(
                    {k: v for k, v in self.running.items() if k not in self.winners},
                    self.durations, self.devices, time.perf_counter()):
                logger.info("mr job %s: backup of map task %d on %s", job.name, m, device)
                self.stragglers.add(self.running[m][0][0])
                self.backups += 1
                self.launch(m, device, "b1")

    def _finished(self, fut) -> None:
        """An attempt ended: commit it if it is its task's first to succeed, else handle its
        failure."""
        m, device, attempt, started = self.futures.pop(fut)
        self.running[m] = [a for a in self.running.get(m, []) if a[0] != device]
        if not self.running[m]:
            del self.running[m]
        if m in self.winners or m in self.abandoned:
            return  # a loser finished: the committer already dropped its files
        exc = fut.exception()
        if exc is not None:
            if m not in self.running:  # (else its backup may still succeed)
                self._failed(m, exc)
            return
        if self.maps.commit_task(m, attempt):
            self.winners[m] = attempt
            self.durations.append(time.perf_counter() - started)
            self.map_vals.append(fut.result())
            self.backup_wins += attempt != "a0"

    def _failed(self, m: int, exc: BaseException) -> None:
        """Map task ``m`` failed with no attempt left in flight: run it again (a lost worker),
        narrow it down (skipping mode), or raise ``exc``."""
        job = self.job
        if isinstance(exc, tv.errors.UnavailableError) and \
                self.retries[m] < MAX_RETRIES:  # a lost worker (or a dropped plan)
            self.retries[m] += 1
            logger.warning("mr job %s: map task %d lost (%s); running it again",
                           job.name, m, str(exc).splitlines()[0])
            self.pending.appendleft(m)
            return
        parts = _bisect(self.groups[m]) if _skippable(exc) and \
            len(self.skipped) < job.skip_bad_records else False
        if parts is False:
            raise exc
        self.abandoned.add(m)
        if parts is None:  # one record's range: skip that record
            (_, sp), = self.groups[m]
            self.skipped.append(f"{sp.url}@{sp.start}")
            logger.warning("mr job %s: skipped the record at byte %d of %s (%s)",
                           job.name, sp.start, sp.url, str(exc).splitlines()[0])
        new = []
        for g in parts or ():
            self.groups.append(g)
            new.append(len(self.groups) - 1)
        self.prebuild(new)
        self.pending.extend(new)

    def counters(self, reduce_vals: list, reduce_counters: list) -> dict:
        """The job's counters from the winners' map values, the reducers' ``reduce_vals`` and
        a reduce function's ``[(name, value), ...]``."""
        names, vals = self.names, self.map_vals
        built = _Built({}, len(self.groups), names)
        counters = _sum_counters({"map": [v[0] for v in vals], "shuffle": [v[1] for v in vals],
                                  "reduce": reduce_vals,
                                  "user": [sum(v[2 + i] for v in vals)
                                           for i in range(len(names))]}, built)
        for name, v in reduce_counters:
            counters[name] = counters.get(name, 0) + int(v)
        counters.update(backup_tasks=self.backups, backup_wins=self.backup_wins)
        return counters


def _setup(job, session, num_workers: int, committer, boundaries):
    """Size the job, claim its output (unless the caller did: ``committer``), cut its split
    groups and set up the map outputs' folder. Returns ``(committer, groups, maps, scratch)``."""
    splits = job._splits()
    if job.num_reducers is None:
        job._size_reducers(session, splits, num_workers)
    root = job._scratch_root(session)
    if root is None:
        raise tv.errors.InvalidArgumentError(
            f"mr job {job.name}: its shuffle goes through storage, but it has no output and "
            "its workers are on several machines: give scratch= (a URL every worker reaches)")
    if committer is None and job.output is not None:  # (first: maps may go in its _temporary)
        committer = storage.OutputCommitter(job.output.url)
        committer.setup_job(overwrite=job.output.overwrite)
    job._bounds = job._boundaries(splits) if boundaries is None else tuple(boundaries)
    groups = job._groups(splits, job.map_tasks or len(splits))  # default: a task per split
    report_progress("start", job.name, len(splits), len(groups), job.num_reducers)
    maps_url = f"{root}/maps-{uuid.uuid4().hex[:12]}"
    scratch = Scratch(maps_url)
    maps = storage.OutputCommitter(maps_url)
    try:
        maps.setup_job(overwrite=True)
    except BaseException:
        scratch.remove_debris()
        if committer is not None:
            committer.abort_job()
        raise
    return committer, groups, maps, scratch


def reduce_devices(devices: list, busy: set, stragglers: set) -> list:
    """The devices the reducers go to: those neither running a map attempt nor a straggler
    (a device whose attempt got a backup); else, in that order, those that are no straggler,
    those not busy, all. A reduce never lands on the straggler a backup avoided while another
    device is there.

    >>> reduce_devices(["a", "b", "c"], {"b"}, {"c"})
    ['a']
    >>> reduce_devices(["a", "b"], {"a", "b"}, {"b"})
    ['a']
    """
    for ok in (lambda d: d not in busy and d not in stragglers, lambda d: d not in stragglers,
               lambda d: d not in busy):
        out = [d for d in devices if ok(d)]
        if out:
            return out
    return list(devices)


def _reduce_step(job, session, phase: _MapPhase, recovered: dict) -> tuple:
    """One step of the reducers not ``recovered`` over the winners' files: floating where the
    map steps were (Dask places them, a reducer that holds state pinned as
    :func:`_pin_stateful` does), else on devices not busy with losers. Returns ``(reducers,
    attempt, reduce values, reduce-function counters)``."""
    free = phase.pinned if phase.floating else \
        reduce_devices(phase.devices, phase.busy(), phase.stragglers)
    attempt = uuid.uuid4().hex[:12]
    reduce_fetches = []
    rsink = job._sink = CounterSink()  # a reduce function's counters
    reducers = [r for r in range(job.num_reducers) if r not in recovered]
    graph = session.graph
    for r in reducers:
        urls = tuple(f"{phase.maps.attempt_url(m, phase.winners[m])}/m{m:05d}-r{r:05d}.arrow"
                     for m in sorted(phase.winners))
        n0 = len(graph.get_operations())
        device = _device(True, f"reduce{r}", 0) if phase.floating else free[r % len(free)]
        with graph.as_default():
            reduce_fetches.append(job._build_reducer(r, device, [], attempt, urls,
                                                     phase.types))
        _pin_stateful(graph, n0, device, r % len(free))  # (floating: free is /job:worker/task:<i>)
    md = tv.RunMetadata()
    vals, rcounts = session.run([reduce_fetches, [t for _, t in rsink.items]],
                                options=run_options(), run_metadata=md) if reducers else ([], [])
    phase.reduce_step = md.step_id
    return reducers, attempt, vals, list(zip([n for n, _ in rsink.items], rcounts))


def _abandon(e: BaseException, job, phase: _MapPhase, scratch, committer) -> None:
    """A phased job failed (or was interrupted: ``e`` not an ``Exception``): close the map
    outputs and remove them, and release the output (kept for ``--resume`` on Ctrl-C)."""
    _close(phase.closed)
    futures = list(phase.futures)
    if isinstance(e, Exception):  # the map steps still in flight end first (they write)
        wait(futures)
        scratch.remove_debris()
    else:  # Ctrl-C: now, and again once the workers are gone (sweep_interrupted)
        scratch.remove_when_done(futures)
        _INTERRUPTED.append(scratch)
    phase.maps.abort_job()
    if committer is not None and isinstance(e, Exception):
        committer.abort_job()
    elif committer is not None:  # Ctrl-C: finished reducers stay for --resume
        interrupted(committer, job.name)
    phase.pool.shutdown(wait=False)


def _commit(job, phase: _MapPhase, scratch, committer, reducers, attempt, vals, counters,
            recovered) -> tuple:
    """Commit the reducers' files (or gather their keys and values: no output), then remove
    the map outputs. Returns ``(urls, keys, values)``."""
    urls, keys, values = [], None, None
    try:
        if committer is not None:
            try:
                for r in reducers:
                    committer.commit_task(r, attempt)
                add_recovered(counters, recovered)
                urls = committer.commit_job()
                counters["reduce_output_bytes"] = written_bytes(urls)
            except BaseException:
                committer.abort_job()  # (a no-op after a commit_job that released it)
                raise
        else:
            keys = np.concatenate([np.asarray(k) for k, _ in vals])
            values = np.concatenate([np.asarray(v) for _, v in vals])
            counters["reduce_output_records"] = int(len(keys))
    except BaseException as e:
        if not isinstance(e, Exception):
            _INTERRUPTED.append(scratch)
        raise
    finally:  # the winners' map files; a loser still running: when it ends
        phase.maps.abort_job()
        scratch.remove_when_done(list(phase.futures))
    return urls, keys, values


def run_phased(job, session, num_workers: int, t0: float, committer=None, recovered=None,
               boundaries=None):
    """Map tasks as separate steps through storage (backups if ``job.speculative``), then one
    reduce step over the winners' files. ``committer``: the job's output, already claimed
    (set up) by the caller; else it is claimed here. ``recovered``: ``{reducer: counters}``
    of reducers a resumed job adopted (not run again); ``boundaries``: the range partition's
    (default: sampled here)."""
    recovered = recovered or {}
    since = time.time()
    committer, groups, maps, scratch = _setup(job, session, num_workers, committer, boundaries)
    devices = [f"/job:worker/task:{i}" for i in range(num_workers)]
    phase = _MapPhase(job, session, groups, devices, maps, f"{scratch.out_url}/_CLOSED")
    try:
        phase.run()
        reducers, attempt, vals, rcounts = _reduce_step(job, session, phase, recovered)
    except BaseException as e:
        _abandon(e, job, phase, scratch, committer)
        raise
    _close(phase.closed)
    phase.pool.shutdown(wait=False)
    counters = phase.counters(vals, rcounts)
    counters["bad_records"] = counters.get("bad_records", 0) + len(phase.skipped)
    urls, keys, values = _commit(job, phase, scratch, committer, reducers, attempt, vals,
                                 counters, recovered)
    counters["reducers"] = job.num_reducers
    report_progress("done", job.name, sum(len(g) for g in groups), len(groups),
                    job.num_reducers, counters)
    return Result(counters, urls, keys, values, time.perf_counter() - t0, len(groups),
                  job.num_reducers, skipped=phase.skipped,
                  rerun=_reruns(job, session, phase, since))


def _reruns(job, session, phase: _MapPhase, since: float) -> list[str]:
    """The map tasks and reducers that ran again because a worker left after ``since``:
    those Dask recomputed (the scheduler's events name their steps: a map step is its map
    task, the reduce step's tasks are its reducers) and those the driver ran again (a pinned
    map step whose worker left), logged as the one-step path does."""
    labels = {f"map{m}" for m in phase.retries}
    if session.client is not None:
        steps = {md.step_id: f"map{m}" for m, md in phase.metas if md.step_id}
        try:
            events = rerun_events(session.client, since)
        except Exception:  # noqa: BLE001 - a report: it never fails a finished job
            logger.debug("mr job %s: no re-run report", job.name, exc_info=True)
            events = []
        for name, step in events:
            if step in steps:
                labels.add(steps[step])
            elif step == phase.reduce_step and phase.reduce_step:
                labels.add(name.rpartition("-")[2])
    return log_reruns(job.name, sorted(labels, key=group_order), len(phase.groups),
                      job.num_reducers)


def _close(closed: str) -> None:
    """Mark the map outputs closed: an attempt that starts now writes nothing."""
    fs, path = storage.fsio.to_fs(closed)
    try:
        fs.pipe(path, b"")
    except (FileNotFoundError, OSError):  # the folder went (an output's _temporary cleared)
        pass
