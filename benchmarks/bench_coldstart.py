"""Cold start: ``skcce --help``, and a fresh process that imports skcce and fits digits.

Each row is a new Python process. The fit rows time, inside that process, in this order:
``import torch``; ``import sklearn.base`` (what any scikit-learn estimator imports; timed on
its own, so that the ``import skcce`` column is skcce's own share); ``import skcce``; loading
the compiled kernels (compiling them when numba's on-disk cache is empty, reading it
otherwise: one solve of a (250, 10) problem, and one call of the linear head's compiled loss
step, :mod:`skcce._engine._fused`, which the first fit would otherwise compile); the first
``CCEClustering(n_clusters=10).fit(digits)`` (defaults); and a second, warm fit. The first
process gets an empty numba cache (``NUMBA_CACHE_DIR`` in a new temporary folder, as after a
fresh install); the second reuses it. ``skcce --help`` is timed from outside (wall time of the
whole process, best of 3).

Usage: ``python benchmarks/bench_coldstart.py [--no-write]``
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _report import machine_lines, publish  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent

CHILD = r"""
import json, time
t0 = time.perf_counter()
import torch
t1 = time.perf_counter()
import sklearn.base
t1b = time.perf_counter()
import skcce
from skcce import CCEClustering
t2 = time.perf_counter()
import numpy as np
from skcce.solvers import solve_pseudo_labels
g = torch.Generator().manual_seed(0)
probs = torch.softmax(3 * torch.randn(250, 10, generator=g, dtype=torch.float64), dim=1)
solve_pseudo_labels(probs, lam=100.0)
from skcce._engine._fused import collision_step  # the linear head's compiled loss step
logits = torch.randn(1, 10, 4).numpy()
sig = torch.softmax(torch.from_numpy(logits), dim=1).numpy()
collision_step(logits, sig, np.full((1, 4, 10), 0.1), np.full(10, 0.1), "reverse", 1.0)
t3 = time.perf_counter()
from sklearn.datasets import load_digits
X, _ = load_digits(return_X_y=True)
t4 = time.perf_counter()
CCEClustering(n_clusters=10, random_state=0).fit(X)
t5 = time.perf_counter()
CCEClustering(n_clusters=10, random_state=0).fit(X)
t6 = time.perf_counter()
print(json.dumps({"torch": t1 - t0, "sklearn": t1b - t1, "skcce": t2 - t1b,
                  "kernels": t3 - t2,
                  "first_fit": t5 - t4, "warm_fit": t6 - t5, "total": t5 - t0 - (t4 - t3)}))
"""


def _child(cache_dir):
    env = dict(os.environ, NUMBA_CACHE_DIR=cache_dir)
    out = subprocess.run(
        [sys.executable, "-c", CHILD], env=env, cwd=ROOT, capture_output=True, text=True
    )
    if out.returncode != 0:
        raise RuntimeError(out.stderr)
    return json.loads(out.stdout.strip().splitlines()[-1])


def _help_time(repeats=3):
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-m", "skcce", "--help"], cwd=ROOT, capture_output=True)
        best = min(best, time.perf_counter() - t0)
    return best


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args(argv)
    load = os.getloadavg()[0]
    help_s = _help_time()
    with tempfile.TemporaryDirectory() as cache:
        rows = [("first process, empty numba cache", _child(cache))]
        rows.append(("second process, same cache", _child(cache)))
    lines = [
        "| process | `import torch` | `import sklearn.base` | `import skcce` (the rest) "
        "| kernels (compile or load) | first fit | warm fit | first fit / warm fit "
        "| to the end of the first fit | `import torch` + 2 x warm fit + kernels "
        "| the same + `import sklearn.base` |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, r in rows:
        bound = r["torch"] + 2 * r["warm_fit"] + r["kernels"]
        lines.append(
            f"| {name} | {r['torch']:.2f} s | {r['sklearn']:.2f} s | {r['skcce']:.2f} s "
            f"| {r['kernels']:.2f} s | {r['first_fit']:.2f} s | {r['warm_fit']:.2f} s "
            f"| {r['first_fit'] / r['warm_fit']:.2f} | {r['total']:.2f} s "
            f"| {bound:.2f} s | {bound + r['sklearn']:.2f} s |"
        )
    body = "\n".join(
        [
            "## Cold start (`benchmarks/bench_coldstart.py`)",
            "",
            f"Measured {datetime.date.today()} by `python benchmarks/bench_coldstart.py` "
            f"(load average {load:.2f} at start).",
            "",
            *machine_lines(("cpu",)),
            "",
            f"`python -m skcce --help`: **{help_s:.2f} s** (wall time of the process, best of "
            "3; torch is not imported; 6.2-8.1 s before the lazy imports of issue 14, when "
            "`import skcce` imported torch). `tests/test_cli.py` checks in a subprocess that "
            "`import skcce` and the `--help` of every subcommand leave torch unimported.",
            "",
            "A fresh process that imports skcce and fits digits twice with the defaults "
            "(torch's default threads); the time to the end of the first fit leaves out loading "
            "digits. `import sklearn.base` is timed on its own before `import skcce`: it is "
            "scikit-learn's own import (scipy.stats, and pandas when installed, through "
            "`sklearn.utils.fixes`), which any scikit-learn estimator pays; the last column "
            "adds it to the bound. The "
            "linear head's default fit builds no `torch.optim` optimiser (its SGD is applied "
            "in place), so it no longer pays torch's import of `torch._dynamo` (about 1.4 s, "
            "which the first optimiser of a process triggers; deep models still pay it).",
            "",
            *lines,
        ]
    )
    print(body)
    return publish("bench_coldstart", body, args)


if __name__ == "__main__":
    sys.exit(main())
