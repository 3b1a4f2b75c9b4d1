"""The class prior ``u`` of a fit's fairness terms, per restart, as training goes.

The fairness terms :math:`KL(u\\|\\bar y)` (pseudo-labels) and :math:`KL(u\\|\\bar\\sigma)`
(network) pull the cluster sizes towards the prior ``u``. Four kinds of prior
(:class:`PriorTracker`):

``"uniform"`` (``prior=None``)
    :math:`u = 1/K`, fixed: the paper's balanced clusters.
``"match"`` (a user's array)
    The user's proportions are the *sizes* of the clusters, not of given cluster indices
    (which cluster ends up holding which class is arbitrary): the values are assigned to
    the clusters by rank of their estimated mass (the largest value to the cluster that
    holds the most mass, and so on), so ``u`` is always a permutation of the user's array.
``"estimate"`` (``prior="estimate"``)
    The proportions are estimated during training: the mass of each cluster, an exponential
    moving average of the batches' mean pseudo-label :math:`\\bar y` whose memory is one
    epoch (a batch of ``b`` rows of ``n`` weighs ``b / n``), is the prior, raised to at least
    :data:`FLOOR` and renormalised so that no cluster can vanish. This is the EM update of
    a mixture's proportions (the mean responsibility), made online.
``"auto"`` (``prior="auto"``, the default)
    Restarts alternate between ``"uniform"`` (even restarts, so a single restart is the
    paper's) and ``"estimate"`` (odd restarts: with ``init="auto"`` those start from the
    KMeans head, whose clusters already carry the data's proportions); the restarts are
    compared by :mod:`skcce._engine._select`.

**The shrink guard.** Under an estimated prior a small cluster can drain away: the head is
trained on its own pseudo-labels, a run of gradient steps on a mean over rows moves a
boundary towards the cluster whose rows weigh less in that mean, the next pseudo-labels
follow, and the estimated prior follows them in turn (on imbalanced blobs the 50-row cluster
shrank 60, 47, 31, 3, 0 rows an epoch from KMeans's own partition; the fairness terms hold
only its soft mass). The same freedom is what lets the self-labeling improve on its KMeans
start: on balanced embeddings the better partitions are reached by clusters losing more than
half of their rows. So the restarts whose prior is estimated multiply the gradient of the
network loss at the rows of a shrunken cluster (:meth:`PriorTracker.shrink_guard`; as if those
rows were repeated in the batch): with ``h_c`` a moving
average of cluster ``c``'s share of the pseudo-labels' hard assignments (memory one epoch,
as the mass) and ``p_c`` the largest value it has had, a row assigned to ``c`` weighs
``max(1, GUARD_FRACTION * p_c / h_c) ** GUARD_POWER``: 1 until the cluster has lost three
quarters of its largest share, then a pull that grows with the square of the shrinkage
(docs/benchmarks.md, notes of ``bench_ordinary``).

The estimated mass starts uniform and is updated after every batch from the solver's exact
pseudo-labels, unless every restart's prior is uniform (then nothing is tracked and the
solvers take their own uniform default, bit for bit the fit of ``prior=None``). The
pseudo-label solver keeps its certificate for whatever ``u`` is in force in a batch.
"""

from __future__ import annotations

import numpy as np
import torch

from skcce._engine._marginal import RunningMarginal

#: The shrink guard (:meth:`PriorTracker.shrink_guard`): a cluster's rows gain weight once its
#: share of the hard assignments falls below this fraction of the largest it has had ...
GUARD_FRACTION = 0.25
#: ... by the ratio of the two raised to this power.
GUARD_POWER = 2.0

#: The smallest entry of an estimated prior (``"estimate"``), as a fraction of the samples
#: (``0.5 / K`` when that is smaller: with few clusters 1 % is no guard).
FLOOR = 0.01


class PriorTracker:
    """The prior in force for ``n_runs`` restarts trained together (or one restart).

    Parameters
    ----------
    kind : {"uniform", "match", "estimate", "auto"}
        The fit's prior; ``"auto"`` gives each restart its own (:func:`restart_kind`).
    n_clusters : int
    runs : int or sequence of int
        The restarts (their indices; an int ``R``: restarts ``0 .. R - 1``).
    values : ndarray of shape (n_clusters,), optional
        The user's proportions (``"match"``).
    n_samples : int, default=1
        Rows of an epoch: a batch of ``b`` rows moves the mass estimate by ``b / n_samples``.

    Examples
    --------
    >>> t = PriorTracker("match", 3, [0], values=np.array([0.2, 0.5, 0.3]), n_samples=10)
    >>> t.update(np.array([[0.1, 0.3, 0.6]]), rows=10)  # cluster 2 holds the most mass
    >>> t.value[0].tolist()
    [0.2, 0.3, 0.5]
    """

    def __init__(self, kind, n_clusters, runs, values=None, n_samples=1):
        runs = range(runs) if isinstance(runs, int) else list(runs)
        self.k, self.n = int(n_clusters), max(int(n_samples), 1)
        self.kinds = np.array([restart_kind(kind, run) for run in runs])
        self.mass = np.full((len(self.kinds), self.k), 1.0 / self.k)
        self.hard = self.peak = None  # the shrink guard's shares (after the first batch)
        self.sorted = None if values is None else np.sort(np.asarray(values, np.float64))
        self.value = self._from_mass()
        # the fairness term's running marginal (skcce._engine._marginal), from the priors
        self.marginal = RunningMarginal(self.value)

    def __setstate__(self, state):
        self.__dict__.update(state)
        if "marginal" not in state:  # a tracker pickled before the running marginal
            self.marginal = RunningMarginal(self.value)

    @property
    def varies(self) -> bool:
        """Whether the prior of some restart can change during training (not uniform)."""
        return bool((self.kinds != "uniform").any())

    def _from_mass(self, mass=None, kinds=None):
        mass = self.mass if mass is None else mass
        kinds = self.kinds if kinds is None else kinds
        value = np.full_like(mass, 1.0 / self.k)
        match, estimate = kinds == "match", kinds == "estimate"
        if match.any():
            ranks = np.argsort(np.argsort(mass[match], axis=1, kind="stable"), axis=1)
            value[match] = self.sorted[ranks]
        if estimate.any():
            floored = np.maximum(mass[estimate], min(FLOOR, 0.5 / self.k))
            value[estimate] = floored / floored.sum(axis=1, keepdims=True)
        return value

    def update(self, ybar, rows):
        """Move the mass estimates towards the batches' mean pseudo-labels ``ybar``
        (n_runs, K), each from ``rows`` rows; recompute :attr:`value`."""
        rate = min(1.0, rows / self.n)
        self.mass = (1.0 - rate) * self.mass + rate * np.asarray(ybar, np.float64)
        self.value = self._from_mass()

    def see(self, labels):
        """After a step: the running marginal of each restart takes in its batch's
        pseudo-labels (``labels``: one (B, K) tensor per restart, same B), and so does its
        mass estimate when its prior varies."""
        rows = labels[0].shape[0]
        sums = torch.stack([y.detach().sum(dim=0, dtype=torch.float64) for y in labels])
        sums = sums.cpu().numpy()  # (R, K): one copy
        self.marginal.see(sums, rows)
        if self.varies:
            self.update(sums / rows, rows)

    def shrink_guard(self, labels):
        """The shrink guard (module notes) for a batch whose pseudo-labels are solved: move
        each cluster's moving share of hard assignments towards the batch's (memory one
        epoch) and its peak, and return the factors of the rows' gradients, (R, B)
        float64, or None when no prior is estimated (then nothing is tracked).

        A row assigned to cluster ``c`` (its largest pseudo-label) in a restart whose prior
        is estimated gets ``max(1, GUARD_FRACTION * p_c / h_c) ** GUARD_POWER``, with
        ``h_c`` the cluster's share including this batch and ``p_c`` its peak; every other
        row gets 1. A step calls it once, before its optimiser step.

        Parameters
        ----------
        labels : ndarray or torch.Tensor of shape (R, B, K)
            The batch's pseudo-labels, one problem per restart.
        """
        est = self.kinds == "estimate"
        if not est.any():
            return None
        if isinstance(labels, torch.Tensor):
            labels = labels.detach().to("cpu", torch.float64).numpy()
        labels = np.asarray(labels)
        assigned = labels.argmax(axis=2)  # (R, B)
        shares = hard_shares(assigned, labels.shape[2])
        if self.hard is None:  # the first batch: the start
            self.hard, self.peak = shares, shares
        else:
            rate = min(1.0, labels.shape[1] / self.n)
            self.hard = (1.0 - rate) * self.hard + rate * shares
            self.peak = np.maximum(self.peak, self.hard)
        per_cluster = np.maximum(1.0, GUARD_FRACTION * self.peak / np.maximum(self.hard, 1e-12))
        per_cluster = np.where(est[:, None], per_cluster**GUARD_POWER, 1.0)
        return np.take_along_axis(per_cluster, assigned, axis=1)

    def tensors(self, device):
        """The priors in force, (R, K): float64 on the host (the solver's) and float32 on
        ``device`` (the network loss's); ``(None, None)`` when every prior is uniform (the
        solvers' and losses' own default, bit for bit)."""
        if not self.varies:
            return None, None
        prior = torch.from_numpy(self.value.copy())
        return prior, prior.to(device=device, dtype=torch.float32)

    def prior_of(self, i, mass):
        """The prior of the ``i``-th restart that its masses ``mass`` (K,) give, or None
        when that restart's prior is uniform."""
        if self.kinds[i] == "uniform":
            return None
        mass = np.asarray(mass, np.float64)[: self.k]  # a row of state(): the masses first
        return self._from_mass(mass[None, :], self.kinds[i : i + 1])[0]

    def state(self):
        """For a checkpoint, along the second axis: the estimated masses, the shrink guard's
        shares and peaks once it has seen a batch, and the fairness term's running marginal
        (R, 2K or 4K)."""
        parts = [self.mass] if self.hard is None else [self.mass, self.hard, self.peak]
        return np.concatenate([*parts, self.marginal.value], axis=1)

    def restore(self, state):
        """Continue from :meth:`state` (a checkpoint's masses; the guard's shares and the
        running marginal where it holds them: R x K or 3K values are a state without the
        marginal, which then keeps its own)."""
        state = np.array(state, dtype=np.float64).reshape(len(self.kinds), -1)
        k = self.k
        if state.shape[1] in (2 * k, 4 * k):
            self.marginal.value = state[:, -k:].copy()
            state = state[:, :-k]
        self.mass = state[:, :k].copy()
        if state.shape[1] == 3 * k:
            self.hard, self.peak = state[:, k : 2 * k].copy(), state[:, 2 * k :].copy()
        self.value = self._from_mass()

    def keep(self, idx):
        """Keep the restarts at positions ``idx`` only (the others have stopped)."""
        self.kinds, self.mass, self.value = self.kinds[idx], self.mass[idx], self.value[idx]
        if self.hard is not None:
            self.hard, self.peak = self.hard[idx], self.peak[idx]
        self.marginal.value = self.marginal.value[idx]


def restart_kind(kind: str, run: int) -> str:
    """The prior of restart ``run`` for a fit's ``kind`` (``"auto"`` alternates).

    Examples
    --------
    >>> [restart_kind("auto", r) for r in range(3)], restart_kind("match", 1)
    (['uniform', 'estimate', 'uniform'], 'match')
    """
    if kind == "auto":  # even restarts uniform (a single restart too), odd ones estimated
        return "uniform" if run % 2 == 0 else "estimate"
    return kind


def hard_shares(assigned, k):
    """Each batch's shares of hard assignments: the cluster indices ``assigned`` (R, B)
    of ``k`` clusters -> (R, k), the fraction of the B rows in each cluster.

    Examples
    --------
    >>> hard_shares(np.array([[0, 0, 1, 0]]), 2).tolist()
    [[0.75, 0.25]]
    """
    n_runs, b = assigned.shape
    flat = (assigned + k * np.arange(n_runs)[:, None]).ravel()  # run r's cluster c: r * K + c
    return np.bincount(flat, minlength=n_runs * k).reshape(n_runs, k) / b
