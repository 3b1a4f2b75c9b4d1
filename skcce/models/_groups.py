"""Optimiser parameter groups: head and backbone at two learning rates."""

from __future__ import annotations

from torch import nn

__all__ = ["HeadBackbone", "param_groups"]


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


class HeadBackbone:
    """Mixin of a network made of a feature extractor and a linear ``head``.

    The extractor is the attribute named by ``_backbone_attr``; the mixin gives its
    parameters and the head's apart, and the two optimiser groups of :func:`param_groups`.

    Examples
    --------
    >>> from skcce.models import VGG4
    >>> net = VGG4((3, 32, 32), 5)
    >>> len(list(net.backbone_parameters())), len(list(net.head_parameters()))
    (12, 2)
    >>> [g["lr"] for g in net.param_groups(5e-2, 1e-5)]
    [0.05, 1e-05]
    """

    _backbone_attr = "backbone"

    def backbone_parameters(self):
        """Parameters of the feature extractor (iterator of torch.nn.Parameter)."""
        return getattr(self, self._backbone_attr).parameters()

    def head_parameters(self):
        """Parameters of the linear head (iterator of torch.nn.Parameter)."""
        return self.head.parameters()

    def param_groups(self, lr_head: float, lr_backbone: float) -> list[dict]:
        """Optimiser groups with separate learning rates (supplement Table 4): see
        :func:`param_groups`."""
        return param_groups(self, lr_head, lr_backbone)
