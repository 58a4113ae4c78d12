"""Word count: ``word<TAB>count`` lines, one part file per reducer.

The map is one tensor op over a batch of lines (``tv.strings.split``: Arrow's whitespace
split); the combiner counts each split group's words (Arrow's hash ``value_counts``), so what
crosses the network is one (word, count) table per map task and reducer.

>>> import fsspec
>>> fsspec.filesystem("memory").pipe("/tvm-doc-wc/a.txt", b"the cat\\nthe hat\\n")
>>> wordcount("memory://tvm-doc-wc/a.txt").to_dict()
{'cat': 1, 'hat': 1, 'the': 2}

``python -m tensorvm.jobs.wordcount --input 'file:///data/*.txt' --output file:///out/wc``
"""
from __future__ import annotations

import click

import tensorvm as tv
import tensorvm.mapreduce as mr
from tensorvm import storage

from ._common import cluster_option, report, run_job


def wordcount_job(input: str, output: str | None = None, num_reducers: int | None = None,
                  split_size: int = storage.DEFAULT_SPLIT_SIZE, map_tasks: int | None = None,
                  overwrite: bool = False) -> mr.Job:
    """The word-count job (no output: the counts come back in the result)."""
    return mr.Job(
        input=mr.text(input, split_size=split_size),
        map=lambda lines: mr.emit(tv.strings.split(lines), 1),
        combine="sum", reduce="sum", partition=mr.hash_partition,
        num_reducers=num_reducers, map_tasks=map_tasks, name="wordcount",
        output=mr.text_output(output, overwrite=overwrite) if output else None)


def wordcount(input: str, output: str | None = None, num_reducers: int | None = None,
              split_size: int = storage.DEFAULT_SPLIT_SIZE, overwrite: bool = False,
              session=None, cluster=None) -> mr.Result:
    """Count the words of the text files ``input`` (a glob, folder or list of URLs)."""
    return run_job(wordcount_job(input, output, num_reducers, split_size,
                                 overwrite=overwrite), session, cluster)


@click.command()
@click.option("--input", "input_", required=True, help="Text files: a URL, glob or folder.")
@click.option("--output", required=True, help="Output folder URL (committed, with _SUCCESS).")
@click.option("--num-reducers", type=click.IntRange(min=1), default=None,
              help="Reduce tasks (default: sized to the input and the workers' memory).")
@click.option("--overwrite", is_flag=True, help="Replace a committed output.")
@cluster_option
def main(input_, output, num_reducers, overwrite, cluster, verbose):
    """Count words: word<TAB>count lines."""
    report(wordcount(input_, output, num_reducers, overwrite=overwrite, cluster=cluster),
           verbose)


if __name__ == "__main__":
    main()
