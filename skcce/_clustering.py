"""CCEClustering: the scikit-learn estimator (parameters, validation, fit/predict/score)."""

from __future__ import annotations

import io
import os
from dataclasses import dataclass, replace
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
from skcce._engine._inference import infer_proba
from skcce._engine._order import first_appearance, renumber_
from skcce._engine._preprocess import Prepared, detect_layout, prepare, sample_shape
from skcce._engine._restarts import run_restarts
from skcce._engine._select import choose_restart
from skcce._engine._threads import thread_limit
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
_SOLVER_DEFAULTS = {"method": "auto", "tol": 1e-5, "max_iter": 100}


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
    supplement's Algorithm 1: for every mini-batch, the soft pseudo-labels ``Y`` are solved
    exactly for the batch objective

    .. math::  \sum_i H_2(y_i, \sigma_i) + \lambda\, KL(u \| \bar y)

    (:func:`skcce.solvers.solve_pseudo_labels`; :math:`H_2(y,\sigma) = -\ln y^\top\sigma`),
    then one optimiser step is taken on the network loss
    :math:`\overline{H_2(y, \sigma)} + w_f\, KL(u \| \bar\sigma)`.

    Parameters
    ----------
    n_clusters : int or "auto", default=10
        Number of clusters K. ``"auto"``: chosen from the data, among ``n_clusters_range``
        (one fit per K, each with 10 restarts for the linear head and 3 for a deep model
        with ``n_init="auto"``; the K whose kept partition is the most reproducible across
        restarts and the most confident, see ``n_clusters_scores_``). The candidates train
        for half of ``max_epochs`` (at least 40 optimiser steps; the whole training on data
        of a few batches), then the chosen K is fitted with the whole training as a direct
        fit with these parameters; the cost is measured in docs/benchmarks.md
        (``bench_select_k``). Above 5 000 samples the candidates are fitted on a random
        sample of 5 000 rows (drawn with ``random_state``) and the chosen K on all the rows.
        On a long range (the default's 19 K) every K is first screened with 4 restarts and
        only the 4 best are fitted with all of theirs (``skcce._n_clusters.screening``).
    n_clusters_range : tuple of (int, int), default=(2, 20)
        The smallest and largest K that ``n_clusters="auto"`` tries (ignored for an integer
        ``n_clusters``; like ``ngram_range`` and ``feature_range`` elsewhere in scikit-learn,
        one parameter holds both ends). The upper end is clipped to the number of distinct
        samples. With a lower end of 1, K = 1 is the answer when no K shows structure;
        otherwise a :class:`~skcce.NoStructureWarning` says so.
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
    prior : "auto", "estimate", None or array-like of shape (n_clusters,), default="auto"
        Class prior ``u`` of the fairness terms (the cluster proportions they pull
        towards). None: uniform, the paper's balanced clusters. ``"estimate"``: the
        proportions are estimated during training (an online mean of the pseudo-labels
        over the last epoch, at least ``min(1 %, 0.5 / n_clusters)`` a cluster:
        :mod:`skcce._engine._prior`), for classes of unequal sizes. ``"auto"``: restarts
        alternate between the uniform prior (the first, so a single restart is uniform)
        and ``"estimate"``, and the restarts are compared as ``n_init`` says: measured
        on 18 data sets it is above or close to KMeans on more of them than either prior
        alone, but below the uniform prior on balanced digits (docs/user_guide.md,
        "Imbalanced classes"; docs/benchmarks.md, ``bench_ordinary``). An array: the
        proportions of the cluster
        *sizes*, a multiset: which cluster gets which value is decided during training, by
        rank of the clusters' current mass (the largest value to the largest cluster).
        ``prior_`` is the prior in force at the end of the kept restart.
    fairness_weight : float, default=1.3
        Weight :math:`w_f` of the fairness term on the mean prediction in the network loss
        (supplement 4.2: "1.3 as the weight of fairness term"). 0 gives the bare Algorithm 1.
    model : {"linear", "vgg4", "resnet18"}, torch.nn.Module or callable, default="linear"
        The network: a linear head on 2-D features, the supplement's VGG-4 or a ResNet-18 on
        images, a module mapping a batch to K logits, or a factory
        ``f(input_shape, n_clusters) -> nn.Module``.
    init : {"auto", "random", "kmeans"} or array-like, default="auto"
        Initial linear head (an array: centroids of shape (n_clusters, n_features)).
        ``"random"``: Kaiming-normal weights, zero bias (supplement
        4.2). ``"kmeans"``: k-means++ seeds and at most 10 Lloyd iterations on a random
        subsample (5000 rows, at least 100 a cluster) in the normalised input space,
        then weights :math:`s c_k` and biases :math:`-s\|c_k\|^2/2`, so that the softmax
        starts as the soft KMeans
        assignment (:mod:`skcce.models._kmeans_init`); every restart draws its own
        subsample and seeds. An array: these centroids, in the units of X. ``"auto"``:
        for the linear head, restarts alternate between ``"random"`` (the first, so a
        single restart is the random head) and ``"kmeans"``, and the comparison of the
        restarts picks (see ``n_init``; all ``"random"`` when X holds fewer distinct rows
        than clusters); the ``"kmeans"`` restarts all start from the best (lowest inertia)
        of their own KMeans runs, as ``KMeans(n_init)`` keeps its best run (the candidates
        of ``n_clusters="auto"`` keep one run each); ``"random"`` for every other model.
        The measurements behind this choice are in docs/benchmarks.md
        (``bench_embeddings``, ``bench_vs_kmeans``, ``bench_ordinary``).
        ``"kmeans"`` or an array with a non-linear model is a ``ValueError``.
    whiten : bool or float in [0, 1], default=False
        Linear head only: train in the geometry of the clusters' shared covariance. Before
        training, KMeans and the pooled within-cluster covariance (Ledoit-Wolf) are
        alternated three times on the normalised features (at most 5000 rows), and every
        normalised row the model sees, in ``fit`` and after, is multiplied by that
        covariance to the power ``-whiten / 2`` (``whitening_``;
        :mod:`skcce._engine._whiten`). ``True`` (= 1) whitens fully: the boundaries a
        Gaussian mixture with one tied covariance would draw become Euclidean ones;
        a strength below 1 evens the directions out partly; ``False`` (= 0) leaves the
        rows as they are. Measured on 18 data sets (docs/user_guide.md, "Elongated
        clusters"): ``True`` adds 0.03 to 0.13 accuracy on low-dimensional data with
        elongated clusters (anisotropic blobs, iris, breast cancer) but loses up to 0.09 on
        embeddings and pixels whose KMeans partition is far from the classes; ``0.75``
        kept every set within 0.005 of KMeans or above on two of four seed groups and all
        but one or two on the others, but costs part of the margin on large balanced
        embeddings and pixels, and on PCA-reduced embeddings. Off by default: it costs
        three ``KMeans(n_init=10)`` fits of the sample. With ``n_clusters="auto"`` the
        search compares its candidates without whitening and whitens the fit of the chosen
        K. A positive value with a non-linear model is a ``ValueError``.
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
        L2 weight decay of the optimiser. ``"auto"``: for the linear head
        ``0.1 * min(1, n_features / 64)`` (:func:`skcce.models._defaults.linear_weight_decay`:
        0.1 on 64 features and more, where a strong decay was the largest single improvement
        on raw digits pixels, docs/user_guide.md, "Defaults"; less on fewer features, where
        the normalised samples are shorter and a head needs larger weights, e.g. 0.003 on
        2-D data), 0.01 for every other model (supplement Table 2).
    batch_size : int or "auto", default="auto"
        Mini-batch size; the pseudo-labels are solved per batch. ``"auto"``: 250 for the
        linear head, 100 for every other model.
    max_epochs : int, default=10
        Passes over the data.
    solver_tol : float, default=1e-5
        Tolerance of the pseudo-label solver per batch: the relative certified duality gap
        at which the exact methods stop (for ``solver="sinkhorn"``, the marginal violation).
    solver_max_iter : int, default=100
        Iteration cap of the pseudo-label solver per batch.
    em_tol : float
        Deprecated alias of ``solver_tol`` (FutureWarning; removed in 0.4).
    em_max_iter : int
        Deprecated alias of ``solver_max_iter`` (FutureWarning; removed in 0.4).
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
        Independent restarts. The one kept has the fewest empty clusters and, among those,
        the best sum of ranks under two label-free criteria (:mod:`skcce._engine._select`):
        its agreement with the other restarts (mean adjusted Rand index of the labels) and,
        for the linear head, the classification likelihood of its partition under spherical
        Gaussians; with fewer than 3 restarts, the highest :meth:`score` on the training
        data. "auto": for the linear head, 10 restarts when ``n_samples < 10_000`` (small
        data: restarts are cheap and a single linear head is sensitive to its
        initialisation) or ``n_features < 64`` at any size (few features: ten restarts cost
        3-6 times one, and a single restart lost to KMeans on large imbalanced blobs), and 1
        otherwise (large embeddings or pixels: one run is already well above KMeans on
        Fashion-MNIST and keeps the fit within KMeans(n_init=10)'s time; see
        docs/benchmarks.md); 1 when ``init`` is an array, and 1 for every other model (a
        restart is a whole network training). The linear head's restarts train together,
        as one batched model (one batched product and one optimiser step for all of them,
        their pseudo-label problems solved side by side), unless ``verbose``, ``checkpoint``,
        an augmentation or data parallelism is in use: the same restarts as one by one (same
        seeds, starts and shuffling; the same arithmetic up to the rounding of a batched
        product), several times faster on small data.
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
        raises :class:`skcce.CheckpointMismatchError` (a ``ValueError``) naming the
        differences: delete it, or pass another path, to start afresh.
    n_threads : int or None, default=None
        CPU threads for the estimator's own work in ``fit``, ``predict``, ``predict_proba``
        and ``score``: torch's intra-op threads and the BLAS pools (threadpoolctl), set on
        entry and restored on exit (also when the call raises). None ("auto"): 1 thread for
        the linear head (its small products and the pseudo-label solver gain nothing from
        more, and lose much on a shared machine), torch's current setting for every other
        model (convolutions do use the threads). An integer is used as given, for every model.
        The independent pseudo-label problems of restarts trained together are solved on up
        to ``n_threads`` threads (None: torch's setting when ``fit`` is called).
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
        Epochs run by the kept restart (after :meth:`partial_fit`: passes over chunks).
    n_steps_ : int
        Optimiser steps taken by the kept restart (one per mini-batch), or by the stream of
        :meth:`partial_fit` calls.
    history_ : list of dict
        Per epoch of the kept restart: ``epoch``, ``loss``, ``fairness``, ``cluster_sizes``,
        ``solver_iter``, ``solver_unconverged``, ``time`` (seconds; for restarts trained
        together, the epoch of all of them).
    train_score_ : float
        :meth:`score` of the kept restart on the training data (the label-free mutual
        information; it chooses among fewer than 3 restarts).
    restart_agreement_ : ndarray of shape (n_completed_restarts,)
        Each completed restart's mean adjusted Rand index with the other restarts (in run
        order; zeros with fewer than 3 restarts): the kept restart has the highest among
        those with the fewest empty clusters.
    prior_ : ndarray of shape (n_clusters,)
        The class prior in force at the end of the kept restart (uniform for
        ``prior=None``; the user's proportions as matched to the clusters; the estimate for
        ``prior="auto"``).
    module_ : torch.nn.Module
        The trained network (on the training device).
    n_features_in_ : int
        Number of features (second dimension of X) seen in fit.
    feature_names_in_ : ndarray of shape (``n_features_in_``,)
        Names of the features seen in fit; only when X has string column names (a
        pandas DataFrame).
    input_shape_ : tuple of int
        Shape of one sample as the network sees it.
    device_ : torch.device
        Device the network was trained on.
    init_ : {"random", "kmeans"} or ndarray
        The initialisation used (``init`` with "auto" resolved; the user's array as given).
    whitening_ : ndarray of shape (n_features, n_features) or None
        With a positive ``whiten``: the map applied to every normalised row (the pooled
        within-cluster covariance to the power ``-whiten / 2``, scaled to the
        normalisation's unit mean variance); None otherwise.
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
    n_clusters_ : int
        The number of clusters of the fitted model (``n_clusters``, or the K chosen by
        ``n_clusters="auto"``).
    n_clusters_scores_ : dict of int to float
        Only with ``n_clusters="auto"``: for every K tried, the criterion that chose among
        them: the kept restart's agreement with the other restarts (largest mean adjusted
        Rand index) times its label-free mutual information divided by ``log(K) ** 0.7``
        (``skcce._n_clusters.LOG_K_POWER``; at most ``log(K) ** 0.3``); 0 when the fit at
        K left a cluster with less than a tenth of ``n / K`` samples (above 5 000 samples,
        of the fits on the search's sample). After a screening pass (a long range, see
        ``n_clusters``) the K outside its 4 best keep their screening criterion (4 restarts,
        whose agreement tends to be a little lower; ``n_clusters_restarts_`` says which);
        the chosen K is the best of the curve and always has all its restarts. Plot it to
        overrule the choice (fit again with an integer K).
    n_clusters_restarts_ : dict of int to int
        Only with ``n_clusters="auto"``: for every K of ``n_clusters_scores_``, the number
        of restarts its criterion was measured on (4 for a K left at the screening pass,
        the search's full number otherwise).

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
    >>> import numpy as np
    >>> from sklearn.datasets import load_digits
    >>> from skcce import CCEClustering
    >>> X, y = load_digits(return_X_y=True)
    >>> X = X[:500]  # a small, quick example: one restart of two epochs
    >>> cce = CCEClustering(n_clusters=10, n_init=1, max_epochs=2, random_state=0).fit(X)
    >>> cce.labels_.shape, cce.n_iter_
    ((500,), 2)
    >>> proba = cce.predict_proba(X[:3])
    >>> proba.shape, bool(np.allclose(proba.sum(axis=1), 1))
    ((3, 10), True)
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
        """``(method, tol, max_iter)`` of ``solver_options`` (missing keys: their defaults);
        a ``ValueError`` names an unknown key or a bad value."""
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
        if isinstance(tol, bool) or not isinstance(tol, Real) or not 0 < tol < 1:
            raise ValueError(f"solver_options['tol'] must be a float in (0, 1); got {tol!r}")
        if isinstance(max_iter, bool) or not isinstance(max_iter, Integral) or max_iter < 1:
            raise ValueError(
                f"solver_options['max_iter'] must be a positive integer; got {max_iter!r}"
            )
        return method, float(tol), int(max_iter)

    def _config(self, k, device, input_shape, settings, solve_threads=1, n_samples=1):
        """TrainConfig from the parameters, with the "auto" ones taken from ``settings``."""
        method, solver_tol, solver_max_iter = self._solver_options()
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
        )

    def _plan(self, X, k, solve_threads=1) -> _FitPlan:
        """Resolve everything a fit of ``k`` clusters needs before training (validated X)."""
        n = X.shape[0]
        if n < k:
            raise ValueError(
                f"n_samples={n} should be >= n_clusters={k}: there are fewer "
                "samples than clusters"
            )
        settings = _defaults.resolve(  # every "auto" setting, from the model
            {key: getattr(self, key) for key in _defaults.AUTO_PARAMS},
            self.model,
            n,
            images=X.ndim > 2,  # the image layouts (2-D X is "flat")
            n_features=X.shape[1] if X.ndim == 2 else None,
        )
        if k == 1:  # the restarts of one cluster are all the same
            settings["n_init"] = 1
        linear = _defaults.is_linear(self.model)
        init = _defaults.check_init(settings["init"], self.init, self.model, k, X)
        ctx = resolve_distributed(self.distributed)
        device = local_device(resolve_device(self.device), ctx)
        prepared = prepare(X, self.model)
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
        with thread_limit(self._thread_count()):
            self._fit(X, k, checkpoint, solve_threads=self.n_threads or outer)
        if found is not None:
            self.n_clusters_scores_ = found.scores
            self.n_clusters_restarts_ = found.restarts
        return self

    @_fit_context(prefer_skip_nested_validation=True)
    def partial_fit(self, X, y=None):
        """Update the model with one chunk of samples: one pass of the training over it.

        The first call (on an unfitted estimator) reads the settings, fits the input
        normalisation to the chunk and starts the linear head: k-means++ and Lloyd on the
        chunk for ``init="auto"`` or ``"kmeans"``, the ``init`` centroids, or a random head
        for ``"random"``. Every call then merges the chunk into the normalisation (running
        per-feature means and one global standard deviation; the head is re-expressed so
        that its predictions do not change), runs one pass of the self-labeling loop over
        the chunk's shuffled mini-batches (``n_steps_`` counts the optimiser steps) and sets
        ``labels_`` to the chunk's clusters. A stream trains one model (``n_init="auto"``:
        1, ``prior="auto"``: uniform) with the settings of its first call; ``max_epochs`` and
        ``checkpoint`` are unused (a pickle resumes the stream exactly). After ``fit`` it
        continues the fitted model. Linear head only; a ``ValueError`` changes nothing.

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
        with thread_limit(self._thread_count()):
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
            self.model, len(X), images=False, n_features=X.shape[1],
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

        The kept network's clusters are numbered by their first training row
        (:mod:`skcce._engine._order`), so equal partitions get equal labels; with ``init``
        centroids they keep the centroids' order. The kept restart's training labels are
        renumbered in place of the network's outputs: no (N, K) array is made."""
        k = plan.cfg.n_clusters
        labels = best.labels
        order = first_appearance(labels, k)
        centroids = plan.build.inits.get(best.run) == "array"
        if not centroids and renumber_(best.module, order):
            labels = np.argsort(order)[labels]
            sizes = None if best.sizes is None else best.sizes[order]
            best = replace(best, labels=labels, sizes=sizes, prior=_reorder(best.prior, order))
            for entry in best.history:
                if len(entry.get("cluster_sizes", ())) == k:
                    entry["cluster_sizes"] = [entry["cluster_sizes"][j] for j in order]
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

    def _predict_proba(self, X):
        X = self._validate_X(X, reset=False)
        layout = detect_layout(X, self.model)
        if sample_shape(X, layout) != self.input_shape_:
            raise ValueError(
                f"X has samples of shape {sample_shape(X, layout)}, but "
                f"{type(self).__name__} was fitted on samples of shape {self.input_shape_}"
            )
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
        return self.predict_proba(X).argmax(axis=1)

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


def _reorder(prior, order):
    """A restart's prior (None: uniform) with its clusters renumbered by ``order``."""
    return None if prior is None else np.asarray(prior)[order]


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
        value = state.pop(old, _SOLVER_DEFAULTS[key])
        if value != _SOLVER_DEFAULTS[key]:
            options[key] = value
    for old in ("em_tol", "em_max_iter"):
        state.pop(old, None)
    state["solver_options"] = options or None
    for name, default in CCEClustering._get_default_params().items():
        state.setdefault(name, default)  # a parameter added since: its default
    return state
