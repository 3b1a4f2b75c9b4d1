"""The numbering of a fitted model's clusters: by first appearance in the training data.

Two restarts, or two fits on the same data in another container, can find the same partition
with its clusters numbered differently (which output of the network holds which cluster is
arbitrary). Numbering the clusters by the first training row that falls in each makes equal
partitions give equal labels, as scikit-learn's clustering checks expect of a seeded fit.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import torch


def first_appearance(labels: np.ndarray, k: int) -> np.ndarray:
    """``order`` such that cluster ``order[j]`` becomes cluster ``j``: the clusters in the order
    of their first row in ``labels``, then the empty ones in their own order.

    Examples
    --------
    >>> first_appearance(np.array([2, 2, 0, 2]), 4).tolist()
    [2, 0, 1, 3]
    """
    _, first = np.unique(labels, return_index=True)
    seen = np.unique(labels)[np.argsort(first)]
    empty = np.setdiff1d(np.arange(k), seen)
    return np.concatenate([seen, empty]).astype(np.intp)


def output_layer(module: torch.nn.Module, k: int) -> torch.nn.Linear | None:
    """The last ``nn.Linear`` of ``module`` with ``k`` outputs (the layer whose rows are the
    clusters), or None."""
    last = None
    for sub in module.modules():
        if isinstance(sub, torch.nn.Linear) and sub.out_features == k:
            last = sub
    return last


def renumber_(module: torch.nn.Module, order: np.ndarray) -> bool:
    """Permute the output rows of ``module`` in place so that output ``j`` is the former
    output ``order[j]``. Returns False (and changes nothing) when the module has no
    :func:`output_layer`."""
    layer = output_layer(module, len(order))
    if layer is None:
        return False
    index = torch.as_tensor(order, device=layer.weight.device)
    with torch.no_grad():
        layer.weight.copy_(layer.weight[index])
        if layer.bias is not None:
            layer.bias.copy_(layer.bias[index])
    return True


def renumbered(best, k: int, keep: bool = False):
    """The kept restart ``best`` (a :class:`skcce._engine._select.Best`) with its ``k``
    clusters numbered by :func:`first_appearance`: its network's outputs, labels, sizes,
    prior and the history's cluster sizes follow. ``keep`` (the user's centroids), or a
    network without an :func:`output_layer`, leaves it as it is. No (N, K) array is made."""
    order = first_appearance(best.labels, k)
    if keep or not renumber_(best.module, order):
        return best
    for entry in best.history:
        if len(entry.get("cluster_sizes", ())) == k:
            entry["cluster_sizes"] = [entry["cluster_sizes"][j] for j in order]
    return replace(
        best,
        labels=np.argsort(order)[best.labels],
        sizes=None if best.sizes is None else np.asarray(best.sizes)[order],
        prior=None if best.prior is None else np.asarray(best.prior)[order],
    )
