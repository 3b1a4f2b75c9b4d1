r"""The interior point's K x K Newton system solved without forming it (compiled).

After every moving row is eliminated (:mod:`._interior`), the Newton system on the column
sums is :math:`S = I + D^{1/2} M D^{1/2}` with ``D`` the fairness term's (diagonal) curvature
and :math:`M = \sum_i P_i^\top G_i P_i`, where row ``i``'s :math:`P_i` takes the differences
``v[k] - v[r]`` of its support's classes ``k`` against its basic class ``r`` and :math:`G_i` is
the inverse of its reduced block (stored flat in ``inverses``, a diagonal plus a rank-two
term: :mod:`._blocks`). A product :math:`S v` costs :math:`O(\sum_i m_i + K)` for supports of
``m_i`` classes, against :math:`O(K^2)` to form ``S`` and :math:`O(K^3)` to factor it.
Conjugate gradients with the diagonal of ``S`` as preconditioner (:func:`schur_solve`) solve
it from those products.

The iteration stops at a relative residual of :data:`_RTOL`, near the working precision. An
inexact direction never makes a result wrong (every iterate stays feasible and the stop is the
certified gap), but the row blocks amplify the error of the solve (a row whose classes tie has
almost no curvature of its own), and a loose solve can leave the interior point stalled far
from the optimum. A solve that does not reach the tolerance within K products reports it, and
the caller factors the system densely instead.
"""

from __future__ import annotations

import math

from numba import njit

from skcce.solvers._kernels import _blocks as bk

_RTOL = 1e-12  # relative residual of the conjugate gradients


@njit(cache=True, error_model="numpy")
def schur_diagonal(supports, multi, n_multi, basic, offsets, inverses, curvature, diagonal):
    """The diagonal of ``S`` into ``diagonal`` (the preconditioner of :func:`schur_solve`)."""
    classes, count = supports.classes, supports.count
    K = diagonal.shape[0]
    for k in range(K):
        diagonal[k] = 0.0
    for t in range(n_multi):
        i = multi[t]
        n1 = count[i] - 1
        rq = basic[i]
        o = offsets[i]
        for p1 in range(n1):
            k = classes[i, p1 if p1 < rq else p1 + 1]
            diagonal[k] += bk.entry(inverses, o, n1, p1, p1)
        diagonal[classes[i, rq]] += bk.total(inverses, o, n1)
    for k in range(K):
        diagonal[k] = 1.0 + curvature[k] * diagonal[k]


@njit(cache=True, error_model="numpy")
def _product(supports, multi, n_multi, basic, offsets, inverses, root, v, out, scaled, gathered,
             applied):  # fmt: skip
    """``out = S v`` (``scaled``, ``gathered``, ``applied``: work arrays of shapes (K,),
    (>= support,) and (>= support,))."""
    classes, count = supports.classes, supports.count
    K = v.shape[0]
    for k in range(K):
        scaled[k] = root[k] * v[k]
        out[k] = 0.0
    for t in range(n_multi):
        i = multi[t]
        n1 = count[i] - 1
        rq = basic[i]
        r = classes[i, rq]
        vr = scaled[r]
        for p in range(n1):
            gathered[p] = scaled[classes[i, p if p < rq else p + 1]] - vr
        total = bk.apply(inverses, offsets[i], n1, gathered, applied)
        for p1 in range(n1):
            out[classes[i, p1 if p1 < rq else p1 + 1]] += applied[p1]
        out[r] -= total
    for k in range(K):
        out[k] = v[k] + root[k] * out[k]


@njit(cache=True, error_model="numpy")
def schur_solve(supports, multi, n_multi, basic, offsets, inverses, root, diagonal, work,
                gathered, applied, b):  # fmt: skip
    """Solve ``S x = b`` by preconditioned conjugate gradients; ``x`` overwrites ``b``.

    ``root`` is :math:`D^{1/2}`, ``diagonal`` the preconditioner (:func:`schur_diagonal`),
    ``work`` an array of shape (6, K), ``gathered`` and ``applied`` room for one row's
    support each. At most K
    products. Returns their number, negated when the residual did not reach the tolerance
    (an ill-conditioned system: ties in a row leave its block nearly singular), with ``b``
    set to NaN, which the caller's step rejects."""
    K = b.shape[0]
    x, r, z, p, q, scaled = work[0], work[1], work[2], work[3], work[4], work[5]
    bb = 0.0
    rz = 0.0
    for k in range(K):
        x[k] = 0.0
        r[k] = b[k]
        z[k] = r[k] / diagonal[k]
        p[k] = z[k]
        bb += b[k] * b[k]
        rz += r[k] * z[k]
    if not bb > 0:
        return 0
    stop = _RTOL * _RTOL * bb
    n = 0
    converged = False
    for step in range(1, K + 1):  # (K steps solve it in exact arithmetic)
        n = step
        _product(supports, multi, n_multi, basic, offsets, inverses, root, p, q, scaled,
                 gathered, applied)  # fmt: skip
        pq = 0.0
        for k in range(K):
            pq += p[k] * q[k]
        if not pq > 0:  # rounding lost the definiteness
            break
        alpha = rz / pq
        rr = 0.0
        for k in range(K):
            x[k] += alpha * p[k]
            r[k] -= alpha * q[k]
            rr += r[k] * r[k]
        if not rr > stop:  # (or NaN)
            converged = rr <= stop
            break
        rz_new = 0.0
        for k in range(K):
            z[k] = r[k] / diagonal[k]
            rz_new += r[k] * z[k]
        beta = rz_new / rz
        rz = rz_new
        for k in range(K):
            p[k] = z[k] + beta * p[k]
    if not converged:
        for k in range(K):
            b[k] = math.nan
        return -n
    for k in range(K):
        b[k] = x[k]
    return n
