"""Model-aware "auto" settings, the KMeans head initialisation and collapse handling (issue 12)."""

import warnings

import numpy as np
import pytest
import torch
from sklearn.cluster import KMeans
from sklearn.datasets import make_blobs
from sklearn.exceptions import ConvergenceWarning
from sklearn.metrics import adjusted_rand_score

from skcce import CCEClustering
from skcce.models._defaults import AUTO_SETTINGS, regime, resolve
from skcce.models._kmeans_init import (
    check_centroids,
    head_from_centroids_,
    initial_centroids,
    n_distinct_rows,
    soft_assignment_scale,
)

FAST = dict(max_epochs=2, n_init=1, random_state=0)


@pytest.fixture(scope="module")
def blobs():
    X, y = make_blobs(n_samples=90, centers=3, n_features=4, cluster_std=0.5, random_state=0)
    return X.astype(np.float32), y


# ----- resolution of "auto" ---------------------------------------------------------------------
def test_auto_settings_fit_low_dimensional_blobs_confidently_as_kmeans_does():
    """Every setting left at "auto": 2-D blobs come out as KMeans partitions them, with
    confident probabilities (a weight decay fixed for wide data, 0.1, leaves them near 0.77),
    and get_params returns what the user passed."""
    X, _ = make_blobs(n_samples=300, centers=3, n_features=2, random_state=0)
    X = X.astype(np.float32)
    est = CCEClustering(n_clusters=3, random_state=0).fit(X)
    kmeans = KMeans(n_clusters=3, n_init=10, random_state=0).fit(X)
    # the epoch stop ends this fit after 3 epochs with one boundary row of 300 off
    assert adjusted_rand_score(kmeans.labels_, est.labels_) > 0.98
    assert est.predict_proba(X).max(axis=1).mean() > 0.85
    assert est.augment_ is None  # features, not images: no augmentation
    params = est.get_params()
    for key in ("optimizer", "learning_rate", "weight_decay", "batch_size", "augment", "init"):
        assert params[key] == "auto"
    assert params["n_init"] == "auto"


def test_large_low_dimensional_data_gets_ten_restarts():
    X, _ = make_blobs(n_samples=10_000, centers=3, n_features=2, random_state=0)
    est = CCEClustering(n_clusters=3, random_state=0, max_epochs=1).fit(X.astype(np.float32))
    assert est.n_init_ == 10 and len(est.restart_agreement_) == 10
    wide = np.hstack([X] * 32).astype(np.float32)  # 64 features: one restart, as before
    assert CCEClustering(n_clusters=3, random_state=0, max_epochs=1).fit(wide).n_init_ == 1


def test_explicit_value_wins(blobs):
    est = CCEClustering(
        n_clusters=3,
        optimizer="adam",
        learning_rate=0.01,
        weight_decay=0.0,
        batch_size=32,
        init="random",
        **FAST,
    ).fit(blobs[0])
    assert (est.optimizer_, est.learning_rate_, est.weight_decay_) == ("adam", 0.01, 0.0)
    assert (est.batch_size_, est.init_, est.n_init_) == (32, "random", 1)
    assert est.get_params()["augment"] == "auto" and est.augment_ is None


@pytest.mark.parametrize("model", ["vgg4", "resnet18", torch.nn.Linear(4, 3)])
def test_deep_models_resolve_to_the_deep_settings(model):
    auto = {
        key: "auto"
        for key in (
            "optimizer",
            "learning_rate",
            "weight_decay",
            "batch_size",
            "augment",
            "init",
            "n_init",
            "n_iter_no_change",
        )
    }
    got = resolve(auto, model, 500, images=True)
    deep = AUTO_SETTINGS["deep"]
    assert regime(model) == "deep"
    assert got == {**deep, "n_init": 1}
    assert got["optimizer"] == "adam" and got["augment"] == "default"
    flat = resolve({"augment": "auto"}, model, 500, images=False)
    assert flat == {"augment": None}  # a user module on 2-D features: no image augmentation


def test_auto_init_starts_every_restart_from_kmeans():
    from skcce.models._defaults import restart_init

    assert [restart_init("auto-kmeans", r) for r in range(4)] == ["kmeans"] * 4
    assert [restart_init("random", r) for r in range(2)] == ["random"] * 2
    assert {restart_init("kmeans", r) for r in range(3)} == {"kmeans"}
    assert restart_init(np.zeros((2, 2)), 0) == "array"


def test_n_init_auto():
    assert resolve({"n_init": "auto"}, "linear", 9_999, images=False) == {"n_init": 10}
    assert resolve({"n_init": "auto"}, "linear", 10_000, images=False) == {"n_init": 1}
    # few features: ten restarts at any size (a restart costs the mini-batch loop, not d)
    few = {"n_init": 10}
    assert resolve({"n_init": "auto"}, "linear", 10**6, images=False, n_features=63) == few
    many = {"n_init": 1}
    assert resolve({"n_init": "auto"}, "linear", 10_000, images=False, n_features=64) == many
    assert resolve({"n_init": "auto"}, "vgg4", 10**6, images=False, n_features=2) == many
    centroids = {"n_init": "auto", "init": np.zeros((2, 2))}
    assert resolve(centroids, "linear", 100, images=False)["n_init"] == 1
    assert resolve({"n_init": 3}, "vgg4", 100, images=True) == {"n_init": 3}


def test_deep_fit_records_resolved_settings():
    def factory(shape, k):
        return torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(int(np.prod(shape)), k))

    rng = np.random.RandomState(0)
    X = rng.randint(0, 255, size=(12, 8, 8)).astype(np.uint8)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        est = CCEClustering(n_clusters=2, model=factory, max_epochs=1, random_state=0).fit(X)
    assert (est.optimizer_, est.learning_rate_, est.weight_decay_) == ("adam", 3e-4, 0.01)
    assert (est.batch_size_, est.augment_, est.init_, est.n_init_) == (100, "default", "random", 1)


# ----- the KMeans initialisation ------------------------------------------------------------
def test_head_from_centroids_is_soft_kmeans():
    rng = np.random.RandomState(0)
    C, Z, s = rng.randn(3, 5), rng.randn(7, 5), 0.7
    layer = head_from_centroids_(torch.nn.Linear(5, 3).double(), C, s)
    logits = layer(torch.as_tensor(Z)).detach().numpy()
    d2 = ((Z[:, None, :] - C[None]) ** 2).sum(-1)
    expected = np.exp(-0.5 * s * d2)
    expected /= expected.sum(1, keepdims=True)
    got = np.exp(logits - logits.max(1, keepdims=True))
    np.testing.assert_allclose(got / got.sum(1, keepdims=True), expected, rtol=1e-10)


def test_scale_reaches_the_target_confidence():
    rng = np.random.RandomState(1)
    Z, C = rng.randn(200, 6), rng.randn(4, 6)
    for target in (0.5, 0.9):
        s = soft_assignment_scale(Z, C, target=target)
        d2 = ((Z[:, None, :] - C[None]) ** 2).sum(-1)
        p = np.exp(-0.5 * s * (d2 - d2.min(1, keepdims=True)))
        assert abs((p.max(1) / p.sum(1)).mean() - target) < 1e-6


def test_initial_centroids_seeded_and_subsampled(monkeypatch):
    X, _ = make_blobs(n_samples=300, centers=6, n_features=3, random_state=0)
    fetched = []

    def fetch(idx):
        fetched.append(len(idx))
        return X[idx]

    a = initial_centroids(fetch, len(X), 6, "kmeans", seed=1)
    b = initial_centroids(fetch, len(X), 6, "kmeans", seed=1)
    c = initial_centroids(fetch, len(X), 2, "kmeans", seed=2)
    np.testing.assert_array_equal(a[0], b[0])
    assert a[0].shape == (6, 3) and c[0].shape == (2, 3) and a[1] > 0
    import skcce.models._kmeans_init as ki

    monkeypatch.setattr(ki, "MAX_SAMPLES", 100)
    monkeypatch.setattr(ki, "ROWS_PER_CENTROID", 60)
    initial_centroids(fetch, len(X), 2, "kmeans", seed=3)
    assert fetched[-1] == 120  # a subsample (ROWS_PER_CENTROID rows a cluster), not all 300
    initial_centroids(fetch, len(X), 1, "kmeans", seed=3)
    assert fetched[-1] == 100  # at least MAX_SAMPLES rows


def test_kmeans_init_restarts_differ(blobs):
    X = np.random.RandomState(0).randn(200, 5)
    heads = [initial_centroids(lambda idx: X[idx], len(X), 4, "kmeans", seed=s)[0] for s in (0, 1)]
    assert not np.allclose(np.sort(heads[0], 0), np.sort(heads[1], 0))


def test_kmeans_init_finds_blobs(blobs):
    X, y = blobs
    est = CCEClustering(n_clusters=3, init="kmeans", **FAST).fit(X)
    assert adjusted_rand_score(y, est.labels_) == 1.0


def test_centroid_array_init(blobs):
    X, y = blobs
    centroids = np.stack([X[y == k].mean(0) for k in range(3)])
    est = CCEClustering(n_clusters=3, init=centroids, max_epochs=1, random_state=0).fit(X)
    assert est.n_init_ == 1 and est.init_ is centroids
    assert (est.labels_ == y).all()  # cluster k starts (and stays) at class k's centre


def test_auto_init_falls_back_to_random_on_few_distinct_rows():
    X = np.repeat(np.eye(2), 10, axis=0)  # 2 distinct rows, 3 clusters
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        est = CCEClustering(n_clusters=3, **FAST).fit(X)
    assert est.init_ == "random"


def test_n_distinct_rows():
    assert n_distinct_rows(np.array([[1.0, 2.0], [1.0, 2.0], [0.0, 2.0]])) == 2


def test_check_centroids_copies():
    c = np.zeros((2, 3))
    out = check_centroids(c, 2, 3)
    out[0, 0] = 1
    assert c[0, 0] == 0


# ----- collapse ------------------------------------------------------------------------------
def test_restart_with_empty_cluster_never_kept_over_one_without():
    from skcce._engine._select import Best, choose

    collapsed = np.array([[0.99, 0.01, 0.0], [0.0, 0.01, 0.99]] * 6)  # cluster 1 empty
    full = np.array([[0.4, 0.3, 0.3], [0.3, 0.4, 0.3], [0.3, 0.3, 0.4]] * 4)

    def record(run, proba, score):
        labels = proba.argmax(axis=1)
        sizes = np.bincount(labels, minlength=3)
        return Best(score, None, [{"epoch": 0}], labels, run, sizes=sizes)

    # a lower score, but no empty cluster
    assert choose([record(0, collapsed, 2.0), record(1, full, 0.1)])[0].run == 1
    assert choose([record(1, full, 0.1), record(2, collapsed, 5.0)])[0].run == 1
    # two restarts: no majority to agree with, the score decides
    assert choose([record(1, full, 0.1), record(3, full, 0.2)])[0].run == 3
    # a cluster of zero prior (the record's, at the end of its restart) is meant to be
    # empty: the score decides again
    meant = record(5, collapsed, 2.0)
    meant.prior = np.array([0.5, 0.0, 0.5])
    assert choose([record(1, full, 0.1), meant])[0].run == 5


def test_consensus_keeps_the_restart_the_others_agree_with():
    from skcce._engine._select import Best, agreement, choose

    rng = np.random.default_rng(0)
    truth = np.repeat(np.arange(3), 20)

    def noisy(flips):  # the truth with ``flips`` labels changed
        labels = truth.copy()
        idx = rng.choice(len(labels), flips, replace=False)
        labels[idx] = (labels[idx] + 1) % 3
        return labels

    odd = np.tile(np.arange(3), 20)  # a partition unlike the others, with the best score
    runs = [noisy(2), noisy(4), odd, noisy(3), noisy(1)]
    scores = [0.5, 0.6, 5.0, 0.4, 0.3]
    records = [
        Best(s, None, [{}], lab, r, sizes=np.bincount(lab, minlength=3))
        for r, (lab, s) in enumerate(zip(runs, scores, strict=True))
    ]
    best, agree = choose(records)
    assert best.run == 4  # the least noisy copy of the shared partition, not the top score
    assert agree.argmin() == 2 and agree.shape == (5,)
    assert agreement([truth, truth, truth]).tolist() == [1.0, 1.0, 1.0]


def test_every_restart_collapsed_warning_names_settings():
    X = np.repeat(np.eye(2), 10, axis=0).astype(np.float32)
    with pytest.warns(ConvergenceWarning) as record:
        CCEClustering(n_clusters=3, max_epochs=1, n_init=2, random_state=0).fit(X)
    message = " ".join(str(w.message) for w in record if w.category is ConvergenceWarning)
    assert "every one of the 2 restarts ended with an empty or near-empty cluster" in message
    for name in ("fairness_weight", "lam", "learning_rate", "init"):
        assert name in message


def test_divergence_is_a_floating_point_error():
    class Diverged(torch.nn.Module):  # a network whose outputs have overflowed
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(3, 2)

        def forward(self, x):
            return self.lin(x) * float("inf")

    X = np.random.RandomState(0).randn(60, 3)
    est = CCEClustering(n_clusters=2, model=Diverged(), **FAST)
    with pytest.raises(FloatingPointError, match="non-finite.*lower learning_rate"):
        est.fit(X)


def test_auto_kmeans_restarts_start_from_their_own_kmeans_runs():
    """init="auto": every restart starts from a KMeans head, each from its own run."""
    X = np.random.RandomState(2).randn(300, 4)
    est = CCEClustering(n_clusters=5, n_init=4, random_state=0)
    plan = est._plan(est._validate_X(X, reset=True), 5)
    heads = [
        plan.build(torch.Generator().manual_seed(int(s)), run=r, seed=int(s)).weight.detach()
        for r, s in enumerate(plan.seeds)
    ]
    assert plan.build.inits == {0: "kmeans", 1: "kmeans", 2: "kmeans", 3: "kmeans"}
    assert not torch.equal(heads[1], heads[3])
    assert not torch.equal(heads[0], heads[2])
