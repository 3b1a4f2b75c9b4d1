"""Projected gradient descent on Y: the generic baseline the paper compares EM with.

Each step is ``Y+ = P(Y - eta * grad F(Y))`` with ``P`` the row-wise Euclidean projection onto
the simplex. The step size is chosen by backtracking on the standard sufficient-decrease test
``F(Y+) <= F(Y) + <grad, Y+ - Y> + |Y+ - Y|^2 / (2 eta)``, which for a projected step implies
``F(Y+) <= F(Y) - |Y+ - Y|^2 / (2 eta)``: the objective never increases, whatever the local
curvature, so the method cannot diverge. After an accepted step eta grows by 1.5x.
"""

from __future__ import annotations

import torch

from skcce.solvers._common import certified_result, certify, start_point


def project_simplex(V: torch.Tensor) -> torch.Tensor:
    """Euclidean projection of every row of V (N, K) onto the probability simplex."""
    k = V.shape[1]
    U, _ = torch.sort(V, dim=1, descending=True)
    css = U.cumsum(dim=1) - 1.0
    idx = torch.arange(1, k + 1, dtype=V.dtype, device=V.device)
    cond = U - css / idx > 0
    rho = k - 1 - cond.flip(1).to(torch.int8).argmax(dim=1, keepdim=True)
    theta = css.gather(1, rho) / (rho + 1).to(V.dtype)
    out = (V - theta).clamp_min(0)
    # with large entries (lam >> 1 in float32) the cumulative sum can lose a row's total by far
    # more than rounding: put such rows back on the simplex (their maximum is positive)
    total = out.sum(dim=1, keepdim=True)
    off = (total - 1).abs() > 16 * torch.finfo(V.dtype).eps
    if bool(off.any()):
        out = torch.where(off, out / total, out)
    return out


def gradient(problem, Y: torch.Tensor) -> torch.Tensor:
    """Gradient of F at Y (N, K)."""
    sigma, lam, u = problem.probs, problem.lam, problem.prior
    tiny = torch.finfo(Y.dtype).tiny
    if problem.loss == "collision":
        G = -sigma / (Y * sigma).sum(dim=1, keepdim=True).clamp_min(tiny)
    elif problem.loss == "shannon":
        G = -torch.log(sigma.clamp_min(tiny)).expand_as(Y).clone()
    else:
        G = -sigma / Y.clamp_min(tiny)
    if lam > 0:
        s = Y.sum(dim=0)
        if problem.carry is not None:  # Phi sees the carried mass too (n_eff = N + its sum)
            s = s + problem.carry
        n = problem.n_eff
        if problem.fairness == "reverse":
            G = G - lam * u / s.clamp_min(tiny)
        else:
            ratio = (s / (n * u)).clamp_min(tiny)
            G = G + torch.where(problem.active, lam / n * (torch.log(ratio) + 1), 0)
    return G


def pgd_step(problem, Y, value, eta, max_backtrack=60):
    """One monotone projected-gradient step. Returns (Y, value, eta, moved)."""
    G = gradient(problem, Y)
    for _ in range(max_backtrack):
        V = Y - eta * G
        if problem.fairness == "forward" and not bool(problem.active.all()):
            # project onto the face y_k = 0 (u_k = 0): a value 2 below the row maximum is
            # below the projection threshold, so those coordinates come out exactly 0
            low = torch.where(problem.active, V, -torch.inf).amax(dim=1, keepdim=True) - 2.0
            V = torch.where(problem.active, V, low)
        Yn = project_simplex(V)
        D = Yn - Y
        vn = problem.objective(Yn)
        bound = value + (G * D).sum() + (D * D).sum() / (2 * eta)
        if bool(torch.isfinite(vn)) and bool(vn <= bound):
            return Yn, vn, eta * 1.5, bool((D != 0).any())
        eta = eta * 0.5
    return Y, value, eta, False


DEFAULT_MAX_ITER = 20000


def run(problem, Y, *, tol, max_iter):
    """Monotone PGD from ``Y`` until certified; returns ``(Y, value, gap, n_iter, converged)``.

    Stops early, with the certificate of the last iterate, when a step no longer moves.
    """
    value = problem.objective(Y)
    eta = 1.0 / max(problem.n, 1)
    n_iter = 0
    while True:
        gap, ok = certify(problem, Y, value, tol)
        if ok or n_iter >= max_iter:
            return Y, value, gap, n_iter, ok
        n_iter += 1
        Y, value, eta, moved = pgd_step(problem, Y, value, eta)
        if not moved:
            gap, ok = certify(problem, Y, value, tol)
            return Y, value, gap, n_iter, ok


def _solve(problem, init, *, tol, max_iter):
    """The ``"pgd"`` method on a validated problem (:func:`skcce.solvers.solve_pseudo_labels`)."""
    max_iter = DEFAULT_MAX_ITER if max_iter is None else max_iter
    Y, value, gap, n_iter, ok = run(problem, start_point(problem, init), tol=tol, max_iter=max_iter)
    return certified_result(Y, value, gap, n_iter, ok, "pgd")
