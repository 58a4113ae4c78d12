"""Per-step latency of a small training step: tensorvm vs plain NumPy vs Dask's floor.

The graph: ``x[64,100] @ W[100,10] + b``, softmax cross-entropy, SGD update. Measured as
medians over many steps, single steps and ``steps=100``, in-process (``tv.Session()``) and on
dask.distributed (``tv.Session("local")``), each beside:

* the same step in plain NumPy (forward, backward, update by hand);
* Dask's floor: a bare ``client.get`` of a one-task graph on the same cluster (distributed), or
  ``dask.threaded.get`` of a one-task graph (in-process).

Distributed rows (issue 13): the PS + worker step on both data planes (``RunOptions(
data_plane="dask"|"direct")``), ``steps=100``, and a step of 5 device hops over 3 workers beside
a one-hop step; TF 1.x peers (a local session, and PS + worker servers over gRPC with the client
in a third process) run from ``bench/tf_step_peer.py`` in an environment where TensorFlow
imports (``--tf-python``; not a tensorvm dependency), else the issue's TF figures are quoted.
The gRPC peer stays up through the distributed rows and its rounds are interleaved with them,
so each ratio compares figures taken under the same machine load.

Run: ``python -m bench.bench_step [--steps N] [--tf-python /path/to/tf-venv/bin/python]``.
"""
from __future__ import annotations

import argparse
import statistics
import time

import numpy as np


def build(tv, ps=False):
    """The training graph; with ``ps`` the variables (and their updates) live on
    /job:ps/task:0 and the forward/backward pass on /job:worker/task:0."""
    rng = np.random.default_rng(0)
    g = tv.Graph()
    ps_dev = "/job:ps/task:0" if ps else None
    wk_dev = "/job:worker/task:0" if ps else None
    with g.as_default():
        x = tv.placeholder(tv.float32, [64, 100], name="x")
        y = tv.placeholder(tv.float32, [64, 10], name="y")
        with tv.device(ps_dev):
            w = tv.Variable(rng.normal(0, 0.1, (100, 10)).astype(np.float32), name="W")
            b = tv.Variable(np.zeros(10, np.float32), name="b")
        with tv.device(wk_dev):
            logits = tv.matmul(x, w) + b
            loss = tv.reduce_mean(tv.nn.softmax_cross_entropy_with_logits(labels=y,
                                                                          logits=logits))
            train = tv.train.GradientDescentOptimizer(0.1).minimize(loss)
        init = tv.global_variables_initializer()
    xs = rng.normal(size=(64, 100)).astype(np.float32)
    ys = np.eye(10, dtype=np.float32)[rng.integers(0, 10, 64)]
    return g, init, train, loss, {x: xs, y: ys}, xs, ys


def numpy_step(xs, ys, w, b, lr=0.1):
    logits = xs @ w + b
    m = logits.max(axis=1, keepdims=True)
    e = np.exp(logits - m)
    p = e / e.sum(axis=1, keepdims=True)
    loss = -(ys * np.log(p)).sum(axis=1).mean()
    dlogits = (p - ys) / xs.shape[0]
    w -= lr * (xs.T @ dlogits)
    b -= lr * dlogits.sum(axis=0)
    return loss


def median_ms(fn, n):
    times = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1e3


def chain_floor_ms(client, hops, n, workers=None):
    """Dask's floor for ``hops`` dependent one-task hops: ``client.get`` of a chain, either
    left to the scheduler (``workers=None``: it keeps the chain on one worker) or alternating
    over ``workers`` the way plain Dask pins tasks (per-layer ``workers`` annotations), so that
    each hop crosses processes as a PS/worker step does."""
    from dask.highlevelgraph import HighLevelGraph, MaterializedLayer

    def one(*_):
        return 1
    counter = iter(range(10 ** 9))

    def go():
        i = next(counter)
        layers, deps = {}, {}
        for h in range(hops):
            task = (one, (f"chain-{h - 1}", i)) if h else (one,)
            ann = {"workers": [workers[h % len(workers)]]} if workers else {}
            layers[f"chain-{h}-{i}"] = MaterializedLayer({(f"chain-{h}", i): task},
                                                         annotations=ann)
            deps[f"chain-{h}-{i}"] = {f"chain-{h - 1}-{i}"} if h else set()
        client.get(HighLevelGraph(layers, deps), [(f"chain-{hops - 1}", i)])
    return median_ms(go, n)


def run_mode(tv, target, n, ps=False):
    g, init, train, loss, feed, xs, ys = build(tv, ps)
    kw = {"verbose": False} if target else {}
    if ps:
        kw["cluster"] = tv.train.ClusterSpec({"ps": 1, "worker": 1})
        target = None if target == "local" else target
    with tv.Session(target, graph=g, **kw) as sess:
        sess.run(init)
        for _ in range(5):
            sess.run(train, feed)
        single = median_ms(lambda: sess.run(train, feed), n)
        k = 100
        multi = median_ms(lambda: sess.run(train, feed, steps=k), max(3, n // 20)) / k
        plan = sess.plan(train, feed)
        hops = _hops(plan)
        if sess.client is not None and hops > 1:
            pinned = [sess.devices[d] for d in ("ps-0", "worker-0")]
            floor = chain_floor_ms(sess.client, hops, n, workers=pinned)
            print(f"  (a {hops}-hop chain left on one worker: "
                  f"{chain_floor_ms(sess.client, hops, n):.3f} ms)")
        elif sess.client is not None:
            client = sess.client

            def one():
                return 1
            counter = iter(range(10 ** 9))
            floor = median_ms(lambda: client.get({(f"floor-{next(counter)}", 0): (one,)},
                                                 [(f"floor-{next(counter) - 1}", 0)]), n)

            def with_feeds(a, b):
                return 1
            fed = median_ms(lambda: client.get(
                {(f"floor-{next(counter)}", 0): (with_feeds, xs, ys)},
                [(f"floor-{next(counter) - 1}", 0)]), n)
            print(f"  (the same one-task get carrying this step's feeds, {xs.nbytes + ys.nbytes}"
                  f" bytes, as arguments: {fed:.3f} ms)")
        else:
            import dask.local
            import dask.threaded

            def one():
                return 1
            # A one-task plan runs on Dask's local scheduler in synchronous mode: that is its
            # floor; the threaded pool's is printed beside it.
            floor = median_ms(lambda: dask.local.get_sync({"floor-x": (one,)}, ["floor-x"]), n)
            pool = median_ms(lambda: dask.threaded.get({"floor-x": (one,)}, ["floor-x"]), n)
            print(f"  (Dask's threaded local scheduler, one task: {pool:.3f} ms)")
    return single, multi, floor, hops


def _hops(plan) -> int:
    """The longest chain of dependent tasks in a plan (Send picks included)."""
    from tensorvm.vm.program import Recv, Result
    depth: dict = {}
    sends = {s.name: s for s in plan.sends}
    for t in sorted(plan.tasks, key=lambda t: t.stage):
        d = 0
        for a in t.args:
            if isinstance(a, Result):
                d = max(d, depth.get(a.task, 0))
            elif isinstance(a, Recv):  # one pick task between
                d = max(d, depth.get(sends[a.send].task, 0) + 1)
        depth[t.name] = d + 1
    return max(depth.values())


def hop_graph(tv, tasks):
    """``x`` through one op on each worker task in turn: ``len(tasks) - 1`` device hops."""
    g = tv.Graph()
    with g.as_default():
        x = tv.placeholder(tv.float32, [64, 100], name="x")
        h = x
        for i, t in enumerate(tasks):
            with tv.device(f"/job:worker/task:{t}"):
                h = tv.add(h * 0.5, float(i))
    return g, x, h


def peer_tf(python, mode, n):
    """The TF 1.x peer (bench/tf_step_peer.py) in ``python``'s environment, or None."""
    import json
    import os
    import subprocess
    if not python:
        return None
    peer = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tf_step_peer.py")
    try:
        out = subprocess.run([python, peer, mode, str(n)], capture_output=True, text=True,
                             timeout=600, check=True).stdout
        return json.loads(out.strip().splitlines()[-1])
    except (OSError, subprocess.SubprocessError, ValueError, IndexError) as exc:
        print(f"  (TF peer {mode} failed: {exc})")
        return None


class TFRounds:
    """The TF 1.x gRPC peer kept up (``tf_step_peer.py rounds``) so that its rounds interleave
    with tensorvm's: ``step(n)`` / ``k100(n)`` -> median ms per step of ``n`` runs."""

    def __init__(self, python):
        import json
        import os
        import subprocess
        peer = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tf_step_peer.py")
        self._json = json
        self.proc = subprocess.Popen([python, peer, "rounds"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)
        if not self._read().get("ready"):
            raise RuntimeError("the TF peer did not start")

    def _read(self) -> dict:
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError("the TF peer ended")
        return self._json.loads(line)

    def _ask(self, cmd: str) -> dict:
        self.proc.stdin.write(cmd + "\n")
        self.proc.stdin.flush()
        return self._read()

    def step(self, n: int) -> float:
        return self._ask(f"step {n}")["ms"]

    def k100(self, n: int) -> float:
        return self._ask(f"k100 {n}")["ms"]

    def close(self) -> float | None:
        try:
            return self._ask("quit")["loss"]
        except (OSError, RuntimeError, ValueError):
            return None
        finally:
            try:  # it stops its two servers on its way out
                self.proc.wait(timeout=30)
            except Exception:  # noqa: BLE001 - then it is stopped here
                self.proc.kill()
                self.proc.wait()


def distributed_rows(tv, n, rounds, tf_python=""):
    """PS + worker steps on both data planes, steps=100, and 5 hops vs 1 hop over 3 workers,
    on one cluster of worker processes (ps-0, worker-0..2), methods interleaved round by
    round — with the TF 1.x gRPC peer's single steps and while loops of 100 among them when
    ``tf_python`` runs it; returns {row: [median per round]}."""
    g, init, train, loss, feed, xs, ys = build(tv, ps=True)
    x, y = list(feed)
    rng = np.random.default_rng(1)
    batches = [{x: rng.normal(size=xs.shape).astype(np.float32), y: ys} for _ in range(16)]
    spec = tv.train.ClusterSpec({"ps": 1, "worker": 3})
    sess = tv.Session(graph=g, cluster=spec, verbose=False)
    g5, x5, h5 = hop_graph(tv, [0, 1, 2, 0, 1, 2])
    g1, x1, h1 = hop_graph(tv, [0, 1])
    s5 = tv.Session(graph=g5, client=sess.client, cluster=spec, verbose=False)
    s1 = tv.Session(graph=g1, client=sess.client, cluster=spec, verbose=False)
    out: dict = {}
    tf = None
    try:
        if tf_python:
            try:
                tf = TFRounds(tf_python)
            except (OSError, RuntimeError, ValueError) as exc:
                print(f"  (TF peer rounds failed to start: {exc})")
        sess.run(init)
        it = iter(range(10 ** 9))

        def step(plane):
            o = tv.RunOptions(data_plane=plane)
            return lambda: sess.run([train, loss], batches[next(it) % 16], options=o)

        def k100(plane):
            o = tv.RunOptions(data_plane=plane)
            return lambda: sess.run([train, loss], feed, options=o, steps=100)
        methods = {
            "ps+wk dask": (step("dask"), 1),
            "ps+wk direct": (step("direct"), 1),
            "steps=100 dask": (k100("dask"), 100),
            "steps=100 direct": (k100("direct"), 100),
            "1 hop direct": (lambda: s1.run(h1, {x1: xs}), 1),
            "5 hops direct": (lambda: s5.run(h5, {x5: xs}), 1),
        }
        for fn, _ in methods.values():  # warm up: plans compiled and registered
            fn()
            fn()
        if tf is not None:
            methods["TF 1.x gRPC"] = (tf.step, 1)
            methods["TF 1.x gRPC k100"] = (tf.k100, 100)
        names = list(methods)
        for r in range(rounds):
            k = r % len(names)
            for name in names[k:] + names[:k]:
                fn, per = methods[name]
                reps = n if per == 1 else max(3, n // 25)
                if name.startswith("TF"):
                    out.setdefault(name, []).append(fn(reps))
                else:
                    out.setdefault(name, []).append(median_ms(fn, reps) / per)
        out["_loss"] = float(sess.run(loss, feed))
    finally:
        if tf is not None:
            out["_tf_loss"] = tf.close()
        s5.close()
        s1.close()
        sess.close()
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--skip-distributed", action="store_true")
    ap.add_argument("--tf-python", default="",
                    help="a Python whose environment imports tensorflow (TF 1.x peer)")
    args = ap.parse_args(argv)
    import tensorvm as tv
    _, _, _, _, _, xs, ys = build(tv)
    w = np.random.default_rng(0).normal(0, 0.1, (100, 10)).astype(np.float32)
    b = np.zeros(10, np.float32)
    np_ms = median_ms(lambda: numpy_step(xs, ys, w, b), args.steps)
    print(f"{'mode':<12} {'step ms':>9} {'steps=100 ms/step':>18} {'hops':>5} "
          f"{'dask floor ms':>14} {'x numpy':>8} {'x floor':>8}")
    print(f"{'numpy':<12} {np_ms:9.3f}")
    single, multi, floor, hops = run_mode(tv, None, args.steps)
    print(f"{'in-process':<12} {single:9.3f} {multi:18.3f} {hops:5d} {floor:14.3f} "
          f"{single / np_ms:8.1f} {single / floor:8.2f}")
    tf_local = peer_tf(args.tf_python, "local", args.steps)
    if args.skip_distributed:
        return
    rows = distributed_rows(tv, max(30, args.steps // 5), args.rounds, args.tf_python)
    med = {k: statistics.median(v) for k, v in rows.items() if not k.startswith("_")}
    tf_grpc = None
    if "TF 1.x gRPC" in med:  # measured in rounds interleaved with tensorvm's
        tf_grpc = {"step_ms": med.pop("TF 1.x gRPC"), "steps100_ms": med.pop("TF 1.x gRPC k100"),
                   "loss": rows.get("_tf_loss") or float("nan")}
    elif args.tf_python:
        tf_grpc = peer_tf(args.tf_python, "grpc", max(50, args.steps // 3))
    quoted = tf_grpc is None
    grpc_ms = tf_grpc["step_ms"] if tf_grpc else 3.87
    local_ms = tf_local["step_ms"] if tf_local else 0.443
    print(f"\ndistributed (ps-0, worker-0..2 worker processes; medians of {args.rounds} "
          "interleaved rounds, the TF gRPC peer's among them when it runs; ms per step)")
    for k, v in med.items():
        print(f"  {k:<18} {v:8.3f}   rounds: " + " ".join(f"{t:.3f}" for t in rows[k]))
    src = "quoted from issue 13" if quoted else "measured in this run"
    if tf_grpc:
        tf_rounds = rows.get("TF 1.x gRPC")
        print(f"  {'TF 1.x gRPC':<18} {tf_grpc['step_ms']:8.3f}   "
              + ("rounds: " + " ".join(f"{t:.3f}" for t in tf_rounds) + "; " if tf_rounds
                 else "(")
              + f"TF while_loop of 100: {tf_grpc['steps100_ms']:.3f} ms/step; loss "
              f"{tf_grpc['loss']:.6f}" + ("" if tf_rounds else ")"))
    if tf_local:
        print(f"  {'TF 1.x local':<18} {tf_local['step_ms']:8.3f}")
    print(f"targets (TF figures {src}):")
    print(f"  in-process / TF local      {single / local_ms:5.2f}x  (<= 0.5)")
    print(f"  ps+wk direct / TF gRPC     {med['ps+wk direct'] / grpc_ms:5.2f}x  (<= 1.0); "
          f"dask plane {med['ps+wk dask'] / grpc_ms:.2f}x")
    print(f"  steps=100 direct / TF gRPC {med['steps=100 direct'] / grpc_ms:5.2f}x  (<= 0.5)")
    print(f"  5 hops / 1 hop (direct)    {med['5 hops direct'] / med['1 hop direct']:5.2f}x  "
          "(<= 2)")


if __name__ == "__main__":
    main()
