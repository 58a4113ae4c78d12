"""Floating devices through the passes (issue 23): ``/job:J/task:*<group>`` for stateless ops
(Dask schedules them anywhere), pinned as a bare ``/job:J`` is for anything holding state.
Pure passes on literal nodes, and one in-process session."""
import numpy as np
import pytest

import tensorvm as tv
from tensorvm import passes
from tensorvm.framework.device_spec import DeviceSpec
from tensorvm.framework.graph_def import Node

W0 = "/job:worker/replica:0/task:0/device:CPU:0"
FA = "/job:worker/replica:0/task:*a/device:CPU:0"


def test_device_spec_reads_and_prints_a_floating_task():
    s = DeviceSpec.parse("/job:worker/task:*a")
    assert s.floating and s.task == "*a"
    assert s.with_defaults().to_string() == FA
    assert DeviceSpec.parse("/job:worker/task:*").floating
    assert not DeviceSpec.parse("/job:worker/task:1").floating
    with pytest.raises(tv.errors.InvalidArgumentError):
        DeviceSpec.parse("/job:worker/task:*a-b")


def test_stateless_ops_float_stateful_ones_are_pinned_as_today():
    nodes = {
        "c": Node("c", "Const", device="/job:worker/task:*a"),
        "n": Node("n", "Neg", (("c", 0),), device="/job:worker/task:*a"),
        "v": Node("v", "VariableV2", device="/job:worker/task:*a", colocation="v",
                  stateful=True),
        "r": Node("r", "Identity", (("v", 0),), device="/job:worker/task:*a", colocation="v"),
        "p": Node("p", "PyFunc", (("n", 0),), device="/job:worker/task:*a", stateful=True),
        "w": Node("w", "MRWrite", device="/job:worker/task:*a", stateful=True),  # idempotent
        "g": Node("g", "Neg", (("c", 0),), device="/job:worker/task:*a/device:GPU:0"),
    }
    d = passes.place(nodes, W0)
    assert d["c"] == d["n"] == d["w"] == FA
    assert d["v"] == d["r"] == d["p"] == d["g"] == W0  # as /job:worker would be
    # a bare job keeps today's meaning: the default's task
    assert passes.place({"x": Node("x", "Neg", device="/job:worker")}, W0)["x"] == W0


def test_floating_device_checks_its_job_not_a_task():
    nodes = {"c": Node("c", "Const", device="/job:worker/task:*a")}
    assert passes.place(nodes, W0, known_tasks={("worker", 0)})["c"] == FA
    with pytest.raises(tv.errors.InvalidArgumentError, match="job that is not in the cluster"):
        passes.place({"c": Node("c", "Const", device="/job:map/task:*")}, W0,
                     known_tasks={("worker", 0)})


def test_a_floating_group_is_its_own_device_for_partition_stage_and_compile():
    nodes = {"x": Node("x", "Const", device="/job:worker/task:0"),
             "a": Node("a", "Neg", (("x", 0),), device="/job:worker/task:*a"),
             "b": Node("b", "Neg", (("a", 0),), device="/job:worker/task:*b"),
             "y": Node("y", "Neg", (("b", 0),), device="/job:worker/task:0")}
    devs = passes.place(nodes, W0)
    part = passes.partition(nodes, devs, set())
    st = passes.stage(part)
    assert (st["x"], st["a"], st["b"], st["y"]) == (0, 1, 2, 3)
    plan = passes.compile_plan(part, st, [("y", 0)], [])
    names = [t.name for t in plan.tasks]
    assert "tvm_g_worker_float_cpu0_s1-a" in names and "tvm_g_worker_float_cpu0_s2-b" in names
    assert len(plan.sends) == 3  # pinned -> a -> b -> pinned: ordinary Send/Recv edges


def test_floating_ops_run_on_the_local_cpu_in_process():
    g = tv.Graph()
    with g.as_default():
        x = tv.placeholder(tv.float32, [3])
        v = tv.Variable(np.ones(3, np.float32), name="v")
        with tv.device("/job:worker/task:*a"):
            y = x * 2.0 + 1.0
        with tv.device("/job:worker/task:*b"):
            z = tv.reduce_sum(y * v)
        init = tv.global_variables_initializer()
    with tv.Session(graph=g) as s:
        s.run(init)
        assert s.run(z, {x: [1, 2, 3]}) == 15.0
        devs = s.plan(z, feed_dict={x: [1, 2, 3]}).devices
    assert sum(DeviceSpec.parse(d).floating for d in devs) == 2


def test_speculative_reducers_avoid_the_straggler():
    from tensorvm.mapreduce.speculate import reduce_devices
    # every device still busy (losers running): the straggler is still avoided
    assert reduce_devices(["w0", "w1"], {"w0", "w1"}, {"w1"}) == ["w0"]
    # the straggler's loser ended: it is idle, yet no reduce goes there
    assert reduce_devices(["w0", "w1"], {"w0"}, {"w1"}) == ["w0"]
    assert reduce_devices(["w0", "w1"], set(), set()) == ["w0", "w1"]
