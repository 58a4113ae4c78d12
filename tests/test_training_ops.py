"""The fused optimizer updates (ApplyGradientDescent, ApplyMomentum, ApplyAdagrad, ApplyAdam):
bit-equal to the unfused arithmetic, copy-on-write, and their errors."""
from __future__ import annotations

import numpy as np
import pytest
import tensorvm as tv
from tensorvm.ops.state.training_ops import apply_gradient_descent, apply_momentum

RNG = np.random.default_rng(3)


def _quad_problem(dtype):
    """loss = sum((x @ w - y) ** 2) / n: its gradient in NumPy is 2 x^T (x w - y) / n."""
    x = RNG.standard_normal((8, 5)).astype(dtype)
    y = RNG.standard_normal((8, 3)).astype(dtype)
    w0 = RNG.standard_normal((5, 3)).astype(dtype)
    return x, y, w0


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_sgd_matches_numpy_bit_for_bit(dtype):
    x, y, w0 = _quad_problem(dtype)
    w = tv.Variable(w0)
    g = tv.placeholder(dtype, [5, 3])
    step = apply_gradient_descent(w, 0.1, g)
    ref = w0.copy()
    lr = dtype(0.1)
    with tv.Session() as s:
        s.run(w.initializer)
        for _ in range(3):
            grad = (2 * x.T @ (x @ ref - y) / 8).astype(dtype)
            got = s.run(step, {g: grad})
            ref = ref - lr * grad
            assert got.dtype == dtype
            np.testing.assert_array_equal(got, ref)
        np.testing.assert_array_equal(s.run(w), ref)


def test_gradient_descent_optimizer_uses_one_fused_op_and_trains():
    x, y, w0 = _quad_problem(np.float32)
    w = tv.Variable(w0)
    loss = tv.reduce_mean(tv.reduce_sum(tv.square(tv.matmul(tv.constant(x), w) - y), 1))
    train = tv.train.GradientDescentOptimizer(0.05).minimize(loss)
    types = [op.type for op in tv.get_default_graph().get_operations()]
    assert "ApplyGradientDescent" in types and "AssignSub" not in types
    ref = w0.astype(np.float64)
    with tv.Session() as s:
        s.run(w.initializer)
        for _ in range(5):
            s.run(train)
            ref -= 0.05 * 2 * x.T @ (x @ ref - y) / 8
        np.testing.assert_allclose(s.run(w), ref, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("nesterov", [False, True])
def test_momentum_matches_numpy(nesterov):
    x, y, w0 = _quad_problem(np.float64)
    w = tv.Variable(w0)
    loss = tv.reduce_mean(tv.reduce_sum(tv.square(tv.matmul(tv.constant(x), w) - y), 1))
    opt = tv.train.MomentumOptimizer(0.05, 0.9, use_nesterov=nesterov)
    train = opt.minimize(loss)
    assert "ApplyMomentum" in [op.type for op in tv.get_default_graph().get_operations()]
    ref, acc = w0.copy(), np.zeros_like(w0)
    with tv.Session() as s:
        s.run(tv.global_variables_initializer())
        for _ in range(4):
            s.run(train)
            grad = 2 * x.T @ (x @ ref - y) / 8
            acc = acc * 0.9 + grad
            ref = ref - 0.05 * ((grad + 0.9 * acc) if nesterov else acc)
        np.testing.assert_allclose(s.run(w), ref, rtol=1e-12)
        np.testing.assert_allclose(s.run(opt.get_slot(w, "Momentum")), acc, rtol=1e-12)


def test_update_is_copy_on_write():
    """A value read before the update (here: fetched in the same run as an earlier read)
    keeps the old numbers."""
    w = tv.Variable(np.ones(4, np.float32))
    before = tv.identity(w.value())
    with tv.control_dependencies([before]):
        step = apply_gradient_descent(w, 1.0, tv.ones([4]))
    with tv.Session() as s:
        s.run(w.initializer)
        old, new = s.run([before, step])
    np.testing.assert_array_equal(old, np.ones(4))
    np.testing.assert_array_equal(new, np.zeros(4))


def test_errors_name_the_op_and_shapes():
    w = tv.Variable(np.zeros((2, 2), np.float32))
    with pytest.raises(tv.errors.InvalidArgumentError, match="cannot assign a value of shape"):
        apply_gradient_descent(w, 0.1, tv.zeros([3]))
    with pytest.raises(tv.errors.InvalidArgumentError, match="alpha must be a scalar"):
        apply_gradient_descent(w, [0.1, 0.2], tv.zeros([2, 2]))
    g = tv.placeholder(tv.float32)  # unknown shape: checked when it runs
    step = apply_gradient_descent(w, 0.1, g)
    acc = tv.Variable(np.zeros((2, 2), np.float32))
    mstep = apply_momentum(w, acc, 0.1, g, 0.9)
    with tv.Session() as s:
        s.run([w.initializer, acc.initializer])
        with pytest.raises(tv.errors.InvalidArgumentError,
                           match=r"ApplyGradientDescent: delta of shape \[3\] does not match"):
            s.run(step, {g: np.zeros(3, np.float32)})
        with pytest.raises(tv.errors.InvalidArgumentError,
                           match=r"ApplyMomentum: grad of shape \[2\] does not match"):
            s.run(mstep, {g: np.zeros(2, np.float32)})
        np.testing.assert_array_equal(s.run(w), np.zeros((2, 2)))  # nothing was written


# ---- ApplyAdagrad / ApplyAdam: the unfused graph's bits ----------------------------------------

def _unfused_adagrad(var, acc, lr, grad):
    new_acc = acc.assign_add(grad * grad)
    return var.assign_sub(lr * grad / tv.sqrt(new_acc))


def _unfused_adam(var, m, v, lr_t, b1, b2, eps, grad):
    one = tv.constant(1.0, dtype=var.dtype)
    m_new = m.assign(b1 * m.value() + (one - b1) * grad)
    v_new = v.assign(b2 * v.value() + (one - b2) * grad * grad)
    return var.assign_sub(lr_t * m_new / (tv.sqrt(v_new) + eps))


@pytest.mark.parametrize("kind", ["adagrad", "adam"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_fused_adagrad_and_adam_are_the_unfused_graph_bit_for_bit(kind, dtype):
    from tensorvm.ops.state.training_ops import apply_adagrad, apply_adam
    w0 = RNG.standard_normal((6, 4)).astype(dtype)
    grads = [RNG.standard_normal((6, 4)).astype(dtype) for _ in range(4)]
    runs = []
    for fused in (True, False):
        with tv.Graph().as_default():
            w = tv.Variable(w0)
            s1 = tv.Variable(np.full((6, 4), 0.1, dtype))
            s2 = tv.Variable(np.zeros((6, 4), dtype))
            g = tv.placeholder(dtype, [6, 4])
            c = [tv.constant(dtype(a)) for a in (0.01, 0.9, 0.999, 1e-8)]
            if kind == "adagrad":
                step = (apply_adagrad if fused else _unfused_adagrad)(w, s1, c[0], g)
            else:
                step = (apply_adam if fused else _unfused_adam)(w, s1, s2, *c, g)
            types = [op.type for op in tv.get_default_graph().get_operations()]
            assert (f"Apply{'Adagrad' if kind == 'adagrad' else 'Adam'}" in types) == fused
            with tv.Session() as s:
                s.run(tv.global_variables_initializer())
                outs = [s.run(step, {g: gr}) for gr in grads]
                runs.append((outs, s.run([w, s1, s2])))
    (fo, fs), (uo, us) = runs
    for a, b in zip(fo + fs, uo + us):
        assert a.dtype == dtype and a.tobytes() == b.tobytes()
    # and against NumPy (closed form, float64)
    w, acc, v = w0.astype(np.float64), np.full((6, 4), 0.1), np.zeros((6, 4))
    m = acc  # the first slot starts at 0.1 for both
    for gr in grads:
        gr = gr.astype(np.float64)
        if kind == "adagrad":
            acc = acc + gr * gr
            w = w - 0.01 * gr / np.sqrt(acc)
        else:
            m = 0.9 * m + 0.1 * gr
            v = 0.999 * v + 0.001 * gr * gr
            w = w - 0.01 * m / (np.sqrt(v) + 1e-8)
    np.testing.assert_allclose(fs[0], w, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("opt", [lambda: tv.train.AdagradOptimizer(0.1),
                                 lambda: tv.train.AdamOptimizer(0.05)])
def test_adagrad_and_adam_optimizers_use_one_fused_op_and_train(opt):
    x, y, w0 = _quad_problem(np.float32)
    w = tv.Variable(w0)
    loss = tv.reduce_mean(tv.reduce_sum(tv.square(tv.matmul(tv.constant(x), w) - y), 1))
    train = opt().minimize(loss)
    types = [op.type for op in tv.get_default_graph().get_operations()]
    assert ("ApplyAdagrad" in types or "ApplyAdam" in types) and "AssignSub" not in types
    with tv.Session() as s:
        s.run(tv.global_variables_initializer())
        first = s.run(loss)
        for _ in range(30):
            s.run(train)
        assert s.run(loss) < 0.8 * first


def test_apply_adam_refuses_a_slot_of_another_shape():
    from tensorvm.ops.state.training_ops import apply_adam
    w = tv.Variable(np.zeros((2, 3), np.float32))
    m = tv.Variable(np.zeros((2, 3), np.float32))
    v = tv.Variable(np.zeros((3, 2), np.float32))
    g = tv.placeholder(tv.float32, [2, 3])
    step = apply_adam(w, m, v, 0.1, 0.9, 0.999, 1e-8, g)
    with tv.Session() as s:
        s.run(tv.global_variables_initializer())
        with pytest.raises(tv.errors.InvalidArgumentError,
                           match=r"(?s)already exists as float32\[3, 2\].*'ApplyAdam'"):
            s.run(step, {g: np.ones((2, 3), np.float32)})


# ---- in place when nothing else holds the value (sole_holder), a snapshot when held ------------

def _states(s, *names):
    from tensorvm.runtime.session import local_resources
    mgr = local_resources(s).for_device("/job:localhost/replica:0/task:0/device:CPU:0")
    found = {key[1]: mgr.lookup(*key) for key in mgr.names()}
    return [found[n] for n in names]


def _fused_step(kind, w, s1, s2, g, dtype):
    from tensorvm.ops.state.training_ops import apply_adagrad, apply_adam
    if kind == "momentum":
        return apply_momentum(w, s1, dtype(0.01), g, dtype(0.9))
    if kind == "nesterov":
        return apply_momentum(w, s1, dtype(0.01), g, dtype(0.9), use_nesterov=True)
    if kind == "adagrad":
        return apply_adagrad(w, s1, dtype(0.01), g)
    return apply_adam(w, s1, s2, *[dtype(a) for a in (0.01, 0.9, 0.999, 1e-8)], g)


def _unfused_step(kind, w, s1, s2, g, dtype):
    c = [tv.constant(dtype(a)) for a in (0.01, 0.9, 0.999, 1e-8)]
    if kind in ("momentum", "nesterov"):
        acc = s1.assign(s1.value() * c[1] + g)
        step = g + c[1] * acc if kind == "nesterov" else acc
        return w.assign_sub(c[0] * step)
    if kind == "adagrad":
        return _unfused_adagrad(w, s1, c[0], g)
    return _unfused_adam(w, s1, s2, *c, g)


SLOTS = {"momentum": 1, "nesterov": 1, "adagrad": 1, "adam": 2}


@pytest.mark.parametrize("kind", ["momentum", "nesterov", "adagrad", "adam"])
def test_momentum_adagrad_adam_update_in_place_when_nothing_holds_the_value(kind):
    """With no reader holding them, the variable and its slots are updated in their own
    buffers (no fresh variable-sized array per step); a value someone holds (here: taken
    from the variable's state, as a fetch or a step in flight holds it) is left untouched and
    the update goes to a new buffer. Either way the bits are the unfused graph's."""
    from tensorvm.ops.state.training_ops import _CHUNK
    dtype = np.float32
    shape = (_CHUNK // 100 + 7, 300)  # more than one block, a ragged last one
    w0 = RNG.standard_normal(shape).astype(dtype)
    s10 = np.abs(RNG.standard_normal(shape)).astype(dtype)
    s20 = np.abs(RNG.standard_normal(shape)).astype(dtype)
    grads = [RNG.standard_normal(shape).astype(dtype) for _ in range(4)]
    finals = []
    for fused in (True, False):
        with tv.Graph().as_default():
            w = tv.Variable(w0, name="w")
            s1 = tv.Variable(s10, name="s1")
            s2 = tv.Variable(s20, name="s2")
            g = tv.placeholder(dtype, shape)
            step = tv.group((_fused_step if fused else _unfused_step)(kind, w, s1, s2, g, dtype))
            with tv.Session() as s:
                s.run(tv.global_variables_initializer())
                s.run(step, {g: grads[0]})
                names = ["w", "s1", "s2"][:1 + SLOTS[kind]]
                states = _states(s, *names)
                if fused:
                    buffers = [st.value.ctypes.data for st in states]
                s.run(step, {g: grads[1]})  # nothing holds them: in place
                if fused:
                    assert [st.value.ctypes.data for st in states] == buffers
                    assert not any(st.value.flags.writeable for st in states)
                held = [st.value for st in states]  # held: each update copies
                copies = [h.copy() for h in held]
                s.run(step, {g: grads[2]})
                for st, h, c in zip(states, held, copies):
                    assert st.value is not h
                    np.testing.assert_array_equal(h, c)
                del held, h
                if fused:  # held no more: in place again, in the copies' buffers
                    buffers = [st.value.ctypes.data for st in states]
                    s.run(step, {g: grads[3]})
                    assert [st.value.ctypes.data for st in states] == buffers
                else:
                    s.run(step, {g: grads[3]})
                finals.append(s.run([w, s1, s2]))
    for a, b in zip(*finals):
        assert a.dtype == dtype and a.tobytes() == b.tobytes()


@pytest.mark.parametrize("kind", ["momentum", "adagrad", "adam"])
def test_a_read_in_flight_keeps_its_snapshot_of_the_variable_and_its_slots(kind):
    """Values read earlier in the same run (fetched with the update) keep the old numbers."""
    dtype = np.float32
    w = tv.Variable(np.ones(5, dtype))
    s1 = tv.Variable(np.full(5, 2.0, dtype))
    s2 = tv.Variable(np.full(5, 3.0, dtype))
    g = tv.constant(np.full(5, 0.5, dtype))
    before = [tv.identity(v.value()) for v in (w, s1, s2)]
    with tv.control_dependencies(before):
        step = _fused_step(kind, w, s1, s2, g, dtype)
    with tv.Session() as s:
        s.run(tv.global_variables_initializer())
        *old, new = s.run(before + [step])
        after = s.run([w, s1, s2])
    for o, v in zip(old, (1.0, 2.0, 3.0)):
        np.testing.assert_array_equal(o, np.full(5, v, dtype))
    np.testing.assert_array_equal(new, after[0])
    assert not np.array_equal(after[0], np.ones(5, dtype))
    assert not np.array_equal(after[1], np.full(5, 2.0, dtype))
