"""Planning time for large generated graphs over 8 devices, and how it grows with size.

The graph: ``--ops`` element-wise ops (10,000, 20,000, 40,000 and 100,000 by default) over 8 devices
``/job:worker/task:0..7``. Op i lives on device ``i % 8`` and reads the op built 8 before it
(the same device: 8 long chains), plus, with probability ``--cross`` (0.1), a random op among
the last 64 (usually on another device: a Send/Recv edge). Every chain's last op is fetched.

Planning is ``sess.plan(fetches, feeds)`` on a fresh in-process session each time (the cache
miss path: snapshot, prune, optimise, place, partition, stage, compile). The table shows the
best wall and CPU time of the whole, CPU time per op and per pass (CPU time, since a loaded
2-core machine stretches wall time; the passes run with the cyclic garbage collector off, as
the session runs them), and the growth factor between sizes (x2.0 per doubling is linear).
The last line checks issue 22's target: ``sess.plan`` of the 100,000-op graph (8 chains of
element-wise ops, 10 % cross-device edges, cold cache) in at most 2 CPU-seconds.

Run: ``python -m bench.bench_planning [--ops 10000 20000 40000 100000] [--repeat 3] [--profile N]``
(``--profile N`` prints a pyinstrument profile of planning the N-op graph).
"""
from __future__ import annotations

import argparse
import gc
import itertools
import time

import numpy as np

N_DEVICES = 8
TARGET_OPS, TARGET_CPU_S = 100_000, 2.0  # issue 22: plan 100k ops over 8 devices in <= 2 CPU-s


def build(tv, n_ops: int, cross: float = 0.1, seed: int = 0):
    rng = np.random.default_rng(seed)
    g = tv.Graph()
    with g.as_default():
        x = tv.placeholder(tv.float32, [4], name="x")
        ops = []
        for i in range(n_ops):
            with tv.device(f"/job:worker/task:{i % N_DEVICES}"):
                a = ops[i - N_DEVICES] if i >= N_DEVICES else x
                if ops and rng.random() < cross:
                    b = ops[int(rng.integers(max(0, i - 64), i))]
                    y = tv.add(a, b)
                else:
                    y = tv.multiply(a, 1.0001) if i % 2 else tv.tanh(a)
            ops.append(y)
    fetches = ops[-N_DEVICES:]
    return g, fetches, {x: np.ones(4, np.float32)}


def time_passes(tv, g, fetches, feeds) -> dict:
    """Each pass on its own, as Session._compile runs them (fresh snapshot each time, the
    cyclic garbage collector off)."""
    gc_was_on = gc.isenabled()
    gc.disable()
    try:
        return _time_passes(g, fetches, feeds)
    finally:
        if gc_was_on:
            gc.enable()


def _time_passes(g, fetches, feeds) -> dict:
    from tensorvm import passes
    from tensorvm.framework.graph_def import snapshot
    t = {}
    g._snapshot_cache = None
    s = time.process_time()
    all_nodes = snapshot(g)
    t["snapshot"] = time.process_time() - s
    frefs = [(f.op.name, f.value_index) for f in fetches]
    feed_refs = {(k.op.name, k.value_index) for k in feeds}
    s = time.process_time()
    nodes = passes.prune(all_nodes, frefs, [], feed_refs)
    t["prune"] = time.process_time() - s
    s = time.process_time()
    nodes, frefs, _ = passes.optimize(nodes, frefs, [], feed_refs, pruned=True)
    t["optimize"] = time.process_time() - s
    s = time.process_time()
    devices = passes.place(nodes, "/job:worker/task:0", all_nodes=all_nodes)
    t["place"] = time.process_time() - s
    s = time.process_time()
    part = passes.partition(nodes, devices, feed_refs)
    t["partition"] = time.process_time() - s
    s = time.process_time()
    stages = passes.stage(part)
    t["stage"] = time.process_time() - s
    s = time.process_time()
    plan = passes.compile_plan(part, stages, frefs, sorted(feed_refs))
    t["compile"] = time.process_time() - s
    t["_plan"] = plan
    return t


def plan_once(tv, g, fetches, feeds) -> tuple[float, float, object]:
    """(wall seconds, CPU seconds, plan) of planning on a fresh session.

    The garbage collector is run to the end first, so each repetition starts alike: the
    collection that planning's own objects cause (the session plans with the collector off
    and turns it back on) is in the time, not one of the garbage earlier repetitions left."""
    g._snapshot_cache = None  # a fresh session on an unchanged graph would still reuse it
    with tv.Session(graph=g) as sess:
        gc.collect()
        w, c = time.perf_counter(), time.process_time()
        plan = sess.plan(fetches, feeds)
        return time.perf_counter() - w, time.process_time() - c, plan


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ops", type=int, nargs="+", default=[10_000, 20_000, 40_000, TARGET_OPS])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--cross", type=float, default=0.1)
    ap.add_argument("--profile", type=int, default=0)
    args = ap.parse_args(argv)
    import tensorvm as tv

    rows = []
    for n in args.ops:
        s = time.perf_counter()
        g, fetches, feeds = build(tv, n, args.cross)
        built = time.perf_counter() - s
        walls, cpus, per_pass = [], [], []
        for _ in range(args.repeat):
            w, c, plan = plan_once(tv, g, fetches, feeds)
            walls.append(w)
            cpus.append(c)
            per_pass.append(time_passes(tv, g, fetches, feeds))
        best = {k: min(p[k] for p in per_pass) for k in per_pass[0] if not k.startswith("_")}
        rows.append((n, built, min(walls), min(cpus), best, plan))
        if args.profile == n:
            profile(tv, g, fetches, feeds)

    names = list(rows[0][4])
    print(f"Planning a generated graph over {N_DEVICES} devices (best of {args.repeat}; "
          f"cross-device edge probability {args.cross}); passes in CPU seconds")
    print(f"{'ops':>7}{'tasks':>7}{'sends':>7}{'build s':>9}{'wall s':>8}{'cpu s':>8}"
          f"{'us/op':>7}  " + "".join(f"{k:>10}" for k in names))
    for n, built, wall, cpu, pm, plan in rows:
        print(f"{n:7d}{len(plan.tasks):7d}{len(plan.sends):7d}{built:9.2f}{wall:8.3f}"
              f"{cpu:8.3f}{cpu / n * 1e6:7.1f}  " + "".join(f"{pm[k]:10.3f}" for k in names))
    for r0, r1 in itertools.pairwise(rows):
        growth = " ".join(f"{k} x{r1[4][k] / max(r0[4][k], 1e-9):.2f}" for k in names)
        print(f"growth {r0[0]} -> {r1[0]} ops (x{r1[0] / r0[0]:.1f}): wall x{r1[2] / r0[2]:.2f}, "
              f"cpu x{r1[3] / r0[3]:.2f}; {growth}")
    for n, _, _, cpu, _, _ in rows:
        if n == TARGET_OPS:
            print(f"issue 22 target: sess.plan of {n:,} ops over {N_DEVICES} devices in "
                  f"{cpu:.2f} CPU-s (cold cache; target <= {TARGET_CPU_S:g}): "
                  f"{'met' if cpu <= TARGET_CPU_S else 'NOT met'}")
    return rows


def profile(tv, g, fetches, feeds) -> None:
    try:
        from pyinstrument import Profiler
    except ImportError:
        print("pyinstrument is not installed: pip install tensorvm[bench]")
        return
    prof = Profiler(interval=0.0005)
    prof.start()
    plan_once(tv, g, fetches, feeds)
    prof.stop()
    print(prof.output_text(unicode=False, color=False, show_all=False))


if __name__ == "__main__":
    main()
