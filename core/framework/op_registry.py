"""The op table: one :class:`OpDef` per op type, holding everything about it in one place —
its shape/dtype rule, whether it is stateful, its gradient, one kernel per device type, and the
facts the step passes ask about it (may it fold, does it only pass its input through, may it
sit on a GPU device with its CPU kernel).

This module is a leaf of the package (it imports only ``dtypes`` and ``errors``): building ops
is :mod:`tensorvm.framework.op_def_library` (``apply_op``), turning values into tensors is
:mod:`tensorvm.framework.tensor_conversion`.

Kernels are plain functions ``kernel(*input_values, **attrs)`` returning one value, or a tuple
when the op has several outputs. A kernel registered with ``needs_ctx=True`` gets a
:class:`tensorvm.vm.interpreter.KernelContext` first (resources, step id, the op's name).

>>> import numpy as np
>>> from tensorvm.framework.op_registry import get_op_def
>>> get_op_def("Add").kernels["CPU"](np.ones(2), np.ones(2))
array([2., 2.])

GPU kernels come from the same source: :mod:`tensorvm.vm.kernels.array_api` gives every op whose CPU
kernel is written against the array namespace of its inputs that kernel as its ``"GPU"``
kernel (it then runs on CuPy arrays), and marks the exceptions (string ops, ``py_func``,
queues, readers, savers …) :attr:`OpDef.cpu_only`, with the reason placement reports.

Registration refuses to overwrite an op, a kernel or a gradient silently (like fsspec's
``clobber=False``); every registration bumps :func:`generation`, which caches of the table
(the runtime's per-device kernel tables) compare against.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Callable

from .errors import NotFoundError


@dataclass
class OpDef:
    """Everything about one op type.

    ``pass_through``: the op returns its only input unchanged (Identity), so ``optimize`` may
    remove it and gradients may flow through it sparse. ``gpu_fallback``: the op only moves or
    holds data, so on a GPU device it runs with its CPU kernel (placement never needs a GPU
    kernel for it).

    Control flow (TF's Switch/Merge, the op table's eighth category): ``control_flow`` marks an
    op that makes or routes *dead* values (``tensorvm.vm.interpreter.DEAD``, TF's dead tensors): a
    stage holding one runs the interpreter's dead-aware loop, and the passes never fold it,
    never fold through it and never remove an identity that reads it. Every op with a dead
    input (or a dead control input) produces dead outputs without running, except an op that
    ``forwards_dead`` (Merge): its kernel runs and sees the dead markers.

    ``waits`` (for ops with a context): whether the kernel may wait on something outside its
    step. ``""`` — not declared: a stateful op with a context is taken to block like a queue
    or reader op (fed by threads without bound, e.g. queue runners), so its plans stay on the
    Dask data plane, which frees a blocked task's worker slot. ``"never"`` — it never waits.
    ``"steps"`` — it waits only for other steps of one protocol to change state it holds
    (``SyncReplicasOptimizer``'s accumulators and token gate: at most one waiting op per
    replica), waking every 0.2 s to give up when its step is cancelled (a step timeout, a lost
    device), so its plans may run on the direct data plane
    (:func:`tensorvm.runtime.direct.registered_plans.waits`).

    ``forwards`` (TF's ``forward_input``): indices of inputs whose buffer the kernel may write
    its output into, given as ``out=`` (an element-wise op whose output has that input's shape
    and dtype). The interpreter offers one only when nothing else can see it: the input's slot
    dies with this op, and the array owns its memory, is writeable and is referenced by
    nothing but the interpreter (:func:`tensorvm.vm.interpreter.donatable`); the other inputs must
    broadcast to its shape with its dtype. The kernel must give the bits it gives without
    ``out``.
    """
    type: str
    shape_fn: Callable  # (inputs: list[Tensor], attrs: dict) -> list[(DType, shape)]
    kernels: dict[str, Callable] = field(default_factory=dict)
    grad_fn: Callable | None = None  # (op, *out_grads) -> list of input grads (or None)
    stateful: bool = False
    needs_ctx: bool = False
    differentiable: bool = True  # False: gradient is None for every input (def_no_gradient)
    foldable: bool = True  # stateless ops may still refuse constant folding (py_func)
    shape_only: tuple = ()  # inputs whose value is never read, only their shape (OnesLike)
    pass_through: bool = False
    gpu_fallback: bool = False
    control_flow: bool = False
    forwards_dead: bool = False
    # Why the op has no GPU kernel (host-only: string tensors, py_func, I/O, queues …); empty
    # when it may have one. Placement quotes it when a GPU op falls back to CPU.
    cpu_only: str = ""
    waits: str = ""  # "" (undeclared), "never" or "steps": see the class docstring
    forwards: tuple = ()  # inputs whose buffer the kernel may write into (out=): see above


WAITS = ("", "never", "steps")  # the values of OpDef.waits
_REGISTRY: dict[str, OpDef] = {}
registry = MappingProxyType(_REGISTRY)
_generation = itertools.count(1)
_current_generation = 0


def generation() -> int:
    """A counter bumped by every registration (op, kernel or gradient), never reused."""
    return _current_generation


def _bump() -> None:
    global _current_generation
    _current_generation = next(_generation)


def register_op(op_type: str, shape_fn: Callable, kernel: Callable | None = None, *,
                grad: Callable | None = None, stateful: bool = False, needs_ctx: bool = False,
                differentiable: bool = True, foldable: bool = True, shape_only: tuple = (),
                pass_through: bool = False, gpu_fallback: bool = False,
                control_flow: bool = False, forwards_dead: bool = False,
                cpu_only: str = "", waits: str = "", forwards: tuple = (),
                clobber: bool = False) -> OpDef:
    """Add an op type to the table (``clobber=True`` to replace one); ``cpu_only`` says why
    the op can have no GPU kernel."""
    if op_type in _REGISTRY and not clobber:
        raise ValueError(f"op type {op_type!r} is already registered")
    if waits not in WAITS:
        raise ValueError(f"waits must be one of {WAITS}, got {waits!r}")
    d = OpDef(op_type, shape_fn, {"CPU": kernel} if kernel else {}, grad, stateful, needs_ctx,
              differentiable, foldable and not stateful and not control_flow,
              tuple(shape_only), pass_through, gpu_fallback, control_flow, forwards_dead,
              cpu_only, waits, tuple(forwards))
    _REGISTRY[op_type] = d
    _bump()
    return d


def register_kernel(op_type: str, device_type: str, kernel: Callable,
                    clobber: bool = False) -> None:
    """Give ``op_type`` a kernel for ``device_type`` ("CPU", "GPU")."""
    d = get_op_def(op_type)
    if device_type in d.kernels and not clobber:
        raise ValueError(f"{op_type} already has a {device_type} kernel")
    d.kernels[device_type] = kernel
    _bump()


def set_cpu_only(op_type: str, reason: str) -> None:
    """Mark ``op_type`` as having no GPU kernel, for ``reason`` (shown by placement)."""
    if not reason:
        raise ValueError(f"set_cpu_only({op_type!r}) needs a reason")
    d = get_op_def(op_type)
    if "GPU" in d.kernels:
        raise ValueError(f"{op_type} has a GPU kernel; it cannot be CPU-only")
    d.cpu_only = reason
    _bump()


# Gradient functions registered under a name (TF's ``RegisterGradient`` for
# ``gradient_override_map``), and op types declared without a gradient (``NotDifferentiable``).
_NAMED_GRADIENTS: dict[str, Callable | None] = {}


def register_named_gradient(name: str, fn: Callable | None) -> None:
    """Register ``fn`` (or None: no gradient) under ``name``. An op type's own name also
    becomes that type's gradient when the type is registered and has none."""
    if name in _NAMED_GRADIENTS:
        raise KeyError(f"Registering two gradient with name '{name}'! (Previous registration "
                       "was in this process.)")
    _NAMED_GRADIENTS[name] = fn
    if name in _REGISTRY:
        d = _REGISTRY[name]
        if fn is None:
            d.differentiable = False
            d.grad_fn = None
        elif d.grad_fn is None:
            d.grad_fn, d.differentiable = fn, True
        _bump()


def override_gradient(name: str, op) -> OpDef:
    """The OpDef whose gradient an op of ``op`` mapped to gradient ``name`` uses."""
    import dataclasses
    if name in _NAMED_GRADIENTS:
        fn = _NAMED_GRADIENTS[name]
    elif name in _REGISTRY:  # another op type's gradient ({"Round": "Identity"}: straight-through)
        fn = _REGISTRY[name].grad_fn if _REGISTRY[name].differentiable else None
    else:
        raise LookupError(f"No gradient defined for operation '{op.name}' (op type: {name}): "
                          f"no tv.RegisterGradient({name!r}) and no op type of that name")
    return dataclasses.replace(get_op_def(op.type), grad_fn=fn, differentiable=fn is not None)


def register_gradient(op_type: str, clobber: bool = False):
    """Decorator: ``@register_gradient("MyOp") def _grad(op, grad): ...``.

    Refuses to replace an existing gradient unless ``clobber=True``.
    """
    def deco(fn):
        d = get_op_def(op_type)
        if d.grad_fn is not None and not clobber:
            raise ValueError(f"{op_type} already has a gradient function "
                             f"({getattr(d.grad_fn, '__qualname__', d.grad_fn)}); pass "
                             "clobber=True to replace it")
        d.grad_fn = fn
        d.differentiable = True
        _bump()
        return fn
    return deco


def get_op_def(op_type: str) -> OpDef:
    try:
        return _REGISTRY[op_type]
    except KeyError:
        raise NotFoundError(f"no op type {op_type!r} is registered") from None
