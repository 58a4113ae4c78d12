"""Durable root tasks (tensorvm.runtime.durable_tasks): a floating task's exports kept on
storage and read back, exactly, when Dask runs the task again; what cannot be kept exactly is
not kept, and a torn or foreign file is never trusted."""
from __future__ import annotations

import time

import numpy as np
import pyarrow as pa
import pytest

from tensorvm.runtime import durable_tasks as dt
from tensorvm.runtime.dask_graph import step_graph
from tensorvm.vm.results import StageResult

import tensorvm as tv


@pytest.mark.parametrize("value", [
    np.arange(12, dtype=np.float32).reshape(3, 4),
    np.array([[True, False]]),
    np.array([], np.int64),
    np.int64(7),
    np.array(2.5),
    np.array([b"a", b"", b"\x00\xff"], object),
    np.array(["x", "yz"], object),
    np.array([b"ab", b"c"], "S2"),
    np.array(["é", "f"]),
    pa.array([b"w1", b"w2", None]),
    pa.chunked_array([pa.array([1, 2]), pa.array([3])]),
    None,
])
def test_exports_round_trip_exactly(tmp_path, value):
    url = f"file://{tmp_path}/t.arrow"
    assert dt.save(url, StageResult((value, np.arange(3))))
    back = dt.load(url)
    assert isinstance(back, StageResult) and len(back) == 2
    got = back[0]
    if value is None:
        assert got is None
    elif isinstance(value, (pa.Array, pa.ChunkedArray)):
        want = value.combine_chunks() if isinstance(value, pa.ChunkedArray) else value
        assert got.equals(want)
    else:
        want = np.asarray(value)
        assert got.dtype == want.dtype and got.shape == want.shape
        assert got.tolist() == want.tolist()
    np.testing.assert_array_equal(back[1], np.arange(3))


@pytest.mark.parametrize("value", [
    {"a": 1}, (1, 2), np.array([1 + 2j]), np.array([b"a", "b"], object),
    np.array([object()], object)])
def test_values_not_held_exactly_are_not_kept(tmp_path, value):
    url = f"file://{tmp_path}/t.arrow"
    assert dt.save(url, StageResult((np.arange(2), value))) is False
    assert not (tmp_path / "t.arrow").exists()
    assert dt.load(url) is None


def test_runs_once_then_reads_back_and_ignores_a_torn_file(tmp_path, caplog):
    url = f"file://{tmp_path}/t.arrow"
    calls = []

    def task(x):
        calls.append(x)
        time.sleep(0.01)  # work worth keeping 32 bytes for
        return StageResult((np.full(4, x),))
    assert dt.run_durable(url, task, 3)[0].tolist() == [3, 3, 3, 3]
    assert dt.run_durable(url, task, 3)[0].tolist() == [3, 3, 3, 3]
    assert calls == [3]
    (tmp_path / "t.arrow").write_bytes(b"ARROW1 torn")  # a crash mid-write elsewhere
    assert dt.run_durable(url, task, 5)[0].tolist() == [5, 5, 5, 5]
    assert calls == [3, 5]
    assert "unreadable task output" in caplog.text


def test_only_floating_root_tasks_are_durable():
    g = tv.Graph()
    with g.as_default():
        x = tv.placeholder(tv.float32, [2], name="x")
        with tv.device("/job:worker/task:*a"):
            a = x * 2.0  # a floating root: reads only a feed
        with tv.device("/job:worker/task:*b"):
            b = a + 1.0  # floating, reads task a
        with tv.device("/job:worker/task:0"):
            c = x - 1.0  # a pinned root
    with tv.Session(graph=g) as s:
        plan = s.plan([b, c], {x: np.ones(2, np.float32)})
    dsk, _, _ = step_graph(plan, [np.ones(2, np.float32)], "t.0", 1, None,
                           durable="file:///kept")
    durable = {k[0]: v[1] for k, v in dsk.items() if v[0] is dt.run_durable}
    assert len(durable) == 1
    (name, url), = durable.items()
    assert "*a" in plan.tasks[[t.name for t in plan.tasks].index(name)].device
    assert url == f"file:///kept/{name}-t.0.arrow"
    dsk, _, _ = step_graph(plan, [np.ones(2, np.float32)], "t.0", 1, None)
    assert not any(v[0] is dt.run_durable for v in dsk.values())


def test_outputs_cheaper_to_recompute_than_to_write_are_not_kept(tmp_path):
    url = f"file://{tmp_path}/t.arrow"
    big = np.zeros(32 << 20, np.uint8)  # 32 MiB made in no time (a TeraSort map's outputs)
    out = dt.run_durable(url, lambda: StageResult((big,)))
    assert out[0] is big and not (tmp_path / "t.arrow").exists()
    assert dt.worth_keeping(32 << 20, 60.0) and not dt.worth_keeping(32 << 20, 0.05)
