"""The linear head's restarts trained together (skcce._engine._batched, issue 14 item 2).

Batched restarts must be the restarts trained one by one: the same seeds, shufflings and
starts, so the same labels and, up to the rounding of a batched product, the same weights.
"""

import warnings

import numpy as np
import pytest
import torch
from _helpers import linear_config
from sklearn.datasets import make_blobs

import skcce._clustering as clustering
from skcce import CCEClustering
from skcce._engine import _batched
from skcce._engine._distributed import Context
from skcce._engine._train import FitInterruptedWarning


@pytest.fixture(scope="module")
def data():
    X, _ = make_blobs(n_samples=240, centers=4, n_features=6, random_state=3, cluster_std=2.5)
    return X.astype(np.float32)


_cfg = linear_config


def _one_by_one(monkeypatch, est, X):
    with monkeypatch.context() as m:
        m.setattr(_batched, "applies", lambda *args: False)
        return est.fit(X)


def _fit_quietly(est, X):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # empty clusters of a tiny fit are not the point
        return est.fit(X)


@pytest.mark.parametrize(
    ("loss", "fairness", "optimizer"),
    [
        ("collision", "reverse", "auto"),
        ("collision", "forward", "adam"),
        ("shannon", "reverse", "auto"),
        ("reverse", "reverse", "auto"),
    ],
)
def test_batched_restarts_are_the_restarts_one_by_one(data, monkeypatch, loss, fairness, optimizer):
    params = dict(
        n_clusters=4, n_init=4, max_epochs=3, batch_size=64, random_state=7, loss=loss,
        fairness=fairness, optimizer=optimizer,
    )  # fmt: skip
    calls = []
    real = _batched.run_batched
    monkeypatch.setattr(_batched, "run_batched", lambda *a, **k: calls.append(1) or real(*a, **k))
    together = CCEClustering(**params).fit(data)
    alone = _one_by_one(monkeypatch, CCEClustering(**params), data)
    assert calls == [1]  # the first fit was batched, the second was not
    np.testing.assert_array_equal(together.labels_, alone.labels_)
    assert together.init_ == alone.init_
    assert together.n_iter_ == alone.n_iter_
    for a, b in zip(together.history_, alone.history_, strict=True):
        assert a["epoch"] == b["epoch"] and a["cluster_sizes"] == b["cluster_sizes"]
        assert a["loss"] == pytest.approx(b["loss"], rel=1e-4, abs=1e-6)
        assert a["fairness"] == pytest.approx(b["fairness"], rel=1e-3, abs=1e-6)
    for key, value in alone.module_.state_dict().items():
        torch.testing.assert_close(together.module_.state_dict()[key], value, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(together.predict_proba(data), alone.predict_proba(data), atol=1e-4)
    assert together.train_score_ == pytest.approx(alone.train_score_, rel=1e-5)


def test_when_restarts_are_batched():
    cfg = _cfg(n_clusters=3)
    ctx = Context()
    assert _batched.applies(True, 3, cfg, ctx, False)
    assert _batched.applies(True, 1, cfg, ctx, False)  # one restart: the layout
    assert not _batched.applies(True, 0, cfg, ctx, False)  # nothing left to run
    assert not _batched.applies(False, 3, cfg, ctx, False)  # not the linear head
    assert not _batched.applies(True, 3, cfg, ctx, True)  # checkpointing
    for change in ({"verbose": 1}, {"augment": object()}, {"backbone_learning_rate": 0.1}):
        other = _cfg(n_clusters=3, **change)
        assert not _batched.applies(True, 3, other, ctx, False)


def test_solves_on_threads_equal_solves_in_turn(data):
    rng = np.random.default_rng(0)
    probs = torch.as_tensor(rng.dirichlet(np.full(4, 0.5), size=(5, 64)))
    cfg = _cfg()
    heads = _batched.StackedHeads([torch.nn.Linear(6, 4) for _ in range(5)])
    from concurrent.futures import ThreadPoolExecutor

    serial = _batched._Batched(heads, None, cfg).solve_all(probs)
    with ThreadPoolExecutor(2) as pool:
        threaded = _batched._Batched(heads, None, cfg, pool).solve_all(probs)
    assert len(serial) == len(threaded) == 5
    for a, b in zip(serial, threaded, strict=True):
        assert a.converged and b.converged
        torch.testing.assert_close(a.labels, b.labels, rtol=0, atol=0)


def test_joined_map_waits_for_every_item_when_the_callers_item_raises():
    import threading
    import time
    from concurrent.futures import ThreadPoolExecutor

    done, lock = [], threading.Lock()

    def work(i):
        if i == 0:  # the caller's own item fails at once
            raise RuntimeError("item 0 failed")
        time.sleep(0.05)
        with lock:
            done.append(i)
        return i

    with ThreadPoolExecutor(2) as pool:
        with pytest.raises(RuntimeError, match="item 0 failed"):
            _batched._joined_map(pool)(work, range(4))
        assert sorted(done) == [1, 2, 3]  # nothing still running after the raise
        assert _batched._joined_map(pool)(lambda i: 10 * i, range(5)) == [0, 10, 20, 30, 40]
        assert _batched._joined_map(pool)(work, []) == []


def test_interrupting_batched_restarts_keeps_their_completed_epochs(data, monkeypatch):
    params = dict(n_clusters=4, n_init=3, batch_size=64, random_state=1, n_iter_no_change=None)
    real, steps = _batched._Batched.step, []

    def step(self, raw, rows):
        steps.append(1)
        if len(steps) == 2 * 4 + 2:  # in the third epoch
            raise KeyboardInterrupt
        return real(self, raw, rows)

    monkeypatch.setattr(_batched._Batched, "step", step)
    with pytest.warns(FitInterruptedWarning, match=r"after 2 completed epoch\(s\) of restart 3/3"):
        est = _fit_quietly_keep(CCEClustering(max_epochs=5, **params), data)
    monkeypatch.setattr(_batched._Batched, "step", real)
    two = _fit_quietly(CCEClustering(max_epochs=2, **params), data)
    assert est.n_iter_ == 2
    np.testing.assert_array_equal(est.labels_, two.labels_)
    for key, value in two.module_.state_dict().items():
        torch.testing.assert_close(est.module_.state_dict()[key], value, rtol=0, atol=0)


def _fit_quietly_keep(est, X):
    """fit, ignoring only the empty-cluster ConvergenceWarning (others reach pytest)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*clusters are empty")
        return est.fit(X)


def test_interrupting_batched_restarts_before_an_epoch_ends_reraises(data, monkeypatch):
    def step(self, raw, rows):
        raise KeyboardInterrupt

    monkeypatch.setattr(_batched._Batched, "step", step)
    est = CCEClustering(n_clusters=4, n_init=3, max_epochs=2)
    with pytest.raises(KeyboardInterrupt):
        est.fit(data)
    assert not hasattr(est, "labels_")


def test_sklearn_callbacks_see_every_epoch_of_every_restart(data, monkeypatch):
    from skcce._engine._callbacks import Callback

    events = []

    class Spy(Callback):
        def on_epoch_begin(self, run, epoch):
            events.append(("begin", run, epoch))

        def on_epoch_end(self, state):
            events.append(("end", state.run, state.epoch))

    real = clustering.CCEClustering._callbacks

    def with_spy(self, X, plan, checkpoint):
        callbacks, resume = real(self, X, plan, checkpoint)
        return [*callbacks, Spy()], resume

    monkeypatch.setattr(clustering.CCEClustering, "_callbacks", with_spy)
    _fit_quietly(CCEClustering(n_clusters=4, n_init=2, max_epochs=2), data)
    assert events == [
        ("begin", 0, 0), ("end", 0, 1), ("begin", 1, 0), ("end", 1, 1),
        ("begin", 0, 1), ("end", 0, 2), ("begin", 1, 1), ("end", 1, 2),
    ]  # fmt: skip


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_batched_restarts_on_cuda(data, monkeypatch):
    params = dict(n_clusters=4, n_init=3, max_epochs=2, batch_size=64, random_state=0)
    together = _fit_quietly(CCEClustering(device="cuda", **params), data)
    alone = _one_by_one(monkeypatch, CCEClustering(device="cuda", **params), data)
    np.testing.assert_array_equal(together.labels_, alone.labels_)


@pytest.mark.parametrize("weight_decay", [0.0, 0.1])
def test_in_place_sgd_is_torch_sgd(weight_decay):
    cfg = _cfg(weight_decay=weight_decay)
    gen = torch.Generator().manual_seed(0)
    heads = [torch.nn.Linear(6, 4) for _ in range(3)]
    ours = _batched._Batched(_batched.StackedHeads(heads), None, cfg)
    ref = _batched.StackedHeads(heads)
    sgd = torch.optim.SGD(ref.parameters(), lr=0.5, weight_decay=weight_decay)
    for _ in range(3):
        gw, gb = torch.randn(3, 4, 6, generator=gen), torch.randn(3, 4, generator=gen)
        ref.weight.grad, ref.bias.grad = gw.clone(), gb.clone()
        sgd.step()
        ours._update(gw, gb)
    torch.testing.assert_close(ours.heads.weight, ref.weight, rtol=0, atol=0)
    torch.testing.assert_close(ours.heads.bias, ref.bias, rtol=0, atol=0)


def test_the_normalised_table_holds_the_batches_of_the_streamed_path(data, monkeypatch):
    from skcce._engine._preprocess import prepare

    cpu = torch.device("cpu")
    X = data * np.float32(1e3) + np.float32(5e4)  # far from zero: the careful normalisation
    for x in (X, X.astype(np.float64)):  # both normalisation routes
        inputs = prepare(x, "linear").inputs
        streamed = _batched._Source(x, inputs, cpu)
        tabled = _batched._Source(x, inputs, cpu).tabulate()
        assert streamed.table is None and tabled.table is not None
        rows = np.array([[3, 5, 7, 200], [0, 1, 2, 239]])
        torch.testing.assert_close(tabled.fetch(rows), streamed.fetch(rows), rtol=0, atol=0)
        for (r1, b1), (r2, b2) in zip(
            tabled.batches(rows, 3), streamed.batches(rows, 3), strict=True
        ):
            np.testing.assert_array_equal(r1, r2)
            torch.testing.assert_close(b1, b2, rtol=0, atol=0)
        monkeypatch.setattr(_batched, "TABLE_BYTES", 4 * x.shape[0] * x.shape[1] - 1)
        assert _batched._Source(x, inputs, cpu).tabulate().table is None  # too large: streamed
        monkeypatch.undo()


@pytest.mark.parametrize("fairness", ["reverse", "forward"])
@pytest.mark.parametrize("prior", [None, [0.1, 0.2, 0.3, 0.4]])
@pytest.mark.parametrize("weight", [0.0, 1.3])
@pytest.mark.parametrize("row_weighted", [False, True])
def test_compiled_collision_step_equals_the_torch_reference(fairness, prior, weight, row_weighted):
    from skcce._engine._fused import collision_step
    from skcce.losses import _network_loss_grad

    gen = torch.Generator().manual_seed(0)
    logits = 3 * torch.randn(3, 4, 50, generator=gen)
    logits[0, 1, :5] = 60.0  # saturated rows: sigma underflows on the other classes
    sigma = torch.softmax(logits, dim=1)
    Y = torch.softmax(4 * torch.randn(3, 50, 4, generator=gen, dtype=torch.float64), dim=2)
    Y = torch.where(Y < 0.15, 0.0, Y)  # exact zeros, and rows on one class
    Y = Y / Y.sum(dim=2, keepdim=True)
    u = np.full(4, 0.25) if prior is None else np.asarray(prior)
    rw = 1 + 3 * torch.rand(3, 50, generator=gen, dtype=torch.float64) if row_weighted else None
    values, fair, grad = collision_step(
        logits.numpy(), sigma.numpy(), Y.numpy(), u, fairness, weight,
        None if rw is None else rw.numpy(),
    )  # fmt: skip
    p = None if prior is None else torch.tensor(prior, dtype=torch.float32)
    ref_v, ref_f, ref_g = _network_loss_grad(
        logits, sigma, Y.transpose(1, 2).contiguous(), "collision", p, fairness, weight,
        None if rw is None else rw.float().unsqueeze(1),
    )  # fmt: skip
    assert np.isfinite(grad).all() and np.isfinite(values).all()
    np.testing.assert_allclose(grad, ref_g.numpy(), rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(values, ref_v.numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(fair, ref_f.numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("fairness", ["reverse", "forward"])
def test_compiled_collision_step_survives_a_cluster_no_row_predicts(fairness):
    from skcce._engine._fused import collision_step
    from skcce.losses import _network_loss_grad

    gen = torch.Generator().manual_seed(1)
    logits = 3 * torch.randn(2, 4, 30, generator=gen)
    logits[1, 3] = -200.0  # restart 1: no row predicts cluster 3 at all in float32
    sigma = torch.softmax(logits, dim=1)
    assert float(sigma[1, 3].max()) == 0.0
    Y = torch.softmax(4 * torch.randn(2, 30, 4, generator=gen, dtype=torch.float64), dim=2)
    values, fair, grad = collision_step(
        logits.numpy(), sigma.numpy(), Y.numpy(), np.full(4, 0.25), fairness, 1.3
    )
    assert np.isfinite(grad).all() and np.isfinite(values).all() and np.isfinite(fair).all()
    ref_v, ref_f, ref_g = _network_loss_grad(
        logits, sigma, Y.transpose(1, 2).contiguous(), "collision", None, fairness, 1.3
    )
    np.testing.assert_allclose(grad, ref_g.numpy(), rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(fair, ref_f.numpy(), rtol=1e-5, atol=1e-6)


def test_batched_and_one_by_one_agree_when_the_shrink_guard_weighs_rows(monkeypatch):
    from skcce._engine import _prior

    # imbalanced blobs on which a cluster of this fit shrinks and the guard fires (under
    # one decay for every head row; the default's decay by share keeps it from shrinking)
    X, _ = make_blobs([1000, 500, 200, 100, 50], cluster_std=1.0, random_state=3)
    params = dict(n_clusters=4, n_init=2, max_epochs=6, batch_size=64, random_state=3,
                  prior="estimate", init="random", weight_decay=0.003,
                  n_iter_no_change=None)  # fmt: skip
    fired = []
    real = _prior.PriorTracker.shrink_guard

    def spy(self, labels):
        weights = real(self, labels)
        fired.append(0.0 if weights is None else float(weights.max()))
        return weights

    monkeypatch.setattr(_prior.PriorTracker, "shrink_guard", spy)
    together = _fit_quietly(CCEClustering(**params), X)
    with monkeypatch.context() as m:
        m.setattr(_batched, "applies", lambda *args: False)
        alone = _fit_quietly(CCEClustering(**params), X)
    assert max(fired) > 1  # the guard weighed some rows
    np.testing.assert_array_equal(together.labels_, alone.labels_)
    for key, value in alone.module_.state_dict().items():
        torch.testing.assert_close(together.module_.state_dict()[key], value, rtol=1e-4, atol=1e-4)
