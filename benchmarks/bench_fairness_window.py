"""Default fits under the batch fairness term and under the window term (record 020).

``CCEClustering(n_clusters=K, random_state=seed).fit`` with the installed defaults, whose
fairness term is taken on a window of ``max(N, ceil(K H_K))`` rows (the batch plus the running
marginal of earlier batches, :mod:`skcce._engine._marginal`), against the same fit with the
window switched off (``window_rows`` patched to 1 row: every batch is its own window, the
supplement's batch term) and against ``KMeans(n_clusters=K, n_init=1, random_state=seed)``,
all in the same run. Data: ``bench_scale.make_mixture`` (K centres from N(0, spread^2 I_d),
unit noise, float32; balanced or Zipf cluster sizes), each seed drawing the data and seeding
the estimators. Reported per case (means over the seeds): accuracy
(:func:`skcce.metrics.clustering_accuracy`), empty clusters, and wall time of the fit with its
ratio to KMeans's. One untimed warm-up fit of each method comes first.

Cases (``--cases``): ``n:d:K:kind:spread`` tuples, kind ``balanced`` or ``zipf``.
``--skip-batch`` lists the cases (by position, from 0) whose batch-term fit is not run (it
takes minutes at K = 1000). Threads: torch's default unless ``--threads 1``. Writes the
section ``bench_fairness_window`` (``_threads1`` with one thread) of docs/scale.md.

Usage::

    python benchmarks/bench_fairness_window.py                     # about 15 minutes
    python benchmarks/bench_fairness_window.py --cases 10000:64:100:balanced:0.5 --seeds 0
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
from _report import apply_threads, machine_lines, publish  # noqa: E402
from bench_scale import make_mixture  # noqa: E402

DOC = HERE.parent / "docs" / "scale.md"
SECTION = "bench_fairness_window"
CASES = ("10000:64:50:balanced:0.4,10000:64:100:balanced:0.5,10000:64:100:zipf:0.5,"
         "100000:64:100:balanced:0.5,10000:64:1000:balanced:0.5")  # fmt: skip


def _fit(method, X, k, seed):
    """``(labels, seconds)`` of one fit: "window" (the defaults), "batch" (the window
    switched off) or "kmeans"."""
    from sklearn.cluster import KMeans

    from skcce import CCEClustering
    from skcce._engine import _marginal

    t0 = time.perf_counter()
    if method == "kmeans":
        labels = KMeans(n_clusters=k, n_init=1, random_state=seed).fit(X).labels_
        return labels, time.perf_counter() - t0
    window_rows = _marginal.window_rows
    if method == "batch":
        _marginal.window_rows = lambda _k: 1
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            labels = CCEClustering(n_clusters=k, random_state=seed).fit(X).labels_
    finally:
        _marginal.window_rows = window_rows
    return labels, time.perf_counter() - t0


def run_case(n, d, k, kind, spread, seeds, methods):
    """Per method: mean accuracy, mean empty clusters and mean seconds over ``seeds``."""
    from skcce.metrics import clustering_accuracy

    out = {m: {"acc": [], "empty": [], "seconds": []} for m in methods}
    Xw, _ = make_mixture(2000, d, min(k, 50), kind, seed=99, spread=spread)
    for m in methods:  # warm-up: one-time costs of the process are not a fit's
        _fit(m, Xw, min(k, 50), 0)
    for seed in seeds:
        X, y = make_mixture(n, d, k, kind, seed=seed, spread=spread)
        for m in methods:
            labels, seconds = _fit(m, X, k, seed)
            out[m]["acc"].append(clustering_accuracy(y, labels))
            out[m]["empty"].append(k - np.unique(labels).size)
            out[m]["seconds"].append(seconds)
            print(n, d, k, kind, spread, seed, m, round(out[m]["acc"][-1], 3),
                  out[m]["empty"][-1], round(seconds, 2), flush=True)  # fmt: skip
    return {m: {key: float(np.mean(v)) for key, v in r.items()} for m, r in out.items()}


def _cell(result, key, fmt):
    return "not run" if result is None else format(result[key], fmt)


def _ratio(result, kmeans):
    if result is None:
        return "not run"
    return f"{result['seconds']:.3g} ({result['seconds'] / kmeans['seconds']:.2g}×)"


def report(rows, seeds, threads):
    lines = [
        "## The fairness term's window: default fits (`benchmarks/bench_fairness_window.py`)",
        "",
        "`CCEClustering(n_clusters=K, random_state=seed)` with its defaults (**window**: the "
        "fairness term on `max(N, ceil(K H_K))` rows, the batch plus the running marginal of "
        "earlier batches), the same fit with every batch its own window (**batch**: the "
        "supplement's term), and `KMeans(n_clusters=K, n_init=1)` in the same run, on "
        "`make_mixture` data; means over the seeds "
        f"{', '.join(map(str, seeds))} (each seed draws the data and seeds the estimators). "
        f"Threads: {threads}. Time ratio: the fit's time over KMeans's.",
        "",
        "Machine:",
        "",
        *machine_lines(),
        "",
        "| n | d | K | sizes | spread | KMeans acc | batch acc | window acc | batch empty "
        "| window empty | KMeans s | batch s (× KMeans) | window s (× KMeans) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for (n, d, k, kind, spread), r in rows:
        km = r["kmeans"]
        b = r.get("batch")
        lines.append(
            f"| {n:,} | {d} | {k} | {kind} | {spread} | {km['acc']:.3f} | "
            f"{_cell(b, 'acc', '.3f')} | {r['window']['acc']:.3f} | {_cell(b, 'empty', '.1f')} | "
            f"{r['window']['empty']:.1f} | {km['seconds']:.3g} | {_ratio(b, km)} | "
            f"{_ratio(r['window'], km)} |"
        )
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default=CASES, help="n:d:K:kind:spread, comma-separated")
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--skip-batch", default="4", help="case positions without the batch fit")
    parser.add_argument("--threads", default="default", help="'default' or 1")
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args(argv)
    threads, suffix = apply_threads(args.threads)
    seeds = [int(s) for s in args.seeds.split(",")]
    skip = {int(s) for s in args.skip_batch.split(",") if s}
    rows = []
    for i, case in enumerate(args.cases.split(",")):
        n, d, k, kind, spread = case.split(":")
        key = (int(n), int(d), int(k), kind, float(spread))
        methods = ["kmeans", "window"] + ([] if i in skip else ["batch"])
        rows.append((key, run_case(*key, seeds, methods)))
    section = SECTION + suffix
    return publish(section, report(rows, seeds, threads), args, path=DOC, echo=True)


if __name__ == "__main__":
    raise SystemExit(main())
