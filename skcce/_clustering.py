"""CCEClustering: the scikit-learn estimator (parameters, validation, fit/predict/score)."""

from __future__ import annotations

import io
import os
from dataclasses import dataclass
from numbers import Integral, Real

import numpy as np
import torch
from sklearn.base import BaseEstimator, ClusterMixin, _fit_context
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_array, check_is_fitted, validate_data

from skcce import _n_clusters
from skcce._advice import collapse_message
from skcce._engine import _checkpoint, _whiten
from skcce._engine._build import make_builder
from skcce._engine._callbacks import NEAR_EMPTY, ProgressBar, SklearnCallbacks, small_clusters
from skcce._engine._device import loadable_device, resolve_device
from skcce._engine._distributed import local_device
from skcce._engine._distributed import resolve as resolve_distributed
from skcce._engine._inference import infer_labels, infer_proba
from skcce._engine._order import renumbered
from skcce._engine._preprocess import Prepared, detect_layout, prepare, sample_shape
from skcce._engine._restarts import run_restarts
from skcce._engine._select import choose_restart
from skcce._engine._threads import thread_limit, wide_threads
from skcce._engine._train import FitInterruptedWarning, TrainConfig
from skcce._warn import warn
from skcce.metrics import mutual_information
from skcce.models import _defaults
from skcce.solvers import METHODS as SOLVER_METHODS
from skcce.solvers import resolve_method

try:  # scikit-learn >= 1.9: experimental callback API (ProgressBar, ScoringMonitor, ...)
    from sklearn.callback import CallbackSupportMixin, with_callbacks
except ImportError:  # older scikit-learn: no callbacks, nothing to support

    class CallbackSupportMixin:  # noqa: D101
        pass

    def with_callbacks(method):  # noqa: D103
        return method


_MODEL_NAMES = ("linear", "vgg4", "resnet18")
#: the keys of ``solver_options`` and their defaults
_SOLVER_DEFAULTS = {"method": "auto", "tol": "auto", "max_iter": 200}
# the 0.1.0 release's solver parameters and their defaults (read by old pickles)
_RELEASE_SOLVER_DEFAULTS = {"method": "auto", "tol": 1e-5, "max_iter": 200}


@dataclass(frozen=True)
class _FitPlan:
    """What ``fit`` resolved before training: the data-parallel context, the prepared data,
    the run settings, the restart seeds, the network factory and whether it is the linear
    head."""

    ctx: object
    prepared: Prepared
    cfg: TrainConfig
    n_init: int
    seeds: np.ndarray
    build: object
    settings: dict  # every "auto" training setting resolved (skcce.models._defaults)
    linear: bool  # the built-in linear head (skcce.models._defaults.is_linear)


class CCEClustering(ClusterMixin, CallbackSupportMixin, BaseEstimator):
    r"""Self-labeled clustering with the collision cross-entropy (Zhang & Boykov).

    Trains a clustering network (a linear head by default) by the self-labeling loop of the
    supplement's Algorithm 1: for every mini-batch the soft pseudo-labels ``Y`` are solved
    exactly for :math:`\sum_i H_2(y_i, \sigma_i) + \lambda\, KL(u \| \bar y)`
    (:func:`skcce.solvers.solve_pseudo_labels`; :math:`H_2(y,\sigma) = -\ln y^\top\sigma`),
    then one optimiser step is taken on
    :math:`\overline{H_2(y, \sigma)} + w_f\, KL(u \| \bar\sigma)`. Every ``"auto"`` value is
    resolved at fit time as stated below; why each is what it is: docs/design/.

    Parameters
    ----------
    n_clusters : int or "auto", default=10
        Number of clusters K. ``"auto"``: the K of ``n_clusters_range`` whose fit is the most
        reproducible across restarts and the most confident (``n_clusters_scores_``); K
        never exceeds :math:`\sqrt{n/2}` (docs/design/009-choosing-k.md).
    n_clusters_range : tuple of (int, int), default=(2, 20)
        Smallest and largest K that ``n_clusters="auto"`` tries.
    lam : float, default=100.0
        Fairness weight λ of the pseudo-label step, summed over a batch's rows (the
        averaged-loss equivalent is ``lam / batch_size``). The term's :math:`\bar y` is the
        batch's mean pseudo-label while a batch holds at least :math:`\lceil K H_K\rceil`
        rows (the rows in which all K clusters are expected to appear; :math:`H_K` the
        harmonic number); a smaller batch adds that many rows less its own of the running
        mean of earlier batches' labels (docs/design/020-fairness-window.md).
    fairness : {"reverse", "forward"}, default="reverse"
        :math:`KL(u\|\bar y)` (the paper's loss (b)) or :math:`KL(\bar y\|u)` (loss (a)).
    loss : {"collision", "shannon", "reverse"}, default="collision"
        Cross-entropy of both steps; Shannon and reverse are the paper's comparisons.
    prior : "auto", "estimate", None or array-like of shape (n_clusters,), default="auto"
        Cluster proportions ``u`` the fairness terms pull towards. None: uniform.
        ``"estimate"``: estimated during training. ``"auto"``: restarts alternate uniform
        (the first) and estimated. An array: cluster sizes, matched to clusters by mass.
    fairness_weight : float, default=1.3
        Weight :math:`w_f` of the fairness term of the network loss (supplement 4.2).
    model : {"linear", "vgg4", "resnet18"}, torch.nn.Module or callable, default="linear"
        A linear head on 2-D features, the supplement's VGG-4 or a ResNet-18 on images, a
        module mapping a batch to K logits, or ``f(input_shape, n_clusters) -> nn.Module``.
    init : {"auto", "random", "kmeans"} or array-like, default="auto"
        Initial linear head. ``"kmeans"`` (``"auto"`` on the linear head): every restart
        starts as the soft assignment of its own k-means++ and Lloyd run, with
        split-and-merge moves kept while they lower the inertia. ``"random"``
        (``"auto"`` on other models): Kaiming-normal weights. An array: centroids.
    whiten : bool or float in [0, 1], default=False
        Linear head only: multiply the normalised rows by the clusters' pooled covariance
        (estimated without labels) to the power ``-whiten / 2``; for elongated clusters.
    optimizer : {"auto", "sgd", "adam"}, default="auto"
        ``"auto"``: SGD for the linear head, Adam for other models.
    learning_rate : float or "auto", default="auto"
        ``"auto"``: 0.5 for the linear head, 3e-4 for other models.
    backbone_learning_rate : float, default=None
        Separate learning rate of a pretrained backbone (supplement Table 4: 1e-5).
    weight_decay : float or "auto", default="auto"
        ``"auto"``: 0.01 for other models; for the linear head
        ``0.1 * min(1, n_features / 64) * min(1, 10 / n_clusters)`` (``weight_decay_``) for
        a cluster holding ``1 / n_clusters`` of the data, and each cluster's row decays in
        proportion to its share ``m_k`` of the pseudo-labels:
        ``weight_decay_ * n_clusters * m_k`` (docs/design/027-decay-by-share.md). A float is
        the optimiser's ``weight_decay``, the same for every parameter.
    batch_size : int or "auto", default="auto"
        Rows per mini-batch. ``"auto"``: 250 for the linear head, 100 for other models,
        raised to ``4 * n_clusters`` so that a batch can hold every cluster.
    max_epochs : int, default=10
        The most passes over the data.
    n_iter_no_change : int, None or "auto", default="auto"
        Training ends early after this many epochs in a row that change the cluster of no
        fewer rows than the fewest of the epochs before them, or after an epoch that changes
        none (epochs that began by re-seeding a lost cluster are not counted). None: train
        ``max_epochs``. ``"auto"``: 1 for the linear head, None for other models, whose
        features may improve after the labels settle (docs/design/026-epoch-stop.md).
    solver_options : dict, default=None
        Pseudo-label solver settings: ``"method"`` (default ``"auto"``, see
        :func:`~skcce.solvers.solve_pseudo_labels`), ``"tol"`` (certified relative duality
        gap; ``"auto"``: ``1 / batch_size``, one row's mean share of the batch objective) and
        ``"max_iter"`` (200) per batch.
    augment : "auto", None, "default" or callable, default="auto"
        Augmentation consistency (supplement Table 4). ``"auto"``: ``"default"`` for image
        models (:func:`skcce.models.default_augmentation`), None otherwise.
    augment_weight : float, default=0.5
        Weight of the cross-entropy between an augmented view and its pseudo-label.
    n_init : int or "auto", default="auto"
        Restarts; the kept one has the fewest empty clusters, then the best rank sum of its
        agreement with the others and its partition's likelihood. ``"auto"``: 10 for the
        linear head below 10 000 rows or 64 features, 1 otherwise and for other models.
    device : str, default="auto"
        ``"auto"`` (CUDA when available, else CPU) or any torch device string.
    amp : bool, default=False
        bfloat16 autocast of the network on CUDA; the pseudo-labels stay in float64.
    distributed : "auto" or bool, default="auto"
        Data-parallel training over ``torch.distributed`` (``torchrun``), exact for the
        global batch; ``"auto"``: when a process group is initialised (docs/distributed.md).
    checkpoint : str, path-like or None, default=None
        File written atomically at every epoch; ``fit`` resumes from it when it exists.
    n_threads : int or None, default=None
        CPU threads of ``fit``, ``predict`` and ``score``, restored on exit. None: 1 for the
        linear head (its KMeans start keeps torch's setting, as scikit-learn's KMeans would,
        where one Lloyd iteration holds 10**7 multiply-adds), torch's setting for other models.
    random_state : int, RandomState instance or None, default=None
        Seeds initialisation, shuffling and restarts (a local ``torch.Generator``).
    verbose : int, default=0
        Show a tqdm progress bar when > 0. It counts the batches of ``max_epochs`` epochs:
        its estimate is the longest the fit can take, and a fit whose epoch stop comes
        earlier closes it before its end.

    Attributes
    ----------
    labels_ : ndarray of shape (n_samples,)
        Cluster of each training sample (of the last chunk after ``partial_fit``),
        numbered by first appearance in the training data.
    n_clusters_ : int
        Number of clusters (``n_clusters``, or the K chosen by ``"auto"``).
    n_iter_, n_steps_ : int
        Epochs run by the kept restart; optimiser steps taken.
    history_ : list of dict
        Per epoch: ``loss``, ``fairness``, ``cluster_sizes``, ``solver_iter``,
        ``solver_unconverged``, ``relocated`` (lost clusters of the linear head re-seeded
        before the epoch), ``changed`` (training rows whose cluster changed since the epoch
        before; None in the first), ``time``.
    train_score_ : float
        :meth:`score` of the kept restart on the training data.
    restart_agreement_ : ndarray of shape (n_completed_restarts,)
        Each restart's mean adjusted Rand index with the others (zeros below 3 restarts).
    prior_ : ndarray of shape (n_clusters,)
        The class prior in force at the end of the kept restart.
    module_ : torch.nn.Module
        The trained network, on ``device_``.
    n_features_in_, feature_names_in_, input_shape_ : int, ndarray, tuple
        What ``fit`` saw: features, their names (DataFrames only), one sample's shape.
    device_ : torch.device
        Device the network was trained on.
    init_ : {"random", "kmeans"} or ndarray
        The initialisation of the kept restart.
    whitening_ : ndarray of shape (n_features, n_features) or None
        The map applied to every normalised row when ``whiten`` is positive.
    optimizer_, learning_rate_, weight_decay_, batch_size_, augment_, n_init_
        The resolved ``"auto"`` settings.
    n_iter_no_change_ : int or None
        The resolved ``n_iter_no_change`` (None after ``partial_fit``: one pass per call).
    n_clusters_scores_, n_clusters_restarts_ : dict of int
        ``n_clusters="auto"`` only: each K's criterion and the restarts behind it.

    See Also
    --------
    sklearn.cluster.KMeans : Centroid clustering.
    skcce.FeatureExtractor : Frozen timm features for images.

    Notes
    -----
    Features are centred per feature and divided by one global standard deviation; images
    get per-channel normalisation. Ctrl-C during ``fit`` keeps the last completed epoch.

    References
    ----------
    Z. Zhang and Y. Boykov, "Collision Cross-entropy for Soft Class Labels and Deep
    Clustering", arXiv:2303.07321.

    Examples
    --------
    >>> from sklearn.datasets import load_digits
    >>> from skcce import CCEClustering
    >>> X, y = load_digits(return_X_y=True)
    >>> cce = CCEClustering(n_clusters=10, n_init=1, max_epochs=2, random_state=0).fit(X[:500])
    >>> cce.labels_.shape, cce.predict_proba(X[:3]).shape
    ((500,), (3, 10))
    """

    _parameter_constraints: dict = {
        "n_clusters": [Interval(Integral, 1, None, closed="left"), StrOptions({"auto"})],
        "n_clusters_range": [tuple, list],
        "lam": [Interval(Real, 0, None, closed="left")],
        "fairness": [StrOptions({"reverse", "forward"})],
        "loss": [StrOptions({"collision", "shannon", "reverse"})],
        "prior": ["array-like", StrOptions({"auto", "estimate"}), None],
        "fairness_weight": [Interval(Real, 0, None, closed="left")],
        "model": [StrOptions(set(_MODEL_NAMES)), torch.nn.Module, callable],
        "init": [StrOptions({"auto", "random", "kmeans"}), "array-like"],
        "whiten": ["boolean", Interval(Real, 0, 1, closed="both")],
        "optimizer": [StrOptions({"auto", "sgd", "adam"})],
        "learning_rate": [Interval(Real, 0, None, closed="neither"), StrOptions({"auto"})],
        "backbone_learning_rate": [Interval(Real, 0, None, closed="left"), None],
        "weight_decay": [Interval(Real, 0, None, closed="left"), StrOptions({"auto"})],
        "batch_size": [Interval(Integral, 1, None, closed="left"), StrOptions({"auto"})],
        "max_epochs": [Interval(Integral, 1, None, closed="left")],
        "n_iter_no_change": [Interval(Integral, 1, None, closed="left"), None,
                             StrOptions({"auto"})],
        "solver_options": [dict, None],
        "augment": [None, StrOptions({"auto", "default"}), callable],
        "augment_weight": [Interval(Real, 0, None, closed="left")],
        "n_init": [Interval(Integral, 1, None, closed="left"), StrOptions({"auto"})],
        "device": [str, torch.device],
        "amp": ["boolean"],
        "distributed": [StrOptions({"auto"}), "boolean"],
        "checkpoint": [str, os.PathLike, None],
        "n_threads": [Interval(Integral, 1, None, closed="left"), None],
        "random_state": ["random_state"],
        "verbose": ["verbose"],
    }

    def __init__(
        self,
        n_clusters=10,
        *,
        n_clusters_range=(2, 20),
        lam=100.0,
        fairness="reverse",
        loss="collision",
        prior="auto",
        fairness_weight=1.3,
        model="linear",
        init="auto",
        whiten=False,
        optimizer="auto",
        learning_rate="auto",
        backbone_learning_rate=None,
        weight_decay="auto",
        batch_size="auto",
        max_epochs=10,
        n_iter_no_change="auto",
        solver_options=None,
        augment="auto",
        augment_weight=0.5,
        n_init="auto",
        device="auto",
        amp=False,
        distributed="auto",
        checkpoint=None,
        n_threads=None,
        random_state=None,
        verbose=0,
    ):
        self.n_clusters = n_clusters
        self.n_clusters_range = n_clusters_range
        self.lam = lam
        self.fairness = fairness
        self.loss = loss
        self.prior = prior
        self.fairness_weight = fairness_weight
        self.model = model
        self.init = init
        self.whiten = whiten
        self.optimizer = optimizer
        self.learning_rate = learning_rate
        self.backbone_learning_rate = backbone_learning_rate
        self.weight_decay = weight_decay
        self.batch_size = batch_size
        self.max_epochs = max_epochs
        self.n_iter_no_change = n_iter_no_change
        self.solver_options = solver_options
        self.augment = augment
        self.augment_weight = augment_weight
        self.n_init = n_init
        self.device = device
        self.amp = amp
        self.distributed = distributed
        self.checkpoint = checkpoint
        self.n_threads = n_threads
        self.random_state = random_state
        self.verbose = verbose

    # ----- validation ---------------------------------------------------------------------
    def _validate_X(self, X, reset):
        """Checked X, without copying an array that is already usable (float32 or float64
        features; uint8 or float images): batches are cut from it during fit and predict."""
        deep = not _defaults.is_linear(self.model)
        params = dict(
            dtype="numeric" if deep else [np.float32, np.float64],
            allow_nd=deep,
            ensure_min_samples=1,
        )
        if deep and not reset:
            # images: the sample shape is compared with input_shape_ once the layout is
            # read (a fit on uint8 (N, H, W, C) predicts (N, C, H, W) floats), not with
            # n_features_in_, which is only X.shape[1]
            X = check_array(X, estimator=self, input_name="X", **params)
        else:
            X = validate_data(self, X, reset=reset, **params)
        if deep and X.dtype != np.uint8 and X.dtype.kind in "iub":
            X = X.astype(np.float32)  # integer images: one float32 copy
        if deep and X.dtype.kind not in "uf":
            raise ValueError(f"X must hold numbers; got dtype {X.dtype}")
        # NaN and infinity: rejected by check_array (an O(1)-memory sum first)
        return X

    def _check_prior(self, k):
        """``(kind, values)`` of ``prior`` (:mod:`skcce._engine._prior`): ``("uniform",
        None)``, ``("auto", None)``, ``("estimate", None)`` or ``("match", proportions)``,
        the user's array converted
        once here (any array-like: lists, tensors, views of any strides or order, float32) to
        a contiguous float64 array that sums to 1."""
        if self.prior is None:
            return "uniform", None
        if isinstance(self.prior, str):  # "auto" or "estimate" (the parameter constraints)
            return self.prior, None
        raw = self.prior
        if isinstance(raw, torch.Tensor):
            raw = raw.detach().cpu().numpy()
        try:
            prior = np.array(raw, dtype=np.float64)  # a copy, C-contiguous
        except (TypeError, ValueError) as exc:
            raise ValueError(
                f"prior must be None, 'auto' or an array of {k} proportions "
                f"(n_clusters); got {self.prior!r:.80}"
            ) from exc
        if prior.shape != (k,):
            raise ValueError(
                f"prior must have shape ({k},) (n_clusters); got {prior.shape}"
            )
        bad = np.flatnonzero(~np.isfinite(prior) | (prior < 0))
        if bad.size:
            raise ValueError(
                f"prior must be a probability vector (non-negative, summing to 1); entries "
                f"{bad.tolist()[:10]} are negative, NaN or infinite"
            )
        if abs(prior.sum() - 1) > 1e-6 * max(1, k):
            raise ValueError(
                "prior must be a probability vector (non-negative, summing to 1); it sums to "
                f"{prior.sum():.6g}"
            )
        zeros = np.flatnonzero(prior == 0)
        if zeros.size and self.fairness == "forward" and self.fairness_weight > 0:
            raise ValueError(
                f"prior is 0 for clusters {zeros.tolist()[:10]}, but fairness='forward' "
                "puts KL(mean prediction || prior) in the network loss, which is infinite "
                "there (a softmax is never exactly 0); use fairness='reverse' (KL(prior || .) "
                "allows zeros), fairness_weight=0, or a prior without zeros"
            )
        return "match", prior / prior.sum()

    def _augment_fn(self, augment, input_shape):
        if augment is None:
            return None
        if isinstance(augment, str):
            from skcce.models import default_augmentation

            aug = default_augmentation(input_shape)
            return lambda x, generator: aug(x, generator=generator)
        user = augment
        return lambda x, generator: user(x)

    def _solver_options(self):
        """``(method, tol, max_iter)`` of ``solver_options`` (missing keys: their defaults,
        ``tol`` possibly ``"auto"``); a ``ValueError`` names an unknown key or a bad value."""
        options = dict(_SOLVER_DEFAULTS)
        given = self.solver_options or {}
        unknown = sorted(set(given) - set(options))
        if unknown:
            raise ValueError(
                f"solver_options has unknown keys {unknown}; the keys are "
                f"{sorted(options)}"
            )
        options.update(given)
        method, tol, max_iter = options["method"], options["tol"], options["max_iter"]
        if method not in SOLVER_METHODS:
            raise ValueError(
                f"solver_options['method'] must be one of {sorted(SOLVER_METHODS)}; "
                f"got {method!r}"
            )
        bad = isinstance(tol, bool) or not isinstance(tol, Real) or not 0 < tol < 1
        if tol != "auto" and bad:
            raise ValueError(
                f"solver_options['tol'] must be 'auto' or a float in (0, 1); got {tol!r}"
            )
        if isinstance(max_iter, bool) or not isinstance(max_iter, Integral) or max_iter < 1:
            raise ValueError(
                f"solver_options['max_iter'] must be a positive integer; got {max_iter!r}"
            )
        return method, tol if tol == "auto" else float(tol), int(max_iter)

    def _config(self, k, device, input_shape, settings, solve_threads=1, n_samples=1):
        """TrainConfig from the parameters, with the "auto" ones taken from ``settings``."""
        method, solver_tol, solver_max_iter = self._solver_options()
        if solver_tol == "auto":  # the gap below one row's mean share of the batch objective
            solver_tol = 1.0 / int(settings["batch_size"])
        prior_kind, prior = self._check_prior(k)
        return TrainConfig(
            n_clusters=k,
            lam=float(self.lam),
            fairness=self.fairness,
            loss=self.loss,
            prior=prior,
            prior_kind=prior_kind,
            n_samples=int(n_samples),
            fairness_weight=float(self.fairness_weight),
            optimizer=settings["optimizer"],
            learning_rate=float(settings["learning_rate"]),
            backbone_learning_rate=self.backbone_learning_rate,
            weight_decay=float(settings["weight_decay"]),
            batch_size=int(settings["batch_size"]),
            max_epochs=int(self.max_epochs),
            solver_tol=solver_tol,
            solver_max_iter=solver_max_iter,
            solver=resolve_method(method, self.loss, self.fairness),
            augment=self._augment_fn(settings["augment"], input_shape),
            augment_weight=float(self.augment_weight),
            device=device,
            amp=bool(self.amp) and device.type == "cuda",
            verbose=int(self.verbose),
            solve_threads=int(solve_threads),
            n_iter_no_change=settings.get("n_iter_no_change"),
            # "auto" on the linear head: each row's decay by its cluster's share (_decay)
            decay_by_share=isinstance(self.weight_decay, str) and _defaults.is_linear(self.model),
        )

    def _plan(self, X, k, solve_threads=1) -> _FitPlan:
        """Resolve everything a fit of ``k`` clusters needs before training (validated X)."""
        n = X.shape[0]
        if n < k:
            raise ValueError(
                f"n_samples={n} should be >= n_clusters={k}: there are fewer "
                "samples than clusters"
            )
        prepared = prepare(X, self.model)
        settings = _defaults.resolve(  # every "auto" setting, from the model
            {key: getattr(self, key) for key in _defaults.AUTO_PARAMS},
            self.model,
            n,
            images=X.ndim > 2,  # the image layouts (2-D X is "flat")
            n_features=X.shape[1] if X.ndim == 2 else None,
            n_clusters=k,
        )
        if k == 1:  # the restarts of one cluster are all the same
            settings["n_init"] = 1
        linear = _defaults.is_linear(self.model)
        init = _defaults.check_init(settings["init"], self.init, self.model, k, X)
        ctx = resolve_distributed(self.distributed)
        device = local_device(resolve_device(self.device), ctx)
        cfg = self._config(k, device, prepared.input_shape, settings, solve_threads, n)
        rng = check_random_state(self.random_state)
        seeds = rng.randint(0, np.iinfo(np.int32).max, size=settings["n_init"])
        seeds = ctx.broadcast(seeds, device)  # the same restarts on every rank, unseeded too
        if float(self.whiten) > 0:  # rank 0's map on every rank (a BLAS may differ elsewhere)
            whitening = self._whitening(X, k, prepared.inputs, int(seeds[0]), linear)
            prepared.inputs.whiten = ctx.broadcast(whitening, device)
        build = make_builder(self.model, k, X, prepared, ctx, device, init)
        return _FitPlan(ctx, prepared, cfg, settings["n_init"], seeds, build, settings, linear)

    def _check_whiten(self, linear):
        """A positive ``whiten`` needs the linear head: a ``ValueError`` otherwise."""
        if float(self.whiten) > 0 and not linear:
            raise ValueError(
                f"whiten={self.whiten!r} needs the linear head (model='linear'); "
                f"got model={self.model!r}"
            )

    def _whitening(self, X, k, inputs, seed, linear):
        """A positive ``whiten``: the map of :func:`skcce._engine._whiten.within_whitening`,
        estimated on a sample of the normalised rows."""
        self._check_whiten(linear)
        rows = inputs.raw(X, _whiten.sample_index(len(X), seed), torch.device("cpu"))
        strength = float(self.whiten)
        return _whiten.within_whitening(rows.double().numpy(), k, seed, strength)

    def _checkpoint_settings(self, plan):
        """The parameters a checkpoint must agree on (those that change the fitted model)."""
        ignored = {"verbose", "checkpoint", "device", "distributed", "n_init", "random_state"}
        ignored.add("solver_options")  # recorded resolved, below
        settings = {
            key: _checkpoint.describe(value)
            for key, value in self.get_params(deep=False).items()
            if key not in ignored
        }
        settings["n_clusters"] = plan.cfg.n_clusters
        settings["solver"] = plan.cfg.solver
        settings["solver_tol"] = plan.cfg.solver_tol
        settings["solver_max_iter"] = plan.cfg.solver_max_iter
        settings["n_init"] = int(plan.n_init)
        seed = self.random_state
        settings["random_state"] = (
            seed if seed is None or isinstance(seed, Integral) else ("RandomState instance")
        )
        return settings

    def _callbacks(self, X, plan, checkpoint):
        """``(callbacks, resume or None)``: checkpointing to the file ``checkpoint`` (which
        may resume the fit), the progress bar and scikit-learn's callbacks, on the engine's
        one protocol."""
        callbacks, resume = [], None
        settings = self._checkpoint_settings(plan) if checkpoint is not None else None
        if hasattr(self, "_init_callback_context"):  # scikit-learn >= 1.9
            callbacks.append(SklearnCallbacks(self, plan.n_init * plan.cfg.max_epochs))
        if settings is not None:
            checkpoint, resume = _checkpoint.open_checkpoint(
                checkpoint,
                settings,
                X,
                plan.prepared.inputs,
                plan.ctx,
                plan.cfg.device,
                plan.seeds,
            )
            callbacks.append(checkpoint)
        if plan.cfg.verbose and plan.ctx.is_main:
            n_batches = max(1, -(-X.shape[0] // plan.cfg.batch_size))
            callbacks.append(ProgressBar(plan.n_init, plan.cfg.max_epochs, n_batches))
        return callbacks, resume

    @_fit_context(prefer_skip_nested_validation=True)
    @with_callbacks
    def fit(self, X, y=None):
        """Train the clustering network on X.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features), or images
            Features for the linear head; for image models (N, H, W) or (N, H, W, C) uint8,
            or (N, C, H, W) float arrays. Sparse matrices are not supported.
        y : Ignored
            Not used, present for API consistency.

        Returns
        -------
        self : CCEClustering
            The fitted estimator.
        """
        found, k, checkpoint = None, self.n_clusters, self.checkpoint
        if isinstance(self.n_clusters, str):  # "auto": the search chooses K
            _n_clusters.check_search_params(self)
            found = _n_clusters.search(self, self._validate_X(X, reset=True))
            k, checkpoint = found.k, _n_clusters.candidate_path(self.checkpoint, found.k)
        outer = torch.get_num_threads()  # the caller's setting, before the scope
        with thread_limit(self._thread_count()), wide_threads(self.n_threads or outer):
            self._fit(X, k, checkpoint, solve_threads=self.n_threads or outer)
        if found is not None:
            self.n_clusters_scores_ = found.scores
            self.n_clusters_restarts_ = found.restarts
        return self

    @_fit_context(prefer_skip_nested_validation=True)
    def partial_fit(self, X, y=None):
        """Update the model with one chunk of samples: one pass of the training over it.

        The first call (on an unfitted estimator) reads the settings, fits the input
        normalisation to the chunk and starts the linear head: k-means++, Lloyd and
        split-and-merge moves on the chunk for ``init="auto"`` or ``"kmeans"``, the ``init``
        centroids, or a random head for ``"random"``. Every call then merges the chunk into
        the normalisation (running per-feature means and one global standard deviation; the
        head is re-expressed so that its predictions do not change), runs one pass of the
        self-labeling loop over the chunk's shuffled mini-batches (``n_steps_`` counts the
        optimiser steps) and sets ``labels_`` to the chunk's clusters. A stream trains one
        model (``n_init="auto"``: 1, ``prior="auto"``: uniform) with the settings of its
        first call; ``max_epochs`` and ``checkpoint`` are unused (a pickle resumes the
        stream exactly). After ``fit`` it continues the fitted model. Linear head only; a
        ``ValueError`` changes nothing.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            A chunk; on the first call at least ``n_clusters`` distinct rows.
        y : Ignored
            Not used, present for API consistency.

        Returns
        -------
        self : CCEClustering
        """
        outer = torch.get_num_threads()
        with thread_limit(self._thread_count()), wide_threads(self.n_threads or outer):
            return self._partial_fit(X)

    def _partial_fit(self, X):
        """``partial_fit``: everything is checked before any attribute changes
        (:mod:`skcce._engine._stream` trains copies)."""
        from sklearn.base import clone

        from skcce._engine._stream import Moments, Stream, first_head
        from skcce.models._kmeans_init import n_distinct_rows

        if isinstance(self.n_clusters, str):
            raise ValueError(
                "partial_fit needs an integer n_clusters: n_clusters='auto' compares fits of "
                "every K on all the data, which a stream never holds; choose K with fit on a "
                "sample, then stream with that n_clusters"
            )
        if not _defaults.is_linear(self.model):
            raise ValueError(
                f"partial_fit trains the linear head only (model='linear'); got "
                f"model={self.model!r:.60}: use fit"
            )
        if self.n_init not in ("auto", 1):
            raise ValueError(f"partial_fit trains one model: n_init must be 1 or 'auto'; "
                             f"got {self.n_init!r}")  # fmt: skip
        if resolve_distributed(self.distributed).active:
            raise ValueError("partial_fit runs on one process: set distributed=False")
        k, fitted = int(self.n_clusters), hasattr(self, "module_")
        if fitted:  # the chunk's width and names against the fit's; nothing is set
            X = self._validate_X(X, reset=False)
            if k != self.n_clusters_:
                raise ValueError(
                    f"n_clusters={k}, but the model being updated has {self.n_clusters_} "
                    "clusters: a stream keeps its K (fit, or partial_fit a clone, to change it)"
                )
            if type(self.module_) is not torch.nn.Linear or self._inputs.layout != "flat":
                raise ValueError(
                    "partial_fit continues the linear head only; this model was fitted with "
                    "another network: fit it again"
                )
            stream = getattr(self, "_stream", None)
            if stream is None or not stream.matches(self.module_):  # continue a fit
                stream = self._stream_of_fit(Moments, Stream, k)
            done = stream.advance(X, self.module_)
            self._set_streamed(done)
            return self
        probe = clone(self)  # validate_data sets n_features_in_: on a copy until the end
        X = probe._validate_X(X, reset=True)
        if len(X) < k:
            raise ValueError(
                f"n_samples={len(X)} should be >= n_clusters={k}: the first chunk of "
                f"partial_fit (all the rows seen so far) holds fewer rows than clusters"
            )
        distinct = n_distinct_rows(X, stop=k)
        if distinct < k:
            raise ValueError(
                f"n_distinct_samples={distinct} should be >= n_clusters={k}: the first chunk "
                "of partial_fit, which starts the K clusters, holds fewer distinct rows than "
                "clusters"
            )
        settings = _defaults.resolve(
            {key: getattr(self, key) for key in _defaults.AUTO_PARAMS},
            self.model, len(X), images=False, n_features=X.shape[1], n_clusters=k,
        )  # fmt: skip
        init = _defaults.check_init(settings["init"], self.init, self.model, k, X)
        init = "kmeans" if isinstance(init, str) and init == "auto-kmeans" else init
        device = resolve_device(self.device)
        cfg = self._config(k, device, (X.shape[1],), settings, 1, len(X))
        seed = int(check_random_state(self.random_state).randint(0, np.iinfo(np.int32).max))

        def make_head(generator, X, inputs):
            return first_head(generator, X, inputs, k, init, seed)

        def whitening(X, inputs):
            return self._whitening(X, k, inputs, seed, True)

        stream = Stream(cfg, Moments.empty(X.shape[1]), seed)
        done = stream.advance(X, None, make_head, whitening if float(self.whiten) > 0 else None)
        self.n_features_in_ = probe.n_features_in_
        for name in ("feature_names_in_", "n_clusters_scores_", "n_clusters_restarts_"):
            self.__dict__.pop(name, None)
        if hasattr(probe, "feature_names_in_"):
            self.feature_names_in_ = probe.feature_names_in_
        self.init_ = self.init if done.init == "array" else done.init
        self._set_streamed(done)
        return self

    def _stream_of_fit(self, Moments, Stream, k):
        """A stream that continues the model of ``fit``: its settings, normalisation (as
        statistics of its training rows), prior and step count; a fresh optimiser."""
        n = len(self.labels_)
        settings = {"optimizer": self.optimizer_, "learning_rate": self.learning_rate_,
                    "weight_decay": self.weight_decay_, "batch_size": self.batch_size_,
                    "augment": None}  # fmt: skip
        cfg = self._config(k, self.device_, self.input_shape_, settings, 1, n)
        seed = int(check_random_state(self.random_state).randint(0, np.iinfo(np.int32).max))
        steps = getattr(self, "n_steps_", self.n_iter_ * -(-n // self.batch_size_))
        moments = Moments.of_inputs(self._inputs, n)
        stream = Stream(cfg, moments, seed, self._inputs.whiten, steps, self.n_iter_)
        if stream.tracker.varies:
            stream.tracker.restore(np.asarray(self.prior_, dtype=np.float64)[None, :])
        return stream

    def _set_streamed(self, done):
        """The fitted attributes after a ``partial_fit`` call (``done``: its
        :class:`skcce._engine._stream.Pass`); plain assignments, none can fail."""
        stream, cfg, inputs = done.stream, done.stream.cfg, done.inputs
        prior = stream.prior()
        self.device_ = cfg.device
        self._inputs = inputs
        self.input_shape_ = (int(inputs.mean.shape[0]),)
        self.module_ = done.module
        self.history_ = [done.history]
        self.n_iter_ = stream.n_passes
        self.n_steps_ = stream.n_steps
        self.labels_ = done.labels
        self.train_score_ = done.score
        self.whitening_ = None if inputs.whiten is None else inputs.whiten.copy()
        self.optimizer_ = cfg.optimizer
        self.learning_rate_ = float(cfg.learning_rate)
        self.weight_decay_ = float(cfg.weight_decay)
        self.batch_size_ = int(cfg.batch_size)
        self.augment_ = None
        self.n_init_ = 1
        self.n_iter_no_change_ = None  # one pass per call
        self.n_clusters_ = int(cfg.n_clusters)
        self.prior_ = np.full(cfg.n_clusters, 1.0 / cfg.n_clusters) if prior is None else prior
        self.restart_agreement_ = np.zeros(1)
        self._stream = stream

    def _thread_count(self):
        """The thread count of ``n_threads`` (None: leave torch's setting alone)."""
        if self.n_threads is not None:
            return self.n_threads
        return 1 if _defaults.is_linear(self.model) else None

    def _fit(self, X, k, checkpoint, solve_threads=1):
        """Fit ``k`` clusters, checkpointing to ``checkpoint`` (None: no checkpoint)."""
        X = self._validate_X(X, reset=True)
        plan = self._plan(X, k, solve_threads)
        callbacks, resume = self._callbacks(X, plan, checkpoint)
        sk = next((c for c in callbacks if isinstance(c, SklearnCallbacks)), None)
        if sk is not None:
            sk.root.call_on_fit_task_begin(estimator=self, X=X)
        restarts = run_restarts(
            X, plan.prepared, plan.cfg, plan.build, plan.seeds, ctx=plan.ctx,
            linear=plan.linear, checkpoint=checkpoint is not None, callbacks=callbacks,
            resume=resume,
        )  # fmt: skip
        best, agreement = choose_restart(restarts.finished, X, plan.prepared.inputs, plan.linear)
        if best is None:  # Ctrl-C before the first completed epoch
            raise KeyboardInterrupt
        # clusters numbered by their first training row (the user's centroids keep their order)
        best = renumbered(best, plan.cfg.n_clusters, plan.build.inits.get(best.run) == "array")
        if sk is not None:
            sk.root.call_on_fit_task_end(estimator=self, X=X)
        if restarts.interrupted:
            self._warn_interrupted(restarts.last, best, plan.n_init, checkpoint)
        self._set_fitted(plan, best, restarts, agreement)
        return self

    def _warn_interrupted(self, result, best, n_init, checkpoint):
        warn(
            f"fit was interrupted (KeyboardInterrupt) after {len(result.history)} completed "
            f"epoch(s) of restart {result.run + 1}/{n_init}; the fitted state is the best of "
            f"the completed work ({len(best.history)} epoch(s) in history_)"
            + (f"; resume with fit and checkpoint={checkpoint!r}" if checkpoint else ""),
            FitInterruptedWarning,
        )

    def _set_fitted(self, plan, best, restarts, agreement):
        """Write the fitted attributes (last: a failure before leaves no half-fitted state).

        ``best`` has its clusters numbered already (:func:`skcce._engine._order.renumbered`).
        """
        labels = best.labels
        self.device_ = plan.cfg.device
        self._inputs = plan.prepared.inputs
        self.input_shape_ = plan.prepared.input_shape
        self.module_ = best.module
        self.history_ = best.history
        self.n_iter_ = len(best.history)
        self.labels_ = labels
        self.train_score_ = best.score
        used = plan.build.inits.get(best.run, "random")  # the kept restart's start
        self.init_ = self.init if used == "array" else used
        whitening = plan.prepared.inputs.whiten
        self.whitening_ = None if whitening is None else whitening.copy()
        settings = plan.settings
        self.optimizer_ = settings["optimizer"]
        self.learning_rate_ = float(settings["learning_rate"])
        self.weight_decay_ = float(settings["weight_decay"])
        self.batch_size_ = int(settings["batch_size"])
        self.n_steps_ = self.n_iter_ * -(-len(labels) // self.batch_size_)  # optimiser steps
        self.augment_ = settings["augment"]
        self.n_init_ = int(plan.n_init)
        self.n_iter_no_change_ = settings["n_iter_no_change"]
        self.n_clusters_ = int(plan.cfg.n_clusters)
        # an earlier "auto" fit's curve
        for name in ("n_clusters_scores_", "n_clusters_restarts_"):
            self.__dict__.pop(name, None)
        diverged = list(restarts.diverged)
        if diverged:
            warn(
                f"{len(diverged)} of {plan.n_init} restarts diverged (the network's "
                f"outputs became non-finite; restarts {diverged[:10]}) and were skipped; "
                "a smaller learning_rate avoids this",
                ConvergenceWarning,
            )
        self.prior_ = (
            np.full(self.n_clusters_, 1.0 / self.n_clusters_) if best.prior is None else best.prior
        )
        self.restart_agreement_ = agreement
        self._warn_small_clusters(plan, restarts.finished)

    def _warn_small_clusters(self, plan, finished):
        """A ConvergenceWarning when the kept restart has an empty or near-empty cluster."""
        k = self.n_clusters_
        empty, near = small_clusters(self.labels_, k, self.prior_)
        if not (empty.size or near.size):
            return
        collapsed = [
            r.run + 1 for r in finished if any(a.size for a in small_clusters(
                r.labels, k, r.prior))
        ]  # fmt: skip
        inits = {plan.build.inits.get(r.run, "random") for r in finished}
        used = {
            "fairness_weight": float(self.fairness_weight),
            "lam": float(self.lam),
            "learning_rate": self.learning_rate_,
            "init": inits.pop() if len(inits) == 1 else "mixed",
            "n_init": self.n_init_,
            "optimizer": self.optimizer_,
            "augment": self.augment_,
            "batch_size": self.batch_size_,
            "n_clusters": k,
            "prior": plan.cfg.prior_kind,
            "near_empty": NEAR_EMPTY,
        }
        message = collapse_message(empty, near, (collapsed, len(finished)), plan.linear, used)
        warn(message, ConvergenceWarning)

    def predict_proba(self, X):
        """Soft cluster assignments: the softmax of the network's logits.

        Parameters
        ----------
        X : array-like of the same kind as in fit.

        Returns
        -------
        proba : ndarray of shape (n_samples, n_clusters)
            float64 rows summing to 1.
        """
        check_is_fitted(self)
        with thread_limit(self._thread_count()):
            return self._predict_proba(X)

    def _checked(self, X):
        """``(X, layout)`` of data to predict: validated, of the fitted sample shape."""
        X = self._validate_X(X, reset=False)
        layout = detect_layout(X, self.model)
        if sample_shape(X, layout) != self.input_shape_:
            raise ValueError(
                f"X has samples of shape {sample_shape(X, layout)}, but "
                f"{type(self).__name__} was fitted on samples of shape {self.input_shape_}"
            )
        return X, layout

    def _predict_proba(self, X):
        X, layout = self._checked(X)
        return infer_proba(self.module_, X, self._inputs, self.device_, layout)

    def predict(self, X):
        """Cluster of each sample (argmax of :meth:`predict_proba`).

        Parameters
        ----------
        X : array-like of the same kind as in fit.

        Returns
        -------
        labels : ndarray of shape (n_samples,)
        """
        check_is_fitted(self)
        with thread_limit(self._thread_count()):
            X, layout = self._checked(X)
            # span by span: no (n_samples, n_clusters) array
            return infer_labels(
                self.module_, X, self._inputs, self.device_, layout, n_clusters=self.n_clusters_
            )[0]

    def score(self, X, y=None):
        r"""Label-free score: mutual information between samples and clusters (nats).

        :math:`I = H(\bar\sigma) - \frac1N\sum_i H(\sigma_i)` over the predictions on X:
        confident predictions that use all clusters score high (at most :math:`\ln K`); a
        collapsed model scores close to 0. It prefers balanced, confident partitions whether
        or not they are right, so it is a weak guide across settings: to choose ``lam``
        without labels, score a search by the restarts' agreement instead
        (``scoring=lambda est, X, y=None: est.restart_agreement_.max()``; docs/user_guide.md,
        "Restarts and choosing λ without labels").

        Parameters
        ----------
        X : array-like of the same kind as in fit.
        y : Ignored

        Returns
        -------
        score : float
        """
        return mutual_information(self.predict_proba(X))

    @classmethod
    def _get_default_params(cls):
        """``{name: default}`` of every parameter of ``__init__``."""
        import inspect

        signature = inspect.signature(cls.__init__)
        return {
            name: p.default for name, p in signature.parameters.items() if name != "self"
        }

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        deep = not _defaults.is_linear(self.model)
        tags.input_tags.allow_nan = False
        tags.input_tags.sparse = False
        if deep:
            tags.input_tags.two_d_array = False
            tags.input_tags.three_d_array = True
        tags.non_deterministic = False
        return tags

    # ----- persistence -------------------------------------------------------------------
    def __getstate__(self):
        state = dict(super().__getstate__())  # a copy: never alter the live estimator
        module = state.get("module_")
        if module is not None:
            buffer = io.BytesIO()
            torch.save(module, buffer)
            state["module_"] = buffer.getvalue()
            state["device_"] = str(self.device_)
        return state

    def __setstate__(self, state):
        module = state.get("module_")
        if isinstance(module, bytes):
            device = loadable_device(state["device_"])  # a GPU-fitted model loads on a CPU
            state["module_"] = torch.load(
                io.BytesIO(module), map_location=device, weights_only=False
            )
            state["device_"] = device
        super().__setstate__(_upgrade_release_state(state))


def _upgrade_release_state(state):
    """The state of a model pickled by the 0.1.0 release in today's parameters: its
    ``solver``, ``solver_tol`` and ``solver_max_iter`` become ``solver_options`` (their
    deprecated aliases ``em_tol`` and ``em_max_iter`` are dropped), and a parameter the
    pickle lacks takes its default."""
    if "solver_options" in state:
        return state
    state = dict(state)
    options = {}
    for old, key in (("solver", "method"), ("solver_tol", "tol"), ("solver_max_iter", "max_iter")):
        value = state.pop(old, _RELEASE_SOLVER_DEFAULTS[key])
        if value != _RELEASE_SOLVER_DEFAULTS[key]:
            options[key] = value
    for old in ("em_tol", "em_max_iter"):
        state.pop(old, None)
    state["solver_options"] = options or None
    for name, default in CCEClustering._get_default_params().items():
        state.setdefault(name, default)  # a parameter added since: its default
    if "module_" in state:  # fitted before n_clusters_ existed: an integer n_clusters
        state.setdefault("n_clusters_", state["n_clusters"])
    return state
