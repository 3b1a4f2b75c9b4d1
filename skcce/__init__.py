"""skcce: collision cross-entropy self-labeled clustering for scikit-learn and PyTorch.

The public names are imported on first use (module ``__getattr__``, PEP 562), so that
``import skcce`` and ``skcce --help`` do not import torch.
"""

from skcce._lazy import attach
from skcce._legacy import install as _install_legacy_paths

_install_legacy_paths()

__version__ = "0.1.0"

#: public name -> the module that defines it (imported on first access)
_LAZY = {
    "CCEClustering": "skcce._clustering",
    "CheckpointMismatchError": "skcce._engine._checkpoint",
    "FeatureExtractor": "skcce._feature_extraction",
    "FitInterruptedWarning": "skcce._engine._train",
    "NoStructureWarning": "skcce._n_clusters",
}

__all__ = [
    "CCEClustering",
    "CheckpointMismatchError",
    "FeatureExtractor",
    "FitInterruptedWarning",
    "NoStructureWarning",
    "__version__",
]


__getattr__, __dir__ = attach(globals(), _LAZY)
