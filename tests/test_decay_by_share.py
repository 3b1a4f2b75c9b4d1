"""The linear head's weight decay in proportion to each cluster's share (skcce._engine._decay,
record 027): "auto" decays row k by ``weight_decay * K * m_k``; an explicit value is torch's."""

import warnings

import numpy as np
import pytest
import torch
from _helpers import linear_config
from sklearn.datasets import make_blobs

from skcce import CCEClustering
from skcce._engine import _batched, _decay, _step
from skcce._engine._train import make_optimizer

_cfg = linear_config


def _heads(n_runs=3, seed=0):
    torch.manual_seed(seed)
    return _batched.StackedHeads([torch.nn.Linear(6, 4) for _ in range(n_runs)])


@pytest.fixture(scope="module")
def data():
    X, _ = make_blobs(n_samples=300, centers=4, n_features=6, random_state=3, cluster_std=2.5)
    return X.astype(np.float32)


def test_each_row_decays_by_its_share():
    ours = _batched._Batched(_heads(), None, _cfg(decay_by_share=True))
    shares = np.array([[0.4, 0.3, 0.2, 0.1], [0.25] * 4, [0.7, 0.1, 0.1, 0.1]])
    ours.tracker.marginal.value = shares.copy()
    w0, b0 = ours.heads.weight.detach().clone(), ours.heads.bias.detach().clone()
    ours._update(torch.zeros_like(w0), torch.zeros_like(b0))  # the decay alone
    factor = torch.as_tensor(1.0 - 0.5 * 0.1 * 4 * shares, dtype=torch.float32)
    torch.testing.assert_close(ours.heads.weight, w0 * factor[..., None])
    torch.testing.assert_close(ours.heads.bias, b0 * factor)


@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_balanced_shares_are_torchs_decay(optimizer):
    """At ``m = 1/K`` the per-row decay is the optimiser's own ``weight_decay``."""
    gen = torch.Generator().manual_seed(1)
    ours = _batched._Batched(_heads(), None, _cfg(decay_by_share=True, optimizer=optimizer))
    assert (ours.tracker.marginal.value == 0.25).all()  # the uniform prior before a batch
    ref = _heads()
    opt = make_optimizer(ref, _cfg(optimizer=optimizer))  # torch's decay, 0.1
    assert opt.param_groups[0]["weight_decay"] == 0.1
    for _ in range(3):
        gw, gb = torch.randn(3, 4, 6, generator=gen), torch.randn(3, 4, generator=gen)
        ref.weight.grad, ref.bias.grad = gw.clone(), gb.clone()
        opt.step()
        ours._update(gw, gb)
    torch.testing.assert_close(ours.heads.weight, ref.weight)
    torch.testing.assert_close(ours.heads.bias, ref.bias)


def test_the_optimiser_decays_nothing_when_rows_decay_by_share():
    head = torch.nn.Linear(6, 4)
    for optimizer in ("sgd", "adam"):
        opt = make_optimizer(head, _cfg(decay_by_share=True, optimizer=optimizer))
        assert opt.param_groups[0]["weight_decay"] == 0.0


def _spy(monkeypatch, module):
    calls = []
    real = module.add_share_decay

    def spy(*args):
        calls.append(np.array(args[-1], copy=True))
        return real(*args)

    monkeypatch.setattr(module, "add_share_decay", spy)
    return calls


def test_auto_decays_by_share_and_an_explicit_value_does_not(data, monkeypatch):
    calls = _spy(monkeypatch, _batched)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = CCEClustering(n_clusters=4, max_epochs=2, random_state=0).fit(data)
    assert calls and all(m.shape[-1] == 4 for m in calls)
    assert est.weight_decay_ == pytest.approx(0.1 * 6 / 64)  # a balanced row's decay
    calls.clear()
    CCEClustering(n_clusters=4, max_epochs=2, random_state=0, weight_decay=0.01).fit(data)
    assert calls == []


def test_one_by_one_and_partial_fit_decay_by_share(data, monkeypatch):
    calls = _spy(monkeypatch, _step)
    monkeypatch.setattr(_batched, "applies", lambda *args: False)
    CCEClustering(n_clusters=4, max_epochs=1, n_init=1, random_state=0).fit(data)
    n_fit = len(calls)
    assert n_fit == -(-len(data) // 250)  # one per step
    CCEClustering(n_clusters=4, random_state=0).partial_fit(data)
    assert len(calls) > n_fit
    calls.clear()
    user = CCEClustering(n_clusters=4, max_epochs=1, random_state=0, model=torch.nn.Linear(6, 4))
    user.fit(data)
    assert calls == []  # a user module: the optimiser's own decay


def test_share_scale_is_weight_decay_times_k_times_the_share():
    m = np.array([[0.5, 0.5, 0.0], [1 / 3, 1 / 3, 1 / 3]])
    scale = _decay.share_scale(0.2, m, torch.zeros(1, dtype=torch.float64))
    torch.testing.assert_close(scale, torch.tensor([[0.3, 0.3, 0.0], [0.2, 0.2, 0.2]],
                                                   dtype=torch.float64))  # fmt: skip
