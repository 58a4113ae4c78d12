"""TeraSort: tensorvm's total-order sort beside NumPy and Dask (issue 10).

    python bench/bench_sort.py [--records 2000000] [--files 8] [--repeat 3] [--skip-dask]

Data (generated here with ``jobs.sort.teragen``, deterministic, cached under ``--dir``):
``--records`` records of 100 bytes (10-byte random key compared as unsigned bytes, 90-byte
payload) in ``--files`` files. Timed: read + (sample) + partition + sort + write part files whose
concatenation is globally sorted (clusters started beforehand and warmed up with one run).
The distributed contenders get **2 worker processes x 1 thread** each (issue 23, "equal
resources"; checked before timing), against the single-process limit:

* ``numpy``: one process, one thread, reads every file, ``np.lexsort`` over the 10 key byte
  columns, one take, one file written.
* ``tensorvm``: ``jobs.sort.terasort_job`` (sampled range partition, 2 map tasks, 2 reducers)
  on a ``{"worker": 2}`` LocalCluster of 2 processes x 1 thread
  (``tensorvm.worker-threads=1``; Arrow's pool in each worker set to 1); ``teravalidate``
  checks the output once.
* ``dask.delayed``: a hand-written range-partition sort: sample, partition each file, sort
  each range, write — a LocalCluster of 2 processes x 1 thread (Arrow's pool set to 1).
* ``dask.dataframe``: ``sort_values`` on the key as two big-endian integer columns, same
  cluster.

The methods run in turn, ``--repeat`` rounds; medians and ratios against ``numpy``; the best run; CPU seconds of the
driver and the workers (steadier than wall time on a shared machine).
"""
from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import statistics
import tempfile
import time

import numpy as np

RECORD, KEY = 100, 10


def make_data(root: str, records: int, files: int) -> str:
    from tensorvm.jobs.sort import teragen
    folder = os.path.join(root, f"tvm-bench-sort-{records}-{files}f-v1")
    if not os.path.exists(os.path.join(folder, "_done")):
        teragen(f"file://{folder}/in", records, files=files, seed=1)
        open(os.path.join(folder, "_done"), "w").close()
    return folder


def _read(path: str) -> np.ndarray:
    with open(path, "rb") as f:
        return np.frombuffer(f.read(), np.uint8).reshape(-1, RECORD)


def _keys(recs: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(recs[:, :KEY]).view(f"S{KEY}").ravel()


def numpy_sort(inputs: list, out: str) -> None:
    recs = np.concatenate([_read(p) for p in inputs])
    order = np.lexsort(recs[:, :KEY].T[::-1])  # the single-process reference
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "part-00000"), "wb") as f:
        f.write(recs[order].tobytes())


def tensorvm_sort(session, folder: str, out: str) -> None:
    from tensorvm.jobs.sort import terasort_job
    terasort_job(f"file://{folder}/in", f"file://{out}", num_reducers=2, map_tasks=2,
                 overwrite=True).run(session)


def _partition_file(path, bounds, r):
    recs = _read(path)
    b = np.searchsorted(bounds, _keys(recs), side="right")
    return [recs[b == i] for i in range(r)]


def _sort_range(parts, out, i):
    recs = np.concatenate(parts)
    with open(os.path.join(out, f"part-{i:05d}"), "wb") as f:
        f.write(recs[np.argsort(_keys(recs), kind="stable")].tobytes())
    return len(recs)


def dask_delayed_sort(client, inputs: list, out: str, r: int = 2) -> None:
    import dask
    sample = np.sort(np.concatenate([_keys(_read(p)[:2000]) for p in inputs]))
    bounds = sample[[len(sample) * i // r for i in range(1, r)]]
    os.makedirs(out, exist_ok=True)
    parts = [dask.delayed(_partition_file, nout=r)(p, bounds, r) for p in inputs]
    tasks = [dask.delayed(_sort_range)([pp[i] for pp in parts], out, i) for i in range(r)]
    dask.compute(*tasks)


def dask_dataframe_sort(client, inputs: list, out: str) -> None:
    import dask
    import dask.dataframe as dd
    import pandas as pd

    def load(p):
        recs = _read(p)
        k = np.ascontiguousarray(recs[:, :KEY])
        return pd.DataFrame({"k1": k[:, :8].copy().view(">u8").ravel().astype(np.uint64),
                             "k2": k[:, 8:].copy().view(">u2").ravel().astype(np.uint16),
                             "row": np.arange(len(recs))})
    df = dd.from_delayed([dask.delayed(load)(p) for p in inputs])
    df.sort_values(["k1", "k2"]).to_parquet(out, write_index=False)


def worker_threads(client) -> list:
    """Threads per worker process of ``client``'s cluster, sorted; Arrow's pool in each worker
    is set to one thread on the way (a Dask thread is one thread of work)."""
    import pyarrow as pa
    client.run(pa.set_cpu_count, 1)
    return sorted(client.nthreads().values())


def interleaved(methods: dict, repeat: int) -> dict:
    """``{name: (median s, runs, median cpu s)}``, the methods run in turn each round (so a
    burst of other load on a shared machine hits them all alike). CPU seconds: this process
    and the method's workers."""
    def cpu(client):
        return time.process_time() + (sum(client.run(time.process_time).values())
                                      if client is not None else 0.0)
    runs: dict = {name: ([], []) for name in methods}
    for _ in range(repeat):
        for name, (fn, client) in methods.items():
            c, t = cpu(client), time.perf_counter()
            fn()
            runs[name][0].append(time.perf_counter() - t)
            runs[name][1].append(cpu(client) - c)
    return {name: (statistics.median(w), w, statistics.median(c))
            for name, (w, c) in runs.items()}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--records", type=int, default=2_000_000)
    ap.add_argument("--files", type=int, default=8)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--dir", default=tempfile.gettempdir())
    ap.add_argument("--skip-dask", action="store_true")
    args = ap.parse_args(argv)

    import dask

    import tensorvm as tv
    from tensorvm.jobs.sort import teravalidate
    folder = make_data(args.dir, args.records, args.files)
    inputs = sorted(os.path.join(folder, "in", f) for f in os.listdir(os.path.join(folder, "in"))
                    if not f.startswith(("_", ".")))
    outs = tempfile.mkdtemp(dir=args.dir, prefix="tvm-bench-sort-out-")
    with dask.config.set({"tensorvm.worker-threads": 1}):
        sess = tv.Session(cluster={"worker": 2}, graph=tv.Graph(), verbose=False)
    stack = contextlib.ExitStack()
    try:
        threads = {"numpy": "1 process x 1 thread", "tensorvm": worker_threads(sess.client)}
        tensorvm_sort(sess, folder, f"{outs}/tv")
        check = teravalidate(f"file://{outs}/tv", f"file://{folder}/in")
        assert check["ok"], check["errors"]
        methods = {"numpy": (lambda: numpy_sort(inputs, f"{outs}/np"), None),
                   "tensorvm": (lambda: tensorvm_sort(sess, folder, f"{outs}/tv"),
                                sess.client)}
        if not args.skip_dask:
            from dask.distributed import Client, LocalCluster
            lc = stack.enter_context(LocalCluster(n_workers=2, threads_per_worker=1,
                                                  processes=True, dashboard_address=None))
            client = stack.enter_context(Client(lc))
            threads["dask"] = worker_threads(client)
            methods["dask.delayed"] = (lambda: dask_delayed_sort(client, inputs,
                                                                 f"{outs}/dd"), client)
            try:
                import pandas  # noqa: F401
            except ImportError:
                print("dask.dataframe: skipped (pandas is not installed)")
            else:
                def ddf():
                    shutil.rmtree(f"{outs}/ddf", ignore_errors=True)
                    dask_dataframe_sort(client, inputs, f"{outs}/ddf")
                methods["dask.dataframe"] = (ddf, client)
        assert threads["tensorvm"] == [1, 1], threads
        assert threads.get("dask", [1, 1]) == [1, 1], threads
        print("threads of work: " + ", ".join(f"{k} {v}" for k, v in threads.items()) +
              " (worker processes x threads)")
        results = interleaved(methods, args.repeat)
    finally:
        stack.close()
        sess.close()
        shutil.rmtree(outs, ignore_errors=True)
    base = results["numpy"][0]
    print(f"{args.records:,} records x {RECORD} B in {len(inputs)} files")
    print(f"{'method':15s} {'median s':>9s} {'/numpy':>7s} {'best':>6s} {'cpu s':>6s}  runs")
    for name, (med, times, cpu) in results.items():
        print(f"{name:15s} {med:9.2f} {med / base:7.2f} {min(times):6.2f} {cpu:6.2f}  "
              f"{' '.join(f'{t:.2f}' for t in times)}")


if __name__ == "__main__":
    main()
