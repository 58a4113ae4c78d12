"""``mr.Job``: a map-reduce job compiled to one tensorvm graph and run in one ``Session.run``.

The graph, for M map tasks and R reducers, each a floating device of its own (any worker of
the job: Dask places, steals and recomputes them; see :mod:`tensorvm.passes.place`)::

    map m on /job:worker/task:*map<m>                      reduce r on /job:worker/task:*reduce<r>
      MRReadSplits(its split group) -> records, counters
      user map fn (tensor ops) -> keys, values
      combine (MRGroupReduce or a tensor fn)
      MRPartition -> (keys, values) x R  --- bucket r: Send/Recv ---> MRMerge(M buckets)
                                                                      reduce (built-in or fn)
                                                                      MRWrite -> attempt file

Every bucket is one Send/Recv pair, i.e. one Dask task dependency. On a cluster there is one
map task per split (small files grouped up to the split size), whatever the worker count, so
a worker that joins takes map tasks, and a lost worker costs only its lost map outputs and
unfinished reducers (Dask recomputes them; the step does not fail). A map or reduce task
whose ops hold state (a stateful ``py_func``, a variable) is pinned to
``/job:worker/task:<m % W>`` over the W worker devices instead, as every task of an iterative
job (:meth:`Job.compile`) and of a phased job (:mod:`.speculate`) is; a lost worker then fails
the step, which runs again (``max_attempts``). The driver
sets the output up before the step and commits it after (``commit_task`` per reducer, then
``commit_job`` and ``_SUCCESS``), so a failed or repeated step leaves only ``_temporary``
debris.
"""
from __future__ import annotations

import logging
import tempfile
import time
import uuid
from typing import Callable

import numpy as np

import tensorvm as tv
from tensorvm.framework import errors
from tensorvm import storage
from tensorvm.framework.op_def_library import apply_op
from tensorvm.ops.mapreduce import mapreduce_ops as mro
from tensorvm.runtime.cluster.stragglers import rerun_tasks

from . import recovery, sizing
from .api import CounterSink, Input, Output, RangePartition, hash_partition, range_partition
from .common import (Result, _Built, _device, _failed_map_task, _flat, _pin_stateful,
                     _sum_counters, call_user, log_reruns, report_progress, run_options,
                     written_bytes)
from .sampling import sample_boundaries
from .speculate import run_phased

__all__ = ["Job", "Result", "run"]

logger = logging.getLogger("tensorvm")


def _count_arg(value, what: str, allow_none: bool = False) -> int | None:
    """``value`` as a positive int (NumPy integers too), else InvalidArgumentError naming
    ``what``: a float, a string, a bool or a count below 1 is refused, never rounded."""
    if value is None and allow_none:
        return None
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) \
            or value < 1:
        raise errors.InvalidArgumentError(
            f"{what} must be an int >= 1{' or None' if allow_none else ''}, got {value!r}")
    return int(value)


def _check_how(how, what):
    if isinstance(how, str) and how not in mro.REDUCTIONS:
        raise errors.InvalidArgumentError(f"unknown {what} {how!r}; built-ins: "
                                          f"{', '.join(mro.REDUCTIONS)} or a tensor function")


class Job:
    """A map-reduce job (read like Hadoop/Spark; see :mod:`tensorvm.mapreduce`).

    ``map(records) -> mr.emit(keys, values)``: a tensor function over a batch of records.
    ``combine``/``reduce``: a built-in name (``sum count min max mean first collect``), a
    tensor function ``f(keys, values) -> mr.emit(...)`` (it gets the keys sorted, equal keys
    adjacent), or None (no combiner; identity reduce). ``partition``: ``mr.hash_partition`` or
    ``mr.range_partition(...)`` (total order). ``output``: an ``mr.*_output`` (committed) or None
    (the result comes back to the driver). ``num_reducers``: reduce tasks; None (the default)
    sizes them to the data: each reducer's share of the input within a quarter of the memory
    a worker thread can use, at least one per worker thread (:mod:`.sizing`); an explicit
    count whose share is larger is warned about before the job starts. ``map_tasks``: split
    groups (default: on a cluster one per split, small files grouped up to the split size; in
    process one per worker device). ``skip_bad_records``: how many undecodable
    records may be skipped and counted; beyond it the job fails naming the split URL and byte
    offset. A map function that fails names its task's splits; with ``skip_bad_records`` the
    job runs again in Hadoop's skipping mode (:mod:`.speculate`: the failing split's byte
    range is halved until the failing record is alone, which is skipped, counted and listed
    in ``Result.skipped``). ``max_attempts``: a step that loses a worker
    (``UnavailableError``) runs again, up to this many times in all; the lost attempt's files
    are never committed, so the result stays exact.
    ``spill_bytes``: a map task whose shuffle output is larger writes its buckets as Arrow IPC
    files (under ``scratch``, or the output's ``_temporary``) and sends only their names; the
    reducers read them one at a time (reducing as they go where the reduction allows).
    ``speculative``: run each map task as its own step through storage and start backup
    copies of slow ones on idle devices (``backup_after`` x the median task time; see
    :mod:`tensorvm.mapreduce.speculate`); the first copy to finish wins. ``shuffle``:
    ``"storage"`` runs the map tasks as separate steps whose buckets all go through storage
    (memory then holds one map task's and one reducer's data at a time), ``"memory"`` one
    step, ``"auto"`` storage when the input exceeds half the workers' ``memory_limit``. The
    shuffle through storage goes under ``scratch``, else the output's ``_temporary``, else (no
    output) this machine's temporary folder when every worker runs here — never a
    machine-local folder on a multi-machine cluster — and is removed on every exit path
    (success, failure, Ctrl-C). ``run(resume=True)`` adopts the reducers that a dead driver's
    run of the same job already wrote (:mod:`.recovery`).
    """

    def __init__(self, input: Input, map: Callable, reduce="sum", combine=None,
                 partition=hash_partition, num_reducers: int | None = None,
                 output: Output | None = None,
                 map_tasks: int | None = None, skip_bad_records: int = 0,
                 sort_output: bool = True, name: str = "mr", max_attempts: int = 2,
                 scratch: str | None = None, spill_bytes: int = 256 << 20,
                 speculative: bool = False, backup_after: float = 1.5,
                 shuffle: str = "auto"):
        inputs = list(input) if isinstance(input, (list, tuple)) else [input]
        maps = list(map) if isinstance(map, (list, tuple)) else [map] * len(inputs)
        if not inputs or not all(isinstance(i, Input) for i in inputs):
            raise errors.InvalidArgumentError("input= must be an mr input (mr.text(...), …) "
                                              "or a list of them")
        if len(maps) != len(inputs):
            raise errors.InvalidArgumentError(f"{len(inputs)} inputs but {len(maps)} map "
                                              "functions (give one, or one per input)")
        num_reducers = _count_arg(num_reducers, "num_reducers", allow_none=True)
        map_tasks = _count_arg(map_tasks, "map_tasks", allow_none=True)
        _check_how(reduce, "reduce")
        _check_how(combine, "combine")
        if combine in ("mean", "collect"):
            raise errors.InvalidArgumentError(f"combine={combine!r} is not associative; "
                                              "combine with sum/min/max/first or a function")
        self.inputs, self.maps = inputs, maps
        self.input, self.map, self.reduce, self.combine = inputs[0], maps[0], reduce, combine
        if partition is range_partition:  # the same form as mr.hash_partition (a value)
            partition = range_partition()
        # reducers_arg: as given (None: sized at run time); num_reducers: the count of the run
        # being built (the given count until a run sizes it)
        self.reducers_arg = self.num_reducers = num_reducers
        self.partition, self.output = partition, output
        self.map_tasks, self.skip_bad_records = map_tasks, int(skip_bad_records)
        self.sort_output, self.name = sort_output, name
        self.max_attempts = max(1, int(max_attempts))
        self.scratch, self.spill_bytes = scratch, int(spill_bytes)
        self.speculative, self.backup_after = bool(speculative), float(backup_after)
        if shuffle not in ("auto", "memory", "storage"):
            raise errors.InvalidArgumentError(f"shuffle must be auto, memory or storage, "
                                              f"got {shuffle!r}")
        self.shuffle = shuffle

    def __repr__(self) -> str:
        return (f"<mr.Job {self.name} input={self.input.urls} reducers={self.num_reducers} "
                f"output={self.output.url if self.output else None}>")

    # ---- building ------------------------------------------------------------------------
    def _splits(self) -> list:
        """``[(input index, split), …]`` of every input."""
        return [(i, s) for i, inp in enumerate(self.inputs) for s in inp.splits()]

    def _groups(self, splits: list, num_tasks: int) -> list:
        """Split groups (``map_tasks``, else ``num_tasks`` of them per input), each of one
        input's splits."""
        m = self.map_tasks or num_tasks
        groups = []
        for i in range(len(self.inputs)):
            mine = [x for x in splits if x[0] == i]
            groups += [mine[j::m] for j in range(m) if mine[j::m]]
        return groups or [[]]

    def _map_groups(self, splits: list, num_workers: int, client=None) -> list:
        """The map tasks' split groups: ``map_tasks`` groups when given; else, on a cluster
        (``client``, a Dask client), one per split with small files grouped (:func:`.sizing.split_groups`,
        up to :func:`.sizing.map_task_bytes`: the workers' threads set the grain, never which
        worker runs what; Dask spreads the tasks); else (in process) one per worker device, as
        the in-process session has few threads."""
        if self.map_tasks or client is None:
            return self._groups(splits, num_workers)
        threads = sum(t for _, t in sizing.worker_memory(client, num_workers))
        total = sizing.input_bytes(splits)
        return [g for i, inp in enumerate(self.inputs)
                for g in sizing.split_groups([x for x in splits if x[0] == i],
                                             sizing.map_task_bytes(total, inp.split_size,
                                                                   threads))
                if g]

    def _map_of(self, group) -> Callable:
        return self.maps[group[0][0] if group else 0]

    def _read(self, group, name):
        inp = self.inputs[group[0][0] if group else 0]
        attrs = {"splits": tuple(s for _, s in group),
                 "columns": inp.columns, "dtype": inp.dtype, "shape": inp.shape,
                 "skip": self.skip_bad_records}
        outs = apply_op("MRReadSplits", [], attrs, name=name).outputs
        if inp.columns:
            return dict(zip([c for c, _ in inp.columns], outs[:-1])), outs[-1]
        return outs[0], outs[-1]

    def _apply_fn(self, how, keys, values, what, merged):
        if how is None:
            return keys, values
        if isinstance(how, str):
            return tuple(apply_op("MRGroupReduce", [keys, values], {"how": how},
                                  name=what).outputs)
        if not merged:  # a combine function sees its keys grouped, as a reducer does
            keys, values = apply_op("MRMerge", [keys, values], {"how": None, "sort": True},
                                    name=what + "_sort").outputs
        em = call_user(how, [keys, values], what, self._sink)
        return em.keys, em.values

    def build(self, graph: tv.Graph, num_workers: int, attempt: str = "0",
              splits: list | None = None, boundaries: tuple = (), skip=(),
              floating: bool = True, client=None) -> _Built:
        """Add the job's ops to ``graph``; return the fetches of its one step. ``skip``: reducers
        not to build (recovered from a dead driver's run). ``floating``: each map and reduce
        task on a floating device of its own (``/job:worker/task:*map<m>``), which Dask
        schedules on any worker; a task whose ops hold state (a stateful ``py_func``, a
        variable) is pinned to ``/job:worker/task:<m % num_workers>`` instead, as every task
        is with ``floating=False``. ``client``: the cluster's Dask client, for the map
        tasks' grain (:meth:`_map_groups`)."""
        splits = self._splits() if splits is None else splits
        if self.num_reducers is None:
            self._size_reducers(None, splits, num_workers)
        groups = self._map_groups(splits, num_workers, client)
        r_count = self.num_reducers
        part = self.partition
        sink = self._sink = CounterSink()
        buckets: list[list] = [[] for _ in range(r_count)]
        fetches: dict = {"map": [], "shuffle": [], "reduce": [], "user": []}
        with graph.as_default():
            for m, group in enumerate(groups):
                n0 = len(graph.get_operations())
                device = _device(floating, f"map{m}", m % num_workers)
                with tv.device(device), tv.name_scope(f"{self.name}/map{m}"):
                    records, counts = self._read(group, "read")
                    em = call_user(self._map_of(group), [records], "map", sink)
                    keys, values = self._apply_fn(self.combine, em.keys, em.values, "combine",
                                                  False)
                    outs = apply_op("MRPartition", [keys, values], {
                        "num": r_count, "how": part.how, "boundaries": tuple(boundaries),
                        "spill_url": self._spill_url(attempt), "threshold": self.spill_bytes,
                        "task": m}, name="partition").outputs
                _pin_stateful(graph, n0, device, m % num_workers)
                for r in range(r_count):
                    buckets[r] += [outs[2 * r], outs[2 * r + 1]]
                fetches["map"].append(counts)
                fetches["shuffle"].append(outs[-1])
            reducers = [r for r in range(r_count) if r not in skip]
            for r in reducers:
                n0 = len(graph.get_operations())
                device = _device(floating, f"reduce{r}", r % num_workers)
                fetches["reduce"].append(self._build_reducer(r, device, buckets[r], attempt))
                _pin_stateful(graph, n0, device, r % num_workers)
        fetches["user"] = [t for _, t in sink.items]
        return _Built(fetches, len(groups), [n for n, _ in sink.items], groups, reducers)

    def _build_reducer(self, r: int, device: str, inputs: list, attempt: str,
                       urls: tuple = (), types: tuple = ()):
        """Reducer ``r`` on ``device``: merge its buckets (tensors ``inputs`` and/or spilled
        files ``urls``; ``types`` gives the key and value dtypes/shapes when there are no
        tensors), reduce, and write or return the result."""
        with tv.device(device), tv.name_scope(f"{self.name}/reduce{r}"):
            how = self.reduce if isinstance(self.reduce, str) else None
            if self.output is not None and not callable(self.reduce):
                o = self.output
                return self._done(r, attempt, apply_op("MRMergeWrite", inputs, {
                    "how": how, "sort": self.sort_output, "urls": urls, "types": types,
                    "url": o.url, "task": r, "attempt": attempt, "fmt": o.format,
                    "sep": o.sep}, name="merge_write").outputs[0])
            keys, values = apply_op("MRMerge", inputs, {
                "how": how, "sort": self.sort_output or callable(self.reduce), "urls": urls,
                "types": types}, name="merge").outputs
            if callable(self.reduce):
                keys, values = self._apply_fn(self.reduce, keys, values, "reduce", True)
            if self.output is None:
                return keys, values
            o = self.output
            return self._done(r, attempt, apply_op("MRWrite", [keys, values], {
                "url": o.url, "task": r, "attempt": attempt, "fmt": o.format, "sep": o.sep},
                name="write").outputs[0])

    def _done(self, r: int, attempt: str, counts):
        """After reducer ``r``'s file is written, on its worker: the done marker a resumed job
        adopts it by (:class:`.recovery.TaskDone`)."""
        # stateless: it only writes this attempt's marker, so it may run again with the rest
        # of a floating reducer
        return tv.py_func(recovery.TaskDone(self.output.url, r, attempt), [counts], tv.int64,
                          stateful=False, name="done")

    def _through_storage(self, session, splits: list) -> bool:
        """``shuffle="auto"``: go through storage when the input is more than half of the
        workers' memory (``memory_limit``) — the shuffle is about as large as the input —
        unless the job has a combiner: its map outputs are summaries of their splits (a map
        task's that is still large spills its buckets, ``spill_bytes``), and the in-memory
        step keeps its map tasks floating (elastic), where the phased steps pin them."""
        if self.shuffle != "auto":
            return self.shuffle == "storage"
        client = session.client
        if client is None or self.combine is not None:
            return False
        from tensorvm.runtime.cluster.spec import scheduler_identity
        limits = [w.get("memory_limit") or 0
                  for w in scheduler_identity(client)["workers"].values()]
        if not limits or not all(limits):
            return False
        if sizing.input_bytes(splits) <= 0.5 * sum(limits):
            return False
        if self._scratch_root(session) is None:
            logger.warning("mr job %s: the shuffle may exceed the workers' memory, but it has "
                           "no storage that every worker shares (no output, no scratch=, "
                           "workers on several machines): it stays in memory", self.name)
            return False
        return True

    def _scratch_root(self, session) -> str | None:
        """Where the shuffle through storage goes: ``scratch``, else the output's
        ``_temporary`` (shared storage, removed by the commit), else this machine's temporary
        folder if every worker runs here; None: no shared storage."""
        if self.scratch:
            return self.scratch.rstrip("/")
        if self.output is not None:
            return f"{self.output.url.rstrip('/')}/_temporary"
        if sizing.all_local(session.client if session is not None else None):
            return f"file://{tempfile.gettempdir()}"
        return None

    def _size_reducers(self, session, splits: list, num_workers: int,
                       floating: bool = True) -> int:
        """Set ``num_reducers`` for this run: the given count (warned about when a reducer's
        share of the input exceeds its budget), else :func:`.sizing.choose_reducers` — on a
        cluster, for ``floating`` reducers of a job without a combiner, spread
        (:func:`.sizing.spread_reducers`)."""
        part = self.partition
        if self.reducers_arg is None and isinstance(part, RangePartition) and \
                part.boundaries is not None:
            self.num_reducers = len(part.boundaries) + 1
            return self.num_reducers
        workers = sizing.worker_memory(session.client if session is not None else None,
                                       num_workers)
        size, fraction = sizing.input_bytes(splits), sizing.memory_fraction()
        if self.reducers_arg is None:
            self.num_reducers = sizing.choose_reducers(size, workers, fraction)
            # spread over more, smaller reducers (a slow worker holds back one small one)
            # only when the reducers' work follows the input: after a combiner the shuffle is
            # a summary of it, and every reducer more is only a task's overhead
            if floating and self.combine is None and session is not None and \
                    session.client is not None:
                self.num_reducers = sizing.spread_reducers(self.num_reducers, size,
                                                           sum(t for _, t in workers))
            logger.info("mr job %s: %d reducers for %.1f MiB of input (each at most %.1f MiB: "
                        "%g of the memory a worker thread can use; at least one per thread, "
                        "%d threads)",
                        self.name, self.num_reducers, size / (1 << 20),
                        sizing.reducer_budget(workers, fraction) / (1 << 20), fraction,
                        sum(t for _, t in workers))
        else:
            self.num_reducers = self.reducers_arg
            text = sizing.fit_warning(self.name, self.num_reducers, size, workers, fraction)
            if text:
                logger.warning(text)
        return self.num_reducers

    def _durable_url(self, session, attempt: str) -> str:
        """Where this attempt's map tasks keep their outputs, so a worker lost after running
        some costs reading them back, not running them again (Hadoop's and Spark's map outputs
        on disk): under the job's scratch storage; "" (not kept) without storage every worker
        shares."""
        if session is None or session.client is None:
            return ""
        root = self._scratch_root(session)
        return f"{root.rstrip('/')}/tvm-maps-{attempt}" if root else ""

    def _spill_url(self, attempt: str) -> str | None:
        """Where map outputs over ``spill_bytes`` go: under ``scratch``, else under the
        output's ``_temporary`` (removed by the commit), else nowhere (kept in memory)."""
        if self.scratch:
            return f"{self.scratch.rstrip('/')}/shuffle-{attempt}"
        if self.output is not None:
            return f"{self.output.url.rstrip('/')}/_temporary/shuffle-{attempt}"
        return None

    # ---- planning and running ------------------------------------------------------------
    def _boundaries(self, splits: list) -> tuple:
        part = self.partition
        if not isinstance(part, RangePartition) or self.num_reducers == 1:
            return ()
        if part.boundaries is not None:
            if len(part.boundaries) != self.num_reducers - 1:
                raise errors.InvalidArgumentError(
                    f"range_partition: {len(part.boundaries)} boundaries for "
                    f"{self.num_reducers} reducers (need {self.num_reducers - 1})")
            return part.boundaries
        return sample_boundaries(self, splits, part.sample)

    def plan(self, session: tv.Session | None = None, num_workers: int = 2):
        """The compiled plan of the job's step (devices, stages, Send/Recv), as ``sess.plan``."""
        graph = tv.Graph() if session is None else session.graph
        splits = self._splits()
        self._size_reducers(session, splits, num_workers)
        built = self.build(graph, num_workers, "plan", splits, self._boundaries(splits))
        own = session is None
        session = session or tv.Session(graph=graph)
        try:
            return session.plan(_flat(built.fetches))
        finally:
            if own:
                session.close()

    def run(self, session: tv.Session | None = None, num_workers: int | None = None,
            resume: bool | None = None) -> Result:
        """Run the job in one step of ``session`` (default: a new in-process session);
        returns a :class:`Result`. ``num_workers``: worker devices to spread over (default:
        the session's ``worker`` tasks, or 2 in process). ``resume``: adopt what a dead
        driver's run of this job wrote to its output (:mod:`.recovery`; default: inside
        :func:`.recovery.resuming`, as the CLI's ``--resume``)."""
        own = session is None
        session = session or tv.Session(graph=tv.Graph())
        if resume is None:
            resume = recovery.resume_requested()
        try:
            return self._run(session, num_workers or _worker_count(session), bool(resume))
        finally:
            if own:
                session.close()

    def compile(self, session: tv.Session, num_workers: int | None = None) -> Callable:
        """Build the job once into ``session.graph`` and return ``step() -> Result`` that
        runs it again (the plan is cached: iterative jobs such as k-means and PageRank read
        Variables that the driver updates between steps). Jobs with no output only."""
        if self.output is not None:
            raise errors.InvalidArgumentError("compile() is for jobs with no output (each run "
                                              "of an output job commits a new attempt)")
        splits = self._splits()
        num_workers = num_workers or _worker_count(session)
        self._size_reducers(session, splits, num_workers, floating=False)
        # pinned: the plan is run again and again, on the direct plane where it can be
        built = self.build(session.graph, num_workers, "0", splits, self._boundaries(splits),
                           floating=False)
        return lambda: self._finish(session, built, None, "0", time.perf_counter())

    def _run(self, session, num_workers, resume: bool = False) -> Result:
        t0 = time.perf_counter()
        splits = self._splits()
        self._size_reducers(session, splits, num_workers)  # (before anything is claimed)
        phased = self.speculative or self._through_storage(session, splits)
        committer = storage.OutputCommitter(self.output.url) if self.output is not None \
            else None
        try:
            recovered, boundaries = {}, None
            if committer is not None:  # claims the output: another job's gets AlreadyExists
                recovered, boundaries = self._claim_output(committer, splits, resume)
            if boundaries is None:
                boundaries = self._boundaries(splits)
            if committer is not None:
                recovery.write_plan(committer, recovery.fingerprint(self, splits),
                                    self.num_reducers, boundaries)
            if phased:
                return run_phased(self, session, num_workers, t0, committer, recovered,
                                  boundaries)
            return self._attempts(session, num_workers, splits, boundaries, committer, t0,
                                  recovered)
        except BaseException as e:
            if committer is not None and committer.job_id is not None:
                if isinstance(e, Exception):  # released on every exit path (a no-op once
                    committer.abort_job()  # released)
                else:  # Ctrl-C: its tasks may still write
                    recovery.interrupted(committer, self.name)
            raise

    def _claim_output(self, committer, splits: list, resume: bool) -> tuple:
        """Claim the output (``setup_job``); with ``resume``, take a dead driver's run of this
        job over (``recover_job``) and commit its reducers that were written whole. Returns
        ``({reducer: counters} recovered, the plan's boundaries or None)``."""
        if not resume:
            committer.setup_job(overwrite=self.output.overwrite)
            return {}, None
        committer.recover_job()
        plan = recovery.read_plan(committer)
        why = "no plan of an earlier run" if plan is None else None
        if plan is not None and plan["inputs"] != recovery.fingerprint(self, splits):
            why = "its input differs"
        elif plan is not None and self.reducers_arg not in (None, plan["num_reducers"]):
            why = f"it had {plan['num_reducers']} reducers, not {self.reducers_arg}"
        if why is not None:
            logger.warning("mr job %s: nothing to resume at %s (%s): running the whole job",
                           self.name, self.output.url, why)
            committer.setup_job(overwrite=self.output.overwrite)
            return {}, None
        self.num_reducers = plan["num_reducers"]
        recovered = {r: counts for r, (attempt, counts) in
                     recovery.done_reducers(committer, self.num_reducers).items()
                     if committer.commit_task(r, attempt)}
        logger.warning("mr job %s: resuming at %s: %d of %d reducers recovered (%s); running "
                       "the others", self.name, self.output.url, len(recovered),
                       self.num_reducers, ", ".join(map(str, sorted(recovered))) or "none")
        return recovered, tuple(plan["boundaries"])

    def _attempts(self, session, num_workers, splits, boundaries, committer, t0,
                  recovered=None) -> Result:
        recovered = dict(recovered or {})
        for attempt_no in range(1, self.max_attempts + 1):
            attempt = uuid.uuid4().hex[:12]
            built = self.build(session.graph, num_workers, attempt, splits, boundaries,
                               skip=recovered, client=session.client)
            try:
                result = self._finish(session, built, committer, attempt, t0, recovered)
            except errors.UnavailableError as e:  # a worker died: run the step again
                if attempt_no == self.max_attempts:
                    raise
                logger.warning("mr job %s: attempt %d lost a worker (%s); running it again, "
                               "its partial output discarded", self.name, attempt_no,
                               str(e).splitlines()[0])
                if committer is not None:
                    self._setup_again(committer, splits, boundaries)
                    recovered = {}  # (cleared with the attempts)
                continue
            except errors.OpError as e:
                failed = _failed_map_task(e, self.name)
                if failed is None or failed >= len(built.groups) or \
                        isinstance(e, errors.DataLossError):  # (undecodable: named already)
                    raise
                if self.skip_bad_records > 0:  # skipping mode narrows the failing records
                    logger.warning("mr job %s: map task %d failed; running again in skipping "
                                   "mode", self.name, failed)
                    if committer is not None:  # (still this job's output)
                        self._setup_again(committer, splits, boundaries)
                    return run_phased(self, session, num_workers, t0, committer, {},
                                      boundaries)
                where = ", ".join(s.id for _, s in built.groups[failed])
                raise type(e)(f"{e}\n  in map task {failed} reading {where}") from e
            result.attempts = attempt_no
            return result
        raise AssertionError("unreachable")

    def _setup_again(self, committer, splits, boundaries) -> None:
        """A retried step: the attempts go (``setup_job`` keeps this job's claim), the plan is
        recorded again."""
        committer.setup_job(overwrite=self.output.overwrite)
        recovery.write_plan(committer, recovery.fingerprint(self, splits), self.num_reducers,
                            boundaries)

    def _finish(self, session, built, committer, attempt, t0, recovered=None) -> Result:
        recovered = recovered or {}
        shape = (self.name, sum(len(g) for g in built.groups), built.num_map_tasks,
                 self.num_reducers)
        report_progress("start", *shape)
        durable = self._durable_url(session, attempt)
        since = time.time()
        try:
            if built.reducers or not recovered:
                vals = session.run(built.fetches, options=run_options(durable))
            else:  # every reducer recovered: nothing to run
                vals = {"map": [], "shuffle": [], "reduce": [], "user": []}
        except Exception as e:  # (Ctrl-C: the caller keeps what finished, for --resume)
            if committer is not None and not isinstance(e, errors.UnavailableError):
                committer.abort_job()
            raise
        finally:
            # the shuffle files of this attempt (the output's go with commit), the kept map
            # outputs
            for url in ([self._spill_url(attempt)] if self.scratch else []) + \
                    ([durable] if durable else []):
                fs, path = storage.fsio.to_fs(url)
                if fs.exists(path):
                    fs.rm(path, recursive=True)
        counters = _sum_counters(vals, built)
        rerun = self._reruns(session, built, since)
        urls: list = []
        keys = values = None
        if committer is not None:
            for r in built.reducers:
                if not committer.commit_task(r, attempt):
                    raise errors.AbortedError(f"reducer {r}'s output lost its commit")
            recovery.add_recovered(counters, recovered)
            urls = committer.commit_job()
            counters["reduce_output_bytes"] = written_bytes(urls)
        else:
            keys = np.concatenate([np.asarray(k) for k, _ in vals["reduce"]])
            values = np.concatenate([np.asarray(v) for _, v in vals["reduce"]])
            counters["reduce_output_records"] = int(len(keys))
        counters["reducers"] = self.num_reducers
        report_progress("done", *shape, counters)
        logger.info("mr job %s: %d maps x %d reducers in %.2fs", self.name,
                    built.num_map_tasks, self.num_reducers, time.perf_counter() - t0)
        return Result(counters, urls, keys, values, time.perf_counter() - t0,
                      built.num_map_tasks, self.num_reducers, rerun=rerun)

    def _reruns(self, session, built, since: float) -> list[str]:
        """The map and reduce tasks of this step that ran again because a worker left after
        ``since`` (Dask recomputes a floating task's lost work; the step goes on), logged."""
        if session.client is None or not built.reducers:
            return []
        try:
            names = [t.name for t in session.plan(_flat(built.fetches)).tasks]
            groups = rerun_tasks(session.client, names, since)
        except Exception:  # noqa: BLE001 - a report: it never fails a finished job
            logger.debug("mr job %s: no re-run report", self.name, exc_info=True)
            return []
        return log_reruns(self.name, groups, built.num_map_tasks, self.num_reducers)


def _worker_count(session) -> int:
    names = [k for k in session.devices if str(k).startswith("worker-")]
    if names:
        return len(names)
    client = session.client
    if client is not None:
        from tensorvm.runtime.cluster.spec import scheduler_identity
        return max(1, len(scheduler_identity(client)["workers"]))
    return 2


def run(job: Job, session: tv.Session | None = None, cluster=None,
        num_workers: int | None = None, resume: bool | None = None) -> Result:
    """Run ``job`` on ``session``, or on a new session for ``cluster`` (a ClusterSpec dict,
    ``"local"`` or a scheduler address), or in process. ``resume``: as :meth:`Job.run`."""
    if session is None and cluster is not None:
        target = cluster if isinstance(cluster, str) else None
        spec = None if isinstance(cluster, str) else cluster
        with tv.Session(target, graph=tv.Graph(), cluster=spec, verbose=False) as s:
            return job.run(s, num_workers, resume)
    return job.run(session, num_workers, resume)


