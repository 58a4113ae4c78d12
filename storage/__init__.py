"""tensorvm.storage — fsspec I/O for tensorvm: checkpoints, input splits and readers, outputs.

This subpackage imports nothing else of tensorvm (only fsspec, numpy, pyarrow and the standard
library) and never unpickles anything.

Every function takes URLs (``file://``, ``memory://``, ``s3://``, plain local paths, ...) and a
keyword ``storage_options`` dict passed unchanged to fsspec — e.g.
``{"client_kwargs": {"endpoint_url": "http://127.0.0.1:9000"}}`` for an S3-compatible server.

Checkpoints (:mod:`.checkpoint`, :mod:`.index`, :mod:`.checkpoint_state`, :mod:`.inspection`)::

    entries = write_shard(ckpt, shard, num_shards, {"w": w})      # once per PS device
    commit(dir_url, ckpt, all_entries, step=100, max_to_keep=5)   # index.json last = commit
    read_tensors(latest_checkpoint(dir_url))                      # verified restore

Inputs (:mod:`.splits`, :mod:`.readers`)::

    for split in splits("s3://bucket/logs/*.txt", format="text"):
        for batch in read(split):            # pyarrow string arrays, one line each
            ...

Outputs (:mod:`.output`): :class:`OutputCommitter` and :func:`write_output`.

TensorFlow's formats, read without TensorFlow: TFRecord files (:mod:`.tfrecord`, also the
``tfrecord`` input format), ``tf.train.Example`` and tensor_bundle protos (:mod:`.tf_protos`),
and TF 1.x checkpoints (:mod:`.tensor_bundle`: ``<prefix>.index`` + ``<prefix>.data-*``).

``memory://`` is per process (:func:`is_process_local`): callers that write from worker
processes (a distributed Saver, a map-reduce job's output) refuse it.
"""

import importlib as _importlib

from .errors import CheckpointNotFoundError, DataLossError
from .fsio import is_process_local
from .splits import (DEFAULT_SPLIT_SIZE, InputFormat, ReadOptions, Split, infer_format,
                     input_formats, read, register_format, splits)
from . import readers as _readers, columnar as _columnar  # noqa: E402,F401  (register formats)
from . import tfrecord as _tfrecord  # noqa: E402,F401  (the tfrecord format)
from .output import OutputCommitter, output_writers, register_writer, write_output

__all__ = [
    "DataLossError", "CheckpointNotFoundError", "is_process_local",
    "checkpoint_url", "data_file_name", "write_shard", "commit", "read_index", "read_tensors",
    "read_slices", "latest_checkpoint", "list_checkpoints", "show_checkpoint",
    "verify_checkpoint",
    "Split", "ReadOptions", "splits", "read", "InputFormat", "register_format", "input_formats",
    "infer_format", "DEFAULT_SPLIT_SIZE",
    "OutputCommitter", "write_output", "register_writer", "output_writers",
]

# The checkpoint code loads on first use (PEP 562): ``import tensorvm`` in a worker or a CLI
# command seldom needs it. Inputs and outputs stay eager: ``tensorvm.storage.splits`` is both a
# submodule and a function here, and the input formats register when their modules import.
_LAZY = {name: "checkpoint" for name in ("checkpoint_url", "commit", "data_file_name",
                                          "latest_checkpoint", "read_index", "read_slices",
                                          "read_tensors", "write_shard")}
_LAZY.update({name: "inspection" for name in ("list_checkpoints", "show_checkpoint",
                                                "verify_checkpoint")})


def __getattr__(name: str):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(_importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_LAZY))
