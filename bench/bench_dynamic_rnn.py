"""A forward+backward step of ``tv.nn.dynamic_rnn`` (BasicLSTMCell(64), batch 32, input depth
32) for T = 50, 200, 400 time steps: the TensorArray loop (``dynamic_rnn`` now) beside the
loop it replaced, which gathered outputs into a ``[T, batch, 64]`` loop variable with a one-hot
mask (``acc + hit * out``: O(T^2 * batch * depth) over the sequence, forward and backward).

Medians of interleaved rounds (the machine is shared: take the quietest of several runs). With
``--tf-python`` (an environment where TensorFlow imports; not a tensorvm dependency) the same
step runs in TF 1.x's graph mode (``tf.compat.v1``, control flow v1) as a peer, in its own
process after tensorvm's rounds.
Run: ``python -m bench.bench_dynamic_rnn [--reps N] [--lengths 50,200,400] [--tf-python P]``.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
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


_TF_PEER = """
import json, statistics, sys, time
import numpy as np
import tensorflow.compat.v1 as tf
tf.disable_v2_behavior()
B, D, U, reps = {B}, {D}, {U}, {reps}
res = {{}}
for T in {lengths}:
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float32, [B, T, D])
        # TF's dynamic_rnn loop with BasicLSTMCell's math (TF 2.21's compat.v1 cells need
        # Keras 2): inputs unstacked into a TensorArray, outputs written to one.
        k = tf.get_variable("kernel", [D + U, 4 * U])
        b = tf.get_variable("bias", [4 * U], initializer=tf.zeros_initializer())
        xs = tf.TensorArray(tf.float32, T).unstack(tf.transpose(x, [1, 0, 2]))

        def body(t, ta, c, h):
            i, j, f, o = tf.split(tf.matmul(tf.concat([xs.read(t), h], 1), k) + b, 4, 1)
            c = c * tf.sigmoid(f + 1.0) + tf.sigmoid(i) * tf.tanh(j)
            h = tf.tanh(c) * tf.sigmoid(o)
            return t + 1, ta.write(t, h), c, h
        z = tf.zeros([B, U])
        _, ta, _, _ = tf.while_loop(lambda t, *_: t < T, body,
                                    [0, tf.TensorArray(tf.float32, T), z, z])
        out = tf.transpose(ta.stack(), [1, 0, 2])
        loss = tf.reduce_sum(out * out)
        grads = tf.gradients(loss, tf.trainable_variables() + [x])
        cfg = tf.ConfigProto(intra_op_parallelism_threads=1, inter_op_parallelism_threads=1)
        with tf.Session(config=cfg) as s:
            s.run(tf.global_variables_initializer())
            feed = {{x: np.random.default_rng(0).normal(size=(B, T, D)).astype(np.float32)}}
            s.run([loss] + grads, feed)
            ms = []
            for _ in range(reps):
                t0 = time.perf_counter(); s.run([loss] + grads, feed)
                ms.append((time.perf_counter() - t0) * 1e3)
            res[T] = statistics.median(ms)
print("RESULT " + json.dumps(res))
"""


def _tf_peer(python: str, lengths, reps: int) -> dict:
    code = _TF_PEER.format(B=BATCH, D=DEPTH, U=UNITS, reps=reps, lengths=list(lengths))
    out = subprocess.run([python, "-c", code], capture_output=True, text=True, timeout=900,
                         check=False)
    for line in out.stdout.splitlines():
        if line.startswith("RESULT "):
            return {int(k): v for k, v in json.loads(line[7:]).items()}
    raise RuntimeError(f"the TF peer failed: {out.stderr[-2000:]}")


def main(argv=None):
    import tensorvm as tv
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--lengths", default="50,200,400")
    ap.add_argument("--tf-python", default=None)
    args = ap.parse_args(argv)
    lengths = [int(s) for s in args.lengths.split(",")]
    impls = ("onehot", "tensor_array")
    print(f"dynamic_rnn forward+backward, BasicLSTMCell({UNITS}), batch {BATCH}, depth {DEPTH}"
          f" (median ms of {args.reps} interleaved rounds)")
    print(f"{'T':>5} {'one-hot (old)':>14} {'TensorArray':>12} {'ratio':>7}")
    rows = {}
    for steps in lengths:
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
        rows[steps] = b
        print(f"{steps:>5} {a:>14.1f} {b:>12.1f} {a / b:>6.1f}x", flush=True)
        for sess, _, _ in runs.values():
            sess.close()
    if args.tf_python:
        tf_ms = _tf_peer(args.tf_python, lengths, args.reps)
        print("TF 1.x peer (graph mode, one thread): " + ", ".join(
            f"T={t}: {tf_ms[t]:.1f} ms (tensorvm/TF {rows[t] / tf_ms[t]:.2f})" for t in lengths))


if __name__ == "__main__":
    main()
