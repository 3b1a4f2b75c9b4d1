"""Small dense Cholesky routines for the interior point's K x K systems (compiled).

Element loops rather than ``np.linalg``: the systems are small (K), and
LAPACK's call overhead and numba's compile of it would cost more than the arithmetic.
"""

from __future__ import annotations

import math

from numba import njit


@njit(cache=True, error_model="numpy")
def chol_factor(A, L, n):
    """Lower Cholesky factor of the leading n x n block of a symmetric positive definite A
    into ``L``. Returns False when that block is not positive definite."""
    for j in range(n):
        d = A[j, j]
        for p in range(j):
            d -= L[j, p] * L[j, p]
        if not d > 0:
            return False
        ljj = math.sqrt(d)
        L[j, j] = ljj
        inv = 1.0 / ljj
        for i in range(j + 1, n):
            t = A[i, j]
            for p in range(j):
                t -= L[i, p] * L[j, p]
            L[i, j] = t * inv
    return True


@njit(cache=True, error_model="numpy")
def chol_apply(L, x):
    """Solve ``L L' v = x`` in place, ``L`` from :func:`chol_factor`."""
    n = L.shape[0]
    for i in range(n):
        t = x[i]
        for p in range(i):
            t -= L[i, p] * x[p]
        x[i] = t / L[i, i]
    for i in range(n - 1, -1, -1):
        t = x[i]
        for p in range(i + 1, n):
            t -= L[p, i] * x[p]
        x[i] = t / L[i, i]
