"""Smoke tests of CCEClustering(model="vgg4") on images: runs, valid labels, finite history.

Deliberately without accuracy thresholds (a few hundred images and one or two epochs say
nothing stable about quality; ``benchmarks/bench_deep.py`` measures that).
"""

import warnings

import numpy as np
import pytest
from _helpers import VGG4_ADAM, count_default_augmentation

from skcce import CCEClustering
from skcce.datasets import DEBIAN_FASHION_MNIST_DIR, load_dataset

TINY = {**VGG4_ADAM, "weight_decay": 0.01, "device": "cpu"}  # epochs and batches per test


def _fit(X, n_clusters, **kwargs):
    # A tiny run may leave clusters empty; that is a ConvergenceWarning, not a failure here.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", category=UserWarning)
        return CCEClustering(n_clusters=n_clusters, **{**TINY, **kwargs}).fit(X)


def _check_fitted(est, X, n_clusters, n_epochs):
    n = X.shape[0]
    assert est.labels_.shape == (n,)
    assert est.labels_.dtype.kind in "iu"
    assert 0 <= est.labels_.min() and est.labels_.max() < n_clusters
    assert est.n_iter_ == n_epochs == len(est.history_)
    for epoch in est.history_:
        assert np.isfinite(epoch["loss"]) and np.isfinite(epoch["fairness"])
        assert np.isfinite(epoch["time"]) and epoch["time"] >= 0
        assert sum(epoch["cluster_sizes"]) == n
    proba = est.predict_proba(X[:17])
    assert proba.shape == (17, n_clusters)
    assert np.isfinite(proba).all()
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, rtol=1e-6)
    np.testing.assert_array_equal(est.predict(X[:17]), proba.argmax(axis=1))
    np.testing.assert_array_equal(est.predict(X), est.labels_)
    assert np.isfinite(est.score(X[:50]))


@pytest.fixture(scope="module")
def fashion_subset():
    if not DEBIAN_FASHION_MNIST_DIR.is_dir():
        pytest.skip("Debian's dataset-fashion-mnist package is not installed")
    X, y = load_dataset("fashion-mnist", split="test")
    rng = np.random.default_rng(0)
    idx = np.sort(rng.choice(len(X), size=200, replace=False))
    return X[idx], y[idx]


def test_vgg4_fashion_mnist_grey28(fashion_subset):
    X, _ = fashion_subset
    assert X.shape == (200, 28, 28) and X.dtype == np.uint8
    est = _fit(X, 10, batch_size=100, max_epochs=2)
    assert est.input_shape_ == (1, 28, 28)
    assert est.module_.variant == "grey28"
    _check_fitted(est, X, 10, 2)


def test_vgg4_fashion_mnist_augment(fashion_subset, monkeypatch):
    """The built-in augmentation runs on every batch, in image space (its effect on the
    training: tests/test_clustering.py::test_augmentation_on_off)."""
    X, _ = fashion_subset
    views = []
    count_default_augmentation(monkeypatch, views)
    est = _fit(X[:100], 10, batch_size=50, max_epochs=1, augment="default", augment_weight=0.5)
    _check_fitted(est, X[:100], 10, 1)
    assert views == [(50, 1, 28, 28)] * 2  # both batches of the one epoch


def test_vgg4_rgb32_uint8_channels_last():
    rng = np.random.default_rng(1)
    X = rng.integers(0, 256, size=(48, 32, 32, 3), dtype=np.uint8)
    est = _fit(X, 4, batch_size=24, max_epochs=2)
    assert est.input_shape_ == (3, 32, 32)
    assert est.module_.variant == "rgb32"
    _check_fitted(est, X, 4, 2)
    with pytest.raises(ValueError, match="features|shape"):  # images of another size
        est.predict(X[:, :28, :28])


def test_vgg4_rgb32_float_channels_first():
    rng = np.random.default_rng(2)
    X = rng.standard_normal((48, 3, 32, 32)).astype(np.float32)
    est = _fit(X, 4, batch_size=24, max_epochs=2)
    assert est.input_shape_ == (3, 32, 32)
    assert est.module_.variant == "rgb32"
    _check_fitted(est, X, 4, 2)
