"""Input precision of ``solve_pseudo_labels`` (issue 15, point 5).

Rows are checked at the tolerance of the format the numbers came from: a float32 softmax cast
to float64 sums to 1 only within float32 rounding (about 1e-7), which float64's tolerance
(1e-8 per column) refused; such rows are now accepted and renormalised. Rows that are not
distributions are still refused with the same message.
"""

import numpy as np
import pytest
import torch

from skcce.solvers import solve_pseudo_labels
from skcce.solvers._validation import _source_eps


def _softmax32(n, k, seed=0, scale=5.0):
    g = torch.Generator().manual_seed(seed)
    return torch.softmax(scale * torch.randn(n, k, generator=g), dim=1)


@pytest.mark.parametrize("k", [3, 10])
def test_float32_softmax_cast_to_float64_is_accepted_and_renormalised(k):
    probs = _softmax32(512, k).double()
    deviation = float((probs.sum(1) - 1).abs().max())
    assert deviation > 1e-8 * k  # float64's own tolerance would refuse it (the issue's report)
    res = solve_pseudo_labels(probs, lam=100.0)
    assert res.labels.dtype == torch.float64 and res.converged
    assert torch.allclose(res.labels.sum(1), torch.ones(512, dtype=torch.float64), atol=1e-12)
    exact = probs / probs.sum(1, keepdim=True)  # what the solver is meant to see
    ref = solve_pseudo_labels(exact, lam=100.0)
    assert torch.allclose(res.labels, ref.labels, atol=1e-9)
    assert _source_eps(probs) == torch.finfo(torch.float32).eps
    assert _source_eps(exact) is None  # genuine float64 numbers keep float64's tolerance


@pytest.mark.parametrize(
    "convert",
    [
        lambda p: p.half(),
        lambda p: p.half().numpy(),
        lambda p: p.half().double(),
        lambda p: p.half().float(),
        lambda p: p.half().double().numpy(),
    ],
    ids=["tensor16", "array16", "16-as-64", "16-as-32", "array16-as-64"],
)
def test_float16_inputs_are_accepted(convert):
    probs = torch.softmax(torch.randn(200, 50, generator=torch.Generator().manual_seed(1)), 1)
    low = convert(probs)
    res = solve_pseudo_labels(low, lam=10.0)
    assert res.converged
    sums = res.labels.double().sum(1)
    assert torch.allclose(sums, torch.ones_like(sums), atol=1e-6)


@pytest.mark.parametrize(
    "make, match",
    [
        (lambda: torch.randn(50, 10, dtype=torch.float64), "negative values"),  # logits
        (lambda: torch.exp(torch.randn(50, 10)).double(), "must sum to 1"),  # float32 scores
        (lambda: (_softmax32(50, 10) * 1.01).double(), "must sum to 1"),  # 1% off
        (lambda: (_softmax32(50, 10).half() * 1.05).double(), "must sum to 1"),  # 5% off
        (lambda: _softmax32(50, 10).double() / 1.00001 + 1e-7 / 3, "must sum to 1"),
    ],
    ids=["logits", "float32-scores", "float32-1pc", "float16-5pc", "float64-1e-6"],
)
def test_rows_that_are_not_distributions_are_still_refused(make, match):
    probs = make()
    with pytest.raises(ValueError, match=match) as info:
        solve_pseudo_labels(probs, lam=10.0)
    if match == "must sum to 1":
        assert "pass probabilities (e.g. softmax of the logits), not logits" in str(info.value)


def test_float32_softmax_as_init_and_numpy():
    probs = _softmax32(64, 10).double()
    res = solve_pseudo_labels(probs.numpy(), lam=10.0, init=probs.float().double())
    assert res.converged and np.isfinite(res.objective)
