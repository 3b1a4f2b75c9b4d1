"""How many training rows changed cluster from one epoch to the next.

Every step already computes each batch row's cluster (the argmax of its logits, before the
step's update) for the epoch's cluster sizes. :class:`LabelChanges` keeps those labels, one
int32 per row and restart on the training device, and at the end of an epoch counts the
rows whose label differs from the previous epoch's: the epoch's ``"changed"`` entry of
``history_``, which :func:`skcce._engine._epoch_stop.stop_now` reads. Under data parallelism
each rank records the rows of its shards and the end of the epoch sums the ranks' labels
(each row was seen by one rank), so every rank holds every row's label.
"""

from __future__ import annotations

import numpy as np
import torch


class LabelChanges:
    """The labels of the current and the previous epoch of ``n_runs`` restarts over ``n``
    rows.

    Examples
    --------
    >>> changes = LabelChanges(1, 4, torch.device("cpu"))
    >>> changes.record(np.array([[0, 1, 2, 3]]), torch.tensor([[1, 1, 0, 0]]))
    >>> changes.end_epoch() is None  # no previous epoch
    True
    >>> changes.record(np.array([[0, 1]]), torch.tensor([[1, 0]]))
    >>> changes.record(np.array([[2, 3]]), torch.tensor([[0, 0]]))
    >>> changes.end_epoch().tolist()
    [1]
    >>> changes.last(0).tolist()
    [1, 0, 0, 0]
    """

    def __init__(self, n_runs: int, n: int, device: torch.device):
        # labels + 1; 0 marks a row not seen (by this rank) in the epoch
        self.current = torch.zeros((n_runs, n), dtype=torch.int32, device=device)
        self.previous = None
        self._runs = torch.arange(n_runs, device=device)[:, None]

    def restore(self, run: int, labels: np.ndarray | None) -> None:
        """Restart ``run``'s labels of the last completed epoch (a resumed fit's), or None."""
        if labels is None:
            return
        if self.previous is None:
            self.previous = torch.zeros_like(self.current)
        self.previous[run] = torch.as_tensor(np.asarray(labels) + 1, dtype=torch.int32)

    def record(self, rows: np.ndarray, pred: torch.Tensor) -> None:
        """The labels ``pred`` (R, b) of the rows ``rows`` (R, b) of each restart."""
        index = torch.from_numpy(np.ascontiguousarray(rows)).to(self.current.device)
        self.current[self._runs, index] = pred.to(torch.int32) + 1

    def end_epoch(self, ctx=None) -> np.ndarray | None:
        """Rows per restart whose label differs from the previous epoch's (None after the
        first epoch); starts the next epoch. ``ctx``: the data-parallel context (each rank
        then calls this)."""
        if ctx is not None:
            ctx.sum_(self.current)
        changed = None
        if self.previous is not None:
            changed = (self.current != self.previous).sum(dim=1).cpu().numpy()
        self.previous, self.current = self.current, self.previous
        if self.current is None:
            self.current = torch.empty_like(self.previous)
        self.current.zero_()
        return changed

    def keep(self, idx) -> None:
        """Keep the restarts at positions ``idx`` only (the others have stopped)."""
        index = torch.as_tensor(idx, dtype=torch.long, device=self.current.device)
        self.current = self.current.index_select(0, index)
        if self.previous is not None:
            self.previous = self.previous.index_select(0, index)
        self._runs = torch.arange(len(idx), device=self.current.device)[:, None]

    def last(self, run: int) -> np.ndarray | None:
        """Restart ``run``'s labels of the last completed epoch (int32 of shape (n,)), or
        None before the first."""
        if self.previous is None:
            return None
        return (self.previous[run] - 1).cpu().numpy()
