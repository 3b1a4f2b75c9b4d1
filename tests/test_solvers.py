"""Tests for skcce.solvers and the EM / dual machinery behind it.

The reference optimum F* comes from an independent generic convex solver (cvxpy with the
Clarabel interior-point method on the exponential-cone form of F); it is a test-only dependency.
Agreement is measured as |F - F*| / max(|F*|, 1).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from _helpers import COMBOS, HARD, check_result, check_valid_output, cvx_optimum, problems
from hypothesis import HealthCheck, given, settings

from skcce.losses import pseudo_label_objective
from skcce.solvers import solve_pseudo_labels
from skcce.solvers._em import MSTEPS, e_step, mstep_collision

cp = pytest.importorskip("cvxpy")

D = torch.float64
AGREE = 1e-6


def _rel(value, ref):
    return abs(value - ref) / max(abs(ref), 1.0)


def _softmax(logits):
    return torch.softmax(torch.as_tensor(logits, dtype=D), dim=1)


def _instances():
    g = torch.Generator().manual_seed(0)
    out = {}
    out["random"] = (_softmax(torch.randn(12, 4, generator=g, dtype=D)), 10.0, None)
    conf = 6 * torch.randn(14, 3, generator=g, dtype=D)
    out["confident"] = (_softmax(conf), 100.0, None)
    P = _softmax(torch.randn(10, 4, generator=g, dtype=D))
    P[:4, 0] = 0.0  # exact zeros, incl. one-hot rows
    P[4:6, 1:] = 0.0
    P = P / P.sum(dim=1, keepdim=True)
    out["zeros"] = (P, 5.0, None)
    ties = torch.tensor([[0.4, 0.4, 0.2], [0.3, 0.3, 0.4], [0.5, 0.5, 0.0]] * 3, dtype=D)
    out["ties"] = (ties, 3.0, None)
    out["k2"] = (_softmax(torch.randn(9, 2, generator=g, dtype=D)), 2.0, None)
    out["prior"] = (_softmax(torch.randn(10, 3, generator=g, dtype=D)), 20.0, [0.5, 0.3, 0.2])
    out["prior_zero"] = (_softmax(torch.randn(10, 3, generator=g, dtype=D)), 20.0, [0.6, 0.0, 0.4])
    out["tiny_lam"] = (_softmax(torch.randn(8, 3, generator=g, dtype=D)), 1e-8, None)
    return out


INSTANCES = _instances()


@pytest.fixture(scope="module")
def references():
    cache = {}

    def get(name, loss, fair):
        key = (name, loss, fair)
        if key not in cache:
            P, lam, prior = INSTANCES[name]
            cache[key] = cvx_optimum(P.numpy(), lam, fair, prior, loss)
        return cache[key]

    return get


def _max_iter(method):
    return {"newton": 100, "em": 20000, "pgd": 20000}[method]


def _pgd_limit(name, loss, fair, method):
    """Known limitation of the PGD baseline: with confident predictions the reverse-loss
    gradient -sigma/y explodes at the boundary and the Shannon objective is linear with a
    far-off kink, so 1e-8 is not certified within the budget (newton is the default)."""
    return (
        method == "pgd"
        and name == "confident"
        and (loss, fair) != ("collision", "reverse")
        and (loss == "reverse" or fair == "reverse")
    )


PGD_LIMIT = [pytest.mark.slow, pytest.mark.xfail(strict=True, reason="PGD baseline too slow")]
AGREE_CASES = [
    pytest.param(
        name, loss, fair, method,
        marks=PGD_LIMIT if _pgd_limit(name, loss, fair, method) else (),
        id=f"{loss}-{fair}-{method}-{name}",
    )
    for name in sorted(INSTANCES)
    for loss, fair, method in COMBOS
]  # fmt: skip


@pytest.mark.parametrize(("name", "loss", "fair", "method"), AGREE_CASES)
def test_agrees_with_conic_solver(references, name, loss, fair, method):
    P, lam, prior = INSTANCES[name]
    max_iter = 2000 if _pgd_limit(name, loss, fair, method) else _max_iter(method)
    ref = references(name, loss, fair)
    if not math.isfinite(ref):
        pytest.skip("infinite optimum")
    res = solve_pseudo_labels(
        P, lam=lam, fairness=fair, prior=prior, loss=loss, method=method, tol=1e-8,
        max_iter=max_iter,
    )  # fmt: skip
    assert res.method == method
    assert _rel(res.objective, ref) <= AGREE, (res.objective, ref, res.gap, res.n_iter)
    check_result(res, P, 1e-8)
    assert res.converged


#: (instance, lam, loss, fairness) for the default method: large lam, and the kernels' hard
#: instances (tests/_helpers.py HARD: ties, exact zeros, two tied classes; 250 rows)
DEFAULT_CASES = [
    *[(("large", 7), lam, loss, fair) for lam in (1e4, 1e6) for loss in ("collision", "reverse")
      for fair in ("reverse", "forward")],
    (("ties", 2), 100.0, "collision", "reverse"),
    (("zeros", 2), 1e4, "collision", "reverse"),
    (("k2_ties", 2), 1.0, "collision", "forward"),
    (("realistic", 2), 1e4, "collision", "forward"),
    (("random", 2), 100.0, "collision", "reverse"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("instance", "lam", "loss", "fair"),
    DEFAULT_CASES,
    ids=[f"{name}-{lam:g}-{loss}-{fair}" for (name, _), lam, loss, fair in DEFAULT_CASES],
)
def test_default_method_agrees_with_conic_solver(instance, lam, loss, fair):
    name, seed = instance
    if name == "large":
        P = _softmax(2 * torch.randn(20, 4, generator=torch.Generator().manual_seed(seed), dtype=D))
    else:
        P = HARD[name](seed)
    # tol 1e-7 from lam = 1e4: the certified gap bottoms out near 1e-7 relative in float64 (the
    # dual's terms are of order lam), so 1e-8 is below working precision there
    tol = 1e-8 if lam < 1e4 else 1e-7
    res = solve_pseudo_labels(P, lam=lam, fairness=fair, loss=loss, tol=tol)
    ref = cvx_optimum(P.numpy(), lam, fair, None, loss)
    assert res.converged
    assert res.gap <= tol * max(abs(res.objective), 1.0)
    # from lam = 1e4 the conic solver itself is only accurate to ~1e-6..1e-5 (measured):
    # skcce is never worse than it; below, the two agree
    assert (res.objective - ref) / max(abs(ref), 1.0) <= AGREE, (res.objective, ref, res.gap)
    if lam < 1e4:
        assert _rel(res.objective, ref) <= AGREE, (res.objective, ref, res.gap)


# ----- certificate ------------------------------------------------------------------------------
@pytest.mark.parametrize(("loss", "fair", "method"), COMBOS)
def test_converged_only_when_gap_certified(references, loss, fair, method):
    P, lam, prior = INSTANCES["random"]
    ref = references("random", loss, fair)
    for max_iter, tol in ((1, 1e-12), (3, 1e-10), (_max_iter(method), 1e-6)):
        res = solve_pseudo_labels(
            P, lam=lam, fairness=fair, loss=loss, method=method, tol=tol, max_iter=max_iter
        )
        assert res.converged == (res.gap <= tol * max(abs(res.objective), 1.0))
        # the gap is a true upper bound on the suboptimality (up to the reference's accuracy)
        assert res.objective - ref <= res.gap + 1e-7 * max(abs(ref), 1.0)
        assert res.gap >= -1e-9 * max(abs(ref), 1.0)


# ----- properties (hypothesis) -------------------------------------------------------------------
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problems())
def test_valid_output_for_any_valid_input(case):
    check_valid_output(case)


def test_k1_is_trivial():
    P = torch.ones(5, 1, dtype=D)
    for loss, fair, method in COMBOS:
        res = solve_pseudo_labels(P, lam=3.0, loss=loss, fairness=fair, method=method)
        assert torch.equal(res.labels, torch.ones(5, 1, dtype=D))
        assert res.converged and res.objective == pytest.approx(0.0, abs=1e-12)


def test_lam_zero_is_per_row_closed_form():
    P = torch.tensor([[0.2, 0.5, 0.3], [0.6, 0.1, 0.3]], dtype=D)
    res = solve_pseudo_labels(P, lam=0.0)
    assert torch.equal(res.labels, torch.tensor([[0.0, 1.0, 0.0], [1.0, 0.0, 0.0]], dtype=D))
    res = solve_pseudo_labels(P, lam=0.0, loss="reverse")
    assert torch.allclose(res.labels, P)


# ----- the paper's EM ---------------------------------------------------------------------------
@pytest.mark.parametrize("loss", ["collision", "shannon", "reverse"])
@pytest.mark.parametrize("lam", [0.5, 100.0, 1e4])
def test_em_objective_never_increases(loss, lam):
    g = torch.Generator().manual_seed(11)
    P = _softmax(3 * torch.randn(40, 5, generator=g, dtype=D))
    u = torch.full((5,), 0.2, dtype=D)
    Y = P.clone()
    prev = float(pseudo_label_objective(Y, P, lam=lam, loss=loss))
    for _ in range(60):
        Y = MSTEPS[loss](P, e_step(Y, u), lam)
        value = float(pseudo_label_objective(Y, P, lam=lam, loss=loss))
        assert value <= prev + 1e-11 * max(abs(prev), 1.0)
        prev = value


def _mstep_row_reference(sigma, a, lam):
    """min_y -ln(sigma'y) - lam sum_k a_k ln y_k on the simplex, by cvxpy (one row)."""
    y = cp.Variable(sigma.shape[0], nonneg=True)
    pos = np.nonzero(a > 0)[0]
    obj = -cp.log(sigma @ y)
    if pos.size:
        obj = obj - lam * cp.sum(cp.multiply(a[pos], cp.log(y[pos])))
    problem = cp.Problem(cp.Minimize(obj), [cp.sum(y) == 1])
    problem.solve(solver=cp.CLARABEL)
    return problem.value


def _mstep_row_value(sigma, a, lam, y):
    pos = a > 0
    return -np.log(sigma @ y) - lam * np.sum(a[pos] * np.log(y[pos]))


MSTEP_CASES = {
    # all a_k > 0: Theorem 1 / Lemma 1
    "main": ([0.5, 0.3, 0.2], [0.1, 0.2, 0.05]),
    "main_tie": ([0.4, 0.4, 0.2], [0.1, 0.1, 0.3]),
    # K_o = {0}, sigma_c > every other sigma and y_c > 0: the closed forms of section 3
    "closed_form": ([0.6, 0.3, 0.1], [0.0, 0.001, 0.002]),
    # K_o = {0, 2}: the mass goes to c = argmax over K_o only
    "closed_form_two": ([0.5, 0.2, 0.3], [0.0, 0.002, 0.0]),
    # sigma_c not strictly greater than max over the complement (tie): KKT fallback y_c = 0
    "tie_fallback": ([0.4, 0.4, 0.2], [0.0, 0.01, 0.01]),
    # sigma_c smaller: fallback
    "smaller_fallback": ([0.2, 0.5, 0.3], [0.0, 0.01, 0.01]),
    # sigma_c largest but y_c <= 0 (large weights): fallback
    "infeasible_fallback": ([0.5, 0.45, 0.05], [0.0, 0.2, 0.2]),
    # no weight at all (A = 0): one-hot argmax
    "no_weight": ([0.2, 0.7, 0.1], [0.0, 0.0, 0.0]),
    # zeros in sigma
    "sigma_zero": ([0.0, 0.7, 0.3], [0.05, 0.0, 0.1]),
}


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_mstep_section3_cases_against_per_row_convex_solve(dtype):
    lam = 10.0
    sig = torch.tensor([c[0] for c in MSTEP_CASES.values()], dtype=dtype)
    a = torch.tensor([c[1] for c in MSTEP_CASES.values()], dtype=dtype)
    Y = mstep_collision(sig, a, lam)
    assert bool(torch.isfinite(Y).all()) and bool((Y >= 0).all())
    assert torch.allclose(Y.sum(dim=1), torch.ones(len(MSTEP_CASES), dtype=dtype))
    rtol = 1e-5 if dtype == torch.float32 else 1e-7
    for i, name in enumerate(MSTEP_CASES):
        s, w = sig[i].double().numpy(), a[i].double().numpy()
        ref = _mstep_row_reference(s, w, lam)
        got = _mstep_row_value(s, w, lam, Y[i].double().numpy())
        assert _rel(got, ref) <= rtol, (name, got, ref, Y[i])
    names = list(MSTEP_CASES)
    # the structure section 3 predicts
    y = Y[names.index("closed_form")].double()
    # y_k = lam a_k / ((1 + lam A)(1 - s_k / s_c)) for k with a_k > 0
    A = 0.003
    expect1 = lam * 0.001 / ((1 + lam * A) * (1 - 0.3 / 0.6))
    expect2 = lam * 0.002 / ((1 + lam * A) * (1 - 0.1 / 0.6))
    assert float(y[1]) == pytest.approx(expect1, rel=10 * rtol)
    assert float(y[2]) == pytest.approx(expect2, rel=10 * rtol)
    assert float(y[0]) == pytest.approx(1 - expect1 - expect2, rel=10 * rtol)
    assert float(Y[names.index("closed_form_two"), 2]) == 0.0
    for name in ("tie_fallback", "smaller_fallback", "infeasible_fallback"):
        assert float(Y[names.index(name), 0]) == 0.0, name
    assert Y[names.index("no_weight")].tolist() == [0.0, 1.0, 0.0]


# ----- dtypes and devices -----------------------------------------------------------------------
@pytest.mark.parametrize("loss", ["collision", "shannon", "reverse"])
def test_float32_keeps_dtype_and_agrees(references, loss):
    P, lam, _ = INSTANCES["random"]
    ref = references("random", loss, "reverse")
    res = solve_pseudo_labels(P.float(), lam=lam, loss=loss)
    check_result(res, P.float(), 1e-5)
    assert res.labels.dtype == torch.float32
    assert res.converged
    assert _rel(res.objective, ref) <= 1e-4


def test_numpy_and_list_inputs_become_float64():
    P = [[0.7, 0.3], [0.2, 0.8], [0.5, 0.5]]
    res = solve_pseudo_labels(P, lam=1.0)
    assert res.labels.dtype == torch.float64
    res2 = solve_pseudo_labels(np.asarray(P), lam=1.0)
    assert torch.equal(res.labels, res2.labels)


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize(("loss", "fair", "method"), COMBOS)
def test_cuda_matches_cpu(loss, fair, method):
    P, lam, _ = INSTANCES["random"]
    cpu = solve_pseudo_labels(P, lam=lam, loss=loss, fairness=fair, method=method, tol=1e-8)
    gpu = solve_pseudo_labels(P.cuda(), lam=lam, loss=loss, fairness=fair, method=method, tol=1e-8)
    assert gpu.labels.device.type == "cuda"
    assert gpu.converged
    assert _rel(gpu.objective, cpu.objective) <= 1e-7


# ----- bad input -------------------------------------------------------------------------------
GOOD = torch.tensor([[0.5, 0.5], [0.9, 0.1]], dtype=D)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"probs": torch.tensor([[0.5, float("nan")], [0.9, 0.1]])}, "probs"),
        ({"probs": torch.tensor([[0.5, float("inf")], [0.9, 0.1]])}, "probs"),
        ({"probs": torch.tensor([[0.5, 0.6], [0.9, 0.1]])}, "probs"),
        ({"probs": torch.tensor([[1.5, -0.5], [0.9, 0.1]])}, "probs"),
        ({"probs": torch.tensor([2.0, -1.0])}, "probs"),
        ({"probs": torch.zeros(0, 3)}, "probs"),
        ({"probs": np.array([["a", "b"]])}, "probs"),
        ({"lam": -1.0}, "lam"),
        ({"lam": float("nan")}, "lam"),
        ({"lam": "big"}, "lam"),
        ({"prior": [0.5, 0.3]}, "prior"),
        ({"prior": [0.5, 0.3, 0.2]}, "prior"),
        ({"prior": [1.5, -0.5]}, "prior"),
        ({"prior": [0.0, 0.0]}, "prior"),
        ({"init": torch.ones(2, 3, dtype=D) / 3}, "init"),
        ({"init": torch.tensor([[0.5, 0.7], [0.5, 0.5]], dtype=D)}, "init"),
        ({"fairness": "both"}, "fairness"),
        ({"loss": "hinge"}, "loss"),
        ({"method": "lbfgs"}, "method"),
        ({"method": "em", "fairness": "forward"}, "em"),
        ({"method": "newton", "loss": "shannon"}, "newton"),
    ],
)
def test_bad_input_raises_naming_the_argument(kwargs, match, monkeypatch):
    """A clear error naming the argument, raised before the compiled kernels see the input."""
    from skcce.solvers import _compiled
    from skcce.solvers import _kernels as kn

    def boom(*args, **kw):
        raise AssertionError("compiled path reached with invalid input")

    monkeypatch.setattr(_compiled, "ENABLED", True)
    monkeypatch.setattr(kn, "solve_collision_numba", boom)
    args = {"probs": GOOD, "lam": 1.0} | kwargs
    probs = args.pop("probs")
    with pytest.raises(ValueError, match=match):
        solve_pseudo_labels(probs, **args)


@pytest.mark.parametrize("method", ["newton", "newton-cg", "newton-dense", "em", "pgd", "sinkhorn"])
def test_every_method_returns_the_one_result_type_through_the_table(method):
    from skcce.solvers import _SOLVERS, _solve, make_problem
    from skcce.solvers._common import PseudoLabelResult

    g = torch.Generator().manual_seed(1)
    probs = torch.softmax(torch.randn(20, 3, generator=g, dtype=torch.float64), 1)
    loss = "shannon" if method == "sinkhorn" else "collision"
    public = solve_pseudo_labels(probs, lam=5.0, loss=loss, method=method, tol=1e-8)
    problem = make_problem(probs, lam=5.0, fairness="reverse", prior=None, loss=loss)
    private = _solve(problem, method, tol=1e-8)
    assert type(public) is type(private) is PseudoLabelResult and public.method == method
    assert torch.equal(public.labels, private.labels) and public.n_iter == private.n_iter
    assert set(_SOLVERS) == {"newton", "newton-cg", "newton-dense", "em", "pgd", "sinkhorn"}
