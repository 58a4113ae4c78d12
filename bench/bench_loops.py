"""A ``while_loop`` across two worker processes (issue 27): its per-iteration cost.

On a cluster of two worker processes (``/job:worker/task:0`` and ``task:1``), the loop
``acc = tanh(acc * 0.5 + 0.1)`` on a float64 scalar, ``n`` iterations:

* *one device*: the whole loop on ``worker:0`` (one While op, its body run in its task);
* *two devices*: ``acc * 0.5 + 0.1`` on ``worker:1``, the counter, the predicate and the
  ``tanh`` on ``worker:0`` — each iteration the predicate and ``acc`` go to ``worker:1`` and
  the product comes back: two hops on its critical path (one WhileShard task per device per
  loop; values from kernel thread to kernel thread over the workers' loop lanes,
  ``tensorvm.runtime.direct.loop_lane``), on each data plane.

Per-iteration cost = (time of an ``n2``-iteration run − time of an ``n1``-iteration run) /
(``n2`` − ``n1``), medians over ``--repeat`` runs, so a step's fixed cost cancels. The cost of a
direct-plane hop is measured beside it: a step ``x (worker:0) → y (worker:1) → z
(worker:0)`` (two hops) on the direct plane minus the same step on one device, halved. The
target (issue 27): two-device per-iteration cost ≤ one-device per-iteration cost + two hops.

``parallel_iterations`` (the pipelined rows): a loop whose iterations depend on one another
only through the counter and a sum — ``y = tanh(x * i) @ w`` on ``worker:0``, ``z = y @ w`` on
``worker:1``, ``acc += sum(z)`` on ``worker:0`` (``--size`` square float64 matrices) — timed
with ``parallel_iterations=1`` (lockstep: worker:0 waits for ``z`` before its next matmul) and
``10`` (worker:0 runs iteration i+1's matmul while worker:1 runs iteration i's), on each plane.

Run: ``python -m bench.bench_loops [--n 10000] [--repeat 5] [--size 300] [--pipe-n 200]``.
"""
from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

W0, W1 = "/job:worker/task:0", "/job:worker/task:1"


def build(tv, n_ph, devices, parallel=10):
    with tv.device(devices[0]):
        def body(i, acc):
            with tv.device(devices[1]):
                nxt = acc * 0.5 + 0.1
            with tv.device(devices[0]):
                return i + 1, tv.tanh(nxt)
        return tv.while_loop(lambda i, acc: i < n_ph, body,
                             [tv.constant(0), tv.constant(0.3, tv.float64)],
                             parallel_iterations=parallel)[1]


def build_pipelined(tv, n_ph, x, w, parallel):
    """The pipelined rows' loop (see the module docstring)."""
    def body(i, acc):
        with tv.device(W0):
            y = tv.matmul(tv.tanh(x * tv.cast(i + 1, tv.float64)), w)
        with tv.device(W1):
            z = tv.matmul(y, w)
        with tv.device(W0):
            return i + 1, acc + tv.reduce_sum(z)
    with tv.device(W0):
        return tv.while_loop(lambda i, acc: i < n_ph, body,
                             [tv.constant(0), tv.constant(0.0, tv.float64)],
                             parallel_iterations=parallel)[1]


def pipelined_rows(tv, sess, n_ph, pipes, n, repeat) -> None:
    """Seconds per iteration with parallel_iterations 1 and 10, on each plane."""
    for plane in ("direct", "dask"):
        opts = tv.RunOptions(data_plane=plane)
        got = {}
        for parallel, out in pipes.items():
            got[parallel] = timed(sess, out, {n_ph: n}, repeat, opts) / n
            assert sess.run(out, {n_ph: n}, options=opts) == sess.run(
                pipes[1], {n_ph: n}, options=opts)
        print(f"matmul loop, {plane:6s} plane: parallel_iterations=1 "
              f"{got[1] * 1e3:7.2f} ms/iteration, =10 {got[10] * 1e3:7.2f} ms/iteration: "
              f"x{got[1] / got[10]:.2f}", flush=True)


def timed(sess, fetch, feed, repeat, opts) -> float:
    sess.run(fetch, feed, options=opts)  # compile, register
    ts = []
    for _ in range(repeat):
        t = time.perf_counter()
        sess.run(fetch, feed, options=opts)
        ts.append(time.perf_counter() - t)
    return statistics.median(ts)


def per_iteration(sess, out, n_ph, n1, n2, repeat, opts) -> float:
    t1 = timed(sess, out, {n_ph: n1}, repeat, opts)
    t2 = timed(sess, out, {n_ph: n2}, repeat, opts)
    return (t2 - t1) / (n2 - n1)


def hop_cost(tv, sess, repeat) -> float:
    """One direct-plane hop: (ping-pong step − the same on one device) / 2."""
    x = tv.placeholder(tv.float64, [])
    with tv.device(W0):
        a = x + 1.0
    with tv.device(W1):
        b = a * 2.0
    with tv.device(W0):
        c = b - 1.0
    with tv.device(W0):
        a1 = x + 1.0
        c1 = a1 * 2.0 - 1.0
    opts = tv.RunOptions(data_plane="direct")
    two = timed(sess, c, {x: 1.0}, repeat * 20, opts)
    one = timed(sess, c1, {x: 1.0}, repeat * 20, opts)
    return max(two - one, 0.0) / 2


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=10_000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--size", type=int, default=300)
    ap.add_argument("--pipe-n", type=int, default=200)
    ap.add_argument("--only", choices=("cost", "pipelined"), default=None)
    ap.add_argument("--parallel", type=int, default=10,
                    help="parallel_iterations of the per-iteration cost rows' loops")
    args = ap.parse_args(argv)
    import tensorvm as tv
    n2, n1 = args.n, max(args.n // 10, 1)
    spec = tv.train.ClusterSpec({"worker": 2})
    g = tv.Graph()
    with g.as_default():
        n_ph = tv.placeholder(tv.int32, [])
        one = build(tv, n_ph, (W0, W0), args.parallel)
        two = build(tv, n_ph, (W0, W1), args.parallel)
        rng = np.random.RandomState(0)
        x = tv.constant(rng.rand(args.size, args.size))
        w = tv.constant(rng.rand(args.size, args.size) / args.size)
        pipes = {p: build_pipelined(tv, n_ph, x, w, p) for p in (1, 10)}
        with tv.Session(cluster=spec, graph=g, verbose=False) as sess:
            if args.only != "cost":
                pipelined_rows(tv, sess, n_ph, pipes, args.pipe_n, args.repeat)
            if args.only == "pipelined":
                return
            hop = hop_cost(tv, sess, args.repeat)
            rows = [("one device (worker:0)", "direct", one), ("one device (worker:0)", "dask",
                                                             one),
                    ("two devices (worker:0, worker:1)", "direct", two),
                    ("two devices (worker:0, worker:1)", "dask", two)]
            got = {}
            for label, plane, out in rows:
                opts = tv.RunOptions(data_plane=plane)
                got[(label, plane)] = per_iteration(sess, out, n_ph, n1, n2, args.repeat,
                                                    opts)
                print(f"{label:34s} {plane:6s} plane: {got[(label, plane)] * 1e6:8.1f} "
                      f"us/iteration", flush=True)
            print(f"direct-plane hop (ping-pong step / 2): {hop * 1e6:8.1f} us")
            base = got[("one device (worker:0)", "direct")]
            for plane in ("direct", "dask"):
                it = got[("two devices (worker:0, worker:1)", plane)]
                target = base + 2 * hop
                print(f"two devices, {plane} plane: {it * 1e6:.1f} us/iteration vs target "
                      f"{target * 1e6:.1f} (one device {base * 1e6:.1f} + 2 hops "
                      f"{2 * hop * 1e6:.1f}): {'met' if it <= target else 'NOT met'}")


if __name__ == "__main__":
    main()
