"""Reduce-side (repartition) join of two CSV datasets on an integer key — Hadoop's
MultipleInputs pattern: each input has its own map, which tags its rows (``L`` or ``R``); rows
meet at the reducer of their key, which pairs every left row with every right row of the key
(an inner join, vectorised: no loop over records). Output: ``key<TAB>left<TAB>right`` lines.

>>> import fsspec
>>> fs = fsspec.filesystem("memory")
>>> fs.pipe("/tvm-doc-join/users.csv", b"id,name\\n1,ann\\n2,bob\\n")
>>> fs.pipe("/tvm-doc-join/orders.csv", b"id,item\\n2,tea\\n1,jam\\n2,pen\\n3,cup\\n")
>>> r = join("memory://tvm-doc-join/users.csv", "memory://tvm-doc-join/orders.csv",
...          left_value="name", right_value="item")
>>> sorted(zip(r.keys.tolist(), r.values.tolist()))
[(1, 'ann\\tjam'), (2, 'bob\\tpen'), (2, 'bob\\ttea')]
"""
from __future__ import annotations

import click
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

import tensorvm as tv
import tensorvm.mapreduce as mr
from tensorvm import storage

from ._common import cluster_option, report, run_job


def pair_rows(keys: np.ndarray, values: np.ndarray):
    """The inner join of one reducer's rows: ``keys`` sorted, ``values`` tagged ``L\\t…`` or
    ``R\\t…``. Returns ``(keys, "left\\tright")`` for every left x right pair of a key."""
    vals = pa.array(values, pa.large_string())
    is_left = pc.starts_with(vals, "L\t").to_numpy(zero_copy_only=False)
    payload = pc.utf8_slice_codeunits(vals, 2).to_numpy(zero_copy_only=False)
    lk, lv = keys[is_left], payload[is_left]
    rk, rv = keys[~is_left], payload[~is_left]
    lo, hi = np.searchsorted(lk, rk, "left"), np.searchsorted(lk, rk, "right")
    n = hi - lo  # left rows per right row
    right = np.repeat(np.arange(len(rk)), n)
    left = np.repeat(lo, n) + (np.arange(int(n.sum())) - np.repeat(np.cumsum(n) - n, n))
    joined = pc.binary_join_element_wise(pa.array(lv[left], pa.large_string()),
                                         pa.array(rv[right], pa.large_string()),
                                         pa.scalar("\t", pa.large_string()))
    return rk[right].astype(np.int64), np.asarray(joined.to_numpy(zero_copy_only=False),
                                                  dtype=object)


def join_job(left: str, right: str, output: str | None = None, key: str = "id",
             left_value: str = "value", right_value: str = "value", num_reducers: int | None = None,
             split_size: int = storage.DEFAULT_SPLIT_SIZE, overwrite: bool = False) -> mr.Job:
    def tag(side, column):
        def map_fn(cols):
            return mr.emit(cols[key], tv.string_join([side, cols[column]], separator="\t"))
        return map_fn

    def reduce_fn(keys, values):
        k, v = tv.py_func(pair_rows, [keys, values], [tv.int64, tv.string], stateful=False)
        return mr.emit(k, v)

    cols = {key: tv.int64}
    return mr.Job([mr.csv(left, {**cols, left_value: tv.string}, split_size, header=True),
                   mr.csv(right, {**cols, right_value: tv.string}, split_size, header=True)],
                  [tag("L", left_value), tag("R", right_value)], reduce=reduce_fn,
                  num_reducers=num_reducers, name="join",
                  output=mr.text_output(output, overwrite=overwrite) if output else None)


def join(left: str, right: str, output: str | None = None, key: str = "id",
         left_value: str = "value", right_value: str = "value", num_reducers: int | None = None,
         split_size: int = storage.DEFAULT_SPLIT_SIZE, overwrite: bool = False, session=None,
         cluster=None) -> mr.Result:
    """Inner join of two CSV files (with headers) on the integer column ``key``."""
    return run_job(join_job(left, right, output, key, left_value, right_value, num_reducers,
                            split_size, overwrite), session, cluster)


@click.command()
@click.option("--left", required=True)
@click.option("--right", required=True)
@click.option("--output", required=True)
@click.option("--key", default="id", show_default=True)
@click.option("--left-value", default="value", show_default=True)
@click.option("--right-value", default="value", show_default=True)
@click.option("--overwrite", is_flag=True)
@cluster_option
def main(left, right, output, key, left_value, right_value, overwrite, cluster, verbose):
    """key<TAB>left<TAB>right lines."""
    report(join(left, right, output, key, left_value, right_value, overwrite=overwrite,
                cluster=cluster), verbose)


if __name__ == "__main__":
    main()
