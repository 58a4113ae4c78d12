"""GPU benchmark (issue 15): an MLP 4096-4096-4096 training step on batch 1024 (ReLU, softmax
cross-entropy, plain SGD), ms per step on the GPU, on the CPU, and the same step written by hand
in CuPy. Target: tensorvm on the GPU within 1.2x of hand-written CuPy.

    python -m bench.bench_gpu [--steps 20] [--rounds 5] [--cpu-steps 2]

Skips with a message when CuPy finds no GPU. Timings are medians of interleaved rounds; each
round ends in a fetch of the loss (a device sync), so queued GPU work is counted.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time

import numpy as np

D, B, C = 4096, 1024, 4096


def _no_gpu_reason():
    try:
        import cupy
        n = cupy.cuda.runtime.getDeviceCount()
    except Exception as e:  # noqa: BLE001 - ImportError or a CUDA library error
        return f"no GPU: {type(e).__name__}: {e}"
    return None if n > 0 else "no GPU: CuPy sees 0 devices"


def _data(seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((B, D)).astype(np.float32)
    y = rng.integers(0, C, B).astype(np.int64)
    w1 = (rng.standard_normal((D, D)) * (2.0 / D) ** 0.5).astype(np.float32)
    w2 = (rng.standard_normal((D, C)) * (1.0 / D) ** 0.5).astype(np.float32)
    return x, y, w1, w2


def tensorvm_step(device: str):
    """A session and a ``run(k)`` that runs k training steps and returns the last loss."""
    import tensorvm as tv
    x_np, y_np, w1_np, w2_np = _data()
    g = tv.Graph()
    with g.as_default():
        x = tv.placeholder(tv.float32, [B, D])
        y = tv.placeholder(tv.int64, [B])
        with tv.device(device):
            w1, w2 = tv.Variable(w1_np), tv.Variable(w2_np)
            h = tv.nn.relu(tv.matmul(x, w1))
            logits = tv.matmul(h, w2)
            loss = tv.reduce_mean(
                tv.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))
            train = tv.train.GradientDescentOptimizer(0.01).minimize(loss)
        init = tv.global_variables_initializer()
    sess = tv.Session(graph=g)
    sess.run(init)
    plan = sess.plan([loss, train], {x: x_np, y: y_np})
    if "GPU" in device and plan.fallbacks:
        print("\n".join(str(f) for f in plan.fallbacks), file=sys.stderr)
    feed = {x: x_np, y: y_np}

    def run(k):  # fed from the host every step, as a TF feed_dict; the loss read at the end
        for _ in range(k - 1):  # (like the hand step: a fetch each step would make every
            sess.run(train, feed)  # step wait for the device, which the hand step does not)
        return float(sess.run([loss, train], feed)[0])
    return sess, run


def cupy_step():
    """The same step by hand in CuPy (the feed uploaded every step, as tensorvm does)."""
    import cupy as cp
    x_np, y_np, w1_np, w2_np = _data()
    w1, w2 = cp.asarray(w1_np), cp.asarray(w2_np)
    lr = np.float32(0.01)

    def step():
        nonlocal w1, w2
        x, y = cp.asarray(x_np), cp.asarray(y_np)
        a = x @ w1
        h = cp.maximum(a, 0)
        logits = h @ w2
        m = logits.max(axis=1, keepdims=True)
        e = cp.exp(logits - m)
        s = e.sum(axis=1, keepdims=True)
        loss = (cp.log(s)[:, 0] + m[:, 0] - logits[cp.arange(B), y]).mean()
        dlogits = e / s
        dlogits[cp.arange(B), y] -= 1
        dlogits /= B
        dw2 = h.T @ dlogits
        dh = dlogits @ w2.T
        dh *= a > 0
        dw1 = x.T @ dh
        w1 = w1 - lr * dw1
        w2 = w2 - lr * dw2
        return loss

    def run(k):
        out = None
        for _ in range(k):
            out = step()
        return float(out)  # the sync
    return run


def _time(run, k):
    t = time.perf_counter()
    run(k)
    return (time.perf_counter() - t) * 1000 / k


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--cpu-steps", type=int, default=2, help="0 skips the CPU run")
    args = ap.parse_args(argv)
    why = _no_gpu_reason()
    if why is not None:
        print(f"bench_gpu: skipped ({why})")
        return 0
    _, tv_gpu = tensorvm_step("/gpu:0")
    hand = cupy_step()
    tv_gpu(2), hand(2)  # warm up: cuBLAS handles, kernel compilation, the plan cache
    rows = {"tensorvm GPU": [], "hand CuPy": []}
    for _ in range(args.rounds):  # interleaved rounds
        rows["tensorvm GPU"].append(_time(tv_gpu, args.steps))
        rows["hand CuPy"].append(_time(hand, args.steps))
    if args.cpu_steps:
        _, tv_cpu = tensorvm_step("/cpu:0")
        tv_cpu(1)
        rows["tensorvm CPU"] = [_time(tv_cpu, args.cpu_steps)]
    med = {k: statistics.median(v) for k, v in rows.items()}
    print(f"MLP {D}-{D}-{C}, batch {B}, ms/step (median of {args.rounds} rounds of "
          f"{args.steps} steps):")
    for k, v in med.items():
        print(f"  {k:14s} {v:9.2f}")
    ratio = med["tensorvm GPU"] / med["hand CuPy"]
    print(f"  tensorvm GPU / hand CuPy = {ratio:.2f}x (target <= 1.2x)"
          + (f"; GPU speed-up over CPU {med['tensorvm CPU'] / med['tensorvm GPU']:.1f}x"
             if "tensorvm CPU" in med else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
