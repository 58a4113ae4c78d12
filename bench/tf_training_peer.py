"""TF 1.x peer of ``bench_training``: asynchronous logistic regression, 1 PS + 2 workers,
three processes over gRPC, run in an environment where ``tensorflow`` imports (not a
tensorvm dependency; e.g. a separate venv).

``python bench/tf_training_peer.py '<json options>'`` starts a PS server process and one
process per worker. Each worker process runs its own ``tf.distribute.Server`` (the
``worker`` task) and its own client loop on it (between-graph replication, as TF 1.x's
distributed training guide does): ``w`` and ``b`` on ``/job:ps/task:0`` by
``replica_device_setter``, the forward/backward pass on the worker, plain SGD, minibatches fed
from the worker's own rows (shards ``k, k + workers, ...``; step ``t`` reads rows
``t*B .. t*B+B-1`` modulo the row count, as ``tensorvm.train.replicas.cycling_batch``). The
data come from ``jobs/logreg.py`` (loaded by path: numpy only), so they are tensorvm's, bit for
bit.

The workers start together (after the chief initialised the variables and both built their
data). The chief (worker 0) fetches the global step with every step; once it reaches the next
multiple of ``eval_every`` it fetches ``w, b`` and evaluates the held-out log-loss in NumPy,
as ``tensorvm.jobs.logreg`` does on its client. Prints one JSON line:
``{"seconds_to_target", "global_step", "heldout_loss", "target_loss", "worker_steps"}``.

Options beside the model's: ``"workers"`` (worker processes, default 2) and ``"rate"``: no
evaluation; the chief times the global steps from ``rate`` to ``max_steps`` and prints
``{"steps_per_s", ...}`` (TF's steps/s with one worker against two on the same cores: the
peer of ``bench_training_elastic``'s join row).
"""
import importlib.util
import json
import os
import socket
import subprocess
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
# one thread each, as tensorvm's workers (Dask's nannies set these for them): TF's kernels
# (intra/inter op threads 1) and NumPy's BLAS in the chief's held-out evaluation
for _v in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ.setdefault(_v, "1")
HERE = os.path.dirname(os.path.abspath(__file__))


def _logreg():
    spec = importlib.util.spec_from_file_location(
        "tvm_logreg_data", os.path.join(HERE, "..", "jobs", "logreg.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _config(tf):
    """One thread for kernels, one for scheduling them (tensorvm's workers run one thread)."""
    return tf.ConfigProto(intra_op_parallelism_threads=1, inter_op_parallelism_threads=1)


def serve_ps(spec_json):
    import tensorflow.compat.v1 as tf
    tf.disable_v2_behavior()
    server = tf.distribute.Server(tf.train.ClusterSpec(json.loads(spec_json)), job_name="ps",
                                  task_index=0, config=_config(tf))
    server.join()


def worker(spec_json, task, opts_json):
    import numpy as np
    import tensorflow.compat.v1 as tf
    tf.disable_v2_behavior()
    o = json.loads(opts_json)
    task = int(task)
    spec = tf.train.ClusterSpec(json.loads(spec_json))
    n_workers = len(json.loads(spec_json)["worker"])
    server = tf.distribute.Server(spec, job_name="worker", task_index=task, config=_config(tf))
    lr_mod = _logreg()
    per = o["rows"] // o["shards"]
    mine = list(range(task, o["shards"], n_workers))
    X, Y = lr_mod._worker_data(o["seed"], mine, per, o["features"])
    n, B, chief = len(X), o["batch"], task == 0
    if chief:
        Xh, yh = lr_mod.make_shard(o["seed"], 10_000, o["holdout"], o["features"])
        Xh = Xh.astype(np.float64)  # once, as tensorvm.jobs.logreg does
        target = lr_mod.log_loss(Xh, yh, lr_mod.true_weights(o["seed"], o["features"]),
                                 lr_mod.B_TRUE) + o["tol"]
    with tf.Graph().as_default():
        with tf.device(tf.train.replica_device_setter(
                worker_device=f"/job:worker/task:{task}", cluster=spec)):
            gs = tf.train.get_or_create_global_step()
            x = tf.placeholder(tf.float32, [None, o["features"]])
            y = tf.placeholder(tf.float32, [None])
            w = tf.Variable(tf.zeros([o["features"]]), name="logreg_w")
            b = tf.Variable(0.0, name="logreg_b")
            logits = tf.reduce_sum(x * w, axis=1) + b
            loss = tf.reduce_mean(tf.nn.sigmoid_cross_entropy_with_logits(labels=y,
                                                                          logits=logits))
            train = tf.train.GradientDescentOptimizer(o["lr"]).minimize(loss, global_step=gs)
            uninit = tf.report_uninitialized_variables()
            init = tf.global_variables_initializer()
        with tf.Session(server.target, config=_config(tf)) as sess:
            if chief:
                sess.run(init)
            while len(sess.run(uninit)):
                time.sleep(0.01)
            print("ready", flush=True)
            sys.stdin.readline()  # "go": both workers start together
            t0 = time.perf_counter()
            next_check, t = o["eval_every"], 0
            t0_rate = step0 = None
            while True:
                k = (t * B + np.arange(B)) % n
                t += 1
                _, step = sess.run([train, gs], {x: X[k], y: Y[k]})
                if chief and o.get("rate") and t0_rate is None and step >= o["rate"]:
                    t0_rate, step0 = time.perf_counter(), step  # (after a warm-up)
                if step >= o["max_steps"]:
                    break
                if chief and not o.get("rate") and step >= next_check:
                    next_check = (step // o["eval_every"] + 1) * o["eval_every"]
                    wv, bv = sess.run([w, b])
                    held = lr_mod.log_loss(Xh, yh, wv, bv)
                    if held <= target:
                        print(json.dumps({"seconds_to_target": time.perf_counter() - t0,
                                          "global_step": int(step), "heldout_loss": held,
                                          "target_loss": target, "worker_steps": t}),
                              flush=True)
                        return
    if chief and o.get("rate"):
        print(json.dumps({"steps_per_s": (step - step0) / (time.perf_counter() - t0_rate),
                          "global_step": int(step), "worker_steps": t}), flush=True)
    elif chief:
        print(json.dumps({"seconds_to_target": None, "global_step": int(step),
                          "worker_steps": t}), flush=True)


def main(opts_json):
    spec = {"ps": [f"127.0.0.1:{_free_port()}"],
            "worker": [f"127.0.0.1:{_free_port()}"
                       for _ in range(json.loads(opts_json).get("workers", 2))]}
    sj = json.dumps(spec)
    ps = subprocess.Popen([sys.executable, __file__, "ps", sj])
    workers = [subprocess.Popen([sys.executable, __file__, "worker", sj, str(k), opts_json],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
               for k in range(len(spec["worker"]))]
    try:
        for p in workers:
            line = p.stdout.readline()
            if line.strip() != "ready":
                raise RuntimeError(f"TF worker did not start: {line!r}")
        for p in workers:  # go
            p.stdin.write("go\n")
            p.stdin.flush()
        out = workers[0].stdout.readline()
        print(out.strip(), flush=True)
    finally:
        for p in workers + [ps]:
            p.kill()
            p.wait()


if __name__ == "__main__":
    if sys.argv[1] == "ps":
        serve_ps(sys.argv[2])
    elif sys.argv[1] == "worker":
        worker(*sys.argv[2:5])
    else:
        main(sys.argv[1])
