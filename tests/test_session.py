"""Session behaviour on one device: fetch structures, feeds, errors, plan cache, optimisation."""
import collections
import os

import numpy as np
import pytest

import tensorvm as tv

THIS_FILE = os.path.basename(__file__)



def test_fetch_structures_mirror_the_request(g):
    a = tv.constant([1.0, 2.0])
    b = tv.reduce_sum(a)
    Pair = collections.namedtuple("Pair", "x y")
    with tv.Session() as s:
        out = s.run({"a": a, "nested": [b, (a, b)], "pair": Pair(b, a), "op": b.op})
    np.testing.assert_array_equal(out["a"], [1.0, 2.0])
    assert out["nested"][0] == 3.0 and isinstance(out["nested"][1], tuple)
    assert isinstance(out["pair"], Pair) and out["pair"].x == 3.0
    assert out["op"] is None


def test_fetch_by_name_and_feed_by_name(g):
    x = tv.placeholder(tv.float32, [2], name="x")
    tv.multiply(x, 3.0, name="y")
    with tv.Session() as s:
        np.testing.assert_allclose(s.run("y:0", {"x:0": [1, 2]}), [3, 6])
        assert s.run("y", {"x:0": [1, 2]}) is None  # an op name fetches the op


def test_feed_any_tensor_cuts_the_graph(g):
    a = tv.constant(2.0)
    b = a * 10.0
    c = b + 1.0
    with tv.Session() as s:
        assert s.run(c) == 21.0
        assert s.run(c, {b: 5.0}) == 6.0
        assert s.run(b, {b: 7.0}) == 7.0


def test_missing_feed_names_placeholder_and_line(g):
    x = tv.placeholder(tv.float32, [None, 3], name="inputs")  # the line the error must name
    line = __import__("inspect").currentframe().f_lineno - 1
    y = tv.reduce_sum(x)
    with tv.Session() as s, pytest.raises(tv.errors.InvalidArgumentError) as e:
        s.run(y)
    msg = str(e.value)
    assert "You must feed a value for placeholder tensor 'inputs'" in msg
    assert f"{THIS_FILE}:{line}" in msg


def test_feed_of_wrong_shape(g):
    x = tv.placeholder(tv.float32, [None, 3], name="x")
    with tv.Session() as s, pytest.raises(tv.errors.InvalidArgumentError,
                                          match=r"Cannot feed value of shape \(2, 4\).*'x:0'"):
        s.run(x * 2.0, {x: np.zeros((2, 4))})


def test_feed_of_wrong_dtype(g):
    x = tv.placeholder(tv.int32, [2], name="ints")
    with tv.Session() as s:
        with pytest.raises(tv.errors.InvalidArgumentError, match="'ints:0'.*lose data"):
            s.run(x, {x: np.array([1.5, 2.5])})
        with pytest.raises(tv.errors.InvalidArgumentError, match="dtype"):
            s.run(x, {x: np.array(["a", "b"])})


def test_fetch_and_feed_from_another_graph(g):
    other = tv.Graph()
    with other.as_default():
        foreign = tv.constant(1.0, name="foreign")
    mine = tv.constant(2.0)
    with tv.Session() as s:
        with pytest.raises(tv.errors.InvalidArgumentError, match="'foreign:0'.*not an element"):
            s.run(foreign)
        with pytest.raises(tv.errors.InvalidArgumentError, match="'foreign:0'.*not an element"):
            s.run(mine, {foreign: 3.0})


def test_unknown_fetch_name(g):
    tv.constant(1.0, name="known")
    with tv.Session() as s:
        with pytest.raises(tv.errors.NotFoundError, match="'nope'"):
            s.run("nope:0")
        with pytest.raises(tv.errors.NotFoundError, match="'nope'"):
            s.run("nope")
        with pytest.raises(tv.errors.NotFoundError, match="only 1 outputs"):
            s.run("known:3")


def test_shape_mismatch_fails_at_construction_with_line(g):
    a = tv.placeholder(tv.float32, [2, 3])
    b = tv.placeholder(tv.float32, [4, 5])
    with pytest.raises(tv.errors.InvalidArgumentError) as e:
        tv.matmul(a, b, name="bad_matmul")
    line = __import__("inspect").currentframe().f_lineno - 1
    assert "bad_matmul" in str(e.value) and f"{THIS_FILE}:{line}" in str(e.value)
    with pytest.raises(tv.errors.InvalidArgumentError, match="Incompatible shapes"):
        tv.add(tv.zeros([3]), tv.zeros([4]))


def test_dtype_mismatch_fails_at_construction(g):
    a = tv.constant([1.0])
    b = tv.constant([1], dtype=tv.int32)
    with pytest.raises(tv.errors.InvalidArgumentError, match="one dtype.*float32.*int32"):
        tv.add(a, b, name="mixed")


def test_runtime_error_names_op_and_line(g):
    x = tv.placeholder(tv.float32, [None])
    y = tv.reshape(x, [2, 2], name="to_square")
    line = __import__("inspect").currentframe().f_lineno - 1
    with tv.Session() as s, pytest.raises(tv.errors.InvalidArgumentError) as e:
        s.run(y, {x: np.zeros(3)})
    assert "to_square" in str(e.value) and f"{THIS_FILE}:{line}" in str(e.value)


def test_uninitialised_variable(g):
    v = tv.Variable(np.zeros(3), name="weights")
    with tv.Session() as s, pytest.raises(tv.errors.FailedPreconditionError,
                                          match="uninitialized value weights"):
        s.run(v)


def test_constant_folding_and_cse_visible_in_plan(g):
    x = tv.placeholder(tv.float32, [3])
    c = tv.constant(2.0) * tv.constant(3.0) + 1.0  # folds to one Const
    y1 = tv.exp(x) * c
    y2 = tv.exp(x) * c  # the same expression: merged
    out = y1 + y2
    with tv.Session() as s:
        plan = s.plan(out, {x: np.ones(3)})
        assert plan.kernels < plan.graph_ops
        ops = [op for t in plan.tasks for op in t.ops]
        assert sum(1 for o in ops if o.startswith("Exp")) == 1
        np.testing.assert_allclose(s.run(out, {x: np.zeros(3)}), [14, 14, 14])


def test_stateful_and_random_ops_are_never_folded_or_merged(g):
    v = tv.Variable(1.0, name="v")
    a = tv.assign_add(v, 1.0)
    b = tv.assign_add(v, 1.0)
    with tv.Session() as s:
        s.run(v.initializer)
        plan = s.plan([a, b])
        names = [op for t in plan.tasks for op in t.ops]
        assert "AssignAdd" in names and "AssignAdd_1" in names
        s.run([a, b])
        assert s.run(v) == 3.0


def test_plan_cache_hits_yet_state_moves(g):
    v = tv.Variable(0.0, name="counter")
    inc = v.assign_add(1.0)
    with tv.Session() as s:
        s.run(v.initializer)
        for _ in range(5):
            s.run(inc)
        assert s.plans_compiled == 2  # the initializer's plan and the increment's
        assert s.run(v) == 5.0


def test_steps_runs_k_steps_in_one_call(g):
    v = tv.Variable(0.0)
    inc = v.assign_add(2.0)
    with tv.Session() as s:
        s.run(v.initializer)
        assert s.run(inc, steps=10) == 20.0
        assert s.run(v) == 20.0
        with pytest.raises(tv.errors.InvalidArgumentError, match="steps"):
            s.run(inc, steps=0)


def test_control_dependencies_order_updates(g):
    v = tv.Variable(1.0)
    with tv.control_dependencies([v.assign(10.0)]):
        after = tv.identity(v.assign_add(5.0))
    with tv.Session() as s:
        s.run(v.initializer)
        assert s.run(after) == 15.0


def test_name_scopes_and_unique_names(g):
    with tv.name_scope("layer"):
        a = tv.constant(1.0, name="w")
        b = tv.constant(1.0, name="w")
    assert a.op.name == "layer/w" and b.op.name == "layer/w_1"


def test_graph_def_round_trip_is_json(g):
    import json
    x = tv.placeholder(tv.float32, [None, 2], name="x")
    w = tv.constant(np.arange(4, dtype=np.float32).reshape(2, 2), name="w")
    tv.reduce_sum(tv.matmul(x, w), axis=1, name="y")
    d = json.loads(json.dumps(g.as_graph_def()))
    from tensorvm.framework.graph_def import graph_from_dict
    g2 = graph_from_dict(d)
    with tv.Session(graph=g2) as s:
        got = s.run("y:0", {"x:0": [[1.0, 1.0]]})
    np.testing.assert_allclose(got, [6.0])


def test_closed_session_refuses(g):
    s = tv.Session()
    s.close()
    with pytest.raises(RuntimeError, match="closed"):
        s.run(tv.constant(1.0))


def test_threads_share_a_session(g):
    import threading
    v = tv.Variable(0.0)
    inc = v.assign_add(1.0)
    with tv.Session() as s:
        s.run(v.initializer)

        def work():
            for _ in range(50):
                s.run(inc)
        ts = [threading.Thread(target=work) for _ in range(8)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        assert s.run(v) == 400.0


def test_trace_fills_run_metadata(g):
    x = tv.constant(np.ones(4))
    y = tv.reduce_sum(x * 2.0)
    md = tv.RunMetadata()
    with tv.Session() as s:
        s.run(y, options=tv.RunOptions(trace=True), run_metadata=md)
    assert md.step_stats and md.step_stats[0]["device"].endswith("CPU:0")
    assert md.step_stats[0]["end"] >= md.step_stats[0]["start"]


def test_random_ops_never_folded_or_merged_and_new_each_run(g):
    tv.set_random_seed(3)
    a = tv.random_normal([4], seed=1)
    b = tv.random_normal([4], seed=1)  # the same op twice: still two draws, never merged
    both = tv.stack([a, b])
    with tv.Session() as s:
        plan = s.plan(both)
        ops = [op for t in plan.tasks for op in t.ops]
        assert sum(1 for o in ops if o.startswith("random_normal")) == 2
        assert not any(t.program.instrs[0].type == "Const" and len(t.program.instrs) == 1
                       for t in plan.tasks)
        first, second = s.run(both), s.run(both)
        assert s.plans_compiled == 1  # cached plan, yet fresh values
        assert not np.array_equal(first, second)


def test_control_dependency_on_a_fed_placeholder_is_satisfied_by_the_feed(g):
    x = tv.placeholder(tv.float32, [2], name="x")
    with tv.control_dependencies([x]):
        y = tv.constant([1.0, 2.0]) * 2.0
    with tv.Session() as s:
        np.testing.assert_allclose(s.run(y, {x: [0.0, 0.0]}), [2.0, 4.0])


def test_large_results_are_not_constant_folded(g):
    big = tv.zeros([2048, 2048]) + 1.0  # 16 MiB: cheaper to compute than to ship
    small = tv.zeros([4]) + 1.0
    with tv.Session() as s:
        plan = s.plan([big, small])
        kernels = [i.type for t in plan.tasks for i in t.program.instrs]
        assert kernels.count("Add") == 1
        assert s.run(big).sum() == 2048 * 2048


def test_steps_across_devices_unroll_and_fuse_the_state_chain(g):
    with tv.device("/job:ps/task:0"):
        w = tv.Variable(np.array([4.0, -2.0]), name="w")
    with tv.device("/job:worker/task:0"):
        loss = tv.reduce_sum(w * w)
        train = tv.train.GradientDescentOptimizer(0.1).minimize(loss)
    with tv.Session() as s:
        s.run(w.initializer)
        s.run(train, steps=5)
        np.testing.assert_allclose(s.run(w), np.array([4.0, -2.0]) * 0.8 ** 5)
        one = s.plan(train)
        unrolled = s._plan_for([], [train], (), 5)
    ps_tasks = [t for t in unrolled.tasks if "/job:ps/" in t.device]
    # a step is read (PS) -> gradient (worker) -> update (PS): one step alone needs 2 PS tasks,
    # five chained steps need 6, not 10, since each update shares a task with the next read
    assert sum("/job:ps/" in t.device for t in one.tasks) == 2
    assert len(ps_tasks) == 6
