"""The CLI's live progress display (rich) and end-of-job summary.

While a job runs, :class:`LiveDisplay` polls :meth:`JobRun.status` twice a second and shows
task progress per stage (``map``/``reduce`` for a map-reduce job), training steps with the
loss and steps/s, the elapsed time and the dashboard link. It draws on stderr, so stdout
carries only the summary (or the ``--json`` document).
"""
from __future__ import annotations

import json
import threading

from rich.console import Console, Group
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

POLL_S = 0.5
MAX_STAGE_ROWS = 6  # more stages (an unrolled training step) show as the task total only


def _stage_rows(status: dict) -> list[tuple[str, int, int]]:
    """``(label, done, total)`` per stage over all devices; a two-stage map-reduce job's
    stages read ``map`` and ``reduce``."""
    stages: dict[int, list[int]] = {}
    for d in status.get("devices", []):
        for s in d["stages"]:
            acc = stages.setdefault(s["stage"], [0, 0])
            acc[0] += s["done"]
            acc[1] += s["total"]
    order = sorted(stages)
    mr = bool(status.get("counters")) or len(order) == 2
    names = {order[0]: "map", order[-1]: "reduce"} if mr and len(order) >= 2 else {}
    return [(names.get(k, f"stage {k}"), *stages[k]) for k in order]


def render(name: str, status: dict, dashboard: str | None) -> Group:
    """One frame of the display for ``status`` (see :meth:`JobRun.status`)."""
    table = Table.grid(padding=(0, 1))
    table.add_column(justify="right", style="bold")
    table.add_column()
    table.add_column()
    prog = status.get("progress") or {}
    if prog.get("total"):
        table.add_row("tasks", ProgressBar(total=prog["total"], completed=prog["done"],
                                           width=30), f"{prog['done']}/{prog['total']}")
        rows = _stage_rows(status)
        for label, done, total in rows if len(rows) <= MAX_STAGE_ROWS else ():
            table.add_row(label, ProgressBar(total=max(total, 1), completed=done, width=30),
                          f"{done}/{total}")
    m = status.get("local_metrics") or {}
    if m.get("step") is not None:
        total = m.get("total_steps")
        bar = ProgressBar(total=total, completed=m["step"], width=30) if total else Text("")
        rate = (status.get("metrics") or {}).get("steps_per_s")
        extra = [f"{k} {v:.5g}" for k, v in m.items()
                 if k not in ("step", "total_steps", "time") and isinstance(v, float)]
        if rate:
            extra.append(f"{rate:.3g} steps/s")
        table.add_row("step", bar, f"{m['step']}{'/' + str(total) if total else ''}  "
                      + "  ".join(extra))
    header = Text.assemble(("tensorvm ", "bold"), (name, "bold cyan"),
                           f"  {status.get('elapsed', 0.0):.1f} s")
    parts = [header, table]
    if dashboard:
        parts.append(Text(f"dashboard: {dashboard}", style="dim"))
    return Group(*parts)


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

    def _frame(self):
        return render(self.run.spec.name, self.run.status(), self.run.dashboard)

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
        try:
            self._live.update(self._frame())
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
    if "result" in summary:
        text = json.dumps(summary["result"])
        console.print("result: " + (text if len(text) <= 2000 else text[:2000] + " ..."),
                      markup=False, highlight=False)
