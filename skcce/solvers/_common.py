"""What every solver method shares: the one result type, the start point and the certificate."""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
class PseudoLabelResult:
    """Result of :func:`skcce.solvers.solve_pseudo_labels` (every method returns it).

    Attributes
    ----------
    labels : torch.Tensor of shape (N, K)
        Pseudo-labels ``Y``, rows on the simplex, dtype and device of ``probs``.
    objective : float
        ``F(labels)``.
    gap : float
        Certified upper bound on ``F(labels) - F*`` (absolute); for ``method="sinkhorn"``
        the marginal violation ``||mean(labels) - prior||_1`` instead (no certificate).
    n_iter : int
        Iterations of the chosen method.
    converged : bool
        True only when ``gap <= tol * max(|objective|, 1)``; for ``method="sinkhorn"``, when
        the marginal violation is ``<= tol``.
    method : str
        The method that ran.
    backend : {"compiled", "torch"}
        Which implementation answered: the compiled kernels (:mod:`skcce.solvers._kernels`:
        for ``"newton"`` the interior point, for ``"em"`` the compiled EM) or the torch path
        (for ``"newton"`` the dual Newton of :mod:`skcce.solvers._newton`).
    """

    labels: torch.Tensor
    objective: float
    gap: float
    n_iter: int
    converged: bool
    method: str
    backend: str = "torch"


def certified_result(Y, value, gap, n_iter, converged, method, backend="torch"):
    """The :class:`PseudoLabelResult` of an exact method, with its gap as a non-negative
    float."""
    gap = float(gap)
    if gap != gap:  # inf - inf: the optimum itself is infinite (e.g. an impossible prior)
        gap = float("inf")
    gap = max(gap, 0.0)  # rounding can put the dual bound a hair above F(Y)
    return PseudoLabelResult(Y, float(value), gap, n_iter, bool(converged), method, backend)


def certify(problem, Y, value, tol):
    """``(gap, converged)``: the duality gap of ``Y`` at the multiplier its column sums imply
    (:mod:`skcce.solvers._duality`), and whether it is within ``tol`` relative to ``F(Y)``."""
    _, gap = problem.gap(Y, problem.initial_w(Y))
    return gap, bool(torch.isfinite(value)) and bool(gap <= tol * problem.scale(value))


def trivial_labels(problem):
    """Closed forms: K = 1, or lam = 0 (rows independent)."""
    sigma = problem.probs
    if problem.k == 1:
        return torch.ones_like(sigma)
    if problem.loss == "reverse":
        return sigma.clone()
    Y = torch.zeros_like(sigma)
    return Y.scatter_(1, sigma.argmax(dim=1, keepdim=True), 1.0)


def mix_in_prior(y, prior):
    """``0.999 y + 0.001 prior``: every class of positive prior keeps some mass, where both
    fairness terms have a finite gradient. Elementwise (tensors, arrays or numbers; the
    compiled kernels call it on numbers, :mod:`skcce.solvers._kernels._entry`)."""
    return 0.999 * y + 0.001 * prior


def start_point(problem, init):
    """The first iterate: ``init`` (default ``probs``) with every active cluster reachable."""
    Y = problem.probs if init is None else init
    if problem.fairness == "forward":
        inactive = ~problem.active
        if bool(inactive.any()):
            Y = torch.where(inactive, 0, Y)
            bad = Y.sum(dim=1, keepdim=True) <= 0
            Y = torch.where(bad, problem.prior.expand_as(Y), Y)
            Y = Y / Y.sum(dim=1, keepdim=True)
    else:
        s = Y.sum(dim=0)
        if bool(((s <= 0) & problem.active).any()):
            # an empty cluster makes KL(u||ybar) infinite: mix in a little of the prior
            Y = mix_in_prior(Y, problem.prior)
    return Y
