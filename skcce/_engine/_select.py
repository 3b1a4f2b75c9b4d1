"""The choice of the kept restart: fewest empty clusters, then two label-free criteria.

Restarts of a clustering head end in different local optima. The label-free mutual
information :math:`I = H(\\bar\\sigma) - \\overline{H(\\sigma)}` that used to rank them
prefers balanced, confident partitions, whether or not they are right: on imbalanced or
elongated clusters it ranked the wrong restarts first (docs/benchmarks.md,
``bench_ordinary``). Two criteria that do not prefer balance replace it, each weak alone:

* **agreement** (:func:`agreement`): restarts that find the data's structure tend to find the
  *same* partition, while wrong ones differ from each other, so a restart scores the mean
  adjusted Rand index of its labels with the other restarts' (a consensus rule in the manner
  of stability-based model selection, Lange et al. 2004);
* **fit** (:func:`partition_log_likelihood`, the linear head on features): the
  classification log-likelihood of the restart's hard partition under spherical Gaussians
  of one shared variance, with the partition's own proportions.

The kept restart has the fewest empty clusters and, among those, the best sum of its ranks
under the two (the agreement alone for other models), ties going to the higher mutual
information. With fewer than :data:`MIN_CONSENSUS` restarts the mutual information decides.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from scipy.stats import rankdata

from skcce._engine._callbacks import RunResult, empty_clusters


@dataclass
class Best:
    """A completed restart, a candidate for the fitted attributes (:func:`choose` picks the
    one kept).

    ``labels``: the training rows' clusters (int, shape (N,)); ``sizes``: rows per cluster
    (shape (K,), needed by :func:`choose`); ``score``: the label-free mutual information of
    the training-set soft assignments. No (N, K) probabilities are kept.
    """

    score: float
    module: torch.nn.Module
    history: list
    labels: np.ndarray
    run: int
    prior: np.ndarray | None = None  # in force at the end of the restart (None: uniform)
    sizes: np.ndarray | None = None  # rows per cluster, (K,)

    @classmethod
    def of(cls, result: RunResult) -> Best | None:
        """The record of a restart that completed an epoch (None otherwise)."""
        if not result.history:
            return None
        return cls(
            result.score, result.module, result.history, result.labels, result.run,
            result.prior, result.sizes,
        )  # fmt: skip


#: Restarts needed for the consensus rule (with two, each agrees with the other equally).
MIN_CONSENSUS = 3


def agreement(labels: list) -> np.ndarray:
    """Mean adjusted Rand index of each labelling with every other one.

    Parameters
    ----------
    labels : list of ndarray of shape (n_samples,)

    Returns
    -------
    agreement : ndarray of shape (len(labels),)
        In [-0.5, 1]; 0 for a single labelling.

    Examples
    --------
    >>> a, b = np.array([0, 0, 1, 1]), np.array([1, 1, 0, 0])
    >>> agreement([a, b, np.array([0, 1, 0, 1])]).round(2).tolist()
    [0.25, 0.25, -0.5]
    """
    m = len(labels)
    if m < 2:
        return np.zeros(m)
    labels = [np.unique(np.asarray(lab), return_inverse=True)[1] for lab in labels]
    pair = np.eye(m)
    for i in range(m):
        for j in range(i + 1, m):
            pair[i, j] = pair[j, i] = _adjusted_rand(labels[i], labels[j])
    return (pair.sum(axis=1) - 1.0) / (m - 1)


def _adjusted_rand(a, b) -> float:
    """Adjusted Rand index of two labellings coded 0..k-1 (Hubert and Arabie, 1985), from
    their contingency table (one bincount; scikit-learn's ``adjusted_rand_score`` gives the
    same values, tested)."""
    ka, kb = int(a.max()) + 1, int(b.max()) + 1
    table = np.bincount(a * kb + b, minlength=ka * kb).reshape(ka, kb).astype(np.float64)

    def pairs(x):
        return float((x * (x - 1.0)).sum() / 2.0)

    n = float(len(a))
    index, rows, cols = pairs(table), pairs(table.sum(axis=1)), pairs(table.sum(axis=0))
    expected = rows * cols / (n * (n - 1.0) / 2.0) if n > 1 else 0.0
    top = 0.5 * (rows + cols)
    if top == expected:  # both labellings trivial (one cluster, or all singletons)
        return 1.0
    return (index - expected) / (top - expected)


def partition_log_likelihood(rows, labels: list, n_clusters: int, n_samples: int):
    r"""Classification log-likelihood of hard partitions of the same data, up to a constant.

    Each partition is scored under a mixture of spherical Gaussians with one shared
    variance, its own cluster means and its own proportions :math:`p_k = n_k / n`:

    .. math::  \ell = -\frac{nd}{2}\ln\frac{W}{nd} + \sum_k n_k \ln p_k

    with :math:`W` the within-cluster sum of squares (the terms shared by every partition of
    the same data are left out). Computed in one pass over the rows: :math:`W` differs
    between partitions only through :math:`\sum_k \|S_k\|^2 / n_k` (:math:`S_k` the sum of
    cluster k's rows).

    Parameters
    ----------
    rows : callable
        ``rows(start, stop)`` returns rows ``start:stop`` of the (normalised) training data
        as a float array of shape (stop - start, d).
    labels : list of ndarray of shape (n_samples,)
    n_clusters : int
    n_samples : int

    Returns
    -------
    ell : ndarray of shape (len(labels),)

    Examples
    --------
    >>> X = np.r_[np.zeros((5, 1)), np.ones((5, 1))] + np.arange(10)[:, None] * 1e-3
    >>> right, wrong = np.repeat([0, 1], 5), np.tile([0, 1], 5)
    >>> ell = partition_log_likelihood(lambda a, b: X[a:b], [right, wrong], 2, 10)
    >>> bool(ell[0] > ell[1])
    True
    """
    m = len(labels)
    sums, total = None, 0.0
    for start in range(0, n_samples, 4096):
        block = np.asarray(rows(start, min(start + 4096, n_samples)), dtype=np.float64)
        if sums is None:
            sums = np.zeros((m, n_clusters, block.shape[1]))
        total += float(np.einsum("ij,ij->", block, block))
        for r, lab in enumerate(labels):  # cluster sums: a one-hot product per restart
            onehot = np.zeros((n_clusters, len(block)))
            onehot[lab[start : start + len(block)], np.arange(len(block))] = 1.0
            sums[r] += onehot @ block
    d = sums.shape[2]
    counts = np.stack([np.bincount(lab, minlength=n_clusters) for lab in labels]).astype(float)
    safe = np.maximum(counts, 1.0)
    within = total - ((sums**2).sum(axis=2) / safe).sum(axis=1)
    within = np.maximum(within, 1e-12 * max(total, 1e-300))
    mix = (counts * np.log(safe / n_samples)).sum(axis=1)
    return -0.5 * n_samples * d * np.log(within / (n_samples * d)) + mix


def choose(finished: list, fit=None) -> tuple[Best | None, np.ndarray]:
    """The restart to keep among ``finished`` (records with ``labels``, ``sizes`` and
    ``score``).

    Parameters
    ----------
    finished : list of Best
        Every completed restart of the fit (in run order); the number of clusters is the
        length of their ``sizes``. Clusters of zero ``prior`` (a record's prior at the end of
        its restart) are meant to stay empty and do not count as empty.
    fit : callable, optional
        ``fit(labels_list) -> ndarray``: the partitions' :func:`partition_log_likelihood`
        (None: agreement alone).

    Returns
    -------
    best : Best or None
        None when ``finished`` is empty.
    agreement : ndarray of shape (len(finished),)
        Each restart's mean agreement with the others (zeros below
        :data:`MIN_CONSENSUS` restarts).
    """
    if not finished:
        return None, np.zeros(0)
    labels = [record.labels for record in finished]
    k = len(finished[0].sizes)
    empties = np.array(
        [empty_clusters(lab, k, r.prior).size for lab, r in zip(labels, finished, strict=True)]
    )
    scores = np.array([r.score for r in finished], dtype=np.float64)
    if len(finished) < MIN_CONSENSUS:
        agree, rank = np.zeros(len(finished)), np.zeros(len(finished))
    else:
        agree = agreement(labels)
        rank = rankdata(agree)
        if fit is not None:
            rank = rank + rankdata(fit(labels))
    order = [(-e, r, s) for e, r, s in zip(empties, rank, scores, strict=True)]
    return finished[max(range(len(finished)), key=order.__getitem__)], agree


def choose_restart(finished: list, X, inputs, features: bool):
    """:func:`choose` for a fit: the partition likelihood on the normalised rows of the
    training data ``X`` (``inputs``: its fitted normalisation) when ``features`` (the linear
    head on 2-D features), the agreement alone otherwise."""
    fit = None
    if features:
        cpu = torch.device("cpu")

        def rows(start, stop):
            return inputs.raw(X, slice(start, stop), cpu).numpy()

        k = len(finished[0].sizes) if finished else 0

        def fit(labels):
            return partition_log_likelihood(rows, labels, k, len(X))

    return choose(finished, fit)
