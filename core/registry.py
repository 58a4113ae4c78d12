"""The op registry: one :class:`OpDef` per op type, holding everything about it in one place —
its shape/dtype rule, whether it is stateful, its gradient and one kernel per device type.

Kernels are plain functions ``kernel(*input_values, **attrs)`` returning one value, or a tuple
when the op has several outputs. A kernel registered with ``needs_ctx=True`` gets a
:class:`tensorvm.runtime.KernelContext` first (resources, step id, the op's name).

>>> import numpy as np
>>> from tensorvm.registry import get_op_def
>>> get_op_def("Add").kernels["CPU"](np.ones(2), np.ones(2))
array([2., 2.])

Registration refuses to overwrite an op silently (like fsspec's ``clobber=False``); the CuPy
backend adds ``"GPU"`` kernels on import of ``tensorvm.kernels_gpu``.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Callable

from . import dtypes as _dt
from .errors import InvalidArgumentError, NotFoundError
from .graph import Tensor, _user_location, get_default_graph


@dataclass
class OpDef:
    type: str
    shape_fn: Callable  # (inputs: list[Tensor], attrs: dict) -> list[(DType, shape)]
    kernels: dict[str, Callable] = field(default_factory=dict)
    grad_fn: Callable | None = None  # (op, *out_grads) -> list of input grads (or None)
    stateful: bool = False
    needs_ctx: bool = False
    differentiable: bool = True  # False: gradient is None for every input (def_no_gradient)
    foldable: bool = True  # stateless ops may still refuse constant folding (py_func)
    shape_only: tuple = ()  # inputs whose value is never read, only their shape (OnesLike)


_REGISTRY: dict[str, OpDef] = {}
registry = MappingProxyType(_REGISTRY)


def register_op(op_type: str, shape_fn: Callable, kernel: Callable | None = None, *,
                grad: Callable | None = None, stateful: bool = False, needs_ctx: bool = False,
                differentiable: bool = True, foldable: bool = True, shape_only: tuple = (),
                clobber: bool = False) -> OpDef:
    if op_type in _REGISTRY and not clobber:
        raise ValueError(f"op type {op_type!r} is already registered")
    d = OpDef(op_type, shape_fn, {"CPU": kernel} if kernel else {}, grad, stateful, needs_ctx,
              differentiable, foldable and not stateful, tuple(shape_only))
    _REGISTRY[op_type] = d
    return d


def register_kernel(op_type: str, device_type: str, kernel: Callable,
                    clobber: bool = False) -> None:
    d = get_op_def(op_type)
    if device_type in d.kernels and not clobber:
        raise ValueError(f"{op_type} already has a {device_type} kernel")
    d.kernels[device_type] = kernel


def register_gradient(op_type: str):
    """Decorator: ``@register_gradient("MyOp") def _grad(op, grad): ...``."""
    def deco(fn):
        get_op_def(op_type).grad_fn = fn
        return fn
    return deco


def get_op_def(op_type: str) -> OpDef:
    try:
        return _REGISTRY[op_type]
    except KeyError:
        raise NotFoundError(f"no op type {op_type!r} is registered") from None


# ---- building ops -----------------------------------------------------------------------------

def convert_to_tensor(value, dtype=None, name: str | None = None, graph=None) -> Tensor:
    """A Tensor as is (checked against ``dtype``), a Variable's value, or a new constant."""
    if isinstance(value, Tensor):
        if dtype is not None and _dt.as_dtype(dtype) != value.dtype:
            raise InvalidArgumentError(
                f"tensor {value.name!r} has dtype {value.dtype.name}, expected "
                f"{_dt.as_dtype(dtype).name}")
        return value
    if hasattr(value, "_as_graph_element"):
        return convert_to_tensor(value._as_graph_element(), dtype, name, graph)
    if isinstance(value, (list, tuple)) and any(isinstance(v, Tensor) or
                                                hasattr(v, "_as_graph_element")
                                                for v in value):
        from .ops.array_ops import stack
        return stack([convert_to_tensor(v, dtype) for v in value], name=name or "packed")
    from .ops.array_ops import constant
    return constant(value, dtype=dtype, name=name or "Const", graph=graph)


def _graph_of(inputs, graph=None):
    if graph is not None:
        return graph
    for t in inputs:
        if isinstance(t, Tensor):
            return t.graph
        if hasattr(t, "_as_graph_element"):
            return t._as_graph_element().graph
    return get_default_graph()


def apply_op(op_type: str, inputs: list, attrs: dict | None = None, name: str | None = None,
             graph=None, colocation: str | None = None):
    """Create an op of ``op_type``: convert inputs, infer output dtypes/shapes (failing here, at
    construction, with the op name and the user's line), add it to the graph.

    Returns the Operation; op functions return ``op.outputs[0]`` or the outputs tuple.
    """
    d = get_op_def(op_type)
    attrs = dict(attrs or {})
    g = _graph_of(inputs, graph)
    tensors = []
    for x in inputs:
        t = convert_to_tensor(x, graph=g)
        if t.graph is not g:
            raise InvalidArgumentError(
                f"{op_type} {name or ''!s}: input {t.name!r} (created at {t.op.location}) is "
                f"from a different graph than the op's other inputs")
        tensors.append(t)
    try:
        specs = d.shape_fn(tensors, attrs)
    except InvalidArgumentError as e:
        where = _user_location()
        raise type(e)(f"{e.message}\n  while building op {g.unique_name(name or op_type, False)!r}"
                      f" ({op_type}), created at {where}") from None
    except (ValueError, TypeError, IndexError) as e:
        where = _user_location()
        raise InvalidArgumentError(
            f"{e}\n  while building op {g.unique_name(name or op_type, False)!r} ({op_type}), "
            f"created at {where}") from None
    return g.create_op(op_type, tensors, attrs, specs, name=name, colocation=colocation)
