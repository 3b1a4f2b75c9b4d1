"""The pseudo-label solver's tolerance in training: default fits at several ``tol`` (record 022).

``CCEClustering(n_clusters=K, random_state=seed, solver_options={"tol": tol})`` for each
tolerance of ``--tols`` (``auto`` is the default, ``1 / batch_size``), and
``KMeans(n_clusters=K, n_init=1, random_state=seed)``, all in the same run. Data:
scikit-learn's digits (K = 10) and ``bench_scale.make_mixture`` cases (K centres from
N(0, 0.5^2 I_d), unit noise, float32; balanced or Zipf cluster sizes), each seed drawing the
mixture and seeding the estimators. Reported per case (means over the seeds): accuracy
(:func:`skcce.metrics.clustering_accuracy`), the solver's iterations summed over the fit
(``history_``'s ``solver_iter``), its uncertified batches (``solver_unconverged``) and the
wall time with its ratio to KMeans's. One untimed warm-up fit comes first.

Cases (``--cases``): ``digits`` or ``n:d:K:kind`` tuples. Threads: torch's default unless
``--threads 1``. Writes the section ``bench_solver_tol`` (``_threads1`` with one thread) of
docs/scale.md.

Usage::

    python benchmarks/bench_solver_tol.py                     # about 5 minutes
    python benchmarks/bench_solver_tol.py --cases digits --seeds 0 --no-write
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
SECTION = "bench_solver_tol"
CASES = (
    "digits,10000:64:100:zipf,100000:64:100:balanced,100000:256:100:balanced,10000:64:1000:balanced"
)
TOLS = "auto,1e-5,1e-2"


def _data(case, seed):
    """``(X, y, K)`` of a case at a seed (digits do not depend on the seed)."""
    if case == "digits":
        from sklearn.datasets import load_digits

        X, y = load_digits(return_X_y=True)
        return X.astype(np.float32), y, 10
    n, d, k, kind = case.split(":")
    X, y = make_mixture(int(n), int(d), int(k), kind, seed=seed)
    return X, y, int(k)


def _fit(tol, X, k, seed):
    """``(labels, seconds, solver iterations, uncertified batches)`` of one fit; ``tol``
    "kmeans" is ``KMeans(n_init=1)``."""
    from sklearn.cluster import KMeans

    from skcce import CCEClustering

    t0 = time.perf_counter()
    if tol == "kmeans":
        labels = KMeans(n_clusters=k, n_init=1, random_state=seed).fit(X).labels_
        return labels, time.perf_counter() - t0, 0, 0
    options = {"tol": tol if tol == "auto" else float(tol)}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = CCEClustering(n_clusters=k, random_state=seed, solver_options=options).fit(X)
    seconds = time.perf_counter() - t0
    iters = sum(int(h["solver_iter"]) for h in est.history_)
    uncertified = sum(int(h["solver_unconverged"]) for h in est.history_)
    return est.labels_, seconds, iters, uncertified


def run_case(case, seeds, tols):
    """Per tolerance (and "kmeans"): means over ``seeds`` of accuracy, seconds, solver
    iterations and uncertified batches."""
    from skcce.metrics import clustering_accuracy

    methods = ["kmeans", *tols]
    out = {m: {"acc": [], "seconds": [], "iters": [], "uncertified": []} for m in methods}
    for seed in seeds:
        X, y, k = _data(case, seed)
        for m in methods:
            labels, seconds, iters, uncertified = _fit(m, X, k, seed)
            out[m]["acc"].append(clustering_accuracy(y, labels))
            out[m]["seconds"].append(seconds)
            out[m]["iters"].append(iters)
            out[m]["uncertified"].append(uncertified)
            print(case, seed, m, round(out[m]["acc"][-1], 4), round(seconds, 2), iters,
                  uncertified, flush=True)  # fmt: skip
    return {m: {key: float(np.mean(v)) for key, v in r.items()} for m, r in out.items()}


def report(rows, seeds, tols, threads):
    head = " | ".join(f"tol {t}: acc, s (× KMeans), iterations" for t in tols)
    lines = [
        "## The solver's tolerance in training (`benchmarks/bench_solver_tol.py`)",
        "",
        '`CCEClustering(n_clusters=K, random_state=seed, solver_options={"tol": tol})` '
        "(`auto`, the default: `1 / batch_size`) and `KMeans(n_clusters=K, n_init=1)` in the "
        "same run, on digits and `make_mixture` data (spread 0.5); means over the seeds "
        f"{', '.join(map(str, seeds))} (each seed draws the mixture and seeds the "
        f"estimators). Threads: {threads}. Iterations: the solver's, summed over the fit; "
        "uncertified batches are counted in brackets where there are any.",
        "",
        "Machine:",
        "",
        *machine_lines(),
        "",
        f"| data | K | KMeans acc, s | {head} |",
        "|---|---|---|" + "---|" * len(tols),
    ]
    for case, r in rows:
        km = r["kmeans"]
        cells = []
        for t in tols:
            c = r[t]
            extra = f" ({c['uncertified']:.3g} uncertified)" if c["uncertified"] else ""
            cells.append(
                f"{c['acc']:.3f}, {c['seconds']:.3g} ({c['seconds'] / km['seconds']:.2g}×), "
                f"{c['iters']:.0f}{extra}"
            )
        k = 10 if case == "digits" else int(case.split(":")[2])
        name = "digits" if case == "digits" else case.rsplit(":", 2)[0].replace(":", " × ")
        kind = "" if case == "digits" else f" {case.split(':')[3]}"
        lines.append(
            f"| {name}{kind} | {k} | {km['acc']:.3f}, {km['seconds']:.3g} | "
            + " | ".join(cells)
            + " |"
        )
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default=CASES, help="digits or n:d:K:kind, comma-separated")
    parser.add_argument("--tols", default=TOLS, help="auto or floats, comma-separated")
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--threads", default="default", help="'default' or 1")
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args(argv)
    threads, suffix = apply_threads(args.threads)
    seeds = [int(s) for s in args.seeds.split(",")]
    tols = args.tols.split(",")
    Xw, _ = make_mixture(2000, 64, 20, "balanced", seed=99)
    _fit("auto", Xw, 20, 0)  # warm-up: one-time costs of the process are not a fit's
    rows = [(case, run_case(case, seeds, tols)) for case in args.cases.split(",")]
    section = SECTION + suffix
    return publish(section, report(rows, seeds, tols, threads), args, path=DOC, echo=True)


if __name__ == "__main__":
    raise SystemExit(main())
