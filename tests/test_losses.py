"""Tests for skcce.losses: hand-computed values, gradients, edge cases."""

from __future__ import annotations

import math

import pytest
import torch

from skcce.losses import (
    collision_cross_entropy,
    cross_entropy,
    fairness,
    pseudo_label_objective,
    reverse_cross_entropy,
    row_cross_entropy,
)

D = torch.float64
LOSS_FUNCS = [collision_cross_entropy, cross_entropy, reverse_cross_entropy]


def _t(x):
    return torch.tensor(x, dtype=D)


def _logits(p):
    return torch.log(_t(p))


# ----- hand-computed values ----------------------------------------------------------------------
def test_collision_hand_values():
    z = _logits([[0.4, 0.6], [0.2, 0.8]])
    y = _t([[0.25, 0.75], [0.5, 0.5]])
    expected = [-math.log(0.25 * 0.4 + 0.75 * 0.6), -math.log(0.5)]
    out = collision_cross_entropy(z, y, reduction="none")
    assert out.tolist() == pytest.approx(expected, rel=1e-12)
    assert float(collision_cross_entropy(z, y)) == pytest.approx(sum(expected) / 2, rel=1e-12)
    assert float(collision_cross_entropy(z, y, reduction="sum")) == pytest.approx(sum(expected))


def test_shannon_hand_values():
    z = _logits([[0.4, 0.6]])
    y = _t([[0.25, 0.75]])
    expected = -(0.25 * math.log(0.4) + 0.75 * math.log(0.6))
    assert float(cross_entropy(z, y)) == pytest.approx(expected, rel=1e-12)


def test_reverse_hand_values():
    z = _logits([[0.4, 0.6]])
    y = _t([[0.25, 0.75]])
    expected = -(0.4 * math.log(0.25) + 0.6 * math.log(0.75))
    assert float(reverse_cross_entropy(z, y)) == pytest.approx(expected, rel=1e-12)


def test_logits_need_not_be_normalised():
    z = _logits([[0.4, 0.6]])
    y = _t([[0.25, 0.75]])
    for f in LOSS_FUNCS:
        assert float(f(z + 3.7, y)) == pytest.approx(float(f(z, y)), rel=1e-12)


def test_row_cross_entropy_matches_logit_versions():
    p = _t([[0.1, 0.3, 0.6], [0.5, 0.25, 0.25]])
    y = _t([[0.2, 0.2, 0.6], [0.0, 1.0, 0.0]])
    for name, f in zip(("collision", "shannon", "reverse"), LOSS_FUNCS, strict=True):
        rows = row_cross_entropy(y, p, name)
        if name == "reverse":  # y has a zero: -sigma ln 0 = inf in probability space
            assert math.isinf(float(rows[1]))
            rows = rows[:1]
            ref = f(torch.log(p[:1]), y[:1], reduction="none")
        else:
            ref = f(torch.log(p), y, reduction="none")
        assert torch.allclose(rows, ref, rtol=1e-12)


def test_fairness_hand_values():
    yb = _t([0.75, 0.25])
    # KL(u||ybar) = 0.5 ln(0.5/0.75) + 0.5 ln(0.5/0.25) = 0.5 ln(4/3)
    assert float(fairness(yb)) == pytest.approx(0.5 * math.log(4 / 3), rel=1e-12)
    # KL(ybar||u) = 0.75 ln 1.5 + 0.25 ln 0.5
    expected = 0.75 * math.log(1.5) + 0.25 * math.log(0.5)
    assert float(fairness(yb, kind="forward")) == pytest.approx(expected, rel=1e-12)
    u = _t([0.2, 0.8])
    yb = _t([0.5, 0.5])
    expected = 0.2 * math.log(0.4) + 0.8 * math.log(1.6)
    assert float(fairness(yb, prior=u)) == pytest.approx(expected, rel=1e-12)
    expected = 0.5 * math.log(2.5) + 0.5 * math.log(0.625)
    assert float(fairness(yb, prior=u, kind="forward")) == pytest.approx(expected, rel=1e-12)
    assert float(fairness(_t([1 / 3] * 3))) == pytest.approx(0.0, abs=1e-15)


def test_fairness_zeros():
    # a prior zero: 0 ln 0 = 0 in KL(u||ybar); an empty cluster of positive prior: infinite
    u = _t([0.0, 1.0])
    assert float(fairness(_t([0.3, 0.7]), prior=u)) == pytest.approx(-math.log(0.7))
    assert math.isinf(float(fairness(_t([1.0, 0.0]))))
    # KL(ybar||u): an empty cluster costs nothing, mass on a zero-prior class is infinite
    assert float(fairness(_t([1.0, 0.0]), kind="forward")) == pytest.approx(math.log(2))
    assert math.isinf(float(fairness(_t([0.3, 0.7]), prior=u, kind="forward")))


def test_pseudo_label_objective_hand_value():
    Y = _t([[1.0, 0.0], [0.5, 0.5], [0.0, 1.0]])
    P = _t([[0.9, 0.1], [0.4, 0.6], [0.3, 0.7]])
    rows = -math.log(0.9) - math.log(0.5) - math.log(0.7)
    ybar = [0.5, 0.5]  # balanced: KL = 0
    assert float(pseudo_label_objective(Y, P, lam=10.0)) == pytest.approx(rows, rel=1e-12)
    Y2 = _t([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
    rows2 = -math.log(0.9) - math.log(0.4) - math.log(0.7)
    ybar = [2 / 3, 1 / 3]
    kl_rev = sum(0.5 * math.log(0.5 / b) for b in ybar)
    kl_fwd = sum(b * math.log(b / 0.5) for b in ybar)
    got = pseudo_label_objective(Y2, P, lam=10.0)
    assert float(got) == pytest.approx(rows2 + 10 * kl_rev, rel=1e-12)
    got = pseudo_label_objective(Y2, P, lam=10.0, fairness="forward")
    assert float(got) == pytest.approx(rows2 + 10 * kl_fwd, rel=1e-12)
    shannon = -sum(math.log(v) for v in (0.9, 0.4, 0.7))
    got = pseudo_label_objective(Y2, P, lam=0.0, loss="shannon")
    assert float(got) == pytest.approx(shannon, rel=1e-12)


# ----- properties --------------------------------------------------------------------------------
def test_collision_equals_shannon_for_one_hot():
    g = torch.Generator().manual_seed(0)
    z = torch.randn(20, 6, generator=g, dtype=D)
    y = torch.nn.functional.one_hot(torch.randint(0, 6, (20,), generator=g), 6).to(D)
    a = collision_cross_entropy(z, y, reduction="none")
    b = cross_entropy(z, y, reduction="none")
    assert torch.allclose(a, b, rtol=1e-12, atol=1e-14)


def test_collision_not_above_shannon():
    g = torch.Generator().manual_seed(1)
    z = torch.randn(50, 5, generator=g, dtype=D)
    y = torch.softmax(torch.randn(50, 5, generator=g, dtype=D), dim=1)
    a = collision_cross_entropy(z, y, reduction="none")
    b = cross_entropy(z, y, reduction="none")
    assert bool((a <= b + 1e-12).all())


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_collision_gradient_exactly_zero_for_uniform_target(dtype):
    g = torch.Generator().manual_seed(2)
    z = (5 * torch.randn(7, 4, generator=g)).to(dtype).requires_grad_()
    y = torch.full((7, 4), 0.25, dtype=dtype)
    loss = collision_cross_entropy(z, y, reduction="sum")
    loss.backward()
    assert bool((z.grad == 0).all())
    assert torch.allclose(loss.detach(), torch.tensor(7 * math.log(4), dtype=dtype))


def test_collision_gradient_formula():
    # d H2 / dz = sigma - q with q = y * sigma / (y' sigma)
    g = torch.Generator().manual_seed(3)
    z = torch.randn(5, 4, generator=g, dtype=D, requires_grad=True)
    y = torch.softmax(torch.randn(5, 4, generator=g, dtype=D), dim=1)
    collision_cross_entropy(z, y, reduction="sum").backward()
    s = torch.softmax(z.detach(), dim=1)
    q = y * s / (y * s).sum(dim=1, keepdim=True)
    assert torch.allclose(z.grad, s - q, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("f", LOSS_FUNCS)
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_gradcheck(f, reduction):
    g = torch.Generator().manual_seed(4)
    z = torch.randn(4, 3, generator=g, dtype=D, requires_grad=True)
    y = torch.softmax(torch.randn(4, 3, generator=g, dtype=D), dim=1)
    assert torch.autograd.gradcheck(lambda t: f(t, y, reduction=reduction), (z,))


@pytest.mark.parametrize("f", LOSS_FUNCS)
def test_gradcheck_target_with_zeros(f):
    g = torch.Generator().manual_seed(5)
    z = torch.randn(3, 4, generator=g, dtype=D, requires_grad=True)
    y = _t([[0.0, 0.5, 0.5, 0.0], [1.0, 0.0, 0.0, 0.0], [0.1, 0.0, 0.2, 0.7]])
    assert torch.autograd.gradcheck(lambda t: f(t, y, reduction="sum"), (z,))


@pytest.mark.parametrize("f", LOSS_FUNCS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_zeros_in_target_give_finite_value_and_gradient(f, dtype):
    z = torch.tensor([[2.0, -1.0, 0.5], [0.0, 0.0, 30.0]], dtype=dtype, requires_grad=True)
    y = torch.tensor([[0.0, 1.0, 0.0], [0.5, 0.5, 0.0]], dtype=dtype)
    out = f(z, y, reduction="sum")
    out.backward()
    assert bool(torch.isfinite(out))
    assert bool(torch.isfinite(z.grad).all())


def test_collision_zero_target_value():
    # y = e_2 so H2 = -ln sigma_2, whatever the other logits
    z = torch.log(_t([[0.2, 0.3, 0.5]]))
    y = _t([[0.0, 1.0, 0.0]])
    assert float(collision_cross_entropy(z, y)) == pytest.approx(-math.log(0.3), rel=1e-12)


def test_target_is_not_differentiated():
    z = torch.zeros(2, 2, dtype=D, requires_grad=True)
    y = _t([[0.3, 0.7], [0.6, 0.4]]).requires_grad_()
    for f in LOSS_FUNCS:
        f(z, y).backward()
        assert y.grad is None


def test_dtype_follows_logits():
    z = torch.zeros(2, 3, dtype=torch.float32)
    y = torch.full((2, 3), 1 / 3, dtype=D)
    for f in LOSS_FUNCS:
        assert f(z, y).dtype == torch.float32


# ----- bad input ---------------------------------------------------------------------------------
@pytest.mark.parametrize("f", LOSS_FUNCS)
def test_bad_shapes(f):
    with pytest.raises(ValueError, match="logits"):
        f(torch.zeros(3), torch.zeros(3))
    with pytest.raises(ValueError, match="target"):
        f(torch.zeros(2, 3), torch.zeros(2, 2))
    with pytest.raises(ValueError, match="reduction"):
        f(torch.zeros(2, 3), torch.full((2, 3), 1 / 3), reduction="avg")


def test_bad_fairness():
    with pytest.raises(ValueError, match="ybar"):
        fairness(torch.zeros(2, 2))
    with pytest.raises(ValueError, match="fairness"):
        fairness(_t([0.5, 0.5]), kind="both")
    with pytest.raises(ValueError, match="loss"):
        row_cross_entropy(_t([[1.0]]), _t([[1.0]]), "hinge")
    with pytest.raises(ValueError, match="shape"):
        pseudo_label_objective(_t([[1.0, 0.0]]), _t([[1.0]]), lam=1.0)


@pytest.mark.parametrize("loss", ["collision", "shannon", "reverse"])
@pytest.mark.parametrize("kind", ["reverse", "forward"])
@pytest.mark.parametrize("uniform", [True, False])
def test_closed_form_network_gradient_equals_autograd(loss, kind, uniform):
    from skcce.losses import ROW_VALUES, _kl_term, _network_loss_grad

    gen = torch.Generator().manual_seed(0)
    prior = None if uniform else torch.tensor([0.1, 0.2, 0.3, 0.4], dtype=torch.float64)
    z = torch.randn(3, 4, 7, dtype=torch.float64, generator=gen, requires_grad=True)
    Y = torch.softmax(3 * torch.randn(3, 4, 7, dtype=torch.float64, generator=gen), dim=1)
    Y = torch.where(Y < 0.1, 0.0, Y)  # exact zeros in the labels
    Y = Y / Y.sum(dim=1, keepdim=True)
    sigma = torch.softmax(z, dim=1)
    values = ROW_VALUES[loss](z, Y).mean(dim=1)
    fair = _kl_term(sigma.mean(dim=2), prior, kind)
    (values + 1.3 * fair).sum().backward()
    v, f, grad = _network_loss_grad(z.detach(), sigma.detach(), Y, loss, prior, kind, 1.3)
    torch.testing.assert_close(grad, z.grad, rtol=1e-10, atol=1e-12)
    factors = torch.rand(3, 1, 7, dtype=torch.float64, generator=gen) + 0.5  # the shrink guard's
    _, _, scaled = _network_loss_grad(
        z.detach(), sigma.detach(), Y, loss, prior, kind, 1.3, factors
    )
    torch.testing.assert_close(scaled, z.grad * factors, rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(v, values.detach(), rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(f, fair.detach(), rtol=1e-12, atol=1e-12)


def test_closed_form_collision_gradient_survives_underflow():
    from skcce.losses import _network_loss_grad

    z = torch.tensor([[[0.0], [200.0]]])  # sigma_0 underflows to 0 in float32
    Y = torch.tensor([[[1.0], [0.0]]])  # all mass on the underflowed class
    sigma = torch.softmax(z, dim=1)
    _, _, grad = _network_loss_grad(z, sigma, Y, "collision", None, "reverse", 0.0)
    assert torch.isfinite(grad).all()
    torch.testing.assert_close(grad, torch.tensor([[[-1.0], [1.0]]]))


@pytest.mark.parametrize("kind", ["reverse", "forward"])
@pytest.mark.parametrize("uniform", [True, False])
def test_network_fairness_survives_a_cluster_no_row_predicts(kind, uniform):
    from skcce.losses import ROW_VALUES, _kl_term, _network_loss_grad

    # a head so confident that no row of the batch predicts cluster 2 at all in float32:
    # its mean prediction is exactly 0 (the fairness term infinite, its gradient NaN unfloored)
    z = torch.tensor([[[2.0, -1.0, 1.0], [-1.0, 2.0, 0.5], [-200.0, -200.0, -200.0]]])
    z.requires_grad_(True)
    sigma = torch.softmax(z, dim=1)
    assert float(sigma[0, 2].max()) == 0.0
    Y = torch.tensor([[[1.0, 0.0, 0.6], [0.0, 1.0, 0.1], [0.0, 0.0, 0.3]]])
    prior = None if uniform else torch.tensor([0.5, 0.3, 0.2])
    values, fair, grad = _network_loss_grad(
        z.detach(), sigma.detach(), Y, "collision", prior, kind, 1.3
    )
    assert torch.isfinite(values).all() and torch.isfinite(fair).all()
    assert torch.isfinite(grad).all()
    # the autograd path of the train step reads the same floored term
    auto = ROW_VALUES["collision"](z, Y).mean(dim=1) + 1.3 * _kl_term(
        sigma.mean(dim=2), prior, kind, floor=True
    )
    auto.sum().backward()
    assert torch.isfinite(z.grad).all()
    torch.testing.assert_close(grad, z.grad, rtol=1e-5, atol=1e-6)
    # the empty cluster's rows pass no gradient (their predictions are 0); the others still
    # get the collision and fairness pulls
    assert float(grad[0, 2].abs().max()) == 0.0 and float(grad[0, :2].abs().max()) > 0.0


def test_network_fairness_is_unchanged_above_the_floor():
    from skcce.losses import _kl_term

    ybar = torch.tensor([0.7, 0.2999, 1e-4])
    for kind in ("reverse", "forward"):
        assert float(_kl_term(ybar, None, kind, floor=True)) == float(_kl_term(ybar, None, kind))
    # the public term stays the mathematical one: infinite for an empty cluster
    assert math.isinf(float(_kl_term(torch.tensor([1.0, 0.0]), None, "reverse")))
