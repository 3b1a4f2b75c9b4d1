"""The one callback protocol of a fit, and the records that travel through it.

A fit runs restarts; a restart runs epochs; an epoch runs mini-batches. Checkpointing
(:class:`skcce._engine._checkpoint.Checkpoint`), the progress bar (:class:`ProgressBar`) and
scikit-learn's callback API (adapted by the estimator) are all :class:`Callback` objects, as
in skorch: the engine calls every hook of every callback, in order, and needs to know nothing
else about them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch


@dataclass
class EpochEnd:
    """The state at the end of a completed epoch (what a checkpoint needs to resume there).

    ``epoch`` counts the completed epochs of restart ``run``; ``module`` is a CPU copy of the
    weights; ``optimizer`` and ``generator`` are the live objects (read, never changed);
    ``optimizer`` is None for the linear head's restarts trained together with SGD, which
    is applied in place (:mod:`skcce._engine._batched`).
    """

    run: int
    epoch: int
    history: list
    module: dict
    optimizer: torch.optim.Optimizer | None
    generator: torch.Generator
    prior_mass: np.ndarray | None = None  # the restart's estimated cluster masses (_prior)
    labels: np.ndarray | None = None  # the epoch's training labels (_label_change)


@dataclass
class RunResult:
    """What one restart (:func:`skcce._engine._train.run_single`) returns.

    ``history`` lists its completed epochs; ``labels`` (the training rows' clusters, the
    argmax of the network's soft assignments, int64 of shape (N,)), ``score`` (the soft
    assignments' label-free mutual information) and ``sizes`` (training rows per cluster,
    int64 of shape (K,)) are None when no epoch completed: the restart keeps no (N, K)
    probabilities (:func:`skcce._engine._inference.infer_labels` computes all three in one
    streaming pass); ``interrupted``: Ctrl-C ended it (the module holds the last completed
    epoch); ``prior``: the class prior in force at its end (None: uniform).
    """

    run: int
    module: torch.nn.Module
    history: list
    labels: np.ndarray | None
    score: float | None
    interrupted: bool = False
    prior: np.ndarray | None = None
    sizes: np.ndarray | None = None


def cluster_sizes(labels, n_clusters) -> np.ndarray:
    """Rows per cluster of a labelling, int64 of shape (n_clusters,).

    Examples
    --------
    >>> cluster_sizes(np.array([0, 0, 2]), 4).tolist()
    [2, 0, 1, 0]
    """
    return np.bincount(np.asarray(labels), minlength=n_clusters).astype(np.int64)


def empty_clusters(labels, n_clusters, prior=None) -> np.ndarray:
    """The clusters (sorted) that no label names, except those of zero ``prior``.

    Examples
    --------
    >>> import numpy as np
    >>> empty_clusters(np.array([0, 0, 2]), 4).tolist()
    [1, 3]
    >>> empty_clusters(np.array([0, 0, 2]), 4, prior=np.array([0.5, 0.0, 0.5, 0.0])).tolist()
    []
    """
    empty = np.setdiff1d(np.arange(n_clusters), labels)
    if prior is not None:
        empty = empty[np.asarray(prior)[empty] > 0]
    return empty


#: A cluster smaller than this fraction of ``n_samples / n_clusters`` is near-empty.
NEAR_EMPTY = 0.01


def small_clusters(labels, n_clusters, prior=None) -> tuple[np.ndarray, np.ndarray]:
    """``(empty, near_empty)`` cluster indices of a labelling: no sample, or fewer than
    :data:`NEAR_EMPTY` ``* n / K`` samples (clusters of zero ``prior`` are meant to be
    empty and are left out).

    Examples
    --------
    >>> labels = np.r_[np.zeros(500, int), np.ones(499, int), [2]]
    >>> [a.tolist() for a in small_clusters(labels, 4)]
    [[3], [2]]
    """
    labels = np.asarray(labels)
    sizes = np.bincount(labels, minlength=n_clusters)
    meant = np.zeros(n_clusters, bool) if prior is None else np.asarray(prior) <= 0
    near = NEAR_EMPTY * len(labels) / n_clusters
    near_empty = np.flatnonzero((sizes > 0) & (sizes < near) & ~meant)
    return empty_clusters(labels, n_clusters, prior), near_empty


class Callback:
    """Hooks around the runs, epochs and batches of a fit; each does nothing by default.

    ``on_run_begin(run, first_epoch)`` (``first_epoch`` > 0 when resumed),
    ``on_epoch_begin(run, epoch)``, ``on_batch_end(run)``,
    ``on_epoch_end(state: EpochEnd)`` (after a completed, finite epoch) and
    ``on_run_end(result: RunResult, finished: list[Best])`` (every completed restart so far,
    this one included; :class:`skcce._engine._select.Best`).
    """

    def on_run_begin(self, run, first_epoch):
        pass

    def on_epoch_begin(self, run, epoch):
        pass

    def on_batch_end(self, run):
        pass

    def on_epoch_end(self, state: EpochEnd):
        pass

    def on_run_end(self, result: RunResult, finished: list):
        pass


class ProgressBar(Callback):
    """A tqdm bar per restart, advanced per mini-batch (the estimator's ``verbose > 0``)."""

    def __init__(self, n_init, max_epochs, n_batches):
        self.n_init, self.max_epochs, self.n_batches = n_init, max_epochs, n_batches
        self.bar = None

    def on_run_begin(self, run, first_epoch):
        from tqdm.auto import tqdm

        self.on_run_end(None, None)
        desc = f"fit {run + 1}/{self.n_init}" if self.n_init > 1 else "fit"
        total = (self.max_epochs - first_epoch) * self.n_batches
        self.bar = tqdm(total=total, desc=desc, leave=False)

    def on_batch_end(self, run):
        if self.bar is not None:
            self.bar.update(1)

    def on_run_end(self, result, best):
        if self.bar is not None:
            self.bar.close()
            self.bar = None


class SklearnCallbacks(Callback):
    """scikit-learn's callback API (>= 1.9) on this protocol: ``root`` is the estimator's
    fit task (begun and ended by ``fit``), with one sub-task per epoch."""

    def __init__(self, estimator, n_tasks):
        self.estimator = estimator
        self.root = estimator._init_callback_context(max_subtasks=n_tasks)
        self.sub = None

    def on_epoch_begin(self, run, epoch):
        self.sub = self.root.subcontext(task_name="epoch")
        self.sub.call_on_fit_task_begin(estimator=self.estimator)

    def on_epoch_end(self, state):
        self.sub.call_on_fit_task_end(estimator=self.estimator)
