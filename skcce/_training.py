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

Batches are copied from the user's array and moved to the device one at a time.
"""

from __future__ import annotations

import time
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
        Per-feature (flat) or per-channel (images) centring and scaling, fitted in ``fit``
        on values in [0, 1] for uint8 images (they are divided by 255 first).
    """

    layout: str
    mean: np.ndarray
    std: np.ndarray
    _cache: dict = field(default_factory=dict, repr=False)

    def __getstate__(self):
        state = self.__dict__.copy()
        state["_cache"] = {}  # device tensors are rebuilt on demand (CUDA-free unpickling)
        return state

    def raw(self, X, idx, device, layout=None) -> torch.Tensor:
        """Rows ``idx`` of ``X`` (in ``layout``, default the fitted one) as float32
        (B, *input_shape) on ``device``, uint8 images scaled to [0, 1], not normalised."""
        layout = layout or self.layout
        xb = torch.from_numpy(np.ascontiguousarray(X[idx])).to(device=device)
        scale = 255.0 if X.dtype == np.uint8 else 1.0
        xb = xb.to(torch.float32)
        if layout == "nhw":
            xb = xb.unsqueeze(1)
        elif layout == "nhwc":
            xb = xb.permute(0, 3, 1, 2)
        return xb / scale if scale != 1 else xb

    def normalize(self, xb: torch.Tensor) -> torch.Tensor:
        """Apply the fitted centring and scaling to a batch from :meth:`raw`."""
        key = str(xb.device)
        if key not in self._cache:
            shape = (1, -1) if self.layout == "flat" else (1, -1, 1, 1)
            mean = torch.as_tensor(self.mean, dtype=torch.float32, device=xb.device)
            std = torch.as_tensor(self.std, dtype=torch.float32, device=xb.device)
            self._cache[key] = (mean.view(shape), std.view(shape))
        mean, std = self._cache[key]
        return ((xb - mean) / std).contiguous()

    def batch(self, X, idx, device, layout=None) -> torch.Tensor:
        """Rows ``idx`` of ``X`` as a normalised float32 (B, *input_shape) tensor on device."""
        return self.normalize(self.raw(X, idx, device, layout))


def fit_inputs(X: np.ndarray, layout: str, chunk: int = 8192) -> Inputs:
    """Fit the normalisation by streaming over X in chunks (no full float copy).

    Flat features: per-feature mean and one global scale (the root mean variance), which keeps
    the relative geometry of the features. Images: per-channel mean and standard deviation.
    """
    scale = 255.0 if X.dtype == np.uint8 else 1.0
    axis_c = {"flat": 1, "nhw": None, "nhwc": 3, "nchw": 1}[layout]
    n = X.shape[0]
    s1 = s2 = 0.0
    count = 0
    for start in range(0, n, chunk):
        block = np.asarray(X[start : start + chunk], dtype=np.float64) / scale
        if layout == "flat":
            s1 = s1 + block.sum(axis=0)
            s2 = s2 + (block * block).sum(axis=0)
            count += block.shape[0]
        else:
            if layout == "nhw":
                block = block[:, None]
                axis = 1
            else:
                axis = axis_c
            moved = np.moveaxis(block, axis, -1).reshape(-1, block.shape[axis])
            s1 = s1 + moved.sum(axis=0)
            s2 = s2 + (moved * moved).sum(axis=0)
            count += moved.shape[0]
    mean = s1 / count
    var = np.maximum(s2 / count - mean * mean, 0.0)
    if layout == "flat":
        std = np.full_like(mean, np.sqrt(var.mean()))
    else:
        std = np.sqrt(var)
    tiny = np.finfo(np.float32).tiny
    std = np.where(std > np.sqrt(tiny), std, 1.0)
    return Inputs(layout, mean.astype(np.float32), std.astype(np.float32))


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


def _progress(total, cfg, desc):
    if not cfg.verbose:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, leave=False)


def train(
    module,
    X,
    inputs: Inputs,
    cfg: TrainConfig,
    generator: torch.Generator,
    desc="fit",
    on_epoch=None,
):
    """Run Algorithm 1 for ``cfg.max_epochs`` epochs; returns the per-epoch history.

    ``on_epoch(event, epoch)``, if given, is called with ``"begin"`` and ``"end"`` around
    every epoch (the estimator forwards it to scikit-learn's callback API).
    """
    device = cfg.device
    module.to(device)
    optimizer = _make_optimizer(module, cfg)
    net_loss = NETWORK_LOSSES[cfg.loss]
    k = cfg.n_clusters
    prior = None if cfg.prior is None else torch.as_tensor(cfg.prior, dtype=torch.float64)
    prior_dev = None if prior is None else prior.to(device=device, dtype=torch.float32)
    n = X.shape[0]
    history = []
    n_batches = max(1, -(-n // cfg.batch_size))
    bar = _progress(cfg.max_epochs * n_batches, cfg, desc)
    try:
        for epoch in range(cfg.max_epochs):
            t0 = time.perf_counter()
            if on_epoch is not None:
                on_epoch("begin", epoch)
            module.train()
            order = torch.randperm(n, generator=generator).numpy()
            tot_loss = tot_fair = 0.0
            counts = np.zeros(k, dtype=np.int64)
            solver_iter = 0
            unconverged = 0
            for start in range(0, n, cfg.batch_size):
                idx = np.sort(order[start : start + cfg.batch_size])
                raw = inputs.raw(X, idx, device)
                xb = inputs.normalize(raw)
                with torch.autocast("cuda", dtype=torch.bfloat16, enabled=cfg.amp):
                    logits = module(xb).float()
                sigma = torch.softmax(logits, dim=1)
                probs = sigma.detach().to(torch.float64)
                probs = probs / probs.sum(dim=1, keepdim=True)  # exact rows in float64
                res = solve_pseudo_labels(
                    probs,
                    lam=cfg.lam,
                    fairness=cfg.fairness,
                    prior=prior,
                    loss=cfg.loss,
                    tol=cfg.em_tol,
                    max_iter=cfg.em_max_iter,
                    method=cfg.solver,
                )
                solver_iter += res.n_iter
                unconverged += not res.converged
                Y = res.labels.to(device=device, dtype=logits.dtype)
                loss = net_loss(logits, Y)
                fair = _kl_term(sigma.mean(dim=0), prior_dev, cfg.fairness)
                total = loss + cfg.fairness_weight * fair
                if cfg.augment is not None and cfg.augment_weight > 0:
                    # augment before normalising: geometric transforms fill borders with
                    # 0 = black in [0, 1] image space, not with the mean pixel
                    xa = inputs.normalize(cfg.augment(raw, generator=generator))
                    with torch.autocast("cuda", dtype=torch.bfloat16, enabled=cfg.amp):
                        logits_a = module(xa).float()
                    total = total + cfg.augment_weight * net_loss(logits_a, Y)
                optimizer.zero_grad(set_to_none=True)
                total.backward()
                optimizer.step()
                tot_loss += float(loss.detach()) * len(idx)
                tot_fair += float(fair.detach()) * len(idx)
                counts += np.bincount(logits.argmax(dim=1).cpu().numpy(), minlength=k)
                if bar is not None:
                    bar.update(1)
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
    finally:
        if bar is not None:
            bar.close()
    return history


@torch.inference_mode()
def predict_proba(module, X, inputs: Inputs, device, layout=None, batch_size=1024) -> np.ndarray:
    """Softmax of the module's logits over X, batch by batch; float64 rows summing to 1."""
    module.eval()
    chunks = []
    for start in range(0, X.shape[0], batch_size):
        rows = slice(start, start + batch_size)  # a view of X: no copy beyond the batch
        logits = module(inputs.batch(X, rows, device, layout)).to(torch.float64)
        chunks.append(torch.softmax(logits, dim=1).cpu().numpy())
    out = np.concatenate(chunks)
    return out / out.sum(axis=1, keepdims=True)
