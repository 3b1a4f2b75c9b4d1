"""Clustering quality and fit time: CCEClustering vs KMeans vs GaussianMixture, one run.

Data: scikit-learn's digits (raw 64-d pixels) and Fashion-MNIST (all 70 000 images as raw
784-d pixels in [0, 1], from Debian's ``dataset-fashion-mnist``; skipped when absent).
CCEClustering runs with its defaults (``n_clusters`` = number of classes), with
``init="kmeans"`` (every restart from the KMeans head), and with
``loss="shannon"`` for the paper's comparison; KMeans with
``n_init=10``; GaussianMixture (full covariances on digits, diagonal on Fashion-MNIST).
Every method is fitted with the same seeds; the table gives accuracy (Hungarian), NMI, ARI,
mean fit time and the smallest cluster over the seeds, and ratios to KMeans. The cost of the
``init="kmeans"`` step is timed inside the ``init="kmeans"`` fits (a timer around
``skcce._engine._build.init_head``, all restarts together) and given as a share of the fit time; the
"solver share of fit time" column is the time of the pseudo-label solves (a timer around the
engine's call of ``skcce.solvers._solve``) over the CCEClustering fit time.

Usage: ``python benchmarks/bench_vs_kmeans.py [--seeds 3] [--threads default|N] [--device D]
[--no-fashion] [--no-write]``
"""

from __future__ import annotations

import argparse
import datetime
import os
import sys
import time
from pathlib import Path

import numpy as np
import torch
from sklearn.datasets import load_digits
from sklearn.mixture import GaussianMixture

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _report import machine_lines, publish  # noqa: E402

from skcce import CCEClustering  # noqa: E402
from skcce._engine import _build  # noqa: E402
from skcce.cli._compare import evaluate, kmeans_factory, markdown_table  # noqa: E402
from skcce.cli.demo import load_fashion_mnist  # noqa: E402


class _Timer:
    """Adds up the wall time spent in the patched functions ``module.name`` of ``targets``
    while active (a call inside another timed call is not counted twice)."""

    def __init__(self, *targets):
        self.targets = targets

    def __enter__(self):
        self.total, self._depth, self._originals = 0.0, 0, []
        for module, name in self.targets:
            original = getattr(module, name)
            self._originals.append((module, name, original))
            setattr(module, name, self._timed(original))
        return self

    def _timed(self, original):
        def timed(*args, **kwargs):
            self._depth += 1
            t0 = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                self._depth -= 1
                if self._depth == 0:
                    self.total += time.perf_counter() - t0

        return timed

    def __exit__(self, *exc):
        for module, name, original in self._originals:
            setattr(module, name, original)


def _InitTimer():  # noqa: N802
    """The KMeans init of the linear head (``skcce._engine._build.init_head``)."""
    return _Timer((_build, "init_head"))


def _SolverTimer():  # noqa: N802
    """The engine's pseudo-label solves: ``skcce._engine._step._solve`` (restarts one by
    one) and ``_Batched.solve_all`` (restarts trained together, all their solves)."""
    import skcce._engine._batched as batched
    import skcce._engine._step as step

    return _Timer((step, "_solve"), (batched._Batched, "solve_all"))


def _with_solver_share(name, make, X, y, seeds):
    """:func:`evaluate` with the solver's share of the fit time in ``solver_share``."""
    with _SolverTimer() as solver:
        row = evaluate(name, make, X, y, seeds)
    row["solver_share"] = solver.total / (row["time"] * len(seeds))
    return row


def _in_turn(makes, X, y, seeds):
    """Rows of :func:`_with_solver_share` for ``makes`` (name -> ``make(seed)``), fitted in
    turn seed by seed, the order alternating from one seed to the next: a drift of the
    machine's speed during the run (other work on a shared host) then lands on every row
    alike, which matters for the default-thread row and its 1-thread twin."""
    parts = {name: [] for name in makes}
    for i, seed in enumerate(seeds):
        for name in list(makes)[:: 1 if i % 2 == 0 else -1]:
            parts[name].append(_with_solver_share(name, makes[name], X, y, [seed]))
    merged = []
    for name, rows in parts.items():
        accs = [a for r in rows for a in r["accs"]]
        times = [r["time"] for r in rows]
        merged.append(
            {
                "name": name,
                "acc": float(np.mean(accs)),
                "acc_std": float(np.std(accs)),
                "accs": accs,
                "nmi": float(np.mean([r["nmi"] for r in rows])),
                "ari": float(np.mean([r["ari"] for r in rows])),
                "time": float(np.mean(times)),
                "min_cluster": min(r["min_cluster"] for r in rows),
                "solver_share": sum(r["solver_share"] * r["time"] for r in rows) / sum(times),
            }
        )
    return merged


class _OneThread:
    """An estimator whose ``fit_predict`` runs under ``torch.set_num_threads(1)`` (the
    caller's choice), restored afterwards: the 1-thread twin of a default-thread row."""

    def __init__(self, est):
        self.est, self.n_clusters = est, est.n_clusters

    def fit_predict(self, X):
        before = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            return self.est.fit_predict(X)
        finally:
            torch.set_num_threads(before)


def run(name, X, y, seeds, gmm_covariance, device="auto", twin=True, threads="default"):
    k = len(np.unique(y))
    # the first fit on a dataset is slower than the next ones (measured on Fashion-MNIST: 3.86 s,
    # then 3.2-3.6 s for the same seeds), which would land on the first row's first seed: one
    # short fit on the same data first
    CCEClustering(n_clusters=k, n_init=1, max_epochs=1, random_state=0, device=device).fit(X)
    label = "CCEClustering" + (f'(device="{device}")' if device != "auto" else "")
    label += ", torch's default threads" if threads == "default" else f", torch threads {threads}"
    makes = {label: lambda s: CCEClustering(
        n_clusters=k, random_state=s, device=device
    )}  # fmt: skip
    if twin:
        makes[label + ", caller's torch.set_num_threads(1)"] = lambda s: _OneThread(
            CCEClustering(n_clusters=k, random_state=s, device=device)
        )
    default, *twin_rows = _in_turn(makes, X, y, seeds)
    with _InitTimer() as timer:
        kmeans_head = _with_solver_share(
            'CCEClustering(init="kmeans")',
            lambda s: CCEClustering(n_clusters=k, init="kmeans", random_state=s, device=device),
            X,
            y,
            seeds,
        )
    share = timer.total / len(seeds) / kmeans_head["time"]
    init_line = (
        'init="kmeans" step (k-means++ and Lloyd on a subsample, all restarts of a fit): '
        f"{timer.total / len(seeds):.2f} s of a {kmeans_head['time']:.2f} s fit ({share:.1%})"
    )
    rows = [
        default,
        *twin_rows,
        kmeans_head,
        _with_solver_share(
            'CCEClustering(loss="shannon")',
            lambda s: CCEClustering(n_clusters=k, loss="shannon", random_state=s, device=device),
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
    print(f"\n### {name}\n\n{table}\n\n{init_line}\n", flush=True)
    return f"### {name}\n\n{table}\n\n{init_line}\n"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument(
        "--threads",
        default="default",
        help="torch threads for every row ('default': not set, torch's default; the "
        "CCEClustering default row then gets a 1-thread twin)",
    )
    parser.add_argument("--device", default="auto", help="CCEClustering's device")
    parser.add_argument("--no-fashion", action="store_true", help="digits only")
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args(argv)
    load = os.getloadavg()[0]
    twin = args.threads == "default"
    if not twin:
        torch.set_num_threads(int(args.threads))
    seeds = list(range(args.seeds))
    opts = dict(device=args.device, twin=twin, threads=args.threads)
    parts = []
    X, y = load_digits(return_X_y=True)
    # one-time costs of a process (torch's optimiser machinery, loading the compiled kernels)
    # are not a fit's: one short warm-up fit first (benchmarks/bench_coldstart.py times them)
    CCEClustering(n_clusters=10, n_init=1, max_epochs=1, device=args.device).fit(X[:500])
    parts.append(
        run(f"digits: {X.shape[0]} x {X.shape[1]}, 10 classes", X, y, seeds, "full", **opts)
    )
    fm = None if args.no_fashion else load_fashion_mnist()
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
                **opts,
            )
        )
    body = "\n".join(
        [
            "## Clustering quality vs KMeans (`benchmarks/bench_vs_kmeans.py`)",
            "",
            f"Measured {datetime.date.today()} by `python benchmarks/bench_vs_kmeans.py "
            f"--seeds {args.seeds} --threads {args.threads}"
            + (f" --device {args.device}" if args.device != "auto" else "")
            + (" --no-fashion" if args.no_fashion else "")
            + f"` (seeds {seeds}; load average {load:.2f} at start).",
            "",
            *machine_lines(("cpu",)),
            "",
            'CCEClustering with its defaults (`init="auto"`: every restart from its own '
            'KMeans start of the head) and with `init="kmeans"` given explicitly; '
            "*acc / ref* and *time / ref* are ratios to "
            "KMeans(n_init=10) in the same run; *smallest cluster* is the smallest cluster "
            "size over all seeds (0 = a collapsed seed); *solver share* is the time of the "
            "pseudo-label solves over the fit time. "
            + (
                "Nothing sets torch's thread count (`--threads default`: what a user gets; "
                "CCEClustering's `n_threads=None` then scopes its own choice to the fit), and "
                "the default row has a twin whose caller set `torch.set_num_threads(1)` "
                "around the fit; the two rows are fitted in turn, seed by seed, in "
                "alternating order, so that a drift of the shared machine's speed during "
                "the run lands on both."
                if twin
                else f"`--threads {args.threads}`: `torch.set_num_threads({args.threads})` "
                "is set once, before the first fit, for every row (with torch 2.14 and "
                "scikit-learn 1.9 on Linux, scikit-learn's OpenMP threads, those of KMeans, "
                "follow it too; GaussianMixture's BLAS threads do not)."
            ),
            "",
            *parts,
        ]
    )
    return publish("bench_vs_kmeans", body, args)


if __name__ == "__main__":
    sys.exit(main())
