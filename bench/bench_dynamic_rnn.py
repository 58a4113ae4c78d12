"""A forward+backward step of ``tv.nn.dynamic_rnn`` (BasicLSTMCell(64), batch 32, input depth
32) for T = 50, 200, 400 time steps: the TensorArray loop (``dynamic_rnn`` now) beside the
loop it replaced, which gathered outputs into a ``[T, batch, 64]`` loop variable with a one-hot
mask (``acc + hit * out``: O(T^2 * batch * depth) over the sequence, forward and backward).

Medians of interleaved rounds (the machine is shared: take the quietest of several runs).
Run: ``python -m bench.bench_dynamic_rnn [--reps N] [--lengths 50,200,400]``.
"""
from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

BATCH, DEPTH, UNITS = 32, 32, 64


def _onehot_rnn(tv, cell, x):
    """The replaced dynamic_rnn loop (time-major x): outputs accumulated with a one-hot mask."""
    steps = int(x.shape[0])
    state = cell.zero_state(BATCH, tv.float32)
    cell.build_for(DEPTH, tv.float32)  # variables outside the loop, as dynamic_rnn does
    acc0 = tv.zeros([steps, BATCH, UNITS], tv.float32)
    time_ids = tv.range(0, steps, 1, dtype=tv.int32)

    def body(t, acc, c, h):
        out, new = cell(tv.gather(x, t), tv.nn.rnn_cell.LSTMStateTuple(c, h))
        hit = tv.cast(tv.equal(time_ids, t), tv.float32)
        acc = acc + tv.reshape(hit, [-1, 1, 1]) * tv.expand_dims(out, 0)
        return [t + 1, acc, new.c, new.h]
    res = tv.while_loop(lambda t, *_: t < steps, body, [0, acc0, state.c, state.h])
    return res[1]


def build(tv, steps: int, impl: str):
    g = tv.Graph()
    with g.as_default():
        x = tv.placeholder(tv.float32, [BATCH, steps, DEPTH], name="x")
        cell = tv.nn.rnn_cell.BasicLSTMCell(UNITS)
        if impl == "tensor_array":
            out, _ = tv.nn.dynamic_rnn(cell, x, dtype=tv.float32)
        else:
            with tv.variable_scope("rnn"):
                out = _onehot_rnn(tv, cell, tv.transpose(x, [1, 0, 2]))
        loss = tv.reduce_sum(out * out)
        grads = tv.gradients(loss, tv.trainable_variables() + [x])
        sess = tv.Session(graph=g)
        sess.run(tv.global_variables_initializer())
    feed = {x: np.random.default_rng(0).normal(size=(BATCH, steps, DEPTH)).astype(np.float32)}
    return sess, [loss] + grads, feed


def main(argv=None):
    import tensorvm as tv
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--lengths", default="50,200,400")
    args = ap.parse_args(argv)
    impls = ("onehot", "tensor_array")
    print(f"dynamic_rnn forward+backward, BasicLSTMCell({UNITS}), batch {BATCH}, depth {DEPTH}"
          f" (median ms of {args.reps} interleaved rounds)")
    print(f"{'T':>5} {'one-hot (old)':>14} {'TensorArray':>12} {'ratio':>7}")
    for steps in (int(s) for s in args.lengths.split(",")):
        runs = {k: build(tv, steps, k) for k in impls}
        for sess, fetches, feed in runs.values():
            sess.run(fetches, feed)  # warm: plan, programs
        ms = {k: [] for k in impls}
        for _ in range(args.reps):
            for k in impls:
                sess, fetches, feed = runs[k]
                t0 = time.perf_counter()
                sess.run(fetches, feed)
                ms[k].append((time.perf_counter() - t0) * 1e3)
        a, b = (statistics.median(ms[k]) for k in impls)
        print(f"{steps:>5} {a:>14.1f} {b:>12.1f} {a / b:>6.1f}x", flush=True)
        for sess, _, _ in runs.values():
            sess.close()


if __name__ == "__main__":
    main()
