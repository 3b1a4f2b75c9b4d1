"""The one backend seam (skcce.solvers._compiled.takes): both paths run explicitly through it,
agree, and say which one answered."""

from __future__ import annotations

import pytest
import torch

from skcce.solvers import _compiled, solve_pseudo_labels


def _probs(n, k, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.softmax(2 * torch.randn(n, k, generator=g, dtype=torch.float64), dim=1)


@pytest.mark.parametrize("method", ["newton", pytest.param("em", marks=pytest.mark.slow)])
@pytest.mark.parametrize("fairness", ["reverse", "forward"])
def test_torch_and_compiled_paths_agree_and_name_themselves(method, fairness, monkeypatch):
    if method == "em" and fairness == "forward":
        pytest.skip("EM is defined for the reverse fairness")
    P = _probs(120, 6, 0)
    kw = dict(lam=50.0, fairness=fairness, method=method, tol=1e-9, max_iter=20000)
    monkeypatch.setattr(_compiled, "takes", lambda *args, **kwargs: True)
    fast = solve_pseudo_labels(P, **kw)
    monkeypatch.setattr(_compiled, "takes", lambda *args, **kwargs: False)
    ref = solve_pseudo_labels(P, **kw)
    assert (fast.backend, ref.backend) == ("compiled", "torch")
    assert fast.method == ref.method == method
    assert fast.converged and ref.converged
    assert fast.objective == pytest.approx(ref.objective, rel=1e-7, abs=1e-7)


def test_the_seam_decides_for_the_stack_and_the_engine(monkeypatch):
    """solve_stack and the engine's host copy ask the same predicate."""
    probs = torch.stack([_probs(40, 4, s) for s in range(2)])
    kw = dict(lam=10.0, prior=None, fairness="reverse", loss="collision", tol=1e-7,
              max_iter=None)  # fmt: skip
    assert all(r.backend == "compiled" for r in _compiled.solve_stack(probs, method="newton", **kw))
    monkeypatch.setattr(_compiled, "takes", lambda *args, **kwargs: False)
    assert _compiled.solve_stack(probs, method="newton", **kw) is None


@pytest.mark.parametrize(
    "kwargs, expected",
    [
        (dict(), True),
        (dict(loss="shannon"), False),
        (dict(method="pgd"), False),
        (dict(lam=0.0), False),
        (dict(k=1), False),
        (dict(dtype=torch.float16), False),
        (dict(device_type="mps"), False),
        (dict(requires_grad=True), False),
    ],
)
def test_takes(kwargs, expected, monkeypatch):
    monkeypatch.setattr(_compiled, "ENABLED", True)
    args = dict(loss="collision", method="newton") | kwargs
    loss, method = args.pop("loss"), args.pop("method")
    assert _compiled.takes(loss, method, **args) is expected


def test_takes_the_losss_own_passes(monkeypatch):
    """``method=None`` asks about the compiled passes that serve every method (the batched
    restarts' fused loss and gradient): the collision loss only, and only while enabled."""
    monkeypatch.setattr(_compiled, "ENABLED", True)
    assert _compiled.takes("collision", None)
    assert not _compiled.takes("shannon", None)
    monkeypatch.setattr(_compiled, "ENABLED", False)
    assert not _compiled.takes("collision", None)


@pytest.mark.parametrize("compiled", [True, False])
def test_using_sets_the_switch_for_a_block(compiled, monkeypatch):
    monkeypatch.setattr(_compiled, "ENABLED", not compiled)
    with _compiled.using(compiled):
        assert _compiled.takes("collision", "newton") is compiled
    assert _compiled.ENABLED is (not compiled)  # restored
    with pytest.raises(RuntimeError), _compiled.using(compiled):
        raise RuntimeError
    assert _compiled.ENABLED is (not compiled)  # restored after an error too


def test_a_stack_of_one_reaches_the_kernels_with_writable_arrays():
    """A stack of one (the default fit's single restart) passes the kernels the array types
    of any other stack: a read-only prior row (a broadcast view) would make numba compile
    every kernel again, about 15 s on a fresh cache (bench_coldstart's first fit)."""
    import numpy as np
    from numba.core import types

    from skcce._engine._fused import _collision_step, collision_step
    from skcce.solvers import _kernels as kn

    probs = torch.softmax(torch.randn(1, 30, 4, dtype=torch.float64), dim=-1)
    for prior in (None, torch.tensor([0.1, 0.2, 0.3, 0.4], dtype=torch.float64)):
        out = _compiled.solve_stack(
            probs, lam=10.0, prior=prior, fairness="reverse", loss="collision",
            method="newton", tol=1e-6, max_iter=100,
        )  # fmt: skip
        assert out[0] is not None
    logits = np.zeros((1, 4, 3), dtype=np.float32)
    sigma = np.full((1, 4, 3), 0.25, dtype=np.float32)
    collision_step(logits, sigma, np.full((1, 3, 4), 0.25), np.full(4, 0.25), "reverse", 1.0)
    for kernel in (kn.ipm_solve_into, _collision_step):
        for sig in kernel.signatures:
            assert all(t.mutable for t in sig if isinstance(t, types.Array)), sig
