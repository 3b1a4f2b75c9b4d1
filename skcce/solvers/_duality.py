r"""Lagrangian duality for the pseudo-label problem: row best responses and certified gaps.

The batch problem :math:`\min_Y \sum_i H(y_i, \sigma_i) + \Phi(s)`, with column sums
:math:`s = \sum_i y_i` and :math:`\Phi(s) = \lambda KL(\cdot)` of :math:`\bar y = s / N`, couples
the rows only through ``s``. Dualising :math:`s = \sum_i y_i` with a multiplier ``w`` (K,)
gives the concave dual

.. math::

    q(w) = \sum_i \psi_i(w) + \min_{s} \big[\Phi(s) + w^\top s\big], \qquad
    \psi_i(w) = \min_{y \in \Delta} H(y, \sigma_i) - w^\top y ,

a lower bound on the optimum for every ``w``. For a feasible ``Y`` the *certified gap*
``F(Y) - q(w)`` bounds ``F(Y) - F*`` from above; it vanishes at the optimum (strong duality:
the problem is convex and the relative interior is feasible).

* Collision loss: :math:`\psi_i(w) = \max_{r > 0} [1 + \ln r - \max_k (r\sigma_{ik} + w_k)]`,
  solved exactly by a walk over the upper envelope of the K lines :math:`r\sigma_k + w_k`; the
  minimiser ``y`` is a vertex or lies on an edge of the simplex (two classes).
* Shannon loss: :math:`\psi_i(w) = \min_k (-\ln \sigma_{ik} - w_k)`.
* Reverse loss: :math:`y_k = \sigma_k / (\gamma - w_k)` with a scalar γ found by Newton's method.

The fairness part (``s*(w)`` minimises :math:`\Phi(s) + w^\top s` over :math:`s \ge 0`).
A *carry* ``c`` (K,), :math:`c_k \ge 0` (column mass from earlier rows), makes the marginal
:math:`m = (s + c) / N'` with :math:`N' = N + \sum_k c_k` instead of :math:`s / N`; with
:math:`t_k` the unconstrained minimiser of :math:`\Phi(s) + w^\top s` in :math:`s_k + c_k`,
:math:`s^*_k = \max(t_k - c_k, 0)` (``c = 0``: :math:`s^* = t`):

* reverse, :math:`\Phi = -\lambda \sum_k u_k \ln (s_k + c_k) + \mathrm{const}`:
  :math:`t_k = \lambda u_k / w_k` (``w_k > 0``; classes with ``u_k = 0`` need ``w_k >= 0``
  and take ``w_k = 0``);
* forward, :math:`\Phi = \frac{\lambda}{N'} \sum_k (s_k + c_k) \ln \frac{s_k + c_k}{N' u_k}`:
  :math:`t_k = N' u_k \exp(-N' w_k / \lambda - 1)`.

Where :math:`s^*_k` is clipped at zero it does not move with ``w_k`` (no curvature there).

This is our own derivation (see docs/user_guide); it is checked against an independent conic
solver in the tests.
"""

from __future__ import annotations

import numpy as np
import torch

from skcce.losses import _kl_term, row_cross_entropy
from skcce.solvers._response_np import collision_response

_NUMPY_MAX_K = 64  # above this the walk's K passes beat the candidate check's fallbacks


class Problem:
    """Validated data of one pseudo-label problem (internal).

    Parameters
    ----------
    probs : torch.Tensor of shape (N, K)
    lam : float
    fairness : {"reverse", "forward"}
    prior : torch.Tensor of shape (K,)
    loss : {"collision", "shannon", "reverse"}
    carry : torch.Tensor or array-like of shape (K,), optional
        Column mass (``>= 0``) carried into the fairness term from earlier rows: its marginal
        is ``(s + carry) / (N + sum(carry))``. None or zeros: the batch's own ``s / N``
        (``self.carry`` is then None).
    """

    def __init__(self, probs, lam, fairness, prior, loss, carry=None):
        self.probs = probs
        self.lam = float(lam)
        self.fairness = fairness
        self.prior = prior
        self.loss = loss
        self.n, self.k = probs.shape
        self.active = prior > 0
        self._prior_np = None
        self.carry, self._carry_np, self.n_eff = _carry(carry, probs)

    @property
    def prior_np(self):
        """The prior as a float64 NumPy array (read from the device on first use only)."""
        if self._prior_np is None:
            self._prior_np = self.prior.detach().double().cpu().numpy()
        return self._prior_np

    @property
    def carry_np(self):
        """The carry as a float64 NumPy array (K,), or None when there is none."""
        return self._carry_np

    def marginal(self, s: torch.Tensor) -> torch.Tensor:
        """The fairness term's marginal of the column sums ``s``: ``(s + carry) / n_eff``."""
        if self.carry is None:
            return s / self.n
        return (s + self.carry) / self.n_eff

    def objective(self, Y: torch.Tensor) -> torch.Tensor:
        """F(Y) as a scalar tensor (may be +inf)."""
        rows = row_cross_entropy(Y, self.probs, self.loss).sum()
        if self.lam == 0:
            return rows
        ybar = Y.mean(dim=0) if self.carry is None else self.marginal(Y.sum(dim=0))
        return rows + self.lam * _kl_term(ybar, self.prior, self.fairness)

    def scale(self, value: torch.Tensor) -> torch.Tensor:
        """Denominator of relative gaps: max(|F|, 1)."""
        return value.abs().clamp_min(1.0)

    # ----- fairness conjugate -------------------------------------------------------------
    def dual_sums(self, w: torch.Tensor) -> torch.Tensor:
        """s*(w): the column sums ``>= 0`` that minimise Phi(s) + w's (shape (K,))."""
        u, lam, n = self.prior, self.lam, self.n_eff
        if self.fairness == "reverse":
            t = torch.where(self.active, lam * u / w, torch.zeros_like(w))
        else:
            t = n * u * torch.exp(-n * w / lam - 1.0)
        if self.carry is None:
            return t
        return torch.where(t <= self.carry, torch.zeros_like(t), t - self.carry)

    def fairness_value(self, s: torch.Tensor) -> torch.Tensor:
        """Phi(s) = lam * KL of the marginal ``(s + carry) / n_eff`` (no carry: ``s / N``)."""
        return self.lam * _kl_term(self.marginal(s), self.prior, self.fairness)

    def fairness_curvature(self, w: torch.Tensor, s_dual: torch.Tensor) -> torch.Tensor:
        """ds*/dw negated (diagonal, >= 0; zero where s* is clipped at zero)."""
        total = s_dual if self.carry is None else s_dual + self.carry
        if self.fairness == "reverse":
            curv = torch.where(self.active, total / w, torch.zeros_like(w))
        else:
            curv = self.n_eff / self.lam * total
        if self.carry is None:
            return curv
        return torch.where(s_dual > 0, curv, torch.zeros_like(curv))

    def initial_w(self, Y0: torch.Tensor) -> torch.Tensor:
        """Multiplier whose s*(w) equals the column sums of Y0: the warm start of "newton" and
        the multiplier that certifies an EM/PGD iterate (``-grad Phi`` at the column sums,
        clamped away from zero)."""
        tiny = torch.finfo(Y0.dtype).tiny
        s = Y0.sum(dim=0).clamp_min(max(1e-3, 1e-6 * self.n))
        if self.carry is not None:
            s = s + self.carry
        u, n = self.prior, self.n_eff
        if self.fairness == "reverse":
            return torch.where(self.active, self.lam * u / s, torch.zeros_like(s))
        w = -(self.lam / n) * (torch.log(s / (n * u.clamp_min(tiny))) + 1.0)
        return torch.where(self.active, w, torch.zeros_like(w))

    # ----- certificate ---------------------------------------------------------------------
    def dual_value(self, w: torch.Tensor, psi: torch.Tensor) -> torch.Tensor:
        """q(w) given the row values psi_i(w)."""
        s_dual = self.dual_sums(w)
        return psi.sum() + self.fairness_value(s_dual) + (w * s_dual).sum()

    def gap(self, Y: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(F(Y), F(Y) - q(w)) for a feasible Y and any valid multiplier w."""
        value = self.objective(Y)
        _, psi = best_response(self, w)
        return value, value - self.dual_value(w, psi)


def _carry(carry, probs):
    """``(carry, carry_np, n_eff)`` of :class:`Problem`: the carry as a tensor of ``probs``'s
    dtype and device and as float64 NumPy, and ``N + sum(carry)``; ``(None, None, N)`` when
    there is no carry or it is all zeros."""
    n = probs.shape[0]
    if carry is None:
        return None, None, n
    c = torch.as_tensor(carry).to(dtype=probs.dtype, device=probs.device)
    c_np = c.detach().double().cpu().numpy()
    if not c_np.any():
        return None, None, n
    return c, c_np, n + float(c_np.sum())


# ----- row best responses --------------------------------------------------------------------
def best_response(problem: Problem, w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Exact minimiser Y (N, K) and values psi (N,) of min_y H(y, sigma_i) - w'y per row."""
    if problem.loss == "collision":
        if problem.probs.device.type == "cpu" and problem.k <= _NUMPY_MAX_K:
            return _collision_response_cpu(problem.probs, w, problem.active, problem.fairness)
        return _collision_response(problem.probs, w, problem.active, problem.fairness)
    if problem.loss == "shannon":
        return _shannon_response(problem.probs, w, problem.active, problem.fairness)
    return _reverse_response(problem.probs, w, problem.active, problem.fairness)


def _masked_w(w, active, fairness):
    # With forward fairness a class of zero prior must stay empty: it is never chosen.
    if fairness == "forward":
        return torch.where(active, w, torch.full_like(w, -torch.inf))
    return w


def _collision_response_cpu(sigma, w, active, fairness):
    # NumPy candidates checked exactly (skcce.solvers._response_np); the walk for the rows that fail
    wm = _masked_w(w, active, fairness)
    Y, psi, bad = collision_response(sigma.detach().numpy(), wm.detach().numpy())
    Y, psi = torch.from_numpy(Y), torch.from_numpy(psi)
    if bad.any():
        idx = torch.from_numpy(np.flatnonzero(bad))
        Y[idx], psi[idx] = _collision_response(sigma[idx], w, active, fairness)
    return Y, psi


def _collision_response(sigma, w, active, fairness):
    n, k = sigma.shape
    wm = _masked_w(w, active, fairness)
    wb = wm.expand(n, k)
    finite = torch.isfinite(wb)
    rows = torch.arange(n, device=sigma.device)
    neg = torch.full_like(sigma, -torch.inf)
    # a: line that is highest as r -> 0 (max w, ties to larger sigma)
    top_w = wb == wm.max()
    a = torch.where(top_w, sigma, neg).argmax(dim=1)
    # b: line that is highest as r -> inf (max sigma, ties to larger w)
    smax = torch.where(finite, sigma, neg).amax(dim=1, keepdim=True)
    top_s = (sigma == smax) & finite
    b = torch.where(top_s, wb, neg).argmax(dim=1)
    theta = torch.ones(n, dtype=sigma.dtype, device=sigma.device)  # weight of line a
    done = a == b
    scale = (sigma.amax(dim=1) + torch.where(finite, wb, 0).abs().amax(dim=1)).clamp_min(1.0)
    tol = 64 * torch.finfo(sigma.dtype).eps * scale
    for _ in range(k + 1):
        if bool(done.all()):
            break
        sa, sb = sigma[rows, a], sigma[rows, b]
        wa, wbb = wm[a], wm[b]
        ds = sb - sa
        dw = wa - wbb
        same = (ds <= 0) | (dw <= 0)  # degenerate pair (identical or dominated line)
        r = torch.where(same, torch.ones_like(ds), dw / torch.where(same, 1, ds))
        vals = r[:, None] * sigma + wb
        vals = torch.where(finite, vals, neg)
        m, c = vals.max(dim=1)
        va = r * sa + wa
        above = (m > va + tol) & ~done & ~same
        go_right = r * sigma[rows, c] < 1.0  # supergradient 1/r - sigma_c > 0
        a = torch.where(above & go_right, c, a)
        b = torch.where(above & ~go_right, c, b)
        final = ~done & ~above
        x = 1.0 / r
        vert_a = final & (same | (sa >= x))
        vert_b = final & ~vert_a & (sb <= x)
        edge = final & ~vert_a & ~vert_b
        th_edge = ((sb - x) / torch.where(same, 1, ds)).clamp(0, 1)
        theta = torch.where(vert_a, torch.ones_like(theta), theta)
        theta = torch.where(vert_b, torch.zeros_like(theta), theta)
        theta = torch.where(edge, th_edge, theta)
        done = done | final
    Y = torch.zeros_like(sigma)
    Y[rows, a] += theta
    Y[rows, b] += 1.0 - theta
    x = (Y * sigma).sum(dim=1)
    wy = (Y * torch.where(finite, wb, 0)).sum(dim=1)
    psi = -torch.log(x) - wy
    return Y, psi


def collision_edges(sigma, w, Y):
    """Rows whose best response lies on an edge: indices (rows, a, b) and the edge gap w_a - w_b.

    Used by the Newton solver: on such a row y_a = s_b/(s_b - s_a) - 1/(w_a - w_b), so
    dy/dw = (e_a - e_b)(e_a - e_b)' / (w_a - w_b)^2.
    """
    support = Y > 0
    two = support.sum(dim=1) == 2
    idx = torch.nonzero(two, as_tuple=True)[0]
    if idx.numel() == 0:
        return idx, idx, idx, sigma.new_zeros(0)
    sub = support[idx]
    first = sub.to(torch.int8).argmax(dim=1)
    last = sigma.shape[1] - 1 - sub.flip(1).to(torch.int8).argmax(dim=1)
    return idx, first, last, (w[first] - w[last]).abs()


def _shannon_response(sigma, w, active, fairness):
    wm = _masked_w(w, active, fairness)
    cost = -torch.log(sigma) - wm
    psi, j = cost.min(dim=1)
    Y = torch.zeros_like(sigma)
    Y[torch.arange(sigma.shape[0], device=sigma.device), j] = 1.0
    return Y, psi


def _reverse_response(sigma, w, active, fairness, n_iter=60):
    """min_y -sum_k sigma_k ln y_k - w'y on the simplex, per row."""
    wm = _masked_w(w, active, fairness)
    pos = sigma > 0
    neg = torch.full_like(sigma, -torch.inf)
    wpos = torch.where(pos, wm.expand_as(sigma), neg)
    g = (wpos + torch.where(pos, sigma, 0)).amax(dim=1)  # sum >= 1 here
    for _ in range(n_iter):
        d = torch.where(pos, g[:, None] - wm, torch.ones_like(sigma))
        t = torch.where(pos, sigma / d, 0)
        f = t.sum(dim=1) - 1.0
        fp = -(t / d).sum(dim=1)
        step = f / fp
        g_new = g - step
        if bool((g_new == g).all()):
            break
        g = g_new
    # zero-sigma classes can absorb mass if their w exceeds gamma
    m0, c0 = torch.where(pos, neg, wm.expand_as(sigma)).max(dim=1)
    spill = m0 > g
    g = torch.where(spill, m0, g)
    d = torch.where(pos, g[:, None] - wm, torch.ones_like(sigma))
    Y = torch.where(pos, sigma / d, 0)
    rest = (1.0 - Y.sum(dim=1)).clamp_min(0)
    rows = torch.arange(sigma.shape[0], device=sigma.device)
    Y[rows[spill], c0[spill]] += rest[spill]
    Y = Y / Y.sum(dim=1, keepdim=True)
    psi = -torch.xlogy(sigma, Y).sum(dim=1) - (Y * torch.where(torch.isfinite(wm), wm, 0)).sum(1)
    return Y, psi
