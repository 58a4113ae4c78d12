"""Loop lanes (issue 27, the per-iteration cost of a loop across worker processes): the loop
box that hands a value straight to the kernel thread waiting for it, the lane's sockets
(frames whole, a garbled or oversized frame closes its connection), and on a cluster of two
worker processes a loop whose values go thread to thread, not through the workers' event
loops."""
from __future__ import annotations

import select
import socket
import sys
import threading
import time

import msgpack
import numpy as np
import pytest

import tensorvm as tv
from tensorvm.runtime.direct.loop_box import MISSING, LoopBox
from tensorvm.runtime.direct.loop_lane import LoopLaneOut, LoopLaneServer, local_socket
from tensorvm.runtime.direct.data_plane import data_plane_stats
from tensorvm.runtime.direct.packing import pack, unpack


def _no_check():
    pass


def _waiting(box, step, key, out):
    def go():
        try:
            out["value"] = box.get(step, key, 0.05, _no_check)
        except BaseException as exc:  # noqa: BLE001 - the test reads it
            out["error"] = exc
    th = threading.Thread(target=go, daemon=True)
    th.start()
    return th


def _until(pred, what):
    deadline = time.monotonic() + 60
    while not pred():
        assert time.monotonic() < deadline, what
        time.sleep(0.005)


# ---- the box ----------------------------------------------------------------------------------
def test_a_value_that_comes_first_is_kept_and_one_that_comes_later_wakes_its_waiter():
    box = LoopBox()
    box.open_step("s")
    box.put("s", "a", np.float64(1.5))
    assert box.has("s", "a")
    assert box.get("s", "a", 0.05, _no_check) == 1.5
    assert not box.has("s", "a") and box.take("s", "a") is MISSING
    out = {}
    th = _waiting(box, "s", "b", out)
    _until(lambda: box.stats()["loop_values"] == 1, "the waiter never registered")
    box.put("s", "b", np.arange(3))
    th.join(60)
    np.testing.assert_array_equal(out["value"], np.arange(3))
    box.close_step("s")
    assert box.stats() == {"loop_values": 0, "loop_unclaimed_values": 0,
                           "loop_unclaimed_bytes": 0, "loop_steps_dropped": 0}


def test_an_aborted_step_wakes_its_waiters_with_the_error_and_drops_later_values():
    box = LoopBox()
    box.open_step("s")
    out = {}
    th = _waiting(box, "s", "k", out)
    _until(lambda: box.stats()["loop_values"] == 1, "the waiter never registered")
    box.abort("s", tv.errors.CancelledError("step s was cancelled"))
    th.join(60)
    assert isinstance(out["error"], tv.errors.CancelledError)
    box.put("s", "k2", 1.0)
    assert not box.has("s", "k2")
    with pytest.raises(tv.errors.CancelledError, match="step s was cancelled"):
        box.get("s", "k2", 0.05, _no_check)


def test_a_wait_stops_when_its_check_raises_and_leaves_no_waiter():
    box = LoopBox()
    calls = []

    def check():
        calls.append(1)
        if len(calls) == 3:
            raise tv.errors.CancelledError("given up")
    with pytest.raises(tv.errors.CancelledError, match="given up"):
        box.get("s", "k", 0.01, check)
    assert box.stats()["loop_values"] == 0
    box.put("s", "k", 2.0)  # kept for a later wait, not handed to the gone one
    assert box.take("s", "k") == 2.0
    # the thread's next waits (its one waiter, reused) get their own values
    th = threading.Timer(0.05, box.put, ("s", "k2", 3.0))
    th.start()
    assert box.get("s", "k2", 0.01, _no_check) == 3.0
    box.put("s", "k3", 4.0)
    assert box.get("s", "k3", 0.01, _no_check) == 4.0
    th.join()


def test_unclaimed_values_are_bounded_in_count_and_time_but_an_open_step_keeps_its_own():
    now = [0.0]
    box = LoopBox(ttl=10, max_values=2, max_bytes=1 << 20, clock=lambda: now[0])
    box.open_step("mine")
    for k in range(5):  # an open step's values: whatever their count
        box.put("mine", str(k), np.float64(k))
    box.put("old", "a", np.float64(1))
    box.put("old", "b", np.float64(2))
    assert box.stats()["loop_unclaimed_values"] == 2
    box.put("new", "a", np.float64(3))  # three unclaimed: the oldest step goes
    st = box.stats()
    assert st["loop_steps_dropped"] == 1 and st["loop_unclaimed_values"] == 1
    with pytest.raises(tv.errors.ResourceExhaustedError,
                       match="unclaimed-max-values"):
        box.get("old", "a", 0.01, _no_check)
    now[0] = 11.0
    box.expire()
    with pytest.raises(tv.errors.ResourceExhaustedError, match="within 10 s"):
        box.get("new", "a", 0.01, _no_check)
    assert [box.take("mine", str(k)) for k in range(5)] == [0, 1, 2, 3, 4]
    box.put("mine", "late", np.float64(9))
    box.close_step("mine")  # values left when its last shard ends are unclaimed from then
    assert box.stats()["loop_unclaimed_values"] == 1
    box.open_step("mine")  # a later shard of the step (a gradient's) claims them again
    assert box.stats()["loop_unclaimed_values"] == 0 and box.take("mine", "late") == 9


# ---- the sockets ------------------------------------------------------------------------------
LOCAL = pytest.param("local", marks=pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="Unix sockets in the abstract namespace: Linux"))


@pytest.fixture(params=["tcp", LOCAL])
def lane(request):
    """A box, a lane server into it, its refusals; ``server.kind``: how ``_out`` connects
    (TCP, or the Unix socket a worker on the same host uses)."""
    box = LoopBox()
    refused = []

    def deliver(step, items):
        for key, data in items:
            box.put(step, key, unpack(data))
    server = LoopLaneServer("127.0.0.1", deliver, 1 << 20, lambda why, peer: refused.append(why))
    server.kind = request.param
    yield box, server, refused
    server.close()


def _connect(server):
    if server.kind == "tcp":
        return socket.create_connection(("127.0.0.1", server.port))
    sock, where = local_socket(server.local_name)
    sock.setblocking(True)
    sock.connect(where)
    return sock


def _out(server, cap=1 << 20):
    return LoopLaneOut(_connect(server), cap)


def test_frames_arrive_whole_and_bit_exact_small_and_through_partial_writes(lane):
    box, server, _ = lane
    box.open_step("s")
    out = _out(server)
    rng = np.random.RandomState(0)
    values = {f"k{j}": rng.rand(8, 1024) for j in range(100)}  # 64 KiB each: many writes
    for key, v in values.items():
        frame = out.frame("s", [[key, pack(v)], [key + "p", pack(np.bool_(True))]])
        out.write(frame, _no_check, 0.05)
    for key, v in values.items():
        got = box.get("s", key, 0.05, _no_check)
        assert got.dtype == v.dtype and got.flags.writeable
        np.testing.assert_array_equal(got, v)
        assert box.get("s", key + "p", 0.05, _no_check) is np.bool_(True)
    big = [[f"b{j}", pack(rng.rand(8192))] for j in range(12)]  # one frame of ~800 KB
    out.write(out.frame("s", big), _no_check, 0.05)
    for key, data in big:
        np.testing.assert_array_equal(box.get("s", key, 0.05, _no_check), unpack(data))
    out.close()


def test_a_frame_the_lane_cannot_carry_is_left_to_daskss_comm(lane):
    _, server, _ = lane
    out = _out(server, cap=1000)
    assert out.frame("s", [["k", pack(np.zeros(10))]]) is not None
    assert out.frame("s", [["k", pack(np.zeros(1000))]]) is None  # over the receiver's cap
    assert out.frame("s", [["k", pack({"not": "an array"})]]) is None  # Dask serialises it
    out.close()


@pytest.mark.parametrize("bad, why", [
    ((1 << 30).to_bytes(4, "little"), "over the cap"),
    (len(b"\xc1").to_bytes(4, "little") + b"\xc1", "not [step, items]"),
    (len(msgpack.packb(7)).to_bytes(4, "little") + msgpack.packb(7), "not [step, items]"),
])
def test_a_garbled_or_oversized_frame_closes_its_connection(lane, bad, why):
    box, server, refused = lane
    sock = _connect(server)
    sock.sendall(bad)
    sock.settimeout(60)
    assert sock.recv(10) == b""  # closed by the worker
    sock.close()
    assert why in refused[0]
    _until(lambda: server.connections == 0, "the refused connection stayed open")
    box.open_step("s")  # the lane still takes other connections
    out = _out(server)
    out.write(out.frame("s", [["k", pack(np.int32(4))]]), _no_check, 0.05)
    assert box.get("s", "k", 0.05, _no_check) == 4


def test_a_write_to_a_lane_whose_peer_went_away_raises_at_once(lane):
    """A peer that died closed its end: a write would still go (into the void) and the
    shard wait for an answer that never comes; the first write raises instead."""
    _, server, _ = lane
    out = _out(server)
    _until(lambda: server.connections == 1, "the lane was never accepted")
    server.close()  # the worker's end of its connections closed, as a dead process's are
    poller = select.poll()  # until the close reached this end (a FIN: no reset yet)
    poller.register(out.sock.fileno(), select.POLLIN)
    assert poller.poll(60_000)
    with pytest.raises(OSError, match="the peer closed the loop lane"):
        out.write(out.frame("s", [["k", pack(np.float64(1))]]), _no_check, 0.05)
    assert out.closed
    with pytest.raises(OSError, match="was closed"):
        out.write(out.frame("s", [["k", pack(np.float64(1))]]), _no_check, 0.05)


# ---- on a cluster of two worker processes -----------------------------------------------------
TV_CLUSTER = {"worker": 2}
TV_CLUSTER_SHARED = True  # kills no worker, leaves no state
W0, W1 = "/job:worker/task:0", "/job:worker/task:1"


def _count_loop_wakeups(dask_worker):
    """Count calls into this worker's event loop from other threads (how a kernel thread
    hands the loop work: a push, a wait)."""
    loop = dask_worker.loop.asyncio_loop
    real = type(loop).call_soon_threadsafe
    counts = dask_worker._tv_test_wakeups = [0]

    def counted(*args, **kw):
        counts[0] += 1
        return real(loop, *args, **kw)
    loop.call_soon_threadsafe = counted


def _wakeups(dask_worker):
    counts = dask_worker._tv_test_wakeups
    del dask_worker.loop.asyncio_loop.call_soon_threadsafe
    return counts[0]


def _lane_families(dask_worker):
    outs = dask_worker.extensions["tensorvm"].data_plane.loop_lanes.outs
    return tuple(sorted({out.sock.family.name for out in outs.values() if out is not None}))


@pytest.mark.cluster
@pytest.mark.parametrize("plane", ["direct", "dask"])
def test_a_loops_values_go_thread_to_thread_not_through_the_event_loops(tv_cluster, g, plane):
    """The loop's two devices hand each other the predicate and a value every iteration;
    each hop used to go through both workers' event loops (a push scheduled from the kernel
    thread, a wait for the value scheduled there too): a few calls into each loop per
    iteration. Over the loop lane the kernel threads write and wait themselves."""
    n = tv.placeholder(tv.int32, [])
    with tv.device(W0):
        def body(i, acc):
            with tv.device(W1):
                nxt = acc * 0.5 + 0.1
            with tv.device(W0):
                return i + 1, tv.tanh(nxt)
        _, out = tv.while_loop(lambda i, acc: i < n, body,
                               [tv.constant(0), tv.constant(0.3, tv.float64)])
    s = tv_cluster.session(config=tv.ConfigProto(data_plane=plane))
    want = 0.3
    for _ in range(3):
        want = np.tanh(want * 0.5 + 0.1)
    assert s.run(out, {n: 3}) == want  # the lanes open; the same kernels as NumPy's
    iters = 400
    for _ in range(iters - 3):
        want = np.tanh(want * 0.5 + 0.1)
    client = tv_cluster.client
    client.run(_count_loop_wakeups)
    try:
        got = s.run(out, {n: iters})
    finally:
        calls = client.run(_wakeups)
    assert got == want
    # a step's own messages and the shards' tasks cost a few; a hop through the loop one
    # or more each
    assert all(c < iters // 4 for c in calls.values()), calls
    if sys.platform.startswith("linux"):  # workers on one host: their lanes' Unix sockets
        assert set(client.run(_lane_families).values()) == {("AF_UNIX",)}
    stats = client.run(data_plane_stats)
    assert all(st["loop_values"] == 0 and st["loop_unclaimed_values"] == 0
               for st in stats.values()), stats


def _comm_loop_values(dask_worker):
    """Loop values that came on Dask's comm (``tvm_send`` with ``loop``), counted."""
    plane = dask_worker.extensions["tensorvm"].data_plane
    counts = dask_worker._tv_test_comm_loop = [0]
    real = plane.send

    def send(comm=None, step=None, items=(), loop=False):
        if loop:
            counts[0] += len(items)
        return real(comm, step, items, loop)
    plane.send = send
    from tensorvm.runtime.wire_names import handler
    dask_worker.handlers[handler("send")] = send


def _comm_loop_count(dask_worker):
    plane = dask_worker.extensions["tensorvm"].data_plane
    from tensorvm.runtime.wire_names import handler
    del plane.send
    dask_worker.handlers[handler("send")] = plane.send
    return dask_worker._tv_test_comm_loop[0]


@pytest.mark.cluster
@pytest.mark.parametrize("plane", ["direct", "dask"])
def test_loop_values_too_large_for_a_lane_go_on_dasks_comm_bit_exact(tv_cluster, g, plane):
    """A loop value over the rendezvous' inline size (64 KiB) does not fit a lane frame: it
    goes on Dask's comm into the peer's loop box, and the loop's result is NumPy's."""
    x = np.random.RandomState(1).rand(20_000)  # 160 KB
    n = tv.placeholder(tv.int32, [])
    with tv.device(W0):
        def body(i, acc):
            with tv.device(W1):
                nxt = acc * 0.5 + 0.1
            with tv.device(W0):
                return i + 1, tv.tanh(nxt)
        _, out = tv.while_loop(lambda i, acc: i < n, body, [tv.constant(0), tv.constant(x)])
    s = tv_cluster.session(config=tv.ConfigProto(data_plane=plane))
    want = x
    for _ in range(5):
        want = np.tanh(want * 0.5 + 0.1)
    client = tv_cluster.client
    client.run(_comm_loop_values)
    try:
        got = s.run(out, {n: 5})
    finally:
        counts = client.run(_comm_loop_count)
    np.testing.assert_array_equal(got, want)
    assert sum(counts.values()) >= 2 * 5, counts  # acc there, the product back, each time


def _loop_outs(dask_worker):
    outs = dask_worker.extensions["tensorvm"].data_plane.loop_lanes.outs
    return sorted(repr(out) if out is not None else None for out in outs.values())


@pytest.mark.cluster
def test_on_a_tls_cluster_loop_values_keep_to_dasks_encrypted_comms():
    """A TLS cluster's workers open no plain socket for each other (no lane, no loop lane):
    a loop across its workers hands its values over Dask's comms, on both planes."""
    from distributed import Security
    g = tv.Graph()
    with g.as_default():
        n = tv.placeholder(tv.int32, [])
        with tv.device(W0):
            def body(i, acc):
                with tv.device(W1):
                    nxt = acc * 0.5 + 0.1
                with tv.device(W0):
                    return i + 1, tv.tanh(nxt)
            _, out = tv.while_loop(lambda i, acc: i < n, body,
                                   [tv.constant(0), tv.constant(0.3, tv.float64)])
    want = 0.3
    for _ in range(6):
        want = np.tanh(want * 0.5 + 0.1)
    with tv.Session(cluster={"worker": 2}, graph=g, security=Security.temporary(),
                    verbose=False) as s:
        assert s.client.scheduler.address.startswith("tls://")
        for plane in ("direct", "dask"):
            assert s.run(out, {n: 6}, options=tv.RunOptions(data_plane=plane)) == want
        assert set(map(tuple, s.client.run(_loop_outs).values())) == {(None,)}
