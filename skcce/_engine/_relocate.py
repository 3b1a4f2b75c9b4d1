"""Empty clusters of the linear head, re-seeded between epochs (bisecting k-means's rule).

A cluster that no training row predicted during an epoch is empty: its output is never the
largest, and the fairness terms alone rarely bring it back (they are satisfied by a thin,
even spread of its mass over many rows, docs/design/021-empty-cluster-relocation.md). Like
scikit-learn's KMeans, which moves an empty centroid onto the data, the linear head then
gives the cluster a place in the data: at the end of the epoch each empty cluster takes half
of the cluster with the largest inertia (bisecting k-means's ``"biggest_inertia"`` rule), on
a random subsample of the training rows.

The head is read as soft KMeans (:mod:`skcce.models._kmeans_init`): output ``k`` is
``w_k . x + b_k``, and ``w_k = s c_k``, ``b_k = -s |c_k|^2 / 2`` for centroids ``c_k`` and a
stiffness ``s``. The centroids are the means of the subsample's rows by predicted cluster
and ``s`` is the least-squares fit of the head's (centred) rows to them. Splitting the donor
``j`` into the 2-means centres ``c'`` and ``c''`` of its rows moves its row by ``s (c' - c_j)``
and gives the empty cluster the donor's row moved by ``s (c'' - c_j)`` (the biases alike):
the two are then separated by the bisector of ``c'`` and ``c''`` and every other boundary of
the donor moves as its centroid does, whatever else the trained head encodes.
"""

from __future__ import annotations

import numpy as np
import torch

from skcce.models._kmeans_init import subsample_size


def _stiffness(weight, centres, used) -> float:
    """Least-squares ``s`` of ``weight[used] - mean ~ s (centres[used] - mean)``."""
    w = weight[used] - weight[used].mean(axis=0)
    c = centres[used] - centres[used].mean(axis=0)
    den = float((c * c).sum())
    return float((w * c).sum()) / den if den > 0 else 0.0


def _spread(Z) -> float:
    """The largest eigenvalue of the scatter matrix of the rows Z (float64): their sum of
    squares along the direction in which they spread most."""
    if len(Z) < 2:
        return 0.0
    A = Z - Z.mean(axis=0)
    gram = A.T @ A if A.shape[0] >= A.shape[1] else A @ A.T
    return float(np.linalg.eigvalsh(gram)[-1])


def _two_means(Z, seed):
    """The two 2-means centres of the rows Z (float64) and the rows' halves (bool mask)."""
    from sklearn.cluster import KMeans

    km = KMeans(2, n_init=1, random_state=seed).fit(Z)
    return km.cluster_centers_, km.labels_ == 0


@torch.no_grad()
def relocate_empty_(weight, bias, Z, empty, seed) -> list:
    """Re-seed the head rows ``empty`` in place by splitting the clusters of largest inertia.

    Parameters
    ----------
    weight : torch.Tensor of shape (K, d)
    bias : torch.Tensor of shape (K,)
        The head, changed in place.
    Z : ndarray of shape (m, d)
        A random subsample of the training rows, normalised as the head's inputs.
    empty : sequence of int
        The clusters to re-seed.
    seed : int
        Seeds the 2-means splits.

    Returns
    -------
    donors : list of int
        The cluster each empty one took its half from (in the order of ``empty``); a cluster
        is left as it is (and not listed) when no cluster has two distinct rows to split.
    """
    Z = np.asarray(Z, dtype=np.float64)
    W = weight.detach().cpu().double().numpy()
    b = bias.detach().cpu().double().numpy()
    k = W.shape[0]
    pred = (Z @ W.T + b).argmax(axis=1)
    counts = np.bincount(pred, minlength=k)
    centres = np.zeros_like(W)
    np.add.at(centres, pred, Z)
    used = counts > 0
    centres[used] /= counts[used, None]
    s = _stiffness(W, centres, used)
    members = {j: np.flatnonzero(pred == j) for j in np.flatnonzero(used)}
    spread = {j: _spread(Z[r]) for j, r in members.items()}
    donors = []
    for e in empty:
        j = max(spread, key=spread.get, default=None)
        if j is None or spread[j] <= 0 or s <= 0:
            break
        rows = members[j]
        pair, half = _two_means(Z[rows], seed + len(donors))
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
    if sizes is None:
        with torch.no_grad():
            z = torch.from_numpy(Z).to(layer_weight)
            pred = (z @ layer_weight.T + layer_bias).argmax(dim=1).cpu().numpy()
        sizes = np.bincount(pred, minlength=k) * (X.shape[0] / len(Z))
    lost = starved(sizes, prior, batch_size)
    if len(lost) == 0:
        return []
    return relocate_empty_(layer_weight, layer_bias, Z, lost.tolist(), draw)
