"""tensorvm's error classes: TensorFlow's hierarchy (``OpError`` and its subclasses), defined
once here, in the storage leaf, so that storage can raise them without importing the rest of
tensorvm; ``tv.errors`` (``tensorvm/errors.py``) re-exports them and adds TF's error codes.
So ``except tv.errors.DataLossError`` catches a torn checkpoint found by storage, and
``tensorvm.storage.errors.DataLossError is tv.errors.DataLossError``.

An error may carry the operation it concerns; its message then names the op and the user's
source line that created it, e.g.::

    InvalidArgumentError: Incompatible shapes [3] and [4] for op 'add' (Add), created at train.py:12

A :class:`DataLossError` raised by storage names the URL at fault (``.url``):

>>> err = DataLossError("checksum mismatch", url="file:///ckpt/model-1/data-00000-of-00001")
>>> err.url
'file:///ckpt/model-1/data-00000-of-00001'
>>> str(err)
'checksum mismatch: file:///ckpt/model-1/data-00000-of-00001'
>>> isinstance(err, OpError), err.error_code
(True, 15)
"""

from __future__ import annotations

__all__ = ["OpError", "CancelledError", "UnknownError", "InvalidArgumentError",
           "DeadlineExceededError", "NotFoundError", "AlreadyExistsError",
           "PermissionDeniedError", "ResourceExhaustedError", "FailedPreconditionError",
           "AbortedError", "OutOfRangeError", "UnimplementedError", "InternalError",
           "UnavailableError", "DataLossError", "UnauthenticatedError",
           "CheckpointNotFoundError"]


class OpError(Exception):
    """Base of all tensorvm runtime errors. ``op`` is the Operation concerned, or None.

    Constructed as ``Error(message, op=None)``, or with TF's signature
    ``Error(node_def, op, message[, error_code])`` that TF 1.x programs use
    (``raise tf.errors.OutOfRangeError(None, None, "end of data")``)."""

    error_code = 2

    def __init__(self, message: str | None = None, op=None, *tf_args, **tf_kwargs):
        if tf_args or "message" in tf_kwargs:  # TF's (node_def, op, message[, error_code])
            message = tf_args[0] if tf_args else tf_kwargs["message"]
        self.message = message
        self.op = op
        if op is not None:
            message = f"{message}\n  for op {op.name!r} ({op.type}), created at {op.location}"
        super().__init__(message)

    @property
    def node_def(self):
        return self.op


class CancelledError(OpError):
    error_code = 1


class UnknownError(OpError):
    error_code = 2


class InvalidArgumentError(OpError, ValueError):
    error_code = 3


class DeadlineExceededError(OpError):
    error_code = 4


class NotFoundError(OpError, KeyError):
    error_code = 5

    def __str__(self) -> str:  # KeyError would quote the message
        return Exception.__str__(self)


class AlreadyExistsError(OpError):
    error_code = 6


class PermissionDeniedError(OpError):
    error_code = 7


class ResourceExhaustedError(OpError):
    error_code = 8


class FailedPreconditionError(OpError):
    error_code = 9


class AbortedError(OpError):
    error_code = 10


class OutOfRangeError(OpError):
    error_code = 11


class UnimplementedError(OpError):
    error_code = 12


class InternalError(OpError):
    error_code = 13


class UnavailableError(OpError):
    error_code = 14


class DataLossError(OpError):
    """A torn, truncated, corrupt or tampered checkpoint or input file.

    Storage raises it as ``DataLossError(message, url)``: ``url`` is the file (or index) at
    fault, and the message always names it. Core raises it as ``DataLossError(message, op)``
    (an Operation) or with TF's ``(node_def, op, message)``; ``url`` is then ``None``."""

    error_code = 15

    def __init__(self, message: str | None = None, op=None, *tf_args, url: str | None = None,
                 **tf_kwargs):
        if isinstance(op, str) and not tf_args and not tf_kwargs and url is None:
            op, url = None, op  # storage's DataLossError(message, url)
        self.url = url
        if tf_args or "message" in tf_kwargs:
            message = tf_args[0] if tf_args else tf_kwargs["message"]
            tf_args, tf_kwargs = (), {}
        if url and message is not None and url not in message:
            message = f"{message}: {url}"
        super().__init__(message, op)


class UnauthenticatedError(OpError):
    error_code = 16


class CheckpointNotFoundError(FileNotFoundError):
    """No committed checkpoint at a URL (no ``index.json`` in the folder)."""

    def __init__(self, message: str, url: str | None = None):
        self.message = message
        self.url = url
        text = f"{message}: {url}" if url and url not in message else message
        super().__init__(text)

    def __str__(self) -> str:  # FileNotFoundError's own str shows errno fields; keep ours
        return self.args[0]


# Their public home is ``tv.errors`` (``tensorvm.errors`` re-exports every one): tracebacks and
# doctests name them there, as TF programs expect, and a pickled error names that module.
for _cls in (OpError, *OpError.__subclasses__()):
    _cls.__module__ = "tensorvm.errors"
del _cls
