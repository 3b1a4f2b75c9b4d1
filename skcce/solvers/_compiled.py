"""Dispatch of a validated problem to the compiled CPU kernels (:mod:`._kernels_numba`).

Both entries of the solvers reach it: the public :func:`skcce.solvers.solve_pseudo_labels` (after
validation) and the engine's private :func:`skcce.solvers._solve`. The compiled path applies to
the collision loss, methods ``"newton"`` (the interior-point column-generation solver, certified
by the same duality-gap rule) and ``"em"`` (the paper's EM), a CPU float32/float64 problem with
``lam > 0`` and ``K >= 2``, when numba is importable. Everything else, and every compiled run that
does not certify, goes to the torch path, which stays the reference and the CUDA path.

The switch: the environment variable ``SKCCE_SOLVER`` (read at import) is ``"compiled"`` (use
the kernels where they apply) or ``"torch"`` (never); unset, :data:`DEFAULT` decides.
:data:`ENABLED` is the resolved value (tests and benchmarks flip it).
"""

from __future__ import annotations

import os

import numpy as np
import torch

from skcce.solvers import _em, _newton
from skcce.solvers._common import PseudoLabelResult

#: whether the compiled path is used when ``SKCCE_SOLVER`` is unset (see docs/benchmarks.md,
#: "compile time": the default follows the measured cold compile of the default path)
DEFAULT = True

_CHOICE = os.environ.get("SKCCE_SOLVER", "").strip().lower()
#: the resolved switch
ENABLED = {"compiled": True, "numba": True, "torch": False}.get(_CHOICE, DEFAULT)

_DEFAULT_MAX_ITER = {"newton": _newton.DEFAULT_MAX_ITER, "em": _em.DEFAULT_MAX_ITER}


def applies(problem, method) -> bool:
    """Whether the compiled path takes this validated problem (numba not yet imported)."""
    probs = problem.probs
    return (
        ENABLED
        and problem.loss == "collision"
        and method in _DEFAULT_MAX_ITER
        and probs.device.type == "cpu"
        and probs.dtype in (torch.float32, torch.float64)
        and problem.lam > 0
        and problem.k >= 2
        and not probs.requires_grad
    )


def solve(problem, method, init, *, tol, max_iter):
    """The compiled solve of a validated problem, or None (not applicable, numba missing, or
    not certified: the caller runs the torch path)."""
    if not applies(problem, method):
        return None
    try:
        from skcce.solvers import _kernels_numba as kn
    except ImportError:  # numba missing or broken: the torch path
        return None
    probs = problem.probs
    np_dtype = np.float32 if probs.dtype == torch.float32 else np.float64
    out = kn.solve_collision_numba(
        probs.numpy(),
        problem.lam,
        problem.prior_np,
        problem.fairness,
        tol=tol,
        max_iter=_DEFAULT_MAX_ITER[method] if max_iter is None else max_iter,
        init=None if init is None else init.detach().cpu().numpy(),
        method=method,
        labels_dtype=np_dtype,
    )
    if not out.certified:
        return None
    return PseudoLabelResult(
        torch.from_numpy(out.labels), out.objective, out.gap, out.n_iter, True, method
    )
