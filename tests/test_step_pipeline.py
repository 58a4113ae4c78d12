"""The step pipeline as one frozen value (issue 7): ``Step`` threaded through the passes, each
``*_step`` a pure function, and a pipeline that can stop after any pass."""
import numpy as np
import pytest

import tensorvm as tv
from tensorvm import passes
from tensorvm.framework.graph_def import Node, snapshot
from tensorvm.passes.step import Step, pipeline, run_pipeline

A = "/job:a/replica:0/task:0/device:CPU:0"
B = "/job:b/replica:0/task:0/device:CPU:0"


def const(name, device=""):
    return Node(name, "Const", attrs={"value": np.float32(1), "dtype": tv.float32},
                device=device)


def neg(name, src, device=""):
    return Node(name, "Neg", ((src, 0),), device=device)


def nodes_ab():
    return {n.name: n for n in (const("a", A), neg("b", "a", B), neg("c", "b", A),
                                neg("unused", "a"))}


@pytest.mark.parametrize("stop, filled", [
    ("prune", ()), ("optimize", ()), ("place", ("devices",)),
    ("partition", ("devices", "partition")), ("stage", ("devices", "partition", "stages")),
    ("compile", ("devices", "partition", "stages", "plan")),
])
def test_stop_after_any_pass(stop, filled):
    start = Step.start(nodes_ab(), fetches=[("c", 0)])
    s = run_pipeline(start, pipeline(A, fold=False), stop_after=stop)
    assert s.done == stop
    for f in ("devices", "partition", "stages", "plan"):
        assert (getattr(s, f) is not None) == (f in filled), f
    assert "unused" not in s.nodes
    assert start.done == "start" and "unused" in start.nodes  # the input Step is unchanged


def test_pipeline_equals_the_passes_composed_by_hand():
    nodes = nodes_ab()
    s = run_pipeline(Step.start(nodes, fetches=[("c", 0)]), pipeline(A, fold=False))
    pruned = passes.prune(nodes, [("c", 0)], [], set())
    opt, fetches, targets = passes.optimize(pruned, [("c", 0)], [], set(), fold=False)
    devices = passes.place(opt, A, all_nodes=nodes)
    part = passes.partition(opt, devices, set())
    plan = passes.compile_plan(part, passes.stage(part), fetches, [], graph_tag="g")
    assert str(s.plan) == str(plan)
    assert [p.tensor for p in s.partition.sends] == [("a", 0), ("b", 0)]


def test_unroll_is_in_the_pipeline_only_for_several_steps():
    names = [getattr(p, "func", p).__name__ for p in pipeline(A, steps=3)]
    assert names == ["prune_step", "optimize_step", "place_step", "unroll_step",
                     "partition_step", "stage_step", "compile_step"]
    assert "unroll_step" not in [getattr(p, "func", p).__name__ for p in pipeline(A)]


def test_prune_step_names_an_unfed_placeholder():
    x = Node("x", "Placeholder", attrs={"dtype": tv.float32, "shape": (None, 3)},
             location="model.py:7")
    nodes = {"x": x, "y": neg("y", "x")}
    with pytest.raises(tv.errors.InvalidArgumentError,
                       match=r"feed a value for placeholder tensor 'x' with dtype float32 and "
                             r"shape \[\?,3\](.|\n)*created at model.py:7"):
        run_pipeline(Step.start(nodes, fetches=[("y", 0)]), pipeline(A), stop_after="prune")
    s = run_pipeline(Step.start(nodes, fetches=[("y", 0)], feeds=[("x", 0)]), pipeline(A))
    assert s.plan.feeds == (("x", 0),)


def test_stop_after_an_unknown_pass_is_refused():
    with pytest.raises(ValueError, match="stop_after='fold' is not one of"):
        run_pipeline(Step.start({}), pipeline(A), stop_after="fold")


def test_session_plans_through_the_step_pipeline(g):
    x = tv.placeholder(tv.float32, [2], name="x")
    y = tv.reduce_sum(x * 2.0, name="y")
    with tv.Session() as s:
        plan = s.plan(y, {x: [1.0, 2.0]})
        assert float(s.run(y, {x: [1.0, 2.0]})) == 6.0
    step = run_pipeline(Step.start(snapshot(g), [("y", 0)], feeds=[("x", 0)]),
                        pipeline(plan.devices[0], graph_tag=f"g{g.uid}"))
    assert str(step.plan) == str(plan)


def test_log_device_placement_logs_each_op(g, caplog):
    x = tv.constant([1.0, 2.0], name="x")
    y = tv.negative(x, name="neg")
    with caplog.at_level("INFO", logger="tensorvm"):
        with tv.Session(config=tv.ConfigProto(log_device_placement=True)) as s:
            s.run(y)
    lines = [r.getMessage() for r in caplog.records if r.name == "tensorvm"]
    assert any(line.startswith("neg: /job:localhost/replica:0/task:0/device:CPU:0")
               for line in lines), lines


def test_trace_level_full_trace_fills_run_metadata(g):
    RunMetadata, RunOptions = tv.RunMetadata, tv.RunOptions
    y = tv.reduce_sum(tv.constant([1.0, 2.0]) * 3.0)
    md = RunMetadata()
    with tv.Session() as s:
        assert float(s.run(y, options=RunOptions(trace_level=RunOptions.FULL_TRACE),
                           run_metadata=md)) == 9.0
        assert md.step_stats and md.devices() == {"/job:localhost/replica:0/task:0/device:CPU:0"}
        md2 = RunMetadata()
        s.run(y, options=RunOptions(), run_metadata=md2)
        assert md2.step_stats == []


def test_placement_constraints_are_computed_once_per_graph_version(monkeypatch):
    """The whole graph's colocation facts are computed once per snapshot (one object per
    graph version), whatever the fetches; a new graph version computes them again."""
    from tensorvm.passes import step as step_mod
    calls = []
    real = step_mod.colocation_constraints

    def counted(nodes):
        calls.append(len(nodes))
        return real(nodes)
    monkeypatch.setattr(step_mod, "colocation_constraints", counted)
    g = tv.Graph()
    with g.as_default():
        v = tv.Variable(1.0, name="v")
        a = v * 2.0
        b = v + 3.0
        with tv.Session() as s:
            s.run(v.initializer)
            assert s.run(a) == 2.0 and s.run(b) == 4.0 and s.run([a, b]) == [2.0, 4.0]
            assert len(calls) == 1
            c = tv.negative(v)
            assert s.run(c) == -1.0
            assert len(calls) == 2
    snap = snapshot(g)
    assert step_mod.graph_constraints(snap) is step_mod.graph_constraints(snap)


def test_placement_constraints_do_not_keep_a_graph_alive():
    """The constraints cache holds its snapshots weakly: a graph that is gone leaves no entry
    (its constants are not kept in memory by planning)."""
    import gc
    import weakref as _weakref

    from tensorvm.passes import step as step_mod
    g = tv.Graph()
    with g.as_default():
        tv.constant(np.zeros(1000, np.float32), name="big")
    snap = snapshot(g)
    step_mod.graph_constraints(snap)
    key, alive = id(snap), _weakref.ref(snap)
    assert key in step_mod._CONSTRAINTS
    del g, snap
    gc.collect()
    assert alive() is None and key not in step_mod._CONSTRAINTS
