"""The job registry as a pure state machine: events in, state out, the clock injected; no
cluster."""
import re

import pytest
from tensorvm.scheduler_ext import JobRegistry, job_message, parse_task_name


class Clock:
    def __init__(self):
        self.t = 1000.0

    def __call__(self):
        return self.t


W0, PS0 = "tvm-g1-worker-0-cpu0-s0", "tvm-g1-ps-0-cpu0-s1"


def step_keys(step: str) -> dict:
    """One step of a two-device plan: worker stage 0 -> (Send) -> ps stage 1, plus a send
    task key."""
    send = (f"{W0}-send", step, 0)
    return {(W0, step): [], send: [(W0, step)], (PS0, step): [send]}


@pytest.fixture
def reg():
    clock = Clock()
    r = JobRegistry(clock=clock, max_jobs=3, max_points=8)
    r.clock_obj = clock
    r.job_event(job_message("start", "j1", name="train", user="ann", client="C1",
                            args={"steps": 3}))
    return r


def test_start_graph_and_progress(reg):
    reg.graph_submitted("C1", step_keys("a.0"))
    j = reg.job("j1")
    assert (j["name"], j["user"], j["state"], j["args"]) == ("train", "ann", "running",
                                                             {"steps": 3})
    assert j["progress"]["total"] == 3 and j["progress"]["done"] == 0
    assert [d["device"] for d in j["devices"]] == ["ps-0-cpu0", "worker-0-cpu0"]
    assert j["graph"]["nodes"] == [{"id": "ps-0-cpu0/s1", "device": "ps-0-cpu0", "stage": 1},
                                   {"id": "worker-0-cpu0/s0", "device": "worker-0-cpu0",
                                    "stage": 0}]
    assert j["graph"]["edges"] == [{"src": "worker-0-cpu0/s0", "dst": "ps-0-cpu0/s1",
                                    "send": True}]
    for k in step_keys("a.0"):
        reg.task_done(k, "tcp://w0" if "worker" in k[0] else "tcp://ps")
    j = reg.job("j1")
    assert j["progress"]["done"] == 3 and j["progress"]["fraction"] == 1.0
    assert j["progress"]["runs"] == {"submitted": 1, "done": 1}
    worker = next(d for d in j["devices"] if d["device"] == "worker-0-cpu0")
    assert worker["worker"] == "tcp://w0"
    assert worker["stages"] == [{"stage": 0, "done": 2, "total": 2, "erred": 0, "ended": 0}]


def test_keys_of_another_client_make_a_session_job(reg):
    reg.graph_submitted("C2", {(W0, "b.0"): [], ("sum-123", 0): []})
    rows = reg.jobs()
    assert [r["id"] for r in rows] == ["session-C2", "j1"]  # newest first
    assert rows[0]["kind"] == "session" and rows[0]["progress"]["total"] == 1
    reg.client_removed("C2")
    assert reg.job("session-C2")["state"] == "closed"


def test_metrics_history_rate_and_decimation(reg):
    c = reg.clock_obj
    for i in range(1, 21):
        c.t += 0.5
        reg.job_event(job_message("metrics", "j1", step=i * 10, total_steps=200,
                                  loss=1.0 / i))
    j = reg.job("j1")
    m = j["metrics"]
    assert m["step"] == 200 and m["total_steps"] == 200 and m["last"]["loss"] == 0.05
    assert m["steps_per_s"] == 20.0  # 10 steps per 0.5 s
    hist = m["history"]["loss"]
    assert len(hist) <= 8 and hist[0] == [10, 1.0] and hist[-1] == [200, 0.05]
    assert [p[0] for p in hist] == sorted(p[0] for p in hist)
    assert j["progress"]["fraction"] == 1.0  # steps of total_steps


def test_finish_counters_and_elapsed(reg):
    c = reg.clock_obj
    c.t += 4.0
    reg.job_event(job_message("counters", "j1", counters={"map_input_records": 7}))
    reg.job_event(job_message("finish", "j1", state="done", output="file:///out",
                              counters={"reduce_output_records": 3}))
    c.t += 100.0  # a finished job's clock stops
    j = reg.job("j1")
    assert (j["state"], j["elapsed"], j["output"]) == ("done", 4.0, "file:///out")
    assert j["counters"] == {"map_input_records": 7, "reduce_output_records": 3}


def test_failures(reg):
    reg.graph_submitted("C1", step_keys("a.0"))
    reg.task_erred((W0, "a.0"), "tcp://w0")
    assert reg.job("j1")["progress"]["erred"] == 1
    reg.client_removed("C1")
    j = reg.job("j1")
    assert j["state"] == "failed" and "disconnected" in j["reason"]
    reg.job_event(job_message("start", "j2", name="x", client="C3"))
    reg.job_event(job_message("finish", "j2", state="failed", reason="ValueError: bad"))
    assert reg.job("j2")["reason"] == "ValueError: bad"


def test_cancelled_keys_stop_counting(reg):
    reg.graph_submitted("C1", step_keys("a.0"))
    for k in step_keys("a.0"):
        reg.task_forgotten(k)
    j = reg.job("j1")
    assert j["progress"]["total"] == 0 and j["progress"]["runs"]["done"] == 0


def test_workers_come_and_go(reg):
    reg.worker_added("tcp://w0", "worker-0")
    reg.graph_submitted("C1", step_keys("a.0"))
    reg.task_done((W0, "a.0"), "tcp://w0")
    dev = reg.job("j1")["devices"][1]
    assert (dev["worker_name"], dev["worker_alive"]) == ("worker-0", True)
    reg.worker_removed("tcp://w0")
    assert reg.job("j1")["devices"][1]["worker_alive"] is False


def test_only_finished_jobs_are_trimmed(reg):
    for i in range(5):
        reg.job_event(job_message("start", f"k{i}", name="k"))
        reg.job_event(job_message("finish", f"k{i}"))
    ids = [r["id"] for r in reg.jobs()]
    assert "j1" in ids and len([i for i in ids if i.startswith("k")]) == 3


def test_bad_messages_are_refused(reg):
    with pytest.raises(ValueError):
        reg.job_event({"op": "metrics"})
    with pytest.raises(ValueError):
        reg.job_event(job_message("metrics", "nope", loss=1.0))
    with pytest.raises(ValueError):
        job_message("explode", "j1")
    with pytest.raises(ValueError):
        reg.job_event(job_message("finish", "j1", state="weird"))


@pytest.mark.parametrize("name,want", [
    ("tvm-g12-worker-1-cpu0-s3", ("g12", "worker-1-cpu0", 3, False)),
    ("tvm-g1-ps-0-gpu0-s0-send", ("g1", "ps-0-gpu0", 0, True)),
    ("tvm_wordcount_ps_0_cpu0_s1", ("wordcount", "ps-0-cpu0", 1, False)),
    ("tvm_g2_param_server_3_cpu0_s2-send", ("g2", "param_server-3-cpu0", 2, True)),
    ("tvm_g2_ps_x_cpu0_s2", None),
    ("tvm_g2_worker_float_cpu0_s0-map3", ("g2", "worker-*-cpu0", 0, False)),
    ("tvm_g2_worker_float_cpu0_s0_send-map3", ("g2", "worker-*-cpu0", 0, True)),
    ("tvm_g2_worker_float_cpu0_s1", ("g2", "worker-*-cpu0", 1, False)),
    ("tvm_g2_worker_x_cpu0_s1-map3", None),
    ("tvm-g1", None), ("tvmx-g1-a-s0", None), ("finalize-abc", None), (3, None),
])
def test_parse_task_name(name, want):
    assert parse_task_name(name) == want


def test_floating_map_and_reduce_tasks_count_as_the_jobs_floating_device(reg):
    """A map-reduce job on a cluster runs floating tasks (``/job:worker/task:*map<m>``,
    ``*reduce<r>``): every one counts, under the device ``worker-*-cpu0``."""
    m, r = "tvm_g1_worker_float_cpu0_s0-map{}", "tvm_g1_worker_float_cpu0_s1-reduce{}"
    send = "tvm_g1_worker_float_cpu0_s0_send-map{}"
    keys = {(m.format(i), "a.0"): [] for i in range(3)}
    keys.update({(send.format(i), "a.0", 0): [(m.format(i), "a.0")] for i in range(3)})
    keys[(r.format(0), "a.0")] = [(send.format(i), "a.0", 0) for i in range(3)]
    reg.graph_submitted("C1", keys)
    for k in keys:
        reg.task_done(k, "tcp://w0")
    j = reg.job("j1")
    assert j["progress"]["done"] == j["progress"]["total"] == 7
    [dev] = j["devices"]
    assert dev["device"] == "worker-*-cpu0"
    assert [(s["stage"], s["total"]) for s in dev["stages"]] == [(0, 6), (1, 1)]
    assert j["graph"]["edges"] == [{"src": "worker-*-cpu0/s0", "dst": "worker-*-cpu0/s1",
                                    "send": False}]  # one (grouped) device


W0_, PS1_ = "tvm_g1_worker_0_cpu0_s0", "tvm_g1_ps_0_cpu0_s1"


def direct_step(step: str, ok: bool = True, erred=()) -> dict:
    """The record of one step on the direct data plane (tensorvm.runtime.direct.step_reports)."""
    rec = {"step": step, "n": 1, "ok": ok, "tasks": [[W0_, "tcp://w0"], [PS1_, "tcp://ps"]],
           "edges": [[W0_, PS1_]]}
    if not ok:
        rec["erred"] = list(erred)
    return rec


def test_direct_steps_count_like_dask_steps(reg):
    reg.graph_submitted("C1", step_keys("a.0"))  # a plan's first run, on Dask
    for k in step_keys("a.0"):
        reg.task_done(k, "tcp://w0")
    reg.steps_reported("C1", [direct_step("a.1"), direct_step("a.2")])
    j = reg.job("j1")
    assert j["progress"]["runs"] == {"submitted": 3, "done": 3}
    assert j["progress"]["done"] == j["progress"]["total"] == 3 + 2 * 2
    ps = next(d for d in j["devices"] if d["device"] == "ps-0-cpu0")
    assert (ps["worker"], ps["done"]) == ("tcp://ps", 3)
    assert j["graph"]["edges"] == [{"src": "worker-0-cpu0/s0", "dst": "ps-0-cpu0/s1",
                                    "send": True}]
    # A failed step: the failing device's task erred, the others do not count.
    reg.steps_reported("C1", [direct_step("a.3", ok=False, erred=[PS1_])])
    j = reg.job("j1")
    assert j["progress"]["runs"] == {"submitted": 4, "done": 3}
    assert (j["progress"]["erred"], j["progress"]["total"]) == (1, 8)
    # Steps of a client with no job make its session job; reports of other tasks are ignored.
    reg.steps_reported("C2", [direct_step("b.1"), {"step": "x", "tasks": [["sum-1", None]]}])
    assert reg.job("session-C2")["progress"]["runs"] == {"submitted": 1, "done": 1}


def test_event_topics_are_defined_once_in_core():
    """Core logs on the topics by the names in tensorvm.runtime.wire_names (it does not import
    scheduler_ext); the registry reads those very names."""
    from tensorvm import scheduler_ext
    from tensorvm.runtime import job_api, wire_names
    from tensorvm.runtime.direct import step_reports
    assert scheduler_ext.TOPIC_STEPS is wire_names.TOPIC_STEPS is step_reports.TOPIC_STEPS
    assert scheduler_ext.TOPIC_JOBS is wire_names.TOPIC_JOBS is job_api.TOPIC_JOBS
    assert scheduler_ext.TOPIC_WORKERS is wire_names.TOPIC_WORKERS


def test_one_plugin_handles_workers_and_the_registry_learns_from_its_events():
    """Dask's add_worker/remove_worker hooks are handled by one scheduler plugin, core's
    DeviceHomes, which logs one event per arrival and departure on TOPIC_WORKERS (a departure
    names the devices that lived on the worker); the job registry's plugin keeps its list of
    workers from those events."""
    from types import SimpleNamespace

    from distributed.diagnostics.plugin import SchedulerPlugin
    from tensorvm.runtime.cluster.device_map import DeviceHomes
    from tensorvm.scheduler_ext import TOPIC_WORKERS, TensorvmPlugin

    hooked = [cls for cls in (DeviceHomes, TensorvmPlugin) for hook in ("add_worker",
              "remove_worker") if getattr(cls, hook) is not getattr(SchedulerPlugin, hook)]
    assert hooked == [DeviceHomes, DeviceHomes]
    homes, jobs, events = DeviceHomes(), TensorvmPlugin(), []

    class Scheduler:  # what the hooks use of Dask's: its workers and its log_event
        workers = {"tcp://w0": SimpleNamespace(name="worker-0")}

        def log_event(self, topic, msg):
            events.append((topic, msg))
            for plugin in (homes, jobs):
                plugin.log_event(topic, msg)

    sched = Scheduler()
    homes.add_worker(sched, "tcp://w0")
    assert jobs.registry.workers == {"tcp://w0": "worker-0"}
    homes.homes["tvm-dev-ps-0"] = ("tcp://w0", "worker-0")
    del sched.workers["tcp://w0"]  # Dask drops the worker before the hook
    homes.remove_worker(sched, "tcp://w0")
    assert jobs.registry.workers == {}
    assert events == [
        (TOPIC_WORKERS, {"action": "added", "worker": "tcp://w0", "name": "worker-0"}),
        (TOPIC_WORKERS, {"action": "removed", "worker": "tcp://w0", "name": "worker-0",
                         "devices": ["tvm-dev-ps-0"]})]


def test_a_failed_task_keeps_its_error_for_the_page(reg):
    """A failing step's error (with its op name) is kept per job, on either data plane: the
    scheduler's exception text of the failing task, a direct step's ``error``."""
    reg.graph_submitted("C1", step_keys("a.0"))
    reg.task_erred((W0, "a.0"), "tcp://w0",
                   error="InvalidArgumentError(\"ValueError: bad for op 'boom' (PyFunc)\")")
    reg.task_erred((PS0, "a.0"), None)  # a dependent, erred by cause: no text of its own
    j = reg.job("j1")
    assert j["progress"]["erred"] == 2
    assert [(e["device"], e["stage"]) for e in j["errors"]] == [("worker-0-cpu0", 0)]
    assert "for op 'boom'" in j["errors"][0]["error"]
    assert "for op 'boom'" in reg.jobs()[0]["last_error"]
    rec = direct_step("a.1", ok=False, erred=[PS1_])
    rec["error"] = "InvalidArgumentError: x for op 'update' (AssignAdd)"
    reg.steps_reported("C1", [rec])
    j = reg.job("j1")
    assert [(e["device"], e["stage"]) for e in j["errors"]] == [("worker-0-cpu0", 0),
                                                                ("ps-0-cpu0", 1)]
    assert j["last_error"].endswith("(AssignAdd)")
    for i in range(30):  # a loop that fails every step keeps only the latest few
        reg.task_erred((W0, f"z.{i}"), None, error=f"e{i}")
        reg.graph_submitted("C1", {(W0, f"y.{i}"): []})
        reg.task_erred((W0, f"y.{i}"), None, error=f"e{i}")
    errors = reg.job("j1")["errors"]
    assert len(errors) == 10 and errors[-1]["error"] == "e29"


def test_a_session_shows_its_runs_per_second(reg):
    """A plain session reports no step metric: its rate is that of the runs the registry
    counted (both data planes), and it falls to 0 once the loop has stopped."""
    c = reg.clock_obj
    for i in range(5):  # Dask-plane runs, one every 0.25 s
        c.t += 0.25
        reg.graph_submitted("C9", {(W0, f"d.{i}"): []})
        reg.task_done((W0, f"d.{i}"), "tcp://w0")
    for _ in range(5):  # then direct-plane reports: 4 steps per 0.1 s batch
        c.t += 0.1
        reg.steps_reported("C9", [direct_step(f"e.{c.t}.{k}") for k in range(4)])
    m = reg.job("session-C9")["metrics"]
    assert m["runs_per_s"] == pytest.approx((25 - 1) / (1.75 - 0.25))  # first to last run
    assert reg.job("session-C9")["progress"]["runs"]["done"] == 25
    c.t += 30.0  # nothing runs any more
    assert reg.jobs()[0]["metrics"]["runs_per_s"] == 0.0


# ---- the page's HTML (pure functions of the registry's data) ----------------------------------
def test_the_page_shows_a_failed_step_with_its_op_name_escaped(reg):
    from tensorvm.scheduler_ext import page
    reg.graph_submitted("C1", step_keys("a.0"))
    reg.task_done((W0, "a.0"), "tcp://w0")
    reg.task_erred((f"{W0}-send", "a.0", 0), None)
    reg.task_erred((PS0, "a.0"), None,
                   error="InvalidArgumentError: bad <b>x</b> for op 'boom<img src=x>'")
    html = page.job_detail(reg.job("j1"), "/tensorvm")
    assert "<img" not in html and "<b>x" not in html
    assert "for op &#x27;boom&lt;img src=x&gt;&#x27;" in html
    ps_row = re.search(r"<tr><td>ps-0-cpu0</td>(.*?)</tr>", html.split("id='devices'")[1])
    assert "<td class='state-failed'>1</td>" in ps_row.group(1)  # its failed-tasks column
    assert "2 failed" in page.jobs_table(reg.jobs(), "/tensorvm")  # the list says so too
    assert 'class="stage erred"' in page.graph_svg(reg.job("j1"))  # the failed stage, red


def test_the_page_shows_a_sessions_runs_and_rate(reg):
    from tensorvm.scheduler_ext import page
    c = reg.clock_obj
    for i in range(3):
        c.t += 0.5
        reg.steps_reported("C7", [direct_step(f"s.{i}")])
    row = page.jobs_table(reg.jobs(), "/tensorvm")
    assert "3 runs" in row and "2 runs/s" in row and "500 ms/run" in row


def test_a_clients_second_session_job_does_not_replace_its_first(reg):
    """A client that ran steps, then a job, then steps again has two session jobs: the
    second gets its own id and is listed first (it replaced the first's record in place)."""
    reg.job_event(job_message("finish", "j1"))
    reg.graph_submitted("C1", {(W0, "a.0"): []})
    reg.task_done((W0, "a.0"), "tcp://w0")
    reg.job_event(job_message("start", "j2", name="mine", client="C1"))
    reg.job_event(job_message("finish", "j2"))
    reg.graph_submitted("C1", {(W0, "b.0"): [], (W0, "b.1"): []})
    rows = reg.jobs()
    assert rows[0]["state"] == "running" and rows[0]["progress"]["total"] == 2
    first = reg.job("session-C1")
    assert (first["state"], first["progress"]["done"]) == ("closed", 1)
    assert len({r["id"] for r in rows}) == len(rows) == 4
