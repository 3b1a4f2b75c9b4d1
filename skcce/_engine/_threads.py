"""Scoped CPU thread counts for the estimator's own work (issue 14, item 3).

:func:`thread_limit` sets torch's intra-op threads and the BLAS/OpenMP pools that threadpoolctl
sees (NumPy's BLAS) for the duration of a ``with`` block and restores both afterwards, also when
the block raises. The estimator chooses the count (see ``CCEClustering``'s ``n_threads``); this
module only applies it. :func:`wide_threads` declares the count of the work that shares its
threads well (the KMeans start, scikit-learn's own Lloyd iterations), and :func:`wide` runs a
block with it inside a narrower limit.
"""

from __future__ import annotations

from contextlib import contextmanager
from contextvars import ContextVar
from functools import lru_cache

import torch


@lru_cache(maxsize=1)
def _controller():
    """One threadpoolctl controller for the process, as scikit-learn keeps one: building it
    scans the loaded libraries (3 ms with torch and scikit-learn loaded, paid by every ``fit``
    and every candidate of ``n_clusters="auto"`` before). The libraries that hold the pools
    (torch's, NumPy's and scikit-learn's) are loaded when skcce is imported."""
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController()


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
    old = torch.get_num_threads()
    try:
        with _controller().limit(limits=int(n_threads)):
            torch.set_num_threads(int(n_threads))  # after the pools: torch's own wins
            yield
    finally:
        torch.set_num_threads(old)


_WIDE = ContextVar("skcce_wide_threads", default=None)

#: Multiply-adds of one pass of a :func:`wide` block's work below which it stays on the
#: threads in force: waking more threads then costs more than they save (BLAS libraries keep
#: small products on one thread for the same reason).
MIN_WIDE_WORK = 10**7


@contextmanager
def wide_threads(n_threads):
    """Declare ``n_threads`` as the count :func:`wide` blocks run with, for this block.

    Parameters
    ----------
    n_threads : int or None
        Thread count; None: :func:`wide` blocks change nothing.
    """
    token = _WIDE.set(None if n_threads is None else int(n_threads))
    try:
        yield
    finally:
        _WIDE.reset(token)


@contextmanager
def wide(work=None):
    """Run the block with the count :func:`wide_threads` declared (nothing declared, the
    count already in force, or ``work`` below :data:`MIN_WIDE_WORK`: the block runs as it is).

    Parameters
    ----------
    work : int or None
        Multiply-adds of one pass of the block's work (None: any amount).

    Examples
    --------
    >>> import torch
    >>> with thread_limit(1), wide_threads(2):
    ...     with wide():
    ...         inside = torch.get_num_threads()
    ...     after = torch.get_num_threads()
    >>> inside, after
    (2, 1)
    >>> with thread_limit(1), wide_threads(2), wide(work=MIN_WIDE_WORK - 1):
    ...     torch.get_num_threads()
    1
    """
    n_threads = _WIDE.get()
    small = work is not None and work < MIN_WIDE_WORK
    if small or n_threads is None or n_threads == torch.get_num_threads():
        yield
        return
    with thread_limit(n_threads):
        yield
