"""The fairness term's running marginal (skcce._engine._marginal) and its use in a fit."""

import math
import pickle

import numpy as np
import pytest

from skcce import CCEClustering
from skcce._engine._marginal import RunningMarginal, window_rows
from skcce._engine._prior import PriorTracker
from skcce.solvers import _compiled


def test_window_rows_is_the_coupon_collectors_expectation():
    for k in (1, 2, 7, 100):
        expected = k * sum(1 / j for j in range(1, k + 1))
        assert window_rows(k) == math.ceil(expected)
    assert window_rows(1) == 1
    assert window_rows(2) == 3  # 2 * 1.5


def test_carry_and_update_are_the_windows_marginal():
    m = RunningMarginal(np.array([[0.5, 0.25, 0.25]]))  # window 6 (3 * 11/6 = 5.5)
    assert m.window == 6
    assert m.carry(6) is None and m.carry(10) is None
    np.testing.assert_allclose(m.carry(2), [[2.0, 1.0, 1.0]])  # 4 rows of m
    sums = np.array([[0.0, 2.0, 0.0]])  # a batch of 2 rows, both in cluster 1
    m.see(sums, 2)
    # the window: the batch's column sums plus 4 rows of the old marginal, over 6 rows
    np.testing.assert_allclose(m.value, [[2.0 / 6, 3.0 / 6, 1.0 / 6]])
    assert m.value.sum() == pytest.approx(1.0)
    m.see(np.array([[3.0, 3.0, 4.0]]), 10)  # a batch larger than the window is its own
    np.testing.assert_allclose(m.value, [[0.3, 0.3, 0.4]])


def test_tracker_starts_the_marginal_at_the_prior_and_pickles_it():
    t = PriorTracker("match", 3, [0, 1], values=np.array([0.2, 0.3, 0.5]))
    np.testing.assert_allclose(t.marginal.value, t.value)
    t.marginal.see(np.array([[1.0, 0.0, 0.0], [0.0, 0.0, 1.0]]), 1)
    back = pickle.loads(pickle.dumps(t))
    np.testing.assert_array_equal(back.marginal.value, t.marginal.value)
    old = pickle.loads(pickle.dumps(t))
    del old.__dict__["marginal"]  # a tracker pickled before the marginal existed
    state = old.__dict__.copy()
    fresh = PriorTracker.__new__(PriorTracker)
    fresh.__setstate__(state)
    np.testing.assert_allclose(fresh.marginal.value, t.value)


def _capture_carries(monkeypatch):
    seen = []
    solve_stack = _compiled.solve_stack

    def spy(probs, **kw):
        carry = kw.get("carry")
        seen.append((probs.shape[1], None if carry is None else np.array(carry)))
        return solve_stack(probs, **kw)

    monkeypatch.setattr(_compiled, "solve_stack", spy)
    return seen


def test_a_fit_carries_mass_only_into_batches_smaller_than_the_window(monkeypatch):
    seen = _capture_carries(monkeypatch)
    X = np.random.default_rng(0).normal(size=(300, 4)).astype(np.float32)
    CCEClustering(n_clusters=3, n_init=1, max_epochs=1, batch_size=100,
                  random_state=0).fit(X)  # fmt: skip
    assert seen and all(c is None for _, c in seen)  # window 6 rows < 100
    seen.clear()
    CCEClustering(n_clusters=30, n_init=1, max_epochs=2, batch_size=60,
                  random_state=0).fit(X)  # fmt: skip
    window = window_rows(30)  # 120 rows
    assert seen and all(c is not None for _, c in seen)
    for n_rows, carry in seen:
        assert carry.shape == (1, 30)
        assert (carry >= 0).all()
        assert carry.sum() == pytest.approx(window - n_rows)


def test_the_carry_follows_the_batches_pseudo_labels(monkeypatch):
    seen = _capture_carries(monkeypatch)
    X = np.random.default_rng(0).normal(size=(240, 4)).astype(np.float32)
    est = CCEClustering(n_clusters=30, n_init=1, max_epochs=1, batch_size=60, random_state=0)
    est.fit(X)
    first = seen[0][1][0]
    np.testing.assert_allclose(first, np.full(30, (window_rows(30) - 60) / 30))  # the prior
    later = seen[-1][1][0]
    assert not np.allclose(later, first)  # moved by the batches' labels

