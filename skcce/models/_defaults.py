"""Model-aware defaults of CCEClustering: what ``"auto"`` means for each kind of network.

The estimator's training settings default to ``"auto"`` and are resolved here, at fit time,
from the model (issue 12). Two regimes:

``"linear"`` (the linear head on 2-D features)
    SGD, learning rate 0.5, batch 250, no augmentation: the settings tuned on raw digits and
    Fashion-MNIST pixels (docs/user_guide.md, "Defaults"); weight decay
    :func:`linear_weight_decay` of the number of features (0.1 from 64 features up, the
    value tuned on those pixels; proportionally less below, down to 0.003 on 2-D data).
    ``init="auto"`` is the KMeans initialisation of the head
    (:mod:`skcce.models._kmeans_init`).
``"deep"`` (``"vgg4"``, ``"resnet18"`` and any user module or factory)
    Adam, learning rate 3e-4, weight decay 0.01, batch 100, the default image augmentation
    (:func:`skcce.models.default_augmentation`; none for a user module on 2-D features, or
    when torchvision is missing) and one restart: the protocol measured for VGG-4 on
    Fashion-MNIST (docs/benchmarks.md, ``bench_deep``). ``init="auto"`` is the network's
    own random initialisation.

Nothing here reads data or draws randomness; :func:`resolve` is a pure function of the
user's parameters, the model and the number of samples and features.
"""

from __future__ import annotations

from skcce._warn import warn

#: The linear head's weight decay at and above :data:`DECAY_FEATURES` features.
DECAY = 0.1
#: Below this many features the linear head's weight decay shrinks in proportion.
DECAY_FEATURES = 64
#: Above this many clusters the linear head's weight decay shrinks in inverse proportion.
DECAY_CLUSTERS = 10

#: The resolved values of every ``"auto"`` training setting, per regime.
AUTO_SETTINGS: dict[str, dict[str, object]] = {
    "linear": {
        "optimizer": "sgd",
        "learning_rate": 0.5,
        "weight_decay": DECAY,  # at DECAY_FEATURES and more: see linear_weight_decay
        "batch_size": 250,
        "augment": None,
        "init": "kmeans",
        "n_iter_no_change": 1,
    },
    "deep": {
        "optimizer": "adam",
        "learning_rate": 3e-4,
        "weight_decay": 0.01,
        "batch_size": 100,
        "augment": "default",
        "init": "random",
        "n_iter_no_change": None,
    },
}

#: Parameters that accept ``"auto"`` and are resolved by :func:`resolve`.
AUTO_PARAMS: tuple[str, ...] = (
    "optimizer",
    "learning_rate",
    "weight_decay",
    "batch_size",
    "augment",
    "init",
    "n_init",
    "n_iter_no_change",
)


def linear_weight_decay(n_features: int, n_clusters=None) -> float:
    r"""``weight_decay="auto"`` of the linear head on ``n_features`` features and
    ``n_clusters`` clusters.

    :math:`0.1 \cdot \min(1, d / 64) \cdot \min(1, 10 / K)`. The inputs are centred and
    divided by one global standard deviation, so a sample's squared norm grows with the
    dimension :math:`d` and a head needs larger weights in fewer dimensions; and each of the
    head's K rows is trained by about n / K rows of the data while the decay pulls on every
    row alike, so above ten clusters the decay shrinks with K to keep each row's balance as
    at ten (docs/design/007-weight-decay-by-dimension.md). This is the decay of a row whose
    cluster holds ``1 / K`` of the data; training scales each row's by its cluster's share
    (:mod:`skcce._engine._decay`).

    Parameters
    ----------
    n_features : int
    n_clusters : int, optional
        None: as for ten clusters or fewer.

    Returns
    -------
    weight_decay : float

    Examples
    --------
    >>> linear_weight_decay(2), linear_weight_decay(64), linear_weight_decay(784)
    (0.003125, 0.1, 0.1)
    >>> linear_weight_decay(64, 10), round(linear_weight_decay(64, 100), 6)
    (0.1, 0.01)
    """
    by_dimension = min(1.0, max(int(n_features), 1) / DECAY_FEATURES)
    by_clusters = min(1.0, DECAY_CLUSTERS / max(int(n_clusters or 1), 1))
    return DECAY * by_dimension * by_clusters


#: ``n_init="auto"`` on the linear head: 10 restarts below this many samples, or below
#: :data:`FEW_FEATURES` features at any size; else 1.
SMALL_DATA = 10_000
#: ``n_init="auto"`` on the linear head: 10 restarts at any number of samples below this many
#: features. On such data a restart's cost is the mini-batch loop's, not the features':
#: 10 restarts trained together took 3-6 times one restart (1.1-2.0 s on 15 000-20 000 rows of
#: 2-50 features, 4.5 s on 50 000 x 63, 8-10 s on 100 000 x 2 and x 50, 13 s on 70 000 x 20;
#: 2 cores), and there the single restart lost to KMeans by up to 0.25 (imbalanced blobs;
#: docs/user_guide.md, "Large data: restarts by dimension"). Above it (embeddings, pixels) one
#: restart of a balanced fit is above KMeans and ten cost up to ten times as much
#: (Fashion-MNIST 70 000).
FEW_FEATURES = 64


def is_linear(model) -> bool:
    """Whether ``model`` (the estimator's parameter) names the built-in linear head.

    Examples
    --------
    >>> is_linear("linear"), is_linear("vgg4"), is_linear(lambda shape, k: None)
    (True, False, False)
    """
    return isinstance(model, str) and model.lower() == "linear"


def regime(model) -> str:
    """``"linear"`` for the built-in linear head, ``"deep"`` for every other model.

    Parameters
    ----------
    model : str, torch.nn.Module or callable
        The estimator's ``model`` parameter.

    Returns
    -------
    regime : {"linear", "deep"}

    Examples
    --------
    >>> regime("linear"), regime("vgg4"), regime(lambda shape, k: None)
    ('linear', 'deep', 'deep')
    """
    return "linear" if is_linear(model) else "deep"


def restart_init(init, run: int) -> str:
    """The initialisation of restart ``run`` for a resolved ``init``: with ``"auto"`` on the
    linear head every restart starts from its own KMeans run ("auto-kmeans" falls back to
    random heads on data with fewer distinct rows than clusters).

    Parameters
    ----------
    init : str or ndarray
        "random", "kmeans", "auto-kmeans" (``"auto"`` on the linear head) or centroids.
    run : int
        Restart index, from 0 (every restart of a fit starts the same way).

    Returns
    -------
    init : {"random", "kmeans", "array"}

    Examples
    --------
    >>> [restart_init("auto-kmeans", r) for r in range(3)]
    ['kmeans', 'kmeans', 'kmeans']
    >>> restart_init("random", 0), restart_init([[0.0]], 0)
    ('random', 'array')
    """
    if not isinstance(init, str):
        return "array"
    return "kmeans" if init == "auto-kmeans" else init


def _has_torchvision() -> bool:
    try:
        import torchvision  # noqa: F401
    except ImportError:
        return False
    return True


#: ``batch_size="auto"``: at least this many rows per cluster in a batch (4 K rows when that
#: exceeds the regime's batch), so that the batch's fairness term can fill every cluster.
ROWS_PER_CLUSTER = 4


def batch_size(regime_batch: int, n_clusters=None) -> int:
    """``batch_size="auto"``: the regime's batch, or :data:`ROWS_PER_CLUSTER` rows per
    cluster when that is larger.

    Examples
    --------
    >>> batch_size(250, 10), batch_size(250, 100), batch_size(250, 1000)
    (250, 400, 4000)
    """
    return max(int(regime_batch), ROWS_PER_CLUSTER * int(n_clusters or 0))


def resolve(
    params: dict, model, n_samples: int, *, images: bool, n_features=None, n_clusters=None
) -> dict:
    """The training settings to use: each ``"auto"`` replaced by its regime's value.

    An explicit value always wins: only the entries equal to ``"auto"`` change.

    Parameters
    ----------
    params : dict
        The user's values of (some of) :data:`AUTO_PARAMS` (``get_params()`` entries).
    model : str, torch.nn.Module or callable
        The estimator's ``model`` parameter (see :func:`regime`).
    n_samples : int
        Number of training samples (for ``n_init``).
    images : bool
        Whether the model sees images (an image layout); a user module on 2-D features gets
        no augmentation.
    n_clusters : int, optional
        Number of clusters: ``batch_size="auto"`` is :func:`batch_size` of it.
    n_features : int, optional
        Number of features of 2-D data: the linear head's ``weight_decay="auto"`` is
        :func:`linear_weight_decay` of it (the table's value when None), and below
        :data:`FEW_FEATURES` ``n_init="auto"`` is 10 at any ``n_samples``.

    Returns
    -------
    resolved : dict
        The same keys, with concrete values. ``n_init="auto"`` is 10 for the linear head on
        fewer than 10 000 samples or fewer than 64 features (restarts are cheap there and a
        random head is sensitive to its start), 1 otherwise, and 1 when ``init`` is an array
        of centroids (every restart would start from the same head) or the model is deep (a
        restart costs a whole network training).

    Warns
    -----
    UserWarning
        ``augment="auto"`` on images without torchvision installed: the fit runs without
        augmentation (install ``skcce[vision]``).

    Examples
    --------
    >>> resolve({"optimizer": "auto", "learning_rate": 0.1}, "vgg4", 100, images=True)
    {'optimizer': 'adam', 'learning_rate': 0.1}
    >>> resolve({"n_init": "auto", "init": "auto"}, "linear", 500, images=False)
    {'n_init': 10, 'init': 'kmeans'}
    """
    kind = regime(model)
    table = AUTO_SETTINGS[kind]
    out = {}
    for key, value in params.items():
        if not (isinstance(value, str) and value == "auto"):
            out[key] = value
        elif key == "n_init":
            explicit_centroids = not isinstance(params.get("init", "auto"), str)
            few_features = n_features is not None and n_features < FEW_FEATURES
            cheap = n_samples < SMALL_DATA or few_features  # ten restarts cost little
            out[key] = 10 if kind == "linear" and cheap and not explicit_centroids else 1
        elif key == "batch_size":
            out[key] = batch_size(table[key], n_clusters)
        elif key == "weight_decay" and kind == "linear" and n_features is not None:
            out[key] = linear_weight_decay(n_features, n_clusters)
        elif key == "augment":
            augment = table["augment"] if images else None
            if augment is not None and not _has_torchvision():
                warn(
                    "augment='auto' would use the default image augmentation, which needs "
                    "torchvision (pip install skcce[vision]); fitting without augmentation",
                    UserWarning,
                )
                augment = None
            out[key] = augment
        else:
            out[key] = table[key]
    return out


def check_init(init, user_init, model, n_clusters: int, X) -> object:
    """The resolved ``init`` of a fit: "random", "kmeans", "auto-kmeans" or centroids.

    Parameters
    ----------
    init : str or array-like
        ``init`` after :func:`resolve` ("auto" replaced).
    user_init : str or array-like
        The estimator's ``init`` parameter as the user passed it (for "auto-kmeans" and the
        error message).
    model : str, torch.nn.Module or callable
        The estimator's ``model``.
    n_clusters : int
    X : ndarray
        The validated training data (its number of features).

    Returns
    -------
    init : {"random", "kmeans", "auto-kmeans"} or ndarray of shape (n_clusters, n_features)
        "auto-kmeans" when the KMeans start came from ``"auto"``; centroids are validated
        float64 (:func:`skcce.models._kmeans_init.check_centroids`).

    Raises
    ------
    ValueError
        ``"kmeans"`` or centroids with a model other than the linear head; centroids of
        the wrong shape or not finite.

    Examples
    --------
    >>> import numpy as np
    >>> check_init("kmeans", "auto", "linear", 2, np.zeros((4, 3)))
    'auto-kmeans'
    >>> check_init("random", "auto", "vgg4", 2, np.zeros((4, 28, 28)))
    'random'
    """
    if isinstance(init, str) and init == "random":
        return init
    if not is_linear(model):
        raise ValueError(
            f"init={user_init!r:.40} initialises the linear head only; model="
            f"{model!r:.40} starts from its own random initialisation: use "
            "init='auto' or init='random'"
        )
    if isinstance(init, str):
        return "auto-kmeans" if isinstance(user_init, str) and user_init == "auto" else init
    from skcce.models._kmeans_init import check_centroids

    return check_centroids(init, n_clusters, X.shape[1])
