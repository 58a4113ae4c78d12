"""State that tensorvm keeps per ``distributed.Client``, shared by every session of that
client (``run_replicas`` gives each replica a session on the caller's client): the event
dispatchers, the step reports, the scheduler's address. Held in a registry keyed weakly by
the client — nothing is hung on the ``Client`` object — so it goes with the client. A value that
needs its client is made with a weak proxy of it (a value holding the client itself would keep
its own key alive for good).

>>> class FakeClient: pass
>>> c = FakeClient()
>>> of(c, "answer", lambda client: 42), of(c, "answer", lambda client: 0), get(c, "other")
(42, 42, None)
"""
from __future__ import annotations

import threading
import weakref

_STATE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # client -> {name: value}
_LOCK = threading.RLock()


def of(client, name: str, make):
    """The value ``name`` kept for ``client``, made by ``make(weak proxy of the client)`` on
    first use."""
    with _LOCK:
        table = _STATE.setdefault(client, {})
        if name not in table:
            table[name] = make(weakref.proxy(client))
        return table[name]


def get(client, name: str, default=None):
    """The value ``name`` kept for ``client``, or ``default``."""
    with _LOCK:
        return _STATE.get(client, {}).get(name, default)


def put(client, name: str, value) -> None:
    """Keep ``value`` as ``name`` for ``client``."""
    with _LOCK:
        _STATE.setdefault(client, {})[name] = value
