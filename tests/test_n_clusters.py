"""``n_clusters="auto"`` (skcce/_n_clusters.py): the range, the criterion, the choice, the
fitted attributes, bad input and checkpoints."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from sklearn.datasets import make_blobs
from sklearn.metrics import adjusted_rand_score

from skcce import CCEClustering, _n_clusters
from skcce._n_clusters import (
    NoStructureWarning,
    candidate_path,
    check_range,
    choose,
    criterion,
    restarts,
)


@pytest.fixture(scope="module")
def blobs4():
    X, y = make_blobs(400, n_features=10, centers=4, random_state=0)
    return X, y


@pytest.fixture(scope="module")
def auto_fit(blobs4):
    X, _ = blobs4
    return CCEClustering(n_clusters="auto", n_clusters_range=(2, 6), random_state=0).fit(X)


# ----------------------------------------------------------------------------- units


def test_check_range_clips_the_upper_end_to_the_distinct_samples():
    assert check_range((2, 20), lambda stop: min(7, stop)) == (2, 7)
    assert check_range([1, 3], lambda stop: min(100, stop)) == (1, 3)


@pytest.mark.parametrize(
    "bad, match",
    [
        ((0, 5), "lower bound must be >= 1"),
        ((5, 3), "lower bound exceeds the upper bound"),
        ((11, 20), "exceeds the number of distinct samples"),
        (("a", 3), "two integers"),
        ((2.5, 4), "two integers"),
        ((2, 3, 4), "two integers"),
    ],
)
def test_check_range_rejects(bad, match):
    with pytest.raises(ValueError, match=match):
        check_range(bad, lambda stop: min(10, stop))


def test_criterion_grows_with_agreement_and_information_and_is_zero_when_unsupported():
    log5 = math.log(5)
    base = criterion(0.8, 0.5 * log5, 5, 100, 1000)
    assert criterion(0.9, 0.5 * log5, 5, 100, 1000) > base > 0  # more reproducible
    assert criterion(0.8, 0.7 * log5, 5, 100, 1000) > base  # crisper
    # a cluster of 2 rows where an even share is 200: the fit did not find K groups
    assert criterion(1.0, log5, 5, 2, 1000) == 0.0
    assert criterion(-0.2, 1.0, 3, 100, 300) == 0.0  # worse than chance agrees with nothing
    # information counts up to its maximum, log K (estimates a little above it add nothing)
    top = criterion(1.0, math.log(3), 3, 100, 300)
    assert criterion(1.0, 1.01 * math.log(3), 3, 100, 300) == pytest.approx(top)


def test_equally_crisp_and_reproducible_partitions_favour_the_finer():
    """The crisp factor is normalised by less than its maximum: of two partitions that are
    equally reproducible and equally crisp (the same share of log K), the finer scores more
    (what offsets the agreement's preference for coarse splits)."""
    coarse = criterion(0.9, 0.9 * math.log(2), 2, 500, 1000)
    fine = criterion(0.9, 0.9 * math.log(10), 10, 100, 1000)
    assert fine > coarse


def test_no_structure_warning_is_public():
    import skcce

    assert skcce.NoStructureWarning is NoStructureWarning
    assert issubclass(NoStructureWarning, UserWarning)


def test_choose_takes_the_best_and_says_when_nothing_stands_out():
    assert choose({2: 0.3, 3: 0.9, 4: 0.9}, 2) == 3  # ties: the smaller K
    assert choose({2: 0.1, 3: 0.05}, 1) == 1
    with pytest.warns(NoStructureWarning, match="no number of clusters stands out"):
        assert choose({2: 0.1, 3: 0.05}, 2) == 2


def test_restarts_ten_on_the_linear_head_three_on_a_deep_model():
    assert restarts("auto", "linear") == 10  # also where one fit would run a single restart
    assert restarts("auto", "vgg4") == 3
    assert restarts(5, "linear") == 5
    with pytest.raises(ValueError, match="n_init must be >= 3"):
        restarts(2, "linear")


def test_candidate_path_keeps_the_suffix(tmp_path):
    assert candidate_path(tmp_path / "run.pt", 7) == tmp_path / "run.k7.pt"
    assert candidate_path(None, 3) is None


# ----------------------------------------------------------------------------- estimator


def test_auto_finds_four_blobs(auto_fit, blobs4):
    X, y = blobs4
    est = auto_fit
    assert est.n_clusters_ == 4
    assert sorted(est.n_clusters_scores_) == [2, 3, 4, 5, 6]
    assert max(est.n_clusters_scores_, key=est.n_clusters_scores_.get) == 4
    assert est.n_clusters_restarts_ == dict.fromkeys(range(2, 7), 10)  # 5 K: no screening
    assert est.predict_proba(X).shape == (len(X), 4)
    assert len(np.unique(est.labels_)) == 4
    assert adjusted_rand_score(y, est.predict(X)) > 0.95
    assert est.n_init_ >= 3
    assert est.prior_.shape == (4,)


def test_auto_result_is_the_chosen_k_fit(auto_fit, blobs4):
    X, _ = blobs4
    direct = CCEClustering(n_clusters=4, n_init=auto_fit.n_init_, random_state=0).fit(X)
    np.testing.assert_array_equal(direct.labels_, auto_fit.labels_)


def test_integer_n_clusters_sets_n_clusters_only(blobs4):
    X, _ = blobs4
    est = CCEClustering(n_clusters="auto", n_clusters_range=(2, 3), random_state=0).fit(X)
    assert hasattr(est, "n_clusters_scores_") and hasattr(est, "n_clusters_restarts_")
    est.set_params(n_clusters=3, n_init=1, max_epochs=2).fit(X)  # no stale curve after
    assert est.n_clusters_ == 3
    assert not hasattr(est, "n_clusters_scores_") and not hasattr(est, "n_clusters_restarts_")


def test_auto_on_noise_answers_one_cluster_or_warns():
    X = np.random.default_rng(0).uniform(size=(400, 10))
    est = CCEClustering(n_clusters="auto", n_clusters_range=(1, 4), random_state=0).fit(X)
    assert est.n_clusters_ == 1
    assert set(est.predict(X)) == {0}
    assert max(est.n_clusters_scores_.values()) < 0.25
    with pytest.warns(NoStructureWarning):
        est = CCEClustering(n_clusters="auto", n_clusters_range=(2, 3), random_state=0).fit(X)
    assert est.n_clusters_ in (2, 3)


def test_auto_range_counts_distinct_images():
    images = np.zeros((40, 4, 4), dtype=np.uint8)
    images[20:, 0, 0] = 255  # two distinct images, each 20 times
    est = CCEClustering(n_clusters="auto", model="vgg4", n_clusters_range=(3, 5))
    with pytest.raises(ValueError, match=r"distinct samples \(2\)"):
        est.fit(images)


def test_auto_range_of_one_cluster_fits_one(blobs4):
    X, _ = blobs4
    est = CCEClustering(n_clusters="auto", n_clusters_range=(1, 1), random_state=0).fit(X)
    assert est.n_clusters_ == 1
    assert est.n_clusters_scores_ == {}
    assert est.predict_proba(X).shape == (len(X), 1)


def test_auto_range_is_clipped_to_the_distinct_rows():
    X = np.repeat(np.eye(3) * 10, 30, axis=0)
    est = CCEClustering(n_clusters="auto", n_clusters_range=(2, 20), random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est.fit(X)
    assert sorted(est.n_clusters_scores_) == [2, 3]
    assert est.n_clusters_ == 3


@pytest.mark.parametrize(
    "params, match",
    [
        ({"prior": [0.5, 0.5]}, "cannot take a prior array"),
        ({"init": np.zeros((2, 10))}, "cannot take init centroids"),
        ({"n_init": 2}, "n_init must be >= 3"),
        ({"n_clusters_range": (0, 4)}, "lower bound must be >= 1"),
        ({"n_clusters_range": (500, 600)}, "number of distinct samples"),
    ],
)
def test_auto_bad_input(blobs4, params, match):
    X, _ = blobs4
    with pytest.raises(ValueError, match=match):
        CCEClustering(n_clusters="auto", **params).fit(X)


def test_auto_keeps_feature_names(blobs4):
    pd = pytest.importorskip("pandas")
    X, _ = blobs4
    frame = pd.DataFrame(X, columns=[f"f{i}" for i in range(X.shape[1])])
    est = CCEClustering(n_clusters="auto", n_clusters_range=(3, 4), random_state=0).fit(frame)
    assert list(est.feature_names_in_) == list(frame.columns)
    assert est.predict(frame).shape == (len(X),)


@pytest.mark.slow
def test_auto_checkpoints_each_k_and_resumes(tmp_path, blobs4):
    X, _ = blobs4
    path = tmp_path / "run.pt"
    params = dict(n_clusters="auto", n_clusters_range=(3, 5), random_state=0, checkpoint=path)
    first = CCEClustering(**params).fit(X)
    # the candidates (each restart from its own KMeans run), then the chosen K's direct fit
    assert sorted(p.name for p in tmp_path.glob("run.k*.pt")) == [
        "run.k3.search.pt",
        "run.k4.pt",
        "run.k4.search.pt",
        "run.k5.search.pt",
    ]
    again = CCEClustering(**params).fit(X)  # every K resumes from its finished checkpoint
    np.testing.assert_array_equal(first.labels_, again.labels_)
    assert first.n_clusters_scores_ == again.n_clusters_scores_


@pytest.mark.parametrize(
    "max_epochs, n_rows, batch_size, expected",
    [
        (10, 1797, 250, 5),  # digits: 8 batches an epoch, half the training
        (10, 3000, 250, 5),
        (10, 707, 250, 10),  # 3 batches: 5 epochs would be 15 steps, under MIN_SEARCH_STEPS
        (10, 178, 250, 10),  # one batch an epoch: the whole training
        (11, 5000, 100, 6),  # the share rounds up
        (1, 5000, 250, 1),
        (3, 10, 250, 3),
    ],
)
def test_search_epochs_halves_the_training_but_keeps_enough_steps(
    max_epochs, n_rows, batch_size, expected
):
    epochs = _n_clusters.search_epochs(max_epochs, n_rows, batch_size, "linear")
    assert epochs == expected
    batches = -(-n_rows // batch_size)
    assert 1 <= epochs <= max_epochs
    assert epochs * batches >= min(_n_clusters.MIN_SEARCH_STEPS, max_epochs * batches)


def test_search_epochs_resolves_the_models_auto_batch_size():
    # the linear head's batches of 250 and a deep model's of 100 (models/_defaults.py)
    assert _n_clusters.search_epochs(10, 1000, "auto", "linear") == 10  # 4 batches: 40 steps
    assert _n_clusters.search_epochs(10, 1000, "auto", "vgg4") == 5  # 10 batches


def test_auto_shortened_search_then_the_whole_training_of_the_chosen_k(monkeypatch, tmp_path):
    X, y = make_blobs(600, n_features=10, centers=4, random_state=1)
    monkeypatch.setattr(_n_clusters, "MIN_SEARCH_STEPS", 1)  # 3 batches an epoch: shortened
    seen = []
    fit = CCEClustering.fit

    def spy(self, X, y=None):
        seen.append((self.n_clusters, self.max_epochs, len(X)))
        return fit(self, X, y)

    monkeypatch.setattr(CCEClustering, "fit", spy)
    ckpt = tmp_path / "run.pt"
    est = CCEClustering(n_clusters="auto", n_clusters_range=(2, 5), max_epochs=4,
                        n_iter_no_change=None, random_state=0, checkpoint=ckpt).fit(X)  # fmt: skip
    # the candidates with half the epochs (the outer call first), then the chosen K with
    # all of them, inside the outer call
    assert seen[0] == ("auto", 4, len(X))
    assert [e for k, e, n in seen[1:]] == [2] * 4
    assert est.n_clusters_ == 4 and adjusted_rand_score(y, est.labels_) > 0.95
    assert [h["epoch"] for h in est.history_][-1] == 3  # the final fit's whole training
    direct = CCEClustering(n_clusters=4, max_epochs=4, n_iter_no_change=None,
                           random_state=0).fit(X)  # fmt: skip
    np.testing.assert_array_equal(direct.labels_, est.labels_)
    names = sorted(p.name for p in tmp_path.glob("run.k*.pt"))
    assert names == ["run.k2.search.pt", "run.k3.search.pt", "run.k4.pt", "run.k4.search.pt",
                     "run.k5.search.pt"]  # fmt: skip
    assert est.get_params()["checkpoint"] == ckpt  # public parameters untouched


@pytest.mark.slow
def test_auto_searches_a_sample_of_large_data(monkeypatch, tmp_path):
    X, y = make_blobs(800, n_features=10, centers=4, random_state=0)
    monkeypatch.setattr(_n_clusters, "SEARCH_ROWS", len(X) // 2)
    seen = []
    fit = CCEClustering.fit

    def spy(self, X, y=None):
        seen.append((self.n_clusters, len(X)))
        return fit(self, X, y)

    monkeypatch.setattr(CCEClustering, "fit", spy)
    ckpt = tmp_path / "run.pt"
    est = CCEClustering(n_clusters="auto", n_clusters_range=(2, 5), random_state=0,
                        checkpoint=ckpt).fit(X)  # fmt: skip
    # the candidates on half the rows, then (inside the outer call) the chosen K on all
    assert seen[0] == ("auto", len(X))
    assert [n for k, n in seen[1:]] == [len(X) // 2] * 4
    assert sorted(est.n_clusters_scores_) == [2, 3, 4, 5]
    assert est.n_clusters_ == 4 and len(est.labels_) == len(X)
    assert adjusted_rand_score(y, est.labels_) > 0.95
    direct = CCEClustering(n_clusters=4, random_state=0).fit(X)  # the same as a direct fit
    np.testing.assert_array_equal(direct.labels_, est.labels_)
    assert (tmp_path / "run.k4.pt").exists() and (tmp_path / "run.k4.search.pt").exists()


# ----------------------------------------------------------------------------- threads


@pytest.mark.parametrize("workers", [1, 3])
def test_fit_all_keeps_each_candidates_warnings_apart(workers):
    import threading
    import time

    from skcce._warn import warn

    threads = set()

    def fit_one(k):
        threads.add(threading.get_ident())
        time.sleep(0.02)  # a fit takes time: the other threads take the next candidates
        warn(f"candidate {k}")  # skcce's: kept with its candidate
        warnings.warn("another library's", UserWarning, stacklevel=1)  # dropped
        return k * 10

    with warnings.catch_warnings(record=True) as shown:
        warnings.simplefilter("always")
        out = list(_n_clusters.fit_all(fit_one, range(2, 8), workers))
    assert [fitted for fitted, _ in out] == [20, 30, 40, 50, 60, 70]  # in the order of ks
    assert [caught for _, caught in out] == [[(f"candidate {k}", UserWarning)] for k in range(2, 8)]
    assert shown == []
    assert (len(threads) > 1) == (workers > 1)


def test_auto_search_on_threads_equals_the_search_one_at_a_time(monkeypatch):
    import threading

    X, _ = make_blobs(300, n_features=5, centers=3, random_state=2)
    threads = set()
    fit = CCEClustering.fit

    def spy(self, X, y=None):
        threads.add((self.n_threads, threading.get_ident()))
        return fit(self, X, y)

    monkeypatch.setattr(CCEClustering, "fit", spy)
    params = dict(n_clusters="auto", n_clusters_range=(2, 6), max_epochs=4, random_state=0)
    alone = CCEClustering(n_threads=1, **params).fit(X)
    assert {n for n, _ in threads} == {1}
    threads.clear()
    import torch

    state = torch.random.get_rng_state()
    together = CCEClustering(n_threads=3, **params).fit(X)
    assert torch.equal(torch.random.get_rng_state(), state)  # no thread touched it
    # the candidates ran single-threaded on several threads, the search's own call (and the
    # final fit inside it) with n_threads=3
    assert len({t for n, t in threads if n == 1}) > 1 and (3, threading.get_ident()) in threads
    assert together.n_clusters_scores_ == alone.n_clusters_scores_
    np.testing.assert_array_equal(together.labels_, alone.labels_)


@pytest.mark.parametrize("workers", [1, 2])
def test_fit_all_restores_the_warning_filters_when_the_caller_stops(workers):
    filters = list(warnings.filters)
    fitted = _n_clusters.fit_all(lambda k: k, range(2, 6), workers)
    assert next(fitted) == (2, [])  # the caller stops here (an error, a break)
    assert warnings.filters == filters  # not left silenced while the generator waits


# ----------------------------------------------------------------------------- screening


def test_screening_only_where_it_saves_restarts():
    assert 0 < _n_clusters.screening(10, 19) < 10  # a long range: screened with fewer
    for n_restarts, n_candidates in [(10, 5), (4, 19), (3, 19), (5, 19)]:
        # 4 x 5 + 10 x 4 > 10 x 5; too few restarts to screen with fewer
        assert _n_clusters.screening(n_restarts, n_candidates) is None
    for n_restarts, n_candidates in [(10, 7), (20, 19), (6, 40)]:
        screen = _n_clusters.screening(n_restarts, n_candidates)
        assert screen is not None
        assert screen * n_candidates + n_restarts * _n_clusters.SCREEN_KEEP < (
            n_restarts * n_candidates
        )


def test_shortlist_and_best_k_break_ties_to_the_smaller_k():
    scores = {2: 0.2, 3: 0.9, 4: 0.5, 5: 0.9, 6: 0.5, 7: 0.1}
    assert _n_clusters.shortlist(scores, keep=3) == [3, 4, 5]
    assert _n_clusters.best_k(scores) == 3
    assert _n_clusters.shortlist(scores, keep=10) == [2, 3, 4, 5, 6, 7]


def _spy_fits(monkeypatch):
    seen = []
    fit = CCEClustering.fit

    def spy(self, X, y=None):
        seen.append((self.n_clusters, self.n_init))
        return fit(self, X, y)

    monkeypatch.setattr(CCEClustering, "fit", spy)
    return seen


@pytest.mark.slow
def test_auto_screens_a_long_range_then_fits_the_best_with_every_restart(
    monkeypatch, tmp_path, blobs4
):
    X, y = blobs4
    seen = _spy_fits(monkeypatch)
    ckpt = tmp_path / "run.pt"
    est = CCEClustering(n_clusters="auto", n_clusters_range=(2, 12), random_state=0,
                        checkpoint=ckpt).fit(X)  # fmt: skip
    screen, keep = _n_clusters.SCREEN_RESTARTS, _n_clusters.SCREEN_KEEP
    ks = list(range(2, 13))
    calls = seen[1:]  # seen[0]: the "auto" fit itself
    assert sorted(k for k, n in calls[: len(ks)]) == ks
    assert {n for k, n in calls[: len(ks)]} == {screen}
    full = [k for k, n in calls[len(ks) :]]  # the chosen K's fit is inside the outer call
    assert {n for k, n in calls[len(ks) :]} == {10} and len(full) >= keep
    curve = est.n_clusters_scores_
    assert sorted(curve) == ks
    assert est.n_clusters_ == 4 == max(curve, key=curve.get) and 4 in full
    assert est.n_clusters_restarts_ == {k: 10 if k in full else screen for k in ks}
    assert adjusted_rand_score(y, est.labels_) > 0.95
    names = {p.name for p in tmp_path.glob("run.k*.pt")}
    assert {f"run.k{k}.search.screen.pt" for k in ks} <= names
    assert {f"run.k{k}.search.pt" for k in full} <= names
    # fitted again: every candidate, screened or not, resumes from its finished checkpoint
    again = CCEClustering(n_clusters="auto", n_clusters_range=(2, 12), random_state=0,
                          checkpoint=ckpt).fit(X)  # fmt: skip
    assert again.n_clusters_scores_ == curve
    assert again.n_clusters_restarts_ == est.n_clusters_restarts_
    np.testing.assert_array_equal(again.labels_, est.labels_)
    # the fully fitted K score as the unscreened search scores them (the same candidates)
    monkeypatch.setattr(_n_clusters, "SCREEN_KEEP", len(ks))  # screening saves nothing: off
    (tmp_path / "plain").mkdir()
    plain = CCEClustering(n_clusters="auto", n_clusters_range=(2, 12), random_state=0,
                          checkpoint=tmp_path / "plain" / "run.pt").fit(X)  # fmt: skip
    assert plain.n_clusters_restarts_ == dict.fromkeys(ks, 10)
    assert {k: plain.n_clusters_scores_[k] for k in full} == {k: curve[k] for k in full}
    assert plain.n_clusters_ == est.n_clusters_
    np.testing.assert_array_equal(plain.labels_, est.labels_)


def test_auto_fits_fully_a_screened_k_that_beats_every_fully_fitted_one(monkeypatch):
    # scores rigged by restarts: the screening ranks K = 2..5 first, their full fits score
    # low, so K = 6 (screened out, 0.5) leads the curve and must be fitted fully and chosen
    X, _ = make_blobs(300, n_features=5, centers=3, random_state=0)

    def score_of(fitted):
        k = fitted.n_clusters_
        if fitted.n_init_ == _n_clusters.SCREEN_RESTARTS:
            return {2: 0.9, 3: 0.8, 4: 0.7, 5: 0.6, 6: 0.5}.get(k, 0.1)
        return 0.55 if k == 6 else 0.3

    monkeypatch.setattr(_n_clusters, "score_of", score_of)
    seen = _spy_fits(monkeypatch)
    est = CCEClustering(n_clusters="auto", n_clusters_range=(2, 10), max_epochs=2,
                        random_state=0).fit(X)  # fmt: skip
    full = sorted(k for k, n in seen[1:] if n == 10)  # threads: any order within a pass
    assert full == [2, 3, 4, 5, 6]
    assert est.n_clusters_ == 6 and est.n_clusters_scores_[6] == 0.55
    assert est.n_clusters_scores_[7] == 0.1  # screened out, its screening criterion kept
    assert est.n_clusters_restarts_[7] == _n_clusters.SCREEN_RESTARTS
    assert est.n_clusters_restarts_[6] == 10


@pytest.mark.slow
def test_auto_answers_no_more_clusters_than_the_rows_support():
    """K is at most sqrt(n / 2): standardised iris (150 rows) is searched over 2..8 and
    never answers the 15 it once did, whatever the range asks."""
    from sklearn.datasets import load_iris
    from sklearn.preprocessing import StandardScaler

    X = StandardScaler().fit_transform(load_iris().data)
    assert _n_clusters.supported_max(len(X)) == 8
    est = CCEClustering(n_clusters="auto", n_clusters_range=(2, 20), random_state=0).fit(X)
    assert max(est.n_clusters_scores_) == 8
    assert 2 <= est.n_clusters_ <= 8
