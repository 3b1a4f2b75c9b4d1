r"""Primal recovery for the collision loss: the best convex combination of candidate labelings.

The dual Newton solver (:mod:`skcce.solvers._newton`) evaluates exact row best responses
:math:`Y(w)` at many multipliers ``w``. When the dual optimum sits where some rows' best
responses are not unique (a kink of the dual), no single :math:`Y(w)` is optimal: the optimum
mixes them. This module keeps the last few best responses ("columns", as in Dantzig–Wolfe
column generation) and solves the restricted master problem

.. math::  \min_{\alpha \in \Delta_m} F\Big(\sum_j \alpha_j Y_j\Big) ,

which for the collision loss depends on the columns only through the row values
:math:`x_{ij} = \sigma_i^\top y_{ij}` (N, m) and the column sums :math:`s_j` (K, m):
:math:`F = -\sum_i \ln (X\alpha)_i + \Phi(S\alpha)` (``Phi`` with the problem's carry,
if any: :mod:`skcce.solvers._duality`). It is convex in ``alpha``; a few
sequential-quadratic steps (each QP over the simplex solved exactly as a non-negative least
squares problem with SciPy's ``nnls``) with a monotone line search solve it. Every combination
is a feasible labeling, so its objective is a valid upper bound for the certificate. Its column
sums also give the next dual candidate :math:`w = -\nabla\Phi(s)` (the map used for warm
starts), which is how the solver moves the dual to the kink.
"""

from __future__ import annotations

import numpy as np
import torch
from scipy.optimize import nnls

_SQP_STEPS = 6


class ColumnPool:
    """The last ``size`` best responses of a collision-loss problem, with their summaries.

    Parameters
    ----------
    problem : skcce.solvers._duality.Problem
        A problem with ``loss="collision"``.
    size : int
        Number of columns kept (the oldest is dropped first).
    """

    def __init__(self, problem, size=16):
        self.problem = problem
        self.size = size
        self.Y = []  # list of (N, K) tensors
        self.x = []  # list of (N,) float64 arrays
        self.s = []  # list of (K,) float64 arrays

    def add(self, Y: torch.Tensor) -> None:
        """Store a labeling (rows on the simplex)."""
        sigma = self.problem.probs
        self.Y.append(Y)
        self.x.append((Y * sigma).sum(dim=1).double().cpu().numpy())
        self.s.append(Y.sum(dim=0).double().cpu().numpy())
        if len(self.Y) > self.size:
            del self.Y[0], self.x[0], self.s[0]

    def best_mix(self, Y0: torch.Tensor, value0: float):
        """Best convex combination of the pool and ``Y0`` (objective ``value0``).

        Returns ``(Y, value)`` with ``value <= value0``; ``(Y0, value0)`` when nothing better
        was found.
        """
        if len(self.Y) == 0 or not np.isfinite(value0):
            return Y0, value0
        sigma = self.problem.probs
        X = np.stack(self.x + [(Y0 * sigma).sum(dim=1).double().cpu().numpy()], axis=1)
        S = np.stack(self.s + [Y0.sum(dim=0).double().cpu().numpy()], axis=1)
        alpha = np.zeros(X.shape[1])
        alpha[-1] = 1.0
        alpha, value = _sqp(self.problem, X, S, alpha, value0)
        if not value < value0:
            return Y0, value0
        Y = alpha[-1] * Y0
        for a, col in zip(alpha[:-1], self.Y, strict=True):
            if a > 0:
                Y = Y + a * col
        # the objective of the assembled labels, so the certificate uses what is returned
        exact = float(self.problem.objective(Y))
        if not exact < value0:
            return Y0, value0
        return Y, exact


def _value(problem, X, S, alpha):
    x = X @ alpha
    s = S @ alpha
    if np.any(x <= 0):
        return np.inf
    return -np.log(x).sum() + _phi(problem, s)


def _carried(problem, s):
    """``(s + carry, n_eff)``: the column sums the fairness term sees, and its row count
    (no carry: ``(s, N)``)."""
    c = problem.carry_np
    if c is None:
        return s, problem.n
    return s + c, problem.n_eff


def _phi(problem, s):
    u = problem.prior_np
    lam = problem.lam
    s, n = _carried(problem, s)
    act = u > 0
    if problem.fairness == "reverse":
        if np.any(s[act] <= 0):
            return np.inf
        return lam * float((u[act] * np.log(u[act] * n / s[act])).sum())
    sa = s[act]
    pos = sa > 0
    return lam / n * float((sa[pos] * np.log(sa[pos] / (n * u[act][pos]))).sum())


def _phi_derivs(problem, s):
    """Gradient and diagonal Hessian of Phi at s (classes of zero prior: 0)."""
    u = problem.prior_np
    lam = problem.lam
    s, n = _carried(problem, s)
    g = np.zeros_like(s)
    h = np.zeros_like(s)
    act = u > 0
    if problem.fairness == "reverse":
        g[act] = -lam * u[act] / s[act]
        h[act] = lam * u[act] / s[act] ** 2
    else:
        sa = np.maximum(s[act], 1e-12 * n)
        g[act] = lam / n * (np.log(sa / (n * u[act])) + 1.0)
        h[act] = lam / (n * sa)
    return g, h


def _sqp(problem, X, S, alpha, value):
    m = X.shape[1]
    ones = np.ones((1, m))
    for _ in range(_SQP_STEPS):
        x = X @ alpha
        s = S @ alpha
        Xr = X / x[:, None]
        gphi, hphi = _phi_derivs(problem, s)
        grad = -Xr.sum(axis=0) + gphi @ S
        H = Xr.T @ Xr + S.T @ (hphi[:, None] * S)
        if not (np.all(np.isfinite(H)) and np.all(np.isfinite(grad))):
            break
        H = H + np.eye(m) * (1e-12 * max(np.trace(H), 1e-300))
        try:
            L = np.linalg.cholesky(H)
        except np.linalg.LinAlgError:
            break
        # QP: min_b 1/2 b'Hb + (grad - H alpha)'b over the simplex, as NNLS on
        # |L'b + L^{-1}(grad - H alpha)|^2 with a heavily weighted row for sum(b) = 1
        rhs = -np.linalg.solve(L, grad - H @ alpha)
        weight = 1e3 * np.sqrt(np.abs(np.diag(H)).max())
        beta, _ = nnls(np.vstack([L.T, weight * ones]), np.append(rhs, weight))
        total = beta.sum()
        if not total > 0:
            break
        d = beta / total - alpha
        t, accepted = 1.0, False
        for _ in range(20):
            trial = alpha + t * d
            vt = _value(problem, X, S, trial)
            if vt <= value:
                accepted = True
                break
            t *= 0.5
        if not accepted:
            break
        small = value - vt <= 1e-14 * max(abs(value), 1.0)
        alpha, value = trial, vt
        if small:
            break
    return alpha, value
