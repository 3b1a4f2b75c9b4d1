r"""Dual Newton solver: a K-dimensional concave maximisation instead of an N x K problem.

The dual function :math:`q(w)` of :mod:`skcce.solvers._duality` depends on K numbers only. For the
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

import math

import torch

from skcce.solvers import _pgd
from skcce.solvers._common import certified_result, mix_in_prior, start_point
from skcce.solvers._duality import best_response, collision_edges
from skcce.solvers._master import ColumnPool


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


_STALL_WINDOW = 4  # iterations in a row that neither halve the certified gap ...
_STALL_RISE = 1e-4  # ... nor raise the dual bound by this fraction of its magnitude: stalled
_SMOOTH = 10.0  # temperature of the smoothed curvature: _SMOOTH * gap / N
_TAU0 = 0.05  # first temperature, relative to max |w|
_START_LAM = 1.0  # the smoothed warm start runs when lam >= _START_LAM * N (LP-like dual)
_START_TAUS = (1.0, 0.1, 0.01)  # its temperatures (log-probability units)
_START_ITER = 8  # Newton steps per temperature, at most
_START_TOL = 1e-3  # ... stopping when every column sum is within this fraction of N
_BACKTRACK = 40  # halvings of a Newton step before the trust region shrinks instead


def _smoothed_curvature(log_probs, w, tau):
    """Curvature the vertex rows would have if each chose by a softmax at temperature tau.

    A row at a vertex of the simplex contributes no curvature to the dual, yet it switches
    class when ``w`` moves past a nearby tie. ``(diag(sum_i p_i) - P'P) / tau`` with
    ``p_i = softmax((ln sigma_i + w) / tau)`` counts the rows within about ``tau`` of a tie; with
    ``tau`` tied to the current gap it keeps Newton steps from overshooting (the gradient stays
    exact, so this only changes the step, never the certificate).
    """
    P = torch.softmax((log_probs + w) / tau, dim=1)
    P = torch.nan_to_num(P)  # rows whose every class is excluded
    return (torch.diag(P.sum(dim=0)) - P.T @ P) / tau


def smoothed_start(problem, w, log_probs, taus=_START_TAUS, max_iter=_START_ITER):
    """A warm start for the collision loss: the optimum of the *smoothed* dual.

    Replacing each row's best response by a softmax at temperature ``tau`` (vertices only)
    gives a smooth, strictly concave dual ``q_tau(w) = sum_i -tau*logsumexp((ln sigma_i + w)/tau)
    + (fairness conjugate)``, on which Newton's method converges quickly. Following its optimum
    for decreasing ``tau`` lands near the exact dual optimum, where the exact solver needs few
    iterations. It pays off at large ``lam`` (per-row fairness weight ``lam / N >= 1``), where
    the exact dual is LP-like: at lam = 1e4, N = 250, K = 10 it cut Newton's iterations from
    about 23 to 9; at lam = 100 it cost more than it saved, so it is skipped there.
    """
    active = problem.active
    fixed = ~active
    eye = torch.eye(problem.k, dtype=w.dtype, device=w.device)

    def value(w, tau):
        wm = torch.where(active, w, -torch.inf) if problem.fairness == "forward" else w
        Z = (log_probs + wm) / tau
        psi = -tau * torch.logsumexp(Z, dim=1)
        return float(problem.dual_value(w, psi)), torch.softmax(Z, dim=1)

    for tau in taus:
        q, P = value(w, tau)
        for _ in range(max_iter):
            s_dual = problem.dual_sums(w)
            g = torch.where(fixed, 0, s_dual - P.sum(dim=0))
            H = (torch.diag(P.sum(dim=0)) - P.T @ P) / tau
            H = H + torch.diag(problem.fairness_curvature(w, s_dual))
            H = torch.where(fixed[:, None] | fixed[None, :], eye, H)
            H = H + eye * (1e-12 * H.diagonal().abs().max().clamp_min(1e-300))
            try:
                step = torch.linalg.solve(H, g)
            except torch.linalg.LinAlgError:  # singular at working precision: keep this w
                return w
            t = _step_cap(problem, w, step)  # keep w > 0 (reverse fairness)
            slope = float((g * step).sum())
            for _ in range(30):
                qn, Pn = value(w + t * step, tau)
                if qn >= q + 1e-4 * t * slope:
                    break
                t *= 0.5
            else:
                break
            w, q, P = w + t * step, qn, Pn
            # the smoothed optimum is only a start: a loose test on the column sums suffices
            if t == 1.0 and float(g.abs().max()) <= _START_TOL * problem.n:
                break
    return w


class _Bounds:
    """The certificate of :func:`newton`: the best labels seen (``Y``, primal bound ``value``)
    and the best dual value ``q``; for the collision loss, the pool of recent best responses."""

    def __init__(self, problem, Y, q, tol, pool):
        self.problem, self.tol, self.pool = problem, tol, pool
        self.Y, self.value, self.q = Y, float(problem.objective(Y)), q
        if pool is not None:
            pool.add(Y)

    @property
    def gap(self):
        return self.value - self.q

    def certified(self):
        return math.isfinite(self.value) and self.gap <= self.tol * max(abs(self.value), 1.0)

    def consider(self, Yc, qc):
        """Labels ``Yc`` and a dual value ``qc`` seen at a trial point."""
        if math.isfinite(qc):
            self.q = max(self.q, qc)
        vc = float(self.problem.objective(Yc))
        if vc < self.value:
            self.Y, self.value = Yc, vc
        if self.pool is not None:
            self.pool.add(Yc)

    def result(self, w, n_iter, converged):
        return self.Y, w, self.value, self.gap, n_iter, converged


def _stalled(gaps, duals):
    """``_STALL_WINDOW`` iterations without halving the gap or raising the dual bound."""
    if len(gaps) <= _STALL_WINDOW:
        return False
    rise = duals[-1] - duals[-1 - _STALL_WINDOW]
    return not gaps[-1] <= 0.5 * gaps[-1 - _STALL_WINDOW] and not (
        rise >= _STALL_RISE * max(abs(duals[-1]), 1.0)
    )


def _step_cap(problem, w, step):
    """The largest step fraction (at most 1) that keeps ``w > 0`` (reverse fairness)."""
    if problem.fairness != "reverse":
        return 1.0
    shrink = torch.where(problem.active & (step < 0), -w / step.clamp_max(-1e-300), torch.inf)
    return min(1.0, 0.99 * float(shrink.min()))


def _direction(problem, w, Y, log_probs, tau):
    """``(gradient, Newton step)`` of the dual at ``w``; the step is None when the system is
    singular at working precision. ``log_probs`` (collision loss) adds the smoothed
    curvature at temperature ``tau``."""
    active = problem.active
    fixed = ~active  # reverse fairness: w_k = 0; forward: the class is excluded
    eye = torch.eye(problem.k, dtype=w.dtype, device=w.device)
    s_dual = problem.dual_sums(w)
    g = torch.where(fixed, 0, s_dual - Y.sum(dim=0))
    H = _curvature(problem, w, Y) + torch.diag(problem.fairness_curvature(w, s_dual))
    if log_probs is not None and math.isfinite(tau):
        wm = torch.where(active, w, 0) if problem.fairness == "forward" else w
        H = H + _smoothed_curvature(log_probs, wm, tau)
    H = torch.where(fixed[:, None] | fixed[None, :], eye, H)
    H = H + eye * (1e-12 * H.diagonal().abs().max().clamp_min(1e-300))
    try:
        return g, torch.linalg.solve(H, g)
    except torch.linalg.LinAlgError:
        return g, None


def _line_search(problem, bounds, w, q, g, step, t):
    """Armijo backtracking on ``q`` from ``w`` along ``step``, from the fraction ``t``;
    every trial point updates the bounds. Returns ``(accepted, t, w, Y, q)`` of the last
    trial (``t`` halved once more when none was accepted)."""
    slope = float((g * step).sum())
    for _ in range(_BACKTRACK):
        wn = w + t * step
        Yn, psin = best_response(problem, wn)
        qn = float(problem.dual_value(wn, psin))
        bounds.consider(Yn, qn)
        if qn >= q + 1e-4 * t * slope or bounds.certified():
            return True, t, wn, Yn, qn
        t *= 0.5
    return False, t, wn, Yn, qn


def _recover(problem, bounds, w, Y, q):
    """Collision loss: the best mix of the pooled labels (:mod:`skcce.solvers._master`) and
    the dual at the multiplier it implies, which becomes the iterate when it is better."""
    bounds.Y, bounds.value = bounds.pool.best_mix(bounds.Y, bounds.value)
    wp = problem.initial_w(bounds.Y)
    Yp, psip = best_response(problem, wp)
    qp = float(problem.dual_value(wp, psip))
    if math.isfinite(qp) and qp > q:
        w, Y, q = wp, Yp, qp
    bounds.consider(Yp, qp)
    return w, Y, q


def newton(problem, w, *, tol, max_iter):
    """Maximise the dual; returns (Y, w, value, gap, n_iter, converged).

    Each iteration takes one Newton step on the dual with an Armijo backtracking line search
    (after ``_BACKTRACK`` halvings without ascent the trust region shrinks instead); every trial
    point's labels and dual value update the bounds. For the collision loss it then (i) solves
    the restricted master problem of :mod:`skcce.solvers._master` over the recent best
    responses and the best labels so far, and (ii) evaluates the dual at the multiplier those
    labels imply (``problem.initial_w``), which becomes the next iterate when it is better.
    The certificate is the best primal value seen minus the best dual value seen (both are
    valid bounds).

    Returns early, not converged, when ``_STALL_WINDOW`` iterations in a row neither halve the
    certified gap nor raise the dual bound by ``_STALL_RISE`` of its magnitude; the caller
    then polishes the labels with projected gradient descent (:func:`_solve`).
    """
    collision = problem.loss == "collision"
    log_probs, tau = None, math.inf
    if collision:
        log_probs = torch.log(problem.probs)
        if problem.fairness == "forward":
            log_probs = torch.where(problem.active, log_probs, -torch.inf)
        if problem.lam >= _START_LAM * problem.n:
            # in float64 whatever the input: at large lam the smoothed Hessian adds terms of very
            # different sizes, which float32 rounds into a singular matrix
            w = smoothed_start(problem, w.double(), log_probs.double()).to(w.dtype)
    Y, psi = best_response(problem, w)
    q = float(problem.dual_value(w, psi))
    bounds = _Bounds(problem, Y, q, tol, ColumnPool(problem) if collision else None)
    if collision:
        wfin = torch.where(problem.active, w, 0) if problem.fairness == "forward" else w
        tau = _TAU0 * max(float(wfin.abs().max()), 1e-12)
    n_iter = 0
    radius = 1.0 + float(w.abs().max())
    gaps, duals = [bounds.gap], [bounds.q]
    while True:
        if bounds.certified():
            return bounds.result(w, n_iter, True)
        if n_iter >= max_iter or _stalled(gaps, duals):
            return bounds.result(w, n_iter, False)
        n_iter += 1
        g, step = _direction(problem, w, Y, log_probs, tau)
        if step is None:  # singular at working precision: let PGD polish
            return bounds.result(w, n_iter, False)
        # trust region on the step (max-norm): when few rows sit on edges the Hessian is
        # nearly singular (large lambda: an LP-like dual) and the raw Newton step is huge.
        size = float(step.abs().max())
        if size > radius:
            step = step * (radius / size)
        accepted, t, wn, Yn, qn = _line_search(
            problem, bounds, w, q, g, step, _step_cap(problem, w, step)
        )
        taken = t * float(step.abs().max())
        if accepted and qn > q:
            if t == 1.0 and taken >= radius * (1 - 1e-12):  # capped full step: grow
                radius *= 4.0
            elif t < 1.0:  # backtracked: the model was too optimistic this far out
                radius = max(2.0 * taken, 1e-300)
            w, Y, q = wn, Yn, qn
        else:
            radius = max(0.5 * taken, 1e-300)
        if collision and not bounds.certified():
            w, Y, q = _recover(problem, bounds, w, Y, q)
        if collision and math.isfinite(bounds.gap):
            tau = max(_SMOOTH * bounds.gap / problem.n, 1e-300)
        gaps.append(bounds.gap)
        duals.append(bounds.q)


DEFAULT_MAX_ITER = 100


def _solve(problem, init, *, tol, max_iter, method="newton"):
    """The ``"newton"`` method on a validated problem, with its PGD polish (the torch path of
    every interior-point method name: ``method`` is the name its result reports).

    When the dual ascent stalls (non-unique best responses at ties, or no ascent at working
    precision) the primal is polished by monotone PGD from the better of Newton's labels and
    the start, and the better certificate is kept. ``max_iter`` caps both; None gives each its
    own default (100 Newton steps, 20000 PGD steps).
    """
    Y0 = start_point(problem, init)
    cap = DEFAULT_MAX_ITER if max_iter is None else max_iter
    Y, _, value, gap, n_iter, ok = newton(problem, problem.initial_w(Y0), tol=tol, max_iter=cap)
    if not ok:
        start = mix_in_prior(Y, problem.prior) if math.isfinite(value) else Y0
        polish_cap = _pgd.DEFAULT_MAX_ITER if max_iter is None else max_iter
        Y2, value2, gap2, n_more, ok2 = _pgd.run(problem, start, tol=tol, max_iter=polish_cap)
        n_iter += n_more
        if ok2 or not math.isfinite(value) or float(gap2) < gap:
            Y, value, gap, ok = Y2, value2, gap2, ok2
    return certified_result(Y, value, gap, n_iter, ok, method)
