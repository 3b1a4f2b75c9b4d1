"""``build_model``: one entry point from a name, a module or a factory to a logits network."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from ._init import forked_rng

__all__ = ["build_model", "MODEL_NAMES", "check_model"]


def _build_linear(input_shape, n_clusters, *, generator=None, **kwargs):
    from ._linear import build_linear

    return build_linear(input_shape, n_clusters, generator=generator, **kwargs)


def _build_vgg4(input_shape, n_clusters, *, generator=None, **kwargs):
    from ._vgg import VGG4

    return VGG4(input_shape, n_clusters, generator=generator, **kwargs)


def _build_resnet18(input_shape, n_clusters, *, generator=None, **kwargs):
    from ._resnet import ResNet18

    return ResNet18(input_shape, n_clusters, generator=generator, **kwargs)


_REGISTRY: dict[str, Callable[..., nn.Module]] = {
    "linear": _build_linear,
    "vgg4": _build_vgg4,
    "resnet18": _build_resnet18,
}

#: Names accepted by :func:`build_model`.
MODEL_NAMES: tuple[str, ...] = tuple(_REGISTRY)


def _as_shape(input_shape) -> tuple[int, ...]:
    try:
        shape = tuple(int(s) for s in input_shape)
    except TypeError as exc:
        raise TypeError(
            f"input_shape must be a tuple of ints (one sample's shape), got {input_shape!r}"
        ) from exc
    if not shape or any(s <= 0 for s in shape):
        raise ValueError(f"input_shape must be a non-empty tuple of positive ints, got {shape}")
    return shape


def check_model(model: nn.Module, input_shape: tuple[int, ...], n_clusters: int) -> nn.Module:
    """Check that ``model`` maps a ``(2, *input_shape)`` batch to logits ``(2, n_clusters)``.

    The dummy forward pass runs in evaluation mode under ``torch.no_grad()`` (so batch-norm
    running statistics are not changed) on the device and floating dtype of the model's
    first parameter; the module's training flag is restored afterwards.

    Parameters
    ----------
    model : torch.nn.Module
        The network to check.
    input_shape : tuple of int
        Shape of one sample.
    n_clusters : int
        Expected number of output logits ``K``.

    Returns
    -------
    model : torch.nn.Module
        The same module, unchanged.

    Raises
    ------
    ValueError
        If the forward pass fails or its output does not have shape (2, n_clusters).

    Examples
    --------
    >>> import torch
    >>> check_model(torch.nn.Linear(4, 3), (4,), 3)
    Linear(in_features=4, out_features=3, bias=True)
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"Expected a torch.nn.Module, got {type(model).__name__}")
    param = next(iter(model.parameters()), None)
    if param is None:
        param = next(iter(model.buffers()), None)
    device = param.device if param is not None else torch.device("cpu")
    dtype = param.dtype if param is not None and param.is_floating_point() else torch.float32
    dummy = torch.zeros((2, *input_shape), device=device, dtype=dtype)
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            out = model(dummy)
    except Exception as exc:  # any failure of user code is reported the same way
        raise ValueError(
            f"The model could not be applied to a batch of shape {tuple(dummy.shape)} "
            f"(input_shape={tuple(input_shape)}): {type(exc).__name__}: {exc}"
        ) from exc
    finally:
        model.train(was_training)
    if not isinstance(out, torch.Tensor) or tuple(out.shape) != (2, n_clusters):
        got = tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
        raise ValueError(
            f"The model must map a batch of shape (B, *input_shape) to logits of shape "
            f"(B, n_clusters); a batch of shape {tuple(dummy.shape)} gave {got}, "
            f"expected {(2, n_clusters)}."
        )
    return model


def _from_factory(factory, shape, n_clusters, generator, kwargs) -> nn.Module:
    """``factory(shape, n_clusters, **kwargs)`` under :func:`forked_rng`, checked."""
    with forked_rng(generator):
        model = factory(shape, n_clusters, **kwargs)
    if not isinstance(model, nn.Module):
        raise ValueError(
            f"The model factory must return a torch.nn.Module, got {type(model).__name__}"
        )
    return check_model(model, shape, n_clusters)


def build_model(
    name_or_module: str | nn.Module | Callable[[tuple[int, ...], int], nn.Module],
    input_shape: tuple[int, ...],
    n_clusters: int,
    *,
    generator: torch.Generator | None = None,
    **kwargs: Any,
) -> nn.Module:
    """Build the network that maps a batch of samples to ``n_clusters`` logits.

    Parameters
    ----------
    name_or_module : str, torch.nn.Module or callable
        - ``"linear"``: :func:`~skcce.models.build_linear`, ``nn.Linear(d, K)`` with a
          Kaiming-normal weight and zero bias (supplement section 4.2); ``input_shape=(d,)``.
        - ``"vgg4"``: :class:`~skcce.models.VGG4`, supplement Table 3; ``input_shape`` is
          ``(1, 28, 28)``, ``(3, 32, 32)`` or ``(3, 96, 96)``.
        - ``"resnet18"``: :class:`~skcce.models.ResNet18` (timm), ``input_shape=(C, H, W)``.
        - a ``torch.nn.Module`` instance: returned as it is (``generator`` and ``kwargs`` are
          ignored) after :func:`check_model`.
        - a callable ``f(input_shape, n_clusters, **kwargs) -> nn.Module``: called, then
          checked. When ``generator`` is given the call runs under :func:`forked_rng`, i.e.
          with torch's global CPU generator temporarily seeded from ``generator`` and
          restored afterwards, so the factory's initialisation is reproducible.
    input_shape : tuple of int
        Shape of one sample, e.g. ``(d,)`` for features or ``(C, H, W)`` for images.
    n_clusters : int
        Number of clusters ``K``.
    generator : torch.Generator or None, default=None
        Source of randomness for the initialisation (CPU generator). The built-in models
        draw their parameters from it directly (the timm ResNet through
        :func:`forked_rng`); the caller's global RNG state is never changed when a
        generator is given. ``None`` uses torch's global generator.
    **kwargs
        Passed to the model constructor (e.g. ``weights=`` for ``"resnet18"``).

    Returns
    -------
    model : torch.nn.Module
        Maps a float tensor of shape ``(B, *input_shape)`` to logits of shape (B, n_clusters),
        on the CPU (built-in models) in training mode.

    Raises
    ------
    ValueError
        Unknown name, unsupported ``input_shape``, or a module/factory whose output does not
        have shape (B, n_clusters).

    Examples
    --------
    >>> import torch
    >>> g = torch.Generator().manual_seed(0)
    >>> model = build_model("linear", (8,), 3, generator=g)
    >>> model(torch.randn(5, 8)).shape
    torch.Size([5, 3])
    >>> build_model(torch.nn.Linear(8, 3), (8,), 3)
    Linear(in_features=8, out_features=3, bias=True)
    """
    shape = _as_shape(input_shape)
    if isinstance(n_clusters, bool) or int(n_clusters) != n_clusters or n_clusters < 1:
        raise ValueError(f"n_clusters must be a positive int, got {n_clusters!r}")
    n_clusters = int(n_clusters)
    if isinstance(name_or_module, str):
        key = name_or_module.lower()
        if key not in _REGISTRY:
            raise ValueError(
                f"Unknown model {name_or_module!r}; known names are {list(MODEL_NAMES)}, or "
                "pass a torch.nn.Module or a factory f(input_shape, n_clusters) -> Module."
            )
        model = _REGISTRY[key](shape, n_clusters, generator=generator, **kwargs)
        return check_model(model, shape, n_clusters)
    if isinstance(name_or_module, nn.Module):
        return check_model(name_or_module, shape, n_clusters)
    if callable(name_or_module):
        return _from_factory(name_or_module, shape, n_clusters, generator, kwargs)
    raise TypeError(
        "name_or_module must be a model name, a torch.nn.Module or a callable, got "
        f"{type(name_or_module).__name__}"
    )
