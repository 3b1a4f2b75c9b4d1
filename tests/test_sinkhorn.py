"""Tests for the SeLa baseline pseudo-labels (``method="sinkhorn"``, skcce.solvers._sinkhorn)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from skcce.solvers import METHODS, resolve_method, solve_pseudo_labels
from skcce.solvers._sinkhorn import sinkhorn_objective

D = torch.float64


def random_probs(n, k, seed, scale=3.0, dtype=D):
    g = torch.Generator().manual_seed(seed)
    return torch.softmax(scale * torch.randn(n, k, generator=g, dtype=D), dim=1).to(dtype)


def solve(probs, lam=25.0, prior=None, tol=1e-10, max_iter=20000, **kw):
    return solve_pseudo_labels(
        probs, lam=lam, prior=prior, loss="shannon", method="sinkhorn", tol=tol,
        max_iter=max_iter, **kw,
    )  # fmt: skip


def numpy_sinkhorn(P, u, lam, n_iter=20000):
    """Plain Sinkhorn–Knopp in probability space: Y = N diag(alpha) P**lam diag(beta)."""
    P = np.asarray(P, dtype=np.float64)
    n, _ = P.shape
    K = P**lam
    r = np.full(n, 1.0 / n)
    c = np.asarray(u, dtype=np.float64)
    beta = np.ones(P.shape[1])
    for _ in range(n_iter):
        alpha = r / (K @ beta)
        beta = c / (K.T @ alpha)
    alpha = r / (K @ beta)  # end on the rows, as skcce does
    return n * alpha[:, None] * K * beta[None, :]


# ----- registration --------------------------------------------------------------------------
def test_registered_and_resolved():
    assert "sinkhorn" in METHODS
    for fairness in ("reverse", "forward"):
        assert resolve_method("sinkhorn", "shannon", fairness) == "sinkhorn"
    for loss in ("collision", "reverse"):
        with pytest.raises(ValueError, match="loss='shannon'"):
            resolve_method("sinkhorn", loss, "reverse")


# ----- hand-checked cases --------------------------------------------------------------------
def test_symmetric_two_by_two_by_hand():
    # rows of P**lam normalised already have column means 1/2: y_11 = p^2 / (p^2 + q^2)
    # = 0.5625 / 0.625 = 0.9 for p = 0.75, lam = 2
    P = torch.tensor([[0.75, 0.25], [0.25, 0.75]], dtype=D)
    res = solve(P, lam=2.0)
    assert res.method == "sinkhorn"
    assert res.converged
    expected = torch.tensor([[0.9, 0.1], [0.1, 0.9]], dtype=D)
    torch.testing.assert_close(res.labels, expected, atol=1e-12, rtol=0)
    cross = -2 * (0.9 * math.log(0.75) + 0.1 * math.log(0.25))
    ent = -2 * (0.9 * math.log(0.9) + 0.1 * math.log(0.1))
    assert res.objective == pytest.approx(cross - ent / 2.0, abs=1e-12)
    assert res.gap <= 1e-10


def test_uniform_probs_give_the_prior_by_hand():
    # P**lam is constant: the labels of every row are the prior itself
    P = torch.full((3, 2), 0.5, dtype=D)
    res = solve(P, lam=1.0, prior=[0.25, 0.75])
    torch.testing.assert_close(res.labels, torch.tensor([[0.25, 0.75]] * 3, dtype=D))
    assert res.converged


def test_equipartition_moves_the_least_confident_samples():
    P = torch.tensor([[0.9, 0.1], [0.8, 0.2], [0.7, 0.3], [0.6, 0.4]], dtype=D)
    res = solve(P, lam=5.0)
    # every sample prefers cluster 0; equipartition sends the two weakest to cluster 1
    assert res.labels.argmax(dim=1).tolist() == [0, 0, 1, 1]
    torch.testing.assert_close(res.labels.mean(dim=0), torch.tensor([0.5, 0.5], dtype=D))


def test_objective_by_hand():
    Y = torch.tensor([[1.0, 0.0], [0.5, 0.5]], dtype=D)
    P = torch.tensor([[0.5, 0.5], [0.25, 0.75]], dtype=D)
    # sum_i H(y_i, sigma_i) = ln 2 + (-0.5 ln 0.25 - 0.5 ln 0.75); sum_i H(y_i) = ln 2
    expected = math.log(2) - 0.5 * math.log(0.25) - 0.5 * math.log(0.75) - math.log(2) / 4
    assert float(sinkhorn_objective(Y, P, 4.0)) == pytest.approx(expected, abs=1e-14)


# ----- marginals and agreement ---------------------------------------------------------------
@pytest.mark.parametrize("lam", [0.5, 5.0, 25.0])
@pytest.mark.parametrize("seed", [0, 1])
def test_marginals_hold_at_convergence(lam, seed):
    P = random_probs(200, 7, seed)
    res = solve(P, lam=lam, tol=1e-9)
    assert res.converged
    Y = res.labels
    assert Y.dtype == D and bool((Y >= 0).all())
    torch.testing.assert_close(Y.sum(dim=1), torch.ones(200, dtype=D), atol=1e-12, rtol=0)
    torch.testing.assert_close(Y.mean(dim=0), torch.full((7,), 1 / 7, dtype=D), atol=1e-9, rtol=0)
    assert res.gap == pytest.approx(float((Y.mean(dim=0) - 1 / 7).abs().sum()), abs=1e-15)


def test_non_uniform_prior_marginals():
    prior = torch.tensor([0.5, 0.3, 0.2, 0.0], dtype=D)
    res = solve(random_probs(100, 4, 3), lam=10.0, prior=prior)
    assert res.converged
    torch.testing.assert_close(res.labels.mean(dim=0), prior, atol=1e-10, rtol=0)
    assert bool((res.labels[:, 3] == 0).all())


@pytest.mark.parametrize("lam", [1.0, 4.0])
def test_agrees_with_numpy_reference(lam):
    P = random_probs(40, 5, 7, scale=1.5)
    u = np.array([0.1, 0.2, 0.3, 0.25, 0.15])
    res = solve(P, lam=lam, prior=u, tol=1e-13)
    ref = numpy_sinkhorn(P.numpy(), u, lam)
    np.testing.assert_allclose(res.labels.numpy(), ref, atol=1e-10)


def test_is_the_minimiser_over_the_polytope():
    # F_S does not decrease along feasible directions (rows and columns summing to zero)
    P = random_probs(12, 4, 11, scale=1.0)
    lam = 3.0
    Y = solve(P, lam=lam, tol=1e-13).labels
    best = float(sinkhorn_objective(Y, P, lam))
    g = torch.Generator().manual_seed(0)
    for _ in range(20):
        Dir = torch.randn(12, 4, generator=g, dtype=D)
        Dir = Dir - Dir.mean(dim=1, keepdim=True)
        Dir = Dir - Dir.mean(dim=0, keepdim=True)  # keeps the row sums at zero
        step = 0.5 * float(Y.min()) / float(Dir.abs().max())
        for t in (step, -step):
            assert float(sinkhorn_objective(Y + t * Dir, P, lam)) >= best - 1e-12


def test_float32_keeps_dtype():
    res = solve(random_probs(250, 10, 4, scale=1.0, dtype=torch.float32), tol=1e-5)
    assert res.labels.dtype == torch.float32
    assert res.converged
    torch.testing.assert_close(
        res.labels.sum(dim=1), torch.ones(250, dtype=torch.float32), atol=1e-5, rtol=0
    )


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_matches_cpu():
    P = random_probs(250, 10, 5)
    cpu = solve(P, tol=1e-8)
    gpu = solve(P.cuda(), tol=1e-8)
    assert gpu.labels.device.type == "cuda"
    torch.testing.assert_close(gpu.labels.cpu(), cpu.labels, atol=1e-7, rtol=0)


def test_single_cluster():
    res = solve(random_probs(5, 1, 0))
    torch.testing.assert_close(res.labels, torch.ones(5, 1, dtype=D))
    assert res.converged


# ----- zeros in probs ------------------------------------------------------------------------
def test_zeros_in_probs_no_nan():
    P = random_probs(60, 5, 2)
    P[::3, 0] = 0.0
    P[1::4, 2] = 0.0
    P = P / P.sum(dim=1, keepdim=True)
    res = solve(P, lam=25.0, tol=1e-8)
    Y = res.labels
    assert bool(torch.isfinite(Y).all()) and math.isfinite(res.objective)
    assert res.converged
    assert bool((Y[P == 0] == 0).all())  # no mass where the network gives zero
    torch.testing.assert_close(Y.mean(dim=0), torch.full((5,), 0.2, dtype=D), atol=1e-8, rtol=0)


def test_infeasible_zeros_report_not_converged_without_nan():
    # no sample can go to cluster 2, yet the prior asks for a third of them
    P = torch.tensor([[0.5, 0.5, 0.0], [0.9, 0.1, 0.0], [0.2, 0.8, 0.0]], dtype=D)
    res = solve(P, lam=5.0, max_iter=200)
    assert not res.converged
    assert res.gap == pytest.approx(2 / 3, abs=1e-9)  # the missing third, counted twice
    assert bool(torch.isfinite(res.labels).all()) and math.isfinite(res.objective)
    torch.testing.assert_close(res.labels.sum(dim=1), torch.ones(3, dtype=D))


def test_row_supported_only_on_zero_prior_keeps_its_probs():
    P = torch.tensor([[0.0, 0.0, 1.0], [0.6, 0.4, 0.0], [0.3, 0.7, 0.0]], dtype=D)
    res = solve(P, lam=2.0, prior=[0.5, 0.5, 0.0], max_iter=50)
    assert bool(torch.isfinite(res.labels).all())
    torch.testing.assert_close(res.labels[0], P[0])
    torch.testing.assert_close(res.labels.sum(dim=1), torch.ones(3, dtype=D))
    assert not res.converged


# ----- bad input -----------------------------------------------------------------------------
def test_lam_zero_rejected():
    with pytest.raises(ValueError, match="lam > 0"):
        solve(random_probs(4, 2, 0), lam=0.0)


@pytest.mark.parametrize(
    ("probs", "kw", "match"),
    [
        ([[0.5, 0.5], [float("nan"), 0.5]], {}, "NaN"),
        ([[0.5, 0.6], [0.5, 0.5]], {}, "sum to 1"),
        ([[0.5, 0.5]], {"lam": -1.0}, "non-negative"),
        ([[0.5, 0.5]], {"prior": [0.2, 0.2]}, "sum to 1"),
        ([0.5, 0.5], {}, "shape"),
    ],
)
def test_bad_input_errors(probs, kw, match):
    with pytest.raises(ValueError, match=match):
        solve(probs, **kw)


def test_wrong_loss_rejected_by_solver():
    with pytest.raises(ValueError, match="SeLa"):
        solve_pseudo_labels([[0.5, 0.5]], lam=25.0, loss="collision", method="sinkhorn")
