"""Functions of matrices: the pseudo-inverse and rank (through the SVD), ``expm`` (scaling
and squaring with Pade approximants, its gradient the Frechet derivative) and
``matrix_square_root`` (Denman-Beavers iteration).
"""
from __future__ import annotations

import numpy as np

from ...framework.errors import InvalidArgumentError
from ...framework.op_def_library import apply_op
from ...vm.kernels.array_api import array_namespace, to_host
from ...framework.op_registry import register_op
from .math_ops import matmul, reduce_sum
from .matrix_ops import _matrix_shape, matrix_transpose
from .decomposition_ops import svd

__all__ = ["matrix_square_root"]


def pinv(a, rcond=None, validate_args=False, name=None):
    """The Moore-Penrose pseudo-inverse of each matrix of ``a[..., M, N]``, through its SVD:
    singular values at most ``rcond * max(s)`` (default ``10 * max(M, N) * eps``) count as
    zero (TF's ``tf.linalg.pinv``; gradients flow through the SVD)."""
    from ...framework.graph import get_default_graph
    from ...framework.tensor_conversion import convert_to_tensor
    from .math_ext import greater, reduce_max, where
    from ..array.array_ops import zeros_like
    with get_default_graph().name_scope(name or "pinv"):
        a = convert_to_tensor(a, name="a")
        s = a._shape
        if rcond is None:
            if s is None or s[-2] is None or s[-1] is None:
                raise InvalidArgumentError("pinv: rcond must be given for matrices of unknown "
                                           "size")
            rcond = 10.0 * max(s[-2], s[-1]) * float(np.finfo(a.dtype.np_dtype).eps)
        sv, u, v = svd(a, full_matrices=False, compute_uv=True)
        cutoff = rcond * reduce_max(sv, axis=-1, keepdims=True)
        keep = greater(sv, cutoff)
        safe = where(keep, sv, sv * 0.0 + 1.0)
        s_inv = where(keep, 1.0 / safe, zeros_like(sv))
        return matmul(v * _expand_last(s_inv), u, transpose_b=True)


def _expand_last(t):
    from ..array.manip_ops import expand_dims
    return expand_dims(t, -2)


def matrix_rank(a, tol=None, validate_args=False, name=None):
    """The number of singular values of each matrix of ``a`` above ``tol`` (default
    ``eps * max(M, N) * max(s)``), an int32 tensor (TF's ``tf.linalg.matrix_rank``)."""
    from ...framework import dtypes as _dtypes
    from ...framework.graph import get_default_graph
    from ...framework.tensor_conversion import convert_to_tensor
    from .math_ext import greater, reduce_max
    from .math_ops import cast
    with get_default_graph().name_scope(name or "matrix_rank"):
        a = convert_to_tensor(a, name="a")
        sv = svd(a, compute_uv=False)
        if tol is None:
            s = a._shape
            if s is None or s[-2] is None or s[-1] is None:
                raise InvalidArgumentError("matrix_rank: tol must be given for matrices of "
                                           "unknown size")
            eps = float(np.finfo(a.dtype.np_dtype).eps)
            tol = eps * max(s[-2], s[-1]) * reduce_max(sv, axis=-1, keepdims=True)
        else:
            tol = convert_to_tensor(tol, dtype=a.dtype)
        return reduce_sum(cast(greater(sv, tol), _dtypes.int32), axis=-1)


# ---- expm -----------------------------------------------------------------------------------------
_PADE13 = (64764752532480000.0, 32382376266240000.0, 7771770303897600.0, 1187353796428800.0,
           129060195264000.0, 10559470521600.0, 670442572800.0, 33522128640.0, 1323241920.0,
           40840800.0, 960960.0, 16380.0, 182.0, 1.0)
_THETA13 = 5.371920351148152


_PADE_LOW = {3: (1.495585217958292e-2, (120.0, 60.0, 12.0, 1.0)),
             5: (2.539398330063230e-1, (30240.0, 15120.0, 3360.0, 420.0, 30.0, 1.0)),
             7: (9.504178996162932e-1, (17297280.0, 8648640.0, 1995840.0, 277200.0, 25200.0,
                                        1512.0, 56.0, 1.0)),
             9: (2.097847961257068, (17643225600.0, 8821612800.0, 2075673600.0, 302702400.0,
                                     30270240.0, 2162160.0, 110880.0, 3960.0, 90.0, 1.0))}


def _expm_np(a):
    """``exp(a)`` of each matrix of ``a`` (float64) by Higham's (2005) scaling and squaring:
    the Pade approximant of degree 3, 5, 7, 9 or 13 that the largest 1-norm of the batch
    allows, scaled down by ``2**s`` for degree 13 and squared back."""
    xp = array_namespace(a)
    n = a.shape[-1]
    if n == 0 or a.size == 0:
        return a.copy()
    norm = float(np.asarray(to_host(np.abs(a).sum(axis=-2).max())))
    eye = xp.broadcast_to(xp.eye(n, dtype=a.dtype), a.shape)
    a2 = a @ a
    for m, (theta, b) in _PADE_LOW.items():
        if norm <= theta:
            powers = [eye, a2]
            while len(powers) < (m + 1) // 2:
                powers.append(powers[-1] @ a2)
            u = a @ sum(b[2 * k + 1] * p for k, p in enumerate(powers))
            v = sum(b[2 * k] * p for k, p in enumerate(powers))
            return xp.linalg.solve(v - u, v + u)
    s = max(0, int(np.ceil(np.log2(norm / _THETA13))))
    if s:
        a = a / (2.0 ** s)
        a2 = a @ a
    a4 = a2 @ a2
    a6 = a4 @ a2
    b = _PADE13
    u = a @ (a6 @ (b[13] * a6 + b[11] * a4 + b[9] * a2) + b[7] * a6 + b[5] * a4 + b[3] * a2
             + b[1] * eye)
    v = a6 @ (b[12] * a6 + b[10] * a4 + b[8] * a2) + b[6] * a6 + b[4] * a4 + b[2] * a2 + \
        b[0] * eye
    r = xp.linalg.solve(v - u, v + u)
    for _ in range(s):
        r = r @ r
    return r


def _expm_kernel(x):
    return _expm_np(x.astype(np.float64)).astype(x.dtype, copy=False)


def _expm_frechet_kernel(a, e):
    """The Frechet derivative of ``expm`` at ``a`` in direction ``e``: the top-right block of
    ``expm([[a, e], [0, a]])``."""
    xp = array_namespace(a)
    n = a.shape[-1]
    z = xp.zeros_like(a)
    big = xp.concatenate([xp.concatenate([a, e], -1), xp.concatenate([z, a], -1)], -2)
    return _expm_np(big.astype(np.float64))[..., :n, n:].astype(a.dtype, copy=False)


def _expm_grad(op, g):
    # d<G, expm(A)> / dA = L(A^T, G), the Frechet derivative at A^T in direction G
    a = op.inputs[0]
    return [apply_op("ExpmFrechet", [matrix_transpose(a), g]).outputs[0]]


register_op("MatrixExponential",
            lambda inputs, attrs: [(inputs[0].dtype, _matrix_shape(inputs[0],
                                                                   "MatrixExponential"))],
            _expm_kernel, grad=_expm_grad)
register_op("ExpmFrechet", lambda inputs, attrs: [(inputs[0].dtype, inputs[0]._shape)],
            _expm_frechet_kernel, grad=None, differentiable=False)


def expm(input, name=None):
    """The matrix exponential of each square matrix of ``input[..., M, M]`` (Pade 13 with
    scaling and squaring), with its gradient (the Frechet derivative by the block-matrix
    identity). TF's ``tf.linalg.expm``.

    >>> import tensorvm as tv
    >>> with tv.Session() as s:
    ...     s.run(tv.linalg.expm([[0.0, 1.0], [0.0, 0.0]])).tolist()
    [[1.0, 1.0], [0.0, 1.0]]
    """
    return apply_op("MatrixExponential", [input], name=name).outputs[0]


# ---- matrix square root -------------------------------------------------------------------------
_SQRTM_MAX_ITER = 100


def _sqrtm_kernel(x):
    """The principal square root of each matrix, by the scaled Denman-Beavers iteration
    (``Y -> (Y + Z^-1) / 2``, ``Z -> (Z + Y^-1) / 2`` from ``Y = A``, ``Z = I``, with
    determinant scaling), in float64; a matrix with eigenvalues on the closed negative real
    axis has no principal root (the result is then NaN or meaningless, as TF's)."""
    xp = array_namespace(x)
    a = x.astype(np.float64)
    n = a.shape[-1]
    if n == 0 or a.size == 0:
        return x.copy()
    y = a
    z = xp.broadcast_to(xp.eye(n), a.shape).copy()
    with np.errstate(all="ignore"):
        for k in range(_SQRTM_MAX_ITER):
            if k < 10:  # determinant scaling speeds up the first steps
                _, ly = xp.linalg.slogdet(y)
                _, lz = xp.linalg.slogdet(z)
                mu = xp.exp(-(ly + lz) / (2.0 * n))[..., None, None]
                y, z = y * mu, z * mu
            yi, zi = xp.linalg.inv(y), xp.linalg.inv(z)
            y_new, z = 0.5 * (y + zi), 0.5 * (z + yi)
            delta = xp.abs(y_new - y).max()
            y = y_new
            if k % 4 == 3 and bool(np.asarray(to_host(~(delta > 1e-15 * xp.abs(y).max())))):
                break
    return y.astype(x.dtype, copy=False)


def _sqrtm_grad_kernel(s, g):
    """``X`` with ``S^T X + X S^T = G`` (the gradient of ``S = sqrtm(A)``), by the Kronecker
    form of the Sylvester equation, batched."""
    xp = array_namespace(s)
    n = s.shape[-1]
    st = np.swapaxes(s, -1, -2).astype(np.float64)
    eye = xp.eye(n)
    k = xp.einsum("...ik,jl->...ijkl", st, eye) + \
        xp.einsum("ik,...jl->...ijkl", eye, s.astype(np.float64))
    k = k.reshape(s.shape[:-2] + (n * n, n * n))
    sol = xp.linalg.solve(k, g.astype(np.float64).reshape(g.shape[:-2] + (n * n, 1)))
    return sol.reshape(g.shape).astype(g.dtype, copy=False)


register_op("MatrixSquareRoot",
            lambda inputs, attrs: [(inputs[0].dtype, _matrix_shape(inputs[0],
                                                                   "MatrixSquareRoot"))],
            _sqrtm_kernel,
            grad=lambda op, g: [apply_op("MatrixSquareRootGrad",
                                         [op.outputs[0], g]).outputs[0]])
register_op("MatrixSquareRootGrad", lambda inputs, attrs: [(inputs[1].dtype, inputs[1]._shape)],
            _sqrtm_grad_kernel, differentiable=False)


def matrix_square_root(input, name=None):
    """The principal square root ``S`` (``S @ S = input``, eigenvalues with positive real
    parts) of each square matrix of ``input[..., M, M]``, with its gradient (a Sylvester
    equation); TF's ``tf.matrix_square_root`` / ``tf.linalg.sqrtm``.

    >>> import tensorvm as tv
    >>> with tv.Session() as s:
    ...     s.run(tv.matrix_square_root([[4.0, 0.0], [0.0, 9.0]])).round(6).tolist()
    [[2.0, 0.0], [0.0, 3.0]]
    """
    return apply_op("MatrixSquareRoot", [input], name=name).outputs[0]
