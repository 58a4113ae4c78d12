"""``tensor_scatter_nd_*``: a tensor with slices replaced or combined (update, add, sub,
max, min; no Variable), and ``batch_gather``.
"""
from __future__ import annotations

from ...framework.errors import InvalidArgumentError
from ...framework.graph import Tensor
from ...framework.op_def_library import apply_op
from ...vm.kernels.array_api import array_namespace
from ...framework.op_registry import register_op
from ...framework.tensor_conversion import convert_to_tensor
from .array_ops import shape
from ..common import check_int_dtype, rank_of
from .gather_ops import _nd_index, gather, gather_nd, scatter_nd
from .segment_ops import _reduce_at

__all__ = ["tensor_scatter_nd_update", "tensor_scatter_nd_add", "tensor_scatter_nd_sub",
           "tensor_scatter_nd_max", "tensor_scatter_nd_min", "tensor_scatter_update",
           "tensor_scatter_add", "tensor_scatter_sub", "batch_gather"]


# ---- tensor_scatter_nd_*: a tensor with slices replaced or combined (no Variable) -------------
def _tensor_scatter_shape(op_type):
    def shape_fn(inputs, attrs):
        t, i, u = inputs
        check_int_dtype(i, "indices", op_type)
        if t.dtype != u.dtype:
            raise InvalidArgumentError(f"{op_type}: updates ({u.dtype.name}) must have the "
                                       f"tensor's dtype ({t.dtype.name})")
        if t._shape is not None and i._shape is not None and u._shape is not None and \
                i._shape[-1] is not None:
            want = i._shape[:-1] + tuple(t._shape[i._shape[-1]:])
            if len(want) != len(u._shape) or any(
                    a is not None and b is not None and a != b for a, b in zip(want, u._shape)):
                raise InvalidArgumentError(
                    f"{op_type}: updates of shape {list(u._shape)} do not match indices "
                    f"{list(i._shape)} into a tensor of shape {list(t._shape)} (expected "
                    f"{list(want)})")
        return [(t.dtype, t._shape)]
    return shape_fn


def _tensor_scatter_kernel(kind):
    op = {"update": "TensorScatterUpdate", "max": "TensorScatterMax",
          "min": "TensorScatterMin"}[kind]

    def kernel(tensor, indices, updates):
        xp = array_namespace(tensor)
        out = tensor.copy()
        idx = _nd_index(indices, out.shape, op, xp)
        if kind == "update":
            out[idx] = updates
        else:
            _reduce_at(out, idx, updates, kind)
        return out
    kernel.__name__ = f"_tensor_scatter_{kind}_kernel"
    return kernel


def _tensor_scatter_update_grad(op, g):
    from .array_ops import zeros_like
    indices, updates = op.inputs[1], op.inputs[2]
    return [tensor_scatter_nd_update(g, indices, zeros_like(updates)), None,
            gather_nd(g, indices)]


def _tensor_scatter_minmax_grad(op, g):  # TF's _TensorScatterMinOrMaxGrad
    from ..math.math_ext import equal
    from ..math.math_ops import cast
    x, indices, y = op.inputs
    out = op.outputs[0]
    x_ind = cast(equal(x, out), g.dtype)
    y_ind = cast(equal(y, gather_nd(out, indices)), g.dtype)
    indicators = x_ind + scatter_nd(indices, y_ind, shape(x))
    return [g * x_ind / indicators, None, gather_nd(g / indicators, indices) * y_ind]


for _kind, _grad in (("update", _tensor_scatter_update_grad),
                     ("max", _tensor_scatter_minmax_grad),
                     ("min", _tensor_scatter_minmax_grad)):
    _t = f"TensorScatter{_kind.capitalize()}"
    register_op(_t, _tensor_scatter_shape(_t), _tensor_scatter_kernel(_kind), grad=_grad)
del _kind, _grad, _t


def tensor_scatter_nd_update(tensor, indices, updates, name=None) -> Tensor:
    """``tensor`` with the slices at ``indices`` replaced by ``updates`` (a new tensor; TF's
    ``tf.tensor_scatter_nd_update``).

    >>> import tensorvm as tv
    >>> with tv.Session() as s:
    ...     s.run(tv.tensor_scatter_nd_update([1, 2, 3, 4], [[1], [3]], [9, 8])).tolist()
    [1, 9, 3, 8]
    """
    from ..common import _convert_pair
    tensor, updates = _convert_pair(tensor, updates)
    return apply_op("TensorScatterUpdate", [tensor, convert_to_tensor(indices), updates],
                    name=name).outputs[0]


def tensor_scatter_nd_add(tensor, indices, updates, name=None) -> Tensor:
    """``tensor`` with ``updates`` added at ``indices`` (repeated indices add up)."""
    from ..common import _convert_pair
    tensor, updates = _convert_pair(tensor, updates)
    return tensor + scatter_nd(indices, updates, shape(tensor), name=name)


def tensor_scatter_nd_sub(tensor, indices, updates, name=None) -> Tensor:
    """``tensor`` with ``updates`` subtracted at ``indices``."""
    from ..common import _convert_pair
    tensor, updates = _convert_pair(tensor, updates)
    return tensor - scatter_nd(indices, updates, shape(tensor), name=name)


def tensor_scatter_nd_max(tensor, indices, updates, name=None) -> Tensor:
    """``tensor`` with the element-wise maximum of its slices at ``indices`` and ``updates``."""
    from ..common import _convert_pair
    tensor, updates = _convert_pair(tensor, updates)
    return apply_op("TensorScatterMax", [tensor, convert_to_tensor(indices), updates],
                    name=name).outputs[0]


def tensor_scatter_nd_min(tensor, indices, updates, name=None) -> Tensor:
    """``tensor`` with the element-wise minimum of its slices at ``indices`` and ``updates``."""
    from ..common import _convert_pair
    tensor, updates = _convert_pair(tensor, updates)
    return apply_op("TensorScatterMin", [tensor, convert_to_tensor(indices), updates],
                    name=name).outputs[0]


tensor_scatter_update = tensor_scatter_nd_update
tensor_scatter_add = tensor_scatter_nd_add
tensor_scatter_sub = tensor_scatter_nd_sub


def batch_gather(params, indices, name=None) -> Tensor:
    """``out[b..., i] = params[b..., indices[b..., i]]``: a gather per batch, the leading
    dimensions of ``indices`` being batch dimensions of ``params`` (TF 1.x's deprecated
    ``tf.batch_gather``); built from ``gather_nd``, so gradients flow to ``params``.

    >>> import tensorvm as tv
    >>> with tv.Session() as s:
    ...     s.run(tv.batch_gather([[1, 2, 3], [4, 5, 6]], [[2, 0], [1, 1]])).tolist()
    [[3, 1], [5, 5]]
    """
    from ...framework import dtypes as _dt
    from ...framework.graph import get_default_graph
    from .array_ops import stack
    from .fill_ops import range as _range
    from .manip_ops import broadcast_to, expand_dims
    from ..math.math_ops import cast
    with get_default_graph().name_scope(name or "batch_gather"):
        params, indices = convert_to_tensor(params), convert_to_tensor(indices)
        r = rank_of(indices)
        if r is None:
            raise InvalidArgumentError("batch_gather needs indices of known rank")
        if r == 1:
            return gather(params, indices)
        idx = cast(indices, _dt.int64)
        ishape = shape(idx, out_type=_dt.int64)
        coords = []
        for k in range(r - 1):  # the batch coordinates, broadcast to indices' shape
            ax = cast(_range(ishape[k]), _dt.int64)
            for _ in range(k):
                ax = expand_dims(ax, 0)
            for _ in range(r - 1 - k):
                ax = expand_dims(ax, -1)
            coords.append(broadcast_to(ax, ishape))
        return gather_nd(params, stack(coords + [idx], axis=-1))


