r"""Clustering scores: accuracy under the best matching of clusters to classes (Hungarian), and
the label-free mutual information of soft assignments (:func:`mutual_information`).


A clustering is scored against ground-truth classes by matching every cluster to at most one
class and every class to at most one cluster so that the number of samples whose cluster is
matched to their own class is as large as possible; the accuracy is that number divided by the
number of samples:

.. math::

    \mathrm{ACC}(y, c) = \max_{m} \frac{1}{n} \sum_{i=1}^{n} [\, m(c_i) = y_i \,],

the maximum over partial one-to-one maps ``m`` from clusters to classes. This is the metric of
the paper's Tables 1, 2 and 4 (and of IIC, SCAN, ...). It is found exactly by the Hungarian
algorithm (:func:`scipy.optimize.linear_sum_assignment`) on the contingency table. With more
clusters than classes the surplus clusters stay unmatched and all their samples count as errors;
with fewer clusters than classes the surplus classes are unmatched.
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import linear_sum_assignment
from scipy.special import xlogy

__all__ = ["cluster_class_matching", "clustering_accuracy", "mutual_information"]


def _check_labels(y_true, y_pred):
    arrays = []
    for name, y in (("y_true", y_true), ("y_pred", y_pred)):
        if hasattr(y, "detach"):  # torch tensors
            y = y.detach().cpu().numpy()
        arr = np.asarray(y)
        if arr.ndim == 2 and arr.shape[1] == 1:
            arr = arr.ravel()
        if arr.ndim != 1:
            raise ValueError(f"{name} must be a 1-D array of labels; got shape {arr.shape}")
        if arr.shape[0] == 0:
            raise ValueError(f"{name} is empty; at least one sample is needed")
        if arr.dtype.kind == "f" and not np.all(np.isfinite(arr)):
            raise ValueError(f"{name} contains NaN or infinite values")
        if arr.dtype.kind not in "iufbOUS":
            raise ValueError(f"{name} must hold class labels; got an array of dtype {arr.dtype}")
        arrays.append(arr)
    if arrays[0].shape[0] != arrays[1].shape[0]:
        raise ValueError(
            "y_true and y_pred must have the same length; got "
            f"{arrays[0].shape[0]} and {arrays[1].shape[0]}"
        )
    return arrays


def _contingency(y_true, y_pred):
    classes, t = np.unique(y_true, return_inverse=True)
    clusters, p = np.unique(y_pred, return_inverse=True)
    table = np.zeros((clusters.shape[0], classes.shape[0]), dtype=np.int64)
    np.add.at(table, (p.ravel(), t.ravel()), 1)
    return table, clusters, classes


def cluster_class_matching(y_true, y_pred):
    """The cluster-to-class matching that maximises the number of agreeing samples.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        Ground-truth class labels (any hashable, sortable labels: ints, strings, ...).
    y_pred : array-like of shape (n_samples,)
        Cluster labels.

    Returns
    -------
    mapping : dict
        ``{cluster: class}`` for every matched cluster. Clusters that are left unmatched (more
        clusters than classes) are absent; their samples count as errors in
        :func:`clustering_accuracy`.

    Raises
    ------
    ValueError
        If an input is not 1-D, is empty, holds NaN, or the lengths differ.

    See Also
    --------
    clustering_accuracy : the accuracy under this matching.

    Notes
    -----
    The Hungarian algorithm (:func:`scipy.optimize.linear_sum_assignment`) maximises the trace
    of the permuted contingency table; it handles rectangular tables, so the numbers of
    clusters and classes may differ. Among equally good matchings one is returned.

    Examples
    --------
    >>> from skcce.metrics import cluster_class_matching
    >>> m = cluster_class_matching([0, 0, 1, 1, 2, 2], [1, 1, 0, 0, 2, 2])
    >>> {int(k): int(v) for k, v in m.items()}
    {0: 1, 1: 0, 2: 2}
    >>> m = cluster_class_matching(["cat", "cat", "dog"], [5, 5, 7])
    >>> {int(k): str(v) for k, v in m.items()}
    {5: 'cat', 7: 'dog'}
    """
    y_true, y_pred = _check_labels(y_true, y_pred)
    table, clusters, classes = _contingency(y_true, y_pred)
    rows, cols = linear_sum_assignment(table, maximize=True)
    return {clusters[r].item(): classes[c].item() for r, c in zip(rows, cols, strict=True)}


def clustering_accuracy(y_true, y_pred):
    """Clustering accuracy under the best one-to-one matching of clusters to classes.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        Ground-truth class labels.
    y_pred : array-like of shape (n_samples,)
        Cluster labels (their values are arbitrary: only the partition matters).

    Returns
    -------
    accuracy : float
        In [0, 1]: the fraction of samples whose cluster is matched to their class (see the
        module docstring for the formula). Samples of unmatched clusters are errors.

    Raises
    ------
    ValueError
        If an input is not 1-D, is empty, holds NaN, or the lengths differ.

    See Also
    --------
    cluster_class_matching : the matching itself.
    sklearn.metrics.adjusted_rand_score, sklearn.metrics.normalized_mutual_info_score :
        matching-free clustering scores.

    Examples
    --------
    >>> from skcce.metrics import clustering_accuracy
    >>> clustering_accuracy([0, 0, 1, 1], [1, 1, 0, 0])  # a relabelling is perfect
    1.0
    >>> clustering_accuracy([0, 0, 1, 1], [0, 1, 2, 3])  # 4 clusters, 2 classes
    0.5
    >>> clustering_accuracy([0, 0, 1, 1, 1], [0, 0, 0, 0, 1])  # 2 + 1 of 5
    0.6
    """
    y_true, y_pred = _check_labels(y_true, y_pred)
    table, _, _ = _contingency(y_true, y_pred)
    rows, cols = linear_sum_assignment(table, maximize=True)
    return float(table[rows, cols].sum() / y_true.shape[0])


def mutual_information(proba) -> float:
    r"""Label-free clustering score :math:`I = H(\bar\sigma) - \frac1N \sum_i H(\sigma_i)` (nats).

    The mutual information between a sample and its cluster under soft assignments
    :math:`\sigma_i` (e.g. any ``predict_proba``): high when the predictions are confident
    (small :math:`H(\sigma_i)`) and the clusters are used evenly (large
    :math:`H(\bar\sigma)`). A collapsed model has :math:`I \approx 0`; the maximum is
    :math:`\ln K`. It is :meth:`skcce.CCEClustering.score` and does not depend on λ.

    Parameters
    ----------
    proba : array-like of shape (n_samples, n_clusters)
        Rows of cluster probabilities (non-negative, summing to 1).

    Returns
    -------
    score : float
        In :math:`[0, \ln K]` (nats).

    Examples
    --------
    >>> import numpy as np
    >>> from skcce.metrics import mutual_information
    >>> bool(np.isclose(mutual_information(np.eye(4)), np.log(4)))  # confident and even
    True
    >>> mutual_information(np.full((4, 4), 0.25))  # uninformative
    0.0
    """
    proba = np.asarray(proba, dtype=np.float64)
    if proba.ndim != 2:
        raise ValueError(f"proba must have shape (n_samples, n_clusters); got {proba.shape}")
    n = proba.shape[0]
    col = np.zeros(proba.shape[1])
    h_rows = 0.0
    for start in range(0, n, 65536):  # chunks: no (N, K) temporaries beside proba
        block = proba[start : start + 65536]
        col += block.sum(axis=0)
        h_rows -= float(xlogy(block, block).sum())  # 0 log 0 = 0
    mean = col / n
    h_mean = -float(xlogy(mean, mean).sum())
    return float(h_mean - h_rows / n)
