"""Loops that span devices (issue 27): a ``while_loop`` whose cond and body run on several
devices, each device running its part of every iteration. Checked against NumPy
re-implementations of the same loop, against the same loop on one device, and gradients
against central differences (tests/opcheck.py); against TensorFlow 1.x's own values in
tests/test_loops_across_devices_tf.py."""
from __future__ import annotations

import os
import time

import numpy as np
import pytest

import tensorvm as tv
import tf_loop_graphs as lg
from opcheck import numeric_grad

PS, WORKER, WORKER1 = "/job:ps/task:0", "/job:worker/task:0", "/job:worker/task:1"
X = np.array([0.1, -0.3, 0.7])


def _issue_loop(x, v, devices=(PS, WORKER), iters=7):
    """The issue's example: ``acc * 1.5 + v`` on ``devices[0]``, tanh on ``devices[-1]``
    (with three devices the counter runs on the middle one); built by the code that builds
    it for TF too (:func:`tf_loop_graphs.three_device_loop`)."""
    return lg.three_device_loop(tv, x, v, devices, iters)


def _np_loop(x, v=0.25, iters=7):
    for _ in range(iters):
        x = np.tanh(x * 1.5 + v)
    return x


def _run(build, feed=X, devices=(PS, WORKER), session=tv.Session):
    g = tv.Graph()
    with g.as_default():
        with tv.device(devices[0]):
            v = tv.Variable(np.float64(0.25), name="v")
        x = tv.placeholder(tv.float64, [3])
        out = build(x, v, devices)
        with session() as s:
            s.run(tv.global_variables_initializer())
            return s.run(out, {x: feed})


def test_the_issue_example_runs_and_equals_numpy_and_the_one_device_loop():
    got = _run(_issue_loop)
    one = _run(_issue_loop, devices=(WORKER, WORKER))
    np.testing.assert_array_equal(got, one)  # the same kernels in the same order
    np.testing.assert_allclose(got, _np_loop(X), rtol=1e-15, atol=0)


def test_a_body_over_three_devices():
    got = _run(_issue_loop, devices=(PS, WORKER, WORKER1))
    np.testing.assert_array_equal(got, _run(_issue_loop, devices=(WORKER,) * 3))
    np.testing.assert_allclose(got, _np_loop(X), rtol=1e-15, atol=0)


def test_the_loop_op_sits_on_its_devices_plan():
    g = tv.Graph()
    with g.as_default():
        with tv.device(PS):
            v = tv.Variable(np.float64(0.25))
        w = _issue_loop(tv.constant(X), v)
        assert "worker" in w.op.device
        assert w.op.attrs["body"].program(w.op.device)[0].devices == (
            "/job:ps/replica:0/task:0/device:CPU:0", "/job:worker/replica:0/task:0/device:CPU:0")


def _grad_loop(x, v, devices):
    w = _issue_loop(x, v, devices)
    with tv.device(devices[-1]):
        loss = tv.reduce_sum(w * w)
    return [loss] + tv.gradients(loss, [x, v])


@pytest.mark.parametrize("devices", [(PS, WORKER), (PS, WORKER, WORKER1)],
                         ids=["2dev", "3dev"])
def test_the_gradient_matches_central_differences_and_the_one_device_loop(devices):
    loss, dx, dv = _run(_grad_loop, devices=devices)
    one = _run(_grad_loop, devices=(WORKER,) * len(devices))
    np.testing.assert_array_equal(dx, one[1])
    np.testing.assert_array_equal(dv, one[2])

    def f(x, v=0.25):
        return float(np.sum(_np_loop(x, v) ** 2))
    np.testing.assert_allclose(loss, f(X), rtol=1e-15)
    np.testing.assert_allclose(dx, numeric_grad(f, X), rtol=1e-6, atol=1e-9)
    dv_num = (f(X, 0.25 + 1e-6) - f(X, 0.25 - 1e-6)) / 2e-6
    np.testing.assert_allclose(dv, dv_num, rtol=1e-6)


def test_a_variable_on_another_device_that_the_loop_updates_is_read_each_iteration():
    g = tv.Graph()
    with g.as_default():
        with tv.device(PS):
            v = tv.Variable(0.0, name="v")

        def body(k, acc):
            with tv.device(PS):
                upd = v.assign_add(1.0)
            with tv.device(WORKER):
                with tv.control_dependencies([upd]):
                    seen = tv.identity(v)  # read after this iteration's update
                return k + 1, acc + seen
        with tv.device(WORKER):
            k, acc = tv.while_loop(lambda k, acc: k < 4, body, [0, 0.0])
        with tv.Session() as s:
            s.run(tv.global_variables_initializer())
            assert s.run([k, acc]) == [4, 1.0 + 2 + 3 + 4]
            assert s.run(v) == 4.0
            assert s.run(acc) == 5.0 + 6 + 7 + 8  # the loop reads the variable as it is now


# ---- on a {"ps": 1, "worker": 1} cluster of processes, both data planes ----------------------
TV_CLUSTER = {"ps": 1, "worker": 1}
TV_CLUSTER_SHARED = True  # kills no worker, leaves no state
PLANES = [tv.RunOptions(data_plane="dask"), tv.RunOptions(data_plane="direct")]


@pytest.mark.cluster
def test_the_issue_example_on_a_cluster_on_both_planes(tv_cluster, g):
    with tv.device(PS):
        v = tv.Variable(np.float64(0.25), name="v")
    x = tv.placeholder(tv.float64, [3])
    w = _issue_loop(x, v)
    s = tv_cluster.session()
    s.run(tv.global_variables_initializer())
    want = _np_loop(X)
    for opts in PLANES + PLANES:  # twice: the direct plane's registered partitions too
        np.testing.assert_allclose(s.run(w, {x: X}, options=opts), want, rtol=1e-15, atol=0)


@pytest.mark.cluster
def test_on_a_cluster_each_device_runs_its_part_each_iteration(tv_cluster, g):
    # The PS part updates a PS variable that exists in the PS process only, and the worker
    # reads it after the update each iteration: the values prove where each part ran.
    with tv.device(PS):
        v = tv.Variable(0.0, name="v_count")
    with tv.device(WORKER):
        calls = tv.Variable(0, name="w_calls")

    def body(k, acc):
        with tv.device(PS):
            upd = v.assign_add(1.0)
        with tv.device(WORKER):
            c = calls.assign_add(1)
            with tv.control_dependencies([upd]):
                seen = tv.identity(v)
            return k + 1 + c * 0, acc + seen
    with tv.device(WORKER):
        k, acc = tv.while_loop(lambda k, acc: k < 4, body, [0, 0.0])
    s = tv_cluster.session()
    s.run(tv.global_variables_initializer())
    base = 0.0
    for n, opts in enumerate(PLANES, 1):
        assert s.run([k, acc], options=opts) == [4, 4 * base + 1.0 + 2 + 3 + 4]
        base += 4
        assert s.run([v, calls]) == [base, 4 * n]


@pytest.mark.cluster
def test_the_gradient_on_a_cluster_on_both_planes(tv_cluster, g):
    with tv.device(PS):
        v = tv.Variable(np.float64(0.25), name="v_g")
    x = tv.placeholder(tv.float64, [3])
    fetches = _grad_loop(x, v, (PS, WORKER))
    s = tv_cluster.session()
    s.run(tv.global_variables_initializer())
    want = _run(_grad_loop, devices=(PS, WORKER))  # in process (checked against differences)
    for opts in PLANES + PLANES:
        got = s.run(fetches, {x: X}, options=opts)
        for a, b in zip(got, want):
            np.testing.assert_allclose(a, b, rtol=1e-15, atol=0)


# ---- dynamic_rnn with its cell's weights on a PS (replica_device_setter) ---------------------
def _rnn_losses(session_fn, on_ps: bool, steps: int = 5):
    """Losses of ``steps`` SGD steps of a BasicRNNCell over a fixed batch; the weights on the
    PS (``replica_device_setter``) or on the worker."""
    rng = np.random.RandomState(0)
    xs, ys = rng.randn(4, 6, 3), rng.randn(4, 5)
    g = tv.Graph()
    with g.as_default():
        tv.set_random_seed(7)
        dev = tv.train.replica_device_setter(ps_tasks=1, worker_device=WORKER) if on_ps \
            else WORKER
        with tv.device(dev):
            x = tv.placeholder(tv.float64, [4, 6, 3])
            y = tv.placeholder(tv.float64, [4, 5])
            _, state = tv.nn.dynamic_rnn(tv.nn.rnn_cell.BasicRNNCell(5), x, dtype=tv.float64)
            loss = tv.reduce_mean(tv.square(state - y))
            train = tv.train.GradientDescentOptimizer(0.5).minimize(loss)
        assert all(("ps" in v.op.device) == on_ps for v in tv.global_variables())
        s = session_fn(g)
        s.run(tv.global_variables_initializer())
        return np.array([s.run([loss, train], {x: xs, y: ys})[0] for _ in range(steps)])


# Each loss is a float64 sum over 6 time steps of 8-term dot products, after 5 SGD steps:
# a few hundred roundings of at most 2**-53 relative each; 1e-13 bounds them with margin.
RNN_RTOL = 1e-13


def test_dynamic_rnn_with_weights_on_a_ps_trains_as_on_one_device():
    want = _rnn_losses(lambda g: tv.Session(graph=g), on_ps=False)
    got = _rnn_losses(lambda g: tv.Session(graph=g), on_ps=True)
    assert want[-1] < want[0] / 2  # it trains
    np.testing.assert_allclose(got, want, rtol=RNN_RTOL, atol=0)


@pytest.mark.cluster
def test_dynamic_rnn_with_weights_on_a_ps_trains_on_a_cluster(tv_cluster):
    want = _rnn_losses(lambda g: tv.Session(graph=g), on_ps=False)
    for plane in ("dask", "direct"):
        got = _rnn_losses(lambda g: tv_cluster.session(
            graph=g, config=tv.ConfigProto(data_plane=plane)), on_ps=True)
        np.testing.assert_allclose(got, want, rtol=RNN_RTOL, atol=0)


# ---- the passes, on literal graphs -----------------------------------------------------------
class _FakeBody:
    """A loop body whose frame spans ``devs`` (what Func.frame_devices answers)."""

    def __init__(self, devs):
        self.devs = devs

    def frame_devices(self, device, cond):
        return tuple(sorted(set(self.devs) | {device})) if len(self.devs) > 1 else ()


def _loop_graph(devs):
    from tensorvm.framework.graph_def import Node
    return {"x": Node("x", "Const"),
            "v": Node("v", "Const"),
            "w": Node("w", "While", (("x", 0), ("v", 0)), (),
                      {"body": _FakeBody(devs), "cond": object()}, num_outputs=2),
            "y": Node("y", "Neg", (("w", 0),)),
            "z": Node("z", "Neg", (("x", 0),))}


def test_split_frames_gives_each_other_device_a_shard_reading_the_loop_inputs():
    from tensorvm.passes.partition import split_frames
    nodes = _loop_graph(("/A", "/B", "/C"))
    devices = {"x": "/A", "v": "/B", "w": "/A", "y": "/A", "z": "/B"}
    out, devs = split_frames(nodes, devices)
    assert list(out) == ["x", "v", "w", "w/frame/B", "w/frame/C", "y", "z"]
    assert out["w"].attrs["frame_devices"] == ("/A", "/B", "/C") and "home" not in out["w"].attrs
    for dev in ("/B", "/C"):
        shard = out[f"w/frame{dev}"]
        assert (shard.type, shard.inputs, shard.num_outputs, devs[shard.name]) == (
            "WhileShard", nodes["w"].inputs, 0, dev)
        assert shard.attrs["home"] == "/A"
    one = _loop_graph(("/A",))
    assert split_frames(one, devices) == (one, devices)  # a loop on one device: unchanged


def test_stage_puts_each_frame_op_in_a_task_of_its_own():
    from tensorvm.passes.partition import partition
    from tensorvm.passes.stage import stage
    devices = {"x": "/A", "v": "/B", "w": "/A", "y": "/A", "z": "/B"}
    part = partition(_loop_graph(("/A", "/B")), devices, set())
    st = stage(part)
    frame_ops = {"w", "w/frame/B"}
    for f in frame_ops:  # alone in its (device, stage)
        assert st[f] % 2 == 1
        assert [n for n, node in part.nodes.items() if node.device == part.nodes[f].device
                and st[n] == st[f] and node.type not in ("_Send", "_Recv")] == [f]
    assert st["y"] > st["w"]  # the loop's consumer after it
    # v (on /B) reaches the loop on /A before the loop's task, not inside the /B shard's
    assert st["v"] < st["w/frame/B"] and st["v"] < st["w"]


def _counter_on_ps(x, v, devices):
    """A loop whose PS part (the counter and a shift from it) has no gradient: its gradient
    runs on the worker only, from the worker's tape of the sharded loop."""
    def body(k, acc):
        with tv.device(PS):
            k = k + 1
            shift = tv.cast(k, tv.float64) * 0.1
        with tv.device(WORKER):
            return k, tv.tanh(acc * 1.5 + shift)
    with tv.device(WORKER):
        w = tv.while_loop(lambda k, acc: k < 5, body, [tv.constant(0), x])[1]
        loss = tv.reduce_sum(w * w)
    return [loss, tv.gradients(loss, [x])[0]]


def _np_counter_loss(x):
    for k in range(1, 6):
        x = np.tanh(x * 1.5 + 0.1 * k)
    return float(np.sum(x * x))


def test_a_loop_whose_gradient_runs_on_one_device():
    loss, dx = _run(_counter_on_ps)
    np.testing.assert_allclose(loss, _np_counter_loss(X), rtol=1e-15)
    np.testing.assert_allclose(dx, numeric_grad(_np_counter_loss, X), rtol=1e-6, atol=1e-9)


@pytest.mark.cluster
def test_a_loop_whose_gradient_runs_on_one_device_on_a_cluster(tv_cluster, g):
    with tv.device(PS):
        v = tv.Variable(np.float64(0.25), name="v_c")
    x = tv.placeholder(tv.float64, [3])
    fetches = _counter_on_ps(x, v, (PS, WORKER))
    s = tv_cluster.session()
    s.run(tv.global_variables_initializer())
    want = _run(_counter_on_ps)
    for opts in PLANES:
        got = s.run(fetches, {x: X}, options=opts)
        for a, b in zip(got, want):
            np.testing.assert_allclose(a, b, rtol=1e-15, atol=0)


@pytest.mark.cluster
def test_a_body_over_three_devices_and_its_gradient_on_a_cluster(cluster3, g):
    with tv.device(PS):
        v = tv.Variable(np.float64(0.25), name="v3")
    x = tv.placeholder(tv.float64, [3])
    fetches = _grad_loop(x, v, (PS, WORKER, WORKER1))
    s = cluster3.session()
    s.run(tv.global_variables_initializer())
    want = _run(_grad_loop, devices=(PS, WORKER, WORKER1))  # in process (vs differences)
    for opts in PLANES:
        got = s.run(fetches, {x: X}, options=opts)
        for a, b in zip(got, want):
            np.testing.assert_allclose(a, b, rtol=1e-15, atol=0)


def _fails_at_3(k, fail):
    if fail and k == 3:
        raise ValueError("the PS part fails at iteration 3")
    return k


@pytest.mark.cluster
def test_an_error_in_one_devices_part_fails_the_step_and_the_next_runs(tv_cluster, g):
    fail = tv.placeholder(tv.bool, [])

    def body(k, acc):
        with tv.device(PS):
            k = tv.reshape(tv.py_func(_fails_at_3, [k, fail], tv.int32), [])
        with tv.device(WORKER):
            return k + 1, acc * 2.0
    with tv.device(WORKER):
        k, acc = tv.while_loop(lambda k, acc: k < 6, body, [0, 1.0])
    s = tv_cluster.session()
    for opts in PLANES + PLANES:
        with pytest.raises(tv.errors.InvalidArgumentError, match="fails at iteration 3"):
            s.run([k, acc], {fail: True}, options=opts)
        assert s.run([k, acc], {fail: False}, options=opts) == [6, 64.0]


@pytest.mark.cluster
def test_two_loops_across_devices_in_one_step(tv_cluster, g):
    # each device runs its copies of the two loops in one order, in tasks of their own
    with tv.device(PS):
        v = tv.Variable(np.float64(0.25), name="v2")
    x = tv.placeholder(tv.float64, [3])
    a = _issue_loop(x, v)
    b = _issue_loop(x * 0.5, v, devices=(WORKER, PS), iters=4)
    s = tv_cluster.session()
    s.run(tv.global_variables_initializer())
    for opts in PLANES + PLANES:
        got_a, got_b = s.run([a, b], {x: X}, options=opts)
        np.testing.assert_allclose(got_a, _np_loop(X), rtol=1e-15, atol=0)
        np.testing.assert_allclose(got_b, _np_loop(X * 0.5, iters=4), rtol=1e-15, atol=0)


def test_stage_orders_the_copies_of_two_loops():
    from tensorvm.framework.graph_def import Node
    from tensorvm.passes.partition import partition
    from tensorvm.passes.stage import stage
    nodes = _loop_graph(("/A", "/B"))
    nodes["w2"] = Node("w2", "While", (("x", 0),), (), {"body": _FakeBody(("/A", "/B")),
                                                         "cond": object()}, num_outputs=2)
    devices = {"x": "/A", "v": "/B", "w": "/A", "y": "/A", "z": "/B", "w2": "/B"}
    st = stage(partition(nodes, devices, set()))
    first = ["w", "w/frame/B"]
    second = ["w2", "w2/frame/A"]
    assert max(st[f] for f in first) < min(st[f] for f in second)
    assert len({st[f] for f in first + second}) == 4  # no two copies share a stage


# ---- a loop across devices nested in another's body ------------------------------------------
def _nested(x, v, devices):
    def inner(j, a):
        with tv.device(PS):
            a = a * 0.9 + v
        with tv.device(WORKER):
            return j + 1, tv.sin(a)

    def outer(i, acc):
        with tv.device(WORKER):
            return i + 1, tv.while_loop(lambda j, a: j < 3, inner, [0, acc])[1]
    with tv.device(WORKER):
        w = tv.while_loop(lambda i, a: i < 4, outer, [0, x])[1]
        loss = tv.reduce_sum(w * w)
    return [loss, tv.gradients(loss, [x])[0]]


def _np_nested_loss(x):
    for _ in range(12):
        x = np.sin(x * 0.9 + 0.25)
    return float(np.sum(x * x))


def test_a_loop_across_devices_nested_in_another():
    loss, dx = _run(_nested)
    np.testing.assert_allclose(loss, _np_nested_loss(X), rtol=1e-14)
    np.testing.assert_allclose(dx, numeric_grad(_np_nested_loss, X), rtol=1e-6, atol=1e-9)


@pytest.mark.cluster
def test_a_nested_loop_across_devices_on_a_cluster(tv_cluster, g):
    with tv.device(PS):
        v = tv.Variable(np.float64(0.25), name="v_n")
    x = tv.placeholder(tv.float64, [3])
    fetches = _nested(x, v, (PS, WORKER))
    s = tv_cluster.session()
    s.run(tv.global_variables_initializer())
    want = _run(_nested)
    for opts in PLANES + PLANES:
        got = s.run(fetches, {x: X}, options=opts)
        for a, b in zip(got, want):
            np.testing.assert_allclose(a, b, rtol=1e-15, atol=0)


# ---- parallel_iterations: a shard runs the next iterations while a peer runs this one -------
def _independent(x, iters, parallel):
    """Iterations that depend on one another only through the counter and a sum: device
    A (the worker) makes ``y`` from the counter, B (the PS) ``z`` from ``y``, A sums ``z``."""
    def body(i, acc):
        with tv.device(WORKER):
            y = tv.tanh(x * tv.cast(i + 1, tv.float64))
        with tv.device(PS):
            z = tv.matmul(y, y, transpose_b=True) * 0.5 + 1.0
        with tv.device(WORKER):
            return i + 1, acc + tv.reduce_sum(z)
    with tv.device(WORKER):
        return tv.while_loop(lambda i, acc: i < iters, body,
                             [tv.constant(0), tv.constant(0.0, tv.float64)],
                             parallel_iterations=parallel)


def _np_independent(x, iters):
    acc = 0.0
    for i in range(iters):
        y = np.tanh(x * (i + 1))
        acc += float(np.sum(y @ y.T * 0.5 + 1.0))
    return acc


@pytest.mark.cluster
def test_parallel_iterations_give_the_values_of_one_at_a_time(tv_cluster, g):
    x = tv.placeholder(tv.float64, [4, 3])
    iters = tv.placeholder(tv.int32, [])
    xv = np.arange(12.0).reshape(4, 3) / 10
    one = _independent(x, iters, 1)
    ten = _independent(x, iters, 10)
    s = tv_cluster.session()
    for opts in PLANES:
        for n in (0, 1, 25):
            a, b = s.run([one, ten], {x: xv, iters: n}, options=opts)
            assert a[0] == b[0] == n
            assert a[1] == b[1]  # the same kernels in the same order within an iteration
            np.testing.assert_allclose(b[1], _np_independent(xv, n), rtol=1e-14)


def _mark(folder):
    def mark(i):
        open(f"{folder}/a{int(i)}", "w").close()
        return np.float64(i)
    return mark


def _seen_next(folder, iters):
    def seen(i):  # whether A ran its part of iteration i + 1 while B runs its part of i
        if i + 1 >= iters:
            return np.float64(1.0)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if os.path.exists(f"{folder}/a{int(i) + 1}"):
                return np.float64(1.0)
            time.sleep(0.005)
        return np.float64(0.0)
    return seen


@pytest.mark.cluster
def test_with_parallel_iterations_a_device_runs_ahead_of_its_peer(tv_cluster, g, tmp_path):
    iters = 6

    def body(i, seen):
        with tv.device(WORKER):
            a = tv.reshape(tv.py_func(_mark(tmp_path), [i], tv.float64, stateful=False), [])
        with tv.device(PS):
            z = tv.reshape(tv.py_func(_seen_next(tmp_path, iters), [a], tv.float64,
                                      stateful=False), [])
        with tv.device(WORKER):
            return i + 1, seen + z
    with tv.device(WORKER):
        k, seen = tv.while_loop(lambda i, s: i < iters, body,
                                [tv.constant(0), tv.constant(0.0, tv.float64)],
                                parallel_iterations=2)
    s = tv_cluster.session()
    for opts in PLANES:
        for f in tmp_path.iterdir():
            f.unlink()
        assert s.run([k, seen], options=opts) == [iters, iters]
