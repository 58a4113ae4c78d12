"""``tv.train.ClusterSpec`` (also ``tv.ClusterSpec``): the logical jobs and tasks of a cluster.

It lives in the core, beside the runtime that maps tasks onto Dask workers, so the runtime
never imports ``tv.train``.

>>> spec = ClusterSpec({"ps": 1, "worker": 2})
>>> spec.task_names()
['ps-0', 'worker-0', 'worker-1']
>>> ClusterSpec({"ps": ["tcp://10.0.0.1:4000"]}).worker_for("ps", 0)
'tcp://10.0.0.1:4000'

TF 1.x's host:port lists (``{"ps": ["localhost:2222"], "worker": ["localhost:2223"]}``) name
each task's TF address, not a Dask worker: tensorvm maps such a task to the Dask worker named
after it (``ps-0``), which ``tv.train.Server`` starts there, or the session starts itself. The
first task of the first job (in the order given) hosts the Dask scheduler, at its address,
unless ``TENSORVM_SCHEDULER`` names one (see :mod:`tensorvm.train.server`). A dict of task
index -> address is a sparse job: only those tasks exist (TF's rule).

>>> tf_spec = ClusterSpec({"ps": ["localhost:2222"], "worker": ["localhost:2223"]})
>>> tf_spec.by_task_name().as_dict()
{'ps': ['ps-0'], 'worker': ['worker-0']}
>>> tf_spec.scheduler_task(), tf_spec.scheduler_address()
(('ps', 0), 'tcp://localhost:2222')
>>> ClusterSpec({"worker": {1: "h:1"}}).tasks()
[('worker', 1)]

A job has at most :data:`MAX_TASKS_PER_JOB` tasks, and a task index (of a dict job) is below
:data:`MAX_TASK_INDEX` (TF's ``JobDef`` keys are int32): a count no cluster can have is refused
at once, naming the job and the bound, instead of filling memory.

>>> ClusterSpec({"worker": 10 ** 9})
Traceback (most recent call last):
...
tensorvm.errors.InvalidArgumentError: ClusterSpec: job 'worker' has 1000000000 tasks; a job
may have at most 10000 (tensorvm.runtime.cluster.spec.MAX_TASKS_PER_JOB)
"""
from __future__ import annotations

import functools

import os
import re
import threading

from ...framework.errors import InvalidArgumentError, UnavailableError

SCHEDULER_ENV = "TENSORVM_SCHEDULER"
# The most tasks one job may have (each is a Dask worker process, so no cluster comes near),
# and the bound on a task index a dict job may name (TF's JobDef maps int32 keys). The CLI's
# --cluster (tensorvm.jobs.runner.parse_cluster) refuses counts by the same bound.
MAX_TASKS_PER_JOB = 10_000
MAX_TASK_INDEX = 2 ** 31 - 1
_HOST_PORT = re.compile(r"^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9_.-]+):(\d+)$")


def is_tf_address(entry) -> bool:
    """Whether a ClusterSpec entry is a TF-style ``host:port`` (no scheme), as opposed to a
    Dask worker address (``tcp://…``) or name."""
    return isinstance(entry, str) and _HOST_PORT.match(entry) is not None


class ClusterSpec:
    """Jobs mapped to a task count, or to a list of Dask worker names/addresses (one per task)."""

    def __init__(self, cluster: dict | ClusterSpec):
        if isinstance(cluster, ClusterSpec):
            cluster = cluster.as_dict()
        if not isinstance(cluster, dict) or not cluster:
            raise InvalidArgumentError("ClusterSpec needs a dict of job name -> count or list")
        self._jobs: dict[str, list] = {}
        self._sparse: dict[str, list[int]] = {}  # job -> its task indices, for a dict job
        for job, v in cluster.items():
            if not isinstance(job, str) or not job.isidentifier():
                raise InvalidArgumentError(f"ClusterSpec: bad job name {job!r}")
            if isinstance(v, int):
                if v < 1:
                    raise InvalidArgumentError(f"ClusterSpec: job {job!r} needs >= 1 task")
                check_task_count(job, v)
                self._jobs[job] = [None] * v
            elif isinstance(v, (list, tuple)):
                check_task_count(job, len(v))
                self._jobs[job] = list(v)
            elif isinstance(v, dict):
                if not v or any(not isinstance(i, int) or i < 0 for i in v):
                    raise InvalidArgumentError(
                        f"ClusterSpec: job {job!r}: a dict maps task indices (ints >= 0) to "
                        f"addresses, got {_short(v)}")
                check_task_count(job, len(v))
                if max(v) > MAX_TASK_INDEX:
                    raise InvalidArgumentError(
                        f"ClusterSpec: job {job!r} names task {max(v)}; a task index is at "
                        f"most {MAX_TASK_INDEX} (tensorvm.runtime.cluster.spec.MAX_TASK_INDEX, TF's int32)")
                # only the tasks named: a task index is a key, not a position
                self._jobs[job] = {i: v[i] for i in sorted(v)}
                self._sparse[job] = sorted(v)
            else:
                raise InvalidArgumentError(f"ClusterSpec: job {job!r}: expected a count or a "
                                           f"list of worker names/addresses, got {v!r}")

    @property
    def jobs(self) -> list[str]:
        """The job names, in the order given."""
        return list(self._jobs)

    def num_tasks(self, job: str) -> int:
        """How many tasks ``job`` has."""
        return len(self.task_indices(job))

    def task_indices(self, job: str) -> list[int]:
        """The task indices of ``job`` (``0 .. n-1``, or those a dict gave);
        ``InvalidArgumentError`` for an unknown job."""
        if job not in self._jobs:
            raise InvalidArgumentError(f"ClusterSpec: no job {job!r} in {self.jobs}")
        return list(self._sparse.get(job, range(len(self._jobs[job]))))

    def tasks(self) -> list[tuple[str, int]]:
        """Every task as ``(job, index)``, job by job."""
        return [(j, i) for j in self._jobs for i in self.task_indices(j)]

    def task_address(self, job: str, task: int):
        """The entry given for a task (TF: ``cluster.task_address``)."""
        if job not in self._jobs or task not in self.task_indices(job):
            raise InvalidArgumentError(f"ClusterSpec: no task {task} in job {job!r}")
        return self._jobs[job][task]

    def has_tf_addresses(self) -> bool:
        """Whether any task is given as a TF-style ``host:port`` (as opposed to a Dask worker
        name or address)."""
        return any(is_tf_address(self._jobs[j][i]) for j, i in self.tasks())

    def by_task_name(self) -> ClusterSpec:
        """The spec with each TF-style host:port replaced by the task's Dask worker name
        (``job-task``): what a session maps tasks by."""
        out = {}
        for j in self._jobs:
            named = {i: (f"{j}-{i}" if is_tf_address(self._jobs[j][i]) else self._jobs[j][i])
                     for i in self.task_indices(j)}
            out[j] = named if j in self._sparse else [named[i] for i in sorted(named)]
        return ClusterSpec(out)

    def filtered(self, device_filters) -> ClusterSpec:
        """Only the tasks that ``device_filters`` (TF's ``ConfigProto.device_filters``) let
        a session see; all of them when there is no filter."""
        if not device_filters:
            return self
        out: dict = {}
        for j, i in self.tasks():
            if device_matches(f"/job:{j}/replica:0/task:{i}", device_filters):
                out.setdefault(j, {})[i] = self._jobs[j][i] if self._jobs[j][i] is not None \
                    else f"{j}-{i}"
        if not out:
            raise InvalidArgumentError(f"device_filters {list(device_filters)} leave no task "
                                       f"of {self!r}")
        return ClusterSpec(out)

    def scheduler_task(self) -> tuple[str, int]:
        """The task whose process hosts the Dask scheduler: the first task of the first job."""
        job = self.jobs[0]
        return job, self.task_indices(job)[0]

    def scheduler_address(self) -> str:
        """Where the scheduler listens: ``TENSORVM_SCHEDULER`` if set, else the address of
        :meth:`scheduler_task` (which must then be a TF-style host:port)."""
        env = os.environ.get(SCHEDULER_ENV)
        if env:
            return env if "://" in env else f"tcp://{env}"
        job, task = self.scheduler_task()
        entry = self._jobs[job][task]
        if not is_tf_address(entry):
            raise InvalidArgumentError(
                f"ClusterSpec: task /job:{job}/task:{task} ({entry!r}) is not a host:port, so it "
                f"cannot host the Dask scheduler; give host:port lists or set {SCHEDULER_ENV}")
        return f"tcp://{entry}"

    def task_names(self) -> list[str]:
        """The Dask worker names of the tasks: ``"<job>-<index>"`` (``ps-0``, ``worker-1``, ...)."""
        return [f"{j}-{i}" for j, i in self.tasks()]

    def worker_for(self, job: str, task: int):
        """The entry given for task ``task`` of ``job`` (a worker name or address), or ``None``
        for a counted job."""
        if job in self._sparse:
            return self._jobs[job].get(task)
        return self._jobs[job][task]

    def as_dict(self) -> dict:
        """The spec as the dict it was made from: a count, a list or a dict of entries per job."""
        out = {}
        for j, ws in self._jobs.items():
            if j in self._sparse:
                out[j] = {i: ws[i] for i in self._sparse[j]}
            else:
                out[j] = list(ws) if any(w is not None for w in ws) else len(ws)
        return out

    def as_cluster_def(self) -> dict:
        """TF's ``as_cluster_def``, as plain data: ``{"job": [{"name", "tasks"}]}``."""
        return {"job": [{"name": j, "tasks": {i: self._jobs[j][i] for i in self.task_indices(j)}}
                        for j in self._jobs]}

    def __repr__(self):
        return f"ClusterSpec({self.as_dict()!r})"

    def __eq__(self, other):
        return isinstance(other, ClusterSpec) and self.as_dict() == other.as_dict()


def check_task_count(job: str, n: int) -> None:
    """Refuse ``n`` tasks for ``job`` beyond :data:`MAX_TASKS_PER_JOB`, naming the job and
    the bound (the CLI's ``--cluster`` refuses counts by the same constant)."""
    if n > MAX_TASKS_PER_JOB:
        raise InvalidArgumentError(
            f"ClusterSpec: job {job!r} has {_count(n)} tasks; a job may have at most "
            f"{MAX_TASKS_PER_JOB} (tensorvm.runtime.cluster.spec.MAX_TASKS_PER_JOB)")



def _count(n: int) -> str:
    # (str() of an int of over 4300 digits raises ValueError)
    return str(n) if n < 10 ** 30 else f"over 2**{n.bit_length() - 1}"


def _short(v) -> str:
    r = repr(v)
    return r if len(r) <= 200 else r[:200] + "..."


def device_matches(device: str, filters) -> bool:
    """Whether a (partial or full) device string is covered by one of TF's
    ``device_filters`` ("/job:ps", "/job:worker/task:1"): every field a filter sets must
    agree.

    >>> device_matches("/job:worker/replica:0/task:1/device:CPU:0", ["/job:ps", "/job:worker/task:1"])
    True
    >>> device_matches("/job:worker/replica:0/task:0/device:CPU:0", ["/job:worker/task:1"])
    False
    """
    from ...framework.device_spec import DeviceSpec
    d = DeviceSpec.parse(device)
    for f in filters:
        fs = DeviceSpec.parse(f)
        if all(getattr(fs, k) is None or getattr(d, k) is None or getattr(fs, k) == getattr(d, k)
               for k in ("job", "replica", "task", "device_type", "device_index")):
            return True
    return False


def check_device_filters(plan, filters) -> None:
    """Refuse a plan that places an op on a device the session's ``device_filters`` hide (TF:
    such a device does not exist for the session), naming the op."""
    if not filters:
        return
    for task in plan.tasks:
        if not device_matches(task.device, filters):
            ops = list(task.ops)[:3]
            raise InvalidArgumentError(
                f"op {ops[0] if ops else task.name!r} is placed on {task.device}, which this "
                f"session's ConfigProto.device_filters {list(filters)} exclude")


# ---- in-process servers: a session's target may name one ---------------------------------------
_SERVERS: dict = {}  # target -> server (tensorvm.train.Server), registered by the server
_SERVERS_LOCK = threading.Lock()


def register_server(target: str, server) -> None:
    with _SERVERS_LOCK:
        _SERVERS[target] = server


def unregister_server(target: str) -> None:
    with _SERVERS_LOCK:
        _SERVERS.pop(target, None)


def resolve_target(target, cluster=None, device_filters=None, timeout: float = 120.0):
    """``Session(target, cluster=…)`` as TF 1.x programs write it, in tensorvm's terms.

    Returns ``(target, cluster, default_device)``:

    * a ``tv.train.Server``'s ``target`` (``grpc://host:port``) in this process: its
      scheduler, its cluster (tasks by worker name), its own task as the default device; the
      call waits (up to ``timeout`` s) for the workers of the tasks ``device_filters`` let the
      session see, as TF's CreateSession waits for its tasks;
    * another ``grpc://host:port``: the scheduler at ``TENSORVM_SCHEDULER``, else at that
      address (the chief's, which hosts it);
    * a ClusterSpec of TF host:port lists: tasks mapped by worker name (``ps-0``), so a
      cluster the session starts itself, or workers started by ``tv.train.Server``, serve
      them.
    """
    default_device = None
    spec = ClusterSpec(cluster) if cluster is not None else None
    if isinstance(target, str) and target in _SERVERS:
        server = _SERVERS[target]
        spec = spec or server.cluster_spec
        target = server.scheduler_address
        default_device = f"/job:{server.job_name}/replica:0/task:{server.task_index}"
    elif isinstance(target, str) and target.startswith("grpc://"):
        env = os.environ.get(SCHEDULER_ENV)
        target = (env if "://" in env else f"tcp://{env}") if env \
            else "tcp://" + target[len("grpc://"):]
    if spec is not None and spec.has_tf_addresses():
        if device_filters:
            spec = spec.filtered(device_filters)
        spec = spec.by_task_name()
        if isinstance(target, str) and "://" in target:  # an existing scheduler
            wait_for_workers(target, [f"{j}-{i}" for j, i in spec.tasks()], timeout)
    return target, spec, default_device


def wait_for_workers(address: str, names: list[str], timeout: float) -> None:
    """Wait until the scheduler at ``address`` has a worker of each name (TF's "CreateSession
    still waiting for response from worker"), or raise UnavailableError naming the missing."""
    import gc
    import time

    from distributed import Client
    deadline = time.monotonic() + timeout
    try:
        client = Client(address, set_as_default=False, timeout=f"{max(timeout, 1):.0f}s")
    except (OSError, TimeoutError) as exc:
        err = UnavailableError(f"could not reach the Dask scheduler at {address} within "
                               f"{max(timeout, 1):.0f} s ({type(exc).__name__}: {exc})")
    else:
        err = None
    if err is not None:  # the half-made Client collected now (distributed_backend.connect)
        gc.collect()
        raise err
    with client as c:
        delay = 0.05
        while True:
            have = {str(w.get("name")) for w in scheduler_identity(c)["workers"].values()}
            missing = [n for n in names if n not in have]
            if not missing:
                return
            if time.monotonic() > deadline:
                raise UnavailableError(
                    f"the scheduler at {address} has no worker for task(s) {missing} after "
                    f"{timeout:.0f} s (start their tv.train.Server, or narrow "
                    "ConfigProto.device_filters)")
            time.sleep(delay)  # other processes are starting: nothing to wait on here
            delay = min(delay * 2, 0.5)


@functools.cache
def _takes_n_workers() -> bool:
    import inspect

    from distributed import Client
    return "n_workers" in inspect.signature(Client.scheduler_info).parameters


def scheduler_identity(client) -> dict:
    """The scheduler's info with every worker listed (``["workers"]``), asked of the
    scheduler itself, from a synchronous client.

    ``Client.scheduler_info(n_workers=-1)`` returns the client's shared copy, which the
    client's own periodic refresh (it lists no workers) may overwrite between the answer and
    the return: now and then a cluster with no workers (issue 24 item 4: 112 of 2373 calls at a
    5 ms refresh). A distributed too old to take ``n_workers`` lists every worker anyway."""
    if _takes_n_workers():
        return client.sync(client.scheduler.identity, n_workers=-1)
    return client.scheduler_info()
