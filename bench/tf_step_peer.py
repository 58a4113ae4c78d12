"""TF 1.x peer of ``bench_step``: the same training step in TensorFlow's graph mode, run in an
environment where ``tensorflow`` imports (not a tensorvm dependency; e.g. a separate venv).

``python bench/tf_step_peer.py local N`` — a local ``tf.Session``;
``python bench/tf_step_peer.py grpc N`` — a PS server and a worker server in two processes
(``tf.distribute.Server`` over gRPC on 127.0.0.1), the client in this third process, W and b
on ``/job:ps/task:0``, the rest on ``/job:worker/task:0`` (TF's between-graph PS setup).

Prints one JSON line: ``{"mode", "step_ms", "steps100_ms", "loss"}`` (medians; the loss after
the timed steps, a checksum against tensorvm's). Same graph and data as ``bench_step.build``.

``python bench/tf_step_peer.py rounds`` — the gRPC setup kept up while ``bench_step`` measures
its own rows, for rounds interleaved with them (so both sides see the same machine load): it
prints ``{"ready": true}``, then answers each line on stdin, ``step N`` (N single steps, a new
batch each) or ``k100 N`` (N while loops of 100 steps), with ``{"ms": median ms per step}``,
and ``quit`` with ``{"loss": ...}``.
"""
import json
import os
import socket
import statistics
import subprocess
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve(spec_json, job, task):
    import tensorflow.compat.v1 as tf
    tf.disable_v2_behavior()
    spec = tf.train.ClusterSpec(json.loads(spec_json))
    cfg = tf.ConfigProto(intra_op_parallelism_threads=1, inter_op_parallelism_threads=2)
    server = tf.distribute.Server(spec, job_name=job, task_index=int(task), config=cfg)
    server.join()


def build(tf, np, ps, wk):
    rng = np.random.default_rng(0)
    x = tf.placeholder(tf.float32, [64, 100], name="x")
    y = tf.placeholder(tf.float32, [64, 10], name="y")
    with tf.device(ps):
        w = tf.Variable(rng.normal(0, 0.1, (100, 10)).astype(np.float32), name="W")
        b = tf.Variable(np.zeros(10, np.float32), name="b")
    with tf.device(wk):
        logits = tf.matmul(x, w) + b
        loss = tf.reduce_mean(tf.nn.softmax_cross_entropy_with_logits_v2(
            labels=y, logits=logits))
        train = tf.train.GradientDescentOptimizer(0.1).minimize(loss)
        # steps=100 in one call: a while loop of 100 training steps (TF's own K-step form)
        def body(i):
            with tf.control_dependencies([tf.train.GradientDescentOptimizer(0.1)
                                          .minimize(loss)]):
                return i + 1
        loop100 = tf.while_loop(lambda i: i < 100, body, [tf.constant(0)])
    xs = rng.normal(size=(64, 100)).astype(np.float32)
    ys = np.eye(10, dtype=np.float32)[rng.integers(0, 10, 64)]
    return x, y, train, loss, loop100, xs, ys


def rounds():
    """The ``rounds`` mode (see the module docstring)."""
    import numpy as np
    import tensorflow.compat.v1 as tf
    tf.disable_v2_behavior()
    spec = {"ps": [f"127.0.0.1:{_free_port()}"], "worker": [f"127.0.0.1:{_free_port()}"]}
    procs = [subprocess.Popen([sys.executable, __file__, "serve", json.dumps(spec), job, "0"])
             for job in ("ps", "worker")]
    try:
        cfg = tf.ConfigProto(intra_op_parallelism_threads=1, inter_op_parallelism_threads=2)
        with tf.Graph().as_default():
            x, y, train, loss, loop100, xs, ys = build(tf, np, "/job:ps/task:0",
                                                       "/job:worker/task:0")
            with tf.Session("grpc://" + spec["worker"][0], config=cfg) as sess:
                sess.run(tf.global_variables_initializer())
                feed = {x: xs, y: ys}
                for _ in range(10):
                    sess.run([train, loss], feed)
                sess.run(loop100, feed)
                print(json.dumps({"ready": True}), flush=True)
                for line in sys.stdin:
                    cmd, *arg = line.split()
                    if cmd == "quit":
                        print(json.dumps({"loss": float(sess.run(loss, feed))}), flush=True)
                        return
                    times = []
                    for _ in range(int(arg[0])):
                        t = time.perf_counter()
                        if cmd == "step":
                            sess.run([train, loss], {x: xs + 0.0, y: ys})  # a new batch
                        else:
                            sess.run(loop100, feed)
                        times.append(time.perf_counter() - t)
                    per = 1 if cmd == "step" else 100
                    print(json.dumps({"ms": statistics.median(times) * 1e3 / per}), flush=True)
    finally:
        for p in procs:
            p.kill()


def main(mode, n):
    import numpy as np
    import tensorflow.compat.v1 as tf
    tf.disable_v2_behavior()
    procs = []
    if mode == "grpc":
        spec = {"ps": [f"127.0.0.1:{_free_port()}"], "worker": [f"127.0.0.1:{_free_port()}"]}
        for job in ("ps", "worker"):
            procs.append(subprocess.Popen([sys.executable, __file__, "serve", json.dumps(spec),
                                           job, "0"]))
        target = "grpc://" + spec["worker"][0]
        ps, wk = "/job:ps/task:0", "/job:worker/task:0"
    else:
        target, ps, wk = "", None, None
    try:
        cfg = tf.ConfigProto(intra_op_parallelism_threads=1, inter_op_parallelism_threads=2)
        with tf.Graph().as_default():
            x, y, train, loss, loop100, xs, ys = build(tf, np, ps, wk)
            with tf.Session(target, config=cfg) as sess:
                sess.run(tf.global_variables_initializer())
                feed = {x: xs, y: ys}
                for _ in range(10):
                    sess.run([train, loss], feed)
                times = []
                for _ in range(n):
                    t = time.perf_counter()
                    sess.run([train, loss], {x: xs + 0.0, y: ys})  # a new batch object
                    times.append(time.perf_counter() - t)
                k100 = []
                for _ in range(max(3, n // 20)):
                    t = time.perf_counter()
                    sess.run(loop100, feed)
                    k100.append((time.perf_counter() - t) / 100)
                final = float(sess.run(loss, feed))
    finally:
        for p in procs:
            p.kill()
    print(json.dumps({"mode": mode, "step_ms": statistics.median(times) * 1e3,
                      "steps100_ms": statistics.median(k100) * 1e3, "loss": final}))


if __name__ == "__main__":
    if sys.argv[1] == "serve":
        serve(*sys.argv[2:5])
    elif sys.argv[1] == "rounds":
        rounds()
    else:
        main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 200)
