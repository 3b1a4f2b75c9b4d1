"""Tests for skcce.solvers._master: the column pool's best mix of past best responses."""

from __future__ import annotations

import pytest
import torch

from skcce.solvers._duality import Problem, _collision_response
from skcce.solvers._master import ColumnPool

D = torch.float64


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
