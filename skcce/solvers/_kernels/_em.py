"""The paper's EM (Algorithm 1's inner loop), compiled, for EM-vs-interior-point comparisons
between equally compiled code: the E-step and the exact M-step of Theorem 1 / section 3 by
safeguarded Newton on the scalar ``x``, certified on the torch path's schedule
(:mod:`skcce.solvers._em`).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from skcce.solvers._kernels._certificate import certificate, objective

_INF = np.inf
_EM_NEWTON = 100  # safeguarded Newton steps of the M-step (as skcce.solvers._em)
_CERTIFY_EVERY = 10  # EM certifies its first 8 iterates and then every 10th (as skcce.solvers)


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
def em_step(sigma, Y, carry, u, lam):
    """One EM iteration: E-step ``a_ik = u_k y_ik / (s_k + carry_k)`` and the exact M-step of
    every row (the carried mass is a fixed row of the E-step's bound)."""
    N, K = sigma.shape
    s = np.zeros(K)
    for i in range(N):
        for k in range(K):
            s[k] += Y[i, k]
    scale = np.zeros(K)
    for k in range(K):
        if s[k] + carry[k] > 0:
            scale[k] = u[k] / (s[k] + carry[k])
    out = np.empty((N, K))
    a = np.empty(K)
    for i in range(N):
        for k in range(K):
            a[k] = Y[i, k] * scale[k]
        _mstep_row(sigma[i], a, lam, out[i])
    return out


@njit(cache=True, error_model="numpy", nogil=True)
def em_solve(sigma, carry, u, lam, Y0, tol, max_iter):
    """The paper's EM (reverse fairness), certified as the torch path certifies it.

    The certificate ``F(Y) - q(initial_w(Y))`` is evaluated on the first 8 iterates and then
    every 10th (and at ``max_iter``). Returns ``(Y, value, gap, n_iter, certified)``.
    """
    Y = Y0.copy()
    value = objective(sigma, Y, carry, u, lam, False)
    gap = _INF
    n_iter = 0
    while True:
        certify = n_iter < 8 or n_iter % _CERTIFY_EVERY == 0
        if certify or n_iter >= max_iter:
            F, q, _ = certificate(sigma, Y, carry, u, lam, False)
            gap = F - q
            if math.isfinite(value) and gap <= tol * max(abs(value), 1.0):
                return Y, value, gap, n_iter, True
        if n_iter >= max_iter:
            return Y, value, gap, n_iter, False
        n_iter += 1
        Y = em_step(sigma, Y, carry, u, lam)
        value = objective(sigma, Y, carry, u, lam, False)
