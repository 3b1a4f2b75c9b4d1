"""The class prior ``u`` of a fit's fairness terms, per restart, as training goes.

The fairness terms :math:`KL(u\\|\\bar y)` (pseudo-labels) and :math:`KL(u\\|\\bar\\sigma)`
(network) pull the cluster sizes towards the prior ``u``. Three kinds of prior
(:class:`PriorTracker`):

``"uniform"`` (``prior=None``)
    :math:`u = 1/K`, fixed: the paper's balanced clusters.
``"match"`` (a user's array)
    The user's proportions are the *sizes* of the clusters, not of given cluster indices
    (which cluster ends up holding which class is arbitrary): the values are assigned to
    the clusters by rank of their estimated mass (the largest value to the cluster that
    holds the most mass, and so on), so ``u`` is always a permutation of the user's array.
``"auto"`` (``prior="auto"``)
    The proportions are estimated during training: the mass of each cluster, an exponential
    moving average of the batches' mean pseudo-label :math:`\\bar y` whose memory is one
    epoch (a batch of ``b`` rows of ``n`` weighs ``b / n``), is the prior, raised to at least
    :data:`FLOOR` and renormalised so that no cluster can vanish. This is the EM update of
    a mixture's proportions (the mean responsibility), made online.

The estimated mass starts uniform and is updated after every batch from the solver's exact
pseudo-labels (in ``"uniform"`` mode too, where it only feeds the fitted ``prior_``). The
pseudo-label solver keeps its certificate for whatever ``u`` is in force in a batch.
"""

from __future__ import annotations

import numpy as np

#: The smallest entry of an estimated prior (``prior="auto"``), as a fraction of the samples.
FLOOR = 0.01


class PriorTracker:
    """The prior in force for ``n_runs`` restarts trained together (or one restart).

    Parameters
    ----------
    kind : {"uniform", "match", "auto"}
    n_clusters : int
    n_runs : int
    values : ndarray of shape (n_clusters,), optional
        The user's proportions (``"match"``).
    n_samples : int, default=1
        Rows of an epoch: a batch of ``b`` rows moves the mass estimate by ``b / n_samples``.

    Examples
    --------
    >>> t = PriorTracker("match", 3, 1, values=np.array([0.2, 0.5, 0.3]), n_samples=10)
    >>> t.update(np.array([[0.1, 0.3, 0.6]]), rows=10)  # cluster 2 holds the most mass
    >>> t.value[0].tolist()
    [0.2, 0.3, 0.5]
    """

    def __init__(self, kind, n_clusters, n_runs, values=None, n_samples=1):
        self.kind, self.k, self.n = kind, int(n_clusters), max(int(n_samples), 1)
        self.mass = np.full((n_runs, self.k), 1.0 / self.k)
        self.sorted = None if values is None else np.sort(np.asarray(values, np.float64))
        self.value = self._from_mass()

    @property
    def varies(self) -> bool:
        """Whether the prior can change during training (anything but uniform)."""
        return self.kind != "uniform"

    def _from_mass(self):
        mass = self.mass
        if self.kind == "uniform":
            return np.full_like(mass, 1.0 / self.k)
        if self.kind == "match":
            ranks = np.argsort(np.argsort(mass, axis=1, kind="stable"), axis=1, kind="stable")
            return self.sorted[ranks]
        floor = min(FLOOR, 0.5 / self.k)
        value = np.maximum(mass, floor)
        return value / value.sum(axis=1, keepdims=True)

    def update(self, ybar, rows):
        """Move the mass estimates towards the batches' mean pseudo-labels ``ybar``
        (n_runs, K), each from ``rows`` rows; recompute :attr:`value`."""
        rate = min(1.0, rows / self.n)
        self.mass = (1.0 - rate) * self.mass + rate * np.asarray(ybar, np.float64)
        self.value = self._from_mass()

    def prior_of(self, mass):
        """The prior that the masses ``mass`` (K,) give (of one restart)."""
        saved = self.mass
        self.mass = np.asarray(mass, np.float64)[None, :]
        try:
            return self._from_mass()[0]
        finally:
            self.mass = saved

    def state(self):
        """The estimated masses (for a checkpoint)."""
        return self.mass.copy()

    def restore(self, mass):
        """Continue from :meth:`state`'s masses."""
        self.mass = np.array(mass, dtype=np.float64).reshape(self.mass.shape)
        self.value = self._from_mass()
