"""On the Dask plane the client gathers only the fetched exports of a task, not its whole
stage result (issue 23: a TeraSort map task's shuffle buckets, 100 MB, came back to the driver
with its two counters, ~0.8 s of a 1.4 s sort).

What the driver receives is read where it lands: the results handed to ``fetch_values``."""
import numpy as np
import pytest

import tensorvm as tv
from tensorvm.runtime import dask_plane
from tensorvm.runtime.dask_graph import pick_fetched, step_graph

TV_CLUSTER = {"worker": 2}
TV_CLUSTER_SHARED = True

pytestmark = pytest.mark.cluster

BIG = 1 << 20  # float64 values: 8 MiB exported to the other device


def _graph(first: str, second: str):
    g = tv.Graph()
    with g.as_default():
        x = tv.placeholder(tv.float64, [None], name="x")
        with tv.device(first):
            big = tv.tile(x, [BIG // 4])  # exported to `second`, not fetched
            small = tv.reduce_sum(big)  # fetched from the same stage
        with tv.device(second):
            other = tv.reduce_max(big * 2.0)
    return g, x, big, small, other


def _received(monkeypatch) -> list:
    got: list = []
    real = dask_plane.fetch_values

    def spy(plan, outputs, results, feed_values):
        got.extend(results)
        return real(plan, outputs, results, feed_values)
    monkeypatch.setattr(dask_plane, "fetch_values", spy)
    return got


def _nbytes(result) -> int:
    values = result.values() if isinstance(result, dict) else result
    return sum(np.asarray(v).nbytes for v in values if v is not None)


@pytest.mark.parametrize("first,second", [
    ("/job:worker/task:*a", "/job:worker/task:*b"),  # floating (a map task and a reducer)
    ("/job:worker/task:0", "/job:worker/task:1"),  # pinned
])
def test_only_the_fetched_exports_reach_the_client(cluster, monkeypatch, first, second):
    g, x, big, small, other = _graph(first, second)
    s = cluster.session(g)
    feed = {x: np.array([1.0, 2.0, 3.0, 4.0])}
    got = _received(monkeypatch)
    opts = tv.RunOptions(data_plane="dask")
    a, b = s.run([small, other], feed, options=opts)
    assert a == pytest.approx(10.0 * (BIG // 4)) and b == 8.0  # closed forms
    assert got and sum(_nbytes(r) for r in got) < 1024, [type(r) for r in got]
    # a fetched export that is large still comes back whole
    (v,) = s.run([big], feed, options=opts)
    np.testing.assert_array_equal(v, np.tile(feed[x], BIG // 4))


def test_step_graph_asks_for_picks_on_a_cluster_only():
    g, x, big, small, other = _graph("/job:worker/task:*a", "/job:worker/task:*b")
    with tv.Session(graph=g) as s:
        plan = s.plan([small, other], {x: np.ones(4)})
    dsk, outs, by_device = step_graph(plan, [np.ones(4)], "t.0", 1, None)
    assert len(outs) == len(plan.outputs)
    for key, name in zip(outs, plan.outputs):
        fn, source, indices = dsk[key]
        assert fn is pick_fetched and source == (name, "t.0")
        assert key in by_device[next(t.device for t in plan.tasks if t.name == name)]
        assert indices == tuple(sorted({f.index for f in plan.fetches if f.task == name}))
    # in process the results are in this process already: the stage keys themselves
    _, outs, _ = step_graph(plan, [np.ones(4)], "t.0", 1, object())
    assert [k[0] for k in outs] == list(plan.outputs)


def test_pick_fetched():
    assert pick_fetched(("a", "b", "c"), (0, 2)) == {0: "a", 2: "c"}
    assert pick_fetched(("a",), ()) == {}  # a sink: waited for, nothing carried
