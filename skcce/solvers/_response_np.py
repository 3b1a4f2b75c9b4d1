r"""Collision-loss row best responses in NumPy, for problems on the CPU.

Each row solves :math:`\max_{y \in \Delta} \ln(\sigma^\top y) + w^\top y` (the row term of the
dual in :mod:`skcce.solvers._duality`). The maximiser is a vertex or lies on an edge of the simplex,
because the objective depends on ``y`` only through the two numbers
:math:`(\sigma^\top y, w^\top y)`. On the edge between classes ``a`` and ``b`` the stationary
point is :math:`x = \sigma^\top y = (\sigma_a - \sigma_b) / (w_b - w_a)`, valid when ``x`` lies
strictly between :math:`\sigma_a` and :math:`\sigma_b`.

This path tries the vertices and edges among each row's ``_TOP`` best vertices
(largest :math:`\ln\sigma_k + w_k`), then checks the candidate exactly with the optimality
conditions :math:`\sigma_j / x + w_j \le \sigma_a / x + w_a` for every class ``j`` and every
class ``a`` in the support. Rows that fail the check retry with every pair of classes (K up to
``_ALL_PAIRS_MAX_K``); any still failing are solved by the general envelope walk of
:mod:`skcce.solvers._duality`. The result is therefore exact; this path only saves
PyTorch's per-operation overhead, which dominates at mini-batch sizes (N = 250, K = 10).

The compiled best response (:mod:`skcce.solvers._kernels._rows`) solves the same rows, but it
is not used here: it computes in float64 only (this path keeps the problem's dtype, float32
included) and rounds the edge weights differently (about a third of the rows of a random
250 x 10 problem differ in the last bits), so the torch Newton path's results would change.
"""

from __future__ import annotations

import numpy as np

_TOP = 3
_ALL_PAIRS_MAX_K = 24  # rows failing the check retry with every pair of classes up to this K
_PAIRS = {}


def _pairs(m):
    if m not in _PAIRS:
        _PAIRS[m] = np.triu_indices(m, 1)
    return _PAIRS[m]


def collision_response(sigma, wm):
    r"""Best responses for the rows of ``sigma`` (N, K) at multipliers ``wm`` (K,).

    ``wm`` is ``-inf`` for classes that may not be chosen. Returns ``(Y, psi, bad)``: the labels,
    the row values :math:`\min_y -\ln\sigma^\top y - w^\top y`, and a boolean mask of rows whose
    candidate failed the optimality check (their ``Y`` and ``psi`` must be recomputed).
    """
    n, k = sigma.shape
    with np.errstate(divide="ignore"):
        V = np.log(sigma) + wm
    m = min(_TOP, k)
    if m < k:
        cols = np.argpartition(-V, m - 1, axis=1)[:, :m]
    else:
        cols = np.broadcast_to(np.arange(k), (n, k))
    Y = _candidates(sigma, wm, V, cols)
    psi, bad = _check(sigma, wm, Y)
    if bad.any() and m < k <= _ALL_PAIRS_MAX_K:
        # every pair for the rows whose optimal edge is not among their best vertices
        idx = np.flatnonzero(bad)
        sub = _candidates(sigma[idx], wm, V[idx], np.broadcast_to(np.arange(k), (idx.size, k)))
        Y[idx] = sub
        psi[idx], bad[idx] = _check(sigma[idx], wm, sub)
    return Y, psi, bad


def _candidates(sigma, wm, V, cols):
    """Best vertex or edge among the classes ``cols`` (N, m) of each row."""
    n, m = cols.shape
    rows = np.arange(n)
    Sc = np.take_along_axis(sigma, cols, axis=1)
    wc = wm[cols]
    Vc = np.take_along_axis(V, cols, axis=1)
    first = Vc.argmax(axis=1)
    value = Vc[rows, first]
    Y = np.zeros_like(sigma)
    Y[rows, cols[rows, first]] = 1.0
    if m > 1:
        I, J = _pairs(m)
        SI, SJ = Sc[:, I], Sc[:, J]
        ds = SI - SJ
        wd = wc[:, J] - wc[:, I]
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            x = ds / wd
            ok = (x > np.minimum(SI, SJ)) & (x < np.maximum(SI, SJ)) & np.isfinite(wd)
            xs = np.where(ok, x, 1.0)
            theta = np.clip((xs - SJ) / np.where(ok, ds, 1.0), 0.0, 1.0)
            ev = np.where(ok, np.log(xs) + wc[:, J] - theta * wd, -np.inf)
        p = ev.argmax(axis=1)
        edge = ev[rows, p] > value
        if edge.any():
            r = rows[edge]
            pe = p[edge]
            th = theta[r, pe]
            Y[r] = 0.0
            Y[r, cols[r, I[pe]]] = th
            Y[r, cols[r, J[pe]]] += 1.0 - th
    return Y


def _check(sigma, wm, Y):
    """Row values of ``Y`` and the rows that fail the optimality conditions."""
    x = (Y * sigma).sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        G = sigma / x[:, None] + wm
        support = np.where(Y > 0, G, np.inf).min(axis=1)
        tol = 64 * np.finfo(sigma.dtype).eps * (1.0 + np.abs(support))
        bad = ~(G.max(axis=1) <= support + tol) | ~(x > 0)
        wy = (Y * np.where(np.isfinite(wm), wm, 0.0)).sum(axis=1)
        psi = -np.log(x) - wy
    return psi, bad
