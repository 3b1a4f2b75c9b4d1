r"""Compiled CPU kernels (numba) for the exact collision-loss pseudo-label solver.

NumPy float64 arrays in and out, so that the kernels can be tested against the torch reference
(:mod:`skcce.solvers._duality`, :mod:`skcce.solvers._newton`, :mod:`skcce.solvers._em`) on
their own. Every kernel is ``@njit(cache=True)``: compiled once per machine and loaded from
numba's on-disk cache by later processes; ``error_model="numpy"`` gives IEEE results (``inf``,
``nan``) for a division by zero, as in the torch reference. The entries called from Python
(:func:`ipm_solve`, :func:`ipm_solve_into`, :func:`em_solve`, :func:`certificate`) release the
GIL (``nogil=True``), so independent problems (the batched restarts of
:mod:`skcce._engine._batched`) solve on several threads.

The problem (supplement of Zhang & Boykov, summed-rows convention of :mod:`skcce.losses`) is

.. math::  \min_{Y} F(Y) = -\sum_i \ln \sigma_i^\top y_i + \Phi(s), \qquad s = \sum_i y_i,
           \quad y_i \in \Delta_K ,

with :math:`\Phi(s) = \lambda KL(u \| s/N)` (``fairness="reverse"``, loss (b)) or
:math:`\lambda KL(s/N \| u)` (``"forward"``, loss (a)).

The modules, each one job:

* :mod:`._rows`: exact row best responses
  :math:`\psi_i(w) = \min_{y \in \Delta} -\ln \sigma_i^\top y - w^\top y`;
* :mod:`._certificate`: ``F``, the dual ``q(w)`` and the certified gap ``F(Y) - q(w(Y))``;
* :mod:`._supports` and :mod:`._interior`: the exact solver :func:`ipm_solve` (an interior
  point on each row's small support, with column generation), :mod:`._linalg` its Cholesky
  routines, :mod:`._blocks` the rows' block inverses (diagonal plus rank two) and
  :mod:`._schur_cg` its matrix-free Newton system (large K);
* :mod:`._em`: the paper's EM, certified on the torch path's schedule;
* :mod:`._entry`: the entries from Python.

Numba counts references to the arrays a compiled function receives (an atomic increment
and decrement each) and removes the pairs it can prove redundant; a function with several
exits can defeat that (LLVM merges the exits' decrements). Helpers called once per row or
per iteration therefore keep one path through them, or take only the arrays they use.

A variable first assigned a constant (``n = 0``, ``done = False``) and later passed to another
kernel is created typed (``np.int64(0)``, ``np.bool_(False)``): numba's type inference sees the
constant's literal type first, and compiles (and caches) the callee once more for it, a
wasted compile of that callee and everything it calls.

Numba's cache keys a function on its own file: after editing one module, clear the
``__pycache__`` of this package (a caller in another module may otherwise load its stale
compiled code).
"""

from skcce.solvers._kernels._certificate import (
    certificate,
    dual_value,
    initial_w,
    objective,
)
from skcce.solvers._kernels._em import em_solve, em_step
from skcce.solvers._kernels._entry import (
    SCHUR,
    NumbaResult,
    ipm_solve_into,
    solve_collision_numba,
    start_labels,
)
from skcce.solvers._kernels._interior import ipm_solve
from skcce.solvers._kernels._rows import best_responses

__all__ = [
    "SCHUR",
    "NumbaResult",
    "best_responses",
    "certificate",
    "dual_value",
    "em_solve",
    "em_step",
    "initial_w",
    "ipm_solve",
    "ipm_solve_into",
    "objective",
    "solve_collision_numba",
    "start_labels",
]
