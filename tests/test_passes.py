"""The step passes as pure functions on literal graphs: prune, optimise, place, partition, stage,
compile — and a property test that a graph spread over random devices computes exactly what it
computes on one device (in process: every device lives in this process, no cluster needed)."""
import numpy as np
import pytest
import tensorvm as tv
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tensorvm import passes
from tensorvm.framework.graph_def import Node, snapshot

A = "/job:a/replica:0/task:0/device:CPU:0"
B = "/job:b/replica:0/task:0/device:CPU:0"
C = "/job:c/replica:0/task:0/device:CPU:0"
PS = "/job:ps/replica:0/task:0/device:CPU:0"
W0 = "/job:worker/replica:0/task:0/device:CPU:0"
W1 = "/job:worker/replica:0/task:1/device:CPU:0"



def const(name, device=""):
    return Node(name, "Const", attrs={"value": np.float32(1), "dtype": tv.float32},
                device=device)


def neg(name, src, device="", controls=()):
    return Node(name, "Neg", ((src, 0),), tuple(controls), device=device)


def add(name, a, b, device=""):
    return Node(name, "Add", ((a, 0), (b, 0)), device=device)


def chain(*nodes):
    return {n.name: n for n in nodes}


# ---- prune --------------------------------------------------------------------------------

def test_prune_keeps_only_what_fetches_and_targets_need():
    nodes = chain(const("a"), neg("b", "a"), neg("c", "a"), neg("d", "c"), const("e"),
                  neg("f", "e", controls=["b"]))
    assert sorted(passes.prune(nodes, [("b", 0)], [], set())) == ["a", "b"]
    assert sorted(passes.prune(nodes, [], ["d"], set())) == ["a", "c", "d"]
    # control inputs are followed too
    assert sorted(passes.prune(nodes, [("f", 0)], [], set())) == ["a", "b", "e", "f"]


def test_prune_cuts_at_feeds():
    nodes = chain(const("a"), neg("b", "a"), neg("c", "b"), add("d", "c", "a"))
    assert sorted(passes.prune(nodes, [("d", 0)], [], {("b", 0)})) == ["a", "c", "d"]
    assert sorted(passes.prune(nodes, [("d", 0)], [], {("c", 0), ("a", 0)})) == ["d"]
    # fetching a fed tensor needs nothing; a fed producer that is a target still runs
    assert passes.prune(nodes, [("b", 0)], [], {("b", 0)}) == {}
    assert sorted(passes.prune(nodes, [("c", 0)], ["b"], {("b", 0)})) == ["a", "b", "c"]


def test_prune_keeps_topological_order():
    nodes = chain(const("z"), const("a"), add("m", "z", "a"), neg("b", "m"))
    assert list(passes.prune(nodes, [("b", 0)], [], set())) == ["z", "a", "m", "b"]


# ---- optimise -------------------------------------------------------------------------------

def test_optimize_never_merges_or_folds_stateful_ops(g):
    r1 = tv.random_uniform([2], seed=1)
    r2 = tv.random_uniform([2], seed=1)
    total = r1 + r2
    nodes = snapshot(g)
    ref = (total.op.name, 0)
    out, _, _ = passes.optimize(passes.prune(nodes, [ref], [], set()), [ref], [], set())
    assert [n.type for n in out.values()].count("RandomUniform") == 2


def test_optimize_cse_across_devices_keeps_devices_apart():
    nodes = chain(Node("x", "Placeholder"), neg("n1", "x", device=A), neg("n2", "x", device=A),
                  neg("n3", "x", device=B), Node("s", "AddN", (("n1", 0), ("n2", 0), ("n3", 0)),
                                                 attrs={}))
    out, _, _ = passes.optimize(nodes, [("s", 0)], [], {("x", 0)})
    assert sorted(n for n in out if n.startswith("n")) == ["n1", "n3"]
    assert out["s"].inputs == (("n1", 0), ("n1", 0), ("n3", 0))


# ---- place ----------------------------------------------------------------------------------

def test_variable_ops_live_with_the_variable_under_another_device(g):
    with tv.device("/job:ps/task:0"):
        v = tv.Variable(np.zeros(4, np.float32), name="v")
    with tv.device("/job:worker/task:1"):
        v.assign_add(tv.ones([4]), name="up")
        tv.scatter_add(v, [1], [2.0], name="sc")
        tv.multiply(v, 3.0, name="y")
    nodes = snapshot(g)
    for soft in (True, False):
        d = passes.place(nodes, W0, allow_soft_placement=soft)
        assert d["v"] == d["up"] == d["sc"] == d["v/Assign"] == PS
        assert d["y"] == W1
    # placed alone (the variable pruned away) the update still goes to the variable's device
    alone = passes.prune(nodes, [], ["up"], set())
    assert "v" not in alone
    assert passes.place(alone, W0, all_nodes=nodes)["up"] == PS


def test_colocate_with_joins_the_named_op_group(g):
    a = tv.constant(1.0, name="a")  # no device of its own
    with tv.colocate_with(a), tv.device("/job:ps/task:0"):
        tv.negative(a, name="b")
    d = passes.place(snapshot(g), W0)
    assert d["a"] == d["b"] == PS


def test_gradient_ops_are_colocated_with_their_forward_op(g):
    with tv.device("/job:worker/task:0"):
        x = tv.placeholder(tv.float32, [3], name="x")
    with tv.device("/job:worker/task:1"):
        y = tv.square(x, name="sq")
    with tv.device("/job:worker/task:0"):
        loss = tv.reduce_sum(y, name="loss")
    with tv.device("/job:ps/task:0"):  # ignored for gradient ops
        tv.gradients(loss, x)
    d = passes.place(snapshot(g), W0)
    grads = {n: dev for n, dev in d.items() if n.startswith("gradients/")}
    assert grads and PS not in grads.values()
    assert all(dev == W1 for n, dev in grads.items() if "sq_grad" in n)
    assert all(dev == W0 for n, dev in grads.items() if "loss_grad" in n)


def test_colocation_conflict_without_soft_placement_is_invalid_argument(g):
    a = tv.constant(1.0, name="a")
    with tv.colocate_with(a):
        with tv.device("/job:ps/task:0"):
            tv.negative(a, name="b")
        with tv.device("/job:worker/task:1"):
            tv.negative(a, name="c")
    nodes = snapshot(g)
    with pytest.raises(tv.errors.InvalidArgumentError, match="Cannot colocate"):
        passes.place(nodes, W0, allow_soft_placement=False)
    d = passes.place(nodes, W0, allow_soft_placement=True)
    assert d["a"] == d["b"] == d["c"]


def test_gpu_soft_placement_falls_back_to_cpu(g):
    x = tv.placeholder(tv.float32, [2], name="x")
    with tv.device("/job:worker/task:0/gpu:0"):
        y = tv.negative(x, name="y")
    nodes = snapshot(g)
    d = passes.place(nodes, W0, gpu_available=False, allow_soft_placement=True)
    assert d["y"] == W0
    with pytest.raises(tv.errors.InvalidArgumentError, match="no GPU device"):
        passes.place(nodes, W0, gpu_available=False, allow_soft_placement=False)
    # Neg has a GPU kernel (one source, tensorvm.vm.kernels.array_api): with a GPU it stays there
    assert passes.place(nodes, W0, gpu_available=True, allow_soft_placement=False)["y"] == \
        W0.replace("CPU", "GPU")
    with tv.device("/job:worker/task:0/gpu:0"):
        s = tv.strings.upper(tv.constant(["a"]), name="s")
    with pytest.raises(tv.errors.InvalidArgumentError,
                       match="'s' \\(StringUpper\\): no GPU kernel for StringUpper: string"):
        passes.place(snapshot(g), W0, gpu_available=True, allow_soft_placement=False)
    # and through a session
    with tv.Session(allow_soft_placement=False) as s, \
            pytest.raises(tv.errors.InvalidArgumentError, match="allow_soft_placement"):
        s.run(y, {x: [1, 2]})
    with tv.Session() as s:
        np.testing.assert_array_equal(s.run(y, {x: [1, 2]}), [-1, -2])


def test_device_outside_the_cluster_is_invalid_argument(g):
    with tv.device("/job:worker/task:7"):
        tv.constant(1.0, name="far")
    with pytest.raises(tv.errors.InvalidArgumentError, match="not in the cluster"):
        passes.place(snapshot(g), W0, known_tasks={("ps", 0), ("worker", 0)})


def test_placement_is_deterministic_and_fills_defaults():
    nodes = chain(Node("x", "Placeholder", device="/job:ps"),
                  neg("a", "x", device="/task:1"), neg("b", "a"), neg("c", "b", device="/cpu:0"))
    d1 = passes.place(nodes, "/job:worker/task:0")
    assert d1 == {"x": PS, "a": W1, "b": W0, "c": W0}
    assert passes.place(dict(nodes), "/job:worker/task:0") == d1


def test_placement_of_a_variable_group_is_stable_across_steps(g):
    v = tv.Variable(0.0, name="v")  # no device: its group takes its members' device
    with tv.device("/job:worker/task:1"):
        up = v.assign_add(1.0, name="up")
    nodes = snapshot(g)
    d_up = passes.place(passes.prune(nodes, [], ["up"], set()), W0, all_nodes=nodes)
    d_read = passes.place(passes.prune(nodes, [("v", 0)], [], set()), W0, all_nodes=nodes)
    d_init = passes.place(passes.prune(nodes, [], ["v/Assign"], set()), W0, all_nodes=nodes)
    assert d_up["up"] == d_read["v"] == d_init["v/Assign"]
    with tv.Session() as s:
        s.run(v.initializer)
        s.run(up)
        assert s.run(v) == 1.0


# ---- partition ------------------------------------------------------------------------------

def _pairs(part):
    return {(p.tensor, p.dst) for p in part.sends}


def test_one_send_recv_pair_per_tensor_and_destination():
    nodes = chain(const("a"), Node("sp", "Split", (("a", 0),), num_outputs=2),
                  neg("b1", "a"), neg("b2", "a"), neg("b3", "a"),
                  neg("c1", "a"), neg("d1", "sp"), Node("d2", "Neg", (("sp", 1),)),
                  add("e", "b1", "c1"))
    devices = {"a": A, "sp": A, "b1": B, "b2": B, "b3": B, "c1": C, "d1": B, "d2": B, "e": C}
    part = passes.partition(nodes, devices, set())
    expected = {(ref, devices[n]) for n, node in nodes.items() for ref in node.inputs
                if devices[ref[0]] != devices[n]}
    assert _pairs(part) == expected
    assert len(part.sends) == len(expected) == 5
    # a tensor consumed by three ops on another device moves once
    recvs = {part.nodes[b].inputs[0] for b in ("b1", "b2", "b3")}
    assert len(recvs) == 1 and [p.tensor for p in part.sends].count(("a", 0)) == 2
    for p in part.sends:
        assert part.nodes[p.send].device == p.src and part.nodes[p.recv].device == p.dst
    assert part.devices == (A, B, C)


def test_control_edges_across_devices_become_tokens():
    nodes = chain(const("a"), neg("b", "a"), neg("c", "a", controls=["b"]),
                  neg("d", "a", controls=["b"]))
    part = passes.partition(nodes, {"a": A, "b": A, "c": B, "d": B}, set())
    tokens = [p for p in part.sends if p.tensor[1] < 0]
    assert [(p.tensor, p.dst) for p in tokens] == [(("b", -1), B)]
    send = part.nodes[tokens[0].send]
    assert send.type == "_Send" and send.inputs == () and send.control_inputs == ("b",)
    assert part.nodes["c"].control_inputs == part.nodes["d"].control_inputs == (tokens[0].recv,)
    # same-device control edges stay as they are
    part2 = passes.partition(nodes, {"a": A, "b": A, "c": A, "d": B}, set())
    assert part2.nodes["c"].control_inputs == ("b",)


def test_feeds_need_no_pairs():
    nodes = chain(Node("x", "Placeholder"), neg("b", "x"), neg("c", "x"))
    part = passes.partition(nodes, {"x": A, "b": B, "c": C}, {("x", 0)})
    assert part.sends == ()
    assert part.nodes["b"].inputs == (("x", 0),)


def test_partition_counts_match_on_a_built_graph(g):
    with tv.device("/job:ps/task:0"):
        v = tv.Variable(np.ones(3, np.float32), name="v")
    with tv.device("/job:worker/task:0"):
        outs = [tv.multiply(v, float(i)) for i in range(3)]  # v consumed 3 times on W0
        s0 = tv.add_n(outs)
    with tv.device("/job:worker/task:1"):
        s1 = tv.reduce_sum(v) + tv.reduce_sum(s0)
    with tv.Session() as sess:
        plan = sess.plan(s1)
        sess.run(v.initializer)
        assert sess.run(s1) == 3.0 + 3 * (0 + 1 + 2)
    pairs = [(p.tensor, p.dst) for p in plan.pairs]
    assert len(pairs) == len(set(pairs)) == 3
    assert {(("v", 0), W0), (("v", 0), W1)} <= set(pairs)


# ---- stage and compile ----------------------------------------------------------------------

def _task_edges(plan):
    from tensorvm.vm.program import Recv, Result
    sends = {s.name: s for s in plan.sends}
    edges = set()
    for t in plan.tasks:
        for a in t.args:
            if isinstance(a, Result):
                edges.add((a.task, t.name))
            elif isinstance(a, Recv):
                edges.add((sends[a.send].task, t.name))
    return edges


def _assert_acyclic_and_staged(plan):
    by_name = {t.name: t for t in plan.tasks}
    edges = _task_edges(plan)
    for src, dst in edges:
        s, d = by_name[src], by_name[dst]
        if s.device == d.device:
            assert d.stage >= s.stage, (src, dst)
        else:
            assert d.stage > s.stage, (src, dst)
    # Kahn's algorithm consumes every task
    indeg = {n: 0 for n in by_name}
    for _, d in edges:
        indeg[d] += 1
    ready = [n for n, k in indeg.items() if k == 0]
    seen = 0
    while ready:
        n = ready.pop()
        seen += 1
        for s, d in edges:
            if s == n:
                indeg[d] -= 1
                if indeg[d] == 0:
                    ready.append(d)
    assert seen == len(by_name)


def test_ping_pong_is_staged_acyclically():
    nodes = chain(Node("x", "Placeholder"), neg("h1", "x"), neg("h2", "h1"), neg("h3", "h2"),
                  neg("h4", "h3"), neg("h5", "h4"))
    devices = {"x": A, "h1": A, "h2": B, "h3": A, "h4": B, "h5": A}
    part = passes.partition(nodes, devices, {("x", 0)})
    stages = passes.stage(part)
    assert [stages[n] for n in ("h1", "h2", "h3", "h4", "h5")] == [0, 1, 2, 3, 4]
    plan = passes.compile_plan(part, stages, [("h5", 0)], [("x", 0)])
    assert len(plan.tasks) == 5 and len(plan.sends) == 4
    assert [(t.device, t.stage) for t in plan.tasks] == [(A, 0), (B, 1), (A, 2), (B, 3), (A, 4)]
    _assert_acyclic_and_staged(plan)
    assert "stage 4" in str(plan) and plan.to_dot().startswith("digraph")


def test_ping_pong_runs_in_process(g):
    x = tv.placeholder(tv.float32, [2], name="x")
    h = x
    for i, job in enumerate(["a", "b", "a", "b", "a"]):
        with tv.device(f"/job:{job}/task:0"):
            h = tv.add(h * 2.0, float(i))
    with tv.Session() as s:
        plan = s.plan(h, {x: [0, 0]})
        np.testing.assert_array_equal(s.run(h, {x: [1.0, 2.0]}), [58.0, 90.0])
    _assert_acyclic_and_staged(plan)
    assert len(plan.tasks) == 5


def test_independent_branches_share_a_stage_and_sources_sink():
    nodes = chain(const("k"), Node("x", "Placeholder"), add("p", "x", "k"), neg("q", "p"),
                  neg("r", "q"), add("s", "r", "k"))
    devices = {"k": A, "x": A, "p": A, "q": B, "r": A, "s": A}
    part = passes.partition(nodes, devices, {("x", 0)})
    st_ = passes.stage(part)
    assert st_["p"] == 0 and st_["q"] == 1 and st_["r"] == st_["s"] == 2
    assert st_["k"] == 0  # consumed by stages 0 and 2 on its own device: earliest


def test_plan_sends_elide_picks_when_one_consumer():
    nodes = chain(Node("x", "Placeholder"), neg("a", "x"), neg("b", "x"), neg("c", "a"),
                  neg("d", "b"))
    devices = {"x": A, "a": A, "b": A, "c": B, "d": C}
    part = passes.partition(nodes, devices, {("x", 0)})
    plan = passes.compile_plan(part, passes.stage(part), [("c", 0), ("d", 0)], [("x", 0)])
    assert len(plan.sends) == 2 and not any(s.elided for s in plan.sends)
    _assert_acyclic_and_staged(plan)


# ---- property: any device assignment computes the single-device result ----------------------

DEVICES = ["/job:ps/task:0", "/job:worker/task:0", "/job:worker/task:1", "/job:worker/task:2"]
UNARY = [tv.negative, tv.square, tv.tanh, lambda t: t * 0.5]
BINARY = [tv.add, tv.subtract, tv.multiply, tv.maximum]


@st.composite
def random_programs(draw):
    n_inputs = draw(st.integers(1, 3))
    n_ops = draw(st.integers(1, 14))
    ops = []
    for i in range(n_ops):
        avail = n_inputs + i
        kind = draw(st.sampled_from(["unary", "binary", "binary", "const"]))
        args = (draw(st.integers(0, avail - 1)), draw(st.integers(0, avail - 1)))
        fn = draw(st.integers(0, 3))
        dev = draw(st.integers(0, len(DEVICES) - 1))
        ctl = None if i == 0 else draw(st.one_of(st.none(), st.integers(n_inputs, avail - 1)))
        ops.append((kind, fn, args, dev, ctl))
    total = n_inputs + n_ops
    fetch = draw(st.lists(st.integers(n_inputs, total - 1), min_size=1, max_size=4, unique=True))
    feeds = draw(st.lists(st.floats(-2, 2, width=32), min_size=3 * n_inputs,
                          max_size=3 * n_inputs))
    input_devs = draw(st.lists(st.integers(0, len(DEVICES) - 1), min_size=n_inputs,
                               max_size=n_inputs))
    return n_inputs, ops, fetch, feeds, input_devs


def _build(program, spread: bool):
    n_inputs, ops, fetch, feeds, input_devs = program
    g = tv.Graph()
    with g.as_default():
        vals, feed = [], {}
        for i in range(n_inputs):
            with tv.device(DEVICES[input_devs[i]] if spread else None):
                p = tv.placeholder(tv.float32, [3], name=f"in{i}")
            feed[p] = np.array(feeds[3 * i:3 * i + 3], np.float32)
            vals.append(p)
        for kind, fn, (a, b), dev, ctl in ops:
            ctx = tv.control_dependencies([vals[ctl].op]) if ctl is not None else \
                tv.control_dependencies([])
            with tv.device(DEVICES[dev] if spread else None), ctx:
                if kind == "unary":
                    out = UNARY[fn](vals[a])
                elif kind == "binary":
                    out = BINARY[fn](vals[a], vals[b])
                else:
                    out = tv.add(vals[a], tv.constant(float(fn) - 1.5))
            vals.append(out)
    return g, [vals[i] for i in fetch], feed


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(random_programs())
def test_random_graphs_on_random_devices_match_one_device(program):
    g1, fetch1, feed1 = _build(program, spread=False)
    g2, fetch2, feed2 = _build(program, spread=True)
    with tv.Session(graph=g1) as s1:
        want = s1.run(fetch1, feed1)
        assert len(s1.plan(fetch1, feed1).devices) == 1
    with tv.Session(graph=g2) as s2:
        got = s2.run(fetch2, feed2)
        plan = s2.plan(fetch2, feed2)
    for w, x in zip(want, got):
        np.testing.assert_array_equal(w, x)
    _assert_acyclic_and_staged(plan)
    pairs = [(p.tensor, p.dst) for p in plan.pairs]
    assert len(pairs) == len(set(pairs))


def test_colocate_with_ignores_the_device_scopes_around_it(g):
    with tv.device("/job:ps/task:0"):
        a = tv.constant(1.0, name="a")
    with tv.device("/job:worker/task:1"), tv.colocate_with(a):
        tv.negative(a, name="follows_a")
    d = passes.place(snapshot(g), W0, allow_soft_placement=False)
    assert d["follows_a"] == d["a"] == PS


def test_a_device_asked_for_inside_colocate_with_conflicts_without_soft_placement(g):
    with tv.device("/job:ps/task:0"):
        a = tv.constant(1.0, name="a")
    with tv.colocate_with(a), tv.device("/job:worker/task:1"):
        tv.negative(a, name="torn")
    nodes = snapshot(g)
    with pytest.raises(tv.errors.InvalidArgumentError,
                       match="Cannot colocate nodes 'torn' and 'a'.*allow_soft_placement"):
        passes.place(nodes, W0, allow_soft_placement=False)
    assert passes.place(nodes, W0, allow_soft_placement=True)["torn"] == PS
