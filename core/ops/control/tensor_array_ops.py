"""The TensorArray ops (TF's ``TensorArrayV3`` family) and their kernels and gradients; the
Python API is :class:`tensorvm.ops.control.tensor_array.TensorArray`.

The flow's value is a :class:`~tensorvm.ops.control.tensor_array_value.TensorArrayValue`; kernels store
the arrays they are given (device arrays stay device arrays) and make zeros in the namespace
of an element (``array_namespace``), so one source serves CPU and GPU.
"""
from __future__ import annotations

import numpy as np

from ...framework import dtypes as _dt
from ...framework.errors import InvalidArgumentError, UnimplementedError
from ...vm.kernels.array_api import array_namespace, device_backend, to_device, to_host
from ...framework.op_def_library import apply_op
from ...framework.op_registry import register_op
from .tensor_array_value import MISSING, TensorArrayValue, as_value

__all__: list[str] = []  # the API is tensorvm.ops.control.tensor_array.TensorArray


class _VariantDType(_dt.DType):
    """The flow's dtype: a TensorArray value (a Python object, never a NumPy array) that
    gradients flow through (TF's differentiable ``variant``)."""

    @property
    def is_differentiable(self) -> bool:
        return True


variant = _VariantDType("variant", np.dtype(object))


# ---- shapes, as TF prints them ----------------------------------------------------------------
def _tf_shape(s) -> str:
    """A static shape as TF's TensorShape prints: ``(3,)``, ``(?, 2)``, ``<unknown>``."""
    if s is None:
        return "<unknown>"
    dims = ["?" if d is None else str(d) for d in s]
    return "(" + ", ".join(dims) + ("," if len(dims) == 1 else "") + ")"


def _rt_shape(s) -> str:
    """A shape as TF's kernels print: ``[2]``, ``[?,3]``, ``<unknown>``."""
    return "<unknown>" if s is None else "[" + ",".join("?" if d is None else str(d)
                                                        for d in s) + "]"


def _compatible(a, b) -> bool:
    if a is None or b is None:
        return True
    return len(a) == len(b) and all(x is None or y is None or x == y for x, y in zip(a, b))


def _merge(a, b):
    if a is None:
        return b
    if b is None:
        return a
    return tuple(x if x is not None else y for x, y in zip(a, b))


def _fully_defined(s) -> bool:
    return s is not None and all(d is not None for d in s)


def _tf_dtype_name(dt) -> str:
    return {"float32": "float", "float64": "double", "float16": "half"}.get(dt.name, dt.name)


# ---- kernels ------------------------------------------------------------------------------------
def _zeros(shape, np_dtype, like, ctx):
    """Zeros on the device of ``like`` (an element), else of the op's device."""
    if like is not None:
        return array_namespace(like).zeros(shape, np_dtype)
    z = np.zeros(shape, np_dtype)
    return to_device(z) if "GPU" in ctx.device and device_backend() is not None else z


def _element(v: TensorArrayValue, i: int, ctx):
    x = v.get(i)
    if x is not MISSING:
        return x
    if _fully_defined(v.elem_shape):
        return _zeros(v.elem_shape, v.elem_dtype, v.any_element(), ctx)
    raise InvalidArgumentError(
        f"TensorArray {v.name}: Could not read from TensorArray index {i}.  Furthermore, the "
        f"element shape is not fully defined: {_rt_shape(v.elem_shape)}.  It is possible you "
        "are working with a resizeable TensorArray and stop_gradients is not allowing the "
        "gradients to be written.  If you set the full element_shape property on the forward"
        " TensorArray, the proper all-zeros tensor will be returned instead of incurring this"
        " error.")


def _check_read(v, i):
    if i < 0 or i >= v.size:
        raise InvalidArgumentError(f"Tried to read from index {i} but array size is: {v.size}")


def _stacked(v, idx, ctx):
    if not idx:
        if not _fully_defined(v.elem_shape):
            raise UnimplementedError(
                f"TensorArray has size zero, but element shape {_rt_shape(v.elem_shape)} is "
                "not fully defined. Currently only static shapes are supported when packing "
                "zero-size TensorArrays.")
        return _zeros((0,) + tuple(v.elem_shape), v.elem_dtype, v.any_element(), ctx)
    xs = [_element(v, i, ctx) for i in idx]
    s0 = xs[0].shape
    for k, x in enumerate(xs):
        if x.shape != s0:
            raise InvalidArgumentError(
                f"TensorArray has inconsistent shapes.  Index {idx[0]} has shape: "
                f"{_rt_shape(s0)} but index {idx[k]} has shape: {_rt_shape(x.shape)}")
    return array_namespace(xs[0]).stack(xs)


def _ints(x) -> list[int]:
    return [int(i) for i in np.asarray(to_host(x)).reshape(-1)]


def _new_kernel(ctx, size, *, dtype, element_shape, dynamic_size, infer_shape,
                tensor_array_name=""):
    return TensorArrayValue.new(int(to_host(size)), dynamic=dynamic_size,
                                elem_shape=element_shape, infer_shape=infer_shape,
                                name=tensor_array_name or ctx.op_name,
                                elem_dtype=dtype.np_dtype)


def _write_pairs(v: TensorArrayValue, pairs):
    """``v`` with ``pairs`` written: TF's index and shape checks."""
    size, shape = v.size, v.elem_shape
    for i, x in pairs:
        if i < 0 or (not v.dynamic and i >= v.size):
            raise InvalidArgumentError(
                f"TensorArray {v.name}: Tried to write to index {i} but array is not "
                f"resizeable and size is: {v.size}")
        if not _compatible(tuple(x.shape), shape):
            raise InvalidArgumentError(
                f"TensorArray {v.name}: Could not write to TensorArray index {i} because the "
                f"value shape is {_rt_shape(x.shape)} which is incompatible with the "
                f"TensorArray's inferred element shape: {_rt_shape(shape)} (consider setting "
                "infer_shape=False).")
        if v.infer_shape:
            shape = tuple(x.shape)
        size = max(size, i + 1)
    if len(pairs) == 1:
        return v.written(pairs[0][0], pairs[0][1], size, shape)
    return v.updated(pairs, size=size, elem_shape=shape)


def _write_kernel(flow, index, value):
    return _write_pairs(as_value(flow), [(int(to_host(index)), value)])


def _read_kernel(ctx, flow, index, *, dtype, shape):
    v, i = as_value(flow), int(to_host(index))
    _check_read(v, i)
    return _element(v, i, ctx)


def _gather_kernel(ctx, flow, indices, *, dtype, shape):
    v, idx = as_value(flow), _ints(indices)
    for i in idx:
        _check_read(v, i)
    return _stacked(v, idx, ctx)


def _stack_kernel(ctx, flow, *, dtype, shape):
    v = as_value(flow)
    return _stacked(v, list(range(v.size)), ctx)


def _scatter_kernel(flow, indices, value):
    v, idx = as_value(flow), _ints(indices)
    if len(idx) != value.shape[0]:
        raise InvalidArgumentError(f"Expected len(indices) == values.shape[0], but saw: "
                                   f"{len(idx)} vs. {value.shape[0]}")
    if idx and not v.dynamic and max(idx) >= v.size:
        raise InvalidArgumentError(f"Max scatter index must be < array size ({max(idx)} vs. "
                                   f"{v.size})")
    return _write_pairs(v, [(i, value[k]) for k, i in enumerate(idx)])


def _unstack_kernel(flow, value):
    n = value.shape[0]
    return _scatter_kernel(flow, np.arange(n, dtype=np.int32), value)


def _concat_kernel(ctx, flow, *, dtype, shape):
    v = as_value(flow)
    xs = [_element(v, i, ctx) for i in range(v.size)]
    for i, x in enumerate(xs):
        if x.ndim == 0:
            raise InvalidArgumentError(f"Concat saw a scalar shape at index {i} but requires "
                                       "at least vectors.")
    lengths = np.asarray([x.shape[0] for x in xs], np.int64)
    if not xs:
        return _zeros((0,) + tuple((v.elem_shape or (None,))[1:]), v.elem_dtype, None, ctx), lengths
    return array_namespace(xs[0]).concatenate(xs), lengths


def _split_kernel(flow, value, lengths):
    v, ls = as_value(flow), _ints(lengths)
    if sum(ls) != value.shape[0]:
        raise InvalidArgumentError(
            f"Expected sum of lengths to be equal to values.shape[0], but sum of lengths is "
            f"{sum(ls)} and value's shape is: {_rt_shape(value.shape)}")
    offs = np.cumsum([0] + ls)
    return _write_pairs(v, [(i, value[offs[i]:offs[i + 1]]) for i in range(len(ls))])


def _size_kernel(flow):
    return np.asarray(as_value(flow).size, np.int32)


# ---- gradient arrays ----------------------------------------------------------------------------
def _grad_scatter_kernel(*ins, mode):
    """A gradient array holding ``g`` at ``index`` ("one"), ``g[k]`` at ``indices[k]``
    ("many"), ``g[k]`` at ``k`` ("all") or ``g`` split by ``lengths`` ("split")."""
    if mode == "one":
        return TensorArrayValue.grad_one(int(to_host(ins[0])), ins[1])
    if mode == "many":
        pairs = [(i, ins[1][k]) for k, i in enumerate(_ints(ins[0]))]
    elif mode == "all":
        pairs = [(k, ins[0][k]) for k in range(ins[0].shape[0])]
    else:
        offs = np.cumsum([0] + _ints(ins[1]))
        pairs = [(k, ins[0][offs[k]:offs[k + 1]]) for k in range(len(offs) - 1)]
    return TensorArrayValue.empty_grad().updated(pairs)


def _grad_gather_kernel(*ins, mode):
    """The gradient of a write's value(s) from the written array's gradient array ``flow``:
    its elements at the index (indices, all of ``like``'s rows, ``like``'s split), zeros where
    it has none."""
    v, like = as_value(ins[0]), ins[-1]
    xp = array_namespace(like)

    def at(i, shape):
        x = v.get(i)
        return xp.zeros(shape, like.dtype) if x is MISSING else x

    if mode == "one":
        return at(int(to_host(ins[1])), like.shape)
    if mode == "split":
        ls = _ints(ins[1])
        parts = [at(k, (n,) + like.shape[1:]) for k, n in enumerate(ls)]
        return xp.concatenate(parts) if parts else xp.zeros_like(like)
    idx = _ints(ins[1]) if mode == "many" else range(like.shape[0])
    parts = [at(i, like.shape[1:]) for i in idx]
    return xp.stack(parts) if parts else xp.zeros_like(like)


# ---- the op table -------------------------------------------------------------------------------
def _flow_out(inputs, attrs):
    return [(variant, ())]


def _value_out(inputs, attrs):
    return [(attrs["dtype"], attrs["shape"])]


def _write_grad(op, g):
    return [g, None, _grad_gather(g, op.inputs[1], op.inputs[2], "one")]


def _read_grad(op, g):
    return [_grad_scatter([op.inputs[1], g], "one"), None]


def _gather_grad(op, g):
    return [_grad_scatter([op.inputs[1], g], "many"), None]


def _stack_grad(op, g):
    return [_grad_scatter([g], "all")]


def _scatter_grad(op, g):
    return [g, None, _grad_gather(g, op.inputs[1], op.inputs[2], "many")]


def _unstack_grad(op, g):
    return [g, _grad_gather(g, None, op.inputs[1], "all")]


def _concat_grad(op, g, _g_lengths):
    return [_grad_scatter([g, op.outputs[1]], "split")]


def _split_grad(op, g):
    return [g, _grad_gather(g, op.inputs[2], op.inputs[1], "split"), None]


register_op("TensorArrayV3", _flow_out, _new_kernel, differentiable=False, foldable=False,
            needs_ctx=True)
register_op("TensorArrayWriteV3", _flow_out, _write_kernel, grad=_write_grad, foldable=False)
register_op("TensorArrayReadV3", _value_out, _read_kernel, grad=_read_grad, foldable=False,
            needs_ctx=True)
register_op("TensorArrayGatherV3", _value_out, _gather_kernel, grad=_gather_grad,
            foldable=False, needs_ctx=True)
register_op("TensorArrayStack", _value_out, _stack_kernel, grad=_stack_grad, foldable=False,
            needs_ctx=True)
register_op("TensorArrayScatterV3", _flow_out, _scatter_kernel, grad=_scatter_grad,
            foldable=False)
register_op("TensorArrayUnstack", _flow_out, _unstack_kernel, grad=_unstack_grad,
            foldable=False)
register_op("TensorArrayConcatV3",
            lambda inputs, attrs: [(attrs["dtype"], attrs["shape"]), (_dt.int64, (None,))],
            _concat_kernel, grad=_concat_grad, foldable=False, needs_ctx=True)
register_op("TensorArraySplitV3", _flow_out, _split_kernel, grad=_split_grad, foldable=False)
register_op("TensorArraySizeV3", lambda inputs, attrs: [(_dt.int32, ())], _size_kernel,
            differentiable=False, foldable=False)
register_op("TensorArrayCloseV3", lambda inputs, attrs: [], lambda flow: (),
            differentiable=False, foldable=False)
register_op("TensorArrayGradScatter", _flow_out, _grad_scatter_kernel, differentiable=False,
            foldable=False)
register_op("TensorArrayGradGather",
            lambda inputs, attrs: [(inputs[-1].dtype, inputs[-1]._shape)],
            _grad_gather_kernel, differentiable=False, foldable=False)


def _grad_scatter(inputs, mode):
    return apply_op("TensorArrayGradScatter", inputs, {"mode": mode}).outputs[0]


def _grad_gather(g, indices, like, mode):
    ins = [g] + ([] if indices is None else [indices]) + [like]
    return apply_op("TensorArrayGradGather", ins, {"mode": mode}).outputs[0]

