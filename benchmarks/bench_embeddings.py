"""Clustering frozen embeddings and small tabular data: CCEClustering vs KMeans (issue 12).

The design card's headline Pipeline is a linear head on pretrained features (the
supplement's Table 1). This script builds such features offline and clusters them:

``cnn``
    A small CNN (two 5x5 convolutions, 256-d penultimate layer) trained *with labels* on the
    Fashion-MNIST training split (``--cnn-epochs`` epochs of Adam), embedded on the 10 000
    test images: the 256-d ReLU features of the penultimate layer.
``cnn-half``
    The same CNN trained with labels on the training images of classes 0-4 only, embedded
    on all 10 000 test images: features that never saw half of the classes (transfer).
``resnet``
    ``FeatureExtractor("resnet18", pretrained=False, image_size=32)`` -- a randomly
    initialised ResNet-18 -- on a stratified subset of ``--resnet-samples`` test images
    (512-d pooled features).

and adds iris, wine and breast cancer, standardised (``StandardScaler``). The embeddings are
cached in ``benchmarks/.cache/`` (delete it to rebuild).

For each dataset: KMeans(n_init=10), GaussianMixture (full covariances up to 64 features,
diagonal above), CCEClustering with its defaults (only ``n_clusters``) and with each
``init`` ("random", "kmeans"), over ``--seeds`` seeds: accuracy (Hungarian), NMI, ARI, mean
fit time, and ratios to KMeans in the same run. The ceiling is a supervised linear probe:
``LogisticRegression`` scored by 5-fold stratified cross-validation (accuracy of its
out-of-fold predictions; NMI and ARI of the same predictions).

Usage: ``python benchmarks/bench_embeddings.py [--seeds 3] [--threads default|N] [--no-write]``
(``default``: torch's thread count is left as it is, what a user gets).
"""

from __future__ import annotations

import argparse
import datetime
import shlex
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import torch
from sklearn.datasets import load_breast_cancer, load_iris, load_wine
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import adjusted_rand_score, normalized_mutual_info_score
from sklearn.mixture import GaussianMixture
from sklearn.model_selection import StratifiedKFold, cross_val_predict, train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _report import machine_lines, publish  # noqa: E402
from skcce._compare import evaluate, kmeans_factory, markdown_table  # noqa: E402

from skcce import CCEClustering  # noqa: E402

CACHE = Path(__file__).resolve().parent / ".cache"


class SmallCNN(torch.nn.Module):
    """Two 5x5 convolutions (16, 32 channels, max-pooled), a 256-d hidden layer, K logits."""

    def __init__(self, n_classes=10, width=256):
        super().__init__()
        self.features = torch.nn.Sequential(
            torch.nn.Conv2d(1, 16, 5, padding=2),
            torch.nn.ReLU(),
            torch.nn.MaxPool2d(2),
            torch.nn.Conv2d(16, 32, 5, padding=2),
            torch.nn.ReLU(),
            torch.nn.MaxPool2d(2),
            torch.nn.Flatten(),
            torch.nn.Linear(32 * 7 * 7, width),
            torch.nn.ReLU(),
        )
        self.head = torch.nn.Linear(width, n_classes)

    def forward(self, x):  # noqa: D102
        return self.head(self.features(x))


def _as_float(images):
    return torch.from_numpy(images).float().div_(255.0).unsqueeze(1)


def cnn_embeddings(classes, epochs, seed=0):
    """Train :class:`SmallCNN` with labels on the training split, embed the test split.

    Parameters
    ----------
    classes : sequence of int or None
        Classes whose training images are used (None: all).
    epochs : int
        Passes of Adam (learning rate 1e-3, batch 128) over those images.
    seed : int

    Returns
    -------
    Z : ndarray of shape (10000, 256), float32
        Penultimate-layer features of the test images.
    y : ndarray of shape (10000,)
        Their classes.
    info : str
        The CNN's test accuracy on the classes it was trained on.
    """
    from skcce.datasets import load_dataset

    tag = "all" if classes is None else "".join(map(str, classes))
    path = CACHE / f"cnn_{tag}_e{epochs}_s{seed}.npz"
    if path.exists():
        data = np.load(path)
        return data["Z"], data["y"], str(data["info"])
    Xtr, ytr = load_dataset("fashion-mnist", split="train")
    Xte, yte = load_dataset("fashion-mnist", split="test")
    if classes is not None:
        keep = np.isin(ytr, classes)
        Xtr, ytr = Xtr[keep], ytr[keep]
        remap = {c: i for i, c in enumerate(classes)}
        ytr = np.array([remap[c] for c in ytr])
    gen = torch.Generator().manual_seed(seed)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        net = SmallCNN(n_classes=len(np.unique(ytr)))
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    Xt, yt = _as_float(Xtr), torch.from_numpy(ytr).long()
    for _ in range(epochs):
        net.train()
        order = torch.randperm(len(Xt), generator=gen)
        for start in range(0, len(Xt), 128):
            idx = order[start : start + 128]
            loss = torch.nn.functional.cross_entropy(net(Xt[idx]), yt[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
    net.eval()
    with torch.inference_mode():
        Xe = _as_float(Xte)
        Z = torch.cat([net.features(Xe[s : s + 1000]) for s in range(0, len(Xe), 1000)])
        pred = net.head(Z).argmax(1).numpy()
    seen = np.isin(yte, classes) if classes is not None else np.ones(len(yte), bool)
    truth = yte[seen] if classes is None else np.array([remap[c] for c in yte[seen]])
    accuracy = np.mean(pred[seen] == truth)
    info = f"test accuracy of the CNN on its {len(np.unique(truth))} classes: {accuracy:.3f}"
    CACHE.mkdir(exist_ok=True)
    np.savez(path, Z=Z.numpy(), y=yte, info=info)
    return Z.numpy(), yte, info


def resnet_embeddings(n_samples, seed=0):
    """``FeatureExtractor("resnet18", pretrained=False, image_size=32)`` features of a
    stratified subset of the Fashion-MNIST test images (weights drawn with ``seed``)."""
    path = CACHE / f"resnet18_random_n{n_samples}_s{seed}.npz"
    if path.exists():
        data = np.load(path)
        return data["Z"], data["y"], str(data["info"])
    from skcce import FeatureExtractor
    from skcce.datasets import load_dataset

    X, y = load_dataset("fashion-mnist", split="test")
    idx, _ = train_test_split(np.arange(len(X)), train_size=n_samples, stratify=y, random_state=0)
    idx = np.sort(idx)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        fe = FeatureExtractor("resnet18", pretrained=False, image_size=32, device="cpu")
        Z = fe.fit_transform(X[idx])
    info = "randomly initialised weights (torch seed 0)"
    CACHE.mkdir(exist_ok=True)
    np.savez(path, Z=Z, y=y[idx], info=info)
    return Z, y[idx], info


def probe(X, y):
    """Supervised ceiling: 5-fold out-of-fold predictions of a logistic regression."""
    model = make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000))
    folds = StratifiedKFold(5, shuffle=True, random_state=0)
    t0 = time.perf_counter()
    pred = cross_val_predict(model, X, y, cv=folds)
    return {
        "name": "linear probe (supervised, 5-fold CV)",
        "acc": float(np.mean(pred == y)),
        "acc_std": 0.0,
        "accs": ["-"],
        "nmi": float(normalized_mutual_info_score(y, pred)),
        "ari": float(adjusted_rand_score(y, pred)),
        "time": (time.perf_counter() - t0) / 5,
        "min_cluster": int(np.bincount(pred).min()),
    }


def run(name, X, y, seeds):
    """All methods on one dataset; returns the markdown section and the rows."""
    k = len(np.unique(y))
    cov = "full" if X.shape[1] <= 64 else "diag"
    rows = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        for label, extra in (
            ("CCEClustering (defaults)", {}),
            ('CCEClustering(init="random")', {"init": "random"}),
            ('CCEClustering(init="kmeans")', {"init": "kmeans"}),
        ):
            rows.append(
                evaluate(
                    label,
                    lambda s, extra=extra: CCEClustering(n_clusters=k, random_state=s, **extra),
                    X,
                    y,
                    seeds,
                )
            )
        rows.append(evaluate("KMeans(n_init=10)", kmeans_factory(k), X, y, seeds))
        rows.append(
            evaluate(
                f"GaussianMixture({cov})",
                lambda s: GaussianMixture(k, covariance_type=cov, random_state=s),
                X,
                y,
                seeds,
            )
        )
    rows.append(probe(X, y))
    table = markdown_table(rows)
    print(f"\n### {name}\n\n{table}\n", flush=True)
    return f"### {name}\n\n{table}\n", rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument(
        "--threads", default="default", help="torch threads ('default': leave torch's own)"
    )
    parser.add_argument("--cnn-epochs", type=int, default=2)
    parser.add_argument("--resnet-samples", type=int, default=3000)
    parser.add_argument(
        "--datasets",
        default="iris,wine,breast_cancer,cnn,cnn-half,resnet",
        help="comma-separated subset of iris,wine,breast_cancer,cnn,cnn-half,resnet",
    )
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args(argv)
    command = "python benchmarks/bench_embeddings.py " + shlex.join(
        sys.argv[1:] if argv is None else list(argv)
    )
    if args.threads != "default":
        torch.set_num_threads(int(args.threads))
    seeds = list(range(args.seeds))
    wanted = args.datasets.split(",")
    t_start = time.perf_counter()
    parts, verdicts, notes = [], [], []
    for key in wanted:
        if key in ("iris", "wine", "breast_cancer"):
            loader = {"iris": load_iris, "wine": load_wine, "breast_cancer": load_breast_cancer}
            X, y = loader[key](return_X_y=True)
            X = StandardScaler().fit_transform(X)
            title = f"{key}: {X.shape[0]} x {X.shape[1]}, standardised, {len(np.unique(y))} classes"
        elif key in ("cnn", "cnn-half"):
            classes = None if key == "cnn" else [0, 1, 2, 3, 4]
            X, y, info = cnn_embeddings(classes, args.cnn_epochs)
            which = "all 10 classes" if classes is None else "classes 0-4 only"
            title = (
                f"{key}: Fashion-MNIST test split, {X.shape[0]} x {X.shape[1]} features of a "
                f"small CNN trained with labels on the training split ({which}), 10 classes"
            )
            notes.append(f"{key}: {info}")
        elif key == "resnet":
            X, y, info = resnet_embeddings(args.resnet_samples)
            title = (
                f"resnet: {X.shape[0]} Fashion-MNIST test images x {X.shape[1]} features of "
                "FeatureExtractor('resnet18', pretrained=False, image_size=32), 10 classes"
            )
            notes.append(f"resnet: {info}")
        else:
            raise SystemExit(f"unknown dataset {key!r}")
        part, rows = run(title, X, y, seeds)
        parts.append(part)
        by = {r["name"]: r for r in rows}
        km = by["KMeans(n_init=10)"]["acc"]
        chance = float(np.bincount(y).max() / len(y))
        line = f"{key}: KMeans {km:.3f}, chance (largest class) {chance:.3f}"
        for label in (
            "CCEClustering (defaults)",
            'CCEClustering(init="random")',
            'CCEClustering(init="kmeans")',
        ):
            line += f"; {label} {by[label]['acc'] - km:+.3f}"
        verdicts.append(line)
    wall = time.perf_counter() - t_start
    for line in verdicts:
        print(line)
    body = "\n".join(
        [
            "## Frozen embeddings and small tabular data (`benchmarks/bench_embeddings.py`)",
            "",
            f"Measured {datetime.date.today()} by `{command}` (seeds {seeds}, total wall "
            f"time {wall:.0f} s).",
            "",
            *machine_lines(("cpu",)),
            "",
            "CCEClustering with only `n_clusters` set (its defaults: the linear head, "
            '`init="auto"`) and with each `init`; *acc / ref* and *time / ref* are ratios to '
            "KMeans(n_init=10) in the same run; *smallest cluster* is the smallest cluster over "
            "the seeds (0 = a collapsed seed). The linear probe is supervised (it sees the "
            "labels): the ceiling a linear head could reach, not a competitor.",
            "",
            *[f"- {n}" for n in notes],
            "",
            *parts,
            "Mean accuracy minus KMeans's, per dataset:",
            "",
            *[f"- {line}" for line in verdicts],
        ]
    )
    return publish("bench_embeddings", body, args)


if __name__ == "__main__":
    sys.exit(main())
