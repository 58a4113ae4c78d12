"""Writes tests/data/tf_loops_across_devices.json: TensorFlow 1.x's own values for issue 27's
loops that span devices (run once, by hand, with TensorFlow; see make_tf_fixtures.py):

    /tmp/tfvenv/bin/python tests/data/make_tf_loop_fixtures.py

TF runs the graphs of tests/tf_loop_graphs.py in graph mode with TF 1.x's behaviour
(``disable_v2_behavior``: ref variables, control flow v1: Enter/Exit/NextIteration frames) on an
in-process cluster (``tf.train.Server`` per ps/worker task over gRPC, the session on worker 0's
target), so each value is what TF's own partitioned loop gives (``graph_partition.cc``: each
device a copy of the frame, the predicate sent to every device each iteration). The script
checks that the partition graphs really hold a loop frame on every device, and that TF's
one-device session (soft placement) gives the same values. TensorFlow is never a tensorvm
dependency: tests/test_loops_across_devices_tf.py reads the JSON with tensorvm alone.
"""
import json
import os
import socket
import sys

import numpy as np
import tensorflow.compat.v1 as tf

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
import tf_loop_graphs as lg  # noqa: E402

tf.disable_v2_behavior()
OUT = os.path.join(HERE, "tf_loops_across_devices.json")
DTYPES = {"float64": tf.float64, "float32": tf.float32}
FRAME_OPS = {"Enter", "Exit", "NextIteration", "LoopCond", "Merge", "Switch"}


def _port() -> int:
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


def cluster(workers: int):
    """An in-process TF cluster of one ps and ``workers`` worker tasks: the session target."""
    spec = tf.train.ClusterSpec({
        "ps": [f"localhost:{_port()}"],
        "worker": [f"localhost:{_port()}" for _ in range(workers)]})
    servers = [tf.train.Server(spec, job_name=job, task_index=t, start=True)
               for job, n in (("ps", 1), ("worker", workers)) for t in range(n)]
    cluster.keep.extend(servers)  # alive while the process runs
    return servers[1].target


cluster.keep = []


def _frames_by_device(run_metadata) -> dict:
    """Partition graph's device -> how many loop-frame ops it runs (TF's partitioned frame)."""
    out = {}
    for gd in run_metadata.partition_graphs:
        devs = {n.device for n in gd.node}
        dev = min(devs, key=len) if len(devs) == 1 else sorted(devs)[0]
        out[dev] = sum(n.op in FRAME_OPS for n in gd.node)
    return out


def _session(target):
    """A session on ``target``; with None, TF's local session on one device (every op's
    device string cleared first)."""
    if target is None:
        for op in tf.get_default_graph().get_operations():
            op._set_device("")
        return tf.Session()
    tf.Session.reset(target)  # the PS keeps variables between sessions, as TF's servers do
    return tf.Session(target)


def run_loop(name: str, dtype, target):
    g = tf.Graph()
    with g.as_default():
        x, fetches = lg.loop_graph(tf, name, dtype)
        meta = tf.RunMetadata()
        with _session(target) as s:
            s.run(tf.global_variables_initializer())
            vals = s.run(fetches, {x: np.asarray(lg.X, dtype.as_numpy_dtype)},
                         options=tf.RunOptions(output_partition_graphs=True),
                         run_metadata=meta)
    keys = ("w", "loss", "dx", "dv")
    return {k: np.asarray(v).tolist() for k, v in zip(keys, vals)}, _frames_by_device(meta)


class BasicRNNCellMath:
    """TF 1.x's ``BasicRNNCell`` (``tanh(W [x, h] + b)``, variables ``basic_rnn_cell/kernel``
    and ``/bias`` under dynamic_rnn's ``rnn`` scope) as a duck-typed cell: TF 2.21's compat.v1
    cells need Keras 2, and ``tf.nn.dynamic_rnn`` takes any object shaped like an RNNCell."""

    def __init__(self, units):
        self.units = units

    state_size = property(lambda self: self.units)
    output_size = property(lambda self: self.units)

    def zero_state(self, batch, dtype):
        return tf.zeros([batch, self.units], dtype)

    def __call__(self, inputs, state, scope=None):
        with tf.variable_scope("basic_rnn_cell", reuse=tf.AUTO_REUSE):
            depth = inputs.shape[1] + self.units
            k = tf.get_variable("kernel", [depth, self.units], inputs.dtype)
            b = tf.get_variable("bias", [self.units], inputs.dtype, tf.zeros_initializer())
        out = tf.tanh(tf.nn.bias_add(tf.matmul(tf.concat([inputs, state], 1), k), b))
        return out, out


def run_rnn(dtype, target):
    xs, ys, k0, b0 = lg.rnn_data()
    npd = dtype.as_numpy_dtype
    g = tf.Graph()
    with g.as_default():
        x, y, loss, train = lg.rnn_graph(tf, BasicRNNCellMath(5), dtype)
        kernel, bias = lg.cell_variables(tf)
        assert "ps" in kernel.device and "ps" in bias.device, (kernel.device, bias.device)
        with _session(target) as s:
            s.run(tf.global_variables_initializer())
            kernel.load(k0.astype(npd), s)
            bias.load(b0.astype(npd), s)
            feed = {x: xs.astype(npd), y: ys.astype(npd)}
            losses = [float(s.run([loss, train], feed)[0]) for _ in range(lg.RNN_STEPS)]
            k, b = s.run([kernel, bias])
    return {"losses": losses, "kernel": k.tolist(), "bias": b.tolist()}


def tanh_ulps(dtype) -> float:
    """TF's tanh error on :data:`tf_loop_graphs.TANH_GRID`, in ulps of the exact value (long
    double NumPy as the reference): the tests' tolerances start from it."""
    grid = lg.tanh_grid(dtype.name)
    with tf.Session() as s:
        got = s.run(tf.tanh(tf.constant(grid)))
    return lg.ulps_off(got, grid)


def _same(a, b) -> bool:
    return all(np.array_equal(a[k], b[k]) for k in a)


def main():
    targets = {"issue_example": cluster(1), "three_devices": cluster(2)}
    loops = {}
    for name, target in targets.items():
        loops[name] = {}
        for dname, dtype in DTYPES.items():
            vals, frames = run_loop(name, dtype, target)
            assert len(frames) == (2 if name == "issue_example" else 3), frames
            assert all(n > 0 for n in frames.values()), frames  # a frame copy on every device
            local, _ = run_loop(name, dtype, None)
            vals["one_device_equal"] = _same(vals, local)
            loops[name][dname] = vals
            loops[name]["partition_frame_ops"] = frames
    xs, ys, k0, b0 = lg.rnn_data()
    rnn = {"xs": xs.tolist(), "ys": ys.tolist(), "kernel0": k0.tolist(), "bias0": b0.tolist(),
           "lr": lg.LR}
    for dname, dtype in DTYPES.items():
        rnn[dname] = run_rnn(dtype, targets["issue_example"])
        rnn[dname]["one_device_equal"] = _same(rnn[dname], run_rnn(dtype, None))
    doc = {"made_by": "tests/data/make_tf_loop_fixtures.py",
           "tensorflow": f"{tf.__version__} (tensorflow.compat.v1, disable_v2_behavior)",
           "tanh_ulps": {d: tanh_ulps(t) for d, t in DTYPES.items()},
           "feeds": {"x": lg.X, "v": lg.V},
           "loops": loops, "rnn": rnn}
    with open(OUT, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    print(json.dumps({k: {d: loops[k][d]["one_device_equal"] for d in DTYPES} for k in loops}),
          {d: rnn[d]["one_device_equal"] for d in DTYPES})


if __name__ == "__main__":
    main()
