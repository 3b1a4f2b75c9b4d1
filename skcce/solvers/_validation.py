"""Validation of the public solver entry (:func:`skcce.solvers.solve_pseudo_labels`).

The engine calls the private path (:func:`skcce.solvers._solve`) on data it has already
validated, so none of this runs per mini-batch.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse
import torch

from skcce.losses import FAIRNESS, LOSSES

METHODS = ("auto", "newton", "newton-cg", "newton-dense", "em", "pgd", "sinkhorn")


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
    lo, hi = torch.aminmax(t)  # NaN propagates: one pass for both checks
    lo, hi = float(lo), float(hi)
    if not (np.isfinite(lo) and np.isfinite(hi)):
        raise ValueError(f"{name} contains NaN or infinite values")
    if lo < 0:
        raise ValueError(f"{name} contains negative values; rows must be probability vectors")
    err = float((t.sum(dim=1) - 1).abs().max())
    if err > tol:
        raise ValueError(
            f"rows of {name} must sum to 1 (largest deviation {err:.3g}); pass "
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


def _source_eps(t):
    """Machine epsilon of the coarsest float format holding every entry of ``t`` exactly.

    A float32 softmax cast to float64 (``torch.softmax(logits, 1).double()``) has rows that
    sum to 1 only within float32 rounding (about 1e-7); its entries are all float32 numbers,
    which genuine float64 probabilities almost never are. Such rows get the tolerance of the
    format they came from and are renormalised (see :func:`_checked_rows`). ``None`` when
    ``t`` holds numbers of its own precision (or is not float32/float64).
    """
    if t.dtype not in (torch.float32, torch.float64) or t.numel() == 0:
        return None
    own = torch.finfo(t.dtype).eps

    def holds(fmt):
        return bool((t.to(fmt).to(t.dtype) == t).all())

    # bfloat16 and float16 numbers are all float32 numbers: float64 data that float32 does
    # not hold (genuine float64 probabilities) is answered by one round trip
    if t.dtype == torch.float64 and not holds(torch.float32):
        return None
    for fmt in (torch.bfloat16, torch.float16, torch.float32):  # coarsest first
        eps = torch.finfo(fmt).eps
        if eps > own and (fmt == torch.float32 or holds(fmt)):
            return eps
    return None


def _checked_rows(x, name, dtype=None, device=None, eps=None):
    """``x`` as a float tensor with rows on the simplex (see :func:`_check_rows_on_simplex`).

    Half-precision inputs (float16, bfloat16) become float64 and are checked at their own
    precision: each entry is rounded to a relative ``eps / 2``, so a row of probabilities
    sums to 1 within ``eps / 2`` whatever K; we allow ``4 eps`` and then divide the rows
    by their sums, so the solver sees exact rows. The same holds for numbers that came from
    a coarser format than their dtype (e.g. a float32 softmax cast to float64, see
    :func:`_source_eps`): they are checked at the tolerance of that format (float32's:
    ``1e-4 K``) and renormalised. ``eps`` overrides the precision read from ``x`` (for a
    caller that already converted it).
    """
    if isinstance(x, torch.Tensor) and x.layout != torch.strided:
        raise TypeError(f"{name} is a sparse tensor; pass a dense one ({name}.to_dense())")
    if scipy.sparse.issparse(x):
        raise TypeError(f"{name} is a sparse matrix; pass a dense array ({name}.toarray())")
    eps = _half_eps(x) if eps is None else eps
    t = _as_tensor(x, name, dtype, device)
    if t.ndim != 2:
        return t  # the caller names the shape it needs
    if eps is None:  # the precision the numbers came from (float32 -> float64 ...)
        eps = _source_eps(t)
    tol = None
    if eps is not None:
        coarse = t.dtype == torch.float32 or eps >= torch.finfo(torch.float32).eps
        base = (1e-4 if coarse else 1e-8) * max(1, t.shape[1])
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
    if method.startswith("newton") and loss == "shannon":
        raise ValueError(
            f"method={method!r} needs a strictly convex row term; use 'em' or 'pgd' with "
            "loss='shannon'"
        )
    return method


def validate(probs, lam, fairness, prior, loss, method, init):
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


def validate_carry(carry, probs, prior, fairness, method):
    """``carry`` of :func:`skcce.solvers.solve_pseudo_labels` as a tensor of ``probs``'s
    dtype and device (None stays None).

    Raises
    ------
    ValueError
        A carry that is not numeric, not of shape (K,), not finite or negative; one given to
        ``method="sinkhorn"`` (no fairness term to carry into); or, with ``fairness="forward"``,
        one with mass on a class of zero prior (``KL(ybar||u)`` would be infinite).
    """
    if carry is None:
        return None
    k = probs.shape[1]
    c = _as_tensor(carry, "carry", probs.dtype)
    if c.shape != (k,):
        raise ValueError(f"carry must have shape ({k},); got {tuple(c.shape)}")
    if not bool(torch.isfinite(c).all()):
        raise ValueError("carry contains NaN or infinite values")
    if bool((c < 0).any()):
        raise ValueError("carry contains negative values; it is column mass (>= 0)")
    c = c.to(device=probs.device)
    if method == "sinkhorn" and bool((c != 0).any()):
        raise ValueError(
            "method='sinkhorn' has no fairness term (its marginal is a hard constraint), so a "
            "carry cannot enter it; pass carry=None or use another method"
        )
    if fairness == "forward" and bool(((c > 0) & (prior <= 0)).any()):
        raise ValueError(
            "carry has mass on a class of zero prior: with fairness='forward' KL(ybar||u) is "
            "then infinite"
        )
    return c
