"""Tests of the engine below the estimator (skcce/_engine/): preprocessing, one training run
and its callback protocol, the train step's private solver path, inference, devices."""

import numpy as np
import pytest
import torch
from sklearn.datasets import make_blobs

from skcce._engine._callbacks import Callback, RunResult
from skcce._engine._device import loadable_device, resolve_device
from skcce._engine._distributed import Context
from skcce._engine._inference import infer_labels, infer_labels_sharded, infer_proba, span_rows
from skcce._engine._preprocess import detect_layout, prepare, sample_shape
from skcce._engine._select import Best
from skcce._engine._step import pseudo_labels
from skcce._engine._train import TrainConfig, run_single
from skcce.metrics import mutual_information
from skcce.models import build_model
from skcce.solvers import solve_pseudo_labels

K = 3


@pytest.fixture(scope="module")
def data():
    X, _ = make_blobs(n_samples=200, centers=K, n_features=4, random_state=0)
    return X.astype(np.float32)


def _config(**changes):
    settings = dict(
        n_clusters=K, lam=100.0, fairness="reverse", loss="collision", prior=None,
        fairness_weight=1.3, optimizer="sgd", learning_rate=0.5, backbone_learning_rate=None,
        weight_decay=0.1, batch_size=64, max_epochs=2, solver_tol=1e-5, solver_max_iter=100,
        augment=None, augment_weight=0.5, device=torch.device("cpu"), amp=False, verbose=0,
        solver="newton",
    )  # fmt: skip
    settings.update(changes)
    return TrainConfig(**settings)


def _build(generator, run=None, seed=None):
    return build_model("linear", (4,), K, generator=generator)


class Recorder(Callback):
    def __init__(self, stop_at_epoch=None):
        self.events, self.stop_at_epoch = [], stop_at_epoch

    def on_run_begin(self, run, first_epoch):
        self.events.append(("run_begin", run, first_epoch))

    def on_epoch_begin(self, run, epoch):
        if epoch == self.stop_at_epoch:
            raise KeyboardInterrupt
        self.events.append(("epoch_begin", run, epoch))

    def on_batch_end(self, run):
        self.events.append(("batch",))

    def on_epoch_end(self, state):
        self.events.append(("epoch_end", state.run, state.epoch, len(state.history)))


# ----- preprocessing ------------------------------------------------------------------------
@pytest.mark.parametrize(
    "shape, dtype, model, layout, sample",
    [
        ((5, 4), np.float32, "linear", "flat", (4,)),
        ((5, 8, 8), np.uint8, "vgg4", "nhw", (1, 8, 8)),
        ((5, 8, 8, 3), np.uint8, "vgg4", "nhwc", (3, 8, 8)),
        ((5, 3, 8, 8), np.float32, "vgg4", "nchw", (3, 8, 8)),
    ],
)
def test_layout_and_sample_shape(shape, dtype, model, layout, sample):
    X = np.zeros(shape, dtype=dtype)
    assert detect_layout(X, model) == layout
    assert sample_shape(X, layout) == sample


def test_layout_errors_name_the_fix():
    with pytest.raises(ValueError, match="Flatten the samples"):
        detect_layout(np.zeros((5, 8, 8)), "linear")
    with pytest.raises(ValueError, match="channels-first"):
        detect_layout(np.zeros((5, 8, 8, 3), dtype=np.float32), "vgg4")


def test_prepare_normalises_flat_features(data):
    prepared = prepare(data, "linear")
    assert prepared.layout == "flat" and prepared.input_shape == (4,)
    batch = prepared.inputs.batch(data, slice(None), torch.device("cpu")).double()
    np.testing.assert_allclose(batch.mean(dim=0).numpy(), 0, atol=1e-6)
    assert abs(float(batch.var(dim=0, unbiased=False).mean()) - 1) < 1e-5  # one global scale


@pytest.mark.parametrize(
    "scale, offset", [(1.0, 0.0), (1e-30, 0.0), (1e-12, 0.0), (3e7, 1e9), (1.0, 4e3)]
)
def test_float32_flat_route_equals_float64_route(scale, offset):
    # float32 features are normalised in float32 ((x - m_hi) * inv - c); the float64 route
    # (the one of float64 features) must give the same float32 values to rounding
    rng = np.random.default_rng(0)
    X32 = (offset + scale * rng.normal(size=(300, 6)) * np.arange(1, 7)).astype(np.float32)
    inputs = prepare(X32, "linear").inputs
    assert inputs._flat32(np.float32) is not None  # the float32 route is taken
    rows = np.arange(0, 300, 3)
    fast = inputs.raw(X32, rows, torch.device("cpu")).numpy()
    ref = inputs.raw(X32.astype(np.float64), rows, torch.device("cpu")).numpy()
    assert fast.dtype == ref.dtype == np.float32
    np.testing.assert_allclose(fast, ref, rtol=1e-5, atol=1e-5 * np.abs(ref).max())


def test_float32_flat_route_is_not_taken_for_float64():
    X = np.random.default_rng(0).normal(size=(50, 3))
    assert prepare(X, "linear").inputs._flat32(X.dtype) is None


# ----- one training run ---------------------------------------------------------------------
def test_run_single_result_and_callback_order(data):
    recorder = Recorder()
    prepared = prepare(data, "linear")
    result = run_single(
        data, prepared, _config(), _build, 7, 0, ctx=Context(), callbacks=[recorder]
    )
    assert isinstance(result, RunResult) and not result.interrupted
    assert [h["epoch"] for h in result.history] == [0, 1]
    # labels, sizes and score, no (N, K) probabilities; the score bit for bit the metric's
    proba = infer_proba(result.module, data, prepared.inputs, torch.device("cpu"))
    assert result.labels.shape == (200,) and result.labels.dtype == np.int64
    np.testing.assert_array_equal(result.labels, proba.argmax(axis=1))
    assert result.sizes.tolist() == np.bincount(result.labels, minlength=K).tolist()
    assert result.score == mutual_information(proba)
    assert not hasattr(result, "proba")
    epoch = [("epoch_begin", 0, 0), *[("batch",)] * 4, ("epoch_end", 0, 1, 1)]
    later = [("epoch_begin", 0, 1), *[("batch",)] * 4, ("epoch_end", 0, 2, 2)]
    assert recorder.events == [("run_begin", 0, 0), *epoch, *later]


def test_run_single_is_deterministic_per_seed(data):
    prepared = prepare(data, "linear")
    a, b = (run_single(data, prepared, _config(), _build, 3, 0, ctx=Context()) for _ in "ab")
    np.testing.assert_array_equal(a.labels, b.labels)
    assert a.score == b.score


def test_interrupt_ends_the_run_at_the_last_completed_epoch(data):
    prepared = prepare(data, "linear")
    cut = run_single(
        data, prepared, _config(max_epochs=3), _build, 5, 0, ctx=Context(),
        callbacks=[Recorder(stop_at_epoch=2)],
    )  # fmt: skip
    two = run_single(data, prepared, _config(max_epochs=2), _build, 5, 0, ctx=Context())
    assert cut.interrupted and len(cut.history) == 2
    np.testing.assert_array_equal(cut.labels, two.labels)
    assert cut.score == two.score


def test_interrupt_before_any_epoch_gives_an_empty_result(data):
    prepared = prepare(data, "linear")
    result = run_single(
        data, prepared, _config(), _build, 5, 0, ctx=Context(),
        callbacks=[Recorder(stop_at_epoch=0)],
    )  # fmt: skip
    assert result.interrupted and result.history == [] and result.labels is None


def test_record_of_a_restart_needs_a_completed_epoch():
    module = torch.nn.Linear(1, 1)
    labels, sizes = np.array([0, 0]), np.array([2, 0])
    record = Best.of(RunResult(1, module, [{}], labels, 0.2, sizes=sizes))
    assert (record.run, record.score, record.module) == (1, 0.2, module)
    assert record.labels is labels and record.sizes is sizes
    assert Best.of(RunResult(2, module, [], None, None, True)) is None


# ----- the train step's solver path ---------------------------------------------------------
def test_pseudo_labels_private_path_equals_public_solver():
    g = torch.Generator().manual_seed(0)
    probs = torch.softmax(torch.randn(50, K, generator=g, dtype=torch.float64), 1)
    cfg = _config(solver_tol=1e-9)
    labels, res = pseudo_labels(probs, 50, cfg, None, Context())
    public = solve_pseudo_labels(probs, lam=100.0, tol=1e-9, max_iter=100, method="newton")
    assert torch.equal(labels, public.labels) and res.n_iter == public.n_iter


def test_pseudo_labels_of_diverged_predictions_raise():
    probs = torch.full((4, K), float("nan"), dtype=torch.float64)
    with pytest.raises(FloatingPointError, match="non-finite"):
        pseudo_labels(probs, 4, _config(), None, Context())


# ----- inference and devices ----------------------------------------------------------------
def test_sharded_inference_with_one_process_is_plain_inference(data):
    prepared = prepare(data, "linear")
    module = _build(torch.Generator().manual_seed(0))
    cpu = torch.device("cpu")
    labels, score = infer_labels_sharded(module, data, prepared.inputs, cpu, Context(), K)
    proba = infer_proba(module, data, prepared.inputs, cpu)
    np.testing.assert_array_equal(labels, proba.argmax(axis=1))
    assert score == mutual_information(proba)
    assert score == infer_labels(module, data, prepared.inputs, cpu)[1]


def test_streamed_labels_at_many_clusters_match_the_whole_array():
    # beyond 128 clusters the spans are shorter than the metric's blocks: the same labels,
    # the score to rounding, and the spans' batches those of one pass over the whole array
    k = 300
    assert span_rows(k) % 1024 == 0 and span_rows(k) * k * 8 <= 1 << 26
    X = np.random.default_rng(0).normal(size=(2 * span_rows(k) + 77, 4)).astype(np.float32)
    prepared = prepare(X, "linear")
    module = build_model("linear", (4,), k, generator=torch.Generator().manual_seed(0))
    cpu = torch.device("cpu")
    labels, score = infer_labels(module, X, prepared.inputs, cpu)
    proba = infer_proba(module, X, prepared.inputs, cpu)
    np.testing.assert_array_equal(labels, proba.argmax(axis=1))
    assert abs(score - mutual_information(proba)) < 1e-12


def test_one_device_resolver():
    assert resolve_device("cpu") == torch.device("cpu")
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert resolve_device("auto").type == expected
    with pytest.raises(ValueError, match="not a valid torch device"):
        resolve_device("gpu0")
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="CUDA is not available"):
            resolve_device("cuda")
        assert loadable_device("cuda:1") == torch.device("cpu")


def test_old_private_paths_are_aliases():
    import skcce._checkpoint
    import skcce._newton
    import skcce._training

    import skcce._engine._checkpoint
    import skcce.solvers._newton

    assert skcce._newton is skcce.solvers._newton
    assert skcce._checkpoint is skcce._engine._checkpoint
    assert skcce._training.Inputs is prepare.__globals__["Inputs"]


def test_fit_from_centroids_of_two_overlapping_groups_stays_finite():
    # Two of the true centres nearly coincide, so the KMeans-style head they give is very
    # stiff (logit gaps of hundreds); the small far blob is then absent from some batch and
    # no row of it predicts that cluster at all: the fairness term used to turn NaN there.
    from sklearn.datasets import make_blobs

    from skcce import CCEClustering

    X, y = make_blobs([1000, 500, 200, 100, 50], cluster_std=1.0, random_state=5)
    centres = np.stack([X[y == k].mean(axis=0) for k in range(5)])
    assert np.linalg.norm(centres[0] - centres[1]) < 1.0
    est = CCEClustering(5, init=centres, n_init=1, prior=None, random_state=5).fit(X)
    assert np.isfinite(est.predict_proba(X)).all()
    assert all(np.isfinite(h["loss"]) and np.isfinite(h["fairness"]) for h in est.history_)
    assert np.bincount(est.labels_, minlength=5).min() > 0
