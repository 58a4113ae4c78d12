"""What kernels of the VM ask of the layers above it, registered by those layers.

A loop kernel compiles its body into a plan (the graph passes do that) and, run across worker
processes, exchanges values through the direct plane's rendezvous with the workers that hold
its other devices (the runtime does that). The op families and the passes are siblings above
the VM, and the runtime is above both, so the providers register here when they are imported
(``import tensorvm`` imports them all), as TF's kernels reach the function runtime and the
rendezvous through their ``OpKernelContext`` rather than by importing them.

>>> provide("example", len)
>>> service("example")("abc")
3
"""
from __future__ import annotations

from typing import Callable

_PROVIDED: dict[str, Callable] = {}


def provide(name: str, fn: Callable) -> None:
    """Register ``fn`` as the service ``name`` (the last registration wins)."""
    _PROVIDED[name] = fn


def service(name: str) -> Callable:
    """The function registered as ``name``; a clear error where its layer was never imported."""
    try:
        return _PROVIDED[name]
    except KeyError:
        raise RuntimeError(f"no {name!r} service is registered: import tensorvm (the layer "
                           "that provides it registers it when imported)") from None
