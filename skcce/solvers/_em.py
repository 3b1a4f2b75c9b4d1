r"""The paper's EM for the pseudo-labels (supplement, Algorithm 1 and section 3).

E-step: :math:`S_{ik} = y_{ik} / (\sum_j y_{jk} + c_k)`, with ``c`` the problem's carry (zero
without one: it enters Jensen's bound as one fixed extra row). Jensen's inequality bounds
:math:`-\lambda \sum_k u_k \ln \bar y_k` by a sum of per-row terms, so the M-step solves, for each
row independently (weights :math:`a_k = u_k S_{ik}`, :math:`A = \sum_k a_k`),

.. math::  \min_{y \in \Delta} \; H(y, \sigma) - \lambda \sum_k a_k \ln y_k .

* collision loss (supplement (d)): :math:`y_k = \lambda a_k / (1 + \lambda A - \sigma_k / x)` with
  the scalar :math:`x = \sigma^\top y` the root of :math:`\sum_k y_k(x) = 1` in
  :math:`[l, \sigma_{max}]` (Theorem 1, Lemma 1), found by safeguarded Newton from the left end
  (the sum is convex and decreasing, so the iterates increase monotonically to the root). Rows
  with classes of :math:`a_k = 0` use the closed forms of section 3, with the KKT fallback
  :math:`y_c = 0` when they are not feasible.
* Shannon loss: :math:`y_k = \lambda a_k / (C_k - \mu)`, :math:`C_k = -\ln \sigma_k`, with the
  scalar μ found by Newton from the left; a class with :math:`a_k = 0` receives the remaining mass
  when :math:`C_k` is below the root (the same reasoning as section 3).
* reverse loss: closed form :math:`y_k = (\sigma_k + \lambda a_k) / (1 + \lambda A)`.

EM is a majorise-minimise scheme, so the objective never increases.
"""

from __future__ import annotations

import torch

from skcce.solvers._common import certified_result, certify, start_point

_NEWTON_STEPS = 100


def e_step(Y: torch.Tensor, prior: torch.Tensor, carry: torch.Tensor | None = None) -> torch.Tensor:
    """Weights a_ik = u_k * y_ik / (sum_j y_jk + carry_k) (shape (N, K)); columns of zero
    total give zero weight. ``carry`` (K,) is the fairness term's carried column mass (a
    fixed extra row of Jensen's bound); None: zeros."""
    s = Y.sum(dim=0)
    if carry is not None:
        s = s + carry
    return Y * torch.where(s > 0, prior / torch.where(s > 0, s, 1), torch.zeros_like(s))


def _onehot_argmax(sigma: torch.Tensor) -> torch.Tensor:
    Y = torch.zeros_like(sigma)
    Y.scatter_(1, sigma.argmax(dim=1, keepdim=True), 1.0)
    return Y


def _collision_main(sigma, a, lam):
    """Theorem 1 on the classes with a_k > 0 (others get y_k = 0); rows with A > 0."""
    pos = a > 0
    la = lam * a
    L = 1.0 + la.sum(dim=1, keepdim=True)
    neg = torch.full_like(sigma, -torch.inf)
    lo = torch.where(pos, sigma / (L - la), neg).amax(dim=1, keepdim=True)
    hi = torch.where(pos, sigma, neg).amax(dim=1, keepdim=True)
    x = lo
    for _ in range(_NEWTON_STEPS):
        den = L - sigma / x
        t = torch.where(pos, la / den, 0)
        f = t.sum(dim=1, keepdim=True) - 1.0
        # d/dx of la/(L - s/x) = -la * s / (x^2 den^2) = -(t / den) * s / x^2
        fp = (t / den * sigma).sum(dim=1, keepdim=True)
        x_new = (x + f * x * x / fp.clamp_min(torch.finfo(a.dtype).tiny)).clamp(lo, hi)
        if bool((x_new == x).all()):
            break
        x = x_new
    Y = torch.where(pos, la / (L - sigma / x), 0).clamp_min(0)
    Y = Y / Y.sum(dim=1, keepdim=True)
    # lam * a below the working precision of L (e.g. lam -> 0 in float32): the denominator of
    # the arg-max class rounds to 0. The limit is then all mass on the largest sigma among
    # the classes of positive weight.
    bad = ~torch.isfinite(Y).all(dim=1, keepdim=True)
    if bool(bad.any()):
        best = torch.where(pos, sigma, torch.full_like(sigma, -torch.inf)).argmax(1, keepdim=True)
        Y = torch.where(bad, torch.zeros_like(Y).scatter_(1, best, 1.0), Y)
    return Y


def mstep_collision(sigma: torch.Tensor, a: torch.Tensor, lam: float) -> torch.Tensor:
    """M-step (d) for all rows, every case of the supplement's section 3."""
    A = a.sum(dim=1)
    none = A <= 0
    zero = a <= 0
    has_zero = zero.any(dim=1) & ~none
    Y = _collision_main(sigma, a, lam)
    if bool(has_zero.any()):
        # section 3: all remaining mass on c = argmax_{k in K_o} sigma_k, if feasible
        neg = torch.full_like(sigma, -torch.inf)
        sc, c = torch.where(zero, sigma, neg).max(dim=1, keepdim=True)
        smax_pos = torch.where(zero, neg, sigma).amax(dim=1, keepdim=True)
        L = 1.0 + lam * A[:, None]
        yk = torch.where(zero, 0, lam * a / (L * (1.0 - sigma / sc)))
        yc = 1.0 - yk.sum(dim=1, keepdim=True)
        ok = has_zero & (sc > smax_pos).squeeze(1) & (yc > 0).squeeze(1)
        Yo = yk.scatter(1, c, yc.clamp_min(0))
        Y = torch.where(ok[:, None], Yo, Y)
    if bool(none.any()):
        Y = torch.where(none[:, None], _onehot_argmax(sigma), Y)
    return Y


def mstep_shannon(sigma: torch.Tensor, a: torch.Tensor, lam: float) -> torch.Tensor:
    """M-step for the Shannon cross-entropy term (see module docstring)."""
    tiny = torch.finfo(a.dtype).tiny
    C = -torch.log(sigma)
    pos = a > 0
    la = lam * a
    inf = torch.full_like(sigma, torch.inf)
    m = torch.where(pos, C, inf).amin(dim=1, keepdim=True)
    # g(mu) = sum_k la_k / (C_k - mu) - 1 is convex and increasing on (-inf, m), with
    # g(m - sum la) <= 0 and a pole at m. A Newton step from the left can overshoot the root
    # (even past the pole), so keep a bracket [lo, hi] and bisect when a step leaves it.
    lo = m - la.sum(dim=1, keepdim=True)
    hi = m
    mu = lo
    for _ in range(_NEWTON_STEPS):
        den = torch.where(pos, C - mu, 1)
        t = torch.where(pos, la / den, 0)
        g = t.sum(dim=1, keepdim=True) - 1.0
        lo = torch.where(g <= 0, mu, lo)
        hi = torch.where(g >= 0, mu, hi)
        gp = (t / den).sum(dim=1, keepdim=True)
        mu_new = mu - g / gp.clamp_min(tiny)
        outside = ~((mu_new > lo) & (mu_new < hi))
        mu_new = torch.where(outside, 0.5 * (lo + hi), mu_new)
        mu_new = torch.where(g == 0, mu, mu_new)
        if bool((mu_new == mu).all()):
            break
        mu = mu_new
    cc, c = torch.where(pos, inf, C).min(dim=1, keepdim=True)
    spill = cc < mu  # a class of zero weight is cheaper than the root: it takes the rest
    mu = torch.where(spill, cc, mu)
    Y = torch.where(pos, la / torch.where(pos, C - mu, 1), 0)
    rest = (1.0 - Y.sum(dim=1, keepdim=True)).clamp_min(0)
    Y = torch.where(spill, Y.scatter_add(1, c, rest), Y)
    none = ~pos.any(dim=1, keepdim=True)
    Y = torch.where(none, _onehot_argmax(sigma), Y)
    return Y / Y.sum(dim=1, keepdim=True)


def mstep_reverse(sigma: torch.Tensor, a: torch.Tensor, lam: float) -> torch.Tensor:
    """Closed-form M-step for the reverse cross-entropy term H(sigma, y)."""
    num = sigma + lam * a
    return num / num.sum(dim=1, keepdim=True)


MSTEPS = {"collision": mstep_collision, "shannon": mstep_shannon, "reverse": mstep_reverse}


DEFAULT_MAX_ITER = 5000
_CERTIFY_EVERY = 10  # the certificate costs a full best-response walk; an EM step is cheap


def run(problem, Y, *, tol, max_iter):
    """EM from ``Y`` until certified; returns ``(Y, value, gap, n_iter, converged)``.

    The certificate is computed on the first 8 iterations, then every ``_CERTIFY_EVERY``-th
    one, and at the iteration cap.
    """
    value = problem.objective(Y)
    n_iter = 0
    gap = torch.tensor(torch.inf)
    mstep = MSTEPS[problem.loss]
    while True:
        if n_iter < 8 or n_iter % _CERTIFY_EVERY == 0 or n_iter >= max_iter:
            gap, ok = certify(problem, Y, value, tol)
            if ok:
                return Y, value, gap, n_iter, True
        if n_iter >= max_iter:
            return Y, value, gap, n_iter, False
        n_iter += 1
        Y = mstep(problem.probs, e_step(Y, problem.prior, problem.carry), problem.lam)
        value = problem.objective(Y)


def _solve(problem, init, *, tol, max_iter):
    """The ``"em"`` method on a validated problem (:func:`skcce.solvers.solve_pseudo_labels`)."""
    max_iter = DEFAULT_MAX_ITER if max_iter is None else max_iter
    Y, value, gap, n_iter, ok = run(problem, start_point(problem, init), tol=tol, max_iter=max_iter)
    return certified_result(Y, value, gap, n_iter, ok, "em")
