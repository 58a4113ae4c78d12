"""A coroutine run on a client's event loop for the thread that waits for it: a direct step's
one trip to the loop's thread and back (:func:`run_on_loop`)."""
from __future__ import annotations

import asyncio
import threading


def run_on_loop(client, fn, *args):
    """``fn(*args)`` on ``client``'s event loop, waited for here: the step's one trip to
    that thread and back (``Client.sync`` costs an extra loop iteration and a tornado
    coroutine around it; ``run_coroutine_threadsafe`` a concurrent future chained to the
    task, each a condition and callbacks on both threads: a lock released by the task's
    end is all the wait needs)."""
    loop = client.loop.asyncio_loop
    if client.asynchronous or asyncio._get_running_loop() is loop or loop.is_closed():
        return client.sync(fn, *args)  # its errors for these cases
    handoff = Handoff()
    loop.call_soon_threadsafe(handoff.start, fn(*args))
    try:
        handoff.lock.acquire()
    except BaseException:  # a KeyboardInterrupt: the step is given up on the loop too
        loop.call_soon_threadsafe(handoff.cancel)
        raise
    return handoff.result()


class Handoff:
    """A coroutine run on the event loop for a thread that waits for it (:func:`run_on_loop`):
    ``lock`` is held until the coroutine's task has ended.

    >>> import threading
    >>> async def double(x):
    ...     return 2 * x
    >>> loop = asyncio.new_event_loop()
    >>> thread = threading.Thread(target=loop.run_forever)
    >>> thread.start()
    >>> handoff = Handoff()
    >>> _ = loop.call_soon_threadsafe(handoff.start, double(21))
    >>> handoff.lock.acquire(), handoff.result()
    (True, 42)
    >>> _ = loop.call_soon_threadsafe(loop.stop)
    >>> thread.join(); loop.close()
    """

    __slots__ = ("lock", "task")

    def __init__(self):
        self.lock = threading.Lock()
        self.lock.acquire()
        self.task = None

    def start(self, coro) -> None:  # on the loop
        self.task = asyncio.ensure_future(coro)
        self.task.add_done_callback(self._ended)

    def _ended(self, task) -> None:
        if not task.cancelled():
            task.exception()  # retrieved: a waiter that gave up (Ctrl-C) never reads it
        self.lock.release()

    def cancel(self) -> None:  # on the loop
        if self.task is not None:
            self.task.cancel()

    def result(self):
        """The task's value; its error raised (``asyncio.CancelledError`` if cancelled)."""
        return self.task.result()
