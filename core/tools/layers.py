"""The layers of the ``tensorvm`` package, bottom first, and the imports that run up them.

``core/`` is laid out by layer, as TensorFlow's ``python/framework/`` ← ``python/ops/`` ←
``python/training/``: the IR (``framework``) ← the virtual machine (``vm``: interpreter,
resources, kernel namespaces) ← the op families (``ops``) and the graph passes (``passes``) ←
``runtime`` (session, Dask plane, direct plane, cluster mapping) ← ``tf_api`` (the TF 1.x
surface) ← ``train`` ← ``estimator`` ← the façade ``tensorvm`` itself with its tools and
tutorials. ``storage`` is a leaf below all of it (it imports nothing of tensorvm), and so is
``tensorvm._aliases`` (the old module paths, resolved by name when asked: the façade and
``tensorvm.ops`` use it for ``tv.session``, ``tv.ops.math_ops`` …). ``mapreduce`` and
``scheduler_ext`` sit above core, ``jobs`` (the CLI, with ``python -m tensorvm``'s
``tensorvm.__main__``) on top.

A module may import its own layer and any layer below. Layers of one rank are siblings that
never import each other: ``ops`` and ``passes`` (a pass learns what it needs about an op from
the op table in ``framework.op_registry``, and the plan it compiles to is the VM's, never from an
op family), and ``mapreduce`` and ``scheduler_ext`` (the scheduler plugins take plain data, the
map-reduce API builds graphs). Lazy imports inside functions count as much as module-level ones:
they tie the two modules together all the same. A module name handed to ``importlib`` as a
string is not an import (``tv.nn``'s lazy namespace reaches ``tf_api.rnn`` that way), nor is an
import under ``if TYPE_CHECKING:``. What a kernel needs from above the VM (a loop compiling its
body with the passes, or exchanging values through the runtime's rendezvous) is registered by
that layer in :mod:`tensorvm.vm.services`.

>>> rank("tensorvm.framework.graph") < rank("tensorvm.vm.interpreter") < rank("tensorvm.ops")
True
>>> runs_up("tensorvm.passes.place", "tensorvm.ops.math.math_ops")  # siblings
True
"""
from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the import graph uses this table, not the other way round
    from .imports import ImportSite

# Bottom first; the layers of one rank are siblings. Each layer is the package (folder) of that
# name under ``tensorvm``, except ``core`` (the façade and the modules beside the layer folders),
# ``aliases`` (``tensorvm._aliases``) and ``jobs``, which holds ``tensorvm.__main__`` too.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("storage", "aliases"),
    ("framework",),
    ("vm",),
    ("ops", "passes"),
    ("runtime",),
    ("tf_api",),
    ("train",),
    ("estimator",),
    ("core",),
    ("mapreduce", "scheduler_ext"),
    ("jobs",),
)
_CORE_TOP = ("tensorvm", "tensorvm.tools", "tensorvm.tutorials")
_SINGLE = {"tensorvm._aliases": "aliases", "tensorvm.__main__": "jobs"}


def layer(module: str) -> str:
    """The layer a module of the package belongs to (``KeyError`` for one outside every layer)."""
    if module in _SINGLE:
        return _SINGLE[module]
    if module in _CORE_TOP or module.startswith(tuple(p + "." for p in _CORE_TOP[1:])):
        return "core"
    parts = module.split(".")
    if len(parts) > 1 and parts[0] == "tensorvm" and any(parts[1] in r for r in LAYERS):
        return parts[1]
    raise KeyError(f"{module} is in no layer of tensorvm.tools.layers.LAYERS")


def rank(module: str) -> int:
    """The position of a module's layer in ``LAYERS``, 0 at the bottom."""
    name = layer(module)
    return next(i for i, r in enumerate(LAYERS) if name in r)


def runs_up(importer: str, imported: str) -> bool:
    """Whether ``importer`` importing ``imported`` runs up the layers (or across to a sibling)."""
    if layer(importer) == layer(imported):
        return False
    return rank(imported) >= rank(importer)


def upward_imports(sites: Iterable[ImportSite]) -> list[ImportSite]:
    """The imports among ``sites`` (``imports.import_sites()``) that run up the layers."""
    return [s for s in sites if runs_up(s.importer, s.imported)]


def layer_order() -> str:
    """The layers as one line, bottom first: ``storage <- framework <- vm <- {ops, passes} …``."""
    return " <- ".join(r[0] if len(r) == 1 else "{" + ", ".join(r) + "}" for r in LAYERS)
