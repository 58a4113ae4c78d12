"""Word count: tensorvm's map-reduce beside pyarrow, dask.bag and a Counter merge (issue 10).

    python bench/bench_wordcount.py [--mb 200] [--files 16] [--repeat 3] [--skip-dask]
                                    [--map-tasks M] [--reducers R]

Data (generated here, deterministic, cached under ``--dir``): ``--mb`` MB in ``--files`` text
files, lines of 4-20 lowercase ASCII words drawn from Zipf(s=1.0) over a 50,000-word vocabulary.
Timed: read + tokenize + count + the whole (word, count) table back to the driver (clusters
started beforehand and warmed up with one run). Every contender gets the same two threads of
work (issue 23, "equal resources"), checked before timing:

* ``pyarrow-2thr``: the single-process limit — one process, 2 threads (a 2-thread pool, and
  Arrow's own pool set to 2), each reads a file, splits lines and words with
  ``pyarrow.compute`` and counts them (``value_counts``); tables merged by a ``group_by`` sum.
* ``tensorvm``: ``jobs.wordcount`` (``mr.emit(tv.strings.split(lines), 1)``, combine and reduce
  ``sum``) in one ``Session.run`` on a ``{"worker": 2}`` LocalCluster of **2 worker
  processes x 1 thread** (``tensorvm.worker-threads=1``; Arrow's pool in each worker set to
  1). Map tasks: the job's own grain unless ``--map-tasks`` says (12 here, ~25 MB each: 2 map
  tasks of 100 MB cost ~1.5x the CPU, their memory fresh each time). Reducers: the job's
  own sizing unless ``--reducers`` says (one per worker thread here: a job with a combiner
  is not spread over more, smaller reducers — its shuffle is ~1,000x smaller than its input,
  and 8 reducers cost ~0.4 s more CPU).
* ``dask.bag``: ``read_text().str.split().flatten().frequencies()`` on a LocalCluster of 2
  processes x 1 thread (Arrow's pool in each set to 1, as for tensorvm).
* ``bag+Counter``: ``map_partitions(Counter)`` per file, merged on the driver, same cluster.

The methods run in turn, ``--repeat`` rounds; medians, ratios against ``pyarrow-2thr`` and ``dask.bag``; ``cpu s``: CPU
seconds of the driver and the workers (steadier than wall time on a shared machine). A per-phase
split of tensorvm's time comes from a traced run (map and reduce tasks per worker) and from the
map kernels timed on one file in this process.
"""
from __future__ import annotations

import argparse
import collections
import contextlib
import os
import statistics
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

VOCAB = 50_000


# ---- data ------------------------------------------------------------------------------------
def vocabulary(seed: int = 0):
    """50,000 distinct lowercase words (2-11 letters): their bytes and offsets."""
    rng = np.random.default_rng(seed)
    words: list[bytes] = []
    seen = set()
    while len(words) < VOCAB:
        n = VOCAB - len(words)
        lens = rng.integers(2, 12, n)
        letters = rng.integers(97, 123, int(lens.sum()), dtype=np.uint8).tobytes()
        pos = 0
        for length in lens:
            w = letters[pos:pos + length]
            pos += length
            if w not in seen:
                seen.add(w)
                words.append(w)
    lens = np.array([len(w) for w in words], np.int64)
    return np.frombuffer(b"".join(words), np.uint8), np.r_[0, np.cumsum(lens)[:-1]], lens


def zipf_file(path: str, nbytes: int, seed: int, vocab) -> None:
    """~``nbytes`` of text: Zipf(1.0) words, 4-20 a line (vectorised byte gather)."""
    data, offs, wl = vocab
    rng = np.random.default_rng(seed)
    p = 1.0 / np.arange(1, VOCAB + 1)
    cdf = np.cumsum(p / p.sum())
    mean_len = float((wl + 1) @ (p / p.sum()))
    n_tok = int(nbytes / mean_len)
    idx = np.minimum(np.searchsorted(cdf, rng.random(n_tok)), VOCAB - 1)
    per_line = rng.integers(4, 21, n_tok // 4 + 1)
    line_ends = np.cumsum(per_line)
    line_ends = line_ends[line_ends <= n_tok]
    n_tok = int(line_ends[-1])
    idx = idx[:n_tok]
    tot = wl[idx] + 1
    ends = np.cumsum(tot)
    starts = ends - tot
    buf = np.empty(int(ends[-1]), np.uint8)
    within = np.arange(len(buf)) - np.repeat(starts, tot)
    src = np.repeat(offs[idx], tot) + within
    is_sep = within == np.repeat(wl[idx], tot)
    buf[~is_sep] = data[src[~is_sep]]
    buf[ends - 1] = ord(" ")
    buf[ends[line_ends - 1] - 1] = ord("\n")
    with open(path, "wb") as f:
        f.write(buf.tobytes())


def make_data(root: str, mb: float, files: int) -> list[str]:
    folder = os.path.join(root, f"tvm-bench-wordcount-{mb:g}mb-{files}f-v1")
    paths = [os.path.join(folder, f"part-{i:02d}.txt") for i in range(files)]
    if not os.path.exists(os.path.join(folder, "_done")):
        os.makedirs(folder, exist_ok=True)
        vocab = vocabulary()
        for i, p in enumerate(paths):
            zipf_file(p, int(mb * 1e6 / files), 1000 + i, vocab)
        open(os.path.join(folder, "_done"), "w").close()
    return paths


# ---- the contenders --------------------------------------------------------------------------
def _arrow_counts(path: str) -> pa.Table:
    with open(path, "rb") as f:
        raw = f.read()
    if raw.endswith(b"\n"):
        raw = raw[:-1]
    lines = pc.list_flatten(pc.split_pattern(pa.array([raw], pa.large_binary())
                                             .cast(pa.large_string()), "\n"))
    words = pc.list_flatten(pc.utf8_split_whitespace(lines))
    vc = pc.value_counts(words)
    return pa.table({"w": vc.field("values"), "n": vc.field("counts")})


THREADS = 2  # the threads of work every contender gets (see the module docstring)


def worker_threads(client) -> list:
    """Threads per worker process of ``client``'s cluster, sorted; Arrow's pool in each worker
    is set to one thread on the way (a Dask thread is one thread of work)."""
    client.run(pa.set_cpu_count, 1)
    return sorted(client.nthreads().values())


def pyarrow_2threads(paths):
    with ThreadPoolExecutor(THREADS) as ex:
        tables = list(ex.map(_arrow_counts, paths))
    t = pa.concat_tables(tables).group_by("w").aggregate([("n", "sum")])
    return dict(zip(t.column("w").to_pylist(), t.column("n_sum").to_pylist()))


MAP_TASKS, REDUCERS = None, None  # None: the job's own choice (--map-tasks, --reducers)


def tensorvm_run(session, paths):
    from tensorvm.jobs.wordcount import wordcount_job
    job = wordcount_job([f"file://{p}" for p in paths], num_reducers=REDUCERS,
                        map_tasks=MAP_TASKS)
    return job.run(session)


def dask_bag(client, paths):
    import dask.bag as db
    return dict(db.read_text(paths).str.split().flatten().frequencies().compute())


def bag_counter(client, paths):
    import dask.bag as db
    parts = db.read_text(paths).map_partitions(
        lambda lines: [collections.Counter(w for line in lines for w in line.split())])
    total: collections.Counter = collections.Counter()
    for c in parts.compute():
        total.update(c)
    return total


# ---- profile ---------------------------------------------------------------------------------
def map_phases(path: str) -> dict:
    """The map kernels on one file in this process, seconds each."""
    from tensorvm import storage
    from tensorvm.ops.mapreduce import mapreduce_ops as mro
    from tensorvm.ops.strings.string_ops import _strings_split_kernel
    out = {}
    t = time.perf_counter()
    (s,) = storage.splits(f"file://{path}", split_size=1 << 40)
    lines, _ = mro.read_split_group((s,), (), _text_dtype(), 0)
    out["read+lines"] = time.perf_counter() - t
    t = time.perf_counter()
    words, _ = _strings_split_kernel(lines, None, -1)
    out["tokenize"] = time.perf_counter() - t
    t = time.perf_counter()
    k, v = mro.group_reduce(words, np.int64(1), "sum")
    out["combine (count)"] = time.perf_counter() - t
    t = time.perf_counter()
    mro.partition(k, v, 2)
    out["hash partition"] = time.perf_counter() - t
    return out


def _text_dtype():
    import tensorvm as tv
    return tv.string


def traced_phases(session, paths) -> dict:
    """Map and reduce task seconds of one traced run (per task, summed over workers)."""
    import tensorvm as tv
    from tensorvm.jobs.wordcount import wordcount_job
    job = wordcount_job([f"file://{p}" for p in paths], num_reducers=REDUCERS,
                        map_tasks=MAP_TASKS)
    splits = job._splits()
    job._size_reducers(session, splits, 2)  # (as Job.run sizes them)
    built = job.build(session.graph, 2, "trace", splits, client=session.client)
    from tensorvm.mapreduce.common import _flat
    meta = tv.RunMetadata()
    t0 = time.perf_counter()
    session.run(_flat(built.fetches), options=tv.RunOptions(trace=True), run_metadata=meta)
    wall = time.perf_counter() - t0
    spans = collections.defaultdict(list)
    for rec in meta.step_stats:
        kind = "map" if any("/map" in o for o in rec["ops"]) else \
            "reduce" if any("/reduce" in o for o in rec["ops"]) else "send"
        spans[kind].append(rec["end"] - rec["start"])
    return {"wall": wall, **{k: (max(v), len(v)) for k, v in spans.items()}}


def cpu_seconds(client=None) -> float:
    """CPU seconds used so far by this process and (given a client) its workers — a measure
    that other load on a shared machine disturbs much less than wall time."""
    own = time.process_time()
    if client is None:
        return own
    return own + sum(client.run(time.process_time).values())


def interleaved(methods: dict, repeat: int) -> dict:
    """``{name: (median s, runs, median cpu s)}``, the methods run in turn each round (so a
    burst of other load on a shared machine hits them all alike)."""
    runs: dict = {name: ([], []) for name in methods}
    for _ in range(repeat):
        for name, (fn, client) in methods.items():
            c, t = cpu_seconds(client), time.perf_counter()
            fn()
            runs[name][0].append(time.perf_counter() - t)
            runs[name][1].append(cpu_seconds(client) - c)
    return {name: (statistics.median(w), w, statistics.median(c))
            for name, (w, c) in runs.items()}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mb", type=float, default=200)
    ap.add_argument("--files", type=int, default=16)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--dir", default=tempfile.gettempdir())
    ap.add_argument("--skip-dask", action="store_true")
    ap.add_argument("--map-tasks", type=int, default=None,
                    help="tensorvm's map tasks (default: the job's, one per ~25 MB here)")
    ap.add_argument("--reducers", type=int, default=0,
                    help="tensorvm's reducers (default 0: the job's own sizing)")
    args = ap.parse_args(argv)
    global MAP_TASKS, REDUCERS
    MAP_TASKS, REDUCERS = args.map_tasks, args.reducers or None

    import dask

    import tensorvm as tv
    paths = make_data(args.dir, args.mb, args.files)
    print(f"data: {sum(os.path.getsize(p) for p in paths) / 1e6:.0f} MB in {len(paths)} files")
    pa.set_cpu_count(THREADS)
    ref = pyarrow_2threads(paths)
    with dask.config.set({"tensorvm.worker-threads": 1}):
        sess = tv.Session(cluster={"worker": THREADS}, graph=tv.Graph(), verbose=False)
    threads = {"pyarrow-2thr": f"1 process x {THREADS} threads",
               "tensorvm": worker_threads(sess.client)}
    methods = {"pyarrow-2thr": (lambda: pyarrow_2threads(paths), None),
               "tensorvm": (lambda: tensorvm_run(sess, paths), sess.client)}
    stack = contextlib.ExitStack()
    try:
        first = tensorvm_run(sess, paths)
        assert first.to_dict() == ref, "tensorvm differs from pyarrow"
        tv_shape = (first.num_map_tasks, first.num_reducers)
        if not args.skip_dask:
            from dask.distributed import Client, LocalCluster
            lc = stack.enter_context(LocalCluster(n_workers=2, threads_per_worker=1,
                                                  processes=True, dashboard_address=None))
            client = stack.enter_context(Client(lc))
            threads["dask"] = worker_threads(client)
            assert dask_bag(client, paths) == ref
            methods["dask.bag"] = (lambda: dask_bag(client, paths), client)
            methods["bag+Counter"] = (lambda: bag_counter(client, paths), client)
        assert threads["tensorvm"] == [1] * THREADS, threads
        assert threads.get("dask", threads["tensorvm"]) == threads["tensorvm"], threads
        print("threads of work: " + ", ".join(f"{k} {v}" for k, v in threads.items()) +
              " (worker processes x threads)")
        results = interleaved(methods, args.repeat)
        phases = traced_phases(sess, paths)
    finally:
        stack.close()
        sess.close()

    base = results["pyarrow-2thr"][0]
    bag = results.get("dask.bag", (None,))[0]
    print(f"{'method':14s} {'median s':>9s} {'/pyarrow':>9s} {'dask.bag/x':>11s} "
          f"{'best':>6s} {'cpu s':>7s}  runs")
    for name, (med, times, cpu) in results.items():
        speed = f"{bag / med:10.1f}x" if bag else "          -"
        print(f"{name:14s} {med:9.2f} {med / base:9.2f} {speed} {min(times):6.2f} {cpu:7.2f}  "
              f"{' '.join(f'{t:.2f}' for t in times)}")
    print("\ntensorvm traced run: wall %.2fs; longest map task %.2fs (%d), reduce %.2fs (%d)"
          % (phases["wall"], *phases.get("map", (0, 0)), *phases.get("reduce", (0, 0))))
    print(f"tensorvm job: {tv_shape[0]} map tasks x {tv_shape[1]} reducers "
          f"(--map-tasks {MAP_TASKS}, --reducers {REDUCERS}; None: the job's choice)")
    one = map_phases(paths[0])
    tot = sum(one.values())
    print("map kernels on one file (%.1f MB): " % (os.path.getsize(paths[0]) / 1e6) +
          ", ".join(f"{k} {v * 1e3:.0f} ms ({v / tot:.0%})" for k, v in one.items()))


if __name__ == "__main__":
    main()
