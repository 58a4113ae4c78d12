"""An optional CPU kernel library: PyTorch's oneDNN and MKL kernels, when ``torch`` is installed.

TF 1.x runs its CPU convolutions and matrix products in oneDNN/MKL; NumPy's OpenBLAS reaches
about half of oneDNN's speed on mnist_deep's convolutions and 0.7-0.9x of MKL's on its large
products, one thread each (issue 14, item 10: ``bench/bench_tf_programs.py``). PyTorch ships
both libraries for the CPU, so when it imports (``pip install 'tensorvm[cpu-accel]'``) the
kernels that are worth it hand their NumPy arrays to it: ``torch.from_numpy`` wraps an array
without a copy (strided views included) and the result comes back as a NumPy array. It is never
a dependency: without torch every kernel runs on NumPy, with the same results up to float
rounding (another summation order).

What goes to PyTorch:

* ``Conv2D``, ``Conv2DBackpropInput``, ``Conv2DBackpropFilter`` of float32 arrays
  (:mod:`tensorvm.ops.nn.nn_conv_accel`; oneDNN has no float64 convolutions);
* 2-D float32/float64 matrix products of at least :data:`MIN_MATMUL_MACS` multiply-adds
  (:func:`matmul`, through :func:`tensorvm.vm.kernels.threads.matmul`): below that PyTorch's per-call
  cost outweighs MKL's faster kernel (measured: 64x64x64 0.6x, 128x256x256 1.2x).

Only host NumPy arrays qualify: device (CuPy) arrays keep their one-source kernels.

Which backend runs (:func:`backend`): :func:`set_backend` if called, else the environment
variable ``TENSORVM_CPU_ACCEL`` (a worker process inherits it), else ``"auto"``:

* ``"numpy"`` — always the NumPy kernels;
* ``"torch"`` — PyTorch's (a warning, once, and the NumPy kernels if torch does not import);
* ``"auto"`` — PyTorch's when torch imports (imported lazily, by the first kernel that would
  use it, so ``import tensorvm`` stays light).

PyTorch's intra-op threads follow tensorvm's (:func:`tensorvm.vm.kernels.threads.intra_op_threads`, 1
unless ``ConfigProto(intra_op_parallelism_threads=N)``; the callers pass it), checked before
every call, so its threads never oversubscribe the cores beside Dask's. With more than one,
PyTorch's OpenMP threads spin between kernels, as OpenBLAS's do: on mnist_deep with 2 threads a
step cost 49 ms of CPU for 25 ms of wall time; ``OMP_WAIT_POLICY=PASSIVE`` in the environment
(before the process starts) made it 41 ms of CPU for 27 ms, and the MLP 1.3x slower.

>>> import numpy as np
>>> a = np.ones((2, 3), np.float32)
>>> (matmul(a, a.T) if wants_matmul(a, a.T, force=True) else a @ a.T).tolist()
[[3.0, 3.0], [3.0, 3.0]]
"""
from __future__ import annotations

import logging
import os
import threading
import warnings

import numpy as np

__all__ = [
    "BACKENDS",
    "ENV",
    "MIN_MATMUL_MACS",
    "available",
    "backend",
    "matmul",
    "set_backend",
    "sync_threads",
    "to_torch",
    "torch",
    "wants_matmul",
]

_log = logging.getLogger("tensorvm")

ENV = "TENSORVM_CPU_ACCEL"
BACKENDS = ("auto", "numpy", "torch")
MIN_MATMUL_MACS = 1 << 22

_lock = threading.Lock()
_torch = None  # the torch module once imported; False: it does not import
_chosen: str | None = None  # set_backend
_warned: set = set()


def torch():
    """The ``torch`` module, imported once (``False`` when it is absent or fails to import)."""
    global _torch
    if _torch is None:
        with _lock:
            if _torch is None:
                try:
                    import torch as t
                    # Kernels only read their inputs; a read-only array (a constant, a fed
                    # value, a variable's snapshot) is shared, not copied, so torch's one-time
                    # warning about writing through it does not apply.
                    warnings.filterwarnings("ignore", message="The given NumPy array is not "
                                            "writable", category=UserWarning)
                    _torch = t
                except Exception as e:  # noqa: BLE001 - absent or broken: the NumPy kernels
                    _log.debug("tensorvm: torch does not import (%s); NumPy kernels", e)
                    _torch = False
    return _torch


def available() -> bool:
    """Whether PyTorch imports here (the first call imports it)."""
    return bool(torch())


def set_backend(name: str | None) -> None:
    """Choose the CPU kernel backend: ``"auto"``, ``"numpy"`` or ``"torch"`` (``None``: back
    to ``TENSORVM_CPU_ACCEL``, else ``"auto"``)."""
    global _chosen
    if name is not None and name not in BACKENDS:
        raise ValueError(f"CPU kernel backend must be one of {BACKENDS}, got {name!r}")
    _chosen = name


def _warn_once(key, msg, *args):
    if key not in _warned:
        _warned.add(key)
        _log.warning(msg, *args)


def backend() -> str:
    """The backend the qualifying CPU kernels run on now: ``"torch"`` or ``"numpy"``."""
    want = _chosen or os.environ.get(ENV, "").strip().lower() or "auto"
    if want == "numpy":
        return "numpy"
    if want not in BACKENDS:
        _warn_once(("env", want), "tensorvm: ignoring %s=%r (expected one of %s)", ENV, want,
                   ", ".join(BACKENDS))
    if torch():
        return "torch"
    if want == "torch":
        _warn_once("absent", "tensorvm: %s=torch but torch does not import; NumPy kernels "
                   "(pip install 'tensorvm[cpu-accel]')", ENV)
    return "numpy"


def sync_threads(t, n: int) -> None:
    """torch's intra-op threads := ``n``, tensorvm's (one C call when they already agree)."""
    if t.get_num_threads() != n:
        t.set_num_threads(n)


def to_torch(t, a):
    """A NumPy array as a torch tensor over the same memory (copied only when torch cannot
    share it: negative strides)."""
    if any(s < 0 for s in a.strides):
        a = np.array(a)
    return t.from_numpy(a)


_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


def wants_matmul(a, b, force: bool = False) -> bool:
    """Whether ``a @ b`` runs on PyTorch: 2-D float32/float64 host arrays of one dtype, at
    least :data:`MIN_MATMUL_MACS` multiply-adds (any size with ``force``), the torch backend
    chosen."""
    if type(a) is not np.ndarray or type(b) is not np.ndarray or a.ndim != 2 or b.ndim != 2 \
            or a.dtype != b.dtype or a.dtype not in _FLOATS or a.shape[1] != b.shape[0]:
        return False
    if not force and a.shape[0] * a.shape[1] * b.shape[1] < MIN_MATMUL_MACS:
        return False
    return a.size > 0 and b.size > 0 and backend() == "torch"


def matmul(a, b, n_threads: int = 1):
    """``a @ b`` of 2-D float NumPy arrays in MKL (through PyTorch, ``n_threads`` intra-op
    threads); a NumPy array."""
    t = torch()
    sync_threads(t, n_threads)
    out = np.empty((a.shape[0], b.shape[1]), a.dtype)
    t.mm(to_torch(t, a), to_torch(t, b), out=t.from_numpy(out))
    return out
