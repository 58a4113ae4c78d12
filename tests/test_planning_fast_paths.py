"""The planning passes' fast paths (issue 22: plan ~100k ops in <= 2 CPU-s) give what the
general paths give: ``Node.replace`` changes only the fields named; placement reuses a lone
op's device only where nothing about the op itself could change it; prune's sweep finds what
the walk finds and says when the order is not known; compile's slot numbering."""
import dataclasses

import pytest

from tensorvm.framework.errors import InvalidArgumentError
from tensorvm.framework.graph_def import Node
from tensorvm.passes.compile import compile_plan
from tensorvm.passes.place import place, place_explained
from tensorvm.passes.prune import prune, prune_ordered, topological
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


# ---- prune: one sweep from the last node, or the walk when the order is not topological ----

def _walk_needed(nodes, roots, feeds):
    """The needed names, by the plain walk back from the roots (the reference)."""
    need, stack = set(), list(roots)
    while stack:
        n = stack.pop()
        if n in need:
            continue
        need.add(n)
        stack += [r[0] for r in nodes[n].inputs if r not in feeds]
        stack += [c for c in nodes[n].control_inputs if c not in {f[0] for f in feeds}]
    return need


def test_prune_by_sweep_matches_the_walk_and_says_the_order_is_known():
    nodes = {"x": Node("x", "Placeholder"), "a": Node("a", "Const"),
             "b": Node("b", "Neg", (("a", 0),)), "dead": Node("dead", "Neg", (("b", 0),)),
             "c": Node("c", "Add", (("b", 0), ("x", 0)), ("a",)),
             "d": Node("d", "Neg", (("c", 0),))}
    out, ordered = prune_ordered(nodes, [("d", 0)], [], {("x", 0)})
    assert list(out) == ["a", "b", "c", "d"] and ordered
    assert set(out) == _walk_needed(nodes, ["d"], {("x", 0)})
    assert prune(nodes, [("d", 0)], [], {("x", 0)}) == out


def test_prune_of_an_op_reading_a_later_op_finds_every_needed_op():
    # "a" waits (control edge set by hand) for "z", made after it: the sweep from the last
    # node reaches "z" before anyone asks for it, so the walk must take over
    nodes = {"a": Node("a", "Const", control_inputs=("z",)),
             "b": Node("b", "Neg", (("a", 0),)), "y": Node("y", "Const"),
             "z": Node("z", "Neg", (("y", 0),)), "u": Node("u", "Const")}
    out, ordered = prune_ordered(nodes, [("b", 0)], [], set())
    assert set(out) == {"a", "b", "y", "z"} == _walk_needed(nodes, ["b"], set())
    assert not ordered  # "a" comes before "z", which it waits for
    assert list(topological(out)) == ["y", "z", "a", "b"]


def test_prune_says_not_ordered_when_a_kept_op_waits_for_a_later_one_the_sweep_saw():
    # "z" is a fetch (so the sweep knows it is needed) and "a" waits for it: every needed
    # op is found by the sweep, but the order is not topological
    nodes = {"a": Node("a", "Const", control_inputs=("z",)), "z": Node("z", "Const")}
    out, ordered = prune_ordered(nodes, [("a", 0), ("z", 0)], [], set())
    assert set(out) == {"a", "z"} and not ordered
    assert list(topological(out)) == ["z", "a"]
    # the same through a data edge
    nodes = {"a": Node("a", "Neg", (("z", 0),)), "z": Node("z", "Const")}
    out, ordered = prune_ordered(nodes, [("a", 0), ("z", 0)], [], set())
    assert set(out) == {"a", "z"} and not ordered
    assert list(topological(out)) == ["z", "a"]


def test_prune_of_a_missing_input_raises_as_the_walk_does():
    nodes = {"b": Node("b", "Neg", (("gone", 0),))}
    with pytest.raises(KeyError, match="gone"):
        prune(nodes, [("b", 0)], [], set())


def test_prune_keeps_only_needed_control_inputs_when_part_of_the_graph_goes():
    nodes = {"f": Node("f", "Placeholder"), "a": Node("a", "Const"),
             "b": Node("b", "Neg", (("a", 0),), ("f",))}
    out = prune(nodes, [("b", 0)], [], {("f", 0)})
    assert list(out) == ["a", "b"] and out["b"].control_inputs == ()


# ---- place: groups and lone ops placed in graph order ----------------------------------------

def test_soft_placement_notes_follow_graph_order_across_groups_and_lone_ops():
    nodes = {"a": Node("a", "Neg", device="/gpu:0"),
             "v": Node("v", "VariableV2", device="/gpu:0", colocation="v"),
             "u": Node("u", "AsString", (("v", 0),), colocation="v"),
             "b": Node("b", "Neg", device="/gpu:0")}
    devs, notes = place_explained(nodes, "/job:w/task:0", gpus={("w", 0): 1})
    assert list(devs) == ["a", "v", "u", "b"]
    assert devs["v"] == devs["u"] == "/job:w/replica:0/task:0/device:CPU:0"  # (AsString)
    assert devs["a"] == devs["b"] == "/job:w/replica:0/task:0/device:GPU:0"
    assert [f.ops[0] for f in notes] == ["u"]
    # no GPU at all: every group falls back, and the notes come in graph order
    devs, notes = place_explained(nodes, "/job:w/task:0", gpus=0)
    assert set(devs.values()) == {"/job:w/replica:0/task:0/device:CPU:0"}
    assert [f.ops for f in notes] == [("a",), ("u", "v"), ("b",)]


# ---- compile: slots numbered from each op's base ---------------------------------------------

def test_a_control_token_read_by_another_task_gets_a_slot_of_its_own():
    # "w" on /A is waited for (control edge) by "r" on /B: its token leaves the task in a
    # slot of its own (None), not its output
    nodes = {"x": Node("x", "Const", device="/A", num_outputs=1),
             "w": Node("w", "Neg", (("x", 0),), device="/A"),
             "r": Node("r", "Const", control_inputs=("w",), device="/B")}
    devs = {"x": "/A", "w": "/A", "r": "/B"}
    part = partition(nodes, devs, set(), [("w", 0), ("r", 0)])
    plan = compile_plan(part, stage(part), list(part.fetches), [])
    t0 = plan.tasks[0]
    instr = {i.name: i for i in t0.program.instrs}
    assert instr["x"].outs == (0,) and instr["w"].args == (0,) and instr["w"].outs == (1,)
    assert instr["w"].tok == 2 and t0.program.nslots == 3
    # its exports: the fetched output, then the token (read by the control Send)
    assert set(t0.program.exports) == {1, 2}


def test_a_fed_output_read_on_another_device_keeps_its_producer_at_its_stage():
    # k (a constant on /A) is read by c on /A at stage 2, and fed to f on /B (no Recv: the
    # feed goes to /B): k stays at stage 0, as if it were read on /B; not fed, it sinks
    nodes = {"a": Node("a", "Const"), "b": Node("b", "Neg", (("a", 0),)),
             "k": Node("k", "Const"), "c": Node("c", "Add", (("b", 0), ("k", 0))),
             "f": Node("f", "Neg", (("k", 0),))}
    devs = {"a": "/A", "b": "/B", "k": "/A", "c": "/A", "f": "/B"}
    part = partition(nodes, devs, {("k", 0)})
    assert part.fed_across == {"k"} and part.nodes["f"].inputs == (("k", 0),)
    st = stage(part)
    assert (st["a"], st["b"], st["c"], st["k"]) == (0, 1, 2, 0)
    nodes["f"] = Node("f", "Neg", (("a", 0),))
    st = stage(partition(nodes, devs, set()))
    assert (st["c"], st["k"]) == (2, 2)


def test_compile_makes_instructions_equal_to_the_plan_formats_own():
    import importlib
    from tensorvm.vm.program import Instr
    c = importlib.import_module("tensorvm.passes.compile")  # (the module, not the function)
    assert c._make_instr is not Instr  # Instr's fields are the ten compile knows
    args = ("Add", "add", (0, 1), {"k": 1}, (2,), False, "f.py:1", (3,), 4, 16)
    made = c._make_instr(*args)
    assert type(made) is Instr and made == Instr(*args)
    with pytest.raises(dataclasses.FrozenInstanceError):
        made.name = "x"


def test_a_snapshot_knows_it_is_in_order_until_a_control_edge_to_a_later_op_is_set():
    import numpy as np
    import tensorvm as tv
    from tensorvm.framework.graph_def import snapshot
    g = tv.Graph()
    with g.as_default():
        x = tv.placeholder(tv.float32, [2], name="x")
        a = tv.add(x, 1.0, name="a")
        late = tv.multiply(x, 3.0, name="late")  # made after "a"
        out = tv.identity(a, name="out")
    snap = snapshot(g)
    assert snap.in_order and list(prune_ordered(snap, [("out", 0)], [], {("x", 0)})[0]) == \
        ["Const", "a", "out"]
    a.op._add_control_input(late.op)  # "a" now waits for an op made after it
    snap = snapshot(g)
    assert not snap.in_order
    kept, ordered = prune_ordered(snap, [("out", 0)], [], {("x", 0)})
    assert not ordered and list(topological(kept, {("x", 0)})).index("late") < \
        list(topological(kept, {("x", 0)})).index("a")
    with tv.Session(graph=g) as sess:  # planned in an order that runs "late" first
        np.testing.assert_allclose(sess.run(out, {x: np.ones(2, np.float32)}), [2.0, 2.0])
