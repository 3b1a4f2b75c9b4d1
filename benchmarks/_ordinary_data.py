"""The data sets of ``benchmarks/bench_ordinary.py`` (issue 24): what users bring.

``SETS`` maps a set's name to a builder ``builder(seed) -> (X, y, description)``;
:func:`build` ``(name, seed)`` calls it. ``seed`` draws the data where it is random (the
blobs), and the class order and the subsample of the long-tailed sets; fixed data (iris, the
balanced raw sets, the CNN embeddings, whose CNN is trained with seed 0) ignores it. Every
builder is deterministic.

Sets that need Fashion-MNIST (Debian's ``dataset-fashion-mnist``, or the files under
``skcce.datasets.get_data_home()``) raise :class:`Unavailable` when it is missing; the
others never touch it. ``NEEDS_FASHION_MNIST`` names them.
"""

from __future__ import annotations

import math
import sys
from functools import lru_cache, partial
from pathlib import Path

import numpy as np
from sklearn.datasets import (
    load_breast_cancer,
    load_digits,
    load_iris,
    load_wine,
    make_blobs,
)
from sklearn.preprocessing import StandardScaler

#: Epochs of the CNN of bench_embeddings.py (its ``--cnn-epochs`` default, the one its main uses).
CNN_EPOCHS = 2
#: The classes the "unseen" CNN is trained on; the set keeps the test images of the others.
SEEN = (0, 1, 2, 3, 4)


class Unavailable(RuntimeError):
    """The set's source data is not installed (the benchmark skips the set with a note)."""


# ----------------------------------------------------------------------------- sources


@lru_cache(maxsize=2)
def _fmnist_pixels(split="test"):
    """Fashion-MNIST's test split (or ``split="all"``, 70 000 images): (n, 784) float32 in
    [0, 1], labels int64."""
    from skcce.datasets import load_dataset

    try:
        X, y = load_dataset("fashion-mnist", split=split)
    except FileNotFoundError as exc:
        raise Unavailable(
            "Fashion-MNIST is not installed (Debian's dataset-fashion-mnist, or the IDX files "
            "in skcce.datasets.get_data_home())"
        ) from exc
    X = X.reshape(len(X), -1).astype(np.float32) / np.float32(255.0)
    return X, y.astype(np.int64)


@lru_cache(maxsize=2)
def _cnn(classes):
    """Test-split CNN embeddings of bench_embeddings.py (cached there in benchmarks/.cache)."""
    _fmnist_pixels()  # Unavailable before bench_embeddings tries to train
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from bench_embeddings import cnn_embeddings

    Z, y, info = cnn_embeddings(None if classes is None else list(classes), CNN_EPOCHS)
    return np.asarray(Z), np.asarray(y).astype(np.int64), info


def long_tail_sizes(n_max, r, n_classes=10):
    """Class sizes ``floor(n_max * r ** (-rank / (n_classes - 1)))`` for rank 0..n_classes-1."""
    return [
        int(math.floor(n_max * r ** (-rank / (n_classes - 1)) + 1e-9)) for rank in range(n_classes)
    ]


def long_tail(X, y, r, seed):
    """A long-tailed subset of (X, y) with imbalance ratio ``r``.

    The classes get ranks 0..K-1 in an order drawn from ``seed``; the class of rank ``j`` keeps
    ``floor(n_max * r ** (-j / (K - 1)))`` of its rows, drawn without replacement with ``seed``,
    where ``n_max`` is the smallest class count (so every class has that many available).
    Rows keep their original order. Returns ``(X_sub, y_sub, sizes)`` with ``sizes`` a dict
    ``{class: size}``.
    """
    classes, counts = np.unique(y, return_counts=True)
    n_max = int(counts.min())
    sizes = long_tail_sizes(n_max, r, len(classes))
    rng = np.random.default_rng(seed)
    order = rng.permutation(classes)  # order[j] gets rank j
    keep, by_class = [], {}
    for rank, c in enumerate(order):
        rows = np.flatnonzero(y == c)
        keep.append(rng.choice(rows, size=sizes[rank], replace=False))
        by_class[int(c)] = sizes[rank]
    idx = np.sort(np.concatenate(keep))
    return X[idx], y[idx], dict(sorted(by_class.items()))


def _describe_tail(base, r, sizes, seed):
    shown = ", ".join(f"{c}:{s}" for c, s in sorted(sizes.items(), key=lambda kv: -kv[1]))
    return f"{base}, long-tailed r = {r} (class:size with seed {seed}: {shown})"


# ----------------------------------------------------------------------------- builders


def _blobs5(seed, n=3000):
    X, y = make_blobs(n, centers=5, random_state=seed)
    return X, y, f"make_blobs({n}, centers=5), 2-D"


def _varied(seed, n=3000):
    X, y = make_blobs(n, centers=5, cluster_std=[0.5, 1, 1.5, 2, 2.5], random_state=seed)
    return X, y, f"make_blobs({n}, centers=5, cluster_std=[0.5, 1, 1.5, 2, 2.5]), 2-D"


def _imbalanced(seed, sizes=(1000, 500, 200, 100, 50)):
    X, y = make_blobs(n_samples=list(sizes), centers=None, cluster_std=1.0, random_state=seed)
    return X, y, f"make_blobs(n_samples={list(sizes)}, cluster_std=1.0), 2-D"


def _aniso(seed, n=1500):
    X, y = make_blobs(n, centers=3, random_state=seed)
    X = X @ np.array([[0.6, -0.6], [-0.4, 0.8]])
    return X, y, f"make_blobs({n}, centers=3) @ [[0.6, -0.6], [-0.4, 0.8]] (anisotropic), 2-D"


def _blobs20d(seed):
    X, y = make_blobs(3000, n_features=20, centers=8, random_state=seed)
    return X, y, "make_blobs(3000, n_features=20, centers=8), 20-D"


def _digits_lt(r):
    def builder(seed):
        X, y = load_digits(return_X_y=True)
        X, y, sizes = long_tail(X.astype(np.float64), y, r, seed)
        return X, y, _describe_tail("digits, raw pixels", r, sizes, seed)

    return builder


def _fmnist_lt(r):
    def builder(seed):
        X, y = _fmnist_pixels()
        X, y, sizes = long_tail(X, y, r, seed)
        return (
            X,
            y,
            _describe_tail("Fashion-MNIST test split, 784 pixels in [0, 1]", r, sizes, seed),
        )

    return builder


def _cnn_lt(r):
    def builder(seed):
        Z, y, _ = _cnn(None)
        Z, y, sizes = long_tail(Z, y, r, seed)
        base = f"256-d CNN embeddings of the Fashion-MNIST test split ({CNN_EPOCHS} epochs)"
        return Z, y, _describe_tail(base, r, sizes, seed)

    return builder


def _cnn_balanced(seed):
    Z, y, info = _cnn(None)
    return (
        Z,
        y,
        f"256-d CNN embeddings of the Fashion-MNIST test split, all 10 classes ({info})",
    )


def _cnn_unseen_of(seen):
    """A builder of the test embeddings of the classes a CNN trained on ``seen`` never saw."""

    def build_(seed):
        Z, y, info = _cnn(tuple(seen))
        keep = ~np.isin(y, seen)
        unseen = sorted(set(range(10)) - set(seen))
        return (
            Z[keep],
            y[keep],
            f"256-d embeddings of a CNN trained on classes {list(seen)}, test images of classes "
            f"{unseen} (never seen by the CNN; {info})",
        )

    return build_


def _standardised(loader, name):
    def builder(seed):
        X, y = loader(return_X_y=True)
        return StandardScaler().fit_transform(X), y, f"{name}, standardised"

    return builder


def _digits(seed):
    X, y = load_digits(return_X_y=True)
    return X.astype(np.float64), y, "digits, all 1797, raw pixels"


def _fmnist10k(seed):
    X, y = _fmnist_pixels()
    return X, y, "Fashion-MNIST test split (10 000), 784 pixels in [0, 1]"


#: name -> builder(seed) -> (X, y, description); cheap sets first.
SETS = {
    "blobs5": _blobs5,
    "varied": _varied,
    "imbalanced": _imbalanced,
    "aniso": _aniso,
    "blobs20d": _blobs20d,
    "iris": _standardised(load_iris, "iris"),
    "wine": _standardised(load_wine, "wine"),
    "breast_cancer": _standardised(load_breast_cancer, "breast cancer"),
    "digits": _digits,
    "digits-lt10": _digits_lt(10),
    "digits-lt100": _digits_lt(100),
    "fmnist-lt10": _fmnist_lt(10),
    "fmnist-lt100": _fmnist_lt(100),
    "fmnist10k": _fmnist10k,
    "cnn": _cnn_balanced,
    "cnn-unseen": _cnn_unseen_of(SEEN),
    "cnn-lt10": _cnn_lt(10),
    "cnn-lt100": _cnn_lt(100),
}


# ----------------------------------------------------------------------------- large sets


def _blobs50d_large(seed):
    X, y = make_blobs(15000, n_features=50, centers=12, cluster_std=4.0, random_state=seed)
    return X, y, "make_blobs(15000, n_features=50, centers=12, cluster_std=4.0), 50-D"


def _fmnist70k(seed):
    X, y = _fmnist_pixels("all")
    return X, y, "Fashion-MNIST, all 70 000 images, 784 pixels"


def _pca20(source, label):
    """A builder of ``source``'s rows reduced to 20 dimensions by PCA; ``source`` is fixed
    data (it ignores the seed), so the reduction is computed once."""

    @lru_cache(maxsize=1)
    def reduced():
        from sklearn.decomposition import PCA

        X, y, _ = source(0)
        Z = PCA(20, random_state=0).fit_transform(np.asarray(X, dtype=np.float64))
        return Z.astype(np.float32), y

    def build_(seed):
        return (*reduced(), f"{label}, PCA to 20 dimensions")

    return build_


#: Sets of 10 000 rows or more with fewer than 64 features, where ``n_init="auto"`` runs ten
#: restarts (one before; ``bench_ordinary --sets`` names them, they are not in the default run).
LARGE_SETS = {
    "blobs5-20k": partial(_blobs5, n=20000),
    "varied-20k": partial(_varied, n=20000),
    "imbalanced-15k": partial(_imbalanced, sizes=(8000, 4000, 2000, 1000, 500)),
    "aniso-15k": partial(_aniso, n=15000),
    "blobs50d-15k": _blobs50d_large,
    "cnn-pca20": _pca20(_cnn_balanced, "256-d CNN embeddings of the Fashion-MNIST test split"),
    "fmnist-pca20": _pca20(_fmnist10k, "Fashion-MNIST test split (10 000), 784 pixels"),
    "fmnist70k-pca20": _pca20(_fmnist70k, "Fashion-MNIST, all 70 000 images, 784 pixels"),
}


def _sample(source, n, label):
    def build_(seed):
        X, y, _ = source(seed)
        keep = np.sort(np.random.RandomState(seed).choice(len(X), n, replace=False))
        return X[keep], y[keep], f"{label}, a random sample of {n} rows"

    return build_


#: Random samples of balanced embeddings and pixels below 10 000 rows, where ``n_init="auto"``
#: runs ten restarts of both kinds (not in the default run; ``--section bench_ordinary_samples``).
SAMPLE_SETS = {
    "cnn-3k": _sample(_cnn_balanced, 3000, "256-d CNN embeddings of the Fashion-MNIST test split"),
    "cnn-9k": _sample(_cnn_balanced, 9000, "256-d CNN embeddings of the Fashion-MNIST test split"),
    "fmnist-3k": _sample(_fmnist10k, 3000, "Fashion-MNIST test split, 784 pixels"),
    "fmnist-9k": _sample(_fmnist10k, 9000, "Fashion-MNIST test split, 784 pixels"),
}


#: Held-out unseen-class embeddings: three more CNNs, each trained as ``cnn-unseen``'s but on
#: five other classes (not in the default run; ``--section bench_ordinary_unseen``).
UNSEEN_SETS = {
    "cnn-unseen-04": _cnn_unseen_of((5, 6, 7, 8, 9)),
    "cnn-unseen-even": _cnn_unseen_of((1, 3, 5, 7, 9)),
    "cnn-unseen-odd": _cnn_unseen_of((0, 2, 4, 6, 8)),
}

#: Every set :func:`build` knows.
ALL_SETS = {**SETS, **LARGE_SETS, **SAMPLE_SETS, **UNSEEN_SETS}

#: Sets that need the Fashion-MNIST files.
NEEDS_FASHION_MNIST = frozenset(
    {"fmnist-lt10", "fmnist-lt100", "fmnist10k", "cnn", "cnn-unseen", "cnn-lt10", "cnn-lt100"}
    | {"cnn-pca20", "fmnist-pca20", "fmnist70k-pca20"}
    | set(SAMPLE_SETS)
    | set(UNSEEN_SETS)
)


def build(name, seed):
    """``(X, y, description)`` of the set ``name`` drawn with ``seed`` (see :data:`SETS`)."""
    try:
        builder = ALL_SETS[name]
    except KeyError:
        raise KeyError(f"unknown set {name!r}; known: {', '.join(ALL_SETS)}") from None
    X, y, description = builder(seed)
    return np.asarray(X), np.asarray(y).astype(np.int64), description
