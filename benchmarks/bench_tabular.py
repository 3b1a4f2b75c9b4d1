"""Small standardised tabular sets: how training length, the fairness weight, lambda and
weight decay move the linear head's accuracy against KMeans (issue 12), beside the data where
the defaults win.

For iris, wine and breast cancer (``StandardScaler``), raw digits pixels as the balanced
reference, and the two CNN embeddings of ``bench_embeddings.py`` (Fashion-MNIST test split,
features of a small CNN trained with labels on all 10 classes or on classes 0-4; built once
and cached in ``benchmarks/.cache/``): KMeans(n_init=10) and CCEClustering with its defaults
except the settings of the row. Mean accuracy over the seeds, in one run. With the default
batch of 250 rows the tabular sets are one or three batches, so ``max_epochs=10`` is 10 to 30
optimiser steps; longer training minimises the clustering loss further.

Usage: ``python benchmarks/bench_tabular.py [--seeds 3] [--no-embeddings] [--no-write]``
"""

from __future__ import annotations

import argparse
import datetime
import sys
import warnings
from pathlib import Path

import numpy as np
from sklearn.cluster import KMeans
from sklearn.datasets import load_breast_cancer, load_digits, load_iris, load_wine
from sklearn.exceptions import ConvergenceWarning
from sklearn.preprocessing import StandardScaler

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _report import machine_lines, publish  # noqa: E402

from skcce import CCEClustering  # noqa: E402
from skcce.metrics import clustering_accuracy  # noqa: E402

DATASETS = {"iris": load_iris, "wine": load_wine, "breast_cancer": load_breast_cancer}
#: the balanced reference: raw digits pixels, as bench_vs_kmeans (not standardised)
RAW = {"digits (raw)": load_digits}
SETTINGS = [
    ("defaults (max_epochs=10)", {}),
    ("max_epochs=30", {"max_epochs": 30}),
    ("max_epochs=100", {"max_epochs": 100}),
    ("fairness_weight=0.3", {"fairness_weight": 0.3}),
    ("fairness_weight=0", {"fairness_weight": 0.0}),
    ("lam=30", {"lam": 30.0}),
    ("lam=30, weight_decay=0.01", {"lam": 30.0, "weight_decay": 0.01}),
]
#: the embeddings of bench_embeddings.py: (classes the CNN was trained on, its epochs)
EMBEDDINGS = {"cnn": (None, 2), "cnn-half": ([0, 1, 2, 3, 4], 2)}


def _mean_accuracy(cls, kwargs, X, y, seeds):
    accs = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        for s in seeds:
            accs.append(clustering_accuracy(y, cls(random_state=s, **kwargs).fit(X).labels_))
    return float(np.mean(accs))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument(
        "--no-embeddings", action="store_true", help="leave out the two CNN embeddings"
    )
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args(argv)
    seeds = range(args.seeds)
    names = [*DATASETS, *RAW]
    header = "| setting | " + " | ".join(names) + " |"
    lines = [header, "|---|" + "---|" * len(names)]
    data = {}
    for name, load in {**DATASETS, **RAW}.items():
        X, y = load(return_X_y=True)
        data[name] = (X if name in RAW else StandardScaler().fit_transform(X), y)
    if not args.no_embeddings:
        from bench_embeddings import cnn_embeddings

        for name, (classes, epochs) in EMBEDDINGS.items():
            X, y, _ = cnn_embeddings(classes, epochs)
            data[name] = (X, y)
            names.append(name)
    ref = {
        name: _mean_accuracy(KMeans, {"n_clusters": len(np.unique(y)), "n_init": 10}, X, y, seeds)
        for name, (X, y) in data.items()
    }
    lines.append("| KMeans(n_init=10) | " + " | ".join(f"{ref[n]:.3f}" for n in names) + " |")
    print(lines[-1], flush=True)
    for label, params in SETTINGS:
        cells = []
        for name, (X, y) in data.items():
            kwargs = {"n_clusters": len(np.unique(y)), **params}
            acc = _mean_accuracy(CCEClustering, kwargs, X, y, seeds)
            cells.append(f"{acc:.3f} ({acc - ref[name]:+.3f})")
        lines.append(f"| CCEClustering, {label} | " + " | ".join(cells) + " |")
        print(lines[-1], flush=True)
    body = "\n".join(
        [
            "## Small tabular sets: training length, fairness weight, lambda "
            "(`benchmarks/bench_tabular.py`)",
            "",
            f"Measured {datetime.date.today()} by `python benchmarks/bench_tabular.py --seeds "
            f"{args.seeds}{' --no-embeddings' if args.no_embeddings else ''}` "
            f"(seeds {list(seeds)}): mean accuracy, in brackets the difference to "
            "KMeans(n_init=10) in the same run; every other parameter at its default. *cnn* and "
            "*cnn-half*: the Fashion-MNIST embeddings of `bench_embeddings.py` (10 000 x 256).",
            "",
            *machine_lines(("cpu",)),
            "",
            *lines,
        ]
    )
    return publish("bench_tabular", body, args)


if __name__ == "__main__":
    sys.exit(main())
