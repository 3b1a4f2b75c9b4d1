"""Transfers between the device and the host in the pseudo-label step (issue 14).

On CUDA a batch's problem is copied to the host once, solved there by the compiled kernels
and its labels copied back once (:mod:`skcce.solvers._transfer`). On the CPU both transfer
points are no-ops, so their calls are counted here by patching them; with a GPU the CUDA tests
also run the step under ``torch.cuda.set_sync_debug_mode``.
"""

import warnings

import numpy as np
import pytest
import torch
from sklearn.datasets import make_blobs

from skcce import CCEClustering
from skcce.solvers import _compiled, _transfer, make_problem, solve_pseudo_labels
from skcce.solvers import _solve as private_solve

CUDA = torch.cuda.is_available()


@pytest.fixture
def counted(monkeypatch):
    calls = {"to_host": 0, "to_device": 0}
    real_host, real_device = _transfer.to_host, _transfer.to_device

    def to_host(t):
        calls["to_host"] += 1
        return real_host(t)

    def to_device(t, device):
        calls["to_device"] += 1
        return real_device(t, device)

    monkeypatch.setattr(_transfer, "to_host", to_host)
    monkeypatch.setattr(_transfer, "to_device", to_device)
    monkeypatch.setattr(_compiled, "ENABLED", True)
    return calls


def _blobs():
    X, _ = make_blobs(n_samples=300, centers=3, n_features=5, random_state=0)
    return X.astype(np.float32)


@pytest.mark.parametrize("fused", [True, False])
@pytest.mark.parametrize("solver", ["auto", "em"])
@pytest.mark.parametrize("n_init", [1, 3])  # all restarts at once: still one copy a step
def test_a_fit_copies_once_each_way_per_step(counted, monkeypatch, solver, n_init, fused):
    from skcce._engine import _batched

    if not fused:  # the torch reference of the step's loss (CUDA's route)
        monkeypatch.setattr(_batched._Batched, "_fused", lambda self: None)
    # 300 rows in batches of 64: 5 steps an epoch, 2 epochs
    est = CCEClustering(
        n_clusters=3, n_init=n_init, max_epochs=2, batch_size=64, solver_options={"method": solver},
        random_state=0,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # an empty cluster of a tiny fit is not the point
        est.fit(_blobs())
    steps = 2 * 5
    # the compiled loss pass (CPU only) reads the labels where the solver wrote them: they
    # never go back to a device
    assert counted == {"to_host": steps, "to_device": 0 if fused else steps}


def test_the_torch_path_does_not_go_through_the_host(counted, monkeypatch):
    monkeypatch.setattr(_compiled, "ENABLED", False)
    CCEClustering(n_clusters=3, n_init=1, max_epochs=1, batch_size=100, random_state=0).fit(
        _blobs()
    )
    assert counted["to_host"] == 0  # the problem stays where the network is


def test_a_cpu_solve_makes_no_copy(counted):
    probs = torch.softmax(torch.randn(50, 4, dtype=torch.float64), dim=1)
    res = solve_pseudo_labels(probs, lam=50.0)
    assert res.converged and counted == {"to_host": 0, "to_device": 0}


@pytest.mark.parametrize("with_init", [False, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_a_device_problem_goes_to_the_host_in_one_copy(counted, with_init, dtype):
    # the CUDA branch's stacking and splitting, run on CPU tensors
    g = torch.Generator().manual_seed(0)
    probs = torch.softmax(torch.randn(30, 4, generator=g, dtype=torch.float64), dim=1)
    prior = torch.tensor([0.1, 0.2, 0.3, 0.4], dtype=torch.float64)
    problem = make_problem(probs.to(dtype), lam=10.0, fairness="reverse", prior=prior,
                           loss="collision")  # fmt: skip
    init = torch.softmax(torch.randn(30, 4, generator=g), dim=1) if with_init else None
    p, i, u = _compiled._stacked_to_host(problem, init)
    assert counted["to_host"] == 1
    np.testing.assert_array_equal(p, probs.to(dtype).numpy())
    assert p.dtype == np.dtype(str(dtype).split(".")[1]) and u.dtype == np.float64
    np.testing.assert_array_equal(u, prior.to(dtype).double().numpy())
    if with_init:
        np.testing.assert_array_equal(i, init.to(dtype).numpy())
    else:
        assert i is None


@pytest.mark.cuda
@pytest.mark.skipif(not CUDA, reason="needs CUDA")
def test_a_cuda_solve_copies_at_most_three_times(counted):
    probs = torch.softmax(torch.randn(250, 10, dtype=torch.float64, device="cuda"), dim=1)
    problem = make_problem(probs, lam=100.0, fairness="reverse", prior=None, loss="collision")
    torch.cuda.synchronize()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            res = private_solve(problem, "newton", tol=1e-7)
        finally:
            torch.cuda.set_sync_debug_mode("default")
    syncs = [w for w in caught if "synchroniz" in str(w.message).lower()]
    assert res.converged and res.labels.device.type == "cuda"
    assert counted["to_host"] + counted["to_device"] <= 3
    assert len(syncs) <= 3
    ref = solve_pseudo_labels(probs.cpu(), lam=100.0)
    assert abs(res.objective - ref.objective) <= 1e-6 * max(abs(ref.objective), 1.0)


@pytest.mark.cuda
@pytest.mark.skipif(not CUDA, reason="needs CUDA")
def test_a_cuda_fit_step_synchronises_a_fixed_number_of_times(counted):
    X = _blobs()
    est = CCEClustering(
        n_clusters=3, n_init=1, max_epochs=1, batch_size=60, device="cuda", random_state=0
    )
    est.fit(X)  # warm-up: CUDA context, kernels
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            est.fit(X)
        finally:
            torch.cuda.set_sync_debug_mode("default")
    syncs = [w for w in caught if "synchroniz" in str(w.message).lower()]
    steps = 5  # 300 rows in batches of 60, one epoch
    # per step the one copy of the probabilities; the rest is per fit (statistics, predict)
    assert len(syncs) <= 3 * steps, [str(w.message) for w in syncs[:5]]
