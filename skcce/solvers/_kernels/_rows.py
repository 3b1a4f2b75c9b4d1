r"""Exact row best responses of the collision loss (compiled).

Row ``i`` maximises :math:`\ln(\sigma_i^\top y) + w^\top y` over the simplex (the row term of
the dual of :mod:`skcce.solvers._duality`). The objective depends on ``y`` only through the two
numbers :math:`(\sigma_i^\top y, w^\top y)`, so the maximiser is a vertex or a point of an edge
of the upper concave envelope of the points :math:`(\sigma_{ik}, w_k)`: a row's answer is
``(a, b, ya)``, ``ya`` on class ``a`` and ``1 - ya`` on class ``b`` (``a == b`` for a vertex).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

_INF = np.inf
_WALK = 3  # steps of the envelope walk before a row's best response tries the candidate


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
    b = np.int64(-1)  # typed, not Literal[int](-1): see the package docstring
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
        return _edge_point(sigma, i, wm, b, jr, rr)
    if jl >= 0 and inv + rl < 0.0:  # h decreases to the left of b: the maximum is left
        return _edge_point(sigma, i, wm, b, jl, rl)
    return b, b, 1.0, sb, wb


@njit(cache=True, error_model="numpy", inline="always")
def _edge_point(sigma, i, wm, b, j, slope):
    """The stationary point ``x = -1/slope`` of ``h`` on the segment from vertex ``b`` to
    ``j``, as ``(b, j, yb, x, lin)`` (see :func:`_br_candidate`).

    The weight of the segment's end with the larger ``s`` is computed, clipped to [0, 1], and
    the other end gets the rest (the same rounding on either side of ``b``); the side is
    chosen by selects rather than branches, so that the helper keeps one path (see the
    package docstring).
    """
    sb = sigma[i, b]
    sj = sigma[i, j]
    right = sj > sb
    lo = sb if right else sj
    hi = sj if right else sb
    xs = -1.0 / slope
    t = min(max((xs - lo) / (hi - lo), 0.0), 1.0)  # the weight of the end with larger s
    yb = 1.0 - t if right else t
    yj = t if right else 1.0 - t
    x = yb * sb + yj * sj
    return b, j, yb, x, yb * wm[b] + yj * wm[j]


@njit(cache=True, error_model="numpy", inline="always")
def _br_walk(sigma, i, wm, allowed, max_steps):
    """Exact maximiser by a walk along the upper envelope from its right end (largest ``s``).

    Each step is one pass over the classes and moves to a vertex of smaller ``s``, so the walk
    ends within K steps. Returns ``(a, b, ya, x, lin, done)`` as :func:`_br_row`; after
    ``max_steps`` steps without an end it gives up (``done`` False, the other values
    meaningless).
    """
    K = sigma.shape[1]
    v = np.int64(-1)  # (typed, as in _br_candidate)
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
    ``s > 0``). The caller takes the logarithm (``_certificate.log_add`` adds many at the cost
    of few).
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
