"""Send/Recv of a large tensor between two worker processes: tensorvm vs plain Dask.

tensorvm (both data planes, ``RunOptions(data_plane="dask"|"direct")``): a graph with a
producer on ``/job:a/task:0`` (a py_func filling a 256 MiB float32
array) and a consumer on ``/job:b/task:0`` (``reduce_sum``), on a cluster of two worker
processes ``a-0`` and ``b-0``. Plain Dask: ``client.submit`` of the same producer pinned to
worker ``a-0`` and of the same consumer (``np.sum``) pinned to ``b-0``, on the same cluster.

A third row moves the array with plain Dask but realigns it before the sum: Dask reads a
message's first out-of-band buffer together with its header, so a lone large array lands at an
address that is not even 4-byte aligned, where NumPy's reductions and BLAS take other (slower,
differently rounded) paths. tensorvm sends every value behind a tiny guard array (the wire
form of ``tensorvm.vm.results.StageResult``), so the tensor gets a buffer of its own; its
runtime still realigns any array that arrives unaligned. On the Dask plane that buffer comes in 64 MiB shards (Dask's
``distributed.comm.shard``) which the receiver copies into one array — the copy plain Dask
skips, reading a lone array's shards into one (unaligned) buffer with the header. The direct
plane serialises a large array itself and sends it as one frame (``packing.pack``): one
aligned buffer, no copy. On this VM a fresh 256 MiB allocation can stall in
transparent-hugepage compaction (the outliers of every row).

Only the transfer and the consume are timed, not the producing: both sides take the time from
the end of the producer task to the end of the consumer task, from the tasks' own clocks
(tensorvm's step trace; timestamps returned by the plain-Dask tasks). Throughput is MiB over
that time; the ratio tensorvm / Dask is the figure (target >= 0.9).

Run: ``python -m bench.bench_sendrecv [--mib 256] [--repeat 7]``.
"""
from __future__ import annotations

import argparse
import statistics
import time

import numpy as np


def produce(n: int) -> np.ndarray:
    return np.full(n, 1.0, np.float32)


def dask_produce(n: int):
    a = produce(n)
    return a, time.time()


def dask_consume(pair):
    a, produced_at = pair
    s = np.sum(a)
    return float(s), produced_at, time.time()


def build(tv, n: int):
    g = tv.Graph()
    with g.as_default():
        with tv.device("/job:a/task:0"):
            big = tv.py_func(lambda: produce(n), [], tv.float32, name="produce")
        with tv.device("/job:b/task:0"):
            total = tv.reduce_sum(big, name="consume")
    return g, total


def tv_round(tv, sess, total, n: int, plane: str = "dask") -> float:
    md = tv.RunMetadata()
    value = sess.run(total, options=tv.RunOptions(trace=True, data_plane=plane),
                     run_metadata=md)
    assert value == n, value
    assert md.sends[0]["bytes"] == 4 * n, md.sends
    end = {r["device"].split("/")[1]: r["end"] for r in md.step_stats}
    return end["job:b"] - end["job:a"]


def dask_round(client, a: str, b: str, n: int, i: int, consume=None) -> float:
    p = client.submit(dask_produce, n, workers=[a], allow_other_workers=False, pure=False,
                      key=f"bench-produce-{i}")
    c = client.submit(consume or dask_consume, p, workers=[b], allow_other_workers=False,
                      pure=False, key=f"bench-consume-{i}")
    value, produced_at, consumed_at = c.result()
    assert value == n
    return consumed_at - produced_at


def dask_consume_aligned(pair):
    """The consumer a careful plain-Dask program needs for bit-exact sums: Dask hands the
    array over at an unaligned address, where NumPy's reductions and BLAS take other paths."""
    a, produced_at = pair
    s = np.sum(np.require(a, requirements="A"))
    return float(s), produced_at, time.time()


def run(tv, n: int, repeat: int) -> dict:
    """Rounds of the three variants interleaved on one two-worker cluster."""
    g, total = build(tv, n)
    out = {"tensorvm": [], "tensorvm direct": [], "dask": [], "dask+align": []}
    sess = tv.Session(cluster={"a": 1, "b": 1}, graph=g, verbose=False)
    try:
        plan = sess.plan(total)
        assert len(plan.sends) == 1, plan
        a, b = sess.devices["a-0"], sess.devices["b-0"]
        variants = {
            "tensorvm": lambda i: tv_round(tv, sess, total, n),
            "tensorvm direct": lambda i: tv_round(tv, sess, total, n, "direct"),
            "dask": lambda i: dask_round(sess.client, a, b, n, 2 * i),
            "dask+align": lambda i: dask_round(sess.client, a, b, n, 2 * i + 1,
                                               dask_consume_aligned),
        }
        names = list(variants)
        for i in range(repeat + 1):  # the first round warms up
            k = i % len(names)  # rotate the order: no variant always follows the same one
            for name in names[k:] + names[:k]:
                t = variants[name](i)
                if i:
                    out[name].append(t)
    finally:
        sess.close()
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mib", type=int, default=256)
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args(argv)
    import tensorvm as tv
    n = args.mib * 2 ** 20 // 4
    times = run(tv, n, args.repeat)
    med = {k: statistics.median(v) for k, v in times.items()}
    thr = {k: args.mib / v for k, v in med.items()}
    print(f"Send/Recv of a {args.mib} MiB float32 tensor between two worker processes "
          f"(median of {args.repeat} interleaved rounds; transfer + consume only)")
    best = {k: min(v) for k, v in times.items()}
    print(f"{'':24}{'median s':>9}{'MiB/s':>8}{'best s':>8}{'MiB/s':>8}   all rounds (s)")
    rows = {"tensorvm": "tensorvm Send/Recv (dask)",
            "tensorvm direct": "tensorvm Send/Recv (direct)", "dask": "plain Dask submit",
            "dask+align": "plain Dask + realign"}
    for k, label in rows.items():
        print(f"{label:24}{med[k]:9.3f}{thr[k]:8.0f}{best[k]:8.3f}{args.mib / best[k]:8.0f}   "
              + " ".join(f"{t:.3f}" for t in times[k]))
    ratio = thr["tensorvm"] / thr["dask"]
    print(f"ratio of throughputs tensorvm direct plane / plain Dask: median "
          f"{thr['tensorvm direct'] / thr['dask']:.2f}, best "
          f"{best['dask'] / best['tensorvm direct']:.2f} (target >= 0.9)")
    print(f"ratio of throughputs tensorvm / plain Dask: median {ratio:.2f}, best "
          f"{best['dask'] / best['tensorvm']:.2f} (target >= 0.9); tensorvm / Dask + realign: "
          f"median {thr['tensorvm'] / thr['dask+align']:.2f}, best "
          f"{best['dask+align'] / best['tensorvm']:.2f}")
    return ratio


if __name__ == "__main__":
    main()
