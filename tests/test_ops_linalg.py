"""Matrix ops: forward results against NumPy (batched, edge cases), gradients against finite
differences (float64), bad shapes at construction and singular inputs at run time."""
import numpy as np
import pytest
from opcheck import check_forward, check_gradients, run

import tensorvm as tv
from tensorvm.framework.errors import InvalidArgumentError

rng = np.random.default_rng(99)


def well_conditioned(*batch, n=3):
    return rng.uniform(-1, 1, size=batch + (n, n)) + n * np.eye(n)


def spd(*batch, n=3):
    a = rng.uniform(-1, 1, size=batch + (n, n))
    return a @ np.swapaxes(a, -1, -2) + n * np.eye(n)


def _t(x):
    return np.swapaxes(x, -1, -2)


# ---- inverse ----------------------------------------------------------------------------------
@pytest.mark.parametrize("batch", [(), (2,), (2, 1), (0,)], ids=str)
@pytest.mark.parametrize("adjoint", [False, True])
def test_matrix_inverse(batch, adjoint):
    a = well_conditioned(*batch)
    fn = lambda x: tv.matrix_inverse(x, adjoint=adjoint)  # noqa: E731
    check_forward(fn, lambda x: np.linalg.inv(_t(x) if adjoint else x), a, rtol=1e-10)
    got = check_forward(fn, lambda x: np.linalg.inv(_t(x) if adjoint else x),
                        a.astype(np.float32), rtol=1e-4, atol=1e-5)
    assert got.dtype == np.float32
    if a.size:
        check_gradients(fn, a)


def test_matrix_inverse_small_sizes():
    check_forward(tv.matrix_inverse, np.linalg.inv, np.array([[4.0]]))
    check_forward(tv.matrix_inverse, np.linalg.inv, np.zeros((2, 0, 0)))
    check_gradients(tv.matrix_inverse, np.array([[4.0]]))


def test_matrix_inverse_singular_fails_at_run_time():
    p = tv.placeholder(tv.float64, [None, 2, 2], name="mats")
    inv = tv.matrix_inverse(p, name="my_inverse")
    a = np.stack([np.eye(2), [[1.0, 2.0], [2.0, 4.0]]])
    with pytest.raises(InvalidArgumentError,
                       match="(?s)not invertible.*'my_inverse' \\(MatrixInverse\\)"):
        run(inv, {p: a})


# ---- determinant --------------------------------------------------------------------------------
@pytest.mark.parametrize("batch", [(), (3,), (2, 2), (0,)], ids=str)
def test_matrix_determinant(batch):
    a = rng.uniform(-1, 1, size=batch + (3, 3)) + np.eye(3)
    got = check_forward(tv.matrix_determinant, np.linalg.det, a, rtol=1e-10)
    assert got.shape == batch
    check_forward(tv.matrix_determinant, np.linalg.det, a.astype(np.float32), rtol=1e-4,
                  atol=1e-5)
    if a.size:
        check_gradients(tv.matrix_determinant, a)


def test_matrix_determinant_edge_cases():
    check_forward(tv.matrix_determinant, lambda x: np.float64(1.0), np.zeros((0, 0)))
    check_forward(tv.matrix_determinant, lambda x: np.zeros(2), np.zeros((2, 2, 2)))
    check_gradients(tv.matrix_determinant, np.array([[2.5]]))
    p = tv.placeholder(tv.float32, [None, 4, 4])
    assert tv.matrix_determinant(p).shape.as_list() == [None]


def test_second_derivative_of_determinant():
    a = tv.constant(np.array([[2.0, 1.0], [0.5, 3.0]]))
    g = tv.gradients(tv.matrix_determinant(a), a)[0]  # [[a11, -a10], [-a01, a00]]
    h = tv.gradients(tv.reduce_sum(g * tv.constant(np.array([[1.0, 0.0], [0.0, 0.0]]))), a)[0]
    np.testing.assert_allclose(run(h), [[0.0, 0.0], [0.0, 1.0]], atol=1e-12)


# ---- solve --------------------------------------------------------------------------------------
@pytest.mark.parametrize("batch,k", [((), 1), ((), 3), ((2,), 2), ((2, 1), 1), ((0,), 2)],
                         ids=str)
@pytest.mark.parametrize("adjoint", [False, True])
def test_matrix_solve(batch, k, adjoint):
    a = well_conditioned(*batch)
    b = rng.uniform(-1, 1, size=batch + (3, k))
    fn = lambda x, y: tv.matrix_solve(x, y, adjoint=adjoint)  # noqa: E731
    np_fn = lambda x, y: np.linalg.solve(_t(x) if adjoint else x, y)  # noqa: E731
    check_forward(fn, np_fn, a, b, rtol=1e-10)
    check_forward(fn, np_fn, a.astype(np.float32), b.astype(np.float32), rtol=1e-4, atol=1e-5)
    if a.size:
        check_gradients(fn, a, b)


def test_matrix_solve_errors():
    a = tv.constant(np.eye(3))
    with pytest.raises(InvalidArgumentError, match="(?s)same batch dimensions and M.*MatrixSolve"):
        tv.matrix_solve(a, tv.constant(np.ones((2, 1))))
    with pytest.raises(InvalidArgumentError, match="(?s)same batch dimensions.*MatrixSolve"):
        tv.matrix_solve(tv.constant(np.ones((2, 3, 3))), tv.constant(np.ones((3, 3, 1))))
    with pytest.raises(InvalidArgumentError, match="MatrixSolve expects inputs of one dtype"):
        tv.matrix_solve(a, tv.constant(np.ones((3, 1), np.float32)))
    with pytest.raises(InvalidArgumentError, match="MatrixSolve needs a tensor of rank >= 2"):
        tv.matrix_solve(a, tv.constant(np.ones(3)))
    p = tv.placeholder(tv.float64, [2, 2])
    x = tv.matrix_solve(p, tv.constant(np.ones((2, 1))), name="solver")
    with pytest.raises(InvalidArgumentError, match="(?s)not invertible.*'solver'"):
        run(x, {p: np.zeros((2, 2))})


# ---- Cholesky -----------------------------------------------------------------------------------
@pytest.mark.parametrize("batch", [(), (2,), (0,)], ids=str)
def test_cholesky(batch):
    a = spd(*batch)
    got = check_forward(tv.cholesky, np.linalg.cholesky, a, rtol=1e-10)
    np.testing.assert_allclose(got @ _t(got), a, rtol=1e-10)
    check_forward(tv.cholesky, np.linalg.cholesky, a.astype(np.float32), rtol=1e-4, atol=1e-5)
    if a.size:
        # the gradient is the symmetric one (as in TF): check it through a symmetric input
        check_gradients(lambda x: tv.cholesky(0.5 * (x + tv.matrix_transpose(x))), a)


def test_cholesky_reads_lower_triangle_and_rejects_non_pd():
    a = spd()
    junk = np.tril(a) + np.triu(rng.uniform(5, 9, size=(3, 3)), 1)
    check_forward(tv.cholesky, lambda x: np.linalg.cholesky(a), junk)
    p = tv.placeholder(tv.float64, [2, 2])
    el = tv.cholesky(p, name="chol")
    with pytest.raises(InvalidArgumentError, match="(?s)not positive definite.*'chol'"):
        run(el, {p: np.array([[1.0, 2.0], [2.0, 1.0]])})


def test_cholesky_gradient_of_a_solve():
    # a typical use: x = (L L^T)^-1 b through two solves; gradient wrt the SPD matrix
    def build(x, b):
        sym = 0.5 * (x + tv.matrix_transpose(x))
        el = tv.cholesky(sym)
        y = tv.matrix_solve(el, b)
        return tv.matrix_solve(el, y, adjoint=True)
    check_gradients(build, spd(2), rng.uniform(-1, 1, size=(2, 3, 1)))


# ---- construction errors common to the square-matrix ops ------------------------------------
@pytest.mark.parametrize("fn,op", [(tv.matrix_inverse, "MatrixInverse"),
                                   (tv.matrix_determinant, "MatrixDeterminant"),
                                   (tv.cholesky, "Cholesky")])
def test_square_matrix_errors(fn, op):
    with pytest.raises(InvalidArgumentError, match=f"(?s)needs square matrices.*\\({op}\\)"):
        fn(tv.constant(np.ones((2, 3, 4))))
    with pytest.raises(InvalidArgumentError, match=f"{op} needs a tensor of rank >= 2"):
        fn(tv.constant(np.ones(3)))
    with pytest.raises(InvalidArgumentError, match=f"{op} supports float32 and float64"):
        fn(tv.constant(np.eye(2, dtype=np.int32)))
    p = tv.placeholder(tv.float64, None)
    assert fn(p).shape.dims is None


# ---- transpose, trace, diagonals, band part -------------------------------------------------
@pytest.mark.parametrize("shape", [(2, 3), (2, 3, 4), (0, 2, 1), (1, 1)], ids=str)
def test_matrix_transpose(shape):
    x = rng.uniform(-1, 1, size=shape)
    check_forward(tv.matrix_transpose, _t, x)
    check_forward(tv.matrix_transpose, _t, x.astype(np.int32))
    if x.size:
        check_gradients(tv.matrix_transpose, x)
    with pytest.raises(InvalidArgumentError, match="MatrixTranspose needs a tensor of rank"):
        tv.matrix_transpose(tv.constant([1.0]))
    c = np.array([[1 + 2j, 3j]])
    check_forward(lambda t: tv.matrix_transpose(t, conjugate=True), lambda v: np.conj(v.T), c)


@pytest.mark.parametrize("shape", [(3, 3), (2, 3, 4), (2, 4, 3), (0, 2, 2)], ids=str)
def test_trace_and_diag_part(shape):
    x = rng.uniform(-1, 1, size=shape)
    got = check_forward(tv.trace, lambda v: np.trace(v, axis1=-2, axis2=-1), x)
    assert got.shape == shape[:-2]
    check_forward(tv.matrix_diag_part, lambda v: np.diagonal(v, axis1=-2, axis2=-1), x)
    if x.size:
        check_gradients(tv.trace, x)
        check_gradients(tv.matrix_diag_part, x)


def test_matrix_diag_and_set_diag():
    d = rng.uniform(-1, 1, size=(2, 3))
    check_forward(tv.matrix_diag, lambda v: v[..., None] * np.eye(3), d)
    check_gradients(tv.matrix_diag, d)
    x = rng.uniform(-1, 1, size=(2, 3, 4))
    want = x.copy()
    want[:, [0, 1, 2], [0, 1, 2]] = d
    check_forward(tv.matrix_set_diag, lambda a, b: want, x, d)
    check_gradients(tv.matrix_set_diag, x, d)
    with pytest.raises(InvalidArgumentError, match="(?s)does not fit input.*MatrixSetDiag"):
        tv.matrix_set_diag(tv.constant(x), tv.constant(np.ones((2, 4))))
    with pytest.raises(InvalidArgumentError, match="MatrixDiag needs a tensor of rank >= 1"):
        tv.matrix_diag(tv.constant(1.0))


@pytest.mark.parametrize("lower,upper", [(-1, 0), (0, -1), (0, 0), (1, 2), (-1, -1)])
def test_matrix_band_part(lower, upper):
    x = rng.uniform(-1, 1, size=(2, 3, 4))
    i, j = np.arange(3)[:, None], np.arange(4)[None, :]
    mask = ((lower < 0) | (i - j <= lower)) & ((upper < 0) | (j - i <= upper))
    check_forward(lambda t: tv.matrix_band_part(t, lower, upper), lambda v: v * mask, x)
    check_gradients(lambda t: tv.matrix_band_part(t, lower, upper), x)
    np.testing.assert_array_equal(run(tv.matrix_band_part(tv.constant(x[0]), -1, 0)),
                                  np.tril(x[0]))


def test_diag_and_diag_part_any_rank():
    v = rng.uniform(-1, 1, size=(2, 3))
    want = np.zeros((2, 3, 2, 3))
    for a in range(2):
        for b in range(3):
            want[a, b, a, b] = v[a, b]
    check_forward(tv.diag, lambda t: want, v)
    check_forward(tv.diag_part, lambda t: v, want)
    check_forward(tv.diag, np.diag, np.array([1.0, 2.0]))
    check_gradients(tv.diag, v)
    check_gradients(tv.diag_part, rng.uniform(-1, 1, size=(2, 2, 2, 2)))
    with pytest.raises(InvalidArgumentError, match="DiagPart needs a tensor of shape s \\+ s"):
        tv.diag_part(tv.constant(np.ones((2, 3))))
    with pytest.raises(InvalidArgumentError, match="Diag needs a tensor of rank >= 1"):
        tv.diag(tv.constant(1.0))


def test_linalg_namespace():
    a = well_conditioned()
    check_forward(tv.linalg.inv, np.linalg.inv, a)
    check_forward(tv.linalg.det, np.linalg.det, a)
    check_forward(lambda x: tv.linalg.band_part(x, -1, 0), np.tril, a)


# ---- the lecture demo: ridge regression in-graph ------------------------------------------------
def test_ridge_regression_closed_form():
    n, d, lam = 40, 5, 0.3
    x = rng.normal(size=(n, d))
    y = x @ rng.normal(size=(d, 1)) + 0.1 * rng.normal(size=(n, 1))
    X = tv.placeholder(tv.float64, [None, d])
    Y = tv.placeholder(tv.float64, [None, 1])
    gram = tv.matmul(X, X, transpose_a=True) + lam * tv.matrix_diag(tv.constant(np.ones(d)))
    beta = tv.matmul(tv.matrix_inverse(gram), tv.matmul(X, Y, transpose_a=True))
    beta2 = tv.matrix_solve(gram, tv.matmul(X, Y, transpose_a=True))
    want = np.linalg.solve(x.T @ x + lam * np.eye(d), x.T @ y)
    got, got2 = run([beta, beta2], {X: x, Y: y})
    np.testing.assert_allclose(got, want, rtol=1e-10)
    np.testing.assert_allclose(got2, want, rtol=1e-10)


# ---- QR (tv.linalg.qr / tv.qr; the orthogonal initializer is built on it) ---------------------
@pytest.mark.parametrize("shape", [(5, 3), (4, 4), (3, 5), (2, 4, 3)])
@pytest.mark.parametrize("full", [False, True])
def test_qr_matches_numpy_and_reconstructs(shape, full):
    a = np.random.default_rng(1).standard_normal(shape)
    with tv.Graph().as_default():
        q, r = tv.linalg.qr(tv.constant(a), full_matrices=full)
        got_q, got_r = tv.Session().run([q, r])
    want_q, want_r = np.linalg.qr(a, mode="complete" if full else "reduced")
    np.testing.assert_allclose(got_q, want_q, atol=1e-12)
    np.testing.assert_allclose(got_r, want_r, atol=1e-12)
    np.testing.assert_allclose(got_q @ got_r, a, atol=1e-12)
    assert np.allclose(np.triu(got_r), got_r)


@pytest.mark.parametrize("shape", [(5, 3), (4, 4), (3, 5), (2, 4, 3)])
def test_qr_gradients(shape):
    a = np.random.default_rng(2).standard_normal(shape)
    check_gradients(lambda x: tv.linalg.qr(x)[0], a)
    check_gradients(lambda x: tv.linalg.qr(x)[1], a)
    check_gradients(lambda x: tv.reduce_sum(tv.linalg.qr(x)[0]) * tv.linalg.qr(x)[1], a)


def test_qr_bad_input():
    with tv.Graph().as_default():
        with pytest.raises(tv.errors.InvalidArgumentError, match=r"Qr needs a tensor of rank "
                                                                 r">= 2"):
            tv.linalg.qr(tv.constant([1.0, 2.0]))
        with pytest.raises(tv.errors.InvalidArgumentError, match=r"Qr supports float32 and "
                                                                 r"float64"):
            tv.linalg.qr(tv.constant([[1, 2], [3, 4]]))
        q, _ = tv.linalg.qr(tv.constant(np.ones((5, 3))), full_matrices=True)
        with pytest.raises(tv.errors.UnimplementedError, match=r"QrGrad not implemented when "
                                                                r"nrows > ncols and "
                                                                r"full_matrices is true"):
            tv.gradients(q, [q.op.inputs[0]])


def test_orthogonal_initializer_is_graph_ops_not_a_py_func():
    """It ran numpy's QR in a py_func: such a graph could not be exported (meta graphs) nor
    run on a GPU; now it is random_normal -> Qr -> signs of R's diagonal."""
    with tv.Graph().as_default() as g:
        v = tv.get_variable("w", [6, 4], initializer=tv.orthogonal_initializer(gain=2.0,
                                                                               seed=3))
        types = {op.type for op in g.get_operations()}
        with tv.Session() as s:
            s.run(v.initializer)
            w = s.run(v)
    assert "Qr" in types and not any("PyFunc" in t for t in types)
    np.testing.assert_allclose(w.T @ w, 4.0 * np.eye(4), atol=1e-5)


# ---- einsum, tensordot, norm ------------------------------------------------------------------
EINSUM = [("ij,jk->ik", [(3, 4), (4, 5)]), ("bij,bjk->bik", [(2, 3, 4), (2, 4, 2)]),
          ("ij->ji", [(3, 4)]), ("ij->i", [(3, 4)]), ("ij,kj", [(2, 3), (4, 3)]),
          ("...ij,jk->...ik", [(2, 3, 4), (4, 5)]), ("i,i->", [(4,), (4,)]),
          ("i,j->ij", [(3,), (2,)]), ("ii->i", [(3, 3)]), ("ii", [(3, 3)]),
          ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 2)]), ("bii->b", [(2, 3, 3)]),
          ("ijk,ikj->i", [(2, 3, 4), (2, 4, 3)])]


@pytest.mark.parametrize("eq,shapes", EINSUM, ids=[e for e, _ in EINSUM])
def test_einsum_forward_and_gradient(eq, shapes):
    xs = [rng.normal(size=s) for s in shapes]
    check_forward(lambda *t: tv.einsum(eq, *t), lambda *a: np.einsum(eq, *a), *xs)
    check_gradients(lambda *t: tv.einsum(eq, *t), *xs)


def test_einsum_static_shape_and_errors():
    a = tv.placeholder(tv.float32, [None, 4])
    assert tv.einsum("ij,jk->ik", a, tv.zeros([4, 6])).shape.as_list() == [None, 6]
    with pytest.raises(InvalidArgumentError, match="axis 'j' has size 4 in one operand and 5"):
        tv.einsum("ij,jk->ik", a, tv.zeros([5, 6]))
    with pytest.raises(InvalidArgumentError, match="input 0 has rank 2 but its subscripts "
                                                   "'ijk' name 3 axes"):
        tv.einsum("ijk->i", a)
    with pytest.raises(InvalidArgumentError, match="names 2 operands, got 1 inputs"):
        tv.einsum("ij,jk->ik", a)


def test_tensordot():
    a, b, c = rng.normal(size=(3, 4)), rng.normal(size=(4, 5)), rng.normal(size=(2, 3, 4))
    for x, y, axes in ((a, b, 1), (c, a, [[1, 2], [0, 1]]), (a, a, 0), (c, b, [[2], [0]]),
                       (a, c, [[0, 1], [1, 2]])):
        check_forward(lambda p, q, axes=axes: tv.tensordot(p, q, axes),
                      lambda p, q, axes=axes: np.tensordot(p, q, axes),
                      x, y)
    check_gradients(lambda p, q: tv.tensordot(p, q, [[1, 2], [0, 1]]), c, a)
    with pytest.raises(ValueError, match="Different number of contraction axes `a` and `b`, "
                                         "1 != 2."):
        tv.tensordot(a, b, [[1], [0, 1]])
    with pytest.raises(ValueError, match="`axes` must not be larger than the number of "
                                         "dimensions of tensor"):
        tv.tensordot(a, b, 3)


NORMS = [("euclidean", None), (1, None), (np.inf, 1), (3, 0), ("fro", (1, 2)), (1, (0, 1)),
         (np.inf, (0, 1)), (2, (-2, -1)), (2, (2, 1)), (2, 0), (0.5, -1)]


@pytest.mark.parametrize("ord,axis", NORMS, ids=[f"{o}-{a}" for o, a in NORMS])
def test_norm(ord, axis):
    x = rng.normal(size=(2, 3, 4) if isinstance(axis, tuple) and 2 in axis else (3, 4))

    def ref(a):
        if axis is None:
            return np.linalg.norm(a.ravel(), 2 if ord == "euclidean" else ord)
        return np.linalg.norm(a, "fro" if ord == "fro" else ord, axis=axis)
    check_forward(lambda t: tv.norm(t, ord=ord, axis=axis), ref, x)
    check_gradients(lambda t: tv.norm(t, ord=ord, axis=axis), x, rtol=1e-4)
    kept = run(tv.norm(x, ord=ord, axis=axis, keepdims=True))
    assert kept.ndim == x.ndim


def test_norm_errors():
    a = tv.zeros([3, 4])
    with pytest.raises(ValueError, match="'ord' must be a supported matrix norm in "):
        tv.norm(a, ord="nuc", axis=[0, 1])
    with pytest.raises(ValueError, match="'ord' must be a supported vector norm, got 0.0"):
        tv.norm(a, ord=0.0)
    with pytest.raises(ValueError, match="'axis' must be None, an integer, or a tuple of 2 "
                                         "unique integers, got \\(0, 0\\)"):
        tv.norm(a, axis=[0, 0])


# ---- svd, eigh, triangular solves, least squares ----------------------------------------------
@pytest.mark.parametrize("shape", [(4, 3), (3, 4), (3, 3), (2, 4, 3)])
def test_svd_forward_and_gradients(shape):
    x = rng.normal(size=shape)
    s, u, v = run(list(tv.svd(x)))
    np.testing.assert_allclose(s, np.linalg.svd(x, compute_uv=False), rtol=1e-12)
    np.testing.assert_allclose(u @ (s[..., :, None] * _t(v)), x, atol=1e-12)
    _, uf, vf = run(list(tv.svd(x, full_matrices=True)))
    assert uf.shape[-1] == shape[-2] and vf.shape[-1] == shape[-1]
    check_gradients(lambda t: tv.svd(t, compute_uv=False), x)
    # a sign-invariant function of u and v (each column's sign is arbitrary)
    check_gradients(lambda t: tv.svd(t)[0] + tv.reduce_sum(tv.square(tv.svd(t)[1][..., :1, :]))
                    + tv.reduce_sum(tv.square(tv.svd(t)[2][..., :1, :])), x, rtol=1e-4)


def test_self_adjoint_eig():
    a = spd(2, n=4)
    e, v = run(list(tv.self_adjoint_eig(a)))
    np.testing.assert_allclose(e, np.linalg.eigvalsh(a), rtol=1e-12)
    np.testing.assert_allclose(v @ (e[..., :, None] * _t(v)), a, atol=1e-11)
    np.testing.assert_allclose(run(tv.self_adjoint_eigvals(a)), e, rtol=1e-12)
    # only the lower triangle is read (as TF): the gradient is the lower triangle's
    check_gradients(lambda t: tv.self_adjoint_eigvals(t), a)
    check_gradients(lambda t: tv.square(tv.self_adjoint_eig(t)[1]), a, rtol=1e-4)


def test_matrix_triangular_solve_cholesky_solve_and_lstsq():
    lo = np.tril(rng.normal(size=(2, 4, 4))) + 3 * np.eye(4)
    b = rng.normal(size=(2, 4, 3))
    for lower, adjoint in ((True, False), (True, True), (False, False), (False, True)):
        m = lo if lower else _t(lo)
        tri = np.tril(m) if lower else np.triu(m)
        want = np.linalg.solve(_t(tri) if adjoint else tri, b)
        got = run(tv.matrix_triangular_solve(m + (np.triu(np.ones((4, 4)), 1) if lower else
                                                  np.tril(np.ones((4, 4)), -1)),
                                             b, lower=lower, adjoint=adjoint))
        np.testing.assert_allclose(got, want, rtol=1e-12)  # the other triangle is ignored
        check_gradients(lambda p, q, lo_=lower, adj=adjoint: tv.matrix_triangular_solve(
            p, q, lower=lo_, adjoint=adj), m, b)
    a = spd(2, n=4)
    np.testing.assert_allclose(run(tv.cholesky_solve(tv.cholesky(a), b)), np.linalg.solve(a, b),
                               rtol=1e-10)
    with pytest.raises(InvalidArgumentError, match="Input matrix is not invertible"):
        with tv.device("/cpu:0"):  # checked on the host only (TF's GPU kernel does not)
            singular = tv.matrix_triangular_solve(np.zeros((2, 2)), np.ones((2, 1)))
        run(singular)
    tall, wide = rng.normal(size=(5, 3)), rng.normal(size=(3, 5))
    y = rng.normal(size=(5, 2))
    np.testing.assert_allclose(run(tv.matrix_solve_ls(tall, y)),
                               np.linalg.lstsq(tall, y, rcond=None)[0], rtol=1e-9)
    np.testing.assert_allclose(run(tv.matrix_solve_ls(wide, y[:3])),
                               np.linalg.pinv(wide) @ y[:3], rtol=1e-9)
    lam = 0.3
    np.testing.assert_allclose(run(tv.matrix_solve_ls(tall, y, l2_regularizer=lam)),
                               np.linalg.solve(tall.T @ tall + lam * np.eye(3), tall.T @ y),
                               rtol=1e-10)
    check_gradients(lambda p, q: tv.matrix_solve_ls(p, q), tall, y)


def test_linalg_namespace_names():
    for name in ("einsum", "tensordot", "norm", "svd", "eigh", "eigvalsh", "triangular_solve",
                 "cholesky_solve", "lstsq", "logdet", "adjoint", "matvec", "matmul", "eye",
                 "global_norm", "l2_normalize", "tensor_diag", "tensor_diag_part", "inv", "qr"):
        assert callable(getattr(tv.linalg, name)), name
    a = spd(n=3)
    got = run([tv.linalg.logdet(a), tv.linalg.matvec(a, np.ones(3)), tv.linalg.adjoint(a)])
    np.testing.assert_allclose(got[0], np.linalg.slogdet(a)[1], rtol=1e-12)
    np.testing.assert_allclose(got[1], a @ np.ones(3), rtol=1e-12)
    np.testing.assert_allclose(got[2], a.T)


def test_slogdet_pinv_matrix_rank_normalize_cross():
    a = rng.normal(size=(2, 3, 3))
    sign, logdet = run(list(tv.linalg.slogdet(a)))
    want_sign, want_logdet = np.linalg.slogdet(a)
    np.testing.assert_allclose(sign, want_sign)
    np.testing.assert_allclose(logdet, want_logdet, rtol=1e-12)
    check_gradients(lambda t: tv.linalg.slogdet(t)[1], a)
    big = np.eye(3) * 1e200  # det overflows, log det does not
    assert run(tv.linalg.slogdet(big)[1]) == pytest.approx(600 * np.log(10))
    x = rng.normal(size=(3, 4))
    low = np.outer(rng.normal(size=4), rng.normal(size=3))
    np.testing.assert_allclose(run(tv.linalg.pinv(x)), np.linalg.pinv(x), rtol=1e-10)
    np.testing.assert_allclose(run(tv.linalg.pinv(low)), np.linalg.pinv(low), rtol=1e-8,
                               atol=1e-12)
    check_gradients(tv.linalg.pinv, x, rtol=1e-4)
    assert run(tv.linalg.matrix_rank(low)) == 1 and run(tv.linalg.matrix_rank(x)) == 3
    assert run(tv.linalg.matrix_rank(np.stack([low[:3], np.eye(3)]))).tolist() == [1, 3]
    n, nrm = run(list(tv.linalg.normalize(x, axis=1)))
    np.testing.assert_allclose(nrm[:, 0], np.linalg.norm(x, axis=1))
    np.testing.assert_allclose(n, x / np.linalg.norm(x, axis=1, keepdims=True))
    u, v = rng.normal(size=(4, 3)), rng.normal(size=(4, 3))
    check_forward(tv.cross, np.cross, u, v)
    check_gradients(tv.cross, u, v)
    with pytest.raises(InvalidArgumentError, match="Cross: the last dimension must be 3"):
        tv.cross(tv.zeros([2, 4]), tv.zeros([2, 4]))


@pytest.mark.parametrize("scale", [1e-3, 0.2, 0.8, 1.8, 4.0, 40.0])
def test_expm_forward_and_gradient(scale):
    a = rng.normal(size=(2, 4, 4)) * scale / 4
    w, v = np.linalg.eig(a)
    want = np.real(np.einsum("bij,bj,bjk->bik", v, np.exp(w), np.linalg.inv(v)))
    np.testing.assert_allclose(run(tv.linalg.expm(a)), want, rtol=1e-11,
                               atol=1e-13 * np.abs(want).max())
    check_gradients(tv.linalg.expm, a, rtol=1e-5, atol=1e-6 * max(1.0, np.abs(want).max()))


def test_expm_closed_forms():
    assert run(tv.linalg.expm(np.zeros((2, 2)))).tolist() == [[1.0, 0.0], [0.0, 1.0]]
    assert run(tv.linalg.expm([[0.0, 1.0], [0.0, 0.0]])).tolist() == [[1.0, 1.0], [0.0, 1.0]]
    t = 0.7
    rot = run(tv.linalg.expm(np.array([[0.0, -t], [t, 0.0]])))
    np.testing.assert_allclose(rot, [[np.cos(t), -np.sin(t)], [np.sin(t), np.cos(t)]],
                               rtol=1e-14)


def test_matrix_square_root():
    a = spd(2, n=4)
    s = run(tv.matrix_square_root(a))
    np.testing.assert_allclose(s @ s, a, rtol=1e-12, atol=1e-12)
    e, v = np.linalg.eigh(a)
    np.testing.assert_allclose(s, (v * np.sqrt(e)[..., None, :]) @ _t(v), rtol=1e-12)
    b = rng.normal(size=(3, 3)) + 4 * np.eye(3)  # not symmetric
    sb = run(tv.linalg.sqrtm(b))
    np.testing.assert_allclose(sb @ sb, b, rtol=1e-12, atol=1e-12)
    assert np.all(np.linalg.eigvals(sb).real > 0)  # the principal root
    check_gradients(tv.linalg.sqrtm, b, rtol=1e-5)
    check_gradients(tv.matrix_square_root, a, rtol=1e-5)


def test_lu_family():
    a = rng.normal(size=(2, 4, 4))
    lu_, p = run(list(tv.linalg.lu(a)))
    lower = np.tril(lu_, -1) + np.eye(4)
    upper = np.triu(lu_)
    np.testing.assert_allclose(lower @ upper, np.take_along_axis(a, p[..., None], -2),
                               rtol=1e-12, atol=1e-12)
    assert np.all(np.abs(np.tril(lu_, -1)) <= 1 + 1e-12)  # partial pivoting
    b = rng.normal(size=(2, 4, 3))
    lt, pt = tv.linalg.lu(a)
    got = run([tv.linalg.lu_reconstruct(lt, pt), tv.linalg.lu_solve(lt, pt, b),
               tv.linalg.lu_matrix_inverse(lt, pt)])
    np.testing.assert_allclose(got[0], a, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(got[1], np.linalg.solve(a, b), rtol=1e-10)
    np.testing.assert_allclose(got[2], np.linalg.inv(a), rtol=1e-10)
    # (TF 2.21 has no gradient for Lu in graph mode; tensorvm's is checked numerically)
    check_gradients(lambda t: tv.linalg.lu(t)[0], a[0], rtol=1e-5)
    check_gradients(lambda t, r: tv.linalg.lu_solve(*tv.linalg.lu(t), r), a[0], b[0],
                    rtol=1e-5)


def test_tridiagonal_solve_matmul_and_eigh():
    d = rng.normal(size=(3, 5))
    d[1] += 4.0
    dense = np.diag(d[1]) + np.diag(d[0, :-1], 1) + np.diag(d[2, 1:], -1)
    rhs = rng.normal(size=(5, 2))
    got = run([tv.linalg.tridiagonal_solve(d, rhs), tv.linalg.tridiagonal_matmul(d, rhs),
               tv.linalg.tridiagonal_solve(d, rhs.T, transpose_rhs=True),
               tv.linalg.tridiagonal_solve((d[0, :-1], d[1], d[2, 1:]), rhs,
                                           diagonals_format="sequence"),
               tv.linalg.tridiagonal_solve(dense, rhs[:, 0], diagonals_format="matrix")])
    np.testing.assert_allclose(got[0], np.linalg.solve(dense, rhs), rtol=1e-12)
    np.testing.assert_allclose(got[1], dense @ rhs, rtol=1e-12)
    np.testing.assert_allclose(got[2], got[0], rtol=1e-12)
    np.testing.assert_allclose(got[3], got[0], rtol=1e-12)
    np.testing.assert_allclose(got[4], got[0][:, 0], rtol=1e-12)
    check_gradients(lambda t, r: tv.linalg.tridiagonal_solve(t, r), d, rhs)
    alpha, beta = np.array([1.0, 2.0, 3.0, 4.0]), np.array([0.5, 0.2, 0.1])
    t = np.diag(alpha) + np.diag(beta, 1) + np.diag(beta, -1)
    ev = np.linalg.eigvalsh(t)
    got = run([tv.linalg.eigh_tridiagonal(alpha, beta),
               tv.linalg.eigh_tridiagonal(alpha, beta, select="i", select_range=[1, 2]),
               tv.linalg.eigh_tridiagonal(alpha, beta, select="v", select_range=[1.5, 3.5])])
    np.testing.assert_allclose(got[0], ev, rtol=1e-12)
    np.testing.assert_allclose(got[1], ev[1:3], rtol=1e-12)
    np.testing.assert_allclose(got[2], ev[(ev > 1.5) & (ev <= 3.5)], rtol=1e-12)
