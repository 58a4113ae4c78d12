"""The errors a running op raises: a kernel's failure as a ``tv.errors`` class naming the
op, its input shapes and the user's line (chained from the original), and a cancelled
step's."""
from __future__ import annotations

import numpy as np

from ..framework import errors
from .resources import _step_root


def describe_inputs(vals, instr) -> str:
    """``dtype[shape]`` of each of ``instr``'s inputs in ``vals`` (a slots list)."""
    shapes = []
    for s in instr.args:
        v = vals[s]
        shapes.append(f"{getattr(v, 'dtype', type(v).__name__)}{list(np.shape(v))}"
                      if v is not None else "None")
    return ", ".join(shapes)


def op_failed(instr, vals, exc: Exception) -> Exception:
    """``exc`` from ``instr``'s kernel as the error to raise (``exc`` itself where it names
    the op already)."""
    if isinstance(exc, errors.OpError):
        if f"for op {instr.name!r}" in str(exc) or exc.op is not None:
            return exc
        cls = type(exc)
    elif isinstance(exc, (ValueError, TypeError, IndexError, np.linalg.LinAlgError)):
        cls = errors.InvalidArgumentError
    elif isinstance(exc, MemoryError):
        cls = errors.ResourceExhaustedError
    else:
        cls = errors.UnknownError
    msg = getattr(exc, "message", None) or f"{type(exc).__name__}: {exc}"
    new = cls(f"{msg}\n  for op {instr.name!r} ({instr.type}) with inputs "
              f"({describe_inputs(vals, instr)}), created at {instr.location}")
    new.__cause__ = exc
    return new


def cancelled_before(step_id, ins) -> errors.CancelledError:
    """The error of a step given up before op ``ins`` ran."""
    return errors.CancelledError(
        f"step {_step_root(step_id)} was cancelled before op {ins.name!r} ({ins.type}) ran; "
        f"created at {ins.location}")
