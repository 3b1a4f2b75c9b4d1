"""Scoped CPU thread counts for the estimator's own work (issue 14, item 3).

:func:`thread_limit` sets torch's intra-op threads and the BLAS/OpenMP pools that threadpoolctl
sees (NumPy's BLAS) for the duration of a ``with`` block and restores both afterwards, also when
the block raises. The estimator chooses the count (see ``CCEClustering``'s ``n_threads``); this
module only applies it.
"""

from __future__ import annotations

from contextlib import contextmanager

import torch


@contextmanager
def thread_limit(n_threads):
    """Run the block with ``n_threads`` CPU threads (torch intra-op and BLAS pools).

    Parameters
    ----------
    n_threads : int or None
        Thread count; None leaves every pool as it is.

    Examples
    --------
    >>> import torch
    >>> before = torch.get_num_threads()
    >>> with thread_limit(1):
    ...     torch.get_num_threads()
    1
    >>> torch.get_num_threads() == before
    True
    """
    if n_threads is None:
        yield
        return
    from threadpoolctl import threadpool_limits

    old = torch.get_num_threads()
    try:
        with threadpool_limits(limits=int(n_threads)):
            torch.set_num_threads(int(n_threads))  # after the pools: torch's own wins
            yield
    finally:
        torch.set_num_threads(old)
