"""Array ops: constants, placeholders, identity, shapes, stacking, reshaping, indexing …"""
from __future__ import annotations

import numpy as np

from ...framework import dtypes as _dt
from ...framework.errors import InvalidArgumentError
from ...framework.graph import Tensor, TensorShape
from ...vm.kernels.array_api import to_host
from ...framework.op_def_library import apply_op
from ...framework.op_registry import register_op
from ...framework.tensor_conversion import (
    check_plain_value,
    convert_to_tensor,
    register_tensor_conversion_function,
)
from ..common import asarray, broadcast_shapes

__all__ = ["constant", "placeholder", "placeholder_with_default", "identity", "stop_gradient",
           "stack", "zeros_like", "ones_like", "shape", "reshape", "broadcast_like",
           "no_op", "group", "tuple_"]


# ---- Const ------------------------------------------------------------------------------------
def _const_kernel(*, value, dtype):
    return value


register_op("Const", lambda inputs, attrs: [(attrs["dtype"], attrs["value"].shape)],
            _const_kernel, differentiable=False, gpu_fallback=True)


def constant(value, dtype=None, shape=None, name: str = "Const", graph=None, verify_shape=False):
    """``tv.constant([[1., 2.]], dtype=tv.float32)``; ``shape`` broadcasts a scalar or reshapes.

    ``None``, ragged lists, lists mixing strings with numbers and values of other types (dicts,
    objects) are refused as ``convert_to_tensor`` refuses them (TF's ValueError/TypeError).
    """
    check_plain_value(value)
    dt = _dt.as_dtype(dtype) if dtype is not None else _dt.dtype_of_value(value)
    if (dt.is_integer or dt.is_bool) and not isinstance(value, np.ndarray):
        src = np.asarray(value)
        if src.dtype.kind in "fc" and not np.all(np.mod(src.real, 1) == 0):
            raise InvalidArgumentError(
                f"Expected {dt.name}, got {value!r} of type {type(value).__name__} instead "
                f"(constant {name!r} would lose data)")
    try:
        arr = _dt.to_numpy(value, dt)
    except (ValueError, TypeError, OverflowError) as e:
        raise InvalidArgumentError(f"cannot make a {dt.name} constant from {value!r}: {e}") \
            from None
    if shape is not None:
        shape = tuple(shape)
        if arr.size == 1:
            arr = np.broadcast_to(arr.reshape(()), shape).copy()
        elif arr.size == int(np.prod(shape)):
            arr = arr.reshape(shape)
        else:
            raise InvalidArgumentError(
                f"constant {name!r}: {arr.size} values do not fit shape {list(shape)}")
    arr.setflags(write=False)
    from ...framework.graph import get_default_graph
    g = graph or get_default_graph()
    return apply_op("Const", [], {"value": arr, "dtype": dt}, name=name, graph=g).outputs[0]


def _is_graph_value(v) -> bool:
    return isinstance(v, Tensor) or hasattr(v, "_as_graph_element")


def _convert_plain(value, dtype, name, graph):
    if isinstance(value, (list, tuple)) and any(_is_graph_value(v) for v in value):
        return stack([convert_to_tensor(v, dtype) for v in value], name=name or "packed")
    return constant(value, dtype=dtype, name=name or "Const", graph=graph)


register_tensor_conversion_function(
    (list, tuple, bool, int, float, complex, str, bytes, np.ndarray, np.generic), _convert_plain)


# ---- Placeholder ------------------------------------------------------------------------------
def _placeholder_kernel(*, dtype, shape, op_name=None):
    raise InvalidArgumentError(
        f"You must feed a value for placeholder tensor {op_name!r} with dtype {dtype.name}"
        + (f" and shape {list(shape)}" if shape is not None else ""))


register_op("Placeholder", lambda inputs, attrs: [(attrs["dtype"], attrs["shape"])],
            _placeholder_kernel, differentiable=False, foldable=False, gpu_fallback=True)


def placeholder(dtype, shape=None, name: str | None = None):
    """A tensor whose value must be fed: ``x = tv.placeholder(tv.float32, [None, 784])``."""
    dt = _dt.as_dtype(dtype)
    if isinstance(shape, (int, np.integer)):  # TF's shape=(batch_size) (an int): [batch_size]
        shape = [shape]
    shp = None if shape is None else tuple(None if d is None or d == -1 else int(d)
                                           for d in shape)
    op = apply_op("Placeholder", [], {"dtype": dt, "shape": shp}, name=name or "Placeholder")
    op.attrs["op_name"] = op.name
    return op.outputs[0]


register_op("PlaceholderWithDefault", lambda inputs, attrs: [(inputs[0].dtype, attrs["shape"])],
            lambda x, shape: x, grad=lambda op, g: [g], foldable=False, gpu_fallback=True)


def placeholder_with_default(input, shape, name=None):
    """A tensor that is ``input`` unless the step feeds it a value of ``shape``.

    >>> import tensorvm as tv
    >>> with tv.Graph().as_default(), tv.Session() as s:
    ...     p = tv.placeholder_with_default(tv.constant([1.0, 2.0]), [None])
    ...     s.run(p).tolist(), s.run(p, {p: [5.0]}).tolist()
    ([1.0, 2.0], [5.0])
    """
    x = convert_to_tensor(input)
    return apply_op("PlaceholderWithDefault", [x], {"shape": tuple(shape)}, name=name).outputs[0]


# ---- Identity, StopGradient, NoOp -------------------------------------------------------------
register_op("Identity", lambda inputs, attrs: [(inputs[0].dtype, inputs[0]._shape)],
            lambda x: x, grad=lambda op, g: [g], pass_through=True, gpu_fallback=True)


def identity(input, name=None):
    """A tensor of the same value as ``input`` (an op of its own: a name, a device, a place for
    control dependencies)."""
    return apply_op("Identity", [input], name=name).outputs[0]


register_op("StopGradient", lambda inputs, attrs: [(inputs[0].dtype, inputs[0]._shape)],
            lambda x: x, differentiable=False, pass_through=True)


def stop_gradient(input, name=None):
    """Identity whose gradient is None: ``tv.gradients`` does not flow through it."""
    return apply_op("StopGradient", [input], name=name).outputs[0]


register_op("NoOp", lambda inputs, attrs: [], lambda: (), differentiable=False, foldable=False,
            gpu_fallback=True)


def no_op(name=None):
    """An op that does nothing; run it for its control inputs."""
    return apply_op("NoOp", [], name=name or "NoOp")


def group(*inputs, name=None):
    """An op that runs after all ``inputs`` (ops or tensors): ``train = tv.group(a, b)``."""
    from ...framework.graph import get_default_graph
    deps = []
    for x in inputs:
        if isinstance(x, (list, tuple)):
            deps.extend(x)
        else:
            deps.append(x)
    deps = [d for d in deps if d is not None]
    g = get_default_graph()
    for d in deps:
        el = d._as_graph_element() if hasattr(d, "_as_graph_element") else d
        g = el.graph
        break
    with g.as_default(), g.control_dependencies(deps):
        return no_op(name=name or "group_deps")


def tuple_(tensors, name=None):
    """``tv.tuple``: identities of ``tensors`` that each wait until all of ``tensors`` are
    computed (``None`` entries stay ``None``)."""
    from ...framework.graph import get_default_graph
    g = get_default_graph()
    with g.control_dependencies([t for t in tensors if t is not None]):
        return [identity(t) if t is not None else None for t in tensors]


# ---- shapes -----------------------------------------------------------------------------------
register_op("Shape", lambda inputs, attrs: [(attrs.get("out_type", _dt.int32),
                                            None if inputs[0]._shape is None
                                            else (len(inputs[0]._shape),))],
            lambda x, out_type=_dt.int32: asarray(np.shape(x), out_type.np_dtype, like=x),
            differentiable=False, shape_only=(0,), gpu_fallback=True)


def shape(input, name=None, out_type=_dt.int32):
    """The shape of ``input`` at run time, a 1-D ``out_type`` tensor (``tensor.shape`` is the
    static shape known when the graph is built)."""
    return apply_op("Shape", [input], {"out_type": _dt.as_dtype(out_type)}, name=name).outputs[0]


def _reshape_shape(inputs, attrs):
    x = inputs[0]
    new = attrs["shape"]
    if new.count(-1) > 1:
        raise InvalidArgumentError(f"reshape: at most one -1 in shape {list(new)}")
    if x._shape is not None and None not in x._shape:
        n = int(np.prod(x._shape))
        known = int(np.prod([d for d in new if d != -1]))
        if -1 in new:
            if known == 0 or n % known:
                raise InvalidArgumentError(
                    f"cannot reshape a tensor with {n} elements to shape {list(new)}")
            new = tuple(n // known if d == -1 else d for d in new)
        elif known != n:
            raise InvalidArgumentError(
                f"cannot reshape a tensor with {n} elements to shape {list(new)}")
    return [(x.dtype, tuple(None if d == -1 else d for d in new))]


def _reshape_grad(op, g):
    return [reshape_like(g, op.inputs[0])]


register_op("Reshape", _reshape_shape, lambda x, shape: np.reshape(x, shape), grad=_reshape_grad)
register_op("ReshapeLike", lambda inputs, attrs: [(inputs[0].dtype, inputs[1]._shape)],
            lambda x, like: np.reshape(x, np.shape(like)),
            grad=lambda op, g: [reshape_like(g, op.inputs[0]), None], shape_only=(1,))


def _dynamic_reshape_shape(inputs, attrs):
    from ..common import static_shape_of
    x, shape = inputs
    if not shape.dtype.is_integer:
        raise InvalidArgumentError(f"Reshape: shape must be int32 or int64, got "
                                   f"{shape.dtype.name}")
    if shape._shape is not None and len(shape._shape) != 1:
        raise InvalidArgumentError(f"Reshape: shape must be a vector, got shape "
                                   f"{list(shape._shape)}")
    dims = static_shape_of(shape)
    if dims is None:
        return [(x.dtype, None)]
    dims = tuple(None if d is None or d < 0 else d for d in dims)
    if x._shape is not None and None not in x._shape and dims.count(None) == 1:
        known = int(np.prod([d for d in dims if d is not None]))
        n = int(np.prod(x._shape))
        if known and n % known == 0:
            dims = tuple(n // known if d is None else d for d in dims)
    return [(x.dtype, dims)]


def _dynamic_reshape_kernel(x, shape):
    dims = [int(d) for d in to_host(shape).reshape(-1)]
    known = int(np.prod([d for d in dims if d != -1]))
    if dims.count(-1) > 1 or any(d < -1 for d in dims):
        raise InvalidArgumentError(f"Reshape: only one dimension may be -1 and none may be "
                                   f"negative otherwise, got {dims}")
    if (-1 in dims and (known == 0 or x.size % known)) or (-1 not in dims and known != x.size):
        raise InvalidArgumentError(f"Input to reshape is a tensor with {x.size} values, but "
                                   f"the requested shape {dims} does not fit them")
    return x.reshape(dims)


# Reshape to a shape computed in the graph (``tv.reshape(x, [tv.shape(x)[0], -1])``); the shape
# is read on the host (HostMemory on a GPU), as TF's Reshape reads its shape input.
register_op("DynamicReshape", _dynamic_reshape_shape, _dynamic_reshape_kernel,
            grad=lambda op, g: [reshape_like(g, op.inputs[0]), None], shape_only=(1,))


def reshape(tensor, shape, name=None):
    """``tv.reshape(x, [-1, 10])``. The new shape is a list of ints (one may be -1) or a
    tensor computed in the graph, or a list mixing ints and scalar tensors
    (``tv.reshape(x, [tv.shape(x)[0], -1])``)."""
    from ..common import static_value

    def is_graph(v):
        return isinstance(v, Tensor) or hasattr(v, "_as_graph_element")
    if is_graph(shape) or (isinstance(shape, (list, tuple)) and any(is_graph(d) for d in shape)):
        static = static_value(shape)
        if static is None:
            if isinstance(shape, (list, tuple)):
                shape = stack([convert_to_tensor(d, dtype=_dt.int32) if not is_graph(d) else d
                               for d in shape])
            return apply_op("DynamicReshape", [tensor, convert_to_tensor(shape)],
                            name=name).outputs[0]
        shape = np.asarray(static).reshape(-1).tolist()
    return apply_op("Reshape", [tensor], {"shape": tuple(int(d) for d in shape)},
                    name=name).outputs[0]


def reshape_like(x, like, name=None):
    return apply_op("ReshapeLike", [x, like], name=name).outputs[0]


# ---- stacking ---------------------------------------------------------------------------------
def _stack_shape(inputs, attrs):
    from ..common import check_same_dtype
    if not inputs:
        raise InvalidArgumentError("stack needs at least one tensor")
    dt = check_same_dtype(inputs, "Pack")
    shp = inputs[0]._shape
    for t in inputs[1:]:
        if shp is not None and t._shape is not None:
            if len(t._shape) != len(shp) or any(a is not None and b is not None and a != b
                                                for a, b in zip(shp, t._shape)):
                raise InvalidArgumentError(
                    f"stack: shapes of all inputs must match, got {list(shp)} and "
                    f"{list(t._shape)}")
    if shp is None:
        return [(dt, None)]
    axis = attrs["axis"]
    if axis < 0:
        axis += len(shp) + 1
    if not 0 <= axis <= len(shp):
        raise InvalidArgumentError(f"stack: axis {attrs['axis']} out of range for rank "
                                   f"{len(shp) + 1}")
    return [(dt, shp[:axis] + (len(inputs),) + shp[axis:])]


def _stack_grad(op, g):
    from .manip_ops import unstack
    return unstack(g, num=len(op.inputs), axis=op.attrs["axis"])


register_op("Pack", _stack_shape, lambda *xs, axis: np.stack(xs, axis=axis), grad=_stack_grad)


def stack(values, axis: int = 0, name=None):
    """``tv.stack([a, b], axis=0)``."""
    return apply_op("Pack", list(values), {"axis": int(axis)}, name=name or "stack").outputs[0]


# ---- broadcasting helpers for gradients ---------------------------------------------------
register_op("BroadcastLike",
            lambda inputs, attrs: [(inputs[0].dtype,
                                    broadcast_shapes(inputs[0]._shape, inputs[1]._shape))],
            lambda x, like: np.broadcast_to(x, np.broadcast_shapes(np.shape(x), np.shape(like))),
            grad=lambda op, g: [__import__("tensorvm.ops.common", fromlist=["x"])
                                .unbroadcast(g, op.inputs[0]), None], shape_only=(1,))


def broadcast_like(x, like, name=None):
    """``x`` broadcast to the shape ``x`` and ``like`` broadcast to together (NumPy's rules);
    its gradient sums back to ``x``'s shape."""
    return apply_op("BroadcastLike", [x, like], name=name).outputs[0]


register_op("ZerosLike", lambda inputs, attrs: [(inputs[0].dtype, inputs[0]._shape)],
            lambda x: np.zeros_like(x), differentiable=False, shape_only=(0,))
register_op("OnesLike", lambda inputs, attrs: [(inputs[0].dtype, inputs[0]._shape)],
            lambda x: np.ones_like(x), differentiable=False, shape_only=(0,))


def zeros_like(tensor, dtype=None, name=None):
    """Zeros of ``tensor``'s shape, of its dtype or ``dtype``."""
    out = apply_op("ZerosLike", [tensor], name=name).outputs[0]
    return out if dtype is None else _cast(out, dtype)


def ones_like(tensor, dtype=None, name=None):
    """Ones of ``tensor``'s shape, of its dtype or ``dtype``."""
    out = apply_op("OnesLike", [tensor], name=name).outputs[0]
    return out if dtype is None else _cast(out, dtype)


def _cast(x, dtype):
    from ..math.math_ops import cast
    return cast(x, dtype)


# ---- helpers that build ops for other families ------------------------------------------------
def shape_tensor(shape_like, op: str) -> Tensor:
    """A 1-D integer tensor from a list of ints (or tensors), a TensorShape or a tensor."""
    if isinstance(shape_like, TensorShape):
        if not shape_like.is_fully_defined():
            raise InvalidArgumentError(f"{op}: shape {shape_like} is not fully defined")
        shape_like = shape_like.as_list()
    if isinstance(shape_like, (list, tuple)) and all(
            isinstance(d, (int, np.integer)) for d in shape_like):
        return constant(np.asarray(shape_like, dtype=np.int32).reshape(-1), name="shape")
    t = convert_to_tensor(shape_like)
    if not t.dtype.is_integer or (t._shape is not None and len(t._shape) != 1):
        raise InvalidArgumentError(f"{op}: shape must be a 1-D integer tensor, got {t!r}")
    return t


def dense_or_zeros(g, like: Tensor):
    """An output gradient as a dense tensor: densified if sparse, zeros if None."""
    if g is None:
        return zeros_like(like)
    from .index_ops import densify
    return densify(g, like)
