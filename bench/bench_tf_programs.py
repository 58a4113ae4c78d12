"""The same small TF 1.x programs under tensorvm (in process) and under TF 1.x (issue 14, item 10).

Programs (synthetic data, fixed seeds, plain SGD; the source below runs unchanged with
``tf = tensorvm`` and with ``tf = tensorflow.compat.v1``):

* ``mlp`` — 784-256-256-10 ReLU MLP, batch 128, fed from NumPy each step;
* ``cnn`` — mnist_deep: conv 5x5x32 → max-pool 2 → conv 5x5x64 → max-pool 2 → fc 1024 → fc 10,
  batch 50, 28x28x1 inputs fed each step;
* ``queue`` — a queue pipeline: a QueueRunner thread enqueues one example per ``run`` (a
  counter mod 97 turned into a 64-vector), the training loop dequeues batches of 32 and runs a
  linear model on them.

Each program's *training loop* is timed (graph building, initialisation and one warm-up step
excluded); rounds alternate tensorvm and TF so a burst of other load hits both alike; the
table shows medians and the ratio tensorvm / TF, and a checksum (sum of the final weights) that
must agree. TF runs in a separate interpreter (never a dependency): ``--tf-python PATH`` names
one where ``tensorflow`` imports; without it, NumPy references of ``mlp`` and ``cnn`` stand in.

Threads (``--threads N``, default 1): TF gets N intra-op and N inter-op threads
(``ConfigProto``); tensorvm runs one BLAS thread per executing thread (:mod:`tensorvm.vm.kernels.threads`)
and, for N > 1, an intra-op pool of N threads. With 1 both run every kernel on one thread: the
fair comparison on a shared machine. ``--threads 0`` leaves TF its default (every core).
Besides wall time the table gives each side's CPU time per step (``time.process_time``), which
another process's load inflates less than the wall clock.
The checksums of ``cnn`` agree to ~1e-8 after one or two steps and drift apart (~1e-3 after
20) as float rounding flips ReLU/max-pool decisions; ``mlp`` and ``queue`` agree closely.

CPU kernels (``--kernels``): tensorvm runs its float convolutions and large matrix products on
its optional CPU backend (:mod:`tensorvm.vm.kernels.cpu_accel`): PyTorch's oneDNN/MKL kernels when
``torch`` imports (``pip install 'tensorvm[cpu-accel]'``), else the NumPy ones;
``--kernels numpy,torch`` runs a row for each, interleaved, against the same TF runs. The
table's header names the backend(s).

Run: ``python -m bench.bench_tf_programs [--tf-python /tmp/tfvenv/bin/python] [--rounds 3]
[--threads 1] [--kernels auto]``.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import threading
import time

import numpy as np

STEPS = {"mlp": 200, "cnn": 20, "queue": 100}


def _init(rng, shape, scale):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def build_mlp(tf):
    rng = np.random.default_rng(0)
    x = tf.placeholder(tf.float32, [None, 784])
    y = tf.placeholder(tf.int64, [None])
    w1 = tf.Variable(_init(rng, (784, 256), 0.05))
    b1 = tf.Variable(np.zeros(256, np.float32))
    w2 = tf.Variable(_init(rng, (256, 256), 0.05))
    b2 = tf.Variable(np.zeros(256, np.float32))
    w3 = tf.Variable(_init(rng, (256, 10), 0.05))
    h = tf.nn.relu(tf.matmul(x, w1) + b1)
    h = tf.nn.relu(tf.matmul(h, w2) + b2)
    logits = tf.matmul(h, w3)
    loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y,
                                                                         logits=logits))
    train = tf.train.GradientDescentOptimizer(0.05).minimize(loss)
    data = np.random.default_rng(1)
    xs = data.standard_normal((8, 128, 784)).astype(np.float32)
    ys = data.integers(0, 10, (8, 128)).astype(np.int64)
    feeds = [{x: xs[i], y: ys[i]} for i in range(8)]
    return train, loss, feeds, [w1, w2, w3]


def build_cnn(tf):
    rng = np.random.default_rng(0)
    x = tf.placeholder(tf.float32, [None, 28, 28, 1])
    y = tf.placeholder(tf.int64, [None])

    def conv_pool(h, k):
        h = tf.nn.relu(tf.nn.conv2d(h, k, strides=[1, 1, 1, 1], padding="SAME"))
        return tf.nn.max_pool(h, ksize=[1, 2, 2, 1], strides=[1, 2, 2, 1], padding="SAME")
    k1 = tf.Variable(_init(rng, (5, 5, 1, 32), 0.1))
    k2 = tf.Variable(_init(rng, (5, 5, 32, 64), 0.05))
    w1 = tf.Variable(_init(rng, (7 * 7 * 64, 1024), 0.02))
    w2 = tf.Variable(_init(rng, (1024, 10), 0.05))
    h = conv_pool(conv_pool(x, k1), k2)
    h = tf.nn.relu(tf.matmul(tf.reshape(h, [-1, 7 * 7 * 64]), w1))
    logits = tf.matmul(h, w2)
    loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y,
                                                                         logits=logits))
    train = tf.train.GradientDescentOptimizer(0.01).minimize(loss)
    data = np.random.default_rng(1)
    xs = data.standard_normal((4, 50, 28, 28, 1)).astype(np.float32)
    ys = data.integers(0, 10, (4, 50)).astype(np.int64)
    feeds = [{x: xs[i], y: ys[i]} for i in range(4)]
    return train, loss, feeds, [k1, k2, w1, w2]


def build_queue(tf):
    rng = np.random.default_rng(0)
    counter = tf.Variable(np.int32(0))
    example = tf.cast(tf.mod(tf.assign_add(counter, 1), 97), tf.float32) * tf.ones([64]) * 0.01
    q = tf.FIFOQueue(256, [tf.float32], shapes=[[64]])
    enqueue = q.enqueue([example])
    batch = q.dequeue_many(32)
    w = tf.Variable(_init(rng, (64, 1), 0.1))
    loss = tf.reduce_mean(tf.square(tf.matmul(batch, w) - 1.0))
    train = tf.train.GradientDescentOptimizer(0.01).minimize(loss)
    return train, loss, enqueue, q, [w]


def run_program(tf, name: str, steps: int, config=None) -> dict:
    """Build ``name`` in a fresh graph, run one warm-up step, time ``steps`` training steps."""
    g = tf.Graph()
    with g.as_default():
        if name == "queue":
            train, _, enqueue, q, weights = build_queue(tf)
        else:
            train, _, feeds, weights = (build_mlp if name == "mlp" else build_cnn)(tf)
        init = tf.global_variables_initializer()
        sess = tf.Session(graph=g, config=config)
        sess.run(init)
        if name == "queue":
            stop = threading.Event()

            def producer():  # a QueueRunner's loop: one enqueue per run
                try:
                    while not stop.is_set():
                        sess.run(enqueue)
                except Exception:  # noqa: BLE001, S110 - the queue was closed at the end
                    pass
            th = threading.Thread(target=producer, daemon=True)
            th.start()
            sess.run(train)
            t0, c0 = time.perf_counter(), time.process_time()
            for _ in range(steps):
                sess.run(train)
            dt, cpu = time.perf_counter() - t0, time.process_time() - c0
            stop.set()
            sess.run(q.close(cancel_pending_enqueues=True))
            th.join()
        else:
            sess.run(train, feeds[0])
            t0, c0 = time.perf_counter(), time.process_time()
            for i in range(steps):
                sess.run(train, feeds[(i + 1) % len(feeds)])
            dt, cpu = time.perf_counter() - t0, time.process_time() - c0
        vals = sess.run(weights)
        sess.close()
    # The queue program's checksum depends on which counter values each batch got: it is
    # fixed (one producer, FIFO), so both frameworks must agree.
    return {"seconds": dt, "cpu": cpu,
            "checksum": float(sum(np.float64(v).sum() for v in vals))}


# ---- NumPy references (no TF) -----------------------------------------------------------------
def numpy_mlp(steps: int) -> dict:
    """The same MLP step in NumPy: forward, softmax cross-entropy, backward, SGD."""
    rng = np.random.default_rng(0)
    ws = [_init(rng, (784, 256), 0.05), np.zeros(256, np.float32),
          _init(rng, (256, 256), 0.05), np.zeros(256, np.float32), _init(rng, (256, 10), 0.05)]
    data = np.random.default_rng(1)
    xs = data.standard_normal((8, 128, 784)).astype(np.float32)
    ys = data.integers(0, 10, (8, 128)).astype(np.int64)

    def step(x, y):
        w1, b1, w2, b2, w3 = ws
        a1 = x @ w1 + b1
        h1 = np.maximum(a1, 0)
        a2 = h1 @ w2 + b2
        h2 = np.maximum(a2, 0)
        z = h2 @ w3
        p = np.exp(z - z.max(1, keepdims=True))
        p /= p.sum(1, keepdims=True)
        p[np.arange(len(y)), y] -= 1
        dz = p / len(y)
        dh2 = (dz @ w3.T) * (a2 > 0)
        dh1 = (dh2 @ w2.T) * (a1 > 0)
        grads = [x.T @ dh1, dh1.sum(0), h1.T @ dh2, dh2.sum(0), h2.T @ dz]
        for w, gr in zip(ws, grads):
            w -= np.float32(0.05) * gr.astype(np.float32)
    step(xs[0], ys[0])
    t0 = time.perf_counter()
    for i in range(steps):
        step(xs[(i + 1) % 8], ys[(i + 1) % 8])
    return {"seconds": time.perf_counter() - t0, "cpu": None,
            "checksum": float(sum(np.float64(ws[i]).sum() for i in (0, 2, 4)))}


# ---- the TF side: a persistent child process ---------------------------------------------------
def _child() -> None:
    """Read program names from stdin, answer one JSON line each (run by the TF interpreter)."""
    import os
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import tensorflow.compat.v1 as tf
    tf.disable_eager_execution()
    tf.get_logger().setLevel("ERROR")
    print(json.dumps({"ready": tf.__version__ if hasattr(tf, "__version__") else "?"}),
          flush=True)
    threads = int(os.environ.get("BENCH_TF_THREADS", "0"))
    config = tf.ConfigProto(intra_op_parallelism_threads=threads,
                            inter_op_parallelism_threads=threads) if threads else None
    for line in sys.stdin:
        name = line.strip()
        if not name:
            break
        print(json.dumps(run_program(tf, name, STEPS[name], config)), flush=True)


class _TFChild:
    def __init__(self, python: str, threads: int = 0):
        import os
        env = dict(os.environ, BENCH_TF_THREADS=str(threads))
        self.p = subprocess.Popen([python, __file__, "--child"], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True, env=env)
        self.version = json.loads(self.p.stdout.readline())["ready"]

    def run(self, name: str) -> dict:
        self.p.stdin.write(name + "\n")
        self.p.stdin.flush()
        return json.loads(self.p.stdout.readline())

    def close(self) -> None:
        self.p.stdin.close()
        self.p.wait(timeout=60)


def _tv_config(tv, threads: int):
    """tensorvm's side of ``--threads``: N > 1 turns on its intra-op pool of N threads (big
    products cut by rows, one BLAS thread each); 1 is its default (one BLAS thread per
    executing thread, no pool)."""
    return tv.ConfigProto(intra_op_parallelism_threads=threads) if threads > 1 else None


def _kernel_backends(spec: str) -> list[str]:
    """``--kernels``: the CPU kernel backends to run tensorvm under (each its own row)."""
    from tensorvm.vm.kernels import cpu_accel
    names = [b.strip() for b in spec.split(",") if b.strip()]
    out = []
    for b in names:
        if b not in cpu_accel.BACKENDS:
            raise SystemExit(f"--kernels: unknown backend {b!r} (one of {cpu_accel.BACKENDS})")
        cpu_accel.set_backend(b)
        out.append(cpu_accel.backend())  # what "auto" / "torch" resolve to here
    cpu_accel.set_backend(None)
    return list(dict.fromkeys(out))


def _kernel_label(backend: str) -> str:
    if backend == "torch":
        import torch
        return f"torch {torch.__version__} (oneDNN convolutions, MKL products)"
    return "numpy (OpenBLAS)"


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tf-python", default=None, help="an interpreter where tensorflow imports")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", "--tf-threads", type=int, default=1, dest="threads",
                    help="threads for each framework: TF's intra- and inter-op pools, "
                         "tensorvm's intra-op pool (default 1, the fair single-thread "
                         "comparison; 0: TF's default, every core, against tensorvm's "
                         "default)")
    ap.add_argument("--programs", default="mlp,cnn,queue")
    ap.add_argument("--kernels", "--conv", default="auto", dest="kernels",
                    help="tensorvm's CPU kernel backends, comma-separated, each a row: auto "
                         "(torch when it imports), numpy, torch (default auto)")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        return _child()
    import tensorvm as tv
    from tensorvm.vm.kernels import cpu_accel
    progs = args.programs.split(",")
    backends = _kernel_backends(args.kernels)
    # rows: (label, program, kernel backend), one per backend, the TF column shared
    rows = [(f"{p}[{b}]" if len(backends) > 1 else p, p, b) for p in progs for b in backends]
    ref = _TFChild(args.tf_python, args.threads) if args.tf_python else None
    times: dict = {r[0]: {"tensorvm": [], "ref": []} for r in rows}
    cpus: dict = {r[0]: {"tensorvm": [], "ref": []} for r in rows}
    sums: dict = {r[0]: {} for r in rows}
    for _ in range(args.rounds):
        for p in progs:
            mine = [r for r in rows if r[1] == p]
            for label, _, b in mine:
                cpu_accel.set_backend(b)
                r = run_program(tv, p, STEPS[p], _tv_config(tv, args.threads))
                times[label]["tensorvm"].append(r["seconds"])
                cpus[label]["tensorvm"].append(r["cpu"])
                sums[label]["tensorvm"] = r["checksum"]
            cpu_accel.set_backend(None)
            if ref is not None:
                r = ref.run(p)
            elif p == "mlp":
                r = numpy_mlp(STEPS[p])
            else:
                continue
            for label, _, _ in mine:
                times[label]["ref"].append(r["seconds"])
                cpus[label]["ref"].append(r["cpu"])
                sums[label]["ref"] = r["checksum"]
    if ref is not None:
        ref.close()
    who = f"TF {ref.version}" if ref is not None else "NumPy"
    thr = f"{args.threads} thread{'s' * (args.threads > 1)} each" if args.threads else \
        "TF: every core, tensorvm: its default"
    print(f"training loops, ms per step: median (min) of {args.rounds} interleaved rounds, and "
          f"CPU ms per step (median); tensorvm in process vs {who}; {thr}")
    print("tensorvm's CPU kernels: " + ", ".join(_kernel_label(b) for b in backends))
    print(f"{'program':12} {'steps':>5} {'tensorvm':>15} {'cpu':>6} {who:>15} {'cpu':>6} "
          f"{'ratio':>6} {'(min)':>6}  checksums")

    def ms(v, n):
        return statistics.median(v) * 1e3 / n, min(v) * 1e3 / n

    for label, p, _ in rows:
        n = STEPS[p]
        tv_med, tv_min = ms(times[label]["tensorvm"], n)
        tv_cpu = statistics.median(cpus[label]["tensorvm"]) * 1e3 / n
        line = f"{label:12} {n:5d} {tv_med:8.2f} ({tv_min:5.2f}) {tv_cpu:6.2f} "
        if times[label]["ref"]:
            r_med, r_min = ms(times[label]["ref"], n)
            rc = [c for c in cpus[label]["ref"] if c is not None]
            r_cpu = f"{statistics.median(rc) * 1e3 / n:6.2f}" if rc else f"{'-':>6}"
            line += f"{r_med:8.2f} ({r_min:5.2f}) {r_cpu} {tv_med / r_med:6.2f} " \
                    f"{tv_min / r_min:6.2f}"
        else:
            line += f"{'-':>15} {'-':>6} {'-':>6} {'-':>6}"
        line += f"  {sums[label].get('tensorvm'):.6g} / {sums[label].get('ref', float('nan')):.6g}"
        print(line)


if __name__ == "__main__":
    main()
