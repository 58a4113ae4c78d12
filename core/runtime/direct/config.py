"""The direct plane's bounds, read from Dask's config: the lane frame cap and how long and how
much a worker's rendezvous keeps values for steps nobody runs."""
from __future__ import annotations

LANE_MAX_FRAME_BYTES = 64 << 20
"""The longest frame a lane reads (Dask config ``tensorvm.lane.max-frame-bytes``, e.g.
``DASK_TENSORVM__LANE__MAX_FRAME_BYTES="256 MiB"``). A frame announced longer closes its
connection before any of it is buffered. Real pushes never meet it: a lane frame carries only
values of at most the rendezvous' ``SMALL_BYTES`` each (larger ones go on Dask's comm), and
a sender whose frame would be longer than the receiver's cap (told with the lane's port)
sends it on Dask's comm instead."""
UNCLAIMED_TTL_S = 300.0
"""Seconds a value may wait in a worker's rendezvous for a step no ``tvm_run`` there runs
(``tensorvm.rendezvous.unclaimed-ttl``): a real early Send waits milliseconds (seconds behind
a large feed) for its step's ``tvm_run``; see :class:`~tensorvm.runtime.direct.rendezvous.Rendezvous`."""
UNCLAIMED_MAX_VALUES = 1 << 16
"""Values that may wait unclaimed in one worker's rendezvous
(``tensorvm.rendezvous.unclaimed-max-values``); the oldest steps' go first."""
UNCLAIMED_MAX_BYTES = 1 << 30
"""Bytes of values that may wait unclaimed in one worker's rendezvous
(``tensorvm.rendezvous.unclaimed-max-bytes``): one tensor of several hundred MB sent early
fits."""


def positive_config(key: str, default, parse):
    """Dask config ``key`` parsed by ``parse``; a clear ValueError if it is not positive."""
    import dask
    raw = dask.config.get(key, default)
    try:
        value = parse(raw)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"Dask config {key} = {raw!r}: {exc}") from None
    if not value > 0:
        raise ValueError(f"Dask config {key} = {raw!r}: must be positive")
    return value


def lane_max_frame_bytes() -> int:
    """The lane frame cap from Dask's config (default :data:`LANE_MAX_FRAME_BYTES`)."""
    from dask.utils import parse_bytes
    return int(positive_config("tensorvm.lane.max-frame-bytes", LANE_MAX_FRAME_BYTES,
                                parse_bytes))


def unclaimed_bounds() -> tuple[float, int, int]:
    """``(ttl seconds, values, bytes)`` for unclaimed rendezvous values, from Dask's config
    (defaults :data:`UNCLAIMED_TTL_S`, :data:`UNCLAIMED_MAX_VALUES`,
    :data:`UNCLAIMED_MAX_BYTES`)."""
    from dask.utils import parse_bytes, parse_timedelta
    return (float(positive_config("tensorvm.rendezvous.unclaimed-ttl", UNCLAIMED_TTL_S,
                                   lambda v: parse_timedelta(v, "s"))),
            int(positive_config("tensorvm.rendezvous.unclaimed-max-values",
                                 UNCLAIMED_MAX_VALUES, int)),
            int(positive_config("tensorvm.rendezvous.unclaimed-max-bytes",
                                 UNCLAIMED_MAX_BYTES, parse_bytes)))


def resolve_bounds(ttl=None, max_values=None, max_bytes=None) -> tuple[float, int, int]:
    """``(ttl, max_values, max_bytes)``: those given, the config's (:func:`unclaimed_bounds`)
    for those None."""
    d_ttl, d_values, d_bytes = unclaimed_bounds()
    return (d_ttl if ttl is None else float(ttl),
            d_values if max_values is None else int(max_values),
            d_bytes if max_bytes is None else int(max_bytes))


def over_bounds(age_s: float, values: int, nbytes: int, bounds: tuple[float, int, int],
                claimer: str = "Recv", what: str = "values") -> str | None:
    """Why the oldest step's unclaimed values must go now, or None: past their time to live
    (``age_s``), or the worker holds more than the bounds (:func:`unclaimed_bounds`) allow.
    ``claimer`` and ``what`` name the store (the rendezvous', a loop box's) in the reason.

    >>> over_bounds(301.0, 1, 8, (300.0, 10, 100))
    'no Recv claimed them within 300 s (tensorvm.rendezvous.unclaimed-ttl)'
    >>> over_bounds(1.0, 11, 8, (300.0, 10, 100), "loop shard", "loop values")[:40]
    'more than 10 loop values waited unclaime'
    >>> over_bounds(1.0, 1, 8, (300.0, 10, 100)) is None
    True
    """
    ttl, max_values, max_bytes = bounds
    if age_s > ttl:
        return f"no {claimer} claimed them within {ttl:g} s (tensorvm.rendezvous.unclaimed-ttl)"
    if values > max_values:
        return (f"more than {max_values} {what} waited unclaimed on the worker "
                "(tensorvm.rendezvous.unclaimed-max-values)")
    if nbytes > max_bytes:
        return (f"more than {max_bytes} bytes of {what} waited unclaimed on the worker "
                "(tensorvm.rendezvous.unclaimed-max-bytes)")
    return None
