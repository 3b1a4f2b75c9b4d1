r"""The linear head's weight decay in proportion to each cluster's share of the data.

With ``weight_decay="auto"`` a linear head's row ``k`` (the weights and bias of cluster
``k``) decays by

.. math::  \text{decay}_k = \text{weight\_decay} \cdot K\, m_k ,

where ``m`` is the running marginal of the pseudo-labels that the fairness term already keeps
(:class:`skcce._engine._marginal.RunningMarginal`, before the batch). On balanced clusters
``K m_k = 1`` and every row decays by ``weight_decay``, the value of record 007 and 017; a
cluster that holds a tenth of its balanced share is pulled towards zero ten times less, so
that its row keeps the scale that its fewer rows' gradients can build (docs/design, record
027). The decay is added to the gradients before the optimiser's step, as
``torch.optim.SGD`` and ``torch.optim.Adam`` add their own ``weight_decay * p``; their own
decay is then 0. An explicit ``weight_decay`` is torch's: the same for every row.
"""

from __future__ import annotations

import torch


def share_scale(decay, marginal, like):
    """The per-row decays ``decay * K * m`` as a tensor like ``like``'s dtype and device.

    Parameters
    ----------
    decay : float
        The decay of a row whose cluster holds ``1 / K`` of the data.
    marginal : ndarray of shape (K,) or (R, K)
        The running marginal(s) of the pseudo-labels.
    like : torch.Tensor

    Examples
    --------
    >>> import numpy as np
    >>> share_scale(0.1, np.array([0.5, 0.25, 0.25]), torch.zeros(1, dtype=torch.float64))
    tensor([0.1500, 0.0750, 0.0750], dtype=torch.float64)
    """
    m = torch.as_tensor(marginal, dtype=torch.float64)
    scale = decay * m.shape[-1] * m
    return scale.to(device=like.device, dtype=like.dtype)


def add_share_decay(weight, bias, grad_w, grad_b, decay, marginal):
    """Add each head row's decay (module notes) to the gradients ``grad_w`` (..., K, D)
    and ``grad_b`` (..., K) of ``weight`` and ``bias``, in place.

    Examples
    --------
    >>> import numpy as np
    >>> w, b = torch.ones(2, 3), torch.ones(2)
    >>> gw, gb = torch.zeros(2, 3), torch.zeros(2)
    >>> add_share_decay(w, b, gw, gb, 0.1, np.array([0.75, 0.25]))
    >>> gw[:, 0], gb
    (tensor([0.1500, 0.0500]), tensor([0.1500, 0.0500]))
    """
    scale = share_scale(decay, marginal, weight)
    with torch.no_grad():
        grad_w.add_(weight * scale.unsqueeze(-1))
        grad_b.add_(bias * scale)
