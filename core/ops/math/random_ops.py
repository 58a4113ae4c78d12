"""Random ops, seeded per graph and per op as in TensorFlow 1.x.

An op's seed pair comes from :func:`get_seed`: with a graph seed (``tv.set_random_seed``) and no
op seed, the op seed is the op's position in the graph; with only an op seed, the graph seed is a
fixed default; with neither, the op is nondeterministic. Each op keeps a NumPy ``Generator`` as
a resource of its device (``rng/<op name>`` in the device's ResourceMgr), created from the seed
pair on first use: every ``run`` draws new values, and a seeded graph run in a fresh session
repeats the same sequence.

The ops are stateful: never constant-folded or merged. Mean/stddev and min/max are applied with
ordinary ops on a standard draw (as TF does), so they are differentiable.

>>> import tensorvm as tv
>>> g = tv.Graph()
>>> with g.as_default():
...     tv.set_random_seed(1)
...     x = tv.random_uniform([2])
>>> a = tv.Session(graph=g).run(x); b = tv.Session(graph=g).run(x)
>>> bool((a == b).all())
True
"""
from __future__ import annotations

import threading
from collections import OrderedDict

import numpy as np

from ...framework import dtypes as _dt
from ...framework.errors import InvalidArgumentError
from ...framework.graph import Tensor, get_default_graph
from ...framework.op_def_library import apply_op
from ...framework.op_registry import register_op
from ...framework.tensor_conversion import convert_to_tensor
from ..array.array_ops import shape_tensor
from ..common import static_shape_of, static_value

__all__ = ["random_normal", "random_uniform", "truncated_normal", "random_shuffle",
           "multinomial", "get_seed"]

DEFAULT_GRAPH_SEED = 87654321


def get_seed(op_seed=None) -> tuple[int | None, int | None]:
    """The ``(graph seed, op seed)`` pair for a new random op in the default graph.

    ``(None, None)`` means nondeterministic."""
    g = get_default_graph()
    if g.seed is not None:
        return int(g.seed), int(op_seed) if op_seed is not None else len(g._ops)
    if op_seed is not None:
        return DEFAULT_GRAPH_SEED, int(op_seed)
    return None, None


class _Streams:
    """The generators of one random op on one device, one per session, so that a fresh session
    repeats a seeded op's sequence even where the device's resources outlive sessions (a
    dask.distributed worker). The oldest sessions' generators are dropped beyond 32."""

    MAX = 32

    def __init__(self):
        self._by_session: OrderedDict[str, np.random.Generator] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, session: str, seed, seed2) -> np.random.Generator:
        with self._lock:
            gen = self._by_session.get(session)
            if gen is None:
                gen = np.random.default_rng(None if seed is None else
                                            [seed & 0xFFFFFFFF, seed2 & 0xFFFFFFFF])
                self._by_session[session] = gen
                while len(self._by_session) > self.MAX:
                    self._by_session.popitem(last=False)
            else:
                self._by_session.move_to_end(session)
            return gen


def _rng(ctx, seed, seed2) -> np.random.Generator:
    """The op's generator for this session: resource ``rng/<op name>`` of the device; the
    session is the prefix of the step id (``"<session token>.<step>"``)."""
    session = "" if ctx.step_id is None else str(ctx.step_id).split(".", 1)[0]
    return ctx.resources.lookup_or_create("", "rng/" + ctx.op_name, _Streams).get(
        session, seed, seed2)


def _dims(shape) -> tuple[int, ...]:
    dims = tuple(int(d) for d in np.asarray(shape).reshape(-1))
    if any(d < 0 for d in dims):
        raise InvalidArgumentError(f"random shape must be non-negative, got {list(dims)}")
    return dims


def _float_draw_shape(op):
    def fn(inputs, attrs):
        s = inputs[0]
        if not s.dtype.is_integer or (s._shape is not None and len(s._shape) != 1):
            raise InvalidArgumentError(f"{op}: shape must be a 1-D integer tensor, got {s!r}")
        dt = attrs["dtype"]
        if not dt.is_floating:
            raise InvalidArgumentError(f"{op}: dtype must be a floating type, got {dt.name}")
        target = static_shape_of(s)
        if target is not None and any(d is not None and d < 0 for d in target):
            raise InvalidArgumentError(f"{op}: shape must be non-negative, got {list(target)}")
        return [(dt, target)]
    return fn


def _as(x, dtype):
    return x.astype(dtype.np_dtype, copy=False)


def _normal_kernel(ctx, shape, *, dtype, seed, seed2):
    return _as(_rng(ctx, seed, seed2).standard_normal(_dims(shape)), dtype)


def _uniform_kernel(ctx, shape, *, dtype, seed, seed2):
    return _as(_rng(ctx, seed, seed2).random(_dims(shape)), dtype)


def _truncated_kernel(ctx, shape, *, dtype, seed, seed2):
    rng = _rng(ctx, seed, seed2)
    out = rng.standard_normal(_dims(shape))
    bad = np.abs(out) > 2.0
    while bad.any():  # each round redraws ~5% of what is left
        out[bad] = rng.standard_normal(int(bad.sum()))
        bad = np.abs(out) > 2.0
    return _as(out, dtype)


for _op, _k in (("RandomStandardNormal", _normal_kernel), ("RandomUniform", _uniform_kernel),
                ("TruncatedNormal", _truncated_kernel)):
    register_op(_op, _float_draw_shape(_op), _k, stateful=True, needs_ctx=True,
                differentiable=False)


def _draw(op_type, shape, dtype, seed, name):
    dt = _dt.as_dtype(dtype)
    s1, s2 = get_seed(seed)
    return apply_op(op_type, [shape_tensor(shape, op_type)],
                    {"dtype": dt, "seed": s1, "seed2": s2}, name=name).outputs[0]


def _is(x, v) -> bool:
    sv = static_value(x) if not isinstance(x, Tensor) else None
    return sv is not None and sv.shape == () and sv == v


def _scale_shift(draw, scale, shift):
    if not _is(scale, 1):
        draw = draw * convert_to_tensor(scale, dtype=draw.dtype)
    if not _is(shift, 0):
        draw = draw + convert_to_tensor(shift, dtype=draw.dtype)
    return draw


def random_normal(shape, mean=0.0, stddev=1.0, dtype=_dt.float32, seed=None,
                  name=None) -> Tensor:
    """Normal samples: ``tv.random_normal([2, 3], stddev=0.1, seed=1)``."""
    draw = _draw("RandomStandardNormal", shape, dtype, seed, name or "random_normal")
    return _scale_shift(draw, stddev, mean)


def truncated_normal(shape, mean=0.0, stddev=1.0, dtype=_dt.float32, seed=None,
                     name=None) -> Tensor:
    """Normal samples redrawn where they fall more than two standard deviations out."""
    draw = _draw("TruncatedNormal", shape, dtype, seed, name or "truncated_normal")
    return _scale_shift(draw, stddev, mean)


def _uniform_int_shape(inputs, attrs):
    s, lo, hi = inputs
    if not s.dtype.is_integer or (s._shape is not None and len(s._shape) != 1):
        raise InvalidArgumentError(f"RandomUniformInt: shape must be a 1-D integer tensor, got "
                                   f"{s!r}")
    for t in (lo, hi):
        if t._shape not in ((), None):
            raise InvalidArgumentError("RandomUniformInt: minval and maxval must be scalars")
    lv, hv = static_value(lo), static_value(hi)
    if lv is not None and hv is not None and not lv < hv:
        raise InvalidArgumentError(f"RandomUniformInt: need minval < maxval, got {lv} >= {hv}")
    return [(lo.dtype, static_shape_of(s))]


def _uniform_int_kernel(ctx, shape, minval, maxval, *, seed, seed2):
    if not minval < maxval:
        raise InvalidArgumentError(f"RandomUniformInt: need minval < maxval, got {minval} >= "
                                   f"{maxval}")
    return _rng(ctx, seed, seed2).integers(minval, maxval, _dims(shape), dtype=minval.dtype)


register_op("RandomUniformInt", _uniform_int_shape, _uniform_int_kernel, stateful=True,
            needs_ctx=True, differentiable=False)


def random_uniform(shape, minval=0, maxval=None, dtype=_dt.float32, seed=None,
                   name=None) -> Tensor:
    """Uniform samples in ``[minval, maxval)`` (``maxval`` defaults to 1 for floats and is
    required for integer dtypes)."""
    dt = _dt.as_dtype(dtype)
    name = name or "random_uniform"
    if dt.is_integer:
        if maxval is None:
            raise InvalidArgumentError(f"random_uniform: maxval must be given for dtype "
                                       f"{dt.name}")
        s1, s2 = get_seed(seed)
        return apply_op("RandomUniformInt", [shape_tensor(shape, "RandomUniformInt"),
                                             convert_to_tensor(minval, dtype=dt),
                                             convert_to_tensor(maxval, dtype=dt)],
                        {"seed": s1, "seed2": s2}, name=name).outputs[0]
    if not dt.is_floating:
        raise InvalidArgumentError(f"random_uniform: dtype must be a float or integer type, got "
                                   f"{dt.name}")
    draw = _draw("RandomUniform", shape, dt, seed, name)
    if maxval is None:
        maxval = 1
    if _is(minval, 0):
        return _scale_shift(draw, maxval, 0)
    lo = convert_to_tensor(minval, dtype=dt)
    return draw * (convert_to_tensor(maxval, dtype=dt) - lo) + lo


def _shuffle_kernel(ctx, x, *, seed, seed2):
    if np.ndim(x) == 0:
        return x
    return _rng(ctx, seed, seed2).permutation(x, axis=0)


register_op("RandomShuffle", lambda inputs, attrs: [(inputs[0].dtype, inputs[0]._shape)],
            _shuffle_kernel, stateful=True, needs_ctx=True, differentiable=False)


def random_shuffle(value, seed=None, name=None) -> Tensor:
    """``value`` with its first dimension shuffled, a new permutation each run."""
    s1, s2 = get_seed(seed)
    return apply_op("RandomShuffle", [value], {"seed": s1, "seed2": s2},
                    name=name or "random_shuffle").outputs[0]


def _multinomial_shape(inputs, attrs):
    logits = inputs[0]
    if not logits.dtype.is_floating:
        raise InvalidArgumentError(f"Multinomial: logits must be floats, got "
                                   f"{logits.dtype.name}")
    if logits._shape is not None and len(logits._shape) != 2:
        raise InvalidArgumentError(f"Multinomial: logits must be 2-D [batch, classes], got "
                                   f"shape {list(logits._shape)}")
    if attrs["num_samples"] < 0:
        raise InvalidArgumentError(f"Multinomial: num_samples must be >= 0, got "
                                   f"{attrs['num_samples']}")
    batch = None if logits._shape is None else logits._shape[0]
    return [(attrs["output_dtype"], (batch, attrs["num_samples"]))]


def _multinomial_kernel(ctx, logits, *, num_samples, output_dtype, seed, seed2):
    if logits.ndim != 2 or logits.shape[1] == 0:
        raise InvalidArgumentError(f"Multinomial: logits must be [batch, classes>0], got "
                                   f"shape {list(logits.shape)}")
    rng = _rng(ctx, seed, seed2)
    gumbel = rng.gumbel(size=(logits.shape[0], num_samples, logits.shape[1]))
    z = logits.astype(np.float64)[:, None, :] + gumbel  # Gumbel-max trick
    return np.argmax(z, axis=-1).astype(output_dtype.np_dtype)


register_op("Multinomial", _multinomial_shape, _multinomial_kernel, stateful=True,
            needs_ctx=True, differentiable=False)


def multinomial(logits, num_samples, seed=None, name=None, output_dtype=_dt.int64) -> Tensor:
    """``num_samples`` class indices per row drawn from ``softmax(logits)``."""
    from ..common import static_int
    s1, s2 = get_seed(seed)
    return apply_op("Multinomial", [logits], {
        "num_samples": static_int(num_samples, "num_samples", "Multinomial"),
        "output_dtype": _dt.as_dtype(output_dtype), "seed": s1, "seed2": s2},
        name=name or "multinomial").outputs[0]
