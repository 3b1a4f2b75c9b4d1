"""The pseudo-label solves of a default fit's first batches, at many clusters.

A default ``CCEClustering(n_clusters=K, max_epochs=1, random_state=seed)`` is fitted on a
balanced Gaussian mixture of ``bench_scale.make_mixture`` (n x 64, float32); the batches'
problems are taken where the engine hands them to the compiled solver
(:func:`skcce.solvers._compiled.solve_stack`), with the fairness term's carried mass the engine
passes (the window of :mod:`skcce._engine._marginal`), the first ``--batches`` of them kept.
Each is then solved again alone, one thread, by the compiled interior point
(:func:`skcce.solvers._kernels._interior.ipm_supports`, the default method and tolerance),
from the start the engine uses, twice: under the **batch** term (no carry: the supplement's
``KL(u || ybar)`` of the batch alone) and under the **window** term the fit solves. For each
batch the table gives its rows N, the number of **starved** clusters (no row of the batch
predicts them most), and for each term the solve's time, iterations and certificate, the
mean support width of the rows at the end (classes the interior point still holds a row to),
how many classes a row of the solution holds above 1e-9 (the batch term spreads the starved
clusters' mass thinly over many rows), and the clusters the labels leave (nearly) empty
(column sum below 0.5 rows).

Cases (``--cases``): ``n:K:batch`` triples, ``batch`` "auto" for the default batch size
(max(250, 4 K) rows) or a number of rows. The default cases compare K = 100 and K = 1000 on
10 000 rows at the default batch, and K = 1000 with the whole data as one batch (no starved
cluster, no carry). Writes the section ``bench_batch_solve`` of docs/scale.md.

Usage::

    python benchmarks/bench_batch_solve.py                 # about 3 minutes
    python benchmarks/bench_batch_solve.py --cases 100000:1000:auto --batches 2 --no-write
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _report import machine_lines, publish  # noqa: E402
from bench_scale import make_mixture  # noqa: E402

DOC = HERE.parent / "docs" / "scale.md"
SECTION = "bench_batch_solve"
CASES = "10000:100:auto,10000:1000:auto,10000:1000:10000"


class _Stop(Exception):
    """Raised in the fit once the batches asked for are kept."""


def first_batches(n, k, batch, n_batches, seed):
    """The first ``n_batches`` problems ``(probs (N, K) float64, lam, tol, carry (K,))`` of
    a default one-epoch fit on ``make_mixture(n, 64, k)`` (carry zeros where the engine
    passes none)."""
    from skcce import CCEClustering
    from skcce.solvers import _compiled

    X, _ = make_mixture(n, 64, k, "balanced", seed=seed)
    kept = []
    solve_stack = _compiled.solve_stack

    def keep(probs, **kw):
        carry = kw.get("carry")
        for r, p in enumerate(probs):
            c = np.zeros(p.shape[1]) if carry is None else np.array(carry[r], dtype=np.float64)
            kept.append((p.double().numpy().copy(), float(kw["lam"]), float(kw["tol"]), c))
        if len(kept) >= n_batches:
            raise _Stop
        return solve_stack(probs, **kw)

    est = CCEClustering(n_clusters=k, max_epochs=1, n_init=1, random_state=seed,
                        batch_size=batch)  # fmt: skip
    _compiled.solve_stack = keep
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            est.fit(X)
    except _Stop:
        pass
    finally:
        _compiled.solve_stack = solve_stack
    return kept[:n_batches]


def solve_one(probs, lam, tol, carry):
    """Time and describe one certified solve of a batch under the carry ``carry`` (see the
    module docstring)."""
    from skcce.solvers._kernels._entry import start_labels
    from skcce.solvers._kernels._interior import ipm_supports

    n, k = probs.shape
    u = np.full(k, 1.0 / k)
    start = start_labels(probs, u, False)
    t0 = time.perf_counter()
    supports, _, _, n_iter, certified, _, _ = ipm_supports(probs, carry, u, lam, False, start,
                                                           tol, 100, 0)  # fmt: skip
    seconds = time.perf_counter() - t0
    labels = np.zeros((n, k))
    for i in range(n):
        c = supports.count[i]
        labels[i, supports.classes[i, :c]] = supports.y[i, :c]
    labels /= labels.sum(1, keepdims=True)
    return dict(seconds=seconds, n_iter=int(n_iter), ok=bool(certified),
                width=float(supports.count.mean()), above_9=float((labels > 1e-9).sum(1).mean()),
                empty=int((labels.sum(0) < 0.5).sum()))  # fmt: skip


def report(rows, seed):
    lines = [
        "## A default fit's batch solves at many clusters (`benchmarks/bench_batch_solve.py`)",
        "",
        "The first batches of a default one-epoch `CCEClustering` fit on a balanced mixture of "
        f"`make_mixture` (64 features, seed {seed}), each solved again alone by the compiled "
        "interior point (default method and tolerance, one thread), under the supplement's "
        "**batch** fairness term and under the **window** term the fit solves (the batch plus "
        "the running marginal of earlier batches, `max(N, ceil(K H_K))` rows). **starved**: "
        "clusters that no row of the batch predicts most; **width**: mean classes a row's "
        "support holds at the end; **> 1e-9**: mean classes a row of the solution holds above "
        "that mass; **empty**: clusters whose column sum in the labels is below half a row.",
        "",
        "Machine:",
        "",
        *machine_lines(),
        "",
        "| n | K | batch | N | starved | term | time (s) | iterations | certified | width "
        "| > 1e-9 | empty |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        for term in ("batch", "window"):
            t = r[term]
            if t is None:
                continue
            lines.append(
                f"| {r['case_n']:,} | {r['k']} | {r['spec']} | {r['n']:,} | {r['starved']} | "
                f"{term} | {t['seconds']:.3g} | {t['n_iter']} | {'✓' if t['ok'] else '✗'} | "
                f"{t['width']:.1f} | {t['above_9']:.1f} | {t['empty']} |"
            )
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default=CASES, help="n:K:batch triples, comma-separated")
    parser.add_argument("--batches", type=int, default=2, help="batches solved per case")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-write", action="store_true", help="print only")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    rows = []
    for case in args.cases.split(","):
        n, k, batch = case.split(":")
        batch = batch if batch == "auto" else int(batch)
        for probs, lam, tol, carry in first_batches(int(n), int(k), batch, args.batches,
                                                    args.seed):  # fmt: skip
            row = dict(case_n=int(n), k=int(k), spec=batch, n=probs.shape[0],
                       starved=int(int(k) - np.unique(probs.argmax(1)).size),
                       batch=solve_one(probs, lam, tol, np.zeros_like(carry)),
                       window=solve_one(probs, lam, tol, carry) if carry.any() else None,
                       )  # fmt: skip
            print(row, flush=True)
            rows.append(row)
    return publish(SECTION, report(rows, args.seed), args, path=DOC, echo=True)


if __name__ == "__main__":
    raise SystemExit(main())
