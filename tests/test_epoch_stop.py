"""The epoch stop (skcce._engine._epoch_stop, docs/design/026-epoch-stop.md).

Training ends when the count of rows whose cluster changed stops falling: the stopped fit
is the fit of that many epochs, restarts trained together stop as they would alone, a
resumed fit stops where the uninterrupted one does, and every rank of a data-parallel fit
counts every row (tests/test_distributed.py compares the counts with one process).
"""

import warnings

import numpy as np
import pytest
import torch
from sklearn.datasets import make_blobs
from sklearn.utils._param_validation import InvalidParameterError

from skcce import CCEClustering
from skcce._engine import _batched, _train
from skcce._engine._epoch_stop import stop_now
from skcce._engine._label_change import LabelChanges
from skcce._engine._restarts import run_single as restarts_run_single


def _blobs(std, n=240):
    X, _ = make_blobs(n_samples=n, centers=4, n_features=6, random_state=3, cluster_std=std)
    return X.astype(np.float32)


def _fit(X, **params):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # small clusters of a tiny fit are not the point
        return CCEClustering(n_clusters=4, batch_size=64, **params).fit(X)


def test_stopped_fit_is_the_fit_of_that_many_epochs():
    X = _blobs(3.5)
    stopped = _fit(X, n_init=1, max_epochs=10, random_state=0)
    assert stopped.n_iter_no_change_ == 1
    assert 2 <= stopped.n_iter_ < 10  # it did stop early
    assert stop_now(stopped.history_, 1)
    assert not any(stop_now(stopped.history_[:e], 1) for e in range(1, stopped.n_iter_))
    same = _fit(X, n_init=1, max_epochs=stopped.n_iter_, n_iter_no_change=None, random_state=0)
    np.testing.assert_array_equal(stopped.labels_, same.labels_)
    for key, value in same.module_.state_dict().items():
        torch.testing.assert_close(stopped.module_.state_dict()[key], value, rtol=0, atol=0)
    full = _fit(X, n_init=1, max_epochs=10, n_iter_no_change=None, random_state=0)
    assert full.n_iter_ == 10 and full.n_iter_no_change_ is None
    patient = _fit(X, n_init=1, max_epochs=10, n_iter_no_change=3, random_state=0)
    assert stopped.n_iter_ <= patient.n_iter_


def test_history_counts_the_rows_that_changed_cluster():
    X = _blobs(3.5)
    est = _fit(X, n_init=1, max_epochs=4, n_iter_no_change=None, random_state=1)
    changed = [h["changed"] for h in est.history_]
    assert changed[0] is None
    assert all(isinstance(c, int) and 0 <= c <= len(X) for c in changed[1:])


def _results(monkeypatch, batched, stack_sizes=None):
    """Each restart's RunResult of a fit, trained together (``batched``) or one by one;
    ``stack_sizes`` gets the number of restarts each batched epoch trains."""
    results = []
    real_batched, real_single = _batched.run_batched, restarts_run_single
    real_epoch = _batched._epoch

    def spy_epoch(batched_, source, generators, *args):
        if stack_sizes is not None:
            stack_sizes.append(len(generators))
        return real_epoch(batched_, source, generators, *args)

    def spy_batched(*args, **kwargs):
        out = real_batched(*args, **kwargs)
        results.extend(out)
        return out

    def spy_single(*args, **kwargs):
        out = real_single(*args, **kwargs)
        results.append(out)
        return out

    with monkeypatch.context() as m:
        m.setattr(_batched, "run_batched", spy_batched)
        m.setattr(_batched, "_epoch", spy_epoch)
        m.setattr("skcce._engine._restarts.run_single", spy_single)
        if not batched:
            m.setattr(_batched, "applies", lambda *args: False)
        _fit(_blobs(3.5), n_init=4, max_epochs=8, random_state=0)
    return sorted(results, key=lambda r: r.run)


def test_restarts_trained_together_stop_as_they_would_alone(monkeypatch):
    sizes = []
    together = _results(monkeypatch, batched=True, stack_sizes=sizes)
    alone = _results(monkeypatch, batched=False)
    epochs = [len(r.history) for r in together]
    assert len(set(epochs)) > 1  # the restarts stop at different epochs
    assert epochs == [len(r.history) for r in alone]
    # a stopped restart leaves the stack: each epoch trains the restarts not yet stopped
    assert sizes == [sum(e > epoch for e in epochs) for epoch in range(max(epochs))]
    for a, b in zip(together, alone, strict=True):
        assert [h["changed"] for h in a.history] == [h["changed"] for h in b.history]
        np.testing.assert_array_equal(a.labels, b.labels)


class Crash(RuntimeError):
    """A simulated failure in the middle of an epoch."""


def test_resumed_fit_stops_where_the_uninterrupted_fit_does(monkeypatch, tmp_path):
    X = _blobs(3.5)
    params = dict(n_init=1, max_epochs=10, random_state=0)
    reference = _fit(X, **params)
    assert reference.n_iter_ >= 3
    real, calls = _train.train_step, []

    def crashing(*args, **kwargs):
        calls.append(1)
        if len(calls) == 4 * (reference.n_iter_ - 1) + 2:  # in the stop's epoch (4 batches)
            raise Crash
        return real(*args, **kwargs)

    ckpt = tmp_path / "fit.ckpt"
    with monkeypatch.context() as m:
        m.setattr(_train, "train_step", crashing)
        with pytest.raises(Crash):
            _fit(X, checkpoint=ckpt, **params)
    resumed = _fit(X, checkpoint=ckpt, **params)
    # the resumed epoch compares its labels with the checkpoint's: the same count, the stop
    assert [h["changed"] for h in resumed.history_] == [h["changed"] for h in reference.history_]
    assert resumed.n_iter_ == reference.n_iter_
    np.testing.assert_array_equal(resumed.labels_, reference.labels_)


def test_other_models_train_every_epoch():
    X = _blobs(3.5)
    net = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.ReLU(), torch.nn.Linear(8, 4))
    est = _fit(X, model=net, max_epochs=4, random_state=0)
    assert est.n_iter_no_change_ is None and est.n_iter_ == 4


@pytest.mark.parametrize("bad", [0, -1, 1.5, "always"])
def test_bad_n_iter_no_change_is_refused(bad):
    with pytest.raises(InvalidParameterError, match="n_iter_no_change"):
        CCEClustering(n_iter_no_change=bad).fit(_blobs(1.0))


class _TwoRanks:
    """The sum over ranks of :class:`LabelChanges`, with the other rank's labels given."""

    def __init__(self, other):
        self.other = other

    def sum_(self, tensor):
        tensor += self.other.current
        return tensor


def test_label_changes_sum_the_ranks_shards():
    # rank 0 sees rows 0, 1 and rank 1 rows 2, 3 in the first epoch; the reverse next
    ranks = [LabelChanges(1, 4, torch.device("cpu")) for _ in range(2)]
    ranks[0].record(np.array([[0, 1]]), torch.tensor([[2, 0]]))
    ranks[1].record(np.array([[2, 3]]), torch.tensor([[1, 1]]))
    mine = ranks[0].current.clone()
    assert ranks[0].end_epoch(_TwoRanks(ranks[1])) is None
    ranks[1].current += mine  # what rank 1's all-reduce gives it
    ranks[1].end_epoch()
    assert ranks[0].last(0).tolist() == ranks[1].last(0).tolist() == [2, 0, 1, 1]
    ranks[0].record(np.array([[2, 3]]), torch.tensor([[1, 0]]))
    ranks[1].record(np.array([[0, 1]]), torch.tensor([[2, 0]]))
    assert ranks[0].end_epoch(_TwoRanks(ranks[1])).tolist() == [1]  # row 3: 1 -> 0
