"""skcce: collision cross-entropy self-labeled clustering for scikit-learn."""

__version__ = "0.1.0"

__all__ = ["__version__"]
