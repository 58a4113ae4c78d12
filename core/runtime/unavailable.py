"""The UnavailableError of a device or a scheduler that is gone, worded in one place.

A device whose worker left the cluster, closed a step's connection or cannot be reached, and a
scheduler the client has lost, fail the step as TF does (UnavailableError), and the message
says the same things each time: what went, what state may have gone with it, and the way
back — restoring the last checkpoint (what a ``MonitoredTrainingSession`` does on its own).
"""
from __future__ import annotations

from collections.abc import Iterable

from ..framework.errors import UnavailableError

RESTORE = "restore from the last checkpoint"


def device_unavailable(devices: str | Iterable[str], why: str, *,
                       certain: bool = True) -> UnavailableError:
    """UnavailableError for ``devices`` (one, or several on one worker) and ``why``; their
    state "is lost" when ``certain``, else "may be lost". Its ``device`` attribute is the
    first device (the one a MonitoredTrainingSession reports).

    >>> err = device_unavailable(["/gpu:1", "/cpu:0"], "its worker left the cluster")
    >>> for part in err.message.split("; "):
    ...     print(part)
    device /cpu:0, /gpu:1 is unavailable: its worker left the cluster
    state on it (variables, queues) is lost — restore from the last checkpoint
    >>> err.device
    '/cpu:0'
    """
    names = [devices] if isinstance(devices, str) else sorted(devices)
    lost = "is lost" if certain else "may be lost"
    err = UnavailableError(f"device {', '.join(names)} is unavailable: {why}; state on it "
                           f"(variables, queues) {lost} — {RESTORE}")
    err.device = names[0]
    return err


def scheduler_unavailable(address: str, status: str) -> UnavailableError:
    """UnavailableError for a client that lost its scheduler at ``address`` (``status``: the
    client's).

    >>> import re
    >>> for part in re.split("[:;] ", scheduler_unavailable("tcp://h:1", "closed").message):
    ...     print(part)
    the Dask scheduler at tcp://h:1 is gone (the client is 'closed')
    every device's state (variables, queues) may be lost
    start or reach a scheduler and restore from the last checkpoint
    """
    return UnavailableError(
        f"the Dask scheduler at {address} is gone (the client is {status!r}): every device's "
        f"state (variables, queues) may be lost; start or reach a scheduler and {RESTORE}")
