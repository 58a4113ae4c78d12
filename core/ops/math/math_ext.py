"""More element-wise math, comparisons, logic, select, and more reductions (max, min, prod, any,
all, logsumexp, argmax/argmin, cumsum, count_nonzero), with their gradients; TF's other
arithmetic names (floormod, floor_div, realdiv, div_no_nan, scalar_mul, saturate_cast),
cumprod, linspace, meshgrid, where_v2, the histograms and the modulus of complex tensors.

The ops live in modules by concept, gathered here under one name (``tv.ops.math_ext``):
:mod:`.elementwise_ops`, :mod:`.select_ops` (where, where_v2, clip_by_value),
:mod:`.reduction_ops` (reductions, argmax/argmin, cumsum, cumprod), :mod:`.grid_ops` (linspace,
meshgrid) and :mod:`.histogram_ops`. Each op's definition, shape rule, kernel and gradient sit
together, as in math_ops. Comparison, logical, rounding and index ops are not differentiable
(TensorFlow returns ``None`` for them).

>>> import tensorvm as tv
>>> x = tv.constant([[1.0, 5.0], [7.0, 3.0]])
>>> with tv.Session() as s:
...     s.run([tv.reduce_max(x, axis=1), tv.argmax(x, axis=1), x > 2.0])[1].tolist()
[1, 0]
"""
from __future__ import annotations

from . import elementwise_ops, grid_ops, histogram_ops, reduction_ops, select_ops
from .elementwise_ops import (  # noqa: F401
    abs, ceil, cos, div_no_nan, equal, expm1, floor, floor_div, floormod, greater, greater_equal,
    is_finite, is_inf, is_nan, less, less_equal, log1p, logical_and, logical_not, logical_or,
    logical_xor, maximum, minimum, not_equal, realdiv, reciprocal, round, rsqrt, saturate_cast,
    scalar_mul, sigmoid, sigmoid_grad, sign, sin, squared_difference, tan, tanh, tanh_grad)
from .grid_ops import lin_space, linspace, meshgrid  # noqa: F401
from .histogram_ops import histogram_fixed_width, histogram_fixed_width_bins  # noqa: F401
from .reduction_ops import (  # noqa: F401
    argmax, argmin, count_nonzero, cumprod, cumsum, reduce_all, reduce_any, reduce_logsumexp,
    reduce_max, reduce_min, reduce_prod)
from .select_ops import clip_by_value, where, where_, where_v2  # noqa: F401

__all__ = [*elementwise_ops.__all__, *select_ops.__all__, *reduction_ops.__all__,
           *grid_ops.__all__, *histogram_ops.__all__]
