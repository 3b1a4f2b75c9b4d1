"""Data and settings shared by several test modules (import as ``from _helpers import ...``)."""

import itertools
import math

import numpy as np
import torch
from hypothesis import strategies as st
from sklearn.datasets import make_blobs

from skcce.losses import pseudo_label_objective
from skcce.solvers import solve_pseudo_labels

#: float32's unit roundoff, 2**-24
U32 = float(np.finfo(np.float32).eps) / 2

#: a small VGG-4 trained by Adam: one restart, one epoch, batches of 20 images
VGG4_ADAM = dict(
    model="vgg4",
    optimizer="adam",
    learning_rate=1e-3,
    max_epochs=1,
    batch_size=20,
    n_init=1,
    augment=None,
    random_state=0,
)


def linear_config(**changes):
    """A resolved TrainConfig of the linear head (what the estimator builds), with ``changes``."""
    from skcce._engine._train import TrainConfig

    base = dict(
        n_clusters=4, lam=100.0, fairness="reverse", loss="collision", prior=None,
        fairness_weight=1.3, optimizer="sgd", learning_rate=0.5, backbone_learning_rate=None,
        weight_decay=0.1, batch_size=64, max_epochs=1, solver_tol=1e-6, solver_max_iter=100,
        augment=None, augment_weight=1.0, device=torch.device("cpu"), amp=False, verbose=0,
    )  # fmt: skip
    return TrainConfig(**{**base, **changes})


def float32_blobs(n_samples, n_features, cluster_std):
    """Three well separated Gaussian blobs as float32 features, and their classes."""
    X, y = make_blobs(
        n_samples=n_samples,
        centers=3,
        n_features=n_features,
        cluster_std=cluster_std,
        random_state=0,
    )
    return X.astype(np.float32), y


def float32_logit_bound(model, X):
    """How far one evaluation of a fitted linear head's float32 logits on ``X`` may be from
    another's, per entry: a bound for comparing probabilities across CPUs, BLAS kernels or
    memory layouts.

    The logits ``z = W x + b`` are computed in float32 by the BLAS (MKL's SGEMM in torch's
    x86 wheels), whose kernel, and so its summation order and use of FMA, depends on the CPU
    and on the operands' layout: on AMD CPUs MKL runs its generic code path, on Intel CPUs
    its AVX2 or AVX-512 kernels (see .ci/run). Everything else of predict_proba is exact or
    float64: the normalised batch is rounded to float32 once, identically everywhere, and the
    softmax is taken in float64. A length-d float32 dot product in any order is within
    ``gamma_d = d u`` of the exact value relative to ``sum |terms|`` (worst case: too loose
    to see a change of 1e-4 in one weight), and in practice within about ``sqrt(d) u`` of it
    (rounding errors add like a random walk; Higham and Mary, 2019). Each evaluation is taken
    to be within ``sqrt(d + 1) u (|W||x| + |b|)`` of the exact logits, so two of them within
    twice that. Measured on tests/test_compat.py's pickle (MKL's generic, Intel AVX2 and
    SSE4.2 paths on one machine): at most 2.2 u (|W||x| + |b|), against the bound's 16.1.
    """
    layer = model.module_
    x = model._inputs.batch(X, slice(0, len(X)), "cpu", "flat").double().numpy()
    W = layer.weight.detach().double().numpy()
    b = layer.bias.detach().double().numpy()
    magnitude = np.abs(x) @ np.abs(W).T + np.abs(b)
    return 2 * np.sqrt(W.shape[1] + 1) * U32 * magnitude


def assert_proba_within_float32(actual, expected, logit_bound):
    """``actual`` and ``expected`` softmax rows differ by no more than logits ``logit_bound``
    apart allow: ``log p_k = z_k - logsumexp(z)`` moves by at most ``2 max_j |dz_j|``, so
    ``|p_k - p'_k| <= p'_k expm1(2 max_j |dz_j|)`` (plus float64 rounding of the softmax)."""
    tol = expected * np.expm1(2 * logit_bound.max(axis=1, keepdims=True)) + 1e-15
    excess = np.abs(actual - expected) - tol
    worst = np.unravel_index(np.argmax(excess), excess.shape)
    assert (excess <= 0).all(), (
        f"predict_proba differs from the expected values by more than float32 rounding "
        f"allows: at {worst}, |{actual[worst]!r} - {expected[worst]!r}| > {tol[worst]:.3g}"
    )


def count_default_augmentation(monkeypatch, views):
    """Make ``skcce.models.default_augmentation`` append the shape of every batch it is
    given to ``views`` (it still augments)."""
    import skcce.models

    built_in = skcce.models.default_augmentation

    def counting(input_shape):
        aug = built_in(input_shape)

        def counted(x, **kwargs):
            views.append(tuple(x.shape))
            return aug(x, **kwargs)

        return counted

    monkeypatch.setattr(skcce.models, "default_augmentation", counting)


# ----- the pseudo-label solvers (tests/test_solvers.py, tests/test_kernels.py) ----------------
#: probabilities as a network gives them (most rows confident), as rows of a random softmax,
#: with exact ties, with exact zeros; HARD: the instances the solvers are checked on
F64 = torch.float64


def realistic_probs(n, k, seed, lam_conf=6.0):
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(n, k, generator=g, dtype=F64)
    winner = torch.randint(0, k, (n,), generator=g)
    confident = torch.rand(n, generator=g) < 0.8
    logits[torch.arange(n), winner] += torch.where(confident, lam_conf, 1.0).to(F64)
    return torch.softmax(logits, dim=1)


def random_probs(n, k, seed, scale=1.0):
    g = torch.Generator().manual_seed(seed)
    return torch.softmax(scale * torch.randn(n, k, generator=g, dtype=F64), dim=1)


def tied_probs(n, k, seed):
    """Exact ties between each row's two leading classes (and duplicated rows)."""
    P = realistic_probs(n, k, seed)
    top2 = P.topk(2, dim=1).indices
    rows = torch.arange(n)
    m = P.amax(dim=1)
    P[rows, top2[:, 1]] = m
    P = P / P.sum(dim=1, keepdim=True)
    P[n // 2 :] = P[0]  # many identical rows, all tied
    return P


def zero_probs(n, k, seed):
    """Exact zeros in sigma, one-hot rows included."""
    g = torch.Generator().manual_seed(seed)
    P = random_probs(n, k, seed, 2.0)
    keep = (torch.rand(n, k, generator=g, dtype=F64) < 0.4) | (P == P.amax(1, keepdim=True))
    P = torch.where(keep, P, 0)
    P[: n // 10] = torch.nn.functional.one_hot(torch.arange(n // 10) % k, k).to(F64)
    return P / P.sum(dim=1, keepdim=True)


HARD = {
    "realistic": lambda s: realistic_probs(250, 10, s),
    "random": lambda s: random_probs(250, 10, s),
    "k20": lambda s: realistic_probs(250, 20, s),
    "ties": lambda s: tied_probs(250, 10, s),
    "zeros": lambda s: zero_probs(250, 10, s),
    "k2": lambda s: random_probs(250, 2, s),
    "k2_ties": lambda s: torch.tensor([[0.5, 0.5]] * 125 + [[0.7, 0.3]] * 125, dtype=F64),
}


#: every (loss, fairness, method) the solvers take
COMBOS = [
    (loss, fair, method)
    for loss, fair, method in itertools.product(
        ("collision", "shannon", "reverse"), ("reverse", "forward"), ("newton", "em", "pgd")
    )
    if not (method == "em" and fair == "forward") and not (method == "newton" and loss == "shannon")
]


def cvx_optimum(probs, lam, fairness="reverse", prior=None, loss="collision"):
    """F* by cvxpy + Clarabel (exponential cone), same summed-rows convention as skcce."""
    import cvxpy as cp  # a test-only dependency (the callers skip without it)

    P = np.asarray(probs, dtype=np.float64)
    n, k = P.shape
    u = np.full(k, 1.0 / k) if prior is None else np.asarray(prior, dtype=np.float64)
    Y = cp.Variable((n, k), nonneg=True)
    cons = [cp.sum(Y, axis=1) == 1]
    if loss == "collision":
        rows = -cp.sum(cp.log(cp.sum(cp.multiply(P, Y), axis=1)))
    elif loss == "shannon":
        pos = P > 0
        rows = cp.sum(cp.multiply(np.where(pos, -np.log(np.where(pos, P, 1)), 0), Y))
        if (~pos).any():
            cons.append(cp.multiply((~pos).astype(float), Y) == 0)
    else:
        r, c = np.nonzero(P > 0)
        rows = -cp.sum(cp.multiply(P[r, c], cp.log(Y[r, c])))
    ybar = cp.sum(Y, axis=0) / n
    act = np.nonzero(u > 0)[0]
    if fairness == "reverse":
        fair = -cp.sum(cp.multiply(u[act], cp.log(ybar[act])))
    else:
        fair = cp.sum(cp.rel_entr(ybar[act], u[act]))
        if act.size < k:
            cons.append(Y[:, np.nonzero(u == 0)[0]] == 0)
    if _infinite_optimum(P, u, fairness, loss):
        return math.inf
    problem = cp.Problem(cp.Minimize(rows + lam * fair), cons)
    problem.solve(solver=cp.CLARABEL, tol_gap_abs=1e-10, tol_gap_rel=1e-10, tol_feas=1e-10)
    assert problem.status in ("optimal", "optimal_inaccurate"), problem.status
    # Evaluate F at the reference's labels (rows clipped and renormalised onto the simplex):
    # the solver's own value suffers from cancellation in lam * KL at large lam.
    Yr = np.clip(Y.value, 0, None)
    if loss == "shannon":
        Yr[P == 0] = 0
    if fairness == "forward":
        Yr[:, u == 0] = 0
    Yr /= Yr.sum(axis=1, keepdims=True)
    prior_t = torch.as_tensor(u, dtype=torch.float64)
    value = pseudo_label_objective(
        torch.as_tensor(Yr), torch.as_tensor(P), lam=lam, fairness=fairness, prior=prior_t,
        loss=loss,
    )  # fmt: skip
    return float(value)


def _infinite_optimum(P, u, fairness, loss):
    """Instances where every feasible Y has F = +inf (skipped in agreement tests)."""
    if fairness == "forward" and loss == "reverse":  # y_k = 0 forced where sigma_k > 0
        return bool((P[:, u == 0] > 0).any())
    if fairness == "forward" and loss == "shannon":  # a row with no allowed class
        return bool(((P > 0) & (u > 0)).sum(axis=1).min() == 0)
    if fairness == "reverse" and loss == "shannon":  # an active class nobody may take
        return bool(((P > 0).sum(axis=0) == 0)[u > 0].any())
    return False


def check_result(res, probs, tol):
    """A valid solver result: labels of the input's shape and dtype on the simplex, no NaN,
    and a certificate that holds whenever ``converged`` claims it."""
    Y = res.labels
    assert Y.shape == probs.shape
    assert Y.dtype == probs.dtype
    assert bool(torch.isfinite(Y).all())
    assert bool((Y >= 0).all())
    row_tol = 1e-5 if Y.dtype == torch.float32 else 1e-10
    assert float((Y.sum(dim=1) - 1).abs().max()) <= row_tol
    assert not math.isnan(res.objective) and not math.isnan(res.gap)
    if res.converged:
        assert math.isfinite(res.objective)
        assert res.gap <= tol * max(abs(res.objective), 1.0) * (1 + 1e-9)


@st.composite
def problems(draw):
    """A small pseudo-label problem of any valid kind: ``(P, lam, prior, loss, fairness,
    method)`` (ties, exact zeros, zero priors, tiny and huge ``lam``, float32 and float64)."""
    n = draw(st.integers(1, 7))
    k = draw(st.integers(1, 5))
    scale = draw(st.sampled_from([0.0, 1.0, 5.0, 40.0]))
    seed = draw(st.integers(0, 2**16))
    g = torch.Generator().manual_seed(seed)
    P = torch.softmax(scale * torch.randn(n, k, generator=g, dtype=torch.float64), dim=1)
    if draw(st.booleans()):  # exact zeros (keep at least the row maximum)
        keep = (torch.rand(n, k, generator=g, dtype=torch.float64) < 0.5) | (
            P == P.amax(1, keepdim=True)
        )
        P = torch.where(keep, P, 0)
        P = P / P.sum(dim=1, keepdim=True)
    if draw(st.booleans()) and k >= 2:  # ties at sigma_max
        P[:, 1] = P[:, 0] = P[:, :2].amax(dim=1)
        P = P / P.sum(dim=1, keepdim=True)
    lam = draw(st.sampled_from([1e-8, 0.5, 10.0, 100.0, 1e6]))
    prior = None
    if draw(st.booleans()):
        u = torch.rand(k, generator=g, dtype=torch.float64)
        if k >= 2 and draw(st.booleans()):
            u[draw(st.integers(0, k - 1))] = 0.0
        prior = (u / u.sum()) if float(u.sum()) > 0 else None
    loss, fair, method = draw(st.sampled_from(COMBOS + [(None, None, "auto")]))
    if method == "auto":
        loss = draw(st.sampled_from(["collision", "shannon", "reverse"]))
        fair = draw(st.sampled_from(["reverse", "forward"]))
    dtype = draw(st.sampled_from([torch.float32, torch.float64]))
    return P.to(dtype), lam, prior, loss, fair, method


def check_valid_output(case):
    """The solvers' property on one draw of :func:`problems`: a valid, finite result."""
    P, lam, prior, loss, fair, method = case
    # a cap for every method (newton's PGD fallback included): the property is a valid output,
    # and degenerate draws (tiny N, ties, huge lam) would otherwise run 20000 PGD iterations
    max_iter = 200
    res = solve_pseudo_labels(
        P, lam=lam, prior=prior, loss=loss, fairness=fair, method=method, max_iter=max_iter
    )
    tol = 1e-5 if P.dtype == torch.float32 else 1e-7
    check_result(res, P, tol)
    if res.converged:
        value = pseudo_label_objective(
            res.labels.double(), P.double(), lam=lam, fairness=fair, prior=prior if prior is None
            else torch.as_tensor(prior, dtype=torch.float64), loss=loss,
        )  # fmt: skip
        assert math.isfinite(float(value))
