"""Storage errors, each naming the URL it is about.

These are plain ``Exception`` subclasses with a ``.url`` attribute so that ``tensorvm.storage``
stays free of the rest of tensorvm; the core package wraps or re-exports them as ``tv.errors``
classes.

>>> err = DataLossError("checksum mismatch", url="file:///ckpt/model-1/data-00000-of-00001")
>>> err.url
'file:///ckpt/model-1/data-00000-of-00001'
>>> str(err)
'checksum mismatch: file:///ckpt/model-1/data-00000-of-00001'
"""

from __future__ import annotations

__all__ = ["DataLossError", "CheckpointNotFoundError"]


class DataLossError(Exception):
    """A torn, truncated, corrupt or tampered checkpoint or input file.

    ``url`` is the file (or index) at fault; the message always names it.
    """

    def __init__(self, message: str, url: str | None = None):
        self.message = message
        self.url = url
        super().__init__(f"{message}: {url}" if url and url not in message else message)


class CheckpointNotFoundError(FileNotFoundError):
    """No committed checkpoint at a URL (no ``index.json`` in the folder)."""

    def __init__(self, message: str, url: str | None = None):
        self.message = message
        self.url = url
        text = f"{message}: {url}" if url and url not in message else message
        super().__init__(text)

    def __str__(self) -> str:  # FileNotFoundError's own str shows errno fields; keep ours
        return self.args[0]
