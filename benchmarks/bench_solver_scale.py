"""Growth of the exact pseudo-label solve with the number of clusters K.

For K in {10, 30, 100, 300, 1000, 2000} with N = max(250, 4K) rows (the engine's batches at
large K), and N = 250 for every K <= 250 (today's batch), this times one certified solve of the
collision loss with reverse fairness (lam = 100, float32, the default tolerance 1e-5), by the
engine's path (:func:`skcce.solvers._solve`: no input validation), for:

* **new default**: ``method="newton"``, the compiled interior point whose K x K Newton system
  is factored densely while ``K^2 <= 48 N`` and solved matrix-free by conjugate gradients
  otherwise (:mod:`skcce.solvers._kernels._schur_cg`);
* **old default**: ``method="newton-dense"``, the same interior point with the system always
  factored densely (the default before the matrix-free system);
* **EM**: ``method="em"``, the paper's Algorithm 1 inner loop, compiled.

Predictions: **mixture** (softmax of a nearest-centre linear head on a Gaussian mixture of K
centres at pairwise distance about 3 with unit noise, 64 dimensions: the confidence falls as K
grows, as a head's does), **zipf** (the same head, rows drawn from the centres with probability
1 / rank: many clusters have no row of their own in the batch) and **flat** (softmax of 0.1 x
standard normal logits: near-uniform rows). Each cell is the best of a few runs (one for runs
over a second), after a warm-up that loads the compiled kernels; a method is skipped at larger
K once a solve has taken more than ``--budget`` seconds. The exponent ``b`` is the
least-squares slope of log(time per row) on log(K) over the N = max(250, 4K) cells that ran
(b <= 1: time per row at most linear in K).

Usage::

    python benchmarks/bench_solver_scale.py               # 1 thread and torch's default
    python benchmarks/bench_solver_scale.py --threads 1   # one setting only
    python benchmarks/bench_solver_scale.py --quick --no-write
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _report import machine_lines, publish  # noqa: E402

from skcce.solvers import _solve, make_problem, solve_pseudo_labels  # noqa: E402

DOC = Path(__file__).resolve().parents[1] / "docs" / "scale.md"
TITLE = "# Scale: growth with n, d and K\n"
SECTION = "bench_solver_scale"
_DEFAULT_THREADS = torch.get_num_threads()  # before anything changes it
METHODS = {"new default": "newton", "old default": "newton-dense", "EM": "em"}
LAM = 100.0


def mixture_probs(n, k, seed=0, d=64, dist=3.0, sizes=None):
    """Softmax of a nearest-centre linear head on a Gaussian mixture of ``k`` centres; rows
    drawn uniformly over the centres, or with probabilities proportional to ``sizes``."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((k, d)) * dist / np.sqrt(2 * d)
    p = None if sizes is None else np.asarray(sizes, dtype=np.float64) / np.sum(sizes)
    x = centres[rng.choice(k, n, p=p)] + rng.standard_normal((n, d))
    logits = x @ centres.T - 0.5 * (centres * centres).sum(1)
    return torch.softmax(torch.from_numpy(logits), dim=1).float()


def zipf_probs(n, k, seed=0):
    """:func:`mixture_probs` with rows drawn from centres of probability 1 / rank: at
    N = 4K many centres hold no row of the batch, as in a training batch of a long-tailed
    mixture, and the fairness term must fill them from other classes' rows."""
    return mixture_probs(n, k, seed, sizes=1.0 / np.arange(1, k + 1))


def flat_probs(n, k, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.softmax(0.1 * torch.randn(n, k, generator=g, dtype=torch.float64), 1).float()


PROBS = {"mixture": mixture_probs, "zipf": zipf_probs, "flat": flat_probs}


def cells(ks):
    """(N, K) pairs: N = max(250, 4K) for every K, and N = 250 for K <= 250."""
    out = []
    for k in ks:
        out.append((max(250, 4 * k), k))
        if k <= 250 and 4 * k > 250:
            out.append((250, k))
    return out


def time_solve(probs, method, budget):
    """(best seconds, result) of a few solves (one when a solve takes over a second), by the
    engine's path: :func:`skcce.solvers._solve` on a problem of validated rows."""
    problem = make_problem(probs, lam=LAM, fairness="reverse", prior=None, loss="collision")
    best, res = np.inf, None
    for rep in range(5):
        t0 = time.perf_counter()
        res = _solve(problem, method, tol=1e-5)
        best = min(best, time.perf_counter() - t0)
        if best > 1.0 or rep >= 2 and best * (rep + 1) > 0.2 * budget:
            break
    return best, res


def run(ks, threads, budget, echo):
    torch.set_num_threads(threads)
    warm = mixture_probs(300, 8)
    for method in METHODS.values():
        solve_pseudo_labels(warm, lam=LAM, method=method)
    rows = []
    for kind, make in PROBS.items():
        slow = set()  # methods past the budget: skipped at larger K
        for n, k in cells(ks):
            probs = make(n, k)
            for name, method in METHODS.items():
                if name in slow:
                    rows.append(dict(n=n, k=k, kind=kind, threads=threads, name=name, t=None))
                    continue
                t, res = time_solve(probs, method, budget)
                if t > budget:
                    slow.add(name)
                row = dict(n=n, k=k, kind=kind, threads=threads, name=name, t=t,
                           n_iter=res.n_iter, ok=res.converged)  # fmt: skip
                rows.append(row)
                if echo:
                    print(
                        f"{kind:8s} N={n:5d} K={k:5d} threads={threads} {name:12s} "
                        f"{t * 1e3:10.1f} ms  {t / n * 1e6:8.2f} us/row  "
                        f"iter {res.n_iter:5d}  certified {res.converged}",
                        flush=True,
                    )
    return rows


def exponent(rows, kind, threads, name):
    pts = [
        (r["k"], r["t"] / r["n"]) for r in rows
        if r["kind"] == kind and r["threads"] == threads and r["name"] == name
        and r["t"] is not None and r["n"] == max(250, 4 * r["k"])
    ]  # fmt: skip
    if len(pts) < 2:
        return None, len(pts)
    k, t = np.log([p[0] for p in pts]), np.log([p[1] for p in pts])
    return float(np.polyfit(k, t, 1)[0]), len(pts)


def report(rows, settings, ks):
    lines = [
        "## Pseudo-label solve against K (`benchmarks/bench_solver_scale.py`)",
        "",
        "One certified solve of the collision loss, reverse fairness, lam = 100, float32, "
        "tolerance 1e-5 (the default), from the predictions themselves (no warm start), "
        "through the engine's path (`skcce.solvers._solve`, no input validation). "
        '**new default**: `method="newton"` (interior point; its K x K Newton system factored '
        "densely while K² ≤ 48 N, matrix-free by conjugate gradients otherwise); **old "
        'default**: `method="newton-dense"` (always factored, the default before); **EM**: '
        '`method="em"` (the paper\'s, compiled). Predictions: **mixture** (softmax of a '
        "nearest-centre head on a Gaussian mixture of K centres, 64 dimensions), **zipf** (the "
        "same head, rows drawn from the centres with probability 1 / rank, so that many "
        "clusters have no row of their own in the batch) and **flat** "
        '(softmax of 0.1 × N(0, 1) logits). Best of up to 5 runs; "—": skipped after a solve '
        "of that method took more than the budget at a smaller K. The kernels are "
        'single-threaded; "threads" is torch\'s setting (its share is the conversions).',
        "",
        "Machine:",
        "",
        *machine_lines(),
        "",
        "### Growth exponent of time per row in K",
        "",
        "Least-squares slope b of log(time / N) on log(K) over the cells with N = max(250, 4K) "
        f"(K = {', '.join(map(str, ks))}) that ran.",
        "",
        "| predictions | threads | " + " | ".join(f"{m}: b (cells)" for m in METHODS) + " |",
        "|---|---|" + "---|" * len(METHODS),
    ]
    for kind in PROBS:
        for threads in settings:
            cols = []
            for name in METHODS:
                b, m = exponent(rows, kind, threads, name)
                cols.append("—" if b is None else f"{b:.2f} ({m})")
            lines.append(f"| {kind} | {threads} | " + " | ".join(cols) + " |")
    lines += [
        "",
        "### Time per solve",
        "",
        "Milliseconds per solve (microseconds per row in brackets), iterations, and whether "
        "the result is certified (✓).",
        "",
        "| predictions | threads | N | K | "
        + " | ".join(f"{m}: ms (µs/row) | iter" for m in METHODS) + " |",
        "|---|---|---|---|" + "---|---|" * len(METHODS),
    ]  # fmt: skip
    keys = sorted({(r["kind"], r["threads"], r["k"], r["n"]) for r in rows},
                  key=lambda x: (list(PROBS).index(x[0]), x[1], x[2], -x[3]))  # fmt: skip
    for kind, threads, k, n in keys:
        cols = []
        for name in METHODS:
            r = next(r for r in rows if (r["kind"], r["threads"], r["k"], r["n"], r["name"])
                     == (kind, threads, k, n, name))  # fmt: skip
            if r["t"] is None:
                cols.append("— | —")
            else:
                mark = "✓" if r["ok"] else "✗"
                cols.append(f"{r['t'] * 1e3:.3g} ({r['t'] / n * 1e6:.3g}) | {r['n_iter']} {mark}")
        lines.append(f"| {kind} | {threads} | {n} | {k} | " + " | ".join(cols) + " |")
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--threads", type=int, default=None,
        help="torch threads: 1, or 0 for torch's default; both when omitted",
    )  # fmt: skip
    parser.add_argument("--quick", action="store_true", help="K up to 300, a smaller budget")
    parser.add_argument("--budget", type=float, default=None, help="seconds per solve")
    parser.add_argument("--no-write", action="store_true", help="print only")
    args = parser.parse_args(argv)
    ks = [10, 30, 100, 300] if args.quick else [10, 30, 100, 300, 1000, 2000]
    budget = args.budget if args.budget is not None else (1.0 if args.quick else 4.0)
    if args.threads is None:
        settings = [1, _DEFAULT_THREADS]
    else:
        settings = [args.threads if args.threads > 0 else _DEFAULT_THREADS]
    rows = []
    for threads in dict.fromkeys(settings):
        rows += run(ks, threads, budget, echo=True)
    body = report(rows, list(dict.fromkeys(settings)), ks)
    if not args.no_write and not DOC.exists():
        DOC.parent.mkdir(parents=True, exist_ok=True)
        DOC.write_text(TITLE)
    return publish(SECTION, body, args, path=DOC, echo=True)


if __name__ == "__main__":
    raise SystemExit(main())
