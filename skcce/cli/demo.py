"""``skcce demo``: CCEClustering against KMeans on digits (and Fashion-MNIST when installed)."""

from __future__ import annotations

import numpy as np

__all__ = ["add_demo_parser", "run_demo"]


def add_demo_parser(subparsers):
    """Add the ``demo`` sub-command (``func=run_demo``) to an argparse sub-parsers object."""
    demo = subparsers.add_parser(
        "demo",
        help="compare CCEClustering with KMeans on digits (and Fashion-MNIST if installed)",
    )
    demo.add_argument("--seeds", type=int, default=1, help="number of seeds (default 1)")
    demo.add_argument("--digits-only", action="store_true", help="skip Fashion-MNIST")
    demo.add_argument(
        "--threads",
        type=int,
        default=None,
        help="torch CPU threads (default: torch's own; CCEClustering then picks its count)",
    )
    demo.set_defaults(func=run_demo)
    return demo


def load_fashion_mnist():
    """Fashion-MNIST as (70000, 784) float32 pixels in [0, 1] and labels, or None when absent."""
    from skcce.datasets import load_dataset

    try:
        X, y = load_dataset("fashion-mnist")
    except (FileNotFoundError, OSError, ValueError):
        return None
    return X.reshape(len(X), -1).astype(np.float32) / 255.0, y


def run_demo(args) -> int:
    """Fit CCEClustering and KMeans on digits (and Fashion-MNIST when installed); print tables."""
    import time

    import torch
    from sklearn.datasets import load_digits

    from skcce import CCEClustering
    from skcce.cli._compare import evaluate, kmeans_factory, markdown_table

    if args.threads is not None:
        torch.set_num_threads(max(1, args.threads))
    seeds = list(range(args.seeds))
    # one-time costs of a process are not a fit's: torch builds its optimiser machinery and
    # the solver kernels load (the first time after installing: compile, about 15 s)
    t0 = time.perf_counter()
    digits_X, digits_y = load_digits(return_X_y=True)
    CCEClustering(n_clusters=10, n_init=1, max_epochs=1, random_state=0).fit(digits_X[:300])
    print(
        f"start-up of this process (torch's optimiser machinery; loading, or after a new "
        f"install compiling, the solver kernels): {time.perf_counter() - t0:.1f} s, not "
        "counted in the fit times below\n",
        flush=True,
    )
    datasets = [("digits (raw 64-d pixels)", digits_X, digits_y)]
    if not args.digits_only:
        fm = load_fashion_mnist()
        if fm is None:
            print("Fashion-MNIST not found (Debian package dataset-fashion-mnist); skipped.\n")
        else:
            datasets.append(("Fashion-MNIST (70 000 raw 784-d pixels in [0, 1])", *fm))
    for name, X, y in datasets:
        k = len(np.unique(y))
        print(f"## {name}: {X.shape[0]} samples, {k} clusters, seeds {seeds}\n", flush=True)
        rows = [
            evaluate(
                "CCEClustering",
                lambda s, k=k: CCEClustering(n_clusters=k, random_state=s),
                X,
                y,
                seeds,
            ),
            evaluate("KMeans(n_init=10)", kmeans_factory(k), X, y, seeds),
        ]
        print(markdown_table(rows) + "\n", flush=True)
    return 0
