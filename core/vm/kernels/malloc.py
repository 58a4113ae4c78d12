"""The C heap of a worker process: keep freed memory for the next kernel's temporaries.

Dask's nanny starts every worker with ``MALLOC_TRIM_THRESHOLD_=65536``
(``distributed.nanny.pre-spawn-environ``), so that glibc returns freed memory to the system
at once. Setting it also switches off glibc's adaptive thresholds, which leaves the mmap
threshold at its 128 KiB floor: every NumPy array larger than that is then a fresh ``mmap``,
zero-filled page by page on first touch and unmapped when freed. A map task's temporaries
(a split's bytes, its newline mask, a hash over every byte of its keys) are megabytes each,
so every task paid thousands of page faults again: on the 200 MB word count (2 workers x 1
thread) reading a split cost 22 ms instead of 14 and partitioning 11 instead of 6, and the
workers used 2.28 CPU-s per run instead of 1.68 (runs on a quiet machine, 8 each).

:func:`keep_freed_heap` sets the two thresholds to where glibc's own adaptive rule tops out
(:data:`MMAP_THRESHOLD` 32 MiB, trim at twice that): temporaries below 32 MiB come from the
heap and are reused, at most :data:`TRIM_THRESHOLD` of free heap is kept, and larger arrays
are still mapped and returned at once. A worker with a memory limit keeps less: the trim
threshold is at most 1/:data:`LIMIT_SHARE` of the limit, the mmap threshold half that
(:func:`thresholds`). Memory a worker keeps for reuse is memory Dask's monitor counts against
it: a 320 MiB worker of a storage shuffle kept ~40 MiB more at its peak with glibc's upper
bounds, and its nanny killed it at 95 % on a busy machine. A process whose environment sets
``MALLOC_MMAP_THRESHOLD_`` itself keeps its own choice; elsewhere than glibc it does nothing.
The worker extension calls it once per worker (:func:`tensorvm.runtime.worker_extension.install`).
"""
from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os

_log = logging.getLogger("tensorvm")

MMAP_THRESHOLD = 32 << 20  # glibc's DEFAULT_MMAP_THRESHOLD_MAX on 64-bit
TRIM_THRESHOLD = 2 * MMAP_THRESHOLD  # glibc raises the trim threshold to twice it
LIMIT_SHARE = 16  # free heap kept: at most this share of a worker's memory limit
MIN_MMAP_THRESHOLD = 128 << 10  # glibc's default (and the floor of its adaptive rule)
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # mallopt parameters (malloc.h)
_done = False


def thresholds(memory_limit: int | None = None) -> tuple[int, int]:
    """The (mmap, trim) thresholds for a process with ``memory_limit`` bytes (None or 0: no
    limit).

    >>> [t >> 20 for t in thresholds()], [t >> 20 for t in thresholds(4 << 30)]
    ([32, 64], [32, 64])
    >>> [t >> 20 for t in thresholds(320 << 20)]
    [10, 20]
    """
    trim = TRIM_THRESHOLD
    if memory_limit:
        trim = min(trim, max(memory_limit // LIMIT_SHARE, 2 * MIN_MMAP_THRESHOLD))
    return trim // 2, trim


def keep_freed_heap(memory_limit: int | None = None) -> bool:
    """Set this process's glibc malloc thresholds for a worker of ``memory_limit`` bytes (see
    the module docstring), once; True if they were set, False if not (not glibc, or
    ``MALLOC_MMAP_THRESHOLD_`` given)."""
    global _done
    if _done:
        return True
    if "MALLOC_MMAP_THRESHOLD_" in os.environ:
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # not glibc (musl, macOS): nothing to set
        return False
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    mmap, trim = thresholds(memory_limit)
    ok = mallopt(_M_MMAP_THRESHOLD, mmap) == 1 and mallopt(_M_TRIM_THRESHOLD, trim) == 1
    if not ok:
        _log.debug("tensorvm: mallopt refused the heap thresholds")
    _done = ok
    return ok
