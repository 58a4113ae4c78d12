"""Unroll: K steps of a placed graph as one graph, for ``run(..., steps=K)`` across devices.

Each step's nodes are copied (names of step ``r < K-1`` get ``@r``; the last step keeps the
original names, so fetches read the last step). The state chain is explicit: on each device a
``NoOp`` waits for every stateful node of step r, and every stateful node of step r+1 on that
device waits for it. Staging then puts step r+1's first stateful ops (a parameter server's
variable reads) in the same task as step r's last ones (its updates), so a PS/worker step costs
two Dask hops instead of three. Feeds are shared by all steps; targets of every step run.

>>> from tensorvm.framework.graph_def import Node
>>> nodes = {"v": Node("v", "VariableV2", stateful=True),
...          "g": Node("g", "Neg", (("v", 0),)),
...          "u": Node("u", "AssignSub", (("g", 0),), stateful=True)}
>>> devs = {"v": "/A", "g": "/B", "u": "/A"}
>>> n, d, f, t = unroll(nodes, devs, [], ["u"], set(), 2)
>>> list(n)
['v@0', 'g@0', 'u@0', '_step_chain@0/A', 'v', 'g', 'u']
>>> n["v"].control_inputs, t
(('_step_chain@0/A',), ['u@0', 'u'])
"""
from __future__ import annotations

from ..framework.graph_def import Node


def unroll(nodes: dict[str, Node], devices: dict[str, str], fetches: list, targets: list,
           feeds: set, steps: int):
    """Return ``(nodes, devices, fetches, targets)`` for ``steps`` chained copies."""
    out: dict[str, Node] = {}
    out_dev: dict[str, str] = {}
    chain: dict[str, str] = {}  # device -> the chain NoOp of the previous step
    all_targets: list[str] = []
    for r in range(steps):
        last = r == steps - 1

        def rename(name: str, r=r, last=last) -> str:
            return name if last else f"{name}@{r}"

        stateful_by_dev: dict[str, list[str]] = {}
        for name, node in nodes.items():
            dev = devices[name]
            new = rename(name)
            controls = tuple(rename(c) for c in node.control_inputs)
            if node.stateful and dev in chain:
                controls += (chain[dev],)
            out[new] = node.replace(
                name=new,
                inputs=tuple(ref if ref in feeds else (rename(ref[0]), ref[1])
                             for ref in node.inputs),
                control_inputs=controls)
            out_dev[new] = dev
            if node.stateful:
                stateful_by_dev.setdefault(dev, []).append(new)
        all_targets += [rename(t) for t in targets]
        if last:
            break
        for dev, names in sorted(stateful_by_dev.items()):
            link = f"_step_chain@{r}{dev}"
            out[link] = Node(link, "NoOp", (), tuple(names), {}, dev, num_outputs=0,
                             location="tensorvm: steps=K state chain")
            out_dev[link] = dev
            chain[dev] = link
    return out, out_dev, list(fetches), all_targets
