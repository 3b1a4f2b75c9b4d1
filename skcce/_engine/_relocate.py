"""Lost clusters of the linear head, re-seeded before each epoch (a principal-direction
bisection).

A cluster can satisfy both fairness terms with a thin, even spread of its mass over many
rows without being any row's most likely cluster; once lost that way, nothing brings it
back, and the term's exact solve keeps spreading mass into it in every batch
(docs/design/021-lost-clusters-re-seeded.md). Like scikit-learn's KMeans, which moves an
empty centroid onto the data, the linear head then gives the cluster a place in the data:
before each epoch, every cluster that the last epoch predicted for fewer rows than the prior
asks of it in one batch (:func:`starved`; before the first epoch, the start's clusters)
takes half of the cluster whose rows spread most along one direction (the largest
eigenvalue of its scatter matrix), split by 2-means, on a random subsample of the training
rows.

The head is read as soft KMeans (:mod:`skcce.models._kmeans_init`): output ``k`` is
``w_k . x + b_k``, and ``w_k = s c_k``, ``b_k = -s |c_k|^2 / 2`` for centroids ``c_k`` and a
stiffness ``s``. The centroids are the means of the subsample's rows by predicted cluster
and ``s`` is the least-squares fit of the head's (centred) rows to them. Splitting the donor
``j`` into the 2-means centres ``c'`` and ``c''`` of its rows moves its row by ``s (c' - c_j)``
and gives the lost cluster the donor's row moved by ``s (c'' - c_j)`` (the biases alike):
the two are then separated by the bisector of ``c'`` and ``c''`` and every other boundary of
the donor moves as its centroid does, whatever else the trained head encodes.
"""

from __future__ import annotations

import numpy as np
import torch

from skcce.models._kmeans_init import _squared_distances, subsample_size


def _stiffness(weight, centres, used) -> float:
    """Least-squares ``s`` of ``weight[used] - mean ~ s (centres[used] - mean)``."""
    w = weight[used] - weight[used].mean(axis=0)
    c = centres[used] - centres[used].mean(axis=0)
    den = float((c * c).sum())
    return float((w * c).sum()) / den if den > 0 else 0.0


#: Rows of the subsample whose logits are taken at once (a block of (rows, K) floats).
BLOCK_ROWS = 4096


def _predict(Z, weight, bias) -> np.ndarray:
    """The head's predicted cluster of each row of Z, block by block (no (m, K) array)."""
    pred = np.empty(len(Z), dtype=np.intp)
    with torch.no_grad():
        for lo in range(0, len(Z), BLOCK_ROWS):
            z = torch.from_numpy(np.ascontiguousarray(Z[lo : lo + BLOCK_ROWS])).to(weight)
            pred[lo : lo + len(z)] = (z @ weight.T + bias).argmax(dim=1).cpu().numpy()
    return pred


def _principal(Z):
    """The largest eigenvalue of the scatter matrix of the rows Z and its unit eigenvector:
    the rows' sum of squares along the direction in which they spread most, and that
    direction (from the smaller of the scatter and Gram matrices)."""
    A = np.asarray(Z, dtype=np.float64)
    A = A - A.mean(axis=0)
    if A.shape[0] >= A.shape[1]:
        values, vectors = np.linalg.eigh(A.T @ A)
        return float(values[-1]), vectors[:, -1]
    values, vectors = np.linalg.eigh(A @ A.T)  # the Gram matrix: map back to the features
    direction = A.T @ vectors[:, -1]
    norm = np.linalg.norm(direction)
    return float(values[-1]), direction / norm if norm > 0 else direction


def _spread(Z) -> float:
    """:func:`_principal`'s eigenvalue (0 for fewer than two rows)."""
    return _principal(Z)[0] if len(Z) >= 2 else 0.0


def _two_means(Z, max_iter=300):
    """Two centres of the rows Z (float64) and the rows' halves (bool mask, True: the first
    centre's): the rows split at their mean across the direction in which they spread most
    (principal-direction divisive partitioning), then Lloyd's iterations until the halves
    stop changing (at most ``max_iter``)."""
    half = (Z - Z.mean(axis=0)) @ _principal(Z)[1] >= 0
    for _ in range(max_iter):
        if half.all() or not half.any():
            break
        pair = np.stack([Z[half].mean(axis=0), Z[~half].mean(axis=0)])
        d2 = _squared_distances(Z, pair)
        new = d2[:, 0] <= d2[:, 1]
        if (new == half).all():
            return pair, half
        half = new
    if half.all() or not half.any():  # no spread to split (rows all equal): halve the rows
        half = np.arange(len(Z)) < len(Z) // 2
    return np.stack([Z[half].mean(axis=0), Z[~half].mean(axis=0)]), half


@torch.no_grad()
def relocate_empty_(weight, bias, Z, empty, pred=None) -> list:
    """Re-seed the head rows ``empty`` in place, each by splitting the cluster that spreads
    most along one direction (:func:`_spread`), one after the other.

    Parameters
    ----------
    weight : torch.Tensor of shape (K, d)
    bias : torch.Tensor of shape (K,)
        The head, changed in place.
    Z : ndarray of shape (m, d)
        A random subsample of the training rows, normalised as the head's inputs (float32
        or float64; no (m, K) array is made).
    empty : sequence of int
        The clusters to re-seed.
    pred : ndarray of shape (m,), optional
        The head's predicted cluster of each row of Z, when the caller has it.

    Returns
    -------
    donors : list of int
        The cluster each empty one took its half from (in the order of ``empty``); a cluster
        is left as it is (and not listed) when no cluster has two distinct rows to split.
    """
    W = weight.detach().cpu().double().numpy()
    b = bias.detach().cpu().double().numpy()
    k = W.shape[0]
    pred = _predict(Z, weight, bias) if pred is None else pred
    order = np.argsort(pred, kind="stable")
    bounds = np.searchsorted(pred[order], np.arange(k + 1))
    members = {j: order[bounds[j] : bounds[j + 1]] for j in range(k) if bounds[j + 1] > bounds[j]}
    centres = np.zeros_like(W)
    for j, rows in members.items():
        centres[j] = Z[rows].mean(axis=0, dtype=np.float64)
    used = np.zeros(k, dtype=bool)
    used[list(members)] = True
    s = _stiffness(W, centres, used)
    # the candidates to split: every cluster with rows, but those being re-seeded
    spread = {j: _spread(Z[r]) for j, r in members.items() if j not in set(empty)}
    donors = []
    for e in empty:
        j = max(spread, key=spread.get, default=None)
        if j is None or spread[j] <= 0 or s <= 0:
            break
        rows = members[j]
        pair, half = _two_means(np.asarray(Z[rows], dtype=np.float64))
        w_j, b_j, c_j = W[j].copy(), b[j], centres[j].copy()
        for cluster, centre, part in ((j, pair[0], rows[half]), (e, pair[1], rows[~half])):
            W[cluster] = w_j + s * (centre - c_j)
            b[cluster] = b_j - 0.5 * s * (centre @ centre - c_j @ c_j)
            centres[cluster], members[cluster] = centre, part
            spread[cluster] = _spread(Z[part])
        donors.append(int(j))
    weight.copy_(torch.from_numpy(W).to(weight))
    bias.copy_(torch.from_numpy(b).to(bias))
    return donors


def sample_rows(X, inputs, device, n_clusters, seed) -> np.ndarray:
    """A random subsample of :func:`subsample_size` rows of X, normalised and flattened as
    the linear head's inputs (float32, on the host)."""
    n = X.shape[0]
    m = subsample_size(n, n_clusters)
    rng = np.random.default_rng(seed)
    idx = np.sort(rng.choice(n, size=m, replace=False)) if m < n else np.arange(n)
    z = inputs.normalize(inputs.raw(X, idx, device))
    return z.reshape(m, -1).cpu().numpy()


def starved(sizes, prior, batch_size) -> np.ndarray:
    """The clusters an epoch (or pass) lost: predicted for fewer of its rows than the prior
    asks of them in one batch of ``batch_size`` rows, or in half the epoch when its batches
    are fewer than two (``prior``: (K,) proportions in force; ``sizes``: rows predicted per
    cluster in the epoch).

    Examples
    --------
    >>> starved([400, 300, 3, 297], np.full(4, 0.25), 20).tolist()
    [2]
    """
    sizes = np.asarray(sizes)
    rows = min(batch_size, sizes.sum() / 2)
    return np.flatnonzero(sizes < np.asarray(prior) * rows)


def relocate_epoch_(layer_weight, layer_bias, sizes, prior, batch_size, X, inputs, device,
                    seed, epoch):  # fmt: skip
    """Before ``epoch``: re-seed the clusters that the last epoch lost (:func:`starved`) by
    :func:`relocate_empty_`, on a subsample of X drawn from ``(seed, epoch)``.

    ``sizes``: the rows the last epoch predicted per cluster; None before the first epoch,
    when they are the head's own partition of the subsample, scaled to X's rows (the
    start's clusters: a KMeans start can hold clusters of one outlying row). Returns the
    donors (an empty list when no cluster was lost)."""
    if sizes is not None:
        if len(sizes) == 0 or len(starved(sizes, prior, batch_size)) == 0:
            return []
    k = layer_weight.shape[0]
    draw = int(np.random.SeedSequence([int(seed) % 2**63, int(epoch)]).generate_state(1)[0])
    Z = sample_rows(X, inputs, device, k, draw)
    pred = None
    if sizes is None:
        pred = _predict(Z, layer_weight, layer_bias)
        sizes = np.bincount(pred, minlength=k) * (X.shape[0] / len(Z))
    lost = starved(sizes, prior, batch_size)
    if len(lost) == 0:
        return []
    return relocate_empty_(layer_weight, layer_bias, Z, lost.tolist(), pred)
