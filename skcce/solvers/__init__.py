r"""Exact solvers for the soft pseudo-labels of a batch (the y-step of self-labeling).

Given predictions ``probs`` :math:`\sigma` (N, K), :func:`solve_pseudo_labels` minimises

.. math::  F(Y) = \sum_i H(y_i, \sigma_i) + \lambda\, KL(\cdot), \qquad y_i \in \Delta_K,

(see :mod:`skcce.losses` for the convention) over row-stochastic ``Y``. The KL term is of the
marginal :math:`\bar y = s / N`, :math:`s = \sum_i y_i`, or, with a ``carry`` ``c`` of column
mass from earlier rows, of :math:`(s + c) / (N + \sum_k c_k)`. Methods:

``"newton"`` (default for the collision and reverse losses)
    For the collision loss on CPU (and CUDA, solved on the host), a compiled primal-dual
    interior point with column generation (:mod:`skcce.solvers._kernels._interior`): each row
    keeps the few classes it may use, and each iteration solves one K x K Newton system on
    the column sums. That system is factored densely while ``K^2 <= 48 N`` and otherwise
    solved matrix-free by preconditioned conjugate gradients
    (:mod:`skcce.solvers._kernels._schur_cg`), whose products cost O(N + K) instead of the
    factorisation's O(K^3): an iteration solves the system twice (predictor and corrector),
    conjugate gradients take at most K products a solve, each a pass over the rows' N x 8
    support entries, and the rule picks them when even that worst case (2 K x 8 N) is cheaper
    than one factorisation (K^3 / 3). Every iteration then costs O(N x support + K x
    products) and each certificate one pass over the N x K predictions. Elsewhere (the
    reverse loss, ``SKCCE_SOLVER=torch``, or a compiled run that does not certify):
    semismooth Newton on the K-dimensional concave dual (:mod:`skcce.solvers._newton`); the
    labels are the exact row best responses to the dual variables or, for the collision loss,
    the best convex combination of recent ones (:mod:`skcce.solvers._master`), which is what
    an optimum at a kink of the dual needs.
``"newton-cg"``, ``"newton-dense"``
    ``"newton"`` with its Newton system always solved matrix-free, or always factored
    densely, whatever the shape.
``"em"``
    The paper's Algorithm 1 inner loop: E-step :math:`S_{ik} = y_{ik}/\sum_j y_{jk}` (with a
    carry: :math:`y_{ik}/(\sum_j y_{jk} + c_k)`) and the exact M-step of Theorem 1 / section 3
    (safeguarded Newton on the scalar ``x``), warm-started from ``init``. Defined for the
    reverse fairness (loss (b)) and every loss. The certificate is computed on the first
    iterations and then every 10th.
``"pgd"``
    Projected gradient descent with a monotone backtracking step (the generic baseline);
    default for the Shannon loss (both fairness terms).
``"sinkhorn"``
    The SeLa baseline (Asano et al. 2020, :mod:`skcce.solvers._sinkhorn`): labels with column means
    equal to ``prior`` (a hard constraint instead of the fairness term) by Sinkhorn–Knopp on
    :math:`\sigma^{\lambda}`. A different problem: ``lam`` is SeLa's sharpness, ``loss`` must be
    "shannon", ``fairness`` is ignored, and ``gap`` is a marginal violation, not a certificate.

**Stopping rule (certified).** Every method stops when the duality gap
``F(Y) - q(w) <= tol * max(|F(Y)|, 1)``, where ``q(w)`` is the Lagrangian dual of
:mod:`skcce.solvers._duality` evaluated at a multiplier derived from the current iterate. Since
``q(w) <= F* <= F(Y)``, ``converged=True`` certifies that ``Y`` is within the relative tolerance of
the optimum; it is never set on an objective-decrease heuristic.
"""

from __future__ import annotations

import functools

import torch

from skcce.solvers import _compiled, _em, _newton, _pgd, _sinkhorn
from skcce.solvers._common import PseudoLabelResult, trivial_labels
from skcce.solvers._duality import Problem
from skcce.solvers._validation import METHODS as METHODS
from skcce.solvers._validation import resolve_method, validate, validate_carry

__all__ = ["PseudoLabelResult", "resolve_method", "solve_pseudo_labels"]


def solve_pseudo_labels(
    probs,
    *,
    lam: float,
    fairness: str = "reverse",
    prior=None,
    loss: str = "collision",
    method: str = "auto",
    init=None,
    tol: float | None = None,
    max_iter: int | None = None,
    carry=None,
) -> PseudoLabelResult:
    r"""Solve :math:`\min_Y \sum_i H(y_i, \sigma_i) + \lambda KL(\cdot)` over row-stochastic Y.

    Parameters
    ----------
    probs : torch.Tensor or array-like of shape (N, K)
        Predictions :math:`\sigma`; rows must be probability vectors (exact zeros allowed).
        float32 and float64 tensors keep their dtype and device (CPU or CUDA); other inputs
        become float64.
    lam : float
        Fairness weight λ >= 0 (summed-rows convention of :mod:`skcce.losses`).
    fairness : {"reverse", "forward"}, default="reverse"
        :math:`KL(u\|\bar y)` (loss (b), strong fairness) or :math:`KL(\bar y\|u)` (loss (a)).
    prior : array-like of shape (K,), optional
        Class prior ``u`` (a distribution; zeros allowed); uniform when None.
    loss : {"collision", "shannon", "reverse"}, default="collision"
        Cross-entropy term :math:`H_2(y,\sigma)`, :math:`H(y,\sigma)` or :math:`H(\sigma,y)`.
    method : str, default="auto"
        One of "auto", "newton", "newton-cg", "newton-dense", "em", "pgd", "sinkhorn" (see the
        module docstring). "auto" is "newton" for the collision and reverse losses and "pgd"
        for the Shannon loss.
    init : array-like of shape (N, K), optional
        Warm start for "em" and "pgd" (rows on the simplex), and the starting dual variables of
        "newton" (through its column sums). Default: ``probs``.
    tol : float, optional
        Relative certified gap at which to stop. Default 1e-7 for float64, 1e-5 for float32.
    max_iter : int, optional
        Iteration cap (default 100 for newton, 5000 for em, 20000 for pgd). With "newton" it
        also caps the PGD safeguard that runs if the dual ascent stalls (default 20000).
    carry : array-like of shape (K,), optional
        Column mass carried into the fairness term from earlier rows (finite, ``>= 0``; a
        running marginal across batches): with column sums :math:`s = \sum_i y_i` the
        marginal is (s + carry)/(N + sum(carry)) instead of :math:`s / N`. None or zeros: the
        batch's own marginal. Not accepted by "sinkhorn", which has no fairness term; with
        ``fairness="forward"`` it must be zero where ``prior`` is.

    Returns
    -------
    PseudoLabelResult
        ``labels``, ``objective``, ``gap``, ``n_iter``, ``converged``, ``method``.

    Raises
    ------
    ValueError
        Non-finite or non-stochastic ``probs``/``init``, negative ``lam``, wrong shapes, a
        prior that is not a distribution, an unsupported method/loss combination, or a
        ``carry`` that is negative, not finite, of the wrong shape or given to "sinkhorn".

    Examples
    --------
    >>> import torch
    >>> from skcce.solvers import solve_pseudo_labels
    >>> probs = torch.tensor([[0.9, 0.1], [0.8, 0.2], [0.6, 0.4], [0.3, 0.7]], dtype=torch.float64)
    >>> res = solve_pseudo_labels(probs, lam=100.0)
    >>> res.converged, res.labels.shape
    (True, torch.Size([4, 2]))
    >>> bool(torch.allclose(res.labels.sum(dim=1), torch.ones(4, dtype=torch.float64)))
    True
    """
    probs, lam, prior, init, method = validate(probs, lam, fairness, prior, loss, method, init)
    carry = validate_carry(carry, probs, prior, fairness, method)
    if tol is None:
        tol = 1e-5 if probs.dtype == torch.float32 else 1e-7
    problem = Problem(probs, lam, fairness, prior, loss, carry)
    return _solve(problem, method, init, tol=tol, max_iter=max_iter)


#: method -> its private solver: ``_solve(problem, init, *, tol, max_iter) -> PseudoLabelResult``
#: (``max_iter=None``: the method's own default)
_SOLVERS = {
    "newton": _newton._solve,
    "newton-cg": functools.partial(_newton._solve, method="newton-cg"),
    "newton-dense": functools.partial(_newton._solve, method="newton-dense"),
    "em": _em._solve,
    "pgd": _pgd._solve,
    "sinkhorn": _sinkhorn._solve,
}


def _solve(problem, method, init=None, *, tol, max_iter=None) -> PseudoLabelResult:
    """Solve a validated problem with a resolved method (prior validation of data is assumed).

    The engine's path: ``problem`` is a :class:`~skcce.solvers._duality.Problem` built from
    rows already on the simplex and a prior tensor (see :func:`make_problem`), ``method`` a
    value of :func:`resolve_method`. Nothing is checked here. On CPU, for the collision loss
    with ``"newton"`` or ``"em"``, the compiled kernels answer first when enabled
    (:mod:`skcce.solvers._compiled`); the torch method runs when they do not apply or do not
    certify.
    """
    if method != "sinkhorn" and (problem.k == 1 or problem.lam == 0):
        Y = trivial_labels(problem)
        return PseudoLabelResult(Y, float(problem.objective(Y)), 0.0, 0, True, method)
    fast = _compiled.solve(problem, method, init, tol=tol, max_iter=max_iter)
    if fast is not None:  # certified by the compiled kernels (CPU, collision loss)
        return fast
    return _SOLVERS[method](problem, init, tol=tol, max_iter=max_iter)


def make_problem(probs, *, lam, fairness, prior, loss, carry=None) -> Problem:
    """The :class:`~skcce.solvers._duality.Problem` of validated inputs (``prior`` None:
    uniform; ``carry`` None: no carried column mass, see :func:`solve_pseudo_labels`), for
    :func:`_solve`."""
    if prior is None:
        k = probs.shape[1]
        prior = torch.full((k,), 1.0 / k, dtype=probs.dtype, device=probs.device)
    else:
        prior = prior.to(dtype=probs.dtype, device=probs.device)
    return Problem(probs, float(lam), fairness, prior, loss, carry)
