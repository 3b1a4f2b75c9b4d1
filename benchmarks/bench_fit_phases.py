"""Where a default fit's time goes, against KMeans(n_init=1)'s (issue 45's time target).

One default ``CCEClustering(n_clusters=K, random_state=seed).fit`` per case, its wall time
split by timers on the engine's functions: the KMeans start (``_build.init_head``), the
pseudo-label solves (``_Batched.solve_all``), the compiled loss-and-gradient pass
(``_fused.collision_step``), the rest of the training steps (forward and backward products,
softmax, the optimiser), the re-seeding of lost clusters (``_batched._relocate``) and what
is left (batching, the final labels, the restart's bookkeeping). Beside it, in the same run,
``KMeans(n_clusters=K, n_init=1, random_state=seed)``: its time and Lloyd iterations, so that
an epoch can be read in Lloyd iterations. Data: ``bench_scale.make_mixture`` (balanced,
spread 0.5, seed 0). One untimed warm-up fit comes first. Threads: torch's default unless
``--threads 1``. Writes the section ``bench_fit_phases`` (``_threads1``) of docs/scale.md.

``--epochs 1,2,3,5,10`` instead fits each case (and digits) with ``max_epochs`` set to each
count and ``n_iter_no_change=None`` (every epoch), then once with the defaults (the epoch
stop of docs/design/026-epoch-stop.md), and writes the accuracy and time of each to the
section ``bench_fit_epochs``.

Usage::

    python benchmarks/bench_fit_phases.py                     # about 3 minutes
    python benchmarks/bench_fit_phases.py --cases 10000:64:100 --no-write
    python benchmarks/bench_fit_phases.py --epochs 1,2,3,5,10    # about 2 minutes
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from contextlib import ExitStack
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _report import apply_threads, machine_lines, publish  # noqa: E402
from bench_scale import make_mixture  # noqa: E402
from bench_vs_kmeans import _Timer  # noqa: E402

DOC = HERE.parent / "docs" / "scale.md"
SECTION = "bench_fit_phases"
CASES = "100000:64:100,100000:256:100,10000:64:1000,100000:64:1000"
PHASES = ("start", "solves", "loss and gradient", "rest of the steps", "re-seeding", "other")


def _phases(X, k, seed):
    """``(seconds per phase, total seconds, epochs)`` of one default fit."""
    from skcce import CCEClustering
    from skcce._engine import _batched, _build, _fused

    timers = {
        "start": _Timer((_build, "init_head")),
        "solves": _Timer((_batched._Batched, "solve_all")),
        "loss and gradient": _Timer((_fused, "collision_step")),
        "steps": _Timer((_batched._Batched, "step")),
        "re-seeding": _Timer((_batched, "_relocate")),
    }
    with ExitStack() as stack, warnings.catch_warnings():
        for timer in timers.values():
            stack.enter_context(timer)
        warnings.simplefilter("ignore")
        t0 = time.perf_counter()
        est = CCEClustering(n_clusters=k, random_state=seed).fit(X)
        total = time.perf_counter() - t0
    seconds = {name: timers[name].total for name in ("start", "solves", "re-seeding")}
    seconds["loss and gradient"] = timers["loss and gradient"].total
    seconds["rest of the steps"] = (
        timers["steps"].total - timers["solves"].total - timers["loss and gradient"].total
    )
    seconds["other"] = total - timers["start"].total - timers["steps"].total
    seconds["other"] -= timers["re-seeding"].total
    return seconds, total, est.n_iter_


def run_case(n, d, k, seed):
    from sklearn.cluster import KMeans

    X, _ = make_mixture(n, d, k, "balanced", seed=seed)
    seconds, total, epochs = _phases(X, k, seed)
    t0 = time.perf_counter()
    km = KMeans(n_clusters=k, n_init=1, random_state=seed).fit(X)
    km_seconds = time.perf_counter() - t0
    print(n, d, k, {p: round(s, 2) for p, s in seconds.items()}, round(total, 2),
          round(km_seconds, 2), km.n_iter_, flush=True)  # fmt: skip
    return seconds, total, epochs, km_seconds, int(km.n_iter_)


def report(rows, threads):
    lines = [
        "## Where a fit's time goes (`benchmarks/bench_fit_phases.py`)",
        "",
        "One default `CCEClustering(n_clusters=K, random_state=0)` fit per case, its wall time "
        "split by timers on the engine's functions, and `KMeans(n_clusters=K, n_init=1)` in "
        "the same run on the same `make_mixture` data (balanced, spread 0.5). **epoch**: the "
        "training's mean seconds per epoch (solves, loss and gradient, rest of the steps), "
        "and in brackets how many of KMeans's mean Lloyd iterations (its time over its "
        f"iterations, seeding included) that is. Threads: {threads}.",
        "",
        "Machine:",
        "",
        *machine_lines(),
        "",
        "| n | d | K | fit s (× KMeans) | " + " | ".join(PHASES)
        + " | epochs | epoch s (Lloyd iterations) | KMeans s, iterations |",
        "|---|---|---|---|" + "---|" * len(PHASES) + "---|---|---|",
    ]  # fmt: skip
    for (n, d, k), (seconds, total, epochs, km_s, km_iter) in rows:
        train = seconds["solves"] + seconds["loss and gradient"] + seconds["rest of the steps"]
        epoch = train / max(epochs, 1)
        cells = " | ".join(f"{seconds[p]:.3g}" for p in PHASES)
        lines.append(
            f"| {n:,} | {d} | {k} | {total:.3g} ({total / km_s:.2g}×) | {cells} | {epochs} | "
            f"{epoch:.3g} ({epoch / (km_s / km_iter):.2g}) | {km_s:.3g}, {km_iter} |"
        )
    return "\n".join(lines)


def run_epochs(case, seed, counts):
    """``[(epochs, accuracy, seconds)]`` of fits of every epoch (``n_iter_no_change=None``)
    with ``max_epochs`` of ``counts``, then of the default fit (its epochs: those it
    trained); ``case`` is "digits" or ``(n, d, K)``."""
    from skcce import CCEClustering
    from skcce.metrics import clustering_accuracy

    if case == "digits":
        from sklearn.datasets import load_digits

        X, y = load_digits(return_X_y=True)
        k = 10
    else:
        X, y = make_mixture(*case, "balanced", seed=seed)
        k = case[2]
    out = []
    for count in [*counts, None]:
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            params = {} if count is None else dict(max_epochs=count, n_iter_no_change=None)
            est = CCEClustering(n_clusters=k, random_state=seed, **params).fit(X)
        seconds = time.perf_counter() - t0
        out.append((est.n_iter_, clustering_accuracy(y, est.labels_), seconds))
    print(case, [(c, round(a, 3), round(t, 2)) for c, a, t in out], flush=True)
    return out


def report_epochs(rows, counts, seed, threads):
    lines = [
        "## Accuracy after each number of epochs (`benchmarks/bench_fit_phases.py --epochs`)",
        "",
        f"`CCEClustering(n_clusters=K, random_state={seed}, max_epochs=E, "
        "n_iter_no_change=None)` (E epochs) with its other defaults, on digits and balanced "
        "`make_mixture` data (spread 0.5): accuracy and wall time of the whole fit for each "
        "E; *default* is the default fit, which ends at its epoch stop (docs/design/"
        f"026-epoch-stop.md) after the epochs shown. Threads: {threads}.",
        "",
        "Machine:",
        "",
        *machine_lines(),
        "",
        "| data | K | " + " | ".join(f"E = {c}: acc, s" for c in counts)
        + " | default: acc, s (epochs) |",
        "|---|---|" + "---|" * (len(counts) + 1),
    ]  # fmt: skip
    for case, out in rows:
        name = "digits" if case == "digits" else f"{case[0]:,} × {case[1]}"
        k = 10 if case == "digits" else case[2]
        cells = " | ".join(f"{a:.3f}, {t:.3g}" for _, a, t in out[:-1])
        epochs, acc, seconds = out[-1]
        lines.append(f"| {name} | {k} | {cells} | {acc:.3f}, {seconds:.3g} ({epochs}) |")
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default=CASES, help="n:d:K, comma-separated")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", default="default", help="'default' or 1")
    parser.add_argument("--epochs", default=None, help="max_epochs counts, comma-separated")
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args(argv)
    threads, suffix = apply_threads(args.threads)
    Xw, _ = make_mixture(2000, 64, 20, "balanced", seed=99)
    _phases(Xw, 20, 0)  # warm-up: one-time costs of the process are not a fit's
    if args.epochs:
        counts = [int(c) for c in args.epochs.split(",")]
        cases = ["digits"] + [tuple(int(v) for v in c.split(":")) for c in args.cases.split(",")]
        rows = [(case, run_epochs(case, args.seed, counts)) for case in cases]
        body = report_epochs(rows, counts, args.seed, threads)
        return publish("bench_fit_epochs" + suffix, body, args, path=DOC, echo=True)
    rows = []
    for case in args.cases.split(","):
        key = tuple(int(v) for v in case.split(":"))
        rows.append((key, run_case(*key, args.seed)))
    return publish(SECTION + suffix, report(rows, threads), args, path=DOC, echo=True)


if __name__ == "__main__":
    raise SystemExit(main())
