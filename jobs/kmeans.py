"""k-means (Lloyd's algorithm) as an iterative map-reduce job: the centroids are a Variable on
``/job:worker/task:0``; each iteration is one step of the same compiled job — every map task
reads the centroids (Send/Recv), assigns its points to the nearest one and emits
``(cluster, [point, 1])``; combiner and reducer sum; the driver divides and assigns.

>>> import fsspec, numpy as np
>>> with fsspec.open("memory://tvm-doc-kmeans/p.npy", "wb") as f:
...     np.save(f, np.r_[np.zeros((5, 2)), np.ones((5, 2)) * 10])
>>> kmeans_from("memory://tvm-doc-kmeans/p.npy", np.array([[1., 1.], [9., 9.]]), 3).tolist()
[[0.0, 0.0], [10.0, 10.0]]
"""
from __future__ import annotations

import click
import numpy as np

import tensorvm as tv
import tensorvm.mapreduce as mr
from tensorvm import storage

from ._common import cluster_option
from .iterate import iterate, session_or_new, write_lines


def first_rows(input: str, k: int) -> np.ndarray:
    """The first ``k`` points of the input (k-means' deterministic initialisation)."""
    rows = []
    for s in storage.splits(input, format="npy"):
        for b in storage.read(s):
            rows.append(np.asarray(b))
            if sum(len(r) for r in rows) >= k:
                return np.concatenate(rows)[:k].astype(np.float64)
    raise tv.errors.InvalidArgumentError(f"k-means: fewer than {k} points in {input}")


def lloyd_reference(points: np.ndarray, init: np.ndarray, iterations: int) -> np.ndarray:
    """Single-process k-means with the same rules (an empty cluster keeps its centroid)."""
    c = init.astype(np.float64).copy()
    for _ in range(iterations):
        idx = np.argmin(((points[:, None, :] - c[None]) ** 2).sum(-1), axis=1)
        for j in range(len(c)):
            if np.any(idx == j):
                c[j] = points[idx == j].mean(0)
    return c


def kmeans(input: str, k: int, iterations: int = 10, num_reducers: int = 1,
           split_size: int = storage.DEFAULT_SPLIT_SIZE, output: str | None = None,
           overwrite: bool = False, session=None) -> np.ndarray:
    """The k centroids of Lloyd's algorithm over .npy points, from the first k points.

    Args:
        input: the points: a URL, glob or folder of .npy files of float64 [n, d].
        k: clusters.
        iterations: Lloyd iterations.
        output: also write the centroids under this folder URL (index<TAB>coordinates
            lines, committed with _SUCCESS).
    """
    if output:
        storage.OutputCommitter(output)._refuse_existing(overwrite)
    c = kmeans_from(input, first_rows(input, k), iterations, num_reducers, split_size,
                    session)
    if output:
        write_lines(output, (f"{i}\t" + " ".join(f"{x:.17g}" for x in row)
                             for i, row in enumerate(c)), overwrite)
    return c


def summary_lines(c: np.ndarray, args: dict) -> list[str]:
    """The CLI's summary: the centroids rounded to 4 significant digits."""
    return [f"{len(c)} centroids ({c.shape[1]} dimensions, rounded):"] + [
        f"  centroid {i}  " + "  ".join(_round4(x) for x in row) for i, row in enumerate(c)]


def _round4(x: float) -> str:
    """4 significant digits, and at most 4 decimals: 5.0012 -> '5.001', 1e-7 -> '0'."""
    text = f"{float(np.round(x, 4)):.4g}"
    return "0" if text in ("-0", "0") else text


kmeans.summary_lines = summary_lines


def kmeans_from(input: str, init: np.ndarray, iterations: int = 10, num_reducers: int = 1,
                split_size: int = storage.DEFAULT_SPLIT_SIZE, session=None) -> np.ndarray:
    """:func:`kmeans` from the given initial centroids ``init`` (``[k, d]``)."""
    init = np.asarray(init, np.float64)
    d = init.shape[1]

    def job(cents):
        def map_fn(points):
            c = cents.value()
            d2 = tv.reduce_sum(tv.square(tv.expand_dims(points, 1) - tv.expand_dims(c, 0)),
                               axis=2)
            ones = tv.ones_like(points[:, :1])
            return mr.emit(tv.argmin(d2, axis=1), tv.concat([points, ones], axis=1))
        return mr.Job(mr.npy(input, tv.float64, split_size, shape=(None, d)), map_fn,
                      combine="sum", reduce="sum", num_reducers=num_reducers, name="kmeans")

    def update(c, res):  # each centroid the mean of its points (an empty cluster keeps it)
        c = c.copy()
        c[np.asarray(res.keys, np.int64)] = res.values[:, :d] / res.values[:, d:]
        return c

    with session_or_new(session) as session:
        return iterate(session, init, "kmeans_centroids", job, update, iterations)


@click.command()
@click.option("--input", "input_", required=True, help=".npy points (float64 [n, d]).")
@click.option("--k", type=click.IntRange(min=1), required=True)
@click.option("--iterations", type=click.IntRange(min=1), default=10, show_default=True)
@cluster_option
def main(input_, k, iterations, cluster, verbose):
    """Print the centroids."""
    session = tv.Session(cluster, graph=tv.Graph(), verbose=False) if cluster else None
    click.echo(np.array2string(kmeans(input_, k, iterations, session=session)))


if __name__ == "__main__":
    main()
