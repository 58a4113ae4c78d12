"""What a stage task returns, and the one place its wire form is decided.

:class:`StageResult` is the tuple of a stage's exports (a Send task's is a 1-tuple holding
its one tensor); every plane indexes it directly, ``result[i]`` is export ``i``. Pickled —
as Dask moves it between workers, or spills it — it travels as ``(ALIGN_GUARD, *values)``
and arrives without the guard: Dask reads a message's first out-of-band buffer together with
its header, at whatever offset the header ends, so a lone large array would arrive unaligned
(NumPy then skips BLAS, slower and with other rounding than on one device); behind the tiny
guard it gets an allocation of its own. In one process nothing is added or stripped.

:data:`DEAD` is TF's *dead tensor* (a Switch's untaken output).

>>> import pickle, numpy as np
>>> r = StageResult((np.arange(3), 2.0))
>>> back = pickle.loads(pickle.dumps(r, protocol=5))
>>> type(back).__name__, back[1], len(back)
('StageResult', 2.0, 2)
"""
from __future__ import annotations

import numpy as np

ALIGN_GUARD = np.zeros(1, np.uint64)


class StageResult(tuple):
    """The exports of one stage run, in the order of its program's ``exports``."""

    __slots__ = ()

    def __reduce__(self):
        return (_unguard, (ALIGN_GUARD,) + tuple(self))

    def __repr__(self):
        return f"StageResult{tuple.__repr__(self)}"


def _unguard(_guard, *values) -> StageResult:
    return StageResult(values)


class _Dead:
    """TF's *dead tensor* (a Switch's untaken output): one marker object, kept one across
    pickling, so a dead value sent to another device arrives dead."""

    __slots__ = ()
    _instance = None

    def __new__(cls):
        if cls._instance is None:
            cls._instance = object.__new__(cls)
        return cls._instance

    def __reduce__(self):
        return (_Dead, ())

    def __repr__(self):
        return "DEAD"


DEAD = _Dead()
