"""``tensorvm.mapreduce``: map-reduce jobs compiled to one tensorvm graph.

Inputs are cut into splits (:mod:`tensorvm.storage`); each split group's map — a tensor function
over a batch of records — runs on a worker device, a combiner shrinks its output, a hash (or, for
a total order, range) partition cuts it into R buckets, bucket r goes by Send/Recv to reducer r,
which merges, groups by key, reduces and writes committed output (``part-r-00000``…,
``_SUCCESS``). One ``Session.run`` runs the whole job; counters come back with the result.

Modules: :mod:`.api` (inputs, ``emit``, partitioners, outputs, counters, ``py_map``),
:mod:`.job` (``Job``: building, running, committing, retrying a step that lost a worker),
:mod:`.common` (``Result``, counters, building user functions),
:mod:`.sampling` (TeraSort's sampler for ``range_partition``), :mod:`.speculate` (phased jobs:
the shuffle through storage with a map step per split, and backup tasks), :mod:`.sizing` (the
reducer count from the input size and the workers' memory, ``num_reducers=None``) and
:mod:`.recovery` (``run(resume=True)``: a dead driver's finished reducers adopted). The kernels are
:mod:`tensorvm.ops.mapreduce.mapreduce_ops`; inside a job, string columns stay Arrow arrays wherever every
op that reads them takes Arrow (else the user's function is built on NumPy copies).

>>> import fsspec, tensorvm as tv, tensorvm.mapreduce as mr
>>> fsspec.filesystem("memory").pipe("/tvm-doc-mr/a.txt", b"a b a\\nc a\\n")
>>> job = mr.Job(input=mr.text("memory://tvm-doc-mr/a.txt"),
...              map=lambda lines: mr.emit(tv.strings.split(lines), 1),
...              combine="sum", reduce="sum", num_reducers=2)
>>> res = job.run()
>>> sorted(res.to_dict().items())
[('a', 3), ('b', 1), ('c', 1)]
>>> res.counters["map_input_records"], res.counters["reduce_output_records"]
(2, 3)
"""
from .api import (Emit, HashPartition, Input, Output, RangePartition, counter, csv, emit,
                  filter, hash_partition, jsonl, jsonl_output, npy, npy_output, parquet,
                  parquet_output, py_map, range_partition, records, records_output, text,
                  text_output)
from .job import Job, Result, run
from .recovery import resuming

__all__ = ["Job", "Result", "run", "Input", "text", "csv", "jsonl", "parquet", "npy",
           "records", "Emit", "emit", "HashPartition", "RangePartition", "hash_partition",
           "range_partition", "Output", "text_output", "jsonl_output", "parquet_output",
           "npy_output", "records_output", "filter", "counter", "py_map", "resuming"]
