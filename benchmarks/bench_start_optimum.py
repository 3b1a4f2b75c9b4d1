"""The KMeans start's local optimum, and the moves that leave it (records 023, 025).

The linear head starts from k-means++ seeds drawn from ``max(2000, 20 K)`` evenly spaced rows
of a random subsample of ``subsample_size(n, K)`` rows, refined by Lloyd's iterations on that
subsample (**Lloyd**), then by split-and-merge rounds kept while the subsample's inertia falls
(**Lloyd + swaps**, the start as built: :func:`skcce.models._kmeans_init.kmeans_centroids`).
Against them, in the same run and from the same subsample: the seeds drawn from the whole
subsample (**pool: subsample**), and the same seeds refined on all n rows (**Lloyd: all
rows**); and
``KMeans(n_clusters=K, n_init=1, random_state=seed)`` on all rows and the default
``CCEClustering(n_clusters=K, random_state=seed)`` fit. Each start is scored by the accuracy
(:func:`skcce.metrics.clustering_accuracy`) of its nearest-centroid partition of all rows;
the seconds are those of seeding, Lloyd and the swaps. Data: ``bench_scale.make_mixture`` (balanced,
spread 0.5), drawn once with seed 0; the seeds 0, 1, ... draw the subsample and seed the
estimators. Writes the section ``bench_start_optimum`` of docs/scale.md.

Usage::

    python benchmarks/bench_start_optimum.py                   # about 3 minutes
    python benchmarks/bench_start_optimum.py --cases 10000:64:100:3 --no-write
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _report import machine_lines, publish  # noqa: E402
from bench_scale import make_mixture  # noqa: E402

DOC = HERE.parent / "docs" / "scale.md"
SECTION = "bench_start_optimum"
CASES = "100000:256:100:5,100000:64:100:3,100000:64:1000:1"
METHODS = (
    "Lloyd",
    "pool: subsample",
    "Lloyd: all rows",
    "Lloyd + swaps",
    "KMeans(n_init=1)",
    "CCEClustering",
)


def _starts(X, k, seed):
    """``{method: (centroids, seconds)}`` of the four starts from one subsample."""
    from sklearn.cluster import KMeans, kmeans_plusplus

    from skcce.models._kmeans_init import subsample_size
    from skcce.models._kmeans_swap import swap_refine

    rng = np.random.default_rng(seed)
    m = subsample_size(len(X), k)
    Z = X[np.sort(rng.choice(len(X), m, replace=False))]
    out = {}
    for name, pool in (("Lloyd", max(2_000, 20 * k)), ("pool: subsample", m)):
        t0 = time.perf_counter()
        few = Z[np.linspace(0, m - 1, min(m, pool)).astype(np.intp)].astype(np.float64)
        seeds, _ = kmeans_plusplus(few, k, random_state=seed)
        centroids = KMeans(k, init=seeds.astype(Z.dtype), n_init=1).fit(Z).cluster_centers_
        out[name] = (centroids, time.perf_counter() - t0)
        if name == "Lloyd":
            t0 = time.perf_counter()
            full = KMeans(k, init=seeds.astype(X.dtype), n_init=1).fit(X).cluster_centers_
            out["Lloyd: all rows"] = (full, out["Lloyd"][1] + time.perf_counter() - t0)
            t0 = time.perf_counter()
            swapped, _ = swap_refine(
                Z, centroids, lambda c: KMeans(k, init=c, n_init=1).fit(Z).cluster_centers_
            )
            out["Lloyd + swaps"] = (swapped, out["Lloyd"][1] + time.perf_counter() - t0)
    return out


def run_case(n, d, k, n_seeds):
    """Per method: the accuracies (one per seed) and mean seconds."""
    from sklearn.cluster import KMeans

    from skcce import CCEClustering
    from skcce.metrics import clustering_accuracy
    from skcce.models._kmeans_init import _squared_distances

    X, y = make_mixture(n, d, k, "balanced", seed=0)
    acc = {m: [] for m in METHODS}
    seconds = {m: [] for m in METHODS}
    for seed in range(n_seeds):
        for name, (centroids, s) in _starts(X, k, seed).items():
            labels = np.concatenate(
                [_squared_distances(X[i : i + 8192], centroids).argmin(1)
                 for i in range(0, n, 8192)]
            )  # fmt: skip
            acc[name].append(clustering_accuracy(y, labels))
            seconds[name].append(s)
        t0 = time.perf_counter()
        labels = KMeans(k, n_init=1, random_state=seed).fit(X).labels_
        seconds["KMeans(n_init=1)"].append(time.perf_counter() - t0)
        acc["KMeans(n_init=1)"].append(clustering_accuracy(y, labels))
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            labels = CCEClustering(n_clusters=k, random_state=seed).fit(X).labels_
        seconds["CCEClustering"].append(time.perf_counter() - t0)
        acc["CCEClustering"].append(clustering_accuracy(y, labels))
        print(n, d, k, seed, {m: round(a[-1], 3) for m, a in acc.items()}, flush=True)
    return {m: (acc[m], float(np.mean(seconds[m]))) for m in METHODS}


def report(rows):
    lines = [
        "## The KMeans start's local optimum (`benchmarks/bench_start_optimum.py`)",
        "",
        "Accuracy of the nearest-centroid partition of all rows: k-means++ on "
        "`max(2000, 20 K)` rows of the subsample and Lloyd on the subsample (**Lloyd**), "
        "the seeds drawn from the whole subsample, those seeds refined on all rows, the "
        "start as built (**Lloyd + swaps**: split-and-merge rounds after Lloyd, record 025), "
        "`KMeans(n_init=1)` on all rows, and the default `CCEClustering` fit (its labels). "
        "`make_mixture` data (balanced, spread 0.5) drawn with seed 0; each seed draws the "
        "subsample and seeds the estimators. Per cell: the mean accuracy over the seeds, "
        "then the mean seconds (for the starts: seeding, Lloyd and the swaps). Threads: defaults.",
        "",
        "Machine:",
        "",
        *machine_lines(),
        "",
        "| n | d | K | seeds | " + " | ".join(METHODS) + " |",
        "|---|---|---|---|" + "---|" * len(METHODS),
    ]
    for (n, d, k, n_seeds), r in rows:
        cells = [f"{np.mean(r[m][0]):.3f}, {r[m][1]:.3g} s" for m in METHODS]
        lines.append(f"| {n:,} | {d} | {k} | {n_seeds} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default=CASES, help="n:d:K:seeds, comma-separated")
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args(argv)
    rows = []
    for case in args.cases.split(","):
        key = tuple(int(v) for v in case.split(":"))
        rows.append((key, run_case(*key)))
    return publish(SECTION, report(rows), args, path=DOC, echo=True)


if __name__ == "__main__":
    raise SystemExit(main())
