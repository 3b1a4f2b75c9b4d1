"""The choice of the kept restart: fewest empty clusters, then agreement with the others.

Restarts of a clustering head end in different local optima. The label-free mutual
information :math:`I = H(\\bar\\sigma) - \\overline{H(\\sigma)}` that used to rank them prefers
balanced, confident partitions, whether or not they are right: on imbalanced or elongated
clusters it ranked the wrong restarts first (docs/benchmarks.md, ``bench_ordinary``). The
restarts that find the data's structure tend to find the *same* partition, while the wrong
ones differ from each other, so the restart kept is the one whose labels agree most with the
other restarts' labels (mean adjusted Rand index; a consensus rule in the manner of
stability-based model selection, Lange et al. 2004). With fewer than
:data:`MIN_CONSENSUS` restarts there is no majority to agree with, and the mutual
information decides. A restart with more empty clusters than another never wins.
"""

from __future__ import annotations

import numpy as np
from sklearn.metrics import adjusted_rand_score

from skcce._engine._callbacks import Best, empty_clusters

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
    pair = np.eye(m)
    for i in range(m):
        for j in range(i + 1, m):
            pair[i, j] = pair[j, i] = adjusted_rand_score(labels[i], labels[j])
    return (pair.sum(axis=1) - 1.0) / (m - 1)


def choose(finished: list) -> tuple[Best | None, np.ndarray]:
    """The restart to keep among ``finished`` (records with ``proba`` and ``score``).

    Parameters
    ----------
    finished : list of Best
        Every completed restart of the fit (in run order). Clusters of zero ``prior`` (a
        record's prior at the end of its restart) are meant to stay empty and do not count
        as empty.

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
    labels = [record.proba.argmax(axis=1) for record in finished]
    k = finished[0].proba.shape[1]
    empties = np.array(
        [empty_clusters(lab, k, r.prior).size for lab, r in zip(labels, finished, strict=True)]
    )
    agree = agreement(labels) if len(finished) >= MIN_CONSENSUS else np.zeros(len(finished))
    ranks = [(-e, a, r.score) for e, a, r in zip(empties, agree, finished, strict=True)]
    return finished[max(range(len(finished)), key=ranks.__getitem__)], agree
