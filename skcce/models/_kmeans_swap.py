r"""Split-and-merge moves that take k-means centroids out of Lloyd's local optima.

Lloyd's iterations stop at a local optimum of the k-means objective (the inertia, the sum
of squared distances of the rows to their nearest centroid). The typical one, at tens of
clusters and more, has two centroids inside one true cluster and one centroid between two
true clusters: no single Lloyd step can move a centroid across the data, so no step of the
head's training that starts there can either (docs/design/025-kmeans-start-swaps.md).

:func:`swap_refine` moves centroids across the data. A move *removes* the centroid whose
rows cost least to hand to their second-nearest centroid and *splits* the cluster whose
2-means split lowers its inertia most; each round pairs the best splits with the cheapest
removals while the split's gain exceeds the removal's cost, applies the pairs at once and
takes one Lloyd iteration; when that lowered the inertia, the round is kept and the next
round scores the moved centroids. A round that does not lower it is undone and the next
round tries half as many pairs; the search ends when a single pair fails or none is
predicted to gain, and Lloyd then runs to convergence once from the last kept round
(docs/design/029-swaps-converge-once.md). Every rule is a comparison of the k-means
objective with itself: there is no threshold to set.
"""

from __future__ import annotations

import numpy as np
from scipy import sparse

__all__ = ["nearest_two", "split_in_two", "swap_refine"]

#: Rows per block of the distance computations (bounds their memory to a block times K).
CHUNK_ROWS = 8192
#: Power iterations for a cluster's principal direction, and 2-means iterations after them.
POWER_ITERATIONS = 6
TWO_MEANS_ITERATIONS = 8


def nearest_two(Z: np.ndarray, centroids: np.ndarray):
    """Nearest and second-nearest centroid of every row, and their squared distances.

    Parameters
    ----------
    Z : ndarray of shape (m, d)
    centroids : ndarray of shape (K, d), K >= 2

    Returns
    -------
    first, second : ndarray of shape (m,), intp
    d_first, d_second : ndarray of shape (m,), float64
        Squared Euclidean distances (clipped at 0).

    Examples
    --------
    >>> Z = np.array([[0.0], [3.0]])
    >>> first, second, d1, d2 = nearest_two(Z, np.array([[0.0], [1.0], [4.0]]))
    >>> first.tolist(), second.tolist(), d1.tolist(), d2.tolist()
    ([0, 2], [1, 1], [0.0, 1.0], [1.0, 4.0])
    """
    C = np.asarray(centroids, dtype=Z.dtype)
    cc = np.einsum("ij,ij->i", C, C)
    m = len(Z)
    first, second = np.empty(m, np.intp), np.empty(m, np.intp)
    d_first, d_second = np.empty(m), np.empty(m)
    for start in range(0, m, CHUNK_ROWS):
        z = Z[start:start + CHUNK_ROWS]
        D = z @ C.T
        D *= -2
        D += cc
        D += np.einsum("ij,ij->i", z, z)[:, None]
        two = np.argpartition(D, 1, axis=1)[:, :2]
        dist = np.take_along_axis(D, two, axis=1).astype(np.float64)
        flip = dist[:, 0] > dist[:, 1]
        two[flip] = two[flip, ::-1]
        dist[flip] = dist[flip, ::-1]
        stop = start + len(z)
        first[start:stop], second[start:stop] = two[:, 0], two[:, 1]
        d_first[start:stop] = np.maximum(dist[:, 0], 0.0)
        d_second[start:stop] = np.maximum(dist[:, 1], 0.0)
    return first, second, d_first, d_second


def split_in_two(P: np.ndarray):
    """A 2-means split of the rows P and its inertia.

    The two centres start on either side of the rows' mean along their principal direction
    (power iterations from the row farthest from the mean, so the split is deterministic)
    and are refined by 2-means iterations. It is the cheap counterpart of the lost-cluster
    re-seeding's split (``skcce._engine._relocate._two_means``: exact principal direction,
    Lloyd to convergence, once per lost cluster), as it is scored for every cluster in every
    round (docs/design/025-kmeans-start-swaps.md).

    Parameters
    ----------
    P : ndarray of shape (p, d), p >= 2

    Returns
    -------
    centres : ndarray of shape (2, d), float64
    inertia : float
        Sum of the rows' squared distances to their nearer centre.

    Examples
    --------
    >>> P = np.array([[0.0, 0], [0, 1], [10, 0], [10, 1]])
    >>> centres, inertia = split_in_two(P)
    >>> sorted(centres[:, 0].tolist()), inertia
    ([0.0, 10.0], 1.0)
    """
    P = np.asarray(P, dtype=np.float64)
    mean = P.mean(axis=0)
    Q = P - mean
    norms = np.einsum("ij,ij->i", Q, Q)
    v = Q[int(np.argmax(norms))].copy()
    for _ in range(POWER_ITERATIONS):
        v = Q.T @ (Q @ v)
        size = np.linalg.norm(v)
        if size == 0:
            break
        v /= size
    side = (Q @ v) > 0
    if side.all() or not side.any():  # every row at one point: nothing to split
        return np.stack([mean, mean]), float(norms.sum())
    for _ in range(TWO_MEANS_ITERATIONS):
        centres = np.stack([P[side].mean(axis=0), P[~side].mean(axis=0)])
        d0 = ((P - centres[0]) ** 2).sum(axis=1)
        d1 = ((P - centres[1]) ** 2).sum(axis=1)
        new_side = d0 < d1
        if (new_side == side).all() or not new_side.any() or new_side.all():
            break
        side = new_side
    centres = np.stack([P[side].mean(axis=0), P[~side].mean(axis=0)])
    inertia = np.minimum(((P - centres[0]) ** 2).sum(axis=1), ((P - centres[1]) ** 2).sum(axis=1))
    return centres, float(inertia.sum())


def _scores(first, second, d_first, d_second, Z, n_clusters: int) -> dict:
    """Every cluster's split gain and 2-means halves and every centroid's removal cost, for
    one assignment of the rows (a state of :func:`swap_refine`)."""
    sse = np.bincount(first, d_first, n_clusters)
    order = np.argsort(first, kind="stable")
    bounds = np.searchsorted(first[order], np.arange(n_clusters + 1))
    gains, halves = np.full(n_clusters, -np.inf), {}
    for k in range(n_clusters):
        rows = order[bounds[k]:bounds[k + 1]]
        if len(rows) >= 2:
            halves[k], inertia = split_in_two(Z[rows])
            gains[k] = sse[k] - inertia
    return {
        "gains": gains,
        "halves": halves,
        "cost": np.bincount(first, d_second - d_first, n_clusters),
        "receivers": [second[order[bounds[j]:bounds[j + 1]]] for j in range(n_clusters)],
    }


def _pairs(scores: dict, limit: int) -> list:
    """At most ``limit`` (split, removed) pairs, best predicted gain first: each centroid in
    one pair at most, and the centroids that receive a removed one's rows in none."""
    gains, cost = scores["gains"], scores["cost"]
    removable = list(np.argsort(cost, kind="stable"))
    touched, pairs = set(), []
    for k in np.argsort(-gains, kind="stable"):
        if len(pairs) >= limit or not np.isfinite(gains[k]):
            break
        if k in touched:
            continue
        for j in removable:
            if j in touched or j == k:
                continue
            if gains[k] <= cost[j]:
                break
            pairs.append((int(k), int(j)))
            touched |= {int(k), int(j)} | set(np.unique(scores["receivers"][j]).tolist())
            break
    return pairs


def swap_refine(Z: np.ndarray, centroids: np.ndarray, lloyd):
    """Split-and-merge rounds on converged k-means centroids, kept while the inertia falls.

    Parameters
    ----------
    Z : ndarray of shape (m, d)
        The rows the centroids were fitted on.
    centroids : ndarray of shape (K, d)
        A local optimum of Lloyd's iterations on Z.
    lloyd : callable
        ``lloyd(start)`` runs Lloyd's iterations on Z from the (K, d) centroids ``start`` to
        convergence and returns the converged centroids.

    Returns
    -------
    centroids : ndarray of shape (K, d), float64
        Of inertia on Z no larger than the input's.
    n_rounds : int
        Rounds tried, the kept and the undone.

    Examples
    --------
    Two centroids share the left pair of points and one sits between the right two:

    >>> from sklearn.cluster import KMeans
    >>> Z = np.array([[0.0], [0.2], [10.0], [10.2], [20.0], [20.2]])
    >>> lloyd = lambda C: KMeans(3, init=C, n_init=1).fit(Z).cluster_centers_
    >>> start = lloyd(np.array([[0.0], [0.2], [15.0]]))
    >>> C, _ = swap_refine(Z, start, lloyd)
    >>> np.round(np.sort(C[:, 0]), 1).tolist()
    [0.1, 10.1, 20.1]
    """
    C = np.asarray(centroids, dtype=np.float64)
    n_clusters = len(C)
    if n_clusters < 2 or len(Z) <= n_clusters:
        return C, 0
    state = nearest_two(Z, C)
    inertia = state[2].sum()
    scores = _scores(*state, Z, n_clusters)  # a rejected round leaves them as they are
    limit, rounds, kept = n_clusters, 0, False
    while limit >= 1 and rounds < n_clusters:
        pairs = _pairs(scores, limit)
        if not pairs:
            break
        rounds += 1
        trial = C.copy()
        for k, j in pairs:
            trial[k], trial[j] = scores["halves"][k]
        trial = _lloyd_step(Z, trial)
        trial_state = nearest_two(Z, trial)
        if trial_state[2].sum() < inertia:
            C, state, kept = trial, trial_state, True
            inertia = state[2].sum()
            scores = _scores(*state, Z, n_clusters)
        else:
            limit = len(pairs) // 2
    if kept:
        converged = np.asarray(lloyd(C.astype(Z.dtype)), dtype=np.float64)
        if nearest_two(Z, converged)[2].sum() <= inertia:  # Lloyd lowers it, up to rounding
            C = converged
    return C, rounds


def _lloyd_step(Z: np.ndarray, centroids: np.ndarray) -> np.ndarray:
    """One Lloyd iteration: every centroid moved to the mean of its rows (kept if it has none)."""
    first = nearest_two(Z, centroids)[0]
    counts = np.bincount(first, minlength=len(centroids))
    members = sparse.csr_matrix(
        (np.ones(len(Z)), (first, np.arange(len(Z)))), shape=(len(centroids), len(Z))
    )
    sums = np.asarray(members @ Z, dtype=np.float64)
    moved = centroids.copy()
    some = counts > 0
    moved[some] = sums[some] / counts[some, None]
    return moved
