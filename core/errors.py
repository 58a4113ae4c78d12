"""TensorFlow's error classes (``tv.errors``).

Each error may carry the operation it concerns; its message then names the op and the user's
source line that created it, e.g.::

    InvalidArgumentError: Incompatible shapes [3] and [4] for op 'add' (Add), created at train.py:12
"""
from __future__ import annotations


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
    error_code = 15


class PermissionDeniedError(OpError):
    error_code = 7


class UnauthenticatedError(OpError):
    error_code = 16


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
