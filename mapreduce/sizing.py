"""How many reducers a job gets, and where its beyond-memory shuffle goes.

The rule (``num_reducers=None``, the default): each reducer's expected input — the job's input
bytes over the reducer count — is at most :data:`REDUCER_MEMORY_FRACTION` (a quarter) of the
memory a worker thread can use: the smallest worker's ``memory_limit`` up to Dask's pause
threshold (``distributed.worker.memory.pause``, 80 %), less :data:`WORKER_RESERVED` (160 MiB,
the worker process's own memory with tensorvm imported), over its threads; and there is at
least one reducer per worker thread. Why: a reducer holds its buckets, their merged and sorted
copy and its encoded output at once — measured on TeraSort, about 3.3 times its input at the
peak — so a quarter of the usable memory keeps a worker under the pause threshold (with 320 MiB
workers and 960 MiB of records, 12 reducers of 80 MiB got both workers restarted by the memory
monitor; 24 of 40 MiB passed at 89 % paused; this rule gives 40 of 24 MiB). One reducer per
thread at least, because fewer would leave threads idle in the reduce phase (Spark's
``defaultParallelism`` is the executors' cores). The input size stands in for the shuffle
size: a map with a combiner (word count) shrinks it, so the rule errs on the side of more,
smaller reducers — Spark (``advisoryPartitionSizeInBytes``, 64 MB) and Dask (partitions of
~100 MB, several per core) size partitions the same way.

On a cluster, where map and reduce tasks float (any worker runs them, a free thread takes the
next from the scheduler's queue), a job gets at least :data:`REDUCERS_PER_THREAD` reducers per
worker thread while each still has :data:`MIN_REDUCER_BYTES` of input
(:func:`spread_reducers`): with one reducer per thread, the reducer that lands on a slow worker
sets the job's pace (one of two workers slowed to a third: 3.6x the job's time); with several
per thread, the fast workers take the queue's rest, as Spark's and Dask's small tasks do.

The fraction is the Dask config value ``tensorvm.mapreduce.reducer-memory-fraction`` (tests
make it tiny to size reducers for a few MB of input).

>>> choose_reducers(3 << 30, [(1 << 30, 1), (1 << 30, 1)], fraction=0.25)
19
>>> choose_reducers(1 << 20, [(1 << 30, 2), (1 << 30, 2)], fraction=0.25)
4
"""
from __future__ import annotations

import math
import socket
from urllib.parse import urlparse

REDUCER_MEMORY_FRACTION = 0.25
WORKER_RESERVED = 160 << 20  # a worker process's own memory, tensorvm imported (~155 MB seen)
OPEN_COST = 4 << 20  # small files are grouped into map tasks of at least this many bytes
MIN_MAP_TASKS = 8  # small files are spread over at least this many map tasks
REDUCERS_PER_THREAD = 4  # floating reducers per worker thread, data allowing (spread_reducers)
MIN_REDUCER_BYTES = 4 << 20  # ... each with at least this much input
CONFIG_KEY = "tensorvm.mapreduce.reducer-memory-fraction"

__all__ = ["map_task_bytes", "split_groups", "choose_reducers", "spread_reducers",
           "reducer_budget", "memory_fraction", "input_bytes", "worker_memory", "all_local",
           "fit_warning"]


def memory_fraction() -> float:
    """The share of a worker thread's memory one reducer's input may take (Dask config
    ``tensorvm.mapreduce.reducer-memory-fraction``, default 0.25)."""
    import dask
    value = float(dask.config.get(CONFIG_KEY, REDUCER_MEMORY_FRACTION))
    if not 0 < value <= 1:
        raise ValueError(f"{CONFIG_KEY} must be in (0, 1], got {value}")
    return value


def input_bytes(splits: list) -> int:
    """The bytes of a job's splits ``[(input, split), ...]`` (byte ranges; a split without one
    — row groups — counts as its file's size where known, else 0)."""
    return int(sum((s.end - s.start) if s.end is not None else 0 for _, s in splits))


def map_task_bytes(total: int, split_size: int, threads: int) -> int:
    """How many bytes of small files one map task takes (Spark's ``maxSplitBytes``): the
    input over at least :data:`MIN_MAP_TASKS` tasks and twice the workers' threads (spare
    tasks to steal and for workers that join), at least :data:`OPEN_COST` (a file's open and
    task overhead), at most the split size.

    >>> map_task_bytes(50 << 20, 64 << 20, 2) // (1 << 20)
    6
    >>> map_task_bytes(1 << 20, 4096, 2)
    4096
    """
    return max(1, min(split_size, max(OPEN_COST, total // max(MIN_MAP_TASKS, 2 * threads))))


def split_groups(splits: list, target: int) -> list:
    """The map tasks of a job over ``splits`` (``[(input, split), ...]``): one per split,
    except that consecutive small splits of one input (small files) share a task up to
    ``target`` bytes, as Hadoop's ``CombineFileInputFormat``. A split of unknown size (row
    groups, a compressed file) is a task of its own.

    >>> from tensorvm.storage.splits import Split
    >>> s = [(0, Split("a", "text", 0, 10)), (0, Split("b", "text", 0, 10)),
    ...      (0, Split("c", "text", 0, 30)), (1, Split("d", "text", 0, 5))]
    >>> [[x.url for _, x in g] for g in split_groups(s, 25)]
    [['a', 'b'], ['c'], ['d']]
    """
    groups: list = []
    size = 0
    for i, s in splits:
        n = (s.end - s.start) if s.end is not None else None
        last = groups[-1] if groups else None
        if last is not None and n is not None and size >= 0 and last[0][0] == i \
                and size + n <= target:
            last.append((i, s))
            size += n
        else:
            groups.append([(i, s)])
            size = n if n is not None else -1  # -1: nothing joins a split of unknown size
    return groups or [[]]


def usable_per_thread(limit: float, threads: int) -> float:
    """The memory one thread of a worker with ``memory_limit`` ``limit`` can use: up to the
    pause threshold, less the process's own :data:`WORKER_RESERVED` (at least an eighth of
    the limit, for a worker too small for that)."""
    import dask
    pause = dask.config.get("distributed.worker.memory.pause", 0.8) or 0.95
    return max(float(pause) * limit - WORKER_RESERVED, limit / 8) / max(1, threads)


def reducer_budget(workers: list, fraction: float) -> int:
    """The input bytes one reducer may take: ``fraction`` of the smallest
    :func:`usable_per_thread` of ``workers`` (``[(memory_limit, nthreads), ...]``)."""
    return max(1, int(fraction * min(usable_per_thread(limit, threads)
                                     for limit, threads in workers)))


def choose_reducers(size: int, workers: list, fraction: float = REDUCER_MEMORY_FRACTION) -> int:
    """The reducer count for ``size`` input bytes on ``workers`` (``[(memory_limit, nthreads),
    ...]``): enough that each reducer's share is within :func:`reducer_budget`, and at least one
    per worker thread."""
    threads = sum(max(1, t) for _, t in workers)
    return max(1, threads, math.ceil(size / reducer_budget(workers, fraction)))


def spread_reducers(count: int, size: int, threads: int) -> int:
    """The reducer count of a job whose reducers float: ``count`` (:func:`choose_reducers`),
    raised to :data:`REDUCERS_PER_THREAD` per thread as far as each keeps
    :data:`MIN_REDUCER_BYTES` of the ``size`` input bytes (small jobs keep ``count``).

    >>> spread_reducers(2, 200 << 20, 2), spread_reducers(2, 10 << 20, 2)
    (8, 2)
    >>> spread_reducers(40, 3 << 30, 2), spread_reducers(2, 100 << 10, 2)
    (40, 2)
    """
    return max(count, min(REDUCERS_PER_THREAD * threads, size // MIN_REDUCER_BYTES))


def fit_warning(name: str, num_reducers: int, size: int, workers: list,
                fraction: float) -> str | None:
    """The warning for an explicit reducer count whose reducers' share of ``size`` exceeds
    the budget (None when it fits)."""
    budget = reducer_budget(workers, fraction)
    share = size / num_reducers
    if share <= budget:
        return None
    limit, threads = min(workers, key=lambda w: usable_per_thread(*w))
    return (f"mr job {name}: {num_reducers} reducer(s) for {_mb(size)} of input is "
            f"{_mb(share)} per reducer, more than {_mb(budget)} ({fraction:g} of the "
            f"{_mb(usable_per_thread(limit, threads))} a thread can use of the smallest "
            f"worker's memory_limit {_mb(limit)}, {threads} thread(s)): its reducers may "
            f"exhaust the workers' memory; leave num_reducers unset (None) to size them, or "
            f"give at least {choose_reducers(size, workers, fraction)}")


def _mb(n: float) -> str:
    return f"{n / (1 << 20):.1f} MiB"


def worker_memory(client, num_workers: int) -> list:
    """``[(memory_limit, nthreads), ...]`` of the cluster's workers, asked of the scheduler
    (:func:`tensorvm.runtime.cluster.spec.scheduler_identity`); a worker with no limit counts as this
    machine's memory. In process (``client`` None): ``num_workers`` devices sharing this
    machine's memory."""
    import psutil
    total = psutil.virtual_memory().total
    if client is None:
        return [(total // max(1, num_workers), 1)] * max(1, num_workers)
    from tensorvm.runtime.cluster.spec import scheduler_identity
    workers = scheduler_identity(client).get("workers", {}).values()
    out = [(int(w.get("memory_limit") or 0) or total, int(w.get("nthreads") or 1))
           for w in workers]
    return out or [(total // max(1, num_workers), 1)] * max(1, num_workers)


def _local_hosts() -> set:
    hosts = {"127.0.0.1", "localhost", "::1", socket.gethostname()}
    try:
        import psutil
        for addrs in psutil.net_if_addrs().values():
            hosts.update(a.address.split("%")[0] for a in addrs)
    except Exception:  # noqa: BLE001 - the loopback names still answer
        pass
    return hosts


def all_local(client) -> bool:
    """Whether every worker of ``client``'s cluster runs on this machine (so a folder under
    this machine's temporary directory is storage they all share). In process: yes."""
    if client is None:
        return True
    from tensorvm.runtime.cluster.spec import scheduler_identity
    addrs = list(scheduler_identity(client).get("workers", {}))
    hosts = {urlparse(a).hostname for a in addrs}
    if not hosts:
        return False
    if any(a.startswith("inproc://") for a in addrs):
        return True
    return hosts <= _local_hosts()
