"""The tensorvm pages of the Dask dashboard: Tornado routes on the scheduler's own HTTP
server (same port as ``/status``), in the form Dask's ``distributed.scheduler.http.routes``
modules use (``routes = [(url, handler, kwargs)]``).

* ``/tensorvm`` — the jobs; ``/tensorvm/job/<id>`` — one job (graph, devices, counters, loss);
* ``/tensorvm/api/jobs`` and ``/tensorvm/api/jobs/<id>`` — the same as JSON.

The :class:`~tensorvm.scheduler_ext.plugin.TensorvmPlugin` adds these routes when it starts;
listing this module in ``distributed.scheduler.http.routes`` works as well (the pages then say
so until the plugin is installed).
"""
from __future__ import annotations

import json

from distributed.http.utils import RequestHandler

from . import _dask_internals, curves, page

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
            self.page("tensorvm jobs", page.jobs_table(reg.jobs(), self.base),
                      f"{self.base}/fragment")


class JobsFragment(_Base):
    def get(self):
        reg = self.registry()
        if reg is not None:
            self.html(page.jobs_table(reg.jobs(), self.base))


class JobPage(_Base):
    def get(self, job_id):
        reg = self.registry()
        job = reg and self.job_or_404(reg, job_id)
        if job:
            self.page(f"tensorvm: {job['name']}", page.job_detail(job, self.base),
                      f"{self.base}/job/{job_id}/fragment",
                      after=curves.metric_charts(job, self.base))


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


routes: list[tuple] = [
    (r"tensorvm/?", JobsPage, {}),
    (r"tensorvm/fragment", JobsFragment, {}),
    (r"tensorvm/job/([^/]+)", JobPage, {}),
    (r"tensorvm/job/([^/]+)/fragment", JobFragment, {}),
    (r"tensorvm/api/jobs", JobsJSON, {}),
    (r"tensorvm/api/jobs/([^/]+)", JobJSON, {}),
    (r"tensorvm/static/([\w.-]+)", BokehStatic, {}),
]
