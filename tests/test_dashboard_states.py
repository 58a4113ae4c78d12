"""States that are true on the tensorvm page (issue 25, items 5, 6 and 9): the normal end of
synchronous training — the chief closing its token gate and gradient accumulators, which ends
the replicas' waiting steps with TF's ``OutOfRangeError`` — is no failure in the API's JSON,
on the page or in the CLI's summary, for a ``tensorvm run logreg --sync`` job and for a plain
``run_replicas`` program; the page's progress speaks in steps of the target; the loss curve
(Bokeh) has a log-scale toggle and smoothing; rates are shown only over a meaningful window.

One LocalCluster (1 PS + 2 workers, ``tv_cluster``) serves every job here."""
import json
import os
import re
import subprocess
import sys
import urllib.request

import numpy as np
import pytest
import tensorvm as tv
from tensorvm.scheduler_ext import JobRegistry, job_message, page
from tensorvm.scheduler_ext.curves import smooth
from tensorvm.scheduler_ext.task_keys import expected_end

from browser import CHROMIUM, chromium

pytestmark = pytest.mark.cluster
TV_CLUSTER = {"ps": 1, "worker": 2}
TV_CLUSTER_SHARED = True  # kills no worker, leaves no state
BIN = os.path.dirname(sys.executable)
SHOTS = "/tmp/shots"
STEPS = 40
LOGREG = ["--sync", "--workers", "2", "--steps", str(STEPS), "--rows", "4000", "--features",
          "8", "--shards", "2", "--holdout", "2000", "--eval-every", "10",
          "--steps-per-run", "10", "--tolerance", "0"]


def get(url):
    with urllib.request.urlopen(url, timeout=30) as r:
        return r.read().decode()


def dashboard_base(client) -> str:
    return client.dashboard_link.rsplit("/status", 1)[0] + "/tensorvm"


def assert_no_failure(job: dict) -> None:
    assert job["progress"]["erred"] == 0, job["errors"]
    assert job["last_error"] is None and job["errors"] == []
    assert [d["erred"] for d in job["devices"]] == [0] * len(job["devices"])
    assert all(s["erred"] == 0 for d in job["devices"] for s in d["stages"])


def assert_page_shows_no_failure(html: str) -> None:
    assert 'class="erred"' not in html and " failed</span>" not in html, html[:3000]
    assert "Errors</h2>" not in html and "OutOfRangeError" not in html


@pytest.fixture(scope="module")
def logreg_sync(tv_cluster):
    """``tensorvm run logreg --sync`` (small) on the module's cluster: its JSON summary, the
    job's API JSON and the job page's HTML, once it has ended."""
    out = subprocess.run([f"{BIN}/tensorvm", "run", "logreg", *LOGREG, "--scheduler",
                          tv_cluster.address, "--json"], capture_output=True, text=True,
                         timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    summary = json.loads(out.stdout)
    base = dashboard_base(tv_cluster.client)
    job = json.loads(get(f"{base}/api/jobs/{summary['id']}"))
    return summary, job, get(f"{base}/job/{summary['id']}"), f"{base}/job/{summary['id']}"


def test_logreg_sync_ends_with_no_failure(logreg_sync):
    summary, job, html, _ = logreg_sync
    assert summary["state"] == "done" and "error" not in summary
    assert summary["result"]["global_step"] == STEPS
    assert (job["name"], job["state"], job["reason"]) == ("logreg", "done", None)
    assert_no_failure(job)
    # the waits that the closed gate ended are counted as ended, not failed
    assert job["progress"]["ended"] > 0
    assert job["progress"]["done"] + job["progress"]["ended"] == job["progress"]["total"]
    assert_page_shows_no_failure(html)


def test_logreg_sync_progress_speaks_in_steps(logreg_sync):
    _, job, html, _ = logreg_sync
    m = job["metrics"]
    assert (m["step"], m["total_steps"]) == (STEPS, STEPS)
    assert job["progress"]["fraction"] == 1.0
    row = re.search(r'<tr class="job-row"[^>]*>(.*?)</tr>', html, re.DOTALL).group(1)
    # the bar and its label say the same thing, in steps of the target
    assert re.search(r'<div style="width:100.0%"></div></span><span class="progress-value">'
                     rf"{STEPS}/{STEPS}</span> steps", row), row
    # the metric column shows the job's latest metric (logreg reports the held-out loss)
    last = m["last"]["heldout_loss"]
    assert f"heldout_loss {last:.4g}" in row
    assert "tasks" not in re.sub(r"<[^>]+>", " ", row.split("steps", 1)[1]).split("heldout")[0]


def test_logreg_sync_page_has_a_loss_curve_with_log_toggle_and_smoothing(logreg_sync):
    _, job, html, _ = logreg_sync
    assert len(job["metrics"]["history"]["heldout_loss"]) == STEPS // 10
    assert 'id="curve-heldout_loss"' in html
    # Bokeh: the figure's document, a tab per axis scale and the smoothing slider
    assert "/tensorvm/static/bokeh" in html and "Bokeh.embed.embed_items" in html
    for words in ('"title":"linear"', '"title":"log"', "smoothing"):
        assert words.replace('"', "") in html.replace('"', "").replace("\\", ""), words


def run_replicas_program(session, steps: int):
    """A plain program's training loop: run_replicas with sync=True on a session with no
    ``tv.job`` around it (as README's example)."""
    def model_fn(ctx):
        g = tv.get_default_graph()
        with g.device(None), g.device(ctx.device):
            x = tv.constant(np.linspace(-1, 1, 32).reshape(32, 1))
            y = 3.0 * x
        w = tv.Variable(np.zeros((1, 1)), name="rr_w")
        loss = tv.reduce_mean(tv.square(tv.matmul(x, w) - y))
        return {"loss": loss, "optimizer": tv.train.GradientDescentOptimizer(0.1)}
    return tv.train.run_replicas(model_fn, session=session, sync=True, last_step=steps,
                                 steps_per_run=5)


def test_run_replicas_session_ends_with_no_failure(tv_cluster):
    from distributed import Client
    client = Client(tv_cluster.address, set_as_default=False)
    try:
        sess = tv.Session(client=client, cluster=tv_cluster.spec, graph=tv.Graph(),
                          verbose=False)
        r = run_replicas_program(sess, 20)
        assert r.global_step == 20
        client_id = client.id
        sess.close()
    finally:
        client.close()
    base = dashboard_base(tv_cluster.client)
    jobs = [j for j in json.loads(get(f"{base}/api/jobs"))["jobs"] if j["client"] == client_id]
    assert jobs, "the program's session is listed"
    for j in jobs:
        full = json.loads(get(f"{base}/api/jobs/{j['id']}"))
        assert_no_failure(full)
        assert not full["name"].startswith("session g"), full["name"]
        assert_page_shows_no_failure(get(f"{base}/job/{j['id']}"))
    trained = [j for j in jobs if j["metrics"]["total_steps"] == 20]
    assert trained and trained[0]["metrics"]["step"] == 20
    assert trained[0]["name"] == os.path.basename(sys.argv[0]) or "pytest" in \
        trained[0]["name"]


# ---- the registry and the page without a cluster ----------------------------------------------

def test_expected_ends_are_not_failures():
    assert expected_end("OutOfRangeError: the token gate was closed (training ended)")
    assert expected_end("OutOfRangeError('End of sequence')")
    assert not expected_end("InvalidArgumentError: bad shape")
    assert not expected_end(None)
    t = iter(range(1000))
    reg = JobRegistry(clock=lambda: float(next(t)))
    reg.job_event(job_message("start", "j1", name="train", client="C1"))
    w = "tvm_train_worker_0_cpu0_s0"
    reg.steps_reported("C1", [{"step": "a.1", "n": 5, "ok": True, "tasks": [[w, "tcp://w"]]},
                              {"step": "a.2", "n": 5, "ok": False, "tasks": [[w, "tcp://w"]],
                               "erred": [w], "error": "OutOfRangeError: the token gate was "
                               "closed (training ended)"}])
    reg.graph_submitted("C1", {(w, "b.1"): [], (w, "b.2"): [(w, "b.1")]})
    reg.task_erred((w, "b.1"), "tcp://w", "OutOfRangeError('the queue is closed')")
    reg.task_erred((w, "b.2"), None, None, cause="OutOfRangeError('the queue is closed')")
    j = reg.job("j1")
    p = j["progress"]
    assert (p["done"], p["erred"], p["ended"], p["total"]) == (5, 0, 7, 12)
    assert j["errors"] == [] and j["last_error"] is None
    reg.task_erred((w, "c.1"), "tcp://w", "boom")  # not a key of the job: ignored
    reg.graph_submitted("C1", {(w, "d.1"): []})
    reg.task_erred((w, "d.1"), "tcp://w", "InvalidArgumentError('bad')")
    p = reg.job("j1")["progress"]
    assert (p["erred"], p["ended"]) == (1, 7)
    assert reg.job("j1")["last_error"] == "InvalidArgumentError('bad')"


def test_rates_need_a_meaningful_window():
    clock = [0.0]
    reg = JobRegistry(clock=lambda: clock[0])
    reg.job_event(job_message("start", "j1", name="train", client="C1"))
    w = "tvm_train_worker_0_cpu0_s0"
    for i in range(51):  # 51 runs in 0.2 s: no rate yet
        clock[0] = 0.004 * i
        reg.steps_reported("C1", [{"step": f"a.{i}", "n": 1, "ok": True,
                                   "tasks": [[w, "tcp://w"]]}])
    assert reg.job("j1")["metrics"]["runs_per_s"] is None
    for i in range(51, 61):  # then 10 more over 2 s
        clock[0] = 0.2 + 0.2 * (i - 50)
        reg.steps_reported("C1", [{"step": f"a.{i}", "n": 1, "ok": True,
                                   "tasks": [[w, "tcp://w"]]}])
    rate = reg.job("j1")["metrics"]["runs_per_s"]
    assert rate is not None and 4.0 <= rate <= 30.0


def test_elapsed_counts_from_submission_with_the_cluster_start_apart():
    clock = [100.0]
    reg = JobRegistry(clock=lambda: clock[0])
    reg.cluster_started = 95.0
    reg.job_event(job_message("start", "j1", name="wc", client="C1", submitted=90.0))
    clock[0] = 110.0
    reg.job_event(job_message("finish", "j1", state="done"))
    j = reg.job("j1")
    assert (j["elapsed"], j["setup_s"], j["run_s"]) == (20.0, 10.0, 10.0)
    assert j["cluster_started_for_job"] is True
    row = page.job_row(j, "/tensorvm")
    assert "20.0 s" in row and "cluster start 10.0 s" in row


def test_a_map_reduce_job_shows_splits_and_reducers_as_the_terminal_does():
    """The page said "8/8 tasks" (Dask's stage tasks) where the terminal counts splits, map
    tasks and reducers: both now use one rule (job_record.map_reduce_progress)."""
    from tensorvm.jobs.display import render
    reg = JobRegistry(clock=lambda: 0.0)
    reg.job_event(job_message("start", "wc", name="wordcount", client="C1"))
    reg.job_event(job_message("counters", "wc", counters={"splits": 50, "map_tasks": 10,
                                                           "reducers": 4}))
    maps = [f"tvm_wc_worker_{i}_cpu0_s0" for i in range(2)]
    reds = [f"tvm_wc_worker_{i}_cpu0_s1" for i in range(2)]
    reg.graph_submitted("C1", {(k, n): [] for k in maps + reds for n in range(5)})
    for k in maps:  # 8 of the 10 map-stage tasks done, 1 of the 10 reduce-stage tasks
        for n in range(4):
            reg.task_done((k, n), "tcp://w")
    reg.task_done((reds[0], 0), "tcp://w")
    j = reg.job("wc")
    assert j["progress"]["map_reduce"] == {"splits": [40, 50], "map_tasks": [8, 10],
                                           "reducers": [0, 4]}
    row = page.job_row(j, "/tensorvm")
    assert re.search(r">40/50</span> splits \(8/10 map tasks\).*>0/4</span> reducers", row)
    status = {"mr": {"job": "wordcount", "splits": 50, "map_tasks": 10, "reducers": 4,
                     "running": True}, "devices": j["devices"]}
    console = __import__("rich.console").console.Console(width=120, record=True)
    console.print(render("wordcount", status, None))
    shown = console.export_text()
    assert "40/50  map tasks 8/10" in shown and "0/4" in shown, shown
    reg.job_event(job_message("finish", "wc", state="done"))
    assert reg.job("wc")["progress"]["map_reduce"]["reducers"] == [4, 4]


def test_smoothing_is_tensorboards_debiased_ema():
    assert smooth([1.0, 1.0, 1.0], 0.9) == pytest.approx([1.0, 1.0, 1.0])
    assert smooth([1.0, 3.0], 0.0) == [1.0, 3.0]
    assert smooth([2.0, 4.0], 0.5) == pytest.approx([2.0, (0.5 * 0.5 * 2 + 0.5 * 4) / 0.75])


def test_session_jobs_are_named_after_the_program():
    reg = JobRegistry(clock=lambda: 0.0)
    reg.job_event(job_message("start", "session-C1", name="train.py", client="C1",
                              kind="session"))
    reg.steps_reported("C1", [{"step": "a.1", "n": 1, "ok": True,
                               "tasks": [["tvm_g1_worker_0_cpu0_s0", "tcp://w"]]}])
    assert [j["name"] for j in reg.jobs()] == ["train.py"]


# ---- the finished page in a browser -----------------------------------------------------------

def test_finished_logreg_sync_page_in_chromium(logreg_sync):
    if CHROMIUM is None:
        pytest.skip("no chromium on this machine (apt-get install chromium)")
    _, job, _, url = logreg_sync
    os.makedirs(SHOTS, exist_ok=True)
    shot = os.path.join(SHOTS, "logreg-sync-done.png")
    dom = chromium(url, virtual_ms=4000, size=(1200, 1400))
    assert_page_shows_no_failure(dom)
    assert "bk-Figure" in dom or "bk-figure" in dom.lower() or "bk-root" in dom, dom[-3000:]
    chromium(url, screenshot=shot, virtual_ms=4000, size=(1200, 1400))
    from PIL import Image
    with Image.open(shot) as im:
        colours = {c for _, c in im.convert("RGB").getcolors(maxcolors=1 << 20)}
    assert (0xB0, 0x00, 0x00) not in colours  # no failure red on the page
    assert os.path.getsize(shot) > 10_000


