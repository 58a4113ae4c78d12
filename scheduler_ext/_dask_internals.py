"""The two places where the tensorvm plugin reaches into Dask beyond its public plugin API,
kept here so they are easy to find when Dask changes (CONVENTIONS: "one wrapper module says
why"). Both are best effort: without them the plugin still records jobs.

* Adding routes to a *running* scheduler's HTTP server: Dask reads
  ``distributed.scheduler.http.routes`` only when the scheduler is built, but a plugin
  registered by a client (or a ``--preload``) arrives later; Tornado's
  ``Application.add_handlers`` on ``Scheduler.http_application`` is the way in.
* The dashboard's navigation bar lists ``pages`` from a memoized dict that Dask's Bokeh
  application renders; appending ``tensorvm`` to it gives every Dask page a tensorvm tab.
"""
from __future__ import annotations

import logging
import weakref

logger = logging.getLogger("tensorvm")
_SERVED: weakref.WeakSet = weakref.WeakSet()  # schedulers given the routes by add_routes


def add_routes(scheduler, module: str = "tensorvm.scheduler_ext.http") -> bool:
    """Serve ``module.routes`` on ``scheduler``'s dashboard server; False if it has none."""
    app = getattr(scheduler, "http_application", None)
    if app is None:
        return False
    from distributed.http.utils import get_handlers
    if scheduler in _SERVED or module in _configured_route_modules():
        return True  # already served (a restarted plugin, or Dask's routes config)
    app.add_handlers(r".*$", get_handlers(server=scheduler, modules=[module], prefix="/"))
    _SERVED.add(scheduler)
    return True


def _configured_route_modules() -> list:
    import dask
    return list(dask.config.get("distributed.scheduler.http.routes", []) or [])


def add_nav_tab(scheduler) -> None:
    """Add ``tensorvm`` to the Dask dashboard's navigation bar (skipped quietly when this
    Dask renders its pages differently)."""
    try:
        from distributed.dashboard.scheduler import template_variables
        pages = template_variables(scheduler)["pages"]
        if "tensorvm" not in pages:
            pages.append("tensorvm")
    except Exception:
        logger.debug("tensorvm: no dashboard tab", exc_info=True)


def nav_pages(scheduler, default: tuple) -> list:
    """The pages of Dask's navigation bar on ``scheduler`` (``status``, ``workers``, ...,
    tensorvm's own left out), so the tensorvm page links to the same ones; ``default`` when
    this Dask renders its pages differently."""
    try:
        from distributed.dashboard.scheduler import template_variables
        pages = [str(p) for p in template_variables(scheduler)["pages"] if p != "tensorvm"]
        return pages or list(default)
    except Exception:
        logger.debug("tensorvm: Dask's navigation not found", exc_info=True)
        return list(default)
