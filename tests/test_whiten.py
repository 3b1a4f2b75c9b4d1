"""Within-cluster whitening (``CCEClustering(whiten=True)``, skcce._engine._whiten)."""

import csv
import pickle

import numpy as np
import pytest
from sklearn.cluster import KMeans
from sklearn.datasets import make_blobs

from skcce import CCEClustering
from skcce._engine._whiten import inverse_root, pooled_within, sample_index, within_whitening
from skcce.cli.cluster import cluster_main
from skcce.metrics import clustering_accuracy

SHEAR = np.array([[0.6, -0.6], [-0.4, 0.8]])  # scikit-learn's gallery transform


def _sheared(seed=2, n=1500):
    """Three blobs sharing one elongated covariance, on which KMeans cuts across them."""
    X, y = make_blobs(n, centers=3, random_state=seed)
    return X @ SHEAR, y


def _tied(seed=0, n=900, d=5, spread=6.0):
    """Well separated clusters sharing one covariance of condition number ``spread**2``
    (axes rotated away from the features')."""
    rng = np.random.RandomState(seed)
    root = np.linalg.qr(rng.randn(d, d))[0] @ np.diag(np.geomspace(1, spread, d))
    centres = rng.randn(3, d) * 20 * spread
    y = np.repeat(np.arange(3), n // 3)
    return centres[y] + rng.randn(len(y), d) @ root.T, y


def _within(W, y):
    """The plain (unshrunk) covariance pooled over the true classes."""
    means = np.stack([W[y == c].mean(0) for c in np.unique(y)])
    return np.cov((W - means[np.searchsorted(np.unique(y), y)]).T, bias=True)


def test_inverse_root_whitens_the_covariance():
    rng = np.random.RandomState(0)
    M = rng.randn(6, 6)
    cov = M @ M.T + 0.1 * np.eye(6)
    A = inverse_root(cov, floor=1e-12)
    np.testing.assert_allclose(A.T @ cov @ A, np.eye(6), atol=1e-8)
    np.testing.assert_allclose(A, A.T, atol=1e-12)


def test_inverse_root_strength_is_a_power_of_the_covariance():
    rng = np.random.RandomState(1)
    M = rng.randn(5, 5)
    cov = M @ M.T + 0.1 * np.eye(5)
    full = inverse_root(cov, floor=1e-12)
    np.testing.assert_array_equal(inverse_root(cov, floor=1e-12, strength=1.0), full)
    half = inverse_root(cov, floor=1e-12, strength=0.5)
    np.testing.assert_allclose(half @ half, full, atol=1e-10)  # cov ** -1/4, twice: cov ** -1/2
    for strength in (0.25, 0.75):
        A = inverse_root(cov, floor=1e-12, strength=strength)
        values = np.linalg.eigvalsh(A.T @ cov @ A)  # cov ** (1 - strength): less round than 1
        np.testing.assert_allclose(
            np.sort(values), np.sort(np.linalg.eigvalsh(cov) ** (1 - strength)), rtol=1e-8
        )
    np.testing.assert_allclose(inverse_root(cov, floor=1e-12, strength=0.0), np.eye(5), atol=1e-12)


def test_partial_whitening_rounds_the_covariance_part_way():
    X, y = _tied()
    Z = (X - X.mean(0)) / np.sqrt(X.var(0).mean())
    conditioning = {
        s: np.linalg.cond(_within(Z @ within_whitening(Z, 3, seed=0, strength=s), y))
        for s in (0.5, 0.75, 1.0)
    }
    before = np.linalg.cond(_within(Z, y))
    assert before > conditioning[0.5] > conditioning[0.75] > conditioning[1.0]
    assert conditioning[0.75] > 1.5  # not round: the directions evened out only partly


def test_pooled_within_leaves_out_the_cluster_means():
    X, y = _tied()
    pooled = pooled_within(X, y)
    assert np.linalg.norm(pooled - _within(X, y)) < 0.1 * np.linalg.norm(pooled)
    total = np.cov(X.T, bias=True)  # the spread of the means is not in the estimate
    assert np.trace(pooled) < 0.05 * np.trace(total)


def test_within_whitening_makes_the_shared_covariance_round():
    X, y = _tied()
    Z = (X - X.mean(0)) / np.sqrt(X.var(0).mean())
    A = within_whitening(Z, 3, seed=0)
    conditioning = [np.linalg.cond(_within(W, y)) for W in (Z, Z @ A)]
    assert conditioning[0] > 30  # elongated before
    assert conditioning[1] < 1.2  # round after (the shrinkage keeps it slightly off 1)
    assert abs(float((Z @ A).var(0).mean()) - 1.0) < 1e-8  # the normalisation's scale kept


def test_sample_index_bounds_the_rows():
    index = sample_index(12000, 3)
    assert len(index) == 5000 and np.all(np.diff(index) > 0) and index[-1] < 12000
    np.testing.assert_array_equal(index, sample_index(12000, 3))


def test_whitening_separates_sheared_blobs_where_kmeans_cuts_across():
    X, y = _sheared()
    kmeans = clustering_accuracy(y, KMeans(3, n_init=10, random_state=0).fit_predict(X))
    plain = CCEClustering(n_clusters=3, random_state=0).fit(X)
    white = CCEClustering(n_clusters=3, random_state=0, whiten=True).fit(X)
    assert kmeans < 0.8 and clustering_accuracy(y, plain.labels_) < 0.8
    assert clustering_accuracy(y, white.labels_) > 0.9
    assert plain.whitening_ is None and white.whitening_.shape == (2, 2)


def test_whitened_model_predicts_its_labels_in_every_dtype():
    X, y = _sheared()
    est = CCEClustering(n_clusters=3, random_state=0, whiten=True, n_init=3).fit(X)
    np.testing.assert_array_equal(est.predict(X), est.labels_)
    proba = est.predict_proba(X)
    assert np.isfinite(proba).all() and np.allclose(proba.sum(1), 1, atol=1e-5)
    reversed_view = X[::-1]
    np.testing.assert_array_equal(est.predict(reversed_view), est.labels_[::-1])
    np.testing.assert_array_equal(est.predict(X.tolist()), est.labels_)
    agree = np.mean(est.predict(X.astype(np.float32)) == est.labels_)
    assert agree > 0.99  # float32 rows: the same map, rounding only
    again = pickle.loads(pickle.dumps(est))
    np.testing.assert_array_equal(again.predict(X), est.labels_)
    np.testing.assert_array_equal(again.whitening_, est.whitening_)


def test_models_pickled_before_whitening_load(tmp_path):
    X, _ = _sheared(n=300)
    est = CCEClustering(n_clusters=3, random_state=0, n_init=1, max_epochs=1).fit(X)
    labels = est.predict(X)
    del est._inputs.__dict__["whiten"]  # an Inputs pickled by an earlier version
    est = pickle.loads(pickle.dumps(est))
    np.testing.assert_array_equal(est.predict(X), labels)


def test_whiten_is_reproducible_and_checkpointed(tmp_path):
    X, _ = _sheared(n=600)
    params = dict(n_clusters=3, random_state=1, whiten=True, n_init=2, max_epochs=2)
    first = CCEClustering(**params).fit(X)
    second = CCEClustering(**params).fit(X)
    np.testing.assert_array_equal(first.whitening_, second.whitening_)
    np.testing.assert_array_equal(first.labels_, second.labels_)
    path = tmp_path / "run.pt"
    saved = CCEClustering(**params, checkpoint=path).fit(X)
    resumed = CCEClustering(**params, checkpoint=path).fit(X)  # nothing left to train
    np.testing.assert_array_equal(saved.labels_, resumed.labels_)
    np.testing.assert_array_equal(saved.whitening_, first.whitening_)


def test_whiten_needs_the_linear_head():
    images = np.random.RandomState(0).randint(0, 255, size=(8, 16, 16), dtype=np.uint8)
    est = CCEClustering(n_clusters=2, model="vgg4", whiten=True, max_epochs=1, n_init=1)
    with pytest.raises(ValueError, match="whiten=True needs the linear head"):
        est.fit(images)


def test_whiten_rejects_non_booleans():
    with pytest.raises(ValueError, match="whiten"):
        CCEClustering(n_clusters=2, whiten="yes").fit(np.eye(4))


def test_whiten_strength_one_is_true_and_zero_is_false():
    X, _ = _sheared(n=600)
    params = dict(n_clusters=3, random_state=0, n_init=2, max_epochs=2)
    full = CCEClustering(**params, whiten=True).fit(X)
    one = CCEClustering(**params, whiten=1.0).fit(X)
    np.testing.assert_array_equal(one.whitening_, full.whitening_)
    np.testing.assert_array_equal(one.labels_, full.labels_)
    off = CCEClustering(**params, whiten=False).fit(X)
    zero = CCEClustering(**params, whiten=0.0).fit(X)
    assert zero.whitening_ is None and off.whitening_ is None
    np.testing.assert_array_equal(zero.labels_, off.labels_)


def test_partial_whitening_fits_and_predicts():
    X, y = _sheared()
    est = CCEClustering(n_clusters=3, random_state=0, whiten=0.75).fit(X)
    full = CCEClustering(n_clusters=3, random_state=0, whiten=True).fit(X)
    assert est.whitening_.shape == (2, 2) and not np.allclose(est.whitening_, full.whitening_)
    np.testing.assert_array_equal(est.predict(X), est.labels_)
    assert np.isfinite(est.predict_proba(X)).all()
    plain = CCEClustering(n_clusters=3, random_state=0).fit(X)
    kmeans = clustering_accuracy(y, KMeans(3, n_init=10, random_state=0).fit_predict(X))
    accuracy = [clustering_accuracy(y, e.labels_) for e in (plain, est, full)]
    assert accuracy[0] < accuracy[1] < accuracy[2]  # part-way: 0.70 < 0.73 < 0.94
    assert accuracy[1] > kmeans + 0.02


@pytest.mark.parametrize("bad", [1.5, -0.1, float("nan")])
def test_whiten_rejects_strengths_outside_0_1(bad):
    with pytest.raises(ValueError, match="whiten"):
        CCEClustering(n_clusters=2, whiten=bad).fit(np.eye(4))


def test_partial_whiten_needs_the_linear_head():
    images = np.random.RandomState(0).randint(0, 255, size=(8, 16, 16), dtype=np.uint8)
    est = CCEClustering(n_clusters=2, model="vgg4", whiten=0.5, max_epochs=1, n_init=1)
    with pytest.raises(ValueError, match="whiten=0.5 needs the linear head"):
        est.fit(images)


def test_cli_whiten_flag(tmp_path):
    X, y = _sheared(n=600)
    np.save(tmp_path / "f.npy", X)
    out = tmp_path / "labels.csv"
    common = ["-k", "3", "--random-state", "0", "--device", "cpu", "-o", str(out), "--force"]
    assert cluster_main([str(tmp_path / "f.npy"), *common, "--whiten"]) == 0
    with open(out, newline="") as handle:
        labels = np.array([int(row[1]) for row in list(csv.reader(handle))[1:]])
    direct = CCEClustering(n_clusters=3, random_state=0, device="cpu", whiten=True).fit(X)
    np.testing.assert_array_equal(labels, direct.labels_)
    assert cluster_main(["--whiten-strength", "0.75", str(tmp_path / "f.npy"), *common]) == 0
    with open(out, newline="") as handle:
        labels = np.array([int(row[1]) for row in list(csv.reader(handle))[1:]])
    direct = CCEClustering(n_clusters=3, random_state=0, device="cpu", whiten=0.75).fit(X)
    np.testing.assert_array_equal(labels, direct.labels_)
    assert cluster_main([str(tmp_path / "f.npy"), *common, "--whiten-strength", "much"]) == 2
    assert cluster_main([str(tmp_path / "f.npy"), *common, "--whiten-strength", "1.5"]) == 1


def test_whiten_with_n_clusters_auto():
    X, y = _sheared(n=600)
    est = CCEClustering(n_clusters="auto", n_clusters_range=(2, 4), whiten=True, random_state=0)
    est.fit(X)
    assert set(est.n_clusters_scores_) == {2, 3, 4}
    assert est.whitening_.shape == (2, 2)
    assert est.predict_proba(X).shape == (600, est.n_clusters_)


@pytest.mark.parametrize(
    "X",
    [
        np.r_[np.zeros(20), np.ones(20)][:, None],  # two point masses: no spread within
        np.r_[np.zeros((5, 2)), np.ones((5, 2))],  # fewer distinct rows than clusters
        np.ones((6, 3)),  # every row the same
    ],
)
@pytest.mark.filterwarnings("ignore")
def test_whiten_degenerate_spread_keeps_the_rows_apart(X):
    k = 3 if len(X) == 10 else 2
    plain = CCEClustering(n_clusters=k, random_state=0, n_init=1).fit(X)
    white = CCEClustering(n_clusters=k, random_state=0, n_init=1, whiten=True).fit(X)
    assert np.isfinite(white.whitening_).all() and np.abs(white.whitening_).max() > 0
    assert np.isfinite(white.predict_proba(X)).all()
    # rows that differ stay in different clusters, as without whitening
    assert len(np.unique(white.labels_)) == len(np.unique(plain.labels_))


def test_whiten_bounds_a_constant_feature():
    X, _ = _sheared(n=600)
    X = np.c_[X, np.full(len(X), 3.0)]
    est = CCEClustering(n_clusters=3, random_state=0, whiten=True, n_init=2).fit(X)
    assert np.abs(est.whitening_).max() < 1e3
    shifted = X.copy()
    shifted[:, -1] += np.random.RandomState(0).randn(len(X)) * 0.01
    assert np.mean(est.predict(shifted) == est.labels_) > 0.95


def test_auto_search_compares_plain_candidates_and_whitens_the_chosen_k():
    X, _ = _sheared(n=600)
    params = dict(n_clusters="auto", n_clusters_range=(2, 4), random_state=0)
    white = CCEClustering(**params, whiten=0.75).fit(X)
    plain = CCEClustering(**params).fit(X)
    assert white.n_clusters_scores_ == plain.n_clusters_scores_  # the same curve ...
    assert white.n_clusters_ == plain.n_clusters_
    assert plain.whitening_ is None and white.whitening_.shape == (2, 2)  # ... then whitened
    direct = CCEClustering(n_clusters=white.n_clusters_, random_state=0, whiten=0.75).fit(X)
    np.testing.assert_array_equal(white.labels_, direct.labels_)
    np.testing.assert_array_equal(white.whitening_, direct.whitening_)


@pytest.mark.slow
def test_auto_search_with_whiten_checkpoints_and_resumes(tmp_path):
    X, _ = _sheared(n=300)
    path = tmp_path / "run.pt"
    params = dict(n_clusters="auto", n_clusters_range=(2, 3), random_state=0, whiten=0.75)
    first = CCEClustering(**params, checkpoint=path).fit(X)
    names = sorted(p.name for p in tmp_path.glob("run.k*.pt"))
    # unwhitened candidates are not the final fit: the chosen K is fitted again, whitened
    assert names == sorted(["run.k2.search.pt", "run.k3.search.pt", f"run.k{first.n_clusters_}.pt"])
    again = CCEClustering(**params, checkpoint=path).fit(X)  # every fit resumes, finished
    np.testing.assert_array_equal(first.labels_, again.labels_)
    np.testing.assert_array_equal(first.whitening_, again.whitening_)
    assert first.n_clusters_scores_ == again.n_clusters_scores_


def test_auto_search_refuses_whiten_without_the_linear_head_before_searching():
    images = np.random.RandomState(0).randint(0, 255, size=(8, 16, 16), dtype=np.uint8)
    est = CCEClustering(n_clusters="auto", n_clusters_range=(2, 3), model="vgg4", whiten=0.5)
    with pytest.raises(ValueError, match="whiten=0.5 needs the linear head"):
        est.fit(images)  # the 16 x 16 images would fail VGG-4's shape check in a candidate
