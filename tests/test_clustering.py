"""Tests of the CCEClustering estimator (scikit-learn surface, training engine, persistence)."""

import io
import pickle
import warnings

import joblib
import numpy as np
import pytest
import scipy.sparse as sp
import torch
from _helpers import VGG4_ADAM, count_default_augmentation, float32_blobs
from sklearn.base import clone
from sklearn.datasets import make_blobs
from sklearn.exceptions import ConvergenceWarning
from sklearn.metrics import adjusted_rand_score, make_scorer
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils._param_validation import InvalidParameterError
from sklearn.utils.estimator_checks import parametrize_with_checks

from skcce import CCEClustering

FAST = dict(max_epochs=3, n_init=1, batch_size=64)


@pytest.fixture(scope="module")
def blobs():
    return float32_blobs(300, 5, 0.6)


@pytest.fixture(scope="module")
def fitted(blobs):
    X, _ = blobs
    return CCEClustering(n_clusters=3, random_state=0, **FAST).fit(X)


@parametrize_with_checks(
    [CCEClustering(n_clusters=3, max_epochs=2, n_init=1, batch_size=32, random_state=0)]
)
def test_sklearn_compatible(estimator, check):
    check(estimator)


def test_clusters_separated_blobs(blobs, fitted):
    _, y = blobs
    assert adjusted_rand_score(y, fitted.labels_) > 0.95


def test_fitted_attributes(blobs, fitted):
    X, _ = blobs
    assert fitted.labels_.shape == (300,)
    assert fitted.n_features_in_ == 5
    assert fitted.input_shape_ == (5,)
    assert 2 <= fitted.n_iter_ == len(fitted.history_) <= 3  # the epoch stop compares two
    assert isinstance(fitted.module_, torch.nn.Module)
    for epoch in fitted.history_:
        assert set(epoch) >= {"loss", "fairness", "cluster_sizes", "time", "solver_iter"}
        assert sum(epoch["cluster_sizes"]) == 300
        assert np.isfinite(epoch["loss"])
    np.testing.assert_array_equal(fitted.predict(X), fitted.labels_)


def test_predict_proba_rows_sum_to_one(blobs, fitted):
    X, _ = blobs
    proba = fitted.predict_proba(X)
    assert proba.shape == (300, 3)
    assert proba.dtype == np.float64
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, atol=1e-12)
    assert np.all(np.isfinite(proba))


def test_public_parameters_untouched_by_fit(blobs):
    X, _ = blobs
    est = CCEClustering(n_clusters=3, random_state=0, **FAST)
    before = est.get_params()
    est.fit(X)
    assert est.get_params() == before


def test_user_module_not_modified(blobs):
    X, _ = blobs
    lin = torch.nn.Linear(5, 3)
    w0 = lin.weight.detach().clone()
    est = CCEClustering(n_clusters=3, model=lin, random_state=0, **FAST).fit(X)
    assert torch.equal(lin.weight, w0)
    assert est.module_ is not lin


def test_factory_model(blobs):
    X, y = blobs
    calls = []

    def factory(input_shape, n_clusters):
        calls.append((input_shape, n_clusters))
        return torch.nn.Sequential(
            torch.nn.Linear(input_shape[0], 16), torch.nn.ReLU(), torch.nn.Linear(16, n_clusters)
        )

    est = CCEClustering(n_clusters=3, model=factory, random_state=0, **FAST).fit(X)
    assert calls[0] == ((5,), 3)
    assert est.labels_.shape == y.shape


def test_deterministic_same_seed(blobs):
    X, _ = blobs
    a = CCEClustering(n_clusters=3, random_state=7, **FAST).fit(X)
    b = CCEClustering(n_clusters=3, random_state=7, **FAST).fit(X)
    np.testing.assert_array_equal(a.labels_, b.labels_)
    # bit for bit: the same process, CPU and libraries
    np.testing.assert_array_equal(a.predict_proba(X), b.predict_proba(X))
    # and the seed is what decides: another seed gives another model (a seed that were
    # ignored in favour of a fixed one would pass the lines above); the clusters are
    # numbered by their first row, so the same partition has the same labels
    c = CCEClustering(n_clusters=3, random_state=8, **FAST).fit(X)
    assert np.abs(c.predict_proba(X) - a.predict_proba(X)).max() > 1e-5


def test_no_global_seeding(blobs):
    X, _ = blobs
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    CCEClustering(n_clusters=3, random_state=0, **FAST).fit(X)
    assert torch.equal(torch.rand(3), expected)


@pytest.mark.parametrize("verbose", [0, 1])  # restarts batched (0) and one by one (1)
def test_n_init_keeps_best_score(blobs, monkeypatch, verbose):
    import skcce._engine._inference as inference

    X, _ = blobs
    seen = []
    original = inference._score  # each restart's score, from its streamed statistics

    def record(*statistics):
        seen.append(original(*statistics))
        return seen[-1]

    monkeypatch.setattr(inference, "_score", record)
    est = CCEClustering(n_clusters=3, random_state=0, max_epochs=1, n_init=3, verbose=verbose)
    est.fit(X)
    assert len(seen) == 3
    assert est.train_score_ == max(seen)


@pytest.mark.parametrize("fairness", ["reverse", "forward"])
@pytest.mark.parametrize("loss", ["collision", "shannon", "reverse"])
def test_variants_fit(blobs, fairness, loss):
    X, y = blobs
    est = CCEClustering(n_clusters=3, fairness=fairness, loss=loss, random_state=0, **FAST)
    labels = est.fit_predict(X)
    assert adjusted_rand_score(y, labels) > 0.8


@pytest.mark.parametrize("prior", [(0.75, 0.25), (0.25, 0.75)])
def test_adam_and_prior(monkeypatch, prior):
    """optimizer='adam' trains with Adam, and under it a non-uniform prior moves the cluster
    sizes its way: one Gaussian blob (no structure of its own), the uniform prior's sizes
    against the skewed prior's (each fit: 3 epochs of 7 batches). Sizes are compared sorted:
    which cluster takes the larger share is not the point."""
    steps = []
    adam_step = torch.optim.Adam.step

    def counted(self, *args, **kwargs):
        steps.append(1)
        return adam_step(self, *args, **kwargs)

    monkeypatch.setattr(torch.optim.Adam, "step", counted)
    X = np.random.default_rng(0).normal(size=(400, 2)).astype(np.float32)
    params = dict(
        n_clusters=2, optimizer="adam", learning_rate=1e-2, init="random", random_state=0, **FAST
    )
    uniform = CCEClustering(**params).fit(X)
    skewed = CCEClustering(**params, prior=prior).fit(X)
    assert len(steps) == 2 * 3 * 7  # every batch of both fits is an Adam step
    largest = [np.bincount(est.labels_, minlength=2).max() / len(X) for est in (uniform, skewed)]
    assert abs(largest[0] - 0.5) < 0.1, largest
    assert largest[1] > largest[0] + 0.1 and largest[1] > 0.6, largest


@pytest.mark.parametrize("prior", [None, (0.7, 0.3), (0.3, 0.7)])
def test_prior_moves_cluster_sizes_toward_it(prior):
    # one Gaussian blob: no cluster structure of its own, so the fairness prior sets the sizes
    X = np.random.default_rng(0).normal(size=(400, 2)).astype(np.float32)
    est = CCEClustering(n_clusters=2, prior=prior, random_state=0, **FAST).fit(X)
    sizes = np.bincount(est.labels_, minlength=2) / len(X)
    target = np.full(2, 0.5) if prior is None else np.asarray(prior)
    # a prior is a multiset of cluster sizes: the sizes follow it in some order, and
    # prior_ says which cluster got which value
    assert np.abs(np.sort(sizes) - np.sort(target)).max() < 0.08, sizes
    assert np.abs(sizes - est.prior_).max() < 0.08, (sizes, est.prior_)
    assert sorted(est.prior_.tolist()) == pytest.approx(sorted(target.tolist()))


def test_pipeline_and_gridsearch_label_free(blobs):
    X, _ = blobs
    pipe = make_pipeline(StandardScaler(), CCEClustering(n_clusters=3, random_state=0, **FAST))
    labels = pipe.fit_predict(X)
    assert labels.shape == (300,)
    # label-free: the score (mutual information) must prefer a trained head to one that
    # barely moved from its initialisation
    search = GridSearchCV(
        CCEClustering(n_clusters=3, random_state=0, **FAST),
        {"learning_rate": [1e-6, 0.5]},
        cv=2,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        search.fit(X)
    scores = search.cv_results_["mean_test_score"]
    assert np.all(np.isfinite(scores)) and scores[1] > scores[0] + 0.1
    assert search.best_params_ == {"learning_rate": 0.5}


def test_gridsearch_with_ari_scorer(blobs):
    X, y = blobs

    search = GridSearchCV(
        CCEClustering(n_clusters=3, random_state=0, **FAST),
        {"lam": [10.0, 100.0]},
        scoring=make_scorer(adjusted_rand_score),
        cv=2,
    )
    search.fit(X, y)
    assert search.best_score_ > 0.8


def test_score_collapsed_model_scores_lower(blobs, fitted):
    X, _ = blobs
    good = fitted.score(X)
    collapsed = pickle.loads(pickle.dumps(fitted))
    with torch.no_grad():
        collapsed.module_.weight.zero_()
        collapsed.module_.bias.copy_(torch.tensor([5.0, 0.0, 0.0]))
    assert np.all(collapsed.predict(X) == 0)
    assert collapsed.score(X) < 0.1 < good
    assert good <= np.log(3) + 1e-9


def test_empty_cluster_warns(blobs):
    X, _ = blobs
    est = CCEClustering(
        n_clusters=8, lam=0.0, fairness_weight=0.0, init="random", random_state=0, **FAST
    )
    with pytest.warns(ConvergenceWarning, match="empty"):
        est.fit(X[:, :2] * 0 + X[:, :1])  # one informative direction: clusters go unused


def test_pickle_and_joblib_roundtrip(blobs, fitted, tmp_path):
    X, _ = blobs
    restored = pickle.loads(pickle.dumps(fitted))
    np.testing.assert_array_equal(restored.predict_proba(X), fitted.predict_proba(X))
    path = tmp_path / "model.joblib"
    joblib.dump(fitted, path)
    again = joblib.load(path)
    np.testing.assert_array_equal(again.predict(X), fitted.predict(X))


def test_cuda_pickle_loads_on_cpu(blobs, fitted, monkeypatch):
    """A model pickled on a CUDA machine unpickles on a CPU-only one (device is remapped)."""
    X, _ = blobs
    state = fitted.__getstate__()
    state["device_"] = "cuda:0"  # as written on a GPU machine
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    restored = CCEClustering.__new__(CCEClustering)
    restored.__setstate__(state)
    assert restored.device_ == torch.device("cpu")
    np.testing.assert_array_equal(restored.predict(X), fitted.predict(X))


def test_device_cpu_explicit(blobs, monkeypatch):
    """device='cpu' is obeyed where 'auto' would choose CUDA (torch.cuda.is_available is made
    to say True: a device parameter that were ignored would resolve to CUDA here)."""
    X, _ = blobs
    if not torch.cuda.is_available():
        monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    est = CCEClustering(n_clusters=3, device="cpu", random_state=0, **FAST).fit(X)
    assert est.device_ == torch.device("cpu")
    assert next(est.module_.parameters()).device.type == "cpu"


@pytest.mark.skipif(torch.cuda.is_available(), reason="machine has CUDA")
def test_device_cuda_without_cuda(blobs):
    X, _ = blobs
    est = CCEClustering(n_clusters=3, device="cuda", **FAST)
    with pytest.raises(ValueError, match="CUDA is not available"):
        est.fit(X)
    assert not hasattr(est, "labels_")


def test_bad_device_string(blobs):
    X, _ = blobs
    with pytest.raises(ValueError, match="not a valid torch device"):
        CCEClustering(n_clusters=3, device="gpu0", **FAST).fit(X)


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_fit_predict(blobs):
    X, y = blobs
    est = CCEClustering(n_clusters=3, device="cuda", random_state=0, **FAST).fit(X)
    assert est.device_.type == "cuda"
    assert adjusted_rand_score(y, est.labels_) > 0.9
    buf = io.BytesIO()
    pickle.dump(est, buf)
    assert pickle.loads(buf.getvalue()).predict(X).shape == (300,)


def test_verbose_progress(blobs, capsys):
    X, _ = blobs
    CCEClustering(n_clusters=3, random_state=0, **FAST).fit(X)
    quiet = capsys.readouterr()
    assert quiet.out == "" and quiet.err == ""
    CCEClustering(n_clusters=3, random_state=0, verbose=1, **FAST).fit(X)
    loud = capsys.readouterr()
    assert "fit" in loud.err


# ----- bad input (NaN and infinity: tests/test_bad_input.py::test_nan_inf_rejected) ------------
@pytest.mark.parametrize(
    "X, error, match",
    [
        (np.zeros(10), ValueError, "2D array"),
        (np.zeros((10, 2, 2)), ValueError, "dim"),
        (np.array([["a", "b"]] * 10), ValueError, "string|float"),
        (sp.csr_matrix(np.eye(10)), TypeError, "[Ss]parse"),
        (np.zeros((2, 3)), ValueError, "fewer samples than clusters"),
        (np.zeros((0, 3)), ValueError, "0 sample"),
    ],
)
def test_bad_input_fit(X, error, match):
    est = CCEClustering(n_clusters=3, **FAST)
    with pytest.raises(error, match=match):
        est.fit(X)
    assert not hasattr(est, "labels_")


def test_failed_refit_keeps_previous_state(blobs, fitted):
    X, _ = blobs
    est = clone(fitted).fit(X)
    labels = est.labels_.copy()
    with pytest.raises(ValueError):
        est.fit(np.full_like(X, np.nan))
    np.testing.assert_array_equal(est.labels_, labels)


def test_wrong_feature_count_at_predict(blobs, fitted):
    X, _ = blobs
    with pytest.raises(ValueError, match="features"):
        fitted.predict(X[:, :4])


def test_predict_before_fit(blobs):
    from sklearn.exceptions import NotFittedError

    with pytest.raises(NotFittedError):
        CCEClustering().predict(blobs[0])


@pytest.mark.parametrize(
    "params",
    [
        {"n_clusters": 0},
        {"lam": -1.0},
        {"fairness": "both"},
        {"loss": "kl"},
        {"optimizer": "lbfgs"},
        {"learning_rate": 0.0},
        {"batch_size": 0},
        {"model": "vgg16"},
        {"n_init": 0},
    ],
)
def test_invalid_parameters(blobs, params):
    with pytest.raises(InvalidParameterError):
        CCEClustering(**params).fit(blobs[0])


@pytest.mark.parametrize(
    ("prior", "match"),
    [
        ([0.5, 0.5], r"prior must have shape \(3,\)"),
        ([[0.5, 0.3, 0.2]], r"shape \(3,\)"),
        ([0.7, 0.5, -0.2], r"probability vector .*entries \[2\] are negative, NaN or infinite"),
        ([0.5, np.nan, 0.5], r"entries \[1\]"),
        ([0.5, np.inf, 0.5], r"entries \[1\]"),
        ([0.5, 0.5, 0.5], "probability vector .*sums to 1.5"),
        (["a", "b", "c"], "prior must be None, 'auto' or an array"),
        ("uniform", "'prior' parameter of CCEClustering must be"),
    ],
)
def test_bad_prior(blobs, prior, match):
    with pytest.raises(ValueError, match=match):
        CCEClustering(n_clusters=3, prior=prior, **FAST).fit(blobs[0])


# ----- images ----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def tiny_images():
    rng = np.random.RandomState(0)
    base = rng.randint(0, 255, size=(2, 28, 28))
    X = np.concatenate(
        [np.clip(b + rng.randint(-20, 20, size=(20, 28, 28)), 0, 255) for b in base]
    ).astype(np.uint8)
    return X, np.repeat([0, 1], 20)


def test_vgg4_on_grey_images(tiny_images):
    X, y = tiny_images
    est = CCEClustering(n_clusters=2, **{**VGG4_ADAM, "max_epochs": 2}).fit(X)
    assert est.input_shape_ == (1, 28, 28)
    assert est.labels_.shape == (40,)
    assert est.predict_proba(X[:, :, :, None]).shape == (40, 2)  # NHWC grey works too
    with pytest.raises(ValueError, match="features|shape"):
        est.predict(X[:, :27, :27])


def _weights(est):
    return torch.cat([p.detach().flatten() for p in est.module_.parameters()])


@pytest.fixture(scope="module")
def unaugmented(tiny_images):
    """The weights of the VGG-4 fit of tiny_images without augmentation."""
    est = CCEClustering(n_clusters=2, **{**VGG4_ADAM, "augment": None}).fit(tiny_images[0])
    return _weights(est)


@pytest.mark.parametrize(
    "augment, weight", [(None, 0.5), ("default", 0.5), ("flip", 0.5), ("flip", 0.0)]
)
def test_augmentation_on_off(tiny_images, unaugmented, monkeypatch, augment, weight):
    """Augmentation on (a weight > 0) sees every batch in image space and changes the trained
    weights (the augmented views' cross-entropy moves them by a few percent); off (None, or a
    weight of 0) leaves the fit without augmentation bit for bit. Either way a fit is
    deterministic on CPU. (predict_proba is no measure here: two clusters this far apart give
    probabilities within 1e-20 of 0 and 1 whatever the weights.)"""
    X, _ = tiny_images
    views = []

    def flip(x):
        views.append(tuple(x.shape))
        return x.flip(-1)

    if augment == "default":  # count the batches the built-in augmentation is given
        count_default_augmentation(monkeypatch, views)
    chosen = flip if augment == "flip" else augment
    est = CCEClustering(n_clusters=2, **{**VGG4_ADAM, "augment": chosen, "augment_weight": weight})
    first = _weights(est.fit(X))
    seen, views[:] = list(views), []
    again = _weights(clone(est).fit(X))
    torch.testing.assert_close(again, first, rtol=0, atol=0)  # same process: bit for bit
    change = float((first - unaugmented).norm() / unaugmented.norm())
    if augment is None or weight == 0:
        assert change == 0.0 and seen == []
    else:
        assert change > 0.005, change
        assert seen and all(shape == (20, 1, 28, 28) for shape in seen), seen  # whole batches


def test_image_models_reject_flat_features(blobs):
    with pytest.raises(ValueError, match="takes images"):
        CCEClustering(n_clusters=3, model="vgg4", **FAST).fit(blobs[0])


def test_float_channels_last_rejected(tiny_images):
    X, _ = tiny_images
    Xf = np.repeat(X[..., None], 3, axis=3).astype(np.float32) / 255
    with pytest.raises(ValueError, match="channels-first"):
        CCEClustering(n_clusters=2, model="vgg4", **FAST).fit(Xf[:, :28, :28, :])


@pytest.mark.skipif(
    not hasattr(CCEClustering, "set_callbacks"), reason="scikit-learn < 1.9 has no callbacks"
)
def test_sklearn_callbacks_receive_epochs(blobs):
    X, _ = blobs
    events = []

    class Recorder:
        def setup(self, estimator, context):
            events.append("setup")

        def on_fit_task_begin(self, estimator, context, **kwargs):
            events.append(("begin", context.task_name))

        def on_fit_task_end(self, estimator, context, **kwargs):
            events.append(("end", context.task_name))

        def teardown(self, estimator, context):
            events.append("teardown")

    est = CCEClustering(n_clusters=3, random_state=0, n_iter_no_change=None, **FAST)
    est.set_callbacks(Recorder())
    est.fit(X)
    assert events[0] == "setup" and events[-1] == "teardown"
    assert events.count(("begin", "epoch")) == 3 == events.count(("end", "epoch"))
    assert ("begin", "fit") in events and ("end", "fit") in events


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_bf16_autocast(blobs):
    X, y = blobs
    est = CCEClustering(n_clusters=3, device="cuda", amp=True, random_state=0, **FAST).fit(X)
    assert adjusted_rand_score(y, est.labels_) > 0.9
    assert np.all(np.isfinite(est.predict_proba(X)))


def test_amp_ignored_on_cpu(blobs):
    X, _ = blobs
    a = CCEClustering(n_clusters=3, device="cpu", amp=True, random_state=0, **FAST).fit(X)
    b = CCEClustering(n_clusters=3, device="cpu", random_state=0, **FAST).fit(X)
    np.testing.assert_array_equal(a.predict_proba(X), b.predict_proba(X))


@pytest.mark.parametrize("solver, expected", [("pgd", "pgd"), ("auto", "newton"), ("em", "em")])
def test_solver_parameter_selects_the_pseudo_label_method(monkeypatch, solver, expected):
    from skcce._engine import _step
    from skcce.solvers import _compiled

    calls = []
    solve = _step._solve

    def record(problem, method, init=None, *, tol, max_iter=None):
        result = solve(problem, method, init, tol=tol, max_iter=max_iter)
        calls.append(result.method)  # the method that answered (compiled or torch path)
        return result

    stack = _compiled.solve_stack

    def record_stack(*args, **kwargs):  # the batched restarts' entry (compiled kernels)
        results = stack(*args, **kwargs)
        calls.extend(res.method for res in results or () if res is not None)
        return results

    monkeypatch.setattr(_step, "_solve", record)
    monkeypatch.setattr(_compiled, "solve_stack", record_stack)
    X, _ = make_blobs(n_samples=120, centers=3, n_features=4, random_state=0)
    est = CCEClustering(
        n_clusters=3, solver_options={"method": solver}, max_epochs=2, n_init=1, random_state=0
    )
    assert est.fit(X).labels_.shape == (120,)
    assert set(calls) == {expected} and len(calls) == 2  # 2 epochs of one batch of 120 rows
    with pytest.raises(ValueError, match="method='em'"):
        CCEClustering(n_clusters=3, solver_options={"method": "em"}, fairness="forward").fit(X)


@pytest.mark.parametrize(
    "options, match",
    [
        ({"tolerance": 1e-3}, r"unknown keys \['tolerance'\]"),
        ({"method": "simplex"}, r"solver_options\['method'\] must be one of"),
        ({"tol": 0.0}, r"solver_options\['tol'\] must be 'auto' or a float in \(0, 1\)"),
        ({"tol": "loose"}, r"solver_options\['tol'\] must be 'auto' or a float"),
        ({"max_iter": 0}, r"solver_options\['max_iter'\] must be a positive integer"),
    ],
)
def test_solver_options_errors_name_the_key(blobs, options, match):
    X, _ = blobs
    with pytest.raises(ValueError, match=match):
        CCEClustering(n_clusters=3, solver_options=options, **FAST).fit(X)


@pytest.mark.parametrize("removed", ["em_tol", "em_max_iter", "solver", "solver_tol"])
def test_removed_parameters_are_unknown(removed):
    with pytest.raises(TypeError, match=f"unexpected keyword argument '{removed}'"):
        CCEClustering(**{removed: 1})
    with pytest.raises(ValueError, match=f"Invalid parameter '{removed}'"):
        CCEClustering().set_params(**{removed: 1})


def test_solver_options_tol_and_max_iter_reach_the_solver(blobs, monkeypatch):
    from skcce._engine import _batched, _step

    seen = []
    solve, stack = _step._solve, _batched._compiled.solve_stack

    def record(problem, method, init=None, *, tol, max_iter=None):
        seen.append((tol, max_iter))
        return solve(problem, method, init, tol=tol, max_iter=max_iter)

    def record_stack(*args, **kwargs):
        seen.append((kwargs.get("tol"), kwargs.get("max_iter")))
        return stack(*args, **kwargs)

    monkeypatch.setattr(_step, "_solve", record)
    monkeypatch.setattr(_batched._compiled, "solve_stack", record_stack)
    X, _ = blobs
    options = {"tol": 1e-3, "max_iter": 7}
    CCEClustering(n_clusters=3, solver_options=options, **FAST).fit(X)
    assert seen and set(seen) == {(1e-3, 7)}
    seen.clear()
    est = CCEClustering(n_clusters=3, solver_options={"max_iter": 7}, **FAST).fit(X)
    assert seen and set(seen) == {(1.0 / est.batch_size_, 7)}  # "auto": one row's share


def test_public_names():
    import skcce
    from skcce._engine._checkpoint import CheckpointMismatchError
    from skcce._engine._train import FitInterruptedWarning

    assert skcce.FitInterruptedWarning is FitInterruptedWarning
    assert skcce.CheckpointMismatchError is CheckpointMismatchError
    assert issubclass(skcce.CheckpointMismatchError, ValueError)
    assert set(skcce.__all__) >= {"CCEClustering", "FeatureExtractor", "FitInterruptedWarning"}


# ----- threads (n_threads) ------------------------------------------------------------------------
@pytest.fixture
def torch_threads():
    """Set torch's threads to 2 for the test and restore the caller's count afterwards."""
    old = torch.get_num_threads()
    torch.set_num_threads(2)
    yield 2
    torch.set_num_threads(old)


def _spy_threads(monkeypatch, mod, name, fail=False):
    """Wrap ``mod.<name>``, recording torch's thread count when it runs."""
    seen = []
    real = getattr(mod, name)

    def spy(*args, **kwargs):
        seen.append(torch.get_num_threads())
        if fail:
            raise RuntimeError("boom")
        return real(*args, **kwargs)

    monkeypatch.setattr(mod, name, spy)
    return seen


@pytest.mark.parametrize(
    ("model", "n_threads", "expected"), [("linear", None, 1), ("linear", 3, 3)]
)
def test_fit_and_predict_threads_scoped_and_restored(
    blobs, model, n_threads, expected, torch_threads, monkeypatch
):
    X, _ = blobs
    import skcce._clustering as clustering
    from skcce._engine import _batched

    seen_fit = _spy_threads(monkeypatch, _batched, "run_batched")  # the linear head's fit
    seen_predict = _spy_threads(monkeypatch, clustering, "infer_proba")
    est = CCEClustering(n_clusters=3, model=model, n_threads=n_threads, n_init=1, max_epochs=1)
    est.fit(X)
    assert torch.get_num_threads() == torch_threads
    est.predict(X)
    est.score(X)
    assert torch.get_num_threads() == torch_threads
    assert seen_fit and set(seen_fit) == {expected}
    assert seen_predict and set(seen_predict) == {expected}
    assert est.get_params()["n_threads"] == n_threads  # the parameter is never changed


@pytest.mark.parametrize(
    ("n_threads", "large", "expected"),
    [(None, True, 2), (None, False, 1), (3, True, 3), (1, True, 1), (3, False, 3)],
)
def test_kmeans_start_keeps_the_callers_threads(
    blobs, n_threads, large, expected, torch_threads, monkeypatch
):
    """The linear head trains on one thread, but its KMeans start (scikit-learn's Lloyd)
    runs with the caller's count when a Lloyd iteration holds MIN_WIDE_WORK multiply-adds,
    unless ``n_threads`` sets one; ``fit`` and ``partial_fit``."""
    from skcce._engine import _build, _stream
    from skcce._engine._threads import MIN_WIDE_WORK

    if large:  # 5 000 rows x 64 features x 40 clusters: above the work rule
        X, _ = make_blobs(5000, n_features=64, centers=40, random_state=0)
        k = 40
        assert 5000 * 64 * k >= MIN_WIDE_WORK
    else:
        (X, _), k = blobs, 3
    seen_fit = _spy_threads(monkeypatch, _build, "initial_centroids")
    seen_stream = _spy_threads(monkeypatch, _stream, "initial_centroids")
    CCEClustering(n_clusters=k, n_threads=n_threads, n_init=1, max_epochs=1).fit(X)
    CCEClustering(n_clusters=k, n_threads=n_threads).partial_fit(X)  # a stream's first call
    assert seen_fit and set(seen_fit) == {expected}
    assert seen_stream and set(seen_stream) == {expected}
    assert torch.get_num_threads() == torch_threads


def test_deep_model_keeps_torch_threads(torch_threads):
    from skcce._engine._threads import thread_limit

    est = CCEClustering(n_clusters=3, model="vgg4")
    assert est._thread_count() is None  # "auto" leaves torch's setting for image models
    with thread_limit(est._thread_count()):
        assert torch.get_num_threads() == torch_threads


def test_threads_restored_when_fit_raises(blobs, torch_threads, monkeypatch):
    X, _ = blobs
    from skcce._engine import _batched

    seen = _spy_threads(monkeypatch, _batched, "run_batched", fail=True)
    with pytest.raises(RuntimeError, match="boom"):
        CCEClustering(n_clusters=3, n_init=1, max_epochs=1).fit(X)
    assert seen == [1]
    assert torch.get_num_threads() == torch_threads


def test_threads_limit_blas_pools_and_restore():
    from threadpoolctl import threadpool_info

    from skcce._engine._threads import thread_limit

    before = [p["num_threads"] for p in threadpool_info()]
    with thread_limit(1):
        assert all(p["num_threads"] == 1 for p in threadpool_info())
    assert [p["num_threads"] for p in threadpool_info()] == before


def test_invalid_n_threads(blobs):
    with pytest.raises(InvalidParameterError, match="n_threads"):
        CCEClustering(n_threads=0).fit(blobs[0])


def test_same_labels_whatever_the_container():
    """Defaults: a list, float64 or float32, C or Fortran order give the same labels (the
    clusters are numbered by their first row, so equal partitions compare equal)."""
    X, _ = make_blobs(300, n_features=5, centers=4, random_state=0)
    ref = CCEClustering(n_clusters=4, random_state=0).fit(X).labels_
    containers = {
        "list": X.tolist(),
        "float32": X.astype(np.float32),
        "fortran": np.asfortranarray(X),
        "float32 fortran": np.asfortranarray(X.astype(np.float32)),
    }
    for name, data in containers.items():
        labels = CCEClustering(n_clusters=4, random_state=0).fit(data).labels_
        np.testing.assert_array_equal(labels, ref, err_msg=name)
    assert ref[0] == 0 and set(ref) == {0, 1, 2, 3}


def test_check_estimator_with_default_parameters():
    from sklearn.utils.estimator_checks import check_estimator

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        results = check_estimator(CCEClustering(), on_fail=None)
    failed = [r["check_name"] for r in results if r["status"] == "failed"]
    assert failed == []
