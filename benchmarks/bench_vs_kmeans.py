"""Clustering quality and fit time: CCEClustering vs KMeans vs GaussianMixture, one run.

Data: scikit-learn's digits (raw 64-d pixels) and Fashion-MNIST (all 70 000 images as raw
784-d pixels in [0, 1], from Debian's ``dataset-fashion-mnist``; skipped when absent).
CCEClustering runs with its defaults (``n_clusters`` = number of classes), once with the
collision loss and once with ``loss="shannon"`` for the paper's comparison; KMeans with
``n_init=10``; GaussianMixture (full covariances on digits, diagonal on Fashion-MNIST).
Every method is fitted with the same seeds; the table gives accuracy (Hungarian), NMI, ARI,
mean fit time and the smallest cluster over the seeds, and ratios to KMeans.

Usage: ``python benchmarks/bench_vs_kmeans.py [--seeds 3] [--threads 1] [--no-write]``
"""

from __future__ import annotations

import argparse
import datetime
import sys
from pathlib import Path

import numpy as np
import torch
from sklearn.datasets import load_digits
from sklearn.mixture import GaussianMixture

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _report import machine_lines, publish  # noqa: E402

from skcce import CCEClustering  # noqa: E402
from skcce.cli._compare import evaluate, kmeans_factory, markdown_table  # noqa: E402
from skcce.cli.demo import load_fashion_mnist  # noqa: E402


def run(name, X, y, seeds, gmm_covariance):
    k = len(np.unique(y))
    rows = [
        evaluate(
            "CCEClustering", lambda s: CCEClustering(n_clusters=k, random_state=s), X, y, seeds
        ),
        evaluate(
            'CCEClustering(loss="shannon")',
            lambda s: CCEClustering(n_clusters=k, loss="shannon", random_state=s),
            X,
            y,
            seeds,
        ),
        evaluate("KMeans(n_init=10)", kmeans_factory(k), X, y, seeds),
        evaluate(
            f"GaussianMixture({gmm_covariance})",
            lambda s: GaussianMixture(k, covariance_type=gmm_covariance, random_state=s),
            X,
            y,
            seeds,
        ),
    ]
    table = markdown_table(rows)
    print(f"\n### {name}\n\n{table}\n", flush=True)
    return f"### {name}\n\n{table}\n"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    seeds = list(range(args.seeds))
    parts = []
    X, y = load_digits(return_X_y=True)
    parts.append(run(f"digits: {X.shape[0]} x {X.shape[1]}, 10 classes", X, y, seeds, "full"))
    fm = load_fashion_mnist()
    if fm is None:
        parts.append("Fashion-MNIST: not installed on this machine (skipped).\n")
    else:
        X, y = fm
        parts.append(
            run(
                f"Fashion-MNIST: {X.shape[0]} x {X.shape[1]} raw pixels in [0, 1], 10 classes",
                X,
                y,
                seeds,
                "diag",
            )
        )
    body = "\n".join(
        [
            "## Clustering quality vs KMeans (`benchmarks/bench_vs_kmeans.py`)",
            "",
            f"Measured {datetime.date.today()} by `python benchmarks/bench_vs_kmeans.py "
            f"--seeds {args.seeds} --threads {args.threads}` (seeds {seeds}).",
            "",
            *machine_lines(("cpu",)),
            "",
            "CCEClustering with its defaults; *acc / ref* and *time / ref* are ratios to "
            "KMeans(n_init=10) in the same run; *smallest cluster* is the smallest cluster "
            "size over all seeds (0 = a collapsed seed).",
            "",
            *parts,
        ]
    )
    return publish("bench_vs_kmeans", body, args)


if __name__ == "__main__":
    sys.exit(main())
