"""The tensorvm scheduler plugin on real clusters: a LocalCluster of worker processes (the
plugin registered by a client) and a cluster started by the ``dask scheduler --preload
tensorvm.scheduler_ext`` / ``dask worker`` command lines."""
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import urllib.parse
import urllib.request

import numpy as np
import pytest
import tensorvm as tv
from distributed.diagnostics.plugin import SchedulerPlugin
from tensorvm.scheduler_ext import TOPIC_JOBS, TOPIC_WORKERS, install, job_message

pytestmark = pytest.mark.cluster
BIN = os.path.dirname(sys.executable)


def two_device_graph():
    g = tv.Graph()
    with g.as_default():
        with tv.device("/job:worker/task:0"):
            x = tv.placeholder(tv.float64, [3], name="x")
            y = x * 2.0
        with tv.device("/job:ps/task:0"):
            z = tv.reduce_sum(y + 1.0)
    return g, x, z


def get_json(url):
    with urllib.request.urlopen(url, timeout=10) as r:
        return json.loads(r.read())


def get_text(url):
    with urllib.request.urlopen(url, timeout=10) as r:
        return r.status, r.read().decode()


class GroupRecorder(SchedulerPlugin):
    """Records the (task group, task prefix) names Dask gives tensorvm keys."""

    name = "test-group-recorder"

    def __init__(self):
        self.seen = set()

    def update_graph(self, scheduler, *, tasks, **kwargs):
        for k in tasks:
            ts = scheduler.tasks.get(k)
            if ts is not None and str(ts.group.name).startswith("tvm"):
                self.seen.add((ts.group.name, ts.prefix.name))


def _seen_groups(dask_scheduler):
    return sorted(dask_scheduler.plugins[GroupRecorder.name].seen)


@pytest.fixture(scope="module")
def local():
    g, x, z = two_device_graph()
    # Every step as a Dask graph: the registry counts the steps the scheduler sees (a
    # plan's repeated steps on the direct data plane bypass the scheduler, issue 13).
    with tv.Session(graph=g, cluster={"ps": 1, "worker": 1}, verbose=False,
                    config=tv.ConfigProto(data_plane="dask")) as sess:
        plugins = sess.client.run_on_scheduler(lambda dask_scheduler: list(
            dask_scheduler.plugins))
        assert "tensorvm" in plugins  # preloaded on the session's own LocalCluster
        install(sess.client)  # idempotent: where it is already, nothing happens
        sess.client.register_plugin(GroupRecorder())
        yield sess, x, z


def jobs_on(client, job=None):
    """The plugin's answer over Dask's RPC (msgpack makes lists tuples: normalised)."""
    return json.loads(json.dumps(client.sync(client.scheduler.tensorvm_jobs, job=job)))


def test_session_steps_show_as_a_job_with_devices_and_send_edges(local):
    sess, x, z = local
    for i in range(3):
        assert sess.run(z, {x: np.arange(3.0) + i}) == pytest.approx(9.0 + 6 * i)
    rows = [r for r in jobs_on(sess.client) if r["client"] == sess.client.id]
    assert len(rows) == 1 and rows[0]["kind"] == "session"
    # named after the program that opened the session (here pytest), not "session g1"
    assert rows[0]["name"] == tv.job_api.program_name() != "", rows[0]
    job = jobs_on(sess.client, rows[0]["id"])
    assert job["progress"]["runs"] == {"submitted": 3, "done": 3}
    assert job["progress"]["done"] == job["progress"]["total"] > 0
    devices = {d["device"]: d for d in job["devices"]}
    assert set(devices) == {"ps-0-cpu0", "worker-0-cpu0"}
    mapped = {f"{k}-cpu0": addr for k, addr in sess.devices.items()}
    assert {d: devices[d]["worker"] for d in devices} == mapped
    assert any(e["send"] and e["src"].startswith("worker-0-cpu0/")
               and e["dst"].startswith("ps-0-cpu0/") for e in job["graph"]["edges"])
    # Dask's task groups read tvm-<graph>-<device>-s<stage>
    groups = {g for g, _ in sess.client.run_on_scheduler(_seen_groups)}
    assert any(re.fullmatch(r"tvm[-_]g\d+[-_]ps[-_]?0[-_]cpu0[-_]s\d+", g) for g in groups), groups


def test_progress_bars_and_task_stream_name_device_and_stage(local):
    sess, x, z = local
    sess.run(z, {x: np.ones(3)})
    seen = sess.client.run_on_scheduler(_seen_groups)
    assert seen and all(prefix == group for group, prefix in seen), seen


def test_a_registered_job_gets_the_progress_metrics_and_page(local):
    sess, x, z = local
    c = sess.client
    c.log_event(TOPIC_JOBS, job_message("start", "t-1", name="mine", user="ann",
                                        client=c.id))
    sess.run(z, {x: np.ones(3)})
    c.log_event(TOPIC_JOBS, job_message("metrics", "t-1", step=1, total_steps=2, loss=0.5))
    c.log_event(TOPIC_JOBS, job_message("finish", "t-1", state="done",
                                        counters={"records": 3}))
    job = jobs_on(c, "t-1")
    assert (job["name"], job["user"], job["state"]) == ("mine", "ann", "done")
    assert job["progress"]["runs"]["done"] == 1 and job["counters"] == {"records": 3}
    assert job["metrics"]["history"]["loss"] == [[1, 0.5]]
    base = sess.dashboard_link.rsplit("/status", 1)[0]
    assert get_json(f"{base}/tensorvm/api/jobs/t-1") == jobs_on(c, "t-1") | {
        "elapsed": job["elapsed"]}
    listed = get_json(f"{base}/tensorvm/api/jobs")["jobs"]
    assert "t-1" in [j["id"] for j in listed]
    status, html = get_text(f"{base}/tensorvm")
    assert status == 200 and "mine" in html and 'href="/tensorvm/job/t-1"' in html
    status, html = get_text(f"{base}/status")  # a tab in Dask's own navigation bar
    assert status == 200 and 'href="tensorvm"' in html
    status, html = get_text(f"{base}/tensorvm/job/t-1")
    assert status == 200 and '<svg id="graph"' in html and "Send/Recv" in html
    with pytest.raises(urllib.error.HTTPError) as e:
        get_text(f"{base}/tensorvm/api/jobs/nope")
    assert e.value.code == 404


# ---- a cluster started by the dask command line ----------------------------------------------
@pytest.fixture(scope="module")
def dask_cli_cluster():
    tmp = tempfile.mkdtemp()
    sched_file = os.path.join(tmp, "scheduler.json")
    env = {**os.environ, "DASK_DISTRIBUTED__WORKER__DAEMON": "False"}
    procs = [subprocess.Popen(
        [f"{BIN}/dask", "scheduler", "--host", "127.0.0.1", "--port", "0",
         "--dashboard-address", "127.0.0.1:0", "--scheduler-file", sched_file,
         "--preload", "tensorvm.scheduler_ext"], env=env, stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL)]
    try:
        from distributed import Client
        client = Client(scheduler_file=sched_file, timeout="60s", set_as_default=False)
        for name in ("ps-0", "worker-0"):
            procs.append(subprocess.Popen(
                [f"{BIN}/dask", "worker", client.scheduler.address, "--name", name,
                 "--host", "127.0.0.1", "--nthreads", "1", "--no-dashboard", "--no-nanny"],
                env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        client.wait_for_workers(2, timeout=60)
        with open(sched_file) as f:
            dash = json.load(f)["services"]["dashboard"]
        yield client, f"http://127.0.0.1:{dash}", procs
        client.close()
    finally:
        for p in reversed(procs):
            if p.poll() is None:
                p.send_signal(signal.SIGINT)
        for p in procs:
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                p.kill()


def test_preloaded_plugin_serves_a_cli_job(dask_cli_cluster):
    client, dash, _ = dask_cli_cluster
    assert get_json(f"{dash}/tensorvm/api/jobs") == {"jobs": []}  # there before any client
    out = subprocess.run(
        [f"{BIN}/tensorvm", "run", "ridge", "--scheduler", client.scheduler.address,
         "--steps", "20", "--report-every", "5", "--json"],
        capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    summary = json.loads(out.stdout)
    assert summary["result"]["ok"] and summary["state"] == "done"
    job = get_json(f"{dash}/tensorvm/api/jobs/{summary['id']}")
    assert (job["name"], job["state"]) == ("ridge", "done")
    assert job["metrics"]["step"] == 20 and job["metrics"]["total_steps"] == 20
    reported = [p[0] for p in job["metrics"]["history"]["loss"]]
    # every multiple of --report-every, after the demo's short first submissions (1, 2, 4)
    assert [s for s in reported if s % 5 == 0] == [5, 10, 15, 20], reported
    assert set(reported) - {5, 10, 15, 20} <= {1, 2, 4}, reported
    assert job["metrics"]["last"]["loss"] == pytest.approx(summary["metrics"]["loss"])
    assert {d["worker_name"] for d in job["devices"]} == {"ps-0", "worker-0"}
    assert job["progress"]["done"] == job["progress"]["total"] > 0


def test_worker_removal_is_an_event_sessions_receive(dask_cli_cluster):
    client, _, procs = dask_cli_cluster
    got, ready, seen = threading.Event(), threading.Event(), []

    def on_event(event):
        _, msg = event
        seen.append(msg)
        if msg.get("action") == "ping":
            ready.set()
        if msg.get("action") == "removed":
            got.set()

    client.subscribe_topic(TOPIC_WORKERS, on_event)
    client.log_event(TOPIC_WORKERS, {"action": "ping"})  # the subscription is live once
    assert ready.wait(20)  # our own event comes back
    procs[-1].send_signal(signal.SIGKILL)  # worker-0 dies without saying goodbye
    assert got.wait(30), (seen, client.get_events(TOPIC_WORKERS))
    removed = [m for m in seen if m["action"] == "removed"]
    assert removed[0]["name"] == "worker-0" and removed[0]["worker"].startswith("tcp://")


def test_a_failing_step_shows_its_error_and_op_name(local):
    """A kernel failure inside a Dask task: the job's page names the op, escaped."""
    sess, x, z = local

    def boom(v):
        raise ValueError("too big <b>")

    with sess.graph.as_default(), tv.device("/job:worker/task:0"):
        bad = tv.py_func(boom, [x], tv.float64, name="boom_<i>op</i>")
    with pytest.raises(tv.errors.OpError, match="boom_<i>op</i>"):
        sess.run(bad, {x: np.ones(3)})
    row = next(r for r in jobs_on(sess.client) if r["client"] == sess.client.id
               and r["state"] == "running")
    job = jobs_on(sess.client, row["id"])
    assert job["progress"]["erred"] >= 1, job
    assert "boom_<i>op</i>" in job["last_error"] and "too big <b>" in job["last_error"]
    assert job["errors"][-1]["device"] == "worker-0-cpu0"
    base = sess.dashboard_link.rsplit("/status", 1)[0]
    status, html = get_text(f"{base}/tensorvm/job/{row['id']}")
    assert "boom_&lt;i&gt;op&lt;/i&gt;" in html and "<i>op" not in html


def test_a_missing_job_page_does_not_echo_html(local):
    """The 404 of /tensorvm/job/<id> must not reflect the id as markup (a link someone
    sends you would run its script in the dashboard's origin)."""
    sess, _, _ = local
    base = sess.dashboard_link.rsplit("/status", 1)[0]
    evil = urllib.parse.quote("<img src=x onerror=alert(1)>", safe="")
    for path in (f"tensorvm/job/{evil}", f"tensorvm/job/{evil}/fragment",
                 f"tensorvm/api/jobs/{evil}"):
        with pytest.raises(urllib.error.HTTPError) as e:
            get_text(f"{base}/{path}")
        assert e.value.code == 404 and "no tensorvm job" in e.value.read().decode()
        assert e.value.headers["Content-Type"].startswith("text/plain"), path
        assert e.value.headers["X-Content-Type-Options"] == "nosniff"


def test_the_tensorvm_page_has_dasks_navigation(local):
    """Every page of Dask's navigation bar is one click away from /tensorvm, as from Dask's
    own pages (System and Profile were missing)."""
    sess, _, _ = local
    base = sess.dashboard_link.rsplit("/status", 1)[0]
    _, status = get_text(f"{base}/status")
    top = status.split("More...")[0]  # the bar, not its drop-down of single plots
    dask_pages = set(re.findall(r'<li>\s*<a href="(\w+)">', top)) - {"tensorvm"}
    assert {"status", "system", "profile", "info"} <= dask_pages
    _, html = get_text(f"{base}/tensorvm")
    nav = html.split("<div class='nav'>")[1].split("</div>")[0]
    assert {p for p in dask_pages if f'href="/{p}"' in nav} == dask_pages, nav
