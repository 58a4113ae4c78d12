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

import numpy as np

from ...framework import dtypes as _dt
from ...framework.errors import InvalidArgumentError
from ...framework.graph import Tensor
from ...framework.op_def_library import apply_op
from ...vm.kernels.array_api import array_namespace, to_host
from ...framework.op_registry import register_op
from ..array.array_ops import zeros_like
from ..common import asarray, check_same_dtype
from .math_ops import matmul, reduce_sum

__all__ = ["matrix_inverse", "matrix_determinant", "matrix_solve", "cholesky",
           "matrix_transpose", "trace", "matrix_diag", "matrix_diag_part", "matrix_set_diag",
           "matrix_band_part", "diag", "diag_part", "linalg", "qr", "einsum", "tensordot",
           "norm", "svd", "self_adjoint_eig", "self_adjoint_eigvals",
           "matrix_triangular_solve", "cholesky_solve", "matrix_solve_ls", "cross",
           "matrix_square_root"]

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


# ---- einsum, tensordot -------------------------------------------------------------------------
def _explicit_equation(equation: str, ranks) -> str:
    """``equation`` with ``...`` spelled out in letters and the output made explicit (NumPy's
    implicit rule: the letters that appear once, in alphabetical order, after the ellipsis)."""
    import string
    eq = equation.replace(" ", "")
    lhs, out = eq.split("->") if "->" in eq else (eq, None)
    subs = lhs.split(",")
    if len(subs) != len(ranks):
        raise InvalidArgumentError(f"Einsum: the equation {equation!r} names {len(subs)} "
                                   f"operands, got {len(ranks)} inputs")
    for sub in subs + ([out] if out is not None else []):
        bad = [c for c in sub.replace("...", "") if not c.isalpha()]
        if bad:
            raise InvalidArgumentError(f"Einsum: invalid character {bad[0]!r} in {equation!r}")
    ell = 0
    if "..." in eq:
        for sub, r in zip(subs, ranks):
            if "..." in sub:
                if r is None:
                    raise InvalidArgumentError(f"Einsum {equation!r}: an operand with '...' "
                                               "needs a known rank")
                ell = max(ell, r - (len(sub) - 3))
    free = [c for c in string.ascii_letters if c not in eq][:ell]
    done = []
    for sub, r in zip(subs, ranks):
        if "..." in sub:
            n = r - (len(sub) - 3)
            sub = sub.replace("...", "".join(free[ell - n:]))
        done.append(sub)
    if out is None:
        counts = {}
        for sub in done:
            for c in sub:
                counts[c] = counts.get(c, 0) + 1
        out = "".join(free) + "".join(sorted(c for c, k in counts.items()
                                             if k == 1 and c not in free))
    else:
        out = out.replace("...", "".join(free))
    return ",".join(done) + "->" + out


def _einsum_shape(inputs, attrs):
    lhs, out = attrs["equation"].split("->")
    subs = lhs.split(",")
    dt = check_same_dtype(inputs, "Einsum") if inputs else None
    sizes: dict[str, int | None] = {}
    for k, (sub, t) in enumerate(zip(subs, inputs)):
        if t._shape is None:
            continue
        if len(sub) != len(t._shape):
            raise InvalidArgumentError(f"Einsum: input {k} has rank {len(t._shape)} but its "
                                       f"subscripts {sub!r} name {len(sub)} axes "
                                       f"({attrs['equation']!r})")
        for c, d in zip(sub, t._shape):
            have = sizes.get(c)
            if d is not None and have is not None and have != d and 1 not in (have, d):
                raise InvalidArgumentError(
                    f"Einsum: axis {c!r} has size {have} in one operand and {d} in another "
                    f"({attrs['equation']!r})")
            if d is not None and (have is None or have == 1):
                sizes[c] = d
    if any(c not in lhs for c in out):
        raise InvalidArgumentError(f"Einsum: output subscript not in the inputs "
                                   f"({attrs['equation']!r})")
    return [(dt, tuple(sizes.get(c) for c in out))]


def _einsum_kernel(*xs, equation):
    return np.einsum(equation, *xs, optimize=len(xs) > 1)


def _einsum_grad(op, g):
    from ..array.array_ops import ones_like
    from ..array.fill_ops import eye
    lhs, out = op.attrs["equation"].split("->")
    subs = lhs.split(",")
    grads = []
    for i, (sub, x) in enumerate(zip(subs, op.inputs)):
        others = [(s, t) for j, (s, t) in enumerate(zip(subs, op.inputs)) if j != i]
        have = set(out) | {c for s, _ in others for c in s}
        uniq = "".join(dict.fromkeys(sub))
        terms, operands = [out] + [s for s, _ in others], [g] + [t for _, t in others]
        if any(c not in have for c in uniq):  # axes summed in this operand only
            terms.append(sub)
            operands.append(ones_like(x))
        gu = einsum(",".join(terms) + "->" + uniq, *operands)
        if len(uniq) != len(sub):  # a repeated axis (a diagonal): spread back with eyes
            import string
            fresh = iter(c for c in string.ascii_letters if c not in op.attrs["equation"])
            target, eyes, seen = [], [], set()
            for k, c in enumerate(sub):
                if c in seen:
                    n = x._shape[k] if x._shape is not None else None
                    if n is None:
                        raise InvalidArgumentError("Einsum gradient: a repeated axis needs a "
                                                   "known size")
                    z = next(fresh)
                    target.append(z)
                    eyes.append((c + z, eye(n, dtype=x.dtype)))
                else:
                    seen.add(c)
                    target.append(c)
            gu = einsum(",".join([uniq] + [e for e, _ in eyes]) + "->" + "".join(target),
                        gu, *[t for _, t in eyes])
        grads.append(gu)
    return grads


register_op("Einsum", _einsum_shape, _einsum_kernel, grad=_einsum_grad)


def einsum(equation, *inputs, **kwargs):
    """Einstein summation (NumPy's ``np.einsum`` notation, ``...`` and implicit outputs
    included; TF's ``tf.einsum``), with gradients.

    >>> import tensorvm as tv
    >>> with tv.Session() as s:
    ...     s.run(tv.einsum("ij,jk->ik", [[1.0, 2.0]], [[3.0], [4.0]])).tolist()
    [[11.0]]
    """
    from ...framework.tensor_conversion import convert_to_tensor
    from ..common import _convert_pair
    name = kwargs.pop("name", None)
    kwargs.pop("optimize", None)
    if kwargs:
        raise TypeError(f"Invalid keyword arguments for this function: "
                        f"{', '.join(sorted(kwargs))}. Expected: name, optimize")
    if len(inputs) == 2:
        xs = list(_convert_pair(*inputs))
    else:
        xs = [convert_to_tensor(x) for x in inputs]
    ranks = [None if t._shape is None else len(t._shape) for t in xs]
    eq = _explicit_equation(str(equation), ranks)
    return apply_op("Einsum", xs, {"equation": eq}, name=name).outputs[0]


def tensordot(a, b, axes, name=None):
    """Sum of products over ``axes`` (TF's ``tf.tensordot``): an int ``N`` (the last N axes of
    ``a`` with the first N of ``b``) or a pair of axis lists; an einsum of the two.

    >>> import tensorvm as tv
    >>> with tv.Session() as s:
    ...     float(s.run(tv.tensordot([1.0, 2.0], [3.0, 4.0], 1)))
    11.0
    """
    import string
    from ..common import _convert_pair
    a, b = _convert_pair(a, b)
    ra, rb = (None if t._shape is None else len(t._shape) for t in (a, b))
    if ra is None or rb is None:
        raise InvalidArgumentError("tensordot needs inputs of known rank")
    if isinstance(axes, (int, np.integer)) or (hasattr(axes, "ndim") and np.ndim(axes) == 0):
        n = int(axes)
        if n < 0:
            raise ValueError(f"`axes` must be at least 0. Received: {n}.")
        if n > ra or n > rb:
            t, r = (a, ra) if n > ra else (b, rb)
            raise ValueError(f"`axes` must not be larger than the number of dimensions of "
                             f"tensor {t}.  Received {n}, vs tensor dimensions {r}.")
        ax_a, ax_b = list(range(ra - n, ra)), list(range(n))
    else:
        if len(axes) != 2:
            raise ValueError(f"'axes' must be an int or have length 2, got {axes}")
        ax_a, ax_b = ([int(v) for v in np.atleast_1d(x)] for x in axes)
        if len(ax_a) != len(ax_b):
            raise ValueError(f"Different number of contraction axes `a` and `b`, "
                             f"{len(ax_a)} != {len(ax_b)}.")
    ax_a = [x % ra for x in ax_a]
    ax_b = [x % rb for x in ax_b]
    letters = iter(string.ascii_letters)
    sa = [next(letters) for _ in range(ra)]
    sb = [next(letters) for _ in range(rb)]
    for i, j in zip(ax_a, ax_b):
        sb[j] = sa[i]
    out = [c for k, c in enumerate(sa) if k not in ax_a] + \
        [c for k, c in enumerate(sb) if k not in ax_b]
    return einsum(f"{''.join(sa)},{''.join(sb)}->{''.join(out)}", a, b, name=name)


# ---- norm -----------------------------------------------------------------------------------------
def norm(tensor, ord="euclidean", axis=None, keepdims=None, name=None, keep_dims=None):
    """Vector norms (``axis`` None or an int: ``"euclidean"``/2, 1, ``np.inf``, any ``p >
    0``) and matrix norms (``axis`` two ints: ``"fro"``/``"euclidean"``, 1, ``np.inf``, 2 —
    the largest singular value), as TF's ``tf.norm``.

    >>> import tensorvm as tv
    >>> with tv.Session() as s:
    ...     float(s.run(tv.norm([3.0, 4.0])))
    5.0
    """
    from ...framework.graph import get_default_graph
    from ...framework.tensor_conversion import convert_to_tensor
    from ..array.manip_ops import squeeze, transpose
    from .math_ext import abs as _abs, reduce_max
    from .math_ops import pow as _pow, sqrt
    keepdims = bool(keep_dims if keepdims is None else keepdims)
    is_matrix = isinstance(axis, (tuple, list)) and len(axis) == 2
    if is_matrix:
        axis = tuple(axis)
        if not all(isinstance(a, (int, np.integer)) for a in axis) or axis[0] == axis[1]:
            raise ValueError(f"'axis' must be None, an integer, or a tuple of 2 unique "
                             f"integers, got {axis}")
        supported = ["euclidean", "fro", 1, 2, np.inf]
        if ord not in supported:
            raise ValueError(f"'ord' must be a supported matrix norm in {supported}, got {ord}")
    else:
        if not (axis is None or isinstance(axis, (int, np.integer))):
            raise ValueError(f"'axis' must be None, an integer, or a tuple of 2 unique "
                             f"integers, got {axis}")
        if (isinstance(ord, str) or not np.isreal(ord) or ord <= 0) and \
                ord not in ["euclidean", 1, 2, np.inf]:
            raise ValueError(f"'ord' must be a supported vector norm, got {ord}")
        if axis is not None:
            axis = (int(axis),)
    with get_default_graph().name_scope(name or "norm"):
        tensor = convert_to_tensor(tensor)
        rank = None if tensor._shape is None else len(tensor._shape)
        if ord in ("fro", "euclidean", 2, 2.0):
            if is_matrix and ord in (2, 2.0):
                if rank is None:
                    raise InvalidArgumentError("norm: a matrix 2-norm needs a known rank")
                pos = [a % rank for a in axis]
                perm = [k for k in range(rank) if k not in pos] + pos
                permed = transpose(tensor, perm)
                top = reduce_max(svd(permed, compute_uv=False), axis=-1, keepdims=True)
                from ..array.manip_ops import expand_dims
                result = transpose(expand_dims(top, -1), list(np.argsort(perm)))
            else:
                result = sqrt(reduce_sum(tensor * tensor, axis, keepdims=True))
        else:
            result = _abs(tensor)
            if ord == 1:
                result = reduce_sum(result, None if axis is None else axis[0], keepdims=True)
                if is_matrix:
                    result = reduce_max(result, axis[-1], keepdims=True)
            elif ord == np.inf:
                if is_matrix:
                    result = reduce_sum(result, axis[1], keepdims=True)
                result = reduce_max(result, None if axis is None else axis[0], keepdims=True)
            else:
                result = _pow(reduce_sum(_pow(result, float(ord)), axis, keepdims=True),
                              1.0 / ord)
        if not keepdims:
            result = squeeze(result, axis)
        return result


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


def _logdet(matrix, name=None):
    """``log(det(matrix))`` of each Hermitian positive-definite matrix, from its Cholesky
    factor (TF's ``tf.linalg.logdet``)."""
    from ...framework.graph import get_default_graph
    from .math_ops import log
    with get_default_graph().name_scope(name or "logdet"):
        return 2.0 * reduce_sum(log(matrix_diag_part(cholesky(matrix))), axis=-1)


def _adjoint(matrix, name=None):
    """The conjugate transpose of each matrix (TF's ``tf.linalg.adjoint``)."""
    return matrix_transpose(matrix, name=name or "adjoint", conjugate=True)


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


# ---- slogdet, pinv, matrix_rank, normalize, cross ---------------------------------------------
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


def normalize(tensor, ord="euclidean", axis=None, name=None):
    """``(tensor / norm, norm)`` with ``norm = tv.norm(tensor, ord, axis, keepdims=True)``
    (TF's ``tf.linalg.normalize``)."""
    from ...framework.graph import get_default_graph
    from ...framework.tensor_conversion import convert_to_tensor
    from .math_ops import cast
    with get_default_graph().name_scope(name or "normalize"):
        tensor = convert_to_tensor(tensor)
        n = cast(norm(tensor, ord=ord, axis=axis, keepdims=True), tensor.dtype)
        return tensor / n, n


def _cross_shape(inputs, attrs):
    a, b = inputs
    dt = check_same_dtype(inputs, "Cross")
    for t in (a, b):
        if t._shape is not None and (not t._shape or t._shape[-1] not in (None, 3)):
            raise InvalidArgumentError(f"Cross: the last dimension must be 3, got shape "
                                       f"{list(t._shape)}")
    if a._shape is not None and b._shape is not None and (len(a._shape) != len(b._shape) or any(
            x is not None and y is not None and x != y for x, y in zip(a._shape, b._shape))):
        raise InvalidArgumentError(f"Cross: a and b must have the same shape, got "
                                   f"{list(a._shape)} and {list(b._shape)}")
    return [(dt, a._shape if a._shape is not None else b._shape)]


def _cross_kernel(a, b):
    return np.cross(a, b)


register_op("Cross", _cross_shape, _cross_kernel,
            grad=lambda op, g: [cross(op.inputs[1], g), cross(g, op.inputs[0])])


def cross(a, b, name=None):
    """The cross product of the 3-vectors in the last dimension of ``a`` and ``b`` (same
    shapes), as TF's ``tf.cross``/``tf.linalg.cross``."""
    from ..common import _convert_pair
    a, b = _convert_pair(a, b)
    return apply_op("Cross", [a, b], name=name).outputs[0]


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
