"""Storage benchmarks: checkpoint save/restore vs np.save/np.load, and split-parallel text
reading vs pyarrow reading the file whole.

    python bench/bench_storage.py [--size-mib 1024] [--dir /tmp] [--repeat 3]

Checkpoint: ``--size-mib`` of float32 variables in 16 arrays, saved with ``write_shard`` +
``commit`` (one shard, and two shards written by two threads as two parameter-server devices
would) and restored with ``read_tensors`` (every CRC-32 verified), against ``np.save`` /
``np.load`` of the same arrays, one file each. Text: a ``--size-mib`` file of lines read through
``splits()`` by 2 reader processes (a pool started beforehand, as Dask workers are) against
``pyarrow.csv.read_csv`` (multi-threaded, one column) and ``pa.input_stream`` +
``pyarrow.compute.split_pattern``. Files live under ``--dir`` (page cache warm: every figure
is best of ``--repeat``) and are removed at the end. Target: every ratio >= 0.8.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import threading
import time
from concurrent.futures import ProcessPoolExecutor

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pa_csv

from tensorvm.storage import checkpoint_url, commit, read, read_tensors, splits, write_shard

MIB = 1024 * 1024


def best(fn, repeat: int, before=None) -> float:
    """Best wall time of ``fn()`` over ``repeat`` runs (``before()`` untimed, each run)."""
    times = []
    for _ in range(repeat):
        if before:
            before()
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


# -- checkpoints ------------------------------------------------------------------------------
def bench_checkpoint(root: str, size_mib: int, repeat: int) -> list[tuple[str, float, float]]:
    n = 16
    per = size_mib * MIB // n // 4
    rng = np.random.default_rng(0)
    arrays = {f"layer{i}/w": rng.standard_normal(per, dtype=np.float32) for i in range(n)}
    total = sum(a.nbytes for a in arrays.values())
    npy_dir, ckpt_dir = f"{root}/npy", f"{root}/ckpt"

    def clean():
        for d in (npy_dir, ckpt_dir):
            shutil.rmtree(d, ignore_errors=True)
            os.makedirs(d)

    def np_save():
        for i, a in enumerate(arrays.values()):
            np.save(f"{npy_dir}/a{i}.npy", a)

    def np_load():
        return [np.load(f"{npy_dir}/a{i}.npy") for i in range(n)]

    ckpt = checkpoint_url(ckpt_dir, "model.ckpt", 1)

    def tv_save_1():
        entries = write_shard(ckpt, 0, 1, arrays)
        commit(ckpt_dir, ckpt, entries, 1)

    def tv_save_2():
        names = list(arrays)
        halves = [{k: arrays[k] for k in names[: n // 2]}, {k: arrays[k] for k in names[n // 2 :]}]
        out = [None, None]

        def shard(i):
            out[i] = write_shard(ckpt, i, 2, halves[i])

        threads = [threading.Thread(target=shard, args=(i,)) for i in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        commit(ckpt_dir, ckpt, out[0] + out[1], 1)

    def tv_load():
        return read_tensors(ckpt)

    # interleaved, best of ``repeat``: other load on the machine hits every method alike
    save_fns = {"np": np_save, "tv1": tv_save_1, "tv2": tv_save_2}
    times: dict[str, list[float]] = {f"{k}/{op}": [] for k in save_fns for op in ("save", "load")}
    for _ in range(repeat):
        for key, save in save_fns.items():
            times[f"{key}/save"].append(best(save, 1, clean))
            times[f"{key}/load"].append(best(np_load if key == "np" else tv_load, 1))
            if key == "tv1":
                got = tv_load()
                assert all(np.array_equal(got[k], arrays[k]) for k in arrays)
                del got
    labels = {"np": "np.save / np.load (16 files)", "tv1": "tensorvm checkpoint, 1 shard",
              "tv2": "tensorvm checkpoint, 2 shards"}
    rows = [(label, total / min(times[f"{k}/save"]) / MIB, total / min(times[f"{k}/load"]) / MIB)
            for k, label in labels.items()]
    shutil.rmtree(npy_dir, ignore_errors=True)
    shutil.rmtree(ckpt_dir, ignore_errors=True)
    return rows


# -- text -------------------------------------------------------------------------------------
def make_text(path: str, size_mib: int) -> int:
    rng = np.random.default_rng(0)
    words = np.array(["alpha", "beta", "gamma", "delta", "épsilon", "zeta", "eta", "θeta",
                      "iota", "kappa", "lambda", "mu"])
    lines = [" ".join(rng.choice(words, rng.integers(1, 16))) for _ in range(200_000)]
    block = ("\n".join(lines) + "\n").encode()
    with open(path, "wb") as f:
        written = 0
        while written < size_mib * MIB:
            f.write(block)
            written += len(block)
    return written


def _count_split(split: dict) -> tuple[int, int]:
    lines = nbytes = 0
    for batch in read(split):
        lines += len(batch)
        nbytes += batch.buffers()[2].size if batch.buffers()[2] is not None else 0
    return lines, nbytes


def _noop(x):
    return x


def bench_text(root: str, size_mib: int, repeat: int) -> list[tuple[str, float, int]]:
    path = f"{root}/lines.txt"
    total = make_text(path, size_mib)
    rows = []

    def csv_whole():
        table = pa_csv.read_csv(
            path, read_options=pa_csv.ReadOptions(column_names=["line"], block_size=16 * MIB),
            parse_options=pa_csv.ParseOptions(delimiter="\x1f", quote_char=False,
                                              escape_char=False, ignore_empty_lines=False),
            convert_options=pa_csv.ConvertOptions(column_types={"line": pa.string()}))
        return table.num_rows

    def split_pattern_whole():
        with pa.input_stream(path) as f:
            data = f.read()
        lines = pc.split_pattern(pa.scalar(data, pa.large_string()), "\n")
        return len(lines) - 1

    n_csv = [0]
    t = best(lambda: n_csv.__setitem__(0, csv_whole()), repeat)
    rows.append(("pyarrow.csv.read_csv, whole file (threads)", total / t / MIB, n_csv[0]))
    n_sp = [0]
    t = best(lambda: n_sp.__setitem__(0, split_pattern_whole()), repeat)
    rows.append(("pa.input_stream + split_pattern, whole file", total / t / MIB, n_sp[0]))
    with ProcessPoolExecutor(2) as pool:
        list(pool.map(_noop, range(4)))  # warm the workers, as a running cluster would be
        n_ours = [0]

        def ours():
            parts = [s.to_dict() for s in splits(path, split_size=64 * MIB)]
            results = list(pool.map(_count_split, parts))
            n_ours[0] = sum(r[0] for r in results)

        t = best(ours, repeat)
        rows.append(("tensorvm splits(), 2 reader processes", total / t / MIB, n_ours[0]))

        def ours_one():
            n_ours[0] = sum(_count_split(s.to_dict())[0] for s in splits(path, split_size=64 * MIB))

        t = best(ours_one, repeat)
        rows.append(("tensorvm splits(), 1 reader (this process)", total / t / MIB, n_ours[0]))
    os.remove(path)
    return rows


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--size-mib", type=int, default=1024)
    ap.add_argument("--dir", default="/tmp")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--only", choices=["checkpoint", "text"], default=None)
    args = ap.parse_args(argv)
    root = tempfile.mkdtemp(prefix="tvm-bench-storage-", dir=args.dir)
    try:
        if args.only in (None, "checkpoint"):
            rows = bench_checkpoint(root, args.size_mib, args.repeat)
            print(f"\nCheckpoint, {args.size_mib} MiB of float32 in 16 arrays (MiB/s)")
            print(f"{'':44s} {'save':>9s} {'restore':>9s} {'save ratio':>11s} "
                  f"{'restore ratio':>14s}")
            base = rows[0]
            for name, s, r in rows:
                print(f"{name:44s} {s:9.0f} {r:9.0f} {s / base[1]:11.2f} {r / base[2]:14.2f}")
        if args.only in (None, "text"):
            rows = bench_text(root, args.size_mib, args.repeat)
            print(f"\nText, {args.size_mib} MiB file of lines (MiB/s)")
            print(f"{'':44s} {'MiB/s':>9s} {'lines':>12s} {'vs best pyarrow':>16s}")
            base = max(r[1] for r in rows[:2])
            counts = {r[2] for r in rows}
            for name, mibs, n in rows:
                print(f"{name:44s} {mibs:9.0f} {n:12d} {mibs / base:16.2f}")
            if len(counts) != 1:
                print(f"WARNING: line counts differ: {sorted(counts)}")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
