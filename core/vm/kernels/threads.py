"""BLAS threads per executing thread: kernels must not oversubscribe the cores.

Dask runs a step's tasks on several threads (in process, and in every worker), and each
NumPy matrix product would start a BLAS thread pool of its own as wide as the machine: on two
cores, two Dask threads × two OpenBLAS threads × the other processes of the machine spin
against each other, and a training step slows 5-8x under load (issue 14: an MLP took 22.9 s
with the default BLAS threads and 3.5 s with one). TF sizes its intra-op pool once per
process; tensorvm does the same for the BLAS libraries NumPy loaded, through ``threadpoolctl``.

The number of BLAS threads each executing thread may use is ``TENSORVM_BLAS_THREADS`` in the
environment (a worker process inherits it), else :func:`set_blas_threads`, else 1: OpenBLAS's
own threads spin while they wait, and under load two of them made a training step 3-10x
slower (measured on this 2-core machine, ``bench/bench_tf_programs.py``).

The parallelism of one large kernel comes from an *intra-op pool* instead, as TF's: a big
matrix product (a convolution's) is cut by rows into one block per pool thread, each a
one-BLAS-thread product (:func:`matmul`); its threads block rather than spin. Its width is
``tv.ConfigProto(intra_op_parallelism_threads=N)`` (N > 0, via :func:`set_intra_op_threads`),
else ``TENSORVM_INTRA_OP_THREADS``, else 1 (off): on this shared 2-core machine two pool
threads made a CNN's convolutions 1.4x faster when it was quiet, but under load (load
average 5) they made an MLP 1.4x slower and the CNN no faster, so the pool is opt-in.

:func:`ensure_blas_limit` is what the stage interpreter calls before running a task: one
comparison when nothing changed. The limit is process-wide (the BLAS libraries have one
setting per process), so it also applies to the program's own NumPy calls in this process.

>>> set_blas_threads(1)
>>> ensure_blas_limit()
1
>>> import numpy as np
>>> a = np.ones((4, 3), np.float32)
>>> matmul(a, a.T).shape
(4, 4)
"""
from __future__ import annotations

import itertools
import logging
import os
import threading

from . import cpu_accel

_log = logging.getLogger("tensorvm")

ENV = "TENSORVM_BLAS_THREADS"

_lock = threading.Lock()
_configured: int | None = None  # from ConfigProto / set_blas_threads
_applied: int | None = None  # what the BLAS libraries were last set to
_controller = None  # threadpoolctl.ThreadpoolController, made once


def wanted_blas_threads() -> int:
    """The BLAS threads each executing thread may use (see the module docstring)."""
    env = os.environ.get(ENV)
    if env:
        try:
            n = int(env)
            if n > 0:
                return n
        except ValueError:
            pass
        _log.warning("tensorvm: ignoring %s=%r (expected a positive integer)", ENV, env)
    return _configured if _configured else 1


def set_blas_threads(n: int | None) -> None:
    """Ask for ``n`` BLAS threads per executing thread (``None`` or 0: back to the default);
    takes effect at the next task (or :func:`ensure_blas_limit`)."""
    global _configured
    if n is not None and int(n) < 0:
        raise ValueError(f"BLAS threads must be >= 0, got {n}")
    _configured = int(n) if n else None


_SCRATCH = threading.local()  # per-thread caches a kernel may keep within one task


def begin_task() -> None:
    """Called by the stage interpreter as a task starts on this thread: the BLAS limit, and
    a fresh per-thread scratch (:func:`scratch`), so nothing a kernel cached outlives its
    task (the program may change a fed array in place between steps)."""
    ensure_blas_limit()
    if _SCRATCH.__dict__:
        _SCRATCH.__dict__.clear()


def scratch():
    """This thread's scratch namespace for the task it runs (emptied by :func:`begin_task`)."""
    return _SCRATCH


def ensure_blas_limit() -> int:
    """Set the process's BLAS thread pools to :func:`wanted_blas_threads` if they are not
    already; return that number. Cheap when nothing changed (one comparison)."""
    global _applied, _controller
    n = wanted_blas_threads()
    if n == _applied:
        return n
    with _lock:
        if n != _applied:
            try:
                if _controller is None:
                    from threadpoolctl import ThreadpoolController
                    _controller = ThreadpoolController()
                _controller.limit(limits=n, user_api="blas")
            except Exception:  # noqa: BLE001 - no BLAS found, or an odd one: run unlimited
                _log.debug("tensorvm: could not limit BLAS threads", exc_info=True)
            _applied = n
    return n


# ---- the intra-op pool ---------------------------------------------------------------------------
INTRA_ENV = "TENSORVM_INTRA_OP_THREADS"
MIN_PARALLEL_MACS = 1 << 23  # smaller products run whole: a thread hand-off costs ~50 us
_intra: int | None = None
_pool = None  # concurrent.futures.ThreadPoolExecutor, made on first use (TF's intra-op pool)


def set_intra_op_threads(n: int | None) -> None:
    """``ConfigProto(intra_op_parallelism_threads=n)``: the intra-op pool's width (``None``
    or 0: the default)."""
    global _intra
    if n is not None and int(n) < 0:
        raise ValueError(f"intra-op threads must be >= 0, got {n}")
    _intra = int(n) if n else None


def intra_op_threads() -> int:
    if _intra:
        return _intra
    env = os.environ.get(INTRA_ENV)
    if env and env.isdigit() and int(env) > 0:
        return int(env)
    return 1


def matmul(a, b):
    """``a @ b`` for 2-D float arrays: a large product runs in MKL when PyTorch is installed
    (:mod:`tensorvm.vm.kernels.cpu_accel`, with its own intra-op threads), else it is cut by rows of ``a``
    over the intra-op pool (each block one BLAS call writing its rows of the result in
    place)."""
    import numpy as np
    m, k = a.shape
    macs = m * k * b.shape[1]
    if macs >= cpu_accel.MIN_MATMUL_MACS and cpu_accel.wants_matmul(a, b):
        return cpu_accel.matmul(a, b, intra_op_threads())
    if macs < MIN_PARALLEL_MACS:
        return a @ b
    n = intra_op_threads()
    if n < 2 or m < 2 * n:
        return a @ b
    out = np.empty((m, b.shape[1]), np.result_type(a, b))
    bounds = [m * i // n for i in range(n + 1)]
    pool = _get_pool(n)
    futs = [pool.submit(np.matmul, a[lo:hi], b, out=out[lo:hi])
            for lo, hi in itertools.pairwise(bounds[1:])]
    np.matmul(a[:bounds[1]], b, out=out[:bounds[1]])  # the first block in this thread
    for f in futs:
        f.result()
    return out


def _get_pool(n: int):
    global _pool
    if _pool is None or _pool._max_workers < n - 1:
        with _lock:
            if _pool is None or _pool._max_workers < n - 1:
                from concurrent.futures import ThreadPoolExecutor
                _pool = ThreadPoolExecutor(max(1, n - 1), thread_name_prefix="tensorvm-intra-op")
    return _pool
