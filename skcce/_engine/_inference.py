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


def infer_labels(module, X, inputs: Inputs, device, layout=None) -> tuple[np.ndarray, float]:
    """``(labels, score)``: the cluster of each row of X (the argmax of :func:`infer_proba`)
    and the label-free mutual information of the soft assignments
    (:func:`skcce.metrics.mutual_information`), without an (N, K) array.

    The rows are predicted in spans of at most 64 MB of float64 probabilities (65 536 rows up
    to 128 clusters: then the score is that of the whole array bit for bit, the metric summing
    in blocks of as many rows); only the labels grow with N.
    """
    from scipy.special import xlogy

    n = X.shape[0]
    labels = np.empty(n, dtype=np.int64)
    k = module.out_features if isinstance(module, torch.nn.Linear) else None
    span = 65536 if k is None or k <= 128 else max(1024, (1 << 23) // k)
    col, h_rows = None, 0.0
    for start in range(0, n, span):
        proba = infer_proba(module, X[start : start + span], inputs, device, layout)
        labels[start : start + len(proba)] = proba.argmax(axis=1)
        col = proba.sum(axis=0) if col is None else col + proba.sum(axis=0)
        h_rows -= float(xlogy(proba, proba, out=proba).sum())  # in place: no second span
        del proba  # before the next span is made
    if col is None:
        return labels, 0.0
    mean = col / n
    return labels, float(-float(xlogy(mean, mean).sum()) - h_rows / n)


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
