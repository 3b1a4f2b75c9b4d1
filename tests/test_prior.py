"""The class prior of each restart (skcce._engine._prior) and what the estimator makes of it."""

import numpy as np
import pytest
from sklearn.datasets import make_blobs

from skcce import CCEClustering
from skcce._engine._prior import FLOOR, PriorTracker, hard_shares

FAST = dict(max_epochs=3, batch_size=64, random_state=0)


def test_estimate_follows_the_pseudo_labels_with_a_one_epoch_memory_and_a_floor():
    t = PriorTracker("estimate", 4, 1, n_samples=100)
    ybar = np.array([[0.7, 0.3, 0.0, 0.0]])
    t.update(ybar, rows=50)  # half an epoch: half way from uniform
    np.testing.assert_allclose(t.mass[0], 0.5 * 0.25 + 0.5 * ybar[0])
    for _ in range(40):
        t.update(ybar, rows=50)
    floor = min(FLOOR, 0.5 / 4)
    assert t.value[0].min() >= floor / (1 + 2 * floor) - 1e-12  # raised, renormalised
    assert t.value[0].sum() == pytest.approx(1.0)
    assert t.value[0][0] > t.value[0][1] > t.value[0][2]


def test_auto_tracks_only_its_estimating_restarts():
    t = PriorTracker("auto", 3, [0, 1, 2, 3], n_samples=10)
    t.update(np.tile([0.8, 0.1, 0.1], (4, 1)), rows=10)
    np.testing.assert_array_equal(t.value[[0, 2]], np.full((2, 3), 1 / 3))
    assert t.value[1, 0] > 0.5 and t.prior_of(0, t.mass[0]) is None
    assert t.prior_of(1, t.mass[1]) == pytest.approx(t.value[1])


def test_auto_with_one_restart_is_the_uniform_fit_bit_for_bit():
    X, _ = make_blobs(300, centers=3, n_features=4, random_state=0)
    auto = CCEClustering(n_clusters=3, n_init=1, **FAST).fit(X)
    uniform = CCEClustering(n_clusters=3, n_init=1, prior=None, **FAST).fit(X)
    np.testing.assert_array_equal(auto.predict_proba(X), uniform.predict_proba(X))
    np.testing.assert_array_equal(auto.prior_, np.full(3, 1 / 3))


def test_estimate_finds_unequal_cluster_sizes():
    X, y = make_blobs([600, 150, 50], centers=[[0, 0], [8, 0], [0, 8]], random_state=0)
    # the estimate starts uniform: epochs to settle (the shrink guard holds the 50-row blob
    # while the first epochs' boundaries move, so its soft mass settles later)
    params = dict(FAST, max_epochs=20, n_iter_no_change=None)  # all 20 epochs
    est = CCEClustering(n_clusters=3, n_init=1, prior="estimate", **params).fit(X)
    uniform = CCEClustering(n_clusters=3, n_init=1, prior=None, **params).fit(X)
    shares = np.sort(np.bincount(y) / len(y))
    assert np.abs(np.sort(est.prior_) - shares).max() < 0.03, est.prior_
    sizes = np.sort(np.bincount(est.labels_, minlength=3) / len(y))
    uniform_sizes = np.sort(np.bincount(uniform.labels_, minlength=3) / len(y))
    assert np.abs(sizes - shares).sum() < np.abs(uniform_sizes - shares).sum()


def _batch(counts, k=3):
    """Hard pseudo-labels (1, B, k): ``counts[c]`` rows in cluster c."""
    rows = np.concatenate([np.full(n, c) for c, n in enumerate(counts)])
    return np.eye(k)[rows][None]


def test_shrink_guard_weighs_the_rows_of_a_cluster_that_lost_three_quarters():
    t = PriorTracker("estimate", 3, 1, n_samples=100)
    first = _batch([50, 30, 20])
    np.testing.assert_array_equal(t.shrink_guard(first), np.ones((1, 100)))  # the start
    np.testing.assert_allclose(t.hard, [[0.5, 0.3, 0.2]])
    # a batch in which cluster 2 has 1 row: its moving share (one-epoch memory) is 0.01
    w = t.shrink_guard(_batch([60, 39, 1]))
    assert w[0, -1] > 1  # its one row weighs more
    np.testing.assert_array_equal(w[0, :-1], 1.0)  # the grown clusters keep weight 1
    deeper = PriorTracker("estimate", 3, 1, n_samples=100)
    deeper.shrink_guard(first)
    assert deeper.shrink_guard(_batch([120, 79, 1]))[0, -1] > w[0, -1]  # share 0.005: more
    # back above a quarter of its peak: every weight is 1 again
    assert (t.shrink_guard(_batch([45, 40, 15])) == 1).all()
    assert hard_shares(np.array([[2, 0, 0, 1]]), 3).tolist() == [[0.5, 0.25, 0.25]]


def test_shrink_guard_only_on_estimated_priors():
    labels = np.concatenate([_batch([98, 1, 1])] * 4)
    assert PriorTracker("uniform", 3, 4, n_samples=100).shrink_guard(labels) is None
    t = PriorTracker("auto", 3, 4, n_samples=100)
    t.shrink_guard(np.concatenate([_batch([40, 30, 30])] * 4))
    w = t.shrink_guard(labels)
    assert (w[[0, 2]] == 1).all() and (w[[1, 3]] > 1).any()


def test_shrink_guard_state_resumes():
    t = PriorTracker("estimate", 3, 1, n_samples=200)
    t.update(np.array([[0.5, 0.3, 0.2]]), rows=100)
    t.shrink_guard(_batch([50, 30, 20]))
    t.shrink_guard(_batch([90, 10, 0]))
    t.marginal.see(np.array([[50.0, 30.0, 20.0]]), 100)
    state = t.state()
    assert state.shape == (1, 12)  # masses, the guard's shares and peaks, the marginal
    resumed = PriorTracker("estimate", 3, 1, n_samples=200)
    resumed.restore(state)
    labels = _batch([90, 9, 1])
    np.testing.assert_array_equal(resumed.value, t.value)
    np.testing.assert_array_equal(resumed.marginal.value, t.marginal.value)
    np.testing.assert_array_equal(resumed.shrink_guard(labels), t.shrink_guard(labels))
    older = PriorTracker("estimate", 3, 1, n_samples=200)
    older.restore(t.mass)  # a checkpoint written before the guard: the masses alone
    np.testing.assert_array_equal(older.value, t.value)
    assert older.hard is None
    np.testing.assert_array_equal(older.marginal.value, np.full((1, 3), 1 / 3))  # its own
