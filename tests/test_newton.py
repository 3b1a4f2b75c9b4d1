"""Tests for skcce.solvers._newton, the torch dual Newton solver: a kinked optimum certified by
Newton itself, the smoothed warm start at lam >> N in float32."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from skcce.solvers import _compiled, solve_pseudo_labels

D = torch.float64


def test_kinked_optimum_is_certified_by_newton_itself():
    """An optimum that mixes three classes in one row is not a best response to any w: the
    dual is kinked there. The master problem recovers it, so Newton certifies it without the
    projected-gradient fallback (which would add hundreds of iterations)."""
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(250, 20, generator=g, dtype=D)
    winner = torch.randint(0, 20, (250,), generator=g)
    confident = torch.rand(250, generator=g) < 0.8
    logits[torch.arange(250), winner] += torch.where(confident, 6.0, 1.0).to(D)
    P = torch.softmax(logits, dim=1)
    with _compiled.using(False):  # the torch dual Newton, not the compiled interior point
        res = solve_pseudo_labels(P, lam=100.0, tol=1e-6)
    assert res.backend == "torch"
    assert res.converged
    assert res.n_iter <= 30
    assert int(((res.labels > 1e-9).sum(dim=1) >= 3).sum()) >= 1
    ref = solve_pseudo_labels(P, lam=100.0, tol=1e-9, method="pgd", max_iter=100000)
    assert ref.converged
    assert res.objective - ref.objective <= 1e-6 * abs(ref.objective)
    assert np.isfinite(res.gap) and res.gap >= 0


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_large_lam_float32_tie_does_not_raise(dtype, monkeypatch):
    """lam >> N runs the smoothed warm start; in float32 its Hessian used to round to a
    singular matrix (torch.linalg.solve raised) on a single tied row."""
    pytest.importorskip("numba")
    P = torch.tensor([[0.5, 0.5]], dtype=dtype)
    monkeypatch.setattr(_compiled, "ENABLED", True)
    # the compiled path certifies in float64 (the float32 labels are the exact optimum here)
    fast = solve_pseudo_labels(P, lam=1e6, max_iter=200)
    assert fast.labels.dtype == dtype and fast.converged
    torch.testing.assert_close(fast.labels, torch.full_like(P, 0.5))
    monkeypatch.setattr(_compiled, "ENABLED", False)  # the torch reference path
    res = solve_pseudo_labels(P, lam=1e6, max_iter=200)
    assert res.labels.dtype == dtype
    assert bool(torch.isfinite(res.labels).all())
    torch.testing.assert_close(res.labels.sum(dim=1), torch.ones(1, dtype=dtype))
    torch.testing.assert_close(res.labels, torch.full_like(P, 0.5))  # the optimum
    # float32 cannot certify here: the dual's terms are of order lam = 1e6
    assert res.converged == (dtype == torch.float64)
