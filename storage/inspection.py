"""Checkpoint helpers for the CLI: list the checkpoints of a directory, show one, verify one.

>>> import numpy as np
>>> from tensorvm.storage import checkpoint_url, commit, write_shard
>>> d = "memory://tvm-doc-inspect"
>>> c = checkpoint_url(d, "m", 1)
>>> _ = commit(d, c, write_shard(c, 0, 1, {"w": np.zeros((2, 2), np.float32)}), step=1)
>>> [(x["step"], x["num_tensors"]) for x in list_checkpoints(d)]
[(1, 1)]
>>> show_checkpoint(c)[0]["dtype"], verify_checkpoint(c)
('float32', [])
"""

from __future__ import annotations

import numpy as np

from .checkpoint import _read_file_records
from .checkpoint_state import committed_checkpoints
from .errors import CheckpointNotFoundError, DataLossError
from .fsio import join, to_fs
from .index import INDEX_NAME, read_index
from .slices import assemble

__all__ = ["list_checkpoints", "show_checkpoint", "verify_checkpoint"]


def list_checkpoints(dir_url: str, *, storage_options: dict | None = None) -> list[dict]:
    """Committed checkpoints in ``dir_url``, oldest first.

    Each: ``{"path": url, "step", "time", "num_tensors", "bytes"}``; a folder whose index is
    corrupt is listed with an ``"error"`` message and ``None`` for the rest.
    """
    out = []
    for url, doc in committed_checkpoints(dir_url, storage_options=storage_options):
        if isinstance(doc, Exception):
            out.append({"path": url, "step": None, "time": None, "num_tensors": None,
                        "bytes": None, "error": str(doc)})
            continue
        entries = doc["entries"]
        out.append({"path": url, "step": doc.get("step"), "time": doc.get("time"),
                    "num_tensors": len({e["name"] for e in entries}),
                    "bytes": sum(e["size"] for e in entries)})
    return out


def _dtype_name(dtype: str) -> str:
    dt = np.dtype(dtype)
    return {"U": "str", "S": "bytes", "O": "object"}.get(dt.kind, dt.name)


def show_checkpoint(ckpt_url: str, *, storage_options: dict | None = None) -> list[dict]:
    """The tensors of one checkpoint (from its index, nothing else is read):
    ``[{"name", "dtype", "shape", "slice", "bytes"}]`` sorted by name then slice."""
    index = read_index(ckpt_url, storage_options=storage_options)
    rows = [{"name": e["name"], "dtype": _dtype_name(e["dtype"]), "shape": list(e["shape"]),
             "slice": e.get("slice"), "bytes": e["size"]} for e in index["entries"]]
    return sorted(rows, key=lambda r: (r["name"], r["slice"] or ""))


def verify_checkpoint(ckpt_url: str, *, storage_options: dict | None = None) -> list[str]:
    """Read every record of a checkpoint and check it; return the problems (empty when good).

    Checks the index, each data file's presence and length, every record's checksum and decoding,
    and that the slices of each partitioned variable tile its full shape.
    """
    try:
        index = read_index(ckpt_url, storage_options=storage_options)
    except (CheckpointNotFoundError, DataLossError) as e:
        return [str(e)]
    fs, folder = to_fs(ckpt_url, storage_options)
    by_file: dict[str, list[dict]] = {}
    for e in index["entries"]:
        by_file.setdefault(e["file"], []).append(e)
    problems, pieces = [], {}
    for fname, group in sorted(by_file.items()):
        for entry in group:  # record by record, so one bad record does not hide the others
            try:
                (_, arr), = _read_file_records(fs, folder, ckpt_url, fname, [entry],
                                                    index["checksum_algorithm"])
            except DataLossError as e:
                if str(e) not in problems:  # a missing or short file: said once, not per record
                    problems.append(str(e))
                continue
            if entry.get("slice") is not None:
                pieces.setdefault(entry["name"], []).append(
                    (entry["slice"], entry.get("full_shape"), arr))
    index_url = join(ckpt_url, INDEX_NAME)
    for name, parts in pieces.items():
        try:
            assemble(name, parts, index_url)
        except DataLossError as e:
            problems.append(str(e))
    return problems
