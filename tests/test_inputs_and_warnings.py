"""Array-like parameters converted once at validation, warnings attributed to the caller's
line, and the empty-cluster advice computed from the resolved settings (issues 24 and 27)."""

import warnings

import numpy as np
import pytest
import torch
from sklearn.datasets import make_blobs
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from skcce import CCEClustering
from skcce._advice import collapse_message
from skcce._engine._callbacks import small_clusters

FAST = dict(max_epochs=2, n_init=1, batch_size=64, random_state=0)
P = np.array([0.5, 0.3, 0.2])


@pytest.fixture(scope="module")
def blobs():
    X, _ = make_blobs(240, centers=3, n_features=4, random_state=0)
    return X.astype(np.float32)


def _variants(array):
    """The same numbers as a reversed view, a strided view, float32, a list and a tensor."""
    rev = np.ascontiguousarray(array[::-1])[::-1]  # negative strides
    strided = np.asfortranarray(np.stack([array, array]))[0]  # a row of a Fortran array
    return {
        "reversed": rev,
        "strided": strided,
        "float32": array.astype(np.float32),
        "list": array.tolist(),
        "tensor": torch.as_tensor(array),
    }


@pytest.mark.parametrize("kind", ["reversed", "strided", "float32", "list", "tensor"])
@pytest.mark.parametrize("path", ["batched", "one-by-one"])
def test_prior_array_likes(blobs, kind, path):
    prior = _variants(P)[kind]
    extra = {} if path == "batched" else {"verbose": 1}  # a progress bar: one by one
    est = CCEClustering(n_clusters=3, prior=prior, **FAST, **extra).fit(blobs)
    assert est.prior_.dtype == np.float64 and est.prior_.flags.c_contiguous
    assert sorted(est.prior_) == pytest.approx(sorted(P.tolist()))  # a multiset of sizes


def test_prior_reversed_view_as_in_the_report():
    p = np.random.default_rng(0).dirichlet(np.ones(5))
    X, _ = make_blobs(300, centers=5, n_features=3, random_state=1)
    for n_init in (1, 2):
        est = CCEClustering(n_clusters=5, prior=np.sort(p)[::-1], n_init=n_init, max_epochs=1)
        assert sorted(est.fit(X).prior_) == pytest.approx(sorted(p))


@pytest.mark.parametrize("kind", ["reversed", "strided", "float32", "list", "tensor"])
def test_init_centroid_array_likes(blobs, kind):
    C = blobs[[0, 100, 200]].astype(np.float64)
    variants = {
        "reversed": np.ascontiguousarray(C[::-1])[::-1],
        "strided": np.asfortranarray(C),
        "float32": C.astype(np.float32),
        "list": C.tolist(),
        "tensor": torch.as_tensor(C),
    }
    est = CCEClustering(n_clusters=3, init=variants[kind], **FAST).fit(blobs)
    reference = CCEClustering(n_clusters=3, init=C, **FAST).fit(blobs)
    assert est.labels_.shape == (len(blobs),)
    if kind != "float32":  # the same numbers: the same fit
        np.testing.assert_array_equal(est.labels_, reference.labels_)


# ----- warnings point at the caller's line -------------------------------------------------
def _collapsing():
    # two distinct rows, three clusters: a cluster stays empty, whatever the fit does
    X = np.repeat(np.eye(2), 10, axis=0).astype(np.float32)
    return X, CCEClustering(n_clusters=3, max_epochs=1, n_init=2, random_state=0)


def _ours(records):
    return [w for w in records if issubclass(w.category, (ConvergenceWarning, UserWarning))]


def test_warnings_point_at_the_callers_fit_line():
    X, est = _collapsing()
    with warnings.catch_warnings(record=True) as records:
        warnings.simplefilter("always")
        est.fit(X)
    ours = _ours(records)
    assert ours and all(w.filename == __file__ for w in ours), [
        (w.filename, w.lineno) for w in ours
    ]


def test_warnings_point_at_the_caller_without_sklearns_callback_wrapper():
    X, est = _collapsing()
    unwrapped = getattr(CCEClustering.fit, "__wrapped__", CCEClustering.fit)
    with warnings.catch_warnings(record=True) as records:
        warnings.simplefilter("always")
        unwrapped(est, X)
    ours = _ours(records)
    assert ours and all(w.filename == __file__ for w in ours)


def test_warnings_point_at_the_caller_through_a_pipeline_and_a_search():
    X, est = _collapsing()
    with warnings.catch_warnings(record=True) as records:
        warnings.simplefilter("always")
        make_pipeline(StandardScaler(), est).fit(X)
        GridSearchCV(est, {"lam": [10.0, 100.0]}, cv=2).fit(X)
    ours = _ours(records)
    assert ours and all(w.filename == __file__ for w in ours)


# ----- the empty-cluster advice ------------------------------------------------------------
def _message(**kwargs):
    X, _ = _collapsing()
    params = dict(n_clusters=3, max_epochs=1, n_init=2, random_state=0)
    params.update(kwargs)
    with pytest.warns(ConvergenceWarning) as records:
        CCEClustering(**params).fit(X)
    return " ".join(str(w.message) for w in records if w.category is ConvergenceWarning)


def test_advice_never_suggests_what_the_fit_used():
    message = _message()  # prior="auto": some restarts estimated the proportions
    assert "every one of the 2 restarts" in message
    assert "this fit: 1.3" in message and "this fit: n_init=2" in message
    assert "prior=None" in message
    assert "prior=None" not in _message(prior=None)
    used = {
        "fairness_weight": 1.3, "lam": 100.0, "learning_rate": 0.5, "init": "kmeans",
        "n_init": 10, "optimizer": "sgd", "augment": None, "batch_size": 250,
        "n_clusters": 4, "prior": "uniform",
    }  # fmt: skip
    assert "init='kmeans'" not in collapse_message([1], [], ([1], 10), True, used)
    used["init"] = "mixed"  # init="auto": random and KMeans heads
    assert "init='kmeans'" in collapse_message([1], [], ([1], 10), True, used)


def test_advice_for_a_deep_model_leaves_out_its_own_settings():
    used = {
        "fairness_weight": 1.3, "lam": 100.0, "learning_rate": 3e-4, "init": "random",
        "n_init": 1, "optimizer": "adam", "augment": "default", "batch_size": 100,
        "n_clusters": 10, "prior": "uniform",
    }  # fmt: skip
    message = collapse_message(np.array([3]), np.array([]), ([1], 1), False, used)
    assert "optimizer='adam'" not in message and "augment='default'" not in message
    assert "the only restart" in message and "1 of 10 clusters is empty" in message
    used.update(optimizer="sgd", augment=None)
    message = collapse_message(np.array([3]), np.array([]), ([1], 1), False, used)
    assert "optimizer='adam'" in message and "augment='default'" in message


def test_advice_names_the_collapsed_restarts():
    used = {
        "fairness_weight": 1.3, "lam": 100.0, "learning_rate": 0.5, "init": "mixed",
        "n_init": 10, "optimizer": "sgd", "augment": None, "batch_size": 250,
        "n_clusters": 4, "prior": "uniform",
    }  # fmt: skip
    message = collapse_message(np.array([]), np.array([2]), ([3, 7], 10), True, used)
    assert "restarts [3, 7] of 10" in message and "fewer than 1%" in message


def test_near_empty_clusters_warn():
    X = np.r_[np.zeros((300, 2)), np.ones((300, 2)) * 5, [[20.0, 20.0]]]
    labels = np.r_[np.zeros(300, int), np.ones(300, int), [2]]
    empty, near = small_clusters(labels, 4)
    assert empty.tolist() == [3] and near.tolist() == [2]
    assert [a.tolist() for a in small_clusters(labels, 4, prior=[0.5, 0.5, 0.0, 0.0])] == [[], []]
    assert X.shape[0] == labels.shape[0]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_fortran_ordered_X_predicts_bit_identically(blobs, dtype):
    # batches are C-ordered copies whatever X's order: the same BLAS call, the same bits
    est = CCEClustering(n_clusters=3, **FAST).fit(blobs.astype(dtype))
    X = blobs.astype(dtype)
    np.testing.assert_array_equal(
        est.predict_proba(np.asfortranarray(X)), est.predict_proba(np.ascontiguousarray(X))
    )
