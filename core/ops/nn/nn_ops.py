"""Neural-network ops: ``tv.nn`` (TensorFlow 1.x names and signatures).

Activations (relu, relu6, leaky_relu, elu, softplus, softsign, sigmoid, tanh), softmax and
log_softmax, the cross-entropies with logits (softmax, sparse softmax, sigmoid), l2_loss,
bias_add, dropout, embedding_lookup, moments, l2_normalize, in_top_k. Softmax and the
cross-entropies live in :mod:`tensorvm.ops.nn.nn_softmax`, convolution and pooling in
:mod:`tensorvm.ops.nn.nn_conv`; both are re-exported here.

>>> import numpy as np, tensorvm as tv
>>> x = tv.constant([[1.0, 2.0, 3.0]])
>>> with tv.Session() as s: np.round(s.run(tv.nn.softmax(x)), 3)
array([[0.09 , 0.245, 0.665]], dtype=float32)

``__all__`` (what goes to top-level ``tv.*``) is empty: TensorFlow 1.x keeps these names under
``tf.nn`` only (``tf.sigmoid``/``tf.tanh`` come from math_ext). ``NN_ALL`` is ``tv.nn``.
"""
from __future__ import annotations

import numpy as np

from ...framework import dtypes as _dt
from ...framework.errors import InvalidArgumentError
from ...framework.graph import Tensor
from ...vm.kernels.array_api import array_namespace, to_device
from ...framework.op_def_library import apply_op
from ...framework.op_registry import register_kernel, register_op
from ...framework.tensor_conversion import convert_to_tensor
from ..array.array_ops import zeros_like
from ..common import asarray
from ..math.math_ext import sigmoid, tanh
from ..math.math_ops import reduce_mean, reduce_sum
from .nn_conv import avg_pool, conv2d, max_pool
from .nn_softmax import (_float_only, _is_graph_value, _zero, log_softmax,
                         sigmoid_cross_entropy_with_logits, softmax,
                         softmax_cross_entropy_with_logits, softmax_cross_entropy_with_logits_v2,
                         sparse_softmax_cross_entropy_with_logits)
from ..math.random_ops import _rng as _op_rng
from ..math.random_ops import get_seed

__all__: list[str] = []
NN_ALL = ["relu", "relu6", "leaky_relu", "elu", "softplus", "softsign", "sigmoid", "tanh",
          "softmax", "log_softmax", "softmax_cross_entropy_with_logits",
          "softmax_cross_entropy_with_logits_v2", "sparse_softmax_cross_entropy_with_logits",
          "sigmoid_cross_entropy_with_logits", "l2_loss", "bias_add", "xw_plus_b", "conv2d",
          "max_pool", "avg_pool", "dropout", "embedding_lookup", "moments", "l2_normalize",
          "in_top_k"]


def _def_act(op_type: str, kernel, grad, extra_attrs=(), forwards=()):
    """Register an element-wise float activation; its gradient op is built by ``grad``.
    ``forwards``: see :class:`tensorvm.framework.op_registry.OpDef` (the kernel takes ``out=``)."""
    def shape_fn(inputs, attrs):
        _float_only(op_type)(inputs[0].dtype)
        return [(inputs[0].dtype, inputs[0]._shape)]
    register_op(op_type, shape_fn, kernel, grad=grad, forwards=forwards)


def _def_act_grad(op_type: str, kernel, grad=None, forwards=()):
    """Register ``<Act>Grad(g, x_or_y)``: same shape as its inputs."""
    register_op(op_type, lambda inputs, attrs: [(inputs[0].dtype, inputs[0]._shape)], kernel,
                grad=grad, forwards=forwards)


def _act(op_type, features, name, attrs=None):
    return apply_op(op_type, [features], attrs, name=name).outputs[0]


# ---- relu family ----------------------------------------------------------------------------
def _relu_grad_kernel(g, x, out=None):
    """``g * (x > 0)``, as TF's kernel computes it (6x faster than ``np.where`` on a
    [50, 28, 28, 32] map): the mask is cast to ``g``'s dtype into the output, which is then
    multiplied by ``g`` in place. The same bits as ``g * (x > 0)`` (a NaN or infinite ``g``
    where ``x <= 0`` still gives NaN, a negative ``g`` there -0.0), 25% faster: NumPy's
    product of a float and a boolean array casts the booleans in small buffers (mnist_deep's
    three ReluGrads: 0.36 -> 0.28 ms). ``out``: ``x``'s buffer when nothing else holds it
    (OpDef.forwards; the mask is computed before it is written)."""
    if g.shape != x.shape:  # broadcasting: the plain expression
        return g * (x > 0)
    if out is None:
        out = array_namespace(g, x).empty(g.shape, np.result_type(g.dtype, np.bool_))
    np.copyto(out, np.greater(x, _zero(x)))
    return np.multiply(out, g, out=out)


_def_act_grad("ReluGrad", _relu_grad_kernel,
              lambda op, gg: [apply_op("ReluGrad", [gg, op.inputs[1]]).outputs[0], None],
              forwards=(1,))
def _relu_grad(op, g):
    """``ReluGrad(g, x)``; for ``max_pool(relu(x))`` (the CNN block), whose ``g`` is
    ``MaxPoolGrad(r, y, gy)``, the ReLU's mask is applied to the pooled gradient instead:
    ``MaxPoolGrad(r, y, ReluGrad(gy, y))``, a quarter of the elements for 2x2 pooling. The
    same numbers: ``g`` is nonzero only at each window's argmax, where ``r = y`` and
    ``r > 0`` exactly where ``x > 0`` (a non-finite ``gy`` gives the same NaN there)."""
    src = g.op
    if src.type == "MaxPoolGrad" and src.inputs[0] is op.outputs[0]:
        r, y, gy = src.inputs
        masked = apply_op("ReluGrad", [gy, y]).outputs[0]
        return [apply_op("MaxPoolGrad", [r, y, masked], dict(src.attrs)).outputs[0]]
    return [apply_op("ReluGrad", [g, op.inputs[0]]).outputs[0]]


_def_act("Relu", lambda x, out=None: np.maximum(x, _zero(x), out=out), _relu_grad,
         forwards=(0,))

_def_act_grad("Relu6Grad", lambda g, x: g * ((x > 0) & (x < 6)),
              lambda op, gg: [apply_op("Relu6Grad", [gg, op.inputs[1]]).outputs[0], None])


def _relu6_kernel(x):
    # 0-d bounds on x's device: np.clip takes them ~1.3 us faster than NumPy scalars
    xp = array_namespace(x)
    return np.clip(x, xp.zeros((), x.dtype), xp.asarray(6, x.dtype))


_def_act("Relu6", _relu6_kernel,
         lambda op, g: [apply_op("Relu6Grad", [g, op.inputs[0]]).outputs[0]])


def _leaky_grad_kernel(g, x, alpha):
    return np.where(x > 0, g, g * g.dtype.type(alpha))


_def_act_grad("LeakyReluGrad", _leaky_grad_kernel,
              lambda op, gg: [apply_op("LeakyReluGrad", [gg, op.inputs[1]],
                                       {"alpha": op.attrs["alpha"]}).outputs[0], None])
_def_act("LeakyRelu", lambda x, alpha: np.where(x > 0, x, x * x.dtype.type(alpha)),
         lambda op, g: [apply_op("LeakyReluGrad", [g, op.inputs[0]],
                                 {"alpha": op.attrs["alpha"]}).outputs[0]])


def _elu_grad_grad(op, gg):
    g, y = op.inputs
    # d/dg = EluGrad(gg, y); d/dy = gg * g where y < 0 (0 elsewhere) = ReluGrad(gg * g, -y).
    return [apply_op("EluGrad", [gg, y]).outputs[0],
            apply_op("ReluGrad", [gg * g, -y]).outputs[0]]


_def_act_grad("EluGrad", lambda g, y: np.where(y > 0, g, g * (y + 1)), _elu_grad_grad)
_def_act("Elu", lambda x: np.where(x > 0, x, np.expm1(np.minimum(x, _zero(x)))),
         lambda op, g: [apply_op("EluGrad", [g, op.outputs[0]]).outputs[0]])

_def_act("Softplus", lambda x: np.logaddexp(_zero(x), x),
         lambda op, g: [g * sigmoid(op.inputs[0])])


def _softsign_grad(op, g):
    from ..math.math_ext import abs as abs_
    x = op.inputs[0]
    d = 1 + abs_(x)
    return [g / (d * d)]


_def_act("Softsign", lambda x: x / (1 + np.abs(x)), _softsign_grad)


def relu(features, name=None):
    """``max(features, 0)``."""
    return _act("Relu", features, name)


def relu6(features, name=None):
    """``min(max(features, 0), 6)``."""
    return _act("Relu6", features, name)


def leaky_relu(features, alpha=0.2, name=None):
    """``features`` where positive, else ``alpha * features``."""
    return _act("LeakyRelu", features, name, {"alpha": float(alpha)})


def elu(features, name=None):
    """``features`` where positive, else ``exp(features) - 1``."""
    return _act("Elu", features, name)


def softplus(features, name=None):
    """``log(exp(features) + 1)``, computed stably."""
    return _act("Softplus", features, name)


def softsign(features, name=None):
    """``features / (abs(features) + 1)``."""
    return _act("Softsign", features, name)


# ---- l2_loss, bias_add ----------------------------------------------------------------------
def _l2_loss_shape(inputs, attrs):
    _float_only("L2Loss")(inputs[0].dtype)
    return [(inputs[0].dtype, ())]


register_op("L2Loss", _l2_loss_shape,
            lambda t: asarray(np.sum(np.square(t)) / 2, t.dtype, like=t),
            grad=lambda op, g: [g * op.inputs[0]])


def l2_loss(t, name=None):
    """``sum(t ** 2) / 2``."""
    return apply_op("L2Loss", [t], name=name).outputs[0]


def _channel_axis(rank, data_format):
    return 1 if data_format and data_format.startswith("NC") and rank >= 2 else rank - 1


def _bias_add_shape(inputs, attrs):
    value, bias = inputs
    op = "BiasAdd"
    if value.dtype != bias.dtype:
        raise InvalidArgumentError(f"{op}: value ({value.dtype.name}) and bias "
                                   f"({bias.dtype.name}) must have the same dtype")
    if bias._shape is not None and len(bias._shape) != 1:
        raise InvalidArgumentError(f"{op}: bias must be 1-D, got shape {list(bias._shape)}")
    if value._shape is not None:
        if len(value._shape) < 2:
            raise InvalidArgumentError(
                f"{op}: value must have rank >= 2, got shape {list(value._shape)}")
        c = value._shape[_channel_axis(len(value._shape), attrs["data_format"])]
        b = None if bias._shape is None else bias._shape[0]
        if c is not None and b is not None and c != b:
            raise InvalidArgumentError(
                f"{op}: bias of size {b} does not match the channel dimension {c} of value "
                f"{list(value._shape)} (data_format={attrs['data_format']})")
    return [(value.dtype, value._shape)]


def _bias_add_kernel(value, bias, data_format):
    ax = _channel_axis(value.ndim, data_format)
    return value + bias.reshape((-1,) + (1,) * (value.ndim - 1 - ax))


def _bias_add_grad_kernel(g, data_format):
    ax = _channel_axis(g.ndim, data_format)
    return np.sum(g, axis=tuple(i for i in range(g.ndim) if i != ax), dtype=g.dtype)


def _bias_add_grad_shape(inputs, attrs):
    g = inputs[0]
    if g._shape is None:
        return [(g.dtype, (None,))]
    return [(g.dtype, (g._shape[_channel_axis(len(g._shape), attrs["data_format"])],))]


def _bias_add_grad(op, g):
    df = op.attrs["data_format"]
    return [g, apply_op("BiasAddGrad", [g], {"data_format": df}).outputs[0]]


register_op("BiasAdd", _bias_add_shape, _bias_add_kernel, grad=_bias_add_grad)
register_op("BiasAddGrad", _bias_add_grad_shape, _bias_add_grad_kernel,
            grad=lambda op, gg: [bias_add(zeros_like(op.inputs[0]), gg,
                                          data_format=op.attrs["data_format"])])


def bias_add(value, bias, data_format=None, name=None):
    """``value + bias`` with the 1-D ``bias`` along the channel dimension (last for "NHWC",
    dimension 1 for "NCHW")."""
    df = data_format or "NHWC"
    if df not in ("NHWC", "NCHW", "NC", "NWC", "NCW", "NDHWC", "NCDHW"):
        raise InvalidArgumentError(f"BiasAdd: unknown data_format {data_format!r}")
    value = convert_to_tensor(value)
    bias = convert_to_tensor(bias, dtype=value.dtype if not _is_graph_value(bias) else None)
    return apply_op("BiasAdd", [value, bias], {"data_format": df}, name=name).outputs[0]


def xw_plus_b(x, weights, biases, name=None):
    """``matmul(x, weights) + biases``."""
    from ..math.math_ops import matmul
    return bias_add(matmul(x, weights), biases, name=name or "xw_plus_b")


# ---- dropout ---------------------------------------------------------------------------------
def _dropout_scale(ctx, x, keep_prob, seed, seed2, noise_shape):
    """The kept elements' scale (1/keep_prob or 0), drawn on the host by the op's generator:
    a seed draws the same mask on a CPU and on a GPU."""
    keep = float(keep_prob)
    if not 0.0 < keep <= 1.0:
        raise InvalidArgumentError(f"keep_prob must be in the range (0, 1], got {keep}")
    u = _op_rng(ctx, seed, seed2).random(x.shape if noise_shape is None else noise_shape)
    return (np.floor(keep + u) / keep).astype(x.dtype, copy=False)


def _dropout_kernel(ctx, x, keep_prob, *, seed, seed2, noise_shape):
    scale = _dropout_scale(ctx, x, keep_prob, seed, seed2, noise_shape)
    return x * scale, np.broadcast_to(scale, np.broadcast_shapes(scale.shape, x.shape))


def _dropout_gpu_kernel(ctx, x, keep_prob, *, seed, seed2, noise_shape):
    """On a GPU only the mask crosses (uploaded); keep_prob is read in host memory
    (kernels_gpu.HOST_MEMORY_INPUTS), so the step never waits for the device here."""
    scale = to_device(_dropout_scale(ctx, x, keep_prob, seed, seed2, noise_shape))
    xp = array_namespace(x, scale)
    return x * scale, xp.broadcast_to(scale, np.broadcast_shapes(scale.shape, x.shape))


def _dropout_shape(inputs, attrs):
    x, keep = inputs
    _float_only("Dropout")(x.dtype)
    if keep._shape is not None and keep._shape != ():
        raise InvalidArgumentError(f"Dropout: keep_prob must be a scalar, got shape "
                                   f"{list(keep._shape)}")
    ns = attrs["noise_shape"]
    if ns is not None and x._shape is not None:
        from ..common import broadcast_shapes
        try:
            ok = broadcast_shapes(ns, x._shape) == tuple(x._shape)
        except InvalidArgumentError:
            ok = False
        if not ok:
            raise InvalidArgumentError(f"Dropout: noise_shape {list(ns)} does not broadcast to "
                                       f"x's shape {list(x._shape)}")
    return [(x.dtype, x._shape), (x.dtype, x._shape)]


register_op("Dropout", _dropout_shape, _dropout_kernel, stateful=True, needs_ctx=True,
            grad=lambda op, g, g_mask=None: [None if g is None else g * op.outputs[1], None])
register_kernel("Dropout", "GPU", _dropout_gpu_kernel)


def dropout(x, keep_prob=None, noise_shape=None, seed=None, name=None, rate=None):
    """Keep each element with probability ``keep_prob`` (scaled by ``1 / keep_prob``), else 0.

    ``keep_prob`` (or ``rate = 1 - keep_prob``) may be a float or a scalar tensor (a placeholder
    fed 0.5 in training and 1.0 in evaluation). The mask is drawn by a stateful op: a new mask
    every run, reproducible under ``tv.set_random_seed``/``seed``.
    """
    x = convert_to_tensor(x)
    if (keep_prob is None) == (rate is None):
        raise InvalidArgumentError("dropout: give exactly one of keep_prob and rate")
    if rate is not None:
        keep_prob = (1 - rate) if isinstance(rate, Tensor) else 1.0 - float(rate)
    if not isinstance(keep_prob, Tensor) and not hasattr(keep_prob, "_as_graph_element"):
        kp = float(keep_prob)
        if not 0.0 < kp <= 1.0:
            raise InvalidArgumentError(
                f"dropout: keep_prob must be a scalar tensor or a float in the range (0, 1], "
                f"got {kp}")
        if kp == 1.0:
            return x
        keep_prob = kp
    keep_prob = convert_to_tensor(keep_prob, dtype=x.dtype if not _is_graph_value(keep_prob)
                                  else None)
    if keep_prob.dtype != x.dtype:
        from ..math.math_ops import cast
        keep_prob = cast(keep_prob, x.dtype)
    if noise_shape is not None:
        noise_shape = tuple(int(d) for d in noise_shape)
    with x.graph.as_default():
        s1, s2 = get_seed(seed)
    return apply_op("Dropout", [x, keep_prob], {"seed": s1, "seed2": s2,
                                                "noise_shape": noise_shape},
                    name=name or "dropout").outputs[0]


# ---- embeddings, moments, normalisation -------------------------------------------------------
def embedding_lookup(params, ids, partition_strategy="mod", name=None, validate_indices=True,
                     max_norm=None):
    """Rows of ``params`` at ``ids`` (``gather``); the gradient wrt ``params`` stays sparse
    (:class:`tensorvm.IndexedSlices`). ``params`` may be a list of shards split by
    ``partition_strategy`` ("mod": id ``i`` is row ``i // n`` of shard ``i % n``; "div":
    contiguous blocks); each shard is gathered on its own so its gradient stays sparse. A
    :class:`tensorvm.PartitionedVariable` (``get_variable`` with a partitioner) is its list of
    parts."""
    from ..array.index_ops import gather
    if isinstance(params, (list, tuple)):  # shards, or a PartitionedVariable (a list)
        params = [p for p in params]
        if not params:
            raise InvalidArgumentError("embedding_lookup: params is an empty list")
        if len(params) > 1:
            return _sharded_lookup(params, ids, partition_strategy, name)
        params = params[0]
    if max_norm is not None:
        raise InvalidArgumentError("embedding_lookup: max_norm is not supported")
    params = convert_to_tensor(params)
    with params.graph.colocate_with(params.op):
        return gather(params, ids, name=name or "embedding_lookup")


def _sharded_lookup(params, ids, strategy, name):
    from ..array.array_ops import reshape
    from ..array.partition_ops import dynamic_partition, dynamic_stitch
    from ..array.index_ops import gather
    from ..array.fill_ops import range as range_, size
    from ..math.math_ext import maximum, where_
    if strategy not in ("mod", "div"):
        raise InvalidArgumentError(f"embedding_lookup: unknown partition_strategy {strategy!r}")
    n = len(params)
    params = [convert_to_tensor(p) for p in params]
    ids = convert_to_tensor(ids)
    flat = reshape(ids, [-1])
    if strategy == "mod":
        shard, local = flat % n, flat // n
    else:  # TF's "div": contiguous blocks, the first (total % n) shards one row longer
        rows = [None if p._shape is None else p._shape[0] for p in params]
        if None in rows:
            raise InvalidArgumentError("embedding_lookup: partition_strategy 'div' needs shards "
                                       "with a known number of rows")
        per, extras = divmod(sum(rows), n)
        shard = maximum(flat // (per + 1), (flat - extras) // max(per, 1))
        local = where_(shard < extras, flat % (per + 1), (flat - extras) % max(per, 1))
    from ..math.math_ops import cast
    shard = cast(shard, _dt.int32)
    positions = dynamic_partition(range_(size(flat)), shard, n)
    parts = []
    for p, li in zip(params, dynamic_partition(local, shard, n)):
        with p.graph.colocate_with(p.op):  # as TF: only the touched rows leave the shard
            parts.append(gather(p, li))
    out = dynamic_stitch(positions, parts)
    if ids._shape is not None and len(ids._shape) == 1:
        return out if name is None else _identity(out, name)
    tail = params[0]._shape[1:] if params[0]._shape is not None else None
    dims = list(ids._shape or ()) + list(tail or ())
    if ids._shape is None or tail is None or sum(d is None for d in dims) > 1:
        raise InvalidArgumentError("embedding_lookup: sharded params with ids of rank != 1 "
                                   "need static shapes (at most one unknown dimension)")
    return reshape(out, [-1 if d is None else d for d in dims], name=name)


def _identity(x, name):
    from ..array.array_ops import identity
    return identity(x, name=name)


def moments(x, axes, shift=None, name=None, keep_dims=False, keepdims=None):
    """``(mean, variance)`` of ``x`` over ``axes``."""
    from ..math.math_ops import square
    keep = keep_dims if keepdims is None else keepdims
    x = convert_to_tensor(x)
    mean = reduce_mean(x, axis=axes, keepdims=True)
    # No stop_gradient on the mean (TF has one): the first derivative is the same, and
    # higher derivatives stay exact.
    variance = reduce_mean(square(x - mean), axis=axes, keepdims=True)
    if not keep:
        from ..array.array_ops import reshape_like
        red = reduce_sum(x, axis=axes, keepdims=False)
        mean, variance = reshape_like(mean, red), reshape_like(variance, red)
    return mean, variance


def l2_normalize(x, axis=None, epsilon=1e-12, name=None, dim=None):
    """``x / sqrt(max(sum(x ** 2, axis), epsilon))``."""
    from ..math.math_ext import maximum, rsqrt
    from ..math.math_ops import square
    if dim is not None:
        axis = dim
    x = convert_to_tensor(x)
    ss = reduce_sum(square(x), axis=axis, keepdims=True)
    return x * rsqrt(maximum(ss, epsilon))


def _in_top_k_shape(inputs, attrs):
    pred, targets = inputs
    if pred._shape is not None and len(pred._shape) != 2:
        raise InvalidArgumentError(
            f"InTopK: predictions must be 2-D, got shape {list(pred._shape)}")
    if not targets.dtype.is_integer:
        raise InvalidArgumentError(f"InTopK: targets must be int32/int64, got "
                                   f"{targets.dtype.name}")
    if targets._shape is not None and len(targets._shape) != 1:
        raise InvalidArgumentError(f"InTopK: targets must be 1-D, got shape "
                                   f"{list(targets._shape)}")
    n = None if pred._shape is None else pred._shape[0]
    return [(_dt.bool_, (n if n is not None else
                         (None if targets._shape is None else targets._shape[0]),))]


def _in_top_k_kernel(predictions, targets, k):
    n, c = predictions.shape
    xp = array_namespace(predictions)
    t = asarray(targets, like=predictions).astype(np.intp)
    ok = (t >= 0) & (t < c)
    tv_ = predictions[xp.arange(n), np.clip(t, 0, max(c - 1, 0))] if c else xp.zeros(n)
    larger = np.sum(predictions > tv_[:, None], axis=1)
    return ok & np.isfinite(tv_) & (larger < k)


register_op("InTopK", _in_top_k_shape, _in_top_k_kernel, differentiable=False)


def in_top_k(predictions, targets, k, name=None):
    """Whether ``targets[i]`` is among the ``k`` largest ``predictions[i]`` (ties count in its
    favour, as in TF); non-finite predictions and out-of-range targets give False."""
    return apply_op("InTopK", [predictions, targets], {"k": int(k)}, name=name).outputs[0]
