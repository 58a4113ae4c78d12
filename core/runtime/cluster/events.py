"""The scheduler's events, fanned out to every session of a client.

A ``distributed.Client`` keeps one handler per event topic: ``Client.subscribe_topic``
replaces the previous one. Several tensorvm sessions (and their backends) share one client —
``run_replicas`` gives every replica its own session on the caller's client — so a second
``subscribe_topic`` on the lost-worker topic silently took the events away from the first
session, whose steps then waited for a worker that was gone.

Here each client gets one :class:`TopicDispatcher` per topic: it subscribes the client once
and calls every registered handler with each event, on the client's event loop. A handler is
added with :func:`subscribe`, which returns a :class:`Subscription`; ``Subscription.close()``
removes it (a session does so when it closes). A bound method is held weakly (an object that
is gone unsubscribes itself); any other callable is held until the subscription is closed. A
handler that raises is logged and does not stop the others.

The first subscription to a topic is confirmed on the scheduler with one round trip
(``Client.run_on_scheduler``), so an event logged after :func:`subscribe` returns reaches the
handler — the subscription message itself travels on the client's batched stream, with no
ordering against other requests.
"""
from __future__ import annotations

import logging
import threading
import weakref

from .. import client_state
from ...vm import _dask_private

logger = logging.getLogger("tensorvm")


class Subscription:
    """One handler registered on a :class:`TopicDispatcher`; ``close()`` unregisters it (also
    usable as a context manager)."""

    def __init__(self, dispatcher: TopicDispatcher, token: int):
        self._dispatcher = dispatcher
        self._token = token

    @property
    def active(self) -> bool:
        """Whether the handler is still registered (and alive, for a weakly held one)."""
        return self._dispatcher._handler(self._token) is not None

    def close(self) -> None:
        """Stop calling the handler (idempotent)."""
        self._dispatcher._remove(self._token)

    def __enter__(self) -> Subscription:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class TopicDispatcher:
    """The one subscription of ``client`` to ``topic``: every event goes to every registered
    handler (see the module docstring). Use :func:`subscribe` rather than making one."""

    def __init__(self, client, topic: str):
        self.client = client
        self.topic = topic
        self._lock = threading.Lock()
        self._handlers: dict[int, object] = {}  # token -> handler or weak reference to it
        self._next = 0
        self._subscribed = False
        self.events = 0  # events received (for tests and diagnostics)

    # ---- registration (any thread) ----------------------------------------------------------
    def add(self, handler) -> Subscription:
        """Register ``handler(event)`` (``event``: ``(timestamp, msg)`` as Dask gives it);
        subscribe the client to the topic on first use."""
        ref = weakref.WeakMethod(handler) if hasattr(handler, "__self__") and \
            hasattr(handler, "__func__") else handler
        with self._lock:
            token = self._next
            self._next += 1
            self._handlers[token] = ref
            first = not self._subscribed
            self._subscribed = True
        if first:
            self._subscribe()
        return Subscription(self, token)

    def _subscribe(self) -> None:
        client = self.client
        try:
            client.subscribe_topic(self.topic, self._dispatch)
        except Exception:  # noqa: BLE001 - a closed client: steps fail on their own
            logger.debug("could not subscribe to %s", self.topic, exc_info=True)
            return
        if getattr(client, "asynchronous", False) or _on_loop(client):
            return  # no blocking round trip from the event loop
        try:
            client.run_on_scheduler(_confirm, self.topic, client.id)
        except Exception:  # noqa: BLE001 - the stream's subscription still arrives
            logger.debug("could not confirm the subscription to %s", self.topic, exc_info=True)

    def _remove(self, token: int) -> None:
        with self._lock:
            self._handlers.pop(token, None)

    def _handler(self, token: int):
        ref = self._handlers.get(token)
        return ref() if isinstance(ref, weakref.WeakMethod) else ref

    def __len__(self) -> int:
        """Handlers registered and alive."""
        return sum(1 for t in list(self._handlers) if self._handler(t) is not None)

    # ---- events (the client's event loop) ---------------------------------------------------
    def _dispatch(self, event) -> None:
        self.events += 1
        with self._lock:
            items = list(self._handlers.items())
        for token, ref in items:
            fn = ref() if isinstance(ref, weakref.WeakMethod) else ref
            if fn is None:  # its object is gone
                self._remove(token)
                continue
            try:
                fn(event)
            except Exception:  # noqa: BLE001 - one handler's bug must not starve the others
                logger.exception("tensorvm: a handler of the %s event failed", self.topic)


def dispatcher(client, topic: str) -> TopicDispatcher:
    """The :class:`TopicDispatcher` of ``client`` for ``topic`` (made on first use, kept for
    the client in :mod:`tensorvm.runtime.client_state`)."""
    return client_state.of(client, f"events:{topic}",
                           lambda weak_client: TopicDispatcher(weak_client, topic))


def subscribe(client, topic: str, handler) -> Subscription:
    """Call ``handler(event)`` on ``client``'s event loop for every scheduler event on
    ``topic``, beside any other handler of the same client (never instead of one); close the
    returned :class:`Subscription` to stop."""
    return dispatcher(client, topic).add(handler)


def _confirm(topic, client_id, dask_scheduler=None):
    """On the scheduler: subscribe the client (idempotent), so the subscription is in place
    when the caller's round trip returns."""
    _dask_private.subscribe_on_scheduler(dask_scheduler, topic, client_id)


def _on_loop(client) -> bool:
    try:
        import asyncio
        return asyncio.get_running_loop() is client.loop.asyncio_loop
    except (RuntimeError, AttributeError):
        return False
