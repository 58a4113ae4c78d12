"""Control flow (issue 14 item 7): tv.cond / tv.case from Switch/Merge with dead tensors,
tv.while_loop, their gradients (central differences), Assert/Print/tuple/group, and the errors
for bad programs (naming the op and the user's line)."""
from __future__ import annotations

import numpy as np
import pytest
import tensorvm as tv
from opcheck import check_gradients
from tensorvm.framework.graph_def import snapshot
from tensorvm.passes import optimize, prune

HERE = "test_control_flow.py"


@pytest.fixture(autouse=True)
def _fresh_graph():
    g = tv.Graph()
    with g.as_default():
        yield g


def run(fetches, feed=None):
    with tv.Session() as s:
        return s.run(fetches, feed)


# ---- cond ---------------------------------------------------------------------------------------
def test_cond_picks_the_branch_like_numpy():
    x = tv.placeholder(tv.float64, [3])
    y = tv.cond(tv.reduce_sum(x) > 0, lambda: x * 2.0, lambda: tv.sin(x))
    with tv.Session() as s:
        for v in ([1.0, 2.0, 3.0], [-1.0, -2.0, 0.5]):
            v = np.array(v)
            want = v * 2 if v.sum() > 0 else np.sin(v)
            np.testing.assert_allclose(s.run(y, {x: v}), want)


def test_cond_structures_and_strict():
    p = tv.placeholder(tv.bool, [])
    out = tv.cond(p, lambda: {"a": tv.constant(1), "b": (tv.constant(2.0), tv.constant("t"))},
                  lambda: {"a": tv.constant(3), "b": (tv.constant(4.0), tv.constant("f"))})
    single = tv.cond(p, lambda: [tv.constant(1)], lambda: [tv.constant(2)])
    kept = tv.cond(p, lambda: [tv.constant(1)], lambda: [tv.constant(2)], strict=True)
    assert isinstance(out, dict) and isinstance(out["b"], tuple)
    assert isinstance(single, tv.Tensor) and isinstance(kept, list)
    with tv.Session() as s:
        assert s.run(out, {p: True}) == {"a": 1, "b": (2.0, "t")}
        assert s.run(out, {p: False}) == {"a": 3, "b": (4.0, "f")}
        assert s.run(single, {p: False}) == 2


def test_cond_of_constants_is_not_folded_across_the_switch():
    p = tv.placeholder(tv.bool, [])
    y = tv.cond(p, lambda: tv.constant(1.0) + 2.0, lambda: tv.constant(3.0) * 4.0)
    with tv.Session() as s:
        assert s.run(y, {p: True}) == 3.0
        assert s.run(y, {p: False}) == 12.0


def test_untaken_branch_runs_nothing():
    calls = []

    def side(tag):
        def f(v):
            calls.append(tag)
            return v
        return f

    x = tv.placeholder(tv.float32, [])
    v = tv.Variable(0.0)
    y = tv.cond(x > 0,
                lambda: tv.py_func(side("true"), [x], tv.float32),
                lambda: tv.py_func(side("false"), [x], tv.float32))
    upd = tv.cond(x > 0, lambda: tv.assign(v, 10.0), lambda: tv.assign(v, -10.0))
    noarg = tv.cond(x > 0, lambda: tv.py_func(lambda: np.float32(1), [], tv.float32),
                    lambda: tv.py_func(side("noarg-false") and (lambda: calls.append("noarg")
                                                                or np.float32(2)),
                                       [], tv.float32))
    with tv.Session() as s:
        s.run(tv.global_variables_initializer())
        assert s.run(y, {x: 1.0}) == 1.0 and calls == ["true"]
        assert s.run(y, {x: -1.0}) == -1.0 and calls == ["true", "false"]
        assert s.run(upd, {x: 1.0}) == 10.0 and s.run(v) == 10.0
        assert s.run(upd, {x: -1.0}) == -10.0 and s.run(v) == -10.0
        calls.clear()
        assert s.run(noarg, {x: 1.0}) == 1.0 and calls == []  # an input-less op waits too
        assert s.run(noarg, {x: -1.0}) == 2.0 and calls == ["noarg"]


def test_fetching_a_dead_branch_tensor_is_tf_error():
    x = tv.placeholder(tv.float32, [])
    inner = []

    def true_fn():
        inner.append(x * 3.0)
        return inner[0]
    y = tv.cond(x > 0, true_fn, lambda: x)
    with tv.Session() as s:
        assert s.run(inner[0], {x: 2.0}) == 6.0
        with pytest.raises(tv.errors.InvalidArgumentError, match=r"Retval\[0\] does not have "
                                                                 "value"):
            s.run(inner[0], {x: -2.0})
        assert s.run(y, {x: -2.0}) == -2.0


def test_nested_cond_and_ops_as_branch_results():
    x = tv.placeholder(tv.int32, [])
    y = tv.cond(x > 0,
                lambda: tv.cond(x > 10, lambda: x * 100, lambda: x * 10),
                lambda: -x)
    v = tv.Variable(0)
    op = tv.cond(x > 0, lambda: tv.group(tv.assign(v, 1)), lambda: tv.group(tv.assign(v, 2)))
    assert isinstance(op, tv.Operation)
    with tv.Session() as s:
        assert [int(s.run(y, {x: a})) for a in (20, 3, -4)] == [2000, 30, 4]
        s.run(tv.global_variables_initializer())
        s.run(op, {x: -1})
        assert s.run(v) == 2
        s.run(op, {x: 1})
        assert s.run(v) == 1


def test_cond_gradients_by_central_differences():
    def build(x):
        return tv.cond(tv.reduce_sum(x) > 0, lambda: x * x * 3.0, lambda: tv.sin(x) * x)
    check_gradients(build, np.array([0.5, 1.0, 2.0]))
    check_gradients(build, np.array([-0.5, -1.0, 0.2]))

    def one_sided(x, w):  # w is used by one branch only: zeros (gated) on the other
        return tv.cond(tv.reduce_sum(x) > 0, lambda: x * w, lambda: x * 2.0)
    check_gradients(one_sided, np.array([1.0, 2.0]), np.array([3.0, 4.0]))
    check_gradients(one_sided, np.array([-1.0, -2.0]), np.array([3.0, 4.0]))


def test_cond_bad_branches_name_the_line():
    p = tv.placeholder(tv.bool, [])
    with pytest.raises(tv.errors.InvalidArgumentError, match=f"same number.*{HERE}"):
        tv.cond(p, lambda: (tv.constant(1), tv.constant(2)), lambda: tv.constant(1))
    with pytest.raises(tv.errors.InvalidArgumentError, match=f"dtype int32.*float32.*{HERE}"):
        tv.cond(p, lambda: tv.constant(1), lambda: tv.constant(1.0))
    with pytest.raises(tv.errors.InvalidArgumentError, match="pred must be a bool"):
        tv.cond(tv.constant(1), lambda: 1, lambda: 2)
    with pytest.raises(TypeError, match="Python bool"):
        tv.cond(True, lambda: 1, lambda: 2)
    with pytest.raises(TypeError, match="callable"):
        tv.cond(p, 1, lambda: 2)


def test_case_first_true_default_and_exclusive():
    x = tv.placeholder(tv.int32, [])
    y = tv.case([(x < 0, lambda: tv.constant(-1)), (x > 0, lambda: tv.constant(1)),
                 (x > 5, lambda: tv.constant(5))], default=lambda: tv.constant(0))
    z = tv.case([(x > 0, lambda: tv.constant(1)), (x > 5, lambda: tv.constant(5))],
                default=lambda: tv.constant(0), exclusive=True)
    with tv.Session() as s:
        assert [int(s.run(y, {x: v})) for v in (-3, 0, 2, 9)] == [-1, 0, 1, 1]
        assert int(s.run(z, {x: 2})) == 1
        with pytest.raises(tv.errors.InvalidArgumentError, match="exclusive=True"):
            s.run(z, {x: 9})


def test_cond_across_devices_stays_lazy():
    """The predicate on one device, the branches on another: the dead side crosses Send/Recv
    as dead and runs nothing there."""
    calls = []
    with tv.device("/job:localhost/task:0"):
        x = tv.placeholder(tv.float32, [])
        p = x > 0
    with tv.device("/job:localhost/task:1"):
        y = tv.cond(p, lambda: tv.py_func(lambda v: calls.append("t") or v, [x], tv.float32),
                    lambda: tv.py_func(lambda v: calls.append("f") or -v, [x], tv.float32))
    with tv.device("/job:localhost/task:0"):
        z = y + 1.0
    with tv.Session() as s:
        assert s.run(z, {x: 2.0}) == 3.0 and calls == ["t"]
        assert s.run(z, {x: -2.0}) == 3.0 and calls == ["t", "f"]


def test_passes_keep_switch_merge_and_pivot():
    p = tv.placeholder(tv.bool, [], name="p")
    y = tv.cond(p, lambda: tv.constant(2.0) * 3.0, lambda: tv.constant(5.0))
    nodes = snapshot(tv.get_default_graph())
    fetch = [(y.op.name, 0)]
    kept = prune(nodes, fetch, [], {("p", 0)})
    out, _, _ = optimize(kept, fetch, [], {("p", 0)})
    types = [n.type for n in out.values()]
    assert types.count("Switch") == 2 and "Merge" in types  # pivot switches kept
    assert sum(n.type == "Identity" for n in out.values()) == 2  # both pivots kept
    assert "Mul" in types  # not folded: its constant waits on the pivot


def test_optimize_on_literal_nodes_keeps_the_pivot_and_its_constants():
    from tensorvm.framework.graph_def import Node
    c = {"value": np.float32(2), "dtype": tv.float32}
    nodes = {"p": Node("p", "Placeholder", attrs={"dtype": tv.bool}),
             "sw": Node("sw", "Switch", (("p", 0), ("p", 0)), num_outputs=2),
             "pivot": Node("pivot", "Identity", (("sw", 1),)),
             "k": Node("k", "Const", (), ("pivot",), attrs=c),
             "k2": Node("k2", "Const", attrs=c),
             "sum": Node("sum", "Add", (("k", 0), ("k2", 0))),
             "m": Node("m", "Merge", (("k2", 0), ("sum", 0)), num_outputs=2)}
    out, fetches, _ = optimize(nodes, [("m", 0)], [], {("p", 0)})
    assert [n.type for n in out.values()] == ["Switch", "Identity", "Const", "Const", "Add",
                                               "Merge"]
    assert out["k"].control_inputs == ("pivot",) and fetches == [("m", 0)]


# ---- while_loop ---------------------------------------------------------------------------------
def test_while_loop_closed_forms():
    i, s = tv.while_loop(lambda i, s: i < 10, lambda i, s: (i + 1, s + i * i), [0, 0])
    n = tv.placeholder(tv.int32, [])
    fact = tv.while_loop(lambda k, f: k <= n, lambda k, f: (k + 1, f * tv.cast(k, tv.float64)),
                         (1, tv.constant(1.0, tv.float64)))[1]
    capped = tv.while_loop(lambda k: k < 100, lambda k: k + 1, [0], maximum_iterations=7)
    with tv.Session() as sess:
        assert sess.run([i, s]) == [10, sum(k * k for k in range(10))]
        assert sess.run(fact, {n: 10}) == 3628800.0
        assert sess.run(capped) == 7


def test_while_loop_power_iteration_against_numpy():
    a = np.array([[2.0, 1.0], [1.0, 3.0]])
    A = tv.constant(a)
    def body(k, v):
        av = tv.matmul(A, v)
        return k + 1, av / tv.sqrt(tv.reduce_sum(av * av))
    v = tv.while_loop(lambda k, v: k < 50, body,
                      [0, tv.constant([[1.0], [0.0]], tv.float64)])[1]
    _, vecs = np.linalg.eigh(a)
    got = run(v).ravel()
    np.testing.assert_allclose(np.abs(got), np.abs(vecs[:, -1]), rtol=1e-6)


def test_while_loop_gradients_by_central_differences():
    def build(a, x0):  # x_{k+1} = sin(x_k) * a, three times; a is captured
        return tv.while_loop(lambda k, x: k < 3, lambda k, x: (k + 1, tv.sin(x) * a),
                             [0, x0])[1]
    check_gradients(build, np.array([0.7, 1.3]), np.array([0.4, -0.9]))

    def cumprod(a):
        return tv.while_loop(lambda k, p, s: k < 4,
                             lambda k, p, s: (k + 1, p * a, s + p), [0, tv.ones_like(a),
                                                                     tv.zeros_like(a)])[2]
    check_gradients(cumprod, np.array([1.1, -0.8, 0.5]))


def test_while_loop_shape_invariants_and_bad_bodies():
    x = tv.constant([1.0])
    grown = tv.while_loop(lambda t: tv.size(t) < 8, lambda t: tv.concat([t, t], 0), [x],
                          shape_invariants=[tv.TensorShape([None])])
    assert grown.shape.as_list() == [None]
    np.testing.assert_array_equal(run(grown), np.ones(8))
    with pytest.raises(tv.errors.InvalidArgumentError,
                       match=rf"enters the loop with shape \(1,\), but has shape \(2,\).*{HERE}"):
        tv.while_loop(lambda t: tv.size(t) < 8, lambda t: tv.concat([t, t], 0), [x])
    with pytest.raises(tv.errors.InvalidArgumentError, match=f"float32 but the body returns "
                                                             f"int32.*{HERE}"):
        tv.while_loop(lambda t: t < 3.0, lambda t: tv.cast(t, tv.int32), [tv.constant(0.0)])
    with pytest.raises(tv.errors.InvalidArgumentError, match="scalar bool"):
        tv.while_loop(lambda t: t, lambda t: t + 1.0, [tv.constant(0.0)])
    with pytest.raises(tv.errors.InvalidArgumentError, match="structure of loop_vars"):
        tv.while_loop(lambda a, b: a < 3, lambda a, b: a + 1, [0, 1])


def test_while_loop_spanning_devices_runs_each_devices_part():
    # (refused before issue 27; tests/test_loops_across_devices.py has the full checks)
    def body(k):
        with tv.device("/job:ps/task:0"):
            k = k + 1
        with tv.device("/job:worker/task:0"):
            return k * 1
    r = tv.while_loop(lambda k: k < 3, body, [0], name="outer_loop")
    assert run(r) == 3


def test_while_and_cond_nest_both_ways():
    x = tv.placeholder(tv.int32, [])
    # collatz steps: a cond inside a while body
    steps = tv.while_loop(
        lambda n, k: n > 1,
        lambda n, k: (tv.cond(tv.equal(n % 2, 0), lambda: n // 2, lambda: 3 * n + 1), k + 1),
        [x, 0])[1]
    calls = []
    lazy = tv.cond(x > 100,
                   lambda: tv.while_loop(lambda k: k < tv.py_func(
                       lambda: calls.append(1) or np.int32(3), [], tv.int32), lambda k: k + 1,
                       [0]),
                   lambda: tv.constant(-1))
    inner = tv.while_loop(lambda i, t: i < 3,
                          lambda i, t: (i + 1, t + tv.while_loop(lambda j: j < i, lambda j: j + 1,
                                                                 [0])), [0, 0])[1]
    with tv.Session() as s:
        assert int(s.run(steps, {x: 27})) == 111
        assert int(s.run(lazy, {x: 5})) == -1 and calls == []
        assert int(s.run(lazy, {x: 500})) == 3 and calls == [1] * 4  # cond runs 4 times
        assert int(s.run(inner)) == 0 + 1 + 2


def test_while_back_prop_false_has_no_gradient():
    a = tv.placeholder(tv.float32, [])
    r = tv.while_loop(lambda k, v: k < 3, lambda k, v: (k + 1, v * a), [0, a], back_prop=False)
    assert tv.gradients(r[1], a) == [None]


# ---- Assert, Print, tuple, group, identity ------------------------------------------------------
def test_assert_passes_or_fails_with_its_data():
    x = tv.placeholder(tv.float32, [3])
    check = tv.Assert(tv.reduce_all(x > 0), ["x must be positive:", x])
    with tv.control_dependencies([check]):
        y = tv.identity(x) * 2.0
    with tv.Session() as s:
        np.testing.assert_array_equal(s.run(y, {x: [1, 2, 3]}), [2, 4, 6])
        with pytest.raises(tv.errors.InvalidArgumentError,
                           match=r"assertion failed: \[x must be positive:\] \[1 -2 3\]"):
            s.run(y, {x: [1, -2, 3]})


def test_print_writes_to_stderr_and_passes_its_input(capfd):
    x = tv.placeholder(tv.float32, [2])
    y = tv.Print(x, [x, tv.reduce_sum(x)], message="x and sum: ", first_n=2)
    g = tv.gradients(tv.reduce_sum(y * y), x)[0]
    with tv.Session() as s:
        for _ in range(3):
            np.testing.assert_array_equal(s.run(y, {x: [1, 2]}), [1, 2])
        np.testing.assert_array_equal(s.run(g, {x: [1, 2]}), [2, 4])
    err = capfd.readouterr().err
    assert err.count("x and sum: [1 2]3") == 2


def test_tuple_gates_every_output_on_all_inputs():
    a = tv.constant(1.0)
    b = tv.constant(2.0) * 3.0
    ta, tb = tv.tuple([a, b])
    gate = ta.op.control_inputs[0]
    assert gate is tb.op.control_inputs[0]
    assert {o.name for o in gate.control_inputs} == {a.op.name, b.op.name}
    assert run([ta, tb]) == [1.0, 6.0]
    assert tv.identity(tv.Variable(3.0)).dtype == tv.float32


def test_gradients_through_nested_cond_and_while():
    def cond_in_while(a):  # x <- x * a while positive else x + a, three times
        return tv.while_loop(
            lambda k, x: k < 3,
            lambda k, x: (k + 1, tv.cond(tv.reduce_sum(x) > 0, lambda: x * a, lambda: x + a)),
            [0, tv.ones_like(a)])[1]
    check_gradients(cond_in_while, np.array([0.5, 1.5]))
    check_gradients(cond_in_while, np.array([-2.0, -1.5]))

    def while_in_cond(a):
        return tv.cond(tv.reduce_sum(a) > 0,
                       lambda: tv.while_loop(lambda k, x: k < 2, lambda k, x: (k + 1, x * a),
                                             [0, a])[1],
                       lambda: a * 3.0)
    check_gradients(while_in_cond, np.array([0.5, 1.5]))
    check_gradients(while_in_cond, np.array([-0.5, -1.5]))


def test_while_loop_trains_a_variable():
    """A loop over a Variable's value, minimized by SGD (the gradient reaches the variable
    through the loop's captured input)."""
    w = tv.Variable(0.5, dtype=tv.float64)
    y = tv.while_loop(lambda k, x: k < 3, lambda k, x: (k + 1, x * w), [0, tv.constant(1.0,
                                                                          tv.float64)])[1]
    loss = (y - 8.0) ** 2  # w**3 == 8 at w == 2
    train = tv.train.GradientDescentOptimizer(0.003).minimize(loss)
    with tv.Session() as s:
        s.run(tv.global_variables_initializer())
        s.run(train, steps=400)
        assert abs(s.run(w) - 2.0) < 1e-3


def test_variable_updates_in_a_loop_body_run_every_iteration():
    v = tv.Variable(0, name="counter")
    total = tv.Variable(0.0, name="total")

    def body(k, acc):
        upd = v.assign_add(1)  # a Python constant: built in the body, run each iteration
        with tv.control_dependencies([total.assign_add(tv.cast(k, tv.float32))]):
            return k + 1 + upd * 0, acc + tv.cast(upd, tv.float32)
    r = tv.while_loop(lambda k, acc: k < 5, body, [0, 0.0])
    with tv.Session() as s:
        s.run(tv.global_variables_initializer())
        k, acc = s.run(r)
        assert (k, acc) == (5, 1.0 + 2 + 3 + 4 + 5)
        assert s.run([v, total]) == [5, 0.0 + 1 + 2 + 3 + 4]


def test_while_loop_placed_away_from_the_state_its_body_updates():
    with tv.device("/job:ps/task:0"):
        v = tv.Variable(0.0)
    with tv.device("/job:worker/task:0"):  # a frame over worker and PS (issue 27)
        away = tv.while_loop(lambda k: k < 3, lambda k: k + 1 + tv.cast(v.assign_add(1.0),
                                                                         tv.int32) * 0, [0])
    assert "worker" in away.op.device
    with tv.Session() as s:
        s.run(v.initializer)
        assert s.run(away) == 3 and s.run(v) == 3.0
    # Without a device of its own, the loop goes where its state is.
    r = tv.while_loop(lambda k: k < 3, lambda k: k + 1 + tv.cast(v.assign_add(1.0), tv.int32)
                      * 0, [0])
    assert "ps" in r.op.device
    with tv.Session() as s:
        s.run(v.initializer)
        assert s.run(r) == 3 and s.run(v) == 3.0


def test_loop_body_waiting_on_an_outside_op():
    v = tv.Variable(1.0)
    bump = v.assign_add(10.0)

    def body(k, acc):
        with tv.control_dependencies([bump]):  # an outside op: the loop op waits for it
            return k + 1, acc + 1.0
    r = tv.while_loop(lambda k, acc: k < 2, body, [0, 0.0])
    assert bump.op in r[0].op.control_inputs
    x = tv.placeholder(tv.float32, [2])
    with pytest.raises(tv.errors.InvalidArgumentError,
                       match=r"'doubling': .* has shape <unknown> after one iteration"):
        tv.while_loop(lambda t: tv.size(t) < 8,  # a py_func's shape is unknown statically
                      lambda t: tv.py_func(lambda a: np.concatenate([a, a]), [t], tv.float32),
                      [x], name="doubling")
    with tv.Session() as s:
        s.run(v.initializer)
        assert s.run(r)[1] == 2.0 and s.run(v) == 11.0  # the bump ran, once
