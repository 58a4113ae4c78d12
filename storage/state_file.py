"""Reading a checkpoint directory's ``checkpoint`` state file, bounded.

Shared by tensorvm's JSON state (:mod:`tensorvm.storage.checkpoint_state`), TF's text state
(:mod:`tensorvm.storage.tensor_bundle`) and ``tv.train.get_checkpoint_state``. The file is small
metadata and only a pointer (the committed folders are the truth), so one that is not a regular
file (a FIFO would block the reader, ``/dev/zero`` never ends) or is larger than
:data:`MAX_STATE_BYTES` is ignored with a warning naming it and the cap, as TF ignores a state
file it cannot read, and never opened or read whole.

>>> read_state_bytes("memory://tvm-doc-no-state") is None
True
"""

from __future__ import annotations

import logging

from .errors import DataLossError
from .fsio import join, read_bytes, to_fs

__all__ = ["STATE_NAME", "MAX_STATE_BYTES", "read_state_bytes"]

STATE_NAME = "checkpoint"
#: bytes a state file may have (about 150,000 checkpoint names)
MAX_STATE_BYTES = 16 << 20
_log = logging.getLogger("tensorvm")


def read_state_bytes(dir_url: str, filename: str = STATE_NAME, *,
                     storage_options: dict | None = None) -> bytes | None:
    """The bytes of the state file ``<dir_url>/<filename>`` (tensorvm's JSON or TF's text), or
    ``None`` when there is none. One that is not a regular file or is larger than
    :data:`MAX_STATE_BYTES` is never opened or read whole: it is ignored with a warning (the
    state file is only a pointer; readers scan the committed folders instead)."""
    url = join(dir_url, filename)
    fs, path = to_fs(url, storage_options)
    try:
        return read_bytes(fs, path, MAX_STATE_BYTES, url)
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        return None
    except DataLossError as e:
        _log.warning("checkpoint state file ignored: %s", e)
        return None
