"""Issue 24, items 11-13: what a raw-socket client can do to a worker's lane, what values for
steps nobody runs cost a worker, and what the job page serves of a job's arguments.

Real sockets against the lanes of real worker processes (a LocalCluster started with small
bounds in Dask's config, which its Nannies hand to the workers), the worker's memory read with
psutil, and the dashboard's JSON and HTML read over HTTP."""
import asyncio
import json
import socket
import time
import urllib.parse
import urllib.request

import dask
import msgpack
import numpy as np
import pytest
import tensorvm as tv
from tensorvm.runtime.direct.config import LANE_MAX_FRAME_BYTES, lane_max_frame_bytes
from tensorvm.runtime.direct.data_plane import data_plane_stats
from tensorvm.runtime.direct.rendezvous import Rendezvous
from tensorvm.scheduler_ext import TOPIC_JOBS, job_message

pytestmark = pytest.mark.cluster

TV_CLUSTER = {"worker": 2}
SMALL = {  # the bounds of this module's cluster (the defaults are far larger)
    "tensorvm.lane.max-frame-bytes": 1 << 20,
    "tensorvm.rendezvous.unclaimed-max-values": 1000,
    "tensorvm.rendezvous.unclaimed-max-bytes": 16 << 20,
    "tensorvm.rendezvous.unclaimed-ttl": 5,
}
W0 = "/job:worker/replica:0/task:0/device:CPU:0"
W1 = "/job:worker/replica:0/task:1/device:CPU:0"


@pytest.fixture(scope="module")
def tv_cluster(cluster_handle):
    with dask.config.set(SMALL):  # copied by each Nanny into its worker process
        handle = cluster_handle(TV_CLUSTER)
    yield handle
    handle.close()


# ---- helpers run on a worker ----------------------------------------------------------------

async def _lane(dask_worker):
    return await dask_worker.extensions["tensorvm"].data_plane.lane()


def _rss():
    import psutil
    return psutil.Process().memory_info().rss


def _on(cluster, fn, name="worker-1"):
    addr = cluster.worker(name)
    return cluster.client.run(fn, workers=[addr])[addr]


def _lane_address(cluster, name="worker-1"):
    addr = cluster.worker(name)
    port = _on(cluster, _lane, name)["port"]
    return urllib.parse.urlparse(addr).hostname, port


def _wait_for(cluster, cond, what, timeout=120.0):
    """Poll the worker's data-plane stats until ``cond(stats)`` (a deadline only against a
    hang, far above what it takes)."""
    deadline = time.monotonic() + timeout
    while True:
        stats = _on(cluster, data_plane_stats)
        if cond(stats):
            return stats
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: still {stats}")
        time.sleep(0.1)


def _many_small_values_graph(n=20, size=15_000):
    """worker-0 makes ``n`` float32 tensors of ``size`` values in one stage (each small enough
    to travel inside a lane frame, all together over the module's frame cap); worker-1 sums
    them."""
    g = tv.Graph()
    with g.as_default():
        x = tv.placeholder(tv.float32, [size], name="x")
        with tv.device(W0):
            parts = [x * float(i + 1) for i in range(n)]
        with tv.device(W1):
            out = tv.add_n(parts), tv.reduce_sum(parts[-1])
    return g, x, out


# ---- 11: lane frames have a size limit ------------------------------------------------------

def test_a_lane_frame_longer_than_the_cap_drops_the_connection(cluster):
    host, port = _lane_address(cluster)
    before = _on(cluster, data_plane_stats)
    rss0 = _on(cluster, _rss)
    chunk = b"\0" * (1 << 20)
    sent, dropped = 0, None
    with socket.create_connection((host, port)) as s:
        s.settimeout(60)
        try:
            s.sendall((2 ** 31 - 1).to_bytes(4, "little"))  # 2 GiB - 1 announced
            while sent < 256 << 20:
                s.sendall(chunk)
                sent += len(chunk)
        except TimeoutError:
            dropped = False  # the worker neither read nor closed: a hang, not a drop
        except OSError:  # reset or broken pipe: the worker closed the lane
            dropped = True
        else:
            dropped = False
    assert dropped, f"the worker took {sent >> 20} MiB of a 2 GiB frame"
    assert sent < 64 << 20  # what the kernel's buffers held, not the frame
    _wait_for(cluster, lambda st: st["lane_frames_refused"] > before["lane_frames_refused"]
              and st["lanes_in"] <= before["lanes_in"], "the lane is closed and counted")
    assert _on(cluster, _rss) - rss0 < 64 << 20


def test_a_frame_under_the_cap_that_is_not_msgpack_drops_the_connection(cluster):
    host, port = _lane_address(cluster)
    before = _on(cluster, data_plane_stats)
    with socket.create_connection((host, port)) as s:
        s.settimeout(60)
        s.sendall((8).to_bytes(4, "little") + b"\xc1" * 8)  # 0xc1: never valid msgpack
        assert s.recv(1) == b""  # closed by the worker
    _wait_for(cluster, lambda st: st["lane_frames_refused"] > before["lane_frames_refused"],
              "the garbled frame is counted")


def test_pushes_over_the_frame_cap_go_on_dasks_comm_bit_exact(cluster):
    g, x, out = _many_small_values_graph()  # ~1.2 MB of values for one frame: over 1 MiB
    feed = {x: np.random.default_rng(0).normal(size=15_000).astype(np.float32)}
    with tv.Session(graph=g) as local:
        want = local.run(out, feed)
    before = _on(cluster, data_plane_stats)
    sess = cluster.session(g, config=tv.ConfigProto(data_plane="direct"))
    for _ in range(3):
        got = sess.run(out, feed)
        for w, v in zip(want, got):
            np.testing.assert_array_equal(w, v)
    after = _on(cluster, data_plane_stats)
    assert after["lane_frames_refused"] == before["lane_frames_refused"]


def test_the_lane_cap_default_and_its_config():
    assert lane_max_frame_bytes() == LANE_MAX_FRAME_BYTES == 64 << 20
    with dask.config.set({"tensorvm.lane.max-frame-bytes": "2 MiB"}):
        assert lane_max_frame_bytes() == 2 << 20
    with dask.config.set({"tensorvm.lane.max-frame-bytes": 0}):
        with pytest.raises(ValueError, match="tensorvm.lane.max-frame-bytes"):
            lane_max_frame_bytes()


# ---- 12: values for steps nobody runs are dropped -------------------------------------------

def test_values_for_made_up_steps_are_bounded_and_expire(cluster):
    """The probe: 20,000 frames, each one 4 KiB value for a step id nobody runs."""
    host, port = _lane_address(cluster)
    before = _on(cluster, data_plane_stats)
    rss0 = _on(cluster, _rss)
    value = ["a", "<f4", [1024], b"\1" * 4096]
    n = 20_000
    with socket.create_connection((host, port)) as s:
        for i in range(0, n, 500):
            batch = []
            for j in range(i, i + 500):
                frame = msgpack.packb([f"made-up-{j}", [["0|x:0", value]]])
                batch.append(len(frame).to_bytes(4, "little") + frame)
            s.sendall(b"".join(batch))
    stats = _wait_for(cluster, lambda st: st["lane_frames"] >= before["lane_frames"] + n,
                      "all frames read")
    assert stats["lane_frames_refused"] == before["lane_frames_refused"]  # all well formed
    assert stats["unclaimed_values"] <= SMALL["tensorvm.rendezvous.unclaimed-max-values"]
    assert stats["values"] <= SMALL["tensorvm.rendezvous.unclaimed-max-values"]
    assert stats["unclaimed_bytes"] <= SMALL["tensorvm.rendezvous.unclaimed-max-bytes"]
    assert stats["steps_dropped"] - before["steps_dropped"] >= n - 1000
    assert _on(cluster, _rss) - rss0 < 40 << 20  # the probe saw +90 MB
    # what is left is dropped after the time-to-live (5 s here)
    _wait_for(cluster, lambda st: st["unclaimed_values"] == 0, "unclaimed values expire")
    # the lanes and the rendezvous still serve real steps
    g, x, out = _many_small_values_graph(n=2, size=100)
    sess = cluster.session(g, config=tv.ConfigProto(data_plane="direct"))
    got = sess.run(out, {x: np.ones(100, np.float32)})
    np.testing.assert_array_equal(got[0], np.full(100, 3.0, np.float32))


def _rendezvous(now, **kw):
    kw = {"ttl": 10.0, "max_values": 4, "max_bytes": 1 << 20, **kw}
    return Rendezvous(clock=lambda: now[0], **kw)


def test_an_early_value_waits_for_its_recv_within_the_time_to_live():
    async def main():
        now = [0.0]
        r = _rendezvous(now)
        r.put("s1", "0|e", np.arange(3.0))  # the Send came before its step's Recv
        now[0] = 9.0
        r.put("s2", "0|e", np.ones(2))
        np.testing.assert_array_equal(await r.get("s1", "0|e"), np.arange(3.0))
        now[0] = 19.5  # s2 waited 10.5 s unclaimed: dropped, and its late Recv says why
        r.put("s3", "0|e", np.ones(2))
        assert r.stats()["unclaimed_values"] == 1
        with pytest.raises(tv.errors.ResourceExhaustedError, match="unclaimed-ttl"):
            await r.get("s2", "0|e")
        r.put("s2", "0|e", np.ones(2))  # a late value of a dropped step is dropped too
        assert r.stats()["values"] == 1
        r.close()
    asyncio.run(main())


def test_a_running_steps_values_are_kept_beyond_the_bounds_and_the_oldest_unclaimed_go():
    async def main():
        now = [0.0]
        r = _rendezvous(now)
        r.open_step("run")  # a tvm_run of this step runs on the worker
        for i in range(10):  # more than max_values, older than the ttl: kept
            r.put("run", f"{i}|e", np.full(2, i))
        for k in range(6):  # six steps nobody runs here (yet): the two oldest go
            now[0] += 1.0
            r.put(f"early{k}", "0|e", np.ones(2))
        now[0] += 100.0
        with pytest.raises(tv.errors.ResourceExhaustedError, match="unclaimed-max-values"):
            await r.get("early0", "0|e")
        for i in range(10):
            np.testing.assert_array_equal(await r.get("run", f"{i}|e"), np.full(2, i))
        r.close_step("run")
        assert r.stats()["steps_dropped"] == 2
        # a value over the byte bound on its own: dropped as it comes, never kept
        r.put("huge", "0|e", np.zeros(1 << 18))  # 2 MiB
        assert r.stats()["unclaimed_bytes"] == 0
        with pytest.raises(tv.errors.ResourceExhaustedError, match="unclaimed-max-bytes"):
            await r.get("huge", "0|e")
        r.close()
    asyncio.run(main())


# ---- 13: job arguments with secret names are redacted ---------------------------------------

def _get(url):
    with urllib.request.urlopen(url, timeout=30) as r:
        return r.read().decode()


def test_job_arguments_named_like_secrets_are_redacted_in_the_api_and_page(cluster):
    c = cluster.client
    secrets = ["tok-1", "tok-2", "pw-3", "key-4", "sec-5", "tok-6"]
    args = {"api_token": "tok-1", "input": "in.txt", "epochs": 3,
            "argv": ["--api-token", "tok-2", "--db-password=pw-3", "--epochs", "3"],
            "options": {"aws_secret_access_key": "key-4", "name": "n1"},
            "command": "--client-secret sec-5 --lr 0.1", "API-KEY": ["tok-6"]}
    c.log_event(TOPIC_JOBS, job_message("start", "redact-1", name="leaky", user="ann",
                                        client="elsewhere", args=args))
    base = c.dashboard_link.rsplit("/status", 1)[0]
    deadline = time.monotonic() + 60
    while "redact-1" not in _get(f"{base}/tensorvm/api/jobs"):
        assert time.monotonic() < deadline, "the job never reached the registry"
        time.sleep(0.1)
    pages = {u: _get(base + u) for u in ("/tensorvm/api/jobs", "/tensorvm/api/jobs/redact-1",
                                         "/tensorvm", "/tensorvm/job/redact-1",
                                         "/tensorvm/job/redact-1/fragment")}
    pages["rpc"] = json.dumps(c.sync(c.scheduler.tensorvm_jobs, job="redact-1"))
    for where, text in pages.items():
        for s in secrets:
            assert s not in text, f"{s} served by {where}"
    shown = json.loads(pages["/tensorvm/api/jobs/redact-1"])["args"]
    assert shown == {"api_token": "***", "input": "in.txt", "epochs": 3,
                     "argv": ["--api-token", "***", "--db-password=***", "--epochs", "3"],
                     "options": {"aws_secret_access_key": "***", "name": "n1"},
                     "command": "--client-secret *** --lr 0.1", "API-KEY": "***"}
    assert "in.txt" in pages["/tensorvm/job/redact-1"]  # the page shows the arguments
