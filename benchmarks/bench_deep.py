"""VGG-4 trained from random weights on Fashion-MNIST images: CCEClustering(model="vgg4") vs KMeans.

Two protocols (``--protocol``):

``full`` (a GPU machine)
    All 70 000 Fashion-MNIST images (28x28 grey, uint8) and the supplement's Table 2
    settings for the 28x28 grey column of Table 3 (:func:`skcce.models.get_preset`
    ``("table2", "mnist")``: Adam, learning rate 1e-4, batch 250, 50 epochs, weight decay
    0.01, λ 100, 6 runs). Fashion-MNIST has exactly MNIST's image format, so the MNIST preset
    applies unchanged. Goal: accuracy >= 0.65.
``cpu`` (the default; 2 shared CPU cores, within 20 minutes including KMeans)
    A stratified random subset of the images (``--n-samples``, drawn once with
    ``--subset-seed``) and a shorter, tuned schedule (see ``CPU_SETTINGS``). Target:
    accuracy >= KMeans + 0.10 with no collapsed seed (no empty cluster).

Beside the tuned protocol, a second row fits ``CCEClustering(n_clusters=10, model="vgg4",
max_epochs=10)`` with nothing else set (``--defaults-epochs``): the model-aware ``"auto"``
defaults (issue 12), which the fitted ``optimizer_``, ``learning_rate_``, ... attributes
report. ``--rows`` picks the rows; ``--jobs`` fits that many seeds at once, in separate
processes of ``--threads`` torch threads each.

Each seed is one CCEClustering fit (``n_init=1``: the seeds are the runs), evaluated on the
subset it was trained on (clustering is transductive) by accuracy (Hungarian matching), NMI
and ARI. KMeans(n_init=10) runs on the same images as raw pixels in [0, 1] (784 features)
with the same seeds. Training throughput is samples per second of the training epochs
(``history_[*]["time"]``; with augmentation each sample also gets an augmented forward and
backward pass), wall time is the whole ``fit`` (training plus the final prediction).

The script prints the tables and writes them, with the machine and the exact command, to the
``bench_deep`` section of ``docs/benchmarks.md`` (``--no-write`` to skip).

Usage::

    python benchmarks/bench_deep.py                         # CPU protocol, 3 seeds
    python benchmarks/bench_deep.py --protocol full --device cuda   # GPU, 6 seeds
"""

from __future__ import annotations

import argparse
import concurrent.futures
import datetime
import multiprocessing
import shlex
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import torch
from sklearn.exceptions import ConvergenceWarning
from sklearn.metrics import adjusted_rand_score, normalized_mutual_info_score
from sklearn.model_selection import train_test_split

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _report import machine_lines, publish  # noqa: E402

from skcce import CCEClustering  # noqa: E402
from skcce._engine._device import resolve_device  # noqa: E402
from skcce.cli._compare import evaluate, kmeans_factory, markdown_table  # noqa: E402
from skcce.datasets import load_dataset  # noqa: E402
from skcce.metrics import clustering_accuracy  # noqa: E402
from skcce.models import get_preset  # noqa: E402

#: CPU protocol: subset size, seeds and the CCEClustering settings that differ from the
#: Table 2 preset (chosen to fit 3 seeds plus KMeans in 20 minutes on 2 shared cores).
CPU_SETTINGS = {
    "n_samples": 10000,
    "seeds": 3,
    "estimator": {
        "learning_rate": 3e-4,
        "batch_size": 100,
        "max_epochs": 4,
        "n_init": 1,
        "augment": "default",
        "augment_weight": 0.5,
    },
}


def protocol_settings(protocol, overrides):
    """CCEClustering keyword arguments, subset size and number of seeds of a protocol.

    Parameters
    ----------
    protocol : {"full", "cpu"}
        ``"full"``: the Table 2 preset (``get_preset("table2", "mnist")``) on all images;
        ``"cpu"``: the same preset updated with ``CPU_SETTINGS["estimator"]``.
    overrides : dict
        Command-line values (``None`` entries are ignored) replacing any of the above.

    Returns
    -------
    kwargs : dict
        CCEClustering keyword arguments (``n_clusters`` and ``random_state`` excluded).
    n_samples : int or None
        Subset size; None means all images.
    n_seeds : int
        Number of runs.

    Examples
    --------
    >>> kw, n, s = protocol_settings("full", {})
    >>> kw["learning_rate"], kw["batch_size"], kw["max_epochs"], n, s
    (0.0001, 250, 50, None, 6)
    """
    preset = get_preset("table2", "mnist")
    n_seeds = preset.pop("n_runs")
    kwargs = dict(preset, n_init=1)
    n_samples = None
    if protocol == "cpu":
        kwargs.update(CPU_SETTINGS["estimator"])
        n_samples = CPU_SETTINGS["n_samples"]
        n_seeds = CPU_SETTINGS["seeds"]
    for key, value in overrides.items():
        if value is None:
            continue
        if key == "n_samples":
            n_samples = value or None
        elif key == "seeds":
            n_seeds = value
        else:
            kwargs[key] = value
    if kwargs.get("augment") == "none":
        kwargs["augment"] = None
    return kwargs, n_samples, n_seeds


def subset(X, y, n_samples, seed):
    """A class-stratified random subset of ``n_samples`` images (all of them if None).

    Parameters
    ----------
    X : ndarray of shape (N, H, W)
    y : ndarray of shape (N,)
    n_samples : int or None
    seed : int
        Seed of the draw.

    Returns
    -------
    X_sub, y_sub : ndarray
        The subset, in the original order of the images.

    Examples
    --------
    >>> X, y = np.zeros((100, 2, 2), np.uint8), np.repeat(np.arange(10), 10)
    >>> Xs, ys = subset(X, y, 20, seed=0)
    >>> Xs.shape, np.bincount(ys).tolist()
    ((20, 2, 2), [2, 2, 2, 2, 2, 2, 2, 2, 2, 2])
    """
    if n_samples is None or n_samples >= len(X):
        return X, y
    idx, _ = train_test_split(
        np.arange(len(X)), train_size=n_samples, stratify=y, random_state=seed
    )
    idx = np.sort(idx)
    return X[idx], y[idx]


def _fit_seed(X, kwargs, seed, k, threads):
    """One CCEClustering fit (run in a worker process): labels, history, resolved settings."""
    torch.set_num_threads(threads)
    t0 = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConvergenceWarning)
        est = CCEClustering(n_clusters=k, random_state=seed, **kwargs).fit(X)
    wall = time.perf_counter() - t0
    resolved = {
        name: getattr(est, name + "_")
        for name in ("optimizer", "learning_rate", "weight_decay", "batch_size", "augment")
    }
    resolved["n_init"] = est.n_init_
    return {
        "labels": est.labels_,
        "history": est.history_,
        "mi": float(est.train_score_),
        "wall_s": wall,
        "resolved": resolved,
        "warnings": [str(w.message) for w in caught],
    }


def run_parallel(X, y, rows, seeds, k, jobs, threads):
    """Fit every (row, seed) in ``jobs`` worker processes; per row the summary and per-seed.

    Parameters
    ----------
    X : ndarray of shape (N, H, W), uint8
    y : ndarray of shape (N,)
        True classes, for scoring only.
    rows : list of (name, kwargs)
    seeds : list of int
    k : int
    jobs, threads : int
        Worker processes, and torch threads in each.

    Returns
    -------
    results : list of (row, per_seed, resolved)
        ``row`` as :func:`skcce._compare.evaluate`'s (``time`` is the mean wall time of a
        fit, measured inside its worker, so it includes any contention between workers);
        ``per_seed`` as in :func:`run_cce`; ``resolved`` the fitted ``*_`` settings of the
        first seed.
    """
    tasks = {}
    # spawned workers: a forked child cannot use CUDA once the parent touched it
    spawn = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(max_workers=jobs, mp_context=spawn) as pool:
        for r, (_, kwargs) in enumerate(rows):
            for seed in seeds:
                tasks[(r, seed)] = pool.submit(_fit_seed, X, kwargs, seed, k, threads)
        done = {key: fut.result() for key, fut in tasks.items()}
    results = []
    for r, (name, _) in enumerate(rows):
        per_seed, warns = [], []
        for seed in seeds:
            fit = done[(r, seed)]
            labels, history = fit["labels"], fit["history"]
            train_s = float(sum(h["time"] for h in history))
            per_seed.append(
                {
                    "seed": seed,
                    "acc": clustering_accuracy(y, labels),
                    "nmi": normalized_mutual_info_score(y, labels),
                    "ari": adjusted_rand_score(y, labels),
                    "samples_per_s": len(X) * len(history) / train_s,
                    "train_s": train_s,
                    "wall_s": fit["wall_s"],
                    "mi": fit["mi"],
                    "smallest": int(np.bincount(labels, minlength=k).min()),
                    "final_loss": history[-1]["loss"],
                }
            )
            warns += fit["warnings"]
        row = {
            "name": name,
            "acc": float(np.mean([p["acc"] for p in per_seed])),
            "acc_std": float(np.std([p["acc"] for p in per_seed])),
            "accs": [round(float(p["acc"]), 4) for p in per_seed],
            "nmi": float(np.mean([p["nmi"] for p in per_seed])),
            "ari": float(np.mean([p["ari"] for p in per_seed])),
            "time": float(np.mean([p["wall_s"] for p in per_seed])),
            "min_cluster": int(min(p["smallest"] for p in per_seed)),
            "warnings": warns,
        }
        results.append((row, per_seed, done[(r, seeds[0])]["resolved"]))
    return results


def run_cce(X, y, kwargs, seeds, k):
    """Fit CCEClustering once per seed; per-seed metrics, throughput and the summary row.

    Parameters
    ----------
    X : ndarray of shape (N, H, W), uint8
    y : ndarray of shape (N,)
        True classes, for scoring only.
    kwargs : dict
        CCEClustering keyword arguments.
    seeds : list of int
    k : int
        Number of clusters.

    Returns
    -------
    row : dict
        :func:`skcce.cli._compare.evaluate`'s summary row.
    per_seed : list of dict
        ``seed``, ``acc``, ``nmi``, ``ari``, ``samples_per_s`` and ``train_s`` (training
        epochs of the kept restart), ``wall_s`` (the whole fit, all restarts, plus scoring),
        ``mi`` (the label-free score of the kept restart), ``smallest``, ``final_loss``.
    """
    fitted, stamps = [], []

    def make(seed):
        est = CCEClustering(n_clusters=k, random_state=seed, **kwargs)
        fitted.append(est)
        stamps.append(time.perf_counter())  # evaluate fits right after make: wall per seed
        return est

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConvergenceWarning)
        row = evaluate('CCEClustering(model="vgg4")', make, X, y, seeds)
    stamps.append(time.perf_counter())
    per_seed = []
    for i, (seed, est) in enumerate(zip(seeds, fitted, strict=True)):
        labels = est.labels_
        train_s = float(sum(h["time"] for h in est.history_))
        per_seed.append(
            {
                "seed": seed,
                "acc": clustering_accuracy(y, labels),
                "nmi": normalized_mutual_info_score(y, labels),
                "ari": adjusted_rand_score(y, labels),
                "samples_per_s": len(X) * est.n_iter_ / train_s,
                "train_s": train_s,
                "wall_s": stamps[i + 1] - stamps[i],
                "mi": float(est.train_score_),
                "smallest": int(np.bincount(labels, minlength=k).min()),
                "final_loss": est.history_[-1]["loss"],
            }
        )
    row["warnings"] = [str(w.message) for w in caught]
    return row, per_seed


def per_seed_table(per_seed):
    """Markdown table of :func:`run_cce`'s per-seed results.

    Parameters
    ----------
    per_seed : list of dict

    Returns
    -------
    table : str

    Examples
    --------
    >>> print(per_seed_table([dict(seed=0, acc=0.5, nmi=0.4, ari=0.3, samples_per_s=60.0,
    ...     train_s=100.0, wall_s=210.0, mi=1.5, smallest=12, final_loss=0.25)]).splitlines()[2])
    | 0 | 0.500 | 0.400 | 0.300 | 60 | 100 | 210 | 1.50 | 12 | 0.250 |
    """
    lines = [
        "| seed | accuracy | NMI | ARI | training samples/s | training time (s) "
        "| fit wall time (s) | label-free MI | smallest cluster | final loss |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in per_seed:
        lines.append(
            f"| {r['seed']} | {r['acc']:.3f} | {r['nmi']:.3f} | {r['ari']:.3f} "
            f"| {r['samples_per_s']:.0f} | {r['train_s']:.0f} | {r['wall_s']:.0f} "
            f"| {r['mi']:.2f} | {r['smallest']} "
            f"| {r['final_loss']:.3f} |"
        )
    return "\n".join(lines)


def _settings_text(kwargs):
    shown = {k: v for k, v in kwargs.items() if k != "model"}
    return ", ".join(f"{k}={v!r}" for k, v in shown.items())


def _defaults_name(epochs):
    return f'CCEClustering(model="vgg4", max_epochs={epochs})'


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--protocol", choices=("cpu", "full"), default="cpu")
    parser.add_argument("--seeds", type=int, default=None, help="number of runs (seeds 0..n-1)")
    parser.add_argument("--n-samples", type=int, default=None, help="subset size (0: all)")
    parser.add_argument("--subset-seed", type=int, default=0)
    parser.add_argument("--epochs", dest="max_epochs", type=int, default=None)
    parser.add_argument("--lr", dest="learning_rate", type=float, default=None)
    parser.add_argument("--batch-size", type=int, default=None)
    parser.add_argument("--lam", type=float, default=None)
    parser.add_argument("--weight-decay", type=float, default=None)
    parser.add_argument("--fairness-weight", type=float, default=None)
    parser.add_argument("--augment", choices=("default", "none"), default=None)
    parser.add_argument("--augment-weight", type=float, default=None)
    parser.add_argument(
        "--rows",
        choices=("both", "tuned", "defaults"),
        default="both",
        help="the tuned protocol, the defaults row (model='vgg4', max_epochs only), or both",
    )
    parser.add_argument("--defaults-epochs", type=int, default=10)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads per fit")
    parser.add_argument("--jobs", type=int, default=1, help="fits run at once (processes)")
    parser.add_argument("--no-kmeans", action="store_true")
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args(argv)
    command = "python benchmarks/bench_deep.py " + shlex.join(
        sys.argv[1:] if argv is None else list(argv)
    )
    torch.set_num_threads(args.threads)
    overrides = {
        name: getattr(args, name)
        for name in (
            "seeds",
            "n_samples",
            "max_epochs",
            "learning_rate",
            "batch_size",
            "lam",
            "weight_decay",
            "fairness_weight",
            "augment",
            "augment_weight",
        )
    }
    kwargs, n_samples, n_seeds = protocol_settings(args.protocol, overrides)
    kwargs["device"] = args.device
    seeds = list(range(n_seeds))
    t_start = time.perf_counter()

    X_all, y_all = load_dataset("fashion-mnist")
    X, y = subset(X_all, y_all, n_samples, args.subset_seed)
    k = len(np.unique(y))
    print(f"Fashion-MNIST {X.shape}, {k} classes; {args.protocol} protocol; seeds {seeds}")
    plan = []
    if args.rows in ("both", "defaults"):
        defaults = {"model": "vgg4", "max_epochs": args.defaults_epochs, "device": args.device}
        plan.append((_defaults_name(args.defaults_epochs), defaults))
    if args.rows in ("both", "tuned"):
        plan.append(('CCEClustering(model="vgg4", tuned)', kwargs))
        print(f"tuned settings: {_settings_text(kwargs)}", flush=True)
    results = run_parallel(X, y, plan, seeds, k, args.jobs, args.threads)
    for (row, per_seed, resolved), (_, kw) in zip(results, plan, strict=True):
        print(f"\n{row['name']}: {_settings_text(kw)}; resolved {resolved}")
        print(per_seed_table(per_seed), flush=True)
    rows = [r[0] for r in results]
    if not args.no_kmeans:
        X_flat = X.reshape(len(X), -1).astype(np.float32) / 255.0
        rows.append(evaluate("KMeans(n_init=10)", kmeans_factory(k), X_flat, y, seeds))
    wall = time.perf_counter() - t_start
    summary = markdown_table(rows) if not args.no_kmeans else markdown_table(rows, reference="")
    print(f"\n{summary}\n\ntotal wall time {wall:.0f} s", flush=True)

    km = rows[-1] if not args.no_kmeans else None
    verdicts = []
    for row, per_seed, _ in results:
        collapsed = [r["seed"] for r in per_seed if r["smallest"] == 0]
        line = f"{row['name']}: collapsed seeds (an empty cluster): {collapsed or 'none'}"
        if km is not None and args.protocol == "cpu":
            gain = row["acc"] - km["acc"]
            target = "met" if gain >= 0.10 and not collapsed else "NOT met"
            line += f"; mean accuracy gain over KMeans {gain:+.3f} (target +0.10: {target})"
        if args.protocol == "full":
            goal = "met" if row["acc"] >= 0.65 else "NOT met"
            line += f"; mean accuracy {row['acc']:.3f} (goal 0.65: {goal})"
        verdicts.append(line)
    for line in verdicts:
        print(line)

    device = str(resolve_device(args.device))
    subset_text = (
        f"all {len(X)} images"
        if n_samples is None or n_samples >= len(X_all)
        else f"a class-stratified random subset of {len(X)} of the {len(X_all)} images "
        f"(`train_test_split(..., stratify=y, random_state={args.subset_seed})`)"
    )
    described = []
    for (_, _, resolved), (name, kw) in zip(results, plan, strict=True):
        if name.startswith('CCEClustering(model="vgg4", max_epochs'):
            text = (
                f'- *{name}*: no other argument; the `"auto"` settings resolved to '
                f"{_settings_text(resolved)} (`optimizer_`, `learning_rate_`, ... of the "
                "fitted estimators), lam=100 and augment_weight=0.5 (the parameter defaults)."
            )
        else:
            text = (
                f'- *{name}*: CCEClustering(model="vgg4", {_settings_text(kw)}); the Table 2 '
                'preset (`get_preset("table2", "mnist")`) is Adam, learning_rate=1e-4, '
                "batch_size=250, max_epochs=50, weight_decay=0.01, lam=100"
                + (
                    "; the CPU protocol changes only what these settings show."
                    if args.protocol == "cpu"
                    else "."
                )
            )
        described.append(text)
    per_seed_parts = []
    for row, per_seed, _ in results:
        per_seed_parts += [f"Per seed, {row['name']}:", "", per_seed_table(per_seed), ""]
    body = "\n".join(
        [
            "## VGG-4 trained from random weights on Fashion-MNIST (`benchmarks/bench_deep.py`"
            + (f", `--rows {args.rows}`)" if args.rows != "both" else ")"),
            "",
            f"Measured {datetime.date.today()} by `{command}` "
            f"({args.protocol} protocol, seeds {seeds}, total wall time {wall:.0f} s; "
            f"{args.jobs} fit(s) at once, {args.threads} torch thread(s) each).",
            "",
            *machine_lines((device,)),
            "",
            f'Data: {subset_text}, 28x28 grey uint8 (`load_dataset("fashion-mnist")`, '
            "train + test). Every method is scored on the images it was fitted on.",
            "",
            *described,
            "",
            "KMeans(n_init=10) on the same images as raw pixels in [0, 1], same seeds. "
            "*fit time* is the mean wall time of one fit (with several fits at once, each "
            "measured in its own process, so contention between them is included); "
            "*training samples/s* counts the "
            "samples of the training epochs (with augmentation each also gets an augmented "
            "forward and backward pass). Per seed, *training* columns are the epochs of the "
            "restart that was kept, *fit wall time* covers all `n_init` restarts, and "
            "*label-free MI* is the score (`train_score_`) that chose the kept restart.",
            "",
            markdown_table(rows) if km is not None else markdown_table(rows, reference=""),
            "",
            *per_seed_parts,
            *[f"- {line}" for line in verdicts],
            "",
            "Full protocol (all 70 000 images, the Table 2 settings, 6 seeds; needs a GPU): "
            "`python benchmarks/bench_deep.py --protocol full --device cuda`.",
        ]
    )
    # the defaults row alone gets its own section, so the tuned table stays beside it
    section = "bench_deep_defaults" if args.rows == "defaults" else "bench_deep"
    return publish(section, body, args)


if __name__ == "__main__":
    sys.exit(main())
