"""How a direct step's failure is named (:mod:`tensorvm.runtime.direct.client`).

A step fails with the error a user of TF 1.x would expect, and the error says where: the
device whose worker closed its connection or left (UnavailableError, :func:`failure`), the
scheduler the client has lost (:func:`scheduler_gone`; a worker's closed connection may be
either, :func:`why_closed` waits a moment to learn which), the devices still running at the
deadline and the stateful ops that may have run (:func:`deadline_exceeded`), or the session
that was closed while the step ran (:func:`cancelled`).
"""
from __future__ import annotations

import asyncio

from .. import client_state
from ..unavailable import device_unavailable, scheduler_unavailable
from ...framework.errors import CancelledError, DeadlineExceededError, OpError, UnavailableError

WHY_CLOSED_S = 1.0  # how long a step whose worker's connection closed waits to learn why
LIVE_CLIENT = ("running", "newly-created")  # a Client's statuses while it has its scheduler


def scheduler_gone(client, address: str | None = None,
                   cause: BaseException | None = None) -> UnavailableError | None:
    """The UnavailableError naming the scheduler if ``client`` has lost it, else None; no round
    trip: the client's status, or its scheduler connection already closed (the client notices
    a moment later and spends its connect timeout, 20 s, trying to reconnect, while its calls
    block and then fail with Dask's raw ``KeyError``/``AttributeError``).

    Every worker closes itself when its scheduler goes, so on the direct plane a killed
    scheduler first shows as workers closing their step connections: the step names the
    scheduler, not a worker (issue 24)."""
    status = str(getattr(client, "status", "running"))
    if status in LIVE_CLIENT:
        comm = getattr(getattr(client, "scheduler_comm", None), "comm", None)
        if comm is None or not comm.closed():
            return None
        status = "connecting"  # its connection closed: it is about to say so itself
    if address is None:
        try:
            address = client.scheduler.address
        except Exception:  # noqa: BLE001 - the client dropped its scheduler (closed)
            address = client_state.get(client, "scheduler_address") or "?"
    err = scheduler_unavailable(address, status)
    err.__cause__ = cause
    return err


async def why_closed(client, address: str | None, lost) -> BaseException | None:
    """A worker of the step closed its connection (or could not reach a peer): wait up to
    :data:`WHY_CLOSED_S` to learn why — the scheduler's event that the worker left (the
    step's ``lost`` future: that error), or ``client`` losing its scheduler (at ``address``;
    every worker closes itself then: UnavailableError naming the scheduler); None if neither
    came."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + WHY_CLOSED_S
    while True:
        if lost.done():
            return None if lost.cancelled() else lost.result()
        gone = scheduler_gone(client, address)
        if gone is not None or loop.time() >= deadline:
            return gone
        await asyncio.wait([lost], timeout=0.02)


def connection_lost(exc: BaseException) -> bool:
    """A step's failure that a closing worker or scheduler may explain: the connection to its
    worker closed, or a worker could not reach a peer (UnavailableError from the worker).

    >>> connection_lost(ConnectionResetError()), connection_lost(ValueError())
    (True, False)
    """
    from distributed.comm.core import CommClosedError
    return isinstance(exc, (OSError, CommClosedError)) or (
        isinstance(exc, UnavailableError) and getattr(exc, "device", None) is not None)


def failure(device: str, exc: BaseException, pinned: dict) -> BaseException:
    """The error a step raises for ``exc``, the failure of ``device``'s call (``pinned``:
    device -> (address, name)): a closed connection is the device's UnavailableError; a
    worker's UnavailableError learns the worker of its device; an OpError loses the
    traceback of the worker's reply.

    >>> err = failure("/job:ps/task:0", ConnectionResetError(),
    ...               {"/job:ps/task:0": ("tcp://h:1", "ps0")})
    >>> print(err.message.split(": ", 1)[1].split("; ")[0])
    its worker 'ps0' (tcp://h:1) closed the connection mid-step (ConnectionResetError)
    """
    from distributed.comm.core import CommClosedError
    if isinstance(exc, (OSError, CommClosedError)):
        addr, name = pinned[device]
        err = device_unavailable(device, f"its worker {name!r} ({addr}) closed the "
                                         f"connection mid-step ({type(exc).__name__})")
        err.__cause__ = exc
        return err
    if isinstance(exc, UnavailableError) and getattr(exc, "device", None) in pinned:
        addr, name = pinned[exc.device]
        exc.device_worker = (addr, name)
    if isinstance(exc, OpError):
        return exc.with_traceback(None)
    return exc


def deadline_exceeded(step_id: str, timeout: float, pending: list,
                      plan) -> DeadlineExceededError:
    """The error of a step still running on the devices ``pending`` at its deadline."""
    return DeadlineExceededError(
        f"step {step_id} did not finish within {timeout * 1000:.0f} ms and was "
        f"cancelled (its ops not yet started will not run); devices still "
        f"pending: {', '.join(pending)}; stateful ops that may already have "
        f"run: {stateful_ops(plan, pending) or 'none'}")


def stateful_ops(plan, devices) -> str:
    """The names of the ops of ``plan`` on ``devices`` that change state (read-only ones are
    left out), comma-separated."""
    from ...framework.op_registry import registry
    ops = [i.name for t in plan.tasks if t.device in devices for i in t.program.instrs
           if registry[i.type].stateful and not registry[i.type].reads_only]
    return ", ".join(ops)


def cancelled(step_id: str, reason: str) -> CancelledError:
    """The error of a step its session ended while it ran (``reason``: why).

    >>> print(cancelled("a.7", "its session was closed").message)
    step a.7 was cancelled: its session was closed while it ran (its ops not yet started ...)
    """
    return CancelledError(f"step {step_id} was cancelled: {reason} while it ran (its ops not "
                          "yet started will not run)")
