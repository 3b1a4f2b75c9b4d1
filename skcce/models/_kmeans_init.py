r"""KMeans initialisation of the linear clustering head (``CCEClustering(init="kmeans")``).

A linear head :math:`z_k = w_k^\top x + b_k` with

.. math::  w_k = s\, c_k, \qquad b_k = -\tfrac{s}{2}\|c_k\|^2

gives :math:`z_k = -\tfrac{s}{2}\|x - c_k\|^2 + \tfrac{s}{2}\|x\|^2`, so its softmax is the
soft KMeans assignment :math:`\sigma_k(x) \propto \exp(-\tfrac{s}{2}\|x - c_k\|^2)` to the
centroids :math:`c_k` (the term in :math:`\|x\|^2` is the same for every k). The centroids
come from k-means++ seeding and Lloyd's iterations run to scikit-learn's convergence
(``kmeans_plusplus`` and ``KMeans`` with its default ``tol`` and ``max_iter``) on a random
subsample of :func:`subsample_size` rows, in the estimator's normalised input space; the
stiffness :math:`s` is set so that the mean largest soft assignment on that subsample is
:data:`TARGET_CONFIDENCE` (a confident but not saturated start: a saturated softmax has
almost no gradient).

Everything here is plain NumPy / scikit-learn on arrays the caller has already normalised;
randomness comes from one integer seed per restart.
"""

from __future__ import annotations

import numpy as np
import torch

from skcce.models._kmeans_swap import swap_refine

__all__ = [
    "MAX_SAMPLES",
    "ROWS_PER_CENTROID",
    "SCALE_SAMPLES",
    "SCALE_TOL",
    "TARGET_CONFIDENCE",
    "check_centroids",
    "head_from_centroids_",
    "initial_centroids",
    "kmeans_centroids",
    "lloyd_work",
    "n_distinct_rows",
    "soft_assignment_scale",
    "subsample_size",
]

#: Rows of the random subsample the centroids are computed on, at the least (all rows when
#: fewer): see :func:`subsample_size`.
MAX_SAMPLES = 5_000
#: Rows per cluster of that subsample, at the least (faiss's default subsample for k-means,
#: ``max_points_per_centroid``): the centroids of overlapping clusters need that many rows.
ROWS_PER_CENTROID = 256
#: Rows of the subsample the stiffness is calibrated on.
SCALE_SAMPLES = 2_000
#: Mean largest soft assignment of the initial head on the subsample.
TARGET_CONFIDENCE = 0.9


def check_centroids(centroids, n_clusters: int, n_features: int) -> np.ndarray:
    """Validate user centroids: a finite float64 array of shape (n_clusters, n_features).

    Parameters
    ----------
    centroids : array-like
        The ``init`` array passed to ``CCEClustering``.
    n_clusters, n_features : int
        Expected shape.

    Returns
    -------
    centroids : ndarray of shape (n_clusters, n_features), float64
        A copy.

    Raises
    ------
    ValueError
        Wrong shape, not numeric, or NaN / infinite entries.

    Examples
    --------
    >>> check_centroids([[0, 1], [2, 3]], 2, 2).dtype
    dtype('float64')
    """
    if isinstance(centroids, torch.Tensor):
        centroids = centroids.detach().cpu().numpy()
    try:
        arr = np.array(centroids, dtype=np.float64)  # a C-contiguous copy, whatever the input
    except (TypeError, ValueError) as exc:
        raise ValueError(
            f"init must be 'auto', 'random', 'kmeans' or an array of centroids of shape "
            f"(n_clusters, n_features) = ({n_clusters}, {n_features}); got {centroids!r:.80}"
        ) from exc
    if arr.shape != (n_clusters, n_features):
        raise ValueError(
            f"init centroids must have shape (n_clusters, n_features) = "
            f"({n_clusters}, {n_features}); got shape {arr.shape}"
        )
    bad = ~np.isfinite(arr)
    if bad.any():
        rows = np.flatnonzero(bad.any(axis=1)).tolist()
        raise ValueError(
            f"init centroids must be finite; rows {rows[:10]} hold NaN or infinite values"
        )
    return arr


def n_distinct_rows(Z: np.ndarray, stop: int | None = None) -> int:
    """Number of distinct rows of a 2-D array (exact equality), counting up to ``stop``.

    Greedy: each row is compared with the distinct rows found so far, and the count stops
    at ``stop``; on ordinary data this looks at ``stop`` rows only, and at most
    ``len(Z) * stop`` row comparisons.

    Examples
    --------
    >>> n_distinct_rows(np.array([[0.0, 1.0], [0.0, 1.0], [2.0, 0.0]]))
    2
    >>> n_distinct_rows(np.arange(10.0).reshape(5, 2), stop=3)
    3
    """
    Z = np.asarray(Z)
    stop = len(Z) if stop is None else stop
    found = np.empty((min(stop, len(Z)), Z.shape[1]), dtype=Z.dtype)
    count = 0
    for row in Z:
        if count and (found[:count] == row).all(axis=1).any():
            continue
        found[count] = row
        count += 1
        if count >= stop:
            break
    return count


def subsample_size(n_samples: int, n_clusters: int) -> int:
    """Rows of the subsample a KMeans start is computed on: all ``n_samples`` up to
    ``max(MAX_SAMPLES, ROWS_PER_CENTROID * n_clusters)``.

    Examples
    --------
    >>> subsample_size(100_000, 10), subsample_size(100_000, 100), subsample_size(900, 10)
    (5000, 25600, 900)
    """
    return int(min(n_samples, max(MAX_SAMPLES, ROWS_PER_CENTROID * n_clusters)))


def lloyd_work(n_samples: int, n_clusters: int, n_features: int) -> int:
    """Multiply-adds of one Lloyd iteration of the start: the subsample's rows times the
    clusters times the features (what decides whether the start is worth more threads).

    Examples
    --------
    >>> lloyd_work(100_000, 100, 64)  # 25 600 rows of the subsample
    163840000
    """
    return subsample_size(n_samples, n_clusters) * n_clusters * n_features


def kmeans_centroids(Z: np.ndarray, n_clusters: int, seed: int):
    """k-means++ seeds refined by Lloyd's iterations until they converge (scikit-learn's
    ``KMeans`` defaults: ``tol=1e-4`` relative to the data's variance, at most 300), so that
    the start is converged at any K (docs/design/018-kmeans-start-at-large-k.md), then
    taken out of Lloyd's local optima by split-and-merge rounds kept while the inertia falls
    (:func:`skcce.models._kmeans_swap.swap_refine`, docs/design/025-kmeans-start-swaps.md).

    The seeds are drawn from at most ``max(2000, 20 * n_clusters)`` evenly spaced rows of
    Z (a random subsample already); Lloyd's iterations use all rows.

    Parameters
    ----------
    Z : ndarray of shape (m, d)
        The (subsampled, normalised) rows; at least ``n_clusters`` distinct.
    n_clusters : int
    seed : int
        Seed of the k-means++ draw.

    Returns
    -------
    centroids : ndarray of shape (n_clusters, d), float64

    Examples
    --------
    >>> Z = np.r_[np.zeros((5, 2)), np.ones((5, 2)) * 10]
    >>> np.sort(kmeans_centroids(Z, 2, seed=0)[:, 0]).tolist()
    [0.0, 10.0]
    """
    from sklearn.cluster import KMeans, kmeans_plusplus

    Z = np.asarray(Z)
    if Z.dtype not in (np.float32, np.float64):
        Z = Z.astype(np.float64)
    # seeding on evenly spaced rows in float64 (scikit-learn's float32 distances are slow),
    # Lloyd on all rows in their own dtype
    m = min(len(Z), max(2_000, 20 * n_clusters))
    few = Z[np.linspace(0, len(Z) - 1, m).astype(np.intp)].astype(np.float64)
    seeds, _ = kmeans_plusplus(few, n_clusters, random_state=seed)

    def lloyd(start):
        return KMeans(n_clusters, init=start.astype(Z.dtype), n_init=1).fit(Z).cluster_centers_

    return swap_refine(Z, lloyd(seeds), lloyd)[0]


def _squared_distances(Z, centroids) -> np.ndarray:
    """(m, K) squared Euclidean distances of the rows Z to the centroids, in float64 (one
    product; rounding may leave entries slightly below 0)."""
    Z = np.asarray(Z, dtype=np.float64)
    C = np.asarray(centroids, dtype=np.float64)
    return (Z * Z).sum(axis=1, keepdims=True) - 2.0 * Z @ C.T + (C * C).sum(axis=1)


def _confidence_and_slope(d2: np.ndarray, scale: float) -> tuple[float, float]:
    r"""Mean largest soft assignment at stiffness ``scale`` and its derivative in ``log s``.

    ``d2`` is shifted so that every row's smallest entry is 0: the largest softmax entry of
    row i is then :math:`1 / Z_i`, :math:`Z_i = \sum_k e^{-s d_{ik}/2}`, whose derivative in
    :math:`\log s` is :math:`\frac{s}{2} \sum_k d_{ik} e^{-s d_{ik}/2} / Z_i^2`.
    """
    e = np.exp(-0.5 * scale * d2)
    z = e.sum(axis=1)
    slope = 0.5 * scale * np.einsum("ij,ij->i", d2, e) / (z * z)
    return float((1.0 / z).mean()), float(slope.mean())


#: Tolerance of :func:`soft_assignment_scale` on the mean largest assignment.
SCALE_TOL = 1e-9


def soft_assignment_scale(Z: np.ndarray, centroids: np.ndarray, target=None):
    r"""Stiffness :math:`s` with mean :math:`\max_k \sigma_k = ` ``target`` on the rows Z.

    :math:`\sigma_k(x) \propto \exp(-\frac{s}{2}\|x - c_k\|^2)`; the mean largest assignment
    grows monotonically from :math:`1/K` (s = 0) towards 1, so :math:`s` is found by Newton's
    method on :math:`\log s`, kept inside a bisection bracket (a step that leaves the
    bracket bisects it), on :data:`SCALE_SAMPLES` evenly spaced rows of Z, to within
    :data:`SCALE_TOL` of the target (six to ten evaluations where bisection alone took 31).
    When the target cannot be reached (rows equidistant from the centroids), the largest
    scale tried is returned.

    Parameters
    ----------
    Z : ndarray of shape (m, d)
    centroids : ndarray of shape (K, d)
    target : float, default=None
        In (1/K, 1); None means :data:`TARGET_CONFIDENCE`.

    Returns
    -------
    scale : float

    Examples
    --------
    >>> Z = np.r_[np.zeros((5, 2)), np.ones((5, 2))]
    >>> s = soft_assignment_scale(Z, np.array([[0.0, 0.0], [1.0, 1.0]]), target=0.9)
    >>> round(float(1 / (1 + np.exp(-s))), 3)  # logit gap of s/2 * 2: sigma = 0.9
    0.9
    """
    target = TARGET_CONFIDENCE if target is None else target
    if len(Z) > SCALE_SAMPLES:  # evenly spaced rows: Z may be sorted by anything
        Z = Z[np.linspace(0, len(Z) - 1, SCALE_SAMPLES).astype(np.intp)]
    d2 = _squared_distances(Z, centroids)
    d2 = np.maximum(d2 - d2.min(axis=1, keepdims=True), 0.0)  # shift-invariant per row
    spread = float(np.median(d2[d2 > 0])) if (d2 > 0).any() else 1.0
    lo, hi = np.log(1e-6 / spread), np.log(1e6 / spread)
    if _confidence_and_slope(d2, np.exp(hi))[0] < target:
        return float(np.exp(hi))
    # start where a row whose K - 1 other centroids all lie at the median gap g would
    # reach the target: 1 / (1 + (K - 1) exp(-s g / 2)) = target
    k = d2.shape[1]
    gap = float(np.median(np.partition(d2, 1, axis=1)[:, 1])) if k > 1 else spread
    odds = max((k - 1) * target / (1.0 - target), 1.0 + 1e-9) if target < 1 else 1e9
    t = float(np.clip(np.log(2.0 * np.log(odds) / max(gap, 1e-12 * spread)), lo, hi))
    for _ in range(60):  # Newton converges in a few steps; bisection bounds the rest
        value, slope = _confidence_and_slope(d2, np.exp(t))
        if abs(value - target) <= SCALE_TOL:
            break
        if value < target:
            lo = t
        else:
            hi = t
        step = t - (value - target) / slope if slope > 0 else np.nan
        t = step if lo < step < hi else 0.5 * (lo + hi)
    return float(np.exp(t))


@torch.no_grad()
def head_from_centroids_(layer: torch.nn.Linear, centroids: np.ndarray, scale: float):
    r"""Set a linear head to the soft KMeans assignment of ``centroids``.

    :math:`W = sC` and :math:`b_k = -\frac{s}{2}\|c_k\|^2` (see the module docstring).

    Parameters
    ----------
    layer : torch.nn.Linear
        With ``out_features = K`` and ``in_features = d``; changed in place.
    centroids : ndarray of shape (K, d)
        In the space the layer's inputs live in.
    scale : float
        Stiffness :math:`s` (see :func:`soft_assignment_scale`).

    Returns
    -------
    layer : torch.nn.Linear

    Examples
    --------
    >>> layer = head_from_centroids_(torch.nn.Linear(2, 2), np.array([[0.0, 0], [1, 1]]), 2.0)
    >>> layer(torch.tensor([[1.0, 1.0]])).argmax().item()
    1
    """
    C = torch.as_tensor(centroids, dtype=torch.float64)
    weight = scale * C
    bias = -0.5 * scale * (C * C).sum(dim=1)
    layer.weight.copy_(weight.to(layer.weight.dtype))
    layer.bias.copy_(bias.to(layer.bias.dtype))
    return layer


def initial_centroids(fetch, n_samples: int, n_clusters: int, init, seed: int, *, explicit=True):
    """Centroids and stiffness of the initial head, from a random subsample of the data.

    Parameters
    ----------
    fetch : callable
        ``fetch(idx)`` returns the rows ``idx`` (a sorted index array) of the training
        data as a float (len(idx), d) array in the head's (normalised) input space.
    n_samples : int
        Number of training rows.
    n_clusters : int
    init : "kmeans" or ndarray of shape (n_clusters, d)
        ``"kmeans"``: k-means++ and Lloyd on the subsample (:func:`kmeans_centroids`);
        an array: these centroids, already in the normalised space.
    seed : int
        The restart's seed: draws the subsample and the k-means++ seeds.
    explicit : bool, default=True
        Whether the user asked for ``init="kmeans"`` (rather than ``"auto"``).

    Returns
    -------
    result : tuple (centroids, scale) or None
        None when ``init="kmeans"`` came from ``"auto"`` and the data hold fewer distinct
        rows than clusters: the caller keeps the random head.

    Raises
    ------
    ValueError
        An explicit ``init="kmeans"`` on data with fewer distinct rows than clusters.

    Examples
    --------
    >>> Z = np.r_[np.zeros((5, 2)), np.ones((5, 2))]
    >>> C, s = initial_centroids(lambda idx: Z[idx], 10, 2, "kmeans", seed=0)
    >>> C.shape, s > 0
    ((2, 2), True)
    """
    rng = np.random.default_rng(seed)
    m = subsample_size(n_samples, n_clusters)
    if m < n_samples:
        idx = np.sort(rng.choice(n_samples, size=m, replace=False))
    else:
        idx = np.arange(n_samples)
    Z = np.asarray(fetch(idx))
    if isinstance(init, str):
        distinct = n_distinct_rows(Z, stop=n_clusters)
        if distinct < n_clusters and m < n_samples:  # rare: count on all the rows
            distinct = n_distinct_rows(np.asarray(fetch(np.arange(n_samples))), n_clusters)
        if distinct < n_clusters:
            if not explicit:
                return None
            raise ValueError(
                f"n_distinct_samples={distinct} should be >= n_clusters={n_clusters}: there "
                f"are fewer distinct samples than clusters, so init='kmeans' cannot place "
                f"{n_clusters} centroids; use init='random' or fewer clusters"
            )
        centroids = kmeans_centroids(Z, n_clusters, int(rng.integers(2**31 - 1)))
    else:
        centroids = np.asarray(init, dtype=np.float64)
    return centroids, soft_assignment_scale(Z, centroids)


def inertia(Z: np.ndarray, centroids: np.ndarray) -> float:
    """Sum of squared distances of the rows Z to their nearest centroid (KMeans's objective).

    Examples
    --------
    >>> inertia(np.array([[0.0], [1.0], [3.0]]), np.array([[0.0], [3.0]]))
    1.0
    """
    return float(np.maximum(_squared_distances(Z, centroids).min(axis=1), 0.0).sum())
