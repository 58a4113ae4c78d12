"""A worker's freed C heap is reused by the next kernel's temporaries (issue 23, equal
resources): Dask starts workers with ``MALLOC_TRIM_THRESHOLD_=65536``, which pins glibc's
mmap threshold at 128 KiB, so every NumPy temporary of a map task was a fresh mapping,
faulted in page by page (the 200 MB word count's workers: 2.28 CPU-s a run, 1.68 with the
heap kept). The worker extension sets the thresholds back to glibc's own upper bounds
(:mod:`tensorvm.vm.kernels.malloc`)."""
import os
import resource

import numpy as np
import pytest

pytestmark = pytest.mark.cluster

TV_CLUSTER = {"worker": 1}
TV_CLUSTER_SHARED = True  # kills no worker, leaves no state

MIB = 1 << 20  # 256 pages of 4 KiB (below the size NumPy asks huge pages for)


def _refill_faults() -> tuple:
    """Minor page faults of filling a 1 MiB array after two of the same size were made and
    freed, and this process's MALLOC_TRIM_THRESHOLD_."""
    for _ in range(2):
        a = np.ones(MIB, np.uint8)
        del a
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    b = np.ones(MIB, np.uint8)
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
    del b
    return faults, os.environ.get("MALLOC_TRIM_THRESHOLD_")


def test_a_freed_temporary_is_reused_not_mapped_again(tv_cluster):
    (faults, trim), = tv_cluster.client.run(_refill_faults).values()
    assert trim is not None, "the premise: Dask's nanny set MALLOC_TRIM_THRESHOLD_"
    # a fresh mapping faults in all 256 pages; a reused heap block none (a few from the
    # worker's other threads meanwhile)
    assert faults < 64, f"{faults} page faults: the array was mapped afresh"


def test_keep_freed_heap_leaves_an_explicit_choice(monkeypatch):
    from tensorvm.vm.kernels import malloc
    monkeypatch.setattr(malloc, "_done", False)
    monkeypatch.setenv("MALLOC_MMAP_THRESHOLD_", "131072")
    assert malloc.keep_freed_heap() is False


def _kept_after_free(n: int, size: int) -> int:
    """Bytes of resident memory still held after making and freeing ``n`` arrays of ``size``
    bytes at once (each below the mmap threshold, so from the heap)."""
    import psutil
    me = psutil.Process()
    before = me.memory_info().rss
    arrays = [np.ones(size, np.uint8) for _ in range(n)]
    del arrays
    return me.memory_info().rss - before


def test_a_worker_with_a_small_memory_limit_keeps_little_free_heap():
    """Before: every worker kept up to 64 MiB of freed heap (glibc's upper bounds), whatever
    its memory limit; Dask's monitor counts it against the worker, and a 320 MiB worker of a
    storage shuffle (test_mapreduce_memory) peaked ~30 MiB higher and was killed at 95 % on a
    busy machine. Now a worker keeps at most 1/16 of its limit (20 MiB here)."""
    from distributed import Client, LocalCluster
    limit = 320 * MIB
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=True, host="127.0.0.1",
                      memory_limit=limit, dashboard_address=None) as lc, Client(lc) as c:
        import tensorvm as tv
        with tv.Session(lc.scheduler_address, graph=tv.Graph(), verbose=False):
            kept, = c.run(_kept_after_free, 3, 8 * MIB).values()
    assert kept <= limit // 16, f"{kept / MIB:.1f} MiB of freed heap kept"
