"""Empty clusters of the linear head re-seeded between epochs (skcce._engine._relocate)."""

import warnings

import numpy as np
import pytest
import torch

from skcce import CCEClustering
from skcce._engine._relocate import (
    _predict,
    _spread,
    _two_means,
    relocate_empty_,
    relocate_epoch_,
    starved,
)
from skcce.models._kmeans_init import head_from_centroids_


def _blobs(centres, per, seed=0, noise=0.3):
    rng = np.random.default_rng(seed)
    centres = np.asarray(centres, dtype=np.float64)
    y = np.repeat(np.arange(len(centres)), per)
    return centres[y] + noise * rng.standard_normal((len(y), centres.shape[1])), y


def _head(centroids, scale=4.0):
    layer = torch.nn.Linear(centroids.shape[1], len(centroids))
    return head_from_centroids_(layer, centroids, scale)


def test_spread_is_the_top_eigenvalue_of_the_scatter_matrix():
    rng = np.random.default_rng(0)
    for shape in ((50, 3), (3, 50)):  # both sides of the Gram trick
        Z = rng.standard_normal(shape)
        A = Z - Z.mean(axis=0)
        assert _spread(Z) == pytest.approx(np.linalg.eigvalsh(A.T @ A)[-1])
    assert _spread(np.ones((1, 4))) == 0.0


@pytest.mark.parametrize("d", [2, 40])  # more rows than features, and fewer
def test_two_means_separates_two_blobs(d):
    centres = np.zeros((2, d))
    centres[1, 0] = 10.0
    Z, y = _blobs(centres, 15, noise=1.0)
    pair, half = _two_means(Z)
    assert len(set(zip(half, y, strict=True))) == 2  # the halves are the blobs
    np.testing.assert_allclose(pair[0], Z[half].mean(axis=0))


def test_two_means_halves_equal_rows():
    pair, half = _two_means(np.ones((6, 3)))
    assert half.sum() == 3 and np.isfinite(pair).all()


def test_predict_in_blocks_matches_one_product(monkeypatch):
    from skcce._engine import _relocate

    monkeypatch.setattr(_relocate, "BLOCK_ROWS", 7)
    Z = np.random.default_rng(1).standard_normal((50, 3)).astype(np.float32)
    head = torch.nn.Linear(3, 5)
    expected = head(torch.from_numpy(Z)).argmax(dim=1).numpy()
    np.testing.assert_array_equal(_predict(Z, head.weight, head.bias), expected)


def test_empty_cluster_takes_half_of_the_merged_pair():
    # three blobs: centroid 0 covers blobs 0 and 1, centroid 1 blob 2, centroid 2 far away
    Z, y = _blobs([[0, 0], [6, 0], [0, 8]], 200)
    head = _head(np.array([[3.0, 0], [0, 8], [40, 40]]))
    assert set(np.unique(head(torch.tensor(Z, dtype=torch.float32)).argmax(1).numpy())) == {0, 1}
    donors = relocate_empty_(head.weight, head.bias, Z.astype(np.float32), [2])
    assert donors == [0]  # the merged pair spreads most
    pred = head(torch.tensor(Z, dtype=torch.float32)).argmax(1).numpy()
    # every blob is its own cluster now
    contingency = np.zeros((3, 3), int)
    np.add.at(contingency, (y, pred), 1)
    assert (contingency.max(axis=1) == 200).all()
    assert len(np.unique(pred)) == 3


def test_other_boundaries_follow_the_donor():
    # the donor's split leaves the untouched cluster's rows where they were
    Z, y = _blobs([[0, 0], [6, 0], [0, 8]], 100, seed=1)
    head = _head(np.array([[3.0, 0], [0, 8], [40, 40]]))
    before = head(torch.tensor(Z, dtype=torch.float32)).argmax(1).numpy()
    relocate_empty_(head.weight, head.bias, Z, [2])
    after = head(torch.tensor(Z, dtype=torch.float32)).argmax(1).numpy()
    assert (after[y == 2] == before[y == 2]).all()


def test_nothing_to_split_leaves_the_head_unchanged():
    Z = np.zeros((10, 2))  # one point repeated: no spread anywhere
    head = _head(np.array([[0.0, 0], [5, 5]]))
    w, b = head.weight.detach().clone(), head.bias.detach().clone()
    assert relocate_empty_(head.weight, head.bias, Z, [1]) == []
    assert torch.equal(head.weight, w) and torch.equal(head.bias, b)


class _Flat:
    """The normalisation of flat float rows that are already normalised."""

    def raw(self, X, idx, device):
        return torch.as_tensor(np.asarray(X[idx], dtype=np.float32), device=device)

    def normalize(self, xb):
        return xb


def test_starved_compares_an_epoch_with_one_batch_s_share():
    u = np.full(4, 0.25)
    assert starved([400, 300, 3, 297], u, 20).tolist() == [2]  # 3 < 0.25 * 20
    assert starved([400, 300, 5, 295], u, 20).tolist() == []
    assert starved([0, 100, 100, 100], u, 20).tolist() == [0]
    # one batch an epoch: half the epoch's share at most
    assert starved([40, 60, 40, 60], u, 250).tolist() == []
    assert starved([20, 60, 60, 60], u, 250).tolist() == [0]
    # the prior in force
    assert starved([90, 5, 5, 100], np.array([0.45, 0.05, 0.05, 0.45]), 100).tolist() == []


def test_relocate_epoch_before_the_first_epoch_reads_the_head_s_own_partition():
    Z, _ = _blobs([[0, 0], [6, 0], [0, 8]], 100)
    u = np.full(3, 1 / 3)
    args = (Z, _Flat(), torch.device("cpu"), 0, 0)
    sound = _head(np.array([[0.0, 0], [6, 0], [0, 8]]))
    w = sound.weight.detach().clone()
    assert relocate_epoch_(sound.weight, sound.bias, None, u, 12, *args) == []
    assert torch.equal(sound.weight, w)
    merged = _head(np.array([[3.0, 0], [0, 8], [40, 40]]))
    assert relocate_epoch_(merged.weight, merged.bias, None, u, 12, *args) == [0]


def test_relocate_epoch_only_acts_on_lost_clusters():
    Z, _ = _blobs([[0, 0], [6, 0], [0, 8]], 100)
    head = _head(np.array([[3.0, 0], [0, 8], [40, 40]]))
    w = head.weight.detach().clone()
    u = np.full(3, 1 / 3)
    args = (Z, _Flat(), torch.device("cpu"), 0, 0)
    assert relocate_epoch_(head.weight, head.bias, [200, 100, 5], u, 12, *args) == []
    assert torch.equal(head.weight, w)
    assert relocate_epoch_(head.weight, head.bias, [200, 100, 3], u, 12, *args) == [0]
    assert not torch.equal(head.weight, w)


def _merged_start_data():
    # four well separated blobs, one centroid of the start far from all of them
    centres = np.array([[0, 0], [10, 0], [0, 10], [10, 10]], dtype=np.float64)
    X, y = _blobs(centres, 150, seed=3, noise=0.5)
    init = np.array([[5, 0], [0, 10], [10, 10], [60, -60]], dtype=np.float64)
    return X.astype(np.float32), y, init


@pytest.mark.parametrize("verbose", [0, 1])
def test_fit_re_seeds_a_cluster_its_start_left_empty(verbose, capsys):
    X, y, init = _merged_start_data()
    est = CCEClustering(n_clusters=4, init=init, random_state=0,
                        max_epochs=4, n_init=1, verbose=verbose)  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est.fit(X)
    # the start's far centroid holds no row: re-seeded before the first epoch
    assert est.history_[0]["relocated"] == 1
    assert est.history_[0]["cluster_sizes"].count(0) == 0
    assert len(np.unique(est.labels_)) == 4
    contingency = np.zeros((4, 4), int)
    np.add.at(contingency, (y, est.labels_), 1)
    assert (contingency.max(axis=1) == 150).all()
    assert est.history_[-1]["cluster_sizes"].count(0) == 0


def test_verbose_and_quiet_fits_relocate_alike(capsys):
    X, _, init = _merged_start_data()
    labels = []
    for verbose in (0, 1):
        est = CCEClustering(n_clusters=4, init=init, random_state=0,
                            max_epochs=3, n_init=1, verbose=verbose)  # fmt: skip
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            labels.append(est.fit(X).labels_)
    np.testing.assert_array_equal(labels[0], labels[1])


def test_partial_fit_re_seeds_lost_clusters_before_a_pass():
    X, y, init = _merged_start_data()
    order = np.random.default_rng(0).permutation(len(X))
    est = CCEClustering(n_clusters=4, init=init, random_state=0)
    moved = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for chunk in np.array_split(order, 4):
            moved.append(est.partial_fit(X[chunk]).history_[0]["relocated"])
    assert moved[0] == 1  # the far centroid of the start, before the first pass
    pred = est.predict(X)
    contingency = np.zeros((4, 4), int)
    np.add.at(contingency, (y, pred), 1)
    assert (contingency.max(axis=1) == 150).all()


def test_stream_pickled_before_relocation_loads():
    X, _, init = _merged_start_data()
    est = CCEClustering(n_clusters=4, init=init, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est.partial_fit(X[:300])
    stream = est._stream
    state = stream.__getstate__()
    del state["sizes"], state["seed"]
    fresh = type(stream).__new__(type(stream))
    fresh.__setstate__(state)
    assert fresh.sizes is None and fresh.seed == 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est.partial_fit(X[300:])
