"""Which restart to keep: the restarts' agreement alone, or its rank sum with the likelihood.

Every fit of ``CCEClustering`` with the defaults trains several restarts and keeps one
(:mod:`skcce._engine._select`). This script fits each (set, seed) once, captures all the
restarts, and replays two rules on the same restarts:

* ``agreement + likelihood``: the fewest empty clusters, then the best rank sum of the
  agreement with the other restarts and the partition's spherical-Gaussian likelihood;
* ``agreement``: the fewest empty clusters, then the highest agreement.

Two tables: the mean accuracy per set over ``--seeds`` (data and estimator seed, as
``bench_ordinary.py``), against ``KMeans(n_init=10)`` on the same data; and the spread over
``--spread-seeds`` estimator seeds on fixed data (data seed 0): the range of accuracy of each
rule beside KMeans's. The sets are ``benchmarks/_ordinary_data.py``'s.

Usage: ``python benchmarks/bench_restart_rule.py [--sets a,b] [--seeds 6,7,8]
[--spread-sets digits,varied,fmnist-3k] [--spread-seeds 0-11] [--no-write]``.
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
from sklearn.cluster import KMeans

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _ordinary_data import Unavailable, build  # noqa: E402
from _report import machine_lines, publish  # noqa: E402

import skcce._clustering as clustering  # noqa: E402
from skcce import CCEClustering  # noqa: E402
from skcce._engine import _select  # noqa: E402
from skcce.metrics import clustering_accuracy  # noqa: E402

RULES = ("agreement + likelihood", "agreement")


def _seeds(text):
    if "-" in text and "," not in text:
        lo, hi = (int(v) for v in text.split("-"))
        return list(range(lo, hi + 1))
    return [int(v) for v in text.split(",") if v]


def replay_fit(X, y, k, seed):
    """Fit the defaults once; the accuracy of the restart each rule keeps."""
    captured = {}
    real = clustering.choose_restart

    def spy(finished, X_, inputs, features):
        captured["both"] = real(finished, X_, inputs, features)[0]
        captured["agreement"] = _select.choose(finished, None)[0]
        return real(finished, X_, inputs, features)

    clustering.choose_restart = spy
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            CCEClustering(n_clusters=k, random_state=seed).fit(X)
    finally:
        clustering.choose_restart = real
    return {
        "agreement + likelihood": clustering_accuracy(y, captured["both"].labels),
        "agreement": clustering_accuracy(y, captured["agreement"].labels),
    }


def kmeans_accuracy(X, y, k, seed):
    return clustering_accuracy(y, KMeans(k, n_init=10, random_state=seed).fit(X).labels_)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", default=(
        "blobs5,varied,imbalanced,aniso,blobs20d,iris,wine,breast_cancer,digits,digits-lt10,"
        "digits-lt100,fmnist-lt10,fmnist-lt100,fmnist10k,cnn,cnn-unseen,cnn-lt10,cnn-lt100,"
        "cnn-3k,cnn-9k,fmnist-3k,fmnist-9k"))  # fmt: skip
    parser.add_argument("--seeds", default="6,7,8")
    parser.add_argument("--spread-sets", default="digits,varied,fmnist-3k")
    parser.add_argument("--spread-seeds", default="0-11")
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args(argv)
    start = time.time()
    rows, totals = [], {r: [] for r in RULES}
    within = {r: 0 for r in RULES}
    for name in [s for s in args.sets.split(",") if s]:
        acc = {r: [] for r in RULES}
        km = []
        try:
            for seed in _seeds(args.seeds):
                X, y, _ = build(name, seed)
                k = len(np.unique(y))
                for rule, value in replay_fit(X, y, k, seed).items():
                    acc[rule].append(value)
                km.append(kmeans_accuracy(X, y, k, seed))
        except Unavailable as exc:
            print(f"{name}: skipped ({exc})", flush=True)
            continue
        kmean = float(np.mean(km))
        cells = []
        for rule in RULES:
            mean = float(np.mean(acc[rule]))
            totals[rule].append(mean - kmean)
            within[rule] += mean >= kmean - 0.005
            cells.append(f"{mean:.3f} ({mean - kmean:+.3f})")
        rows.append(f"| {name} | {kmean:.3f} | " + " | ".join(cells) + " |")
        print(rows[-1], flush=True)
    n_sets = len(rows)
    summary = " | ".join(
        f"{np.mean(totals[r]):+.3f}; {within[r]}/{n_sets}" for r in RULES
    )
    spread_rows = []
    for name in [s for s in args.spread_sets.split(",") if s]:
        try:
            X, y, _ = build(name, 0)
        except Unavailable as exc:
            print(f"{name}: skipped ({exc})", flush=True)
            continue
        k = len(np.unique(y))
        acc = {r: [] for r in RULES}
        km = []
        for seed in _seeds(args.spread_seeds):
            for rule, value in replay_fit(X, y, k, seed).items():
                acc[rule].append(value)
            km.append(kmeans_accuracy(X, y, k, seed))
        cells = [
            f"{np.mean(v):.3f} ({np.min(v):.3f}-{np.max(v):.3f}, range {np.ptp(v):.3f})"
            for v in [km] + [acc[r] for r in RULES]
        ]
        spread_rows.append(f"| {name} | " + " | ".join(cells) + " |")
        print(spread_rows[-1], flush=True)
    command = "python benchmarks/bench_restart_rule.py " + shlex.join(argv or sys.argv[1:])
    body = "\n".join(
        [
            "## The kept restart: agreement alone or with the likelihood "
            "(`benchmarks/bench_restart_rule.py`)",
            "",
            f"Measured {datetime.date.today()} by `{command.strip()}` "
            f"(wall time {time.time() - start:.0f} s); CCEClustering with its defaults, each "
            "fit replayed under both rules (same restarts).",
            "",
            *machine_lines(),
            "",
            f"Mean accuracy over seeds {args.seeds} (data and estimator seed); in brackets the "
            "difference to KMeans(n_init=10) on the same data.",
            "",
            "| set | KMeans(n_init=10) | " + " | ".join(RULES) + " |",
            "|---|---|" + "---|" * len(RULES),
            *rows,
            f"| mean Δ; sets ≥ KMeans − 0.005 | | {summary} |",
            "",
            f"Spread over estimator seeds {args.spread_seeds} on fixed data (data seed 0): mean "
            "(min-max, range).",
            "",
            "| set | KMeans(n_init=10) | " + " | ".join(RULES) + " |",
            "|---|---|" + "---|" * len(RULES),
            *spread_rows,
        ]
    )
    return publish("bench_restart_rule", body, args, echo=True)


if __name__ == "__main__":
    sys.exit(main())
