"""Matrix ops, batched over leading dimensions: inverse, determinant, solve, Cholesky, transpose,
trace, diagonals and band parts, QR, SVD, self-adjoint eigen-decomposition, triangular and
least-squares solves, slogdet, pinv, matrix_rank, expm, and einsum/tensordot/norm/cross, with
their gradients (TF's formulas); ``tv.linalg`` gives them TF's ``tf.linalg`` names.

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

from ...framework import dtypes as _dt
from .math_ops import matmul, reduce_sum
# the families split out of this module (their ops register on import; re-exported here)
from .decomposition_ops import (cholesky, invert_permutation_batched, lu,  # noqa: F401
                                lu_matrix_inverse, lu_reconstruct, lu_solve, qr,
                                self_adjoint_eig, self_adjoint_eigvals, svd)
from .einsum_ops import cross, einsum, tensordot
from .matrix_functions import expm, matrix_rank, matrix_square_root, pinv
from .matrix_ops import (_adjoint, diag, diag_part, matrix_band_part, matrix_diag,
                         matrix_diag_part, matrix_set_diag, matrix_transpose, trace)
from .norm_ops import norm, normalize
from .solve_ops import (cholesky_solve, eigh_tridiagonal, matrix_determinant,  # noqa: F401
                        matrix_inverse, matrix_solve, matrix_solve_ls, matrix_triangular_solve,
                        slogdet, tridiagonal_matmul, tridiagonal_solve)

__all__ = ["matrix_inverse", "matrix_determinant", "matrix_solve", "cholesky",
           "matrix_transpose", "trace", "matrix_diag", "matrix_diag_part", "matrix_set_diag",
           "matrix_band_part", "diag", "diag_part", "linalg", "qr", "einsum", "tensordot",
           "norm", "svd", "self_adjoint_eig", "self_adjoint_eigvals",
           "matrix_triangular_solve", "cholesky_solve", "matrix_solve_ls", "cross",
           "matrix_square_root"]


def _logdet(matrix, name=None):
    """``log(det(matrix))`` of each Hermitian positive-definite matrix, from its Cholesky
    factor (TF's ``tf.linalg.logdet``)."""
    from ...framework.graph import get_default_graph
    from .math_ops import log
    with get_default_graph().name_scope(name or "logdet"):
        return 2.0 * reduce_sum(log(matrix_diag_part(cholesky(matrix))), axis=-1)


def _matvec(a, b, transpose_a=False, name=None):
    """``a @ b`` for a batch of matrices ``a`` and vectors ``b`` (TF's ``tf.linalg.matvec``)."""
    from ..array.manip_ops import expand_dims, squeeze
    return squeeze(matmul(a, expand_dims(b, -1), transpose_a=transpose_a), -1, name=name)


def _eye(num_rows, num_columns=None, batch_shape=None, dtype=_dt.float32, name=None):
    from ..array.fill_ops import eye
    return eye(num_rows, num_columns, batch_shape, dtype=dtype, name=name)


def _global_norm(t_list, name=None):
    from .clip_ops import global_norm
    return global_norm(t_list, name=name)


def _l2_normalize(x, axis=None, epsilon=1e-12, name=None, dim=None):
    from ..nn.nn_ops import l2_normalize
    return l2_normalize(x, axis=axis, epsilon=epsilon, name=name, dim=dim)


def _lstsq(matrix, rhs, l2_regularizer=0.0, fast=True, name=None):
    return matrix_solve_ls(matrix, rhs, l2_regularizer, fast, name)


def _eigh(tensor, name=None):
    return self_adjoint_eig(tensor, name=name)


def _eigvalsh(tensor, name=None):
    return self_adjoint_eigvals(tensor, name=name)


_logdet.__name__, _adjoint.__name__, _matvec.__name__ = "logdet", "adjoint", "matvec"
_lstsq.__doc__ = matrix_solve_ls.__doc__
_eigh.__doc__, _eigvalsh.__doc__ = self_adjoint_eig.__doc__, self_adjoint_eigvals.__doc__
_eye.__doc__ = "An identity matrix, or a batch of them (``tv.eye``)."
_global_norm.__doc__ = "``tv.global_norm``: the L2 norm of a list of tensors."
_l2_normalize.__doc__ = "``tv.nn.l2_normalize``: ``x / sqrt(max(sum(x**2), epsilon))``."


linalg = SimpleNamespace(
    inv=matrix_inverse, det=matrix_determinant, solve=matrix_solve, cholesky=cholesky,
    matrix_transpose=matrix_transpose, transpose=matrix_transpose, trace=trace,
    diag=matrix_diag, diag_part=matrix_diag_part, set_diag=matrix_set_diag,
    band_part=matrix_band_part, qr=qr, einsum=einsum, tensordot=tensordot, norm=norm,
    svd=svd, eigh=_eigh, eigvalsh=_eigvalsh, triangular_solve=matrix_triangular_solve,
    cholesky_solve=cholesky_solve, lstsq=_lstsq, logdet=_logdet, adjoint=_adjoint,
    matvec=_matvec, matmul=matmul, eye=_eye, global_norm=_global_norm,
    l2_normalize=_l2_normalize, tensor_diag=diag, tensor_diag_part=diag_part,
    slogdet=slogdet, pinv=pinv, matrix_rank=matrix_rank, normalize=normalize, cross=cross,
    expm=expm, sqrtm=matrix_square_root,
    lu=lu, lu_reconstruct=lu_reconstruct, lu_solve=lu_solve, lu_matrix_inverse=lu_matrix_inverse,
    tridiagonal_solve=tridiagonal_solve, tridiagonal_matmul=tridiagonal_matmul,
    eigh_tridiagonal=eigh_tridiagonal)
linalg.__doc__ = "``tv.linalg``: TF's linalg names for the matrix ops (``tv.linalg.inv`` …)."
