"""TensorFlow's error classes (``tv.errors``) and error codes.

The classes are defined once in :mod:`tensorvm.storage.errors` (storage is a leaf that raises
them without importing core) and re-exported here, so ``tv.errors.DataLossError`` is the very
class a torn checkpoint or an uncommitted output raises from storage.

Each error may carry the operation it concerns; its message then names the op and the user's
source line that created it, e.g.::

    InvalidArgumentError: Incompatible shapes [3] and [4] for op 'add' (Add), created at train.py:12
"""
from __future__ import annotations

from ..storage.errors import (  # defined once, in the storage leaf (storage imports no core)
    AbortedError, AlreadyExistsError, CancelledError, DataLossError, DeadlineExceededError,
    FailedPreconditionError, InternalError, InvalidArgumentError, NotFoundError, OpError,
    OutOfRangeError, PermissionDeniedError, ResourceExhaustedError, UnauthenticatedError,
    UnavailableError, UnimplementedError, UnknownError)


class GraphError(InvalidArgumentError):
    """A malformed graph: raised by ``Graph.validate()`` with the nodes around the fault."""


_BY_NAME = {c.__name__: c for c in (
    CancelledError, UnknownError, InvalidArgumentError, DeadlineExceededError, NotFoundError,
    AlreadyExistsError, ResourceExhaustedError, FailedPreconditionError, AbortedError,
    OutOfRangeError, UnimplementedError, InternalError, UnavailableError, DataLossError,
    PermissionDeniedError, UnauthenticatedError)}

# TF's error codes (``tf.errors.OK`` …) and the maps between codes and classes
OK, CANCELLED, UNKNOWN, INVALID_ARGUMENT, DEADLINE_EXCEEDED, NOT_FOUND = range(6)
ALREADY_EXISTS, PERMISSION_DENIED, RESOURCE_EXHAUSTED, FAILED_PRECONDITION = range(6, 10)
ABORTED, OUT_OF_RANGE, UNIMPLEMENTED, INTERNAL, UNAVAILABLE, DATA_LOSS = range(10, 16)
UNAUTHENTICATED = 16
_BY_CODE = {c.error_code: c for c in _BY_NAME.values()}


def exception_type_from_error_code(error_code: int) -> type[OpError]:
    """The error class of a TF error code (``tv.errors.NOT_FOUND`` -> ``NotFoundError``)."""
    if error_code not in _BY_CODE:
        raise KeyError(f"no error class for error code {error_code}")
    return _BY_CODE[error_code]


def error_code_from_exception_type(cls: type) -> int:
    """The TF error code of an error class."""
    if not (isinstance(cls, type) and issubclass(cls, OpError)):
        raise KeyError(f"{cls!r} is not a tensorvm error class")
    return cls.error_code


def by_name(name: str) -> type[OpError]:
    return _BY_NAME.get(name, UnknownError)
