"""Optimiser parameter groups: head and backbone at two learning rates."""

from __future__ import annotations

from torch import nn

__all__ = ["param_groups"]


def param_groups(model: nn.Module, lr_head: float, lr_backbone: float) -> list[dict]:
    """Split a model's parameters into a head group and a backbone group.

    Models exposing ``head_parameters()`` and ``backbone_parameters()``
    (:class:`~skcce.models.ResNet18`, :class:`~skcce.models.VGG4`) get two groups; any
    other model (e.g. the linear head) is all head: one group at ``lr_head``.

    Parameters
    ----------
    model : torch.nn.Module
    lr_head : float
        Learning rate of the classifier.
    lr_backbone : float
        Learning rate of the feature extractor.

    Returns
    -------
    groups : list of dict
        Parameter groups for a ``torch.optim`` optimiser (each with ``"params"`` and
        ``"lr"``).

    Examples
    --------
    >>> import torch
    >>> [g["lr"] for g in param_groups(torch.nn.Linear(3, 2), 0.1, 0.01)]
    [0.1]
    """
    if hasattr(model, "head_parameters") and hasattr(model, "backbone_parameters"):
        return [
            {"params": list(model.head_parameters()), "lr": lr_head},
            {"params": list(model.backbone_parameters()), "lr": lr_backbone},
        ]
    return [{"params": list(model.parameters()), "lr": lr_head}]
