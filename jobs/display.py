"""The CLI's live progress display (rich) and end-of-job summary.

While a job runs, :class:`LiveDisplay` polls :meth:`JobRun.status` twice a second and shows
progress in the job's terms: a map-reduce job's splits and map tasks, its reducers, and the
records and bytes it read per second; a training job's steps toward its target with the loss
and steps/s (and, at the end, the step it stopped at, as its result says); any other graph
job's Dask tasks. Then the elapsed time, the dashboard link (once) and the state the job ended
in. It draws on stderr, so stdout carries only the summary (or the ``--json`` document).
"""
from __future__ import annotations

import json
import threading

from rich.console import Console, Group
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

from tensorvm.scheduler_ext.job_record import map_reduce_progress

POLL_S = 0.5
BAR = 30
SHOWN_LINES = 20  # key/value lines of a result printed; the rest: "N more: pass --output"
MAX_RESULT_CHARS = 2000


def _bytes(n: float) -> str:
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if abs(n) < 1000 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} TB"


def _count(n: float) -> str:
    for unit in ("", "k", "M", "G"):
        if abs(n) < 1000 or unit == "G":
            return f"{n:.0f}{unit}" if not unit else f"{n:.1f}{unit}"
        n /= 1000
    return f"{n:.1f}G"


def _bar(table, label: str, done: int, total: int, text: str) -> None:
    table.add_row(label, ProgressBar(total=max(total, 1), completed=min(done, total),
                                     width=BAR), text)


def _mr_rows(table, status: dict) -> None:
    """A map-reduce job in its own terms: splits and map tasks, reducers, records and bytes
    per second (from the steps' counters)."""
    mr = status["mr"]
    # the running step's first stage is its maps, its last the reducers: counted as the
    # dashboard page counts them (one rule: scheduler_ext.job_record.map_reduce_progress)
    stages = [s for d in status.get("devices", []) for s in d["stages"]]
    got = map_reduce_progress(mr, stages, "running" if mr.get("running") else "done") or \
        {k: [0, int(mr.get(k) or 0)] for k in ("splits", "map_tasks", "reducers")}
    (sd, splits), (md, maps), (rd, reducers) = got["splits"], got["map_tasks"], got["reducers"]
    steps = mr.get("steps", 0)
    prefix = f"step {steps + 1 if mr.get('running') else steps}  " if steps > 1 or \
        (steps and mr.get("running")) else ""
    _bar(table, "splits", sd, splits,
         f"{sd}/{splits}  map tasks {md}/{maps}  {prefix}({mr.get('job', '')})")
    _bar(table, "reducers", rd, reducers, f"{rd}/{reducers}")
    if mr.get("t_last"):
        dt = max(mr["t_last"] - mr["t_first"], 1e-3)
        table.add_row("read", Text(f"{mr.get('records', 0):,} records  "
                                   f"{_bytes(mr.get('bytes', 0))}"),
                      f"{_count(mr.get('records', 0) / dt)} records/s  "
                      f"{_bytes(mr.get('bytes', 0) / dt)}/s")


def _final_step(result) -> int | None:
    if isinstance(result, dict) and isinstance(result.get("global_step"), (int, float)):
        return int(result["global_step"])
    return None


def render(name: str, status: dict, dashboard: str | None, final: dict | None = None) -> Group:
    """One frame of the display for ``status`` (see :meth:`JobRun.status`); ``final``
    (``{"state", "result"}``) once the job has ended: its steps as the result says."""
    table = Table.grid(padding=(0, 1))
    table.add_column(justify="right", style="bold")
    table.add_column()
    table.add_column()
    m = status.get("local_metrics") or {}
    gs = _final_step((final or {}).get("result"))
    step = gs if gs is not None else m.get("step")
    if status.get("mr"):
        _mr_rows(table, status)
    elif step is None:
        prog = status.get("progress") or {}
        if prog.get("total"):  # a graph job: its Dask tasks (no map/reduce labels)
            _bar(table, "tasks", prog["done"], prog["total"], f"{prog['done']}/{prog['total']}")
    if step is not None:
        total = m.get("total_steps")
        bar = ProgressBar(total=total, completed=min(step, total), width=BAR) if total \
            else Text("")
        rate = (status.get("metrics") or {}).get("steps_per_s")
        extra = [f"{k} {v:.5g}" for k, v in m.items()
                 if k not in ("step", "total_steps", "time") and isinstance(v, float)]
        if rate:
            extra.append(f"{rate:.3g} steps/s")
        table.add_row("step", bar, f"{step}{'/' + str(total) if total else ''}  "
                      + "  ".join(extra))
    header = Text.assemble(("tensorvm ", "bold"), (name, "bold cyan"),
                           f"  {status.get('elapsed', 0.0):.1f} s")
    parts = [header, table]
    if dashboard:
        parts.append(Text(f"dashboard: {dashboard}", style="dim"))
    if final is not None:
        parts.append(_end_line(final, step, m.get("total_steps")))
    return Group(*parts)


def _end_line(final: dict, step, total) -> Text:
    """The state the job ended in (for training: the step it stopped at)."""
    state = final.get("state", "done")
    style = "green" if state == "done" else "red"
    text = state
    if step is not None and total:
        result = final.get("result") or {}
        if step < total:
            text += f": stopped at step {step} of {total}"
            if isinstance(result, dict) and result.get("ok") and "target_loss" in result:
                text += " (target reached)"
        else:
            text += f": {step}/{total} steps"
    return Text(text, style=style)


class LiveDisplay:
    """Refreshes :func:`render` of ``run.status()`` on ``console`` until stopped."""

    def __init__(self, run, console: Console):
        self.run, self.console = run, console
        self._stop = threading.Event()
        self._thread = None
        self._live = None

    def __enter__(self):
        from rich.live import Live
        self._live = Live(self._frame(), console=self.console, refresh_per_second=4,
                          transient=False)
        self._live.__enter__()
        self._thread = threading.Thread(target=self._loop, name="tensorvm-display",
                                        daemon=True)
        self._thread.start()
        return self

    def _frame(self, final: dict | None = None):
        return render(self.run.spec.name, self.run.status(), self.run.dashboard, final)

    def _loop(self):
        while not self._stop.wait(POLL_S):
            try:
                self._live.update(self._frame())
            except Exception:  # noqa: BLE001 - a missed frame is not an error
                continue

    def __exit__(self, *exc):
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        state = "done" if exc[0] is None else \
            "interrupted" if issubclass(exc[0], KeyboardInterrupt) else "failed"
        try:
            self._live.update(self._frame({"state": state, "result": self.run.result}))
        except Exception:  # noqa: BLE001 - the cluster may be gone (Ctrl-C)
            pass
        self._live.__exit__(*exc)
        return False


def print_summary(summary: dict, console: Console) -> None:
    """The end-of-job summary: state, time, counters, output, metrics, result."""
    state = summary["state"]
    style = "green" if state == "done" else "red"
    console.print(Text.assemble((f"{summary['job']} ", "bold"), (state, style),
                                f" in {summary['seconds']:.1f} s  (job {summary['id']})"))
    if summary.get("counters"):
        t = Table(title="counters", show_header=False, title_justify="left")
        for k, v in sorted(summary["counters"].items()):
            t.add_row(k, str(v))
        console.print(t)
    if summary.get("output"):
        console.print(f"output: {summary['output']}")
    if summary.get("dashboard"):
        console.print(f"dashboard: {summary['dashboard']}", highlight=False)
    if summary.get("metrics"):
        console.print("metrics: " + "  ".join(
            f"{k} {v:.6g}" if isinstance(v, float) else f"{k} {v}"
            for k, v in summary["metrics"].items()))
    if summary.get("lines"):  # the job's own short summary (top ranks, centroids...)
        for line in summary["lines"]:
            console.print(line, markup=False, highlight=False, soft_wrap=True)
    elif "result_total" in summary:  # key/value pairs: the first lines, and how to get all
        items = list(summary["result"].items())[:SHOWN_LINES]
        for k, v in items:  # as the part files hold them: key<TAB>value
            _raw_line(console, f"{k}\t{_value_text(v)}")
        more = summary["result_total"] - len(items)
        if more > 0:
            console.print(f"{more} more: pass --output URL to write all "
                          f"{summary['result_total']}", markup=False, highlight=False)
    elif "result" in summary:
        text = json.dumps(summary["result"])
        if len(text) > MAX_RESULT_CHARS:  # never cut silently
            text = text[:MAX_RESULT_CHARS] + f" ... ({len(text) - MAX_RESULT_CHARS} more " \
                "characters: pass --json for all of it)"
        console.print("result: " + text, markup=False, highlight=False, soft_wrap=True)


def _raw_line(console: Console, line: str) -> None:
    """``line`` as is (rich would expand its tabs to spaces)."""
    if console.record:
        console.print(line, markup=False, highlight=False, soft_wrap=True)
        return
    console.file.write(line + "\n")
    console.file.flush()


def _value_text(v) -> str:
    if isinstance(v, list):
        return ",".join(map(str, v))
    return str(v)
