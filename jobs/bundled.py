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

from ..runtime.job_api import option_parameters

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

SUMMARIES: dict[str, str] = {
    "embedding": "Matrix factorisation of ratings with a sparse item-embedding table on 2 PS "
                 "tasks, trained asynchronously.",
    "grep": "The lines of text files that match an RE2 pattern, with their counts.",
    "index": "An inverted index: each word of JSON-lines documents with the sorted ids of the "
             "documents that hold it.",
    "join": "An inner join of two CSV files (with headers) on an integer key column.",
    "kmeans": "k-means clustering (Lloyd's algorithm) of the rows of .npy float64 point files.",
    "logreg": "Logistic regression trained with 1 PS and N workers until its held-out log-loss "
              "is within a tolerance of the true model's.",
    "pagerank": "PageRank of the nodes of an edge list stored as .npy int64 [e, 2] files.",
    "ridge": "Ridge regression in-graph (closed form) and by gradient descent, checked against "
             "NumPy.",
    "ridge-ps": "Ridge regression trained with 1 PS and N workers, checked against the closed "
                "form.",
    "teragen": "TeraSort's input: 100-byte records (10 random key bytes, 90 payload bytes) in "
               "files gen-NNNNN under a folder.",
    "terasort": "Sort 100-byte records by their 10-byte keys into part files in total order "
                "(TeraSort).",
    "teravalidate": "Check a TeraSort output: every part file sorted, the files in order, and "
                    "the record count and checksum of the input.",
    "wordcount": "Count the words of text files (word<TAB>count lines).",
}
"""One whole sentence per bundled job, for ``tensorvm jobs``."""

TASKS: dict[str, tuple[str, ...]] = {
    **{name: ("worker",) for name in ("wordcount", "grep", "index", "terasort", "join",
                                      "kmeans", "pagerank", "teragen", "teravalidate")},
    **{name: ("ps", "worker") for name in ("ridge", "ridge-ps", "logreg", "embedding")},
}
"""The ``--cluster`` task names each bundled job places work on (it needs all of them)."""

STANDARD_TASKS = ("chief", "worker", "ps", "evaluator")
"""TF's task names: accepted in any job's ``--cluster`` (a task a job does not use idles)."""

OUTPUT_PARAMS: dict[str, str] = {"teragen": "url"}
"""The parameter naming a bundled job's output folder, where it is not ``output``."""

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
    def bundled(self) -> bool:
        return BUNDLED.get(self.name) == self.source

    @property
    def summary(self) -> str:
        """One whole sentence: a bundled job's from :data:`SUMMARIES`, else the docstring's
        first sentence (never cut mid-phrase)."""
        if self.bundled and self.name in SUMMARIES:
            return SUMMARIES[self.name]
        return first_sentence(inspect.getdoc(self.fn) or "")


def first_sentence(doc: str) -> str:
    """The first sentence of a docstring's first paragraph, on one line, without RST markup.

    >>> first_sentence("Count ``words``. Then more.\\n\\nArgs: ...")
    'Count words.'
    """
    para = " ".join(doc.strip().split("\n\n")[0].split()).replace("``", "")
    for i, ch in enumerate(para):
        if ch in ".!?" and (i + 1 == len(para) or para[i + 1] == " "):
            return para[:i + 1]
    return para


def suggest(name: str, choices) -> str:
    """``"; did you mean 'x'?"`` for the closest of ``choices`` (difflib), else ``""``."""
    import difflib
    close = difflib.get_close_matches(name, list(choices), n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""


def check_cluster(spec: JobSpec, cluster: dict) -> None:
    """``ValueError`` (one line) if ``--cluster``'s task names cannot run ``spec``: a name
    that is neither TF's nor one the job uses (with the closest known name), or a bundled job's
    name missing. A user's job may use its own names; only a near-miss of TF's is refused."""
    uses = TASKS.get(spec.name, ()) if spec.bundled else ()
    known = tuple(dict.fromkeys(uses + STANDARD_TASKS))
    for name in cluster:
        if name in known:
            continue
        hint = suggest(name, known)
        if spec.bundled or hint:
            what = f"job {spec.name} uses {', '.join(uses)}" if uses else \
                f"TF's are {', '.join(STANDARD_TASKS)}"
            raise ValueError(f"--cluster: unknown task name {name!r}{hint or ''} ({what})")
    missing = [n for n in uses if n not in cluster]
    if missing:
        example = ",".join(f"{n}={1 if n == 'ps' else 2}" for n in uses)
        raise ValueError(f"--cluster: job {spec.name} needs task name "
                         f"{' and '.join(repr(m) for m in missing)} (e.g. --cluster {example})")


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
        hint = suggest(job, BUNDLED)
        raise JobNotFound(f"no job {job!r}{hint}" if hint else
                          f"no job {job!r}: not a bundled job ({', '.join(sorted(BUNDLED))})"
                          " nor a .py file")
    if not os.path.isfile(path):
        raise JobNotFound(f"job file {path} does not exist")
    module = load_file(path)
    from tensorvm.runtime.job_api import JobFunction
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


NPY_INPUTS: dict[str, str] = {
    "pagerank": "pagerank reads .npy files of int64 [e, 2] edges (src, dst)",
    "kmeans": "kmeans reads .npy files of float64 [n, d] points",
}
"""Bundled jobs whose ``--input`` must be ``.npy`` files, and what they hold."""


def preflight(spec: JobSpec, kw: dict) -> None:
    """Checks of a job's arguments that need no cluster (``ValueError``, one line, exit 2):
    an output folder that exists without ``--overwrite``; an input that is not in the
    job's format. Run before any cluster starts."""
    from tensorvm.storage import fsio
    out_param = OUTPUT_PARAMS.get(spec.name, "output") if spec.bundled else "output"
    out = kw.get(out_param)
    if isinstance(out, str) and out and "overwrite" in kw and not kw["overwrite"]:
        fs, path = fsio.to_fs(out)
        path = path.rstrip("/")
        try:
            entries = [p for p in fs.ls(path, detail=False)
                       if p.rstrip("/").rsplit("/", 1)[-1] != "_temporary"] \
                if fs.isdir(path) else ([path] if fs.exists(path) else [])
        except (FileNotFoundError, NotADirectoryError):
            entries = []
        if entries:
            flag = "--" + out_param.replace("_", "-")
            raise ValueError(f"{flag} {out}: output folder already exists (add --overwrite "
                             "to replace it)")
    what = NPY_INPUTS.get(spec.name) if spec.bundled else None
    if what and isinstance(kw.get("input"), str):
        for url in _some_files(kw["input"]):
            with fsio.to_fs(url)[0].open(fsio.to_fs(url)[1], "rb") as f:
                magic = f.read(6)
            if magic != b"\x93NUMPY":
                raise ValueError(
                    f"{what}; {url} is not one (a text edge list or table: convert it with "
                    "np.save(PATH, np.loadtxt(TEXT)) and pass the .npy)")


def _some_files(url: str, most: int = 3) -> list[str]:
    """Up to ``most`` input files of a URL, glob or folder (none if it does not exist:
    the job's own missing-input error says so)."""
    from fsspec.core import has_magic

    from tensorvm.storage import fsio
    fs, path = fsio.to_fs(url)
    try:
        if has_magic(path):
            files = [p for p in sorted(fs.glob(path)) if not fs.isdir(p)]
        elif fs.isdir(path):
            root = path.rstrip("/")
            files = sorted(p for p in fs.find(root) if not any(
                part[:1] in "._" for part in p[len(root):].split("/") if part))
        else:
            files = [path] if fs.exists(path) else []
    except FileNotFoundError:
        files = []
    return [fs.unstrip_protocol(p) for p in files[:most]]
