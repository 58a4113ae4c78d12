"""The job timeline (a Bokeh chart of tasks per worker over time, Spark's event timeline), its
Chrome-trace download, the past-jobs table, and ``tensorvm ui``: a small Tornado server of
the job pages from a history URL when no cluster is up (Spark's History Server).

The live dashboard (:mod:`tensorvm.scheduler_ext.http`) and the history server render with
the same functions (:mod:`tensorvm.scheduler_ext.page` for the job, this module for the
timeline), so a job's page after its cluster is gone reads as it did while it ran.

The chart is a Bokeh document embedded with ``bokeh.embed.json_item`` and drawn by BokehJS,
loaded (unless the page's metric charts loaded it) from ``<base>/static/bokeh.min.js``: the
installed ``bokeh`` package's own file, on the dashboard (:mod:`tensorvm.scheduler_ext.http`)
and in ``tensorvm ui`` alike, so the JS and the Python that made the document are one version
and no page reaches the internet. (Dask's Bokeh server serves the same file at
``/static/js/bokeh.min.js``; the history server has no Dask.) It sits outside the page's
refreshed part; while the job runs it is redrawn when more tasks have ended.

>>> html = timeline_section("/tensorvm", 'a"<b', live=False)
>>> 'a"<b' in html, "a%22%3Cb/trace.json" in html
(False, True)
"""
from __future__ import annotations

import json
import logging
from html import escape
from urllib.parse import quote

from . import page
from .events import chrome_trace

logger = logging.getLogger("tensorvm")
MAX_PAST_ROWS = 50  # past jobs listed on a page (newest first)
_PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf",
            "#bcbd22")
_SEND, _ERRED = "#9db4d0", "#d62728"


def timeline_section(base: str, job_id: str, live: bool) -> str:
    """The timeline's place on a job page: the chart (filled by script from
    ``timeline.json``), the trace download link; redrawn every 2 s while ``live``."""
    api = f"{base}/api/jobs/{quote(job_id, safe='')}"
    script_args = (page._js_str(api + "/timeline.json"), _live(live),
                   page._js_str(f"{base}/static/bokeh.min.js"))
    return (f"<section id='timeline-section'><h2>Timeline</h2>"
            f"<p class='muted'><span id='timeline-note'></span> "
            f"<a id='trace-link' href='{escape(api)}/trace.json' download>trace.json</a> "
            "(Chrome trace: chrome://tracing, ui.perfetto.dev)</p>"
            "<div id='timeline' style='width:1100px;min-height:60px'></div></section>"
            f"<script>{_TIMELINE_JS % script_args}</script>")


def _live(live: bool) -> str:
    return "true" if live else "false"


_TIMELINE_JS = """
(function(){var url=%s,live=%s,js=%s,n=-1;
function draw(){fetch(url,{cache:"no-store"}).then(function(r){return r.ok?r.json():null})
.then(function(d){if(!d)return;document.getElementById("timeline-note").textContent=d.note;
if(d.n!==n&&d.item&&window.Bokeh){n=d.n;var el=document.getElementById("timeline");
el.innerHTML="";Bokeh.embed.embed_item(d.item,"timeline");el.dataset.tasks=d.n}
if(live&&d.state==="running")setTimeout(draw,2000)}).catch(function(){
if(live)setTimeout(draw,5000)})}
if(window.Bokeh){draw()}else{var s=document.createElement("script");s.src=js;
s.onload=draw;document.head.appendChild(s)}})();
"""


def timeline_payload(job: dict, tasks: list[dict], dropped: int, names: dict) -> dict:
    """What ``timeline.json`` answers: ``{"n": tasks drawn, "state", "note", "item"}``
    (``item``: the chart's ``json_item``, None with no task yet)."""
    note = f"{len(tasks)} task{'s' if len(tasks) != 1 else ''} per worker over time"
    if dropped:
        note += f" (the first {len(tasks)}; {dropped} more not kept)"
    if not tasks:
        note = "No task has ended on the Dask plane yet (direct-plane steps are not timed)."
    item = timeline_item(job, tasks, names) if tasks else None
    return {"n": len(tasks), "state": job.get("state"), "note": note, "item": item}


def timeline_item(job: dict, tasks: list[dict], names: dict) -> dict:
    """The Bokeh chart: one row per worker thread, one bar per task from its start to its
    stop (seconds since the job started), coloured by stage (Sends pale, failures red)."""
    from bokeh.embed import json_item
    from bokeh.models import ColumnDataSource, HoverTool
    from bokeh.plotting import figure
    t0 = job.get("started") or min(t["start"] for t in tasks)
    rows, cols = {}, {k: [] for k in ("row", "left", "right", "color", "task", "step",
                                      "device", "worker", "ms", "nbytes", "state")}
    for t in sorted(tasks, key=lambda t: t["start"]):
        worker = t.get("worker") or "?"
        lane = (worker, t.get("thread"))
        if lane not in rows:
            k = sum(1 for w, _ in rows if w == worker) + 1
            rows[lane] = f"{names.get(worker) or worker} · thread {k}"
        colour = _ERRED if t.get("state") == "erred" else _SEND if t.get("send") else \
            _PALETTE[int(t.get("stage") or 0) % len(_PALETTE)]
        for name, v in (("row", rows[lane]), ("left", t["start"] - t0),
                        ("right", max(t["stop"], t["start"] + 1e-4) - t0), ("color", colour),
                        ("task", t["task"]), ("step", str(t.get("step"))),
                        ("device", f"{t['device']}/s{t['stage']}"), ("worker", worker),
                        ("ms", round(1000 * (t["stop"] - t["start"]), 2)),
                        ("nbytes", t.get("nbytes") or 0), ("state", t.get("state"))):
            cols[name].append(v)
    factors = sorted(set(rows.values()), reverse=True)
    fig = figure(y_range=factors, height=70 + 28 * len(factors), width=1100,
                 x_axis_label="seconds since the job started",
                 tools="xpan,xwheel_zoom,box_zoom,reset,save", toolbar_location="above")
    fig.hbar(y="row", left="left", right="right", height=0.7, color="color",
             line_color="#333", line_width=0.3, source=ColumnDataSource(cols, name="tasks"))
    fig.add_tools(HoverTool(tooltips=[("task", "@task"), ("step", "@step"),
                                      ("device/stage", "@device"), ("worker", "@worker"),
                                      ("ms", "@ms"), ("bytes", "@nbytes"), ("", "@state")]))
    fig.ygrid.grid_line_color = None
    fig.x_range.start = 0
    return json_item(fig)


def trace_document(job: dict, tasks: list[dict], names: dict) -> dict:
    """``trace.json``: the job's tasks as a Chrome trace (times from the job's start)."""
    t0 = job.get("started")
    if tasks and t0 is not None:
        t0 = min(t0, min(t["start"] for t in tasks))
    return chrome_trace(tasks, names, t0=t0, job=job)


def past_jobs_table(rows: list[dict], base: str, skip: set | None = None,
                    title: str = "<h2>Past jobs (history)</h2>") -> str:
    """The jobs of the history URL not on this page already (``skip``: their ids), the
    newest :data:`MAX_PAST_ROWS`; ``""`` when there is none."""
    rows = [r for r in rows if r.get("id") not in (skip or set())][:MAX_PAST_ROWS]
    if not rows:
        return ""
    body = "".join(page.job_row(r, base) for r in rows)
    return f"{title}<table id='past-jobs'>{page._HEAD}{body}</table>"


# ---- tensorvm ui: the history server ------------------------------------------------------
def make_app(url: str):
    """The Tornado application of ``tensorvm ui URL``: ``/tensorvm`` (the past jobs),
    ``/tensorvm/job/<id>``, ``/tensorvm/api/jobs[/<id>[/trace.json|/timeline.json]]`` and
    BokehJS at ``/static/``, all from the logs under ``url``."""
    from bokeh.util.paths import bokehjs_path
    from tornado import web

    from .history import HistoryReader
    reader = HistoryReader(url)
    kw = {"reader": reader}
    return web.Application([
        (r"/", web.RedirectHandler, {"url": "/tensorvm"}),
        (r"/tensorvm/?", _ListPage, kw),
        (r"/tensorvm/fragment", _ListFragment, kw),
        (r"/tensorvm/job/([^/]+)", _JobPage, kw),
        (r"/tensorvm/job/([^/]+)/fragment", _JobFragment, kw),
        (r"/tensorvm/api/jobs", _ListJSON, kw),
        (r"/tensorvm/api/jobs/([^/]+)", _JobJSON, kw),
        (r"/tensorvm/api/jobs/([^/]+)/trace.json", _TraceJSON, kw),
        (r"/tensorvm/api/jobs/([^/]+)/timeline.json", _TimelineJSON, kw),
        (r"/tensorvm/static/([\w.-]+)", web.StaticFileHandler,
         {"path": str(bokehjs_path() / "js")}),
    ])


def _handler_base():
    from tornado import web

    class Base(web.RequestHandler):
        base = "/tensorvm"

        def initialize(self, reader):
            self.reader = reader

        def send(self, body: str, kind: str = "text/html; charset=utf-8") -> None:
            self.set_header("Content-Type", kind)
            self.set_header("Cache-Control", "no-store")
            self.set_header("X-Content-Type-Options", "nosniff")
            self.finish(body)

        def past(self, job_id: str):
            found = self.reader.job(job_id)
            if found is None:  # plain text: the id comes from the URL
                self.set_status(404)
                self.send(f"no tensorvm job {job_id!r} under {self.reader.url}",
                          "text/plain; charset=utf-8")
            return found

        def listing(self) -> str:
            return past_jobs_table(self.reader.jobs(), self.base,
                                   title="<h1>tensorvm jobs (history)</h1>") or \
                f"<h1>tensorvm jobs (history)</h1><p class='muted'>No job log under " \
                f"{escape(self.reader.url)}.</p>"

        def whole(self, title: str, body: str, fragment: str, after: str = "") -> None:
            self.send(page.page(title, body, fragment, self.base, pages=[], after=after))
    return Base


_Base = _handler_base()


class _ListPage(_Base):
    def get(self):
        self.whole("tensorvm history", self.listing(), f"{self.base}/fragment")


class _ListFragment(_Base):
    def get(self):
        self.send(self.listing())


class _JobPage(_Base):
    def get(self, job_id):
        found = self.past(job_id)
        if found:
            job = found["job"]
            self.whole(f"tensorvm: {job.get('name')}", page.job_detail(job, self.base),
                       f"{self.base}/job/{quote(job_id, safe='')}/fragment",
                       after=_metric_charts(job, self.base) +
                       timeline_section(self.base, job_id, live=False))


class _JobFragment(_Base):
    def get(self, job_id):
        found = self.past(job_id)
        if found:
            self.send(page.job_detail(found["job"], self.base))


class _ListJSON(_Base):
    def get(self):
        self.send(json.dumps({"jobs": self.reader.jobs()}), "application/json")


class _JobJSON(_Base):
    def get(self, job_id):
        found = self.past(job_id)
        if found:
            self.send(json.dumps(found["job"]), "application/json")


class _TraceJSON(_Base):
    def get(self, job_id):
        found = self.past(job_id)
        if found:
            doc = trace_document(found["job"], found["tasks"], worker_names(found["job"]))
            self.set_header("Content-Disposition",
                            f'attachment; filename="{_file_safe(job_id)}-trace.json"')
            self.send(json.dumps(doc), "application/json")


class _TimelineJSON(_Base):
    def get(self, job_id):
        found = self.past(job_id)
        if found:
            payload = timeline_payload(found["job"], found["tasks"], found["tasks_dropped"],
                                       worker_names(found["job"]))
            self.send(json.dumps(payload), "application/json")


def _metric_charts(job: dict, base: str) -> str:
    """The job's metric curves as the dashboard draws them (:mod:`.curves`)."""
    try:
        from .curves import metric_charts
        return metric_charts(job, base)
    except Exception:  # noqa: BLE001 - the rest of the page still shows
        logger.debug("tensorvm: no metric charts", exc_info=True)
        return ""


def worker_names(job: dict) -> dict:
    """Worker address -> name, from the job's devices (what a log knows of its workers)."""
    return {d["worker"]: d.get("worker_name") for d in job.get("devices") or ()
            if d.get("worker") and d.get("worker_name")}


def _file_safe(job_id: str) -> str:
    from .history import log_name
    return log_name(job_id)


def serve(url: str, port: int = 0, host: str = "127.0.0.1", ready=None) -> None:
    """Serve the history at ``url`` on ``host:port`` (0: any free port) until interrupted;
    ``ready(address)`` is called with ``http://host:port/tensorvm`` once it listens."""
    import asyncio

    from tornado.httpserver import HTTPServer
    from tornado.netutil import bind_sockets

    async def main():
        sockets = bind_sockets(port, host)
        server = HTTPServer(make_app(url))
        server.add_sockets(sockets)
        bound = sockets[0].getsockname()[1]
        shown = f"[{host}]" if ":" in host else host
        if ready is not None:
            ready(f"http://{shown}:{bound}/tensorvm")
        await asyncio.Event().wait()
    asyncio.run(main())
