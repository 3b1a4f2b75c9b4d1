r"""SeLa pseudo-labels: equipartition by Sinkhorn–Knopp (the ``"sinkhorn"`` method).

The self-labeling baseline of Asano, Rupprecht and Vedaldi (SeLa, ICLR 2020) replaces the
fairness term of :mod:`skcce.solvers` by a hard constraint: the labels of a batch must use
the clusters in the proportions of the prior ``u`` (equipartition when ``u`` is uniform).
With :math:`Q = Y / N` (a joint distribution over samples and clusters) SeLa solves

.. math::  \min_{Q \in U(r, c)} \langle Q, -\ln P \rangle - \frac{1}{\lambda_s} H(Q),
   \qquad U(r, c) = \{Q \ge 0 : Q\mathbf 1 = r = \mathbf 1/N,\ Q^\top \mathbf 1 = c = u\},

an entropy-regularised optimal transport problem with cost :math:`-\ln\sigma_{ik}` and
regularisation :math:`\varepsilon = 1/\lambda_s`. Its minimiser has the form
:math:`Q = \mathrm{diag}(\alpha)\, P^{\lambda_s} \mathrm{diag}(\beta)` (the Gibbs kernel of the
cost is :math:`e^{-C/\varepsilon} = P^{\lambda_s}`, entrywise power), and Sinkhorn–Knopp finds
the scalings :math:`\alpha, \beta` by alternately matching the column and the row marginals.

In the summed-rows convention of :mod:`skcce.losses` (labels :math:`Y = NQ`, rows on the
simplex) the same problem reads *(derived)*: minimise

.. math::  F_S(Y) = \sum_i H(y_i, \sigma_i) - \frac{1}{\lambda_s} \sum_i H(y_i)
   \quad\text{subject to}\quad y_i \in \Delta_K,\ \ \bar y = \tfrac1N \sum_i y_i = u,

because :math:`N \langle Q, -\ln P\rangle = \sum_i H(y_i, \sigma_i)` and
:math:`N H(Q) = \sum_i H(y_i) + N \ln N`. The constraint :math:`\bar y = u` makes both
fairness terms of skcce vanish (:math:`KL(u\|\bar y) = KL(\bar y\|u) = 0`), so the method
ignores ``fairness``; the row term is Shannon's cross-entropy, so it pairs with
``loss="shannon"`` (:func:`skcce.solvers.resolve_method` enforces this).

What the fields of :class:`skcce.solvers.PseudoLabelResult` mean for this method
---------------------------------------------------------------------------------
``lam``
    The SeLa sharpness :math:`\lambda_s > 0` (inverse temperature of the kernel
    :math:`P^{\lambda_s}`; SeLa's default is 25). It is **not** the fairness weight λ of the
    other methods: here balance is a constraint, and :math:`\lambda_s` only trades the
    cross-entropy against the entropy of the labels. Large :math:`\lambda_s` gives nearly hard
    labels (the linear programme of hard equipartition as :math:`\lambda_s\to\infty`) and slower
    convergence; small :math:`\lambda_s` gives labels close to the prior. ``lam=0`` is rejected.
``labels``
    :math:`Y = NQ` after a row update: every row lies on the simplex (up to rounding), and
    the column means :math:`\bar y` approach ``u``. SeLa trains on the hard labels
    :math:`\arg\max_k y_{ik}`; they are one ``argmax`` away, the soft ones are returned.
``objective``
    :math:`F_S(Y)` above at the returned labels (``0 \cdot \ln 0 = 0``).
``gap``
    **Not a duality gap**: the marginal violation :math:`\|\bar y - u\|_1` of the returned
    labels (their row marginals hold by construction). No certificate of optimality in
    :math:`F_S` is computed.
``converged``
    True when the marginal violation is ``<= tol``. The optimum of the regularised problem is
    unique and Sinkhorn's iterates converge to it whenever the problem is feasible, so a small
    violation means labels close to the SeLa solution, but no bound on :math:`F_S` is claimed.
``n_iter``
    Sinkhorn iterations (one column and one row update each).

Computation: in log space, :math:`\ln y_{ik} = \lambda_s \ln\sigma_{ik} + a_i + b_k` with
``logsumexp`` updates, so neither large :math:`\lambda_s` nor exact zeros in ``probs``
(:math:`\ln 0 = -\infty`) overflow or produce NaN; float32 or float64, on the device of
``probs``, vectorised over the batch. ``init`` is not used (no warm start).

Infeasible problems (exact zeros in ``probs`` can forbid the required marginals, e.g. a
column of zeros with a positive prior) end with ``converged=False``; a row whose whole support
lies in clusters of zero prior keeps its ``probs`` row as label.

References
----------
Y. M. Asano, C. Rupprecht and A. Vedaldi, "Self-labelling via simultaneous clustering and
representation learning", ICLR 2020. M. Cuturi, "Sinkhorn distances: lightspeed computation
of optimal transport", NeurIPS 2013.
"""

from __future__ import annotations

import math

import torch

from skcce.solvers._common import PseudoLabelResult

__all__ = ["sinkhorn_labels", "sinkhorn_objective"]


def sinkhorn_objective(labels: torch.Tensor, probs: torch.Tensor, lam: float) -> torch.Tensor:
    r"""SeLa's objective in the summed-rows convention, :math:`F_S(Y)`.

    :math:`F_S(Y) = \sum_i H(y_i, \sigma_i) - \frac{1}{\lambda_s}\sum_i H(y_i)`, with
    :math:`0\cdot\ln 0 = 0` in both terms (an entry with :math:`y_{ik} > 0 = \sigma_{ik}` gives
    :math:`+\infty`).

    Parameters
    ----------
    labels : torch.Tensor of shape (N, K)
        Rows on the simplex.
    probs : torch.Tensor of shape (N, K)
        Predictions :math:`\sigma`, same dtype and device.
    lam : float
        SeLa sharpness :math:`\lambda_s > 0`.

    Returns
    -------
    value : torch.Tensor
        0-d tensor, dtype of ``labels``.

    Examples
    --------
    >>> import torch
    >>> from skcce.solvers._sinkhorn import sinkhorn_objective
    >>> Y = torch.tensor([[1.0, 0.0], [0.5, 0.5]], dtype=torch.float64)
    >>> P = torch.tensor([[0.5, 0.5], [0.5, 0.5]], dtype=torch.float64)
    >>> round(float(sinkhorn_objective(Y, P, lam=1.0)), 6)  # 2 ln 2 - ln 2
    0.693147
    """
    pos = labels > 0
    safe_y = torch.where(pos, labels, torch.ones_like(labels))
    cross = torch.where(pos, -labels * torch.log(probs), torch.zeros_like(labels))
    ent = torch.where(pos, -labels * torch.log(safe_y), torch.zeros_like(labels))
    return cross.sum() - ent.sum() / lam


def _lse(x: torch.Tensor, dim: int) -> torch.Tensor:
    return torch.logsumexp(x, dim=dim)


def _scale(log_k, prior, tol, max_iter):
    """The Sinkhorn iterations on the kernel ``exp(log_k)``: ``(a, b, violation, n_iter)``."""
    n = log_k.shape[0]
    log_c = torch.log(prior * n)  # -inf where the prior is 0
    zero = torch.zeros((), dtype=log_k.dtype, device=log_k.device)
    b = torch.zeros_like(prior)

    def rows(b):
        lse = _lse(log_k + b[None, :], 1)
        # a row with no reachable cluster stays empty (fixed below): never -inf - -inf
        return torch.where(torch.isfinite(lse), -lse, zero)

    a = rows(b)
    n_iter = 0
    while True:
        # column log-sums of the current labels (rows exact): the violation and the next
        # column update share them
        lse = _lse(log_k + a[:, None], 0)
        finite = torch.isfinite(lse)
        col_mean = torch.where(finite, torch.exp(lse + b), zero) / n
        viol = float((col_mean - prior).abs().sum())
        if viol <= tol or n_iter >= max_iter:
            return a, b, viol, n_iter
        b = torch.where(finite, log_c - lse, zero)
        a = rows(b)
        n_iter += 1


def sinkhorn_labels(
    probs: torch.Tensor,
    prior: torch.Tensor,
    *,
    lam: float,
    tol: float,
    max_iter: int,
):
    r"""SeLa pseudo-labels :math:`Y = NQ` by log-domain Sinkhorn–Knopp (see the module notes).

    Iterates :math:`b_k \leftarrow \ln(N u_k) - \mathrm{LSE}_i(\lambda_s\ln\sigma_{ik} + a_i)`,
    :math:`a_i \leftarrow -\mathrm{LSE}_k(\lambda_s\ln\sigma_{ik} + b_k)` from :math:`a = b = 0`
    until :math:`\|\bar y - u\|_1 \le` ``tol`` or ``max_iter`` iterations.

    Parameters
    ----------
    probs : torch.Tensor of shape (N, K)
        Predictions :math:`\sigma` (float32 or float64, any device); rows on the simplex,
        exact zeros allowed. Validated by the caller (:func:`skcce.solvers.solve_pseudo_labels`).
    prior : torch.Tensor of shape (K,)
        Target cluster proportions ``u`` (zeros allowed), same dtype and device.
    lam : float
        SeLa sharpness :math:`\lambda_s > 0` (SeLa's default: 25).
    tol : float
        Marginal violation :math:`\|\bar y - u\|_1` at which to stop.
    max_iter : int
        Iteration cap (>= 0).

    Returns
    -------
    labels : torch.Tensor of shape (N, K)
        Rows on the simplex, dtype and device of ``probs``.
    objective : float
        :func:`sinkhorn_objective` of ``labels``.
    violation : float
        :math:`\|\bar y - u\|_1` of ``labels``.
    n_iter : int
        Iterations run.
    converged : bool
        ``violation <= tol``.

    Raises
    ------
    ValueError
        ``lam`` not a positive finite number.

    Examples
    --------
    >>> import torch
    >>> from skcce.solvers._sinkhorn import sinkhorn_labels
    >>> P = torch.tensor([[0.9, 0.1], [0.8, 0.2], [0.7, 0.3], [0.4, 0.6]], dtype=torch.float64)
    >>> u = torch.tensor([0.5, 0.5], dtype=torch.float64)
    >>> Y, obj, viol, n_iter, ok = sinkhorn_labels(P, u, lam=5.0, tol=1e-10, max_iter=1000)
    >>> ok, [round(v, 6) for v in Y.mean(dim=0).tolist()]
    (True, [0.5, 0.5])
    >>> Y.argmax(dim=1).tolist()  # the two least "class 0" samples go to class 1
    [0, 0, 1, 1]
    """
    lam = float(lam)
    if not math.isfinite(lam) or lam <= 0:
        raise ValueError(
            f"method='sinkhorn' needs lam > 0 (the SeLa sharpness lambda_s, e.g. 25); got {lam!r}"
        )
    log_k = lam * torch.log(probs)  # -inf where probs == 0
    a, b, viol, n_iter = _scale(log_k, prior, tol, max_iter)
    Y = torch.exp(log_k + a[:, None] + b[None, :])
    dead = Y.sum(dim=1) <= 0
    if bool(dead.any()):
        Y = torch.where(dead[:, None], probs, Y)
        viol = float((Y.mean(dim=0) - prior).abs().sum())
    objective = float(sinkhorn_objective(Y, probs, lam))
    return Y, objective, viol, n_iter, bool(viol <= tol)


DEFAULT_MAX_ITER = 1000


def _solve(problem, init, *, tol, max_iter):
    """The ``"sinkhorn"`` method on a validated problem (``init`` is not used): SeLa's
    problem, not F, so ``gap`` is the marginal violation and no certificate. A problem with a
    carry is refused (``ValueError``): SeLa's problem has no fairness term to carry into."""
    if problem.carry is not None:
        raise ValueError("method='sinkhorn' has no fairness term: a carry cannot enter it")
    max_iter = DEFAULT_MAX_ITER if max_iter is None else max_iter
    Y, value, gap, n_iter, ok = sinkhorn_labels(
        problem.probs, problem.prior, lam=problem.lam, tol=tol, max_iter=max_iter
    )
    return PseudoLabelResult(Y, value, gap, n_iter, ok, "sinkhorn")
