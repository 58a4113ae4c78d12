"""Inverses, determinants and solves: ``matrix_inverse``, ``matrix_determinant``, ``slogdet``,
``matrix_solve``, triangular, Cholesky and least-squares solves, and tridiagonal systems
(``tridiagonal_solve``, ``tridiagonal_matmul``, ``eigh_tridiagonal``).
"""
from __future__ import annotations

import numpy as np

from ...framework.errors import InvalidArgumentError
from ...framework.op_def_library import apply_op
from ...vm.kernels.array_api import array_namespace
from ...framework.op_registry import register_op
from ..common import asarray, check_same_dtype
from .math_ops import matmul
from .matrix_ops import _matrix_shape, _t, matrix_band_part, matrix_diag, matrix_transpose

__all__ = ["matrix_inverse", "matrix_determinant", "matrix_solve", "matrix_triangular_solve",
           "cholesky_solve", "matrix_solve_ls"]


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


# ---- triangular solves and least squares -------------------------------------------------------
def _tri_kernel(a, b, lower, adjoint):
    xp = array_namespace(a)
    m = a.shape[-1]
    i, j = xp.arange(m)[:, None], xp.arange(m)[None, :]
    tri = xp.where((i >= j) if lower else (i <= j), a, a.dtype.type(0))
    if adjoint:
        tri = _t(tri)
    # a zero on the diagonal is checked on the host only: TF's GPU kernel (cuBLAS trsm) does
    # not check it either (it gives inf/NaN), and asking would make the host wait
    if xp is np and (np.diagonal(tri, axis1=-2, axis2=-1) == 0).any():
        raise InvalidArgumentError("Input matrix is not invertible.")
    return xp.linalg.solve(tri, b).astype(a.dtype, copy=False)


def _tri_grad(op, g):  # TF's _MatrixTriangularSolveGrad (equal batch shapes)
    a = op.inputs[0]
    lower, adj = op.attrs["lower"], op.attrs["adjoint"]
    c = op.outputs[0]
    grad_b = matrix_triangular_solve(a, g, lower=lower, adjoint=not adj)
    grad_a = -matmul(c, grad_b, transpose_b=True) if adj else \
        -matmul(grad_b, c, transpose_b=True)
    grad_a = matrix_band_part(grad_a, -1, 0) if lower else matrix_band_part(grad_a, 0, -1)
    return [grad_a, grad_b]


def _tri_shape(inputs, attrs):
    (dt, shape), = _solve_shape(inputs, attrs)
    return [(dt, shape)]


register_op("MatrixTriangularSolve", _tri_shape, _tri_kernel, grad=_tri_grad)


def matrix_triangular_solve(matrix, rhs, lower=True, adjoint=False, name=None):
    """``X`` with ``matrix @ X = rhs`` for triangular ``matrix[..., M, M]`` (its lower
    triangle if ``lower``, else its upper; ``adjoint``: solve with its transpose)."""
    return apply_op("MatrixTriangularSolve", [matrix, rhs],
                    {"lower": bool(lower), "adjoint": bool(adjoint)}, name=name).outputs[0]


def cholesky_solve(chol, rhs, name=None):
    """``X`` with ``A @ X = rhs`` given ``chol = cholesky(A)``: two triangular solves."""
    from ...framework.graph import get_default_graph
    with get_default_graph().name_scope(name or "cholesky_solve"):
        y = matrix_triangular_solve(chol, rhs, lower=True, adjoint=False)
        return matrix_triangular_solve(chol, y, lower=True, adjoint=True)


def matrix_solve_ls(matrix, rhs, l2_regularizer=0.0, fast=True, name=None):
    """The least-squares solution ``X`` of ``matrix @ X = rhs`` for ``matrix[..., M, N]``,
    with an L2 penalty ``l2_regularizer``: ``(A^T A + l2 I)^-1 A^T rhs`` when ``M >= N``,
    ``A^T (A A^T + l2 I)^-1 rhs`` otherwise, through Cholesky factors (TF's fast path;
    ``fast`` is accepted). Gradients flow through the composition."""
    from ...framework.graph import get_default_graph
    from ...framework.tensor_conversion import convert_to_tensor
    from ..array.fill_ops import eye
    from .decomposition_ops import cholesky  # it imports this module
    with get_default_graph().name_scope(name or "matrix_solve_ls"):
        a = convert_to_tensor(matrix, name="matrix")
        b = convert_to_tensor(rhs, name="rhs", dtype=a.dtype)
        s = a._shape
        if s is None or s[-2] is None or s[-1] is None:
            raise InvalidArgumentError("matrix_solve_ls needs the matrix dimensions known "
                                       "when the graph is built")
        m, n = s[-2], s[-1]
        over = m >= n
        gram = matmul(a, a, transpose_a=True) if over else matmul(a, a, transpose_b=True)
        k = n if over else m
        reg = convert_to_tensor(l2_regularizer, dtype=a.dtype)
        chol = cholesky(gram + reg * eye(k, dtype=a.dtype))
        if over:
            return cholesky_solve(chol, matmul(a, b, transpose_a=True))
        return matmul(a, cholesky_solve(chol, b), transpose_a=True)


# ---- log-determinant -------------------------------------------------------------------------
def _slogdet_shape(inputs, attrs):
    s = _matrix_shape(inputs[0], "LogMatrixDeterminant")
    b = None if s is None else s[:-2]
    return [(inputs[0].dtype, b), (inputs[0].dtype, b)]


def _slogdet_kernel(x):
    xp = array_namespace(x)
    sign, logdet = xp.linalg.slogdet(x)
    return sign.astype(x.dtype, copy=False), logdet.astype(x.dtype, copy=False)


def _slogdet_grad(op, g_sign, g_logdet):  # TF's _LogMatrixDeterminantGrad
    a = op.inputs[0]
    if g_logdet is None:
        return [None]
    scale = apply_op("ExpandReduced", [g_logdet, a], {"axis": (-2, -1)}).outputs[0]
    return [scale * matrix_inverse(a, adjoint=True)]


register_op("LogMatrixDeterminant", _slogdet_shape, _slogdet_kernel, grad=_slogdet_grad)


def slogdet(input, name=None):
    """``(sign, log_abs_determinant)`` of each square matrix of ``input[..., M, M]``: the
    determinant is ``sign * exp(log_abs_determinant)``, without overflow."""
    op = apply_op("LogMatrixDeterminant", [input], name=name)
    return op.outputs[0], op.outputs[1]


# ---- tridiagonal matrices ----------------------------------------------------------------------------
def _tridiagonal_dense(diagonals, diagonals_format):
    """The dense matrices of tridiagonal ``diagonals`` (TF's compact ``[..., 3, M]``: the
    superdiagonal, its last entry ignored; the diagonal; the subdiagonal, its first entry
    ignored — or a sequence of the three, or the matrices themselves)."""
    from ...framework.tensor_conversion import convert_to_tensor
    from ..array.array_ops import constant
    from ..array.manip_ops import unstack
    if diagonals_format == "matrix":
        return convert_to_tensor(diagonals)
    if diagonals_format == "sequence_sym":  # (off-diagonal, diagonal, off-diagonal), n - 1
        sup, main, sub = (convert_to_tensor(d) for d in diagonals)
        from ..array.manip_ops import pad
        sup = pad(sup, [[0, 1]])
        sub = pad(sub, [[1, 0]])
    elif diagonals_format == "sequence":
        sup, main, sub = (convert_to_tensor(d) for d in diagonals)
        from ..array.manip_ops import pad
        rank = len(main._shape)
        sup = pad(sup, [[0, 0]] * (rank - 1) + [[0, 1]])
        sub = pad(sub, [[0, 0]] * (rank - 1) + [[1, 0]])
    elif diagonals_format == "compact":
        d = convert_to_tensor(diagonals)
        sup, main, sub = unstack(d, num=3, axis=-2)
    else:
        raise ValueError(f"Unrecognized diagonals_format: {diagonals_format}")
    n = main._shape[-1] if main._shape is not None else None
    if n is None:
        raise InvalidArgumentError("tridiagonal ops need the matrix size known")
    shift = constant(np.eye(n, k=1).astype(main.dtype.np_dtype))
    return matrix_diag(main) + matmul(matrix_diag(sup), shift) + \
        matmul(matrix_diag(sub), shift, transpose_b=True)


def tridiagonal_solve(diagonals, rhs, diagonals_format="compact", transpose_rhs=False,
                      conjugate_rhs=False, name=None, partial_pivoting=True,
                      perturb_singular=False):
    """``X`` with ``T @ X = rhs`` for tridiagonal ``T`` given by ``diagonals`` in TF's
    formats: ``"compact"`` ``[..., 3, M]`` (superdiagonal with its last entry ignored,
    diagonal, subdiagonal with its first entry ignored), ``"sequence"`` (the three, of
    lengths ``M - 1``, ``M``, ``M - 1``) or ``"matrix"``; ``rhs`` is ``[..., M, K]``
    (``[..., K, M]`` with ``transpose_rhs``) or ``[..., M]``. Solved as a dense system
    (with pivoting; gradients flow through it)."""
    from ...framework.graph import get_default_graph
    from ...framework.tensor_conversion import convert_to_tensor
    with get_default_graph().name_scope(name or "tridiagonal_solve"):
        dense = _tridiagonal_dense(diagonals, diagonals_format)
        b = convert_to_tensor(rhs)
        vector = b._shape is not None and len(b._shape) == len(dense._shape) - 1
        if vector:
            from ..array.manip_ops import expand_dims
            b = expand_dims(b, -1)
        elif transpose_rhs:
            b = matrix_transpose(b, conjugate=conjugate_rhs)
        x = matrix_solve(dense, b)
        if vector:
            from ..array.manip_ops import squeeze
            return squeeze(x, -1)
        return x


def tridiagonal_matmul(diagonals, rhs, diagonals_format="compact", name=None):
    """``T @ rhs`` for tridiagonal ``T`` given by ``diagonals``."""
    from ...framework.graph import get_default_graph
    with get_default_graph().name_scope(name or "tridiagonal_matmul"):
        return matmul(_tridiagonal_dense(diagonals, diagonals_format), rhs)


def eigh_tridiagonal(alpha, beta, eigvals_only=True, select="a", select_range=None, tol=None,
                     name=None):
    """The eigenvalues (and, unless ``eigvals_only``, eigenvectors) of the symmetric
    tridiagonal matrix with diagonal ``alpha[n]`` and off-diagonal ``beta[n - 1]``;
    ``select="i"`` keeps the eigenvalues with indices in ``select_range`` (inclusive),
    ``"v"`` those in the half-open value range ``(lo, hi]`` (values only)."""
    from ...framework.graph import get_default_graph
    from ...framework.tensor_conversion import convert_to_tensor
    from ..array.partition_ops import boolean_mask
    from .decomposition_ops import self_adjoint_eig, self_adjoint_eigvals  # it imports this module
    from .math_ext import greater, less_equal, logical_and
    if select not in ("a", "i", "v"):
        raise ValueError(f"select must be 'a', 'i' or 'v', got {select!r}")
    with get_default_graph().name_scope(name or "eigh_tridiagonal"):
        a = convert_to_tensor(alpha)
        b = convert_to_tensor(beta, dtype=a.dtype)
        dense = _tridiagonal_dense([b, a, b], "sequence_sym")
        if eigvals_only:
            e, v = self_adjoint_eigvals(dense), None
        else:
            e, v = self_adjoint_eig(dense)
        if select == "i":
            lo, hi = (int(i) for i in select_range)
            e = e[lo:hi + 1]
            v = None if v is None else v[:, lo:hi + 1]
        elif select == "v":
            lo, hi = select_range
            keep = logical_and(greater(e, lo), less_equal(e, hi))
            e = boolean_mask(e, keep)
            if v is not None:
                raise ValueError("eigh_tridiagonal: select='v' returns eigenvalues only here")
        return e if eigvals_only else (e, v)
