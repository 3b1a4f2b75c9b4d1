"""The choice of the kept restart (skcce._engine._select): its two criteria."""

import numpy as np
import pytest
from sklearn.metrics import adjusted_rand_score

from skcce._engine._select import _adjusted_rand, agreement, partition_log_likelihood


def test_adjusted_rand_equals_scikit_learns():
    rng = np.random.default_rng(0)
    for _ in range(300):
        n = int(rng.integers(2, 200))
        a = rng.integers(0, int(rng.integers(1, 7)), n)
        b = rng.integers(0, int(rng.integers(1, 7)), n)
        codes = [np.unique(x, return_inverse=True)[1] for x in (a, b)]
        assert _adjusted_rand(*codes) == pytest.approx(adjusted_rand_score(a, b), abs=1e-12)


def test_agreement_is_label_permutation_invariant():
    rng = np.random.default_rng(1)
    a = rng.integers(0, 4, 100)
    perm = np.array([2, 0, 3, 1])
    noisy = a.copy()
    noisy[:10] = rng.integers(0, 4, 10)
    agree = agreement([a, perm[a], noisy])
    assert agree[0] == pytest.approx(agree[1]) and agree[2] < agree[0]


def test_partition_log_likelihood_by_hand():
    rng = np.random.default_rng(2)
    X = rng.normal(size=(60, 3))
    labels = [rng.integers(0, 3, 60), np.repeat([0, 1, 2], 20)]
    got = partition_log_likelihood(lambda a, b: X[a:b], labels, 3, 60)
    for lab, value in zip(labels, got, strict=True):
        within = sum(((X[lab == k] - X[lab == k].mean(0)) ** 2).sum() for k in range(3))
        sizes = np.bincount(lab, minlength=3)
        mix = (sizes * np.log(sizes / 60)).sum()
        assert value == pytest.approx(-0.5 * 60 * 3 * np.log(within / 180) + mix)


def test_partition_log_likelihood_streams_the_rows():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(9000, 2))
    labels = [rng.integers(0, 4, 9000)]
    whole = partition_log_likelihood(lambda a, b: X[a:b], labels, 4, 9000)  # 3 blocks
    within = sum(((X[labels[0] == k] - X[labels[0] == k].mean(0)) ** 2).sum() for k in range(4))
    sizes = np.bincount(labels[0], minlength=4)
    expected = -0.5 * 9000 * 2 * np.log(within / 18000) + (sizes * np.log(sizes / 9000)).sum()
    assert whole[0] == pytest.approx(expected, rel=1e-9)
