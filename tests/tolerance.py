"""Float tolerances derived from an operation's error bound, not fixed constants.

A fixed ``rtol=1e-5`` on a float32 product fails whenever a sum of products nearly cancels: the
result is small while the rounding error scales with the *magnitudes* of the products. Higham's
bound for a sum of ``n`` products computed in a precision with unit roundoff ``u`` is

    |fl(x . y) - x . y| <= gamma_n * (|x| . |y|),    gamma_n = n u / (1 - n u)

whatever the summation order (BLAS blocking, a thread pool cutting rows, torch's kernels), so a
test that compares against a float64 reference with this bound cannot fail on another BLAS path or
CPU, and still catches any real fault (a wrong row or element is off by O(|x| . |y|)).

>>> import numpy as np
>>> a = np.float32([[1e4, 1.0]]); b = np.float32([[1.0], [1e-4]])
>>> assert_product_close(a @ b, a, b)
"""
from __future__ import annotations

import numpy as np


def gamma(n: int, dtype) -> float:
    """Higham's gamma_n for ``n`` rounded operations in ``dtype`` (unit roundoff eps/2)."""
    u = np.finfo(dtype).eps / 2
    return n * u / (1 - n * u)


def product_error_bound(a, b, dtype=None) -> np.ndarray:
    """Elementwise bound on |computed a @ b - exact a @ b| for a matmul over ``a.shape[-1]``
    terms: gamma_n |a| @ |b|, plus the final rounding of the result to ``dtype``."""
    dtype = np.dtype(dtype or np.result_type(a, b))
    a64, b64 = np.abs(np.asarray(a, np.float64)), np.abs(np.asarray(b, np.float64))
    mags = a64 @ b64
    return gamma(a.shape[-1], dtype) * mags + np.finfo(dtype).eps * mags


def assert_within(got, exact, bound, what: str = "result") -> None:
    """Assert ``|got - exact| <= bound`` elementwise, naming the worst element."""
    err = np.abs(np.asarray(got, np.float64) - np.asarray(exact, np.float64))
    over = err > bound
    if over.any():
        i = np.unravel_index(np.argmax(err - bound), err.shape)
        raise AssertionError(f"{what}: {int(over.sum())} of {err.size} elements exceed the error "
                             f"bound; worst at {i}: |error| {err[i]:.3g} > bound {bound[i]:.3g}")


def assert_product_close(got, a, b, what: str = "a @ b") -> None:
    """``got`` is a float ``a @ b`` computed by any summation order (see the module doc)."""
    exact = np.asarray(a, np.float64) @ np.asarray(b, np.float64)
    assert np.shape(got) == exact.shape, (np.shape(got), exact.shape)
    assert_within(got, exact, product_error_bound(a, b, np.asarray(got).dtype), what)
