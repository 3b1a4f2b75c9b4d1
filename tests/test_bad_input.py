"""The bad-input table (docs/bad_input.md): one test per row.

Every row gives either a correct result (finite probabilities, rows summing to 1, the blobs
found again where the input still holds them) or a clear error naming the problem; a
collapse only ever comes with a warning that says why. Rows about ``solve_pseudo_labels``
that tests/test_solvers.py already covers are only referenced by the table.
"""

import sys
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
import torch
from _helpers import (
    VGG4_ADAM,
    assert_proba_within_float32,
    float32_blobs,
    float32_logit_bound,
)
from sklearn.exceptions import ConvergenceWarning
from sklearn.metrics import adjusted_rand_score

from skcce import CCEClustering
from skcce.solvers import solve_pseudo_labels

FAST = dict(max_epochs=2, n_init=1, batch_size=64, random_state=0)
DEEP = VGG4_ADAM


@pytest.fixture(scope="module")
def blobs():
    return float32_blobs(90, 4, 0.5)


@pytest.fixture(scope="module")
def fitted(blobs):
    return CCEClustering(n_clusters=3, **FAST).fit(blobs[0])


@pytest.fixture(scope="module")
def images():
    rng = np.random.RandomState(0)
    return rng.randint(0, 255, size=(20, 28, 28)).astype(np.uint8)


@pytest.fixture(scope="module")
def fitted_vgg4(images):
    return _quiet_fit(CCEClustering(n_clusters=2, **DEEP), images)


def _quiet_fit(est, X):
    # tiny deep runs may leave a cluster empty (a ConvergenceWarning, not the point here)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return est.fit(X)


def _check_proba(P, n, k):
    assert P.shape == (n, k)
    assert np.isfinite(P).all()
    np.testing.assert_allclose(P.sum(axis=1), 1.0, atol=1e-12)


def _fit_checked(X, n_clusters=3, **params):
    """Fit on X with warnings as errors; valid labels and probabilities."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        est = CCEClustering(n_clusters=n_clusters, **{**FAST, **params}).fit(X)
        P = est.predict_proba(X)
    _check_proba(P, len(X), n_clusters)
    np.testing.assert_array_equal(est.labels_, P.argmax(axis=1))
    return est


# ----- NaN, infinity, empty arrays -----------------------------------------------------------
# (in a chunk of partial_fit: tests/test_partial_fit.py::test_bad_chunk_leaves_model_unchanged)
@pytest.mark.parametrize("value, match", [(np.nan, "NaN"), (np.inf, "infinity")])
def test_nan_inf_rejected(blobs, fitted, value, match):
    X = blobs[0].copy()
    X[5, 1] = value
    est = CCEClustering(n_clusters=3, **FAST)
    with pytest.raises(ValueError, match=match):
        est.fit(X)
    assert not hasattr(est, "labels_")
    for method in (fitted.predict, fitted.predict_proba, fitted.score):
        with pytest.raises(ValueError, match=match):
            method(X)


def test_nan_images_rejected(images, fitted_vgg4):
    X = images.astype(np.float32)
    X[0, 3, 3] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        CCEClustering(n_clusters=2, **DEEP).fit(X)
    with pytest.raises(ValueError, match="NaN"):
        fitted_vgg4.predict(X)


# (0 samples at fit: tests/test_clustering.py::test_bad_input_fit)
@pytest.mark.parametrize("shape, match", [((10, 0), "0 feature"), ((0, 28, 28), "0 sample")])
def test_empty_arrays_rejected(shape, match):
    model = "linear" if len(shape) == 2 else "vgg4"
    with pytest.raises(ValueError, match=match):
        CCEClustering(n_clusters=2, model=model, **FAST).fit(np.zeros(shape, np.float32))


def test_empty_array_at_predict(fitted):
    with pytest.raises(ValueError, match="0 sample"):
        fitted.predict(np.zeros((0, 4), dtype=np.float32))


# ----- few samples, n_clusters=1 -------------------------------------------------------------
def test_one_sample(blobs):
    est = _fit_checked(blobs[0][:1], n_clusters=1)
    np.testing.assert_array_equal(est.labels_, [0])


def test_one_image(images):
    est = CCEClustering(n_clusters=1, **DEEP).fit(images[:1])
    np.testing.assert_array_equal(est.labels_, [0])


def test_as_many_samples_as_clusters(blobs):
    X, y = blobs
    X3 = X[[np.flatnonzero(y == c)[0] for c in range(3)]]
    est = _fit_checked(X3, n_clusters=3, lam=1e3)
    assert sorted(est.labels_) == [0, 1, 2]  # one sample a cluster


def test_one_cluster(blobs):
    est = _fit_checked(blobs[0], n_clusters=1)
    assert (est.labels_ == 0).all()
    np.testing.assert_array_equal(est.predict_proba(blobs[0]), 1.0)


# ----- constant features ---------------------------------------------------------------------
def test_constant_feature_ignored(blobs):
    X, y = blobs
    Xc = np.hstack([X, np.full((len(X), 1), 7.0, dtype=np.float32)])
    est = _fit_checked(Xc)
    assert adjusted_rand_score(y, est.labels_) == 1.0


@pytest.mark.parametrize("value", [0.0, 3.0, 1e30])
def test_constant_X_warns(blobs, value):
    X = np.full_like(blobs[0], value)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        est = CCEClustering(n_clusters=3, **FAST).fit(X)
    said = [str(w.message) for w in caught]
    assert any("all 90 samples of X are identical" in m for m in said), said
    assert any("clusters are empty" in m for m in said), said  # and the collapse is named
    _check_proba(est.predict_proba(X), len(X), 3)


def test_constant_images_warn(images):
    X = np.full_like(images, 17)
    with pytest.warns(UserWarning, match="identical"):
        est = _quiet_fit(CCEClustering(n_clusters=2, **DEEP), X)
    _check_proba(est.predict_proba(X), len(X), 2)


# ----- huge and tiny scales ------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("scale", [1e30, 1e-30, 1e-40])
def test_feature_scale_does_not_matter(blobs, scale, dtype):
    X, y = blobs
    Xs = (X.astype(np.float64) * scale).astype(dtype)
    est = _fit_checked(Xs)
    assert adjusted_rand_score(y, est.labels_) == 1.0


def test_power_of_two_scale_gives_the_same_fit(blobs, fitted):
    X = blobs[0]
    for k in (-100, 100):
        est = _fit_checked(X * np.float32(2.0**k))
        np.testing.assert_array_equal(est.labels_, fitted.labels_)
        np.testing.assert_array_equal(
            est.predict_proba(X * np.float32(2.0**k)), fitted.predict_proba(X)
        )


@pytest.mark.parametrize("scale", [1e300, 1e-300])
def test_float64_beyond_float32_range(blobs, scale):
    X, y = blobs
    est = _fit_checked(X.astype(np.float64) * scale)
    assert adjusted_rand_score(y, est.labels_) == 1.0


def test_large_offset_float64(blobs):
    X, y = blobs
    est = _fit_checked(X.astype(np.float64) + 1e10)  # E[x^2] - E[x]^2 would lose the spread
    assert adjusted_rand_score(y, est.labels_) == 1.0


def test_predict_far_outside_fit_range(fitted, blobs):
    X = blobs[0]
    _check_proba(fitted.predict_proba(X * np.float32(1e30)), len(X), 3)
    with pytest.raises(ValueError, match="not finite for rows .* check the scale of X"):
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # the error says it all: no RuntimeWarning
            fitted.predict_proba(X.astype(np.float64) * 1e300)


@pytest.mark.parametrize("scale", [1e30, 1e-30])
def test_image_scale(images, scale):
    X = images.astype(np.float32) * np.float32(scale)
    est = _quiet_fit(CCEClustering(n_clusters=2, **DEEP), X)
    _check_proba(est.predict_proba(X), len(X), 2)
    assert est._inputs.std[0] > 0 and np.isfinite(est._inputs.std).all()


# ----- dtypes --------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.float16, np.float64, np.int64, np.int32, np.uint8])
def test_feature_dtypes(blobs, dtype):
    X, y = blobs
    Xd = (X * 10 + 100).astype(dtype)
    est = _fit_checked(Xd)
    assert adjusted_rand_score(y, est.labels_) == 1.0
    _check_proba(est.predict_proba(Xd.astype(np.float32)), len(X), 3)


def test_bool_features(blobs):
    X, _ = blobs
    _fit_checked(X > 0)


@pytest.mark.parametrize("dtype", [np.float16, np.float64, np.int64])
def test_image_dtypes(images, dtype):
    X = images.astype(dtype)
    est = _quiet_fit(CCEClustering(n_clusters=2, **DEEP), X)
    assert est.input_shape_ == (1, 28, 28)
    _check_proba(est.predict_proba(X), len(X), 2)


# ----- memory layout: non-contiguous, read-only, no copy --------------------------------------
@pytest.mark.parametrize("layout", ["fortran", "strided"])
def test_non_contiguous(blobs, fitted, layout):
    X = blobs[0]
    Xn = np.asfortranarray(X) if layout == "fortran" else np.repeat(X, 2, axis=1)[:, ::2]
    assert not Xn.flags.c_contiguous
    est = _fit_checked(Xn)
    np.testing.assert_array_equal(est.labels_, fitted.labels_)
    # Not bit for bit: a batch cut from a Fortran-ordered array reaches the BLAS with other
    # strides, and MKL's Intel kernels (not its generic path, on AMD) then sum in another
    # order. Within float32 rounding of the head's logits (_helpers.float32_logit_bound).
    P = fitted.predict_proba(X)
    assert_proba_within_float32(fitted.predict_proba(Xn), P, float32_logit_bound(fitted, X))


def test_read_only_float32_used_in_place(blobs, fitted):
    X = blobs[0].copy()
    X.flags.writeable = False
    est = CCEClustering(n_clusters=3, **FAST)
    assert est._validate_X(X, reset=True) is X  # no copy of a float32 array
    est = _fit_checked(X)  # warnings are errors: torch's non-writable warning too
    np.testing.assert_array_equal(est.labels_, fitted.labels_)


def test_read_only_non_contiguous_images(images, fitted_vgg4):
    X = np.asfortranarray(images)
    X.flags.writeable = False
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        P = fitted_vgg4.predict_proba(X)
    np.testing.assert_array_equal(P, fitted_vgg4.predict_proba(images))


# ----- sparse, object and string arrays ------------------------------------------------------
# (linear fit: tests/test_clustering.py::test_bad_input_fit)
def test_sparse_rejected(blobs, fitted, images):
    with pytest.raises(TypeError, match="Sparse data was passed for X, but dense data"):
        fitted.predict(sp.csr_matrix(blobs[0]))
    with pytest.raises(TypeError, match="Sparse data"):
        CCEClustering(n_clusters=2, **DEEP).fit(sp.csr_matrix(images.reshape(20, -1)))


def test_object_array_of_numbers(blobs, fitted):
    est = _fit_checked(blobs[0].astype(object))
    np.testing.assert_array_equal(est.labels_, fitted.labels_)


def test_object_images_of_numbers(images, fitted_vgg4):
    P = fitted_vgg4.predict_proba(images.astype(object))
    np.testing.assert_allclose(P, fitted_vgg4.predict_proba(images), atol=1e-6)


# (linear: tests/test_clustering.py::test_bad_input_fit)
def test_string_images_rejected():
    X = np.array([["a", "b"] * 14] * 28 * 20).reshape(20, 28, 28)
    with pytest.raises(ValueError, match="not compatible with arrays of bytes/strings"):
        CCEClustering(n_clusters=2, **DEEP).fit(X)


# ----- shapes at predict and for image models ------------------------------------------------
# (feature count at predict: tests/test_clustering.py::test_wrong_feature_count_at_predict;
# 2-D X for vgg4 and float (N, H, W, C): test_image_models_reject_flat_features,
# test_float_channels_last_rejected; 3-D X for the linear head: test_bad_input_fit)
@pytest.mark.parametrize(
    "shape, match",
    [
        ((20, 1, 1, 28, 28), "got 5-D"),
        ((20, 2, 28, 28), "expected 1 or 3 channels"),
        ((20, 4, 4), "supports input shapes"),
    ],
)
def test_wrong_image_shapes_at_fit(shape, match):
    X = np.random.RandomState(0).rand(*shape).astype(np.float32)
    with pytest.raises(ValueError, match=match):
        CCEClustering(n_clusters=2, **DEEP).fit(X)


def test_wrong_image_shape_at_predict(images, fitted_vgg4):
    with pytest.raises(ValueError, match=r"samples of shape \(1, 20, 20\).*\(1, 28, 28\)"):
        fitted_vgg4.predict(images[:, :20, :20])
    with pytest.raises(ValueError, match=r"samples of shape \(3, 28, 28\)"):
        fitted_vgg4.predict(np.stack([images] * 3, axis=3))
    with pytest.raises(ValueError, match="takes images"):
        fitted_vgg4.predict(images.reshape(20, -1))


def test_other_image_layout_at_predict():
    rng = np.random.RandomState(1)
    rgb = rng.randint(0, 255, size=(20, 32, 32, 3)).astype(np.uint8)
    est = _quiet_fit(CCEClustering(n_clusters=2, **DEEP), rgb)  # uint8 (N, H, W, C)
    nchw = rgb.transpose(0, 3, 1, 2).astype(np.float32) / 255  # float (N, C, H, W) in [0, 1]
    np.testing.assert_allclose(est.predict_proba(nchw), est.predict_proba(rgb), atol=1e-5)


# ----- lam and prior -------------------------------------------------------------------------
@pytest.mark.parametrize("lam", [0.0, 1e6])
def test_lam_extremes(blobs, lam):
    X, y = blobs
    est = _fit_checked(X, lam=lam)
    assert adjusted_rand_score(y, est.labels_) == 1.0
    assert all(np.isfinite(h["loss"]) for h in est.history_)


def test_prior_with_zero_reverse_fairness(blobs):
    X, _ = blobs
    with warnings.catch_warnings():
        # the cluster of prior 0 is meant to stay empty: no empty-cluster warning for it
        warnings.simplefilter("error", ConvergenceWarning)
        # random heads: a KMeans head starts the zero-prior cluster full, and two epochs
        # do not drain all of it
        est = CCEClustering(n_clusters=3, prior=[0.5, 0.5, 0.0], init="random", **FAST).fit(X)
    _check_proba(est.predict_proba(X), len(X), 3)
    # the prior is a multiset of sizes: some cluster gets the 0, and it is left empty
    assert sorted(est.prior_.tolist()) == [0.0, 0.5, 0.5]
    (zero,) = np.flatnonzero(est.prior_ == 0)
    assert (est.labels_ != zero).all()


def test_prior_with_zero_forward_fairness(blobs):
    X, _ = blobs
    prior = [0.5, 0.5, 0.0]
    with pytest.raises(ValueError, match=r"prior is 0 for clusters \[2\].*fairness='forward'"):
        CCEClustering(n_clusters=3, prior=prior, fairness="forward", **FAST).fit(X)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)  # empty by design: no warning
        est = CCEClustering(
            n_clusters=3, prior=prior, fairness="forward", fairness_weight=0, init="random",
            **FAST,
        ).fit(X)
    (zero,) = np.flatnonzero(est.prior_ == 0)
    assert (est.labels_ != zero).all()


# ----- solve_pseudo_labels -------------------------------------------------------------------
D = torch.float64


def _on_simplex(Y):
    assert bool(torch.isfinite(Y).all()) and bool((Y >= 0).all())
    torch.testing.assert_close(Y.sum(dim=1), torch.ones(len(Y), dtype=Y.dtype))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, np.float16])
def test_solver_half_precision(dtype):
    g = torch.Generator().manual_seed(0)
    P = torch.softmax(2 * torch.randn(30, 7, generator=g, dtype=D), dim=1)
    low = P.numpy().astype(dtype) if dtype is np.float16 else P.to(dtype)
    res = solve_pseudo_labels(low, lam=10.0, prior=np.full(7, 1 / 7, dtype=np.float16))
    assert res.labels.dtype == D and res.converged
    _on_simplex(res.labels)
    ref = solve_pseudo_labels(P, lam=10.0)  # the same problem before rounding to 16 bits
    assert abs(res.objective - ref.objective) < 1e-2 * abs(ref.objective)


@pytest.mark.parametrize(
    "probs", [np.array([[1, 0], [0, 1], [1, 0]]), torch.tensor([[True, False]])]
)
def test_solver_integer_and_bool_probs(probs):
    res = solve_pseudo_labels(probs, lam=1.0)
    assert res.labels.dtype == D and res.converged
    _on_simplex(res.labels)


def test_solver_one_row_and_fewer_rows_than_clusters():
    P = torch.tensor([[0.2, 0.3, 0.5]], dtype=D)
    for lam in (1.0, 100.0):
        res = solve_pseudo_labels(P, lam=lam)
        _on_simplex(res.labels)
        assert res.converged
    g = torch.Generator().manual_seed(3)
    P = torch.softmax(torch.randn(2, 6, generator=g, dtype=D), dim=1)
    res = solve_pseudo_labels(P, lam=100.0, tol=1e-6, max_iter=200)
    _on_simplex(res.labels)
    assert res.converged == (res.gap <= 1e-6 * max(abs(res.objective), 1.0))  # honest flag


def test_solver_identical_rows():
    P = torch.full((6, 3), 1 / 3, dtype=D)  # every row and every cluster tied
    res = solve_pseudo_labels(P, lam=5.0)
    _on_simplex(res.labels)
    assert res.converged


@pytest.mark.parametrize("tiny", [1e-30, 1e-300])
def test_solver_tiny_probabilities(tiny):
    P = torch.tensor([[1 - tiny, tiny], [tiny, 1 - tiny], [0.5, 0.5]], dtype=D)
    res = solve_pseudo_labels(P, lam=10.0)
    _on_simplex(res.labels)
    assert res.converged


def test_solver_non_contiguous_and_read_only():
    g = torch.Generator().manual_seed(1)
    P = torch.softmax(torch.randn(8, 4, generator=g, dtype=D), dim=1)
    ref = solve_pseudo_labels(P, lam=10.0).labels
    Pt = P.T.contiguous().T
    assert not Pt.is_contiguous()
    arr = np.asfortranarray(P.numpy())
    arr.flags.writeable = False
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for probs in (Pt, arr):
            torch.testing.assert_close(solve_pseudo_labels(probs, lam=10.0).labels, ref)


@pytest.mark.parametrize("kind", ["scipy", "torch"])
def test_solver_sparse_rejected(kind):
    P = np.array([[0.5, 0.5], [1.0, 0.0]])
    probs = sp.csr_matrix(P) if kind == "scipy" else torch.tensor(P).to_sparse()
    with pytest.raises(TypeError, match="probs is a sparse"):
        solve_pseudo_labels(probs, lam=1.0)


def test_solver_object_array_rejected():
    with pytest.raises(ValueError, match="probs must be numeric; got an array of dtype object"):
        solve_pseudo_labels(np.array([[0.5, 0.5]], dtype=object), lam=1.0)


@pytest.mark.parametrize("loss", ["collision", "shannon", "reverse"])
def test_solver_prior_with_zero(loss):
    g = torch.Generator().manual_seed(2)
    P = torch.softmax(2 * torch.randn(20, 3, generator=g, dtype=D), dim=1)
    prior = [0.5, 0.5, 0.0]
    res = solve_pseudo_labels(P, lam=10.0, prior=prior, loss=loss, fairness="forward")
    _on_simplex(res.labels)
    if loss != "reverse":
        assert res.converged
        assert float(res.labels[:, 2].abs().max()) == 0.0  # KL(ybar||u) finite: column 2 empty
    else:
        # H(sigma, y) needs y > 0 wherever sigma > 0, KL(ybar||u) needs column 2 = 0:
        # no finite optimum, and the result says so
        assert res.objective == float("inf") and not res.converged and res.gap == float("inf")
    res = solve_pseudo_labels(P, lam=10.0, prior=prior, loss=loss, fairness="reverse")
    _on_simplex(res.labels)
    assert res.converged


def _cluster_error(capsys, argv):
    from skcce.cli.cluster import cluster_main

    assert cluster_main(argv) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("skcce cluster: error: "), err
    return err


def test_cluster_report_path_is_a_file(tmp_path, capsys):
    np.save(tmp_path / "emb.npy", np.ones((4, 2)))
    (tmp_path / "taken").write_text("")
    err = _cluster_error(
        capsys, [str(tmp_path / "emb.npy"), "-k", "2", "--report", str(tmp_path / "taken")]
    )
    assert "is a file; give a folder for the report" in err
    err = _cluster_error(
        capsys, [str(tmp_path), "-k", "2", "--report", str(tmp_path / "no" / "dir")]
    )
    assert "does not exist" in err


def test_cluster_npy_with_id_column(tmp_path, capsys):
    np.save(tmp_path / "emb.npy", np.ones((4, 2)))
    err = _cluster_error(capsys, [str(tmp_path / "emb.npy"), "-k", "2", "--id-column", "name"])
    assert "a .npy file holds no ids" in err


def test_cluster_npz_id_array_not_1d(tmp_path, capsys):
    np.savez(tmp_path / "emb.npz", emb=np.ones((4, 2)), name=np.ones((4, 2)))
    argv = [str(tmp_path / "emb.npz"), "-k", "2", "--array", "emb", "--id-column", "name"]
    assert "the ids array 'name' must be 1-D" in _cluster_error(capsys, argv)


def test_cluster_parquet_without_pyarrow(tmp_path, capsys, monkeypatch):
    pytest.importorskip("pandas", reason="the tables extra (pandas) is not installed")
    (tmp_path / "emb.parquet").write_bytes(b"PAR1")
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    monkeypatch.setitem(sys.modules, "fastparquet", None)
    err = _cluster_error(capsys, [str(tmp_path / "emb.parquet"), "-k", "2"])
    assert "needs pyarrow" in err and "pip install skcce[tables]" in err


def test_cluster_features_report_without_matplotlib(tmp_path, capsys, monkeypatch):
    np.save(tmp_path / "emb.npy", np.ones((4, 2)))
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    argv = [str(tmp_path / "emb.npy"), "-k", "2", "--report", str(tmp_path / "rep")]
    assert "pip install skcce[report]" in _cluster_error(capsys, argv)
    assert not (tmp_path / "rep").exists()


def test_cluster_ids_do_not_match_rows(tmp_path, capsys):
    np.savez(tmp_path / "emb.npz", emb=np.ones((4, 2)), name=np.arange(3))
    argv = [str(tmp_path / "emb.npz"), "-k", "2", "--array", "emb", "--id-column", "name"]
    assert "3 ids for 4 rows" in _cluster_error(capsys, argv)


# ----- init ----------------------------------------------------------------------------------
def test_init_centroids_bad(blobs):
    X = blobs[0]
    with pytest.raises(
        ValueError, match=r"init centroids must have shape .* \(3, 4\); got shape \(2, 4\)"
    ):
        CCEClustering(n_clusters=3, init=np.zeros((2, 4)), **FAST).fit(X)
    bad = np.zeros((3, 4))
    bad[1, 2] = np.nan
    with pytest.raises(ValueError, match=r"init centroids must be finite; rows \[1\]"):
        CCEClustering(n_clusters=3, init=bad, **FAST).fit(X)
    bad[1, 2] = np.inf
    with pytest.raises(ValueError, match="must be finite"):
        CCEClustering(n_clusters=3, init=bad, **FAST).fit(X)


def test_init_kmeans_few_distinct_samples():
    X = np.repeat(np.eye(2), 5, axis=0)
    with pytest.raises(ValueError, match="n_distinct_samples=2 should be >= n_clusters=3"):
        CCEClustering(n_clusters=3, init="kmeans", **FAST).fit(X)


def test_init_kmeans_deep_model(images):
    for init in ("kmeans", np.zeros((2, 784))):
        with pytest.raises(ValueError, match="initialises the linear head only"):
            CCEClustering(n_clusters=2, **{**DEEP, "init": init}).fit(images)
