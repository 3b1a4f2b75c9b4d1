r"""The exact solver: a primal-dual interior point with column generation (compiled).

Each row keeps a small support (:mod:`._supports`); the problem restricted to the supports is
solved by a primal-dual interior-point method whose Newton system, after eliminating every row
(a block of the support's size), is one K x K positive definite system, the Schur complement
on the column sums ``s``. The full certificate (exact best responses over *all* classes) is
evaluated when the restricted problem is nearly solved and every few iterations; when the
restricted problem is solved but the certificate is not, the classes of the rows' best
responses join the supports (pricing) and the iteration continues. At a restricted optimum
whose supports hold every row's best response the gap is zero, so the loop ends certified.

:func:`ipm_solve` is the driver; each phase is a helper below it:

* start (:func:`_start`): each row's best vertices at the warm start's multiplier, plus its
  exact best response when ``lam > N`` (a strong pull mixes classes), every allowed class
  when ``lam > 8 N``; an interior point on them;
* certificate and pricing (:func:`_price`): under a strong pull (``lam > N``) one pricing
  that adds classes to most rows means the optimum mixes many classes in every row, so every
  row gets every allowed class at once rather than one more a pass; without one, the iterate
  is re-centred on the grown supports, which stay small;
* Newton system (:func:`_newton_system`): the rows' blocks inverted and summed onto the
  column sums, and the Schur complement factored once for both directions; or, when
  :func:`matrix_free` says so (large K), the blocks kept and the Schur complement never
  formed: each direction solves it by conjugate gradients (:mod:`._schur_cg`), so that an
  iteration costs O(N x support + K x products) instead of O(K^3). When they do not reach
  their tolerance (ties within rows make the system ill-conditioned) the rest of the solve
  factors it densely;
* step (:func:`_step`): Mehrotra's predictor and corrector (:func:`_direction`);
* pruning: an entry the step drove to its bound (``y < 0.2 r`` and ``z > r / 0.2``, with
  ``r`` the square root of the step's complementarity target) leaves its row, so that later
  iterations solve smaller rows. Pruning stops once that target is below 1e-5, and for good
  once a pricing after the start has added a class: from then on the supports only grow, so
  the column generation ends. A class dropped too early is priced back like any other.

Ties between a row's classes, exact zeros in ``sigma``, K = 2 and a large ``lam`` (an LP-like
dual) need no special case: the optimum mixes classes inside a row where it must.
"""

from __future__ import annotations

import math
from collections import namedtuple

import numpy as np
from numba import njit

from skcce.solvers._kernels import _blocks as bk
from skcce.solvers._kernels import _schur_cg as cg
from skcce.solvers._kernels import _supports as sp
from skcce.solvers._kernels._certificate import (
    _phi,
    allowed_classes,
    certificate_on_supports,
    dual_value,
    initial_w,
    log_add,
    new_responses,
    objective,
)
from skcce.solvers._kernels._linalg import chol_apply, chol_factor

_INF = np.inf
_TAU = 0.995  # fraction to the boundary of an interior-point step
_MU0 = 0.1  # first complementarity of the interior point
_REG = 1e-8  # primal regularisation of each row's reduced block
_PRICE_EVERY = 8  # the certificate (and pricing) at least every this many iterations
_EARLY = 3.0  # the first pricing is at iteration 0 when the warm start's gap >= this x yz
_DENSE_LAM = 8.0  # lam above this x N: every row starts with every allowed class
_DENSE_ROWS = 0.5  # a pricing adding classes to more than this share of rows: full supports
# under a strong pull (lam > N) or after half the iterations (_price)
_PRUNE = 0.2  # an entry leaves its row's support when y < this x r and z > r / this, with
# r = sqrt(the step's complementarity target), while that target is at least _PRUNE_MU and
# until pricing adds a class after the start
_PRUNE_MU = 1e-5

#: what the state of an iterate gives the phases: each row's ``x_i = sigma_i'y_i``, the
#: column sums, the number of rows holding each class, the rows of more than one class
#: (``multi[:n_multi]``, the only ones that move) and the certificate's column sums
Iterate = namedtuple("Iterate", ["x", "sums", "held", "multi", "certified_sums"])

#: the Newton system's arrays: the gradient and curvature of the fairness term at the column
#: sums; ``reduced`` (sum of the rows' eliminated blocks), ``schur`` and its Cholesky factor
#: ``schur_factor``, its diagonal scaling ``root_curvature`` and right-hand side ``rhs``; one
#: row's block as :mod:`._blocks` takes it (the diagonal ``block_diagonal`` and the
#: ``slopes``) and the classes of its non-basic entries; each row's basic entry (its largest)
#: and the offset of its block inverse in the flat buffer of inverses; whether the system is
#: solved matrix-free, and then its preconditioner (the diagonal), the conjugate gradients'
#: work vectors, room for one row's support (``gathered``) and for a block inverse's product
#: (``applied``), and the counts of solves, products and solves that did not converge
NewtonArrays = namedtuple(
    "NewtonArrays",
    [
        "gradient", "curvature", "reduced", "schur", "schur_factor", "root_curvature", "rhs",
        "block_diagonal", "slopes", "nonbasic", "basic", "offsets", "matrix_free", "diagonal",
        "cg_work", "gathered", "applied", "cg_count",
    ],
)  # fmt: skip

#: the per-entry arrays of a step: the directions ``dy``, ``dz``, Mehrotra's second-order
#: term ``dy dz``, the entries' terms shared by both directions (``sigma_k / x_i - phi_k`` and
#: ``1 / y``) and each row's reduced right-hand side between the two sweeps of a direction
StepArrays = namedtuple(
    "StepArrays", ["dy", "dz", "second_order", "gradient_terms", "inverse_y", "reduced_rhs"]
)


@njit(cache=True, error_model="numpy")
def _newton_arrays(N, K, W, matrix_free):
    S = 1 if matrix_free else K  # the K x K system's arrays: not formed when matrix-free
    return NewtonArrays(
        np.zeros(K), np.zeros(K), np.zeros((S, S)), np.empty((S, S)), np.zeros((S, S)),
        np.empty(K), np.zeros(K), np.zeros(W), np.empty(K), np.empty(K, dtype=np.int64),
        np.zeros(N, dtype=np.int64), np.zeros(N, dtype=np.int64), matrix_free, np.ones(K),
        np.zeros((6, K)), np.zeros(W), np.zeros(W), np.zeros(3, dtype=np.int64),
    )  # fmt: skip


@njit(cache=True, error_model="numpy")
def _step_arrays(N, W):
    return StepArrays(
        np.zeros((N, W)), np.zeros((N, W)), np.zeros((N, W)), np.empty((N, W)),
        np.empty((N, W)), np.empty((N, W)),
    )  # fmt: skip


@njit(cache=True, error_model="numpy", nogil=True)
def ipm_solve(sigma, u, lam, forward, Y0, tol, max_iter, schur=0, carry=None):
    """Certified optimum of F by an interior-point method with column generation.

    Parameters
    ----------
    sigma : ndarray of shape (N, K)
        Predictions, rows on the simplex (validated by the caller).
    u : ndarray of shape (K,)
        Prior (a distribution).
    lam : float
        Fairness weight (> 0).
    forward : bool
        ``KL(ybar||u)`` (True) or ``KL(u||ybar)`` (False).
    Y0 : ndarray of shape (N, K)
        Warm start (rows on the simplex); its column sums give the first multiplier.
    tol : float
        Relative certified gap: stop when ``F(Y) - q(w) <= tol * max(|F(Y)|, 1)``.
    max_iter : int
        Interior-point iterations at most.
    schur : int, default=0
        How the K x K Newton system is solved (:func:`matrix_free`): 0 by the shape rule,
        1 by a dense Cholesky factorisation, 2 by preconditioned conjugate gradients
        (:mod:`._schur_cg`). The iterates, and so the result, differ only by the rounding
        of the solves. A matrix-free solve that stops uncertified before ``max_iter`` (a
        failed step) is run again with the dense factorisation (counted in ``n_iter`` and
        ``n_pass``).
    carry : ndarray of shape (K,), optional
        Column mass carried into the fairness term from earlier rows (``>= 0``): ``Phi`` is
        then ``lam`` times the KL term of the marginal ``(s + carry) / (N + sum(carry))``
        instead of ``s / N`` (the running marginal of :mod:`skcce._engine._marginal`).
        Default: zeros (the batch's own marginal).

    Returns
    -------
    Y : ndarray of shape (N, K)
    value : float
        F(Y).
    gap : float
        Certified ``F(Y) - q(w)``.
    n_iter : int
    certified : bool
    n_pass : int
        Passes of exact best responses over the data (certificates and pricing).
    """
    if carry is None:
        c = np.zeros(sigma.shape[1])
    else:
        c = carry
    supports, value, gap, n_iter, ok, n_pass, found = ipm_supports(
        sigma, c, u, lam, forward, Y0, tol, max_iter, schur
    )
    Y = sp.dense(supports, sigma.shape[1]) if found else Y0.copy()
    return Y, value, gap, n_iter, ok, n_pass


@njit(cache=True, error_model="numpy")
def ipm_supports(sigma, carry, u, lam, forward, Y0, tol, max_iter, schur):
    """:func:`ipm_solve` with the labels left on their supports: returns ``(supports, value,
    gap, n_iter, certified, n_pass, found)``, where ``found`` False means that no iterate had
    a finite objective (the labels are then the warm start ``Y0``)."""
    N, K = sigma.shape
    free = matrix_free(N, K, schur)
    out = _ipm(sigma, carry, u, lam, forward, Y0, tol, max_iter, np.bool_(free))
    if not free or out[4] or out[3] >= max_iter:
        return out
    # stopped uncertified before the cap with the matrix-free system (a failed step: an
    # ill-conditioned system, e.g. ties within rows under a strong pull): the same solve with
    # the dense factorisation, the better result kept. (A run that used every iteration is
    # not repeated: the dense one would cost at least as much.)
    dense = _ipm(sigma, carry, u, lam, forward, Y0, tol, max_iter, np.bool_(False))
    n_iter, n_pass = out[3] + dense[3], out[5] + dense[5]
    best = dense if dense[4] or dense[2] < out[2] else out
    return best[0], best[1], best[2], n_iter, best[4], n_pass, best[6]


@njit(cache=True, error_model="numpy")
def _ipm(sigma, carry, u, lam, forward, Y0, tol, max_iter, free):
    """:func:`ipm_supports` with the Newton system solved matrix-free (``free``) or
    densely."""
    N, K = sigma.shape
    allowed = allowed_classes(u, forward)
    supports, price_first = _start(sigma, carry, u, lam, forward, Y0, allowed)
    state = Iterate(np.empty(N), np.zeros(K), np.zeros(K, dtype=np.int64),
                    np.empty(N, dtype=np.int64), np.empty(K))  # fmt: skip
    newton = _newton_arrays(N, K, supports.y.shape[1], free)
    steps = _step_arrays(N, supports.y.shape[1])
    inverses = np.zeros(1)  # the rows' block inverses, flat (grown when needed)
    responses = new_responses(N)
    best = supports  # the best certified supports so far (a copy; unused while best_value is inf)
    best_value = best_gap = _INF
    scale = -1.0  # of the test for a certificate: the last finite F (or a first estimate)
    n_iter = np.int64(0)  # typed, not Literal[int](0): see the package docstring
    n_pass = 1  # passes of exact best responses over the data (certificates, pricing)
    # pricing added classes after the start: from then on supports only grow (typed, as n_iter)
    grown = np.bool_(False)
    while True:
        n_multi, n_var, yz = _measure(sigma, supports, state)
        mu = yz / n_var if n_var > 0 else 0.0
        if not _certificate_due(n_iter, max_iter, price_first, n_var):
            if scale < 0:
                scale = _restricted_scale(state, carry, u, lam, forward)
            due = not yz > tol * scale  # the restricted problem is nearly solved
        else:
            due = True
        if due:
            F, q = certificate_on_supports(sigma, supports, carry, u, lam, forward, responses,
                                           state.certified_sums)  # fmt: skip
            n_pass += 1
            gap = _INF if F - q != F - q else F - q
            if math.isfinite(F):
                scale = max(abs(F), 1.0)
                if gap <= tol * max(abs(F), 1.0):
                    return supports, F, gap, n_iter, True, n_pass, True
                if gap < best_gap:
                    best_gap, best_value, best = gap, F, sp.copy(supports)
            if n_iter >= max_iter:
                break
            if n_var == 0 or (math.isfinite(gap) and yz <= 0.1 * gap):  # solved, uncertified
                late = 2 * n_iter >= max_iter  # see _price
                supports, added = _price(supports, responses, allowed, Y0, mu, gap, n_var,
                                         lam > N, late)  # fmt: skip
                if added == 0 and n_var == 0:
                    break
                if added > 0:
                    grown = grown or n_iter > 0
                    continue  # recompute the state (no iteration spent)
        n_iter += 1
        if steps.dy.shape[1] != supports.y.shape[1]:  # the supports were widened
            steps = _step_arrays(N, supports.y.shape[1])
            newton = _newton_arrays(N, K, supports.y.shape[1], newton.matrix_free)
        ok, inverses = _newton_system(sigma, carry, u, lam, forward, supports, state, n_multi,
                                      newton, inverses)  # fmt: skip
        if not ok:
            break
        if not _step(sigma, supports, state, n_multi, n_var, mu, newton, inverses, steps, grown):
            if not (newton.matrix_free and newton.cg_count[2] > 0):
                break
            # conjugate gradients did not converge: the rest of the solve factors densely
            newton = _newton_arrays(N, K, supports.y.shape[1], np.bool_(False))
            ok, inverses = _newton_system(sigma, carry, u, lam, forward, supports, state,
                                          n_multi, newton, inverses)  # fmt: skip
            if not ok or not _step(sigma, supports, state, n_multi, n_var, mu, newton,
                                   inverses, steps, grown):  # fmt: skip
                break
    # the one uncertified exit: the best certified supports so far, or the warm start
    if best_value == _INF:
        return supports, best_value, best_gap, n_iter, False, n_pass, False
    return best, best_value, best_gap, n_iter, False, n_pass, True


@njit(cache=True, error_model="numpy")
def matrix_free(N, K, schur):
    """Whether the Newton system is solved matrix-free (:mod:`._schur_cg`) rather than by a
    dense Cholesky factorisation: ``schur`` 2 (always), 1 (never) or 0 (the rule).

    The rule compares the two solves' costs per iteration on the problem's shape: factoring
    the K x K Schur complement costs K^3 / 3 multiply-adds (once for both directions), while
    conjugate gradients solve it twice (predictor and corrector) in at most K products each
    (they end in K steps), a product being a pass over the rows' support arrays
    (N x :data:`._supports.WIDTH` entries); the matrix-free solve is chosen when even that
    worst case is cheaper: ``K^3 / 3 > 2 K N WIDTH``, i.e. ``K^2 > 6 WIDTH N = 48 N``."""
    if schur == 0:
        return K * K > 6 * sp.WIDTH * N
    return schur == 2


@njit(cache=True, error_model="numpy")
def _start(sigma, carry, u, lam, forward, Y0, allowed):
    """The first supports, at an interior point, and whether the first certificate is due at
    iteration 0.

    That certificate is for pricing: it adds classes when the gap is large against the
    start's complementarity (``yz = _MU0`` x its entries). The warm start's own gap predicts
    that at the cost of one objective; when it is small the certificate (a pass of exact best
    responses) waits for the next due one."""
    N, K = sigma.shape
    s = np.zeros(K)
    for i in range(N):
        for k in range(K):
            s[k] += Y0[i, k]
    w = initial_w(s, carry, u, lam, N, forward)
    supports = sp.new_supports(N, K)
    psi0 = sp.initial_supports(sigma, w, allowed, lam, supports)
    if lam > _DENSE_LAM * N:  # a strong pull mixes many classes in every row: all of them
        supports = sp.every_class(supports, allowed)
    supports = sp.cover_active(sigma, u, supports)
    sp.interior_start(Y0, supports, _MU0)
    gap0 = (objective(sigma, Y0, carry, u, lam, forward)
            - dual_value(psi0, w, carry, u, lam, N, forward))
    n_var0 = 0
    for i in range(N):
        if supports.count[i] > 1:
            n_var0 += supports.count[i]
    return supports, not gap0 < _EARLY * _MU0 * n_var0  # a NaN gap prices too


@njit(cache=True, error_model="numpy")
def _measure(sigma, supports, state):
    """The state of the iterate into ``state`` (see :data:`Iterate`); returns ``(n_multi,
    n_var, yz)``: the rows that move, their entries and the total complementarity."""
    classes, count, y, z = supports
    x, s, held, multi, _ = state
    K = s.shape[0]
    for k in range(K):
        s[k] = 0.0
        held[k] = 0
    n_var = 0
    yz = 0.0
    n_multi = 0
    for i in range(count.shape[0]):
        xi = 0.0
        for q in range(count[i]):
            k = classes[i, q]
            xi += sigma[i, k] * y[i, q]
            s[k] += y[i, q]
            held[k] += 1
            if count[i] > 1:
                yz += y[i, q] * z[i, q]
        if count[i] > 1:
            n_var += count[i]
            multi[n_multi] = i
            n_multi += 1
        x[i] = xi
    return n_multi, n_var, yz


@njit(cache=True, error_model="numpy")
def _certificate_due(n_iter, max_iter, price_first, n_var):
    """Whether the certificate is due whatever the iterate: every few iterations (for
    pricing), at iteration 0 when the start asks for it, at the cap, or with nothing left to
    move. Otherwise it waits until the restricted problem is nearly solved (the driver): it
    costs a pass over all N x K entries."""
    scheduled = n_iter % _PRICE_EVERY == 0 and (n_iter > 0 or price_first)
    return scheduled or n_var == 0 or n_iter >= max_iter


@njit(cache=True, error_model="numpy")
def _restricted_scale(state, carry, u, lam, forward):
    """``max(|F|, 1)`` of the restricted iterate, the scale of the first test for a
    certificate (later ones use the last certified F)."""
    x, s = state.x, state.sums
    p, acc = 1.0, 0.0
    for i in range(x.shape[0]):
        p, acc = log_add(p, acc, x[i])
    return max(abs(_phi(s, carry, u, lam, x.shape[0], forward) - acc - math.log(p)), 1.0)


@njit(cache=True, error_model="numpy")
def _price(supports, responses, allowed, Y0, mu, gap, n_var, strong, late):
    """Pricing at a (nearly) solved restricted problem whose certificate fails: each row's
    best response joins its support. Returns the supports (widened if needed) and the number
    of classes added.

    A class priced in at a nearly solved restricted problem (``mu`` tiny) starts far from
    the central path, and the steps that follow can stall for tens of iterations. Under a
    strong pull (``strong``: ``lam > N``) the rows that gained a class are re-centred at a
    complementarity of ``gap / n_var`` (at most the first one); otherwise the whole iterate
    is (:func:`sp.recentre`): on training batches of digits at K = 20 with an estimated
    prior near its floor, re-centring only those rows left some solves stalled at the
    iteration cap.

    A pricing that adds classes to most rows gives every row every allowed class under a
    strong pull, whose optimum mixes many classes in every row, and once half the iterations
    are spent (``late``: the column generation then ends). Otherwise the optimum stays sparse
    even when one pricing finds most rows short of a class (a flat ``sigma``, a prior at its
    floor: 1-3 classes a row at the optimum, measured), and full supports would make every
    later iteration cost ``N K^3``: filling them there made those solves 3 times slower. On
    400 random problems (N 20-1000, K 2-50, lam from 0.02 N to 20 N, flat to confident
    ``sigma``, uniform and uneven priors, both fairness terms; scratch sweep) the solves took
    6.8 s instead of 12.5 s in all, the same 5 uncertified within 100 iterations, the median
    problem within 1 % of its old time; the slowest relative to before (up to 3x; up to 92
    iterations, the late fill) are flat ``sigma`` with K = 50 under a weak pull and lam just
    below N, where the optimum mixes many classes a row. Filling also once the rows hold a
    third of the classes fixed the second kind (about 2x faster there) at 10 % on the digits
    batches above; not kept."""
    N = supports.count.shape[0]
    K = allowed.shape[0]
    first, second, share = responses
    mu_new = mu
    if n_var > 0 and math.isfinite(gap):
        mu_new = max(mu, min(gap / n_var, _MU0))
    added = 0
    classes, count, y, z = supports
    for i in range(N):
        for t in range(2):
            k = first[i] if t == 0 else second[i]
            if (t == 1 and not share[i] < 1.0) or sp.holds(classes, count, i, k):
                continue
            if count[i] == classes.shape[1]:
                supports = sp.make_room(supports, K)
                classes, count, y, z = supports
            sp.add_class(classes, count, y, z, i, k, mu_new)
            added += 1
            if strong:
                for q in range(count[i]):
                    z[i, q] = max(z[i, q], mu_new / y[i, q])
    if added > _DENSE_ROWS * N and (strong or late):
        # Most rows lacked a class: pricing one class a row per pass would take up to K
        # passes; every row gets every allowed class at once, and a fresh interior start on
        # them (centred at the gap's complementarity), since the new classes at the
        # pricing's small mass start far from the central path.
        if classes.shape[1] < K:
            supports = sp.widen(supports, K)
            classes, count, y, z = supports
        for i in range(N):
            for k in range(K):
                if allowed[k] and not sp.holds(classes, count, i, k):
                    sp.add_class(classes, count, y, z, i, k, mu)
                    added += 1
        sp.interior_start(Y0, supports, mu_new)
    elif added > 0 and not strong:  # the rows that gained a class were not re-centred above
        sp.recentre(supports, mu_new)
    return supports, added


@njit(cache=True, error_model="numpy")
def _fairness_derivatives(carry, u, lam, forward, s, N, gradient, curvature):
    """The gradient and curvature (diagonal) of the fairness term at the column sums."""
    n_eff = N
    for k in range(s.shape[0]):
        n_eff += carry[k]
    for k in range(s.shape[0]):
        sk = s[k] + carry[k]
        if u[k] > 0 and sk > 0:
            if forward:
                gradient[k] = lam / n_eff * (math.log(sk / (n_eff * u[k])) + 1.0)
                curvature[k] = lam / (n_eff * sk)
            else:
                gradient[k] = -lam * u[k] / sk
                curvature[k] = lam * u[k] / (sk * sk)
        else:
            gradient[k] = 0.0
            curvature[k] = 0.0


@njit(cache=True, error_model="numpy")
def _newton_system(sigma, carry, u, lam, forward, supports, state, n_multi, newton, inverses):
    """The Newton system with every moving row eliminated onto the column sums (see
    :func:`_eliminate_rows`) and the Schur complement factored. Returns ``(ok, inverses)``:
    False when a block or the Schur complement is not positive definite."""
    K = sigma.shape[1]
    count, multi, offsets, M = supports.count, state.multi, newton.offsets, newton.reduced
    _fairness_derivatives(carry, u, lam, forward, state.sums, sigma.shape[0], newton.gradient,
                          newton.curvature)  # fmt: skip
    if not newton.matrix_free:
        for k in range(K):
            for j in range(K):
                M[k, j] = 0.0
    total = 0
    for t in range(n_multi):
        i = multi[t]
        offsets[i] = total
        total += bk.length(count[i] - 1)
    if inverses.shape[0] < total:
        inverses = np.zeros(total)
    n_wide = 0  # rows summed by the matrix product (see _eliminate_rows): two factor rows each
    if not newton.matrix_free:
        for t in range(n_multi):
            n_wide += _by_product(count[multi[t]] - 1, K)
    factors = np.zeros((2 * n_wide, K))
    if not _eliminate_rows(sigma, supports, state, n_multi, newton, inverses, factors):
        return False, inverses
    if n_wide > 0:  # the rank-two terms of the wide rows, summed in one product
        M -= np.dot(factors.T, factors)
    if newton.matrix_free:
        for k in range(K):
            newton.root_curvature[k] = math.sqrt(newton.curvature[k])
        cg.schur_diagonal(supports, multi, n_multi, newton.basic, offsets, inverses,
                          newton.curvature, newton.diagonal)  # fmt: skip
        return True, inverses
    ok = _factor_schur(newton.curvature, newton.reduced, newton.schur, newton.root_curvature,
                       newton.schur_factor)  # fmt: skip
    return ok, inverses


@njit(cache=True, error_model="numpy", inline="always")
def _by_product(n1, K):
    """Whether a row of ``n1`` non-basic entries adds its rank-two term to the Schur
    complement through the matrix product of all such rows rather than entry by entry:
    when it holds more than half the classes. Entry by entry the term costs ``2 n1^2``
    multiply-adds, in the product ``2 K^2`` (at a blocked product's speed)."""
    return not bk.is_dense(n1) and 2 * n1 > K


@njit(cache=True, error_model="numpy")
def _eliminate_rows(sigma, supports, state, n_multi, newton, inverses, factors):
    """Each moving row's reduced block (its entries less the basic one, its largest, which
    the row's simplex constraint eliminates) inverted into ``inverses`` (flat, at
    ``newton.offsets``, in the shapes of :mod:`._blocks`) and, unless the system is solved
    matrix-free, summed onto the column sums in ``newton.reduced``: a dense block entry by
    entry; a diagonal-plus-rank-two one by its diagonal and its rank-two term, written as
    two factors ``f`` (``- f f'`` each), entry by entry or, for a row of most classes
    (:func:`_by_product`), left as two rows of ``factors`` (mapped to the columns; the
    caller subtracts ``factors' factors``, one matrix product for all such rows). Returns
    False when a block is not positive definite."""
    classes, count, y, z = supports
    x, multi = state.x, state.multi
    M, diag, basic, offsets = newton.reduced, newton.block_diagonal, newton.basic, newton.offsets
    slopes, idx = newton.slopes, newton.nonbasic
    K = sigma.shape[1]
    f1, f2 = np.empty(slopes.shape[0]), np.empty(slopes.shape[0])  # a wide row's factors
    wide = 0  # the next row of factors
    for t in range(n_multi):
        i = multi[t]
        m = count[i]
        rq = 0
        for q in range(m):
            if y[i, q] > y[i, rq]:
                rq = q
        basic[i] = rq
        r = classes[i, rq]
        xi = x[i]
        dr = z[i, rq] / y[i, rq]
        n1 = np.int64(0)  # typed, as in ipm_solve
        for q in range(m):
            if q == rq:
                continue
            idx[n1] = classes[i, q]
            slopes[n1] = (sigma[i, classes[i, q]] - sigma[i, r]) / xi
            # (+ _REG: a row whose classes tie has no curvature of its own; as z -> 0 on an
            # interior optimum its block would become singular)
            diag[n1] = z[i, q] / y[i, q] + _REG
            n1 += 1
        o = offsets[i]
        # the block diag + slopes slopes' + dr 1 1' (diagonal plus rank two: see _blocks)
        if not bk.invert(diag, slopes, dr, n1, inverses, o):
            return False
        if newton.matrix_free:  # the Schur complement is not formed (see _schur_cg)
            continue
        if not bk.is_dense(n1):
            s1, s2 = bk.low_rank_factors(inverses, o, n1, f1, f2)
            all_sum = 0.0
            for p in range(n1):
                e = inverses[o + p]
                k = idx[p]
                M[k, k] += e
                M[k, r] -= e
                M[r, k] -= e
                all_sum += e
            M[r, r] += all_sum
            if _by_product(n1, K):
                for p in range(n1):
                    factors[wide, idx[p]] = f1[p]
                    factors[wide + 1, idx[p]] = f2[p]
                factors[wide, r] = -s1
                factors[wide + 1, r] = -s2
                wide += 2
                continue
            for p1 in range(n1):  # - f f' with the factors' entry -s on the basic class
                a1, b1 = f1[p1], f2[p1]
                k1 = idx[p1]
                for p2 in range(n1):
                    M[k1, idx[p2]] -= a1 * f1[p2] + b1 * f2[p2]
                cross = a1 * s1 + b1 * s2
                M[k1, r] += cross
                M[r, k1] += cross
            M[r, r] -= s1 * s1 + s2 * s2
            continue
        all_sum = 0.0
        for p1 in range(n1):
            row_sum = 0.0
            for p2 in range(n1):
                g = bk.entry(inverses, o, n1, p1, p2)
                M[idx[p1], idx[p2]] += g
                row_sum += g
            M[idx[p1], r] -= row_sum
            M[r, idx[p1]] -= row_sum
            all_sum += row_sum
        M[r, r] += all_sum
    return True


@njit(cache=True, error_model="numpy")
def _factor_schur(curvature, reduced, schur, root_curvature, factor):
    """The Cholesky factor (into ``factor``) of the Schur complement ``I + D^1/2 M D^1/2``
    (``M = reduced``, ``D = curvature``), factored once for the predictor and the corrector
    (slightly regularised if rounding cost its definiteness). Returns False when even that
    fails. It takes the five arrays it uses rather than :data:`NewtonArrays`: numba counts a
    reference to every array of a tuple argument, an atomic operation each way per call."""
    K = root_curvature.shape[0]
    for a in range(K):
        root_curvature[a] = math.sqrt(curvature[a])
    for a in range(K):
        for b in range(K):
            schur[a, b] = root_curvature[a] * reduced[a, b] * root_curvature[b]
        schur[a, a] += 1.0
    ok = chol_factor(schur, factor, K)
    if not ok:
        big = 0.0
        for k in range(K):
            big = max(big, schur[k, k])
        for k in range(K):
            schur[k, k] += 1e-12 * big
        ok = chol_factor(schur, factor, K)
    return ok


@njit(cache=True, error_model="numpy")
def _step(sigma, supports, state, n_multi, n_var, mu, newton, inverses, steps, grown):
    """Mehrotra's step: the affine-scaling predictor, then the centred, second-order
    corrected direction, taken; then the entries it drove to their bound leave the supports
    (while pruning lasts). Returns False on a failure (a non-finite direction)."""
    classes, count, y, z = supports
    x, multi, gradient = state.x, state.multi, newton.gradient
    dy, dz, cv, gradient_terms, inverse_y, _ = steps
    for t in range(n_multi):  # the entries' terms shared by both directions
        i = multi[t]
        ix = 1.0 / x[i]
        for q in range(count[i]):
            k = classes[i, q]
            gradient_terms[i, q] = sigma[i, k] * ix - gradient[k]
            inverse_y[i, q] = 1.0 / y[i, q]
    ap, ad = _direction(supports, steps, newton, inverses, multi, n_multi, 0.0, 0.0, 1.0)
    if not ap >= 0:
        return False
    mu_aff = 0.0
    for t in range(n_multi):
        i = multi[t]
        for q in range(count[i]):
            mu_aff += (y[i, q] + ap * dy[i, q]) * (z[i, q] + ad * dz[i, q])
            cv[i, q] = dy[i, q] * dz[i, q]
    mu_aff /= n_var
    centring = min(max((mu_aff / mu) ** 3, 0.0), 1.0) if mu > 0 else 0.0
    target = centring * mu
    tau = max(_TAU, 1.0 - mu)
    ap, ad = _direction(supports, steps, newton, inverses, multi, n_multi, target, 1.0, tau)
    if not ap >= 0:
        return False
    pruning = not grown and target >= _PRUNE_MU
    root = math.sqrt(max(target, 1e-300))
    y_low = _PRUNE * root if pruning else -1.0
    z_high = root / _PRUNE
    bound = 0
    for t in range(n_multi):
        i = multi[t]
        for q in range(count[i]):
            y[i, q] += ap * dy[i, q]
            z[i, q] += ad * dz[i, q]
            if not y[i, q] > 0:  # rounding at the boundary: stay interior
                y[i, q] = 1e-300
            if not z[i, q] > 0:
                z[i, q] = 1e-300
            if y[i, q] < y_low and z[i, q] > z_high:
                bound += 1
    if bound > 0:
        sp.prune(supports, multi, n_multi, y_low, z_high, state.held)
    return True


@njit(cache=True, error_model="numpy")
def _direction(supports, steps, newton, inverses, multi, n_multi, target, corrected, tau):
    """One interior-point direction given the rows' block inverses (``inverses``) and the
    factored Schur complement.

    The complementarity target of entry ``(i, q)`` is ``target - second_order[i, q]``
    (Mehrotra's second-order term when ``corrected > 0``; a float flag, as a bool constant
    would make numba compile the function once per value). Writes ``steps.dy``, ``steps.dz``;
    returns the primal and dual step lengths to ``tau`` of the way to the boundary
    (``(-1, -1)`` on a failure). Only the rows ``multi[:n_multi]`` move.
    """
    classes, count, y, z = supports
    dyv, dzv, cv, bv, iy, rb = steps
    basic, goff, idx, c_vec, dh, applied = (
        newton.basic, newton.offsets, newton.nonbasic, newton.rhs, newton.root_curvature,
        newton.applied,
    )  # fmt: skip
    K = c_vec.shape[0]
    for k in range(K):
        c_vec[k] = 0.0
    # sweep 0: c = sum_i P_i' G_i rhs_i (each row's rhs kept in rb)
    for t in range(n_multi):
        i = multi[t]
        m = count[i]
        rq = basic[i]
        r = classes[i, rq]
        tr = target - cv[i, rq] if corrected > 0.0 else target
        rr = bv[i, rq] + tr * iy[i, rq]
        n1 = 0
        for q in range(m):
            if q == rq:
                continue
            idx[n1] = classes[i, q]
            tk = target - cv[i, q] if corrected > 0.0 else target
            rb[i, n1] = bv[i, q] + tk * iy[i, q] - rr
            n1 += 1
        tot = bk.apply(inverses, goff[i], n1, rb[i], applied)
        for p1 in range(n1):
            c_vec[idx[p1]] += applied[p1]
        c_vec[r] -= tot
    for k in range(K):
        c_vec[k] *= dh[k]
    if newton.matrix_free:
        used = cg.schur_solve(supports, multi, n_multi, basic, goff, inverses, dh,
                              newton.diagonal, newton.cg_work, newton.gathered, applied,
                              c_vec)  # fmt: skip
        newton.cg_count[0] += 1
        newton.cg_count[1] += abs(used)
        if used < 0:
            newton.cg_count[2] += 1
    else:
        chol_apply(newton.schur_factor, c_vec)
    for k in range(K):
        c_vec[k] *= dh[k]  # now the step of the column sums' multiplier
    # sweep 1: back substitution
    ap = 1.0
    ad = 1.0
    for t in range(n_multi):
        i = multi[t]
        m = count[i]
        rq = basic[i]
        pr = c_vec[classes[i, rq]]
        n1 = m - 1
        for p2 in range(n1):  # the right-hand side with the step (rb is not needed after)
            rb[i, p2] -= c_vec[classes[i, p2 if p2 < rq else p2 + 1]] - pr
        tot = bk.apply(inverses, goff[i], n1, rb[i], applied)
        for p1 in range(n1):
            dyv[i, p1 if p1 < rq else p1 + 1] = applied[p1]
        dyv[i, rq] = -tot
        for q in range(m):
            dy = dyv[i, q]
            tk = target - cv[i, q] if corrected > 0.0 else target
            zq = z[i, q]
            dz = tk * iy[i, q] - zq - zq * dy * iy[i, q]
            dzv[i, q] = dz
            if not (math.isfinite(dy) and math.isfinite(dz)):
                return -1.0, -1.0
            if dy < 0:
                ap = min(ap, -tau * y[i, q] / dy)
            if dz < 0:
                ad = min(ad, -tau * zq / dz)
    return ap, ad
