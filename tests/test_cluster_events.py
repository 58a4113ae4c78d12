"""The scheduler's events fanned out to every session of a client (tensorvm.runtime.cluster.events).

``Client.subscribe_topic`` keeps one handler per topic: sessions sharing a client (as
``run_replicas``' replicas do) used to take the lost-worker event from each other, so a step of
the first session went on waiting for a worker that had left. The lost-worker event here is
logged by the test (``Client.log_event``) for a worker that is in fact alive: only the event can
end the steps, not a closed connection or a poll of the scheduler."""
import threading
import time

import pytest
import tensorvm as tv
from tensorvm.runtime.cluster import events as cluster_events
from tensorvm.runtime.wire_names import TOPIC_WORKERS

pytestmark = pytest.mark.cluster

TV_CLUSTER = {"ps": 1, "worker": 1}
TOPIC = "tensorvm-test-events"


def _refused(client, topic, handler):
    raise OSError(f"no subscription to {topic} (a test without lost-worker events)")


def _wait_after(marker, release, seconds):
    """A py_func that says it started (``marker``), then waits for ``release`` to exist (at
    most ``seconds``): the step ends by the test's word, not by a race with the event."""
    def f(x):
        import pathlib
        pathlib.Path(marker).touch()
        deadline = time.monotonic() + seconds
        while not pathlib.Path(release).exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        return x
    return f


def _slow_graph(marker, seconds, release="/nonexistent"):
    g = tv.Graph()
    with g.as_default(), tv.device("/job:worker/task:0"):
        x = tv.constant([1.0, 2.0])
        y = tv.py_func(_wait_after(marker, release, seconds), [x], tv.float32) + 1.0
    return g, y


def _wait_for(cond, timeout=30.0):
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


@pytest.mark.parametrize("plane", ["direct", "dask"])
def test_two_sessions_on_one_client_both_see_a_lost_worker(cluster, tmp_path, plane):
    """Failures first: on the old code the second session's subscription replaced the first's
    (direct plane), and the Dask plane polled the scheduler, which still lists the worker."""
    cfg = tv.ConfigProto(data_plane=plane)
    release = tmp_path / "release"  # the steps wait for it: only the event can end them
    g1, y1 = _slow_graph(tmp_path / "m1", 300.0, release)
    g2, y2 = _slow_graph(tmp_path / "m2", 300.0, release)
    s1 = cluster.session(g1, own_client=True, config=cfg)  # s2 shares s1's client
    s2 = tv.Session(graph=g2, client=s1.client, cluster=cluster.spec, config=cfg,
                    verbose=False)
    t0 = time.monotonic()
    try:
        results = {}

        def step(name, sess, fetch):
            t0 = time.monotonic()
            try:
                sess.run(fetch)
                results[name] = ("finished", time.monotonic() - t0)
            except Exception as exc:  # noqa: BLE001 - checked below
                results[name] = (exc, time.monotonic() - t0)
        threads = [threading.Thread(target=step, args=("s1", s1, y1)),
                   threading.Thread(target=step, args=("s2", s2, y2))]
        for t in threads:
            t.start()
        _wait_for(lambda: (tmp_path / "m1").exists() and (tmp_path / "m2").exists())
        addr = cluster.worker("worker-0")
        t0 = time.monotonic()
        s1.client.log_event(TOPIC_WORKERS, {"action": "removed", "worker": addr,
                                            "name": "worker-0"})
        for t in threads:
            t.join(120)  # without the event both steps would wait 300 s for their release
        for name in ("s1", "s2"):
            err, _ = results[name]
            assert isinstance(err, tv.errors.UnavailableError), (name, results)
            assert "/job:worker/replica:0/task:0" in str(err) and "'worker-0'" in str(err) \
                and addr in str(err), str(err)
    finally:
        release.touch()  # the worker's py_funcs end
        s2.close()
        time.sleep(0.5)


def test_every_handler_receives_each_event_until_closed(cluster):
    client = cluster.client
    got_a, got_b = [], []
    sub_a = cluster_events.subscribe(client, TOPIC, lambda ev: got_a.append(ev[1]))
    sub_b = cluster_events.subscribe(client, TOPIC, lambda ev: got_b.append(ev[1]))
    client.log_event(TOPIC, {"n": 1})  # the subscription is confirmed: no event is missed
    _wait_for(lambda: got_a and got_b, 10)
    assert got_a == got_b == [{"n": 1}]
    sub_a.close()
    assert not sub_a.active and sub_b.active
    client.log_event(TOPIC, {"n": 2})
    _wait_for(lambda: len(got_b) == 2, 10)
    assert got_a == [{"n": 1}] and got_b == [{"n": 1}, {"n": 2}]
    sub_b.close()
    assert len(cluster_events.dispatcher(client, TOPIC)) == 0


def test_a_failing_handler_does_not_starve_the_others(cluster, caplog):
    client = cluster.client
    got = []

    def bad(ev):
        raise ValueError("handler bug")
    with cluster_events.subscribe(client, TOPIC, bad), \
            cluster_events.subscribe(client, TOPIC, lambda ev: got.append(ev[1])):
        client.log_event(TOPIC, {"n": 3})
        _wait_for(lambda: got, 10)
    assert got == [{"n": 3}]
    assert "handler bug" in caplog.text or "failed" in caplog.text


def test_a_bound_method_is_held_weakly(cluster):
    client = cluster.client
    seen = []

    class Holder:
        def on(self, ev):
            seen.append(ev[1])
    h = Holder()
    sub = cluster_events.subscribe(client, TOPIC, h.on)
    assert sub.active
    del h  # the session object is gone: its handler goes with it
    import gc
    gc.collect()
    assert not sub.active
    got = []
    with cluster_events.subscribe(client, TOPIC, lambda ev: got.append(ev[1])):
        client.log_event(TOPIC, {"n": 4})
        _wait_for(lambda: got, 10)
    assert seen == [] and got == [{"n": 4}]


def test_without_events_the_dask_plane_still_polls_for_a_lost_worker(cluster, tmp_path,
                                                                     monkeypatch):
    """A scheduler without tensorvm's DeviceHomes plugin sends no lost-worker events: the
    step falls back to polling the scheduler every POLL_S and still names device and worker."""
    from tensorvm.runtime.cluster import device_map
    # as when the scheduler cannot load DeviceHomes: a device's home is claimed nowhere (the
    # claim's answer without the plugin) and no lost-worker event reaches the session
    monkeypatch.setattr(device_map, "_claim_home", lambda *args: None)
    monkeypatch.setattr(cluster_events, "subscribe", _refused)
    g, y = _slow_graph(tmp_path / "m", 60.0)
    s = cluster.session(g, own_client=True, config=tv.ConfigProto(data_plane="dask"))
    box = {}

    def step():
        try:
            s.run(y)
        except Exception as exc:  # noqa: BLE001 - checked below
            box["error"] = exc
    th = threading.Thread(target=step)
    th.start()
    _wait_for(lambda: (tmp_path / "m").exists())
    old = cluster.kill("worker-0")
    t0 = time.monotonic()
    th.join(30)
    err = box.get("error")
    assert isinstance(err, tv.errors.UnavailableError), err
    assert "/job:worker/replica:0/task:0" in str(err) and old in str(err), str(err)
    # polling ends it within a few POLL_S even on a loaded machine; unnoticed, it would wait
    # the py_func's 60 s
    assert time.monotonic() - t0 < 30
    cluster.wait_full()
