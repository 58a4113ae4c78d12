"""The direct plane's worker side, per step (issue 26: the parameter server's and workers' CPU
per training step): what a ``tvm_run`` costs a worker besides its kernels.

* Lanes between workers on one host are Unix sockets (the loop lanes' rule), not TCP loopback.
* A small string tensor (a step token, a string pushed to another device) travels as its bytes,
  on the lane, not through Dask's serialisation (a pickle each way, and a Dask comm message
  instead of a lane frame).
* A ``tvm_run`` reply is not walked for its size (Dask's offload decision): its values are
  small or serialised already.
"""
import msgpack
import numpy as np
import pytest
import tensorvm as tv
from tensorvm.runtime.direct.data_plane import data_plane_stats
from tensorvm.runtime.direct.packing import pack, unpack

TV_CLUSTER_SHARED = True
DIRECT = tv.ConfigProto(data_plane="direct")


def _on(cluster, fn, name):
    addr = cluster.worker(name)
    return cluster.client.run(fn, workers=[addr])[addr]


@pytest.mark.parametrize("value", [
    np.asarray(b"a1b2c3-17/3", dtype=object),  # a step token
    np.asarray(b"", dtype=object),
    np.array([[b"x", b"yy\x00"], [b"", b"w"]], dtype=object),
    np.array(["text", "ünï", b"b"], dtype=object),  # str items stay str
    b"raw bytes",
    "ünï",
], ids=["token", "empty", "2x2", "str-items", "bytes", "str"])
def test_small_strings_travel_as_their_bytes_on_a_lane_and_on_daskss_comm(value):
    """Failed before: strings went through Dask's serialisation (tag ``"o"``, a pickle), which
    a lane cannot carry (a Dask comm message a push instead)."""
    from distributed.protocol import dumps, loads
    packed = pack(value)
    assert packed[0] != "o"
    for got in (unpack(msgpack.unpackb(msgpack.packb(packed))),  # a lane frame
                unpack(loads(dumps({"v": packed}))["v"])):  # a Dask comm message
        assert type(got) is type(value)
        if isinstance(value, np.ndarray):
            assert got.dtype == object and got.shape == value.shape and got.flags.writeable
            assert [type(x) for x in got.ravel()] == [type(x) for x in value.ravel()]
            assert got.ravel().tolist() == value.ravel().tolist()
        else:
            assert type(got) is type(value) and got == value


@pytest.mark.parametrize("value", [
    np.array(["\ud800"], dtype=object),  # a lone surrogate: no UTF-8 for msgpack
    np.array([b"a", None], dtype=object),
    np.array([[b"x", b"y"], [b"z", b"w"]], dtype=object).T,  # Fortran order kept
    np.array([b"%0999d" % i for i in range(100)], dtype=object),  # over SMALL_BYTES
])
def test_other_object_arrays_keep_daskss_serialisation(value):
    packed = pack(value)
    assert packed[0] == "o"
    got = unpack(packed).data
    assert got is value


def _string_graph():
    g = tv.Graph()
    with g.as_default():
        tok = tv.placeholder(tv.string, [])
        with tv.device("/job:ps/task:0"):
            joined = tv.strings.join([tok, tok], separator="|")
        with tv.device("/job:worker/task:0"):
            n = tv.strings.length(joined)
    return g, tok, n


def test_a_string_pushed_to_another_worker_goes_on_the_lane(cluster):
    """Failed before: the PS's string went to worker-0 as a Dask comm message each step (the
    lane's frame count did not move)."""
    g, tok, n = _string_graph()
    s = cluster.session(g, config=DIRECT)
    assert s.run(n, {tok: b"abc"}) == 7  # the first step opens the lanes
    before = _on(cluster, data_plane_stats, "worker-0")
    for i in range(5):
        assert s.run(n, {tok: b"x" * i}) == 2 * i + 1
    after = _on(cluster, data_plane_stats, "worker-0")
    assert after["lane_frames"] - before["lane_frames"] == 5
    assert after["lane_frames_refused"] == before["lane_frames_refused"]


def test_lanes_between_workers_on_one_host_are_unix_sockets(cluster):
    """Failed before: every lane was TCP loopback (``lanes_in_local`` did not exist)."""
    g = tv.Graph()
    with g.as_default():
        with tv.device("/job:ps/task:0"):
            v = tv.Variable(np.arange(4, dtype=np.float32), name="lane_v")
            up = v.assign_add(np.ones(4, np.float32))
        with tv.device("/job:worker/task:1"):
            out = up * 2.0
    s = cluster.session(g, config=DIRECT)
    s.run(v.initializer)
    for k in range(1, 4):
        np.testing.assert_array_equal(s.run(out), (np.arange(4) + k) * 2.0)
    stats = _on(cluster, data_plane_stats, "worker-1")
    assert stats["lanes_in_local"] >= 1
    assert stats["lanes_in_local"] <= stats["lanes_in"]


def _count_reply_sizeofs(dask_worker=None):
    """On a worker: count the size walks of the messages its comms write (Dask's offload
    decision, ``distributed.comm.utils.safe_sizeof``), from now on."""
    from distributed.comm import utils
    real = getattr(utils, "_tvm_real_sizeof", utils.safe_sizeof)
    utils._tvm_real_sizeof = real
    utils._tvm_sizeofs = []

    def counting(msg, *args, **kwargs):
        if isinstance(msg, dict) and "fetches" in msg:
            utils._tvm_sizeofs.append(1)
        return real(msg, *args, **kwargs)
    utils.safe_sizeof = counting


def _reply_sizeofs(dask_worker=None):
    from distributed.comm import utils
    n = len(utils._tvm_sizeofs)
    utils.safe_sizeof = utils._tvm_real_sizeof
    return n


def test_a_run_reply_is_not_walked_for_its_size(cluster):
    """Failed before: Dask's server walked every ``tvm_run`` reply (``safe_sizeof``) to decide
    whether to serialise it in a thread: ~6 % of a parameter server's Python per step."""
    g, v, out = _ps_graph()
    s = cluster.session(g, config=DIRECT)
    s.run(v.initializer)
    s.run(out)
    _on(cluster, _count_reply_sizeofs, "ps-0")
    try:
        for _ in range(3):
            s.run(out)
    finally:
        walked = _on(cluster, _reply_sizeofs, "ps-0")
    assert walked == 0
    assert s.run(v) == 4.0


def _ps_graph():
    g = tv.Graph()
    with g.as_default():
        with tv.device("/job:ps/task:0"):
            v = tv.Variable(0.0, name="walked")
            up = v.assign_add(1.0)
        with tv.device("/job:worker/task:0"):
            out = up * 10.0
    return g, v, out
