"""Loops that span devices (issue 27): a ``while_loop`` whose cond and body run on several
devices, each device running its part of every iteration. Checked against NumPy
re-implementations of the same loop, against the same loop on one device, and gradients
against central differences (tests/opcheck.py). TensorFlow is not installed here."""
from __future__ import annotations

import numpy as np
import pytest

import tensorvm as tv
from opcheck import numeric_grad

PS, WORKER, WORKER1 = "/job:ps/task:0", "/job:worker/task:0", "/job:worker/task:1"
X = np.array([0.1, -0.3, 0.7])


def _issue_loop(x, v, devices=(PS, WORKER), iters=7):
    """The issue's example: ``acc * 1.5 + v`` on ``devices[0]``, tanh on ``devices[-1]``
    (with three devices the counter runs on the middle one)."""
    def body(i, acc):
        with tv.device(devices[0]):
            nxt = acc * 1.5 + v
        with tv.device(devices[1]):
            i = i + 1
        with tv.device(devices[-1]):
            return i, tv.tanh(nxt)
    with tv.device(devices[-1]):
        return tv.while_loop(lambda i, acc: i < iters, body, [tv.constant(0), x])[1]


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
def test_a_cluster_loops_gradient_is_refused_clearly_for_now(tv_cluster, g):
    with tv.device(PS):
        v = tv.Variable(np.float64(0.25), name="v_g")
    x = tv.placeholder(tv.float64, [3])
    loss, dx, _ = _grad_loop(x, v, (PS, WORKER))
    s = tv_cluster.session()
    s.run(tv.global_variables_initializer())
    assert np.isclose(s.run(loss, {x: X}), np.sum(_np_loop(X) ** 2))
    with pytest.raises(tv.errors.InvalidArgumentError, match="gradient there is not done"):
        s.run(dx, {x: X})
