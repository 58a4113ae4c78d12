"""Word count on a cluster started by hand, undisturbed and disturbed as an operator's cluster
is: a worker killed, a worker joining, a worker slowed (issue 23).

    python bench/bench_batch_cluster.py [--mb 200] [--files 16] [--memory-limit 2GiB]
                                        [--skip-dask] [--undisturbed-only] [--split-mb MB]

The cluster: ``dask scheduler`` and two ``dask worker --name worker-N --nthreads 1
--memory-limit M`` processes (:mod:`hand_cluster` of the tests), joined by address with no
ClusterSpec. The data: ``bench_wordcount``'s (``--mb`` MB of Zipf words in ``--files`` files;
the issue's figures are for ``--mb 1024``). The job: ``jobs.wordcount``'s with its defaults,
the counts back to the driver. Scenarios, each timed from the job's start to its result:

* ``undisturbed``: both workers throughout (after one warm-up run);
* ``killed``: worker-1 killed (``kill -9`` of its Nanny and worker) at half the undisturbed
  time, restarted by name 1 s later;
* ``one worker`` and ``joining``: worker-1 absent throughout, or started 3 s into the job;
* ``slowed``: worker-1 stopped 0.2 s of every 0.3 s (SIGSTOP/SIGCONT) — a third of a CPU;
* ``dask.bag`` undisturbed and slowed, on the same cluster
  (``read_text().str.split().flatten().frequencies()``).

``--undisturbed-only`` runs the undisturbed rows alone (the issue's small-files figure:
``--mb 100 --files 2000``).

Each line gives the seconds, the ratio to its undisturbed run, a checksum of the counts (all
equal to pyarrow's on this machine, or the run is refused), the map tasks, the attempts, how
many times the job was run again whole (the ``running it again`` warnings), how many of its
tasks ran again because a worker left (``Result.rerun``) and how many floating tasks the
scheduler moved off a straggler (:mod:`tensorvm.runtime.cluster.stragglers`).

Then the bounds of the disturbed rows on this machine (:func:`best_time`): what a job that
loses no work and has no tail would take, given the undisturbed and one-worker times and how
long worker-1 took to start (until the scheduler listed it) in the killed and joining runs.
A target below its bound cannot be met by scheduling; it needs a longer job or a faster start.
"""
from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import tempfile
import threading
import time
import zlib
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent / "tests")]
from bench_wordcount import dask_bag, make_data, pyarrow_2threads  # noqa: E402
from hand_cluster import HandCluster  # noqa: E402

WORKERS = ("worker-0", "worker-1")


def checksum(counts: dict) -> str:
    """CRC-32 of the sorted ``word<TAB>count`` lines."""
    text = "".join(f"{k}\t{v}\n" for k, v in sorted(counts.items()))
    return f"{zlib.crc32(text.encode()):08x}"


class _Reruns(logging.Handler):
    """Counts the job driver's ``running it again`` warnings (a whole job run again)."""

    def __init__(self):
        super().__init__(logging.WARNING)
        self.count = 0

    def emit(self, record):
        if "running it again" in record.getMessage():
            self.count += 1
            print(f"  ({record.getMessage()})", flush=True)


SPLIT_SIZE = None  # --split-mb: the job's split size (None: the job's default)


def run_tensorvm(address: str, urls: list, reruns: _Reruns) -> tuple[dict, dict]:
    """One word count on a new session of the cluster: ``(counts, facts)``."""
    import tensorvm as tv
    from tensorvm.jobs.wordcount import wordcount_job
    before = reruns.count
    kw = {} if SPLIT_SIZE is None else {"split_size": SPLIT_SIZE}
    with tv.Session(address, graph=tv.Graph(), verbose=False) as s:
        res = wordcount_job(urls, **kw).run(s)
    return res.to_dict(), {"maps": res.num_map_tasks, "reducers": res.num_reducers,
                           "attempts": res.attempts, "reruns": reruns.count - before,
                           "tasks_rerun": len(res.rerun)}


def disturbed(job, disturb) -> tuple[float, object]:
    """Run ``job()`` while ``disturb(t0, done)`` runs in a thread; ``(seconds, job's value)``.
    ``done`` is set when the job returns; the disturbance is joined before this returns."""
    done = threading.Event()
    t0 = time.perf_counter()
    th = threading.Thread(target=disturb, args=(t0, done), daemon=True)
    th.start()
    try:
        out = job()
        return time.perf_counter() - t0, out
    finally:
        done.set()
        th.join()


def quiet(t0, done) -> None:
    """No disturbance."""


def _start_timed(hc: HandCluster, starts: list) -> None:
    """Start worker-1 and append how long until the scheduler lists it (its start time:
    a new Dask worker process, tensorvm imported by its plugin)."""
    t = time.perf_counter()
    hc.start_worker("worker-1")
    hc.wait_for(["worker-1"])
    starts.append(time.perf_counter() - t)


def kill_at(hc: HandCluster, at_s: float, starts: list):
    """``kill -9`` worker-1 ``at_s`` seconds in, restart it by name 1 s later."""
    def disturb(t0, done):
        if done.wait(max(0.0, at_s - (time.perf_counter() - t0))):
            return
        hc.kill("worker-1")
        time.sleep(1.0)
        _start_timed(hc, starts)
    return disturb


def join_at(hc: HandCluster, at_s: float, starts: list):
    """Start worker-1 ``at_s`` seconds in (if the job still runs; else say so)."""
    def disturb(t0, done):
        if done.wait(max(0.0, at_s - (time.perf_counter() - t0))):
            print(f"  (the job ended before {at_s:g} s: no worker joined it)", flush=True)
        else:
            _start_timed(hc, starts)
    return disturb


def best_time(two: float, one: float, alone_until: float, done_by: float = 0.0) -> float:
    """The least time a job can take that runs at the two-worker pace (``two`` seconds for
    the whole job) until ``done_by`` s, on one worker (``one`` s for the whole job) from then
    until ``alone_until`` s, and on two again after: no work lost, no tail. The bound of the
    killed row (``done_by`` = the kill, ``alone_until`` = restart + the worker's start time)
    and of the joining row (``done_by`` = 0, ``alone_until`` = 3 s + the start time).

    >>> round(best_time(4.0, 7.0, alone_until=3.8, done_by=2.0), 3)  # 1.8 s alone, then two
    4.771
    >>> best_time(4.0, 7.0, alone_until=9.0)  # one worker until the end
    7.0
    """
    left = 1.0 - done_by / two - (alone_until - done_by) / one
    if left <= 0:
        return done_by + (1.0 - done_by / two) * one
    return alone_until + left * two


def slowed(hc: HandCluster, stopped_s: float = 0.2, period_s: float = 0.3):
    """Stop worker-1 ``stopped_s`` of every ``period_s`` until the job is done."""
    def disturb(t0, done):
        while not done.is_set():
            hc.signal("worker-1", signal.SIGSTOP)
            time.sleep(stopped_s)
            hc.signal("worker-1", signal.SIGCONT)
            done.wait(period_s - stopped_s)
    return disturb


def _moves(hc: HandCluster) -> int:
    """Floating tasks the scheduler has moved off a straggler so far (tensorvm's plugin,
    :mod:`tensorvm.runtime.cluster.stragglers`)."""
    from tensorvm.runtime.cluster.stragglers import TOPIC_MOVES
    return len(hc.client.get_events(TOPIC_MOVES))


def ensure_both(hc: HandCluster) -> None:
    """Both workers running (a killed or absent worker-1 started again)."""
    p = hc.procs.get("worker-1")
    if p is None or p.poll() is not None:
        hc.start_worker("worker-1")
    hc.wait_for(WORKERS)


def scenarios(hc: HandCluster, urls: list, paths: list, ref: dict, skip_dask: bool,
              disturbed_too: bool = True) -> list:
    """``[(name, seconds, ratio, checksum, facts)]`` of every scenario, in order."""
    reruns = _Reruns()
    logging.getLogger("tensorvm").addHandler(reruns)
    rows: list = []
    kill_starts: list = []
    join_starts: list = []

    def one(name, disturb, base=None, run=None):
        """Time one scenario (``base``: the seconds its ratio is to; None: it is a base);
        a job that fails is a row too (its error, no time)."""
        ours = run is None
        run = run or (lambda: run_tensorvm(hc.address, urls, reruns))
        present = set(hc.workers())
        moved = _moves(hc)
        try:
            secs, (counts, facts) = disturbed(run, disturb)
            if ours:
                facts["moves"] = _moves(hc) - moved
        except Exception as e:  # (the figure is that it failed)
            rows.append((name, None, None, "-", {"failed": str(e).splitlines()[0]}))
            print(f"  {name}: failed: {rows[-1][-1]['failed']}", flush=True)
            hc.wait_for(present)  # a worker the memory monitor stopped comes back
            return None
        if counts != ref:
            raise AssertionError(f"{name}: the counts differ from pyarrow's")
        ratio = 1.0 if base is None else secs / base if base else None
        rows.append((name, secs, ratio, checksum(counts), facts))
        print(f"  {name}: {secs:.2f}s {facts}", flush=True)
        return secs

    try:
        run_tensorvm(hc.address, urls, reruns)  # warm-up: imports on the workers
        base = one("undisturbed", quiet)
        if base is None:
            return rows
        if disturbed_too:
            one("killed at half time", kill_at(hc, base / 2, kill_starts), base)
            ensure_both(hc)
            hc.stop_worker("worker-1")
            alone = one("one worker", quiet, base)
            one("joining at 3 s", join_at(hc, 3.0, join_starts), alone or 0.0)
            ensure_both(hc)
            one("slowed (0.2 of 0.3 s)", slowed(hc), base)
            if alone and kill_starts and join_starts:
                kill = best_time(base, alone, base / 2 + 1.0 + kill_starts[0], base / 2)
                join = best_time(base, alone, 3.0 + join_starts[0])
                print(f"  bounds (no work lost, no tail; worker-1 useful once the scheduler "
                      f"lists it: {kill_starts[0]:.2f} s after its restart, "
                      f"{join_starts[0]:.2f} s after its start): killed >= {kill:.2f} s "
                      f"({kill / base:.2f}x), joining >= {join:.2f} s ({join / alone:.2f}x "
                      f"one worker), slowed >= 1.50x in the map phase (a third of a CPU)",
                      flush=True)
        if not skip_dask:
            from distributed import Client
            with Client(hc.address, set_as_default=False) as client:
                def bag():
                    return dask_bag(client, paths), {}
                bag_base = one("dask.bag undisturbed", quiet, None, bag)
                if disturbed_too:
                    one("dask.bag slowed", slowed(hc), bag_base or 0.0, bag)
    finally:
        logging.getLogger("tensorvm").removeHandler(reruns)
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mb", type=float, default=200)
    ap.add_argument("--files", type=int, default=16)
    ap.add_argument("--memory-limit", default="2GiB")
    ap.add_argument("--dir", default=tempfile.gettempdir())
    ap.add_argument("--skip-dask", action="store_true")
    ap.add_argument("--undisturbed-only", action="store_true",
                    help="only the undisturbed runs (e.g. --mb 100 --files 2000: small files)")
    ap.add_argument("--split-mb", type=float, default=None,
                    help="the job's split size in MB (default: the job's own)")
    args = ap.parse_args(argv)
    global SPLIT_SIZE
    SPLIT_SIZE = None if args.split_mb is None else int(args.split_mb * (1 << 20))

    paths = make_data(args.dir, args.mb, args.files)
    urls = [f"file://{p}" for p in paths]
    print(f"data: {sum(os.path.getsize(p) for p in paths) / 1e6:.0f} MB in {len(paths)} files; "
          f"cluster: dask scheduler + {len(WORKERS)} dask workers x 1 thread, "
          f"--memory-limit {args.memory_limit}")
    ref = pyarrow_2threads(paths)
    with tempfile.TemporaryDirectory(prefix="tvm-bench-batch-") as folder, \
            HandCluster(Path(folder), args.memory_limit) as hc:
        for name in WORKERS:
            hc.start_worker(name)
        hc.wait_for(WORKERS)
        rows = scenarios(hc, urls, paths, ref, args.skip_dask, not args.undisturbed_only)

    print(f"\n{'scenario':24s} {'s':>7s} {'ratio':>6s}  {'checksum':8s}  facts")
    for name, secs, ratio, crc, facts in rows:
        shown = " ".join(f"{k}={v}" for k, v in facts.items())
        print(f"{name:24s} {'-' if secs is None else f'{secs:.2f}':>7s} "
              f"{'-' if ratio is None else f'{ratio:.2f}':>6s}  {crc:8s}  {shown}")
    print("ratio: to the undisturbed run (joining: to one worker throughout; dask.bag slowed: "
          f"to dask.bag undisturbed); pyarrow's checksum {checksum(ref)}")


if __name__ == "__main__":
    main()
