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

How an op runs on a GPU is a fact of its OpDef too: :attr:`OpDef.gpu` ``"same"`` (its CPU
kernel is written against the array namespace of its inputs, so it runs on CuPy arrays as it
is), ``"host"`` (its CPU kernel runs on host copies, its outputs uploaded), or
:attr:`OpDef.cpu_only` with the reason placement reports (string ops, ``py_func``, queues,
readers, savers …). An op says so where it is registered, or a family declares it for the
ops it names (:func:`declare_gpu`); :func:`tensorvm.vm.kernels.array_api.install` turns the
facts into ``"GPU"`` kernels.

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

    ``gpu``: how the op runs on a GPU device when it has no GPU kernel registered: ``"same"``
    — its CPU kernel serves (one source: it computes with the array namespace of its inputs,
    so on CuPy arrays it runs on the GPU); ``"host"`` — its CPU kernel runs on host copies of
    its inputs and its outputs are uploaded (the host's random generator: a seed draws the same
    numbers on both device types); ``""`` — not declared. ``cpu_only`` instead says why it has
    no GPU kernel at all.

    ``arrow``: the kernel takes Arrow string values as well as NumPy ones (and gives Arrow
    string outputs, NumPy for the rest), so a map-reduce function's records may stay Arrow
    through it (:func:`tensorvm.ops.mapreduce.mapreduce_ops.arrow_safe`).

    ``reads_only``: a stateful op that changes no state (it reads a variable): a step that ran
    it has changed nothing, so a timed-out step does not name it among the stateful ops that
    may already have run.

    ``idempotent``: a stateful op that may run again with the same result (it writes a file
    named by its task and attempt, which a commit takes once): placement may float it with the
    stateless ops (``/job:J/task:*``), where Dask may run it twice.

    ``commits``: a stateful op that begins something the rest of its stage must finish (the
    ``LedgerClaim`` of ``tv.train.exactly_once``: once it has recorded a step's token, the
    updates it gates must all run, or a re-run of the step would be dropped with them half
    applied). Once it has run, the stage's remaining ops run even if the step is cancelled.

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
    gpu: str = ""  # "" (undeclared), "same" or "host": see the class docstring
    arrow: bool = False  # the kernel takes and gives Arrow string values: see above
    reads_only: bool = False  # stateful, but changes no state: see above
    idempotent: bool = False  # stateful, but safe to run again: see above
    commits: bool = False  # once it ran, its stage is not cancelled: see above


WAITS = ("", "never", "steps")  # the values of OpDef.waits
GPU_CLASSES = ("", "same", "host")  # the values of OpDef.gpu
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
                cpu_only: str = "", waits: str = "", forwards: tuple = (), gpu: str = "",
                arrow: bool = False, reads_only: bool = False, idempotent: bool = False,
                commits: bool = False, clobber: bool = False) -> OpDef:
    """Add an op type to the table (``clobber=True`` to replace one); ``cpu_only`` says why
    the op can have no GPU kernel, ``gpu`` how its CPU kernel serves on a GPU (see
    :class:`OpDef`). A family's :func:`declare_gpu` naming the op applies here too."""
    if op_type in _REGISTRY and not clobber:
        raise ValueError(f"op type {op_type!r} is already registered")
    if waits not in WAITS:
        raise ValueError(f"waits must be one of {WAITS}, got {waits!r}")
    declared = _DECLARED_GPU.get(op_type)
    if declared and (gpu or cpu_only) and (gpu, cpu_only) != declared:
        raise ValueError(f"{op_type}: registered with gpu={gpu!r}, cpu_only={cpu_only!r}, but "
                         f"its family declared gpu={declared[0]!r}, cpu_only={declared[1]!r}")
    gpu, cpu_only = _gpu_facts(op_type, *(declared or (gpu, cpu_only)))
    d = OpDef(op_type, shape_fn, {"CPU": kernel} if kernel else {}, grad, stateful, needs_ctx,
              differentiable, foldable and not stateful and not control_flow,
              tuple(shape_only), pass_through, gpu_fallback, control_flow, forwards_dead,
              cpu_only, waits, tuple(forwards), gpu, arrow, reads_only, idempotent, commits)
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


def _gpu_facts(op_type: str, gpu: str, cpu_only: str) -> tuple[str, str]:
    if gpu not in GPU_CLASSES:
        raise ValueError(f"{op_type}: gpu must be one of {GPU_CLASSES}, got {gpu!r}")
    if gpu and cpu_only:
        raise ValueError(f"{op_type}: an op with a GPU class ({gpu!r}) cannot be CPU-only")
    return gpu, cpu_only


# GPU facts a family declared by op name (declare_gpu), applied when the op is registered.
_DECLARED_GPU: dict[str, tuple[str, str]] = {}


def declare_gpu(op_types, gpu: str = "", cpu_only: str = "") -> None:
    """A family's declaration of how the ops it names run on a GPU: ``gpu`` (``"same"`` or
    ``"host"``, see :class:`OpDef`) or ``cpu_only`` (the reason there is no GPU kernel).
    ``op_types`` is a list of names, or one string of names separated by spaces. An op already
    registered gets the facts now, any other when it is registered.

    >>> get_op_def("RandomUniform").gpu, get_op_def("MatMul").gpu  # declared by array_api
    ('host', 'same')
    """
    names = op_types.split() if isinstance(op_types, str) else list(op_types)
    for op_type in names:
        facts = _gpu_facts(op_type, gpu, cpu_only)
        if not (gpu or cpu_only):
            raise ValueError(f"declare_gpu({op_type!r}) needs a GPU class or a CPU-only reason")
        _DECLARED_GPU[op_type] = facts
        d = _REGISTRY.get(op_type)
        if d is not None:
            if cpu_only and "GPU" in d.kernels:
                raise ValueError(f"{op_type} has a GPU kernel; it cannot be CPU-only")
            d.gpu, d.cpu_only = facts
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
        load_all_ops()
    try:
        return _REGISTRY[op_type]
    except KeyError:
        raise NotFoundError(f"no op type {op_type!r} is registered") from None


# Importers of op modules that the package loads on first use (``import tensorvm`` leaves
# ``tv.train``'s and ``tv.data``'s modules for later): an op type missing from the table may be
# one of theirs. Each loader is idempotent and cheap once it has run.
_OP_LOADERS: list[Callable[[], None]] = []


def add_op_loader(load: Callable[[], None]) -> None:
    """Register ``load``, which imports op modules not imported yet (:func:`load_all_ops`)."""
    if load not in _OP_LOADERS:
        _OP_LOADERS.append(load)


def load_all_ops() -> None:
    """Import every op module the package loads lazily, so the table holds every op type of
    tensorvm (a process that unpickles a plan may not have imported the modules of its ops).
    Called where an op type is looked up and missing: :func:`get_op_def`, the interpreter's
    kernel table, a GraphDef's import."""
    for load in tuple(_OP_LOADERS):
        load()
