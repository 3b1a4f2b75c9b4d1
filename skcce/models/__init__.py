"""Networks for CCE clustering: a linear head, VGG-4 (supplement Table 3) and ResNet-18.

All models map a float batch of shape (B, *input_shape) to logits of shape (B, K).
Use :func:`build_model` to obtain one by name, or to check a module of your own.
"""

from ._init import forked_rng, init_conv_bn_, init_linear_, kaiming_normal_, seed_from
from ._linear import build_linear
from ._registry import MODEL_NAMES, build_model, check_model

__all__ = [
    "MODEL_NAMES",
    "build_linear",
    "build_model",
    "check_model",
    "forked_rng",
    "init_conv_bn_",
    "init_linear_",
    "kaiming_normal_",
    "seed_from",
]
