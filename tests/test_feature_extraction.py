"""Tests for skcce._feature_extraction.FeatureExtractor.

Nothing here downloads weights: models use ``pretrained=False`` or ``weights=`` a file the test
wrote. timm's tiny ``test_*`` architectures at 32 px keep the file fast.
"""

import copy
import pathlib
import pickle

import numpy as np
import pytest
import torch

timm = pytest.importorskip("timm")
Image = pytest.importorskip("PIL.Image")

from sklearn.base import clone  # noqa: E402
from sklearn.exceptions import NotFittedError  # noqa: E402
from sklearn.utils import estimator_checks  # noqa: E402

from skcce._feature_extraction import (  # noqa: E402
    FeatureExtractor,
    WeightsUnavailableError,
    _preprocess_array_batch,
)

MODEL = "test_resnet"  # 96 features, bilinear, mean/std 0.5
SIZE = 32


def _images(n=6, h=24, w=30, seed=0):
    """Smooth random uint8 RGB images (upsampled noise, so resampling is well behaved)."""
    rng = np.random.default_rng(seed)
    small = rng.integers(0, 256, size=(n, 6, 8, 3), dtype=np.uint8)
    return np.stack([np.asarray(Image.fromarray(s).resize((w, h), Image.BILINEAR)) for s in small])


def _extractor(**params):
    defaults = dict(pretrained=False, image_size=SIZE, device="cpu")
    return FeatureExtractor(MODEL, **{**defaults, **params})


@pytest.fixture(scope="module")
def images():
    return _images()


@pytest.fixture(scope="module")
def fitted(images):
    return _extractor().fit(images)


@pytest.fixture(scope="module")
def png_files(images, tmp_path_factory):
    root = tmp_path_factory.mktemp("pngs")
    paths = []
    for i, image in enumerate(images):
        path = root / f"img{i}.png"
        Image.fromarray(image).save(path)
        paths.append(path)
    return paths


# ---------------------------------------------------------------------------------------------
# Input forms
# ---------------------------------------------------------------------------------------------
INPUT_FORMS = {
    "uint8 NHWC": lambda x, p: x,
    "uint8 NHW grey": lambda x, p: x[..., 0],
    "uint8 NHW1 grey": lambda x, p: x[..., :1],
    "uint8 RGBA": lambda x, p: np.concatenate([x, np.full_like(x[..., :1], 255)], axis=-1),
    "float NCHW": lambda x, p: x.transpose(0, 3, 1, 2).astype(np.float32) / 255,
    "float64 NCHW": lambda x, p: x.transpose(0, 3, 1, 2) / 255.0,
    "float NHW grey": lambda x, p: x[..., 0].astype(np.float32) / 255,
    "float N1HW grey": lambda x, p: x[:, None, :, :, 0].astype(np.float32) / 255,
    "int64 NHWC": lambda x, p: x.astype(np.int64),
    "torch uint8": lambda x, p: torch.from_numpy(x),
    "torch float": lambda x, p: torch.from_numpy(x.transpose(0, 3, 1, 2) / 255.0).float(),
    "list of arrays": lambda x, p: list(x),
    "list of PIL": lambda x, p: [Image.fromarray(i) for i in x],
    "list of PIL mixed sizes and modes": lambda x, p: [
        Image.fromarray(i).resize((17 + 3 * k, 40 - 2 * k)).convert("L" if k % 2 else "RGB")
        for k, i in enumerate(x)
    ],
    "list of str": lambda x, p: [str(q) for q in p],
    "list of Path": lambda x, p: list(p),
    "object array of str": lambda x, p: np.array([str(q) for q in p], dtype=object),
    "tuple of Path": lambda x, p: tuple(p),
}


@pytest.mark.parametrize("form", list(INPUT_FORMS))
def test_every_input_form_gives_float32_rows(form, fitted, images, png_files):
    X = INPUT_FORMS[form](images, png_files)
    features = fitted.transform(X)
    assert features.shape == (len(images), 96)
    assert features.dtype == np.float32
    assert np.isfinite(features).all()


def test_input_forms_agree(fitted, images, png_files):
    """uint8, float, torch, PIL and file inputs of the same pixels give (nearly) equal rows."""
    reference = fitted.transform([Image.fromarray(i) for i in images])
    np.testing.assert_allclose(fitted.transform(png_files), reference, rtol=0, atol=1e-5)
    scale = np.abs(reference).max()
    for form in ["uint8 NHWC", "float NCHW", "torch uint8", "list of arrays"]:
        features = fitted.transform(INPUT_FORMS[form](images, png_files))
        np.testing.assert_allclose(features, reference, rtol=0, atol=1e-2 * scale, err_msg=form)
    grey = fitted.transform(images[..., 0])
    grey_pil = fitted.transform([Image.fromarray(i[..., 0]) for i in images])
    np.testing.assert_allclose(grey, grey_pil, rtol=0, atol=1e-2 * scale)


@pytest.mark.parametrize(
    "model_name, image_size", [("test_resnet", 32), ("test_efficientnet", 48), ("test_vit", None)]
)
def test_array_preprocessing_matches_timm_transform(model_name, image_size):
    """Batch-wise tensor preprocessing ~ timm's own PIL transform (bilinear and bicubic)."""
    from timm.data import create_transform

    X = _images(n=4, h=37, w=50, seed=1)
    extractor = FeatureExtractor(model_name, pretrained=False, image_size=image_size, device="cpu")
    extractor.fit(X)
    transform = create_transform(**extractor.data_config_)
    expected = torch.stack([transform(Image.fromarray(x)) for x in X])
    got = _preprocess_array_batch(X, extractor.data_config_, "cpu")
    assert got.shape == expected.shape
    assert got.dtype == torch.float32
    # In grey levels (one level of channel c is 1 / (255 std_c) in normalised units): PIL and
    # torch each round the same interpolation to a level, with weights of another precision
    # (PIL: fixed point; torch: in uint8 natively, or through float32 where torchvision
    # judges the CPU not to be AVX2/AVX-512, e.g. ATEN_CPU_CAPABILITY=default), so a value
    # may land a level apart (measured: 0.4 % of the values natively, 16 % through float32;
    # 2 levels for a bicubic overshoot). A wrong resize (no antialiasing, another filter,
    # nearest) is off by 0.5 level or more on average.
    level = torch.tensor(1 / (255 * np.asarray(extractor.data_config_["std"]))).float()
    off = (got - expected).abs() / level.view(1, 3, 1, 1)
    assert off.max().item() <= 2.001
    assert off.mean().item() < 0.25
    with torch.inference_mode():
        direct = extractor.model_(expected).numpy()
    features = extractor.transform(X)
    np.testing.assert_allclose(features, direct, rtol=0, atol=1e-2 * np.abs(direct).max())


@pytest.mark.parametrize("crop_mode", ["center", "squash", "border"])
@pytest.mark.parametrize("interpolation", ["bilinear", "bicubic"])
@pytest.mark.parametrize("height, width", [(37, 50), (50, 20), (24, 32)])
def test_crop_modes_match_timm_transform(crop_mode, interpolation, height, width):
    """Non-square targets, padding (border mode) and both resamplers follow timm."""
    from timm.data import create_transform

    config = dict(
        input_size=(3, 24, 32),
        interpolation=interpolation,
        mean=(0.485, 0.456, 0.406),
        std=(0.229, 0.224, 0.225),
        crop_pct=0.9,
        crop_mode=crop_mode,
    )
    X = _images(n=3, h=height, w=width, seed=2)
    transform = create_transform(**config)
    expected = torch.stack([transform(Image.fromarray(x)) for x in X])
    got = _preprocess_array_batch(X, config, "cpu")
    assert got.shape == expected.shape == (3, 3, 24, 32)
    # one grey level is 1 / 255 / 0.229 = 0.017 here; allow two
    assert (got - expected).abs().max().item() < 0.04
    assert (got - expected).abs().mean().item() < 5e-3  # < 0.3 grey levels on average


def test_batch_size_and_workers_do_not_change_features(fitted, images, png_files):
    expected = fitted.transform(images)
    small = clone(fitted).set_params(batch_size=4).fit(images)
    small.model_.load_state_dict(fitted.model_.state_dict())
    np.testing.assert_allclose(small.transform(images), expected, rtol=0, atol=1e-5)
    workers = clone(fitted).set_params(batch_size=4, num_workers=2).fit(images)
    workers.model_.load_state_dict(fitted.model_.state_dict())
    np.testing.assert_allclose(
        workers.transform(png_files), fitted.transform(png_files), rtol=0, atol=1e-5
    )


def test_float_out_of_range_warns(fitted, images):
    with pytest.warns(UserWarning, match=r"expected in \[0, 1\]"):
        fitted.transform(images.transpose(0, 3, 1, 2).astype(np.float32))


# ---------------------------------------------------------------------------------------------
# Weights, model names, downloads
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("suffix", [".pth", ".safetensors"])
@pytest.mark.parametrize("with_classifier", [True, False])
def test_local_weights_round_trip(suffix, with_classifier, tmp_path, images):
    torch.manual_seed(0)
    source = timm.create_model(MODEL, pretrained=False, num_classes=10 if with_classifier else 0)
    path = tmp_path / f"weights{suffix}"
    state = {k: v.contiguous() for k, v in source.state_dict().items()}
    if suffix == ".pth":
        torch.save(state, path)
    else:
        from safetensors.torch import save_file

        save_file(state, str(path))
    extractor = _extractor(weights=path, pretrained=True).fit(images)
    pil = [Image.fromarray(i) for i in images]
    features = extractor.transform(pil)

    # direct timm forward: same weights, classifier removed, timm's own preprocessing
    from timm.data import create_transform

    source.reset_classifier(0)
    source.eval()
    transform = create_transform(**extractor.data_config_)
    with torch.inference_mode():
        direct = source(torch.stack([transform(p) for p in pil])).numpy()
    np.testing.assert_allclose(features, direct, rtol=1e-5, atol=1e-5)
    random_init = _extractor().fit(images).transform(pil)
    assert not np.allclose(random_init, direct, atol=1e-3)  # the file was really loaded


def test_weights_for_another_model_are_rejected(tmp_path, images):
    other = timm.create_model("test_vit", pretrained=False, num_classes=0)  # no shared keys
    path = tmp_path / "other.pth"
    torch.save(other.state_dict(), path)
    with pytest.raises(ValueError, match="does not fit timm model 'test_resnet'"):
        _extractor(weights=path, pretrained=True).fit(images)


def test_weights_with_wrong_shapes_are_rejected(tmp_path, images):
    other = timm.create_model("test_efficientnet", pretrained=False, num_classes=0)
    path = tmp_path / "efficientnet.pth"
    torch.save(other.state_dict(), path)
    with pytest.raises(ValueError, match="does not fit timm model 'test_resnet'.*size mismatch"):
        _extractor(weights=path, pretrained=True).fit(images)


def test_unreadable_and_missing_weights(tmp_path, images):
    junk = tmp_path / "junk.safetensors"
    junk.write_bytes(b"not a weights file")
    with pytest.raises(ValueError, match="junk.safetensors"):
        _extractor(weights=junk, pretrained=True).fit(images)
    with pytest.raises(FileNotFoundError, match="weights file not found"):
        _extractor(weights=tmp_path / "missing.pth", pretrained=True).fit(images)
    with pytest.raises(ValueError, match="pretrained=False"):
        _extractor(weights=junk, pretrained=False).fit(images)


def test_unknown_model_name_lists_close_matches(images):
    with pytest.raises(ValueError, match="Unknown timm model_name 'resnet5O'.*resnet50"):
        FeatureExtractor("resnet5O", pretrained=False).fit(images)
    with pytest.raises(ValueError, match="Unknown timm model_name"):
        FeatureExtractor("definitely_not_a_model_xyz", pretrained=False).fit(images)


def test_download_failure_explains_offline_use(monkeypatch, images):
    from huggingface_hub.errors import LocalEntryNotFoundError

    real_create = timm.create_model

    def offline_create(name, pretrained=False, **kwargs):
        if pretrained and "pretrained_cfg_overlay" not in kwargs:
            raise LocalEntryNotFoundError("cannot find the requested files in the local cache")
        return real_create(name, pretrained=pretrained, **kwargs)

    monkeypatch.setattr(timm, "create_model", offline_create)
    monkeypatch.setattr("skcce._weights._probe", lambda endpoint, timeout: "")  # no network
    extractor = FeatureExtractor(MODEL, pretrained=True, device="cpu")
    with pytest.raises(WeightsUnavailableError) as info:
        extractor.fit(images)
    assert isinstance(info.value, OSError)
    message = str(info.value)
    for hint in ["weights=", "HF_HUB_OFFLINE=1", "HF_HOME", "LocalEntryNotFoundError"]:
        assert hint in message
    assert not hasattr(extractor, "model_")  # nothing half-fitted


# ---------------------------------------------------------------------------------------------
# Bad input
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "X, match",
    [
        ([], "0 sample"),
        (np.zeros((0, 8, 8, 3), np.uint8), "0 sample"),
        ([np.zeros((8, 8, 3), np.uint8), np.zeros((9, 8, 3), np.uint8)], "different shapes"),
        ("photos/cat.png", "single path"),
        ([np.zeros((8, 8, 3), np.uint8), "cat.png"], "mixing"),
        (np.zeros((2, 8, 8, 3), np.float32), "channels-first|C, H, W"),
        (np.zeros((2, 3, 8, 8), np.uint8), "H, W, C"),
        (np.zeros((2, 8, 8, 3), bool), "dtype bool"),
        (np.full((2, 8, 8, 3), 300), r"\[0, 255\]"),
        (np.zeros((2, 8), np.uint8), "H, W, C"),
        (42, "got int"),
    ],
    ids=[
        "empty list",
        "empty array",
        "mixed sizes",
        "single path",
        "mixed types",
        "float channels-last",
        "uint8 channels-first",
        "bool",
        "int out of range",
        "2-d array",
        "not a sequence",
    ],
)
def test_bad_input_is_a_clear_error(X, match, fitted):
    with pytest.raises(ValueError, match=match):
        fitted.transform(X)


def test_bad_files_name_the_file(fitted, png_files, tmp_path):
    text = tmp_path / "notes.png"
    text.write_text("this is not an image")
    truncated = tmp_path / "truncated.png"
    truncated.write_bytes(pathlib.Path(png_files[0]).read_bytes()[:60])
    for bad in [text, truncated]:
        with pytest.raises(ValueError, match=f"could not read image .*{bad.name}"):
            fitted.transform([*png_files[:2], bad])
    with pytest.raises(FileNotFoundError, match="missing.png"):
        fitted.transform([png_files[0], tmp_path / "missing.png"])
    # the same errors from DataLoader worker processes
    workers = clone(fitted).set_params(num_workers=1).fit(png_files)
    with pytest.raises(ValueError, match="notes.png"):
        workers.transform([png_files[0], text])


def test_transform_before_fit():
    with pytest.raises(NotFittedError):
        _extractor().transform(np.zeros((1, 8, 8), np.uint8))


@pytest.mark.parametrize(
    "params",
    [
        {"batch_size": 0},
        {"num_workers": -1},
        {"dtype": "float8"},
        {"image_size": (32,)},
        {"image_size": (32, 0)},
        {"device": "gpu0"},
        {"pretrained": "yes"},
    ],
)
def test_invalid_parameters(params, images):
    with pytest.raises(ValueError):
        _extractor(**params).fit(images)


# ---------------------------------------------------------------------------------------------
# scikit-learn conventions, pickling, caching
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "check",
    [
        "check_no_attributes_set_in_init",
        "check_parameters_default_constructible",
        "check_get_params_invariance",
        "check_set_params",
        "check_mixin_order",
        "check_estimator_repr",
        "check_estimator_cloneable",
        "check_do_not_raise_errors_in_init_or_set_params",
    ],
)
def test_sklearn_parameter_checks(check):
    getattr(estimator_checks, check)("FeatureExtractor", FeatureExtractor())


def test_fit_keeps_params_and_sets_attributes(images):
    extractor = _extractor(image_size=(32, 40))
    params = extractor.get_params()
    extractor.fit(images)
    assert extractor.get_params() == params
    assert extractor.n_features_out_ == 96
    assert extractor.device_ == "cpu"
    assert extractor.data_config_["input_size"] == (3, 32, 40)
    assert not extractor.model_.training
    assert not any(p.requires_grad for p in extractor.model_.parameters())
    assert extractor.transform(images).shape == (len(images), 96)
    names = extractor.get_feature_names_out()
    assert names.shape == (96,)
    assert names[0] == "featureextractor0"


def test_tags():
    tags = FeatureExtractor().__sklearn_tags__()
    assert tags.requires_fit
    assert tags.input_tags.string
    assert not tags.input_tags.two_d_array
    assert not tags.target_tags.required


def test_pickle_round_trip_rebuilds_model_on_cpu(fitted, images):
    blob = pickle.dumps(fitted)
    restored = pickle.loads(blob)
    np.testing.assert_array_equal(restored.transform(images), fitted.transform(images))
    assert "model_" not in fitted.__getstate__()  # the module is stored as a state dict
    assert all(v.device.type == "cpu" for v in fitted.__getstate__()["_model_state"].values())
    duplicate = copy.deepcopy(fitted)
    np.testing.assert_array_equal(duplicate.transform(images), fitted.transform(images))
    unfitted = pickle.loads(pickle.dumps(_extractor()))
    assert not hasattr(unfitted, "model_")


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_cuda_fitted_extractor_unpickles_on_cpu(fitted, images):
    state = fitted.__getstate__()
    state["device_"] = "cuda"  # as if fitted on a GPU machine
    restored = FeatureExtractor.__new__(FeatureExtractor)
    restored.__setstate__(state)
    assert restored.device_ == "cpu"
    np.testing.assert_array_equal(restored.transform(images), fitted.transform(images))


def test_params_hash_cleanly_with_joblib():
    import joblib

    a = _extractor(weights=pathlib.Path("w.pth"))
    assert joblib.hash(a) == joblib.hash(clone(a))
    assert joblib.hash(a) != joblib.hash(clone(a).set_params(image_size=64))


def _cce_clustering():
    try:
        from skcce._clustering import CCEClustering
    except ImportError:
        pytest.skip("skcce._clustering.CCEClustering is not available")
    return CCEClustering


def _cluster_params(CCEClustering):
    """Small, fast settings for whatever training knobs CCEClustering has."""
    params = {"random_state": 0}
    names = CCEClustering().get_params()
    small = [
        ("max_epochs", 2), ("batch_size", 32), ("solver_options", {"max_iter": 5, "tol": 1e-3})
    ]  # fmt: skip
    for name, value in small:
        if name in names:
            params[name] = value
    if "device" in names:
        params["device"] = "cpu"
    return params


def test_pipeline_fit_predict(images):
    from sklearn.pipeline import make_pipeline

    CCEClustering = _cce_clustering()
    X = _images(n=20, seed=3)
    pipe = make_pipeline(
        _extractor(), CCEClustering(n_clusters=3, **_cluster_params(CCEClustering))
    )
    labels = pipe.fit_predict(X)
    assert labels.shape == (20,)
    assert set(np.unique(labels)) <= {0, 1, 2}
    proba = pipe.predict_proba(X)
    assert proba.shape == (20, 3)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, atol=1e-5)


def test_grid_search_computes_features_once_per_fold_with_memory(tmp_path, monkeypatch):
    """With Pipeline(memory=...), the train-fold features are computed once per fold, not once
    per (fold, lam) candidate: FeatureExtractor.fit runs n_splits + 1 (refit) times."""
    from sklearn.model_selection import GridSearchCV, KFold
    from sklearn.pipeline import Pipeline

    CCEClustering = _cce_clustering()
    calls = tmp_path / "fit_calls.txt"
    original_fit = FeatureExtractor.fit

    def counting_fit(self, X, y=None):
        with open(calls, "a") as handle:  # a file, so calls in joblib workers count too
            handle.write(f"{len(X)}\n")
        return original_fit(self, X, y)

    monkeypatch.setattr(FeatureExtractor, "fit", counting_fit)
    X = _images(n=24, seed=4)
    lams = [1.0, 10.0, 100.0]

    def run(memory):
        calls.write_text("")
        pipe = Pipeline(
            [
                ("featureextractor", _extractor()),
                ("cceclustering", CCEClustering(n_clusters=2, **_cluster_params(CCEClustering))),
            ],
            memory=memory,
        )
        search = GridSearchCV(pipe, {"cceclustering__lam": lams}, cv=KFold(2)).fit(X)
        assert len(search.cv_results_["params"]) == len(lams)
        assert search.best_params_["cceclustering__lam"] in lams
        return [int(n) for n in calls.read_text().split()]

    cached = run(str(tmp_path / "cache"))
    assert cached == [12, 12, 24]  # one fit per training fold + the refit, whatever len(lams)
    uncached = run(None)
    assert len(uncached) == 2 * len(lams) + 1


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("dtype", [None, "bfloat16"])
def test_cuda_matches_cpu(dtype, fitted, images, png_files):
    gpu = clone(fitted).set_params(device="cuda", dtype=dtype).fit(images)
    gpu.model_.load_state_dict(fitted.model_.state_dict())
    assert gpu.device_ == "cuda"
    for X in [images, png_files]:
        features = gpu.transform(X)
        assert features.dtype == np.float32
        expected = fitted.transform(X)
        tol = 2e-2 if dtype else 1e-3
        np.testing.assert_allclose(features, expected, rtol=0, atol=tol * np.abs(expected).max())
    restored = pickle.loads(pickle.dumps(gpu))
    assert restored.device_ == "cuda"
