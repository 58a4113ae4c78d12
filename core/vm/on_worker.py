"""Where tensorvm keeps its state in a Dask worker process: one object at
``worker.extensions["tensorvm"]`` (:class:`tensorvm.runtime.worker_extension.TensorvmExtension`,
installed by the one worker plugin), as Dask's P2P shuffle keeps its state at
``worker.extensions["shuffle"]``. The VM and the op families find a worker's resources through
:func:`extension_of`; nothing is hung on the ``Worker`` object itself.
"""
from __future__ import annotations

from ..framework.errors import FailedPreconditionError

EXTENSION = "tensorvm"  # the key of tensorvm's extension in ``Worker.extensions``


def extension_of(worker):
    """tensorvm's extension of a Dask worker (its resources, registered plans, data plane);
    FailedPreconditionError where the worker plugin was never installed on it."""
    ext = worker.extensions.get(EXTENSION)
    if ext is None:
        raise FailedPreconditionError(
            f"the Dask worker {getattr(worker, 'address', '?')} has no tensorvm extension: a "
            "session installs it (tensorvm.runtime.worker_extension.TensorvmWorkerPlugin) "
            "when it connects")
    return ext
