"""What ``CCEClustering.fit`` runs, below the estimator.

``_preprocess`` (layout of X, streaming normalisation), ``_train`` (one training run: the
epoch loop; ``_step``: the train step), ``_inference`` (soft assignments, sharded under data
parallelism), ``_callbacks`` (the callback protocol, progress bar), ``_checkpoint``
(checkpoint callback and resume), ``_distributed`` (data-parallel context), ``_device`` (the
device resolver), ``_io`` (atomic writes), ``_threads`` (scoped thread counts). Nothing here
validates user input or imports an estimator.
"""

from skcce._engine._inference import infer_proba
from skcce._engine._preprocess import Inputs, Prepared, fit_inputs, prepare
from skcce._engine._train import FitInterruptedWarning, TrainConfig, run_single

__all__ = [
    "FitInterruptedWarning",
    "Inputs",
    "Prepared",
    "TrainConfig",
    "fit_inputs",
    "infer_proba",
    "prepare",
    "run_single",
]
