"""``skcce reproduce table1|table2 --dataset D``: rerun the supplement's Tables 1 and 2.

``table1``
    Frozen ImageNet ResNet-50 features (:class:`~skcce.FeatureExtractor`, timm ``resnet50``)
    and a linear head trained with the supplement's section 4.2 settings
    (``get_preset("table1", dataset)``: SGD, lr 0.1, batch 250, 10 epochs, λ 100, weight decay
    0.001 / 0.02 / 0.009 / 0.02 for MNIST / CIFAR-10 / CIFAR-100-20 / STL-10).
``table2``
    VGG-4 (supplement Table 3) trained from scratch on the images
    (``get_preset("table2", dataset)``: Adam, lr 1e-4, batch 250 or 160 for STL-10, 50 epochs,
    weight decay 0.01, 6 runs).

Both losses of the supplement run: (a) ``fairness="forward"`` :math:`KL(\\bar y\\|u)` and (b)
``fairness="reverse"`` :math:`KL(u\\|\\bar y)`, over ``--runs`` seeds (0, 1, ...), one
initialisation per run (``n_init=1``); accuracy is the Hungarian-matched accuracy on every
image of the dataset (train + test splits, the data the model was fitted on), reported as
mean (std) in percent beside the paper's numbers. ``--baselines`` adds, on the same inputs
and seeds: KMeans(n_init=10), self-labeling with Shannon's and with the reverse
cross-entropy (same fairness variants), and SeLa (Sinkhorn–Knopp equipartition,
``solver_options={"method": "sinkhorn"}``, see :mod:`skcce.solvers._sinkhorn`).

CPU-only extras, not in the paper and needing no download: ``--dataset fashion-mnist`` (the
Debian package ``dataset-fashion-mnist``) — for ``table1`` a linear head on the raw pixels
(no ResNet-50), for ``table2`` VGG-4 from scratch — and ``--dataset digits`` (scikit-learn's
8x8 digits, ``table1`` on raw pixels). They use the MNIST settings of each table.
``--subset N`` (a class-stratified subset, the same for every run) and ``--epochs E`` cut the
cost for a CPU budget; both are recorded in the output.

Everything that can fail cheaply is checked before any training: the table and dataset,
``--out`` (writable folder), the device, the data files and the backbone weights. Errors are
one line on stderr with a non-zero exit status, never a traceback.
"""

from __future__ import annotations

import json
import os
import platform
import socket
import sys
import time
import warnings

import numpy as np

from skcce._engine._io import atomic_write
from skcce.cli._common import CommandError, check_output, one_line, positive_int, run_command

__all__ = ["PAPER_RESULTS", "add_reproduce_parser", "method_specs", "run_reproduce"]

PAPER_DATASETS = ("stl10", "cifar10", "cifar100-20", "mnist")
EXTRA_DATASETS = {"table1": ("fashion-mnist", "digits"), "table2": ("fashion-mnist",)}
TABLES = ("table1", "table2")
N_CLUSTERS = {"stl10": 10, "cifar10": 10, "cifar100-20": 20, "mnist": 10}

#: Accuracy (%) mean and std reported in the supplement, Tables 1 and 2, for loss (a) and (b).
PAPER_RESULTS: dict[str, dict[str, dict[str, tuple[float, float]]]] = {
    "table1": {
        "stl10": {"a": (92.32, 6.3), "b": (92.33, 6.4)},
        "cifar10": {"a": (73.51, 6.4), "b": (73.51, 6.3)},
        "cifar100-20": {"a": (43.73, 1.1), "b": (43.72, 1.1)},
        "mnist": {"a": (58.4, 3.2), "b": (58.4, 3.2)},
    },
    "table2": {
        "stl10": {"a": (25.98, 1.0), "b": (25.98, 1.1)},
        "cifar10": {"a": (24.26, 0.8), "b": (24.26, 0.8)},
        "cifar100-20": {"a": (15.13, 0.6), "b": (15.14, 0.5)},
        "mnist": {"a": (95.10, 4.2), "b": (95.11, 4.3)},
    },
}

#: SeLa's sharpness λ_s (its paper's default), used as ``lam`` of the ``"sinkhorn"`` solver.
SELA_LAMBDA = 25.0

_DESCRIPTION = (
    "Rerun the supplement's Table 1 (frozen ImageNet ResNet-50 features + linear head) or "
    "Table 2 (VGG-4 from scratch) with losses (a) and (b), over several seeds, and print "
    "mean (std) accuracy beside the paper's numbers. Paper datasets: "
    f"{', '.join(PAPER_DATASETS)} (download them with --download, or place torchvision's "
    "files under --root). CPU-only extras without download: fashion-mnist (Debian package "
    "dataset-fashion-mnist; table1 = linear head on raw pixels, table2 = VGG-4) and digits "
    "(scikit-learn, table1 on raw pixels)."
)

_EPILOG = (
    "examples: skcce reproduce table1 --dataset cifar10 --weights resnet50.safetensors "
    "--runs 6 --baselines --out t1-cifar10.json | skcce reproduce table1 --dataset digits "
    "--runs 3 --baselines --threads 1 | skcce reproduce table2 --dataset fashion-mnist "
    "--subset 1000 --epochs 3 --runs 1 --threads 1 (a CPU budget: not the paper's protocol)"
)


def method_specs(baselines: bool) -> list[dict]:
    """The methods a run compares, as ``CCEClustering`` overrides.

    Parameters
    ----------
    baselines : bool
        Add KMeans, Shannon-CE and reverse-CE self-labeling and SeLa to the two CCE losses.

    Returns
    -------
    specs : list of dict
        ``key`` (JSON name), ``name`` (table row), ``paper`` ("a", "b" or None: which of the
        paper's rows it is) and ``params`` (``CCEClustering`` keyword arguments, or None for
        KMeans).

    Examples
    --------
    >>> from skcce.cli.reproduce import method_specs
    >>> [m["key"] for m in method_specs(False)]
    ['cce-a', 'cce-b']
    >>> [m["key"] for m in method_specs(True)][2:]
    ['kmeans', 'shannon-a', 'shannon-b', 'reverse-a', 'reverse-b', 'sela']
    """
    specs = [
        {
            "key": "cce-a",
            "name": "CCE (a): H2 + KL(ȳ‖u)",
            "paper": "a",
            "params": {"loss": "collision", "fairness": "forward"},
        },
        {
            "key": "cce-b",
            "name": "CCE (b): H2 + KL(u‖ȳ)",
            "paper": "b",
            "params": {"loss": "collision", "fairness": "reverse"},
        },
    ]
    if not baselines:
        return specs
    specs.append({"key": "kmeans", "name": "KMeans(n_init=10)", "paper": None, "params": None})
    for loss, label in (("shannon", "Shannon CE"), ("reverse", "reverse CE")):
        for tag, fairness, kl in (("a", "forward", "KL(ȳ‖u)"), ("b", "reverse", "KL(u‖ȳ)")):
            specs.append(
                {
                    "key": f"{loss}-{tag}",
                    "name": f"{label} ({tag}): H + {kl}",
                    "paper": None,
                    "params": {"loss": loss, "fairness": fairness},
                }
            )
    specs.append(
        {
            "key": "sela",
            "name": f"SeLa: Sinkhorn equipartition, lambda_s={SELA_LAMBDA:g}",
            "paper": None,
            # SeLa's network step is the plain cross-entropy to its labels: no fairness term
            # on the predictions (the labels are balanced by construction). Sinkhorn stops at
            # a cluster-mass violation ||ybar - u||_1 <= 1e-2 (about one sample of a batch of
            # 250 off balance), a loose tolerance in the spirit of SeLa's own: tighter ones
            # cost thousands of iterations per batch at lambda_s = 25 without changing argmax
            "params": {
                "loss": "shannon",
                "fairness": "reverse",
                "solver_options": {"method": "sinkhorn", "tol": 1e-2, "max_iter": 500},
                "lam": SELA_LAMBDA,
                "fairness_weight": 0.0,
            },
        }
    )
    return specs


# ----------------------------------------------------------------------------------------------
# Command line
# ----------------------------------------------------------------------------------------------
def add_reproduce_parser(subparsers):
    """Add the ``reproduce`` sub-command to an :mod:`argparse` sub-parsers object.

    Usage errors of this sub-command (an unknown table or dataset, a bad number) are one line
    on stderr and exit status 2.

    Parameters
    ----------
    subparsers : argparse._SubParsersAction
        The object returned by ``ArgumentParser.add_subparsers()``.

    Returns
    -------
    parser : argparse.ArgumentParser
        The ``reproduce`` sub-parser (``func=run_reproduce``).

    Examples
    --------
    >>> import argparse
    >>> from skcce.cli.reproduce import add_reproduce_parser
    >>> parser = argparse.ArgumentParser(prog="skcce")
    >>> _ = add_reproduce_parser(parser.add_subparsers(dest="command"))
    >>> args = parser.parse_args(["reproduce", "table1", "--dataset", "digits", "--runs", "2"])
    >>> args.table, args.dataset, args.runs, args.baselines, args.func.__name__
    ('table1', 'digits', 2, False, 'run_reproduce')
    """
    parser = subparsers.add_parser(
        "reproduce",
        help="rerun the paper's Table 1 / Table 2 (and baselines)",
        description=_DESCRIPTION,
        epilog=_EPILOG,
    )

    def one_line_error(message):
        print(f"skcce reproduce: error: {one_line(message)}", file=sys.stderr)
        raise SystemExit(2)

    parser.error = one_line_error
    _add_arguments(parser)
    parser.set_defaults(func=run_reproduce)
    return parser


def _add_arguments(parser):
    datasets = list(PAPER_DATASETS) + ["fashion-mnist", "digits"]
    parser.add_argument("table", choices=TABLES, help="table1 (ResNet-50 + linear) or table2")
    parser.add_argument("--dataset", "-d", required=True, choices=datasets, help="dataset")
    parser.add_argument(
        "--runs", type=positive_int, default=None, help="seeds 0..N-1 (default: preset, 6)"
    )
    parser.add_argument(
        "--baselines",
        action="store_true",
        help="also KMeans, Shannon-CE and reverse-CE self-labeling, and SeLa (Sinkhorn)",
    )
    parser.add_argument("--device", default="auto", help="auto (default), cpu, cuda, cuda:1, ...")
    parser.add_argument(
        "--root", default=None, help="dataset folder (default: $SKCCE_DATA or ~/.cache/...)"
    )
    parser.add_argument(
        "--download", action="store_true", help="fetch a missing paper dataset (torchvision)"
    )
    parser.add_argument(
        "--weights",
        default=None,
        metavar="FILE",
        help="local ImageNet ResNet-50 weights for table1 (.safetensors/.pth) instead of the "
        "Hugging Face Hub",
    )
    parser.add_argument(
        "--out", "-o", default=None, help="write the results as JSON ('-' for stdout)"
    )
    parser.add_argument("--threads", type=positive_int, default=1, help="CPU threads (default 1)")
    parser.add_argument(
        "--subset",
        type=positive_int,
        default=None,
        metavar="N",
        help="a class-stratified subset of N samples (CPU budget; default: all)",
    )
    parser.add_argument(
        "--epochs", type=positive_int, default=None, help="override the preset's epochs"
    )
    parser.add_argument(
        "--backbone",
        default="resnet50.tv_in1k",
        help="timm model of table1's features (default: resnet50.tv_in1k, torchvision's "
        "ImageNet ResNet-50)",
    )
    parser.add_argument(
        "--batch-size", type=positive_int, default=256, help="images per feature batch"
    )


def run_reproduce(args) -> int:
    """Handler of ``skcce reproduce`` for parsed arguments (see :func:`add_reproduce_parser`).

    Parameters
    ----------
    args : argparse.Namespace
        Parsed arguments.

    Returns
    -------
    status : int
        0 on success; 1 on an error, reported as one line on stderr (no traceback);
        130 when interrupted.

    Examples
    --------
    >>> import argparse, tempfile
    >>> from skcce.cli.reproduce import add_reproduce_parser, run_reproduce
    >>> parser = argparse.ArgumentParser(prog="skcce")
    >>> _ = add_reproduce_parser(parser.add_subparsers())
    >>> root = tempfile.mkdtemp()  # an empty data folder: stops at once, says what to do
    >>> run_reproduce(parser.parse_args(["reproduce", "table2", "--dataset", "mnist",
    ...                                  "--root", root]))
    1
    """

    def action():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # sklearn/torch chatter would break the log lines
            _run(args)

    return run_command("skcce reproduce", action)


# ----------------------------------------------------------------------------------------------
# Inputs
# ----------------------------------------------------------------------------------------------
def _preset(table, dataset):
    from skcce.models.presets import get_preset

    return get_preset(table, dataset if dataset in PAPER_DATASETS else "mnist")


def _describe(table, dataset):
    if table == "table2":
        what = "images; VGG-4 (supplement Table 3) trained from scratch"
        if dataset == "fashion-mnist":
            what += " (Fashion-MNIST: not in the paper; MNIST settings)"
        return what
    if dataset == "digits":
        return (
            "scikit-learn digits, raw 64-d pixels; a linear head on raw pixels, not ResNet-50 "
            "features (not in the paper; MNIST settings)"
        )
    if dataset == "fashion-mnist":
        return (
            "Fashion-MNIST raw 784-d pixels in [0, 1]; a linear head on raw pixels, not "
            "ResNet-50 features (not in the paper; MNIST settings)"
        )
    return "frozen ImageNet ResNet-50 features (2048-d, FeatureExtractor) + linear head"


def _missing_data_message(dataset, root, table):
    from skcce.datasets import get_data_home

    where = get_data_home(root)
    if dataset == "fashion-mnist":
        return (
            f"Fashion-MNIST not found (neither Debian's package in /usr/share/datasets/"
            f"fashion-mnist nor {where}/FashionMNIST/raw): install dataset-fashion-mnist "
            f"(apt) or run `skcce reproduce {table} --dataset fashion-mnist --download`"
        )
    return (
        f"dataset {dataset!r} not found in {str(where)!r}: download it with "
        f"`skcce reproduce {table} --dataset {dataset} --download` (needs torchvision and a "
        "network), or put torchvision's files there and pass --root DIR"
    )


def _load_images(args):
    if args.dataset == "digits":
        from sklearn.datasets import load_digits

        X, y = load_digits(return_X_y=True)
        return X.astype(np.float32), y.astype(np.int64)
    from skcce.datasets import load_dataset

    try:
        return load_dataset(args.dataset, root=args.root, download=args.download)
    except FileNotFoundError:
        raise CommandError(_missing_data_message(args.dataset, args.root, args.table)) from None


def _stratified_subset(y, n, seed=0):
    """Indices of a class-stratified subset of ``n`` of the ``len(y)`` samples (sorted)."""
    from sklearn.model_selection import train_test_split

    if n >= len(y):
        return np.arange(len(y))
    idx, _ = train_test_split(np.arange(len(y)), train_size=n, stratify=y, random_state=seed)
    return np.sort(idx)


def _check_weights(args):
    uses_backbone = args.table == "table1" and args.dataset in PAPER_DATASETS
    if args.weights is None:
        return uses_backbone
    if not uses_backbone:
        raise CommandError(
            "--weights is only used by table1 on the paper's datasets "
            f"({', '.join(PAPER_DATASETS)}); {args.table} --dataset {args.dataset} has no "
            "pretrained backbone"
        )
    if not os.path.isfile(args.weights):
        raise CommandError(f"weights file not found: {args.weights!r}")
    return True


def _hub_has_weights(model_name):
    """True when timm can get ``model_name``'s weights: cached locally, or the Hub answers.

    Checked before loading so that an offline machine stops at once instead of retrying
    downloads for a minute.
    """
    from urllib.parse import urlparse

    try:
        import huggingface_hub.constants as hub
        from huggingface_hub import try_to_load_from_cache
        from timm.models import get_pretrained_cfg
    except ImportError:
        return True  # let FeatureExtractor report the missing extra
    cfg = get_pretrained_cfg(model_name)
    repo = getattr(cfg, "hf_hub_id", None)
    if not repo:
        return True  # not a Hub model: timm's own error will say what is wrong
    for filename in ("model.safetensors", "pytorch_model.bin", "open_clip_pytorch_model.bin"):
        if isinstance(try_to_load_from_cache(repo, filename), str):
            return True
    if hub.HF_HUB_OFFLINE:
        return False
    url = urlparse(hub.ENDPOINT)
    try:
        socket.create_connection((url.hostname, url.port or 443), timeout=5).close()
    except OSError:
        return False
    return True


def _load_backbone(args):
    """Load the ResNet-50 before any image is processed, so missing weights stop at once."""
    from skcce._feature_extraction import FeatureExtractor, WeightsUnavailableError

    message = (
        f"ImageNet weights of timm {args.backbone!r} unavailable (not cached, Hugging Face Hub "
        "unreachable): pass --weights FILE (a ResNet-50 .safetensors/.pth file, e.g. "
        f"model.safetensors from huggingface.co/timm/{args.backbone.split(':')[-1]}), or "
        "point HF_HOME at a populated cache and set HF_HUB_OFFLINE=1"
    )
    if args.weights is None and not _hub_has_weights(args.backbone):
        raise CommandError(message)
    extractor = FeatureExtractor(
        args.backbone, weights=args.weights, batch_size=args.batch_size, device=args.device
    )
    try:
        return extractor.fit(np.zeros((1, 8, 8, 3), dtype=np.uint8))
    except WeightsUnavailableError:
        raise CommandError(message) from None


def _inputs(args, needs_backbone):
    """(X for the network, X for KMeans, y) with the subset applied; data before weights."""
    X, y = _load_images(args)
    if args.subset is not None:
        keep = _stratified_subset(y, args.subset)
        X, y = X[keep], y[keep]
    if args.table == "table2":
        flat = X.reshape(len(X), -1).astype(np.float32) / 255.0
        return X, flat, y
    if needs_backbone:
        backbone = _load_backbone(args)
        print(f"extracting {args.backbone} features of {len(X)} images ...", file=sys.stderr)
        feats = backbone.transform(X)
        return feats, feats, y
    if args.dataset == "digits":
        return X, X, y
    flat = X.reshape(len(X), -1).astype(np.float32) / 255.0
    return flat, flat, y


# ----------------------------------------------------------------------------------------------
# Running
# ----------------------------------------------------------------------------------------------
def _default_fairness_weight():
    from skcce import CCEClustering

    return CCEClustering().fairness_weight


def _fit_one(spec, seed, X, X_flat, settings, k, device):
    from sklearn.cluster import KMeans

    from skcce import CCEClustering

    if spec["params"] is None:
        return KMeans(k, n_init=10, random_state=seed).fit_predict(X_flat)
    params = dict(settings)
    params.update(spec["params"])
    est = CCEClustering(n_clusters=k, device=device, random_state=seed, **params)
    return est.fit_predict(X)


def _summary(spec, accs, nmis, times, errors, paper):
    ok = [a for a in accs if a is not None]
    out = {
        "key": spec["key"],
        "name": spec["name"],
        "params": spec["params"],
        "accuracy": [None if a is None else round(100 * a, 2) for a in accs],
        "mean": round(100 * float(np.mean(ok)), 2) if ok else None,
        "std": round(100 * float(np.std(ok)), 2) if ok else None,
        "nmi_mean": round(float(np.mean(nmis)), 4) if nmis else None,
        "fit_time_s": [round(t, 2) for t in times],
        "errors": errors,
    }
    if paper is not None:
        out["paper_mean"], out["paper_std"] = paper
    return out


def _hardware(device):
    import torch

    info = {
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "torch_threads": torch.get_num_threads(),
        "device": str(device),
    }
    if device.type == "cuda":
        info["gpu"] = torch.cuda.get_device_name(device)
    return info


def _write_json(out, payload):
    """Write ``payload`` as JSON atomically (:func:`skcce._engine._io.atomic_write`)."""
    text = json.dumps(payload, indent=2) + "\n"
    atomic_write(out, lambda handle: handle.write(text))


def _fmt(mean, std):
    return "–" if mean is None else f"{mean:.2f} ({std:.2f})"


def markdown_results(payload) -> str:
    """The results of a run as a markdown table shaped like the paper's (accuracy in %).

    Parameters
    ----------
    payload : dict
        The JSON document of a run (``methods`` with ``name``, ``mean``, ``std``,
        ``accuracy``, ``fit_time_s`` and optionally ``paper_mean``/``paper_std``).

    Returns
    -------
    table : str

    Examples
    --------
    >>> from skcce.cli.reproduce import markdown_results
    >>> row = {"name": "CCE (a)", "mean": 80.0, "std": 1.0, "accuracy": [79.0, 81.0],
    ...        "fit_time_s": [1.0, 3.0], "paper_mean": 58.4, "paper_std": 3.2}
    >>> print(markdown_results({"methods": [row]}).splitlines()[-1])
    | CCE (a) | 80.00 (1.00) | 79.0, 81.0 | 58.40 (3.20) | 2.0 |
    """
    lines = [
        "| method | ours: accuracy % mean (std) | per run | paper: accuracy % mean (std) "
        "| fit time (s, mean) |",
        "|---|---|---|---|---|",
    ]
    for m in payload["methods"]:
        runs = ", ".join("failed" if a is None else f"{a:.1f}" for a in m["accuracy"])
        paper = _fmt(m.get("paper_mean"), m.get("paper_std"))
        t = f"{np.mean(m['fit_time_s']):.1f}" if m["fit_time_s"] else "–"
        lines.append(f"| {m['name']} | {_fmt(m['mean'], m['std'])} | {runs} | {paper} | {t} |")
    return "\n".join(lines)


def _run(args):
    from threadpoolctl import threadpool_limits

    if args.dataset not in PAPER_DATASETS and args.dataset not in EXTRA_DATASETS[args.table]:
        raise CommandError(
            f"{args.table} does not run on {args.dataset!r} (8x8 digits are too small for "
            f"VGG-4); choose from {', '.join(PAPER_DATASETS + EXTRA_DATASETS[args.table])}"
        )
    if args.out is not None:
        check_output(args.out)
    import torch

    from skcce._engine._device import resolve_device

    device = resolve_device(args.device)
    torch.set_num_threads(args.threads)
    needs_backbone = _check_weights(args)
    started = time.perf_counter()
    with threadpool_limits(limits=args.threads):
        X, X_flat, y = _inputs(args, needs_backbone)
        _run_methods(args, device, started, X, X_flat, y)


def _run_methods(args, device, started, X, X_flat, y):
    from sklearn.metrics import normalized_mutual_info_score

    from skcce.metrics import clustering_accuracy

    settings = _preset(args.table, args.dataset)
    runs = args.runs or settings["n_runs"]
    del settings["n_runs"]
    if args.epochs is not None:
        settings["max_epochs"] = args.epochs
    # one initialisation per run (the paper's runs are random inits); the fairness weight on
    # the predictions is CCEClustering's default, our reading of section 4.2's "1.3"
    settings["n_init"] = 1
    settings["fairness_weight"] = _default_fairness_weight()
    k = N_CLUSTERS.get(args.dataset, 10)
    paper = PAPER_RESULTS[args.table].get(args.dataset)
    payload = {
        "table": args.table,
        "dataset": args.dataset,
        "inputs": _describe(args.table, args.dataset),
        "n_samples": int(len(y)),
        "n_clusters": k,
        "subset": args.subset,
        "runs": runs,
        "seeds": list(range(runs)),
        "settings": settings,
        "arguments": {
            key: value for key, value in vars(args).items() if key not in ("func", "command")
        },
        "hardware": _hardware(device),
        "methods": [],
        "complete": False,
    }
    title = f"{args.table} on {args.dataset}: {payload['inputs']}"
    print(f"# {title}\n# {len(y)} samples, {k} clusters, seeds 0..{runs - 1}", flush=True)
    for spec in method_specs(args.baselines):
        accs, nmis, times, errors = [], [], [], []
        for seed in range(runs):
            t0 = time.perf_counter()
            try:
                labels = _fit_one(spec, seed, X, X_flat, settings, k, device)
            except (FloatingPointError, ValueError, RuntimeError) as exc:
                # a diverged run counts as failed (reported) rather than stopping the table
                accs.append(None)
                errors.append(f"seed {seed}: {one_line(str(exc))}")
                times.append(time.perf_counter() - t0)
                print(f"  {spec['key']} seed {seed}: failed ({errors[-1]})", file=sys.stderr)
                continue
            times.append(time.perf_counter() - t0)
            accs.append(clustering_accuracy(y, labels))
            nmis.append(normalized_mutual_info_score(y, labels))
            print(
                f"  {spec['key']} seed {seed}: accuracy {100 * accs[-1]:.2f} % ({times[-1]:.1f} s)",
                file=sys.stderr,
                flush=True,
            )
        ref = paper[spec["paper"]] if paper is not None and spec["paper"] else None
        payload["methods"].append(_summary(spec, accs, nmis, times, errors, ref))
        payload["wall_time_s"] = round(time.perf_counter() - started, 1)
        if args.out not in (None, "-"):
            _write_json(args.out, payload)  # partial results survive an interruption
    payload["complete"] = True
    payload["wall_time_s"] = round(time.perf_counter() - started, 1)
    print("\n" + markdown_results(payload))
    print(f"\nwall time {payload['wall_time_s']:.1f} s on {payload['hardware']['device']}")
    if args.out == "-":
        print(json.dumps(payload, indent=2))
    elif args.out is not None:
        _write_json(args.out, payload)
        print(f"wrote {args.out}", file=sys.stderr)
