"""The rows' supports of the interior point: which classes each row may use, and their values.

Row ``i`` holds ``count[i]`` classes ``classes[i, :count[i]]`` with labels ``y[i, :count[i]]``
and dual slacks ``z[i, :count[i]]`` (:data:`Supports`), so that an iteration touches
O(N x support) memory. The arrays' width grows by doubling (:func:`widen`) when a row needs
more room. A row of one class is fixed at that vertex: it has no variable and no dual.
"""

from __future__ import annotations

import math
from collections import namedtuple

import numpy as np
from numba import njit

from skcce.solvers._kernels._certificate import log_add
from skcce.solvers._kernels._rows import _br_row, _exp_w

_EPS_NEW = 0.05  # mass given to a class when pricing adds it to a row's support
WIDTH = 8  # first capacity of a row's support
_TOP = 3  # initial support: each row's best vertices (largest ln sigma + w), at most
_NEAR = 0.2  # ... those within this factor of the row's best vertex (sigma exp(w)), if lam <= N

#: the compact supports (see the module docstring)
Supports = namedtuple("Supports", ["classes", "count", "y", "z"])


@njit(cache=True, error_model="numpy")
def new_supports(N, K):
    """Empty supports of the first width."""
    W = min(K, WIDTH)
    return Supports(
        np.zeros((N, W), dtype=np.int64), np.zeros(N, dtype=np.int64), np.zeros((N, W)),
        np.zeros((N, W)),
    )  # fmt: skip


@njit(cache=True, error_model="numpy")
def _widen_array(a, width):
    """``a`` with zero columns appended up to ``width`` (element loops: a slice assignment
    would make numba compile its broadcasting error message, seconds of a cold compile)."""
    n, m = a.shape
    out = np.zeros((n, width), dtype=a.dtype)
    for i in range(n):
        for j in range(m):
            out[i, j] = a[i, j]
    return out


@njit(cache=True, error_model="numpy")
def widen(supports, width):
    """The supports with room for ``width`` classes a row."""
    return Supports(
        _widen_array(supports.classes, width), supports.count,
        _widen_array(supports.y, width), _widen_array(supports.z, width),
    )  # fmt: skip


@njit(cache=True, error_model="numpy")
def make_room(supports, K):
    """The supports, widened (doubling, at most K): a row is full."""
    return widen(supports, min(K, 2 * supports.classes.shape[1]))


@njit(cache=True, error_model="numpy")
def copy(supports):
    return Supports(
        supports.classes.copy(), supports.count.copy(), supports.y.copy(), supports.z.copy()
    )


@njit(cache=True, error_model="numpy")
def dense(supports, K):
    """The labels of the supports as an (N, K) array, each row renormalised to sum 1."""
    classes, count, y = supports.classes, supports.count, supports.y
    N = count.shape[0]
    Y = np.zeros((N, K))
    for i in range(N):
        tot = 0.0
        for q in range(count[i]):
            tot += y[i, q]
        for q in range(count[i]):
            Y[i, classes[i, q]] = y[i, q] / tot
    return Y


@njit(cache=True, error_model="numpy")
def holds(classes, count, i, k):
    """Whether class ``k`` is in row ``i``'s support."""
    for q in range(count[i]):
        if classes[i, q] == k:
            return True
    return False


@njit(cache=True, error_model="numpy")
def _put(classes, count, i, k):
    """Append class k to row i's support unless it is there (the caller made room).

    Branch-free (a select writes back the entry already there when ``k`` is held): with one
    path through the function numba's reference counts on the arrays cancel, where two exits
    would leave an atomic increment and decrement in every caller's loop."""
    c = count[i]
    found = holds(classes, count, i, k)
    at = min(c, classes.shape[1] - 1)
    classes[i, at] = classes[i, at] if found else k
    count[i] = c if found else c + 1


@njit(cache=True, error_model="numpy")
def add_class(classes, count, y, z, i, k, mu):
    """Pricing: put class k in row i's support (the caller made room), with a little mass
    taken from the row's largest entry, and its slack on the complementarity ``mu``."""
    c = count[i]
    largest = 0
    for q in range(c):
        if y[i, q] > y[i, largest]:
            largest = q
    eps = min(_EPS_NEW, 0.5 * y[i, largest])
    y[i, largest] -= eps
    y[i, c] = eps
    classes[i, c] = k
    count[i] = c + 1
    m = max(mu, 1e-12)
    z[i, c] = m / eps
    if c == 1:  # the row was fixed at a vertex: its old class becomes a variable too
        z[i, largest] = m / y[i, largest]


@njit(cache=True, error_model="numpy")
def every_class(supports, allowed):
    """Every allowed class in every row's support (widened to K); new classes get no mass
    (the caller's interior start gives it)."""
    K = allowed.shape[0]
    if supports.classes.shape[1] < K:
        supports = widen(supports, K)
    classes, count = supports.classes, supports.count
    for i in range(count.shape[0]):
        for k in range(K):
            if allowed[k]:
                _put(classes, count, i, k)
    return supports


@njit(cache=True, error_model="numpy")
def prune(supports, multi, n_multi, y_low, z_high, held):
    """Drop from the supports of the rows ``multi[:n_multi]`` the entries with ``y < y_low``
    and ``z > z_high`` (at their bound, by complementarity), renormalising each row. A row
    keeps its largest entry, and a class keeps at least one row (its column sum stays
    positive). ``held[k]`` is the number of rows with class ``k`` in their support (updated)."""
    classes, count, y, z = supports
    for t in range(n_multi):
        i = multi[t]
        m = count[i]
        top = 0
        for q in range(1, m):
            if y[i, q] > y[i, top]:
                top = q
        keep = classes[i, top]
        q = 0
        dropped = False
        while q < m:
            k = classes[i, q]
            if k != keep and y[i, q] < y_low and z[i, q] > z_high and held[k] > 1:
                held[k] -= 1
                m -= 1
                classes[i, q] = classes[i, m]
                y[i, q] = y[i, m]
                z[i, q] = z[i, m]
                dropped = True
            else:
                q += 1
        if dropped:
            count[i] = m
            if m == 1:
                y[i, 0] = 1.0
            else:
                tot = 0.0
                for q in range(m):
                    tot += y[i, q]
                for q in range(m):
                    y[i, q] /= tot


@njit(cache=True, error_model="numpy")
def interior_start(Y0, supports, mu):
    """An interior point on the supports: each row's warm start ``Y0`` restricted to its
    support and renormalised, mixed half and half with the uniform label there, and duals
    ``z = mu / y`` (a fixed row, one class, has no dual)."""
    classes, count, y, z = supports
    for i in range(classes.shape[0]):
        c = count[i]
        tot = 0.0
        for q in range(c):
            tot += Y0[i, classes[i, q]]
        for q in range(c):
            y[i, q] = Y0[i, classes[i, q]] / tot if tot > 0 else 1.0 / c
        _centre_row(y, z, i, c, mu)


@njit(cache=True, error_model="numpy")
def recentre(supports, mu):
    """The current iterate moved to the centre of its supports, as :func:`interior_start`
    from it."""
    classes, count, y, z = supports
    for i in range(classes.shape[0]):
        _centre_row(y, z, i, count[i], mu)


@njit(cache=True, error_model="numpy")
def _centre_row(y, z, i, c, mu):
    """Row ``i``'s ``c`` entries (on the simplex) mixed half and half with the uniform label
    on its support, and duals ``z = mu / y`` (a row of one class has no dual)."""
    for q in range(c):
        y[i, q] = 0.5 * y[i, q] + 0.5 / c
        z[i, q] = mu / y[i, q] if c > 1 else 0.0


@njit(cache=True, error_model="numpy")
def cover_active(sigma, u, supports):
    """Every class of positive prior in some row's support (else ``KL(u||ybar)`` or its
    gradient is infinite): an uncovered class joins the row of its largest ``sigma``."""
    N, K = sigma.shape
    covered = np.zeros(K, dtype=np.bool_)
    classes, count = supports.classes, supports.count
    for i in range(N):
        for q in range(count[i]):
            covered[classes[i, q]] = True
    uncovered = 0
    for k in range(K):
        uncovered += u[k] > 0 and not covered[k]
    if uncovered == 0:  # the usual case: no loop that may replace (and so count) the arrays
        return supports
    for k in range(K):
        if u[k] > 0 and not covered[k]:
            best = 0
            for i in range(1, N):
                if sigma[i, k] > sigma[best, k]:
                    best = i
            if count[best] == supports.classes.shape[1]:
                supports = make_room(supports, K)
            supports.classes[best, count[best]] = k
            count[best] += 1
    return supports


@njit(cache=True, error_model="numpy")
def initial_supports(sigma, w, allowed, lam, supports):
    """Each row's first support: its best vertices at the multiplier ``w`` (the largest
    ``sigma_k exp(w_k)``, at most ``_TOP``; with ``lam <= N`` those within ``_NEAR`` of the
    best only), and with ``lam > N`` its exact best response too. Returns ``psi0``, the sum of
    the row minima at ``w`` (with ``lam <= N``, of the values at the best vertices: upper
    bounds).

    ``psi0`` only steers the first pricing (:mod:`._interior`): with ``lam <= N`` the walk to
    each row's exact best response is skipped, and the value at its best vertex stands in for
    it; every certificate computes the exact best responses."""
    N, K = sigma.shape
    classes, count = supports.classes, supports.count
    score = np.empty(K)
    top = min(_TOP, K)
    near = _NEAR if lam <= N else 0.0  # a strong pull mixes classes: every best vertex
    ew = _exp_w(w, allowed)
    p0, acc0, lin0 = 1.0, 0.0, 0.0  # psi0 = -(acc0 + ln p0) - lin0 (see log_add)
    for i in range(N):
        count[i] = 0
        if near == 0.0:  # the exact best response (a vertex or an edge) is in the support
            a, b, ya, xr, li = _br_row(sigma, i, ew, w, allowed)
            p0, acc0 = log_add(p0, acc0, xr)
            lin0 += li
            _put(classes, count, i, a)
            if ya < 1.0:
                _put(classes, count, i, b)
        # The best score first (a running maximum: selects, no branch to mispredict), then
        # the classes within near x of it: usually one or two, taken in a second pass; more
        # than top (an uncertain row) take the top best by a selection.
        t1 = 0.0
        k1 = np.int64(-1)  # typed, not Literal[int](-1): see the package docstring
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
                _put(classes, count, i, k1)
                for k in range(K):
                    if score[k] > 0 and score[k] >= lo:
                        _put(classes, count, i, k)
            else:
                for _ in range(top):
                    best = np.int64(0)  # (typed, as k1)
                    for k in range(1, K):
                        if score[k] > score[best]:
                            best = k
                    if not score[best] > 0:
                        break
                    score[best] = 0.0
                    _put(classes, count, i, best)
        if count[i] == 0:  # every score underflowed to 0: the row's largest allowed sigma
            for k in range(K):
                if allowed[k] and (count[i] == 0 or sigma[i, k] > sigma[i, classes[i, 0]]):
                    classes[i, 0] = k
                    count[i] = 1
        if near > 0.0:  # the value at the best vertex, the first one taken above
            a = classes[i, 0]
            p0, acc0 = log_add(p0, acc0, sigma[i, a])
            lin0 += w[a]
    return -(acc0 + math.log(p0)) - lin0
