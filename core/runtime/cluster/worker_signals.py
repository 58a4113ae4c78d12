"""Worker preload: the worker processes of a cluster tensorvm starts ignore Ctrl-C.

A terminal's Ctrl-C sends SIGINT to its whole foreground process group, and the worker
processes that a LocalCluster's Nannies spawn are in it. Each then died of its own
``KeyboardInterrupt`` — ~30 lines of asyncio and multiprocessing traceback per worker on the
user's terminal (issue 25), and Nannies busy restarting workers while the program closed them.
The program that started the cluster owns the interruption: it stops its step, closes its
cluster, and so its workers. A worker never outlives that program either way: a Nanny's child
exits when its parent's pipe closes (``distributed.process``), even after a kill -9.

``start_local_cluster`` gives every worker this module as a Dask worker preload
(``WORKER_PRELOAD``); it runs in the worker process's main thread before the worker serves.
"""
from __future__ import annotations

import signal
import threading


def dask_setup(worker) -> None:
    """Ignore SIGINT in this worker process (Dask's preload hook)."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.SIG_IGN)
