"""Side-by-side comparison of CCEClustering with KMeans and GaussianMixture (demo, benchmarks)."""

from __future__ import annotations

import time

import numpy as np
from sklearn.cluster import KMeans
from sklearn.metrics import adjusted_rand_score, normalized_mutual_info_score

from skcce.metrics import clustering_accuracy


def evaluate(name, make, X, y, seeds):
    """Fit ``make(seed)`` on X for each seed; return a row of mean/std metrics and timings.

    Parameters
    ----------
    name : str
        Row label.
    make : callable
        ``make(seed)`` returns an unfitted clusterer with ``fit_predict``.
    X : array-like of shape (n_samples, n_features)
    y : array-like of shape (n_samples,)
        True classes, used only for scoring.
    seeds : list of int

    Returns
    -------
    dict
        ``name``, ``acc``, ``acc_std``, ``nmi``, ``ari``, ``time`` (mean seconds per fit),
        ``accs`` (per seed) and ``min_cluster`` (smallest cluster size over the seeds).
    """
    accs, nmis, aris, times, smallest = [], [], [], [], []
    for seed in seeds:
        est = make(seed)
        t0 = time.perf_counter()
        labels = est.fit_predict(X)
        times.append(time.perf_counter() - t0)
        accs.append(clustering_accuracy(y, labels))
        nmis.append(normalized_mutual_info_score(y, labels))
        aris.append(adjusted_rand_score(y, labels))
        k = getattr(est, "n_clusters", None) or getattr(est, "n_components", None)
        smallest.append(int(np.bincount(labels, minlength=k).min()))
    return {
        "name": name,
        "acc": float(np.mean(accs)),
        "acc_std": float(np.std(accs)),
        "accs": [round(float(a), 4) for a in accs],
        "nmi": float(np.mean(nmis)),
        "ari": float(np.mean(aris)),
        "time": float(np.mean(times)),
        "min_cluster": int(min(smallest)),
    }


def kmeans_factory(n_clusters):
    """``KMeans(n_clusters, n_init=10)`` per seed: the reference of the quality targets."""
    return lambda seed: KMeans(n_clusters, n_init=10, random_state=seed)


def markdown_table(rows, reference="KMeans(n_init=10)"):
    """Rows of :func:`evaluate` as a markdown table with accuracy and time ratios (and a
    "solver share of fit time" column when a row has ``solver_share``)."""
    ref = next((r for r in rows if r["name"] == reference), None)
    share = any("solver_share" in r for r in rows)
    lines = [
        "| method | accuracy mean (std) | per seed | NMI | ARI | fit time (s) | smallest cluster"
        " | acc / ref | time / ref |" + (" solver share of fit time |" if share else ""),
        "|---|---|---|---|---|---|---|---|---|" + ("---|" if share else ""),
    ]
    for r in rows:
        acc_ratio = f"{r['acc'] / ref['acc']:.2f}" if ref else "-"
        time_ratio = f"{r['time'] / ref['time']:.2f}" if ref else "-"
        line = (
            f"| {r['name']} | {r['acc']:.3f} ({r['acc_std']:.3f}) | {r['accs']} | {r['nmi']:.3f}"
            f" | {r['ari']:.3f} | {r['time']:.2f} | {r['min_cluster']} | {acc_ratio}"
            f" | {time_ratio} |"
        )
        if share:
            line += f" {r['solver_share']:.0%} |" if "solver_share" in r else " – |"
        lines.append(line)
    return "\n".join(lines)
