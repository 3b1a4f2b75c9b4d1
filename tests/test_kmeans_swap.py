"""Split-and-merge moves of the KMeans start (skcce.models._kmeans_swap)."""

import numpy as np
import pytest
from sklearn.cluster import KMeans

from skcce.metrics import clustering_accuracy
from skcce.models._kmeans_init import kmeans_centroids
from skcce.models._kmeans_swap import nearest_two, split_in_two, swap_refine


def _lloyd_on(Z):
    def lloyd(C):
        C = np.asarray(C, dtype=Z.dtype)
        return KMeans(len(C), init=C, n_init=1).fit(Z).cluster_centers_

    return lloyd


def _inertia(Z, C):
    return float(nearest_two(Z, C)[2].sum())


def _blobs(n_blobs, per_blob, d, seed, spread=8.0):
    rng = np.random.default_rng(seed)
    centres = spread * rng.standard_normal((n_blobs, d))
    y = np.repeat(np.arange(n_blobs), per_blob)
    return centres[y] + rng.standard_normal((len(y), d)), y, centres


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_nearest_two_matches_brute_force(dtype):
    rng = np.random.default_rng(0)
    Z = rng.standard_normal((9000, 5)).astype(dtype)  # more than one block of rows
    C = rng.standard_normal((7, 5))
    first, second, d1, d2 = nearest_two(Z, C)
    D = ((Z[:, None, :].astype(np.float64) - C[None]) ** 2).sum(axis=2)
    order = np.argsort(D, axis=1)
    assert (first == order[:, 0]).all() and (second == order[:, 1]).all()
    tol = 1e-4 if dtype == np.float32 else 1e-9
    np.testing.assert_allclose(d1, D[np.arange(len(Z)), order[:, 0]], rtol=tol, atol=tol)
    np.testing.assert_allclose(d2, D[np.arange(len(Z)), order[:, 1]], rtol=tol, atol=tol)


def test_split_in_two_separates_two_groups_and_handles_identical_rows():
    Z, y, _ = _blobs(2, 50, 3, seed=1)
    centres, inertia = split_in_two(Z)
    labels = nearest_two(Z, centres)[0]
    assert clustering_accuracy(y, labels) == 1.0
    assert inertia == pytest.approx(_inertia(Z, centres))
    same = np.ones((4, 3))
    centres, inertia = split_in_two(same)
    assert inertia == 0.0 and np.allclose(centres, 1.0)


def test_swap_refine_moves_a_centroid_across_the_data():
    # six blobs; the start has two centroids in blob 0 and one between blobs 4 and 5
    Z, y, centres = _blobs(6, 200, 4, seed=2, spread=20.0)
    start = np.r_[centres[:4] + 0.0, centres[[0]] + 0.5, (centres[[4]] + centres[[5]]) / 2]
    lloyd = _lloyd_on(Z)
    start = lloyd(start)
    assert clustering_accuracy(y, nearest_two(Z, start)[0]) < 0.9  # a Lloyd local optimum
    C, rounds = swap_refine(Z, start, lloyd)
    assert rounds >= 1
    assert clustering_accuracy(y, nearest_two(Z, C)[0]) == 1.0
    assert _inertia(Z, C) < _inertia(Z, start)


def test_swap_refine_runs_lloyd_to_convergence_once_after_the_kept_rounds():
    Z, _, centres = _blobs(6, 200, 4, seed=2, spread=20.0)
    start = np.r_[centres[:4] + 0.0, centres[[0]] + 0.5, (centres[[4]] + centres[[5]]) / 2]
    lloyd = _lloyd_on(Z)
    calls = []

    def counted(C):
        calls.append(C.copy())
        return lloyd(C)

    C, rounds = swap_refine(Z, lloyd(start), counted)
    assert rounds >= 1 and len(calls) == 1
    # the converged result is a fixed point of Lloyd's iterations
    np.testing.assert_allclose(lloyd(C), C, atol=1e-8)
    calls.clear()
    swap_refine(Z, C, counted)  # already the optimum: no round kept, no Lloyd run
    assert calls == []


@pytest.mark.parametrize("seed", range(4))
def test_swap_refine_never_raises_the_inertia(seed):
    rng = np.random.default_rng(seed)
    Z = rng.standard_normal((600, 3)) * rng.uniform(0.5, 3.0, size=3)  # no true clusters
    lloyd = _lloyd_on(Z)
    start = lloyd(Z[rng.choice(len(Z), 12, replace=False)])
    C, _ = swap_refine(Z, start, lloyd)
    assert C.shape == start.shape and np.isfinite(C).all()
    assert _inertia(Z, C) <= _inertia(Z, start) * (1 + 1e-12)


def test_swap_refine_leaves_degenerate_cases_alone():
    Z = np.arange(6, dtype=np.float64).reshape(3, 2)
    C = Z.copy()
    out, rounds = swap_refine(Z, C, _lloyd_on(Z))  # as many centroids as rows
    assert rounds == 0 and np.array_equal(out, C)
    out, rounds = swap_refine(Z, C[:1], _lloyd_on(Z))  # one centroid
    assert rounds == 0 and np.array_equal(out, C[:1])


def test_kmeans_centroids_find_the_blobs_lloyd_misses():
    # 40 well separated blobs in 32 dimensions: k-means++ and Lloyd alone leave some pairs
    # merged and others split; the start recovers all of them
    Z, y, _ = _blobs(40, 60, 32, seed=3, spread=1.5)
    seeds_missed = []
    for seed in range(3):
        labels = nearest_two(Z, kmeans_centroids(Z, 40, seed=seed))[0]
        lloyd_only = KMeans(40, n_init=1, random_state=seed).fit_predict(Z)
        assert clustering_accuracy(y, labels) >= clustering_accuracy(y, lloyd_only)
        seeds_missed.append(clustering_accuracy(y, lloyd_only) < 1.0)
        assert clustering_accuracy(y, labels) == 1.0
    assert any(seeds_missed)  # the data do hold Lloyd's local optima
