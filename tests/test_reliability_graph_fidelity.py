"""Issue 24, items 7, 8, 16 and 17: bad graphs and cluster specs refused clearly, and TF 1.x
fidelity of variable fetches, complex gradients and variable reads in a while_loop body.

The expected values were checked by the issue's author against TF 2.21 ``tf.compat.v1``."""
from __future__ import annotations

import time

import numpy as np
import pytest

import tensorvm as tv
from tensorvm.jobs.runner import parse_cluster


# ---- 7: a control cycle made by hand --------------------------------------------------------
def _cycle_graph():
    g = tv.Graph()
    with g.as_default():
        v = tv.Variable(0.0, name="cyc_v")
        a = tv.add(tv.constant(1.0), 1.0, name="cyc_a")
        b = tv.multiply(a, 2.0, name="cyc_b")
        c = tv.identity(b, name="cyc_c")
        bump = v.assign_add(1.0, name="cyc_bump")
    return g, v, a, b, c, bump


def test_a_control_cycle_is_refused_naming_its_ops_before_anything_runs():
    g, v, a, b, c, bump = _cycle_graph()
    with tv.Session(graph=g) as s:
        s.run(v.initializer)
        # the cycle also holds a stateful op: nothing of the step may run before the refusal
        a.op.control_inputs = (c.op,)
        bump.op.control_inputs = (c.op,)
        with pytest.raises(tv.errors.InvalidArgumentError) as e:
            s.run([c, bump])
        msg = str(e.value)
        assert "cycle" in msg
        for name in ("cyc_a", "cyc_b", "cyc_c"):
            assert name in msg
        a.op.control_inputs = ()
        bump.op.control_inputs = ()
        assert float(s.run(v)) == 0.0  # the refused step ran nothing


def test_a_control_input_made_later_without_a_cycle_runs_in_order():
    # not a cycle: an op made first waits for one made after it (TF sorts the graph)
    g = tv.Graph()
    with g.as_default():
        v = tv.Variable(0.0, name="late_v")
        read = tv.add(tv.constant(0.0), 0.0, name="late_first")
        bump = v.assign(5.0, name="late_bump")
    with tv.Session(graph=g) as s:
        s.run(v.initializer)
        with g.as_default():
            r = v.read_value()
        read.op.control_inputs = (bump.op,)
        s.run(read)
        assert float(s.run(r)) == 5.0


def test_the_passes_refuse_a_cycle_of_plain_nodes():
    from tensorvm.framework.graph_def import Node
    from tensorvm.passes.step import Step, pipeline, run_pipeline
    nodes = {"x": Node("x", "NoOp", control_inputs=("z",), num_outputs=0),
             "y": Node("y", "NoOp", control_inputs=("x",), num_outputs=0),
             "z": Node("z", "NoOp", control_inputs=("y",), num_outputs=0)}
    with pytest.raises(tv.errors.InvalidArgumentError, match=r"cycle.*'x'.*'y'.*'z'|cycle"):
        run_pipeline(Step.start(nodes, targets=["z"]), pipeline("/job:w/task:0"))


# ---- 8: cluster specs no cluster can have ---------------------------------------------------
def test_cluster_spec_refuses_a_task_count_beyond_the_bound_at_once():
    from tensorvm.runtime.cluster.spec import MAX_TASKS_PER_JOB
    t0 = time.monotonic()
    with pytest.raises(tv.errors.InvalidArgumentError,
                       match=rf"job 'worker'.*{MAX_TASKS_PER_JOB}"):
        tv.train.ClusterSpec({"worker": 10 ** 9})
    with pytest.raises(tv.errors.InvalidArgumentError, match="job 'worker'"):
        tv.train.ClusterSpec({"worker": {10 ** 12: "h:1"}})
    with pytest.raises(tv.errors.InvalidArgumentError, match="job 'ps'"):
        tv.train.ClusterSpec({"ps": ["w"] * (MAX_TASKS_PER_JOB + 1)})
    assert time.monotonic() - t0 < 10.0  # was 8-14 s and a MemoryError
    # the bound itself is a cluster one can have
    assert tv.train.ClusterSpec({"worker": MAX_TASKS_PER_JOB}).num_tasks("worker") == \
        MAX_TASKS_PER_JOB


def test_a_sparse_cluster_spec_keeps_only_its_tasks():
    spec = tv.train.ClusterSpec({"worker": {5000: "h:1", 3: "h:2"}})
    assert spec.tasks() == [("worker", 3), ("worker", 5000)]
    assert spec.task_address("worker", 5000) == "h:1"
    assert spec.as_dict() == {"worker": {3: "h:2", 5000: "h:1"}}
    with pytest.raises(tv.errors.InvalidArgumentError, match="no task 4"):
        spec.task_address("worker", 4)


def test_parse_cluster_uses_the_same_bound():
    from tensorvm.runtime.cluster.spec import MAX_TASKS_PER_JOB
    assert parse_cluster(f"ps=1,worker={MAX_TASKS_PER_JOB}")["worker"] == MAX_TASKS_PER_JOB
    t0 = time.monotonic()
    with pytest.raises(ValueError, match=rf"worker.*{MAX_TASKS_PER_JOB}"):
        parse_cluster("ps=1,worker=" + "9" * 4000)
    assert time.monotonic() - t0 < 10.0  # int() of 4000 digits was the cost


# ---- 16: a variable fetched in the step that updates it --------------------------------------
def _train_graph():
    g = tv.Graph()
    with g.as_default():
        x = tv.constant(np.linspace(-1, 1, 8).astype(np.float32))
        w = tv.Variable(0.5, name="w")
        loss = tv.reduce_mean(tv.square(w * x - 2.0 * x))
        step = tv.train.get_or_create_global_step()
        train = tv.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=step)
    return g, train, loss, step


def _steps_fetched(checkpoint_dir, last_step: int) -> list[int]:
    """The global steps a fresh graph's MonitoredTrainingSession fetches beside its train op
    until StopAtStepHook(last_step) (restoring from ``checkpoint_dir``)."""
    g, train, loss, step = _train_graph()
    seen = []
    with g.as_default():
        with tv.train.MonitoredTrainingSession(
                checkpoint_dir=str(checkpoint_dir), save_checkpoint_steps=10,
                hooks=[tv.train.StopAtStepHook(last_step=last_step)]) as s:
            while not s.should_stop():
                _, _, k = s.run([train, loss, step])
                seen.append(int(k))
    return seen


def test_monitored_session_fetches_the_global_step_as_the_step_left_it(tmp_path):
    assert _steps_fetched(tmp_path, 40) == list(range(1, 41))
    assert _steps_fetched(tmp_path, 70) == list(range(41, 71))


def test_a_variable_fetched_with_its_update_gives_the_updated_buffer_in_process():
    g = tv.Graph()
    with g.as_default():
        v = tv.Variable(1.0, name="v")
        snap = v.read_value()
        ident = tv.identity(v)
        inc = v.assign_add(2.0)
    with tv.Session(graph=g) as s:
        s.run(v.initializer)
        got_inc, got_v = s.run([inc, v])
        assert (float(got_inc), float(got_v)) == (3.0, 3.0)
        got_v, got_inc = s.run([v, inc])  # the order of the fetches does not matter
        assert (float(got_v), float(got_inc)) == (5.0, 5.0)
        # the value a read op took is a snapshot: it does not follow the update
        _, before, before2 = s.run([inc, snap, ident])
        assert float(before) == 5.0 and float(before2) == 5.0
        assert float(s.run(v)) == 7.0  # a fetch with no update: the value


def test_a_variable_fetched_with_several_updates_sees_them_all():
    g = tv.Graph()
    with g.as_default():
        v = tv.Variable(0, name="counter")
        a = v.assign_add(1)
        with tv.control_dependencies([a]):
            b = v.assign_add(10)
    with tv.Session(graph=g) as s:
        s.run(v.initializer)
        assert int(s.run([b, v])[1]) == 11


def test_a_variable_fetched_with_a_loop_or_an_untaken_branch_that_updates_it():
    g = tv.Graph()
    with g.as_default():
        v = tv.Variable(0.0, name="lv")
        pred = tv.placeholder(tv.bool, [])

        def body(i):
            with tv.control_dependencies([v.assign_add(1.0)]):
                return i + 1
        loop = tv.while_loop(lambda i: i < 3, body, [0])
        branch = tv.cond(pred, lambda: v.assign_add(10.0), lambda: tv.constant(0.0))
    with tv.Session(graph=g) as s:
        s.run(v.initializer)
        assert float(s.run([loop, v])[1]) == 3.0
        # an update on the branch not taken: the fetch is the value, not a missing one
        assert float(s.run([branch, v], {pred: False})[1]) == 3.0
        assert float(s.run([branch, v], {pred: True})[1]) == 13.0


def test_a_cluster_plan_keeps_the_value_the_variable_op_read():
    # On a PS in another process TF sends the value when the variable op runs: the passes
    # add no read after the update unless the session runs in process.
    from tensorvm.framework.graph_def import snapshot
    from tensorvm.passes.step import Step, pipeline, run_pipeline
    g = tv.Graph()
    with g.as_default():
        v = tv.Variable(0.0, name="pv")
        inc = v.assign_add(1.0)
    start = Step.start(snapshot(g), fetches=[("pv", 0), (inc.op.name, 0)])
    remote = run_pipeline(start, pipeline("/job:ps/task:0"), stop_after="optimize")
    local = run_pipeline(start, pipeline("/job:ps/task:0", live_ref_fetches=True),
                         stop_after="optimize")
    assert remote.fetches[0] == ("pv", 0)
    assert local.nodes[local.fetches[0][0]].type == "VariableRefFetch"
    assert local.nodes[local.fetches[0][0]].control_inputs == (inc.op.name,)


# ---- 17: complex gradients and variable reads inside a loop ----------------------------------
def _complex_numeric_grad(f, z, eps=1e-6):
    """dL/dRe(z) + i dL/dIm(z) of a real function (TF's gradient of a real loss w.r.t. a
    complex input)."""
    z = z.astype(np.complex128).copy()
    out = np.zeros_like(z)
    flat, oflat = z.reshape(-1), out.reshape(-1)
    for i in range(flat.size):
        old = flat[i]
        parts = []
        for d in (eps, 1j * eps):
            flat[i] = old + d
            hi = f(z)
            flat[i] = old - d
            lo = f(z)
            parts.append((hi - lo) / (2 * eps))
        flat[i] = old
        oflat[i] = parts[0] + 1j * parts[1]
    return out


def _check_complex_grads(build, *arrays):
    rng = np.random.default_rng(7)
    g = tv.Graph()
    with g.as_default():
        phs = [tv.placeholder(tv.complex128, a.shape) for a in arrays]
        out = build(*phs)
        with tv.Session(graph=g) as sess:
            feed = dict(zip(phs, arrays))
            shape = np.shape(sess.run(out, feed))
            w = rng.normal(size=shape) + 1j * rng.normal(size=shape)
            loss = tv.real(tv.reduce_sum(out * tv.constant(w)))
            got = sess.run(tv.gradients(loss, phs), feed)
            for i, a in enumerate(arrays):
                def f(z, i=i):
                    fd = dict(feed)
                    fd[phs[i]] = z
                    return float(sess.run(loss, fd))
                np.testing.assert_allclose(got[i], _complex_numeric_grad(f, a), rtol=1e-6,
                                           atol=1e-8, err_msg=f"gradient wrt input {i}")


def _c(rng, *shape):
    return rng.normal(size=shape) + 1j * rng.normal(size=shape)


def test_mul_gradient_conjugates_complex_inputs():
    rng = np.random.default_rng(0)
    _check_complex_grads(lambda x, y: x * y, _c(rng, 2, 3), _c(rng, 3))


@pytest.mark.parametrize("ta,tb", [(False, False), (False, True), (True, False), (True, True)])
def test_matmul_gradient_conjugates_complex_inputs(ta, tb):
    rng = np.random.default_rng(1)
    a = _c(rng, 3, 2) if ta else _c(rng, 2, 3)
    b = _c(rng, 4, 3) if tb else _c(rng, 3, 4)
    _check_complex_grads(lambda x, y: tv.matmul(x, y, transpose_a=ta, transpose_b=tb), a, b)


@pytest.mark.parametrize("aa,ab", [(True, False), (False, True), (True, True)])
def test_matmul_adjoint_flags(aa, ab):
    rng = np.random.default_rng(2)
    a, b = _c(rng, 3, 2), _c(rng, 4, 3)
    a = a if aa else a.conj().T
    b = b if ab else b.conj().T
    want = (a.conj().T if aa else a) @ (b.conj().T if ab else b)
    with tv.Graph().as_default(), tv.Session() as s:
        got = s.run(tv.matmul(a, b, adjoint_a=aa, adjoint_b=ab))
    np.testing.assert_allclose(got, want, rtol=1e-12)
    _check_complex_grads(lambda x, y: tv.matmul(x, y, adjoint_a=aa, adjoint_b=ab), a, b)
    with pytest.raises(ValueError, match="transpose_a and adjoint_a"):
        tv.matmul(a, b, transpose_a=True, adjoint_a=True)


def test_real_mul_and_matmul_gradients_are_unchanged():
    from opcheck import check_gradients
    rng = np.random.default_rng(3)
    check_gradients(lambda x, y: x * y, rng.normal(size=(2, 3)), rng.normal(size=(3,)))
    check_gradients(lambda x, y: tv.matmul(x, y, transpose_b=True), rng.normal(size=(2, 3)),
                    rng.normal(size=(4, 3)))


@pytest.mark.parametrize("read", ["read_value", "identity", "add"])
def test_a_variable_updated_in_a_loop_body_is_read_each_iteration(read):
    n = 5
    g = tv.Graph()
    with g.as_default():
        v = tv.Variable(0.0, name="loop_v")

        def body(i, acc):
            with tv.control_dependencies([v.assign_add(1.0)]):
                r = {"read_value": lambda: v.read_value(), "identity": lambda: tv.identity(v),
                     "add": lambda: v + 0.0}[read]()
            return i + 1, acc + r
        _, total = tv.while_loop(lambda i, acc: i < n, body, [0, tv.constant(0.0)])
    with tv.Session(graph=g) as s:
        s.run(v.initializer)
        assert float(s.run(total)) == n * (n + 1) / 2  # 1 + 2 + ... + n
        assert float(s.run(v)) == n
        assert float(s.run(total)) == n * (n + 1) / 2 + n * n  # n+1 ... 2n


def test_a_variable_read_in_a_loop_body_keeps_its_gradient():
    g = tv.Graph()
    with g.as_default():
        w = tv.Variable(np.float64(1.5), name="loop_w")
        _, y = tv.while_loop(lambda i, y: i < 3, lambda i, y: (i + 1, y * w),
                             [0, tv.constant(np.float64(2.0))])
        (dw,) = tv.gradients(y, [w])
    with tv.Session(graph=g) as s:
        s.run(w.initializer)
        got_y, got_dw = s.run([y, dw])
    assert got_y == pytest.approx(2.0 * 1.5 ** 3)
    assert got_dw == pytest.approx(2.0 * 3 * 1.5 ** 2)
