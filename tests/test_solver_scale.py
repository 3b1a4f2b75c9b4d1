"""The interior point at many clusters: its matrix-free Newton system (``method="newton-cg"``)
against the dense factorisation (``"newton-dense"``), the shape rule of ``"newton"``, and the
certificate on hard cases (ties, zeros, K >= N, extreme lam, a prior with zeros)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from skcce.solvers import _compiled, solve_pseudo_labels
from skcce.solvers._common import certify
from skcce.solvers._duality import Problem

pytestmark = pytest.mark.skipif(not _compiled.ENABLED, reason="compiled solver disabled")


def mixture_probs(n, k, seed=0, d=16, dist=3.0, dtype=torch.float64):
    """Softmax of a nearest-centre head on a Gaussian mixture of ``k`` centres."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((k, d)) * dist / np.sqrt(2 * d)
    x = centres[rng.integers(0, k, n)] + rng.standard_normal((n, d))
    logits = x @ centres.T - 0.5 * (centres * centres).sum(1)
    return torch.softmax(torch.from_numpy(logits), dim=1).to(dtype)


def flat_probs(n, k, seed=0, scale=0.1, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    return torch.softmax(scale * torch.randn(n, k, generator=g, dtype=torch.float64), 1).to(dtype)


def check(res, probs, lam, tol, fairness="reverse", prior=None):
    """Rows on the simplex, no NaN, and (if converged) the certificate recomputed here."""
    Y = res.labels
    assert Y.dtype == probs.dtype and Y.shape == probs.shape
    assert not torch.isnan(Y).any() and (Y >= 0).all()
    assert torch.allclose(Y.sum(1), torch.ones_like(Y[:, 0]), atol=1e-5)
    if res.converged:
        k = probs.shape[1]
        u = torch.full((k,), 1.0 / k) if prior is None else torch.as_tensor(prior)
        problem = Problem(probs.double(), lam, fairness, u.double(), "collision")
        value = problem.objective(Y.double())
        gap, ok = certify(problem, Y.double(), value, tol)
        assert ok, (float(gap), float(value))


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize(
    "n, k, kind, lam",
    [(60, 5, "mix", 100.0), (200, 30, "mix", 10.0), (150, 40, "flat", 100.0),
     (300, 20, "mix", 1e4), (80, 12, "flat", 1.0)],
)  # fmt: skip
def test_matrix_free_agrees_with_dense(n, k, kind, lam, dtype):
    probs = (mixture_probs if kind == "mix" else flat_probs)(n, k, dtype=dtype)
    tol = 1e-5 if dtype == torch.float32 else 1e-7
    cg = solve_pseudo_labels(probs, lam=lam, method="newton-cg")
    dense = solve_pseudo_labels(probs, lam=lam, method="newton-dense")
    assert cg.converged and dense.converged
    assert cg.method == "newton-cg" and dense.method == "newton-dense"
    assert cg.backend == dense.backend == "compiled"
    check(cg, probs, lam, tol)
    scale = max(abs(dense.objective), 1.0)
    assert abs(cg.objective - dense.objective) <= 2 * tol * scale


@pytest.mark.parametrize("fairness", ["reverse", "forward"])
def test_large_k_modest_n(fairness):
    """K up to 500 with N = 2K: certified, equal to the dense solve's optimum."""
    for n, k in [(200, 100), (1000, 500)]:
        probs = mixture_probs(n, k, seed=k)
        res = solve_pseudo_labels(probs, lam=100.0, fairness=fairness, method="newton-cg")
        assert res.converged
        check(res, probs, 100.0, 1e-7, fairness)
        if k <= 100:
            dense = solve_pseudo_labels(probs, lam=100.0, fairness=fairness, method="newton-dense")
            assert abs(res.objective - dense.objective) <= 2e-7 * max(abs(dense.objective), 1)


def test_shape_rule():
    """``"newton"`` factors the system densely at small K and goes matrix-free at large K
    (``K^2 > 48 N``): both give the same iterates up to rounding."""
    from skcce.solvers._kernels._interior import matrix_free

    assert not matrix_free(250, 10, 0) and not matrix_free(250, 109, 0)
    assert not matrix_free(400, 100, 0)
    assert matrix_free(250, 110, 0) and matrix_free(1200, 300, 0) and matrix_free(4000, 1000, 0)
    assert matrix_free(250, 10, 2) and not matrix_free(4000, 1000, 1)
    probs = mixture_probs(400, 150, seed=3)
    auto = solve_pseudo_labels(probs, lam=100.0)
    cg = solve_pseudo_labels(probs, lam=100.0, method="newton-cg")
    assert auto.method == "newton" and auto.converged
    assert auto.n_iter == cg.n_iter
    assert torch.allclose(auto.labels, cg.labels, atol=1e-9)


def _ties(n, k):
    """Duplicated columns, identical rows and uniform rows."""
    probs = flat_probs(n, k, scale=1.0)
    probs[:, 1] = probs[:, 0]
    probs[: n // 4] = probs[0]
    probs[n // 4 : n // 2] = 1.0 / k
    return probs / probs.sum(1, keepdim=True)


def _zeros(n, k):
    probs = mixture_probs(n, k, seed=5)
    probs[:, :2] = 0.0
    probs[::3, 2:5] = 0.0
    return probs / probs.sum(1, keepdim=True)


@pytest.mark.parametrize("case", ["ties", "zeros", "k_over_n", "one_hot"])
@pytest.mark.parametrize("lam", [1.0, 100.0, 1e4])
def test_hard_cases(case, lam):
    if case == "ties":
        probs = _ties(120, 30)
    elif case == "zeros":
        probs = _zeros(120, 30)
    elif case == "k_over_n":
        probs = mixture_probs(30, 45, seed=2)
    else:
        probs = torch.nn.functional.one_hot(torch.arange(90) % 7, 30).double()
    res = solve_pseudo_labels(probs, lam=lam, method="newton-cg")
    check(res, probs, lam, 1e-7)
    dense = solve_pseudo_labels(probs, lam=lam, method="newton-dense")
    if res.converged and dense.converged:
        assert abs(res.objective - dense.objective) <= 2e-7 * max(abs(dense.objective), 1)
    assert res.converged or not dense.converged


@pytest.mark.parametrize("fairness", ["reverse", "forward"])
def test_prior_with_zeros(fairness):
    probs = mixture_probs(300, 40, seed=4)
    prior = torch.rand(40, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    prior[::5] = 0.0
    prior /= prior.sum()
    res = solve_pseudo_labels(probs, lam=100.0, prior=prior, fairness=fairness, method="newton-cg")
    assert res.converged
    check(res, probs, 100.0, 1e-7, fairness, prior)
    if fairness == "forward":  # a class of zero prior stays empty
        assert float(res.labels[:, prior == 0].abs().max()) == 0.0


def test_solve_stack_matrix_free():
    """The batched restarts' stacked entry solves each problem as the single solve does."""
    stack = torch.stack([mixture_probs(200, 60, seed=s) for s in range(3)])
    results = _compiled.solve_stack(
        stack, lam=100.0, prior=None, fairness="reverse", loss="collision",
        method="newton-cg", tol=1e-7, max_iter=None,
    )  # fmt: skip
    for r, res in enumerate(results):
        one = solve_pseudo_labels(stack[r], lam=100.0, method="newton-cg")
        assert res is not None and res.converged and res.method == "newton-cg"
        assert torch.equal(res.labels, one.labels)
