"""``@tv.job``: a function that the ``tensorvm`` command line runs as a batch job.

The function's typed keyword parameters become the job's options (``input: str`` ->
``--input TEXT``, ``num_reducers: int = 2`` -> ``--num-reducers INTEGER``, ``bool`` -> a flag),
its docstring the ``--help`` text. A parameter named ``session`` receives the session the CLI
opened on its cluster (it is also the default session, and its graph the default graph, while
the job runs). Inside a job, ``tv.job.report(step=i, loss=l)`` sends training metrics to the
progress display and the dashboard; outside one it does nothing.

>>> import tensorvm as tv
>>> @tv.job
... def double(x: float = 1.0, session=None):
...     "Double a number."
...     tv.job.report(step=1, total_steps=1, value=2 * x)
...     return 2 * x
>>> double.name, [p.name for p in double.options]
('double', ['x'])
>>> seen = []
>>> with tv.job.reporting(seen.append):
...     double(x=3.0)
6.0
>>> seen
[{'step': 1, 'total_steps': 1, 'value': 6.0}]
"""
from __future__ import annotations

import contextlib
import contextvars
import functools
import inspect
import os
import sys
from collections.abc import Callable
from typing import Any

from .wire_names import TOPIC_JOBS  # the names that cross the wire, in one place

_REPORTER: contextvars.ContextVar = contextvars.ContextVar("tensorvm_job_reporter",
                                                           default=None)
_NAME: contextvars.ContextVar = contextvars.ContextVar("tensorvm_job_name", default=None)
RESERVED = ("session",)


def option_parameters(fn: Callable, reserved=RESERVED) -> list[inspect.Parameter]:
    """``fn``'s keyword-capable parameters other than ``reserved`` ones (the job's options)."""
    return [p for p in inspect.signature(fn).parameters.values()
            if p.name not in reserved and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]


class JobFunction:
    """A function marked with ``@tv.job`` (call it as the function itself)."""

    def __init__(self, fn: Callable, name: str | None = None):
        if not callable(fn):
            raise TypeError(f"@tv.job decorates a function, not {type(fn).__name__}")
        self.fn = fn
        self.name = name or fn.__name__
        functools.update_wrapper(self, fn)

    @property
    def options(self) -> list[inspect.Parameter]:
        """The parameters that become command-line options (all but ``session``)."""
        return option_parameters(self.fn)

    @property
    def takes_session(self) -> bool:
        return "session" in inspect.signature(self.fn).parameters

    def __call__(self, *args, **kwargs):
        return self.fn(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<tv.job {self.name}{inspect.signature(self.fn)}>"


def job(fn: Callable | None = None, *, name: str | None = None):
    """Mark ``fn`` as a batch job (``@tv.job`` or ``@tv.job(name="...")``)."""
    if fn is None:
        return lambda f: JobFunction(f, name)
    return JobFunction(fn, name)


def report(step: int | None = None, **metrics: Any) -> None:
    """Send metrics of the running job (``step``, ``total_steps``, ``loss``, any number) to
    whoever runs it (the CLI: its progress display and the dashboard). A no-op outside a job."""
    reporter = _REPORTER.get()
    if reporter is None:
        return
    msg = {} if step is None else {"step": int(step)}
    for k, v in metrics.items():
        if v is None:
            continue
        if not isinstance(v, (int, float)) and not hasattr(v, "__float__"):
            raise TypeError(f"metric {k}={v!r} is not a number")
        msg[k] = int(v) if k == "total_steps" else float(v)
    reporter(msg)


@contextlib.contextmanager
def reporting(reporter: Callable[[dict], None], name: str | None = None):
    """Within this block, :func:`report` calls ``reporter(metrics_dict)`` and
    :func:`current_name` is ``name``."""
    token, name_token = _REPORTER.set(reporter), _NAME.set(name)
    try:
        yield reporter
    finally:
        _NAME.reset(name_token)
        _REPORTER.reset(token)


def current_name() -> str | None:
    """The name of the job running in this context, else None (a session may name its Dask
    keys after it, so the dashboard's task groups read the job's name).

    >>> with reporting(print, name="wordcount"):
    ...     current_name()
    'wordcount'
    >>> current_name() is None
    True
    """
    return _NAME.get()


job.report = report
job.reporting = reporting
job.current_name = current_name
job.JobFunction = JobFunction


def program_name() -> str:
    """The running program's name: ``python -m pkg`` gives ``pkg``, a script its file name.

    >>> isinstance(program_name(), str) and program_name() != ""
    True
    """
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    if spec is not None and getattr(spec, "name", None):
        name = spec.name
        return name[: -len(".__main__")] if name.endswith(".__main__") else name
    path = getattr(main, "__file__", None) or (sys.argv[0] if sys.argv else "")
    return os.path.basename(path) or "python"


def announce_program(client) -> None:
    """Name a plain program's sessions on the dashboard's tensorvm page after the program
    (``train.py``, not "session g1"): the job registry keeps the name for the client's
    session jobs, which start with their first task. Nothing inside a ``tv.job`` (the CLI
    names those) or on a cluster without the registry (it ignores the message)."""
    if current_name() is not None:
        return
    try:
        client.log_event(TOPIC_JOBS, {"op": "name", "job": client.id, "client": client.id,
                                      "name": program_name()})
    except Exception:  # noqa: BLE001 - never fail a session over the dashboard
        pass

