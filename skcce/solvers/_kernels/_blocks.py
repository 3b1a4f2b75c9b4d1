r"""The inverses of the interior point's row blocks, stored in O(m) (compiled).

Eliminating a moving row's basic entry leaves a reduced block on its other ``n1`` entries
(:mod:`._interior`):

.. math::  B = D + a a^\top + \delta\, \mathbf 1 \mathbf 1^\top

with ``D`` diagonal (each entry's ``z / y`` plus a small regularisation), ``a`` the entries'
slopes and ``delta`` the basic entry's ``z / y``: a diagonal plus a rank-two term. Its inverse
is kept in that shape (Woodbury's identity), with :math:`E = D^{-1}`, :math:`U = [a,
\sqrt\delta\,\mathbf 1]` and the 2 x 2 capacitance :math:`C = I + U^\top E U`:

.. math::  G = B^{-1} = E - (EU)\, C^{-1} (EU)^\top,

stored flat as ``E`` (``n1`` values), ``E a`` (``n1``), then :math:`\sqrt\delta` and the
three entries of :math:`C^{-1}`: ``2 n1 + 4`` values, and a product with ``G`` costs O(n1).
A row of ``n1 <= 2`` (the common case: two or three classes) keeps its inverse dense, in
closed form (``n1 * n1`` values). A dense inverse of a wide row would cost ``n1^2`` memory
and ``n1^3`` time per row, and at large K a row's support can hold most classes
(docs/design/019-pseudo-labels-at-a-thousand-clusters.md).

Every function takes the flat buffer and a row's offset in it (:func:`length` values each).
"""

from __future__ import annotations

import math

from numba import njit

_DENSE = 2  # rows of at most this many non-basic entries keep a dense inverse


@njit(cache=True, error_model="numpy", inline="always")
def length(n1):
    """Values stored for a row of ``n1`` non-basic entries."""
    return n1 * n1 if n1 <= _DENSE else 2 * n1 + 4


@njit(cache=True, error_model="numpy")
def invert(diag, slopes, delta, n1, out, o):
    """The inverse of ``diag(diag[:n1]) + a a' + delta 1 1'`` (``a = slopes[:n1]``) into
    ``out[o : o + length(n1)]``. Returns False when the block is not positive definite (or
    not finite)."""
    if n1 == 1:
        b = diag[0] + slopes[0] * slopes[0] + delta
        if not (b > 0 and math.isfinite(b)):
            return False
        out[o] = 1.0 / b
        return True
    if n1 == 2:
        b00 = diag[0] + slopes[0] * slopes[0] + delta
        b11 = diag[1] + slopes[1] * slopes[1] + delta
        b01 = slopes[0] * slopes[1] + delta
        det = b00 * b11 - b01 * b01
        if not (b00 > 0 and det > 0 and math.isfinite(det)):
            return False
        inv = 1.0 / det
        out[o] = b11 * inv
        out[o + 1] = -b01 * inv
        out[o + 2] = -b01 * inv
        out[o + 3] = b00 * inv
        return True
    if not delta >= 0:
        return False
    root = math.sqrt(delta)
    c00, c01, c11 = 1.0, 0.0, 1.0
    for p in range(n1):
        if not (diag[p] > 0 and math.isfinite(diag[p])):
            return False
        e = 1.0 / diag[p]
        ea = e * slopes[p]
        out[o + p] = e
        out[o + n1 + p] = ea
        c00 += ea * slopes[p]
        c01 += ea * root
        c11 += e * delta
    det = c00 * c11 - c01 * c01
    if not (det > 0 and math.isfinite(det)):
        return False
    inv = 1.0 / det
    t = o + 2 * n1
    out[t] = root
    out[t + 1] = c11 * inv
    out[t + 2] = -c01 * inv
    out[t + 3] = c00 * inv
    return True


@njit(cache=True, error_model="numpy")
def apply(inverses, o, n1, rhs, out):
    """``out[:n1] = G rhs[:n1]`` for the row stored at ``o``; returns ``sum(out[:n1])``."""
    if n1 <= _DENSE:
        total = 0.0
        for p1 in range(n1):
            v = 0.0
            start = o + p1 * n1
            for p2 in range(n1):
                v += inverses[start + p2] * rhs[p2]
            out[p1] = v
            total += v
        return total
    t = o + 2 * n1
    root, i00, i01, i11 = inverses[t], inverses[t + 1], inverses[t + 2], inverses[t + 3]
    t1 = 0.0  # (E a)' rhs
    t2 = 0.0  # (E 1)' rhs, times root below
    for p in range(n1):
        t1 += inverses[o + n1 + p] * rhs[p]
        t2 += inverses[o + p] * rhs[p]
    t2 *= root
    w1 = i00 * t1 + i01 * t2
    w2 = (i01 * t1 + i11 * t2) * root
    total = 0.0
    for p in range(n1):
        e = inverses[o + p]
        v = e * rhs[p] - inverses[o + n1 + p] * w1 - e * w2
        out[p] = v
        total += v
    return total


@njit(cache=True, error_model="numpy")
def entry(inverses, o, n1, p1, p2):
    """``G[p1, p2]`` of the row stored at ``o``."""
    if n1 <= _DENSE:
        return inverses[o + p1 * n1 + p2]
    t = o + 2 * n1
    root, i00, i01, i11 = inverses[t], inverses[t + 1], inverses[t + 2], inverses[t + 3]
    e1, e2 = inverses[o + p1], inverses[o + p2]
    a1, a2 = inverses[o + n1 + p1], inverses[o + n1 + p2]
    b1, b2 = root * e1, root * e2
    g = -(a1 * (i00 * a2 + i01 * b2) + b1 * (i01 * a2 + i11 * b2))
    if p1 == p2:
        g += e1
    return g


@njit(cache=True, error_model="numpy", inline="always")
def is_dense(n1):
    """Whether a row of ``n1`` non-basic entries keeps its inverse dense."""
    return n1 <= _DENSE


@njit(cache=True, error_model="numpy")
def low_rank_factors(inverses, o, n1, f1, f2):
    """``G = diag(E) - f1 f1' - f2 f2'`` for the (not dense) row stored at ``o``: writes
    ``f1[:n1]`` and ``f2[:n1]`` (``EU`` times the Cholesky factor of ``C^-1``) and returns
    their sums."""
    t = o + 2 * n1
    root, i00, i01, i11 = inverses[t], inverses[t + 1], inverses[t + 2], inverses[t + 3]
    l00 = math.sqrt(i00)
    l10 = i01 / l00
    l11 = math.sqrt(max(i11 - l10 * l10, 0.0))
    s1 = 0.0
    s2 = 0.0
    for p in range(n1):
        u2 = root * inverses[o + p]
        a = l00 * inverses[o + n1 + p] + l10 * u2
        b = l11 * u2
        f1[p] = a
        f2[p] = b
        s1 += a
        s2 += b
    return s1, s2


@njit(cache=True, error_model="numpy")
def total(inverses, o, n1):
    """The sum of every entry of ``G`` (``1' G 1``) of the row stored at ``o``."""
    if n1 <= _DENSE:
        s = 0.0
        for p in range(n1 * n1):
            s += inverses[o + p]
        return s
    t = o + 2 * n1
    root, i00, i01, i11 = inverses[t], inverses[t + 1], inverses[t + 2], inverses[t + 3]
    se = 0.0
    sa = 0.0
    for p in range(n1):
        se += inverses[o + p]
        sa += inverses[o + n1 + p]
    sb = root * se
    return se - (sa * (i00 * sa + i01 * sb) + sb * (i01 * sa + i11 * sb))
