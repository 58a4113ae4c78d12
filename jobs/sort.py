"""TeraSort: a total-order sort of 100-byte records by their first 10 bytes (unsigned), with
teragen (deterministic random records) and teravalidate (Hadoop's checks).

The job samples map-output keys to pick ``R - 1`` boundaries (``mr.range_partition``), sends
each record to the reducer of its key range, and each reducer sorts its range and writes it
raw (``part-r-0000r``): the part files, in order, are globally sorted.

>>> teragen("memory://tvm-doc-sort/in", 1000, files=2)
1000
>>> _ = terasort("memory://tvm-doc-sort/in", "memory://tvm-doc-sort/out", num_reducers=3)
>>> teravalidate("memory://tvm-doc-sort/out", "memory://tvm-doc-sort/in")["ok"]
True
"""
from __future__ import annotations

import click
import fsspec
import numpy as np

import tensorvm.mapreduce as mr
from tensorvm import storage

from ._common import cluster_option, report, run_job

RECORD, KEY = 100, 10


def teragen(url: str, n_records: int, files: int = 8, seed: int = 0,
            overwrite: bool = False) -> int:
    """Write records (10 random key bytes, 90 payload bytes) in files gen-NNNNN under a folder.

    Returns the record count. A folder that exists with anything in it is refused
    (``FileExistsError``) unless ``overwrite``, which empties it first.

    Args:
        url: the folder URL to write (file://, s3://...).
        n_records: 100-byte records to write.
        files: files to spread them over.
        seed: the random seed (the same seed, the same records).
        overwrite: replace the folder's contents.
    """
    fs, path = fsspec.core.url_to_fs(url)
    path = path.rstrip("/")
    if fs.isdir(path) and fs.ls(path, detail=False) or fs.isfile(path):
        if not overwrite:
            raise FileExistsError(f"output folder already exists: {url} (pass "
                                  "overwrite=True to replace it)")
        fs.rm(path, recursive=True)
    fs.makedirs(path, exist_ok=True)
    per = -(-n_records // files)
    for f in range(files):
        n = max(0, min(per, n_records - f * per))
        rng = np.random.default_rng([seed, f])
        recs = rng.integers(0, 256, (n, RECORD), dtype=np.uint8)
        recs[:, KEY:KEY + 8] = np.frombuffer(  # payload starts with the row id, as teragen's
            (np.arange(f * per, f * per + n, dtype=">u8")).tobytes(), np.uint8).reshape(n, 8)
        with fs.open(f"{path}/gen-{f:05d}", "wb") as fh:
            fh.write(recs.tobytes())
    return n_records


def terasort_job(input: str, output: str, num_reducers: int | None = None, sample: int = 10000,
                 split_size: int = storage.DEFAULT_SPLIT_SIZE, map_tasks: int | None = None,
                 overwrite: bool = False) -> mr.Job:
    return mr.Job(mr.records(input, RECORD, split_size),
                  lambda recs: mr.emit(recs[:, :KEY], recs), reduce=None,
                  partition=mr.range_partition(sample=sample), num_reducers=num_reducers,
                  output=mr.records_output(output, overwrite=overwrite), map_tasks=map_tasks,
                  name="terasort")


def terasort(input: str, output: str, num_reducers: int | None = None, sample: int = 10000,
             split_size: int = storage.DEFAULT_SPLIT_SIZE, overwrite: bool = False,
             session=None, cluster=None) -> mr.Result:
    """Sort 100-byte records by their 10-byte keys into part files in total order.

    Args:
        input: the records: a URL, glob or folder of files of 100-byte records (teragen's;
            a folder with _SUCCESS is read as the files it lists).
        output: the folder URL of the sorted part files (part-r-NNNNN, committed with
            _SUCCESS).
        sample: keys sampled to choose the reducers' key ranges.
    """
    return run_job(terasort_job(input, output, num_reducers, sample, split_size,
                                overwrite=overwrite), session, cluster)


def _records(fs, paths) -> np.ndarray:
    data = b"".join(fs.cat(p) for p in paths)
    return np.frombuffer(data, np.uint8).reshape(-1, RECORD)


def _checksum(recs: np.ndarray) -> int:
    """Order-independent: the sum of each record's 64-bit hash (teravalidate's)."""
    from tensorvm.ops.mapreduce.mapreduce_ops import key_hash
    return int(key_hash(recs).sum(dtype=np.uint64))


def teravalidate(output: str, input: str | None = None) -> dict:
    """Hadoop's checks on a sorted output: every part file sorted, the files in order.

    Each file's first key must not be below the previous file's last, and (given ``input``)
    the record count and checksum must match the input's.

    Args:
        output: the folder URL of terasort's output.
        input: the folder URL of its input (to compare counts and checksums).
    """
    fs, path = fsspec.core.url_to_fs(output)
    parts = sorted(p for p in fs.ls(path, detail=False) if p.rsplit("/", 1)[-1].startswith(
        "part-r-"))
    errors, last, n, checksum = [], None, 0, 0
    for p in parts:
        recs = _records(fs, [p])
        keys = np.ascontiguousarray(recs[:, :KEY]).view(f"S{KEY}").ravel()
        if len(keys) and np.any(keys[1:] < keys[:-1]):
            errors.append(f"{p}: not sorted at record {int(np.argmax(keys[1:] < keys[:-1]))}")
        if len(keys) and last is not None and keys[0] < last:
            errors.append(f"{p}: first key below the previous file's last")
        if len(keys):
            last = keys[-1]
        n += len(recs)
        checksum = (checksum + _checksum(recs)) % (1 << 64)
    out = {"records": n, "checksum": checksum, "files": len(parts), "errors": errors}
    if input is not None:
        ifs, ipath = fsspec.core.url_to_fs(input)
        src = [p for p in sorted(ifs.find(ipath)) if not p.rsplit("/", 1)[-1].startswith("_")]
        recs = _records(ifs, src)
        if len(recs) != n:
            errors.append(f"{n} records out, {len(recs)} in")
        if _checksum(recs) != checksum:
            errors.append("checksum differs from the input's")
    out["ok"] = not errors and (fs.exists(f"{path}/_SUCCESS"))
    return out


@click.command()
@click.option("--input", "input_", required=True, help="Folder of 100-byte records.")
@click.option("--output", required=True)
@click.option("--num-reducers", type=click.IntRange(min=1), default=None,
              help="Reduce tasks (default: sized to the input and the workers' memory).")
@click.option("--overwrite", is_flag=True)
@cluster_option
def main(input_, output, num_reducers, overwrite, cluster, verbose):
    """Total-order sort of 100-byte records (TeraSort)."""
    report(terasort(input_, output, num_reducers, overwrite=overwrite, cluster=cluster),
           verbose)


if __name__ == "__main__":
    main()
