"""Issue 27's graphs (loops that span devices), written once for TensorFlow 1.x and for
tensorvm: every builder takes the module as ``m`` (``tensorflow.compat.v1`` or ``tensorvm``),
which spell these calls alike. ``tests/data/make_tf_loop_fixtures.py`` runs them in TF and
writes ``tests/data/tf_loops_across_devices.json``; ``tests/test_loops_across_devices_tf.py``
runs them in tensorvm and compares. This module imports neither library.
"""
from __future__ import annotations

import numpy as np

PS, WORKER, WORKER1 = "/job:ps/task:0", "/job:worker/task:0", "/job:worker/task:1"
X = [0.1, -0.3, 0.7]  # the fed x
V = 0.25  # the PS variable v's initial value
ITERS = 7
LR = 0.5  # the RNN's SGD learning rate
RNN_STEPS = 5


def issue_example(m, x, v):
    """The issue's example as its text has it (``tv`` spelled ``m``): ``acc * 1.5 + v`` on
    the PS, the counter and ``tanh`` on the worker, seven iterations."""
    with m.device("/job:worker/task:0"):
        def body(i, acc):
            with m.device("/job:ps/task:0"):
                nxt = acc * 1.5 + v          # v lives on the PS
            with m.device("/job:worker/task:0"):
                return i + 1, m.tanh(nxt)
        _, w = m.while_loop(lambda i, acc: i < 7, body, [m.constant(0), x])
    return w


def three_device_loop(m, x, v, devices=(PS, WORKER, WORKER1), iters=ITERS):
    """The issue's loop over up to three devices (``m``: ``tensorflow.compat.v1`` or
    ``tensorvm``): ``acc * 1.5 + v`` on ``devices[0]``, the counter on ``devices[1]``, ``tanh``
    (and the loop) on ``devices[-1]``; with two devices the counter shares the last one."""
    def body(i, acc):
        with m.device(devices[0]):
            nxt = acc * 1.5 + v
        with m.device(devices[1]):
            i = i + 1
        with m.device(devices[-1]):
            return i, m.tanh(nxt)
    with m.device(devices[-1]):
        return m.while_loop(lambda i, acc: i < iters, body, [m.constant(0), x])[1]


LOOPS = {"issue_example": (issue_example, WORKER),
         "three_devices": (three_device_loop, WORKER1)}


def loop_graph(m, name: str, dtype, var_name: str = "v"):
    """``(x, fetches)``: ``v`` (a Variable on the PS, named ``var_name``), ``x`` (a placeholder
    of shape [3]), the loop ``name`` of :data:`LOOPS` and ``[w, loss, d loss/dx, d loss/dv]``
    with ``loss = sum(w * w)`` on the loop's device. Call it with ``m``'s graph as the
    default."""
    build, home = LOOPS[name]
    with m.device(PS):
        v = m.Variable(np.asarray(V, dtype.name), name=var_name)
    x = m.placeholder(dtype, [3], name="x")
    w = build(m, x, v)
    with m.device(home):
        loss = m.reduce_sum(w * w)
    return x, [w, loss] + list(m.gradients(loss, [x, v]))


def rnn_data():
    """The RNN's fixed batch (inputs ``[4, 6, 3]``, targets ``[4, 5]``) and its cell's initial
    weights (``kernel [3 + 5, 5]``, ``bias [5]``), float64."""
    rng = np.random.RandomState(0)
    xs, ys = rng.randn(4, 6, 3), rng.randn(4, 5)
    rng = np.random.RandomState(1)
    return xs, ys, rng.uniform(-0.6, 0.6, (8, 5)), rng.uniform(-0.1, 0.1, 5)


def rnn_graph(m, cell, dtype, scope=None):
    """``dynamic_rnn(cell, scope=scope)`` under ``replica_device_setter(ps_tasks=1)`` (the
    cell's weights on the PS, the loop on the worker), ``loss = mean((final_state - y)**2)``
    and an SGD step: ``(x, y, loss, train)``."""
    with m.device(m.train.replica_device_setter(ps_tasks=1, worker_device=WORKER)):
        x = m.placeholder(dtype, [4, 6, 3], name="x")
        y = m.placeholder(dtype, [4, 5], name="y")
        _, state = m.nn.dynamic_rnn(cell, x, dtype=dtype, scope=scope)
        loss = m.reduce_mean(m.square(state - y))
        train = m.train.GradientDescentOptimizer(LR).minimize(loss)
    return x, y, loss, train


def tanh_grid(dtype: str) -> np.ndarray:
    """Where tanh's error is measured: 200,001 points over [-4, 4] (beyond, tanh is +-1 to
    within an ulp in float32 and the loops' values stay inside)."""
    return np.linspace(-4, 4, 200_001).astype(dtype)


def ulps_off(got: np.ndarray, x: np.ndarray) -> float:
    """The largest error of ``got`` (a tanh of ``x``) in ulps of the exact value (NumPy's long
    double tanh, 64-bit mantissa, as the reference)."""
    ref = np.tanh(x.astype(np.longdouble))
    ulp = np.spacing(np.abs(ref).astype(x.dtype)).astype(np.longdouble)
    return float(np.max(np.abs(got.astype(np.longdouble) - ref) / ulp))


def cell_variables(m):
    """The cell's ``(kernel, bias)`` Variables, by the names TF gives them."""
    byname = {v.op.name.rsplit("/", 1)[-1]: v for v in m.trainable_variables()}
    return byname["kernel"], byname["bias"]
