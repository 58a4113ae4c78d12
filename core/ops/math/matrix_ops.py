"""The structure of (batches of) matrices: transpose and adjoint, band parts, diagonals
(``matrix_diag``, ``matrix_set_diag``, TF's any-rank ``diag``/``diag_part``) and ``trace``;
and the input checks the linear-algebra modules share.
"""
from __future__ import annotations

import numpy as np

from ...framework import dtypes as _dt
from ...framework.errors import InvalidArgumentError
from ...framework.graph import Tensor
from ...framework.op_def_library import apply_op
from ...vm.kernels.array_api import array_namespace
from ...framework.op_registry import register_op
from ..array.array_ops import zeros_like
from ..common import check_same_dtype
from .math_ops import reduce_sum

__all__ = ["matrix_transpose", "matrix_band_part", "matrix_diag_part", "matrix_set_diag",
           "matrix_diag", "trace", "diag", "diag_part"]


_LINALG_DTYPES = (_dt.float32, _dt.float64)


def _matrix_shape(x, op_type, square=True, float_only=True):
    """Check ``x`` is a (batch of) matrices; returns its static shape (None if unknown)."""
    if float_only and x.dtype not in _LINALG_DTYPES:
        raise InvalidArgumentError(f"{op_type} supports float32 and float64 tensors, got "
                                   f"{x.dtype.name}")
    s = x._shape
    if s is None:
        return None
    if len(s) < 2:
        raise InvalidArgumentError(f"{op_type} needs a tensor of rank >= 2, got shape {list(s)}")
    if square and s[-1] is not None and s[-2] is not None and s[-1] != s[-2]:
        raise InvalidArgumentError(
            f"{op_type} needs square matrices in its last two dimensions, got shape {list(s)}")
    return s


def _t(x):
    return np.swapaxes(x, -1, -2)


# ---- transpose, band part -------------------------------------------------------------------
def _transpose_shape(inputs, attrs):
    s = _matrix_shape(inputs[0], "MatrixTranspose", square=False, float_only=False)
    return [(inputs[0].dtype, None if s is None else s[:-2] + (s[-1], s[-2]))]


def _transpose_kernel(x, conjugate):
    return np.conj(_t(x)) if conjugate else _t(x)


register_op("MatrixTranspose", _transpose_shape, _transpose_kernel,
            grad=lambda op, g: [matrix_transpose(g, conjugate=op.attrs["conjugate"])])


def matrix_transpose(a, name="matrix_transpose", conjugate=False):
    """Swap the last two dimensions of ``a`` (and conjugate, if asked)."""
    return apply_op("MatrixTranspose", [a], {"conjugate": bool(conjugate)}, name=name).outputs[0]


def _band_kernel(x, num_lower, num_upper):
    m, n = x.shape[-2:]
    lo, hi = int(num_lower), int(num_upper)  # two scalars, read on the host
    xp = array_namespace(x)
    i, j = xp.arange(m)[:, None], xp.arange(n)[None, :]
    mask = ((lo < 0) | (i - j <= lo)) & ((hi < 0) | (j - i <= hi))
    return xp.where(mask, x, x.dtype.type(0))


register_op("MatrixBandPart",
            lambda inputs, attrs: [(inputs[0].dtype, _matrix_shape(
                inputs[0], "MatrixBandPart", square=False, float_only=False))],
            _band_kernel,
            grad=lambda op, g: [matrix_band_part(g, op.attrs["num_lower"],
                                                 op.attrs["num_upper"])])


def matrix_band_part(input, num_lower, num_upper, name=None):
    """Keep ``num_lower`` sub-diagonals and ``num_upper`` super-diagonals (-1: all), zero the
    rest: ``matrix_band_part(x, -1, 0)`` is the lower triangle, ``(x, 0, 0)`` the diagonal."""
    if isinstance(num_lower, Tensor) or isinstance(num_upper, Tensor):
        raise InvalidArgumentError("matrix_band_part takes num_lower and num_upper as ints here")
    return apply_op("MatrixBandPart", [input], {"num_lower": int(num_lower),
                                                "num_upper": int(num_upper)},
                    name=name).outputs[0]


# ---- diagonals --------------------------------------------------------------------------------
def _diag_part_shape(inputs, attrs):
    s = _matrix_shape(inputs[0], "MatrixDiagPart", square=False, float_only=False)
    if s is None:
        return [(inputs[0].dtype, None)]
    m, n = s[-2:]
    k = None if m is None or n is None else min(m, n)
    return [(inputs[0].dtype, s[:-2] + (k,))]


def _diag_part_kernel(x):
    return np.diagonal(x, axis1=-2, axis2=-1).copy()


register_op("MatrixDiagPart", _diag_part_shape, _diag_part_kernel,
            grad=lambda op, g: [matrix_set_diag(zeros_like(op.inputs[0]), g)])


def matrix_diag_part(input, name=None):
    """The main diagonal of each matrix in ``input[..., M, N]``: shape ``[..., min(M, N)]``."""
    return apply_op("MatrixDiagPart", [input], name=name).outputs[0]


def _set_diag_shape(inputs, attrs):
    x, d = inputs
    check_same_dtype(inputs, "MatrixSetDiag")
    (want,) = _diag_part_shape([x], attrs)
    if want[1] is not None and d._shape is not None and (
            len(d._shape) != len(want[1]) or any(a is not None and b is not None and a != b
                                                 for a, b in zip(d._shape, want[1]))):
        raise InvalidArgumentError(
            f"MatrixSetDiag: diagonal of shape {list(d._shape)} does not fit input of shape "
            f"{list(x._shape)} (expected {list(want[1])})")
    return [(x.dtype, x._shape)]


def _set_diag_kernel(x, d):
    out = x.copy()
    k = array_namespace(x).arange(min(x.shape[-2:]))
    out[..., k, k] = d
    return out


register_op("MatrixSetDiag", _set_diag_shape, _set_diag_kernel,
            grad=lambda op, g: [matrix_set_diag(g, zeros_like(op.inputs[1])),
                                matrix_diag_part(g)])


def matrix_set_diag(input, diagonal, name=None):
    """``input`` with the main diagonal of each matrix replaced by ``diagonal[..., min(M, N)]``."""
    return apply_op("MatrixSetDiag", [input, diagonal], name=name).outputs[0]


def _matrix_diag_shape(inputs, attrs):
    s = inputs[0]._shape
    if s is None:
        return [(inputs[0].dtype, None)]
    if not s:
        raise InvalidArgumentError("MatrixDiag needs a tensor of rank >= 1, got a scalar")
    return [(inputs[0].dtype, s + (s[-1],))]


def _matrix_diag_kernel(d):
    n = d.shape[-1]
    xp = array_namespace(d)
    out = xp.zeros(d.shape + (n,), d.dtype)
    k = xp.arange(n)
    out[..., k, k] = d
    return out


register_op("MatrixDiag", _matrix_diag_shape, _matrix_diag_kernel,
            grad=lambda op, g: [matrix_diag_part(g)])


def matrix_diag(diagonal, name=None):
    """Batched diagonal matrices: ``[..., N]`` to ``[..., N, N]``."""
    return apply_op("MatrixDiag", [diagonal], name=name).outputs[0]


def trace(x, name=None):
    """Sum of the main diagonal of each matrix in ``x[..., M, N]``."""
    return reduce_sum(matrix_diag_part(x), axis=-1, name=name)


# ---- tf.diag / tf.diag_part (any rank) --------------------------------------------------------
def _diag_shape(inputs, attrs):
    s = inputs[0]._shape
    if s is not None and not s:
        raise InvalidArgumentError("Diag needs a tensor of rank >= 1, got a scalar")
    return [(inputs[0].dtype, None if s is None else s + s)]


def _diag_kernel(d):
    n = d.size
    xp = array_namespace(d)
    out = xp.zeros((n, n), d.dtype)
    out[xp.arange(n), xp.arange(n)] = d.reshape(-1)
    return out.reshape(d.shape + d.shape)


def _diag_part_any_shape(inputs, attrs):
    s = inputs[0]._shape
    if s is None:
        return [(inputs[0].dtype, None)]
    k = len(s) // 2
    if not s or len(s) % 2 or any(a is not None and b is not None and a != b
                                  for a, b in zip(s[:k], s[k:])):
        raise InvalidArgumentError(
            f"DiagPart needs a tensor of shape s + s (even rank >= 2), got {list(s)}")
    return [(inputs[0].dtype, tuple(a if a is not None else b for a, b in zip(s[:k], s[k:])))]


def _diag_part_any_kernel(x):
    s = x.shape[:x.ndim // 2]
    n = int(np.prod(s))
    return x.reshape(n, n).diagonal().reshape(s).copy()


register_op("Diag", _diag_shape, _diag_kernel, grad=lambda op, g: [diag_part(g)])
register_op("DiagPart", _diag_part_any_shape, _diag_part_any_kernel,
            grad=lambda op, g: [diag(g)])


def diag(diagonal, name=None):
    """``tf.diag``: a tensor of shape ``s + s`` with ``diagonal`` (shape ``s``) on its diagonal."""
    return apply_op("Diag", [diagonal], name=name).outputs[0]


def diag_part(input, name=None):
    """``tf.diag_part``: the diagonal of a tensor of shape ``s + s``, of shape ``s``."""
    return apply_op("DiagPart", [input], name=name).outputs[0]


def _adjoint(matrix, name=None):
    """The conjugate transpose of each matrix (TF's ``tf.linalg.adjoint``)."""
    return matrix_transpose(matrix, name=name or "adjoint", conjugate=True)
