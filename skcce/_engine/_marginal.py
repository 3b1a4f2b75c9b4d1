r"""The marginal that a batch's fairness term is taken on: its own rows, or a window of rows.

The supplement's fairness term ``KL(u || ybar)`` is taken on the mean pseudo-label ``ybar`` of
one mini-batch, so that every batch must give every cluster some mass. With ``K`` clusters
and a batch of ``N`` rows that stops describing a balanced partition once a batch is likely
to miss clusters: a batch of 4 rows per cluster misses about 2 % of them (``K exp(-4)``), and
the exact solve then spreads their mass thinly over many rows, which at K = 1000 costs
seconds a batch instead of milliseconds (docs/design, record 020).

The term is therefore taken on the marginal of a **window** of
``W = max(N, window_rows(K))`` rows: the batch's rows plus ``W - N`` rows' worth of the
running marginal ``m`` of the batches before it,

.. math::  \bar y_W = \frac{s + (W - N)\, m}{W}, \qquad s = \sum_{i \in \text{batch}} y_i ,

where :func:`window_rows` is ``ceil(K H_K)`` (``H_K`` the K-th harmonic number), the expected
number of rows it takes to see every one of ``K`` equally likely clusters (the coupon
collector). After the batch is solved ``m`` becomes ``ybar_W``: an exponential average of the
batches' marginals with weight ``N / W`` on the newest. Before the first batch ``m`` is the
prior in force. When a batch holds at least ``window_rows(K)`` rows (K up to 54 with
250-row batches, 25 with 100-row ones) the window is the batch and the term is the
supplement's. Each
batch's pseudo-labels are still the exact optimum of the objective in force: the carried
mass ``(W - N) m`` enters the solvers as a constant (``carry`` of
:func:`skcce.solvers.solve_pseudo_labels`).
"""

from __future__ import annotations

import math

import numpy as np


def window_rows(k: int) -> int:
    """``ceil(K H_K)``: the rows in which all ``K`` equally likely clusters are expected to
    appear (the coupon collector's expected draws).

    Examples
    --------
    >>> window_rows(10), window_rows(100), window_rows(1000)
    (30, 519, 7486)
    """
    k = int(k)
    return math.ceil(k * sum(1.0 / j for j in range(1, k + 1)))


class RunningMarginal:
    """The running marginal ``m`` of ``n_runs`` restarts (one row each) and the carry it
    gives a batch (module notes).

    Parameters
    ----------
    start : ndarray of shape (n_runs, K)
        The marginal before the first batch (the priors in force).

    Examples
    --------
    >>> m = RunningMarginal(np.full((1, 100), 0.01))
    >>> m.carry(400)[0, :2].tolist()  # 519 - 400 rows of the prior
    [1.19, 1.19]
    >>> m.carry(600) is None  # a batch of at least 519 rows is its own window
    True
    """

    def __init__(self, start):
        self.value = np.array(start, dtype=np.float64, copy=True)
        self.window = window_rows(self.value.shape[1])

    def carry(self, n_rows):
        """The mass ``(W - N) m`` (n_runs, K) carried into a batch of ``n_rows`` rows, or
        None when the batch is its own window."""
        extra = self.window - int(n_rows)
        if extra <= 0:
            return None
        return extra * self.value

    def see(self, sums, n_rows):
        """After a batch of ``n_rows`` rows: ``m`` becomes its window's marginal, from the
        pseudo-labels' column sums ``sums`` (n_runs, K)."""
        sums = np.asarray(sums, dtype=np.float64)
        extra = max(self.window - int(n_rows), 0)
        self.value = (sums + extra * self.value) / (n_rows + extra)
