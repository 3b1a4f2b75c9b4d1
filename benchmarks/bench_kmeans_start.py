"""The KMeans start of the linear head at K = 10, 50 and 100: ten Lloyd iterations or convergence.

``CCEClustering(init="kmeans")`` (and ``init="auto"`` on the linear head) starts every restart
from k-means++ seeds refined by Lloyd's iterations on a random subsample of the rows
(``skcce/models/_kmeans_init.py``). The rule before record 018 stopped after 10 iterations on
``max(5000, 100 K)`` rows; the rule after it runs to scikit-learn's convergence (``KMeans``
defaults, ``tol=1e-4``, at most 300 iterations) on ``subsample_size(n, K) = min(n, max(5000,
256 K))`` rows. Data: ``bench_scale.make_mixture`` (K centres from N(0, spread^2 I_d), unit
noise, float32), balanced and Zipf cluster sizes, spread 0.5 (well separated) and 0.4
(overlapping), n = 10 000, d = 64 unless told; each ``--seeds`` value draws the data and seeds
the estimators (data seed = estimator seed).

Two tables:

- the start alone, computed with scikit-learn as ``kmeans_centroids`` does (the subsample drawn
  with ``numpy.random.default_rng(seed)``, k-means++ seeds from at most ``max(2000, 20 K)``
  evenly spaced rows of it, then ``KMeans(init=seeds, n_init=1, max_iter=...)`` on the
  subsample, every row labelled by its nearest centroid), for the old rule, the new rule and the
  two half-way rules (old iterations on the new subsample, convergence on the old subsample).
  The estimator computes its start on centred inputs divided by one global standard deviation;
  Lloyd's iterations and scikit-learn's tolerance (relative to the data's variance) do not
  change under that map, so the raw rows give the same start up to rounding;
- ``CCEClustering(n_clusters=K, random_state=seed).fit`` with the defaults of the installed
  code (the new rule, followed since record 025 by split-and-merge rounds) against
  ``KMeans(n_clusters=K, n_init=1, random_state=seed)`` in the
  same run, and the same fit with the library's start put back to the old rule (``old_start``
  replaces ``subsample_size`` and ``kmeans_centroids`` of ``skcce.models._kmeans_init`` for the
  fit): accuracy (:func:`skcce.metrics.clustering_accuracy`), empty clusters, wall time of the
  fit and its ratio to KMeans's. One untimed warm-up fit of each comes first.

Threads: 1 unless ``--threads`` (torch's and, through threadpoolctl, the BLAS and OpenMP
pools of scikit-learn; ``default`` leaves them alone). The section ``bench_kmeans_start`` of
docs/benchmarks.md holds the one-thread run; ``--threads default --section
bench_kmeans_start_default`` writes the run on the default threads beside it.

Usage: ``python benchmarks/bench_kmeans_start.py [--k 10,50,100] [--seeds 0,1,2] [--n 10000]
[--d 64] [--threads 1] [--section NAME] [--no-write]``
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import os
import shlex
import sys
import time
from pathlib import Path

import numpy as np
import torch
from sklearn.cluster import KMeans, kmeans_plusplus

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _report import machine_lines, publish  # noqa: E402
from bench_ordinary import code_version  # noqa: E402
from bench_scale import make_mixture  # noqa: E402

from skcce import CCEClustering  # noqa: E402
from skcce.metrics import clustering_accuracy  # noqa: E402
from skcce.models import _kmeans_init as ki  # noqa: E402
from skcce.models._kmeans_init import MAX_SAMPLES, subsample_size  # noqa: E402

#: (cluster sizes, spread of the centres) of the mixtures.
MIXTURES = (("balanced", 0.5), ("zipf", 0.5), ("balanced", 0.4), ("zipf", 0.4))
#: Lloyd iterations and rows per cluster of the rule before record 018.
OLD_ITER, OLD_ROWS_PER_CLUSTER = 10, 100
#: scikit-learn's ``KMeans`` default ``max_iter`` (the new rule's limit; ``tol`` stops it first).
CONVERGED = KMeans().max_iter


def old_subsample_size(n, k):
    """Rows of the old rule's subsample: all ``n`` up to ``max(5000, 100 k)``."""
    return int(min(n, max(MAX_SAMPLES, OLD_ROWS_PER_CLUSTER * k)))


#: name -> (Lloyd iterations at most, rows of the subsample as a function of n and K).
RULES = {
    "old: 10 iterations, max(5000, 100K) rows": (OLD_ITER, old_subsample_size),
    "10 iterations, new rows": (OLD_ITER, subsample_size),
    "converged, old rows": (CONVERGED, old_subsample_size),
    "new: converged, max(5000, 256K) rows": (CONVERGED, subsample_size),
}
OLD, NEW = next(iter(RULES)), list(RULES)[-1]


def start_centroids(Z, k, draw, max_iter):
    """k-means++ seeds (drawn from ``draw``) on evenly spaced rows of ``Z``, then at most
    ``max_iter`` Lloyd iterations on all of ``Z``: the fitted ``KMeans``."""
    m = min(len(Z), max(2_000, 20 * k))
    few = Z[np.linspace(0, len(Z) - 1, m).astype(np.intp)].astype(np.float64)
    seeds, _ = kmeans_plusplus(few, k, random_state=draw)
    return KMeans(k, init=seeds.astype(Z.dtype), n_init=1, max_iter=max_iter).fit(Z)


def start_labels(X, k, seed, max_iter, rows):
    """Labels of all rows of ``X`` under one KMeans start: (labels, Lloyd iterations, seconds)."""
    t0 = time.perf_counter()
    rng = np.random.default_rng(seed)
    n = len(X)
    idx = np.sort(rng.choice(n, size=rows, replace=False)) if rows < n else np.arange(n)
    km = start_centroids(X[idx], k, int(rng.integers(2**31 - 1)), max_iter)
    return km.predict(X), int(km.n_iter_), time.perf_counter() - t0


@contextlib.contextmanager
def old_start():
    """The library's KMeans start under the old rule (10 iterations on max(5000, 100 K) rows)
    while active: ``subsample_size`` and ``kmeans_centroids`` of ``_kmeans_init`` replaced."""

    def centroids(Z, n_clusters, seed):
        Z = np.asarray(Z)
        return start_centroids(Z, n_clusters, seed, OLD_ITER).cluster_centers_.astype(np.float64)

    real = ki.subsample_size, ki.kmeans_centroids
    ki.subsample_size, ki.kmeans_centroids = old_subsample_size, centroids
    try:
        yield
    finally:
        ki.subsample_size, ki.kmeans_centroids = real


def timed_fit(est, X):
    """Fit ``est`` on ``X``: (labels, seconds)."""
    t0 = time.perf_counter()
    est.fit(X)
    return np.asarray(est.labels_), time.perf_counter() - t0


def empty_clusters(labels, k):
    return int(k - len(np.unique(labels)))


def measure(kind, spread, k, seed, n, d):
    """One (mixture, K, seed): the accuracy of every start rule, and the two fits."""
    X, y = make_mixture(n, d, k, kind, seed=seed, spread=spread)
    out = {"starts": {}}
    for name, (max_iter, rows_of) in RULES.items():
        labels, n_iter, seconds = start_labels(X, k, seed, max_iter, rows_of(n, k))
        out["starts"][name] = (clustering_accuracy(y, labels), n_iter, seconds)
    est = CCEClustering(n_clusters=k, random_state=seed)
    fits = {
        "cce": (est, contextlib.nullcontext()),
        "cce_old": (CCEClustering(n_clusters=k, random_state=seed), old_start()),
        "kmeans": (KMeans(k, n_init=1, random_state=seed), contextlib.nullcontext()),
    }
    for name, (model, scope) in fits.items():
        with scope:
            labels, seconds = timed_fit(model, X)
        out[name] = (clustering_accuracy(y, labels), empty_clusters(labels, k), seconds)
    out["restarts"] = int(getattr(est, "n_init_", 0))
    return out


def warm_up(d):
    """One small untimed fit of each estimator (a process's one-off costs are not a fit's)."""
    X, _ = make_mixture(2_000, d, 10, "balanced", seed=99)
    CCEClustering(n_clusters=10, random_state=0).fit(X)
    KMeans(10, n_init=1, random_state=0).fit(X)


def start_table(results, ks, n):
    head = ["mixture", "K", "rows old / new", *RULES, "Lloyd iterations, new", "start time (s)"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for (kind, spread, k), runs in results.items():
        acc = {r: np.mean([run["starts"][r][0] for run in runs]) for r in RULES}
        iters = [run["starts"][NEW][1] for run in runs]
        t_old = np.mean([run["starts"][OLD][2] for run in runs])
        t_new = np.mean([run["starts"][NEW][2] for run in runs])
        cells = [f"{kind}, spread {spread}", str(k)]
        cells.append(f"{old_subsample_size(n, k)} / {subsample_size(n, k)}")
        cells += [f"{acc[r]:.3f}" for r in RULES]
        cells += [f"{min(iters)}-{max(iters)}", f"{t_old:.3f} / {t_new:.3f}"]
        lines.append("| " + " | ".join(cells) + " |")
    getters = [lambda run, r=r: run["starts"][r][0] for r in RULES]
    lines.append(_mean_line(results, ks, getters, 2))
    return "\n".join(lines)


def _mean_line(results, ks, getters, after):
    """The last row of a table (three leading columns, ``after`` trailing blank ones): per K,
    the mean over mixtures and seeds of each getter, the values of the Ks joined by " / "."""
    cells = []
    for get in getters:
        per_k = [
            np.mean([get(run) for (_, _, k), runs in results.items() if k == kk for run in runs])
            for kk in ks
        ]
        cells.append(" / ".join(f"{v:.3f}" for v in per_k))
    label = "mean over mixtures, K = " + " / ".join(str(k) for k in ks)
    return "| " + " | ".join([label, "", "", *cells, *[""] * after]) + " |"


def fit_table(results, ks):
    head = [
        "mixture",
        "K",
        "CCEClustering per seed",
        "CCEClustering",
        "CCEClustering, old start",
        "KMeans(n_init=1)",
        "Δ KMeans",
        "empty clusters CCE / old start / KMeans",
        "fit time CCE / old start / KMeans (s)",
        "time / KMeans",
    ]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for (kind, spread, k), runs in results.items():
        fits = {name: [run[name] for run in runs] for name in ("cce", "cce_old", "kmeans")}
        acc = {name: np.mean([r[0] for r in rs]) for name, rs in fits.items()}
        secs = {name: np.mean([r[2] for r in rs]) for name, rs in fits.items()}
        cells = [
            f"{kind}, spread {spread}",
            str(k),
            ", ".join(f"{r[0]:.3f}" for r in fits["cce"]),
            f"{acc['cce']:.3f}",
            f"{acc['cce_old']:.3f}",
            f"{acc['kmeans']:.3f}",
            f"{acc['cce'] - acc['kmeans']:+.3f}",
            " / ".join(str(sum(r[1] for r in rs)) for rs in fits.values()),
            " / ".join(f"{t:.2f}" for t in secs.values()),
            f"{secs['cce'] / secs['kmeans']:.1f}",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    getters = [lambda run, name=name: run[name][0] for name in ("cce", "cce_old", "kmeans")]
    lines.append(_mean_line(results, ks, getters, 4))
    return "\n".join(lines)


@contextlib.contextmanager
def _threads(value):
    """Torch's and the BLAS/OpenMP pools' threads set to ``value`` ('default': untouched)."""
    if value == "default":
        yield
        return
    from threadpoolctl import threadpool_limits

    before = torch.get_num_threads()
    torch.set_num_threads(int(value))
    try:
        with threadpool_limits(limits=int(value)):
            yield
    finally:
        torch.set_num_threads(before)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--k", default="10,50,100", help="numbers of clusters")
    parser.add_argument("--seeds", default="0,1,2", help="data and estimator seeds")
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--d", type=int, default=64)
    parser.add_argument("--threads", default="1", help="threads ('default': leave them)")
    parser.add_argument("--section", default="bench_kmeans_start", help="section to write")
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args(argv)
    command = "python benchmarks/bench_kmeans_start.py " + shlex.join(
        sys.argv[1:] if argv is None else list(argv)
    )
    ks = [int(v) for v in args.k.split(",") if v]
    seeds = [int(v) for v in args.seeds.split(",") if v]
    load = os.getloadavg()[0]
    start = time.perf_counter()
    results, restarts = {}, set()
    with _threads(args.threads):
        warm_up(args.d)
        for kind, spread in MIXTURES:
            for k in ks:
                runs = results.setdefault((kind, spread, k), [])
                for seed in seeds:
                    runs.append(measure(kind, spread, k, seed, args.n, args.d))
                    restarts.add(runs[-1]["restarts"])
                    print(
                        f"{kind:8s} spread {spread} K {k:4d} seed {seed}: start old "
                        f"{runs[-1]['starts'][OLD][0]:.3f} new {runs[-1]['starts'][NEW][0]:.3f}"
                        f"; CCE {runs[-1]['cce'][0]:.3f} (old start {runs[-1]['cce_old'][0]:.3f})"
                        f" KMeans {runs[-1]['kmeans'][0]:.3f}",
                        flush=True,
                    )
        machine = machine_lines(("cpu",))
    wall = time.perf_counter() - start
    body = "\n".join(
        [
            "## The KMeans start at K = 10, 50 and 100 (`benchmarks/bench_kmeans_start.py`)"
            + ("" if args.threads == "1" else f", threads: {args.threads}"),
            "",
            f"Measured {datetime.date.today()} by `{command.strip()}` (seeds {seeds}, each the "
            f"data seed and the estimators' seed; n = {args.n}, d = {args.d}; wall time "
            f"{wall:.0f} s; load average {load:.2f} at start; code {code_version()}).",
            "",
            *machine,
            "",
            "Gaussian mixtures of `bench_scale.make_mixture`, unit noise around centres drawn "
            "with standard deviation *spread* (0.5: well separated, 0.4: overlapping). "
            "Accuracy is Hungarian-matched, mean over the seeds.",
            "",
            "### The start alone",
            "",
            "Accuracy of the labels of the KMeans start (k-means++ seeds, then Lloyd's "
            "iterations on the subsample, every row to its nearest centroid), computed with "
            "scikit-learn as `kmeans_centroids` does: the rule before record 018 (10 "
            "iterations on max(5000, 100 K) rows), the two half-way rules, and the rule after "
            "it (scikit-learn's convergence, tol=1e-4, on max(5000, 256 K) rows). *Lloyd "
            "iterations, new* is the range over the seeds; *start time* is old / new rule.",
            "",
            start_table(results, ks, args.n),
            "",
            "### The default fit against KMeans(n_init=1)",
            "",
            "`CCEClustering(n_clusters=K, random_state=seed).fit` with the installed defaults "
            f"(the new start; restarts per fit: {sorted(restarts)}), the same fit with the "
            "library's start put back to the old rule (*old start*: `subsample_size` and "
            "`kmeans_centroids` of `skcce.models._kmeans_init` replaced for the fit), and "
            "`KMeans(n_clusters=K, n_init=1, random_state=seed)`, on the same data in the same "
            "run. *Δ KMeans* is CCEClustering (new start) minus KMeans; *empty clusters* is the "
            "total over the seeds; fit times are means; *time / KMeans* is for the new start.",
            "",
            fit_table(results, ks),
        ]
    )
    return publish(args.section, body, args, echo=True)


if __name__ == "__main__":
    sys.exit(main())
