r"""Cross-entropies, fairness terms and the batch pseudo-label objective (pure torch).

Notation (supplement of Zhang & Boykov, arXiv 2303.07321): a batch of ``N`` samples and
``K`` clusters; ``sigma`` (N, K) are the network's predictions (rows on the probability simplex),
``Y`` (N, K) the soft pseudo-labels (rows on the simplex), ``u`` (K,) the class prior (uniform by
default) and :math:`\bar y = \frac1N \sum_i y_i` the mean pseudo-label of the batch.

Cross-entropies of one target ``y`` and one prediction ``sigma``:

* collision :math:`H_2(y, \sigma) = -\ln \sum_k y_k \sigma_k` (the paper's loss),
* Shannon :math:`H(y, \sigma) = -\sum_k y_k \ln \sigma_k`,
* reverse :math:`H(\sigma, y) = -\sum_k \sigma_k \ln y_k`.

Fairness terms: ``"reverse"`` :math:`KL(u \| \bar y)` (the paper's strong fairness, loss (b),
infinite when a cluster of positive prior is empty) and ``"forward"`` :math:`KL(\bar y \| u)`
(loss (a)).

**The convention for λ.** The pseudo-label objective of a batch is

.. math::

    F(Y) = \sum_{i=1}^{N} H(y_i, \sigma_i) + \lambda \, KL(\cdot)

with the cross-entropy terms **summed** over the rows of the batch (not averaged). This is the
convention of the supplement's M-step (d), :math:`-\ln \sigma^\top y - \lambda \sum_k u_k S_k
\ln y_k`, and of its Theorem 1: only with the summed form does the EM bound of
:math:`\lambda KL(u\|\bar y)` produce exactly (d), so the paper's λ = 100 means here what it
meant there. The averaged form :math:`\frac1N \sum_i H + \lambda' KL` is the same problem with
:math:`\lambda' = \lambda / N`.

Nothing in this module imports scikit-learn; every function follows the dtype and device of
its inputs.
"""

from __future__ import annotations

import math

import torch

__all__ = [
    "collision_cross_entropy",
    "cross_entropy",
    "reverse_cross_entropy",
    "fairness",
    "pseudo_label_objective",
    "row_cross_entropy",
]

_REDUCTIONS = ("mean", "sum", "none")
LOSSES = ("collision", "shannon", "reverse")
FAIRNESS = ("reverse", "forward")


def _check_pair(logits: torch.Tensor, target: torch.Tensor, reduction: str) -> None:
    if logits.ndim != 2:
        raise ValueError(f"logits must have shape (N, K); got shape {tuple(logits.shape)}")
    if target.shape != logits.shape:
        raise ValueError(
            f"target must have the shape of logits {tuple(logits.shape)}; got {tuple(target.shape)}"
        )
    if reduction not in _REDUCTIONS:
        raise ValueError(f"reduction must be one of {_REDUCTIONS}; got {reduction!r}")


def _reduce(values: torch.Tensor, reduction: str) -> torch.Tensor:
    if reduction == "mean":
        return values.mean()
    if reduction == "sum":
        return values.sum()
    return values


def collision_cross_entropy(
    logits: torch.Tensor, target: torch.Tensor, *, reduction: str = "mean"
) -> torch.Tensor:
    r"""Collision cross-entropy :math:`H_2(y, \sigma) = -\ln \sum_k y_k \sigma_k`.

    Computed in log space from the logits ``z`` (``sigma = softmax(z)``):
    :math:`H_2 = \operatorname{logsumexp}(z) - \operatorname{logsumexp}(z + \ln y)` with
    :math:`\ln 0 = -\infty`, so exact zeros in ``target`` are allowed. The gradient with respect
    to the logits is :math:`\sigma - q` with :math:`q_k = y_k \sigma_k / y^\top \sigma`; it is
    exactly zero for a uniform target.

    Parameters
    ----------
    logits : torch.Tensor of shape (N, K)
        Unnormalised scores; ``softmax(logits, dim=1)`` are the predictions.
    target : torch.Tensor of shape (N, K)
        Soft targets, rows on the probability simplex (treated as constants).
    reduction : {"mean", "sum", "none"}, default="mean"
        Reduction over the N rows.

    Returns
    -------
    torch.Tensor
        Scalar, or shape (N,) with ``reduction="none"``; dtype and device of ``logits``.

    Examples
    --------
    >>> import torch
    >>> from skcce.losses import collision_cross_entropy
    >>> z = torch.log(torch.tensor([[0.5, 0.5]]))
    >>> float(collision_cross_entropy(z, torch.tensor([[1.0, 0.0]])))  # -ln 0.5
    0.6931...
    """
    _check_pair(logits, target, reduction)
    return _reduce(_collision_values(logits, target), reduction)


def _collision_values(logits, target):
    """:math:`H_2` of every row, the classes along dim 1 (any number of dims: the batched
    restarts of :mod:`skcce._engine._batched` use (R, K, B) and get (R, B))."""
    shifted, m = _shifted_log(target.detach().to(dtype=logits.dtype))
    values = torch.logsumexp(logits, dim=1) - torch.logsumexp(logits + shifted, dim=1)
    return values - m.squeeze(1)


def _shifted_log(target):
    r"""``(ln y - m, m)`` with ``m`` the row maximum of ``ln y`` (classes along dim 1).

    :math:`H_2 = \operatorname{lse}(z) - \operatorname{lse}(z + \ln y - m) - m`. For a
    uniform target the shifted log is exactly 0, both log-sum-exps see the same numbers and the
    gradient ``softmax(z) - softmax(z + ln y - m)`` is exactly zero (not just up to rounding).
    ``ln 0 = -inf`` is set without asking the math library for it (its slow path).
    """
    pos = target > 0
    log_t = torch.log(torch.where(pos, target, 1.0)).masked_fill_(~pos, -math.inf)
    m = log_t.amax(dim=1, keepdim=True)
    return log_t - m, m


def cross_entropy(
    logits: torch.Tensor, target: torch.Tensor, *, reduction: str = "mean"
) -> torch.Tensor:
    r"""Shannon cross-entropy with soft targets :math:`H(y, \sigma) = -\sum_k y_k \ln \sigma_k`.

    Parameters
    ----------
    logits : torch.Tensor of shape (N, K)
        Unnormalised scores.
    target : torch.Tensor of shape (N, K)
        Soft targets, rows on the simplex (treated as constants).
    reduction : {"mean", "sum", "none"}, default="mean"
        Reduction over the N rows.

    Returns
    -------
    torch.Tensor
        Scalar, or shape (N,) with ``reduction="none"``.

    Examples
    --------
    >>> import torch
    >>> from skcce.losses import cross_entropy
    >>> z = torch.log(torch.tensor([[0.25, 0.75]]))
    >>> round(float(cross_entropy(z, torch.tensor([[0.0, 1.0]]))), 4)  # -ln 0.75
    0.2877
    """
    _check_pair(logits, target, reduction)
    return _reduce(_shannon_values(logits, target), reduction)


def _shannon_values(logits, target):
    r""":math:`H(y, \sigma)` of every row, the classes along dim 1 (any number of dims)."""
    target = target.detach().to(dtype=logits.dtype)
    return -(target * torch.log_softmax(logits, dim=1)).sum(dim=1)


def reverse_cross_entropy(
    logits: torch.Tensor, target: torch.Tensor, *, reduction: str = "mean"
) -> torch.Tensor:
    r"""Reverse cross-entropy :math:`H(\sigma, y) = -\sum_k \sigma_k \ln y_k`.

    Zeros in ``target`` are clamped to the smallest positive normal number of the dtype, so the
    value stays finite (it is then very large) and the gradient is defined.

    Parameters
    ----------
    logits : torch.Tensor of shape (N, K)
        Unnormalised scores.
    target : torch.Tensor of shape (N, K)
        Soft targets, rows on the simplex (treated as constants).
    reduction : {"mean", "sum", "none"}, default="mean"
        Reduction over the N rows.

    Returns
    -------
    torch.Tensor
        Scalar, or shape (N,) with ``reduction="none"``.

    Examples
    --------
    >>> import torch
    >>> from skcce.losses import reverse_cross_entropy
    >>> z = torch.zeros(1, 2)
    >>> round(float(reverse_cross_entropy(z, torch.tensor([[0.5, 0.5]]))), 4)  # ln 2
    0.6931
    """
    _check_pair(logits, target, reduction)
    return _reduce(_reverse_values(logits, target), reduction)


def _reverse_values(logits, target):
    r""":math:`H(\sigma, y)` of every row, the classes along dim 1 (any number of dims)."""
    target = target.detach().to(dtype=logits.dtype)
    log_t = torch.log(target.clamp_min(torch.finfo(logits.dtype).tiny))
    return -(torch.softmax(logits, dim=1) * log_t).sum(dim=1)


#: the per-row values of each network loss, classes along dim 1
ROW_VALUES = {
    "collision": _collision_values,
    "shannon": _shannon_values,
    "reverse": _reverse_values,
}


def _uniform_or(prior: torch.Tensor | None, like: torch.Tensor) -> torch.Tensor:
    k = like.shape[-1]
    if prior is None:
        return torch.full((k,), 1.0 / k, dtype=like.dtype, device=like.device)
    return torch.as_tensor(prior, dtype=like.dtype, device=like.device)


def fairness(
    ybar: torch.Tensor, *, prior: torch.Tensor | None = None, kind: str = "reverse"
) -> torch.Tensor:
    r"""Fairness term: :math:`KL(u \| \bar y)` (``"reverse"``) or :math:`KL(\bar y \| u)`.

    ``kind="reverse"`` is the paper's strong fairness of loss (b): it is infinite as soon as a
    cluster with positive prior is empty. ``kind="forward"`` is loss (a). Terms with a zero
    coefficient contribute zero (:math:`0 \ln 0 = 0`).

    Parameters
    ----------
    ybar : torch.Tensor of shape (K,)
        A distribution over clusters (the mean pseudo-label or mean prediction).
    prior : torch.Tensor of shape (K,), optional
        Class prior ``u``; uniform when None.
    kind : {"reverse", "forward"}, default="reverse"
        Direction of the Kullback-Leibler divergence.

    Returns
    -------
    torch.Tensor
        Scalar, dtype and device of ``ybar``.

    Examples
    --------
    >>> import torch
    >>> from skcce.losses import fairness
    >>> float(fairness(torch.tensor([0.5, 0.5])))
    0.0
    >>> round(float(fairness(torch.tensor([0.75, 0.25]), kind="forward")), 4)
    0.1308
    """
    if ybar.ndim != 1:
        raise ValueError(f"ybar must have shape (K,); got {tuple(ybar.shape)}")
    return _kl_term(ybar, prior, kind)


def _floored(ybar: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """The mean prediction as the network loss's fairness term reads it: the entries of a
    positive prior floored at the dtype's smallest normal number.

    A very confident head (logit gaps above about 100) can leave a cluster that no row of a
    batch predicts at all in float32: its mean is then exactly 0, the term infinite and its
    gradient NaN, and the next step spreads NaN through the head. Above the floor the values
    and gradients are unchanged; at it the term is finite and that entry passes no gradient
    (its rows' predictions are 0, so the softmax passes none either).
    """
    return torch.where(u > 0, ybar.clamp_min(torch.finfo(ybar.dtype).tiny), ybar)


def _kl_term(
    ybar: torch.Tensor, prior: torch.Tensor | None, kind: str, floor: bool = False
) -> torch.Tensor:
    if kind not in FAIRNESS:
        raise ValueError(f"fairness must be one of {FAIRNESS}; got {kind!r}")
    u = _uniform_or(prior, ybar)
    if floor:  # the network loss's term (:func:`_floored`); the solvers' stays exact
        ybar = _floored(ybar, u)
    if kind == "reverse":
        return (torch.xlogy(u, u) - torch.xlogy(u, ybar)).sum(dim=-1)
    return (torch.xlogy(ybar, ybar) - torch.xlogy(ybar, u)).sum(dim=-1)


def row_cross_entropy(Y: torch.Tensor, probs: torch.Tensor, loss: str) -> torch.Tensor:
    r"""Per-row cross-entropy between pseudo-labels and predictions given as probabilities.

    Parameters
    ----------
    Y : torch.Tensor of shape (N, K)
        Pseudo-labels, rows on the simplex.
    probs : torch.Tensor of shape (N, K)
        Predictions :math:`\sigma`, rows on the simplex.
    loss : {"collision", "shannon", "reverse"}
        :math:`H_2(y,\sigma)`, :math:`H(y,\sigma)` or :math:`H(\sigma, y)`.

    Returns
    -------
    torch.Tensor of shape (N,)
        May hold ``+inf`` (e.g. Shannon with ``y_k > 0`` where ``sigma_k = 0``).

    Examples
    --------
    >>> import torch
    >>> from skcce.losses import row_cross_entropy
    >>> row_cross_entropy(torch.tensor([[1.0, 0.0]]), torch.tensor([[0.5, 0.5]]), "collision")
    tensor([0.6931])
    """
    if loss == "collision":
        return -torch.log((Y * probs).sum(dim=1))
    if loss == "shannon":
        return -torch.xlogy(Y, probs).sum(dim=1)
    if loss == "reverse":
        return -torch.xlogy(probs, Y).sum(dim=1)
    raise ValueError(f"loss must be one of {LOSSES}; got {loss!r}")


def pseudo_label_objective(
    Y: torch.Tensor,
    probs: torch.Tensor,
    *,
    lam: float,
    fairness: str = "reverse",
    prior: torch.Tensor | None = None,
    loss: str = "collision",
) -> torch.Tensor:
    r"""Batch objective :math:`F(Y) = \sum_i H(y_i, \sigma_i) + \lambda\, KL(\cdot)`.

    The cross-entropy terms are summed over the rows (see the module docstring for why this
    is the paper's convention for λ); :math:`\bar y` is the mean of the rows of ``Y``.

    Parameters
    ----------
    Y : torch.Tensor of shape (N, K)
        Pseudo-labels, rows on the simplex.
    probs : torch.Tensor of shape (N, K)
        Predictions :math:`\sigma`, rows on the simplex.
    lam : float
        Weight λ of the fairness term, λ >= 0.
    fairness : {"reverse", "forward"}, default="reverse"
        :math:`KL(u\|\bar y)` (loss (b)) or :math:`KL(\bar y\|u)` (loss (a)).
    prior : torch.Tensor of shape (K,), optional
        Class prior ``u``; uniform when None.
    loss : {"collision", "shannon", "reverse"}, default="collision"
        The cross-entropy of the first term.

    Returns
    -------
    torch.Tensor
        Scalar (``+inf`` when the objective is infinite).

    Examples
    --------
    >>> import torch
    >>> from skcce.losses import pseudo_label_objective
    >>> Y = torch.eye(2)
    >>> probs = torch.tensor([[0.5, 0.5], [0.5, 0.5]])
    >>> round(float(pseudo_label_objective(Y, probs, lam=100.0)), 4)  # 2 ln 2, balanced
    1.3863
    """
    if Y.ndim != 2 or Y.shape != probs.shape:
        raise ValueError(
            f"Y and probs must both have shape (N, K); got {tuple(Y.shape)} and "
            f"{tuple(probs.shape)}"
        )
    rows = row_cross_entropy(Y, probs, loss).sum()
    return rows + lam * _kl_term(Y.mean(dim=0), prior, fairness)


def _network_loss_grad(logits, sigma, target, loss, prior, kind, fairness_weight, row_weight=None):
    r"""The network loss of a step, per restart, and its gradient with respect to the logits
    in closed form (no autograd graph).

    The loss is ``mean_i H(y_i, sigma_i) + fairness_weight * KL-term(mean_i sigma_i)`` (the
    train step's, :mod:`skcce._engine._step`), for every leading index at once: the classes
    are along dim 1 and the rows along the last dim (``(R, K, B)``: ``R`` restarts trained
    together, each with its own means). With :math:`J_i = \operatorname{diag}(\sigma_i) -
    \sigma_i \sigma_i^\top` and :math:`g` the gradient of the KL term at the mean
    prediction, the row gradient is :math:`w_i (\nabla_z H(y_i, \sigma_i) + \text{weight}\,
    J_i g) / B` (:math:`w_i = 1` unless ``row_weight``), with
    :math:`\nabla_z H_2 = \sigma - \operatorname{softmax}(z + \ln y)`
    (in log space, so exact zeros in ``y`` and underflowing :math:`\sigma` are safe),
    :math:`\nabla_z H = \sigma - y` and :math:`\nabla_z H(\sigma, y) = -\sigma \odot (a -
    \sigma^\top a)`, :math:`a = \ln y`. Tested against autograd (``tests/test_losses.py``).

    Parameters
    ----------
    logits, sigma, target : torch.Tensor of shape (R, K, B)
        Logits, their softmax along dim 1, and the pseudo-labels.
    loss : {"collision", "shannon", "reverse"}
    prior : torch.Tensor of shape (K,) or None
        None: uniform. With ``kind="forward"`` every entry must be positive.
    kind : {"reverse", "forward"}
    fairness_weight : float
    row_weight : torch.Tensor of shape (R, 1, B), optional
        Factors ``w_i`` of the rows' gradients (None: 1).

    Returns
    -------
    values : torch.Tensor of shape (R,)
        ``mean_i H(y_i, sigma_i)`` of each restart.
    fair : torch.Tensor of shape (R,)
        The KL term of each restart.
    grad : torch.Tensor of shape (R, K, B)
        The gradient of ``values + fairness_weight * fair`` (summed over restarts).
    """
    target = target.to(dtype=logits.dtype)
    if loss == "collision":
        shifted, m = _shifted_log(target)
        shifted = logits + shifted
        lse = torch.logsumexp(shifted, dim=1, keepdim=True)
        values = torch.logsumexp(logits, dim=1) - (lse + m).squeeze(1)
        rows = sigma - torch.exp(shifted - lse)
    else:
        values = ROW_VALUES[loss](logits, target)
        if loss == "shannon":
            rows = sigma * target.sum(dim=1, keepdim=True) - target
        else:
            a = torch.log(target.clamp_min(torch.finfo(logits.dtype).tiny))
            rows = -sigma * (a - (sigma * a).sum(dim=1, keepdim=True))
    ybar = sigma.mean(dim=-1)  # (R, K)
    u = _uniform_or(prior, ybar)
    ybar = _floored(ybar, u)  # the train step's term (_kl_term(..., floor=True))
    fair = _kl_term(ybar, prior, kind)
    if fairness_weight:
        g = (-u / ybar if kind == "reverse" else torch.log(ybar) + 1.0 - torch.log(u))[..., None]
        rows = rows + fairness_weight * sigma * (g - (sigma * g).sum(dim=1, keepdim=True))
    if row_weight is not None:
        rows = rows * row_weight
    return values.mean(dim=-1), fair, rows / logits.shape[-1]
