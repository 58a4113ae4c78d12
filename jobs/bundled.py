"""Which jobs ``tensorvm run`` knows: the bundled jobs by name, and user job files.

A bundled job is a plain function with typed keyword parameters in its own module; the table
below names it (``name -> "module:function"``). A user's job file defines one function
decorated with ``@tensorvm.job`` (``file.py:function`` picks one of several).

>>> spec = resolve("wordcount")
>>> spec.name, [p.name for p in spec.params][:3]
('wordcount', ['input', 'output', 'num_reducers'])
"""
from __future__ import annotations

import importlib
import importlib.util
import inspect
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass

from ..job_api import option_parameters

BUNDLED: dict[str, str] = {
    "wordcount": "tensorvm.jobs.wordcount:wordcount",
    "grep": "tensorvm.jobs.grep:grep",
    "index": "tensorvm.jobs.index:inverted_index",
    "teragen": "tensorvm.jobs.sort:teragen",
    "terasort": "tensorvm.jobs.sort:terasort",
    "teravalidate": "tensorvm.jobs.sort:teravalidate",
    "join": "tensorvm.jobs.join:join",
    "kmeans": "tensorvm.jobs.kmeans:kmeans",
    "pagerank": "tensorvm.jobs.pagerank:pagerank",
    "ridge": "tensorvm.jobs.demo:ridge",
    "ridge-ps": "tensorvm.jobs.ridge:ridge",
    "logreg": "tensorvm.jobs.logreg:logreg",
    "embedding": "tensorvm.jobs.embedding:embedding",
}
"""Bundled job name -> ``"module:function"``."""

RESERVED = ("session", "cluster")
"""Parameters the runner fills in itself (never command-line options)."""


class JobNotFound(LookupError):
    """An unknown job name or a job file without a ``@tensorvm.job`` function."""


class JobLoadError(JobNotFound):
    """A job file that exists but does not import (a syntax error, a failing import...)."""


@dataclass(frozen=True)
class JobSpec:
    name: str
    fn: Callable
    source: str  # "module:function" or "path.py:function"

    @property
    def params(self) -> list[inspect.Parameter]:
        """The parameters that become options."""
        return option_parameters(self.fn, RESERVED)

    @property
    def takes_session(self) -> bool:
        return "session" in inspect.signature(self.fn).parameters

    @property
    def summary(self) -> str:
        """The docstring's first sentence, on one line."""
        para = (inspect.getdoc(self.fn) or "").strip().split("\n\n")[0]
        text = " ".join(para.split()).replace("``", "")
        return text if len(text) <= 100 else text[:97] + "..."


def bundled() -> list[JobSpec]:
    """Every bundled job whose module imports (a broken one is left out of the list)."""
    out = []
    for name in sorted(BUNDLED):
        try:
            out.append(resolve(name))
        except JobNotFound:
            continue
    return out


def resolve(job: str) -> JobSpec:
    """A bundled job's name, ``path/to/job.py`` or ``path/to/job.py:function``."""
    if job in BUNDLED:
        mod_name, _, fn_name = BUNDLED[job].partition(":")
        try:
            fn = getattr(importlib.import_module(mod_name), fn_name)
        except (ImportError, AttributeError) as exc:
            raise JobNotFound(f"bundled job {job!r} cannot be loaded ({exc})") from exc
        return JobSpec(job, fn, BUNDLED[job])
    path, _, fn_name = job.partition(".py:") if ".py:" in job else (job, "", "")
    if fn_name:
        path += ".py"
    if not path.endswith(".py"):
        raise JobNotFound(f"no job {job!r}: not a bundled job ({', '.join(sorted(BUNDLED))})"
                          " nor a .py file")
    if not os.path.isfile(path):
        raise JobNotFound(f"job file {path} does not exist")
    module = load_file(path)
    from tensorvm.job_api import JobFunction
    found = {v.name: v for v in vars(module).values() if isinstance(v, JobFunction)}
    if fn_name:
        found = {k: v for k, v in found.items() if k == fn_name or v.fn.__name__ == fn_name}
    if len(found) != 1:
        what = "no" if not found else f"{len(found)} ({', '.join(sorted(found))})"
        hint = "" if not found else "; pick one with FILE.py:FUNCTION"
        raise JobNotFound(f"{path} defines {what} @tensorvm.job function"
                          f"{' named ' + fn_name if fn_name else ''}{hint}")
    (name, fn), = found.items()
    return JobSpec(name, fn.fn, f"{path}:{fn.fn.__name__}")


def load_file(path: str):
    """Import a job file as a module whose functions are shipped to workers by value
    (workers cannot import the user's file)."""
    import cloudpickle
    name = "tensorvm_job_" + "".join(c if c.isalnum() else "_"
                                     for c in os.path.splitext(os.path.basename(path))[0])
    spec = importlib.util.spec_from_file_location(name, os.path.abspath(path))
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # noqa: BLE001 - the user's file: say what broke, in one line
        sys.modules.pop(name, None)
        msg = " ".join(str(exc).split()) or "(no message)"
        raise JobLoadError(f"cannot load job file {path}: {type(exc).__name__}: {msg}") \
            from exc
    cloudpickle.register_pickle_by_value(module)
    return module
