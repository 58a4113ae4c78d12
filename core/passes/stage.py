"""Stage: cut each device's partition into tasks so that the task graph is acyclic.

A node's stage is the largest, over its inputs, of the input's stage — plus one where the input
comes through a ``_Recv``. A ``_Send`` has its input's stage; a ``_Recv`` has its Send's stage
plus one. Nodes of one (device, stage) form one task. Every edge between tasks then goes to an
equal-or-higher stage on the same device or a strictly higher stage on another, so the task
graph has no cycle (a ping-pong A → B → A needs three tasks, not two).

>>> from tensorvm.passes.partition import partition
>>> from tensorvm.framework.graph_def import Node
>>> nodes = {"a": Node("a", "Const"), "b": Node("b", "Neg", (("a", 0),)),
...          "c": Node("c", "Neg", (("b", 0),))}
>>> p = partition(nodes, {"a": "/A", "b": "/B", "c": "/A"}, set())
>>> s = stage(p); (s["a"], s["b"], s["c"])
(0, 1, 2)
"""
from __future__ import annotations

from .partition import Partition


def stage(part: Partition) -> dict[str, int]:
    """Return ``{node name: stage}`` for every node of the partition (topological order).

    A loop frame across devices (:func:`~tensorvm.passes.partition.frame_op`: the loop op on
    its home and a ``WhileShard`` on each other device) must be a task of its own: its copies
    run together, each waiting for the others every iteration, so none may wait for a task
    that holds another copy. Where a graph holds one, an edge out of a frame op counts as a
    Recv (+1), every stage doubles, and frame ops take the odd stage after theirs: nothing
    else shares their task, and every edge still goes to an equal-or-higher stage. Frame ops
    take stages in graph order, each above the one before: the copies of two loops never
    share a task, and every device runs its copies of the loops in one order.
    """
    st: dict[str, int] = {}
    nodes = part.nodes
    frames = set(part.frames)  # (the frame ops, as partition found them)
    last_frame = -1  # frame ops in graph order, each after the one before (see below)
    get = st.get
    # partition() emits nodes in topological order (a Send and its Recv right after the
    # producer), so one pass suffices.
    for name, node in nodes.items():
        if node.type == "_Recv":
            st[name] = st[node.attrs["send"]] + 1
            continue
        s = 0
        if not frames:  # the common case, without the frame test per edge
            for r in node.inputs:
                v = get(r[0], 0)  # a fed input's producer has no stage
                if v > s:
                    s = v
            for c in node.control_inputs:
                v = get(c, 0)
                if v > s:
                    s = v
            st[name] = s
            continue
        for r in node.inputs:
            if r[0] in st and st[r[0]] + (r[0] in frames) > s:
                s = st[r[0]] + (r[0] in frames)
        for c in node.control_inputs:
            if c in st and st[c] + (c in frames) > s:
                s = st[c] + (c in frames)
        if name in frames:
            # Two loops' copies in one task, or run in other orders on two devices, would
            # wait for each other: every device runs the loops in one order, in tasks apart.
            s = max(s, last_frame + 1) if frames - {name} else s
            last_frame = s
        st[name] = s
    st = _sink_sources(nodes, st, frames, part.fed_across)
    if frames:
        st = {name: 2 * s + (name in frames) for name, s in st.items()}
    return st


def _sink_sources(nodes, st: dict[str, int], frames=frozenset(),
                  fed_across=frozenset()) -> dict[str, int]:
    """Run each node as late as its consumers allow when they all sit on its own device
    (reverse topological order), so that a constant, a read of a feed or a variable does not
    make a task of its own: it joins its earliest consumer's stage. ``nodes`` is a
    partition's: every edge joins two ops of one device, but for the fed outputs of
    ``fed_across`` (read on another device, so they stay)."""
    # One walk from the last node back: a node's consumers all come after it, so their stages
    # are final when it is reached; each node then tells its producers its stage.
    low: dict[str, int] = {}  # producer -> the earliest stage of its consumers so far
    pinned = set(fed_across)  # producers read on another device or by a Send
    low_get, pin = low.get, pinned.add
    for name, node in reversed(nodes.items()):
        typ = node.type
        s = st[name]
        lo = low_get(name)
        if lo is not None and lo > s and typ != "_Send" and typ != "_Recv" \
                and name not in pinned and name not in frames:
            st[name] = s = lo
        if typ == "_Send":
            for r in node.inputs:
                pin(r[0])
            for x in node.control_inputs:
                pin(x)
            continue
        # (a fed tensor's producer outside the partition gets an entry never read)
        for r in node.inputs:
            x = r[0]
            lo = low_get(x)
            if lo is None or s < lo:
                low[x] = s
        for x in node.control_inputs:
            lo = low_get(x)
            if lo is None or s < lo:
                low[x] = s
    return st
