"""The collision loss and its closed-form logit gradient in one compiled pass (CPU).

The batched restarts' step (:mod:`skcce._engine._batched`) computes, after the pseudo-label
solve, the per-restart loss, fairness and the gradient of the network loss with respect to the
class-major logits. In torch that is about twenty small operations a step
(:func:`skcce.losses._network_loss_grad`, the reference, which also serves CUDA and the other
losses); on the CPU, where the labels are on the host already, :func:`collision_step` does the
same arithmetic in one numba pass over the batch, reading the solver's float64 labels directly.
Tested against the torch reference (``tests/test_batched.py``).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

#: The floor of a positive-prior cluster's mean prediction in the fairness term: float32's
#: smallest normal number, as the torch reference (:func:`skcce.losses._floored`) on float32
#: logits.
FLOOR = float(np.finfo(np.float32).tiny)


@njit(cache=True, error_model="numpy", nogil=True)
def _collision_step(logits, sigma, labels, rw, u, forward, weight, grad, values, fair):
    R, K, B = logits.shape
    log_t = np.empty(K)
    sh = np.empty(K)
    ybar = np.empty(K)
    g = np.empty(K)
    for r in range(R):
        total = 0.0
        for k in range(K):
            ybar[k] = 0.0
        for i in range(B):
            m = -math.inf
            for k in range(K):
                y = labels[r, i, k]
                log_t[k] = math.log(y) if y > 0 else -math.inf
                m = max(m, log_t[k])
            z_top = -math.inf
            s_top = -math.inf
            for k in range(K):
                z = float(logits[r, k, i])
                sh[k] = z + (log_t[k] - m)
                z_top = max(z_top, z)
                s_top = max(s_top, sh[k])
            z_sum = 0.0
            s_sum = 0.0
            for k in range(K):
                z_sum += math.exp(float(logits[r, k, i]) - z_top)
                if sh[k] > -math.inf:
                    s_sum += math.exp(sh[k] - s_top)
            lse_s = s_top + math.log(s_sum)
            total += (z_top + math.log(z_sum)) - lse_s - m
            for k in range(K):
                q = math.exp(sh[k] - lse_s) if sh[k] > -math.inf else 0.0
                grad[r, k, i] = sigma[r, k, i] - q
                ybar[k] += sigma[r, k, i]
        values[r] = total / B
        kl = 0.0
        for k in range(K):
            ybar[k] /= B
            if u[r, k] > 0:  # the torch reference's floor (skcce.losses._floored)
                ybar[k] = max(ybar[k], FLOOR)
            if forward:
                if ybar[k] > 0:
                    kl += ybar[k] * (math.log(ybar[k]) - math.log(u[r, k]))
                g[k] = math.log(ybar[k]) + 1.0 - math.log(u[r, k])
            else:
                if u[r, k] > 0:
                    kl += u[r, k] * (math.log(u[r, k]) - math.log(ybar[k]))
                g[k] = -u[r, k] / ybar[k]
        fair[r] = kl
        for i in range(B):
            sg = 0.0
            for k in range(K):
                sg += sigma[r, k, i] * g[k]
            for k in range(K):
                v = grad[r, k, i]
                if weight != 0.0:
                    v += weight * sigma[r, k, i] * (g[k] - sg)
                grad[r, k, i] = rw[r, i] * v / B


def collision_step(logits, sigma, labels, prior, fairness, fairness_weight, row_weight=None):
    """The collision network loss of every restart and its logit gradient.

    Parameters
    ----------
    logits, sigma : ndarray of shape (R, K, B), float32
        Class-major logits and their softmax along the classes.
    labels : ndarray of shape (R, B, K), float64
        The pseudo-labels (the solver's rows).
    prior : ndarray of shape (K,) or (R, K), float64
        The class prior (positive entries with ``fairness="forward"``); (R, K): restart
        ``r``'s in row ``r``.
    fairness : {"reverse", "forward"}
    fairness_weight : float
    row_weight : ndarray of shape (R, B), optional
        Factors ``w_i`` of the rows' gradients (None: 1).

    Returns
    -------
    values, fair : ndarray of shape (R,), float64
        ``mean_i H2(y_i, sigma_i)`` and the KL term of each restart.
    grad : ndarray of shape (R, K, B), float32
        As :func:`skcce.losses._network_loss_grad` (row ``i`` times ``w_i``).
    """
    R, K, B = logits.shape
    grad = np.empty((R, K, B), dtype=np.float32)
    values, fair = np.empty(R), np.empty(R)
    # a new writable array, whatever R: ascontiguousarray would return the read-only
    # broadcast view when R = 1 (a second compiled signature of the step)
    u = np.array(np.broadcast_to(np.asarray(prior, np.float64), (R, K)))
    rw = np.ones((R, B)) if row_weight is None else np.ascontiguousarray(row_weight, np.float64)
    _collision_step(
        logits, sigma, labels, rw, u, fairness == "forward", float(fairness_weight), grad,
        values, fair,
    )  # fmt: skip
    return values, fair, grad
