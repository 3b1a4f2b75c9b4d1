"""skcce: collision cross-entropy self-labeled clustering for scikit-learn and PyTorch."""

from skcce._clustering import CCEClustering
from skcce._engine._checkpoint import CheckpointMismatchError
from skcce._engine._train import FitInterruptedWarning
from skcce._feature_extraction import FeatureExtractor
from skcce._legacy import install as _install_legacy_paths

_install_legacy_paths()

__version__ = "0.1.0"

__all__ = [
    "CCEClustering",
    "CheckpointMismatchError",
    "FeatureExtractor",
    "FitInterruptedWarning",
    "__version__",
]
