"""The while_loop machinery's per-iteration work: the body is compiled once and reused, the
gradient reads the forward loop's taped intermediates (TF's gradient stacks) instead of
recomputing the body, and statically small outputs skip the buffer-forwarding checks."""
import importlib

import numpy as np
import pytest
import tensorvm as tv
from tensorvm import passes
from tensorvm.vm import interpreter as runtime
from tensorvm.framework.graph_def import snapshot
from tensorvm.passes.compile import _out_bytes

wl = importlib.import_module("tensorvm.ops.control.while_loop")


def _loop_ops(g, op_type):
    return [op for op in g.get_operations() if op.type == op_type]


def _program_types(func):
    (task, _), = func._programs.values()
    return [i.type for i in task.program.instrs]


def _rnn(steps=6):
    """h_{k+1} = tanh(h_k @ w + x): a loss and its gradients with respect to w and x."""
    rng = np.random.default_rng(3)
    w0 = rng.normal(size=(4, 4)) * 0.5
    x0 = rng.normal(size=(2, 4))
    w = tv.Variable(w0, name="w")
    x = tv.placeholder(tv.float64, [2, 4], name="x")
    h = tv.while_loop(lambda k, h: k < steps,
                      lambda k, h: (k + 1, tv.tanh(tv.matmul(h, w) + x)),
                      [0, tv.zeros([2, 4], tv.float64)])[1]
    loss = tv.reduce_sum(h * h)
    return w, x, loss, w0, x0


def _rnn_numpy(w0, x0, steps=6):
    hs = [np.zeros((2, 4))]
    for _ in range(steps):
        hs.append(np.tanh(hs[-1] @ w0 + x0))
    gh, gw, gx = 2 * hs[-1], np.zeros_like(w0), np.zeros_like(x0)
    for k in range(steps, 0, -1):
        gz = gh * (1 - hs[k] ** 2)
        gw += hs[k - 1].T @ gz
        gx += gz
        gh = gz @ w0.T
    return float(np.sum(hs[-1] ** 2)), gw, gx


def test_gradient_reads_taped_intermediates_not_a_recomputed_body():
    g = tv.Graph()
    with g.as_default():
        w, x, loss, w0, x0 = _rnn()
        grads = tv.gradients(loss, [w, x])
        with tv.Session() as s:
            s.run(tv.global_variables_initializer())
            got = s.run([loss] + grads, {x: x0})
    want = _rnn_numpy(w0, x0)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-12)
    np.testing.assert_allclose(got[1], want[1], rtol=1e-12)
    np.testing.assert_allclose(got[2], want[2], rtol=1e-12)
    (fwd,), (bwd,) = _loop_ops(g, "StatelessWhile"), _loop_ops(g, "WhileGrad")
    body, grad = fwd.attrs["body"], bwd.attrs["grad"]
    # the body tapes the tanh output (what Tanh's gradient reads) and the value of w it read
    # (a variable is read each iteration, as TF 1.x reads a ref); h_k is a loop variable
    assert sorted(nm.rsplit("/", 1)[-1] for nm, _ in body.taped) == ["Tanh", "read_in_loop"]
    assert sorted(bwd.attrs["tape_idx"]) == [0, 1]
    types = _program_types(grad)
    assert "Tanh" not in types and "Add" not in types  # the forward is not run again
    assert types.count("MatMul") == 2  # dh and dw only


def test_a_random_draw_in_the_body_is_not_redrawn_by_the_gradient():
    # s += x * m_k with m_k uniform: d sum(s) / dx = sum_k m_k, with the forward's draws.
    g = tv.Graph()
    with g.as_default():
        x = tv.Variable(np.ones(5), name="x")

        def body(k, s, ta):
            m = tv.random_uniform([5], dtype=tv.float64, seed=7)
            return k + 1, s + x * m, ta.write(k, m)
        _, s, ta = tv.while_loop(lambda k, s, ta: k < 4, body,
                                 [0, tv.zeros([5], tv.float64),
                                  tv.TensorArray(tv.float64, 4)])
        gx, = tv.gradients(tv.reduce_sum(s), [x])
        with tv.Session() as sess:
            sess.run(tv.global_variables_initializer())
            masks, got = sess.run([ta.stack(), gx])
    assert masks.shape == (4, 5) and len({tuple(m) for m in masks}) == 4
    np.testing.assert_allclose(got, masks.sum(0), rtol=1e-12)


def test_body_is_compiled_once_and_reused_across_iterations_and_steps(monkeypatch):
    g = tv.Graph()
    with g.as_default():
        w, x, loss, _, x0 = _rnn(steps=40)
        grads = tv.gradients(loss, [w, x])
        compiles = []
        real = passes.run_pipeline

        def counting(step, pipeline):
            compiles.append(step)
            return real(step, pipeline)
        monkeypatch.setattr(passes, "run_pipeline", counting)
        with tv.Session() as s:
            s.run(tv.global_variables_initializer())
            first = s.run([loss] + grads, {x: x0})
            n_first = len(compiles)
            again = s.run([loss] + grads, {x: x0})
    # the step's plan plus one program each for cond, body and gradient, not one per
    # iteration; the second run compiles nothing
    assert n_first <= 5 and len(compiles) == n_first
    for a, b in zip(first, again):
        np.testing.assert_array_equal(a, b)
    (fwd,), (bwd,) = _loop_ops(g, "StatelessWhile"), _loop_ops(g, "WhileGrad")
    assert len(fwd.attrs["body"]._programs) == 1 and len(fwd.attrs["cond"]._programs) == 1
    assert len(bwd.attrs["grad"]._programs) == 1


def test_second_gradient_of_a_loop_built_after_a_run():
    g = tv.Graph()
    with g.as_default():
        w, x, loss, w0, x0 = _rnn()
        with tv.Session() as s:
            s.run(tv.global_variables_initializer())
            assert np.isclose(s.run(loss, {x: x0}), _rnn_numpy(w0, x0)[0])
            gw, = tv.gradients(loss, [w])  # the body now tapes more: recompiled once
            gx, = tv.gradients(loss * 3.0, [x])
            got_w, got_x = s.run([gw, gx], {x: x0})
    want = _rnn_numpy(w0, x0)
    np.testing.assert_allclose(got_w, want[1], rtol=1e-12)
    np.testing.assert_allclose(got_x, 3 * want[2], rtol=1e-12)


def test_captured_gradient_sum_is_not_written_into_a_program_output():
    # The gradient of a captured tensor is summed over iterations in place, in an array the
    # WhileGrad kernel made: a body whose gradient for the capture is the incoming gradient
    # itself (an output the loop also hands on) must still come out right.
    g = tv.Graph()
    with g.as_default():
        a = tv.Variable(np.array([1.0, 2.0]), name="a")
        s = tv.while_loop(lambda k, s: k < 5, lambda k, s: (k + 1, s + a),
                          [0, tv.zeros([2], tv.float64)])[1]
        ga, = tv.gradients(tv.reduce_sum(s * s), [a])
        with tv.Session() as sess:
            sess.run(tv.global_variables_initializer())
            got = sess.run(ga)
    # s = 5a, d sum(s^2)/da = 2 * s * 5 = 50 a
    np.testing.assert_allclose(got, [50.0, 100.0], rtol=1e-12)


def test_statically_small_outputs_are_never_offered_a_buffer():
    g = tv.Graph()
    with g.as_default():
        small = tv.placeholder(tv.float32, [32, 64])
        big = tv.placeholder(tv.float32, [256, 256])
        unknown = tv.placeholder(tv.float32, [None, 64])
        outs = [tv.exp(small) * 2.0, tv.exp(big) * 2.0, tv.exp(unknown) * 2.0]
        with tv.Session() as s:
            res = s.run(outs, {small: np.ones((32, 64), np.float32),
                               big: np.ones((256, 256), np.float32),
                               unknown: np.ones((3, 64), np.float32)})
    for r in res:
        np.testing.assert_allclose(r, 2 * np.e, rtol=1e-6)
    muls = [n for n in snapshot(g).values() if n.type == "Mul"]
    assert sorted(_out_bytes(n) for n in muls) == [-1, 32 * 64 * 4, 256 * 256 * 4]
    ins = runtime.Instr("Mul", "m", (0, 1), {}, (2,), False, "", out_bytes=32 * 64 * 4)
    assert runtime._donors(ins, (0, 1)) == ()
    ins = runtime.Instr("Mul", "m", (0, 1), {}, (2,), False, "", out_bytes=256 * 256 * 4)
    assert runtime._donors(ins, (0, 1)) == ((0, 0), (1, 1))
    ins = runtime.Instr("Mul", "m", (0, 1), {}, (2,), False, "")
    assert runtime._donors(ins, (0, 1)) == ((0, 0), (1, 1))


CPU0 = "/job:localhost/replica:0/task:0/device:CPU:0"


@pytest.fixture(autouse=True)
def _straight_at_once(request, monkeypatch):
    if "straight_line_program" in request.node.name and "runs_the_same" not in \
            request.node.name:
        monkeypatch.setattr(runtime, "STRAIGHT_LINE_AFTER", 1)


def _add_program():
    return runtime.StageProgram(
        CPU0, "CPU", 4, ((0, -1), (1, -1)),
        (runtime.Instr("Add", "add", (0, 1), {}, (2,), False, "here.py:1", out_bytes=32),
         runtime.Instr("MatMul", "mm", (2, 1), {"transpose_a": False, "transpose_b": False},
                       (3,), False, "here.py:2")), (3,))


def test_straight_line_program_runs_the_same_kernels_and_frees_its_slots():
    prog = _add_program()
    rt = runtime.DeviceResources()
    a, b = np.arange(4.0).reshape(2, 2), np.eye(2)
    for k in range(runtime.STRAIGHT_LINE_AFTER):
        assert runtime.straight_code(prog) is None  # not yet generated
        vals = runtime.execute(prog, rt, "t.1", [a, b])
    assert runtime.straight_code(prog) is not None  # generated on the 3rd run, not at compile
    np.testing.assert_array_equal(vals[3], (a + b) @ b)
    assert vals[:3] == [None, None, None]  # arguments and intermediates dropped


def test_straight_line_program_errors_name_the_op_and_its_inputs():
    prog = _add_program()
    with pytest.raises(tv.errors.InvalidArgumentError,
                       match=r"for op 'mm' \(MatMul\) with inputs \(float64\[2, 3\], "
                             r"float64\[2, 3\]\), created at here.py:2") as e:
        runtime.execute(prog, runtime.DeviceResources(), "t.2",
                        [np.ones((2, 3)), np.ones((2, 3))])
    assert isinstance(e.value.__cause__, ValueError)


def test_straight_line_program_stops_at_a_cancelled_step():
    prog = _add_program()
    rt = runtime.DeviceResources()
    rt.cancel_step("t.3")
    with pytest.raises(tv.errors.CancelledError,
                       match=r"step t.3 was cancelled before op 'add' \(Add\) ran; created at "
                             r"here.py:1$"):
        runtime.execute(prog, rt, "t.3", [np.ones(2), np.ones(2)])
    np.testing.assert_array_equal(
        runtime.execute(prog, rt, "t.4", [np.ones((1, 1)), np.ones((1, 1))])[3], [[2.0]])


def _seeded_lstm(steps=7):
    g = tv.Graph()
    with g.as_default():
        tv.set_random_seed(5)
        x = tv.placeholder(tv.float32, [4, steps, 3], name="x")
        cell = tv.nn.rnn_cell.BasicLSTMCell(8)
        out, _ = tv.nn.dynamic_rnn(cell, x, dtype=tv.float32)
        loss = tv.reduce_sum(out * out)
        grads = tv.gradients(loss, tv.trainable_variables() + [x])
        sess = tv.Session(graph=g)
        sess.run(tv.global_variables_initializer())
    feed = {x: np.random.default_rng(0).normal(size=(4, steps, 3)).astype(np.float32)}
    return sess, [loss] + grads, feed


def test_lstm_loop_bits_are_the_same_with_and_without_straight_line_programs(monkeypatch):
    got = []
    for straight in (False, True):
        monkeypatch.setattr(runtime, "STRAIGHT_LINE", straight)
        sess, fetches, feed = _seeded_lstm()
        got.append(sess.run(fetches, feed))
        sess.close()
    assert len(got[1]) == 4
    g = sess.graph
    (fwd,), (bwd,) = _loop_ops(g, "StatelessWhile"), _loop_ops(g, "WhileGrad")
    for func in (fwd.attrs["cond"], fwd.attrs["body"], bwd.attrs["grad"]):
        (plan,) = func._calls.values()
        assert plan[3][0] is not None  # each iteration calls one generated function
    for a, b in zip(*got):
        np.testing.assert_array_equal(a, b)


def test_straight_line_program_hands_out_a_constant_as_its_kernel_does():
    value = np.arange(3.0)
    prog = runtime.StageProgram(
        CPU0, "CPU", 1, (), (runtime.Instr("Const", "c", (), {"value": value,
                                                                "dtype": tv.float64},
                                           (0,), False, "here.py:3", out_bytes=24),), (0,))
    vals = runtime.execute(prog, runtime.DeviceResources(), "t.5", [])
    assert runtime.straight_code(prog) is not None and vals[0] is value


def test_nested_loop_gradient_tapes_the_inner_loops_tape():
    from opcheck import check_gradients

    def nested(a):  # three outer steps, each running x <- sin(x) * a twice
        def outer_body(k, x):
            return k + 1, tv.while_loop(lambda j, y: j < 2,
                                        lambda j, y: (j + 1, tv.sin(y) * a), [0, x])[1]
        return tv.while_loop(lambda k, x: k < 3, outer_body, [0, a + 0.1])[1]
    check_gradients(nested, np.array([0.7, 1.3]))
    check_gradients(nested, np.array([-0.4, 2.0]))
