"""Tests for the pieces of the dual Newton solver: the NumPy best responses and primal recovery."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from skcce.solvers import solve_pseudo_labels
from skcce.solvers._duality import Problem, _collision_response, _collision_response_cpu
from skcce.solvers._master import ColumnPool

D = torch.float64


def _row_values(sigma, w, Y, active, fairness):
    """min_y -ln(sigma'y) - w'y evaluated at Y (excluded classes carry no w)."""
    wm = torch.where(active, w, 0) if fairness == "forward" else w
    return -torch.log((Y * sigma).sum(dim=1)) - (Y * wm).sum(dim=1)


@st.composite
def response_cases(draw):
    n = draw(st.integers(1, 30))
    k = draw(st.sampled_from([1, 2, 3, 4, 7, 10, 20]))
    g = torch.Generator().manual_seed(draw(st.integers(0, 2**16)))
    scale = draw(st.sampled_from([0.0, 0.5, 2.0, 8.0]))
    P = torch.softmax(scale * torch.randn(n, k, generator=g, dtype=D), dim=1)
    if draw(st.booleans()):  # exact zeros in sigma
        P = torch.where(torch.rand(n, k, generator=g, dtype=D) < 0.3, 0, P)
        P[:, 0] += 1e-3  # keep every row non-zero
        P = P / P.sum(dim=1, keepdim=True)
    if draw(st.booleans()) and n > 1:  # duplicate rows
        P[1:] = P[0]
    w_scale = draw(st.sampled_from([1e-3, 0.3, 3.0, 100.0]))
    w = w_scale * torch.rand(k, generator=g, dtype=D)
    if draw(st.booleans()) and k > 1:  # ties in w
        w[1] = w[0]
    fairness = draw(st.sampled_from(["reverse", "forward"]))
    active = torch.ones(k, dtype=torch.bool)
    if fairness == "forward" and k > 1 and draw(st.booleans()):
        active[-1] = False
    return P, w, active, fairness


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(response_cases())
def test_numpy_response_is_exact(case):
    """The NumPy candidates-and-check path equals the envelope walk (the row optimum)."""
    P, w, active, fairness = case
    Y1, psi1 = _collision_response(P, w, active, fairness)
    Y2, psi2 = _collision_response_cpu(P, w, active, fairness)
    assert Y2.dtype == P.dtype and Y2.shape == P.shape
    assert bool((Y2 >= 0).all())
    torch.testing.assert_close(Y2.sum(dim=1), torch.ones(len(P), dtype=D))
    if fairness == "forward":
        assert bool((Y2[:, ~active] == 0).all())
    finite = torch.isfinite(psi1)
    assert bool((finite == torch.isfinite(psi2)).all())
    scale = 1.0 + psi1[finite].abs()
    assert bool(((psi1[finite] - psi2[finite]).abs() <= 1e-12 * scale).all())
    # psi is the value of the returned labels (the certificate relies on it)
    v2 = _row_values(P, w, Y2, active, fairness)
    assert bool(((v2[finite] - psi2[finite]).abs() <= 1e-12 * scale).all())


def test_numpy_response_float32():
    g = torch.Generator().manual_seed(0)
    P = torch.softmax(torch.randn(200, 10, generator=g), dim=1)
    w = torch.rand(10, generator=g)
    active = torch.ones(10, dtype=torch.bool)
    Y1, psi1 = _collision_response(P, w, active, "reverse")
    Y2, psi2 = _collision_response_cpu(P, w, active, "reverse")
    assert Y2.dtype == torch.float32 and psi2.dtype == torch.float32
    torch.testing.assert_close(psi2, psi1, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("fairness", ["reverse", "forward"])
def test_best_mix_is_feasible_and_never_worse(fairness):
    g = torch.Generator().manual_seed(1)
    P = torch.softmax(torch.randn(60, 5, generator=g, dtype=D), dim=1)
    prior = torch.full((5,), 0.2, dtype=D)
    problem = Problem(P, 50.0, fairness, prior, "collision")
    pool = ColumnPool(problem, size=6)
    Ys = []
    for _ in range(8):
        w = torch.rand(5, generator=g, dtype=D) + 0.1
        Y, _ = _collision_response(P, w, problem.active, fairness)
        Ys.append(Y)
        pool.add(Y)
    assert len(pool.Y) == 6  # the oldest columns were dropped
    Y0 = torch.full_like(P, 0.2)
    v0 = float(problem.objective(Y0))
    Y, v = pool.best_mix(Y0, v0)
    assert v <= v0
    assert bool((Y >= 0).all())
    torch.testing.assert_close(Y.sum(dim=1), torch.ones(60, dtype=D))
    assert v == pytest.approx(float(problem.objective(Y)), rel=1e-15)
    # a combination is at least as good as every column it mixes
    assert v <= min(float(problem.objective(c)) for c in Ys[-6:]) + 1e-12


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
    res = solve_pseudo_labels(P, lam=100.0, tol=1e-6)
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
    from skcce.solvers import _compiled

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


def test_simplex_projection_keeps_rows_on_simplex_in_float32():
    """PGD's projection with entries of order 1e5 (lam = 1e6 gradients) in float32: the sorted
    cumulative sum loses a row's total by far more than rounding unless rows are renormalised."""
    from skcce.solvers._pgd import project_simplex

    g = torch.Generator().manual_seed(0)
    V = 1e5 * torch.randn(64, 6, generator=g) + torch.rand(64, 6, generator=g)
    V[:, 1] = V[:, 0] + 0.3  # two close large entries per row: the projection splits them
    Y = project_simplex(V)
    assert bool((Y >= 0).all())
    assert float((Y.sum(dim=1) - 1).abs().max()) <= 4 * torch.finfo(torch.float32).eps
