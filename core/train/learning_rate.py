"""Learning-rate schedules of ``tf.train`` (TF 1.x formulas), as graph ops of ``global_step``:
pass the result to an optimizer as its learning rate.

>>> import tensorvm as tv
>>> step = tv.Variable(5, dtype=tv.int64, trainable=False)
>>> lr = tv.train.exponential_decay(0.1, step, decay_steps=10, decay_rate=0.5)
>>> with tv.Session() as s: _ = s.run(step.initializer); round(float(s.run(lr)), 6)
0.070711
"""
from __future__ import annotations

import math

from ..framework import dtypes as _dt
from ..framework.errors import InvalidArgumentError
from ..framework.tensor_conversion import convert_to_tensor

__all__ = [
    "cosine_decay",
    "cosine_decay_restarts",
    "exponential_decay",
    "inverse_time_decay",
    "linear_cosine_decay",
    "natural_exp_decay",
    "noisy_linear_cosine_decay",
    "piecewise_constant",
    "piecewise_constant_decay",
    "polynomial_decay",
]


def _prep(learning_rate, global_step, name):
    from ..ops.math.math_ops import cast
    if global_step is None:
        raise InvalidArgumentError(f"global_step is required for {name}.")
    lr = convert_to_tensor(learning_rate)
    if not lr.dtype.is_floating:
        lr = cast(lr, _dt.float32)
    return lr, cast(convert_to_tensor(global_step), lr.dtype)


def _progress(step, decay_steps, staircase, dtype):
    from ..ops.math.math_ext import floor
    p = step / convert_to_tensor(decay_steps, dtype=dtype)
    return floor(p) if staircase else p


def exponential_decay(learning_rate, global_step, decay_steps, decay_rate, staircase=False,
                      name=None):
    """``learning_rate * decay_rate ** (global_step / decay_steps)`` (the exponent floored
    when ``staircase``)."""
    from ..ops.math.math_ops import pow as pow_
    lr, step = _prep(learning_rate, global_step, "exponential_decay")
    rate = convert_to_tensor(decay_rate, dtype=lr.dtype)
    return lr * pow_(rate, _progress(step, decay_steps, staircase, lr.dtype))


def natural_exp_decay(learning_rate, global_step, decay_steps, decay_rate, staircase=False,
                      name=None):
    """``learning_rate * exp(-decay_rate * global_step / decay_steps)``."""
    from ..ops.math.math_ops import exp
    lr, step = _prep(learning_rate, global_step, "natural_exp_decay")
    rate = convert_to_tensor(decay_rate, dtype=lr.dtype)
    return lr * exp(-rate * _progress(step, decay_steps, staircase, lr.dtype))


def inverse_time_decay(learning_rate, global_step, decay_steps, decay_rate, staircase=False,
                       name=None):
    """``learning_rate / (1 + decay_rate * global_step / decay_steps)``."""
    lr, step = _prep(learning_rate, global_step, "inverse_time_decay")
    rate = convert_to_tensor(decay_rate, dtype=lr.dtype)
    return lr / (1.0 + rate * _progress(step, decay_steps, staircase, lr.dtype))


def polynomial_decay(learning_rate, global_step, decay_steps, end_learning_rate=0.0001,
                     power=1.0, cycle=False, name=None):
    """``(lr - end) * (1 - step / decay_steps) ** power + end`` with ``step`` capped at
    ``decay_steps``; with ``cycle``, ``decay_steps`` grows to the next multiple past the
    step instead."""
    from ..ops.math.math_ext import ceil, maximum, minimum
    from ..ops.math.math_ops import pow as pow_
    lr, step = _prep(learning_rate, global_step, "polynomial_decay")
    ds = convert_to_tensor(decay_steps, dtype=lr.dtype)
    if cycle:
        ds = ds * maximum(ceil(step / ds), 1.0)
    else:
        step = minimum(step, ds)
    end = convert_to_tensor(end_learning_rate, dtype=lr.dtype)
    return (lr - end) * pow_(1.0 - step / ds, convert_to_tensor(power, dtype=lr.dtype)) + end


def cosine_decay(learning_rate, global_step, decay_steps, alpha=0.0, name=None):
    """``lr * ((1 - alpha) * 0.5 * (1 + cos(pi * min(step, decay_steps) / decay_steps)) +
    alpha)``."""
    from ..ops.math.math_ext import cos, minimum
    lr, step = _prep(learning_rate, global_step, "cosine_decay")
    ds = convert_to_tensor(decay_steps, dtype=lr.dtype)
    cosine = 0.5 * (1.0 + cos(math.pi * minimum(step, ds) / ds))
    return lr * ((1.0 - alpha) * cosine + alpha)


def piecewise_constant(x, boundaries, values, name=None):
    """``values[0]`` while ``x <= boundaries[0]``, ``values[i]`` while ``boundaries[i-1] < x <=
    boundaries[i]``, ``values[-1]`` after the last boundary."""
    from ..ops.math.math_ext import greater, where_
    from ..ops.math.math_ops import cast
    if len(values) != len(boundaries) + 1:
        raise InvalidArgumentError(f"piecewise_constant: the length of values "
                                   f"({len(values)}) must be one more than the length of "
                                   f"boundaries ({len(boundaries)})")
    x = convert_to_tensor(x)
    vals = [convert_to_tensor(v) for v in values]
    if len({v.dtype for v in vals}) > 1:
        raise InvalidArgumentError("piecewise_constant: values must all have the same dtype, "
                                   f"got {[v.dtype.name for v in vals]}")
    out = vals[0]
    for b, v in zip(boundaries, vals[1:]):
        bt = convert_to_tensor(b, dtype=x.dtype) if not hasattr(b, "op") else cast(b, x.dtype)
        out = where_(greater(x, bt), v, out)
    return out


piecewise_constant_decay = piecewise_constant  # TF 1.x's other name for it


def _is_number(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def cosine_decay_restarts(learning_rate, global_step, first_decay_steps, t_mul=2.0, m_mul=1.0,
                          alpha=0.0, name=None):
    """Cosine decay with warm restarts (SGDR): the ``i``-th period lasts
    ``first_decay_steps * t_mul ** i`` steps and starts from ``learning_rate * m_mul ** i``;
    within a period the rate follows ``(1 - alpha) * 0.5 * (1 + cos(pi * fraction)) + alpha``
    of its start."""
    from ..ops.control.control_flow_ops import cond
    from ..ops.math.math_ext import cos, equal, floor
    from ..ops.math.math_ops import log
    from ..ops.math.math_ops import pow as pow_
    lr, step = _prep(learning_rate, global_step, "cosine_decay_restarts")
    dt = lr.dtype
    fraction = step / convert_to_tensor(first_decay_steps, dtype=dt)
    t = convert_to_tensor(t_mul, dtype=dt)
    m = convert_to_tensor(m_mul, dtype=dt)

    def geometric():
        i = floor(log(1.0 - fraction * (1.0 - t)) / log(t))
        total = (1.0 - pow_(t, i)) / (1.0 - t)
        return i, (fraction - total) / pow_(t, i)

    def linear():
        i = floor(fraction)
        return i, fraction - i
    if _is_number(t_mul):
        i_restart, frac = linear() if float(t_mul) == 1.0 else geometric()
    else:
        i_restart, frac = cond(equal(t, 1.0), linear, geometric)
    cosine = 0.5 * pow_(m, i_restart) * (1.0 + cos(math.pi * frac))
    return lr * ((1.0 - alpha) * cosine + alpha)


def _linear_cosine(learning_rate, global_step, decay_steps, num_periods, alpha, beta, what,
                   noise=None):
    from ..ops.math.math_ext import cos, minimum
    lr, step = _prep(learning_rate, global_step, what)
    dt = lr.dtype
    ds = convert_to_tensor(decay_steps, dtype=dt)
    step = minimum(step, ds)
    linear = (ds - step) / ds
    if noise is not None:
        linear = linear + noise(step)
    fraction = 2.0 * convert_to_tensor(num_periods, dtype=dt) * (step / ds)
    cosine = 0.5 * (1.0 + cos(math.pi * fraction))
    return lr * ((convert_to_tensor(alpha, dtype=dt) + linear) * cosine +
                 convert_to_tensor(beta, dtype=dt))


def linear_cosine_decay(learning_rate, global_step, decay_steps, num_periods=0.5, alpha=0.0,
                        beta=0.001, name=None):
    """``lr * ((alpha + (decay_steps - step) / decay_steps) * 0.5 * (1 + cos(2 pi
    num_periods step / decay_steps)) + beta)``, ``step`` capped at ``decay_steps``."""
    return _linear_cosine(learning_rate, global_step, decay_steps, num_periods, alpha, beta,
                          "linear_cosine_decay")


def noisy_linear_cosine_decay(learning_rate, global_step, decay_steps, initial_variance=1.0,
                              variance_decay=0.55, num_periods=0.5, alpha=0.0, beta=0.001,
                              name=None):
    """:func:`linear_cosine_decay` whose linear term gets Gaussian noise of variance
    ``initial_variance / (1 + step) ** variance_decay`` (a fresh draw each step)."""
    from ..ops.math.math_ops import pow as pow_
    from ..ops.math.math_ops import sqrt
    from ..ops.math.random_ops import random_normal

    def noise(step):
        var = convert_to_tensor(initial_variance, dtype=step.dtype) / pow_(
            1.0 + step, convert_to_tensor(variance_decay, dtype=step.dtype))
        return random_normal([], stddev=sqrt(var), dtype=step.dtype)
    return _linear_cosine(learning_rate, global_step, decay_steps, num_periods, alpha, beta,
                          "noisy_linear_cosine_decay", noise)
