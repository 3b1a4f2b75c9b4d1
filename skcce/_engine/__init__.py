"""What ``CCEClustering.fit`` runs, below the estimator: preprocessing, one training run,
inference, the distributed context, checkpoints and atomic file writes.

Nothing here validates user input (the estimator does) or imports the estimators.
"""

from skcce._engine._train import (
    FitInterruptedWarning,
    Inputs,
    TrainConfig,
    TrainingInterrupted,
    fit_inputs,
    predict_proba,
    train,
)

__all__ = [
    "FitInterruptedWarning",
    "Inputs",
    "TrainConfig",
    "TrainingInterrupted",
    "fit_inputs",
    "predict_proba",
    "train",
]
