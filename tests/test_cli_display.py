"""The CLI's progress display and summary, rendered in process (no cluster)."""
import pytest
from rich.console import Console
from tensorvm.jobs.display import print_summary, render
from tensorvm.jobs.runner import parse_cluster, summarize


def text_of(renderable=None, summary=None) -> str:
    console = Console(record=True, width=100, force_terminal=False)
    if summary is not None:
        print_summary(summary, console)
    else:
        console.print(renderable)
    return console.export_text()


def test_map_reduce_progress_in_splits_map_tasks_and_reducers():
    """Splits, map tasks and reducers of the job (the running step's first and last Dask
    stages give the fractions done), never Dask's stage tasks under map/reduce labels."""
    status = {"elapsed": 2.5, "progress": {"done": 5, "total": 8},
              "mr": {"job": "wordcount", "splits": 50, "map_tasks": 2, "reducers": 4,
                     "running": True, "steps": 0, "t_first": 0.0},
              "devices": [{"stages": [{"stage": 0, "done": 1, "total": 1},
                                      {"stage": 1, "done": 1, "total": 1}]},
                          {"stages": [{"stage": 0, "done": 0, "total": 1},
                                      {"stage": 1, "done": 0, "total": 1}]}]}
    out = text_of(render("wordcount", status, "http://127.0.0.1:1/tensorvm/job/w-1"))
    assert "tensorvm wordcount  2.5 s" in out
    assert "25/50  map tasks 1/2" in out and "2/4" in out and "reduce " not in out
    assert out.count("dashboard: http://127.0.0.1:1/tensorvm/job/w-1") == 1
    status["mr"].update(running=False, steps=1, records=1000, bytes=2_000_000, t_last=2.0)
    out = text_of(render("wordcount", status, None, {"state": "done", "result": None}))
    assert "50/50  map tasks 2/2" in out and "4/4" in out
    assert "1,000 records" in out and "500 records/s" in out and "1.0 MB/s" in out
    assert out.rstrip().endswith("done")


def test_a_graph_job_shows_its_tasks_without_map_reduce_labels():
    status = {"elapsed": 1.0, "progress": {"done": 3, "total": 5},
              "devices": [{"stages": [{"stage": 0, "done": 3, "total": 3},
                                      {"stage": 1, "done": 0, "total": 2}]}]}
    out = text_of(render("logreg", status, None))
    assert "tasks" in out and "3/5" in out and "map" not in out and "reduce" not in out


def test_training_stopped_at_its_target_shows_the_final_global_step():
    status = {"elapsed": 9.0, "local_metrics": {"step": 1595, "total_steps": 20000,
                                                "heldout_loss": 0.5}}
    final = {"state": "done", "result": {"ok": True, "global_step": 1607,
                                         "target_loss": 0.51}}
    out = text_of(render("logreg", status, None, final))
    assert "1607/20000" in out and "1595" not in out
    assert "done: stopped at step 1607 of 20000 (target reached)" in out


def test_training_steps_loss_and_rate():
    status = {"elapsed": 1.0, "metrics": {"steps_per_s": 12.5},
              "local_metrics": {"step": 30, "total_steps": 100, "loss": 0.25, "time": 1.0}}
    out = text_of(render("ridge", status, None))
    assert "30/100" in out and "loss 0.25" in out and "12.5 steps/s" in out
    assert "dashboard" not in out


def test_summary_of_a_map_reduce_result():
    class Result:  # what mr.Result carries
        counters = {"reduce_output_records": 3}
        output_urls = ["file:///o/part-r-00000", "file:///o/part-r-00001"]
        keys = None

    s = summarize(Result()) | {"job": "wc", "id": "wc-1", "state": "done", "seconds": 1.25}
    assert s["output"] == "file:///o" and s["files"] == Result.output_urls
    out = text_of(summary=s)
    assert "wc done in 1.2 s" in out and "reduce_output_records" in out
    assert "output: file:///o" in out


def test_parse_cluster():
    assert parse_cluster("ps=2, worker=3") == {"ps": 2, "worker": 3}
    for bad in ("ps", "ps=0", "ps=x", "=1"):
        with pytest.raises(ValueError, match="ps=1,worker=2"):
            parse_cluster(bad)
