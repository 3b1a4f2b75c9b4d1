"""CCEClustering: the scikit-learn estimator (parameters, validation, fit/predict/score)."""

from __future__ import annotations

import io
import os
import warnings
from numbers import Integral, Real

import numpy as np
import torch
from scipy.special import xlogy
from sklearn.base import BaseEstimator, ClusterMixin, _fit_context
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_array, check_is_fitted, validate_data

from skcce import _checkpoint, _defaults
from skcce._distributed import local_device
from skcce._distributed import resolve as resolve_distributed
from skcce._training import (
    FitInterruptedWarning,
    TrainConfig,
    TrainingInterrupted,
    fit_inputs,
    predict_proba,
    train,
)
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


def resolve_device(device) -> torch.device:
    """Turn "auto" or any torch device string into a usable torch.device (clear errors)."""
    if isinstance(device, torch.device):
        dev = device
    elif device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    else:
        try:
            dev = torch.device(device)
        except (RuntimeError, TypeError) as exc:
            raise ValueError(f"device={device!r} is not a valid torch device string") from exc
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(
            f"device={device!r} was requested but CUDA is not available on this machine; "
            "use device='auto' or 'cpu'"
        )
    if dev.type == "mps" and not torch.backends.mps.is_available():
        raise ValueError(f"device={device!r} was requested but MPS is not available")
    return dev


def _layout(X: np.ndarray, model) -> str:
    if X.ndim == 2:
        if isinstance(model, str) and model != "linear":
            raise ValueError(
                f"model={model!r} takes images: X must have shape (N, H, W), (N, H, W, C) or "
                f"(N, C, H, W); got a 2-D array of shape {X.shape}"
            )
        return "flat"
    if isinstance(model, str) and model == "linear":
        raise ValueError(
            f"model='linear' needs a 2-D array (n_samples, n_features); got shape {X.shape}. "
            "Flatten the samples (X.reshape(len(X), -1)) or use an image model such as 'vgg4'"
        )
    if X.ndim == 3:
        return "nhw"
    if X.ndim == 4:
        if X.dtype == np.uint8 and X.shape[-1] in (1, 3):
            return "nhwc"
        if X.shape[1] in (1, 3):
            return "nchw"
        if X.shape[-1] in (1, 3):
            raise ValueError(
                f"float images must be channels-first (N, C, H, W); got shape {X.shape}. "
                "Transpose with X.transpose(0, 3, 1, 2), or pass uint8 (N, H, W, C) images"
            )
        raise ValueError(f"cannot read images of shape {X.shape}: expected 1 or 3 channels")
    raise ValueError(f"X must be 2-D features or 3-D/4-D images; got {X.ndim}-D shape {X.shape}")


def _input_shape(X, layout):
    if layout == "flat":
        return (X.shape[1],)
    if layout == "nhw":
        return (1, X.shape[1], X.shape[2])
    if layout == "nhwc":
        return (X.shape[3], X.shape[1], X.shape[2])
    return tuple(X.shape[1:])


def mutual_information(proba: np.ndarray) -> float:
    r"""Label-free clustering score :math:`I = H(\bar\sigma) - \frac1N \sum_i H(\sigma_i)` (nats).

    The mutual information between a sample and its cluster under the model's soft
    assignments: high when the predictions are confident (small :math:`H(\sigma_i)`) and the
    clusters are used evenly (large :math:`H(\bar\sigma)`). A collapsed model has
    :math:`I \approx 0`; the maximum is :math:`\ln K`.
    """
    n = proba.shape[0]
    col = np.zeros(proba.shape[1])
    h_rows = 0.0
    for start in range(0, n, 65536):  # chunks: no (N, K) temporaries beside proba
        block = proba[start : start + 65536]
        col += block.sum(axis=0)
        h_rows -= float(xlogy(block, block).sum())  # 0 log 0 = 0
    mean = col / n
    h_mean = -float(xlogy(mean, mean).sum())
    return float(h_mean - h_rows / n)


class CCEClustering(ClusterMixin, CallbackSupportMixin, BaseEstimator):
    r"""Self-labeled clustering with the collision cross-entropy (Zhang & Boykov).

    Trains a clustering network (a linear head by default) by the self-labeling loop of the
    supplement's Algorithm 1: for every mini-batch, the soft pseudo-labels ``Y`` are solved
    exactly for the batch objective

    .. math::  \sum_i H_2(y_i, \sigma_i) + \lambda\, KL(u \| \bar y)

    (:func:`skcce.solvers.solve_pseudo_labels`; :math:`H_2(y,\sigma) = -\ln y^\top\sigma`),
    then one optimiser step is taken on the network loss
    :math:`\overline{H_2(y, \sigma)} + w_f\, KL(u \| \bar\sigma)`.

    Parameters
    ----------
    n_clusters : int, default=10
        Number of clusters K.
    lam : float, default=100.0
        Fairness weight λ of the pseudo-label step, in the summed-rows convention of
        :mod:`skcce.losses` (the paper's λ = 100 with batches of 250; the averaged-loss
        equivalent is ``lam / batch_size``).
    fairness : {"reverse", "forward"}, default="reverse"
        ``"reverse"``: :math:`KL(u\|\bar y)`, the paper's strong fairness (loss (b));
        ``"forward"``: :math:`KL(\bar y\|u)` (loss (a)).
    loss : {"collision", "shannon", "reverse"}, default="collision"
        Cross-entropy used in both steps: collision :math:`H_2(y,\sigma)`; Shannon
        :math:`H(y,\sigma)` and reverse :math:`H(\sigma,y)` for the paper's comparisons.
    prior : array-like of shape (n_clusters,), default=None
        Class prior ``u`` of the fairness terms; uniform when None.
    fairness_weight : float, default=1.3
        Weight :math:`w_f` of the fairness term on the mean prediction in the network loss
        (supplement 4.2: "1.3 as the weight of fairness term"). 0 gives the bare Algorithm 1.
    model : {"linear", "vgg4", "resnet18"}, torch.nn.Module or callable, default="linear"
        The network: a linear head on 2-D features, the supplement's VGG-4 or a ResNet-18 on
        images, a module mapping a batch to K logits, or a factory
        ``f(input_shape, n_clusters) -> nn.Module``.
    init : {"auto", "random", "kmeans"} or array-like of shape (n_clusters, n_features), \
            default="auto"
        Initial linear head. ``"random"``: Kaiming-normal weights, zero bias (supplement
        4.2). ``"kmeans"``: k-means++ seeds and at most 10 Lloyd iterations on a random
        subsample (5000 rows, at least 100 a cluster) in the normalised input space,
        then weights :math:`s c_k` and biases :math:`-s\|c_k\|^2/2`, so that the softmax
        starts as the soft KMeans
        assignment (:mod:`skcce.models._kmeans_init`); every restart draws its own
        subsample and seeds. An array: these centroids, in the units of X. ``"auto"``:
        for the linear head, restarts alternate between ``"random"`` (the first, so a
        single restart is the random head) and ``"kmeans"``, and the label-free score picks
        (all ``"random"`` when X holds fewer distinct rows than clusters); ``"random"`` for
        every other model. The measurements behind this choice are in docs/benchmarks.md
        (``bench_embeddings``, ``bench_vs_kmeans``). ``"kmeans"`` or an array
        with a non-linear model is a ``ValueError``.
    optimizer : {"auto", "sgd", "adam"}, default="auto"
        Optimiser of the network step. ``"auto"``: ``"sgd"`` for the linear head,
        ``"adam"`` for every other model (the table under "Model-aware defaults" in the
        user guide gives every ``"auto"`` value).
    learning_rate : float or "auto", default="auto"
        Learning rate (of the head, when ``backbone_learning_rate`` is set). ``"auto"``:
        0.5 for the linear head (the supplement uses 0.1 on ResNet-50 features; on our
        normalised inputs 0.5 was better on digits with no loss of quality on
        Fashion-MNIST, docs/user_guide.md, "Defaults"), 3e-4 for every other model.
    backbone_learning_rate : float, default=None
        Separate learning rate of a pretrained backbone (supplement Table 4: 1e-5).
    weight_decay : float or "auto", default="auto"
        L2 weight decay of the optimiser. ``"auto"``: 0.1 for the linear head (supplement
        4.2: 0.001-0.02 on ResNet-50 features; a stronger decay was the largest single
        improvement on raw digits pixels, docs/user_guide.md, "Defaults"), 0.01 for every
        other model (supplement Table 2).
    batch_size : int or "auto", default="auto"
        Mini-batch size; the pseudo-labels are solved per batch. ``"auto"``: 250 for the
        linear head, 100 for every other model.
    max_epochs : int, default=10
        Passes over the data.
    em_tol : float, default=1e-5
        Relative certified duality gap at which the pseudo-label solver stops.
    em_max_iter : int, default=100
        Iteration cap of the pseudo-label solver per batch.
    solver : str, default="auto"
        ``method`` of :func:`skcce.solvers.solve_pseudo_labels` used for the pseudo-labels
        ("auto" picks the exact solver suited to ``loss`` and ``fairness``).
    augment : "auto", None, "default" or callable, default="auto"
        Augmentation consistency (supplement Table 4): a callable mapping a float batch
        (B, C, H, W) in image space (uint8 images scaled to [0, 1], before normalisation) to
        an augmented batch; "default" uses :func:`skcce.models.default_augmentation`.
        ``"auto"``: None for the linear head and for models on 2-D features, "default" for
        image models (None, with a warning, when torchvision is not installed).
    augment_weight : float, default=0.5
        Weight of the extra cross-entropy between the augmented view and the pseudo-label.
    n_init : int or "auto", default="auto"
        Independent restarts; the one with the fewest empty clusters and, among those, the
        highest :meth:`score` on the training data (label-free mutual information) is
        kept. "auto": for the linear head, 10 restarts when ``n_samples < 10_000`` (small
        data: restarts are cheap and a single linear head is sensitive to its
        initialisation) and 1 otherwise (large data: one run is already well above KMeans
        on Fashion-MNIST and keeps the fit within KMeans(n_init=10)'s time; see
        docs/benchmarks.md); 1 when ``init`` is an array, and 1 for every other model (a
        restart is a whole network training).
    device : str, default="auto"
        "auto" (CUDA when available, else CPU) or any torch device string.
    amp : bool, default=False
        Run the network's forward passes under bfloat16 autocast on CUDA (ignored on other
        devices); the pseudo-labels are always solved in float64.
    distributed : "auto" or bool, default="auto"
        Data-parallel training over ``torch.distributed`` (launch with ``torchrun``; see
        docs/distributed.md). "auto": when a process group with more than one rank is
        initialised, the network is wrapped in ``DistributedDataParallel``, ``batch_size``
        is the *global* batch, each rank trains on its shard of every global batch and the
        pseudo-labels are solved exactly for the global batch (equal to those of one
        process); CUDA devices are taken per ``LOCAL_RANK``. ``False``: every process fits
        on its own (e.g. independent fits inside a distributed job). ``True``: like "auto",
        but an error when no process group is initialised. Every rank must call ``fit``
        with the same data and parameters; every rank ends with the same fitted state.
    checkpoint : str, path-like or None, default=None
        File that ``fit`` writes at the end of every epoch (model, optimiser, generator
        state, epoch, restart, history; atomically: temporary file, fsync, rename; under
        data parallelism rank 0 writes it). When the file exists, ``fit`` resumes from it
        and reaches the same model as an uninterrupted run; a checkpoint of a finished fit
        is loaded without training. A checkpoint written with other settings or other data
        raises ``skcce._checkpoint.CheckpointMismatchError`` (a ``ValueError``) naming the
        differences: delete it, or pass another path, to start afresh.
    random_state : int, RandomState instance or None, default=None
        Seeds initialisation, shuffling and restarts through a local ``torch.Generator``
        (no global seeding). Under data parallelism rank 0's seeds are broadcast.
    verbose : int, default=0
        Show a tqdm progress bar when > 0 (on rank 0 only).

    Attributes
    ----------
    labels_ : ndarray of shape (n_samples,)
        Cluster of each training sample.
    n_iter_ : int
        Epochs run by the kept restart.
    history_ : list of dict
        Per epoch: ``loss``, ``fairness``, ``cluster_sizes``, ``solver_iter``,
        ``solver_unconverged``, ``time``.
    module_ : torch.nn.Module
        The trained network (on the training device).
    n_features_in_ : int
        Number of features (second dimension of X) seen in fit.
    input_shape_ : tuple of int
        Shape of one sample as the network sees it.
    device_ : torch.device
        Device the network was trained on.
    init_ : {"random", "kmeans"} or ndarray
        The initialisation used (``init`` with "auto" resolved; the user's array as given).
    optimizer_ : {"sgd", "adam"}
        The optimiser used (``optimizer`` with "auto" resolved).
    learning_rate_ : float
        The learning rate used.
    weight_decay_ : float
        The weight decay used.
    batch_size_ : int
        The mini-batch size used.
    augment_ : None, "default" or callable
        The augmentation used.
    n_init_ : int
        The number of restarts run.
    train_score_ : float
        Label-free score (:meth:`score`) of the kept restart on the training data.

    See Also
    --------
    sklearn.cluster.KMeans : Centroid clustering.
    skcce.FeatureExtractor : Frozen timm features for images.

    Notes
    -----
    **Interruption.** Ctrl-C (KeyboardInterrupt) during ``fit`` stops at the end of the
    last completed epoch: the fitted attributes describe that state (the best of the
    finished restarts and the interrupted one), ``history_`` lists its completed epochs,
    and a ``FitInterruptedWarning`` says how many epochs completed. With no completed
    epoch, or under data parallelism (resume from ``checkpoint`` instead), the
    KeyboardInterrupt propagates.

    **Parallel search.** ``GridSearchCV(..., n_jobs=k)`` runs fits in joblib's loky worker
    processes, which start with ``OMP_NUM_THREADS = max(1, cores // k)``; torch takes its
    intra-op thread count from it, so k workers do not oversubscribe the cores
    (docs/distributed.md).

    Input normalisation is part of the estimator: 2-D features are centred per feature and
    divided by one global standard deviation (the relative geometry of the features is
    kept); images get per-channel mean/std normalisation (uint8 images are scaled to [0, 1]
    first). Both are fitted in ``fit`` and reused in ``predict``.

    References
    ----------
    Z. Zhang and Y. Boykov, "Collision Cross-entropy for Soft Class Labels and Deep
    Clustering", arXiv:2303.07321.

    Examples
    --------
    >>> from sklearn.datasets import load_digits
    >>> from skcce import CCEClustering
    >>> X, y = load_digits(return_X_y=True)
    >>> cce = CCEClustering(n_clusters=10, random_state=0).fit(X)
    >>> cce.labels_.shape
    (1797,)
    >>> proba = cce.predict_proba(X[:3])
    >>> proba.shape
    (3, 10)
    """

    _parameter_constraints: dict = {
        "n_clusters": [Interval(Integral, 1, None, closed="left")],
        "lam": [Interval(Real, 0, None, closed="left")],
        "fairness": [StrOptions({"reverse", "forward"})],
        "loss": [StrOptions({"collision", "shannon", "reverse"})],
        "prior": ["array-like", None],
        "fairness_weight": [Interval(Real, 0, None, closed="left")],
        "model": [StrOptions(set(_MODEL_NAMES)), torch.nn.Module, callable],
        "init": [StrOptions({"auto", "random", "kmeans"}), "array-like"],
        "optimizer": [StrOptions({"auto", "sgd", "adam"})],
        "learning_rate": [Interval(Real, 0, None, closed="neither"), StrOptions({"auto"})],
        "backbone_learning_rate": [Interval(Real, 0, None, closed="left"), None],
        "weight_decay": [Interval(Real, 0, None, closed="left"), StrOptions({"auto"})],
        "batch_size": [Interval(Integral, 1, None, closed="left"), StrOptions({"auto"})],
        "max_epochs": [Interval(Integral, 1, None, closed="left")],
        "em_tol": [Interval(Real, 0, None, closed="neither")],
        "em_max_iter": [Interval(Integral, 1, None, closed="left")],
        "solver": [StrOptions(set(SOLVER_METHODS))],
        "augment": [None, StrOptions({"auto", "default"}), callable],
        "augment_weight": [Interval(Real, 0, None, closed="left")],
        "n_init": [Interval(Integral, 1, None, closed="left"), StrOptions({"auto"})],
        "device": [str, torch.device],
        "amp": ["boolean"],
        "distributed": [StrOptions({"auto"}), "boolean"],
        "checkpoint": [str, os.PathLike, None],
        "random_state": ["random_state"],
        "verbose": ["verbose"],
    }

    def __init__(
        self,
        n_clusters=10,
        *,
        lam=100.0,
        fairness="reverse",
        loss="collision",
        prior=None,
        fairness_weight=1.3,
        model="linear",
        init="auto",
        optimizer="auto",
        learning_rate="auto",
        backbone_learning_rate=None,
        weight_decay="auto",
        batch_size="auto",
        max_epochs=10,
        em_tol=1e-5,
        em_max_iter=100,
        solver="auto",
        augment="auto",
        augment_weight=0.5,
        n_init="auto",
        device="auto",
        amp=False,
        distributed="auto",
        checkpoint=None,
        random_state=None,
        verbose=0,
    ):
        self.n_clusters = n_clusters
        self.lam = lam
        self.fairness = fairness
        self.loss = loss
        self.prior = prior
        self.fairness_weight = fairness_weight
        self.model = model
        self.init = init
        self.optimizer = optimizer
        self.learning_rate = learning_rate
        self.backbone_learning_rate = backbone_learning_rate
        self.weight_decay = weight_decay
        self.batch_size = batch_size
        self.max_epochs = max_epochs
        self.em_tol = em_tol
        self.em_max_iter = em_max_iter
        self.solver = solver
        self.augment = augment
        self.augment_weight = augment_weight
        self.n_init = n_init
        self.device = device
        self.amp = amp
        self.distributed = distributed
        self.checkpoint = checkpoint
        self.random_state = random_state
        self.verbose = verbose

    # ----- validation ---------------------------------------------------------------------
    def _validate_X(self, X, reset):
        """Checked X, without copying an array that is already usable (float32 or float64
        features; uint8 or float images): batches are cut from it during fit and predict."""
        deep = not (isinstance(self.model, str) and self.model == "linear")
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

    def _check_prior(self):
        if self.prior is None:
            return None
        prior = np.asarray(self.prior, dtype=np.float64)
        if prior.shape != (self.n_clusters,):
            raise ValueError(
                f"prior must have shape ({self.n_clusters},) (n_clusters); got {prior.shape}"
            )
        if not np.isfinite(prior).all() or (prior < 0).any() or abs(prior.sum() - 1) > 1e-6:
            raise ValueError("prior must be a probability vector (non-negative, summing to 1)")
        zeros = np.flatnonzero(prior == 0)
        if zeros.size and self.fairness == "forward" and self.fairness_weight > 0:
            raise ValueError(
                f"prior is 0 for clusters {zeros.tolist()[:10]}, but fairness='forward' "
                "puts KL(mean prediction || prior) in the network loss, which is infinite "
                "there (a softmax is never exactly 0); use fairness='reverse' (KL(prior || .) "
                "allows zeros), fairness_weight=0, or a prior without zeros"
            )
        return prior

    # ----- issue 12: the initial head (skcce.models._kmeans_init) ----------------------------
    def _check_init(self, init, X):
        """The resolved ``init``: "random", "kmeans" (or "auto-kmeans" when it came from
        "auto") or the user's centroids as a validated float64 array."""
        if isinstance(init, str) and init == "random":
            return init
        if _defaults.regime(self.model) != "linear":
            raise ValueError(
                f"init={self.init!r:.40} initialises the linear head only; model="
                f"{self.model!r:.40} starts from its own random initialisation: use "
                "init='auto' or init='random'"
            )
        if isinstance(init, str):
            return "auto-kmeans" if isinstance(self.init, str) and self.init == "auto" else init
        from skcce.models._kmeans_init import check_centroids

        return check_centroids(init, self.n_clusters, X.shape[1])

    def _init_head(self, module, X, inputs, init, seed, ctx, device):
        """Set the linear head to the soft KMeans assignment of the restart's centroids;
        returns the init used ("kmeans", "random" when "auto" fell back, or "array")."""
        from skcce.models._kmeans_init import head_from_centroids_, initial_centroids

        cpu = torch.device("cpu")
        explicit = not (isinstance(init, str) and init == "auto-kmeans")
        if isinstance(init, str):
            init = "kmeans"
        else:  # user centroids, in the normalised input space
            init = inputs.raw(init, slice(None), cpu).double().numpy()
        result = initial_centroids(
            lambda idx: inputs.raw(X, idx, cpu).numpy(),
            X.shape[0],
            self.n_clusters,
            init,
            seed,
            explicit=explicit,
        )
        result = ctx.broadcast(result, device)  # every rank starts from rank 0's head
        if result is None:
            return "random"
        head_from_centroids_(module, *result)
        return "kmeans" if isinstance(init, str) else "array"

    def _augment_fn(self, augment, input_shape):
        if augment is None:
            return None
        if isinstance(augment, str):
            from skcce.models import default_augmentation

            aug = default_augmentation(input_shape)
            return lambda x, generator: aug(x, generator=generator)
        user = augment
        return lambda x, generator: user(x)

    def _config(self, device, input_shape, settings):
        """TrainConfig from the parameters, with the "auto" ones taken from ``settings``."""
        return TrainConfig(
            n_clusters=self.n_clusters,
            lam=float(self.lam),
            fairness=self.fairness,
            loss=self.loss,
            prior=self._check_prior(),
            fairness_weight=float(self.fairness_weight),
            optimizer=settings["optimizer"],
            learning_rate=float(settings["learning_rate"]),
            backbone_learning_rate=self.backbone_learning_rate,
            weight_decay=float(settings["weight_decay"]),
            batch_size=int(settings["batch_size"]),
            max_epochs=int(self.max_epochs),
            em_tol=float(self.em_tol),
            em_max_iter=int(self.em_max_iter),
            solver=resolve_method(self.solver, self.loss, self.fairness),
            augment=self._augment_fn(settings["augment"], input_shape),
            augment_weight=float(self.augment_weight),
            device=device,
            amp=bool(self.amp) and device.type == "cuda",
            verbose=int(self.verbose),
        )

    def _build(self, input_shape, generator):
        from skcce.models import build_model

        model = self.model
        if isinstance(model, torch.nn.Module):
            import copy

            model = copy.deepcopy(model)  # never train the user's own object in place
        return build_model(model, input_shape, self.n_clusters, generator=generator)

    def _checkpointing(self, X, inputs, ctx, device, n_init, seeds):
        """``(resume state or None, Saver or None)`` for the ``checkpoint`` parameter.

        Rank 0 reads the file and checks that it belongs to this fit (settings, data, world
        size); its verdict is broadcast, so only rank 0 needs to see the file.
        """
        if self.checkpoint is None:
            return None, None
        ignored = {"verbose", "checkpoint", "device", "distributed", "n_init", "random_state"}
        settings = {
            key: _checkpoint.describe(value)
            for key, value in self.get_params(deep=False).items()
            if key not in ignored
        }
        settings["n_init"] = int(n_init)
        seed = self.random_state
        settings["random_state"] = (
            seed if seed is None or isinstance(seed, Integral) else ("RandomState instance")
        )
        fingerprint = _checkpoint.fingerprint(settings, X, inputs, ctx.world_size)
        state = error = None
        if ctx.is_main:
            try:
                state = _checkpoint.load(self.checkpoint)
                if state is not None:
                    _checkpoint.check(self.checkpoint, state["fingerprint"], fingerprint)
            except _checkpoint.CheckpointMismatchError as exc:
                state, error = None, exc
        state, error = ctx.broadcast((state, error), device)
        if error is not None:
            raise error
        seeds = seeds if state is None else state["seeds"]
        return state, _checkpoint.Saver(self.checkpoint, fingerprint, seeds, ctx.is_main)

    def _proba(self, module, X, inputs, device, ctx):
        """predict_proba on the training data; under data parallelism each rank predicts its
        contiguous shard and the shards are gathered, so every rank holds the same array."""
        if not ctx.active:
            return predict_proba(module, X, inputs, device)
        b = ctx.bounds(X.shape[0])
        lo, hi = int(b[ctx.rank]), int(b[ctx.rank + 1])
        local = np.zeros((0, self.n_clusters))
        if hi > lo:
            local = predict_proba(module, X[lo:hi], inputs, device)
        full = ctx.gather_rows(torch.as_tensor(local, device=device), X.shape[0])
        return full.cpu().numpy()

    # ----- fit / predict -----------------------------------------------------------------
    def _callback_hooks(self, n_tasks):
        """Root context of scikit-learn's callback API (>= 1.9) and per-epoch hooks, or None."""
        if not hasattr(self, "_init_callback_context"):
            return None, None
        ctx = self._init_callback_context(max_subtasks=n_tasks)
        state = {}

        def on_epoch(event, epoch):
            if event == "begin":
                state["sub"] = ctx.subcontext(task_name="epoch")
                state["sub"].call_on_fit_task_begin(estimator=self)
            else:
                state.pop("sub").call_on_fit_task_end(estimator=self)

        return ctx, on_epoch

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
        X = self._validate_X(X, reset=True)
        n = X.shape[0]
        if n < self.n_clusters:
            raise ValueError(
                f"n_samples={n} should be >= n_clusters={self.n_clusters}: there are fewer "
                "samples than clusters"
            )
        ctx = resolve_distributed(self.distributed)
        device = local_device(resolve_device(self.device), ctx)
        layout = _layout(X, self.model)
        input_shape = _input_shape(X, layout)
        inputs = fit_inputs(X, layout)
        # issue 12: every "auto" setting resolved from the model (skcce._defaults)
        settings = _defaults.resolve(
            {key: getattr(self, key) for key in _defaults.AUTO_PARAMS},
            self.model,
            n,
            images=layout != "flat",
        )
        init = self._check_init(settings["init"], X)
        inits = {}  # issue 12: the init of each restart
        diverged = []  # issue 12: restarts skipped because their outputs became non-finite
        cfg = self._config(device, input_shape, settings)
        rng = check_random_state(self.random_state)
        n_init = settings["n_init"]
        seeds = rng.randint(0, np.iinfo(np.int32).max, size=n_init)
        seeds = ctx.broadcast(seeds, device)  # the same restarts on every rank, unseeded too
        resume, save = self._checkpointing(X, inputs, ctx, device, n_init, seeds)
        if resume is not None:
            seeds = resume["seeds"]
        ctx_cb, on_epoch = self._callback_hooks(n_init * cfg.max_epochs)
        if ctx_cb is not None:
            ctx_cb.call_on_fit_task_begin(estimator=self, X=X)
        best = None  # (score, module, history, proba, run)
        first_run = 0
        if resume is not None:
            first_run = resume["run"]
            if resume["best"] is not None:
                score, weights, history, run = resume["best"]
                module = self._build(input_shape, torch.Generator().manual_seed(int(seeds[run])))
                module.load_state_dict(weights)
                module.to(device)
                best = (score, module, history, self._proba(module, X, inputs, device, ctx), run)
        interrupted = None
        for run in range(first_run, n_init):
            generator = torch.Generator().manual_seed(int(seeds[run]))
            module = self._build(input_shape, generator)
            inits[run] = _defaults.restart_init(init, run)  # issue 12: the head's start
            if inits[run] != "random":
                inits[run] = self._init_head(module, X, inputs, init, int(seeds[run]), ctx, device)
                if inits[run] == "random":  # "auto" on too few distinct rows: random heads
                    init = "random"
            start = None
            if resume is not None and run == resume["run"] and resume["epoch"] > 0:
                module.load_state_dict(resume["module"])
                generator.set_state(resume["generator"])
                start = resume
            desc = f"fit {run + 1}/{n_init}" if n_init > 1 else "fit"
            try:
                history = train(
                    module,
                    X,
                    inputs,
                    cfg,
                    generator,
                    desc=desc,
                    on_epoch=on_epoch,
                    ctx=ctx,
                    start=start,
                    on_epoch_end=save and save.epoch(run, best),
                )
            except KeyboardInterrupt as exc:
                # one process: keep the completed work (train restored the module to the
                # end of its last completed epoch); nothing completed, or several ranks:
                # propagate (the checkpoint holds the last epoch)
                if ctx.active or (best is None and not isinstance(exc, TrainingInterrupted)):
                    raise
                history = getattr(exc, "history", [])
                interrupted = (run, len(history))
            except FloatingPointError:
                # issue 12: with several restarts (one process, no checkpoint) a restart
                # that diverged is skipped; the others decide
                if n_init == 1 or ctx.active or save or run + 1 == n_init and best is None:
                    raise
                diverged.append(run)
                continue
            if history:
                proba = self._proba(module, X, inputs, device, ctx)
                score = mutual_information(proba)
                # issue 12: a restart with an empty cluster never beats one without
                if best is None or self._rank(score, proba) > self._rank(best[0], best[3]):
                    best = (score, module, history, proba, run)
            if interrupted is not None:
                if best is None:
                    raise KeyboardInterrupt
                break
            if save:
                save.restart(run + 1, best, complete=run + 1 == n_init)
        score, module, history, proba, best_run = best
        labels = proba.argmax(axis=1)
        if ctx_cb is not None:
            ctx_cb.call_on_fit_task_end(estimator=self, X=X)
        if interrupted is not None:
            run, epochs = interrupted
            warnings.warn(
                f"fit was interrupted (KeyboardInterrupt) after {epochs} completed epoch(s) "
                f"of restart {run + 1}/{n_init}; the fitted state is the best of the "
                f"completed work ({len(history)} epoch(s) in history_)"
                + (f"; resume with fit and checkpoint={self.checkpoint!r}" if save else ""),
                FitInterruptedWarning,
                stacklevel=2,
            )
        # fitted attributes, written last: a failure above leaves no half-fitted state
        self.device_ = device
        self._inputs = inputs
        self.input_shape_ = input_shape
        self.module_ = module
        self.history_ = history
        self.n_iter_ = len(history)
        self.labels_ = labels
        self.train_score_ = score
        # issue 12: the settings actually used ("auto" resolved)
        used = inits.get(best_run, _defaults.restart_init(init, best_run))
        self.init_ = self.init if used == "array" else used
        self.optimizer_ = settings["optimizer"]
        self.learning_rate_ = float(settings["learning_rate"])
        self.weight_decay_ = float(settings["weight_decay"])
        self.batch_size_ = int(settings["batch_size"])
        self.augment_ = settings["augment"]
        self.n_init_ = int(n_init)
        if diverged:
            warnings.warn(
                f"{len(diverged)} of {n_init} restarts diverged (the network's outputs became "
                f"non-finite; restarts {diverged[:10]}) and were skipped; a smaller "
                "learning_rate avoids this",
                ConvergenceWarning,
                stacklevel=2,
            )
        empty = self._empty_clusters(labels)
        if empty.size:
            warnings.warn(self._collapse_message(empty), ConvergenceWarning, stacklevel=2)
        return self

    def _empty_clusters(self, labels):
        """Clusters without a sample (those of zero prior are meant to stay empty)."""
        empty = np.setdiff1d(np.arange(self.n_clusters), labels)
        prior = self._check_prior()
        if prior is not None:
            empty = empty[prior[empty] > 0]
        return empty

    def _rank(self, score, proba):
        """Restart order: fewer empty clusters first, then the label-free score."""
        return (-self._empty_clusters(proba.argmax(axis=1)).size, score)

    def _collapse_message(self, empty):
        """The ConvergenceWarning of a fit whose every restart ended with an empty cluster."""
        every = (
            f"every one of the {self.n_init_} restarts ended with an empty cluster"
            if self.n_init_ > 1
            else "the restart ended with an empty cluster"
        )
        augment = self.augment_
        if not (augment is None or isinstance(augment, str)):
            augment = "callable"
        now = (
            f"fairness_weight={self.fairness_weight}, lam={self.lam}, "
            f"learning_rate={self.learning_rate_:g}, optimizer={self.optimizer_!r}, "
            f"init={self.init_ if isinstance(self.init_, str) else 'array'!r}, "
            f"augment={augment!r}"
        )
        if _defaults.regime(self.model) == "linear":
            advice = (
                "a larger fairness_weight or lam, init='kmeans', a smaller learning_rate, "
                "or more restarts (n_init)"
            )
        else:
            advice = (
                "optimizer='adam' with a smaller learning_rate (e.g. 1e-4), augment='default', "
                "a larger fairness_weight or lam, or a larger batch_size"
            )
        return (
            f"{empty.size} of {self.n_clusters} clusters are empty after fit (clusters "
            f"{empty.tolist()[:10]}): {every}. This fit used {now}; try {advice}"
        )

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
        X = self._validate_X(X, reset=False)
        layout = _layout(X, self.model)
        if _input_shape(X, layout) != self.input_shape_:
            raise ValueError(
                f"X has samples of shape {_input_shape(X, layout)}, but "
                f"{type(self).__name__} was fitted on samples of shape {self.input_shape_}"
            )
        return predict_proba(self.module_, X, self._inputs, self.device_, layout)

    def predict(self, X):
        """Cluster of each sample (argmax of :meth:`predict_proba`).

        Parameters
        ----------
        X : array-like of the same kind as in fit.

        Returns
        -------
        labels : ndarray of shape (n_samples,)
        """
        return self.predict_proba(X).argmax(axis=1)

    def score(self, X, y=None):
        r"""Label-free score: mutual information between samples and clusters (nats).

        :math:`I = H(\bar\sigma) - \frac1N\sum_i H(\sigma_i)` over the predictions on X. It
        does not depend on λ, so ``GridSearchCV(CCEClustering(), {"lam": [...]})`` compares
        settings without labels: confident predictions that use all clusters score high
        (at most :math:`\ln K`); a collapsed model scores close to 0.

        Parameters
        ----------
        X : array-like of the same kind as in fit.
        y : Ignored

        Returns
        -------
        score : float
        """
        return mutual_information(self.predict_proba(X))

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        deep = not (isinstance(self.model, str) and self.model == "linear")
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
            device = torch.device(state["device_"])
            if device.type == "cuda" and not torch.cuda.is_available():
                device = torch.device("cpu")  # a CUDA-fitted model loads on a CPU machine
            state["module_"] = torch.load(
                io.BytesIO(module), map_location=device, weights_only=False
            )
            state["device_"] = device
        super().__setstate__(state)
