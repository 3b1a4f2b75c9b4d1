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


@pytest.mark.parametrize("n", [60, 9000])  # one block of rows, and several
def test_partition_log_likelihood_by_hand(n):
    rng = np.random.default_rng(2)
    X = rng.normal(size=(n, 3))
    labels = [rng.integers(0, 3, n), np.repeat([0, 1, 2], n // 3)]
    asked = []

    def rows(a, b):
        asked.append(b - a)
        return X[a:b]

    got = partition_log_likelihood(rows, labels, 3, n)
    assert sum(asked) == n and (n < 1000 or max(asked) < n)  # streamed: never all at once
    for lab, value in zip(labels, got, strict=True):
        within = sum(((X[lab == k] - X[lab == k].mean(0)) ** 2).sum() for k in range(3))
        sizes = np.bincount(lab, minlength=3)
        mix = (sizes * np.log(sizes / n)).sum()
        assert value == pytest.approx(-0.5 * n * 3 * np.log(within / (3 * n)) + mix, rel=1e-9)
