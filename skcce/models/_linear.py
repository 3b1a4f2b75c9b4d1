"""The linear clustering head of supplement Table 1 / section 4.2."""

from __future__ import annotations

import torch
from torch import nn

from ._init import init_linear_

__all__ = ["build_linear"]


def build_linear(
    input_shape: tuple[int, ...], n_clusters: int, *, generator: torch.Generator | None = None
) -> nn.Linear:
    """A linear classifier ``z = W x + b`` with Kaiming-normal ``W`` and zero ``b``.

    This is the model of supplement Table 1 (a linear head on frozen features), initialised
    as in supplement section 4.2.

    Parameters
    ----------
    input_shape : tuple of one int ``(d,)``
        Feature dimension.
    n_clusters : int
        Number of clusters ``K`` (output logits).
    generator : torch.Generator or None, default=None
        Source of randomness for the weight (``None``: torch's global generator).

    Returns
    -------
    model : torch.nn.Linear
        Maps a float batch of shape (B, d) to logits of shape (B, K).

    Examples
    --------
    >>> import torch
    >>> m = build_linear((4,), 3, generator=torch.Generator().manual_seed(0))
    >>> m(torch.zeros(2, 4)).shape
    torch.Size([2, 3])
    """
    if len(input_shape) != 1:
        raise ValueError(
            f"The 'linear' model needs a flat input_shape (d,), got {tuple(input_shape)}; "
            "flatten the features or use 'vgg4' / 'resnet18' for images."
        )
    (d,) = input_shape
    return init_linear_(_uninitialised_linear(d, n_clusters), generator=generator)


def _uninitialised_linear(d: int, n_clusters: int) -> nn.Linear:
    """An ``nn.Linear(d, n_clusters)`` whose parameters are allocated but not initialised.

    ``nn.Linear``'s own init draws from torch's global generator, and forking that generator is
    not thread-safe (``n_clusters="auto"`` builds heads on several threads);
    ``torch.nn.utils.skip_init`` avoids it through the meta device at 0.36 ms a head, this at
    0.03 ms (a search builds 10 heads per K). :func:`init_linear_` then sets every parameter.
    """
    layer = nn.Linear.__new__(nn.Linear)
    nn.Module.__init__(layer)
    layer.in_features, layer.out_features = d, n_clusters
    layer.weight = nn.Parameter(torch.empty(n_clusters, d))
    layer.bias = nn.Parameter(torch.empty(n_clusters))
    return layer
