"""One training run of CCEClustering (one restart): the epoch loop around the train step.

:func:`run_single` is the engine's "single run", in the manner of scikit-learn's
``_kmeans_single_lloyd``: it builds the network from a seed, resumes it when asked, trains
it for at most ``cfg.max_epochs`` epochs of :func:`skcce._engine._step.train_step` (fewer
when :func:`skcce._engine._epoch_stop.stop_now` says its labels have settled), and returns a
:class:`~skcce._engine._callbacks.RunResult` (history, training-set labels and cluster
sizes, label-free score, interrupted or not; computed in one streaming pass, without the
(N, K) probabilities). Nothing here validates user input (the estimator does).

Batches are copied from the user's array and moved to the device one at a time. With one
process, Ctrl-C during a run ends it at the end of its last completed epoch (the result says
``interrupted``); under data parallelism the KeyboardInterrupt propagates (resume from the
checkpoint instead).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import torch

from skcce._engine._callbacks import EpochEnd, RunResult, cluster_sizes
from skcce._engine._checkpoint import cpu_state
from skcce._engine._epoch_stop import stop_now
from skcce._engine._inference import infer_labels_sharded
from skcce._engine._label_change import LabelChanges
from skcce._engine._prior import PriorTracker
from skcce._engine._relocate import relocate_epoch_
from skcce._engine._step import Step, train_step


class FitInterruptedWarning(UserWarning):
    """``fit`` was interrupted (Ctrl-C): the fitted state is the last completed epoch's."""


@dataclass
class TrainConfig:
    """Resolved, validated settings of one training run (built by the estimator)."""

    n_clusters: int
    lam: float
    fairness: str
    loss: str
    prior: np.ndarray | None
    fairness_weight: float
    optimizer: str
    learning_rate: float
    backbone_learning_rate: float | None
    weight_decay: float
    batch_size: int
    max_epochs: int
    solver_tol: float
    solver_max_iter: int
    augment: object
    augment_weight: float
    device: torch.device
    amp: bool
    verbose: int
    solver: str = "newton"
    solve_threads: int = 1  # threads for independent problems (batched restarts)
    n_iter_no_change: int | None = None  # the epoch stop (_epoch_stop); None: max_epochs
    prior_kind: str = "uniform"  # "uniform", "match" (the user's prior), "estimate", "auto"
    n_samples: int = 1  # rows of an epoch (the estimated prior's memory)
    decay_by_share: bool = False  # the linear head's decay per row (_decay); optimiser's 0


def make_tracker(cfg: TrainConfig, runs) -> PriorTracker:
    """The class prior of the restarts ``runs`` of a fit (:mod:`skcce._engine._prior`)."""
    return PriorTracker(cfg.prior_kind, cfg.n_clusters, runs, cfg.prior, cfg.n_samples)


def make_optimizer(module, cfg: TrainConfig):
    """SGD or Adam over the module's parameters (a separate backbone rate when set)."""
    if cfg.backbone_learning_rate is not None:
        from skcce.models import param_groups

        params = param_groups(module, cfg.learning_rate, cfg.backbone_learning_rate)
    else:
        params = module.parameters()
    decay = 0.0 if cfg.decay_by_share else cfg.weight_decay  # then added per row (_decay)
    if cfg.optimizer == "sgd":
        return torch.optim.SGD(params, lr=cfg.learning_rate, weight_decay=decay)
    return torch.optim.Adam(params, lr=cfg.learning_rate, weight_decay=decay)


def run_epoch(step: Step, X, generator, run, epoch, callbacks, changes=None) -> dict:
    """One pass over X in shuffled global batches; returns the epoch's history entry
    (its ``"changed"``: rows whose label changed since the last epoch recorded in
    ``changes``, a :class:`~skcce._engine._label_change.LabelChanges`; None without one or
    after the first)."""
    cfg, ctx, k, n = step.cfg, step.ctx, step.cfg.n_clusters, X.shape[0]
    t0 = time.perf_counter()
    step.model.train()
    order = torch.randperm(n, generator=generator).numpy()
    aug_gen = generator
    if ctx.active and cfg.augment is not None:
        # the shared generator must stay in step on every rank: augmentation draws from a
        # per-epoch, per-rank generator derived from it
        seed = int(torch.randint(2**62, (1,), generator=generator))
        aug_gen = torch.Generator().manual_seed(seed + 7919 * ctx.rank)
    # the epoch's statistics add up on the device and are read once, after the last batch
    sums = torch.zeros(2, dtype=torch.float64, device=cfg.device)  # loss, fairness
    counts = torch.zeros(k, dtype=torch.int64, device=cfg.device)
    solver_iter = unconverged = 0
    for begin in range(0, n, cfg.batch_size):
        rows = np.sort(order[begin : begin + cfg.batch_size])  # the global batch
        out = train_step(step, X, rows, aug_gen)
        solver_iter += out.solver.n_iter  # host values: the solver's result
        unconverged += not out.solver.converged
        sums += torch.stack([out.loss, out.fairness]).to(torch.float64) * out.n_local
        pred = out.logits.argmax(dim=1)  # scatter_add_, not bincount: no sync on CUDA
        counts.scatter_add_(0, pred, torch.ones_like(pred))
        if changes is not None:
            changes.record(ctx.shard(rows)[None], pred[None])
        for callback in callbacks:
            callback.on_batch_end(run)
    sums, counts = sums.cpu().numpy(), counts.cpu().numpy()
    tot_loss, tot_fair = float(sums[0]), float(sums[1])
    changed = None if changes is None else changes.end_epoch(ctx if ctx.active else None)
    if ctx.active:  # epoch statistics of the whole data
        summed = ctx.sum_array([tot_loss, tot_fair, *counts], cfg.device)
        tot_loss, tot_fair = float(summed[0]), float(summed[1])
        counts = np.rint(summed[2:]).astype(np.int64)
    return {
        "epoch": epoch,
        "loss": tot_loss / n,
        "fairness": tot_fair / n,
        "cluster_sizes": counts.tolist(),
        "solver_iter": solver_iter,
        "solver_unconverged": unconverged,
        "relocated": 0,
        "changed": None if changed is None else int(changed[0]),
        "time": time.perf_counter() - t0,
    }


def _relocate(step, X, history, seed, epoch) -> int:
    """Before ``epoch``: re-seed the linear head's clusters that the last epoch of
    ``history`` (or, before the first, the start) lost (:mod:`skcce._engine._relocate`);
    how many were."""
    if type(step.network) is not torch.nn.Linear:
        return 0
    layer, cfg = step.network, step.cfg
    sizes = history[-1]["cluster_sizes"] if history else None  # None: the start's
    donors = relocate_epoch_(layer.weight, layer.bias, sizes,
                             step.tracker.value[0], cfg.batch_size, X, step.inputs, cfg.device,
                             seed, epoch)  # fmt: skip
    return len(donors)


def _epochs(step, X, generator, run, first, history, callbacks, seed, labels=None):
    """Epochs ``first`` .. ``max_epochs - 1``; returns the last completed ``(weights,
    history)`` when Ctrl-C ends them early with one process (None: nothing completed).
    Before each epoch the built-in linear head re-seeds the clusters that the last epoch
    (before the first, the start) lost; training ends early when :func:`stop_now` says so
    (``labels``: a resumed restart's labels of its last epoch)."""
    module, ctx = step.network, step.ctx
    done = (cpu_state(module), list(history)) if first > 0 and not ctx.active else None
    changes = LabelChanges(1, X.shape[0], step.cfg.device)
    changes.restore(0, labels)
    if stop_now(history, step.cfg.n_iter_no_change):  # resumed after its last epoch
        return None
    try:
        for epoch in range(first, step.cfg.max_epochs):
            for callback in callbacks:
                callback.on_epoch_begin(run, epoch)
            moved = _relocate(step, X, history, seed, epoch)
            history.append(run_epoch(step, X, generator, run, epoch, callbacks, changes))
            history[-1]["relocated"] = moved
            if not np.isfinite(history[-1]["loss"]):
                raise FloatingPointError(
                    f"the training loss became non-finite in epoch {epoch}; lower "
                    "learning_rate or check the scale of X"
                )
            done = (cpu_state(module), list(history))  # one statement: Ctrl-C safe
            state = EpochEnd(
                run, epoch + 1, done[1], done[0], step.optimizer, generator, step.prior_state(),
                changes.last(0),
            )
            for callback in callbacks:
                callback.on_epoch_end(state)
            if stop_now(history, step.cfg.n_iter_no_change):
                break
        ctx.sync_buffers(module)  # per-rank BatchNorm statistics (CPU): take rank 0's
    except KeyboardInterrupt:
        if ctx.active:
            raise
        return done or (None, [])
    return None


def run_single(X, prepared, cfg, build, seed, run, *, ctx, callbacks=(), resume=None):
    """Train restart ``run`` (network ``build(torch.Generator().manual_seed(seed))``).

    Parameters
    ----------
    X : ndarray
        The user's array; batches are cut from it and moved to the device one at a time.
    prepared : skcce._engine._preprocess.Prepared
        Its layout and fitted normalisation.
    cfg : TrainConfig
        Resolved settings; ``cfg.batch_size`` is the global batch size.
    build : callable
        ``build(generator, run=run, seed=seed) -> torch.nn.Module``, the untrained network
        of this restart.
    seed : int
        Seeds the network and the shuffling (the same on every rank).
    run : int
        Index of this restart.
    ctx : skcce._engine._distributed.Context
        Data-parallel context.
    callbacks : sequence of Callback
    resume : skcce._engine._checkpoint.Resume, optional
        Continues this restart where its checkpoint left it.

    Returns
    -------
    RunResult

    Raises
    ------
    FloatingPointError
        The training loss or the network's predictions are not finite.
    """
    generator = torch.Generator().manual_seed(int(seed))
    module = build(generator, run=run, seed=seed)
    first, history, opt_state, mass, labels = (
        resume.restore(run, module, generator) if resume else (0, [], None, None, None)
    )
    module.to(cfg.device)
    model, unwrap = ctx.wrap(module, cfg.device)
    step = Step(module, model, make_optimizer(module, cfg), prepared.inputs, cfg, ctx)
    if opt_state is not None:
        step.optimizer.load_state_dict(opt_state)
    step.set_tracker(make_tracker(cfg, [run]), mass)
    for callback in callbacks:
        callback.on_run_begin(run, first)
    try:
        stopped = _epochs(step, X, generator, run, first, history, callbacks, seed, labels)
    finally:
        unwrap()
        # drop the DDP wrapper now: an exception's traceback keeps this frame alive, and a
        # wrapper destroyed later (after destroy_process_group) can abort the process
        step.model = model = None  # noqa: F841
    if stopped is not None:
        weights, history = stopped
        if weights is not None:
            module.load_state_dict(weights)
    if not history:
        return RunResult(run, module, history, None, None, interrupted=True)
    k = cfg.n_clusters
    labels, score = infer_labels_sharded(module, X, prepared.inputs, cfg.device, ctx, k)
    prior = step.tracker.prior_of(0, step.tracker.mass[0])
    sizes = cluster_sizes(labels, k)
    return RunResult(run, module, history, labels, score, stopped is not None, prior, sizes)
