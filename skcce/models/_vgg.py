"""VGG-4, the from-scratch network of supplement Table 3 (adapted from IIC, Ji et al. 2019)."""

from __future__ import annotations

import torch
from torch import nn

from ._groups import HeadBackbone
from ._init import init_conv_bn_, init_linear_

__all__ = ["VGG4", "VGG4_VARIANTS"]

#: The three columns of supplement Table 3: the input shape each is meant for, the widths of
#: the four 5x5 convolutions (padding 2), their stride, and the flattened size that reaches
#: the linear classifier (from the table's last row).
VGG4_VARIANTS: dict[str, dict] = {
    "grey28": {"input_shape": (1, 28, 28), "channels": (64, 128, 256, 512), "stride": 1},
    "rgb32": {"input_shape": (3, 32, 32), "channels": (32, 64, 128, 256), "stride": 1},
    "rgb96": {"input_shape": (3, 96, 96), "channels": (128, 256, 512, 1024), "stride": 2},
}
_BY_SHAPE = {v["input_shape"]: k for k, v in VGG4_VARIANTS.items()}


def _conv_out(size: int, stride: int) -> int:
    # 5x5 kernel, padding 2: floor((size + 4 - 5) / stride) + 1
    return (size - 1) // stride + 1


def _pool_out(size: int) -> int:
    # 2x2 max-pool, stride 2 (floor mode)
    return size // 2


class VGG4(HeadBackbone, nn.Module):
    """VGG-4 of supplement Table 3: four 5x5 conv blocks and a linear classifier.

    Each block is ``Conv2d(5x5, padding 2, no bias) -> BatchNorm2d -> ReLU``; a
    ``MaxPool2d(2, stride 2)`` follows each of the first three blocks (the table lists three
    pools; there is none after the fourth conv), then the feature map is flattened into
    ``Linear(C4 * h * w, K)``. The three columns of the table:

    ============  ==================  ======  ===============================================
    variant       input (C, H, W)     stride  spatial sizes (conv, pool, ...) / linear input
    ============  ==================  ======  ===============================================
    ``grey28``    (1, 28, 28)         1       28→28→14→14→7→7→3→3 / 512·3·3 = 4608
    ``rgb32``     (3, 32, 32)         1       32→32→16→16→8→8→4→4 / 256·4·4 = 4096
    ``rgb96``     (3, 96, 96)         2       96→48→24→12→6→3→1→1 / 1024·1·1 = 1024
    ============  ==================  ======  ===============================================

    Widths are (64, 128, 256, 512), (32, 64, 128, 256) and (128, 256, 512, 1024).
    The table's supported shapes select the variant automatically. For any other
    ``(C, H, W)`` pass ``variant=`` explicitly: that column's widths and strides are used
    with ``C`` input channels and the linear layer's input size is computed from the same
    conv/pool arithmetic (a ``ValueError`` is raised if the map shrinks to nothing).

    Initialisation: convolutions Kaiming-normal (fan-in, ReLU gain), batch-norm weight 1 and
    bias 0, the final linear layer Kaiming-normal with zero bias (supplement section 4.2),
    all drawn from ``generator``.

    Parameters
    ----------
    input_shape : tuple of int ``(C, H, W)``
        Shape of one image.
    n_clusters : int
        Number of clusters ``K``.
    variant : {"grey28", "rgb32", "rgb96"} or None, default=None
        Column of Table 3; ``None`` chooses it from ``input_shape``.
    generator : torch.Generator or None, default=None
        Source of randomness for the initialisation (``None``: torch's global generator).
        With a generator the global RNG state is left unchanged.

    Attributes
    ----------
    features : torch.nn.Sequential
        The conv/BN/ReLU/pool stack, (B, C, H, W) -> (B, C4, h, w).
    head : torch.nn.Linear
        The classifier, (B, C4 * h * w) -> (B, K).
    variant : str
        The column of Table 3 in use.

    Examples
    --------
    >>> import torch
    >>> net = VGG4((1, 28, 28), 10, generator=torch.Generator().manual_seed(0))
    >>> net.head.in_features
    4608
    >>> net(torch.zeros(4, 1, 28, 28)).shape
    torch.Size([4, 10])
    """

    _backbone_attr = "features"

    def __init__(
        self,
        input_shape: tuple[int, int, int],
        n_clusters: int,
        *,
        variant: str | None = None,
        generator: torch.Generator | None = None,
    ):
        super().__init__()
        shape = tuple(int(s) for s in input_shape)
        if len(shape) != 3:
            raise ValueError(f"VGG4 needs an image input_shape (C, H, W), got {shape}")
        if variant is None:
            if shape not in _BY_SHAPE:
                supported = ", ".join(f"{v['input_shape']} ({k})" for k, v in VGG4_VARIANTS.items())
                raise ValueError(
                    f"VGG4 (supplement Table 3) supports input shapes {supported}; got {shape}. "
                    "Resize the images, or pass variant='grey28' | 'rgb32' | 'rgb96' to use "
                    "that column's layers on other sizes."
                )
            variant = _BY_SHAPE[shape]
        if variant not in VGG4_VARIANTS:
            raise ValueError(f"Unknown VGG4 variant {variant!r}; choose from {list(VGG4_VARIANTS)}")
        spec = VGG4_VARIANTS[variant]
        self.variant = variant
        c, h, w = shape
        layers: list[nn.Module] = []
        with torch.random.fork_rng(devices=[]):  # default inits must not consume global RNG
            for i, width in enumerate(spec["channels"]):
                layers += [
                    nn.Conv2d(c, width, 5, stride=spec["stride"], padding=2, bias=False),
                    nn.BatchNorm2d(width),
                    nn.ReLU(inplace=True),
                ]
                h, w = _conv_out(h, spec["stride"]), _conv_out(w, spec["stride"])
                if i < 3:
                    layers.append(nn.MaxPool2d(2, stride=2))
                    h, w = _pool_out(h), _pool_out(w)
                if h < 1 or w < 1:
                    raise ValueError(
                        f"input_shape {shape} is too small for VGG4 variant {variant!r}: the "
                        "feature map vanishes"
                    )
                c = width
            self.features = nn.Sequential(*layers)
            self.head = nn.Linear(c * h * w, n_clusters)
        init_conv_bn_(self.features, generator=generator)
        init_linear_(self.head, generator=generator)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Logits for a batch of images.

        Parameters
        ----------
        x : torch.Tensor of shape (B, C, H, W)
            Float images.

        Returns
        -------
        logits : torch.Tensor of shape (B, K)

        Examples
        --------
        >>> import torch
        >>> VGG4((3, 32, 32), 5)(torch.zeros(2, 3, 32, 32)).shape
        torch.Size([2, 5])
        """
        return self.head(torch.flatten(self.features(x), 1))
