"""The restarts of a fit (skcce._engine._restarts): batched or one by one, the fallback
between them, skipped divergences, and callbacks that hear every epoch once."""

import dataclasses
import itertools
import warnings

import numpy as np
import pytest
import torch
from sklearn.datasets import make_blobs
from sklearn.exceptions import ConvergenceWarning

import skcce._clustering as clustering
from skcce import CCEClustering
from skcce._engine import _batched, _restarts
from skcce._engine._callbacks import Callback, EpochEnd
from skcce._engine._distributed import Context


@pytest.fixture(scope="module")
def data():
    X, _ = make_blobs(n_samples=240, centers=4, n_features=6, random_state=3, cluster_std=2.5)
    return X.astype(np.float32)


class _Spy(Callback):
    """Records the engine's hooks as tuples."""

    def __init__(self):
        self.events = []

    def on_run_begin(self, run, first_epoch):
        self.events.append(("run", run, first_epoch))

    def on_epoch_begin(self, run, epoch):
        self.events.append(("begin", run, epoch))

    def on_batch_end(self, run):
        self.events.append(("batch", run))

    def on_epoch_end(self, state):
        self.events.append(("end", state.run, state.epoch))

    def on_run_end(self, result, finished):
        self.events.append(("done", result.run, len(finished)))


def _quietly(est, X):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # empty clusters of a tiny fit
        return est.fit(X)


def _spied(monkeypatch):
    """A _Spy appended to the callbacks of every fit."""
    spy, real = _Spy(), clustering.CCEClustering._callbacks

    def with_spy(self, X, plan, checkpoint):
        callbacks, resume = real(self, X, plan, checkpoint)
        return [*callbacks, spy], resume

    monkeypatch.setattr(clustering.CCEClustering, "_callbacks", with_spy)
    return spy


def _batched_diverges_in_epoch(monkeypatch, epoch, n_batches):
    """Make the batched path raise FloatingPointError in ``epoch`` (0-based)."""
    real, steps = _batched._Batched.step, []

    def step(self, raw, rows):
        steps.append(1)
        if len(steps) > epoch * n_batches:
            raise FloatingPointError("the network's predictions became non-finite")
        return real(self, raw, rows)

    monkeypatch.setattr(_batched._Batched, "step", step)


def test_skips_diverged_is_the_rule_it_replaced():
    """The named rule against the one-liner it replaced (``CCEClustering._restarts``)."""
    for n_init, active, checkpoint, completed in itertools.product(
        (1, 2, 3), (False, True), (False, True), (False, True)
    ):
        ctx = Context(world_size=2, rank=0) if active else Context()
        assert ctx.active == active
        for run in range(n_init):
            last = run + 1 == n_init
            raised = n_init == 1 or active or checkpoint or last and not completed
            skipped = _restarts.skips_diverged(run, n_init, ctx, checkpoint, completed)
            assert skipped == (not raised), (run, n_init, active, checkpoint, completed)


def test_once_tells_each_run_and_epoch_once():
    spy = _Spy()
    once = _restarts._Once([spy])
    state = EpochEnd(0, 1, [], {}, None, torch.Generator())
    for _ in range(2):  # the same restart's first epoch, twice (a fallback)
        once.on_run_begin(0, 0)
        once.on_epoch_begin(0, 0)
        once.on_batch_end(0)
        once.on_epoch_end(state)
    once.on_epoch_begin(0, 1)  # a new epoch is told
    once.on_batch_end(0)
    once.on_run_end(type("R", (), {"run": 0})(), [])  # every run end is told
    assert spy.events == [
        ("run", 0, 0), ("begin", 0, 0), ("batch", 0), ("end", 0, 1), ("begin", 0, 1),
        ("batch", 0), ("done", 0, 0),
    ]  # fmt: skip


def test_callbacks_hear_every_epoch_once_after_a_fallback(data, monkeypatch):
    """The batched path completes the first epoch of the 3 restarts, then diverges; they are
    trained again one by one, and the callbacks hear each (restart, epoch) once."""
    n_init, max_epochs = 3, 3
    _batched_diverges_in_epoch(monkeypatch, epoch=1, n_batches=4)  # 240 rows, batches of 64
    spy = _spied(monkeypatch)
    params = dict(n_clusters=4, n_init=n_init, max_epochs=max_epochs, batch_size=64,
                  n_iter_no_change=None)  # fmt: skip
    est = _quietly(CCEClustering(**params, random_state=0), data)
    begun = [e[1:] for e in spy.events if e[0] == "begin"]
    ended = [(run, epoch - 1) for kind, run, epoch in (e for e in spy.events if e[0] == "end")]
    every = [(run, epoch) for run in range(n_init) for epoch in range(max_epochs)]
    assert sorted(begun) == sorted(ended) == every  # each once, none missing
    assert [e[1] for e in spy.events if e[0] == "run"] == [0, 1, 2]
    assert [e[1] for e in spy.events if e[0] == "done"] == [0, 1, 2]
    monkeypatch.undo()
    with monkeypatch.context() as m:
        m.setattr(_batched, "applies", lambda *args: False)
        alone = _quietly(CCEClustering(**params, random_state=0), data)
    np.testing.assert_array_equal(est.labels_, alone.labels_)  # the fallback is one by one


@pytest.mark.skipif(
    not hasattr(CCEClustering, "set_callbacks"), reason="scikit-learn < 1.9 has no callbacks"
)
def test_sklearn_callbacks_count_every_epoch_once_after_a_fallback(data, monkeypatch):
    events = []

    class Recorder:
        def setup(self, estimator, context):
            pass

        def on_fit_task_begin(self, estimator, context, **kwargs):
            events.append(("begin", context.task_name))

        def on_fit_task_end(self, estimator, context, **kwargs):
            events.append(("end", context.task_name))

        def teardown(self, estimator, context):
            pass

    _batched_diverges_in_epoch(monkeypatch, epoch=1, n_batches=4)
    est = CCEClustering(n_clusters=4, n_init=3, max_epochs=2, batch_size=64, random_state=0)
    _quietly(est.set_callbacks(Recorder()), data)
    assert events.count(("begin", "epoch")) == 3 * 2 == events.count(("end", "epoch"))
    assert events.count(("begin", "fit")) == 1 == events.count(("end", "fit"))


def test_a_diverging_batched_fit_trains_the_restarts_one_by_one(data, monkeypatch):
    calls = []
    real = _restarts.run_single

    def single(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(_restarts, "run_single", single)
    _batched_diverges_in_epoch(monkeypatch, epoch=0, n_batches=4)
    est = _quietly(CCEClustering(n_clusters=4, n_init=3, max_epochs=1, random_state=0), data)
    assert len(calls) == 3 and est.labels_.shape == (240,)
    monkeypatch.undo()
    monkeypatch.setattr(_batched, "applies", lambda *args: False)
    alone = _quietly(CCEClustering(n_clusters=4, n_init=3, max_epochs=1, random_state=0), data)
    np.testing.assert_array_equal(est.labels_, alone.labels_)


def test_a_diverged_restart_is_skipped(data, monkeypatch):
    calls = []
    original = _restarts.run_single

    def first_diverges(*args, **kwargs):
        calls.append(1)
        if len(calls) == 1:
            raise FloatingPointError("the network's outputs became non-finite in epoch 0")
        return original(*args, **kwargs)

    def batched_diverges(*args, **kwargs):
        raise FloatingPointError("the training loss became non-finite in epoch 0")

    monkeypatch.setattr(_restarts, "run_single", first_diverges)
    monkeypatch.setattr(_batched, "run_batched", batched_diverges)  # then one by one
    spy = _spied(monkeypatch)
    with pytest.warns(ConvergenceWarning, match=r"1 of 3 restarts diverged.*restarts \[0\]"):
        est = CCEClustering(n_clusters=4, max_epochs=2, n_init=3, random_state=0).fit(data)
    assert len(calls) == 3 and est.labels_.shape == (240,)
    assert est.restart_agreement_.shape == (2,)  # the two restarts that completed
    assert [e[1:] for e in spy.events if e[0] == "done"] == [(1, 1), (2, 2)]


def test_the_last_restart_diverging_with_none_kept_raises(data, monkeypatch):
    def diverges(*args, **kwargs):
        raise FloatingPointError("the network's outputs became non-finite in epoch 0")

    monkeypatch.setattr(_restarts, "run_single", diverges)
    monkeypatch.setattr(_batched, "applies", lambda *args: False)
    with pytest.raises(FloatingPointError, match="non-finite"):
        CCEClustering(n_clusters=4, max_epochs=1, n_init=2, random_state=0).fit(data)


def test_restarts_and_the_fit_plan_are_immutable(data):
    restarts = _restarts.Restarts([], None)
    assert not restarts.interrupted and restarts.diverged == ()
    with pytest.raises(dataclasses.FrozenInstanceError):
        restarts.diverged = (1,)
    plan = CCEClustering(n_clusters=4, n_init=2)._plan(data, 4)
    assert plan.linear and len(plan.seeds) == plan.n_init == 2
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan.seeds = np.zeros(2, int)
