r"""Compiled CPU kernels (numba) for the exact collision-loss pseudo-label solver.

Self-contained: NumPy float64 arrays in and out, nothing imported from skcce, so that the
kernels can be tested against the torch reference (:mod:`skcce.solvers._duality`,
:mod:`skcce.solvers._newton`, :mod:`skcce.solvers._em`) on their own. Every kernel is
``@njit(cache=True)``: compiled once per machine and loaded from numba's on-disk cache by later
processes; ``error_model="numpy"`` gives IEEE results (``inf``, ``nan``) for a division by
zero, as in the torch reference. The entries called from Python (:func:`ipm_solve`,
:func:`ipm_solve_into`, :func:`em_solve`, :func:`certificate`) release the GIL
(``nogil=True``), so independent problems (the batched restarts of
:mod:`skcce._engine._batched`) solve on several threads.

The problem (supplement of Zhang & Boykov, summed-rows convention of :mod:`skcce.losses`) is

.. math::  \min_{Y} F(Y) = -\sum_i \ln \sigma_i^\top y_i + \Phi(s), \qquad s = \sum_i y_i,
           \quad y_i \in \Delta_K ,

with :math:`\Phi(s) = \lambda KL(u \| s/N)` (``fairness="reverse"``, loss (b)) or
:math:`\lambda KL(s/N \| u)` (``"forward"``, loss (a)).

What is here
------------
* Exact row best responses :math:`\psi_i(w) = \min_{y \in \Delta} -\ln \sigma_i^\top y - w^\top y`
  (:func:`best_responses`), the dual :math:`q(w)` and the certified gap ``F(Y) - q(w(Y))``
  (:func:`certificate`) with the multiplier ``w(Y)`` of ``Problem.initial_w`` in
  :mod:`skcce.solvers._duality`: the same bound the torch path certifies with.
* :func:`ipm_solve`: the exact solver. Column generation on the *primal*: each row keeps a
  small support (the classes its best responses used, plus up to 3 of its best vertices by
  ``sigma_k exp(w_k)``: when ``lam <= N`` only those within a factor 0.2 of its best, as a
  weaker fairness pull leaves most rows at one class); the restricted
  problem is solved by a primal-dual interior-point method whose Newton system, after
  eliminating every row (a block of the support's size), is one K x K positive definite system
  (the Schur complement on the column sums ``s``). The full certificate, with exact best
  responses over *all* classes, is evaluated when the restricted problem is nearly solved and
  every few iterations (at iteration 0 only when the warm start's own gap is large); when the
  restricted problem is solved but the certificate is not, the classes of the rows' best
  responses are added (pricing) and the interior-point iteration continues. When one pricing
  adds classes to most rows (a large ``lam``, whose optimum mixes many classes in every row),
  every row gets every allowed class at once; above ``lam = 8 N`` every row starts with them.
  The supports also shrink: after each step, an entry that the step drove to its bound
  (``y < 0.2 r`` and ``z > r / 0.2``, with ``r`` the square root of the step's complementarity
  target) leaves its row (:func:`_prune`; a row keeps its largest entry, a class its last
  row), so that later iterations solve smaller rows. Pruning stops once that target is below
  1e-5, and for good once a pricing after the start has added a class: from then on the
  supports only grow, so the column generation still ends. A class dropped too early is
  priced back like any other. At a restricted optimum whose supports contain every row's
  best response the gap is zero, so the loop ends certified.
  Ties between a row's classes, exact zeros in ``sigma``, K = 2 and large ``lam`` (an LP-like
  dual) need no special case: the optimum mixes classes inside a row where it must.
* :func:`em_solve`: the paper's EM (Algorithm 1's inner loop: E-step and the exact M-step of
  Theorem 1 / section 3 by safeguarded Newton on the scalar ``x``), with the torch path's
  certification schedule, for EM-vs-Newton comparisons between equally compiled code.
* :func:`solve_collision_numba`: the thin entry used by :mod:`skcce.solvers._compiled`.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from numba import njit

_INF = np.inf
_TAU = 0.995  # fraction to the boundary of an interior-point step
_MU0 = 0.1  # first complementarity of the interior point
_EPS_NEW = 0.05  # mass given to a class when pricing adds it to a row's support
_REG = 1e-8  # primal regularisation of each row's reduced block
_WIDTH = 8  # first capacity of a row's support (grows by doubling when pricing needs it)
_PRICE_EVERY = 8  # the certificate (and pricing) at least every this many iterations
_EARLY = 3.0  # the first pricing is at iteration 0 when the warm start's gap >= this x yz
_DENSE_LAM = 8.0  # lam above this x N: every row starts with every allowed class
_DENSE_ROWS = 0.5  # one pricing adding classes to more than this share of rows: full supports
_WALK = 3  # steps of the envelope walk before a row's best response tries the candidate
_TOP = 3  # initial support: each row's best vertices (largest ln sigma + w), at most
_NEAR = 0.2  # ... those within this factor of the row's best vertex (sigma exp(w)), if lam <= N
_PRUNE = 0.2  # an entry leaves its row's support when y < this x r and z > r / this, with
# r = sqrt(the step's complementarity target), while that target is at least _PRUNE_MU and
# until pricing adds a class after the start
_PRUNE_MU = 1e-5
_EM_NEWTON = 100  # safeguarded Newton steps of the M-step (as skcce.solvers._em)
_CERTIFY_EVERY = 10  # EM certifies its first 8 iterates and then every 10th (as skcce.solvers)


@njit(cache=True, error_model="numpy", inline="always")
def _log_add(p, acc, x):
    """Add ``ln x`` to a sum of logarithms kept as ``acc + ln p``: returns the new ``(p, acc)``.

    The terms multiply into ``p``, which is logged only when it leaves [1e-250, 1e250]: a
    sum of N row values (in (0, 1] here) costs a few logarithms instead of N, and its rounding
    (about N ulp, relative to ``p``) stays far below the certified gaps. A term outside
    [1e-30, 1e30] takes its own logarithm (``-inf`` for 0 or NaN: an infinite value, which
    never certifies)."""
    if not (x > 1e-30 and x < 1e30):
        return p, acc + (math.log(x) if x > 0 else -_INF)
    p *= x
    if not (p > 1e-250 and p < 1e250):
        return 1.0, acc + math.log(p)
    return p, acc


# ----- row best responses ------------------------------------------------------------------------
@njit(cache=True, error_model="numpy", inline="always")
def _br_candidate(sigma, i, ew, wm, allowed):
    """Candidate maximiser of ln(s'y) + wm'y on the simplex for one row (``ew``: see
    :func:`_exp_w`).

    The maximiser lies on the upper concave envelope of the points ``(s_k, wm_k)``, along
    which ``h(x) = ln x + env(x)`` is concave: it is the best envelope vertex or a point of a
    segment that ends there. The candidate takes the best point ``b`` (largest
    ``s_b exp(wm_b)``, usually that vertex) and the segment from ``b`` to the point of smallest
    slope on its left (largest on its right), with the stationary point ``x = -1/slope`` of
    ``h``: two passes over the classes. :func:`_br_row` checks it and falls back to the walk.
    """
    K = sigma.shape[1]
    b = -1
    vb = -_INF
    for k in range(K):
        if allowed[k]:
            v = sigma[i, k] * ew[k]
            if b < 0 or v > vb:
                b = k
                vb = v
    sb = sigma[i, b]
    wb = wm[b]
    if not sb > 0.0:
        return b, b, 1.0, 0.0, 0.0
    jl = -1
    rl = _INF  # smallest slope to a point on the left
    jr = -1
    rr = -_INF  # largest slope to a point on the right
    for k in range(K):
        if not allowed[k]:
            continue
        sk = sigma[i, k]
        # slopes compared by cross-multiplication (one division per new extreme only)
        if sk < sb:
            if jl < 0 or wb - wm[k] < rl * (sb - sk):
                rl = (wb - wm[k]) / (sb - sk)
                jl = k
        elif sk > sb:
            if jr < 0 or wm[k] - wb > rr * (sk - sb):
                rr = (wm[k] - wb) / (sk - sb)
                jr = k
    inv = 1.0 / sb
    if jr >= 0 and inv + rr > 0.0:  # h increases to the right of b
        xs = -1.0 / rr
        sj = sigma[i, jr]
        yj = (xs - sb) / (sj - sb)
        yj = min(max(yj, 0.0), 1.0)
        yb = 1.0 - yj
        x = yb * sb + yj * sj
        return b, jr, yb, x, yb * wb + yj * wm[jr]
    if jl >= 0 and inv + rl < 0.0:  # h decreases to the left of b: the maximum is left
        xs = -1.0 / rl
        sj = sigma[i, jl]
        yb = (xs - sj) / (sb - sj)
        yb = min(max(yb, 0.0), 1.0)
        yj = 1.0 - yb
        x = yb * sb + yj * sj
        return b, jl, yb, x, yb * wb + yj * wm[jl]
    return b, b, 1.0, sb, wb


@njit(cache=True, error_model="numpy", inline="always")
def _br_walk(sigma, i, wm, allowed, max_steps):
    """Exact maximiser by a walk along the upper envelope from its right end (largest ``s``).

    Each step is one pass over the classes and moves to a vertex of smaller ``s``, so the walk
    ends within K steps. Returns ``(a, b, ya, x, lin, done)`` as :func:`_br_row`; after
    ``max_steps`` steps without an end it gives up (``done`` False, the other values
    meaningless).
    """
    K = sigma.shape[1]
    v = -1
    for k in range(K):
        if not allowed[k]:
            continue
        if v < 0 or sigma[i, k] > sigma[i, v] or (sigma[i, k] == sigma[i, v] and wm[k] > wm[v]):
            v = k
    for _ in range(max_steps):
        sv = sigma[i, v]
        wv = wm[v]
        if not sv > 0.0:
            return v, v, 1.0, 0.0, 0.0, True
        inv = 1.0 / sv
        j = -1
        rho = _INF
        for k in range(K):
            if not allowed[k]:
                continue
            sk = sigma[i, k]
            # v loses to a mix with k iff 1/sv + (wv - wk)/(sv - sk) < 0, i.e. (times
            # sv - sk > 0) wk - wv > 1 - sk/sv: only such k need their slope (a division)
            if sk < sv and wm[k] - wv > 1.0 - sk * inv:
                r = (wv - wm[k]) / (sv - sk)
                if r < rho or (r == rho and j >= 0 and sk < sigma[i, j]):
                    rho = r
                    j = k
        if j < 0 or inv + rho >= 0.0:
            return v, v, 1.0, sv, wv, True
        xs = -1.0 / rho
        sj = sigma[i, j]
        if xs > sj:
            yv = min((xs - sj) / (sv - sj), 1.0)
            yj = 1.0 - yv
            x = yv * sv + yj * sj
            return v, j, yv, x, yv * wv + yj * wm[j], True
        v = j
    return v, v, 1.0, 0.0, 0.0, False


@njit(cache=True, error_model="numpy", inline="always")
def _br_row(sigma, i, ew, wm, allowed):
    """Exact maximiser of ln(s'y) + wm'y on the simplex for one row (``ew = _exp_w(wm)``).

    The envelope walk of :func:`_br_walk` first, for a few steps: it usually ends at its first
    or second vertex, in one pass over the classes per step. A longer walk (up to K passes)
    gives way to the candidate of :func:`_br_candidate` (two passes), accepted when it passes
    the optimality conditions ``s_k / x + wm_k <= s_a / x + wm_a`` (every class ``k``, every
    class ``a`` of the support, ``x = s'y``, within 64 ulp); otherwise the walk finishes.
    ``s`` is row ``i`` of ``sigma`` (passed whole: a row view would cost a reference count).
    Returns ``(a, b, ya, x, lin)``: the labels put ``ya`` on class ``a`` and ``1 - ya`` on
    class ``b`` (``a == b`` for a vertex); ``x = s'y`` and ``lin = wm'y``, so that the row
    minimum is ``psi = -ln x - lin`` (``x = 0``, ``psi = +inf``, if no allowed class has
    ``s > 0``). The caller takes the logarithm (:func:`_log_add` adds many at the cost of few).
    """
    a, b, ya, xr, lin, done = _br_walk(sigma, i, wm, allowed, _WALK)
    if done:
        return a, b, ya, xr, lin
    a, b, ya, xr, lin = _br_candidate(sigma, i, ew, wm, allowed)
    if not xr > 0.0:
        return a, b, ya, xr, lin
    x = ya * sigma[i, a] + (1.0 - ya) * sigma[i, b]
    inv = 1.0 / x
    lo = sigma[i, a] * inv + wm[a]
    if ya < 1.0:
        lo = min(lo, sigma[i, b] * inv + wm[b])
    tol = 64 * 2.220446049250313e-16 * (1.0 + abs(lo))
    for k in range(sigma.shape[1]):
        if allowed[k] and sigma[i, k] * inv + wm[k] > lo + tol:
            a, b, ya, xr, lin, _ = _br_walk(sigma, i, wm, allowed, sigma.shape[1] + 1)
            return a, b, ya, xr, lin
    return a, b, ya, xr, lin


@njit(cache=True, error_model="numpy")
def _exp_w(wm, allowed):
    """``exp(wm - max wm)`` over the allowed classes: ranks the vertices ``s_k exp(wm_k)``
    without a logarithm per entry (an underflow only costs the exact fallback of a row)."""
    K = wm.shape[0]
    top = -_INF
    for k in range(K):
        if allowed[k] and wm[k] > top:
            top = wm[k]
    ew = np.zeros(K)
    for k in range(K):
        if allowed[k]:
            ew[k] = math.exp(wm[k] - top)
    return ew


@njit(cache=True, error_model="numpy")
def best_responses(sigma, wm, allowed):
    """Exact best responses of every row.

    Parameters
    ----------
    sigma : ndarray of shape (N, K)
        Predictions, rows on the simplex.
    wm : ndarray of shape (K,)
        Dual variables; entries of classes that may not be chosen are ignored.
    allowed : ndarray of bool, shape (K,)
        Classes a row may choose (forward fairness: the classes of positive prior).

    Returns
    -------
    Y : ndarray of shape (N, K)
        A minimiser of :math:`-\\ln \\sigma_i^\\top y - w^\\top y` per row (a vertex or an edge).
    psi : ndarray of shape (N,)
        The row minima.
    """
    N, K = sigma.shape
    Y = np.zeros((N, K))
    psi = np.empty(N)
    ew = _exp_w(wm, allowed)
    for i in range(N):
        a, b, ya, xr, li = _br_row(sigma, i, ew, wm, allowed)
        Y[i, a] += ya
        Y[i, b] += 1.0 - ya
        psi[i] = -math.log(xr) - li if xr > 0 else _INF
    return Y, psi


# ----- objective, dual and certificate -----------------------------------------------------------
@njit(cache=True, error_model="numpy")
def _xlogy(x, y):
    if x == 0.0:
        return 0.0
    return x * math.log(y)


@njit(cache=True, error_model="numpy")
def _phi(s, u, lam, n, forward):
    """Phi(s) = lam * KL with ybar = s / N (as skcce.losses: xlogy conventions)."""
    total = 0.0
    for k in range(s.shape[0]):
        yb = s[k] / n
        if forward:
            total += _xlogy(yb, yb) - _xlogy(yb, u[k])
        else:
            total += _xlogy(u[k], u[k]) - _xlogy(u[k], yb)
    return lam * total


@njit(cache=True, error_model="numpy")
def objective(sigma, Y, u, lam, forward):
    """F(Y) (may be ``+inf``)."""
    N, K = sigma.shape
    p, acc = 1.0, 0.0  # sum of ln x_i (see _log_add)
    s = np.zeros(K)
    for i in range(N):
        x = 0.0
        for k in range(K):
            x += Y[i, k] * sigma[i, k]
            s[k] += Y[i, k]
        p, acc = _log_add(p, acc, x)
    return -(acc + math.log(p)) + _phi(s, u, lam, N, forward)


@njit(cache=True, error_model="numpy")
def initial_w(s, u, lam, n, forward):
    """The multiplier of ``Problem.initial_w``: ``-grad Phi`` at the column sums (clamped)."""
    K = s.shape[0]
    floor = max(1e-3, 1e-6 * n)
    tiny = np.finfo(np.float64).tiny
    w = np.zeros(K)
    for k in range(K):
        if u[k] <= 0:
            continue
        sk = max(s[k], floor)
        if forward:
            w[k] = -(lam / n) * (math.log(sk / (n * max(u[k], tiny))) + 1.0)
        else:
            w[k] = lam * u[k] / sk
    return w


@njit(cache=True, error_model="numpy")
def dual_value(psi_sum, w, u, lam, n, forward):
    """q(w) = sum_i psi_i + Phi(s*(w)) + w's*(w)."""
    K = w.shape[0]
    sd = np.zeros(K)
    for k in range(K):
        if u[k] <= 0:
            continue
        if forward:
            sd[k] = n * u[k] * math.exp(-n * w[k] / lam - 1.0)
        else:
            sd[k] = lam * u[k] / w[k]
    ws = 0.0
    for k in range(K):
        ws += w[k] * sd[k]
    return psi_sum + _phi(sd, u, lam, n, forward) + ws


@njit(cache=True, error_model="numpy")
def _certificate_into(sigma, Y, u, lam, forward, ba, bb, bya):
    """:func:`certificate`, also writing each row's best response ``(ba, bb, bya)``."""
    N, K = sigma.shape
    s = np.zeros(K)
    for i in range(N):
        for k in range(K):
            s[k] += Y[i, k]
    q, w = _dual_at(sigma, s, u, lam, forward, ba, bb, bya)
    return objective(sigma, Y, u, lam, forward), q, w


@njit(cache=True, error_model="numpy")
def _dual_at(sigma, s, u, lam, forward, ba, bb, bya):
    """``(q(w), w)`` at the multiplier ``w = initial_w(s)`` of the column sums ``s``, writing
    each row's best response ``(ba, bb, bya)``."""
    N, K = sigma.shape
    allowed = np.ones(K, dtype=np.bool_)
    if forward:
        for k in range(K):
            allowed[k] = u[k] > 0
    w = initial_w(s, u, lam, N, forward)
    p, acc, lin = 1.0, 0.0, 0.0  # the row minima -ln x_i - lin_i, summed (see _log_add)
    ew = _exp_w(w, allowed)
    for i in range(N):
        a, b, ya, xr, li = _br_row(sigma, i, ew, w, allowed)
        ba[i] = a
        bb[i] = b
        bya[i] = ya
        p, acc = _log_add(p, acc, xr)
        lin += li
    return dual_value(-(acc + math.log(p)) - lin, w, u, lam, N, forward), w


@njit(cache=True, error_model="numpy", nogil=True)
def certificate(sigma, Y, u, lam, forward):
    """``(F(Y), q(w), w)`` with ``w = initial_w(column sums of Y)``; the gap is ``F - q``."""
    N = sigma.shape[0]
    ba = np.empty(N, dtype=np.int64)
    bb = np.empty(N, dtype=np.int64)
    return _certificate_into(sigma, Y, u, lam, forward, ba, bb, np.empty(N))


@njit(cache=True, error_model="numpy")
def _dense(sup, cnt, yv, K):
    """The labels of compact supports as an (N, K) array, each row renormalised to sum 1."""
    N = cnt.shape[0]
    Y = np.zeros((N, K))
    for i in range(N):
        tot = 0.0
        for q in range(cnt[i]):
            tot += yv[i, q]
        for q in range(cnt[i]):
            Y[i, sup[i, q]] = yv[i, q] / tot
    return Y


@njit(cache=True, error_model="numpy")
def _unfinished(Y0, bsup, bcnt, byv, best_val, best_gap, n_iter, n_pass):
    """The uncertified result: the best certified supports so far, or the warm start."""
    K = Y0.shape[1]
    Y = Y0.copy() if bcnt.shape[0] == 0 else _dense(bsup, bcnt, byv, K)
    return Y, best_val, best_gap, n_iter, False, n_pass


@njit(cache=True, error_model="numpy")
def _certificate_sparse(sigma, sup, cnt, yv, u, lam, forward, ba, bb, bya, s):
    """``(F, q)`` of :func:`certificate` for the labels ``_dense(sup, cnt, yv)``, read from the
    supports (the column sums and ``F`` cost O(N x support); the best responses, written to
    ``(ba, bb, bya)``, read all of ``sigma``). ``s`` is a work array of shape (K,)."""
    N, K = sigma.shape
    for k in range(K):
        s[k] = 0.0
    p, acc = 1.0, 0.0  # sum of ln x_i (see _log_add)
    for i in range(N):
        tot = 0.0
        for q in range(cnt[i]):
            tot += yv[i, q]
        x = 0.0
        for q in range(cnt[i]):
            y = yv[i, q] / tot
            x += y * sigma[i, sup[i, q]]
            s[sup[i, q]] += y
        p, acc = _log_add(p, acc, x)
    dual, _ = _dual_at(sigma, s, u, lam, forward, ba, bb, bya)
    return -(acc + math.log(p)) + _phi(s, u, lam, N, forward), dual


# ----- the interior-point column-generation solver ---------------------------------------------
@njit(cache=True, error_model="numpy")
def _chol_factor(A, L, n):
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
def _chol_inverse(A, m, L, Li, G):
    """G = inverse of the leading m x m block of a symmetric positive definite A (Cholesky;
    ``L``, ``Li`` are work arrays). Returns False when A is not positive definite."""
    if not _chol_factor(A, L, m):
        return False
    for j in range(m):
        Li[j, j] = 1.0 / L[j, j]
    for j in range(m):  # Li = L^-1 (lower triangular)
        for i in range(j + 1, m):
            t = 0.0
            for p in range(j, i):
                t -= L[i, p] * Li[p, j]
            Li[i, j] = t * Li[i, i]
    for i in range(m):  # G = Li' Li
        for j in range(i + 1):
            t = 0.0
            for p in range(i, m):
                t += Li[p, i] * Li[p, j]
            G[i, j] = t
            G[j, i] = t
    return True


@njit(cache=True, error_model="numpy")
def _chol_apply(L, x):
    """Solve ``L L' v = x`` in place, ``L`` from :func:`_chol_factor`."""
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


@njit(cache=True, error_model="numpy")
def _add_class(i, k, yv, zv, sup, cnt, mu):
    """Pricing: put class k in row i's support (the caller made room), with a little mass
    taken from the row's largest entry."""
    c = cnt[i]
    rq = 0
    for q in range(c):
        if yv[i, q] > yv[i, rq]:
            rq = q
    eps = min(_EPS_NEW, 0.5 * yv[i, rq])
    yv[i, rq] -= eps
    yv[i, c] = eps
    sup[i, c] = k
    cnt[i] = c + 1
    m = max(mu, 1e-12)
    zv[i, c] = m / eps
    if c == 1:  # the row was fixed at a vertex: its old class becomes a variable too
        zv[i, rq] = m / yv[i, rq]


@njit(cache=True, error_model="numpy")
def _prune(sup, cnt, yv, zv, multi, n_multi, ylo, zhi, held):
    """Drop from the supports of the rows ``multi[:n_multi]`` the entries with ``y < ylo`` and
    ``z > zhi`` (bound, by complementarity), renormalising each row. A row keeps its largest
    entry, and a class keeps at least one row (its column sum stays positive). ``held[k]`` is
    the number of rows with class ``k`` in their support (updated)."""
    for t in range(n_multi):
        i = multi[t]
        m = cnt[i]
        top = 0
        for q in range(1, m):
            if yv[i, q] > yv[i, top]:
                top = q
        keep = sup[i, top]
        q = 0
        dropped = False
        while q < m:
            k = sup[i, q]
            if k != keep and yv[i, q] < ylo and zv[i, q] > zhi and held[k] > 1:
                held[k] -= 1
                m -= 1
                sup[i, q] = sup[i, m]
                yv[i, q] = yv[i, m]
                zv[i, q] = zv[i, m]
                dropped = True
            else:
                q += 1
        if dropped:
            cnt[i] = m
            if m == 1:
                yv[i, 0] = 1.0
            else:
                tot = 0.0
                for q in range(m):
                    tot += yv[i, q]
                for q in range(m):
                    yv[i, q] /= tot


@njit(cache=True, error_model="numpy")
def _has(sup, cnt, i, k):
    for q in range(cnt[i]):
        if sup[i, q] == k:
            return True
    return False


@njit(cache=True, error_model="numpy")
def _widen(a, width):
    """``a`` with zero columns appended up to ``width`` (element loops: a slice assignment
    would make numba compile its broadcasting error message, seconds of a cold compile)."""
    n, m = a.shape
    out = np.zeros((n, width), dtype=a.dtype)
    for i in range(n):
        for j in range(m):
            out[i, j] = a[i, j]
    return out


@njit(cache=True, error_model="numpy")
def _widen_all(sup, yv, zv, dyv, dzv, cv, width):
    """:func:`_widen` of every per-row support array of :func:`ipm_solve`."""
    return (
        _widen(sup, width), _widen(yv, width), _widen(zv, width), _widen(dyv, width),
        _widen(dzv, width), _widen(cv, width),
    )  # fmt: skip


@njit(cache=True, error_model="numpy")
def _interior_start(Y0, sup, cnt, yv, zv, mu):
    """An interior point on the supports: each row's warm start ``Y0`` restricted to its
    support and renormalised, mixed half and half with the uniform label there, and duals
    ``z = mu / y`` (a fixed row, one class, has no dual)."""
    for i in range(sup.shape[0]):
        c = cnt[i]
        tot = 0.0
        for q in range(c):
            tot += Y0[i, sup[i, q]]
        for q in range(c):
            base = Y0[i, sup[i, q]] / tot if tot > 0 else 1.0 / c
            yv[i, q] = 0.5 * base + 0.5 / c
            zv[i, q] = mu / yv[i, q] if c > 1 else 0.0


@njit(cache=True, error_model="numpy")
def _put(sup, cnt, i, k):
    """Append class k to row i's support unless it is there (the caller made room)."""
    if not _has(sup, cnt, i, k):
        sup[i, cnt[i]] = k
        cnt[i] += 1


@njit(cache=True, error_model="numpy")
def _initial_supports(sigma, w, allowed, lam, sup, cnt):
    """Each row's first support (into ``sup``, ``cnt``): its best vertices at the multiplier
    ``w`` (the largest ``sigma_k exp(w_k)``, at most ``_TOP``; with ``lam <= N`` those within
    ``_NEAR`` of the best only), and with ``lam > N`` its exact best response too. Returns
    ``psi0``, the sum of the row minima at ``w`` (with ``lam <= N``, of the values at the
    best vertices: upper bounds)."""
    N, K = sigma.shape
    score = np.empty(K)
    top = min(_TOP, K)
    near = _NEAR if lam <= N else 0.0  # a strong pull mixes classes: every best vertex
    ew = _exp_w(w, allowed)
    # psi0: the row minima at the warm start's multiplier, for the dual value that decides the
    # first pricing (below). With lam <= N a row starts from its best vertices only: the walk
    # to its exact best response is skipped, and the value at its best vertex (an upper bound
    # on the row minimum) stands in for it. That value only steers the first pricing; every
    # certificate computes the exact best responses.
    p0, acc0, lin0 = 1.0, 0.0, 0.0  # psi0 = -(acc0 + ln p0) - lin0 (see _log_add)
    for i in range(N):
        cnt[i] = 0
        if near == 0.0:  # the exact best response (a vertex or an edge) is in the support
            a, b, ya, xr, li = _br_row(sigma, i, ew, w, allowed)
            p0, acc0 = _log_add(p0, acc0, xr)
            lin0 += li
            _put(sup, cnt, i, a)
            if ya < 1.0:
                _put(sup, cnt, i, b)
        # The best score first (a running maximum: selects, no branch to mispredict), then
        # the classes within near x of it: usually one or two, taken in a second pass; more
        # than _TOP (an uncertain row) take the _TOP best by a selection.
        t1 = 0.0
        k1 = -1
        for k in range(K):
            v = sigma[i, k] * ew[k] if allowed[k] else 0.0
            score[k] = v
            better = v > t1
            t1 = v if better else t1
            k1 = k if better else k1
        if k1 >= 0:
            lo = near * t1
            n_near = 0
            for k in range(K):
                if score[k] > 0 and score[k] >= lo:
                    n_near += 1
            if n_near <= top:
                _put(sup, cnt, i, k1)
                for k in range(K):
                    if score[k] > 0 and score[k] >= lo:
                        _put(sup, cnt, i, k)
            else:
                for _ in range(top):
                    best = 0
                    for k in range(1, K):
                        if score[k] > score[best]:
                            best = k
                    if not score[best] > 0:
                        break
                    score[best] = 0.0
                    _put(sup, cnt, i, best)
        if cnt[i] == 0:  # every score underflowed to 0: the row's largest allowed sigma
            for k in range(K):
                if allowed[k] and (cnt[i] == 0 or sigma[i, k] > sigma[i, sup[i, 0]]):
                    sup[i, 0] = k
                    cnt[i] = 1
        if near > 0.0:  # the value at the best vertex, the first one taken above
            a = sup[i, 0]
            p0, acc0 = _log_add(p0, acc0, sigma[i, a])
            lin0 += w[a]
    return -(acc0 + math.log(p0)) - lin0


@njit(cache=True, error_model="numpy", nogil=True)
def ipm_solve(sigma, u, lam, forward, Y0, tol, max_iter):
    """Certified optimum of F by an interior-point method with column generation.

    The supports are stored compactly (row ``i`` holds ``cnt[i]`` classes ``sup[i, :cnt[i]]``
    with values ``yv[i, :cnt[i]]``), so an iteration touches O(N x support) memory; only the
    certificate reads all N x K entries.

    Parameters
    ----------
    sigma : ndarray of shape (N, K)
        Predictions, rows on the simplex (validated by the caller).
    u : ndarray of shape (K,)
        Prior (a distribution).
    lam : float
        Fairness weight (> 0).
    forward : bool
        ``KL(ybar||u)`` (True) or ``KL(u||ybar)`` (False).
    Y0 : ndarray of shape (N, K)
        Warm start (rows on the simplex); its column sums give the first multiplier.
    tol : float
        Relative certified gap: stop when ``F(Y) - q(w) <= tol * max(|F(Y)|, 1)``.
    max_iter : int
        Interior-point iterations at most.

    Returns
    -------
    Y : ndarray of shape (N, K)
    value : float
        F(Y).
    gap : float
        Certified ``F(Y) - q(w)``.
    n_iter : int
    certified : bool
    n_pass : int
        Passes of exact best responses over the data (certificates and pricing).
    """
    N, K = sigma.shape
    allowed = np.ones(K, dtype=np.bool_)
    if forward:
        for k in range(K):
            allowed[k] = u[k] > 0
    act = u > 0
    # --- initial supports: best vertices at the warm start's multiplier (+ best response) ------
    s = np.zeros(K)
    for i in range(N):
        for k in range(K):
            s[k] += Y0[i, k]
    w = initial_w(s, u, lam, N, forward)
    W = min(K, _WIDTH)
    sup = np.zeros((N, W), dtype=np.int64)
    cnt = np.zeros(N, dtype=np.int64)
    yv = np.zeros((N, W))
    zv = np.zeros((N, W))
    psi0 = _initial_supports(sigma, w, allowed, lam, sup, cnt)
    if lam > _DENSE_LAM * N:  # a strong pull mixes many classes in every row: all of them
        if W < K:
            W = K
            sup = _widen(sup, W)
            yv = _widen(yv, W)
            zv = _widen(zv, W)
        for i in range(N):
            for k in range(K):
                if allowed[k]:
                    _put(sup, cnt, i, k)
    # every active class must receive mass (else KL(u||ybar) is infinite / its gradient is)
    covered = np.zeros(K, dtype=np.bool_)
    for i in range(N):
        for q in range(cnt[i]):
            covered[sup[i, q]] = True
    for k in range(K):
        if act[k] and not covered[k]:
            best = 0
            for i in range(1, N):
                if sigma[i, k] > sigma[best, k]:
                    best = i
            if cnt[best] == W:
                W = min(K, 2 * W)
                sup = _widen(sup, W)
                yv = _widen(yv, W)
                zv = _widen(zv, W)
            sup[best, cnt[best]] = k
            cnt[best] += 1
    _interior_start(Y0, sup, cnt, yv, zv, _MU0)

    # The first certificate is due at iteration 0, for pricing: it adds classes when the
    # gap is large against the start's complementarity (yz = _MU0 x its entries). The warm
    # start's own gap predicts that at the cost of one objective, and when it is small the
    # certificate (a pass of exact best responses) waits for the next due one.
    gap0 = objective(sigma, Y0, u, lam, forward) - dual_value(psi0, w, u, lam, N, forward)
    nvar0 = 0
    for i in range(N):
        if cnt[i] > 1:
            nvar0 += cnt[i]
    price0 = not gap0 < _EARLY * _MU0 * nvar0  # a NaN gap prices too
    gs = np.empty(K)  # (sigma_j - sigma_r) / x on the reduced support
    idx = np.empty(K, dtype=np.int64)
    B = np.zeros((K, K))
    Lw = np.zeros((K, K))
    Liw = np.zeros((K, K))
    G = np.zeros((K, K))
    M = np.zeros((K, K))
    c_vec = np.zeros(K)
    phi = np.zeros(K)
    Dg = np.zeros(K)
    x = np.empty(N)
    basic = np.zeros(N, dtype=np.int64)  # position of each row's largest entry
    dyv = np.zeros((N, W))
    dzv = np.zeros((N, W))
    cv = np.zeros((N, W))
    S = np.empty((K, K))
    LS = np.zeros((K, K))  # its Cholesky factor
    dh = np.empty(K)
    bv = np.empty((N, 0))
    iy = np.empty((N, 0))
    rb = np.empty((N, 0))
    # per-row inverses of the reduced blocks, stored flat
    goff = np.zeros(N, dtype=np.int64)
    gbuf = np.zeros(1)

    scale = -1.0  # of the test for a certificate (see the loop)
    best_gap = _INF
    sc = np.empty(K)  # the certificate's column sums
    best_val = _INF
    bsup = sup[:0]  # the best certified supports so far (none yet: the warm start)
    bcnt = cnt[:0]
    byv = yv[:0]
    n_iter = 0
    n_pass = 1  # passes of exact best responses over the data (certificates, pricing)
    multi = np.empty(N, dtype=np.int64)  # the rows of more than one class (set per state)
    held = np.zeros(K, dtype=np.int64)  # rows holding each class (set per state, for _prune)
    ba = np.zeros(N, dtype=np.int64)
    bb = np.zeros(N, dtype=np.int64)
    bya = np.ones(N)
    grown = False  # pricing added classes after the start: from then on supports only grow
    while True:
        # --- state: x, s, mu ------------------------------------------------------------------
        for k in range(K):
            s[k] = 0.0
            held[k] = 0
        nvar = 0
        yz = 0.0
        n_multi = 0
        for i in range(N):
            xi = 0.0
            for q in range(cnt[i]):
                k = sup[i, q]
                xi += sigma[i, k] * yv[i, q]
                s[k] += yv[i, q]
                held[k] += 1
                if cnt[i] > 1:
                    yz += yv[i, q] * zv[i, q]
            if cnt[i] > 1:
                nvar += cnt[i]
                multi[n_multi] = i
                n_multi += 1
            x[i] = xi
        mu = yz / nvar if nvar > 0 else 0.0
        # the full certificate costs a pass over all N x K entries: it is evaluated when the
        # restricted problem is nearly solved, and every few iterations (for pricing)
        # (the scale of the test is the last certified F, or the restricted objective once)
        due = n_iter % _PRICE_EVERY == 0 and (n_iter > 0 or price0)
        do_cert = True
        if nvar > 0 and n_iter < max_iter and not due:
            if scale < 0:
                p, acc = 1.0, 0.0
                for i in range(N):
                    p, acc = _log_add(p, acc, x[i])
                scale = max(abs(_phi(s, u, lam, N, forward) - acc - math.log(p)), 1.0)
            do_cert = not yz > tol * scale
        if do_cert:
            # --- certificate on the labels as they are returned (rows renormalised), read
            # from the supports: O(N x support) besides the best responses' pass over sigma
            F, q = _certificate_sparse(sigma, sup, cnt, yv, u, lam, forward, ba, bb, bya, sc)
            n_pass += 1
            gap = F - q
            if gap != gap:
                gap = _INF
            if math.isfinite(F):
                scale = max(abs(F), 1.0)
            if math.isfinite(F) and gap <= tol * max(abs(F), 1.0):
                return _dense(sup, cnt, yv, K), F, gap, n_iter, True, n_pass
            if math.isfinite(F) and gap < best_gap:
                best_gap = gap
                best_val = F
                bsup = sup.copy()
                bcnt = cnt.copy()
                byv = yv.copy()
            if n_iter >= max_iter:
                return _unfinished(Y0, bsup, bcnt, byv, best_val, best_gap, n_iter, n_pass)
            # --- pricing: the restricted problem is (nearly) solved, the full one is not -----
            if nvar == 0 or (math.isfinite(gap) and yz <= 0.1 * gap):
                # A class priced in late, at a nearly solved restricted problem (mu tiny), starts
                # its row far from the central path: the row is re-centred at a complementarity
                # of gap / nvar (at most the first one), not left at mu, which otherwise took
                # about 10 iterations to recover.
                mu_new = mu
                if nvar > 0 and math.isfinite(gap):
                    mu_new = max(mu, min(gap / nvar, _MU0))
                added = 0
                for i in range(N):  # the certificate's best responses
                    a = ba[i]
                    b = bb[i]
                    ya = bya[i]
                    for t in range(2):
                        k = a if t == 0 else b
                        if (t == 1 and not ya < 1.0) or _has(sup, cnt, i, k):
                            continue
                        if cnt[i] == W:
                            W = min(K, 2 * W)
                            sup, yv, zv, dyv, dzv, cv = _widen_all(sup, yv, zv, dyv, dzv, cv, W)
                        _add_class(i, k, yv, zv, sup, cnt, mu_new)
                        added += 1
                        for q in range(cnt[i]):
                            zv[i, q] = max(zv[i, q], mu_new / yv[i, q])
                if added > _DENSE_ROWS * N:
                    # Most rows lacked a class: the optimum mixes many classes per row (a
                    # large lam). Pricing one class a row per pass would take up to K passes;
                    # every row gets every allowed class at once instead.
                    if W < K:
                        W = K
                        sup, yv, zv, dyv, dzv, cv = _widen_all(sup, yv, zv, dyv, dzv, cv, W)
                    for i in range(N):
                        for k in range(K):
                            if allowed[k] and not _has(sup, cnt, i, k):
                                _add_class(i, k, yv, zv, sup, cnt, mu)
                                added += 1
                    # and a fresh interior start on them (as at the start, centred at the
                    # gap's complementarity): the iterate with its new classes at _EPS_NEW
                    # started far from the central path (6 tied problems at lam = 4N: 17.0
                    # -> 15.0 iterations plus passes on average)
                    _interior_start(Y0, sup, cnt, yv, zv, mu_new)
                if added == 0 and nvar == 0:
                    return _unfinished(Y0, bsup, bcnt, byv, best_val, best_gap, n_iter, n_pass)
                if added > 0 and n_iter > 0:
                    grown = True
                if added > 0:
                    continue  # recompute the state (no iteration spent)
        n_iter += 1
        # --- the Newton system: rows eliminated onto the column sums ---------------------------
        for k in range(K):
            if act[k] and s[k] > 0:
                if forward:
                    phi[k] = lam / N * (math.log(s[k] / (N * u[k])) + 1.0)
                    Dg[k] = lam / (N * s[k])
                else:
                    phi[k] = -lam * u[k] / s[k]
                    Dg[k] = lam * u[k] / (s[k] * s[k])
            else:
                phi[k] = 0.0
                Dg[k] = 0.0
            for j in range(K):
                M[k, j] = 0.0
        total = 0
        for t in range(n_multi):
            i = multi[t]
            goff[i] = total
            total += (cnt[i] - 1) * (cnt[i] - 1)
        if gbuf.shape[0] < total:
            gbuf = np.zeros(total)
        ok = True
        for t in range(n_multi):
            i = multi[t]
            m = cnt[i]
            rq = 0
            for q in range(m):
                if yv[i, q] > yv[i, rq]:
                    rq = q
            basic[i] = rq
            r = sup[i, rq]
            xi = x[i]
            dr = zv[i, rq] / yv[i, rq]
            n1 = 0
            for q in range(m):
                if q == rq:
                    continue
                idx[n1] = sup[i, q]
                gs[n1] = (sigma[i, sup[i, q]] - sigma[i, r]) / xi
                n1 += 1
            for p1 in range(n1):
                for p2 in range(n1):
                    B[p1, p2] = gs[p1] * gs[p2] + dr
                q = p1 if p1 < rq else p1 + 1
                # (+ _REG: a row whose classes tie has no curvature of its own; as z -> 0 on
                # an interior optimum its block would become singular)
                B[p1, p1] += zv[i, q] / yv[i, q] + _REG
            if n1 == 1:  # the common small blocks (2 or 3 classes a row) in closed form
                if not B[0, 0] > 0:
                    ok = False
                    break
                G[0, 0] = 1.0 / B[0, 0]
            elif n1 == 2:
                det = B[0, 0] * B[1, 1] - B[0, 1] * B[0, 1]
                if not (B[0, 0] > 0 and det > 0):
                    ok = False
                    break
                idet = 1.0 / det
                G[0, 0] = B[1, 1] * idet
                G[1, 1] = B[0, 0] * idet
                G[0, 1] = -B[0, 1] * idet
                G[1, 0] = G[0, 1]
            elif not _chol_inverse(B, n1, Lw, Liw, G):
                ok = False
                break
            o = goff[i]
            all_sum = 0.0
            for p1 in range(n1):
                row_sum = 0.0
                for p2 in range(n1):
                    g = G[p1, p2]
                    gbuf[o + p1 * n1 + p2] = g
                    M[idx[p1], idx[p2]] += g
                    row_sum += g
                M[idx[p1], r] -= row_sum
                M[r, idx[p1]] -= row_sum
                all_sum += row_sum
            M[r, r] += all_sum
        if not ok:
            return _unfinished(Y0, bsup, bcnt, byv, best_val, best_gap, n_iter, n_pass)
        # the Schur complement on the column sums, I + D^1/2 M D^1/2, factored once for the
        # predictor and the corrector (a slightly regularised system if rounding cost its
        # definiteness)
        for a in range(K):
            dh[a] = math.sqrt(Dg[a])
        for a in range(K):
            for b in range(K):
                S[a, b] = dh[a] * M[a, b] * dh[b]
            S[a, a] += 1.0
        if not _chol_factor(S, LS, K):
            big = 0.0
            for k in range(K):
                big = max(big, S[k, k])
            for k in range(K):
                S[k, k] += 1e-12 * big
            if not _chol_factor(S, LS, K):
                return _unfinished(Y0, bsup, bcnt, byv, best_val, best_gap, n_iter, n_pass)
        # the entries' terms shared by both directions: sigma_k / x_i - phi_k and 1 / y
        if bv.shape[1] != W:
            bv = np.empty((N, W))
            iy = np.empty((N, W))
            rb = np.empty((N, W))
        for t in range(n_multi):
            i = multi[t]
            ix = 1.0 / x[i]
            for q in range(cnt[i]):
                k = sup[i, q]
                bv[i, q] = sigma[i, k] * ix - phi[k]
                iy[i, q] = 1.0 / yv[i, q]
        # Mehrotra: affine-scaling predictor, then the centred, second-order corrected step
        ap, ad = _direction(
            yv, zv, bv, iy, sup, cnt, basic, gbuf, goff, LS, dh, 0.0, cv, 0.0, dyv, dzv, rb,
            idx, c_vec, 1.0, multi, n_multi,
        )  # fmt: skip
        if not ap >= 0:
            return _unfinished(Y0, bsup, bcnt, byv, best_val, best_gap, n_iter, n_pass)
        mu_aff = 0.0
        for t in range(n_multi):
            i = multi[t]
            for q in range(cnt[i]):
                mu_aff += (yv[i, q] + ap * dyv[i, q]) * (zv[i, q] + ad * dzv[i, q])
                cv[i, q] = dyv[i, q] * dzv[i, q]
        mu_aff /= nvar
        cen = min(max((mu_aff / mu) ** 3, 0.0), 1.0) if mu > 0 else 0.0
        tau = max(_TAU, 1.0 - mu)
        ap, ad = _direction(
            yv, zv, bv, iy, sup, cnt, basic, gbuf, goff, LS, dh, cen * mu, cv, 1.0, dyv, dzv,
            rb, idx, c_vec, tau, multi, n_multi,
        )  # fmt: skip
        if not ap >= 0:
            return _unfinished(Y0, bsup, bcnt, byv, best_val, best_gap, n_iter, n_pass)
        # Entries that the step drives to their bound (y small, z large, against the next
        # complementarity) leave the supports: later iterations solve smaller rows, and a class
        # dropped too early is priced back by a certificate.
        pruning = not grown and cen * mu >= _PRUNE_MU
        root = math.sqrt(max(cen * mu, 1e-300))
        ylo = _PRUNE * root if pruning else -1.0
        zhi = root / _PRUNE
        bound = 0
        for t in range(n_multi):
            i = multi[t]
            for q in range(cnt[i]):
                yv[i, q] += ap * dyv[i, q]
                zv[i, q] += ad * dzv[i, q]
                if not yv[i, q] > 0:  # rounding at the boundary: stay interior
                    yv[i, q] = 1e-300
                if not zv[i, q] > 0:
                    zv[i, q] = 1e-300
                if yv[i, q] < ylo and zv[i, q] > zhi:
                    bound += 1
        if bound > 0:
            _prune(sup, cnt, yv, zv, multi, n_multi, ylo, zhi, held)


@njit(cache=True, error_model="numpy")
def _direction(
    yv, zv, bv, iy, sup, cnt, basic, gbuf, goff, LS, dh, target, cv, corrected, dyv, dzv, rb,
    idx, c_vec, tau, multi, n_multi,
):  # fmt: skip
    """One interior-point direction given the factored rows (``gbuf``) and the Cholesky factor
    ``LS`` of the Schur matrix.

    ``bv[i, q] = sigma_ik / x_i - phi_k`` and ``iy = 1 / yv`` are the entries' terms shared by
    both directions of an iteration; ``rb`` holds each row's reduced right-hand side between
    the two sweeps. The complementarity target of entry ``(i, q)`` is ``target - cv[i, q]``
    (Mehrotra's second-order term when ``corrected > 0``; a float flag, as a bool constant
    would make numba compile the function once per value). Writes ``dyv``, ``dzv``; returns
    the primal and dual step lengths to ``tau`` of the way to the boundary (``(-1, -1)`` on a
    failure). Only the rows ``multi[:n_multi]`` (those of more than one class) move.
    """
    K = c_vec.shape[0]
    for k in range(K):
        c_vec[k] = 0.0
    # sweep 0: c = sum_i P_i' G_i rhs_i (each row's rhs kept in rb)
    for t in range(n_multi):
        i = multi[t]
        m = cnt[i]
        rq = basic[i]
        r = sup[i, rq]
        tr = target - cv[i, rq] if corrected > 0.0 else target
        rr = bv[i, rq] + tr * iy[i, rq]
        n1 = 0
        for q in range(m):
            if q == rq:
                continue
            idx[n1] = sup[i, q]
            tk = target - cv[i, q] if corrected > 0.0 else target
            rb[i, n1] = bv[i, q] + tk * iy[i, q] - rr
            n1 += 1
        o = goff[i]
        tot = 0.0
        for p1 in range(n1):
            v = 0.0
            for p2 in range(n1):
                v += gbuf[o + p1 * n1 + p2] * rb[i, p2]
            tot += v
            c_vec[idx[p1]] += v
        c_vec[r] -= tot
    for k in range(K):
        c_vec[k] *= dh[k]
    _chol_apply(LS, c_vec)
    for k in range(K):
        c_vec[k] *= dh[k]  # now p
    # sweep 1: back substitution with p
    ap = 1.0
    ad = 1.0
    for t in range(n_multi):
        i = multi[t]
        m = cnt[i]
        rq = basic[i]
        pr = c_vec[sup[i, rq]]
        o = goff[i]
        n1 = m - 1
        for p2 in range(n1):  # the right-hand side with p (rb is not needed after this)
            rb[i, p2] -= c_vec[sup[i, p2 if p2 < rq else p2 + 1]] - pr
        tot = 0.0
        for p1 in range(n1):
            v = 0.0
            for p2 in range(n1):
                v += gbuf[o + p1 * n1 + p2] * rb[i, p2]
            tot += v
            dyv[i, p1 if p1 < rq else p1 + 1] = v
        dyv[i, rq] = -tot
        for q in range(m):
            dy = dyv[i, q]
            tk = target - cv[i, q] if corrected > 0.0 else target
            z = zv[i, q]
            dz = tk * iy[i, q] - z - z * dy * iy[i, q]
            dzv[i, q] = dz
            if not (math.isfinite(dy) and math.isfinite(dz)):
                return -1.0, -1.0
            if dy < 0:
                ap = min(ap, -tau * yv[i, q] / dy)
            if dz < 0:
                ad = min(ad, -tau * z / dz)
    return ap, ad


# ----- the paper's EM ----------------------------------------------------------------------------
@njit(cache=True, error_model="numpy")
def _mstep_row(sig, a, lam, out):
    """M-step (d) for one row, every case of the supplement's section 3 (as skcce.solvers._em)."""
    K = sig.shape[0]
    tiny = np.finfo(np.float64).tiny
    A = 0.0
    for k in range(K):
        A += a[k]
    if not A > 0:  # no weight: one-hot arg max of sigma
        c = 0
        for k in range(1, K):
            if sig[k] > sig[c]:
                c = k
        for k in range(K):
            out[k] = 0.0
        out[c] = 1.0
        return
    L = 1.0 + lam * A
    lo = -_INF
    hi = -_INF
    has_zero = False
    for k in range(K):
        if a[k] > 0:
            lo = max(lo, sig[k] / (L - lam * a[k]))
            hi = max(hi, sig[k])
        else:
            has_zero = True
    x = lo
    for _ in range(_EM_NEWTON):
        f = -1.0
        fp = 0.0
        for k in range(K):
            if a[k] > 0:
                den = L - sig[k] / x
                t = lam * a[k] / den
                f += t
                fp += t / den * sig[k]
        xn = x + f * x * x / max(fp, tiny)
        xn = min(max(xn, lo), hi)
        if xn == x:
            break
        x = xn
    tot = 0.0
    for k in range(K):
        if a[k] > 0:
            out[k] = max(lam * a[k] / (L - sig[k] / x), 0.0)
        else:
            out[k] = 0.0
        tot += out[k]
    finite = True
    for k in range(K):
        out[k] /= tot
        if not math.isfinite(out[k]):
            finite = False
    if not finite:
        c = -1
        for k in range(K):
            if a[k] > 0 and (c < 0 or sig[k] > sig[c]):
                c = k
        for k in range(K):
            out[k] = 0.0
        out[c] = 1.0
    if has_zero:
        c = -1
        smax_pos = -_INF
        for k in range(K):
            if a[k] <= 0:
                if c < 0 or sig[k] > sig[c]:
                    c = k
            else:
                smax_pos = max(smax_pos, sig[k])
        sc = sig[c]
        yc = 1.0
        for k in range(K):
            if a[k] > 0:
                yc -= lam * a[k] / (L * (1.0 - sig[k] / sc))
        if sc > smax_pos and yc > 0:
            for k in range(K):
                out[k] = lam * a[k] / (L * (1.0 - sig[k] / sc)) if a[k] > 0 else 0.0
            out[c] = yc


@njit(cache=True, error_model="numpy")
def em_step(sigma, Y, u, lam):
    """One EM iteration: E-step ``a_ik = u_k y_ik / s_k`` and the exact M-step of every row."""
    N, K = sigma.shape
    s = np.zeros(K)
    for i in range(N):
        for k in range(K):
            s[k] += Y[i, k]
    scale = np.zeros(K)
    for k in range(K):
        if s[k] > 0:
            scale[k] = u[k] / s[k]
    out = np.empty((N, K))
    a = np.empty(K)
    for i in range(N):
        for k in range(K):
            a[k] = Y[i, k] * scale[k]
        _mstep_row(sigma[i], a, lam, out[i])
    return out


@njit(cache=True, error_model="numpy", nogil=True)
def em_solve(sigma, u, lam, Y0, tol, max_iter):
    """The paper's EM (reverse fairness), certified as the torch path certifies it.

    The certificate ``F(Y) - q(initial_w(Y))`` is evaluated on the first 8 iterates and then
    every 10th (and at ``max_iter``). Returns ``(Y, value, gap, n_iter, certified)``.
    """
    Y = Y0.copy()
    value = objective(sigma, Y, u, lam, False)
    gap = _INF
    n_iter = 0
    while True:
        certify = n_iter < 8 or n_iter % _CERTIFY_EVERY == 0
        if certify or n_iter >= max_iter:
            F, q, _ = certificate(sigma, Y, u, lam, False)
            gap = F - q
            if math.isfinite(value) and gap <= tol * max(abs(value), 1.0):
                return Y, value, gap, n_iter, True
        if n_iter >= max_iter:
            return Y, value, gap, n_iter, False
        n_iter += 1
        Y = em_step(sigma, Y, u, lam)
        value = objective(sigma, Y, u, lam, False)


# ----- Python entry -----------------------------------------------------------------------------
class NumbaResult(NamedTuple):
    """Result of :func:`solve_collision_numba` (labels in ``labels_dtype``, default float64)."""

    labels: np.ndarray
    objective: float
    gap: float
    n_iter: int
    certified: bool


def solve_collision_numba(
    probs, lam, prior, fairness, *, tol, max_iter, init=None, method="newton", labels_dtype=None
):
    r"""Solve the collision-loss pseudo-label problem with the compiled kernels.

    The caller (:mod:`skcce.solvers._compiled`) has validated every input: rows of
    ``probs`` and ``init`` on the simplex, ``prior`` a distribution, ``lam > 0``, ``K >= 2``.

    Parameters
    ----------
    probs : ndarray of shape (N, K)
        Predictions :math:`\sigma` (float32 or float64; computed in float64).
    lam : float
        Fairness weight (summed-rows convention).
    prior : ndarray of shape (K,)
        Class prior ``u``.
    fairness : {"reverse", "forward"}
    tol : float
        Relative certified gap (``F(Y) - q(w) <= tol * max(|F(Y)|, 1)``).
    max_iter : int
        Iteration cap (interior-point iterations, or EM iterations).
    init : ndarray of shape (N, K), optional
        Warm start (default ``probs``).
    method : {"newton", "em"}
        The exact default solver (:func:`ipm_solve`) or the paper's EM (:func:`em_solve`).
    labels_dtype : numpy dtype, optional
        Dtype of the returned labels; the certificate is computed on the labels as returned
        (rounded to this dtype), in float64.

    Returns
    -------
    NumbaResult
        ``labels`` (N, K), ``objective`` F(labels), ``gap`` (certified absolute gap),
        ``n_iter``, ``certified``.

    Examples
    --------
    >>> import numpy as np
    >>> P = np.array([[0.9, 0.1], [0.8, 0.2], [0.6, 0.4], [0.3, 0.7]])
    >>> res = solve_collision_numba(P, 100.0, np.array([0.5, 0.5]), "reverse", tol=1e-7,
    ...                             max_iter=100)
    >>> res.certified, res.labels.shape
    (True, (4, 2))
    """
    sigma = np.ascontiguousarray(probs, dtype=np.float64)
    u = np.ascontiguousarray(prior, dtype=np.float64)
    forward = fairness == "forward"
    Y0 = sigma if init is None else np.ascontiguousarray(init, dtype=np.float64)
    low = labels_dtype is not None and np.dtype(labels_dtype) != np.float64
    if low:  # leave room for the rounding of the labels to their dtype
        tol_run = 0.1 * float(tol)
    else:
        tol_run = float(tol)
    if method == "em":
        Y, value, gap, n_iter, ok = em_solve(
            sigma, u, float(lam), _start(Y0, u, forward), tol_run, int(max_iter)
        )
    else:  # the stacked entry, with a stack of one
        Ys, values, gaps = np.empty((1,) + sigma.shape), np.empty(1), np.empty(1)
        iters, oks = np.zeros(1, dtype=np.int64), np.zeros(1, dtype=np.bool_)
        ipm_solve_into(sigma[None], Y0[None], 0, u, float(lam), forward, tol_run, int(max_iter),
                       Ys, values, gaps, iters, oks)  # fmt: skip
        Y, value, gap, n_iter, ok = Ys[0], values[0], gaps[0], iters[0], oks[0]
    if low:
        Y = Y.astype(labels_dtype)
        Yd = Y.astype(np.float64)
        value, q, _ = certificate(sigma, Yd, u, float(lam), forward)
        gap = value - q
        ok = bool(math.isfinite(value) and gap <= tol * max(abs(value), 1.0))
    if gap != gap:
        gap = math.inf
    return NumbaResult(Y, float(value), max(float(gap), 0.0), int(n_iter), bool(ok))


@njit(cache=True, error_model="numpy")
def _start(Y, u, forward):
    """The torch path's starting labels (``skcce.solvers._common.start_point``): ``Y`` itself
    when it is a valid start (C-contiguous float64, as the caller passes it)."""
    N, K = Y.shape
    if forward:  # the classes of zero prior get no mass; a row left with none starts at u
        if (u > 0).all():
            return Y
        out = np.empty((N, K))
        for i in range(N):
            tot = 0.0
            for k in range(K):
                out[i, k] = Y[i, k] if u[k] > 0 else 0.0
                tot += out[i, k]
            if not tot > 0:
                tot = 0.0
                for k in range(K):
                    out[i, k] = u[k]
                    tot += u[k]
            for k in range(K):
                out[i, k] /= tot
        return out
    s = np.zeros(K)  # a class of positive prior with no mass at all: a little of u everywhere
    for i in range(N):
        for k in range(K):
            s[k] += Y[i, k]
    for k in range(K):
        if u[k] > 0 and s[k] <= 0:
            out = np.empty((N, K))
            for i in range(N):
                for q in range(K):
                    out[i, q] = 0.999 * Y[i, q] + 0.001 * u[q]
            return out
    return Y


@njit(cache=True, error_model="numpy", nogil=True)
def ipm_solve_into(sigmas, inits, r, u, lam, forward, tol, max_iter, Y, value, gap, n_iter, ok):
    """:func:`ipm_solve` of problem ``r`` of a stack ``sigmas`` (R, N, K) from the start
    :func:`_start` of ``inits[r]`` (``inits`` is ``sigmas`` itself for the problems' own
    predictions), its results written into row ``r`` of the outputs ``Y`` (R, N, K),
    ``value``, ``gap``, ``n_iter`` and ``ok`` (R,): one call per problem, and nothing to box
    for the caller. The one compiled entry of the default solver: the batched restarts'
    workers (:mod:`skcce.solvers._compiled`) and :func:`solve_collision_numba` (a stack of
    one) share it, so that a process compiles (or loads) :func:`ipm_solve` once."""
    sigma = sigmas[r]
    out = ipm_solve(sigma, u, lam, forward, _start(inits[r], u, forward), tol, max_iter)
    labels = out[0]
    N, K = labels.shape
    for i in range(N):  # element loops: a slice assignment would compile numpy's broadcasting
        for k in range(K):
            Y[r, i, k] = labels[i, k]
    value[r] = out[1]
    gap[r] = out[2]
    n_iter[r] = out[3]
    ok[r] = out[4]
