"""Matrix decompositions with TF's gradients: Cholesky, QR, SVD, the self-adjoint
eigen-decomposition and partial-pivoting LU (with ``lu_solve``, ``lu_reconstruct``,
``lu_matrix_inverse``).
"""
from __future__ import annotations

import numpy as np

from ...framework import dtypes as _dt
from ...framework.errors import InvalidArgumentError
from ...framework.op_def_library import apply_op
from ...vm.kernels.array_api import array_namespace
from ...framework.op_registry import register_op
from ..array.array_ops import zeros_like
from .math_ops import matmul
from .matrix_ops import (_adjoint, _matrix_shape, matrix_band_part, matrix_diag, matrix_diag_part,
                         matrix_set_diag, matrix_transpose)
from .solve_ops import matrix_inverse, matrix_solve, matrix_triangular_solve

__all__ = ["cholesky", "qr", "svd", "self_adjoint_eig", "self_adjoint_eigvals"]


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
    from ...framework.errors import UnimplementedError
    from ..array.manip_ops import concat
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


# ---- svd, self-adjoint eigen-decomposition ---------------------------------------------------------
def _svd_shape(inputs, attrs):
    x = inputs[0]
    s = _matrix_shape(x, "Svd", square=False)
    if s is None:
        return [(x.dtype, None)] * 3
    m, n = s[-2], s[-1]
    k = None if m is None or n is None else min(m, n)
    if not attrs["compute_uv"]:
        return [(x.dtype, s[:-2] + (k,)), (x.dtype, (0,)), (x.dtype, (0,))]
    full = attrs["full_matrices"]
    return [(x.dtype, s[:-2] + (k,)), (x.dtype, s[:-2] + (m, m if full else k)),
            (x.dtype, s[:-2] + (n, n if full else k))]


def _svd_kernel(x, compute_uv, full_matrices):
    xp = array_namespace(x)
    if not compute_uv:
        empty = xp.zeros((0,), x.dtype)
        return xp.linalg.svd(x, compute_uv=False).astype(x.dtype, copy=False), empty, empty
    u, s, vh = xp.linalg.svd(x, full_matrices=full_matrices)
    return s.astype(x.dtype, copy=False), u, np.swapaxes(vh, -1, -2).copy()


def _safe_reciprocal(x, epsilon=1e-20):
    return x * (1.0 / (x * x + epsilon))


def _svd_grad(op, grad_s, grad_u, grad_v):  # TF's _SvdGrad (real inputs)
    from ...framework.errors import UnimplementedError
    from ..array.array_ops import zeros_like
    from ..array.manip_ops import expand_dims
    a = op.inputs[0]
    grad_s = zeros_like(op.outputs[0]) if grad_s is None else grad_s
    grad_s_mat = matrix_diag(grad_s)
    if not op.attrs["compute_uv"]:
        _, u, v = svd(a, compute_uv=True)
        return [matmul(u, matmul(grad_s_mat, v, transpose_b=True))]
    s, u, v = op.outputs
    grad_u = zeros_like(u) if grad_u is None else grad_u
    grad_v = zeros_like(v) if grad_v is None else grad_v
    shape = a._shape
    if shape is None or shape[-2] is None or shape[-1] is None:
        raise UnimplementedError("SVD gradient has not been implemented for input with "
                                 "unknown inner matrix shape.")
    m, n = shape[-2], shape[-1]
    use_adjoint = m > n
    if use_adjoint:
        m, n = n, m
        u, v = v, u
        grad_u, grad_v = grad_v, grad_u
    full = op.attrs["full_matrices"]
    if full and abs(m - n) > 1:
        raise UnimplementedError(f"svd gradient is not implemented for abs(m - n) > 1 when "
                                 f"full_matrices is True. Received: m={m} and n={n}")
    s_mat = matrix_diag(s)
    s2 = s * s
    f = matrix_set_diag(_safe_reciprocal(expand_dims(s2, -2) - expand_dims(s2, -1)),
                        zeros_like(s))
    s_inv_mat = matrix_diag(_safe_reciprocal(s))
    v1, grad_v1 = v[..., :, :m], grad_v[..., :, :m]
    u_gu = matmul(u, grad_u, transpose_a=True)
    v_gv = matmul(v1, grad_v1, transpose_a=True)
    f_u, f_v = f * u_gu, f * v_gv
    term1_nouv = grad_s_mat + matmul(f_u + matrix_transpose(f_u), s_mat) + \
        matmul(s_mat, f_v + matrix_transpose(f_v))
    grad_a = matmul(u, matmul(term1_nouv, v1, transpose_b=True))
    if m != n:
        gv1t = matrix_transpose(grad_v1)
        term2_nous = gv1t - matmul(matmul(gv1t, v1), v1, transpose_b=True)
        if full:
            v2, grad_v2 = v[..., :, m:n], grad_v[..., :, m:n]
            term2_nous = term2_nous - matmul(matmul(v1, grad_v2, transpose_a=True), v2,
                                             transpose_b=True)
        grad_a = grad_a + matmul(matmul(u, s_inv_mat), term2_nous)
    return [matrix_transpose(grad_a) if use_adjoint else grad_a]


register_op("Svd", _svd_shape, _svd_kernel, grad=_svd_grad)


def svd(tensor, full_matrices=False, compute_uv=True, name=None):
    """The singular value decomposition of each matrix of ``tensor[..., M, N]``: ``s`` (the
    ``K = min(M, N)`` singular values, descending), and if ``compute_uv`` also ``u`` and ``v``
    with ``tensor = u @ diag(s) @ v^T`` (TF's order: ``s, u, v``; ``v``, not ``v^T``).

    >>> import tensorvm as tv
    >>> with tv.Session() as s:
    ...     s.run(tv.svd([[3.0, 0.0], [0.0, -2.0]], compute_uv=False)).tolist()
    [3.0, 2.0]
    """
    op = apply_op("Svd", [tensor], {"compute_uv": bool(compute_uv),
                                    "full_matrices": bool(full_matrices)}, name=name)
    if compute_uv:
        return op.outputs[0], op.outputs[1], op.outputs[2]
    return op.outputs[0]


def _eig_shape(inputs, attrs):
    x = inputs[0]
    s = _matrix_shape(x, "SelfAdjointEigV2")
    e = None if s is None else s[:-1]
    return [(x.dtype, e), (x.dtype, s if attrs["compute_v"] else (0,))]


def _eig_kernel(x, compute_v):
    xp = array_namespace(x)
    if not compute_v:
        return xp.linalg.eigvalsh(x), xp.zeros((0,), x.dtype)
    e, v = xp.linalg.eigh(x)  # reads the lower triangle, as TF
    return e, v


def _eig_grad(op, grad_e, grad_v):  # TF's _SelfAdjointEigV2Grad
    from ..array.array_ops import zeros_like
    from ..array.manip_ops import expand_dims
    e = op.outputs[0]
    grad_e = zeros_like(e) if grad_e is None else grad_e
    if op.attrs["compute_v"]:
        v = op.outputs[1]
        grad_v = zeros_like(v) if grad_v is None else grad_v
        f = matrix_set_diag(_safe_reciprocal(expand_dims(e, -2) - expand_dims(e, -1)),
                            zeros_like(e))
        grad_a = matmul(v, matmul(matrix_diag(grad_e) + f * matmul(v, grad_v, transpose_a=True),
                                  v, transpose_b=True))
    else:
        _, v = self_adjoint_eig(op.inputs[0])
        grad_a = matmul(v, matmul(matrix_diag(grad_e), v, transpose_b=True))
    grad_a = matrix_band_part(grad_a + matrix_transpose(grad_a), -1, 0)
    return [matrix_set_diag(grad_a, 0.5 * matrix_diag_part(grad_a))]


register_op("SelfAdjointEigV2", _eig_shape, _eig_kernel, grad=_eig_grad)


def self_adjoint_eig(tensor, name=None):
    """``(e, v)``: the eigenvalues (ascending) and eigenvectors (columns) of each symmetric
    matrix of ``tensor[..., N, N]`` (only its lower triangle is read)."""
    op = apply_op("SelfAdjointEigV2", [tensor], {"compute_v": True}, name=name)
    return op.outputs[0], op.outputs[1]


def self_adjoint_eigvals(tensor, name=None):
    """The eigenvalues (ascending) of each symmetric matrix of ``tensor[..., N, N]``."""
    return apply_op("SelfAdjointEigV2", [tensor], {"compute_v": False}, name=name).outputs[0]


# ---- LU decomposition -------------------------------------------------------------------------------
def _lu_kernel(a, output_idx_type):
    """``(lu, perm)``: partial-pivoting LU of each matrix, ``lu`` holding the unit lower factor
    below the diagonal and the upper one on and above it, with ``lu = L U = a[perm]``. One
    vectorised elimination step per column, over the whole batch."""
    xp = array_namespace(a)
    n = a.shape[-1]
    batch = a.shape[:-2]
    m = a.reshape((-1, n, n)).astype(a.dtype, copy=True)
    b = m.shape[0]
    perm = xp.broadcast_to(xp.arange(n), (b, n)).copy()
    rows = xp.arange(b)
    with np.errstate(divide="ignore", invalid="ignore"):
        for k in range(n):
            piv = k + xp.argmax(xp.abs(m[:, k:, k]), axis=1)
            top, low = m[rows, k].copy(), m[rows, piv].copy()
            m[rows, k], m[rows, piv] = low, top
            pk, pp = perm[rows, k].copy(), perm[rows, piv].copy()
            perm[rows, k], perm[rows, piv] = pp, pk
            if k + 1 < n:
                m[:, k + 1:, k] = m[:, k + 1:, k] / m[:, k, k][:, None]
                m[:, k + 1:, k + 1:] -= m[:, k + 1:, k:k + 1] * m[:, k:k + 1, k + 1:]
    return m.reshape(a.shape), perm.reshape(batch + (n,)).astype(output_idx_type.np_dtype)


def _lu_shape(inputs, attrs):
    x = inputs[0]
    s = _matrix_shape(x, "Lu")
    return [(x.dtype, s), (attrs["output_idx_type"], None if s is None else s[:-1])]


def _unit_lower_upper(lu):
    from ..array.array_ops import ones_like
    lower = matrix_set_diag(matrix_band_part(lu, -1, 0), ones_like(matrix_diag_part(lu)))
    return lower, matrix_band_part(lu, 0, -1)


def _permute_rows(x, perm):
    """``x[..., perm[...], :]`` per batch (``perm`` a batch of row indices)."""
    from ..array.index_ops import batch_gather
    return batch_gather(x, perm)


def invert_permutation_batched(perm):
    """The inverse of each permutation along the last axis of ``perm`` (an argsort)."""
    from .math_ops import cast
    from ..array.sort_ops import argsort
    return cast(argsort(perm, axis=-1), perm.dtype)


def _lu_grad(op, g, _g_perm):
    # square matrices: with P A = L U, dA = P^T L^-T (tril(L^T G_L, -1) + triu(G_U U^T)) U^-T
    lu, perm = op.outputs
    lower, upper = _unit_lower_upper(lu)
    phi = matrix_band_part(matmul(lower, matrix_band_part(g, -1, 0) - matrix_band_part(
        g, 0, 0), transpose_a=True), -1, -1)
    phi = matrix_band_part(phi, -1, 0) - matrix_band_part(phi, 0, 0) + \
        matrix_band_part(matmul(matrix_band_part(g, 0, -1), upper, transpose_b=True), 0, -1)
    x = matrix_triangular_solve(lower, phi, lower=True, adjoint=True)
    x = matrix_transpose(matrix_triangular_solve(upper, matrix_transpose(x), lower=False,
                                                 adjoint=False))
    return [_permute_rows(x, invert_permutation_batched(perm))]


register_op("Lu", _lu_shape, _lu_kernel, grad=_lu_grad)


def lu(input, output_idx_type=_dt.int32, name=None):
    """``(lower_upper, perm)``: the LU decomposition with partial pivoting of each square
    matrix of ``input`` — ``lower_upper`` holds the unit lower factor ``L`` below its diagonal
    and ``U`` on and above it, and ``L @ U == input[..., perm, :]`` (TF's ``tf.linalg.lu``).

    >>> import tensorvm as tv
    >>> lu_, p = tv.linalg.lu([[1.0, 2.0], [3.0, 4.0]])
    >>> with tv.Session() as s:
    ...     s.run(p).tolist(), s.run(tv.linalg.lu_reconstruct(lu_, p)).tolist()
    ([1, 0], [[1.0, 2.0], [3.0, 4.0]])
    """
    op = apply_op("Lu", [input], {"output_idx_type": _dt.as_dtype(output_idx_type)},
                  name=name)
    return op.outputs[0], op.outputs[1]


def lu_reconstruct(lower_upper, perm, validate_args=False, name=None):
    """The matrix whose :func:`lu` is ``(lower_upper, perm)``."""
    from ...framework.graph import get_default_graph
    from ...framework.tensor_conversion import convert_to_tensor
    with get_default_graph().name_scope(name or "lu_reconstruct"):
        lower, upper = _unit_lower_upper(convert_to_tensor(lower_upper))
        return _permute_rows(matmul(lower, upper), invert_permutation_batched(perm))


def lu_solve(lower_upper, perm, rhs, validate_args=False, name=None):
    """``X`` with ``A @ X = rhs`` given ``lu(A) = (lower_upper, perm)``: two triangular
    solves of the permuted right-hand side."""
    from ...framework.graph import get_default_graph
    from ...framework.tensor_conversion import convert_to_tensor
    with get_default_graph().name_scope(name or "lu_solve"):
        lower, upper = _unit_lower_upper(convert_to_tensor(lower_upper))
        y = matrix_triangular_solve(lower, _permute_rows(convert_to_tensor(rhs), perm),
                                    lower=True)
        return matrix_triangular_solve(upper, y, lower=False)


def lu_matrix_inverse(lower_upper, perm, validate_args=False, name=None):
    """The inverse of ``A`` given ``lu(A) = (lower_upper, perm)``."""
    from ...framework.tensor_conversion import convert_to_tensor
    from ..array.fill_ops import eye
    lu_t = convert_to_tensor(lower_upper)
    s = lu_t._shape
    if s is None or s[-1] is None:
        raise InvalidArgumentError("lu_matrix_inverse needs the matrix size known")
    batch = None if None in s[:-2] else list(s[:-2])
    ident = eye(s[-1], batch_shape=batch, dtype=lu_t.dtype) if batch is not None else \
        eye(s[-1], dtype=lu_t.dtype) + matrix_transpose(lu_t) * 0.0
    return lu_solve(lu_t, perm, ident, name=name or "lu_matrix_inverse")
