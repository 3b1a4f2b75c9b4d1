"""Checkpoints and interruption of CCEClustering.fit.

Resume equals an uninterrupted run; checkpoints of other fits are refused; writes are
atomic; Ctrl-C (an injected KeyboardInterrupt) keeps the last completed epoch and warns.
"""

import os

import numpy as np
import pytest
import torch
from sklearn.datasets import make_blobs

from skcce import CCEClustering, CheckpointMismatchError, FitInterruptedWarning
from skcce._engine import _checkpoint

FAST = dict(n_clusters=3, max_epochs=3, n_init=2, batch_size=64, random_state=0)
INTERRUPT = dict(FAST, max_epochs=4, n_init=1)
N_BATCHES = 5  # 300 rows / 64


class Crash(RuntimeError):
    """A simulated failure of the machine in the middle of an epoch."""


# training forward passes so far, and the call that fails (None: never)
CALLS = {"n": 0, "fail_at": None, "error": Crash}


class Flaky(torch.nn.Module):
    """A linear head whose training forward raises ``CALLS["error"]`` on a chosen call."""

    def __init__(self, d, k):
        super().__init__()
        self.linear = torch.nn.Linear(d, k)

    def forward(self, x):
        if self.training:
            CALLS["n"] += 1
            if CALLS["n"] == CALLS["fail_at"]:
                raise CALLS["error"]("interrupted on purpose")
        return self.linear(x)


def flaky(input_shape, n_clusters):
    return Flaky(input_shape[0], n_clusters)


@pytest.fixture(autouse=True)
def reset_calls():
    CALLS.update(n=0, fail_at=None, error=Crash)
    yield
    CALLS.update(n=0, fail_at=None, error=Crash)


@pytest.fixture(scope="module")
def blobs():
    X, _ = make_blobs(n_samples=300, centers=3, n_features=5, cluster_std=0.6, random_state=0)
    return X.astype(np.float32)


def _weights(est):
    return {k: v.detach().cpu().clone() for k, v in est.module_.state_dict().items()}


@pytest.mark.parametrize(
    "optimizer, fail_at",
    [
        ("sgd", 1 * N_BATCHES + 3),  # restart 1, in its 2nd epoch
        ("adam", 3 * N_BATCHES + 4),  # restart 2, before its first epoch ends
        ("adam", 4 * N_BATCHES + 2),  # restart 2, in its 2nd epoch (Adam moments resumed)
    ],
)
def test_resume_reaches_the_uninterrupted_model(blobs, tmp_path, optimizer, fail_at):
    params = dict(FAST, model=flaky, optimizer=optimizer, learning_rate=0.05)
    reference = CCEClustering(**params).fit(blobs)
    ckpt = tmp_path / "fit.ckpt"
    CALLS.update(n=0, fail_at=fail_at)
    with pytest.raises(Crash):
        CCEClustering(**params, checkpoint=ckpt).fit(blobs)
    assert ckpt.exists()
    CALLS.update(n=0, fail_at=None)
    resumed = CCEClustering(**params, checkpoint=ckpt).fit(blobs)
    # only the epochs after the checkpoint ran again
    assert CALLS["n"] == 2 * FAST["max_epochs"] * N_BATCHES - (fail_at - 1) // N_BATCHES * N_BATCHES
    ref_w, res_w = _weights(reference), _weights(resumed)
    assert ref_w.keys() == res_w.keys()
    for key in ref_w:
        torch.testing.assert_close(res_w[key], ref_w[key], rtol=0, atol=0)
    np.testing.assert_array_equal(resumed.labels_, reference.labels_)
    assert resumed.train_score_ == reference.train_score_
    assert [h["loss"] for h in resumed.history_] == [h["loss"] for h in reference.history_]
    assert not [f for f in os.listdir(tmp_path) if f.endswith(".tmp")]


def test_finished_checkpoint_loads_without_training(blobs, tmp_path):
    params = dict(FAST, model=flaky)
    ckpt = tmp_path / "fit.ckpt"
    first = CCEClustering(**params, checkpoint=str(ckpt)).fit(blobs)
    assert CALLS["n"] == 2 * FAST["max_epochs"] * N_BATCHES
    CALLS.update(n=0)
    again = CCEClustering(**params, checkpoint=str(ckpt)).fit(blobs)
    assert CALLS["n"] == 0
    np.testing.assert_array_equal(again.labels_, first.labels_)
    assert again.n_iter_ == first.n_iter_ == FAST["max_epochs"]
    for key, value in _weights(first).items():
        torch.testing.assert_close(_weights(again)[key], value, rtol=0, atol=0)


def test_checkpoint_records_the_resolved_solver_options(blobs, tmp_path):
    ckpt = tmp_path / "fit.ckpt"
    first = CCEClustering(**FAST, solver_options={"max_iter": 50}, checkpoint=str(ckpt)).fit(blobs)
    again = CCEClustering(
        **FAST, solver_options={"max_iter": 50, "method": "auto"}, checkpoint=str(ckpt)
    ).fit(blobs)
    np.testing.assert_array_equal(again.labels_, first.labels_)
    with pytest.raises(CheckpointMismatchError, match="solver_max_iter=50 in the checkpoint"):
        CCEClustering(**FAST, solver_options={"max_iter": 60}, checkpoint=str(ckpt)).fit(blobs)


def test_checkpoint_contents(blobs, tmp_path):
    ckpt = tmp_path / "fit.ckpt"
    CCEClustering(**dict(FAST, n_init=1, max_epochs=2), checkpoint=ckpt).fit(blobs)
    state = _checkpoint.load(ckpt)
    assert state["complete"] and state["run"] == 1
    assert state["fingerprint"]["settings"]["lam"] == 100.0
    assert state["fingerprint"]["data"]["shape"] == (300, 5)
    ((score, weights, history, run, prior),) = state["finished"]
    assert prior is None  # the uniform prior
    assert run == 0 and len(history) == 2 and set(weights) == {"weight", "bias"}


@pytest.mark.parametrize(
    "change, match",
    [
        (dict(lam=10.0), r"lam=100\.0 in the checkpoint, 10\.0 now"),
        (dict(batch_size=32), r"batch_size=64 in the checkpoint, 32 now"),
        (dict(random_state=1), r"random_state=0 in the checkpoint, 1 now"),
        (dict(n_init=3), r"n_init=1 in the checkpoint, 3 now"),
    ],
)
def test_checkpoint_of_other_settings_is_refused(blobs, tmp_path, change, match):
    ckpt = tmp_path / "fit.ckpt"
    params = dict(FAST, n_init=1, max_epochs=1)
    CCEClustering(**params, checkpoint=ckpt).fit(blobs)
    est = CCEClustering(**{**params, **change}, checkpoint=ckpt)
    with pytest.raises(CheckpointMismatchError, match=match):
        est.fit(blobs)
    assert not hasattr(est, "labels_")


def test_checkpoint_of_other_data_is_refused(blobs, tmp_path):
    ckpt = tmp_path / "fit.ckpt"
    params = dict(FAST, n_init=1, max_epochs=1, checkpoint=ckpt)
    CCEClustering(**params).fit(blobs)
    with pytest.raises(CheckpointMismatchError, match="data content"):
        CCEClustering(**params).fit(blobs + 1.0)
    with pytest.raises(CheckpointMismatchError, match=r"X shape: \(300, 5\) in the checkpoint"):
        CCEClustering(**params).fit(blobs[:200])


def test_foreign_file_is_refused(blobs, tmp_path):
    ckpt = tmp_path / "notes.txt"
    ckpt.write_text("not a checkpoint")
    with pytest.raises(CheckpointMismatchError, match="could not be read"):
        CCEClustering(**dict(FAST, n_init=1, max_epochs=1), checkpoint=ckpt).fit(blobs)
    assert ckpt.read_text() == "not a checkpoint"


def test_failed_write_keeps_the_previous_checkpoint(tmp_path, monkeypatch):
    ckpt = tmp_path / "state.ckpt"
    _checkpoint.save(ckpt, {"epoch": 1})
    before = ckpt.read_bytes()

    def torn_save(obj, fh):
        fh.write(b"half a checkpoint")
        raise OSError("disk full")

    monkeypatch.setattr(_checkpoint.torch, "save", torn_save)
    with pytest.raises(OSError, match="disk full"):
        _checkpoint.save(ckpt, {"epoch": 2})
    assert ckpt.read_bytes() == before
    assert os.listdir(tmp_path) == ["state.ckpt"]
    monkeypatch.undo()
    assert _checkpoint.load(ckpt)["epoch"] == 1


# ----- Ctrl-C ------------------------------------------------------------------------------
def test_interrupt_keeps_last_completed_epoch(blobs):
    params = dict(INTERRUPT, model=flaky)
    CALLS.update(error=KeyboardInterrupt, fail_at=2 * N_BATCHES + 3)  # in the 3rd epoch
    est = CCEClustering(**params)
    with pytest.warns(FitInterruptedWarning, match=r"after 2 completed epoch\(s\)"):
        est.fit(blobs)
    assert est.n_iter_ == 2 and [h["epoch"] for h in est.history_] == [0, 1]
    assert est.labels_.shape == (300,)
    np.testing.assert_array_equal(est.predict(blobs), est.labels_)
    # the fitted network is exactly the one of a run that stops after 2 epochs
    CALLS.update(n=0, fail_at=None)
    two = CCEClustering(**{**params, "max_epochs": 2}).fit(blobs)
    for key, value in two.module_.state_dict().items():
        torch.testing.assert_close(est.module_.state_dict()[key], value, rtol=0, atol=0)
    np.testing.assert_array_equal(est.labels_, two.labels_)


def test_interrupt_before_any_epoch_reraises(blobs):
    CALLS.update(error=KeyboardInterrupt, fail_at=3)
    est = CCEClustering(**INTERRUPT, model=flaky)
    with pytest.raises(KeyboardInterrupt):
        est.fit(blobs)
    assert not hasattr(est, "labels_") and not hasattr(est, "module_")


def test_interrupt_in_a_later_restart_keeps_finished_restarts(blobs):
    params = dict(INTERRUPT, model=flaky, n_init=3, max_epochs=2)
    CALLS.update(
        error=KeyboardInterrupt, fail_at=2 * N_BATCHES + 2
    )  # restart 2, before its first epoch ends
    est = CCEClustering(**params)
    with pytest.warns(FitInterruptedWarning, match=r"after 0 completed epoch\(s\) of restart 2/3"):
        est.fit(blobs)
    assert est.n_iter_ == 2
    CALLS.update(n=0, fail_at=None)
    one = CCEClustering(**{**params, "n_init": 1}).fit(blobs)
    # with one finished restart, the fitted state is that restart's (the same first seed)
    np.testing.assert_array_equal(est.labels_, one.labels_)


def test_interrupt_with_checkpoint_then_resume(blobs, tmp_path):
    params = dict(INTERRUPT, model=flaky, checkpoint=tmp_path / "fit.ckpt")
    CALLS.update(error=KeyboardInterrupt, fail_at=N_BATCHES + 1)  # in the 2nd epoch
    with pytest.warns(FitInterruptedWarning, match="resume with fit and checkpoint="):
        CCEClustering(**params).fit(blobs)
    CALLS.update(n=0, fail_at=None)
    resumed = CCEClustering(**params).fit(blobs)
    assert CALLS["n"] == (INTERRUPT["max_epochs"] - 1) * N_BATCHES
    full = CCEClustering(**{**params, "checkpoint": None}).fit(blobs)
    np.testing.assert_array_equal(resumed.labels_, full.labels_)
    for key, value in full.module_.state_dict().items():
        torch.testing.assert_close(resumed.module_.state_dict()[key], value, rtol=0, atol=0)
