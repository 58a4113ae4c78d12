"""The two data planes of a distributed step (issue 13) on one LocalCluster of worker processes
(ps-0, worker-0..2): Send/Recv as Dask task dependencies, and partitions registered on the
workers run by one message per device with tensors handed worker to worker. Both give the
single-device result bit for bit; a lost worker, a timeout and ``steps=K`` behave the same."""
import threading
import time

import numpy as np
import pytest
import tensorvm as tv
from hypothesis import HealthCheck, given, settings
from test_passes import _build, random_programs

pytestmark = pytest.mark.cluster

TV_CLUSTER = {"ps": 1, "worker": 3}
PS = "/job:ps/replica:0/task:0/device:CPU:0"
W0 = "/job:worker/replica:0/task:0/device:CPU:0"
W1 = "/job:worker/replica:0/task:1/device:CPU:0"
PLANES = ("dask", "direct")


@settings(max_examples=20, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(program=random_programs())
def test_random_graphs_on_random_devices_match_one_device_on_both_planes(cluster, program):
    g1, fetch1, feed1 = _build(program, spread=False)
    with tv.Session(graph=g1) as s1:
        want = s1.run(fetch1, feed1)
    g2, fetch2, feed2 = _build(program, spread=True)
    s = cluster.session(g2)
    for plane in PLANES + PLANES:  # each plane twice: the second run of a plan too
        got = s.run(fetch2, feed2, options=tv.RunOptions(data_plane=plane))
        for w, x in zip(want, got):
            np.testing.assert_array_equal(w, x)
    s.close()


def _ps_graph():
    g = tv.Graph()
    with g.as_default():
        with tv.device("/job:ps/task:0"):
            v = tv.Variable(0.0, name="stepped")
            up = v.assign_add(1.0)
        with tv.device("/job:worker/task:0"):
            out = up * 10.0
    return g, v, out


@pytest.mark.parametrize("plane", PLANES)
def test_steps_k_across_devices_on_both_planes(cluster, plane):
    g, v, out = _ps_graph()
    s = cluster.session(g, config=tv.ConfigProto(data_plane=plane))
    s.run(v.initializer)
    assert s.run(out, steps=5) == 50.0
    assert s.run(v) == 5.0
    assert s.run(out, steps=3) == 80.0
    assert s.run(out) == 90.0


def test_auto_runs_a_plans_first_step_on_dask_and_the_next_direct(cluster):
    g, v, out = _ps_graph()
    s = cluster.session(g)
    s.run(v.initializer)
    traced = []
    for _ in range(3):
        md = tv.RunMetadata()
        s.run(out, options=tv.RunOptions(trace=True), run_metadata=md)
        traced.append(md)
    # the direct plane counts the bytes it moved; the Dask plane leaves that to Dask
    assert [bool(md.transfers) for md in traced] == [False, True, True]
    assert s.run(v) == 3.0


def test_auto_runs_k_steps_direct_from_the_first_run(cluster):
    """A training loop's first ``run(steps=K)`` is not unrolled K times on Dask: it goes
    direct at once (the direct plane counts the bytes it moved)."""
    g, v, out = _ps_graph()
    s = cluster.session(g)
    s.run(v.initializer)
    md = tv.RunMetadata()
    assert s.run(out, steps=4, options=tv.RunOptions(trace=True), run_metadata=md) == 40.0
    assert md.transfers and md.transfers["messages"] > 0, md.transfers
    assert s.run(v) == 4.0


def test_a_step_carries_feeds_and_sends_not_the_graphs_constants(cluster):
    big = np.arange(1 << 20, dtype=np.float32)  # a 4 MiB constant
    g = tv.Graph()
    with g.as_default():
        x = tv.placeholder(tv.float32, [4], name="x")
        with tv.device("/job:ps/task:0"):
            w = tv.Variable(np.ones(4, np.float32), name="w")
        with tv.device("/job:worker/task:0"):
            c = tv.constant(big)
            y = tv.reduce_sum(c) * 0.0 + x * w
    s = cluster.session(g)
    s.run(w.initializer)
    feed = {x: np.arange(4, dtype=np.float32)}
    want = s.run(y, feed)
    md = tv.RunMetadata()
    got = s.run(y, feed, options=tv.RunOptions(trace=True, data_plane="direct"),
                run_metadata=md)
    np.testing.assert_array_equal(want, got)
    t = md.transfers
    assert t["feeds"] == 16 and t["sends"] == 16 and t["fetches"] == 16, t
    assert 0 < t["messages"] < 4096, t  # the messages carry feeds and handles, no program
    # on the Dask plane the tasks carry the plan's handle, not its programs either
    import cloudpickle
    from tensorvm.runtime.dask_graph import step_graph
    plan = s.plan(y, feed)
    dsk, _, _ = step_graph(plan, [feed[x]], "t.0", 1, None, plan_id="p")
    assert len(cloudpickle.dumps(dsk)) < 8192


def test_direct_steps_reach_the_scheduler_in_few_report_messages(cluster):
    from tensorvm.runtime.direct.step_reports import TOPIC_STEPS, flush_step_reports
    g, v, out = _ps_graph()
    s = cluster.session(g, config=tv.ConfigProto(data_plane="direct"))
    s.run(v.initializer)
    flush_step_reports(cluster.client)
    before = len(cluster.client.get_events(TOPIC_STEPS))
    for _ in range(40):
        s.run(out)
    flush_step_reports(cluster.client)  # what is pending goes at once
    events = cluster.client.get_events(TOPIC_STEPS)[before:]
    records = [r for _, msg in events for r in msg["steps"]]
    assert len(records) == 40 and all(r["ok"] and r["n"] == 1 for r in records)
    # batched: one message per REPORT_EVERY seconds, not one per step
    assert len(events) < 20, len(events)


def test_pushes_open_a_lane_and_large_values_keep_to_dasks_comm_bit_exact(cluster):
    rng = np.random.default_rng(3)
    big = rng.normal(size=(300, 300)).astype(np.float32)  # 360 KB: frames of its own
    g = tv.Graph()
    with g.as_default():
        x = tv.placeholder(tv.float32, [300, 300], name="x")
        with tv.device("/job:worker/task:0"):
            a = tv.matmul(x, x)
            s = tv.reduce_sum(a, axis=0)  # 1.2 KB: inside the message
        with tv.device("/job:worker/task:1"):
            out = tv.matmul(a, a) + s, tv.reduce_max(s)
    with tv.Session(graph=g) as s1:
        want = s1.run(out, {x: big})
    sess = cluster.session(g, config=tv.ConfigProto(data_plane="direct"))
    for _ in range(2):
        got = sess.run(out, {x: big})
        for w, v in zip(want, got):
            np.testing.assert_array_equal(w, v)
    w0, w1 = cluster.worker("worker-0"), cluster.worker("worker-1")

    def lanes(dask_worker):
        plane = dask_worker.extensions["tensorvm"].data_plane
        return {a: lane is not None and not lane.closed for a, lane in plane.links._lanes.items()}
    assert cluster.client.run(lanes, workers=[w0])[w0].get(w1) is True


def test_workers_send_a_large_tensor_as_one_frame(cluster):
    from tensorvm.runtime.direct.packing import UNSPLIT_BYTES, pack
    g, v, out = _ps_graph()
    s = cluster.session(g)
    s.run(v.initializer)  # the workers have the data plane

    def shard():
        from distributed.comm.tcp import TCP
        return TCP.max_shard_size
    assert all(n >= UNSPLIT_BYTES for n in cluster.client.run(shard).values())
    # the direct plane's own serialisation of a large array: one frame for its data
    data = pack(np.zeros(1 << 18, np.float32))[1]
    assert [len(memoryview(f).cast("B")) for f in data.frames][-1] == 1 << 20


def _sleep(seconds):
    def f(x):
        time.sleep(seconds)
        return x
    return f


def test_direct_step_timeout_names_the_waiting_devices(cluster):
    g = tv.Graph()
    with g.as_default():
        with tv.device("/job:worker/task:0"):
            x = tv.constant([1.0, 2.0]) * 2.0
        with tv.device("/job:worker/task:1"):
            slow = tv.py_func(_sleep(2.0), [x], tv.float32)
        with tv.device("/job:ps/task:0"):
            after = slow + 1.0
    s = cluster.session(g, config=tv.ConfigProto(data_plane="direct"))
    t0 = time.monotonic()
    with pytest.raises(tv.errors.DeadlineExceededError) as e:
        s.run(after, options=tv.RunOptions(timeout_in_ms=300))
    assert time.monotonic() - t0 < 2
    msg = str(e.value)
    assert W1 in msg and PS in msg and W0 not in msg.split("stateful")[0], msg


def test_killed_ps_mid_steps_is_unavailable_naming_it_fast(cluster, tmp_path):
    started = tmp_path / "started"

    def mark(x):
        started.touch()
        return x
    g = tv.Graph()
    with g.as_default():
        with tv.device("/job:ps/task:0"):
            v = tv.Variable(0.0, name="doomed")
            up = v.assign_add(tv.py_func(mark, [tv.constant(1.0)], tv.float32))
        with tv.device("/job:worker/task:0"):
            out = up * 2.0
    s = cluster.session(g, config=tv.ConfigProto(data_plane="direct"))
    s.run(v.initializer)
    old = cluster.worker("ps-0")
    result = {}

    def steps():
        try:
            s.run(out, steps=100000)
        except BaseException as e:  # noqa: BLE001 - checked below
            result["error"] = e
        result["at"] = time.monotonic()
    th = threading.Thread(target=steps)
    th.start()
    deadline = time.monotonic() + 30
    while not started.exists():  # the steps are running on the PS
        assert time.monotonic() < deadline and th.is_alive(), result
        time.sleep(0.01)
    cluster.kill("ps-0")
    killed_at = time.monotonic()
    th.join(30)
    assert not th.is_alive(), "the steps hung after their PS worker died"
    err = result.get("error")
    assert isinstance(err, tv.errors.UnavailableError), repr(err)
    assert PS in str(err) and old in str(err), str(err)
    assert result["at"] - killed_at < 5
    # the next session works on the restarted worker (the state is gone)
    cluster.wait_full()
    s2 = cluster.session(g, config=tv.ConfigProto(data_plane="direct"))
    s2.run(v.initializer)
    assert s2.run(out) == 2.0 and s2.run(out) == 4.0


def _roundtrip(value):
    """pack, a real trip through Dask's wire format (dumps/loads), unpack."""
    from distributed.protocol import dumps, loads
    from tensorvm.runtime.direct.packing import pack, unpack
    return unpack(loads(dumps({"v": pack(value)}))["v"])


@pytest.mark.parametrize("value", [
    np.array([1.5, np.nan, -0.0, np.inf], np.float32),
    np.arange(12, dtype=">i4").reshape(3, 4),
    np.asfortranarray(np.arange(6, dtype=np.float64).reshape(2, 3)),
    np.array(7, np.int16),
    np.zeros((0, 3), np.complex64),
    np.array([True, False]),
    np.float32(2.5),
    np.uint8(255),
])
def test_packed_values_come_back_bit_exact(value):
    got = _roundtrip(value)
    assert type(got) is type(value) and got.dtype == value.dtype
    assert np.shape(got) == np.shape(value)
    assert np.asarray(got).tobytes(order="A") == np.asarray(value).tobytes(order="A")
    if isinstance(value, np.ndarray):
        assert got.flags.writeable and got.flags.f_contiguous == value.flags.f_contiguous


def test_packed_large_strided_and_other_values():
    from tensorvm.vm.results import StageResult
    big = np.arange(1 << 17, dtype=np.float32)  # 512 KiB: an out-of-band frame
    got = _roundtrip(big)
    np.testing.assert_array_equal(got, big)
    assert got.ctypes.data % 8 == 0 and got.flags.writeable  # its own, aligned buffer
    strided = np.arange(20.0)[::2]
    np.testing.assert_array_equal(_roundtrip(strided), strided)
    out = _roundtrip(StageResult((np.ones(3), (np.int64(4), "s"))))
    assert type(out) is StageResult and len(out) == 2
    assert out[1] == (4, "s") and type(out[1]) is tuple
    np.testing.assert_array_equal(out[0], np.ones(3))
    strings = np.array([b"ab", b"c"], object)
    assert list(_roundtrip(strings)) == [b"ab", b"c"]
    assert _roundtrip(None) is None and _roundtrip([1, 2]) == [1, 2]


def test_a_failed_direct_step_reports_its_error_for_the_dashboard(cluster):
    """On the direct plane a failed step reached the job's page as 'N failed' with no message
    (the Dask plane's tasks carry their exception): its record now carries the error."""
    from tensorvm.runtime.direct.step_reports import TOPIC_STEPS, flush_step_reports

    def boom(v):
        if v[0] > 2:
            raise ValueError("too big <b>")
        return v

    g = tv.Graph()
    with g.as_default():
        x = tv.placeholder(tv.float64, [3], name="x")
        with tv.device("/job:worker/task:0"):
            y = tv.py_func(boom, [x], tv.float64, name="boom")
    s = cluster.session(g, config=tv.ConfigProto(data_plane="direct"))
    for v in (0.0, 1.0):
        s.run(y, {x: np.full(3, v)})
    flush_step_reports(cluster.client)
    before = len(cluster.client.get_events(TOPIC_STEPS))
    with pytest.raises(tv.errors.OpError, match="too big"):
        s.run(y, {x: np.full(3, 5.0)})
    flush_step_reports(cluster.client)
    records = [r for _, msg in cluster.client.get_events(TOPIC_STEPS)[before:]
               for r in msg["steps"]]
    assert len(records) == 1 and not records[0]["ok"], records
    assert "'boom'" in records[0]["error"] and "too big <b>" in records[0]["error"]
