"""A direct step's calls to its workers (:mod:`tensorvm.runtime.direct.client`): the feeds
of each device's ``tvm_run`` message (:func:`pack_feed`), the connections the messages go on
(:class:`StepConnections`), and the one future that ends the step's wait (:class:`Replies`,
:func:`expire`).
"""
from __future__ import annotations

import numpy as np

from ...vm import _dask_private
from .packing import SMALL_BYTES, pack

EXPIRED = object()  # a step's end: its deadline passed


def pack_feed(value):
    """A feed's value for a ``tvm_run`` message: :func:`~tensorvm.runtime.direct.packing.pack`'s
    form (a step's token, a small string array, travels as its strings: no pickle either
    way), except a small object array ``pack`` leaves to Dask's serialisation, which goes as a
    pickled sub-header that Dask's protocol unpickles on the worker into the array itself (what
    ``unpack`` returns for the ``"o"`` tag): Dask's serialisation cost the client ~30 us a
    message (``serialize``, its header, a frame of its own) and the worker ~20 us to read it.
    A large one (pickled, over ``SMALL_BYTES``) goes through Dask's serialisation (frames of
    its own, no copy into a header)."""
    packed = pack(value)
    if packed[0] != "o" or type(value) is not np.ndarray or not value.dtype.hasobject:
        return packed
    import pickle
    from distributed.protocol.serialize import Pickled
    frames: list = []
    obj = pickle.dumps(value, protocol=5, buffer_callback=frames.append)
    if len(obj) <= SMALL_BYTES and not frames:
        return ("o", Pickled({"pickled-obj": obj}, []))
    return packed


class StepConnections:
    """The connections a client's direct steps send their ``tvm_run`` messages on, per worker
    address: taken from the client's pool once (the pool closes them with the client) and kept
    idle between calls."""

    def __init__(self, client):
        self.client = client
        self._idle: dict[str, list] = {}  # address -> connections for tvm_run not in use

    async def call(self, addr: str, msg: dict):
        """``msg`` to the worker at ``addr`` and its reply, on one of the connections this
        object keeps for its steps. Unlike the pool's calls, no size walk of every message to
        decide on offloading its serialisation: large arrays come serialised already
        (``pack``)."""
        idle = self._idle.setdefault(addr, [])
        comm = None
        while idle and comm is None:
            comm = idle.pop()
            if comm.closed():
                comm = None
        if comm is None:
            comm = await _dask_private.open_comm(self.client.rpc, addr)
        try:
            await comm.write(msg)
            reply = await comm.read()
        except BaseException:  # a cancelled or failed call leaves the connection mid-message
            comm.abort()
            raise
        idle.append(comm)
        _dask_private.raise_error_reply(reply)
        return reply


def expire(ended) -> None:
    """End a step's wait (``ended``: its future) with :data:`EXPIRED`: its deadline passed."""
    if not ended.done():
        ended.set_result(EXPIRED)


class Replies:
    """Counts a step's replies into the future that ends its wait: its result is None once
    every device replied, or the first call that failed (raised, or replied an error).

    >>> import asyncio
    >>> async def main():
    ...     loop = asyncio.get_running_loop()
    ...     calls = [loop.create_future() for _ in range(2)]
    ...     ended = loop.create_future()
    ...     waiting = Replies(ended, len(calls))
    ...     for c in calls:
    ...         c.add_done_callback(waiting.reply)
    ...     calls[0].set_result({"fetches": []})
    ...     calls[1].set_result({"error": "a kernel failed"})
    ...     return await ended is calls[1]
    >>> asyncio.run(main())
    True
    """

    __slots__ = ("ended", "left")

    def __init__(self, ended, n: int):
        self.ended, self.left = ended, n

    def reply(self, call) -> None:
        if self.ended.done() or call.cancelled():
            return
        if call.exception() is not None or "error" in call.result():
            self.ended.set_result(call)
            return
        self.left -= 1
        if not self.left:
            self.ended.set_result(None)


def retrieve(fut) -> None:
    """Read a finished call's error, so that asyncio does not log it as never retrieved."""
    if not fut.cancelled():
        fut.exception()
