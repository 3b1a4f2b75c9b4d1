"""ResNet-18 (timm) with a separate linear clustering head (supplement Table 4)."""

from __future__ import annotations

import os
from collections.abc import Mapping

import torch
from torch import nn

from skcce._lazy import import_extra

from ._groups import HeadBackbone
from ._init import forked_rng, init_linear_

__all__ = ["ResNet18", "load_backbone_weights"]

_PREFIXES = ("module.", "backbone.", "model.", "encoder.")
_HEAD_PREFIXES = ("fc.", "head.", "classifier.")


def _import_timm():
    return import_extra(
        "timm",
        "The 'resnet18' model needs timm and torchvision; install them with "
        "`pip install skcce[vision]`.",
    )


def _as_state_dict(weights) -> dict[str, torch.Tensor]:
    if isinstance(weights, str | os.PathLike):
        path = os.fspath(weights)
        if not os.path.isfile(path):
            raise FileNotFoundError(f"ResNet-18 weights file not found: {path!r}")
        try:
            obj = torch.load(path, map_location="cpu", weights_only=True)
        except Exception as exc:
            raise ValueError(
                f"Could not read ResNet-18 weights from {path!r} (expected a file written by "
                f"torch.save(state_dict)): {type(exc).__name__}: {exc}"
            ) from exc
    else:
        obj = weights
    # unwrap common checkpoint layouts {"state_dict": {...}} / {"model": {...}}
    for key in ("state_dict", "model", "model_state_dict"):
        if isinstance(obj, Mapping) and key in obj and isinstance(obj[key], Mapping):
            obj = obj[key]
    if not isinstance(obj, Mapping) or not all(isinstance(v, torch.Tensor) for v in obj.values()):
        raise ValueError(
            "ResNet-18 weights must be a state dict (a mapping of names to tensors) or a path "
            "to one saved with torch.save"
        )
    out = {}
    for name, value in obj.items():
        for prefix in _PREFIXES:
            if name.startswith(prefix):
                name = name[len(prefix) :]
                break
        if name.startswith(_HEAD_PREFIXES):
            continue  # the classifier head is always replaced
        out[name] = value
    return out


def load_backbone_weights(backbone: nn.Module, weights) -> nn.Module:
    """Load a ResNet-18 state dict into a head-less timm ResNet-18, ignoring its classifier.

    Keys of the classifier (``fc.*``, ``head.*``, ``classifier.*``) are dropped and one
    leading ``module.`` / ``backbone.`` / ``model.`` / ``encoder.`` prefix is stripped, so
    state dicts of timm's and torchvision's ``resnet18`` (whose names agree), and of
    :class:`ResNet18` itself, all load. Nothing else is adapted: every remaining tensor must
    match by name and shape.

    Parameters
    ----------
    backbone : torch.nn.Module
        ``timm.create_model("resnet18", num_classes=0, ...)``.
    weights : str, os.PathLike or mapping of str to torch.Tensor
        A state dict or a file written by ``torch.save(state_dict)`` (possibly wrapped as
        ``{"state_dict": ...}`` or ``{"model": ...}``).

    Returns
    -------
    backbone : torch.nn.Module
        The same module with the weights loaded.

    Raises
    ------
    FileNotFoundError
        If the path does not exist.
    ValueError
        If the file cannot be read or the tensors do not fit the backbone (missing or
        unexpected names, or shape mismatches such as a different number of input channels).

    Examples
    --------
    >>> import timm
    >>> src = timm.create_model("resnet18", pretrained=False, num_classes=7)
    >>> dst = timm.create_model("resnet18", pretrained=False, num_classes=0)
    >>> _ = load_backbone_weights(dst, src.state_dict())
    >>> bool((dst.conv1.weight == src.conv1.weight).all())
    True
    """
    state = _as_state_dict(weights)
    own = backbone.state_dict()
    missing = sorted(set(own) - set(state))
    unexpected = sorted(set(state) - set(own))
    mismatched = [
        f"{k}: file {tuple(state[k].shape)} vs model {tuple(own[k].shape)}"
        for k in own
        if k in state and tuple(state[k].shape) != tuple(own[k].shape)
    ]
    if missing or unexpected or mismatched:
        parts = []
        if missing:
            parts.append(f"missing {len(missing)} tensors (e.g. {missing[:3]})")
        if unexpected:
            parts.append(f"unexpected {len(unexpected)} tensors (e.g. {unexpected[:3]})")
        if mismatched:
            parts.append(f"{len(mismatched)} shape mismatches (e.g. {mismatched[:2]})")
        raise ValueError(
            "The weights do not fit a timm/torchvision ResNet-18 backbone: " + "; ".join(parts)
        )
    backbone.load_state_dict(state, strict=True)
    return backbone


class ResNet18(HeadBackbone, nn.Module):
    """ResNet-18 backbone (timm) followed by a linear clustering head (supplement Table 4).

    ``backbone = timm.create_model("resnet18", pretrained=False, num_classes=0,
    in_chans=C)`` yields 512 globally pooled features; ``head = nn.Linear(512, K)`` turns them
    into logits. The head is Kaiming-normal with zero bias (supplement section 4.2).
    Keeping the two apart lets the optimiser use the supplement's two learning rates
    (5e-2 for the head, 1e-5 for the backbone) via :meth:`param_groups`.

    The backbone is timm's standard ImageNet ResNet-18 (7x7 stride-2 stem and max-pool); on
    32x32 images its last feature map is 1x1. (The supplement's Table 4 used a CIFAR-style
    variant from another code base; that stem is not reproduced here.)

    Parameters
    ----------
    input_shape : tuple of int ``(C, H, W)``
        Shape of one image; ``C`` sets the stem's input channels.
    n_clusters : int
        Number of clusters ``K``.
    weights : str, os.PathLike, mapping or None, default=None
        ``None``: train from scratch. Otherwise a ResNet-18 state dict or a file saved with
        ``torch.save`` (timm or torchvision names); see :func:`load_backbone_weights`. Its
        classifier is ignored and the head is freshly initialised.
    generator : torch.Generator or None, default=None
        Source of randomness. timm initialises from torch's *global* CPU generator, so the
        backbone is built under :func:`~skcce.models.forked_rng`: the global generator is
        seeded from ``generator`` for the duration and then restored. The head is drawn
        from ``generator`` directly.

    Attributes
    ----------
    backbone : torch.nn.Module
        timm ResNet-18 without classifier, (B, C, H, W) -> (B, 512).
    head : torch.nn.Linear
        (B, 512) -> (B, K).

    Examples
    --------
    >>> import torch
    >>> net = ResNet18((3, 32, 32), 10, generator=torch.Generator().manual_seed(0))
    >>> net(torch.zeros(2, 3, 32, 32)).shape
    torch.Size([2, 10])
    >>> [len(g["params"]) for g in net.param_groups(lr_head=5e-2, lr_backbone=1e-5)]
    [2, 60]
    """

    def __init__(
        self,
        input_shape: tuple[int, int, int],
        n_clusters: int,
        *,
        weights=None,
        generator: torch.Generator | None = None,
    ):
        super().__init__()
        shape = tuple(int(s) for s in input_shape)
        if len(shape) != 3:
            raise ValueError(f"ResNet18 needs an image input_shape (C, H, W), got {shape}")
        timm = _import_timm()
        with forked_rng(generator):
            self.backbone = timm.create_model(
                "resnet18", pretrained=False, num_classes=0, in_chans=shape[0]
            )
        if weights is not None:
            load_backbone_weights(self.backbone, weights)
        with torch.random.fork_rng(devices=[]):
            self.head = nn.Linear(self.backbone.num_features, n_clusters)
        init_linear_(self.head, generator=generator)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Logits for a batch of images.

        Parameters
        ----------
        x : torch.Tensor of shape (B, C, H, W)

        Returns
        -------
        logits : torch.Tensor of shape (B, K)

        Examples
        --------
        >>> import torch
        >>> ResNet18((1, 32, 32), 4)(torch.zeros(2, 1, 32, 32)).shape
        torch.Size([2, 4])
        """
        return self.head(self.backbone(x))
