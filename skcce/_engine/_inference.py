"""Inference: the network's soft assignments over an array, batch by batch (and sharded)."""

from __future__ import annotations

import numpy as np
import torch

from skcce._engine._preprocess import Inputs


@torch.inference_mode()
def infer_proba(
    module, X, inputs: Inputs, device, layout=None, batch_size=1024, normalised=None
) -> np.ndarray:
    """Softmax of the module's logits over X, batch by batch; float64 rows summing to 1.

    Streams slices of X (views: nothing of X is copied beyond one batch) into one
    preallocated (N, K) result. ``normalised``: the rows of X as :meth:`Inputs.batch` makes
    them, already on ``device`` (a fit's normalised copy of flat features), sliced instead of
    normalising X again (the same numbers: the normalisation is row-wise).

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
        xb = inputs.batch(X, rows, device, layout) if normalised is None else normalised[rows]
        logits = module(xb).to(torch.float64)
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


def infer_proba_sharded(module, X, inputs: Inputs, device, ctx, n_clusters) -> np.ndarray:
    """:func:`infer_proba` on the training data, the same array on every rank.

    Under data parallelism each rank predicts its contiguous shard of X and the shards are
    gathered; with one process this is :func:`infer_proba`.
    """
    if not ctx.active:
        return infer_proba(module, X, inputs, device)
    b = ctx.bounds(X.shape[0])
    lo, hi = int(b[ctx.rank]), int(b[ctx.rank + 1])
    local = np.zeros((0, n_clusters))
    if hi > lo:
        local = infer_proba(module, X[lo:hi], inputs, device)
    full = ctx.gather_rows(torch.as_tensor(local, device=device), X.shape[0])
    return full.cpu().numpy()
