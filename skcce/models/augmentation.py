"""Default image augmentation for the extra CCE term of supplement Table 4."""

from __future__ import annotations

import torch

from skcce._lazy import import_extra

from ._init import forked_rng

__all__ = ["Augmentation", "default_augmentation"]


def _import_v2():
    return import_extra(
        "torchvision.transforms.v2",
        "Image augmentation needs torchvision; install it with `pip install skcce[vision]`.",
    )


class Augmentation:
    """Per-sample random augmentation of a float image batch, reproducible from a generator.

    The transform (a ``torchvision.transforms.v2`` pipeline) is applied to each image of
    the batch separately, so every sample gets its own random parameters.

    Determinism: torchvision samples its random parameters from torch's *global* CPU
    generator. When a ``torch.Generator`` is available (passed to the call, else the one
    given at construction), the whole batch is processed under
    :func:`~skcce.models.forked_rng`: one seed is drawn from the generator, the global CPU
    generator is seeded with it for the duration of the call and then restored. The same
    generator state therefore gives the same augmented batch, on CPU or GPU data (the
    parameters are sampled on the CPU), and the caller's global RNG is left untouched.
    Without any generator the global generator is used as it is.

    Parameters
    ----------
    transform : callable
        Maps one image tensor (C, H, W) to an image of the same shape.
    generator : torch.Generator or None, default=None
        Default source of randomness for calls that do not pass one (CPU generator); it is
        advanced by each call.

    Examples
    --------
    >>> import torch
    >>> aug = default_augmentation((3, 32, 32))
    >>> x = torch.rand(4, 3, 32, 32)
    >>> a = aug(x, generator=torch.Generator().manual_seed(0))
    >>> b = aug(x, generator=torch.Generator().manual_seed(0))
    >>> a.shape, bool(torch.equal(a, b))
    (torch.Size([4, 3, 32, 32]), True)
    """

    def __init__(self, transform, *, generator: torch.Generator | None = None):
        self.transform = transform
        self.generator = generator

    def __call__(self, x: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
        """Augment a batch.

        Parameters
        ----------
        x : torch.Tensor of shape (B, C, H, W)
            Float images (any device).
        generator : torch.Generator or None, default=None
            Source of randomness for this call (overrides the constructor's).

        Returns
        -------
        x_aug : torch.Tensor of shape (B, C, H, W)
            A new tensor, same dtype and device as ``x``.

        Examples
        --------
        >>> import torch
        >>> default_augmentation((1, 28, 28))(torch.rand(2, 1, 28, 28)).shape
        torch.Size([2, 1, 28, 28])
        """
        if x.dim() != 4:
            raise ValueError(f"Expected a batch of images (B, C, H, W), got shape {tuple(x.shape)}")
        gen = generator if generator is not None else self.generator
        with forked_rng(gen):
            out = [self.transform(img) for img in x]
        if not out:
            return x.clone()
        return torch.stack(out)

    def __repr__(self) -> str:
        return f"Augmentation({self.transform!r})"


def default_augmentation(
    input_shape: tuple[int, int, int], *, generator: torch.Generator | None = None
) -> Augmentation:
    """A mild augmentation suited to the image size, as a callable on float batches.

    - Grey images up to 32x32 (MNIST-like; digits must not be mirrored):
      ``RandomAffine(degrees=10, translate=(0.1, 0.1), scale=(0.9, 1.1))``.
    - Any other image (RGB, or larger): ``RandomResizedCrop((H, W), scale=(0.5, 1.0))``
      followed by ``RandomHorizontalFlip()``.

    These are our choices; the supplement only says one augmentation per image is used
    (Table 4). See :class:`Augmentation` for how determinism works.

    Parameters
    ----------
    input_shape : tuple of int ``(C, H, W)``
        Shape of one image.
    generator : torch.Generator or None, default=None
        Default generator of the returned callable (see :class:`Augmentation`).

    Returns
    -------
    augment : Augmentation
        ``augment(x, generator=None)`` maps a float batch (B, C, H, W) to an augmented batch
        of the same shape.

    Examples
    --------
    >>> import torch
    >>> aug = default_augmentation((3, 32, 32), generator=torch.Generator().manual_seed(0))
    >>> aug(torch.rand(8, 3, 32, 32)).shape
    torch.Size([8, 3, 32, 32])
    """
    shape = tuple(int(s) for s in input_shape)
    if len(shape) != 3:
        raise ValueError(
            f"default_augmentation needs an image input_shape (C, H, W), got {shape}; "
            "augmentation of flat feature vectors is not supported"
        )
    v2 = _import_v2()
    c, h, w = shape
    if c == 1 and max(h, w) <= 32:
        transform = v2.RandomAffine(degrees=10, translate=(0.1, 0.1), scale=(0.9, 1.1))
    else:
        transform = v2.Compose(
            [
                v2.RandomResizedCrop((h, w), scale=(0.5, 1.0), antialias=True),
                v2.RandomHorizontalFlip(),
            ]
        )
    return Augmentation(transform, generator=generator)
