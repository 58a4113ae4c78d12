"""Giving up a step on its workers (TF's CancellationManager, across processes).

A step given up (deadline, error, Ctrl-C) is marked cancelled on the workers that may run
it: :meth:`tensorvm.vm.resources.DeviceResources.cancel_step` makes a running stage stop
before its next op and a stage that starts later run nothing. Two ways to send the mark:

- :func:`mark_cancelled`, in the background: the caller never waits (a worker that just died
  would hold it for the connect timeout). For a deadline, a lost worker, Ctrl-C.
- :func:`stop_step`, and wait until no task of the step occupies a thread of any worker
  (bounded by ``wait_s``). For a step that failed on a task's error: as TF's ``Session.run``
  returns only once every executor of the step is done, so whatever the caller cleans up
  after the error (a job's scratch, its temporary output) no task of the step writes again.
  An op in flight finishes; nothing after it runs.
"""
from __future__ import annotations

import asyncio
import logging
import time

from ..vm import _dask_private
from ..vm.interpreter import resources_of

logger = logging.getLogger(__name__)

STOP_WAIT_S = 60.0  # the longest a failed step waits for its tasks in flight to end
_LOOK_S = 0.01  # how often a worker looks at its threads meanwhile


async def mark_cancelled(client, step_id, addrs) -> None:
    """On the client's loop: mark ``step_id`` cancelled on the workers ``addrs``, not
    waiting for their answers."""
    try:
        await client.run(_cancel_step, step_id, workers=addrs, wait=False, on_error="ignore",
                         asynchronous=True)
    except Exception:  # a gone worker or scheduler: nothing to cancel there
        logger.debug("could not mark step %s cancelled on %s", step_id, addrs, exc_info=True)


def stop_step(client, step_id, wait_s: float = STOP_WAIT_S) -> dict:
    """Mark ``step_id`` cancelled on every worker of the cluster and wait until none runs a
    task of it (at most ``wait_s`` seconds, then a warning). Returns ``{worker address: [task
    names still running]}`` for the workers that had not finished by then."""
    async def run():
        return await asyncio.wait_for(
            client.run(_stop_on_worker, step_id, wait_s, on_error="return",
                       asynchronous=True), wait_s + 5.0)
    try:
        answers = client.sync(run)
    except Exception:  # noqa: BLE001 - a scheduler that went: nothing runs there any more
        logger.debug("could not stop step %s on the workers", step_id, exc_info=True)
        return {}
    left = {a: names for a, names in answers.items()
            if isinstance(names, list) and names}
    if left:
        logger.warning("step %s failed, but after %.0f s these of its tasks still run: %s",
                       step_id, wait_s, "; ".join(f"{a}: {', '.join(n)}"
                                                  for a, n in sorted(left.items())))
    return left


async def _cancel_step(step_id, dask_worker):
    """On a worker: mark a step given up. A coroutine: ``Client.run(..., wait=False)`` takes
    only those, and the session does not wait."""
    resources_of(dask_worker).cancel_step(step_id)


async def _stop_on_worker(step_id, wait_s, dask_worker) -> list:
    """On a worker: mark a step given up, then wait (on the worker's loop, at most
    ``wait_s``) until none of its threads runs a task of the step. Returns the names of those
    still running then. The mark comes first: a task of the step that starts after the look
    runs no op."""
    resources_of(dask_worker).cancel_step(step_id)
    deadline = time.monotonic() + wait_s
    while True:
        # a task key of a step: (name, step id) or (a send's name, step id, index)
        mine = [k[0] for k in _dask_private.running_keys(dask_worker)
                if isinstance(k, tuple) and len(k) >= 2 and k[1] == step_id]
        if not mine or time.monotonic() >= deadline:
            return [str(n) for n in mine]
        await asyncio.sleep(_LOOK_S)
