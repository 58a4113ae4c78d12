"""TensorFlow's error classes (``tv.errors``).

Each error may carry the operation it concerns; its message then names the op and the user's
source line that created it, e.g.::

    InvalidArgumentError: Incompatible shapes [3] and [4] for op 'add' (Add), created at train.py:12
"""
from __future__ import annotations


class OpError(Exception):
    """Base of all tensorvm runtime errors. ``op`` is the Operation concerned, or None."""

    error_code = 2

    def __init__(self, message: str, op=None):
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


class GraphError(InvalidArgumentError):
    """A malformed graph: raised by ``Graph.validate()`` with the nodes around the fault."""


_BY_NAME = {c.__name__: c for c in (
    CancelledError, UnknownError, InvalidArgumentError, DeadlineExceededError, NotFoundError,
    AlreadyExistsError, ResourceExhaustedError, FailedPreconditionError, AbortedError,
    OutOfRangeError, UnimplementedError, InternalError, UnavailableError, DataLossError)}


def by_name(name: str) -> type[OpError]:
    return _BY_NAME.get(name, UnknownError)
