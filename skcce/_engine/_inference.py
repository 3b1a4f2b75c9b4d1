"""Inference: the network's soft assignments over an array, batch by batch, and its labels
and label-free score in one streaming pass (also sharded), without an (N, K) array."""

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


#: The most bytes of float64 probabilities one span of :func:`infer_labels` holds (64 MB).
SPAN_BYTES = 1 << 26


def span_rows(n_clusters, batch_size=1024) -> int:
    """Rows of one span of :func:`infer_labels`: at most :data:`SPAN_BYTES` of float64
    probabilities, a multiple of the inference batch (so that the batches are those of one
    pass over the whole array), and 65 536 rows up to 128 clusters (the blocks in which
    :func:`skcce.metrics.mutual_information` sums, so that the score is the same bit for bit).

    Examples
    --------
    >>> span_rows(10), span_rows(128), span_rows(1000), span_rows(100_000)
    (65536, 65536, 8192, 1024)
    """
    rows = SPAN_BYTES // (8 * max(int(n_clusters), 1))
    return max(batch_size, min(65536, rows) // batch_size * batch_size)


def _label_pass(module, X, inputs, device, n_clusters, layout=None, normalised=None):
    """``(labels, column sums, summed row entropy)`` of the soft assignments of X, computed
    span by span (:func:`span_rows`): no (N, K) array is made."""
    from scipy.special import xlogy

    n = X.shape[0]
    labels = np.empty(n, dtype=np.int64)
    span = span_rows(n_clusters)
    col, h_rows = np.zeros(n_clusters), 0.0
    for start in range(0, n, span):
        rows = slice(start, start + span)
        part = None if normalised is None else normalised[rows]
        proba = infer_proba(module, X[rows], inputs, device, layout, normalised=part)
        if proba.shape[1] != n_clusters:
            raise ValueError(
                f"the network has {proba.shape[1]} outputs; expected {n_clusters} clusters"
            )
        labels[start : start + len(proba)] = proba.argmax(axis=1)
        col += proba.sum(axis=0)
        h_rows -= float(xlogy(proba, proba, out=proba).sum())  # in place: no second span
        del proba  # before the next span is made
    return labels, col, h_rows


def _score(col, h_rows, n) -> float:
    """The mutual information of :func:`skcce.metrics.mutual_information` from the column
    sums and the summed row entropy of ``n`` rows."""
    from scipy.special import xlogy

    if n == 0:
        return 0.0
    mean = col / n
    return float(-float(xlogy(mean, mean).sum()) - h_rows / n)


def infer_labels(
    module, X, inputs: Inputs, device, layout=None, *, n_clusters=None, normalised=None
) -> tuple[np.ndarray, float]:
    """``(labels, score)``: the cluster of each row of X (the argmax of :func:`infer_proba`)
    and the label-free mutual information of the soft assignments
    (:func:`skcce.metrics.mutual_information`), without an (N, K) array.

    The rows are predicted in spans of :func:`span_rows` (at most 64 MB of float64
    probabilities; 65 536 rows up to 128 clusters, when the score is that of the whole array
    bit for bit, the metric summing in blocks of as many rows; beyond, it differs by
    rounding); only the labels grow with N.

    Parameters
    ----------
    module : torch.nn.Module
        The network; ``n_clusters`` (None: its ``out_features``, the linear head) is the
        number of its outputs.
    X : array-like
        The rows (sliced span by span: a memory-mapped X is read a span at a time).
    inputs : Inputs
        The fitted normalisation.
    device : torch.device
    layout : str, optional
        As for :func:`infer_proba`.
    normalised : torch.Tensor, optional
        The rows of X already normalised on ``device`` (:func:`infer_proba`).

    Returns
    -------
    labels : ndarray of shape (n_samples,), int64
    score : float
        0.0 for no rows.
    """
    if n_clusters is None:
        n_clusters = _outputs(module)
    labels, col, h_rows = _label_pass(module, X, inputs, device, n_clusters, layout, normalised)
    return labels, _score(col, h_rows, X.shape[0])


def _outputs(module) -> int:
    """The number of outputs of a linear head (else a ``TypeError``: pass ``n_clusters``)."""
    if isinstance(module, torch.nn.Linear):
        return module.out_features
    raise TypeError("n_clusters is needed for a network other than the linear head")


def infer_labels_sharded(
    module, X, inputs: Inputs, device, ctx, n_clusters
) -> tuple[np.ndarray, float]:
    """:func:`infer_labels` on the training data, the same labels and score on every rank.

    Under data parallelism each rank predicts its contiguous shard of X; the shards' labels
    are gathered and their column sums and row entropies summed over the ranks (the score
    then differs from one process's by rounding); with one process this is
    :func:`infer_labels`. No rank holds an (N, K) array.
    """
    if not ctx.active:
        return infer_labels(module, X, inputs, device, n_clusters=n_clusters)
    b = ctx.bounds(X.shape[0])
    lo, hi = int(b[ctx.rank]), int(b[ctx.rank + 1])
    local, col, h_rows = np.zeros(0, dtype=np.int64), np.zeros(n_clusters), 0.0
    if hi > lo:
        local, col, h_rows = _label_pass(module, X[lo:hi], inputs, device, n_clusters)
    labels = ctx.gather_rows(torch.as_tensor(local, device=device), X.shape[0]).cpu().numpy()
    summed = ctx.sum_array([*col, h_rows], device)
    return labels, _score(summed[:-1], float(summed[-1]), X.shape[0])
