"""PageRank by power iteration as an iterative map-reduce job. Edges are ``.npy`` rows
``(src, dst)`` (int64); the ranks live in a Variable on ``/job:worker/task:0``. Per iteration
(one step of the same compiled job) each map task sends ``rank[src] / outdeg[src]`` to ``dst``;
combiner and reducers sum; the driver adds the teleport term and the dangling nodes' mass
(spread evenly) and assigns the new ranks:
``r' = (1 - d) / N + d * (in_sum + dangling / N)``.

>>> import fsspec, numpy as np
>>> edges = np.array([[0, 1], [1, 2], [2, 0], [0, 2]])
>>> with fsspec.open("memory://tvm-doc-pagerank/e.npy", "wb") as f:
...     np.save(f, edges)
>>> r = pagerank("memory://tvm-doc-pagerank/e.npy", iterations=30)
>>> np.allclose(r, pagerank_reference(edges, 3, 30)), round(float(r.sum()), 6)
(True, 1.0)
"""
from __future__ import annotations

import click
import numpy as np

import tensorvm as tv
import tensorvm.mapreduce as mr
from tensorvm import storage

from ._common import cluster_option
from .iterate import iterate, session_or_new, write_lines


def pagerank_reference(edges: np.ndarray, n: int, iterations: int,
                       damping: float = 0.85) -> np.ndarray:
    """Single-process power iteration with the same rules."""
    out = np.bincount(edges[:, 0], minlength=n).astype(np.float64)
    r = np.full(n, 1.0 / n)
    for _ in range(iterations):
        s = np.bincount(edges[:, 1], weights=r[edges[:, 0]] / out[edges[:, 0]], minlength=n)
        r = (1 - damping) / n + damping * (s + r[out == 0].sum() / n)
    return r


def _edges_job(input, split_size, map_fn, reduce, name, num_reducers=1):
    return mr.Job(mr.npy(input, tv.int64, split_size, shape=(None, 2)), map_fn,
                  combine=reduce, reduce=reduce, num_reducers=num_reducers, name=name)


def pagerank(input: str, iterations: int = 20, damping: float = 0.85,
             num_nodes: int | None = None, num_reducers: int = 1,
             split_size: int = storage.DEFAULT_SPLIT_SIZE, output: str | None = None,
             overwrite: bool = False, session=None) -> np.ndarray:
    """Ranks (summing to 1) of the nodes ``0 .. N-1`` of an edge list.

    The edge list is ``.npy`` files of int64 ``[e, 2]`` rows ``(src, dst)`` (a text edge
    list: ``np.save(PATH, np.loadtxt(TEXT, dtype=np.int64))``).

    Args:
        input: the edge list: a URL, glob or folder of .npy files of int64 [e, 2] (src, dst).
        iterations: power iterations.
        damping: the damping factor d (the walk follows a link with probability d).
        num_nodes: nodes (default: the largest node id + 1).
        output: also write every node's rank under this folder URL (node<TAB>rank lines,
            committed with _SUCCESS).
    """
    if output:  # refuse an existing output before any work (as the other jobs do)
        storage.OutputCommitter(output)._refuse_existing(overwrite)
    with session_or_new(session) as session:
        degree = _edges_job(input, split_size, lambda e: mr.emit(e[:, 0], 1), "sum",
                            "pagerank_degree").run(session)
        n = _num_nodes(input, split_size, session) if num_nodes is None else num_nodes
        outdeg = np.zeros(n)
        outdeg[np.asarray(degree.keys, np.int64)] = degree.values
        inv = np.where(outdeg > 0, 1.0 / np.maximum(outdeg, 1), 0.0)

        def job(ranks):
            with session.graph.as_default(), tv.device("/job:worker/task:0"):
                inv_t = tv.constant(inv)

            def map_fn(e):
                src, dst = e[:, 0], e[:, 1]
                return mr.emit(dst, tv.gather(ranks.value(), src) * tv.gather(inv_t, src))
            return _edges_job(input, split_size, map_fn, "sum", "pagerank", num_reducers)

        def update(r, res):  # the teleport term and the dangling nodes' mass, spread evenly
            s = np.zeros(n)
            s[np.asarray(res.keys, np.int64)] = res.values
            return (1 - damping) / n + damping * (s + r[outdeg == 0].sum() / n)

        r = iterate(session, np.full(n, 1.0 / n), "pagerank_ranks", job, update, iterations)
        if output:
            write_lines(output, (f"{i}\t{x:.17g}" for i, x in enumerate(r)), overwrite)
        return r


def _num_nodes(input: str, split_size: int, session) -> int:
    """The largest node id of the edge list + 1 (a map-reduce job of its own)."""
    top = _edges_job(input, split_size, lambda e: mr.emit(
        tv.zeros([1], tv.int64), tv.reshape(tv.reduce_max(e), [1])), "max",
        "pagerank_nodes").run(session)
    return int(top.values.max()) + 1 if len(top.values) else 0


def summary_lines(r: np.ndarray, args: dict, top: int = 10) -> list[str]:
    """The CLI's summary: the ``top`` nodes by rank (all of them: ``--output URL``)."""
    order = np.argsort(-r, kind="stable")[:top]
    head = f"top {len(order)} of {len(r)} nodes by rank" + \
        ("" if args.get("output") else " (all of them: pass --output URL)")
    return [head, "   node  rank"] + [f"{int(i):7d}  {r[i]:.6g}" for i in order]


pagerank.summary_lines = summary_lines


@click.command()
@click.option("--input", "input_", required=True, help=".npy edges (int64 [e, 2]).")
@click.option("--iterations", type=click.IntRange(min=1), default=20, show_default=True)
@click.option("--top", type=click.IntRange(min=1), default=10, show_default=True)
@cluster_option
def main(input_, iterations, top, cluster, verbose):
    """Print the top nodes and their ranks."""
    session = tv.Session(cluster, graph=tv.Graph(), verbose=False) if cluster else None
    r = pagerank(input_, iterations, session=session)
    for i in np.argsort(-r)[:top]:
        click.echo(f"{i}\t{r[i]:.6g}")


if __name__ == "__main__":
    main()
