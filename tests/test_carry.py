"""The fairness term's carry: column mass from earlier rows in the marginal (s + c) / (N + sum c).

Checked here: no carry (None or zeros) is the batch problem itself; the torch
:class:`~skcce.solvers._duality.Problem` agrees with the compiled kernels' objective, multiplier
and certificate; every method reaches the same certified optimum; a brute-force minimiser of a
tiny problem agrees with it; and bad carries are refused.
"""

import numpy as np
import pytest
import torch
from scipy.optimize import minimize

from skcce.solvers import _compiled, _solve, make_problem, solve_pseudo_labels
from skcce.solvers import _kernels as kn
from skcce.solvers._duality import Problem, best_response
from skcce.solvers._em import e_step, mstep_collision

N, K, LAM = 40, 5, 20.0


def _probs(n=N, k=K, seed=0):
    rng = np.random.default_rng(seed)
    z = 2.0 * rng.normal(size=(n, k))
    p = np.exp(z - z.max(axis=1, keepdims=True))
    return torch.from_numpy(p / p.sum(axis=1, keepdims=True))


def _prior(k=K):
    u = np.arange(1.0, k + 1)
    return u / u.sum()


def _carries(n=N, k=K):
    """A carry proportional to the prior, and one concentrated on two classes."""
    spread = 0.5 * n * _prior(k)
    lumped = np.zeros(k)
    lumped[0], lumped[3] = 0.75 * n, 0.25 * n
    return {"spread": spread, "lumped": lumped}


def _solve_with(method, compiled, n=N, **kw):
    """A solve of the ``n`` rows of :func:`_probs` (lam ``LAM * n / N``) on one path."""
    with _compiled.using(compiled):
        return solve_pseudo_labels(_probs(n), lam=LAM * n / N, prior=_prior(), method=method, **kw)


# ----- no carry -------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "method, compiled, fairness",
    [
        ("newton", True, "reverse"),
        ("newton", True, "forward"),
        ("em", True, "reverse"),
        ("newton", False, "reverse"),
        ("newton", False, "forward"),
        ("em", False, "reverse"),
        ("pgd", False, "forward"),
    ],
)
def test_zero_carry_is_the_batch_problem(method, compiled, fairness):
    ref = _solve_with(method, compiled, fairness=fairness)
    res = _solve_with(method, compiled, fairness=fairness, carry=np.zeros(K))
    assert res.backend == ref.backend == ("compiled" if compiled else "torch")
    assert torch.equal(res.labels, ref.labels)
    assert (res.objective, res.gap, res.n_iter) == (ref.objective, ref.gap, ref.n_iter)


def test_zero_carry_problem_has_no_carry():
    P = _probs()
    u = torch.from_numpy(_prior())
    for carry in (None, np.zeros(K), torch.zeros(K)):
        problem = Problem(P, LAM, "reverse", u, "collision", carry)
        assert problem.carry is None and problem.carry_np is None and problem.n_eff == N


# ----- the torch problem against the kernels --------------------------------------------------
@pytest.mark.parametrize("fairness", ["reverse", "forward"])
@pytest.mark.parametrize("name", ["spread", "lumped"])
def test_problem_matches_kernels(fairness, name):
    carry = _carries()[name]
    P = _probs()
    u = _prior()
    forward = fairness == "forward"
    problem = Problem(P, LAM, fairness, torch.from_numpy(u), "collision", carry)
    assert problem.n_eff == pytest.approx(N + carry.sum(), rel=1e-15)
    sigma = P.numpy()
    # labels with an empty column (class 1 gets nothing) and soft ones
    Y = torch.from_numpy(0.7 * sigma + 0.3 * u)
    Y_empty = Y.clone()
    Y_empty[:, 2] += Y_empty[:, 1]
    Y_empty[:, 1] = 0.0
    for labels in (Y, Y_empty):
        Yn = labels.numpy()
        s = Yn.sum(axis=0)
        F = float(problem.objective(labels))
        assert F == pytest.approx(kn.objective(sigma, Yn, carry, u, LAM, forward), rel=1e-12)
        w = problem.initial_w(labels)
        w_kn = kn.initial_w(s, carry, u, LAM, N, forward)
        np.testing.assert_allclose(w.numpy(), w_kn, rtol=1e-12, atol=1e-14)
        value, gap = problem.gap(labels, w)
        F_kn, q_kn, _ = kn.certificate(sigma, Yn, carry, u, LAM, forward)
        assert float(value) == pytest.approx(F_kn, rel=1e-12)
        assert float(gap) == pytest.approx(F_kn - q_kn, rel=1e-9, abs=1e-11)
        # the dual at a multiplier whose unconstrained sums fall below the carry (clipped)
        w2 = w * 1.5 if fairness == "reverse" else w + 0.5
        _, psi = best_response(problem, w2)
        q = float(problem.dual_value(w2, psi))
        q_kn = kn.dual_value(float(psi.sum()), w2.numpy(), carry, u, LAM, N, forward)
        assert q == pytest.approx(q_kn, rel=1e-12)
        assert bool((problem.dual_sums(w2) >= 0).all())


def test_em_step_matches_kernel():
    carry = _carries()["lumped"]
    P, u = _probs(), _prior()
    Y = 0.7 * P + 0.3 * torch.from_numpy(u)
    ref = kn.em_step(P.numpy(), Y.numpy(), carry, u, LAM)
    ut, ct = torch.from_numpy(u), torch.from_numpy(carry)
    mine = mstep_collision(P, e_step(Y, ut, ct), LAM)
    np.testing.assert_allclose(mine.numpy(), ref, rtol=1e-10, atol=1e-12)


# ----- every method reaches the same certified optimum ---------------------------------------
def _runs(loss, fairness):
    """(method, compiled) pairs that solve this loss and fairness."""
    runs = [("pgd", False)]
    if loss != "shannon":
        runs.append(("newton", False))
    if loss == "collision":
        runs.append(("newton", True))
    if fairness == "reverse":
        runs.append(("em", False))
        if loss == "collision":
            runs.append(("em", True))
    return runs


@pytest.mark.parametrize("fairness", ["reverse", "forward"])
@pytest.mark.parametrize("name", ["spread", "lumped"])
@pytest.mark.parametrize("loss", ["collision", "shannon", "reverse"])
def test_methods_agree_with_carry(loss, fairness, name):
    n = 10 if loss == "reverse" else N  # PGD takes about 100 n steps on the reverse loss
    carry = _carries(n)[name]
    values = {}
    for method, compiled in _runs(loss, fairness):
        res = _solve_with(method, compiled, n, fairness=fairness, loss=loss, carry=carry)
        assert res.converged, (method, compiled)
        assert res.backend == ("compiled" if compiled else "torch")
        assert res.gap <= 1e-7 * max(abs(res.objective), 1.0)
        # the certificate of the returned labels, recomputed by the torch problem
        u = torch.from_numpy(_prior())
        problem = Problem(_probs(n), LAM * n / N, fairness, u, loss, carry)
        value, gap = problem.gap(res.labels, problem.initial_w(res.labels))
        assert float(value) == pytest.approx(res.objective, rel=1e-12)
        assert float(gap) <= 1e-6 * max(abs(float(value)), 1.0)
        values[(method, compiled)] = res.objective
    ref = min(values.values())
    for key, v in values.items():
        assert v == pytest.approx(ref, rel=1e-6), key


def test_carry_changes_the_optimum():
    plain = _solve_with("newton", True, fairness="reverse")
    carried = _solve_with("newton", True, fairness="reverse", carry=_carries()["lumped"])
    # mass carried on classes 0 and 3 moves the batch's labels to the other classes
    s0, s1 = plain.labels.sum(dim=0), carried.labels.sum(dim=0)
    assert s1[0] < s0[0] and s1[3] < s0[3]
    assert s1[1] > s0[1] and s1[2] > s0[2] and s1[4] > s0[4]


def test_engine_path_matches_public_entry():
    carry = _carries()["spread"]
    P, u = _probs(), torch.from_numpy(_prior())
    problem = make_problem(P, lam=LAM, fairness="forward", prior=u, loss="collision",
                           carry=torch.from_numpy(carry))  # fmt: skip
    res = _solve(problem, "newton", tol=1e-7)
    ref = solve_pseudo_labels(P, lam=LAM, fairness="forward", prior=u, carry=carry)
    assert torch.equal(res.labels, ref.labels)


# ----- an independent optimum ----------------------------------------------------------------
def _brute_objective(y1, sigma, lam, u, carry, fairness):
    """F of the labels (y1, 1 - y1) per row (K = 2), written out with NumPy."""
    Y = np.stack([y1, 1.0 - y1], axis=1)
    rows = -np.log((Y * sigma).sum(axis=1)).sum()
    m = (Y.sum(axis=0) + carry) / (len(Y) + carry.sum())
    if fairness == "reverse":
        if np.any(m <= 0):
            return np.inf
        return rows + lam * float((u * np.log(u / m)).sum())
    mm = np.maximum(m, 1e-300)
    return rows + lam * float((m * np.log(mm / u)).sum())


@pytest.mark.parametrize("fairness", ["reverse", "forward"])
@pytest.mark.parametrize("carry", [[0.0, 0.0], [2.0, 0.5], [0.0, 4.0]])
def test_tiny_problem_against_scipy(fairness, carry):
    sigma = np.array([[0.7, 0.3], [0.55, 0.45], [0.2, 0.8]])
    u, lam = np.array([0.4, 0.6]), 3.0
    carry = np.array(carry)
    f = lambda y1: _brute_objective(y1, sigma, lam, u, carry, fairness)  # noqa: E731
    best = np.inf
    for start in ([0.5, 0.5, 0.5], [0.9, 0.9, 0.1], [0.1, 0.1, 0.9], [0.99, 0.99, 0.99]):
        opt = minimize(f, start, method="L-BFGS-B", bounds=[(0.0, 1.0)] * 3,
                       options={"ftol": 1e-15, "gtol": 1e-12})  # fmt: skip
        best = min(best, opt.fun)
    for method, compiled in _runs("collision", fairness):
        with _compiled.using(compiled):
            res = solve_pseudo_labels(torch.from_numpy(sigma), lam=lam, fairness=fairness,
                                      prior=u, carry=carry, method=method, tol=1e-10)  # fmt: skip
        assert res.converged
        y1 = res.labels[:, 0].numpy()
        assert f(y1) == pytest.approx(res.objective, rel=1e-12)
        assert res.objective <= best + 1e-9
        assert res.objective == pytest.approx(best, rel=1e-6, abs=1e-8), (method, compiled)


@pytest.mark.parametrize("fairness", ["reverse", "forward"])
@pytest.mark.parametrize("method, compiled", [("newton", True), ("newton", False), ("pgd", False)])
def test_carry_can_leave_a_class_empty(fairness, method, compiled):
    # every row prefers class 0 and class 1 already holds much carried mass: the optimum puts
    # nothing on class 1, which the batch's own marginal (an infinite or steep KL at s_1 = 0)
    # never allows
    sigma = torch.tensor([[0.6, 0.4], [0.65, 0.35], [0.7, 0.3]], dtype=torch.float64)
    kw = dict(lam=1.0, fairness=fairness, method=method)
    with _compiled.using(compiled):
        plain = solve_pseudo_labels(sigma, **kw)
        carried = solve_pseudo_labels(sigma, carry=[0.0, 10.0], **kw)
    assert plain.converged and carried.converged
    assert float(plain.labels[:, 1].sum()) > 0.1
    assert float(carried.labels[:, 1].sum()) <= 1e-9
    assert np.isfinite(carried.objective)


def test_em_with_carry_can_leave_a_class_empty():
    sigma = torch.tensor([[0.6, 0.4], [0.65, 0.35], [0.7, 0.3]], dtype=torch.float64)
    ref = solve_pseudo_labels(sigma, lam=1.0, carry=[0.0, 10.0], tol=1e-10)
    for compiled in (True, False):
        with _compiled.using(compiled):
            res = solve_pseudo_labels(sigma, lam=1.0, carry=[0.0, 10.0], method="em")
        assert res.converged
        assert res.objective == pytest.approx(ref.objective, rel=1e-6)


# ----- bad carries ----------------------------------------------------------------------------
@pytest.mark.parametrize(
    "carry",
    [
        [-1.0, 0.0, 0.0, 0.0, 0.0],
        [np.nan, 0.0, 0.0, 0.0, 0.0],
        [np.inf, 0.0, 0.0, 0.0, 0.0],
        [1.0, 1.0],
        np.ones((1, K)),
        ["a"] * K,
    ],
)
def test_bad_carry_raises(carry):
    with pytest.raises(ValueError, match="carry"):
        solve_pseudo_labels(_probs(), lam=LAM, carry=carry)


def test_sinkhorn_refuses_a_carry():
    P = _probs()
    with pytest.raises(ValueError, match="carry"):
        solve_pseudo_labels(P, lam=5.0, loss="shannon", method="sinkhorn", carry=np.ones(K))
    problem = make_problem(P, lam=5.0, fairness="reverse", prior=None, loss="shannon",
                           carry=np.ones(K))  # fmt: skip
    with pytest.raises(ValueError, match="carry"):
        _solve(problem, "sinkhorn", tol=1e-7)
    # zeros are no carry
    res = solve_pseudo_labels(P, lam=5.0, loss="shannon", method="sinkhorn", carry=np.zeros(K))
    assert res.converged


def test_forward_carry_on_a_zero_prior_class_raises():
    u = np.array([0.0, 0.25, 0.25, 0.25, 0.25])
    with pytest.raises(ValueError, match="carry"):
        solve_pseudo_labels(_probs(), lam=LAM, prior=u, fairness="forward", carry=np.ones(K))
    # the reverse term ignores classes of zero prior: mass carried there is allowed
    res = solve_pseudo_labels(_probs(), lam=LAM, prior=u, fairness="reverse", carry=np.ones(K))
    assert res.converged
