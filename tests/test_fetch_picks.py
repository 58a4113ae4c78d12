"""Picks on the Dask plane (issue 23, a 200 MB TeraSort on 2 workers x 1 thread):

* the client gathers only the fetched exports of a task, not its whole stage result (a map
  task's shuffle buckets, 100 MB, came back to the driver with its two counters: ~0.8 s of a
  1.4 s sort). What the driver receives is read where it lands: the results handed to
  ``fetch_values``.
* a floating task's picks (its Sends) run on the worker holding its result: each pick is a
  Dask task group of its own. A group of more than twice the cluster's threads fed by one
  task is root-ish to Dask, queued and handed to any free thread, so a map task's 2R picks
  ran on the other worker too, copying the whole stage result there.
"""
import numpy as np
import pytest
from distributed import get_task_stream
from distributed.utils import key_split_group

import tensorvm as tv
import tensorvm.mapreduce as mr
from tensorvm.runtime import dask_plane
from tensorvm.runtime.dask_graph import pick_fetched, step_graph
from tensorvm.vm.interpreter import pick

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
    picked = 0
    for key, name in zip(outs, plan.outputs):
        task = next(t for t in plan.tasks if t.name == name)
        wanted = tuple(sorted({f.index for f in plan.fetches if f.task == name}))
        if len(wanted) == len(task.program.exports):  # all fetched: the stage key itself
            assert key == (name, "t.0")
            continue
        picked += 1
        fn, source, indices = dsk[key]
        assert fn is pick_fetched and source == (name, "t.0")
        assert key in by_device[task.device]
        assert indices == wanted
    assert picked == 1  # *a's: it also exports `big` to *b (not fetched)
    # in process the results are in this process already: the stage keys themselves
    _, outs, _ = step_graph(plan, [np.ones(4)], "t.0", 1, object())
    assert [k[0] for k in outs] == list(plan.outputs)


def test_pick_fetched():
    assert pick_fetched(("a", "b", "c"), (0, 2)) == {0: "a", 2: "c"}
    assert pick_fetched(("a",), ()) == {}  # a sink: waited for, nothing carried


def _map_reduce_plan(reducers: int):
    g = tv.Graph()
    with g.as_default():
        x = tv.placeholder(tv.float64, [None], name="x")
        with tv.device("/job:worker/task:*map0"):
            parts = [x * float(r) for r in range(reducers)]
        outs = []
        for r in range(reducers):
            with tv.device(f"/job:worker/task:*reduce{r}"):
                outs.append(tv.reduce_sum(parts[r]))
    with tv.Session(graph=g) as s:
        return s.plan(outs, {x: np.ones(4)})


def test_each_pick_of_a_floating_task_is_a_dask_group_of_its_own():
    plan = _map_reduce_plan(6)
    dsk, outs, _ = step_graph(plan, [np.ones(4)], "t.0", 1, None)
    picks = [k for k, v in dsk.items() if v[0] in (pick, pick_fetched)]
    assert len(picks) >= 6  # (the reducers' outputs are all fetched: gathered whole)
    assert len({key_split_group(k) for k in picks}) == len(picks)


def test_a_map_tasks_picks_run_where_its_output_is(cluster, tmp_path):
    """8 reducers: 16 picks per map task, more than twice the 2 threads of the cluster."""
    folder = tmp_path / "in"
    folder.mkdir()
    rng = np.random.default_rng(0)
    words = np.array([f"w{i}" for i in range(500)])
    text = {}
    for f in range(2):
        text[f] = "\n".join(" ".join(rng.choice(words, 8)) for _ in range(2000)) + "\n"
        (folder / f"in-{f}.txt").write_text(text[f])
    job = mr.Job(mr.text(f"{folder.as_uri()}/*.txt"),
                 lambda lines: mr.emit(tv.strings.split(lines), 1), reduce="sum",
                 combine="sum", num_reducers=8, map_tasks=2, name="picks")
    s = cluster.session(tv.Graph())
    with get_task_stream(cluster.client) as ts:
        got = job.run(s).to_dict()
    expected: dict = {}
    for t in text.values():
        for w in t.split():
            expected[w] = expected.get(w, 0) + 1
    assert got == expected
    ran = {rec["key"]: rec["worker"] for rec in ts.data}
    maps = {k[0].rsplit("-", 1)[1]: w for k, w in ran.items()
            if "_s0-map" in k[0]}  # group name (map0, map1) -> its worker
    assert len(maps) == 2, ran
    picks = {k: w for k, w in ran.items() if "_send-map" in k[0]}
    assert len(picks) == 2 * (2 * 8 + 1)
    moved = [k for k, w in picks.items()
             if w != maps[k[0].rsplit("-", 1)[1].split("_")[0]]]
    assert not moved, f"{len(moved)} picks ran away from their map task's output: {moved[:3]}"
