"""The job page names the tasks a job ran again (issue 23): those the scheduler moved off a
straggler and those re-run because a worker left mid-job, as the driver's log and
``mr.Result.rerun`` already did.

Failures first: the registry, fed core's scheduler events (``TOPIC_MOVES``, ``TOPIC_RERUNS``
from :mod:`tensorvm.runtime.cluster.stragglers`), keeps them per job (the job whose keys they
are), bounded, counted in the summary; the page lists them, escaped; a job's event log keeps
them. Then on a cluster started by hand, a worker killed mid map-reduce job: the scheduler's
``tensorvm_jobs`` names exactly the tasks the driver's ``Result.rerun`` names.
"""
from __future__ import annotations

import re

import pytest
from hand_cluster import hand_cluster, restore  # noqa: F401  (hand_cluster: a fixture)
from test_floating_tasks import _corpus, _held, _in_thread, _job, _session, _wait

import tensorvm.mapreduce as mr
from tensorvm.runtime import wire_names
from tensorvm.runtime.cluster import stragglers
from tensorvm.scheduler_ext import TensorvmPlugin, job_message, page
from tensorvm.scheduler_ext.history import JobHistory, replay
from tensorvm.scheduler_ext.registry import JobRegistry

MAP = "tvm_g1_worker_float_cpu0_s0-map{}"
RED = "tvm_g1_worker_float_cpu0_s1-reduce{}"
A, B, C = "tcp://10.0.0.1:1", "tcp://10.0.0.2:1", "tcp://10.0.0.3:1"


class Clock:
    def __init__(self):
        self.t = 1000.0

    def __call__(self):
        return self.t


@pytest.fixture
def reg():
    """Two jobs on two clients (j1: step a.0, j2: step b.0), three workers."""
    r = JobRegistry(clock=Clock())
    for addr, name in ((A, "worker-0"), (B, "worker-1"), (C, "worker-2")):
        r.worker_added(addr, name)
    for job, client, step in (("j1", "C1", "a.0"), ("j2", "C2", "b.0")):
        r.job_event(job_message("start", job, name=f"wc-{job}", client=client))
        keys = {(MAP.format(i), step): [] for i in range(12)}
        keys.update({(RED.format(i), step): [(MAP.format(k), step) for k in range(12)]
                     for i in range(2)})
        r.graph_submitted(client, keys)
    return r


def _move(key, src, dst, t=1001.0) -> dict:
    return {"key": list(key), "from": src, "to": dst, "time": t}


# ---- the registry (pure) -----------------------------------------------------------------------
def test_the_topics_are_defined_once_in_core():
    """stragglers logs them under the names in wire_names (and still exports them: the
    benchmarks import TOPIC_MOVES from it); the registry reads those very names."""
    from tensorvm.scheduler_ext import registry
    assert stragglers.TOPIC_MOVES is wire_names.TOPIC_MOVES is registry.TOPIC_MOVES
    assert stragglers.TOPIC_RERUNS is wire_names.TOPIC_RERUNS is registry.TOPIC_RERUNS
    assert (wire_names.TOPIC_MOVES, wire_names.TOPIC_RERUNS) == ("tensorvm-moves",
                                                                 "tensorvm-reruns")


def test_a_move_counts_for_the_job_whose_key_moved(reg):
    key = (MAP.format(12), "b.0")
    assert reg.task_moved(_move(key, B, A, 1002.5)) == {"j2": {
        "key": list(key), "from": B, "to": A, "time": 1002.5, "from_name": "worker-1",
        "to_name": "worker-0"}}  # what the job's event log keeps
    # a Send of a map task (a pick waiting behind a busy thread) moves too
    reg.task_moved(_move((MAP.format(3).replace("_s0-", "_s0_send-") + "_1", "b.0", 1), B, C))
    j1, j2 = reg.job("j1"), reg.job("j2")
    assert j1["moved"] == [] and j1["moves"] == 0
    assert [(m["task"], m["from_name"], m["to_name"], m["step"]) for m in j2["moved"]] == [
        ("map12", "worker-1", "worker-0", "b.0"), ("map3 send 1", "worker-1", "worker-2", "b.0")]
    assert j2["moved"][0]["time"] == 1002.5  # the scheduler's time of the move
    assert {row["id"]: row["moves"] for row in reg.jobs()} == {"j1": 0, "j2": 2}
    assert "moved" not in reg.jobs()[0]  # the lists are in the full job only


def test_a_move_of_no_job_kept_here_is_ignored(reg):
    for msg in (_move(("tvm_g9_worker_float_cpu0_s0-map1", "z.9"), A, B),  # unknown step
                _move(("sum-aggregate", 3), A, B),  # not a tensorvm key
                {"key": "__import__('os').system('true')", "from": A, "to": B},  # never run
                {"key": None}, {}):
        assert reg.task_moved(msg) == {}
    assert [row["moves"] for row in reg.jobs()] == [0, 0]


def test_reruns_are_split_between_jobs_and_named_after_the_worker_that_left(reg):
    # map2 of j1 finished on worker-1 (its output only there): no longer a live key, still
    # j1's by its step; worker-1 leaves before the event names it
    reg.task_done((MAP.format(2), "a.0"), B)
    reg.worker_removed(B)
    shares = reg.tasks_rerun({"worker": B, "time": 1005.0, "tasks": [
        [MAP.format(10), "a.0"], [MAP.format(2), "a.0"], [MAP.format(7), "b.0"],
        [MAP.format(1), "z.0"], ["not-tensorvm", "a.0"], "junk"]})
    assert set(shares) == {"j1", "j2"}
    assert shares["j1"]["tasks"] == [[MAP.format(10), "a.0"], [MAP.format(2), "a.0"]]
    j1, j2 = reg.job("j1"), reg.job("j2")
    assert j1["reran"] == [{"worker": B, "worker_name": "worker-1", "time": 1005.0,
                            "tasks": ["map2", "map10"]}]  # in the driver's order
    assert j2["reran"][0]["tasks"] == ["map7"] and j2["reruns"] == 1
    assert {row["id"]: row["reruns"] for row in reg.jobs()} == {"j1": 2, "j2": 1}
    # a second worker leaving adds its own entry
    reg.tasks_rerun({"worker": C, "time": 1006.0, "tasks": [[RED.format(1), "a.0"]]})
    assert [(r["worker_name"], r["tasks"]) for r in reg.job("j1")["reran"]] == [
        ("worker-1", ["map2", "map10"]), ("worker-2", ["reduce1"])]


def test_moves_and_reruns_are_bounded_like_errors(reg):
    from tensorvm.scheduler_ext.moves import MAX_MOVES, MAX_RERUNS
    for i in range(MAX_MOVES + 10):
        reg.task_moved(_move((MAP.format(i % 12), "a.0"), B, A, 1000.0 + i))
    for i in range(MAX_RERUNS + 5):
        reg.tasks_rerun({"worker": f"tcp://gone:{i}", "tasks": [[MAP.format(1), "a.0"]]})
    j = reg.job("j1")
    assert len(j["moved"]) == MAX_MOVES and j["moves"] == MAX_MOVES + 10
    assert j["moved"][-1]["time"] == 1000.0 + MAX_MOVES + 9  # the latest kept
    assert len(j["reran"]) == MAX_RERUNS and j["reruns"] == MAX_RERUNS + 5
    assert j["reran"][-1]["worker"] == f"tcp://gone:{MAX_RERUNS + 4}"
    html = page.job_detail(j, "/tensorvm")
    assert f"the latest {MAX_MOVES} of {MAX_MOVES + 10}" in html
    assert f"the latest {MAX_RERUNS} of {MAX_RERUNS + 5}" in html


# ---- the page (pure) ---------------------------------------------------------------------------
def _text(html: str, list_id: str) -> list[str]:
    """The items of the page's ``<ul id=list_id>``, tags stripped (what a reader sees)."""
    m = re.search(rf"<ul id='{list_id}'>(.*?)</ul>", html)
    assert m is not None, html
    return [re.sub(r"<[^>]+>", "", li) for li in re.findall(r"<li>(.*?)</li>", m.group(1))]


def test_the_job_page_lists_moves_and_reruns_latest_first(reg):
    reg.clock.t = 1000.0
    reg.job_event(job_message("start", "j3", name="wc", client="C3"))
    reg.graph_submitted("C3", {(MAP.format(i), "c.0"): [] for i in range(14)})
    reg.task_moved(_move((MAP.format(13), "c.0"), B, A, 1001.25))
    reg.tasks_rerun({"worker": B, "time": 1003.0, "tasks": [[MAP.format(7), "c.0"]]})
    reg.task_moved(_move((MAP.format(4), "c.0"), C, A, 1004.0))
    html = page.job_detail(reg.job("j3"), "/tensorvm")
    assert "<h2>Moved off stragglers</h2>" in html
    assert _text(html, "moves") == ["map4: worker-2 → worker-0 at 4.0 s",
                                    "map13: worker-1 → worker-0 at 1.2 s"]
    assert "<h2>Ran again after a worker left</h2>" in html
    assert _text(html, "reruns") == ["worker-1 left: map7 ran again at 3.0 s"]
    quiet = page.job_detail(reg.job("j1"), "/tensorvm")  # none: no section
    assert "Moved off" not in quiet and "Ran again" not in quiet


def test_names_on_the_page_are_text_never_markup(reg):
    evil = "<img src=x onerror=alert(1)>"
    reg.worker_added("tcp://evil:1", evil)
    reg.task_moved(_move((MAP.format(1), "a.0"), "tcp://evil:1", A))
    reg.tasks_rerun({"worker": "tcp://evil:1", "tasks": [[MAP.format(2), "a.0"]]})
    html = page.job_detail(reg.job("j1"), "/tensorvm")
    assert "<img" not in html
    assert "map1: &lt;img src=x onerror=alert(1)&gt; → worker-0" in _text(html, "moves")[0]
    assert _text(html, "reruns")[0].startswith("&lt;img src=x onerror=alert(1)&gt; left: map2")


# ---- the plugin and the job's event log --------------------------------------------------------
class _Lines:
    """A history writer that keeps the records it is given (no thread, no storage)."""

    def __init__(self):
        self.records: list[dict] = []

    def open(self, job_id, url):
        pass

    def write(self, job_id, record):
        self.records.append(record)

    def finish(self, job_id):
        pass

    def close(self):
        pass


def test_the_plugin_feeds_the_events_and_the_log_keeps_them():
    plugin = TensorvmPlugin(clock=Clock(), history="memory://tvm-test-unused")
    lines = plugin.history._writer = _Lines()
    plugin.log_event(wire_names.TOPIC_WORKERS, {"action": "added", "worker": B,
                                                "name": "worker-1"})
    plugin.log_event(wire_names.TOPIC_JOBS, job_message("start", "j1", name="wc", client="C1"))
    plugin.registry.graph_submitted("C1", {(MAP.format(i), "a.0"): [] for i in range(3)})
    plugin.log_event(wire_names.TOPIC_MOVES, _move((MAP.format(1), "a.0"), B, A))
    plugin.log_event(wire_names.TOPIC_RERUNS, {"worker": B, "time": 1002.0,
                                               "tasks": [[MAP.format(2), "a.0"]]})
    plugin.log_event(wire_names.TOPIC_RERUNS, {"worker": B, "tasks": "not a list"})  # ignored
    plugin.log_event(wire_names.TOPIC_WORKERS, {"action": "removed", "worker": B})
    job = plugin.get_jobs(job="j1")
    assert (job["moves"], job["reruns"]) == (1, 1)
    assert job["moved"][0]["from_name"] == "worker-1" and job["reran"][0]["tasks"] == ["map2"]
    # a log cut short (no snapshot: the scheduler died) replays them, names and all
    assert [r["type"] for r in lines.records if r["type"] in ("move", "rerun")] == [
        "move", "rerun"]
    cut = replay(lines.records, complete=False)["job"]
    assert [(m["task"], m["from_name"]) for m in cut["moved"]] == [("map1", "worker-1")]
    assert [(r["worker_name"], r["tasks"]) for r in cut["reran"]] == [("worker-1", ["map2"])]
    # a whole log: the snapshot at the end has them; the summary row their counts only
    plugin.log_event(wire_names.TOPIC_JOBS, job_message("finish", "j1"))
    whole = replay(lines.records, complete=True)["job"]
    assert whole["moved"] == job["moved"] and whole["reran"] == job["reran"]
    end = next(r for r in lines.records if r["type"] == "end")["summary"]
    assert (end["moves"], end["reruns"]) == (1, 1)
    assert "moved" not in end and "reran" not in end


def test_an_ended_jobs_log_takes_no_late_event():
    reg = JobRegistry(clock=Clock())
    hist = JobHistory(reg, url="memory://tvm-test-unused")
    lines = hist._writer = _Lines()
    for msg in (job_message("start", "j1", name="wc", client="C1"),
                job_message("finish", "j1")):
        reg.job_event(msg)
        hist.job_message(msg)
    hist.ran_again("j1", "move", _move((MAP.format(1), "a.0"), B, A))
    assert all(r["type"] != "move" for r in lines.records)


# ---- on a cluster started by hand --------------------------------------------------------------
@pytest.fixture
def cluster(hand_cluster):  # noqa: F811
    """The module's hand-started cluster with tensorvm's job registry on its scheduler (a
    plain ``dask scheduler`` has none unless preloaded) and no straggler moves (a worker is
    held in a map call on purpose: test_floating_tasks.py's cluster)."""
    def moves_off(dask_scheduler):  # (nested: travels by value, not by module name)
        from tensorvm.runtime.cluster.stragglers import StragglerMoves
        for plugin in dask_scheduler.plugins.values():
            if isinstance(plugin, StragglerMoves):
                plugin.factor = float("inf")

    hand_cluster.client.register_plugin(TensorvmPlugin())  # idempotent: once a cluster
    with _session(hand_cluster):  # (a session installs tensorvm's scheduler plugins)
        hand_cluster.client.run_on_scheduler(moves_off)
    yield hand_cluster
    restore(hand_cluster)


@pytest.mark.cluster
@pytest.mark.timeout(180)
def test_the_job_page_names_exactly_the_tasks_the_driver_says_ran_again(cluster, tmp_path):
    src, _ = _corpus(tmp_path / "in", n_files=3, splits_per_file=4)
    out = tmp_path / "out"
    # worker-1 is held in its first map task until it is killed (test_floating_tasks.py)
    job = _job(src, tmp_path, _held("worker-1"), output=mr.text_output(out.as_uri()))
    with _session(cluster) as s:
        fut = _in_thread(lambda: job.run(s))
        assert _wait(lambda: (tmp_path / "started-worker-1").exists() or fut.done(), 60)
        cluster.kill("worker-1")  # kill -9, mid-map
        (tmp_path / "release").touch()
        cluster.start_worker("worker-1")
        res = fut.result(timeout=120)
        client_id = s.client.id
    assert len(res.rerun) == 1 and res.rerun[0].startswith("map"), res.rerun  # the driver's
    c = cluster.client
    [row] = [j for j in c.sync(c.scheduler.tensorvm_jobs) if j["client"] == client_id]
    job = c.sync(c.scheduler.tensorvm_jobs, job=row["id"])
    reran = job.get("reran")
    assert reran is not None, f"the job names no task that ran again: {sorted(job)}"
    assert [t for r in reran for t in r["tasks"]] == res.rerun
    assert [r["worker_name"] for r in reran] == ["worker-1"]
    assert job["reruns"] == row["reruns"] == len(res.rerun)
    # moves are off on this cluster (the comm hands lists back as tuples)
    assert job["moves"] == 0 and len(job["moved"]) == 0
    html = page.job_detail(job, "/tensorvm")
    assert _text(html, "reruns")[0].startswith(f"worker-1 left: {res.rerun[0]} ran again")
