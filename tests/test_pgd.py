"""Tests for skcce.solvers._pgd, the projected-gradient solver: the simplex projection."""

from __future__ import annotations

import torch


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
