"""The planning passes' fast paths (issue 22: plan ~100k ops in <= 2 CPU-s) give what the
general paths give: ``Node.replace`` is ``dataclasses.replace``; placement reuses a lone op's
device only where nothing about the op itself could change it."""
import dataclasses

import pytest

from tensorvm.framework.errors import InvalidArgumentError
from tensorvm.framework.graph_def import Node
from tensorvm.passes.place import place, place_explained
from tensorvm.passes.stage import stage
from tensorvm.passes.partition import partition


def test_node_replace_changes_only_the_fields_named():
    n = Node("a", "Neg", (("b", 0),), ("c",), {"k": 1}, "/job:w", out_shapes=((2,),))
    fast = n.replace(inputs=(), device="/job:w/task:1")
    assert type(fast) is Node
    assert fast == Node("a", "Neg", (), ("c",), {"k": 1}, "/job:w/task:1", out_shapes=((2,),))
    assert fast.name == "a" and n.inputs == (("b", 0),)  # the original is unchanged
    with pytest.raises(dataclasses.FrozenInstanceError):
        fast.name = "x"
    with pytest.raises(dataclasses.FrozenInstanceError):
        fast.extra = 1
    with pytest.raises(TypeError, match="no field 'nope'"):
        n.replace(nope=1)


def test_node_defaults_and_pickling():
    import pickle
    a, b = Node("a", "NoOp"), Node("b", "NoOp")
    assert a.attrs == {} and a.attrs is not b.attrs  # a new dict per node, as before
    assert (a.inputs, a.device, a.colocation, a.num_outputs, a.stateful) == ((), "", None, 1,
                                                                            False)
    n = Node("c", "Add", (("a", 0), ("b", 0)), attrs={"T": 1}, device="/job:w/task:0")
    back = pickle.loads(pickle.dumps(n))
    assert type(back) is Node and back == n and repr(back) == "%c = Add(a:0, b:0) @/job:w/task:0"


def test_lone_ops_on_one_device_string_each_meet_the_task_check():
    nodes = {"a": Node("a", "Neg", device="/job:w/task:0"),
             "b": Node("b", "Neg", device="/job:w/task:0"),
             "c": Node("c", "Neg", device="/job:w/task:5")}
    with pytest.raises(InvalidArgumentError, match="'c'"):
        place(nodes, "/job:w/task:0", known_tasks={("w", 0)})
    devs = place({k: nodes[k] for k in "ab"}, "", known_tasks={("w", 0)})
    assert devs == {"a": "/job:w/replica:0/task:0/device:CPU:0",
                    "b": "/job:w/replica:0/task:0/device:CPU:0"}


def test_every_lone_gpu_op_soft_placed_on_a_cpu_is_reported():
    nodes = {"a": Node("a", "Neg", device="/gpu:0"), "b": Node("b", "Neg", device="/gpu:0")}
    devs, notes = place_explained(nodes, "/job:w/task:0", gpus=0)
    assert set(devs.values()) == {"/job:w/replica:0/task:0/device:CPU:0"}
    assert [f.ops for f in notes] == [("a",), ("b",)]


def test_sources_sink_to_their_earliest_consumer_on_their_device_only():
    # c (a constant on /A) feeds d on /A at stage 2 and nothing else: it joins d's stage;
    # k feeds a Send as well, so it stays at its own stage
    nodes = {"a": Node("a", "Const"), "b": Node("b", "Neg", (("a", 0),)),
             "c": Node("c", "Const"), "k": Node("k", "Const"),
             "d": Node("d", "Add", (("b", 0), ("c", 0))),
             "e": Node("e", "Add", (("k", 0), ("d", 0))), "f": Node("f", "Neg", (("k", 0),))}
    devs = {"a": "/A", "b": "/B", "c": "/A", "d": "/A", "e": "/A", "k": "/A", "f": "/B"}
    st = stage(partition(nodes, devs, set()))
    assert (st["a"], st["b"], st["d"], st["c"], st["k"], st["e"]) == (0, 1, 2, 2, 0, 2)
