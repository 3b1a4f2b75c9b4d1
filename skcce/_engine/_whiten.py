"""Within-cluster whitening of flat features (``CCEClustering(whiten=True)``).

A linear head draws linear boundaries between clusters, and the boundaries it can find depend
on the geometry it trains in: its KMeans start (Euclidean distances), its weight decay (the
weight norm) and its gradient steps all treat every direction of the normalised features
alike. When the clusters share one elongated covariance (sheared blobs, the iris flowers),
the best linear boundaries are those of a Gaussian mixture with one *tied* covariance
:math:`\\Sigma_w`, which are Euclidean boundaries after the map :math:`\\Sigma_w^{-1/2}`.

:func:`within_whitening` estimates that map without labels, by alternating a partition and the
pooled covariance of its clusters (hard EM for a tied-covariance mixture): KMeans on the
normalised rows gives a partition, the within-cluster residuals give :math:`\\Sigma_w`
(Ledoit-Wolf shrinkage, which keeps it invertible with few rows per dimension), KMeans again
in the whitened space gives the next partition, :data:`ROUNDS` times. The map is applied to
every normalised row that ``fit``, ``predict``, ``predict_proba`` and ``score`` see
(:class:`skcce._engine._preprocess.Inputs`), so that the fitted head is a linear head on the
whitened features.

With ``strength`` below 1 (``CCEClustering(whiten=0.75)``) the map is the covariance to the
power ``-strength / 2``: the directions are evened out only partly, so a wrong partition's
covariance pulls less.

Measured (docs/benchmarks.md, ``bench_ordinary``): full whitening raises the accuracy on
low-dimensional data with elongated clusters (anisotropic blobs, iris, breast cancer) by
0.03-0.13, and loses up to 0.09 on embeddings and pixels whose KMeans partition is far from the
classes (the covariance of a wrong partition pulls the clusters toward it); ``whiten=0.75``
keeps most of both sides' gains. Off by default: it costs three ``KMeans(n_init=10)`` fits.
"""

from __future__ import annotations

import numpy as np
from sklearn.cluster import KMeans
from sklearn.covariance import ledoit_wolf

#: Alternations of partition and pooled covariance (each one KMeans(n_init=10) run).
ROUNDS = 3
#: The rows the estimate uses at most (a random subsample of larger data).
ROWS = 5000


def pooled_within(Z: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """Ledoit-Wolf estimate of the covariance pooled over the clusters of ``labels``.

    Parameters
    ----------
    Z : ndarray of shape (n_samples, n_features)
    labels : ndarray of shape (n_samples,)

    Returns
    -------
    cov : ndarray of shape (n_features, n_features)
        Symmetric positive definite unless every residual is 0.

    Examples
    --------
    >>> Z = np.array([[0.0, 0.0], [2.0, 0.0], [10.0, 1.0], [12.0, 1.0]])
    >>> pooled_within(Z, np.array([0, 0, 1, 1])).round(3).tolist()
    [[1.0, 0.0], [0.0, 0.0]]
    """
    residuals = np.empty_like(Z)
    for cluster in np.unique(labels):
        members = labels == cluster
        residuals[members] = Z[members] - Z[members].mean(axis=0)
    cov, _ = ledoit_wolf(residuals, assume_centered=True)
    return cov


def inverse_root(cov: np.ndarray, floor: float, strength: float = 1.0) -> np.ndarray:
    """The symmetric map ``cov ** (-strength / 2)``: with ``strength=1`` ``A.T @ cov @ A`` is the
    identity (full whitening), with a smaller strength the directions of the covariance are
    evened out only partly, and with 0 it is the identity. Directions of a variance below
    ``floor`` (> 0) are scaled as if they had that variance.

    Examples
    --------
    >>> inverse_root(np.diag([4.0, 0.0]), floor=0.25).tolist()
    [[0.5, 0.0], [0.0, 2.0]]
    >>> inverse_root(np.diag([16.0, 1.0]), floor=0.25, strength=0.5).tolist()
    [[0.5, 0.0], [0.0, 1.0]]
    """
    values, vectors = np.linalg.eigh(cov)
    values = np.maximum(values, floor)
    if strength == 1.0:  # np.sqrt, not ** 0.5: whiten=True keeps its map bit for bit
        return (vectors / np.sqrt(values)) @ vectors.T
    return (vectors / values ** (strength / 2.0)) @ vectors.T


def sample_index(n_samples: int, seed: int) -> np.ndarray:
    """The rows the estimate uses: all of them up to :data:`ROWS`, else a sorted random
    sample of :data:`ROWS` drawn with ``seed``.

    Examples
    --------
    >>> sample_index(3, 0).tolist()
    [0, 1, 2]
    >>> len(sample_index(10 * ROWS, 0)) == ROWS
    True
    """
    if n_samples <= ROWS:
        return np.arange(n_samples)
    return np.sort(np.random.RandomState(seed).choice(n_samples, ROWS, replace=False))


def within_whitening(
    Z: np.ndarray, n_clusters: int, seed: int, strength: float = 1.0
) -> np.ndarray:
    """The whitening map of the normalised rows ``Z`` for ``n_clusters`` clusters.

    Parameters
    ----------
    Z : ndarray of shape (n_rows, n_features)
        Normalised rows (:func:`sample_index` of the training data).
    n_clusters : int
    seed : int
        Seeds the KMeans runs.
    strength : float in (0, 1], default=1.0
        The power of the map: ``cov ** (-strength / 2)`` (:func:`inverse_root`), in the
        KMeans rounds and in the map returned. 1 whitens fully; ``CCEClustering(whiten=0.75)``
        evens the directions out partly.

    Returns
    -------
    A : ndarray of shape (n_features, n_features)
        With ``strength=1``, ``Z @ A`` has unit pooled within-cluster variance in every
        direction; in any case it is rescaled so that its features' mean variance is 1, as the
        normalisation leaves them.
    """
    Z = np.asarray(Z, dtype=np.float64)
    Z = Z - Z.mean(axis=0)
    # a direction the clusters do not spread along (a constant feature, clusters of identical
    # rows) is scaled as if its within-cluster variance were a millionth of the features' mean
    # variance, never blown up without bound
    floor = 1e-6 * float(Z.var(axis=0).mean())
    if floor <= 0:  # every row the same: nothing to whiten
        return np.eye(Z.shape[1])
    k = min(n_clusters, len(np.unique(Z, axis=0)))  # KMeans needs as many distinct rows
    whitened, A = Z, np.eye(Z.shape[1])
    for round_ in range(ROUNDS):
        kmeans = KMeans(k, n_init=10, random_state=seed + round_)
        labels = kmeans.fit_predict(whitened) if k > 1 else np.zeros(len(Z), dtype=np.int64)
        A = inverse_root(pooled_within(Z, labels), floor, strength)
        whitened = Z @ A
    spread = float(np.sqrt(whitened.var(axis=0).mean()))
    return A / spread if spread > 0 else A
