"""Dispatch of a validated problem to the compiled CPU kernels (:mod:`._kernels`).

Both entries of the solvers reach it: the public :func:`skcce.solvers.solve_pseudo_labels` (after
validation) and the engine's private :func:`skcce.solvers._solve`. The compiled path applies to
the collision loss, methods ``"newton"`` (the interior-point column-generation solver, certified
by the same duality-gap rule; ``"newton-cg"`` and ``"newton-dense"`` fix how its Newton system
is solved, which ``"newton"`` chooses by the problem's shape) and ``"em"`` (the paper's EM), a
CPU or CUDA float32/float64 problem with ``lam > 0`` and ``K >= 2``: :func:`takes`, the one
place that decides, for :func:`solve`, :func:`solve_stack` and the engine. Everything else, and
every compiled run that does not certify, goes to the torch path, which stays the reference. A
result says which answered (``PseudoLabelResult.backend``).

The kernels are used wherever they apply; the environment variable ``SKCCE_SOLVER=torch``
(read at import) keeps a process on the torch path. Within a process, :func:`using` sets the
choice for a block (the benchmarks that compare the two paths).

CUDA problems are solved on the host by the same kernels, with one copy each way
(:mod:`skcce.solvers._transfer`); ``SKCCE_SOLVER=torch`` keeps them on the device (the torch
walk, which reads the host inside its iterations). :data:`ENABLED` is the resolved value.
"""

from __future__ import annotations

import contextlib
import itertools
import os

import numpy as np
import torch

from skcce.solvers import _em, _newton, _transfer
from skcce.solvers._common import certified_result

_CHOICE = os.environ.get("SKCCE_SOLVER", "").strip().lower()
#: whether the compiled path is used (everywhere it applies unless ``SKCCE_SOLVER=torch``)
ENABLED = _CHOICE != "torch"

#: the interior point's methods (how its Newton system is solved: see ``SCHUR`` of
#: :mod:`skcce.solvers._kernels._entry`)
INTERIOR = ("newton", "newton-cg", "newton-dense")

_DEFAULT_MAX_ITER = {m: _newton.DEFAULT_MAX_ITER for m in INTERIOR} | {"em": _em.DEFAULT_MAX_ITER}


def takes(loss, method, *, device_type="cpu", dtype=torch.float64, lam=1.0, k=2,
          requires_grad=False) -> bool:  # fmt: skip
    """Whether the compiled kernels solve a problem of this loss and resolved method, on
    this device type and dtype, with this ``lam`` and number of classes (the torch path
    solves the rest). The engine asks it before it builds a batch's problem: on CUDA it then
    builds it on the host (see :mod:`skcce.solvers._transfer`). ``method=None`` asks about
    the loss's compiled passes that serve every method (the batched restarts' fused loss and
    gradient, :mod:`skcce._engine._fused`)."""
    return (
        ENABLED
        and loss == "collision"
        and (method is None or method in _DEFAULT_MAX_ITER)
        and device_type in ("cpu", "cuda")
        and dtype in (torch.float32, torch.float64)
        and lam > 0
        and k >= 2
        and not requires_grad
    )


@contextlib.contextmanager
def using(compiled):
    """Within the block, the compiled path is used where it applies (``compiled`` true) or
    never (false), as ``SKCCE_SOLVER=compiled`` or ``torch`` would say for the process.

    Examples
    --------
    >>> from skcce.solvers import _compiled
    >>> with _compiled.using(False):
    ...     _compiled.takes("collision", "newton")
    False
    """
    global ENABLED
    before = ENABLED
    ENABLED = bool(compiled)
    try:
        yield
    finally:
        ENABLED = before


def _result(labels, value, gap, n_iter, method):
    """A certified result of the kernels."""
    return certified_result(labels, value, gap, n_iter, True, method, backend="compiled")


def _host_data(problem, init):
    """``(probs, init, prior)`` as NumPy arrays; one device-to-host copy for a CUDA problem
    (the three are stacked on the device and copied together)."""
    probs = problem.probs
    if probs.device.type == "cpu":
        prior = problem.prior_np
        return probs.numpy(), None if init is None else init.detach().cpu().numpy(), prior
    return _stacked_to_host(problem, init)


def _stacked_to_host(problem, init):
    """:func:`_host_data` of a device problem: ``probs``, ``init`` and the prior stacked on
    their device, one :func:`~skcce.solvers._transfer.to_host` copy, split on the host."""
    probs = problem.probs
    parts = [probs] + ([] if init is None else [init.detach().to(probs.dtype)])
    parts.append(problem.prior.to(probs.dtype)[None, :])
    host = _transfer.to_host(torch.cat(parts)).numpy()
    n = problem.n
    init_h = None if init is None else host[n : 2 * n]
    return host[:n], init_h, host[-1].astype(np.float64)


def solve(problem, method, init, *, tol, max_iter):
    """The compiled solve of a validated problem, or None (not taken, or not certified: the
    caller runs the torch path)."""
    probs = problem.probs
    if not takes(problem.loss, method, device_type=probs.device.type, dtype=probs.dtype,
                 lam=problem.lam, k=problem.k, requires_grad=probs.requires_grad):  # fmt: skip
        return None
    from skcce.solvers import _kernels as kn  # numba: imported on the first compiled solve

    np_dtype = np.float32 if probs.dtype == torch.float32 else np.float64
    probs_h, init_h, prior_h = _host_data(problem, init)
    out = kn.solve_collision_numba(
        probs_h,
        problem.lam,
        prior_h,
        problem.fairness,
        tol=tol,
        max_iter=_DEFAULT_MAX_ITER[method] if max_iter is None else max_iter,
        init=init_h,
        method=method,
        labels_dtype=np_dtype,
        carry=problem.carry_np,
    )
    if not out.certified:
        return None
    labels = torch.from_numpy(out.labels)
    if probs.device.type != "cpu":  # a CUDA problem: its one copy back
        labels = _transfer.to_device(labels, probs.device)
    return _result(labels, out.objective, out.gap, out.n_iter, method)


def solve_stack(probs, *, lam, prior, fairness, loss, method, tol, max_iter, map_=map, n_chunks=1,
                carry=None):
    """Compiled solves of ``R`` validated host problems at once (the batched restarts of
    :mod:`skcce._engine._batched`): one result per problem, None where the kernels do not
    certify (the caller then runs the torch path on that problem), or None for the whole
    stack when the compiled path does not apply.

    The checks and conversions that :func:`solve` makes per problem are made once here. The
    default method's problems go straight to the compiled
    :func:`~skcce.solvers._kernels.ipm_solve_into` from ``n_chunks`` workers, one task of
    ``map_`` each, that take the next unsolved problem until none is left (a worker costs a
    thread pool one task, and holds the GIL only between its problems).

    Parameters
    ----------
    probs : torch.Tensor of shape (R, N, K)
        Float64 CPU rows on the simplex (one problem per leading index; the engine's batched
        restarts build no other).
    lam : float
    prior : torch.Tensor of shape (K,) or (R, K), or None
        None: uniform; (R, K): problem ``r``'s prior in row ``r``.
    fairness : {"reverse", "forward"}
    loss : str
    method : {"newton", "newton-cg", "newton-dense", "em"}
    tol : float
    max_iter : int or None
    map_ : callable, default=map
        Maps a function over the workers (``"newton"``) or the problems (``"em"``): a thread
        pool's ``map`` solves them on its threads (the kernels release the GIL).
    n_chunks : int, default=1
        Workers of the default method (the pool's thread count). Each problem's result is
        the same whichever worker solves it.
    carry : ndarray of shape (R, K), optional
        Column mass carried into problem ``r``'s fairness term from earlier rows (row ``r``;
        see :func:`~skcce.solvers._kernels.ipm_solve`), or None (zeros: each batch's own
        marginal).

    Returns
    -------
    list of PseudoLabelResult or None, or None
    """
    k = probs.shape[-1]
    if not takes(loss, method, device_type=probs.device.type, dtype=probs.dtype, lam=lam, k=k):
        return None
    from skcce.solvers import _kernels as kn

    u = np.full(k, 1.0 / k) if prior is None else prior.detach().double().cpu().numpy()
    # one row per problem, in a new writable array: for a stack of one, ascontiguousarray
    # would return the read-only broadcast view itself, a second array type for the kernels
    # (numba compiles every kernel again for it, about 15 s on a fresh cache)
    u = np.array(np.broadcast_to(u, (len(probs), k)))
    cap = _DEFAULT_MAX_ITER[method] if max_iter is None else max_iter
    c = np.zeros((len(probs), k)) if carry is None else np.array(carry, dtype=np.float64)
    if method in INTERIOR:
        return _newton_stack(kn, np.ascontiguousarray(probs.numpy()), c, u, lam, fairness, tol,
                             cap, map_, n_chunks, method)  # fmt: skip

    def one(r):
        out = kn.solve_collision_numba(
            probs[r].numpy(), lam, u[r], fairness, tol=tol, max_iter=cap, method=method,
            carry=c[r],
        )
        if not out.certified:
            return None
        return _result(torch.from_numpy(out.labels), out.objective, out.gap, out.n_iter, method)

    return list(map_(one, range(len(probs))))


def _newton_stack(kn, sigmas, carry, u, lam, fairness, tol, max_iter, map_, n_chunks, method):
    """:func:`solve_stack` of the default method: ``n_chunks`` workers (one ``map_`` task
    each) take the problems in turn from a shared counter, so a worker that drew fast
    problems takes more of them (no worker idles while another still holds a fixed range)."""
    n = len(sigmas)
    Y = np.empty_like(sigmas)
    value, gap = np.empty(n), np.empty(n)
    n_iter, ok = np.zeros(n, dtype=np.int64), np.zeros(n, dtype=bool)
    forward = fairness == "forward"
    lam, tol, max_iter = float(lam), float(tol), int(max_iter)
    schur = kn.SCHUR[method]
    turn = itertools.count()  # next() is atomic under the GIL: each problem is taken once

    def worker(_):  # the kernels release the GIL: workers solve on several threads
        while (r := next(turn)) < n:  # one compiled call a problem, writing its results
            kn.ipm_solve_into(sigmas, sigmas, r, carry[r], u[r], lam, forward, tol, max_iter, Y,
                              value, gap, n_iter, ok, schur)  # fmt: skip

    list(map_(worker, range(max(1, min(int(n_chunks), n)))))
    results = []
    for r in range(n):
        if not ok[r]:
            results.append(None)
            continue
        results.append(_result(torch.from_numpy(Y[r]), value[r], gap[r], int(n_iter[r]), method))
    return results
