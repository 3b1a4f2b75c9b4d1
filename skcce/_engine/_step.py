"""One training step of the supplement's Algorithm 1, on one mini-batch.

1. forward the batch, ``sigma = softmax(logits)`` (detached);
2. solve the batch's soft pseudo-labels exactly, warm-started from ``sigma`` (the solvers'
   private path :func:`skcce.solvers._solve`: the data are valid rows by construction); when
   the compiled kernels take the problem it is solved on the host, with one copy of the
   probabilities there and one of the labels back (:mod:`skcce.solvers._transfer`);
3. one optimiser step on the network loss

   ``mean_i H(y_i, sigma_i) + fairness_weight * KL(u || mean_i sigma_i)``
   ``[+ augment_weight * mean_i H(y_i, sigma(aug(x_i)))]``,

   the gradient reaching row ``i`` multiplied by ``w_i``: 1 unless the prior is estimated
   and the row's cluster has shrunk (the shrink guard of :mod:`skcce._engine._prior`).

The second term is our reading of the supplement's "1.3 as the weight of fairness term in (1)":
the network loss also carries the fairness term, evaluated on the mean *prediction* (the only
part of it that depends on the network). It is what keeps a linear head on raw pixels from
collapsing into a few clusters (docs: user guide, "network loss").

Under data parallelism (:mod:`skcce._engine._distributed`) the batch is the global batch:
every rank trains on its shard of it, the pseudo-labels are solved for the whole batch, and
the loss is scaled so that DDP's averaged gradient is the one-process gradient.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from skcce._engine._decay import add_share_decay
from skcce.losses import (
    _kl_term,
    collision_cross_entropy,
    cross_entropy,
    reverse_cross_entropy,
)
from skcce.solvers import _compiled, _solve, _transfer, make_problem

NETWORK_LOSSES = {
    "collision": collision_cross_entropy,
    "shannon": cross_entropy,
    "reverse": reverse_cross_entropy,
}


@dataclass
class Step:
    """What every step of one run shares: the network and the model that trains it (the
    network itself, or its DDP wrapper), the optimiser, the fitted normalisation, the settings,
    the data-parallel context and the prior (float64 on the CPU for the solver, float32 on
    the device for the network loss; None: uniform), kept by ``tracker``
    (:class:`skcce._engine._prior.PriorTracker`: fixed, matched or estimated)."""

    network: torch.nn.Module
    model: torch.nn.Module
    optimizer: torch.optim.Optimizer
    inputs: object
    cfg: object
    ctx: object
    prior: torch.Tensor | None = None
    prior_dev: torch.Tensor | None = None
    tracker: object = None

    def set_tracker(self, tracker, mass=None):
        """Take the prior from ``tracker`` (resumed from ``mass`` when given)."""
        self.tracker = tracker
        if mass is not None:
            tracker.restore(mass)
        self._refresh()

    def _refresh(self):
        if self.tracker is None:
            self.prior = self.prior_dev = None
            return
        prior, prior_dev = self.tracker.tensors(self.cfg.device)
        self.prior = None if prior is None else prior[0]  # one restart
        self.prior_dev = None if prior_dev is None else prior_dev[0]

    def carry(self, n_rows):
        """The fairness term's carried mass (K,) for a batch of ``n_rows`` rows, or None (see
        :mod:`skcce._engine._marginal`)."""
        carry = None if self.tracker is None else self.tracker.marginal.carry(n_rows)
        return None if carry is None else carry[0]

    def update_prior(self, labels):
        """After a step: the tracker sees the batch's pseudo-labels ``labels`` (B, K)."""
        if self.tracker is None:
            return
        self.tracker.see([labels])
        if self.tracker.varies:
            self._refresh()

    def guard_factors(self, labels, n_global, ctx):
        """This rank's rows of the factors of the rows' gradients, (b, 1) float32 on the
        device, from the global batch's ``labels`` (B, K); None when every row gets 1
        (:meth:`skcce._engine._prior.PriorTracker.shrink_guard`)."""
        factors = None if self.tracker is None else self.tracker.shrink_guard(labels[None])
        if factors is None:
            return None
        local = factors[0, _local_rows(ctx, n_global), None]  # (b, 1): against (b, K) logits
        return torch.from_numpy(local).to(self.cfg.device, torch.float32)

    def prior_state(self):
        """The tracker's state: estimated masses and running marginal (None without one)."""
        return None if self.tracker is None else self.tracker.state()


@dataclass
class StepResult:
    """The detached loss and fairness of a step, this rank's rows, logits and solver result."""

    loss: torch.Tensor
    fairness: torch.Tensor
    n_local: int
    logits: torch.Tensor
    solver: object


def _local_loss(values, n_local, n_global, world_size):
    """This rank's share of a mean over the global batch, scaled for DDP's gradient average.

    ``values`` is the mean over the local rows; the result is ``(W / B) * sum_local``, so
    the ranks' gradients average (DDP) to the gradient of the mean over all ``B`` rows.
    (An empty shard passes ``logits.sum() * 0``: an exact zero that keeps the network in
    the graph, as DDP needs every rank to reduce the same gradients.)
    """
    if n_local == 0 or world_size == 1:
        return values
    return values * (world_size * n_local / n_global)


def pseudo_labels(probs, n_global, cfg, prior, ctx, carry=None):
    """This rank's rows of the exact pseudo-labels of the global batch, and the solver result.

    ``probs`` (float64, this rank's rows of the global batch of ``n_global`` rows, in the
    shard order of ``ctx``) are gathered from every rank; every rank solves the same global
    problem with the same deterministic solver and keeps its own rows, so the labels are
    bitwise those of one process solving the concatenated batch. ``carry``: the fairness
    term's carried mass (K,) or None (:mod:`skcce._engine._marginal`).

    Raises
    ------
    FloatingPointError
        The network's predictions are not finite (training diverged).
    """
    probs = host_probs(ctx.gather_rows(probs, n_global), cfg)
    res = solve_rows(probs, cfg, prior, carry)
    return res.labels[_local_rows(ctx, n_global)], res


def _local_rows(ctx, n_global):
    """This rank's rows of a global batch of ``n_global`` rows, as a slice."""
    lo, hi = ctx.bounds(n_global)[ctx.rank : ctx.rank + 2]
    return slice(lo, hi)


def host_probs(probs, cfg):
    """``probs`` where the batch's problem is solved: on the host when the compiled kernels
    take it (the step's one device-to-host copy, after which the check and the whole solve
    read no device memory), else where they are; checked finite.

    Raises
    ------
    FloatingPointError
        The network's predictions are not finite (training diverged).
    """
    if _compiled.takes(cfg.loss, cfg.solver, device_type=probs.device.type, lam=cfg.lam,
                       k=probs.shape[1]):  # fmt: skip
        probs = _transfer.to_host(probs)
    # probabilities are at most 1, so their sum is finite exactly when every entry is
    if not bool(torch.isfinite(probs.sum())):
        raise FloatingPointError(
            "the network's predictions became non-finite; lower learning_rate or check the "
            "scale of X"
        )
    return probs


def solve_rows(probs, cfg, prior, carry=None):
    """The exact pseudo-labels of the rows ``probs`` (finite, on the simplex): the result.
    ``carry`` (K,) NumPy or None: the fairness term's carried mass."""
    if cfg.solver == "sinkhorn":  # SeLa's hard marginal takes no fairness term
        carry = None
    problem = make_problem(probs, lam=cfg.lam, fairness=cfg.fairness, prior=prior, loss=cfg.loss,
                           carry=carry)  # fmt: skip
    return _solve(problem, cfg.solver, tol=cfg.solver_tol, max_iter=cfg.solver_max_iter)


def _scale_rows(logits, factors):
    """Multiply the gradient that reaches ``logits`` (both terms of the network loss) by
    ``factors``, shaped to broadcast against it (one factor per row); nothing when
    ``factors`` is None."""
    if factors is not None and logits.requires_grad:
        logits.register_hook(lambda grad: grad * factors)


def _forward(model, xb, amp):
    with torch.autocast("cuda", dtype=torch.bfloat16, enabled=amp):
        return model(xb).float()


def train_step(step: Step, X, rows, aug_gen) -> StepResult:
    """Algorithm 1 on the global batch ``rows`` (sorted indices into X): pseudo-labels, then
    one optimiser step. ``aug_gen`` draws the augmentation's randomness."""
    cfg, ctx, inputs = step.cfg, step.ctx, step.inputs
    device, n_global = cfg.device, len(rows)
    idx = ctx.shard(rows)
    raw = inputs.raw(X, idx, device)
    xb = inputs.normalize(raw)
    logits = _forward(step.model, xb, cfg.amp)
    sigma = torch.softmax(logits, dim=1)
    probs = sigma.detach().to(torch.float64)
    probs = probs / probs.sum(dim=1, keepdim=True)  # exact rows in float64
    Y, res = pseudo_labels(probs, n_global, cfg, step.prior, ctx, step.carry(n_global))
    factors = step.guard_factors(res.labels, n_global, ctx)  # this rank's rows, or None
    _scale_rows(logits, factors)
    Y = _transfer.to_device(Y.to(logits.dtype), device)  # labels solved on the host: one copy
    net_loss = NETWORK_LOSSES[cfg.loss]
    loss = net_loss(logits, Y) if len(idx) else logits.sum() * 0
    if ctx.active:
        mean_sigma = ctx.global_sum(sigma.sum(dim=0)) / n_global
    else:
        mean_sigma = sigma.mean(dim=0)
    fair = _kl_term(mean_sigma, step.prior_dev, cfg.fairness, floor=True)
    total = _local_loss(loss, len(idx), n_global, ctx.world_size)
    total = total + cfg.fairness_weight * fair
    if cfg.augment is not None and cfg.augment_weight > 0:
        # augment before normalising: geometric transforms fill borders with 0 = black in
        # [0, 1] image space, not with the mean pixel
        xa = inputs.normalize(cfg.augment(raw, generator=aug_gen)) if len(idx) else xb
        logits_a = _forward(step.model, xa, cfg.amp)
        _scale_rows(logits_a, factors)
        loss_a = net_loss(logits_a, Y) if len(idx) else logits_a.sum() * 0
        total = total + cfg.augment_weight * _local_loss(loss_a, len(idx), n_global, ctx.world_size)
    step.optimizer.zero_grad(set_to_none=True)
    total.backward()
    if cfg.decay_by_share:  # the linear head's decay per row (skcce._engine._decay)
        head = step.network
        add_share_decay(head.weight, head.bias, head.weight.grad, head.bias.grad,
                        cfg.weight_decay, step.tracker.marginal.value[0])  # fmt: skip
    step.optimizer.step()
    step.update_prior(res.labels)  # the global batch's labels: the same on every rank
    return StepResult(loss.detach(), fair.detach(), len(idx), logits, res)
