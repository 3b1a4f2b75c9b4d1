"""What ``CCEClustering.fit`` runs, below the estimator.

``_preprocess`` (layout of X, streaming normalisation), ``_restarts`` (the restarts of a
fit, together or one by one: the estimator's one entry into training), ``_train`` (one
training run: the epoch loop; ``_step``: the train step), ``_batched`` (the linear head's
restarts trained together; ``_fused``: their collision loss and gradient in one compiled
pass), ``_select`` (the choice of the kept restart), ``_inference`` (soft assignments,
sharded under data parallelism), ``_callbacks`` (the callback protocol, progress bar),
``_checkpoint`` (checkpoint callback and resume), ``_stream`` (what a stream of
``partial_fit`` calls carries from one call to the next),
``_distributed`` (data-parallel context), ``_device`` (the device resolver), ``_io``
(atomic writes), ``_threads`` (scoped thread counts). Nothing here validates user input or
imports an estimator. The names below are imported on first access (PEP 562), so that light
modules (``_io``) load without torch.
"""

from skcce._lazy import attach

_LAZY = {
    "infer_proba": "skcce._engine._inference",
    "Inputs": "skcce._engine._preprocess",
    "Prepared": "skcce._engine._preprocess",
    "fit_inputs": "skcce._engine._preprocess",
    "prepare": "skcce._engine._preprocess",
    "FitInterruptedWarning": "skcce._engine._train",
    "TrainConfig": "skcce._engine._train",
    "run_single": "skcce._engine._train",
}

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


__getattr__, __dir__ = attach(globals(), _LAZY)
