"""Choosing the number of clusters (issue 25): ``CCEClustering(n_clusters="auto")`` against
KMeans + silhouette, GaussianMixture + BIC and HDBSCAN on data whose K is known.

Every method searches the same range, K = 2 .. 2 K_true (HDBSCAN takes no K: its own number
of clusters, noise left out, is reported). For each set and seed: the chosen K, the NMI and
accuracy of the final clustering against the true classes, and the wall time of the whole
search (default threads). GaussianMixture uses full covariances up to 64 features and
diagonal ones above (full ones on 256- and 784-d data are not a practical peer). The sets:

* iris, wine, breast cancer (standardised), digits (raw pixels), digits long-tailed r = 10;
* Fashion-MNIST and the CNN embeddings of ``bench_embeddings.py`` (all 10 classes; and
  "unseen": the 5 classes the CNN never saw), each a random 5 000-row subsample per seed;
* ``make_blobs(3000, centers=K, n_features=d)`` for K = 3, 5, 8 and d = 2, 20;
* and, not counted in the hit rates, 2 000 rows of uniform noise in 10-D (no structure: the
  right answer is "none", K = 1 with ``n_clusters_range=(1, ...)``).

``--cost`` also times the whole search on digits (1 797 rows) and the Fashion-MNIST test split
(10 000 rows), K = 2 .. 20, for ``n_clusters="auto"`` and KMeans + silhouette, one after the
other in one process with torch's and scikit-learn's default threads (issue 25's cost target).
A small fit before any measurement takes the kernels' one-time compile out of the times.

Records are cached in ``benchmarks/.cache/select_k.json`` (one per set, seed and method), so
an interrupted run goes on where it stopped; ``--report-only`` rewrites the table from them.

Usage: ``python benchmarks/bench_select_k.py [--seeds 0 1 2] [--sets iris wine ...]
[--methods skcce kmeans-silhouette ...] [--report-only] [--no-write]``
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np
from sklearn.cluster import HDBSCAN, KMeans
from sklearn.datasets import make_blobs
from sklearn.metrics import normalized_mutual_info_score, silhouette_score
from sklearn.mixture import GaussianMixture

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _ordinary_data as data  # noqa: E402
from _report import machine_lines, publish  # noqa: E402

from skcce import CCEClustering  # noqa: E402
from skcce.metrics import clustering_accuracy  # noqa: E402

CACHE = Path(__file__).resolve().parent / ".cache" / "select_k.json"
SUBSAMPLE = 5000
METHODS = ("skcce", "kmeans-silhouette", "gmm-bic", "hdbscan")


def _blobs(k, d):
    def build(seed):
        X, y = make_blobs(3000, n_features=d, centers=k, random_state=seed)
        return X, y

    return build


def _subsample(name):
    def build(seed):
        X, y, _ = data.build(name, seed)
        rng = np.random.default_rng(seed)
        keep = np.sort(rng.choice(len(X), min(SUBSAMPLE, len(X)), replace=False))
        return X[keep], y[keep]

    return build


def _fixed(name):
    def build(seed):
        X, y, _ = data.build(name, seed)
        return X, y

    return build


def _uniform(seed):
    return np.random.default_rng(seed).uniform(size=(2000, 10)), np.zeros(2000, dtype=np.int64)


#: name -> (true K, builder(seed) -> (X, y)); the null set last.
SETS = {
    "iris": (3, _fixed("iris")),
    "wine": (3, _fixed("wine")),
    "breast_cancer": (2, _fixed("breast_cancer")),
    "blobs3-2d": (3, _blobs(3, 2)),
    "blobs5-2d": (5, _blobs(5, 2)),
    "blobs8-2d": (8, _blobs(8, 2)),
    "blobs3-20d": (3, _blobs(3, 20)),
    "blobs5-20d": (5, _blobs(5, 20)),
    "blobs8-20d": (8, _blobs(8, 20)),
    "digits": (10, _fixed("digits")),
    "digits-lt10": (10, _fixed("digits-lt10")),
    "fmnist5k": (10, _subsample("fmnist10k")),
    "cnn5k": (10, _subsample("cnn")),
    "cnn-unseen5k": (5, _subsample("cnn-unseen")),
    "uniform10d": (0, _uniform),
}
#: The cost rows: the whole data, K = 2 .. 20.
COST_SETS = {"digits": "digits", "fmnist10k": "fmnist10k"}
COST_METHODS = ("skcce", "kmeans-silhouette")
NULL_SETS = {"uniform10d"}


def _final(y, labels):
    return float(normalized_mutual_info_score(y, labels)), float(clustering_accuracy(y, labels))


def run_skcce(X, ks, seed):
    est = CCEClustering(n_clusters="auto", n_clusters_range=(ks[0], ks[-1]), random_state=seed)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        est.fit(X)
    none = any("no number of clusters stands out" in str(w.message) for w in caught)
    curve = {int(k): round(float(v), 4) for k, v in est.n_clusters_scores_.items()}
    return est.n_clusters_, est.labels_, {"curve": curve, "no_structure_warning": none}


def run_kmeans_silhouette(X, ks, seed):
    best = (-2.0, None, None)
    for k in ks:
        labels = KMeans(k, n_init=10, random_state=seed).fit_predict(X)
        s = silhouette_score(X, labels)
        if s > best[0]:
            best = (s, k, labels)
    return best[1], best[2], {}


def run_gmm_bic(X, ks, seed):
    cov = "full" if X.shape[1] <= 64 else "diag"
    best = (np.inf, None, None)
    for k in ks:
        gmm = GaussianMixture(k, covariance_type=cov, random_state=seed, reg_covar=1e-4).fit(X)
        bic = gmm.bic(X)
        if bic < best[0]:
            best = (bic, k, gmm.predict(X))
    return best[1], best[2], {"covariance_type": cov}


def run_hdbscan(X, ks, seed):
    labels = HDBSCAN().fit_predict(X)
    return len(set(labels.tolist()) - {-1}), labels, {"noise": int((labels == -1).sum())}


RUNNERS = {
    "skcce": run_skcce,
    "kmeans-silhouette": run_kmeans_silhouette,
    "gmm-bic": run_gmm_bic,
    "hdbscan": run_hdbscan,
}


def warm_up():
    """One small fit first: the solver kernels' one-time compile (or cache load, measured by
    bench_coldstart) is not part of any search's time."""
    X = np.random.default_rng(0).normal(size=(300, 8))
    CCEClustering(n_clusters=3, n_init=3, max_epochs=2, random_state=0).fit(X)


def _load():
    return json.loads(CACHE.read_text()) if CACHE.exists() else {}


def _save(records):
    CACHE.parent.mkdir(parents=True, exist_ok=True)
    tmp = CACHE.with_suffix(".tmp")
    tmp.write_text(json.dumps(records, indent=1, sort_keys=True))
    tmp.replace(CACHE)


def measure(name, seed, method, cost=False):
    if cost:
        X, y, _ = data.build(COST_SETS[name], seed)
        k_true = 10
    else:
        k_true, build = SETS[name]
        X, y = build(seed)
    X = np.asarray(X, dtype=np.float32 if X.shape[1] > 64 else np.float64)
    ks = list(range(2, 2 * (k_true or 5) + 1))
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        k, labels, extra = RUNNERS[method](X, ks, seed)
    seconds = time.perf_counter() - start
    nmi, acc = _final(y, labels) if k_true else (float("nan"), float("nan"))
    return {"k": int(k), "k_true": k_true, "nmi": nmi, "acc": acc, "seconds": seconds, **extra}


def _hit_table(records, names, seeds, methods):
    lines = [
        "| set (true K) | " + " | ".join(methods) + " |",
        "|---|" + "---|" * len(methods),
    ]
    for name in names:
        cells = []
        for m in methods:
            recs = [records.get(f"{name}|{s}|{m}", {}) for s in seeds]
            ks = [f"{r.get('k', '·')}{' †' if r.get('no_structure_warning') else ''}" for r in recs]
            cells.append(", ".join(ks))
        k_true = SETS[name][0] or "none"
        lines.append(f"| {name} ({k_true}) | " + " | ".join(cells) + " |")
    return lines


def _summary(records, names, seeds, methods):
    counted = [n for n in names if n not in NULL_SETS]
    lines = [
        "| method | exact K | within ±1 | sets exact in every seed | mean NMI | mean accuracy "
        "| mean time (s) |",
        "|---|---|---|---|---|---|---|",
    ]
    for m in methods:
        rec = [records.get(f"{n}|{s}|{m}") for n in counted for s in seeds]
        rec = [r for r in rec if r is not None]
        if not rec:
            continue
        exact = sum(r["k"] == r["k_true"] for r in rec)
        near = sum(abs(r["k"] - r["k_true"]) <= 1 for r in rec)
        every = sum(
            all(records.get(f"{n}|{s}|{m}", {}).get("k") == SETS[n][0] for s in seeds)
            for n in counted
        )
        lines.append(
            f"| {m} | {exact}/{len(rec)} ({exact / len(rec):.0%}) | {near}/{len(rec)} "
            f"({near / len(rec):.0%}) | {every}/{len(counted)} "
            f"| {np.mean([r['nmi'] for r in rec]):.3f} | {np.mean([r['acc'] for r in rec]):.3f} "
            f"| {np.mean([r['seconds'] for r in rec]):.1f} |"
        )
    return lines


def _detail(records, names, seeds, methods):
    lines = ["| set | seed | " + " | ".join(f"{m}: K, NMI, s" for m in methods) + " |"]
    lines.append("|---|---|" + "---|" * len(methods))
    for name in names:
        for s in seeds:
            cells = []
            for m in methods:
                r = records.get(f"{name}|{s}|{m}")
                cells.append("·" if r is None else f"{r['k']}, {r['nmi']:.3f}, {r['seconds']:.1f}")
            lines.append(f"| {name} | {s} | " + " | ".join(cells) + " |")
    return lines


def _cost_table(records):
    lines = [
        "| data (K = 2 .. 20) | n_clusters='auto' (s) | KMeans + silhouette (s) | ratio | "
        "K chosen (auto / silhouette) |",
        "|---|---|---|---|---|",
    ]
    for name in COST_SETS:
        ours, peer = (
            records.get(f"cost|{name}|skcce"),
            records.get(f"cost|{name}|kmeans-silhouette"),
        )
        if ours is None or peer is None:
            continue
        lines.append(
            f"| {name} | {ours['seconds']:.1f} | {peer['seconds']:.1f} "
            f"| {ours['seconds'] / peer['seconds']:.2f}x | {ours['k']} / {peer['k']} |"
        )
    return lines


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--sets", nargs="+", default=list(SETS), choices=list(SETS))
    parser.add_argument("--methods", nargs="+", default=list(METHODS), choices=list(METHODS))
    parser.add_argument("--report-only", action="store_true")
    parser.add_argument("--cost", action="store_true", help="time the search on the cost sets")
    parser.add_argument("--redo", action="store_true", help="measure again what is cached")
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args(argv)
    records = _load()
    if not args.report_only and "skcce" in args.methods:
        warm_up()
    if not args.report_only:
        for name in args.sets:
            for seed in args.seeds:
                for m in args.methods:
                    key = f"{name}|{seed}|{m}"
                    if key in records and not args.redo:
                        continue
                    try:
                        records[key] = measure(name, seed, m)
                    except data.Unavailable as exc:
                        print(f"skip {name}: {exc}", flush=True)
                        break
                    r = records[key]
                    print(
                        f"{key}: K={r['k']} (true {r['k_true']}) NMI={r['nmi']:.3f} "
                        f"{r['seconds']:.1f}s",
                        flush=True,
                    )
                    _save(records)
    if args.cost and not args.report_only:
        for name in COST_SETS:
            for m in COST_METHODS:
                if f"cost|{name}|{m}" in records and not args.redo:
                    continue
                records[f"cost|{name}|{m}"] = r = measure(name, 0, m, cost=True)
                print(f"cost {name} {m}: K={r['k']} {r['seconds']:.1f}s", flush=True)
                _save(records)
    names = [n for n in SETS if any(f"{n}|{s}|skcce" in records for s in args.seeds)]
    body = "\n".join(
        [
            "## Choosing the number of clusters (`benchmarks/bench_select_k.py`)",
            "",
            f"Measured {datetime.date.today()} by `python benchmarks/bench_select_k.py` and "
            f"`--cost` (seeds {args.seeds}); every method searches K = 2 .. 2 K_true; "
            "CCEClustering with `n_clusters='auto'` and every other parameter at its default. "
            "Hit rates count the sets with a true K (not the uniform noise).",
            "",
            *machine_lines(("cpu",)),
            "",
            "Chosen K per seed († : `fit` warned that no K stands out, `NoStructureWarning`; "
            "with `n_clusters_range=(1, ...)` the answer would have been K = 1):",
            "",
            *_hit_table(records, names, args.seeds, METHODS),
            "",
            "Summary:",
            "",
            *_summary(records, names, args.seeds, METHODS),
            "",
            "Per seed (chosen K, NMI of the final clustering, wall seconds of the search):",
            "",
            *_detail(records, names, args.seeds, METHODS),
            "",
            "Cost of the whole search (`--cost`; seed 0, run alone, default threads):",
            "",
            *_cost_table(records),
        ]
    )
    return publish("bench_select_k", body, args, echo=True)


if __name__ == "__main__":
    sys.exit(main())
