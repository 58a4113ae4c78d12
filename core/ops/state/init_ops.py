"""Initializers (TF 1.x's ``tf.*_initializer``): objects called as
``init(shape, dtype=None, partition_info=None)`` that build the initial-value tensor of a
variable; ``tv.get_variable`` calls them. ``partition_info`` (a part of a partitioned variable)
gives the full shape, so that fan-in based scales are those of the whole variable.

>>> import numpy as np, tensorvm as tv
>>> init = tv.constant_initializer([[1, 2], [3, 4]])
>>> with tv.Session() as s: s.run(init([2, 2]))
array([[1., 2.],
       [3., 4.]], dtype=float32)
"""
from __future__ import annotations

import abc
import math

import numpy as np

from ...framework import dtypes as _dt
from ...framework.errors import InvalidArgumentError

__all__ = ["Initializer", "Zeros", "Ones", "Constant", "RandomUniform", "RandomNormal",
           "TruncatedNormal", "VarianceScaling", "GlorotUniform", "GlorotNormal",
           "zeros_initializer", "ones_initializer", "constant_initializer",
           "random_uniform_initializer", "random_normal_initializer",
           "truncated_normal_initializer", "variance_scaling_initializer",
           "glorot_uniform_initializer", "glorot_normal_initializer", "Orthogonal",
           "orthogonal_initializer",
           "uniform_unit_scaling_initializer", "he_normal", "he_uniform", "lecun_normal",
           "lecun_uniform"]


def _shape(shape) -> list[int]:
    try:
        dims = [int(d) for d in (shape.as_list() if hasattr(shape, "as_list") else shape)]
    except (TypeError, ValueError):
        raise InvalidArgumentError(f"an initializer needs a fully defined shape, got "
                                   f"{shape!r}") from None
    if any(d < 0 for d in dims):
        raise InvalidArgumentError(f"an initializer's shape must be non-negative, got {dims}")
    return dims


class Initializer(abc.ABC):
    """Base class: ``__call__(shape, dtype=None, partition_info=None) -> Tensor``."""

    dtype = _dt.float32

    def _dtype(self, dtype):
        return _dt.as_dtype(dtype if dtype is not None else self.dtype)

    @abc.abstractmethod
    def __call__(self, shape, dtype=None, partition_info=None):
        """A tensor of ``shape`` and ``dtype`` (the initial value)."""

    def get_config(self) -> dict:
        """The constructor's arguments as a dict (Keras's ``get_config``; ``{}`` here)."""
        return {}

    def __repr__(self):
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_config().items())
        return f"{type(self).__name__}({args})"


class Zeros(Initializer):
    """All zeros (``tv.zeros_initializer()``).

    >>> import tensorvm as tv
    >>> with tv.Graph().as_default(), tv.Session() as s:
    ...     s.run(tv.zeros_initializer()([2, 3])).tolist()
    [[0.0, 0.0, 0.0], [0.0, 0.0, 0.0]]
    """

    def __init__(self, dtype=_dt.float32):
        self.dtype = _dt.as_dtype(dtype)

    def __call__(self, shape, dtype=None, partition_info=None):
        from ..array.fill_ops import zeros
        return zeros(_shape(shape), dtype=self._dtype(dtype))


class Ones(Initializer):
    """All ones (``tv.ones_initializer()``)."""

    def __init__(self, dtype=_dt.float32):
        self.dtype = _dt.as_dtype(dtype)

    def __call__(self, shape, dtype=None, partition_info=None):
        from ..array.fill_ops import ones
        return ones(_shape(shape), dtype=self._dtype(dtype))


class Constant(Initializer):
    """A scalar fills the shape; a list or array must have as many elements as the shape
    (it is reshaped to it)."""

    def __init__(self, value=0, dtype=_dt.float32, verify_shape=False):
        self.value, self.dtype, self.verify_shape = value, _dt.as_dtype(dtype), verify_shape

    def __call__(self, shape, dtype=None, partition_info=None):
        from ..array.array_ops import constant
        dims, dt = _shape(shape), self._dtype(dtype)
        v = np.asarray(self.value)
        if v.ndim == 0:
            return constant(np.full(dims, v, dtype=dt.np_dtype), dtype=dt)
        if self.verify_shape and list(v.shape) != dims:
            raise InvalidArgumentError(f"constant_initializer: value of shape {list(v.shape)} "
                                       f"does not match the variable's shape {dims}")
        if partition_info is not None and v.size == int(np.prod(partition_info.full_shape)):
            v = v.reshape(partition_info.full_shape)[tuple(
                slice(o, o + d) for o, d in zip(partition_info.var_offset, dims))]
        if v.size != int(np.prod(dims)):
            raise InvalidArgumentError(f"constant_initializer: {v.size} values cannot fill a "
                                       f"variable of shape {dims}")
        return constant(v.reshape(dims).astype(dt.np_dtype), dtype=dt)

    def get_config(self):
        """The constructor's arguments as a dict: ``value`` and ``dtype``."""
        return {"value": self.value, "dtype": self.dtype.name}


class RandomUniform(Initializer):
    """Uniform samples in ``[minval, maxval)`` (``maxval`` defaults to 1 for floats; integer
    dtypes need it); ``tv.random_uniform_initializer``."""

    def __init__(self, minval=0.0, maxval=None, seed=None, dtype=_dt.float32):
        self.minval, self.maxval, self.seed = minval, maxval, seed
        self.dtype = _dt.as_dtype(dtype)

    def __call__(self, shape, dtype=None, partition_info=None):
        from ..math.random_ops import random_uniform
        dt = self._dtype(dtype)
        maxval = self.maxval if self.maxval is not None else (1.0 if dt.is_floating else None)
        return random_uniform(_shape(shape), self.minval, maxval, dtype=dt, seed=self.seed)

    def get_config(self):
        """The constructor's arguments as a dict: ``minval``, ``maxval``, ``seed``."""
        return {"minval": self.minval, "maxval": self.maxval, "seed": self.seed}


class RandomNormal(Initializer):
    """Normal samples of ``mean`` and ``stddev`` (floating dtypes only);
    ``tv.random_normal_initializer``."""

    _draw = "random_normal"

    def __init__(self, mean=0.0, stddev=1.0, seed=None, dtype=_dt.float32):
        self.mean, self.stddev, self.seed = mean, stddev, seed
        self.dtype = _dt.as_dtype(dtype)

    def __call__(self, shape, dtype=None, partition_info=None):
        from ..math import random_ops
        dt = self._dtype(dtype)
        if not dt.is_floating:
            raise InvalidArgumentError(f"{type(self).__name__}: dtype must be floating, got "
                                       f"{dt.name}")
        return getattr(random_ops, self._draw)(_shape(shape), self.mean, self.stddev, dtype=dt,
                                               seed=self.seed)

    def get_config(self):
        """The constructor's arguments as a dict: ``mean``, ``stddev``, ``seed``."""
        return {"mean": self.mean, "stddev": self.stddev, "seed": self.seed}


class TruncatedNormal(RandomNormal):
    """Normal samples more than two standard deviations out are redrawn."""
    _draw = "truncated_normal"


def _fans(dims):
    if not dims:
        return 1.0, 1.0
    if len(dims) == 1:
        return float(dims[0]), float(dims[0])
    receptive = float(np.prod(dims[:-2])) if len(dims) > 2 else 1.0
    return dims[-2] * receptive, dims[-1] * receptive


class VarianceScaling(Initializer):
    """Samples with variance ``scale / n``, ``n`` the fan-in, fan-out or their mean (``mode``);
    ``distribution`` "truncated_normal" (or TF 1.x's "normal"), "untruncated_normal" or
    "uniform" (in ``[-limit, limit]``, ``limit = sqrt(3 * scale / n)``)."""

    def __init__(self, scale=1.0, mode="fan_in", distribution="truncated_normal", seed=None,
                 dtype=_dt.float32):
        if scale <= 0.0:
            raise InvalidArgumentError(f"VarianceScaling: scale must be positive, got {scale}")
        if mode not in ("fan_in", "fan_out", "fan_avg"):
            raise InvalidArgumentError(f"VarianceScaling: invalid mode {mode!r}")
        if distribution not in ("normal", "truncated_normal", "untruncated_normal", "uniform"):
            raise InvalidArgumentError(f"VarianceScaling: invalid distribution "
                                       f"{distribution!r}")
        self.scale, self.mode, self.distribution, self.seed = scale, mode, distribution, seed
        self.dtype = _dt.as_dtype(dtype)

    def __call__(self, shape, dtype=None, partition_info=None):
        dims = _shape(shape)
        full = _shape(partition_info.full_shape) if partition_info is not None else dims
        fan_in, fan_out = _fans(full)
        n = {"fan_in": fan_in, "fan_out": fan_out, "fan_avg": (fan_in + fan_out) / 2}[self.mode]
        var = self.scale / max(1.0, n)
        dt = self._dtype(dtype)
        if self.distribution in ("normal", "truncated_normal"):
            # the stddev of a unit normal truncated at two standard deviations
            return TruncatedNormal(0.0, math.sqrt(var) / 0.87962566103423978, self.seed)(
                dims, dt)
        if self.distribution == "untruncated_normal":
            return RandomNormal(0.0, math.sqrt(var), self.seed)(dims, dt)
        limit = math.sqrt(3.0 * var)
        return RandomUniform(-limit, limit, self.seed)(dims, dt)

    def get_config(self):
        """The constructor's arguments as a dict: ``scale``, ``mode``, ``distribution``,
        ``seed``."""
        return {"scale": self.scale, "mode": self.mode, "distribution": self.distribution,
                "seed": self.seed}


class GlorotUniform(VarianceScaling):
    """Uniform in ``[-limit, limit]``, ``limit = sqrt(6 / (fan_in + fan_out))`` (Xavier)."""

    def __init__(self, seed=None, dtype=_dt.float32):
        super().__init__(1.0, "fan_avg", "uniform", seed, dtype)


class GlorotNormal(VarianceScaling):
    """Truncated normal with stddev ``sqrt(2 / (fan_in + fan_out))``."""

    def __init__(self, seed=None, dtype=_dt.float32):
        super().__init__(1.0, "fan_avg", "truncated_normal", seed, dtype)


class Orthogonal(Initializer):
    """A random orthogonal matrix (rows or columns orthonormal, times ``gain``), reshaped to
    the variable's shape (all but the last dimension flattened into rows)."""

    def __init__(self, gain=1.0, seed=None, dtype=_dt.float32):
        self.gain, self.seed, self.dtype = gain, seed, _dt.as_dtype(dtype)

    def __call__(self, shape, dtype=None, partition_info=None):
        from ..array.array_ops import reshape
        from ..math.linalg_ops import matrix_diag_part, qr
        from ..array.manip_ops import expand_dims, transpose
        from ..math.math_ops import cast
        from ..math.random_ops import random_normal
        dims, dt = _shape(shape), self._dtype(dtype)
        if len(dims) < 2:
            raise InvalidArgumentError(f"orthogonal_initializer needs a shape of rank >= 2, "
                                       f"got {dims}")
        rows, cols = int(np.prod(dims[:-1])), dims[-1]
        a = random_normal([max(rows, cols), min(rows, cols)], dtype=dt, seed=self.seed)
        # Q of a's QR with the signs fixed by R's diagonal: a uniform random orthogonal matrix
        q, r = qr(a)
        q = q * expand_dims(1 - 2 * cast(matrix_diag_part(r) < 0, dt), 0)
        if rows < cols:
            q = transpose(q)
        return reshape(q, dims) * self.gain

    def get_config(self):
        """The constructor's arguments as a dict: ``gain`` and ``seed``."""
        return {"gain": self.gain, "seed": self.seed}


orthogonal_initializer = Orthogonal
zeros_initializer = Zeros
ones_initializer = Ones
constant_initializer = Constant
random_uniform_initializer = RandomUniform
random_normal_initializer = RandomNormal
truncated_normal_initializer = TruncatedNormal
variance_scaling_initializer = VarianceScaling
glorot_uniform_initializer = GlorotUniform
glorot_normal_initializer = GlorotNormal


def uniform_unit_scaling_initializer(factor=1.0, seed=None, dtype=_dt.float32):
    """TF 1.x's deprecated unit-scaling initializer: uniform with ``limit = factor *
    sqrt(3 / fan_in)``."""
    return VarianceScaling(factor * factor, "fan_in", "uniform", seed, dtype)


def he_normal(seed=None):
    """He et al.'s normal initializer: truncated normal of variance ``2 / fan_in``."""
    return VarianceScaling(2.0, "fan_in", "truncated_normal", seed)


def he_uniform(seed=None):
    """He et al.'s uniform initializer: variance ``2 / fan_in``."""
    return VarianceScaling(2.0, "fan_in", "uniform", seed)


def lecun_normal(seed=None):
    """LeCun's normal initializer: truncated normal of variance ``1 / fan_in``."""
    return VarianceScaling(1.0, "fan_in", "truncated_normal", seed)


def lecun_uniform(seed=None):
    """LeCun's uniform initializer: variance ``1 / fan_in``."""
    return VarianceScaling(1.0, "fan_in", "uniform", seed)
