"""The numbering of a fitted model's clusters: by first appearance in the training data.

Two restarts, or two fits on the same data in another container, can find the same partition
with its clusters numbered differently (which output of the network holds which cluster is
arbitrary). Numbering the clusters by the first training row that falls in each makes equal
partitions give equal labels, as scikit-learn's clustering checks expect of a seeded fit.
"""

from __future__ import annotations

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
