"""What ``CCEClustering.fit`` runs, below the estimator.

``_preprocess`` (layout of X, streaming normalisation), ``_train`` (one training run: the
epoch loop; ``_step``: the train step), ``_inference`` (soft assignments, sharded under data
parallelism), ``_callbacks`` (the callback protocol, progress bar), ``_checkpoint``
(checkpoint callback and resume), ``_distributed`` (data-parallel context), ``_device`` (the
device resolver), ``_io`` (atomic writes), ``_threads`` (scoped thread counts). Nothing here
validates user input or imports an estimator. The names below are imported on first access
(PEP 562), so that light modules (``_io``) load without torch.
"""

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


def __getattr__(name):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'skcce._engine' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_LAZY))
