"""Job history and the timeline (issue 25 items 3 and 4): event logs written by the scheduler
plugin, read back after the cluster is gone by ``tensorvm history`` and ``tensorvm ui`` (real
subprocesses), the Chrome trace and the Bokeh timeline on the job page (headless Chromium;
screenshots in /tmp/shots/)."""
import json
import os
import re
import signal
import subprocess
import sys
import threading
import urllib.request
import uuid

import dask
import fsspec
import pytest
from tensorvm.scheduler_ext.events import task_record
from tensorvm.scheduler_ext.history import (INPROGRESS, SUFFIX, HistoryReader, JobHistory,
                                            history_url, log_name)
from tensorvm.scheduler_ext.history_ui import past_jobs_table
from tensorvm.scheduler_ext.registry import JobRegistry

from browser import CHROMIUM, chromium

SHOTS = "/tmp/shots"
TVM = [sys.executable, "-m", "tensorvm"]


def _kwargs(start, stop, worker="tcp://w:1", nbytes=10):
    return {"worker": worker, "thread": 1, "nbytes": nbytes,
            "startstops": ({"action": "compute", "start": start, "stop": stop},)}


def _drive(hist: JobHistory, reg: JobRegistry, job_id: str, n_tasks: int, **start):
    """A job of ``n_tasks`` tasks on one device, started and ended through the registry's
    events as the plugin feeds them."""
    msg = {"op": "start", "job": job_id, "name": "wc", "client": "C1", **start}
    reg.job_event(msg)
    hist.job_message(msg)
    keys = [("tvm_g1_worker_0_cpu0_s0", f"s.{i}") for i in range(n_tasks)]
    reg.graph_submitted("C1", {k: [] for k in keys})
    for i, k in enumerate(keys):
        hist.transition(k, "processing", "memory", _kwargs(100.0 + i, 100.5 + i))
        reg.task_done(k, "tcp://w:1")
    end = {"op": "finish", "job": job_id, "state": "done", "counters": {"records": 7}}
    reg.job_event(end)
    hist.job_message(end)


# ---- failures first ------------------------------------------------------------------------
def test_an_unwritable_history_costs_the_log_not_the_job(tmp_path, caplog):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    reg = JobRegistry(clock=lambda: 100.0)
    hist = JobHistory(reg, url=(blocker / "history").as_uri())
    _drive(hist, reg, "j1", 2)
    hist.close()
    assert reg.job("j1")["state"] == "done"
    assert "could not be written" in caplog.text and "j1" in caplog.text
    assert blocker.read_text() == "not a folder"


def test_a_torn_in_progress_log_reads_as_incomplete_up_to_its_last_whole_line():
    url = f"memory://tvm-hist-{uuid.uuid4().hex}"
    fs = fsspec.filesystem("memory")
    rec = task_record(("tvm_g1_worker_0_cpu0_s0", "a.0"), "memory", _kwargs(10.0, 11.0))
    lines = [{"type": "header", "format": "tensorvm-event-log", "version": 1, "job": "j9",
              "time": 9.0},
             {"type": "job", "time": 9.0, "msg": {"op": "start", "job": "j9", "name": "wc",
                                                  "client": "C9"}},
             {"type": "task", "time": 11.0, **rec}]
    data = "".join(json.dumps(x) + "\n" for x in lines) + '{"type": "task", "start": 1'
    fs.pipe(url.split("://")[1] + "/j9" + INPROGRESS, data.encode())
    reader = HistoryReader(url)
    [row] = reader.jobs()
    assert (row["id"], row["name"], row["state"]) == ("j9", "wc", "incomplete")
    found = reader.job("j9")
    assert len(found["tasks"]) == 1 and found["job"]["progress"]["done"] == 1
    assert reader.job("../j9") is None  # an id is never a path


def test_ids_are_file_names_and_pages_escape_logged_text():
    assert log_name("../../x/y") == "x_y" and log_name("..") == "job"
    row = {"id": "<img src=x onerror=alert(1)>", "name": "<script>alert(1)</script>",
           "state": "done", "elapsed": 1.0, "user": "<b>",
           "progress": {"done": 1, "total": 1, "erred": 0, "fraction": 1.0},
           "metrics": {"step": None, "last": {}}}
    html = past_jobs_table([row], "/tensorvm")
    assert "<script>alert" not in html and "<img src=x" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html


def test_a_loops_normal_end_is_no_failure_in_the_trace():
    key = ("tvm_g1_worker_0_cpu0_s0", "a.0")
    ended = task_record(key, "erred", dict(_kwargs(1.0, 2.0),
                                           exception_text="OutOfRangeError('gate closed')"))
    failed = task_record(key, "erred", dict(_kwargs(1.0, 2.0),
                                            exception_text="ValueError('bad')"))
    assert (ended["state"], failed["state"]) == ("ended", "erred")
    assert task_record(("sum-aggregate", 1), "memory", _kwargs(1.0, 2.0)) is None


def test_history_off_and_config_order(monkeypatch, tmp_path):
    monkeypatch.setenv("TENSORVM_HISTORY", "file:///from-env")
    with dask.config.set({"tensorvm.history.url": "off"}):
        assert history_url() is None
        assert history_url("memory://x") == "memory://x"
    assert history_url() == "file:///from-env"
    monkeypatch.delenv("TENSORVM_HISTORY")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    assert history_url() == (tmp_path / "tensorvm" / "history").as_uri()


# ---- the log, in process (memory://) --------------------------------------------------------
def test_a_job_log_in_memory_is_committed_whole_with_redacted_args_and_bounded_tasks():
    url = f"memory://tvm-hist-{uuid.uuid4().hex}"
    reg = JobRegistry(clock=lambda: 100.0)
    hist = JobHistory(reg, url=url, max_tasks=3)
    _drive(hist, reg, "wc-1", 5, args={"api_token": "s3cr3t", "input": "in.txt"})
    hist.close()
    fs, root = fsspec.core.url_to_fs(url)
    assert [p.rsplit("/", 1)[1] for p in fs.ls(root, detail=False)] == ["wc-1" + SUFFIX]
    text = fs.cat(f"{root}/wc-1{SUFFIX}").decode()
    assert "s3cr3t" not in text and '"api_token": "***"' in text
    records = [json.loads(line) for line in text.splitlines()]
    assert [r["type"] for r in records][:2] == ["header", "job"]
    assert [r["type"] for r in records][-2:] == ["snapshot", "end"]
    assert sum(r["type"] == "task" for r in records) == 3
    assert records[-1]["tasks"] == 3 and records[-1]["tasks_dropped"] == 2
    [row] = HistoryReader(url).jobs()
    assert (row["id"], row["state"], row["counters"]) == ("wc-1", "done", {"records": 7})
    assert hist.task_events("wc-1") == (hist.tasks["wc-1"].tasks, 2)
    assert [j["id"] for j in hist.past_jobs()] == ["wc-1"]  # the dashboard's "Past jobs"


def test_history_of_a_missing_url_is_a_usage_error(tmp_path):
    out = subprocess.run(TVM + ["history", (tmp_path / "nowhere").as_uri()],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.strip().splitlines() == [
        f"tensorvm: no job history at {(tmp_path / 'nowhere').as_uri()} (no such folder) "
        "(try 'tensorvm history --help')"]


# ---- on a LocalCluster of processes; then without it ---------------------------------------


def _get(url: str):
    with urllib.request.urlopen(url, timeout=30) as r:
        return r.status, r.read().decode()


@pytest.fixture(scope="module")
def logged_job(tmp_path_factory):
    """A word count on a LocalCluster of two worker processes, held running (its map-reduce
    done) until the test lets it finish; its log goes to a tmp ``file://`` history."""
    from tensorvm.jobs.bundled import JobSpec
    from tensorvm.jobs.runner import JobRun
    from tensorvm.jobs.wordcount import wordcount
    tmp = tmp_path_factory.mktemp("hist")
    for i in range(3):
        (tmp / f"in{i}.txt").write_text("the cat sat on the mat\n" * 2000 + f"file {i}\n")
    history = (tmp / "history").as_uri()
    release, mapped, out = threading.Event(), threading.Event(), {}

    def job(session=None):
        try:
            out["result"] = wordcount(f"file://{tmp}/in*.txt", split_size=20000,
                                      session=session)
        finally:
            mapped.set()
        assert release.wait(120)
        return out["result"]
    with dask.config.set({"tensorvm.history.url": history}):
        run = JobRun(JobSpec("histwc", job, "tests/test_history_timeline.py:job"),
                     cluster={"worker": 2}, args={"db_password": "hunter2"})
        with run:
            thread = threading.Thread(target=lambda: out.update(ret=run.call({})))
            thread.start()
            state = {"run": run, "history": history, "folder": tmp / "history",
                     "release": release, "thread": thread, "closed": False}
            try:
                assert mapped.wait(120) and "result" in out, "the word count failed"
                state["result"] = out["result"]
                # the job's Dask tasks (one per map and reduce task and per Send pick), as the
                # registry counts them: the timeline and the event log must hold each once
                r = out["result"]
                _, job_json = _get(run.dashboard.replace("/tensorvm/job/", "/tensorvm/api/jobs/"))
                state["tasks"] = json.loads(job_json)["progress"]["done"]
                assert state["tasks"] >= r.num_map_tasks + r.num_reducers > 2
                yield state
            finally:
                release.set()
                thread.join(60)
                if not state["closed"]:
                    run.finish("done", out.get("ret"))


def test_the_running_jobs_page_has_its_timeline(logged_job):
    run = logged_job["run"]
    assert run.registry_ok and logged_job["result"].to_dict()["the"] == 12000
    api = run.dashboard.replace("/tensorvm/job/", "/tensorvm/api/jobs/")
    _, job = _get(api)
    job = json.loads(job)
    assert job["state"] == "running"
    _, payload = _get(api + "/timeline.json")
    payload = json.loads(payload)
    assert payload["n"] == job["progress"]["done"] == logged_job["tasks"]
    assert payload["item"]["doc"]["roots"] and payload["state"] == "running"
    _, html = _get(run.dashboard)
    assert "id='timeline'" in html and "/trace.json" in html
    if CHROMIUM is None:
        pytest.skip("no chromium on this machine (apt-get install chromium)")
    os.makedirs(SHOTS, exist_ok=True)
    dom = chromium(run.dashboard, virtual_ms=4000, size=(1200, 1500))
    assert re.search(rf'id="timeline"[^>]*data-tasks="{logged_job["tasks"]}"', dom), \
        dom[-3000:]
    chromium(run.dashboard, screenshot=f"{SHOTS}/running-job-timeline.png",
             virtual_ms=4000, size=(1200, 1500))


def test_after_the_cluster_is_gone_history_and_ui_serve_the_job(logged_job):
    run, folder = logged_job["run"], logged_job["folder"]
    logged_job["release"].set()
    logged_job["thread"].join(60)
    run.finish("done", logged_job["result"])
    logged_job["closed"] = True
    run.__exit__(None, None, None)  # the session and its LocalCluster close
    assert [p.name for p in folder.iterdir()] == [f"{run.id}.jsonl"]  # committed, no temp
    text = (folder / f"{run.id}.jsonl").read_text()
    assert "hunter2" not in text
    logged = [json.loads(x) for x in text.splitlines() if '"type": "task"' in x]
    # every Dask task of the job once (a floating job's map and reduce tasks, the page's
    # progress counting them by device and stage)
    assert len({tuple(x["key"]) for x in logged}) == len(logged) >= logged_job["tasks"]
    assert all(x["task"].startswith("tvm_histwc_") for x in logged)

    listed = subprocess.run(TVM + ["history", logged_job["history"]], capture_output=True,
                            text=True, timeout=120)
    assert listed.returncode == 0, listed.stderr
    header, row = listed.stdout.splitlines()
    assert header.split() == ["ID", "NAME", "STATE", "STARTED", "DURATION"]
    assert row.split()[:3] == [run.id, "histwc", "done"] and row.endswith(" s")

    ui = subprocess.Popen(TVM + ["ui", logged_job["history"], "--port", "0"],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        base = ui.stdout.readline().strip()
        assert re.fullmatch(r"http://127\.0\.0\.1:\d+/tensorvm", base), ui.stderr.read()
        status, page = _get(f"{base}/job/{run.id}")
        assert status == 200 and "histwc" in page and "id='timeline'" in page
        assert "map_input_records" in page and "hunter2" not in page
        _, listing = _get(base)
        assert f'data-job="{run.id}"' in listing
        _, trace = _get(f"{base}/api/jobs/{run.id}/trace.json")
        events = json.loads(trace)["traceEvents"]
        xs = [e for e in events if e["ph"] == "X"]
        assert len(xs) == len(logged)
        assert {e["args"]["task"] for e in xs} == {t["task"] for t in logged}
        job = json.loads(_get(f"{base}/api/jobs/{run.id}")[1])
        span_us = (job["ended"] - job["started"]) * 1e6
        assert all(0 <= e["ts"] and 0 <= e["dur"] and e["ts"] + e["dur"] <= span_us
                   for e in xs)
        procs = {e["pid"]: e["args"]["name"] for e in events if e["name"] == "process_name"}
        assert len(procs) == 2 and {x["pid"] for x in xs} == set(procs)
        assert sorted(n.split()[0] for n in procs.values()) == ["worker-0", "worker-1"]
        if CHROMIUM is None:
            pytest.skip("no chromium on this machine (apt-get install chromium)")
        os.makedirs(SHOTS, exist_ok=True)
        dom = chromium(f"{base}/job/{run.id}", virtual_ms=4000, size=(1200, 1500))
        assert re.search(rf'id="timeline"[^>]*data-tasks="{logged_job["tasks"]}"', dom), \
        dom[-3000:]
        chromium(f"{base}/job/{run.id}", screenshot=f"{SHOTS}/history-job-page.png",
                 virtual_ms=4000, size=(1200, 1500))
    finally:
        ui.send_signal(signal.SIGTERM)
        ui.wait(30)
