r"""Exact solvers for the soft pseudo-labels of a batch (the y-step of self-labeling).

Given predictions ``probs`` :math:`\sigma` (N, K), :func:`solve_pseudo_labels` minimises

.. math::  F(Y) = \sum_i H(y_i, \sigma_i) + \lambda\, KL(\cdot), \qquad y_i \in \Delta_K,

(see :mod:`skcce.losses` for the convention) over row-stochastic ``Y``. Methods:

``"newton"`` (default for the collision and reverse losses)
    Semismooth Newton on the K-dimensional concave dual (:mod:`skcce._newton`); the labels are
    the exact row best responses to the dual variables or, for the collision loss, the best
    convex combination of recent ones (:mod:`skcce._master`), which is what an optimum at a kink
    of the dual needs.
``"em"``
    The paper's Algorithm 1 inner loop: E-step :math:`S_{ik} = y_{ik}/\sum_j y_{jk}` and the exact
    M-step of Theorem 1 / section 3 (safeguarded Newton on the scalar ``x``), warm-started from
    ``init``. Defined for the reverse fairness (loss (b)) and every loss. The certificate is
    computed on the first iterations and then every 10th.
``"pgd"``
    Projected gradient descent with a monotone backtracking step (the generic baseline);
    default for the Shannon loss (both fairness terms).
``"sinkhorn"``
    The SeLa baseline (Asano et al. 2020, :mod:`skcce._sinkhorn`): labels with column means
    equal to ``prior`` (a hard constraint instead of the fairness term) by Sinkhorn–Knopp on
    :math:`\sigma^{\lambda}`. A different problem: ``lam`` is SeLa's sharpness, ``loss`` must be
    "shannon", ``fairness`` is ignored, and ``gap`` is a marginal violation, not a certificate.

**Stopping rule (certified).** Every method stops when the duality gap
``F(Y) - q(w) <= tol * max(|F(Y)|, 1)``, where ``q(w)`` is the Lagrangian dual of
:mod:`skcce._duality` evaluated at a multiplier derived from the current iterate. Since
``q(w) <= F* <= F(Y)``, ``converged=True`` certifies that ``Y`` is within the relative tolerance of
the optimum; it is never set on an objective-decrease heuristic.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

import numpy as np
import scipy.sparse
import torch

from skcce._duality import Problem
from skcce._em import MSTEPS, e_step
from skcce._newton import newton
from skcce._pgd import pgd_step
from skcce._sinkhorn import sinkhorn_labels
from skcce.losses import FAIRNESS, LOSSES

__all__ = ["PseudoLabelResult", "resolve_method", "solve_pseudo_labels"]

METHODS = ("auto", "newton", "em", "pgd", "sinkhorn")
_DEFAULT_MAX_ITER = {"newton": 100, "em": 5000, "pgd": 20000, "sinkhorn": 1000}
_CERTIFY_EVERY = 10


@dataclass
class PseudoLabelResult:
    """Result of :func:`solve_pseudo_labels`.

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
    """

    labels: torch.Tensor
    objective: float
    gap: float
    n_iter: int
    converged: bool
    method: str


def _as_tensor(x, name, dtype=None, device=None):
    if isinstance(x, torch.Tensor):
        t = x
    else:
        arr = np.asarray(x)
        if arr.dtype.kind not in "fiub":
            raise ValueError(f"{name} must be numeric; got an array of dtype {arr.dtype}")
        # (a read-only array is copied: torch.from_numpy warns on non-writable memory)
        t = torch.from_numpy(np.ascontiguousarray(arr) if arr.flags.writeable else arr.copy())
    if dtype is None:
        dtype = t.dtype if t.dtype in (torch.float32, torch.float64) else torch.float64
    return t.to(dtype=dtype, device=device)


def _check_rows_on_simplex(t, name, tol=None):
    """Rows of ``t`` on the simplex: finite, non-negative, summing to 1 within ``tol`` (the
    largest allowed deviation; default by dtype, 1e-4 (float32) or 1e-8 per column)."""
    if tol is None:
        tol = (1e-4 if t.dtype == torch.float32 else 1e-8) * max(1, t.shape[1])
    if not bool(torch.isfinite(t).all()):
        raise ValueError(f"{name} contains NaN or infinite values")
    if bool((t < 0).any()):
        raise ValueError(f"{name} contains negative values; rows must be probability vectors")
    err = (t.sum(dim=1) - 1).abs().max()
    if float(err) > tol:
        raise ValueError(
            f"rows of {name} must sum to 1 (largest deviation {float(err):.3g}); pass "
            "probabilities (e.g. softmax of the logits), not logits"
        )


def _half_eps(x):
    """Machine epsilon of a float16 / bfloat16 array or tensor; None for any other input."""
    dtype = getattr(x, "dtype", None)
    if isinstance(dtype, torch.dtype):
        low = dtype in (torch.float16, torch.bfloat16)
        return torch.finfo(dtype).eps if low else None
    if isinstance(dtype, np.dtype) and dtype == np.float16:
        return float(np.finfo(np.float16).eps)
    return None


def _checked_rows(x, name, dtype=None, device=None, eps=None):
    """``x`` as a float tensor with rows on the simplex (see :func:`_check_rows_on_simplex`).

    Half-precision inputs (float16, bfloat16) become float64 and are checked at their own
    precision: each entry is rounded to a relative ``eps / 2``, so a row of probabilities
    sums to 1 within ``eps / 2`` whatever K; we allow ``4 eps`` and then divide the rows
    by their sums, so the solver sees exact rows. ``eps`` overrides the precision read
    from ``x`` (for a caller that already converted it).
    """
    if isinstance(x, torch.Tensor) and x.layout != torch.strided:
        raise TypeError(f"{name} is a sparse tensor; pass a dense one ({name}.to_dense())")
    if scipy.sparse.issparse(x):
        raise TypeError(f"{name} is a sparse matrix; pass a dense array ({name}.toarray())")
    eps = _half_eps(x) if eps is None else eps
    t = _as_tensor(x, name, dtype, device)
    if t.ndim != 2:
        return t  # the caller names the shape it needs
    tol = None
    if eps is not None:
        base = (1e-4 if t.dtype == torch.float32 else 1e-8) * max(1, t.shape[1])
        tol = max(4 * eps, base)
    if t.shape[0] and t.shape[1]:
        _check_rows_on_simplex(t, name, tol)
        if eps is not None:
            t = t / t.sum(dim=1, keepdim=True)
    return t


def resolve_method(method: str, loss: str, fairness: str) -> str:
    """The solver that ``method`` names for this loss and fairness ("auto" resolved).

    Raises
    ------
    ValueError
        An unknown method, or one that does not solve this loss/fairness combination.
    """
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}; got {method!r}")
    if method == "auto":
        if loss == "shannon":
            method = "pgd"  # measured: EM needs thousands of iterations where PGD needs tens
        else:
            method = "newton"
    if method == "em" and fairness != "reverse":
        raise ValueError(
            "method='em' is the paper's EM for the reverse fairness KL(u||ybar) (loss (b)); "
            "use method='newton' or 'pgd' for fairness='forward'"
        )
    if method == "sinkhorn" and loss != "shannon":
        raise ValueError(
            "method='sinkhorn' is the SeLa baseline: Shannon cross-entropy with an "
            f"equipartition constraint; use loss='shannon' (got loss={loss!r}). It accepts "
            "either fairness (the constraint replaces the fairness term)"
        )
    if method == "newton" and loss == "shannon":
        raise ValueError(
            "method='newton' needs a strictly convex row term; use 'em' or 'pgd' with "
            "loss='shannon'"
        )
    return method


def _validate(probs, lam, fairness, prior, loss, method, init):
    if fairness not in FAIRNESS:
        raise ValueError(f"fairness must be one of {FAIRNESS}; got {fairness!r}")
    if loss not in LOSSES:
        raise ValueError(f"loss must be one of {LOSSES}; got {loss!r}")
    probs = _checked_rows(probs, "probs")
    if probs.ndim != 2:
        raise ValueError(f"probs must have shape (N, K); got shape {tuple(probs.shape)}")
    if probs.shape[0] == 0 or probs.shape[1] == 0:
        raise ValueError(f"probs is empty (shape {tuple(probs.shape)})")
    try:
        lam = float(lam)
    except (TypeError, ValueError):
        raise ValueError(f"lam must be a non-negative number; got {lam!r}") from None
    if not np.isfinite(lam) or lam < 0:
        raise ValueError(f"lam must be a finite non-negative number; got {lam!r}")
    k = probs.shape[1]
    if prior is None:
        prior = torch.full((k,), 1.0 / k, dtype=probs.dtype, device=probs.device)
    else:
        eps = _half_eps(prior)
        prior = _as_tensor(prior, "prior", probs.dtype, probs.device)
        if prior.shape != (k,):
            raise ValueError(f"prior must have shape ({k},); got {tuple(prior.shape)}")
        prior = _checked_rows(prior[None, :], "prior", eps=eps)[0]
    if init is not None:
        init = _checked_rows(init, "init", probs.dtype, probs.device)
        if init.shape != probs.shape:
            raise ValueError(
                f"init must have the shape of probs {tuple(probs.shape)}; got {tuple(init.shape)}"
            )
    method = resolve_method(method, loss, fairness)
    return probs, lam, prior, init, method


def _trivial(problem):
    """Closed forms: K = 1, or lam = 0 (rows independent)."""
    sigma = problem.probs
    if problem.k == 1:
        return torch.ones_like(sigma)
    if problem.loss == "reverse":
        return sigma.clone()
    Y = torch.zeros_like(sigma)
    return Y.scatter_(1, sigma.argmax(dim=1, keepdim=True), 1.0)


def _start(problem, init):
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
            Y = 0.999 * Y + 0.001 * problem.prior
    return Y


def _iterate(problem, Y, method, tol, max_iter):
    value = problem.objective(Y)
    eta = 1.0 / max(problem.n, 1)
    n_iter = 0
    gap = torch.tensor(torch.inf)
    while True:
        # the certificate costs a full best-response walk: for EM (many cheap iterations)
        # certify on the first iterations and then every _CERTIFY_EVERY-th one
        certify = method != "em" or n_iter < 8 or n_iter % _CERTIFY_EVERY == 0
        if certify or n_iter >= max_iter:
            _, gap = problem.gap(Y, problem.initial_w(Y))
            if bool(torch.isfinite(value)) and bool(gap <= tol * problem.scale(value)):
                return Y, value, gap, n_iter, True
        if n_iter >= max_iter:
            return Y, value, gap, n_iter, False
        n_iter += 1
        if method == "em":
            Y = MSTEPS[problem.loss](problem.probs, e_step(Y, problem.prior), problem.lam)
            value = problem.objective(Y)
        else:
            Y, value, eta, moved = pgd_step(problem, Y, value, eta)
            if not moved:
                _, gap = problem.gap(Y, problem.initial_w(Y))
                ok = bool(torch.isfinite(value)) and bool(gap <= tol * problem.scale(value))
                return Y, value, gap, n_iter, ok


# --- issue 14: opt-in compiled path ------------------------------------------------------------
# Collision loss, "newton" (default) or "em", CPU float32/float64 input, lam > 0 and K >= 2, when
# numba is importable: the validated problem goes to skcce._kernels_numba (same certified stopping
# rule). An uncertified compiled run falls back to the torch path below, which stays the
# reference and the CUDA path. SKCCE_SOLVER=torch (read at import) or _USE_COMPILED = False
# forces the torch path.
_USE_COMPILED = os.environ.get("SKCCE_SOLVER", "").lower() != "torch"


def _compiled_solve(probs, lam, prior, fairness, loss, method, init, tol, max_iter):
    if not (_USE_COMPILED and loss == "collision" and method in ("newton", "em")):
        return None
    if probs.device.type != "cpu" or lam <= 0 or probs.shape[1] < 2 or probs.requires_grad:
        return None
    try:
        from skcce._kernels_numba import solve_collision_numba
    except ImportError:  # numba missing or broken: the torch path
        return None
    np_dtype = np.float32 if probs.dtype == torch.float32 else np.float64
    out = solve_collision_numba(
        probs.numpy(), lam, prior.double().numpy(), fairness, tol=tol, max_iter=max_iter,
        init=None if init is None else init.detach().numpy(), method=method, labels_dtype=np_dtype,
    )  # fmt: skip
    if not out.certified:
        return None
    labels = torch.from_numpy(out.labels)
    return PseudoLabelResult(labels, out.objective, out.gap, out.n_iter, True, method)


# --- end issue 14 ---------------------------------------------------------------------------------


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
    method : {"auto", "newton", "em", "pgd", "sinkhorn"}, default="auto"
        See the module docstring. "auto" is "newton" for the collision and reverse losses and
        "pgd" for the Shannon loss.
    init : array-like of shape (N, K), optional
        Warm start for "em" and "pgd" (rows on the simplex), and the starting dual variables of
        "newton" (through its column sums). Default: ``probs``.
    tol : float, optional
        Relative certified gap at which to stop. Default 1e-7 for float64, 1e-5 for float32.
    max_iter : int, optional
        Iteration cap (default 100 for newton, 5000 for em, 20000 for pgd). With "newton" it
        also caps the PGD safeguard that runs if the dual ascent stalls (default 20000).

    Returns
    -------
    PseudoLabelResult
        ``labels``, ``objective``, ``gap``, ``n_iter``, ``converged``, ``method``.

    Raises
    ------
    ValueError
        Non-finite or non-stochastic ``probs``/``init``, negative ``lam``, wrong shapes, a
        prior that is not a distribution, or an unsupported method/loss combination.

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
    probs, lam, prior, init, method = _validate(probs, lam, fairness, prior, loss, method, init)
    problem = Problem(probs, lam, fairness, prior, loss)
    if tol is None:
        tol = 1e-5 if probs.dtype == torch.float32 else 1e-7
    # the PGD safeguard of "newton" gets its own default budget unless the caller set one
    fallback_iter = _DEFAULT_MAX_ITER["pgd"] if max_iter is None else max_iter
    if max_iter is None:
        max_iter = _DEFAULT_MAX_ITER[method]
    # --- issue 14: compiled CPU kernels (skcce/_kernels_numba.py) for the collision loss -------
    fast = _compiled_solve(probs, lam, prior, fairness, loss, method, init, tol, max_iter)
    if fast is not None:
        return fast
    # --- end issue 14 ------------------------------------------------------------------------
    if method == "sinkhorn":  # SeLa's problem, not F: see skcce._sinkhorn
        Y, value, gap, n_iter, ok = sinkhorn_labels(
            probs, prior, lam=lam, tol=tol, max_iter=max_iter
        )
        return PseudoLabelResult(Y, value, gap, n_iter, ok, method)
    if problem.k == 1 or lam == 0:
        Y = _trivial(problem)
        value = problem.objective(Y)
        return PseudoLabelResult(Y, float(value), 0.0, 0, True, method)
    Y0 = _start(problem, init)
    if method == "newton":
        Y, _, value, gap, n_iter, ok = newton(
            problem, problem.initial_w(Y0), tol=tol, max_iter=max_iter
        )
        if not ok:
            # safeguard: the dual ascent stalled (non-unique best responses at ties, or no
            # ascent at working precision): polish the primal with monotone PGD from the
            # better of Newton's labels and the start, and keep the better certificate.
            # (mixing in a little of the prior keeps every active cluster non-empty, where
            # both fairness terms have a finite gradient)
            start = 0.999 * Y + 0.001 * problem.prior if math.isfinite(value) else Y0
            Y2, value2, gap2, n_more, ok2 = _iterate(problem, start, "pgd", tol, fallback_iter)
            n_iter += n_more
            if ok2 or not math.isfinite(value) or float(gap2) < gap:
                Y, value, gap, ok = Y2, value2, gap2, ok2
    else:
        Y, value, gap, n_iter, ok = _iterate(problem, Y0, method, tol, max_iter)
    gap = float(gap)
    if gap != gap:  # inf - inf: the optimum itself is infinite (e.g. an impossible prior)
        gap = float("inf")
    gap = max(gap, 0.0)  # rounding can put the dual bound a hair above F(Y)
    return PseudoLabelResult(Y, float(value), gap, n_iter, bool(ok), method)
