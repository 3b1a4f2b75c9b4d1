"""Deterministic parameter initialisers that draw from an explicit ``torch.Generator``.

The functions here never touch the global random number generator when a generator is
given, which keeps model construction reproducible without global seeding (house rule:
one randomness path).
"""

from __future__ import annotations

import math
from contextlib import contextmanager

import torch
from torch import nn

__all__ = ["kaiming_normal_", "init_linear_", "init_conv_bn_", "seed_from", "forked_rng"]


def _fan_in(tensor: torch.Tensor) -> int:
    if tensor.dim() < 2:
        raise ValueError(
            "Kaiming initialisation needs a weight with at least 2 dimensions, "
            f"got {tuple(tensor.shape)}"
        )
    receptive = math.prod(tensor.shape[2:]) if tensor.dim() > 2 else 1
    return int(tensor.shape[1]) * int(receptive)


def kaiming_normal_(
    tensor: torch.Tensor, *, gain: float = math.sqrt(2.0), generator: torch.Generator | None = None
) -> torch.Tensor:
    """Fill ``tensor`` in place with He (Kaiming) normal values, fan-in mode.

    Draws ``w ~ N(0, std^2)`` with ``std = gain / sqrt(fan_in)``, where
    ``fan_in = in_features`` for a linear weight of shape ``(out, in)`` and
    ``in_channels * prod(kernel_size)`` for a convolution weight of shape
    ``(out, in, *kernel)`` (He et al., 2015). The default gain ``sqrt(2)`` is the one for
    ReLU. The supplement (section 4.2) initialises the linear classifier this way.

    Parameters
    ----------
    tensor : torch.Tensor of shape ``(out, in, *kernel)``
        The weight to fill (at least two dimensions).
    gain : float, default=sqrt(2)
        Scale factor; ``sqrt(2)`` for ReLU networks.
    generator : torch.Generator or None, default=None
        Source of randomness. ``None`` uses torch's global generator. The generator must
        live on the same device as ``tensor``.

    Returns
    -------
    tensor : torch.Tensor
        The same tensor, filled.

    Examples
    --------
    >>> import torch
    >>> w = torch.empty(10, 400)
    >>> g = torch.Generator().manual_seed(0)
    >>> _ = kaiming_normal_(w, generator=g)
    >>> abs(float(w.std()) - (2 / 400) ** 0.5) < 0.005
    True
    """
    std = gain / math.sqrt(_fan_in(tensor))
    with torch.no_grad():
        return tensor.normal_(0.0, std, generator=generator)


def init_linear_(layer: nn.Linear, *, generator: torch.Generator | None = None) -> nn.Linear:
    """Kaiming-normal weight and zero bias for a linear layer (supplement section 4.2).

    Parameters
    ----------
    layer : torch.nn.Linear
        Layer with weight of shape (out_features, in_features).
    generator : torch.Generator or None, default=None
        Source of randomness (``None``: torch's global generator).

    Returns
    -------
    layer : torch.nn.Linear
        The same layer, re-initialised in place.

    Examples
    --------
    >>> import torch
    >>> layer = init_linear_(torch.nn.Linear(5, 3), generator=torch.Generator().manual_seed(0))
    >>> bool((layer.bias == 0).all())
    True
    """
    kaiming_normal_(layer.weight, generator=generator)
    if layer.bias is not None:
        with torch.no_grad():
            layer.bias.zero_()
    return layer


def init_conv_bn_(module: nn.Module, *, generator: torch.Generator | None = None) -> nn.Module:
    """Initialise every convolution, batch-norm and linear layer inside ``module``.

    Convolutions and linear layers get Kaiming-normal weights (fan-in, ReLU gain) and zero
    biases; batch-norm layers get weight 1 and bias 0 (and fresh running statistics).
    Modules are visited in ``module.modules()`` order, so the result is a deterministic
    function of the generator's state.

    Parameters
    ----------
    module : torch.nn.Module
        Network to initialise in place.
    generator : torch.Generator or None, default=None
        Source of randomness (``None``: torch's global generator).

    Returns
    -------
    module : torch.nn.Module
        The same module.

    Examples
    --------
    >>> import torch
    >>> net = torch.nn.Sequential(torch.nn.Conv2d(1, 4, 3), torch.nn.BatchNorm2d(4))
    >>> _ = init_conv_bn_(net, generator=torch.Generator().manual_seed(0))
    >>> bool((net[1].weight == 1).all())
    True
    """
    for m in module.modules():
        if isinstance(m, nn.Conv1d | nn.Conv2d | nn.Conv3d | nn.Linear):
            kaiming_normal_(m.weight, generator=generator)
            if m.bias is not None:
                with torch.no_grad():
                    m.bias.zero_()
        elif isinstance(m, nn.BatchNorm1d | nn.BatchNorm2d | nn.BatchNorm3d):
            m.reset_parameters()
    return module


def seed_from(generator: torch.Generator) -> int:
    """Draw a 63-bit integer seed from ``generator`` (advancing it).

    Parameters
    ----------
    generator : torch.Generator
        Source of randomness.

    Returns
    -------
    seed : int
        A non-negative integer below ``2**63 - 1``.

    Examples
    --------
    >>> import torch
    >>> seed_from(torch.Generator().manual_seed(0)) == seed_from(torch.Generator().manual_seed(0))
    True
    """
    return int(torch.randint(0, 2**63 - 1, (1,), generator=generator, device=generator.device))


@contextmanager
def forked_rng(generator: torch.Generator | None):
    """Run a block under a private copy of torch's CPU random state, seeded from ``generator``.

    Used for code we do not control (timm constructors, torchvision transforms, user
    factories) that draws from torch's *global* CPU generator: inside the block the global
    CPU generator is seeded with :func:`seed_from` ``(generator)``; on exit the previous
    global state is restored, so the caller's global RNG is untouched. CUDA generators are
    not forked (``torch.random.fork_rng(devices=[])``); code that samples on a GPU inside
    the block is therefore not covered. With ``generator=None`` the block runs on the
    global generator as it is (nothing is forked).

    Parameters
    ----------
    generator : torch.Generator or None
        Where the seed comes from.

    Examples
    --------
    >>> import torch
    >>> with forked_rng(torch.Generator().manual_seed(1)):
    ...     a = torch.rand(2)
    >>> with forked_rng(torch.Generator().manual_seed(1)):
    ...     b = torch.rand(2)
    >>> bool((a == b).all())
    True
    """
    if generator is None:
        yield
        return
    seed = seed_from(generator)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        yield
