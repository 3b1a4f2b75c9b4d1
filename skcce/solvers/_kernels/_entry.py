"""The kernels' entries from Python: one solve (:func:`solve_collision_numba`) and the
stacked entry of the default solver (:func:`ipm_solve_into`), both from the torch path's
starting labels (:func:`start_labels`)."""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from numba import njit
from numba.extending import register_jitable

from skcce.solvers._common import mix_in_prior
from skcce.solvers._kernels._certificate import (
    _phi,
    certificate,
    dual_at,
    log_add,
    new_responses,
)
from skcce.solvers._kernels._em import em_solve
from skcce.solvers._kernels._interior import ipm_supports

register_jitable(mix_in_prior)  # the torch path's helper, compiled where the kernels call it


#: the interior point's methods -> how its Newton system is solved (``schur`` of
#: :func:`~skcce.solvers._kernels._interior.ipm_solve`: the shape rule, always matrix-free by
#: conjugate gradients, always a dense factorisation)
SCHUR = {"newton": 0, "newton-cg": 2, "newton-dense": 1}


class NumbaResult(NamedTuple):
    """Result of :func:`solve_collision_numba` (labels in ``labels_dtype``, default float64)."""

    labels: np.ndarray
    objective: float
    gap: float
    n_iter: int
    certified: bool


def solve_collision_numba(
    probs, lam, prior, fairness, *, tol, max_iter, init=None, method="newton", labels_dtype=None,
    carry=None,
):  # fmt: skip
    r"""Solve the collision-loss pseudo-label problem with the compiled kernels.

    The caller (:mod:`skcce.solvers._compiled`) has validated every input: rows of
    ``probs`` and ``init`` on the simplex, ``prior`` a distribution, ``lam > 0``, ``K >= 2``.

    Parameters
    ----------
    probs : ndarray of shape (N, K)
        Predictions :math:`\sigma` (float32 or float64; computed in float64).
    lam : float
        Fairness weight (summed-rows convention).
    prior : ndarray of shape (K,)
        Class prior ``u``.
    fairness : {"reverse", "forward"}
    tol : float
        Relative certified gap (``F(Y) - q(w) <= tol * max(|F(Y)|, 1)``).
    max_iter : int
        Iteration cap (interior-point iterations, or EM iterations).
    init : ndarray of shape (N, K), optional
        Warm start (default ``probs``).
    method : {"newton", "newton-cg", "newton-dense", "em"}
        The exact default solver (:func:`ipm_solve`; its Newton system solved as the shape
        rule says, by conjugate gradients, or by a dense factorisation: :data:`SCHUR`) or the
        paper's EM (:func:`em_solve`).
    labels_dtype : numpy dtype, optional
        Dtype of the returned labels; the certificate is computed on the labels as returned
        (rounded to this dtype), in float64.
    carry : ndarray of shape (K,), optional
        Column mass carried into the fairness term from earlier rows (see
        :func:`~skcce.solvers._kernels.ipm_solve`); default zeros.

    Returns
    -------
    NumbaResult
        ``labels`` (N, K), ``objective`` F(labels), ``gap`` (certified absolute gap),
        ``n_iter``, ``certified``.

    Examples
    --------
    >>> import numpy as np
    >>> P = np.array([[0.9, 0.1], [0.8, 0.2], [0.6, 0.4], [0.3, 0.7]])
    >>> res = solve_collision_numba(P, 100.0, np.array([0.5, 0.5]), "reverse", tol=1e-7,
    ...                             max_iter=100)
    >>> res.certified, res.labels.shape
    (True, (4, 2))
    """
    sigma = np.ascontiguousarray(probs, dtype=np.float64)
    u = np.ascontiguousarray(prior, dtype=np.float64)
    forward = fairness == "forward"
    Y0 = sigma if init is None else np.ascontiguousarray(init, dtype=np.float64)
    c = np.zeros(sigma.shape[1]) if carry is None else np.ascontiguousarray(carry, np.float64)
    low = labels_dtype is not None and np.dtype(labels_dtype) != np.float64
    if low:  # leave room for the rounding of the labels to their dtype
        tol_run = 0.1 * float(tol)
    else:
        tol_run = float(tol)
    if method == "em":
        Y, value, gap, n_iter, ok = em_solve(
            sigma, c, u, float(lam), start_labels(Y0, u, forward), tol_run, int(max_iter)
        )
    else:  # the stacked entry, with a stack of one, writing the labels in their dtype
        out_dtype = labels_dtype if low else np.float64
        Ys, values, gaps = np.empty((1,) + sigma.shape, dtype=out_dtype), np.empty(1), np.empty(1)
        iters, oks = np.zeros(1, dtype=np.int64), np.zeros(1, dtype=np.bool_)
        ipm_solve_into(sigma[None], Y0[None], 0, c, u, float(lam), forward, tol_run, int(max_iter),
                       Ys, values, gaps, iters, oks, SCHUR[method],
                       float(tol) if low else -1.0)  # fmt: skip
        Y, value, gap, n_iter, ok = Ys[0], values[0], gaps[0], iters[0], oks[0]
        low = False  # the entry certified the labels as written
    if low:
        Y = Y.astype(labels_dtype)
        Yd = Y.astype(np.float64)
        value, q, _ = certificate(sigma, Yd, c, u, float(lam), forward)
        gap = value - q
        ok = bool(math.isfinite(value) and gap <= tol * max(abs(value), 1.0))
    if gap != gap:
        gap = math.inf
    return NumbaResult(Y, float(value), max(float(gap), 0.0), int(n_iter), bool(ok))


@njit(cache=True, error_model="numpy")
def start_labels(Y, u, forward):
    """The torch path's starting labels (``skcce.solvers._common.start_point``): ``Y`` itself
    when it is a valid start (C-contiguous float64, as the caller passes it)."""
    N, K = Y.shape
    if forward:  # the classes of zero prior get no mass; a row left with none starts at u
        if (u > 0).all():
            return Y
        out = np.empty((N, K))
        for i in range(N):
            tot = 0.0
            for k in range(K):
                out[i, k] = Y[i, k] if u[k] > 0 else 0.0
                tot += out[i, k]
            if not tot > 0:
                tot = 0.0
                for k in range(K):
                    out[i, k] = u[k]
                    tot += u[k]
            for k in range(K):
                out[i, k] /= tot
        return out
    s = np.zeros(K)  # a class of positive prior with no mass at all: a little of u everywhere
    for i in range(N):
        for k in range(K):
            s[k] += Y[i, k]
    for k in range(K):
        if u[k] > 0 and s[k] <= 0:
            out = np.empty((N, K))
            for i in range(N):
                for q in range(K):
                    out[i, q] = mix_in_prior(Y[i, q], u[q])
            return out
    return Y


@njit(cache=True, error_model="numpy", nogil=True)
def ipm_solve_into(
    sigmas, inits, r, carry, u, lam, forward, tol, max_iter, Y, value, gap, n_iter, ok, schur=0,
    final_tol=-1.0,
):  # fmt: skip
    """:func:`ipm_solve` of problem ``r`` of a stack ``sigmas`` (R, N, K) from the start
    :func:`start_labels` of ``inits[r]`` (``inits`` is ``sigmas`` itself for the problems' own
    predictions), its results written into row ``r`` of the outputs ``Y`` (R, N, K),
    ``value``, ``gap``, ``n_iter`` and ``ok`` (R,), under the fairness term's ``carry``
    (K,) (see :func:`ipm_solve`): one call per problem, and nothing to box
    for the caller. The one compiled entry of the default solver: the batched restarts'
    workers (:mod:`skcce.solvers._compiled`) and :func:`solve_collision_numba` (a stack of
    one) share it, so that a process compiles (or loads) the solver once. ``schur``: how the
    Newton system is solved (see :func:`ipm_solve`).

    The labels are written from the rows' supports straight into ``Y``, in its dtype. With
    ``final_tol >= 0`` (``Y`` of a lower precision than float64) the results are those of the
    labels as written: ``F`` and the certificate are computed from them, and ``ok`` says
    whether their gap is within ``final_tol``."""
    sigma = sigmas[r]
    Y0 = start_labels(inits[r], u, forward)
    supports, F, g, n, certified, _, found = ipm_supports(
        sigma, carry, u, lam, forward, Y0, tol, max_iter, schur
    )
    N, K = sigma.shape
    for i in range(N):  # element loops: a slice assignment would compile numpy's broadcasting
        for k in range(K):
            Y[r, i, k] = 0.0 if found else Y0[i, k]
    if found:
        classes, count, y = supports.classes, supports.count, supports.y
        for i in range(N):
            tot = 0.0
            for q in range(count[i]):
                tot += y[i, q]
            for q in range(count[i]):
                Y[r, i, classes[i, q]] = y[i, q] / tot
        if final_tol >= 0:  # the certificate of the labels as written (rounded)
            F, q_dual = _written_certificate(sigma, supports, Y, r, carry, u, lam, forward)
            g = F - q_dual if F - q_dual == F - q_dual else np.inf
            certified = math.isfinite(F) and g <= final_tol * max(abs(F), 1.0)
    value[r] = F
    gap[r] = g
    n_iter[r] = n
    ok[r] = certified and found


@njit(cache=True, error_model="numpy")
def _written_certificate(sigma, supports, Y, r, carry, u, lam, forward):
    """``(F, q)`` of :func:`~skcce.solvers._kernels.certificate` for the labels ``Y[r]``
    written from ``supports`` (zero off them): ``F`` and the column sums read on the supports
    (O(N x support)), the dual bound from one pass of best responses."""
    N, K = sigma.shape
    classes, count = supports.classes, supports.count
    s = np.zeros(K)
    p, acc = 1.0, 0.0
    for i in range(N):
        x = 0.0
        for q in range(count[i]):
            k = classes[i, q]
            yk = np.float64(Y[r, i, k])
            x += yk * sigma[i, k]
            s[k] += yk
        p, acc = log_add(p, acc, x)
    dual, _ = dual_at(sigma, s, carry, u, lam, forward, new_responses(N))
    return -(acc + math.log(p)) + _phi(s, carry, u, lam, N, forward), dual
