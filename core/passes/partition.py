"""Partition: one subgraph per device, with a ``_Send``/``_Recv`` pair on every edge that crosses
devices — one pair per (tensor, destination device), however many consumers the tensor has
there (TF's graph_partition.cc). A cross-device control edge becomes a Send/Recv of an empty
token. Feeds enter and fetches leave through the client, so they need no pair.

Host and device memory (TF's ``_HostSend``/``_HostRecv`` and its copy ops): every value an op
on a GPU device reads is a device array, and only host arrays cross to a CPU device or back
to the client. So before cutting, :func:`insert_copies` puts a ``_CopyHostToDevice`` on the
GPU device in front of every host value a GPU op reads (a feed, a CPU device's output), and a
``_CopyDeviceToHost`` on the GPU device behind every GPU value a CPU op or a fetch reads —
one copy per (tensor, device), however many consumers. Between two GPU devices the device
array itself moves (Dask serialises CuPy arrays). String tensors stay on the host: no copy.
Small integer tensors a GPU op reads as shapes, offsets or counts stay on the host too (TF's
HostMemory, :data:`tensorvm.vm.kernels.array_api.HOST_MEMORY_INPUTS`), as do the shapes and sizes GPU
ops make, and int32 arithmetic on such host values runs on the host (TF's int32 rule): reading
a shape never makes the host wait for the GPU.

>>> from tensorvm.framework.graph_def import Node
>>> nodes = {"a": Node("a", "Const"), "b": Node("b", "Neg", (("a", 0),)),
...          "c": Node("c", "Neg", (("a", 0),))}
>>> p = partition(nodes, {"a": "/A", "b": "/B", "c": "/B"}, set())
>>> [(s.tensor, s.dst) for s in p.sends]
[(('a', 0), '/B')]
>>> p.nodes["b"].inputs, p.nodes["c"].inputs
((('a/_recv/B', 0),), (('a/_recv/B', 0),))
"""
from __future__ import annotations

from dataclasses import dataclass

from ..framework import dtypes as _dt
from ..framework.graph_def import Node
from ..vm.kernels.array_api import (COPY_TO_DEVICE, COPY_TO_HOST, host_memory_input,
                                    host_memory_output)
from ..framework.op_registry import registry


@dataclass(frozen=True)
class SendRecv:
    """One Send/Recv pair: ``tensor`` (a ref, or ``(name, -1)`` for a control token) moves from
    ``src`` to ``dst``."""
    send: str
    recv: str
    tensor: tuple
    src: str
    dst: str

    def __repr__(self):
        what = f"^{self.tensor[0]}" if self.tensor[1] < 0 else f"{self.tensor[0]}:{self.tensor[1]}"
        return f"Send({what}) {self.src} -> {self.dst}"


@dataclass(frozen=True)
class Partition:
    nodes: dict  # name -> Node (device filled in), _Send/_Recv included, topological order
    sends: tuple  # SendRecv pairs
    devices: tuple  # sorted device strings
    fetches: tuple = ()  # the fetches, a GPU tensor replaced by its host copy
    copies: tuple = ()  # the names of the host<->device copy ops inserted
    frames: tuple = ()  # the names of its loop frame ops (frame_op), in order
    # ops whose output some op on another device reads as a feed (no Recv: the feed goes
    # there): every other edge of the partition joins two ops of one device
    fed_across: frozenset = frozenset()

    def by_device(self) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {d: [] for d in self.devices}
        for name, n in self.nodes.items():
            out[n.device].append(name)
        return out


def _short(device: str) -> str:
    return device.replace("/job:", "").replace("/replica:0", "").replace("/task:", "/") \
        .replace("/device:", "/")


def _is_gpu(device: str) -> bool:
    return "/device:GPU:" in device


def _on_host_only(node: Node, i: int) -> bool:
    dts = node.in_dtypes
    return i < len(dts) and dts[i] is not None and getattr(dts[i], "is_string", False)


_PRED_OPS = frozenset({"Switch", "RefSwitch"})  # (data, pred): int32 data with a bool pred


def _host_int_op(node: Node, on_device) -> bool:
    """TF's int32 rule on GPUs: an op that only does int32 arithmetic on host values (a
    shape's element, a size times two) runs on the host, its kernel being the one-source
    kernel (``on_device(ref)``: whether an input is a device array)."""
    if not node.inputs or not node.out_dtypes or node.stateful:
        return False
    ins = node.in_dtypes
    if node.type in _PRED_OPS and len(ins) == 2 and ins[1] == _dt.bool_:
        ins = ins[:1]  # TF's int32 Switch: data, pred and both outputs in host memory
    if any(d != _dt.int32 for d in ins) or \
            any(d != _dt.int32 and d != _dt.bool_ for d in node.out_dtypes):
        return False  # int32 in; int32 out, or a comparison's bool (a loop's predicate)
    d = registry.get(node.type)
    if d is None or d.kernels.get("GPU") is not d.kernels.get("CPU"):
        return False
    return not any(on_device(ref) for ref in node.inputs)


def insert_copies(nodes: dict[str, Node], devices: dict[str, str], feeds, fetches=(),
                  fetch_to_host: bool = True, host_feeds=frozenset()):
    """Return ``(nodes, devices, fetches, copies)`` with the host<->device copies added (see
    the module docstring); unchanged when no node is on a GPU. ``fetch_to_host=False`` leaves
    fetched GPU tensors on their device (a loop body's outputs, read by the loop's next
    iteration on that device); its feeds may then be device arrays, except ``host_feeds``
    (a loop's int32 variables, which its kernel keeps on the host).

    >>> from tensorvm.framework.graph_def import Node
    >>> nodes = {"a": Node("a", "Const"), "b": Node("b", "Neg", (("a", 0),))}
    >>> n, d, f, c = insert_copies(nodes, {"a": "/cpu", "b": "/device:GPU:0"}, set(), [("b", 0)])
    >>> [(x.name, x.type, d[x.name]) for x in n.values() if x.name in c]
    [('a/_to_device/GPU:0', '_CopyHostToDevice', '/device:GPU:0'), ('b/_to_host', '_CopyDeviceToHost', '/device:GPU:0')]
    >>> n["b"].inputs, f
    ((('a/_to_device/GPU:0', 0),), (('b/_to_host', 0),))
    """
    fetches = tuple(fetches)
    if not any(_is_gpu(d) for d in set(devices.values())):
        return nodes, devices, fetches, ()
    out: dict[str, Node] = {}
    devices = dict(devices)
    made: dict[tuple, str] = {}

    def base(ref) -> str:
        return f"{ref[0]}:{ref[1]}" if ref[1] else ref[0]

    def copy(ref, kind: str, dev: str, location: str) -> str:
        key = (ref, kind, dev)
        name = made.get(key)
        if name is None:
            name = f"{base(ref)}/_to_device/{_short(dev).lstrip('/')}" \
                if kind == COPY_TO_DEVICE \
                else f"{base(ref)}/_to_host"
            made[key] = name
            out[name] = Node(name, kind, (ref,), (), {}, dev, location=location)
            devices[name] = dev
        return name

    def host_copy(ref) -> str:  # on the producer's GPU device, shared by every reader
        return copy(ref, COPY_TO_HOST, devices[ref[0]], nodes[ref[0]].location)

    host_ops: set[str] = set()  # GPU ops whose int32 values stay on the host (_host_int_op)

    def on_device(ref) -> bool:  # the value of ``ref`` is a device array
        return ref not in feeds and _is_gpu(devices[ref[0]]) and ref[0] not in host_ops and \
            not (ref[0] in nodes and host_memory_output(nodes[ref[0]].type, ref[1],
                                                        nodes[ref[0]].attrs,
                                                        nodes[ref[0]].out_dtypes))

    for name, node in nodes.items():
        dev = devices[name]
        gpu = _is_gpu(dev)
        # a function's arguments (a loop's variables, fetch_to_host=False) may be device arrays
        if gpu and _host_int_op(node, lambda r: on_device(r) or (
                r in feeds and not fetch_to_host and r not in host_feeds)):
            host_ops.add(name)
            out[name] = node  # its inputs are host values, read as they are
            continue
        inputs = []
        for i, ref in enumerate(node.inputs):
            src_gpu = on_device(ref)
            if gpu and host_memory_input(node.type, i, node.in_dtypes, node.attrs):  # (HostMemory)
                inputs.append((host_copy(ref), 0) if src_gpu else ref)
            elif gpu == src_gpu or _on_host_only(node, i):
                inputs.append(ref)
            elif gpu:
                loc = nodes[ref[0]].location if ref[0] in nodes else node.location
                inputs.append((copy(ref, COPY_TO_DEVICE, dev, loc), 0))
            else:
                inputs.append((host_copy(ref), 0))
        out[name] = node if tuple(inputs) == node.inputs else \
            node.replace(inputs=tuple(inputs))
    if fetch_to_host:
        fetches = tuple((host_copy(r), 0) if on_device(r) else r for r in fetches)
    # each copy went in right before its first reader (after its producer): still in order
    return out, devices, fetches, tuple(made.values())


def split_frames(nodes: dict[str, Node], devices: dict[str, str]) -> tuple[dict, dict]:
    """Loop frames across devices (TF's graph_partition.cc gives each device its own copy of
    the frame): a loop op (``cond`` and ``body`` functions) whose functions span devices keeps
    its place (its *home*, where it outputs) and gains ``frame_devices``; each other device of
    the frame gets a ``WhileShard`` node reading the loop's inputs, which runs that device's
    part of every iteration (:mod:`tensorvm.ops.control.while_frames`); a loop gradient (``grad``
    function) whose function spans devices likewise gets ``WhileGradShard`` nodes. Other
    nodes are unchanged.

    >>> split_frames({"a": Node("a", "Const")}, {"a": "/A"})[1]
    {'a': '/A'}
    """
    def frame_of(node, dev):
        a = node.attrs
        if "body" in a and "cond" in a and hasattr(a["body"], "frame_devices"):
            return a["body"].frame_devices(dev, a["cond"])
        if "grad" in a and "tape_idx" in a and hasattr(a["grad"], "frame_devices"):
            return a["grad"].frame_devices(dev)
        return ()
    for n in nodes.values():  # (a loop, not any(): this runs per op of every step planned)
        a = n.attrs
        if a and (("body" in a and "cond" in a) or "tape_idx" in a or "frame_devices" in a):
            break
    else:
        return nodes, devices
    out: dict[str, Node] = {}
    devs = dict(devices)
    for name, node in nodes.items():
        frame = frame_of(node, devices[name])
        if not frame:
            out[name] = node
            continue
        home = devices[name]
        out[name] = node.replace(attrs={**node.attrs, "frame_devices": frame})
        for dev in frame:
            if dev == home:
                continue
            shard = f"{name}/frame{_short(dev)}"
            kind = "WhileGradShard" if "tape_idx" in node.attrs else "WhileShard"
            out[shard] = Node(shard, kind, node.inputs, node.control_inputs,
                              {**node.attrs, "frame_devices": frame, "home": home}, dev,
                              stateful=True, num_outputs=0, location=node.location,
                              in_shapes=node.in_shapes, in_dtypes=node.in_dtypes)
            devs[shard] = dev
    return out, devs


def frame_op(node: Node) -> bool:
    """Whether ``node`` is one device's copy of a loop frame across devices (a task of its
    own: :func:`tensorvm.passes.stage.stage`)."""
    return bool(node.attrs.get("frame_devices"))


def partition(nodes: dict[str, Node], devices: dict[str, str], feeds: set,
              fetches=(), fetch_to_host: bool = True, host_feeds=frozenset()) -> Partition:
    """Split ``nodes`` by ``devices`` (name -> device), add host<->device copies and
    Send/Recv pairs; ``fetches`` come back in :attr:`Partition.fetches` (a GPU tensor's
    fetch reads its host copy, unless not ``fetch_to_host``)."""
    nodes_in = nodes
    nodes, devices = split_frames(nodes, devices)
    # (the frame ops: only where split_frames found a loop)
    frames = () if nodes is nodes_in else tuple([k for k, n in nodes.items() if frame_op(n)])
    nodes, devices, fetches, copies = insert_copies(nodes, devices, feeds, fetches,
                                                    fetch_to_host, host_feeds)
    out: dict[str, Node] = {}
    pairs: dict[tuple, SendRecv] = {}
    short: dict[str, str] = {}  # device -> _short(device)

    def recv_for(ref, dst) -> str:
        key = (ref, dst)
        sr = pairs.get(key)
        if sr is None:
            src = devices[ref[0]]
            tag = short.get(dst)
            if tag is None:
                tag = short[dst] = _short(dst)
            # a control pair is named apart from the data pair of output 0 (its token is not
            # that output: compile gives it an empty slot)
            base = f"{ref[0]}/ctl" if ref[1] < 0 else f"{ref[0]}:{ref[1]}" if ref[1] else ref[0]
            sr = SendRecv(f"{base}/_send{tag}", f"{base}/_recv{tag}", ref, src, dst)
            pairs[key] = sr
            producer = nodes[ref[0]]
            if ref[1] < 0:
                send = Node(sr.send, "_Send", (), (ref[0],), {"token": True}, src,
                            location=producer.location)
            else:
                send = Node(sr.send, "_Send", (ref,), (), {}, src, location=producer.location)
            out[sr.send] = send
            out[sr.recv] = Node(sr.recv, "_Recv", (), (), {"send": sr.send}, dst,
                                location=producer.location)
        return sr.recv

    dev_of = devices.get
    fed_across: set[str] = set()
    for name, node in nodes.items():
        dev = devices[name]
        inputs = node.inputs
        cut = False
        for ref in inputs:
            if dev_of(ref[0]) != dev:
                if ref not in feeds:  # a cut edge: its Recv
                    cut = True
                elif ref[0] in devices:  # read as the feed, its producer elsewhere
                    fed_across.add(ref[0])
        if cut:
            inputs = tuple([r if r in feeds or devices[r[0]] == dev
                            else (recv_for(r, dev), 0) for r in inputs])
        controls = node.control_inputs
        if controls:
            controls = tuple([c if devices[c] == dev else recv_for((c, -1), dev)
                              for c in controls])
        out[name] = node.rewired(inputs, controls, dev)
    return Partition(out, tuple(pairs.values()), tuple(sorted(set(devices.values()))),
                     fetches, copies, frames, frozenset(fed_across))
