"""TeraSort beyond the workers' memory on a cluster started by hand, with the bundled job's
defaults (issue 23).

    python bench/bench_batch_terasort.py [--gb 3] [--memory-limit 1GiB] [--reducers 24]

The cluster: ``dask scheduler`` and two ``dask worker --name worker-N --nthreads 1
--memory-limit M`` processes (:mod:`hand_cluster` of the tests). The data: ``--gb`` GB of
teragen records (100 bytes: a 10-byte random key, a 90-byte payload) in 24 files, cached under
``--dir``. Two runs, in turn, of ``jobs.sort.terasort_job``:

* ``defaults``: ``num_reducers=None`` (sized to the input and the workers' ``memory_limit``),
  ``shuffle="auto"`` (through storage when the input exceeds half the workers' memory);
* ``hand-picked``: ``--reducers`` reducers (the issue's 24), every other setting the same.

Each line gives the seconds, the reducers and map tasks, whether ``teravalidate`` passed (every
part sorted, the parts in order, the input's checksum), whether any worker was restarted (the
memory monitor kills a worker over its limit: its process id changes), and what the job left
under the output's ``_temporary`` (its scratch: must be nothing).
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent / "tests")]
from hand_cluster import HandCluster  # noqa: E402

WORKERS = ("worker-0", "worker-1")
FILES = 24


def make_data(root: str, gb: float) -> str:
    """The teragen folder of ``gb`` GB (made once, then reused)."""
    from tensorvm.jobs.sort import teragen
    records = int(gb * 1e9) // 100
    folder = os.path.join(root, f"tvm-bench-terasort-{records}-{FILES}f-v1")
    if not os.path.exists(os.path.join(folder, "_done")):
        teragen(f"file://{folder}/in", records, files=FILES, seed=3, overwrite=True)
        open(os.path.join(folder, "_done"), "w").close()
    return folder


def worker_pids(client) -> dict:
    """``{worker name: pid}`` as the scheduler knows them now."""
    return {w["name"]: w.get("pid") for w in client.scheduler_info()["workers"].values()}


def leftovers(out: str) -> list:
    """What the job left in its scratch (the output's ``_temporary``)."""
    tmp = os.path.join(out, "_temporary")
    return [os.path.relpath(os.path.join(d, f), tmp)
            for d, _, fs in os.walk(tmp) for f in fs] if os.path.exists(tmp) else []


def one(hc: HandCluster, folder: str, out: str, reducers: int | None) -> dict:
    """One TeraSort of ``folder`` into ``out``: the row's facts."""
    import tensorvm as tv
    from tensorvm.jobs.sort import terasort_job, teravalidate
    shutil.rmtree(out, ignore_errors=True)
    before = worker_pids(hc.client)
    t0 = time.perf_counter()
    try:
        with tv.Session(hc.address, graph=tv.Graph(), verbose=False) as s:
            res = terasort_job(f"file://{folder}/in", f"file://{out}",
                               num_reducers=reducers, overwrite=True).run(s)
    except Exception as e:  # (the figure is that it failed)
        hc.wait_for(WORKERS)
        return {"s": None, "failed": str(e).splitlines()[0][:120],
                "restarted": sorted(n for n, p in worker_pids(hc.client).items()
                                    if before.get(n) != p), "left": len(leftovers(out))}
    secs = time.perf_counter() - t0
    after = worker_pids(hc.client)
    check = teravalidate(f"file://{out}", f"file://{folder}/in")
    return {"s": secs, "reducers": res.num_reducers, "maps": res.num_map_tasks,
            "valid": bool(check["ok"]),
            "restarted": sorted(n for n in before if after.get(n) != before[n]),
            "left": len(leftovers(out))}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--gb", type=float, default=3.0)
    ap.add_argument("--memory-limit", default="1GiB")
    ap.add_argument("--reducers", type=int, default=24)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--dir", default=tempfile.gettempdir())
    args = ap.parse_args(argv)

    folder = make_data(args.dir, args.gb)
    size = sum(os.path.getsize(os.path.join(folder, "in", f))
               for f in os.listdir(os.path.join(folder, "in")))
    print(f"data: {size / 1e9:.2f} GB of 100-byte records in {FILES} files; cluster: dask "
          f"scheduler + {len(WORKERS)} dask workers x 1 thread, --memory-limit "
          f"{args.memory_limit}", flush=True)
    rows = []
    with tempfile.TemporaryDirectory(prefix="tvm-bench-terasort-", dir=args.dir) as work, \
            HandCluster(Path(work), args.memory_limit) as hc:
        for name in WORKERS:
            hc.start_worker(name)
        hc.wait_for(WORKERS)
        out = os.path.join(work, "out")
        tiny = os.path.join(work, "tiny")  # warm-up: imports on the workers
        from tensorvm.jobs.sort import teragen
        teragen(f"file://{tiny}/in", 20_000, files=2)
        one(hc, tiny, out, None)
        for _ in range(args.repeat):
            for name, reducers in (("defaults", None), (f"{args.reducers} reducers",
                                                        args.reducers)):
                row = one(hc, folder, out, reducers)
                print(f"  {name}: {row}", flush=True)
                rows.append((name, row))
    print(f"\n{'run':14s} {'s':>7s}  facts")
    for name, row in rows:
        secs = row.pop("s")
        print(f"{name:14s} {'-' if secs is None else f'{secs:.1f}':>7s}  "
              + " ".join(f"{k}={v}" for k, v in row.items()))


if __name__ == "__main__":
    main()
