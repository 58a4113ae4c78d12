"""Issue 27's "Must show" against TensorFlow 1.x itself: the issue's loop (its body on the PS
and a worker), its gradient w.r.t. the fed ``x`` and the PS variable ``v``, the same loop with
its body over three devices, and a ``dynamic_rnn`` whose cell weights live on a PS trained by
SGD, each equal to what TF's own partitioned loop gave (``tests/data/tf_loops_across_devices.json``,
written by ``tests/data/make_tf_loop_fixtures.py`` on an in-process TF cluster; the graphs are
``tests/tf_loop_graphs.py``, built here by the same code), in process and on clusters of
worker processes on both data planes. TensorFlow is not needed to run these tests.

Tolerances are error bounds, not guesses: both systems run the same ops in the same order, so
they differ only where an op's result may differ (tanh: TF's Eigen approximation is within the
fixture's recorded ulps of the exact value, NumPy's within the ulps measured here) and in what
that difference does downstream (a first-order bound, :func:`loop_bounds`).
"""
from __future__ import annotations

import functools
import json
import os

import numpy as np
import pytest

import tensorvm as tv
import tf_loop_graphs as lg

with open(os.path.join(os.path.dirname(__file__), "data", "tf_loops_across_devices.json")) as f:
    TF = json.load(f)
DTYPES = ("float64", "float32")
KEYS = ("w", "loss", "dx", "dv")
PLANES = [tv.RunOptions(data_plane="dask"), tv.RunOptions(data_plane="direct")]


@functools.cache
def tanh_ulps(dtype: str) -> float:
    """How far TF's tanh and NumPy's may be apart, in ulps: each one's largest error from the
    exact tanh on the same grid (TF's recorded with the fixture, NumPy's measured here)."""
    grid = lg.tanh_grid(dtype)
    return TF["tanh_ulps"][dtype] + lg.ulps_off(np.tanh(grid), grid)


def loop_bounds(dtype: str, x=lg.X, v=lg.V, iters=lg.ITERS) -> dict:
    """First-order bounds on |tensorvm - TF| for the loop's ``w, loss, dx, dv`` (per element).

    Forward, per element: ``nxt = acc * 1.5 + v; y = tanh(nxt)``. Once two runs' ``acc``
    differ by D, each rounding may differ by up to one eps of its result and tanh by
    :func:`tanh_ulps`, so ``D_k = (1 - y^2)(1.5 D_{k-1} + eps (|1.5 acc| + |nxt|)) + u eps |y|``.
    Backward: ``dx = 2 y_n prod_k 1.5 (1 - y_k * y_k)``; ``1 - y*y`` cancels as ``|y|`` nears 1,
    so its relative error is ``(2 |y| D + eps y^2) / (1 - y^2)``, plus three roundings an
    iteration. ``dv`` sums the per-iteration gradients G (one more rounding each).
    """
    eps, u = float(np.finfo(dtype).eps), tanh_ulps(dtype)
    acc, d = np.asarray(x, np.float64), np.zeros(len(x))
    ys, ds = [], []
    for _ in range(iters):
        nxt = acc * 1.5 + v
        y = np.tanh(nxt)
        d = (1 - y * y) * (1.5 * d + eps * (np.abs(1.5 * acc) + np.abs(nxt))) + u * eps * abs(y)
        ys.append(y)
        ds.append(d)
        acc = y
    rel, g, terms = ds[-1] / np.abs(ys[-1]), 2 * ys[-1], []
    for y, dk in zip(reversed(ys), reversed(ds)):
        rel = rel + (2 * np.abs(y) * dk + eps * y * y) / (1 - y * y) + 3 * eps
        g = g * (1 - y * y)
        terms.append(g)
        g = g * 1.5
    terms = np.abs(np.array(terms))
    w = ys[-1]
    return {"w": ds[-1],
            "loss": np.sum(2 * np.abs(w) * ds[-1] + eps * w * w) + 2 * eps * np.sum(w * w),
            "dx": rel * np.abs(g),
            "dv": terms.sum() * (rel.max() + terms.size * eps)}


def check_loop(got, name: str, dtype: str) -> None:
    want, bound = TF["loops"][name][dtype], loop_bounds(dtype)
    for key, value in zip(KEYS, got):
        value = np.asarray(value)
        assert value.dtype == np.dtype(dtype), (key, value.dtype)
        diff = np.abs(value.astype(np.float64) - np.asarray(want[key]))
        assert np.all(diff <= bound[key]), f"{name} {dtype} {key}: |tv - TF| {diff} > {bound[key]}"


def test_the_fixture_is_tfs_partitioned_loop():
    # TF ran each loop with a frame copy on every device, and its one-device session agreed
    for name, ndev in (("issue_example", 2), ("three_devices", 3)):
        frames = TF["loops"][name]["partition_frame_ops"]
        assert len(frames) == ndev and min(frames.values()) > 0, frames
        assert all(TF["loops"][name][d]["one_device_equal"] for d in DTYPES)


def _np_loop(x, iters=lg.ITERS):
    w = np.asarray(x, np.float64)
    for _ in range(iters):
        w = np.tanh(w * 1.5 + lg.V)
    return w


def test_the_bounds_are_tight_enough_to_tell_a_wrong_loop():
    # float64: within about a thousand ulps where 1 - y*y cancels, a few elsewhere
    b, tf64 = loop_bounds("float64"), TF["loops"]["issue_example"]["float64"]
    assert np.max(b["dx"] / np.abs(tf64["dx"])) < 1e-12
    assert np.max(b["w"] / np.abs(tf64["w"])) < 1e-14
    # x fed through float32, or one iteration more, is far outside them
    for wrong in (_np_loop(np.float32(lg.X)), _np_loop(lg.X, lg.ITERS + 1)):
        assert np.all(np.abs(wrong - tf64["w"]) > 100 * b["w"])


def _loop_in_process(name: str, dtype: str):
    g = tv.Graph()
    with g.as_default():
        x, fetches = lg.loop_graph(tv, name, tv.as_dtype(dtype))
        with tv.Session() as s:
            s.run(tv.global_variables_initializer())
            return s.run(fetches, {x: np.asarray(lg.X, dtype)})


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", list(lg.LOOPS))
def test_the_loop_and_its_gradient_equal_tf_in_process(name, dtype):
    check_loop(_loop_in_process(name, dtype), name, dtype)


def _loop_on(cluster, name: str, dtype: str, opts_list) -> list:
    g = tv.Graph()
    with g.as_default():
        # a name of its own: the shared cluster's PS keeps variables between modules
        x, fetches = lg.loop_graph(tv, name, tv.as_dtype(dtype), var_name=f"v_tf_{dtype}")
        s = cluster.session(graph=g)
        s.run(tv.global_variables_initializer())
        return [s.run(fetches, {x: np.asarray(lg.X, dtype)}, options=o) for o in opts_list]


TV_CLUSTER = {"ps": 1, "worker": 1}
TV_CLUSTER_SHARED = True  # kills no worker; its variables have names of their own


@pytest.mark.cluster
@pytest.mark.parametrize("dtype", DTYPES)
def test_the_issue_example_equals_tf_on_a_cluster_on_both_planes(tv_cluster, dtype):
    inproc = _loop_in_process("issue_example", dtype)
    # twice per plane: the direct plane's registered partitions on the second run
    for got in _loop_on(tv_cluster, "issue_example", dtype, PLANES + PLANES):
        check_loop(got, "issue_example", dtype)
        for a, b in zip(got, inproc):
            np.testing.assert_array_equal(a, b)  # the same kernels in the same order


@pytest.mark.cluster
def test_the_body_over_three_devices_equals_tf_on_a_cluster_on_both_planes(cluster3):
    for dtype in DTYPES:
        for got in _loop_on(cluster3, "three_devices", dtype, PLANES):
            check_loop(got, "three_devices", dtype)


# ---- dynamic_rnn, its cell's weights on the PS, five SGD steps ------------------------------
def _rnn_train(session_fn, dtype: str = "float64", scope=None):
    """TF's batch and initial weights, ``RNN_STEPS`` SGD steps: (losses, kernel, bias)."""
    xs, ys, k0, b0 = lg.rnn_data()
    g = tv.Graph()
    with g.as_default():
        x, y, loss, train = lg.rnn_graph(tv, tv.nn.rnn_cell.BasicRNNCell(5), tv.as_dtype(dtype),
                                         scope)
        kernel, bias = lg.cell_variables(tv)
        assert "ps" in kernel.op.device and "ps" in bias.op.device
        s = session_fn(g)
        s.run(tv.global_variables_initializer())
        s.run([kernel.assign(k0.astype(dtype)), bias.assign(b0.astype(dtype))])
        feed = {x: xs.astype(dtype), y: ys.astype(dtype)}
        losses = [s.run([loss, train], feed)[0] for _ in range(lg.RNN_STEPS)]
        return np.array(losses), *s.run([kernel, bias])


def _rnn_amplification() -> float:
    """``1 / (1 - max |h|^2)`` over the forward pass with TF's first and last weights: how much
    tanh's gradient (``1 - h*h``) may magnify a difference in ``h``."""
    xs, _, _, _ = lg.rnn_data()
    worst = 0.0
    for k, b in ((TF["rnn"]["kernel0"], TF["rnn"]["bias0"]),
                 (TF["rnn"]["float64"]["kernel"], TF["rnn"]["float64"]["bias"])):
        h = np.zeros((4, 5))
        for t in range(xs.shape[1]):
            h = np.tanh(np.concatenate([xs[:, t], h], 1) @ np.asarray(k) + b)
            worst = max(worst, float(np.abs(h).max()))
    return 1 / (1 - worst * worst)


# Depth (dependent roundings) of one forward pass: 6 time steps of an 8-term dot product, a bias
# add and a tanh, then the loss (a difference, a square, a 20-term mean); an SGD step adds the
# backward pass (as deep) and the update (2). Each rounding may differ by up to tanh's ulps
# (the largest per-op difference) times the tanh-gradient amplification: a worst-case bound.
FORWARD_DEPTH = 6 * (8 + 1 + 1) + (1 + 1 + 20 + 1)
STEP_DEPTH = 2 * FORWARD_DEPTH + 2


def _rnn_rtol(depth: int) -> float:
    return float(np.finfo(np.float64).eps) * tanh_ulps("float64") * _rnn_amplification() * depth


def _check_rnn(losses, kernel, bias) -> None:
    want = TF["rnn"]["float64"]
    assert want["losses"][-1] < want["losses"][0] / 2  # it trains
    for k, (a, b) in enumerate(zip(losses, want["losses"])):
        np.testing.assert_allclose(a, b, rtol=_rnn_rtol(FORWARD_DEPTH + k * STEP_DEPTH), atol=0)
    rtol = _rnn_rtol(lg.RNN_STEPS * STEP_DEPTH)
    scale = np.abs(np.asarray(TF["rnn"]["kernel0"])).max()  # weights: relative to their size
    np.testing.assert_allclose(kernel, want["kernel"], rtol=0, atol=rtol * scale)
    np.testing.assert_allclose(bias, want["bias"], rtol=0, atol=rtol * scale)


def test_dynamic_rnn_with_weights_on_a_ps_trains_as_tf_in_process():
    _check_rnn(*_rnn_train(lambda g: tv.Session(graph=g)))


@pytest.mark.cluster
@pytest.mark.parametrize("plane", ["dask", "direct"])
def test_dynamic_rnn_with_weights_on_a_ps_trains_as_tf_on_a_cluster(tv_cluster, plane):
    got = _rnn_train(lambda g: tv_cluster.session(
        graph=g, config=tv.ConfigProto(data_plane=plane)), scope="rnn_tf")
    _check_rnn(*got)


# ---- the issue's other "Must show" items that had no test -----------------------------------
def _counted_loop(var_name):
    """The loop of :func:`tf_loop_graphs.three_device_loop` on the PS and a worker, its
    iteration count fed: ``(n, x, [w, d sum(w*w)/dv])``."""
    with tv.device(lg.PS):
        v = tv.Variable(np.float64(lg.V), name=var_name)
    n = tv.placeholder(tv.int32, [])
    x = tv.placeholder(tv.float64, [3])
    w = lg.three_device_loop(tv, x, v, (lg.PS, lg.WORKER), iters=n)
    with tv.device(lg.WORKER):
        loss = tv.reduce_sum(w * w)
    return n, x, [w, tv.gradients(loss, [v])[0]]


def _np_loop_and_dv(iters):
    """NumPy's ``w`` and ``d sum(w*w)/dv`` (the gradient into each iteration's ``nxt``,
    summed) for ``iters`` iterations."""
    ys, w = [], np.asarray(lg.X, np.float64)
    for _ in range(iters):
        w = np.tanh(w * 1.5 + lg.V)
        ys.append(w)
    g, dv = 2 * w, 0.0
    for y in reversed(ys):
        g = g * (1 - y * y)
        dv += g.sum()
        g = g * 1.5
    return w, dv


@pytest.mark.cluster
@pytest.mark.slow
def test_a_loop_of_10000_iterations_across_two_worker_processes(tv_cluster):
    iters = 10_000
    g = tv.Graph()
    with g.as_default():
        n, x, fetches = _counted_loop("v_10k")
        s = tv_cluster.session(graph=g)
        s.run(tv.global_variables_initializer())
        want_w, want_dv = _np_loop_and_dv(iters)
        for opts in PLANES:
            w, dv = s.run(fetches, {n: iters, x: lg.X}, options=opts)
            np.testing.assert_array_equal(w, want_w)  # the same kernels in the same order
            # dv adds 3 * iters gradients (all positive here) in an order of its own: each
            # addition may round by an eps of the running sum
            np.testing.assert_allclose(dv, want_dv, rtol=3 * iters * np.finfo(float).eps, atol=0)


@pytest.mark.cluster
def test_on_the_dask_plane_a_loop_is_the_same_tasks_however_many_iterations(tv_cluster):
    # one task per device per loop (the shards coordinate through the rendezvous), never one
    # Dask task per iteration: 3 and 300 iterations run the same number of tasks
    from distributed import get_task_stream
    g = tv.Graph()
    with g.as_default():
        n, x, fetches = _counted_loop("v_tasks")
        s = tv_cluster.session(graph=g, config=tv.ConfigProto(data_plane="dask"))
        s.run(tv.global_variables_initializer())
        s.run(fetches, {n: 1, x: lg.X})  # the plan compiled and its first run done
        tasks = {}
        for iters in (3, 300):
            with get_task_stream(client=tv_cluster.client) as ts:
                w, _ = s.run(fetches, {n: iters, x: lg.X})
            np.testing.assert_array_equal(w, _np_loop_and_dv(iters)[0])
            tasks[iters] = len(ts.data)
    assert 0 < tasks[3] == tasks[300], tasks
