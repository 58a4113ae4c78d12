"""Iterative map-reduce jobs (k-means, PageRank): the driver's state lives in a Variable on
``/job:worker/task:0`` that every map task reads (Send/Recv); the job is compiled once and each
iteration is one step of it, after which the driver computes the next state from the step's
result and assigns it. Also the one-part-file output such a job writes its state to.

>>> import fsspec, numpy as np, tensorvm.mapreduce as mr
>>> with fsspec.open("memory://tvm-doc-iterate/x.npy", "wb") as f:
...     np.save(f, np.array([1., 2., 3.]))
>>> def job(state):  # each record times the state, summed under key 0
...     return mr.Job(mr.npy("memory://tvm-doc-iterate/x.npy", tv.float64),
...                   lambda x: mr.emit(tv.zeros_like(x, dtype=tv.int64), x * state.value()),
...                   num_reducers=1)
>>> with session_or_new(None) as s:
...     round(float(iterate(s, np.array(1.), "doc_state", job,
...                         lambda x, res: res.values[0] / 10, 2)), 9)
0.36
"""
from __future__ import annotations

import collections
import contextlib
import itertools
from typing import Callable, Iterable, Iterator

import numpy as np

import tensorvm as tv
import tensorvm.mapreduce as mr
from tensorvm import storage

__all__ = ["session_or_new", "iterate", "write_lines"]

_IDS: collections.defaultdict = collections.defaultdict(itertools.count)  # by name prefix


@contextlib.contextmanager
def session_or_new(session) -> Iterator:
    """``session``, or a new in-process session (closed on leaving) when it is None."""
    own = session is None
    session = session or tv.Session(graph=tv.Graph())
    try:
        yield session
    finally:
        if own:
            session.close()


def iterate(session, init: np.ndarray, name: str, make_job: Callable,
            update: Callable[[np.ndarray, mr.Result], np.ndarray],
            iterations: int) -> np.ndarray:
    """Run an iterative job ``iterations`` times; return the last state.

    The state is a float64 Variable (named ``name`` and a number unique in this process)
    initialised to ``init``; ``make_job(state)`` builds the job whose map reads it (built
    and compiled once); after each step ``update(state, result)`` gives the next state.
    """
    init = np.asarray(init, np.float64)
    with session.graph.as_default(), tv.device("/job:worker/task:0"):
        state = tv.Variable(init, name=f"{name}_{next(_IDS[name])}")
        new = tv.placeholder(tv.float64, init.shape)
        assign = state.assign(new)
    step = make_job(state).compile(session)
    session.run(state.initializer)
    x = init.copy()
    for _ in range(iterations):
        x = update(x, step())
        session.run(assign, {new: x})
    return x


def write_lines(output: str, lines: Iterable[str], overwrite: bool = False) -> list[str]:
    """Commit ``lines`` as one text part file under ``output`` (``_SUCCESS`` listing it)."""
    c = storage.OutputCommitter(output)
    c.setup_job(overwrite=overwrite)
    try:
        storage.write_output(c, 0, 0, list(lines), format="text")
        c.commit_task(0, 0)
        return c.commit_job()
    except BaseException:
        c.abort_job()
        raise
