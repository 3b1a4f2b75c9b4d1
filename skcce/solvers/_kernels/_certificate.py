r"""The objective ``F``, the dual ``q`` and the certified gap ``F(Y) - q(w(Y))`` (compiled).

The multiplier is ``w(Y) = initial_w(column sums of Y)``, the one of ``Problem.initial_w`` in
:mod:`skcce.solvers._duality`: the kernels certify with the same bound as the torch path.
"""

from __future__ import annotations

import math
from collections import namedtuple

import numpy as np
from numba import njit

from skcce.solvers._kernels._rows import _br_row, _exp_w

_INF = np.inf

#: each row's best response at the certificate's multiplier, written by the certificate for
#: the pricing of :mod:`._interior`: ``share`` on class ``first``, the rest on ``second``
Responses = namedtuple("Responses", ["first", "second", "share"])


@njit(cache=True, error_model="numpy", inline="always")
def log_add(p, acc, x):
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


@njit(cache=True, error_model="numpy")
def _xlogy(x, y):
    if x == 0.0:
        return 0.0
    return x * math.log(y)


@njit(cache=True, error_model="numpy")
def _phi(s, carry, u, lam, n, forward):
    """Phi(s) = lam * KL with the marginal ``(s + carry) / (n + sum(carry))`` (as
    skcce.losses: xlogy conventions); ``carry`` zero: the batch's own mean ``s / n``."""
    n_eff = n
    for k in range(s.shape[0]):
        n_eff += carry[k]
    total = 0.0
    for k in range(s.shape[0]):
        yb = (s[k] + carry[k]) / n_eff
        if forward:
            total += _xlogy(yb, yb) - _xlogy(yb, u[k])
        else:
            total += _xlogy(u[k], u[k]) - _xlogy(u[k], yb)
    return lam * total


@njit(cache=True, error_model="numpy")
def objective(sigma, Y, carry, u, lam, forward):
    """F(Y) (may be ``+inf``)."""
    N, K = sigma.shape
    p, acc = 1.0, 0.0  # sum of ln x_i (see log_add)
    s = np.zeros(K)
    for i in range(N):
        x = 0.0
        for k in range(K):
            x += Y[i, k] * sigma[i, k]
            s[k] += Y[i, k]
        p, acc = log_add(p, acc, x)
    return -(acc + math.log(p)) + _phi(s, carry, u, lam, N, forward)


@njit(cache=True, error_model="numpy")
def initial_w(s, carry, u, lam, n, forward):
    """The multiplier of ``Problem.initial_w``: ``-grad Phi`` at the column sums (clamped)."""
    K = s.shape[0]
    floor = max(1e-3, 1e-6 * n)
    tiny = np.finfo(np.float64).tiny
    n_eff = n
    for k in range(K):
        n_eff += carry[k]
    w = np.zeros(K)
    for k in range(K):
        if u[k] <= 0:
            continue
        sk = max(s[k], floor) + carry[k]
        if forward:
            w[k] = -(lam / n_eff) * (math.log(sk / (n_eff * max(u[k], tiny))) + 1.0)
        else:
            w[k] = lam * u[k] / sk
    return w


@njit(cache=True, error_model="numpy")
def dual_value(psi_sum, w, carry, u, lam, n, forward):
    """q(w) = sum_i psi_i + Phi(s*(w)) + w's*(w), where ``s*(w) >= 0`` minimises
    ``Phi(s) + w's`` (the unconstrained minimiser less ``carry``, clipped at zero)."""
    K = w.shape[0]
    n_eff = n
    for k in range(K):
        n_eff += carry[k]
    sd = np.zeros(K)
    for k in range(K):
        if u[k] <= 0:
            continue
        if forward:
            t = n_eff * u[k] * math.exp(-n_eff * w[k] / lam - 1.0)
        else:
            t = lam * u[k] / w[k]
        sd[k] = t - carry[k] if not t <= carry[k] else 0.0
    ws = 0.0
    for k in range(K):
        ws += w[k] * sd[k]
    return psi_sum + _phi(sd, carry, u, lam, n, forward) + ws


@njit(cache=True, error_model="numpy")
def dual_at(sigma, s, carry, u, lam, forward, responses):
    """``(q(w), w)`` at the multiplier ``w = initial_w(s)`` of the column sums ``s``, writing
    each row's best response into ``responses``."""
    N, K = sigma.shape
    allowed = allowed_classes(u, forward)
    w = initial_w(s, carry, u, lam, N, forward)
    p, acc, lin = 1.0, 0.0, 0.0  # the row minima -ln x_i - lin_i, summed (see log_add)
    ew = _exp_w(w, allowed)
    first, second, share = responses
    for i in range(N):
        a, b, ya, xr, li = _br_row(sigma, i, ew, w, allowed)
        first[i] = a
        second[i] = b
        share[i] = ya
        p, acc = log_add(p, acc, xr)
        lin += li
    return dual_value(-(acc + math.log(p)) - lin, w, carry, u, lam, N, forward), w


@njit(cache=True, error_model="numpy")
def allowed_classes(u, forward):
    """The classes a row may choose: all of them, or (forward fairness) those of positive
    prior, whose column sum ``KL(ybar||u)`` would otherwise make infinite."""
    K = u.shape[0]
    allowed = np.ones(K, dtype=np.bool_)
    if forward:
        for k in range(K):
            allowed[k] = u[k] > 0
    return allowed


@njit(cache=True, error_model="numpy")
def new_responses(N):
    """Room for every row's best response (see :data:`Responses`)."""
    return Responses(np.zeros(N, dtype=np.int64), np.zeros(N, dtype=np.int64), np.ones(N))


@njit(cache=True, error_model="numpy", nogil=True)
def certificate(sigma, Y, carry, u, lam, forward):
    """``(F(Y), q(w), w)`` with ``w = initial_w(column sums of Y)``; the gap is ``F - q``."""
    N, K = sigma.shape
    s = np.zeros(K)
    for i in range(N):
        for k in range(K):
            s[k] += Y[i, k]
    q, w = dual_at(sigma, s, carry, u, lam, forward, new_responses(N))
    return objective(sigma, Y, carry, u, lam, forward), q, w


@njit(cache=True, error_model="numpy")
def certificate_on_supports(sigma, supports, carry, u, lam, forward, responses, s):
    """``(F, q)`` of :func:`certificate` for the labels that ``supports`` hold (each row
    renormalised, as the solver returns them), read from the supports: the column sums and
    ``F`` cost O(N x support), the best responses (written to ``responses``) read all of
    ``sigma``. ``s`` is a work array of shape (K,)."""
    N, K = sigma.shape
    classes, count, y = supports.classes, supports.count, supports.y
    for k in range(K):
        s[k] = 0.0
    p, acc = 1.0, 0.0  # sum of ln x_i (see log_add)
    for i in range(N):
        tot = 0.0
        for q in range(count[i]):
            tot += y[i, q]
        x = 0.0
        for q in range(count[i]):
            share = y[i, q] / tot
            x += share * sigma[i, classes[i, q]]
            s[classes[i, q]] += share
        p, acc = log_add(p, acc, x)
    dual, _ = dual_at(sigma, s, carry, u, lam, forward, responses)
    return -(acc + math.log(p)) + _phi(s, carry, u, lam, N, forward), dual
