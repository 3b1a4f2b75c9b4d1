"""The number of clusters from the data: the search behind ``n_clusters="auto"``.

``CCEClustering(n_clusters="auto")`` fits one clustering for every K of
``n_clusters_range`` (each with at least :data:`MIN_RESTARTS` restarts) and keeps the K
whose kept partition is both *reproducible* and *crisp*:

* **reproducible**: the restarts' agreement (the largest mean adjusted Rand index of a
  restart with the others, :func:`skcce._engine._select.agreement`). Restarts find the
  same partition when K matches the data's groups; with too many clusters they split
  groups in different places, with too few they merge different pairs. Alone it prefers
  coarse splits (two well separated halves of the data agree perfectly);
* **crisp**: the label-free mutual information of the kept model, :math:`I`, at most
  :math:`\\log K` (confident, balanced assignments). :math:`I / \\log K` drops once K
  exceeds the groups (the head cannot be confident about where to cut a group). Alone it
  prefers small K too weakly to choose.

The criterion (``n_clusters_scores_``) is agreement × :math:`I / (\\log K)^{0.7}`
(:data:`LOG_K_POWER`): the crisp factor normalised by slightly less than its maximum grows
like :math:`(\\log K)^{0.3}` for equally crisp partitions, which offsets the agreement's
preference for coarse splits (measured: docs/benchmarks.md, "Choosing the number of
clusters: what the numbers say"). A K whose kept partition leaves a
cluster with less than :data:`UNSUPPORTED_SHARE` of an even share (``n / K``) did not find
K groups (the fit emptied one) and scores 0. The candidates train for
:data:`SEARCH_EPOCH_SHARE` of the epochs (:func:`search_epochs`) and the chosen K is then
fitted again with the whole training; above :data:`SEARCH_ROWS` samples the candidates are
fitted on a random sample of that many rows, and the chosen K on all of them. On a long range
the search first *screens* every K with :data:`SCREEN_RESTARTS` restarts and fits only the
:data:`SCREEN_KEEP` best again with all of them (:func:`screening`); the curve keeps the
screening criterion of the others, and a K of the curve above every fully fitted one is fitted
fully too, so the chosen K is always the best of the curve and has its full restarts. ``K = 1`` is
never fitted: when the range starts at 1 it is chosen if no K of the range reaches
:data:`STRUCTURE_FLOOR`; otherwise a warning says that no K stands out when the best one stays
below it.
"""

from __future__ import annotations

import math
import os
import warnings
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from sklearn.base import clone
from sklearn.utils import check_random_state

from skcce._engine._device import resolve_device
from skcce._engine._distributed import resolve as resolve_distributed
from skcce._engine._select import MIN_CONSENSUS
from skcce._engine._threads import thread_limit
from skcce._warn import collected, warn
from skcce.models import _defaults
from skcce.models._kmeans_init import n_distinct_rows

#: Restarts per candidate K (the consensus rule needs three).
MIN_RESTARTS = MIN_CONSENSUS
#: Restarts per candidate K of the linear head with ``n_init="auto"``, whatever the data size:
#: with 3 the exact K was found in 13 of 33 tuning runs, with 10 in 21, with 20 no more than
#: with 10 (docs/user_guide.md, "Choosing the number of clusters").
LINEAR_RESTARTS = 10
#: Restarts of each candidate in the screening pass of a search (:func:`screening`): every K
#: of the range is first fitted with this many restarts, and only the :data:`SCREEN_KEEP` best
#: of that pass are fitted again with all the restarts. Replayed on bench_select_k's 15 sets,
#: seeds 0-5 (90 searches, every candidate fitted with 4 and with 10 restarts): the K that the
#: search with 10 restarts for every K chose was first of the 4-restart curve in 59 runs,
#: second in 17, third in 8, fourth in 5 and tenth in one (Fashion-MNIST pixels: K = 6
#: instead of 7, true K 10), so the screened search chose the same K in 89 of 90 runs, with
#: the same exact and +-1 hit rates (docs/user_guide.md, "Screening a long range").
SCREEN_RESTARTS = 4
#: Candidates of the screening pass fitted again with all the restarts (the best of the
#: screening curve; see :data:`SCREEN_RESTARTS`).
SCREEN_KEEP = 4
#: A cluster below this share of an even split (``n / K``) means the fit did not find K groups.
UNSUPPORTED_SHARE = 0.1
#: The search fits its candidates on at most this many rows (a random sample of larger data,
#: drawn by the estimator with its ``random_state``);
#: the chosen K is then fitted on all of them. The criterion's two factors are averages over
#: the rows, which a few thousand estimate well; the benchmark measured the criterion on
#: samples of this size (Fashion-MNIST and CNN embeddings, bench_select_k), and the search's
#: cost stops growing with n: 19 candidates of 10 restarts on 10 000 Fashion-MNIST rows took
#: 154 s on all the rows, 74 s on a sample.
SEARCH_ROWS = 5000
#: The power of ``log K`` that divides the mutual information in :func:`criterion`. With 1
#: (the normalised mutual information) the search answered K <= 3 on 30 of 66 runs whose true
#: K is 5 or more. Replayed on the captured candidates of bench_select_k's 14 sets (seeds 0-5)
#: and of 5 sets it does not contain (varied, imbalanced and anisotropic blobs, long-tailed
#: Fashion-MNIST and CNN embeddings; seeds 0-2), 0.7 answers K <= 3 on 12 of those 66, finds
#: the exact K on 51 of 99 runs instead of 45 and raises the final clusterings' mean NMI by
#: 0.05 in each of the three groups (seeds 0-2, seeds 3-5, the other sets); every power from
#: 0.5 to 0.9 did better than 1.
LOG_K_POWER = 0.7
#: Below this criterion no K has structure worth reporting (K = 1 when the range allows it).
#: Measured (docs/benchmarks.md, bench_select_k): uniform noise in 10-D scores at most 0.15
#: at every K (0.12 with the old power 1, as a 20-D Gaussian did); the weakest real data
#: (digits, long-tailed digits and Fashion-MNIST, unseen-class embeddings) 0.49+.
STRUCTURE_FLOOR = 0.25
#: The candidates of the search train for this share of ``max_epochs`` (at least
#: :data:`MIN_SEARCH_STEPS` optimiser steps), and the chosen K is then fitted again with the
#: whole training. The criterion needs the partition that the restarts settle on, which the
#: first epochs form: replayed on bench_select_k's 14 sets (seeds 0-5, every candidate captured),
#: candidates of 5 epochs instead of 10 found the exact K on 51 of 84 runs instead of 48 and
#: within +-1 on 66 instead of 62, at half the cost (docs/benchmarks.md).
SEARCH_EPOCH_SHARE = 0.5
#: The fewest optimiser steps of a shortened candidate: on the sets of one to three batches
#: per epoch (iris, wine, breast cancer, long-tailed digits) five epochs are five to fifteen
#: steps, and wine then answered K = 4 on two of six seeds; with 40 steps such sets keep their
#: whole training (every value from 16 to 40 does the same on the benchmark).
MIN_SEARCH_STEPS = 40


class NoStructureWarning(UserWarning):
    """``n_clusters="auto"`` found no number of clusters that stands out."""


def supported_max(n_samples: int) -> int:
    """The largest K that ``n_samples`` rows support: :math:`\\lfloor\\sqrt{n/2}\\rfloor`
    (at least 1), the classical rule of thumb for the number of clusters of n points.

    Examples
    --------
    >>> supported_max(150), supported_max(1797), supported_max(10)
    (8, 29, 2)
    """
    return max(1, math.isqrt(int(n_samples) // 2))


def check_range(n_clusters_range, count_distinct) -> tuple[int, int]:
    """The validated ``(low, high)`` of ``n_clusters_range``, ``high`` clipped to the number
    of distinct samples.

    ``count_distinct(stop)`` counts the data's distinct samples up to ``stop`` (the upper
    bound: more do not matter), e.g.
    :func:`skcce.models._kmeans_init.n_distinct_rows`.

    Raises
    ------
    ValueError
        Not two integers, ``low < 1``, ``low > high`` or ``low`` above the number of distinct
        samples.

    Examples
    --------
    >>> check_range((2, 20), lambda stop: min(10, stop))
    (2, 10)
    """
    try:
        low, high = (int(v) for v in n_clusters_range)
        exact = all(float(v) == int(v) for v in n_clusters_range)
    except (TypeError, ValueError):
        raise ValueError(
            f"n_clusters_range must be two integers (low, high); got {n_clusters_range!r}"
        ) from None
    if not exact:
        raise ValueError(f"n_clusters_range must be two integers; got {n_clusters_range!r}")
    if low < 1:
        raise ValueError(f"n_clusters_range={n_clusters_range!r}: the lower bound must be >= 1")
    if low > high:
        raise ValueError(
            f"n_clusters_range={n_clusters_range!r}: the lower bound exceeds the upper bound"
        )
    n_distinct = count_distinct(high)
    if low > n_distinct:
        raise ValueError(
            f"n_clusters_range={n_clusters_range!r}: the lower bound exceeds the number of "
            f"distinct samples ({n_distinct})"
        )
    return low, min(high, n_distinct)


def restarts(n_init, model) -> int:
    """Restarts per candidate K: an explicit ``n_init``; for ``"auto"``
    :data:`LINEAR_RESTARTS` on the linear head (also from 10 000 samples of 64 features or
    more, where one fit runs a single restart) and :data:`MIN_RESTARTS` on a deep model
    (where a restart is a whole network training).

    Raises
    ------
    ValueError
        An explicit ``n_init`` below :data:`MIN_RESTARTS`.

    Examples
    --------
    >>> restarts("auto", "linear")
    10
    >>> restarts(5, "linear")
    5
    >>> restarts("auto", "vgg4")
    3
    """
    if n_init != "auto":
        if n_init < MIN_RESTARTS:
            raise ValueError(
                f"n_clusters='auto' compares restarts: n_init must be >= {MIN_RESTARTS} or "
                f"'auto'; got n_init={n_init}"
            )
        return int(n_init)
    return LINEAR_RESTARTS if _defaults.is_linear(model) else MIN_RESTARTS


def screening(n_restarts: int, n_candidates: int) -> int | None:
    """Restarts of the screening pass of a search, or None when it would not save work.

    Screening fits every candidate with :data:`SCREEN_RESTARTS` restarts and the
    :data:`SCREEN_KEEP` best again with ``n_restarts``; it is used when that is fewer
    restarts in all than ``n_restarts`` for every candidate.

    Examples
    --------
    >>> screening(10, 19)  # K = 2 .. 20: 4 x 19 + 10 x 4 = 116 restarts instead of 190
    4
    >>> screening(10, 5), screening(3, 19)  # 4 x 5 + 10 x 4 > 50; 3 restarts: nothing to cut
    (None, None)
    """
    if n_restarts <= SCREEN_RESTARTS:
        return None
    screened = SCREEN_RESTARTS * n_candidates + n_restarts * SCREEN_KEEP
    return SCREEN_RESTARTS if screened < n_restarts * n_candidates else None


def shortlist(scores: dict, keep: int = SCREEN_KEEP) -> list:
    """The ``keep`` K of the highest criterion in ``scores`` (ties: the smaller K), in
    increasing order.

    Examples
    --------
    >>> shortlist({2: 0.5, 3: 0.9, 4: 0.7, 5: 0.7}, keep=2)
    [3, 4]
    """
    return sorted(sorted(scores, key=lambda k: (-scores[k], k))[:keep])


def best_k(scores: dict) -> int:
    """The K of the highest criterion, the smaller of equals.

    Examples
    --------
    >>> best_k({2: 0.5, 3: 0.9, 4: 0.9})
    3
    """
    return max(scores, key=lambda k: (scores[k], -k))


def search_epochs(max_epochs: int, n_rows: int, batch_size, model, n_clusters=None) -> int:
    """Epochs of each candidate of the search: :data:`SEARCH_EPOCH_SHARE` of ``max_epochs``
    (rounded up), raised to reach :data:`MIN_SEARCH_STEPS` optimiser steps on ``n_rows`` rows
    in batches of ``batch_size`` (``"auto"``: the ``model``'s, as a fit resolves it), never
    above ``max_epochs``.

    Examples
    --------
    >>> search_epochs(10, 1797, "auto", "linear")  # digits: 8 batches of 250 an epoch
    5
    >>> search_epochs(10, 178, 250, "linear")  # wine: one batch an epoch, the whole training
    10
    >>> search_epochs(1, 5000, 250, "linear")
    1
    """
    resolved = _defaults.resolve(
        {"batch_size": batch_size}, model, n_rows, images=False, n_clusters=n_clusters
    )
    batch_size = resolved["batch_size"]
    batches = max(1, math.ceil(n_rows / batch_size))
    share = math.ceil(SEARCH_EPOCH_SHARE * max_epochs)
    return min(int(max_epochs), max(share, math.ceil(MIN_SEARCH_STEPS / batches)))


def criterion(agreement: float, information: float, k: int, smallest: int, n: int) -> float:
    """Reproducible and crisp: ``agreement * information / log(k) ** LOG_K_POWER``, 0 when
    unsupported.

    Parameters
    ----------
    agreement : float
        The restarts' agreement (largest mean adjusted Rand index of one with the others).
    information : float
        Label-free mutual information of the kept model on the data (nats).
    k : int
        Number of clusters (>= 2).
    smallest : int
        Size of the kept partition's smallest cluster.
    n : int
        Number of samples.

    Returns
    -------
    float
        In ``[0, log(k) ** (1 - LOG_K_POWER)]`` (below 1.5 up to K = 40).

    Examples
    --------
    >>> round(criterion(0.9, math.log(4) * 0.8, 4, 200, 1000), 3)
    0.794
    >>> criterion(0.9, 1.0, 4, 2, 1000)  # a cluster of 2 where an even share is 250
    0.0
    """
    if smallest < UNSUPPORTED_SHARE * n / k:
        return 0.0
    # the mutual information is at most log k (rounding may exceed it)
    information = min(max(information, 0.0), math.log(k))
    return float(max(agreement, 0.0) * information / math.log(k) ** LOG_K_POWER)


def candidate_path(checkpoint, k: int, tag: str = ""):
    """The checkpoint file of candidate ``k``: ``run.pt`` -> ``run.k7.pt`` (None stays None);
    ``tag`` names a search on a sample apart from the final fit (``run.k7.sample.pt``)."""
    if checkpoint is None:
        return None
    path = Path(os.fspath(checkpoint))
    return path.with_name(f"{path.stem}.k{k}{tag}{path.suffix}")


def score_of(fitted) -> float:
    """:func:`criterion` of a fitted candidate (its restarts' agreement, its training mutual
    information ``train_score_`` and its smallest cluster)."""
    k = fitted.n_clusters_
    counts = np.bincount(fitted.labels_, minlength=k)
    return criterion(
        float(np.max(fitted.restart_agreement_)),
        float(fitted.train_score_),
        k,
        int(counts.min()),
        len(fitted.labels_),
    )


def search_workers(n_threads, linear: bool, on_cpu: bool, distributed: bool, verbose) -> int:
    """How many candidates of the search are fitted at once.

    The candidates are independent fits, so the linear head on the CPU fits them on
    ``n_threads`` threads (None: torch's thread count when ``fit`` is called), one
    single-threaded candidate per thread: a candidate on digits spends most of its time in
    small products and Python, which one core runs no slower alone. Every other case fits them
    one at a time: a deep model's fit uses every thread (or the GPU) itself, the ranks of a
    data-parallel fit must run the same fits in the same order, and ``verbose`` progress bars
    would interleave.

    Examples
    --------
    >>> search_workers(4, True, True, False, 0)
    4
    >>> search_workers(4, False, True, False, 0), search_workers(4, True, True, False, 1)
    (1, 1)
    """
    if not (linear and on_cpu) or distributed or verbose:
        return 1
    return max(1, int(n_threads or torch.get_num_threads()))


def fit_all(fit_one, ks, workers: int):
    """``fit_one(k)`` for every K of ``ks``, on ``workers`` threads: yields ``(fitted, caught)``
    in the order of ``ks``, ``caught`` the skcce warnings of that fit
    (:func:`skcce._warn.collected`).

    Warnings from other libraries during the fits are dropped (``warnings.catch_warnings``
    cannot tell the threads apart). With several workers the pool runs inside one scope of
    one torch and BLAS thread (torch's count is process-wide: each fit's own scope then sets
    and restores the same value, so no fit changes another's mid-way), the largest K first (the
    longest fits start first); a fit's results do not depend on the order or the threads
    (tested). With one worker the fits run in order and
    lazily (a caller can report each as it ends).
    """

    def one(k):
        with collected() as caught:
            return fit_one(k), caught

    if workers <= 1:
        for k in ks:  # the filters are process-wide: changed around each fit, not across yields
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                result = one(k)
            yield result
        return
    ks = list(ks)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with thread_limit(1), ThreadPoolExecutor(min(workers, len(ks))) as pool:
            done = dict(zip(ks[::-1], pool.map(one, ks[::-1]), strict=True))
    yield from (done[k] for k in ks)


def choose(scores: dict, low: int):
    """The chosen K from the curve ``scores``; 1 when the range starts at 1 and no K reaches
    :data:`STRUCTURE_FLOOR` (a :class:`NoStructureWarning` otherwise)."""
    k = best_k(scores)
    if scores[k] >= STRUCTURE_FLOOR:
        return k
    if low == 1:
        return 1
    warn(
        f"n_clusters='auto': no number of clusters stands out (best criterion "
        f"{scores[k]:.2f} at K={k}, below {STRUCTURE_FLOOR}); the data may have no cluster "
        "structure (allow K=1 with n_clusters_range=(1, ...)) or the range may miss it",
        NoStructureWarning,
    )
    return k


@dataclass(frozen=True)
class Search:
    """What a search found: the chosen ``k``, the criterion of every K tried (``scores``)
    and the restarts behind each criterion (``restarts``)."""

    k: int
    scores: dict
    restarts: dict


def check_search_params(estimator) -> None:
    """A ``ValueError`` for parameters that fix the number of clusters (a prior array,
    init centroids) or a positive ``whiten`` without the linear head, before any fit."""
    if not (estimator.prior is None or isinstance(estimator.prior, str)):
        raise ValueError(
            "n_clusters='auto' cannot take a prior array: its length fixes the number of "
            "clusters (use prior='auto', 'estimate' or None, or an integer n_clusters)"
        )
    if not isinstance(estimator.init, str):
        raise ValueError(
            "n_clusters='auto' cannot take init centroids: their number fixes the number "
            "of clusters (use init='auto', 'kmeans' or 'random', or an integer n_clusters)"
        )
    if float(estimator.whiten) > 0 and not _defaults.is_linear(estimator.model):
        raise ValueError(
            f"whiten={estimator.whiten!r} needs the linear head (model='linear'); "
            f"got model={estimator.model!r}"
        )


def search(estimator, X) -> Search:
    """Choose K for ``estimator`` (a ``CCEClustering`` with ``n_clusters="auto"``) on the
    validated ``X``.

    Every K of ``n_clusters_range`` (its upper end clipped to the distinct rows and to
    :func:`supported_max`) is fitted by a clone of ``estimator`` with that K, the search's
    restarts and epochs (:func:`restarts`, :func:`search_epochs`), without whitening, from
    random heads when ``init="auto"``, on at most :data:`SEARCH_ROWS` rows; the chosen K is
    the best :func:`criterion` (:func:`choose`). The caller then fits the chosen K on all the
    rows with the estimator's own settings.
    """
    rows = X.reshape(len(X), -1)  # distinct rows (images) bound K
    low, high = check_range(estimator.n_clusters_range, lambda stop: n_distinct_rows(rows, stop))
    high = max(min(high, supported_max(len(X))), min(low, high))
    if high < 2:  # a range of K = 1 alone: nothing to compare
        return Search(1, {}, {})
    n_init = restarts(estimator.n_init, estimator.model)
    if len(X) > SEARCH_ROWS:
        rng = check_random_state(estimator.random_state)
        X = X[np.sort(rng.choice(len(X), SEARCH_ROWS, replace=False))]
    epochs = search_epochs(
        estimator.max_epochs, len(X), estimator.batch_size, estimator.model, high
    )
    workers = search_workers(
        estimator.n_threads,
        _defaults.is_linear(estimator.model),
        resolve_device(estimator.device).type == "cpu",
        resolve_distributed(estimator.distributed).active,
        estimator.verbose,
    )
    # candidates: plain geometry (a positive whiten applies to the chosen K's fit) and, for
    # init="auto", random heads: restarts from KMeans starts agree with one another at any K,
    # so their agreement would not measure the data's structure; on several threads each
    # candidate runs single-threaded, its solver too
    fixed = {"max_epochs": epochs, "whiten": False, **({"n_threads": 1} if workers > 1 else {})}
    if isinstance(estimator.init, str) and estimator.init == "auto":
        fixed["init"] = "random"

    def fit_one(k, n_restarts=n_init, tag=".search"):
        candidate = clone(estimator).set_params(
            n_clusters=k,
            n_init=n_restarts,
            checkpoint=candidate_path(estimator.checkpoint, k, tag),
            **fixed,
        )
        return candidate.fit(X)

    def report(k, note=""):
        if estimator.verbose:
            print(f"n_clusters={k}: criterion {scores[k]:.3f}{note}", flush=True)

    ks, scores, restarts_of = list(range(max(low, 2), high + 1)), {}, {}
    screen = screening(n_init, len(ks))
    todo = ks
    if screen is not None:
        fitted = fit_all(lambda k: fit_one(k, screen, ".search.screen"), ks, workers)
        for k, (candidate, _) in zip(ks, fitted, strict=True):
            scores[k], restarts_of[k] = score_of(candidate), screen
            report(k, f" (screening, {screen} restarts)")
        todo = shortlist(scores)
    while todo:
        for k, (candidate, _) in zip(todo, fit_all(fit_one, todo, workers), strict=True):
            scores[k], restarts_of[k] = score_of(candidate), n_init
            report(k)
        top = best_k(scores)
        # the curve's best always has all restarts (screening uses fewer than n_init)
        todo = [] if restarts_of[top] == n_init else [top]
    return Search(choose(scores, low), scores, restarts_of)
