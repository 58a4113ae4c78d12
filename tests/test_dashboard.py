"""The tensorvm page of the Dask dashboard in a real headless Chromium, while a multi-step
training job runs on a LocalCluster: the job row, the graph drawing and a progress value that
advances between two screenshots; then the JSON against what the session reported."""
import json
import re
import threading
import urllib.request

import numpy as np
import pytest
import tensorvm as tv
from tensorvm.jobs.bundled import JobSpec
from tensorvm.jobs.runner import JobRun

from browser import CHROMIUM, chromium

pytestmark = pytest.mark.cluster
SEND_BLUE, PROGRESS_GREEN = (0x1F, 0x5F, 0xA8), (0x3D, 0x8C, 0x40)


class Trainer:
    """A training loop that runs until told to stop, reporting each step's loss."""

    def __init__(self):
        self.stop = threading.Event()
        self.cond = threading.Condition()
        self.reported: list[tuple[int, float]] = []
        self.runs = 0
        self.plan = None
        self.finished = False

    def __call__(self, session=None):
        """Fit w to y = 3x by gradient descent, one step per run."""
        rng = np.random.default_rng(0)
        x = rng.normal(size=(64, 1))
        with tv.device("/job:worker/task:0"):
            xt = tv.constant(x)
            yt = tv.constant(3.0 * x)
        with tv.device("/job:ps/task:0"):
            w = tv.Variable(np.zeros((1, 1)), name="dashboard_w")
        with tv.device("/job:worker/task:0"):
            loss = tv.reduce_mean(tv.square(tv.matmul(xt, w) - yt))
        train = tv.train.GradientDescentOptimizer(0.01).minimize(loss)
        session.run(w.initializer)
        self.runs += 1
        self.plan = session.plan([train, loss])
        step = 0
        # The first run is on the Dask data plane, the others on the direct one (their
        # tasks reach the registry as step reports, sent before the job's next message).
        while not self.stop.wait(0.05):  # pace: a few steps per second, until stopped
            _, value = session.run([train, loss])
            self.runs += 1
            step += 1
            tv.job.report(step=step, loss=float(value))
            with self.cond:
                self.reported.append((step, float(value)))
                self.cond.notify_all()

    def wait_for_step(self, n: int) -> None:
        with self.cond:
            assert self.cond.wait_for(lambda: len(self.reported) >= n, timeout=120)


@pytest.fixture(scope="module")
def running_job():
    if CHROMIUM is None:
        pytest.skip("no chromium on this machine (make test installs it where it can)")
    trainer = Trainer()
    spec = JobSpec("dashtrain", trainer, "tests/test_dashboard.py:Trainer")
    with JobRun(spec, cluster={"ps": 1, "worker": 1}, args={"lr": 0.01}) as run:
        assert run.registry_ok
        thread = threading.Thread(target=run.call, args=({},), daemon=True)
        thread.start()

        def finish():
            """Stop the loop and end the job; every report and task of it has reached the
            scheduler by then (log_event waits, the Dask step's gather waits, and job messages
            wait for the direct steps' reports)."""
            trainer.stop.set()
            thread.join(60)
            assert not thread.is_alive()
            if not trainer.finished:
                trainer.finished = True
                run.finish("done")
        try:
            yield run, trainer, finish
        finally:
            finish()


def page_progress(dom: str, job_id: str) -> tuple[int, int]:
    """(tasks done, step) shown in the job's row."""
    row = re.search(rf'<tr class="job-row" data-job="{job_id}">(.*?)</tr>', dom, re.DOTALL)
    assert row, dom[:3000]
    done = int(re.search(r'class="progress-value">(\d+)/\d+', row.group(1)).group(1))
    step = int(re.search(r"step (\d+)", row.group(1)).group(1))
    return done, step


def colours(png: str) -> set:
    from PIL import Image
    with Image.open(png) as im:
        assert im.size == (1200, 900)
        return {c for _, c in im.convert("RGB").getcolors(maxcolors=1 << 20)}


def test_page_advances_while_the_job_runs(running_job, tmp_path):
    run, trainer, _ = running_job
    trainer.wait_for_step(2)
    base = run.dashboard.rsplit("/job/", 1)[0]
    listing = chromium(base)
    assert f'data-job="{run.id}"' in listing and "dashtrain" in listing
    shots, seen = [], []
    for i in range(2):
        dom = chromium(run.dashboard)
        seen.append(page_progress(dom, run.id))
        shot = str(tmp_path / f"job-{i}.png")
        chromium(run.dashboard, screenshot=shot)
        shots.append(shot)
        assert '<svg id="graph"' in dom and 'class="edge send"' in dom
        assert "ps-0-cpu0" in dom and "worker-0-cpu0" in dom
        assert 'id="curve-loss"' in dom  # the Bokeh loss chart (issue 25)
        trainer.wait_for_step(seen[-1][1] + 3)  # the job moves on before the next look
    refreshed = chromium(run.dashboard, virtual_ms=2500)  # the page refreshes itself
    assert re.search(r'id="live" data-refreshes="[1-9]', refreshed), refreshed[:2000]
    assert page_progress(refreshed, run.id)[1] >= seen[-1][1]
    (done0, step0), (done1, step1) = seen
    assert step1 > step0 and done1 > done0
    first, second = colours(shots[0]), colours(shots[1])
    assert {SEND_BLUE, PROGRESS_GREEN} <= first & second  # Send/Recv edges, progress bars
    with open(shots[0], "rb") as a, open(shots[1], "rb") as b:
        assert a.read() != b.read()


def test_odd_names_are_text_never_markup(running_job):
    """Names, counters, outputs and errors come from users' programs: in the browser they
    are text (no element, no attribute of theirs), however long."""
    run, trainer, _ = running_job
    from tensorvm.scheduler_ext import TOPIC_JOBS, job_message
    evil = "<img src=x onerror=\"document.title='pwned'\"> & 'q' " + "long_" * 60
    for msg in (job_message("start", "odd-1", name=evil, user=evil, client="nobody"),
                job_message("counters", "odd-1", counters={evil: 1}),
                job_message("finish", "odd-1", state="failed", reason=evil, output=evil)):
        run.client.log_event(TOPIC_JOBS, msg)
    base = run.dashboard.rsplit("/job/", 1)[0]
    trainer.wait_for_step(len(trainer.reported) + 1)  # the job messages have landed
    for url in (base, f"{base}/job/odd-1"):
        dom = chromium(url, virtual_ms=1500)
        assert "<img" not in dom and "<title>pwned</title>" not in dom
        assert "&lt;img src=x onerror=" in dom, url


def test_json_matches_what_the_session_reported(running_job):
    run, trainer, finish = running_job
    finish()
    url = run.dashboard.replace("/tensorvm/job/", "/tensorvm/api/jobs/")
    with urllib.request.urlopen(url, timeout=10) as r:
        job = json.loads(r.read())
    last = trainer.reported[-1]
    assert (job["name"], job["state"], job["args"]) == ("dashtrain", "done", {"lr": 0.01})
    assert job["metrics"]["step"] == last[0]
    assert job["metrics"]["last"]["loss"] == pytest.approx(last[1])
    hist = [tuple(p) for p in job["metrics"]["history"]["loss"]]
    assert hist[-1] == pytest.approx(last) and set(hist) <= set(trainer.reported)
    assert job["progress"]["runs"] == {"submitted": trainer.runs, "done": trainer.runs}
    assert job["progress"]["done"] == job["progress"]["total"] > 0
    plan_devices = {re.sub(r"/job:(\w+)/replica:0/task:(\d+)/device:CPU:(\d+)",
                           r"\1-\2-cpu\3", d) for d in trainer.plan.devices}
    assert {d["device"] for d in job["devices"]} == plan_devices
    assert any(e["send"] for e in job["graph"]["edges"]) == bool(trainer.plan.sends)


def test_a_page_whose_scheduler_went_away_says_so(tmp_path):
    """When the cluster closes under an open page (a session's own LocalCluster ends with
    it), the page must not go on showing 'running' as if it were live."""
    if CHROMIUM is None:
        pytest.skip("no chromium on this machine")
    from tensorvm.scheduler_ext import JobRegistry, job_message, page
    reg = JobRegistry(clock=lambda: 0.0)
    reg.job_event(job_message("start", "j1", name="train", client="C1"))
    html = page.page("t", page.job_detail(reg.job("j1"), "/tensorvm"),
                     "http://127.0.0.1:9/tensorvm/job/j1/fragment", "/tensorvm")
    path = tmp_path / "page.html"
    path.write_text(html)
    dom = chromium(path.as_uri(), virtual_ms=3000)
    assert re.search(r'id="lost"[^>]*style="display: block;"[^>]*>No answer from the '
                     r"scheduler[^<]* since \d\d:\d\d:\d\d", dom), dom[-1500:]
