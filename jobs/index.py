"""Inverted index: for each word (lower-cased), the sorted ids of the documents that hold it.
Input: JSON lines ``{"id": <int>, "text": <str>}``; output ``word<TAB>id,id,…``.

>>> import fsspec
>>> fsspec.filesystem("memory").pipe("/tvm-doc-ix/d.jsonl",
...     b'{"id": 1, "text": "A cat"}\\n{"id": 2, "text": "a dog a"}\\n')
>>> inverted_index("memory://tvm-doc-ix/d.jsonl").to_dict()
{'a': [1, 2], 'cat': [1], 'dog': [2]}
"""
from __future__ import annotations

import click

import tensorvm as tv
import tensorvm.mapreduce as mr
from tensorvm import storage

from ._common import cluster_option, report, run_job


def index_job(input: str, output: str | None = None, num_reducers: int | None = None,
              split_size: int = storage.DEFAULT_SPLIT_SIZE, id_column: str = "id",
              text_column: str = "text", overwrite: bool = False) -> mr.Job:
    def map_fn(cols):
        words, rows = tv.strings.split(tv.strings.lower(cols[text_column]))
        return mr.emit(words, tv.gather(cols[id_column], rows))
    return mr.Job(mr.jsonl(input, {id_column: tv.int64, text_column: tv.string}, split_size),
                  map_fn, reduce="collect_set", num_reducers=num_reducers, name="index",
                  output=mr.text_output(output, overwrite=overwrite) if output else None)


def inverted_index(input: str, output: str | None = None, num_reducers: int | None = None,
                   split_size: int = storage.DEFAULT_SPLIT_SIZE, overwrite: bool = False,
                   session=None, cluster=None) -> mr.Result:
    """word -> sorted distinct document ids."""
    return run_job(index_job(input, output, num_reducers, split_size, overwrite=overwrite),
                   session, cluster)


@click.command()
@click.option("--input", "input_", required=True, help='JSON lines {"id": int, "text": str}.')
@click.option("--output", required=True)
@click.option("--num-reducers", type=click.IntRange(min=1), default=None,
              help="Reduce tasks (default: sized to the input and the workers' memory).")
@click.option("--overwrite", is_flag=True)
@cluster_option
def main(input_, output, num_reducers, overwrite, cluster, verbose):
    """word<TAB>doc ids."""
    report(inverted_index(input_, output, num_reducers, overwrite=overwrite, cluster=cluster),
           verbose)


if __name__ == "__main__":
    main()
