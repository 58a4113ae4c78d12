"""The tensorvm pages of the Dask dashboard: Tornado routes on the scheduler's own HTTP
server (same port as ``/status``), in the form Dask's ``distributed.scheduler.http.routes``
modules use (``routes = [(url, handler, kwargs)]``).

* ``/tensorvm`` — the jobs; ``/tensorvm/job/<id>`` — one job (graph, devices, counters, loss);
* ``/tensorvm/api/jobs`` and ``/tensorvm/api/jobs/<id>`` — the same as JSON;
* ``/tensorvm/api/jobs/<id>/trace.json`` (a Chrome trace) and ``.../timeline.json`` (the
  page's timeline chart): the job's task events (:mod:`tensorvm.scheduler_ext.history_ui`).

Jobs no longer on the scheduler are read from the history URL's event logs
(:mod:`tensorvm.scheduler_ext.history`): the list shows them under "Past jobs", and their
pages, JSON and trace are served from the logs.

The :class:`~tensorvm.scheduler_ext.plugin.TensorvmPlugin` adds these routes when it starts;
listing this module in ``distributed.scheduler.http.routes`` works as well (the pages then say
so until the plugin is installed).
"""
from __future__ import annotations

import json

from distributed.http.utils import RequestHandler

from . import _dask_internals, curves, history_ui, page

PLUGIN_NAME = "tensorvm"


class _Base(RequestHandler):
    def registry(self):
        plugin = self.server.plugins.get(PLUGIN_NAME) if self.server else None
        if plugin is None:
            self.set_status(503)
            self.set_header("Content-Type", "text/plain; charset=utf-8")
            self.finish("the tensorvm scheduler plugin is not installed on this scheduler "
                        "(dask scheduler --preload tensorvm.scheduler_ext)")
            return None
        return plugin.registry

    @property
    def base(self) -> str:
        path = self.request.path
        return path[: path.index("/tensorvm")] + "/tensorvm"

    def page(self, title: str, body: str, fragment_url: str, after: str = "") -> None:
        """A whole page with the Dask dashboard's navigation bar."""
        self.html(page.page(title, body, fragment_url, self.base,
                            _dask_internals.nav_pages(self.server, page.NAV_PAGES), after))

    def history(self):
        """The plugin's :class:`~tensorvm.scheduler_ext.history.JobHistory`, or None."""
        plugin = self.server.plugins.get(PLUGIN_NAME) if self.server else None
        return getattr(plugin, "history", None)

    def past(self, job_id: str) -> dict | None:
        """A job from the history URL's logs (``{"job", "tasks", ...}``), or None."""
        hist = self.history()
        try:
            return hist.past_job(job_id) if hist is not None else None
        except Exception:  # noqa: BLE001 - an unreadable history is no job, not a 500
            return None

    def past_jobs(self, reg) -> str:
        """The "Past jobs" table: logged jobs this registry does not have."""
        hist = self.history()
        try:
            rows = hist.past_jobs() if hist is not None else []
        except Exception:  # noqa: BLE001 - the live jobs still show
            rows = []
        return history_ui.past_jobs_table(rows, self.base, set(reg.job_states()))

    def html(self, text: str) -> None:
        self.set_header("Content-Type", "text/html; charset=utf-8")
        self.set_header("Cache-Control", "no-store")
        self.finish(text)

    def json(self, obj) -> None:
        self.set_header("Content-Type", "application/json")
        self.set_header("Cache-Control", "no-store")
        self.finish(json.dumps(obj))

    def job_or_404(self, reg, job_id: str):
        job = reg.job(job_id)
        if job is None:  # a past job: from its event log
            job = (self.past(job_id) or {}).get("job")
        if job is None:  # plain text: the id comes from the URL and must never be markup
            self.set_status(404)
            self.set_header("Content-Type", "text/plain; charset=utf-8")
            self.set_header("X-Content-Type-Options", "nosniff")
            self.finish(f"no tensorvm job {job_id!r}")
        return job


class JobsPage(_Base):
    def get(self):
        reg = self.registry()
        if reg is not None:
            self.page("tensorvm jobs", page.jobs_table(reg.jobs(), self.base) +
                      self.past_jobs(reg), f"{self.base}/fragment")


class JobsFragment(_Base):
    def get(self):
        reg = self.registry()
        if reg is not None:
            self.html(page.jobs_table(reg.jobs(), self.base) + self.past_jobs(reg))


class JobPage(_Base):
    def get(self, job_id):
        reg = self.registry()
        job = reg and self.job_or_404(reg, job_id)
        if job:
            self.page(f"tensorvm: {job['name']}", page.job_detail(job, self.base),
                      f"{self.base}/job/{job_id}/fragment",
                      after=curves.metric_charts(job, self.base) + history_ui.timeline_section(
                          self.base, job_id, live=job["state"] == "running"))


class JobFragment(_Base):
    def get(self, job_id):
        reg = self.registry()
        job = reg and self.job_or_404(reg, job_id)
        if job:
            self.html(page.job_detail(job, self.base))


class JobsJSON(_Base):
    def get(self):
        reg = self.registry()
        if reg is not None:
            self.json({"jobs": reg.jobs()})


class JobJSON(_Base):
    def get(self, job_id):
        reg = self.registry()
        job = reg and self.job_or_404(reg, job_id)
        if job:
            self.json(job)


class BokehStatic(_Base):
    """BokehJS for the metric charts, from the installed bokeh (no CDN: a cluster's
    dashboard may have no internet)."""

    def get(self, name):
        path = curves.bokeh_file(name)
        if path is None:
            self.set_status(404)
            self.set_header("Content-Type", "text/plain; charset=utf-8")
            self.finish("not found")
            return
        with open(path, "rb") as f:
            data = f.read()
        self.set_header("Content-Type", "application/javascript")
        self.set_header("Cache-Control", "public, max-age=86400")
        self.finish(data)


class _TaskEvents(_Base):
    """The task events of a job (live, or from its log) for the trace and the timeline."""

    def events(self, job_id: str):
        reg = self.registry()
        job = reg and self.job_or_404(reg, job_id)
        if not job:
            return None
        hist = self.history()
        found = hist.task_events(job_id) if hist is not None else None
        tasks, dropped = found if found is not None else ([], 0)
        names = dict(reg.workers)
        names.update(history_ui.worker_names(job))
        return job, tasks, dropped, names


class TraceJSON(_TaskEvents):
    def get(self, job_id):
        found = self.events(job_id)
        if found:
            job, tasks, _, names = found
            self.set_header("Content-Disposition", 'attachment; filename="trace.json"')
            self.json(history_ui.trace_document(job, tasks, names))


class TimelineJSON(_TaskEvents):
    def get(self, job_id):
        found = self.events(job_id)
        if found:
            job, tasks, dropped, names = found
            self.json(history_ui.timeline_payload(job, tasks, dropped, names))


routes: list[tuple] = [
    (r"tensorvm/?", JobsPage, {}),
    (r"tensorvm/fragment", JobsFragment, {}),
    (r"tensorvm/job/([^/]+)", JobPage, {}),
    (r"tensorvm/job/([^/]+)/fragment", JobFragment, {}),
    (r"tensorvm/api/jobs", JobsJSON, {}),
    (r"tensorvm/api/jobs/([^/]+)", JobJSON, {}),
    (r"tensorvm/api/jobs/([^/]+)/trace.json", TraceJSON, {}),
    (r"tensorvm/api/jobs/([^/]+)/timeline.json", TimelineJSON, {}),
    (r"tensorvm/static/([\w.-]+)", BokehStatic, {}),
]
