"""The training engine of CCEClustering: epochs, mini-batches and Algorithm 1.

Nothing here validates user input (the estimator does). Per epoch and per mini-batch:

1. forward the batch, ``sigma = softmax(logits)`` (detached);
2. solve the batch's soft pseudo-labels exactly, warm-started from ``sigma``
   (:func:`skcce.solvers.solve_pseudo_labels`, the y-step of the supplement's Algorithm 1);
3. one optimiser step on the network loss

   ``mean_i H(y_i, sigma_i) + fairness_weight * KL(u || mean_i sigma_i)``
   ``[+ augment_weight * mean_i H(y_i, sigma(aug(x_i)))]``.

The second term is our reading of the supplement's "1.3 as the weight of fairness term in (1)":
the network loss also carries the fairness term, evaluated on the mean *prediction* (the only
part of it that depends on the network). It is what keeps a linear head on raw pixels from
collapsing into a few clusters (docs: user guide, "network loss").

Batches are copied from the user's array and moved to the device one at a time. Under data
parallelism (:mod:`skcce._distributed`) ``batch_size`` is the global batch: every rank trains on
its shard of it, the pseudo-labels are solved for the whole batch, and the loss is scaled so that
DDP's averaged gradient is the one-process gradient. :func:`train` can resume from a checkpoint
state and, with one process, turns Ctrl-C into :class:`TrainingInterrupted` at the end of the
last completed epoch.
"""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass, field

import numpy as np
import torch

from skcce.losses import (
    _kl_term,
    collision_cross_entropy,
    cross_entropy,
    reverse_cross_entropy,
)
from skcce.solvers import solve_pseudo_labels

NETWORK_LOSSES = {
    "collision": collision_cross_entropy,
    "shannon": cross_entropy,
    "reverse": reverse_cross_entropy,
}


@dataclass
class Inputs:
    """How to turn rows of the user's array into a normalised float batch on a device.

    Attributes
    ----------
    layout : {"flat", "nhw", "nhwc", "nchw"}
        Layout of the array seen in ``fit`` (``predict`` may use another image layout).
    mean, std : numpy.ndarray
        Flat features: per-feature centre and the global scale (the same value for every
        feature), float64, in units of ``X / scale``. Images: per-channel mean and standard
        deviation (float32) of the image values (uint8 images divided by 255 first).
    scale : float
        A power of two (exact division) that every non-uint8 input is divided by first.
        Flat features: about the largest ``|x|`` seen in fit, so that the statistics and
        the normalisation never overflow or underflow, whatever the scale of X (1e-30 and
        1e+30 alike). Float images: 1 (they are used as given) unless their largest
        ``|x|`` is outside [2**-64, 2**64]. uint8 images are always divided by 255.

    Notes
    -----
    Flat features are normalised on the host, batch by batch, in float64 (centring a
    float64 column at 1e10 in float32 would lose the data), and only the float32 result
    moves to the device; :meth:`normalize` is then the identity. Images move to the device
    in their own dtype (uint8 images stay 1 byte a pixel) and are normalised there, after
    any augmentation in image space.
    """

    layout: str
    mean: np.ndarray
    std: np.ndarray
    scale: float = 1.0  # class default: models pickled before it existed load unchanged
    _cache: dict = field(default_factory=dict, repr=False)

    def __getstate__(self):
        state = self.__dict__.copy()
        state["_cache"] = {}  # device tensors are rebuilt on demand (CUDA-free unpickling)
        return state

    def raw(self, X, idx, device, layout=None) -> torch.Tensor:
        """Rows ``idx`` of ``X`` (in ``layout``, default the fitted one) as float32
        (B, *input_shape) on ``device``: images in image space (uint8 scaled to [0, 1]),
        not normalised; flat features already normalised (see the class notes).

        Only the batch is copied: ``X`` itself is never converted or written to.
        """
        layout = layout or self.layout
        block = X[idx]  # a view for a slice, a batch-sized copy for an index array
        if self.layout == "flat":
            z = np.multiply(block, 1.0 / self.scale, dtype=np.float64)  # our own array
            z -= self.mean
            z /= self.std
            with np.errstate(over="ignore"):  # far outside the fit's range: inf, which
                z = z.astype(np.float32)  # predict_proba reports as such
            return torch.from_numpy(z).to(device=device)
        if X.dtype != np.uint8 and self.scale != 1.0:
            work = np.float64 if block.dtype == np.float64 else np.float32
            block = np.multiply(block, 1.0 / self.scale, dtype=work)
        elif not (block.flags.c_contiguous and block.flags.writeable):
            # torch.from_numpy warns on read-only arrays: copy the batch, never X
            block = np.array(block, order="C")
        xb = torch.from_numpy(block).to(device=device).to(torch.float32)
        if layout == "nhw":
            xb = xb.unsqueeze(1)
        elif layout == "nhwc":
            xb = xb.permute(0, 3, 1, 2)
        return xb / 255.0 if X.dtype == np.uint8 else xb

    def normalize(self, xb: torch.Tensor) -> torch.Tensor:
        """Apply the fitted centring and scaling to a batch from :meth:`raw` (images; flat
        features come out of :meth:`raw` normalised)."""
        if self.layout == "flat":
            return xb
        key = str(xb.device)
        if key not in self._cache:
            shape = (1, -1, 1, 1)
            mean = torch.as_tensor(self.mean, dtype=torch.float32, device=xb.device)
            std = torch.as_tensor(self.std, dtype=torch.float32, device=xb.device)
            self._cache[key] = (mean.view(shape), std.view(shape))
        mean, std = self._cache[key]
        return ((xb - mean) / std).contiguous()

    def batch(self, X, idx, device, layout=None) -> torch.Tensor:
        """Rows ``idx`` of ``X`` as a normalised float32 (B, *input_shape) tensor on device."""
        return self.normalize(self.raw(X, idx, device, layout))


_REDUCE_AXES = {"flat": (0,), "nhw": (0, 2, 3), "nhwc": (0, 1, 2), "nchw": (0, 2, 3)}
_IMAGE_BAND = (2.0**-64, 2.0**64)  # float images inside it are used as given


def _power_of_two(value: float) -> float:
    """The power of two 2**e with value / 2**e in [0.5, 1) (1 for 0)."""
    if value == 0:
        return 1.0
    return float(np.ldexp(1.0, int(np.frexp(value)[1])))


def fit_inputs(X: np.ndarray, layout: str, chunk: int | None = None) -> Inputs:
    """Fit the normalisation by streaming over X in chunks (no full float copy of X).

    Flat features: per-feature mean and one global scale (the root mean variance), which keeps
    the relative geometry of the features. Images: per-channel mean and standard deviation.

    Two passes over X, chunk by chunk (``chunk`` rows; default about 2**20 values, 8 MB of
    float64 temporaries): (1) the per-feature/pixel minimum and maximum in X's own dtype,
    which give the power-of-two ``scale`` (see :class:`Inputs`) and the exactly constant
    features; (2) the means and sums of squared deviations of ``X / scale`` in float64,
    combined across chunks by Chan et al.'s pairwise update, which, unlike
    ``E[x^2] - E[x]^2``, keeps the variance of a column far from 0 (1e10 +- 1). A constant
    feature gets variance 0 exactly; a constant channel, or X without any variation,
    a scale of 1.

    Warns
    -----
    UserWarning
        When all samples of X are identical (more than one sample): nothing can separate
        them, so every sample falls in the same cluster.
    """
    n = X.shape[0]
    step = chunk or max(1, (1 << 20) // max(1, int(np.prod(X.shape[1:]))))
    lo = hi = None
    for start in range(0, n, step):
        block = X[start : start + step]
        bmin, bmax = block.min(axis=0), block.max(axis=0)
        lo = bmin if lo is None else np.minimum(lo, bmin)
        hi = bmax if hi is None else np.maximum(hi, bmax)
    identical = bool(np.all(lo == hi))
    if X.dtype == np.uint8:
        scale, unit = 1.0, 255.0
    else:
        peak = max(abs(float(lo.min())), abs(float(hi.max())))
        scale, unit = _power_of_two(peak), 1.0
        if layout != "flat" and _IMAGE_BAND[0] <= peak <= _IMAGE_BAND[1]:
            scale = 1.0
    axes = _REDUCE_AXES[layout]
    count, mean, m2 = 0, 0.0, 0.0
    for start in range(0, n, step):
        block = np.multiply(X[start : start + step], 1.0 / (scale * unit), dtype=np.float64)
        if layout == "nhw":
            block = block[:, None]
        nb = block.size // (block.shape[-1] if layout == "nhwc" else block.shape[1])
        bmean = block.mean(axis=axes, keepdims=True)
        block -= bmean
        block *= block
        bm2 = block.sum(axis=axes)
        bmean = bmean.reshape(bm2.shape)
        delta = bmean - mean
        total = count + nb
        mean = mean + delta * (nb / total)
        m2 = m2 + bm2 + delta * delta * (count * nb / total)
        count = total
    var = m2 / count
    constant = lo == hi  # per feature (flat) or per pixel (images)
    if layout == "flat":
        var = np.where(constant, 0.0, var)
        std = np.full_like(mean, np.sqrt(var.mean()))
    else:
        channel_axes = {"nhw": (0, 1), "nhwc": (0, 1), "nchw": (1, 2)}[layout]
        var = np.where(np.all(constant, axis=channel_axes), 0.0, var)
        std = np.sqrt(var)
    std = np.where(std > 0, std, 1.0)
    if identical and n > 1:
        warnings.warn(
            f"all {n} samples of X are identical (every feature is constant): nothing can "
            "separate them, so they all fall in one cluster",
            UserWarning,
            stacklevel=3,
        )
    if layout != "flat":
        tiny = np.finfo(np.float32).tiny
        mean, std = mean.astype(np.float32), np.maximum(std, tiny).astype(np.float32)
    return Inputs(layout, mean, std, scale)


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
    em_tol: float
    em_max_iter: int
    augment: object
    augment_weight: float
    device: torch.device
    amp: bool
    verbose: int
    solver: str = "auto"


def _make_optimizer(module, cfg: TrainConfig):
    if cfg.backbone_learning_rate is not None:
        from skcce.models import param_groups

        params = param_groups(module, cfg.learning_rate, cfg.backbone_learning_rate)
    else:
        params = module.parameters()
    if cfg.optimizer == "sgd":
        return torch.optim.SGD(params, lr=cfg.learning_rate, weight_decay=cfg.weight_decay)
    return torch.optim.Adam(params, lr=cfg.learning_rate, weight_decay=cfg.weight_decay)


def _progress(total, cfg, desc, ctx=None):
    if not cfg.verbose or (ctx is not None and not ctx.is_main):
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, leave=False)


class TrainingInterrupted(KeyboardInterrupt):
    """KeyboardInterrupt during :func:`train`, raised after the module was put back to the
    end of its last completed epoch; ``history`` lists the completed epochs."""

    def __init__(self, history):
        super().__init__(f"training interrupted after {len(history)} completed epochs")
        self.history = history


class FitInterruptedWarning(UserWarning):
    """``fit`` was interrupted (Ctrl-C): the fitted state is the last completed epoch's."""


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


def pseudo_labels(probs, n_global, cfg: TrainConfig, prior, ctx):
    """This rank's rows of the exact pseudo-labels of the global batch, and the solver result.

    ``probs`` (float64, this rank's rows of the global batch of ``n_global`` rows, in the
    shard order of ``ctx``) are gathered from every rank; every rank solves the same global
    problem with the same deterministic solver and keeps its own rows, so the labels are
    bitwise those of one process solving the concatenated batch.
    """
    res = solve_pseudo_labels(
        ctx.gather_rows(probs, n_global),
        lam=cfg.lam,
        fairness=cfg.fairness,
        prior=prior,
        loss=cfg.loss,
        tol=cfg.em_tol,
        max_iter=cfg.em_max_iter,
        method=cfg.solver,
    )
    lo, hi = ctx.bounds(n_global)[ctx.rank : ctx.rank + 2]
    return res.labels[lo:hi], res


def train(
    module,
    X,
    inputs: Inputs,
    cfg: TrainConfig,
    generator: torch.Generator,
    desc="fit",
    on_epoch=None,
    *,
    ctx=None,
    start=None,
    on_epoch_end=None,
):
    """Run Algorithm 1 up to ``cfg.max_epochs`` epochs; returns the per-epoch history.

    Parameters
    ----------
    module : torch.nn.Module
        The network, trained in place (moved to ``cfg.device``).
    X : ndarray
        The user's array; batches are cut from it and moved to the device one at a time.
    inputs : Inputs
        Fitted normalisation.
    cfg : TrainConfig
        Resolved settings; ``cfg.batch_size`` is the global batch size.
    generator : torch.Generator
        Shuffling (and, with one process, augmentation) randomness; the same seed on every
        rank under data parallelism.
    desc : str
        Progress bar label.
    on_epoch : callable, optional
        ``on_epoch(event, epoch)`` with ``"begin"`` and ``"end"`` around every epoch (the
        estimator forwards it to scikit-learn's callback API).
    ctx : skcce._distributed.Context, optional
        Data-parallel context (default: one process). See :mod:`skcce._distributed`.
    start : dict, optional
        Resume point: ``{"epoch": e, "history": [...], "optimizer": state_dict}``; the caller
        has already restored the module's weights and the generator's state at the end of
        epoch ``e``. Training continues with epoch ``e``.
    on_epoch_end : callable, optional
        ``on_epoch_end(state)`` after every completed epoch, with ``state`` holding
        ``epoch`` (completed epochs), ``history``, ``module`` (CPU state dict),
        ``optimizer`` (state dict) and ``generator`` (state); used for checkpoints.

    Raises
    ------
    TrainingInterrupted
        On KeyboardInterrupt with one process, once at least one epoch is complete: the
        module holds the last completed epoch's weights. With several processes, or before
        the first completed epoch, the KeyboardInterrupt propagates unchanged.
    FloatingPointError
        The epoch's training loss is not finite.
    """
    from skcce._checkpoint import cpu_state
    from skcce._distributed import Context

    ctx = ctx or Context()
    device = cfg.device
    module.to(device)
    model, restore = ctx.wrap(module, device)
    optimizer = _make_optimizer(module, cfg)
    net_loss = NETWORK_LOSSES[cfg.loss]
    k = cfg.n_clusters
    world = ctx.world_size
    prior = None if cfg.prior is None else torch.as_tensor(cfg.prior, dtype=torch.float64)
    prior_dev = None if prior is None else prior.to(device=device, dtype=torch.float32)
    n = X.shape[0]
    history = []
    first = 0
    done = None  # (weights, history) at the end of the last completed epoch
    if start is not None:
        first = int(start["epoch"])
        history = list(start["history"])
        if start.get("optimizer") is not None:
            optimizer.load_state_dict(start["optimizer"])
        if first > 0 and not ctx.active:
            done = (cpu_state(module), list(history))
    n_batches = max(1, -(-n // cfg.batch_size))
    bar = _progress((cfg.max_epochs - first) * n_batches, cfg, desc, ctx)
    try:
        for epoch in range(first, cfg.max_epochs):
            t0 = time.perf_counter()
            if on_epoch is not None:
                on_epoch("begin", epoch)
            model.train()
            order = torch.randperm(n, generator=generator).numpy()
            aug_gen = generator
            if ctx.active and cfg.augment is not None:
                # the shared generator must stay in step on every rank: augmentation draws
                # from a per-epoch, per-rank generator derived from it
                seed = int(torch.randint(2**62, (1,), generator=generator))
                aug_gen = torch.Generator().manual_seed(seed + 7919 * ctx.rank)
            tot_loss = tot_fair = 0.0
            counts = np.zeros(k, dtype=np.int64)
            solver_iter = 0
            unconverged = 0
            for begin in range(0, n, cfg.batch_size):
                rows = np.sort(order[begin : begin + cfg.batch_size])  # the global batch
                n_global = len(rows)
                idx = ctx.shard(rows)
                raw = inputs.raw(X, idx, device)
                xb = inputs.normalize(raw)
                with torch.autocast("cuda", dtype=torch.bfloat16, enabled=cfg.amp):
                    logits = model(xb).float()
                if not bool(torch.isfinite(logits).all()):  # issue 12: diverged, say so
                    raise FloatingPointError(
                        f"the network's outputs became non-finite in epoch {epoch}; lower "
                        "learning_rate or check the scale of X"
                    )
                sigma = torch.softmax(logits, dim=1)
                probs = sigma.detach().to(torch.float64)
                probs = probs / probs.sum(dim=1, keepdim=True)  # exact rows in float64
                Y, res = pseudo_labels(probs, n_global, cfg, prior, ctx)
                solver_iter += res.n_iter
                unconverged += not res.converged
                Y = Y.to(device=device, dtype=logits.dtype)
                loss = net_loss(logits, Y) if len(idx) else logits.sum() * 0
                if ctx.active:
                    mean_sigma = ctx.global_sum(sigma.sum(dim=0)) / n_global
                else:
                    mean_sigma = sigma.mean(dim=0)
                fair = _kl_term(mean_sigma, prior_dev, cfg.fairness)
                total = _local_loss(loss, len(idx), n_global, world)
                total = total + cfg.fairness_weight * fair
                if cfg.augment is not None and cfg.augment_weight > 0:
                    # augment before normalising: geometric transforms fill borders with
                    # 0 = black in [0, 1] image space, not with the mean pixel
                    xa = inputs.normalize(cfg.augment(raw, generator=aug_gen)) if len(idx) else xb
                    with torch.autocast("cuda", dtype=torch.bfloat16, enabled=cfg.amp):
                        logits_a = model(xa).float()
                    loss_a = net_loss(logits_a, Y) if len(idx) else logits_a.sum() * 0
                    total = total + cfg.augment_weight * _local_loss(
                        loss_a, len(idx), n_global, world
                    )
                optimizer.zero_grad(set_to_none=True)
                total.backward()
                optimizer.step()
                tot_loss += float(loss.detach()) * len(idx)
                tot_fair += float(fair.detach()) * len(idx)
                counts += np.bincount(logits.argmax(dim=1).cpu().numpy(), minlength=k)
                if bar is not None:
                    bar.update(1)
            if ctx.active:  # epoch statistics of the whole data
                summed = ctx.sum_array([tot_loss, tot_fair, *counts], device)
                tot_loss, tot_fair = float(summed[0]), float(summed[1])
                counts = np.rint(summed[2:]).astype(np.int64)
            history.append(
                {
                    "epoch": epoch,
                    "loss": tot_loss / n,
                    "fairness": tot_fair / n,
                    "cluster_sizes": counts.tolist(),
                    "solver_iter": solver_iter,
                    "solver_unconverged": unconverged,
                    "time": time.perf_counter() - t0,
                }
            )
            if on_epoch is not None:
                on_epoch("end", epoch)
            if not np.isfinite(history[-1]["loss"]):
                raise FloatingPointError(
                    f"the training loss became non-finite in epoch {epoch}; lower "
                    "learning_rate or check the scale of X"
                )
            if not ctx.active or on_epoch_end is not None:
                done = (cpu_state(module), list(history))  # one statement: Ctrl-C safe
            if on_epoch_end is not None:
                on_epoch_end(
                    {
                        "epoch": epoch + 1,
                        "history": done[1],
                        "module": done[0],
                        "optimizer": optimizer.state_dict(),
                        "generator": generator.get_state(),
                    }
                )
        ctx.sync_buffers(module)  # per-rank BatchNorm statistics (CPU): take rank 0's
    except KeyboardInterrupt:
        if ctx.active or done is None:
            raise
        module.load_state_dict(done[0])
        raise TrainingInterrupted(done[1]) from None
    finally:
        restore()
        # drop the DDP wrapper now: an exception's traceback keeps this frame alive, and a
        # wrapper destroyed later (after destroy_process_group) can abort the process
        model = None  # noqa: F841
        if bar is not None:
            bar.close()
    return history


@torch.inference_mode()
def predict_proba(module, X, inputs: Inputs, device, layout=None, batch_size=1024) -> np.ndarray:
    """Softmax of the module's logits over X, batch by batch; float64 rows summing to 1.

    Streams slices of X (views: nothing of X is copied beyond one batch) into one
    preallocated (N, K) result.

    Raises
    ------
    ValueError
        The network's outputs are not finite for some rows: their values are far outside
        the range of the data seen in fit (e.g. 1e38 where fit saw values near 1).
    """
    module.eval()
    n = X.shape[0]
    out = None
    for start in range(0, n, batch_size):
        rows = slice(start, start + batch_size)  # a view of X: no copy beyond the batch
        logits = module(inputs.batch(X, rows, device, layout)).to(torch.float64)
        bad = ~torch.isfinite(logits).all(dim=1)
        if bool(bad.any()):
            first = (start + torch.nonzero(bad).flatten()[:5].cpu()).tolist()
            raise ValueError(
                f"the network's outputs are not finite for rows {first} of X: their values "
                "are far outside the range of the data seen in fit; check the scale of X"
            )
        if out is None:
            out = np.empty((n, logits.shape[1]))
        out[rows] = torch.softmax(logits, dim=1).cpu().numpy()
    if out is None:
        return np.empty((0, 0))
    out /= out.sum(axis=1, keepdims=True)
    return out
