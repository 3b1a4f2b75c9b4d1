"""Networks for CCE clustering: a linear head, VGG-4 (supplement Table 3) and ResNet-18.

All models map a float batch of shape ``(B, *input_shape)`` to logits of shape ``(B, K)``.
Use :func:`build_model` to obtain one by name, or to check a module of your own.
Torch is the only requirement at import time; timm / torchvision are imported when the
ResNet-18 or the augmentation is used.
"""

from ._groups import param_groups
from ._init import forked_rng, init_conv_bn_, init_linear_, kaiming_normal_, seed_from
from ._linear import build_linear
from ._registry import MODEL_NAMES, build_model, check_model
from ._resnet import ResNet18, load_backbone_weights
from ._vgg import VGG4, VGG4_VARIANTS
from .augmentation import Augmentation, default_augmentation
from .presets import PRESET_DATASETS, PRESETS, get_preset

__all__ = [
    "MODEL_NAMES",
    "PRESETS",
    "PRESET_DATASETS",
    "VGG4",
    "VGG4_VARIANTS",
    "Augmentation",
    "ResNet18",
    "build_linear",
    "build_model",
    "check_model",
    "default_augmentation",
    "forked_rng",
    "get_preset",
    "init_conv_bn_",
    "init_linear_",
    "kaiming_normal_",
    "load_backbone_weights",
    "param_groups",
    "seed_from",
]
