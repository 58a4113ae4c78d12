"""Matrix ops, batched over leading dimensions: inverse, determinant, solve, Cholesky, transpose,
trace, diagonals and band parts, with their gradients.

A singular (or, for Cholesky, non positive-definite) input fails at run time with an
``InvalidArgumentError`` naming the op.

>>> import tensorvm as tv
>>> a = tv.constant([[2.0, 0.0], [0.0, 4.0]], dtype=tv.float64)
>>> with tv.Session() as s:
...     s.run(tv.matrix_inverse(a)).tolist(), round(float(s.run(tv.matrix_determinant(a))), 9)
([[0.5, 0.0], [0.0, 0.25]], 8.0)
"""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from .. import dtypes as _dt
from ..errors import InvalidArgumentError
from ..graph import Tensor
from ..op_def_library import apply_op
from ..kernels_gpu import array_namespace
from ..registry import register_op
from .array_ops import zeros_like
from .common import asarray, check_same_dtype
from .math_ops import matmul, reduce_sum

__all__ = ["matrix_inverse", "matrix_determinant", "matrix_solve", "cholesky",
           "matrix_transpose", "trace", "matrix_diag", "matrix_diag_part", "matrix_set_diag",
           "matrix_band_part", "diag", "diag_part", "linalg", "qr"]

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


# ---- inverse ----------------------------------------------------------------------------------
def _inverse_kernel(x, adjoint):
    try:
        return np.linalg.inv(_t(x) if adjoint else x)
    except np.linalg.LinAlgError:
        raise InvalidArgumentError("Input is not invertible (singular matrix)") from None


def _inverse_grad(op, g):
    # d(A^-1) = -A^-1 dA A^-1, so dL/dA = -A^-T g A^-T (for adjoint=True, transpose it).
    ainv = op.outputs[0]
    adj = op.attrs["adjoint"]
    return [-matmul(ainv, matmul(g, ainv, transpose_a=adj, transpose_b=not adj),
                    transpose_a=not adj)]


register_op("MatrixInverse",
            lambda inputs, attrs: [(inputs[0].dtype, _matrix_shape(inputs[0], "MatrixInverse"))],
            _inverse_kernel, grad=_inverse_grad)


def matrix_inverse(input, adjoint=False, name=None):
    """Inverse of each square matrix in ``input[..., M, M]`` (of its transpose if ``adjoint``)."""
    return apply_op("MatrixInverse", [input], {"adjoint": bool(adjoint)}, name=name).outputs[0]


# ---- determinant ------------------------------------------------------------------------------
def _det_shape(inputs, attrs):
    s = _matrix_shape(inputs[0], "MatrixDeterminant")
    return [(inputs[0].dtype, None if s is None else s[:-2])]


def _det_kernel(x):
    return asarray(np.linalg.det(x), x.dtype, like=x)


def _det_grad(op, g):
    # d det(A) / dA = det(A) A^-T
    a = op.inputs[0]
    scale = apply_op("ExpandReduced", [g * op.outputs[0], a], {"axis": (-2, -1)}).outputs[0]
    return [scale * matrix_inverse(a, adjoint=True)]


register_op("MatrixDeterminant", _det_shape, _det_kernel, grad=_det_grad)


def matrix_determinant(input, name=None):
    """Determinant of each square matrix in ``input[..., M, M]``; shape ``input.shape[:-2]``."""
    return apply_op("MatrixDeterminant", [input], name=name).outputs[0]


# ---- solve ------------------------------------------------------------------------------------
def _solve_shape(inputs, attrs):
    a, b = inputs
    check_same_dtype(inputs, "MatrixSolve")
    sa = _matrix_shape(a, "MatrixSolve")
    sb = _matrix_shape(b, "MatrixSolve", square=False)
    if sa is None or sb is None:
        return [(a.dtype, sb)]
    if len(sa) != len(sb) or any(x is not None and y is not None and x != y
                                 for x, y in zip(sa[:-1], sb[:-1])):
        raise InvalidArgumentError(
            f"MatrixSolve: matrix [..., M, M] and rhs [..., M, K] must have the same batch "
            f"dimensions and M, got shapes {list(sa)} and {list(sb)}")
    return [(a.dtype, sb)]


def _solve_kernel(a, b, adjoint):
    try:
        return np.linalg.solve(_t(a) if adjoint else a, b)
    except np.linalg.LinAlgError:
        raise InvalidArgumentError("Input matrix is not invertible (singular matrix)") from None


def _solve_grad(op, g):
    a = op.inputs[0]
    adj = op.attrs["adjoint"]
    x = op.outputs[0]
    gb = matrix_solve(a, g, adjoint=not adj)
    ga = -matmul(x, gb, transpose_b=True) if adj else -matmul(gb, x, transpose_b=True)
    return [ga, gb]


register_op("MatrixSolve", _solve_shape, _solve_kernel, grad=_solve_grad)


def matrix_solve(matrix, rhs, adjoint=False, name=None):
    """``X`` with ``matrix @ X = rhs`` (``matrix^T @ X = rhs`` if ``adjoint``), batched:
    ``matrix[..., M, M]``, ``rhs[..., M, K]``."""
    return apply_op("MatrixSolve", [matrix, rhs], {"adjoint": bool(adjoint)},
                    name=name).outputs[0]


# ---- Cholesky ---------------------------------------------------------------------------------
def _cholesky_kernel(x):
    try:
        return np.linalg.cholesky(x)  # reads the lower triangle only, as TensorFlow does
    except np.linalg.LinAlgError:
        raise InvalidArgumentError("Cholesky decomposition was not successful: the input is "
                                   "not positive definite") from None


def _cholesky_grad(op, g):
    # Murray (2016), as in TensorFlow: with Phi(X) = tril(X) - diag(X) / 2,
    # S = L^-T Phi(L^T g) L^-1 and dA = (S + S^T) / 2.
    el = op.outputs[0]
    linv = matrix_inverse(el)
    mid = matmul(el, g, transpose_a=True)
    mid = matrix_band_part(mid, -1, 0) - 0.5 * matrix_band_part(mid, 0, 0)
    s = matmul(matmul(linv, mid, transpose_a=True), linv)
    return [0.5 * (s + matrix_transpose(s))]


register_op("Cholesky",
            lambda inputs, attrs: [(inputs[0].dtype, _matrix_shape(inputs[0], "Cholesky"))],
            _cholesky_kernel, grad=_cholesky_grad)


def cholesky(input, name=None):
    """Lower-triangular ``L`` with ``L @ L^T = input`` for each symmetric positive-definite
    matrix in ``input[..., M, M]`` (only the lower triangle of ``input`` is read)."""
    return apply_op("Cholesky", [input], name=name).outputs[0]


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


# ---- QR ---------------------------------------------------------------------------------------
def _qr_shape(inputs, attrs):
    x = inputs[0]
    s = _matrix_shape(x, "Qr", square=False)
    if s is None:
        return [(x.dtype, None), (x.dtype, None)]
    m, n = s[-2], s[-1]
    k = m if attrs["full_matrices"] else (None if m is None or n is None else min(m, n))
    return [(x.dtype, s[:-2] + (m, k)), (x.dtype, s[:-2] + (k, n))]


def _qr_kernel(x, full_matrices):
    q, r = np.linalg.qr(x, mode="complete" if full_matrices else "reduced")
    return q, r


def _adjoint(x):
    return matrix_transpose(x)


def _times_inverse_transpose(x, r):
    """``x @ inv(r)^T`` for an invertible square ``r`` (TF's ``_TriangularSolve``)."""
    return _adjoint(matrix_solve(r, _adjoint(x)))


def _qr_grad_deep(q, r, dq, dr):
    """TF's ``_QrGradSquareAndDeepMatrices`` (rows >= columns; Walter and Lehmann 2018)."""
    qdq = matmul(q, dq, transpose_a=True)
    qdq_ = qdq - _adjoint(qdq)
    rdr = matmul(r, dr, transpose_b=True)
    rdr_ = rdr - _adjoint(rdr)
    tril = matrix_band_part(qdq_ + rdr_, -1, 0)
    grad_a = matmul(q, dr + _times_inverse_transpose(tril, r))
    grad_b = _times_inverse_transpose(dq - matmul(q, qdq), r)
    return grad_a + grad_b


def _qr_grad(op, dq, dr):
    from ..errors import UnimplementedError
    from .manip_ops import concat
    a = op.inputs[0]
    q, r = op.outputs
    qs, rs = q._shape, r._shape
    if rs is None or qs is None or None in rs[-2:] or None in qs[-2:]:
        raise UnimplementedError("QrGrad not implemented with dynamic shapes.")
    if rs[-2] > rs[-1] and qs[-2] == qs[-1]:
        raise UnimplementedError("QrGrad not implemented when nrows > ncols and "
                                 "full_matrices is true.")
    dq = zeros_like(q) if dq is None else dq
    dr = zeros_like(r) if dr is None else dr
    m, n = qs[-2], rs[-1]
    if m >= n:
        return [_qr_grad_deep(q, r, dq, dr)]
    # a wide matrix: A = [X | Y] with X square, R = [U | V], as TF does
    y, u, du, dv = a[..., m:], r[..., :m], dr[..., :m], dr[..., m:]
    dy = matmul(q, dv)
    dx = _qr_grad_deep(q, u, dq + matmul(y, dv, transpose_b=True), du)
    return [concat([dx, dy], axis=-1)]


register_op("Qr", _qr_shape, _qr_kernel, grad=_qr_grad)


def qr(input, full_matrices=False, name=None):
    """``(q, r)`` with ``input = q @ r``: ``q`` with orthonormal columns, ``r`` upper
    triangular, for each matrix of ``input[..., M, N]`` (``full_matrices``: ``q`` is
    ``[M, M]`` and ``r`` ``[M, N]``; else ``K = min(M, N)`` columns and rows)."""
    op = apply_op("Qr", [input], {"full_matrices": bool(full_matrices)}, name=name)
    return op.outputs[0], op.outputs[1]


linalg = SimpleNamespace(
    inv=matrix_inverse, det=matrix_determinant, solve=matrix_solve, cholesky=cholesky,
    matrix_transpose=matrix_transpose, transpose=matrix_transpose, trace=trace,
    diag=matrix_diag, diag_part=matrix_diag_part, set_diag=matrix_set_diag,
    band_part=matrix_band_part, qr=qr)
linalg.__doc__ = "``tv.linalg``: TF's linalg names for the matrix ops (``tv.linalg.inv`` …)."
