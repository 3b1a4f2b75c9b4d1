r"""Dual Newton solver: a K-dimensional concave maximisation instead of an N x K problem.

The dual function :math:`q(w)` of :mod:`skcce._duality` depends on K numbers only. For the
collision and reverse losses every row's best response :math:`y_i(w)` is unique and continuous
in ``w``, so ``q`` is concave and continuously differentiable with

.. math::  \nabla q(w) = s^*(w) - \sum_i y_i(w), \qquad
           -\nabla^2 q(w) = \sum_i \partial y_i / \partial w + D(w) ,

where ``D`` is the (positive) diagonal curvature of the fairness conjugate. For the collision loss
a row's best response is a vertex (no curvature) or an edge ``(a, b)`` of the simplex, with
:math:`\partial y / \partial w = (e_a - e_b)(e_a - e_b)^\top / (w_a - w_b)^2`; for the reverse loss
it is :math:`\mathrm{diag}(d) - d d^\top / \sum d` with :math:`d_k = y_k^2 / \sigma_k`. The
(semismooth) Newton direction solves a K x K positive definite system; an Armijo backtracking
line search on ``q`` (keeping ``w > 0`` for the reverse fairness) makes every step an ascent
step. The primal labels are the exact best responses :math:`y_i(w)`, and the iteration stops on
the certified duality gap ``F(Y(w)) - q(w)``, which bounds the distance to the optimum.
"""

from __future__ import annotations

import torch

from skcce._duality import best_response, collision_edges


def _curvature(problem, w, Y):
    k = problem.k
    H = torch.zeros(k * k, dtype=Y.dtype, device=Y.device)
    if problem.loss == "collision":
        _, a, b, d = collision_edges(problem.probs, w, Y)
        if a.numel():
            c = 1.0 / (d * d)
            H.index_add_(0, a * k + a, c)
            H.index_add_(0, b * k + b, c)
            H.index_add_(0, a * k + b, -c)
            H.index_add_(0, b * k + a, -c)
        return H.view(k, k)
    sigma = problem.probs
    d = torch.where(sigma > 0, Y * Y / torch.where(sigma > 0, sigma, 1), 0)
    H = torch.diag(d.sum(dim=0)) - d.T @ (d / d.sum(dim=1, keepdim=True).clamp_min(1e-300))
    return H


_STALL_WINDOW = 4  # iterations without halving the best gap so far: the ascent has stalled
_STALL_RISE = 1e-4  # ... and raise the dual value by less than this fraction of its magnitude


def newton(problem, w, *, tol, max_iter):
    """Maximise the dual; returns (Y, w, value, gap, n_iter, converged).

    Returns early, not converged, when the ascent stalls: when ``_STALL_WINDOW`` iterations in a
    row neither halve the best certified gap seen before them nor raise the dual value by
    ``_STALL_RISE`` of its magnitude. This happens when a few rows
    flip between two classes over a tiny range of ``w`` (nearly equal probabilities): the dual
    is then almost kinked and its Hessian almost singular. The caller polishes the labels with
    projected gradient descent (:func:`skcce.solvers.solve_pseudo_labels`).
    """
    active = problem.active
    fixed = ~active  # reverse fairness: w_k = 0; forward: the class is excluded
    Y, psi = best_response(problem, w)
    q = problem.dual_value(w, psi)
    value = problem.objective(Y)
    gap = value - q
    n_iter = 0
    eye = torch.eye(problem.k, dtype=w.dtype, device=w.device)
    radius = 1.0 + float(w.abs().max())
    best = [float(gap)]  # best certified gap after each iteration
    duals = [float(q)]
    while True:
        if bool(torch.isfinite(value)) and bool(gap <= tol * problem.scale(value)):
            return Y, w, value, gap, n_iter, True
        if n_iter >= max_iter:
            return Y, w, value, gap, n_iter, False
        if len(best) > _STALL_WINDOW:
            before = best[-1 - _STALL_WINDOW]
            rise = duals[-1] - duals[-1 - _STALL_WINDOW]
            if best[-1] > 0.5 * before and rise < _STALL_RISE * max(abs(duals[-1]), 1.0):
                return Y, w, value, gap, n_iter, False
        n_iter += 1
        s_dual = problem.dual_sums(w)
        g = torch.where(fixed, 0, s_dual - Y.sum(dim=0))
        H = _curvature(problem, w, Y) + torch.diag(problem.fairness_curvature(w, s_dual))
        H = torch.where(fixed[:, None] | fixed[None, :], eye, H)
        H = H + eye * (1e-12 * H.diagonal().abs().max().clamp_min(1e-300))
        step = torch.linalg.solve(H, g)
        # trust region on the step (max-norm): when few rows sit on edges the Hessian is
        # nearly singular (large lambda: an LP-like dual) and the raw Newton step is huge.
        size = float(step.abs().max())
        if size > radius:
            step = step * (radius / size)
        slope = (g * step).sum()
        t = 1.0
        if problem.fairness == "reverse":
            shrink = torch.where(active & (step < 0), -w / step.clamp_max(-1e-300), torch.inf)
            t = min(1.0, 0.99 * float(shrink.min()))
        accepted = False
        for _ in range(40):
            wn = w + t * step
            Yn, psin = best_response(problem, wn)
            qn = problem.dual_value(wn, psin)
            if bool(torch.isfinite(qn)) and bool(qn >= q + 1e-4 * t * slope):
                accepted = True
                break
            # a trial point that is certified optimal ends the search even when rounding in q
            # (terms of order lam) hides the ascent from the Armijo test
            vn = problem.objective(Yn)
            if bool(torch.isfinite(vn)) and bool(vn - qn <= tol * problem.scale(vn)):
                return Yn, wn, vn, vn - qn, n_iter, True
            t *= 0.5
        if not accepted:  # no ascent possible at working precision
            return Y, w, value, gap, n_iter, False
        taken = t * float(step.abs().max())
        if t == 1.0:  # full step: grow the region when the step was capped, else keep it
            radius = 4.0 * radius if taken >= radius * (1 - 1e-12) else radius
        else:  # backtracked: the model was too optimistic this far out
            radius = max(2.0 * taken, 1e-300)
        w, Y, q = wn, Yn, qn
        value = problem.objective(Y)
        gap = value - q
        best.append(min(best[-1], float(gap)))
        duals.append(float(q))
